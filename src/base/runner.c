/*
 * Jobs on threads that may never come back (runner.h). The runner's mutex orders the two
 * things that decide who frees it: the job returning (the thread) and runner_release() (the
 * caller). Whichever comes second does the freeing: the caller by joining (the job is done,
 * the thread about to exit), the thread by itself (it was left behind, detached).
 */
#include "runner.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct runner {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: now_usec()'s */
	pthread_t t;
	runner_fn *fn, *drop;
	void *arg;
	bool returned; /* under mu: the job returned */
	bool released; /* under mu: the caller let go; the thread frees the runner */
};

static atomic_uint live;

unsigned runner_live(void)
{
	return atomic_load(&live);
}

static void runner_destroy(struct runner *r)
{
	(void)pthread_cond_destroy(&r->cond);
	(void)pthread_mutex_destroy(&r->mu);
	free(r);
}

static void *runner_main(void *userdata)
{
	struct runner *r = userdata;
	bool left;

	r->fn(r->arg);
	(void)pthread_mutex_lock(&r->mu);
	r->returned = true;
	left = r->released;
	(void)pthread_cond_broadcast(&r->cond);
	(void)pthread_mutex_unlock(&r->mu);
	/* Held: the caller joins us and frees @r; not a byte of it may be touched from here. */
	if (left) {
		if (r->drop)
			r->drop(r->arg);
		runner_destroy(r);
	}
	atomic_fetch_sub(&live, 1);
	return NULL;
}

int runner_start(runner_fn *fn, void *arg, runner_fn *drop, struct runner **ret)
{
	struct runner *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return -ENOMEM;
	(void)pthread_mutex_init(&r->mu, NULL);
	cond_init_monotonic(&r->cond);
	r->fn = fn;
	r->drop = drop;
	r->arg = arg;
	atomic_fetch_add(&live, 1);
	e = thread_start(&r->t, runner_main, r);
	if (e < 0) {
		atomic_fetch_sub(&live, 1);
		runner_destroy(r);
		return e;
	}
	*ret = r;
	return 0;
}

bool runner_wait(struct runner *r, usec_t deadline)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline / USEC_PER_SEC),
		.tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000L,
	};
	bool done;

	(void)pthread_mutex_lock(&r->mu);
	while (!r->returned) {
		if (deadline == USEC_INFINITY)
			(void)pthread_cond_wait(&r->cond, &r->mu);
		else if (pthread_cond_timedwait(&r->cond, &r->mu, &ts) == ETIMEDOUT)
			break;
	}
	done = r->returned;
	(void)pthread_mutex_unlock(&r->mu);
	return done;
}

bool runner_release(struct runner *r)
{
	pthread_t t;
	bool returned;

	(void)pthread_mutex_lock(&r->mu);
	returned = r->returned;
	r->released = !returned;
	t = r->t; /* a left-behind thread may free @r as soon as we unlock */
	(void)pthread_mutex_unlock(&r->mu);
	if (!returned) {
		(void)pthread_detach(t);
		return true;
	}
	(void)pthread_join(t, NULL);
	runner_destroy(r);
	return false;
}
