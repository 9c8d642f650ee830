/*
 * The GPU health monitor on a real loop, with the real NVML backend on the fake
 * libnvidia-ml.so.1, driven through the fake's control socket; plus the device-model helpers.
 */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-client.h"
#include "gpu-backend.h"
#include "gpu-monitor.h"
#include "gpu-worker.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#define MAX_GPUS 8

struct env {
	char dir[64];
	char sock[128];
	struct loop *loop;
	struct gpu_backend_opts nopts;
	struct gpu_info info;
	int discovered; /* 0: not yet, 1: done, <0: failed */
	struct gpu_monitor *m;
	char *err;
	/* what the callback saw */
	unsigned calls;
	unsigned calls_gpu[MAX_GPUS];
	enum gpu_health seen[MAX_GPUS];
	usec_t changed_at[MAX_GPUS];
	char reason[MAX_GPUS][160];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	unit_tmpdir("test-gpu", e->dir, sizeof(e->dir));
	(void)snprintf(e->sock, sizeof(e->sock), "%s/ctl.sock", e->dir);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_CONTROL", e->sock, 1), 0);
	(void)unsetenv("EDGEGPU_FAKE_NVML_SYSFS");
	(void)unsetenv("EDGEGPU_FAKE_NVML_PROCFS");
	assert_int_equal(loop_new(&e->loop), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char reply[64];

	e->m = gpu_monitor_free(e->m);
	/* A test that failed may have left a call blocked in the fake. */
	(void)fake_nvml_ctl(NULL, "release nvmlDeviceGetMemoryInfo", reply, sizeof(reply));
	(void)fake_nvml_ctl(NULL, "release nvmlDeviceGetPowerUsage", reply, sizeof(reply));
	(void)fake_nvml_ctl(NULL, "release nvmlEventSetWait_v2", reply, sizeof(reply));
	/* A thread left in the fake (a test's blocked call) must be gone before the next test. */
	for (int i = 0; i < 1000 && gpu_monitor_live_threads() > 0; i++)
		(void)usleep(5000);
	assert_int_equal(gpu_monitor_live_threads(), 0);
	gpu_info_release(&e->info);
	e->loop = loop_free(e->loop);
	free(e->err);
	unit_rm_tree(e->dir);
	free(e);
	return 0;
}

static void on_health(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
		      const char *reason, void *userdata)
{
	struct env *e = userdata;

	assert_ptr_equal(m, e->m);
	assert_true(gpu < e->info.n_devices && gpu < MAX_GPUS);
	assert_int_not_equal(health, e->seen[gpu]); /* called on changes only */
	e->calls++;
	e->calls_gpu[gpu]++;
	e->seen[gpu] = health;
	e->changed_at[gpu] = now_usec();
	(void)snprintf(e->reason[gpu], sizeof(e->reason[gpu]), "%s", reason);
}

static void on_discovered(struct gpu_monitor *m, int r, struct gpu_info *info, int **distance,
			  const char *err, void *userdata)
{
	struct env *e = userdata;

	if (r < 0) {
		print_error("discovery: %d %s\n", r, err ? err : "");
		e->discovered = r;
		return;
	}
	gpu_info_release(&e->info);
	e->info = *info;
	memset(info, 0, sizeof(*info));
	e->discovered = 1;
}

typedef bool cond_fn(struct env *e, void *arg);
static bool run_until(struct env *e, cond_fn *cond, void *arg, usec_t timeout);

static bool discovered(struct env *e, void *arg)
{
	return e->discovered != 0;
}

static void start(struct env *e, const char *fixture, const struct gpu_monitor_opts *o)
{
	struct gpu_monitor_opts def = { 0 };
	char path[512];

	(void)snprintf(path, sizeof(path), "%s/%s", FAKE_NVML_FIXTURES, fixture);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
	e->nopts = (struct gpu_backend_opts){ .kind = GPU_BACKEND_NVML,
					      .lib_path = FAKE_NVML_LIB,
					      .sysfs_root = e->dir };
	if (o)
		def = *o;
	/* Short event waits, so that a thread left in one after a test is soon gone. */
	if (!def.event_slice)
		def.event_slice = 200 * USEC_PER_MSEC;
	assert_int_equal(
		gpu_monitor_new(e->loop, &e->nopts, &def, on_health, on_discovered, e, &e->m), 0);
	gpu_monitor_discover(e->m, false);
	if (!run_until(e, discovered, NULL, 10 * USEC_PER_SEC))
		fail_msg("no discovery result");
	assert_int_equal(e->discovered, 1);
	for (unsigned i = 0; i < e->info.n_devices; i++)
		assert_int_equal(gpu_monitor_health(e->m, i), GPU_HEALTHY);
}

static void ctl(const char *cmd)
{
	char reply[256];
	int r = fake_nvml_ctl(NULL, cmd, reply, sizeof(reply));

	if (r < 0)
		print_error("fake nvml \"%s\": %d %s\n", cmd, r, reply);
	assert_int_equal(r, 0);
}

static unsigned ctl_number(const char *cmd)
{
	char reply[64];

	assert_int_equal(fake_nvml_ctl(NULL, cmd, reply, sizeof(reply)), 0);
	return (unsigned)strtoul(reply, NULL, 10);
}

/* Runs the loop until the monitor thread blocks in nvmlEventSetWait_v2. */
static void wait_for_waiter(struct env *e)
{
	for (int i = 0; i < 500 && ctl_number("waiters") == 0; i++)
		assert_int_equal(loop_run_once(e->loop, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(ctl_number("waiters"), 1);
}

/* Runs the loop until @cond holds or @timeout passes; returns whether it held. */
static bool run_until(struct env *e, cond_fn *cond, void *arg, usec_t timeout)
{
	usec_t end = now_usec() + timeout;

	while (!cond(e, arg)) {
		if (now_usec() >= end)
			return false;
		assert_int_equal(loop_run_once(e->loop, 5 * USEC_PER_MSEC), 0);
	}
	return true;
}

static void run_for(struct env *e, usec_t t)
{
	usec_t end = now_usec() + t;

	while (now_usec() < end)
		assert_int_equal(loop_run_once(e->loop, 10 * USEC_PER_MSEC), 0);
}

struct want {
	unsigned gpu;
	enum gpu_health health;
};

static bool health_is(struct env *e, void *arg)
{
	const struct want *w = arg;

	return gpu_monitor_health(e->m, w->gpu) == w->health && e->seen[w->gpu] == w->health;
}

/* Whether the monitor's counters the tests wait for reached those of @arg. */
static bool stats_reach(struct env *e, void *arg)
{
	const struct gpu_monitor_stats *want = arg;
	struct gpu_monitor_stats s;

	gpu_monitor_get_stats(e->m, &s);
	return s.events >= want->events && s.hung_calls >= want->hung_calls &&
	       s.worker_limit >= want->worker_limit && s.probes_deferred >= want->probes_deferred &&
	       s.probes >= want->probes;
}

static bool all_unhealthy(struct env *e, void *arg)
{
	for (unsigned i = 0; i < e->info.n_devices; i++)
		if (gpu_monitor_health(e->m, i) != GPU_UNHEALTHY)
			return false;
	return true;
}

static bool all_healthy(struct env *e, void *arg)
{
	for (unsigned i = 0; i < e->info.n_devices; i++)
		if (gpu_monitor_health(e->m, i) != GPU_HEALTHY)
			return false;
	return true;
}

static void expect(struct env *e, unsigned gpu, enum gpu_health h, usec_t timeout)
{
	struct want w = { gpu, h };

	if (!run_until(e, health_is, &w, timeout))
		fail_msg("gpu %u is not %s after %llu ms", gpu,
			 h == GPU_HEALTHY ? "healthy" : "unhealthy",
			 (unsigned long long)(timeout / USEC_PER_MSEC));
}

static void wait_stats(struct env *e, const struct gpu_monitor_stats *want)
{
	struct gpu_monitor_stats s;

	if (!run_until(e, stats_reach, (void *)want, 10 * USEC_PER_SEC)) {
		gpu_monitor_get_stats(e->m, &s);
		fail_msg("counters seen/waited for: events %llu/%llu hung_calls %llu/%llu "
			 "worker_limit %llu/%llu probes_deferred %llu/%llu probes %llu/%llu",
			 (unsigned long long)s.events, (unsigned long long)want->events,
			 (unsigned long long)s.hung_calls, (unsigned long long)want->hung_calls,
			 (unsigned long long)s.worker_limit, (unsigned long long)want->worker_limit,
			 (unsigned long long)s.probes_deferred,
			 (unsigned long long)want->probes_deferred, (unsigned long long)s.probes,
			 (unsigned long long)want->probes);
	}
}

static void wait_events(struct env *e, uint64_t n)
{
	wait_stats(e, &(struct gpu_monitor_stats){ .events = n });
}

static void test_xid_unhealthy(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;
	usec_t sent;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	sent = now_usec();
	ctl("xid 0 79");
	expect(e, 0, GPU_UNHEALTHY, USEC_PER_SEC);
	assert_true(e->changed_at[0] - sent < USEC_PER_SEC);
	assert_non_null(strstr(e->reason[0], "79"));
	assert_int_equal(gpu_monitor_health(e->m, 1), GPU_HEALTHY);
	assert_int_equal(e->calls, 1);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.events, 1);
	assert_int_equal(s.xids, 1);
	assert_int_equal(s.xids_ignored, 0);
	/* Without recovery it stays unhealthy, even though its probes pass. */
	run_for(e, 400 * USEC_PER_MSEC);
	assert_int_equal(gpu_monitor_health(e->m, 0), GPU_UNHEALTHY);
	assert_int_equal(e->calls, 1);
}

struct sampled {
	unsigned calls, n;
	int r[MAX_GPUS];
	struct gpu_sample s[MAX_GPUS];
};

static void on_sampled(struct gpu_monitor *m, const struct gpu_sample *samples, const int *r,
		       unsigned n, void *userdata)
{
	struct sampled *sp = userdata;

	sp->calls++;
	sp->n = n;
	for (unsigned i = 0; i < n && i < MAX_GPUS; i++) {
		sp->r[i] = r[i];
		sp->s[i] = samples[i];
	}
}

static bool sampled_once(struct env *e, void *arg)
{
	return ((struct sampled *)arg)->calls > 0;
}

/* One sample of every GPU on request, through the worker, with the fixture's values. */
static void test_sample(void **state)
{
	struct env *e = *state;
	struct sampled sp = { 0 };
	unsigned power0;

	start(e, "two-gpus.conf", NULL);
	(void)gpu_monitor_on_sampled(e->m, on_sampled, &sp);
	power0 = ctl_number("count nvmlDeviceGetPowerUsage");
	assert_int_equal(power0, 0); /* nothing sampled before asked */
	ctl("set 0 energy 123456");
	ctl("set 0 clock_reasons 0x60");
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no sample");
	assert_int_equal(sp.calls, 1);
	assert_int_equal(sp.n, 2);
	assert_int_equal(sp.r[0], 0);
	assert_int_equal(sp.r[1], 0);
	assert_true(sp.s[0].temperature_c == 41);
	assert_true(sp.s[0].power_w == 21.5);
	assert_true(sp.s[1].sm_clock_mhz == 2040);
	assert_int_equal(sp.s[0].mem_used, 512ULL << 20);
	assert_int_equal(sp.s[0].energy_mj, 123456);
	assert_int_equal(sp.s[0].clock_reasons, 0x60);
	assert_int_equal(sp.s[0].ecc_corrected, 3);
	assert_int_equal(sp.s[0].n_procs, 1);
	assert_int_equal(sp.s[0].procs[0].pid, 4242);
	assert_int_equal(sp.s[0].procs[0].mem_used, 268435456ULL);
	assert_int_equal(sp.s[1].n_procs, 0);
	assert_int_equal(ctl_number("count nvmlDeviceGetPowerUsage"), power0 + 2);
	/* A second request, a second sample. */
	sp.calls = 0;
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no second sample");
	assert_int_equal(ctl_number("count nvmlDeviceGetPowerUsage"), power0 + 4);
	(void)gpu_monitor_on_sampled(e->m, NULL, &sp);
}

/*
 * A process's SM share (nvmlDeviceGetProcessUtilization): unknown (NaN) where the GPU does not
 * support it, its newest sample where it does, 0 for a listed process with no recent sample.
 */
static void test_sample_process_util(void **state)
{
	struct env *e = *state;
	struct sampled sp = { 0 };

	start(e, "two-gpus.conf", NULL);
	(void)gpu_monitor_on_sampled(e->m, on_sampled, &sp);
	ctl("set 1 processes 5000:1048576,5001:2097152");
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no sample");
	assert_int_equal(sp.r[0], 0); /* not supported is no error */
	assert_int_equal(sp.s[0].n_procs, 1);
	assert_true(isnan(sp.s[0].procs[0].sm_util));
	assert_true(isnan(sp.s[1].procs[1].sm_util));

	ctl("set 0 process_sm_util 4242:37,9999:80"); /* 9999 is no process of the GPU's */
	ctl("set 1 process_sm_util 5001:120");	      /* past 100: capped */
	sp.calls = 0;
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no second sample");
	assert_true(sp.s[0].procs[0].sm_util == 37);
	assert_true(sp.s[1].procs[0].sm_util == 0); /* listed, no sample: idle */
	assert_true(sp.s[1].procs[1].sm_util == 100);

	ctl("set 1 process_sm_util none"); /* supported, no sample at all: NOT_FOUND */
	sp.calls = 0;
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no third sample");
	assert_int_equal(sp.r[1], 0);
	assert_true(sp.s[1].procs[0].sm_util == 0 && sp.s[1].procs[1].sm_util == 0);
	(void)gpu_monitor_on_sampled(e->m, NULL, &sp);
}

/* More processes than a sample holds: the first ones, marked truncated. */
static void test_sample_many_processes(void **state)
{
	struct env *e = *state;
	struct sampled sp = { 0 };
	struct buf b = { 0 };

	start(e, "two-gpus.conf", NULL);
	(void)gpu_monitor_on_sampled(e->m, on_sampled, &sp);
	assert_int_equal(buf_printf(&b, "set 1 processes "), 0);
	for (unsigned i = 0; i < GPU_SAMPLE_PROCS_MAX + 5; i++)
		assert_int_equal(buf_printf(&b, "%s%u:%u", i ? "," : "", 100 + i, i), 0);
	assert_int_equal(buf_append(&b, "", 1), 0);
	ctl((const char *)b.data);
	buf_release(&b);
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no sample");
	assert_int_equal(sp.s[1].n_procs, GPU_SAMPLE_PROCS_MAX);
	assert_true(sp.s[1].procs_truncated);
	assert_int_equal(sp.s[1].procs[0].pid, 100);
	(void)gpu_monitor_on_sampled(e->m, NULL, &sp);
}

/* Per-GPU records: XIDs by code, the last one, and health changes by reason. */
static void test_gpu_stats(void **state)
{
	struct env *e = *state;
	const struct gpu_monitor_gpu_stats *st;
	struct gpu_monitor_opts o = { .recovery_quiet = 100 * USEC_PER_MSEC,
				      .event_poll_interval = 50 * USEC_PER_MSEC };

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	ctl("xid 1 79");
	ctl("xid 1 79");
	ctl("xid 1 48");
	ctl("xid 1 13"); /* application: not counted */
	wait_events(e, 4);
	st = gpu_monitor_gpu_stats(e->m, 1);
	assert_non_null(st);
	assert_int_equal(st->n_xids, 2);
	assert_int_equal(st->xids[0].xid, 79);
	assert_int_equal(st->xids[0].count, 2);
	assert_int_equal(st->xids[1].xid, 48);
	assert_int_equal(st->xids[1].count, 1);
	assert_true(st->xids[1].last_wall > 0);
	assert_int_equal(st->last_xid, 48);
	assert_int_equal(st->transitions[0][GPU_REASON_XID], 1);
	expect(e, 1, GPU_HEALTHY, 5 * USEC_PER_SEC); /* the quiet period passed */
	st = gpu_monitor_gpu_stats(e->m, 1);
	assert_int_equal(st->transitions[1][GPU_REASON_RECOVERED], 1);
	ctl("lost 0");
	expect(e, 0, GPU_UNHEALTHY, 5 * USEC_PER_SEC);
	assert_int_equal(gpu_monitor_gpu_stats(e->m, 0)->transitions[0][GPU_REASON_LOST], 1);
	assert_null(gpu_monitor_gpu_stats(e->m, 2));
	assert_string_equal(gpu_reason_name(GPU_REASON_HUNG), "hung");
	assert_string_equal(gpu_reason_name(GPU_REASON_COUNT), "unknown");
	ctl("back 0");
}

static void test_application_xids_ignored(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;
	const uint64_t extra[] = { 48 };
	struct gpu_monitor_opts o = { .ignored_xids = extra, .n_ignored_xids = 1 };

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	ctl("xid 0 13");
	ctl("xid 0 31");
	ctl("xid 1 43");
	ctl("xid 1 45");
	ctl("xid 0 68");
	ctl("xid 1 109");
	ctl("xid 0 48"); /* configured */
	wait_events(e, 7);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.xids_ignored, 7);
	assert_int_equal(s.xids, 0);
	assert_true(all_healthy(e, NULL));
	assert_int_equal(e->calls, 0);
}

static void test_ecc(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	ctl("ecc 1 single 3");
	wait_events(e, 3);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.ecc_single, 3);
	assert_true(all_healthy(e, NULL));
	ctl("ecc 1 double");
	expect(e, 1, GPU_UNHEALTHY, USEC_PER_SEC);
	assert_non_null(strstr(e->reason[1], "double-bit"));
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.ecc_double, 1);
	assert_int_equal(gpu_monitor_health(e->m, 0), GPU_HEALTHY);
}

static void test_polled_gpu(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC };
	struct gpu_monitor_stats s;
	uint64_t before;

	start(e, "no-events.conf", &o);
	assert_false(e->info.devices[0].events_supported);
	assert_true(e->info.devices[1].events_supported);
	before = fake_nvml_count("nvmlDeviceGetMemoryInfo");
	run_for(e, 650 * USEC_PER_MSEC);
	/*
	 * GPU 0 (no events) probed every 100 ms: at least 5 rounds. GPU 1's events work: it is
	 * probed every event_poll_interval (60 s), so not in this window.
	 */
	assert_true(fake_nvml_count("nvmlDeviceGetMemoryInfo") - before >= 5);
	assert_true(fake_nvml_count("nvmlDeviceGetMemoryInfo") - before <= 8);
	gpu_monitor_get_stats(e->m, &s);
	assert_true(s.probes >= 5);
	assert_int_equal(s.probe_failures, 0);
	assert_true(all_healthy(e, NULL));
	assert_int_equal(e->calls, 0);
	/* An XID on it never arrives (no events), but a lost GPU is found by the probe. */
	ctl("lost 0");
	expect(e, 0, GPU_UNHEALTHY, USEC_PER_SEC);
	assert_non_null(strstr(e->reason[0], "lost"));
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.lost, 1);
	assert_int_equal(gpu_monitor_health(e->m, 1), GPU_HEALTHY);
	run_for(e, 300 * USEC_PER_MSEC);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.lost, 1); /* counted once, not once per probe */
}

static void test_lost_gpu(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	ctl("lost 1");
	expect(e, 1, GPU_UNHEALTHY, USEC_PER_SEC);
	assert_int_equal(gpu_monitor_health(e->m, 0), GPU_HEALTHY);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.lost, 1);
	/* Events keep flowing for the other GPU. */
	ctl("xid 0 79");
	expect(e, 0, GPU_UNHEALTHY, USEC_PER_SEC);
}

static void test_runtime_mismatch(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	ctl("mismatch on");
	if (!run_until(e, all_unhealthy, NULL, USEC_PER_SEC))
		fail_msg("a mismatch did not make every GPU unhealthy");
	assert_int_equal(e->calls, 2);
	/* Re-initialisation keeps failing while the mismatch lasts, with back-off. */
	run_for(e, 500 * USEC_PER_MSEC);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.reinits, 0);
	assert_true(s.reinit_failures >= 2 && s.reinit_failures <= 5);
	ctl("mismatch off");
	if (!run_until(e, all_healthy, NULL, 3 * USEC_PER_SEC))
		fail_msg("the GPUs did not come back after the mismatch ended");
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.reinits, 1);
	assert_true(fake_nvml_count("nvmlInit_v2") >= 2);
	/* Events were registered again. */
	wait_for_waiter(e);
	ctl("xid 1 79");
	expect(e, 1, GPU_UNHEALTHY, USEC_PER_SEC);
}

static void test_driver_reload(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	ctl("reload");
	if (!run_until(e, all_unhealthy, NULL, USEC_PER_SEC))
		fail_msg("a driver reload did not make every GPU unhealthy");
	if (!run_until(e, all_healthy, NULL, 2 * USEC_PER_SEC))
		fail_msg("the GPUs did not come back after the reload");
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.reinits, 1);
	assert_int_equal(e->calls, 4);
}

static void test_recovery(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .recovery_quiet = 300 * USEC_PER_MSEC };
	struct gpu_monitor_stats s;
	usec_t bad;

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	ctl("xid 0 79");
	expect(e, 0, GPU_UNHEALTHY, USEC_PER_SEC);
	/* Another critical XID restarts the quiet period. */
	run_for(e, 200 * USEC_PER_MSEC);
	ctl("xid 0 79");
	wait_events(e, 2);
	bad = now_usec();
	expect(e, 0, GPU_HEALTHY, 2 * USEC_PER_SEC);
	assert_true(e->changed_at[0] - bad >= 250 * USEC_PER_MSEC);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.recoveries, 1);
	/* A lost GPU recovers only once it answers again. */
	ctl("lost 1");
	expect(e, 1, GPU_UNHEALTHY, USEC_PER_SEC);
	run_for(e, 500 * USEC_PER_MSEC);
	assert_int_equal(gpu_monitor_health(e->m, 1), GPU_UNHEALTHY);
	ctl("back 1");
	expect(e, 1, GPU_HEALTHY, 2 * USEC_PER_SEC);
}

static void test_wait_backoff(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;
	uint64_t calls;
	usec_t t0;

	/* Every event wait fails at once, from the start. */
	start(e, "two-gpus.conf", NULL);
	ctl("fail nvmlEventSetWait_v2 UNKNOWN");
	calls = fake_nvml_count("nvmlEventSetWait_v2");
	t0 = now_usec();
	run_for(e, 2 * USEC_PER_SEC);
	calls = fake_nvml_count("nvmlEventSetWait_v2") - calls;
	print_message("%llu failing waits in %llu ms\n", (unsigned long long)calls,
		      (unsigned long long)((now_usec() - t0) / USEC_PER_MSEC));
	/* 100 + 200 + 400 + 800 ms: about 5 in 2 s, under 20/s; a spinning loop makes millions. */
	assert_true(calls >= 2);
	assert_true(calls < 40);
	gpu_monitor_get_stats(e->m, &s);
	assert_true(s.wait_errors >= calls && s.wait_errors < 40);
	/* The GPUs answer their probes, so they stay healthy. */
	assert_true(all_healthy(e, NULL));
	/* Once the wait works again, events flow. */
	ctl("fail nvmlEventSetWait_v2 off");
	wait_for_waiter(e);
	ctl("xid 1 79");
	expect(e, 1, GPU_UNHEALTHY, USEC_PER_SEC);
}

static void test_xid_storm(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", NULL);
	wait_for_waiter(e);
	/* 10,000 events: only GPU 1 gets a critical one, in the middle. */
	ctl("xid 0 13 4000");
	ctl("xid 1 31 3000");
	ctl("xid 1 79");
	ctl("xid 0 43 2999");
	wait_events(e, 10000);
	run_for(e, 50 * USEC_PER_MSEC);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.events, 10000);
	assert_int_equal(s.xids, 1);
	assert_int_equal(s.xids_ignored, 9999);
	assert_int_equal(gpu_monitor_health(e->m, 0), GPU_HEALTHY);
	assert_int_equal(gpu_monitor_health(e->m, 1), GPU_UNHEALTHY);
	assert_int_equal(e->calls, 1);
}

static void test_disable(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .disable_all = true, .poll_interval = 50 * USEC_PER_MSEC };
	char reply[64];

	start(e, "two-gpus.conf", &o);
	assert_int_equal(fake_nvml_count("nvmlEventSetCreate"), 0);
	assert_int_equal(fake_nvml_ctl(NULL, "xid 0 79", reply, sizeof(reply)), 0);
	assert_string_equal(reply, "delivered=0");
	ctl("lost 1");
	run_for(e, 300 * USEC_PER_MSEC);
	assert_true(all_healthy(e, NULL));
	assert_int_equal(fake_nvml_count("nvmlDeviceGetMemoryInfo"), 2); /* discovery only */
}

static void test_disable_xids(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .disable_xids = true };
	struct gpu_monitor_stats s;

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	ctl("xid 0 79");
	ctl("xid 0 48");
	wait_events(e, 2);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.xids_ignored, 2);
	assert_true(all_healthy(e, NULL));
	ctl("ecc 0 double");
	expect(e, 0, GPU_UNHEALTHY, USEC_PER_SEC);
}

static void test_free_is_quick(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .event_slice = 60 * USEC_PER_SEC };
	usec_t t0;

	/* The event thread is in a 60 s wait: free leaves it there and returns at once. */
	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	t0 = now_usec();
	e->m = gpu_monitor_free(e->m);
	assert_null(e->m);
	assert_true(now_usec() - t0 < 100 * USEC_PER_MSEC);
	assert_int_equal(gpu_monitor_live_threads(), 1);
	/* An event ends the wait: the thread sees the stop, and the last one out closes up. */
	ctl("xid 0 13");
	for (int i = 0; i < 1000 && gpu_monitor_live_threads() > 0; i++)
		(void)usleep(5000);
	/* (the last one out closed the backend: the fake is unloaded, its socket gone) */
	assert_int_equal(gpu_monitor_live_threads(), 0);
	assert_null(gpu_monitor_free(NULL));
}

static bool reason_has(struct env *e, void *arg)
{
	return strstr(e->reason[0], arg) && gpu_monitor_health(e->m, 0) == GPU_UNHEALTHY;
}

static unsigned blocked_in(const char *fn)
{
	char cmd[96];

	(void)snprintf(cmd, sizeof(cmd), "blocked %s", fn);
	return ctl_number(cmd);
}

/* A probe stuck in the driver: the loop runs on, the GPUs are unhealthy until it returns. */
static void test_hung_call(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC,
				      .call_timeout = 300 * USEC_PER_MSEC };
	struct gpu_monitor_stats s;
	usec_t t0;

	start(e, "no-events.conf", &o);
	ctl("block nvmlDeviceGetMemoryInfo");
	t0 = now_usec();
	if (!run_until(e, reason_has, "nvml call nvmlDeviceGetMemoryInfo hung", 5 * USEC_PER_SEC))
		fail_msg("a hung probe was not reported: reason \"%s\"", e->reason[0]);
	assert_true(now_usec() - t0 >= 300 * USEC_PER_MSEC);
	assert_non_null(strstr(gpu_monitor_reason(e->m, 0), "hung"));
	assert_string_equal(gpu_monitor_reason(e->m, 1), "");
	/* Only the GPU whose call hung: GPU 1 (events) is not probed here. */
	assert_int_equal(gpu_monitor_health(e->m, 1), GPU_HEALTHY);
	assert_int_equal(blocked_in("nvmlDeviceGetMemoryInfo"), 1);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.hung_calls, 1);
	/* The loop kept running: a timer of ours fires while the worker is stuck. */
	run_for(e, 200 * USEC_PER_MSEC);
	ctl("release nvmlDeviceGetMemoryInfo");
	if (!run_until(e, all_healthy, NULL, 5 * USEC_PER_SEC))
		fail_msg("the GPUs did not recover when the hung call returned");
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.hung_calls, 1);
}

/* Freeing the monitor while the worker is stuck in the driver returns at once. */
static void test_free_with_stuck_worker(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC };
	usec_t t0;

	start(e, "no-events.conf", &o);
	ctl("block nvmlDeviceGetMemoryInfo");
	for (int i = 0; i < 500 && blocked_in("nvmlDeviceGetMemoryInfo") == 0; i++)
		assert_int_equal(loop_run_once(e->loop, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(blocked_in("nvmlDeviceGetMemoryInfo"), 1);
	t0 = now_usec();
	e->m = gpu_monitor_free(e->m);
	assert_true(now_usec() - t0 < 100 * USEC_PER_MSEC);
	/* the worker, and the event thread if it was inside its (short) wait */
	assert_true(gpu_monitor_live_threads() >= 1);
	ctl("release nvmlDeviceGetMemoryInfo");
	/* teardown waits for both to leave */
}

static bool threads_are(struct env *e, void *arg)
{
	return gpu_monitor_live_threads() == *(unsigned *)arg && gpu_monitor_hung_calls(e->m) == 0;
}

/*
 * Issue 16: a sample hung in one GPU's call (GPU 2's power reading) makes that GPU unhealthy
 * and no other: a new worker samples and probes the others, a lost GPU is still found, and
 * when the call returns the GPU is healthy again and the thread left in it exits.
 */
static void test_hung_call_one_gpu(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC,
				      .event_poll_interval = 100 * USEC_PER_MSEC,
				      .call_timeout = 300 * USEC_PER_MSEC };
	struct gpu_monitor_stats want = { 0 }, s;
	struct sampled sp = { 0 };
	unsigned threads0;

	start(e, "eight-gpus.conf", &o);
	threads0 = gpu_monitor_live_threads();
	(void)gpu_monitor_on_sampled(e->m, on_sampled, &sp);
	ctl("block nvmlDeviceGetPowerUsage 2");
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 10 * USEC_PER_SEC))
		fail_msg("no sample: the hung call held it");
	assert_int_equal(sp.n, 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(sp.r[i], i == 2 ? -ETIMEDOUT : 0);
	assert_int_equal(gpu_monitor_health(e->m, 2), GPU_UNHEALTHY);
	assert_string_equal(gpu_monitor_reason(e->m, 2), "nvml call nvmlDeviceGetPowerUsage hung");
	for (unsigned i = 0; i < 8; i++)
		if (i != 2)
			assert_int_equal(gpu_monitor_health(e->m, i), GPU_HEALTHY);
	assert_int_equal(gpu_monitor_hung_calls(e->m), 1);
	assert_false(gpu_monitor_hung(e->m)); /* samples go on */
	assert_int_equal(gpu_monitor_live_threads(), threads0 + 1);
	/* The others are probed on (two rounds of seven), and a lost one is found. */
	gpu_monitor_get_stats(e->m, &s);
	want.probes = s.probes + 14;
	wait_stats(e, &want);
	ctl("lost 5");
	expect(e, 5, GPU_UNHEALTHY, 5 * USEC_PER_SEC);
	assert_string_equal(gpu_monitor_reason(e->m, 5), "gpu is lost (fell off the bus)");
	assert_int_equal(blocked_in("nvmlDeviceGetPowerUsage"), 1);
	/* A second sample leaves GPU 2 out at once. */
	sp.calls = 0;
	assert_true(gpu_monitor_sample(e->m));
	if (!run_until(e, sampled_once, &sp, 5 * USEC_PER_SEC))
		fail_msg("no second sample");
	assert_int_equal(sp.r[2], -ETIMEDOUT);
	assert_int_equal(blocked_in("nvmlDeviceGetPowerUsage"), 1);
	ctl("release nvmlDeviceGetPowerUsage 2");
	expect(e, 2, GPU_HEALTHY, 5 * USEC_PER_SEC);
	if (!run_until(e, threads_are, &threads0, 5 * USEC_PER_SEC))
		fail_msg("the thread left in the hung call did not exit");
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.hung_calls, 1);
	assert_int_equal(s.worker_limit, 0);
	(void)gpu_monitor_on_sampled(e->m, NULL, &sp);
}

/*
 * Issue 16: every GPU's probe hangs. Each hang leaves its thread behind until
 * GPU_WORKER_MAX_THREADS worker threads exist; the next one holds the worker, every GPU is
 * unhealthy, probe rounds are deferred and no thread starts. All recover when the calls return.
 */
static void test_hung_calls_bounded(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC,
				      .event_poll_interval = 100 * USEC_PER_MSEC,
				      .call_timeout = 200 * USEC_PER_MSEC };
	struct gpu_monitor_stats want = { .hung_calls = 4, .worker_limit = 1 }, s;
	unsigned threads0;

	start(e, "eight-gpus.conf", &o);
	threads0 = gpu_monitor_live_threads();
	ctl("block nvmlDeviceGetMemoryInfo");
	wait_stats(e, &want);
	if (!run_until(e, all_unhealthy, NULL, 5 * USEC_PER_SEC))
		fail_msg("not every GPU is unhealthy at the bound");
	gpu_monitor_get_stats(e->m, &s);
	want.probes_deferred = s.probes_deferred + 5;
	wait_stats(e, &want);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.hung_calls, 4);
	assert_int_equal(s.worker_limit, 1);
	assert_int_equal(blocked_in("nvmlDeviceGetMemoryInfo"), GPU_WORKER_MAX_THREADS);
	assert_int_equal(gpu_monitor_live_threads(), threads0 + GPU_WORKER_MAX_THREADS - 1);
	assert_int_equal(gpu_monitor_hung_calls(e->m), GPU_WORKER_MAX_THREADS);
	assert_true(gpu_monitor_hung(e->m));
	for (unsigned i = 0; i < 8; i++)
		assert_string_equal(gpu_monitor_reason(e->m, i),
				    i < 4 ? "nvml call nvmlDeviceGetMemoryInfo hung" :
					    "no nvml worker left: 4 threads are in hung calls");
	ctl("release nvmlDeviceGetMemoryInfo");
	if (!run_until(e, all_healthy, NULL, 5 * USEC_PER_SEC))
		fail_msg("the GPUs did not recover when the hung calls returned");
	if (!run_until(e, threads_are, &threads0, 5 * USEC_PER_SEC))
		fail_msg("the threads left in hung calls did not exit");
}

/*
 * Every worker thread hangs, each on its own GPU; then the call that holds the worker returns
 * and the same thread goes on to the next GPU and hangs there. The GPU that answered is no
 * longer hung, the new hang is reported, and when a thread left behind comes back the held
 * one is left behind in its turn and the others are probed again.
 */
static void test_held_call_moves_on(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .poll_interval = 100 * USEC_PER_MSEC,
				      .event_poll_interval = 100 * USEC_PER_MSEC,
				      .call_timeout = 200 * USEC_PER_MSEC };
	struct gpu_monitor_stats want = { .hung_calls = 4, .worker_limit = 1 }, s;
	const char *hung = "nvml call nvmlDeviceGetMemoryInfo hung";
	unsigned threads0;

	start(e, "eight-gpus.conf", &o);
	threads0 = gpu_monitor_live_threads();
	for (unsigned i = 0; i < 5; i++) {
		char cmd[64];

		(void)snprintf(cmd, sizeof(cmd), "block nvmlDeviceGetMemoryInfo %u", i);
		ctl(cmd);
	}
	/* GPUs 0-2 left behind, the worker held in GPU 3's call. */
	wait_stats(e, &want);
	assert_string_equal(gpu_monitor_reason(e->m, 3), hung);
	ctl("release nvmlDeviceGetMemoryInfo 3");
	want.hung_calls = 5;
	want.worker_limit = 2;
	wait_stats(e, &want);
	assert_int_equal(blocked_in("nvmlDeviceGetMemoryInfo"), GPU_WORKER_MAX_THREADS);
	assert_int_equal(gpu_monitor_hung_calls(e->m), GPU_WORKER_MAX_THREADS);
	assert_string_equal(gpu_monitor_reason(e->m, 4), hung);
	assert_string_equal(gpu_monitor_reason(e->m, 3),
			    "no nvml worker left: 4 threads are in hung calls");
	/* A thread comes back: GPU 4's call is left behind, the rest are probed. */
	ctl("release nvmlDeviceGetMemoryInfo 0");
	for (unsigned i = 0; i < 8; i++)
		expect(e, i, i == 1 || i == 2 || i == 4 ? GPU_UNHEALTHY : GPU_HEALTHY,
		       5 * USEC_PER_SEC);
	assert_string_equal(gpu_monitor_reason(e->m, 4), hung);
	assert_false(gpu_monitor_hung(e->m));
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.hung_calls, 5);
	ctl("release nvmlDeviceGetMemoryInfo");
	if (!run_until(e, all_healthy, NULL, 5 * USEC_PER_SEC))
		fail_msg("the GPUs did not recover when the hung calls returned");
	if (!run_until(e, threads_are, &threads0, 5 * USEC_PER_SEC))
		fail_msg("the threads left in hung calls did not exit");
}

/*
 * The driver changes while a thread is left in a hung call: the re-initialisation (which
 * shuts the library down, under that thread's handles) waits until the call returns.
 */
static void test_reinit_waits_for_hung_call(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .call_timeout = 300 * USEC_PER_MSEC };
	struct gpu_monitor_stats want = { .hung_calls = 2 }, s;

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	/* Both GPUs' samples hang (a whole-function block: a driver change does not end it). */
	ctl("block nvmlDeviceGetPowerUsage");
	assert_true(gpu_monitor_sample(e->m));
	wait_stats(e, &want);
	assert_int_equal(gpu_monitor_hung_calls(e->m), 2);
	ctl("mismatch on");
	wait_events(e, 1); /* the event wait reports it */
	ctl("mismatch off");
	run_for(e, 500 * USEC_PER_MSEC);
	assert_int_equal(ctl_number("count nvmlShutdown"), 0);
	ctl("release nvmlDeviceGetPowerUsage");
	if (!run_until(e, all_healthy, NULL, 5 * USEC_PER_SEC))
		fail_msg("no re-initialisation after the hung calls returned");
	assert_int_equal(ctl_number("count nvmlShutdown"), 1);
	gpu_monitor_get_stats(e->m, &s);
	assert_int_equal(s.reinits, 1);
}

/*
 * Issue 16 (gpu-worker.c:231-246 at 839d5ba): the monitor is freed while the worker waits for
 * the event thread to leave the event set (to re-initialise) and the event thread is held
 * inside nvmlEventSetWait_v2. The set must not be freed under it: the fake aborts if it is.
 */
static void test_free_while_event_thread_waits(void **state)
{
	struct env *e = *state;
	struct gpu_monitor_opts o = { .event_poll_interval = 100 * USEC_PER_MSEC,
				      .call_timeout = 300 * USEC_PER_MSEC };
	struct gpu_monitor_stats want = { .hung_calls = 1 };

	start(e, "two-gpus.conf", &o);
	wait_for_waiter(e);
	ctl("block nvmlEventSetWait_v2");
	ctl("xid 0 13"); /* ends the wait in progress; the next one is held at the door */
	for (int i = 0; i < 500 && blocked_in("nvmlEventSetWait_v2") == 0; i++)
		assert_int_equal(loop_run_once(e->loop, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(blocked_in("nvmlEventSetWait_v2"), 1);
	ctl("mismatch on"); /* a probe sees it: re-initialise, which closes the event set */
	wait_stats(e, &want);
	assert_true(gpu_monitor_hung(e->m));
	e->m = gpu_monitor_free(e->m);
	assert_true(gpu_monitor_live_threads() >= 1);
	/* The event thread comes out, sees the stop, and the last one out closes the set. */
	ctl("release nvmlEventSetWait_v2");
	/* teardown waits for it to leave */
}

static void test_no_gpus(void **state)
{
	struct env *e = *state;

	start(e, "zero-gpus.conf", NULL);
	assert_int_equal(e->info.n_devices, 0);
	assert_int_equal(gpu_monitor_health(e->m, 0), GPU_UNHEALTHY); /* out of range */
	run_for(e, 50 * USEC_PER_MSEC);
}

static void test_parse_disable_healthchecks(void **state)
{
	struct gpu_monitor_opts o = { 0 };
	const uint64_t config[] = { 94 };
	uint64_t *xids = NULL;

	assert_int_equal(gpu_parse_disable_healthchecks(NULL, &o, &xids), 0);
	assert_null(xids);
	assert_int_equal(gpu_parse_disable_healthchecks("", &o, &xids), 0);
	assert_false(o.disable_all || o.disable_xids);

	assert_int_equal(gpu_parse_disable_healthchecks("all", &o, &xids), 0);
	assert_true(o.disable_all);
	assert_null(xids);
	o = (struct gpu_monitor_opts){ 0 };
	assert_int_equal(gpu_parse_disable_healthchecks(" XIDS ", &o, &xids), 0);
	assert_true(o.disable_xids);
	assert_false(o.disable_all);

	/* NVIDIA's example: "48, 79" adds both to the ignore list. */
	o = (struct gpu_monitor_opts){ .ignored_xids = config, .n_ignored_xids = 1 };
	assert_int_equal(gpu_parse_disable_healthchecks("48, 79", &o, &xids), 0);
	assert_non_null(xids);
	assert_ptr_equal(o.ignored_xids, xids);
	assert_int_equal(o.n_ignored_xids, 3);
	assert_int_equal(xids[0], 94);
	assert_int_equal(xids[1], 48);
	assert_int_equal(xids[2], 79);
	assert_false(o.disable_all || o.disable_xids);
	free(xids);

	o = (struct gpu_monitor_opts){ 0 };
	assert_int_equal(gpu_parse_disable_healthchecks(" 13 ,, All,\t109 ", &o, &xids), 0);
	assert_true(o.disable_all);
	assert_int_equal(o.n_ignored_xids, 2);
	assert_int_equal(xids[0], 13);
	assert_int_equal(xids[1], 109);
	free(xids);

	/* A malformed item changes nothing. */
	o = (struct gpu_monitor_opts){ .ignored_xids = config, .n_ignored_xids = 1 };
	assert_int_equal(gpu_parse_disable_healthchecks("48,abc", &o, &xids), -EINVAL);
	assert_null(xids);
	assert_ptr_equal(o.ignored_xids, config);
	assert_int_equal(o.n_ignored_xids, 1);
	assert_int_equal(gpu_parse_disable_healthchecks("-1", &o, &xids), -EINVAL);
	assert_int_equal(gpu_parse_disable_healthchecks("48 79", &o, &xids), -EINVAL);
	assert_int_equal(gpu_parse_disable_healthchecks("99999999999999999999999", &o, &xids),
			 -EINVAL);
	assert_false(o.disable_all || o.disable_xids);
}

static void test_xid_is_application(void **state)
{
	const uint64_t app[] = { 13, 31, 43, 45, 68, 109 };
	const uint64_t critical[] = { 0, 1, 48, 63, 64, 74, 79, 92, 94, 95, 119, 999 };

	for (size_t i = 0; i < ELEMENTSOF(app); i++)
		assert_true(gpu_xid_is_application(app[i]));
	for (size_t i = 0; i < ELEMENTSOF(critical); i++)
		assert_false(gpu_xid_is_application(critical[i]));
}

static void test_info_release(void **state)
{
	struct gpu_info info = { 0 };

	gpu_info_release(NULL);
	gpu_info_release(&info);
	info.devices = calloc(2, sizeof(*info.devices));
	info.n_devices = 2;
	info.skipped = calloc(1, sizeof(char *));
	info.skipped[0] = strdup("GPU 2: skipped");
	info.n_skipped = 1;
	gpu_info_release(&info);
	assert_null(info.devices);
	assert_null(info.skipped);
	assert_int_equal(info.n_devices + info.n_skipped, 0);
}

/* The ID rules: CDI's device-name rule for every ID, and no "::" nor overlength for ours. */
static void test_id_rules(void **state)
{
	char long_id[GPU_UUID_MAX + 1];

	(void)state;
	assert_true(gpu_cdi_name_valid("tegra"));
	assert_true(gpu_cdi_name_valid("GPU-8d1f3c2a-5b6e"));
	assert_true(gpu_cdi_name_valid("0"));
	assert_true(gpu_cdi_name_valid("a::b")); /* CDI allows it; a device-plugin ID cannot */
	assert_false(gpu_cdi_name_valid(""));
	assert_false(gpu_cdi_name_valid("-tegra"));
	assert_false(gpu_cdi_name_valid("tegra."));
	assert_false(gpu_cdi_name_valid("te gra"));
	assert_false(gpu_cdi_name_valid("te/gra"));
	assert_true(gpu_device_id_valid("jetson-0"));
	assert_false(gpu_device_id_valid("a::b"));
	assert_false(gpu_device_id_valid("tegra-"));
	assert_false(gpu_device_id_valid(NULL));
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = 0;
	assert_false(gpu_device_id_valid(long_id));
	long_id[GPU_UUID_MAX - 1] = 0;
	assert_true(gpu_device_id_valid(long_id));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_id_rules),
		cmocka_unit_test_setup_teardown(test_xid_unhealthy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_many_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_process_util, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gpu_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_application_xids_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ecc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_polled_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runtime_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_reload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_backoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xid_storm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disable_xids, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_is_quick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_gpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_with_stuck_worker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_call_one_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_calls_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_call_moves_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reinit_waits_for_hung_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_while_event_thread_waits, setup,
						teardown),
		cmocka_unit_test(test_parse_disable_healthchecks),
		cmocka_unit_test(test_xid_is_application),
		cmocka_unit_test(test_info_release),
	};

	return cmocka_run_group_tests_name("gpu", tests, NULL, NULL);
}
