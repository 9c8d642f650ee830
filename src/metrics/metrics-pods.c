/*
 * metrics-pods.c: which container holds which GPU (the kubelet's pod-resources answer, device
 * IDs mapped to GPUs by our resources), and which pod a GPU process belongs to (its cgroup in
 * the host's /proc, named by the kubelet's log directories: podmap.h). Also the telemetry
 * cache the scrape reads.
 *
 * The host's files are never read on the loop: each sample's processes go to a run on a
 * thread of its own (a oneshot: podmap_cache_map() within a time budget), which hands its
 * result back through a loop wake. The last of the thread and the loop side to let go of a run
 * frees it (oneshot.h), so freeing the metrics never waits for a stuck read.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loop.h"
#include "metrics-int.h"
#include "oneshot.h"
#include "podmap.h"
#include "podres.h"
#include "prom.h"
#include "resource.h"

#define LOG_MODULE "metrics"
#include "log.h"

#define RESOURCES_MAX 32
/* Processes attributed per sample: 16 GPUs of 64 (GPU_SAMPLE_PROCS_MAX); the rest are skipped. */
#define ATTRIB_PROCS_MAX 1024
/* A run stops reading when its time is up; one still going later is stuck in a read. */
#define ATTRIB_BUDGET (2 * USEC_PER_SEC)
#define ATTRIB_STUCK  (ATTRIB_BUDGET + 2 * USEC_PER_SEC)
#define ATTRIB_NICE   10

static const char *const cut_names[METRICS_CUT_COUNT] = {
	[PODMAP_CUT_TIME] = "time-budget",
	[PODMAP_CUT_CGROUP_SIZE] = "cgroup-size",
	[PODMAP_CUT_DIR_ENTRIES] = "dir-entries",
	[PODMAP_CUT_LINK] = "link",
	[PODMAP_CUT_NOT_REGULAR] = "not-regular-file",
	[METRICS_CUT_PROCESSES] = "process-cap",
};

struct attrib_run {
	struct oneshot *os; /* the loop side's hold */
	uint64_t seq;
	usec_t started, took;
	struct podmap_cache *cache; /* the loop side's, lent for the run */
	struct podmap_query *q;
	struct metrics_proc *procs;
	unsigned n, n_mapped; /* processes; those past ATTRIB_PROCS_MAX stay skipped */
	struct podmap_limits lim;
	struct podmap_stats st;
	int r;
};

/* The oneshot's free_fn: on the thread or the loop, whichever lets go of the run last. */
static void run_free(void *userdata)
{
	struct attrib_run *run = userdata;

	podmap_cache_free(run->cache);
	free(run->q);
	free(run->procs);
	free(run);
}

static void proc_set(struct metrics_proc *p, const struct podmap_query *q)
{
	if (p->pid == 0 || p->pid > INT_MAX) {
		p->kind = METRICS_PROC_NO_PROC; /* not a pid any /proc holds */
		return;
	}
	if (q->r == -ETIMEDOUT || q->r == -ELOOP || q->r == -EINVAL || q->r == -EFBIG) {
		p->kind = METRICS_PROC_SKIPPED; /* a limit or a refusal: the stats say which */
		return;
	}
	if (q->r < 0 || q->id.kind == PODMAP_NO_PROC) {
		p->kind = METRICS_PROC_NO_PROC;
		return;
	}
	if (q->id.kind == PODMAP_HOST) {
		p->kind = METRICS_PROC_HOST;
		return;
	}
	if (q->names_r == -ETIMEDOUT) {
		p->kind = METRICS_PROC_SKIPPED;
		return;
	}
	if (q->names_r < 0) {
		p->kind = METRICS_PROC_UNKNOWN_POD;
		return;
	}
	p->kind = METRICS_PROC_POD;
	(void)snprintf(p->namespace_, sizeof(p->namespace_), "%s", q->names.namespace_);
	(void)snprintf(p->pod, sizeof(p->pod), "%s", q->names.pod);
	(void)snprintf(p->container, sizeof(p->container), "%s", q->names.container);
	(void)snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", q->id.pod_uid);
}

static void attrib_job(void *userdata)
{
	struct attrib_run *run = userdata;

	/* Background work: where the loop and this thread both want a CPU, the loop gets it
	 * (Linux nices threads one by one). Raising one's nice needs no privilege. */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), ATTRIB_NICE);
	run->r = podmap_cache_map(run->cache, run->q, run->n_mapped, &run->lim, &run->st);
	if (run->r == 0)
		for (unsigned i = 0; i < run->n_mapped; i++)
			proc_set(&run->procs[i], &run->q[i]);
	run->took = now_usec() - run->started;
}

/*
 * Pods whose UID is kept at most: one per pod holding devices is what it is for. Past it,
 * the UIDs of pods no process of the newest attribution is in are let go first.
 */
#define POD_UIDS_MAX 1024

static struct metrics_pod_uid *uid_find(const struct metrics *m, const char *ns, const char *pod)
{
	for (unsigned i = 0; i < m->n_uids; i++)
		if (streq(m->uids[i].namespace_, ns) && streq(m->uids[i].pod, pod))
			return &m->uids[i];
	return NULL;
}

static bool in_procs(const struct metrics *m, const struct metrics_pod_uid *u)
{
	for (unsigned i = 0; i < m->n_procs; i++)
		if (m->procs[i].kind == METRICS_PROC_POD && streq(m->procs[i].pod, u->pod) &&
		    streq(m->procs[i].namespace_, u->namespace_))
			return true;
	return false;
}

/* Drops the kept UIDs @keep says no to, in place. */
static void uids_prune(struct metrics *m,
		       bool (*keep)(const struct metrics *m, const struct metrics_pod_uid *u))
{
	unsigned k = 0;

	for (unsigned i = 0; i < m->n_uids; i++)
		if (keep(m, &m->uids[i]))
			m->uids[k++] = m->uids[i];
	m->n_uids = k;
}

/*
 * Keeps the UIDs the cgroups of @m->procs name: the pod_uid label stays on a pod's series once
 * one of its processes was seen, whether or not a process of it runs at the next sample.
 */
static void uids_learn(struct metrics *m)
{
	for (unsigned i = 0; i < m->n_procs; i++) {
		const struct metrics_proc *p = &m->procs[i];
		struct metrics_pod_uid *u;

		if (p->kind != METRICS_PROC_POD || !p->pod_uid[0])
			continue;
		u = uid_find(m, p->namespace_, p->pod);
		if (!u && m->n_uids == POD_UIDS_MAX)
			uids_prune(m, in_procs);
		if (!u && m->n_uids == POD_UIDS_MAX)
			continue;
		if (!u) {
			if (!m->uids) {
				m->uids = calloc(POD_UIDS_MAX, sizeof(*m->uids));
				if (!m->uids)
					return; /* no pod_uid label: the series are otherwise whole */
			}
			u = &m->uids[m->n_uids++];
			(void)snprintf(u->namespace_, sizeof(u->namespace_), "%s", p->namespace_);
			(void)snprintf(u->pod, sizeof(u->pod), "%s", p->pod);
		}
		(void)snprintf(u->uid, sizeof(u->uid), "%s", p->pod_uid);
	}
}

/* Serves @procs (owned) as the attribution of submission @seq, unless a newer one is served. */
static void install(struct metrics *m, struct metrics_proc *procs, unsigned n, uint64_t seq)
{
	if (seq <= m->attrib.installed) {
		free(procs);
		return;
	}
	free(m->procs);
	m->procs = procs;
	m->n_procs = n;
	m->attrib.installed = seq;
	uids_learn(m);
}

/* Logs each kind of cut once, when it starts; a run without it re-arms the line. */
static void account(struct metrics *m, const unsigned *cuts, unsigned n_procs, usec_t took)
{
	for (unsigned i = 0; i < METRICS_CUT_COUNT; i++) {
		unsigned bit = 1U << i;

		m->attrib.cuts[i] += cuts[i];
		if (!cuts[i]) {
			m->attrib.logged &= ~bit;
			continue;
		}
		if (m->attrib.logged & bit)
			continue;
		m->attrib.logged |= bit;
		log_warn("pod attribution cut short, serving what was read",
			 "reason=%s count=%u processes=%u dur_ms=%llu", cut_names[i], cuts[i],
			 n_procs, (unsigned long long)(took / USEC_PER_MSEC));
	}
}

static void start_run(struct metrics *m, struct metrics_proc *procs, unsigned n, uint64_t seq);

static void on_attrib_wake(struct loop_wake *w, void *userdata)
{
	struct metrics *m = userdata;
	struct attrib_run *run = m->attrib.run;

	if (!run || !oneshot_done(run->os))
		return;
	m->attrib.run = NULL;
	m->attrib.stuck_logged = false;
	/* The cache comes back, unless new settings made a new one meanwhile. */
	if (!m->podmap) {
		m->podmap = run->cache;
		run->cache = NULL;
	}
	if (run->r < 0)
		(void)log_warn_errno(
			run->r, "pod attribution failed, serving its processes as skipped", NULL);
	m->attrib.runs++;
	m->attrib.last_dur = run->took;
	if (run->seq > m->attrib.installed) {
		unsigned cuts[METRICS_CUT_COUNT] = { 0 };

		memcpy(cuts, run->st.cuts, sizeof(run->st.cuts));
		cuts[METRICS_CUT_PROCESSES] = run->n - run->n_mapped;
		account(m, cuts, run->n, run->took);
		install(m, run->procs, run->n, run->seq);
		run->procs = NULL;
	}
	(void)oneshot_unref(run->os); /* frees @run */
	if (m->attrib.next) {
		struct metrics_proc *next = m->attrib.next;

		m->attrib.next = NULL;
		start_run(m, next, m->attrib.n_next, m->attrib.seq);
	}
	if (m->attrib.done)
		m->attrib.done(m);
}

/*
 * A run for @procs (owned, @n > 0), submission @seq; served as skipped when none can start.
 * The caller refreshes the body (m->attrib.done, or on_sampled()'s body_stale()).
 */
static void start_run(struct metrics *m, struct metrics_proc *procs, unsigned n, uint64_t seq)
{
	struct attrib_run *run = NULL;
	int r = -ENOMEM;

	if (!m->attrib.wake) {
		r = m->loop ? loop_wake_new(m->loop, on_attrib_wake, m, &m->attrib.wake) : -EINVAL;
		if (r < 0)
			goto fail;
	}
	r = -ENOMEM;
	if (!m->podmap)
		goto fail;
	run = calloc(1, sizeof(*run));
	if (!run)
		goto fail;
	run->n = n;
	run->n_mapped = MIN(n, ATTRIB_PROCS_MAX);
	run->q = calloc(run->n_mapped, sizeof(*run->q));
	if (!run->q)
		goto fail;
	for (unsigned i = 0; i < run->n_mapped; i++)
		run->q[i].pid = procs[i].pid;
	run->seq = seq;
	run->started = now_usec();
	run->lim.deadline = run->started + ATTRIB_BUDGET;
	run->cache = m->podmap;
	run->procs = procs;
	r = oneshot_start(m->attrib.wake, attrib_job, run_free, run, &run->os);
	if (r < 0) {
		run->procs = NULL;
		run->cache = NULL;
		goto fail;
	}
	m->podmap = NULL;
	m->attrib.run = run;
	return;
fail:
	if (run)
		free(run->q);
	free(run);
	if (!m->attrib.start_logged) {
		m->attrib.start_logged = true;
		(void)log_error_errno(
			r, "cannot start pod attribution, serving processes as skipped", NULL);
	}
	install(m, procs, n, seq);
}

/* Hands @procs (owned) over for attribution. */
static void attrib_submit(struct metrics *m, struct metrics_proc *procs, unsigned n)
{
	uint64_t seq = ++m->attrib.seq;

	/* A list that replaces one waiting for the run. */
	m->attrib.next = mfree(m->attrib.next);
	if (n == 0) {
		install(m, procs, 0, seq);
		return;
	}
	if (m->attrib.run) {
		m->attrib.next = procs;
		m->attrib.n_next = n;
		return;
	}
	start_run(m, procs, n, seq);
}

bool metrics_attrib_stuck(struct metrics *m)
{
	const struct attrib_run *run = m->attrib.run;

	if (!run || now_usec() - run->started < ATTRIB_STUCK)
		return false;
	if (!m->attrib.stuck_logged) {
		m->attrib.stuck_logged = true;
		log_error("pod attribution stuck in a file read, serving the last one",
			  "processes=%u running_ms=%llu", run->n,
			  (unsigned long long)((now_usec() - run->started) / USEC_PER_MSEC));
	}
	return true;
}

void metrics_attrib_render(const struct metrics *m, struct prom *p)
{
	const struct attrib_run *run = m->attrib.run;
	struct prom_labels l;

	prom_family(p, "edgegpu_attribution_cut_total", PROM_COUNTER,
		    "Times the attribution of GPU processes to pods did less than all, by reason.");
	for (unsigned i = 0; i < METRICS_CUT_COUNT; i++) {
		l.n = 0;
		prom_labels_push(&l, "reason", cut_names[i]);
		prom_sample(p, NULL, &l, (double)m->attrib.cuts[i]);
	}
	if (m->attrib.runs) {
		prom_family(p, "edgegpu_attribution_duration_seconds", PROM_GAUGE,
			    "How long the last attribution of GPU processes to pods took.");
		prom_sample(p, NULL, NULL, (double)m->attrib.last_dur / USEC_PER_SEC);
	}
	prom_family(p, "edgegpu_attribution_running_seconds", PROM_GAUGE,
		    "How long the attribution in progress has run; 0 when none is.");
	prom_sample(p, NULL, NULL, run ? (double)(now_usec() - run->started) / USEC_PER_SEC : 0.0);
}

void metrics_procs_release(struct metrics *m)
{
	m->procs = mfree(m->procs);
	m->n_procs = 0;
	m->attrib.next = mfree(m->attrib.next);
	/* A run in flight attributed processes of the GPUs before: its result is dropped. */
	m->attrib.installed = m->attrib.seq;
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
	for (unsigned i = 0; i < n; i++) {
		if (r[i] != 0 || samples[i].n_procs <= 0)
			continue;
		for (int j = 0; j < samples[i].n_procs; j++) {
			struct metrics_proc *p = &procs[k++];

			(void)snprintf(p->uuid, sizeof(p->uuid), "%s", uuids[i]);
			p->pid = samples[i].procs[j].pid;
			p->mem = samples[i].procs[j].mem_used;
			p->sm_util = samples[i].procs[j].sm_util;
			p->kind = METRICS_PROC_SKIPPED; /* until its run says otherwise */
		}
	}
	free(m->samples);
	free(m->sample_r);
	free(m->sample_uuids);
	m->samples = s;
	m->sample_r = rr;
	m->sample_uuids = uuids;
	m->n_samples = n;
	m->sampled_at = now_usec();
	m->samples_taken++;
	attrib_submit(m, procs, k);
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
	struct attrib_run *run = m->attrib.run;

	metrics_pods_clear(m);
	/* A run in flight finishes on its own and frees itself (and the cache it has). */
	if (run) {
		(void)oneshot_unref(run->os);
		m->attrib.run = NULL;
	}
	m->attrib.next = mfree(m->attrib.next);
	m->attrib.installed = m->attrib.seq;
	m->attrib.wake = loop_wake_free(m->attrib.wake);
	m->podmap = podmap_cache_free(m->podmap);
	m->uids = mfree(m->uids);
	m->n_uids = 0;
}

int metrics_pods_set_log_dir(struct metrics *m)
{
	struct podmap_cache *c = NULL;
	int r = podmap_cache_new(m->host_proc, m->pod_log_dir, &c);

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

static bool holds_pod(const struct metrics *m, const struct metrics_pod_uid *u)
{
	for (unsigned i = 0; i < m->n_holds; i++)
		if (streq(m->holds[i].pod, u->pod) && streq(m->holds[i].namespace_, u->namespace_))
			return true;
	return false;
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
	uids_prune(m, holds_pod); /* a pod that holds nothing any more: its UID is let go */
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

const char *metrics_pods_uid(const struct metrics *m, const char *ns, const char *pod)
{
	const struct metrics_pod_uid *u = uid_find(m, ns, pod);

	return u ? u->uid : "";
}
