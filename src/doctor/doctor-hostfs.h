#pragma once

/*
 * The doctor's host-root file system. Every path the doctor opens, lists, reads, stats,
 * dlopens or connects to is a path as on the host ("/var/lib/kubelet/device-plugins") resolved
 * inside the host root (--host-root, "/" by default) as if the doctor were chroot(2)ed there
 * (root_open(), util.h): an absolute link target is taken under the root too (/var/run -> /run,
 * /var/lib/kubelet -> /data/kubelet), ".." never climbs above it, and nothing outside it is ever
 * reached. Files are read only when they are regular files, and never opened otherwise (a FIFO
 * would block the doctor; a device may act when opened).
 *
 * The functions take the doctor (struct doctor, doctor-int.h) and use its struct doctor_hostfs.
 * The doctor's thread; no logging.
 */

#include <dirent.h>
#include <stddef.h>
#include <sys/stat.h>

#include "util.h"

struct doctor;

/* The host root: its path as given, and an O_PATH fd of it or -errno when it cannot be opened. */
struct doctor_hostfs {
	const char *root; /* not owned: the options' */
	int fd;
};

/*
 * Opens @root ("" or NULL: "/") for @fs. The operator names the root: its own links are
 * followed, nothing below it escapes. Never fails: when the root cannot be opened, fs->fd is
 * its -errno and every host path gives that error. doctor_hostfs_close() releases it.
 */
void doctor_hostfs_open(struct doctor_hostfs *fs, const char *root);
void doctor_hostfs_close(struct doctor_hostfs *fs);

/* @path under the host root, for showing only (evidence, messages): never opened. Caller frees. */
char *doctor_path(const struct doctor *dr, const char *path) WARN_UNUSED;
/*
 * Opens @path inside the host root: root_open() (O_PATH fd, @flags 0, O_NOFOLLOW, O_DIRECTORY;
 * *@ret_real, may be NULL, the host path reached). The caller closes the fd. Returns it or -errno
 * (-ENOENT, -ENOTDIR, -ELOOP, -EACCES, ...; the host root's own open error for every path when
 * the root cannot be opened).
 */
int doctor_open(const struct doctor *dr, const char *path, int flags, char **ret_real) WARN_UNUSED;
/* stat() of @path inside the root; *@ret_real (may be NULL) as doctor_open()'s, on success. */
int doctor_stat(const struct doctor *dr, const char *path, struct stat *st, char **ret_real);
/* lstat(): the last component is not followed (a link is described itself). */
int doctor_lstat(const struct doctor *dr, const char *path, struct stat *st);
/*
 * Reads @path inside the root, at most @max bytes, NUL-terminated (read_file_at()). Returns
 * 0, -ENOENT, -EISDIR, -EBADFD (not a regular file: a FIFO, socket or device is not opened),
 * -EFBIG (over @max), -ENOMEM or another -errno. doctor_strerror() words the error.
 */
int doctor_read(const struct doctor *dr, const char *path, size_t max, char **ret,
		size_t *ret_len) WARN_UNUSED;
/* The target of the link @path (the link itself inside the root) into @buf. 0, -EINVAL: no link. */
int doctor_readlink(const struct doctor *dr, const char *path, char *buf, size_t size);
/* Opens the directory @path inside the root for readdir(); NULL and *@reterr -errno on failure. */
DIR *doctor_opendir(const struct doctor *dr, const char *path, int *reterr) WARN_UNUSED;
/*
 * Finds the unix socket @path inside the root for connect(): returns an O_PATH fd of the socket
 * (the caller closes it after the connection is made) and writes to @dial the path to connect to,
 * /proc/self/fd/N, which reaches that very socket (and is short, whatever the length of
 * @path). Returns the fd, -ENOTSOCK (something else is there) or -errno as doctor_open().
 */
int doctor_socket(const struct doctor *dr, const char *path, char dial[FD_PATH_MAX]) WARN_UNUSED;
/*
 * In the heap string *@s (may be NULL), every @from not followed by a digit becomes @to: a
 * message that names the /proc/self/fd/N a file was reached through names the file instead.
 * Out of memory leaves *@s as it was.
 */
void doctor_replace(char **s, const char *from, const char *to);
/*
 * strerror() for the doctor's host-path errors: -EBADFD is "not a regular file ...", -ENOTSOCK
 * (doctor_socket()) "not a socket".
 */
const char *doctor_strerror(int r);
