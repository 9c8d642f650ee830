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
			ipz_pool_settle((struct cu_mem_pool *)(uintptr_t)e.extra);
		else
			(void)ipz_table_put(IPZ_K_POOL_PTR, dptr, &e);
		return r;
	}
	return ipz_real.cuMemFree_v2(dptr);
}

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
