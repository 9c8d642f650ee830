/* NVML telemetry, for metrics: one sample of a GPU, what it lacks left NaN / UINT64_MAX. */

#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "nvml-int.h"

static double get_uint(struct nvml_backend *n, nvml_fn_nvmlDeviceGetPowerUsage *fn,
		       struct nvml_device *h, double scale, enum nvml_return *worst)
{
	unsigned v;
	enum nvml_return r;

	if (!fn)
		return NAN;
	r = fn(h, &v);
	if (r == NVML_RET_SUCCESS)
		return v * scale;
	if (r != NVML_RET_NOT_SUPPORTED && *worst == NVML_RET_SUCCESS)
		*worst = r;
	return NAN;
}

int nvml_sample(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret)
{
	struct nvml_backend *n = to_nvml(b);
	struct gpu_sample s = {
		.temperature_c = NAN,
		.mem_used = UINT64_MAX,
		.mem_total = UINT64_MAX,
		.util_gpu = NAN,
		.util_mem = NAN,
		.sm_clock_mhz = NAN,
		.mem_clock_mhz = NAN,
		.temp_slowdown_c = NAN,
		.temp_shutdown_c = NAN,
		.ecc_corrected = UINT64_MAX,
		.ecc_uncorrected = UINT64_MAX,
	};
	enum nvml_return worst = NVML_RET_SUCCESS, r;
	struct nvml_device *h = nvml_dev_handle(n, gpu);
	struct nvml_utilization u;
	struct nvml_memory mem;
	unsigned v;

	if (gpu >= n->n_devs)
		return -EINVAL;
	if (!h)
		return -ENODEV;
	r = NVC(n, nvmlDeviceGetMemoryInfo)(h, &mem);
	if (r == NVML_RET_SUCCESS) {
		s.mem_used = mem.used;
		s.mem_total = mem.total;
	} else if (r != NVML_RET_NOT_SUPPORTED) {
		worst = r;
	}
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
	s.power_w = get_uint(n, n->f.nvmlDeviceGetPowerUsage, h, 1e-3, &worst);
	s.power_limit_w = get_uint(n, n->f.nvmlDeviceGetEnforcedPowerLimit, h, 1e-3, &worst);
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
	/* A lost GPU or a changed driver is an error; a missing metric is only NaN. */
	if (worst == NVML_RET_GPU_IS_LOST || nvml_driver_gone(worst))
		return nvml_to_errno(worst);
	*ret = s;
	return 0;
}
