/*
 * The Tegra iGPU's telemetry from sysfs (tegra-sample.c) on the host trees of
 * tests/fixtures/tegra/make-board ($TEGRA_BOARDS): every value against the board's
 * expect.json; each file it reads removed, holding garbage, the -256 sentinel, huge, turned
 * into a directory, or a link out of the root, with every other field still right; NVML's
 * answers kept; a non-Tegra arm64 server left empty; the pure parsers on their own.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-read.h"
#include "tegra-int.h"
#include "tegra-parse.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

static const char *const tegra_boards[] = { "nano-r32", "xavier-nx-r35", "orin-nano-r36",
					    "agx-thor-r38", "thor-dgpu" };

#define RAILS_MAX 8

/* snprintf() into the array @buf; a text that does not fit fails the test. */
#define fmt_fits(buf, ...) \
	assert_true((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__) < sizeof(buf))

/* What expect.json says of the iGPU; NaN where it says null or nothing. */
struct expect {
	double load, clock, clock_min, clock_max, temp, board_w, gpu_w, emc;
	uint64_t mem_total, mem_avail;
	unsigned n_rails;
	char rails[RAILS_MAX][GPU_RAIL_NAME_MAX];
	double rail_w[RAILS_MAX];
};

static const char *boards_dir(void)
{
	const char *d = getenv("TEGRA_BOARDS");

	/* Unset only where the build has no python3 to make the boards. */
	if (!d)
		skip();
	return d;
}

/* The number after "@key": in @j (make-board writes each iGPU key once); NaN for null. */
static double json_num(const char *j, const char *key)
{
	char pat[80], *end;
	const char *p;
	double v;

	fmt_fits(pat, "\"%s\": ", key);
	p = strstr(j, pat);
	if (!p)
		return NAN;
	p += strlen(pat);
	if (startswith(p, "null"))
		return NAN;
	v = strtod(p, &end);
	assert_true(end != p);
	return v;
}

static void expect_load(const char *board, struct expect *e)
{
	char path[PATH_MAX], *j = NULL;
	const char *p, *w;

	fmt_fits(path, "%s/%s/expect.json", boards_dir(), board);
	assert_int_equal(read_file(path, 1 << 20, &j, NULL), 0);
	*e = (struct expect){
		.load = json_num(j, "load_pct"),
		.clock = json_num(j, "clock_mhz"),
		.clock_min = json_num(j, "clock_min_mhz"),
		.clock_max = json_num(j, "clock_max_mhz"),
		.temp = json_num(j, "temperature_c"),
		.board_w = json_num(j, "board_power_w"),
		.gpu_w = json_num(j, "gpu_power_w"),
		.emc = json_num(j, "emc_clock_mhz"),
		.mem_total = (uint64_t)json_num(j, "mem_total"),
		.mem_avail = (uint64_t)json_num(j, "mem_available"),
	};
	p = strstr(j, "\"rails\": [");
	w = strstr(j, "\"rail_watts\": {");
	assert_non_null(p);
	assert_non_null(w);
	for (p = strchr(p, '[') + 1;;) {
		const char *q = strpbrk(p, "\"]"), *end;

		assert_non_null(q);
		if (*q == ']')
			break;
		end = strchr(q + 1, '"');
		assert_true(end && e->n_rails < RAILS_MAX && end - q - 1 < GPU_RAIL_NAME_MAX);
		memcpy(e->rails[e->n_rails], q + 1, (size_t)(end - q - 1));
		e->rail_w[e->n_rails] = json_num(w, e->rails[e->n_rails]);
		assert_false(isnan(e->rail_w[e->n_rails]));
		e->n_rails++;
		p = end + 1;
	}
	assert_true(e->n_rails > 0);
	free(j);
}

/* Field groups: each file read feeds one (a mutated file may leave its group absent). */
enum {
	F_LOAD = 1 << 0,
	F_CLOCK = 1 << 1,
	F_EMC = 1 << 2,
	F_TEMP = 1 << 3,
	F_POWER = 1 << 4,
	F_MEM = 1 << 5,
};

/* Rails come V x I or, on iio without them, from a mW file: a mW either way. */
#define WATT_TOL 0.002

/* @got is @want (both NaN when @want is), or NaN when @loose. */
static void check_num(double got, double want, double tol, bool loose, const char *what,
		      const char *ctx)
{
	bool ok = isnan(want) ? isnan(got) : (isnan(got) && loose) || fabs(got - want) <= tol;

	if (!ok)
		fail_msg("%s: %s = %g, want %g%s", ctx, what, got, want, loose ? " or absent" : "");
}

static int rail_index(const struct expect *e, const char *name)
{
	for (unsigned i = 0; i < e->n_rails; i++)
		if (streq(e->rails[i], name))
			return (int)i;
	return -1;
}

/* @s against @e; the groups in @loose may be absent (or, for power, partial) instead. */
static void check_sample(const struct expect *e, const struct gpu_sample *s, unsigned loose,
			 const char *ctx)
{
	double sum = 0;

	check_num(s->util_gpu, e->load, 1e-9, loose & F_LOAD, "util_gpu", ctx);
	check_num(s->sm_clock_mhz, e->clock, 1e-9, loose & F_CLOCK, "sm_clock_mhz", ctx);
	check_num(s->sm_clock_min_mhz, e->clock_min, 1e-9, loose & F_CLOCK, "sm_clock_min", ctx);
	check_num(s->sm_clock_max_mhz, e->clock_max, 1e-9, loose & F_CLOCK, "sm_clock_max", ctx);
	check_num(s->mem_clock_mhz, e->emc, 1e-9, loose & F_EMC, "mem_clock_mhz", ctx);
	check_num(s->util_mem, NAN, 0, false, "util_mem", ctx); /* no board has an EMC load */
	check_num(s->temperature_c, e->temp, 1e-9, loose & F_TEMP, "temperature_c", ctx);
	if (loose & F_POWER) {
		/* Each rail still read is right; the totals follow from those read. */
		assert_true(s->n_rails <= e->n_rails + 1);
		for (unsigned i = 0; i < s->n_rails; i++) {
			int k = rail_index(e, s->rails[i].name);

			sum += s->rails[i].watts;
			if (k >= 0)
				check_num(s->rails[i].watts, e->rail_w[k], WATT_TOL, false,
					  s->rails[i].name, ctx);
		}
		if (!isnan(s->board_power_w) && fabs(s->board_power_w - e->board_w) > WATT_TOL &&
		    fabs(s->board_power_w - sum) > WATT_TOL)
			fail_msg("%s: board_power_w = %g, neither %g nor the rails' %g", ctx,
				 s->board_power_w, e->board_w, sum);
		check_num(s->power_w, e->gpu_w, WATT_TOL, true, "power_w", ctx);
	} else {
		if (s->n_rails != e->n_rails)
			fail_msg("%s: %u rails, want %u", ctx, s->n_rails, e->n_rails);
		for (unsigned i = 0; i < s->n_rails; i++) {
			assert_string_equal(s->rails[i].name, e->rails[i]);
			check_num(s->rails[i].watts, e->rail_w[i], WATT_TOL, false, e->rails[i],
				  ctx);
		}
		check_num(s->board_power_w, e->board_w, WATT_TOL, false, "board_power_w", ctx);
		check_num(s->power_w, e->gpu_w, WATT_TOL, false, "power_w", ctx);
	}
	assert_int_equal(s->mem_total, e->mem_total);
	if (!(loose & F_MEM) || s->mem_free != UINT64_MAX) {
		assert_int_equal(s->mem_free, MIN(e->mem_avail, e->mem_total));
		assert_int_equal(s->mem_used, e->mem_total - MIN(e->mem_avail, e->mem_total));
	} else
		assert_int_equal(s->mem_used, UINT64_MAX);
}

/* Finds and reads a board below @root, as tegra.c does (mem_total from discovery). */
static void sample_board(const char *root, const struct expect *e, struct tegra_paths *p,
			 struct gpu_sample *s)
{
	p->mem_total = e->mem_total;
	(void)tegra_paths_find(root, "tegra", p);
	gpu_sample_init(s);
	tegra_sample_read(p, s);
}

static void test_boards(void **state)
{
	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(tegra_boards); i++) {
		char root[PATH_MAX];
		struct tegra_paths p = { 0 };
		struct gpu_sample s;
		struct expect e;

		fmt_fits(root, "%s/%s", boards_dir(), tegra_boards[i]);
		expect_load(tegra_boards[i], &e);
		sample_board(root, &e, &p, &s);
		assert_string_equal(p.host_root, root);
		assert_true(p.devfreq_dir[0] && p.gpu_dir[0] && p.thermal_zone[0]);
		assert_int_equal(p.n_power_dirs, 1);
		/* Resolved: the real directories, seen from the root. */
		assert_true(startswith(p.gpu_dir, "/sys/devices/"));
		assert_true(startswith(p.thermal_zone, "/sys/devices/virtual/thermal/"));
		assert_int_equal(!!p.emc_dir[0], !isnan(e.emc));
		check_sample(&e, &s, 0, tegra_boards[i]);
	}
}

static void test_arm64_server(void **state)
{
	char root[PATH_MAX];
	struct tegra_paths p = { 0 };
	struct gpu_sample s, empty;

	(void)state;
	fmt_fits(root, "%s/arm64-server", boards_dir());
	assert_int_equal(tegra_paths_find(root, "", &p), 0);
	assert_int_equal(p.n_power_dirs, 0);
	gpu_sample_init(&s);
	gpu_sample_init(&empty);
	tegra_sample_read(&p, &s);
	assert_memory_equal(&s, &empty, sizeof(s));
	/* A root that is not there: nothing, no crash. */
	assert_int_equal(tegra_paths_find("/nonexistent/edgegpu-tegra", "tegra234", &p), 0);
	tegra_sample_read(&p, &s);
	assert_memory_equal(&s, &empty, sizeof(s));
}

/* A host root too long for a path: cut, it would name another directory; none is read. */
static void test_root_too_long(void **state)
{
	char root[PATH_MAX + 16];
	struct tegra_paths p = { 0 };
	struct gpu_sample s, empty;

	(void)state;
	fmt_fits(root, "%s/orin-nano-r36", boards_dir());
	assert_true(tegra_paths_find(root, "tegra234", &p) >= 4);
	/* A tail of "/." past PATH_MAX: cut or not, the board's root; refused for its length. */
	for (size_t n = strlen(root); n + 2 < sizeof(root); n += 2)
		memcpy(root + n, "/.", 3);
	p.mem_total = 1ull << 30;
	assert_int_equal(tegra_paths_find(root, "tegra234", &p), 0);
	assert_string_equal(p.host_root, "");
	assert_int_equal(p.mem_total, 0);
	gpu_sample_init(&s);
	gpu_sample_init(&empty);
	tegra_sample_read(&p, &s);
	assert_memory_equal(&s, &empty, sizeof(s));
}

/* NVML's answers stay; sysfs fills the rest. */
static void test_nvml_kept(void **state)
{
	char root[PATH_MAX];
	struct tegra_paths p = { 0 };
	struct gpu_sample s;
	struct expect e;

	(void)state;
	fmt_fits(root, "%s/orin-nano-r36", boards_dir());
	expect_load("orin-nano-r36", &e);
	p.mem_total = e.mem_total;
	assert_true(tegra_paths_find(root, "tegra234", &p) >= 4);
	gpu_sample_init(&s);
	s.util_gpu = 37;
	s.temperature_c = 50;
	s.power_w = 31;
	s.sm_clock_mhz = 999;
	s.board_power_w = 99;
	s.mem_free = 123;
	s.n_rails = 1;
	(void)snprintf(s.rails[0].name, sizeof(s.rails[0].name), "NVML");
	tegra_sample_read(&p, &s);
	assert_true(s.util_gpu == 37 && s.temperature_c == 50 && s.power_w == 31);
	assert_true(s.sm_clock_mhz == 999 && s.board_power_w == 99);
	assert_int_equal(s.mem_free, 123);
	assert_int_equal(s.n_rails, 1);
	assert_string_equal(s.rails[0].name, "NVML");
	assert_true(s.sm_clock_min_mhz == e.clock_min && s.sm_clock_max_mhz == e.clock_max);
	assert_int_equal(s.mem_total, e.mem_total);
	assert_int_equal(s.mem_used, e.mem_total - 123);
}

/* A carve-out smaller than what is available: all of it free, none used. */
static void test_carve_out(void **state)
{
	char root[PATH_MAX];
	struct tegra_paths p = { 0 };
	struct gpu_sample s;

	(void)state;
	fmt_fits(root, "%s/orin-nano-r36", boards_dir());
	p.mem_total = 1ull << 30;
	(void)tegra_paths_find(root, "tegra234", &p);
	assert_int_equal(p.mem_total, 1ull << 30);
	gpu_sample_init(&s);
	tegra_sample_read(&p, &s);
	assert_int_equal(s.mem_total, 1ull << 30);
	assert_int_equal(s.mem_free, 1ull << 30);
	assert_int_equal(s.mem_used, 0);
}

/* ---- hostile files ---- */

struct target {
	char path[PATH_MAX]; /* absolute, real (no link on the way) */
	unsigned group;
};

struct targets {
	unsigned n;
	struct target v[64];
};

static void target_add(struct targets *t, const char *root, const char *dir, const char *name,
		       unsigned group)
{
	char path[PATH_MAX * 3], *real;

	fmt_fits(path, "%s/%s/%s", root, dir, name);
	real = realpath(path, NULL);
	if (!real)
		return; /* not on this board (Thor: no load, no of_node) */
	assert_true(t->n < ELEMENTSOF(t->v) && strlen(real) < PATH_MAX);
	fmt_fits(t->v[t->n].path, "%s", real);
	t->v[t->n++].group = group;
	free(real);
}

/* Every file the reader reads on the board copied to @root, and the group each one feeds. */
static void targets_list(const char *root, const struct tegra_paths *p, struct targets *t)
{
	char pat[PATH_MAX * 3];
	glob_t g;

	*t = (struct targets){ 0 };
	target_add(t, root, p->gpu_dir, "load", F_LOAD);
	target_add(t, root, p->gpu_dir, "of_node/name", F_LOAD | F_CLOCK);
	target_add(t, root, p->devfreq_dir, "cur_freq", F_CLOCK);
	target_add(t, root, p->devfreq_dir, "min_freq", F_CLOCK);
	target_add(t, root, p->devfreq_dir, "max_freq", F_CLOCK);
	if (p->emc_dir[0])
		target_add(t, root, p->emc_dir, "cur_freq", F_EMC);
	target_add(t, root, p->thermal_zone, "temp", F_TEMP);
	target_add(t, root, p->thermal_zone, "type", F_TEMP);
	fmt_fits(pat, "%s%s/*", root, p->power_dirs[0]);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++)
		target_add(t, "", "", g.gl_pathv[i], F_POWER);
	globfree(&g);
	fmt_fits(pat, "%s/sys/bus/i2c/devices/*/name", root);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++)
		target_add(t, "", "", g.gl_pathv[i], F_POWER);
	globfree(&g);
	target_add(t, root, "", "proc/meminfo", F_MEM);
}

enum mutation {
	M_REMOVE,
	M_GARBAGE,
	M_SENTINEL,
	M_HUGE,
	M_DIR,
	M_ESCAPE,
	M_ESCAPE_ABS,
	M_N
};
static const char *const mutation_names[M_N] = {
	"removed", "garbage", "-256000", "huge", "a directory", "a link out", "an absolute link"
};

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(fd_write_all(fd, data, len), 0);
	close(fd);
}

static void remove_any(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return;
	assert_int_equal(S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path), 0);
}

/*
 * Turns the file at @path (below @root) into what @m says. A link "out" climbs one level above
 * the root to @outside (a file holding a plausible value a naive reader would take).
 */
static void mutate(const char *root, const char *path, enum mutation m, const char *outside)
{
	static const char garbage[] = "\x01\xfe"
				      "12abc\n";
	char target[PATH_MAX] = "";
	size_t huge = 1 << 20, n = 0;
	char *big;

	remove_any(path);
	switch (m) {
	case M_REMOVE:
		break;
	case M_GARBAGE:
		write_file(path, garbage, sizeof(garbage) - 1);
		break;
	case M_SENTINEL:
		write_file(path, "-256000\n", 8);
		break;
	case M_HUGE:
		big = malloc(huge);
		assert_non_null(big);
		memset(big, '7', huge);
		write_file(path, big, huge);
		free(big);
		break;
	case M_DIR:
		assert_int_equal(mkdir(path, 0755), 0);
		break;
	case M_ESCAPE:
		/* One "../" per directory between the root and the file, and one more. */
		for (const char *c = path + strlen(root); *c; c++)
			if (*c == '/') {
				assert_true(n + 3 + sizeof("outside") < sizeof(target));
				n += (size_t)snprintf(target + n, sizeof(target) - n, "../");
			}
		memcpy(target + n, "outside", sizeof("outside"));
		assert_int_equal(symlink(target, path), 0);
		break;
	case M_ESCAPE_ABS:
		assert_int_equal(symlink(outside, path), 0);
		break;
	case M_N:
		break;
	}
}

static void test_hostile(void **state)
{
	char tmp[64], cmd[PATH_MAX * 3], root[PATH_MAX], outside[PATH_MAX], ctx[PATH_MAX + 64];
	struct targets t;

	(void)state;
	unit_tmpdir("edgegpu-tegra", tmp, sizeof(tmp));
	fmt_fits(outside, "%s/outside", tmp);
	write_file(outside, "1\n", 2);
	for (size_t b = 0; b < ELEMENTSOF(tegra_boards); b++) {
		struct tegra_paths clean = { 0 }, p;
		struct gpu_sample s;
		struct expect e;

		expect_load(tegra_boards[b], &e);
		fmt_fits(root, "%s/%s", tmp, tegra_boards[b]);
		fmt_fits(cmd, "cp -a '%s/%s' '%s'", boards_dir(), tegra_boards[b], root);
		assert_int_equal(system(cmd), 0);
		sample_board(root, &e, &clean, &s);
		check_sample(&e, &s, 0, "copy");
		targets_list(root, &clean, &t);
		assert_true(t.n >= 8);
		for (unsigned i = 0; i < t.n; i++) {
			char *orig = NULL;
			size_t orig_len = 0;

			assert_int_equal(read_file(t.v[i].path, 1 << 20, &orig, &orig_len), 0);
			for (enum mutation m = 0; m < M_N; m++) {
				(void)snprintf(ctx, sizeof(ctx), "%s: %s %s", tegra_boards[b],
					       t.v[i].path + strlen(root), mutation_names[m]);
				mutate(root, t.v[i].path, m, outside);
				/* Paths found before the change (a file changing under us)... */
				gpu_sample_init(&s);
				tegra_sample_read(&clean, &s);
				check_sample(&e, &s, t.v[i].group, ctx);
				/* ...and after it (discovery, or a refresh, seeing it). */
				p = (struct tegra_paths){ 0 };
				sample_board(root, &e, &p, &s);
				check_sample(&e, &s, t.v[i].group, ctx);
			}
			remove_any(t.v[i].path);
			write_file(t.v[i].path, orig, orig_len);
			free(orig);
		}
		/* Restored: all back. */
		sample_board(root, &e, &clean, &s);
		check_sample(&e, &s, 0, "restored");
	}
	unit_rm_tree(tmp);
}

/*
 * Early boot: the devfreq node appears after discovery, and a refresh (tegra_paths_find()
 * again) finds it. A zone numbered 10 whose type is also the GPU's does not win over zone 2
 * (numbers, not names, order the zones).
 */
/* Counts the lines of @path holding both @a and @b. */
static unsigned count_lines(const char *path, const char *a, const char *b)
{
	char line[2048];
	unsigned n = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, a) && strstr(line, b);
	(void)fclose(f);
	return n;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/*
 * A file that turns to garbage is said once at warn however many samples read it, its return
 * once at info; a file the board never had (Orin's EMC load) is never said; a file read well
 * that vanishes is said once.
 */
static void test_bad_file_said_once(void **state)
{
	char tmp[256], root[512], cmd[2048], log[512], load[PATH_MAX + 512];
	struct tegra_paths p = { 0 };
	struct gpu_sample s;
	struct expect e;
	int saved, fd, flushed;

	(void)state;
	unit_tmpdir("edgegpu-tegra-log", tmp, sizeof(tmp));
	fmt_fits(root, "%s/orin-nano-r36", tmp);
	fmt_fits(cmd, "cp -a '%s/orin-nano-r36' '%s'", boards_dir(), root);
	assert_int_equal(system(cmd), 0);
	fmt_fits(log, "%s/stderr.log", tmp);
	expect_load("orin-nano-r36", &e);
	sample_board(root, &e, &p, &s);
	assert_true((size_t)snprintf(load, sizeof(load), "%s%s/load", root, p.gpu_dir) <
		    sizeof(load));

	assert_int_equal(fflush(stderr), 0);
	saved = dup(STDERR_FILENO);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	write_text(load, "garbage\n");
	for (int i = 0; i < 5; i++) {
		gpu_sample_init(&s);
		tegra_sample_read(&p, &s);
		assert_true(isnan(s.util_gpu));
	}
	write_text(load, "250\n");
	for (int i = 0; i < 3; i++) {
		gpu_sample_init(&s);
		tegra_sample_read(&p, &s);
		assert_true(s.util_gpu == 25.0);
	}
	assert_int_equal(unlink(load), 0);
	for (int i = 0; i < 3; i++) {
		gpu_sample_init(&s);
		tegra_sample_read(&p, &s);
	}
	/* Checked once stderr is back, where a failure can be read. */
	flushed = fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	close(fd);
	assert_int_equal(flushed, 0);

	assert_int_equal(count_lines(log, "level=warn", "/load\""), 2);
	assert_int_equal(count_lines(log, "level=warn", "errno=22"), 1);     /* the garbage */
	assert_int_equal(count_lines(log, "level=warn", "No such file"), 1); /* vanished */
	assert_int_equal(count_lines(log, "level=info", "/load\""), 1);	     /* back */
	/* Only the load file went bad: no other file was said, at any level. */
	assert_int_equal(count_lines(log, "a Tegra telemetry file", ""), 3);
	unit_rm_tree(tmp);
}

static void test_late_devfreq(void **state)
{
	char tmp[64], cmd[PATH_MAX * 3], root[PATH_MAX], link_path[PATH_MAX * 2], target[PATH_MAX];
	struct tegra_paths p = { 0 };
	struct gpu_sample s;
	struct expect e;
	ssize_t n;

	(void)state;
	unit_tmpdir("edgegpu-tegra-late", tmp, sizeof(tmp));
	fmt_fits(root, "%s/nano-r32", tmp);
	fmt_fits(cmd, "cp -a '%s/nano-r32' '%s'", boards_dir(), root);
	assert_int_equal(system(cmd), 0);
	expect_load("nano-r32", &e);
	fmt_fits(cmd,
		 "d='%s/sys/devices/virtual/thermal/thermal_zone10' && mkdir -p \"$d\" && "
		 "echo gpu_extra > \"$d/type\" && echo 99000 > \"$d/temp\" && "
		 "ln -s ../../devices/virtual/thermal/thermal_zone10 "
		 "'%s/sys/class/thermal/thermal_zone10'",
		 root, root);
	assert_int_equal(system(cmd), 0);
	fmt_fits(link_path, "%s/sys/class/devfreq/57000000.gpu", root);
	n = readlink(link_path, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = 0;
	assert_int_equal(unlink(link_path), 0);

	sample_board(root, &e, &p, &s);
	assert_string_equal(p.devfreq_dir, "");
	assert_string_equal(p.gpu_dir, "");
	assert_true(isnan(s.util_gpu) && isnan(s.sm_clock_mhz));
	/* The rest is served meanwhile. */
	check_sample(&e, &s, F_LOAD | F_CLOCK, "no devfreq yet");

	assert_int_equal(symlink(target, link_path), 0);
	sample_board(root, &e, &p, &s);
	check_sample(&e, &s, 0, "devfreq appeared");
	unit_rm_tree(tmp);
}

/* ---- the parsers ---- */

#define U64(s, want_r, want)                                                        \
	do {                                                                        \
		uint64_t _v = 42;                                                   \
		assert_int_equal(tegra_parse_u64((s), sizeof(s) - 1, &_v), want_r); \
		assert_int_equal(_v, (want_r) == 0 ? (uint64_t)(want) : 42);        \
	} while (0)

static void test_parse_numbers(void **state)
{
	int i = 7;

	(void)state;
	U64("153\n", 0, 153);
	U64("921600000", 0, 921600000);
	U64("18446744073709551615\n", 0, UINT64_MAX);
	U64("18446744073709551616", -ERANGE, 0);
	U64("99999999999999999999999999\n", -ERANGE, 0);
	U64("", -EINVAL, 0);
	U64("\n", -EINVAL, 0);
	U64("-1\n", -EINVAL, 0);
	U64("+1", -EINVAL, 0);
	U64(" 1", -EINVAL, 0);
	U64("1 \n", -EINVAL, 0);
	U64("1\n\n", -EINVAL, 0);
	U64("1\0", -EINVAL, 0);
	U64("0x10", -EINVAL, 0);
	U64("12abc\n", -EINVAL, 0);
	U64("aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", -EINVAL, 0);
	assert_int_equal(tegra_parse_int("-256000\n", 8, &i), 0);
	assert_int_equal(i, -256000);
	assert_int_equal(tegra_parse_int("47500", 5, &i), 0);
	assert_int_equal(i, 47500);
	assert_int_equal(tegra_parse_int("2147483648\n", 11, &i), -ERANGE);
	assert_int_equal(tegra_parse_int("-99999999999999\n", 16, &i), -ERANGE);
	assert_int_equal(tegra_parse_int("-", 1, &i), -EINVAL);
	assert_int_equal(tegra_parse_int("--1", 3, &i), -EINVAL);
	assert_int_equal(tegra_parse_int("1-", 2, &i), -EINVAL);
	assert_int_equal(i, 47500);
}

static void test_parse_name(void **state)
{
	char out[8] = "x";

	(void)state;
	assert_int_equal(tegra_parse_name("gv11b\0", 6, out, sizeof(out)), 0);
	assert_string_equal(out, "gv11b");
	assert_int_equal(tegra_parse_name("GPU-th\n", 7, out, sizeof(out)), 0);
	assert_string_equal(out, "GPU-th");
	assert_int_equal(tegra_parse_name("1234567", 7, out, sizeof(out)), 0);
	assert_int_equal(tegra_parse_name("12345678", 8, out, sizeof(out)), -ENAMETOOLONG);
	assert_int_equal(tegra_parse_name("", 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(tegra_parse_name("\0\n\0", 3, out, sizeof(out)), -EINVAL);
	assert_int_equal(tegra_parse_name("a\0b", 3, out, sizeof(out)), -EINVAL);
	assert_int_equal(tegra_parse_name("a\tb", 3, out, sizeof(out)), -EINVAL);
	assert_int_equal(tegra_parse_name("\xc3\xa9", 2, out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "1234567");
}

#define MEMINFO(s, want_r, want_total, want_avail)                                       \
	do {                                                                             \
		uint64_t _t = 1, _a = 2;                                                 \
		assert_int_equal(tegra_parse_meminfo((s), strlen(s), &_t, &_a), want_r); \
		assert_int_equal(_t, (want_r) == 0 ? (uint64_t)(want_total) : 1);        \
		assert_int_equal(_a, (want_r) == 0 ? (uint64_t)(want_avail) : 2);        \
	} while (0)

static void test_parse_meminfo(void **state)
{
	(void)state;
	MEMINFO("MemTotal:        7802332 kB\nMemFree:         2600777 kB\n"
		"MemAvailable:    3300777 kB\nBuffers:           12345 kB\n",
		0, 7802332ull * 1024, 3300777ull * 1024);
	/* No MemAvailable (before Linux 3.14): MemFree + Buffers + Cached. */
	MEMINFO("MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 1 kB\nCached: 2 kB", 0, 102400,
		13 * 1024);
	/* The first of a key twice; lines of other forms skipped. */
	MEMINFO("MemTotal: 100 kB\nMemTotal: 5 kB\nMemAvailable: 5 MB\nMemAvailable 9 kB\n"
		"garbage\n:\nMemAvailable: kB\nMemAvailable: 7 kB trailing\nMemAvailable: 8 kB\n",
		0, 102400, 8192);
	MEMINFO("MemFree: 10 kB\nMemAvailable: 5 kB\n", -ENODATA, 0, 0);
	MEMINFO("MemTotal: 100 kB\nBuffers: 1 kB\n", -ENODATA, 0, 0);
	MEMINFO("", -ENODATA, 0, 0);
	MEMINFO("MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n", -ERANGE, 0, 0);
	MEMINFO("MemTotal: 99999999999999999999999 kB\n", -ERANGE, 0, 0);
	MEMINFO("MemTotal: 1 kB\nMemFree: 18014398509481983 kB\nBuffers: 0 kB\n"
		"Cached: 18014398509481983 kB\n",
		-ERANGE, 0, 0);
	/* A NUL inside a line is no digit and no " kB": the line is skipped. */
	{
		static const char nul[] = "MemTotal: 1\0 kB\nMemTotal: 2 kB\nMemAvailable: 1 kB\n";
		uint64_t t = 0, a = 0;

		assert_int_equal(tegra_parse_meminfo(nul, sizeof(nul) - 1, &t, &a), 0);
		assert_int_equal(t, 2048);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_numbers),
		cmocka_unit_test(test_parse_name),
		cmocka_unit_test(test_parse_meminfo),
		cmocka_unit_test(test_boards),
		cmocka_unit_test(test_arm64_server),
		cmocka_unit_test(test_root_too_long),
		cmocka_unit_test(test_nvml_kept),
		cmocka_unit_test(test_carve_out),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_late_devfreq),
		cmocka_unit_test(test_bad_file_said_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
