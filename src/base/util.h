#pragma once

/* Small helpers shared by every module: time, fds, number parsing, growable buffers. */

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef uint64_t usec_t;
#define USEC_INFINITY ((usec_t)UINT64_MAX)
#define USEC_PER_SEC  ((usec_t)1000000ULL)
#define USEC_PER_MSEC ((usec_t)1000ULL)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b)     ((a) < (b) ? (a) : (b))
#define MAX(a, b)     ((a) > (b) ? (a) : (b))
#define WARN_UNUSED   __attribute__((warn_unused_result))

/* CLOCK_MONOTONIC in microseconds. */
usec_t now_usec(void);
/* CLOCK_REALTIME in µs (for timestamps others read: metrics, files). */
usec_t wall_usec(void);

/*
 * Starts @fn(@arg) on a new thread with every signal blocked in it: signals are the loop's
 * (its signalfd), and a thread that took one would run no handler while the loop missed it.
 * The thread's id goes to *@ret, or with @ret NULL it is detached. Returns 0 or -errno.
 */
int thread_start(pthread_t *ret, void *(*fn)(void *), void *arg) WARN_UNUSED;
/*
 * Initialises @c on CLOCK_MONOTONIC, the clock of now_usec(), so that a pthread_cond_timedwait()
 * deadline computed from now_usec() is not moved by a change of the wall clock.
 */
void cond_init_monotonic(pthread_cond_t *c);

/* Closes @fd if >= 0, preserving errno; returns -1 so callers can write fd = fd_close(fd). */
int fd_close(int fd);

/* free() that returns NULL: p = mfree(p). */
static inline void *mfree(void *p)
{
	free(p);
	return NULL;
}

/*
 * Strict number parsing: the whole string must be a number in range, no sign for unsigned,
 * no leading or trailing space. Return 0, or -EINVAL (not a number) / -ERANGE (out of range).
 */
int safe_atou64(const char *s, uint64_t *ret) WARN_UNUSED;
int safe_atou(const char *s, unsigned *ret) WARN_UNUSED;
int safe_atoi(const char *s, int *ret) WARN_UNUSED;

/* A growable byte buffer. Zero-initialised is empty. */
struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Makes room for @more bytes; returns 0 or -ENOMEM. */
int buf_reserve(struct buf *b, size_t more) WARN_UNUSED;
/* Appends; returns 0 or -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n) WARN_UNUSED;
/* Appends printf output; returns 0, -ENOMEM or -EINVAL. */
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) WARN_UNUSED;
/*
 * Appends @s as a quoted JSON string: '"' and '\\' escaped, \n \t \r by name, other control
 * bytes as \u00XX, valid UTF-8 as it is. Invalid UTF-8 (a stray continuation byte, a truncated
 * or overlong sequence, a surrogate, a code point past U+10FFFF) never reaches the output: each
 * maximal ill-formed subpart becomes one U+FFFD, written as its UTF-8 bytes (EF BF BD), as
 * Unicode's "substitution of maximal subparts" says. The result is always valid UTF-8 JSON.
 * Returns 0 or -ENOMEM.
 */
int buf_json_string(struct buf *b, const char *s) WARN_UNUSED;
/*
 * The one UTF-8 decoder: the length (1-4) of the well-formed UTF-8 sequence at @s
 * (NUL-terminated; a NUL is never read past), or -k: the first k bytes are a maximal ill-formed
 * subpart (Unicode 15, 3.9, table 3-7 gives the ranges: no overlong form, no surrogate, nothing
 * past U+10FFFF). A NUL is a sequence of 1.
 */
int utf8_seq(const unsigned char *s);
/* The 32-bit FNV-1a hash of @s: stable across runs and builds (device letters depend on it). */
uint32_t fnv1a(const char *s);
/* True if @s is well-formed UTF-8 throughout (utf8_seq() at each step). */
bool utf8_valid(const char *s);
/* The one UTF-8 encoder: appends code point @c (at most U+10FFFF) to @b. 0 or -ENOMEM. */
int buf_put_utf8(struct buf *b, uint32_t c) WARN_UNUSED;
/*
 * Makes room in the array *@arr (of *@cap elements of @size bytes, @n in use) for one more,
 * doubling its room (from 8) when full, so that n appends cost O(n) in all. Returns 0 or
 * -ENOMEM (*@arr and *@cap unchanged).
 */
int array_grow(void **arr, size_t *cap, size_t n, size_t size) WARN_UNUSED;
/* Drops the first @n bytes. */
void buf_consume(struct buf *b, size_t n);
void buf_release(struct buf *b);

/* Writes all of @data (retrying EINTR and short writes). Returns 0 or -errno (-EIO: wrote 0). */
int fd_write_all(int fd, const void *data, size_t len) WARN_UNUSED;
/*
 * Paths inside a root, resolved as if the process were chroot(2)ed there: an absolute symlink
 * target starts again at the root, ".." never climbs above it, and nothing outside it is ever
 * reached. The kernel's openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) does it where it
 * exists (Linux 5.6); elsewhere (older kernels: Jetson's L4T R32-R35 run 4.9 and 5.10; a
 * seccomp profile that refuses openat2) a walk one component at a time, each one opened
 * O_PATH|O_NOFOLLOW relative to the directory fd above it, symlinks read with readlinkat()
 * and ".." taken from the walk's own stack of directory fds (never looked up), does the same.
 * Magic links (/proc/<pid>/fd/N, /proc/<pid>/root) are refused by openat2 (-ELOOP); the walk
 * reads them as plain links, resolved inside the root too. Any thread.
 */

/*
 * Opens @path (absolute or not: both start at @root_fd) inside the directory @root_fd.
 * @flags: 0, O_NOFOLLOW (the last component is not followed: a link is opened itself) and/or
 * O_DIRECTORY (-ENOTDIR unless a directory). As in the kernel, a trailing slash ("a/") follows
 * the last link whatever @flags say and wants a directory (-ENOTDIR), and an empty @path is
 * -ENOENT. Returns an O_PATH|O_CLOEXEC fd (the caller
 * closes it) or -errno: -ENOENT, -ENOTDIR, -ELOOP (more than 40 links, or a magic link),
 * -ENAMETOOLONG, -EACCES, -ENOMEM, -EAGAIN (a rename raced the walk, 8 times over).
 * *@ret_path (may be NULL; set on success only) is the path reached, as seen from the root
 * ("/usr/lib/x.so"; heap, the caller frees): from the walk, or after openat2 from the fd's
 * /proc/self/fd name with the root's own name taken off (@path itself when that name is not
 * under the root's, which only a deleted file or a moved root gives).
 */
int root_open(int root_fd, const char *path, int flags, char **ret_path) WARN_UNUSED;
/*
 * Opens the directory @root (NULL or "": "/") as the O_PATH|O_CLOEXEC fd root_open() and
 * root_opendir() start from; its own links are followed (the operator names it). Returns the
 * fd (the caller closes it) or -errno.
 */
int root_dir_open(const char *root) WARN_UNUSED;
/* Whether root_open() uses openat2 here (false: the walk). For tests and bench. */
bool root_open_kernel(void);

/* The largest "/proc/self/fd/N" + NUL. */
#define FD_PATH_MAX 32
/* "/proc/self/fd/@fd" into @buf: the path that reaches what @fd reaches (connect, dlopen). */
const char *fd_path(int fd, char buf[FD_PATH_MAX]);
/*
 * Opens again, with @flags (O_CLOEXEC is added), what the O_PATH fd @fd reaches, through
 * /proc/self/fd: the same inode, whatever happened to its path since (file-read.h reads a
 * file this way once its type is checked). Returns the fd or -errno.
 */
int fd_reopen(int fd, int flags) WARN_UNUSED;
/*
 * Opens the directory @path inside the directory @root_fd (root_open(): links and ".." stay
 * inside) for readdir: *@ret is the caller's to closedir(). Non-blocking, close-on-exec.
 * Returns 0 or -errno (root_open()'s, -ENOTDIR, -ENOMEM, ...).
 */
int root_opendir(int root_fd, const char *path, DIR **ret) WARN_UNUSED;
/*
 * mkdir -p: creates @dir and each missing parent with @mode, whatever the umask (each one made
 * is chmod'ed). Thread-safe. Returns 0, or -errno (-ENOTDIR: a file in the way, -EACCES, ...).
 */
int mkdir_parents(const char *dir, unsigned mode) WARN_UNUSED;

/*
 * rm -r of @name inside the directory @dfd (AT_FDCWD: the working directory), links never
 * followed: a link is removed itself, wherever it points. At most @depth directory levels
 * are entered (-ELOOP past them; the rest is left). Nothing there is not an error.
 * Thread-safe. Returns 0 or the first -errno met (the removal goes on past it).
 */
int rm_tree_at(int dfd, const char *name, unsigned depth) WARN_UNUSED;

/* A copy of @path without trailing slashes ("/" stays "/"); a heap string or NULL. */
char *path_trim(const char *path) WARN_UNUSED;
/* Joins a directory and a file name with exactly one '/'; returns a heap string or NULL. */
char *path_join(const char *dir, const char *name) WARN_UNUSED;
/*
 * True when @path is absolute and none of its components is "." or "..": joined to a root,
 * it names something under that root (links aside), whatever the root is.
 */
bool path_is_clean_absolute(const char *path);

/*
 * Splits @path into its parent directory and last component, trailing slashes dropped: "a/b/"
 * is "a" and "b", "b" is "." and "b", "/b" is "/" and "b"; "/" has neither (both NULL). Either
 * ret may be NULL when not wanted. Returns 0 or -ENOMEM.
 */
int path_split(const char *path, char **ret_parent, char **ret_name) WARN_UNUSED;

/*
 * <root><path> with @root's trailing slashes dropped, so "/" + "/dev/x" is "/dev/x" and a NULL
 * or empty @root gives @path. Returns a heap string or NULL.
 */
char *root_join(const char *root, const char *path) WARN_UNUSED;

/* printf into a new heap string; NULL on failure. */
char *strdup_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0))) WARN_UNUSED;
char *strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2))) WARN_UNUSED;

/*
 * The one error-message helper: when @reterr is not NULL, frees *@reterr and sets it to the
 * formatted heap message (NULL when out of memory). Returns @r, so that callers write
 * `return set_error(reterr, -ENOENT, "...", ...)`.
 */
int set_error(char **reterr, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Bitmaps of uint64_t words, bit @i in word i / 64. The caller sizes them: BITMAP_WORDS(n). */
#define BITMAP_WORDS(n) (((size_t)(n) + 63) / 64)
static inline bool bitmap_test(const uint64_t *w, unsigned i)
{
	return w[i / 64] >> (i % 64) & 1;
}
static inline void bitmap_set(uint64_t *w, unsigned i)
{
	w[i / 64] |= (uint64_t)1 << (i % 64);
}
static inline void bitmap_clear(uint64_t *w, unsigned i)
{
	w[i / 64] &= ~((uint64_t)1 << (i % 64));
}

bool streq_ptr(const char *a, const char *b);
#define streq(a, b)	      (strcmp((a), (b)) == 0)
#define startswith(s, prefix) (strncmp((s), (prefix), strlen(prefix)) == 0)

/*
 * A JSON writer appending to @b: objects, arrays, keys, strings, numbers and booleans, with
 * the commas and the nesting handled. @indent 0 writes compact JSON ({"a":1,"b":[true]});
 * n > 0 one member or element per line, n spaces a level, ": " after a key, and an empty
 * object or array as {} / []. Errors are sticky in @r (-ENOMEM, or what json_fail() set):
 * every call after one does nothing, so the caller checks @r once at the end. Zero-initialise
 * it, then set @b (and @indent).
 */
struct json_writer {
	struct buf *b;
	unsigned indent;
	unsigned depth;
	bool comma; /* a value was written at this level */
	bool key;   /* a key was just written: its value follows on the same line */
	int r;
};

void json_object_open(struct json_writer *j);
void json_object_close(struct json_writer *j);
void json_array_open(struct json_writer *j);
void json_array_close(struct json_writer *j);
/* A member's key; its value is the next call. */
void json_key(struct json_writer *j, const char *k);
/* A string, escaped by buf_json_string(); NULL writes "". */
void json_string(struct json_writer *j, const char *s);
void json_int(struct json_writer *j, int64_t v);
void json_uint(struct json_writer *j, uint64_t v);
void json_bool(struct json_writer *j, bool v);
/* Makes @r (< 0) the writer's error unless it has one already. */
void json_fail(struct json_writer *j, int r);
