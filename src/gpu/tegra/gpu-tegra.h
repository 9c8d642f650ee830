#pragma once

/*
 * The Tegra (Jetson) backend: the board's integrated GPU found and watched through the host's
 * files (device tree, soc0, nv_tegra_release, devfreq, thermal zones, INA3221 rails,
 * /proc/meminfo), and, where NVML loads beside it (Orin on JetPack 6+, Thor, a discrete card
 * on a Thor board), NVML's answers for what it does answer. Everything is read below
 * gpu_backend_opts.host_root. See docs/jetson.md for the facts behind each file.
 */

#include "gpu-backend.h"
#include "gpu.h"

/*
 * Reads the board under @host_root ("/" when NULL) into @ret (zeroed first). Returns 1 when
 * the host has Tegra files (etc/nv_tegra_release, or sys/devices/soc0/family starting with
 * "tegra", or a device-tree compatible "nvidia,tegra*"), 0 when it has none, -ENOMEM. A file
 * that is missing or holds garbage leaves its fields empty (debug log), never an error.
 * Any thread; used by the backend, by `doctor` and by `discover`.
 */
int tegra_board_read(const char *host_root, struct gpu_board *ret);

/*
 * Opens the Tegra backend. @nvml is an open NVML backend or NULL (none loaded): on success the
 * Tegra backend owns it (closes it with its own close) and passes its discrete GPUs through,
 * merging an integrated one (name "(nvgpu)" or "NVIDIA Thor") into the iGPU it serves.
 * Returns 0, -ENODEV when this is no Tegra board by NVIDIA's rule (then @nvml is still the
 * caller's), or another -errno; @reterr gets a heap message.
 */
int tegra_open(const struct gpu_backend_opts *o, struct gpu_backend *nvml, struct gpu_backend **ret,
	       char **reterr);
