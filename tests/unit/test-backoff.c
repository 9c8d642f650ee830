/*
 * The one backoff (backoff.h): each caller's schedule as a table of the delays it waits,
 * step by step, with what backoff_grew() says at each; the cap where the product would
 * overflow; reset; a cap lowered between steps (the labels writer's).
 */
#include <stdint.h>

#include "backoff.h"
#include "unit.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

struct schedule {
	const char *who;
	usec_t first, max;
	unsigned factor;
	usec_t want[12]; /* the delays, in order; 0 ends the list */
};

static const struct schedule schedules[] = {
	/* kubelet registration: 1 ms times 4 up to 5 s */
	{ "registration",
	  1 * MS,
	  5 * SEC,
	  4,
	  { 1 * MS, 4 * MS, 16 * MS, 64 * MS, 256 * MS, 1024 * MS, 4096 * MS, 5 * SEC, 5 * SEC } },
	/* directory watches, the CDI writer's retry, listeners, NVML re-init: 100 ms x2 to 10 s */
	{ "watch",
	  100 * MS,
	  10 * SEC,
	  2,
	  { 100 * MS, 200 * MS, 400 * MS, 800 * MS, 1600 * MS, 3200 * MS, 6400 * MS, 10 * SEC,
	    10 * SEC } },
	/* the CDI contest: 1 s x2 to 300 s */
	{ "contest",
	  1 * SEC,
	  300 * SEC,
	  2,
	  { 1 * SEC, 2 * SEC, 4 * SEC, 8 * SEC, 16 * SEC, 32 * SEC, 64 * SEC, 128 * SEC, 256 * SEC,
	    300 * SEC, 300 * SEC } },
	/* peers, the metrics listener: 1 s x2 to 30 s */
	{ "peer",
	  1 * SEC,
	  30 * SEC,
	  2,
	  { 1 * SEC, 2 * SEC, 4 * SEC, 8 * SEC, 16 * SEC, 30 * SEC, 30 * SEC } },
	/* a first already past max: max from the start */
	{ "first past max", 5 * SEC, 1 * SEC, 2, { 1 * SEC, 1 * SEC } },
	/* factor 1: a constant delay */
	{ "constant", 3 * MS, 10 * MS, 1, { 3 * MS, 3 * MS, 3 * MS } },
	/* the product past what usec_t holds: max, not a wrapped small delay */
	{ "overflow 2",
	  UINT64_MAX / 2 + 1,
	  UINT64_MAX,
	  2,
	  { UINT64_MAX / 2 + 1, UINT64_MAX, UINT64_MAX } },
	{ "overflow 4",
	  UINT64_MAX / 3,
	  UINT64_MAX - 1,
	  4,
	  { UINT64_MAX / 3, UINT64_MAX - 1, UINT64_MAX - 1 } },
};

static void run(const struct schedule *s)
{
	struct backoff b = BACKOFF_INIT(s->first, s->factor, s->max);
	usec_t prev = 0;

	assert_false(backoff_started(&b));
	for (size_t i = 0; i < ELEMENTSOF(s->want) && s->want[i]; i++) {
		usec_t d = backoff_next(&b);

		if (d != s->want[i])
			fail_msg("%s: step %zu: %llu, not %llu", s->who, i, (unsigned long long)d,
				 (unsigned long long)s->want[i]);
		assert_true(backoff_started(&b));
		/* Grew: the first step, and each step longer than the one before. */
		assert_int_equal(backoff_grew(&b), i == 0 || d > prev);
		prev = d;
	}
}

static void test_schedules(void **state)
{
	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(schedules); i++)
		run(&schedules[i]);
}

/* Reset anywhere, even at the cap: first again, and it counts as a step that grew. */
static void test_reset(void **state)
{
	struct backoff b = BACKOFF_INIT(100 * MS, 2, 10 * SEC);

	(void)state;
	for (int i = 0; i < 20; i++)
		(void)backoff_next(&b);
	assert_int_equal(backoff_next(&b), 10 * SEC);
	assert_false(backoff_grew(&b));
	backoff_reset(&b);
	assert_false(backoff_started(&b));
	assert_false(backoff_grew(&b));
	assert_int_equal(backoff_next(&b), 100 * MS);
	assert_true(backoff_grew(&b));
	assert_int_equal(backoff_next(&b), 200 * MS);
	backoff_reset(&b);
	backoff_reset(&b); /* twice is once */
	assert_int_equal(backoff_next(&b), 100 * MS);
}

/* max lowered between steps (the labels writer caps at its refresh interval): it holds at once. */
static void test_max_changed(void **state)
{
	struct backoff b = BACKOFF_INIT(100 * MS, 2, 30 * SEC);

	(void)state;
	assert_int_equal(backoff_next(&b), 100 * MS);
	assert_int_equal(backoff_next(&b), 200 * MS);
	b.max = 150 * MS;
	assert_int_equal(backoff_next(&b), 150 * MS);
	assert_false(backoff_grew(&b));
	b.max = 30 * SEC;
	assert_int_equal(backoff_next(&b), 300 * MS); /* from the capped delay on */
	assert_true(backoff_grew(&b));
	backoff_reset(&b);
	b.max = 50 * MS;
	assert_int_equal(backoff_next(&b), 50 * MS); /* first is capped too */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schedules),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_max_changed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
