/*
 * daemon: the reload's matching of running plugins to the resources a new config wants (kept,
 * replaced, added, removed), which resources survive a reload whose config cannot apply, and
 * what GPU discovery left the node with (readiness).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-internal.h"
#include "gpu.h"
#include "resource.h"
#include "unit.h"

#define UUID0 "GPU-00000000-1111-2222-3333-444444444440"
#define UUID1 "GPU-00000001-1111-2222-3333-444444444441"

static void test_match_kept_added_removed(void **state)
{
	const char *running[] = { "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/gpumem" };
	const char *wanted[] = { "nvidia.com/gpu.shared", "example.com/new", "nvidia.com/gpu" };
	int take[3];
	bool add[3];

	assert_int_equal(daemon_reload_match(running, 3, wanted, 3, take, add), 1);
	/* Kept: the same name takes its new resource (the device list goes out on its stream). */
	assert_int_equal(take[0], 2);
	assert_int_equal(take[1], 0);
	/* Removed: no longer wanted. */
	assert_int_equal(take[2], -1);
	/* Added: nobody serves it yet. */
	assert_false(add[0]);
	assert_true(add[1]);
	assert_false(add[2]);
}

/* A plugin still draining (stopping, e.g. after the device-plugin path moved) is replaced. */
static void test_match_replaces_stopping(void **state)
{
	const char *running[] = { NULL, "nvidia.com/gpu", NULL };
	const char *wanted[] = { "nvidia.com/gpu.shared", "nvidia.com/gpu" };
	int take[3];
	bool add[2];

	assert_int_equal(daemon_reload_match(running, 3, wanted, 2, take, add), 1);
	assert_int_equal(take[0], -1);
	assert_int_equal(take[1], 1);
	assert_int_equal(take[2], -1);
	assert_true(add[0]);
	assert_false(add[1]);
}

static void test_match_edges(void **state)
{
	const char *two[] = { "a/x", "a/y" };
	int take[2] = { 7, 7 };
	bool add[2] = { false, false };

	/* Nothing wanted: every plugin closes. */
	assert_int_equal(daemon_reload_match(two, 2, NULL, 0, take, add), 0);
	assert_int_equal(take[0], -1);
	assert_int_equal(take[1], -1);
	/* Nothing running (the first discovery): everything is added. */
	assert_int_equal(daemon_reload_match(NULL, 0, two, 2, take, add), 2);
	assert_true(add[0] && add[1]);
	/* A name is matched exactly, not by prefix; one resource goes to one plugin. */
	{
		const char *running[] = { "a/x", "a/x", "a/xy" };
		const char *wanted[] = { "a/x", "a/xyz" };
		int t[3];
		bool ad[2];

		assert_int_equal(daemon_reload_match(running, 3, wanted, 2, t, ad), 1);
		assert_int_equal(t[0], 0);
		assert_int_equal(t[1], -1);
		assert_int_equal(t[2], -1);
		assert_false(ad[0]);
		assert_true(ad[1]);
	}
}

/* After a reload that cannot apply, a resource stays only while its GPUs are where they were. */
static void test_resource_matches(void **state)
{
	static const unsigned both[] = { 0, 1 }, second[] = { 1 };
	struct gpu_device devs[2] = { 0 };
	struct gpu_info info = { .devices = devs, .n_devices = 2 };
	struct resource_spec spec = {
		.name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = both, .n_gpus = 2
	};
	struct resource *r = NULL, *r1 = NULL;
	char *err = NULL;

	for (unsigned i = 0; i < 2; i++) {
		devs[i].index = i;
		(void)snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", i ? UUID1 : UUID0);
		devs[i].mem_total = (uint64_t)16 << 30;
		devs[i].numa_node = -1;
		devs[i].minor = i;
	}
	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	spec.gpus = second;
	spec.n_gpus = 1;
	assert_int_equal(resource_new(&spec, &info, &r1, &err), 0);
	assert_true(daemon_resource_matches(r, &info));
	/* The GPUs swapped places: the indices now name other GPUs. */
	(void)snprintf(devs[0].uuid, sizeof(devs[0].uuid), "%s", UUID1);
	(void)snprintf(devs[1].uuid, sizeof(devs[1].uuid), "%s", UUID0);
	assert_false(daemon_resource_matches(r, &info));
	/* GPU 1 is gone: a resource on it cannot stay; one on GPU 0 alone could. */
	(void)snprintf(devs[0].uuid, sizeof(devs[0].uuid), "%s", UUID0);
	info.n_devices = 1;
	assert_false(daemon_resource_matches(r1, &info));
	assert_false(daemon_resource_matches(r, &info));
	info.n_devices = 2;
	(void)snprintf(devs[1].uuid, sizeof(devs[1].uuid), "%s", UUID1);
	assert_true(daemon_resource_matches(r1, &info));
	resource_free(r);
	resource_free(r1);
	free(err);
}

/*
 * What GPU discovery left the node with (readiness, edgegpu_gpu_discovery_state): GPUs found
 * win over everything; a hung call, then a first discovery still running; then the reason
 * nothing is served, from the error of the backend's open (nvml-load.c) or an empty answer.
 */
static void test_gpu_state(void **state)
{
	static const struct {
		bool discovered;
		int r;
		unsigned n, skipped;
		bool hung;
		enum daemon_gpu_state want;
		const char *name;
	} cases[] = {
		{ false, 0, 0, 0, false, DAEMON_GPU_PENDING, "pending" },
		{ false, 0, 0, 0, true, DAEMON_GPU_DRIVER_HUNG, "driver-hung" },
		{ true, -ENOENT, 0, 0, true, DAEMON_GPU_DRIVER_HUNG, "driver-hung" },
		{ true, 0, 2, 0, false, DAEMON_GPU_SERVED, "gpus" },
		/* A reload's failed rediscovery keeps the GPUs: still served. */
		{ true, -ENXIO, 2, 0, false, DAEMON_GPU_SERVED, "gpus" },
		/* A hung telemetry call on a node with GPUs: they are served (Unhealthy). */
		{ true, 0, 1, 0, true, DAEMON_GPU_SERVED, "gpus" },
		{ true, 0, 0, 0, false, DAEMON_GPU_NONE, "no-gpu" },
		{ true, 0, 0, 2, false, DAEMON_GPU_ALL_SKIPPED, "gpus-skipped" },
		{ true, -ENOENT, 0, 0, false, DAEMON_GPU_NO_LIBRARY, "no-library" },
		{ true, -ENOSYS, 0, 0, false, DAEMON_GPU_LIBRARY_UNUSABLE, "library-unusable" },
		{ true, -ENXIO, 0, 0, false, DAEMON_GPU_DRIVER_NOT_LOADED, "driver-not-loaded" },
		{ true, -EXDEV, 0, 0, false, DAEMON_GPU_DRIVER_MISMATCH, "driver-mismatch" },
		{ true, -EACCES, 0, 0, false, DAEMON_GPU_NO_PERMISSION, "no-permission" },
		{ true, -EIO, 0, 0, false, DAEMON_GPU_FAILED, "failed" },
		{ true, -ENOMEM, 0, 0, false, DAEMON_GPU_FAILED, "failed" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		enum daemon_gpu_state got = daemon_gpu_state(cases[i].discovered, cases[i].r,
							     cases[i].n, cases[i].skipped,
							     cases[i].hung);

		if (got != cases[i].want)
			fail_msg("case %zu: state %d, want %d", i, got, cases[i].want);
		assert_string_equal(daemon_gpu_state_names[got], cases[i].name);
	}
	/* Every state has its own label value. */
	for (int a = 0; a < DAEMON_GPU_STATE_COUNT; a++)
		for (int b = a + 1; b < DAEMON_GPU_STATE_COUNT; b++)
			assert_false(streq(daemon_gpu_state_names[a], daemon_gpu_state_names[b]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_kept_added_removed),
		cmocka_unit_test(test_match_replaces_stopping),
		cmocka_unit_test(test_match_edges),
		cmocka_unit_test(test_resource_matches),
		cmocka_unit_test(test_gpu_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
