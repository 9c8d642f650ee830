#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "deviceplugin.pb-c.h"
#include "gpu.h"
#include "gpus.h"
#include "resource.h"
#include "unit.h"

static struct gpu_device devs[4];
static struct gpu_info info = { .devices = devs };

static void make_info(unsigned n, uint64_t mem_mib)
{
	memset(devs, 0, sizeof(devs));
	for (unsigned i = 0; i < n; i++) {
		devs[i].index = i;
		(void)snprintf(devs[i].uuid, sizeof(devs[i].uuid),
			       "GPU-0000000%u-1111-2222-3333-44444444444%u", i, i);
		devs[i].mem_total = mem_mib << 20;
		devs[i].numa_node = -1;
		devs[i].minor = i;
	}
	info.n_devices = n;
}

static bool all_healthy(const struct resource *r, unsigned d, void *u)
{
	return true;
}

static bool odd_unhealthy(const struct resource *r, unsigned d, void *u)
{
	return d % 2 == 0;
}

static struct resource *mk(enum resource_kind kind, unsigned n_gpus, unsigned replicas,
			   uint64_t unit, uint64_t reserve)
{
	static const unsigned all[] = { 0, 1, 2, 3 };
	struct resource_spec spec = {
		.name = kind == RESOURCE_GPUMEM ? "nvidia.com/gpumem" : "nvidia.com/gpu",
		.kind = kind,
		.gpus = all,
		.n_gpus = n_gpus,
		.replicas = replicas,
		.unit_mib = unit,
		.reserve_mib = reserve,
	};
	struct resource *r = NULL;
	char *err = NULL;

	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	assert_null(err);
	return r;
}

static void test_socket_names(void **state)
{
	char *s = config_socket_name("nvidia.com/gpu");

	assert_string_equal(s, "nvidia-gpu.sock");
	free(s);
	s = config_socket_name("nvidia.com/gpu.shared");
	assert_string_equal(s, "nvidia-gpu.shared.sock");
	free(s);
	s = config_socket_name("nvidia.com/gpumem");
	assert_string_equal(s, "nvidia-gpumem.sock");
	free(s);
}

static void test_gpu_ids_and_lookup(void **state)
{
	struct resource *r;
	char id[128];

	make_info(2, 16384);
	r = mk(RESOURCE_GPU, 2, 0, 0, 0);
	assert_int_equal(r->n_devices, 2);
	assert_string_equal(r->socket, "nvidia-gpu.sock");
	resource_device_id(r, 1, id);
	assert_string_equal(id, devs[1].uuid);
	assert_int_equal(resource_device_lookup(r, devs[0].uuid, strlen(devs[0].uuid)), 0);
	assert_int_equal(resource_device_lookup(r, devs[1].uuid, strlen(devs[1].uuid)), 1);
	assert_int_equal(resource_device_lookup(r, "GPU-bogus", 9), -ENOENT);
	resource_free(r);
}

static void test_replica_ids(void **state)
{
	struct resource *r;
	char id[128], want[128];

	make_info(2, 16384);
	r = mk(RESOURCE_REPLICA, 2, 4, 0, 0);
	assert_int_equal(r->n_devices, 8);
	resource_device_id(r, 6, id);
	(void)snprintf(want, sizeof(want), "%s::2", devs[1].uuid);
	assert_string_equal(id, want);
	for (unsigned i = 0; i < r->n_devices; i++) {
		size_t n = resource_device_id(r, i, id);

		assert_int_equal(resource_device_lookup(r, id, n), (int)i);
		assert_int_equal(resource_device_gpu(r, i), i / 4);
	}
	(void)snprintf(want, sizeof(want), "%s::4", devs[1].uuid);
	assert_int_equal(resource_device_lookup(r, want, strlen(want)), -ENOENT);
	(void)snprintf(want, sizeof(want), "%s::01", devs[1].uuid);
	assert_int_equal(resource_device_lookup(r, want, strlen(want)), -ENOENT);
	(void)snprintf(want, sizeof(want), "%s::", devs[1].uuid);
	assert_int_equal(resource_device_lookup(r, want, strlen(want)), -ENOENT);
	assert_int_equal(resource_device_lookup(r, devs[1].uuid, strlen(devs[1].uuid)), -ENOENT);
	resource_free(r);
}

static void test_gpumem_ids_short_unique_stable(void **state)
{
	struct resource *r, *r2;
	char id[128], id2[128];

	make_info(2, 8192);
	r = mk(RESOURCE_GPUMEM, 2, 0, 1, 512);
	assert_int_equal(r->n_devices, 2 * (8192 - 512));
	assert_int_not_equal(r->gpus[0].letter, r->gpus[1].letter);
	for (unsigned i = 0; i < r->n_devices; i++) {
		size_t n = resource_device_id(r, i, id);

		assert_true(n >= 2 && n <= 6);
		assert_int_equal(resource_device_lookup(r, id, n), (int)i);
	}
	/* Same UUIDs, unit and reserve: same IDs, even when built again. */
	r2 = mk(RESOURCE_GPUMEM, 2, 0, 1, 512);
	for (unsigned i = 0; i < r->n_devices; i += 97) {
		resource_device_id(r, i, id);
		resource_device_id(r2, i, id2);
		assert_string_equal(id, id2);
	}
	assert_int_equal(resource_device_lookup(r, "a00", 3), -ENOENT);
	assert_int_equal(resource_device_lookup(r, "A1", 2), -ENOENT);
	resource_free(r);
	resource_free(r2);
}

static void test_gpumem_reserve_too_big(void **state)
{
	static const unsigned one[] = { 0 };
	struct resource_spec spec = { .name = "nvidia.com/gpumem",
				      .kind = RESOURCE_GPUMEM,
				      .gpus = one,
				      .n_gpus = 1,
				      .unit_mib = 1,
				      .reserve_mib = 9000 };
	struct resource *r = NULL;
	char *err = NULL;

	make_info(1, 8192);
	assert_int_equal(resource_new(&spec, &info, &r, &err), -EINVAL);
	assert_non_null(strstr(err, "reserveMiB 9000"));
	free(err);
	err = NULL;
	spec.reserve_mib = 0;
	spec.unit_mib = 0;
	assert_int_equal(resource_new(&spec, &info, &r, &err), -EINVAL);
	assert_non_null(strstr(err, "unitMiB"));
	free(err);
}

static void check_list_decodes(struct resource *r, const int *numa, resource_health_fn *h)
{
	struct buf b = { 0 };
	V1beta1__ListAndWatchResponse *m;
	char id[128];

	assert_int_equal(resource_encode_list(r, numa, h, NULL, &b), 0);
	if (h == all_healthy)
		assert_int_equal(b.len, resource_list_size(r, numa));
	m = v1beta1__list_and_watch_response__unpack(NULL, b.len, b.data);
	assert_non_null(m);
	assert_int_equal(m->n_devices, r->n_devices);
	for (unsigned i = 0; i < r->n_devices; i += (r->n_devices / 50) + 1) {
		resource_device_id(r, i, id);
		assert_string_equal(m->devices[i]->id, id);
		assert_string_equal(m->devices[i]->health, h(r, i, NULL) ? "Healthy" : "Unhealthy");
		if (r->kind != RESOURCE_GPUMEM && numa && numa[resource_device_gpu(r, i)] >= 0) {
			assert_non_null(m->devices[i]->topology);
			assert_int_equal(m->devices[i]->topology->n_nodes, 1);
			assert_int_equal(m->devices[i]->topology->nodes[0]->id,
					 numa[resource_device_gpu(r, i)]);
		} else {
			assert_null(m->devices[i]->topology);
		}
	}
	v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	buf_release(&b);
}

static void test_list_encoding(void **state)
{
	int numa[2] = { 0, 1 }, none[2] = { -1, 1 };
	struct resource *r;

	make_info(2, 8192);
	r = mk(RESOURCE_GPU, 2, 0, 0, 0);
	check_list_decodes(r, numa, all_healthy);
	check_list_decodes(r, none, odd_unhealthy);
	resource_free(r);
	r = mk(RESOURCE_REPLICA, 2, 3, 0, 0);
	check_list_decodes(r, numa, odd_unhealthy);
	resource_free(r);
	r = mk(RESOURCE_GPUMEM, 2, 0, 1, 512);
	check_list_decodes(r, numa, all_healthy); /* units never carry topology */
	check_list_decodes(r, numa, odd_unhealthy);
	resource_free(r);
}

static void test_gpumem_unit_doubling(void **state)
{
	struct resource *r;

	make_info(3, 81920);
	r = mk(RESOURCE_GPUMEM, 2, 0, 1, 512);
	assert_int_equal(r->unit_mib, 1);
	assert_true(resource_list_size(r, NULL) < (size_t)3 << 20);
	resource_free(r);
	r = mk(RESOURCE_GPUMEM, 3, 0, 1, 512);
	assert_int_equal(r->unit_mib_asked, 1);
	assert_int_equal(r->unit_mib, 2);
	assert_int_equal(r->n_devices, 3 * ((81920 - 512) / 2));
	assert_true(resource_list_size(r, NULL) < (size_t)3 << 20);
	resource_free(r);
}

static void test_preferred_gpu_numa_and_must(void **state)
{
	int numa[4] = { 0, 1, 0, 1 };
	unsigned avail[] = { 3, 2, 1, 0 }, must[] = { 1 }, out[4];
	struct resource_pref_ctx ctx = { .numa = numa, .n_all = 4 };
	struct resource *r;

	make_info(4, 8192);
	r = mk(RESOURCE_GPU, 4, 0, 0, 0);
	assert_int_equal(resource_preferred(r, &ctx, avail, 4, NULL, 0, 2, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	assert_int_equal(resource_preferred(r, &ctx, avail, 4, must, 1, 2, out), 2);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 3);
	resource_free(r);
}

static void test_preferred_gpu_distance(void **state)
{
	/* 0-1 and 2-3 share a switch; 1-2 far apart. */
	int dist[16] = { 0, 10, 40, 40, 10, 0, 40, 40, 40, 40, 0, 10, 40, 40, 10, 0 };
	unsigned avail[] = { 1, 2, 3 }, out[4];
	struct resource_pref_ctx ctx = { .distance = dist, .n_all = 4 };
	struct resource *r;

	make_info(4, 8192);
	r = mk(RESOURCE_GPU, 4, 0, 0, 0);
	assert_int_equal(resource_preferred(r, &ctx, avail, 3, NULL, 0, 2, out), 2);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 3);
	resource_free(r);
}

static void test_preferred_replicas_spread(void **state)
{
	unsigned avail[8], out[8], n = 0;
	struct resource_pref_ctx ctx = { 0 };
	struct resource *r;

	make_info(2, 8192);
	r = mk(RESOURCE_REPLICA, 2, 4, 0, 0);
	/* GPU 0 has replicas 0 and 1 taken already: 2 of 4 used there, 0 on GPU 1. */
	for (unsigned i = 2; i < 8; i++)
		avail[n++] = i;
	assert_int_equal(resource_preferred(r, &ctx, avail, n, NULL, 0, 3, out), 3);
	assert_int_equal(out[0], 4); /* GPU 1 replica 0 */
	assert_int_equal(out[1], 5); /* GPU 1 still less used (1 vs 2) */
	assert_int_equal(out[2], 2); /* tie 2/2: lower GPU index, lowest replica */
	resource_free(r);
}

static void test_preferred_gpumem_best_fit(void **state)
{
	struct resource_pref_ctx ctx = { 0 };
	struct resource *r;
	unsigned *avail, *out, n = 0;

	make_info(2, 8192 + 512);
	r = mk(RESOURCE_GPUMEM, 2, 0, 1, 512);
	avail = calloc(r->n_devices, sizeof(*avail));
	out = calloc(r->n_devices, sizeof(*out));
	/* GPU 0: 3000 free units; GPU 1: 6000 free units. */
	for (unsigned i = 0; i < 3000; i++)
		avail[n++] = r->gpus[0].first + 8192 - 3000 + i;
	for (unsigned i = 0; i < 6000; i++)
		avail[n++] = r->gpus[1].first + i;
	assert_int_equal(resource_preferred(r, &ctx, avail, n, NULL, 0, 2000, out), 2000);
	for (unsigned i = 0; i < 2000; i++)
		assert_int_equal(resource_device_slot(r, out[i]), 0); /* fewest free that fits */
	assert_int_equal(resource_preferred(r, &ctx, avail, n, NULL, 0, 4000, out), 4000);
	for (unsigned i = 0; i < 4000; i++)
		assert_int_equal(resource_device_slot(r, out[i]), 1);
	/* must-include on GPU 1 keeps the choice there even though GPU 0 fits */
	{
		unsigned must = r->gpus[1].first + 10;

		assert_int_equal(resource_preferred(r, &ctx, avail, n, &must, 1, 100, out), 100);
		assert_int_equal(out[0], must);
		for (unsigned i = 0; i < 100; i++)
			assert_int_equal(resource_device_slot(r, out[i]), 1);
	}
	/* too big for either: exactly size units, spanning */
	assert_int_equal(resource_preferred(r, &ctx, avail, n, NULL, 0, 7000, out), 7000);
	free(avail);
	free(out);
	resource_free(r);
}

/* Two time-slicing entries under one name: GPU 0 four ways, GPU 1 two ways (issue 7 item 5). */
static void test_replicas_per_gpu(void **state)
{
	static const unsigned gpus[] = { 0, 1 }, counts[] = { 4, 2 }, bad[] = { 4, 1 };
	struct resource_spec spec = { .name = "nvidia.com/gpu",
				      .kind = RESOURCE_REPLICA,
				      .gpus = gpus,
				      .n_gpus = 2,
				      .replicas = 4, /* ignored: gpu_replicas wins */
				      .gpu_replicas = counts };
	struct resource_pref_ctx ctx = { 0 };
	unsigned avail[6], out[6];
	struct resource *r = NULL;
	struct buf b = { 0 };
	char *err = NULL, id[128], want[128];
	V1beta1__ListAndWatchResponse *m;

	make_info(2, 8192);
	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	assert_int_equal(r->n_devices, 6);
	assert_int_equal(r->gpus[0].count, 4);
	assert_int_equal(r->gpus[1].count, 2);
	assert_int_equal(r->gpus[1].first, 4);
	assert_int_equal(r->replicas, 4);
	/* IDs: <uuid>::0..3 on GPU 0, <uuid>::0..1 on GPU 1, each mapping back to its GPU. */
	for (unsigned i = 0; i < 6; i++) {
		unsigned g = i < 4 ? 0 : 1, n = i < 4 ? i : i - 4;
		size_t len = resource_device_id(r, i, id);

		(void)snprintf(want, sizeof(want), "%s::%u", devs[g].uuid, n);
		assert_string_equal(id, want);
		assert_int_equal(resource_device_lookup(r, id, len), (int)i);
		assert_int_equal(resource_device_gpu(r, i), g);
	}
	/* GPU 1 has no replica 2 or 3, though GPU 0 does. */
	(void)snprintf(want, sizeof(want), "%s::2", devs[1].uuid);
	assert_int_equal(resource_device_lookup(r, want, strlen(want)), -ENOENT);
	(void)snprintf(want, sizeof(want), "%s::3", devs[0].uuid);
	assert_int_equal(resource_device_lookup(r, want, strlen(want)), 3);
	/* The list carries all six, and its size is exact. */
	assert_int_equal(resource_encode_list(r, NULL, all_healthy, NULL, &b), 0);
	assert_int_equal(b.len, resource_list_size(r, NULL));
	m = v1beta1__list_and_watch_response__unpack(NULL, b.len, b.data);
	assert_non_null(m);
	assert_int_equal(m->n_devices, 6);
	v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	buf_release(&b);

	/* Spread by the share of each GPU taken: one on each first, then GPU 0 (1/4 < 1/2). */
	for (unsigned i = 0; i < 6; i++)
		avail[i] = i;
	assert_int_equal(resource_preferred(r, &ctx, avail, 6, NULL, 0, 3, out), 3);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 4);
	assert_int_equal(out[2], 1);
	/* GPU 0 half taken (2 of 4), GPU 1 untouched: GPU 1 first, then a tie at one half goes
	 * to the GPU with fewer taken (GPU 1), then GPU 0. */
	assert_int_equal(
		resource_preferred(r, &ctx, (unsigned[]){ 2, 3, 4, 5 }, 4, NULL, 0, 3, out), 3);
	assert_int_equal(out[0], 4);
	assert_int_equal(out[1], 5);
	assert_int_equal(out[2], 2);
	resource_free(r);

	/* Every GPU's count is checked. */
	spec.gpu_replicas = bad;
	assert_int_equal(resource_new(&spec, &info, &r, &err), -EINVAL);
	assert_non_null(strstr(err, "got 1 for GPU 1"));
	free(err);
}

/*
 * A resource holds at most GPU_NODE_MAX GPUs (the size of Allocate's per-GPU arrays): the 64th
 * GPU is served like any other, whole or time-sliced; one more is refused, saying why.
 */
static void test_node_max_gpus(void **state)
{
	static struct gpu_device many[GPU_NODE_MAX + 1];
	const struct gpu_info mi = { .devices = many, .n_devices = GPU_NODE_MAX + 1 };
	unsigned idx[GPU_NODE_MAX + 1];
	struct resource_spec spec = { .name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = idx };
	struct resource *r = NULL;
	char *err = NULL, id[128];

	unit_gpus_fill(many, GPU_NODE_MAX + 1);
	for (unsigned i = 0; i <= GPU_NODE_MAX; i++)
		idx[i] = i;
	spec.n_gpus = GPU_NODE_MAX;
	assert_int_equal(resource_new(&spec, &mi, &r, &err), 0);
	assert_int_equal(r->n_gpus, GPU_NODE_MAX);
	(void)resource_device_id(r, GPU_NODE_MAX - 1, id);
	assert_string_equal(id, many[GPU_NODE_MAX - 1].uuid);
	assert_int_equal(resource_device_slot(r, GPU_NODE_MAX - 1), GPU_NODE_MAX - 1);
	r = resource_free(r);
	spec.kind = RESOURCE_REPLICA;
	spec.replicas = 2;
	assert_int_equal(resource_new(&spec, &mi, &r, &err), 0);
	assert_int_equal(r->n_devices, 2 * GPU_NODE_MAX);
	assert_int_equal(resource_device_slot(r, 2 * GPU_NODE_MAX - 1), GPU_NODE_MAX - 1);
	r = resource_free(r);

	/* One GPU more, whole or shared: refused, never built past the arrays sized for 64. */
	for (int k = 0; k < 2; k++) {
		spec.kind = k ? RESOURCE_REPLICA : RESOURCE_GPU;
		spec.n_gpus = GPU_NODE_MAX + 1;
		assert_int_equal(resource_new(&spec, &mi, &r, &err), -EINVAL);
		assert_null(r);
		assert_non_null(err);
		assert_string_equal(err,
				    "resource \"nvidia.com/gpu\" has 65 GPUs, more than the 64 "
				    "one node is built for");
		err = mfree(err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socket_names),
		cmocka_unit_test(test_gpu_ids_and_lookup),
		cmocka_unit_test(test_replica_ids),
		cmocka_unit_test(test_gpumem_ids_short_unique_stable),
		cmocka_unit_test(test_gpumem_reserve_too_big),
		cmocka_unit_test(test_list_encoding),
		cmocka_unit_test(test_gpumem_unit_doubling),
		cmocka_unit_test(test_preferred_gpu_numa_and_must),
		cmocka_unit_test(test_preferred_gpu_distance),
		cmocka_unit_test(test_preferred_replicas_spread),
		cmocka_unit_test(test_preferred_gpumem_best_fit),
		cmocka_unit_test(test_replicas_per_gpu),
		cmocka_unit_test(test_node_max_gpus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
