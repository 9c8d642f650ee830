/*
 * The command line through its entry point, cli_main(): version, check-config, usage errors
 * and discover --json against the fake NVML. stdout and stderr are captured in temporary
 * files (dup2), and the JSON is read for content, not layout.
 */

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli-int.h"
#include "cli.h"
#include "config.h"
#include "doctor.h"
#include "file-read.h"
#include "file-writer.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"
#include "version.h"

#ifndef FAKE_NVML_LIB
#error "FAKE_NVML_LIB (the built fake libnvidia-ml.so.1) must be defined"
#endif
#ifndef CONFIG_FIXTURES
#error "CONFIG_FIXTURES (tests/fixtures/config) must be defined"
#endif

struct run {
	int rc;
	char *out;
	char *err;
};

static char *slurp(FILE *f)
{
	long n;
	char *s;

	assert_int_equal(fflush(f), 0);
	n = ftell(f);
	assert_true(n >= 0);
	s = calloc((size_t)n + 1, 1);
	assert_non_null(s);
	rewind(f);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	return s;
}

/* Runs cli_main("edgegpu", args..., NULL) with stdout and stderr captured. */
static struct run run_cli(const char *first, ...)
{
	char *argv[32];
	int argc = 0, saved_out, saved_err;
	FILE *out = tmpfile(), *err = tmpfile();
	struct run r;
	va_list ap;

	assert_non_null(out);
	assert_non_null(err);
	argv[argc++] = strdup("edgegpu");
	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		assert_true(argc < (int)ELEMENTSOF(argv) - 1);
		argv[argc++] = strdup(a);
	}
	va_end(ap);
	argv[argc] = NULL;

	assert_int_equal(fflush(stdout), 0);
	assert_int_equal(fflush(stderr), 0);
	saved_out = dup(STDOUT_FILENO);
	saved_err = dup(STDERR_FILENO);
	assert_true(saved_out >= 0 && saved_err >= 0);
	assert_true(dup2(fileno(out), STDOUT_FILENO) >= 0);
	assert_true(dup2(fileno(err), STDERR_FILENO) >= 0);
	r.rc = cli_main(argc, argv);
	(void)fflush(stdout);
	(void)fflush(stderr);
	assert_true(dup2(saved_out, STDOUT_FILENO) >= 0);
	assert_true(dup2(saved_err, STDERR_FILENO) >= 0);
	close(saved_out);
	close(saved_err);

	r.out = slurp(out);
	r.err = slurp(err);
	(void)fclose(out);
	(void)fclose(err);
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return r;
}

static void run_release(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* The command line run_cli() gets, refused as a usage error (exit 2) with @want in stderr. */
#define expect_refused(want, ...)                           \
	do {                                                \
		struct run r_ = run_cli(__VA_ARGS__, NULL); \
                                                            \
		assert_int_equal(r_.rc, 2);                 \
		assert_non_null(strstr(r_.err, want));      \
		run_release(&r_);                           \
	} while (0)

static void test_version(void **state)
{
	struct run r = run_cli("version", NULL);
	char *want = strdup_printf("edgegpu %s\nrevision: %s\nbuild date: %s\n", EDGEGPU_VERSION,
				   EDGEGPU_REVISION, EDGEGPU_BUILD_DATE);

	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, want);
	assert_string_equal(r.err, "");
	free(want);
	run_release(&r);

	r = run_cli("version", "--json", NULL);
	want = strdup_printf("{\"version\":\"%s\",\"revision\":\"%s\",\"buildDate\":\"%s\"}\n",
			     EDGEGPU_VERSION, EDGEGPU_REVISION, EDGEGPU_BUILD_DATE);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, want);
	free(want);
	run_release(&r);

	/* version takes no config flag and no argument. */
	expect_refused("see 'edgegpu version --help'", "version", "--log-level=debug");
	r = run_cli("version", "x", NULL);
	assert_int_equal(r.rc, 2);
	run_release(&r);

	r = run_cli("--version", NULL);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, EDGEGPU_VERSION));
	run_release(&r);
}

static void test_check_config_good(void **state)
{
	struct run r = run_cli("check-config", CONFIG_FIXTURES "/timeslicing.yaml", NULL);

	assert_int_equal(r.rc, 0);
	/* The effective configuration, naming its file, with the fixture's setting in it. */
	assert_non_null(strstr(r.out, "# edgegpu effective configuration"));
	assert_non_null(strstr(r.out, CONFIG_FIXTURES "/timeslicing.yaml"));
	assert_non_null(strstr(r.out, "timeSlicing"));
	assert_null(strstr(r.err, "error:"));
	run_release(&r);
}

/* The line of @file (1-based) on which @needle first appears, or 0. */
static int line_of(const char *file, const char *needle)
{
	char *text = NULL;
	size_t len = 0;
	int line = 1, found = 0;

	assert_int_equal(read_file(file, 1 << 20, &text, &len), 0);
	for (const char *p = text; *p; p++) {
		if (strncmp(p, needle, strlen(needle)) == 0) {
			found = line;
			break;
		}
		if (*p == '\n')
			line++;
	}
	free(text);
	return found;
}

static void test_check_config_bad(void **state)
{
	const char *file = CONFIG_FIXTURES "/bad-replicas.yaml";
	int line = line_of(file, "        replicas:");
	char *where = strdup_printf("%s:%d:", file, line);
	struct run r;

	assert_true(line > 0);
	r = run_cli("check-config", file, NULL);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.out, "");
	/* file:line: and the key's full path, then the verdict. */
	assert_non_null(strstr(r.err, "error: "));
	assert_non_null(strstr(r.err, where));
	assert_non_null(strstr(r.err, "sharing.timeSlicing.resources[0].replicas"));
	assert_non_null(strstr(r.err, "invalid config"));
	free(where);
	run_release(&r);

	file = CONFIG_FIXTURES "/bad-unknown-key.yaml";
	line = line_of(file, "    passDeviceSpec:");
	where = strdup_printf("%s:%d:", file, line);
	assert_true(line > 0);
	r = run_cli("check-config", file, NULL);
	assert_int_equal(r.rc, 1);
	assert_non_null(strstr(r.err, where));
	assert_non_null(strstr(r.err, "flags.plugin.passDeviceSpec"));
	free(where);
	run_release(&r);

	/* No file, or two. */
	expect_refused("check-config takes one FILE (see 'edgegpu check-config --help')",
		       "check-config");
	r = run_cli("check-config", file, file, NULL);
	assert_int_equal(r.rc, 2);
	run_release(&r);
}

static void test_unknown_command_and_flag(void **state)
{
	struct run r = run_cli("frobnicate", NULL);

	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.err, "unknown command 'frobnicate' (see 'edgegpu --help')"));
	assert_string_equal(r.out, "");
	run_release(&r);

	expect_refused("unknown flag '--frobnicate' (see 'edgegpu discover --help')", "discover",
		       "--frobnicate");

	expect_refused("unknown flag '--no-such-flag'", "check-config", "--no-such-flag=1",
		       "x.yaml");

	/* --json belongs to discover only. */
	expect_refused("--json", "check-config", "--json", "x.yaml");

	expect_refused("needs a value", "discover", "--nvml-lib");
}

/* The doctor parses its own command line (src/doctor): its usage, not the global one. */
static void test_doctor_usage(void **state)
{
	struct run r = run_cli("doctor", "--help", NULL);

	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "usage: edgegpu doctor [--json]"));
	assert_non_null(strstr(r.out, "--timeout-ms N"));
	assert_null(strstr(r.out, "edgegpu discover"));
	assert_string_equal(r.err, "");
	run_release(&r);

	/* Its own options are checked before anything runs; a config flag is taken as such. */
	r = run_cli("doctor", "--cuda-version", "twelve", NULL);
	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.err, "--cuda-version wants MAJOR.MINOR"));
	assert_string_equal(r.out, "");
	run_release(&r);

	expect_refused("--image wants an image reference", "doctor", "--image", "Not A Ref");

	expect_refused("--timeout-ms wants a positive number", "doctor", "--timeout-ms=0");

	expect_refused("flag '--host-root' needs a value", "doctor", "--host-root");

	/* An empty value, and a repeated option whose second copy has none, are refused too. */
	expect_refused("flag '--image' needs a value (see 'edgegpu doctor --help')", "doctor",
		       "--image=");
	expect_refused("flag '--cuda-version' needs a value", "doctor", "--cuda-version", "12.4",
		       "--cuda-version");

	expect_refused("unknown flag '--frobnicate'", "doctor", "--json", "--frobnicate");

	expect_refused("flag '--device-plugin-path' needs a value", "doctor",
		       "--device-plugin-path");

	expect_refused("unexpected argument 'extra'", "doctor", "extra");
}

/*
 * A little JSON reading, enough for discover's output: whitespace outside strings dropped,
 * then the objects of the "gpus" array and their "uuid" members.
 */
static char *json_compact(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;
	bool in_str = false;

	assert_non_null(out);
	for (; *s; s++) {
		if (in_str) {
			*o++ = *s;
			if (*s == '\\' && s[1])
				*o++ = *++s;
			else if (*s == '"')
				in_str = false;
		} else if (!isspace((unsigned char)*s)) {
			*o++ = *s;
			in_str = *s == '"';
		}
	}
	*o = 0;
	return out;
}

/* The uuids of the objects in the array "gpus" of compact JSON @j; returns their number. */
static int json_gpu_uuids(const char *j, char uuids[][64], int max)
{
	const char *p = strstr(j, "\"gpus\":[");
	int n = 0, depth = 0;
	bool in_str = false;

	assert_non_null(p);
	for (p += strlen("\"gpus\":["); *p; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		if (*p == '"') {
			if (depth == 1 && strncmp(p, "\"uuid\":\"", 8) == 0) {
				const char *v = p + 8, *e = strchr(v, '"');

				assert_non_null(e);
				assert_true(n <= max && e - v < 64);
				memcpy(uuids[n - 1], v, (size_t)(e - v));
				uuids[n - 1][e - v] = 0;
				p = e;
				continue;
			}
			in_str = true;
		} else if (*p == '{' || *p == '[') {
			if (depth++ == 0 && *p == '{')
				n++;
		} else if (*p == '}' || *p == ']') {
			if (depth-- == 0)
				break; /* the end of "gpus" */
		}
	}
	return n;
}

/* The "uuid = ..." values of a fake NVML fixture, in order. */
static int fixture_uuids(const char *fixture, char uuids[][64], int max)
{
	char *path = strdup_printf("%s/%s", FAKE_NVML_FIXTURES, fixture), *text = NULL;
	size_t len = 0;
	int n = 0;

	assert_int_equal(read_file(path, 1 << 20, &text, &len), 0);
	for (char *line = text, *next; line; line = next) {
		const char *v;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (strncmp(line, "uuid", 4) != 0 || !strchr(line, '='))
			continue;
		v = strchr(line, '=') + 1;
		while (*v == ' ')
			v++;
		assert_true(n < max);
		(void)snprintf(uuids[n++], 64, "%s", v);
	}
	free(text);
	free(path);
	return n;
}

static void discover_json(const char *fixture)
{
	char want[16][64] = { 0 }, got[16][64] = { 0 };
	int n_want = fixture_uuids(fixture, want, 16), n_got;
	char *path = strdup_printf("%s/%s", FAKE_NVML_FIXTURES, fixture);
	struct run r;
	char *j;

	assert_true(n_want > 0);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
	r = run_cli("discover", "--json", "--nvml-lib", FAKE_NVML_LIB, NULL);
	assert_int_equal(r.rc, 0);
	j = json_compact(r.out);
	assert_int_equal(j[0], '{');
	n_got = json_gpu_uuids(j, got, 16);
	assert_int_equal(n_got, n_want);
	for (int i = 0; i < n_want; i++)
		assert_string_equal(got[i], want[i]);
	/* One whole-GPU resource offering every GPU. */
	assert_non_null(strstr(j, "\"name\":\"nvidia.com/gpu\""));
	{
		char *devs = strdup_printf("\"devices\":%d", n_want);

		assert_non_null(strstr(j, devs));
		free(devs);
	}
	free(j);
	free(path);
	run_release(&r);
}

static void test_discover_json(void **state)
{
	discover_json("two-gpus.conf");
	discover_json("eight-gpus.conf");
}

/* The first GPU of a fake NVML fixture, and how many GPUs share its name. */
struct fixture_gpu {
	char name[96];
	char memory_mib[32];
	char cc[16];
	int gpus;
	int same_model; /* GPUs named as the first: GFD's gpu.count */
};

static void fixture_first_gpu(const char *fixture, struct fixture_gpu *g)
{
	char *path = strdup_printf("%s/%s", FAKE_NVML_FIXTURES, fixture), *text = NULL;
	char name[96] = "";
	int gpus = 0, same = 0;

	/* The fake's defaults for what a fixture leaves out (tests/fakes/nvml/fake-fixture.c). */
	(void)snprintf(g->name, sizeof(g->name), "NVIDIA Fake GPU");
	(void)snprintf(g->memory_mib, sizeof(g->memory_mib), "16384");
	(void)snprintf(g->cc, sizeof(g->cc), "8.6");
	assert_int_equal(read_file(path, 1 << 20, &text, NULL), 0);
	for (char *line = text, *next; line; line = next) {
		const char *v;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (strncmp(line, "[gpu]", 5) == 0) {
			if (gpus == 1)
				(void)snprintf(g->name, sizeof(g->name), "%s", name);
			if (gpus >= 1)
				same += streq(name, g->name);
			gpus++;
			(void)snprintf(name, sizeof(name), "NVIDIA Fake GPU");
			continue;
		}
		if (!strchr(line, '='))
			continue;
		v = strchr(line, '=') + 1;
		while (*v == ' ')
			v++;
		if (strncmp(line, "name", 4) == 0)
			(void)snprintf(name, sizeof(name), "%s", v);
		else if (gpus == 1 && strncmp(line, "memory_total", 12) == 0)
			(void)snprintf(g->memory_mib, sizeof(g->memory_mib), "%.*s",
				       (int)strcspn(v, "M"), v);
		else if (gpus == 1 && strncmp(line, "compute_capability", 18) == 0)
			(void)snprintf(g->cc, sizeof(g->cc), "%s", v);
	}
	if (gpus == 1)
		(void)snprintf(g->name, sizeof(g->name), "%s", name);
	if (gpus >= 1)
		same += streq(name, g->name);
	g->gpus = gpus;
	g->same_model = same;
	free(text);
	free(path);
}

/* The value of label @key in `labels` output, or NULL; the caller frees. */
static char *label_of(const char *out, const char *key)
{
	char *k = strdup_printf("\n%s=", key), *with_nl = strdup_printf("\n%s", out), *p, *v;

	p = strstr(with_nl, k);
	v = p ? strndup(p + strlen(k), strcspn(p + strlen(k), "\n")) : NULL;
	free(k);
	free(with_nl);
	return v;
}

static void expect_label_of(const char *out, const char *key, const char *want)
{
	char *v = label_of(out, key);

	if (!v)
		fail_msg("label %s missing in:\n%s", key, out);
	assert_string_equal(v, want);
	free(v);
}

static void labels_of_fixture(const char *fixture, const char *family)
{
	char *path = strdup_printf("%s/%s", FAKE_NVML_FIXTURES, fixture), *product, count[16];
	char sysfs[64], *cmd, *pn;
	struct fixture_gpu g;
	struct run r;

	fixture_first_gpu(fixture, &g);
	assert_true(g.gpus >= 1);
	product = strdup(g.name);
	for (char *p = product; *p; p++)
		if (*p == ' ')
			*p = '-';
	(void)snprintf(count, sizeof(count), "%d", g.same_model);
	unit_tmpdir("test-cli-sysfs", sysfs, sizeof(sysfs));
	unit_make_path(sysfs, "/class/dmi/id/");
	pn = strdup_printf("%s/class/dmi/id/product_name", sysfs);
	assert_int_equal(file_write_atomic(pn, "Edge Box 3000\n", 14, 0644, NULL), 0);

	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
	assert_int_equal(setenv("EDGEGPU_SYSFS_ROOT", sysfs, 1), 0);
	r = run_cli("labels", "--nvml-lib", FAKE_NVML_LIB, NULL);
	(void)unsetenv("EDGEGPU_SYSFS_ROOT");
	assert_int_equal(r.rc, 0);
	expect_label_of(r.out, "nvidia.com/gpu.product", product);
	expect_label_of(r.out, "nvidia.com/gpu.count", count);
	expect_label_of(r.out, "nvidia.com/gpu.memory", g.memory_mib);
	expect_label_of(r.out, "nvidia.com/gpu.family", family);
	expect_label_of(r.out, "nvidia.com/gpu.machine", "Edge-Box-3000");
	expect_label_of(r.out, "nvidia.com/gpu.sharing-strategy", "none");
	expect_label_of(r.out, "nvidia.com/cuda.driver-version.full", "550.54.15");
	{
		char *major = strndup(g.cc, strcspn(g.cc, "."));

		expect_label_of(r.out, "nvidia.com/gpu.compute.major", major);
		free(major);
	}
	/* Only label lines, nothing else on stdout. */
	for (const char *l = r.out; *l; l = strchr(l, '\n') + 1)
		assert_true(strncmp(l, "nvidia.com/", 11) == 0);
	/* GFD's timestamp, now or a moment ago, unless --no-timestamp. */
	{
		char *ts = label_of(r.out, "nvidia.com/gfd.timestamp");
		char *end = NULL;
		long long t;

		assert_non_null(ts);
		t = strtoll(ts, &end, 10);
		assert_true(end != ts && *end == '\0');
		assert_true(t <= (long long)time(NULL) && t > (long long)time(NULL) - 600);
		free(ts);
	}
	run_release(&r);
	r = run_cli("labels", "--nvml-lib", FAKE_NVML_LIB, "--no-timestamp", NULL);
	assert_int_equal(r.rc, 0);
	assert_null(strstr(r.out, "gfd.timestamp"));
	expect_label_of(r.out, "nvidia.com/gpu.count", count);
	run_release(&r);

	/* A config of the command line applies: time-slicing nvidia.com/gpu. */
	cmd = strdup_printf("%s/ts.yaml", sysfs);
	assert_int_equal(file_write_atomic(cmd,
					   "version: v1\nsharing: {timeSlicing: {resources: "
					   "[{name: nvidia.com/gpu, replicas: 3}]}}\n",
					   strlen("version: v1\nsharing: {timeSlicing: {resources: "
						  "[{name: nvidia.com/gpu, replicas: 3}]}}\n"),
					   0644, NULL),
			 0);
	r = run_cli("labels", "--nvml-lib", FAKE_NVML_LIB, "--config-file", cmd, NULL);
	assert_int_equal(r.rc, 0);
	expect_label_of(r.out, "nvidia.com/gpu.replicas", "3");
	expect_label_of(r.out, "nvidia.com/gpu.sharing-strategy", "time-slicing");
	{
		char *shared = strdup_printf("%s-SHARED", product);

		expect_label_of(r.out, "nvidia.com/gpu.product", shared);
		free(shared);
	}
	run_release(&r);
	free(cmd);
	unit_rm_tree(sysfs);
	free(pn);
	free(product);
	free(path);
}

static void test_labels(void **state)
{
	struct run r;

	labels_of_fixture("two-gpus.conf", "ampere");
	labels_of_fixture("eight-gpus.conf", "ampere");

	/* No GPU: no labels, said on stderr, not an error. */
	{
		char *path = strdup_printf("%s/zero-gpus.conf", FAKE_NVML_FIXTURES);

		assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
		r = run_cli("labels", "--nvml-lib", FAKE_NVML_LIB, NULL);
		assert_int_equal(r.rc, 0);
		assert_string_equal(r.out, "");
		assert_non_null(strstr(r.err, "no usable GPU"));
		run_release(&r);
		free(path);
	}
	/* No NVML: an error, no labels. Extra arguments: a usage error. */
	r = run_cli("labels", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", NULL);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.out, "");
	assert_non_null(strstr(r.err, "/nonexistent/libnvidia-ml.so.1"));
	run_release(&r);
	expect_refused("unexpected argument 'extra'", "labels", "extra");
	r = run_cli("--help", NULL);
	assert_non_null(strstr(r.out, "edgegpu labels"));
	run_release(&r);
}

static void test_discover_without_nvml(void **state)
{
	struct run r = run_cli("discover", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", NULL);

	assert_int_equal(r.rc, 1);
	assert_string_equal(r.out, "");
	assert_non_null(strstr(r.err, "/nonexistent/libnvidia-ml.so.1"));
	run_release(&r);
}

/* A Jetson without NVML (the Orin fixture board): the iGPU and the board, from --host-root. */
static void test_discover_jetson(void **state)
{
	char root[512];
	struct run r;

	(void)snprintf(root, sizeof(root), "%s/orin-nano-r36", TEGRA_BOARDS);
	r = run_cli("discover", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--host-root", root,
		    NULL);
	if (r.rc != 0)
		print_error("%s", r.err);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "board NVIDIA Jetson Orin Nano Engineering Reference "
				      "Developer Kit Super, SoC tegra234, L4T 36.4.3, JetPack 6.2, "
				      "power mode MAXN_SUPER\n"));
	assert_non_null(strstr(r.out, "  0  tegra  Orin "));
	run_release(&r);
	r = run_cli("discover", "--json", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1",
		    "--host-root", root, NULL);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "\"l4t\":\"36.4.3\""));
	assert_non_null(strstr(r.out, "\"uuid\":\"tegra\""));
	run_release(&r);
}

/* --- --help and the man page against the tables the parsers read --- */

static const char *const config_verbs[] = { "serve", "discover", "check-config", "labels",
					    "doctor" };

struct want {
	const char *text;
	const char *verb;
	bool roff; /* the text is the man page: '-' is written "\-" */
	unsigned n_flags;
};

static void assert_has(const struct want *w, const char *what, const char *name)
{
	char buf[256];
	size_t o = 0;

	for (const char *p = what; *p && o + 3 < sizeof(buf); p++) {
		if (w->roff && *p == '-')
			buf[o++] = '\\';
		buf[o++] = *p;
	}
	buf[o] = 0;
	if (!strstr(w->text, buf))
		fail_msg("%s: %s of %s missing", w->verb, buf, name);
}

static int check_listed(const struct config_flag_info *fi, void *userdata)
{
	struct want *w = userdata;
	const char *name = fi->flag[0] ? fi->flag[0] : fi->env[0];
	char flag[128];

	for (int i = 0; i < 2; i++) {
		if (fi->flag[i]) {
			/* the doctor's own --host-root stands where the config's would be */
			if (strcmp(w->verb, "doctor") == 0 && strcmp(fi->flag[i], "host-root") == 0)
				continue;
			(void)snprintf(flag, sizeof(flag), "--%s", fi->flag[i]);
			assert_has(w, flag, name);
			w->n_flags++;
		}
		if (fi->env[i])
			assert_has(w, fi->env[i], name);
	}
	if (fi->key)
		assert_has(w, fi->key, name);
	assert_true(fi->help[0] != 0);
	assert_has(w, fi->help, name);
	return 0;
}

static int count_flags(const struct config_flag_info *fi, void *userdata)
{
	unsigned *n = userdata;

	*n += !!fi->flag[0] + !!fi->flag[1];
	return 0;
}

/* Every setting with a flag or a variable is in each verb's --help: flags, variables, key. */
static void test_help_lists_every_flag(void **state)
{
	unsigned n_table = 0;

	assert_int_equal(config_flags_foreach(count_flags, &n_table), 0);
	/* the 10 of the old hand-written list and the ones it left out */
	assert_true(n_table > 40);
	for (size_t v = 0; v <= ELEMENTSOF(config_verbs); v++) {
		const char *verb = v < ELEMENTSOF(config_verbs) ? config_verbs[v] : NULL;
		struct run r = verb ? run_cli(verb, "--help", NULL) : run_cli("--help", NULL);
		struct want w = { .text = r.out, .verb = verb ? verb : "edgegpu" };

		assert_int_equal(r.rc, 0);
		assert_string_equal(r.err, "");
		assert_int_equal(config_flags_foreach(check_listed, &w), 0);
		assert_int_equal(w.n_flags, n_table - (verb && strcmp(verb, "doctor") == 0));
		assert_non_null(strstr(r.out, "--metrics-address ADDR"));
		assert_non_null(strstr(r.out, "--host-proc DIR"));
		assert_non_null(strstr(r.out, "--container-driver-root PATH"));
		assert_non_null(strstr(r.out, "--log-format logfmt|json"));
		run_release(&r);
	}
	/* The doctor's own options, and its usage only. */
	struct run r = run_cli("doctor", "-h", NULL);

	assert_int_equal(r.rc, 0);
	for (const struct doctor_option *o = doctor_options; o->name; o++) {
		char flag[64];

		(void)snprintf(flag, sizeof(flag), "--%s", o->name);
		assert_non_null(strstr(r.out, flag));
		assert_non_null(strstr(r.out, o->help));
	}
	assert_null(strstr(r.out, "edgegpu discover"));
	run_release(&r);
	/* help COMMAND is COMMAND --help. */
	r = run_cli("help", "labels", NULL);
	struct run r2 = run_cli("labels", "--help", NULL);

	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, r2.out);
	run_release(&r);
	run_release(&r2);
}

/*
 * Every --name in @text (a verb's --help, or the man page with @roff) is taken by the parser of
 * @verb: as a config flag (check-config parses it; whatever the value, the answer is never
 * "unknown flag", which is exit status 2), or as one of the verb's own options.
 */
static void check_accepted(const char *verb, const char *text, bool roff)
{
	const char *dash = roff ? "\\-\\-" : "--";
	unsigned n = 0;

	for (const char *p = strstr(text, dash); p; p = strstr(p, dash)) {
		char name[128];
		size_t o = 0;
		bool own = false;

		p += strlen(dash);
		while (o + 1 < sizeof(name) &&
		       (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' ||
			(roff && p[0] == '\\' && p[1] == '-'))) {
			if (*p != '\\')
				name[o++] = *p;
			p++;
		}
		name[o] = 0;
		if (!o)
			continue;
		n++;
		if (strcmp(name, "help") == 0)
			continue;
		for (const struct doctor_option *d = doctor_options; d->name; d++)
			own |= strcmp(d->name, name) == 0 && (!verb || strcmp(verb, "doctor") == 0);
		for (const struct cli_option *c = cli_options; c->name; c++)
			for (int v = 0; v < CLI_VERB_COUNT; v++)
				own |= (c->verbs & CLI_VERB_BIT(v)) && strcmp(c->name, name) == 0 &&
				       (!verb || strcmp(verb, cli_verbs[v].name) == 0);
		if (own)
			continue;
		char arg[160];

		(void)snprintf(arg, sizeof(arg), "--%s=zz", name);
		struct run r = run_cli("check-config", "/dev/null", arg, NULL);

		if (r.rc == 2 || strstr(r.err, "unknown flag"))
			fail_msg("%s: '--%s' is listed but not accepted: %s",
				 verb ? verb : "edgegpu", name, r.err);
		run_release(&r);
	}
	assert_true(n > 40);
}

static void test_help_flags_are_accepted(void **state)
{
	for (size_t v = 0; v <= ELEMENTSOF(config_verbs); v++) {
		const char *verb = v < ELEMENTSOF(config_verbs) ? config_verbs[v] : NULL;
		struct run r = verb ? run_cli(verb, "--help", NULL) : run_cli("--help", NULL);

		check_accepted(verb, r.out, false);
		run_release(&r);
	}
}

/* The man page: every section, every setting of the table, and nothing the parser refuses. */
static void test_man_page(void **state)
{
	static const char *const sections[] = { "NAME",	    "SYNOPSIS",	   "DESCRIPTION",
						"COMMANDS", "OPTIONS",	   "ENVIRONMENT",
						"FILES",    "EXIT STATUS", "SEE ALSO" };
	struct run r = run_cli("help", "--man", NULL);
	struct want w = { .verb = "man", .roff = true };
	unsigned n_table = 0;
	const char *at = NULL;

	assert_int_equal(r.rc, 0);
	assert_string_equal(r.err, "");
	assert_true(strncmp(r.out, ".TH EDGEGPU 8 ", 14) == 0);
	for (size_t i = 0; i < ELEMENTSOF(sections); i++) {
		char sh[64];
		const char *p;

		(void)snprintf(sh, sizeof(sh), "\n.SH %s\n", sections[i]);
		p = strstr(r.out, sh);
		if (!p)
			fail_msg("no section %s", sections[i]);
		assert_true(p > at); /* in this order */
		at = p;
	}
	/* No line starts with a quote or a dot that is not a request: roff would eat it. */
	for (const char *p = r.out; p; p = strchr(p + 1, '\n'))
		assert_false(p[1] == '\'');
	w.text = r.out;
	assert_int_equal(config_flags_foreach(check_listed, &w), 0);
	assert_int_equal(config_flags_foreach(count_flags, &n_table), 0);
	assert_int_equal(w.n_flags, n_table);
	check_accepted(NULL, r.out, true);
	run_release(&r);
}

/* docs/config.md names every flag and every variable of the table, in backquotes. */
static int check_documented(const struct config_flag_info *fi, void *userdata)
{
	const char *doc = userdata;
	char want[128];

	for (int i = 0; i < 2; i++) {
		if (fi->flag[i]) {
			(void)snprintf(want, sizeof(want), "`--%s`", fi->flag[i]);
			if (!strstr(doc, want))
				fail_msg("docs/config.md: %s missing", want);
		}
		if (fi->env[i]) {
			(void)snprintf(want, sizeof(want), "`%s`", fi->env[i]);
			if (!strstr(doc, want))
				fail_msg("docs/config.md: %s missing", want);
		}
	}
	if (fi->key) {
		/* a row's key, whole or as the last parts under a section's table */
		const char *last = strrchr(fi->key, '.');

		(void)snprintf(want, sizeof(want), "`%s`", fi->key);
		if (!strstr(doc, want)) {
			(void)snprintf(want, sizeof(want), "`%s`", last ? last + 1 : fi->key);
			if (!strstr(doc, want))
				fail_msg("docs/config.md: key %s missing", fi->key);
		}
	}
	return 0;
}

static void test_docs_config(void **state)
{
	char *doc = NULL;
	size_t len;

	assert_int_equal(read_file(CONFIG_FIXTURES "/../../../docs/config.md", 1 << 20, &doc, &len),
			 0);
	assert_int_equal(config_flags_foreach(check_documented, doc), 0);
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_check_config_good),
		cmocka_unit_test(test_check_config_bad),
		cmocka_unit_test(test_unknown_command_and_flag),
		cmocka_unit_test(test_discover_json),
		cmocka_unit_test(test_discover_without_nvml),
		cmocka_unit_test(test_discover_jetson),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_doctor_usage),
		cmocka_unit_test(test_help_lists_every_flag),
		cmocka_unit_test(test_help_flags_are_accepted),
		cmocka_unit_test(test_man_page),
		cmocka_unit_test(test_docs_config),
	};

	/* A clean environment: no CONFIG_FILE or NVML_LIB from outside changes the verbs. */
	(void)unsetenv("CONFIG_FILE");
	(void)unsetenv("NVML_LIB");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
