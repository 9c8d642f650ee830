/* The backend chooser: one table of backends, tried in order for GPU_BACKEND_AUTO. */

#include "gpu-backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Thread_local _Atomic(const char *) *gpu_backend_call_slot;

void gpu_backend_note_call(struct gpu_backend *b, const char *fn)
{
	atomic_store_explicit(&b->call, fn, memory_order_relaxed);
	if (gpu_backend_call_slot)
		atomic_store_explicit(gpu_backend_call_slot, fn, memory_order_relaxed);
}

int gpu_backend_opts_copy(struct gpu_backend_opts *dst, const struct gpu_backend_opts *src)
{
	struct gpu_backend_opts o = { .kind = src->kind, .tegra_mem_mib = src->tegra_mem_mib };
	const char *const from[] = { src->lib_path,  src->driver_root, src->sysfs_root,
				     src->proc_root, src->host_root,   src->tegra_device_id };
	const char **to[] = { &o.lib_path,  &o.driver_root, &o.sysfs_root,
			      &o.proc_root, &o.host_root,   &o.tegra_device_id };

	for (size_t i = 0; i < ELEMENTSOF(to); i++)
		if (from[i] && !(*to[i] = strdup(from[i]))) {
			gpu_backend_opts_release(&o);
			return -ENOMEM;
		}
	*dst = o;
	return 0;
}

void gpu_backend_opts_release(struct gpu_backend_opts *o)
{
	free((char *)o->lib_path);
	free((char *)o->driver_root);
	free((char *)o->sysfs_root);
	free((char *)o->proc_root);
	free((char *)o->host_root);
	free((char *)o->tegra_device_id);
	*o = (struct gpu_backend_opts){ 0 };
}
