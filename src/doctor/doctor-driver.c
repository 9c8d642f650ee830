/*
 * The doctor's driver layer (doctor.h): NVML, the three driver versions, the /dev nodes and the
 * GPU count, with the host checks of doctor-host.c (Tegra, nvidia-smi, persistence, boot).
 *
 * NVML is opened and asked for its GPUs as the daemon does (gpu_backend_open, then discover),
 * on a worker thread (runner.h) the doctor waits for at most timeout_ms: a hung driver is a
 * failed check, and the thread is left behind (runner_live() tells main() not to run the
 * library's destructors at exit).
 */
#include "doctor-driver.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file-read.h"
#include "gpu-arch.h"
#include "gpu-open.h"
#include "labels.h"
#include "runner.h"

/* --- NVML on a worker thread --- */

#define NVML_JOB_FDS 3

/* Owned by the doctor until it gives up waiting (the runner left behind), then by the worker. */
struct nvml_job {
	pthread_mutex_t mu;    /* stage and b, which the doctor reads when it gives up */
	const char *stage;     /* what the worker does now (a literal) */
	struct gpu_backend *b; /* while discover runs: its ->call names a hung call */
	struct gpu_backend_opts opts;
	/* results */
	int r;
	char *err;
	struct gpu_info info;
	char *lib; /* the library file the loader mapped, as it named it */
	/* O_PATH fds the paths in @opts reach through /proc/self/fd: the library, /proc, /sys
	 * under another host root (-1: none); closed with the job, after the worker is done. */
	int fds[NVML_JOB_FDS];
};

static struct nvml_job *nvml_job_free(struct nvml_job *j)
{
	if (!j)
		return NULL;
	gpu_backend_opts_release(&j->opts);
	gpu_info_release(&j->info);
	free(j->err);
	free(j->lib);
	for (size_t i = 0; i < NVML_JOB_FDS; i++)
		fd_close(j->fds[i]);
	(void)pthread_mutex_destroy(&j->mu);
	free(j);
	return NULL;
}

static int find_nvml_object(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *name = info->dlpi_name, *base;
	char **ret = data;

	(void)size;
	if (!name || !*name)
		return 0;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (!startswith(base, "libnvidia-ml.so"))
		return 0;
	*ret = strdup(name);
	return 1;
}

static void job_set(struct nvml_job *j, const char *stage, struct gpu_backend *b)
{
	(void)pthread_mutex_lock(&j->mu);
	j->stage = stage;
	j->b = b;
	(void)pthread_mutex_unlock(&j->mu);
}

/* The runner's drop: a job left behind is freed by its thread once NVML returns. */
static void nvml_job_drop(void *arg)
{
	nvml_job_free(arg);
}

static void nvml_worker(void *arg)
{
	struct nvml_job *j = arg;
	struct gpu_backend *b = NULL;
	struct gpu_info info = { 0 };
	char *err = NULL, *lib = NULL;
	int r;

	r = gpu_backend_open(&j->opts, &b, &err);
	if (r >= 0) {
		(void)dl_iterate_phdr(find_nvml_object, &lib);
		job_set(j, "listing the GPUs", b);
		r = b->ops->discover(b, &info, &err);
		job_set(j, "shutting NVML down (nvmlShutdown)", NULL);
		gpu_backend_close(b);
	}
	(void)pthread_mutex_lock(&j->mu);
	j->r = r;
	j->err = err;
	j->info = info;
	j->lib = lib;
	(void)pthread_mutex_unlock(&j->mu);
}

static int nvml_job_new(const struct gpu_backend_opts *o, struct nvml_job **ret)
{
	struct nvml_job *j = calloc(1, sizeof(*j));
	int r;

	if (!j)
		return -ENOMEM;
	r = gpu_backend_opts_copy(&j->opts, o);
	if (r < 0) {
		free(j);
		return r;
	}
	(void)pthread_mutex_init(&j->mu, NULL);
	j->stage = "loading and initialising NVML (dlopen, nvmlInit_v2)";
	for (size_t i = 0; i < NVML_JOB_FDS; i++)
		j->fds[i] = -1;
	*ret = j;
	return 0;
}

/*
 * Runs the job; returns 0 when it finished (the caller owns @j), -ETIMEDOUT when it did not
 * within @timeout_ms (the worker owns @j now; *@ret_stage and *@ret_call say where it hangs),
 * or -errno when no thread started (the caller owns @j).
 */
static int nvml_job_run(struct nvml_job *j, unsigned timeout_ms, const char **ret_stage,
			const char **ret_call)
{
	struct runner *run;
	int r;

	r = runner_start(nvml_worker, j, nvml_job_drop, &run);
	if (r < 0)
		return r;
	if (runner_wait(run, now_usec() + (usec_t)timeout_ms * USEC_PER_MSEC)) {
		(void)runner_release(run); /* joined */
		return 0;
	}
	/* Where it hangs, read while @j is still ours; then let go, unless it just came back. */
	(void)pthread_mutex_lock(&j->mu);
	*ret_stage = j->stage;
	*ret_call = j->b ? atomic_load(&j->b->call) : NULL;
	(void)pthread_mutex_unlock(&j->mu);
	return runner_release(run) ? -ETIMEDOUT : 0;
}

/* --- the checks --- */

static const char *const fix_nvml_missing =
	"Install the NVIDIA driver for this GPU (Debian/Ubuntu: apt install nvidia-driver, or "
	"NVIDIA's .run installer), reboot, and check that nvidia-smi lists the GPU. If the driver "
	"is installed under another root, pass --driver-root DIR (or --nvml-lib PATH).";
static const char *const fix_mismatch =
	"Reboot the node: the driver was upgraded and the old kernel module is still loaded. "
	"Without a reboot, stop every GPU process and reload the modules: rmmod nvidia_uvm "
	"nvidia_drm nvidia_modeset nvidia && modprobe nvidia && modprobe nvidia_uvm";
static const char *const fix_not_loaded =
	"Load the NVIDIA kernel module: modprobe nvidia && modprobe nvidia_uvm. If that fails, "
	"dmesg says why: a module not built for the running kernel (run dkms autoinstall, or "
	"reinstall the driver) or one Secure Boot refuses (enroll the driver's key, or sign it).";

static void nvml_failed(struct doctor_driver *d, struct doctor_check *c)
{
	if (c)
		doctor_evidence(c, "%s", d->nvml_err ? d->nvml_err : strerror(-d->nvml_r));
}

static void check_nvml(struct doctor_driver *d)
{
	struct doctor *dr = d->dr;
	const struct gpu_info *in = &d->info;
	struct doctor_check *c;
	int r = d->nvml_r;

	if (d->nvml_hung) {
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL, "NVML did not answer within %u ms",
			       doctor_opts(dr)->timeout_ms);
		doctor_evidence(c, "stuck in: %s%s%s", d->hung_stage, d->hung_call ? ", in " : "",
				d->hung_call ? d->hung_call : "");
		doctor_fix(c,
			   "The NVIDIA driver is hung: look for Xid errors in the kernel log "
			   "(dmesg | grep -i xid). A GPU that fell off the bus, or a driver stuck "
			   "like this, needs a node reboot.");
		return;
	}
	if (r >= 0) {
		enum doctor_status st = in->n_devices ? DOCTOR_PASS : DOCTOR_WARN;

		c = doctor_add(dr, "driver.nvml", st,
			       in->n_devices ?
				       "NVML works: driver %s, CUDA %d.%d, %u GPU%s" :
				       "NVML works (driver %s, CUDA %d.%d) but sees %u GPUs%s",
			       in->driver_version, in->cuda_driver_version / 1000,
			       in->cuda_driver_version % 1000 / 10, in->n_devices,
			       in->n_devices == 1 ? "" : "s");
		doctor_evidence(c, "library: %s", d->lib_shown ? d->lib_shown : "(unknown path)");
		if (in->lib_version[0])
			doctor_evidence(c, "NVML version: %s", in->lib_version);
		for (unsigned i = 0; i < in->n_devices; i++) {
			const struct gpu_device *g = &in->devices[i];

			/* The architecture as nvidia-smi -q names it, to compare with. */
			doctor_evidence(
				c, "GPU %u: %s %s, %s (compute %d.%d), /dev/nvidia%u, PCI %s",
				g->index, g->name, g->uuid,
				gpu_arch_smi_name(gpu_arch_from_cc(g->cc_major, g->cc_minor)),
				g->cc_major, g->cc_minor, g->minor, g->pci_bus_id);
		}
		for (unsigned i = 0; i < in->n_skipped; i++)
			doctor_evidence(c, "left out: %s", in->skipped[i]);
		if (!in->n_devices)
			doctor_fix(c,
				   "Check that the GPU is seen on the bus (lspci | grep -i nvidia) "
				   "and that the kernel log has no 'fallen off the bus' or Xid "
				   "error (dmesg | grep -i -e xid -e nvrm); reseat or power-cycle "
				   "the GPU, then reboot.");
		return;
	}
	if (d->f->board.tegra) {
		bool expected = r == -ENOENT && d->f->board.l4t_major > 0 &&
				d->f->board.l4t_major < 38;

		c = doctor_add(
			dr, "driver.nvml", expected ? DOCTOR_SKIP : DOCTOR_WARN,
			expected     ? "no NVML on this Jetson (L4T R%d ships none): "
				       "driver.tegra checks the integrated GPU" :
			r == -ENOENT ? "NVML not found on this Jetson (L4T R%d): JetPack 7 "
				       "and later ship it; driver.tegra checks the integrated GPU" :
				       "NVML does not work on this Jetson (L4T R%d): driver.tegra "
				       "checks the integrated GPU",
			d->f->board.l4t_major);
		nvml_failed(d, c);
		if (!expected)
			doctor_fix(
				c,
				"JetPack 7 (L4T R38) and later ship NVML with the GPU driver: "
				"install the full JetPack (apt install nvidia-jetpack) or repair "
				"the L4T packages (apt install --reinstall nvidia-l4t-core "
				"nvidia-l4t-cuda).");
		return;
	}
	switch (r) {
	case -ENOENT:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL,
			       "NVML not found: the NVIDIA driver is not installed (nvidia-smi "
			       "fails the same way)");
		nvml_failed(d, c);
		doctor_fix(c, fix_nvml_missing);
		break;
	case -EXDEV:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL,
			       "Failed to initialize NVML: Driver/library version mismatch");
		nvml_failed(d, c);
		doctor_fix(c, fix_mismatch);
		break;
	case -ENXIO:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL,
			       "NVML loads but the NVIDIA kernel module is not loaded "
			       "(NVML_ERROR_DRIVER_NOT_LOADED)");
		nvml_failed(d, c);
		doctor_fix(c, fix_not_loaded);
		break;
	case -EACCES:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL,
			       "NVML may not open the GPU devices (NVML_ERROR_NO_PERMISSION)");
		nvml_failed(d, c);
		doctor_fix(c, "Run edgegpu doctor as root (sudo edgegpu doctor); if root is "
			      "refused too, check the modes of /dev/nvidiactl and /dev/nvidia* "
			      "(0666 by default, NVreg_DeviceFileMode).");
		break;
	case -ENOSYS:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL,
			       "the NVML library lacks functions edgegpu needs (too old, or not "
			       "NVIDIA's)");
		nvml_failed(d, c);
		doctor_fix(c,
			   "Install a current NVIDIA driver (R450 or later) whose libraries "
			   "match its kernel module; remove stray copies of libnvidia-ml.so.1 from "
			   "the library path.");
		break;
	default:
		c = doctor_add(dr, "driver.nvml", DOCTOR_FAIL, "NVML does not initialise");
		nvml_failed(d, c);
		doctor_fix(c,
			   "Run nvidia-smi: it shows the same error. Fix the driver first (the "
			   "kernel log, dmesg | grep -i nvrm, says more) and do not go on to the "
			   "container runtime or Kubernetes until nvidia-smi lists the GPU.");
		break;
	}
}

/* The first dotted number of @line: "... Kernel Module  550.54.15  Tue Mar ..." -> "550.54.15". */
static bool version_token(const char *line, char *out, size_t size)
{
	const char *p = line;

	while (*p && *p != '\n') {
		size_t n = strcspn(p, " \t\n");
		size_t digits = strspn(p, "0123456789.");

		if (n > 2 && digits == n && memchr(p, '.', n) && p[0] != '.' && n < size) {
			memcpy(out, p, n);
			out[n] = 0;
			return true;
		}
		p += n;
		p += strspn(p, " \t");
	}
	return false;
}

static void read_kmod_version(struct doctor_driver *d)
{
	char *text = NULL;

	d->kmod_r =
		doctor_read(d->dr, "/proc/driver/nvidia/version", (size_t)64 * 1024, &text, NULL);
	if (d->kmod_r == 0) {
		if (!version_token(text, d->f->kmod_version, sizeof(d->f->kmod_version)))
			d->f->kmod_version[0] = 0;
		d->kmod_line = strndup(text, strcspn(text, "\n"));
	}
	free(text);
}

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#endif

/* Where nvml-load.c looks under the driver root, in its order. */
static const char *const nvml_dirs[] = {
#ifdef MULTIARCH
	"/usr/lib/" MULTIARCH,
#endif
#ifdef __aarch64__
	"/usr/lib/aarch64-linux-gnu/nvidia",
#endif
	"/usr/lib64",
#ifdef MULTIARCH
	"/lib/" MULTIARCH,
#endif
	"/lib64",
	"/usr/lib",
};

/* The driver version in the library file's name: libnvidia-ml.so.550.54.15. */
static void lib_version_of(struct doctor_driver *d)
{
	const char *base, *v;

	if (!d->lib_shown)
		return;
	base = strrchr(d->lib_shown, '/');
	base = base ? base + 1 : d->lib_shown;
	v = startswith(base, "libnvidia-ml.so.") ? base + 16 : NULL;
	if (v && strchr(v, '.') && strspn(v, "0123456789.") == strlen(v) &&
	    strlen(v) < sizeof(d->lib_version))
		memcpy(d->lib_version, v, strlen(v) + 1);
}

/* @p: "<driver root><nvml_dirs[i]>/libnvidia-ml.so.1", as on the host (heap), or NULL. */
static char *lib_candidate(const struct doctor_driver *d, size_t i)
{
	const char *droot = d->cfg && d->cfg->driver_root ? d->cfg->driver_root : "/";

	return strdup_printf("%s%s/libnvidia-ml.so.1", streq(droot, "/") ? "" : droot,
			     nvml_dirs[i]);
}

static void check_versions(struct doctor_driver *d)
{
	const char *nvml = d->nvml_r >= 0 && !d->nvml_hung ? d->f->driver_version : "";
	const char *kmod = d->f->kmod_version, *lib = d->lib_version;
	const char *vals[] = { nvml, kmod, lib }, *first = NULL;
	bool differ = false;
	struct doctor_check *c;
	unsigned known = 0;

	for (size_t i = 0; i < ELEMENTSOF(vals); i++) {
		if (!vals[i][0])
			continue;
		known++;
		if (first && !streq(first, vals[i]))
			differ = true;
		first = first ? first : vals[i];
	}
	if (differ || d->nvml_r == -EXDEV) {
		c = doctor_add(d->dr, "driver.versions", DOCTOR_FAIL,
			       "Failed to initialize NVML: Driver/library version mismatch: kernel "
			       "module %s, NVIDIA libraries %s",
			       kmod[0] ? kmod : "unknown",
			       lib[0]  ? lib :
			       nvml[0] ? nvml :
					 "unknown");
		doctor_fix(c, fix_mismatch);
	} else if (d->kmod_r < 0 && d->f->board.tegra) {
		c = doctor_add(
			d->dr, "driver.versions", DOCTOR_SKIP,
			"no /proc/driver/nvidia/version: a Jetson before Thor runs the nvgpu "
			"driver, whose version is the L4T release (driver.tegra)");
	} else if (d->kmod_r < 0 && d->kmod_r != -ENOENT) {
		c = doctor_add(d->dr, "driver.versions", DOCTOR_WARN,
			       "the kernel module's version cannot be read: %s",
			       doctor_strerror(d->kmod_r));
	} else if (d->kmod_r < 0) {
		c = doctor_add(
			d->dr, "driver.versions", DOCTOR_FAIL,
			"the NVIDIA kernel module is not loaded (no /proc/driver/nvidia/version)");
		doctor_fix(c, fix_not_loaded);
	} else if (known < 2) {
		c = doctor_add(d->dr, "driver.versions", DOCTOR_WARN,
			       "only the kernel module's version is known (%s): NVML did not load, "
			       "see driver.nvml",
			       kmod[0] ? kmod : "unreadable");
	} else {
		c = doctor_add(d->dr, "driver.versions", DOCTOR_PASS,
			       "driver %s: the kernel module and the NVIDIA libraries agree",
			       first);
	}
	doctor_evidence(c, "kernel module: %s (/proc/driver/nvidia/version%s%s)",
			kmod[0] ? kmod : "unknown", d->kmod_line ? ": " : ", ",
			d->kmod_line	     ? d->kmod_line :
			d->kmod_r == -ENOENT ? "missing" :
					       doctor_strerror(d->kmod_r));
	doctor_evidence(c, "NVML driver version: %s",
			nvml[0] ? nvml : "unknown (NVML did not load)");
	doctor_evidence(c, "library file: %s%s%s%s", d->lib_shown ? d->lib_shown : "not found",
			d->lib_shown ? " (version " : "",
			d->lib_shown ? (lib[0] ? lib : "not in its name") : "",
			d->lib_shown ? ")" : "");
}

/* 1 when @path (on the host) is a character device, 0 when missing, -ENOTTY when another type. */
static int char_dev(struct doctor_driver *d, const char *path)
{
	struct stat st;
	int r = doctor_stat(d->dr, path, &st, NULL);

	if (r < 0)
		return 0;
	return S_ISCHR(st.st_mode) ? 1 : -ENOTTY;
}

static void node_line(struct doctor_check *c, const char *path, int r, const char *what)
{
	doctor_evidence(c, "%s: %s%s%s", path,
			r > 0  ? "character device" :
			r == 0 ? "missing" :
				 "not a character device",
			what ? ", " : "", what ? what : "");
}

static void check_devices(struct doctor_driver *d)
{
	enum doctor_status st = DOCTOR_PASS;
	const char *fix = NULL;
	char path[64], summary[160] = "";
	struct doctor_check *c;
	struct {
		const char *path;
		int r;
		const char *what;
		enum doctor_status if_bad;
	} ctl[] = {
		{ "/dev/nvidiactl", 0, "the driver's control node", DOCTOR_FAIL },
		{ "/dev/nvidia-uvm", 0, "CUDA needs it (nvidia_uvm module)", DOCTOR_FAIL },
		{ "/dev/nvidia-uvm-tools", 0, "for CUDA profilers and debuggers", DOCTOR_WARN },
	};
	unsigned n_nodes = 0, n_gpu_ok = 0, highest = 0;
	bool nvml = d->nvml_r >= 0 && !d->nvml_hung;

	if (d->f->board.tegra) {
		(void)doctor_add(d->dr, "driver.devices", DOCTOR_SKIP,
				 "a Jetson's integrated GPU: driver.tegra checks its device nodes");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(ctl); i++)
		ctl[i].r = char_dev(d, ctl[i].path);
	for (unsigned m = 0; m < 256; m++) {
		(void)snprintf(path, sizeof(path), "/dev/nvidia%u", m);
		if (char_dev(d, path) > 0) {
			n_nodes++;
			highest = m;
		}
	}
	for (unsigned i = 0; nvml && i < d->info.n_devices; i++) {
		(void)snprintf(path, sizeof(path), "/dev/nvidia%u", d->info.devices[i].minor);
		if (char_dev(d, path) > 0)
			n_gpu_ok++;
	}
	if (nvml && n_gpu_ok < d->info.n_devices) {
		st = DOCTOR_FAIL;
		(void)snprintf(summary, sizeof(summary),
			       "NVML sees %u GPUs but only %u have their /dev/nvidia node",
			       d->info.n_devices, n_gpu_ok);
	}
	for (size_t i = 0; i < ELEMENTSOF(ctl); i++) {
		if (ctl[i].r > 0 || ctl[i].if_bad < st || (ctl[i].if_bad == st && summary[0]))
			continue;
		st = ctl[i].if_bad;
		(void)snprintf(summary, sizeof(summary), "%s is %s", ctl[i].path,
			       ctl[i].r == 0 ? "missing" : "not a character device");
		if (i > 0)
			fix = "Load the UVM module, which creates /dev/nvidia-uvm: nvidia-modprobe -u "
			      "-c=0 (or modprobe nvidia_uvm), and make it load at boot: echo "
			      "nvidia_uvm > /etc/modules-load.d/nvidia-uvm.conf";
	}
	if (!nvml && !n_nodes && st != DOCTOR_FAIL) {
		st = DOCTOR_FAIL;
		(void)snprintf(summary, sizeof(summary), "no /dev/nvidia<N> GPU node");
	}
	if (st == DOCTOR_PASS && nvml && n_nodes > d->info.n_devices + d->info.n_skipped) {
		st = DOCTOR_WARN;
		(void)snprintf(summary, sizeof(summary),
			       "%u /dev/nvidia<N> nodes but NVML sees %u GPUs: one may have fallen "
			       "off the bus",
			       n_nodes, d->info.n_devices + d->info.n_skipped);
		fix = "A GPU the kernel knows but NVML does not list has usually fallen off the bus: "
		      "look for Xid 79 in dmesg (dmesg | grep -i xid), reseat or cool the GPU, and "
		      "reboot the node.";
	}
	if (st == DOCTOR_PASS)
		(void)snprintf(summary, sizeof(summary),
			       "%u GPU node%s%s, /dev/nvidiactl and /dev/nvidia-uvm present",
			       n_nodes, n_nodes == 1 ? "" : "s",
			       nvml ? " (one per GPU NVML sees)" : "");
	c = doctor_add(d->dr, "driver.devices", st, "%s", summary);
	for (size_t i = 0; i < ELEMENTSOF(ctl); i++)
		node_line(c, ctl[i].path, ctl[i].r, ctl[i].what);
	for (unsigned i = 0; nvml && i < d->info.n_devices; i++) {
		const struct gpu_device *g = &d->info.devices[i];

		(void)snprintf(path, sizeof(path), "/dev/nvidia%u", g->minor);
		node_line(c, path, char_dev(d, path), g->uuid);
	}
	if (n_nodes)
		doctor_evidence(c, "/dev/nvidia<N> GPU nodes: %u, the highest /dev/nvidia%u",
				n_nodes, highest);
	else
		doctor_evidence(c, "/dev/nvidia<N> GPU nodes: none");
	if (nvml)
		doctor_evidence(c, "GPUs NVML sees: %u", d->info.n_devices + d->info.n_skipped);
	else
		doctor_evidence(c, "GPUs NVML sees: unknown (NVML did not load)");
	if (st != DOCTOR_PASS)
		doctor_fix(
			c,
			fix ? fix :
			      "The NVIDIA device nodes appear when the kernel module loads: "
			      "modprobe nvidia && nvidia-modprobe -c=0 -u (or run nvidia-smi once "
			      "as root, which creates them). If they are still missing, the module "
			      "did not load: see dmesg.");
}

/* --- the layer --- */

/* The host root is this machine's own "/". */
static bool root_is_slash(const struct doctor_driver *d)
{
	const char *root = doctor_opts(d->dr)->host_root;

	return !root || strspn(root, "/") == strlen(root);
}

/*
 * The library under the host root: one of the driver root's (nvml-load.c's order) found inside
 * that root, never this machine's loader search path, never a link out of the root, never a
 * file that is not a regular one (dlopen of a FIFO blocks). Returns an O_PATH fd of it (its host
 * path in *@ret_host) or -ENOENT with *@reterr (may be NULL) saying what was tried, or -ENOMEM.
 */
static int lib_in_root(struct doctor_driver *d, char **ret_host, char **reterr)
{
	struct buf tried = { 0 };
	int r = -ENOENT;

	for (size_t i = 0; i < ELEMENTSOF(nvml_dirs) && r == -ENOENT; i++) {
		char *p = lib_candidate(d, i), *shown = p ? doctor_path(d->dr, p) : NULL;
		char *host = NULL;
		int fd = p ? doctor_open(d->dr, p, 0, &host) : -ENOMEM;
		int e = fd >= 0 ? fd_check_regular(fd) : fd;

		if (e == 0) {
			*ret_host = host;
			r = fd;
		} else {
			fd_close(fd);
			free(host);
			if (!shown || buf_printf(&tried, "%s%s%s%s%s", tried.len ? ", " : "", shown,
						 e == -ENOENT ? "" : " (",
						 e == -ENOENT ? "" : doctor_strerror(e),
						 e == -ENOENT ? "" : ")") < 0)
				r = -ENOMEM;
		}
		free(shown);
		free(p);
	}
	if (r == -ENOENT)
		r = set_error(
			reterr, -ENOENT,
			"NVML library libnvidia-ml.so.1 not found under the host root; tried %s",
			(const char *)tried.data);
	buf_release(&tried);
	return r;
}

/*
 * The library file NVML came from (@loaded, NULL when it did not load), or would have: the one
 * given, else the driver root's found as lib_in_root() finds it. Then the driver version in its
 * name: libnvidia-ml.so.1 -> libnvidia-ml.so.550.54.15.
 */
static void find_lib_file(struct doctor_driver *d, const char *loaded)
{
	bool given = d->cfg && d->cfg->nvml_lib && *d->cfg->nvml_lib;

	if (loaded)
		d->lib_shown = realpath(loaded, NULL);
	if (!d->lib_shown && given)
		d->lib_shown = realpath(d->cfg->nvml_lib, NULL);
	else if (!d->lib_shown)
		fd_close(lib_in_root(d, &d->lib_shown, NULL));
	lib_version_of(d);
}

static void run_nvml(struct doctor_driver *d)
{
	const struct config *cfg = d->cfg;
	struct gpu_backend_opts o = { .kind = GPU_BACKEND_NVML };
	bool slash = root_is_slash(d), given = cfg && cfg->nvml_lib && *cfg->nvml_lib;
	char lib_dial[FD_PATH_MAX] = "", proc_dial[FD_PATH_MAX], sys_dial[FD_PATH_MAX];
	char *driver_root = NULL;
	int fds[NVML_JOB_FDS] = { -1, -1, -1 };
	struct nvml_job *j = NULL;
	const char *stage = NULL, *call = NULL, *loaded = NULL;
	int r;

	o.lib_path = given ? cfg->nvml_lib : NULL;
	if (slash) {
		/* This host: NVML is loaded as the daemon loads it, loader search path and all. */
		driver_root = strdup(cfg && cfg->driver_root ? cfg->driver_root : "/");
		o.driver_root = driver_root;
		o.sysfs_root = "/sys";
		o.proc_root = "/proc";
		if (!driver_root) {
			r = -ENOMEM;
			goto out;
		}
	} else {
		/* Another root: whatever the backend opens is reached through an fd found inside
		 * it (/proc/self/fd/N); /proc and /sys missing there: a root that is no directory,
		 * where the backend reads nothing. */
		if (!given) {
			fds[0] = lib_in_root(d, &d->lib_shown, &d->nvml_err);
			if (fds[0] < 0) {
				r = fds[0];
				goto out;
			}
			o.lib_path = fd_path(fds[0], lib_dial);
			lib_version_of(d); /* the file tried, whether NVML loads from it or not */
		}
		fds[1] = doctor_open(d->dr, "/proc", O_DIRECTORY, NULL);
		fds[2] = doctor_open(d->dr, "/sys", O_DIRECTORY, NULL);
		o.proc_root = fds[1] >= 0 ? fd_path(fds[1], proc_dial) : "/dev/null";
		o.sysfs_root = fds[2] >= 0 ? fd_path(fds[2], sys_dial) : "/dev/null";
	}
	r = nvml_job_new(&o, &j);
	if (r < 0)
		goto out;
	memcpy(j->fds, fds, sizeof(fds)); /* the job's now: the worker may outlive this call */
	for (size_t i = 0; i < NVML_JOB_FDS; i++)
		fds[i] = -1;
	r = nvml_job_run(j, doctor_opts(d->dr)->timeout_ms, &stage, &call);
	if (r == -ETIMEDOUT) {
		j = NULL; /* the worker's now */
		d->nvml_hung = true;
		d->hung_stage = stage;
		d->hung_call = call;
		goto out;
	}
	if (r < 0)
		goto out;
	r = j->r;
	d->nvml_err = j->err;
	j->err = NULL;
	d->info = j->info;
	memset(&j->info, 0, sizeof(j->info));
	if (d->lib_shown) /* messages name the host's file, not the fd it was opened through */
		doctor_replace(&d->nvml_err, lib_dial, d->lib_shown);
	loaded = j->lib;
out:
	if (r < 0 && !d->nvml_hung && !d->nvml_err)
		d->nvml_err = strdup_printf("NVML was not tried: %s", strerror(-r));
	/* Not again where lib_in_root() above looked and found nothing. */
	if (!d->lib_shown && !d->nvml_hung && (slash || given))
		find_lib_file(d, loaded);
	d->nvml_r = r;
	nvml_job_free(j);
	for (size_t i = 0; i < NVML_JOB_FDS; i++)
		fd_close(fds[i]);
	free(driver_root);
}

static void fill_facts(struct doctor_driver *d)
{
	struct doctor_facts *f = d->f;

	if (d->nvml_r < 0 || d->nvml_hung)
		return;
	f->nvml_ok = true;
	(void)snprintf(f->driver_version, sizeof(f->driver_version), "%.63s",
		       d->info.driver_version);
	f->cuda_driver_version = d->info.cuda_driver_version;
	f->n_gpus = d->info.n_devices;
	for (unsigned i = 0; i < d->info.n_devices && i < DOCTOR_MAX_GPUS; i++) {
		(void)snprintf(f->uuids[i], sizeof(f->uuids[i]), "%s", d->info.devices[i].uuid);
		(void)snprintf(f->names[i], sizeof(f->names[i]), "%s", d->info.devices[i].name);
		f->mem_limits[i] = d->info.devices[i].mem_limits;
		f->mig |= d->info.devices[i].mig_enabled;
		f->integrated |= d->info.devices[i].integrated;
	}
	/* The label the node gets, made by the labels module itself: the value a pod selects. */
	labels_product(&d->info, d->cfg, f->product_label, sizeof(f->product_label));
}

void doctor_driver(struct doctor *dr)
{
	struct doctor_driver d = { .dr = dr, .f = doctor_facts(dr), .cfg = doctor_opts(dr)->cfg };

	doctor_tegra_detect(&d);
	run_nvml(&d);
	fill_facts(&d);
	read_kmod_version(&d);
	check_nvml(&d);
	check_versions(&d);
	check_devices(&d);
	doctor_check_tegra(&d);
	doctor_check_tegra_nodes(&d);
	doctor_check_smi(&d);
	doctor_check_persistence(&d);
	doctor_check_boot(&d);
	gpu_info_release(&d.info);
	free(d.nvml_err);
	free(d.lib_shown);
	free(d.kmod_line);
	buf_release(&d.unreadable);
}
