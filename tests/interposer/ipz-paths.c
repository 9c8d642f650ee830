/*
 * ipz-paths LIMIT_MIB [report] [managed-ignore] [path=NAME]: allocates through every producer of device
 * memory on device 0, with the functions found by dlsym, by cuGetProcAddress_v2 and by the 11.x
 * cuGetProcAddress in turn. For each path: up to the limit works, past it gets exactly
 * CUDA_ERROR_OUT_OF_MEMORY (2), freeing gives the room back, and afterwards cuMemGetInfo_v2
 * says total == LIMIT and free == total. With "report" allocations past the limit succeed
 * (and are freed); with "managed-ignore" managed memory is not counted; path=NAME runs one
 * path alone (plain, pitch, managed, vmm, async, pool, arrays, graph), so that a failure in
 * one does not leave the next without room.
 *
 * The limit is the container's slice under the interposer, or the fake device's memory without
 * it (EDGEGPU_FAKE_CUDA_MEM_MIB=LIMIT): the program holds either to the same rules. LIMIT is a
 * multiple of 4 (MiB), at least 8. Exit 0 when every check passed; each failure is printed.
 */
#include "ipz-test.h"

static const struct cu_api *a;
static unsigned long long L, H; /* the limit, half of it (bytes) */
static bool report, managed_ignore;

/* What a request past the limit gets: OOM, or success in report mode (then undone by undo). */
static void expect_over(int res, bool counted, const char *what)
{
	int want = report || !counted ? CU_RES_SUCCESS : CU_RES_OUT_OF_MEMORY;

	CHECK(res == want, "%s past the limit: got %d, want %d", what, res, want);
}

static void check_clean(void)
{
	size_t free_b = 1, total = 0;

	if (OK(a->cuMemGetInfo_v2(&free_b, &total)))
		return;
	CHECK(total == L, "cuMemGetInfo_v2 total %zu, want %llu", total, L);
	CHECK(free_b == total, "cuMemGetInfo_v2 free %zu != total %zu: something still held",
	      free_b, total);
}

static void path_plain(void)
{
	cu_deviceptr p1 = 0, p2 = 0, p3 = 0;

	ipz_context = "cuMemAlloc_v2";
	OK(a->cuMemAlloc_v2(&p1, H));
	OK(a->cuMemAlloc_v2(&p2, H));
	expect_over(a->cuMemAlloc_v2(&p3, 2 * MIB), true, "cuMemAlloc_v2");
	if (p3)
		OK(a->cuMemFree_v2(p3));
	OK(a->cuMemFree_v2(p2));
	OK(a->cuMemAlloc_v2(&p2, H));
	OK(a->cuMemFree_v2(p2));
	OK(a->cuMemFree_v2(p1));
	p3 = 0;
	expect_over(a->cuMemAlloc_v2(&p3, L + 2 * MIB), true, "cuMemAlloc_v2 of more than all");
	if (p3)
		OK(a->cuMemFree_v2(p3));
	OK(a->cuMemAlloc_v2(&p1, 1));
	OK(a->cuMemFree_v2(p1));
	/* A pointer nobody gave out still reaches the driver, which refuses it. */
	EXPECT_RES(a->cuMemFree_v2(0xdead0000ull), CU_RES_INVALID_VALUE);
	EXPECT_RES(a->cuMemAlloc_v2(&p1, 0), CU_RES_INVALID_VALUE);
	check_clean();
}

static void path_pitch(void)
{
	cu_deviceptr p1 = 0, p2 = 0, p3 = 0;
	size_t pitch = 0;

	ipz_context = "cuMemAllocPitch_v2";
	OK(a->cuMemAllocPitch_v2(&p1, &pitch, MIB, H / MIB, 4));
	CHECK(pitch == MIB, "pitch %zu", pitch);
	OK(a->cuMemAllocPitch_v2(&p2, &pitch, MIB, H / MIB, 16));
	expect_over(a->cuMemAllocPitch_v2(&p3, &pitch, 1000, 2048, 4), true, "cuMemAllocPitch_v2");
	if (p3)
		OK(a->cuMemFree_v2(p3));
	OK(a->cuMemFree_v2(p1));
	OK(a->cuMemFree_v2(p2));
	EXPECT_RES(a->cuMemAllocPitch_v2(&p1, &pitch, MIB, 2, 3), CU_RES_INVALID_VALUE);
	check_clean();
}

static void path_managed(void)
{
	cu_deviceptr p1 = 0, p2 = 0, p3 = 0;

	ipz_context = "cuMemAllocManaged";
	OK(a->cuMemAllocManaged(&p1, H, CU_ATTACH_GLOBAL));
	OK(a->cuMemAllocManaged(&p2, H, CU_ATTACH_HOST));
	expect_over(a->cuMemAllocManaged(&p3, 2 * MIB, CU_ATTACH_GLOBAL), !managed_ignore,
		    "cuMemAllocManaged");
	if (p3)
		OK(a->cuMemFree_v2(p3));
	OK(a->cuMemFree_v2(p1));
	OK(a->cuMemFree_v2(p2));
	check_clean();
}

static void path_vmm(void)
{
	struct cu_mem_alloc_prop prop = { .type = CU_ALLOC_PINNED,
					  .location = { .type = CU_LOC_DEVICE, .id = 0 } };
	struct cu_mem_access_desc acc = { .location = { .type = CU_LOC_DEVICE, .id = 0 },
					  .flags = CU_ACCESS_PROT_READWRITE };
	cu_mem_handle h1 = 0, h2 = 0, h3 = 0;
	cu_deviceptr va = 0;
	size_t free_b = 0, total = 0;

	ipz_context = "cuMemCreate device";
	OK(a->cuMemCreate(&h1, H, &prop, 0));
	OK(a->cuMemCreate(&h2, H, &prop, 0));
	expect_over(a->cuMemCreate(&h3, 2 * MIB, &prop, 0), true, "cuMemCreate");
	if (h3)
		OK(a->cuMemRelease(h3));
	OK(a->cuMemAddressReserve(&va, L, 0, 0, 0));
	OK(a->cuMemMap(va, H, 0, h1, 0));
	OK(a->cuMemMap(va + H, H, 0, h2, 0));
	OK(a->cuMemSetAccess(va, L, &acc, 1));
	/* Released but mapped: the memory is still held until unmapped. */
	OK(a->cuMemRelease(h1));
	OK(a->cuMemRelease(h2));
	EXPECT_RES(a->cuMemRelease(h2), CU_RES_INVALID_VALUE);
	h3 = 0;
	expect_over(a->cuMemCreate(&h3, 2 * MIB, &prop, 0), true, "cuMemCreate while mapped");
	if (h3)
		OK(a->cuMemRelease(h3));
	if (!OK(a->cuMemGetInfo_v2(&free_b, &total)) && !report)
		CHECK(free_b == 0, "free %zu while everything is mapped", free_b);
	OK(a->cuMemUnmap(va, L));
	OK(a->cuMemAddressFree(va, L));
	check_clean();

	ipz_context = "cuMemCreate host";
	prop.location.type = CU_LOC_HOST;
	OK(a->cuMemCreate(&h1, L + 2 * MIB, &prop, 0));
	OK(a->cuMemRelease(h1));
	check_clean();
}

static unsigned long long pool_reserved(struct cu_mem_pool *pool)
{
	cu_uint64 v = ~0ull;

	OK(a->cuMemPoolGetAttribute(pool, CU_POOL_ATTR_RESERVED_MEM_CURRENT, &v));
	return v;
}

static void path_async(void)
{
	struct cu_mem_pool *pool = NULL;
	cu_deviceptr p1 = 0, p2 = 0, p3 = 0;

	ipz_context = "cuMemAllocAsync";
	OK(a->cuDeviceGetMemPool(&pool, 0));
	OK(a->cuMemAllocAsync(&p1, H, NULL));
	OK(a->cuMemAllocAsync_ptsz(&p2, H, NULL));
	expect_over(a->cuMemAllocAsync(&p3, 2 * MIB, NULL), true, "cuMemAllocAsync");
	if (p3)
		OK(a->cuMemFreeAsync(p3, NULL));
	OK(a->cuMemFreeAsync(p1, NULL));
	OK(a->cuMemFreeAsync_ptsz(p2, NULL));
	/* Freed into the pool, which keeps it: no room for anything else ... */
	CHECK(pool_reserved(pool) >= L, "pool reserved %llu after frees", pool_reserved(pool));
	p3 = 0;
	expect_over(a->cuMemAlloc_v2(&p3, 2 * MIB), true, "cuMemAlloc_v2 beside a full pool");
	if (p3)
		OK(a->cuMemFree_v2(p3));
	/* ... but the pool's own room serves it again. */
	OK(a->cuMemAllocAsync(&p1, H, NULL));
	OK(a->cuMemFreeAsync(p1, NULL));
	OK(a->cuMemPoolTrimTo(pool, 0));
	CHECK(pool_reserved(pool) == 0, "pool reserved %llu after trim", pool_reserved(pool));
	check_clean();
	/* Synchronizing gives a pool's unused memory back too (release threshold 0). */
	OK(a->cuMemAllocAsync(&p1, H, NULL));
	OK(a->cuMemFreeAsync(p1, NULL));
	OK(a->cuStreamSynchronize(NULL));
	check_clean();
	EXPECT_RES(a->cuMemFreeAsync(0xdead0000ull, NULL), CU_RES_INVALID_VALUE);
}

static void path_pool(void)
{
	struct cu_mem_pool_props props = { .alloc_type = CU_ALLOC_PINNED,
					   .location = { .type = CU_LOC_DEVICE, .id = 0 } };
	struct cu_mem_location loc = { .type = CU_LOC_DEVICE, .id = 0 };
	struct cu_mem_pool *pool = NULL, *dflt = NULL, *dflt13 = NULL, *cur = NULL;
	cu_deviceptr p1 = 0, p2 = 0, p3 = 0;

	ipz_context = "cuMemAllocFromPoolAsync";
	OK(a->cuMemPoolCreate(&pool, &props));
	OK(a->cuMemAllocFromPoolAsync(&p1, H, pool, NULL));
	OK(a->cuMemAllocFromPoolAsync_ptsz(&p2, H, pool, NULL));
	expect_over(a->cuMemAllocFromPoolAsync(&p3, 2 * MIB, pool, NULL), true,
		    "cuMemAllocFromPoolAsync");
	if (p3)
		OK(a->cuMemFreeAsync(p3, NULL));
	OK(a->cuMemFreeAsync(p1, NULL));
	OK(a->cuMemFreeAsync(p2, NULL));
	OK(a->cuMemPoolTrimTo(pool, 0));
	check_clean();

	/* CUDA 13's location-based pool selection reaches the same pools. */
	ipz_context = "cuMemSetMemPool";
	OK(a->cuDeviceGetDefaultMemPool(&dflt, 0));
	OK(a->cuMemGetDefaultMemPool(&dflt13, &loc, CU_ALLOC_PINNED));
	CHECK(dflt == dflt13, "two default pools");
	OK(a->cuMemSetMemPool(&loc, CU_ALLOC_PINNED, pool));
	OK(a->cuMemGetMemPool(&cur, &loc, CU_ALLOC_PINNED));
	CHECK(cur == pool, "cuMemGetMemPool did not give the pool set");
	OK(a->cuMemAllocAsync(&p1, L, NULL));
	CHECK(pool_reserved(pool) == L, "created pool reserved %llu", pool_reserved(pool));
	p3 = 0;
	expect_over(a->cuMemAllocAsync(&p3, 2 * MIB, NULL), true, "cuMemAllocAsync, set pool");
	if (p3)
		OK(a->cuMemFreeAsync(p3, NULL));
	OK(a->cuMemFreeAsync(p1, NULL));
	OK(a->cuDeviceSetMemPool(0, dflt));
	OK(a->cuMemPoolDestroy(pool));
	check_clean();
}

static void path_arrays(void)
{
	/* float, one channel: width x height x 4 bytes = H */
	struct cu_array_desc d2 = {
		.width = 1024, .height = H / 4096, .format = CU_FMT_FLOAT, .num_channels = 1
	};
	struct cu_array3d_desc d3 = { .width = 256,
				      .height = 256,
				      .depth = H / (256ull * 256 * 4),
				      .format = CU_FMT_FLOAT,
				      .num_channels = 1 };
	struct cu_array3d_desc small = { .width = 64,
					 .format = CU_FMT_UNSIGNED_INT8,
					 .num_channels = 1 };
	struct cu_array *x1 = NULL, *x2 = NULL, *x3 = NULL;
	struct cu_mipmapped_array *m1 = NULL, *m2 = NULL, *m3 = NULL;
	struct cu_array_mem_req req;

	ipz_context = "cuArrayCreate_v2";
	OK(a->cuArrayCreate_v2(&x1, &d2));
	OK(a->cuArray3DCreate_v2(&x2, &d3));
	if (!OK(a->cuArrayGetMemoryRequirements(&req, x1, 0)))
		CHECK(req.size == H, "array requirement %zu, want %llu", req.size, H);
	expect_over(a->cuArray3DCreate_v2(&x3, &small), true, "cuArray3DCreate_v2");
	if (x3)
		OK(a->cuArrayDestroy(x3));
	OK(a->cuArrayDestroy(x1));
	OK(a->cuArrayDestroy(x2));
	check_clean();

	ipz_context = "cuMipmappedArrayCreate";
	OK(a->cuMipmappedArrayCreate(&m1, &d3, 1));
	OK(a->cuMipmappedArrayCreate(&m2, &d3, 1));
	if (!OK(a->cuMipmappedArrayGetMemoryRequirements(&req, m2, 0)))
		CHECK(req.size == H, "mipmap requirement %zu, want %llu", req.size, H);
	expect_over(a->cuMipmappedArrayCreate(&m3, &small, 3), true, "cuMipmappedArrayCreate");
	if (m3)
		OK(a->cuMipmappedArrayDestroy(m3));
	OK(a->cuMipmappedArrayDestroy(m1));
	OK(a->cuMipmappedArrayDestroy(m2));
	check_clean();
}

static unsigned long long graph_reserved(void)
{
	cu_uint64 v = ~0ull;

	OK(a->cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_RESERVED_CURRENT, &v));
	return v;
}

static void path_graph(void)
{
	struct cu_mem_alloc_node_params ap = { .pool_props = { .alloc_type = CU_ALLOC_PINNED,
							       .location = { .type = CU_LOC_DEVICE,
									     .id = 0 } },
					       .bytesize = H };
	struct cu_graph_node_params np = { .type = CU_NODE_MEM_ALLOC };
	struct cu_graph *g1 = NULL, *g2 = NULL, *g3 = NULL, *g4 = NULL;
	struct cu_graph_exec *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
	struct cu_graph_node *n1 = NULL, *n2 = NULL;
	cu_deviceptr p = 0, q1, q2;
	int r;

	/* alloc H, free it: the launch reserves H for the graph's peak */
	ipz_context = "cuGraphAddMemAllocNode";
	OK(a->cuGraphCreate(&g1, 0));
	OK(a->cuGraphAddMemAllocNode(&n1, g1, NULL, 0, &ap));
	OK(a->cuGraphAddMemFreeNode(&n2, g1, &n1, 1, ap.dptr));
	OK(a->cuGraphInstantiateWithFlags(&e1, g1, 0));
	OK(a->cuGraphLaunch(e1, NULL));
	OK(a->cuGraphLaunch_ptsz(e1, NULL));
	CHECK(graph_reserved() == H, "graph reserved %llu, want %llu", graph_reserved(), H);

	/* a node wanting more than the limit: refused when added or when launched */
	ap.bytesize = L + 2 * MIB;
	OK(a->cuGraphCreate(&g2, 0));
	r = a->cuGraphAddMemAllocNode(&n1, g2, NULL, 0, &ap);
	if (r == CU_RES_SUCCESS) {
		OK(a->cuGraphAddMemFreeNode(&n2, g2, &n1, 1, ap.dptr));
		OK(a->cuGraphInstantiateWithFlags(&e2, g2, 0));
		r = a->cuGraphLaunch(e2, NULL);
	}
	expect_over(r, true, "graph memory node bigger than the limit");

	/* two nodes that fit alone but not together beside 2 MiB held: refused at launch */
	OK(a->cuDeviceGraphMemTrim(0));
	OK(a->cuMemAlloc_v2(&p, 2 * MIB));
	ap.bytesize = H;
	OK(a->cuGraphCreate(&g4, 0));
	OK(a->cuGraphAddMemAllocNode(&n1, g4, NULL, 0, &ap));
	q1 = ap.dptr;
	OK(a->cuGraphAddMemAllocNode(&n2, g4, &n1, 1, &ap));
	q2 = ap.dptr;
	OK(a->cuGraphAddMemFreeNode(&n1, g4, &n2, 1, q1));
	OK(a->cuGraphAddMemFreeNode(&n2, g4, &n1, 1, q2));
	OK(a->cuGraphInstantiateWithFlags(&e4, g4, 0));
	expect_over(a->cuGraphLaunch(e4, NULL), true, "graph peak beside other memory");
	OK(a->cuMemFree_v2(p));
	OK(a->cuDeviceGraphMemTrim(0));
	OK(a->cuGraphExecDestroy(e4));
	OK(a->cuGraphDestroy(g4));

	/* cuGraphAddNode_v2 with an allocation the graph keeps: it lives on after the launch */
	ipz_context = "cuGraphAddNode_v2";
	OK(a->cuDeviceGraphMemTrim(0));
	np.u.alloc = (struct cu_mem_alloc_node_params){
		.pool_props = { .alloc_type = CU_ALLOC_PINNED,
				.location = { .type = CU_LOC_DEVICE, .id = 0 } },
		.bytesize = H
	};
	OK(a->cuGraphCreate(&g3, 0));
	OK(a->cuGraphAddNode_v2(&n1, g3, NULL, NULL, 0, &np));
	OK(a->cuGraphInstantiateWithFlags(&e3, g3, 0));
	OK(a->cuGraphLaunch(e3, NULL));
	CHECK(graph_reserved() == H, "graph reserved %llu, want %llu", graph_reserved(), H);
	OK(a->cuMemAlloc_v2(&p, H));
	{
		cu_deviceptr q = 0;

		expect_over(a->cuMemAlloc_v2(&q, 2 * MIB), true,
			    "cuMemAlloc_v2 beside graph memory");
		if (q)
			OK(a->cuMemFree_v2(q));
	}
	OK(a->cuMemFree_v2(p));
	OK(a->cuMemFreeAsync(np.u.alloc.dptr, NULL));
	OK(a->cuDeviceGraphMemTrim(0));
	CHECK(graph_reserved() == 0, "graph reserved %llu after trim", graph_reserved());

	/* the CUDA 12.2 cuGraphAddNode (no edge data) */
	ipz_context = "cuGraphAddNode";
	OK(a->cuGraphAddNode(&n2, g3, &n1, 1,
			     &(struct cu_graph_node_params){ .type = CU_NODE_MEM_FREE,
							     .u.free.dptr = np.u.alloc.dptr }));
	OK(a->cuGraphExecDestroy(e3));
	OK(a->cuGraphInstantiateWithFlags(&e3, g3, 0));
	OK(a->cuGraphLaunch(e3, NULL));
	OK(a->cuDeviceGraphMemTrim(0));

	OK(a->cuGraphExecDestroy(e1));
	if (e2)
		OK(a->cuGraphExecDestroy(e2));
	OK(a->cuGraphExecDestroy(e3));
	OK(a->cuGraphDestroy(g1));
	OK(a->cuGraphDestroy(g2));
	OK(a->cuGraphDestroy(g3));
	check_clean();
}

static const struct {
	const char *name;
	void (*run)(void);
} paths[] = {
	{ "plain", path_plain },   { "pitch", path_pitch }, { "managed", path_managed },
	{ "vmm", path_vmm },	   { "async", path_async }, { "pool", path_pool },
	{ "arrays", path_arrays }, { "graph", path_graph },
};
static const char *only; /* path=NAME: that path alone */

static void run_paths(const struct cu_api *api, const char *how)
{
	a = api;
	ipz_context = how;
	(void)fprintf(stderr, "ipz-paths: functions from %s\n", how);
	if (ipz_use_device(a, 0) < 0)
		return;
	check_clean();
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (!only || !strcmp(only, paths[i].name))
			paths[i].run();
}

int main(int argc, char **argv)
{
	struct cu_api dl, gp2, gp1;
	void *h;

	if (argc < 2 || ipz_number(argv[1]) < 8 || ipz_number(argv[1]) % 4) {
		(void)fprintf(stderr,
			      "usage: ipz-paths LIMIT_MIB [report] [managed-ignore] [path=NAME]\n");
		return 2;
	}
	L = (unsigned long long)ipz_number(argv[1]) * MIB;
	H = L / 2;
	for (int i = 2; i < argc; i++) {
		report |= !strcmp(argv[i], "report");
		managed_ignore |= !strcmp(argv[i], "managed-ignore");
		if (!strncmp(argv[i], "path=", 5))
			only = argv[i] + 5;
	}
	h = ipz_open_driver();
	if (!h || ipz_load_dlsym(h, &dl) < 0)
		return 1;
	ipz_context = "cuGetProcAddress";
	CHECK(ipz_load_getproc(&dl, &gp2, true) == 0, "cuGetProcAddress_v2 table incomplete");
	CHECK(ipz_load_getproc(&dl, &gp1, false) == 0, "cuGetProcAddress table incomplete");
	/* The per-thread variants are their own functions (HAMi-core handed out the legacy one). */
	CHECK(gp2.cuMemAllocAsync_ptsz != gp2.cuMemAllocAsync, "_ptsz answered with the legacy");
	CHECK(gp2.cuGraphLaunch_ptsz != gp2.cuGraphLaunch, "_ptsz answered with the legacy");
	CHECK(gp2.cuDeviceGetUuid_v2 != gp2.cuDeviceGetUuid ||
		      dl.cuDeviceGetUuid_v2 == dl.cuDeviceGetUuid,
	      "version 11040 answered like 9020");
	if (ipz_failures)
		return 1;
	run_paths(&dl, "dlsym");
	run_paths(&gp2, "cuGetProcAddress_v2");
	run_paths(&gp1, "cuGetProcAddress (11.x)");
	if (ipz_failures) {
		(void)fprintf(stderr, "ipz-paths: %d checks failed\n", ipz_failures);
		return 1;
	}
	(void)printf("ipz-paths: ok\n");
	return 0;
}
