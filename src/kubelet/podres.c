#include "podres.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"
#include "loop.h"
#include "podresources.pb-c.h"

#define LOG_MODULE "podres"
#include "log.h"

#define LIST_TIMEOUT  (5 * USEC_PER_SEC)
#define LIST_MAX_RECV ((size_t)16 << 20)

struct podres {
	struct loop *loop;
	char *socket;
	usec_t interval;
	podres_fn *fn;
	void *userdata;
	struct loop_timer *timer;
	struct grpc_client_call *call;
	/* Canonical forms (podres_canonical()), never raw answers: see podres.h. */
	struct buf cur;	  /* this answer's */
	struct buf last;  /* the previous answer's */
	struct buf acted; /* the last answer handed to fn's */
	bool have_last, have_acted;
	usec_t stable_at; /* the last answer equal to the one before it; 0: none yet */
	podres_fn *answer_fn;
	void *answer_userdata;
	unsigned failures;
	unsigned bad; /* answers that did not decode, for log rate */
};

static bool buf_same(const struct buf *a, const struct buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void buf_swap(struct buf *a, struct buf *b)
{
	struct buf t = *a;

	*a = *b;
	*b = t;
}

static void poll_now(struct loop_timer *t, void *userdata);

static void list_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		      const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct podres *p = userdata;
	int n;

	p->call = NULL;
	if (p->interval)
		loop_timer_arm(p->timer, p->interval);
	if (r < 0 || status != GRPC_STATUS_OK) {
		p->have_last = false;
		if (p->failures++ % 30 == 0) {
			if (r < 0)
				log_warn_errno(r, "pod-resources List failed, retrying",
					       "socket=%s reason=%s", p->socket,
					       log_q(message ? message : ""));
			else
				log_warn("pod-resources List refused, retrying",
					 "socket=%s grpc_status=%s reason=%s", p->socket,
					 grpc_status_name((int)status),
					 log_q(message ? message : ""));
		}
		return;
	}
	p->failures = 0;
	n = podres_canonical(resp, len, &p->cur);
	if (n < 0) {
		p->have_last = false;
		if (p->bad++ % 30 == 0)
			log_warn_errno(n, "pod-resources answer unusable, ignoring",
				       "socket=%s bytes=%zu", p->socket, len);
		return;
	}
	p->bad = 0;
	if (p->have_last && buf_same(&p->last, &p->cur)) {
		p->stable_at = now_usec();
		if (!p->have_acted || !buf_same(&p->acted, &p->cur)) {
			buf_swap(&p->acted, &p->cur);
			p->have_acted = true;
			log_debug("pod-resources answer stable", "devices=%d bytes=%zu", n, len);
			if (p->fn)
				p->fn(p, resp, len, p->userdata);
		}
	} else {
		buf_swap(&p->last, &p->cur);
		p->have_last = true;
	}
	if (p->answer_fn)
		p->answer_fn(p, resp, len, p->answer_userdata);
}

usec_t podres_stable_at(const struct podres *p)
{
	return p ? p->stable_at : 0;
}

void podres_on_answer(struct podres *p, podres_fn *fn, void *userdata)
{
	p->answer_fn = fn;
	p->answer_userdata = userdata;
}

void podres_poll_now(struct podres *p)
{
	if (p && !p->call) {
		loop_timer_disarm(p->timer);
		loop_timer_arm(p->timer, 0);
	}
}

static void poll_now(struct loop_timer *t, void *userdata)
{
	struct podres *p = userdata;
	struct grpc_client_opts o = { .timeout = LIST_TIMEOUT, .max_recv_msg = LIST_MAX_RECV };
	int r;

	if (p->call)
		return;
	r = grpc_client_call_start(p->loop, p->socket, "/v1.PodResourcesLister/List", NULL, 0, &o,
				   list_done, p, &p->call);
	if (r < 0) {
		log_warn_errno(r, "pod-resources List failed, retrying", "socket=%s", p->socket);
		if (p->interval)
			loop_timer_arm(p->timer, p->interval);
	}
}

int podres_new(struct loop *l, const char *socket, usec_t interval, podres_fn *fn, void *userdata,
	       struct podres **ret)
{
	struct podres *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = l;
	p->interval = interval;
	p->fn = fn;
	p->userdata = userdata;
	p->socket = strdup(socket);
	if (!p->socket) {
		free(p);
		return -ENOMEM;
	}
	r = loop_timer_new(l, poll_now, p, &p->timer);
	if (r < 0) {
		podres_free(p);
		return r;
	}
	loop_timer_arm(p->timer, 0);
	*ret = p;
	return 0;
}

struct podres *podres_free(struct podres *p)
{
	if (!p)
		return NULL;
	grpc_client_call_cancel(p->call);
	loop_timer_free(p->timer);
	buf_release(&p->cur);
	buf_release(&p->last);
	buf_release(&p->acted);
	free(p->socket);
	free(p);
	return NULL;
}

struct pair {
	const char *resource;
	const char *id;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c = strcmp(x->resource, y->resource);

	return c ? c : strcmp(x->id, y->id);
}

/* Calls @fn for each device ID of @m, with its owner; "" for a missing string. */
void podres_walk(const V1__ListPodResourcesResponse *m, podres_owner_fn *fn, void *userdata)
{
	for (size_t i = 0; i < m->n_pod_resources; i++) {
		const V1__PodResources *pr = m->pod_resources[i];

		for (size_t c = 0; c < pr->n_containers; c++) {
			const V1__ContainerResources *cr = pr->containers[c];

			for (size_t d = 0; d < cr->n_devices; d++) {
				const V1__ContainerDevices *cd = cr->devices[d];

				for (size_t k = 0; k < cd->n_device_ids; k++)
					fn(pr->namespace_ ? pr->namespace_ : "",
					   pr->name ? pr->name : "", cr->name ? cr->name : "",
					   cd->resource_name ? cd->resource_name : "",
					   cd->device_ids[k] ? cd->device_ids[k] : "", userdata);
			}
		}
	}
}

/* Collects the pairs of one answer (pointers into the unpacked message). */
struct pairs {
	struct pair *v;
	size_t n, cap;
	int r;
};

static void add_pair(const char *namespace_, const char *pod, const char *container,
		     const char *resource, const char *id, void *userdata)
{
	struct pairs *p = userdata;

	if (p->r < 0)
		return;
	if (p->n == INT_MAX) { /* the count is returned as an int */
		p->r = -EBADMSG;
		return;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? MIN(2 * p->cap, (size_t)INT_MAX) : 16;
		struct pair *v = reallocarray(p->v, cap, sizeof(*v));

		if (!v) {
			p->r = -ENOMEM;
			return;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (struct pair){ resource, id };
}

int podres_canonical(const uint8_t *resp, size_t len, struct buf *ret)
{
	V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, len, resp);
	struct pairs p = { 0 };
	int r = 0;

	if (!m)
		return -EBADMSG; /* protobuf-c says no more: a failed allocation looks the same */
	podres_walk(m, add_pair, &p);
	if (p.r < 0) {
		r = p.r;
		goto out;
	}
	if (p.n > 1)
		qsort(p.v, p.n, sizeof(*p.v), pair_cmp);
	ret->len = 0;
	for (size_t i = 0; i < p.n; i++) {
		if (i > 0 && pair_cmp(&p.v[i - 1], &p.v[i]) == 0)
			continue;
		if (buf_append(ret, p.v[i].resource, strlen(p.v[i].resource) + 1) < 0 ||
		    buf_append(ret, p.v[i].id, strlen(p.v[i].id) + 1) < 0) {
			r = -ENOMEM;
			goto out;
		}
		r++;
	}
out:
	free(p.v);
	v1__list_pod_resources_response__free_unpacked(m, NULL);
	return r;
}

struct device_fn {
	void (*fn)(const char *resource, const char *id, void *userdata);
	void *userdata;
};

static void owner_to_device(const char *namespace_, const char *pod, const char *container,
			    const char *resource, const char *id, void *userdata)
{
	const struct device_fn *d = userdata;

	d->fn(resource, id, d->userdata);
}

int podres_for_each_device(const uint8_t *resp, size_t len,
			   void (*fn)(const char *resource, const char *id, void *userdata),
			   void *userdata)
{
	struct device_fn d = { fn, userdata };

	return podres_for_each_owner(resp, len, owner_to_device, &d);
}

int podres_for_each_owner(const uint8_t *resp, size_t len, podres_owner_fn *fn, void *userdata)
{
	V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, len, resp);

	if (!m)
		return -EBADMSG;
	podres_walk(m, fn, userdata);
	v1__list_pod_resources_response__free_unpacked(m, NULL);
	return 0;
}
