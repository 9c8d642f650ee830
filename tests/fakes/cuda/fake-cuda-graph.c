/*
 * The fake driver's graphs, as far as memory goes: memory allocation and free nodes (added by
 * cuGraphAddMemAllocNode/cuGraphAddMemFreeNode or cuGraphAddNode(_v2)), empty nodes, and
 * launches. A node's address is fixed when it is added; the memory behind it is reserved per
 * device at launch, for the graph's peak (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT grows in
 * 2 MiB steps), and stays reserved until cuDeviceGraphMemTrim. An allocation the graph does
 * not free itself lives on until cuMemFreeAsync, cuMemFree or a later graph frees it, and a
 * graph is not relaunched while it does (the driver refuses that too).
 */
#include <stdlib.h>
#include <string.h>

#include "fake-cuda-int.h"

enum cu_result cuGraphCreate(struct cu_graph **graph, unsigned flags)
{
	enum cu_result r = fake_enter();
	struct cu_graph *g;

	if (r)
		return r;
	if (!graph || flags)
		return fake_leave(CU_RES_INVALID_VALUE);
	g = calloc(1, sizeof(*g));
	if (!g)
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	fake_obj_add(&g->o, OBJ_GRAPH);
	*graph = g;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuGraphDestroy(struct cu_graph *graph)
{
	enum cu_result r = fake_enter();
	struct cu_graph *g;

	if (r)
		return r;
	g = fake_obj_find(graph, OBJ_GRAPH);
	if (!g)
		return fake_leave(CU_RES_INVALID_VALUE);
	for (struct cu_graph_node *n = g->first, *next; n; n = next) {
		next = n->next_in_graph;
		fake_obj_free(&n->o);
	}
	fake_obj_free(&g->o);
	return fake_leave(CU_RES_SUCCESS);
}

static struct cu_graph_node *node_of(struct cu_graph *g, cu_deviceptr ptr,
				     enum cu_graph_node_type type)
{
	for (struct cu_graph_node *n = g->first; n; n = n->next_in_graph)
		if (n->type == type && n->ptr == ptr)
			return n;
	return NULL;
}

/* Checks the graph and the dependencies (nodes of that graph) and adds a node; the lock is
 * held. */
static enum cu_result node_add(struct cu_graph_node **ret, struct cu_graph *graph,
			       const struct cu_graph_node *const *deps, size_t n_deps,
			       struct cu_graph_node proto)
{
	struct cu_graph *g = fake_obj_find(graph, OBJ_GRAPH);
	struct cu_graph_node *n;

	if (!ret || !g || (n_deps && !deps))
		return CU_RES_INVALID_VALUE;
	for (size_t i = 0; i < n_deps; i++) {
		const struct cu_graph_node *d = fake_obj_find(deps[i], OBJ_NODE);

		if (!d || d->graph != g)
			return CU_RES_INVALID_VALUE;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return CU_RES_OUT_OF_MEMORY;
	*n = proto;
	n->graph = g;
	fake_obj_add(&n->o, OBJ_NODE);
	if (g->last)
		g->last->next_in_graph = n;
	else
		g->first = n;
	g->last = n;
	*ret = n;
	return CU_RES_SUCCESS;
}

static enum cu_result add_alloc(struct cu_graph_node **ret, struct cu_graph *graph,
				const struct cu_graph_node *const *deps, size_t n_deps,
				struct cu_mem_alloc_node_params *p)
{
	struct cu_graph_node proto = { .type = CU_NODE_MEM_ALLOC };
	enum cu_result r;

	if (!p || !p->bytesize || p->pool_props.alloc_type != CU_ALLOC_PINNED ||
	    p->pool_props.location.type != CU_LOC_DEVICE)
		return CU_RES_INVALID_VALUE;
	if (!fake_ordinal_ok(p->pool_props.location.id))
		return CU_RES_INVALID_DEVICE;
	proto.phys = fake.visible[p->pool_props.location.id];
	proto.size = p->bytesize;
	proto.ptr = fake_va_take(p->bytesize, 512);
	r = node_add(ret, graph, deps, n_deps, proto);
	if (r == CU_RES_SUCCESS)
		p->dptr = proto.ptr;
	return r;
}

/* A free node frees what an allocation node of the same graph gives out, or a live graph
 * allocation of an earlier launch, once. */
static enum cu_result add_free(struct cu_graph_node **ret, struct cu_graph *graph,
			       const struct cu_graph_node *const *deps, size_t n_deps,
			       cu_deviceptr ptr)
{
	struct cu_graph *g = fake_obj_find(graph, OBJ_GRAPH);
	struct cu_graph_node proto = { .type = CU_NODE_MEM_FREE, .ptr = ptr };
	struct cu_graph_node *a;

	if (!g || node_of(g, ptr, CU_NODE_MEM_FREE))
		return CU_RES_INVALID_VALUE;
	a = node_of(g, ptr, CU_NODE_MEM_ALLOC);
	if (a) {
		proto.phys = a->phys;
		proto.size = a->size;
	} else {
		/* An earlier launch's allocation: checked again at launch. */
		proto.phys = -1;
	}
	return node_add(ret, graph, deps, n_deps, proto);
}

enum cu_result cuGraphAddMemAllocNode(struct cu_graph_node **node, struct cu_graph *graph,
				      struct cu_graph_node *const *deps, size_t n_deps,
				      struct cu_mem_alloc_node_params *params)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	return fake_leave(
		add_alloc(node, graph, (const struct cu_graph_node *const *)deps, n_deps, params));
}

enum cu_result cuGraphAddMemFreeNode(struct cu_graph_node **node, struct cu_graph *graph,
				     struct cu_graph_node *const *deps, size_t n_deps,
				     cu_deviceptr dptr)
{
	enum cu_result r = fake_enter();

	if (r)
		return r;
	return fake_leave(
		add_free(node, graph, (const struct cu_graph_node *const *)deps, n_deps, dptr));
}

static enum cu_result add_node(struct cu_graph_node **node, struct cu_graph *graph,
			       struct cu_graph_node *const *deps, size_t n_deps,
			       struct cu_graph_node_params *params)
{
	const struct cu_graph_node *const *d = (const struct cu_graph_node *const *)deps;
	enum cu_result r = fake_enter();

	if (r)
		return r;
	if (!params)
		return fake_leave(CU_RES_INVALID_VALUE);
	switch (params->type) {
	case CU_NODE_MEM_ALLOC:
		return fake_leave(add_alloc(node, graph, d, n_deps, &params->u.alloc));
	case CU_NODE_MEM_FREE:
		return fake_leave(add_free(node, graph, d, n_deps, params->u.free.dptr));
	case CU_NODE_EMPTY:
		return fake_leave(node_add(node, graph, d, n_deps,
					   (struct cu_graph_node){ .type = CU_NODE_EMPTY }));
	default:
		return fake_leave(CU_RES_NOT_SUPPORTED);
	}
}

enum cu_result cuGraphAddNode(struct cu_graph_node **node, struct cu_graph *graph,
			      struct cu_graph_node *const *deps, size_t n_deps,
			      struct cu_graph_node_params *params)
{
	return add_node(node, graph, deps, n_deps, params);
}

/* The edge data only qualifies dependencies; the fake runs nodes in the order added. */
enum cu_result cuGraphAddNode_v2(struct cu_graph_node **node, struct cu_graph *graph,
				 struct cu_graph_node *const *deps,
				 const struct cu_graph_edge_data *edges, size_t n_deps,
				 struct cu_graph_node_params *params)
{
	(void)edges;
	return add_node(node, graph, deps, n_deps, params);
}

enum cu_result cuGraphInstantiateWithFlags(struct cu_graph_exec **exec, struct cu_graph *graph,
					   unsigned long long flags)
{
	enum cu_result r = fake_enter();
	struct cu_graph *g;
	struct cu_graph_exec *e;
	size_t n = 0;

	(void)flags;
	if (r)
		return r;
	g = fake_obj_find(graph, OBJ_GRAPH);
	if (!exec || !g)
		return fake_leave(CU_RES_INVALID_VALUE);
	for (struct cu_graph_node *x = g->first; x; x = x->next_in_graph)
		n++;
	e = calloc(1, sizeof(*e));
	if (!e || (n && !(e->nodes = calloc(n, sizeof(*e->nodes))))) {
		free(e);
		return fake_leave(CU_RES_OUT_OF_MEMORY);
	}
	for (struct cu_graph_node *x = g->first; x; x = x->next_in_graph)
		e->nodes[e->n++] = *x;
	fake_obj_add(&e->o, OBJ_EXEC);
	*exec = e;
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuGraphExecDestroy(struct cu_graph_exec *exec)
{
	enum cu_result r = fake_enter();
	struct cu_graph_exec *e;

	if (r)
		return r;
	e = fake_obj_find(exec, OBJ_EXEC);
	if (!e)
		return fake_leave(CU_RES_INVALID_VALUE);
	free(e->nodes);
	fake_obj_free(&e->o);
	return fake_leave(CU_RES_SUCCESS);
}

/* The allocation node of e before index i that gives out ptr, or NULL. */
static const struct cu_graph_node *alloc_before(const struct cu_graph_exec *e, size_t i,
						cu_deviceptr ptr)
{
	for (size_t k = 0; k < i; k++)
		if (e->nodes[k].type == CU_NODE_MEM_ALLOC && e->nodes[k].ptr == ptr)
			return &e->nodes[k];
	return NULL;
}

static bool freed_after(const struct cu_graph_exec *e, size_t i, cu_deviceptr ptr)
{
	for (size_t k = i + 1; k < e->n; k++)
		if (e->nodes[k].type == CU_NODE_MEM_FREE && e->nodes[k].ptr == ptr)
			return true;
	return false;
}

/* Runs the memory nodes in order: first what each device's graph memory would peak at
 * (refusing the launch when that does not fit), then the allocations and frees themselves. */
static enum cu_result launch(struct cu_graph_exec *exec)
{
	enum cu_result r = fake_enter();
	uint64_t running[FAKE_CUDA_MAX], peak[FAKE_CUDA_MAX], grow[FAKE_CUDA_MAX] = { 0 };
	struct cu_graph_exec *e;

	if (r)
		return r;
	e = fake_obj_find(exec, OBJ_EXEC);
	if (!e)
		return fake_leave(CU_RES_INVALID_VALUE);
	for (int d = 0; d < FAKE_CUDA_MAX; d++)
		running[d] = peak[d] = fake.dev[d].graph_used;
	for (size_t i = 0; i < e->n; i++) {
		struct cu_graph_node *n = &e->nodes[i];
		const struct cu_graph_node *a;
		struct alloc *live;

		if (n->type == CU_NODE_MEM_ALLOC) {
			if (*fake_alloc_slot(n->ptr))
				return fake_leave(CU_RES_INVALID_VALUE); /* not freed since */
			running[n->phys] += n->size;
			if (running[n->phys] > peak[n->phys])
				peak[n->phys] = running[n->phys];
		} else if (n->type == CU_NODE_MEM_FREE) {
			a = alloc_before(e, i, n->ptr);
			live = *fake_alloc_slot(n->ptr);
			if (a)
				running[a->phys] -= a->size;
			else if (live && live->kind == ALLOC_GRAPH)
				running[live->phys] -= live->size;
			else
				return fake_leave(CU_RES_INVALID_VALUE);
		}
	}
	for (int d = 0; d < FAKE_CUDA_MAX; d++) {
		uint64_t need = fake_round_up(peak[d], GRAN);

		if (need <= fake.dev[d].graph_reserved)
			continue;
		grow[d] = need - fake.dev[d].graph_reserved;
		r = fake_charge(d, grow[d]);
		if (r) {
			while (d-- > 0)
				if (grow[d])
					fake_uncharge(d, grow[d]);
			return fake_leave(r);
		}
	}
	for (int d = 0; d < FAKE_CUDA_MAX; d++) {
		struct device *dev = &fake.dev[d];

		dev->graph_reserved += grow[d];
		if (dev->graph_reserved > dev->graph_reserved_high)
			dev->graph_reserved_high = dev->graph_reserved;
		if (peak[d] > dev->graph_used_high)
			dev->graph_used_high = peak[d];
	}
	for (size_t i = 0; i < e->n; i++) {
		struct cu_graph_node *n = &e->nodes[i];

		if (n->type == CU_NODE_MEM_ALLOC && !freed_after(e, i, n->ptr)) {
			r = fake_alloc_add(n->ptr, n->size, n->phys, ALLOC_GRAPH, NULL);
			if (r)
				return fake_leave(r);
			fake.dev[n->phys].graph_used += n->size;
		} else if (n->type == CU_NODE_MEM_FREE && !alloc_before(e, i, n->ptr)) {
			(void)fake_free_locked(n->ptr, 1u << ALLOC_GRAPH);
		}
	}
	return fake_leave(CU_RES_SUCCESS);
}

enum cu_result cuGraphLaunch(struct cu_graph_exec *exec, struct cu_stream *stream)
{
	(void)stream;
	return launch(exec);
}

enum cu_result cuGraphLaunch_ptsz(struct cu_graph_exec *exec, struct cu_stream *stream)
{
	(void)stream;
	return launch(exec);
}

enum cu_result cuDeviceGetGraphMemAttribute(cu_device dev, enum cu_graph_mem_attr attr, void *value)
{
	enum cu_result r = fake_enter();
	struct device *d;
	cu_uint64 v;

	if (r)
		return r;
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	if (!value)
		return fake_leave(CU_RES_INVALID_VALUE);
	d = &fake.dev[fake.visible[dev]];
	switch (attr) {
	case CU_GRAPH_MEM_USED_CURRENT:
		v = d->graph_used;
		break;
	case CU_GRAPH_MEM_USED_HIGH:
		v = d->graph_used_high;
		break;
	case CU_GRAPH_MEM_RESERVED_CURRENT:
		v = d->graph_reserved;
		break;
	case CU_GRAPH_MEM_RESERVED_HIGH:
		v = d->graph_reserved_high;
		break;
	default:
		return fake_leave(CU_RES_INVALID_VALUE);
	}
	memcpy(value, &v, sizeof(v));
	return fake_leave(CU_RES_SUCCESS);
}

/* Gives back the graph memory reserved beyond what live graph allocations use. */
enum cu_result cuDeviceGraphMemTrim(cu_device dev)
{
	enum cu_result r = fake_enter();
	struct device *d;
	uint64_t keep;

	if (r)
		return r;
	if (!fake_ordinal_ok(dev))
		return fake_leave(CU_RES_INVALID_DEVICE);
	d = &fake.dev[fake.visible[dev]];
	keep = fake_round_up(d->graph_used, GRAN);
	if (keep < d->graph_reserved) {
		fake_uncharge(fake.visible[dev], d->graph_reserved - keep);
		d->graph_reserved = keep;
	}
	return fake_leave(CU_RES_SUCCESS);
}
