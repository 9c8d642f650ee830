#include "dirwatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "backoff.h"
#include "loop.h"

#define RETRY_FIRST (100 * USEC_PER_MSEC)
#define RETRY_MAX   (10 * USEC_PER_SEC)

#define GONE_MASK (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)
/* IN_ONLYDIR: a file that takes the directory's name is not watched as if it were it. */
#define OWN_MASK (IN_ONLYDIR | IN_DELETE_SELF | IN_MOVE_SELF)
#define UP_MASK	 (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct dirwatch {
	struct loop *loop;
	char *path;   /* no trailing slash */
	char *parent; /* NULL when @path is "/" */
	char *name;   /* @path's last component */
	uint32_t mask;
	struct loop_watch *dir; /* the directory: it is there */
	struct loop_watch *up;	/* its parent, while it is not */
	struct loop_timer *retry;
	struct backoff backoff;	      /* the polls: RETRY_FIRST doubling to RETRY_MAX */
	struct dirwatch_event polled; /* the last DIRWATCH_RETRY; .error 0: not polled */
	unsigned depth;		      /* callbacks of @dw running */
	bool dead;		      /* freed by one of them: released when the last returns */
	dirwatch_fn *fn;
	void *userdata;
};

enum arm_state {
	ARMED,	 /* the directory is watched */
	WAITING, /* its parent is */
	POLLED,	 /* neither: @polled says why */
};

/* Tells the owner; false when the owner freed @dw meanwhile (then @dw is gone: return). */
static bool emit(struct dirwatch *dw, const struct dirwatch_event *ev)
{
	dw->depth++;
	dw->fn(dw, ev, dw->userdata);
	dw->depth--;
	if (!dw->dead)
		return true;
	if (dw->depth == 0)
		free(dw);
	return false;
}

static void on_dir(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata);
static void on_up(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata);

static int watch_dir(struct dirwatch *dw)
{
	return loop_watch_new(dw->loop, dw->path, dw->mask | OWN_MASK, on_dir, dw, &dw->dir);
}

/* Not polling (any more): the next poll starts the backoff afresh. */
static void polls_reset(struct dirwatch *dw)
{
	backoff_reset(&dw->backoff);
	dw->polled = (struct dirwatch_event){ .kind = DIRWATCH_RETRY };
}

static void armed(struct dirwatch *dw)
{
	dw->up = loop_watch_free(dw->up);
	loop_timer_disarm(dw->retry);
	polls_reset(dw);
}

static enum arm_state polled(struct dirwatch *dw, int r, const char *what)
{
	dw->polled.error = r;
	dw->polled.what = what;
	dw->polled.retry_usec = backoff_next(&dw->backoff);
	dw->polled.failures++;
	loop_timer_arm(dw->retry, dw->polled.retry_usec);
	return POLLED;
}

/* Watches the directory, else its parent, else polls. Reports nothing. */
static enum arm_state arm(struct dirwatch *dw)
{
	int r;

	if (dw->dir)
		return ARMED;
	r = watch_dir(dw);
	if (r == 0) {
		armed(dw);
		return ARMED;
	}
	/* There but not watchable (-EACCES, out of watches): its parent would not help. */
	if ((r != -ENOENT && r != -ENOTDIR) || !dw->parent)
		return polled(dw, r, "directory");
	if (!dw->up) {
		r = loop_watch_new(dw->loop, dw->parent, UP_MASK, on_up, dw, &dw->up);
		if (r < 0) {
			dw->up = NULL;
			return polled(dw, r, "parent");
		}
		/* It may have appeared between the two watches; the parent's sees any later. */
		if (watch_dir(dw) == 0) {
			armed(dw);
			return ARMED;
		}
	}
	polls_reset(dw);
	/* The parent names the directory's return, not a dangling symlink's target appearing. */
	loop_timer_arm(dw->retry, RETRY_MAX);
	return WAITING;
}

/* Looks again while the directory is not watched; says BACK or RETRY. */
static void rearm(struct dirwatch *dw)
{
	switch (arm(dw)) {
	case ARMED:
		(void)emit(dw, &(struct dirwatch_event){ .kind = DIRWATCH_BACK });
		break;
	case POLLED:
		(void)emit(dw, &dw->polled);
		break;
	case WAITING:
		break;
	}
}

static void on_dir(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata)
{
	struct dirwatch *dw = userdata;
	enum arm_state st;

	if (!(mask & GONE_MASK)) {
		(void)emit(dw, &(struct dirwatch_event){
				       .kind = DIRWATCH_EVENT, .name = name, .mask = mask });
		return;
	}
	/* Another directory at the path at once: a symlink swapped, a mount over it. */
	dw->dir = loop_watch_free(dw->dir);
	st = arm(dw);
	if (!emit(dw, &(struct dirwatch_event){ .kind = st == ARMED ? DIRWATCH_REPLACED :
								      DIRWATCH_GONE }))
		return;
	if (st == POLLED && !dw->dir)
		(void)emit(dw, &dw->polled);
}

static void on_up(struct loop_watch *lw, const char *name, uint32_t mask, void *userdata)
{
	struct dirwatch *dw = userdata;

	if (mask & GONE_MASK)
		dw->up = loop_watch_free(dw->up);
	else if (!(mask & IN_Q_OVERFLOW) &&
		 !((mask & (IN_CREATE | IN_MOVED_TO)) && streq(name, dw->name)))
		return;
	rearm(dw);
}

static void on_retry(struct loop_timer *t, void *userdata)
{
	rearm(userdata);
}

int dirwatch_new(struct loop *l, const char *path, uint32_t mask, dirwatch_fn *fn, void *userdata,
		 struct dirwatch **ret)
{
	struct dirwatch *dw;
	int r = -ENOMEM;

	if (!*path)
		return -EINVAL;
	dw = calloc(1, sizeof(*dw));
	if (!dw)
		return -ENOMEM;
	dw->loop = l;
	dw->mask = mask;
	dw->fn = fn;
	dw->userdata = userdata;
	dw->backoff = BACKOFF_INIT(RETRY_FIRST, 2, RETRY_MAX);
	dw->polled.kind = DIRWATCH_RETRY;
	dw->path = path_trim(path);
	if (!dw->path || path_split(dw->path, &dw->parent, &dw->name) < 0)
		goto fail;
	r = loop_timer_new(l, on_retry, dw, &dw->retry);
	if (r < 0) {
		dw->retry = NULL;
		goto fail;
	}
	(void)arm(dw);
	*ret = dw;
	return 0;
fail:
	dirwatch_free(dw);
	return r;
}

bool dirwatch_present(const struct dirwatch *dw)
{
	return dw->dir;
}

bool dirwatch_polled(const struct dirwatch *dw, struct dirwatch_event *ret)
{
	if (!dw->dir && dw->polled.error < 0) {
		if (ret)
			*ret = dw->polled;
		return true;
	}
	return false;
}

const char *dirwatch_path(const struct dirwatch *dw)
{
	return dw->path;
}

struct dirwatch *dirwatch_free(struct dirwatch *dw)
{
	if (!dw)
		return NULL;
	dw->dir = loop_watch_free(dw->dir);
	dw->up = loop_watch_free(dw->up);
	dw->retry = loop_timer_free(dw->retry);
	dw->path = mfree(dw->path);
	dw->parent = mfree(dw->parent);
	dw->name = mfree(dw->name);
	dw->dead = true;
	if (dw->depth == 0)
		free(dw);
	return NULL;
}
