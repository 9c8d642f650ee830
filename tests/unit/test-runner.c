/*
 * runner: a job that finishes in time (joined, the caller keeps its argument); one that hangs
 * past the deadline and comes back later (left behind, its argument freed by its thread, the
 * count back down); one that comes back between the deadline and the release (joined after
 * all); one that never returns (the count stays up); the count through all of them; and
 * releases racing with jobs that return at once, where the argument must be freed exactly once
 * (ASan and LeakSanitizer watch).
 */

#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "runner.h"
#include "unit.h"
#include "util.h"

struct job {
	sem_t go;	  /* the job waits for it (a call that hangs until the test says) */
	sem_t *dropped;	  /* posted by the drop, which outlives the job */
	bool wait_for_go; /* false: returns at once */
	atomic_int ran;
};

static void job_run(void *arg)
{
	struct job *j = arg;

	if (j->wait_for_go)
		(void)sem_wait(&j->go);
	atomic_fetch_add(&j->ran, 1);
}

static struct job *job_new(bool wait_for_go, sem_t *dropped)
{
	struct job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	assert_int_equal(sem_init(&j->go, 0, 0), 0);
	j->wait_for_go = wait_for_go;
	j->dropped = dropped;
	return j;
}

static void job_free(struct job *j)
{
	(void)sem_destroy(&j->go);
	free(j);
}

static void job_drop(void *arg)
{
	struct job *j = arg;
	sem_t *dropped = j->dropped;

	job_free(j);
	if (dropped)
		(void)sem_post(dropped);
}

/* The count reaches @n: it falls just after the thread's last touch of its job. */
static void wait_live(unsigned n)
{
	for (int i = 0; i < 5000 && runner_live() != n; i++)
		(void)usleep(1000);
	assert_int_equal(runner_live(), n);
}

static void test_finishes(void **state)
{
	unsigned base = runner_live();
	struct job *j = job_new(false, NULL);
	struct runner *r;

	(void)state;
	assert_int_equal(runner_start(job_run, j, job_drop, &r), 0);
	assert_true(runner_wait(r, USEC_INFINITY));
	assert_int_equal(atomic_load(&j->ran), 1);
	assert_false(runner_release(r)); /* joined: the job is still ours */
	assert_int_equal(runner_live(), base);
	job_free(j);
}

static void test_hangs_then_returns(void **state)
{
	unsigned base = runner_live();
	sem_t dropped;
	struct job *j;
	struct runner *r;

	(void)state;
	assert_int_equal(sem_init(&dropped, 0, 0), 0);
	j = job_new(true, &dropped);
	assert_int_equal(runner_start(job_run, j, job_drop, &r), 0);
	assert_int_equal(runner_live(), base + 1);
	assert_false(runner_wait(r, now_usec() + 10 * USEC_PER_MSEC)); /* the deadline passes */
	assert_true(runner_release(r));				       /* left behind: j is its */
	assert_int_equal(runner_live(), base + 1);
	(void)sem_post(&j->go); /* the hung call returns; the thread frees j and the runner */
	assert_int_equal(sem_wait(&dropped), 0);
	wait_live(base);
	(void)sem_destroy(&dropped);
}

static void test_returns_before_release(void **state)
{
	unsigned base = runner_live();
	struct job *j = job_new(true, NULL);
	struct runner *r;

	(void)state;
	assert_int_equal(runner_start(job_run, j, job_drop, &r), 0);
	assert_false(runner_wait(r, now_usec() + USEC_PER_MSEC));
	(void)sem_post(&j->go);
	assert_true(runner_wait(r, USEC_INFINITY));
	assert_false(runner_release(r)); /* it came back: joined, j still ours, no drop */
	assert_int_equal(atomic_load(&j->ran), 1);
	assert_int_equal(runner_live(), base);
	job_free(j);
}

/* A deadline already past returns at once, whatever the job does. */
static void test_deadline_past(void **state)
{
	unsigned base = runner_live();
	struct job *j = job_new(true, NULL);
	struct runner *r;

	(void)state;
	assert_int_equal(runner_start(job_run, j, job_drop, &r), 0);
	assert_false(runner_wait(r, 0));
	(void)sem_post(&j->go);
	assert_true(runner_wait(r, USEC_INFINITY));
	assert_false(runner_release(r));
	assert_int_equal(runner_live(), base);
	job_free(j);
}

/* Never returns: the thread stays counted for the rest of the process (main() would _exit()). */
static void test_never_returns(void **state)
{
	static struct job forever; /* reachable for LeakSanitizer: the thread holds it */
	unsigned base = runner_live();
	struct runner *r;

	(void)state;
	assert_int_equal(sem_init(&forever.go, 0, 0), 0);
	forever.wait_for_go = true;
	assert_int_equal(runner_start(job_run, &forever, NULL, &r), 0);
	assert_false(runner_wait(r, now_usec() + USEC_PER_MSEC));
	assert_true(runner_release(r));
	assert_int_equal(runner_live(), base + 1);
	assert_int_equal(atomic_load(&forever.ran), 0);
}

/* Release right after the start, racing with a job that returns at once: either way, the job is
   freed exactly once (by us after a join, by its thread's drop when left behind). */
static void test_release_races(void **state)
{
	unsigned base = runner_live();
	sem_t dropped;
	unsigned left = 0;

	(void)state;
	assert_int_equal(sem_init(&dropped, 0, 0), 0);
	for (int i = 0; i < 200; i++) {
		struct job *j = job_new(false, &dropped);
		struct runner *r;

		assert_int_equal(runner_start(job_run, j, job_drop, &r), 0);
		if (runner_release(r))
			left++;
		else
			job_free(j);
	}
	for (unsigned i = 0; i < left; i++)
		assert_int_equal(sem_wait(&dropped), 0);
	wait_live(base);
	(void)sem_destroy(&dropped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_finishes),
		cmocka_unit_test(test_hangs_then_returns),
		cmocka_unit_test(test_returns_before_release),
		cmocka_unit_test(test_deadline_past),
		cmocka_unit_test(test_release_races),
		cmocka_unit_test(test_never_returns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
