/*
 * oneshot: a job that returns while the loop side still holds it (the wake reaches the loop,
 * what the job wrote is read there, the loop frees it); one the loop side lets go of while it
 * still runs (freed on its own thread once it returns, the wake never signalled); many jobs
 * on one wake, some let go of mid-run; and lets-go racing with jobs that return at once, where
 * each job must be freed exactly once (ThreadSanitizer, ASan and LeakSanitizer watch).
 */

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "loop.h"
#include "oneshot.h"
#include "unit.h"
#include "util.h"

#define MANY 64

/* What outlives the jobs: the loop, its wake, and the test's view of the jobs. */
struct book {
	struct loop *loop;
	struct loop_wake *wake;
	pthread_t loop_thread;
	atomic_int freed, freed_on_loop;
	sem_t freed_sem; /* posted by each free */
	unsigned wakes;	 /* loop thread only */
};

struct job {
	struct book *book;
	struct oneshot *os;
	sem_t go;	  /* the job waits for it (a blocking call, until the test says) */
	bool wait_for_go; /* false: returns at once */
	int result;	  /* written by the job, read on the loop once it is done */
};

static void job_run(void *userdata)
{
	struct job *j = userdata;

	if (j->wait_for_go)
		(void)sem_wait(&j->go);
	j->result = 42;
}

static void job_free(void *userdata)
{
	struct job *j = userdata;
	struct book *b = j->book;

	(void)sem_destroy(&j->go);
	free(j);
	if (pthread_equal(pthread_self(), b->loop_thread))
		atomic_fetch_add(&b->freed_on_loop, 1);
	atomic_fetch_add(&b->freed, 1);
	(void)sem_post(&b->freed_sem);
}

static struct job *job_new(struct book *b, bool wait_for_go)
{
	struct job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	assert_int_equal(sem_init(&j->go, 0, 0), 0);
	j->book = b;
	j->wait_for_go = wait_for_go;
	return j;
}

/* A loop with a wake calling @fn(@userdata); this thread is the loop's. */
static void book_open(struct book *b, loop_wake_fn *fn, void *userdata)
{
	*b = (struct book){ .loop_thread = pthread_self() };
	assert_int_equal(sem_init(&b->freed_sem, 0, 0), 0);
	assert_int_equal(loop_new(&b->loop), 0);
	assert_int_equal(loop_wake_new(b->loop, fn, userdata, &b->wake), 0);
}

/* Its owner frees the wake: no oneshot holds it any more. */
static void book_close(struct book *b)
{
	loop_wake_free(b->wake);
	loop_free(b->loop);
	(void)sem_destroy(&b->freed_sem);
}

/* A job started on @b's wake, held by the loop side (j->os). */
static struct job *job_start(struct book *b, bool wait_for_go)
{
	struct job *j = job_new(b, wait_for_go);

	assert_int_equal(oneshot_start(b->wake, job_run, job_free, j, &j->os), 0);
	return j;
}

/* Waits until @n jobs were freed (each free posts once), at most 10 s. */
static void book_wait_freed(struct book *b, int n)
{
	struct timespec ts;

	while (atomic_load(&b->freed) < n) {
		assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
		ts.tv_sec += 10;
		assert_int_equal(sem_timedwait(&b->freed_sem, &ts), 0);
	}
}

static void on_wake_count(struct loop_wake *w, void *userdata)
{
	struct book *b = userdata;

	b->wakes++;
}

/* Runs the loop until the wake was called back at least @n times, at most 10 s. */
static void run_until_wakes(struct book *b, unsigned n)
{
	usec_t end = now_usec() + 10 * USEC_PER_SEC;

	while (b->wakes < n && now_usec() < end)
		assert_int_equal(loop_run_once(b->loop, 100 * USEC_PER_MSEC), 0);
	assert_true(b->wakes >= n);
}

/* The job returns first: the wake reaches the loop, the result is there, the loop frees it. */
static void test_done_then_unref(void **state)
{
	struct book b;
	struct job *j;

	(void)state;
	book_open(&b, on_wake_count, &b);
	j = job_start(&b, true);
	assert_false(oneshot_done(j->os));
	(void)sem_post(&j->go);
	run_until_wakes(&b, 1);
	assert_true(oneshot_done(j->os));
	assert_int_equal(j->result, 42);
	/* The thread may still be about to let go: the last of the two frees, exactly once. */
	assert_null(oneshot_unref(j->os));
	book_wait_freed(&b, 1);
	assert_int_equal(atomic_load(&b.freed), 1);
	book_close(&b);
}

/* The loop side lets go first: the thread frees the job when it returns; no wake comes. */
static void test_unref_then_done(void **state)
{
	struct book b;
	struct job *j;

	(void)state;
	book_open(&b, on_wake_count, &b);
	j = job_start(&b, true);
	assert_null(oneshot_unref(j->os));
	assert_int_equal(atomic_load(&b.freed), 0); /* it still runs: nothing freed under it */
	(void)sem_post(&j->go);			    /* @j is the thread's now */
	book_wait_freed(&b, 1);
	assert_int_equal(atomic_load(&b.freed_on_loop), 0);
	/* Freed, so it returned long ago: a wake it sent would be pending now. */
	assert_int_equal(loop_run_once(b.loop, 0), 0);
	assert_int_equal(b.wakes, 0);
	book_close(&b);
}

/* A job whose data needs no freeing (free_fn NULL). */
static void job_flag(void *userdata)
{
	atomic_store((atomic_int *)userdata, 1);
}

static void test_no_free_fn(void **state)
{
	struct oneshot *o = NULL;
	struct book b;
	atomic_int flag = 0;

	(void)state;
	book_open(&b, on_wake_count, &b);
	assert_int_equal(oneshot_start(b.wake, job_flag, NULL, &flag, &o), 0);
	run_until_wakes(&b, 1);
	assert_true(oneshot_done(o));
	assert_int_equal(atomic_load(&flag), 1);
	assert_null(oneshot_unref(o));
	assert_null(oneshot_unref(NULL));
	book_close(&b);
}

/* Many jobs on one wake: the callback asks each; half are let go of while they run. */
struct many {
	struct book book;
	struct job *jobs[MANY]; /* held by the loop side, NULL once let go */
	unsigned collected;
};

static void on_wake_many(struct loop_wake *w, void *userdata)
{
	struct many *m = userdata;

	m->book.wakes++;
	for (unsigned i = 0; i < MANY; i++) {
		struct job *j = m->jobs[i];

		if (!j || !oneshot_done(j->os))
			continue;
		assert_int_equal(j->result, 42);
		m->jobs[i] = NULL;
		(void)oneshot_unref(j->os);
		m->collected++;
	}
}

static void test_many(void **state)
{
	struct many m = { 0 };
	struct job *held[MANY];
	usec_t end;

	(void)state;
	book_open(&m.book, on_wake_many, &m);
	for (unsigned i = 0; i < MANY; i++)
		held[i] = m.jobs[i] = job_start(&m.book, true);
	/* The odd ones are let go of while they wait; the even ones the loop collects. */
	for (unsigned i = 1; i < MANY; i += 2) {
		struct job *j = m.jobs[i];

		m.jobs[i] = NULL;
		(void)oneshot_unref(j->os);
	}
	for (unsigned i = 0; i < MANY; i++)
		(void)sem_post(&held[i]->go); /* each job is still alive until it passes its go */
	end = now_usec() + 10 * USEC_PER_SEC;
	while (m.collected < MANY / 2 && now_usec() < end)
		assert_int_equal(loop_run_once(m.book.loop, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(m.collected, MANY / 2);
	book_wait_freed(&m.book, MANY);
	assert_int_equal(atomic_load(&m.book.freed), MANY);
	book_close(&m.book);
}

/* Lets-go racing with jobs that return at once: each freed exactly once. */
static void test_race(void **state)
{
	struct book b;

	(void)state;
	book_open(&b, on_wake_count, &b);
	for (int i = 0; i < 200; i++) {
		struct job *j = job_start(&b, false);

		if (i % 2)
			(void)oneshot_done(j->os);
		(void)oneshot_unref(j->os);
	}
	book_wait_freed(&b, 200);
	assert_int_equal(atomic_load(&b.freed), 200);
	/* Some jobs may have signalled before their lets-go; the loop drains the wake. */
	assert_int_equal(loop_run_once(b.loop, 0), 0);
	book_close(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_done_then_unref),
		cmocka_unit_test(test_unref_then_done),
		cmocka_unit_test(test_no_free_fn),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_race),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
