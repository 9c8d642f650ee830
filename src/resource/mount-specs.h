#pragma once

/*
 * mount-specs: NVIDIA container-toolkit CSV mount specs (the files of
 * /etc/nvidia-container-runtime/host-files-for-container.d on a Jetson: devices.csv,
 * drivers.csv, l4t.csv), read for the CDI spec (cdi.c) from a backend's
 * gpu_container.mount_specs_dir. One line per entry, "<type>, <path>": type dev (a device node,
 * glob patterns allowed), lib (a library or other file), sym (a symbolic link) or dir; blank
 * lines and "#" comments are ignored, invalid lines skipped (as the toolkit does) and logged.
 *
 * What is read is bounded, since the files are the host's: the constants below. Logs (module
 * "mount-specs") name the file and the first bad line. No globals; any thread.
 */

#include <stddef.h>

#include "util.h"

/* A file larger than this is skipped whole (L4T's largest, l4t.csv, is tens of KiB). */
#define MOUNT_SPECS_FILE_MAX ((size_t)1024 * 1024)
/* A longer line is invalid: a path longer than PATH_MAX could not be mounted anyway. */
#define MOUNT_SPECS_LINE_MAX 4096
/* Entries kept over all files of a directory (L4T lists under a thousand); the rest dropped. */
#define MOUNT_SPECS_ENTRIES_MAX 4096
/* *.csv files read from a directory, the first in name order (L4T ships three). */
#define MOUNT_SPECS_FILES_MAX 64

enum mount_spec_type {
	MOUNT_SPEC_DEV,
	MOUNT_SPEC_LIB,
	MOUNT_SPEC_SYM,
	MOUNT_SPEC_DIR,
	MOUNT_SPEC_COUNT,
};

struct mount_spec {
	enum mount_spec_type type;
	char *path; /* absolute, valid UTF-8, no "." or ".." component, not "/"; heap */
};

/* Entries in file order (files in name order), duplicates kept. Zero-initialise. */
struct mount_specs {
	struct mount_spec *v;
	size_t n, cap;
};

/*
 * Parses @len bytes of @text, the CSV file @name (for the log), appending its valid entries to
 * @specs. LF or CRLF line ends; spaces and tabs around the type and the path are dropped.
 * Invalid (logged once per file at warn, with the first bad line's number and reason and the
 * number of bad lines): no comma, an unknown type, an empty path, a path that is not absolute,
 * holds a "." or ".." component (it could leave the root it is looked up under), is "/", is not
 * valid UTF-8 or holds a NUL byte, a line longer than MOUNT_SPECS_LINE_MAX. Past
 * MOUNT_SPECS_ENTRIES_MAX entries in @specs the rest is dropped (logged).
 * Returns the number of entries added, or -ENOMEM (@specs keeps what it had before the entry
 * that failed).
 */
int mount_specs_parse(struct mount_specs *specs, const char *name, const char *text,
		      size_t len) WARN_UNUSED;

/*
 * Reads the *.csv files of the directory @dir, resolved inside the directory @root_fd as if
 * chroot(2)ed there (root_open(): links and ".." stay inside), in name order: a file named just
 * ".csv" and other names are ignored, at most MOUNT_SPECS_FILES_MAX files, each read with
 * read_file_at(READ_IN_ROOT) up to MOUNT_SPECS_FILE_MAX bytes (larger, not a regular file, or
 * unreadable: skipped, logged at warn). @root_name is @root_fd's path, for the log. A missing
 * @dir is normal (a debug line); one that cannot be read is logged once at warn; neither is
 * an error. Returns the number of entries added to @specs, or -ENOMEM.
 */
int mount_specs_read(struct mount_specs *specs, int root_fd, const char *root_name,
		     const char *dir) WARN_UNUSED;

/* Frees what @specs holds and zeroes it. */
void mount_specs_release(struct mount_specs *specs);
