/*
 * labels: the features.d writer on a real loop: content, atomic replacement seen through
 * inotify and an fd on the old file, rewrites only on change, the expiry moving forward, a
 * missing directory created later, the 64 KiB limit.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu-arch.h"
#include "gpu.h"
#include "labels.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#define MIB ((uint64_t)1024 * 1024)

/* --- the writer --- */

struct wfix {
	struct loop *loop;
	char *dir;
	char *path;
};

static void wfix_init(struct wfix *f)
{
	assert_int_equal(loop_new(&f->loop), 0);
	f->dir = unit_tmpdir_dup("test-labels");
	f->path = path_join(f->dir, "edgegpu");
	assert_non_null(f->path);
}

static void wfix_release(struct wfix *f)
{
	unit_rm_tree(f->dir);
	free(f->dir);
	free(f->path);
	loop_free(f->loop);
}

/* Not inlined: GCC 12 then takes a pointer into the result for one to slurp()'s local. */
static __attribute__((noinline)) char *slurp(const char *path)
{
	char *s = NULL;

	assert_int_equal(read_file(path, 1 << 20, &s, NULL), 0);
	return s;
}

/* The expiry directive's time, as Unix seconds. */
static time_t expiry_of(const char *file)
{
	const char *p = strstr(file, "# +expiry-time=");
	struct tm tm = { 0 };
	const char *end;

	assert_non_null(p);
	end = strptime(p + strlen("# +expiry-time="), "%Y-%m-%dT%H:%M:%SZ", &tm);
	assert_non_null(end);
	assert_int_equal(*end, '\n');
	return timegm(&tm);
}

/* Runs the loop until @w has written @n files (at most 20 s: a failure, not a pace). */
static void wait_writes(struct wfix *f, struct labels_writer *w, uint64_t n)
{
	usec_t deadline = now_usec() + 20 * USEC_PER_SEC;

	while (labels_writer_writes(w) < n) {
		assert_true(now_usec() < deadline);
		assert_int_equal(loop_run_once(f->loop, 100 * USEC_PER_MSEC), 0);
	}
}

static const char lines_a[] = "nvidia.com/gpu.count=1\nnvidia.com/gpu.product=NVIDIA-A2\n";
static const char lines_b[] = "nvidia.com/gpu.count=2\nnvidia.com/gpu.product=NVIDIA-A2\n";

static void test_writer_content_and_changes(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	time_t now = time(NULL), exp;
	char *s;

	wfix_init(&f);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	assert_int_equal(access(f.path, F_OK), -1); /* nothing before the first set */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	/* A comment, the expiry ten minutes ahead, the lines as given. */
	assert_true(s[0] == '#');
	exp = expiry_of(s);
	assert_true(exp >= now + 600 && exp <= time(NULL) + 601);
	assert_non_null(strstr(s, "Z\n"
				  "nvidia.com/gpu.count=1\nnvidia.com/gpu.product=NVIDIA-A2\n"));
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);

	/*
	 * The same lines: no write. Others: a write. Back: a write. (Had the same lines started
	 * a write, the second write counted would be theirs, and the file would not hold b.)
	 */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	assert_int_equal(labels_writer_writes(w), 1);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 3);
	/* A missing last newline is added; the same lines then. */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a) - 1), 0);
	assert_int_equal(labels_writer_writes(w), 3);
	/* A NUL byte is refused. */
	assert_int_equal(labels_writer_set(w, "a=b\0c=d\n", 8), -EINVAL);
	assert_int_equal(labels_writer_writes(w), 3);

	/* Freed: the file stays. */
	w = labels_writer_free(w);
	assert_null(w);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);

	/* Expiry 0: no directive. */
	assert_int_equal(labels_writer_new(f.loop, f.path, 0, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	assert_null(strstr(s, "expiry"));
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	labels_writer_free(w);

	assert_int_equal(labels_writer_new(f.loop, "/tmp/", 0, &w), -EINVAL);
	wfix_release(&f);
}

struct seen {
	char created[8][64];
	int n_created;
	char moved_to[8][64];
	int n_moved;
};

static void on_watch(struct loop_watch *wt, const char *name, uint32_t mask, void *userdata)
{
	struct seen *s = userdata;

	if ((mask & IN_CREATE) && s->n_created < 8)
		(void)snprintf(s->created[s->n_created++], 64, "%s", name);
	if ((mask & IN_MOVED_TO) && s->n_moved < 8)
		(void)snprintf(s->moved_to[s->n_moved++], 64, "%s", name);
}

static void test_writer_atomic(void **state)
{
	struct labels_writer *w = NULL;
	struct loop_watch *watch = NULL;
	struct seen seen = { 0 };
	struct stat st1, st2;
	struct wfix f;
	char old[4096];
	ssize_t n;
	int fd;

	wfix_init(&f);
	/*
	 * A symlink planted where a temporary file could go is never followed: each write makes
	 * a new dotfile, O_EXCL, under a name of its own.
	 */
	{
		char *tmp = path_join(f.dir, ".edgegpu.tmp"), *victim = path_join(f.dir, "victim");

		assert_int_equal(file_write_atomic(victim, "keep\n", 5, 0644, NULL), 0);
		assert_int_equal(symlink(victim, tmp), 0);
		assert_int_equal(labels_writer_new(f.loop, f.path, 0, &w), 0);
		assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
		wait_writes(&f, w, 1);
		w = labels_writer_free(w);
		assert_int_equal(lstat(tmp, &st1), 0);
		assert_true(S_ISLNK(st1.st_mode));
		assert_int_equal(unlink(tmp), 0);
		free(tmp);
		tmp = slurp(victim);
		assert_string_equal(tmp, "keep\n");
		free(tmp);
		assert_int_equal(unlink(victim), 0);
		free(victim);
	}
	assert_int_equal(
		loop_watch_new(f.loop, f.dir, IN_CREATE | IN_MOVED_TO, on_watch, &seen, &watch), 0);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	assert_int_equal(stat(f.path, &st1), 0);
	assert_int_equal(st1.st_mode & 0777, 0644);
	/* A reader holding the old file keeps reading all of it after the replacement: the file
	 * is never rewritten in place. */
	fd = open(f.path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 2);
	n = pread(fd, old, sizeof(old) - 1, 0);
	assert_true(n > 0);
	old[n] = 0;
	assert_string_equal(strstr(old, "nvidia.com/"), lines_a);
	close(fd);
	assert_int_equal(stat(f.path, &st2), 0);
	assert_true(st1.st_ino != st2.st_ino);
	/* What inotify saw: only dotfiles created, each write renamed onto the file. */
	while (seen.n_moved < 2)
		assert_int_equal(loop_run_once(f.loop, 5 * USEC_PER_SEC), 0);
	assert_true(seen.n_created >= 2);
	for (int i = 0; i < seen.n_created; i++)
		assert_true(startswith(seen.created[i], ".edgegpu."));
	assert_string_equal(seen.moved_to[0], "edgegpu");
	assert_string_equal(seen.moved_to[1], "edgegpu");
	/* No temporary left behind: the file is all there is. */
	{
		DIR *d = opendir(f.dir);
		struct dirent *de;

		assert_non_null(d);
		while ((de = readdir(d)))
			if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
				assert_string_equal(de->d_name, "edgegpu");
		closedir(d);
	}
	labels_writer_free(w);
	loop_watch_free(watch);
	wfix_release(&f);
}

static void test_writer_expiry_moves(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	time_t e1, e2;
	char *s;

	wfix_init(&f);
	/* Expiry 2 s: rewritten every second, the directive a second further each time. */
	assert_int_equal(labels_writer_new(f.loop, f.path, 2 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	e1 = expiry_of(s);
	free(s);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	e2 = expiry_of(s);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);
	assert_true(e2 > e1);
	labels_writer_free(w);
	wfix_release(&f);
}

static void test_writer_missing_dir(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	char *dir, *path, *s;

	wfix_init(&f);
	dir = path_join(f.dir, "features.d");
	path = path_join(dir, "edgegpu");
	assert_int_equal(labels_writer_new(f.loop, path, 600 * USEC_PER_SEC, &w), 0);
	/* Not there yet: accepted, retried. */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	assert_int_equal(loop_run_once(f.loop, 0), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	/* Newer lines while waiting replace the pending ones. */
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	wait_writes(&f, w, 1);
	s = slurp(path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	labels_writer_free(w);
	free(path);
	free(dir);
	wfix_release(&f);
}

/* Lines of @path holding @needle. */
static int count_lines(const char *path, const char *needle)
{
	char *s = NULL;
	int n = 0;

	assert_int_equal(read_file(path, 1 << 20, &s, NULL), 0);
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	free(s);
	return n;
}

static void test_writer_logs_once(void **state)
{
	struct labels_writer *w = NULL;
	char *dir, *path, *log;
	int saved, fd;
	usec_t deadline = now_usec() + 20 * USEC_PER_SEC;
	struct wfix f;

	wfix_init(&f);
	dir = path_join(f.dir, "features.d");
	path = path_join(dir, "edgegpu");
	log = path_join(f.dir, "stderr");
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
	log_max_level = LOG_LEVEL_DEBUG;
	assert_int_equal(labels_writer_new(f.loop, path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	/* Three failed tries: one warning, then debug lines. */
	while (count_lines(log, "cannot write the labels file") < 3) {
		assert_true(now_usec() < deadline);
		assert_int_equal(loop_run_once(f.loop, 100 * USEC_PER_MSEC), 0);
	}
	assert_int_equal(mkdir(dir, 0755), 0);
	wait_writes(&f, w, 1);
	log_max_level = LOG_LEVEL_ERROR;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	close(fd);
	assert_int_equal(
		count_lines(
			log,
			"level=warn module=labels msg=\"cannot write the labels file, retrying\""),
		1);
	assert_true(
		count_lines(
			log,
			"level=debug module=labels msg=\"cannot write the labels file, retrying\"") >=
		2);
	assert_int_equal(count_lines(log, "errno=2"), count_lines(log, "cannot write the labels"));
	/* The recovery is said once, at info. */
	assert_int_equal(count_lines(log, "level=info module=labels msg=\"labels file written\""),
			 1);
	labels_writer_free(w);
	free(log);
	free(path);
	free(dir);
	wfix_release(&f);
}

static void test_writer_size_limit(void **state)
{
	struct labels_writer *w = NULL;
	size_t len = LABELS_FILE_MAX;
	struct wfix f;
	char *big, *s;

	wfix_init(&f);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	big = malloc(len + 1);
	assert_non_null(big);
	for (size_t i = 0; i < len; i++)
		big[i] = i % 32 == 31 ? '\n' : 'x';
	big[len] = 0;
	/* The lines alone fit 64 KiB, with the header they do not: refused, the old file stays. */
	assert_int_equal(labels_writer_set(w, big, len), -EFBIG);
	assert_int_equal(labels_writer_writes(w), 1);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);
	/* Just under the limit is fine. */
	assert_int_equal(labels_writer_set(w, big, len - 200), 0);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	assert_true(strlen(s) <= LABELS_FILE_MAX);
	free(s);
	free(big);
	labels_writer_free(w);
	wfix_release(&f);
}

/*
 * GFD's timestamp, when asked: the time it was asked, at its sorted place, the same at every
 * write; the same lines still start no write; off again, the file is the lines alone.
 */
static void test_writer_timestamp(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	time_t before = time(NULL);
	long long t = 0;
	char *s, *p, *end = NULL;

	wfix_init(&f);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	labels_writer_set_timestamp(w, true);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	p = strstr(s, "Z\nnvidia.com/gfd.timestamp=");
	assert_non_null(p);
	p += strlen("Z\nnvidia.com/gfd.timestamp=");
	t = strtoll(p, &end, 10);
	assert_true(end != p && *end == '\n');
	assert_true(t >= (long long)before && t <= (long long)time(NULL));
	assert_non_null(strstr(s, "\nnvidia.com/gpu.count=1\nnvidia.com/gpu.product=NVIDIA-A2\n"));
	free(s);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	assert_int_equal(labels_writer_writes(w), 1);
	/*
	 * New lines, a second or more later: the same timestamp, as GFD's, which is the time it
	 * started labelling, not of each pass (its label would change at each refresh).
	 */
	while (time(NULL) <= (time_t)t)
		(void)usleep(10 * 1000);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	p = strstr(s, "Z\nnvidia.com/gfd.timestamp=");
	assert_non_null(p);
	assert_int_equal(strtoll(p + strlen("Z\nnvidia.com/gfd.timestamp="), NULL, 10), t);
	free(s);
	labels_writer_set_timestamp(w, false);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 3);
	s = slurp(f.path);
	assert_null(strstr(s, "gfd.timestamp"));
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);
	labels_writer_free(w);
	wfix_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer_content_and_changes),
		cmocka_unit_test(test_writer_timestamp),
		cmocka_unit_test(test_writer_atomic),
		cmocka_unit_test(test_writer_expiry_moves),
		cmocka_unit_test(test_writer_missing_dir),
		cmocka_unit_test(test_writer_logs_once),
		cmocka_unit_test(test_writer_size_limit),
	};

	log_max_level = LOG_LEVEL_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
