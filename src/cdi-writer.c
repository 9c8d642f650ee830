/*
 * The CDI spec kept on disk (cdi-writer.h). One write at a time runs on a one-shot thread;
 * a write job is shared between that thread and the loop side under its own mutex, and the
 * last of the two to let go frees it, so freeing the writer never waits for a stuck fsync.
 */

#define LOG_MODULE "cdi"

#include "cdi-writer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "cdi.h"
#include "log.h"
#include "loop.h"

#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (10 * USEC_PER_SEC)

struct write_job {
	pthread_mutex_t mu;
	unsigned refs;		/* the thread and the loop side */
	struct loop_wake *wake; /* NULL once the loop side let go */
	char *dir;
	uint8_t *data;
	size_t len;
	bool done;
	int r;
	char *err;
};

struct cdi_writer {
	struct loop *loop;
	struct loop_wake *wake;
	struct loop_timer *retry;
	struct loop_watch *watch;
	char *dir; /* spec_dir of the wanted spec ("" for the default) */
	struct buf spec;
	bool wanted;
	bool on_disk; /* the wanted bytes were written and not seen changed since */
	bool dirty;   /* wanted bytes changed while a write ran */
	struct write_job *job;
	usec_t backoff;
	char *error;
	unsigned writes;
	bool first_pending; /* the first write attempt has not finished yet */
	void (*settled)(void *userdata);
	void *settled_userdata;
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

static void job_unref(struct write_job *j)
{
	bool last;

	(void)pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	(void)pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	(void)pthread_mutex_destroy(&j->mu);
	free(j->dir);
	free(j->data);
	free(j->err);
	free(j);
}

static void *write_thread(void *userdata)
{
	struct write_job *j = userdata;
	char *err = NULL;
	int r = cdi_spec_write_file(*j->dir ? j->dir : NULL, j->data, j->len, &err);

	(void)pthread_mutex_lock(&j->mu);
	j->r = r;
	j->err = err;
	j->done = true;
	if (j->wake)
		loop_wake_signal(j->wake);
	(void)pthread_mutex_unlock(&j->mu);
	job_unref(j);
	return NULL;
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

static void on_watch(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata);

/* Watches the spec's directory for it vanishing or changing; best effort (logged at debug). */
static void watch_dir(struct cdi_writer *w)
{
	int r;

	if (w->watch)
		return;
	r = loop_watch_new(w->loop, spec_dir(w),
			   IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE |
				   IN_DELETE_SELF | IN_MOVE_SELF,
			   on_watch, w, &w->watch);
	if (r < 0)
		(void)log_debug_errno(r, "cannot watch the cdi spec dir", "dir=%s", spec_dir(w));
}

static void start_write(struct cdi_writer *w)
{
	struct write_job *j;
	pthread_t t;
	sigset_t all, old;
	int r;

	if (w->job) {
		w->dirty = true;
		return;
	}
	w->dirty = false;
	j = calloc(1, sizeof(*j));
	if (!j)
		goto fail;
	(void)pthread_mutex_init(&j->mu, NULL);
	j->refs = 2;
	j->wake = w->wake;
	j->dir = strdup(w->dir);
	j->data = malloc(w->spec.len + 1);
	if (!j->dir || !j->data) {
		j->refs = 1;
		job_unref(j);
		goto fail;
	}
	memcpy(j->data, w->spec.data, w->spec.len);
	j->len = w->spec.len;
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, NULL, write_thread, j);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		j->refs = 1;
		job_unref(j);
		goto fail;
	}
	(void)pthread_detach(t);
	w->job = j;
	return;
fail:
	writer_set_error(w, "cannot start the CDI spec write: out of memory or threads");
	loop_timer_arm(w->retry, w->backoff ? w->backoff : BACKOFF_MIN);
	first_settled(w);
}

static void on_wake(struct loop_wake *lw, void *userdata)
{
	struct cdi_writer *w = userdata;
	struct write_job *j = w->job;
	bool done;
	char q[512];
	int r;

	if (!j)
		return;
	(void)pthread_mutex_lock(&j->mu);
	done = j->done;
	(void)pthread_mutex_unlock(&j->mu);
	if (!done)
		return;
	w->job = NULL;
	if (!w->wanted) {
		job_unref(j);
		first_settled(w);
		return;
	}
	if (w->dirty) {
		job_unref(j);
		start_write(w);
		return;
	}
	if (j->r < 0) {
		char *msg = NULL;

		(void)log_warn_errno(j->r, "cannot write the cdi spec, retrying",
				     "reason=%s retry_ms=%llu", log_quote(q, sizeof(q), j->err),
				     (unsigned long long)((w->backoff ? w->backoff : BACKOFF_MIN) /
							  USEC_PER_MSEC));
		if (asprintf(&msg, "cannot write the CDI spec: %s", j->err ? j->err : "") < 0)
			msg = NULL;
		writer_set_error(w, msg ? msg : "cannot write the CDI spec");
		free(msg);
		w->backoff = w->backoff ? MIN(w->backoff * 2, BACKOFF_MAX) : BACKOFF_MIN;
		loop_timer_arm(w->retry, w->backoff);
		job_unref(j);
		first_settled(w);
		return;
	}
	job_unref(j);
	/*
	 * Watch first, then look: a change from now on is an inotify event, and one made while
	 * the write was finishing (before this wake-up) is seen by the check.
	 */
	watch_dir(w);
	r = cdi_spec_verify(*w->dir ? w->dir : NULL, w->spec.data, w->spec.len);
	if (r == -ENOENT || r == -ESTALE) {
		log_warn("cdi spec removed or changed, writing it again", "dir=%s reason=%s",
			 spec_dir(w), "changed while it was written");
		start_write(w);
		return;
	}
	log_info("cdi spec written", "dir=%s retried=%s", spec_dir(w), w->backoff ? "yes" : "no");
	w->writes++;
	w->backoff = 0;
	w->on_disk = true;
	writer_set_error(w, NULL);
	first_settled(w);
}

static void on_retry(struct loop_timer *t, void *userdata)
{
	struct cdi_writer *w = userdata;

	if (w->wanted && !w->on_disk)
		start_write(w);
}

static void on_watch(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata)
{
	struct cdi_writer *w = userdata;
	bool gone = mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED);
	int r;

	if (gone)
		w->watch = loop_watch_free(w->watch);
	if (!w->wanted || w->job || (!gone && (!name || !streq(name, CDI_SPEC_FILE_NAME))))
		return;
	r = gone ? -ENOENT : cdi_spec_verify(*w->dir ? w->dir : NULL, w->spec.data, w->spec.len);
	if (r == 0)
		return;
	log_warn("cdi spec removed or changed, writing it again", "dir=%s reason=%s", spec_dir(w),
		 r == -ENOENT ? "removed" : "changed");
	w->on_disk = false;
	writer_set_error(w, r == -ENOENT ?
				    "the CDI spec was removed; writing it again" :
				    "the CDI spec was changed by someone else; writing it again");
	start_write(w);
}

int cdi_writer_new(struct loop *l, struct cdi_writer **ret)
{
	struct cdi_writer *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->loop = l;
	w->dir = strdup("");
	if (!w->dir) {
		free(w);
		return -ENOMEM;
	}
	if ((r = loop_wake_new(l, on_wake, w, &w->wake)) < 0 ||
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
	char *err = NULL, *dir = NULL;
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
	if (!dir) {
		buf_release(&nb);
		return -ENOMEM;
	}
	same = w->on_disk && streq(dir, w->dir) && nb.len == w->spec.len &&
	       memcmp(nb.data, w->spec.data, nb.len) == 0;
	if (!streq(dir, w->dir))
		w->watch = loop_watch_free(w->watch);
	free(w->dir);
	w->dir = dir;
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
	w->backoff = 0;
	loop_timer_disarm(w->retry);
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
	loop_timer_disarm(w->retry);
	w->watch = loop_watch_free(w->watch);
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
	if (w->job) {
		(void)pthread_mutex_lock(&w->job->mu);
		w->job->wake = NULL;
		(void)pthread_mutex_unlock(&w->job->mu);
		job_unref(w->job);
	}
	(void)loop_watch_free(w->watch);
	(void)loop_timer_free(w->retry);
	(void)loop_wake_free(w->wake);
	buf_release(&w->spec);
	free(w->dir);
	free(w->error);
	free(w);
	return NULL;
}
