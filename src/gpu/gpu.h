#pragma once

/*
 * The GPU device model: what discovery found (struct gpu_info, one struct gpu_device per
 * GPU), what a container needs to use a GPU (device nodes, control nodes, driver files),
 * health events and telemetry samples. Plain data: the backend that fills it is in
 * gpu-backend.h, the health monitor in gpu-monitor.h. Allocate and CDI read only this, so a
 * new backend (Tegra) brings its own device nodes without touching them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define GPU_UUID_MAX	  96
#define GPU_NAME_MAX	  96
#define GPU_NODES_MAX	  8
#define GPU_NODE_PATH_MAX 64

/*
 * The most GPUs one node is built for: a resource holds at most this many (resource_new()
 * refuses more), assign_build_resources() advertises the first ones of a larger node (and says
 * so), and Allocate's per-GPU arrays are this size (plugin-alloc.c).
 */
#define GPU_NODE_MAX 64

/* A driver library, found as <name>.<driver version>; @soname is also mounted (NULL: none). */
struct gpu_driver_lib {
	const char *name; /* "libcuda.so" */
	const char *soname;
	bool required; /* the CDI spec fails without it */
};

/*
 * What a container needs besides a GPU's own nodes, from the backend that found the GPU.
 * Static data of the backend (it outlives any backend and any gpu_info): Allocate and CDI
 * read it on the loop thread without calling the backend.
 */
struct gpu_container {
	/* Control nodes, each delivered only when present under the dev root, in this order. */
	const char *const *ctl_nodes;
	size_t n_ctl_nodes;
	/* Driver files the CDI spec mounts: libraries and binaries, each where first found. */
	const struct gpu_driver_lib *libs;
	size_t n_libs;
	const char *const *bins;
	size_t n_bins;
	/* Where they are looked for under the driver root ("/usr/lib64", "/usr/bin"), in order. */
	const char *const *lib_dirs;
	size_t n_lib_dirs;
	const char *const *bin_dirs;
	size_t n_bin_dirs;
	/*
	 * Device-node patterns (glob(3), container paths: "/dev/dri/renderD[0-9]*"), each
	 * expanded under the dev root when a response or spec is built, the matches delivered
	 * like control nodes ("rw", in sorted order, each once). For nodes whose names vary by
	 * board (Tegra); NULL: none.
	 */
	const char *const *node_globs;
	size_t n_node_globs;
	/*
	 * A directory (driver-root relative) of NVIDIA container-toolkit CSV mount specs
	 * ("/etc/nvidia-container-runtime/host-files-for-container.d"): the CDI spec mounts the
	 * `lib`, `sym` and `dir` entries of its *.csv files that exist, and adds their `dev`
	 * entries (globs allowed) as nodes. NULL: none. (Tegra: the L4T libraries are named there,
	 * not found by driver version.)
	 */
	const char *mount_specs_dir;
};

enum gpu_mem_limits {
	GPU_MEM_LIMITS_UNKNOWN,	    /* not asked (no NVML, an old library without the function) */
	GPU_MEM_LIMITS_UNSUPPORTED, /* NOT_SUPPORTED, or any other error */
	GPU_MEM_LIMITS_SUPPORTED,
};

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
	/*
	 * MIG can be turned on (NVML nvmlDeviceGetMigMode answered SUCCESS, GFD's rule: A100,
	 * H100, B200); false where it answered NOT_SUPPORTED or the library lacks the call.
	 */
	bool mig_capable;
	/*
	 * The PCI class code, 24 bits (0x030000 VGA controller: GFD's gpu.mode "graphics";
	 * 0x030200 3D controller: "compute"), from NVML's nvmlDeviceGetPciInfoExt, else the
	 * device's sysfs `class` file; 0 unknown (a Tegra iGPU, no PCI).
	 */
	uint32_t pci_class;
	bool events_supported; /* false: health is polled */
	bool integrated;       /* Tegra iGPU, unified memory */
	/*
	 * Whether the driver enforces per-cgroup memory limits on this GPU (NVML
	 * nvmlDeviceGetMemoryLimits_v1 answered SUCCESS at discovery; CUDA 13.4 drivers): the
	 * gpumem "driver" enforcement (src/enforce/enforce-mode.h).
	 */
	enum gpu_mem_limits mem_limits;
	/* The GPU's own device nodes, container paths ("/dev/nvidia0"), delivered "rw". */
	char nodes[GPU_NODES_MAX][GPU_NODE_PATH_MAX];
	unsigned n_nodes;
	/* What every container with this GPU needs besides its nodes; NULL: nothing. */
	const struct gpu_container *container;
};

/*
 * The board a Tegra (Jetson) GPU sits on, from the host's device tree, soc0 and
 * /etc/nv_tegra_release. Plain data; all empty (tegra false) on other machines. Strings are
 * "" when unknown.
 */
struct gpu_board {
	bool tegra;	  /* a Tegra SoC was detected */
	char model[96];	  /* device-tree model: "NVIDIA Jetson Orin Nano Developer Kit" */
	char soc[32];	  /* "tegra234" (the device-tree compatible, or from the chip id) */
	unsigned chip_id; /* soc0/soc_id: 33 T210, 24 T186, 25 T194, 35 T234, 38 T264; 0 unknown */
	char l4t[32];	  /* "36.4.3" from nv_tegra_release ("R36" + "REVISION: 4.3"); "" none */
	int l4t_major;	  /* 36; 0 unknown */
	char jetpack[16]; /* "6.2" derived from the L4T release where known; "" otherwise */
	char power_mode[64]; /* nvpmodel mode name ("15W", "MAXN"), when readable; "" otherwise */
};

struct gpu_info {
	char driver_version[80]; /* "550.54.15" */
	int cuda_driver_version; /* 12040 for CUDA 12.4 */
	char lib_version[80];	 /* NVML library version */
	unsigned n_devices;
	struct gpu_device *devices; /* usable devices, by index; MIG-enabled ones left out */
	unsigned n_skipped;	    /* MIG-enabled and others left out */
	/*
	 * The MIG-enabled GPUs discovery left out, described as far as discovery got (index,
	 * uuid, name, mem_total, cc, pci_class, mig_enabled and mig_capable true; no nodes):
	 * GFD counts and labels them (labels.c), nothing else uses them. NULL when none.
	 */
	struct gpu_device *mig_devices;
	unsigned n_mig_devices;
	/* n_skipped messages, which GPU and why, for the caller to log ("GPU 1 (GPU-...): ...") */
	char **skipped;
	/* The spec-wide part of CDI (common edits); each device carries its own pointer too. */
	const struct gpu_container *container;
	struct gpu_board board; /* Tegra boards; zero elsewhere */
};

/*
 * CDI's device-name rule (ValidateDeviceName): a letter or digit first and last, letters,
 * digits and "_.:-" between. Every device ID must pass it: the ID is the CDI device's name.
 */
bool gpu_cdi_name_valid(const char *name);

/*
 * Whether @id can be a device's ID we choose ourselves (the Tegra iGPU's, "tegra"): a CDI
 * device name (gpu_cdi_name_valid()) and a device-plugin ID alike: no "::" (a replica's
 * separator), shorter than GPU_UUID_MAX.
 */
bool gpu_device_id_valid(const char *id);

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

#define GPU_SAMPLE_PROCS_MAX 64
#define GPU_SAMPLE_RAILS_MAX 12
#define GPU_RAIL_NAME_MAX    32

/* A compute process on a GPU, as the driver lists it. */
struct gpu_process {
	uint32_t pid;	   /* in the host's PID namespace */
	uint64_t mem_used; /* bytes; UINT64_MAX when the driver does not say */
	double sm_util;	   /* percent of the SMs over the last sample period; NaN unknown */
};

/* One power rail of the board (Tegra: an INA3221 channel), as its monitor names it. */
struct gpu_rail {
	char name[GPU_RAIL_NAME_MAX]; /* "VDD_IN", "VDD_GPU_SOC" */
	double watts;
};

/*
 * Per-GPU telemetry for metrics; what the device lacks is NaN / UINT64_MAX. On a Tegra iGPU
 * (unified memory) the fields mean what they mean on a discrete GPU where they can: util_mem
 * is the memory controller's (EMC) load, mem_clock_mhz the EMC clock, mem_used/mem_free the
 * GPU's share of DRAM (its carve-out, or MemTotal), power_w the rail the GPU is on.
 */
struct gpu_sample {
	double temperature_c;
	double power_w;
	uint64_t mem_used, mem_total; /* bytes */
	uint64_t mem_free;	      /* bytes, as the driver (or /proc/meminfo) says it */
	double util_gpu, util_mem;    /* percent */
	double sm_clock_mhz, mem_clock_mhz;
	double sm_clock_min_mhz, sm_clock_max_mhz; /* the governor's current bounds (devfreq) */
	double power_limit_w;			   /* enforced limit */
	double temp_slowdown_c, temp_shutdown_c;   /* thresholds */
	uint64_t ecc_corrected, ecc_uncorrected;   /* volatile totals; UINT64_MAX without ECC */
	uint64_t energy_mj;			   /* since the driver loaded */
	uint64_t clock_reasons;			   /* NVML clock-event (throttle) bitmask */
	/*
	 * DCGM-exporter's other default counters (docs/metrics.md says where each comes from
	 * and which GPUs have it). Absent: NaN / UINT64_MAX, left out of the exposition.
	 */
	double mem_temp_c;		 /* HBM/memory temperature */
	uint64_t pcie_replay;		 /* PCIe replays since the driver loaded */
	double enc_util, dec_util;	 /* video encoder/decoder, percent */
	uint64_t mem_reserved;		 /* bytes the driver reserves (MemoryInfo_v2) */
	uint64_t remap_corr, remap_unc;	 /* rows remapped for (un)correctable errors */
	double remap_failure;		 /* 1 when a row remapping failed, else 0 */
	uint64_t nvlink_bw_total;	 /* NVLink bandwidth counter, all links */
	double prof_gr_active;		 /* ratio 0-1 of time the graphics engine is busy */
	double prof_tensor_active;	 /* ratio 0-1 of cycles the tensor pipe is busy */
	double prof_dram_active;	 /* ratio 0-1 of cycles device memory is busy */
	double pcie_tx_bps, pcie_rx_bps; /* PCIe bytes per second, headers included */
	/*
	 * The board's power (Tegra): board_power_w is the input rail (VDD_IN, POM_5V_IN, VIN)
	 * where there is one, else the sum of the rails; never an input rail plus its sub-rails.
	 */
	double board_power_w;
	unsigned n_rails;
	struct gpu_rail rails[GPU_SAMPLE_RAILS_MAX];
	/* Compute processes, at most GPU_SAMPLE_PROCS_MAX; -1: the backend cannot list them. */
	int n_procs;
	bool procs_truncated; /* more were running than fit */
	struct gpu_process procs[GPU_SAMPLE_PROCS_MAX];
};

/* A sample with every field "not supported" and no process list. */
void gpu_sample_init(struct gpu_sample *s);
