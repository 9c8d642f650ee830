/*
 * plugin.allocations: how many devices of each edgegpu resource the kubelet can hand out, how
 * many are held and by whom, from the pod-resources API (GetAllocatableResources and List),
 * so that "Pending for lack of nvidia.com/gpu" is answered with numbers. The kubelet builds
 * both answers from Go maps (any order, a device once per NUMA node), so everything is
 * counted on sorted, de-duplicated copies.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor-int.h"
#include "doctor-plugin-int.h"
#include "grpc.h"
#include "podres.h"
#include "podresources.pb-c.h"

#define PODRES_MAX_RECV	 ((size_t)16 << 20)
#define HOLDERS_SHOWN	 8
#define HOLDERS_IN_SHORT 4

/* Here, not in doctor-plugin.c, which calls this file: the call graph stays one-way. */
const char doctor_plugin_fix_root[] =
	"Run the doctor as root (sudo edgegpu doctor): the kubelet's sockets and the device "
	"plugins' sockets are open to root only.";

static const char fix_full[] =
	"Every device of the resource is taken (the holders are above), so a pod asking for it "
	"stays Pending (kubectl describe pod: Insufficient). Free one (delete or scale down a "
	"pod that holds it), add a GPU or a node, or share GPUs: sharing.timeSlicing (replicas) "
	"or edgegpu.sharing.memory (nvidia.com/gpumem) lets one GPU serve several pods.";

static const char fix_none[] =
	"The kubelet has no healthy device of the resource: the plugin is not registered (see "
	"plugin.registered) or it reported every device unhealthy (the daemon's log, \"gpu "
	"unhealthy\", and the driver checks). Fix that first; kubectl describe node shows the "
	"resource's capacity and allocatable.";

static const char fix_podres_missing[] =
	"The kubelet's pod-resources socket is missing, so allocations cannot be counted. It is "
	"<root-dir>/pod-resources/kubelet.sock (default /var/lib/kubelet/pod-resources/"
	"kubelet.sock; MicroK8s: under /var/snap/microk8s/common/var/lib/kubelet): point "
	"--pod-resources-socket (POD_RESOURCES_SOCKET, edgegpu.podResourcesSocket) at it, or "
	"start the kubelet. kubectl describe node shows the same counts.";

static const char fix_podres_error[] =
	"The kubelet's pod-resources API did not answer (the error is above): check that the "
	"kubelet runs (plugin.kubelet-socket) and is not flooded (it allows 100 pod-resources "
	"calls a second). kubectl describe node shows the same counts.";

/* One device ID of one of our resources; holder fields only for allocated ones. */
struct dev {
	size_t res;
	const char *id;
	const char *ns, *pod, *ctr;
};

struct devs {
	struct dev *v;
	size_t n, cap;
};

struct counts {
	size_t allocatable, allocated, allocated_ok; /* allocated_ok: allocated and allocatable */
	size_t holders;
};

static int devs_push(struct devs *d, struct dev e)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct dev *v = realloc(d->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = e;
	return 0;
}

static int dev_cmp_id(const void *a, const void *b)
{
	const struct dev *x = a, *y = b;

	if (x->res != y->res)
		return x->res < y->res ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int dev_cmp_holder(const void *a, const void *b)
{
	const struct dev *x = a, *y = b;
	int c;

	if (x->res != y->res)
		return x->res < y->res ? -1 : 1;
	c = strcmp(x->ns, y->ns);
	if (!c)
		c = strcmp(x->pod, y->pod);
	if (!c)
		c = strcmp(x->ctr, y->ctr);
	return c ? c : strcmp(x->id, y->id);
}

static bool same_holder(const struct dev *x, const struct dev *y)
{
	return x->res == y->res && streq(x->ns, y->ns) && streq(x->pod, y->pod) &&
	       streq(x->ctr, y->ctr);
}

/* Sorts by @cmp and drops entries equal under it. */
static void sort_unique(struct devs *d, int (*cmp)(const void *, const void *))
{
	size_t k = 0;

	if (d->n > 1)
		qsort(d->v, d->n, sizeof(*d->v), cmp);
	for (size_t i = 0; i < d->n; i++)
		if (k == 0 || cmp(&d->v[k - 1], &d->v[i]) != 0)
			d->v[k++] = d->v[i];
	d->n = k;
}

static bool find_res(const struct doctor_resource *res, size_t n, const char *name, size_t *ret)
{
	for (size_t i = 0; name && i < n; i++)
		if (streq(res[i].name, name)) {
			*ret = i;
			return true;
		}
	return false;
}

static int add_container_devices(struct devs *d, const struct doctor_resource *res, size_t n,
				 V1__ContainerDevices *const *cds, size_t n_cds, const char *ns,
				 const char *pod, const char *ctr)
{
	for (size_t i = 0; i < n_cds; i++) {
		size_t r;

		if (!find_res(res, n, cds[i]->resource_name, &r))
			continue;
		for (size_t k = 0; k < cds[i]->n_device_ids; k++) {
			struct dev e = { r, cds[i]->device_ids[k] ? cds[i]->device_ids[k] : "", ns,
					 pod, ctr };

			if (devs_push(d, e) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* podres_walk() into a devs: the devices of @res held by containers (strings in the answer). */
struct held {
	struct devs *d;
	const struct doctor_resource *res;
	size_t n;
	int r;
};

static void add_held(const char *ns, const char *pod, const char *ctr, const char *resource,
		     const char *id, void *userdata)
{
	struct held *h = userdata;
	size_t r;

	if (h->r < 0 || !find_res(h->res, h->n, resource, &r))
		return;
	h->r = devs_push(h->d, (struct dev){ r, id, ns, pod, ctr });
}

/* One unary pod-resources call. Returns 0 (status in *ret_status), or a transport -errno. */
static int call(const char *path, const char *method, unsigned timeout_ms,
		enum grpc_status *ret_status, char **ret_message, uint8_t **ret_resp,
		size_t *ret_len)
{
	struct grpc_client_opts o = { .timeout = (usec_t)timeout_ms * USEC_PER_MSEC,
				      .max_recv_msg = PODRES_MAX_RECV };

	*ret_message = NULL;
	*ret_resp = NULL;
	*ret_len = 0;
	*ret_status = GRPC_STATUS_UNKNOWN;
	return grpc_client_call_sync(path, method, NULL, 0, &o, ret_status, ret_message, ret_resp,
				     ret_len);
}

/* A failed call as a warning: what failed, and the fix. */
static void call_failed(struct doctor *dr, const char *host_path, const char *method,
			unsigned timeout_ms, int r, enum grpc_status status, const char *message)
{
	struct doctor_check *ch;

	if (r == -EACCES || r == -EPERM) {
		ch = doctor_add(dr, "plugin.allocations", DOCTOR_WARN,
				"cannot count allocations: the pod-resources socket refuses us");
		doctor_evidence(ch, "%s: %s", host_path, strerror(-r));
		doctor_fix(ch, doctor_plugin_fix_root);
		return;
	}
	ch = doctor_add(dr, "plugin.allocations", DOCTOR_WARN,
			"cannot count allocations: the pod-resources API did not answer");
	if (r == -ETIMEDOUT)
		doctor_evidence(ch, "%s %s: no answer within %u ms (deadline passed)", host_path,
				method, timeout_ms);
	else if (r < 0)
		doctor_evidence(ch, "%s %s: %s", host_path, method,
				message && *message ? message : strerror(-r));
	else
		doctor_evidence(ch, "%s %s: gRPC status %s: %s", host_path, method,
				grpc_status_name((int)status), message ? message : "");
	doctor_fix(ch, fix_podres_error);
}

/* "ns/pod/ctr, ns/pod/ctr, ..." for the holders of resource @r in the holder-sorted @h. */
static void holders_short(const struct devs *h, size_t r, char *out, size_t size)
{
	size_t len = 0, shown = 0;
	bool more = false;

	out[0] = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct dev *e = &h->v[i];

		if (e->res != r || (i > 0 && same_holder(&h->v[i - 1], e)))
			continue;
		if (shown == HOLDERS_IN_SHORT) {
			more = true;
			break;
		}
		(void)snprintf(out + len, size - len, "%s%s/%s/%s", shown ? ", " : "", e->ns,
			       e->pod, e->ctr);
		len = strlen(out);
		shown++;
	}
	if (more && len + 6 < size)
		(void)snprintf(out + len, size - len, ", ...");
}

static void holder_lines(struct doctor_check *ch, const char *name, const struct devs *h, size_t r)
{
	size_t shown = 0, skipped = 0;

	for (size_t i = 0; i < h->n;) {
		size_t j = i;

		while (j < h->n && same_holder(&h->v[i], &h->v[j]))
			j++;
		if (h->v[i].res == r) {
			if (shown++ < HOLDERS_SHOWN)
				doctor_evidence(ch, "%s: %zu held by %s/%s/%s", name, j - i,
						h->v[i].ns, h->v[i].pod, h->v[i].ctr);
			else
				skipped++;
		}
		i = j;
	}
	if (skipped)
		doctor_evidence(ch, "%s: and %zu more holders", name, skipped);
}

static void report(struct doctor *dr, const char *host_path, const char *missing_default,
		   const struct doctor_resource *res, size_t n, bool have_alloc,
		   const char *alloc_note, struct devs *a, struct devs *l)
{
	struct counts *cnt = calloc(n ? n : 1, sizeof(*cnt));
	struct devs h = { 0 };
	struct doctor_check *ch;
	size_t in_play = 0, full = 0, none = 0;
	const char *first_full = NULL, *first_none = NULL;
	char who[512];

	if (!cnt || (l->n && !(h.v = malloc(l->n * sizeof(*h.v))))) {
		(void)doctor_add(dr, "plugin.allocations", DOCTOR_FAIL, "out of memory");
		goto out;
	}
	h.n = h.cap = l->n;
	if (l->n)
		memcpy(h.v, l->v, l->n * sizeof(*h.v));
	sort_unique(&h, dev_cmp_holder);
	sort_unique(a, dev_cmp_id);
	sort_unique(l, dev_cmp_id);
	for (size_t i = 0; i < a->n; i++)
		cnt[a->v[i].res].allocatable++;
	for (size_t i = 0, j = 0; i < l->n; i++) {
		cnt[l->v[i].res].allocated++;
		while (j < a->n && dev_cmp_id(&a->v[j], &l->v[i]) < 0)
			j++;
		if (j < a->n && dev_cmp_id(&a->v[j], &l->v[i]) == 0)
			cnt[l->v[i].res].allocated_ok++;
	}
	for (size_t r = 0; r < n; r++) {
		bool play = res[r].required || res[r].socket_seen || cnt[r].allocatable ||
			    cnt[r].allocated;

		if (!play)
			continue;
		in_play++;
		if (have_alloc && cnt[r].allocatable == 0) {
			if (!none++)
				first_none = res[r].name;
		} else if (have_alloc && cnt[r].allocatable == cnt[r].allocated_ok) {
			if (!full++)
				first_full = res[r].name;
		}
	}
	if (in_play == 0)
		ch = doctor_add(dr, "plugin.allocations", DOCTOR_WARN,
				"the kubelet has no device of any edgegpu resource");
	else if (none)
		ch = doctor_add(
			dr, "plugin.allocations", DOCTOR_WARN,
			"the kubelet has no healthy %s%s: a pod asking for it stays Pending",
			first_none, none > 1 ? " (and more)" : "");
	else if (full)
		ch = doctor_add(dr, "plugin.allocations", DOCTOR_WARN,
				"no free %s%s: a new pod asking for it stays Pending", first_full,
				full > 1 ? " (and more)" : "");
	else
		ch = doctor_add(dr, "plugin.allocations", DOCTOR_PASS,
				"free devices for every edgegpu resource");
	if (missing_default)
		doctor_evidence(ch, "MicroK8s: %s is missing; using %s", missing_default,
				host_path);
	if (alloc_note)
		doctor_evidence(ch, "%s", alloc_note);
	for (size_t r = 0; r < n; r++) {
		const struct counts *c = &cnt[r];
		const char *name = res[r].name;

		if (!(res[r].required || res[r].socket_seen || c->allocatable || c->allocated))
			continue;
		if (have_alloc)
			doctor_evidence(ch, "%s: %zu allocatable, %zu allocated, %zu free", name,
					c->allocatable, c->allocated,
					c->allocatable - c->allocated_ok);
		else
			doctor_evidence(ch, "%s: %zu allocated (allocatable unknown)", name,
					c->allocated);
		if (c->allocated > c->allocated_ok && have_alloc)
			doctor_evidence(ch,
					"%s: %zu of the allocated devices are not allocatable "
					"any more (unhealthy or gone)",
					name, c->allocated - c->allocated_ok);
		holder_lines(ch, name, &h, r);
		if (have_alloc && c->allocatable == 0)
			doctor_evidence(ch,
					"a new pod asking for %s will stay Pending: the kubelet "
					"has no healthy device of it",
					name);
		else if (have_alloc && c->allocatable == c->allocated_ok) {
			holders_short(&h, r, who, sizeof(who));
			doctor_evidence(ch,
					"a new pod asking for %s will stay Pending: %zu of %zu "
					"allocated to %s",
					name, c->allocated_ok, c->allocatable, who);
		}
	}
	if (in_play == 0 || none)
		doctor_fix(ch, fix_none);
	else if (full)
		doctor_fix(ch, fix_full);
out:
	free(h.v);
	free(cnt);
}

void doctor_plugin_allocations(struct doctor *dr, const char *host_path, const char *dial,
			       int open_r, const char *missing_default,
			       const struct doctor_resource *res, size_t n)
{
	unsigned timeout_ms = doctor_opts(dr)->timeout_ms ? doctor_opts(dr)->timeout_ms : 5000;
	V1__AllocatableResourcesResponse *am = NULL;
	V1__ListPodResourcesResponse *lm = NULL;
	struct devs a = { 0 }, l = { 0 };
	struct held held = { &l, res, n, 0 };
	struct doctor_check *ch;
	enum grpc_status st;
	char *msg = NULL, *note = NULL;
	uint8_t *resp = NULL;
	size_t len;
	bool have_alloc = true;
	int r;

	if (!dial && open_r == -ENOENT) {
		if (streq(doctor_facts(dr)->layout, "kubeedge")) {
			ch = doctor_add(dr, "plugin.allocations", DOCTOR_SKIP,
					"no pod-resources socket: edgecore serves one only with "
					"its KubeletPodResources feature gate on");
			doctor_evidence(ch, "%s: missing", host_path);
			return;
		}
		ch = doctor_add(dr, "plugin.allocations", DOCTOR_WARN,
				"cannot count allocations: the pod-resources socket is missing");
		doctor_evidence(ch, "%s: %s", host_path, strerror(ENOENT));
		doctor_fix(ch, fix_podres_missing);
		return;
	}
	if (!dial) {
		call_failed(dr, host_path, "GetAllocatableResources", timeout_ms, open_r,
			    GRPC_STATUS_UNKNOWN, NULL);
		return;
	}
	r = call(dial, "/v1.PodResourcesLister/GetAllocatableResources", timeout_ms, &st, &msg,
		 &resp, &len);
	if (r == 0 && st == GRPC_STATUS_UNIMPLEMENTED) {
		/* Kubernetes before 1.23, or the KubeletPodResourcesGetAllocatable gate off. */
		have_alloc = false;
		note = strdup_printf("GetAllocatableResources: %s (%s): this kubelet cannot say "
				     "how many devices are allocatable",
				     grpc_status_name((int)st), msg ? msg : "");
	} else if (r < 0 || st != GRPC_STATUS_OK) {
		call_failed(dr, host_path, "GetAllocatableResources", timeout_ms, r, st, msg);
		goto out;
	} else {
		am = v1__allocatable_resources_response__unpack(NULL, len, resp);
		if (!am) {
			call_failed(dr, host_path, "GetAllocatableResources", timeout_ms, 0,
				    GRPC_STATUS_INTERNAL, "the answer does not decode");
			goto out;
		}
		if (add_container_devices(&a, res, n, am->devices, am->n_devices, "", "", "") < 0)
			goto oom;
	}
	free(msg);
	free(resp);
	msg = NULL;
	resp = NULL;
	r = call(dial, "/v1.PodResourcesLister/List", timeout_ms, &st, &msg, &resp, &len);
	if (r < 0 || st != GRPC_STATUS_OK) {
		call_failed(dr, host_path, "List", timeout_ms, r, st, msg);
		goto out;
	}
	lm = v1__list_pod_resources_response__unpack(NULL, len, resp);
	if (!lm) {
		call_failed(dr, host_path, "List", timeout_ms, 0, GRPC_STATUS_INTERNAL,
			    "the answer does not decode");
		goto out;
	}
	podres_walk(lm, add_held, &held);
	if (held.r < 0)
		goto oom;
	report(dr, host_path, missing_default, res, n, have_alloc, note, &a, &l);
	goto out;
oom:
	(void)doctor_add(dr, "plugin.allocations", DOCTOR_FAIL, "out of memory");
out:
	if (am)
		v1__allocatable_resources_response__free_unpacked(am, NULL);
	if (lm)
		v1__list_pod_resources_response__free_unpacked(lm, NULL);
	free(a.v);
	free(l.v);
	free(note);
	free(msg);
	free(resp);
}
