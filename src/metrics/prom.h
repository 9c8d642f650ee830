#pragma once

/*
 * prom: a writer of the Prometheus text exposition format 0.0.4, plus the gzip and
 * Accept-Encoding helpers of the /metrics endpoint. No I/O, no logging, no threads of its
 * own: one struct prom per exposition, used by one thread.
 *
 * The writer keeps the output valid whatever the caller passes: label values and HELP text
 * are escaped (label values: \\, \", \n; HELP: \\, \n), bytes that are not UTF-8 become U+FFFD
 * (valid UTF-8 is kept byte for byte), and a family or sample that would break the format
 * (a bad metric or label name, a duplicate family, a histogram out of shape, too many labels)
 * is left out and recorded in p->err. Errors are sticky: the first one stays in p->err. After
 * -EINVAL or -E2BIG the output is a valid exposition without the offending lines; after
 * -ENOMEM nothing more is written and the output is incomplete.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The Content-Type of the format. */
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

enum prom_type {
	PROM_GAUGE,
	PROM_COUNTER,
	PROM_HISTOGRAM,
	PROM_UNTYPED,
};

/*
 * A label set: borrowed pointers, valid until the sample is written. A NULL value is written
 * as "". Zero-initialise, then push.
 */
#define PROM_LABELS_MAX 16
struct prom_labels {
	const char *name[PROM_LABELS_MAX];
	const char *value[PROM_LABELS_MAX];
	unsigned n; /* may exceed PROM_LABELS_MAX: pushes past it were dropped */
};

/* Adds a label. Past PROM_LABELS_MAX it is ignored, and a sample using @l fails with -E2BIG. */
void prom_labels_push(struct prom_labels *l, const char *name, const char *value);

struct prom_name;

struct prom {
	struct buf *out; /* appended to; owned by the caller */
	int err;	 /* first error, sticky: 0, -EINVAL, -E2BIG or -ENOMEM */
	/* private */
	struct prom_name *names; /* families started in this exposition */
	size_t n_names, cap_names;
	int cur;   /* index of the current family in names, -1 when its samples are dropped */
	bool full; /* -ENOMEM seen: writes nothing more */
};

/* Starts an exposition appending to @out. Call prom_finish() at the end, always. */
void prom_init(struct prom *p, struct buf *out);

/*
 * Starts family @name: "# HELP" (when @help is not NULL) and "# TYPE". A name started
 * already in this exposition (histograms also claim <name>_bucket, _sum and _count), or an
 * invalid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), sets -EINVAL and the family's samples are
 * dropped.
 */
void prom_family(struct prom *p, const char *name, enum prom_type type, const char *help);

/*
 * One sample of the current family: its name + @suffix, labels @l (may be NULL), @value.
 * @suffix is NULL, except in a histogram family: "_bucket" (with an "le" label), "_sum" or
 * "_count". Label names must match [a-zA-Z_][a-zA-Z0-9_]*, not start with "__" and not repeat.
 * Values: NaN, +Inf, -Inf; integers up to 2^53 in plain digits; any other number in the
 * shortest %.15g/%.16g/%.17g form that reads back as the same double.
 */
void prom_sample(struct prom *p, const char *suffix, const struct prom_labels *l, double value);

/*
 * A whole histogram sample set of the current (histogram) family: cumulative
 * _bucket{le="..."} for each of the @n upper @bounds (finite, strictly increasing) and for
 * "+Inf", then _sum and _count. @counts are per bucket (not cumulative), n + 1 of them: the
 * last counts the observations above every bound. @l must not hold "le".
 */
void prom_histogram(struct prom *p, const struct prom_labels *l, const double *bounds, size_t n,
		    const uint64_t *counts, double sum);

/* Ends the exposition and frees the writer's state (not @out). Returns p->err. */
int prom_finish(struct prom *p);

/* gzip (RFC 1952) of @in into @out (its old content replaced). Returns 0, -ENOMEM or -EIO. */
int prom_gzip(const void *in, size_t len, struct buf *out) WARN_UNUSED;

/*
 * True when an Accept-Encoding header value accepts gzip: "gzip" or "x-gzip" with a q above
 * 0, or else "*" with a q above 0. Case-insensitive; NULL accepts nothing.
 */
bool prom_accepts_gzip(const char *accept_encoding);
