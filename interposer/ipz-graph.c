/*
 * Graph memory (CUDA 11.4+): memory nodes allocate when a graph is uploaded or launched, from
 * a per-device reservation the driver reports as CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT. Part
 * of ipz-alloc.c's accounting (the same reservation rule), apart only for size.
 *
 * A launch cannot be undone once queued, so the room is taken before it: the bytes of a
 * graph's mem-alloc nodes are added up per GPU as the nodes are added (IPZ_K_GRAPH), carried to
 * the executable graph at instantiation (IPZ_K_GEXEC), and before an upload or launch (or an
 * instantiation that uploads) the part the device's free graph reserve (RESERVED_MEM_CURRENT -
 * USED_MEM_CURRENT) cannot serve is reserved; the call is refused with
 * CUDA_ERROR_OUT_OF_MEMORY when that does not fit beside what is held. The total is an upper
 * bound of the graph's peak (frees inside the graph are not subtracted). After the call the
 * count settles to the device's reserved graph memory. A node alone bigger than the limit is
 * refused when added. Graphs whose nodes we never saw (stream capture) are settled after
 * their launch only: growth past the limit there is said once and counted when it fits.
 *
 * Thread context: any thread. graph_lock is held across uploads and launches of graphs with
 * memory nodes and every settling, so two launches cannot count on the same free reserve.
 */

#include <string.h>

#include "glibc-floor.h"
#include "ipz-int.h"

#define IPZ_GRAPH_INSTANTIATE_FLAG_UPLOAD 2 /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD */

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t graph_counted[REGION_GPUS_MAX]; /* under graph_lock */

/* A graph's or exec's table key on @gpu (REGION_GPUS_MAX is 16: four bits). */
static uint64_t gkey(const void *obj, unsigned gpu)
{
	return (uint64_t)(uintptr_t)obj << 4 | gpu;
}

/* The device's graph memory attribute, or false when the driver cannot say. */
static bool graph_attr(cu_device dev, enum cu_graph_mem_attr attr, uint64_t *ret)
{
	cu_uint64 v = 0;

	if (!ipz_real.cuDeviceGetGraphMemAttribute ||
	    ipz_real.cuDeviceGetGraphMemAttribute(dev, attr, &v) != CU_RES_SUCCESS)
		return false;
	*ret = v;
	return true;
}

/* Settles @gpu's count to the device's reservation, @pending taken into it; graph_lock held. */
static void graph_settle_locked(cu_device dev, int gpu, uint64_t pending)
{
	uint64_t now;

	if (gpu < 0)
		return;
	if (!graph_attr(dev, CU_GRAPH_MEM_RESERVED_CURRENT, &now))
		now = graph_counted[gpu] + pending;
	if (ipz_settle(gpu, graph_counted[gpu] + pending, now) == CU_RES_SUCCESS) {
		graph_counted[gpu] = now;
		return;
	}
	graph_counted[gpu] += pending;
	IPZ_SAY_ONCE("graph memory grew past the limit at a launch (counted when it fits)");
}

static void graph_settle(cu_device dev, int gpu)
{
	pthread_mutex_lock(&graph_lock);
	graph_settle_locked(dev, gpu, 0);
	pthread_mutex_unlock(&graph_lock);
}

static void graph_settle_current(void)
{
	enum cu_result err;
	cu_device dev = 0;
	int gpu;

	if (!ipz.enforcing)
		return;
	gpu = ipz_dev_current(&dev, &err);
	if (gpu >= 0)
		graph_settle(dev, gpu);
}

/* ---- what a graph's memory nodes add up to ---- */

/* CUDA_ERROR_OUT_OF_MEMORY when a mem-alloc node alone is bigger than its GPU's limit. */
static enum cu_result graph_node_check(const struct cu_mem_alloc_node_params *p)
{
	int gpu;

	if (!ipz.enforcing || ipz.report_only || !p || p->pool_props.location.type != CU_LOC_DEVICE)
		return CU_RES_SUCCESS;
	gpu = ipz_dev_gpu(p->pool_props.location.id);
	if (gpu >= 0 && p->bytesize > ipz.limits.gpus[gpu].limit)
		return CU_RES_OUT_OF_MEMORY;
	return CU_RES_SUCCESS;
}

/* Adds @bytes to (kind, obj, gpu); graph_lock held. */
static void bytes_add(enum ipz_kind kind, const void *obj, int gpu, uint64_t bytes)
{
	struct ipz_entry e = { .gpu = gpu, .bytes = bytes };
	uint64_t key = gkey(obj, (unsigned)gpu);

	if (ipz_table_get(kind, key, &e)) {
		if (__builtin_add_overflow(e.bytes, bytes, &e.bytes))
			e.bytes = UINT64_MAX;
		(void)ipz_table_set_bytes(kind, key, e.bytes);
	} else if (ipz_table_put(kind, key, &e) != 0) {
		IPZ_SAY_ONCE("out of memory for the allocation table: a graph's memory nodes are "
			     "counted only after its launches");
	}
}

/* Counts a mem-alloc node the driver added to @g. */
static void graph_node_added(struct cu_graph *g, const struct cu_mem_alloc_node_params *p)
{
	int gpu;

	if (!ipz.enforcing || p->pool_props.location.type != CU_LOC_DEVICE)
		return;
	gpu = ipz_dev_gpu(p->pool_props.location.id);
	if (gpu < 0)
		return;
	pthread_mutex_lock(&graph_lock);
	bytes_add(IPZ_K_GRAPH, g, gpu, p->bytesize);
	pthread_mutex_unlock(&graph_lock);
}

/* Reads (or with @take removes) the per-GPU bytes of @obj into @bytes; true when any. */
static bool bytes_of(enum ipz_kind kind, const void *obj, bool take, uint64_t *bytes)
{
	bool any = false;

	for (unsigned gpu = 0; gpu < ipz.limits.n_gpus; gpu++) {
		struct ipz_entry e = { 0 };
		bool had = take ? ipz_table_take(kind, gkey(obj, gpu), &e) :
				  ipz_table_get(kind, gkey(obj, gpu), &e);

		bytes[gpu] = had ? e.bytes : 0;
		any |= bytes[gpu] > 0;
	}
	return any;
}

static void bytes_forget(enum ipz_kind kind, const void *obj)
{
	uint64_t bytes[REGION_GPUS_MAX];

	if (ipz.enforcing)
		(void)bytes_of(kind, obj, true, bytes);
}

IPZ_EXPORT enum cu_result cuGraphAddMemAllocNode(struct cu_graph_node **node, struct cu_graph *g,
						 struct cu_graph_node *const *deps, size_t n,
						 struct cu_mem_alloc_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddMemAllocNode);
	r = graph_node_check(p);
	if (r != CU_RES_SUCCESS)
		return r;
	r = ipz_real.cuGraphAddMemAllocNode(node, g, deps, n, p);
	if (r == CU_RES_SUCCESS && p)
		graph_node_added(g, p);
	return r;
}

static bool is_alloc(const struct cu_graph_node_params *p)
{
	return p && p->type == CU_NODE_MEM_ALLOC;
}

IPZ_EXPORT enum cu_result cuGraphAddNode(struct cu_graph_node **node, struct cu_graph *g,
					 struct cu_graph_node *const *deps, size_t n,
					 struct cu_graph_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddNode);
	r = is_alloc(p) ? graph_node_check(&p->u.alloc) : CU_RES_SUCCESS;
	if (r != CU_RES_SUCCESS)
		return r;
	r = ipz_real.cuGraphAddNode(node, g, deps, n, p);
	if (r == CU_RES_SUCCESS && is_alloc(p))
		graph_node_added(g, &p->u.alloc);
	return r;
}

IPZ_EXPORT enum cu_result cuGraphAddNode_v2(struct cu_graph_node **node, struct cu_graph *g,
					    struct cu_graph_node *const *deps,
					    const struct cu_graph_edge_data *edges, size_t n,
					    struct cu_graph_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddNode_v2);
	r = is_alloc(p) ? graph_node_check(&p->u.alloc) : CU_RES_SUCCESS;
	if (r != CU_RES_SUCCESS)
		return r;
	r = ipz_real.cuGraphAddNode_v2(node, g, deps, edges, n, p);
	if (r == CU_RES_SUCCESS && is_alloc(p))
		graph_node_added(g, &p->u.alloc);
	return r;
}

/* A destroyed graph or exec: its bytes are forgotten (its address may come back). */
/* NOLINTBEGIN(bugprone-macro-parentheses): type is a type */
#define IPZ_GRAPH_DESTROY(sym, type, kind)       \
	IPZ_EXPORT enum cu_result sym(type *obj) \
	{                                        \
		enum cu_result r;                \
		IPZ_ENTER(sym);                  \
		r = ipz_real.sym(obj);           \
		if (r == CU_RES_SUCCESS)         \
			bytes_forget(kind, obj); \
		return r;                        \
	}

IPZ_GRAPH_DESTROY(cuGraphDestroy, struct cu_graph, IPZ_K_GRAPH)
IPZ_GRAPH_DESTROY(cuGraphExecDestroy, struct cu_graph_exec, IPZ_K_GEXEC)
/* NOLINTEND(bugprone-macro-parentheses) */

/* ---- taking the room before the graph allocates ---- */

struct graph_run {
	uint64_t bytes[REGION_GPUS_MAX];   /* the graph's mem-alloc nodes per GPU */
	uint64_t pending[REGION_GPUS_MAX]; /* what was reserved for them */
	int dev[REGION_GPUS_MAX];	   /* the GPU's device, -1: not visible */
	bool locked;
};

/*
 * Before a call that may allocate @kind/@obj's graph memory: takes graph_lock and reserves,
 * per GPU, what the device's free graph reserve cannot serve. CUDA_ERROR_OUT_OF_MEMORY (the
 * lock released, nothing reserved) when that does not fit.
 */
static enum cu_result run_begin(struct graph_run *run, enum ipz_kind kind, const void *obj)
{
	memset(run, 0, sizeof(*run));
	if (!ipz.enforcing || !bytes_of(kind, obj, false, run->bytes))
		return CU_RES_SUCCESS;
	pthread_mutex_lock(&graph_lock);
	run->locked = true;
	for (unsigned gpu = 0; gpu < ipz.limits.n_gpus; gpu++) {
		uint64_t reserved, used, spare = 0;

		run->dev[gpu] = run->bytes[gpu] ? ipz_dev_of_gpu(gpu) : -1;
		if (run->dev[gpu] < 0)
			continue;
		if (graph_attr(run->dev[gpu], CU_GRAPH_MEM_RESERVED_CURRENT, &reserved) &&
		    graph_attr(run->dev[gpu], CU_GRAPH_MEM_USED_CURRENT, &used) && reserved > used)
			spare = reserved - used;
		run->pending[gpu] = run->bytes[gpu] > spare ? run->bytes[gpu] - spare : 0;
		if (ipz_reserve((int)gpu, run->pending[gpu]) != CU_RES_SUCCESS) {
			run->pending[gpu] = 0;
			while (gpu-- > 0)
				ipz_release((int)gpu, run->pending[gpu]);
			pthread_mutex_unlock(&graph_lock);
			run->locked = false;
			return CU_RES_OUT_OF_MEMORY;
		}
	}
	return CU_RES_SUCCESS;
}

/* After the call: gives the reservation back on failure, else settles; releases the lock.
 * A graph we know nothing of is settled on the current device, as before. */
static void run_end(struct graph_run *run, enum cu_result r)
{
	if (!run->locked) {
		if (r == CU_RES_SUCCESS)
			graph_settle_current();
		return;
	}
	for (unsigned gpu = 0; gpu < ipz.limits.n_gpus; gpu++) {
		if (run->dev[gpu] < 0)
			continue;
		if (r != CU_RES_SUCCESS)
			ipz_release((int)gpu, run->pending[gpu]);
		else
			graph_settle_locked(run->dev[gpu], (int)gpu, run->pending[gpu]);
	}
	pthread_mutex_unlock(&graph_lock);
}

/* Carries the graph's bytes to the new exec (an entry left by a destroyed one is replaced). */
static void carry_to_exec(struct cu_graph *g, struct cu_graph_exec *exec)
{
	uint64_t bytes[REGION_GPUS_MAX];

	if (!ipz.enforcing)
		return;
	bytes_forget(IPZ_K_GEXEC, exec);
	if (!bytes_of(IPZ_K_GRAPH, g, false, bytes))
		return;
	pthread_mutex_lock(&graph_lock);
	for (unsigned gpu = 0; gpu < ipz.limits.n_gpus; gpu++)
		if (bytes[gpu])
			bytes_add(IPZ_K_GEXEC, exec, (int)gpu, bytes[gpu]);
	pthread_mutex_unlock(&graph_lock);
}

/* An instantiation: nothing allocates unless it uploads (CUDA 12 params). */
#define IPZ_GRAPH_INSTANTIATE(sym, params, args, uploads)    \
	IPZ_EXPORT enum cu_result sym params                 \
	{                                                    \
		struct graph_run run = { .locked = false };  \
		enum cu_result r;                            \
		IPZ_ENTER(sym);                              \
		if (uploads) {                               \
			r = run_begin(&run, IPZ_K_GRAPH, g); \
			if (r != CU_RES_SUCCESS)             \
				return r;                    \
		}                                            \
		r = ipz_real.sym args;                       \
		if (r == CU_RES_SUCCESS && exec)             \
			carry_to_exec(g, *exec);             \
		run_end(&run, r);                            \
		return r;                                    \
	}

/* CUDA_GRAPH_INSTANTIATE_PARAMS starts with its flags (cuuint64_t). */
static bool params_upload(const void *params)
{
	cu_uint64 flags = 0;

	if (params)
		memcpy(&flags, params, sizeof(flags));
	return flags & IPZ_GRAPH_INSTANTIATE_FLAG_UPLOAD;
}

IPZ_GRAPH_INSTANTIATE(cuGraphInstantiateWithFlags,
		      (struct cu_graph_exec * *exec, struct cu_graph *g, unsigned long long flags),
		      (exec, g, flags), false)
IPZ_GRAPH_INSTANTIATE(cuGraphInstantiate_v2,
		      (struct cu_graph_exec * *exec, struct cu_graph *g,
		       struct cu_graph_node **err_node, char *log, size_t log_size),
		      (exec, g, err_node, log, log_size), false)
IPZ_GRAPH_INSTANTIATE(cuGraphInstantiateWithParams,
		      (struct cu_graph_exec * *exec, struct cu_graph *g, void *params),
		      (exec, g, params), params_upload(params))
IPZ_GRAPH_INSTANTIATE(cuGraphInstantiateWithParams_ptsz,
		      (struct cu_graph_exec * *exec, struct cu_graph *g, void *params),
		      (exec, g, params), params_upload(params))

/* An upload or launch: the graph's memory is allocated now (upload: ahead of the launch). */
#define IPZ_GRAPH_RUN(sym)                                                             \
	IPZ_EXPORT enum cu_result sym(struct cu_graph_exec *exec, struct cu_stream *s) \
	{                                                                              \
		struct graph_run run;                                                  \
		enum cu_result r;                                                      \
		IPZ_ENTER(sym);                                                        \
		r = run_begin(&run, IPZ_K_GEXEC, exec);                                \
		if (r != CU_RES_SUCCESS)                                               \
			return r;                                                      \
		r = ipz_real.sym(exec, s);                                             \
		run_end(&run, r);                                                      \
		return r;                                                              \
	}

IPZ_GRAPH_RUN(cuGraphUpload)
IPZ_GRAPH_RUN(cuGraphUpload_ptsz)
IPZ_GRAPH_RUN(cuGraphLaunch)
IPZ_GRAPH_RUN(cuGraphLaunch_ptsz)

IPZ_EXPORT enum cu_result cuDeviceGraphMemTrim(cu_device dev)
{
	enum cu_result r;

	IPZ_ENTER(cuDeviceGraphMemTrim);
	r = ipz_real.cuDeviceGraphMemTrim(dev);
	if (r == CU_RES_SUCCESS && ipz.enforcing)
		graph_settle(dev, ipz_dev_gpu(dev));
	return r;
}
