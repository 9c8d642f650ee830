/*
 * Loading NVML: libnvidia-ml.so.1 opened with dlopen (never linked), looked for on the
 * loader's path and then under the driver root, every function looked up by its versioned
 * name with dlsym; nvmlInit_v2; and the messages that say what to fix, the driver/library
 * version mismatch above all. NVML return codes turn into -errno here and nowhere else.
 */

#define LOG_MODULE "gpu-nvml"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-read.h"
#include "nvml-int.h"
#include "util.h"

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#endif

/* Where drivers put the library under a driver root, most specific first. */
static const char *const lib_dirs[] = {
#ifdef MULTIARCH
	"usr/lib/" MULTIARCH,
#endif
#ifdef __aarch64__
	"usr/lib/aarch64-linux-gnu/nvidia", /* Jetson (JetPack 6) */
#endif
	"usr/lib64",
#ifdef MULTIARCH
	"lib/" MULTIARCH,
#endif
	"lib64",
	"usr/lib",
};

/* Which functions edgegpu cannot do without; the others are optional (NULL when absent). */
static const struct nvml_sym {
	const char *name;
	size_t offset;
	bool required;
} nvml_sym_table[] = {
#define SYM(sym, req)                                      \
	{                                                  \
#sym, offsetof(struct nvml_syms, sym), req \
	}
	SYM(nvmlInit_v2, true),
	SYM(nvmlShutdown, true),
	SYM(nvmlErrorString, true),
	SYM(nvmlSystemGetDriverVersion, true),
	SYM(nvmlSystemGetNVMLVersion, false),
	SYM(nvmlSystemGetCudaDriverVersion, false),
	SYM(nvmlSystemGetCudaDriverVersion_v2, false),
	SYM(nvmlDeviceGetCount_v2, true),
	SYM(nvmlDeviceGetHandleByIndex_v2, true),
	SYM(nvmlDeviceGetHandleByUUID, true),
	SYM(nvmlDeviceGetUUID, true),
	SYM(nvmlDeviceGetName, true),
	SYM(nvmlDeviceGetMinorNumber, true),
	SYM(nvmlDeviceGetPciInfo_v3, false), /* one of _v3 and _v2 is required */
	SYM(nvmlDeviceGetPciInfo_v2, false),
	SYM(nvmlDeviceGetMemoryInfo, true),
	SYM(nvmlDeviceGetCudaComputeCapability, true),
	SYM(nvmlDeviceGetArchitecture, false),
	SYM(nvmlDeviceGetMigMode, false),
	SYM(nvmlDeviceGetTopologyCommonAncestor, false),
	SYM(nvmlDeviceGetSupportedEventTypes, true),
	SYM(nvmlDeviceRegisterEvents, true),
	SYM(nvmlEventSetCreate, true),
	SYM(nvmlEventSetWait_v2, true),
	SYM(nvmlEventSetFree, true),
	SYM(nvmlDeviceGetTemperature, false),
	SYM(nvmlDeviceGetTemperatureThreshold, false),
	SYM(nvmlDeviceGetPowerUsage, false),
	SYM(nvmlDeviceGetEnforcedPowerLimit, false),
	SYM(nvmlDeviceGetUtilizationRates, false),
	SYM(nvmlDeviceGetClockInfo, false),
	SYM(nvmlDeviceGetEccMode, false),
	SYM(nvmlDeviceGetTotalEccErrors, false),
	SYM(nvmlDeviceGetComputeRunningProcesses_v3, false),
	SYM(nvmlDeviceGetTotalEnergyConsumption, false),
	/* Renamed ...ClocksEventReasons in 12.2, the old name still exported by NVML 13. */
	SYM(nvmlDeviceGetCurrentClocksThrottleReasons, false),
	SYM(nvmlDeviceGetProcessUtilization, false),
	/* CUDA 13.4 (NVML 615): per-cgroup memory limits, the gpumem "driver" enforcement. */
	SYM(nvmlDeviceGetMemoryLimits_v1, false),
	SYM(nvmlDeviceSetMemoryLimits_v1, false),
	/* NVML 12.535: the PCI class (GFD's nvidia.com/gpu.mode); sysfs without it. */
	SYM(nvmlDeviceGetPciInfoExt, false),
	/* PCIe KB/s over 20 ms: the PCIe rates where GPM is not there (nvml-gpm.c) */
	SYM(nvmlDeviceGetPcieThroughput, false),
	/* GPM (R520+ drivers; answers only on Hopper and later): the profiling ratios */
	SYM(nvmlGpmQueryDeviceSupport, false),
	SYM(nvmlGpmSampleAlloc, false),
	SYM(nvmlGpmSampleGet, false),
	SYM(nvmlGpmSampleFree, false),
	SYM(nvmlGpmMetricsGet, false),
	/* DCGM-exporter's other default counters (nvml-fields.c), each optional. */
	SYM(nvmlDeviceGetMemoryInfo_v2, false),
	SYM(nvmlDeviceGetFieldValues, false),
	SYM(nvmlDeviceGetPcieReplayCounter, false),
	SYM(nvmlDeviceGetEncoderUtilization, false),
	SYM(nvmlDeviceGetDecoderUtilization, false),
	SYM(nvmlDeviceGetRemappedRows, false),
#undef SYM
};
_Static_assert(ELEMENTSOF(nvml_sym_table) == NVML_SYM_COUNT,
	       "every function of NVML_API_FUNCTIONS needs an entry in nvml_sym_table");

/* The one translation of NVML return codes. */
int nvml_to_errno(enum nvml_return r)
{
	switch (r) {
	case NVML_RET_SUCCESS:
		return 0;
	case NVML_RET_UNINITIALIZED:
	case NVML_RET_LIB_RM_VERSION_MISMATCH:
		return -EXDEV; /* library state no longer matches the driver: re-initialise */
	case NVML_RET_INVALID_ARGUMENT:
		return -EINVAL;
	case NVML_RET_NOT_SUPPORTED:
	case NVML_RET_VGPU_ECC_NOT_SUPPORTED:
	case NVML_RET_FREQ_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case NVML_RET_NO_PERMISSION:
		return -EACCES;
	case NVML_RET_ALREADY_INITIALIZED:
		return -EALREADY;
	case NVML_RET_NOT_FOUND:
	case NVML_RET_LIBRARY_NOT_FOUND:
		return -ENOENT;
	case NVML_RET_INSUFFICIENT_SIZE:
		return -ENOBUFS;
	case NVML_RET_DRIVER_NOT_LOADED:
		return -ENXIO;
	case NVML_RET_TIMEOUT:
		return -ETIMEDOUT;
	case NVML_RET_FUNCTION_NOT_FOUND:
		return -ENOSYS;
	case NVML_RET_GPU_IS_LOST:
		return -ENODEV;
	case NVML_RET_OPERATING_SYSTEM:
		return -EPERM;
	case NVML_RET_IN_USE:
		return -EBUSY;
	case NVML_RET_MEMORY:
		return -ENOMEM;
	case NVML_RET_NO_DATA:
		return -ENODATA;
	case NVML_RET_INSUFFICIENT_RESOURCES:
		return -ENOSPC;
	case NVML_RET_ARGUMENT_VERSION_MISMATCH:
		return -EPROTO;
	case NVML_RET_INSUFFICIENT_POWER:
	case NVML_RET_IRQ_ISSUE:
	case NVML_RET_CORRUPTED_INFOROM:
	case NVML_RET_RESET_REQUIRED:
	case NVML_RET_UNKNOWN:
	default:
		return -EIO;
	}
}

const char *nvml_str(struct nvml_backend *n, enum nvml_return r)
{
	const char *s = n->f.nvmlErrorString ? NVC(n, nvmlErrorString)(r) : NULL;

	return s ? s : "unknown NVML error";
}
bool nvml_driver_gone(enum nvml_return r)
{
	return r == NVML_RET_LIB_RM_VERSION_MISMATCH || r == NVML_RET_UNINITIALIZED;
}

/* --- versions, for the mismatch message --- */

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ..." -> "550.54.15" */
static void kernel_module_version(struct nvml_backend *n, char *out, size_t size)
{
	char *text = NULL, *save = NULL;

	nvml_copy_str(out, size, "unknown");
	/* Resolved inside the proc root: no link there leads out of it (the doctor gives another). */
	if (root_read_file(n->proc_root, "driver/nvidia/version", 4096, &text, NULL) < 0)
		goto out;
	text[strcspn(text, "\n")] = 0;
	for (char *t = strtok_r(text, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		size_t digits = strspn(t, "0123456789."), len = strlen(t);

		if (len > 2 && digits == len && strchr(t, '.') && t[0] != '.') {
			nvml_copy_str(out, size, t);
			break;
		}
	}
out:
	free(text);
}

/* The driver version a library file is named after: libnvidia-ml.so.550.54.15. */
static void lib_file_version(struct nvml_backend *n, char *out, size_t size)
{
	char *real = n->lib_path ? realpath(n->lib_path, NULL) : NULL;
	const char *base, *v;

	out[0] = 0;
	if (!real)
		return;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	v = strncmp(base, "libnvidia-ml.so.", 16) == 0 ? base + 16 : NULL;
	if (v && strchr(v, '.') && strspn(v, "0123456789.") == strlen(v))
		nvml_copy_str(out, size, v);
	free(real);
}

static int mismatch_error(struct nvml_backend *n, char **reterr, const char *call,
			  enum nvml_return ret)
{
	char nvml[NVML_BUF_NVML_VERSION] = "", file[64], drv[NVML_BUF_DRIVER_VERSION];
	char lib[200];

	if (!reterr)
		return -EXDEV;
	if (n->f.nvmlSystemGetNVMLVersion &&
	    NVC(n, nvmlSystemGetNVMLVersion)(nvml, sizeof(nvml)) != NVML_RET_SUCCESS)
		nvml[0] = 0;
	lib_file_version(n, file, sizeof(file));
	if (file[0] && nvml[0])
		(void)snprintf(lib, sizeof(lib), "%s, NVML %s", file, nvml);
	else if (file[0] || nvml[0])
		(void)snprintf(lib, sizeof(lib), "%s%s", nvml[0] ? "NVML " : "",
			       file[0] ? file : nvml);
	else
		nvml_copy_str(lib, sizeof(lib), "version unknown");
	kernel_module_version(n, drv, sizeof(drv));
	return set_error(
		reterr, -EXDEV,
		"%s: NVIDIA driver library and kernel module versions differ (%s): library %s "
		"at %s, kernel module %s. This follows a driver upgrade without a reboot: reboot "
		"the node, or reload the NVIDIA kernel modules (rmmod nvidia_uvm nvidia_drm "
		"nvidia_modeset nvidia; modprobe nvidia); in a container, mount the driver "
		"libraries of the driver the host is running",
		call, nvml_str(n, ret), lib, n->lib_path ? n->lib_path : NVML_LIB, drv);
}

/* A failed call: the message names it and NVML's text. */
int nvml_call_error(struct nvml_backend *n, char **reterr, const char *call, enum nvml_return ret)
{
	if (ret == NVML_RET_LIB_RM_VERSION_MISMATCH)
		return mismatch_error(n, reterr, call, ret);
	return set_error(reterr, nvml_to_errno(ret), "%s failed: %s (NVML error %d)", call,
			 nvml_str(n, ret), (int)ret);
}

/* --- loading --- */

/* Returns 1 when loaded, 0 when not (@tried says what was tried), or -ENOMEM. */
static int nvml_try_open(struct nvml_backend *n, const char *path, struct buf *tried)
{
	bool search = !strchr(path, '/');
	struct link_map *map = NULL;
	void *dl;
	int r;

	/* A file that is not there needs no dlerror() to say so (in a list of paths, at least). */
	if (!search && access(path, F_OK) < 0) {
		r = buf_printf(tried, "%s%s%s", tried->len ? ", " : "", path,
			       tried->len ? "" : " (no such file)");
		return r < 0 ? r : 0;
	}
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();

		if (search)
			r = buf_printf(tried,
				       "%sthe loader's search path (ld.so.cache, LD_LIBRARY_PATH)",
				       tried->len ? ", " : "");
		else
			r = buf_printf(tried, "%s%s (%s)", tried->len ? ", " : "", path,
				       e ? e : "cannot load");
		return r < 0 ? r : 0;
	}
	n->dl = dl;
	if (dlinfo(dl, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
		n->lib_path = strdup(map->l_name);
	else
		n->lib_path = strdup(path);
	if (!n->lib_path)
		return -ENOMEM;
	return 1;
}

static int nvml_find(struct nvml_backend *n, const struct gpu_backend_opts *o, char **reterr)
{
	const char *root = o->driver_root && *o->driver_root ? o->driver_root : "/";
	struct buf tried = { 0 };
	int r;

	if (o->lib_path && *o->lib_path) {
		r = nvml_try_open(n, o->lib_path, &tried);
		if (r == 0)
			r = set_error(
				reterr, -ENOENT,
				"cannot load NVML from %s: point --nvml-lib (NVML_LIB) at the "
				"driver's %s, or leave it unset to search the loader path and "
				"--driver-root",
				(char *)tried.data, NVML_LIB);
		goto out;
	}
	r = nvml_try_open(n, NVML_LIB, &tried);
	for (size_t i = 0; r == 0 && i < ELEMENTSOF(lib_dirs); i++) {
		char *dir = path_join(root, lib_dirs[i]),
		     *path = dir ? path_join(dir, NVML_LIB) : NULL;

		r = path ? nvml_try_open(n, path, &tried) : -ENOMEM;
		free(path);
		free(dir);
	}
	if (r == 0)
		r = set_error(
			reterr, -ENOENT,
			"NVML library %s not found; tried %s. Install the NVIDIA driver on this "
			"node, or point --nvml-lib (NVML_LIB) at %s; in a container, run the pod "
			"with the NVIDIA container runtime (runtimeClassName: nvidia), or mount the "
			"host's driver root and point --container-driver-root (CONTAINER_DRIVER_ROOT) "
			"at it",
			NVML_LIB, (char *)tried.data, NVML_LIB);
out:
	buf_release(&tried);
	return r < 0 ? r : 0;
}

static int nvml_resolve(struct nvml_backend *n, char **reterr)
{
	for (size_t i = 0; i < ELEMENTSOF(nvml_sym_table); i++) {
		const struct nvml_sym *s = &nvml_sym_table[i];
		void *p;

		(void)dlerror();
		p = dlsym(n->dl, s->name);
		if (!p && s->required)
			return set_error(
				reterr, -ENOSYS,
				"%s at %s lacks %s, which edgegpu needs: the library is older "
				"than edgegpu supports or is not NVIDIA's NVML; install a current "
				"NVIDIA driver, whose libraries match its kernel module",
				NVML_LIB, n->lib_path, s->name);
		memcpy((char *)&n->f + s->offset, &p, sizeof(p));
	}
	n->get_pci_info = n->f.nvmlDeviceGetPciInfo_v3 ? n->f.nvmlDeviceGetPciInfo_v3 :
							 n->f.nvmlDeviceGetPciInfo_v2;
	if (!n->get_pci_info)
		return set_error(
			reterr, -ENOSYS,
			"%s at %s lacks nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetPciInfo_v2, "
			"which edgegpu needs: install a current NVIDIA driver",
			NVML_LIB, n->lib_path);
	return 0;
}

int nvml_init(struct nvml_backend *n, char **reterr)
{
	enum nvml_return ret;

	assert(n->f.nvmlInit_v2); /* required: nvml_resolve() makes sure */
	ret = NVC(n, nvmlInit_v2)();

	switch (ret) {
	case NVML_RET_SUCCESS:
		n->initialised = true;
		return 0;
	case NVML_RET_LIB_RM_VERSION_MISMATCH:
		return mismatch_error(n, reterr, "nvmlInit_v2", ret);
	case NVML_RET_DRIVER_NOT_LOADED:
		return set_error(
			reterr, -ENXIO,
			"nvmlInit_v2 failed: %s: the NVIDIA kernel module is not loaded; load "
			"it (modprobe nvidia) or install the driver; in a container, run the pod "
			"with the NVIDIA container runtime so /dev/nvidiactl is present",
			nvml_str(n, ret));
	case NVML_RET_NO_PERMISSION:
		return set_error(
			reterr, -EACCES,
			"nvmlInit_v2 failed: %s: this process may not open /dev/nvidiactl and "
			"/dev/nvidia*; run it as root or with access to those devices",
			nvml_str(n, ret));
	default:
		return nvml_call_error(n, reterr, "nvmlInit_v2", ret);
	}
}

int nvml_load(struct nvml_backend *n, const struct gpu_backend_opts *o, char **reterr)
{
	int r = nvml_find(n, o, reterr);

	return r < 0 ? r : nvml_resolve(n, reterr);
}
