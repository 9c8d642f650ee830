/*
 * The NVML backend's operations (gpu-backend.h): discovery, topology, health probes, events,
 * re-initialisation and close, over the library nvml-load.c opened. No logging above debug:
 * the caller (and the monitor) logs.
 */

#define LOG_MODULE "gpu-nvml"

#include <assert.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file-read.h"
#include "gpu-arch.h"
#include "log.h"
#include "nvml-int.h"
#include "util.h"

/* --- what a container needs --- */

/* The optional control nodes, in NVIDIA's order (nvidia-plugin.md section 2.3). */
static const char *const ctl_nodes[] = {
	"/dev/nvidiactl",
	"/dev/nvidia-uvm",
	"/dev/nvidia-uvm-tools",
	"/dev/nvidia-modeset",
};

/*
 * The compute and video libraries of the driver. The soname is mounted too (same host file),
 * because without nvidia-ctk's create-symlinks hook nothing else would create libcuda.so.1 in
 * the container. Graphics libraries are left out.
 */
static const struct gpu_driver_lib driver_libs[] = {
	{ "libcuda.so", "libcuda.so.1", true },
	{ "libcudadebugger.so", "libcudadebugger.so.1", false },
	{ "libnvidia-ml.so", "libnvidia-ml.so.1", false },
	{ "libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1", false },
	{ "libnvidia-nvvm.so", "libnvidia-nvvm.so.4", false },
	{ "libnvidia-opencl.so", "libnvidia-opencl.so.1", false },
	{ "libnvidia-cfg.so", "libnvidia-cfg.so.1", false },
	{ "libnvidia-allocator.so", "libnvidia-allocator.so.1", false },
	{ "libnvidia-gpucomp.so", NULL, false },
	{ "libnvidia-pkcs11.so", NULL, false },
	{ "libnvidia-pkcs11-openssl3.so", NULL, false },
	{ "libnvcuvid.so", "libnvcuvid.so.1", false },
	{ "libnvidia-encode.so", "libnvidia-encode.so.1", false },
	{ "libnvidia-opticalflow.so", "libnvidia-opticalflow.so.1", false },
};

static const char *const driver_bins[] = {
	"nvidia-smi",
	"nvidia-debugdump",
	"nvidia-persistenced",
	"nvidia-cuda-mps-control",
	"nvidia-cuda-mps-server",
};

/* Where the driver's libraries live, relative to the driver root, most common first. */
static const char *const driver_lib_dirs[] = {
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu",
	"/lib64",
	"/usr/lib",
	"/lib",
};

static const char *const driver_bin_dirs[] = {
	"/usr/bin",
	"/usr/sbin",
	"/bin",
	"/sbin",
};

const struct gpu_container nvml_container = {
	.ctl_nodes = ctl_nodes,
	.n_ctl_nodes = ELEMENTSOF(ctl_nodes),
	.libs = driver_libs,
	.n_libs = ELEMENTSOF(driver_libs),
	.bins = driver_bins,
	.n_bins = ELEMENTSOF(driver_bins),
	.lib_dirs = driver_lib_dirs,
	.n_lib_dirs = ELEMENTSOF(driver_lib_dirs),
	.bin_dirs = driver_bin_dirs,
	.n_bin_dirs = ELEMENTSOF(driver_bin_dirs),
};

/* --- discovery --- */

/*
 * The architecture NVML names (nvmlDeviceGetArchitecture()), else the one of the compute
 * capability (an NVML without the call, or a value newer than this table).
 */
static enum gpu_arch arch_of(unsigned arch, int cc_major, int cc_minor)
{
	switch (arch) {
	case NVML_ARCH_KEPLER:
		return GPU_ARCH_KEPLER;
	case NVML_ARCH_MAXWELL:
		return GPU_ARCH_MAXWELL;
	case NVML_ARCH_PASCAL:
		return GPU_ARCH_PASCAL;
	case NVML_ARCH_VOLTA:
		return GPU_ARCH_VOLTA;
	case NVML_ARCH_TURING:
		return GPU_ARCH_TURING;
	case NVML_ARCH_AMPERE:
		return GPU_ARCH_AMPERE;
	case NVML_ARCH_ADA:
		return GPU_ARCH_ADA;
	case NVML_ARCH_HOPPER:
		return GPU_ARCH_HOPPER;
	case NVML_ARCH_BLACKWELL:
		return GPU_ARCH_BLACKWELL;
	default:
		/* NVML_DEVICE_ARCH_T23X (Orin, 8.7) and what comes after: by the capability. */
		return gpu_arch_from_cc(cc_major, cc_minor);
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
	char id[32], rel[96], *text = NULL;
	unsigned b[4];
	int node = -1, v;

	/* sysfs spells it lower-case with a 4-digit domain: NVML's 00000000:CA:00.0 is 0000:ca:00.0 */
	if (parse_bus_id(bus_id, b) < 0)
		return -1;
	(void)snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", b[0], b[1], b[2], b[3]);
	(void)snprintf(rel, sizeof(rel), "bus/pci/devices/%s/numa_node", id);
	/* Inside the sysfs root: its device links are relative ones within it. */
	if (root_read_file(sysfs_root, rel, 64, &text, NULL) < 0)
		goto out;
	text[strcspn(text, " \t\r\n")] = 0;
	if (safe_atoi(text, &v) == 0 && v >= 0)
		node = v;
out:
	free(text);
	return node;
}

/*
 * The PCI class of the GPU at @bus_id (sysfs's `class`: "0x030200"), the way GFD reads it for
 * nvidia.com/gpu.mode: NVML's nvmlDeviceGetPciInfoExt where the library has it (base and sub
 * class; the programming interface, 0 on NVIDIA's GPUs, is not given), else
 * <sysfs>/bus/pci/devices/<id>/class. 0 when neither answers.
 */
static uint32_t pci_class_of(struct nvml_backend *n, struct nvml_device *h, const char *bus_id)
{
	struct nvml_pci_info_ext ext = { .version = NVML_PCI_INFO_EXT_V1 };
	char id[32], rel[96], *text = NULL, *end;
	unsigned long v = 0;
	unsigned b[4];

	if (n->f.nvmlDeviceGetPciInfoExt &&
	    NVC(n, nvmlDeviceGetPciInfoExt)(h, &ext) == NVML_RET_SUCCESS &&
	    ext.base_class <= 0xff && ext.sub_class <= 0xff && ext.base_class)
		return ext.base_class << 16 | ext.sub_class << 8;
	if (parse_bus_id(bus_id, b) < 0)
		return 0;
	(void)snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", b[0], b[1], b[2], b[3]);
	(void)snprintf(rel, sizeof(rel), "bus/pci/devices/%s/class", id);
	if (root_read_file(n->sysfs_root, rel, 64, &text, NULL) < 0)
		return 0;
	errno = 0;
	v = strtoul(text, &end, 16);
	if (errno || end == text || (*end && *end != '\n') || v > 0xffffff)
		v = 0;
	free(text);
	return (uint32_t)v;
}

/*
 * @d's PCI bus id (nvmlDeviceGetPciInfo_v3, or _v2 on an older library) and PCI class. *@call
 * names the NVML call for the caller's message. Returns the call's result; @d is untouched
 * unless it is SUCCESS.
 */
static enum nvml_return read_pci(struct nvml_backend *n, struct nvml_device *h,
				 struct gpu_device *d, const char **call)
{
	struct nvml_pci_info pci;
	enum nvml_return ret;

	*call = n->f.nvmlDeviceGetPciInfo_v3 ? "nvmlDeviceGetPciInfo_v3" :
					       "nvmlDeviceGetPciInfo_v2";
	ret = NVC_AS(n, n->get_pci_info, *call)(h, &pci);
	if (ret != NVML_RET_SUCCESS)
		return ret;
	pci.bus_id[sizeof(pci.bus_id) - 1] = 0;
	nvml_copy_str(d->pci_bus_id, sizeof(d->pci_bus_id), pci.bus_id);
	d->pci_class = pci_class_of(n, h, d->pci_bus_id);
	return ret;
}

/*
 * A MIG-enabled GPU, which discovery leaves out, described for the labels as far as NVML
 * answers (GFD labels and counts it): memory, compute capability, PCI class. Errors leave a
 * field unknown; none fails discovery.
 */
static void describe_mig_gpu(struct nvml_backend *n, struct nvml_device *h, struct gpu_device *d)
{
	struct nvml_memory mem;
	const char *call;

	(void)read_pci(n, h, d, &call);
	if (NVC(n, nvmlDeviceGetMemoryInfo)(h, &mem) == NVML_RET_SUCCESS)
		d->mem_total = mem.total;
	if (NVC(n, nvmlDeviceGetCudaComputeCapability)(h, &d->cc_major, &d->cc_minor) !=
	    NVML_RET_SUCCESS)
		d->cc_major = d->cc_minor = 0;
}

/*
 * Whether the driver limits device memory per cgroup on @h (CUDA 13.4 drivers): asked by
 * reading the limits of our own cgroup root, which any cgroup v2 host has. SUCCESS means the
 * feature is there; NOT_SUPPORTED (older drivers, MIG) or any other error means it is not
 * usable; a library without the function (older than NVML 615) is UNKNOWN, as is a Tegra iGPU,
 * where the driver path is not known to exist (integrated GPUs are never asked).
 */
static enum gpu_mem_limits mem_limits_of(struct nvml_backend *n, struct nvml_device *h,
					 bool integrated)
{
	struct nvml_get_memory_limits lim = { .name_space = "/sys/fs/cgroup" };
	enum nvml_return ret;

	if (!n->f.nvmlDeviceGetMemoryLimits_v1 || integrated)
		return GPU_MEM_LIMITS_UNKNOWN;
	ret = NVC(n, nvmlDeviceGetMemoryLimits_v1)(h, &lim);
	if (ret == NVML_RET_SUCCESS)
		return GPU_MEM_LIMITS_SUPPORTED;
	if (ret != NVML_RET_NOT_SUPPORTED)
		log_debug("nvmlDeviceGetMemoryLimits_v1 failed, driver memory limits unused",
			  "error=%d", (int)ret);
	return GPU_MEM_LIMITS_UNSUPPORTED;
}

/*
 * One GPU. Returns 0 (usable), 1 (skipped: *reason says why) or -errno (discovery fails:
 * the library no longer matches the driver, or out of memory).
 */
static int discover_one(struct nvml_backend *n, unsigned i, struct gpu_device *d,
			struct nvml_dev *nd, char **reason, char **reterr)
{
	struct nvml_device *h = NULL;
	struct nvml_memory mem;
	unsigned current, pending, arch = NVML_ARCH_UNKNOWN;
	unsigned long long events = 0;
	const char *call;
	enum nvml_return ret;

	assert(n->get_pci_info); /* nvml_load() makes sure */
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
		if (nvml_driver_gone(ret) || ret == NVML_RET_GPU_IS_LOST) {
			call = "nvmlDeviceGetMigMode";
			goto failed;
		}
		/* go-nvlib's IsMigCapable(), which GFD's mig.capable reads: SUCCESS = capable. */
		d->mig_capable = ret == NVML_RET_SUCCESS;
		if (ret == NVML_RET_SUCCESS && current == NVML_MIG_ENABLE) {
			d->mig_enabled = true;
			describe_mig_gpu(n, h, d);
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
	(void)snprintf(d->nodes[0], sizeof(d->nodes[0]), "/dev/nvidia%u", d->minor);
	d->n_nodes = 1;
	d->container = &nvml_container;
	ret = read_pci(n, h, d, &call);
	if (ret != NVML_RET_SUCCESS)
		goto failed;
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
	nvml_copy_str(d->arch, sizeof(d->arch),
		      gpu_arch_log_name(arch_of(arch, d->cc_major, d->cc_minor)));
	call = "nvmlDeviceGetSupportedEventTypes";
	ret = NVC(n, nvmlDeviceGetSupportedEventTypes)(h, &events);
	if (nvml_driver_gone(ret) || ret == NVML_RET_GPU_IS_LOST)
		goto failed;
	if (ret != NVML_RET_SUCCESS)
		events = 0;
	if (events & NVML_EVENT_XID_CRITICAL)
		nd->event_mask = events & NVML_HEALTH_EVENTS;
	d->events_supported = nd->event_mask != 0;
	d->integrated = strstr(d->name, "(nvgpu)") || strstr(d->name, "NVIDIA Thor");
	d->mem_limits = mem_limits_of(n, h, d->integrated);
	nd->handle = h;
	nvml_copy_str(nd->uuid, sizeof(nd->uuid), d->uuid);
	return 0;

failed:
	if (nvml_driver_gone(ret))
		return nvml_call_error(n, reterr, call, ret);
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

/* Appends a copy of @d (a MIG-enabled GPU) to info->mig_devices. Returns 0 or -ENOMEM. */
static int add_mig_device(struct gpu_info *info, const struct gpu_device *d)
{
	struct gpu_device *m = reallocarray(info->mig_devices, info->n_mig_devices + 1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	info->mig_devices = m;
	info->mig_devices[info->n_mig_devices++] = *d;
	return 0;
}

static int nvml_discover(struct gpu_backend *b, struct gpu_info *ret, char **reterr)
{
	struct nvml_backend *n = to_nvml(b);
	struct gpu_info info = { 0 };
	struct nvml_dev *devs = NULL, *old;
	unsigned n_old;
	enum nvml_return nr;
	unsigned count = 0;
	int r, v;

	nr = NVC(n, nvmlSystemGetDriverVersion)(info.driver_version, sizeof(info.driver_version));
	if (nr != NVML_RET_SUCCESS) {
		r = nvml_call_error(n, reterr, "nvmlSystemGetDriverVersion", nr);
		goto fail;
	}
	if (!n->f.nvmlSystemGetNVMLVersion ||
	    NVC(n, nvmlSystemGetNVMLVersion)(info.lib_version, sizeof(info.lib_version)) !=
		    NVML_RET_SUCCESS)
		nvml_copy_str(info.lib_version, sizeof(info.lib_version), "unknown");
	if (!(n->f.nvmlSystemGetCudaDriverVersion_v2 &&
	      NVC(n, nvmlSystemGetCudaDriverVersion_v2)(&v) == NVML_RET_SUCCESS) &&
	    !(n->f.nvmlSystemGetCudaDriverVersion &&
	      NVC(n, nvmlSystemGetCudaDriverVersion)(&v) == NVML_RET_SUCCESS))
		v = 0;
	info.cuda_driver_version = v;
	info.container = &nvml_container;
	nr = NVC(n, nvmlDeviceGetCount_v2)(&count);
	if (nr != NVML_RET_SUCCESS) {
		r = nvml_call_error(n, reterr, "nvmlDeviceGetCount_v2", nr);
		goto fail;
	}
	/* One more than needed: never a zero-size allocation, and no NULL table to reason about. */
	info.devices = calloc(count + 1, sizeof(*info.devices));
	devs = calloc(count + 1, sizeof(*devs));
	if (!info.devices || !devs) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < count; i++) {
		char *reason = NULL;

		r = discover_one(n, i, &info.devices[info.n_devices], &devs[info.n_devices],
				 &reason, reterr);
		if (r < 0)
			goto fail;
		if (r > 0) {
			if (info.devices[info.n_devices].mig_enabled) {
				r = add_mig_device(&info, &info.devices[info.n_devices]);
				if (r < 0) {
					free(reason);
					goto fail;
				}
			}
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
	old = n->devs;
	n_old = n->n_devs;
	n->devs = devs;
	n->n_devs = info.n_devices;
	(void)pthread_mutex_unlock(&n->devs_mu);
	nvml_gpm_release(n, old, n_old); /* outside the lock: library calls */
	free(old);
	*ret = info;
	log_debug("nvml discovery done", "gpus=%u skipped=%u driver=%s", info.n_devices,
		  info.n_skipped, info.driver_version);
	return 0;
fail:
	free(devs);
	gpu_info_release(&info);
	if (r == -ENOMEM)
		(void)set_error(reterr, r, "out of memory during NVML discovery");
	return r;
}

/* --- health and topology --- */

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
	if (!nvml_dev_handle(n, gpu_a) || !nvml_dev_handle(n, gpu_b))
		return -ENODEV;
	r = NVC(n, nvmlDeviceGetTopologyCommonAncestor)(nvml_dev_handle(n, gpu_a),
							nvml_dev_handle(n, gpu_b), &level);
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
		if (nvml_driver_gone(r)) {
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
			nvml_copy_str(ret->uuid, sizeof(ret->uuid), n->devs[i].uuid);
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
	nvml_gpm_release(n, n->devs, n->n_devs); /* the samples die with the library state */
	if (n->initialised)
		(void)NVC(n, nvmlShutdown)();
	n->initialised = false;
	/* A driver reload restarts the NVLink counters: last answers from before would mix in. */
	for (unsigned i = 0; i < n->n_devs; i++) {
		n->devs[i].handle = NULL;
		n->devs[i].nvlink_known = 0;
	}
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

/* --- lifecycle --- */

static void nvml_close(struct gpu_backend *b)
{
	struct nvml_backend *n = to_nvml(b);

	if (!n)
		return;
	if (n->dl) {
		nvml_events_close(b);
		nvml_gpm_release(n, n->devs, n->n_devs);
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
	.event_wait_call = "nvmlEventSetWait_v2",
	.reinit = nvml_reinit,
	.sample = nvml_sample,
};

int nvml_open(const struct gpu_backend_opts *o, struct gpu_backend **ret, char **reterr)
{
	static const struct gpu_backend_opts defaults = { 0 };
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
	r = nvml_init(n, reterr);
	if (r < 0)
		goto fail;
	log_debug("nvml loaded", "path=%s", n->lib_path);
	*ret = &n->base;
	return 0;
fail:
	if (r == -ENOMEM)
		(void)set_error(reterr, r, "out of memory loading NVML");
	nvml_close(&n->base);
	return r;
}
