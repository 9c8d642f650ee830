#pragma once

/*
 * Watches the config file (--config-file / CONFIG_FILE) and tells its owner when its content
 * changed, so the daemon reloads as on SIGHUP without a restart. Logs (module=config-watch).
 * Everything runs on the loop's thread.
 *
 * The file's directory is watched, not the file: a Kubernetes ConfigMap volume replaces its
 * files by swapping the `..data` symlink (config.yaml -> ..data/config.yaml), and editors
 * write a new file and rename it over the old one; both leave a watch on the file itself
 * pointing at a deleted inode. What counts as a change: the file's name or `..data` written
 * and closed (IN_CLOSE_WRITE), renamed in or out, created as a symlink or as a hard link to a
 * file that has another name (link(2): whole at once, no close follows), deleted; an inotify
 * queue overflow. A plain IN_CREATE or IN_MODIFY does not: the writer has not finished, and
 * its IN_CLOSE_WRITE follows. (A link whose other name is removed before the watch looks at
 * it counts as created in place: it is read at the next change or SIGHUP.) Events are let settle for 100 ms (the atomic writer's burst is
 * one check), then the file is read whole and compared with the content last seen, so
 * unrelated events and identical content never reload.
 *
 * The file deleted: the running config stays, that is logged once, and the first content
 * that appears afterwards is compared as usual. An empty file is taken as a writer not done
 * yet (logged, nothing reloaded). The directory deleted: its parent is watched until a
 * directory of that name is back (polled with backoff, 100 ms doubling to 10 s, while the
 * parent is missing too), then the file is checked. The path leading to another directory (a
 * symlink swapped to another directory, a filesystem mounted over it: the loop's watch says
 * so, loop_watch_new()): the new directory is watched and the file checked at once.
 */

#include <stdbool.h>

#include "util.h"

struct loop;
struct config_watch;

/*
 * The content differs from the one last seen (which is now this one). The owner reloads;
 * whether the new config is valid is its business: the watch will not report the same
 * content again. It may call anything in this module except config_watch_free() on @w.
 */
typedef void config_watch_fn(struct config_watch *w, void *userdata);

/*
 * Watches @path (copied) and takes its current content as the one loaded. A missing
 * directory or file is not an error (waited for, as above). Returns 0, -ENOMEM or -EINVAL
 * (@path empty or a directory name ending in '/').
 */
int config_watch_new(struct loop *l, const char *path, config_watch_fn *fn, void *userdata,
		     struct config_watch **ret) WARN_UNUSED;
/*
 * The owner loaded the config by other means (SIGHUP): the file's current content becomes
 * the one last seen, so the watch does not reload it a second time.
 */
void config_watch_loaded(struct config_watch *w);
/* Number of changes reported so far. */
unsigned config_watch_changes(const struct config_watch *w);
/* NULL-safe, returns NULL. */
struct config_watch *config_watch_free(struct config_watch *w);
