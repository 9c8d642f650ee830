#pragma once

/*
 * Keeps the CDI spec on disk, off the event loop. The spec is rendered on the loop (it only
 * stats files); the atomic write with its fsyncs runs through file-writer.h, so a slow SD card
 * never stalls gRPC. A spec already on disk byte for byte (the previous instance's) is left
 * as it is. A write that fails (full disk, unwritable dir) is retried with back-off (100 ms
 * doubling to 10 s). Logs (module=cdi) each failure once per back-off step at most.
 *
 * Watched (dirwatch.h: inotify on its directory, followed through symlink swaps and mounts):
 * a spec removed, or its directory replaced (a symlink pointed elsewhere, a tmpfs mounted over
 * it) is written again at once, and Allocate refuses until it is. A spec replaced by other
 * bytes is written again at once too, but Allocate goes on: a spec is there. When that happens
 * 3 times within 10 s another writer is at work (a second daemon with another strategy, a
 * generator): we say so once ("cdi spec rewritten by another writer, backing off") and write
 * ours again only after a back-off, 1 s doubling to 5 min, until it has stayed ours for 10 min.
 *
 * While no valid spec is on disk, cdi_writer_error() says why, and Allocate under a cdi-*
 * strategy refuses with FAILED_PRECONDITION instead of naming devices no runtime can resolve.
 * A write that has not returned after 5 s (a frozen disk) is logged once and registration
 * waits for it no longer. Loop thread only.
 */

#include <stdbool.h>

#include "util.h"

struct loop;
struct gpu_info;
struct cdi_opts;
struct cdi_writer;

/* Returns 0 or -errno. Nothing is written until cdi_writer_set(). */
int cdi_writer_new(struct loop *l, struct cdi_writer **ret) WARN_UNUSED;

/*
 * The spec for @info with @o (copied) should be on disk: renders it now and writes it when it
 * differs from what is there. Returns 0, or -errno when it cannot be rendered (the reason is
 * logged and becomes the error; nothing is written).
 */
int cdi_writer_set(struct cdi_writer *w, const struct cdi_opts *o, const struct gpu_info *info);

/* No spec is wanted any more (no cdi-* strategy): stops retrying and watching; clears the error. */
void cdi_writer_clear(struct cdi_writer *w);

/*
 * NULL while the wanted spec is on disk (or none is wanted), else why not. The pointer to
 * the writer's string stays valid for the writer's life, for struct plugin_ctx.cdi_error.
 */
const char *const *cdi_writer_error(const struct cdi_writer *w);

/*
 * True from the first cdi_writer_set() until its first write attempt has finished (written
 * or failed) or has run for 5 s: the daemon does not register with the kubelet meanwhile, so
 * that no Allocate meets "the CDI spec is being written" right after a start, and a stuck
 * disk does not keep the node unregistered. @fn runs on the loop when that wait ends; set it
 * once, before cdi_writer_set().
 */
bool cdi_writer_first_pending(const struct cdi_writer *w);
void cdi_writer_set_settled_cb(struct cdi_writer *w, void (*fn)(void *userdata), void *userdata);

/* A write in progress is left to finish on its own. NULL-safe, returns NULL. */
struct cdi_writer *cdi_writer_free(struct cdi_writer *w);
