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
};

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
	int gpu; /* index into gpu_info.devices, or -1 for all GPUs */
	uint64_t xid;
};

/* Per-GPU telemetry for metrics (later issue); fields the device lacks are NaN / -1. */
struct gpu_sample {
	double temperature_c;
	double power_w;
	uint64_t mem_used, mem_total; /* bytes */
	double util_gpu, util_mem;    /* percent */
	double sm_clock_mhz, mem_clock_mhz;
};

struct gpu_backend_ops {
	const char *name; /* "nvml" */
	void (*close)(struct gpu_backend *b);
	/* Fills @ret (caller releases). Returns 0 or -errno; @reterr gets a heap message. */
	int (*discover)(struct gpu_backend *b, struct gpu_info *ret, char **reterr);
	/* Topology distance between two GPUs (lower is closer), or -errno (-EOPNOTSUPP). */
	int (*distance)(struct gpu_backend *b, unsigned gpu_a, unsigned gpu_b);
	/*
	 * One health probe of @gpu: 0 healthy, -ENODEV lost, -EXDEV driver/library mismatch,
	 * other -errno for failures.
	 */
	int (*probe)(struct gpu_backend *b, unsigned gpu);
	/* Registers the event set for @gpus (those with events_supported). Returns 0 or -errno. */
	int (*events_open)(struct gpu_backend *b);
	/*
	 * Blocks up to @timeout_usec for one event (monitor thread). Returns 1 and fills @ret, 0 on
	 * timeout, or -errno (the monitor backs off on errors).
	 */
	int (*event_wait)(struct gpu_backend *b, usec_t timeout_usec, struct gpu_event *ret);
	void (*events_close)(struct gpu_backend *b);
	/* Shuts the library down and initialises it again (driver reload). Returns 0 or -errno. */
	int (*reinit)(struct gpu_backend *b, char **reterr);
	/* Telemetry, for metrics. May be NULL. */
	int (*sample)(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret);
};

struct gpu_backend {
	const struct gpu_backend_ops *ops;
};

struct gpu_nvml_opts {
	const char *lib_path; /* NULL: loader search for libnvidia-ml.so.1, then under driver_root */
	const char *driver_root; /* "/" */
	const char *
		sysfs_root; /* "/sys": numa_node read from <sysfs>/bus/pci/devices/<id>/numa_node */
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
	usec_t poll_interval;	      /* 5 s: probe period for GPUs without events */
	usec_t recovery_quiet;	      /* 0: off. >0: an unhealthy GPU that probes fine and saw no
	                                critical XID for this long becomes healthy again */
	const uint64_t *ignored_xids; /* on top of the built-in application XIDs */
	unsigned n_ignored_xids;
	bool disable_all;  /* DP_DISABLE_HEALTHCHECKS=all */
	bool disable_xids; /* DP_DISABLE_HEALTHCHECKS=xids */
};

struct gpu_monitor_stats {
	uint64_t events; /* every event read, ignored ones included */
	uint64_t xids_ignored;
	uint64_t ecc_single;
	uint64_t ecc_double;
	uint64_t wait_errors;
	uint64_t reinits;
};

/* Runs on the loop thread when a GPU's health changes (index into the discovered devices). */
typedef void gpu_health_fn(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
			   const char *reason, void *userdata);

/*
 * Starts monitoring the @n_gpus discovered GPUs of @b (the backend must outlive the monitor):
 * an event thread for GPUs with events, a poll timer for the rest. Returns 0 or -errno.
 */
int gpu_monitor_new(struct loop *l, struct gpu_backend *b, const struct gpu_info *info,
		    const struct gpu_monitor_opts *o, gpu_health_fn *fn, void *userdata,
		    struct gpu_monitor **ret) WARN_UNUSED;
enum gpu_health gpu_monitor_health(const struct gpu_monitor *m, unsigned gpu);
void gpu_monitor_get_stats(const struct gpu_monitor *m, struct gpu_monitor_stats *ret);
/* Stops the thread (within one wait timeout) and frees. NULL-safe, returns NULL. */
struct gpu_monitor *gpu_monitor_free(struct gpu_monitor *m);

/* True for the application XIDs NVIDIA's plugin ignores (13, 31, 43, 45, 68, 109). */
bool gpu_xid_is_application(uint64_t xid);

/*
 * Parses DP_DISABLE_HEALTHCHECKS with NVIDIA's syntax ("all", "xids", or a comma list of
 * XIDs, possibly mixed). Returns 0 or -EINVAL; fills the opts fields (xids: heap array).
 */
int gpu_parse_disable_healthchecks(const char *s, struct gpu_monitor_opts *o,
				   uint64_t **ret_xids) WARN_UNUSED;
