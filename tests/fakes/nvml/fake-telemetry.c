/*
 * The fake NVML's telemetry: temperatures and their thresholds, power, utilisation, clocks,
 * ECC mode and counters, running processes and their SM shares, energy and clock-event
 * reasons, all as the fixture gives them. Every function holds fake.mu from fake_enter_dev()
 * to fake_leave(), as fake-api.c's do.
 */

#include <time.h>

#include "fake.h"

/* The prototypes nvml-api.h gives, so that the definitions below are checked against them. */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

#define ID(sym) FAKE_FN_##sym

enum nvml_return nvmlDeviceGetTemperature(struct nvml_device *d,
					  enum nvml_temperature_sensor sensor, unsigned *temp)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetTemperature), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!temp || sensor != NVML_TEMP_GPU)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*temp = g->temp;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetTemperatureThreshold(struct nvml_device *d,
						   enum nvml_temperature_threshold type,
						   unsigned *temp)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetTemperatureThreshold), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!temp)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	switch (type) {
	case NVML_TEMP_THRESHOLD_SHUTDOWN:
		*temp = g->temp_shutdown;
		break;
	case NVML_TEMP_THRESHOLD_SLOWDOWN:
		*temp = g->temp_slowdown;
		break;
	case NVML_TEMP_THRESHOLD_GPU_MAX:
		*temp = g->temp_gpu_max;
		break;
	default:
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	}
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetPowerUsage(struct nvml_device *d, unsigned *power)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetPowerUsage), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!power)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*power = g->power_mw;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetEnforcedPowerLimit(struct nvml_device *d, unsigned *limit)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetEnforcedPowerLimit), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!limit)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*limit = g->power_limit_mw;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetUtilizationRates(struct nvml_device *d, struct nvml_utilization *u)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetUtilizationRates), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!u)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	u->gpu = g->util_gpu;
	u->memory = g->util_mem;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetClockInfo(struct nvml_device *d, enum nvml_clock_type type,
					unsigned *clock)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetClockInfo), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!clock)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	switch (type) {
	case NVML_CLK_GRAPHICS:
		*clock = g->clock_graphics;
		break;
	case NVML_CLK_SM:
		*clock = g->clock_sm;
		break;
	case NVML_CLK_MEM:
		*clock = g->clock_mem;
		break;
	case NVML_CLK_VIDEO:
		*clock = g->clock_video;
		break;
	default:
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	}
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetEccMode(struct nvml_device *d, enum nvml_enable_state *current,
				      enum nvml_enable_state *pending)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetEccMode), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!current || !pending)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*current = *pending = g->ecc ? NVML_STATE_ENABLED : NVML_STATE_DISABLED;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetTotalEccErrors(struct nvml_device *d,
					     enum nvml_memory_error_type type,
					     enum nvml_ecc_counter_type counter,
					     unsigned long long *count)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetTotalEccErrors), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!count || (counter != NVML_ECC_VOLATILE && counter != NVML_ECC_AGGREGATE))
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (!g->ecc)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	if (type == NVML_ECC_CORRECTED)
		*count = g->ecc_corrected;
	else if (type == NVML_ECC_UNCORRECTED)
		*count = g->ecc_uncorrected;
	else
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetComputeRunningProcesses_v3(struct nvml_device *d, unsigned *count,
							 struct nvml_process_info *infos)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetComputeRunningProcesses_v3), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!count)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (*count < g->n_procs || (!infos && g->n_procs)) {
		*count = g->n_procs;
		return fake_leave(NVML_RET_INSUFFICIENT_SIZE);
	}
	for (unsigned i = 0; i < g->n_procs; i++)
		infos[i] = (struct nvml_process_info){
			.pid = g->procs[i].pid,
			.used_gpu_memory = g->procs[i].used,
			.gpu_instance_id = 0xFFFFFFFFU,
			.compute_instance_id = 0xFFFFFFFFU,
		};
	*count = g->n_procs;
	return fake_leave(NVML_RET_SUCCESS);
}

/*
 * As NVML: NULL @samples asks for the count (INSUFFICIENT_SIZE); NOT_FOUND when no sample is
 * newer than @last_seen. Each listed process has one sample, stamped now (wall clock, µs).
 */
enum nvml_return nvmlDeviceGetProcessUtilization(struct nvml_device *d,
						 struct nvml_process_utilization_sample *samples,
						 unsigned *count, unsigned long long last_seen)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetProcessUtilization), d, &g);
	struct timespec ts;
	unsigned long long now;

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!count)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (!g->proc_util)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	(void)clock_gettime(CLOCK_REALTIME, &ts);
	now = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
	if (!g->n_proc_utils || last_seen >= now) {
		*count = 0;
		return fake_leave(NVML_RET_NOT_FOUND);
	}
	if (!samples || *count < g->n_proc_utils) {
		*count = g->n_proc_utils;
		return fake_leave(NVML_RET_INSUFFICIENT_SIZE);
	}
	for (unsigned i = 0; i < g->n_proc_utils; i++)
		samples[i] = (struct nvml_process_utilization_sample){
			.pid = g->proc_utils[i].pid,
			.time_stamp = now,
			.sm_util = g->proc_utils[i].sm_util,
		};
	*count = g->n_proc_utils;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetTotalEnergyConsumption(struct nvml_device *d, unsigned long long *mj)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetTotalEnergyConsumption), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!mj)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*mj = g->energy_mj;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetCurrentClocksThrottleReasons(struct nvml_device *d,
							   unsigned long long *reasons)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetCurrentClocksThrottleReasons), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!reasons)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*reasons = g->clock_reasons;
	return fake_leave(NVML_RET_SUCCESS);
}
