#pragma once

/*
 * The NVML backend: discrete NVIDIA GPUs through libnvidia-ml.so.1, loaded with dlopen (never
 * linked). Its one public entry is the opener that gpu_backend_open() (monitor/gpu-open.h)
 * calls; everything else is private to this directory (nvml-int.h).
 */

#include "gpu-backend.h"

/*
 * Loads NVML under @o->driver_root (or the default search), initialises it and returns the
 * backend in *@ret. Returns 0 or -errno as gpu_backend_open() documents; @reterr gets a heap
 * message that says what is missing and how to fix it.
 */
int nvml_open(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr);
