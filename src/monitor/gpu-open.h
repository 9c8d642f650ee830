#pragma once

/*
 * The one way to open a GPU backend. It knows every backend built in, so it sits above them
 * (the backends call down into gpu/, never up into this); the interface is gpu/gpu-backend.h.
 */

#include "gpu-backend.h"

/*
 * Opens the backend @o->kind names (@o NULL: defaults, AUTO). AUTO tries each backend in
 * turn and takes the first that opens; when none does, the first one's error is returned.
 * NVML: loads the library with dlopen and initialises it. Returns 0, -ENOENT (library not
 * found), -ENOSYS (a required symbol missing), -EXDEV (driver/library version mismatch),
 * -EINVAL (unknown kind) or another -errno; @reterr gets a heap message that names what is
 * missing and how to fix it. *@ret is set only on success; close it with gpu_backend_close().
 */
int gpu_backend_open(const struct gpu_backend_opts *o, struct gpu_backend **ret,
		     char **reterr) WARN_UNUSED;
