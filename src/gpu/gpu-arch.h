#pragma once

/*
 * The GPU architectures and their names, from one table keyed by the CUDA compute capability.
 * Each output has its own vocabulary, and they differ on purpose:
 *   - GFD's `nvidia.com/gpu.family` label value (gpu_arch_gfd_family()): "ada-lovelace",
 *     "undefined" for what GFD does not know;
 *   - the architecture name nvidia-smi prints as "Product Architecture" (gpu_arch_smi_name()):
 *     "Ada Lovelace", "Unknown" (NVML's nvmlDeviceGetArchitecture() has no strings: this is
 *     what nvidia-smi makes of its values);
 *   - our own name, in logs and in `edgegpu discover` (gpu_arch_log_name()): GFD's family
 *     ("ada-lovelace", not a shortening of it) but "unknown" where GFD says "undefined".
 * Pure functions of their arguments; any thread.
 */

enum gpu_arch {
	GPU_ARCH_UNKNOWN,
	GPU_ARCH_TESLA,
	GPU_ARCH_FERMI,
	GPU_ARCH_KEPLER,
	GPU_ARCH_MAXWELL,
	GPU_ARCH_PASCAL,
	GPU_ARCH_VOLTA,
	GPU_ARCH_TURING,
	GPU_ARCH_AMPERE,
	GPU_ARCH_ADA,
	GPU_ARCH_HOPPER,
	GPU_ARCH_BLACKWELL,
	GPU_ARCH_RUBIN,
	GPU_ARCH_COUNT,
};

/*
 * The architecture of compute capability @major.@minor; GPU_ARCH_UNKNOWN for one the table
 * does not know (0.0, a negative, 4.x, a future 14.0). Jetson Thor (11.0) is Blackwell.
 */
enum gpu_arch gpu_arch_from_cc(int major, int minor);

/* GFD's nvidia.com/gpu.family value: "ampere", "ada-lovelace", ..., "undefined". Never NULL;
   an out-of-range @a is "undefined". */
const char *gpu_arch_gfd_family(enum gpu_arch a);
/* nvidia-smi's "Product Architecture": "Ampere", "Ada Lovelace", ..., "Unknown". Never NULL. */
const char *gpu_arch_smi_name(enum gpu_arch a);
/* Ours, for logs and discover: "ampere", "ada-lovelace", ..., "unknown". Never NULL. */
const char *gpu_arch_log_name(enum gpu_arch a);
