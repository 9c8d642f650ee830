/* The Tegra backend: detection, discovery, health and the NVML merge (gpu-tegra.h). */

#define LOG_MODULE "gpu-tegra"

#include <errno.h>
#include <string.h>

#include "gpu-tegra.h"
#include "tegra-int.h"

/* Skeleton: the backend is being written (issue 18). */
int tegra_board_read(const char *host_root, struct gpu_board *ret)
{
	(void)host_root;
	memset(ret, 0, sizeof(*ret));
	return 0;
}

int tegra_open(const struct gpu_backend_opts *o, struct gpu_backend *nvml,
	       struct gpu_backend **ret, char **reterr)
{
	(void)o;
	(void)nvml;
	(void)ret;
	(void)reterr;
	return -ENODEV;
}
