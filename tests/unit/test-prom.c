#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "file-read.h"
#include "prom.h"
#include "unit.h"

/* The output of @p so far, NUL-terminated. */
static const char *text(struct buf *b)
{
	assert_int_equal(buf_reserve(b, 1), 0);
	b->data[b->len] = 0;
	return (const char *)b->data;
}

static void assert_text(struct buf *b, const char *want)
{
	const char *got = text(b);

	if (strcmp(got, want) != 0) {
		print_error("got:\n%s\nwant:\n%s\n", got, want);
		fail();
	}
}

static void test_hostile_label_values(void **state)
{
	struct buf b = { 0 };
	struct prom p;
	struct prom_labels l = { 0 };

	prom_init(&p, &b);
	prom_family(&p, "gpu_temp_celsius", PROM_GAUGE, "GPU temperature.");
	prom_labels_push(&l, "modelName", "NVIDIA \"A100\" \\ 80GB\nnext line");
	prom_labels_push(&l, "pod", "Grüße-名前-\xf0\x9f\x98\x80"); /* UTF-8 kept as is */
	prom_labels_push(&l, "bad",
			 "a\xff"
			 "b\xc0\xafz\xed\xa0\x80!"); /* not UTF-8 */
	prom_labels_push(&l, "empty", NULL);
	prom_labels_push(&l, "tab", "a\tb\rc{}=,");
	prom_sample(&p, NULL, &l, 42);
	assert_int_equal(prom_finish(&p), 0);
	assert_text(&b, "# HELP gpu_temp_celsius GPU temperature.\n"
			"# TYPE gpu_temp_celsius gauge\n"
			"gpu_temp_celsius{modelName=\"NVIDIA \\\"A100\\\" \\\\ 80GB\\nnext line\","
			"pod=\"Grüße-名前-\xf0\x9f\x98\x80\","
			"bad=\"a\xef\xbf\xbd"
			"b\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!\","
			"empty=\"\",tab=\"a\tb\rc{}=,\"} 42\n");
	buf_release(&b);
}

static void test_help_escaping(void **state)
{
	struct buf b = { 0 };
	struct prom p;

	prom_init(&p, &b);
	prom_family(&p, "a", PROM_COUNTER, "back\\slash \"quoted\"\nsecond line");
	prom_family(&p, "b", PROM_UNTYPED, NULL);
	prom_family(&p, "c", PROM_HISTOGRAM, "");
	prom_sample(&p, "_count", NULL, 0);
	assert_int_equal(prom_finish(&p), 0);
	assert_text(&b, "# HELP a back\\\\slash \"quoted\"\\nsecond line\n"
			"# TYPE a counter\n"
			"# TYPE b untyped\n"
			"# HELP c \n"
			"# TYPE c histogram\n"
			"c_count 0\n");
	buf_release(&b);
}

static void test_duplicate_family(void **state)
{
	struct buf b = { 0 };
	struct prom p;

	prom_init(&p, &b);
	prom_family(&p, "x", PROM_GAUGE, "first");
	prom_sample(&p, NULL, NULL, 1);
	prom_family(&p, "x", PROM_GAUGE, "again");
	prom_sample(&p, NULL, NULL, 2);
	prom_family(&p, "y", PROM_GAUGE, NULL);
	prom_sample(&p, NULL, NULL, 3);
	assert_int_equal(prom_finish(&p), -EINVAL);
	/* The second x and its sample are gone; y after it is still written. */
	assert_text(&b, "# HELP x first\n# TYPE x gauge\nx 1\n# TYPE y gauge\ny 3\n");
	buf_release(&b);

	/* A histogram claims its _bucket, _sum and _count names, both ways round. */
	const char *clash[][2] = { { "h", "h_sum" }, { "h_count", "h" }, { "h", "h_bucket" } };
	for (size_t i = 0; i < ELEMENTSOF(clash); i++) {
		bool first_hist = strlen(clash[i][0]) == 1;

		prom_init(&p, &b);
		prom_family(&p, clash[i][0], first_hist ? PROM_HISTOGRAM : PROM_GAUGE, NULL);
		assert_int_equal(p.err, 0);
		prom_family(&p, clash[i][1], first_hist ? PROM_GAUGE : PROM_HISTOGRAM, NULL);
		assert_int_equal(prom_finish(&p), -EINVAL);
		b.len = 0;
	}
	/* h_total is no part of a histogram h. */
	prom_init(&p, &b);
	prom_family(&p, "h", PROM_HISTOGRAM, NULL);
	prom_family(&p, "h_total", PROM_COUNTER, NULL);
	assert_int_equal(prom_finish(&p), 0);
	buf_release(&b);
}

static void test_bad_names(void **state)
{
	static const char *const bad_metrics[] = { "", "1abc", "a-b", "a b", "a.b", "é", "a\n" };
	static const char *const bad_labels[] = { "", "1a", "a-b", "__name__", "a:b", "a b" };
	struct buf b = { 0 };
	struct prom p;

	for (size_t i = 0; i < ELEMENTSOF(bad_metrics); i++) {
		prom_init(&p, &b);
		prom_family(&p, bad_metrics[i], PROM_GAUGE, "h");
		prom_sample(&p, NULL, NULL, 1);
		assert_int_equal(prom_finish(&p), -EINVAL);
		assert_int_equal(b.len, 0);
	}
	prom_init(&p, &b);
	prom_family(&p, NULL, PROM_GAUGE, "h");
	prom_family(&p, "ok", (enum prom_type)99, "h");
	assert_int_equal(prom_finish(&p), -EINVAL);
	assert_int_equal(b.len, 0);

	for (size_t i = 0; i < ELEMENTSOF(bad_labels); i++) {
		struct prom_labels l = { 0 };

		prom_init(&p, &b);
		prom_family(&p, "m", PROM_GAUGE, NULL);
		prom_labels_push(&l, "good", "v");
		prom_labels_push(&l, bad_labels[i], "v");
		prom_sample(&p, NULL, &l, 1);
		assert_int_equal(prom_finish(&p), -EINVAL);
		assert_text(&b, "# TYPE m gauge\n"); /* the sample is dropped whole */
		b.len = 0;
	}

	/* Valid names of every allowed character. */
	prom_init(&p, &b);
	prom_family(&p, "_a:b_Z9", PROM_GAUGE, NULL);
	{
		struct prom_labels l = { 0 };

		prom_labels_push(&l, "_x9Y", "1");
		prom_labels_push(&l, "le", "2"); /* fine outside histograms */
		prom_sample(&p, NULL, &l, 1);
	}
	assert_int_equal(prom_finish(&p), 0);
	assert_text(&b, "# TYPE _a:b_Z9 gauge\n_a:b_Z9{_x9Y=\"1\",le=\"2\"} 1\n");
	buf_release(&b);
}

static void test_misuse(void **state)
{
	struct buf b = { 0 };
	struct prom p;
	struct prom_labels l = { 0 };

	/* A sample before any family, a duplicate label, a suffix on a gauge. */
	prom_init(&p, &b);
	prom_sample(&p, NULL, NULL, 1);
	assert_int_equal(p.err, -EINVAL);
	prom_family(&p, "g", PROM_GAUGE, NULL);
	prom_labels_push(&l, "a", "1");
	prom_labels_push(&l, "a", "2");
	prom_sample(&p, NULL, &l, 1);
	prom_sample(&p, "_sum", NULL, 1);
	prom_sample(&p, NULL, NULL, 7);
	assert_int_equal(prom_finish(&p), -EINVAL);
	assert_text(&b, "# TYPE g gauge\ng 7\n");
	b.len = 0;

	/* Histograms take only their suffixes, and _bucket needs le. */
	prom_init(&p, &b);
	prom_family(&p, "h", PROM_HISTOGRAM, NULL);
	prom_sample(&p, NULL, NULL, 1);
	prom_sample(&p, "_total", NULL, 1);
	prom_sample(&p, "_bucket", NULL, 1);
	assert_int_equal(prom_finish(&p), -EINVAL);
	assert_text(&b, "# TYPE h histogram\n");
	b.len = 0;

	/* Too many labels: -E2BIG, and the first error stays. */
	static const char *const names[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
					     "k", "l", "m", "n", "o", "p", "q", "r", "s" };
	memset(&l, 0, sizeof(l));
	for (int i = 0; i < PROM_LABELS_MAX + 3; i++)
		prom_labels_push(&l, names[i], "y");
	assert_int_equal(l.n, PROM_LABELS_MAX + 3);
	prom_init(&p, &b);
	prom_family(&p, "g", PROM_GAUGE, NULL);
	prom_sample(&p, NULL, &l, 1);
	assert_int_equal(p.err, -E2BIG);
	prom_family(&p, "bad name", PROM_GAUGE, NULL);
	assert_int_equal(prom_finish(&p), -E2BIG);
	buf_release(&b);
}

static void test_values(void **state)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
		{ 0, "0" },
		{ -0.0, "0" },
		{ 42, "42" },
		{ -17, "-17" },
		{ 9007199254740992.0, "9007199254740992" }, /* 2^53 */
		{ 18446744073709551616.0, "1.8446744073709552e+19" },
		{ 1e300, "1e+300" },
		{ 0.1, "0.1" },
		{ 1.5, "1.5" },
		{ -2.25, "-2.25" },
		{ 1.0 / 3.0, "0.3333333333333333" },
		{ 0.1 + 0.2, "0.30000000000000004" }, /* needs all 17 digits */
		{ 5e-324, "4.94065645841247e-324" },
		{ 0.005, "0.005" },
	};
	struct buf b = { 0 };
	struct prom p;
	char want[128];

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		prom_init(&p, &b);
		prom_family(&p, "v", PROM_GAUGE, NULL);
		prom_sample(&p, NULL, NULL, cases[i].v);
		assert_int_equal(prom_finish(&p), 0);
		(void)snprintf(want, sizeof(want), "# TYPE v gauge\nv %s\n", cases[i].want);
		assert_text(&b, want);
		/* Every finite value reads back as the same double. */
		assert_true(strtod(strrchr(text(&b), ' ') + 1, NULL) == cases[i].v);
		b.len = 0;
	}
	prom_init(&p, &b);
	prom_family(&p, "v", PROM_UNTYPED, NULL);
	prom_sample(&p, NULL, NULL, NAN);
	prom_sample(&p, NULL, NULL, INFINITY);
	prom_sample(&p, NULL, NULL, -INFINITY);
	assert_int_equal(prom_finish(&p), 0);
	assert_text(&b, "# TYPE v untyped\nv NaN\nv +Inf\nv -Inf\n");
	buf_release(&b);
}

static void test_histogram_shape(void **state)
{
	static const double bounds[] = { 0.005, 0.01, 1 };
	static const uint64_t counts[] = { 1, 2, 0, 3 };
	struct buf b = { 0 };
	struct prom p;
	struct prom_labels l = { 0 };

	prom_init(&p, &b);
	prom_family(&p, "lat_seconds", PROM_HISTOGRAM, "Latency.");
	prom_labels_push(&l, "resource", "nvidia.com/gpu");
	prom_histogram(&p, &l, bounds, ELEMENTSOF(bounds), counts, 4.5);
	prom_histogram(&p, NULL, bounds, 0, counts, 0.25);
	assert_int_equal(prom_finish(&p), 0);
	assert_text(&b, "# HELP lat_seconds Latency.\n"
			"# TYPE lat_seconds histogram\n"
			"lat_seconds_bucket{resource=\"nvidia.com/gpu\",le=\"0.005\"} 1\n"
			"lat_seconds_bucket{resource=\"nvidia.com/gpu\",le=\"0.01\"} 3\n"
			"lat_seconds_bucket{resource=\"nvidia.com/gpu\",le=\"1\"} 3\n"
			"lat_seconds_bucket{resource=\"nvidia.com/gpu\",le=\"+Inf\"} 6\n"
			"lat_seconds_sum{resource=\"nvidia.com/gpu\"} 4.5\n"
			"lat_seconds_count{resource=\"nvidia.com/gpu\"} 6\n"
			"lat_seconds_bucket{le=\"+Inf\"} 1\n"
			"lat_seconds_sum 0.25\n"
			"lat_seconds_count 1\n");
	b.len = 0;

	/* Bounds out of order, repeated, infinite or NaN; le among the labels; not a histogram. */
	static const double bad[][2] = { { 1, 0.5 }, { 1, 1 }, { 1, INFINITY }, { NAN, 1 } };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		prom_init(&p, &b);
		prom_family(&p, "h", PROM_HISTOGRAM, NULL);
		prom_histogram(&p, NULL, bad[i], 2, counts, 1);
		assert_int_equal(prom_finish(&p), -EINVAL);
		assert_text(&b, "# TYPE h histogram\n");
		b.len = 0;
	}
	prom_labels_push(&l, "le", "1");
	prom_init(&p, &b);
	prom_family(&p, "h", PROM_HISTOGRAM, NULL);
	prom_histogram(&p, &l, bounds, 1, counts, 1);
	prom_family(&p, "g", PROM_GAUGE, NULL);
	prom_histogram(&p, NULL, bounds, 1, counts, 1);
	assert_int_equal(prom_finish(&p), -EINVAL);
	assert_text(&b, "# TYPE h histogram\n# TYPE g gauge\n");
	buf_release(&b);
}

static void inflate_all(const struct buf *gz, struct buf *out)
{
	z_stream z = { 0 };
	int zr;

	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK); /* gzip only, no zlib header */
	z.next_in = gz->data;
	z.avail_in = (uInt)gz->len;
	out->len = 0;
	do {
		assert_int_equal(buf_reserve(out, 65536), 0);
		z.next_out = out->data + out->len;
		z.avail_out = 65536;
		zr = inflate(&z, Z_NO_FLUSH);
		assert_true(zr == Z_OK || zr == Z_STREAM_END);
		out->len += 65536 - z.avail_out;
	} while (zr != Z_STREAM_END);
	assert_int_equal(z.avail_in, 0); /* nothing after the trailer */
	inflateEnd(&z);
}

static void test_gzip_round_trip(void **state)
{
	struct buf gz = { 0 }, back = { 0 }, big = { 0 };
	static const char msg[] = "# TYPE x gauge\nx 1\n";
	uint32_t seed = 1;

	assert_int_equal(prom_gzip(msg, strlen(msg), &gz), 0);
	assert_true(gz.len >= 18);
	assert_int_equal(gz.data[0], 0x1f); /* RFC 1952 magic, deflate */
	assert_int_equal(gz.data[1], 0x8b);
	assert_int_equal(gz.data[2], 8);
	inflate_all(&gz, &back);
	assert_int_equal(back.len, strlen(msg));
	assert_memory_equal(back.data, msg, back.len);

	/* Empty input; and 3 MiB of half-random bytes, with @gz's old content replaced. */
	assert_int_equal(prom_gzip("", 0, &gz), 0);
	inflate_all(&gz, &back);
	assert_int_equal(back.len, 0);
	for (size_t i = 0; i < 3u << 20; i++) {
		uint8_t c;

		seed = seed * 1103515245 + 12345;
		c = (uint8_t)(i % 7 ? seed >> 16 : 'a');
		assert_int_equal(buf_append(&big, &c, 1), 0);
	}
	assert_int_equal(prom_gzip(big.data, big.len, &gz), 0);
	inflate_all(&gz, &back);
	assert_int_equal(back.len, big.len);
	assert_memory_equal(back.data, big.data, big.len);
	buf_release(&gz);
	buf_release(&back);
	buf_release(&big);
}

static void test_accept_encoding(void **state)
{
	static const struct {
		const char *v;
		bool want;
	} cases[] = {
		{ NULL, false },
		{ "", false },
		{ "gzip", true },
		{ "GZip", true },
		{ "x-gzip", true },
		{ "identity", false },
		{ "deflate, br", false },
		{ "gzip;q=0", false },
		{ "gzip ; q=0.000", false },
		{ "gzip;q=0.001", true },
		{ "gzip;Q=1.0", true },
		{ "gzip;q=1.5", false },    /* malformed q: refused */
		{ "gzip;q=0.0001", false }, /* four decimals: malformed */
		{ "gzip;q=abc", false },
		{ "*", true },
		{ "*;q=0", false },
		{ "*, gzip;q=0", false }, /* the explicit entry wins over * */
		{ "gzip;q=0, *", false },
		{ "identity;q=1, *;q=0.5", true },
		{ "br;q=1.0, gzip;q=0.8, *;q=0.1", true }, /* Prometheus' own header */
		{ "gzipx", false },
		{ "xgzip", false },
		{ " \tgzip\t ", true },
		{ "deflate,gzip", true },
		{ "gzip;level=9;q=0", false },
		{ "gzip;foo=bar", true },
		{ ",,gzip,,", true },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		if (prom_accepts_gzip(cases[i].v) != cases[i].want) {
			print_error("Accept-Encoding \"%s\": want %d\n",
				    cases[i].v ? cases[i].v : "(null)", cases[i].want);
			fail();
		}
	}
}

/*
 * Runs `promtool check metrics` on @in; returns its exit status and what it printed (stdout
 * and stderr) in *@out (the caller frees).
 */
static int promtool_check(const struct buf *in, char **out)
{
	char in_path[] = "/tmp/test-prom-in-XXXXXX", out_path[] = "/tmp/test-prom-out-XXXXXX";
	int in_fd = mkstemp(in_path), out_fd = mkstemp(out_path), status;
	pid_t pid;

	assert_true(in_fd >= 0 && out_fd >= 0);
	assert_int_equal(write(in_fd, in->data, in->len), (ssize_t)in->len);
	assert_int_equal(lseek(in_fd, 0, SEEK_SET), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
			_exit(126);
		execlp("promtool", "promtool", "check", "metrics", (char *)NULL);
		(void)fprintf(
			stderr,
			"cannot run promtool (Debian package prometheus: scripts/deps): %m\n");
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(read_file(out_path, 1 << 20, out, NULL), 0);
	close(in_fd);
	close(out_fd);
	unlink(in_path);
	unlink(out_path);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The hostile names a GPU or a pod may have, written by us and read by the real parser. */
static void test_promtool_accepts_hostile_exposition(void **state)
{
	static const char *const hostile[] = {
		"plain",
		"NVIDIA \"GeForce\" RTX",
		"back\\slash\\",
		"\\\"",
		"two\nlines\n",
		"Grüße 名前 \xf0\x9f\x98\x80",
		"not utf-8: \xff\xfe\xc3",
		"}{,=\" # HELP x",
		"trailing \\",
		"\t\r\x01\x7f",
	};
	static const double bounds[] = { 0.001, 0.01, 0.1, 1 };
	static const uint64_t counts[] = { 5, 0, 3, 1, 2 };
	struct buf b = { 0 };
	struct prom p;
	char *out = NULL, gpu[8];
	int status;

	prom_init(&p, &b);
	prom_family(&p, "edgegpu_test_temperature_celsius", PROM_GAUGE,
		    "Help with \\ backslashes\nand newlines \"quoted\" Grüße \xff.");
	for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
		struct prom_labels l = { 0 };

		(void)snprintf(gpu, sizeof(gpu), "%zu", i);
		prom_labels_push(&l, "gpu", gpu);
		prom_labels_push(&l, "model_name", hostile[i]);
		prom_labels_push(&l, "pod", hostile[ELEMENTSOF(hostile) - 1 - i]);
		prom_sample(&p, NULL, &l, i % 2 ? NAN : 40.5 + (double)i);
	}
	prom_family(&p, "edgegpu_test_allocations_total", PROM_COUNTER, "Allocations.");
	for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
		struct prom_labels l = { 0 };

		prom_labels_push(&l, "resource", hostile[i]);
		prom_sample(&p, NULL, &l, (double)(1ull << 53) - (double)i);
	}
	prom_family(&p, "edgegpu_test_allocate_duration_seconds", PROM_HISTOGRAM, "Latency.");
	for (size_t i = 0; i < 3; i++) {
		struct prom_labels l = { 0 };

		prom_labels_push(&l, "resource", hostile[i]);
		prom_histogram(&p, &l, bounds, ELEMENTSOF(bounds), counts, 1.0 / 3.0);
	}
	prom_family(&p, "edgegpu_test_infinite", PROM_GAUGE, "Infinities.");
	prom_sample(&p, NULL, NULL, INFINITY);
	{
		struct prom_labels l = { 0 };

		prom_labels_push(&l, "sign", "minus");
		prom_sample(&p, NULL, &l, -INFINITY);
	}
	assert_int_equal(prom_finish(&p), 0);

	status = promtool_check(&b, &out);
	if (status != 0 || *out) {
		print_error("promtool check metrics: exit %d\n%s\non:\n%.*s\n", status, out,
			    (int)b.len, (const char *)b.data);
		fail();
	}
	free(out);

	/* The checker does catch a broken exposition: an unescaped quote. */
	b.len = 0;
	assert_int_equal(buf_printf(&b, "# HELP x_total x\n# TYPE x_total counter\n"
					"x_total{a=\"b\"c\"} 1\n"),
			 0);
	status = promtool_check(&b, &out);
	assert_int_equal(status, 1);
	assert_non_null(strstr(out, "parsing error"));
	free(out);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_label_values),
		cmocka_unit_test(test_help_escaping),
		cmocka_unit_test(test_duplicate_family),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_histogram_shape),
		cmocka_unit_test(test_gzip_round_trip),
		cmocka_unit_test(test_accept_encoding),
		cmocka_unit_test(test_promtool_accepts_hostile_exposition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
