#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assign.h"
#include "config.h"
#include "gpu.h"
#include "gpus.h"
#include "log.h"
#include "oom.h"
#include "resource.h"
#include "unit.h"
#include "util.h"

#ifndef CONFIG_FIXTURES
#error "CONFIG_FIXTURES must name tests/fixtures/config"
#endif

#define MIB	 ((uint64_t)1024 * 1024)
#define FX(name) CONFIG_FIXTURES "/" name
#define MAX_RES	 8

static const char *const uuids[] = {
	"GPU-00000000-0000-0000-0000-000000000000",
	"GPU-00000000-0000-0000-0000-000000000001",
	"GPU-00000000-0000-0000-0000-000000000002",
	"GPU-00000000-0000-0000-0000-000000000003",
};

/* Four GPUs: an A100 (40 GiB), two T4s and an A2 (index 2), 16 GiB each. */
static void fake_gpus(struct gpu_device devs[4], struct gpu_info *info)
{
	static const char *const names[] = { "NVIDIA A100-SXM4-40GB", "Tesla T4", "NVIDIA A2",
					     "Tesla T4" };

	memset(devs, 0, 4 * sizeof(*devs));
	for (unsigned i = 0; i < 4; i++) {
		devs[i].index = i;
		(void)snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", uuids[i]);
		(void)snprintf(devs[i].name, sizeof(devs[i].name), "%s", names[i]);
		devs[i].mem_total = (i == 0 ? 40960 : 16384) * MIB;
		devs[i].numa_node = -1;
	}
	*info = (struct gpu_info){ .n_devices = 4, .devices = devs };
}

/* Exactly one error, and it reads @want. */
static void assert_one_error(const struct config_diag *d, const char *want)
{
	char *s;

	for (size_t i = 0; d->n_errors != 1 && i < d->n_errors; i++) {
		s = config_error_to_string(&d->errors[i]);
		print_message("error %zu: %s\n", i, s ? s : "?");
		free(s);
	}
	assert_int_equal(d->n_errors, 1);
	s = config_error_to_string(&d->errors[0]);
	assert_non_null(s);
	assert_string_equal(s, want);
	free(s);
}

/* Loads @yaml (file "t.yaml") into fresh defaults and validates it; no errors, no warnings. */
static void load_ok(struct config *c, const char *yaml)
{
	struct config_diag d = { 0 };

	assert_int_equal(config_init(c), 0);
	assert_int_equal(config_load_buffer(c, "t.yaml", yaml, strlen(yaml), &d), 0);
	assert_int_equal(config_validate(c, &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	config_diag_release(&d);
}

static void load_file_ok(struct config *c, const char *path)
{
	struct config_diag d = { 0 };

	assert_int_equal(config_init(c), 0);
	assert_int_equal(config_load_file(c, path, &d), 0);
	assert_int_equal(config_validate(c, &d), 0);
	assert_int_equal(d.n_errors, 0);
	config_diag_release(&d);
}

static void free_resources(struct resource **res, int n)
{
	for (int i = 0; i < n; i++)
		res[i] = resource_free(res[i]);
}

/* Resource @r covers exactly the GPUs @gpus[@n], with @counts[i] devices on each. */
static void assert_gpus(const struct resource *r, const unsigned *gpus, const unsigned *counts,
			unsigned n)
{
	unsigned total = 0;

	assert_int_equal(r->n_gpus, n);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(r->gpus[i].gpu, gpus[i]);
		assert_int_equal(r->gpus[i].count, counts[i]);
		assert_string_equal(r->uuids[i], uuids[gpus[i]]);
		total += counts[i];
	}
	assert_int_equal(r->n_devices, total);
}

static void test_pattern_match(void **state)
{
	assert_true(assign_pattern_match("*", ""));
	assert_true(assign_pattern_match("*", "NVIDIA A2"));
	assert_true(assign_pattern_match("NVIDIA A2", "NVIDIA A2"));
	assert_false(assign_pattern_match("NVIDIA A2", "NVIDIA A20"));
	assert_false(assign_pattern_match("A2", "NVIDIA A2")); /* anchored: no substring match */
	assert_true(assign_pattern_match("*A2", "NVIDIA A2"));
	assert_true(assign_pattern_match("*A100*", "NVIDIA A100-SXM4-40GB"));
	assert_false(assign_pattern_match("*A100*", "NVIDIA A10"));
	assert_true(assign_pattern_match("N*A*2", "NVIDIA A2"));
	assert_true(assign_pattern_match("**a**", "a"));
	assert_false(assign_pattern_match("a*b", "acbx"));
	assert_true(assign_pattern_match("a*b*c", "aXbYbZc"));
	assert_false(assign_pattern_match("nvidia a2", "NVIDIA A2"));
	assert_false(assign_pattern_match(".*", "NVIDIA A2")); /* not a regexp */
}

static void test_gpu_resource(void **state)
{
	struct config c;

	/* Patterns are anchored wildcards on the NVML name; the first match wins. */
	load_file_ok(&c, FX("full-nvidia.yaml"));
	assert_string_equal(assign_gpu_resource(&c, "NVIDIA A100-SXM4-40GB"), "nvidia.com/a100");
	assert_string_equal(assign_gpu_resource(&c, "NVIDIA A2"), "nvidia.com/gpu-a2");
	assert_string_equal(assign_gpu_resource(&c, "NVIDIA A2 Pro"), "nvidia.com/gpu");
	assert_string_equal(assign_gpu_resource(&c, "Tesla T4"), "nvidia.com/gpu");
	config_release(&c);
}

static void test_time_slicing(void **state)
{
	struct assign_gpu *as = NULL;
	struct config_diag d = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;

	/* GPU 0 by index and GPU 1 by UUID four ways, the A2 three ways, the last T4 two ways. */
	load_file_ok(&c, FX("timeslicing.yaml"));
	fake_gpus(devs, &info);
	assert_int_equal(assign_gpus(&c, &info, &as, &d), 0);
	assert_int_equal(d.n_errors, 0);
	assert_int_equal(as[0].use, ASSIGN_GPU_TIME_SLICED);
	assert_string_equal(as[0].resource, "nvidia.com/gpu.small");
	assert_int_equal(as[0].replicas, 4);
	assert_ptr_equal(as[0].ts, &c.time_slicing.resources[0]);
	assert_int_equal(as[1].use, ASSIGN_GPU_TIME_SLICED);
	assert_string_equal(as[1].resource, "nvidia.com/gpu.small");
	assert_int_equal(as[2].use, ASSIGN_GPU_TIME_SLICED);
	assert_string_equal(as[2].resource, "nvidia.com/gpu-a2");
	assert_int_equal(as[2].replicas, 3);
	assert_int_equal(as[3].use, ASSIGN_GPU_TIME_SLICED);
	assert_string_equal(as[3].resource, "nvidia.com/gpu");
	assert_int_equal(as[3].replicas, 2);
	free(as);
	config_release(&c);

	/* Only GPU 1 time-sliced: the others whole, under their pattern's resource. */
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("full-nvidia.yaml"), NULL), 0);
	c.time_slicing.resources[0].devices.kind = CONFIG_DEVICES_COUNT;
	c.time_slicing.resources[0].devices.count = 1;
	assert_int_equal(assign_gpus(&c, &info, &as, &d), 0);
	assert_int_equal(as[0].use, ASSIGN_GPU_WHOLE);
	assert_string_equal(as[0].resource, "nvidia.com/a100");
	assert_int_equal(as[1].use, ASSIGN_GPU_TIME_SLICED);
	assert_string_equal(as[1].resource, "nvidia.com/gpu.shared");
	assert_int_equal(as[2].use, ASSIGN_GPU_WHOLE);
	assert_string_equal(as[2].resource, "nvidia.com/gpu-a2");
	assert_int_equal(as[3].use, ASSIGN_GPU_WHOLE);
	assert_string_equal(as[3].resource, "nvidia.com/gpu");
	free(as);
	config_diag_release(&d);
	config_release(&c);
}

static void test_gpumem(void **state)
{
	struct assign_gpu *as = NULL;
	struct config_diag d = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;

	load_file_ok(&c, FX("gpumem.yaml"));
	fake_gpus(devs, &info);
	assert_int_equal(assign_gpus(&c, &info, &as, &d), 0);
	assert_int_equal(as[0].use, ASSIGN_GPU_WHOLE);
	assert_string_equal(as[0].resource, "nvidia.com/gpu");
	assert_int_equal(as[1].use, ASSIGN_GPU_MEMORY);
	assert_string_equal(as[1].resource, "nvidia.com/gpumem-edge");
	assert_null(as[1].ts);
	assert_int_equal(as[2].use, ASSIGN_GPU_MEMORY);
	assert_int_equal(as[3].use, ASSIGN_GPU_WHOLE);
	free(as);

	/* A reserve that leaves a GPU no unit can only be seen against the GPU. */
	devs[1].mem_total = 258 * MIB;
	assert_int_equal(assign_gpus(&c, &info, &as, &d), 0);
	free(as);
	devs[1].mem_total = 256 * MIB;
	as = (void *)&d; /* untouched on failure */
	assert_int_equal(assign_gpus(&c, &info, &as, &d), -EINVAL);
	assert_ptr_equal(as, &d);
	assert_one_error(
		&d, FX("gpumem.yaml") ":8:19: edgegpu.sharing.memory.reserveMiB: reserving "
				      "256 MiB of GPU 1 (Tesla T4, 256 MiB) leaves no 2 MiB unit");
	config_diag_release(&d);
	config_release(&c);

	/* Off unless devices are listed. */
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(assign_gpus(&c, &info, &as, NULL), 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(as[i].use, ASSIGN_GPU_WHOLE);
	free(as);
	config_release(&c);
}

static void expect_assign_error(const char *yaml, const char *want)
{
	struct assign_gpu *as = NULL;
	struct config_diag d = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;

	fake_gpus(devs, &info);
	load_ok(&c, yaml);
	assert_int_equal(assign_gpus(&c, &info, &as, &d), -EINVAL);
	assert_null(as);
	assert_one_error(&d, want);
	config_diag_release(&d);
	/* Without a diag the errors still fail the assignment. */
	assert_int_equal(assign_gpus(&c, &info, &as, NULL), -EINVAL);
	assert_null(as);
	config_release(&c);
}

static void test_assign_errors(void **state)
{
	expect_assign_error("edgegpu: {sharing: {memory: {devices: [7]}}}\n",
			    "t.yaml:1:40: edgegpu.sharing.memory.devices[0]: GPU 7 is not a GPU of "
			    "this node");
	expect_assign_error(
		"edgegpu: {sharing: {memory: {devices: [\"GPU-nope\"]}}}\n",
		"t.yaml:1:40: edgegpu.sharing.memory.devices[0]: GPU-nope is not a GPU of "
		"this node");
	/* Index 1 and GPU 1's UUID are the same GPU; only discovery can tell. */
	expect_assign_error(
		"edgegpu: {sharing: {memory: {devices: [1, "
		"\"GPU-00000000-0000-0000-0000-000000000001\"]}}}\n",
		"t.yaml:1:43: edgegpu.sharing.memory.devices[1]: GPU 1 is listed twice");
	expect_assign_error("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: "
			    "[0]}]}}\nedgegpu: {sharing: {memory: {devices: "
			    "[\"GPU-00000000-0000-0000-0000-000000000000\"]}}}\n",
			    "t.yaml:1:72: sharing.timeSlicing.resources[0].devices[0]: GPU 0 is "
			    "already in edgegpu.sharing.memory.devices");
	expect_assign_error(
		"resources: {gpus: [{pattern: \"NVIDIA A2\", name: a2}]}\nsharing: "
		"{timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [2]}]}}\n",
		"t.yaml:2:72: sharing.timeSlicing.resources[0].devices[0]: GPU 2 is a "
		"nvidia.com/a2 GPU, not \"nvidia.com/gpu\"");
	expect_assign_error(
		"sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: "
		"5}]}}\n",
		"t.yaml:1:71: sharing.timeSlicing.resources[0].devices: asks for 5 GPUs of "
		"\"nvidia.com/gpu\", the node has 4");
	expect_assign_error("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: "
			    "[1]}, {name: gpu, replicas: 3, devices: "
			    "[\"GPU-00000000-0000-0000-0000-000000000001\"]}]}}\n",
			    "t.yaml:1:112: sharing.timeSlicing.resources[1].devices[0]: "
			    "GPU-00000000-0000-0000-0000-000000000001 is already in "
			    "sharing.timeSlicing.resources[0]");
}

static void test_build_whole(void **state)
{
	static const unsigned a100[] = { 0 }, others[] = { 1, 2, 3 }, ones[] = { 1, 1, 1 };
	struct resource *res[MAX_RES] = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;
	int n;

	/* One resource per name, in the order the GPUs first name them. */
	load_ok(&c, "resources: {gpus: [{pattern: \"*A100*\", name: a100}]}\n");
	fake_gpus(devs, &info);
	n = assign_build_resources(&c, &info, res, MAX_RES);
	assert_int_equal(n, 2);
	assert_string_equal(res[0]->name, "nvidia.com/a100");
	assert_string_equal(res[0]->socket, "nvidia-a100.sock");
	assert_int_equal(res[0]->kind, RESOURCE_GPU);
	assert_gpus(res[0], a100, ones, 1);
	assert_string_equal(res[1]->name, "nvidia.com/gpu");
	assert_int_equal(res[1]->kind, RESOURCE_GPU);
	assert_gpus(res[1], others, ones, 3);
	free_resources(res, n);

	/* @max caps what is returned. */
	n = assign_build_resources(&c, &info, res, 1);
	assert_int_equal(n, 1);
	assert_string_equal(res[0]->name, "nvidia.com/a100");
	assert_null(res[1]);
	free_resources(res, n);
	config_release(&c);
}

static void test_build_time_sliced(void **state)
{
	static const unsigned small[] = { 0, 1 }, small_n[] = { 4, 4 }, a2[] = { 2 },
			      a2_n[] = { 3 }, t4[] = { 3 }, t4_n[] = { 2 }, mixed[] = { 0, 1 },
			      mixed_n[] = { 4, 2 }, rest[] = { 2, 3 }, rest_n[] = { 1, 1 };
	struct resource *res[MAX_RES] = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;
	int n;

	load_file_ok(&c, FX("timeslicing.yaml"));
	fake_gpus(devs, &info);
	n = assign_build_resources(&c, &info, res, MAX_RES);
	assert_int_equal(n, 3);
	assert_string_equal(res[0]->name, "nvidia.com/gpu.small");
	assert_int_equal(res[0]->kind, RESOURCE_REPLICA);
	assert_int_equal(res[0]->replicas, 4);
	assert_gpus(res[0], small, small_n, 2);
	assert_string_equal(res[1]->name, "nvidia.com/gpu-a2");
	assert_int_equal(res[1]->kind, RESOURCE_REPLICA);
	assert_gpus(res[1], a2, a2_n, 1);
	assert_string_equal(res[2]->name, "nvidia.com/gpu");
	assert_int_equal(res[2]->kind, RESOURCE_REPLICA);
	assert_gpus(res[2], t4, t4_n, 1);
	assert_false(res[0]->fail_requests_gt_one);
	free_resources(res, n);
	config_release(&c);

	/* Two entries of one name: each GPU keeps its own replica count. */
	load_ok(&c, "sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [\n"
		    "  {name: gpu, rename: shared, replicas: 4, devices: [0]},\n"
		    "  {name: gpu, rename: shared, replicas: 2, devices: [1]}]}}\n");
	n = assign_build_resources(&c, &info, res, MAX_RES);
	assert_int_equal(n, 2);
	assert_string_equal(res[0]->name, "nvidia.com/shared");
	assert_int_equal(res[0]->kind, RESOURCE_REPLICA);
	assert_int_equal(res[0]->replicas, 4);
	assert_true(res[0]->fail_requests_gt_one);
	assert_gpus(res[0], mixed, mixed_n, 2);
	assert_string_equal(res[1]->name, "nvidia.com/gpu");
	assert_int_equal(res[1]->kind, RESOURCE_GPU);
	assert_gpus(res[1], rest, rest_n, 2);
	free_resources(res, n);
	config_release(&c);
}

static void test_build_gpumem(void **state)
{
	/* (16384 MiB - 256 reserved) / 2 MiB units on each T4 and the A2. */
	static const unsigned whole[] = { 0, 3 }, whole_n[] = { 1, 1 }, mem[] = { 1, 2 },
			      mem_n[] = { 8064, 8064 };
	struct resource *res[MAX_RES] = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;
	int n;

	load_file_ok(&c, FX("gpumem.yaml"));
	fake_gpus(devs, &info);
	n = assign_build_resources(&c, &info, res, MAX_RES);
	assert_int_equal(n, 2);
	assert_string_equal(res[0]->name, "nvidia.com/gpu");
	assert_int_equal(res[0]->kind, RESOURCE_GPU);
	assert_gpus(res[0], whole, whole_n, 2);
	assert_string_equal(res[1]->name, "nvidia.com/gpumem-edge");
	assert_int_equal(res[1]->kind, RESOURCE_GPUMEM);
	assert_int_equal(res[1]->unit_mib, 2);
	assert_int_equal(res[1]->unit_mib_asked, 2);
	assert_int_equal(res[1]->reserve_mib, 256);
	assert_gpus(res[1], mem, mem_n, 2);
	free_resources(res, n);
	config_release(&c);
}

static void test_build_errors(void **state)
{
	struct resource *res[MAX_RES] = { 0 };
	struct gpu_device devs[4];
	struct gpu_info info;
	struct config c;

	fake_gpus(devs, &info);
	/* GPU 0 time-sliced as nvidia.com/gpu while the others stay whole under that name. */
	load_ok(&c,
		"sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [0]}]}}\n");
	assert_int_equal(assign_build_resources(&c, &info, res, MAX_RES), -EINVAL);
	for (unsigned i = 0; i < MAX_RES; i++)
		assert_null(res[i]);
	config_release(&c);

	/* A config that does not fit the GPUs builds nothing. */
	load_ok(&c, "edgegpu: {sharing: {memory: {devices: [7]}}}\n");
	assert_int_equal(assign_build_resources(&c, &info, res, MAX_RES), -EINVAL);
	for (unsigned i = 0; i < MAX_RES; i++)
		assert_null(res[i]);
	config_release(&c);

	/* No GPUs: no resources. */
	assert_int_equal(config_init(&c), 0);
	info.n_devices = 0;
	assert_int_equal(assign_build_resources(&c, &info, res, MAX_RES), 0);
	assert_null(res[0]);
	config_release(&c);
}

/* Every allocation of an assignment and a build failed once in turn: no leak, nothing built. */
/*
 * A node with more GPUs than it is built for (GPU_NODE_MAX): the first 64 are advertised, as
 * one resource built like any other, and the log says so once with the count and the limit.
 */
static void test_build_past_node_max(void **state)
{
	enum {
		N = GPU_NODE_MAX + 6
	};
	static struct gpu_device many[N];
	const struct gpu_info mi = { .devices = many, .n_devices = N };
	struct resource *res[RESOURCE_NODE_MAX] = { 0 };
	FILE *log = tmpfile();
	char text[4096];
	struct config c;
	size_t len;
	int saved, n;

	unit_gpus_fill(many, N);
	for (unsigned i = 0; i < N; i++)
		(void)snprintf(many[i].name, sizeof(many[i].name), "Tesla T4");
	load_ok(&c, "version: v1\n");
	assert_non_null(log);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0 && dup2(fileno(log), STDERR_FILENO) >= 0);
	log_max_level = LOG_LEVEL_INFO;
	n = assign_build_resources(&c, &mi, res, ELEMENTSOF(res));
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	assert_int_equal(n, 1);
	assert_string_equal(res[0]->name, CONFIG_DEFAULT_RESOURCE);
	assert_int_equal(res[0]->n_gpus, GPU_NODE_MAX);
	assert_int_equal(res[0]->n_devices, GPU_NODE_MAX);
	assert_int_equal(res[0]->gpus[GPU_NODE_MAX - 1].gpu, GPU_NODE_MAX - 1);
	assert_string_equal(res[0]->uuids[GPU_NODE_MAX - 1], many[GPU_NODE_MAX - 1].uuid);
	free_resources(res, n);
	config_release(&c);

	rewind(log);
	len = fread(text, 1, sizeof(text) - 1, log);
	text[len] = 0;
	(void)fclose(log);
	assert_non_null(strstr(text, "level=warn module=assign msg=\"more GPUs than one node is "
				     "built for, advertising the first ones\" gpus=70 limit=64"));
	assert_null(strstr(strstr(text, "gpus=70") + 1, "gpus=70"));
}

static void test_oom(void **state)
{
	static const char *const files[] = { FX("timeslicing.yaml"), FX("gpumem.yaml"),
					     FX("full-nvidia.yaml") };

	for (size_t f = 0; f < ELEMENTSOF(files); f++) {
		struct gpu_device devs[4];
		struct gpu_info info;
		struct config c;
		long n;

		load_file_ok(&c, files[f]);
		fake_gpus(devs, &info);
		for (n = 0;; n++) {
			struct resource *res[MAX_RES] = { 0 };
			struct assign_gpu *as = NULL;
			int r, b;

			oom_fail_at(n);
			r = assign_gpus(&c, &info, &as, NULL);
			b = assign_build_resources(&c, &info, res, MAX_RES);
			oom_off();
			free(as);
			if (b == -ENOMEM) {
				for (unsigned i = 0; i < MAX_RES; i++)
					assert_null(res[i]);
			} else {
				assert_true(b > 0);
				free_resources(res, b);
			}
			if (r != -ENOMEM && b != -ENOMEM)
				break;
		}
		assert_true(n > 2);
		config_release(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pattern_match),	    cmocka_unit_test(test_gpu_resource),
		cmocka_unit_test(test_time_slicing),	    cmocka_unit_test(test_gpumem),
		cmocka_unit_test(test_assign_errors),	    cmocka_unit_test(test_build_whole),
		cmocka_unit_test(test_build_time_sliced),   cmocka_unit_test(test_build_gpumem),
		cmocka_unit_test(test_build_errors),	    cmocka_unit_test(test_oom),
		cmocka_unit_test(test_build_past_node_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
