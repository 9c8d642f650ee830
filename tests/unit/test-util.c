#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "file-read.h"
#include "file-writer.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

static void test_safe_atou(void **state)
{
	unsigned u = 7;
	uint64_t v;
	int i;

	assert_int_equal(safe_atou("42", &u), 0);
	assert_int_equal(u, 42);
	assert_int_equal(safe_atou("", &u), -EINVAL);
	assert_int_equal(safe_atou("-1", &u), -EINVAL);
	assert_int_equal(safe_atou(" 1", &u), -EINVAL);
	assert_int_equal(safe_atou("1x", &u), -EINVAL);
	assert_int_equal(safe_atou("4294967296", &u), -ERANGE);
	assert_int_equal(safe_atou64("18446744073709551616", &v), -ERANGE);
	assert_int_equal(safe_atoi("-12", &i), 0);
	assert_int_equal(i, -12);
	assert_int_equal(safe_atoi("2147483648", &i), -ERANGE);
	assert_int_equal(safe_atoi("-", &i), -EINVAL);
}

static void test_buf(void **state)
{
	struct buf b = { 0 };

	assert_int_equal(buf_append(&b, "abc", 3), 0);
	assert_int_equal(buf_printf(&b, "-%d-", 12), 0);
	assert_int_equal(b.len, 7);
	assert_string_equal((char *)b.data, "abc-12-");
	buf_consume(&b, 4);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.data, "12-", 3);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(buf_append(&b, "x", 1), 0);
	assert_int_equal(b.len, 10003);
	buf_consume(&b, 20000);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	assert_null(b.data);
}

static void test_json_string(void **state)
{
	struct buf b = { 0 };

	assert_int_equal(buf_json_string(&b, "plain"), 0);
	assert_string_equal((char *)b.data, "\"plain\"");
	b.len = 0;
	assert_int_equal(buf_json_string(&b, "a\"b\\c\nd\te\rf\001g r\xc3\xa9"), 0);
	assert_string_equal((char *)b.data, "\"a\\\"b\\\\c\\nd\\te\\rf\\u0001g r\xc3\xa9\"");
	b.len = 0;
	assert_int_equal(buf_json_string(&b, ""), 0);
	assert_string_equal((char *)b.data, "\"\"");
	buf_release(&b);
}

/* Invalid UTF-8 comes out as U+FFFD (EF BF BD), one per maximal ill-formed subpart. */
static void test_fnv1a(void **state)
{
	(void)state;
	/* The published FNV-1a 32-bit test vectors: device letters must not move between builds. */
	assert_int_equal(fnv1a(""), 0x811c9dc5u);
	assert_int_equal(fnv1a("a"), 0xe40c292cu);
	assert_int_equal(fnv1a("foobar"), 0xbf9cf968u);
}

static void test_utf8_valid(void **state)
{
	(void)state;
	assert_true(utf8_valid("plain"));
	assert_true(utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
	assert_false(utf8_valid("\xff"));
	assert_false(utf8_valid("\xc3"));	      /* truncated */
	assert_false(utf8_valid("\xc0\xaf"));	      /* overlong '/' */
	assert_false(utf8_valid("\xe0\x80\xaf"));     /* overlong '/' */
	assert_false(utf8_valid("\xed\xa0\x80"));     /* surrogate */
	assert_false(utf8_valid("\xf4\x90\x80\x80")); /* above U+10FFFF */
	assert_false(utf8_valid("\x80"));
	assert_true(utf8_valid(""));
}

static void test_json_string_utf8(void **state)
{
#define FFFD "\xef\xbf\xbd"
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9",
		  "\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9" },
		{ "a\x80"
		  "b",
		  "a" FFFD "b" },			     /* a stray continuation byte */
		{ "\xff\xfe", FFFD FFFD },		     /* bytes UTF-8 never uses */
		{ "\xc0\xaf", FFFD FFFD },		     /* an overlong '/' */
		{ "\xe0\x80\xaf", FFFD FFFD FFFD },	     /* overlong, 3 bytes */
		{ "\xed\xa0\x80x", FFFD FFFD FFFD "x" },     /* a surrogate, U+D800 */
		{ "\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD }, /* past U+10FFFF */
		{ "\xe2\x82", FFFD },			     /* cut short at the end */
		{ "\xf0\x9f\x98x", FFFD "x" },		     /* cut short before another */
		{ "\xe2\x82\"", FFFD "\\\"" },		     /* cut short by a quote */
		{ "\xc3\x01", FFFD "\\u0001" },		     /* cut short by a control byte */
	};
	struct buf b = { 0 };

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		b.len = 0;
		assert_int_equal(buf_json_string(&b, cases[i].in), 0);
		assert_int_equal(buf_append(&b, "", 1), 0);
		assert_true(strlen((char *)b.data) == strlen(cases[i].out) + 2);
		assert_memory_equal(b.data + 1, cases[i].out, strlen(cases[i].out));
	}
	buf_release(&b);
#undef FFFD
}

/* Takes the writer's output as a C string (the buffer gets a NUL, not counted in len). */
static const char *json_out(struct json_writer *j)
{
	assert_int_equal(j->r, 0);
	assert_int_equal(buf_append(j->b, "", 1), 0);
	j->b->len--;
	return (const char *)j->b->data;
}

/* Writes one document of every kind of value, nested, into @j. */
static void json_sample(struct json_writer *j)
{
	json_object_open(j);
	json_key(j, "s");
	json_string(j, "a\"b\\c\n");
	json_key(j, "i");
	json_int(j, INT64_MIN);
	json_key(j, "u");
	json_uint(j, UINT64_MAX);
	json_key(j, "list");
	json_array_open(j);
	json_bool(j, true);
	json_bool(j, false);
	json_string(j, NULL);
	json_object_open(j);
	json_object_close(j);
	json_array_open(j);
	json_array_close(j);
	json_array_close(j);
	json_key(j, "o");
	json_object_open(j);
	json_key(j, "k");
	json_int(j, -1);
	json_object_close(j);
	json_object_close(j);
}

static void test_json_writer(void **state)
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b };

	json_sample(&j);
	assert_string_equal(json_out(&j),
			    "{\"s\":\"a\\\"b\\\\c\\n\",\"i\":-9223372036854775808,"
			    "\"u\":18446744073709551615,\"list\":[true,false,\"\",{},[]],"
			    "\"o\":{\"k\":-1}}");
	buf_release(&b);

	j = (struct json_writer){ .b = &b, .indent = 2 };
	json_sample(&j);
	assert_string_equal(json_out(&j), "{\n"
					  "  \"s\": \"a\\\"b\\\\c\\n\",\n"
					  "  \"i\": -9223372036854775808,\n"
					  "  \"u\": 18446744073709551615,\n"
					  "  \"list\": [\n"
					  "    true,\n"
					  "    false,\n"
					  "    \"\",\n"
					  "    {},\n"
					  "    []\n"
					  "  ],\n"
					  "  \"o\": {\n"
					  "    \"k\": -1\n"
					  "  }\n"
					  "}");
	buf_release(&b);
}

static void test_json_writer_error(void **state)
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b };
	size_t len;

	/* The first error sticks: nothing is written after it, and a later one does not replace it. */
	json_object_open(&j);
	json_key(&j, "a");
	json_fail(&j, -ENOMEM);
	len = b.len;
	json_string(&j, "x");
	json_fail(&j, -EINVAL);
	json_object_close(&j);
	assert_int_equal(j.r, -ENOMEM);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, "{\"a\":", len);
	buf_release(&b);
}

static void test_helpers(void **state)
{
	char *s, *err = NULL;
	uint64_t w[BITMAP_WORDS(130)] = { 0 };

	(void)state;
	s = root_join("/host//", "/dev/nvidia0");
	assert_string_equal(s, "/host/dev/nvidia0");
	free(s);
	s = root_join("/", "/dev/nvidia0");
	assert_string_equal(s, "/dev/nvidia0");
	free(s);
	s = root_join(NULL, "/dev/x");
	assert_string_equal(s, "/dev/x");
	free(s);

	s = strdup_printf("%s=%d", "a", 7);
	assert_string_equal(s, "a=7");
	free(s);

	assert_int_equal(set_error(&err, -ENOENT, "no %s", "lib"), -ENOENT);
	assert_string_equal(err, "no lib");
	assert_int_equal(set_error(&err, -EIO, "second"), -EIO); /* replaces, no leak */
	assert_string_equal(err, "second");
	free(err);
	assert_int_equal(set_error(NULL, -EINVAL, "dropped"), -EINVAL);

	assert_int_equal(BITMAP_WORDS(130), 3);
	bitmap_set(w, 0);
	bitmap_set(w, 129);
	assert_true(bitmap_test(w, 0) && bitmap_test(w, 129));
	assert_false(bitmap_test(w, 64) || bitmap_test(w, 1));
	assert_int_equal(w[2], 2);
	bitmap_clear(w, 129);
	assert_false(bitmap_test(w, 129));
	assert_int_equal(w[2], 0);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/test-util-XXXXXX";
	char *p, *content = NULL;
	size_t len = 0;
	struct stat st;

	assert_non_null(mkdtemp(dir));
	p = path_join(dir, "f.txt");
	assert_non_null(p);
	assert_int_equal(file_write_atomic(p, "hello", 5, 0640, NULL), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(read_file(p, 100, &content, &len), 0);
	assert_int_equal(len, 5);
	assert_string_equal(content, "hello");
	free(content);
	assert_int_equal(read_file(p, 4, &content, &len), -EFBIG);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(read_file(p, 100, &content, &len), -ENOENT);
	free(p);
	p = path_join("/a/b//", "/c");
	assert_string_equal(p, "/a/b/c");
	free(p);
	p = path_join("/", "x");
	assert_string_equal(p, "/x");
	free(p);
	assert_int_equal(rmdir(dir), 0);
}

/* --- read_file() and paths inside a root --- */

/*
 * Test-only: openat2 made to fail with this errno (-Wl,--wrap=syscall), as on Linux < 5.6 (ENOSYS)
 * or under a seccomp filter (ENOSYS or EPERM); 0: not.
 */
static int no_openat2;
/* NOLINTBEGIN(bugprone-reserved-identifier): the names ld's --wrap gives */
long __real_syscall(long n, ...);
long __wrap_syscall(long n, ...);
/* NOLINTEND(bugprone-reserved-identifier) */
long __wrap_syscall(long n, ...) /* NOLINT(bugprone-reserved-identifier) */
{
	va_list ap;
	long a[6];

	va_start(ap, n);
	for (size_t i = 0; i < ELEMENTSOF(a); i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (n == SYS_openat2 && no_openat2) {
		errno = no_openat2;
		return -1;
	}
	return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static void put(const char *dir, const char *rel, const char *text)
{
	char *p = path_join(dir, rel);

	assert_non_null(p);
	assert_int_equal(file_write_atomic(p, text, strlen(text), 0644, NULL), 0);
	free(p);
}

static void link_at(const char *dir, const char *rel, const char *target)
{
	char *p = path_join(dir, rel);

	assert_non_null(p);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

/* A root with links in, out and around; one outside it with what must never be read. */
struct tree {
	char base[64];
	char root[96];
	char out[96];
};

static void tree_make(struct tree *t)
{
	char p[256];

	unit_tmpdir("test-util-root", t->base, sizeof(t->base));
	(void)snprintf(t->root, sizeof(t->root), "%s/root", t->base);
	(void)snprintf(t->out, sizeof(t->out), "%s/outside", t->base);
	assert_int_equal(mkdir(t->root, 0755), 0);
	assert_int_equal(mkdir(t->out, 0755), 0);
	put(t->out, "secret", "OUT");
	(void)snprintf(p, sizeof(p), "%s/etc", t->root);
	assert_int_equal(mkdir(p, 0755), 0);
	(void)snprintf(p, sizeof(p), "%s/data", t->root);
	assert_int_equal(mkdir(p, 0755), 0);
	put(t->root, "etc/a", "A");
	put(t->root, "data/k", "K");
	link_at(t->root, "abs", "/etc/a"); /* absolute: taken under the root */
	link_at(t->root, "rel", "../../../../../outside/secret"); /* climbs: stops at the root */
	(void)snprintf(p, sizeof(p), "%s/secret", t->out);
	link_at(t->root, "out", p);	    /* this machine's path: under the root, missing */
	link_at(t->root, "outdir", t->out); /* the same, for a directory */
	link_at(t->root, "dir", "/etc");
	link_at(t->root, "l1", "l2");
	link_at(t->root, "l2", "/abs"); /* a chain: l1 -> l2 -> /abs -> /etc/a */
	link_at(t->root, "loop", "loop");
	link_at(t->root, "top", "/");
	link_at(t->root, "var", "/data");     /* as /var/lib/kubelet -> /data/kubelet */
	link_at(t->root, "slash", "/etc/a/"); /* a trailing slash in the target */
	(void)snprintf(p, sizeof(p), "%s/fifo", t->root);
	assert_int_equal(mkfifo(p, 0644), 0);
}

static void tree_remove(struct tree *t)
{
	unit_rm_tree(t->base);
}

static void expect_read(const char *root, const char *path, int r, const char *text)
{
	char *got = NULL;
	size_t len = 0;

	assert_int_equal(root_read_file(root, path, 100, &got, &len), r);
	if (text)
		assert_string_equal(got, text);
	free(got);
}

static void expect_path(int root_fd, const char *path, int flags, const char *want)
{
	char *got = NULL;
	int fd = root_open(root_fd, path, flags, &got);

	assert_true(fd >= 0);
	assert_string_equal(got, want);
	free(got);
	(void)close(fd);
}

/* The names root_opendir() lists in @path below @root_fd, sorted, "," between; or "-errno". */
static void expect_dir(int root_fd, const char *path, const char *want)
{
	char got[256] = "", *names[16];
	struct dirent *de;
	size_t n = 0;
	DIR *d = NULL;
	int r = root_opendir(root_fd, path, &d);

	if (r < 0) {
		(void)snprintf(got, sizeof(got), "%d", r);
		assert_null(d);
		assert_string_equal(got, want);
		return;
	}
	while ((de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
			assert_true(n < ELEMENTSOF(names));
			names[n] = strdup(de->d_name);
			assert_non_null(names[n++]);
		}
	assert_int_equal(closedir(d), 0);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(names[j], names[i]) < 0) {
				char *x = names[i];

				names[i] = names[j];
				names[j] = x;
			}
	for (size_t i = 0, len = 0; i < n; i++) {
		int k = snprintf(got + len, sizeof(got) - len, "%s%s", i ? "," : "", names[i]);

		assert_true(k > 0 && (size_t)k < sizeof(got) - len);
		len += (size_t)k;
		free(names[i]);
	}
	assert_string_equal(got, want);
}

/* The same resolution, whichever of openat2 and the walk does it. */
static void root_cases(void)
{
	struct tree t;
	struct stat st;
	char *s = (char *)1;
	int root_fd, fd;

	tree_make(&t);
	root_fd = root_dir_open(t.root);
	assert_true(root_fd >= 0);

	expect_read(t.root, "/etc/a", 0, "A");
	expect_read(t.root, "etc/a", 0, "A");
	expect_read(t.root, "/abs", 0, "A");
	expect_read(t.root, "/l1", 0, "A");
	expect_read(t.root, "/dir/a", 0, "A");
	expect_read(t.root, "/etc/../../../etc/a", 0, "A");
	expect_read(t.root, "/top/../top/etc/a", 0, "A");
	expect_read(t.root, "/var/k", 0, "K");
	/* Never outside: neither by ".." nor by this machine's absolute path. */
	expect_read(t.root, "/rel", -ENOENT, NULL);
	expect_read(t.root, "/out", -ENOENT, NULL);
	expect_read(t.root, "/outdir/secret", -ENOENT, NULL);
	expect_read(t.root, "/../outside/secret", -ENOENT, NULL);
	expect_read(t.root, "/loop", -ELOOP, NULL);
	expect_read(t.root, "/etc/a/x", -ENOTDIR, NULL);
	/* Neither a FIFO nor a directory is read: -EBADFD and -EISDIR, and nothing blocks. */
	expect_read(t.root, "/fifo", -EBADFD, NULL);
	expect_read(t.root, "/etc", -EISDIR, NULL);
	expect_read(t.root, "/dev-null-is-not-here", -ENOENT, NULL);
	expect_read("/dev/null", "x", -ENOTDIR, NULL);

	expect_path(root_fd, "/abs", 0, "/etc/a");
	expect_path(root_fd, "/dir", O_DIRECTORY, "/etc");
	expect_path(root_fd, "/", 0, "/");
	expect_path(root_fd, "/etc/..", 0, "/");
	expect_path(root_fd, "/top", 0, "/");
	expect_path(root_fd, "/var/k", 0, "/data/k");
	/* O_NOFOLLOW: the link itself. */
	fd = root_open(root_fd, "/dir/../abs", O_NOFOLLOW, NULL);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	(void)close(fd);
	assert_int_equal(root_open(root_fd, "/abs", O_DIRECTORY, &s), -ENOTDIR);
	assert_ptr_equal(s, (char *)1); /* untouched on failure */
	/* An empty path names nothing. */
	assert_int_equal(root_open(root_fd, "", 0, NULL), -ENOENT);
	assert_int_equal(root_open(root_fd, "", O_NOFOLLOW, NULL), -ENOENT);
	/* A trailing slash follows the last link, O_NOFOLLOW or not, and wants a directory. */
	expect_read(t.root, "/etc/a/", -ENOTDIR, NULL);
	assert_int_equal(root_open(root_fd, "/etc/a/", 0, NULL), -ENOTDIR);
	assert_int_equal(root_open(root_fd, "/etc/a/", O_NOFOLLOW, NULL), -ENOTDIR);
	assert_int_equal(root_open(root_fd, "/abs/", 0, NULL), -ENOTDIR);
	assert_int_equal(root_open(root_fd, "/abs/", O_NOFOLLOW, NULL), -ENOTDIR);
	assert_int_equal(root_open(root_fd, "/slash", 0, NULL), -ENOTDIR);
	expect_path(root_fd, "/dir/", O_NOFOLLOW, "/etc");
	expect_path(root_fd, "/etc//", O_DIRECTORY, "/etc");
	fd = root_open(root_fd, "/slash", O_NOFOLLOW, NULL);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	(void)close(fd);

	/* A directory listed from below the root: links followed inside it, never out of it. */
	expect_dir(root_fd, "/etc", "a");
	expect_dir(root_fd, "/dir", "a");
	expect_dir(root_fd, "/var", "k");
	expect_dir(root_fd, "/top/etc", "a");
	expect_dir(root_fd, "/outdir", "-2"); /* -ENOENT: this machine's dir is not reached */
	expect_dir(root_fd, "/etc/a", "-20"); /* -ENOTDIR */
	expect_dir(root_fd, "/fifo", "-20");  /* never opened for reading */
	expect_dir(root_fd, "/loop", "-40");  /* -ELOOP */

	(void)close(root_fd);
	tree_remove(&t);
}

static void test_root_open_openat2(void **state)
{
	(void)state;
	/* Linux >= 5.6 has openat2; qemu-user before 9.0 (the arm64 unit tests) has not. */
	if (!root_open_kernel())
		skip();
	root_cases();
	assert_true(root_open_kernel());
}

/*
 * Runs after test_root_open_openat2: openat2 gone makes root_open() walk, from then on. Once only
 * per process, so with EPERM (a seccomp filter installed after the probe), which takes the same
 * branch as ENOSYS.
 */
static void test_root_open_walk(void **state)
{
	(void)state;
	no_openat2 = EPERM;
	root_cases();
	assert_false(root_open_kernel());
	no_openat2 = 0;
}

/* The thread thread_start() made: every signal blocked in it (the loop's signalfd takes them). */
static void *mask_of(void *arg)
{
	sigset_t *mask = arg;

	(void)pthread_sigmask(SIG_SETMASK, NULL, mask);
	return NULL;
}

static void test_thread_start(void **state)
{
	sigset_t mask, before, after;
	pthread_t t;

	(void)sigemptyset(&before);
	(void)pthread_sigmask(SIG_SETMASK, &before, NULL);
	assert_int_equal(thread_start(&t, mask_of, &mask), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* The standard signals, and the first real-time one (glibc keeps the two below it). */
	assert_int_equal(sigismember(&mask, SIGRTMIN), 1);
	for (int sig = 1; sig <= SIGSYS; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			assert_int_equal(sigismember(&mask, sig), 1);
	/* The caller's own mask is left as it was. */
	(void)pthread_sigmask(SIG_SETMASK, NULL, &after);
	assert_int_equal(sigismember(&after, SIGTERM), 0);
	assert_int_equal(sigismember(&after, SIGHUP), 0);
}

/* path_trim(): trailing slashes off, "/" (however many) stays "/", nothing else touched. */
static void test_path_trim(void **state)
{
	static const char *const cases[][2] = {
		{ "/a/b", "/a/b" }, { "/a/b/", "/a/b" }, { "a//", "a" }, { "/", "/" },
		{ "///", "/" },	    { "a//b", "a//b" },	 { "", "" },	 { ".", "." },
	};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *t = path_trim(cases[i][0]);

		assert_non_null(t);
		assert_string_equal(t, cases[i][1]);
		free(t);
	}
}

static void test_path_is_clean_absolute(void **state)
{
	static const char *const good[] = { "/",      "/a",	"/a/b/", "//a//b", "/a/.b",
					    "/a/..b", "/a/b..", "/...",	 "/a/b.c" };
	static const char *const bad[] = { "",	     "a",	"a/b",	 "./a",	 "/.",	    "/..",
					   "/a/./b", "/a/../b", "/a/..", "/a/.", "/a//../b" };

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(good); i++)
		assert_true(path_is_clean_absolute(good[i]));
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_false(path_is_clean_absolute(bad[i]));
}

/* path_split(): the parent and last component; trailing slashes dropped, "/" has neither. */
static void test_path_split(void **state)
{
	static const struct {
		const char *path, *parent, *name;
	} cases[] = {
		{ "/a/b/c", "/a/b", "c" }, { "a/b/", "a", "b" }, { "a/b//", "a", "b" },
		{ "b", ".", "b" },	   { "b/", ".", "b" },	 { "/b", "/", "b" },
		{ "/b/", "/", "b" },	   { ".", ".", "." },	 { "a//b", "a/", "b" },
		{ "/", NULL, NULL },	   { "//", NULL, NULL },
	};
	char *parent, *name;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		parent = name = (char *)"unset";
		assert_int_equal(path_split(cases[i].path, &parent, &name), 0);
		if (cases[i].parent) {
			assert_string_equal(parent, cases[i].parent);
			assert_string_equal(name, cases[i].name);
		} else {
			assert_null(parent);
			assert_null(name);
		}
		free(parent);
		free(name);
	}
	/* Either half alone. */
	assert_int_equal(path_split("/a/b", &parent, NULL), 0);
	assert_string_equal(parent, "/a");
	free(parent);
	assert_int_equal(path_split("/a/b", NULL, &name), 0);
	assert_string_equal(name, "b");
	free(name);
}

/*
 * rm_tree_at(): a tree goes whole; a link inside it goes as a link (its target, outside,
 * stays); a tree deeper than asked is left with -ELOOP; nothing there is not an error.
 */
static void test_rm_tree_at(void **state)
{
	char dir[64], p[128], ln[128];
	struct stat st;
	int dfd;

	unit_tmpdir("test-util-rm", dir, sizeof(dir));
	unit_make_path(dir, "/outside/keep");
	unit_make_path(dir, "/t/a/b/file");
	unit_make_path(dir, "/t/empty/");
	(void)snprintf(p, sizeof(p), "%s/outside", dir);
	(void)snprintf(ln, sizeof(ln), "%s/t/a/link", dir);
	assert_int_equal(symlink(p, ln), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(rm_tree_at(dfd, "t", 1), -ELOOP); /* t/a/b is deeper */
	assert_int_equal(fstatat(dfd, "t/a/b/file", &st, 0), 0);
	assert_int_equal(rm_tree_at(dfd, "t", 8), 0);
	assert_int_equal(fstatat(dfd, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(fstatat(dfd, "outside/keep", &st, 0), 0);
	assert_int_equal(rm_tree_at(dfd, "t", 8), 0);
	/* A link named as the tree: unlinked, never entered. */
	assert_int_equal(symlinkat(p, dfd, "ln"), 0);
	assert_int_equal(rm_tree_at(dfd, "ln", 8), 0);
	assert_int_equal(fstatat(dfd, "outside/keep", &st, 0), 0);
	(void)close(dfd);
	unit_rm_tree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_safe_atou),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_rm_tree_at),
		cmocka_unit_test(test_helpers),
		cmocka_unit_test(test_json_writer),
		cmocka_unit_test(test_json_writer_error),
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_json_string_utf8),
		/* In this order: the second one takes openat2 away for good. */
		cmocka_unit_test(test_root_open_openat2),
		cmocka_unit_test(test_root_open_walk),
		cmocka_unit_test(test_path_trim),
		cmocka_unit_test(test_path_split),
		cmocka_unit_test(test_path_is_clean_absolute),
		cmocka_unit_test(test_thread_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
