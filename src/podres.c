#include "podres.h"

#include <errno.h>
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
	struct buf last;  /* previous answer */
	struct buf acted; /* last answer handed to fn */
	bool have_last, have_acted;
	unsigned failures;
};

static void poll_now(struct loop_timer *t, void *userdata);

static void list_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		      const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct podres *p = userdata;

	p->call = NULL;
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
	if (p->have_last && p->last.len == len && memcmp(p->last.data, resp, len) == 0) {
		if (!p->have_acted || p->acted.len != len ||
		    memcmp(p->acted.data, resp, len) != 0) {
			p->acted.len = 0;
			if (buf_append(&p->acted, resp, len) == 0) {
				p->have_acted = true;
				p->fn(p, resp, len, p->userdata);
			}
		}
		return;
	}
	p->last.len = 0;
	p->have_last = buf_append(&p->last, resp, len) == 0;
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
	buf_release(&p->last);
	buf_release(&p->acted);
	free(p->socket);
	free(p);
	return NULL;
}

int podres_for_each_device(const uint8_t *resp, size_t len,
			   void (*fn)(const char *resource, const char *id, void *userdata),
			   void *userdata)
{
	V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, len, resp);

	if (!m)
		return -EBADMSG;
	for (size_t i = 0; i < m->n_pod_resources; i++) {
		const V1__PodResources *pr = m->pod_resources[i];

		for (size_t c = 0; c < pr->n_containers; c++) {
			const V1__ContainerResources *cr = pr->containers[c];

			for (size_t d = 0; d < cr->n_devices; d++) {
				const V1__ContainerDevices *cd = cr->devices[d];

				for (size_t k = 0; k < cd->n_device_ids; k++)
					fn(cd->resource_name, cd->device_ids[k], userdata);
			}
		}
	}
	v1__list_pod_resources_response__free_unpacked(m, NULL);
	return 0;
}
