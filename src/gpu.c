/*
 * The device model's helpers and the health monitor: one thread waits on the backend's event
 * set and queues events; the loop applies them, probes every GPU on a timer, re-initialises
 * the backend after a driver change and lets unhealthy GPUs recover. This is the logging
 * layer for GPU health (module=gpu).
 */

#define LOG_MODULE "gpu"

#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "util.h"

#define DEFAULT_POLL_INTERVAL (5 * USEC_PER_SEC)
#define DEFAULT_WAIT_TIMEOUT  (250 * USEC_PER_MSEC)
#define BACKOFF_MIN	      (100 * USEC_PER_MSEC)
#define BACKOFF_MAX	      (10 * USEC_PER_SEC)
#define QUEUE_CAP	      256

void gpu_info_release(struct gpu_info *info)
{
	if (!info)
		return;
	for (unsigned i = 0; i < info->n_skipped; i++)
		free(info->skipped ? info->skipped[i] : NULL);
	free(info->skipped);
	free(info->devices);
	memset(info, 0, sizeof(*info));
}

bool gpu_xid_is_application(uint64_t xid)
{
	static const uint64_t app[] = { 13, 31, 43, 45, 68, 109 };

	for (size_t i = 0; i < ELEMENTSOF(app); i++)
		if (app[i] == xid)
			return true;
	return false;
}

int gpu_parse_disable_healthchecks(const char *s, struct gpu_monitor_opts *o, uint64_t **ret_xids)
{
	bool all = false, xids = false;
	uint64_t *list = NULL;
	unsigned n = o->n_ignored_xids;
	char *copy = NULL, *save = NULL;
	int r = 0;

	*ret_xids = NULL;
	if (!s || !*s)
		return 0;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	for (char *p = copy; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *end = item + strlen(item);
		uint64_t xid;
		uint64_t *grown;

		while (*item == ' ' || *item == '\t')
			item++;
		while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = 0;
		if (!*item)
			continue;
		if (streq(item, "all")) {
			all = true;
			continue;
		}
		if (streq(item, "xids")) {
			xids = true;
			continue;
		}
		if (safe_atou64(item, &xid) < 0) {
			r = -EINVAL;
			goto out;
		}
		if (!list) {
			list = calloc(n ? n : 1, sizeof(*list));
			if (!list) {
				r = -ENOMEM;
				goto out;
			}
			if (n)
				memcpy(list, o->ignored_xids, n * sizeof(*list));
		}
		grown = reallocarray(list, n + 1, sizeof(*list));
		if (!grown) {
			r = -ENOMEM;
			goto out;
		}
		list = grown;
		list[n++] = xid;
	}
	o->disable_all = o->disable_all || all;
	o->disable_xids = o->disable_xids || xids;
	if (list) {
		o->ignored_xids = list;
		o->n_ignored_xids = n;
		*ret_xids = list;
		list = NULL;
	}
out:
	free(list);
	free(copy);
	return r;
}

/* --- the monitor --- */

struct mon_gpu {
	char uuid[GPU_UUID_MAX];
	bool events; /* the backend reports this GPU's events */
	enum gpu_health health;
	bool fault; /* XID, double-bit ECC, lost or failed probe: needs recovery */
	bool lost;
	bool driver; /* waiting for a re-initialisation */
	usec_t last_fault;
	uint64_t ecc_single;
	char reason[160];
};

struct gpu_monitor {
	struct loop *loop;
	struct gpu_backend *b;
	gpu_health_fn *fn;
	void *userdata;
	usec_t poll_interval, recovery_quiet, wait_timeout;
	bool disable_all, disable_xids;
	uint64_t *ignored;
	unsigned n_ignored;
	unsigned n_gpus;
	struct mon_gpu *gpus;
	struct gpu_monitor_stats stats; /* loop thread; wait_errors comes from the thread's count */
	struct loop_wake *wake;
	struct loop_timer *poll_timer, *recovery_timer, *reinit_timer;
	bool want_events; /* some GPU reports events */
	bool events_open; /* the backend's event set is open */
	bool reinit_pending;
	usec_t reinit_backoff;
	bool reinit_failed_logged;
	bool wait_failing_seen;
	struct gpu_event batch[QUEUE_CAP];

	/* Shared with the event thread, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool thread_started;
	bool stop;
	bool pause_req, paused;
	struct gpu_event q[QUEUE_CAP];
	unsigned q_head, q_len;
	uint64_t wait_errors;
	int wait_error;
	bool wait_failing;
};

static const char *gpu_uuid(const struct gpu_monitor *m, unsigned gpu)
{
	return gpu < m->n_gpus ? m->gpus[gpu].uuid : "?";
}

static void timed_wait(struct gpu_monitor *m, usec_t delay)
{
	struct timespec ts;
	usec_t when = now_usec() + delay;

	ts.tv_sec = (time_t)(when / USEC_PER_SEC);
	ts.tv_nsec = (long)(when % USEC_PER_SEC) * 1000L;
	(void)pthread_cond_timedwait(&m->cond, &m->mu, &ts);
}

/* The event thread: waits, queues, backs off on errors, pauses when asked. */
static void *monitor_thread(void *userdata)
{
	struct gpu_monitor *m = userdata;
	usec_t backoff = 0;

	(void)pthread_mutex_lock(&m->mu);
	while (!m->stop) {
		struct gpu_event ev;
		int r;

		if (m->pause_req) {
			if (!m->paused) {
				m->paused = true;
				loop_wake_signal(m->wake);
			}
			(void)pthread_cond_wait(&m->cond, &m->mu);
			continue;
		}
		m->paused = false;
		if (m->q_len == QUEUE_CAP) {
			/* The loop has not caught up: wait for room rather than drop events. */
			(void)pthread_cond_wait(&m->cond, &m->mu);
			continue;
		}
		(void)pthread_mutex_unlock(&m->mu);
		r = m->b->ops->event_wait(m->b, m->wait_timeout, &ev);
		(void)pthread_mutex_lock(&m->mu);
		if (m->stop)
			break;
		if (r > 0) {
			m->q[(m->q_head + m->q_len) % QUEUE_CAP] = ev;
			m->q_len++;
			loop_wake_signal(m->wake);
			if (ev.kind == GPU_EVENT_DRIVER_CHANGED) {
				/* The loop re-initialises the backend; keep out of it meanwhile. */
				m->pause_req = true;
				backoff = 0;
				continue;
			}
		} else if (r < 0) {
			m->wait_errors++;
			m->wait_error = r;
		}
		if (r < 0 || (r > 0 && ev.kind == GPU_EVENT_LOST && ev.gpu < 0)) {
			usec_t deadline;

			/* A wait that fails (or keeps reporting a lost GPU) must not spin. */
			if (r < 0 && !m->wait_failing) {
				m->wait_failing = true;
				loop_wake_signal(m->wake);
			}
			backoff = backoff ? MIN(backoff * 2, BACKOFF_MAX) : BACKOFF_MIN;
			deadline = now_usec() + backoff;
			while (!m->stop && !m->pause_req && now_usec() < deadline)
				timed_wait(m, deadline - now_usec());
			continue;
		}
		backoff = 0;
		if (m->wait_failing) {
			m->wait_failing = false;
			loop_wake_signal(m->wake);
		}
	}
	(void)pthread_mutex_unlock(&m->mu);
	return NULL;
}

static int thread_start(struct gpu_monitor *m)
{
	sigset_t all, old;
	int r;

	if (m->thread_started)
		return 0;
	/* Signals belong to the loop's signalfd, never to this thread. */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&m->thread, NULL, monitor_thread, m);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	m->thread_started = true;
	return 0;
}

static void thread_pause(struct gpu_monitor *m, bool pause)
{
	(void)pthread_mutex_lock(&m->mu);
	m->pause_req = pause;
	(void)pthread_cond_broadcast(&m->cond);
	(void)pthread_mutex_unlock(&m->mu);
}

/* True when the thread is out of the backend: not started, or paused. */
static bool thread_parked(struct gpu_monitor *m)
{
	bool parked;

	(void)pthread_mutex_lock(&m->mu);
	parked = !m->thread_started || m->paused;
	(void)pthread_mutex_unlock(&m->mu);
	return parked;
}

/* --- health bookkeeping (loop thread) --- */

static void update_health(struct gpu_monitor *m, unsigned gpu, const char *why)
{
	struct mon_gpu *g = &m->gpus[gpu];
	enum gpu_health want = g->fault || g->driver ? GPU_UNHEALTHY : GPU_HEALTHY;
	char q[200];

	if (want == g->health)
		return;
	g->health = want;
	if (want == GPU_UNHEALTHY) {
		log_warn("gpu unhealthy", "device=%s gpu=%u reason=%s", g->uuid, gpu,
			 log_quote(q, sizeof(q), why));
	} else {
		m->stats.recoveries++;
		log_info("gpu healthy again", "device=%s gpu=%u reason=%s", g->uuid, gpu,
			 log_quote(q, sizeof(q), why));
	}
	if (m->fn)
		m->fn(m, gpu, want, why, m->userdata);
}

static void arm_recovery(struct gpu_monitor *m, usec_t when)
{
	if (m->recovery_quiet == 0)
		return;
	if (!loop_timer_armed(m->recovery_timer))
		loop_timer_arm_at(m->recovery_timer, when);
}

static void mark_fault(struct gpu_monitor *m, unsigned gpu, const char *reason)
{
	struct mon_gpu *g = &m->gpus[gpu];

	g->fault = true;
	g->last_fault = now_usec();
	(void)snprintf(g->reason, sizeof(g->reason), "%s", reason);
	update_health(m, gpu, g->reason);
	arm_recovery(m, g->last_fault + m->recovery_quiet);
}

void gpu_monitor_mark_unhealthy(struct gpu_monitor *m, unsigned gpu, const char *reason)
{
	if (gpu < m->n_gpus)
		mark_fault(m, gpu, reason);
}

static void start_reinit(struct gpu_monitor *m);

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
		mark_fault(m, gpu, "gpu is lost (fell off the bus)");
		return;
	}
	(void)snprintf(why, sizeof(why), "health probe failed: %s", strerror_r(-r, eb, sizeof(eb)));
	mark_fault(m, gpu, why);
}

static int probe(struct gpu_monitor *m, unsigned gpu)
{
	m->stats.probes++;
	return m->b->ops->probe(m->b, gpu);
}

static bool xid_ignored(const struct gpu_monitor *m, uint64_t xid)
{
	if (m->disable_xids || gpu_xid_is_application(xid))
		return true;
	for (unsigned i = 0; i < m->n_ignored; i++)
		if (m->ignored[i] == xid)
			return true;
	return false;
}

static void apply_event(struct gpu_monitor *m, const struct gpu_event *ev)
{
	unsigned first = 0, last = m->n_gpus;
	char why[96];

	m->stats.events++;
	if (ev->gpu >= 0) {
		if ((unsigned)ev->gpu >= m->n_gpus)
			return;
		first = (unsigned)ev->gpu;
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
		for (unsigned i = first; i < last; i++)
			mark_fault(m, i, why);
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
			mark_fault(m, i, "double-bit ecc error");
		return;
	case GPU_EVENT_LOST:
		if (ev->gpu >= 0) {
			probe_result(m, first, -ENODEV);
			return;
		}
		/* Some GPU is lost: the probes say which. */
		for (unsigned i = 0; i < m->n_gpus && !m->reinit_pending; i++)
			probe_result(m, i, probe(m, i));
		return;
	case GPU_EVENT_DRIVER_CHANGED:
		driver_changed(m, "nvml event wait reports a driver/library mismatch or a reload");
		return;
	case GPU_EVENT_COUNT:
	default:
		return;
	}
}

static void on_wake(struct loop_wake *w, void *userdata)
{
	struct gpu_monitor *m = userdata;
	bool failing, parked;
	unsigned n;
	int err;

	(void)pthread_mutex_lock(&m->mu);
	n = m->q_len;
	for (unsigned i = 0; i < n; i++)
		m->batch[i] = m->q[(m->q_head + i) % QUEUE_CAP];
	m->q_head = (m->q_head + n) % QUEUE_CAP;
	m->q_len = 0;
	(void)pthread_cond_broadcast(&m->cond);
	failing = m->wait_failing;
	err = m->wait_error;
	parked = !m->thread_started || m->paused;
	(void)pthread_mutex_unlock(&m->mu);

	for (unsigned i = 0; i < n; i++)
		apply_event(m, &m->batch[i]);
	if (failing && !m->wait_failing_seen)
		(void)log_warn_errno(
			err, "gpu event wait failing, retrying with back-off, probing meanwhile",
			"gpus=%u", m->n_gpus);
	else if (!failing && m->wait_failing_seen)
		log_info("gpu event wait works again", "gpus=%u", m->n_gpus);
	m->wait_failing_seen = failing;
	if (m->reinit_pending && parked && !loop_timer_armed(m->reinit_timer))
		loop_timer_arm(m->reinit_timer, 0);
}

/* --- re-initialisation --- */

static void start_reinit(struct gpu_monitor *m)
{
	if (m->reinit_pending)
		return;
	m->reinit_pending = true;
	m->reinit_backoff = BACKOFF_MIN;
	m->reinit_failed_logged = false;
	if (m->thread_started)
		thread_pause(m, true);
	/* Otherwise on_wake arms the timer once the thread is out of the backend. */
	if (thread_parked(m))
		loop_timer_arm(m->reinit_timer, 0);
}

static void reinit_retry(struct gpu_monitor *m)
{
	m->stats.reinit_failures++;
	loop_timer_arm(m->reinit_timer, m->reinit_backoff);
	m->reinit_backoff = MIN(m->reinit_backoff * 2, BACKOFF_MAX);
}

static void on_reinit(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;
	char *err = NULL;
	bool again = false;
	int r;

	if (!m->reinit_pending)
		return;
	if (!thread_parked(m)) {
		loop_timer_arm(t, m->wait_timeout);
		return;
	}
	if (m->events_open)
		m->b->ops->events_close(m->b);
	m->events_open = false;
	r = m->b->ops->reinit(m->b, &err);
	if (r < 0) {
		if (!m->reinit_failed_logged) {
			char q[512];

			(void)log_warn_errno(
				r, "nvml re-initialisation failed, retrying with back-off",
				"reason=%s", log_quote(q, sizeof(q), err));
		} else {
			(void)log_debug_errno(
				r, "nvml re-initialisation failed, retrying", "backoff_ms=%llu",
				(unsigned long long)(m->reinit_backoff / USEC_PER_MSEC));
		}
		m->reinit_failed_logged = true;
		free(err);
		reinit_retry(m);
		return;
	}
	free(err);
	for (unsigned i = 0; i < m->n_gpus; i++) {
		r = probe(m, i);
		if (r == -EXDEV) {
			again = true;
			break;
		}
		m->gpus[i].driver = false;
		if (r < 0)
			probe_result(m, i, r);
	}
	if (again) {
		m->stats.probe_failures++;
		reinit_retry(m);
		return;
	}
	m->stats.reinits++;
	m->reinit_pending = false;
	log_info("nvml re-initialised", "gpus=%u", m->n_gpus);
	for (unsigned i = 0; i < m->n_gpus; i++)
		update_health(m, i, "nvml re-initialised and the gpu answers");
	if (m->want_events) {
		r = m->b->ops->events_open(m->b);
		if (r == 0) {
			m->events_open = true;
			if (m->thread_started)
				thread_pause(m, false);
			else if (thread_start(m) < 0)
				log_warn("cannot start the gpu event thread, probing only",
					 "gpus=%u", m->n_gpus);
		} else {
			(void)log_warn_errno(
				r,
				"gpu event registration failed after re-initialisation, probing only",
				"gpus=%u", m->n_gpus);
		}
	}
}

/* --- timers --- */

static void on_poll(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;

	for (unsigned i = 0; i < m->n_gpus && !m->reinit_pending; i++)
		probe_result(m, i, probe(m, i));
	loop_timer_arm(t, m->poll_interval);
}

static void on_recovery(struct loop_timer *t, void *userdata)
{
	struct gpu_monitor *m = userdata;
	usec_t now = now_usec(), next = USEC_INFINITY;

	for (unsigned i = 0; i < m->n_gpus; i++) {
		struct mon_gpu *g = &m->gpus[i];

		if (!g->fault)
			continue;
		if (!m->reinit_pending && now >= g->last_fault + m->recovery_quiet) {
			int r = probe(m, i);

			if (r == 0) {
				g->fault = false;
				g->lost = false;
				update_health(
					m, i,
					"no fault for the recovery quiet period and the gpu answers");
				continue;
			}
			probe_result(m, i, r);
		}
		if (g->fault)
			next = MIN(next, MAX(g->last_fault + m->recovery_quiet, now + BACKOFF_MIN));
	}
	if (next != USEC_INFINITY)
		loop_timer_arm_at(t, next);
}

/* --- lifecycle --- */

int gpu_monitor_new(struct loop *l, struct gpu_backend *b, const struct gpu_info *info,
		    const struct gpu_monitor_opts *o, gpu_health_fn *fn, void *userdata,
		    struct gpu_monitor **ret)
{
	static const struct gpu_monitor_opts defaults = { 0 };
	pthread_condattr_t attr;
	struct gpu_monitor *m;
	int r;

	if (!l || !b || !info || !ret)
		return -EINVAL;
	if (!o)
		o = &defaults;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	(void)pthread_mutex_init(&m->mu, NULL);
	(void)pthread_condattr_init(&attr);
	(void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	(void)pthread_cond_init(&m->cond, &attr);
	(void)pthread_condattr_destroy(&attr);
	m->loop = l;
	m->b = b;
	m->fn = fn;
	m->userdata = userdata;
	m->poll_interval = o->poll_interval ? o->poll_interval : DEFAULT_POLL_INTERVAL;
	m->wait_timeout = o->wait_timeout ? o->wait_timeout : DEFAULT_WAIT_TIMEOUT;
	m->recovery_quiet = o->recovery_quiet;
	m->disable_all = o->disable_all;
	m->disable_xids = o->disable_xids;
	if (o->n_ignored_xids) {
		m->ignored = calloc(o->n_ignored_xids, sizeof(*m->ignored));
		if (!m->ignored) {
			r = -ENOMEM;
			goto fail;
		}
		memcpy(m->ignored, o->ignored_xids, o->n_ignored_xids * sizeof(*m->ignored));
		m->n_ignored = o->n_ignored_xids;
	}
	m->n_gpus = info->n_devices;
	m->gpus = calloc(m->n_gpus ? m->n_gpus : 1, sizeof(*m->gpus));
	if (!m->gpus) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < m->n_gpus; i++) {
		(void)snprintf(m->gpus[i].uuid, sizeof(m->gpus[i].uuid), "%s",
			       info->devices[i].uuid);
		m->gpus[i].events = info->devices[i].events_supported;
		m->want_events = m->want_events || m->gpus[i].events;
	}
	r = loop_wake_new(l, on_wake, m, &m->wake);
	if (r < 0)
		goto fail;
	r = loop_timer_new(l, on_poll, m, &m->poll_timer);
	if (r < 0)
		goto fail;
	r = loop_timer_new(l, on_recovery, m, &m->recovery_timer);
	if (r < 0)
		goto fail;
	r = loop_timer_new(l, on_reinit, m, &m->reinit_timer);
	if (r < 0)
		goto fail;
	if (m->disable_all || m->n_gpus == 0) {
		log_info("gpu health checks off", "gpus=%u disable_all=%s", m->n_gpus,
			 m->disable_all ? "yes" : "no");
		*ret = m;
		return 0;
	}
	if (m->want_events) {
		r = b->ops->events_open(b);
		if (r == 0) {
			m->events_open = true;
			r = thread_start(m);
			if (r < 0)
				goto fail;
		} else if (r == -EOPNOTSUPP) {
			log_debug("no gpu event support, probing only", "gpus=%u", m->n_gpus);
		} else {
			(void)log_warn_errno(r, "gpu event registration failed, probing only",
					     "gpus=%u", m->n_gpus);
		}
	}
	loop_timer_arm(m->poll_timer, m->poll_interval);
	log_debug("gpu monitor started", "gpus=%u events=%s poll_ms=%llu", m->n_gpus,
		  m->events_open ? "yes" : "no",
		  (unsigned long long)(m->poll_interval / USEC_PER_MSEC));
	*ret = m;
	return 0;
fail:
	(void)gpu_monitor_free(m);
	return r;
}

enum gpu_health gpu_monitor_health(const struct gpu_monitor *m, unsigned gpu)
{
	if (!m || gpu >= m->n_gpus)
		return GPU_UNHEALTHY;
	return m->gpus[gpu].health;
}

void gpu_monitor_get_stats(const struct gpu_monitor *m, struct gpu_monitor_stats *ret)
{
	struct gpu_monitor *mm = (struct gpu_monitor *)m;

	*ret = m->stats;
	(void)pthread_mutex_lock(&mm->mu);
	ret->wait_errors = m->wait_errors;
	(void)pthread_mutex_unlock(&mm->mu);
}

struct gpu_monitor *gpu_monitor_free(struct gpu_monitor *m)
{
	if (!m)
		return NULL;
	if (m->thread_started) {
		(void)pthread_mutex_lock(&m->mu);
		m->stop = true;
		(void)pthread_cond_broadcast(&m->cond);
		(void)pthread_mutex_unlock(&m->mu);
		(void)pthread_join(m->thread, NULL);
	}
	if (m->events_open)
		m->b->ops->events_close(m->b);
	(void)loop_timer_free(m->reinit_timer);
	(void)loop_timer_free(m->recovery_timer);
	(void)loop_timer_free(m->poll_timer);
	(void)loop_wake_free(m->wake);
	(void)pthread_cond_destroy(&m->cond);
	(void)pthread_mutex_destroy(&m->mu);
	free(m->ignored);
	free(m->gpus);
	free(m);
	return NULL;
}
