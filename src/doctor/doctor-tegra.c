/*
 * The driver layer's Jetson checks (doctor-driver.h): the board (driver.tegra) and the device
 * nodes its integrated GPU needs in a container (driver.tegra-nodes).
 *
 * The board facts come from tegra_board_read() (gpu-tegra.h), the one reader of
 * nv_tegra_release, soc0 and the device tree, which the Tegra backend uses too: it reads below
 * the host root as the doctor's host-root file system does (root_read_file(): an absolute link
 * is taken inside the root, nothing outside it is reached, only regular files are read). The
 * nodes: the L4T release's devices.csv, found where the backend's container description
 * (struct gpu_container, from tegra_open() on the host root) says, each looked for under the
 * host root's /dev and compared with the nodes that description delivers. The doctor's thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-compat.h"
#include "doctor-driver.h"
#include "file-read.h"
#include "gpu-backend.h"
#include "gpu-tegra.h"
#include "mount-specs.h"

#define FIX_TEGRA_DRIVER                                                                       \
	"The L4T GPU driver did not load: check lsmod | grep -e nvgpu -e nvidia and dmesg | "  \
	"grep -i -e nvgpu -e nvrm; reinstall the L4T kernel packages (apt install "            \
	"--reinstall nvidia-l4t-kernel nvidia-l4t-kernel-dtbs) or reflash the board with its " \
	"JetPack release, then reboot."
#define FIX_TEGRA_RELEASE                                                                     \
	"/etc/nv_tegra_release comes with the nvidia-l4t-core package (apt install "          \
	"--reinstall nvidia-l4t-core); where the doctor or a device plugin runs in a "        \
	"container, mount the host's /etc/nv_tegra_release read-only: NVIDIA's tools do not " \
	"detect the board without it."
#define FIX_TEGRA_NODES                                                                            \
	"A container gets the integrated GPU only with these nodes. They appear when the L4T "     \
	"kernel modules load (nvgpu, nvmap, host1x; nvidia on Thor): check lsmod and dmesg | "     \
	"grep -i -e nvgpu -e nvmap -e nvrm, reinstall the L4T kernel packages (apt install "       \
	"--reinstall nvidia-l4t-kernel) and reboot. Where edgegpu runs in a container, mount the " \
	"host's /dev (the Jetson overlay mounts it under the host root)."
#define FIX_TEGRA_CSV_NODES                                                                        \
	"devices.csv, the L4T release's list of the nodes a container gets, comes with JetPack's " \
	"container packages: apt install --reinstall nvidia-container; where edgegpu runs in a "   \
	"container, mount the host's /etc/nvidia-container-runtime under the host root."
#define FIX_TEGRA_BACKEND                                                                           \
	"edgegpu's Tegra backend reads the board below the host root: run the doctor with "         \
	"--host-root where the host's /etc, /sys, /proc and /dev are mounted (/host in the Jetson " \
	"DaemonSet) and repair the file the evidence names."

/* The board files tegra_board_read() reads; a file there but not readable is named. */
static const char *const board_files[] = {
	"/etc/nv_tegra_release",    "/proc/device-tree/compatible", "/proc/device-tree/model",
	"/sys/devices/soc0/family", "/sys/devices/soc0/soc_id",
};

/* The core nodes that show the GPU driver came up: nvgpu (L4T before R38) or OpenRM (Thor). */
static const char *const nvgpu_any[] = { "/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl" };
static const char *const openrm[] = { "/dev/nvidiactl", "/dev/nvidia0" };

static const char *host_root(const struct doctor *dr)
{
	const char *root = doctor_opts(dr)->host_root;

	return root && *root ? root : "/";
}

static bool is_thor(const struct gpu_board *b)
{
	return b->l4t_major >= 38 || streq(b->soc, "tegra264");
}

void doctor_tegra_detect(struct doctor_driver *d)
{
	struct gpu_board *b = &d->f->board;

	if (tegra_board_read(host_root(d->dr), b) < 0)
		memset(b, 0, sizeof(*b));
	/* The reader leaves what it cannot read empty; the report says which file that was. */
	for (size_t i = 0; i < ELEMENTSOF(board_files); i++) {
		int fd = doctor_open(d->dr, board_files[i], 0, NULL);
		int r = fd >= 0 ? fd_check_regular(fd) : fd;

		fd_close(fd);
		doctor_note_unreadable(&d->unreadable, board_files[i], r);
	}
}

void doctor_check_tegra(struct doctor_driver *d)
{
	const struct gpu_board *b = &d->f->board;
	bool thor = is_thor(b), any = false;
	struct doctor_check *c;
	const char *missing = NULL;
	char l4t[64];
	char *rel = doctor_path(d->dr, "/etc/nv_tegra_release");

	if (!b->tegra) {
		c = doctor_add(d->dr, "driver.tegra", DOCTOR_SKIP, "not a Jetson/Tegra board");
		doctor_evidence(c, "no /etc/nv_tegra_release, no nvidia,tegra* in "
				   "/proc/device-tree/compatible, no Tegra soc0 family");
		doctor_evidence_unreadable(c, &d->unreadable);
		free(rel);
		return;
	}
	doctor_l4t_text(b, l4t, sizeof(l4t));
	if (thor) {
		for (size_t i = 0; i < ELEMENTSOF(openrm) && !missing; i++)
			if (!doctor_host_exists(d->dr, openrm[i]))
				missing = openrm[i];
	} else {
		for (size_t i = 0; i < ELEMENTSOF(nvgpu_any); i++)
			any = any || doctor_host_exists(d->dr, nvgpu_any[i]);
		if (!doctor_host_exists(d->dr, "/dev/nvmap"))
			missing = "/dev/nvmap";
		else if (!any)
			missing = nvgpu_any[0];
	}
	if (missing) {
		c = doctor_add(
			d->dr, "driver.tegra", DOCTOR_FAIL,
			"Jetson board but the integrated GPU's device node %s is missing: the "
			"GPU driver did not come up",
			missing);
		doctor_fix(c, FIX_TEGRA_DRIVER);
	} else if (!b->l4t[0]) {
		c = doctor_add(d->dr, "driver.tegra", DOCTOR_WARN,
			       "Jetson board (%s) but the L4T release is unknown: "
			       "/etc/nv_tegra_release is %s",
			       b->soc[0] ? b->soc : "Tegra",
			       doctor_host_exists(d->dr, "/etc/nv_tegra_release") ?
				       "not in NVIDIA's format" :
				       "missing");
		doctor_fix(c, FIX_TEGRA_RELEASE);
	} else {
		c = doctor_add(d->dr, "driver.tegra", DOCTOR_PASS,
			       "Jetson board: L4T %s, SoC %s, integrated GPU nodes present", l4t,
			       b->soc[0] ? b->soc : "unknown");
	}
	doctor_evidence(c, "model: %s", b->model[0] ? b->model : "unknown");
	doctor_evidence(c, "SoC: %s, chip id %u", b->soc[0] ? b->soc : "unknown", b->chip_id);
	doctor_evidence(c, "L4T: %s (%s)", b->l4t[0] ? b->l4t : "unknown", rel ? rel : "");
	doctor_evidence(c, "JetPack: %s", b->jetpack[0] ? b->jetpack : "unknown");
	doctor_evidence(c, "power mode: %s", b->power_mode[0] ? b->power_mode : "unknown");
	doctor_evidence(c, "GPU driver: %s",
			thor ? "OpenRM (/dev/nvidia*), L4T R38 and later" :
			       "nvgpu (/dev/nvhost-*, /dev/nvmap)");
	for (size_t i = 0; i < (thor ? ELEMENTSOF(openrm) : ELEMENTSOF(nvgpu_any)); i++) {
		const char *p = thor ? openrm[i] : nvgpu_any[i];

		doctor_evidence(c, "%s: %s", p,
				doctor_host_exists(d->dr, p) ? "present" : "missing");
	}
	if (!thor)
		doctor_evidence(c, "/dev/nvmap: %s",
				doctor_host_exists(d->dr, "/dev/nvmap") ? "present" : "missing");
	doctor_evidence_unreadable(c, &d->unreadable);
	if (!missing && !d->f->nvml_ok) {
		d->f->n_gpus = 1;
		d->f->integrated = true;
	}
	free(rel);
}

/* --- driver.tegra-nodes --- */

/* Whether @pattern's component has glob(7) magic. */
static bool magic(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strchr("*?[", s[i]))
			return true;
	return false;
}

/*
 * How many host paths under the root match @pattern (absolute; glob(7) in any component, a
 * leading dot matched only by a dot), at most @max. @dir is the part matched so far ("" for
 * the root). Directories are listed inside the root (doctor_opendir()): nothing outside it.
 */
static unsigned root_glob(const struct doctor *dr, const char *dir, const char *pattern,
			  unsigned max)
{
	const char *comp = pattern + strspn(pattern, "/");
	size_t n = strcspn(comp, "/");
	const char *rest = comp + n;
	unsigned found = 0;
	struct dirent *de;
	char *pat = NULL;
	DIR *dd;
	int r;

	if (!*comp)
		return doctor_host_exists(dr, dir[0] ? dir : "/") ? 1 : 0;
	if (!magic(comp, n)) {
		char *next = strdup_printf("%s/%.*s", dir, (int)n, comp);
		unsigned k = next ? root_glob(dr, next, rest, max) : 0;

		free(next);
		return k;
	}
	dd = doctor_opendir(dr, dir[0] ? dir : "/", &r);
	pat = strndup(comp, n);
	while (dd && pat && found < max && (de = readdir(dd))) {
		char *next;

		if (streq(de->d_name, ".") || streq(de->d_name, "..") ||
		    fnmatch(pat, de->d_name, FNM_PERIOD) != 0)
			continue;
		next = strdup_printf("%s/%s", dir, de->d_name);
		if (next)
			found += root_glob(dr, next, rest, max - found);
		free(next);
	}
	if (dd)
		(void)closedir(dd);
	free(pat);
	return found;
}

/* Whether the backend's container delivers @node: one of its control nodes or patterns. */
static bool delivered(const struct gpu_container *ct, const struct gpu_device *g, const char *node)
{
	for (unsigned i = 0; i < g->n_nodes; i++)
		if (streq(g->nodes[i], node))
			return true;
	for (size_t i = 0; ct && i < ct->n_ctl_nodes; i++)
		if (streq(ct->ctl_nodes[i], node))
			return true;
	for (size_t i = 0; ct && i < ct->n_node_globs; i++)
		if (fnmatch(ct->node_globs[i], node, FNM_PATHNAME) == 0)
			return true;
	return false;
}

/* The backend's iGPU: its device, or NULL. */
static const struct gpu_device *igpu(const struct gpu_info *info)
{
	for (unsigned i = 0; i < info->n_devices; i++)
		if (info->devices[i].integrated)
			return &info->devices[i];
	return NULL;
}

/*
 * driver.tegra-nodes. The backend's container lists every node any L4T release has, each
 * delivered when present; which ones this release has is the BSP's devices.csv (in the
 * container's mount_specs_dir), whose `dev` lines the toolkit mounts. A node it names that is
 * not under /dev is missing for every container: a warning, since a module without an engine
 * (DLA, a codec, a display) lacks that engine's nodes; driver.tegra fails for the GPU's own.
 */
void doctor_check_tegra_nodes(struct doctor_driver *d)
{
	struct gpu_backend_opts o = {
		.kind = GPU_BACKEND_TEGRA,
		.host_root = host_root(d->dr),
		.tegra_device_id = d->dr->o->cfg ? d->dr->o->cfg->tegra_device_id : NULL,
		.tegra_mem_mib = d->dr->o->cfg ? d->dr->o->cfg->tegra_mem_mib : 0
	};
	struct gpu_info info = { 0 };
	struct gpu_backend *b = NULL;
	const struct gpu_device *g;
	const struct gpu_container *ct;
	struct doctor_check *c;
	struct buf missing = { 0 }, extra = { 0 };
	char *err = NULL, *csv = NULL, *text = NULL, *shown = NULL;
	struct mount_specs specs = { 0 };
	unsigned listed = 0, present = 0;
	size_t len = 0;
	int r;

	if (!d->f->board.tegra) {
		(void)doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_SKIP,
				 "not a Jetson/Tegra board: the GPU nodes are driver.devices'");
		return;
	}
	r = tegra_open(&o, NULL, &b, &err);
	if (r >= 0)
		r = b->ops->discover(b, &info, &err);
	g = r >= 0 ? igpu(&info) : NULL;
	if (!g) {
		c = doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_FAIL,
			       "edgegpu's Tegra backend finds no integrated GPU on this board");
		doctor_evidence(c, "Tegra backend: %s",
				r < 0 ? (err ? err : strerror(-r)) : "no integrated GPU listed");
		doctor_fix(c, FIX_TEGRA_BACKEND);
		goto out;
	}
	ct = g->container ? g->container : info.container;
	csv = path_join(ct && ct->mount_specs_dir ? ct->mount_specs_dir :
						    "/etc/nvidia-container-runtime/"
						    "host-files-for-container.d",
			"devices.csv");
	shown = csv ? doctor_path(d->dr, csv) : NULL;
	r = csv ? doctor_read(d->dr, csv, DOCTOR_HOST_FILE_MAX, &text, &len) : -ENOMEM;
	/* The one CSV reader (mount-specs.h): its dev entries are the release's nodes. */
	if (r >= 0 && mount_specs_parse(&specs, csv, text, len) < 0)
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < specs.n; i++) {
		const char *p = specs.v[i].path;
		unsigned k;

		if (specs.v[i].type != MOUNT_SPEC_DEV || !startswith(p, "/dev/"))
			continue;
		listed++;
		k = root_glob(d->dr, "", p, 256);
		present += k > 0;
		if (!k && buf_printf(&missing, "%s%s", missing.len ? ", " : "", p) < 0)
			r = -ENOMEM;
		/* /dev/nvidia<N> is a GPU's own node, which the backend names from NVML (the
		 * doctor opens it without): on a board with a discrete card it may be the card's. */
		if (k && !magic(p, strlen(p)) && !delivered(ct, g, p) &&
		    fnmatch("/dev/nvidia[0-9]*", p, 0) != 0 &&
		    buf_printf(&extra, "%s%s", extra.len ? ", " : "", p) < 0)
			r = -ENOMEM;
	}
	if (r == -ENOMEM) {
		c = doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_FAIL, "out of memory");
	} else if (r < 0) {
		c = doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_WARN,
			       "no devices.csv: which nodes this L4T release has is unknown");
		doctor_evidence(c, "%s: %s", shown ? shown : "devices.csv", doctor_strerror(r));
		doctor_fix(c, FIX_TEGRA_CSV_NODES);
	} else if (missing.len) {
		c = doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_WARN,
			       "%u of the %u nodes this L4T release lists are missing: %s",
			       listed - present, listed, (const char *)missing.data);
		doctor_fix(c, FIX_TEGRA_NODES);
	} else {
		c = doctor_add(d->dr, "driver.tegra-nodes", DOCTOR_PASS,
			       "the %u nodes this L4T release lists are present", listed);
	}
	if (r >= 0)
		doctor_evidence(c, "%s: %u dev entries, %u present", shown ? shown : "devices.csv",
				listed, present);
	if (missing.len)
		doctor_evidence(c, "missing: %s", (const char *)missing.data);
	/* Present and mounted by the toolkit, but not in edgegpu's device-specs: say so. */
	if (extra.len)
		doctor_evidence(
			c, "not in edgegpu's node list (CDI and device-specs leave them out): %s",
			(const char *)extra.data);
	doctor_evidence(c,
			"edgegpu's Tegra backend: %zu control nodes, %zu node patterns, the "
			"GPU's own %u",
			ct ? ct->n_ctl_nodes : 0, ct ? ct->n_node_globs : 0, g->n_nodes);
out:
	mount_specs_release(&specs);
	buf_release(&missing);
	buf_release(&extra);
	gpu_info_release(&info);
	gpu_backend_close(b);
	free(err);
	free(csv);
	free(text);
	free(shown);
}
