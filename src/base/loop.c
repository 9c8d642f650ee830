#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* How often every watch's path is checked again, for the swaps no event announces. */
#define WATCH_VERIFY_USEC (10 * USEC_PER_SEC)
/* What the parent of a watched directory is watched for: its name swapped or removed. */
#define PARENT_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)

enum loop_src_kind {
	SRC_IO,
	SRC_TIMERFD,
	SRC_SIGNALFD,
	SRC_WAKE,
	SRC_INOTIFY,
	SRC_MOUNTS,
	SRC_WATCH, /* a loop_watch: never in epoll (the inotify fd is), freed as a source */
};

/* Every epoll registration starts with this header; epoll's data.ptr points at it. */
struct loop_src {
	enum loop_src_kind kind;
	struct loop *loop;
	void *userdata;
	bool dead;
	struct loop_src *next_dead;
};

struct loop_io {
	struct loop_src src;
	int fd;
	uint32_t events;
	loop_io_fn *fn;
};

struct loop_timer {
	struct loop *loop;
	usec_t when; /* USEC_INFINITY: disarmed */
	loop_timer_fn *fn;
	void *userdata;
	bool dead;
	struct loop_timer *next; /* all timers, unsorted */
};

struct loop_wake {
	struct loop_src src;
	int fd;
	loop_wake_fn *fn;
};

/*
 * inotify watches an inode, found through the path once. The path is looked at again (stat) on
 * an event for its name in the parent directory, on a mount table change and every
 * WATCH_VERIFY_USEC; when it leads to another inode than the one watched (a symlink on it
 * swapped, a filesystem mounted over it) or nowhere, the owner gets IN_MOVE_SELF, once.
 */
struct loop_watch {
	struct loop_src src; /* src.dead: freed, no event is delivered to it any more */
	int wd;		     /* the directory's */
	int pwd;	     /* its parent's, for swaps of the name; -1: none */
	uint32_t mask;
	char *path;
	char *name;   /* @path's last component, as the parent's events name it */
	bool present; /* @path led to an inode when last looked at: @dev, @ino */
	dev_t dev;
	ino_t ino;
	loop_watch_fn *fn;
	struct loop_watch *next_watch; /* the loop's live watches */
};

/*
 * One kernel watch of the loop's inotify fd, by watch descriptor. inotify gives every watch of
 * one inode the same descriptor and one mask: each loop_watch (and each parent watch) on it
 * holds a reference, the kernel watch is removed when the last goes, and its mask is the union
 * of all that were asked (IN_MASK_ADD), each watch filtering the events for its own.
 */
struct loop_wd {
	int wd;
	unsigned refs;
};

struct loop_sig {
	loop_signal_fn *fn;
	void *userdata;
};

struct loop {
	int epfd;
	int timerfd;
	usec_t timerfd_when; /* what timerfd is armed for; USEC_INFINITY: disarmed */
	struct loop_src timer_src;
	int sigfd;
	sigset_t sigmask;
	struct loop_src sig_src;
	struct loop_sig sigs[65];
	struct loop_timer *timers;
	unsigned n_dead_timers;
	int inotify_fd; /* one inotify instance for every watch; -1 until the first */
	struct loop_src inotify_src;
	struct loop_wd *wds; /* the kernel watches held, unsorted */
	size_t n_wds, cap_wds;
	struct loop_watch *watches; /* live ones */
	struct loop_timer *verify;  /* checks the watches' paths; NULL until the first watch */
	int mountfd;		    /* /proc/self/mountinfo, EPOLLPRI on a mount change; -1 */
	struct loop_src mount_src;
	struct loop_src *dead; /* freed after the current batch */
	bool in_batch;
	bool exit;
	int exit_code;
};

static int epoll_add(struct loop *l, int fd, uint32_t events, struct loop_src *src)
{
	struct epoll_event ev = { .events = events, .data.ptr = src };

	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

/* A source object of @size bytes whose struct starts with its struct loop_src. */
static void *src_new(struct loop *l, size_t size, enum loop_src_kind kind, void *userdata)
{
	struct loop_src *s = calloc(1, size);

	if (s) {
		s->kind = kind;
		s->loop = l;
		s->userdata = userdata;
	}
	return s;
}

/*
 * Finishes a source that owns @fd (-1: its creation failed, errno says why): adds it to
 * epoll, or on failure frees both. Returns 0 or -errno.
 */
static int src_add_fd(struct loop_src *src, int fd)
{
	int r = fd < 0 ? -errno : epoll_add(src->loop, fd, EPOLLIN, src);

	if (r < 0) {
		fd_close(fd);
		free(src);
	}
	return r;
}

int loop_new(struct loop **ret)
{
	struct loop *l;
	int r;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->timerfd = l->sigfd = l->mountfd = l->inotify_fd = -1;
	l->timerfd_when = USEC_INFINITY;
	sigemptyset(&l->sigmask);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		r = -errno;
		goto fail;
	}
	l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->timerfd < 0) {
		r = -errno;
		goto fail;
	}
	l->timer_src.kind = SRC_TIMERFD;
	r = epoll_add(l, l->timerfd, EPOLLIN, &l->timer_src);
	if (r < 0)
		goto fail;
	*ret = l;
	return 0;
fail:
	loop_free(l);
	return r;
}

static void free_dead(struct loop *l)
{
	while (l->dead) {
		struct loop_src *s = l->dead;

		l->dead = s->next_dead;
		free(s);
	}
	if (l->n_dead_timers) {
		struct loop_timer **p = &l->timers;

		while (*p) {
			struct loop_timer *t = *p;

			if (t->dead) {
				*p = t->next;
				free(t);
			} else {
				p = &t->next;
			}
		}
		l->n_dead_timers = 0;
	}
}

struct loop *loop_free(struct loop *l)
{
	if (!l)
		return NULL;
	free_dead(l);
	while (l->timers) {
		struct loop_timer *t = l->timers;

		l->timers = t->next;
		free(t);
	}
	fd_close(l->sigfd);
	fd_close(l->mountfd);
	fd_close(l->inotify_fd);
	free(l->wds);
	if (!sigisemptyset(&l->sigmask))
		(void)pthread_sigmask(SIG_UNBLOCK, &l->sigmask, NULL);
	fd_close(l->timerfd);
	fd_close(l->epfd);
	free(l);
	return NULL;
}

static void src_kill(struct loop *l, struct loop_src *s)
{
	s->dead = true;
	s->next_dead = l->dead;
	l->dead = s;
	if (!l->in_batch)
		free_dead(l);
}

/* Takes a source that owns @fd out of epoll, closes @fd and frees the source (now or after
   the batch being dispatched). */
static void src_kill_fd(struct loop_src *src, int fd)
{
	(void)epoll_ctl(src->loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	(void)fd_close(fd);
	src_kill(src->loop, src);
}

/* --- io --- */

int loop_io_new(struct loop *l, int fd, uint32_t events, loop_io_fn *fn, void *userdata,
		struct loop_io **ret)
{
	struct loop_io *io = src_new(l, sizeof(*io), SRC_IO, userdata);
	int r;

	if (!io)
		return -ENOMEM;
	io->fd = fd;
	io->events = events;
	io->fn = fn;
	r = epoll_add(l, fd, events, &io->src);
	if (r < 0) {
		free(io);
		return r;
	}
	*ret = io;
	return 0;
}

int loop_io_set_events(struct loop_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = &io->src };

	if (io->events == events)
		return 0;
	if (epoll_ctl(io->src.loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
		return -errno;
	io->events = events;
	return 0;
}

struct loop_io *loop_io_free(struct loop_io *io)
{
	if (!io)
		return NULL;
	/* ENOENT/EBADF only if an owner broke the rule in loop.h: nothing to undo then. */
	(void)epoll_ctl(io->src.loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	src_kill(io->src.loop, &io->src);
	return NULL;
}

/* --- timers --- */

static void timers_rearm(struct loop *l)
{
	usec_t first = USEC_INFINITY;
	struct itimerspec its = { 0 };

	for (struct loop_timer *t = l->timers; t; t = t->next)
		if (!t->dead && t->when < first)
			first = t->when;
	if (first == l->timerfd_when)
		return;
	l->timerfd_when = first;
	if (first != USEC_INFINITY) {
		/* 0 would disarm: an already-due timer fires after 1 ns. */
		if (first == 0)
			first = 1;
		its.it_value.tv_sec = (time_t)(first / USEC_PER_SEC);
		its.it_value.tv_nsec = (long)(first % USEC_PER_SEC) * 1000;
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
	}
	(void)timerfd_settime(l->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

int loop_timer_new(struct loop *l, loop_timer_fn *fn, void *userdata, struct loop_timer **ret)
{
	struct loop_timer *t;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->loop = l;
	t->when = USEC_INFINITY;
	t->fn = fn;
	t->userdata = userdata;
	t->next = l->timers;
	l->timers = t;
	*ret = t;
	return 0;
}

void loop_timer_arm_at(struct loop_timer *t, usec_t when_usec)
{
	t->when = when_usec;
	timers_rearm(t->loop);
}

void loop_timer_arm(struct loop_timer *t, usec_t after_usec)
{
	usec_t now = now_usec();

	loop_timer_arm_at(t,
			  after_usec > USEC_INFINITY - now ? USEC_INFINITY - 1 : now + after_usec);
}

void loop_timer_disarm(struct loop_timer *t)
{
	t->when = USEC_INFINITY;
	timers_rearm(t->loop);
}

bool loop_timer_armed(const struct loop_timer *t)
{
	return t->when != USEC_INFINITY;
}

struct loop_timer *loop_timer_free(struct loop_timer *t)
{
	struct loop *l;

	if (!t)
		return NULL;
	l = t->loop;
	t->dead = true;
	t->when = USEC_INFINITY;
	l->n_dead_timers++;
	if (!l->in_batch)
		free_dead(l);
	timers_rearm(l);
	return NULL;
}

static void timers_dispatch(struct loop *l)
{
	uint64_t expirations;
	usec_t now = now_usec();
	bool again;

	(void)!read(l->timerfd, &expirations, sizeof(expirations));
	l->timerfd_when = USEC_INFINITY;
	/* A callback may arm or free any timer: restart the scan after each one. */
	do {
		again = false;
		for (struct loop_timer *t = l->timers; t; t = t->next) {
			if (t->dead || t->when > now)
				continue;
			t->when = USEC_INFINITY;
			t->fn(t, t->userdata);
			again = true;
			break;
		}
	} while (again && !l->exit);
	timers_rearm(l);
}

/* --- wake --- */

int loop_wake_new(struct loop *l, loop_wake_fn *fn, void *userdata, struct loop_wake **ret)
{
	struct loop_wake *w = src_new(l, sizeof(*w), SRC_WAKE, userdata);
	int r;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r = src_add_fd(&w->src, w->fd);
	if (r < 0)
		return r;
	*ret = w;
	return 0;
}

void loop_wake_signal(struct loop_wake *w)
{
	uint64_t one = 1;

	(void)!write(w->fd, &one, sizeof(one));
}

struct loop_wake *loop_wake_free(struct loop_wake *w)
{
	if (w)
		src_kill_fd(&w->src, w->fd);
	return NULL;
}

/* --- signals --- */

int loop_signal_add(struct loop *l, int signo, loop_signal_fn *fn, void *userdata)
{
	sigset_t one;
	int r;

	if (signo <= 0 || signo >= (int)ELEMENTSOF(l->sigs))
		return -EINVAL;
	if (l->sigs[signo].fn)
		return -EEXIST;
	sigemptyset(&one);
	sigaddset(&one, signo);
	r = pthread_sigmask(SIG_BLOCK, &one, NULL);
	if (r != 0)
		return -r;
	sigaddset(&l->sigmask, signo);
	if (l->sigfd < 0) {
		l->sigfd = signalfd(-1, &l->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
		if (l->sigfd < 0)
			return -errno;
		l->sig_src.kind = SRC_SIGNALFD;
		r = epoll_add(l, l->sigfd, EPOLLIN, &l->sig_src);
		if (r < 0)
			return r;
	} else if (signalfd(l->sigfd, &l->sigmask, 0) < 0) {
		return -errno;
	}
	l->sigs[signo].fn = fn;
	l->sigs[signo].userdata = userdata;
	return 0;
}

static void signals_dispatch(struct loop *l)
{
	struct signalfd_siginfo si;

	while (read(l->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		unsigned s = si.ssi_signo;

		if (s < ELEMENTSOF(l->sigs) && l->sigs[s].fn)
			l->sigs[s].fn(l, (int)s, l->sigs[s].userdata);
	}
}

/* --- inotify --- */

/* Whatever the number of watches, the process holds one inotify instance (the node's root
   processes share fs.inotify.max_user_instances, 128 by default). */
static int inotify_setup(struct loop *l)
{
	int fd, r;

	if (l->inotify_fd >= 0)
		return 0;
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return -errno;
	l->inotify_src.kind = SRC_INOTIFY;
	l->inotify_src.loop = l;
	r = epoll_add(l, fd, EPOLLIN, &l->inotify_src);
	if (r < 0) {
		fd_close(fd);
		return r;
	}
	l->inotify_fd = fd;
	return 0;
}

static struct loop_wd *wd_find(struct loop *l, int wd)
{
	for (size_t i = 0; i < l->n_wds; i++)
		if (l->wds[i].wd == wd)
			return &l->wds[i];
	return NULL;
}

/*
 * Adds @mask to the kernel watch of @path (one made when the inode has none) and takes a
 * reference on it. Returns the watch descriptor, or -errno.
 */
static int wd_add(struct loop *l, const char *path, uint32_t mask)
{
	struct loop_wd *e;
	int wd;

	if (l->n_wds == l->cap_wds) {
		size_t cap = l->cap_wds ? l->cap_wds * 2 : 8;
		struct loop_wd *n = reallocarray(l->wds, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		l->wds = n;
		l->cap_wds = cap;
	}
	/* Without IN_MASK_ADD a second watch of the inode would replace the first one's mask. */
	wd = inotify_add_watch(l->inotify_fd, path, mask | IN_MASK_ADD);
	if (wd < 0)
		return -errno;
	e = wd_find(l, wd);
	if (!e) {
		e = &l->wds[l->n_wds++];
		e->wd = wd;
		e->refs = 0;
	}
	e->refs++;
	return wd;
}

/* Drops a reference taken by wd_add(); the last one removes the kernel watch. */
static void wd_put(struct loop *l, int wd)
{
	struct loop_wd *e = wd < 0 ? NULL : wd_find(l, wd);

	if (!e || --e->refs > 0)
		return;
	/* EINVAL when the kernel dropped it already (the directory deleted, unmounted). */
	(void)inotify_rm_watch(l->inotify_fd, wd);
	*e = l->wds[--l->n_wds];
}

/* What @w's path leads to now (not through a last symlink with IN_DONT_FOLLOW). */
static int watch_stat(const struct loop_watch *w, struct stat *st)
{
	return (w->mask & IN_DONT_FOLLOW ? lstat(w->path, st) : stat(w->path, st)) < 0 ? -errno : 0;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * Adds the directory's inotify watch and notes the inode it watches. The path is looked at
 * before and after: equal, the watch is on that inode; else it was swapped meanwhile, and the
 * watch is made again. After three tries the watch is kept, on an inode not known: an
 * impossible one (0) is noted, so the next look at the path says IN_MOVE_SELF and the owner
 * makes it again.
 */
static int watch_add(struct loop_watch *w)
{
	struct stat a, b;

	for (int i = 0;; i++) {
		bool have_a = watch_stat(w, &a) == 0, same;
		int wd = wd_add(w->src.loop, w->path, w->mask);

		if (wd < 0)
			return wd;
		same = have_a && watch_stat(w, &b) == 0 && same_inode(&a, &b);
		if (same || i == 2) {
			w->wd = wd;
			w->present = true;
			w->dev = same ? b.st_dev : 0;
			w->ino = same ? b.st_ino : 0;
			return 0;
		}
		wd_put(w->src.loop, wd);
	}
}

/*
 * Watches @w's parent directory for its name, best effort (the timer and the mount table still
 * catch a swap): not for "/", ".", "..", nor when the parent is the directory itself.
 */
static void watch_add_parent(struct loop_watch *w)
{
	char *parent = NULL;
	struct stat pst, st;

	if (path_split(w->path, &parent, &w->name) < 0 || !parent || !*w->name ||
	    streq(w->name, ".") || streq(w->name, ".."))
		goto out;
	if (stat(parent, &pst) < 0 || !S_ISDIR(pst.st_mode) ||
	    (watch_stat(w, &st) == 0 && same_inode(&pst, &st)))
		goto out;
	w->pwd = wd_add(w->src.loop, parent, PARENT_MASK);
	if (w->pwd < 0)
		w->pwd = -1;
out:
	free(parent);
}

/* True, once, when @w's path leads to another inode than the one watched, or to none. */
static bool watch_moved(struct loop_watch *w)
{
	struct stat st;
	bool have = watch_stat(w, &st) == 0;

	if (have == w->present && (!have || (st.st_dev == w->dev && st.st_ino == w->ino)))
		return false;
	w->present = have;
	w->dev = have ? st.st_dev : 0;
	w->ino = have ? st.st_ino : 0;
	return true;
}

/*
 * Checks every watch's path; a callback may free or create watches, so the scan starts over
 * after each one told. Each is told once per change; a path swapped again and again while we
 * look is left to the next check after 64 tellings.
 */
static void watches_verify(struct loop *l)
{
	unsigned budget = 64;
	struct loop_watch *w;

again:
	for (w = l->watches; w && !l->exit; w = w->next_watch)
		if (watch_moved(w)) {
			w->fn(w, "", IN_MOVE_SELF, w->src.userdata);
			if (--budget > 0)
				goto again;
			return;
		}
}

static void on_verify(struct loop_timer *t, void *userdata)
{
	struct loop *l = userdata;

	watches_verify(l);
	if (l->watches)
		loop_timer_arm(t, WATCH_VERIFY_USEC);
}

/*
 * What every watch shares, made with the first: the inotify fd, the timer, and the mount
 * table's fd (poll() on /proc/self/mountinfo says EPOLLPRI when a mount is added or removed;
 * without /proc only the timer is left). Returns 0, -ENOMEM or -errno of inotify_init1().
 */
static int watches_setup(struct loop *l)
{
	int r;

	r = inotify_setup(l);
	if (r < 0)
		return r;
	if (!l->verify) {
		r = loop_timer_new(l, on_verify, l, &l->verify);
		if (r < 0) {
			l->verify = NULL;
			return r;
		}
	}
	if (l->mountfd < 0) {
		l->mountfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		l->mount_src.kind = SRC_MOUNTS;
		l->mount_src.loop = l;
		if (l->mountfd >= 0 && epoll_add(l, l->mountfd, EPOLLPRI, &l->mount_src) < 0)
			l->mountfd = fd_close(l->mountfd);
	}
	return 0;
}

int loop_watch_new(struct loop *l, const char *path, uint32_t mask, loop_watch_fn *fn,
		   void *userdata, struct loop_watch **ret)
{
	struct loop_watch *w;
	int r;

	r = watches_setup(l);
	if (r < 0)
		return r;
	w = src_new(l, sizeof(*w), SRC_WATCH, userdata);
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->mask = mask;
	w->wd = w->pwd = -1;
	w->path = strdup(path);
	if (!w->path) {
		free(w);
		return -ENOMEM;
	}
	/* The parent first: a swap after the directory's own watch is then an event. */
	watch_add_parent(w);
	r = watch_add(w);
	if (r < 0) {
		wd_put(l, w->pwd);
		free(w->path);
		free(w->name);
		free(w);
		return r;
	}
	w->next_watch = l->watches;
	l->watches = w;
	if (!loop_timer_armed(l->verify))
		loop_timer_arm(l->verify, WATCH_VERIFY_USEC);
	*ret = w;
	return 0;
}

struct loop_watch *loop_watch_free(struct loop_watch *w)
{
	struct loop *l;

	if (!w)
		return NULL;
	l = w->src.loop;
	for (struct loop_watch **p = &l->watches; *p; p = &(*p)->next_watch)
		if (*p == w) {
			*p = w->next_watch;
			break;
		}
	if (!l->watches)
		loop_timer_disarm(l->verify);
	/* Another watch of the same inode keeps the kernel's watch, and its events. */
	wd_put(l, w->wd);
	wd_put(l, w->pwd);
	w->wd = w->pwd = -1;
	w->path = mfree(w->path);
	w->name = mfree(w->name);
	/* A dispatch may be walking the list through @w: it stays in memory until the batch ends. */
	src_kill(l, &w->src);
	return NULL;
}

/* Events the kernel sends whatever the mask asked; every watch of the descriptor gets them. */
#define ALWAYS_MASK (IN_IGNORED | IN_UNMOUNT | IN_Q_OVERFLOW)

/* One event for @w: the directory's go to the owner, the parent's only make us look. */
static void watch_event(struct loop_watch *w, const struct inotify_event *ev)
{
	if (w->pwd >= 0 && ev->wd == w->pwd) {
		if (ev->mask & IN_IGNORED) {
			wd_put(w->src.loop, w->pwd); /* the parent went; the timer still looks */
			w->pwd = -1;
		} else if (ev->len && w->name && streq(ev->name, w->name) && watch_moved(w)) {
			w->fn(w, "", IN_MOVE_SELF, w->src.userdata);
		}
		if (w->src.dead || ev->wd != w->wd)
			return;
	}
	if (ev->wd != w->wd && !(ev->mask & IN_Q_OVERFLOW))
		return;
	/* The kernel's mask is the union of every watch of the inode: only @w's own. */
	if (!(ev->mask & (w->mask & IN_ALL_EVENTS)) && !(ev->mask & ALWAYS_MASK))
		return;
	w->fn(w, ev->len ? ev->name : "", ev->mask, w->src.userdata);
	/* Lost events may have been the parent's too. */
	if ((ev->mask & IN_Q_OVERFLOW) && !w->src.dead && watch_moved(w))
		w->fn(w, "", IN_MOVE_SELF, w->src.userdata);
}

/*
 * Every event of the loop's inotify fd to each watch of its descriptor (an overflow to all).
 * A callback may free any watch: a freed one is marked dead, stays in memory until the batch
 * ends (so the walk can go on through it) and is called no more. A watch made by a callback
 * is at the head of the list, so it gets the events read after it, of its inode, as its own.
 */
static void inotify_dispatch(struct loop *l)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(l->inotify_fd, buf, sizeof(buf));

		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			for (struct loop_watch *w = l->watches; w; w = w->next_watch)
				if (!w->src.dead)
					watch_event(w, ev);
		}
	}
}

/* --- running --- */

int loop_run_once(struct loop *l, usec_t timeout_usec)
{
	struct epoll_event evs[64];
	int n, ms;

	if (timeout_usec == USEC_INFINITY)
		ms = -1;
	else if (timeout_usec / USEC_PER_MSEC > (usec_t)60 * 60 * 1000)
		ms = 60 * 60 * 1000;
	else
		ms = (int)((timeout_usec + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
	n = epoll_wait(l->epfd, evs, (int)ELEMENTSOF(evs), ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	l->in_batch = true;
	for (int i = 0; i < n && !l->exit; i++) {
		struct loop_src *s = evs[i].data.ptr;

		if (s->dead)
			continue;
		switch (s->kind) {
		case SRC_IO: {
			struct loop_io *io = (struct loop_io *)s;

			io->fn(io, io->fd, evs[i].events, io->src.userdata);
			break;
		}
		case SRC_TIMERFD:
			timers_dispatch(l);
			break;
		case SRC_SIGNALFD:
			signals_dispatch(l);
			break;
		case SRC_WAKE: {
			struct loop_wake *w = (struct loop_wake *)s;
			uint64_t v;

			(void)!read(w->fd, &v, sizeof(v));
			w->fn(w, w->src.userdata);
			break;
		}
		case SRC_INOTIFY:
			inotify_dispatch(l);
			break;
		case SRC_MOUNTS:
			watches_verify(l);
			break;
		case SRC_WATCH: /* never in epoll */
			break;
		}
	}
	l->in_batch = false;
	free_dead(l);
	return 0;
}

int loop_run(struct loop *l)
{
	while (!l->exit) {
		int r = loop_run_once(l, USEC_INFINITY);

		if (r < 0)
			return r;
	}
	return l->exit_code;
}

void loop_exit(struct loop *l, int code)
{
	l->exit = true;
	l->exit_code = code;
}

bool loop_exiting(const struct loop *l)
{
	return l->exit;
}
