#pragma once

/*
 * The fake CUDA driver (libcuda.so.1 built from interposer/cuda-api.h): simulated devices with
 * real allocation semantics, for the interposer's tests. Environment, read at the first call:
 *
 *   EDGEGPU_FAKE_CUDA_DEVICES   number of physical devices (default 1, at most FAKE_CUDA_MAX)
 *   EDGEGPU_FAKE_CUDA_MEM_MIB   memory per device in MiB (default 16384); a comma list gives
 *                               each device its own ("8192,4096"), the last one repeating
 *   EDGEGPU_FAKE_CUDA_VERSION   what cuDriverGetVersion says (default 13000)
 *   EDGEGPU_FAKE_CUDA_SHM       a file holding struct fake_cuda_shm: the device memory in use
 *                               over every process that names it, and the most ever in use
 *   CUDA_VISIBLE_DEVICES        as the driver reads it: indices or UUID prefixes ("GPU-..."),
 *                               selecting and ordering devices; the first entry that names no
 *                               device (or one already named) ends the list
 *
 * Device i's UUID is GPU-00000000-0000-4000-8000-<i as 12 hex digits>, the fake NVML's default.
 * Memory is process-local, as each process had a device to itself: the SHM file is only a
 * meter, so that a test sees what all processes together held at once.
 */

#include <stdint.h>

#define FAKE_CUDA_MAX	    16
#define FAKE_CUDA_SHM_MAGIC UINT64_C(0x314d485341444346) /* "FCDASHM1" little-endian */

/* The shared meter (EDGEGPU_FAKE_CUDA_SHM); the file is created zeroed when missing or empty
 * and is updated with atomics only (no lock), by physical device index. Device memory means
 * what a real device would give up: allocations, managed memory, device-located cuMemCreate
 * handles, pool and graph reservations, arrays. Not VMM address reservations, not host memory. */
struct fake_cuda_shm {
	uint64_t magic;
	uint64_t used[FAKE_CUDA_MAX]; /* bytes held now, by all processes */
	uint64_t peak[FAKE_CUDA_MAX]; /* the most ever held at once */
	uint64_t total_used;	      /* over all devices */
	uint64_t total_peak;
};
