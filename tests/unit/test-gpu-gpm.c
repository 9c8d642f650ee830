/*
 * The NVML backend's profiling ratios and PCIe rates (src/gpu/nvml/nvml-gpm.c) against the fake
 * libnvidia-ml.so.1 (tests/fakes/nvml, fake-gpm.c), loaded through the real dlopen path, on
 * fixtures/gpm.conf: GPU 0 has GPM (Hopper), GPU 1 has not (Ada: PCIe throughput only).
 */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake-client.h"
#include "gpu-open.h"
#include "unit-fs.h"
#include "unit-nvml.h"
#include "unit.h"
#include "util.h"

#define MIB 1048576.0

/* cmocka before 1.1.6 has no assert_double_equal. */
#define assert_near(a, b, eps)                                          \
	do {                                                            \
		double a_ = (a), b_ = (b);                              \
		if (!(fabs(a_ - b_) <= (eps)))                          \
			fail_msg("%s = %.17g, want %.17g", #a, a_, b_); \
	} while (0)

/* open_discover() on fixtures/gpm.conf: its two GPUs found. */
static void open_gpm(struct env *e, const char *lib)
{
	open_discover(e, lib, "gpm.conf");
	assert_int_equal(e->info.n_devices, 2);
}

static unsigned ctl_number(const char *cmd)
{
	char reply[64];

	assert_int_equal(fake_nvml_ctl(NULL, cmd, reply, sizeof(reply)), 0);
	return (unsigned)strtoul(reply, NULL, 10);
}

static void sample(struct env *e, unsigned gpu, struct gpu_sample *s)
{
	assert_int_equal(e->b->ops->sample(e->b, gpu, s), 0);
}

static void assert_absent(const struct gpu_sample *s)
{
	assert_true(isnan(s->prof_gr_active));
	assert_true(isnan(s->prof_tensor_active));
	assert_true(isnan(s->prof_dram_active));
	assert_true(isnan(s->pcie_tx_bps));
	assert_true(isnan(s->pcie_rx_bps));
}

/*
 * A GPM GPU: nothing on the first sample (GPM needs two), then the fixture's percentages as
 * 0-1 ratios and its MiB/s as bytes per second, each interval against the sample before; one
 * GPM sample is kept per GPU, none leaks. A GPU without GPM: the ratios stay absent and the
 * PCIe rates come from nvmlDeviceGetPcieThroughput (KB/s).
 */
static void test_ratios(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_LIB);
	sample(e, 0, &s);
	assert_absent(&s);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	sample(e, 0, &s);
	assert_near(s.prof_gr_active, 0.625, 1e-12);
	assert_near(s.prof_tensor_active, 0.40, 1e-12);
	assert_near(s.prof_dram_active, 0.25, 1e-12);
	assert_near(s.pcie_tx_bps, 1024 * MIB, 1e-3);
	assert_near(s.pcie_rx_bps, 512 * MIB, 1e-3);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	/* GPM answers for GPU 0: its PCIe throughput is never asked. */
	assert_int_equal(ctl_number("count nvmlDeviceGetPcieThroughput"), 0);

	assert_int_equal(fake_nvml_ctlf("set 0 gpm_graphics 10"), 0);
	sample(e, 0, &s);
	assert_near(s.prof_gr_active, 0.10, 1e-12);

	sample(e, 1, &s);
	assert_true(isnan(s.prof_gr_active) && isnan(s.prof_tensor_active) &&
		    isnan(s.prof_dram_active));
	assert_near(s.pcie_tx_bps, 2000 * 1024.0, 1e-6);
	assert_near(s.pcie_rx_bps, 1000 * 1024.0, 1e-6);
	assert_int_equal(ctl_number("count nvmlGpmSampleGet"), 3);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	/* Support is asked once per GPU per discovery, not every sample. */
	sample(e, 1, &s);
	assert_int_equal(ctl_number("count nvmlGpmQueryDeviceSupport"), 2);
}

/* The kept sample is freed by a new discovery and by a re-init; the first sample after is empty. */
static void test_release(void **state)
{
	struct env *e = *state;
	struct gpu_info info = { 0 };
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_LIB);
	sample(e, 0, &s);
	sample(e, 0, &s);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	assert_int_equal(e->b->ops->discover(e->b, &info, &e->err), 0);
	gpu_info_release(&info);
	assert_int_equal(ctl_number("gpm_samples"), 0);
	sample(e, 0, &s);
	assert_absent(&s);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(ctl_number("gpm_samples"), 0);
	sample(e, 0, &s);
	assert_absent(&s);
	sample(e, 0, &s);
	assert_near(s.prof_gr_active, 0.625, 1e-12);
}

/*
 * Where the GPU cannot answer: PCIe throughput NOT_SUPPORTED leaves the rates absent (the
 * sample succeeds); a lost GPU fails the sample (-ENODEV), and when it is back the ratios
 * start again.
 */
static void test_not_supported_and_lost(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_LIB);
	assert_int_equal(fake_nvml_ctlf("set 1 not_supported nvmlDeviceGetPcieThroughput"), 0);
	sample(e, 1, &s);
	assert_absent(&s);

	sample(e, 0, &s);
	assert_int_equal(fake_nvml_ctlf("lost 0"), 0);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), -ENODEV);
	assert_int_equal(fake_nvml_ctlf("back 0"), 0);
	sample(e, 0, &s);
	assert_near(s.prof_dram_active, 0.25, 1e-12);
}

/*
 * A driver that refuses our struct versions (ARGUMENT_VERSION_MISMATCH, as a later NVML may
 * for version 1): from the support query, GPM is not used and the PCIe rates come from
 * nvmlDeviceGetPcieThroughput; from nvmlGpmMetricsGet, the ratios are left out. The sample
 * stands either way, and no GPM sample leaks.
 */
static void test_version_mismatch(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_LIB);
	assert_int_equal(fake_nvml_ctlf("fail nvmlGpmMetricsGet ARGUMENT_VERSION_MISMATCH"), 0);
	sample(e, 0, &s);
	sample(e, 0, &s);
	assert_absent(&s);
	assert_int_equal(ctl_number("gpm_samples"), 1);
	assert_int_equal(fake_nvml_ctlf("fail nvmlGpmMetricsGet off"), 0);
	sample(e, 0, &s);
	assert_near(s.prof_gr_active, 0.625, 1e-12);

	assert_int_equal(fake_nvml_ctlf("fail nvmlGpmQueryDeviceSupport ARGUMENT_VERSION_MISMATCH"),
			 0);
	sample(e, 1, &s);
	assert_true(isnan(s.prof_gr_active));
	assert_near(s.pcie_tx_bps, 2000 * 1024.0, 1e-6);
	assert_near(s.pcie_rx_bps, 1000 * 1024.0, 1e-6);
	assert_int_equal(ctl_number("gpm_samples"), 1);
}

/* A driver without GPM or PCIe throughput (before R520): every one absent, the sample fine. */
static void test_old_driver(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_OLD_LIB);
	for (unsigned gpu = 0; gpu < 2; gpu++) {
		sample(e, gpu, &s);
		sample(e, gpu, &s);
		assert_absent(&s);
	}
}

struct hung_sample {
	struct gpu_backend *b;
	unsigned gpu;
	int r;
	struct gpu_sample s;
};

static void *run_sample(void *arg)
{
	struct hung_sample *op = arg;

	op->r = op->b->ops->sample(op->b, op->gpu, &op->s);
	return NULL;
}

/* A call hung in the library is named by its own name (struct gpu_backend.call). */
static void test_hung_call_named(void **state)
{
	static const struct {
		const char *fn;
		unsigned gpu;
	} calls[] = {
		{ "nvmlGpmSampleAlloc", 0 },	      { "nvmlGpmSampleGet", 0 },
		{ "nvmlGpmMetricsGet", 0 },	      { "nvmlGpmSampleFree", 0 },
		{ "nvmlGpmQueryDeviceSupport", 1 }, /* asked once: GPU 1's first sample */
		{ "nvmlDeviceGetPcieThroughput", 1 },
	};
	struct env *e = *state;
	struct gpu_sample s;

	open_gpm(e, FAKE_NVML_LIB);
	sample(e, 0, &s); /* a kept sample: the next computes and frees */
	for (size_t k = 0; k < ELEMENTSOF(calls); k++) {
		struct hung_sample op = { .b = e->b, .gpu = calls[k].gpu };
		char cmd[128];
		const char *call;
		pthread_t t;

		assert_int_equal(fake_nvml_ctlf("block %s", calls[k].fn), 0);
		assert_int_equal(pthread_create(&t, NULL, run_sample, &op), 0);
		(void)snprintf(cmd, sizeof(cmd), "blocked %s", calls[k].fn);
		for (int i = 0; i < 1000 && ctl_number(cmd) == 0; i++)
			(void)usleep(5000);
		assert_int_equal(ctl_number(cmd), 1);
		call = atomic_load(&e->b->call);
		assert_int_equal(fake_nvml_ctlf("release %s", calls[k].fn), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		if (!call || strcmp(call, calls[k].fn) != 0)
			fail_msg("a call hung in %s is named %s", calls[k].fn,
				 call ? call : "(null)");
		assert_int_equal(op.r, 0);
	}
	assert_int_equal(ctl_number("gpm_samples"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ratios, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_supported_and_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_call_named, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
