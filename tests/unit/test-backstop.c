#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backstop.h"
#include "unit-fs.h"
#include "unit.h"

#define MIB ((uint64_t)1 << 20)
#define SEC USEC_PER_SEC
#define G0  "GPU-00000000-0000-0000-0000-000000000000"
#define G1  "GPU-11111111-1111-1111-1111-111111111111"

static struct backstop *mk(unsigned tol, usec_t after)
{
	struct backstop_opts o = { .tolerance_percent = tol, .after = after };
	struct backstop *b = NULL;

	assert_int_equal(backstop_new(&o, &b), 0);
	return b;
}

/* One container on one GPU with two processes: a small one and a large one. */
static struct backstop_proc procs[] = {
	{ .pid = 100, .start_time = 1000, .used = 100 * MIB },
	{ .pid = 101, .start_time = 1001, .used = 900 * MIB },
};

static struct backstop_sample one(const char *key, const char *uuid, uint64_t limit, uint64_t used)
{
	return (struct backstop_sample){ .key = key,
					 .uuid = uuid,
					 .limit = limit,
					 .used = used,
					 .procs = procs,
					 .n_procs = ELEMENTSOF(procs) };
}

static void test_over(void **state)
{
	/* 110 % of 1000: 1100 is at the threshold, not above it. */
	assert_false(backstop_over(1100, 1000, 110));
	assert_true(backstop_over(1101, 1000, 110));
	assert_false(backstop_over(1000, 1000, 100));
	assert_true(backstop_over(1001, 1000, 100));
	/* No overflow for the largest values. */
	assert_false(backstop_over(UINT64_MAX, UINT64_MAX, 100));
	assert_true(backstop_over(UINT64_MAX, UINT64_MAX / 2, 110));
	assert_false(backstop_over(UINT64_MAX / 2, UINT64_MAX / 2, 1000));
}

static void test_kill_after_and_restart(void **state)
{
	struct backstop *b = mk(110, 30 * SEC);
	struct backstop_sample s = one("ns/pod/c", G0, 1000 * MIB, 1200 * MIB);
	struct backstop_decision d;

	assert_int_equal(backstop_round(b, &s, 1, 10 * SEC, &d), 0);
	assert_int_equal(backstop_watched(b), 1);
	assert_int_equal(backstop_round(b, &s, 1, 39 * SEC, &d), 0);
	/* Exactly `after` above: due. */
	assert_int_equal(backstop_round(b, &s, 1, 40 * SEC, &d), 1);
	assert_string_equal(d.key, "ns/pod/c");
	assert_string_equal(d.uuid, G0);
	assert_int_equal(d.pid, 101); /* the largest */
	assert_int_equal(d.start_time, 1001);
	assert_int_equal(d.proc_used, 900 * MIB);
	assert_int_equal(d.used, 1200 * MIB);
	assert_int_equal(d.limit, 1000 * MIB);
	assert_int_equal(d.over_for, 30 * SEC);
	/* The over-time restarts after a kill: nothing until `after` again. */
	assert_int_equal(backstop_round(b, &s, 1, 41 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, &s, 1, 69 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, &s, 1, 70 * SEC, &d), 1);
	backstop_free(b);
}

static void test_at_threshold_never(void **state)
{
	struct backstop *b = mk(110, 1 * SEC);
	struct backstop_sample s = one("ns/pod/c", G0, 1000, 1100);
	struct backstop_decision d;

	for (usec_t t = 0; t < 100 * SEC; t += SEC)
		assert_int_equal(backstop_round(b, &s, 1, t, &d), 0);
	assert_int_equal(backstop_watched(b), 0);
	backstop_free(b);
}

static void test_flapping_resets(void **state)
{
	struct backstop *b = mk(110, 10 * SEC);
	struct backstop_sample over = one("ns/pod/c", G0, 1000, 2000);
	struct backstop_sample under = one("ns/pod/c", G0, 1000, 900);
	struct backstop_decision d;

	/* Above 9 s, below once, above 9 s again: never 10 s in a row. */
	for (int cycle = 0; cycle < 5; cycle++) {
		usec_t base = (usec_t)cycle * 10 * SEC;

		for (usec_t t = 0; t <= 9 * SEC; t += SEC)
			assert_int_equal(backstop_round(b, &over, 1, base + t, &d), 0);
		assert_int_equal(backstop_round(b, &under, 1, base + 9 * SEC + SEC / 2, &d), 0);
		assert_int_equal(backstop_watched(b), 0);
	}
	backstop_free(b);
}

static void test_vanished_forgotten(void **state)
{
	struct backstop *b = mk(110, 10 * SEC);
	struct backstop_sample s = one("ns/pod/c", G0, 1000, 2000);
	struct backstop_decision d;

	assert_int_equal(backstop_round(b, &s, 1, 0, &d), 0);
	assert_int_equal(backstop_round(b, NULL, 0, 5 * SEC, &d), 0);
	assert_int_equal(backstop_watched(b), 0);
	/* Back: its watch starts again. */
	assert_int_equal(backstop_round(b, &s, 1, 6 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, &s, 1, 15 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, &s, 1, 16 * SEC, &d), 1);
	backstop_free(b);
}

static void test_several_gpus(void **state)
{
	struct backstop *b = mk(110, 10 * SEC);
	struct backstop_proc p1[] = { { .pid = 200, .start_time = 5, .used = 3000 } };
	/* The same container over on G1 (from t=0) and G0 (from t=5), another under on G0. */
	struct backstop_sample s[] = {
		one("ns/pod/c", G0, 1000, 2000),
		{ .key = "ns/pod/c",
		  .uuid = G1,
		  .limit = 1000,
		  .used = 3000,
		  .procs = p1,
		  .n_procs = 1 },
		one("ns/other/c", G0, 1000, 500),
	};
	struct backstop_decision d;

	assert_int_equal(backstop_round(b, &s[1], 1, 0, &d), 0);
	assert_int_equal(backstop_round(b, s, 3, 5 * SEC, &d), 0);
	assert_int_equal(backstop_watched(b), 2);
	/* G1's is due first: over longest. */
	assert_int_equal(backstop_round(b, s, 3, 10 * SEC, &d), 1);
	assert_string_equal(d.uuid, G1);
	assert_int_equal(d.pid, 200);
	/* One decision a round: G0's comes at 15 s. */
	assert_int_equal(backstop_round(b, s, 3, 14 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, s, 3, 15 * SEC, &d), 1);
	assert_string_equal(d.uuid, G0);
	assert_int_equal(d.pid, 101);
	backstop_free(b);
}

static void test_both_due_one_per_round(void **state)
{
	struct backstop *b = mk(110, 1 * SEC);
	struct backstop_sample s[] = {
		one("ns/a/c", G0, 1000, 2000),
		one("ns/b/c", G0, 1000, 2000),
	};
	struct backstop_decision d;

	assert_int_equal(backstop_round(b, s, 2, 0, &d), 0);
	assert_int_equal(backstop_round(b, s, 2, 1 * SEC, &d), 1);
	assert_string_equal(d.key, "ns/a/c"); /* equal times: the first */
	assert_int_equal(backstop_round(b, s, 2, 1 * SEC, &d), 1);
	assert_string_equal(d.key, "ns/b/c");
	assert_int_equal(backstop_round(b, s, 2, 1 * SEC, &d), 0);
	backstop_free(b);
}

static void test_no_limit_never_chosen(void **state)
{
	struct backstop *b = mk(100, 1 * SEC);
	/* A container with no gpumem on this GPU (a whole-GPU or replica holder): limit 0. */
	struct backstop_sample s = one("ns/pod/c", G0, 0, UINT64_MAX / 2);
	struct backstop_decision d;

	for (usec_t t = 0; t < 10 * SEC; t += SEC)
		assert_int_equal(backstop_round(b, &s, 1, t, &d), 0);
	assert_int_equal(backstop_watched(b), 0);
	backstop_free(b);
}

static void test_only_processes_given(void **state)
{
	struct backstop *b = mk(110, 1 * SEC);
	/* Over, but no process of it is known (all outside the allocation, or PID 0). */
	struct backstop_proc zero[] = { { .pid = 0, .used = 5000 } };
	struct backstop_sample s = { .key = "ns/pod/c",
				     .uuid = G0,
				     .limit = 1000,
				     .used = 5000,
				     .procs = zero,
				     .n_procs = 1 };
	struct backstop_sample none = { .key = "ns/pod/c", .uuid = G0, .limit = 1000, .used = 5000 };
	struct backstop_proc unknown[] = { { .pid = 7, .start_time = 1, .used = UINT64_MAX },
					   { .pid = 8, .start_time = 2, .used = 10 } };
	struct backstop_sample u = { .key = "ns/pod/c",
				     .uuid = G0,
				     .limit = 1000,
				     .used = 5000,
				     .procs = unknown,
				     .n_procs = 2 };
	struct backstop_decision d;

	assert_int_equal(backstop_round(b, &s, 1, 0, &d), 0);
	assert_int_equal(backstop_round(b, &s, 1, 5 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, &none, 1, 6 * SEC, &d), 0);
	/* Still watched: the first process that shows up is chosen at once. */
	assert_int_equal(backstop_watched(b), 1);
	/* Unknown usage is not known larger than 10 bytes. */
	assert_int_equal(backstop_round(b, &u, 1, 7 * SEC, &d), 1);
	assert_int_equal(d.pid, 8);
	backstop_free(b);
}

static void test_bounded_and_hostile(void **state)
{
	size_t n = (size_t)BACKSTOP_TRACK_MAX * 2;
	struct backstop_sample *s = calloc(n, sizeof(*s));
	char(*keys)[32] = calloc(n, sizeof(*keys));
	char longkey[BACKSTOP_KEY_MAX + 10];
	struct backstop *b = mk(110, 1 * SEC);
	struct backstop_decision d;
	struct backstop_opts bad = { .tolerance_percent = 99 };
	struct backstop *nb = NULL;

	assert_non_null(s);
	assert_non_null(keys);
	for (size_t i = 0; i < n; i++) {
		(void)snprintf(keys[i], sizeof(keys[i]), "ns/p%zu/c", i);
		s[i] = one(keys[i], G0, 1000, 2000);
	}
	assert_int_equal(backstop_round(b, s, n, 0, &d), 0);
	assert_int_equal(backstop_watched(b), BACKSTOP_TRACK_MAX);
	backstop_forget(b);
	assert_int_equal(backstop_watched(b), 0);
	/* A key too long to keep whole is never acted on. */
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = 0;
	s[0] = one(longkey, G0, 1000, 2000);
	assert_int_equal(backstop_round(b, s, 1, 5 * SEC, &d), 0);
	assert_int_equal(backstop_round(b, s, 1, 10 * SEC, &d), 0);
	assert_int_equal(backstop_watched(b), 0);
	assert_int_equal(backstop_new(&bad, &nb), -EINVAL);
	assert_int_equal(backstop_set_opts(b, &bad), -EINVAL);
	backstop_free(b);
	free(s);
	free(keys);
}

/* <dir>/self/status with @status as its text. */
static void write_status(const char *dir, const char *status)
{
	unit_write_at(dir, "/self/status", status, strlen(status));
}

/*
 * The host PID namespace test reads NSpid from <host_proc>/self/status, which a root process
 * without capabilities can read, where the host's /proc/1/ns/pid is refused to it (PID 1 holds
 * capabilities): one number is the procfs's own namespace, two a namespace nested in it. With
 * no NSpid line it falls back to the namespace links, here missing: an error that says so.
 */
static void test_host_pid_namespace(void **state)
{
	char dir[256];
	const char *why = NULL;

	(void)state;
	unit_tmpdir("edgegpu-backstop", dir, sizeof(dir));
	write_status(dir, "Name:\tedgegpu\nTgid:\t4242\nNSpid:\t4242\nNSpgid:\t4242\n");
	assert_int_equal(backstop_host_pid(dir, &why), 1);
	write_status(dir, "Name:\tedgegpu\nNSpid:\t4242 \t7\nNSpgid:\t4242\t7\n");
	assert_int_equal(backstop_host_pid(dir, &why), 0);
	assert_non_null(strstr(why, "hostPID: false"));
	write_status(dir, "Name:\tedgegpu\nNSpid:\t4242");
	assert_int_equal(backstop_host_pid(dir, &why), 1);
	write_status(dir, "Name:\tedgegpu\nTgid:\t4242\n");
	why = NULL;
	assert_int_equal(backstop_host_pid(dir, &why), -ENOENT);
	assert_non_null(strstr(why, "/proc/1/ns/pid"));
	unit_rm_tree(dir);
	/* This process, in its own /proc: the procfs of its own namespace. */
	assert_int_equal(backstop_host_pid("/proc", &why), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_over),
		cmocka_unit_test(test_kill_after_and_restart),
		cmocka_unit_test(test_at_threshold_never),
		cmocka_unit_test(test_flapping_resets),
		cmocka_unit_test(test_vanished_forgotten),
		cmocka_unit_test(test_several_gpus),
		cmocka_unit_test(test_both_due_one_per_round),
		cmocka_unit_test(test_no_limit_never_chosen),
		cmocka_unit_test(test_only_processes_given),
		cmocka_unit_test(test_bounded_and_hostile),
		cmocka_unit_test(test_host_pid_namespace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
