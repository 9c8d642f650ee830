/* The device model's helpers. The health monitor that owns a backend is in gpu-monitor.c. */

#include "gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gpu_info_release(struct gpu_info *info)
{
	if (!info)
		return;
	for (unsigned i = 0; i < info->n_skipped; i++)
		free(info->skipped ? info->skipped[i] : NULL);
	free(info->skipped);
	free(info->devices);
	free(info->mig_devices);
	memset(info, 0, sizeof(*info));
}

bool gpu_cdi_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || i == n - 1 || !strchr("_.:-", c)))
			return false;
	}
	return true;
}

bool gpu_device_id_valid(const char *id)
{
	return id && strlen(id) < GPU_UUID_MAX && !strstr(id, "::") && gpu_cdi_name_valid(id);
}

void gpu_sample_init(struct gpu_sample *s)
{
	*s = (struct gpu_sample){
		.temperature_c = NAN,
		.power_w = NAN,
		.mem_used = UINT64_MAX,
		.mem_total = UINT64_MAX,
		.mem_free = UINT64_MAX,
		.util_gpu = NAN,
		.util_mem = NAN,
		.sm_clock_mhz = NAN,
		.mem_clock_mhz = NAN,
		.sm_clock_min_mhz = NAN,
		.sm_clock_max_mhz = NAN,
		.power_limit_w = NAN,
		.temp_slowdown_c = NAN,
		.temp_shutdown_c = NAN,
		.ecc_corrected = UINT64_MAX,
		.ecc_uncorrected = UINT64_MAX,
		.energy_mj = UINT64_MAX,
		.clock_reasons = UINT64_MAX,
		.mem_temp_c = NAN,
		.pcie_replay = UINT64_MAX,
		.enc_util = NAN,
		.dec_util = NAN,
		.mem_reserved = UINT64_MAX,
		.remap_corr = UINT64_MAX,
		.remap_unc = UINT64_MAX,
		.remap_failure = NAN,
		.nvlink_bw_total = UINT64_MAX,
		.prof_gr_active = NAN,
		.prof_tensor_active = NAN,
		.prof_dram_active = NAN,
		.pcie_tx_bps = NAN,
		.pcie_rx_bps = NAN,
		.board_power_w = NAN,
		.n_procs = -1,
	};
}
