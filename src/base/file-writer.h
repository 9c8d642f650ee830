#pragma once

/*
 * file-writer: whole files written atomically off the event loop, for the CDI spec and the NFD
 * labels file, and the one atomic file write (file_write_atomic()). fsync on an SD card takes
 * seconds, and on a frozen or hung filesystem it never returns: the loop never waits for it.
 * Each write runs on a thread of its own (a oneshot: file_write_atomic(), after
 * mkdir_parents() when asked); its result comes back to the loop through a wake-up. One write
 * at a time per writer: a write asked for while one runs waits for it, and a newer one
 * replaces a waiting one (only the newest content matters). A write still running after
 * opts.stuck_after is reported once (a stuck filesystem says nothing else). The last of the
 * thread and the loop side to let go of a write frees it (oneshot.h), so freeing the writer
 * never waits for a stuck write.
 * Loop thread only, except what runs on the thread. Logs nothing: the owners do.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

struct loop;
struct file_writer;

/*
 * The one atomic file write. Writes @len bytes to @path atomically and durably with @mode
 * (whatever the umask): a new temporary file in the same directory (".<name>.XXXXXX": a
 * dotfile, which NFD and CDI registries skip; created O_EXCL, so nothing planted there is
 * followed), written, fchmod'ed, fsync'ed, renamed over @path, then the directory fsync'ed. A
 * reader sees the old file or the new one, never a part; on failure the temporary file is
 * removed and @path is left as it was. Blocks for as long as the disk takes (seconds on an SD
 * card, for ever on a frozen filesystem): never on the loop's thread; the daemon's writes go
 * through a file_writer. Thread-safe. Returns 0 or -errno (-ENOSPC, -EDQUOT, -EIO, -EACCES,
 * -EROFS, -ENOENT: the directory gone, -ENOMEM, ...); on failure *@reterr_step (when not NULL)
 * names the step for a message "failed to <step> <path>": "create a temporary file for",
 * "write", "sync the directory of".
 */
int file_write_atomic(const char *path, const void *data, size_t len, unsigned mode,
		      const char **reterr_step) WARN_UNUSED;

struct file_write_result {
	int r;		  /* 0, or -errno of the step that failed */
	const char *step; /* on failure: the step, for "failed to <step> <path>" (util.h) */
	bool unchanged;	  /* opts.skip_same: the file held these bytes already, nothing written */
	usec_t dur;	  /* how long the write took */
};

/*
 * The newest write finished (written or failed). Results of writes replaced by newer ones
 * are not reported. Runs on the loop; may call file_writer_write(), not file_writer_free().
 */
typedef void file_writer_done_fn(struct file_writer *fw, const struct file_write_result *res,
				 void *userdata);
/* The running write has taken @waited (>= opts.stuck_after) and is still running. Once per write. */
typedef void file_writer_stuck_fn(struct file_writer *fw, usec_t waited, void *userdata);

struct file_writer_opts {
	unsigned mode;	    /* the file's, whatever the umask */
	bool mkdir;	    /* create the file's directory (0755, parents too) when missing */
	bool skip_same;	    /* leave a file that holds the bytes already untouched (no fsync) */
	usec_t stuck_after; /* 0: never reported */
	file_writer_done_fn *done;
	file_writer_stuck_fn *stuck; /* NULL: not reported */
	void *userdata;
};

/* @o is copied. Returns 0 or -errno (-ENOMEM, the eventfd's). */
int file_writer_new(struct loop *l, const struct file_writer_opts *o,
		    struct file_writer **ret) WARN_UNUSED;

/*
 * Writes @len bytes of @data as @path (both copied) on a thread now, or after the write that
 * runs. Returns 0, or -ENOMEM / -EAGAIN (no thread could be started; nothing is reported then,
 * as for any error return).
 */
int file_writer_write(struct file_writer *fw, const char *path, const void *data,
		      size_t len) WARN_UNUSED;

/* A write runs or waits: its result is still to come. */
bool file_writer_busy(const struct file_writer *fw);

/* A running write is left to finish on its own; a waiting one is dropped. NULL-safe, returns NULL. */
struct file_writer *file_writer_free(struct file_writer *fw);
