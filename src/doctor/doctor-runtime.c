/*
 * The doctor's runtime layer (doctor.h): which Kubernetes layout the node has and so which
 * containerd config and socket apply (runtime.layout), whether that containerd has the NVIDIA
 * runtime and uses it by default (runtime.containerd-nvidia). The toolkit, CDI specs and Docker
 * are in doctor-cdi.c; what both share in doctor-runtime-common.c.
 */
#include "doctor-runtime.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor-int.h"
#include "doctor-toml.h"
#include "ytree.h"

#define FIX_LAYOUT_NONE                                                                            \
	"Install a container runtime for Kubernetes (containerd, or the one your distribution "    \
	"ships: k3s, MicroK8s, KubeEdge's edgecore with containerd); with --host-root, point the " \
	"doctor at the node's root filesystem"
#define FIX_EDGECORE_YAML                                                                     \
	"Fix the YAML of /etc/kubeedge/config/edgecore.yaml at the line shown, then restart " \
	"edgecore (systemctl restart edgecore)"
#define FIX_CTD_MISSING                                                                 \
	"nvidia-ctk runtime configure --runtime=containerd --set-as-default (it edits " \
	"/etc/containerd/config.toml), then systemctl restart containerd"
#define FIX_CTD_CRI_DISABLED                                                             \
	"Remove \"cri\" from disabled_plugins in /etc/containerd/config.toml (Docker's " \
	"containerd.io package disables it), then systemctl restart containerd"
#define FIX_CTD_NOT_DEFAULT                                                                  \
	"Run GPU pods with runtimeClassName: nvidia and create a RuntimeClass named nvidia " \
	"(handler: nvidia), or make nvidia the default: nvidia-ctk runtime configure "       \
	"--runtime=containerd --set-as-default, then systemctl restart containerd"
#define FIX_K3S_MISSING                                                                            \
	"Install the NVIDIA Container Toolkit (nvidia-container-runtime in /usr/bin or "           \
	"/usr/local/nvidia/toolkit), then restart k3s (systemctl restart k3s, or k3s-agent on an " \
	"agent): k3s finds the runtime when it starts and adds it to its containerd config. With " \
	"your own config.toml.tmpl, keep {{ template \"base\" . }} in it or add the nvidia "       \
	"runtime there"
#define FIX_K3S_NOT_DEFAULT                                                                         \
	"Run GPU pods with runtimeClassName: nvidia (with a RuntimeClass named nvidia, handler "    \
	"nvidia), or make it the default: default-runtime: nvidia in /etc/rancher/k3s/config.yaml " \
	"(the --default-runtime flag), then restart k3s"
#define FIX_MICROK8S_MISSING                                                                 \
	"microk8s enable nvidia (microk8s enable gpu on older releases), or add the nvidia " \
	"runtime to /var/snap/microk8s/current/args/containerd-template.toml and run snap "  \
	"restart microk8s.daemon-containerd"
#define FIX_MICROK8S_NOT_DEFAULT                                                                 \
	"Run GPU pods with runtimeClassName: nvidia, or set default_runtime_name to the nvidia " \
	"runtime's name in /var/snap/microk8s/current/args/containerd-template.toml, then snap " \
	"restart microk8s.daemon-containerd"

#define K3S_CTD_DIR "/var/lib/rancher/k3s/agent/etc/containerd"
#define MK8S_ARGS   "/var/snap/microk8s/current/args"
#define EDGECORE    "/etc/kubeedge/config/edgecore.yaml"

enum layout {
	L_K3S,
	L_MICROK8S,
	L_KUBEEDGE,
	L_KUBEADM,
	L_COUNT,
};

/* What each layout reads; the first existing source wins, else the generated file. */
static const struct {
	const char *name;
	const char *marker[3];
	const char *source[3];
	const char *generated; /* written by the distribution from the source at start */
	const char *socket;
	const char *fix_missing, *fix_not_default;
} layouts[L_COUNT] = {
	[L_K3S] = { "k3s",
		    { "/var/lib/rancher/k3s/agent", "/etc/rancher/k3s" },
		    { K3S_CTD_DIR "/config-v3.toml.tmpl", K3S_CTD_DIR "/config.toml.tmpl" },
		    K3S_CTD_DIR "/config.toml",
		    "/run/k3s/containerd/containerd.sock",
		    FIX_K3S_MISSING,
		    FIX_K3S_NOT_DEFAULT },
	[L_MICROK8S] = { "microk8s",
			 { MK8S_ARGS, "/var/snap/microk8s/common" },
			 { MK8S_ARGS "/containerd-template.toml" },
			 MK8S_ARGS "/containerd.toml",
			 "/var/snap/microk8s/common/run/containerd.sock",
			 FIX_MICROK8S_MISSING,
			 FIX_MICROK8S_NOT_DEFAULT },
	[L_KUBEEDGE] = { "kubeedge",
			 { EDGECORE },
			 { "/etc/containerd/config.toml" },
			 NULL,
			 "/run/containerd/containerd.sock",
			 FIX_CTD_MISSING,
			 FIX_CTD_NOT_DEFAULT },
	[L_KUBEADM] = { "kubeadm",
			{ "/etc/containerd/config.toml", "/run/containerd/containerd.sock" },
			{ "/etc/containerd/config.toml" },
			NULL,
			"/run/containerd/containerd.sock",
			FIX_CTD_MISSING,
			FIX_CTD_NOT_DEFAULT },
};

/* --- host paths --- */

static bool exists(const struct doctor *dr, const char *path)
{
	struct stat st;

	return doctor_stat(dr, path, &st, NULL) == 0;
}

static void set_fact(char *dst, size_t size, const char *s)
{
	(void)snprintf(dst, size, "%s", s ? s : "");
}

/* --- runtime.layout --- */

struct rt {
	int layout; /* enum layout, or -1 */
	char socket[256];
	const char *runtime; /* "containerd", "docker", "cri-o", "" */
};

/* A key anywhere under @n, at most @depth maps down (edgecore moved keys between releases). */
static const struct ytree_node *find_key(const struct ytree *t, const struct ytree_node *n,
					 const char *key, unsigned depth)
{
	const struct ytree_node *v = ytree_get(t, n, key);

	if (v || !n || n->kind != YTREE_MAP || depth == 0)
		return v;
	for (size_t i = 1; i < n->n_kids; i += 2) {
		v = find_key(t, ytree_kid(t, n, i), key, depth - 1);
		if (v)
			return v;
	}
	return NULL;
}

/* Reads edgecore.yaml: which runtime endpoint KubeEdge's edged talks to. */
static int kubeedge_runtime(struct doctor *dr, struct doctor_runtime_notes *n, struct rt *rt)
{
	const struct ytree_node *edged, *ep, *cr;
	struct ytree doc = { 0 };
	struct ytree_error err = { 0 };
	const char *endpoint, *kind;
	char *data = NULL;
	size_t len = 0;
	int r;

	rt->runtime = "containerd";
	set_fact(rt->socket, sizeof(rt->socket), layouts[L_KUBEEDGE].socket);
	r = doctor_read(dr, EDGECORE, DOCTOR_RUNTIME_MAX_FILE, &data, &len);
	if (r >= 0)
		r = ytree_load(&doc, data, len, YTREE_FIRST_DOCUMENT, YTREE_NODES_MAX, &err);
	if (r < 0) {
		if (r == -EINVAL && err.message[0])
			doctor_runtime_note(n, "%s:%u: %s", EDGECORE, err.line, err.message);
		else
			doctor_runtime_note(n, "%s: %s", EDGECORE, doctor_strerror(r));
		doctor_runtime_note(n, "assuming containerd at %s", rt->socket);
		goto out;
	}
	edged = ytree_get(&doc, ytree_get(&doc, ytree_root(&doc), "modules"), "edged");
	ep = find_key(&doc, edged, "remoteRuntimeEndpoint", 2);
	cr = find_key(&doc, edged, "containerRuntime", 2);
	endpoint = ytree_str(ep);
	kind = ytree_str(cr);
	if (kind)
		doctor_runtime_note(n, "%s: containerRuntime %s (line %u)", EDGECORE, kind,
				    cr->line);
	if (!endpoint || !*endpoint) {
		doctor_runtime_note(n, "%s: no remoteRuntimeEndpoint: edgecore's default is %s",
				    EDGECORE, "unix:///run/containerd/containerd.sock");
	} else {
		const char *path = startswith(endpoint, "unix://") ? endpoint + 7 : endpoint;

		doctor_runtime_note(n, "%s: remoteRuntimeEndpoint %s (line %u)", EDGECORE, endpoint,
				    ep->line);
		set_fact(rt->socket, sizeof(rt->socket), path);
		if (strstr(path, "docker"))
			rt->runtime = "docker";
		else if (strstr(path, "crio"))
			rt->runtime = "cri-o";
		else if (!strstr(path, "containerd"))
			doctor_runtime_note(
				n, "the endpoint does not name containerd: assuming it is");
	}
	if (kind && streq(kind, "docker"))
		rt->runtime = "docker";
out:
	ytree_release(&doc);
	free(data);
	return r;
}

static void socket_note(struct doctor *dr, struct doctor_runtime_notes *n, const char *path)
{
	struct stat st;

	if (doctor_stat(dr, path, &st, NULL) < 0)
		doctor_runtime_note(n, "socket %s: absent (the runtime is not running here)", path);
	else
		doctor_runtime_note(n, "socket %s: %s", path,
				    S_ISSOCK(st.st_mode) ? "present" :
							   "exists but is not a socket");
}

static void check_layout(struct doctor *dr, struct rt *rt)
{
	struct doctor_facts *f = doctor_facts(dr);
	struct doctor_runtime_notes n = { 0 };
	const char *marker[L_COUNT] = { NULL };
	enum doctor_status st = DOCTOR_PASS;
	char why[160] = "", summary[96];
	int l;

	rt->layout = -1;
	rt->runtime = "";
	for (l = 0; l < L_COUNT; l++)
		for (size_t i = 0; i < ELEMENTSOF(layouts[l].marker) && !marker[l]; i++)
			if (layouts[l].marker[i] && exists(dr, layouts[l].marker[i]))
				marker[l] = layouts[l].marker[i];
	for (l = 0; l < L_COUNT && rt->layout < 0; l++)
		if (marker[l])
			rt->layout = l;
	if (rt->layout < 0) {
		if (doctor_runtime_docker_present(dr, why, sizeof(why))) {
			rt->runtime = "docker";
			set_fact(f->runtime, sizeof(f->runtime), rt->runtime);
			doctor_runtime_note(
				&n, "no k3s, MicroK8s, KubeEdge or containerd config found");
			doctor_runtime_note(&n, "Docker: %s", why);
			doctor_runtime_emit(dr, &n, "runtime.layout", DOCTOR_PASS,
					    "Docker is the container runtime", NULL);
			return;
		}
		for (l = 0; l < L_COUNT; l++)
			for (size_t i = 0; i < ELEMENTSOF(layouts[l].marker); i++)
				if (layouts[l].marker[i])
					doctor_runtime_note(&n, "%s: %s absent", layouts[l].name,
							    layouts[l].marker[i]);
		doctor_runtime_note(
			&n,
			"Docker: no /etc/docker/daemon.json, docker.sock or enabled docker.service");
		doctor_runtime_emit(dr, &n, "runtime.layout", DOCTOR_FAIL,
				    "no container runtime found: kubelet cannot start any pod",
				    FIX_LAYOUT_NONE);
		return;
	}
	doctor_runtime_note(&n, "%s: %s present", layouts[rt->layout].name, marker[rt->layout]);
	rt->runtime = "containerd";
	set_fact(rt->socket, sizeof(rt->socket), layouts[rt->layout].socket);
	if (rt->layout == L_KUBEEDGE && kubeedge_runtime(dr, &n, rt) < 0)
		st = DOCTOR_FAIL;
	/* KubeEdge uses the plain containerd; on the others a plain one is not the kubelet's. */
	if (rt->layout != L_KUBEEDGE && rt->layout != L_KUBEADM && marker[L_KUBEADM])
		doctor_runtime_note(&n, "not used by %s: %s (another containerd, Docker's perhaps)",
				    layouts[rt->layout].name, marker[L_KUBEADM]);
	if (streq(rt->runtime, "containerd")) {
		for (size_t i = 0; i < ELEMENTSOF(layouts[rt->layout].source); i++)
			if (layouts[rt->layout].source[i] &&
			    exists(dr, layouts[rt->layout].source[i])) {
				set_fact(f->containerd_config, sizeof(f->containerd_config),
					 layouts[rt->layout].source[i]);
				break;
			}
		if (!f->containerd_config[0] && layouts[rt->layout].generated &&
		    exists(dr, layouts[rt->layout].generated))
			set_fact(f->containerd_config, sizeof(f->containerd_config),
				 layouts[rt->layout].generated);
		doctor_runtime_note(&n, "containerd config: %s",
				    f->containerd_config[0] ? f->containerd_config : "none found");
		set_fact(f->containerd_socket, sizeof(f->containerd_socket), rt->socket);
	}
	doctor_runtime_note(&n, "runtime: %s", rt->runtime);
	socket_note(dr, &n, rt->socket);
	set_fact(f->layout, sizeof(f->layout), layouts[rt->layout].name);
	set_fact(f->runtime, sizeof(f->runtime), rt->runtime);
	(void)snprintf(summary, sizeof(summary), "%s layout, %s runtime", layouts[rt->layout].name,
		       rt->runtime);
	doctor_runtime_emit(dr, &n, "runtime.layout", st,
			    st == DOCTOR_FAIL ? "edgecore's config cannot be read" : summary,
			    FIX_EDGECORE_YAML);
}

/* --- runtime.containerd-nvidia --- */

static const char *const cri_v1[] = { "plugins", "cri", "containerd" };
static const char *const cri_v2[] = { "plugins", "io.containerd.grpc.v1.cri", "containerd" };
static const char *const cri_v3[] = { "plugins", "io.containerd.cri.v1.runtime", "containerd" };

/* What one containerd config says about its runtimes. Points into the document. */
struct ctd_view {
	int version;		   /* 1 when not set */
	const char *const *prefix; /* where the chosen runtime was found */
	const char *nvidia;	   /* the NVIDIA runtime's name, or NULL */
	const struct doctor_toml_entry *bin, *def;
	char names[256];     /* the runtimes defined, "runc, nvidia" */
	const char *ignored; /* an nvidia runtime under a table this version ignores */
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static const struct doctor_toml_entry *runtime_key(const struct doctor_toml *t,
						   const char *const *prefix, const char *name,
						   const char *k1, const char *k2)
{
	const char *path[7] = { prefix[0], prefix[1], prefix[2], "runtimes", name, k1, k2 };

	return doctor_toml_get(t, path, k2 ? 7 : 6);
}

static bool is_nvidia_runtime(const struct doctor_toml *t, const char *const *prefix,
			      const char *name)
{
	const struct doctor_toml_entry *b = runtime_key(t, prefix, name, "options", "BinaryName");

	return streq(name, "nvidia") ||
	       (b && b->value && startswith(base_name(b->value), "nvidia-container-runtime"));
}

static void ctd_analyse(const struct doctor_toml *t, struct ctd_view *v)
{
	static const char *const ver[] = { "version" };
	const struct doctor_toml_entry *e = doctor_toml_get(t, ver, 1);
	const char *const *allowed[2] = { NULL }, *const * all[3] = { cri_v1, cri_v2, cri_v3 };
	size_t len = 0;

	*v = (struct ctd_view){ .version = 1 };
	if (e && e->type == DOCTOR_TOML_INT && safe_atoi(e->value, &v->version) < 0)
		v->version = 1;
	allowed[0] = v->version >= 3 ? cri_v3 : v->version == 2 ? cri_v2 : cri_v1;
	allowed[1] = v->version <= 1 ? cri_v2 : NULL; /* version 1 files often use both */
	for (size_t a = 0; a < ELEMENTSOF(allowed) && allowed[a]; a++) {
		for (size_t i = 0; i < t->n; i++) {
			const char *name;

			e = &t->e[i];
			if (e->n_path < 6 || !doctor_toml_has_prefix(e, allowed[a], 3) ||
			    !streq(e->path[3], "runtimes"))
				continue;
			name = e->path[4];
			if (!strstr(v->names, name) && len + strlen(name) + 3 < sizeof(v->names))
				len += (size_t)snprintf(v->names + len, sizeof(v->names) - len,
							"%s%s", len ? ", " : "", name);
			if (is_nvidia_runtime(t, allowed[a], name) &&
			    (!v->nvidia ||
			     (streq(name, "nvidia") && !streq(v->nvidia, "nvidia")))) {
				v->nvidia = name;
				v->prefix = allowed[a];
			}
		}
		if (!v->def) {
			const char *d[4] = { allowed[a][0], allowed[a][1], allowed[a][2],
					     "default_runtime_name" };

			v->def = doctor_toml_get(t, d, 4);
		}
	}
	if (v->nvidia)
		v->bin = runtime_key(t, v->prefix, v->nvidia, "options", "BinaryName");
	for (size_t k = 0; k < ELEMENTSOF(all) && !v->nvidia; k++) {
		if (all[k] == allowed[0] || all[k] == allowed[1])
			continue;
		for (size_t i = 0; i < t->n && !v->ignored; i++)
			if (t->e[i].n_path >= 6 && doctor_toml_has_prefix(&t->e[i], all[k], 3) &&
			    streq(t->e[i].path[3], "runtimes") &&
			    is_nvidia_runtime(t, all[k], t->e[i].path[4]))
				v->ignored = all[k][1];
	}
}

/* Docker's containerd.io ships disabled_plugins = ["cri"]. */
static bool cri_disabled(const struct doctor_toml *t)
{
	static const char *const key[] = { "disabled_plugins" };
	const struct doctor_toml_entry *e = doctor_toml_get(t, key, 1);

	for (size_t i = 0; e && i < e->n_strv; i++)
		if (streq(e->strv[i], "cri") || streq(e->strv[i], "io.containerd.grpc.v1.cri") ||
		    streq(e->strv[i], "io.containerd.cri.v1.runtime"))
			return true;
	return false;
}

static void check_containerd(struct doctor *dr, const struct rt *rt)
{
	const struct doctor_facts *f = doctor_facts(dr);
	struct doctor_toml *t = NULL, *gen_t = NULL;
	struct doctor_runtime_notes n = { 0 };
	const char *path = f->containerd_config, *fix_missing, *fix_nd, *def;
	struct ctd_view v, gv;
	char *bin = NULL;
	bool base = false, gen_base;
	int r;

	if (!streq(rt->runtime, "containerd")) {
		doctor_runtime_note(&n, "runtime: %s", rt->runtime[0] ? rt->runtime : "none found");
		doctor_runtime_emit(dr, &n, "runtime.containerd-nvidia", DOCTOR_SKIP,
				    "containerd is not the runtime here", NULL);
		return;
	}
	fix_missing = layouts[rt->layout].fix_missing;
	fix_nd = layouts[rt->layout].fix_not_default;
	if (!path[0]) {
		for (size_t i = 0; i < ELEMENTSOF(layouts[rt->layout].source); i++)
			if (layouts[rt->layout].source[i])
				doctor_runtime_note(&n, "%s: absent",
						    layouts[rt->layout].source[i]);
		if (layouts[rt->layout].generated)
			doctor_runtime_note(&n, "%s: absent", layouts[rt->layout].generated);
		doctor_runtime_note(&n, "containerd without a config runs runc only");
		doctor_runtime_emit(
			dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
			"no containerd config: containerd has no nvidia runtime, GPU pods get no GPU",
			fix_missing);
		return;
	}
	doctor_runtime_note(&n, "read %s", path);
	r = doctor_runtime_toml_load(dr, &n, path, &t, &base);
	if (r < 0) {
		doctor_runtime_emit(dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
				    r == -EINVAL ? "the containerd config is not valid TOML" :
						   "the containerd config cannot be read",
				    r == -EINVAL ? FIX_TOML : fix_missing);
		return;
	}
	ctd_analyse(t, &v);
	doctor_runtime_note(&n, "config version %d; runtimes: %s", v.version,
			    v.names[0] ? v.names : "none");
	if (cri_disabled(t)) {
		doctor_runtime_note(
			&n,
			"disabled_plugins lists the CRI plugin: kubelet cannot use this containerd");
		doctor_runtime_emit(
			dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
			"containerd's CRI plugin is disabled: kubelet cannot start pods",
			FIX_CTD_CRI_DISABLED);
		goto out;
	}
	/* k3s renders its base template (with the runtimes it found) into config.toml. */
	if (!v.nvidia && base && layouts[rt->layout].generated &&
	    doctor_runtime_toml_load(dr, &n, layouts[rt->layout].generated, &gen_t, &gen_base) >=
		    0) {
		ctd_analyse(gen_t, &gv);
		doctor_runtime_note(
			&n,
			"read %s (k3s's base template, as rendered at its last start); runtimes: %s",
			layouts[rt->layout].generated, gv.names[0] ? gv.names : "none");
		if (gv.nvidia)
			v = gv;
	}
	if (!v.nvidia) {
		if (v.ignored)
			doctor_runtime_note(
				&n,
				"an nvidia runtime is under plugins.\"%s\", which a version %d config ignores",
				v.ignored, v.version);
		doctor_runtime_emit(
			dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
			"containerd has no nvidia runtime: GPU pods start without the GPU",
			fix_missing);
		goto out;
	}
	if (!v.bin || !v.bin->value) {
		doctor_runtime_note(
			&n, "runtime %s has no options.BinaryName: containerd runs runc for it",
			v.nvidia);
		doctor_runtime_emit(dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
				    "the nvidia runtime does not name nvidia-container-runtime",
				    FIX_RUNTIME_BINARY);
		goto out;
	}
	bin = doctor_runtime_find_bin(dr, v.bin->value, NULL);
	doctor_runtime_note(&n, "runtime %s: BinaryName %s (line %u): %s", v.nvidia, v.bin->value,
			    v.bin->line, bin ? "found" : "not found");
	if (!bin) {
		doctor_runtime_emit(
			dr, &n, "runtime.containerd-nvidia", DOCTOR_FAIL,
			"the nvidia runtime's binary is missing: GPU pods fail to start",
			FIX_RUNTIME_BINARY);
		goto out;
	}
	if (bin && !streq(bin, v.bin->value))
		doctor_runtime_note(&n, "found at %s", bin);
	def = v.def && v.def->value ? v.def->value : NULL;
	if (def && strstr(def, "${") && rt->layout == L_MICROK8S && !gen_t &&
	    !streq(path, layouts[L_MICROK8S].generated) &&
	    doctor_runtime_toml_load(dr, &n, layouts[L_MICROK8S].generated, &gen_t, &gen_base) >=
		    0) {
		/* MicroK8s fills ${RUNTIME} when it renders the template: read the result. */
		ctd_analyse(gen_t, &gv);
		doctor_runtime_note(
			&n,
			"default_runtime_name %s (line %u) is filled in by MicroK8s: %s says %s",
			def, v.def->line, layouts[L_MICROK8S].generated,
			gv.def && gv.def->value ? gv.def->value : "nothing");
		def = gv.def && gv.def->value ? gv.def->value : NULL;
		v.def = gv.def;
	}
	if (def && streq(def, v.nvidia)) {
		doctor_runtime_note(&n, "default_runtime_name %s (line %u)", def, v.def->line);
		doctor_runtime_emit(dr, &n, "runtime.containerd-nvidia", DOCTOR_PASS,
				    "containerd's default runtime is the NVIDIA runtime", NULL);
		goto out;
	}
	if (def)
		doctor_runtime_note(&n, "default_runtime_name %s (line %u)", def, v.def->line);
	else
		doctor_runtime_note(&n, "default_runtime_name not set (runc)");
	doctor_runtime_note(&n,
			    "GPU pods need runtimeClassName: %s and a RuntimeClass with handler %s",
			    v.nvidia, v.nvidia);
	doctor_runtime_emit(dr, &n, "runtime.containerd-nvidia", DOCTOR_WARN,
			    "the NVIDIA runtime is configured but is not the default", fix_nd);
out:
	free(bin);
	doctor_toml_free(gen_t);
	doctor_toml_free(t);
}

void doctor_runtime(struct doctor *dr)
{
	struct rt rt = { 0 };

	check_layout(dr, &rt);
	check_containerd(dr, &rt);
	doctor_runtime_toolkit(dr);
	doctor_runtime_cdi(dr);
	doctor_runtime_tegra_mode(dr);
	doctor_runtime_docker(dr);
}
