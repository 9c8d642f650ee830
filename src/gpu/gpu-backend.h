#pragma once

/*
 * The GPU backend interface (NVML now, Tegra/sysfs next): what a backend implements. The
 * backends live below this directory (nvml/, tegra/) and call only down into it; the one way
 * to open one, gpu_backend_open(), knows them all and so sits above them (monitor/
 * gpu-open.h). The device model a backend fills is in gpu.h; the health monitor that owns a
 * backend is in gpu-monitor.h.
 *
 * Threads: a backend is called by the monitor's worker, one call at a time, and by its event
 * thread in ops->event_wait beside it. Backends must allow that: discover, probe and reinit
 * may run while a wait is in progress (NVML is thread-safe; the NVML backend swaps its device
 * table under a lock). One more thread may be inside: a worker left behind in a hung probe or
 * sample (gpu-worker.c) while a new worker makes the next calls. A probe or sample therefore
 * reads the backend's tables only before its first library call, and a backend never frees
 * what such a call uses before ops->close (NVML: device handles are values, the table is
 * replaced whole). ops->reinit frees them (nvmlShutdown): the monitor does not call it, nor
 * a fresh discovery, while such a thread is inside. Never from the loop.
 */

#include <stdatomic.h>

#include "gpu.h"
#include "util.h"

struct gpu_backend;

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
	/* The library function event_wait blocks in, for a hang report: "nvmlEventSetWait_v2". */
	const char *event_wait_call;
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
	 * The library function called last (the backend notes it with gpu_backend_note_call()
	 * before each call, except in event_wait), so that a hung call can be named:
	 * "nvmlDeviceGetMemoryInfo". With several threads in the backend it is the last one's;
	 * a thread that needs its own name (a monitor worker) sets gpu_backend_call_slot.
	 */
	_Atomic(const char *) call;
};

/*
 * The calling thread's own record of the library function it called last, or NULL (then
 * only struct gpu_backend.call is written). Each monitor worker thread points it at a slot
 * the loop reads when the thread hangs.
 */
extern _Thread_local _Atomic(const char *) *gpu_backend_call_slot;

/* Notes @fn, the library function about to be called, in @b->call and the thread's slot. */
void gpu_backend_note_call(struct gpu_backend *b, const char *fn);

enum gpu_backend_kind {
	/*
	 * NVIDIA's rule (flags.deviceDiscoveryStrategy "auto"): Tegra when the host has Tegra
	 * files (under host_root) and no NVML, or NVML lists an integrated GPU; NVML otherwise.
	 */
	GPU_BACKEND_AUTO,
	GPU_BACKEND_NVML,
	GPU_BACKEND_TEGRA, /* the board's iGPU from sysfs, plus what NVML lists beside it */
	GPU_BACKEND_COUNT,
};

struct gpu_backend_opts {
	enum gpu_backend_kind kind;
	/* NVML: NULL: loader search for libnvidia-ml.so.1, then under driver_root */
	const char *lib_path;
	const char *driver_root; /* "/" */
	const char *sysfs_root;	 /* "/sys": <sysfs>/bus/pci/devices/<id>/numa_node */
	/* "/proc": the kernel module's version, for the mismatch message, from
	   <proc>/driver/nvidia/version */
	const char *proc_root;
	/*
	 * Tegra: the host's root as this process sees it ("/"; "/host" in the DaemonSet): its
	 * etc/nv_tegra_release, sys/ (soc0, devfreq, thermal, hwmon), proc/ (meminfo,
	 * device-tree) and dev/ (the iGPU's nodes, for the health probe) are read below it.
	 */
	const char *host_root;
	const char *tegra_device_id; /* the iGPU's device ID: NULL = "tegra" (NVIDIA's) */
	uint64_t tegra_mem_mib;	     /* the iGPU's memory (carve-out) in MiB; 0: MemTotal */
};

/*
 * A deep copy of @src (its strings too) for an owner that may outlive the caller's strings:
 * the monitor's worker, which a hung driver call can keep alive after the daemon is gone.
 * Returns 0 or -ENOMEM (@dst untouched). Release with gpu_backend_opts_release().
 */
int gpu_backend_opts_copy(struct gpu_backend_opts *dst,
			  const struct gpu_backend_opts *src) WARN_UNUSED;
void gpu_backend_opts_release(struct gpu_backend_opts *o);

static inline void gpu_backend_close(struct gpu_backend *b)
{
	if (b)
		b->ops->close(b);
}
