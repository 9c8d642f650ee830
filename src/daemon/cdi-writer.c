/*
 * The CDI spec kept on disk (cdi-writer.h). The writes run off the loop through file-writer.h;
 * this module decides when to write, watches the result, and says why Allocate cannot name
 * CDI devices when it cannot.
 */

#define LOG_MODULE "cdi"

#include "cdi-writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "backoff.h"
#include "cdi.h"
#include "dirwatch.h"
#include "file-read.h"
#include "file-writer.h"
#include "log.h"
#include "loop.h"

#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (10 * USEC_PER_SEC)
/* A write this slow is reported, and registration waits no longer for the first one. */
#define STUCK_USEC (5 * USEC_PER_SEC)
/*
 * Another writer: our spec replaced by other bytes CONTEST_HITS times within CONTEST_WINDOW.
 * We then write it again only after a back-off (1 s doubling to 5 min), and take the spec as
 * ours again once it has stayed ours for CONTEST_QUIET.
 */
#define CONTEST_HITS	    3
#define CONTEST_WINDOW	    (10 * USEC_PER_SEC)
#define CONTEST_BACKOFF_MIN (1 * USEC_PER_SEC)
#define CONTEST_BACKOFF_MAX (300 * USEC_PER_SEC)
#define CONTEST_QUIET	    (2 * CONTEST_BACKOFF_MAX)

/* IN_ONLYDIR, IN_DELETE_SELF, IN_MOVE_SELF: dirwatch adds them. */
#define WATCH_MASK (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)

struct cdi_writer {
	struct loop *loop;
	struct file_writer *fw;
	struct loop_timer *retry; /* a failed write's back-off; in a contest, the next write */
	struct dirwatch *watch;
	char *dir;  /* spec_dir of the wanted spec ("" for the default) */
	char *path; /* the spec file in it */
	struct buf spec;
	bool wanted;
	bool on_disk; /* the wanted bytes were written and not seen changed since */
	struct backoff backoff;
	char *error;
	unsigned writes;
	bool first_pending; /* the first write attempt has not finished yet */
	void (*settled)(void *userdata);
	void *settled_userdata;
	/* Another writer of the same spec. */
	usec_t hits[CONTEST_HITS]; /* when our spec was last replaced, a ring */
	unsigned n_hits;
	bool contested;
	struct backoff contest_backoff;
	usec_t contest_written; /* when the contest began, or our latest write in it landed */
};

/* The first attempt finished, one way or another: whoever waited for it may go on. */
static void first_settled(struct cdi_writer *w)
{
	if (!w->first_pending)
		return;
	w->first_pending = false;
	if (w->settled)
		w->settled(w->settled_userdata);
}

static void writer_set_error(struct cdi_writer *w, const char *s)
{
	free(w->error);
	w->error = s ? strdup(s) : NULL;
	if (s && !w->error)
		w->error = strdup("out of memory");
}

static const char *spec_dir(const struct cdi_writer *w)
{
	return *w->dir ? w->dir : CDI_SPEC_DIR;
}

static int verify(const struct cdi_writer *w)
{
	return file_equals(w->path, w->spec.data, w->spec.len);
}

/* No other writer seen: a replacement is written again at once. */
static void contest_reset(struct cdi_writer *w)
{
	w->contested = false;
	w->n_hits = 0;
}

static void on_watch(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata);

/*
 * Watches the spec's directory for it vanishing or changing (dirwatch.h: its parent while it
 * is missing, polled while that is missing too); best effort (logged at debug).
 */
static void watch_dir(struct cdi_writer *w)
{
	struct dirwatch_event ev;
	int r;

	if (w->watch)
		return;
	r = dirwatch_new(w->loop, spec_dir(w), WATCH_MASK, on_watch, w, &w->watch);
	if (r < 0) {
		w->watch = NULL;
		(void)log_debug_errno(r, "cannot watch the cdi spec dir", "dir=%s", spec_dir(w));
	} else if (dirwatch_polled(w->watch, &ev)) {
		(void)log_debug_errno(ev.error, "cannot watch the cdi spec dir", "dir=%s",
				      spec_dir(w));
	}
}

static void start_write(struct cdi_writer *w)
{
	int r;

	loop_timer_disarm(w->retry);
	r = file_writer_write(w->fw, w->path, w->spec.data, w->spec.len);
	if (r == 0)
		return;
	(void)log_warn_errno(r, "cannot start the cdi spec write, retrying", "dir=%s", spec_dir(w));
	writer_set_error(w, "cannot start the CDI spec write: out of memory or threads");
	loop_timer_arm(w->retry, backoff_next(&w->backoff));
	first_settled(w);
}

/*
 * Someone else's bytes are where our spec should be. A spec is there, so Allocate goes on
 * naming devices (a container whose names it lacks fails at creation and the kubelet retries
 * it, where a refused Allocate fails the pod for good); ours is written again, at once, or
 * after a growing back-off when another writer keeps replacing it.
 */
static void replaced(struct cdi_writer *w, const char *reason)
{
	usec_t now = now_usec(), oldest;

	w->on_disk = false;
	if (w->contested && now - w->contest_written >= CONTEST_QUIET) {
		log_info("cdi spec no longer rewritten by another writer", "dir=%s", spec_dir(w));
		contest_reset(w);
	}
	w->hits[w->n_hits++ % CONTEST_HITS] = now;
	oldest = w->hits[w->n_hits % CONTEST_HITS];
	if (!w->contested && w->n_hits >= CONTEST_HITS && now - oldest <= CONTEST_WINDOW) {
		w->contested = true;
		backoff_reset(&w->contest_backoff);
		w->contest_written = now; /* the quiet is counted from here, not from long ago */
		log_warn("cdi spec rewritten by another writer, backing off",
			 "dir=%s rewrites=%u window_ms=%llu retry_ms=%llu max_retry_ms=%llu",
			 spec_dir(w), (unsigned)CONTEST_HITS,
			 (unsigned long long)((now - oldest) / USEC_PER_MSEC),
			 (unsigned long long)(CONTEST_BACKOFF_MIN / USEC_PER_MSEC),
			 (unsigned long long)(CONTEST_BACKOFF_MAX / USEC_PER_MSEC));
	}
	if (w->contested) {
		if (!loop_timer_armed(w->retry)) {
			loop_timer_arm(w->retry, backoff_next(&w->contest_backoff));
		}
		log_debug("cdi spec rewritten by another writer, writing it again later", "dir=%s",
			  spec_dir(w));
		return;
	}
	log_warn("cdi spec removed or changed, writing it again", "dir=%s reason=%s", spec_dir(w),
		 log_q(reason));
	start_write(w);
}

/* Our spec is not where the runtime looks: Allocate refuses until it is written again. */
static void missing(struct cdi_writer *w, const char *reason, const char *error)
{
	log_warn("cdi spec removed or changed, writing it again", "dir=%s reason=%s", spec_dir(w),
		 log_q(reason));
	w->on_disk = false;
	writer_set_error(w, error);
	start_write(w);
}

/* Whatever is at the path now, against what we want there; the reasons are the log's. */
static void check(struct cdi_writer *w, const char *changed, const char *removed)
{
	int r = verify(w);

	if (r == 0)
		return;
	if (r == -ESTALE)
		replaced(w, changed);
	else
		missing(w, r == -ENOENT ? removed : "unreadable",
			"the CDI spec was removed; writing it again");
}

static void on_done(struct file_writer *fw, const struct file_write_result *res, void *userdata)
{
	struct cdi_writer *w = userdata;
	char q[512], eb[128];
	int r;

	if (!w->wanted) {
		first_settled(w);
		return;
	}
	if (res->r < 0) {
		static const char prefix[] = "cannot write the CDI spec: ";
		usec_t delay = backoff_next(&w->backoff);
		char *msg = NULL;

		/* The error Allocate gives; the log's reason is the part after the prefix. */
		if (asprintf(&msg, "%sfailed to %s CDI spec %s: %s", prefix, res->step, w->path,
			     strerror_r(-res->r, eb, sizeof(eb))) < 0)
			msg = NULL;
		(void)log_warn_errno(res->r, "cannot write the cdi spec, retrying",
				     "reason=%s retry_ms=%llu",
				     log_quote(q, sizeof(q), msg ? msg + strlen(prefix) : ""),
				     (unsigned long long)(delay / USEC_PER_MSEC));
		writer_set_error(w, msg ? msg : "cannot write the CDI spec");
		free(msg);
		loop_timer_arm(w->retry, delay);
		first_settled(w);
		return;
	}
	/*
	 * The quiet that ends a contest counts from our latest write, whether or not the other
	 * writer replaced it before the check below: one that always does keeps the contest on.
	 */
	if (w->contested)
		w->contest_written = now_usec();
	/*
	 * Watch first, then look: a change from now on is an inotify event, and one made while
	 * the write was finishing (before this wake-up) is seen by the check.
	 */
	watch_dir(w);
	r = verify(w);
	if (r < 0) {
		/* Written: registration waits no longer, whatever happened to it since. */
		check(w, "changed while it was written", "removed while it was written");
		first_settled(w);
		return;
	}
	if (res->unchanged)
		log_info("cdi spec already on disk", "dir=%s", spec_dir(w));
	else
		log_info("cdi spec written", "dir=%s retried=%s dur_ms=%llu", spec_dir(w),
			 backoff_started(&w->backoff) ? "yes" : "no",
			 (unsigned long long)(res->dur / USEC_PER_MSEC));
	w->writes++;
	backoff_reset(&w->backoff);
	w->on_disk = true;
	writer_set_error(w, NULL);
	first_settled(w);
}

/*
 * The write has not returned (a frozen or dying disk). Registration waits no longer: the node
 * is registered, and while no spec of ours is on disk Allocate says why it refuses.
 */
static void on_stuck(struct file_writer *fw, usec_t waited, void *userdata)
{
	struct cdi_writer *w = userdata;
	char msg[160];

	log_warn("cdi spec write not finished, not waiting for it to register",
		 "dir=%s dur_ms=%llu first=%s", spec_dir(w),
		 (unsigned long long)(waited / USEC_PER_MSEC), w->first_pending ? "yes" : "no");
	if (w->error) {
		(void)snprintf(msg, sizeof(msg),
			       "the CDI spec write has not finished after %llu s (a stuck disk?)",
			       (unsigned long long)(waited / USEC_PER_SEC));
		writer_set_error(w, msg);
	}
	first_settled(w);
}

static void on_retry(struct loop_timer *t, void *userdata)
{
	struct cdi_writer *w = userdata;

	if (!w->wanted || file_writer_busy(w->fw))
		return;
	if (w->contested && verify(w) == 0) {
		w->on_disk = true; /* the other writer put ours back, or stopped */
		return;
	}
	if (!w->on_disk)
		start_write(w);
}

static void on_watch(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata)
{
	struct cdi_writer *w = userdata;

	switch (ev->kind) {
	case DIRWATCH_GONE:
	case DIRWATCH_REPLACED:
	case DIRWATCH_BACK:
		/*
		 * Deleted, or the path leads elsewhere now (a symlink swapped, a mount over it),
		 * or a directory is back there (not ours, when no write of ours is running).
		 */
		if (w->wanted && !file_writer_busy(w->fw) && verify(w) != 0)
			missing(w,
				ev->kind == DIRWATCH_GONE     ? "directory removed" :
				ev->kind == DIRWATCH_REPLACED ? "directory replaced" :
								"directory back",
				"the CDI spec directory was replaced or removed; writing the spec "
				"again");
		return;
	case DIRWATCH_RETRY:
		(void)log_debug_errno(ev->error, "cannot watch the cdi spec dir", "dir=%s",
				      spec_dir(w));
		return;
	case DIRWATCH_EVENT:
		break;
	}
	if (!w->wanted || file_writer_busy(w->fw) || !streq(ev->name, CDI_SPEC_FILE_NAME))
		return;
	check(w, "changed", "removed");
}

int cdi_writer_new(struct loop *l, struct cdi_writer **ret)
{
	struct cdi_writer *w = calloc(1, sizeof(*w));
	struct file_writer_opts fo = {
		.mode = 0644,
		.mkdir = true,
		.skip_same = true,
		.stuck_after = STUCK_USEC,
		.done = on_done,
		.stuck = on_stuck,
	};
	int r;

	if (!w)
		return -ENOMEM;
	w->loop = l;
	w->backoff = BACKOFF_INIT(BACKOFF_MIN, 2, BACKOFF_MAX);
	w->contest_backoff = BACKOFF_INIT(CONTEST_BACKOFF_MIN, 2, CONTEST_BACKOFF_MAX);
	fo.userdata = w;
	w->dir = strdup("");
	w->path = path_join(CDI_SPEC_DIR, CDI_SPEC_FILE_NAME);
	if (!w->dir || !w->path) {
		(void)cdi_writer_free(w);
		return -ENOMEM;
	}
	if ((r = file_writer_new(l, &fo, &w->fw)) < 0 ||
	    (r = loop_timer_new(l, on_retry, w, &w->retry)) < 0) {
		(void)cdi_writer_free(w);
		return r;
	}
	*ret = w;
	return 0;
}

int cdi_writer_set(struct cdi_writer *w, const struct cdi_opts *o, const struct gpu_info *info)
{
	struct buf nb = { 0 };
	char *err = NULL, *dir = NULL, *path = NULL;
	bool same;
	int r;

	w->wanted = true;
	r = cdi_spec_render(o, info, &nb, &err);
	if (r < 0) {
		char *msg = NULL;

		(void)log_error_errno(r, "unable to create cdi spec file", "dir=%s reason=%s",
				      o->spec_dir ? o->spec_dir : CDI_SPEC_DIR,
				      log_q(err ? err : ""));
		if (asprintf(&msg, "cannot generate the CDI spec: %s", err ? err : "") < 0)
			msg = NULL;
		writer_set_error(w, msg ? msg : "cannot generate the CDI spec");
		free(msg);
		free(err);
		buf_release(&nb);
		w->on_disk = false;
		loop_timer_disarm(w->retry);
		first_settled(w);
		return r;
	}
	free(err);
	dir = strdup(o->spec_dir ? o->spec_dir : "");
	path = path_join(*dir ? dir : CDI_SPEC_DIR, CDI_SPEC_FILE_NAME);
	if (!dir || !path) {
		free(dir);
		free(path);
		buf_release(&nb);
		return -ENOMEM;
	}
	same = w->on_disk && streq(dir, w->dir) && nb.len == w->spec.len &&
	       memcmp(nb.data, w->spec.data, nb.len) == 0;
	if (!streq(dir, w->dir)) {
		w->watch = dirwatch_free(w->watch);
		contest_reset(w);
	}
	free(w->dir);
	w->dir = dir;
	free(w->path);
	w->path = path;
	buf_release(&w->spec);
	w->spec = nb;
	if (same)
		return 0;
	w->on_disk = false;
	/* Before the first write there is no spec at all; later the old one serves meanwhile. */
	if (!w->error && w->writes == 0) {
		writer_set_error(w, "the CDI spec is being written");
		w->first_pending = true;
	}
	backoff_reset(&w->backoff);
	watch_dir(w); /* before the write: nothing done to the spec after it goes unseen */
	start_write(w);
	return 0;
}

bool cdi_writer_first_pending(const struct cdi_writer *w)
{
	return w->first_pending;
}

void cdi_writer_set_settled_cb(struct cdi_writer *w, void (*fn)(void *userdata), void *userdata)
{
	w->settled = fn;
	w->settled_userdata = userdata;
}

void cdi_writer_clear(struct cdi_writer *w)
{
	w->wanted = false;
	w->on_disk = false;
	contest_reset(w);
	loop_timer_disarm(w->retry);
	w->watch = dirwatch_free(w->watch);
	writer_set_error(w, NULL);
	first_settled(w);
}

const char *const *cdi_writer_error(const struct cdi_writer *w)
{
	return (const char *const *)&w->error;
}

struct cdi_writer *cdi_writer_free(struct cdi_writer *w)
{
	if (!w)
		return NULL;
	(void)file_writer_free(w->fw);
	(void)dirwatch_free(w->watch);
	(void)loop_timer_free(w->retry);
	buf_release(&w->spec);
	free(w->dir);
	free(w->path);
	free(w->error);
	free(w);
	return NULL;
}
