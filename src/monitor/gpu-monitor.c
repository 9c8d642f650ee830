/*
 * The GPU monitor (gpu-monitor.h), its loop side: it asks the worker (gpu-worker.c) for one
 * job at a time, applies the events and job results to per-GPU health, and runs the probe,
 * recovery, re-initialisation and hang timers. This is the logging layer for GPU health
 * (module=gpu). Everything here runs on the loop thread; struct gpu_monitor is the loop's.
 *
 * Hung calls. A probe or sample call that hangs on one GPU marks that GPU (hung) and leaves
 * the worker thread in it; a new worker carries on with the rest, skipping GPUs whose call
 * still hangs. The stuck thread's job comes back late when the call returns: its GPU is
 * judged by it. A discovery or re-initialisation that hangs, or a GPU's call that hangs when
 * GPU_WORKER_MAX_THREADS threads are in use, holds the worker: no GPU can be judged then, so
 * every one is marked (starved) until a worker is free again.
 */

#define LOG_MODULE "gpu"

#include "gpu-monitor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "gpu-backend.h"
#include "gpu-worker.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#define DEFAULT_POLL_INTERVAL	    (5 * USEC_PER_SEC)
#define DEFAULT_EVENT_POLL_INTERVAL (60 * USEC_PER_SEC)
#define DEFAULT_CALL_TIMEOUT	    (10 * USEC_PER_SEC)
#define DEFAULT_EVENT_SLICE	    (30 * USEC_PER_SEC)
#define BACKOFF_MIN		    (100 * USEC_PER_MSEC)
#define BACKOFF_MAX		    (10 * USEC_PER_SEC)
#define MAX_GPUS		    GPU_WORKER_MAX_GPUS

/* --- the loop side --- */

struct mon_gpu {
	char uuid[GPU_UUID_MAX];
	bool events; /* the backend reports this GPU's events */
	enum gpu_health health;
	bool fault; /* XID, double-bit ECC, lost or failed probe: needs recovery */
	bool lost;
	bool driver;  /* waiting for a re-initialisation */
	bool hung;    /* a backend call about this GPU has not returned */
	bool starved; /* no worker can judge it: the worker is held by another hung call */
	usec_t last_fault;
	uint64_t ecc_single;
	char reason[160];
	enum gpu_reason fault_kind; /* of the last fault (mark_fault) */
	struct gpu_monitor_gpu_stats st;
};

struct gpu_monitor {
	struct loop *loop;
	struct gpu_worker *w;
	gpu_health_fn *health_fn;
	gpu_discovered_fn *discovered_fn;
	void *userdata;
	struct gpu_monitor_opts o; /* ignored_xids points to ignored */
	uint64_t *ignored;

	unsigned n_gpus;
	struct mon_gpu *gpus;
	struct gpu_monitor_stats stats;
	struct loop_wake *wake;
	struct loop_timer *poll_timer, *event_poll_timer, *recovery_timer, *reinit_timer,
		*hang_timer;

	struct gpu_job *inflight; /* submitted to the worker, not collected */
	bool inflight_hung;	  /* it hangs and holds the worker: nobody took its place */
	int inflight_gpu;	  /* then: the GPU whose call it is, -1 for the library's */
	char hung_call[64];
	usec_t inflight_since;
	unsigned gen; /* discoveries and re-initialisations done: GPU indices may change */
	/* Jobs left with their threads in hung calls, until they come back. */
	struct mon_stuck {
		const struct gpu_job *j; /* only compared: the thread owns it */
		char uuid[GPU_UUID_MAX];
		unsigned gpu, gen; /* the GPU's index then, and m->gen then */
		char call[64];
		usec_t since;
	} stuck[GPU_WORKER_MAX_THREADS];
	unsigned n_stuck;
	bool want_discover, want_fresh, want_reinit, want_sample;
	uint64_t want_probe;
	/* the metrics and the backstop: each gets every sample (GPU_MONITOR_SAMPLED_MAX) */
	struct {
		gpu_sampled_fn *fn;
		void *userdata;
	} sampled[GPU_MONITOR_SAMPLED_MAX];

	bool events_open; /* the worker's last word on the event set */
	bool events_logged;
	bool wait_failing_seen;
	bool reinit_pending;
	struct backoff reinit_backoff;
	bool reinit_failed_logged;
	struct gpu_event batch[GPU_WORKER_QUEUE];
};

static const char *gpu_uuid(const struct gpu_monitor *m, unsigned gpu)
{
	return gpu < m->n_gpus ? m->gpus[gpu].uuid : "?";
}

static uint64_t all_mask(const struct gpu_monitor *m)
{
	return m->n_gpus >= 64 ? UINT64_MAX : (((uint64_t)1 << m->n_gpus) - 1);
}

static const char *const reason_names[GPU_REASON_COUNT] = {
	[GPU_REASON_XID] = "xid",
	[GPU_REASON_ECC] = "ecc",
	[GPU_REASON_LOST] = "lost",
	[GPU_REASON_PROBE] = "probe",
	[GPU_REASON_DRIVER] = "driver",
	[GPU_REASON_HUNG] = "hung",
	[GPU_REASON_RECOVERED] = "recovered",
};

const char *gpu_reason_name(enum gpu_reason r)
{
	return (unsigned)r < GPU_REASON_COUNT ? reason_names[r] : "unknown";
}

/* What made @g change: its flags, and for a fault the kind mark_fault() was given. */
static enum gpu_reason reason_of(const struct mon_gpu *g)
{
	if (!g->fault && !g->driver && !g->hung && !g->starved)
		return GPU_REASON_RECOVERED;
	if (g->hung || g->starved)
		return GPU_REASON_HUNG;
	if (g->driver)
		return GPU_REASON_DRIVER;
	return g->fault_kind;
}

static void update_health(struct gpu_monitor *m, unsigned gpu, const char *why)
{
	struct mon_gpu *g = &m->gpus[gpu];
	enum gpu_health want = g->fault || g->driver || g->hung || g->starved ? GPU_UNHEALTHY :
										GPU_HEALTHY;
	char q[200];

	if (want == g->health)
		return;
	g->health = want;
	g->st.transitions[want == GPU_HEALTHY][reason_of(g)]++;
	if (want == GPU_UNHEALTHY) {
		if (why != g->reason)
			(void)snprintf(g->reason, sizeof(g->reason), "%s", why);
		log_warn("gpu unhealthy", "device=%s gpu=%u reason=%s", g->uuid, gpu,
			 log_quote(q, sizeof(q), why));
	} else {
		m->stats.recoveries++;
		g->reason[0] = 0;
		log_info("gpu healthy again", "device=%s gpu=%u reason=%s", g->uuid, gpu,
			 log_quote(q, sizeof(q), why));
	}
	if (m->health_fn)
		m->health_fn(m, gpu, want, why, m->userdata);
}

static void arm_recovery(struct gpu_monitor *m, usec_t when)
{
	if (m->o.recovery_quiet == 0)
		return;
	if (!loop_timer_armed(m->recovery_timer))
		loop_timer_arm_at(m->recovery_timer, when);
}

static void mark_fault(struct gpu_monitor *m, unsigned gpu, enum gpu_reason kind,
		       const char *reason)
{
	struct mon_gpu *g = &m->gpus[gpu];

	g->fault = true;
	g->fault_kind = kind;
	g->last_fault = now_usec();
	(void)snprintf(g->reason, sizeof(g->reason), "%s", reason);
	update_health(m, gpu, g->reason);
	arm_recovery(m, g->last_fault + m->o.recovery_quiet);
}

static void kick(struct gpu_monitor *m);

static void start_reinit(struct gpu_monitor *m)
{
	if (m->reinit_pending)
		return;
	m->reinit_pending = true;
	m->reinit_backoff = BACKOFF_INIT(BACKOFF_MIN, 2, BACKOFF_MAX);
	m->reinit_failed_logged = false;
	m->want_reinit = true;
	kick(m);
}

static void driver_changed(struct gpu_monitor *m, const char *why)
{
	if (!m->reinit_pending)
		log_warn("nvidia driver changed, re-initialising nvml", "reason=%s", log_q(why));
	for (unsigned i = 0; i < m->n_gpus; i++) {
		m->gpus[i].driver = true;
		update_health(m, i, why);
	}
	start_reinit(m);
}

/* Applies the result of one probe of @gpu. */
static void probe_result(struct gpu_monitor *m, unsigned gpu, int r)
{
	struct mon_gpu *g = &m->gpus[gpu];
	char why[160], eb[64];

	if (r == 0) {
		g->lost = false;
		/* Recovery: quiet for long enough and answering again. */
		if (g->fault && m->o.recovery_quiet &&
		    now_usec() >= g->last_fault + m->o.recovery_quiet) {
			g->fault = false;
			update_health(m, gpu,
				      "no fault for the recovery quiet period and the gpu answers");
		}
		return;
	}
	m->stats.probe_failures++;
	if (r == -EXDEV) {
		driver_changed(m, "nvml reports a driver/library version mismatch or a reload");
		return;
	}
	if (r == -ENODEV) {
		if (!g->lost)
			m->stats.lost++;
		g->lost = true;
		mark_fault(m, gpu, GPU_REASON_LOST, "gpu is lost (fell off the bus)");
		return;
	}
	(void)snprintf(why, sizeof(why), "health probe failed: %s", strerror_r(-r, eb, sizeof(eb)));
	mark_fault(m, gpu, GPU_REASON_PROBE, why);
}

static bool xid_ignored(const struct gpu_monitor *m, uint64_t xid)
{
	if (m->o.disable_xids || gpu_xid_is_application(xid))
		return true;
	for (unsigned i = 0; i < m->o.n_ignored_xids; i++)
		if (m->ignored[i] == xid)
			return true;
	return false;
}

static int gpu_by_uuid(const struct gpu_monitor *m, const char *uuid)
{
	for (unsigned i = 0; i < m->n_gpus; i++)
		if (streq(m->gpus[i].uuid, uuid))
			return (int)i;
	return -1;
}

static void record_xid(struct gpu_monitor_gpu_stats *st, uint64_t xid)
{
	unsigned i;

	st->last_xid = xid;
	for (i = 0; i < st->n_xids && st->xids[i].xid != xid; i++)
		;
	if (i == st->n_xids) {
		if (i == GPU_MONITOR_XIDS_MAX) {
			st->xid_overflow++;
			return;
		}
		st->n_xids++;
		st->xids[i].xid = xid;
	}
	st->xids[i].count++;
	st->xids[i].last_wall = wall_usec();
}

static void apply_event(struct gpu_monitor *m, const struct gpu_event *ev)
{
	unsigned first = 0, last = m->n_gpus;
	char why[96];

	m->stats.events++;
	if (m->o.disable_all)
		return;
	if (ev->gpu >= 0) {
		/* Indices change on rediscovery: the UUID says which GPU it was. */
		int g = gpu_by_uuid(m, ev->uuid);

		if (g < 0)
			return;
		first = (unsigned)g;
		last = first + 1;
	}
	switch (ev->kind) {
	case GPU_EVENT_XID:
		if (xid_ignored(m, ev->xid)) {
			m->stats.xids_ignored++;
			log_debug("xid ignored", "device=%s xid=%llu", gpu_uuid(m, first),
				  (unsigned long long)ev->xid);
			return;
		}
		m->stats.xids++;
		(void)snprintf(why, sizeof(why), "critical xid %llu", (unsigned long long)ev->xid);
		for (unsigned i = first; i < last; i++) {
			record_xid(&m->gpus[i].st, ev->xid);
			mark_fault(m, i, GPU_REASON_XID, why);
		}
		return;
	case GPU_EVENT_ECC_SINGLE:
		m->stats.ecc_single++;
		for (unsigned i = first; i < last; i++) {
			uint64_t c = ++m->gpus[i].ecc_single;

			/* Counted; logged at 1, 2, 4, 8, ... so a storm stays readable. */
			if ((c & (c - 1)) == 0)
				log_info("single-bit ecc error, counting only",
					 "device=%s count=%llu", m->gpus[i].uuid,
					 (unsigned long long)c);
		}
		return;
	case GPU_EVENT_ECC_DOUBLE:
		m->stats.ecc_double++;
		for (unsigned i = first; i < last; i++)
			mark_fault(m, i, GPU_REASON_ECC, "double-bit ecc error");
		return;
	case GPU_EVENT_LOST:
		if (ev->gpu >= 0) {
			probe_result(m, first, -ENODEV);
			return;
		}
		/* Some GPU is lost: the probes say which. */
		m->want_probe |= all_mask(m);
		return;
	case GPU_EVENT_DRIVER_CHANGED:
		driver_changed(m, "nvml event wait reports a driver/library mismatch or a reload");
		return;
	case GPU_EVENT_COUNT:
	default:
		return;
	}
}

/* GPUs whose faults come as events (the rest are probed every poll_interval). */
static bool gpu_evented(const struct gpu_monitor *m, unsigned i)
{
	return m->gpus[i].events && m->events_open && !m->wait_failing_seen;
}

/* Arms each poll timer that has GPUs to probe, disarms the others. */
static void arm_polls(struct gpu_monitor *m)
{
	bool plain = false, evented = false;

	for (unsigned i = 0; i < m->n_gpus; i++) {
		if (gpu_evented(m, i))
			evented = true;
		else
			plain = true;
	}
	if (m->o.disable_all)
		plain = evented = false;
	if (!plain)
		loop_timer_disarm(m->poll_timer);
	else if (!loop_timer_armed(m->poll_timer))
		loop_timer_arm(m->poll_timer, m->o.poll_interval);
	if (!evented)
		loop_timer_disarm(m->event_poll_timer);
	else if (!loop_timer_armed(m->event_poll_timer))
		loop_timer_arm(m->event_poll_timer, m->o.event_poll_interval);
}

static void log_events_state(struct gpu_monitor *m, int r)
{
	bool want = false;

	for (unsigned i = 0; i < m->n_gpus; i++)
		want = want || m->gpus[i].events;
	m->events_open = r == 0;
	if (r == 0 || !want || r == -EOPNOTSUPP || m->o.disable_all) {
		m->events_logged = false;
		return;
	}
	if (!m->events_logged)
		(void)log_warn_errno(r, "gpu event registration failed, probing only", "gpus=%u",
				     m->n_gpus);
	m->events_logged = true;
}

/* Takes the GPUs of a discovery, carrying each known GPU's state over by UUID. */
static int adopt(struct gpu_monitor *m, const struct gpu_info *info)
{
	unsigned n = MIN(info->n_devices, MAX_GPUS);
	struct mon_gpu *gpus = calloc(n + 1, sizeof(*gpus));

	if (!gpus)
		return -ENOMEM;
	if (info->n_devices > MAX_GPUS)
		log_warn("more GPUs than the monitor watches, watching the first ones",
			 "gpus=%u limit=%u", info->n_devices, MAX_GPUS);
	for (unsigned i = 0; i < n; i++) {
		int old = gpu_by_uuid(m, info->devices[i].uuid);

		if (old >= 0)
			gpus[i] = m->gpus[old];
		(void)snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "%s", info->devices[i].uuid);
		gpus[i].events = info->devices[i].events_supported;
	}
	free(m->gpus);
	m->gpus = gpus;
	m->n_gpus = n;
	m->want_probe &= all_mask(m);
	return 0;
}

/* --- hung calls --- */

#define HUNG_MSG  "nvml call hung, its gpus are unhealthy until it returns, serving on"
#define LIMIT_MSG "nvml worker limit reached, every gpu unhealthy until a hung call returns"

static uint64_t bit(unsigned gpu)
{
	return (uint64_t)1 << gpu;
}

/* GPUs a job may ask: not those whose own call hangs, until it returns. */
static uint64_t askable_mask(const struct gpu_monitor *m)
{
	uint64_t mask = all_mask(m);

	for (unsigned i = 0; i < m->n_gpus; i++)
		if (m->gpus[i].hung)
			mask &= ~bit(i);
	return mask;
}

static unsigned long long ms_since(usec_t t)
{
	return (unsigned long long)((now_usec() - t) / USEC_PER_MSEC);
}

/*
 * The worker is free again: the GPUs nobody could judge meanwhile are judged by their own
 * probes, asked for at once.
 */
static void feed(struct gpu_monitor *m, const char *why)
{
	for (unsigned i = 0; i < m->n_gpus; i++) {
		if (!m->gpus[i].starved)
			continue;
		m->gpus[i].starved = false;
		m->want_probe |= bit(i);
		update_health(m, i, why);
	}
}

/* @gpu's hung call returned: it is judged again. */
static void unhang(struct gpu_monitor *m, unsigned gpu)
{
	if (gpu >= m->n_gpus || !m->gpus[gpu].hung)
		return;
	m->gpus[gpu].hung = false;
	update_health(m, gpu, "the hung nvml call returned");
}

/*
 * The call the worker was held by (m->inflight_hung) returned at @back: its job finished, or
 * went on to its next GPU.
 */
static void held_returned(struct gpu_monitor *m, usec_t back)
{
	unsigned long long after_ms = (back - m->inflight_since) / USEC_PER_MSEC;
	int gpu = m->inflight_gpu;

	m->inflight_hung = false;
	m->inflight_gpu = -1;
	if (gpu >= 0) {
		log_info("nvml call returned", "call=%s device=%s after_ms=%llu", m->hung_call,
			 gpu_uuid(m, (unsigned)gpu), after_ms);
		unhang(m, (unsigned)gpu);
	} else {
		log_info("nvml call returned", "call=%s after_ms=%llu", m->hung_call, after_ms);
	}
	feed(m, "the hung nvml call returned");
}

/*
 * Leaves the worker in the hung call of GPU @gpu (the step that began at @since) and gives
 * what its job had yet to do to a new worker. Returns 0, or the -errno of
 * gpu_worker_abandon() (nothing changed).
 */
static int leave_behind(struct gpu_monitor *m, unsigned gpu, const char *call, usec_t since)
{
	const struct gpu_worker_progress at = { .since = since, .gpu = (int)gpu };
	struct gpu_job *j = m->inflight;
	struct mon_stuck *st;
	int r;

	if (m->n_stuck == ELEMENTSOF(m->stuck))
		return -EBUSY;
	r = gpu_worker_abandon(m->w, &at);
	if (r < 0)
		return r;
	st = &m->stuck[m->n_stuck++];
	*st = (struct mon_stuck){ .j = j, .gpu = gpu, .gen = m->gen, .since = since };
	(void)snprintf(st->uuid, sizeof(st->uuid), "%s", gpu_uuid(m, gpu));
	(void)snprintf(st->call, sizeof(st->call), "%s", call);
	/* The rest of the job, again (its GPUs done before this one too: their answers went
	   with it). */
	if (j->kind == GPU_JOB_PROBE)
		m->want_probe |= j->mask & ~bit(gpu);
	else
		m->want_sample = true;
	m->inflight = NULL;
	loop_timer_disarm(m->hang_timer);
	return 0;
}

/*
 * The worker ran past call_timeout in @p's call. Returns 0, or -ESTALE when the worker has
 * just left that step (nothing done: look again).
 */
static int hang(struct gpu_monitor *m, const struct gpu_worker_progress *p)
{
	const char *call = p->call ? p->call : "open";
	bool one = p->gpu >= 0 && (unsigned)p->gpu < m->n_gpus &&
		   (m->inflight->kind == GPU_JOB_PROBE || m->inflight->kind == GPU_JOB_SAMPLE);
	unsigned long long timeout_ms = m->o.call_timeout / USEC_PER_MSEC;
	unsigned gpu = (unsigned)p->gpu;
	char why[128], starve[128];
	int r = one ? leave_behind(m, gpu, call, p->since) : -EINVAL;

	if (r == -ESTALE)
		return r;
	m->stats.hung_calls++;
	(void)snprintf(why, sizeof(why), "nvml call %s hung", call);
	if (!one) {
		log_error(HUNG_MSG, "call=%s timeout_ms=%llu", call, timeout_ms);
	} else {
		log_error(HUNG_MSG, "call=%s device=%s gpu=%u timeout_ms=%llu threads=%u", call,
			  m->gpus[gpu].uuid, gpu, timeout_ms, m->n_stuck + (r < 0));
		m->gpus[gpu].hung = true;
		update_health(m, gpu, why);
		if (r == 0) {
			kick(m);
			return 0;
		}
	}
	/* Nobody takes the worker's place: a call of the library as a whole, or the bound. */
	m->inflight_hung = true;
	m->inflight_gpu = one ? p->gpu : -1;
	m->inflight_since = p->since;
	(void)snprintf(m->hung_call, sizeof(m->hung_call), "%s", call);
	if (one) {
		m->stats.worker_limit++;
		if (r == -EBUSY)
			log_error(LIMIT_MSG, "threads=%u call=%s", m->n_stuck + 1, call);
		else
			(void)log_error_errno(
				r,
				"cannot start an nvml worker thread, every gpu unhealthy until a hung call returns",
				"threads=%u", m->n_stuck + 1);
		(void)snprintf(starve, sizeof(starve),
			       "no nvml worker left: %u threads are in hung calls", m->n_stuck + 1);
	} else {
		(void)snprintf(starve, sizeof(starve), "%s", why);
	}
	for (unsigned i = 0; i < m->n_gpus; i++) {
		m->gpus[i].starved = true;
		update_health(m, i, starve);
	}
	/* Its call may return and its job go on to another GPU: watch() looks again. */
	loop_timer_arm(m->hang_timer, m->o.call_timeout);
	return 0;
}

/*
 * Judges the worker's step (the hang timer): one that runs past call_timeout hangs. The step
 * that holds the worker is looked at again every call_timeout: when the worker is in another
 * step, the held call returned and its job went on to its next GPU.
 */
static void watch(struct gpu_monitor *m)
{
	struct gpu_worker_progress p;

	do {
		if (!m->inflight || !gpu_worker_progress(m->w, &p))
			return; /* nothing runs, or it is done: on_wake takes it */
		if (m->inflight_hung) {
			if (p.since == m->inflight_since && p.gpu == m->inflight_gpu) {
				loop_timer_arm(m->hang_timer, m->o.call_timeout);
				return;
			}
			held_returned(m, p.since);
		}
		/* A probe or sample steps from GPU to GPU: the timeout is one GPU's step's. */
		if (now_usec() < p.since + m->o.call_timeout) {
			loop_timer_arm_at(m->hang_timer, p.since + m->o.call_timeout);
			return;
		}
	} while (hang(m, &p) == -ESTALE);
}

/*
 * A thread left in a hung call is back with its job: its GPU is judged by it. @held_free: the
 * job that holds the worker (at the bound) has not finished, so it can be left behind now.
 */
static void finish_late(struct gpu_monitor *m, struct gpu_job *j, bool held_free)
{
	struct mon_stuck st;
	unsigned k;
	int gpu, r;

	for (k = 0; k < m->n_stuck && m->stuck[k].j != j; k++)
		;
	if (k == m->n_stuck)
		return;
	st = m->stuck[k];
	m->stuck[k] = m->stuck[--m->n_stuck];
	log_info("nvml call returned", "call=%s device=%s after_ms=%llu", st.call, st.uuid,
		 ms_since(st.since));
	gpu = gpu_by_uuid(m, st.uuid);
	/* Its answer, unless a discovery or re-initialisation came since. */
	if (gpu >= 0 && m->gpus[gpu].hung && j->kind == GPU_JOB_PROBE && st.gen == m->gen &&
	    !m->reinit_pending) {
		m->stats.probes++;
		probe_result(m, (unsigned)gpu, j->probe_r[st.gpu]);
	}
	if (gpu >= 0)
		unhang(m, (unsigned)gpu);
	/* A thread is free: a worker held at the bound can be left behind now, unless its call
	   returned meanwhile (-ESTALE: the worker went on). */
	if (!held_free || !m->inflight_hung || m->inflight_gpu < 0)
		return;
	r = leave_behind(m, (unsigned)m->inflight_gpu, m->hung_call, m->inflight_since);
	if (r == 0) {
		m->inflight_hung = false;
		m->inflight_gpu = -1;
		feed(m, "an nvml worker is free again");
	} else if (r == -ESTALE) {
		watch(m);
	}
}

static void finish_discover(struct gpu_monitor *m, struct gpu_job *j)
{
	if (j->r < 0) {
		if (m->reinit_pending && !loop_timer_armed(m->reinit_timer)) {
			loop_timer_arm(m->reinit_timer, backoff_next(&m->reinit_backoff));
		}
		if (m->discovered_fn)
			m->discovered_fn(m, j->r, NULL, NULL, j->err ? j->err : "", m->userdata);
		return;
	}
	if (adopt(m, &j->info) < 0) {
		if (m->discovered_fn)
			m->discovered_fn(m, -ENOMEM, NULL, NULL, "out of memory", m->userdata);
		return;
	}
	m->gen++;
	if (j->fresh && m->reinit_pending) {
		m->reinit_pending = false;
		for (unsigned i = 0; i < m->n_gpus; i++)
			m->gpus[i].driver = false;
	}
	log_events_state(m, j->events_r);
	arm_polls(m);
	if (m->discovered_fn)
		m->discovered_fn(m, 0, &j->info, &j->distance, NULL, m->userdata);
	for (unsigned i = 0; i < m->n_gpus; i++)
		update_health(m, i, m->gpus[i].reason[0] ? m->gpus[i].reason : "discovered");
}

static void finish_reinit(struct gpu_monitor *m, struct gpu_job *j)
{
	if (j->r < 0) {
		usec_t delay = backoff_next(&m->reinit_backoff);
		char q[512];

		m->stats.reinit_failures++;
		if (!m->reinit_failed_logged)
			(void)log_warn_errno(
				j->r, "nvml re-initialisation failed, retrying with back-off",
				"reason=%s", log_quote(q, sizeof(q), j->err));
		else
			(void)log_debug_errno(j->r, "nvml re-initialisation failed, retrying",
					      "backoff_ms=%llu",
					      (unsigned long long)(delay / USEC_PER_MSEC));
		m->reinit_failed_logged = true;
		loop_timer_arm(m->reinit_timer, delay);
		return;
	}
	m->stats.reinits++;
	m->gen++;
	m->reinit_pending = false;
	log_info("nvml re-initialised", "gpus=%u", m->n_gpus);
	for (unsigned i = 0; i < m->n_gpus; i++) {
		m->gpus[i].driver = false;
		if ((j->mask >> i) & 1) {
			m->stats.probes++;
			if (j->probe_r[i] < 0)
				probe_result(m, i, j->probe_r[i]);
		}
	}
	for (unsigned i = 0; i < m->n_gpus; i++)
		update_health(m, i, "nvml re-initialised and the gpu answers");
	log_events_state(m, j->events_r);
	arm_polls(m);
}

/* Faulted GPUs whose quiet period is not over yet: look again when it is. */
static void arm_recovery_next(struct gpu_monitor *m)
{
	usec_t next = USEC_INFINITY, now = now_usec();

	if (!m->o.recovery_quiet || loop_timer_armed(m->recovery_timer))
		return;
	for (unsigned i = 0; i < m->n_gpus; i++)
		if (m->gpus[i].fault)
			next = MIN(next, MAX(m->gpus[i].last_fault + m->o.recovery_quiet,
					     now + BACKOFF_MIN));
	if (next != USEC_INFINITY)
		loop_timer_arm_at(m->recovery_timer, next);
}

static void finish_sample(struct gpu_monitor *m, struct gpu_job *j)
{
	unsigned n = MIN(m->n_gpus, (unsigned)GPU_WORKER_MAX_GPUS);

	/* A GPU left out because its call hung has answered since: ask again, all of them. */
	if (askable_mask(m) & ~j->mask) {
		m->want_sample = true;
		return;
	}
	for (unsigned i = 0; i < n; i++)
		if (!((j->mask >> i) & 1))
			j->sample_r[i] = m->gpus[i].hung ? -ETIMEDOUT : -ENODEV;
	for (unsigned i = 0; i < GPU_MONITOR_SAMPLED_MAX; i++)
		if (m->sampled[i].fn)
			m->sampled[i].fn(m, j->samples, j->sample_r, n, m->sampled[i].userdata);
}

static void finish_job(struct gpu_monitor *m, struct gpu_job *j)
{
	bool held = m->inflight_hung;

	loop_timer_disarm(m->hang_timer);
	m->stats.jobs++;
	switch (j->kind) {
	case GPU_JOB_DISCOVER:
		finish_discover(m, j);
		break;
	case GPU_JOB_PROBE:
		for (unsigned i = 0; i < m->n_gpus; i++)
			if ((j->mask >> i) & 1 && !m->reinit_pending) {
				m->stats.probes++;
				probe_result(m, i, j->probe_r[i]);
			}
		break;
	case GPU_JOB_REINIT:
		finish_reinit(m, j);
		break;
	case GPU_JOB_SAMPLE:
		finish_sample(m, j);
		break;
	}
	/* After its answers: a GPU whose probe failed stays Unhealthy without a flap. */
	if (held)
		held_returned(m, now_usec());
	arm_recovery_next(m);
}

/* Submits the most urgent pending request when the worker is free. */
static void kick(struct gpu_monitor *m)
{
	struct gpu_job *j;
	uint64_t ask, probe;
	bool sample;

	if (m->inflight)
		return;
	/* A re-initialisation shuts the library down, under a thread left in a hung call that
	   may use its handles when the call returns: it waits for those (finish_late()). */
	if ((m->want_reinit || m->want_fresh) && m->n_stuck)
		return;
	if (m->reinit_pending && !m->want_reinit && !m->want_discover)
		return; /* waiting for the back-off: nothing else makes sense meanwhile */
	/* GPUs whose call hangs are asked nothing (their requests wait for the return). */
	ask = askable_mask(m);
	probe = m->want_probe & ask;
	sample = m->want_sample && ask;
	if (!m->want_reinit && !m->want_discover && !probe && !sample)
		return;
	j = calloc(1, sizeof(*j));
	if (!j) {
		loop_timer_arm(m->reinit_timer, BACKOFF_MIN); /* try again soon */
		return;
	}
	j->want_events = !m->o.disable_all;
	if (m->want_reinit && !m->want_discover) {
		j->kind = GPU_JOB_REINIT;
		j->mask = ask;
		m->want_reinit = false;
		/* Our view of the GPUs (UUIDs, events) for the worker to open the event set with. */
		j->info.devices = calloc(m->n_gpus + 1, sizeof(*j->info.devices));
		if (j->info.devices) {
			j->info.n_devices = m->n_gpus;
			for (unsigned i = 0; i < m->n_gpus; i++) {
				memcpy(j->info.devices[i].uuid, m->gpus[i].uuid, GPU_UUID_MAX);
				j->info.devices[i].events_supported = m->gpus[i].events;
			}
		}
	} else if (m->want_discover) {
		j->kind = GPU_JOB_DISCOVER;
		j->fresh = m->want_fresh || m->want_reinit;
		m->want_discover = m->want_fresh = m->want_reinit = false;
	} else if (probe) {
		j->kind = GPU_JOB_PROBE;
		j->mask = probe;
		m->want_probe &= ~probe;
	} else {
		m->want_sample = false;
		j->kind = GPU_JOB_SAMPLE;
		j->mask = ask;
		j->samples = calloc(GPU_WORKER_MAX_GPUS, sizeof(*j->samples));
		if (!j->samples) {
			/* The sampled callback reads the samples: ask again soon instead. */
			gpu_job_free(j);
			m->want_sample = true;
			loop_timer_arm(m->reinit_timer, BACKOFF_MIN);
			return;
		}
	}
	m->inflight = j;
	m->inflight_since = now_usec();
	m->inflight_hung = false;
	m->inflight_gpu = -1;
	gpu_worker_submit(m->w, j);
	loop_timer_arm(m->hang_timer, m->o.call_timeout);
}

static void on_wake(struct loop_wake *w, void *userdata)
{
	struct gpu_monitor *m = userdata;
	struct gpu_job *done, *late;
	bool failing;
	unsigned n;
	int err;

	done = gpu_worker_collect(m->w, m->batch, &n, &failing, &err);

	for (unsigned i = 0; i < n; i++)
		apply_event(m, &m->batch[i]);
	if (failing && !m->wait_failing_seen)
		(void)log_warn_errno(
			err, "gpu event wait failing, retrying with back-off, probing meanwhile",
			"gpus=%u", m->n_gpus);
	else if (!failing && m->wait_failing_seen)
		log_info("gpu event wait works again", "gpus=%u", m->n_gpus);
	if (failing != m->wait_failing_seen) {
		m->wait_failing_seen = failing;
		arm_polls(m);
	}
	/* Late jobs first: a sample that left out a GPU whose call has returned is asked again. */
	while ((late = gpu_worker_take_late(m->w))) {
		finish_late(m, late, !done);
		gpu_job_free(late);
	}
	if (done) {
		m->inflight = NULL;
		finish_job(m, done);
		gpu_job_free(done);
	}
	kick(m);
}

/* --- timers --- */

static void on_poll(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;
	bool evented = t == m->event_poll_timer;

	for (unsigned i = 0; i < m->n_gpus; i++)
		if (gpu_evented(m, i) == evented)
			m->want_probe |= (uint64_t)1 << i;
	loop_timer_arm(t, evented ? m->o.event_poll_interval : m->o.poll_interval);
	if (m->inflight_hung)
		m->stats.probes_deferred++; /* no worker to run them: they wait */
	kick(m);
}

static void on_recovery(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;
	usec_t now = now_usec();

	for (unsigned i = 0; i < m->n_gpus; i++)
		if (m->gpus[i].fault && now >= m->gpus[i].last_fault + m->o.recovery_quiet)
			m->want_probe |= (uint64_t)1 << i;
	/* finish_job() arms the timer again for the GPUs still waiting; else do it now. */
	kick(m);
	if (!m->inflight)
		arm_recovery_next(m);
}

static void on_reinit_timer(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;

	if (m->reinit_pending)
		m->want_reinit = true;
	kick(m);
}

static void on_hang(struct loop_timer *t, void *userdata)
{
	watch(userdata);
}

/* --- lifecycle --- */

int gpu_monitor_set_opts(struct gpu_monitor *m, const struct gpu_monitor_opts *o)
{
	static const struct gpu_monitor_opts defaults = { 0 };
	uint64_t *ignored = NULL;
	bool was_disabled = m->o.disable_all;

	if (!o)
		o = &defaults;
	if (o->n_ignored_xids) {
		ignored = calloc(o->n_ignored_xids, sizeof(*ignored));
		if (!ignored)
			return -ENOMEM;
		memcpy(ignored, o->ignored_xids, o->n_ignored_xids * sizeof(*ignored));
	}
	free(m->ignored);
	m->ignored = ignored;
	m->o = *o;
	m->o.ignored_xids = ignored;
	if (!m->o.poll_interval)
		m->o.poll_interval = DEFAULT_POLL_INTERVAL;
	if (!m->o.event_poll_interval)
		m->o.event_poll_interval = DEFAULT_EVENT_POLL_INTERVAL;
	if (!m->o.call_timeout)
		m->o.call_timeout = DEFAULT_CALL_TIMEOUT;
	if (!m->o.event_slice)
		m->o.event_slice = DEFAULT_EVENT_SLICE;
	if (m->w)
		gpu_worker_set_slice(m->w, m->o.event_slice);
	/* New periods take effect now, not after the old ones run out. */
	loop_timer_disarm(m->poll_timer);
	loop_timer_disarm(m->event_poll_timer);
	arm_polls(m);
	if (m->o.disable_all && !was_disabled)
		log_info("gpu health checks off", "gpus=%u disable_all=yes", m->n_gpus);
	return 0;
}

int gpu_monitor_new(struct loop *l, const struct gpu_backend_opts *backend,
		    const struct gpu_monitor_opts *o, gpu_health_fn *health_fn,
		    gpu_discovered_fn *discovered_fn, void *userdata, struct gpu_monitor **ret)
{
	struct gpu_monitor *m;
	int r;

	if (!l || !backend || !ret)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->loop = l;
	m->health_fn = health_fn;
	m->discovered_fn = discovered_fn;
	m->userdata = userdata;
	if ((r = loop_wake_new(l, on_wake, m, &m->wake)) < 0 ||
	    (r = loop_timer_new(l, on_poll, m, &m->poll_timer)) < 0 ||
	    (r = loop_timer_new(l, on_poll, m, &m->event_poll_timer)) < 0 ||
	    (r = loop_timer_new(l, on_recovery, m, &m->recovery_timer)) < 0 ||
	    (r = loop_timer_new(l, on_reinit_timer, m, &m->reinit_timer)) < 0 ||
	    (r = loop_timer_new(l, on_hang, m, &m->hang_timer)) < 0 ||
	    (r = gpu_monitor_set_opts(m, o)) < 0 ||
	    (r = gpu_worker_new(backend, m->wake, &m->w)) < 0)
		goto fail;
	gpu_worker_set_slice(m->w, m->o.event_slice);
	if (m->o.disable_all)
		log_info("gpu health checks off", "disable_all=yes");
	*ret = m;
	return 0;
fail:
	(void)gpu_monitor_free(m);
	return r;
}

void gpu_monitor_discover(struct gpu_monitor *m, bool fresh)
{
	m->want_discover = true;
	m->want_fresh = m->want_fresh || fresh;
	kick(m);
}

int gpu_monitor_on_sampled(struct gpu_monitor *m, gpu_sampled_fn *fn, void *userdata)
{
	int free_slot = -1;

	for (unsigned i = 0; i < GPU_MONITOR_SAMPLED_MAX; i++) {
		if (m->sampled[i].fn && m->sampled[i].userdata == userdata) {
			m->sampled[i].fn = fn; /* replaced, or removed with NULL */
			return 0;
		}
		if (!m->sampled[i].fn && free_slot < 0)
			free_slot = (int)i;
	}
	if (!fn)
		return 0;
	if (free_slot < 0)
		return -ENOSPC;
	m->sampled[free_slot].fn = fn;
	m->sampled[free_slot].userdata = userdata;
	return 0;
}

bool gpu_monitor_sample(struct gpu_monitor *m)
{
	if (!m->n_gpus || m->reinit_pending || !askable_mask(m))
		return false;
	m->want_sample = true;
	kick(m);
	return true;
}

bool gpu_monitor_hung(const struct gpu_monitor *m)
{
	return m->inflight_hung || (m->n_gpus && !askable_mask(m));
}

unsigned gpu_monitor_hung_calls(const struct gpu_monitor *m)
{
	return m->n_stuck + m->inflight_hung;
}

const struct gpu_monitor_gpu_stats *gpu_monitor_gpu_stats(const struct gpu_monitor *m, unsigned gpu)
{
	return m && gpu < m->n_gpus ? &m->gpus[gpu].st : NULL;
}

enum gpu_health gpu_monitor_health(const struct gpu_monitor *m, unsigned gpu)
{
	if (!m || gpu >= m->n_gpus)
		return GPU_UNHEALTHY;
	return m->gpus[gpu].health;
}

enum gpu_health gpu_monitor_health_by_uuid(const struct gpu_monitor *m, const char *uuid)
{
	int gpu = m ? gpu_by_uuid(m, uuid) : -1;

	return gpu < 0 ? GPU_UNHEALTHY : m->gpus[gpu].health;
}

const char *gpu_monitor_reason(const struct gpu_monitor *m, unsigned gpu)
{
	if (!m || gpu >= m->n_gpus)
		return "unknown gpu";
	return m->gpus[gpu].health == GPU_HEALTHY ? "" : m->gpus[gpu].reason;
}

void gpu_monitor_get_stats(const struct gpu_monitor *m, struct gpu_monitor_stats *ret)
{
	*ret = m->stats;
	ret->wait_errors = gpu_worker_wait_errors(m->w);
}

struct gpu_monitor *gpu_monitor_free(struct gpu_monitor *m)
{
	if (!m)
		return NULL;
	gpu_worker_stop(m->w);
	m->inflight = NULL; /* freed by the stop, or the busy worker's to free */
	(void)loop_timer_free(m->hang_timer);
	(void)loop_timer_free(m->reinit_timer);
	(void)loop_timer_free(m->recovery_timer);
	(void)loop_timer_free(m->event_poll_timer);
	(void)loop_timer_free(m->poll_timer);
	(void)loop_wake_free(m->wake);
	free(m->ignored);
	free(m->gpus);
	free(m);
	return NULL;
}

unsigned gpu_monitor_live_threads(void)
{
	return gpu_worker_live_threads();
}
