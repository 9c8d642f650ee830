/*
 * metrics.c: the HTTP endpoints and the scrape's flow (cache, deferred answers). The families
 * are written by metrics-render.c; who holds which GPU is metrics-pods.c's.
 */
#include "metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu-monitor.h"
#include "http.h"
#include "loop.h"
#include "metrics-int.h"
#include "podres.h"
#include "prom.h"

#define LOG_MODULE "metrics"
#include "log.h"

static void mgpus_release(struct metrics *m)
{
	m->gpus = mfree(m->gpus);
	m->n_gpus = 0;
}

static void cache_release(struct metrics *m)
{
	m->samples = mfree(m->samples);
	m->sample_r = mfree(m->sample_r);
	m->sample_uuids = mfree(m->sample_uuids);
	m->n_samples = 0;
	metrics_procs_release(m);
}

static int copy_opt(char **dst, const char *src, const char *def)
{
	char *s = strdup(src && *src ? src : def);

	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

int metrics_set_opts(struct metrics *m, const struct metrics_opts *o)
{
	char host[256] = "";

	if (!o->node_name || !*o->node_name) {
		if (gethostname(host, sizeof(host) - 1) < 0)
			(void)snprintf(host, sizeof(host), "unknown");
	}
	if (copy_opt(&m->hostname_label, o->hostname_label, "Hostname") < 0 ||
	    copy_opt(&m->node_name, o->node_name, host) < 0 ||
	    copy_opt(&m->host_proc, o->host_proc, "/proc") < 0 ||
	    copy_opt(&m->pod_log_dir, o->pod_log_dir, "/var/log") < 0)
		return -ENOMEM;
	m->min_interval = o->min_interval ? o->min_interval : USEC_PER_SEC;
	m->max_scrapes = o->max_connections ? o->max_connections : 16;
	m->body_ready = false;
	m->scrape_wait = o->scrape_wait;
	m->virtual_gpus = o->virtual_gpus;
	return metrics_pods_set_log_dir(m);
}

/* @d's nodes include /dev/<name>. */
static bool has_node(const struct gpu_device *d, const char *name)
{
	for (unsigned i = 0; i < MIN(d->n_nodes, (unsigned)GPU_NODES_MAX); i++)
		if (startswith(d->nodes[i], "/dev/") && streq(d->nodes[i] + 5, name))
			return true;
	return false;
}

int metrics_set_gpus(struct metrics *m, const struct gpu_info *info)
{
	struct metrics_gpu *g = calloc(info->n_devices + 1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *d = &info->devices[i];
		char node[24];

		/*
		 * NVML's index, as DCGM-exporter's GPU id and nvidia-smi number the GPU, not its
		 * place among the served ones: a skipped MIG GPU before it would shift it.
		 */
		(void)snprintf(g[i].index, sizeof(g[i].index), "%u", d->index);
		(void)snprintf(g[i].uuid, sizeof(g[i].uuid), "%s", d->uuid);
		(void)snprintf(g[i].pci, sizeof(g[i].pci), "%s", d->pci_bus_id);
		/*
		 * DCGM-exporter spells device "nvidia" and its GPU id (the gpu label), not the
		 * minor number: the two differ where the driver numbered the nodes otherwise.
		 * A Tegra iGPU on nvgpu, with no /dev/nvidia<minor>, has none.
		 */
		(void)snprintf(node, sizeof(node), "nvidia%u", d->minor);
		if (!d->integrated || has_node(d, node))
			(void)snprintf(g[i].device, sizeof(g[i].device), "nvidia%u", d->index);
		(void)snprintf(g[i].model, sizeof(g[i].model), "%s", d->name);
		g[i].mem_total = d->mem_total;
	}
	mgpus_release(m);
	m->gpus = g;
	m->n_gpus = info->n_devices;
	(void)snprintf(m->driver_version, sizeof(m->driver_version), "%s", info->driver_version);
	m->board = info->board;
	(void)snprintf(m->nvml_version, sizeof(m->nvml_version), "%s", info->lib_version);
	if (info->cuda_driver_version > 0)
		(void)snprintf(m->cuda_version, sizeof(m->cuda_version), "%d.%d",
			       info->cuda_driver_version / 1000,
			       info->cuda_driver_version % 1000 / 10);
	else
		m->cuda_version[0] = 0;
	cache_release(m);
	m->sampled_at = 0;
	m->body_ready = false;
	return 0;
}

/* --- answering --- */

static int respond_metrics(struct metrics *m, struct http_request *r)
{
	const void *body;
	size_t len;
	const char *enc = NULL;
	int e;

	if (!m->body_ready) {
		usec_t t0 = now_usec();

		e = metrics_render(m, &m->body);
		log_debug("scrape", "bytes=%zu dur_us=%llu", m->body.len,
			  (unsigned long long)(now_usec() - t0));
		if (e < 0 && e != -EINVAL && e != -E2BIG) {
			static const char msg[] = "rendering the metrics failed: out of memory\n";

			return http_respond(r, 500, "text/plain; charset=utf-8", NULL, msg,
					    sizeof(msg) - 1);
		}
		if (e < 0 && !m->render_err_logged) {
			m->render_err_logged = true;
			log_warn_errno(e, "a metric family was left out of the exposition", NULL);
		}
		m->body_ready = true;
		m->body_at = now_usec();
		m->gzip_ready = false;
	}
	body = m->body.data;
	len = m->body.len;
	if (prom_accepts_gzip(http_request_header(r, "Accept-Encoding"))) {
		if (!m->gzip_ready && prom_gzip(m->body.data, m->body.len, &m->gzip) == 0)
			m->gzip_ready = true;
		if (m->gzip_ready) {
			body = m->gzip.data;
			len = m->gzip.len;
			enc = "gzip";
		}
	}
	m->scrapes++;
	return http_respond(r, 200, PROM_CONTENT_TYPE, enc, body, len);
}

/* Answers every deferred scrape from the cache as it is now. */
static void flush_waiters(struct metrics *m)
{
	loop_timer_disarm(m->wait_timer);
	for (unsigned i = 0; i < m->n_waiters; i++)
		(void)respond_metrics(m, m->waiters[i]);
	m->n_waiters = 0;
}

static void on_wait_timeout(struct loop_timer *t, void *userdata)
{
	struct metrics *m = userdata;

	if (m->sample_pending)
		m->sample_timeouts++;
	/* A List that failed never answers: the next scrape asks again. */
	m->podres_pending = false;
	flush_waiters(m);
}

static void maybe_flush(struct metrics *m)
{
	if (!m->sample_pending && !m->podres_pending && !metrics_attrib_pending(m) && m->n_waiters)
		flush_waiters(m);
}

/* New data: the body is rendered again, and the waiting scrapes answered if nothing is pending. */
static void body_stale(struct metrics *m)
{
	m->body_ready = false;
	maybe_flush(m);
}

/* m->attrib.done: an attribution result is in m->procs (or the run ended). */
static void on_attributed(struct metrics *m)
{
	body_stale(m);
}

static void on_sampled(struct gpu_monitor *mon, const struct gpu_sample *samples, const int *r,
		       unsigned n, void *userdata)
{
	struct metrics *m = userdata;

	m->sample_pending = false;
	/* Its processes go to the attribution thread: deferred scrapes wait for that too. */
	metrics_cache_store(m, samples, r, n);
	body_stale(m);
}

static void on_podres_answer(struct podres *p, const uint8_t *resp, size_t len, void *userdata)
{
	struct metrics *m = userdata;

	m->podres_pending = false;
	metrics_pods_store(m, resp, len);
	body_stale(m);
}

/* Starts the refreshes a scrape needs; true when it should wait for them. */
static bool refresh(struct metrics *m)
{
	usec_t now = now_usec();
	bool attrib;

	if (!m->scrape_wait)
		return false;
	if (m->mon && !m->sample_pending && !gpu_monitor_hung(m->mon) &&
	    (!m->sampled_at || now - m->sampled_at >= m->min_interval)) {
		m->sample_pending = true;
		if (!gpu_monitor_sample(m->mon))
			m->sample_pending = false;
	}
	if (m->podres && !m->podres_pending &&
	    (!m->pods_at || now - m->pods_at >= m->min_interval)) {
		m->podres_pending = true;
		podres_poll_now(m->podres);
	}
	/* An attribution stuck in a file read is waited for no more than a hung NVML call. */
	attrib = metrics_attrib_pending(m) && !metrics_attrib_stuck(m);
	/* A hung call: answer from the cache now, and ask again once it returns. */
	if (m->mon && gpu_monitor_hung(m->mon))
		return m->podres_pending || attrib;
	return m->sample_pending || m->podres_pending || attrib;
}

/*
 * At most max_scrapes full answers a second (a burst of max_scrapes): past that, a cheap 429.
 * Scrapers come a few times a minute; a client that scrapes in a loop must not take the loop
 * from the kubelet (bench: Allocate p99 under 50 parallel scrapers).
 */
static bool take_token(struct metrics *m)
{
	usec_t now = now_usec();
	double cap = m->max_scrapes;

	if (m->tokens_at)
		m->tokens = MIN(cap, m->tokens + (double)(now - m->tokens_at) * cap / USEC_PER_SEC);
	else
		m->tokens = cap;
	m->tokens_at = now;
	if (m->tokens < 1)
		return false;
	m->tokens -= 1;
	return true;
}

/*
 * An exposition is rendered at most once per min_interval, and again when a sample or a
 * pod-resources answer came: every scrape in between gets the same bytes (with many scrapers,
 * the loop renders once a second, not once a scrape).
 */
static void respond_throttled(struct http_request *r)
{
	static const char body[] = "too many scrapes, try again in a second\n";
	static const char *const headers[] = { "Content-Type", "text/plain; charset=utf-8",
					       "Retry-After", "1", NULL };

	(void)http_respond_headers(r, 429, headers, body, sizeof(body) - 1);
}

static void on_tarpit(struct loop_timer *t, void *userdata)
{
	struct metrics *m = userdata;

	for (unsigned i = 0; i < m->n_tarpit; i++)
		respond_throttled(m->tarpit[i]);
	m->n_tarpit = 0;
}

static void serve_metrics(struct metrics *m, struct http_request *r)
{
	if (!take_token(m)) {
		m->throttled++;
		/*
		 * The answer waits a second: a client that scrapes in a loop waits with it. A
		 * deferred connection holds no slot of the server's, so the wait starves no one.
		 */
		if (m->n_tarpit == METRICS_WAITERS_MAX || http_defer(r) < 0) {
			respond_throttled(r);
			return;
		}
		m->tarpit[m->n_tarpit++] = r;
		if (!loop_timer_armed(m->tarpit_timer))
			loop_timer_arm(m->tarpit_timer, USEC_PER_SEC);
		return;
	}
	if (m->body_ready && now_usec() - m->body_at < m->min_interval) {
		(void)respond_metrics(m, r);
		return;
	}
	m->body_ready = false;
	if (m->n_waiters < METRICS_WAITERS_MAX && refresh(m) && http_defer(r) == 0) {
		m->waiters[m->n_waiters++] = r;
		if (!loop_timer_armed(m->wait_timer))
			loop_timer_arm(m->wait_timer, m->scrape_wait);
		return;
	}
	(void)respond_metrics(m, r);
}

static void serve_ready(struct metrics *m, struct http_request *r)
{
	static const char ready[] = "ready\n";
	size_t head;
	bool ok;

	/* Ready: "ready", then the source's lines (why nothing is served); not ready: why not. */
	m->why.len = 0;
	head = buf_append(&m->why, ready, sizeof(ready) - 1) < 0 ? 0 : sizeof(ready) - 1;
	ok = m->src.ready(&m->why, m->userdata);
	if (ok) {
		(void)http_respond(r, 200, "text/plain; charset=utf-8", NULL,
				   head ? (const void *)m->why.data : ready,
				   head ? m->why.len : sizeof(ready) - 1);
		return;
	}
	buf_consume(&m->why, head);
	if (!m->why.len && buf_printf(&m->why, "not ready\n") < 0)
		m->why.len = 0;
	(void)http_respond(r, 503, "text/plain; charset=utf-8", NULL, m->why.data, m->why.len);
}

static void on_request(struct http_request *r, void *userdata)
{
	struct metrics *m = userdata;
	const char *path = http_request_path(r);

	if (streq(path, "/metrics")) {
		serve_metrics(m, r);
	} else if (streq(path, "/healthz")) {
		static const char body[] = "ok\n";

		(void)http_respond(r, 200, "text/plain; charset=utf-8", NULL, body,
				   sizeof(body) - 1);
	} else if (streq(path, "/readyz")) {
		serve_ready(m, r);
	} else if (streq(path, "/")) {
		static const char body[] = "edgegpu: /metrics /healthz /readyz\n";

		(void)http_respond(r, 200, "text/plain; charset=utf-8", NULL, body,
				   sizeof(body) - 1);
	} else {
		static const char body[] = "not found: try /metrics, /healthz or /readyz\n";

		(void)http_respond(r, 404, "text/plain; charset=utf-8", NULL, body,
				   sizeof(body) - 1);
	}
}

/* --- lifecycle --- */

int metrics_new(struct loop *l, const struct metrics_opts *o, const struct metrics_source *src,
		void *userdata, struct metrics **ret, char **reterr)
{
	struct http_opts ho = {
		.address = o->address,
		.max_connections = o->max_connections,
		.timeout = o->connection_timeout,
	};
	struct metrics *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return set_error(reterr, -ENOMEM, "out of memory");
	m->loop = l;
	m->src = *src;
	m->userdata = userdata;
	m->started_wall = wall_usec();
	m->attrib.done = on_attributed;
	r = metrics_set_opts(m, o);
	if (r < 0) {
		set_error(reterr, r, "out of memory");
		goto fail;
	}
	r = loop_timer_new(l, on_wait_timeout, m, &m->wait_timer);
	if (r >= 0)
		r = loop_timer_new(l, on_tarpit, m, &m->tarpit_timer);
	if (r < 0) {
		set_error(reterr, r, "out of memory");
		goto fail;
	}
	r = http_server_new(l, &ho, on_request, m, &m->http, reterr);
	if (r < 0)
		goto fail;
	*ret = m;
	return 0;
fail:
	metrics_free(m);
	return r;
}

struct metrics *metrics_free(struct metrics *m)
{
	if (!m)
		return NULL;
	metrics_set_monitor(m, NULL);
	metrics_set_podres(m, NULL);
	m->n_waiters = m->n_tarpit = 0; /* the server answers them 503 */
	m->http = http_server_free(m->http);
	loop_timer_free(m->wait_timer);
	loop_timer_free(m->tarpit_timer);
	cache_release(m);
	mgpus_release(m);
	metrics_pods_release(m);
	buf_release(&m->body);
	buf_release(&m->gzip);
	buf_release(&m->why);
	free(m->hostname_label);
	free(m->node_name);
	free(m->host_proc);
	free(m->pod_log_dir);
	free(m);
	return NULL;
}

unsigned metrics_port(const struct metrics *m)
{
	return http_server_port(m->http);
}

void metrics_set_monitor(struct metrics *m, struct gpu_monitor *mon)
{
	if (m->mon == mon)
		return;
	if (m->mon)
		(void)gpu_monitor_on_sampled(m->mon, NULL, m);
	m->mon = mon;
	m->sample_pending = false;
	if (mon)
		(void)gpu_monitor_on_sampled(mon, on_sampled, m);
	maybe_flush(m);
}

void metrics_set_podres(struct metrics *m, struct podres *p)
{
	if (m->podres == p)
		return;
	if (m->podres)
		podres_on_answer(m->podres, NULL, NULL);
	m->podres = p;
	m->podres_pending = false;
	if (p)
		podres_on_answer(p, on_podres_answer, m);
	else
		metrics_pods_clear(m);
	maybe_flush(m);
}
