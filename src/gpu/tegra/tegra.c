/*
 * The Tegra backend (gpu-tegra.h): the board's iGPU served as one gpu_device, health from its
 * device node, its devfreq directory and NVML where NVML backs it, telemetry from NVML then
 * sysfs (tegra-sample.c), and an optional NVML backend wrapped: its integrated GPU merged into
 * the iGPU, its discrete GPUs passed through under our own indices.
 *
 * Threads (gpu-backend.h): the table of our GPUs (each one's NVML index), the iGPU's node and
 * its telemetry paths are guarded by t->mu. Discovery replaces the table whole; probe, sample,
 * distance and event_wait copy what they need under the lock before any file or NVML call.
 * The telemetry paths are shared by reference count, so that a sample still reading an old set
 * (a hung sysfs read) keeps it while discovery or a late devfreq puts a new one in place.
 */

#define LOG_MODULE "gpu-tegra"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-read.h"
#include "gpu-arch.h"
#include "gpu-tegra.h"
#include "log.h"
#include "tegra-board.h"
#include "tegra-int.h"
#include "tegra-parse.h"
#include "util.h"

#define MIB ((uint64_t)1024 * 1024)

/* --- what a container needs --- */

/*
 * The nodes of the L4T releases' devices.csv (R32, R35, R36, R39: docs/jetson.md), each
 * delivered when present. Left out: /dev/nvidia<N>, which on a board with a discrete card may
 * be that card's (the iGPU's own comes from NVML's minor, in gpu_device.nodes), and the
 * nodes whose names vary, matched by node_globs below.
 */
static const char *const tegra_ctl_nodes[] = {
	"/dev/nvidiactl",
	"/dev/nvmap",
	"/dev/nvhost-ctrl",
	"/dev/nvhost-ctrl-gpu",
	"/dev/nvhost-gpu",
	"/dev/nvhost-as-gpu",
	"/dev/nvhost-dbg-gpu",
	"/dev/nvhost-prof-gpu",
	"/dev/nvhost-prof-ctx-gpu",
	"/dev/nvhost-prof-dev-gpu",
	"/dev/nvhost-ctxsw-gpu",
	"/dev/nvhost-nvsched-gpu",
	"/dev/nvhost-power-gpu",
	"/dev/nvhost-sched-gpu",
	"/dev/nvhost-tsg-gpu",
	"/dev/host1x",
	"/dev/host1x-fence",
	"/dev/nvsciipc",
	"/dev/nvidia-modeset",
	"/dev/nvidia-uvm",
	"/dev/nvidia-uvm-tools",
	"/dev/nvhost-nvdec",
	"/dev/nvhost-nvdec1",
	"/dev/nvhost-msenc",
	"/dev/nvhost-nvenc1",
	"/dev/nvhost-nvjpg",
	"/dev/nvhost-nvjpg1",
	"/dev/nvhost-vic",
	"/dev/nvhost-ofa",
	"/dev/v4l2-nvdec",
	"/dev/v4l2-nvenc",
	"/dev/nvhost-ctrl-nvdla0",
	"/dev/nvhost-ctrl-nvdla1",
	"/dev/nvhost-nvdla0",
	"/dev/nvhost-nvdla1",
	"/dev/nvhost-ctrl-pva0",
	"/dev/nvhost-ctrl-pva1",
	"/dev/nvhost-pva0",
	"/dev/nvhost-pva1",
	"/dev/fb0",
	"/dev/fb1",
	"/dev/tegra_dc_0",
	"/dev/tegra_dc_1",
	"/dev/tegra_dc_ctrl",
};

/* igpu0 on R35/R36, igpu-<PCI address> on Thor; DRM nodes are numbered by probe order. */
static const char *const tegra_node_globs[] = {
	"/dev/nvgpu/igpu*/*",
	"/dev/dri/card[0-9]*",
	"/dev/dri/renderD[0-9]*",
};

/* Where L4T keeps its user-space driver: tegra/ up to R35, nvidia/ from R36. */
static const char *const tegra_lib_dirs[] = {
	"/usr/lib/aarch64-linux-gnu/tegra",
	"/usr/lib/aarch64-linux-gnu/nvidia",
};

static const char *const tegra_bin_dirs[] = {
	"/usr/bin",
	"/usr/sbin",
};

/* The libraries are the ones the BSP's CSV mount specs name, not a list of ours. */
static const struct gpu_container tegra_container = {
	.ctl_nodes = tegra_ctl_nodes,
	.n_ctl_nodes = ELEMENTSOF(tegra_ctl_nodes),
	.lib_dirs = tegra_lib_dirs,
	.n_lib_dirs = ELEMENTSOF(tegra_lib_dirs),
	.bin_dirs = tegra_bin_dirs,
	.n_bin_dirs = ELEMENTSOF(tegra_bin_dirs),
	.node_globs = tegra_node_globs,
	.n_node_globs = ELEMENTSOF(tegra_node_globs),
	.mount_specs_dir = "/etc/nvidia-container-runtime/host-files-for-container.d",
};

/* The node the iGPU's health probe checks, the first present: each generation has one. */
static const char *const primary_nodes[] = {
	"/dev/nvhost-ctrl-gpu",
	"/dev/nvgpu/igpu0/ctrl",
	"/dev/nvhost-gpu",
};

/* The GPU of each SoC, as CUDA names it. */
static const struct {
	const char *soc, *name;
	int cc_major, cc_minor;
} socs[] = {
	{ "tegra210", "NVIDIA Tegra X1", 5, 3 }, { "tegra186", "NVIDIA Tegra X2", 6, 2 },
	{ "tegra194", "Xavier", 7, 2 },		 { "tegra234", "Orin", 8, 7 },
	{ "tegra264", "NVIDIA Thor", 11, 0 },
};

/* --- the backend --- */

/* A set of telemetry paths, shared by the backend and the samples reading it. */
struct paths_ref {
	atomic_uint refs;
	struct tegra_paths p;
};

/* One GPU of ours: the iGPU, or a discrete GPU NVML lists. */
struct tegra_slot {
	int nvml;  /* NVML's index, or -1 (the iGPU without NVML) */
	bool igpu; /* the board's GPU */
};

struct tegra_backend {
	struct gpu_backend base;
	struct gpu_backend *nvml; /* owned; NULL when NVML did not load */
	enum gpu_backend_kind kind;
	char *host_root;
	char *device_id;
	uint64_t mem_mib;
	pthread_mutex_t mu;
	/* guarded by mu: */
	struct tegra_slot *slots; /* by our index; replaced whole by discovery */
	unsigned n_slots;
	struct paths_ref *paths;	 /* the iGPU's; NULL before the first discovery */
	char soc[32];			 /* for a late look at the telemetry paths */
	char primary[GPU_NODE_PATH_MAX]; /* the node the probe checks; "" none found yet */
};

static struct tegra_backend *to_tegra(struct gpu_backend *b)
{
	return (struct tegra_backend *)b;
}

static struct paths_ref *paths_get(struct paths_ref *r)
{
	if (r)
		atomic_fetch_add(&r->refs, 1);
	return r;
}

/* Drops @n references to @r at once, freeing it with the last. */
static void paths_put_n(struct paths_ref *r, unsigned n)
{
	if (r && atomic_fetch_sub(&r->refs, n) == n)
		free(r);
}

static void paths_put(struct paths_ref *r)
{
	paths_put_n(r, 1);
}

/* Whether @path (container path "/dev/...") is there under the host root @root_fd. */
static bool node_exists(int root_fd, const char *path)
{
	int fd = root_open(root_fd, path, 0, NULL);

	if (fd < 0)
		return false;
	(void)close(fd);
	return true;
}

/*
 * Calls @fn for each name in the directory @path under @root_fd (not "." and ".."), until it
 * returns nonzero; returns that, 0, or -errno when the directory cannot be read.
 */
static int each_name(int root_fd, const char *path, int (*fn)(const char *name, void *u), void *u)
{
	struct dirent *de;
	DIR *d;
	int r = root_opendir(root_fd, path, &d);

	if (r < 0)
		return r;
	while (r == 0 && (de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
			r = fn(de->d_name, u);
	(void)closedir(d);
	return r;
}

static int igpu_dir(const char *name, void *u)
{
	char *out = u;

	if (!startswith(name, "igpu"))
		return 0;
	return snprintf(out, GPU_NODE_PATH_MAX, "/dev/nvgpu/%s/ctrl", name) < GPU_NODE_PATH_MAX;
}

/* The iGPU's primary node present under @root_fd into @out (GPU_NODE_PATH_MAX); false: none. */
static bool find_primary(int root_fd, const char *nvml_node, char *out)
{
	for (size_t i = 0; i < ELEMENTSOF(primary_nodes); i++)
		if (node_exists(root_fd, primary_nodes[i])) {
			(void)snprintf(out, GPU_NODE_PATH_MAX, "%s", primary_nodes[i]);
			return true;
		}
	/* Thor names the directory after the GPU's PCI address: igpu-0000:01:00.0. */
	if (each_name(root_fd, "/dev/nvgpu", igpu_dir, out) > 0 && node_exists(root_fd, out))
		return true;
	if (nvml_node && node_exists(root_fd, nvml_node)) {
		(void)snprintf(out, GPU_NODE_PATH_MAX, "%s", nvml_node);
		return true;
	}
	*out = 0;
	return false;
}

struct nvidia_nodes {
	unsigned n;
	unsigned minor;
};

static int nvidia_node(const char *name, void *u)
{
	struct nvidia_nodes *nn = u;
	unsigned m;

	if (startswith(name, "nvidia") && safe_atou(name + 6, &m) == 0) {
		nn->n++;
		nn->minor = m;
	}
	return 0;
}

/*
 * The iGPU's /dev/nvidia<N> when NVML does not say (JetPack 6+ without NVML): only when it is
 * the one such node, since beside a discrete card it could be the card's.
 */
static void igpu_nvidia_node_guess(int root_fd, struct gpu_device *d)
{
	struct nvidia_nodes nn = { 0 };

	if (each_name(root_fd, "/dev", nvidia_node, &nn) < 0 || nn.n != 1)
		return;
	d->minor = nn.minor;
	(void)snprintf(d->nodes[0], sizeof(d->nodes[0]), "/dev/nvidia%u", nn.minor);
	d->n_nodes = 1;
}

/* The iGPU's memory: the configured carve-out, else MemTotal. */
static uint64_t igpu_memory(struct tegra_backend *t)
{
	char *text = NULL;
	uint64_t v = 0, avail;
	size_t len;
	int r;

	if (t->mem_mib)
		return t->mem_mib * MIB;
	r = root_read_file(t->host_root, "proc/meminfo", (size_t)1024 * 1024, &text, &len);
	if (r < 0)
		log_warn_errno(r,
			       "cannot read the host's meminfo: the Tegra GPU's memory is 0 "
			       "(set edgegpu.tegra.memoryMiB)",
			       "root=%s", t->host_root);
	else if (tegra_parse_meminfo(text, len, &v, &avail) < 0)
		log_warn("the host's meminfo has no MemTotal we understand: the Tegra GPU's "
			 "memory is 0 (set edgegpu.tegra.memoryMiB)",
			 "root=%s", t->host_root);
	free(text);
	return v;
}

/* The iGPU's device: from the board, and from NVML's entry @nd when NVML lists it. */
static void igpu_device(struct tegra_backend *t, const struct gpu_board *board,
			const struct gpu_device *nd, int root_fd, struct gpu_device *d)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	d->numa_node = -1;
	for (i = 0; i < ELEMENTSOF(socs) && !streq(socs[i].soc, board->soc); i++)
		;
	if (i < ELEMENTSOF(socs)) {
		d->cc_major = socs[i].cc_major;
		d->cc_minor = socs[i].cc_minor;
	} else if (nd) {
		d->cc_major = nd->cc_major;
		d->cc_minor = nd->cc_minor;
	}
	(void)snprintf(d->name, sizeof(d->name), "%s",
		       nd		    ? nd->name :
		       i < ELEMENTSOF(socs) ? socs[i].name :
					      "NVIDIA Tegra");
	(void)snprintf(d->uuid, sizeof(d->uuid), "%s", t->device_id);
	(void)snprintf(d->arch, sizeof(d->arch), "%s",
		       gpu_arch_log_name(gpu_arch_from_cc(d->cc_major, d->cc_minor)));
	d->integrated = true;
	d->mem_total = igpu_memory(t);
	d->container = &tegra_container;
	if (nd) {
		d->minor = nd->minor;
		(void)snprintf(d->nodes[0], sizeof(d->nodes[0]), "/dev/nvidia%u", nd->minor);
		d->n_nodes = 1;
		(void)snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%s", nd->pci_bus_id);
		d->numa_node = nd->numa_node;
		d->events_supported = nd->events_supported;
	} else if (board->l4t_major >= 36 || board->l4t_major == 0) {
		igpu_nvidia_node_guess(root_fd, d);
	}
}

/*
 * Moves what NVML's discovery left out into @dst: its skipped messages, to the end of @dst's,
 * and its MIG-enabled GPUs, which GFD's labels count (@dst has none of its own). Returns 0 or
 * -ENOMEM; the GPUs are @dst's either way.
 */
static int take_skipped(struct gpu_info *dst, struct gpu_info *src)
{
	char **s;

	dst->mig_devices = src->mig_devices;
	dst->n_mig_devices = src->n_mig_devices;
	src->mig_devices = NULL;
	src->n_mig_devices = 0;
	if (!src->n_skipped)
		return 0;
	s = reallocarray(dst->skipped, dst->n_skipped + src->n_skipped, sizeof(*s));
	if (!s)
		return -ENOMEM;
	dst->skipped = s;
	for (unsigned i = 0; i < src->n_skipped; i++) {
		s[dst->n_skipped++] = src->skipped[i];
		src->skipped[i] = NULL;
	}
	return 0;
}

static int tegra_discover(struct gpu_backend *b, struct gpu_info *ret, char **reterr)
{
	struct tegra_backend *t = to_tegra(b);
	struct gpu_info nv = { 0 }, info = { 0 };
	struct tegra_slot *slots = NULL, *old_slots;
	struct paths_ref *paths = NULL, *old_paths;
	char primary[GPU_NODE_PATH_MAX], nvml_node[GPU_NODE_PATH_MAX];
	int integ = -1, root_fd = -1, r;
	unsigned n = 0, found;

	r = tegra_board_read(t->host_root, &info.board);
	if (r < 0)
		goto fail;
	if (r == 0) /* the files went away: still the board we opened on */
		log_warn("the Tegra board's files are gone from the host root, serving its GPU "
			 "from what is left",
			 "root=%s", t->host_root);
	info.board.tegra = true;
	if (t->nvml) {
		r = t->nvml->ops->discover(t->nvml, &nv, reterr);
		if (r < 0)
			goto out;
		for (unsigned i = 0; i < nv.n_devices && integ < 0; i++)
			if (nv.devices[i].integrated)
				integ = (int)i;
		(void)snprintf(info.driver_version, sizeof(info.driver_version), "%s",
			       nv.driver_version);
		(void)snprintf(info.lib_version, sizeof(info.lib_version), "%s", nv.lib_version);
		info.cuda_driver_version = nv.cuda_driver_version;
	} else {
		/*
		 * No NVML: no driver version to give. The L4T release is not one (GFD's labels
		 * would read "32.7.4" as CUDA driver 32.7): it is in info.board, and the CUDA
		 * driver labels are left out.
		 */
		info.driver_version[0] = 0;
		info.lib_version[0] = 0;
	}
	root_fd = root_dir_open(t->host_root);
	if (root_fd < 0) {
		r = set_error(reterr, root_fd, "cannot open the host root %s: %s", t->host_root,
			      strerror(-root_fd));
		goto out;
	}
	info.devices = calloc(nv.n_devices + 2, sizeof(*info.devices));
	slots = calloc(nv.n_devices + 2, sizeof(*slots));
	paths = calloc(1, sizeof(*paths));
	if (!info.devices || !slots || !paths) {
		r = -ENOMEM;
		goto fail;
	}
	/* The iGPU in NVML's place when NVML lists it, else first. */
	if (integ < 0) {
		igpu_device(t, &info.board, NULL, root_fd, &info.devices[n]);
		slots[n++] = (struct tegra_slot){ .nvml = -1, .igpu = true };
	}
	for (unsigned i = 0; i < nv.n_devices; i++) {
		if ((int)i == integ) {
			igpu_device(t, &info.board, &nv.devices[i], root_fd, &info.devices[n]);
			slots[n] = (struct tegra_slot){ .nvml = (int)i, .igpu = true };
		} else {
			info.devices[n] = nv.devices[i];
			slots[n] = (struct tegra_slot){ .nvml = (int)i };
		}
		info.devices[n].index = n;
		n++;
	}
	info.n_devices = n;
	info.container = &tegra_container;
	r = take_skipped(&info, &nv);
	if (r < 0)
		goto fail;
	/* Telemetry paths: none found yet (early boot) is no error, sample looks again. */
	atomic_init(&paths->refs, 1);
	(void)snprintf(paths->p.host_root, sizeof(paths->p.host_root), "%s", t->host_root);
	for (unsigned i = 0; i < n; i++)
		if (slots[i].igpu)
			paths->p.mem_total = info.devices[i].mem_total;
	found = tegra_paths_find(t->host_root, info.board.soc, &paths->p);
	if (!paths->p.devfreq_dir[0])
		log_info(
			"the Tegra GPU's devfreq directory is not there (yet): its clocks and load "
			"are reported once it appears",
			"root=%s soc=%s paths_found=%u", t->host_root, info.board.soc, found);
	(void)snprintf(nvml_node, sizeof(nvml_node), "/dev/nvidia%u",
		       integ >= 0 ? nv.devices[integ].minor : 0);
	if (!find_primary(root_fd, integ >= 0 ? nvml_node : NULL, primary))
		log_warn("none of the Tegra GPU's device nodes is under the host's /dev: it is "
			 "unhealthy until one appears (is /dev mounted?)",
			 "root=%s", t->host_root);
	/*
	 * Without a /dev/nvidia<N> (L4T before R36) the iGPU's own node is its primary one, so
	 * that its CDI device has an edit of its own (a spec with an empty device is invalid);
	 * Allocate and the spec leave a control node that is a GPU's own node to the GPU.
	 */
	for (unsigned i = 0; i < n; i++)
		if (slots[i].igpu && info.devices[i].n_nodes == 0 && primary[0]) {
			(void)snprintf(info.devices[i].nodes[0], sizeof(info.devices[i].nodes[0]),
				       "%s", primary);
			info.devices[i].n_nodes = 1;
		}
	(void)pthread_mutex_lock(&t->mu);
	old_slots = t->slots;
	old_paths = t->paths;
	t->slots = slots;
	t->n_slots = n;
	t->paths = paths;
	(void)snprintf(t->soc, sizeof(t->soc), "%s", info.board.soc);
	(void)snprintf(t->primary, sizeof(t->primary), "%s", primary);
	(void)pthread_mutex_unlock(&t->mu);
	free(old_slots);
	paths_put(old_paths);
	log_debug("tegra discovery done", "gpus=%u soc=%s l4t=%s nvml=%s primary=%s", n,
		  info.board.soc, info.board.l4t, t->nvml ? "yes" : "no", primary);
	*ret = info;
	gpu_info_release(&nv);
	(void)close(root_fd);
	return 0;
fail:
	if (r == -ENOMEM)
		(void)set_error(reterr, r, "out of memory during Tegra discovery");
out:
	if (root_fd >= 0)
		(void)close(root_fd);
	free(slots);
	free(paths);
	gpu_info_release(&nv);
	gpu_info_release(&info);
	return r;
}

/* Our slot @gpu, copied under the lock. Returns 0 or -EINVAL. */
static int slot_of(struct tegra_backend *t, unsigned gpu, struct tegra_slot *ret)
{
	int r = -EINVAL;

	(void)pthread_mutex_lock(&t->mu);
	if (gpu < t->n_slots) {
		*ret = t->slots[gpu];
		r = 0;
	}
	(void)pthread_mutex_unlock(&t->mu);
	return r;
}

static int tegra_distance(struct gpu_backend *b, unsigned gpu_a, unsigned gpu_b)
{
	struct tegra_backend *t = to_tegra(b);
	struct tegra_slot a, c;

	if (slot_of(t, gpu_a, &a) < 0 || slot_of(t, gpu_b, &c) < 0)
		return -EINVAL;
	if (gpu_a == gpu_b)
		return 0;
	if (!t->nvml || a.nvml < 0 || c.nvml < 0)
		return -EOPNOTSUPP;
	return t->nvml->ops->distance(t->nvml, (unsigned)a.nvml, (unsigned)c.nvml);
}

static int tegra_probe(struct gpu_backend *b, unsigned gpu)
{
	struct tegra_backend *t = to_tegra(b);
	char primary[GPU_NODE_PATH_MAX], devfreq[PATH_MAX] = "";
	struct tegra_slot s;
	int root_fd, r = 0;
	bool known;

	(void)pthread_mutex_lock(&t->mu);
	if (gpu >= t->n_slots) {
		(void)pthread_mutex_unlock(&t->mu);
		return -EINVAL;
	}
	s = t->slots[gpu];
	(void)snprintf(primary, sizeof(primary), "%s", t->primary);
	known = primary[0] != 0;
	if (t->paths)
		(void)snprintf(devfreq, sizeof(devfreq), "%s", t->paths->p.devfreq_dir);
	(void)pthread_mutex_unlock(&t->mu);
	if (!s.igpu)
		return t->nvml->ops->probe(t->nvml, (unsigned)s.nvml);
	gpu_backend_note_call(b, "tegra_probe");
	root_fd = root_dir_open(t->host_root);
	if (root_fd < 0)
		return root_fd == -ENOENT ? -ENODEV : root_fd;
	if (known ? !node_exists(root_fd, primary) : !find_primary(root_fd, NULL, primary)) {
		log_debug("tegra gpu node missing", "node=%s", known ? primary : "(none)");
		r = -ENODEV;
	} else if (!known) {
		/* A node that came after discovery: check it from now on. */
		(void)pthread_mutex_lock(&t->mu);
		(void)snprintf(t->primary, sizeof(t->primary), "%s", primary);
		(void)pthread_mutex_unlock(&t->mu);
	}
	/* The devfreq directory goes when the GPU's driver unbinds; one never found is no sign. */
	if (r == 0 && devfreq[0] && !node_exists(root_fd, devfreq)) {
		log_debug("tegra gpu devfreq gone", "dir=%s", devfreq);
		r = -ENODEV;
	}
	(void)close(root_fd);
	if (r == 0 && s.nvml >= 0)
		r = t->nvml->ops->probe(t->nvml, (unsigned)s.nvml);
	return r;
}

/*
 * The telemetry paths again when the iGPU's devfreq was not there (early boot): once per
 * sample, a scan of a few sysfs directories. Returns the set to read (a reference; @cur's
 * is dropped when another replaces it).
 */
static struct paths_ref *paths_look_again(struct tegra_backend *t, struct paths_ref *cur,
					  const char *soc)
{
	struct paths_ref *n = calloc(1, sizeof(*n));

	if (!n)
		return cur;
	atomic_init(&n->refs, 2); /* the backend's and ours */
	(void)snprintf(n->p.host_root, sizeof(n->p.host_root), "%s", cur->p.host_root);
	n->p.mem_total = cur->p.mem_total;
	(void)tegra_paths_find(t->host_root, soc, &n->p);
	if (!n->p.devfreq_dir[0]) {
		free(n);
		return cur;
	}
	(void)pthread_mutex_lock(&t->mu);
	if (t->paths != cur) { /* a discovery came first: take what it found */
		(void)pthread_mutex_unlock(&t->mu);
		free(n);
		return cur;
	}
	t->paths = n;
	(void)pthread_mutex_unlock(&t->mu);
	paths_put_n(cur, 2); /* the backend's reference and ours, in one step */
	log_info("the Tegra GPU's devfreq directory appeared: reporting its clocks and load",
		 "dir=%s", n->p.devfreq_dir);
	return n;
}

static int tegra_sample(struct gpu_backend *b, unsigned gpu, struct gpu_sample *ret)
{
	struct tegra_backend *t = to_tegra(b);
	struct paths_ref *paths = NULL;
	struct tegra_slot s;
	char soc[32] = "";
	int r;

	(void)pthread_mutex_lock(&t->mu);
	if (gpu >= t->n_slots) {
		(void)pthread_mutex_unlock(&t->mu);
		return -EINVAL;
	}
	s = t->slots[gpu];
	if (s.igpu) {
		paths = paths_get(t->paths);
		(void)snprintf(soc, sizeof(soc), "%s", t->soc);
	}
	(void)pthread_mutex_unlock(&t->mu);
	if (s.nvml >= 0 && t->nvml->ops->sample) {
		r = t->nvml->ops->sample(t->nvml, (unsigned)s.nvml, ret);
		if (!s.igpu)
			return r;
		/* The iGPU's gaps in NVML's answers are sysfs's to fill; an error is no sample. */
		if (r < 0)
			log_debug_errno(r, "nvml sample of the tegra gpu failed, sysfs only",
					"gpu=%u", gpu);
	} else if (!s.igpu) {
		return -EOPNOTSUPP;
	}
	if (!paths)
		return 0;
	if (!paths->p.devfreq_dir[0])
		paths = paths_look_again(t, paths, soc);
	gpu_backend_note_call(b, "tegra_sample_read");
	tegra_sample_read(&paths->p, ret);
	paths_put(paths);
	return 0;
}

static int tegra_events_open(struct gpu_backend *b)
{
	struct tegra_backend *t = to_tegra(b);

	/* The iGPU without NVML has no events: the monitor polls it. */
	return t->nvml ? t->nvml->ops->events_open(t->nvml) : -EOPNOTSUPP;
}

static int tegra_event_wait(struct gpu_backend *b, usec_t timeout_usec, struct gpu_event *ret)
{
	struct tegra_backend *t = to_tegra(b);
	int r;

	if (!t->nvml)
		return -EBADF;
	r = t->nvml->ops->event_wait(t->nvml, timeout_usec, ret);
	if (r != 1 || ret->gpu < 0)
		return r;
	/* NVML's index to ours; the iGPU's UUID is the configured ID. */
	r = 0;
	(void)pthread_mutex_lock(&t->mu);
	for (unsigned i = 0; i < t->n_slots; i++)
		if (t->slots[i].nvml == ret->gpu) {
			ret->gpu = (int)i;
			if (t->slots[i].igpu)
				(void)snprintf(ret->uuid, sizeof(ret->uuid), "%s", t->device_id);
			r = 1;
			break;
		}
	(void)pthread_mutex_unlock(&t->mu);
	return r;
}

static void tegra_events_close(struct gpu_backend *b)
{
	struct tegra_backend *t = to_tegra(b);

	if (t->nvml)
		t->nvml->ops->events_close(t->nvml);
}

static int tegra_reinit(struct gpu_backend *b, char **reterr)
{
	struct tegra_backend *t = to_tegra(b);

	return t->nvml ? t->nvml->ops->reinit(t->nvml, reterr) : 0;
}

static void tegra_close(struct gpu_backend *b)
{
	struct tegra_backend *t = to_tegra(b);

	if (!t)
		return;
	gpu_backend_close(t->nvml);
	free(t->slots);
	paths_put(t->paths);
	(void)pthread_mutex_destroy(&t->mu);
	free(t->host_root);
	free(t->device_id);
	free(t);
}

static const struct gpu_backend_ops tegra_ops = {
	.name = "tegra",
	.close = tegra_close,
	.discover = tegra_discover,
	.distance = tegra_distance,
	.probe = tegra_probe,
	.events_open = tegra_events_open,
	.event_wait = tegra_event_wait,
	.events_close = tegra_events_close,
	.event_wait_call = "nvmlEventSetWait_v2",
	.reinit = tegra_reinit,
	.sample = tegra_sample,
};

/* NVIDIA's rule beside NVML: a Tegra board is served by Tegra when NVML lists its iGPU. */
static int nvml_lists_integrated(struct gpu_backend *nvml, char **reterr)
{
	struct gpu_info nv = { 0 };
	int r = nvml->ops->discover(nvml, &nv, reterr);

	if (r < 0)
		return r;
	r = 0;
	for (unsigned i = 0; i < nv.n_devices; i++)
		if (nv.devices[i].integrated)
			r = 1;
	gpu_info_release(&nv);
	return r;
}

int tegra_open(const struct gpu_backend_opts *o, struct gpu_backend *nvml, struct gpu_backend **ret,
	       char **reterr)
{
	static const struct gpu_backend_opts defaults = { 0 };
	const char *root, *id;
	struct tegra_backend *t;
	struct gpu_board board;
	int r;

	if (!o)
		o = &defaults;
	root = o->host_root && *o->host_root ? o->host_root : "/";
	id = o->tegra_device_id && *o->tegra_device_id ? o->tegra_device_id : "tegra";
	if (!gpu_device_id_valid(id))
		return set_error(reterr, -EINVAL,
				 "invalid Tegra device ID \"%s\": letters, digits and _.:- between "
				 "a first and last letter or digit, no \"::\"",
				 id);
	/*
	 * A host root that cannot be opened is a mistake to say (the DaemonSet's /host mount
	 * missing), not a machine without Tegra files: NVML would then serve a Jetson wrongly.
	 */
	r = root_dir_open(root);
	if (r < 0)
		return set_error(
			reterr, r,
			"cannot open the host root %s (edgegpu.hostRoot, --host-root): %s; "
			"mount the host's root there, or leave it at /",
			root, strerror(-r));
	fd_close(r);
	r = tegra_board_read(root, &board);
	if (r < 0)
		return set_error(reterr, r, "out of memory reading the Tegra board");
	if (r == 0)
		return set_error(reterr, -ENODEV,
				 "no Tegra board under %s (no etc/nv_tegra_release, no Tegra "
				 "soc0 family, no nvidia,tegra device-tree compatible)",
				 root);
	if (o->kind == GPU_BACKEND_AUTO && nvml) {
		r = nvml_lists_integrated(nvml, reterr);
		if (r < 0)
			return r;
		if (r == 0)
			return set_error(reterr, -ENODEV,
					 "Tegra files under %s, but NVML lists no integrated GPU: "
					 "NVML serves this node (NVIDIA's rule)",
					 root);
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return set_error(reterr, -ENOMEM, "out of memory opening the Tegra backend");
	t->base.ops = &tegra_ops;
	t->kind = o->kind;
	t->mem_mib = o->tegra_mem_mib;
	(void)pthread_mutex_init(&t->mu, NULL);
	t->host_root = strdup(root);
	t->device_id = strdup(id);
	if (!t->host_root || !t->device_id) {
		tegra_close(&t->base);
		return set_error(reterr, -ENOMEM, "out of memory opening the Tegra backend");
	}
	t->nvml = nvml;
	log_debug("tegra backend open", "root=%s soc=%s l4t=%s nvml=%s", root, board.soc, board.l4t,
		  nvml ? "yes" : "no");
	*ret = &t->base;
	return 0;
}
