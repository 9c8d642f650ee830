/* The device model's helpers. The health monitor that owns a backend is in gpu-monitor.c. */

#include "gpu.h"

#include <stdlib.h>
#include <string.h>

void gpu_info_release(struct gpu_info *info)
{
	if (!info)
		return;
	for (unsigned i = 0; i < info->n_skipped; i++)
		free(info->skipped ? info->skipped[i] : NULL);
	free(info->skipped);
	free(info->devices);
	memset(info, 0, sizeof(*info));
}
