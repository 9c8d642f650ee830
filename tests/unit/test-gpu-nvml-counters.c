/*
 * DCGM-exporter's other default counters from the NVML backend (src/gpu/nvml/nvml-fields.c and
 * the memory reading in nvml-sample.c), against the fake libnvidia-ml.so.1 and its
 * fixtures/counters.conf: a GPU with every feature, one without the optional ones, the
 * features turned off one by one, an old driver without the functions, and a lost GPU.
 */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fake-client.h"
#include "gpu.h"
#include "unit-nvml.h"
#include "unit.h"

#ifndef FAKE_NVML_LIB
#error "FAKE_NVML_LIB (the built fake libnvidia-ml.so.1) must be defined"
#endif

#define MIB (1ULL << 20)

static void sample(struct env *e, unsigned gpu, struct gpu_sample *s)
{
	assert_int_equal(e->b->ops->sample(e->b, gpu, s), 0);
}

/* Every counter absent: what a GPU (or a driver) without any of them gives. */
static void assert_no_counters(const struct gpu_sample *s)
{
	assert_true(isnan(s->mem_temp_c));
	assert_int_equal(s->pcie_replay, UINT64_MAX);
	assert_true(isnan(s->enc_util));
	assert_true(isnan(s->dec_util));
	assert_int_equal(s->remap_corr, UINT64_MAX);
	assert_int_equal(s->remap_unc, UINT64_MAX);
	assert_true(isnan(s->remap_failure));
	assert_int_equal(s->nvlink_bw_total, UINT64_MAX);
}

/* The GPU with every feature, and the one without the optional ones. */
static void test_counters_with_and_without(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	assert_int_equal(e->info.n_devices, 2);

	sample(e, 0, &s);
	assert_true(fabs(s.mem_temp_c - 47) < 1e-9);
	assert_int_equal(s.pcie_replay, 3);
	assert_true(fabs(s.enc_util - 12) < 1e-9);
	assert_true(fabs(s.dec_util - 34) < 1e-9);
	assert_int_equal(s.remap_corr, 2);
	assert_int_equal(s.remap_unc, 1);
	assert_true(fabs(s.remap_failure - 1) < 1e-9);
	/* 18 links, each 1000 KiB sent and 2000 KiB received */
	assert_int_equal(s.nvlink_bw_total, 18 * 3000);
	/* MemoryInfo_v2: reserved apart from used, free NVML's own (not total - used) */
	assert_int_equal(s.mem_total, 81559 * MIB);
	assert_int_equal(s.mem_used, 1024 * MIB);
	assert_int_equal(s.mem_reserved, 512 * MIB);
	assert_int_equal(s.mem_free, (81559 - 1024 - 512) * MIB);
	assert_int_not_equal(s.mem_free, s.mem_total - s.mem_used);

	/* The second GPU: one field-values call (no NVLink: no second), nothing optional. */
	assert_int_equal(fake_nvml_count("nvmlDeviceGetFieldValues"), 2);
	sample(e, 1, &s);
	assert_int_equal(fake_nvml_count("nvmlDeviceGetFieldValues"), 3);
	assert_true(isnan(s.mem_temp_c));
	assert_int_equal(s.nvlink_bw_total, UINT64_MAX);
	assert_int_equal(s.remap_corr, UINT64_MAX);
	assert_int_equal(s.remap_unc, UINT64_MAX);
	assert_true(isnan(s.remap_failure));
	/* What every discrete GPU has, at the fake's defaults */
	assert_int_equal(s.pcie_replay, 0);
	assert_true(fabs(s.enc_util) < 1e-9);
	assert_true(fabs(s.dec_util) < 1e-9);
	assert_int_equal(s.mem_reserved, 0);
	assert_int_equal(s.mem_free, s.mem_total - s.mem_used);

	/* A change through the control socket shows in the next sample. */
	ctl("set 1 nvlink 2:5:7");
	ctl("set 1 memory_temperature 51");
	sample(e, 1, &s);
	assert_int_equal(s.nvlink_bw_total, 24);
	assert_true(fabs(s.mem_temp_c - 51) < 1e-9);
}

/*
 * The memory temperature in each of nvmlValueType_t's types (NVML 12 added SIGNED_INT and
 * UNSIGNED_SHORT): read alike, never left out for its type.
 */
static void test_counters_value_types(void **state)
{
	static const char *const types[] = { "double", "uint", "ulong", "ull",
					     "sll",    "int",  "ushort" };
	struct env *e = *state;
	struct gpu_sample s;
	char cmd[128];

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	for (size_t i = 0; i < ELEMENTSOF(types); i++) {
		(void)snprintf(cmd, sizeof(cmd), "set 0 memory_temperature_type %s", types[i]);
		ctl(cmd);
		sample(e, 0, &s);
		if (!(fabs(s.mem_temp_c - 47) < 1e-9))
			fail_msg("memory temperature as %s: %g, want 47", types[i], s.mem_temp_c);
	}
}

/* Each function answering NOT_SUPPORTED leaves its counters out, and only those. */
static void test_counters_not_supported(void **state)
{
	static const char *const fns[] = {
		"nvmlDeviceGetFieldValues",	   "nvmlDeviceGetPcieReplayCounter",
		"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
		"nvmlDeviceGetRemappedRows",	   "nvmlDeviceGetMemoryInfo_v2",
	};
	struct env *e = *state;
	struct gpu_sample s;
	char cmd[128];

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	for (size_t i = 0; i < ELEMENTSOF(fns); i++) {
		(void)snprintf(cmd, sizeof(cmd), "set 0 not_supported %s", fns[i]);
		ctl(cmd);
		sample(e, 0, &s);
		assert_int_equal(isnan(s.mem_temp_c), i == 0);
		assert_int_equal(s.nvlink_bw_total == UINT64_MAX, i == 0);
		assert_int_equal(s.pcie_replay == UINT64_MAX, i == 1);
		assert_int_equal(isnan(s.enc_util), i == 2);
		assert_int_equal(isnan(s.dec_util), i == 3);
		assert_int_equal(s.remap_corr == UINT64_MAX, i == 4);
		assert_int_equal(isnan(s.remap_failure), i == 4);
		assert_int_equal(s.mem_reserved == UINT64_MAX, i == 5);
	}
	/* Without v2, v1 as nvml.h defines it: used counts the reserved memory, free is the
	   rest (total = free + used). */
	assert_int_equal(s.mem_used, (1024 + 512) * MIB);
	assert_int_equal(s.mem_free, (81559 - 1024 - 512) * MIB);
	assert_int_equal(s.mem_used + s.mem_free, s.mem_total);
	assert_true(fake_nvml_count("nvmlDeviceGetMemoryInfo") >= 1);
}

/*
 * A GPU in MIG mode: NVML answers NOT_SUPPORTED for the encoder, the decoder and the remapped
 * rows of the whole GPU, so they are left out, not 0; the rest stays.
 */
static void test_counters_mig(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	ctl("set 0 mig on");
	sample(e, 0, &s);
	assert_true(isnan(s.enc_util));
	assert_true(isnan(s.dec_util));
	assert_int_equal(s.remap_corr, UINT64_MAX);
	assert_int_equal(s.remap_unc, UINT64_MAX);
	assert_true(isnan(s.remap_failure));
	assert_true(fabs(s.mem_temp_c - 47) < 1e-9);
	assert_int_equal(s.pcie_replay, 3);
	ctl("set 0 mig off");
	sample(e, 0, &s);
	assert_true(fabs(s.enc_util - 12) < 1e-9);
	assert_int_equal(s.remap_corr, 2);
}

/*
 * The NVLink total is a counter: a link that stops answering (its fields' own error) must not
 * make it fall, which Prometheus would read as a reset and rate() as the whole total sent again.
 * The link counts with its last answer; a link that never answered adds nothing until it does.
 */
static void test_counters_nvlink_link_error(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	sample(e, 0, &s);
	assert_int_equal(s.nvlink_bw_total, 18 * 3000);
	ctl("set 0 nvlink_link_error 5:UNKNOWN");
	ctl("set 0 nvlink 18:1010:2010");
	sample(e, 0, &s);
	/* 17 links at 3020 now, link 5 at its last 3000 (without it: 51340, a fall) */
	assert_int_equal(s.nvlink_bw_total, 17 * 3020 + 3000);
	ctl("set 0 nvlink_link_error none");
	sample(e, 0, &s);
	assert_int_equal(s.nvlink_bw_total, 18 * 3020);

	/*
	 * A re-init (the driver reloaded: its counters start again) forgets the last answers: a
	 * silent link adds nothing from before, so the total does not fall once it answers.
	 */
	ctl("set 0 nvlink_link_error 5:UNKNOWN");
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	ctl("set 0 nvlink 18:10:20");
	sample(e, 0, &s);
	assert_int_equal(s.nvlink_bw_total, 17 * 30);
	ctl("set 0 nvlink_link_error none");
	sample(e, 0, &s);
	assert_int_equal(s.nvlink_bw_total, 18 * 30);

	/* GPU 1 gains NVLink with link 0 silent from the start: left out of the sum, then in. */
	ctl("set 1 nvlink_link_error 0:UNKNOWN");
	ctl("set 1 nvlink 2:5:7");
	sample(e, 1, &s);
	assert_int_equal(s.nvlink_bw_total, 12);
	ctl("set 1 nvlink_link_error 1:UNKNOWN");
	sample(e, 1, &s);
	assert_int_equal(s.nvlink_bw_total, 24);
}

/* A driver without the functions (dlsym finds none): every counter absent, the sample good. */
static void test_counters_old_driver(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_OLD_LIB, "counters.conf");
	sample(e, 0, &s);
	assert_no_counters(&s);
	assert_int_equal(s.mem_reserved, UINT64_MAX);
	assert_int_equal(s.mem_used, (1024 + 512) * MIB);
	assert_int_equal(s.mem_free, (81559 - 1024 - 512) * MIB);
	assert_int_equal(fake_nvml_count("nvmlDeviceGetFieldValues"), 0);
}

/*
 * A GPU lost in one of the new calls is an error of the sample (as in the old ones), not a
 * missing counter; a lesser failure (NO_PERMISSION) is only the counter left out.
 */
static void test_counters_failures(void **state)
{
	static const char *const fns[] = {
		"nvmlDeviceGetFieldValues",	   "nvmlDeviceGetPcieReplayCounter",
		"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
		"nvmlDeviceGetRemappedRows",
	};
	struct env *e = *state;
	struct gpu_sample s;
	char cmd[128];

	open_discover(e, FAKE_NVML_LIB, "counters.conf");
	for (size_t i = 0; i < ELEMENTSOF(fns); i++) {
		(void)snprintf(cmd, sizeof(cmd), "fail %s GPU_IS_LOST 1", fns[i]);
		ctl(cmd);
		assert_int_equal(e->b->ops->sample(e->b, 0, &s), -ENODEV);
		(void)snprintf(cmd, sizeof(cmd), "fail %s NO_PERMISSION 1", fns[i]);
		ctl(cmd);
		sample(e, 0, &s);
		assert_true(isnan(s.mem_temp_c) || i != 0);
		assert_true(s.pcie_replay == UINT64_MAX || i != 1);
	}
	/* A driver refusing nvmlMemory_v2's version: v1 answers, no FB_RESERVED. */
	ctl("fail nvmlDeviceGetMemoryInfo_v2 ARGUMENT_VERSION_MISMATCH");
	sample(e, 0, &s);
	assert_int_equal(s.mem_reserved, UINT64_MAX);
	assert_int_equal(s.mem_used, (1024 + 512) * MIB);
	assert_int_equal(s.mem_free, (81559 - 1024 - 512) * MIB);
	ctl("fail nvmlDeviceGetMemoryInfo_v2 off");
	/* The second NVLink call (the links' counters) failing leaves only the bandwidth out. */
	ctl("fail nvmlDeviceGetFieldValues NO_PERMISSION 2");
	sample(e, 0, &s);
	assert_true(fabs(s.mem_temp_c - 47) < 1e-9);
	assert_int_equal(s.nvlink_bw_total, UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counters_with_and_without, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_value_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_not_supported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_mig, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_nvlink_link_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_old_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_failures, setup, teardown),
	};

	return cmocka_run_group_tests_name("gpu-nvml-counters", tests, NULL, NULL);
}
