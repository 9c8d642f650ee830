/*
 * daemon-metrics.c: the daemon's side of the metrics server. Starts the server (retrying while
 * its port is taken: an old instance may still hold it) and answers what it asks at each scrape
 * (the daemon's own families, readiness, the resources served). It reads the daemon's state and
 * calls nothing in daemon.c: a server that starts late (after a retry) tells daemon.c through
 * d->metrics_started.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-internal.h"
#include "gpu-monitor.h"
#include "kubelet.h"
#include "loop.h"
#include "metrics.h"
#include "plugin.h"
#include "prom.h"
#include "resource.h"

#define LOG_MODULE "daemon"
#include "log.h"

#define RETRY_MIN (1 * USEC_PER_SEC)
#define RETRY_MAX (30 * USEC_PER_SEC)

static bool dev_healthy(const struct daemon *d, unsigned gpu)
{
	return gpu < d->info.n_devices &&
	       gpu_monitor_health_by_uuid(d->monitor, d->info.devices[gpu].uuid) == GPU_HEALTHY;
}

static unsigned src_resources(const struct resource **ret, unsigned max, void *userdata)
{
	struct daemon *d = userdata;
	unsigned n = 0;

	for (struct dplugin *dp = d->plugins; dp && n < max; dp = dp->next)
		if (!dp->stopping)
			ret[n++] = plugin_resource(dp->plugin);
	return n;
}

/* --- what discovery left us with --- */

const char *const daemon_gpu_state_names[DAEMON_GPU_STATE_COUNT] = {
	[DAEMON_GPU_SERVED] = "gpus",
	[DAEMON_GPU_PENDING] = "pending",
	[DAEMON_GPU_NONE] = "no-gpu",
	[DAEMON_GPU_ALL_SKIPPED] = "gpus-skipped",
	[DAEMON_GPU_NO_LIBRARY] = "no-library",
	[DAEMON_GPU_LIBRARY_UNUSABLE] = "library-unusable",
	[DAEMON_GPU_DRIVER_NOT_LOADED] = "driver-not-loaded",
	[DAEMON_GPU_DRIVER_MISMATCH] = "driver-mismatch",
	[DAEMON_GPU_NO_PERMISSION] = "no-permission",
	[DAEMON_GPU_DRIVER_HUNG] = "driver-hung",
	[DAEMON_GPU_FAILED] = "failed",
};

enum daemon_gpu_state daemon_gpu_state(bool discovered, int r, unsigned n_devices,
				       unsigned n_skipped, bool hung)
{
	if (n_devices > 0)
		return DAEMON_GPU_SERVED;
	if (hung)
		return DAEMON_GPU_DRIVER_HUNG;
	if (!discovered)
		return DAEMON_GPU_PENDING;
	/* The errors of the backend's open (nvml-load.c); anything else is a plain failure. */
	switch (r) {
	case 0:
		return n_skipped ? DAEMON_GPU_ALL_SKIPPED : DAEMON_GPU_NONE;
	case -ENOENT:
		return DAEMON_GPU_NO_LIBRARY;
	case -ENOSYS:
		return DAEMON_GPU_LIBRARY_UNUSABLE;
	case -ENXIO:
		return DAEMON_GPU_DRIVER_NOT_LOADED;
	case -EXDEV:
		return DAEMON_GPU_DRIVER_MISMATCH;
	case -EACCES:
		return DAEMON_GPU_NO_PERMISSION;
	default:
		return DAEMON_GPU_FAILED;
	}
}

void daemon_gpu_discovered(struct daemon *d, int r, const char *err)
{
	d->discovery_r = r;
	d->discovery_err = mfree(d->discovery_err);
	if (r < 0 && err && *err)
		d->discovery_err = strdup(err); /* NULL: /readyz names the state only */
}

static enum daemon_gpu_state gpu_state(const struct daemon *d)
{
	return daemon_gpu_state(d->discovered_once, d->discovery_r, d->info.n_devices,
				d->info.n_skipped, d->monitor && gpu_monitor_hung(d->monitor));
}

/* A reason line; out of memory only shortens the body of /readyz. */
static void why_add(struct buf *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why_add(struct buf *why, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (buf_append(why, line, strlen(line)) < 0)
		return;
}

/* Why a node that is ready serves nothing (the lines after "ready" in /readyz). */
static void why_nothing(const struct daemon *d, enum daemon_gpu_state st, struct buf *why)
{
	const char *what;

	switch (st) {
	case DAEMON_GPU_NONE:
		what = "NVML works and finds no GPU";
		break;
	case DAEMON_GPU_ALL_SKIPPED:
		what = "NVML finds GPUs, but every one is left out (the log's \"GPU skipped\" lines say why)";
		break;
	case DAEMON_GPU_DRIVER_HUNG:
		what = "an NVML call has not returned: the driver hangs";
		break;
	default:
		what = d->discovery_err ? d->discovery_err : "GPU discovery failed";
		break;
	}
	if (buf_printf(why, "no GPU to serve (%s): %s\n", daemon_gpu_state_names[st], what) < 0)
		return;
	if (st == DAEMON_GPU_DRIVER_HUNG)
		why_add(why, "the GPUs are served once the call returns\n");
	else
		why_add(why, "looking again every %llus; GPUs found are served without a restart\n",
			(unsigned long long)(d->cfg.rediscover_interval / USEC_PER_SEC));
}

/*
 * Readiness (docs/failures.md, "Readiness"): not ready while starting, stopping, or while a
 * resource of the GPUs found is not served or not registered; ready when all are, and when the
 * node leaves nothing to serve (no driver, no GPU): a rollout must not wait for a driver.
 */
static bool src_ready(struct buf *why, void *userdata)
{
	struct daemon *d = userdata;
	bool ok = true, any = false, reg = d->cfg.kubelet_socket && *d->cfg.kubelet_socket;
	enum daemon_gpu_state st = gpu_state(d);

	if (d->stopping) {
		why_add(why, "stopping\n");
		return false;
	}
	if (st == DAEMON_GPU_PENDING) {
		why_add(why, "GPU discovery has not finished\n");
		return false;
	}
	if (st != DAEMON_GPU_SERVED) {
		why_nothing(d, st, why);
		return true;
	}
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		if (dp->stopping)
			continue;
		any = true;
		if (!plugin_socket_ok(dp->plugin)) {
			why_add(why, "%s: socket %s is not served\n", dp->name,
				plugin_socket_path(dp->plugin));
			ok = false;
		} else if (reg && !kubelet_reg_registered(dp->reg)) {
			why_add(why, "%s: not registered with the kubelet (%s)\n", dp->name,
				kubelet_reg_state_name(kubelet_reg_state(dp->reg)));
			ok = false;
		}
	}
	if (!any) {
		why_add(why,
			"no resource advertised: the config cannot be applied to the %u GPUs found (the log says why)\n",
			d->info.n_devices);
		return false;
	}
	return ok;
}

static void collect_discovery(struct daemon *d, struct prom *p)
{
	enum daemon_gpu_state st = gpu_state(d);
	struct prom_labels l;

	prom_family(
		p, "edgegpu_gpu_discovery_state", PROM_GAUGE,
		"What GPU discovery left: 1 for the current state (gpus: found and served; pending; else why nothing is served).");
	for (int s = 0; s < DAEMON_GPU_STATE_COUNT; s++) {
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "state", daemon_gpu_state_names[s]);
		prom_sample(p, NULL, &l, s == (int)st);
	}
}

static void collect_plugins(struct daemon *d, struct prom *p)
{
	struct prom_labels l;
	char gpu[12];

	prom_family(p, "edgegpu_device_healthy", PROM_GAUGE,
		    "1 when the resource's devices on this GPU are advertised healthy.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);

		for (unsigned s = 0; !dp->stopping && s < r->n_gpus; s++) {
			unsigned g = r->gpus[s].gpu; /* its place among the served GPUs */

			/* NVML's index, as the GPU families' gpu label (metrics_set_gpus()) */
			(void)snprintf(gpu, sizeof(gpu), "%u",
				       g < d->info.n_devices ? d->info.devices[g].index : g);
			l = (struct prom_labels){ 0 };
			prom_labels_push(&l, "resource", r->name);
			prom_labels_push(&l, "gpu", gpu);
			prom_labels_push(&l, "UUID", r->uuids[s]);
			prom_sample(p, NULL, &l, dev_healthy(d, r->gpus[s].gpu));
		}
	}
	prom_family(p, "edgegpu_resource_devices", PROM_GAUGE,
		    "Devices advertised to the kubelet, by health.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);
		unsigned healthy = 0, sick = 0;

		if (dp->stopping)
			continue;
		for (unsigned s = 0; s < r->n_gpus; s++)
			*(dev_healthy(d, r->gpus[s].gpu) ? &healthy : &sick) += r->gpus[s].count;
		for (int h = 0; h < 2; h++) {
			l = (struct prom_labels){ 0 };
			prom_labels_push(&l, "resource", r->name);
			prom_labels_push(&l, "health", h ? "Unhealthy" : "Healthy");
			prom_sample(p, NULL, &l, h ? sick : healthy);
		}
	}
}

static void collect_regs(struct daemon *d, struct prom *p)
{
	struct prom_labels l;
	struct plugin_stats st;

	prom_family(p, "edgegpu_plugin_registered", PROM_GAUGE,
		    "1 when the resource is registered with the kubelet.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		if (dp->stopping)
			continue;
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "resource", dp->name);
		prom_sample(p, NULL, &l, kubelet_reg_registered(dp->reg));
	}
	prom_family(p, "edgegpu_plugin_sockets_served_total", PROM_COUNTER,
		    "Plugin sockets created (each re-creation counts).");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		plugin_get_stats(dp->plugin, &st);
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "resource", dp->name);
		prom_sample(p, NULL, &l, (double)st.sockets_served);
	}
	prom_family(p, "edgegpu_kubelet_registrations_total", PROM_COUNTER,
		    "Registrations the kubelet accepted.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "resource", dp->name);
		prom_sample(p, NULL, &l, kubelet_reg_count(dp->reg));
	}
	prom_family(p, "edgegpu_kubelet_restarts_total", PROM_COUNTER,
		    "Kubelet restarts seen (kubelet.sock created again).");
	prom_sample(p, NULL, NULL, (double)d->kubelet_restarts);
}

static void collect_allocs(struct daemon *d, struct prom *p)
{
	struct prom_labels l;
	struct plugin_stats st;

	prom_family(p, "edgegpu_allocations_total", PROM_COUNTER, "Allocate calls, by result.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		plugin_get_stats(dp->plugin, &st);
		for (int e = 0; e < 2; e++) {
			l = (struct prom_labels){ 0 };
			prom_labels_push(&l, "resource", dp->name);
			prom_labels_push(&l, "result", e ? "error" : "ok");
			prom_sample(p, NULL, &l,
				    e ? (double)st.allocate_errors :
					(double)(st.allocates - st.allocate_errors));
		}
	}
	prom_family(p, "edgegpu_allocate_duration_seconds", PROM_HISTOGRAM,
		    "Time to answer an Allocate call that succeeded.");
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		plugin_get_stats(dp->plugin, &st);
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "resource", dp->name);
		prom_histogram(p, &l, plugin_alloc_bounds, PLUGIN_ALLOC_BUCKETS, st.alloc_hist,
			       st.alloc_seconds);
	}
}

static void src_collect(struct prom *p, void *userdata)
{
	struct daemon *d = userdata;

	collect_discovery(d, p);
	collect_plugins(d, p);
	collect_regs(d, p);
	collect_allocs(d, p);
	daemon_backstop_collect(d, p);
	daemon_enforce_collect(d, p);
}

static const struct metrics_source source = {
	.collect = src_collect,
	.ready = src_ready,
	.resources = src_resources,
};

static void fill_opts(const struct daemon *d, struct metrics_opts *o)
{
	const struct config_metrics *c = &d->cfg.metrics;

	*o = (struct metrics_opts){
		.address = c->address,
		.max_connections = c->max_connections,
		.connection_timeout = c->connection_timeout,
		.min_interval = c->min_interval,
		.scrape_wait = c->scrape_wait,
		.hostname_label = c->hostname_label == CONFIG_HOSTNAME_LABEL_LOWER ? "hostname" :
										     "Hostname",
		.node_name = c->node_name,
		.host_proc = c->host_proc,
		.pod_log_dir = c->pod_log_dir,
		.virtual_gpus = c->kubernetes_virtual_gpus,
	};
}

static void start_server(struct daemon *d);

static void on_retry(struct loop_timer *t, void *userdata)
{
	start_server(userdata);
}

static void start_server(struct daemon *d)
{
	struct metrics_opts o;
	char *err = NULL;
	int r;

	if (d->metrics || d->stopping || !d->cfg.metrics.address || !*d->cfg.metrics.address)
		return;
	fill_opts(d, &o);
	r = metrics_new(d->loop, &o, &source, d, &d->metrics, &err);
	if (r < 0) {
		bool again = r != -EINVAL && r != -ENOMEM;

		if (!d->metrics_retry_logged || !again)
			log_error_errno(r,
					again ? "metrics server failed to start, retrying" :
						"metrics server cannot start",
					"address=%s reason=%s", d->cfg.metrics.address,
					log_q(err ? err : ""));
		else
			log_debug("metrics server failed to start again", "reason=%s",
				  log_q(err ? err : ""));
		free(err);
		d->metrics_retry_logged = true;
		if (again && d->metrics_retry) {
			loop_timer_arm(d->metrics_retry, backoff_next(&d->metrics_backoff));
		}
		return;
	}
	if (d->metrics_retry_logged)
		log_info("metrics server started after retrying", NULL);
	d->metrics_retry_logged = false;
	backoff_reset(&d->metrics_backoff);
	log_info("metrics server listening", "address=%s port=%u", d->cfg.metrics.address,
		 metrics_port(d->metrics));
	metrics_set_monitor(d->metrics, d->monitor);
	if (d->metrics_started)
		d->metrics_started(d); /* daemon.c: the pod-resources poller, on demand now */
	if (d->info.n_devices && metrics_set_gpus(d->metrics, &d->info) < 0)
		log_warn("metrics: out of memory setting the GPUs", NULL);
}

/* --- the daemon's calls --- */

void daemon_metrics_start(struct daemon *d)
{
	d->metrics_backoff = BACKOFF_INIT(RETRY_MIN, 2, RETRY_MAX);
	if (!d->metrics_retry && loop_timer_new(d->loop, on_retry, d, &d->metrics_retry) < 0)
		d->metrics_retry = NULL; /* no retries, the first attempt still runs */
	start_server(d);
}

void daemon_metrics_reload(struct daemon *d, const struct config *old)
{
	struct metrics_opts o;

	if (!streq_ptr(old->metrics.address, d->cfg.metrics.address) ||
	    old->metrics.max_connections != d->cfg.metrics.max_connections ||
	    old->metrics.connection_timeout != d->cfg.metrics.connection_timeout) {
		d->metrics = metrics_free(d->metrics);
		loop_timer_disarm(d->metrics_retry);
		backoff_reset(&d->metrics_backoff);
		start_server(d);
	} else if (d->metrics) {
		fill_opts(d, &o);
		if (metrics_set_opts(d->metrics, &o) < 0)
			log_warn("metrics: out of memory applying the new settings", NULL);
	}
}

void daemon_metrics_gpus(struct daemon *d)
{
	if (d->metrics && metrics_set_gpus(d->metrics, &d->info) < 0)
		log_warn("metrics: out of memory setting the GPUs", NULL);
}

void daemon_metrics_stop(struct daemon *d)
{
	d->metrics = metrics_free(d->metrics);
	d->metrics_retry = loop_timer_free(d->metrics_retry);
}
