/*
 * plugin.gpumem-enforcement: which enforcement of nvidia.com/gpumem limits is in force on this
 * node (driver, interposer, both, or accounting only) and each condition a stronger one lacks,
 * with its fix; then the mode of each gpumem container the daemon wrote
 * (<stateDir>/alloc/<name>/mode). It decides with enforce_decide() from the facts the daemon
 * reads too (the GPUs' memory-limit support from discovery, the config, the host root's
 * cgroup file system, the hook binary, the installed library), so the doctor and the node
 * label never disagree. Doctor's thread; reads the host through doctor-hostfs.h only.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "doctor-int.h"
#include "enforce-mode.h"

#define MODE_FILE_MAX  256
#define ALLOCS_SHOWN   32
#define INTERPOSER_LIB "libedgegpu-cuda.so"

static const char fix_driver_unsupported[] =
	"The GPUs' driver does not limit memory per cgroup (nvmlDeviceGetMemoryLimits_v1 is "
	"missing or answers NOT_SUPPORTED): install an NVIDIA driver of CUDA 13.4 or later for "
	"gpumem limits the driver enforces; until then the interposer (libedgegpu-cuda.so) "
	"enforces them.";
static const char fix_cgroup_v1[] =
	"The host runs cgroup v1 (no /sys/fs/cgroup/cgroup.controllers), and the driver's memory "
	"limits need cgroup v2: boot with systemd.unified_cgroup_hierarchy=1 (the default of "
	"current distributions), then restart the kubelet and the container runtime.";
static const char fix_mig[] =
	"MIG is enabled on a GPU, and the driver's memory limits do not apply to MIG devices: "
	"disable MIG on the GPUs that serve nvidia.com/gpumem (nvidia-smi -i N -mig 0).";
static const char fix_not_cdi[] =
	"Devices reach containers without edgegpu's CDI spec, so the toolkit's memory-limit hook "
	"never runs: set deviceListStrategy to cdi-cri or cdi-annotations "
	"(--device-list-strategy, DEVICE_LIST_STRATEGY) with the NVIDIA runtime in CDI mode.";
static const char fix_no_hook[] =
	"/usr/bin/nvidia-cdi-hook on the host lacks the apply-cuda-memory-limits subcommand, or is "
	"missing: install an NVIDIA Container Toolkit whose nvidia-cdi-hook has it (toolkit PR "
	"#2075, September 2026 or later), then restart the edgegpu pod so that its CDI spec "
	"carries the hook.";
static const char fix_driver_off[] =
	"The driver's memory limits are turned off in the config: set "
	"edgegpu.sharing.memory.enforcement.driver: true to use them where the node has them.";
static const char fix_interposer_missing[] =
	"libedgegpu-cuda.so is not installed in the state directory's lib/: the daemon installs it "
	"at start from edgegpu.sharing.memory.enforcement.library (in the image). Check the "
	"daemon's log (module=enforce) and that edgegpu.sharing.memory.enforcement.stateDir is a "
	"host path mounted into the pod at the same path.";
static const char fix_interposer_off[] =
	"The interposer is turned off in the config: set "
	"edgegpu.sharing.memory.enforcement.interposer: true, or nothing stops a container that "
	"allocates past its slice on a node without the driver's limits.";

/* What each reason enforce_decide() gives means, and its fix ("" for those with none). */
static const struct {
	const char *reason, *what, *fix;
} reasons[] = {
	{ "off", "turned off in the config", NULL },
	{ "driver-unsupported", "the GPUs' driver has no per-cgroup memory limits",
	  fix_driver_unsupported },
	{ "integrated", "a Jetson/Tegra integrated GPU (no driver memory limits known)", "" },
	{ "cgroup-v1", "the host runs cgroup v1", fix_cgroup_v1 },
	{ "mig", "MIG is enabled", fix_mig },
	{ "not-cdi", "devices are not delivered through edgegpu's CDI spec", fix_not_cdi },
	{ "no-cdi-hook", "nvidia-cdi-hook lacks apply-cuda-memory-limits", fix_no_hook },
	{ "not-installed", "libedgegpu-cuda.so is not installed", fix_interposer_missing },
};

/* Each missing condition of @path ("driver", "interposer") with its fix; the first fix kept. */
static void add_missing(struct doctor_check *c, const char *path, const char *reason,
			const char *off_fix, const char **first_fix)
{
	for (size_t i = 0; i < ELEMENTSOF(reasons); i++) {
		const char *fix = reasons[i].fix ? reasons[i].fix : off_fix;

		if (!streq(reason, reasons[i].reason))
			continue;
		doctor_evidence(c, "%s enforcement lacks: %s (%s)%s%s", path, reasons[i].what,
				reason, *fix ? ". Fix: " : "", fix);
		if (*fix && !*first_fix)
			*first_fix = fix;
		return;
	}
	doctor_evidence(c, "%s enforcement lacks: %s", path, reason);
}

static bool host_exists(const struct doctor *dr, const char *path)
{
	struct stat st;

	return path && doctor_stat(dr, path, &st, NULL) == 0;
}

/* nvidia-cdi-hook's scan (cdi_hook_has_memory_limits()'s answer @r), said in the evidence. */
static void hook_evidence(struct doctor_check *c, int r)
{
	if (r == 1)
		doctor_evidence(c, "%s: has %s", CDI_MEMLIMIT_HOOK_PATH, CDI_MEMLIMIT_SUBCOMMAND);
	else if (r == 0)
		doctor_evidence(c, "%s: present, without %s (an older toolkit)",
				CDI_MEMLIMIT_HOOK_PATH, CDI_MEMLIMIT_SUBCOMMAND);
	else
		doctor_evidence(c, "%s: %s", CDI_MEMLIMIT_HOOK_PATH, doctor_strerror(r));
}

/* The mode of each gpumem container allocation the daemon recorded (<stateDir>/alloc). */
static void alloc_modes(struct doctor *dr, struct doctor_check *c, const char *state_dir)
{
	char *dir = path_join(state_dir, "alloc");
	unsigned shown = 0, more = 0;
	struct dirent *de;
	DIR *d;
	int r;

	if (!dir)
		return;
	d = doctor_opendir(dr, dir, &r);
	if (!d) {
		if (r != -ENOENT)
			doctor_evidence(c, "%s: %s", dir, doctor_strerror(r));
		free(dir);
		return;
	}
	while ((de = readdir(d))) {
		char *path, *text = NULL;

		if (de->d_name[0] == '.')
			continue;
		if (shown == ALLOCS_SHOWN) {
			more++;
			continue;
		}
		path = path_join(dir, de->d_name);
		if (!path)
			break;
		{
			char *mode = path_join(path, "mode");

			r = mode ? doctor_read(dr, mode, MODE_FILE_MAX, &text, NULL) : -ENOMEM;
			free(mode);
		}
		free(path);
		if (r == 0) {
			text[strcspn(text, "\n")] = 0;
			doctor_evidence(c, "container allocation %.64s: %.128s", de->d_name,
					utf8_valid(text) ? text : "(not UTF-8)");
		} else {
			doctor_evidence(c, "container allocation %.64s: mode %s", de->d_name,
					doctor_strerror(r));
		}
		free(text);
		shown++;
	}
	if (more)
		doctor_evidence(c, "... and %u more container allocations", more);
	closedir(d);
	free(dir);
}

void doctor_enforce(struct doctor *dr)
{
	const struct config *cfg = doctor_opts(dr)->cfg;
	const struct doctor_facts *f = doctor_facts(dr);
	const struct config_enforcement *ce;
	struct enforce_inputs in = { .equal_limits = true };
	struct enforce_verdict v;
	const char *first_fix = NULL;
	struct doctor_check *c;
	char *lib_dir = NULL, *lib = NULL;
	int hook_r;

	if (!cfg || cfg->gpumem.devices.n_refs == 0) {
		(void)doctor_add(dr, "plugin.gpumem-enforcement", DOCTOR_SKIP,
				 "no nvidia.com/gpumem resource in the config");
		return;
	}
	ce = &cfg->gpumem.enforcement;
	in.want_driver = ce->driver;
	in.want_interposer = ce->interposer;
	in.gpus_support_limits = f->nvml_ok && f->n_gpus > 0;
	for (unsigned i = 0; i < f->n_gpus && i < DOCTOR_MAX_GPUS; i++)
		if (f->mem_limits[i] != GPU_MEM_LIMITS_SUPPORTED)
			in.gpus_support_limits = false;
	in.mig = f->mig;
	in.integrated = f->integrated || f->board.tegra;
	in.cgroup_v2 = host_exists(dr, "/sys/fs/cgroup/cgroup.controllers");
	in.cdi_delivery = cfg->device_list_strategy &
			  (CONFIG_DLS_CDI_ANNOTATIONS | CONFIG_DLS_CDI_CRI);
	lib_dir = path_join(ce->state_dir, "lib");
	lib = lib_dir ? path_join(lib_dir, INTERPOSER_LIB) : NULL;
	in.interposer_installed = host_exists(dr, lib);

	hook_r = cdi_hook_has_memory_limits(doctor_opts(dr)->host_root, CDI_MEMLIMIT_HOOK_PATH);
	in.cdi_hook = hook_r == 1;
	enforce_decide(&in, &v);
	c = doctor_add(dr, "plugin.gpumem-enforcement",
		       v.mode == ENFORCE_ACCOUNTING ? DOCTOR_WARN : DOCTOR_PASS,
		       "gpumem limits: %s%s", enforce_mode_name(v.mode),
		       v.mode == ENFORCE_ACCOUNTING ?
			       " only (nothing stops a container that allocates past its slice)" :
			       "");
	for (unsigned i = 0; i < f->n_gpus && i < DOCTOR_MAX_GPUS; i++)
		doctor_evidence(c, "GPU %u %.96s: driver memory limits %s", i, f->uuids[i],
				f->mem_limits[i] == GPU_MEM_LIMITS_SUPPORTED   ? "supported" :
				f->mem_limits[i] == GPU_MEM_LIMITS_UNSUPPORTED ? "not supported" :
										 "unknown");
	doctor_evidence(c, "cgroup: %s", in.cgroup_v2 ? "v2" : "v1");
	hook_evidence(c, hook_r);
	doctor_evidence(c, "interposer library %s: %s", lib ? lib : INTERPOSER_LIB,
			in.interposer_installed ? "installed" : "missing");
	/* Every condition the driver path lacks, not only the first enforce_decide() names. */
	{
		const struct {
			bool missing;
			const char *reason;
		} drv[] = {
			{ !in.want_driver, "off" },
			{ in.integrated, "integrated" },
			{ !in.integrated && !in.gpus_support_limits, "driver-unsupported" },
			{ !in.cgroup_v2, "cgroup-v1" },
			{ in.mig, "mig" },
			{ !in.cdi_delivery, "not-cdi" },
			{ !in.cdi_hook, "no-cdi-hook" },
		};

		for (size_t i = 0; i < ELEMENTSOF(drv); i++)
			if (drv[i].missing)
				add_missing(c, "driver", drv[i].reason, fix_driver_off, &first_fix);
	}
	if (*v.interposer_reason)
		add_missing(c, "interposer", v.interposer_reason, fix_interposer_off, &first_fix);
	alloc_modes(dr, c, ce->state_dir);
	if (v.mode == ENFORCE_ACCOUNTING) {
		/* The interposer is what works on any node: its fix first, then the driver's. */
		doctor_fix(c, streq(v.interposer_reason, "off")		  ? fix_interposer_off :
			      streq(v.interposer_reason, "not-installed") ? fix_interposer_missing :
									    first_fix);
	}
	free(lib);
	free(lib_dir);
}
