/*
 * metrics-pods.c: which container holds which GPU (the kubelet's pod-resources answer, device
 * IDs mapped to GPUs by our resources), and which pod a GPU process belongs to (its cgroup in
 * the host's /proc, named by the kubelet's log directories: podmap.h). Also the telemetry
 * cache the scrape reads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics-int.h"
#include "podmap.h"
#include "podres.h"
#include "resource.h"

#define LOG_MODULE "metrics"
#include "log.h"

#define RESOURCES_MAX 32

void metrics_procs_release(struct metrics *m)
{
	m->procs = mfree(m->procs);
	m->n_procs = 0;
}

static void map_proc(struct metrics *m, struct metrics_proc *p)
{
	struct podmap_id id;
	struct podmap_names names;
	int r;

	r = podmap_read_pid(m->host_proc, (int)p->pid, &id);
	if (r < 0 || id.kind == PODMAP_NO_PROC) {
		p->kind = METRICS_PROC_NO_PROC;
		return;
	}
	if (id.kind == PODMAP_HOST) {
		p->kind = METRICS_PROC_HOST;
		return;
	}
	if (!m->podmap || podmap_cache_resolve(m->podmap, &id, &names) < 0) {
		p->kind = METRICS_PROC_UNKNOWN_POD;
		return;
	}
	p->kind = METRICS_PROC_POD;
	(void)snprintf(p->namespace_, sizeof(p->namespace_), "%s", names.namespace_);
	(void)snprintf(p->pod, sizeof(p->pod), "%s", names.pod);
	(void)snprintf(p->container, sizeof(p->container), "%s", names.container);
}

void metrics_cache_store(struct metrics *m, const struct gpu_sample *samples, const int *r,
			 unsigned n)
{
	struct gpu_sample *s = calloc(n + 1, sizeof(*s));
	int *rr = calloc(n + 1, sizeof(*rr));
	char(*uuids)[GPU_UUID_MAX] = calloc(n + 1, sizeof(*uuids));
	unsigned n_procs = 0, k = 0;
	struct metrics_proc *procs = NULL;

	if (!s || !rr || !uuids)
		goto oom;
	for (unsigned i = 0; i < n; i++) {
		s[i] = samples[i];
		rr[i] = r[i];
		(void)snprintf(uuids[i], GPU_UUID_MAX, "%s", i < m->n_gpus ? m->gpus[i].uuid : "");
		if (r[i] == 0 && samples[i].n_procs > 0)
			n_procs += (unsigned)samples[i].n_procs;
	}
	procs = calloc(n_procs + 1, sizeof(*procs));
	if (!procs)
		goto oom;
	if (m->podmap)
		podmap_cache_begin(m->podmap);
	for (unsigned i = 0; i < n; i++) {
		if (r[i] != 0 || samples[i].n_procs <= 0)
			continue;
		for (int j = 0; j < samples[i].n_procs; j++) {
			struct metrics_proc *p = &procs[k++];

			(void)snprintf(p->uuid, sizeof(p->uuid), "%s", uuids[i]);
			p->pid = samples[i].procs[j].pid;
			p->mem = samples[i].procs[j].mem_used;
			map_proc(m, p);
		}
	}
	free(m->samples);
	free(m->sample_r);
	free(m->sample_uuids);
	free(m->procs);
	m->samples = s;
	m->sample_r = rr;
	m->sample_uuids = uuids;
	m->n_samples = n;
	m->procs = procs;
	m->n_procs = k;
	m->sampled_at = now_usec();
	m->samples_taken++;
	return;
oom:
	/* The old cache stays; its age says so. */
	free(s);
	free(rr);
	free(uuids);
	free(procs);
}

/* --- pod-resources --- */

static void hold_release(struct metrics_hold *h)
{
	free(h->namespace_);
	free(h->pod);
	free(h->container);
	free(h->resource);
}

void metrics_pods_clear(struct metrics *m)
{
	for (unsigned i = 0; i < m->n_holds; i++)
		hold_release(&m->holds[i]);
	m->holds = mfree(m->holds);
	m->n_holds = 0;
	m->pods_valid = false;
}

void metrics_pods_release(struct metrics *m)
{
	metrics_pods_clear(m);
	m->podmap = podmap_cache_free(m->podmap);
}

int metrics_pods_set_log_dir(struct metrics *m)
{
	struct podmap_cache *c = NULL;
	int r = podmap_cache_new(m->pod_log_dir, &c);

	if (r < 0)
		return r;
	podmap_cache_free(m->podmap);
	m->podmap = c;
	return 0;
}

struct hold_build {
	struct metrics *m;
	const struct resource *res[RESOURCES_MAX];
	unsigned n_res;
	struct metrics_hold *holds;
	unsigned n, cap;
	int err;
};

static const struct resource *find_resource(const struct hold_build *b, const char *name)
{
	for (unsigned i = 0; i < b->n_res; i++)
		if (streq(b->res[i]->name, name))
			return b->res[i];
	return NULL;
}

static void add_owner(const char *ns, const char *pod, const char *container, const char *resource,
		      const char *id, void *userdata)
{
	struct hold_build *b = userdata;
	const struct resource *r = find_resource(b, resource);
	const char *uuid;
	struct metrics_hold *h;
	int dev;

	if (!r || b->err)
		return;
	dev = resource_device_lookup(r, id, strlen(id));
	if (dev < 0)
		return; /* an ID of another plugin, or stale */
	uuid = r->uuids[resource_device_slot(r, (unsigned)dev)];
	for (unsigned i = 0; i < b->n; i++) {
		h = &b->holds[i];
		if (streq(h->uuid, uuid) && streq(h->resource, resource) && streq(h->pod, pod) &&
		    streq(h->namespace_, ns) && streq(h->container, container)) {
			h->count++;
			return;
		}
	}
	if (b->n == b->cap) {
		unsigned cap = b->cap ? b->cap * 2 : 16;
		struct metrics_hold *n = realloc(b->holds, cap * sizeof(*n));

		if (!n) {
			b->err = -ENOMEM;
			return;
		}
		b->holds = n;
		b->cap = cap;
	}
	h = &b->holds[b->n];
	*h = (struct metrics_hold){
		.namespace_ = strdup(ns),
		.pod = strdup(pod),
		.container = strdup(container),
		.resource = strdup(resource),
		.count = 1,
		.total = r->gpus[resource_device_slot(r, (unsigned)dev)].count,
		.gpumem = r->kind == RESOURCE_GPUMEM,
		.unit_bytes = r->kind == RESOURCE_GPUMEM ? r->unit_mib << 20 : 0,
	};
	(void)snprintf(h->uuid, sizeof(h->uuid), "%s", uuid);
	if (!h->namespace_ || !h->pod || !h->container || !h->resource) {
		hold_release(h);
		b->err = -ENOMEM;
		return;
	}
	b->n++;
}

void metrics_pods_store(struct metrics *m, const uint8_t *resp, size_t len)
{
	struct hold_build b = { .m = m };
	int r;

	b.n_res = m->src.resources(b.res, RESOURCES_MAX, m->userdata);
	r = podres_for_each_owner(resp, len, add_owner, &b);
	if (r == 0 && b.err)
		r = b.err;
	if (r < 0) {
		for (unsigned i = 0; i < b.n; i++)
			hold_release(&b.holds[i]);
		free(b.holds);
		log_debug("pod-resources answer not used for metrics", "error=%d", r);
		return;
	}
	metrics_pods_clear(m);
	m->holds = b.holds;
	m->n_holds = b.n;
	m->pods_at = now_usec();
	m->pods_valid = true;
}

const struct metrics_hold *metrics_pods_sole_holder(const struct metrics *m, const char *uuid)
{
	const struct metrics_hold *one = NULL;

	for (unsigned i = 0; i < m->n_holds; i++) {
		const struct metrics_hold *h = &m->holds[i];

		if (!streq(h->uuid, uuid))
			continue;
		if (one || h->gpumem || h->count != h->total)
			return NULL;
		one = h;
	}
	return one;
}
