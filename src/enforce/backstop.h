#pragma once

/*
 * backstop: the node-side kill policy for gpumem containers (docs/sharing.md "Backstop"), as a
 * pure state machine. The daemon (src/daemon/daemon-backstop.c) feeds it every interval with
 * what it measured: for each container holding gpumem units on a GPU, its limit there, its
 * usage there, and its processes on that GPU. The engine remembers, per (container, GPU), since
 * when the container has been above limit x tolerance; once that lasted `after`, it names the
 * container's largest process on that GPU to kill. The daemon re-checks and kills; the engine
 * does no I/O, reads no clock (the caller passes the time) and logs nothing.
 *
 * What it never does: choose a process of a sample whose limit is 0 (a container holding no
 * gpumem on that GPU), or any process the caller did not put in a sample (a process outside
 * every gpumem allocation never reaches it).
 *
 * Memory: one record per (container, GPU) above its threshold in the last round, at most
 * BACKSTOP_TRACK_MAX; a pair that drops below, or is absent from a round, is forgotten.
 * Owned by its creator; one thread at a time (the daemon's loop).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "util.h"

/* Pairs watched at once; a round with more over their threshold watches the first ones. */
#define BACKSTOP_TRACK_MAX 1024
/* A container's key: "namespace/pod/container" (63 + 1 + 253 + 1 + 63, and a NUL). */
#define BACKSTOP_KEY_MAX 384

struct backstop_opts {
	unsigned tolerance_percent; /* >= 100: over means used > limit x tolerance / 100 */
	usec_t after;		    /* over this long, continuously, before a kill */
};

/* A process of a container on a GPU. */
struct backstop_proc {
	uint32_t pid;	     /* host PID */
	uint64_t start_time; /* /proc/<pid>/stat field 22 (clock ticks since boot) */
	uint64_t used;	     /* bytes on this GPU; UINT64_MAX: the driver does not say */
};

/* One container on one GPU, for one round. */
struct backstop_sample {
	const char *key;  /* the container: BACKSTOP_KEY_MAX - 1 bytes at most */
	const char *uuid; /* the GPU */
	uint64_t limit;	  /* bytes granted on this GPU; 0: none (never chosen) */
	uint64_t used;	  /* the container's bytes on this GPU */
	const struct backstop_proc *procs;
	size_t n_procs;
};

/* A process to kill: the daemon re-checks pid, start time and container before it acts. */
struct backstop_decision {
	char key[BACKSTOP_KEY_MAX];
	char uuid[GPU_UUID_MAX];
	uint32_t pid;
	uint64_t start_time;
	uint64_t proc_used; /* the process's bytes (0 when the driver does not say) */
	uint64_t used;	    /* the container's */
	uint64_t limit;
	usec_t over_for; /* how long it has been above its threshold */
};

struct backstop;

/* Returns 0 or -ENOMEM (-EINVAL: tolerance below 100). */
int backstop_new(const struct backstop_opts *o, struct backstop **ret) WARN_UNUSED;
/* New options (a reload): the records stay. -EINVAL as backstop_new(). */
int backstop_set_opts(struct backstop *b, const struct backstop_opts *o) WARN_UNUSED;
/* NULL-safe; returns NULL. */
struct backstop *backstop_free(struct backstop *b);

/*
 * One round at @now (CLOCK_MONOTONIC µs, not decreasing): @s holds every (container, GPU) the
 * daemon measured (@n entries; each key and uuid pair at most once). Pairs above their threshold
 * are watched from the first round they are seen above; pairs below, or missing, are
 * forgotten. When at least one pair has been above for `after` or longer, the one above longest
 * (then the first in @s) gives a decision: its largest process with a known PID (ties: the
 * first listed); its watch restarts at @now, so the next kill of that pair needs `after` again.
 * Returns 1 with *@ret filled, 0 for no decision (a due pair with no process also gives none),
 * or -ENOMEM (the records are then as before the round).
 */
int backstop_round(struct backstop *b, const struct backstop_sample *s, size_t n, usec_t now,
		   struct backstop_decision *ret) WARN_UNUSED;

/* Forgets every watch (the backstop stopped acting: its times no longer hold). */
void backstop_forget(struct backstop *b);

/* Pairs watched now (above their threshold in the last round). */
size_t backstop_watched(const struct backstop *b);

/* True when @used is above @limit x @tolerance_percent / 100 (exact, no overflow). */
bool backstop_over(uint64_t used, uint64_t limit, unsigned tolerance_percent);

/*
 * backstop-host.c (reads the host, unlike the rest): whether this process is in the host's PID
 * namespace, the one where NVML's PIDs are ours to signal: <@host_proc>/self/status has one
 * number on its NSpid line (readable without capabilities), else, on a kernel without NSpid,
 * /proc/self/ns/pid and <@host_proc>/1/ns/pid name the same namespace (device and inode).
 * Returns 1 yes, 0 no, or -errno when it cannot be told (a missing or unreadable file or
 * link); *@why (a static string) says
 * why not, for 0 and < 0. The daemon and doctor ask it; any thread.
 */
int backstop_host_pid(const char *host_proc, const char **why);
