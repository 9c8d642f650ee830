/* Choosing a GPU backend: NVML, Tegra, or Tegra wrapping NVML, by NVIDIA's rule (gpu-open.h). */

#define LOG_MODULE "gpu-open"

#include "gpu-open.h"

#include <errno.h>
#include <stdlib.h>

#include "gpu-nvml.h"
#include "gpu-tegra.h"
#include "log.h"

/* Hands @err to the caller's *@reterr (or frees it); returns @r. */
static int give_error(char **reterr, char *err, int r)
{
	if (reterr) {
		free(*reterr);
		*reterr = err;
	} else {
		free(err);
	}
	return r;
}

int gpu_backend_open(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr)
{
	static const struct gpu_backend_opts defaults = { 0 };
	struct gpu_backend *nvml = NULL;
	char *nvml_err = NULL, *err = NULL;
	int nvml_r, r;

	if (!o)
		o = &defaults;
	if (o->kind < 0 || o->kind >= GPU_BACKEND_COUNT)
		return set_error(reterr, -EINVAL, "unknown GPU backend kind %d", (int)o->kind);
	nvml_r = nvml_open(o, &nvml, &nvml_err);
	if (o->kind == GPU_BACKEND_NVML) {
		if (nvml_r < 0)
			return give_error(reterr, nvml_err, nvml_r);
		free(nvml_err);
		*ret = nvml;
		return 0;
	}
	if (nvml_r < 0)
		log_debug("nvml not loaded, trying the tegra backend alone", "reason=%s",
			  nvml_err ? nvml_err : "?");
	/* On success Tegra owns NVML; on failure NVML is still ours. */
	r = tegra_open(o, nvml_r < 0 ? NULL : nvml, ret, &err);
	if (r >= 0) {
		free(nvml_err);
		free(err);
		return 0;
	}
	/* The Tegra kind, or a Tegra board that fails otherwise (its device ID): Tegra's error. */
	if (o->kind == GPU_BACKEND_TEGRA || r != -ENODEV) {
		gpu_backend_close(nvml);
		free(nvml_err);
		return give_error(reterr, err, r);
	}
	/* AUTO on a host that is no Tegra board by NVIDIA's rule: NVML, or NVML's error. */
	free(err);
	if (nvml_r < 0)
		return give_error(reterr, nvml_err, nvml_r);
	free(nvml_err);
	*ret = nvml;
	return 0;
}
