#pragma once

/*
 * metrics: the HTTP endpoints /metrics, /healthz and /readyz (docs/metrics.md), on the daemon's
 * loop. Owns the HTTP server, the telemetry cache, the pod attribution and the rendering of
 * the GPU, pod and process families; the daemon's own families and readiness come from its
 * struct metrics_source at each request.
 *
 * Sampling on scrape: /metrics reads a cache. When the cache is older than min_interval, the
 * scrape asks the GPU monitor's worker for a new sample (and the pod-resources poller for a
 * new answer) and waits for them at most scrape_wait, and for the sample's GPU processes to be
 * attributed to pods (on a thread of the module's own: the host's /proc and log trees are never
 * read on the loop); then it answers with whatever the cache holds, and
 * edgegpu_metrics_sample_age_seconds says how old it is. Nobody scraping means no telemetry
 * calls at all. While an NVML call hangs, or an attribution is stuck in a file read, a scrape
 * does not wait.
 *
 * Loop thread only (the attribution thread touches nothing of it). The metrics object borrows the monitor and the poller it is given (their
 * owner, the daemon, detaches them with NULL before freeing them).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct buf;
struct gpu_info;
struct gpu_monitor;
struct loop;
struct podres;
struct prom;
struct resource;

struct metrics_opts {
	const char *address;	  /* ":9400" */
	unsigned max_connections; /* 16 */
	usec_t connection_timeout;
	usec_t min_interval;	    /* 1 s */
	usec_t scrape_wait;	    /* 500 ms */
	const char *hostname_label; /* "Hostname" or "hostname" */
	const char *node_name;	    /* NULL: gethostname() */
	const char *host_proc;	    /* "/proc" */
	const char *pod_log_dir;    /* "/var/log" */
	/*
	 * DCGM-exporter's --kubernetes-virtual-gpus: DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED
	 * also once per container holding a shared GPU, from its processes (docs/metrics.md).
	 */
	bool virtual_gpus;
};

/* The daemon's side, asked at each request (loop thread). */
struct metrics_source {
	/* Writes edgegpu's own families (the daemon's state). */
	void (*collect)(struct prom *p, void *userdata);
	/*
	 * True when ready, and then may append lines saying why nothing is served (/readyz
	 * shows them after "ready"); else appends one line per reason it is not to @why.
	 */
	bool (*ready)(struct buf *why, void *userdata);
	/* The resources advertised now (at most @max), for pod attribution. */
	unsigned (*resources)(const struct resource **ret, unsigned max, void *userdata);
};

struct metrics;

/*
 * Starts the server on @o->address. Returns 0, or -errno with a heap message in @reterr
 * (a bad address, the port taken).
 */
int metrics_new(struct loop *l, const struct metrics_opts *o, const struct metrics_source *src,
		void *userdata, struct metrics **ret, char **reterr) WARN_UNUSED;
/* Answers deferred scrapes with 503 and stops. NULL-safe, returns NULL. */
struct metrics *metrics_free(struct metrics *m);

/* New sampling and label settings (SIGHUP); the address is not among them. 0 or -ENOMEM. */
int metrics_set_opts(struct metrics *m, const struct metrics_opts *o) WARN_UNUSED;
/* The bound port. */
unsigned metrics_port(const struct metrics *m);

/* The telemetry source (NULL: none). Registers the monitor's sampled callback. */
void metrics_set_monitor(struct metrics *m, struct gpu_monitor *mon);
/*
 * The GPUs of the last discovery (copied): identity labels (an integrated GPU without a
 * /dev/nvidia<minor> node among its nodes gets device=""), and the board (edgegpu_board_info);
 * the cache is dropped.
 */
int metrics_set_gpus(struct metrics *m, const struct gpu_info *info) WARN_UNUSED;
/* The pod-resources poller for attribution (NULL: none). Registers its answer callback. */
void metrics_set_podres(struct metrics *m, struct podres *p);

/*
 * For tests and benchmarks: renders the exposition into @out now from the cache, as a scrape
 * would without waiting. Returns 0 or -errno.
 */
int metrics_render(struct metrics *m, struct buf *out) WARN_UNUSED;
