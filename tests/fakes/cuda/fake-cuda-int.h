#pragma once

/*
 * Inside the fake CUDA driver: the state its two files share (fake-cuda.c: set-up, devices,
 * contexts, cuGetProcAddress, plain and VMM memory; fake-cuda-pool.c: pools and arrays;
 * fake-cuda-graph.c: graph memory).
 * Every fake_* function below but fake_enter() expects the lock held (fake_enter() takes it).
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuda-api.h"
#include "fake-cuda.h"

#define FAKE_API       __attribute__((visibility("default")))
#define GRAN	       (UINT64_C(2) << 20) /* VMM granularity and pool/array/graph step */
#define PTR_ALIGN      512		   /* cuMemAlloc and pitch alignment */
#define VA_BASE	       UINT64_C(0x100000000000)
#define HASH_BUCKETS   4096
#define DEFAULT_MIB    16384
#define DRIVER_VERSION 13000

/* The exported functions: every one of cuda-api.h's list. */
#define FAKE_DECLARE(sym, r, params) FAKE_API cu_fn_##sym sym;
CUDA_API_FUNCTIONS(FAKE_DECLARE, CUDA_OWN_TYPE)

static inline uint64_t fake_round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/* --- objects: every handle we give out is on one list, so a stale or foreign handle is
 * refused instead of dereferenced --- */

enum obj_kind {
	OBJ_POOL = 1,
	OBJ_ARRAY,
	OBJ_MIPMAP,
	OBJ_HANDLE,
	OBJ_RANGE,
	OBJ_MAP,
	OBJ_GRAPH,
	OBJ_NODE,
	OBJ_EXEC
};

struct obj {
	struct obj *next;
	enum obj_kind kind;
};

struct cu_mem_pool {
	struct obj o;
	int phys;
	bool is_default, destroyed;
	uint64_t used, used_high, reserved, reserved_high;
};

/* A CUDA array or mipmapped array; the handles (struct cu_array *, struct cu_mipmapped_array *)
 * point to one. */
struct fake_array {
	struct obj o;
	int phys;
	uint64_t size; /* rounded to 2 MiB, charged to the device */
};

struct vmm_handle { /* cuMemCreate; the handle value is its address */
	struct obj o;
	int phys; /* -1: host memory */
	uint64_t size;
	int refs; /* 1 until released, + 1 per mapping */
	bool released;
};

struct vmm_range { /* cuMemAddressReserve */
	struct obj o;
	cu_deviceptr start;
	uint64_t size;
};

struct vmm_map { /* cuMemMap */
	struct obj o;
	cu_deviceptr ptr;
	uint64_t size;
	struct vmm_handle *h;
};

struct cu_graph_node {
	struct obj o;
	struct cu_graph *graph;
	enum cu_graph_node_type type;
	int phys;
	uint64_t size;	  /* MEM_ALLOC */
	cu_deviceptr ptr; /* MEM_ALLOC, MEM_FREE */
	struct cu_graph_node *next_in_graph;
};

struct cu_graph {
	struct obj o;
	struct cu_graph_node *first, *last;
};

struct cu_graph_exec {
	struct obj o;
	size_t n;
	struct cu_graph_node *nodes; /* copies, in graph order */
};

struct cu_ctx {
	int ordinal;
};

/* --- device memory: allocations by address --- */

enum alloc_kind {
	ALLOC_PLAIN,
	ALLOC_MANAGED,
	ALLOC_POOL,
	ALLOC_GRAPH
};

struct alloc {
	struct alloc *next;
	cu_deviceptr ptr;
	uint64_t size;
	int phys;
	enum alloc_kind kind;
	struct cu_mem_pool *pool; /* ALLOC_POOL */
};

struct device {
	char uuid[48];
	uint64_t total, used;
	struct cu_mem_pool *default_pool, *current_pool;
	uint64_t graph_used, graph_used_high, graph_reserved, graph_reserved_high;
};

struct fake_state {
	pthread_mutex_t lock;
	bool initialized;
	int n_phys, n_visible, version;
	int visible[FAKE_CUDA_MAX]; /* ordinal -> physical index */
	struct device dev[FAKE_CUDA_MAX];
	struct cu_ctx ctx[FAKE_CUDA_MAX];
	struct fake_cuda_shm *shm;
	struct obj *objs;
	struct alloc *allocs[HASH_BUCKETS];
	cu_deviceptr next_va;
};
extern struct fake_state fake;

/* Takes the lock after the one-time set-up; CU_RES_NOT_INITIALIZED (not locked) before a
 * successful cuInit, as the driver says. fake_leave() unlocks and returns r. */
enum cu_result fake_enter(void);
enum cu_result fake_leave(enum cu_result r);

/* The current context's device as a physical index, or -1 without a context. */
int fake_current_phys(void);
bool fake_ordinal_ok(cu_device d);

/* Physical device memory: CU_RES_OUT_OF_MEMORY when the device is full. Both update the
 * EDGEGPU_FAKE_CUDA_SHM meter. */
enum cu_result fake_charge(int phys, uint64_t bytes);
void fake_uncharge(int phys, uint64_t bytes);

/* A fresh device address range (never reused). */
cu_deviceptr fake_va_take(uint64_t size, uint64_t align);

/* Allocations by address; fake_free_locked() frees one whose kind is in mask (bits of
 * enum alloc_kind) and says CU_RES_INVALID_VALUE for any other address. */
enum cu_result fake_alloc_add(cu_deviceptr p, uint64_t size, int phys, enum alloc_kind kind,
			      struct cu_mem_pool *pool);
enum cu_result fake_free_locked(cu_deviceptr p, unsigned mask);
/* Where the allocation at p is linked (*result NULL: none). */
struct alloc **fake_alloc_slot(cu_deviceptr p);

/* The handle list (freeing unlinks and frees). */
void fake_obj_add(struct obj *o, enum obj_kind kind);
void *fake_obj_find(const void *p, enum obj_kind kind);
void fake_obj_free(struct obj *o);

/* Gives a pool's unused reservation back down to keep bytes (fake-cuda-pool.c). */
void fake_pool_release(struct cu_mem_pool *pool, uint64_t keep);
