/*
 * Stream-ordered allocation (CUDA 11.2+): cuMemAllocAsync and cuMemAllocFromPoolAsync take
 * memory from a pool, which reserves device memory in chunks and keeps what is freed for reuse
 * until it is trimmed (cuMemPoolTrimTo) or, above its release threshold (0 by default), until
 * the next stream, event or context synchronization (cuda.h, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD).
 * Part of ipz-alloc.c's accounting (the same reservation rule), apart only for size.
 *
 * A pool counts by its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, not by its pointers: what the pool
 * holds is what the GPU has lost. Before an allocation only the part the pool's free reserve
 * (RESERVED_MEM_CURRENT - USED_MEM_CURRENT) cannot serve is reserved (reserving the whole
 * request refused what the pool could serve from memory already counted); after it the count
 * settles to the pool's reserved memory. Memory the driver gives back is seen by settling
 * again after cuMemFreeAsync, cuMemFree_v2 of a pool pointer, cuMemPoolTrimTo and every
 * cuStreamSynchronize(_ptsz) / cuCtxSynchronize, for the pools this process allocated from.
 *
 * Thread context: any thread. pool_lock serialises every pool's allocation with its settling
 * (held across the driver's allocation, so two threads cannot both count on the same free
 * reserve) and guards the list of pools in use.
 */

#include <stdlib.h>

#include "glibc-floor.h"
#include "ipz-int.h"

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
/* The pools this process allocated from (settled at synchronization); under pool_lock. */
static struct cu_mem_pool **in_use;
static size_t n_in_use, cap_in_use;

/* Learns a pool's GPU when we see it handed out or created (a known pool keeps its own). */
static void pool_learn(struct cu_mem_pool *pool, int gpu)
{
	struct ipz_entry e = { .gpu = gpu };

	if (pool)
		(void)ipz_table_put(IPZ_K_POOL, (uintptr_t)pool, &e);
}

static int pool_gpu(struct cu_mem_pool *pool)
{
	struct ipz_entry e;

	return ipz_table_get(IPZ_K_POOL, (uintptr_t)pool, &e) ? e.gpu : -1;
}

/* Adds @pool to the pools in use (pool_lock held). Without memory for the list the pool is
 * still settled at its own frees and trims, only not at synchronizations: said once. */
static void in_use_add(struct cu_mem_pool *pool)
{
	size_t i;

	for (i = 0; i < n_in_use; i++)
		if (in_use[i] == pool)
			return;
	if (n_in_use == cap_in_use) {
		size_t cap = cap_in_use ? 2 * cap_in_use : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct cu_mem_pool **p = realloc(in_use, cap * sizeof(*p));

		if (!p) {
			IPZ_SAY_ONCE("out of memory for the pool list: a pool is not settled at "
				     "synchronizations");
			return;
		}
		in_use = p;
		cap_in_use = cap;
	}
	__atomic_store_n(&in_use[n_in_use], pool, __ATOMIC_RELAXED);
	__atomic_store_n(&n_in_use, n_in_use + 1, __ATOMIC_RELEASE);
}

static void in_use_remove(struct cu_mem_pool *pool)
{
	for (size_t i = 0; i < n_in_use; i++)
		if (in_use[i] == pool) {
			in_use[i] = in_use[n_in_use - 1];
			__atomic_store_n(&n_in_use, n_in_use - 1, __ATOMIC_RELEASE);
			return;
		}
}

/* A pool attribute, or false when the driver cannot say. */
static bool pool_attr(struct cu_mem_pool *pool, enum cu_mempool_attr attr, uint64_t *ret)
{
	cu_uint64 v = 0;

	if (!ipz_real.cuMemPoolGetAttribute ||
	    ipz_real.cuMemPoolGetAttribute(pool, attr, &v) != CU_RES_SUCCESS)
		return false;
	*ret = v;
	return true;
}

/*
 * Settles @pool's count to its reserved memory, given @pending bytes already reserved for it
 * by the caller (taken into the count); pool_lock held. Returns CUDA_ERROR_OUT_OF_MEMORY when
 * the pool grew past what can be reserved: then nothing changed and the caller still holds
 * @pending.
 */
static enum cu_result pool_settle_locked(struct cu_mem_pool *pool, uint64_t pending)
{
	enum cu_result r;
	struct ipz_entry e;
	uint64_t now;

	if (!ipz_table_get(IPZ_K_POOL, (uintptr_t)pool, &e) || e.gpu < 0)
		return CU_RES_SUCCESS; /* destroyed meanwhile, or no limit */
	if (!pool_attr(pool, CU_POOL_ATTR_RESERVED_MEM_CURRENT, &now))
		now = e.bytes + pending; /* unreadable: count what was asked */
	r = ipz_settle(e.gpu, e.bytes + pending, now);
	if (r == CU_RES_SUCCESS)
		(void)ipz_table_set_bytes(IPZ_K_POOL, (uintptr_t)pool, now);
	return r;
}

void ipz_pool_settle(struct cu_mem_pool *pool)
{
	enum cu_result r;

	pthread_mutex_lock(&pool_lock);
	r = pool_settle_locked(pool, 0);
	pthread_mutex_unlock(&pool_lock);
	if (r != CU_RES_SUCCESS)
		IPZ_SAY_ONCE("a memory pool grew past the limit outside an allocation");
}

/* After a synchronization: the driver may have given back what pools held beyond their use. */
static void pools_settle_all(void)
{
	bool grew = false;

	if (!ipz.enforcing || __atomic_load_n(&n_in_use, __ATOMIC_ACQUIRE) == 0)
		return;
	pthread_mutex_lock(&pool_lock);
	for (size_t i = 0; i < n_in_use; i++)
		grew |= pool_settle_locked(in_use[i], 0) != CU_RES_SUCCESS;
	pthread_mutex_unlock(&pool_lock);
	if (grew)
		IPZ_SAY_ONCE("a memory pool grew past the limit outside an allocation");
}

typedef enum cu_result pool_alloc_fn(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				     struct cu_stream *stream, const void *real);
typedef enum cu_result free_async_fn(cu_deviceptr, struct cu_stream *);

/* What an allocation of @size must reserve beyond the pool's free reserve. */
static uint64_t pool_shortfall(struct cu_mem_pool *pool, size_t size)
{
	uint64_t reserved, used, spare;

	if (!pool_attr(pool, CU_POOL_ATTR_RESERVED_MEM_CURRENT, &reserved) ||
	    !pool_attr(pool, CU_POOL_ATTR_USED_MEM_CURRENT, &used))
		return size;
	spare = reserved > used ? reserved - used : 0;
	return size > spare ? size - spare : 0;
}

/*
 * Reserves what the pool's free reserve cannot serve, allocates, settles the pool to what it
 * holds; undoes all on a refusal (a pointer the count cannot take is freed, and the pool
 * trimmed back to what was counted, so a refusal leaves nothing behind).
 */
static enum cu_result pool_alloc(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				 struct cu_stream *stream, int gpu, pool_alloc_fn *call,
				 const void *real, free_async_fn *free_async)
{
	struct ipz_entry stale, e;
	enum cu_result r;
	uint64_t need;

	if (gpu < 0)
		return call(dptr, size, pool, stream, real);
	pthread_mutex_lock(&pool_lock);
	need = pool_shortfall(pool, size);
	r = ipz_reserve(gpu, need);
	if (r != CU_RES_SUCCESS)
		goto out;
	r = call(dptr, size, pool, stream, real);
	if (r != CU_RES_SUCCESS) {
		ipz_release(gpu, need);
		goto out;
	}
	if (pool_settle_locked(pool, need) != CU_RES_SUCCESS) {
		/* The pool grew by more than the shortfall, past the limit. */
		ipz_release(gpu, need);
		if (free_async)
			(void)free_async(*dptr, stream);
		if (ipz_real.cuMemPoolTrimTo && ipz_table_get(IPZ_K_POOL, (uintptr_t)pool, &e))
			(void)ipz_real.cuMemPoolTrimTo(pool, e.bytes);
		(void)pool_settle_locked(pool, 0);
		r = CU_RES_OUT_OF_MEMORY;
		goto out;
	}
	in_use_add(pool);
	/*
	 * Only to find the pool at the free; the bytes are the pool's. An entry left at this
	 * address by a pool destroyed with the pointer still in it is replaced.
	 */
	(void)ipz_table_take(IPZ_K_POOL_PTR, *dptr, &stale);
	(void)ipz_remember(IPZ_K_POOL_PTR, *dptr, -1, 0, (uintptr_t)pool);
out:
	pthread_mutex_unlock(&pool_lock);
	return r;
}

static enum cu_result call_alloc_async(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				       struct cu_stream *stream, const void *real)
{
	return ((cu_fn_cuMemAllocAsync *)real)(dptr, size, stream);
}

static enum cu_result call_alloc_from_pool(cu_deviceptr *dptr, size_t size,
					   struct cu_mem_pool *pool, struct cu_stream *stream,
					   const void *real)
{
	return ((cu_fn_cuMemAllocFromPoolAsync *)real)(dptr, size, pool, stream);
}

/* cuMemAllocAsync takes the current pool of the stream's device (the context's device). */
static enum cu_result alloc_async(cu_deviceptr *dptr, size_t size, struct cu_stream *stream,
				  cu_fn_cuMemAllocAsync *real, free_async_fn *free_async)
{
	struct cu_mem_pool *pool = NULL;
	enum cu_result r = CU_RES_SUCCESS;
	cu_device dev = 0;
	int gpu;

	if (!ipz.enforcing || !dptr || size == 0)
		return real(dptr, size, stream);
	gpu = ipz_dev_current(&dev, &r);
	if (gpu == IPZ_DEV_ERROR)
		return r;
	if (gpu < 0 || !ipz_real.cuDeviceGetMemPool ||
	    ipz_real.cuDeviceGetMemPool(&pool, dev) != CU_RES_SUCCESS || !pool)
		return real(dptr, size, stream);
	pool_learn(pool, gpu);
	return pool_alloc(dptr, size, pool, stream, pool_gpu(pool), call_alloc_async,
			  (const void *)real, free_async);
}

IPZ_EXPORT enum cu_result cuMemAllocAsync(cu_deviceptr *dptr, size_t size, struct cu_stream *s)
{
	IPZ_ENTER(cuMemAllocAsync);
	return alloc_async(dptr, size, s, ipz_real.cuMemAllocAsync, ipz_real.cuMemFreeAsync);
}

IPZ_EXPORT enum cu_result cuMemAllocAsync_ptsz(cu_deviceptr *dptr, size_t size, struct cu_stream *s)
{
	IPZ_ENTER(cuMemAllocAsync_ptsz);
	return alloc_async(dptr, size, s, ipz_real.cuMemAllocAsync_ptsz,
			   ipz_real.cuMemFreeAsync_ptsz);
}

static enum cu_result alloc_from_pool(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				      struct cu_stream *stream, cu_fn_cuMemAllocFromPoolAsync *real,
				      free_async_fn *free_async)
{
	struct ipz_entry e;

	if (!ipz.enforcing || !dptr || !pool || size == 0)
		return real(dptr, size, pool, stream);
	if (!ipz_table_get(IPZ_K_POOL, (uintptr_t)pool, &e)) {
		/* A pool we never saw made (imported): the context's device, as the driver's. */
		enum cu_result err;
		cu_device dev;
		int gpu = ipz_dev_current(&dev, &err);

		pool_learn(pool, gpu < 0 ? -1 : gpu);
	}
	return pool_alloc(dptr, size, pool, stream, pool_gpu(pool), call_alloc_from_pool,
			  (const void *)real, free_async);
}

IPZ_EXPORT enum cu_result cuMemAllocFromPoolAsync(cu_deviceptr *dptr, size_t size,
						  struct cu_mem_pool *pool, struct cu_stream *s)
{
	IPZ_ENTER(cuMemAllocFromPoolAsync);
	return alloc_from_pool(dptr, size, pool, s, ipz_real.cuMemAllocFromPoolAsync,
			       ipz_real.cuMemFreeAsync);
}

IPZ_EXPORT enum cu_result cuMemAllocFromPoolAsync_ptsz(cu_deviceptr *dptr, size_t size,
						       struct cu_mem_pool *pool,
						       struct cu_stream *s)
{
	IPZ_ENTER(cuMemAllocFromPoolAsync_ptsz);
	return alloc_from_pool(dptr, size, pool, s, ipz_real.cuMemAllocFromPoolAsync_ptsz,
			       ipz_real.cuMemFreeAsync_ptsz);
}

static enum cu_result free_async(cu_deviceptr dptr, struct cu_stream *s, free_async_fn *real)
{
	struct ipz_entry e;
	enum cu_result r;

	if (!ipz.enforcing || !ipz_table_take(IPZ_K_POOL_PTR, dptr, &e))
		return real(dptr, s);
	r = real(dptr, s);
	if (r != CU_RES_SUCCESS)
		(void)ipz_table_put(IPZ_K_POOL_PTR, dptr, &e);
	else
		ipz_pool_settle((struct cu_mem_pool *)(uintptr_t)e.extra);
	return r;
}

IPZ_EXPORT enum cu_result cuMemFreeAsync(cu_deviceptr dptr, struct cu_stream *s)
{
	IPZ_ENTER(cuMemFreeAsync);
	return free_async(dptr, s, ipz_real.cuMemFreeAsync);
}

IPZ_EXPORT enum cu_result cuMemFreeAsync_ptsz(cu_deviceptr dptr, struct cu_stream *s)
{
	IPZ_ENTER(cuMemFreeAsync_ptsz);
	return free_async(dptr, s, ipz_real.cuMemFreeAsync_ptsz);
}

IPZ_EXPORT enum cu_result cuMemPoolTrimTo(struct cu_mem_pool *pool, size_t keep)
{
	enum cu_result r;

	IPZ_ENTER(cuMemPoolTrimTo);
	r = ipz_real.cuMemPoolTrimTo(pool, keep);
	if (r == CU_RES_SUCCESS && ipz.enforcing)
		ipz_pool_settle(pool);
	return r;
}

IPZ_EXPORT enum cu_result cuMemPoolCreate(struct cu_mem_pool **pool,
					  const struct cu_mem_pool_props *props)
{
	enum cu_result r;

	IPZ_ENTER(cuMemPoolCreate);
	r = ipz_real.cuMemPoolCreate(pool, props);
	if (r == CU_RES_SUCCESS && ipz.enforcing && pool && props)
		pool_learn(*pool, props->location.type == CU_LOC_DEVICE ?
					  ipz_dev_gpu(props->location.id) :
					  -1);
	return r;
}

IPZ_EXPORT enum cu_result cuMemPoolDestroy(struct cu_mem_pool *pool)
{
	struct ipz_entry e;
	enum cu_result r;

	IPZ_ENTER(cuMemPoolDestroy);
	if (!ipz.enforcing)
		return ipz_real.cuMemPoolDestroy(pool);
	pthread_mutex_lock(&pool_lock);
	if (!ipz_table_take(IPZ_K_POOL, (uintptr_t)pool, &e)) {
		pthread_mutex_unlock(&pool_lock);
		return ipz_real.cuMemPoolDestroy(pool);
	}
	r = ipz_real.cuMemPoolDestroy(pool);
	if (r == CU_RES_SUCCESS) {
		ipz_release(e.gpu, e.bytes);
		in_use_remove(pool);
	} else
		(void)ipz_table_put(IPZ_K_POOL, (uintptr_t)pool, &e);
	pthread_mutex_unlock(&pool_lock);
	return r;
}

/* A pool handed out for a device or location: learn its GPU (host locations: none). */
#define IPZ_POOL_GETTER(sym, params, args, gpu)                   \
	IPZ_EXPORT enum cu_result sym params                      \
	{                                                         \
		enum cu_result r;                                 \
		IPZ_ENTER(sym);                                   \
		r = ipz_real.sym args;                            \
		if (r == CU_RES_SUCCESS && ipz.enforcing && pool) \
			pool_learn(*pool, gpu);                   \
		return r;                                         \
	}

static int location_gpu(const struct cu_mem_location *loc)
{
	return loc && loc->type == CU_LOC_DEVICE ? ipz_dev_gpu(loc->id) : -1;
}

IPZ_POOL_GETTER(cuDeviceGetDefaultMemPool, (struct cu_mem_pool * *pool, cu_device dev), (pool, dev),
		ipz_dev_gpu(dev))
IPZ_POOL_GETTER(cuDeviceGetMemPool, (struct cu_mem_pool * *pool, cu_device dev), (pool, dev),
		ipz_dev_gpu(dev))
/* CUDA 13: pools by location and allocation type. */
IPZ_POOL_GETTER(cuMemGetDefaultMemPool,
		(struct cu_mem_pool * *pool, struct cu_mem_location *loc,
		 enum cu_mem_alloc_type type),
		(pool, loc, type), location_gpu(loc))
IPZ_POOL_GETTER(cuMemGetMemPool,
		(struct cu_mem_pool * *pool, struct cu_mem_location *loc,
		 enum cu_mem_alloc_type type),
		(pool, loc, type), location_gpu(loc))

/* Synchronizing lets the driver give back what pools hold above their release threshold. */
#define IPZ_POOL_SYNC(sym, params, args)     \
	IPZ_EXPORT enum cu_result sym params \
	{                                    \
		enum cu_result r;            \
		IPZ_ENTER(sym);              \
		r = ipz_real.sym args;       \
		pools_settle_all();          \
		return r;                    \
	}

IPZ_POOL_SYNC(cuStreamSynchronize, (struct cu_stream * s), (s))
IPZ_POOL_SYNC(cuStreamSynchronize_ptsz, (struct cu_stream * s), (s))
IPZ_POOL_SYNC(cuCtxSynchronize, (void), ())
