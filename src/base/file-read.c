#include "file-read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

const char *file_type_name(mode_t mode)
{
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "not a regular file";
}

/*
 * Reads @fd to its end, at most @max bytes (READ_PREFIX: the first @max, and 1 when there was
 * more). The file may grow while it is read (a log, a /proc file): the cap is on what is read,
 * not on what fstat() said.
 */
static int fd_read_all(int fd, unsigned flags, size_t max, char **ret, size_t *ret_len)
{
	struct buf b = { 0 };
	int r = 0;

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
			if (!(flags & READ_PREFIX)) {
				r = -EFBIG;
				goto out;
			}
			b.len = max;
			r = 1;
			break;
		}
	}
	b.data[b.len] = 0;
	*ret = (char *)b.data;
	if (ret_len)
		*ret_len = b.len;
	b.data = NULL;
out:
	buf_release(&b);
	return r;
}

/* 0 when the O_PATH fd @fd is something read_file_at() reads with @flags, else its -errno. */
static int check_type(int fd, unsigned flags, const char **reterr_what)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISREG(st.st_mode))
		return 0;
	if ((flags & READ_DEV_NULL) && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
		return 0;
	if (reterr_what)
		*reterr_what = file_type_name(st.st_mode);
	if (S_ISLNK(st.st_mode)) /* only with O_NOFOLLOW: a link is opened itself */
		return -ELOOP;
	return S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;
}

int fd_check_regular(int fd)
{
	return check_type(fd, 0, NULL);
}

int read_file_at(int dfd, const char *path, unsigned flags, size_t max, char **ret, size_t *ret_len,
		 const char **reterr_what)
{
	int nofollow = flags & READ_NOFOLLOW ? O_NOFOLLOW : 0, fd, rfd = -1, r;

	if (flags & READ_IN_ROOT)
		fd = root_open(dfd, path, nofollow, NULL);
	else {
		fd = openat(dfd, path, O_PATH | O_CLOEXEC | nofollow);
		if (fd < 0)
			fd = -errno;
	}
	if (fd < 0)
		return fd;
	r = check_type(fd, flags, reterr_what);
	if (r < 0)
		goto out;
	/* The same inode as @fd: its type is the one just checked. */
	rfd = fd_reopen(fd, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (rfd < 0) {
		r = rfd;
		goto out;
	}
	r = fd_read_all(rfd, flags, max, ret, ret_len);
out:
	fd_close(rfd);
	fd_close(fd);
	return r;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return read_file_at(AT_FDCWD, path, 0, max, ret, ret_len, NULL);
}

int root_read_file(const char *root, const char *path, size_t max, char **ret, size_t *ret_len)
{
	int root_fd = root_dir_open(root), r;

	if (root_fd < 0)
		return root_fd;
	r = read_file_at(root_fd, path, READ_IN_ROOT, max, ret, ret_len, NULL);
	fd_close(root_fd);
	return r;
}

int file_equals(const char *path, const void *data, size_t len)
{
	char *buf = NULL;
	size_t got = 0;
	int r;

	/* A link, a FIFO, a directory, or a file longer than @len (even one growing while read). */
	r = read_file_at(AT_FDCWD, path, READ_NOFOLLOW, len, &buf, &got, NULL);
	if (r == -ELOOP || r == -EBADFD || r == -EISDIR || r == -EFBIG)
		return -ESTALE;
	if (r < 0)
		return r;
	r = got == len && (len == 0 || memcmp(buf, data, len) == 0) ? 0 : -ESTALE;
	free(buf);
	return r;
}
