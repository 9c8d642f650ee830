#include "unit-fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

void unit_tmpdir(const char *prefix, char *ret, size_t size)
{
	int n = snprintf(ret, size, "/tmp/%s-XXXXXX", prefix);

	assert_true(n > 0 && (size_t)n < size);
	assert_non_null(mkdtemp(ret));
}

char *unit_tmpdir_dup(const char *prefix)
{
	char dir[PATH_MAX], *d;

	unit_tmpdir(prefix, dir, sizeof(dir));
	d = strdup(dir);
	assert_non_null(d);
	return d;
}

void unit_make_path(const char *base, const char *rel)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s%s", base, rel);
	size_t len;

	assert_true(n > 0 && (size_t)n < sizeof(path));
	len = (size_t)n;
	/* Each '/' after the first ends a directory to make; those already there are fine. */
	for (size_t i = 1; i < len; i++)
		if (path[i] == '/') {
			path[i] = '\0';
			assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
			path[i] = '/';
		}
	if (path[len - 1] != '/') {
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		assert_true(fd >= 0);
		close(fd);
	}
}

void unit_write_at(const char *base, const char *rel, const char *text, size_t len)
{
	char path[PATH_MAX];
	int fd;

	unit_make_path(base, rel);
	(void)snprintf(path, sizeof(path), "%s%s", base, rel);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, text + off, len - off);

		assert_true(w > 0 || (w < 0 && errno == EINTR));
		if (w > 0)
			off += (size_t)w;
	}
	assert_int_equal(close(fd), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void unit_rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 && errno == ENOENT)
		return;
	/* FTW_DEPTH: a directory's entries go before it; FTW_PHYS: a link goes, not its target. */
	assert_int_equal(nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}
