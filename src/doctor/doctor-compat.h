#pragma once

/*
 * The compat layer's pure parts (doctor-compat.c), for the layer and its unit test: the CUDA
 * version text, NVIDIA's table of minimum drivers per CUDA toolkit, the judgement of a driver
 * against a requested CUDA version, the L4T -> CUDA mapping for Jetson, and the architecture
 * names. No I/O, no state; any thread.
 */

#include <stdbool.h>

#include "gpu.h"
#include "util.h"

/* "12.4" -> 12, 4. Only MAJOR.MINOR, digits, no sign or space. Returns 0 or -EINVAL. */
int doctor_cuda_parse(const char *s, unsigned *ret_major, unsigned *ret_minor) WARN_UNUSED;

/*
 * The minimum Linux x86_64 driver for CUDA @major.@minor's full feature set ("550.54.14"), or
 * NULL when the toolkit is not in the table (10.0 to 13.1).
 */
const char *doctor_cuda_min_driver(unsigned major, unsigned minor);
/* The minor version compatibility floor of a major (11 -> "450.80.02"), NULL for 10 and older. */
const char *doctor_cuda_major_floor(unsigned major);
/* Compares dotted driver versions numerically ("525.60.13" < "525.105.17"); bad text sorts first. */
int doctor_driver_cmp(const char *a, const char *b);
/* The newest CUDA in the table whose minimum is <= @driver. Returns 0, or -ENOENT (older). */
int doctor_cuda_for_driver(const char *driver, unsigned *ret_major, unsigned *ret_minor);

enum doctor_cuda_verdict {
	DOCTOR_CUDA_NATIVE,	 /* requested <= what the driver supports */
	DOCTOR_CUDA_MINOR,	 /* same major, newer minor: minor version compatibility (11+) */
	DOCTOR_CUDA_TOO_NEW,	 /* a newer major, or a newer 10.x minor: the runtime refuses */
	DOCTOR_CUDA_BELOW_FLOOR, /* same major, but the driver is under the major's floor */
};

/*
 * Judges CUDA @req_major.@req_minor on a driver that supports @nat_major.@nat_minor natively
 * (NVML's cuda_driver_version); @driver (may be NULL or "") is its version, checked against the
 * major's floor for minor version compatibility.
 */
enum doctor_cuda_verdict doctor_cuda_judge(unsigned req_major, unsigned req_minor,
					   unsigned nat_major, unsigned nat_minor,
					   const char *driver);

/*
 * Jetson: the CUDA an L4T release ships (gpu_board.l4t: "36.4.0" -> 12.6) and the newest
 * minor of that major NVIDIA's cuda-compat package for Jetson brings (R35: 11.8; R36 and later:
 * any minor of the major, *ret_compat_minor = UINT_MAX; R32: none, = the shipped minor).
 * Returns 0, or -EINVAL (not "<major>[.<revision>]") / -ENOENT (a release not in the table).
 */
int doctor_l4t_cuda(const char *l4t, unsigned *ret_major, unsigned *ret_minor,
		    unsigned *ret_compat_minor) WARN_UNUSED;

/*
 * The L4T release of @b as nv_tegra_release words it and jtop and NVIDIA's forums quote it:
 * "36.4.3" -> "R36 (release), REVISION: 4.3"; "unknown" without one. Into @buf (@size).
 */
void doctor_l4t_text(const struct gpu_board *b, char *buf, size_t size);

/* uname machine -> OCI architecture: x86_64 -> amd64, aarch64 -> arm64, ...; else @machine. */
const char *doctor_arch_name(const char *machine);
