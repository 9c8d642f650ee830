#include "config-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "config.h"
#include "dirwatch.h"
#include "file-read.h"
#include "loop.h"

#define LOG_MODULE "config-watch"
#include "log.h"

#define SETTLE_USEC (100 * USEC_PER_MSEC)

/* IN_ONLYDIR, IN_DELETE_SELF, IN_MOVE_SELF: dirwatch adds them. */
#define DIR_MASK (IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)

struct config_watch {
	struct loop *loop;
	char *path;
	char *dir;  /* @path's directory */
	char *base; /* @path's last component */
	struct dirwatch *dw;
	struct loop_timer *settle;
	char *seen; /* the content last seen (NULL: none yet) */
	size_t seen_len;
	bool missing;  /* the file's absence was logged */
	bool empty;    /* an empty file was logged */
	bool dir_gone; /* the directory's absence was logged */
	bool relevant; /* the pending check follows an event about our file */
	int read_err;  /* the last read error logged, 0 none */
	unsigned changes;
	config_watch_fn *fn;
	void *userdata;
};

/*
 * Reads the file whole without ever blocking (a FIFO at the path would stall the loop);
 * *@reterr_what (may be NULL) names what a file refused for its type is.
 */
static int read_content(const char *path, char **ret, size_t *ret_len, const char **reterr_what)
{
	int r = read_file_at(AT_FDCWD, path, 0, CONFIG_FILE_MAX, ret, ret_len, reterr_what);

	return r == -EBADFD ? -EINVAL : r;
}

static void check(struct config_watch *w)
{
	bool relevant = w->relevant;
	const char *what = NULL;
	char *data = NULL;
	size_t len = 0;
	int r;

	w->relevant = false;
	r = read_content(w->path, &data, &len, &what);
	if (r == -ENOENT || r == -ENOTDIR) {
		if (!w->missing)
			log_warn("config file gone, keeping the running config", "path=%s",
				 w->path);
		w->missing = true;
		return;
	}
	if (r < 0) {
		if (r != w->read_err)
			(void)log_warn_errno(
				r, "cannot read the config file, keeping the running config",
				"path=%s is=%s", w->path, log_q(what ? what : ""));
		w->read_err = r;
		return;
	}
	w->read_err = 0;
	if (w->missing)
		log_info("config file back", "path=%s", w->path);
	w->missing = false;
	if (len == 0) {
		if (!w->empty)
			log_info(
				"config file is empty, keeping the running config until it has content",
				"path=%s", w->path);
		w->empty = true;
		free(data);
		return;
	}
	w->empty = false;
	if (w->seen && len == w->seen_len && memcmp(data, w->seen, len) == 0) {
		free(data);
		if (relevant)
			log_info("config file content unchanged, not reloading", "path=%s",
				 w->path);
		return;
	}
	free(w->seen);
	w->seen = data;
	w->seen_len = len;
	w->changes++;
	log_info("config file changed", "path=%s bytes=%zu", w->path, len);
	w->fn(w, w->userdata);
}

static void on_settle(struct loop_timer *t, void *userdata)
{
	check(userdata);
}

static void schedule(struct config_watch *w, bool relevant)
{
	w->relevant |= relevant;
	loop_timer_arm(w->settle, SETTLE_USEC);
}

static void cannot_watch(struct config_watch *w, const struct dirwatch_event *ev)
{
	if (ev->failures == 1)
		(void)log_warn_errno(
			ev->error,
			"cannot watch the config directory, retrying, SIGHUP still reloads",
			"path=%s", w->dir);
}

static void on_dir(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata)
{
	struct config_watch *w = userdata;
	const char *name = ev->name;
	struct stat st;

	switch (ev->kind) {
	case DIRWATCH_REPLACED:
		log_info("config directory replaced, watching the new one", "path=%s", w->dir);
		schedule(w, true); /* whatever the new one holds */
		return;
	case DIRWATCH_GONE:
		log_warn("config directory gone, keeping the running config", "path=%s", w->dir);
		w->dir_gone = true;
		return;
	case DIRWATCH_BACK:
		if (w->dir_gone)
			log_info("config directory back, watching it again", "path=%s", w->dir);
		w->dir_gone = false;
		schedule(w, true); /* whatever was written before the watch */
		return;
	case DIRWATCH_RETRY:
		cannot_watch(w, ev);
		return;
	case DIRWATCH_EVENT:
		break;
	}
	if (ev->mask & IN_Q_OVERFLOW) {
		schedule(w, true);
		return;
	}
	if (!streq(name, w->base) && !streq(name, "..data"))
		return;
	/*
	 * A file created in place is still being written: its IN_CLOSE_WRITE follows. Not one
	 * that already has another name: link(2) makes a whole file appear, and no close follows.
	 */
	if (ev->mask & IN_CREATE) {
		char *p = path_join(w->dir, name);

		if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink < 2) {
			free(p);
			return;
		}
		free(p);
	}
	schedule(w, true);
}

int config_watch_new(struct loop *l, const char *path, config_watch_fn *fn, void *userdata,
		     struct config_watch **ret)
{
	struct dirwatch_event ev;
	struct config_watch *w;
	int r = -ENOMEM;

	if (!path || !*path || path[strlen(path) - 1] == '/')
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->loop = l;
	w->fn = fn;
	w->userdata = userdata;
	w->path = strdup(path);
	if (!w->path || path_split(path, &w->dir, &w->base) < 0)
		goto fail;
	if ((r = loop_timer_new(l, on_settle, w, &w->settle)) < 0)
		goto fail;
	if (read_content(w->path, &w->seen, &w->seen_len, NULL) < 0) {
		w->seen = NULL;
		w->seen_len = 0;
	}
	r = dirwatch_new(l, w->dir, DIR_MASK, on_dir, w, &w->dw);
	if (r < 0) {
		w->dw = NULL;
		goto fail;
	}
	if (dirwatch_polled(w->dw, &ev))
		cannot_watch(w, &ev);
	log_info("watching the config file for changes", "path=%s", w->path);
	*ret = w;
	return 0;
fail:
	config_watch_free(w);
	return r;
}

void config_watch_loaded(struct config_watch *w)
{
	char *data = NULL;
	size_t len = 0;

	if (read_content(w->path, &data, &len, NULL) < 0 || len == 0) {
		free(data);
		return;
	}
	free(w->seen);
	w->seen = data;
	w->seen_len = len;
}

unsigned config_watch_changes(const struct config_watch *w)
{
	return w->changes;
}

struct config_watch *config_watch_free(struct config_watch *w)
{
	if (!w)
		return NULL;
	dirwatch_free(w->dw);
	loop_timer_free(w->settle);
	free(w->seen);
	free(w->path);
	free(w->dir);
	free(w->base);
	free(w);
	return NULL;
}
