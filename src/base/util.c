#include "util.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "file-read.h"

usec_t now_usec(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

int thread_start(pthread_t *ret, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	pthread_t t;
	int r;

	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, NULL, fn, arg);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	if (ret)
		*ret = t;
	else
		(void)pthread_detach(t);
	return 0;
}

void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t attr;

	(void)pthread_condattr_init(&attr);
	(void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	(void)pthread_cond_init(c, &attr);
	(void)pthread_condattr_destroy(&attr);
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

int utf8_seq(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xBF;
	int n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xC2 || s[0] > 0xF4) /* continuation, overlong lead, past U+10FFFF */
		return -1;
	if (s[0] < 0xE0) {
		n = 2;
	} else if (s[0] < 0xF0) {
		n = 3;
		lo = s[0] == 0xE0 ? 0xA0 : lo; /* overlong */
		hi = s[0] == 0xED ? 0x9F : hi; /* surrogates */
	} else {
		n = 4;
		lo = s[0] == 0xF0 ? 0x90 : lo; /* overlong */
		hi = s[0] == 0xF4 ? 0x8F : hi; /* past U+10FFFF */
	}
	if (s[1] < lo || s[1] > hi)
		return -1;
	for (int i = 2; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return -i;
	return n;
}

uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = utf8_seq(p);

		if (n < 0)
			return false;
		p += n;
	}
	return true;
}

int buf_put_utf8(struct buf *b, uint32_t c)
{
	char s[4];
	size_t n;

	if (c < 0x80) {
		s[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		s[0] = (char)(0xc0 | c >> 6);
		s[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		s[0] = (char)(0xe0 | c >> 12);
		s[1] = (char)(0x80 | (c >> 6 & 0x3f));
		s[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		s[0] = (char)(0xf0 | c >> 18);
		s[1] = (char)(0x80 | (c >> 12 & 0x3f));
		s[2] = (char)(0x80 | (c >> 6 & 0x3f));
		s[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	return buf_append(b, s, n);
}

int buf_json_string(struct buf *b, const char *s)
{
	const char *run = s;
	int r = buf_append(b, "\"", 1);

	while (r == 0 && *s) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		int n;

		if (c >= 0x80) {
			n = utf8_seq((const unsigned char *)s);
			if (n > 0) {
				s += n;
				continue;
			}
			r = buf_append(b, run, (size_t)(s - run));
			if (r == 0)
				r = buf_append(b, "\xEF\xBF\xBD", 3); /* U+FFFD */
			s += -n;
			run = s;
			continue;
		}
		if (c >= 0x20 && c != '"' && c != '\\') {
			s++;
			continue;
		}
		r = buf_append(b, run, (size_t)(s - run));
		run = ++s;
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

int array_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	if (ncap < *cap || ncap > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
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

/* --- paths inside a root --- */

#define ROOT_MAX_LINKS	40 /* the kernel's own limit on links in one lookup */
#define ROOT_MAX_RACES	8  /* openat2's -EAGAIN (a rename during the lookup) retried */
#define ROOT_MAX_LENGTH ((size_t)16 * PATH_MAX) /* what is left to walk, links expanded */

const char *fd_path(int fd, char buf[FD_PATH_MAX])
{
	(void)snprintf(buf, FD_PATH_MAX, "/proc/self/fd/%d", fd);
	return buf;
}

int fd_reopen(int fd, int flags)
{
	char p[FD_PATH_MAX];
	int r = open(fd_path(fd, p), flags | O_CLOEXEC);

	return r < 0 ? -errno : r;
}

int root_dir_open(const char *root)
{
	int fd = open(root && *root ? root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int root_opendir(int root_fd, const char *path, DIR **ret)
{
	int fd = root_open(root_fd, path, O_DIRECTORY, NULL), dfd, r;
	DIR *d;

	if (fd < 0)
		return fd;
	/* root_open() gives an O_PATH fd, which readdir cannot use: "." through it is the same
	   directory (no path walked again, no /proc needed). */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	r = -errno;
	fd_close(fd);
	if (dfd < 0)
		return r;
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		fd_close(dfd);
		return r;
	}
	*ret = d;
	return 0;
}

/* 1: openat2 works here; -1: it does not (ENOSYS: before 5.6; EPERM: a seccomp filter). */
static atomic_int openat2_state;

bool root_open_kernel(void)
{
	int s = atomic_load(&openat2_state);

	if (s == 0) {
		/* A kernel that has openat2 refuses a zero-sized open_how with EINVAL before
		 * anything else; a missing or filtered syscall answers ENOSYS or EPERM. */
		long r = syscall(SYS_openat2, AT_FDCWD, ".", NULL, (size_t)0);

		s = r < 0 && errno == EINVAL ? 1 : -1;
		atomic_store(&openat2_state, s);
	}
	return s > 0;
}

/* The walk's directories: each with the length @path had when it was entered. */
struct walk {
	struct walk_dir {
		int fd;
		size_t len;
	} * dirs;
	size_t n, cap;
	struct buf path; /* as seen from the root: "" or "/a/b" */
};

static int walk_push(struct walk *w, int fd)
{
	int r = array_grow((void **)&w->dirs, &w->cap, w->n, sizeof(*w->dirs));

	if (r < 0)
		return r;
	w->dirs[w->n++] = (struct walk_dir){ .fd = fd, .len = w->path.len };
	return 0;
}

/* Leaves the top directory (".."); the root stays. */
static void walk_pop(struct walk *w)
{
	if (w->n == 0)
		return;
	w->n--;
	w->path.len = w->dirs[w->n].len;
	fd_close(w->dirs[w->n].fd);
	if (w->path.data)
		w->path.data[w->path.len] = 0;
}

/*
 * The manual walk (see util.h). @todo holds what is left; a link's target is put in front of
 * the rest, and an absolute one empties the stack first. Returns the O_PATH fd or -errno.
 */
static int root_walk(int root_fd, const char *path, int flags, char **ret_path)
{
	struct walk w = { 0 };
	struct buf todo = { 0 };
	char *target = NULL;
	unsigned links = 0;
	size_t off = 0;
	int fd = -1, r;

	if (!*path) /* as openat2: an empty path names nothing */
		return -ENOENT;
	r = buf_printf(&todo, "%s", path);
	if (r < 0)
		goto out;
	target = malloc(PATH_MAX);
	if (!target) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		const char *p = (const char *)todo.data + off;
		char name[NAME_MAX + 1], *rest;
		size_t n, skip = strspn(p, "/");
		struct stat st;
		bool dir;
		ssize_t len;

		p += skip;
		if (!*p)
			break;
		n = strcspn(p, "/");
		/* Followed by a slash (any but the last component, and the last one in "a/"): a
		 * link is followed, O_NOFOLLOW or not, and what is reached must be a directory. */
		dir = p[n] == '/';
		off += skip + n;
		if (n == 1 && p[0] == '.')
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			walk_pop(&w); /* at the root, ".." is the root */
			continue;
		}
		if (n > NAME_MAX) {
			r = -ENAMETOOLONG;
			goto out;
		}
		memcpy(name, p, n);
		name[n] = 0;
		fd = openat(w.n ? w.dirs[w.n - 1].fd : root_fd, name,
			    O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = -errno;
			goto out;
		}
		if (!S_ISLNK(st.st_mode) || (!dir && (flags & O_NOFOLLOW))) {
			if (dir && !S_ISDIR(st.st_mode)) {
				r = -ENOTDIR;
				goto out;
			}
			r = walk_push(&w, fd);
			if (r < 0)
				goto out;
			fd = -1;
			r = buf_printf(&w.path, "/%s", name);
			if (r < 0)
				goto out;
			continue;
		}
		if (++links > ROOT_MAX_LINKS) {
			r = -ELOOP;
			goto out;
		}
		len = readlinkat(fd, "", target, PATH_MAX - 1);
		fd = fd_close(fd);
		if (len < 0) {
			r = -errno;
			goto out;
		}
		if (len == 0) { /* an empty target names nothing */
			r = -ENOENT;
			goto out;
		}
		target[len] = 0;
		if (target[0] == '/')
			while (w.n)
				walk_pop(&w);
		/* The target, then what was left after the link ("" or "/..."): a slash that
		 * ends the target or follows the link stays, and none is added. */
		if (todo.len - off + (size_t)len + 2 > ROOT_MAX_LENGTH) {
			r = -ENAMETOOLONG;
			goto out;
		}
		rest = strdup((const char *)todo.data + off);
		if (!rest) {
			r = -ENOMEM;
			goto out;
		}
		todo.len = 0;
		r = buf_printf(&todo, "%s%s", target, rest);
		free(rest);
		if (r < 0)
			goto out;
		off = 0;
	}
	/* What was reached: the top of the stack, or the root itself. */
	if (w.n) {
		fd = w.dirs[--w.n].fd;
	} else {
		fd = openat(root_fd, ".", O_PATH | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			goto out;
		}
	}
	if (flags & O_DIRECTORY) {
		struct stat st;

		if (fstat(fd, &st) < 0) {
			r = -errno;
			goto out;
		}
		if (!S_ISDIR(st.st_mode)) {
			r = -ENOTDIR;
			goto out;
		}
	}
	if (ret_path) {
		*ret_path = strdup(w.path.len ? (const char *)w.path.data : "/");
		if (!*ret_path) {
			r = -ENOMEM;
			goto out;
		}
	}
	r = fd;
	fd = -1;
out:
	fd_close(fd);
	while (w.n)
		fd_close(w.dirs[--w.n].fd);
	free(w.dirs);
	buf_release(&w.path);
	buf_release(&todo);
	free(target);
	return r;
}

/* What /proc/self/fd/@fd links to (heap), or NULL. */
static char *fd_name(int fd)
{
	char p[FD_PATH_MAX], *s = malloc(PATH_MAX);
	ssize_t n = s ? readlink(fd_path(fd, p), s, PATH_MAX - 1) : -1;

	if (n <= 0)
		return mfree(s);
	s[n] = 0;
	return s;
}

/* The path @fd reaches, as seen from @root_fd (see root_open()); NULL when out of memory. */
static char *path_from_root(int root_fd, int fd, const char *asked)
{
	char *root = fd_name(root_fd), *full = fd_name(fd), *s;
	const char *rel = NULL;
	size_t n;

	if (root && full && root[0] == '/' && full[0] == '/') {
		n = streq(root, "/") ? 0 : strlen(root);
		if (strncmp(full, root, n) == 0 && (full[n] == '/' || full[n] == 0))
			rel = full[n] ? full + n : "/";
	}
	s = strdup(rel ? rel : asked);
	free(full);
	free(root);
	return s;
}

int root_open(int root_fd, const char *path, int flags, char **ret_path)
{
	struct open_how how = {
		.flags = (uint64_t)(O_PATH | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY))),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = -EAGAIN;

	if (!root_open_kernel())
		return root_walk(root_fd, path, flags, ret_path);
	for (unsigned i = 0; fd == -EAGAIN && i < ROOT_MAX_RACES; i++) {
		long r = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));

		fd = r < 0 ? -errno : (int)r;
	}
	if (fd == -ENOSYS || fd == -EPERM) {
		/* Gone since the probe (a seccomp filter installed after it, answering either, as
		 * the probe reads them): the walk, from now on. */
		atomic_store(&openat2_state, -1);
		return root_walk(root_fd, path, flags, ret_path);
	}
	if (fd >= 0 && ret_path) {
		*ret_path = path_from_root(root_fd, fd, path);
		if (!*ret_path) {
			fd_close(fd);
			fd = -ENOMEM;
		}
	}
	return fd;
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

/* Removes the entries of the open directory @dfd (taken: closed), @depth levels left. */
static int rm_children(int dfd, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int r = 0;

	if (!d) {
		r = -errno;
		(void)close(dfd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		int q;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		q = rm_tree_at(dirfd(d), de->d_name, depth - 1);
		if (q < 0 && r == 0)
			r = q;
	}
	if (errno && r == 0)
		r = -errno;
	(void)closedir(d);
	return r;
}

int rm_tree_at(int dfd, const char *name, unsigned depth)
{
	int fd, r;

	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth == 0)
		return -ELOOP;
	/* O_NOFOLLOW|O_DIRECTORY: a link put where a directory was is never entered. */
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	r = rm_children(fd, depth);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

char *path_trim(const char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	return strndup(path, n);
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

bool path_is_clean_absolute(const char *path)
{
	if (path[0] != '/')
		return false;
	for (const char *p = path; *p;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
	}
	return true;
}

int path_split(const char *path, char **ret_parent, char **ret_name)
{
	size_t n = strlen(path);
	const char *slash;
	char *parent = NULL, *name = NULL;

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 1 && path[0] == '/') {
		if (ret_parent)
			*ret_parent = NULL;
		if (ret_name)
			*ret_name = NULL;
		return 0;
	}
	slash = memrchr(path, '/', n);
	if (ret_parent) {
		parent = !slash	       ? strdup(".") :
			 slash == path ? strdup("/") :
					 strndup(path, (size_t)(slash - path));
		if (!parent)
			return -ENOMEM;
	}
	if (ret_name) {
		name = slash ? strndup(slash + 1, n - (size_t)(slash + 1 - path)) :
			       strndup(path, n);
		if (!name) {
			free(parent);
			return -ENOMEM;
		}
	}
	if (ret_parent)
		*ret_parent = parent;
	if (ret_name)
		*ret_name = name;
	return 0;
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
