/*
 * Graph memory (CUDA 11.4+): memory nodes allocate when a graph is uploaded or launched, from
 * a per-device reservation. Part of ipz-alloc.c's accounting (the same reservation rule), apart
 * only for size.
 */

#include "glibc-floor.h"
#include "ipz-int.h"

/* ---- graph memory: refused when a node cannot fit, counted by the device's reservation ---- */

/*
 * Graph memory nodes allocate when the graph runs, from a per-device reservation the driver
 * reports as CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT. A node bigger than the limit can never
 * run: refused at creation. The reservation is settled after every call that may change it;
 * growth past the limit at a launch cannot be undone (the work is queued), so it is said once
 * and counted at the next settling that fits.
 */
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t graph_counted[REGION_GPUS_MAX];

static void graph_settle(cu_device dev, int gpu)
{
	cu_uint64 now = 0;

	if (gpu < 0 || !ipz_real.cuDeviceGetGraphMemAttribute ||
	    ipz_real.cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_RESERVED_CURRENT, &now) !=
		    CU_RES_SUCCESS)
		return;
	pthread_mutex_lock(&graph_lock);
	if (ipz_settle(gpu, graph_counted[gpu], now) == CU_RES_SUCCESS)
		graph_counted[gpu] = now;
	else
		IPZ_SAY_ONCE("graph memory grew past the limit at a launch (counted when it fits)");
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

IPZ_EXPORT enum cu_result cuGraphAddMemAllocNode(struct cu_graph_node **node, struct cu_graph *g,
						 struct cu_graph_node *const *deps, size_t n,
						 struct cu_mem_alloc_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddMemAllocNode);
	r = graph_node_check(p);
	if (r != CU_RES_SUCCESS)
		return r;
	return ipz_real.cuGraphAddMemAllocNode(node, g, deps, n, p);
}

static enum cu_result graph_params_check(const struct cu_graph_node_params *p)
{
	return p && p->type == CU_NODE_MEM_ALLOC ? graph_node_check(&p->u.alloc) : CU_RES_SUCCESS;
}

IPZ_EXPORT enum cu_result cuGraphAddNode(struct cu_graph_node **node, struct cu_graph *g,
					 struct cu_graph_node *const *deps, size_t n,
					 struct cu_graph_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddNode);
	r = graph_params_check(p);
	if (r != CU_RES_SUCCESS)
		return r;
	return ipz_real.cuGraphAddNode(node, g, deps, n, p);
}

IPZ_EXPORT enum cu_result cuGraphAddNode_v2(struct cu_graph_node **node, struct cu_graph *g,
					    struct cu_graph_node *const *deps,
					    const struct cu_graph_edge_data *edges, size_t n,
					    struct cu_graph_node_params *p)
{
	enum cu_result r;

	IPZ_ENTER(cuGraphAddNode_v2);
	r = graph_params_check(p);
	if (r != CU_RES_SUCCESS)
		return r;
	return ipz_real.cuGraphAddNode_v2(node, g, deps, edges, n, p);
}

/* A call after which the device's graph reservation may have moved: settle it on success. */
#define IPZ_GRAPH_SETTLING(sym, params, args)   \
	IPZ_EXPORT enum cu_result sym params    \
	{                                       \
		enum cu_result r;               \
		IPZ_ENTER(sym);                 \
		r = ipz_real.sym args;          \
		if (r == CU_RES_SUCCESS)        \
			graph_settle_current(); \
		return r;                       \
	}

IPZ_GRAPH_SETTLING(cuGraphInstantiateWithFlags,
		   (struct cu_graph_exec * *exec, struct cu_graph *g, unsigned long long flags),
		   (exec, g, flags))
IPZ_GRAPH_SETTLING(cuGraphInstantiate_v2,
		   (struct cu_graph_exec * *exec, struct cu_graph *g,
		    struct cu_graph_node **err_node, char *log, size_t log_size),
		   (exec, g, err_node, log, log_size))
/* CUDA 12: with parameters (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD allocates at once). */
IPZ_GRAPH_SETTLING(cuGraphInstantiateWithParams,
		   (struct cu_graph_exec * *exec, struct cu_graph *g, void *params),
		   (exec, g, params))
IPZ_GRAPH_SETTLING(cuGraphInstantiateWithParams_ptsz,
		   (struct cu_graph_exec * *exec, struct cu_graph *g, void *params),
		   (exec, g, params))
/* An upload allocates the graph's memory ahead of its first launch. */
IPZ_GRAPH_SETTLING(cuGraphUpload, (struct cu_graph_exec * exec, struct cu_stream *s), (exec, s))
IPZ_GRAPH_SETTLING(cuGraphUpload_ptsz, (struct cu_graph_exec * exec, struct cu_stream *s),
		   (exec, s))
IPZ_GRAPH_SETTLING(cuGraphLaunch, (struct cu_graph_exec * exec, struct cu_stream *s), (exec, s))
IPZ_GRAPH_SETTLING(cuGraphLaunch_ptsz, (struct cu_graph_exec * exec, struct cu_stream *s),
		   (exec, s))

IPZ_EXPORT enum cu_result cuDeviceGraphMemTrim(cu_device dev)
{
	enum cu_result r;

	IPZ_ENTER(cuDeviceGraphMemTrim);
	r = ipz_real.cuDeviceGraphMemTrim(dev);
	if (r == CU_RES_SUCCESS && ipz.enforcing)
		graph_settle(dev, ipz_dev_gpu(dev));
	return r;
}
