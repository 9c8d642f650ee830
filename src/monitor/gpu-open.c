/* Choosing a GPU backend: each built-in one in turn (gpu-open.h). */

#include "gpu-open.h"

#include <errno.h>
#include <stdlib.h>

#include "gpu-nvml.h"

static const struct {
	enum gpu_backend_kind kind;
	int (*open)(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr);
} backends[] = {
	{ GPU_BACKEND_NVML, nvml_open },
	/* The Tegra (sysfs/devfreq) backend goes here, after NVML: a Jetson with NVML uses it. */
};

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
