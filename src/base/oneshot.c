/*
 * One-shot job threads (oneshot.h). The mutex orders the three things that touch the shared
 * state: the thread marking the job done and signalling the wake, the loop side asking
 * oneshot_done(), and each side's unref. The signal is sent while the mutex is held, so that
 * the loop side's unref (which clears the wake under the mutex) is either before it (no
 * signal) or after it (the wake, still alive then, signalled).
 */
#include "oneshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "loop.h"

struct oneshot {
	pthread_mutex_t mu;
	unsigned refs;		/* under mu: the thread and the loop side */
	struct loop_wake *wake; /* under mu: NULL once the loop side let go */
	bool done;		/* under mu: @fn returned */
	oneshot_fn *fn;
	oneshot_free_fn *free_fn;
	void *userdata;
};

static void oneshot_put(struct oneshot *o, bool forget_wake)
{
	bool last;

	(void)pthread_mutex_lock(&o->mu);
	if (forget_wake)
		o->wake = NULL;
	last = --o->refs == 0;
	(void)pthread_mutex_unlock(&o->mu);
	if (!last)
		return;
	(void)pthread_mutex_destroy(&o->mu);
	if (o->free_fn)
		o->free_fn(o->userdata);
	free(o);
}

static void *oneshot_main(void *userdata)
{
	struct oneshot *o = userdata;

	o->fn(o->userdata);
	(void)pthread_mutex_lock(&o->mu);
	o->done = true;
	if (o->wake)
		loop_wake_signal(o->wake);
	(void)pthread_mutex_unlock(&o->mu);
	oneshot_put(o, false);
	return NULL;
}

int oneshot_start(struct loop_wake *wake, oneshot_fn *fn, oneshot_free_fn *free_fn, void *userdata,
		  struct oneshot **ret)
{
	struct oneshot *o = calloc(1, sizeof(*o));
	int r;

	if (!o)
		return -ENOMEM;
	(void)pthread_mutex_init(&o->mu, NULL);
	o->refs = 2;
	o->wake = wake;
	o->fn = fn;
	o->free_fn = free_fn;
	o->userdata = userdata;
	r = thread_start(NULL, oneshot_main, o);
	if (r < 0) {
		(void)pthread_mutex_destroy(&o->mu);
		free(o);
		return r;
	}
	/* The thread may have returned already: it still cannot free @o, which we hold. */
	*ret = o;
	return 0;
}

bool oneshot_done(struct oneshot *o)
{
	bool done;

	(void)pthread_mutex_lock(&o->mu);
	done = o->done;
	(void)pthread_mutex_unlock(&o->mu);
	return done;
}

struct oneshot *oneshot_unref(struct oneshot *o)
{
	if (o)
		oneshot_put(o, true);
	return NULL;
}
