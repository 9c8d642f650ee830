#pragma once

/*
 * oneshot: a job for a thread of its own, whose end the loop hears through a loop wake: the
 * file writer's writes, the metrics' pod attribution, the backstop's rounds and kills. The
 * thread may block for ever (fsync on a frozen filesystem, a read stuck in the host's /proc),
 * so the loop side never waits for it: stopping only lets go.
 *
 * Ownership. The job's data (@userdata) belongs to the oneshot from a successful
 * oneshot_start() on. Two hold it: the thread, until @fn returned, and the loop side, until
 * oneshot_unref(). The last of the two to let go calls @free_fn(@userdata) and frees the
 * oneshot, on its own thread: the loop's when the job had returned, the job's thread when the
 * loop side let go first (the loop side cancelled; nothing waits for the thread, which frees
 * the data whenever @fn comes back, if ever). So between @fn's return and oneshot_unref(),
 * the loop side may take things out of @userdata (setting them NULL for @free_fn), and it
 * must not touch @userdata after oneshot_unref().
 *
 * The wake. When @fn returns, the thread marks the job done and signals @wake under the
 * oneshot's mutex, unless the loop side let go; oneshot_unref() forgets @wake under that same
 * mutex, so once it returns no signal can reach @wake and its owner may free it. One wake may
 * serve any number of jobs: its callback asks oneshot_done() of each.
 *
 * These threads do not count in runner_live(): they touch no driver, so main() need not wait
 * or _exit() for them. Detached, every signal blocked (thread_start()). Logs nothing.
 */

#include <stdbool.h>

#include "util.h"

struct loop_wake;
struct oneshot;

/* The job, on its thread; what it writes to @userdata the loop side reads once it is done. */
typedef void oneshot_fn(void *userdata);
/* Frees the job's data: on the loop's thread or on the job's, whichever lets go last. */
typedef void oneshot_free_fn(void *userdata);

/*
 * Starts @fn(@userdata) on a new detached thread; when it returns, @wake is signalled (not
 * owned: it must stay alive until oneshot_done() is true or oneshot_unref() returned). On
 * success *@ret is the loop side's hold and @userdata is the oneshot's (see above); @free_fn
 * may be NULL when @userdata needs no freeing. Returns 0, or -ENOMEM / -EAGAIN (no thread):
 * nothing is started, @free_fn is not called and @userdata is still the caller's.
 */
int oneshot_start(struct loop_wake *wake, oneshot_fn *fn, oneshot_free_fn *free_fn, void *userdata,
		  struct oneshot **ret) WARN_UNUSED;

/*
 * @fn has returned: what it wrote to its data is visible to the caller, who holds @o. A
 * wake's callback asks it, as a signal may come from another job on the same wake.
 */
bool oneshot_done(struct oneshot *o);

/*
 * Ends the loop side's hold on @o, done or not (a cancel: the job is left to finish on its
 * own, and its wake is never signalled from now on). Frees @o and calls @free_fn when the job
 * had returned; otherwise the job's thread does both when @fn returns. Never blocks on the
 * job. NULL-safe; returns NULL.
 */
struct oneshot *oneshot_unref(struct oneshot *o);
