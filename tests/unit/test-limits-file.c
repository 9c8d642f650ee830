#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "limits-file.h"
#include "unit.h"

/* The limits file (interposer/limits-file.h): what the plugin writes, the interposer reads. */

static void test_round_trip(void **state)
{
	struct limits l = { .report_only = true, .count_managed = false, .n_gpus = 3 }, back;
	char buf[LIMITS_FILE_MAX];
	unsigned line = 7;
	int n;

	(void)snprintf(l.gpus[0].uuid, sizeof(l.gpus[0].uuid), "%s",
		       "GPU-8d1f0f7e-1111-2222-3333-444455556666");
	l.gpus[0].limit = 4294967296;
	(void)snprintf(l.gpus[1].uuid, sizeof(l.gpus[1].uuid), "%s", "0");
	l.gpus[1].limit = 0;
	(void)snprintf(l.gpus[2].uuid, sizeof(l.gpus[2].uuid), "%s", "MIG-x");
	l.gpus[2].limit = UINT64_MAX;
	n = limits_format(&l, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(strlen(buf), n);
	assert_string_equal(buf, "edgegpu-limits 1\nmode report\nmanaged ignore\n"
				 "gpu GPU-8d1f0f7e-1111-2222-3333-444455556666 4294967296\n"
				 "gpu 0 0\ngpu MIG-x 18446744073709551615\n");
	memset(&back, 0xa5, sizeof(back));
	assert_int_equal(limits_parse(buf, (size_t)n, &back, &line), 0);
	assert_int_equal(line, 7); /* untouched on success */
	assert_true(back.report_only);
	assert_false(back.count_managed);
	assert_int_equal(back.n_gpus, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_string_equal(back.gpus[i].uuid, l.gpus[i].uuid);
		assert_int_equal(back.gpus[i].limit, l.gpus[i].limit);
	}
	/* The other values, and every GPU the file can hold. */
	l.report_only = false;
	l.count_managed = true;
	l.n_gpus = REGION_GPUS_MAX;
	for (unsigned i = 0; i < REGION_GPUS_MAX; i++) {
		memset(l.gpus[i].uuid, 'a' + (int)i, REGION_UUID_MAX - 1);
		l.gpus[i].uuid[REGION_UUID_MAX - 1] = '\0';
		l.gpus[i].limit = i;
	}
	n = limits_format(&l, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(limits_parse(buf, (size_t)n, &back, NULL), 0);
	assert_false(back.report_only);
	assert_true(back.count_managed);
	assert_int_equal(back.n_gpus, REGION_GPUS_MAX);
	assert_string_equal(back.gpus[15].uuid, l.gpus[15].uuid);
	assert_int_equal(back.gpus[15].limit, 15);
}

static void test_format_errors(void **state)
{
	struct limits l = { .n_gpus = 1 };
	char buf[256];

	(void)snprintf(l.gpus[0].uuid, sizeof(l.gpus[0].uuid), "%s", "GPU-a");
	assert_int_equal(limits_format(&l, buf, 20), -ENOSPC);
	assert_int_equal(limits_format(&l, buf, 50), -ENOSPC); /* the header fits, the GPU not */
	l.n_gpus = 0;
	assert_int_equal(limits_format(&l, buf, sizeof(buf)), -EINVAL);
	l.n_gpus = REGION_GPUS_MAX + 1;
	assert_int_equal(limits_format(&l, buf, sizeof(buf)), -EINVAL);
	l.n_gpus = 1;
	(void)snprintf(l.gpus[0].uuid, sizeof(l.gpus[0].uuid), "%s", "GPU a");
	assert_int_equal(limits_format(&l, buf, sizeof(buf)), -EINVAL);
	l.gpus[0].uuid[0] = '\0';
	assert_int_equal(limits_format(&l, buf, sizeof(buf)), -EINVAL);
	memset(l.gpus[0].uuid, 'u', sizeof(l.gpus[0].uuid)); /* no NUL inside */
	assert_int_equal(limits_format(&l, buf, sizeof(buf)), -EINVAL);
}

static void test_parse_ok(void **state)
{
	struct limits l;
	unsigned line;
	const char *t;

	/* Unknown keys (a newer plugin's) are skipped, as are blank lines and a missing final \n. */
	t = "edgegpu-limits 1\n\nfuture-key a b c\nmode enforce\n"
	    "a-key-much-longer-than-any-key-we-know-about x\n\t gpu  GPU-x\t 1024";
	assert_int_equal(limits_parse(t, strlen(t), &l, &line), 0);
	assert_false(l.report_only);
	assert_true(l.count_managed); /* the default without a managed line */
	assert_int_equal(l.n_gpus, 1);
	assert_string_equal(l.gpus[0].uuid, "GPU-x");
	assert_int_equal(l.gpus[0].limit, 1024);
	/* The length given is what counts, not a NUL after it. */
	t = "edgegpu-limits 1\nmode report\ngpu G 5\ngpu H 6\n";
	assert_int_equal(limits_parse(t, strlen(t) - 8, &l, &line), 0);
	assert_int_equal(l.n_gpus, 1);
	assert_true(l.report_only);
}

static void expect_bad(const char *text, size_t len, unsigned want_line)
{
	struct limits l = { .n_gpus = 99 };
	unsigned line = 12345;

	assert_int_equal(limits_parse(text, len, &l, &line), -EBADMSG);
	assert_int_equal(line, want_line);
	assert_int_equal(l.n_gpus, 99); /* set only on success */
}

#define BAD(text, line) expect_bad(text, sizeof(text) - 1, line)

static void test_parse_bad(void **state)
{
	char big[LIMITS_FILE_MAX + 64];
	unsigned line;
	size_t off;

	BAD("edgegpu-limits 2\nmode enforce\ngpu G 1\n", 1);
	BAD("edgegpu-limits\nmode enforce\ngpu G 1\n", 1);
	BAD("edgegpu-limits one\nmode enforce\ngpu G 1\n", 1);
	BAD("mode enforce\nedgegpu-limits 1\ngpu G 1\n", 1);
	BAD("edgegpu-limits 1 2\nmode enforce\ngpu G 1\n", 1);
	BAD("edgegpu-limits 1\nmode strict\ngpu G 1\n", 2);
	BAD("edgegpu-limits 1\nmode\ngpu G 1\n", 2);
	BAD("edgegpu-limits 1\nmode enforce\nmanaged sometimes\ngpu G 1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G 12k\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G -1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G 18446744073709551616\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G 99999999999999999999999\n", 3);
	BAD("edgegpu-limits 1\nmode enforce extra\ngpu G 1\n", 2);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G 1 2\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\nmanaged count x\ngpu G 1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu G\0 1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\nfuture\0key\ngpu G 1\n", 3);
	/* Control bytes in a UUID: limits_format() would refuse to write them (found by fuzzing). */
	BAD("edgegpu-limits 1\nmode enforce\ngpu GPU-\001 1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu GPU-\177 1\n", 3);
	BAD("edgegpu-limits 1\nmode enforce\ngpu GPU-\r 1\n", 3);
	/* Required lines missing: line 0. */
	BAD("", 0);
	BAD("\n\n", 0);
	BAD("edgegpu-limits 1\ngpu G 1\n", 0);
	BAD("edgegpu-limits 1\nmode enforce\n", 0);
	/* A UUID longer than the region holds. */
	off = (size_t)snprintf(big, sizeof(big), "edgegpu-limits 1\nmode enforce\ngpu ");
	memset(big + off, 'u', REGION_UUID_MAX);
	off += REGION_UUID_MAX;
	off += (size_t)snprintf(big + off, sizeof(big) - off, " 1\n");
	expect_bad(big, off, 3);
	/* One GPU more than REGION_GPUS_MAX: the 17th gpu line. */
	off = (size_t)snprintf(big, sizeof(big), "edgegpu-limits 1\nmode enforce\n");
	for (unsigned i = 0; i <= REGION_GPUS_MAX; i++)
		off += (size_t)snprintf(big + off, sizeof(big) - off, "gpu G%u 1\n", i);
	expect_bad(big, off, 3 + REGION_GPUS_MAX);
	/* Longer than LIMITS_FILE_MAX, even when what it says is fine. */
	off = (size_t)snprintf(big, sizeof(big), "edgegpu-limits 1\nmode enforce\ngpu G 1\n");
	memset(big + off, '\n', sizeof(big) - off);
	assert_int_equal(limits_parse(big, LIMITS_FILE_MAX, &(struct limits){ 0 }, &line), 0);
	expect_bad(big, LIMITS_FILE_MAX + 1, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_format_errors),
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
