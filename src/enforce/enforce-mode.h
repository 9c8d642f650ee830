#pragma once

/*
 * Which enforcement of a gpumem limit is in force, and why: one pure decision shared by the
 * daemon (Allocate, the node label, the metric) and doctor, so the two never disagree. A limit
 * that nothing enforces is "accounting": the metrics and alerts still see it, nothing stops it,
 * and every surface says so (never silently treated as enforced).
 */

#include <stdbool.h>

enum enforce_mode {
	ENFORCE_ACCOUNTING, /* nothing enforces: metrics and alerts only */
	ENFORCE_DRIVER,	    /* the driver (NVML memory limits on the container's cgroup) */
	ENFORCE_INTERPOSER, /* libedgegpu-cuda.so in the container */
	ENFORCE_BOTH,	    /* both; the interposer then only reports */
	ENFORCE_MODE_COUNT,
};

/* What is known about a node (or one container's GPUs) when deciding. */
struct enforce_inputs {
	/* config: edgegpu.sharing.memory.enforcement.{driver,interposer} */
	bool want_driver, want_interposer;
	/* driver path */
	bool gpus_support_limits; /* every GPU answers nvmlDeviceGetMemoryLimits_v1 */
	bool cgroup_v2;		  /* the host's /sys/fs/cgroup is cgroup2 */
	bool mig;		  /* a GPU has MIG enabled */
	bool cdi_delivery;	  /* devices reach containers through our CDI spec */
	bool cdi_hook;		  /* our CDI spec carries apply-cuda-memory-limits */
	bool equal_limits; /* every GPU of the container gets the same limit (always, per node) */
	/* interposer path */
	bool interposer_installed; /* the library is in <stateDir>/lib */
	bool integrated;	   /* a Tegra iGPU: the driver path is not known to exist */
};

struct enforce_verdict {
	enum enforce_mode mode;
	/*
	 * Why the driver path is not in force ("" when it is): a static string naming the first
	 * missing condition, for logs, metrics (a bounded label value) and doctor, e.g.
	 * "driver-unsupported", "cgroup-v1", "mig", "not-cdi", "no-cdi-hook", "unequal-limits",
	 * "integrated", "off".
	 */
	const char *driver_reason;
	/* Why the interposer is not in force ("" when it is): "off", "not-installed". */
	const char *interposer_reason;
};

/* Decides. Pure. */
void enforce_decide(const struct enforce_inputs *in, struct enforce_verdict *ret);

/* "accounting", "driver", "interposer", "both". */
const char *enforce_mode_name(enum enforce_mode m);
