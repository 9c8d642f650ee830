#pragma once

/*
 * The GPU layer: a device model and one backend interface (NVML now, Tegra/sysfs later).
 * The health monitor that owns a backend is in gpu-monitor.h.
 *
 * Threads: a backend is called by one thread at a time (the monitor's worker), except
 * ops->event_wait, which the monitor's event thread calls beside it. Backends must allow
 * that: discover, probe and reinit may run while a wait is in progress (NVML is
 * thread-safe; the NVML backend swaps its device table under a lock). Never from the loop.
 */

#include <stdatomic.h>
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
	char uuid[GPU_UUID_MAX]; /* the GPU's UUID when gpu >= 0 (indices change on rediscovery) */
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
	 * Creates the event set if there is none and registers the discovered GPUs with
	 * events_supported that are not registered yet. May run while event_wait waits on the
	 * set (after a rediscovery found a new GPU). Returns 0, -EOPNOTSUPP when no GPU is
	 * registered, or another -errno.
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
	/*
	 * The library function the worker called last (the backend sets it before each call,
	 * except in event_wait), so that a hung call can be named: "nvmlDeviceGetMemoryInfo".
	 */
	_Atomic(const char *) call;
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
