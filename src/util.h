#pragma once

/* Small helpers shared by every module: time, fds, number parsing, growable buffers. */

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
 * bytes as \u00XX; other bytes as they are (the caller checks UTF-8 where it matters).
 * Returns 0 or -ENOMEM.
 */
int buf_json_string(struct buf *b, const char *s) WARN_UNUSED;
/* Drops the first @n bytes. */
void buf_consume(struct buf *b, size_t n);
void buf_release(struct buf *b);

/*
 * Reads @fd to its end into a NUL-terminated heap buffer (*@ret, the caller frees; the length
 * without the NUL in *@ret_len, which may be NULL). Returns 0, -EFBIG past @max bytes, -ENOMEM
 * or -errno of read(); nothing is returned on failure.
 */
int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len) WARN_UNUSED;
/* Writes all of @data (retrying EINTR and short writes). Returns 0 or -errno (-EIO: wrote 0). */
int fd_write_all(int fd, const void *data, size_t len) WARN_UNUSED;
/* The same for the file at @path: -errno from open() too. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len) WARN_UNUSED;

/*
 * The one atomic file writer. Writes @len bytes to @path atomically and durably with @mode
 * (whatever the umask): a new temporary file in the same directory (".<name>.XXXXXX": a
 * dotfile, which NFD and CDI registries skip; created O_EXCL, so nothing planted there is
 * followed), written, fsync'ed, renamed over @path, then the directory fsync'ed. A reader sees
 * the old file or the new one, never a part; on failure the temporary file is removed and
 * @path is left as it was. Blocks for as long as the disk takes (seconds on an SD card, for
 * ever on a frozen filesystem): off the event loop, through file-writer.h. Thread-safe.
 * Returns 0 or -errno; on failure *@reterr_step (when not NULL) names the step for a message
 * "failed to <step> <path>": "create a temporary file for", "write", "sync the directory of".
 */
int write_file_atomic_step(const char *path, const void *data, size_t len, unsigned mode,
			   const char **reterr_step) WARN_UNUSED;
/* write_file_atomic_step() without the step. */
int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode) WARN_UNUSED;
/*
 * mkdir -p: creates @dir and each missing parent with @mode, whatever the umask (each one made
 * is chmod'ed). Thread-safe. Returns 0, or -errno (-ENOTDIR: a file in the way, -EACCES, ...).
 */
int mkdir_parents(const char *dir, unsigned mode) WARN_UNUSED;
/*
 * 0 when @path is a regular file (not reached through a final symlink) holding exactly the @len
 * bytes of @data; -ESTALE when something else is there (other bytes, a symlink, a FIFO, a
 * directory); -ENOENT when nothing is (or a parent is missing); another -errno when it cannot
 * be read. Never blocks on a FIFO; reads at most @len bytes. Thread-safe.
 */
int file_equals(const char *path, const void *data, size_t len) WARN_UNUSED;

/* Joins a directory and a file name with exactly one '/'; returns a heap string or NULL. */
char *path_join(const char *dir, const char *name) WARN_UNUSED;

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
