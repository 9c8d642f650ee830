/*
 * The GPU monitor's threads (gpu-worker.h): a worker that makes every backend call but the
 * event wait, one job at a time, and an event thread that waits in the backend's event set.
 *
 * Ownership. What the threads touch lives in struct gpu_worker under one mutex, with a
 * reference per running thread and one for the loop side (dropped by gpu_worker_stop()): the
 * last one out frees it and closes the event set and the backend, so neither is closed while
 * a thread may still be inside it. A job belongs to the worker from gpu_worker_submit() until
 * gpu_worker_collect() hands it back; one that finishes after the stop is freed by the worker
 * itself. A worker thread left behind in a hung call (gpu_worker_abandon()) owns its job from
 * then on: it hands it back through gpu_worker_take_late() when the call returns, or frees it
 * after a stop. Each thread owns its struct gpu_thread and frees it when it exits. The threads
 * run through runner.h: one left behind (abandoned, or inside the backend at the stop) is
 * released there, never joined, and counts in runner_live() until it comes back.
 */

#define LOG_MODULE "gpu"

#include "gpu-worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "gpu-open.h"
#include "log.h"
#include "loop.h"
#include "runner.h"
#include "util.h"

#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (10 * USEC_PER_SEC)

struct gpu_job *gpu_job_free(struct gpu_job *j)
{
	if (!j)
		return NULL;
	free(j->err);
	gpu_info_release(&j->info);
	free(j->distance);
	free(j->samples);
	free(j);
	return NULL;
}

/* Frees the jobs of a list linked by next. Returns NULL. */
static struct gpu_job *job_list_free(struct gpu_job *j)
{
	while (j) {
		struct gpu_job *next = j->next;

		gpu_job_free(j);
		j = next;
	}
	return NULL;
}

struct gpu_worker;

/* One worker thread: the current one, or one left behind in a hung call. */
struct gpu_thread {
	struct gpu_worker *s;
	struct runner *run;	    /* released when left behind, or at the stop */
	_Atomic(const char *) call; /* the backend function it called last (its call slot) */
	/* under s->mu */
	bool busy;	/* running a job */
	bool abandoned; /* left in a hung call: ends its job at the next GPU, then exits */
	int gpu;	/* the GPU its job is at (-1: the job as a whole) */
	usec_t since;	/* when it got there */
};

struct gpu_worker {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast on every change */
	unsigned refs;	     /* the loop side and each running thread */
	bool stop;
	struct loop_wake *wake;		 /* NULL once the loop side is gone */
	struct gpu_backend_opts backend; /* our copy: we may outlive the caller's strings */
	struct gpu_backend *b;		 /* set by the worker; closed by the last reference */
	usec_t slice;

	/* worker */
	struct gpu_thread *cur; /* the thread that takes jobs; NULL once it left at a stop */
	unsigned n_stuck;	/* threads left behind, still in their call */
	struct gpu_job *job;	/* submitted, not picked up yet */
	struct gpu_job *done;	/* finished, not collected yet */
	struct gpu_job *late;	/* jobs of threads left behind whose call returned */
	/* GPUs the event set was opened for (the current worker only) */
	char (*ev_uuids)[GPU_UUID_MAX];
	unsigned ev_n;
	bool ev_open;

	/* event thread */
	struct runner *events;
	bool ev_started;
	bool ev_run;	 /* wait on the event set */
	bool ev_parked;	 /* out of the backend, waiting for ev_run */
	bool ev_in_wait; /* inside ops->event_wait */
	struct gpu_event q[GPU_WORKER_QUEUE];
	unsigned q_head, q_len;
	uint64_t wait_errors;
	int wait_error;
	bool wait_failing;
};

/* The monitors' threads are the process's only runner threads (the doctor, which has its own,
   never runs a monitor): runner_live() counts them, a thread left in the backend included. */
unsigned gpu_worker_live_threads(void)
{
	return runner_live();
}

static void wake_loop(struct gpu_worker *s)
{
	if (s->wake)
		loop_wake_signal(s->wake);
}

static void shared_unref(struct gpu_worker *s)
{
	bool last;

	(void)pthread_mutex_lock(&s->mu);
	last = --s->refs == 0;
	(void)pthread_mutex_unlock(&s->mu);
	if (!last)
		return;
	if (s->b && s->ev_open)
		s->b->ops->events_close(s->b);
	gpu_backend_close(s->b);
	gpu_job_free(s->job);
	gpu_job_free(s->done);
	s->late = job_list_free(s->late);
	free(s->ev_uuids);
	gpu_backend_opts_release(&s->backend);
	(void)pthread_cond_destroy(&s->cond);
	(void)pthread_mutex_destroy(&s->mu);
	free(s);
}

static void timed_wait(struct gpu_worker *s, usec_t until)
{
	struct timespec ts = {
		.tv_sec = (time_t)(until / USEC_PER_SEC),
		.tv_nsec = (long)(until % USEC_PER_SEC) * 1000L,
	};

	(void)pthread_cond_timedwait(&s->cond, &s->mu, &ts);
}

/* --- the event thread --- */

static void event_thread(void *userdata)
{
	struct gpu_worker *s = userdata;
	struct backoff backoff = BACKOFF_INIT(BACKOFF_MIN, 2, BACKOFF_MAX);
	usec_t started, slice;

	(void)pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct gpu_event ev;
		int r;

		if (!s->ev_run) {
			if (!s->ev_parked) {
				s->ev_parked = true;
				(void)pthread_cond_broadcast(&s->cond);
			}
			(void)pthread_cond_wait(&s->cond, &s->mu);
			continue;
		}
		s->ev_parked = false;
		if (s->q_len == GPU_WORKER_QUEUE) {
			/* The loop has not caught up: wait for room rather than drop events. */
			(void)pthread_cond_wait(&s->cond, &s->mu);
			continue;
		}
		s->ev_in_wait = true;
		/* Read under the lock (a SIGHUP may change the slice). After failures, short
		   waits: a wait that works again is seen soon. */
		slice = s->wait_failing ? MIN(s->slice, USEC_PER_SEC) : s->slice;
		(void)pthread_mutex_unlock(&s->mu);
		memset(&ev, 0, sizeof(ev));
		started = now_usec();
		r = s->b->ops->event_wait(s->b, slice, &ev);
		(void)pthread_mutex_lock(&s->mu);
		s->ev_in_wait = false;
		if (s->stop)
			break;
		/* A wait that blocked a while is no spin: what it brings starts a fresh back-off. */
		if (now_usec() - started >= BACKOFF_MIN)
			backoff_reset(&backoff);
		if (r > 0) {
			s->q[(s->q_head + s->q_len) % GPU_WORKER_QUEUE] = ev;
			s->q_len++;
			wake_loop(s);
			if (ev.kind == GPU_EVENT_DRIVER_CHANGED) {
				/* The worker re-initialises the backend: keep out of it meanwhile. */
				s->ev_run = false;
				backoff_reset(&backoff);
				continue;
			}
		} else if (r < 0) {
			s->wait_errors++;
			s->wait_error = r;
		}
		if (r < 0 || (r > 0 && ev.kind == GPU_EVENT_LOST && ev.gpu < 0)) {
			usec_t deadline;

			/* A wait that fails (or keeps reporting a lost GPU) must not spin. */
			if (r < 0 && !s->wait_failing) {
				s->wait_failing = true;
				wake_loop(s);
			}
			deadline = now_usec() + backoff_next(&backoff);
			while (!s->stop && s->ev_run && now_usec() < deadline)
				timed_wait(s, deadline);
			continue;
		}
		backoff_reset(&backoff);
		if (s->wait_failing) {
			s->wait_failing = false;
			wake_loop(s);
		}
	}
	s->ev_parked = true;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->mu);
	shared_unref(s);
}

/* Starts @fn(@arg) on a runner (runner_start()), holding a reference for it. With s->mu held:
   the thread starts once the caller lets go of it. */
static int thread_start_locked(struct gpu_worker *s, struct runner **ret, runner_fn *fn, void *arg)
{
	int r;

	s->refs++;
	r = runner_start(fn, arg, NULL, ret);
	if (r < 0)
		s->refs--;
	return r;
}

/* Starts the event thread, unless the monitor stops. Worker thread. */
static int events_start(struct gpu_worker *s)
{
	int r = -ECANCELED;

	(void)pthread_mutex_lock(&s->mu);
	if (!s->stop)
		r = thread_start_locked(s, &s->events, event_thread, s);
	if (r == 0)
		s->ev_started = true;
	(void)pthread_mutex_unlock(&s->mu);
	return r;
}

/* --- the worker (every backend call but the event wait) --- */

/*
 * Gets the event thread out of the backend. Returns false when the monitor stops while the
 * thread is still inside its wait (it will not enter another one). Worker thread.
 */
static bool events_park(struct gpu_worker *s)
{
	bool out;

	/* A wait that never ends holds us here: a hang report names it. */
	if (s->b && s->b->ops->event_wait_call && gpu_backend_call_slot)
		atomic_store_explicit(gpu_backend_call_slot, s->b->ops->event_wait_call,
				      memory_order_relaxed);
	(void)pthread_mutex_lock(&s->mu);
	s->ev_run = false;
	(void)pthread_cond_broadcast(&s->cond);
	while (s->ev_started && !s->ev_parked && !s->stop)
		(void)pthread_cond_wait(&s->cond, &s->mu);
	out = !s->ev_started || s->ev_parked || !s->ev_in_wait;
	(void)pthread_mutex_unlock(&s->mu);
	return out;
}

/*
 * Closes the event set once the event thread is out of it. Returns 0, or -ECANCELED when the
 * monitor stops while the event thread still waits in the set: the set then stays open for
 * the last reference to close (freeing it under the waiting thread is a use after free in the
 * driver), and the caller must make no more backend calls that could close it (reinit).
 */
static int events_close(struct gpu_worker *s)
{
	if (!events_park(s))
		return -ECANCELED;
	if (s->ev_open)
		s->b->ops->events_close(s->b);
	s->ev_open = false;
	s->ev_n = 0;
	return 0;
}

static bool events_match(const struct gpu_worker *s, const struct gpu_info *info)
{
	unsigned n = 0;

	for (unsigned i = 0; i < info->n_devices; i++) {
		if (!info->devices[i].events_supported)
			continue;
		if (n >= s->ev_n || !streq(s->ev_uuids[n], info->devices[i].uuid))
			return false;
		n++;
	}
	return n == s->ev_n;
}

/* Opens the event set for @info's GPUs (if not open for exactly them) and runs the thread. */
static int events_open(struct gpu_worker *s, const struct gpu_info *info)
{
	char(*uuids)[GPU_UUID_MAX];
	unsigned n = 0;
	int r;

	if (s->ev_open && events_match(s, info))
		return 0;
	/*
	 * A set that is open stays open: the backend adds the new GPUs to it beside the wait in
	 * progress (a GPU that went away stays registered; its events map to no GPU). Parking
	 * the event thread would wait for its slice to end.
	 */
	uuids = calloc(info->n_devices + 1, sizeof(*uuids));
	if (!uuids)
		return -ENOMEM;
	for (unsigned i = 0; i < info->n_devices; i++)
		if (info->devices[i].events_supported)
			memcpy(uuids[n++], info->devices[i].uuid, GPU_UUID_MAX);
	if (n == 0) {
		free(uuids);
		return -EOPNOTSUPP;
	}
	r = s->b->ops->events_open(s->b);
	if (r < 0) {
		free(uuids);
		if (s->ev_open)
			(void)events_close(s);
		return r;
	}
	s->ev_open = true;
	free(s->ev_uuids);
	s->ev_uuids = uuids;
	s->ev_n = n;
	if (!s->ev_started) {
		r = events_start(s);
		if (r < 0) {
			(void)events_close(s);
			return r;
		}
	}
	(void)pthread_mutex_lock(&s->mu);
	s->ev_run = true;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->mu);
	return 0;
}

static void run_discover(struct gpu_worker *s, struct gpu_job *j)
{
	struct gpu_backend *b = s->b;
	unsigned n;

	if (!b) {
		j->r = gpu_backend_open(&s->backend, &b, &j->err);
		if (j->r < 0)
			return;
		(void)pthread_mutex_lock(&s->mu);
		s->b = b;
		(void)pthread_mutex_unlock(&s->mu);
	} else if (j->fresh && b->ops->reinit) {
		j->r = events_close(s);
		if (j->r < 0)
			return;
		j->r = b->ops->reinit(b, &j->err);
		if (j->r < 0)
			return;
		free(j->err);
		j->err = NULL;
	}
	j->r = b->ops->discover(b, &j->info, &j->err);
	if (j->r < 0)
		return;
	n = j->info.n_devices;
	/* Topology is read once; an error falls back to a plain choice, never a failed admission. */
	if (n > 1 && b->ops->distance) {
		j->distance = calloc((size_t)n * n, sizeof(int));
		for (unsigned a = 0; j->distance && a < n; a++)
			for (unsigned c = 0; c < n; c++) {
				int v = a == c ? 0 : b->ops->distance(b, a, c);

				if (v < 0) {
					j->distance = mfree(j->distance);
					break;
				}
				j->distance[a * n + c] = v;
			}
	}
	j->events_r = j->want_events ? events_open(s, &j->info) : -EOPNOTSUPP;
	if (!j->want_events)
		(void)events_close(s);
}

static void run_reinit(struct gpu_worker *s, struct gpu_job *j)
{
	struct gpu_backend *b = s->b;
	struct gpu_info cur = { 0 };

	j->events_r = -EOPNOTSUPP;
	if (!b || !b->ops->reinit) {
		j->r = -EOPNOTSUPP;
		return;
	}
	j->r = events_close(s);
	if (j->r < 0)
		return;
	j->r = b->ops->reinit(b, &j->err);
	if (j->r < 0)
		return;
	for (unsigned i = 0; i < GPU_WORKER_MAX_GPUS && (j->mask >> i); i++) {
		if (!((j->mask >> i) & 1))
			continue;
		j->probe_r[i] = b->ops->probe(b, i);
		if (j->probe_r[i] == -EXDEV) {
			j->r = -EXDEV;
			return;
		}
	}
	if (!j->want_events)
		return;
	/* The event set is opened for what the backend knows: its last discovery. */
	cur.n_devices = j->info.n_devices;
	cur.devices = j->info.devices;
	j->events_r = events_open(s, &cur);
}

/*
 * Moves @t's job on to @gpu (-1: the job as a whole), for the hang timer. Returns false when
 * @t was left behind in a hung call (its remaining GPUs went to a new worker) or the monitor
 * stops: the job ends here. Worker thread.
 */
static bool step(struct gpu_thread *t, int gpu)
{
	struct gpu_worker *s = t->s;
	bool go;

	(void)pthread_mutex_lock(&s->mu);
	go = !t->abandoned && !s->stop;
	if (go) {
		t->gpu = gpu;
		t->since = now_usec();
	}
	(void)pthread_mutex_unlock(&s->mu);
	return go;
}

static void run_probe(struct gpu_thread *t, struct gpu_job *j)
{
	struct gpu_worker *s = t->s;

	for (unsigned i = 0; i < GPU_WORKER_MAX_GPUS && (j->mask >> i); i++) {
		if (!((j->mask >> i) & 1))
			continue;
		if (!step(t, (int)i))
			return;
		j->probe_r[i] = s->b ? s->b->ops->probe(s->b, i) : -ENODEV;
	}
}

static void run_sample(struct gpu_thread *t, struct gpu_job *j)
{
	struct gpu_worker *s = t->s;

	for (unsigned i = 0; i < GPU_WORKER_MAX_GPUS && (j->mask >> i); i++) {
		if (!((j->mask >> i) & 1))
			continue;
		gpu_sample_init(&j->samples[i]);
		if (!step(t, (int)i))
			return;
		if (!s->b)
			j->sample_r[i] = -ENODEV;
		else if (!s->b->ops->sample)
			j->sample_r[i] = -EOPNOTSUPP;
		else
			j->sample_r[i] = s->b->ops->sample(s->b, i, &j->samples[i]);
	}
}

static void run(struct gpu_thread *t, struct gpu_job *j)
{
	switch (j->kind) {
	case GPU_JOB_DISCOVER:
		run_discover(t->s, j);
		break;
	case GPU_JOB_PROBE:
		run_probe(t, j);
		break;
	case GPU_JOB_REINIT:
		run_reinit(t->s, j);
		break;
	case GPU_JOB_SAMPLE:
		run_sample(t, j);
		break;
	}
}

static void worker_thread(void *userdata)
{
	struct gpu_thread *t = userdata;
	struct gpu_worker *s = t->s;
	struct gpu_job *j = NULL;

	/* Every backend call of this thread is named in its own slot (the loop reads it). */
	gpu_backend_call_slot = &t->call;
	(void)pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		j = s->job;
		if (!j || s->cur != t) {
			j = NULL;
			(void)pthread_cond_wait(&s->cond, &s->mu);
			continue;
		}
		s->job = NULL;
		t->busy = true;
		t->gpu = -1;
		t->since = now_usec();
		(void)pthread_mutex_unlock(&s->mu);
		run(t, j);
		(void)pthread_mutex_lock(&s->mu);
		t->busy = false;
		if (t->abandoned) {
			/* Back from the hung call: the loop judges its GPU by this job, then we go. */
			s->n_stuck--;
			if (!s->stop) {
				struct gpu_job **p = &s->late;

				while (*p)
					p = &(*p)->next;
				*p = j;
				j = NULL;
				wake_loop(s);
			}
			break;
		}
		if (s->stop)
			break;
		s->done = j;
		j = NULL;
		wake_loop(s);
	}
	if (s->cur == t)
		s->cur = NULL;
	(void)pthread_mutex_unlock(&s->mu);
	gpu_backend_call_slot = NULL;
	gpu_job_free(j);
	free(t);
	shared_unref(s);
}

/* A new current worker thread. With s->mu held. */
static int worker_start_locked(struct gpu_worker *s)
{
	struct gpu_thread *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	t->s = s;
	t->gpu = -1;
	r = thread_start_locked(s, &t->run, worker_thread, t);
	if (r < 0) {
		free(t);
		return r;
	}
	s->cur = t;
	return 0;
}

/* --- the loop side's handle --- */

int gpu_worker_new(const struct gpu_backend_opts *backend, struct loop_wake *wake,
		   struct gpu_worker **ret)
{
	struct gpu_worker *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	(void)pthread_mutex_init(&s->mu, NULL);
	cond_init_monotonic(&s->cond);
	s->refs = 1;
	if (gpu_backend_opts_copy(&s->backend, backend) < 0) {
		shared_unref(s);
		return -ENOMEM;
	}
	s->ev_parked = true;
	s->wake = wake;
	(void)pthread_mutex_lock(&s->mu);
	r = worker_start_locked(s);
	(void)pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		shared_unref(s);
		return r;
	}
	*ret = s;
	return 0;
}

void gpu_worker_set_slice(struct gpu_worker *s, usec_t slice)
{
	(void)pthread_mutex_lock(&s->mu);
	s->slice = slice;
	(void)pthread_mutex_unlock(&s->mu);
}

void gpu_worker_submit(struct gpu_worker *s, struct gpu_job *j)
{
	(void)pthread_mutex_lock(&s->mu);
	s->job = j;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->mu);
}

struct gpu_job *gpu_worker_collect(struct gpu_worker *s, struct gpu_event *batch, unsigned *ret_n,
				   bool *ret_failing, int *ret_err)
{
	struct gpu_job *done;
	unsigned n;

	(void)pthread_mutex_lock(&s->mu);
	n = s->q_len;
	for (unsigned i = 0; i < n; i++)
		batch[i] = s->q[(s->q_head + i) % GPU_WORKER_QUEUE];
	s->q_head = (s->q_head + n) % GPU_WORKER_QUEUE;
	s->q_len = 0;
	(void)pthread_cond_broadcast(&s->cond);
	*ret_failing = s->wait_failing;
	*ret_err = s->wait_error;
	done = s->done;
	s->done = NULL;
	(void)pthread_mutex_unlock(&s->mu);
	*ret_n = n;
	return done;
}

struct gpu_job *gpu_worker_take_late(struct gpu_worker *s)
{
	struct gpu_job *j;

	(void)pthread_mutex_lock(&s->mu);
	j = s->late;
	if (j) {
		s->late = j->next;
		j->next = NULL;
	}
	(void)pthread_mutex_unlock(&s->mu);
	return j;
}

bool gpu_worker_progress(struct gpu_worker *s, struct gpu_worker_progress *ret)
{
	const struct gpu_thread *t;
	bool busy;

	(void)pthread_mutex_lock(&s->mu);
	t = s->cur;
	busy = t && t->busy;
	if (busy) {
		ret->since = t->since;
		ret->gpu = t->gpu;
		ret->call = atomic_load_explicit(&t->call, memory_order_relaxed);
	}
	(void)pthread_mutex_unlock(&s->mu);
	return busy;
}

int gpu_worker_abandon(struct gpu_worker *s, const struct gpu_worker_progress *at)
{
	struct gpu_thread *old;
	int r;

	(void)pthread_mutex_lock(&s->mu);
	old = s->cur;
	if (!old || !old->busy || old->gpu != at->gpu || old->since != at->since) {
		r = -ESTALE;
		goto out;
	}
	if (old->gpu < 0) {
		r = -EINVAL;
		goto out;
	}
	/* The threads there would be: those left behind, this one, and a new worker. */
	if (s->n_stuck + 2 > GPU_WORKER_MAX_THREADS) {
		r = -EBUSY;
		goto out;
	}
	r = worker_start_locked(s);
	if (r < 0)
		goto out;
	old->abandoned = true;
	s->n_stuck++;
	(void)runner_release(old->run); /* busy in its call under s->mu: left behind, not joined */
out:
	(void)pthread_mutex_unlock(&s->mu);
	return r;
}

uint64_t gpu_worker_wait_errors(struct gpu_worker *s)
{
	uint64_t n;

	(void)pthread_mutex_lock(&s->mu);
	n = s->wait_errors;
	(void)pthread_mutex_unlock(&s->mu);
	return n;
}

void gpu_worker_stop(struct gpu_worker *s)
{
	bool join_worker = false, join_events, has_worker, has_events;
	struct runner *worker = NULL, *events;

	if (!s)
		return;
	(void)pthread_mutex_lock(&s->mu);
	s->stop = true;
	s->wake = NULL;
	s->done = gpu_job_free(s->done);
	s->job = gpu_job_free(s->job);
	s->late = job_list_free(s->late);
	/*
	 * A thread inside the backend is left behind: it may never come back (a hung driver).
	 * Threads left behind before are detached already.
	 */
	has_worker = s->cur != NULL;
	if (has_worker) {
		worker = s->cur->run;
		join_worker = !s->cur->busy;
	}
	/* After the stop no event thread starts: read under the lock, these stay true. */
	has_events = s->ev_started;
	events = s->events;
	join_events = has_events && !s->ev_in_wait;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->mu);
	/* Out of the backend: it ends now; wait for it. Inside: release it without waiting. */
	if (has_worker) {
		if (join_worker)
			(void)runner_wait(worker, USEC_INFINITY);
		(void)runner_release(worker);
	}
	if (has_events) {
		if (join_events)
			(void)runner_wait(events, USEC_INFINITY);
		(void)runner_release(events);
	}
	shared_unref(s);
}
