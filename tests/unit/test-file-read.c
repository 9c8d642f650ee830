/*
 * The one file reader (file-read.h): what is not a regular file is refused before it is
 * opened and named, nothing blocks, the cap holds however the file changes while it is read,
 * and read(2)'s EINTR and short reads are retried. read() is wrapped (-Wl,--wrap=read): a
 * test can make it fail, return a little at a time, or grow the file under the reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "file-read.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

/* What the wrapped read() does: everything 0 passes read() through. */
static struct {
	int eintr_every; /* every Nth call fails with EINTR first */
	size_t chunk;	 /* at most this much per call */
	int fail;	 /* this errno, every call */
	int grow_fd;	 /* > 0: on the first call, @grow bytes are appended through it */
	size_t grow;
	unsigned calls;
} rd;

ssize_t __real_read(int fd, void *buf, size_t n); /* NOLINT(bugprone-reserved-identifier) */
ssize_t __wrap_read(int fd, void *buf, size_t n); /* NOLINT(bugprone-reserved-identifier) */

ssize_t __wrap_read(int fd, void *buf, size_t n) /* NOLINT(bugprone-reserved-identifier) */
{
	rd.calls++;
	if (rd.fail) {
		errno = rd.fail;
		return -1;
	}
	if (rd.eintr_every && rd.calls % (unsigned)rd.eintr_every == 0) {
		errno = EINTR;
		return -1;
	}
	if (rd.grow_fd > 0) {
		char *more = malloc(rd.grow);

		assert_non_null(more);
		memset(more, 'g', rd.grow);
		assert_int_equal(write(rd.grow_fd, more, rd.grow), (ssize_t)rd.grow);
		free(more);
		rd.grow_fd = 0;
	}
	if (rd.chunk && n > rd.chunk)
		n = rd.chunk;
	return __real_read(fd, buf, n);
}

struct dir {
	char path[64];
};

static void dir_make(struct dir *d)
{
	unit_tmpdir("test-file-read", d->path, sizeof(d->path));
	memset(&rd, 0, sizeof(rd));
}

static void dir_remove(struct dir *d)
{
	unit_rm_tree(d->path);
	memset(&rd, 0, sizeof(rd));
}

/* @name in @d holding @len bytes of 'x'; returns its path (static). */
static const char *put(struct dir *d, const char *name, size_t len)
{
	static char p[128];
	char *data = malloc(len + 1);
	int fd;

	assert_non_null(data);
	memset(data, 'x', len);
	(void)snprintf(p, sizeof(p), "%s/%s", d->path, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	(void)close(fd);
	free(data);
	return p;
}

/* read_file_at(AT_FDCWD) of @path failing with @r, nothing returned, *what set to @what. */
static void expect_refused(const char *path, unsigned flags, int r, const char *what)
{
	const char *got_what = NULL;
	char *got = (char *)1;
	size_t len = 7;

	assert_int_equal(read_file_at(AT_FDCWD, path, flags, 100, &got, &len, &got_what), r);
	assert_ptr_equal(got, (char *)1);
	assert_int_equal(len, 7);
	if (what)
		assert_string_equal(got_what, what);
	else
		assert_null(got_what);
}

/* A FIFO with no writer: its open would block for ever. Refused at once, and named. */
static void test_fifo(void **state)
{
	struct dir d;
	char p[96];

	(void)state;
	dir_make(&d);
	(void)snprintf(p, sizeof(p), "%s/fifo", d.path);
	assert_int_equal(mkfifo(p, 0644), 0);
	expect_refused(p, 0, -EBADFD, "a FIFO");
	expect_refused(p, READ_NOFOLLOW | READ_PREFIX | READ_DEV_NULL, -EBADFD, "a FIFO");
	assert_int_equal(read_file(p, 100, &(char *){ NULL }, NULL), -EBADFD);
	assert_int_equal(rd.calls, 0); /* nothing was read */
	dir_remove(&d);
}

/* A FIFO with a writer and bytes in it: still refused, and its bytes are left for its reader. */
static void test_fifo_with_writer(void **state)
{
	struct dir d;
	char p[96], buf[8];
	int fd;

	(void)state;
	dir_make(&d);
	(void)snprintf(p, sizeof(p), "%s/fifo", d.path);
	assert_int_equal(mkfifo(p, 0644), 0);
	fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC); /* a writer (and a reader) */
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc", 3), 3);
	expect_refused(p, 0, -EBADFD, "a FIFO");
	assert_int_equal(__real_read(fd, buf, sizeof(buf)), 3);
	(void)close(fd);
	dir_remove(&d);
}

static void test_directory_socket_devices(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct dir d;
	char *got = NULL;
	size_t len = 7;
	int s;

	(void)state;
	dir_make(&d);
	expect_refused(d.path, 0, -EISDIR, "a directory");
	expect_refused("/", READ_DEV_NULL, -EISDIR, "a directory");
	/* /dev/zero never ends: refused before it is opened, not read up to the cap. */
	expect_refused("/dev/zero", 0, -EBADFD, "a character device");
	expect_refused("/dev/zero", READ_PREFIX | READ_DEV_NULL, -EBADFD, "a character device");
	/* /dev/null only when asked for, and then it is empty. */
	expect_refused("/dev/null", 0, -EBADFD, "a character device");
	assert_int_equal(rd.calls, 0); /* none of them was read */
	assert_int_equal(read_file_at(AT_FDCWD, "/dev/null", READ_DEV_NULL, 100, &got, &len, NULL),
			 0);
	assert_string_equal(got, "");
	assert_int_equal(len, 0);
	free(got);
	(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", d.path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	expect_refused(sa.sun_path, 0, -EBADFD, "a socket");
	(void)close(s);
	dir_remove(&d);
}

static void test_symlink(void **state)
{
	struct dir d;
	char link[96], dlink[96], *got = NULL;
	const char *p;

	(void)state;
	dir_make(&d);
	p = put(&d, "file", 3);
	(void)snprintf(link, sizeof(link), "%s/link", d.path);
	assert_int_equal(symlink(p, link), 0);
	(void)snprintf(dlink, sizeof(dlink), "%s/dangling", d.path);
	assert_int_equal(symlink("/nonexistent/x", dlink), 0);
	/* Followed by default; a link itself with READ_NOFOLLOW, dangling or not. */
	assert_int_equal(read_file(link, 100, &got, NULL), 0);
	assert_string_equal(got, "xxx");
	free(got);
	expect_refused(link, READ_NOFOLLOW, -ELOOP, "a symbolic link");
	expect_refused(dlink, READ_NOFOLLOW, -ELOOP, "a symbolic link");
	expect_refused(dlink, 0, -ENOENT, NULL);
	/* Only the last component: a link above it is followed. */
	(void)snprintf(link, sizeof(link), "%s/dirlink", d.path);
	assert_int_equal(symlink(d.path, link), 0);
	(void)snprintf(dlink, sizeof(dlink), "%s/dirlink/file", d.path);
	assert_int_equal(read_file_at(AT_FDCWD, dlink, READ_NOFOLLOW, 100, &got, NULL, NULL), 0);
	assert_string_equal(got, "xxx");
	free(got);
	dir_remove(&d);
}

/* Relative to a directory fd, and inside it as a root: a link out stays in. */
static void test_at_and_in_root(void **state)
{
	struct dir d;
	char *got = NULL;
	size_t len = 0;
	char p[96];
	int dfd;

	(void)state;
	dir_make(&d);
	(void)put(&d, "file", 2);
	(void)snprintf(p, sizeof(p), "%s/out", d.path);
	assert_int_equal(symlink("/file", p), 0); /* /file of the root, not of this machine */
	dfd = open(d.path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(read_file_at(dfd, "file", 0, 100, &got, &len, NULL), 0);
	assert_string_equal(got, "xx");
	free(got);
	assert_int_equal(read_file_at(dfd, "out", 0, 100, &got, NULL, NULL), -ENOENT);
	assert_int_equal(read_file_at(dfd, "/out", READ_IN_ROOT, 100, &got, &len, NULL), 0);
	assert_string_equal(got, "xx");
	free(got);
	assert_int_equal(read_file_at(dfd, "/out", READ_IN_ROOT | READ_NOFOLLOW, 100, &got, NULL,
				      NULL),
			 -ELOOP);
	assert_int_equal(read_file_at(dfd, "/..", READ_IN_ROOT, 100, &got, NULL, NULL), -EISDIR);
	assert_int_equal(root_read_file(d.path, "/out", 100, &got, NULL), 0);
	assert_string_equal(got, "xx");
	free(got);
	(void)close(dfd);
	dir_remove(&d);
}

/* The cap: an exact fit is read, one byte more is not (or is cut, with READ_PREFIX). */
static void test_cap(void **state)
{
	static const struct {
		size_t size, max;
		unsigned flags;
		int r;
		size_t len;
	} cases[] = {
		{ 0, 0, 0, 0, 0 },
		{ 0, 100, 0, 0, 0 },
		{ 1, 0, 0, -EFBIG, 0 },
		{ 1, 0, READ_PREFIX, 1, 0 },
		{ 100, 100, 0, 0, 100 },
		{ 101, 100, 0, -EFBIG, 0 },
		{ 101, 100, READ_PREFIX, 1, 100 },
		{ 100, 100, READ_PREFIX, 0, 100 },
		{ 4095, 4095, 0, 0, 4095 }, /* one buffer step, exactly */
		{ 4096, 4095, 0, -EFBIG, 0 },
		{ 4096, 4096, 0, 0, 4096 },
		{ 100000, 99999, 0, -EFBIG, 0 },
		{ 100000, 100000, 0, 0, 100000 },
		{ 100000, 5000, READ_PREFIX, 1, 5000 },
	};
	struct dir d;

	(void)state;
	dir_make(&d);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *p = put(&d, "f", cases[i].size);
		char *got = (char *)1;
		size_t len = 7;
		int r = read_file_at(AT_FDCWD, p, cases[i].flags, cases[i].max, &got, &len, NULL);

		assert_int_equal(r, cases[i].r);
		if (r < 0) {
			assert_ptr_equal(got, (char *)1);
			continue;
		}
		assert_int_equal(len, cases[i].len);
		/* NUL-terminated, and the bytes are the file's. */
		assert_int_equal(strlen(got), len);
		assert_int_equal(strspn(got, "x"), len);
		free(got);
	}
	dir_remove(&d);
}

/* A file that grows past the cap while it is read: the cap is on what is read. */
static void test_grows_while_read(void **state)
{
	struct dir d;
	char *got = NULL;
	size_t len = 0;
	const char *p;
	int wfd;

	(void)state;
	dir_make(&d);
	p = put(&d, "log", 10);
	wfd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(wfd >= 0);
	rd.grow_fd = wfd;
	rd.grow = 200000;
	assert_int_equal(read_file(p, 1000, &got, &len), -EFBIG);
	assert_null(got);
	/* Bounded: it stopped once past the cap, not at the file's end. */
	assert_true(rd.calls <= 2);

	(void)close(wfd);

	/* 998 bytes when the read starts, 1,003 when it ends: cut at the cap. */
	p = put(&d, "log2", 998);
	wfd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(wfd >= 0);
	rd.grow_fd = wfd;
	rd.grow = 5;
	assert_int_equal(read_file_at(AT_FDCWD, p, READ_PREFIX, 1000, &got, &len, NULL), 1);
	assert_int_equal(len, 1000);
	assert_int_equal(strspn(got, "x"), 998);
	assert_string_equal(got + 998, "gg");
	free(got);
	(void)close(wfd);
	dir_remove(&d);
}

/* EINTR and short reads are retried; the whole file comes back. */
static void test_eintr_short_reads(void **state)
{
	static const struct {
		int eintr_every;
		size_t chunk;
	} cases[] = { { 2, 0 }, { 0, 1 }, { 0, 7 }, { 3, 3 }, { 2, 4095 } };
	struct dir d;

	(void)state;
	dir_make(&d);
	(void)put(&d, "f", 10000);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char p[96], *got = NULL;
		size_t len = 0;

		(void)snprintf(p, sizeof(p), "%s/f", d.path);
		memset(&rd, 0, sizeof(rd));
		rd.eintr_every = cases[i].eintr_every;
		rd.chunk = cases[i].chunk;
		assert_int_equal(read_file(p, 10000, &got, &len), 0);
		assert_int_equal(len, 10000);
		assert_int_equal(strspn(got, "x"), 10000);
		free(got);
		/* The cap counts bytes, not calls. */
		assert_int_equal(read_file(p, 9999, &got, &len), -EFBIG);
	}
	dir_remove(&d);
}

/* read() failing: its errno, and nothing returned. */
static void test_read_error(void **state)
{
	struct dir d;

	(void)state;
	dir_make(&d);
	rd.fail = EIO;
	expect_refused(put(&d, "f", 10), 0, -EIO, NULL);
	dir_remove(&d);
}

static void test_missing(void **state)
{
	(void)state;
	expect_refused("/nonexistent/file", 0, -ENOENT, NULL);
	expect_refused("/dev/null/x", 0, -ENOTDIR, NULL);
	expect_refused("", 0, -ENOENT, NULL);
}

static void test_file_type_name(void **state)
{
	(void)state;
	assert_string_equal(file_type_name(S_IFREG | 0644), "a regular file");
	assert_string_equal(file_type_name(S_IFDIR), "a directory");
	assert_string_equal(file_type_name(S_IFIFO), "a FIFO");
	assert_string_equal(file_type_name(S_IFSOCK), "a socket");
	assert_string_equal(file_type_name(S_IFCHR), "a character device");
	assert_string_equal(file_type_name(S_IFBLK), "a block device");
	assert_string_equal(file_type_name(S_IFLNK), "a symbolic link");
	assert_string_equal(file_type_name(0), "not a regular file");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_fifo_with_writer),
		cmocka_unit_test(test_directory_socket_devices),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_at_and_in_root),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_grows_while_read),
		cmocka_unit_test(test_eintr_short_reads),
		cmocka_unit_test(test_read_error),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_file_type_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
