/*
 * The NVML backend: libnvidia-ml.so.1 opened with dlopen (never linked), every function
 * looked up by its versioned name with dlsym, NVML return codes turned into -errno here and
 * nowhere else, with nvmlErrorString's text in the messages handed back. No logging above
 * debug: the caller (and the monitor in gpu.c) logs.
 */

#define LOG_MODULE "gpu-nvml"

#include <assert.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "log.h"
#include "nvml-api.h"
#include "util.h"

#define NVML_LIB "libnvidia-ml.so.1"

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

#define NVML_SYM_FIELD(sym, r, params) nvml_fn_##sym *sym; /* NOLINT(bugprone-macro-parentheses) */
struct nvml_syms {
	NVML_API_FUNCTIONS(NVML_SYM_FIELD, NVML_OWN_TYPE)
};

#define NVML_SYM_COUNT (sizeof(struct nvml_syms) / sizeof(void (*)(void)))

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
#undef SYM
};
_Static_assert(ELEMENTSOF(nvml_sym_table) == NVML_SYM_COUNT,
	       "every function of NVML_API_FUNCTIONS needs an entry in nvml_sym_table");

/* The health-relevant events (nvidia-plugin.md §3: NVIDIA registers 0xb). */
#define NVML_HEALTH_EVENTS \
	(NVML_EVENT_XID_CRITICAL | NVML_EVENT_DOUBLE_BIT_ECC | NVML_EVENT_SINGLE_BIT_ECC)

struct nvml_dev {
	struct nvml_device *handle; /* NULL: not found again after a re-init */
	char uuid[GPU_UUID_MAX];
	unsigned long long event_mask; /* supported & NVML_HEALTH_EVENTS; 0 without XID events */
	bool registered;
};

/*
 * Calls n->f.FN after noting its name for a hang report (gpu.h, struct gpu_backend.call).
 * The event thread's nvmlEventSetWait_v2 does not go through it: it blocks by design.
 */
#define NVC(n, fn) (atomic_store_explicit(&(n)->base.call, #fn, memory_order_relaxed), (n)->f.fn)

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

static struct nvml_backend *to_nvml(struct gpu_backend *b)
{
	return (struct nvml_backend *)b;
}

/* The one translation of NVML return codes. */
static int nvml_to_errno(enum nvml_return r)
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

static const char *nvml_str(struct nvml_backend *n, enum nvml_return r)
{
	const char *s = n->f.nvmlErrorString ? n->f.nvmlErrorString(r) : NULL;

	return s ? s : "unknown NVML error";
}

/* Sets *reterr (if wanted) to a heap message and returns @r. */
static int fail(char **reterr, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char **reterr, int r, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (!reterr)
		return r;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(*reterr);
	*reterr = s;
	return r;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	(void)snprintf(dst, size, "%s", src);
}

/* --- versions, for the mismatch message --- */

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ..." -> "550.54.15" */
static void kernel_module_version(struct nvml_backend *n, char *out, size_t size)
{
	char *path = path_join(n->proc_root, "driver/nvidia/version"), *text = NULL;
	char *save = NULL;

	copy_str(out, size, "unknown");
	if (!path || read_file(path, 4096, &text, NULL) < 0)
		goto out;
	text[strcspn(text, "\n")] = 0;
	for (char *t = strtok_r(text, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		size_t digits = strspn(t, "0123456789."), len = strlen(t);

		if (len > 2 && digits == len && strchr(t, '.') && t[0] != '.') {
			copy_str(out, size, t);
			break;
		}
	}
out:
	free(text);
	free(path);
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
		copy_str(out, size, v);
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
		copy_str(lib, sizeof(lib), "version unknown");
	kernel_module_version(n, drv, sizeof(drv));
	return fail(
		reterr, -EXDEV,
		"%s: NVIDIA driver library and kernel module versions differ (%s): library %s "
		"at %s, kernel module %s. This follows a driver upgrade without a reboot: reboot "
		"the node, or reload the NVIDIA kernel modules (rmmod nvidia_uvm nvidia_drm "
		"nvidia_modeset nvidia; modprobe nvidia); in a container, mount the driver "
		"libraries of the driver the host is running",
		call, nvml_str(n, ret), lib, n->lib_path ? n->lib_path : NVML_LIB, drv);
}

/* A failed call: the message names it and NVML's text. */
static int call_error(struct nvml_backend *n, char **reterr, const char *call, enum nvml_return ret)
{
	if (ret == NVML_RET_LIB_RM_VERSION_MISMATCH)
		return mismatch_error(n, reterr, call, ret);
	return fail(reterr, nvml_to_errno(ret), "%s failed: %s (NVML error %d)", call,
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

static int nvml_load(struct nvml_backend *n, const struct gpu_nvml_opts *o, char **reterr)
{
	const char *root = o->driver_root && *o->driver_root ? o->driver_root : "/";
	struct buf tried = { 0 };
	int r;

	if (o->lib_path && *o->lib_path) {
		r = nvml_try_open(n, o->lib_path, &tried);
		if (r == 0)
			r = fail(reterr, -ENOENT,
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
		r = fail(
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
			return fail(
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
		return fail(reterr, -ENOSYS,
			    "%s at %s lacks nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetPciInfo_v2, "
			    "which edgegpu needs: install a current NVIDIA driver",
			    NVML_LIB, n->lib_path);
	return 0;
}

static int nvml_init(struct nvml_backend *n, char **reterr)
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
		return fail(
			reterr, -ENXIO,
			"nvmlInit_v2 failed: %s: the NVIDIA kernel module is not loaded; load "
			"it (modprobe nvidia) or install the driver; in a container, run the pod "
			"with the NVIDIA container runtime so /dev/nvidiactl is present",
			nvml_str(n, ret));
	case NVML_RET_NO_PERMISSION:
		return fail(reterr, -EACCES,
			    "nvmlInit_v2 failed: %s: this process may not open /dev/nvidiactl and "
			    "/dev/nvidia*; run it as root or with access to those devices",
			    nvml_str(n, ret));
	default:
		return call_error(n, reterr, "nvmlInit_v2", ret);
	}
}

/* --- discovery --- */

static const char *arch_name(unsigned arch, int cc_major, int cc_minor)
{
	switch (arch) {
	case NVML_ARCH_KEPLER:
		return "kepler";
	case NVML_ARCH_MAXWELL:
		return "maxwell";
	case NVML_ARCH_PASCAL:
		return "pascal";
	case NVML_ARCH_VOLTA:
		return "volta";
	case NVML_ARCH_TURING:
		return "turing";
	case NVML_ARCH_AMPERE:
		return "ampere";
	case NVML_ARCH_ADA:
		return "ada";
	case NVML_ARCH_HOPPER:
		return "hopper";
	case 10: /* NVML_DEVICE_ARCH_BLACKWELL in later headers than the ABI test's */
		return "blackwell";
	default:
		break;
	}
	/* Unknown to NVML or no nvmlDeviceGetArchitecture: go by the compute capability. */
	switch (cc_major) {
	case 3:
		return "kepler";
	case 5:
		return "maxwell";
	case 6:
		return "pascal";
	case 7:
		return cc_minor >= 5 ? "turing" : "volta";
	case 8:
		return cc_minor == 9 ? "ada" : "ampere";
	case 9:
		return "hopper";
	case 10:
	case 12:
		return "blackwell";
	default:
		return "unknown";
	}
}

/* "00000000:01:00.0" -> domain, bus, device, function. Returns 0 or -EINVAL. */
static int parse_bus_id(const char *s, unsigned v[4])
{
	static const unsigned long max[4] = { 0xffffffffUL, 0xff, 0x1f, 0x7 };

	for (int i = 0; i < 4; i++) {
		unsigned long x;
		char *end;

		if (!isxdigit((unsigned char)*s))
			return -EINVAL;
		errno = 0;
		x = strtoul(s, &end, 16);
		if (errno || x > max[i] || *end != (i < 2 ? ':' : i == 2 ? '.' : 0))
			return -EINVAL;
		v[i] = (unsigned)x;
		s = end + 1;
	}
	return 0;
}

/* -1 unless <sysfs>/bus/pci/devices/<domain:bus:dev.fn>/numa_node holds a node >= 0. */
static int read_numa_node(const char *sysfs_root, const char *bus_id)
{
	char id[32], rel[96], *path = NULL, *text = NULL;
	unsigned b[4];
	int node = -1, v;

	/* sysfs spells it lower-case with a 4-digit domain: NVML's 00000000:CA:00.0 is 0000:ca:00.0 */
	if (parse_bus_id(bus_id, b) < 0)
		return -1;
	(void)snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", b[0], b[1], b[2], b[3]);
	(void)snprintf(rel, sizeof(rel), "bus/pci/devices/%s/numa_node", id);
	path = path_join(sysfs_root, rel);
	if (!path || read_file(path, 64, &text, NULL) < 0)
		goto out;
	text[strcspn(text, " \t\r\n")] = 0;
	if (safe_atoi(text, &v) == 0 && v >= 0)
		node = v;
out:
	free(text);
	free(path);
	return node;
}

static bool is_driver_gone(enum nvml_return r)
{
	return r == NVML_RET_LIB_RM_VERSION_MISMATCH || r == NVML_RET_UNINITIALIZED;
}

/*
 * One GPU. Returns 0 (usable), 1 (skipped: *reason says why) or -errno (discovery fails:
 * the library no longer matches the driver, or out of memory).
 */
static int discover_one(struct nvml_backend *n, unsigned i, struct gpu_device *d,
			struct nvml_dev *nd, char **reason, char **reterr)
{
	struct nvml_device *h = NULL;
	struct nvml_pci_info pci;
	struct nvml_memory mem;
	unsigned current, pending, arch = NVML_ARCH_UNKNOWN;
	unsigned long long events = 0;
	const char *call;
	enum nvml_return ret;

	assert(n->get_pci_info); /* nvml_resolve() makes sure */
	memset(d, 0, sizeof(*d));
	memset(nd, 0, sizeof(*nd));
	d->index = i;
	d->numa_node = -1;
	call = "nvmlDeviceGetHandleByIndex_v2";
	ret = NVC(n, nvmlDeviceGetHandleByIndex_v2)(i, &h);
	if (ret != NVML_RET_SUCCESS)
		goto failed;
	call = "nvmlDeviceGetUUID";
	ret = NVC(n, nvmlDeviceGetUUID)(h, d->uuid, sizeof(d->uuid));
	if (ret != NVML_RET_SUCCESS)
		goto failed;
	call = "nvmlDeviceGetName";
	ret = NVC(n, nvmlDeviceGetName)(h, d->name, sizeof(d->name));
	if (ret != NVML_RET_SUCCESS)
		goto failed;
	if (n->f.nvmlDeviceGetMigMode) {
		ret = NVC(n, nvmlDeviceGetMigMode)(h, &current, &pending);
		if (is_driver_gone(ret) || ret == NVML_RET_GPU_IS_LOST) {
			call = "nvmlDeviceGetMigMode";
			goto failed;
		}
		if (ret == NVML_RET_SUCCESS && current == NVML_MIG_ENABLE) {
			d->mig_enabled = true;
			if (asprintf(reason,
				     "GPU %u (%s, %s): MIG mode is enabled; MIG devices are not "
				     "supported yet, skipping it (disable MIG with nvidia-smi -i %u "
				     "-mig 0 to use it as a whole GPU)",
				     i, d->uuid, d->name, i) < 0)
				return -ENOMEM;
			return 1;
		}
	}
	call = "nvmlDeviceGetMinorNumber";
	ret = NVC(n, nvmlDeviceGetMinorNumber)(h, &d->minor);
	if (ret != NVML_RET_SUCCESS)
		goto failed;
	call = n->f.nvmlDeviceGetPciInfo_v3 ? "nvmlDeviceGetPciInfo_v3" : "nvmlDeviceGetPciInfo_v2";
	ret = n->get_pci_info(h, &pci);
	if (ret != NVML_RET_SUCCESS)
		goto failed;
	pci.bus_id[sizeof(pci.bus_id) - 1] = 0;
	copy_str(d->pci_bus_id, sizeof(d->pci_bus_id), pci.bus_id);
	d->numa_node = read_numa_node(n->sysfs_root, d->pci_bus_id);
	/* Integrated GPUs have no framebuffer of their own: NOT_SUPPORTED, total 0. */
	call = "nvmlDeviceGetMemoryInfo";
	ret = NVC(n, nvmlDeviceGetMemoryInfo)(h, &mem);
	if (ret == NVML_RET_SUCCESS)
		d->mem_total = mem.total;
	else if (ret != NVML_RET_NOT_SUPPORTED)
		goto failed;
	call = "nvmlDeviceGetCudaComputeCapability";
	ret = NVC(n, nvmlDeviceGetCudaComputeCapability)(h, &d->cc_major, &d->cc_minor);
	if (ret == NVML_RET_NOT_SUPPORTED)
		d->cc_major = d->cc_minor = 0;
	else if (ret != NVML_RET_SUCCESS)
		goto failed;
	if (n->f.nvmlDeviceGetArchitecture) {
		ret = NVC(n, nvmlDeviceGetArchitecture)(h, &arch);
		if (ret != NVML_RET_SUCCESS)
			arch = NVML_ARCH_UNKNOWN;
	}
	copy_str(d->arch, sizeof(d->arch), arch_name(arch, d->cc_major, d->cc_minor));
	call = "nvmlDeviceGetSupportedEventTypes";
	ret = NVC(n, nvmlDeviceGetSupportedEventTypes)(h, &events);
	if (is_driver_gone(ret) || ret == NVML_RET_GPU_IS_LOST)
		goto failed;
	if (ret != NVML_RET_SUCCESS)
		events = 0;
	if (events & NVML_EVENT_XID_CRITICAL)
		nd->event_mask = events & NVML_HEALTH_EVENTS;
	d->events_supported = nd->event_mask != 0;
	d->integrated = strstr(d->name, "(nvgpu)") || strstr(d->name, "NVIDIA Thor");
	nd->handle = h;
	copy_str(nd->uuid, sizeof(nd->uuid), d->uuid);
	return 0;

failed:
	if (is_driver_gone(ret))
		return call_error(n, reterr, call, ret);
	if (asprintf(reason, "GPU %u%s%s%s: %s failed: %s (NVML error %d), skipping it", i,
		     d->uuid[0] ? " (" : "", d->uuid, d->uuid[0] ? ")" : "", call, nvml_str(n, ret),
		     (int)ret) < 0)
		return -ENOMEM;
	return 1;
}

static int add_skipped(struct gpu_info *info, char *reason)
{
	char **s = reallocarray(info->skipped, info->n_skipped + 1, sizeof(*s));

	if (!s) {
		free(reason);
		return -ENOMEM;
	}
	info->skipped = s;
	info->skipped[info->n_skipped++] = reason;
	return 0;
}

static int nvml_discover(struct gpu_backend *b, struct gpu_info *ret, char **reterr)
{
	struct nvml_backend *n = to_nvml(b);
	struct gpu_info info = { 0 };
	struct nvml_dev *devs = NULL;
	enum nvml_return nr;
	unsigned count = 0;
	int r, v;

	nr = NVC(n, nvmlSystemGetDriverVersion)(info.driver_version, sizeof(info.driver_version));
	if (nr != NVML_RET_SUCCESS) {
		r = call_error(n, reterr, "nvmlSystemGetDriverVersion", nr);
		goto fail;
	}
	if (!n->f.nvmlSystemGetNVMLVersion ||
	    NVC(n, nvmlSystemGetNVMLVersion)(info.lib_version, sizeof(info.lib_version)) !=
		    NVML_RET_SUCCESS)
		copy_str(info.lib_version, sizeof(info.lib_version), "unknown");
	if (!(n->f.nvmlSystemGetCudaDriverVersion_v2 &&
	      NVC(n, nvmlSystemGetCudaDriverVersion_v2)(&v) == NVML_RET_SUCCESS) &&
	    !(n->f.nvmlSystemGetCudaDriverVersion &&
	      NVC(n, nvmlSystemGetCudaDriverVersion)(&v) == NVML_RET_SUCCESS))
		v = 0;
	info.cuda_driver_version = v;
	nr = NVC(n, nvmlDeviceGetCount_v2)(&count);
	if (nr != NVML_RET_SUCCESS) {
		r = call_error(n, reterr, "nvmlDeviceGetCount_v2", nr);
		goto fail;
	}
	if (count > 0) {
		info.devices = calloc(count, sizeof(*info.devices));
		devs = calloc(count, sizeof(*devs));
		if (!info.devices || !devs) {
			r = -ENOMEM;
			goto fail;
		}
	}
	for (unsigned i = 0; i < count; i++) {
		char *reason = NULL;

		r = discover_one(n, i, &info.devices[info.n_devices], &devs[info.n_devices],
				 &reason, reterr);
		if (r < 0)
			goto fail;
		if (r > 0) {
			r = add_skipped(&info, reason);
			if (r < 0)
				goto fail;
			continue;
		}
		info.n_devices++;
	}
	(void)pthread_mutex_lock(&n->devs_mu);
	/* Keep the event registrations of GPUs still there (same handle): the set lives on. */
	for (unsigned i = 0; i < info.n_devices; i++)
		for (unsigned k = 0; k < n->n_devs; k++)
			if (n->devs[k].handle == devs[i].handle && n->devs[k].registered)
				devs[i].registered = true;
	free(n->devs);
	n->devs = devs;
	n->n_devs = info.n_devices;
	(void)pthread_mutex_unlock(&n->devs_mu);
	*ret = info;
	log_debug("nvml discovery done", "gpus=%u skipped=%u driver=%s", info.n_devices,
		  info.n_skipped, info.driver_version);
	return 0;
fail:
	free(devs);
	gpu_info_release(&info);
	if (r == -ENOMEM)
		(void)fail(reterr, r, "out of memory during NVML discovery");
	return r;
}

/* --- health and topology --- */

static struct nvml_device *dev_handle(struct nvml_backend *n, unsigned gpu)
{
	return gpu < n->n_devs ? n->devs[gpu].handle : NULL;
}

static int nvml_distance(struct gpu_backend *b, unsigned gpu_a, unsigned gpu_b)
{
	struct nvml_backend *n = to_nvml(b);
	enum nvml_topology_level level;
	enum nvml_return r;

	if (gpu_a >= n->n_devs || gpu_b >= n->n_devs)
		return -EINVAL;
	if (!n->f.nvmlDeviceGetTopologyCommonAncestor)
		return -EOPNOTSUPP;
	if (gpu_a == gpu_b)
		return 0;
	if (!dev_handle(n, gpu_a) || !dev_handle(n, gpu_b))
		return -ENODEV;
	r = NVC(n, nvmlDeviceGetTopologyCommonAncestor)(dev_handle(n, gpu_a), dev_handle(n, gpu_b),
							&level);
	if (r != NVML_RET_SUCCESS)
		return nvml_to_errno(r);
	if ((int)level < 0 || (int)level > 1000)
		return -EPROTO;
	return (int)level;
}

static int nvml_probe(struct gpu_backend *b, unsigned gpu)
{
	struct nvml_backend *n = to_nvml(b);
	struct nvml_memory mem;
	enum nvml_return r;

	if (gpu >= n->n_devs)
		return -EINVAL;
	if (!n->initialised)
		return -EXDEV;
	if (!n->devs[gpu].handle)
		return -ENODEV;
	r = NVC(n, nvmlDeviceGetMemoryInfo)(n->devs[gpu].handle, &mem);
	/* NOT_SUPPORTED (integrated GPUs) still means the GPU answered. */
	if (r == NVML_RET_SUCCESS || r == NVML_RET_NOT_SUPPORTED)
		return 0;
	return nvml_to_errno(r);
}

static void nvml_events_close(struct gpu_backend *b)
{
	struct nvml_backend *n = to_nvml(b);

	if (n->set)
		(void)NVC(n, nvmlEventSetFree)(n->set);
	n->set = NULL;
	for (unsigned i = 0; i < n->n_devs; i++)
		n->devs[i].registered = false;
}

/*
 * Creates the event set if there is none and registers every GPU not registered yet. It may
 * run while another thread waits on the set (a rediscovery found a new GPU): NVML allows it,
 * and a real driver may deliver the new GPU's events only after the wait in progress ends.
 */
static int nvml_events_open(struct gpu_backend *b)
{
	struct nvml_backend *n = to_nvml(b);
	unsigned registered = 0;
	bool created = false;
	enum nvml_return r;

	if (!n->set) {
		r = NVC(n, nvmlEventSetCreate)(&n->set);
		if (r != NVML_RET_SUCCESS) {
			n->set = NULL;
			return nvml_to_errno(r);
		}
		created = true;
	}
	for (unsigned i = 0; i < n->n_devs; i++) {
		struct nvml_dev *d = &n->devs[i];

		if (d->registered) {
			registered++;
			continue;
		}
		if (!d->handle || !d->event_mask)
			continue;
		r = NVC(n, nvmlDeviceRegisterEvents)(d->handle, d->event_mask, n->set);
		if (is_driver_gone(r)) {
			/* A set another thread may wait on is the caller's to close, parked. */
			if (created)
				nvml_events_close(b);
			return -EXDEV;
		}
		if (r != NVML_RET_SUCCESS) {
			log_debug("nvml event registration failed, polling this gpu instead",
				  "device=%s nvml_error=%d", d->uuid, (int)r);
			continue;
		}
		d->registered = true;
		registered++;
	}
	if (registered == 0) {
		if (created)
			nvml_events_close(b);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int nvml_event_wait(struct gpu_backend *b, usec_t timeout_usec, struct gpu_event *ret)
{
	struct nvml_backend *n = to_nvml(b);
	struct nvml_event_data data = { 0 };
	usec_t ms = timeout_usec / USEC_PER_MSEC + ((timeout_usec % USEC_PER_MSEC) ? 1 : 0);
	enum nvml_return r;

	if (!n->set)
		return -EBADF;
	r = n->f.nvmlEventSetWait_v2(n->set, &data,
				     ms > UINT_MAX - 1 ? UINT_MAX - 1 : (unsigned)ms);
	switch (r) {
	case NVML_RET_SUCCESS:
		break;
	case NVML_RET_TIMEOUT:
		return 0;
	case NVML_RET_GPU_IS_LOST:
		*ret = (struct gpu_event){ .kind = GPU_EVENT_LOST, .gpu = -1 };
		return 1;
	case NVML_RET_LIB_RM_VERSION_MISMATCH:
	case NVML_RET_UNINITIALIZED:
		*ret = (struct gpu_event){ .kind = GPU_EVENT_DRIVER_CHANGED, .gpu = -1 };
		return 1;
	default:
		return nvml_to_errno(r);
	}
	(void)pthread_mutex_lock(&n->devs_mu);
	for (unsigned i = 0; i < n->n_devs; i++) {
		int found = 1;

		if (!n->devs[i].handle || n->devs[i].handle != data.device)
			continue;
		if (data.event_type & NVML_EVENT_XID_CRITICAL)
			*ret = (struct gpu_event){ GPU_EVENT_XID, (int)i, data.event_data, "" };
		else if (data.event_type & NVML_EVENT_DOUBLE_BIT_ECC)
			*ret = (struct gpu_event){ GPU_EVENT_ECC_DOUBLE, (int)i, 0, "" };
		else if (data.event_type & NVML_EVENT_SINGLE_BIT_ECC)
			*ret = (struct gpu_event){ GPU_EVENT_ECC_SINGLE, (int)i, 0, "" };
		else
			found = 0;
		if (found)
			copy_str(ret->uuid, sizeof(ret->uuid), n->devs[i].uuid);
		(void)pthread_mutex_unlock(&n->devs_mu);
		return found;
	}
	(void)pthread_mutex_unlock(&n->devs_mu);
	/* An event for a device we do not manage (a skipped MIG GPU): nothing to report. */
	return 0;
}

static int nvml_reinit(struct gpu_backend *b, char **reterr)
{
	struct nvml_backend *n = to_nvml(b);
	int r;

	nvml_events_close(b);
	if (n->initialised)
		(void)NVC(n, nvmlShutdown)();
	n->initialised = false;
	for (unsigned i = 0; i < n->n_devs; i++)
		n->devs[i].handle = NULL;
	r = nvml_init(n, reterr);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < n->n_devs; i++) {
		struct nvml_device *h = NULL;

		if (NVC(n, nvmlDeviceGetHandleByUUID)(n->devs[i].uuid, &h) == NVML_RET_SUCCESS)
			n->devs[i].handle = h;
		else
			log_debug("gpu not found again after nvml re-init", "device=%s",
				  n->devs[i].uuid);
	}
	return 0;
}

/* --- telemetry --- */

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

static int nvml_sample(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret)
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
	struct nvml_device *h = dev_handle(n, gpu);
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
	if (worst == NVML_RET_GPU_IS_LOST || is_driver_gone(worst))
		return nvml_to_errno(worst);
	*ret = s;
	return 0;
}

/* --- lifecycle --- */

static void nvml_close(struct gpu_backend *b)
{
	struct nvml_backend *n = to_nvml(b);

	if (!n)
		return;
	if (n->dl) {
		nvml_events_close(b);
		if (n->initialised)
			(void)NVC(n, nvmlShutdown)();
		(void)dlclose(n->dl);
	}
	free(n->devs);
	(void)pthread_mutex_destroy(&n->devs_mu);
	free(n->lib_path);
	free(n->sysfs_root);
	free(n->proc_root);
	free(n);
}

static const struct gpu_backend_ops nvml_ops = {
	.name = "nvml",
	.close = nvml_close,
	.discover = nvml_discover,
	.distance = nvml_distance,
	.probe = nvml_probe,
	.events_open = nvml_events_open,
	.event_wait = nvml_event_wait,
	.events_close = nvml_events_close,
	.reinit = nvml_reinit,
	.sample = nvml_sample,
};

int gpu_nvml_open(const struct gpu_nvml_opts *o, struct gpu_backend **ret, char **reterr)
{
	static const struct gpu_nvml_opts defaults = { 0 };
	struct nvml_backend *n;
	int r;

	if (!o)
		o = &defaults;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->base.ops = &nvml_ops;
	(void)pthread_mutex_init(&n->devs_mu, NULL);
	n->sysfs_root = strdup(o->sysfs_root && *o->sysfs_root ? o->sysfs_root : "/sys");
	n->proc_root = strdup(o->proc_root && *o->proc_root ? o->proc_root : "/proc");
	if (!n->sysfs_root || !n->proc_root) {
		r = -ENOMEM;
		goto fail;
	}
	r = nvml_load(n, o, reterr);
	if (r < 0)
		goto fail;
	r = nvml_resolve(n, reterr);
	if (r < 0)
		goto fail;
	r = nvml_init(n, reterr);
	if (r < 0)
		goto fail;
	log_debug("nvml loaded", "path=%s", n->lib_path);
	*ret = &n->base;
	return 0;
fail:
	if (r == -ENOMEM)
		(void)fail(reterr, r, "out of memory loading NVML");
	nvml_close(&n->base);
	return r;
}
