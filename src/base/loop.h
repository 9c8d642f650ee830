#pragma once

/*
 * The event loop: epoll for fds, one timerfd for every timer, signalfd for signals,
 * eventfd for wake-ups from other threads, one inotify instance for every directory watch
 * (checked again on mount changes, see loop_watch_new()). This is the only
 * module that calls epoll_*. Single-threaded: every callback runs on the loop's thread;
 * only loop_wake_signal() may be called from another thread.
 *
 * Objects (io, timer, wake, watch) are owned by their creator, who frees them with the
 * matching _free(). Freeing an object from inside any callback is safe: memory is released
 * once the current epoll batch is done.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "util.h"

struct loop;
struct loop_io;
struct loop_timer;
struct loop_wake;
struct loop_watch;

/* @events is the epoll mask seen (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). */
typedef void loop_io_fn(struct loop_io *io, int fd, uint32_t events, void *userdata);
typedef void loop_timer_fn(struct loop_timer *t, void *userdata);
typedef void loop_wake_fn(struct loop_wake *w, void *userdata);
typedef void loop_signal_fn(struct loop *l, int signo, void *userdata);
/* @name is the file name inside the watched directory (may be empty), @mask inotify's. */
typedef void loop_watch_fn(struct loop_watch *w, const char *name, uint32_t mask, void *userdata);

/* Returns 0 or -errno. */
int loop_new(struct loop **ret) WARN_UNUSED;
/* Frees the loop; every object created on it must be freed first. NULL-safe, returns NULL. */
struct loop *loop_free(struct loop *l);

/*
 * Runs until loop_exit(); returns the code given to loop_exit(), or -errno when epoll fails.
 */
int loop_run(struct loop *l);
/* Runs one batch, waiting at most @timeout_usec (USEC_INFINITY: no limit). Returns 0 or -errno. */
int loop_run_once(struct loop *l, usec_t timeout_usec);
void loop_exit(struct loop *l, int code);
bool loop_exiting(const struct loop *l);

/* Watches @fd (not owned) for @events. Returns 0 or -errno. */
int loop_io_new(struct loop *l, int fd, uint32_t events, loop_io_fn *fn, void *userdata,
		struct loop_io **ret) WARN_UNUSED;
/* Changes the event mask. Returns 0 or -errno. */
int loop_io_set_events(struct loop_io *io, uint32_t events);
/*
 * Stops watching (the fd is not closed). Call it before the fd is closed: once closed, its
 * number may already be another thread's new fd. NULL-safe, returns NULL.
 */
struct loop_io *loop_io_free(struct loop_io *io);

/* A one-shot timer, disarmed at creation. Returns 0 or -ENOMEM. */
int loop_timer_new(struct loop *l, loop_timer_fn *fn, void *userdata,
		   struct loop_timer **ret) WARN_UNUSED;
/* (Re)arms @t to fire @after_usec from now (0: on the next iteration). */
void loop_timer_arm(struct loop_timer *t, usec_t after_usec);
/* Arms @t for the absolute CLOCK_MONOTONIC time @when_usec. */
void loop_timer_arm_at(struct loop_timer *t, usec_t when_usec);
void loop_timer_disarm(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);
struct loop_timer *loop_timer_free(struct loop_timer *t);

/*
 * A wake-up that other threads trigger with loop_wake_signal(); several signals before the
 * loop runs collapse into one callback. Returns 0 or -errno.
 */
int loop_wake_new(struct loop *l, loop_wake_fn *fn, void *userdata,
		  struct loop_wake **ret) WARN_UNUSED;
/* Thread-safe and async-signal-safe. */
void loop_wake_signal(struct loop_wake *w);
struct loop_wake *loop_wake_free(struct loop_wake *w);

/*
 * Delivers @signo through the loop's signalfd (the signal is blocked in the calling thread,
 * so call this before starting other threads). One handler per signal. Returns 0 or -errno.
 */
int loop_signal_add(struct loop *l, int signo, loop_signal_fn *fn, void *userdata) WARN_UNUSED;

/*
 * Watches the directory @path with inotify @mask (IN_CREATE, IN_DELETE, ...). inotify follows
 * the path once and then watches that inode; the loop looks at the path again (stat) when its
 * name changes in the parent directory (a symlink renamed over it, removed), when a mount is
 * added or removed anywhere (a filesystem mounted over it: poll on /proc/self/mountinfo), and
 * every 10 s for the rest (a symlink higher up swapped). When the path then leads to another
 * inode, or to none, @fn gets IN_MOVE_SELF with an empty name, once per change: what is
 * watched is no longer what @path names, and the owner frees the watch and makes a new one
 * (IN_MOVE_SELF is what an owner already does for a directory renamed away).
 *
 * Every watch of the loop is on its one inotify fd (made with the first watch, kept until
 * loop_free()): the node's root processes share fs.inotify.max_user_instances (128). Watches
 * of one inode share inotify's descriptor and its mask (the union of theirs): each still gets
 * only the events of its own @mask (and IN_IGNORED, IN_UNMOUNT, IN_Q_OVERFLOW, which every
 * watch gets), and freeing one leaves the others watching. Returns 0, -ENOMEM, or -errno of
 * inotify_init1() (-EMFILE out of instances, first watch only) or inotify_add_watch()
 * (-ENOENT, -ENOTDIR with IN_ONLYDIR, -ENOSPC out of watches, ...).
 */
int loop_watch_new(struct loop *l, const char *path, uint32_t mask, loop_watch_fn *fn,
		   void *userdata, struct loop_watch **ret) WARN_UNUSED;
/*
 * Stops the watch; safe from any callback, its own or another watch's (an event already read
 * for it is not delivered, and a watch made in its place loses none of its own). NULL-safe,
 * returns NULL.
 */
struct loop_watch *loop_watch_free(struct loop_watch *w);
