#include "util.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

usec_t now_usec(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

usec_t wall_usec(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

int fd_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;

		(void)close(fd);
		errno = saved;
	}
	return -1;
}

int fd_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int safe_atou64(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end = NULL;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno != 0 || !end || *end != 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

int safe_atou(const char *s, unsigned *ret)
{
	uint64_t v;
	int r = safe_atou64(s, &v);

	if (r < 0)
		return r;
	if (v > UINT_MAX)
		return -ERANGE;
	*ret = (unsigned)v;
	return 0;
}

int safe_atoi(const char *s, int *ret)
{
	long v;
	char *end = NULL;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno == ERANGE || v > INT_MAX || v < INT_MIN)
		return -ERANGE;
	if (errno != 0 || !end || *end != 0 || end == s)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

int buf_reserve(struct buf *b, size_t more)
{
	size_t want, ncap;
	uint8_t *p;

	if (more > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	want = b->len + more + 1;
	if (want <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 256;
	while (ncap < want)
		ncap = ncap > SIZE_MAX / 2 ? want : ncap * 2;
	p = realloc(b->data, ncap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = ncap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	int r = buf_reserve(b, n);

	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	r = buf_reserve(b, (size_t)n);
	if (r < 0)
		return r;
	va_start(ap, fmt);
	(void)vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int buf_json_string(struct buf *b, const char *s)
{
	const char *run = s;
	int r = buf_append(b, "\"", 1);

	for (; r == 0 && *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		r = buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		if (r < 0)
			break;
		switch (c) {
		case '"':
			r = buf_append(b, "\\\"", 2);
			break;
		case '\\':
			r = buf_append(b, "\\\\", 2);
			break;
		case '\n':
			r = buf_append(b, "\\n", 2);
			break;
		case '\t':
			r = buf_append(b, "\\t", 2);
			break;
		case '\r':
			r = buf_append(b, "\\r", 2);
			break;
		default:
			(void)snprintf(esc, sizeof(esc), "\\u%04x", c);
			r = buf_append(b, esc, 6);
			break;
		}
	}
	if (r == 0)
		r = buf_append(b, run, (size_t)(s - run));
	if (r == 0)
		r = buf_append(b, "\"", 1);
	return r;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void buf_release(struct buf *b)
{
	b->data = mfree(b->data);
	b->len = b->cap = 0;
}

int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
	struct buf b = { 0 };
	int r;

	for (;;) {
		ssize_t n;

		r = buf_reserve(&b, 4096);
		if (r < 0)
			goto out;
		n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > max) {
			r = -EFBIG;
			goto out;
		}
	}
	b.data[b.len] = 0;
	*ret = (char *)b.data;
	if (ret_len)
		*ret_len = b.len;
	b.data = NULL;
	r = 0;
out:
	buf_release(&b);
	return r;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fd_read_all(fd, max, ret, ret_len);
	fd_close(fd);
	return r;
}

int write_file_atomic_step(const char *path, const void *data, size_t len, unsigned mode,
			   const char **reterr_step)
{
	const char *slash = strrchr(path, '/'), *step = "write";
	char *tmp = NULL, *dir = NULL;
	int fd = -1, dfd = -1, r;

	if (!slash)
		r = asprintf(&tmp, ".%s.XXXXXX", path);
	else
		r = asprintf(&tmp, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1);
	if (r < 0) {
		tmp = NULL;
		r = -ENOMEM;
		goto out;
	}
	dir = !slash	    ? strdup(".") :
	      slash == path ? strdup("/") :
			      strndup(path, (size_t)(slash - path));
	if (!dir) {
		r = -ENOMEM;
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		tmp = mfree(tmp); /* nothing to remove */
		step = "create a temporary file for";
		goto out;
	}
	r = fd_write_all(fd, data, len);
	if (r < 0)
		goto out;
	/* The data must be on disk before the rename makes it the file. */
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		r = -errno;
		goto out;
	}
	r = close(fd);
	fd = -1;
	if (r < 0 || rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	tmp = mfree(tmp);
	/* And the rename itself, which lives in the directory. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		step = "sync the directory of";
		goto out;
	}
	r = 0;
out:
	if (r < 0 && reterr_step)
		*reterr_step = step;
	fd_close(fd);
	fd_close(dfd);
	if (tmp)
		(void)unlink(tmp);
	free(tmp);
	free(dir);
	return r;
}

int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
	return write_file_atomic_step(path, data, len, mode, NULL);
}

int mkdir_parents(const char *dir, unsigned mode)
{
	char *p;
	int r = 0;

	if (!dir[0])
		return -EINVAL;
	p = strdup(dir);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		char c = *s;

		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, (mode_t)mode) == 0) {
			/* mkdir's mode passes through the umask; the one asked for is the one set. */
			if (chmod(p, (mode_t)mode) < 0) {
				r = -errno;
				break;
			}
		} else if (errno != EEXIST) {
			r = -errno;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return r;
}

int file_equals(const char *path, const void *data, size_t len)
{
	char *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return errno == ELOOP ? -ESTALE : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != (uint64_t)len) {
		r = -ESTALE;
		goto out;
	}
	/* A file that grew after the fstat is not the same either: -EFBIG past @len. */
	r = fd_read_all(fd, len, &buf, &got);
	if (r == -EFBIG)
		r = -ESTALE;
	if (r < 0)
		goto out;
	r = buf && got == len && memcmp(buf, data, len) == 0 ? 0 : -ESTALE;
out:
	free(buf);
	(void)close(fd);
	return r;
}

char *path_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir);
	char *p = NULL;

	while (dl > 0 && dir[dl - 1] == '/')
		dl--; /* "/" becomes "" so the result is "/name" */
	while (*name == '/')
		name++;
	if (asprintf(&p, "%.*s/%s", (int)dl, dir, name) < 0)
		return NULL;
	return p;
}

char *root_join(const char *root, const char *path)
{
	size_t n = root ? strlen(root) : 0;
	char *p = NULL;

	while (n > 0 && root[n - 1] == '/')
		n--;
	if (asprintf(&p, "%.*s%s", (int)n, n ? root : "", path) < 0)
		return NULL;
	return p;
}

char *strdup_vprintf(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	return s;
}

int set_error(char **reterr, int r, const char *fmt, ...)
{
	va_list ap;

	if (!reterr)
		return r;
	free(*reterr);
	va_start(ap, fmt);
	*reterr = strdup_vprintf(fmt, ap);
	va_end(ap);
	return r;
}

bool streq_ptr(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

void json_fail(struct json_writer *j, int r)
{
	if (j->r == 0)
		j->r = r;
}

static void json_raw(struct json_writer *j, const char *s, size_t n)
{
	if (j->r == 0)
		j->r = buf_append(j->b, s, n);
}

static void json_newline(struct json_writer *j)
{
	if (j->indent == 0)
		return;
	json_raw(j, "\n", 1);
	for (unsigned i = 0; i < j->depth * j->indent; i++)
		json_raw(j, " ", 1);
}

/* What goes before a value or a key: the comma, and the line break when indenting. */
static void json_prefix(struct json_writer *j)
{
	if (j->key) {
		j->key = false;
		return;
	}
	if (j->comma)
		json_raw(j, ",", 1);
	if (j->depth > 0)
		json_newline(j);
}

static void json_open(struct json_writer *j, char c)
{
	json_prefix(j);
	json_raw(j, &c, 1);
	j->depth++;
	j->comma = false;
}

static void json_close(struct json_writer *j, char c)
{
	assert(j->depth > 0);
	j->depth--;
	if (j->comma)
		json_newline(j);
	json_raw(j, &c, 1);
	j->comma = true;
}

void json_object_open(struct json_writer *j)
{
	json_open(j, '{');
}

void json_object_close(struct json_writer *j)
{
	json_close(j, '}');
}

void json_array_open(struct json_writer *j)
{
	json_open(j, '[');
}

void json_array_close(struct json_writer *j)
{
	json_close(j, ']');
}

void json_key(struct json_writer *j, const char *k)
{
	json_prefix(j);
	if (j->r == 0)
		j->r = buf_json_string(j->b, k);
	json_raw(j, ": ", j->indent ? 2 : 1);
	j->key = true;
}

void json_string(struct json_writer *j, const char *s)
{
	json_prefix(j);
	if (j->r == 0)
		j->r = buf_json_string(j->b, s ? s : "");
	j->comma = true;
}

/* A number or a literal, written as it is. */
static void json_scalar(struct json_writer *j, const char *s)
{
	json_prefix(j);
	json_raw(j, s, strlen(s));
	j->comma = true;
}

void json_int(struct json_writer *j, int64_t v)
{
	char s[24];

	(void)snprintf(s, sizeof(s), "%" PRId64, v);
	json_scalar(j, s);
}

void json_uint(struct json_writer *j, uint64_t v)
{
	char s[24];

	(void)snprintf(s, sizeof(s), "%" PRIu64, v);
	json_scalar(j, s);
}

void json_bool(struct json_writer *j, bool v)
{
	json_scalar(j, v ? "true" : "false");
}
