#pragma once

/*
 * The GPU layer: a device model, one backend interface (NVML now, Tegra/sysfs later), and a
 * health monitor that turns backend events into per-GPU health on the loop.
 *
 * Threads: backends are called from the loop thread, except ops->event_wait, which the
 * monitor calls from its own thread. The monitor hands events to the loop through a
 * loop_wake; its change callback always runs on the loop thread.
 */

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct loop;
struct gpu_backend;
struct gpu_monitor;

#define GPU_UUID_MAX 96
#define GPU_NAME_MAX 96

struct gpu_device {
	unsigned index;		 /* NVML index */
	char uuid[GPU_UUID_MAX]; /* "GPU-8d1f..." */
	char name[GPU_NAME_MAX]; /* "NVIDIA A2" */
	unsigned minor;		 /* /dev/nvidia<minor> */
	uint64_t mem_total;	 /* bytes */
	char pci_bus_id[32];	 /* as NVML gives it: "00000000:01:00.0" */
	int numa_node;		 /* -1: unknown (no TopologyInfo) */
	int cc_major, cc_minor;	 /* compute capability */
	char arch[32];		 /* "ampere", ... or "unknown" */
	bool mig_enabled;	 /* such GPUs are skipped by discovery (logged) */
	bool events_supported;	 /* false: health is polled */
	bool integrated;	 /* Tegra iGPU, unified memory */
};

struct gpu_info {
	char driver_version[80]; /* "550.54.15" */
	int cuda_driver_version; /* 12040 for CUDA 12.4 */
	char lib_version[80];	 /* NVML library version */
	unsigned n_devices;
	struct gpu_device *devices; /* usable devices, by index; MIG-enabled ones left out */
	unsigned n_skipped;	    /* MIG-enabled and others left out */
	/* n_skipped messages, which GPU and why, for the caller to log ("GPU 1 (GPU-...): ...") */
	char **skipped;
};

/* Frees what @info holds and zeroes it. NULL-safe. */
void gpu_info_release(struct gpu_info *info);

/* Health-relevant events, as the backend reports them. */
enum gpu_event_kind {
	GPU_EVENT_XID,		  /* critical XID; xid holds the code */
	GPU_EVENT_ECC_SINGLE,	  /* single-bit ECC: counted only */
	GPU_EVENT_ECC_DOUBLE,	  /* double-bit ECC: unhealthy */
	GPU_EVENT_LOST,		  /* GPU fell off the bus */
	GPU_EVENT_DRIVER_CHANGED, /* library/driver mismatch or reload: re-initialise */
	GPU_EVENT_COUNT,
};

struct gpu_event {
	enum gpu_event_kind kind;
	/*
	 * Index into gpu_info.devices, or -1 for all GPUs. LOST with -1: some GPU fell off the
	 * bus, the monitor probes each to see which.
	 */
	int gpu;
	uint64_t xid;
};

/* Per-GPU telemetry for metrics (later issue); fields the device lacks are NaN / -1. */
struct gpu_sample {
	double temperature_c;
	double power_w;
	uint64_t mem_used, mem_total; /* bytes */
	double util_gpu, util_mem;    /* percent */
	double sm_clock_mhz, mem_clock_mhz;
	double power_limit_w;			 /* enforced limit */
	double temp_slowdown_c, temp_shutdown_c; /* thresholds */
	uint64_t ecc_corrected, ecc_uncorrected; /* volatile totals; UINT64_MAX without ECC */
};

struct gpu_backend_ops {
	const char *name; /* "nvml" */
	void (*close)(struct gpu_backend *b);
	/*
	 * Fills @ret (caller releases). Returns 0 or -errno; @reterr gets a heap message.
	 * It replaces the backend's device table, whose indices every other op takes: call it
	 * only while no monitor runs on @b.
	 */
	int (*discover)(struct gpu_backend *b, struct gpu_info *ret, char **reterr);
	/* Topology distance between two GPUs (lower is closer), or -errno (-EOPNOTSUPP). */
	int (*distance)(struct gpu_backend *b, unsigned gpu_a, unsigned gpu_b);
	/*
	 * One health probe of @gpu: 0 healthy, -ENODEV lost, -EXDEV driver/library mismatch or
	 * driver reloaded (re-initialise), other -errno for failures.
	 */
	int (*probe)(struct gpu_backend *b, unsigned gpu);
	/*
	 * Registers the event set for the discovered GPUs with events_supported. Returns 0,
	 * -EOPNOTSUPP when no GPU could be registered, or another -errno.
	 */
	int (*events_open)(struct gpu_backend *b);
	/*
	 * Blocks up to @timeout_usec for one event (monitor thread). Returns 1 and fills @ret, 0 on
	 * timeout, or -errno (the monitor backs off on errors).
	 */
	int (*event_wait)(struct gpu_backend *b, usec_t timeout_usec, struct gpu_event *ret);
	void (*events_close)(struct gpu_backend *b);
	/*
	 * Shuts the library down and initialises it again (driver reload), and finds the
	 * discovered GPUs again by UUID (one that is gone probes -ENODEV). Closes the event set
	 * first if open; the caller opens it again. Returns 0 or -errno (-EXDEV: still
	 * mismatched); @reterr gets a heap message.
	 */
	int (*reinit)(struct gpu_backend *b, char **reterr);
	/* Telemetry, for metrics; what the GPU lacks is NaN / UINT64_MAX. May be NULL. */
	int (*sample)(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret);
};

struct gpu_backend {
	const struct gpu_backend_ops *ops;
};

struct gpu_nvml_opts {
	const char *lib_path; /* NULL: loader search for libnvidia-ml.so.1, then under driver_root */
	const char *driver_root; /* "/" */
	const char *sysfs_root;	 /* "/sys": <sysfs>/bus/pci/devices/<id>/numa_node */
	/* "/proc": the kernel module's version, for the mismatch message, from
	   <proc>/driver/nvidia/version */
	const char *proc_root;
};

/*
 * Loads NVML with dlopen and initialises it. Returns 0, -ENOENT (library not found),
 * -ENOSYS (a required symbol missing), -EXDEV (driver/library version mismatch), or another
 * -errno; @reterr gets a heap message that names what is missing and how to fix it.
 */
int gpu_nvml_open(const struct gpu_nvml_opts *o, struct gpu_backend **ret,
		  char **reterr) WARN_UNUSED;

static inline void gpu_backend_close(struct gpu_backend *b)
{
	if (b)
		b->ops->close(b);
}

/* --- health monitor --- */

enum gpu_health {
	GPU_HEALTHY,
	GPU_UNHEALTHY,
};

struct gpu_monitor_opts {
	/* 5 s (0: default): probe period; every GPU is probed, those without events rely on it */
	usec_t poll_interval;
	usec_t recovery_quiet;	      /* 0: off. >0: an unhealthy GPU that probes fine and saw no
	                                critical XID for this long becomes healthy again */
	const uint64_t *ignored_xids; /* on top of the built-in application XIDs */
	unsigned n_ignored_xids;
	/* DP_DISABLE_HEALTHCHECKS=all: no checks at all (no event thread, no probes) */
	bool disable_all;
	/* DP_DISABLE_HEALTHCHECKS=xids: every XID ignored (counted); ECC, lost, probes still count */
	bool disable_xids;
	/* 250 ms (0: default): longest single event wait; bounds how long gpu_monitor_free() takes */
	usec_t wait_timeout;
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
	uint64_t recoveries; /* unhealthy -> healthy */
};

/* Runs on the loop thread when a GPU's health changes (index into the discovered devices). */
typedef void gpu_health_fn(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
			   const char *reason, void *userdata);

/*
 * Starts monitoring the discovered GPUs of @info on @b (the backend must outlive the monitor;
 * the monitor owns @b's event set and calls events_open/events_close/reinit itself): an event
 * thread for GPUs with events, a poll timer probing every GPU, a recovery timer. Every GPU
 * starts healthy. Logs (module=gpu) each health change at warn/info. Returns 0 or -errno.
 *
 * Health rules, all on the loop thread:
 *  - a critical XID that is not ignored (gpu_xid_is_application(), @o->ignored_xids,
 *    disable_xids), a double-bit ECC error, a lost GPU, or a failed probe: unhealthy at once;
 *    healthy again only through recovery;
 *  - a single-bit ECC error: counted and logged only;
 *  - a driver change (library/driver mismatch or reload, from the event wait or a probe):
 *    every GPU unhealthy, then re-initialisation with back-off (100 ms doubling to 10 s); a
 *    GPU whose probe passes after it is healthy again unless it has another fault;
 *  - recovery (recovery_quiet > 0): an unhealthy GPU whose last fault is recovery_quiet old and
 *    whose probe passes is healthy again;
 *  - a failing event wait is retried with back-off (100 ms doubling to 10 s), never spinning;
 *    meanwhile the poll timer keeps probing.
 * @fn must not free the monitor.
 */
int gpu_monitor_new(struct loop *l, struct gpu_backend *b, const struct gpu_info *info,
		    const struct gpu_monitor_opts *o, gpu_health_fn *fn, void *userdata,
		    struct gpu_monitor **ret) WARN_UNUSED;
enum gpu_health gpu_monitor_health(const struct gpu_monitor *m, unsigned gpu);
/*
 * Marks @gpu unhealthy as a fault would (the change callback runs; recovery rules apply). The
 * daemon uses it to carry a GPU's state across a monitor restart on reload.
 */
void gpu_monitor_mark_unhealthy(struct gpu_monitor *m, unsigned gpu, const char *reason);
void gpu_monitor_get_stats(const struct gpu_monitor *m, struct gpu_monitor_stats *ret);
/* Stops the thread (within one wait timeout) and frees. NULL-safe, returns NULL. */
struct gpu_monitor *gpu_monitor_free(struct gpu_monitor *m);

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
