#pragma once

/*
 * The one way to open a GPU backend. It knows every backend built in, so it sits above them
 * (the backends call down into gpu/, never up into this); the interface is gpu/gpu-backend.h.
 */

#include "gpu-backend.h"

/*
 * Opens the backend @o->kind names (@o NULL: defaults, AUTO). AUTO follows NVIDIA's rule:
 * NVML is loaded, then the Tegra backend opened over it (tegra_open()), which takes it on a
 * Tegra board whose NVML lists an integrated GPU or has no NVML at all; elsewhere NVML alone,
 * and when neither opens NVML's error. GPU_BACKEND_NVML: NVML only. GPU_BACKEND_TEGRA: the
 * Tegra backend, wrapping NVML when it loads (-ENODEV on a host without Tegra files).
 * NVML: loads the library with dlopen and initialises it. Returns 0, -ENOENT (library not
 * found), -ENOSYS (a required symbol missing), -EXDEV (driver/library version mismatch),
 * -EINVAL (unknown kind) or another -errno; @reterr gets a heap message that names what is
 * missing and how to fix it. *@ret is set only on success; close it with gpu_backend_close().
 */
int gpu_backend_open(const struct gpu_backend_opts *o, struct gpu_backend **ret,
		     char **reterr) WARN_UNUSED;
