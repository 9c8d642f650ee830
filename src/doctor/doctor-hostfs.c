/*
 * The doctor's host-root file system (doctor-hostfs.h): every host path opened under the host
 * root as if chroot(2)ed there. Calls nothing else of the doctor.
 */
#include "doctor-hostfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor-int.h"
#include "file-read.h"

void doctor_hostfs_open(struct doctor_hostfs *fs, const char *root)
{
	fs->root = root;
	/* The operator names the root: its own links are followed, nothing below it escapes. */
	fs->fd = root_dir_open(root);
}

void doctor_hostfs_close(struct doctor_hostfs *fs)
{
	fd_close(fs->fd);
	fs->fd = -EBADF;
}

char *doctor_path(const struct doctor *dr, const char *path)
{
	return root_join(dr->fs.root, path);
}

int doctor_open(const struct doctor *dr, const char *path, int flags, char **ret_real)
{
	if (dr->fs.fd < 0)
		return dr->fs.fd;
	return root_open(dr->fs.fd, path, flags, ret_real);
}

static int stat_flags(const struct doctor *dr, const char *path, int flags, struct stat *st,
		      char **ret_real)
{
	int fd = doctor_open(dr, path, flags, ret_real), r = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0)
		r = -errno;
	fd_close(fd);
	if (r < 0 && ret_real)
		*ret_real = mfree(*ret_real);
	return r;
}

int doctor_stat(const struct doctor *dr, const char *path, struct stat *st, char **ret_real)
{
	return stat_flags(dr, path, 0, st, ret_real);
}

int doctor_lstat(const struct doctor *dr, const char *path, struct stat *st)
{
	return stat_flags(dr, path, O_NOFOLLOW, st, NULL);
}

int doctor_read(const struct doctor *dr, const char *path, size_t max, char **ret, size_t *ret_len)
{
	if (dr->fs.fd < 0)
		return dr->fs.fd;
	return read_file_at(dr->fs.fd, path, READ_IN_ROOT, max, ret, ret_len, NULL);
}

int doctor_readlink(const struct doctor *dr, const char *path, char *buf, size_t size)
{
	int fd = doctor_open(dr, path, O_NOFOLLOW, NULL), r;
	ssize_t n;

	if (fd < 0)
		return fd;
	n = readlinkat(fd, "", buf, size - 1);
	r = n < 0 ? -errno : 0;
	if (n >= 0)
		buf[n] = 0;
	fd_close(fd);
	return r;
}

DIR *doctor_opendir(const struct doctor *dr, const char *path, int *reterr)
{
	DIR *d = NULL;
	int r = dr->fs.fd < 0 ? dr->fs.fd : root_opendir(dr->fs.fd, path, &d);

	if (r < 0) {
		*reterr = r;
		return NULL;
	}
	return d;
}

int doctor_socket(const struct doctor *dr, const char *path, char dial[FD_PATH_MAX])
{
	int fd = doctor_open(dr, path, 0, NULL), r = 0;
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISSOCK(st.st_mode))
		r = -ENOTSOCK;
	if (r < 0) {
		fd_close(fd);
		return r;
	}
	(void)fd_path(fd, dial);
	return fd;
}

void doctor_replace(char **s, const char *from, const char *to)
{
	struct buf b = { 0 };
	size_t n = strlen(from);
	const char *p = *s, *hit;

	if (!p)
		return;
	while ((hit = strstr(p, from))) {
		bool whole = hit[n] < '0' || hit[n] > '9';

		if (buf_append(&b, p, (size_t)(hit - p)) < 0 ||
		    buf_printf(&b, "%s", whole ? to : from) < 0)
			goto oom;
		p = hit + n;
	}
	if (buf_printf(&b, "%s", p) < 0)
		goto oom;
	free(*s);
	*s = (char *)b.data;
	return;
oom:
	buf_release(&b);
}

const char *doctor_strerror(int r)
{
	if (r == -EBADFD)
		return "not a regular file (a FIFO, a socket or a device): not read";
	if (r == -ENOTSOCK)
		return "not a socket";
	return strerror(-r);
}
