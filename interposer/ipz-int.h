#pragma once

/*
 * Private to libedgegpu-cuda.so (interposer/ipz*.c): the process's interposer state, the real
 * driver functions and the bookkeeping the wrappers share. Nothing here is exported; the only
 * exported names are the wrapped driver symbols and dlsym (libedgegpu-cuda.map).
 *
 * Life cycle: nothing happens when the library is loaded. The first hooked CUDA call (or a
 * dlsym of a "cu" name once libcuda is in the process) runs ipz_cuda_ready(): it reads the
 * limits file and attaches the region once per process (ipz_setup), then dlopens libcuda.so.1
 * and resolves every real function. NVML is resolved apart, by ipz_nvml_ready(), so an
 * NVML-only process never loads libcuda. Both are pthread_once: thread-safe, never repeated.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda-api.h"
#include "limits-file.h"
#include "region.h"

#define IPZ_EXPORT	__attribute__((visibility("default")))
#define IPZ_LIKELY(x)	__builtin_expect(!!(x), 1)
#define IPZ_UNLIKELY(x) __builtin_expect(!!(x), 0)

#ifndef IPZ_DIR
#define IPZ_DIR "/usr/local/edgegpu"
#endif

/* Functions outside cuda-api.h's list: one we call, and graph entry points we wrap that the
 * fake driver does not implement (their parameters we never read are opaque here). */
typedef enum cu_result ipz_fn_cuDeviceGetAttribute(int *, int, cu_device);
#define IPZ_EXTRA_FUNCTIONS(FN)                                                                   \
	FN(cuGraphUpload, (struct cu_graph_exec *, struct cu_stream *))                           \
	FN(cuGraphUpload_ptsz, (struct cu_graph_exec *, struct cu_stream *))                      \
	FN(cuGraphInstantiate_v2,                                                                 \
	   (struct cu_graph_exec **, struct cu_graph *, struct cu_graph_node **, char *, size_t)) \
	FN(cuGraphInstantiateWithParams, (struct cu_graph_exec **, struct cu_graph *, void *))    \
	FN(cuGraphInstantiateWithParams_ptsz, (struct cu_graph_exec **, struct cu_graph *, void *))
#define IPZ_EXTRA_FN_TYPE(sym, params) typedef enum cu_result cu_fn_##sym params;
IPZ_EXTRA_FUNCTIONS(IPZ_EXTRA_FN_TYPE)
#undef IPZ_EXTRA_FN_TYPE
#define IPZ_CU_ATTR_INTEGRATED 18 /* CU_DEVICE_ATTRIBUTE_INTEGRATED */
#ifndef IPZ_NVML_ERROR_LIBRARY_NOT_FOUND
#define IPZ_NVML_ERROR_LIBRARY_NOT_FOUND 12 /* NVML_ERROR_LIBRARY_NOT_FOUND */
#endif

/* Every symbol we wrap (each defined and exported in ipz.c, ipz-alloc.c, ipz-vmm.c, ipz-pool.c,
 * ipz-graph.c or ipz-info.c; the same list is libedgegpu-cuda.map, checked by
 * tests/interposer/check-exports). */
#define IPZ_CU_WRAPPED(W)                    \
	W(cuGetProcAddress)                  \
	W(cuGetProcAddress_v2)               \
	W(cuMemGetInfo_v2)                   \
	W(cuDeviceTotalMem_v2)               \
	W(cuMemAlloc_v2)                     \
	W(cuMemAllocPitch_v2)                \
	W(cuMemFree_v2)                      \
	W(cuMemAllocManaged)                 \
	W(cuMemCreate)                       \
	W(cuMemRelease)                      \
	W(cuMemMap)                          \
	W(cuMemUnmap)                        \
	W(cuMemAllocAsync)                   \
	W(cuMemAllocAsync_ptsz)              \
	W(cuMemAllocFromPoolAsync)           \
	W(cuMemAllocFromPoolAsync_ptsz)      \
	W(cuMemFreeAsync)                    \
	W(cuMemFreeAsync_ptsz)               \
	W(cuMemPoolCreate)                   \
	W(cuMemPoolDestroy)                  \
	W(cuMemPoolTrimTo)                   \
	W(cuStreamSynchronize)               \
	W(cuStreamSynchronize_ptsz)          \
	W(cuCtxSynchronize)                  \
	W(cuDeviceGetDefaultMemPool)         \
	W(cuDeviceGetMemPool)                \
	W(cuMemGetDefaultMemPool)            \
	W(cuMemGetMemPool)                   \
	W(cuArrayCreate_v2)                  \
	W(cuArray3DCreate_v2)                \
	W(cuArrayDestroy)                    \
	W(cuMipmappedArrayCreate)            \
	W(cuMipmappedArrayDestroy)           \
	W(cuGraphAddMemAllocNode)            \
	W(cuGraphAddNode)                    \
	W(cuGraphAddNode_v2)                 \
	W(cuGraphDestroy)                    \
	W(cuGraphExecDestroy)                \
	W(cuGraphInstantiateWithFlags)       \
	W(cuGraphInstantiate_v2)             \
	W(cuGraphInstantiateWithParams)      \
	W(cuGraphInstantiateWithParams_ptsz) \
	W(cuGraphUpload)                     \
	W(cuGraphUpload_ptsz)                \
	W(cuGraphLaunch)                     \
	W(cuGraphLaunch_ptsz)                \
	W(cuDeviceGraphMemTrim)
#define IPZ_NVML_WRAPPED(W)        \
	W(nvmlDeviceGetMemoryInfo) \
	W(nvmlDeviceGetMemoryInfo_v2)

/* The wrappers' declarations, typed by cuda-api.h: a wrong signature does not compile. */
#define IPZ_DECL_CU(sym)   extern cu_fn_##sym sym;
#define IPZ_DECL_NVML(sym) extern ipz_nvml_fn_##sym sym;
IPZ_CU_WRAPPED(IPZ_DECL_CU)
IPZ_NVML_WRAPPED(IPZ_DECL_NVML)

/* The process's view of its limits (set once by ipz_setup, read-only after). */
struct ipz {
	bool enforcing;	     /* a limits file and a region: the wrappers account */
	bool report_only;    /* limits "mode report": count, never refuse */
	bool count_managed;  /* limits "managed count" */
	bool private_region; /* the shared region was missing or bad: per process only */
	struct limits limits;
	struct region_handle region;
};
extern struct ipz ipz;

/* The real driver functions, one pointer per symbol of cuda-api.h (NULL: not in this driver). */
struct ipz_real {
#define IPZ_REAL_FIELD(sym, r, params) cu_fn_##sym *sym;
	CUDA_API_FUNCTIONS(IPZ_REAL_FIELD, CUDA_OWN_TYPE)
#undef IPZ_REAL_FIELD
	ipz_fn_cuDeviceGetAttribute *cuDeviceGetAttribute;
#define IPZ_REAL_FIELD(sym, params) cu_fn_##sym *sym;
	IPZ_EXTRA_FUNCTIONS(IPZ_REAL_FIELD)
#undef IPZ_REAL_FIELD
#define IPZ_REAL_FIELD(sym, r, params) ipz_nvml_fn_##sym *sym;
	IPZ_NVML_FUNCTIONS(IPZ_REAL_FIELD)
#undef IPZ_REAL_FIELD
};
extern struct ipz_real ipz_real;

/*
 * Runs the one-time set-up of the CUDA side (limits, region, libcuda and its functions).
 * Returns true when a driver is loaded (the real pointers may be used; each may still be
 * NULL), false without one: the caller returns CUDA_ERROR_NOT_INITIALIZED. Any thread.
 */
bool ipz_cuda_ready(void);
/* The same for NVML (libnvidia-ml.so.1); false: NVML_ERROR_LIBRARY_NOT_FOUND. */
bool ipz_nvml_ready(void);

/* Says @msg once per call site on stderr, prefixed "edgegpu-cuda: " (never more often). */
void ipz_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define IPZ_SAY_ONCE(...)                                              \
	do {                                                           \
		static int said_;                                      \
		if (!__atomic_exchange_n(&said_, 1, __ATOMIC_RELAXED)) \
			ipz_say(__VA_ARGS__);                          \
	} while (0)

/* The start of every wrapper: the driver loaded and this function in it, else its error. */
#define IPZ_ENTER(sym)                                 \
	do {                                           \
		if (IPZ_UNLIKELY(!ipz_cuda_ready()))   \
			return CU_RES_NOT_INITIALIZED; \
		if (IPZ_UNLIKELY(!ipz_real.sym))       \
			return CU_RES_NOT_FOUND;       \
	} while (0)

/* ipz.c: the wrapper for a real function pointer, or NULL (looked up by address). */
void *ipz_wrapper_for(const void *real);

/* ipz-dev.c: the limits-file index of a CUDA device or NVML handle; -1 when it has no limit. */
int ipz_dev_gpu(cu_device dev);
int ipz_dev_gpu_nvml(struct ipz_nvml_device *d);
/*
 * The limits index of the current context's device (its ordinal in *ret_dev), -1 when it has
 * no limit, or IPZ_DEV_ERROR with *reterr the driver's error when there is no current context
 * (what the driver answers an allocation without one; HAMi-core read an unset device here).
 */
#define IPZ_DEV_ERROR (-2)
int ipz_dev_current(cu_device *ret_dev, enum cu_result *reterr);
/* The device (ordinal) of limits index @gpu, or -1 when no visible device has it. */
int ipz_dev_of_gpu(unsigned gpu);
/* True when device @dev is an integrated GPU (Jetson: managed memory is the same DRAM). */
bool ipz_dev_integrated(cu_device dev);

/* ipz-alloc.c: reservations of the accounting, atomic across the container's processes. */
/* Reserves @bytes on @gpu (0 or CUDA_ERROR_OUT_OF_MEMORY). gpu < 0: nothing to do. */
enum cu_result ipz_reserve(int gpu, uint64_t bytes);
void ipz_release(int gpu, uint64_t bytes);
/* Moves a reservation of @had to @want once the driver said what it took (0 or OOM, when the
 * growth cannot be reserved: then the reservation is still @had). */
enum cu_result ipz_settle(int gpu, uint64_t had, uint64_t want);

/* ipz-pool.c: settles @pool's count to its reserved memory (after a free of one of its
 * pointers). */
void ipz_pool_settle(struct cu_mem_pool *pool);

/*
 * The per-process table of what was counted: key (a kind and a pointer or handle) -> (gpu,
 * bytes, extra). A hash with its own lock; nodes come from slabs (one malloc per 256 entries).
 */
enum ipz_kind {
	IPZ_K_PTR = 1,	/* cuMemAlloc*, freed by cuMemFree_v2 */
	IPZ_K_VMM,	/* cuMemCreate handle; extra: mappings << 1 | released (ipz-vmm.c) */
	IPZ_K_ARRAY,	/* cuArrayCreate_v2 / cuArray3DCreate_v2 */
	IPZ_K_MIPMAP,	/* cuMipmappedArrayCreate */
	IPZ_K_POOL,	/* a memory pool: bytes = its reserved memory we counted */
	IPZ_K_POOL_PTR, /* a pointer from a pool: extra = the pool */
	IPZ_K_GRAPH,	/* a graph's mem-alloc nodes on one GPU: key (graph << 4) | gpu */
	IPZ_K_GEXEC,	/* the same, carried to an instantiated graph: (exec << 4) | gpu */
};
struct ipz_entry {
	int gpu;
	uint64_t bytes;
	uint64_t extra;
};
/* Adds (kind, key); -ENOMEM when no node could be allocated, -EEXIST when present. */
int ipz_table_put(enum ipz_kind kind, uint64_t key, const struct ipz_entry *e);
/* Removes (kind, key) into *ret; false when absent. */
bool ipz_table_take(enum ipz_kind kind, uint64_t key, struct ipz_entry *ret);
/* Reads (kind, key) into *ret without removing; false when absent. */
bool ipz_table_get(enum ipz_kind kind, uint64_t key, struct ipz_entry *ret);
/* Replaces the bytes of a present entry by @bytes; false when absent. */
bool ipz_table_set_bytes(enum ipz_kind kind, uint64_t key, uint64_t bytes);
/* fork: held across fork by the parent (prepare/parent), made new in the child. */
void ipz_table_lock(void);
void ipz_table_unlock(void);
void ipz_table_child(void);
/* Replaces the extra of a present entry by @extra; false when absent. */
bool ipz_table_set_extra(enum ipz_kind kind, uint64_t key, uint64_t extra);
/*
 * Records what was counted under (kind, key); when the table has no room, releases @bytes on
 * @gpu and returns false (a count that could not be freed later: the caller refuses instead).
 */
bool ipz_remember(enum ipz_kind kind, uint64_t key, int gpu, uint64_t bytes, uint64_t extra);
