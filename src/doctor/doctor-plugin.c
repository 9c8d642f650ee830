/*
 * The doctor's device-plugin layer (doctor.h): the kubelet's device-plugins directory, its
 * kubelet.sock, edgegpu's own plugin sockets, the running daemon's /readyz, and (in
 * doctor-alloc.c) the allocations the pod-resources API reports.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "doctor-int.h"
#include "doctor-net.h"
#include "doctor-plugin-int.h"
#include "resource.h"

#define MICROK8S_KUBELET     "/var/snap/microk8s/common/var/lib/kubelet"
#define DIR_ENTRIES_SHOWN    12
#define READYZ_LINES_SHOWN   16
#define EVIDENCE_LINE_MAX    240
#define KUBELET_SOCKET_NAME  "kubelet.sock"
#define MICROK8S_PODRES_PATH MICROK8S_KUBELET "/pod-resources/kubelet.sock"

static const char fix_dir[] =
	"Start the kubelet, or point edgegpu at the directory the kubelet uses: it is "
	"<root-dir>/device-plugins, where <root-dir> is the kubelet's --root-dir (ps -o args= -C "
	"kubelet; default /var/lib/kubelet, MicroK8s /var/snap/microk8s/common/var/lib/kubelet). "
	"Set it with --device-plugin-path (DEVICE_PLUGIN_PATH, edgegpu.devicePluginPath) and "
	"mount that host path into the DaemonSet.";

static const char fix_kubelet[] =
	"Start (or restart) the kubelet and check that it serves device plugins: systemctl status "
	"kubelet and journalctl -u kubelet (k3s: systemctl status k3s or k3s-agent; MicroK8s: snap "
	"services microk8s; KubeEdge: devicePluginEnabled: true in edgecore.yaml, then restart "
	"edgecore). A kubelet.sock that refuses connections was left by a kubelet that is no "
	"longer running. If the kubelet uses another --root-dir, set --kubelet-socket "
	"(KUBELET_SOCKET, edgegpu.kubeletSocket).";

static const char fix_sockets[] =
	"edgegpu's device plugin is not serving on this node: its DaemonSet pod is not running "
	"here, or it crashed. Find it with kubectl get pods -A -o wide | grep edgegpu, then "
	"kubectl -n NAMESPACE describe pod POD (not scheduled: nodeSelector accelerator: "
	"nvidia-gpu, taints) and kubectl -n NAMESPACE logs POD --previous (why it stopped). A "
	"socket that refuses connections was left by a process that died.";

static const char fix_metrics_off[] =
	"Registration cannot be checked while the daemon's metrics server is off: set "
	"edgegpu.metrics.address (--metrics-address, METRICS_ADDRESS; default :9400) in the "
	"daemon's config and give the doctor the same config, or read the daemon's log for "
	"\"registered with the kubelet\".";

static const char fix_metrics_down[] =
	"Nothing answers /readyz at the daemon's metrics address, so registration cannot be "
	"checked: the edgegpu pod is not running on this node, or it listens elsewhere. Give the "
	"doctor the address the daemon uses (--metrics-address; a pod without hostNetwork is "
	"reached at its pod IP: kubectl get pods -A -o wide | grep edgegpu), or run the doctor in "
	"the pod: kubectl -n NAMESPACE exec POD -- edgegpu doctor.";

static const char fix_hung[] =
	"The daemon's metrics server accepted the connection but did not answer in time: the "
	"daemon is hung or overloaded. Restart its pod (kubectl -n NAMESPACE delete pod POD) and "
	"keep its log (kubectl -n NAMESPACE logs POD) for the bug report.";

static const char fix_not_ready[] =
	"The daemon runs but is not ready; the lines above name each resource and why. \"not "
	"registered with the kubelet\": the kubelet is down or refused the registration (see "
	"plugin.kubelet-socket, and the daemon's log: kubectl -n NAMESPACE logs POD | grep "
	"register). \"socket ... is not served\": the daemon's device-plugins directory is not "
	"the kubelet's (check the DaemonSet's hostPath mount and --device-plugin-path). \"no GPU "
	"found\": see the driver checks.";

struct pctx {
	struct doctor *dr;
	const struct config *c;
	unsigned timeout_ms;
	char *dir_host; /* the device-plugins directory in use, as on the host */
	bool dir_ok;
	bool microk8s; /* the default was missing and MicroK8s's is used */
	struct doctor_resource *res;
	size_t n_res;
};

/* doctor_net_unix_probe() of the socket found at @host_path inside the host root. */
static int probe_host(const struct pctx *x, const char *host_path)
{
	char dial[FD_PATH_MAX];
	int fd = doctor_socket(x->dr, host_path, dial), r;

	if (fd < 0)
		return fd;
	r = doctor_net_unix_probe(dial, x->timeout_ms);
	fd_close(fd);
	return r;
}

static bool microk8s_likely(const struct pctx *x)
{
	struct stat st;

	return streq(doctor_facts(x->dr)->layout, "microk8s") ||
	       doctor_stat(x->dr, MICROK8S_KUBELET, &st, NULL) == 0;
}

/* The directory's entries (the first DIR_ENTRIES_SHOWN of them) as one evidence line. */
static void dir_entries(struct pctx *x, struct doctor_check *ch)
{
	struct buf b = { 0 };
	unsigned n = 0, more = 0;
	struct dirent *e;
	int r;
	DIR *d = doctor_opendir(x->dr, x->dir_host, &r);

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (streq(e->d_name, ".") || streq(e->d_name, ".."))
			continue;
		if (n++ >= DIR_ENTRIES_SHOWN) {
			more++;
			continue;
		}
		if (buf_printf(&b, "%s%s", b.len ? ", " : "", e->d_name) < 0)
			break;
	}
	(void)closedir(d);
	if (n == 0)
		doctor_evidence(ch, "%s: empty (no kubelet.sock, no plugin socket)", x->dir_host);
	else if (b.len && buf_append(&b, "", 1) >= 0)
		doctor_evidence(ch, "%s holds: %s%s", x->dir_host, (const char *)b.data,
				more ? ", ..." : "");
	buf_release(&b);
}

static void check_dir(struct pctx *x)
{
	const char *cfg = x->c->device_plugin_path;
	const char *alt = MICROK8S_KUBELET "/device-plugins";
	struct doctor_check *ch;
	struct stat st;
	int r;

	r = doctor_stat(x->dr, cfg, &st, NULL);
	if (r == -ENOENT && streq(cfg, CONFIG_DEFAULT_DEVICE_PLUGIN) && microk8s_likely(x) &&
	    doctor_stat(x->dr, alt, &st, NULL) == 0) {
		x->microk8s = true;
		r = 0;
	}
	x->dir_host = strdup(x->microk8s ? alt : cfg);
	if (!x->dir_host) {
		(void)doctor_add(x->dr, "plugin.dir", DOCTOR_FAIL, "out of memory");
		return;
	}
	if (r == 0 && S_ISDIR(st.st_mode)) {
		x->dir_ok = true;
		ch = doctor_add(x->dr, "plugin.dir", DOCTOR_PASS,
				"the kubelet's device-plugins directory exists");
		if (x->microk8s)
			doctor_evidence(ch,
					"MicroK8s: %s is missing; using %s (the MicroK8s "
					"kubelet's root dir)",
					cfg, alt);
		doctor_evidence(ch, "%s: a directory", x->dir_host);
		dir_entries(x, ch);
		return;
	}
	if (r == 0) {
		ch = doctor_add(x->dr, "plugin.dir", DOCTOR_FAIL,
				"the device-plugins path is not a directory");
		doctor_evidence(ch, "%s: not a directory (mode %o)", x->dir_host,
				(unsigned)st.st_mode);
	} else if (r == -EACCES) {
		ch = doctor_add(x->dr, "plugin.dir", DOCTOR_WARN,
				"cannot look at the device-plugins directory");
		doctor_evidence(ch, "%s: %s", cfg, strerror(-r));
		doctor_fix(ch, doctor_plugin_fix_root);
		return;
	} else {
		ch = doctor_add(x->dr, "plugin.dir", DOCTOR_FAIL,
				"the kubelet's device-plugins directory is missing");
		doctor_evidence(ch, "%s: %s", cfg, strerror(-r));
		if (streq(cfg, CONFIG_DEFAULT_DEVICE_PLUGIN) && microk8s_likely(x))
			doctor_evidence(ch, "MicroK8s: %s: missing too", alt);
	}
	doctor_fix(ch, fix_dir);
}

/* The kubelet socket as on the host, or NULL when registration is off ("") or OOM. */
static char *kubelet_socket_host(const struct pctx *x)
{
	const char *cfg = x->c->kubelet_socket;
	char *derived;

	if (!cfg || !*cfg)
		return NULL;
	if (!x->microk8s)
		return strdup(cfg);
	derived = path_join(x->c->device_plugin_path, KUBELET_SOCKET_NAME);
	if (derived && streq(derived, cfg)) {
		free(derived);
		return path_join(x->dir_host, KUBELET_SOCKET_NAME);
	}
	free(derived);
	return strdup(cfg);
}

static bool in_dir(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static void check_kubelet_socket(struct pctx *x)
{
	char *sock = kubelet_socket_host(x);
	struct doctor_check *ch;
	int r;

	if (!sock) {
		if (x->c->kubelet_socket && !*x->c->kubelet_socket)
			(void)doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_SKIP,
					 "registration is off (--kubelet-socket \"\")");
		else
			(void)doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_FAIL,
					 "out of memory");
		return;
	}
	if (!x->dir_ok && x->dir_host && in_dir(x->dir_host, sock)) {
		ch = doctor_add(
			x->dr, "plugin.kubelet-socket", DOCTOR_SKIP,
			"not checked: the device-plugins directory is missing (plugin.dir)");
		doctor_evidence(ch, "%s: not looked at", sock);
		free(sock);
		return;
	}
	r = probe_host(x, sock);
	switch (r) {
	case 0:
		ch = doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_PASS,
				"the kubelet accepts connections on kubelet.sock");
		doctor_evidence(ch, "%s: a socket; connect: accepted", sock);
		break;
	case -EACCES:
	case -EPERM:
		ch = doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_WARN,
				"cannot tell whether the kubelet listens: permission denied");
		doctor_evidence(ch, "%s: connect: %s", sock, strerror(-r));
		doctor_fix(ch, doctor_plugin_fix_root);
		break;
	case -ENOENT:
		ch = doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_FAIL,
				"kubelet.sock is missing: the kubelet is not running here");
		doctor_evidence(ch, "%s: %s", sock, strerror(-r));
		doctor_fix(ch, fix_kubelet);
		break;
	case -ECONNREFUSED:
		ch = doctor_add(
			x->dr, "plugin.kubelet-socket", DOCTOR_FAIL,
			"kubelet not running: kubelet.sock is stale (nobody listens on it)");
		doctor_evidence(ch, "%s: a socket; connect: %s", sock, strerror(-r));
		doctor_fix(ch, fix_kubelet);
		break;
	case -ETIMEDOUT:
		ch = doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_FAIL,
				"the kubelet does not accept connections on kubelet.sock (hung?)");
		doctor_evidence(ch, "%s: connect: no answer within %u ms", sock, x->timeout_ms);
		doctor_fix(ch, fix_kubelet);
		break;
	default:
		ch = doctor_add(x->dr, "plugin.kubelet-socket", DOCTOR_FAIL,
				"kubelet.sock cannot be used");
		doctor_evidence(ch, "%s: %s", sock, doctor_strerror(r));
		doctor_fix(ch, fix_kubelet);
		break;
	}
	free(sock);
}

static int add_resource(struct pctx *x, const char *name, bool required)
{
	struct doctor_resource *n;

	if (!name)
		return 0;
	for (size_t i = 0; i < x->n_res; i++)
		if (streq(x->res[i].name, name)) {
			x->res[i].required |= required;
			return 0;
		}
	n = realloc(x->res, (x->n_res + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	x->res = n;
	x->res[x->n_res++] = (struct doctor_resource){ .name = name, .required = required };
	return 0;
}

/*
 * Every resource the config can advertise, as config_validate() counts them. Which ones are
 * served depends on the GPUs; the ones any node with GPUs serves are marked required: the
 * gpumem resource when GPUs are listed for it, and nvidia.com/gpu when nothing renames or
 * shares GPUs (and gpumem does not take every GPU the driver layer saw).
 */
static int collect_resources(struct pctx *x)
{
	const struct config *c = x->c;
	const struct doctor_facts *f = doctor_facts(x->dr);
	size_t mem = c->gpumem.devices.n_refs;
	bool plain = c->n_gpus == 0 && c->time_slicing.n_resources == 0 &&
		     !(mem && f->n_gpus && mem >= f->n_gpus);
	int r;

	r = add_resource(x, CONFIG_DEFAULT_RESOURCE, plain);
	for (size_t i = 0; r >= 0 && i < c->n_gpus; i++)
		r = add_resource(x, c->gpus[i].name, false);
	for (size_t i = 0; r >= 0 && i < c->time_slicing.n_resources; i++)
		r = add_resource(x, config_ts_resource_name(&c->time_slicing.resources[i]), false);
	if (r >= 0 && mem)
		r = add_resource(x, c->gpumem.resource_name, true);
	return r;
}

/*
 * During an upgrade whose instances overlap, the new one serves at <stem>-N.sock (config.h):
 * the first alternate that accepts a connection stands for the resource and replaces *@path.
 * Returns 0 then, else @r (what the configured path gave).
 */
static int probe_alternate(struct pctx *x, char **path, int r)
{
	const char *dot = strrchr(*path, '.');
	size_t stem = dot && streq(dot, ".sock") ? (size_t)(dot - *path) : strlen(*path);

	for (unsigned i = 1; i < CONFIG_SOCKET_ALT_PATHS; i++) {
		char *alt = strdup_printf("%.*s-%u.sock", (int)stem, *path, i);

		if (alt && probe_host(x, alt) == 0) {
			free(*path);
			*path = alt;
			return 0;
		}
		free(alt);
	}
	return r;
}

static void check_sockets(struct pctx *x)
{
	struct doctor_check *ch;
	unsigned seen = 0, ok = 0, missing_req = 0, dead = 0, denied = 0;
	struct buf ev = { 0 };
	enum doctor_status st;

	if (!x->dir_ok) {
		(void)doctor_add(
			x->dr, "plugin.sockets", DOCTOR_SKIP,
			"not checked: the device-plugins directory is missing (plugin.dir)");
		return;
	}
	for (size_t i = 0; i < x->n_res; i++) {
		struct doctor_resource *res = &x->res[i];
		char *name = config_socket_name(res->name);
		char *path = name ? path_join(x->dir_host, name) : NULL;
		const char *what;
		int r;

		free(name);
		if (!path) {
			(void)doctor_add(x->dr, "plugin.sockets", DOCTOR_FAIL, "out of memory");
			buf_release(&ev);
			return;
		}
		r = probe_host(x, path);
		if (r == -ENOENT || r == -ECONNREFUSED)
			r = probe_alternate(x, &path, r);
		res->socket_seen = r != -ENOENT;
		seen += res->socket_seen;
		if (r == 0) {
			ok++;
			what = "accepts connections";
		} else if (r == -ENOENT) {
			missing_req += res->required;
			what = res->required ?
				       "missing" :
				       "missing (not served: the config may give it no GPU)";
		} else if (r == -EACCES || r == -EPERM) {
			denied++;
			what = "permission denied";
		} else if (r == -ECONNREFUSED) {
			dead++;
			what = "stale: nobody listens on it (the plugin died)";
		} else if (r == -ETIMEDOUT) {
			dead++;
			what = "no connection within the timeout (the plugin is hung)";
		} else {
			dead++;
			what = doctor_strerror(r);
		}
		if (buf_printf(&ev, "%s: %s: %s\n", res->name, path, what) < 0)
			ev.len = 0;
		free(path);
	}
	if (missing_req || dead || !seen)
		st = DOCTOR_FAIL;
	else if (denied)
		st = DOCTOR_WARN;
	else
		st = DOCTOR_PASS;
	if (st == DOCTOR_PASS)
		ch = doctor_add(x->dr, "plugin.sockets", st, "edgegpu serves %u plugin socket%s",
				ok, ok == 1 ? "" : "s");
	else if (st == DOCTOR_WARN)
		ch = doctor_add(x->dr, "plugin.sockets", st,
				"cannot tell whether edgegpu's sockets answer: permission denied");
	else if (!seen)
		ch = doctor_add(x->dr, "plugin.sockets", st,
				"no edgegpu plugin socket: the daemon is not running on this node");
	else if (dead)
		ch = doctor_add(
			x->dr, "plugin.sockets", st,
			"an edgegpu plugin socket does not answer: the daemon died or hangs");
	else
		ch = doctor_add(x->dr, "plugin.sockets", st,
				"an edgegpu plugin socket the config needs is missing");
	/* buf_printf() keeps the text NUL-terminated. */
	for (const char *l = ev.len ? (const char *)ev.data : ""; *l;) {
		size_t len = strcspn(l, "\n");

		doctor_evidence(ch, "%.*s", (int)len, l);
		l += len + (l[len] == '\n');
	}
	buf_release(&ev);
	if (st == DOCTOR_WARN)
		doctor_fix(ch, doctor_plugin_fix_root);
	else if (st == DOCTOR_FAIL)
		doctor_fix(ch, fix_sockets);
}

/* One line of a peer's text, made printable and cut short. */
static void evidence_line(struct doctor_check *ch, const char *prefix, const char *s, size_t n)
{
	char line[EVIDENCE_LINE_MAX + 1];
	size_t k = MIN(n, (size_t)EVIDENCE_LINE_MAX);

	for (size_t i = 0; i < k; i++) {
		line[i] = s[i];
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			line[i] = '?';
	}
	line[k] = 0;
	doctor_evidence(ch, "%s%s%s", prefix, line, n > k ? "..." : "");
}

static void check_registered(struct pctx *x)
{
	const char *addr = x->c->metrics.address;
	struct doctor_net_http h;
	struct doctor_check *ch;
	char *url = NULL, *err = NULL;
	int r;

	if (!addr || !*addr) {
		ch = doctor_add(x->dr, "plugin.registered", DOCTOR_WARN,
				"cannot tell whether edgegpu is registered: metrics are off");
		doctor_evidence(ch, "edgegpu.metrics.address is \"\": no /readyz to ask");
		doctor_fix(ch, fix_metrics_off);
		return;
	}
	r = doctor_net_http_get(addr, "/readyz", x->timeout_ms, &h, &url, &err);
	if (r == -ETIMEDOUT && err && strstr(err, "no complete answer")) {
		ch = doctor_add(x->dr, "plugin.registered", DOCTOR_FAIL,
				"the daemon's /readyz does not answer: the daemon hangs");
		doctor_evidence(ch, "%s (%u ms)", err, x->timeout_ms);
		doctor_fix(ch, fix_hung);
	} else if (r < 0) {
		ch = doctor_add(
			x->dr, "plugin.registered", DOCTOR_WARN,
			"cannot tell whether edgegpu is registered: /readyz does not answer");
		doctor_evidence(ch, "metrics address \"%s\": %s", addr, err ? err : strerror(-r));
		doctor_fix(ch, fix_metrics_down);
	} else if (h.status == 200) {
		doctor_facts(x->dr)->plugin_ready = true;
		ch = doctor_add(x->dr, "plugin.registered", DOCTOR_PASS,
				"the daemon is ready: every resource is served and registered");
		doctor_evidence(ch, "GET %s: 200", url);
	} else if (h.status == 503) {
		const char *p = h.body;
		unsigned n = 0;

		ch = doctor_add(
			x->dr, "plugin.registered", DOCTOR_FAIL,
			"the daemon is not ready: a resource is not served or not registered");
		doctor_evidence(ch, "GET %s: 503", url);
		while (p && *p) {
			size_t len = strcspn(p, "\n");

			if (len && n++ < READYZ_LINES_SHOWN)
				evidence_line(ch, "not ready: ", p, len);
			p += len + (p[len] == '\n');
		}
		if (n > READYZ_LINES_SHOWN)
			doctor_evidence(ch, "not ready: %u more lines", n - READYZ_LINES_SHOWN);
		doctor_fix(ch, fix_not_ready);
	} else {
		ch = doctor_add(x->dr, "plugin.registered", DOCTOR_WARN,
				"cannot tell whether edgegpu is registered: /readyz answered %u",
				h.status);
		doctor_evidence(ch,
				"GET %s: %u (edgegpu answers 200 or 503: another server "
				"there?)",
				url, h.status);
		if (h.body)
			evidence_line(ch, "body: ", h.body, strcspn(h.body, "\n"));
		doctor_fix(ch, fix_metrics_down);
	}
	if (r >= 0)
		doctor_net_http_release(&h);
	free(url);
	free(err);
}

/* The pod-resources socket as on the host: the configured one, or MicroK8s's. */
static char *podres_host(const struct pctx *x)
{
	const char *cfg = x->c->pod_resources_socket;
	struct stat st;

	if (!cfg || !*cfg)
		return NULL;
	if (streq(cfg, CONFIG_DEFAULT_POD_RESOURCES) &&
	    doctor_stat(x->dr, cfg, &st, NULL) == -ENOENT && (x->microk8s || microk8s_likely(x)) &&
	    doctor_stat(x->dr, MICROK8S_PODRES_PATH, &st, NULL) == 0)
		return strdup(MICROK8S_PODRES_PATH);
	return strdup(cfg);
}

void doctor_plugin(struct doctor *dr)
{
	const struct doctor_opts *o = doctor_opts(dr);
	struct pctx x = { .dr = dr, .c = o->cfg, .timeout_ms = o->timeout_ms };
	char *podres = NULL, dial[FD_PATH_MAX];
	int fd = -1;

	if (!x.c) {
		(void)doctor_add(dr, "plugin.dir", DOCTOR_SKIP, "no config");
		return;
	}
	if (!x.timeout_ms)
		x.timeout_ms = 5000;
	check_dir(&x);
	check_kubelet_socket(&x);
	if (collect_resources(&x) < 0) {
		(void)doctor_add(dr, "plugin.sockets", DOCTOR_FAIL, "out of memory");
		goto out;
	}
	check_sockets(&x);
	check_registered(&x);
	podres = podres_host(&x);
	if (!podres) {
		(void)doctor_add(dr, "plugin.allocations", DOCTOR_SKIP,
				 "no pod-resources socket configured");
		goto out;
	}
	fd = doctor_socket(dr, podres, dial);
	doctor_plugin_allocations(
		dr, podres, fd >= 0 ? dial : NULL, fd >= 0 ? 0 : fd,
		streq(podres, x.c->pod_resources_socket) ? NULL : x.c->pod_resources_socket, x.res,
		x.n_res);
out:
	fd_close(fd);
	free(podres);
	free(x.res);
	free(x.dir_host);
}
