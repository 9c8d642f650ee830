#pragma once

/*
 * The daemon's private header: its state (struct daemon, owned by daemon_run(); struct
 * dplugin, one per advertised resource, owned by the daemon's list), shared with
 * daemon-metrics.c (what the metrics server asks the daemon), and its pure decisions, apart
 * from its loop and objects so that tests/unit/test-daemon.c can check them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gpu.h"
#include "plugin.h"

struct gpu_info;
struct labels_writer;
struct metrics;
struct resource;

/*
 * A reload's plan, by resource name. @running[i] names running plugin i's resource, or is NULL
 * for a plugin that is stopping (it drains; a wanted resource of its name gets a new plugin:
 * replaced). Sets @ret_take[i] to the index in @wanted of the resource plugin i takes over
 * (kept: its new device list goes out on its open stream, its socket and registration stay),
 * or -1 (removed: it closes). Sets @ret_add[j] for each wanted resource that no running plugin
 * takes (added: a new plugin, socket and registration). Each wanted resource goes to one
 * plugin at most. Returns the number added.
 */
size_t daemon_reload_match(const char *const *running, size_t n_running, const char *const *wanted,
			   size_t n_wanted, int *ret_take, bool *ret_add);

/*
 * True when every GPU of @r is still at its index in @info with the same UUID: after a reload
 * whose config cannot be applied, only such resources stay.
 */
bool daemon_resource_matches(const struct resource *r, const struct gpu_info *info);

struct dplugin {
	struct daemon *d;
	struct plugin *plugin;
	struct kubelet_reg *reg;
	char *name;
	bool stopping;
	bool stopped;
	struct dplugin *next;
};

struct daemon {
	struct loop *loop;
	char *const *envp;
	const struct config_flag *flags;
	size_t n_flags;
	struct config cfg;

	usec_t backend_err_logged;
	bool discovered_once; /* a discovery has finished (failOnInitError applies before) */
	struct gpu_info info;
	int *numa;
	int *distance;
	struct gpu_monitor *monitor; /* owns the backend and every call into it */

	struct plugin_ctx ctx;
	struct kubelet *kubelet;
	struct dplugin *plugins;
	unsigned n_stopping;

	struct podres *podres;
	bool podres_mask; /* the poller runs for gpumem masking (periodic), not only metrics */
	struct cdi_writer *cdi;
	struct metrics *metrics; /* NULL: off, or not started yet (metrics_retry) */
	struct loop_timer *metrics_retry;
	usec_t metrics_backoff;
	bool metrics_retry_logged;
	struct labels_writer *labels;
	uint64_t kubelet_restarts;	   /* kubelet.sock (re)created */
	struct config_watch *config_watch; /* the config file's; NULL: none */

	struct loop_timer *rediscover;
	struct loop_timer *stop_deadline;
	struct loop_timer *reap;
	bool stopping;
	int exit_code;
};

/*
 * The pod-resources poller (daemon.c): periodic for gpumem masking, on demand for the metrics,
 * off when neither wants it. Call when either changes.
 */
void daemon_update_podres(struct daemon *d);

/* daemon-metrics.c: the metrics server and the node labels, started, reloaded and stopped. */
void daemon_metrics_start(struct daemon *d);
/* After a SIGHUP applied the new config; @old is the one it replaced. */
void daemon_metrics_reload(struct daemon *d, const struct config *old);
/* New GPUs or resources: the metrics' labels and the node labels follow. */
void daemon_metrics_gpus(struct daemon *d);
void daemon_metrics_stop(struct daemon *d);
