/* The Tegra iGPU's telemetry from sysfs and procfs (tegra-int.h). */

#define LOG_MODULE "gpu-tegra"

#include <string.h>

#include "tegra-int.h"

/* Skeleton: being written (issue 18). */
unsigned tegra_paths_find(const char *host_root, const char *soc, struct tegra_paths *p)
{
	(void)host_root;
	(void)soc;
	(void)p;
	return 0;
}

void tegra_sample_read(const struct tegra_paths *p, struct gpu_sample *s)
{
	(void)p;
	(void)s;
}
