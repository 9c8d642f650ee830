#pragma once

/*
 * Writes the CDI spec for the discovered GPUs (cdiVersion 0.5.0, kind
 * k8s.device-plugin.nvidia.com/gpu): one device per GPU named by UUID or index with its
 * /dev/nvidiaN node, common edits for the control nodes that exist and for the driver
 * libraries found under driver_root. Written atomically as <dir>/k8s.device-plugin.nvidia.com-gpu.json.
 */

#include "allocate.h"

struct gpu_info;

struct cdi_opts {
	const char *spec_dir;	 /* "/var/run/cdi" */
	const char *driver_root; /* host driver root, "/" */
	const char *dev_root;	 /* host dev root, defaults to driver_root */
	enum alloc_id_strategy id_strategy;
};

/*
 * Generates and writes the spec. Returns 0 or -errno; @reterr gets a heap message (e.g. which
 * driver library is missing).
 */
int cdi_spec_write(const struct cdi_opts *o, const struct gpu_info *info,
		   char **reterr) WARN_UNUSED;

/* Generates the spec JSON into @out (for tests and `edgegpu discover`). Returns 0 or -errno. */
int cdi_spec_render(const struct cdi_opts *o, const struct gpu_info *info, struct buf *out,
		    char **reterr) WARN_UNUSED;
