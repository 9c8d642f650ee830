#include "file-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-read.h"
#include "loop.h"
#include "oneshot.h"

int file_write_atomic(const char *path, const void *data, size_t len, unsigned mode,
		      const char **reterr_step)
{
	const char *slash = strrchr(path, '/'), *step = "write";
	char *tmp = NULL, *dir = NULL;
	int fd = -1, dfd = -1, r;

	if (!slash)
		r = asprintf(&tmp, ".%s.XXXXXX", path);
	else
		r = asprintf(&tmp, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1);
	if (r < 0) {
		tmp = NULL;
		r = -ENOMEM;
		goto out;
	}
	dir = !slash	    ? strdup(".") :
	      slash == path ? strdup("/") :
			      strndup(path, (size_t)(slash - path));
	if (!dir) {
		r = -ENOMEM;
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		tmp = mfree(tmp); /* nothing to remove */
		step = "create a temporary file for";
		goto out;
	}
	r = fd_write_all(fd, data, len);
	if (r < 0)
		goto out;
	/* The data must be on disk before the rename makes it the file. */
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		r = -errno;
		goto out;
	}
	r = close(fd);
	fd = -1;
	if (r < 0 || rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	tmp = mfree(tmp);
	/* And the rename itself, which lives in the directory. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		step = "sync the directory of";
		goto out;
	}
	r = 0;
out:
	if (r < 0 && reterr_step)
		*reterr_step = step;
	fd_close(fd);
	fd_close(dfd);
	if (tmp)
		(void)unlink(tmp);
	free(tmp);
	free(dir);
	return r;
}

struct job {
	struct oneshot *os; /* while it runs: the loop side's hold */
	char *path;
	uint8_t *data;
	size_t len;
	unsigned mode;
	bool mkdir;
	bool skip_same;
	struct file_write_result res; /* the thread's, until oneshot_done() */
};

struct file_writer {
	struct loop *loop;
	struct file_writer_opts o;
	struct loop_wake *wake;
	struct loop_timer *stuck;
	struct job *running;
	struct job *waiting; /* not started yet: only the loop side holds it */
	usec_t started;
};

/* A job not started, or (as its oneshot's free_fn) one whose oneshot let go of it. */
static void job_free(void *userdata)
{
	struct job *j = userdata;

	if (!j)
		return;
	free(j->path);
	free(j->data);
	free(j);
}

static void write_job(void *userdata)
{
	struct job *j = userdata;
	struct file_write_result res = { 0 };
	usec_t t0 = now_usec();

	if (j->skip_same && file_equals(j->path, j->data, j->len) == 0) {
		res.unchanged = true;
	} else {
		if (j->mkdir) {
			char *dir = NULL;

			res.r = path_split(j->path, &dir, NULL);
			if (res.r == 0 && dir && !streq(dir, ".") && !streq(dir, "/"))
				res.r = mkdir_parents(dir, 0755);
			if (res.r < 0)
				res.step = "create the directory of";
			free(dir);
		}
		if (res.r == 0)
			res.r = file_write_atomic(j->path, j->data, j->len, j->mode, &res.step);
	}
	res.dur = now_usec() - t0;
	j->res = res;
}

/* Starts @j on a thread of its own (a oneshot, which owns it from then on). */
static int job_start(struct file_writer *fw, struct job *j)
{
	int r;

	r = oneshot_start(fw->wake, write_job, job_free, j, &j->os);
	if (r < 0)
		return r;
	fw->running = j;
	fw->started = now_usec();
	if (fw->o.stuck && fw->o.stuck_after)
		loop_timer_arm(fw->stuck, fw->o.stuck_after);
	return 0;
}

static void on_wake(struct loop_wake *lw, void *userdata)
{
	struct file_writer *fw = userdata;
	struct job *j = fw->running;
	struct file_write_result res;
	int r;

	if (!j || !oneshot_done(j->os))
		return;
	res = j->res;
	fw->running = NULL;
	(void)oneshot_unref(j->os); /* frees @j */
	loop_timer_disarm(fw->stuck);
	if (fw->waiting) {
		j = fw->waiting;
		fw->waiting = NULL;
		r = job_start(fw, j);
		if (r == 0)
			return; /* its result is the one reported */
		job_free(j);
		res = (struct file_write_result){ .r = r, .step = "start a thread for" };
	}
	fw->o.done(fw, &res, fw->o.userdata);
}

static void on_stuck(struct loop_timer *t, void *userdata)
{
	struct file_writer *fw = userdata;

	if (fw->running)
		fw->o.stuck(fw, now_usec() - fw->started, fw->o.userdata);
}

int file_writer_new(struct loop *l, const struct file_writer_opts *o, struct file_writer **ret)
{
	struct file_writer *fw = calloc(1, sizeof(*fw));
	int r;

	if (!fw)
		return -ENOMEM;
	fw->loop = l;
	fw->o = *o;
	if ((r = loop_wake_new(l, on_wake, fw, &fw->wake)) < 0 ||
	    (r = loop_timer_new(l, on_stuck, fw, &fw->stuck)) < 0) {
		fw->wake = NULL; /* a failed _new() leaves its out-parameter as it was */
		file_writer_free(fw);
		return r;
	}
	*ret = fw;
	return 0;
}

int file_writer_write(struct file_writer *fw, const char *path, const void *data, size_t len)
{
	struct job *j = calloc(1, sizeof(*j));
	int r;

	if (!j)
		return -ENOMEM;
	j->mode = fw->o.mode;
	j->mkdir = fw->o.mkdir;
	j->skip_same = fw->o.skip_same;
	j->path = strdup(path);
	j->data = malloc(len + 1);
	if (!j->path || !j->data) {
		job_free(j);
		return -ENOMEM;
	}
	memcpy(j->data, data, len);
	j->len = len;
	if (fw->running) {
		job_free(fw->waiting);
		fw->waiting = j;
		return 0;
	}
	r = job_start(fw, j);
	if (r < 0)
		job_free(j);
	return r;
}

bool file_writer_busy(const struct file_writer *fw)
{
	return fw->running || fw->waiting;
}

struct file_writer *file_writer_free(struct file_writer *fw)
{
	if (!fw)
		return NULL;
	/* A running write finishes on its own; its thread frees it then. */
	if (fw->running)
		(void)oneshot_unref(fw->running->os);
	job_free(fw->waiting);
	loop_timer_free(fw->stuck);
	loop_wake_free(fw->wake);
	free(fw);
	return NULL;
}
