#pragma once

/*
 * The metrics module's private state, shared by metrics.c (endpoints, scrape flow),
 * metrics-render.c (the families) and metrics-pods.c (who holds which GPU, and the GPU
 * processes mapped to pods). Loop thread only: the attribution thread (metrics-pods.c) works on
 * a struct attrib_run of its own and hands it back through m->attrib.wake.
 *
 * The files call one way (scripts/check-layers): metrics.c -> metrics-render.c ->
 * metrics-pods.c -> podmap-read.c -> podmap.c, with http.c and prom.c below them; metrics-pods.c
 * tells metrics.c of a finished attribution through the m->attrib.done callback.
 */

#include <stdbool.h>
#include <stdint.h>

#include "gpu-monitor.h"
#include "gpu.h"
#include "metrics.h"
#include "podmap.h"
#include "util.h"

#define METRICS_WAITERS_MAX 64

struct http_server;
struct http_request;
struct loop_timer;
struct loop_wake;
struct prom;
struct attrib_run;

/* A GPU's identity labels, from the last discovery. */
struct metrics_gpu {
	char index[12];
	char uuid[GPU_UUID_MAX];
	char pci[32];
	char device[24]; /* "nvidia<index>" as DCGM-exporter; "" on an iGPU with no node */
	char model[GPU_NAME_MAX];
	uint64_t mem_total;
	const struct metrics_hold *holder; /* set for each rendering: metrics_pods_sole_holder() */
};

/* A container holding devices of a resource on a GPU (pod-resources). */
struct metrics_hold {
	char *namespace_, *pod, *container, *resource;
	char uuid[GPU_UUID_MAX];
	unsigned count; /* devices: 1, replicas, gpumem units */
	unsigned total; /* devices of the resource on this GPU */
	bool gpumem;
	uint64_t unit_bytes; /* gpumem: bytes per unit; 0 otherwise */
};

enum metrics_proc_kind {
	METRICS_PROC_POD,
	METRICS_PROC_HOST,	  /* not in a Kubernetes cgroup */
	METRICS_PROC_UNKNOWN_POD, /* a pod cgroup no log directory names */
	METRICS_PROC_NO_PROC,	  /* not in our /proc (hostPID missing) */
	METRICS_PROC_SKIPPED,	  /* a limit cut its attribution short (struct metrics_attrib) */
};

/* Why attribution did less than all: podmap's reasons, then the process cap. */
#define METRICS_CUT_PROCESSES PODMAP_CUT_COUNT
#define METRICS_CUT_COUNT     (PODMAP_CUT_COUNT + 1)

/*
 * The attribution of GPU processes to pods, off the loop (metrics-pods.c): each sample's
 * processes go to a run on a thread of its own, one run at a time, and the newest sample that
 * came meanwhile waits for it; the loop only hands lists over.
 */
struct metrics_attrib {
	struct loop_wake *wake;	   /* created with the first run */
	struct attrib_run *run;	   /* in flight, or NULL */
	struct metrics_proc *next; /* a newer sample's processes waiting for the run, or NULL */
	unsigned n_next;
	uint64_t seq, installed; /* lists handed over; the newest whose result is served */
	uint64_t runs;
	uint64_t cuts[METRICS_CUT_COUNT];
	unsigned logged; /* bit per cut: logged since the last run without it */
	usec_t last_dur;
	bool stuck_logged, start_logged;
	/*
	 * Called on the loop when a run's result is in m->procs, or the run ended: metrics.c sets
	 * it (metrics_new()) to render the body again and let deferred scrapes go. A callback, so
	 * that metrics-pods.c, below metrics.c, never calls up into it. NULL: nobody to tell.
	 */
	void (*done)(struct metrics *m);
};

/* A GPU process, mapped (at sample time). */
struct metrics_proc {
	char uuid[GPU_UUID_MAX];
	uint32_t pid;
	uint64_t mem;	/* bytes; UINT64_MAX unknown */
	double sm_util; /* percent (nvmlDeviceGetProcessUtilization); NaN unknown */
	enum metrics_proc_kind kind;
	char namespace_[64], pod[256], container[64];
	char pod_uid[40]; /* from its cgroup; "" when the cgroup names none */
};

/* A pod's UID, kept from its processes' cgroups while the pod holds devices (pod_uid label). */
struct metrics_pod_uid {
	char namespace_[64], pod[256], uid[40];
};

struct metrics {
	struct loop *loop;
	struct metrics_source src;
	void *userdata;
	struct http_server *http;
	struct gpu_monitor *mon; /* borrowed */
	struct podres *podres;	 /* borrowed */

	/* settings */
	char *hostname_label, *node_name, *host_proc, *pod_log_dir;
	usec_t min_interval, scrape_wait;

	/* GPUs */
	struct metrics_gpu *gpus;
	unsigned n_gpus;
	char driver_version[80], nvml_version[80], cuda_version[16];
	struct gpu_board board; /* the Tegra board of the last discovery; tegra false elsewhere */

	/* the telemetry cache, by UUID */
	struct gpu_sample *samples;
	int *sample_r;
	char (*sample_uuids)[GPU_UUID_MAX];
	unsigned n_samples;
	usec_t sampled_at; /* monotonic; 0: never */
	uint64_t samples_taken, sample_timeouts, scrapes;
	bool sample_pending, podres_pending;

	/* GPU processes of the cache, as the last attribution left them */
	struct metrics_proc *procs;
	unsigned n_procs;
	struct podmap_cache *podmap; /* NULL while a run has it */
	struct metrics_attrib attrib;

	/* pod-resources attribution */
	struct metrics_hold *holds;
	unsigned n_holds;
	usec_t pods_at;
	bool pods_valid;
	struct metrics_pod_uid *uids;
	unsigned n_uids;
	bool virtual_gpus; /* DCGM-exporter's --kubernetes-virtual-gpus */

	/* full answers allowed: a token bucket of max_scrapes, refilled max_scrapes a second */
	unsigned max_scrapes;
	double tokens;
	usec_t tokens_at;
	uint64_t throttled;
	/* throttled scrapes, answered 429 a second later: a client in a loop waits, not spins */
	struct http_request *tarpit[METRICS_WAITERS_MAX];
	unsigned n_tarpit;
	struct loop_timer *tarpit_timer;

	/* deferred scrapes */
	struct http_request *waiters[METRICS_WAITERS_MAX];
	unsigned n_waiters;
	struct loop_timer *wait_timer;

	/* the answer being served */
	struct buf body, gzip, why;
	bool body_ready, gzip_ready, render_err_logged;
	usec_t body_at;	  /* when the body was rendered */
	double boot_time; /* /proc/stat btime, read once */
	usec_t started_wall;
};

/* The newest sample's processes are not attributed yet (nor dropped). */
static inline bool metrics_attrib_pending(const struct metrics *m)
{
	return m->attrib.seq != m->attrib.installed;
}

/* metrics-pods.c */
/*
 * Stores a sample as the telemetry cache and hands its processes to the attribution (a run on
 * its thread; metrics_attrib_pending() until its result is in m->procs). Needs m->loop for the
 * run; without a loop, or when no thread can start, the processes are served as skipped.
 */
void metrics_cache_store(struct metrics *m, const struct gpu_sample *samples, const int *r,
			 unsigned n);
/* Drops the processes and any result still to come (the GPUs changed). */
void metrics_procs_release(struct metrics *m);
/* A run in flight for longer than its time budget allows: stuck in a file read. */
bool metrics_attrib_stuck(struct metrics *m);
/* The attribution's own families (edgegpu_attribution_*). */
void metrics_attrib_render(const struct metrics *m, struct prom *p);
void metrics_pods_store(struct metrics *m, const uint8_t *resp, size_t len);
void metrics_pods_clear(struct metrics *m);
void metrics_pods_release(struct metrics *m);
int metrics_pods_set_log_dir(struct metrics *m);
/*
 * The container holding all of GPU @uuid (a whole GPU, or every replica of it), or NULL when
 * none does or the GPU is shared.
 */
const struct metrics_hold *metrics_pods_sole_holder(const struct metrics *m, const char *uuid);
/* The UID of pod @ns/@pod as its processes' cgroups named it, or "" while none has. */
const char *metrics_pods_uid(const struct metrics *m, const char *ns, const char *pod);

/* metrics-xid.c */
/* NVIDIA's name of XID @xid, as DCGM-exporter's err_msg label has it ("Unknown Error" past it). */
const char *metrics_xid_message(uint64_t xid);
