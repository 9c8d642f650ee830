#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop.h"
#include "unit.h"

static int order[8];
static int n_order;

static void record_timer(struct loop_timer *t, void *userdata)
{
	order[n_order++] = (int)(intptr_t)userdata;
}

static void test_timers_fire_in_order(void **state)
{
	struct loop *l = NULL;
	struct loop_timer *t[3];
	usec_t start;

	assert_int_equal(loop_new(&l), 0);
	n_order = 0;
	for (int i = 0; i < 3; i++)
		assert_int_equal(loop_timer_new(l, record_timer, (void *)(intptr_t)i, &t[i]), 0);
	start = now_usec(); /* before arming: a slow machine (qemu) arms later than this */
	loop_timer_arm(t[0], 30 * USEC_PER_MSEC);
	loop_timer_arm(t[1], 10 * USEC_PER_MSEC);
	loop_timer_arm(t[2], 20 * USEC_PER_MSEC);
	assert_true(loop_timer_armed(t[0]));
	while (n_order < 3 && now_usec() - start < USEC_PER_SEC)
		assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 2);
	assert_int_equal(order[2], 0);
	assert_true(now_usec() - start >= 30 * USEC_PER_MSEC);
	assert_false(loop_timer_armed(t[0]));
	for (int i = 0; i < 3; i++)
		loop_timer_free(t[i]);
	loop_free(l);
}

static struct loop_timer *victim;

static void free_other_timer(struct loop_timer *t, void *userdata)
{
	victim = loop_timer_free(victim);
	order[n_order++] = 7;
}

static void test_timer_freed_in_callback_does_not_fire(void **state)
{
	struct loop *l = NULL;
	struct loop_timer *a = NULL;

	assert_int_equal(loop_new(&l), 0);
	n_order = 0;
	assert_int_equal(loop_timer_new(l, free_other_timer, NULL, &a), 0);
	assert_int_equal(loop_timer_new(l, record_timer, (void *)(intptr_t)5, &victim), 0);
	loop_timer_arm(a, 0);
	loop_timer_arm(victim, 5 * USEC_PER_MSEC);
	for (int i = 0; i < 5; i++)
		assert_int_equal(loop_run_once(l, 20 * USEC_PER_MSEC), 0);
	/* The first timer freed the second before it was due: it must never run. */
	assert_int_equal(n_order, 1);
	assert_int_equal(order[0], 7);
	assert_null(victim);
	loop_timer_free(a);
	loop_free(l);
}

static void timer_disarmed_never_fires(void **state)
{
	struct loop *l = NULL;
	struct loop_timer *t = NULL;

	assert_int_equal(loop_new(&l), 0);
	n_order = 0;
	assert_int_equal(loop_timer_new(l, record_timer, NULL, &t), 0);
	loop_timer_arm(t, 5 * USEC_PER_MSEC);
	loop_timer_disarm(t);
	assert_int_equal(loop_run_once(l, 30 * USEC_PER_MSEC), 0);
	assert_int_equal(n_order, 0);
	loop_timer_free(t);
	loop_free(l);
}

struct io_state {
	int reads;
	char got[16];
	struct loop_io *io;
};

static void on_readable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct io_state *s = userdata;
	ssize_t n;

	assert_true(events & EPOLLIN);
	n = read(fd, s->got, sizeof(s->got) - 1);
	assert_true(n > 0);
	s->got[n] = 0;
	s->reads++;
	/* Freeing ourselves inside the callback must be safe. */
	s->io = loop_io_free(s->io);
}

static void test_io_readable_and_self_free(void **state)
{
	struct loop *l = NULL;
	struct io_state s = { 0 };
	int p[2];

	assert_int_equal(pipe(p), 0);
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_io_new(l, p[0], EPOLLIN, on_readable, &s, &s.io), 0);
	assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(s.reads, 0);
	assert_int_equal(write(p[1], "hello", 5), 5);
	assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(s.reads, 1);
	assert_string_equal(s.got, "hello");
	assert_null(s.io);
	assert_int_equal(write(p[1], "again", 5), 5);
	assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(s.reads, 1);
	close(p[0]);
	close(p[1]);
	loop_free(l);
}

static int wakes;

static void on_wake(struct loop_wake *w, void *userdata)
{
	wakes++;
	if (userdata)
		loop_exit(userdata, 42);
}

static void *wake_thread(void *arg)
{
	usleep(20000);
	loop_wake_signal(arg);
	return NULL;
}

static void test_wake_from_thread_exits_loop(void **state)
{
	struct loop *l = NULL;
	struct loop_wake *w = NULL;
	pthread_t th;

	wakes = 0;
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_wake_new(l, on_wake, l, &w), 0);
	assert_int_equal(pthread_create(&th, NULL, wake_thread, w), 0);
	assert_int_equal(loop_run(l), 42);
	assert_true(loop_exiting(l));
	pthread_join(th, NULL);
	assert_int_equal(wakes, 1);
	loop_wake_free(w);
	loop_free(l);
}

static void *wake_twice_thread(void *arg)
{
	loop_wake_signal(arg);
	loop_wake_signal(arg);
	return NULL;
}

/*
 * Two signals raised (by another thread, joined) before the loop runs give one callback. The
 * callback does not stop the loop: the loop runs until it is idle and the count is checked
 * after, so a second callback would be seen.
 */
static void test_wake_signals_collapse(void **state)
{
	struct loop *l = NULL;
	struct loop_wake *w = NULL;
	pthread_t th;

	wakes = 0;
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_wake_new(l, on_wake, NULL, &w), 0);
	assert_int_equal(pthread_create(&th, NULL, wake_twice_thread, w), 0);
	pthread_join(th, NULL);
	assert_int_equal(wakes, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(wakes, 1);
	/* And a signal after the callback is a new wake-up. */
	loop_wake_signal(w);
	for (int i = 0; i < 3; i++)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_int_equal(wakes, 2);
	loop_wake_free(w);
	loop_free(l);
}

static int got_signal;

static void on_signal(struct loop *l, int signo, void *userdata)
{
	got_signal = signo;
}

static void test_signal_through_signalfd(void **state)
{
	struct loop *l = NULL;

	got_signal = 0;
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_signal_add(l, SIGUSR1, on_signal, NULL), 0);
	assert_int_equal(loop_signal_add(l, SIGUSR1, on_signal, NULL), -EEXIST);
	assert_int_equal(loop_signal_add(l, 0, on_signal, NULL), -EINVAL);
	assert_int_equal(kill(getpid(), SIGUSR1), 0);
	assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(got_signal, SIGUSR1);
	loop_free(l);
}

static char seen_name[64];
static uint32_t seen_mask;

static void on_watch(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	(void)snprintf(seen_name, sizeof(seen_name), "%s", name);
	seen_mask |= mask;
}

static void test_inotify_create_and_delete(void **state)
{
	char dir[] = "/tmp/test-loop-XXXXXX", file[128];
	struct loop *l = NULL;
	struct loop_watch *w = NULL;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_watch_new(l, "/nonexistent/dir", IN_CREATE, on_watch, NULL, &w),
			 -ENOENT);
	assert_int_equal(loop_watch_new(l, dir, IN_CREATE | IN_DELETE, on_watch, NULL, &w), 0);
	(void)snprintf(file, sizeof(file), "%s/kubelet.sock", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	(void)fclose(f);
	assert_int_equal(unlink(file), 0);
	assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_string_equal(seen_name, "kubelet.sock");
	assert_true(seen_mask & IN_CREATE);
	assert_true(seen_mask & IN_DELETE);
	loop_watch_free(w);
	loop_free(l);
	rmdir(dir);
}

/*
 * A watch freed and re-created from its own callback: the new inotify fd takes the number the
 * old one had, and an event already queued on it when the callback returns must reach the new
 * watch (the dispatcher used to read the freed watch's fd again and swallow it).
 */
struct recycle {
	struct loop *l;
	char dir2[64];
	struct loop_watch *w1, *w2;
	int fd1;
	int first_calls, second_calls;
	char second_name[64];
	int r;
};

static void on_second(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	struct recycle *rc = userdata;

	rc->second_calls++;
	(void)snprintf(rc->second_name, sizeof(rc->second_name), "%s", name);
}

static void on_first(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	struct recycle *rc = userdata;
	char file[128];
	FILE *f;

	rc->first_calls++;
	rc->w1 = loop_watch_free(rc->w1);
	rc->r = loop_watch_new(rc->l, rc->dir2, IN_CREATE, on_second, rc, &rc->w2);
	if (rc->r < 0)
		return;
	/* Queued on the new watch's fd before this callback returns. */
	(void)snprintf(file, sizeof(file), "%s/after", rc->dir2);
	f = fopen(file, "w");
	if (f)
		(void)fclose(f);
}

static void test_watch_recreated_from_callback(void **state)
{
	char dir1[] = "/tmp/test-loop-XXXXXX", file[128];
	struct recycle rc = { .r = 0 };
	FILE *f;

	assert_non_null(mkdtemp(dir1));
	(void)snprintf(rc.dir2, sizeof(rc.dir2), "%s/two", dir1);
	assert_int_equal(mkdir(rc.dir2, 0755), 0);
	assert_int_equal(loop_new(&rc.l), 0);
	assert_int_equal(loop_watch_new(rc.l, dir1, IN_CREATE, on_first, &rc, &rc.w1), 0);
	(void)snprintf(file, sizeof(file), "%s/before", dir1);
	f = fopen(file, "w");
	assert_non_null(f);
	(void)fclose(f);
	/* Bounded only for the failure case: the event is there at once when it works. */
	for (int i = 0; i < 20 && rc.second_calls == 0; i++)
		assert_int_equal(loop_run_once(rc.l, 500 * USEC_PER_MSEC), 0);
	assert_int_equal(rc.r, 0);
	assert_int_equal(rc.first_calls, 1);
	assert_int_equal(rc.second_calls, 1);
	assert_string_equal(rc.second_name, "after");
	loop_watch_free(rc.w2);
	loop_free(rc.l);
	(void)unlink(file);
	(void)snprintf(file, sizeof(file), "%s/after", rc.dir2);
	(void)unlink(file);
	(void)rmdir(rc.dir2);
	(void)rmdir(dir1);
}

/* The loop says IN_MOVE_SELF when the path of a watch leads to another directory. */
struct swap {
	uint32_t mask;
	int calls;
	char name[64];
};

static void on_swap(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	struct swap *s = userdata;

	s->calls++;
	s->mask |= mask;
	(void)snprintf(s->name, sizeof(s->name), "%s", name);
}

static void run_until_moved(struct loop *l, struct swap *s)
{
	for (int i = 0; i < 20 && !(s->mask & IN_MOVE_SELF); i++)
		assert_int_equal(loop_run_once(l, 500 * USEC_PER_MSEC), 0);
}

static void test_watch_symlink_swapped(void **state)
{
	char base[] = "/tmp/test-loop-XXXXXX", a[96], b[96], cur[96], tmp[96], file[128];
	struct loop *l = NULL;
	struct loop_watch *w = NULL;
	struct swap s = { 0 };
	FILE *f;

	assert_non_null(mkdtemp(base));
	(void)snprintf(a, sizeof(a), "%s/a", base);
	(void)snprintf(b, sizeof(b), "%s/b", base);
	(void)snprintf(cur, sizeof(cur), "%s/cur", base);
	(void)snprintf(tmp, sizeof(tmp), "%s/cur.tmp", base);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	assert_int_equal(symlink("a", cur), 0);
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_watch_new(l, cur, IN_CREATE | IN_ONLYDIR, on_swap, &s, &w), 0);

	/* The deploy tools' swap: a new symlink renamed over the old one. */
	assert_int_equal(symlink("b", tmp), 0);
	assert_int_equal(rename(tmp, cur), 0);
	run_until_moved(l, &s);
	assert_true(s.mask & IN_MOVE_SELF);
	assert_string_equal(s.name, "");
	assert_int_equal(s.calls, 1);

	/* Said once: the owner that keeps the stale watch is not told again and again. */
	(void)snprintf(file, sizeof(file), "%s/x", a);
	f = fopen(file, "w");
	assert_non_null(f);
	(void)fclose(f);
	assert_int_equal(loop_run_once(l, 100 * USEC_PER_MSEC), 0);
	assert_int_equal(s.calls, 2); /* the IN_CREATE in a, still watched */
	assert_false(s.mask & IN_DELETE_SELF);
	(void)unlink(file);

	/* A watch made again follows the new target. */
	w = loop_watch_free(w);
	s = (struct swap){ 0 };
	assert_int_equal(loop_watch_new(l, cur, IN_CREATE | IN_ONLYDIR, on_swap, &s, &w), 0);
	(void)snprintf(file, sizeof(file), "%s/y", b);
	f = fopen(file, "w");
	assert_non_null(f);
	(void)fclose(f);
	for (int i = 0; i < 20 && s.calls == 0; i++)
		assert_int_equal(loop_run_once(l, 500 * USEC_PER_MSEC), 0);
	assert_string_equal(s.name, "y");
	(void)unlink(file);

	/* The symlink removed: the path leads nowhere, which is a move too. */
	s = (struct swap){ 0 };
	assert_int_equal(unlink(cur), 0);
	run_until_moved(l, &s);
	assert_true(s.mask & IN_MOVE_SELF);

	loop_watch_free(w);
	loop_free(l);
	(void)rmdir(a);
	(void)rmdir(b);
	(void)rmdir(base);
}

/*
 * Every inotify_add_watch() of loop.c lands here (this definition comes before libc's): on
 * swap_path, the symlink is pointed at the other directory right after the watch is added, so
 * the path leads elsewhere each time watch_add() looks again.
 */
static const char *swap_path;
static char swap_targets[2][96];
static int n_swaps;

int inotify_add_watch(int fd, const char *name, uint32_t mask)
{
	int wd = (int)syscall(SYS_inotify_add_watch, fd, name, mask);
	char tmp[128];

	if (wd >= 0 && swap_path && streq(name, swap_path)) {
		(void)snprintf(tmp, sizeof(tmp), "%s.tmp", swap_path);
		assert_int_equal(symlink(swap_targets[++n_swaps % 2], tmp), 0);
		assert_int_equal(rename(tmp, swap_path), 0);
	}
	return wd;
}

/*
 * The path swapped between the looks of each of watch_add()'s three tries: the watch kept is on
 * a directory the path no longer leads to, and the loop says IN_MOVE_SELF at once (a swap is
 * an event in the parent) instead of taking the last look for the inode watched.
 */
static void test_watch_swapped_while_added(void **state)
{
	char base[] = "/tmp/test-loop-XXXXXX", cur[96];
	struct loop *l = NULL;
	struct loop_watch *w = NULL;
	struct swap s = { 0 };

	assert_non_null(mkdtemp(base));
	(void)snprintf(swap_targets[0], sizeof(swap_targets[0]), "%s/a", base);
	(void)snprintf(swap_targets[1], sizeof(swap_targets[1]), "%s/b", base);
	(void)snprintf(cur, sizeof(cur), "%s/cur", base);
	assert_int_equal(mkdir(swap_targets[0], 0755), 0);
	assert_int_equal(mkdir(swap_targets[1], 0755), 0);
	assert_int_equal(symlink(swap_targets[0], cur), 0);
	assert_int_equal(loop_new(&l), 0);
	swap_path = cur;
	n_swaps = 0;
	assert_int_equal(loop_watch_new(l, cur, IN_CREATE | IN_ONLYDIR, on_swap, &s, &w), 0);
	swap_path = NULL;
	assert_int_equal(n_swaps, 3);

	run_until_moved(l, &s);
	assert_true(s.mask & IN_MOVE_SELF);
	assert_string_equal(s.name, "");

	loop_watch_free(w);
	loop_free(l);
	(void)unlink(cur);
	(void)rmdir(swap_targets[0]);
	(void)rmdir(swap_targets[1]);
	(void)rmdir(base);
}

/* The process's inotify instances: the fds that are anon_inode:inotify. */
static int count_inotify_fds(void)
{
	char link[64], target[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t len;

		(void)snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		if (streq(target, "anon_inode:inotify"))
			n++;
	}
	return n;
}

/* One inotify instance for the loop, whatever the number of watches (the node has 128). */
static void test_watches_share_one_inotify_instance(void **state)
{
	char base[] = "/tmp/test-loop-XXXXXX", dir[64];
	struct loop_watch *w[40] = { NULL };
	struct loop *l = NULL;
	int before = count_inotify_fds();

	assert_non_null(mkdtemp(base));
	assert_int_equal(loop_new(&l), 0);
	for (size_t i = 0; i < ELEMENTSOF(w); i++) {
		(void)snprintf(dir, sizeof(dir), "%s/%zu", base, i % 20);
		(void)mkdir(dir, 0755);
		assert_int_equal(loop_watch_new(l, dir, IN_CREATE, on_watch, NULL, &w[i]), 0);
	}
	assert_int_equal(count_inotify_fds(), before + 1);
	for (size_t i = 0; i < ELEMENTSOF(w); i++)
		w[i] = loop_watch_free(w[i]);
	loop_free(l);
	assert_int_equal(count_inotify_fds(), before);
	for (int i = 0; i < 20; i++) {
		(void)snprintf(dir, sizeof(dir), "%s/%d", base, i);
		(void)rmdir(dir);
	}
	(void)rmdir(base);
}

struct counted {
	int calls;
	uint32_t mask;
	char name[64];
	struct loop_watch **victim; /* freed by this watch's callback */
};

static void on_counted(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	struct counted *c = userdata;

	c->calls++;
	c->mask |= mask;
	(void)snprintf(c->name, sizeof(c->name), "%s", name);
	if (c->victim)
		*c->victim = loop_watch_free(*c->victim);
}

static void touch(const char *dir, const char *name)
{
	char p[128];
	FILE *f;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	(void)fclose(f);
}

static void run_until(struct loop *l, const int *calls, int want)
{
	/* Bounded only for the failure case: the events are there at once when it works. */
	for (int i = 0; i < 20 && *calls < want; i++)
		assert_int_equal(loop_run_once(l, 500 * USEC_PER_MSEC), 0);
}

/*
 * Two watches of one directory share inotify's descriptor: both get its events, each only the
 * ones it asked for, and freeing one leaves the other's kernel watch in place.
 */
static void test_watches_of_one_directory(void **state)
{
	char dir[] = "/tmp/test-loop-XXXXXX", p[128];
	struct counted a = { 0 }, b = { 0 };
	struct loop_watch *wa = NULL, *wb = NULL;
	struct loop *l = NULL;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_watch_new(l, dir, IN_CREATE, on_counted, &a, &wa), 0);
	assert_int_equal(loop_watch_new(l, dir, IN_DELETE, on_counted, &b, &wb), 0);
	touch(dir, "one");
	(void)snprintf(p, sizeof(p), "%s/one", dir);
	assert_int_equal(unlink(p), 0);
	run_until(l, &b.calls, 1);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.mask, IN_CREATE); /* not b's IN_DELETE */
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.mask, IN_DELETE);
	assert_string_equal(b.name, "one");

	wa = loop_watch_free(wa);
	touch(dir, "two");
	(void)snprintf(p, sizeof(p), "%s/two", dir);
	assert_int_equal(unlink(p), 0);
	run_until(l, &b.calls, 2);
	assert_int_equal(b.calls, 2);
	assert_string_equal(b.name, "two");
	assert_int_equal(a.calls, 1);

	/* And the other way round: the first freed last. */
	assert_int_equal(loop_watch_new(l, dir, IN_CREATE, on_counted, &a, &wa), 0);
	wb = loop_watch_free(wb);
	touch(dir, "three");
	run_until(l, &a.calls, 2);
	assert_int_equal(a.calls, 2);
	assert_string_equal(a.name, "three");
	loop_watch_free(wa);
	loop_free(l);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s/three", dir);
	(void)unlink(p);
	(void)rmdir(dir);
}

/*
 * Events for two watches read in one batch: the first callback frees the other watch, which is
 * not called for its event already read (its memory stays valid while the batch runs).
 */
static void test_watch_freed_by_another_in_batch(void **state)
{
	char base[] = "/tmp/test-loop-XXXXXX", d1[64], d2[64], p[128];
	struct counted a = { 0 }, b = { 0 };
	struct loop_watch *wa = NULL, *wb = NULL;
	struct loop *l = NULL;

	assert_non_null(mkdtemp(base));
	(void)snprintf(d1, sizeof(d1), "%s/a", base);
	(void)snprintf(d2, sizeof(d2), "%s/b", base);
	assert_int_equal(mkdir(d1, 0755), 0);
	assert_int_equal(mkdir(d2, 0755), 0);
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(loop_watch_new(l, d1, IN_CREATE, on_counted, &a, &wa), 0);
	assert_int_equal(loop_watch_new(l, d2, IN_CREATE, on_counted, &b, &wb), 0);
	a.victim = &wb;
	/* a's event first, then b's, in the same read. */
	touch(d1, "x");
	touch(d2, "y");
	assert_int_equal(loop_run_once(l, 500 * USEC_PER_MSEC), 0);
	assert_int_equal(a.calls, 1);
	assert_null(wb);
	assert_int_equal(b.calls, 0);
	/* Both on one directory: the same descriptor, the same event. */
	b = (struct counted){ 0 };
	assert_int_equal(loop_watch_new(l, d1, IN_CREATE, on_counted, &b, &wb), 0);
	b.victim = &wa; /* b is the newer, so the first called */
	touch(d1, "z");
	assert_int_equal(loop_run_once(l, 500 * USEC_PER_MSEC), 0);
	assert_int_equal(b.calls, 1);
	assert_null(wa);
	assert_int_equal(a.calls, 1);
	loop_watch_free(wb);
	loop_free(l);
	(void)snprintf(p, sizeof(p), "%s/x", d1);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s/z", d1);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s/y", d2);
	(void)unlink(p);
	(void)rmdir(d1);
	(void)rmdir(d2);
	(void)rmdir(base);
}

/* In a child with its own mount namespace: 0 when the tmpfs mount was reported, 77 skipped. */
static int mount_child(const char *dir)
{
	struct loop *l = NULL;
	struct loop_watch *w = NULL;
	struct swap s = { 0 };

	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 77;
	if (loop_new(&l) < 0 || loop_watch_new(l, dir, IN_CREATE | IN_ONLYDIR, on_swap, &s, &w) < 0)
		return 1;
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") < 0)
		return 77;
	for (int i = 0; i < 20 && !(s.mask & IN_MOVE_SELF); i++)
		if (loop_run_once(l, 500 * USEC_PER_MSEC) < 0)
			return 2;
	if (!(s.mask & IN_MOVE_SELF))
		return 3;
	/* Unmounted: back to the directory underneath, the watch on the tmpfs is gone. */
	w = loop_watch_free(w);
	s = (struct swap){ 0 };
	if (loop_watch_new(l, dir, IN_CREATE | IN_ONLYDIR, on_swap, &s, &w) < 0 || umount(dir) < 0)
		return 4;
	for (int i = 0; i < 20 && !(s.mask & (IN_MOVE_SELF | IN_UNMOUNT)); i++)
		if (loop_run_once(l, 500 * USEC_PER_MSEC) < 0)
			return 5;
	if (!(s.mask & (IN_MOVE_SELF | IN_UNMOUNT)))
		return 6;
	loop_watch_free(w);
	loop_free(l);
	return 0;
}

static void test_watch_mounted_over(void **state)
{
	char dir[] = "/tmp/test-loop-XXXXXX";
	int status;
	pid_t pid;

	assert_non_null(mkdtemp(dir));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(mount_child(dir));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		print_message("skipped: cannot mount a tmpfs (needs CAP_SYS_ADMIN)\n");
	else
		assert_int_equal(WEXITSTATUS(status), 0);
	(void)rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timers_fire_in_order),
		cmocka_unit_test(test_timer_freed_in_callback_does_not_fire),
		cmocka_unit_test(timer_disarmed_never_fires),
		cmocka_unit_test(test_io_readable_and_self_free),
		cmocka_unit_test(test_wake_from_thread_exits_loop),
		cmocka_unit_test(test_wake_signals_collapse),
		cmocka_unit_test(test_signal_through_signalfd),
		cmocka_unit_test(test_inotify_create_and_delete),
		cmocka_unit_test(test_watch_recreated_from_callback),
		cmocka_unit_test(test_watch_symlink_swapped),
		cmocka_unit_test(test_watch_swapped_while_added),
		cmocka_unit_test(test_watch_mounted_over),
		cmocka_unit_test(test_watches_share_one_inotify_instance),
		cmocka_unit_test(test_watches_of_one_directory),
		cmocka_unit_test(test_watch_freed_by_another_in_batch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
