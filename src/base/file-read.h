#pragma once

/*
 * file-read: the one way a whole file is read, for every file the project reads (the config
 * file, sysfs and /proc files, the doctor's host files, a process's cgroup file). A file the
 * node's users or a hostile host root can put there must neither hang us nor make us act:
 * - the path is opened O_PATH first and its type checked on that fd, so a FIFO (whose open
 *   blocks until a writer comes), a socket or a device (whose open can act: a watchdog
 *   starts) is refused before anything is opened for reading;
 * - a regular file is then opened again through /proc/self/fd (the same inode, whatever
 *   happened to the path since) with O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC;
 * - at most a cap of bytes is read, however much the file holds or grows while it is read.
 * Variants are flags of read_file_at(), never copies. Any thread; logs nothing (callers name
 * the path and what it is: file_type_name()).
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/* The last component is not followed: a symbolic link there is -ELOOP. */
#define READ_NOFOLLOW (1u << 0)
/* @path is resolved inside the directory @dfd as if chroot(2)ed there (root_open()). */
#define READ_IN_ROOT (1u << 1)
/*
 * /dev/null (the character device 1:3) is read, as an empty file: NVIDIA's config-manager
 * points the config file there for "no config", and reading it never blocks nor acts.
 */
#define READ_DEV_NULL (1u << 2)
/* A file larger than @max is not an error: its first @max bytes are returned, and 1. */
#define READ_PREFIX (1u << 3)

/*
 * Reads the file at @path, relative to the directory fd @dfd (AT_FDCWD: the working
 * directory; an absolute @path ignores @dfd unless READ_IN_ROOT), into a NUL-terminated heap
 * buffer: *@ret (the caller frees), its length without the NUL in *@ret_len (may be NULL).
 * @flags: READ_* above, or 0. Needs /proc mounted (the reopen).
 * Returns 0; 1 with READ_PREFIX when the file held more than @max bytes; or -errno, nothing
 * returned: -EISDIR (a directory), -EBADFD (a FIFO, a socket or a device: systemd's code for
 * "not a regular file"), -ELOOP (a link with READ_NOFOLLOW, or too many links), -EFBIG (more
 * than @max bytes, even when the file only grew past it while read), -ENOMEM, or -errno of
 * open()/read() (-ENOENT, -EACCES, ...). On -EISDIR, -EBADFD and a final link's -ELOOP,
 * *@reterr_what (may be NULL) says what the file is, as file_type_name() does.
 */
int read_file_at(int dfd, const char *path, unsigned flags, size_t max, char **ret, size_t *ret_len,
		 const char **reterr_what) WARN_UNUSED;

/* read_file_at(AT_FDCWD, @path, 0, ...): links followed, regular files only. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len) WARN_UNUSED;

/*
 * read_file_at(READ_IN_ROOT) inside the directory @root (opened itself as the caller's path,
 * links and all: the caller names it). Returns as read_file_at(), and -errno of opening @root.
 */
int root_read_file(const char *root, const char *path, size_t max, char **ret,
		   size_t *ret_len) WARN_UNUSED;

/*
 * 0 when @fd (O_PATH or not) is a regular file; -EISDIR for a directory, -ELOOP for a symbolic
 * link (an O_PATH|O_NOFOLLOW fd), -EBADFD for any other type (a FIFO, a socket, a device), or
 * -errno of fstat(). The check read_file_at() makes.
 */
int fd_check_regular(int fd) WARN_UNUSED;

/*
 * What the file type in @mode is, for a message naming a refused file: "a regular file",
 * "a directory", "a FIFO", "a socket", "a character device", "a block device", "a symbolic
 * link", or "not a regular file". A static string.
 */
const char *file_type_name(mode_t mode);

/*
 * 0 when @path is a regular file (not reached through a final symlink) holding exactly the @len
 * bytes of @data; -ESTALE when something else is there (other bytes, a symlink, a FIFO, a
 * directory); -ENOENT when nothing is (or a parent is missing); another -errno when it cannot
 * be read. Never blocks on a FIFO; reads at most @len bytes. Thread-safe.
 */
int file_equals(const char *path, const void *data, size_t len) WARN_UNUSED;
