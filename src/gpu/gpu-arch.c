/*
 * The architecture table (gpu-arch.h). Sources: GFD's getArchFamily()
 * (k8s-device-plugin internal/lm/resource.go, v0.20.0) for the label values; nvidia-smi -q
 * "Product Architecture" for its names; NVIDIA's compute capability list for the ranges.
 *
 * Jetson Thor is compute capability 11.0 (sm_110; sm_101 before CUDA 13), a Blackwell GPU.
 * GFD has no row for 11.x and labels it `undefined`, so a pod selecting
 * gpu.family=blackwell would miss Thor while it matches GB10 (12.1), a Blackwell GPU of the
 * same generation. We print `blackwell` for 11.x in every vocabulary: the label, nvidia-smi's
 * name and ours. (Orin, 8.7, is `ampere` in GFD's table and here.)
 */
#include "gpu-arch.h"

#include <stddef.h>

#include "util.h"

struct arch_row {
	enum gpu_arch arch;
	int major;
	int minor_from, minor_to; /* inclusive */
};

/* Compute capability -> architecture. Not listed (4.x, 0.x, 14.x and later): unknown. */
static const struct arch_row rows[] = {
	{ GPU_ARCH_TESLA, 1, 0, 99 },	   { GPU_ARCH_FERMI, 2, 0, 99 },
	{ GPU_ARCH_KEPLER, 3, 0, 99 },	   { GPU_ARCH_MAXWELL, 5, 0, 99 },
	{ GPU_ARCH_PASCAL, 6, 0, 99 },	   { GPU_ARCH_VOLTA, 7, 0, 4 },
	{ GPU_ARCH_TURING, 7, 5, 99 },	   { GPU_ARCH_AMPERE, 8, 0, 8 },
	{ GPU_ARCH_ADA, 8, 9, 99 },	   { GPU_ARCH_HOPPER, 9, 0, 99 },
	{ GPU_ARCH_BLACKWELL, 10, 0, 99 }, { GPU_ARCH_BLACKWELL, 11, 0, 99 }, /* Thor: above */
	{ GPU_ARCH_BLACKWELL, 12, 0, 99 }, { GPU_ARCH_RUBIN, 13, 0, 99 },
};

struct arch_names {
	const char *gfd, *smi, *log;
};

static const struct arch_names names[GPU_ARCH_COUNT] = {
	[GPU_ARCH_UNKNOWN] = { "undefined", "Unknown", "unknown" },
	[GPU_ARCH_TESLA] = { "tesla", "Tesla", "tesla" },
	[GPU_ARCH_FERMI] = { "fermi", "Fermi", "fermi" },
	[GPU_ARCH_KEPLER] = { "kepler", "Kepler", "kepler" },
	[GPU_ARCH_MAXWELL] = { "maxwell", "Maxwell", "maxwell" },
	[GPU_ARCH_PASCAL] = { "pascal", "Pascal", "pascal" },
	[GPU_ARCH_VOLTA] = { "volta", "Volta", "volta" },
	[GPU_ARCH_TURING] = { "turing", "Turing", "turing" },
	[GPU_ARCH_AMPERE] = { "ampere", "Ampere", "ampere" },
	[GPU_ARCH_ADA] = { "ada-lovelace", "Ada Lovelace", "ada-lovelace" },
	[GPU_ARCH_HOPPER] = { "hopper", "Hopper", "hopper" },
	[GPU_ARCH_BLACKWELL] = { "blackwell", "Blackwell", "blackwell" },
	[GPU_ARCH_RUBIN] = { "rubin", "Rubin", "rubin" },
};

enum gpu_arch gpu_arch_from_cc(int major, int minor)
{
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		if (rows[i].major == major && minor >= rows[i].minor_from &&
		    minor <= rows[i].minor_to)
			return rows[i].arch;
	return GPU_ARCH_UNKNOWN;
}

static const struct arch_names *names_of(enum gpu_arch a)
{
	return (unsigned)a < GPU_ARCH_COUNT ? &names[a] : &names[GPU_ARCH_UNKNOWN];
}

const char *gpu_arch_gfd_family(enum gpu_arch a)
{
	return names_of(a)->gfd;
}

const char *gpu_arch_smi_name(enum gpu_arch a)
{
	return names_of(a)->smi;
}

const char *gpu_arch_log_name(enum gpu_arch a)
{
	return names_of(a)->log;
}
