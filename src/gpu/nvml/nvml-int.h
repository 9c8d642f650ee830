#pragma once

/*
 * The NVML backend's private header, shared by its three files: nvml-load.c (dlopen under
 * the driver root, symbols, init, the version-mismatch messages), gpu-nvml.c (the backend
 * operations: discover, distance, probe, events, reinit, close) and nvml-sample.c
 * (telemetry; DCGM-exporter's other counters in nvml-fields.c, its GPM part, the profiling
 * ratios, in nvml-gpm.c). nvml-api.h holds the NVML declarations themselves. The files call one
 * way (scripts/check-layers): gpu-nvml.c -> nvml-sample.c -> nvml-fields.c, nvml-gpm.c ->
 * nvml-load.c.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gpu-backend.h"
#include "gpu-nvml.h"
#include "nvml-api.h"

#define NVML_LIB "libnvidia-ml.so.1"

#define NVML_SYM_FIELD(sym, r, params) nvml_fn_##sym *sym; /* NOLINT(bugprone-macro-parentheses) */
struct nvml_syms {
	NVML_API_FUNCTIONS(NVML_SYM_FIELD, NVML_OWN_TYPE)
};

#define NVML_SYM_COUNT (sizeof(struct nvml_syms) / sizeof(void (*)(void)))

/* The health-relevant events (nvidia-plugin.md §3: NVIDIA registers 0xb). */
#define NVML_HEALTH_EVENTS \
	(NVML_EVENT_XID_CRITICAL | NVML_EVENT_DOUBLE_BIT_ECC | NVML_EVENT_SINGLE_BIT_ECC)

struct nvml_dev {
	struct nvml_device *handle; /* NULL: not found again after a re-init */
	char uuid[GPU_UUID_MAX];
	unsigned long long event_mask; /* supported & NVML_HEALTH_EVENTS; 0 without XID events */
	bool registered;
	/*
	 * GPM (nvml-gpm.c): whether the GPU has it (0 not asked yet, 1 yes, -1 no), and the
	 * previous sample the next one's ratios are computed against (NULL: none yet). Owned
	 * here; freed by nvml_gpm_release() before the table is replaced, re-initialised or
	 * closed. Exchanged atomically: a sample left hung in the library may finish beside the
	 * next one (gpu-backend.h).
	 */
	_Atomic int gpm;
	_Atomic(struct nvml_gpm_sample *) gpm_prev;
	/*
	 * NVLink (nvml-fields.c): each link's raw TX and RX counters as last answered (link l at
	 * 2l and 2l + 1), bit i of nvlink_known set once entry i has answered. Under devs_mu;
	 * forgotten with the table (a new discovery) and by a re-init (a reloaded driver's
	 * counters start again).
	 */
	unsigned long long nvlink_last[2 * NVML_NVLINK_MAX_LINKS_COUNT];
	unsigned long long nvlink_known;
};

/*
 * Calls n->f.FN after noting its name for a hang report (gpu-backend.h, struct
 * gpu_backend.call). Every library call goes through it but the event thread's
 * nvmlEventSetWait_v2, which blocks by design (ops->event_wait_call names it). A call through
 * another pointer is named with NVC_AS().
 */
#define NVC(n, fn) (gpu_backend_note_call(&(n)->base, #fn), (n)->f.fn)
/* The same for @ptr, a function pointer that stands for the library function @name. */
#define NVC_AS(n, ptr, name) (gpu_backend_note_call(&(n)->base, (name)), (ptr))

struct nvml_backend {
	struct gpu_backend base;
	/*
	 * Guards devs/n_devs against the event thread: discover swaps the table while a wait
	 * may be in progress, and event_wait maps a handle to its GPU under it.
	 */
	pthread_mutex_t devs_mu;
	void *dl;
	char *lib_path; /* the file loaded */
	char *proc_root;
	char *sysfs_root;
	struct nvml_syms f;
	nvml_fn_nvmlDeviceGetPciInfo_v3 *get_pci_info; /* _v3, else _v2 */
	bool initialised;
	struct nvml_dev *devs;
	unsigned n_devs;
	struct nvml_event_set *set;
};

/* snprintf("%s"): @src cut to fit @size, always terminated. */
static inline void nvml_copy_str(char *dst, size_t size, const char *src)
{
	(void)snprintf(dst, size, "%s", src);
}

/*
 * A sample's failure record: @r goes to *@worst when it is worse than NOT_SUPPORTED (what a GPU
 * without the feature answers) and *@worst still holds SUCCESS, so the first failure is the
 * one nvml_sample() judges the GPU by.
 */
static inline void nvml_note_failure(enum nvml_return r, enum nvml_return *worst)
{
	if (r != NVML_RET_SUCCESS && r != NVML_RET_NOT_SUPPORTED && *worst == NVML_RET_SUCCESS)
		*worst = r;
}

static inline struct nvml_backend *to_nvml(struct gpu_backend *b)
{
	return (struct nvml_backend *)b;
}

/* The one translation of NVML return codes into -errno. */
int nvml_to_errno(enum nvml_return r);

/* nvmlErrorString's text for @r, or "unknown NVML error". */
const char *nvml_str(struct nvml_backend *n, enum nvml_return r);

/* True when @r says the library no longer matches the driver (re-initialise). */
bool nvml_driver_gone(enum nvml_return r);

/*
 * A failed call: sets *@reterr (if wanted) to a heap message naming @call and NVML's text
 * (the driver/library mismatch message for LIB_RM_VERSION_MISMATCH). Returns the -errno.
 */
int nvml_call_error(struct nvml_backend *n, char **reterr, const char *call, enum nvml_return ret);

/*
 * Loads the library (@o->lib_path, else the loader's search path, then the driver's
 * directories under @o->driver_root) and resolves its symbols. Returns 0, -ENOENT (not
 * found), -ENOSYS (a required symbol missing) or -ENOMEM; @reterr gets a heap message.
 */
int nvml_load(struct nvml_backend *n, const struct gpu_backend_opts *o, char **reterr);

/* nvmlInit_v2. Returns 0, or -errno with a heap message in @reterr that says what to do. */
int nvml_init(struct nvml_backend *n, char **reterr);

/*
 * The discovered GPU's handle, NULL when out of range or not found again after a re-init.
 * Inline: nvml-sample.c needs it, and a call into gpu-nvml.c (which calls nvml_sample()) would
 * make the two files call each other.
 */
static inline struct nvml_device *nvml_dev_handle(const struct nvml_backend *n, unsigned gpu)
{
	return gpu < n->n_devs ? n->devs[gpu].handle : NULL;
}

/* ops->sample (nvml-sample.c). */
int nvml_sample(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret);

/*
 * The profiling ratios (GR engine, tensor, DRAM) and the PCIe TX/RX rates of GPU @gpu (handle
 * @h) into @s (nvml-gpm.c): from GPM, between the GPU's previous GPM sample and one taken now
 * (absent on the first); where the GPU or driver lacks GPM, the PCIe rates from
 * nvmlDeviceGetPcieThroughput. What the GPU cannot answer stays NaN. A failure worse than
 * NOT_SUPPORTED is recorded in *@worst (if it holds SUCCESS). From the sampling worker, once
 * per GPU per sample.
 */
void nvml_gpm_sample(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
		     struct gpu_sample *s, enum nvml_return *worst);

/*
 * Frees the GPM samples @devs (@n_devs entries) hold and forgets whether each has GPM: before
 * the device table is replaced, the library shut down or the backend closed. No sample may be
 * in progress on them (the monitor's rule: gpu-backend.h).
 */
void nvml_gpm_release(struct nvml_backend *n, struct nvml_dev *devs, unsigned n_devs);

/*
 * DCGM-exporter's other default counters of GPU @gpu (handle @h) into @s (nvml-fields.c):
 * memory temperature, NVLink bandwidth, PCIe replays, encoder/decoder utilisation, remapped
 * rows; what the GPU or the driver lacks stays NaN / UINT64_MAX. A failure worse than
 * NOT_SUPPORTED goes to *@worst if it is still SUCCESS. On the sampling thread, as
 * nvml_sample().
 */
void nvml_sample_counters(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
			  struct gpu_sample *s, enum nvml_return *worst);

/*
 * What a container needs for an NVML GPU: the control nodes /dev/nvidiactl, nvidia-uvm,
 * nvidia-uvm-tools and nvidia-modeset, and the driver files CDI mounts. Discovery points
 * each gpu_device and the gpu_info at it.
 */
extern const struct gpu_container nvml_container;
