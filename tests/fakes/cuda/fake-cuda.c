/*
 * The fake CUDA driver: every function of CUDA_API_FUNCTIONS (interposer/cuda-api.h) over
 * simulated devices, with the driver's semantics where the interposer depends on them: OOM when
 * a device is full, INVALID_VALUE for a pointer it never gave out, pools and graph memory
 * reserving device memory in 2 MiB steps, cuGetProcAddress answering by version and stream
 * flag, CUDA_VISIBLE_DEVICES selecting and ordering devices. fake-cuda.h says what the
 * environment sets. One lock guards all state: the fake is for correctness, not speed.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-cuda-int.h"

struct fake_state fake = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_va = VA_BASE };

static __thread struct cu_ctx *current_ctx;

void fake_obj_add(struct obj *o, enum obj_kind kind)
{
	o->kind = kind;
	o->next = fake.objs;
	fake.objs = o;
}

void *fake_obj_find(const void *p, enum obj_kind kind)
{
	for (struct obj *o = fake.objs; o; o = o->next)
		if (o == p && o->kind == kind)
			return o;
	return NULL;
}

void fake_obj_free(struct obj *o)
{
	for (struct obj **pp = &fake.objs; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			free(o);
			return;
		}
}

cu_deviceptr fake_va_take(uint64_t size, uint64_t align)
{
	cu_deviceptr p = fake_round_up(fake.next_va, align);

	fake.next_va = p + fake_round_up(size ? size : 1, PTR_ALIGN);
	return p;
}

/* --- the meter and the device's capacity --- */

static void shm_add(int phys, int64_t delta)
{
	struct fake_cuda_shm *s = fake.shm;
	uint64_t now, total, peak;

	if (!s)
		return;
	now = __atomic_add_fetch(&s->used[phys], (uint64_t)delta, __ATOMIC_SEQ_CST);
	total = __atomic_add_fetch(&s->total_used, (uint64_t)delta, __ATOMIC_SEQ_CST);
	peak = __atomic_load_n(&s->peak[phys], __ATOMIC_SEQ_CST);
	while (now > peak && !__atomic_compare_exchange_n(&s->peak[phys], &peak, now, false,
							  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	peak = __atomic_load_n(&s->total_peak, __ATOMIC_SEQ_CST);
	while (total > peak && !__atomic_compare_exchange_n(&s->total_peak, &peak, total, false,
							    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

/* Takes bytes of physical device memory; CU_RES_OUT_OF_MEMORY when the device is full. */
enum cu_result fake_charge(int phys, uint64_t bytes)
{
	struct device *d = &fake.dev[phys];

	if (bytes > d->total - d->used)
		return CU_RES_OUT_OF_MEMORY;
	d->used += bytes;
	shm_add(phys, (int64_t)bytes);
	return CU_RES_SUCCESS;
}

void fake_uncharge(int phys, uint64_t bytes)
{
	fake.dev[phys].used -= bytes;
	shm_add(phys, -(int64_t)bytes);
}

struct alloc **fake_alloc_slot(cu_deviceptr p)
{
	struct alloc **pp = &fake.allocs[(p / PTR_ALIGN) % HASH_BUCKETS];

	while (*pp && (*pp)->ptr != p)
		pp = &(*pp)->next;
	return pp;
}

enum cu_result fake_alloc_add(cu_deviceptr p, uint64_t size, int phys, enum alloc_kind kind,
			      struct cu_mem_pool *pool)
{
	struct alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return CU_RES_OUT_OF_MEMORY;
	*a = (struct alloc){ .ptr = p, .size = size, .phys = phys, .kind = kind, .pool = pool };
	a->next = fake.allocs[(p / PTR_ALIGN) % HASH_BUCKETS];
	fake.allocs[(p / PTR_ALIGN) % HASH_BUCKETS] = a;
	return CU_RES_SUCCESS;
}

/* --- set-up from the environment --- */

static void parse_uuid(int i)
{
	(void)snprintf(fake.dev[i].uuid, sizeof(fake.dev[i].uuid),
		       "GPU-00000000-0000-4000-8000-%012x", (unsigned)i);
}

static void open_shm(const char *path)
{
	struct stat st;
	void *m;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0) {
		(void)fprintf(stderr, "fake cuda: cannot open %s: %m\n", path);
		return;
	}
	if (fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(struct fake_cuda_shm) &&
	    ftruncate(fd, sizeof(struct fake_cuda_shm)) < 0)
		(void)fprintf(stderr, "fake cuda: cannot size %s: %m\n", path);
	m = mmap(NULL, sizeof(struct fake_cuda_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	(void)close(fd);
	if (m == MAP_FAILED) {
		(void)fprintf(stderr, "fake cuda: cannot map %s: %m\n", path);
		return;
	}
	fake.shm = m;
	uint64_t zero = 0;
	(void)__atomic_compare_exchange_n(&fake.shm->magic, &zero, FAKE_CUDA_SHM_MAGIC, false,
					  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* One CUDA_VISIBLE_DEVICES entry: a physical index, or -1 when it names no device. */
static int visible_entry(const char *s, size_t len)
{
	int found = -1;

	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (!len)
		return -1;
	if (!strncmp(s, "GPU-", 4)) {
		/* A UUID prefix names the one device whose UUID starts with it. */
		for (int i = 0; i < fake.n_phys; i++)
			if (!strncmp(fake.dev[i].uuid, s, len)) {
				if (found >= 0)
					return -1;
				found = i;
			}
		return found;
	}
	int v = 0;
	for (size_t k = 0; k < len; k++) {
		if (s[k] < '0' || s[k] > '9' || v > FAKE_CUDA_MAX)
			return -1;
		v = v * 10 + (s[k] - '0');
	}
	return v < fake.n_phys ? v : -1;
}

static void parse_visible(const char *env)
{
	fake.n_visible = 0;
	if (!env) {
		for (int i = 0; i < fake.n_phys; i++)
			fake.visible[fake.n_visible++] = i;
		return;
	}
	for (const char *s = env; *s && fake.n_visible < FAKE_CUDA_MAX;) {
		size_t len = strcspn(s, ",");
		int phys = visible_entry(s, len);

		for (int k = 0; k < fake.n_visible && phys >= 0; k++)
			if (fake.visible[k] == phys)
				phys = -1;
		if (phys < 0)
			break; /* the driver stops at the first entry it cannot use */
		fake.visible[fake.n_visible++] = phys;
		s += len;
		if (*s == ',')
			s++;
	}
}

/* A whole decimal number from the environment, or dflt when unset, empty or not a number. */
static long env_number(const char *name, long dflt)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || *s < '0' || *s > '9')
		return dflt;
	v = strtol(s, &end, 10);
	return *end ? dflt : v;
}

static void setup(void)
{
	const char *mib = getenv("EDGEGPU_FAKE_CUDA_MEM_MIB");
	const char *shm = getenv("EDGEGPU_FAKE_CUDA_SHM");
	unsigned long long m = DEFAULT_MIB;

	long n = env_number("EDGEGPU_FAKE_CUDA_DEVICES", 1);

	fake.n_phys = n > FAKE_CUDA_MAX ? FAKE_CUDA_MAX : (int)n;
	fake.version = (int)env_number("EDGEGPU_FAKE_CUDA_VERSION", DRIVER_VERSION);
	for (int i = 0; i < fake.n_phys; i++) {
		if (mib && *mib) {
			char *end;

			m = strtoull(mib, &end, 10);
			mib = *end == ',' ? end + 1 : NULL;
		}
		fake.dev[i].total = m << 20;
		parse_uuid(i);
	}
	parse_visible(getenv("CUDA_VISIBLE_DEVICES"));
	for (int i = 0; i < FAKE_CUDA_MAX; i++)
		fake.ctx[i].ordinal = i;
	if (shm && *shm)
		open_shm(shm);
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* Locks the fake after the one-time set-up. Returns CU_RES_NOT_INITIALIZED (unlocked) before a
 * successful cuInit, as the driver does. */
enum cu_result fake_enter(void)
{
	(void)pthread_once(&setup_once, setup);
	(void)pthread_mutex_lock(&fake.lock);
	if (!fake.initialized) {
		(void)pthread_mutex_unlock(&fake.lock);
		return CU_RES_NOT_INITIALIZED;
	}
	return CU_RES_SUCCESS;
}

enum cu_result fake_leave(enum cu_result r)
{
	(void)pthread_mutex_unlock(&fake.lock);
	return r;
}

/* The current context's device (physical index) or -1: allocations go there. */
int fake_current_phys(void)
{
	return current_ctx ? fake.visible[current_ctx->ordinal] : -1;
}

bool fake_ordinal_ok(cu_device d)
{
	return d >= 0 && d < fake.n_visible;
}

/* --- init, devices, contexts --- */

enum cu_result cuInit(unsigned flags)
{
	(void)pthread_once(&setup_once, setup);
	if (flags)
		return CU_RES_INVALID_VALUE;
	(void)pthread_mutex_lock(&fake.lock);
	if (!fake.n_visible)
		return fake_leave(CU_RES_NO_DEVICE);
	fake.initialized = true;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuDriverGetVersion(int *version)
{
	(void)pthread_once(&setup_once, setup);
	if (!version)
		return CU_RES_INVALID_VALUE;
	*version = fake.version;
	return CU_RES_SUCCESS;
}

enum cu_result cuDeviceGet(cu_device *device, int ordinal)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!device)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(ordinal))
		return fake_leave(CU_RES_INVALID_DEVICE);
	*device = ordinal;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuDeviceGetCount(int *count)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!count)
		return fake_leave(CU_RES_INVALID_VALUE);
	*count = fake.n_visible;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuDeviceGetUuid_v2(struct cu_uuid *uuid, cu_device dev)
{
	enum cu_result r = fake_enter();
	const char *s;
	int k = 0;

	if (r)
		return r;
	if (!uuid)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": the 32 hex digits are the 16 bytes. */
	s = fake.dev[fake.visible[dev]].uuid + 4;
	memset(uuid, 0, sizeof(*uuid));
	for (; *s && k < 32; s++) {
		int v = *s >= 'a' ? *s - 'a' + 10 : *s - '0';

		if (*s == '-')
			continue;
		uuid->bytes[k / 2] = (char)(uuid->bytes[k / 2] | (k % 2 ? v : v << 4));
		k++;
	}
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuDeviceGetUuid(struct cu_uuid *uuid, cu_device dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

enum cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device dev)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!bytes)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	*bytes = fake.dev[fake.visible[dev]].total;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuCtxGetDevice(cu_device *device)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!device)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!current_ctx)
		return fake_leave(CU_RES_INVALID_CONTEXT);
	*device = current_ctx->ordinal;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuDevicePrimaryCtxRetain(struct cu_ctx **pctx, cu_device dev)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!pctx)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	*pctx = &fake.ctx[dev];
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuCtxSetCurrent(struct cu_ctx *ctx)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (ctx && (ctx < fake.ctx || ctx >= fake.ctx + fake.n_visible))
		return fake_leave(CU_RES_INVALID_CONTEXT);
	current_ctx = ctx;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	enum cu_result r = fake_enter();
	int phys = fake_current_phys();

	if (r)
		return r;
	if (!free_bytes || !total)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (phys < 0)
		return fake_leave(CU_RES_INVALID_CONTEXT);
	*total = fake.dev[phys].total;
	*free_bytes = fake.dev[phys].total - fake.dev[phys].used;
	return fake_leave(CU_RES_SUCCESS);
}

/* --- cuGetProcAddress: the driver's answer by base name, version and stream flag --- */

struct proc {
	const char *base;
	void *fn;
	int version;
	bool ptsz;
};

#define PROC_ENTRY(base, sym, ver, ptsz) { #base, (void *)&(sym), (ver), (ptsz) },
static const struct proc procs[] = { CUDA_API_PROCS(PROC_ENTRY) };

static enum cu_result proc_lookup(const char *symbol, void **pfn, int version, cu_uint64 flags,
				  enum cu_proc_query_result *status)
{
	const struct proc *best = NULL;
	bool known = false;

	(void)pthread_once(&setup_once, setup);
	if (!symbol || !pfn)
		return CU_RES_INVALID_VALUE;
	if (version > fake.version ||
	    (flags & ~(cu_uint64)(CU_PROC_LEGACY_STREAM | CU_PROC_PER_THREAD_DEFAULT_STREAM)))
		return CU_RES_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];

		if (strcmp(p->base, symbol) != 0)
			continue;
		known = true;
		if (p->version > version)
			continue;
		/* The per-thread variant only on request; it replaces the legacy one then. */
		if (p->ptsz && !(flags & CU_PROC_PER_THREAD_DEFAULT_STREAM))
			continue;
		if (!best || p->version >= best->version)
			best = p;
	}
	if (best)
		*pfn = best->fn;
	if (status)
		*status = best	? CU_PROC_SUCCESS :
			  known ? CU_PROC_VERSION_NOT_SUFFICIENT :
				  CU_PROC_SYMBOL_NOT_FOUND;
	return CU_RES_SUCCESS;
}

/* The 11.x entry point: those drivers said CUDA_ERROR_NOT_FOUND for a symbol they lacked. */
enum cu_result cuGetProcAddress(const char *symbol, void **pfn, int version, cu_uint64 flags)
{
	enum cu_result r = proc_lookup(symbol, pfn, version, flags, NULL);

	return r == CU_RES_SUCCESS && !*pfn ? CU_RES_NOT_FOUND : r;
}

/* 12.0+: success with a NULL function and the reason in symbolStatus (cuda.h 13.0). */
enum cu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cu_uint64 flags,
				   enum cu_proc_query_result *status)
{
	return proc_lookup(symbol, pfn, version, flags, status);
}

/* --- plain, pitched and managed allocations --- */

static enum cu_result alloc_plain(cu_deviceptr *dptr, uint64_t size, enum alloc_kind kind)
{
	enum cu_result r = fake_enter();
	int phys = fake_current_phys();
	cu_deviceptr p;

	if (r)
		return r;
	if (!dptr || !size)
		return fake_leave(CU_RES_INVALID_VALUE);
	if (phys < 0)
		return fake_leave(CU_RES_INVALID_CONTEXT);
	r = fake_charge(phys, size);
	if (r)
		return fake_leave(r);
	p = fake_va_take(size, PTR_ALIGN);
	r = fake_alloc_add(p, size, phys, kind, NULL);
	if (r) {
		fake_uncharge(phys, size);
		return fake_leave(r);
	}
	*dptr = p;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemAlloc_v2(cu_deviceptr *dptr, size_t bytesize)
{
	return alloc_plain(dptr, bytesize, ALLOC_PLAIN);
}

enum cu_result cuMemAllocPitch_v2(cu_deviceptr *dptr, size_t *pitch, size_t width, size_t height,
				  unsigned elem)
{
	uint64_t p = fake_round_up(width, PTR_ALIGN);
	enum cu_result r;

	if (!pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CU_RES_INVALID_VALUE;
	if (height > UINT64_MAX / p)
		return CU_RES_OUT_OF_MEMORY;
	r = alloc_plain(dptr, p * height, ALLOC_PLAIN);
	if (r == CU_RES_SUCCESS)
		*pitch = p;
	return r;
}

enum cu_result cuMemAllocManaged(cu_deviceptr *dptr, size_t bytesize, unsigned flags)
{
	if (flags != CU_ATTACH_GLOBAL && flags != CU_ATTACH_HOST)
		return CU_RES_INVALID_VALUE;
	return alloc_plain(dptr, bytesize, ALLOC_MANAGED);
}

/* Frees an allocation of one of the kinds in mask (1 << enum alloc_kind); the lock is held. */
enum cu_result fake_free_locked(cu_deviceptr p, unsigned mask)
{
	struct alloc **pp = fake_alloc_slot(p), *a = *pp;

	if (!a || !(mask & (1u << a->kind)))
		return CU_RES_INVALID_VALUE;
	*pp = a->next;
	switch (a->kind) {
	case ALLOC_POOL:
		/* Back to the pool, which keeps the memory until trimmed. */
		a->pool->used -= a->size;
		if (a->pool->destroyed && !a->pool->used) {
			fake_pool_release(a->pool, 0);
			fake_obj_free(&a->pool->o);
		}
		break;
	case ALLOC_GRAPH:
		fake.dev[a->phys].graph_used -= a->size;
		break;
	default:
		fake_uncharge(a->phys, a->size);
	}
	free(a);
	return CU_RES_SUCCESS;
}

/* cuMemFree(0) is a no-op, as cudaFree(NULL) is. */
enum cu_result cuMemFree_v2(cu_deviceptr p)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!p)
		return fake_leave(CU_RES_SUCCESS);
	return fake_leave(fake_free_locked(p, ~0u));
}

/* --- virtual memory management --- */

enum cu_result cuMemCreate(cu_mem_handle *handle, size_t size, const struct cu_mem_alloc_prop *prop,
			   unsigned long long flags)
{
	enum cu_result r = fake_enter();
	struct vmm_handle *h;
	int phys = -1;

	if (r)
		return r;
	if (!handle || !prop || flags || !size || size % GRAN || prop->type != CU_ALLOC_PINNED)
		return fake_leave(CU_RES_INVALID_VALUE);
	switch (prop->location.type) {
	case CU_LOC_DEVICE:
		if (!fake_ordinal_ok(prop->location.id))
			return fake_leave(CU_RES_INVALID_DEVICE);
		phys = fake.visible[prop->location.id];
		break;
	case CU_LOC_HOST:
	case CU_LOC_HOST_NUMA:
	case CU_LOC_HOST_NUMA_CURRENT:
		break;
	default:
		return fake_leave(CU_RES_INVALID_VALUE);
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	if (phys >= 0 && (r = fake_charge(phys, size))) {
		free(h);
		return fake_leave(r);
	}
	h->phys = phys;
	h->size = size;
	h->refs = 1;
	fake_obj_add(&h->o, OBJ_HANDLE);
	*handle = (cu_mem_handle)(uintptr_t)h;
	return fake_leave(CU_RES_SUCCESS);
}

static void handle_unref(struct vmm_handle *h)
{
	if (--h->refs)
		return;
	if (h->phys >= 0)
		fake_uncharge(h->phys, h->size);
	fake_obj_free(&h->o);
}

/* The memory stays while a mapping holds it, as with the driver. */
enum cu_result cuMemRelease(cu_mem_handle handle)
{
	enum cu_result r = fake_enter();
	struct vmm_handle *h;

	if (r)
		return r;
	h = fake_obj_find((void *)(uintptr_t)handle, OBJ_HANDLE);
	if (!h || h->released)
		return fake_leave(CU_RES_INVALID_VALUE);
	h->released = true;
	handle_unref(h);
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemAddressReserve(cu_deviceptr *ptr, size_t size, size_t align, cu_deviceptr addr,
				   unsigned long long flags)
{
	enum cu_result r = fake_enter();
	struct vmm_range *v;

	(void)addr; /* a hint; the driver may ignore it too */
	if (r)
		return r;
	if (!ptr || !size || size % GRAN || flags || (align & (align - 1)))
		return fake_leave(CU_RES_INVALID_VALUE);
	v = calloc(1, sizeof(*v));
	if (!v)
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	v->start = fake_va_take(size, align > GRAN ? align : GRAN);
	v->size = size;
	fake_obj_add(&v->o, OBJ_RANGE);
	*ptr = v->start;
	return fake_leave(CU_RES_SUCCESS);
}

static struct vmm_range *range_containing(cu_deviceptr p, uint64_t size)
{
	for (struct obj *o = fake.objs; o; o = o->next) {
		struct vmm_range *v = (struct vmm_range *)o;

		if (o->kind == OBJ_RANGE && p >= v->start && p - v->start <= v->size &&
		    size <= v->size - (p - v->start))
			return v;
	}
	return NULL;
}

static bool mapped_within(cu_deviceptr p, uint64_t size)
{
	for (struct obj *o = fake.objs; o; o = o->next) {
		struct vmm_map *m = (struct vmm_map *)o;

		if (o->kind == OBJ_MAP && m->ptr < p + size && p < m->ptr + m->size)
			return true;
	}
	return false;
}

enum cu_result cuMemAddressFree(cu_deviceptr ptr, size_t size)
{
	enum cu_result r = fake_enter();
	struct vmm_range *v;

	if (r)
		return r;
	v = range_containing(ptr, size);
	if (!v || v->start != ptr || v->size != size || mapped_within(ptr, size))
		return fake_leave(CU_RES_INVALID_VALUE);
	fake_obj_free(&v->o);
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemMap(cu_deviceptr ptr, size_t size, size_t offset, cu_mem_handle handle,
			unsigned long long flags)
{
	enum cu_result r = fake_enter();
	struct vmm_handle *h;
	struct vmm_map *m;

	if (r)
		return r;
	h = fake_obj_find((void *)(uintptr_t)handle, OBJ_HANDLE);
	if (!h || flags || !size || size % GRAN || ptr % GRAN || offset % GRAN ||
	    offset > h->size || size > h->size - offset || !range_containing(ptr, size) ||
	    mapped_within(ptr, size))
		return fake_leave(CU_RES_INVALID_VALUE);
	m = calloc(1, sizeof(*m));
	if (!m)
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	m->ptr = ptr;
	m->size = size;
	m->h = h;
	h->refs++;
	fake_obj_add(&m->o, OBJ_MAP);
	return fake_leave(CU_RES_SUCCESS);
}

/* Unmaps every mapping inside [ptr, ptr + size); one that sticks out of it is refused. */
enum cu_result cuMemUnmap(cu_deviceptr ptr, size_t size)
{
	enum cu_result r = fake_enter();
	bool found = false;

	if (r)
		return r;
	for (struct obj *o = fake.objs; o; o = o->next) {
		struct vmm_map *m = (struct vmm_map *)o;

		if (o->kind != OBJ_MAP || !(m->ptr < ptr + size && ptr < m->ptr + m->size))
			continue;
		if (m->ptr < ptr || m->ptr + m->size > ptr + size)
			return fake_leave(CU_RES_INVALID_VALUE);
		found = true;
	}
	if (!found)
		return fake_leave(CU_RES_INVALID_VALUE);
	for (struct obj *o = fake.objs, *next; o; o = next) {
		struct vmm_map *m = (struct vmm_map *)o;

		next = o->next;
		if (o->kind == OBJ_MAP && m->ptr >= ptr && m->ptr < ptr + size) {
			struct vmm_handle *h = m->h;

			fake_obj_free(o);
			handle_unref(h);
		}
	}
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuMemSetAccess(cu_deviceptr ptr, size_t size, const struct cu_mem_access_desc *desc,
			      size_t count)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!desc || !count || !mapped_within(ptr, size))
		return fake_leave(CU_RES_INVALID_VALUE);
	for (size_t i = 0; i < count; i++)
		if (desc[i].location.type == CU_LOC_DEVICE && !fake_ordinal_ok(desc[i].location.id))
			return fake_leave(CU_RES_INVALID_DEVICE);
	return fake_leave(CU_RES_SUCCESS);
}
