/* NVML telemetry, for metrics: one sample of a GPU, what it lacks left NaN / UINT64_MAX. */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "nvml-int.h"
#include "util.h"

/*
 * An unsigned value from an optional function, scaled; records a failure worse than "not
 * supported". Like get_ull(), it takes the function through NVC() at the call site, so that a
 * hang in it is reported under its own name.
 */
static double get_uint(nvml_fn_nvmlDeviceGetPowerUsage *fn, struct nvml_device *h, double scale,
		       enum nvml_return *worst)
{
	unsigned v;
	enum nvml_return r;

	r = fn(h, &v);
	if (r == NVML_RET_SUCCESS)
		return v * scale;
	nvml_note_failure(r, worst);
	return NAN;
}

/* A 64-bit value from an optional function; records a failure worse than "not supported". */
static uint64_t get_ull(nvml_fn_nvmlDeviceGetTotalEnergyConsumption *fn, struct nvml_device *h,
			enum nvml_return *worst)
{
	unsigned long long v;
	enum nvml_return r;

	r = fn(h, &v);
	if (r == NVML_RET_SUCCESS)
		return v;
	nvml_note_failure(r, worst);
	return UINT64_MAX;
}

/*
 * The driver keeps a few seconds of per-process samples; those older than this are not the
 * process's share now. A process that has none this recent used no SM: 0.
 */
#define PROC_UTIL_WINDOW_USEC (5 * USEC_PER_SEC)
/* Samples asked for at most: a process has one per driver period (1/6 s on most GPUs). */
#define PROC_UTIL_SAMPLES_MAX 4096

/*
 * Each listed process's SM share (sm_util) from nvmlDeviceGetProcessUtilization: the newest
 * sample of its pid within PROC_UTIL_WINDOW_USEC, 0 when it has none there. NaN (left out of
 * the per-pod series) where the driver lacks the call, the GPU does not support it, or it
 * fails: never counted as the GPU's error, the process list stands without it.
 */
static void sample_proc_util(struct nvml_backend *n, struct nvml_device *h, struct gpu_sample *s)
{
	struct nvml_process_utilization_sample *u = NULL;
	unsigned long long since, newest[GPU_SAMPLE_PROCS_MAX] = { 0 };
	unsigned count = 0;
	enum nvml_return r;
	struct timespec ts;

	if (!n->f.nvmlDeviceGetProcessUtilization || s->n_procs <= 0 ||
	    clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return;
	/* the samples' time stamps are the CPU's wall clock, in µs */
	since = (unsigned long long)ts.tv_sec * USEC_PER_SEC +
		(unsigned long long)ts.tv_nsec / 1000;
	since = since > PROC_UTIL_WINDOW_USEC ? since - PROC_UTIL_WINDOW_USEC : 0;
	/* NULL asks how many samples there are (INSUFFICIENT_SIZE, or NOT_FOUND for none) */
	r = NVC(n, nvmlDeviceGetProcessUtilization)(h, NULL, &count, since);
	if (r == NVML_RET_SUCCESS || r == NVML_RET_INSUFFICIENT_SIZE) {
		count = MIN(count, (unsigned)PROC_UTIL_SAMPLES_MAX);
		u = count ? calloc(count, sizeof(*u)) : NULL;
		if (count && !u)
			return;
		r = count ? NVC(n, nvmlDeviceGetProcessUtilization)(h, u, &count, since) :
			    NVML_RET_NOT_FOUND;
	}
	if (r != NVML_RET_SUCCESS && r != NVML_RET_NOT_FOUND)
		goto out; /* unknown: NaN stays */
	for (int i = 0; i < s->n_procs; i++)
		s->procs[i].sm_util = 0;
	for (unsigned k = 0; r == NVML_RET_SUCCESS && k < count; k++)
		for (int i = 0; i < s->n_procs; i++)
			if (s->procs[i].pid == u[k].pid && u[k].time_stamp >= newest[i]) {
				newest[i] = u[k].time_stamp;
				s->procs[i].sm_util = MIN(u[k].sm_util, 100U);
			}
out:
	free(u);
}

/*
 * Memory as DCGM reads it: nvmlDeviceGetMemoryInfo_v2 where the driver has it (reserved apart,
 * "used" without it, as DCGM_FI_DEV_FB_USED and FB_RESERVED are), else v1. Free is NVML's
 * own figure, never total - used: the two differ by what the driver reserves.
 */
static void sample_memory(struct nvml_backend *n, struct nvml_device *h, struct gpu_sample *s,
			  enum nvml_return *worst)
{
	struct nvml_memory_v2 m2 = { .version = NVML_MEMORY_V2_VERSION };
	struct nvml_memory mem;
	enum nvml_return r;

	/* Any failure of v2 (a version it does not know, a GPU it does not serve): v1 says. */
	if (n->f.nvmlDeviceGetMemoryInfo_v2 &&
	    NVC(n, nvmlDeviceGetMemoryInfo_v2)(h, &m2) == NVML_RET_SUCCESS) {
		s->mem_total = m2.total;
		s->mem_used = m2.used;
		s->mem_free = m2.free;
		s->mem_reserved = m2.reserved;
		return;
	}
	r = NVC(n, nvmlDeviceGetMemoryInfo)(h, &mem);
	if (r == NVML_RET_SUCCESS) {
		s->mem_used = mem.used;
		s->mem_total = mem.total;
		s->mem_free = mem.free;
	}
	nvml_note_failure(r, worst);
}

static void sample_procs(struct nvml_backend *n, struct nvml_device *h, struct gpu_sample *s,
			 enum nvml_return *worst)
{
	struct nvml_process_info stack[GPU_SAMPLE_PROCS_MAX], *infos = stack;
	unsigned count = GPU_SAMPLE_PROCS_MAX;
	enum nvml_return r;

	if (!n->f.nvmlDeviceGetComputeRunningProcesses_v3)
		return;
	r = NVC(n, nvmlDeviceGetComputeRunningProcesses_v3)(h, &count, infos);
	if (r == NVML_RET_INSUFFICIENT_SIZE && count < 65536) {
		/* More than fit: list them all (with room for a few new ones), keep the first. */
		count += 16;
		infos = calloc(count, sizeof(*infos));
		if (!infos)
			return;
		r = NVC(n, nvmlDeviceGetComputeRunningProcesses_v3)(h, &count, infos);
		s->procs_truncated = true;
	}
	if (r == NVML_RET_SUCCESS) {
		s->n_procs = (int)MIN(count, (unsigned)GPU_SAMPLE_PROCS_MAX);
		for (int i = 0; i < s->n_procs; i++) {
			s->procs[i].pid = infos[i].pid;
			/* ULLONG_MAX (NVML_VALUE_NOT_AVAILABLE) without the right to see it */
			s->procs[i].mem_used = infos[i].used_gpu_memory;
			s->procs[i].sm_util = NAN;
		}
	} else if (r != NVML_RET_INSUFFICIENT_SIZE) {
		nvml_note_failure(r, worst);
	}
	if (infos != stack)
		free(infos);
	sample_proc_util(n, h, s);
}

int nvml_sample(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret)
{
	struct nvml_backend *n = to_nvml(b);
	enum nvml_return worst = NVML_RET_SUCCESS;
	struct nvml_device *h = nvml_dev_handle(n, gpu);
	struct nvml_utilization u;
	struct gpu_sample s;
	unsigned v;

	if (gpu >= n->n_devs)
		return -EINVAL;
	if (!h)
		return -ENODEV;
	gpu_sample_init(&s);
	sample_memory(n, h, &s, &worst);
	if (n->f.nvmlDeviceGetTemperature &&
	    NVC(n, nvmlDeviceGetTemperature)(h, NVML_TEMP_GPU, &v) == NVML_RET_SUCCESS)
		s.temperature_c = v;
	if (n->f.nvmlDeviceGetTemperatureThreshold) {
		if (NVC(n, nvmlDeviceGetTemperatureThreshold)(h, NVML_TEMP_THRESHOLD_SLOWDOWN,
							      &v) == NVML_RET_SUCCESS)
			s.temp_slowdown_c = v;
		if (NVC(n, nvmlDeviceGetTemperatureThreshold)(h, NVML_TEMP_THRESHOLD_SHUTDOWN,
							      &v) == NVML_RET_SUCCESS)
			s.temp_shutdown_c = v;
	}
	if (n->f.nvmlDeviceGetPowerUsage)
		s.power_w = get_uint(NVC(n, nvmlDeviceGetPowerUsage), h, 1e-3, &worst);
	if (n->f.nvmlDeviceGetEnforcedPowerLimit)
		s.power_limit_w =
			get_uint(NVC(n, nvmlDeviceGetEnforcedPowerLimit), h, 1e-3, &worst);
	if (n->f.nvmlDeviceGetUtilizationRates &&
	    NVC(n, nvmlDeviceGetUtilizationRates)(h, &u) == NVML_RET_SUCCESS) {
		s.util_gpu = u.gpu;
		s.util_mem = u.memory;
	}
	if (n->f.nvmlDeviceGetClockInfo) {
		if (NVC(n, nvmlDeviceGetClockInfo)(h, NVML_CLK_SM, &v) == NVML_RET_SUCCESS)
			s.sm_clock_mhz = v;
		if (NVC(n, nvmlDeviceGetClockInfo)(h, NVML_CLK_MEM, &v) == NVML_RET_SUCCESS)
			s.mem_clock_mhz = v;
	}
	if (n->f.nvmlDeviceGetTotalEccErrors) {
		unsigned long long c;

		if (NVC(n, nvmlDeviceGetTotalEccErrors)(h, NVML_ECC_CORRECTED, NVML_ECC_VOLATILE,
							&c) == NVML_RET_SUCCESS)
			s.ecc_corrected = c;
		if (NVC(n, nvmlDeviceGetTotalEccErrors)(h, NVML_ECC_UNCORRECTED, NVML_ECC_VOLATILE,
							&c) == NVML_RET_SUCCESS)
			s.ecc_uncorrected = c;
	}
	if (n->f.nvmlDeviceGetTotalEnergyConsumption)
		s.energy_mj = get_ull(NVC(n, nvmlDeviceGetTotalEnergyConsumption), h, &worst);
	if (n->f.nvmlDeviceGetCurrentClocksThrottleReasons)
		s.clock_reasons =
			get_ull(NVC(n, nvmlDeviceGetCurrentClocksThrottleReasons), h, &worst);
	nvml_gpm_sample(n, gpu, h, &s, &worst);
	nvml_sample_counters(n, gpu, h, &s, &worst);
	sample_procs(n, h, &s, &worst);
	/* A lost GPU or a changed driver is an error; a missing metric is only NaN. */
	if (worst == NVML_RET_GPU_IS_LOST || nvml_driver_gone(worst))
		return nvml_to_errno(worst);
	*ret = s;
	return 0;
}
