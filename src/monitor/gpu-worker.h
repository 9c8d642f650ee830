#pragma once

/*
 * The GPU monitor's threads, private to gpu-monitor.c. A worker thread makes every backend
 * call but the event wait (open, discover, distance, probe, reinit, event registration),
 * one job at a time; an event thread waits in the backend's event set in long slices. Both
 * hand what they have to the loop by signalling @wake; the loop side takes it with
 * gpu_worker_collect(). Every function here is for the loop thread.
 *
 * A thread stuck inside the backend (a hung driver) is never waited for: gpu_worker_stop()
 * leaves it behind with what it needs, and it frees that when it comes back, if ever.
 * Telemetry sampling (metrics) is one more job kind, the least urgent.
 *
 * A probe or sample is done one GPU at a time, and a worker hung in one GPU's call can be
 * left there (gpu_worker_abandon()): a new worker thread takes the next jobs, and the old one
 * hands its job back through gpu_worker_take_late() when the call returns, then exits. At most
 * GPU_WORKER_MAX_THREADS worker threads exist at once, those left behind included.
 */

#include <stdbool.h>
#include <stdint.h>

#include "gpu-monitor.h"
#include "gpu.h"
#include "util.h"

struct loop_wake;
struct gpu_worker;

#define GPU_WORKER_MAX_GPUS    GPU_NODE_MAX /* probe masks are one uint64_t */
#define GPU_WORKER_QUEUE       256	    /* events handed over at once */
#define GPU_WORKER_MAX_THREADS 4	    /* worker threads, those left in hung calls included */

_Static_assert(GPU_WORKER_MAX_GPUS <= 64, "a job's mask of GPUs is one uint64_t");

enum gpu_job_kind {
	GPU_JOB_DISCOVER,
	GPU_JOB_PROBE,
	GPU_JOB_REINIT,
	GPU_JOB_SAMPLE,
};

/* One request to the worker and its results. */
struct gpu_job {
	enum gpu_job_kind kind;
	bool fresh;	  /* discover: re-initialise the library first */
	bool want_events; /* discover, reinit: the event set should be open afterwards */
	uint64_t mask;	  /* probe, sample: which GPUs (backend indices) */
	/* results (worker) */
	int r;
	char *err;
	struct gpu_info info;
	int *distance;
	int probe_r[GPU_WORKER_MAX_GPUS];
	int events_r; /* 0: the event set is open; -errno: it is not */
	/* sample: one per GPU of @mask, allocated by the submitter (GPU_WORKER_MAX_GPUS) */
	struct gpu_sample *samples;
	int sample_r[GPU_WORKER_MAX_GPUS]; /* 0, -EOPNOTSUPP (no telemetry) or -errno */
	struct gpu_job *next;		   /* the worker's list of jobs handed back late */
};

/* Where the current worker thread is: see gpu_worker_progress(). */
struct gpu_worker_progress {
	usec_t since;	  /* when it began its current step */
	int gpu;	  /* the step's GPU (probe, sample), -1: the job as a whole (the others) */
	const char *call; /* the backend function it called last, NULL before the first */
};

/* Frees @j and what its results hold. NULL-safe, returns NULL. */
struct gpu_job *gpu_job_free(struct gpu_job *j);

/*
 * Starts the worker thread (the event thread starts with the first event set). The worker
 * opens the backend with a copy of @backend (the threads may outlive the caller) at the first
 * discovery, and signals @wake when it has something for the loop. Returns 0 or -errno.
 */
int gpu_worker_new(const struct gpu_backend_opts *backend, struct loop_wake *wake,
		   struct gpu_worker **ret) WARN_UNUSED;
/* How long one event wait lasts. */
void gpu_worker_set_slice(struct gpu_worker *s, usec_t slice);
/* Hands @j to the worker (one job at a time: the previous one was collected). */
void gpu_worker_submit(struct gpu_worker *s, struct gpu_job *j);
/*
 * Takes what the threads handed over: the queued events into @batch (GPU_WORKER_QUEUE at
 * most, *@ret_n of them), whether the event wait is failing (and its last -errno), and the
 * finished job, which the caller then owns (NULL when none finished).
 */
struct gpu_job *gpu_worker_collect(struct gpu_worker *s, struct gpu_event *batch, unsigned *ret_n,
				   bool *ret_failing, int *ret_err);
/*
 * What the current worker thread runs: false when it is idle (or its job is done, waiting to
 * be collected). Else fills @ret: a probe or sample job steps from GPU to GPU, and a step
 * that runs past the call timeout is a hung call of that GPU.
 */
bool gpu_worker_progress(struct gpu_worker *s, struct gpu_worker_progress *ret);
/*
 * Leaves the current worker thread in its hung call, the step @at (from
 * gpu_worker_progress()), and starts a new worker, which takes the next job; the caller
 * submits again what the old job had yet to do. From now on the old job is its thread's: it
 * ends the job at its next GPU, hands it back through gpu_worker_take_late() when the call
 * returns (or frees it after a stop) and exits. Returns 0; -ESTALE when the thread is no
 * longer in that step (it moved on, or its job is done: look again); -EINVAL when the step is
 * not one GPU's (a discovery or re-initialisation: those change the backend's state, which a
 * second thread must not touch meanwhile); -EBUSY when GPU_WORKER_MAX_THREADS threads would
 * be exceeded; or the -errno of the thread's creation. On failure nothing changed.
 */
int gpu_worker_abandon(struct gpu_worker *s, const struct gpu_worker_progress *at) WARN_UNUSED;
/* The next job a thread left in a hung call handed back (its call returned), or NULL. The
   caller owns it. */
struct gpu_job *gpu_worker_take_late(struct gpu_worker *s);
uint64_t gpu_worker_wait_errors(struct gpu_worker *s);
/*
 * Stops the threads and lets go of @w; never waits for a thread inside the backend (the event
 * set and the backend are closed by the last thread out).
 */
void gpu_worker_stop(struct gpu_worker *s);
/* Threads still running, over every worker (those left in the backend included): runner_live(). */
unsigned gpu_worker_live_threads(void);
