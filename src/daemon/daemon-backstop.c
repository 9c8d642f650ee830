/*
 * daemon-backstop.c: the node-side backstop (docs/sharing.md "Backstop"): every interval,
 * while edgegpu.sharing.memory.enforcement.backstop.enabled is set and a gpumem resource is
 * served on a discrete GPU, it asks the GPU monitor for a sample (per-process usage, host
 * PIDs), maps the processes of the GPUs that hold gpumem units to containers (podmap: the
 * same cgroup and log-tree reads as the metrics' attribution, on a cache of its own), takes
 * each container's limit on each GPU from pod-resources (units held x unit size), and feeds
 * the policy engine (src/enforce/backstop.h). A decision is re-checked and carried out on a
 * thread: pidfd_open(pid), the same start time and the same container's cgroup, then
 * pidfd_send_signal(SIGKILL) on that pidfd (a pid reused meanwhile is never hit).
 *
 * Own samples, own poller: it does not depend on the metrics server (which may be off). The
 * monitor hands every sample to both (each a listener of its own), so a backstop round also
 * freshens the metrics' cache. Its pod-resources poller runs only while it is active.
 *
 * It can act only in the host's PID namespace (NVML's PIDs are the host's, pidfd_open needs
 * them to be ours): the daemon runs without hostPID by default (deployments/base), so this is
 * checked (our /proc/self/ns/pid against <hostProc>/1/ns/pid) and said once at error level,
 * with the fix (deployments/overlays/backstop).
 *
 * Loop thread only; the job's thread (a oneshot) touches nothing but its struct bs_job, and
 * the last of it and the loop side to let go frees the job (oneshot.h), so stopping never
 * waits for a read stuck in the host's /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backstop.h"
#include "daemon-internal.h"
#include "gpu-monitor.h"
#include "loop.h"
#include "oneshot.h"
#include "plugin.h"
#include "podmap.h"
#include "podres.h"
#include "prom.h"
#include "resource.h"

#define LOG_MODULE "backstop"
#include "log.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* Processes looked at per round (16 GPUs of 64: GPU_SAMPLE_PROCS_MAX). */
#define PROCS_MAX 1024
/* Containers whose kills are counted by name; past it, the rest count under "" labels. */
#define KILLS_MAX 256
/* The attribution's time budget per round, as the metrics' */
#define MAP_BUDGET (2 * USEC_PER_SEC)

enum bs_state {
	BS_DISABLED,
	BS_ACTIVE,
	BS_NO_GPUMEM,	     /* no gpumem resource on a discrete GPU */
	BS_NO_HOST_PID,	     /* not in the host's PID namespace: cannot act */
	BS_NO_POD_RESOURCES, /* no pod-resources socket: no limits known */
	BS_STATE_COUNT,
};

static const char *const state_names[BS_STATE_COUNT] = {
	[BS_DISABLED] = "disabled",
	[BS_ACTIVE] = "active",
	[BS_NO_GPUMEM] = "no-gpumem",
	[BS_NO_HOST_PID] = "no-host-pid",
	[BS_NO_POD_RESOURCES] = "no-pod-resources",
};

/* A container's gpumem on a GPU, from the last pod-resources answer. */
struct bs_hold {
	char ns[64], pod[256], container[64];
	char uuid[GPU_UUID_MAX];
	uint64_t limit; /* bytes */
};

/* A GPU process of a round. */
struct bs_proc {
	char uuid[GPU_UUID_MAX];
	uint32_t pid;
	uint64_t mem;
	/* out of the job */
	bool mapped; /* in a pod, named, start time read */
	uint64_t start_time;
	char container_id[80];
	struct podmap_names names;
};

struct bs_job {
	struct oneshot *os; /* while it runs: the loop side's hold */
	char *host_proc;
	/* an attribution round */
	struct podmap_cache *cache;
	struct bs_proc *procs;
	unsigned n;
	/* or a kill (procs NULL) */
	struct backstop_decision kill;
	struct bs_proc victim;
	int r; /* the kill: 0 done, -ESRCH gone, -ESTALE not the same process any more */
};

struct bs_kills {
	char ns[64], pod[256], container[64];
	uint64_t count;
};

struct dbackstop {
	struct daemon *d;
	struct backstop *engine;
	struct loop_timer *tick;
	struct loop_wake *wake;
	struct podres *podres;
	struct podmap_cache *cache; /* NULL while a job has it */
	struct bs_job *job;
	struct bs_hold *holds;
	unsigned n_holds;
	bool holds_valid, sample_pending;
	enum bs_state state;
	int host_pid; /* 1 yes, 0 no, -errno unknown; checked for host_pid_root */
	char *host_pid_root;
	const char *host_pid_why;
	struct bs_kills kills[KILLS_MAX + 1]; /* the last: every container past KILLS_MAX */
	unsigned n_kills;
	uint64_t kill_failures, rounds;
};

/* --- the job thread --- */

/* A job not started, or (as its oneshot's free_fn) one whose oneshot let go of it. */
static void job_free(void *userdata)
{
	struct bs_job *j = userdata;

	podmap_cache_free(j->cache);
	free(j->procs);
	free(j->host_proc);
	free(j);
}

static void job_map(struct bs_job *j)
{
	struct podmap_query *q = calloc(j->n + 1, sizeof(*q));
	struct podmap_limits lim = { .deadline = now_usec() + MAP_BUDGET };
	struct podmap_stats st = { 0 };
	int proc_fd;

	if (!q)
		return;
	for (unsigned i = 0; i < j->n; i++)
		q[i].pid = j->procs[i].pid;
	if (podmap_cache_map(j->cache, q, j->n, &lim, &st) < 0)
		goto out;
	proc_fd = root_dir_open(j->host_proc);
	for (unsigned i = 0; proc_fd >= 0 && i < j->n; i++) {
		struct bs_proc *p = &j->procs[i];

		/* A process only counts named, in a container: the pause container, a pod-level
		 * cgroup or CRI-O's conmon is no container's and never a candidate. */
		if (q[i].r < 0 || q[i].id.kind != PODMAP_POD || !q[i].id.container_id[0] ||
		    q[i].names_r < 0 || !q[i].names.container[0])
			continue;
		if (podmap_read_start_time_at(proc_fd, (int)p->pid, &p->start_time) < 0)
			continue;
		(void)snprintf(p->container_id, sizeof(p->container_id), "%s",
			       q[i].id.container_id);
		p->names = q[i].names;
		p->mapped = true;
	}
	fd_close(proc_fd);
out:
	free(q);
}

/*
 * The kill: the pidfd pins the process, so what is read after it was opened is that process's
 * (or, once it died, nothing that could be signalled through the pidfd).
 */
static int job_kill(struct bs_job *j)
{
	const struct bs_proc *v = &j->victim;
	struct podmap_id id;
	uint64_t start = 0;
	int pidfd, proc_fd = -1, r;

	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)v->pid, 0);
	if (pidfd < 0)
		return -errno;
	proc_fd = root_dir_open(j->host_proc);
	if (proc_fd < 0) {
		r = proc_fd;
		goto out;
	}
	r = podmap_read_start_time_at(proc_fd, (int)v->pid, &start);
	if (r < 0)
		goto out;
	if (start != v->start_time) {
		r = -ESTALE;
		goto out;
	}
	r = podmap_read_pid_at(proc_fd, (int)v->pid, 0, &id);
	if (r < 0)
		goto out;
	if (id.kind != PODMAP_POD || !streq(id.container_id, v->container_id)) {
		r = -ESTALE;
		goto out;
	}
	r = syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 ? -errno : 0;
out:
	fd_close(proc_fd);
	fd_close(pidfd);
	return r;
}

static void job_run(void *userdata)
{
	struct bs_job *j = userdata;

	if (j->procs)
		job_map(j);
	else
		j->r = job_kill(j);
}

/* Starts @j (its fields set); it takes the cache when it maps. Frees @j on failure. */
static int job_start(struct dbackstop *b, struct bs_job *j)
{
	int r;

	j->host_proc = strdup(b->d->cfg.metrics.host_proc ? b->d->cfg.metrics.host_proc : "/proc");
	if (!j->host_proc) {
		free(j->procs);
		free(j);
		return -ENOMEM;
	}
	if (j->procs) {
		j->cache = b->cache;
		b->cache = NULL;
	}
	r = oneshot_start(b->wake, job_run, job_free, j, &j->os);
	if (r < 0) {
		b->cache = j->cache;
		j->cache = NULL;
		job_free(j);
		return r;
	}
	b->job = j;
	return 0;
}

/* --- the loop side --- */

static struct bs_kills *kills_of(struct dbackstop *b, const struct podmap_names *n)
{
	struct bs_kills *k;

	for (unsigned i = 0; i < b->n_kills; i++)
		if (streq(b->kills[i].ns, n->namespace_) && streq(b->kills[i].pod, n->pod) &&
		    streq(b->kills[i].container, n->container))
			return &b->kills[i];
	if (b->n_kills == KILLS_MAX)
		return &b->kills[KILLS_MAX];
	k = &b->kills[b->n_kills++];
	(void)snprintf(k->ns, sizeof(k->ns), "%s", n->namespace_);
	(void)snprintf(k->pod, sizeof(k->pod), "%s", n->pod);
	(void)snprintf(k->container, sizeof(k->container), "%s", n->container);
	return k;
}

static void kill_done(struct dbackstop *b, struct bs_job *j)
{
	const struct backstop_decision *k = &j->kill;
	const struct podmap_names *n = &j->victim.names;

	if (j->r == 0) {
		kills_of(b, n)->count++;
		log_warn(
			"killed a process over its container's gpumem limit",
			"pid=%u namespace=%s pod=%s container=%s gpu=%s used=%llu limit=%llu proc_used=%llu seconds_over=%.1f",
			k->pid, n->namespace_, n->pod, n->container, k->uuid,
			(unsigned long long)k->used, (unsigned long long)k->limit,
			(unsigned long long)k->proc_used, (double)k->over_for / USEC_PER_SEC);
		return;
	}
	b->kill_failures++;
	(void)log_warn_errno(
		j->r,
		j->r == -ESRCH || j->r == -ESTALE ?
			"process to kill is gone or no longer that container's, nothing done" :
			"cannot kill a process over its container's gpumem limit",
		"pid=%u namespace=%s pod=%s container=%s gpu=%s", k->pid, n->namespace_, n->pod,
		n->container, k->uuid);
}

/* Limit of (container, GPU), 0 when it holds no gpumem there. */
static uint64_t hold_limit(const struct dbackstop *b, const struct bs_proc *p)
{
	for (unsigned i = 0; i < b->n_holds; i++) {
		const struct bs_hold *h = &b->holds[i];

		if (streq(h->uuid, p->uuid) && streq(h->container, p->names.container) &&
		    streq(h->pod, p->names.pod) && streq(h->ns, p->names.namespace_))
			return h->limit;
	}
	return 0;
}

static void key_of(const struct bs_proc *p, char *key, size_t size)
{
	(void)snprintf(key, size, "%s/%s/%s", p->names.namespace_, p->names.pod,
		       p->names.container);
}

/*
 * One engine round from @procs: one sample per (container, GPU) holding gpumem there; every
 * other process (a host one, one of a container without gpumem on that GPU) stays out.
 */
static void feed(struct dbackstop *b, struct bs_proc *procs, unsigned n)
{
	struct backstop_sample *s = calloc(n + 1, sizeof(*s));
	struct backstop_proc *bp = calloc(n + 1, sizeof(*bp));
	char(*keys)[BACKSTOP_KEY_MAX] = calloc(n + 1, sizeof(*keys));
	unsigned *group = calloc(n + 1, sizeof(*group));
	struct backstop_decision dec;
	struct bs_job *j;
	size_t ns = 0, k = 0;
	int r;

	if (!s || !bp || !keys || !group)
		goto out;
	/* Grouped by (container, GPU): each group's processes contiguous in bp. */
	for (unsigned i = 0; i < n; i++) {
		if (!procs[i].mapped || hold_limit(b, &procs[i]) == 0)
			continue;
		key_of(&procs[i], keys[i], sizeof(keys[i]));
		group[i] = 1;
	}
	for (unsigned i = 0; i < n; i++) {
		struct backstop_sample *cur;

		if (group[i] != 1)
			continue;
		cur = &s[ns++];
		*cur = (struct backstop_sample){ .key = keys[i],
						 .uuid = procs[i].uuid,
						 .limit = hold_limit(b, &procs[i]),
						 .procs = &bp[k] };
		for (unsigned m = i; m < n; m++) {
			if (group[m] != 1 || !streq(keys[m], keys[i]) ||
			    !streq(procs[m].uuid, procs[i].uuid))
				continue;
			group[m] = 2;
			bp[k++] = (struct backstop_proc){ .pid = procs[m].pid,
							  .start_time = procs[m].start_time,
							  .used = procs[m].mem };
			cur->n_procs++;
			if (procs[m].mem != UINT64_MAX)
				cur->used += procs[m].mem;
		}
	}
	b->rounds++;
	r = backstop_round(b->engine, s, ns, now_usec(), &dec);
	if (r <= 0)
		goto out;
	j = calloc(1, sizeof(*j));
	if (!j)
		goto out;
	j->kill = dec;
	for (unsigned i = 0; i < n; i++)
		if (procs[i].pid == dec.pid && procs[i].mapped && streq(procs[i].uuid, dec.uuid))
			j->victim = procs[i];
	r = job_start(b, j);
	if (r < 0)
		(void)log_error_errno(r, "cannot start the kill of a process", "pid=%u", dec.pid);
out:
	free(s);
	free(bp);
	free(keys);
	free(group);
}

static void on_wake(struct loop_wake *w, void *userdata)
{
	struct dbackstop *b = userdata;
	struct bs_job *j = b->job;

	if (!j || !oneshot_done(j->os))
		return;
	b->job = NULL;
	if (!b->cache) {
		b->cache = j->cache;
		j->cache = NULL;
	}
	if (j->procs && b->state == BS_ACTIVE)
		feed(b, j->procs, j->n);
	else if (!j->procs)
		kill_done(b, j);
	(void)oneshot_unref(j->os); /* frees @j */
}

/* Is the GPU at @uuid one whose gpumem some container holds (discrete GPUs only)? */
static bool gpu_held(const struct dbackstop *b, const char *uuid)
{
	for (unsigned i = 0; i < b->n_holds; i++)
		if (streq(b->holds[i].uuid, uuid))
			return true;
	return false;
}

static void on_sampled(struct gpu_monitor *mon, const struct gpu_sample *samples, const int *r,
		       unsigned n, void *userdata)
{
	struct dbackstop *b = userdata;
	const struct gpu_info *info = &b->d->info;
	struct bs_job *j;
	unsigned k = 0;

	if (!b->sample_pending)
		return; /* the metrics' sample: a round runs on the backstop's own clock */
	b->sample_pending = false;
	if (b->state != BS_ACTIVE || b->job || !b->holds_valid)
		return;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->procs = calloc(PROCS_MAX, sizeof(*j->procs))))
		goto oom;
	for (unsigned i = 0; i < n && i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];

		if (r[i] != 0 || samples[i].n_procs <= 0 || g->integrated || !gpu_held(b, g->uuid))
			continue;
		for (int p = 0; p < samples[i].n_procs && k < PROCS_MAX; p++) {
			struct bs_proc *bp = &j->procs[k++];

			(void)snprintf(bp->uuid, sizeof(bp->uuid), "%s", g->uuid);
			bp->pid = samples[i].procs[p].pid;
			bp->mem = samples[i].procs[p].mem_used;
		}
	}
	j->n = k;
	if (k == 0 || !b->cache) {
		feed(b, j->procs, 0); /* nothing to watch: the engine forgets */
		free(j->procs);
		free(j);
		return;
	}
	if (job_start(b, j) < 0)
		(void)log_error("cannot start a backstop round", NULL);
	return;
oom:
	if (j)
		free(j->procs);
	free(j);
}

/* --- pod-resources: which container holds how much gpumem on which GPU --- */

struct hold_build {
	struct dbackstop *b;
	struct bs_hold *holds;
	unsigned n, cap;
	int err;
};

static const struct resource *gpumem_resource(const struct daemon *d, const char *name)
{
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);

		if (!dp->stopping && r->kind == RESOURCE_GPUMEM && streq(r->name, name))
			return r;
	}
	return NULL;
}

static void add_owner(const char *ns, const char *pod, const char *container, const char *resource,
		      const char *id, void *userdata)
{
	struct hold_build *hb = userdata;
	const struct daemon *d = hb->b->d;
	const struct resource *r = gpumem_resource(d, resource);
	struct bs_hold *h;
	unsigned gpu;
	int dev;

	if (!r || hb->err || !*container)
		return;
	dev = resource_device_lookup(r, id, strlen(id));
	if (dev < 0)
		return;
	gpu = resource_device_gpu(r, (unsigned)dev);
	if (gpu >= d->info.n_devices || d->info.devices[gpu].integrated)
		return; /* Tegra: unified memory, not fed (docs/sharing.md) */
	for (unsigned i = 0; i < hb->n; i++) {
		h = &hb->holds[i];
		if (streq(h->uuid, d->info.devices[gpu].uuid) && streq(h->container, container) &&
		    streq(h->pod, pod) && streq(h->ns, ns)) {
			h->limit += r->unit_mib << 20;
			return;
		}
	}
	if (hb->n == hb->cap) {
		unsigned cap = hb->cap ? hb->cap * 2 : 16;
		struct bs_hold *nh = realloc(hb->holds, cap * sizeof(*nh));

		if (!nh) {
			hb->err = -ENOMEM;
			return;
		}
		hb->holds = nh;
		hb->cap = cap;
	}
	h = &hb->holds[hb->n++];
	*h = (struct bs_hold){ .limit = r->unit_mib << 20 };
	(void)snprintf(h->ns, sizeof(h->ns), "%s", ns);
	(void)snprintf(h->pod, sizeof(h->pod), "%s", pod);
	(void)snprintf(h->container, sizeof(h->container), "%s", container);
	(void)snprintf(h->uuid, sizeof(h->uuid), "%s", d->info.devices[gpu].uuid);
}

static void on_answer(struct podres *p, const uint8_t *resp, size_t len, void *userdata)
{
	struct dbackstop *b = userdata;
	struct hold_build hb = { .b = b };
	int r = podres_for_each_owner(resp, len, add_owner, &hb);

	if (r == 0 && hb.err)
		r = hb.err;
	if (r < 0) {
		free(hb.holds);
		log_debug("pod-resources answer not used", "error=%d", r);
		return;
	}
	free(b->holds);
	b->holds = hb.holds;
	b->n_holds = hb.n;
	b->holds_valid = true;
}

/* --- state --- */

static bool gpumem_served(const struct daemon *d)
{
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);

		if (dp->stopping || r->kind != RESOURCE_GPUMEM)
			continue;
		for (unsigned s = 0; s < r->n_gpus; s++)
			if (r->gpus[s].gpu < d->info.n_devices &&
			    !d->info.devices[r->gpus[s].gpu].integrated)
				return true;
	}
	return false;
}

static enum bs_state want_state(struct dbackstop *b)
{
	const struct daemon *d = b->d;
	const char *host_proc = d->cfg.metrics.host_proc ? d->cfg.metrics.host_proc : "/proc";

	if (!d->cfg.gpumem.enforcement.backstop.enabled)
		return BS_DISABLED;
	if (!gpumem_served(d))
		return BS_NO_GPUMEM;
	if (!b->host_pid_root || !streq(b->host_pid_root, host_proc)) {
		free(b->host_pid_root);
		b->host_pid_root = strdup(host_proc);
		b->host_pid = backstop_host_pid(host_proc, &b->host_pid_why);
		if (b->host_pid <= 0)
			log_error(
				"the gpumem backstop is enabled but cannot act: deploy with hostPID (deployments/overlays/backstop)",
				"reason=%s host_proc=%s", log_q(b->host_pid_why), host_proc);
	}
	if (b->host_pid <= 0)
		return BS_NO_HOST_PID;
	if (!d->cfg.pod_resources_socket || !*d->cfg.pod_resources_socket)
		return BS_NO_POD_RESOURCES;
	return BS_ACTIVE;
}

static void set_state(struct dbackstop *b, enum bs_state st)
{
	const struct config_backstop *c = &b->d->cfg.gpumem.enforcement.backstop;

	if (st == b->state)
		return;
	if (st == BS_ACTIVE)
		log_info("gpumem backstop active",
			 "tolerance_percent=%u after_s=%.1f interval_s=%.1f", c->tolerance_percent,
			 (double)c->after / USEC_PER_SEC, (double)c->interval / USEC_PER_SEC);
	else if (b->state == BS_ACTIVE)
		log_info("gpumem backstop inactive", "state=%s", state_names[st]);
	b->state = st;
	if (st != BS_ACTIVE) {
		b->podres = podres_free(b->podres);
		b->holds = mfree(b->holds);
		b->n_holds = 0;
		b->holds_valid = false;
		backstop_forget(b->engine);
	}
}

static void on_tick(struct loop_timer *t, void *userdata)
{
	struct dbackstop *b = userdata;
	struct daemon *d = b->d;
	const struct config_backstop *c = &d->cfg.gpumem.enforcement.backstop;

	set_state(b, d->stopping ? BS_DISABLED : want_state(b));
	if (b->state == BS_DISABLED)
		return; /* a reload re-arms */
	loop_timer_arm(b->tick, c->interval);
	if (b->state != BS_ACTIVE)
		return;
	if (!b->podres) {
		if (podres_new(d->loop, d->cfg.pod_resources_socket, c->interval, NULL, NULL,
			       &b->podres) < 0)
			return;
		podres_on_answer(b->podres, on_answer, b);
		podres_poll_now(b->podres);
	}
	if (b->job || b->sample_pending || !d->monitor)
		return;
	b->sample_pending = gpu_monitor_sample(d->monitor);
}

void daemon_backstop_start(struct daemon *d)
{
	const struct config_backstop *c = &d->cfg.gpumem.enforcement.backstop;
	struct backstop_opts o = { .tolerance_percent = c->tolerance_percent, .after = c->after };
	struct dbackstop *b = calloc(1, sizeof(*b));
	int r = -ENOMEM;

	if (!b)
		goto fail;
	b->d = d;
	b->state = BS_DISABLED;
	if ((r = backstop_new(&o, &b->engine)) < 0 ||
	    (r = loop_timer_new(d->loop, on_tick, b, &b->tick)) < 0 ||
	    (r = loop_wake_new(d->loop, on_wake, b, &b->wake)) < 0 ||
	    (r = podmap_cache_new(d->cfg.metrics.host_proc, d->cfg.metrics.pod_log_dir,
				  &b->cache)) < 0 ||
	    (r = gpu_monitor_on_sampled(d->monitor, on_sampled, b)) < 0)
		goto fail;
	d->backstop = b;
	loop_timer_arm(b->tick, 0);
	return;
fail:
	(void)log_error_errno(r, "cannot start the gpumem backstop", NULL);
	if (b) {
		d->backstop = b;
		daemon_backstop_stop(d);
	}
}

void daemon_backstop_reload(struct daemon *d)
{
	const struct config_backstop *c = &d->cfg.gpumem.enforcement.backstop;
	struct backstop_opts o = { .tolerance_percent = c->tolerance_percent, .after = c->after };
	struct dbackstop *b = d->backstop;
	struct podmap_cache *pc = NULL;

	if (!b)
		return;
	if (backstop_set_opts(b->engine, &o) < 0)
		return; /* the schema keeps tolerance >= 100 */
	/* New roots: a new cache (a job in flight keeps the old one, and frees it) */
	if (podmap_cache_new(d->cfg.metrics.host_proc, d->cfg.metrics.pod_log_dir, &pc) == 0) {
		podmap_cache_free(b->cache);
		b->cache = pc;
	}
	b->host_pid_root = mfree(b->host_pid_root); /* checked again */
	b->podres = podres_free(b->podres);	    /* the socket or interval may be new */
	loop_timer_arm(b->tick, 0);
}

void daemon_backstop_gpus(struct daemon *d)
{
	if (d->backstop)
		loop_timer_arm(d->backstop->tick, 0);
}

void daemon_backstop_stop(struct daemon *d)
{
	struct dbackstop *b = d->backstop;

	if (!b)
		return;
	if (d->monitor)
		(void)gpu_monitor_on_sampled(d->monitor, NULL, b);
	/* A job in flight finishes on its own; its thread frees it then. */
	if (b->job)
		(void)oneshot_unref(b->job->os);
	podres_free(b->podres);
	loop_timer_free(b->tick);
	loop_wake_free(b->wake);
	podmap_cache_free(b->cache);
	backstop_free(b->engine);
	free(b->holds);
	free(b->host_pid_root);
	free(b);
	d->backstop = NULL;
}

void daemon_backstop_collect(const struct daemon *d, struct prom *p)
{
	const struct dbackstop *b = d->backstop;
	enum bs_state st = b ? b->state : BS_DISABLED;
	struct prom_labels l;

	prom_family(
		p, "edgegpu_gpumem_backstop_enabled", PROM_GAUGE,
		"1 when the gpumem backstop is configured on (edgegpu.sharing.memory.enforcement.backstop.enabled).");
	prom_sample(p, NULL, NULL, d->cfg.gpumem.enforcement.backstop.enabled ? 1.0 : 0.0);
	prom_family(p, "edgegpu_gpumem_backstop_state", PROM_GAUGE,
		    "The gpumem backstop's state: 1 for the current one (active: it can kill).");
	for (unsigned i = 0; i < BS_STATE_COUNT; i++) {
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "state", state_names[i]);
		prom_sample(p, NULL, &l, i == st ? 1.0 : 0.0);
	}
	prom_family(p, "edgegpu_gpumem_backstop_kills_total", PROM_COUNTER,
		    "Processes the gpumem backstop killed, by container.");
	for (unsigned i = 0; b && i <= KILLS_MAX; i++) {
		const struct bs_kills *k = &b->kills[i];

		if (i >= b->n_kills && i != KILLS_MAX)
			continue; /* the slot past KILLS_MAX: every later container, "" labels */
		if (!k->count)
			continue;
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "namespace", k->ns);
		prom_labels_push(&l, "pod", k->pod);
		prom_labels_push(&l, "container", k->container);
		prom_sample(p, NULL, &l, (double)k->count);
	}
	prom_family(
		p, "edgegpu_gpumem_backstop_kill_failures_total", PROM_COUNTER,
		"Kills the gpumem backstop decided but did not carry out (the process was gone or no longer the container's, or the signal failed).");
	prom_sample(p, NULL, NULL, b ? (double)b->kill_failures : 0.0);
	prom_family(
		p, "edgegpu_gpumem_backstop_rounds_total", PROM_COUNTER,
		"Rounds the gpumem backstop judged (a sample of the GPUs holding gpumem, mapped to containers).");
	prom_sample(p, NULL, NULL, b ? (double)b->rounds : 0.0);
	prom_family(p, "edgegpu_gpumem_backstop_watched", PROM_GAUGE,
		    "(container, GPU) pairs above their limit x tolerance now, being timed.");
	prom_sample(p, NULL, NULL, b ? (double)backstop_watched(b->engine) : 0.0);
}
