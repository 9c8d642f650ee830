/* The backend chooser: one table of backends, tried in order for GPU_BACKEND_AUTO. */

#include "gpu-backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvml-int.h"

static const struct {
	enum gpu_backend_kind kind;
	int (*open)(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr);
} backends[] = {
	{ GPU_BACKEND_NVML, nvml_open },
	/* The Tegra (sysfs/devfreq) backend goes here, after NVML: a Jetson with NVML uses it. */
};

_Thread_local _Atomic(const char *) *gpu_backend_call_slot;

void gpu_backend_note_call(struct gpu_backend *b, const char *fn)
{
	atomic_store_explicit(&b->call, fn, memory_order_relaxed);
	if (gpu_backend_call_slot)
		atomic_store_explicit(gpu_backend_call_slot, fn, memory_order_relaxed);
}

int gpu_backend_open(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr)
{
	static const struct gpu_backend_opts defaults = { 0 };
	char *first_err = NULL;
	int first = 0;

	if (!o)
		o = &defaults;
	if (o->kind < 0 || o->kind >= GPU_BACKEND_COUNT)
		return set_error(reterr, -EINVAL, "unknown GPU backend kind %d", (int)o->kind);
	for (size_t i = 0; i < ELEMENTSOF(backends); i++) {
		char *err = NULL;
		int r;

		if (o->kind != GPU_BACKEND_AUTO && o->kind != backends[i].kind)
			continue;
		r = backends[i].open(o, ret, &err);
		if (r >= 0) {
			free(err);
			free(first_err);
			return 0;
		}
		if (first == 0) {
			first = r;
			first_err = err;
		} else {
			free(err);
		}
	}
	if (first == 0)
		return set_error(reterr, -EOPNOTSUPP, "GPU backend kind %d is not built in",
				 (int)o->kind);
	if (reterr) {
		free(*reterr);
		*reterr = first_err;
	} else {
		free(first_err);
	}
	return first;
}

int gpu_backend_opts_copy(struct gpu_backend_opts *dst, const struct gpu_backend_opts *src)
{
	struct gpu_backend_opts o = { .kind = src->kind };
	const char *const from[] = { src->lib_path, src->driver_root, src->sysfs_root,
				     src->proc_root };
	const char **to[] = { &o.lib_path, &o.driver_root, &o.sysfs_root, &o.proc_root };

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
	*o = (struct gpu_backend_opts){ 0 };
}
