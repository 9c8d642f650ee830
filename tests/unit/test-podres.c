/*
 * podres.c: the canonical form of List answers (order-free, duplicate-free), and the poller
 * acting on two equal answers when the kubelet lists them in a new order on every call, as
 * it does (Go maps). Against an in-process gRPC server on a temporary socket.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc.h"
#include "loop.h"
#include "podres.h"
#include "podresources.pb-c.h"
#include "unit-fs.h"
#include "unit.h"

/* --- building answers --- */

/* One device entry: resource and ID. */
struct dev {
	const char *res;
	const char *id;
};

/*
 * An encoded answer: @n devices, spread over pods of @per_pod devices each (one container
 * per pod, one ID per ContainerDevices, as the kubelet lists them), in the order given.
 */
static uint8_t *encode(const struct dev *devs, size_t n, size_t per_pod, size_t *ret_len)
{
	V1__ListPodResourcesResponse m = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
	size_t n_pods = per_pod ? (n + per_pod - 1) / per_pod : 0;
	V1__PodResources *pods = calloc(n_pods + 1, sizeof(*pods));
	V1__PodResources **pp = calloc(n_pods + 1, sizeof(V1__PodResources *));
	V1__ContainerResources *crs = calloc(n_pods + 1, sizeof(*crs));
	V1__ContainerResources **crp = calloc(n_pods + 1, sizeof(V1__ContainerResources *));
	V1__ContainerDevices *cds = calloc(n + 1, sizeof(*cds));
	V1__ContainerDevices **cdp = calloc(n + 1, sizeof(V1__ContainerDevices *));
	char **ids = calloc(n + 1, sizeof(*ids));
	uint8_t *out;

	assert_true(pods && pp && crs && crp && cds && cdp && ids);
	for (size_t i = 0; i < n; i++) {
		v1__container_devices__init(&cds[i]);
		cds[i].resource_name = (char *)devs[i].res;
		ids[i] = (char *)devs[i].id;
		cds[i].device_ids = &ids[i];
		cds[i].n_device_ids = 1;
		cdp[i] = &cds[i];
	}
	for (size_t p = 0; p < n_pods; p++) {
		size_t first = p * per_pod;

		v1__pod_resources__init(&pods[p]);
		v1__container_resources__init(&crs[p]);
		pods[p].name = (char *)"pod";
		pods[p].namespace_ = (char *)"default";
		crs[p].name = (char *)"c";
		crs[p].devices = &cdp[first];
		crs[p].n_devices = n - first < per_pod ? n - first : per_pod;
		crp[p] = &crs[p];
		pods[p].containers = &crp[p];
		pods[p].n_containers = 1;
		pp[p] = &pods[p];
	}
	m.pod_resources = pp;
	m.n_pod_resources = n_pods;
	*ret_len = v1__list_pod_resources_response__get_packed_size(&m);
	out = malloc(*ret_len + 1);
	assert_non_null(out);
	v1__list_pod_resources_response__pack(&m, out);
	free(pods);
	free(pp);
	free(crs);
	free(crp);
	free(cds);
	free(cdp);
	free(ids);
	return out;
}

static const struct dev SET[] = {
	{ "nvidia.com/gpumem", "a1" },	{ "nvidia.com/gpumem", "a2" },
	{ "nvidia.com/gpumem", "b7" },	{ "nvidia.com/gpu", "GPU-1" },
	{ "example.com/pad", "pad-0" },
};

/* SET in another order, over pods of another size, with a2 listed twice (two NUMA nodes). */
static const struct dev SET_SHUFFLED[] = {
	{ "example.com/pad", "pad-0" }, { "nvidia.com/gpumem", "b7" },
	{ "nvidia.com/gpumem", "a2" },	{ "nvidia.com/gpu", "GPU-1" },
	{ "nvidia.com/gpumem", "a2" },	{ "nvidia.com/gpumem", "a1" },
};

/* SET with one unit more. */
static const struct dev SET_GROWN[] = {
	{ "nvidia.com/gpumem", "b8" }, { "nvidia.com/gpumem", "a1" },
	{ "nvidia.com/gpumem", "b7" }, { "example.com/pad", "pad-0" },
	{ "nvidia.com/gpumem", "a2" }, { "nvidia.com/gpu", "GPU-1" },
};

/* --- canonical form --- */

static void test_canonical_ignores_order_and_duplicates(void **state)
{
	struct buf a = { 0 }, b = { 0 }, c = { 0 };
	size_t la, lb, lc;
	uint8_t *ea = encode(SET, ELEMENTSOF(SET), 2, &la);
	uint8_t *eb = encode(SET_SHUFFLED, ELEMENTSOF(SET_SHUFFLED), 1, &lb);
	uint8_t *ec = encode(SET_GROWN, ELEMENTSOF(SET_GROWN), 3, &lc);
	static const char want[] = "example.com/pad\0pad-0\0"
				   "nvidia.com/gpu\0GPU-1\0"
				   "nvidia.com/gpumem\0a1\0"
				   "nvidia.com/gpumem\0a2\0"
				   "nvidia.com/gpumem\0b7\0";

	/* The bytes differ, as the kubelet's do from call to call... */
	assert_false(la == lb && memcmp(ea, eb, la) == 0);
	/* ...the sets do not. */
	assert_int_equal(podres_canonical(ea, la, &a), 5);
	assert_int_equal(podres_canonical(eb, lb, &b), 5);
	assert_int_equal(a.len, sizeof(want) - 1);
	assert_memory_equal(a.data, want, a.len);
	assert_int_equal(b.len, a.len);
	assert_memory_equal(b.data, a.data, a.len);
	/* A changed set is a changed form. */
	assert_int_equal(podres_canonical(ec, lc, &c), 6);
	assert_true(c.len != a.len || memcmp(c.data, a.data, a.len) != 0);
	/* The same resource and ID split differently are different pairs. */
	{
		const struct dev x[] = { { "ab", "c" } }, y[] = { { "a", "bc" } };
		size_t lx, ly;
		uint8_t *exx = encode(x, 1, 1, &lx), *eyy = encode(y, 1, 1, &ly);

		assert_int_equal(podres_canonical(exx, lx, &a), 1);
		assert_int_equal(podres_canonical(eyy, ly, &b), 1);
		assert_int_equal(a.len, b.len);
		assert_true(memcmp(a.data, b.data, a.len) != 0);
		free(exx);
		free(eyy);
	}
	free(ea);
	free(eb);
	free(ec);
	buf_release(&a);
	buf_release(&b);
	buf_release(&c);
}

static void test_canonical_empty_and_malformed(void **state)
{
	struct buf b = { 0 };
	static const uint8_t garbage[] = { 0x0a, 0x7f, 0x01 }; /* field 1, length past the end */

	assert_int_equal(buf_append(&b, "stale", 5), 0);
	assert_int_equal(podres_canonical(NULL, 0, &b), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(podres_canonical(garbage, sizeof(garbage), &b), -EBADMSG);
	buf_release(&b);
}

/* --- the poller against a kubelet that shuffles --- */

struct fake {
	unsigned calls;
	const struct dev *devs[2]; /* answers alternate between these two orders */
	size_t n[2];
	size_t per_pod[2];
};

static void on_list(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct fake *f = userdata;
	unsigned w = f->calls++ % 2;
	size_t n;
	uint8_t *e = encode(f->devs[w], f->n[w], f->per_pod[w], &n);

	assert_int_equal(grpc_call_send(call, e, n), 0);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
	free(e);
}

static const struct grpc_method methods[] = {
	{ "/v1.PodResourcesLister/List", false, on_list },
};

struct seen {
	unsigned n;
	struct buf last; /* canonical form of the last answer handed over */
};

static void on_stable(struct podres *p, const uint8_t *resp, size_t len, void *userdata)
{
	struct seen *s = userdata;

	s->n++;
	assert_true(podres_canonical(resp, len, &s->last) >= 0);
}

static void run_until_calls(struct loop *l, const struct fake *f, unsigned calls)
{
	usec_t end = now_usec() + 2 * USEC_PER_SEC;

	while (f->calls < calls && now_usec() < end)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_true(f->calls >= calls);
}

/* A fake kubelet serving List on a socket in a temp dir, and the loop both run on. */
struct kubelet_srv {
	char dir[32];
	char *sock;
	struct loop *l;
	struct grpc_server *s;
};

static void srv_up(struct kubelet_srv *k, struct fake *f)
{
	unit_tmpdir("test-podres", k->dir, sizeof(k->dir));
	k->sock = path_join(k->dir, "kubelet.sock");
	assert_non_null(k->sock);
	assert_int_equal(loop_new(&k->l), 0);
	assert_int_equal(grpc_server_new(k->l, methods, ELEMENTSOF(methods), NULL, f, &k->s), 0);
	assert_int_equal(grpc_server_listen(k->s, k->sock), 0);
}

static void srv_down(struct kubelet_srv *k)
{
	grpc_server_free(k->s);
	loop_free(k->l);
	unlink(k->sock);
	rmdir(k->dir);
	free(k->sock);
}

/*
 * Today's bug: answers were compared byte for byte, so with the order changing on every call
 * no two answers matched and the owner never heard of a live pod.
 */
static void test_poller_sees_a_shuffled_stable_set(void **state)
{
	struct kubelet_srv k;
	struct loop *l;
	struct podres *p = NULL;
	struct fake f = {
		.devs = { SET, SET_SHUFFLED },
		.n = { ELEMENTSOF(SET), ELEMENTSOF(SET_SHUFFLED) },
		.per_pod = { 2, 1 },
	};
	struct seen seen = { 0 };
	struct buf want = { 0 };
	size_t len;
	uint8_t *e;

	srv_up(&k, &f);
	l = k.l;
	assert_int_equal(podres_new(l, k.sock, 5 * USEC_PER_MSEC, on_stable, &seen, &p), 0);

	/* Two answers of the same set, differently ordered: acted on once, and only once. */
	run_until_calls(l, &f, 2);
	assert_int_equal(seen.n, 1);
	e = encode(SET, ELEMENTSOF(SET), 2, &len);
	assert_int_equal(podres_canonical(e, len, &want), 5);
	free(e);
	assert_int_equal(seen.last.len, want.len);
	assert_memory_equal(seen.last.data, want.data, want.len);
	run_until_calls(l, &f, 8);
	assert_int_equal(seen.n, 1);

	/* The set grows: acted on again after two answers of the new set. */
	f.devs[0] = SET_GROWN;
	f.n[0] = ELEMENTSOF(SET_GROWN);
	f.per_pod[0] = 4;
	f.devs[1] = SET_GROWN;
	f.n[1] = ELEMENTSOF(SET_GROWN);
	f.per_pod[1] = 1;
	run_until_calls(l, &f, f.calls + 3);
	assert_int_equal(seen.n, 2);
	e = encode(SET_GROWN, ELEMENTSOF(SET_GROWN), 1, &len);
	assert_int_equal(podres_canonical(e, len, &want), 6);
	free(e);
	assert_int_equal(seen.last.len, want.len);
	assert_memory_equal(seen.last.data, want.data, want.len);

	/* A set that flips on every answer is never stable: nothing handed over. */
	f.devs[0] = SET;
	f.n[0] = ELEMENTSOF(SET);
	run_until_calls(l, &f, f.calls + 6);
	assert_int_equal(seen.n, 2);

	podres_free(p);
	buf_release(&want);
	buf_release(&seen.last);
	srv_down(&k);
}

struct owners {
	unsigned n;
	char pod[64], ns[64], container[64];
};

static void on_owner(const char *ns, const char *pod, const char *container, const char *resource,
		     const char *id, void *userdata)
{
	struct owners *o = userdata;

	o->n++;
	(void)snprintf(o->pod, sizeof(o->pod), "%s", pod);
	(void)snprintf(o->ns, sizeof(o->ns), "%s", ns);
	(void)snprintf(o->container, sizeof(o->container), "%s", container);
}

static void on_answer(struct podres *p, const uint8_t *resp, size_t len, void *userdata)
{
	struct owners *o = userdata;

	assert_int_equal(podres_for_each_owner(resp, len, on_owner, o), 0);
}

/*
 * On demand (interval 0, the metrics' mode): one List at the start, then only when asked;
 * every answer goes to the answer callback, with its holders.
 */
static void test_poller_on_demand_hands_every_answer(void **state)
{
	struct kubelet_srv k;
	struct loop *l;
	struct podres *p = NULL;
	struct fake f = {
		.devs = { SET, SET_SHUFFLED },
		.n = { ELEMENTSOF(SET), ELEMENTSOF(SET_SHUFFLED) },
		.per_pod = { 2, 1 },
	};
	struct owners o = { 0 };
	const uint8_t junk[] = { 0xff, 0xff, 0xff };

	srv_up(&k, &f);
	l = k.l;
	assert_int_equal(podres_new(l, k.sock, 0, NULL, NULL, &p), 0);
	podres_on_answer(p, on_answer, &o);
	run_until_calls(l, &f, 1);
	while (o.n < ELEMENTSOF(SET))
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(o.n, ELEMENTSOF(SET));
	assert_string_equal(o.pod, "pod");
	assert_string_equal(o.ns, "default");
	assert_string_equal(o.container, "c");
	/* Asked twice more: two more Lists, each answer handed over (no stability needed). */
	podres_poll_now(p);
	run_until_calls(l, &f, 2);
	while (o.n < 2 * ELEMENTSOF(SET))
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	podres_poll_now(p);
	run_until_calls(l, &f, 3);
	while (o.n < 3 * ELEMENTSOF(SET))
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(f.calls, 3);
	assert_int_equal(podres_for_each_owner(junk, sizeof(junk), on_owner, &o), -EBADMSG);

	podres_free(p);
	srv_down(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canonical_ignores_order_and_duplicates),
		cmocka_unit_test(test_canonical_empty_and_malformed),
		cmocka_unit_test(test_poller_sees_a_shuffled_stable_set),
		cmocka_unit_test(test_poller_on_demand_hands_every_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
