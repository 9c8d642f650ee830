/* NVML telemetry, for metrics: one sample of a GPU, what it lacks left NaN / UINT64_MAX. */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

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
	if (r != NVML_RET_NOT_SUPPORTED && *worst == NVML_RET_SUCCESS)
		*worst = r;
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
	if (r != NVML_RET_NOT_SUPPORTED && *worst == NVML_RET_SUCCESS)
		*worst = r;
	return UINT64_MAX;
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
	} else if (r != NVML_RET_NOT_SUPPORTED) {
		*worst = r;
	}
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
	} else if (r != NVML_RET_NOT_SUPPORTED && r != NVML_RET_INSUFFICIENT_SIZE &&
		   *worst == NVML_RET_SUCCESS) {
		*worst = r;
	}
	if (infos != stack)
		free(infos);
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
	nvml_sample_counters(n, h, &s, &worst);
	sample_procs(n, h, &s, &worst);
	/* A lost GPU or a changed driver is an error; a missing metric is only NaN. */
	if (worst == NVML_RET_GPU_IS_LOST || nvml_driver_gone(worst))
		return nvml_to_errno(worst);
	*ret = s;
	return 0;
}
