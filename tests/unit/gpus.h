#pragma once

/*
 * A node of @n identical GPUs for unit tests: index and minor i, a UUID made from i, 16 GiB,
 * no NUMA node. Tests at the node's limits (GPU_NODE_MAX) build GPU_NODE_MAX + 1 of them.
 */

#include <stdint.h>
#include <stdio.h>

#include "gpu.h"

static inline void unit_gpus_fill(struct gpu_device *d, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		d[i].index = i;
		d[i].minor = i;
		(void)snprintf(d[i].uuid, sizeof(d[i].uuid), "GPU-%08u-1111-2222-3333-444444444444",
			       i);
		d[i].mem_total = (uint64_t)16 << 30;
		d[i].numa_node = -1;
	}
}
