/*
 * The fake driver's memory that is reserved apart from the pointers handed out: stream-ordered
 * pools (RESERVED_MEM_CURRENT grows in 2 MiB steps as allocations need it, shrinks on
 * cuMemPoolTrimTo and, with the default release threshold of 0, on synchronization) and CUDA
 * arrays (their size rounded to 2 MiB, as cuArrayGetMemoryRequirements reports). Graph memory
 * is fake-cuda-graph.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "fake-cuda-int.h"

/* --- pools --- */

static struct cu_mem_pool *pool_new(int phys, bool is_default)
{
	struct cu_mem_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->phys = phys;
	p->is_default = is_default;
	fake_obj_add(&p->o, OBJ_POOL);
	return p;
}

static struct cu_mem_pool *default_pool(int phys)
{
	struct device *d = &fake.dev[phys];

	if (!d->default_pool)
		d->default_pool = pool_new(phys, true);
	return d->default_pool;
}

static struct cu_mem_pool *current_pool(int phys)
{
	struct device *d = &fake.dev[phys];

	return d->current_pool ? d->current_pool : default_pool(phys);
}

void fake_pool_release(struct cu_mem_pool *pool, uint64_t keep)
{
	uint64_t target = fake_round_up(pool->used > keep ? pool->used : keep, GRAN);

	if (target < pool->reserved) {
		fake_uncharge(pool->phys, pool->reserved - target);
		pool->reserved = target;
	}
}

/* Allocates from a pool, growing its reservation in 2 MiB steps when it must. */
static enum cu_result pool_alloc(cu_deviceptr *dptr, uint64_t size, struct cu_mem_pool *pool)
{
	uint64_t need;
	cu_deviceptr p;
	enum cu_result r;

	if (!dptr || !size)
		return CU_RES_INVALID_VALUE;
	if (!pool || pool->destroyed)
		return CU_RES_INVALID_VALUE;
	need = fake_round_up(pool->used + size, GRAN);
	if (need > pool->reserved) {
		r = fake_charge(pool->phys, need - pool->reserved);
		if (r)
			return r;
		pool->reserved = need;
		if (need > pool->reserved_high)
			pool->reserved_high = need;
	}
	p = fake_va_take(size, 512);
	r = fake_alloc_add(p, size, pool->phys, ALLOC_POOL, pool);
	if (r)
		return r;
	pool->used += size;
	if (pool->used > pool->used_high)
		pool->used_high = pool->used;
	*dptr = p;
	return CU_RES_SUCCESS;
}

/* The stream's device is the current context's: the fake knows only the NULL streams. */
static enum cu_result alloc_async(cu_deviceptr *dptr, size_t size)
{
	enum cu_result r = fake_enter();
	int phys = fake_current_phys();

	if (r)
		return r;
	if (phys < 0)
		return fake_leave(CU_RES_INVALID_CONTEXT);
	return fake_leave(pool_alloc(dptr, size, current_pool(phys)));
}

enum cu_result cuMemAllocAsync(cu_deviceptr *dptr, size_t bytesize, struct cu_stream *stream)
{
	(void)stream;
	return alloc_async(dptr, bytesize);
}

enum cu_result cuMemAllocAsync_ptsz(cu_deviceptr *dptr, size_t bytesize, struct cu_stream *stream)
{
	(void)stream;
	return alloc_async(dptr, bytesize);
}

static enum cu_result alloc_from_pool(cu_deviceptr *dptr, size_t size, struct cu_mem_pool *pool)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	return fake_leave(pool_alloc(dptr, size, fake_obj_find(pool, OBJ_POOL)));
}

enum cu_result cuMemAllocFromPoolAsync(cu_deviceptr *dptr, size_t bytesize,
				       struct cu_mem_pool *pool, struct cu_stream *stream)
{
	(void)stream;
	return alloc_from_pool(dptr, bytesize, pool);
}

enum cu_result cuMemAllocFromPoolAsync_ptsz(cu_deviceptr *dptr, size_t bytesize,
					    struct cu_mem_pool *pool, struct cu_stream *stream)
{
	(void)stream;
	return alloc_from_pool(dptr, bytesize, pool);
}

/* Stream-ordered frees take what the stream-ordered allocators and graphs gave out. */
static enum cu_result free_async(cu_deviceptr p)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	return fake_leave(fake_free_locked(p, 1u << ALLOC_POOL | 1u << ALLOC_GRAPH));
}

enum cu_result cuMemFreeAsync(cu_deviceptr dptr, struct cu_stream *stream)
{
	(void)stream;
	return free_async(dptr);
}

enum cu_result cuMemFreeAsync_ptsz(cu_deviceptr dptr, struct cu_stream *stream)
{
	(void)stream;
	return free_async(dptr);
}

enum cu_result cuMemPoolCreate(struct cu_mem_pool **pool, const struct cu_mem_pool_props *props)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!pool || !props || props->alloc_type != CU_ALLOC_PINNED ||
	    props->location.type != CU_LOC_DEVICE)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(props->location.id))
		return fake_leave(CU_RES_INVALID_DEVICE);
	*pool = pool_new(fake.visible[props->location.id], false);
	return fake_leave(*pool ? CU_RES_SUCCESS : CU_RES_OUT_OF_MEMORY);
}

/* Outstanding allocations keep a destroyed pool's memory until they are freed (the driver's
 * rule); its unused reservation goes at once. */
enum cu_result cuMemPoolDestroy(struct cu_mem_pool *pool)
{
	enum cu_result r = fake_enter();
	struct cu_mem_pool *p;

	if (r)
		return r;
	p = fake_obj_find(pool, OBJ_POOL);
	if (!p || p->destroyed || p->is_default)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (fake.dev[p->phys].current_pool == p)
		fake.dev[p->phys].current_pool = NULL;
	p->destroyed = true;
	fake_pool_release(p, 0);
	if (!p->used)
		fake_obj_free(&p->o);
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemPoolTrimTo(struct cu_mem_pool *pool, size_t keep)
{
	enum cu_result r = fake_enter();
	struct cu_mem_pool *p;

	if (r)
		return r;
	p = fake_obj_find(pool, OBJ_POOL);
	if (!p || p->destroyed)
		return fake_leave(CU_RES_INVALID_VALUE);
	fake_pool_release(p, keep);
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemPoolGetAttribute(struct cu_mem_pool *pool, enum cu_mempool_attr attr,
				     void *value)
{
	enum cu_result r = fake_enter();
	struct cu_mem_pool *p;
	cu_uint64 v;

	if (r)
		return r;
	p = fake_obj_find(pool, OBJ_POOL);
	if (!p || p->destroyed || !value)
		return fake_leave(CU_RES_INVALID_VALUE);
	switch (attr) {
	case CU_POOL_ATTR_RESERVED_MEM_CURRENT:
		v = p->reserved;
		break;
	case CU_POOL_ATTR_RESERVED_MEM_HIGH:
		v = p->reserved_high;
		break;
	case CU_POOL_ATTR_USED_MEM_CURRENT:
		v = p->used;
		break;
	case CU_POOL_ATTR_USED_MEM_HIGH:
		v = p->used_high;
		break;
	case CU_POOL_ATTR_RELEASE_THRESHOLD:
		v = 0;
		break;
	case CU_POOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_POOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_POOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = 1;
		return fake_leave(CU_RES_SUCCESS);
	default:
		return fake_leave(CU_RES_INVALID_VALUE);
	}
	memcpy(value, &v, sizeof(v));
	return fake_leave(CU_RES_SUCCESS);
}

static enum cu_result get_pool(struct cu_mem_pool **out, cu_device dev, bool dflt)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!out)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	*out = dflt ? default_pool(fake.visible[dev]) : current_pool(fake.visible[dev]);
	return fake_leave(*out ? CU_RES_SUCCESS : CU_RES_OUT_OF_MEMORY);
}

enum cu_result cuDeviceGetDefaultMemPool(struct cu_mem_pool **pool, cu_device dev)
{
	return get_pool(pool, dev, true);
}

enum cu_result cuDeviceGetMemPool(struct cu_mem_pool **pool, cu_device dev)
{
	return get_pool(pool, dev, false);
}

enum cu_result cuDeviceSetMemPool(cu_device dev, struct cu_mem_pool *pool)
{
	enum cu_result r = fake_enter();
	struct cu_mem_pool *p;

	if (r)
		return r;
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	p = fake_obj_find(pool, OBJ_POOL);
	if (!p || p->destroyed || p->phys != fake.visible[dev])
		return fake_leave(CU_RES_INVALID_VALUE);
	fake.dev[p->phys].current_pool = p;
	return fake_leave(CU_RES_SUCCESS);
}

/* The CUDA 13 entry points name the device by location; the fake has device pools only. */
static enum cu_result location_device(const struct cu_mem_location *loc,
				      enum cu_mem_alloc_type type, cu_device *ret)
{
	if (!loc || type != CU_ALLOC_PINNED)
		return CU_RES_INVALID_VALUE;
	if (loc->type != CU_LOC_DEVICE)
		return CU_RES_NOT_SUPPORTED;
	*ret = loc->id;
	return CU_RES_SUCCESS;
}

enum cu_result cuMemGetDefaultMemPool(struct cu_mem_pool **pool, struct cu_mem_location *loc,
				      enum cu_mem_alloc_type type)
{
	cu_device dev;
	enum cu_result r = location_device(loc, type, &dev);

	return r ? r : get_pool(pool, dev, true);
}

enum cu_result cuMemGetMemPool(struct cu_mem_pool **pool, struct cu_mem_location *loc,
			       enum cu_mem_alloc_type type)
{
	cu_device dev;
	enum cu_result r = location_device(loc, type, &dev);

	return r ? r : get_pool(pool, dev, false);
}

enum cu_result cuMemSetMemPool(struct cu_mem_location *loc, enum cu_mem_alloc_type type,
			       struct cu_mem_pool *pool)
{
	cu_device dev;
	enum cu_result r = location_device(loc, type, &dev);

	return r ? r : cuDeviceSetMemPool(dev, pool);
}

/* Synchronizing releases what pools hold beyond their use (release threshold 0). */
static enum cu_result synchronize(void)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	for (struct obj *o = fake.objs; o; o = o->next)
		if (o->kind == OBJ_POOL)
			fake_pool_release((struct cu_mem_pool *)o, 0);
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuStreamSynchronize(struct cu_stream *stream)
{
	(void)stream;
	return synchronize();
}

enum cu_result cuStreamSynchronize_ptsz(struct cu_stream *stream)
{
	(void)stream;
	return synchronize();
}

enum cu_result cuCtxSynchronize(void)
{
	return synchronize();
}

/* --- arrays --- */

/* Bytes of one level: width x height x depth x element x channels, 0 for a bad format. */
static uint64_t level_bytes(uint64_t w, uint64_t h, uint64_t d, enum cu_array_format f, unsigned ch)
{
	unsigned elem;

	switch (f) {
	case CU_FMT_UNSIGNED_INT8:
	case CU_FMT_SIGNED_INT8:
		elem = 1;
		break;
	case CU_FMT_UNSIGNED_INT16:
	case CU_FMT_SIGNED_INT16:
	case CU_FMT_HALF:
		elem = 2;
		break;
	case CU_FMT_UNSIGNED_INT32:
	case CU_FMT_SIGNED_INT32:
	case CU_FMT_FLOAT:
		elem = 4;
		break;
	default:
		return 0;
	}
	if ((ch != 1 && ch != 2 && ch != 4) || !w || w > (1u << 20) || h > (1u << 20) ||
	    d > (1u << 16))
		return 0;
	return w * (h ? h : 1) * (d ? d : 1) * elem * ch;
}

static enum cu_result array_new(void **ret, enum obj_kind kind, uint64_t bytes)
{
	enum cu_result r = fake_enter();
	int phys = fake_current_phys();
	struct fake_array *a;

	if (r)
		return r;
	if (!ret || !bytes)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (phys < 0)
		return fake_leave(CU_RES_INVALID_CONTEXT);
	a = calloc(1, sizeof(*a));
	if (!a)
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	a->size = fake_round_up(bytes, GRAN);
	a->phys = phys;
	r = fake_charge(phys, a->size);
	if (r) {
		free(a);
		return fake_leave(r);
	}
	fake_obj_add(&a->o, kind);
	*ret = a;
	return fake_leave(CU_RES_SUCCESS);
}

static enum cu_result array_destroy(void *h, enum obj_kind kind)
{
	enum cu_result r = fake_enter();
	struct fake_array *a;

	if (r)
		return r;
	a = fake_obj_find(h, kind);
	if (!a)
		return fake_leave(CU_RES_INVALID_HANDLE);
	fake_uncharge(a->phys, a->size);
	fake_obj_free(&a->o);
	return fake_leave(CU_RES_SUCCESS);
}

static enum cu_result array_requirements(struct cu_array_mem_req *req, void *h, enum obj_kind kind,
					 cu_device dev)
{
	enum cu_result r = fake_enter();
	struct fake_array *a;

	if (r)
		return r;
	a = fake_obj_find(h, kind);
	if (!req || !a)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	memset(req, 0, sizeof(*req));
	req->size = a->size;
	req->alignment = GRAN;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuArrayCreate_v2(struct cu_array **arr, const struct cu_array_desc *desc)
{
	if (!desc)
		return CU_RES_INVALID_VALUE;
	return array_new((void **)arr, OBJ_ARRAY,
			 level_bytes(desc->width, desc->height, 0, desc->format,
				     desc->num_channels));
}

enum cu_result cuArray3DCreate_v2(struct cu_array **arr, const struct cu_array3d_desc *desc)
{
	if (!desc)
		return CU_RES_INVALID_VALUE;
	return array_new((void **)arr, OBJ_ARRAY,
			 level_bytes(desc->width, desc->height, desc->depth, desc->format,
				     desc->num_channels));
}

enum cu_result cuArrayDestroy(struct cu_array *arr)
{
	return array_destroy(arr, OBJ_ARRAY);
}

enum cu_result cuArrayGetMemoryRequirements(struct cu_array_mem_req *req, struct cu_array *arr,
					    cu_device dev)
{
	return array_requirements(req, arr, OBJ_ARRAY, dev);
}

/* Every level halves each dimension that is not 0, down to 1. */
enum cu_result cuMipmappedArrayCreate(struct cu_mipmapped_array **arr,
				      const struct cu_array3d_desc *desc, unsigned levels)
{
	uint64_t total = 0;

	if (!desc || !levels || levels > 32)
		return CU_RES_INVALID_VALUE;
	for (unsigned l = 0; l < levels; l++) {
		uint64_t w = desc->width >> l, h = desc->height >> l, d = desc->depth >> l;
		uint64_t b = level_bytes(w ? w : 1, desc->height ? (h ? h : 1) : 0,
					 desc->depth ? (d ? d : 1) : 0, desc->format,
					 desc->num_channels);

		if (!b)
			return CU_RES_INVALID_VALUE;
		total += b;
	}
	return array_new((void **)arr, OBJ_MIPMAP, total);
}

enum cu_result cuMipmappedArrayDestroy(struct cu_mipmapped_array *arr)
{
	return array_destroy(arr, OBJ_MIPMAP);
}

enum cu_result cuMipmappedArrayGetMemoryRequirements(struct cu_array_mem_req *req,
						     struct cu_mipmapped_array *arr, cu_device dev)
{
	return array_requirements(req, arr, OBJ_MIPMAP, dev);
}
