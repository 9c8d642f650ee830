#pragma once

/*
 * Private to src/gpu/tegra: what tegra.c (detection, discovery, health, the NVML merge) and
 * tegra-sample.c (telemetry from sysfs) share. tegra.c owns struct tegra_paths: it fills it
 * at discovery and refreshes it when a file appears late (early boot: devfreq after us);
 * tegra-sample.c only reads it.
 */

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "gpu.h"

/* Files of a board whose readings are tracked for the log: a Jetson's sampler reads about 40. */
#define TEGRA_FILES_SEEN_MAX 96

/* Where the iGPU's telemetry is, each path relative to the host root; "" when not found. */
struct tegra_paths {
	char host_root[PATH_MAX];
	char gpu_dir[PATH_MAX];	     /* the GPU's device dir in sysfs (has "load", per-mille) */
	char devfreq_dir[PATH_MAX];  /* its devfreq dir: cur_freq, min_freq, max_freq (Hz) */
	char emc_dir[PATH_MAX];	     /* the EMC's devfreq dir (Thor), or "" */
	char thermal_zone[PATH_MAX]; /* thermal_zoneN whose type is the GPU's */
	/* hwmon (JetPack 5+) or iio (JetPack 4) directories of the power monitors (INA3221) */
	char power_dirs[4][PATH_MAX];
	unsigned n_power_dirs;
	uint64_t mem_total; /* bytes: the carve-out, or MemTotal at discovery */
	/*
	 * What tegra_sample_read() has seen of each file it reads (by its path's FNV-1a hash):
	 * read well once, and warned about (vanished after reading well, or unreadable or
	 * garbage), so that a file going bad is logged once at warn and its return once at info,
	 * not every second. Zero at first; concurrent samples take @files_lock (a spin lock: a
	 * few compares). Files past TEGRA_FILES_SEEN_MAX are not tracked, so not logged.
	 */
	atomic_flag files_lock;
	unsigned n_files;
	struct tegra_file_seen {
		uint32_t key;
		bool good, bad;
	} files[TEGRA_FILES_SEEN_MAX];
};

/*
 * One telemetry sample of the iGPU from the files @p names (below p->host_root) into @s
 * (gpu_sample_init()ed by the caller; NVML's answers may already be in it: only fields still
 * NaN / UINT64_MAX are filled). A file missing or holding garbage leaves its field absent.
 * Never fails: telemetry gaps are not errors (a file that vanishes after reading well, or holds
 * garbage, is logged once at warn, its return once at info: p->files). Any thread.
 */
void tegra_sample_read(struct tegra_paths *p, struct gpu_sample *s);

/*
 * Finds the telemetry files under @host_root for a board of SoC @soc ("tegra234", may be ""),
 * filling @p (host_root and mem_total are the caller's, kept). Returns the number of paths
 * found; a board where none is found yet (early boot) is still served. A @host_root of
 * PATH_MAX bytes or more finds none and clears @p whole, mem_total too: nothing is sampled.
 */
unsigned tegra_paths_find(const char *host_root, const char *soc, struct tegra_paths *p);
