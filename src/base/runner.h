#pragma once

/*
 * A job on a thread of its own that may never come back (a call into a GPU driver that hangs),
 * and the one count of such threads: runner_live(). The GPU monitor's worker and event threads
 * and the doctor's NVML worker run through it, and main() asks the count before it exits:
 * a thread still inside the driver cannot be joined, and the driver library's destructors may
 * wait for it forever, so main() leaves with _exit() while the count is not zero.
 *
 * The rule it keeps: a thread is never joined while its job runs. Whoever started the job
 * holds the runner until runner_release(): if the job returned by then, the thread is joined
 * and the runner freed, and the caller keeps @arg; if not, the thread is left behind, owns
 * @arg from then on (it calls @drop(@arg), if given, once the job returns) and frees the
 * runner itself. The thread starts with every signal blocked (thread_start()).
 */

#include <stdbool.h>

#include "util.h"

struct runner;

/* A job, or what frees its argument once a thread left behind is done with it. */
typedef void runner_fn(void *arg);

/*
 * Starts @fn(@arg) on a new thread; it counts in runner_live() until @fn returns. @drop may
 * be NULL (@arg then needs no freeing by the thread, or frees itself in @fn). Returns 0 with
 * *@ret held by the caller until runner_release(), or -errno (-ENOMEM, -EAGAIN) with nothing
 * started. Any thread.
 */
int runner_start(runner_fn *fn, void *arg, runner_fn *drop, struct runner **ret) WARN_UNUSED;

/*
 * Waits until the job returned, or until @deadline (now_usec()'s clock; USEC_INFINITY: for
 * ever). Returns true when it returned: what it wrote to @arg is then visible to the caller.
 * The caller holds @r.
 */
bool runner_wait(struct runner *r, usec_t deadline);

/*
 * Lets go of @r. Returns false when the job had returned (the thread is joined, @r freed,
 * @arg still the caller's); true when it had not: the thread is left behind with @arg and
 * @r, and frees both once the job returns, if ever. Never blocks on the job.
 */
bool runner_release(struct runner *r);

/* Threads started by runner_start() whose job has not returned, held or left behind. */
unsigned runner_live(void);
