#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-read.h"
#include "file-writer.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

/*
 * write() and fsync() of the code under test land here (-Wl,--wrap): a write that fails half
 * way with ENOSPC, an fsync that fails, or one that hangs (a frozen filesystem) until the test
 * lets it go. Only for fds whose file lies under @fault_dir; the rest pass through.
 */
ssize_t __real_write(int fd, const void *buf, size_t n); /* NOLINT(bugprone-reserved-identifier) */
int __real_fsync(int fd);				 /* NOLINT(bugprone-reserved-identifier) */
ssize_t __wrap_write(int fd, const void *buf, size_t n); /* NOLINT(bugprone-reserved-identifier) */
int __wrap_fsync(int fd);				 /* NOLINT(bugprone-reserved-identifier) */

/*
 * The faults, set by the test and read by the writer threads: every access is under @mu (a
 * thread may still be in its directory fsync while the test clears them).
 */
static char fault_dir[64];
static int fault_write; /* errno for a write after half the bytes went */
static int fault_fsync; /* errno for fsync */
static bool freeze;	/* fsync hangs until thaw() */
static unsigned fsyncs; /* fsync calls on faulty fds that returned */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void faults_set(const char *dir, int write_err, int fsync_err, bool frozen)
{
	(void)pthread_mutex_lock(&mu);
	(void)snprintf(fault_dir, sizeof(fault_dir), "%s", dir);
	fault_write = write_err;
	fault_fsync = fsync_err;
	freeze = frozen;
	(void)pthread_cond_broadcast(&cond);
	(void)pthread_mutex_unlock(&mu);
}

/* Whether @fd's file lies under the fault directory. Called with @mu held. */
static bool faulty(int fd)
{
	char link[64], target[256];
	ssize_t n;

	if (!fault_dir[0])
		return false;
	(void)snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return strncmp(target, fault_dir, strlen(fault_dir)) == 0;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	static bool half_written;
	int err = 0;
	bool half = false;

	(void)pthread_mutex_lock(&mu);
	if (fault_write && faulty(fd)) {
		/* Half the bytes go; the call for the rest fails. */
		err = half_written ? fault_write : 0;
		half = !half_written;
		half_written = !half_written;
	}
	(void)pthread_mutex_unlock(&mu);
	if (err) {
		errno = err;
		return -1;
	}
	return __real_write(fd, buf, half ? n / 2 : n);
}

int __wrap_fsync(int fd)
{
	int err = 0, r;
	bool f;

	(void)pthread_mutex_lock(&mu);
	f = faulty(fd);
	while (f && freeze)
		(void)pthread_cond_wait(&cond, &mu);
	if (f)
		err = fault_fsync;
	(void)pthread_mutex_unlock(&mu);
	if (err) {
		errno = err;
		r = -1;
	} else {
		r = __real_fsync(fd);
	}
	if (f) {
		(void)pthread_mutex_lock(&mu);
		fsyncs++;
		(void)pthread_cond_broadcast(&cond);
		(void)pthread_mutex_unlock(&mu);
	}
	return r;
}

static unsigned fsyncs_now(void)
{
	unsigned n;

	(void)pthread_mutex_lock(&mu);
	n = fsyncs;
	(void)pthread_mutex_unlock(&mu);
	return n;
}

/* Waits until @n fsync calls on faulty fds have returned in all. */
static void wait_fsyncs(unsigned n)
{
	(void)pthread_mutex_lock(&mu);
	while (fsyncs < n)
		(void)pthread_cond_wait(&cond, &mu);
	(void)pthread_mutex_unlock(&mu);
}

static void thaw(void)
{
	(void)pthread_mutex_lock(&mu);
	freeze = false;
	(void)pthread_cond_broadcast(&cond);
	(void)pthread_mutex_unlock(&mu);
}

static void faults_clear(void)
{
	faults_set("", 0, 0, false);
}

/* The number of entries in @dir, "." and ".." left out. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (!streq(e->d_name, ".") && !streq(e->d_name, ".."))
			n++;
	(void)closedir(d);
	return n;
}

static void assert_content(const char *path, const char *want)
{
	char *data = NULL;
	size_t len = 0;

	assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(data, want, len);
	free(data);
}

struct fx {
	char dir[64];
	char path[96];
};

static void fx_setup(struct fx *f)
{
	unit_tmpdir("test-file-writer", f->dir, sizeof(f->dir));
	(void)snprintf(f->path, sizeof(f->path), "%s/out", f->dir);
}

static void fx_teardown(struct fx *f)
{
	faults_clear();
	unit_rm_tree(f->dir);
}

/* Written whole with the mode asked whatever the umask, replacing the old; no temp left. */
static void test_atomic_write(void **state)
{
	struct fx f;
	struct stat st;
	mode_t old = umask(077);

	fx_setup(&f);
	assert_int_equal(file_write_atomic(f.path, "old\n", 4, 0644, NULL), 0);
	assert_int_equal(file_write_atomic(f.path, "new\n", 4, 0644, NULL), 0);
	(void)umask(old);
	assert_content(f.path, "new\n");
	assert_int_equal(stat(f.path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(count_entries(f.dir), 1);
	/* Empty content is a file too. */
	assert_int_equal(file_write_atomic(f.path, "", 0, 0600, NULL), 0);
	assert_content(f.path, "");
	fx_teardown(&f);
}

/* A write that fails half way (a full disk): the old file intact, no temporary file. */
static void test_enospc_half_way(void **state)
{
	struct fx f;
	const char *step = NULL;
	char big[8192];

	fx_setup(&f);
	assert_int_equal(file_write_atomic(f.path, "old\n", 4, 0644, NULL), 0);
	memset(big, 'x', sizeof(big));
	faults_set(f.dir, ENOSPC, 0, false);
	assert_int_equal(file_write_atomic(f.path, big, sizeof(big), 0644, &step), -ENOSPC);
	assert_string_equal(step, "write");
	faults_clear();
	assert_content(f.path, "old\n");
	assert_int_equal(count_entries(f.dir), 1);
	fx_teardown(&f);
}

/* fsync failing (EIO): nothing renamed, the old file intact, no temporary file. */
static void test_fsync_fails(void **state)
{
	struct fx f;
	const char *step = NULL;

	fx_setup(&f);
	assert_int_equal(file_write_atomic(f.path, "old\n", 4, 0644, NULL), 0);
	faults_set(f.dir, 0, EIO, false);
	assert_int_equal(file_write_atomic(f.path, "new\n", 4, 0644, &step), -EIO);
	assert_string_equal(step, "write");
	faults_clear();
	assert_content(f.path, "old\n");
	assert_int_equal(count_entries(f.dir), 1);
	fx_teardown(&f);
}

/* The directory gone: the temporary file cannot be made, and says so. */
static void test_directory_vanished(void **state)
{
	struct fx f;
	const char *step = NULL;
	char path[128];

	fx_setup(&f);
	(void)snprintf(path, sizeof(path), "%s/gone/out", f.dir);
	assert_int_equal(file_write_atomic(path, "x", 1, 0644, &step), -ENOENT);
	assert_string_equal(step, "create a temporary file for");
	assert_int_equal(count_entries(f.dir), 0);
	/* A file where the directory should be. */
	assert_int_equal(file_write_atomic(f.path, "x", 1, 0644, NULL), 0);
	(void)snprintf(path, sizeof(path), "%s/out/x", f.dir);
	assert_int_equal(file_write_atomic(path, "x", 1, 0644, &step), -ENOTDIR);
	fx_teardown(&f);
}

/* --- off the loop --- */

struct seen {
	int done, stuck;
	struct file_write_result res;
};

static void on_done(struct file_writer *fw, const struct file_write_result *res, void *userdata)
{
	struct seen *s = userdata;

	s->done++;
	s->res = *res;
}

static void on_stuck(struct file_writer *fw, usec_t waited, void *userdata)
{
	struct seen *s = userdata;

	s->stuck++;
	assert_true(waited >= USEC_PER_MSEC);
}

static void run_until(struct loop *l, const int *n, int want)
{
	/* Bounded only for the failure case. */
	for (int i = 0; i < 100 && *n < want; i++)
		assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(*n, want);
}

static struct file_writer *writer(struct loop *l, struct seen *s, bool mkdir, bool skip_same)
{
	struct file_writer *fw = NULL;
	struct file_writer_opts o = { .mode = 0644,
				      .mkdir = mkdir,
				      .skip_same = skip_same,
				      .stuck_after = USEC_PER_MSEC,
				      .done = on_done,
				      .stuck = on_stuck,
				      .userdata = s };

	assert_int_equal(file_writer_new(l, &o, &fw), 0);
	return fw;
}

/* Written on a thread, the result on the loop; the same bytes again are left alone. */
static void test_writer_writes(void **state)
{
	struct fx f;
	struct loop *l = NULL;
	struct seen s = { 0 };
	struct file_writer *fw;
	char path[128];

	fx_setup(&f);
	assert_int_equal(loop_new(&l), 0);
	fw = writer(l, &s, true, true);
	(void)snprintf(path, sizeof(path), "%s/a/b/out", f.dir);
	assert_int_equal(file_writer_write(fw, path, "one\n", 4), 0);
	assert_true(file_writer_busy(fw));
	run_until(l, &s.done, 1);
	assert_int_equal(s.res.r, 0);
	assert_false(s.res.unchanged);
	assert_false(file_writer_busy(fw));
	assert_content(path, "one\n");
	assert_int_equal(file_writer_write(fw, path, "one\n", 4), 0);
	run_until(l, &s.done, 2);
	assert_true(s.res.unchanged);
	/* A failure comes back with its step. */
	faults_set(f.dir, 0, EIO, false);
	assert_int_equal(file_writer_write(fw, path, "two\n", 4), 0);
	run_until(l, &s.done, 3);
	assert_int_equal(s.res.r, -EIO);
	assert_string_equal(s.res.step, "write");
	faults_clear();
	assert_content(path, "one\n");
	file_writer_free(fw);
	loop_free(l);
	fx_teardown(&f);
}

/*
 * A frozen filesystem: the stuck write is reported once, the loop goes on, a writer of
 * another file (the labels beside the CDI spec) is not held up, writes asked meanwhile
 * collapse into the newest, and it lands when the filesystem thaws.
 */
static void test_writer_frozen(void **state)
{
	struct fx f, g;
	struct loop *l = NULL;
	struct seen s = { 0 }, t = { 0 };
	struct file_writer *fw, *other;

	fx_setup(&f);
	fx_setup(&g);
	assert_int_equal(loop_new(&l), 0);
	fw = writer(l, &s, false, false);
	other = writer(l, &t, false, false);
	faults_set(f.dir, 0, 0, true);
	assert_int_equal(file_writer_write(fw, f.path, "A", 1), 0);
	run_until(l, &s.stuck, 1);
	/* The other file, on another filesystem, still gets written. */
	assert_int_equal(file_writer_write(other, g.path, "labels", 6), 0);
	run_until(l, &t.done, 1);
	assert_int_equal(t.res.r, 0);
	assert_content(g.path, "labels");
	/* Asked while frozen: B replaced by C. */
	assert_int_equal(file_writer_write(fw, f.path, "B", 1), 0);
	assert_int_equal(file_writer_write(fw, f.path, "C", 1), 0);
	assert_int_equal(loop_run_once(l, 20 * USEC_PER_MSEC), 0);
	assert_int_equal(s.stuck, 1); /* once per write */
	assert_int_equal(s.done, 0);
	thaw();
	run_until(l, &s.done, 1);
	assert_int_equal(s.res.r, 0);
	assert_content(f.path, "C");
	assert_int_equal(count_entries(f.dir), 1);
	file_writer_free(fw);
	file_writer_free(other);
	loop_free(l);
	fx_teardown(&f);
	fx_teardown(&g);
}

/* Freed while its write hangs: the free does not wait; the write finishes later on its own. */
static void test_writer_freed_while_frozen(void **state)
{
	struct fx f;
	struct loop *l = NULL;
	struct seen s = { 0 };
	struct file_writer *fw;
	unsigned before = fsyncs_now();

	fx_setup(&f);
	assert_int_equal(loop_new(&l), 0);
	fw = writer(l, &s, false, false);
	faults_set(f.dir, 0, 0, true);
	assert_int_equal(file_writer_write(fw, f.path, "A", 1), 0);
	run_until(l, &s.stuck, 1);
	file_writer_free(fw);
	loop_free(l);
	thaw();
	/* The thread's two fsyncs (the file, then its directory after the rename) return. */
	wait_fsyncs(before + 2);
	assert_int_equal(access(f.path, F_OK), 0);
	assert_int_equal(s.done, 0);
	fx_teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_atomic_write),
		cmocka_unit_test(test_enospc_half_way),
		cmocka_unit_test(test_fsync_fails),
		cmocka_unit_test(test_directory_vanished),
		cmocka_unit_test(test_writer_writes),
		cmocka_unit_test(test_writer_frozen),
		cmocka_unit_test(test_writer_freed_while_frozen),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
