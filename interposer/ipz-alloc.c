/*
 * Every producer of device memory, counted in the shared region (gpu-sharing.md 6.4 point 3).
 * The rule on every path: reserve in the region BEFORE the real call (atomic across the
 * container's processes, so their sum never passes the limit), call the driver, roll the
 * reservation back when it fails, and settle it to what the driver really took where that is
 * known only afterwards (a pitch, an array's layout, a pool's growth). A limit hit is always
 * CUDA_ERROR_OUT_OF_MEMORY. A free of something we never counted still reaches the driver.
 *
 * Without a limits file (not a gpumem container) every wrapper is a plain call of the real
 * function. In report mode (the driver enforces) the region counts and never refuses.
 */

#include <errno.h>
#include <string.h>

#include "glibc-floor.h"
#include "ipz-int.h"

enum cu_result ipz_reserve(int gpu, uint64_t bytes)
{
	int r;

	if (gpu < 0 || bytes == 0)
		return CU_RES_SUCCESS;
	r = region_reserve(&ipz.region, (unsigned)gpu, bytes);
	if (IPZ_LIKELY(r == 0))
		return CU_RES_SUCCESS;
	if (r == -ENOMEM)
		return CU_RES_OUT_OF_MEMORY;
	/* No slot for this process (the region's 2,048 are taken by live processes). */
	IPZ_SAY_ONCE("cannot reserve in the shared region (%s)", strerror(-r));
	return ipz.report_only ? CU_RES_SUCCESS : CU_RES_OUT_OF_MEMORY;
}

void ipz_release(int gpu, uint64_t bytes)
{
	if (gpu >= 0 && bytes > 0)
		region_release(&ipz.region, (unsigned)gpu, bytes);
}

enum cu_result ipz_settle(int gpu, uint64_t had, uint64_t want)
{
	if (want > had)
		return ipz_reserve(gpu, want - had);
	ipz_release(gpu, had - want);
	return CU_RES_SUCCESS;
}

bool ipz_remember(enum ipz_kind kind, uint64_t key, int gpu, uint64_t bytes, uint64_t extra)
{
	struct ipz_entry e = { .gpu = gpu, .bytes = bytes, .extra = extra };

	if (ipz_table_put(kind, key, &e) == 0)
		return true;
	ipz_release(gpu, bytes);
	IPZ_SAY_ONCE("out of memory for the allocation table: an allocation was refused");
	return false;
}

/* ---- cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2 ---- */

enum linear {
	LINEAR_PLAIN,	/* cuMemAlloc_v2(dptr, w) */
	LINEAR_PITCH,	/* cuMemAllocPitch_v2(dptr, pitch, w, h, x) */
	LINEAR_MANAGED, /* cuMemAllocManaged(dptr, w, x) */
};

static enum cu_result linear_call(enum linear k, cu_deviceptr *dptr, size_t *pitch, size_t w,
				  size_t h, unsigned x)
{
	switch (k) {
	case LINEAR_PITCH:
		return ipz_real.cuMemAllocPitch_v2(dptr, pitch, w, h, x);
	case LINEAR_MANAGED:
		return ipz_real.cuMemAllocManaged(dptr, w, x);
	default:
		return ipz_real.cuMemAlloc_v2(dptr, w);
	}
}

/* The pitch is the driver's choice (at most 512-byte alignment): reserve that, settle after. */
static uint64_t pitch_estimate(size_t width, size_t height)
{
	uint64_t w = ((uint64_t)width + 511) & ~UINT64_C(511), v;

	return __builtin_mul_overflow(w, (uint64_t)height, &v) ? 0 : v;
}

/*
 * The linear allocations, freed by cuMemFree_v2: reserve (the pitch's estimate), allocate,
 * settle to the returned pitch x height, remember; undo all on a refusal. Managed memory
 * counts by the limits file's policy, and always on an integrated GPU, where it is the same
 * DRAM as device memory (Jetson).
 */
static enum cu_result linear_alloc(enum linear k, cu_deviceptr *dptr, size_t *pitch, size_t w,
				   size_t h, unsigned x)
{
	enum cu_result r = CU_RES_SUCCESS;
	cu_device dev = 0;
	uint64_t est, real;
	int gpu;

	if (!ipz.enforcing || !dptr || (k == LINEAR_PITCH ? !pitch : w == 0))
		return linear_call(k, dptr, pitch, w, h, x);
	gpu = ipz_dev_current(&dev, &r);
	if (gpu == IPZ_DEV_ERROR)
		return r;
	if (gpu < 0 || (k == LINEAR_MANAGED && !ipz.count_managed && !ipz_dev_integrated(dev)))
		return linear_call(k, dptr, pitch, w, h, x);
	est = k == LINEAR_PITCH ? pitch_estimate(w, h) : w;
	r = ipz_reserve(gpu, est);
	if (r != CU_RES_SUCCESS)
		return r;
	r = linear_call(k, dptr, pitch, w, h, x);
	if (r != CU_RES_SUCCESS) {
		ipz_release(gpu, est);
		return r;
	}
	real = k == LINEAR_PITCH ? (uint64_t)*pitch * h : est;
	if (ipz_settle(gpu, est, real) != CU_RES_SUCCESS) {
		ipz_release(gpu, est);
		(void)ipz_real.cuMemFree_v2(*dptr);
		return CU_RES_OUT_OF_MEMORY;
	}
	if (!ipz_remember(IPZ_K_PTR, *dptr, gpu, real, 0)) {
		(void)ipz_real.cuMemFree_v2(*dptr);
		return CU_RES_OUT_OF_MEMORY;
	}
	return CU_RES_SUCCESS;
}

IPZ_EXPORT enum cu_result cuMemAlloc_v2(cu_deviceptr *dptr, size_t size)
{
	IPZ_ENTER(cuMemAlloc_v2);
	return linear_alloc(LINEAR_PLAIN, dptr, NULL, size, 0, 0);
}

IPZ_EXPORT enum cu_result cuMemAllocPitch_v2(cu_deviceptr *dptr, size_t *pitch, size_t width,
					     size_t height, unsigned elem)
{
	IPZ_ENTER(cuMemAllocPitch_v2);
	return linear_alloc(LINEAR_PITCH, dptr, pitch, width, height, elem);
}

IPZ_EXPORT enum cu_result cuMemAllocManaged(cu_deviceptr *dptr, size_t size, unsigned flags)
{
	IPZ_ENTER(cuMemAllocManaged);
	return linear_alloc(LINEAR_MANAGED, dptr, NULL, size, 0, flags);
}

static void pool_reconcile(struct cu_mem_pool *pool);

IPZ_EXPORT enum cu_result cuMemFree_v2(cu_deviceptr dptr)
{
	struct ipz_entry e;
	enum cu_result r;

	IPZ_ENTER(cuMemFree_v2);
	if (!ipz.enforcing)
		return ipz_real.cuMemFree_v2(dptr);
	/*
	 * Out of the table before the free: until the driver frees it the address cannot be
	 * handed out again, so no other thread's new entry can meet ours.
	 */
	if (ipz_table_take(IPZ_K_PTR, dptr, &e)) {
		r = ipz_real.cuMemFree_v2(dptr);
		if (r == CU_RES_SUCCESS)
			ipz_release(e.gpu, e.bytes);
		else
			(void)ipz_table_put(IPZ_K_PTR, dptr, &e);
		return r;
	}
	/* A stream-ordered allocation may be freed here too: its pool is settled after. */
	if (ipz_table_take(IPZ_K_POOL_PTR, dptr, &e)) {
		r = ipz_real.cuMemFree_v2(dptr);
		if (r == CU_RES_SUCCESS)
			pool_reconcile((struct cu_mem_pool *)(uintptr_t)e.extra);
		else
			(void)ipz_table_put(IPZ_K_POOL_PTR, dptr, &e);
		return r;
	}
	return ipz_real.cuMemFree_v2(dptr);
}

/* ---- stream-ordered allocation: pools, counted by their reserved memory ---- */

/*
 * A pool's counted bytes follow its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: the driver reserves
 * in chunks and keeps freed memory for reuse, so what a pool holds, not what its pointers
 * add up to, is what the GPU has lost. One lock serialises the settling of all pools.
 */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

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

/*
 * Settles @pool's count to its reserved memory, given @pending bytes already reserved for it
 * by the caller (taken into the count). Returns CUDA_ERROR_OUT_OF_MEMORY when the pool grew
 * past what can be reserved: then nothing changed and the caller still holds @pending.
 */
static enum cu_result pool_settle(struct cu_mem_pool *pool, int gpu, uint64_t pending)
{
	enum cu_result r = CU_RES_SUCCESS;
	struct ipz_entry e;
	cu_uint64 now = 0;

	pthread_mutex_lock(&pool_lock);
	if (!ipz_table_get(IPZ_K_POOL, (uintptr_t)pool, &e))
		goto out; /* destroyed meanwhile */
	if (!ipz_real.cuMemPoolGetAttribute ||
	    ipz_real.cuMemPoolGetAttribute(pool, CU_POOL_ATTR_RESERVED_MEM_CURRENT, &now) !=
		    CU_RES_SUCCESS)
		now = e.bytes + pending; /* unreadable: count what was asked */
	r = ipz_settle(gpu, e.bytes + pending, now);
	if (r == CU_RES_SUCCESS)
		(void)ipz_table_set_bytes(IPZ_K_POOL, (uintptr_t)pool, now);
out:
	pthread_mutex_unlock(&pool_lock);
	return r;
}

static void pool_reconcile(struct cu_mem_pool *pool)
{
	int gpu = pool_gpu(pool);

	if (gpu >= 0 && pool_settle(pool, gpu, 0) != CU_RES_SUCCESS)
		IPZ_SAY_ONCE("a memory pool grew past the limit outside an allocation");
}

typedef enum cu_result pool_alloc_fn(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				     struct cu_stream *stream, const void *real);
typedef enum cu_result free_async_fn(cu_deviceptr, struct cu_stream *);

/* Reserve the request, allocate, settle the pool to its growth; undo all on a refusal. */
static enum cu_result pool_alloc(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool,
				 struct cu_stream *stream, int gpu, pool_alloc_fn *call,
				 const void *real, free_async_fn *free_async)
{
	struct ipz_entry stale;
	enum cu_result r;

	if (gpu < 0)
		return call(dptr, size, pool, stream, real);
	r = ipz_reserve(gpu, size);
	if (r != CU_RES_SUCCESS)
		return r;
	r = call(dptr, size, pool, stream, real);
	if (r != CU_RES_SUCCESS) {
		ipz_release(gpu, size);
		return r;
	}
	if (pool_settle(pool, gpu, size) != CU_RES_SUCCESS) {
		ipz_release(gpu, size);
		if (free_async)
			(void)free_async(*dptr, stream);
		return CU_RES_OUT_OF_MEMORY;
	}
	/*
	 * Only to find the pool at the free; the bytes are the pool's. An entry left at this
	 * address by a pool destroyed with the pointer still in it is replaced.
	 */
	(void)ipz_table_take(IPZ_K_POOL_PTR, *dptr, &stale);
	(void)ipz_remember(IPZ_K_POOL_PTR, *dptr, -1, 0, (uintptr_t)pool);
	return CU_RES_SUCCESS;
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
		pool_reconcile((struct cu_mem_pool *)(uintptr_t)e.extra);
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
		pool_reconcile(pool);
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
	if (r == CU_RES_SUCCESS)
		ipz_release(e.gpu, e.bytes);
	else
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

/* ---- arrays and mipmapped arrays: an estimate first, the driver's requirement after ---- */

static uint64_t format_bytes(enum cu_array_format f)
{
	switch (f) {
	case CU_FMT_UNSIGNED_INT8:
	case CU_FMT_SIGNED_INT8:
		return 1;
	case CU_FMT_UNSIGNED_INT16:
	case CU_FMT_SIGNED_INT16:
	case CU_FMT_HALF:
		return 2;
	default:
		return 4; /* 32-bit formats; block-compressed ones are settled after */
	}
}

/* Bytes of a w x h x d array (0 on overflow: then only the settling counts). */
static uint64_t array_bytes(size_t w, size_t h, size_t d, enum cu_array_format f, unsigned ch)
{
	uint64_t v = (uint64_t)w;

	if (__builtin_mul_overflow(v, (uint64_t)(h ? h : 1), &v) ||
	    __builtin_mul_overflow(v, (uint64_t)(d ? d : 1), &v) ||
	    __builtin_mul_overflow(v, (uint64_t)(ch ? ch : 1) * format_bytes(f), &v))
		return 0;
	return v;
}

static uint64_t mipmap_bytes(const struct cu_array3d_desc *a, unsigned levels)
{
	uint64_t sum = 0, b;
	unsigned l;

	for (l = 0; l < levels && l < 64; l++) {
		size_t w = a->width >> l, h = a->height >> l, d = a->depth >> l;

		b = array_bytes(w ? w : 1, a->height ? (h ? h : 1) : 0, a->depth ? (d ? d : 1) : 0,
				a->format, a->num_channels);
		if (b == 0 || __builtin_add_overflow(sum, b, &sum))
			return 0;
		if (!w && !h && !d)
			break;
	}
	return sum;
}

/* The driver's own figure for an array (CUDA 11.6+); @est when it has none. */
static uint64_t array_required(struct cu_array *arr, struct cu_mipmapped_array *mm, cu_device dev,
			       uint64_t est)
{
	struct cu_array_mem_req req = { 0 };
	enum cu_result r = CU_RES_NOT_FOUND;

	if (arr && ipz_real.cuArrayGetMemoryRequirements)
		r = ipz_real.cuArrayGetMemoryRequirements(&req, arr, dev);
	else if (mm && ipz_real.cuMipmappedArrayGetMemoryRequirements)
		r = ipz_real.cuMipmappedArrayGetMemoryRequirements(&req, mm, dev);
	return r == CU_RES_SUCCESS && req.size > 0 ? req.size : est;
}

typedef enum cu_result array_create_fn(void **obj, const void *desc, unsigned levels);

static enum cu_result array_destroy(enum ipz_kind kind, void *obj)
{
	return kind == IPZ_K_ARRAY ? ipz_real.cuArrayDestroy(obj) :
				     ipz_real.cuMipmappedArrayDestroy(obj);
}

/*
 * Creates an array (@kind IPZ_K_ARRAY) or a mipmapped array (IPZ_K_MIPMAP) on the context's
 * device: reserves the estimate @est, creates, settles to the driver's own requirement and
 * remembers it; undoes all on a refusal.
 */
static enum cu_result array_create(enum ipz_kind kind, void **obj, const void *desc,
				   unsigned levels, uint64_t est, array_create_fn *create)
{
	enum cu_result r = CU_RES_SUCCESS;
	cu_device dev = 0;
	uint64_t real;
	int gpu = -1;

	if (ipz.enforcing && obj && desc) {
		gpu = ipz_dev_current(&dev, &r);
		if (gpu == IPZ_DEV_ERROR)
			return r;
		r = ipz_reserve(gpu, est);
		if (r != CU_RES_SUCCESS)
			return r;
	}
	r = create(obj, desc, levels);
	if (gpu < 0)
		return r;
	if (r != CU_RES_SUCCESS) {
		ipz_release(gpu, est);
		return r;
	}
	real = array_required(kind == IPZ_K_ARRAY ? *obj : NULL, kind == IPZ_K_MIPMAP ? *obj : NULL,
			      dev, est);
	if (ipz_settle(gpu, est, real) != CU_RES_SUCCESS) {
		ipz_release(gpu, est);
		(void)array_destroy(kind, *obj);
		return CU_RES_OUT_OF_MEMORY;
	}
	if (!ipz_remember(kind, (uintptr_t)*obj, gpu, real, 0)) {
		(void)array_destroy(kind, *obj);
		return CU_RES_OUT_OF_MEMORY;
	}
	return CU_RES_SUCCESS;
}

static enum cu_result create_2d(void **obj, const void *desc, unsigned levels)
{
	return ipz_real.cuArrayCreate_v2((struct cu_array **)obj, desc);
}

static enum cu_result create_3d(void **obj, const void *desc, unsigned levels)
{
	return ipz_real.cuArray3DCreate_v2((struct cu_array **)obj, desc);
}

static enum cu_result create_mipmapped(void **obj, const void *desc, unsigned levels)
{
	return ipz_real.cuMipmappedArrayCreate((struct cu_mipmapped_array **)obj, desc, levels);
}

IPZ_EXPORT enum cu_result cuArrayCreate_v2(struct cu_array **arr, const struct cu_array_desc *a)
{
	IPZ_ENTER(cuArrayCreate_v2);
	return array_create(IPZ_K_ARRAY, (void **)arr, a, 0,
			    a ? array_bytes(a->width, a->height, 0, a->format, a->num_channels) : 0,
			    create_2d);
}

IPZ_EXPORT enum cu_result cuArray3DCreate_v2(struct cu_array **arr, const struct cu_array3d_desc *a)
{
	IPZ_ENTER(cuArray3DCreate_v2);
	return array_create(
		IPZ_K_ARRAY, (void **)arr, a, 0,
		a ? array_bytes(a->width, a->height, a->depth, a->format, a->num_channels) : 0,
		create_3d);
}

IPZ_EXPORT enum cu_result cuMipmappedArrayCreate(struct cu_mipmapped_array **mm,
						 const struct cu_array3d_desc *a, unsigned levels)
{
	IPZ_ENTER(cuMipmappedArrayCreate);
	return array_create(IPZ_K_MIPMAP, (void **)mm, a, levels, a ? mipmap_bytes(a, levels) : 0,
			    create_mipmapped);
}

static enum cu_result destroy_counted(enum ipz_kind kind, uint64_t key, void *obj)
{
	struct ipz_entry e;
	enum cu_result r;
	bool had = ipz.enforcing && ipz_table_take(kind, key, &e);

	r = array_destroy(kind, obj);
	if (had) {
		if (r == CU_RES_SUCCESS)
			ipz_release(e.gpu, e.bytes);
		else
			(void)ipz_table_put(kind, key, &e);
	}
	return r;
}

IPZ_EXPORT enum cu_result cuArrayDestroy(struct cu_array *arr)
{
	IPZ_ENTER(cuArrayDestroy);
	return destroy_counted(IPZ_K_ARRAY, (uintptr_t)arr, arr);
}

IPZ_EXPORT enum cu_result cuMipmappedArrayDestroy(struct cu_mipmapped_array *mm)
{
	IPZ_ENTER(cuMipmappedArrayDestroy);
	return destroy_counted(IPZ_K_MIPMAP, (uintptr_t)mm, mm);
}
