/*
 * The daemon's gpumem enforcement (enforce.h): created while a gpumem resource is advertised,
 * made again when its config changes (a reload), the library install retried with backoff
 * after a failure, the node's facts handed over, and the allocations of pods that are gone
 * removed from the stable pod-resources answers. Loop thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon-internal.h"
#include "enforce.h"
#include "loop.h"
#include "podres.h"
#include "resource.h"

#define LOG_MODULE "enforce"
#include "log.h"

/* The install retry: 1 s doubling to 5 min (a library that comes with a new image). */
#define INSTALL_FIRST (1 * USEC_PER_SEC)
#define INSTALL_MAX   (300 * USEC_PER_SEC)
/* How often the last stable answer is read again (allocations whose grace ran out). */
#define GC_TICK (30 * USEC_PER_SEC)
/* A stable answer older than this is not trusted to say a pod is gone (pod-resources down). */
#define GC_FRESH (10 * USEC_PER_SEC)

static bool want_enforce(const struct daemon *d)
{
	if (d->stopping)
		return false;
	for (const struct dplugin *dp = d->plugins; dp; dp = dp->next)
		if (!dp->stopping && plugin_resource(dp->plugin)->kind == RESOURCE_GPUMEM)
			return true;
	return false;
}

static bool same_cfg(const struct config_enforcement *a, const struct config_enforcement *b)
{
	return a->interposer == b->interposer && a->driver == b->driver &&
	       a->preload == b->preload && a->managed == b->managed &&
	       streq_ptr(a->library, b->library) && streq_ptr(a->state_dir, b->state_dir);
}

static void install_retry(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;

	if (!d->enforce || enforce_install(d->enforce) >= 0) {
		backoff_reset(&d->enforce_backoff);
		daemon_enforce_node(d);
		return;
	}
	loop_timer_arm(t, backoff_next(&d->enforce_backoff));
}

/* Reads the last stable answer again: allocations past their grace whose pod never came. */
static void gc_tick(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;
	usec_t at = podres_stable_at(d->podres);

	/* An empty answer (no pod holds a device) is 0 bytes: "have" says there was one. */
	if (d->enforce && d->enforce_have_podres && at && now_usec() - at < GC_FRESH)
		(void)enforce_set_live_podres(d->enforce, d->enforce_podres.data,
					      d->enforce_podres.len);
	if (d->enforce)
		loop_timer_arm(t, d->enforce_tick);
}

static void enforce_stop(struct daemon *d)
{
	d->enforce = enforce_free(d->enforce);
	d->ctx.enforce = NULL;
	if (d->enforce_retry)
		loop_timer_disarm(d->enforce_retry);
	if (d->enforce_gc)
		loop_timer_disarm(d->enforce_gc);
	buf_release(&d->enforce_podres);
	d->enforce_have_podres = false;
	d->enforce_logged = false;
}

void daemon_enforce_node(struct daemon *d)
{
	struct enforce_node n = { .cdi_delivery = alloc_uses_cdi(&d->ctx.alloc) };
	struct enforce_verdict v;
	int root = root_dir_open(d->cfg.host_root), fd = -1;

	if (!d->enforce)
		return;
	if (root >= 0)
		fd = root_open(root, "/sys/fs/cgroup/cgroup.controllers", 0, NULL);
	n.cgroup_v2 = fd >= 0;
	if (fd >= 0)
		(void)close(fd);
	if (root >= 0)
		(void)close(root);
	/*
	 * The hook point for the driver path: true once our CDI spec carries nvidia-cdi-hook
	 * apply-cuda-memory-limits (set by the CDI writer's owner, d->enforce_cdi_hook).
	 */
	n.cdi_hook = d->enforce_cdi_hook;
	enforce_set_node(d->enforce, &n);
	enforce_verdict(d->enforce, &d->info, NULL, NULL, 0, &v);
	if (d->enforce_logged && v.mode == d->enforce_verdict.mode &&
	    streq(v.driver_reason, d->enforce_verdict.driver_reason) &&
	    streq(v.interposer_reason, d->enforce_verdict.interposer_reason))
		return;
	d->enforce_logged = true;
	d->enforce_verdict = v;
	daemon_labels_update(d); /* edgegpu.io/gpumem.enforcement follows the verdict */
	if (v.mode == ENFORCE_ACCOUNTING)
		log_warn("gpumem limits are NOT enforced on this node: accounting only",
			 "driver_reason=%s interposer_reason=%s", v.driver_reason,
			 v.interposer_reason);
	else
		log_info("gpumem limit enforcement on this node",
			 "mode=%s driver_reason=%s interposer_reason=%s", enforce_mode_name(v.mode),
			 v.driver_reason[0] ? v.driver_reason : "none",
			 v.interposer_reason[0] ? v.interposer_reason : "none");
}

void daemon_enforce_update(struct daemon *d)
{
	const struct config_enforcement *c = &d->cfg.gpumem.enforcement;
	const char *grace = getenv("EDGEGPU_GPUMEM_GRACE_MS"); /* tests only */

	if (!want_enforce(d)) {
		if (d->enforce)
			log_info("gpumem enforcement stopped, allocations left for a later start",
				 "state_dir=%s", enforce_config(d->enforce)->state_dir);
		enforce_stop(d);
		return;
	}
	if (d->enforce && same_cfg(enforce_config(d->enforce), c)) {
		daemon_enforce_node(d);
		return;
	}
	enforce_stop(d);
	if ((!d->enforce_retry &&
	     loop_timer_new(d->loop, install_retry, d, &d->enforce_retry) < 0) ||
	    (!d->enforce_gc && loop_timer_new(d->loop, gc_tick, d, &d->enforce_gc) < 0) ||
	    enforce_new(c, d->cfg.host_root, &d->enforce) < 0) {
		log_error("cannot start gpumem enforcement: out of memory", NULL);
		return;
	}
	d->enforce_tick = GC_TICK;
	if (grace && *grace) {
		unsigned ms;

		if (safe_atou(grace, &ms) >= 0) {
			enforce_set_grace(d->enforce, (usec_t)ms * USEC_PER_MSEC);
			/* A short grace is checked as often (at most 10 times a second). */
			if ((usec_t)ms * USEC_PER_MSEC < GC_TICK)
				d->enforce_tick = ms < 100 ? 100 * USEC_PER_MSEC :
							     (usec_t)ms * USEC_PER_MSEC;
		}
	}
	d->ctx.enforce = d->enforce;
	log_info("gpumem enforcement", "state_dir=%s library=%s interposer=%s driver=%s",
		 c->state_dir, c->library, c->interposer ? "yes" : "no", c->driver ? "yes" : "no");
	d->enforce_backoff = BACKOFF_INIT(INSTALL_FIRST, 2, INSTALL_MAX);
	if (c->interposer && !enforce_installed(d->enforce))
		loop_timer_arm(d->enforce_retry, backoff_next(&d->enforce_backoff));
	loop_timer_arm(d->enforce_gc, d->enforce_tick);
	daemon_enforce_node(d);
}

void daemon_enforce_podres(struct daemon *d, const uint8_t *resp, size_t len)
{
	int r;

	if (!d->enforce)
		return;
	/* Kept for gc_tick(): the next stable answer comes only when the set changes. */
	d->enforce_podres.len = 0;
	d->enforce_have_podres = buf_append(&d->enforce_podres, resp, len) >= 0;
	r = enforce_set_live_podres(d->enforce, resp, len);
	if (r > 0)
		log_debug("gpumem allocations of gone pods removed", "removed=%d", r);
}

void daemon_enforce_free(struct daemon *d)
{
	enforce_stop(d);
	d->enforce_retry = loop_timer_free(d->enforce_retry);
	d->enforce_gc = loop_timer_free(d->enforce_gc);
}
