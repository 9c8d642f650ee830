#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

enum loop_src_kind {
	SRC_IO,
	SRC_TIMERFD,
	SRC_SIGNALFD,
	SRC_WAKE,
	SRC_WATCH,
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

struct loop_watch {
	struct loop_src src;
	int fd;
	loop_watch_fn *fn;
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
	l->timerfd = l->sigfd = -1;
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
	/* The fd may already be closed by its owner; ENOENT/EBADF are fine then. */
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

int loop_watch_new(struct loop *l, const char *path, uint32_t mask, loop_watch_fn *fn,
		   void *userdata, struct loop_watch **ret)
{
	struct loop_watch *w = src_new(l, sizeof(*w), SRC_WATCH, userdata);
	int r;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd >= 0 && inotify_add_watch(w->fd, path, mask) < 0)
		w->fd = fd_close(w->fd); /* errno kept */
	r = src_add_fd(&w->src, w->fd);
	if (r < 0)
		return r;
	*ret = w;
	return 0;
}

struct loop_watch *loop_watch_free(struct loop_watch *w)
{
	if (w)
		src_kill_fd(&w->src, w->fd);
	return NULL;
}

static void watch_dispatch(struct loop_watch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));

		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (w->src.dead)
				return;
			w->fn(w, ev->len ? ev->name : "", ev->mask, w->src.userdata);
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
		case SRC_WATCH:
			watch_dispatch((struct loop_watch *)s);
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
