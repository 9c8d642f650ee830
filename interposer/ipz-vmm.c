/*
 * Virtual memory management (CUDA 10.2+): cuMemCreate makes physical memory behind a handle,
 * cuMemMap puts it at an address, cuMemUnmap takes it away, cuMemRelease gives the handle up.
 * Part of ipz-alloc.c's accounting (the same reservation rule), apart only for size.
 *
 * The driver keeps a handle's physical memory until the handle is released AND its last
 * mapping is gone (cuda.h, cuMemRelease and cuMemUnmap): a program may release a handle right
 * after mapping it and keep using the memory. So a handle counts from cuMemCreate until both
 * have happened. The handle's table entry (IPZ_K_VMM) carries the number of its mappings and a
 * released flag in its extra; the mappings of counted handles are kept here, sorted by address,
 * because one cuMemUnmap may take several of them.
 *
 * Thread context: any thread. vmm_lock is held across cuMemMap, cuMemUnmap and cuMemRelease of
 * counted handles, so the driver's view and ours change together (these calls are rare and slow
 * in the driver anyway); cuMemCreate takes no lock beyond the region's.
 */

#include <stdlib.h>
#include <string.h>

#include "glibc-floor.h"
#include "ipz-int.h"

#define VMM_RELEASED UINT64_C(1)
#define VMM_MAP_ONE  UINT64_C(2)

struct mapping {
	cu_deviceptr ptr;
	cu_mem_handle handle;
};

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapping *maps; /* sorted by ptr; under vmm_lock */
static size_t n_maps, cap_maps;

/* The index of the first mapping at or above @ptr. */
static size_t maps_lower(cu_deviceptr ptr)
{
	size_t lo = 0, hi = n_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (maps[mid].ptr < ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Adds a mapping; false when no memory could be had for it. */
static bool maps_add(cu_deviceptr ptr, cu_mem_handle handle)
{
	size_t i;

	if (n_maps == cap_maps) {
		size_t cap = cap_maps ? 2 * cap_maps : 64;
		struct mapping *m = realloc(maps, cap * sizeof(*m));

		if (!m)
			return false;
		maps = m;
		cap_maps = cap;
	}
	i = maps_lower(ptr);
	memmove(&maps[i + 1], &maps[i], (n_maps - i) * sizeof(*maps));
	maps[i] = (struct mapping){ .ptr = ptr, .handle = handle };
	n_maps++;
	return true;
}

/* Gives the handle's count back when it is released and unmapped: it is gone in the driver. */
static void handle_drop_if_gone(cu_mem_handle handle, const struct ipz_entry *e)
{
	struct ipz_entry gone;

	if (e->extra != VMM_RELEASED)
		return;
	if (ipz_table_take(IPZ_K_VMM, handle, &gone))
		ipz_release(gone.gpu, gone.bytes);
}

IPZ_EXPORT enum cu_result cuMemCreate(cu_mem_handle *handle, size_t size,
				      const struct cu_mem_alloc_prop *prop,
				      unsigned long long flags)
{
	enum cu_result r;
	int gpu;

	IPZ_ENTER(cuMemCreate);
	/* Host locations (HOST, HOST_NUMA...) are not device memory: pass through. */
	if (!ipz.enforcing || !handle || !prop || prop->location.type != CU_LOC_DEVICE)
		return ipz_real.cuMemCreate(handle, size, prop, flags);
	gpu = ipz_dev_gpu(prop->location.id);
	if (gpu < 0)
		return ipz_real.cuMemCreate(handle, size, prop, flags);
	r = ipz_reserve(gpu, size);
	if (r != CU_RES_SUCCESS)
		return r;
	r = ipz_real.cuMemCreate(handle, size, prop, flags);
	if (r != CU_RES_SUCCESS) {
		ipz_release(gpu, size);
		return r;
	}
	if (!ipz_remember(IPZ_K_VMM, *handle, gpu, size, 0)) {
		(void)ipz_real.cuMemRelease(*handle);
		return CU_RES_OUT_OF_MEMORY;
	}
	return CU_RES_SUCCESS;
}

/* Released while mapped: still counted, until the last cuMemUnmap. */
IPZ_EXPORT enum cu_result cuMemRelease(cu_mem_handle handle)
{
	struct ipz_entry e;
	enum cu_result r;

	IPZ_ENTER(cuMemRelease);
	if (!ipz.enforcing)
		return ipz_real.cuMemRelease(handle);
	pthread_mutex_lock(&vmm_lock);
	if (!ipz_table_get(IPZ_K_VMM, handle, &e) || (e.extra & VMM_RELEASED)) {
		/* Not ours, or released before: the driver says what that is. */
		r = ipz_real.cuMemRelease(handle);
		goto out;
	}
	r = ipz_real.cuMemRelease(handle);
	if (r != CU_RES_SUCCESS)
		goto out;
	e.extra |= VMM_RELEASED;
	(void)ipz_table_set_extra(IPZ_K_VMM, handle, e.extra);
	handle_drop_if_gone(handle, &e);
out:
	pthread_mutex_unlock(&vmm_lock);
	return r;
}

IPZ_EXPORT enum cu_result cuMemMap(cu_deviceptr ptr, size_t size, size_t offset,
				   cu_mem_handle handle, unsigned long long flags)
{
	struct ipz_entry e;
	enum cu_result r;

	IPZ_ENTER(cuMemMap);
	if (!ipz.enforcing)
		return ipz_real.cuMemMap(ptr, size, offset, handle, flags);
	pthread_mutex_lock(&vmm_lock);
	r = ipz_real.cuMemMap(ptr, size, offset, handle, flags);
	if (r != CU_RES_SUCCESS || !ipz_table_get(IPZ_K_VMM, handle, &e))
		goto out;
	if (!maps_add(ptr, handle)) {
		/* Unrecorded, the mapping could outlive the count: undo it. */
		(void)ipz_real.cuMemUnmap(ptr, size);
		IPZ_SAY_ONCE("out of memory for the mapping table: a cuMemMap was refused");
		r = CU_RES_OUT_OF_MEMORY;
		goto out;
	}
	(void)ipz_table_set_extra(IPZ_K_VMM, handle, e.extra + VMM_MAP_ONE);
out:
	pthread_mutex_unlock(&vmm_lock);
	return r;
}

/* The driver unmaps every mapping inside [ptr, ptr + size): so do we, after it. */
IPZ_EXPORT enum cu_result cuMemUnmap(cu_deviceptr ptr, size_t size)
{
	enum cu_result r;
	size_t i, j;

	IPZ_ENTER(cuMemUnmap);
	if (!ipz.enforcing)
		return ipz_real.cuMemUnmap(ptr, size);
	pthread_mutex_lock(&vmm_lock);
	r = ipz_real.cuMemUnmap(ptr, size);
	if (r != CU_RES_SUCCESS || n_maps == 0)
		goto out;
	i = maps_lower(ptr);
	for (j = i; j < n_maps && maps[j].ptr - ptr < size; j++) {
		struct ipz_entry e;

		if (!ipz_table_get(IPZ_K_VMM, maps[j].handle, &e) || e.extra < VMM_MAP_ONE)
			continue;
		e.extra -= VMM_MAP_ONE;
		(void)ipz_table_set_extra(IPZ_K_VMM, maps[j].handle, e.extra);
		handle_drop_if_gone(maps[j].handle, &e);
	}
	memmove(&maps[i], &maps[j], (n_maps - j) * sizeof(*maps));
	n_maps -= j - i;
out:
	pthread_mutex_unlock(&vmm_lock);
	return r;
}
