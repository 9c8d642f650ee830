/*
 * daemon-labels.c: the daemon's side of the node labels: the NFD labels file kept in line with
 * the GPUs and the config (labels.c builds the text, its writer puts it on disk off the loop).
 * Loop thread only; calls nothing in daemon.c.
 */
#include <stdlib.h>

#include "daemon-internal.h"
#include "labels.h"

#define LOG_MODULE "daemon"
#include "log.h"

void daemon_labels_update(struct daemon *d)
{
	struct buf b = { 0 };
	const char *sysfs = getenv("EDGEGPU_SYSFS_ROOT"); /* tests: a fake /sys */

	/*
	 * Not before a discovery has succeeded (d->ctx.info is set then): nothing is known yet, and
	 * the file of the last run stays until its expiry. After one, a node without GPUs gets a
	 * file without labels, as GFD's loses its GPU labels at its next pass: kept, the old
	 * labels would be refreshed, and so never expire, on a node that lost its GPUs.
	 */
	if (!d->labels || !d->ctx.info)
		return;
	if (labels_build(&d->info, &d->cfg, sysfs && *sysfs ? sysfs : "/sys",
			 daemon_enforce_mode(d), &b) < 0 ||
	    labels_writer_set(d->labels, b.data ? (const char *)b.data : "", b.len) < 0)
		log_warn("node labels: out of memory", NULL);
	buf_release(&b);
}

void daemon_labels_start(struct daemon *d)
{
	int r;

	if (!d->cfg.labels.file || !*d->cfg.labels.file)
		return;
	r = labels_writer_new(d->loop, d->cfg.labels.file, d->cfg.labels.expiry, &d->labels);
	if (r < 0) {
		log_error_errno(r, "node labels off: cannot start the writer", "file=%s",
				d->cfg.labels.file);
		return;
	}
	/*
	 * nvidia.com/gfd.timestamp: the time of this start, the same at every write, as GFD's is
	 * its own start. A change of the switch on reload makes a new writer, and so a new time
	 * (daemon_labels_reload()).
	 */
	labels_writer_set_timestamp(d->labels, !d->cfg.labels.no_timestamp);
	daemon_labels_update(d);
}

void daemon_labels_reload(struct daemon *d, const struct config *old)
{
	if (!streq_ptr(old->labels.file, d->cfg.labels.file) ||
	    old->labels.expiry != d->cfg.labels.expiry ||
	    old->labels.no_timestamp != d->cfg.labels.no_timestamp) {
		d->labels = labels_writer_free(d->labels);
		daemon_labels_start(d);
	} else {
		daemon_labels_update(d);
	}
}

void daemon_labels_stop(struct daemon *d)
{
	d->labels = labels_writer_free(d->labels);
}
