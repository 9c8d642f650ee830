#pragma once

/*
 * backoff: the one exponential backoff, for every retry that waits longer each time it fails
 * (kubelet registration, watches that cannot be added, the CDI spec's writes and its contest
 * with another writer, listeners, NVML re-initialisation, ...). The delays are first, first *
 * factor, first * factor^2, ..., each capped at max (and first itself too, when max is the
 * smaller: a caller may lower max between steps). No jitter: no caller has it. Reset after a
 * success, and the next delay is first again. An embedded struct with no resources; the
 * caller's thread only (each caller keeps its own).
 */

#include <stdbool.h>

#include "util.h"

struct backoff {
	usec_t first;	 /* the first delay after a reset */
	usec_t max;	 /* no delay is longer; may be changed between steps */
	unsigned factor; /* each delay is the last one times this (>= 1) */
	usec_t last;	 /* the delay next() returned last; 0: reset, the next one is first */
	bool grew;	 /* the delay next() returned last was longer than the one before */
};

/* A reset backoff of @first, times @factor each step, up to @max. */
#define BACKOFF_INIT(first_, factor_, max_) \
	((struct backoff){ .first = (first_), .factor = (factor_), .max = (max_) })

/*
 * The delay to wait now, and a step further: first after a reset, else the last one times
 * factor, never more than max (a product past what usec_t holds is max too). Sets what
 * backoff_grew() says.
 */
usec_t backoff_next(struct backoff *b);

/* Back to the start, after a success: the next delay is first. */
void backoff_reset(struct backoff *b);

/* Whether backoff_next() was called since the last reset: a retry is under way. */
bool backoff_started(const struct backoff *b);

/*
 * Whether the delay backoff_next() returned last was the first after a reset or longer than
 * the one before: a caller that logs once per step logs then, and is quiet once the delay
 * stays at max.
 */
bool backoff_grew(const struct backoff *b);
