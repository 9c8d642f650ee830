/*
 * The doctor's runtime layer, second part (doctor-runtime.h): the NVIDIA Container Toolkit
 * (runtime.toolkit), CDI specs (runtime.cdi), the toolkit's mode on a Jetson (runtime.tegra-mode)
 * and Docker's daemon.json (runtime.docker).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "doctor-runtime.h"
#include "doctor-toml.h"
#include "file-read.h"
#include "ytree.h"

#define FIX_TOOLKIT_MISSING                                                                \
	"Install the NVIDIA Container Toolkit from NVIDIA's repository (apt-get install "  \
	"nvidia-container-toolkit, or dnf install nvidia-container-toolkit): it provides " \
	"nvidia-container-runtime and nvidia-ctk"
#define FIX_TOOLKIT_PARTIAL                                                         \
	"Reinstall the NVIDIA Container Toolkit (nvidia-container-toolkit and "     \
	"nvidia-container-toolkit-base) so that nvidia-container-runtime-hook and " \
	"/etc/nvidia-container-runtime/config.toml are present"
#define FIX_CDI_NONE                                                                              \
	"Only needed for the cdi-annotations and cdi-cri device list strategies: edgegpu writes " \
	"/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json when it starts with one of them; "    \
	"for NVIDIA's spec run nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
#define FIX_CDI_PARSE                                                                         \
	"Fix or delete the CDI spec named above (runtimes refuse a broken spec); regenerate " \
	"NVIDIA's with nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
#define FIX_CDI_STALE                                                                        \
	"Regenerate the specs for the GPUs present: nvidia-ctk cdi generate "                \
	"--output=/etc/cdi/nvidia.yaml for kind nvidia.com/gpu; edgegpu rewrites "           \
	"/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json when it starts, so restart the " \
	"edgegpu pod"
#define FIX_DOCKER_MISSING                                                          \
	"nvidia-ctk runtime configure --runtime=docker --set-as-default (it edits " \
	"/etc/docker/daemon.json), then systemctl restart docker"
#define FIX_DOCKER_NOT_DEFAULT                                                                    \
	"Run containers with --runtime=nvidia (or --gpus all), or make nvidia the default: "      \
	"nvidia-ctk runtime configure --runtime=docker --set-as-default, then systemctl restart " \
	"docker"
#define FIX_DOCKER_JSON                                                                        \
	"Fix the JSON of /etc/docker/daemon.json at the line shown (dockerd refuses to start " \
	"with it), then systemctl restart docker"

#define FIX_TEGRA_NO_CONFIG                                                                      \
	"Install the NVIDIA Container Toolkit from JetPack (apt install nvidia-container, or "   \
	"nvidia-container-toolkit): it writes /etc/nvidia-container-runtime/config.toml, whose " \
	"mode auto is csv on a Jetson. In CSV mode run containers with --runtime=nvidia: "       \
	"docker --gpus is not supported there."
#define FIX_TEGRA_CSV                                                                               \
	"In CSV mode the runtime mounts what devices.csv, drivers.csv and l4t.csv name: reinstall " \
	"the JetPack packages that ship them (apt install --reinstall nvidia-container "            \
	"nvidia-l4t-core), or set mode = \"cdi\" in /etc/nvidia-container-runtime/config.toml "     \
	"with a CDI spec for the board. Run containers with --runtime=nvidia: docker --gpus is "    \
	"not supported in CSV mode."
#define FIX_TEGRA_CDI                                                                               \
	"In CDI mode the runtime needs a spec that names the integrated GPU: start edgegpu with "   \
	"a CDI device list strategy (it writes /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json " \
	"with the device tegra, the ID pods get), or set mode = \"csv\" in "                        \
	"/etc/nvidia-container-runtime/config.toml."
#define FIX_TEGRA_MODE                                                                              \
	"Set mode = \"csv\" (or \"auto\", or \"cdi\" with a CDI spec for the board) under "         \
	"[nvidia-container-runtime] in /etc/nvidia-container-runtime/config.toml: the legacy mode " \
	"needs NVML and a discrete GPU."

#define MAX_SPECS 256
#define MAX_NAMES 4096

/* --- runtime.toolkit --- */

void doctor_runtime_toolkit(struct doctor *dr)
{
	static const char *const need[] = { "nvidia-container-runtime", "nvidia-ctk" };
	static const char *const cfg = "/etc/nvidia-container-runtime/config.toml";
	struct doctor_runtime_notes n = { 0 };
	enum doctor_status st = DOCTOR_PASS;
	struct doctor_toml *t = NULL;
	struct stat st_cfg;
	char *p;
	int r;

	for (size_t i = 0; i < ELEMENTSOF(need); i++) {
		p = doctor_runtime_find_bin(dr, need[i], NULL);
		doctor_runtime_note(&n, "%s: %s", need[i], p ? p : "not found");
		if (!p)
			st = DOCTOR_FAIL;
		free(p);
	}
	if (st == DOCTOR_FAIL) {
		doctor_runtime_note(
			&n,
			"searched /usr/bin /usr/local/bin /usr/sbin /bin /usr/local/nvidia/toolkit");
		doctor_runtime_emit(dr, &n, "runtime.toolkit", DOCTOR_FAIL,
				    "the NVIDIA Container Toolkit is not installed",
				    FIX_TOOLKIT_MISSING);
		return;
	}
	p = doctor_runtime_find_bin(dr, "nvidia-container-runtime-hook", NULL);
	doctor_runtime_note(&n, "nvidia-container-runtime-hook: %s", p ? p : "not found");
	if (!p)
		st = DOCTOR_WARN;
	free(p);
	if (doctor_stat(dr, cfg, &st_cfg, NULL) < 0) {
		doctor_runtime_note(&n, "%s: absent", cfg);
		st = DOCTOR_WARN;
	} else if ((r = doctor_runtime_toml_load(dr, &n, cfg, &t, NULL)) < 0) {
		doctor_runtime_emit(dr, &n, "runtime.toolkit", DOCTOR_FAIL,
				    r == -EINVAL ? "the toolkit's config is not valid TOML" :
						   "the toolkit's config cannot be read",
				    r == -EINVAL ? FIX_TOML : FIX_TOOLKIT_PARTIAL);
		return;
	} else {
		static const char *const mode[] = { "nvidia-container-runtime", "mode" };
		const struct doctor_toml_entry *m = doctor_toml_get(t, mode, 2);

		doctor_runtime_note(&n, "%s: mode %s", cfg,
				    m && m->value ? m->value : "auto (not set)");
		t = doctor_toml_free(t);
	}
	doctor_runtime_emit(dr, &n, "runtime.toolkit", st,
			    st == DOCTOR_PASS ? "the NVIDIA Container Toolkit is installed" :
						"the NVIDIA Container Toolkit is incomplete",
			    FIX_TOOLKIT_PARTIAL);
}

/* --- runtime.cdi --- */

struct cdi_scan {
	struct doctor_runtime_notes n;
	unsigned files, bad, gpu_specs;
	char *names[MAX_NAMES]; /* device names of the GPU-kind specs */
	size_t n_names;
};

static bool gpu_kind(const char *kind)
{
	return streq(kind, "nvidia.com/gpu") || streq(kind, "k8s.device-plugin.nvidia.com/gpu");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool spec_name(const char *name)
{
	size_t n = strlen(name);

	return (n > 5 && streq(name + n - 5, ".yaml")) || (n > 5 && streq(name + n - 5, ".json"));
}

/* Checks one spec; a problem is one note "<file>:<line>: ..." and counts in s->bad. */
static void cdi_file(const struct doctor *dr, struct cdi_scan *s, const char *path)
{
	const struct ytree_node *root, *ver, *kind, *devs;
	struct ytree doc = { 0 };
	struct ytree_error err = { 0 };
	unsigned named = 0;
	char *data = NULL;
	size_t len = 0;
	int r;

	s->files++;
	r = doctor_read(dr, path, DOCTOR_RUNTIME_MAX_FILE, &data, &len);
	/* YAML for .json too: the CDI library reads every spec with sigs.k8s.io/yaml. */
	if (r >= 0)
		r = ytree_load(&doc, data, len, YTREE_FIRST_DOCUMENT, YTREE_NODES_MAX, &err);
	if (r < 0) {
		s->bad++;
		if (r == -EINVAL && err.message[0])
			doctor_runtime_note(&s->n, "%s:%u: does not parse: %s", path, err.line,
					    err.message);
		else
			doctor_runtime_note(&s->n, "%s: %s", path, doctor_strerror(r));
		goto out;
	}
	root = ytree_root(&doc);
	ver = ytree_get(&doc, root, "cdiVersion");
	kind = ytree_get(&doc, root, "kind");
	devs = ytree_get(&doc, root, "devices");
	if (!root || root->kind != YTREE_MAP || !ytree_str(ver) || !*ver->value) {
		s->bad++;
		doctor_runtime_note(&s->n, "%s:%u: no cdiVersion", path, root ? root->line : 1);
		goto out;
	}
	if (!ytree_str(kind) || !strchr(kind->value, '/')) {
		s->bad++;
		doctor_runtime_note(&s->n, "%s:%u: no kind of the form vendor/class", path,
				    kind ? kind->line : root->line);
		goto out;
	}
	if (!devs || devs->kind != YTREE_SEQ || devs->n_kids == 0) {
		s->bad++;
		doctor_runtime_note(&s->n, "%s:%u: no devices", path,
				    devs ? devs->line : root->line);
		goto out;
	}
	for (size_t i = 0; i < devs->n_kids; i++) {
		const struct ytree_node *dev = ytree_kid(&doc, devs, i);
		const char *name = ytree_str(ytree_get(&doc, dev, "name"));

		if (!name || !*name) {
			s->bad++;
			doctor_runtime_note(&s->n, "%s:%u: a device without a name", path,
					    dev->line);
			goto out;
		}
		if (gpu_kind(kind->value) && s->n_names < MAX_NAMES) {
			s->names[s->n_names] = strdup(name);
			if (s->names[s->n_names])
				s->n_names++;
		}
		named++;
	}
	s->gpu_specs += gpu_kind(kind->value);
	doctor_runtime_note(&s->n, "%s: cdiVersion %s, kind %s, %u device(s)", path, ver->value,
			    kind->value, named);
out:
	ytree_release(&doc);
	free(data);
}

static void cdi_dir(const struct doctor *dr, struct cdi_scan *s, const char *dir)
{
	char *names[MAX_SPECS];
	size_t n = 0;
	struct dirent *de;
	int r = 0;
	DIR *d = doctor_opendir(dr, dir, &r);

	if (r == -ENOMEM)
		return;
	if (!d) {
		doctor_runtime_note(&s->n, "%s: %s", dir, r == -ENOENT ? "absent" : strerror(-r));
		return;
	}
	while ((de = readdir(d)) && n < MAX_SPECS)
		if (de->d_name[0] != '.' && spec_name(de->d_name)) {
			names[n] = strdup(de->d_name);
			if (names[n])
				n++;
		}
	(void)closedir(d);
	if (n == 0)
		doctor_runtime_note(&s->n, "%s: no *.yaml or *.json spec", dir);
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char *p = path_join(dir, names[i]);

		if (p)
			cdi_file(dr, s, p);
		free(p);
		free(names[i]);
	}
}

static bool has_name(const struct cdi_scan *s, const char *name)
{
	for (size_t i = 0; i < s->n_names; i++)
		if (streq(s->names[i], name))
			return true;
	return false;
}

void doctor_runtime_cdi(struct doctor *dr)
{
	const struct doctor_opts *o = doctor_opts(dr);
	const struct doctor_facts *f = doctor_facts(dr);
	const char *dirs[3] = { "/etc/cdi", "/var/run/cdi", NULL };
	bool wants = o->cfg && (o->cfg->device_list_strategy &
				(CONFIG_DLS_CDI_ANNOTATIONS | CONFIG_DLS_CDI_CRI));
	struct cdi_scan *s = calloc(1, sizeof(*s));
	enum doctor_status st = DOCTOR_PASS;
	const char *summary = "the CDI specs parse and name every GPU", *fix = NULL;
	struct buf missing = { 0 };

	if (!s) {
		(void)doctor_add(dr, "runtime.cdi", DOCTOR_FAIL, "out of memory");
		return;
	}
	if (o->cfg && o->cfg->cdi_spec_dir && !streq(o->cfg->cdi_spec_dir, dirs[0]) &&
	    !streq(o->cfg->cdi_spec_dir, dirs[1]))
		dirs[2] = o->cfg->cdi_spec_dir;
	for (size_t i = 0; i < ELEMENTSOF(dirs) && dirs[i]; i++)
		cdi_dir(dr, s, dirs[i]);
	if (s->bad) {
		st = DOCTOR_FAIL;
		summary = "a CDI spec is broken: pods that name its devices fail to start";
		fix = FIX_CDI_PARSE;
	} else if (s->files == 0 || s->gpu_specs == 0) {
		st = DOCTOR_WARN;
		summary = s->files ? "no CDI spec of kind nvidia.com/gpu" : "no CDI spec";
		doctor_runtime_note(&s->n, "device list strategy: %s",
				    wants ? "uses CDI, so pods get no GPU until a spec is written" :
					    "does not use CDI");
		fix = FIX_CDI_NONE;
	} else if (!f->nvml_ok || f->n_gpus == 0) {
		doctor_runtime_note(
			&s->n,
			"NVML listed no GPUs (see the driver checks): not checked whether the specs name them");
		summary = "the CDI specs parse";
	} else {
		for (unsigned i = 0; i < f->n_gpus && i < DOCTOR_MAX_GPUS; i++) {
			char idx[16];

			(void)snprintf(idx, sizeof(idx), "%u", i);
			if (!has_name(s, f->uuids[i]) && !has_name(s, idx) &&
			    buf_printf(&missing, "%s%u (%s)", missing.len ? ", " : "", i,
				       f->uuids[i]) < 0)
				break;
		}
		doctor_runtime_note(
			&s->n,
			"rule: a GPU is named when a device of kind nvidia.com/gpu or k8s.device-plugin.nvidia.com/gpu has its UUID or its index as name");
		if (missing.len) {
			st = DOCTOR_FAIL;
			summary = "the CDI specs do not name every GPU NVML sees";
			fix = FIX_CDI_STALE;
			doctor_runtime_note(&s->n, "not named: %s", (char *)missing.data);
		} else {
			doctor_runtime_note(&s->n, "all %u GPU(s) named", f->n_gpus);
		}
	}
	doctor_runtime_emit(dr, &s->n, "runtime.cdi", st, summary, fix);
	buf_release(&missing);
	for (size_t i = 0; i < s->n_names; i++)
		free(s->names[i]);
	free(s);
}

/* --- runtime.tegra-mode --- */

/*
 * On a Jetson the toolkit runs in CSV mode (mode auto resolves to csv on Tegra) or CDI mode.
 * CSV: the mount specs (devices.csv, drivers.csv, l4t.csv) must be where config.toml says;
 * CDI: a spec must name the integrated GPU, "tegra" as edgegpu and NVIDIA's plugin call it.
 */
void doctor_runtime_tegra_mode(struct doctor *dr)
{
	static const char *const cfg = "/etc/nvidia-container-runtime/config.toml";
	static const char *const csvs[] = { "devices.csv", "drivers.csv", "l4t.csv" };
	static const char *const k_mode[] = { "nvidia-container-runtime", "mode" };
	static const char *const k_specs[] = { "nvidia-container-runtime", "modes", "csv",
					       "mount-spec-path" };
	const char *dir = "/etc/nvidia-container-runtime/host-files-for-container.d";
	const char *dirs[2] = { "/etc/cdi", "/var/run/cdi" };
	struct doctor_runtime_notes n = { 0 };
	const struct doctor_toml_entry *e;
	struct doctor_toml *t = NULL;
	struct buf missing = { 0 };
	struct cdi_scan *s = NULL;
	char mode[32] = "auto";
	struct stat st;
	int r;

	if (!doctor_facts(dr)->board.tegra) {
		(void)doctor_add(
			dr, "runtime.tegra-mode", DOCTOR_SKIP,
			"not a Jetson/Tegra board: the toolkit's mode is runtime.toolkit's");
		return;
	}
	if (doctor_stat(dr, cfg, &st, NULL) < 0) {
		doctor_runtime_note(&n, "%s: absent (mode auto, csv on a Jetson)", cfg);
		doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_WARN,
				    "no NVIDIA Container Toolkit config on this Jetson: the "
				    "runtime's mode is not set",
				    FIX_TEGRA_NO_CONFIG);
		return;
	}
	r = doctor_runtime_toml_load(dr, &n, cfg, &t, NULL);
	if (r < 0) {
		doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_FAIL,
				    "the toolkit's config cannot be read: its mode is unknown",
				    r == -EINVAL ? FIX_TOML : FIX_TOOLKIT_PARTIAL);
		return;
	}
	e = doctor_toml_get(t, k_mode, ELEMENTSOF(k_mode));
	if (e && e->value)
		(void)snprintf(mode, sizeof(mode), "%s", e->value);
	e = doctor_toml_get(t, k_specs, ELEMENTSOF(k_specs));
	if (e && e->value && e->value[0] == '/')
		dir = e->value;
	doctor_runtime_note(&n, "%s: mode %s%s", cfg, mode,
			    streq(mode, "auto") ? " (csv on a Jetson)" : "");
	if (streq(mode, "auto") || streq(mode, "csv")) {
		doctor_runtime_note(&n, "docker --gpus is not supported in CSV mode: use "
					"--runtime=nvidia");
		for (size_t i = 0; i < ELEMENTSOF(csvs); i++) {
			char *p = path_join(dir, csvs[i]);
			int fd = p ? doctor_open(dr, p, 0, NULL) : -ENOMEM;
			int rr = fd >= 0 ? fd_check_regular(fd) : fd;

			fd_close(fd);
			doctor_runtime_note(&n, "%s: %s", p ? p : csvs[i],
					    rr == 0 ? "present" : doctor_strerror(rr));
			if (rr < 0 &&
			    buf_printf(&missing, "%s%s", missing.len ? ", " : "", csvs[i]) < 0)
				buf_release(&missing);
			free(p);
		}
		if (missing.len) {
			char summary[256];

			(void)snprintf(summary, sizeof(summary),
				       "CSV mode but the mount specs are missing: %s",
				       (const char *)missing.data);
			doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_FAIL, summary,
					    FIX_TEGRA_CSV);
		} else {
			doctor_runtime_emit(
				dr, &n, "runtime.tegra-mode", DOCTOR_PASS,
				"CSV mode: devices.csv, drivers.csv and l4t.csv are there", NULL);
		}
	} else if (streq(mode, "cdi")) {
		const char *id = "tegra";

		s = calloc(1, sizeof(*s));
		if (!s) {
			doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_FAIL,
					    "out of memory", NULL);
			goto out;
		}
		for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
			cdi_dir(dr, s, dirs[i]);
		/* The notes of the scan are runtime.cdi's; this check says only what it found. */
		doctor_runtime_note(&n,
				    "CDI specs in /etc/cdi and /var/run/cdi: %u, of a GPU kind: %u",
				    s->files, s->gpu_specs);
		if (has_name(s, id)) {
			doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_PASS,
					    "CDI mode: a CDI spec names the integrated GPU (tegra)",
					    NULL);
		} else {
			doctor_runtime_note(&n,
					    "no device named %s in a spec of kind nvidia.com/gpu "
					    "or k8s.device-plugin.nvidia.com/gpu",
					    id);
			doctor_runtime_emit(dr, &n, "runtime.tegra-mode", DOCTOR_FAIL,
					    "CDI mode but no CDI spec names the integrated GPU: "
					    "containers get no GPU",
					    FIX_TEGRA_CDI);
		}
		buf_release(&s->n.b);
	} else {
		doctor_runtime_emit(
			dr, &n, "runtime.tegra-mode",
			streq(mode, "legacy") ? DOCTOR_FAIL : DOCTOR_WARN,
			streq(mode, "legacy") ?
				"mode legacy does not work on a Jetson" :
				"the toolkit's mode is neither csv nor cdi on this Jetson",
			FIX_TEGRA_MODE);
	}
out:
	for (size_t i = 0; s && i < s->n_names; i++)
		free(s->names[i]);
	free(s);
	buf_release(&missing);
	doctor_toml_free(t);
}

/* --- runtime.docker --- */

void doctor_runtime_docker(struct doctor *dr)
{
	const struct doctor_facts *f = doctor_facts(dr);
	const struct ytree_node *root = NULL, *rts, *nv = NULL, *path, *def;
	struct doctor_runtime_notes n = { 0 };
	struct ytree doc = { 0 };
	struct ytree_error err = { 0 };
	char *data = NULL, *bin = NULL, why[160] = "";
	const char *nv_name = "nvidia";
	size_t len = 0;
	bool k8s_elsewhere = streq(f->runtime, "containerd") || streq(f->runtime, "cri-o");
	enum doctor_status miss = k8s_elsewhere ? DOCTOR_WARN : DOCTOR_FAIL;
	int r;

	if (!doctor_runtime_docker_present(dr, why, sizeof(why)) && !streq(f->runtime, "docker")) {
		doctor_runtime_note(&n, "no %s, docker.sock or enabled docker.service",
				    DAEMON_JSON);
		doctor_runtime_emit(dr, &n, "runtime.docker", DOCTOR_SKIP,
				    "Docker is not installed", NULL);
		return;
	}
	doctor_runtime_note(&n, "Docker: %s", why[0] ? why : "the Kubernetes runtime");
	if (k8s_elsewhere)
		doctor_runtime_note(
			&n, "Kubernetes uses %s here: Docker's runtime matters for docker run only",
			f->runtime);
	r = doctor_read(dr, DAEMON_JSON, DOCTOR_RUNTIME_MAX_FILE, &data, &len);
	if (r == -ENOENT) {
		doctor_runtime_note(&n, "%s: absent", DAEMON_JSON);
		doctor_runtime_emit(dr, &n, "runtime.docker", miss,
				    "Docker has no nvidia runtime (no daemon.json)",
				    FIX_DOCKER_MISSING);
		return;
	}
	/* JSON as JSON: Docker reads it with Go's encoding/json. An empty file is no settings. */
	if (r >= 0)
		r = ytree_load(&doc, data, len, YTREE_JSON, YTREE_NODES_MAX, &err);
	if (r >= 0)
		root = ytree_root(&doc);
	if (root && root->kind != YTREE_MAP) {
		r = -EINVAL;
		err.line = root->line;
		(void)snprintf(err.message, sizeof(err.message), "not a JSON object");
	}
	if (r < 0) {
		if (r == -EINVAL && err.message[0])
			doctor_runtime_note(&n, "%s:%u: %s", DAEMON_JSON, err.line, err.message);
		else
			doctor_runtime_note(&n, "%s: %s", DAEMON_JSON, doctor_strerror(r));
		doctor_runtime_emit(dr, &n, "runtime.docker", DOCTOR_FAIL,
				    "Docker's daemon.json cannot be read", FIX_DOCKER_JSON);
		goto out;
	}
	rts = ytree_get(&doc, root, "runtimes");
	nv = ytree_get(&doc, rts, "nvidia");
	for (size_t i = 0; !nv && rts && rts->kind == YTREE_MAP && i + 1 < rts->n_kids; i += 2) {
		const struct ytree_node *v = ytree_kid(&doc, rts, i + 1);
		const char *p = ytree_str(ytree_get(&doc, v, "path"));
		const char *b = p ? strrchr(p, '/') : NULL;

		if (p && startswith(b ? b + 1 : p, "nvidia-container-runtime")) {
			nv = v;
			nv_name = ytree_kid(&doc, rts, i)->value;
		}
	}
	if (!nv) {
		doctor_runtime_note(&n, "%s: no runtimes.nvidia", DAEMON_JSON);
		doctor_runtime_emit(dr, &n, "runtime.docker", miss, "Docker has no nvidia runtime",
				    FIX_DOCKER_MISSING);
		goto out;
	}
	path = ytree_get(&doc, nv, "path");
	bin = ytree_str(path) ? doctor_runtime_find_bin(dr, path->value, NULL) : NULL;
	doctor_runtime_note(&n, "%s: runtimes.%s.path %s (line %u): %s", DAEMON_JSON, nv_name,
			    ytree_str(path) ? path->value : "not set", nv->line,
			    bin ? "found" : "not found");
	if (!bin) {
		doctor_runtime_emit(dr, &n, "runtime.docker", DOCTOR_FAIL,
				    "Docker's nvidia runtime binary is missing",
				    FIX_RUNTIME_BINARY);
		goto out;
	}
	def = ytree_get(&doc, root, "default-runtime");
	doctor_runtime_note(&n, "default-runtime %s",
			    ytree_str(def) ? def->value : "not set (runc)");
	if (ytree_str(def) && streq(def->value, nv_name))
		doctor_runtime_emit(dr, &n, "runtime.docker", DOCTOR_PASS,
				    "Docker's default runtime is the NVIDIA runtime", NULL);
	else
		doctor_runtime_emit(dr, &n, "runtime.docker", DOCTOR_WARN,
				    "Docker has the nvidia runtime, not as the default",
				    FIX_DOCKER_NOT_DEFAULT);
out:
	free(bin);
	ytree_release(&doc);
	free(data);
}
