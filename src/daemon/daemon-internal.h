#pragma once

/*
 * The daemon's private header: its state (struct daemon, owned by daemon_run(); struct
 * dplugin, one per advertised resource, owned by the daemon's list), shared with
 * daemon-metrics.c (what the metrics server asks the daemon) and daemon-labels.c (the node
 * labels file), and its pure decisions, apart from its loop and objects so that
 * tests/unit/test-daemon.c can check them. daemon.c wires; the other two read the state and
 * call nothing in daemon.c (scripts/check-layers checks the files call one way).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backoff.h"
#include "config.h"
#include "enforce-mode.h"
#include "gpu.h"
#include "plugin.h"

struct dbackstop;
struct gpu_info;
struct labels_writer;
struct prom;
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

#define MEMLIMIT_HOOK_UNPROBED 2

struct daemon {
	struct loop *loop;
	char *const *envp;
	const struct config_flag *flags;
	size_t n_flags;
	struct config cfg;

	usec_t backend_err_logged;
	bool board_logged;    /* the Tegra board was logged (once: it does not change) */
	bool discovered_once; /* a discovery has finished (failOnInitError applies before) */
	int discovery_r;      /* the last discovery's result: 0, or -errno (discovery_err) */
	char *discovery_err;  /* why it failed, for /readyz; NULL after a success */
	struct gpu_info info;
	int *numa;
	int *distance;
	struct gpu_monitor *monitor; /* owns the backend and every call into it */

	struct plugin_ctx ctx;
	struct kubelet *kubelet;
	struct dplugin *plugins;
	unsigned n_stopping;

	struct podres *podres;
	bool podres_mask; /* the poller runs periodically (gpumem masking, enforcement), not only for metrics */
	struct cdi_writer *cdi;
	/*
	 * nvidia-cdi-hook's apply-cuda-memory-limits: cdi_hook_has_memory_limits()'s answer since
	 * the last discovery (MEMLIMIT_HOOK_UNPROBED: not asked yet; daemon-enforce-info.c).
	 */
	int memlimit_hook_probe;
	struct metrics *metrics; /* NULL: off, or not started yet (metrics_retry) */
	struct loop_timer *metrics_retry;
	struct backoff metrics_backoff;
	bool metrics_retry_logged;
	/*
	 * Set by daemon.c before daemon_metrics_start(): the metrics server started, now or after
	 * a retry (the pod-resources poller runs on demand for it). A callback, so that
	 * daemon-metrics.c never calls up into daemon.c.
	 */
	void (*metrics_started)(struct daemon *d);
	struct labels_writer *labels;
	struct dbackstop *backstop;	   /* NULL: it could not start (logged) */
	uint64_t kubelet_restarts;	   /* kubelet.sock (re)created */
	struct config_watch *config_watch; /* the config file's; NULL: none */

	/* gpumem enforcement (daemon-enforce.c); NULL while no gpumem resource is advertised */
	struct enforce *enforce;
	struct loop_timer *enforce_retry; /* enforce_install() again after a failure */
	struct backoff enforce_backoff;
	struct loop_timer *enforce_gc; /* the last stable pod-resources answer read again */
	usec_t enforce_tick;	       /* ... this often */
	struct buf enforce_podres;     /* that answer */
	bool enforce_have_podres;      /* one came (an empty answer is 0 bytes) */
	/*
	 * Our CDI spec carries nvidia-cdi-hook apply-cuda-memory-limits: the driver path's hook
	 * point (write_cdi() sets it from daemon_cdi_memlimit_hook() before sync_plugins() calls
	 * daemon_enforce_update()).
	 */
	bool enforce_cdi_hook;
	bool enforce_logged; /* enforce_verdict was logged */
	struct enforce_verdict enforce_verdict;

	struct loop_timer *rediscover;
	struct loop_timer *stop_deadline;
	struct loop_timer *reap;
	bool stopping;
	int exit_code;
};

/*
 * daemon-enforce.c: gpumem enforcement while a gpumem resource is advertised (after the
 * plugins are synced: the config or the resources changed), the node's facts (call again
 * when they change: a new CDI spec), and the stable pod-resources answers. Loop thread.
 */
void daemon_enforce_update(struct daemon *d);
void daemon_enforce_node(struct daemon *d);
void daemon_enforce_podres(struct daemon *d, const uint8_t *resp, size_t len);
void daemon_enforce_free(struct daemon *d);

/*
 * daemon-enforce-info.c: saying which gpumem enforcement is in force. Loop thread.
 * daemon_cdi_memlimit_hook(): whether our CDI spec should carry the toolkit's
 * apply-cuda-memory-limits hook (gpumem with driver enforcement on, a GPU whose driver limits
 * memory per cgroup, and the host's nvidia-cdi-hook having the subcommand, searched once per
 * discovery). daemon_enforce_mode(): the node's mode for the label, NULL while enforcement
 * does not run (no gpumem resource). daemon_enforce_collect(): the enforcement metric families.
 */
bool daemon_cdi_memlimit_hook(struct daemon *d);
const char *daemon_enforce_mode(const struct daemon *d);
struct prom;
void daemon_enforce_collect(const struct daemon *d, struct prom *p);

/*
 * daemon-metrics.c: the metrics server, started (retrying while its port is taken; each start
 * calls d->metrics_started), reloaded and stopped. Loop thread.
 */
void daemon_metrics_start(struct daemon *d);
/* After a SIGHUP applied the new config; @old is the one it replaced. */
void daemon_metrics_reload(struct daemon *d, const struct config *old);
/* New GPUs or resources: the metrics' GPU labels follow. */
void daemon_metrics_gpus(struct daemon *d);
void daemon_metrics_stop(struct daemon *d);

/*
 * daemon-labels.c: the node labels file (cfg.labels.file; off when empty), started, rewritten
 * for new GPUs or config (daemon_labels_update()), restarted when its file or expiry changed
 * (daemon_labels_reload(), @old being the config replaced) and stopped. Loop thread. A writer
 * that cannot start is logged and leaves the labels off; out of memory is logged.
 */
void daemon_labels_start(struct daemon *d);
void daemon_labels_update(struct daemon *d);
void daemon_labels_reload(struct daemon *d, const struct config *old);
void daemon_labels_stop(struct daemon *d);

/*
 * daemon-backstop.c: the gpumem backstop (docs/sharing.md "Backstop"), started after the
 * monitor (it listens to its samples) and stopped before it; reloaded after a new config was
 * applied; told of new GPUs or resources (daemon_backstop_gpus()); its families rendered by
 * daemon-metrics.c. Off (state "disabled") unless the config enables it. Loop thread.
 */
void daemon_backstop_start(struct daemon *d);
void daemon_backstop_reload(struct daemon *d);
void daemon_backstop_gpus(struct daemon *d);
void daemon_backstop_stop(struct daemon *d);
void daemon_backstop_collect(const struct daemon *d, struct prom *p);

/*
 * What GPU discovery left this node with (docs/failures.md, "Readiness"): GPUs to serve, a
 * first discovery still running, or the reason there is nothing to serve. The names are the
 * `state` label of edgegpu_gpu_discovery_state.
 */
enum daemon_gpu_state {
	DAEMON_GPU_SERVED,	      /* "gpus": GPUs found; served through the resources */
	DAEMON_GPU_PENDING,	      /* "pending": the first discovery has not finished */
	DAEMON_GPU_NONE,	      /* "no-gpu": NVML works and finds no GPU */
	DAEMON_GPU_ALL_SKIPPED,	      /* "gpus-skipped": every GPU found was left out (MIG) */
	DAEMON_GPU_NO_LIBRARY,	      /* "no-library": libnvidia-ml.so.1 not found */
	DAEMON_GPU_LIBRARY_UNUSABLE,  /* "library-unusable": it lacks a function we need */
	DAEMON_GPU_DRIVER_NOT_LOADED, /* "driver-not-loaded": no kernel module */
	DAEMON_GPU_DRIVER_MISMATCH,   /* "driver-mismatch": library and kernel module differ */
	DAEMON_GPU_NO_PERMISSION,     /* "no-permission": /dev/nvidia* cannot be opened */
	DAEMON_GPU_DRIVER_HUNG,	      /* "driver-hung": an NVML call has not returned */
	DAEMON_GPU_FAILED,	      /* "failed": NVML failed otherwise */
	DAEMON_GPU_STATE_COUNT,
};

/* The label value of each state ("gpus", "no-library", ...). */
extern const char *const daemon_gpu_state_names[DAEMON_GPU_STATE_COUNT];

/*
 * The state from what discovery said: whether one has finished (@discovered), the last one's
 * result @r (0 or its -errno), the GPUs it left us (@n_devices, and @n_skipped left out) and
 * whether an NVML call is hung now (@hung). GPUs found win over everything: they are served.
 */
enum daemon_gpu_state daemon_gpu_state(bool discovered, int r, unsigned n_devices,
				       unsigned n_skipped, bool hung);

/*
 * A discovery finished with @r (0, or -errno and @err saying why): recorded for readiness and
 * the metrics. Call before the GPUs are adopted. Out of memory only loses the text.
 */
void daemon_gpu_discovered(struct daemon *d, int r, const char *err);
