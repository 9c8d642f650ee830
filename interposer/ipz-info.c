/*
 * What a process is told about memory: its slice, never more than the GPU has.
 *   total' = min(limit, physical total)
 *   free'  = min(total' - used (0 when over), physical free)   (physical free matters on
 *            Jetson, where it is the system's RAM)
 *   used   = what the container's live processes hold (NVML)
 * Never an error for being over the limit (HAMi #1370), and fresh: dead processes' slots are
 * collected first, so a second process never sees a dead one's usage (HAMi-core #191).
 */

#include "glibc-floor.h"
#include "ipz-int.h"

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The slice of GPU @gpu given the physical figures. */
static void slice(int gpu, uint64_t *total, uint64_t *free_, uint64_t *used)
{
	uint64_t t = min64(ipz.limits.gpus[gpu].limit, *total), u;

	(void)region_collect(&ipz.region);
	u = region_used(&ipz.region, (unsigned)gpu);
	*free_ = min64(u < t ? t - u : 0, *free_);
	*total = t;
	if (used)
		*used = u;
}

IPZ_EXPORT enum cu_result cuMemGetInfo_v2(size_t *free_, size_t *total)
{
	enum cu_result r, err = CU_RES_SUCCESS;
	uint64_t t, f;
	cu_device dev;
	int gpu;

	IPZ_ENTER(cuMemGetInfo_v2);
	r = ipz_real.cuMemGetInfo_v2(free_, total);
	if (r != CU_RES_SUCCESS || !ipz.enforcing || !free_ || !total)
		return r;
	gpu = ipz_dev_current(&dev, &err);
	if (gpu < 0)
		return r;
	t = *total;
	f = *free_;
	slice(gpu, &t, &f, NULL);
	*total = (size_t)t;
	*free_ = (size_t)f;
	return r;
}

IPZ_EXPORT enum cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device dev)
{
	enum cu_result r;
	int gpu;

	IPZ_ENTER(cuDeviceTotalMem_v2);
	r = ipz_real.cuDeviceTotalMem_v2(bytes, dev);
	if (r != CU_RES_SUCCESS || !ipz.enforcing || !bytes)
		return r;
	gpu = ipz_dev_gpu(dev);
	if (gpu >= 0)
		*bytes = (size_t)min64(ipz.limits.gpus[gpu].limit, *bytes);
	return r;
}

#define IPZ_NVML_ENTER(sym)                                       \
	do {                                                      \
		if (IPZ_UNLIKELY(!ipz_nvml_ready()))              \
			return IPZ_NVML_ERROR_LIBRARY_NOT_FOUND;  \
		if (IPZ_UNLIKELY(!ipz_real.sym))                  \
			return IPZ_NVML_ERROR_FUNCTION_NOT_FOUND; \
	} while (0)

IPZ_EXPORT int nvmlDeviceGetMemoryInfo(struct ipz_nvml_device *d, struct ipz_nvml_memory *m)
{
	uint64_t t, f, u;
	int r, gpu;

	IPZ_NVML_ENTER(nvmlDeviceGetMemoryInfo);
	r = ipz_real.nvmlDeviceGetMemoryInfo(d, m);
	if (r != IPZ_NVML_SUCCESS || !ipz.enforcing || !m)
		return r;
	gpu = ipz_dev_gpu_nvml(d);
	if (gpu < 0)
		return r;
	t = m->total;
	f = m->free;
	slice(gpu, &t, &f, &u);
	m->total = t;
	m->free = f;
	m->used = u;
	return r;
}

IPZ_EXPORT int nvmlDeviceGetMemoryInfo_v2(struct ipz_nvml_device *d, struct ipz_nvml_memory_v2 *m)
{
	uint64_t t, f, u;
	int r, gpu;

	IPZ_NVML_ENTER(nvmlDeviceGetMemoryInfo_v2);
	r = ipz_real.nvmlDeviceGetMemoryInfo_v2(d, m);
	if (r != IPZ_NVML_SUCCESS || !ipz.enforcing || !m)
		return r;
	gpu = ipz_dev_gpu_nvml(d);
	if (gpu < 0)
		return r;
	t = m->total;
	f = m->free;
	slice(gpu, &t, &f, &u);
	m->total = t;
	m->free = f;
	m->used = u;
	m->reserved = 0; /* the driver's own reservation is not the container's */
	return r;
}
