/*
 * libFuzzer target for the kubelet's pod-resources List answers (podres.h): the bytes as an
 * encoded ListPodResourcesResponse. Findings, besides crashes and leaks: a canonical form
 * that is not its (resource, ID) pairs sorted without duplicates, one that disagrees with the
 * walks (podres_for_each_device(), podres_for_each_owner()) or with protobuf-c on whether the
 * answer decodes, and one that changes when the same answer comes in another order (the
 * kubelet's Go maps shuffle pods, containers and IDs from one call to the next).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podres.h"
#include "podresources.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct walk {
	struct buf pairs; /* "resource\0id\0" per device, in walk order */
	size_t n;
	size_t owners;
};

static void on_device(const char *resource, const char *id, void *userdata)
{
	struct walk *w = userdata;

	if (buf_append(&w->pairs, resource, strlen(resource) + 1) < 0 ||
	    buf_append(&w->pairs, id, strlen(id) + 1) < 0)
		abort();
	w->n++;
}

static void on_owner(const char *namespace_, const char *pod, const char *container,
		     const char *resource, const char *id, void *userdata)
{
	if (!namespace_ || !pod || !container || !resource || !id)
		abort(); /* "" for a missing string, never NULL */
	((struct walk *)userdata)->owners++;
}

struct pair {
	const char *res, *id;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c = strcmp(x->res, y->res);

	return c ? c : strcmp(x->id, y->id);
}

/* The pairs of a "resource\0id\0..." buffer, @n of them; aborts if it holds another count. */
static struct pair *split(const struct buf *b, size_t n)
{
	struct pair *v = calloc(n + 1, sizeof(*v));
	size_t off = 0;

	if (!v)
		abort();
	for (size_t i = 0; i < n; i++) {
		const char *s = (const char *)b->data + off;
		const char *z = memchr(s, 0, b->len - off), *z2;

		if (!z ||
		    !(z2 = memchr(z + 1, 0, b->len - (size_t)(z + 1 - (const char *)b->data))))
			abort();
		v[i] = (struct pair){ s, z + 1 };
		off = (size_t)(z2 + 1 - (const char *)b->data);
	}
	if (off != b->len)
		abort();
	return v;
}

static void reverse(void **v, size_t n)
{
	for (size_t i = 0; i < n / 2; i++) {
		void *t = v[i];

		v[i] = v[n - 1 - i];
		v[n - 1 - i] = t;
	}
}

static void pack(const V1__ListPodResourcesResponse *m, struct buf *out)
{
	size_t n = v1__list_pod_resources_response__get_packed_size(m);

	out->len = 0;
	if (buf_reserve(out, n + 1) < 0)
		abort();
	out->len = v1__list_pod_resources_response__pack(m, out->data);
}

/* The same answer in another order: every repeated field reversed, then packed again. */
static void shuffled(V1__ListPodResourcesResponse *m, struct buf *out)
{
	reverse((void **)m->pod_resources, m->n_pod_resources);
	for (size_t i = 0; i < m->n_pod_resources; i++) {
		V1__PodResources *pr = m->pod_resources[i];

		reverse((void **)pr->containers, pr->n_containers);
		for (size_t c = 0; c < pr->n_containers; c++) {
			V1__ContainerResources *cr = pr->containers[c];

			reverse((void **)cr->devices, cr->n_devices);
			for (size_t d = 0; d < cr->n_devices; d++)
				reverse((void **)cr->devices[d]->device_ids,
					cr->devices[d]->n_device_ids);
		}
	}
	pack(m, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, size, data);
	struct buf canon = { 0 }, again = { 0 }, packed = { 0 };
	struct walk w = { 0 };
	struct pair *cv, *wv;
	size_t k = 0;
	int n, r;

	/* Something already in the buffer is replaced, not appended to. */
	if (buf_append(&canon, "stale\0", 6) < 0)
		abort();
	n = podres_canonical(data, size, &canon);
	r = podres_for_each_device(data, size, on_device, &w);
	if (!m) {
		if (n != -EBADMSG || r != -EBADMSG ||
		    podres_for_each_owner(data, size, on_owner, &w) != -EBADMSG || w.n)
			abort();
		goto out;
	}
	if (n < 0 || r != 0 || podres_for_each_owner(data, size, on_owner, &w) != 0 ||
	    w.owners != w.n)
		abort();

	/* Sorted, strictly: no duplicate pair. */
	cv = split(&canon, (size_t)n);
	for (int i = 1; i < n; i++)
		if (pair_cmp(&cv[i - 1], &cv[i]) >= 0)
			abort();
	/* The walk's pairs, sorted and deduplicated, are the canonical form. */
	wv = split(&w.pairs, w.n);
	if (w.n > 1)
		qsort(wv, w.n, sizeof(*wv), pair_cmp);
	for (size_t i = 0; i < w.n; i++) {
		if (i > 0 && pair_cmp(&wv[i - 1], &wv[i]) == 0)
			continue;
		if (k == (size_t)n || pair_cmp(&wv[i], &cv[k]) != 0)
			abort();
		k++;
	}
	if (k != (size_t)n)
		abort();
	free(cv);
	free(wv);

	/*
	 * The same answer in another order has the same canonical form. Only where protobuf-c
	 * reads its own packing of the answer back: it takes some keys it packs in a form it then
	 * refuses (field number 0 written in two bytes), which the kubelet never sends.
	 */
	pack(m, &packed);
	if (podres_canonical(packed.data, packed.len, &again) >= 0) {
		shuffled(m, &packed);
		if (podres_canonical(packed.data, packed.len, &again) != n ||
		    again.len != canon.len ||
		    (canon.len && memcmp(again.data, canon.data, canon.len) != 0))
			abort();
	}
out:
	if (m)
		v1__list_pod_resources_response__free_unpacked(m, NULL);
	buf_release(&canon);
	buf_release(&again);
	buf_release(&packed);
	buf_release(&w.pairs);
	return 0;
}
