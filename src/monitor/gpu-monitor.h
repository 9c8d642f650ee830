#pragma once

/*
 * The GPU monitor: the one owner of the GPU backend. It opens the backend, discovers the
 * GPUs, probes them, waits for their events, re-initialises the library after a driver
 * change, and turns all of it into per-GPU health on the loop.
 *
 * Threads. The loop thread never calls the backend. A worker thread makes every backend call
 * (open, discover, distance, probe, reinit, events_open/close), one job at a time; an event
 * thread only waits in ops->event_wait, in long slices. Both hand their results to the loop
 * through a loop_wake; every callback below runs on the loop thread.
 *
 * A backend call that hangs (a wedged driver) never blocks the loop: after call_timeout the
 * GPUs it concerns turn unhealthy with reason "nvml call <function> hung", serving goes on,
 * and they recover when the call returns. A probe or sample concerns one GPU: its thread is
 * left in the call and a new worker thread judges the other GPUs (GPU_WORKER_MAX_THREADS in
 * all; at that bound, or for a call of the library as a whole, the worker is held and every
 * GPU is unhealthy until a call returns). gpu_monitor_free() never waits for a thread that is
 * inside the backend: such a thread is left behind with the state it needs (the process is
 * about to exit), so a stop takes no longer than the threads that are idle take to notice.
 */

#include <stdbool.h>
#include <stdint.h>

#include "gpu.h"
#include "util.h"

struct loop;
struct gpu_backend;
struct gpu_backend_opts;
struct gpu_monitor;

enum gpu_health {
	GPU_HEALTHY,
	GPU_UNHEALTHY,
};

struct gpu_monitor_opts {
	/* 5 s (0: default): probe period of GPUs without working events */
	usec_t poll_interval;
	/*
	 * 60 s (0: default): probe period of GPUs whose events work. Their faults arrive as
	 * events; the probe only catches a GPU that stopped answering without saying so.
	 */
	usec_t event_poll_interval;
	usec_t recovery_quiet;	      /* 0: off. >0: an unhealthy GPU that probes fine and saw no
	                                critical XID for this long becomes healthy again */
	const uint64_t *ignored_xids; /* on top of the built-in application XIDs */
	unsigned n_ignored_xids;
	/* DP_DISABLE_HEALTHCHECKS=all: no checks at all (no event thread, no probes) */
	bool disable_all;
	/* DP_DISABLE_HEALTHCHECKS=xids: every XID ignored (counted); ECC, lost, probes still count */
	bool disable_xids;
	/* 10 s (0: default): a backend call running longer is reported hung */
	usec_t call_timeout;
	/* 30 s (0: default): one event wait; a thread in it wakes this often when idle */
	usec_t event_slice;
};

struct gpu_monitor_stats {
	uint64_t events; /* every event read, ignored ones included */
	uint64_t xids;	 /* critical XIDs acted on */
	uint64_t xids_ignored;
	uint64_t ecc_single;
	uint64_t ecc_double;
	uint64_t lost; /* GPUs found lost (event or probe) */
	uint64_t wait_errors;
	uint64_t reinits; /* successful re-initialisations */
	uint64_t reinit_failures;
	uint64_t probes;
	uint64_t probe_failures;
	uint64_t recoveries;	  /* unhealthy -> healthy */
	uint64_t jobs;		  /* worker jobs run */
	uint64_t hung_calls;	  /* backend calls that ran past call_timeout */
	uint64_t worker_limit;	  /* hung calls nobody could take the place of (the bound) */
	uint64_t probes_deferred; /* probe rounds due while the worker was held by a hung call */
};

/* A GPU's health changed (index into the GPUs of the last discovery). */
typedef void gpu_health_fn(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
			   const char *reason, void *userdata);
/*
 * A discovery finished. @r < 0: it failed (@err says why; the monitor keeps the GPUs it had).
 * Else @info holds the GPUs, now the monitor's indices (the callee may take the contents and
 * zero it; otherwise the monitor releases them), @distance an n x n topology matrix or NULL
 * (same ownership rule: set *distance = NULL to take it). Health of GPUs that were there
 * before is carried over by UUID; new GPUs start healthy.
 */
typedef void gpu_discovered_fn(struct gpu_monitor *m, int r, struct gpu_info *info, int **distance,
			       const char *err, void *userdata);

/*
 * Creates the monitor and its worker thread. The first discovery opens the backend with
 * @backend, which the worker copies (it may outlive the caller: a call stuck in the driver
 * is never joined). Returns 0 or -errno.
 */
int gpu_monitor_new(struct loop *l, const struct gpu_backend_opts *backend,
		    const struct gpu_monitor_opts *o, gpu_health_fn *health_fn,
		    gpu_discovered_fn *discovered_fn, void *userdata,
		    struct gpu_monitor **ret) WARN_UNUSED;

/*
 * Asks for a discovery (asynchronous; requests made while one waits or runs are merged).
 * @fresh: re-initialise the library first (a driver may have been loaded since the last
 * attempt found nothing). The result comes to the discovered callback.
 */
void gpu_monitor_discover(struct gpu_monitor *m, bool fresh);

/* New options (SIGHUP). Returns 0 or -ENOMEM (the old ones stay). */
int gpu_monitor_set_opts(struct gpu_monitor *m, const struct gpu_monitor_opts *o) WARN_UNUSED;

enum gpu_health gpu_monitor_health(const struct gpu_monitor *m, unsigned gpu);
/* The same by UUID: a GPU the last discovery did not find is unhealthy. */
enum gpu_health gpu_monitor_health_by_uuid(const struct gpu_monitor *m, const char *uuid);
/* Why @gpu is unhealthy ("" when healthy). */
const char *gpu_monitor_reason(const struct gpu_monitor *m, unsigned gpu);
void gpu_monitor_get_stats(const struct gpu_monitor *m, struct gpu_monitor_stats *ret);

/* Why a GPU's health changed, for metrics. */
enum gpu_reason {
	GPU_REASON_XID,
	GPU_REASON_ECC,
	GPU_REASON_LOST,
	GPU_REASON_PROBE,  /* a health probe failed */
	GPU_REASON_DRIVER, /* driver/library mismatch or reload */
	GPU_REASON_HUNG,   /* a backend call hung */
	GPU_REASON_RECOVERED,
	GPU_REASON_COUNT,
};
/* "xid", "ecc", "lost", "probe", "driver", "hung", "recovered". */
const char *gpu_reason_name(enum gpu_reason r);

#define GPU_MONITOR_XIDS_MAX 16

/* One GPU's record, carried over rediscoveries by UUID. */
struct gpu_monitor_gpu_stats {
	/* health changes: [0] to unhealthy, [1] to healthy (always GPU_REASON_RECOVERED) */
	uint64_t transitions[2][GPU_REASON_COUNT];
	uint64_t last_xid; /* the last critical XID acted on; 0: none */
	/* Critical XIDs by code, the first GPU_MONITOR_XIDS_MAX codes seen (others: overflow). */
	struct {
		uint64_t xid, count;
		usec_t last_wall; /* CLOCK_REALTIME µs of the last one */
	} xids[GPU_MONITOR_XIDS_MAX];
	unsigned n_xids;
	uint64_t xid_overflow;
};
/* @gpu's record, NULL when out of range. Valid until the next callback or discovery. */
const struct gpu_monitor_gpu_stats *gpu_monitor_gpu_stats(const struct gpu_monitor *m,
							  unsigned gpu);
/*
 * True while a hung call keeps the monitor from sampling: the worker is held by it (a call
 * of the library as a whole, or the thread bound), or every GPU has a call hung. A caller
 * then answers from what it has rather than wait.
 */
bool gpu_monitor_hung(const struct gpu_monitor *m);
/* Backend calls running past call_timeout now (each holds a thread). */
unsigned gpu_monitor_hung_calls(const struct gpu_monitor *m);

/*
 * Telemetry. @samples and @r hold @n entries, by the monitor's GPU indices: @r[i] is 0 or the
 * -errno of GPU i's sample (then samples[i] is all "not supported"). Valid during the call.
 */
typedef void gpu_sampled_fn(struct gpu_monitor *m, const struct gpu_sample *samples, const int *r,
			    unsigned n, void *userdata);
/*
 * Registers @fn for @userdata (each listener is told apart by its userdata: the metrics and
 * the backstop both listen); a new @fn for the same userdata replaces it, NULL removes it.
 * Every sample, whoever asked for it, goes to every listener. Returns 0, or -ENOSPC past
 * GPU_MONITOR_SAMPLED_MAX listeners.
 */
#define GPU_MONITOR_SAMPLED_MAX 4
int gpu_monitor_on_sampled(struct gpu_monitor *m, gpu_sampled_fn *fn, void *userdata);
/*
 * Asks the worker for one sample of every GPU, after the jobs that matter for health (requests
 * made while one waits are merged). A GPU whose call hangs is not asked (its entry is
 * -ETIMEDOUT). Returns true when a result will come to the sampled callback, false when none
 * will (no GPUs yet, the library is being re-initialised, or every GPU has a call hung).
 */
bool gpu_monitor_sample(struct gpu_monitor *m);

/*
 * Stops the threads and frees. Never waits for a thread that is inside the backend (it is
 * left behind, and what it uses with it, including the backend). NULL-safe, returns NULL.
 */
struct gpu_monitor *gpu_monitor_free(struct gpu_monitor *m);

/* Monitor threads still running, over every monitor (those left in the backend included). */
unsigned gpu_monitor_live_threads(void);

/* True for the application XIDs NVIDIA's plugin ignores (13, 31, 43, 45, 68, 109). */
bool gpu_xid_is_application(uint64_t xid);

/*
 * Parses DP_DISABLE_HEALTHCHECKS with NVIDIA's syntax: lower-cased, a comma list whose items
 * (spaces around them allowed, empty ones skipped) are "all", "xids" or an XID number. "all"
 * sets disable_all, "xids" disable_xids; the numbers are added to @o's ignored XIDs: on
 * success *@ret_xids is a heap array (the caller frees it) holding @o->ignored_xids followed
 * by the new ones, and @o->ignored_xids points to it (NULL and @o unchanged when there are
 * no numbers). NULL or "" is no change. Returns 0, -EINVAL (a malformed item: nothing is
 * changed) or -ENOMEM.
 */
int gpu_parse_disable_healthchecks(const char *s, struct gpu_monitor_opts *o,
				   uint64_t **ret_xids) WARN_UNUSED;
