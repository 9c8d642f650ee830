#pragma once

/*
 * Writes the CDI spec for the discovered GPUs (cdiVersion 0.5.0, kind
 * k8s.device-plugin.nvidia.com/gpu): one device per GPU named by UUID or index with its
 * /dev/nvidiaN node, common edits for the control nodes that exist and for the driver
 * libraries found under driver_root. Written atomically as <dir>/k8s.device-plugin.nvidia.com-gpu.json.
 *
 * No hooks by default: edgegpu does not depend on nvidia-ctk. Each library is also mounted at
 * its soname (libcuda.so.1, ...), so the loader finds it in the container without an ldcache
 * update as long as the library directory is one the container's loader searches (true for
 * the Debian/Ubuntu multiarch directories). Set ldcache_hook_path to add NVIDIA's
 * update-ldcache createContainer hook for other layouts (a /usr/lib64 host, say).
 */

#include "allocate.h"

struct gpu_info;

#define CDI_SPEC_FILE_NAME "k8s.device-plugin.nvidia.com-gpu.json"
#define CDI_SPEC_DIR	   "/var/run/cdi"

struct cdi_opts {
	const char *spec_dir;	 /* NULL: "/var/run/cdi" (created when missing) */
	const char *driver_root; /* host driver root; NULL: "/" */
	const char *dev_root;	 /* host dev root; NULL: driver_root */
	enum alloc_id_strategy id_strategy;
	/* NULL: no hooks. Else the nvidia-ctk binary (e.g. "/usr/bin/nvidia-ctk") for an
	 * "nvidia-ctk hook update-ldcache --folder <dir>..." createContainer hook. */
	const char *ldcache_hook_path;
};

/*
 * Generates and writes the spec to <spec_dir>/CDI_SPEC_FILE_NAME with mode 0644, creating
 * spec_dir (mode 0755) if missing. Returns 0 or -errno: those of cdi_spec_render(), or
 * those of mkdir/open/write/rename. On failure @reterr (if not NULL) gets a heap message.
 */
int cdi_spec_write(const struct cdi_opts *o, const struct gpu_info *info,
		   char **reterr) WARN_UNUSED;

/*
 * Generates the spec JSON and appends it to @out (for tests and `edgegpu discover`); @out is
 * left as it was on failure. Returns 0, -ENOMEM, -ENOENT (libcuda.so.<driver version> not
 * found under driver_root), or -EINVAL (no driver version, a device name CDI refuses, a
 * string that is not UTF-8). On failure @reterr (if not NULL) gets a heap message, e.g.
 * "failed to locate libcuda.so.550.54.15 under /run/nvidia/driver".
 */
int cdi_spec_render(const struct cdi_opts *o, const struct gpu_info *info, struct buf *out,
		    char **reterr) WARN_UNUSED;
