/*
 * The fake NVML library's exported functions. Every function counts its calls, honours the
 * injected failures ("fail FUNC CODE [NTH]"), the NOT_SUPPORTED lists, a version mismatch
 * ("mismatch on") and a driver reload ("reload": UNINITIALIZED until nvmlInit_v2 again).
 * Here: the entry rules, library and system, devices, events, and loading. The others live by
 * concern beside it: fake-telemetry.c, fake-counters.c, fake-gpm.c, fake-limits.c, fake-mig.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

/* Declaring every exported function from the lists makes the compiler check each definition
   below against the prototype nvml-api.h gives (and the ABI test checks those). */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)
NVML_API_FAKE_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

#define HANDLE_MAGIC 0x6e766d6cU
#define NEED_INIT    1U
#define ID(sym)	     FAKE_FN_##sym
#define MIN(a, b)    ((a) < (b) ? (a) : (b))

struct fake_state fake = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
};

static bool fn_bit(const uint64_t *mask, enum fake_fn fn)
{
	return (mask[fn / 64] >> (fn % 64)) & 1;
}

/* What a call that needs the library initialised gets now. With fake.mu held. */
static enum nvml_return init_state(void)
{
	if (fake.fx.mismatch)
		return NVML_RET_LIB_RM_VERSION_MISMATCH;
	if (fake.stale || fake.init_count <= 0)
		return NVML_RET_UNINITIALIZED;
	return NVML_RET_SUCCESS;
}

/* One wait of a call held by "block", counted in "blocked FUNC": until fake.cond is
   broadcast. With fake.mu held (released meanwhile). */
static void block_wait(enum fake_fn fn)
{
	fake.blocked_in[fn]++;
	(void)pthread_cond_broadcast(&fake.cond);
	(void)pthread_cond_wait(&fake.cond, &fake.mu);
	fake.blocked_in[fn]--;
}

/* Counts the call and applies the global rules. With fake.mu held. */
static enum nvml_return enter_locked(enum fake_fn fn, unsigned flags)
{
	struct fake_fail *f = &fake.fx.fail[fn];

	fake.counts[fn]++;
	/* A hung driver call: wait (the lock released) until the control socket releases it. */
	while (fn_bit(fake.blocked, fn))
		block_wait(fn);
	if (f->active) {
		if (f->nth == 0)
			return f->code;
		if (++f->seen == f->nth) {
			f->active = false;
			return f->code;
		}
	}
	if (fn_bit(fake.fx.not_supported, fn))
		return NVML_RET_NOT_SUPPORTED;
	return (flags & NEED_INIT) ? init_state() : NVML_RET_SUCCESS;
}

/* Locks; returns SUCCESS with fake.mu held, or an error with it released. */
static enum nvml_return enter(enum fake_fn fn, unsigned flags)
{
	enum nvml_return r;

	(void)pthread_mutex_lock(&fake.mu);
	r = enter_locked(fn, flags);
	if (r != NVML_RET_SUCCESS)
		(void)pthread_mutex_unlock(&fake.mu);
	return r;
}

static enum nvml_return leave(enum nvml_return r)
{
	(void)pthread_mutex_unlock(&fake.mu);
	return r;
}

static struct nvml_device *handle_of(unsigned gpu)
{
	struct fake_handle *h = &fake.handles[fake.gen % FAKE_GEN_SLOTS][gpu];

	h->magic = HANDLE_MAGIC;
	h->gpu = gpu;
	h->gen = fake.gen;
	return (struct nvml_device *)h;
}

/* Resolves a handle of the current generation. With fake.mu held. */
static enum nvml_return gpu_of(struct nvml_device *d, enum fake_fn fn, struct fake_gpu **ret,
			       unsigned *ret_index)
{
	uintptr_t p = (uintptr_t)d, base = (uintptr_t)fake.handles;
	struct fake_handle *h = (struct fake_handle *)d;
	struct fake_gpu *g;

	if (p < base || p >= base + sizeof(fake.handles) ||
	    (p - base) % sizeof(struct fake_handle) != 0)
		return NVML_RET_INVALID_ARGUMENT;
	if (h->magic != HANDLE_MAGIC || h->gen != fake.gen || h->gpu >= fake.fx.n_gpus)
		return NVML_RET_INVALID_ARGUMENT;
	g = &fake.fx.gpus[h->gpu];
	if (g->lost)
		return NVML_RET_GPU_IS_LOST;
	if (fn_bit(g->not_supported, fn))
		return NVML_RET_NOT_SUPPORTED;
	*ret = g;
	if (ret_index)
		*ret_index = h->gpu;
	return NVML_RET_SUCCESS;
}

/* enter() plus the device: SUCCESS with fake.mu held and *ret set, or an error, unlocked. */
static enum nvml_return enter_dev(enum fake_fn fn, struct nvml_device *d, struct fake_gpu **ret)
{
	unsigned gpu;
	enum nvml_return r = enter(fn, NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	r = gpu_of(d, fn, ret, &gpu);
	/* "block FUNC GPU": a call hung on this GPU only; the world may change meanwhile. */
	while (r == NVML_RET_SUCCESS && (fake.blocked_gpus[fn] >> gpu) & 1) {
		block_wait(fn);
		r = init_state();
		if (r == NVML_RET_SUCCESS)
			r = gpu_of(d, fn, ret, &gpu);
	}
	if (r != NVML_RET_SUCCESS)
		(void)leave(r);
	return r;
}

static enum nvml_return copy_out(char *buf, unsigned len, const char *s)
{
	size_t n = strlen(s);

	if (!buf)
		return NVML_RET_INVALID_ARGUMENT;
	if (len < n + 1)
		return NVML_RET_INSUFFICIENT_SIZE;
	memcpy(buf, s, n + 1);
	return NVML_RET_SUCCESS;
}

static unsigned long long supported_events(const struct fake_gpu *g)
{
	if (g->events_set)
		return g->events;
	return NVML_EVENT_XID_CRITICAL | NVML_EVENT_PSTATE |
	       (g->ecc ? NVML_EVENT_SINGLE_BIT_ECC | NVML_EVENT_DOUBLE_BIT_ECC : 0);
}

enum nvml_return fake_enter(enum fake_fn fn, bool need_init)
{
	return enter(fn, need_init ? NEED_INIT : 0);
}

enum nvml_return fake_enter_dev(enum fake_fn fn, struct nvml_device *d, struct fake_gpu **ret)
{
	return enter_dev(fn, d, ret);
}

enum nvml_return fake_leave(enum nvml_return r)
{
	return leave(r);
}

/* --- library and system --- */

enum nvml_return nvmlInit_v2(void)
{
	enum nvml_return r = enter(ID(nvmlInit_v2), 0);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (fake.fixture_error[0])
		return leave(NVML_RET_UNKNOWN);
	if (fake.fx.init_error != NVML_RET_SUCCESS)
		return leave(fake.fx.init_error);
	if (fake.fx.mismatch)
		return leave(NVML_RET_LIB_RM_VERSION_MISMATCH);
	fake.init_count++;
	fake.stale = false;
	(void)pthread_cond_broadcast(&fake.cond);
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlShutdown(void)
{
	enum nvml_return r = enter(ID(nvmlShutdown), 0);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (fake.init_count <= 0)
		return leave(NVML_RET_UNINITIALIZED);
	fake.init_count--;
	(void)pthread_cond_broadcast(&fake.cond);
	return leave(NVML_RET_SUCCESS);
}

const char *nvmlErrorString(enum nvml_return result)
{
	(void)pthread_mutex_lock(&fake.mu);
	fake.counts[ID(nvmlErrorString)]++;
	(void)pthread_mutex_unlock(&fake.mu);
	return fake_error_string(result);
}

enum nvml_return nvmlSystemGetDriverVersion(char *version, unsigned length)
{
	enum nvml_return r = enter(ID(nvmlSystemGetDriverVersion), NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	return leave(copy_out(version, length, fake.fx.driver_version));
}

/* Answers without nvmlInit and during a mismatch: it only describes the library. */
enum nvml_return nvmlSystemGetNVMLVersion(char *version, unsigned length)
{
	enum nvml_return r = enter(ID(nvmlSystemGetNVMLVersion), 0);

	if (r != NVML_RET_SUCCESS)
		return r;
	return leave(copy_out(version, length, fake.fx.nvml_version));
}

static enum nvml_return cuda_version(enum fake_fn fn, int *v)
{
	enum nvml_return r = enter(fn, NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!v)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*v = fake.fx.cuda_version;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlSystemGetCudaDriverVersion(int *v)
{
	return cuda_version(ID(nvmlSystemGetCudaDriverVersion), v);
}

enum nvml_return nvmlSystemGetCudaDriverVersion_v2(int *v)
{
	return cuda_version(ID(nvmlSystemGetCudaDriverVersion_v2), v);
}

/* --- devices --- */

enum nvml_return nvmlDeviceGetCount_v2(unsigned *count)
{
	enum nvml_return r = enter(ID(nvmlDeviceGetCount_v2), NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!count)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*count = fake.fx.n_gpus;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned index, struct nvml_device **device)
{
	enum nvml_return r = enter(ID(nvmlDeviceGetHandleByIndex_v2), NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (index >= fake.fx.n_gpus || !device)
		return leave(NVML_RET_INVALID_ARGUMENT);
	if (fake.fx.gpus[index].lost)
		return leave(NVML_RET_GPU_IS_LOST);
	*device = handle_of(index);
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **device)
{
	enum nvml_return r = enter(ID(nvmlDeviceGetHandleByUUID), NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!uuid || !device)
		return leave(NVML_RET_INVALID_ARGUMENT);
	for (unsigned i = 0; i < fake.fx.n_gpus; i++)
		if (strcmp(fake.fx.gpus[i].uuid, uuid) == 0) {
			if (fake.fx.gpus[i].lost)
				return leave(NVML_RET_GPU_IS_LOST);
			*device = handle_of(i);
			return leave(NVML_RET_SUCCESS);
		}
	return leave(NVML_RET_NOT_FOUND);
}

enum nvml_return nvmlDeviceGetUUID(struct nvml_device *d, char *uuid, unsigned length)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetUUID), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return leave(copy_out(uuid, length, g->uuid));
}

enum nvml_return nvmlDeviceGetName(struct nvml_device *d, char *name, unsigned length)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetName), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return leave(copy_out(name, length, g->name));
}

enum nvml_return nvmlDeviceGetMinorNumber(struct nvml_device *d, unsigned *minor)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetMinorNumber), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!minor)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*minor = g->minor;
	return leave(NVML_RET_SUCCESS);
}

static enum nvml_return pci_info(enum fake_fn fn, struct nvml_device *d, struct nvml_pci_info *pci)
{
	unsigned b[4] = { 0 };
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(fn, d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!pci)
		return leave(NVML_RET_INVALID_ARGUMENT);
	memset(pci, 0, sizeof(*pci));
	(void)fake_parse_bus_id(g->pci_bus_id, b); /* checked when set */
	(void)snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", g->pci_bus_id);
	(void)snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04X:%02X:%02X.%X",
		       b[0] & 0xffff, b[1], b[2], b[3]);
	pci->domain = b[0];
	pci->bus = b[1];
	pci->device = b[2];
	pci->pci_device_id = g->pci_device_id;
	pci->pci_subsystem_id = g->pci_subsystem_id;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetPciInfo_v3(struct nvml_device *d, struct nvml_pci_info *pci)
{
	return pci_info(ID(nvmlDeviceGetPciInfo_v3), d, pci);
}

enum nvml_return nvmlDeviceGetPciInfo_v2(struct nvml_device *d, struct nvml_pci_info *pci)
{
	return pci_info(ID(nvmlDeviceGetPciInfo_v2), d, pci);
}

enum nvml_return nvmlDeviceGetPciInfoExt(struct nvml_device *d, struct nvml_pci_info_ext *ext)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetPciInfoExt), d, &g);
	unsigned b[4];

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!ext)
		return leave(NVML_RET_INVALID_ARGUMENT);
	if (ext->version != NVML_PCI_INFO_EXT_V1)
		return leave(NVML_RET_ARGUMENT_VERSION_MISMATCH);
	memset(ext, 0, sizeof(*ext));
	ext->version = NVML_PCI_INFO_EXT_V1;
	(void)fake_parse_bus_id(g->pci_bus_id, b); /* checked when set */
	(void)snprintf(ext->bus_id, sizeof(ext->bus_id), "%s", g->pci_bus_id);
	ext->domain = b[0];
	ext->bus = b[1];
	ext->device = b[2];
	ext->pci_device_id = g->pci_device_id;
	ext->pci_subsystem_id = g->pci_subsystem_id;
	ext->base_class = g->pci_class >> 16;
	ext->sub_class = g->pci_class >> 8 & 0xff;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetMemoryInfo(struct nvml_device *d, struct nvml_memory *m)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetMemoryInfo), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!m)
		return leave(NVML_RET_INVALID_ARGUMENT);
	/*
	 * nvml.h's contract for v1: used is what is allocated plus what the driver reserves, and
	 * total is free + used (only v2 gives the reserved part on its own).
	 */
	m->total = g->mem_total;
	m->used = MIN(g->mem_used, g->mem_total);
	m->used += MIN(g->mem_reserved, g->mem_total - m->used);
	m->free = g->mem_total - m->used;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetCudaComputeCapability(struct nvml_device *d, int *major, int *minor)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetCudaComputeCapability), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!major || !minor)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*major = g->cc_major;
	*minor = g->cc_minor;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetArchitecture(struct nvml_device *d, unsigned *arch)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetArchitecture), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!arch)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*arch = g->arch;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetMigMode(struct nvml_device *d, unsigned *current, unsigned *pending)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetMigMode), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!current || !pending)
		return leave(NVML_RET_INVALID_ARGUMENT);
	/* A GPU without MIG (anything before Ampere's A100/A30, GeForce): NOT_SUPPORTED. */
	if (!g->mig && !g->mig_capable)
		return leave(NVML_RET_NOT_SUPPORTED);
	*current = *pending = g->mig ? NVML_MIG_ENABLE : NVML_MIG_DISABLE;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetTopologyCommonAncestor(struct nvml_device *d1, struct nvml_device *d2,
						     enum nvml_topology_level *level)
{
	enum fake_fn fn = ID(nvmlDeviceGetTopologyCommonAncestor);
	struct fake_gpu *g1, *g2;
	unsigned i1, i2;
	enum nvml_return r = enter(fn, NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	r = gpu_of(d1, fn, &g1, &i1);
	if (r == NVML_RET_SUCCESS)
		r = gpu_of(d2, fn, &g2, &i2);
	if (r != NVML_RET_SUCCESS)
		return leave(r);
	if (!level)
		return leave(NVML_RET_INVALID_ARGUMENT);
	if (i1 == i2)
		*level = NVML_TOPO_INTERNAL;
	else if (g1->topo[i2] >= 0)
		*level = (enum nvml_topology_level)g1->topo[i2];
	else if (g2->topo[i1] >= 0)
		*level = (enum nvml_topology_level)g2->topo[i1];
	else
		*level = NVML_TOPO_SYSTEM;
	return leave(NVML_RET_SUCCESS);
}

/* --- events --- */

enum nvml_return nvmlDeviceGetSupportedEventTypes(struct nvml_device *d, unsigned long long *types)
{
	struct fake_gpu *g;
	enum nvml_return r = enter_dev(ID(nvmlDeviceGetSupportedEventTypes), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!types)
		return leave(NVML_RET_INVALID_ARGUMENT);
	*types = supported_events(g);
	return leave(NVML_RET_SUCCESS);
}

static struct fake_set *set_of(struct nvml_event_set *s)
{
	uintptr_t p = (uintptr_t)s, base = (uintptr_t)fake.sets;

	if (p < base || p >= base + sizeof(fake.sets) || (p - base) % sizeof(struct fake_set) != 0)
		return NULL;
	if (!((struct fake_set *)s)->used)
		return NULL;
	return (struct fake_set *)s;
}

enum nvml_return nvmlDeviceRegisterEvents(struct nvml_device *d, unsigned long long types,
					  struct nvml_event_set *s)
{
	enum fake_fn fn = ID(nvmlDeviceRegisterEvents);
	struct fake_set *set;
	struct fake_gpu *g;
	unsigned i;
	enum nvml_return r = enter(fn, NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	r = gpu_of(d, fn, &g, &i);
	if (r != NVML_RET_SUCCESS)
		return leave(r);
	set = set_of(s);
	if (!set || set->gen != fake.gen)
		return leave(NVML_RET_INVALID_ARGUMENT);
	if (types & ~supported_events(g))
		return leave(NVML_RET_NOT_SUPPORTED);
	set->mask[i] |= types;
	return leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlEventSetCreate(struct nvml_event_set **ret)
{
	enum nvml_return r = enter(ID(nvmlEventSetCreate), NEED_INIT);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!ret)
		return leave(NVML_RET_INVALID_ARGUMENT);
	for (unsigned i = 0; i < FAKE_MAX_SETS; i++) {
		struct fake_set *s = &fake.sets[i];

		if (s->used)
			continue;
		memset(s, 0, sizeof(*s));
		s->used = true;
		s->gen = fake.gen;
		*ret = (struct nvml_event_set *)s;
		return leave(NVML_RET_SUCCESS);
	}
	return leave(NVML_RET_INSUFFICIENT_RESOURCES);
}

unsigned fake_deliver(unsigned gpu, unsigned long long type, unsigned long long data)
{
	unsigned n = 0;

	for (unsigned i = 0; i < FAKE_MAX_SETS; i++) {
		struct fake_set *s = &fake.sets[i];

		if (!s->used || s->gen != fake.gen || !(s->mask[gpu] & type))
			continue;
		if (s->len == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			struct fake_event *q = calloc(cap, sizeof(*q));

			if (!q)
				continue;
			for (size_t k = 0; k < s->len; k++)
				q[k] = s->q[(s->head + k) % s->cap];
			free(s->q);
			s->q = q;
			s->cap = cap;
			s->head = 0;
		}
		s->q[(s->head + s->len) % s->cap] = (struct fake_event){ gpu, type, data };
		s->len++;
		n++;
	}
	if (n)
		(void)pthread_cond_broadcast(&fake.cond);
	return n;
}

static void deadline_after(struct timespec *ts, unsigned ms)
{
	(void)clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

enum nvml_return nvmlEventSetWait_v2(struct nvml_event_set *s, struct nvml_event_data *data,
				     unsigned timeoutms)
{
	struct timespec deadline;
	struct fake_set *set;
	enum nvml_return r;

	/*
	 * The caller is inside the wait on @s from here, even while "block" holds it at the
	 * door: a set freed meanwhile is one a real driver's wait would use after the free.
	 */
	(void)pthread_mutex_lock(&fake.mu);
	set = set_of(s);
	if (set)
		set->inside++;
	r = enter_locked(ID(nvmlEventSetWait_v2), NEED_INIT);
	if (set)
		set->inside--;
	if (r != NVML_RET_SUCCESS)
		return leave(r);
	set = set_of(s);
	if (!set || !data)
		return leave(NVML_RET_INVALID_ARGUMENT);
	deadline_after(&deadline, timeoutms);
	fake.waiters++;
	set->inside++;
	for (;;) {
		if (fake.fx.mismatch) {
			r = NVML_RET_LIB_RM_VERSION_MISMATCH;
			break;
		}
		if (fake.stale || fake.init_count <= 0 || set->gen != fake.gen || !set->used) {
			r = NVML_RET_UNINITIALIZED;
			break;
		}
		if (set->lost_pending) {
			set->lost_pending = false;
			r = NVML_RET_GPU_IS_LOST;
			break;
		}
		if (set->len > 0) {
			struct fake_event *e = &set->q[set->head];

			set->head = (set->head + 1) % set->cap;
			set->len--;
			memset(data, 0, sizeof(*data));
			data->device = e->gpu < fake.fx.n_gpus ? handle_of(e->gpu) : NULL;
			data->event_type = e->type;
			data->event_data = e->data;
			data->gpu_instance_id = 0xFFFFFFFFU;
			data->compute_instance_id = 0xFFFFFFFFU;
			r = NVML_RET_SUCCESS;
			break;
		}
		if (pthread_cond_timedwait(&fake.cond, &fake.mu, &deadline) == ETIMEDOUT) {
			r = NVML_RET_TIMEOUT;
			break;
		}
	}
	fake.waiters--;
	set->inside--;
	return leave(r);
}

/* Works in any state, so that a caller can always release what it holds. */
enum nvml_return nvmlEventSetFree(struct nvml_event_set *s)
{
	struct fake_set *set;
	enum nvml_return r = enter(ID(nvmlEventSetFree), 0);

	if (r != NVML_RET_SUCCESS)
		return r;
	set = set_of(s);
	if (!set)
		return leave(NVML_RET_INVALID_ARGUMENT);
	if (set->inside) {
		/* NVML frees the set under the waiting thread: make the misuse loud in any build. */
		(void)fprintf(stderr,
			      "fake nvml: nvmlEventSetFree(%p) while %u thread(s) wait in "
			      "nvmlEventSetWait_v2 on it: a use after free in a real driver\n",
			      (void *)s, set->inside);
		abort();
	}
	free(set->q);
	memset(set, 0, sizeof(*set));
	(void)pthread_cond_broadcast(&fake.cond);
	return leave(NVML_RET_SUCCESS);
}

/* --- load and unload --- */

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	if (mkdir_p(dir) < 0) {
		(void)fprintf(stderr, "fake nvml: cannot create %s: %s\n", dir, strerror(errno));
		return;
	}
	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f) {
		(void)fprintf(stderr, "fake nvml: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	(void)fputs(text, f);
	(void)fclose(f);
}

/*
 * <sysfs>/bus/pci/devices/<id>/numa_node for every GPU with a numa key, and its `class` for
 * every GPU with a pci_class key.
 */
static void write_sysfs(const char *root)
{
	for (unsigned i = 0; i < fake.fx.n_gpus; i++) {
		const struct fake_gpu *g = &fake.fx.gpus[i];
		char id[32], dir[PATH_MAX], text[32];

		if ((!g->numa[0] && !g->pci_class_set) ||
		    fake_sysfs_bus_id(g->pci_bus_id, id, sizeof(id)) < 0)
			continue;
		(void)snprintf(dir, sizeof(dir), "%s/bus/pci/devices/%s", root, id);
		if (g->numa[0]) {
			(void)snprintf(text, sizeof(text), "%s\n", g->numa);
			write_text(dir, "numa_node", text);
		}
		if (g->pci_class_set) {
			(void)snprintf(text, sizeof(text), "0x%06x\n", g->pci_class);
			write_text(dir, "class", text);
		}
	}
}

/* <proc>/driver/nvidia/version, as the kernel module writes it. */
static void write_proc(const char *root)
{
	const char *v = fake.fx.kernel_version[0] ? fake.fx.kernel_version : fake.fx.driver_version;
	char dir[PATH_MAX], text[256];

	(void)snprintf(dir, sizeof(dir), "%s/driver/nvidia", root);
	(void)snprintf(
		text, sizeof(text),
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Tue Mar  5 22:23:56 UTC 2024\n"
		"GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
		v);
	write_text(dir, "version", text);
}

__attribute__((constructor)) static void fake_load(void)
{
	const char *fixture = getenv("EDGEGPU_FAKE_NVML_FIXTURE");
	const char *control = getenv("EDGEGPU_FAKE_NVML_CONTROL");
	const char *sysfs = getenv("EDGEGPU_FAKE_NVML_SYSFS");
	const char *procfs = getenv("EDGEGPU_FAKE_NVML_PROCFS");
	pthread_condattr_t attr;

	(void)pthread_condattr_init(&attr);
	(void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	(void)pthread_cond_init(&fake.cond, &attr);
	(void)pthread_condattr_destroy(&attr);

	fake_fixture_defaults(&fake.fx);
	if (fixture && *fixture &&
	    fake_fixture_load(fixture, &fake.fx, fake.fixture_error, sizeof(fake.fixture_error)) <
		    0)
		(void)fprintf(stderr, "fake nvml: fixture not loaded, nvmlInit fails: %s\n",
			      fake.fixture_error);
	/* A driver hung from the first call on: no control socket could block it in time. */
	memcpy(fake.blocked, fake.fx.block, sizeof(fake.blocked));
	if (sysfs && *sysfs)
		write_sysfs(sysfs);
	if (procfs && *procfs)
		write_proc(procfs);
	if (control && *control && fake_control_start(control) < 0)
		(void)fprintf(stderr, "fake nvml: control socket %s not started: %s\n", control,
			      strerror(errno));
}

__attribute__((destructor)) static void fake_unload(void)
{
	fake_control_stop();
	for (unsigned i = 0; i < FAKE_MAX_SETS; i++)
		free(fake.sets[i].q);
	(void)pthread_cond_destroy(&fake.cond);
}
