#pragma once

/*
 * dirwatch: one directory that may disappear and come back, watched through the loop's
 * inotify (loop_watch_new()): the directory itself while it is there; while it is not, its
 * parent, for a directory of that name appearing (and the path looked at again every 10 s, for
 * a dangling symlink whose target appears elsewhere); while the parent cannot be watched
 * either, the path is polled with backoff (100 ms doubling to 10 s). The loop follows the path
 * through a symlink swapped (a ConfigMap's ..data), a filesystem mounted over it or an
 * inotify queue overflow; each becomes DIRWATCH_REPLACED or DIRWATCH_GONE here.
 *
 * Used by the kubelet directories (registration), the config file's directory and the CDI
 * spec directory. Logs nothing: the owner does, from the events. Loop thread only.
 */

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct loop;
struct dirwatch;

enum dirwatch_kind {
	/* An inotify event inside the directory: @name (may be "") and @mask, of the mask asked;
	   IN_Q_OVERFLOW (name "") when events were lost: the owner looks again itself. */
	DIRWATCH_EVENT,
	/* The directory went (deleted, renamed away, unmounted, its path leads nowhere now). Its
	   return is waited for (its parent watched, or polled: a DIRWATCH_RETRY follows). */
	DIRWATCH_GONE,
	/* The path leads to another directory than the one watched (a symlink swapped, a mount
	   over it): that one is watched now. What happened inside meanwhile was not seen. */
	DIRWATCH_REPLACED,
	/* Watched again after DIRWATCH_GONE, or after it was missing at dirwatch_new(). What was
	   made inside before this was not seen. */
	DIRWATCH_BACK,
	/* Neither the directory nor its parent could be watched: @error, @what ("directory" or
	   "parent"), the next look in @retry_usec, @failures in a row (1 for the first). */
	DIRWATCH_RETRY,
};

struct dirwatch_event {
	enum dirwatch_kind kind;
	const char *name; /* DIRWATCH_EVENT */
	uint32_t mask;	  /* DIRWATCH_EVENT */
	int error;	  /* DIRWATCH_RETRY: -errno */
	const char *what; /* DIRWATCH_RETRY */
	usec_t retry_usec;
	unsigned failures;
};

/*
 * Runs on the loop. May call anything here, dirwatch_free() on @dw included (nothing more is
 * reported for it then), and dirwatch_new() for the same path (the new one gets what follows).
 */
typedef void dirwatch_fn(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata);

/*
 * Watches the directory @path (copied; trailing slashes dropped) for the inotify events of
 * @mask (IN_ONLYDIR, IN_DELETE_SELF and IN_MOVE_SELF are added: they are how it goes). A
 * directory missing is no error: see dirwatch_present() and dirwatch_polled(). Nothing is
 * reported from inside this call. Returns 0, -EINVAL (@path empty) or -ENOMEM.
 */
int dirwatch_new(struct loop *l, const char *path, uint32_t mask, dirwatch_fn *fn, void *userdata,
		 struct dirwatch **ret) WARN_UNUSED;

/* The directory itself is watched now. */
bool dirwatch_present(const struct dirwatch *dw);
/*
 * True when the path is polled (neither the directory nor its parent could be watched), and
 * *@ret (not NULL) is the DIRWATCH_RETRY that said so last: what dirwatch_new() does not report.
 */
bool dirwatch_polled(const struct dirwatch *dw, struct dirwatch_event *ret);
/* The path watched, trailing slashes dropped; valid for @dw's life. */
const char *dirwatch_path(const struct dirwatch *dw);

/* Safe from its own callback (memory released when it returns). NULL-safe, returns NULL. */
struct dirwatch *dirwatch_free(struct dirwatch *dw);
