#include "plugin.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "deviceplugin.pb-c.h"
#include "gpu.h"
#include "loop.h"
#include "plugin-internal.h"
#include "podres.h"
#include "resource.h"

#define LOG_MODULE "plugin"
#include "log.h"

/*
 * The plugin's lifecycle, its socket, ListAndWatch and gpumem masking. The unary calls
 * (Allocate, GetPreferredAllocation and the small ones) are in plugin-alloc.c.
 */

/* Units handed out by Allocate count as live for this long even before pod-resources shows them. */
#define RECENT_ALLOC_USEC (30 * USEC_PER_SEC)
/* A device list that could not be built is tried again after this, doubling up to the max. */
#define RETRY_MIN_USEC (100 * USEC_PER_MSEC)
#define RETRY_MAX_USEC (10 * USEC_PER_SEC)
/* A socket that cannot be served is tried again after this, doubling up to the max. */
#define LISTEN_BACKOFF_MIN (100 * USEC_PER_MSEC)
#define LISTEN_BACKOFF_MAX (10 * USEC_PER_SEC)

/* --- health and gpumem masking --- */

/*
 * A GPU's health. A resource built before a reload that failed half-way could name a GPU
 * index the current discovery does not have: such a GPU is unhealthy, never read past.
 */
bool plugin_gpu_up(const struct plugin *p, unsigned gpu)
{
	return gpu < p->ctx->info->n_devices && p->ctx->gpu_healthy(gpu, p->ctx->health_userdata);
}

/* Forgets the recent allocations older than @max_age (0: all of them). */
static void expire_recent_older(struct plugin *p, usec_t max_age)
{
	usec_t now = now_usec();
	struct recent_alloc **pp = &p->recent;

	while (*pp) {
		struct recent_alloc *ra = *pp;

		if (!max_age || now - ra->when > max_age) {
			*pp = ra->next;
			free(ra->devs);
			free(ra);
		} else {
			pp = &ra->next;
		}
	}
}

/* Rebuilds the in-use bitmap: units pod-resources lists, and units we handed out lately. */
static int rebuild_in_use(struct plugin *p)
{
	size_t nwords = BITMAP_WORDS(p->res->n_devices) + 1;

	expire_recent_older(p, RECENT_ALLOC_USEC);
	if (!p->in_use) {
		p->in_use = calloc(nwords, sizeof(uint64_t));
		if (!p->in_use)
			return -ENOMEM;
	}
	if (p->live)
		memcpy(p->in_use, p->live, nwords * sizeof(uint64_t));
	else
		memset(p->in_use, 0, nwords * sizeof(uint64_t));
	for (const struct recent_alloc *ra = p->recent; ra; ra = ra->next)
		for (size_t i = 0; i < ra->n; i++)
			if (ra->devs[i] < p->res->n_devices)
				bitmap_set(p->in_use, ra->devs[i]);
	return 0;
}

static unsigned slot_free_units(const struct plugin *p, unsigned s)
{
	const struct resource_gpu *g = &p->res->gpus[s];
	unsigned used = 0;

	for (unsigned i = 0; i < g->count; i++)
		used += bitmap_test(p->in_use, g->first + i);
	return g->count - used;
}

/*
 * placement: mask offers the free units of one GPU only: the healthy one with the most free
 * units. It moves only when another has at least maskHysteresisMiB more free, or when its GPU
 * turns unhealthy; ties go to the lower index.
 */
static void update_mask(struct plugin *p)
{
	const struct resource *r = p->res;
	int best = -1, cur = p->mask_slot;
	unsigned best_free = 0;

	if (r->kind != RESOURCE_GPUMEM || !p->ctx->mask || r->n_gpus < 2 || rebuild_in_use(p) < 0) {
		p->mask_slot = -1;
		return;
	}
	for (unsigned s = 0; s < r->n_gpus; s++) {
		unsigned f;

		if (!plugin_gpu_up(p, r->gpus[s].gpu))
			continue;
		f = slot_free_units(p, s);
		if (best < 0 || f > best_free) {
			best = (int)s;
			best_free = f;
		}
	}
	if (cur >= 0 && best >= 0 && cur != best && plugin_gpu_up(p, r->gpus[cur].gpu)) {
		uint64_t cur_mib = (uint64_t)slot_free_units(p, (unsigned)cur) * r->unit_mib;
		uint64_t best_mib = (uint64_t)best_free * r->unit_mib;

		if (best_mib < cur_mib + p->ctx->mask_hysteresis_mib)
			best = cur;
	}
	if (best != p->mask_slot)
		log_info("gpumem mask moved", "resource=%s gpu_from=%d gpu_to=%d free_units=%u",
			 r->name, p->mask_slot >= 0 ? (int)r->gpus[p->mask_slot].gpu : -1,
			 best >= 0 ? (int)r->gpus[best].gpu : -1,
			 best >= 0 ? slot_free_units(p, (unsigned)best) : 0);
	p->mask_slot = best;
}

static bool device_healthy(const struct resource *r, unsigned d, void *userdata)
{
	const struct plugin *p = userdata;
	unsigned s = resource_device_slot(r, d);

	if (!plugin_gpu_up(p, r->gpus[s].gpu))
		return false;
	if (p->mask_slot < 0 || (unsigned)p->mask_slot == s)
		return true;
	return bitmap_test(p->in_use, d);
}

/* --- ListAndWatch --- */

/*
 * ListAndWatch is state, not a log: a list the peer has not begun to read is replaced by the
 * newer one, so a peer that does not read holds at most two lists.
 */
static int send_snapshot(struct watcher *w, struct grpc_shared_msg *snap)
{
	int r = grpc_call_send_latest(w->call, snap);

	if (r < 0)
		return log_warn_errno(r, "sending device list failed", "resource=%s bytes=%zu",
				      w->plugin->res->name, w->plugin->snap_len);
	w->plugin->stats.snapshots_sent++;
	if (r > 0)
		w->plugin->stats.snapshots_replaced++;
	return 0;
}

static void on_retry(struct loop_timer *t, void *userdata)
{
	plugin_refresh(userdata);
}

/* The list could not be built: keep what was sent (never an empty list), try again later. */
static void schedule_retry(struct plugin *p)
{
	if (!p->ctx->loop)
		return;
	if (!p->retry && loop_timer_new(p->ctx->loop, on_retry, p, &p->retry) < 0)
		return;
	if (loop_timer_armed(p->retry))
		return;
	loop_timer_arm(p->retry, backoff_next(&p->retry_backoff));
}

void plugin_refresh(struct plugin *p)
{
	struct grpc_shared_msg *msg = NULL;
	struct buf nb = { 0 };
	const uint8_t *old;
	size_t old_len = 0;
	int r;

	if (p->shutting_down)
		return;
	update_mask(p);
	r = resource_encode_list(p->res, p->ctx->numa, device_healthy, p, &nb);
	if (r < 0) {
		log_error_errno(r, "encoding device list failed, retrying", "resource=%s",
				p->res->name);
		buf_release(&nb);
		schedule_retry(p);
		return;
	}
	old = p->snap ? grpc_shared_msg_payload(p->snap, &old_len) : NULL;
	if (old && nb.len == old_len && memcmp(nb.data, old, nb.len) == 0) {
		buf_release(&nb);
		backoff_reset(&p->retry_backoff);
		return;
	}
	if (nb.len > p->ctx->limits.max_send_msg && p->ctx->limits.max_send_msg) {
		log_error("device list too large for the kubelet, keeping the previous one",
			  "resource=%s bytes=%zu limit=%zu", p->res->name, nb.len,
			  p->ctx->limits.max_send_msg);
		buf_release(&nb);
		schedule_retry(p);
		return;
	}
	r = grpc_shared_msg_new(nb.data, nb.len, &msg);
	buf_release(&nb);
	if (r < 0) {
		log_error_errno(r, "encoding device list failed, retrying", "resource=%s",
				p->res->name);
		schedule_retry(p);
		return;
	}
	backoff_reset(&p->retry_backoff);
	if (p->retry)
		loop_timer_disarm(p->retry);
	grpc_shared_msg_unref(p->snap);
	p->snap = msg;
	(void)grpc_shared_msg_payload(msg, &p->snap_len);
	p->stats.last_list_bytes = p->snap_len;
	for (struct watcher *w = p->watchers; w; w = w->next)
		(void)send_snapshot(w, p->snap);
}

static void watch_closed(struct grpc_call *call, enum grpc_status status, void *userdata)
{
	struct watcher *w = userdata;
	struct plugin *p = w->plugin;

	for (struct watcher **pp = &p->watchers; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	p->n_watchers--;
	if (w->kubelet)
		p->n_kubelet_watchers--;
	if (p->shutting_down) {
		free(w);
		return;
	}
	if (!w->kubelet) {
		log_info("ListAndWatch stream ended (not the kubelet's)",
			 "resource=%s pid=%d grpc_status=%s", p->res->name, (int)w->pid,
			 grpc_status_name((int)status));
		free(w);
		return;
	}
	/* One we ended ourselves was announced by the takeover (plugin-peer.c). */
	if (w->ending && plugin_ended_stream_closed(p, w->conn)) {
		free(w);
		return;
	}
	if (!w->ending)
		log_warn("ListAndWatch stream ended by the kubelet", "resource=%s grpc_status=%s",
			 p->res->name, grpc_status_name((int)status));
	free(w);
	if (p->on_event)
		p->on_event(p, PLUGIN_EVENT_STREAM_CLOSED, p->userdata);
}

/* The rule is in plugin.h (plugin_expect_kubelet). */
static bool is_kubelet_stream(struct plugin *p, pid_t pid)
{
	if (!p->expect_called)
		return true;
	if (p->kubelet_pid != 0 && pid != 0)
		return pid == p->kubelet_pid;
	if (!p->expect_armed)
		return false;
	p->expect_armed = false;
	return true;
}

static void handle_list_and_watch(struct grpc_call *call, const uint8_t *req, size_t len,
				  void *userdata)
{
	struct plugin *p = userdata;
	struct watcher *w;

	if (p->shutting_down) {
		(void)grpc_call_finish(call, GRPC_STATUS_UNAVAILABLE,
				       "device plugin is shutting down");
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	w->call = call;
	w->plugin = p;
	w->conn = grpc_call_conn_id(call);
	if (grpc_call_peer_cred(call, &w->pid, NULL) < 0)
		w->pid = 0;
	w->kubelet = is_kubelet_stream(p, w->pid);
	w->next = p->watchers;
	p->watchers = w;
	p->n_watchers++;
	if (w->kubelet)
		p->n_kubelet_watchers++;
	grpc_call_set_close_cb(call, watch_closed, w);
	log_info("ListAndWatch stream opened", "resource=%s devices=%u bytes=%zu pid=%d kubelet=%s",
		 p->res->name, p->res->n_devices, p->snap_len, (int)w->pid,
		 w->kubelet ? "true" : "false");
	if (w->kubelet && p->on_event)
		p->on_event(p, PLUGIN_EVENT_STREAM_OPENED, p->userdata);
	if (!p->snap) {
		/* Sends to every stream, this one included, once a list exists. */
		plugin_refresh(p);
	} else {
		update_mask(p);
		(void)send_snapshot(w, p->snap);
	}
	plugin_takeover_stream(p, w);
}

/* The gRPC layer does not log: say here, once per connection, why one was cut. */
static void on_server_event(struct grpc_server *s, enum grpc_server_event ev, uint64_t conn_id,
			    uint32_t h2_error, void *userdata)
{
	struct plugin *p = userdata;

	switch (ev) {
	case GRPC_SERVER_EVENT_REFUSED:
		/* A flood would log once per attempt: the first, then one in a hundred. */
		if (p->refused++ % 100 == 0)
			log_warn("connection refused: too many connections",
				 "resource=%s limit=%u refused=%llu", p->res->name,
				 p->ctx->limits.max_conns ? p->ctx->limits.max_conns : 64,
				 (unsigned long long)p->refused);
		break;
	case GRPC_SERVER_EVENT_OVERFLOW:
		log_warn("connection closed: too many buffered bytes", "resource=%s conn=%llu",
			 p->res->name, (unsigned long long)conn_id);
		break;
	case GRPC_SERVER_EVENT_PREFACE_TIMEOUT:
		log_warn("connection closed: no HTTP/2 preface in time", "resource=%s conn=%llu",
			 p->res->name, (unsigned long long)conn_id);
		break;
	case GRPC_SERVER_EVENT_IDLE:
		log_debug("connection closed: idle", "resource=%s conn=%llu", p->res->name,
			  (unsigned long long)conn_id);
		break;
	case GRPC_SERVER_EVENT_EVICTED:
		log_warn("connection closed: idle at the connection limit, making room",
			 "resource=%s conn=%llu limit=%u", p->res->name,
			 (unsigned long long)conn_id,
			 p->ctx->limits.max_conns ? p->ctx->limits.max_conns : 64);
		break;
	case GRPC_SERVER_EVENT_PROTOCOL:
	default:
		log_warn("connection closed: HTTP/2 protocol error",
			 "resource=%s conn=%llu h2_error=%u", p->res->name,
			 (unsigned long long)conn_id, h2_error);
		break;
	}
}

static const struct grpc_method methods[] = {
	{ "/v1beta1.DevicePlugin/GetDevicePluginOptions", false, plugin_handle_options },
	{ "/v1beta1.DevicePlugin/ListAndWatch", true, handle_list_and_watch },
	{ "/v1beta1.DevicePlugin/GetPreferredAllocation", false, plugin_handle_preferred },
	{ "/v1beta1.DevicePlugin/Allocate", false, plugin_handle_allocate },
	{ "/v1beta1.DevicePlugin/PreStartContainer", false, plugin_handle_prestart },
};

/*
 * The socket path for @r: <dir>/<r->socket>, unless another running instance (an upgrade
 * started before the old one stopped) serves there; then the first of <stem>-1.sock ...
 * that none serves. A second registration at another path supersedes the old one in the
 * kubelet without a gap, where one at the same path is refused while the old stream lives.
 */
static char *pick_path(const char *dir, const struct resource *r)
{
	const char *dot = strrchr(r->socket, '.');
	size_t stem = dot && streq(dot, ".sock") ? (size_t)(dot - r->socket) : strlen(r->socket);
	char *path = path_join(dir, r->socket);

	if (!path || !plugin_path_live(path, 0, 0))
		return path;
	for (unsigned i = 1; i < CONFIG_SOCKET_ALT_PATHS; i++) {
		char *name = strdup_printf("%.*s-%u.sock", (int)stem, r->socket, i);
		char *alt = name ? path_join(dir, name) : NULL;

		free(name);
		if (!alt)
			break;
		if (!plugin_path_live(alt, 0, 0)) {
			log_info("socket path served by another instance, using another",
				 "resource=%s taken=%s path=%s", r->name, path, alt);
			free(path);
			return alt;
		}
		free(alt);
	}
	log_warn("every socket path is served by another instance, taking the first",
		 "resource=%s path=%s", r->name, path);
	return path;
}

bool plugin_path_taken(const struct plugin *p)
{
	return plugin_path_live(p->path, p->sock_dev, p->sock_ino);
}

bool plugin_ceded(const struct plugin *p)
{
	return p->ceded;
}

const char *plugin_endpoint(const struct plugin *p)
{
	return p->endpoint;
}

/* A live peer took our path: stop listening (our old inode is unlinked already), say so once. */
static void cede(struct plugin *p)
{
	if (p->ceded)
		return;
	p->ceded = true;
	p->served = false;
	backoff_reset(&p->listen_backoff);
	if (p->listen_retry)
		loop_timer_disarm(p->listen_retry);
	grpc_server_unlisten(p->server); /* only unlinks its own inode: the peer's stays */
	log_warn("socket path taken by another running instance, standing down until it is free",
		 "resource=%s path=%s", p->res->name, p->path);
	if (p->on_event)
		p->on_event(p, PLUGIN_EVENT_CEDED, p->userdata);
}

static void on_listen_retry(struct loop_timer *t, void *userdata)
{
	struct plugin *p = userdata;

	if (plugin_serve(p) && p->on_event)
		p->on_event(p, PLUGIN_EVENT_SERVING, p->userdata);
}

static int plugin_listen(struct plugin *p, bool quiet)
{
	struct stat st;
	int r;

	r = grpc_server_listen(p->server, p->path);
	if (r < 0 && quiet)
		return r;
	if (r < 0)
		return log_error_errno(r, "serving device plugin socket failed",
				       "resource=%s path=%s", p->res->name, p->path);
	if (stat(p->path, &st) == 0) {
		p->sock_dev = st.st_dev;
		p->sock_ino = st.st_ino;
	}
	/*
	 * Its creation (IN_CREATE) came before listen(), when a connection was still refused:
	 * a touch now tells the other instances that it is live (plugin_peer_event()).
	 */
	(void)grpc_server_touch(p->server);
	p->stats.sockets_served++;
	log_info("serving device plugin socket", "resource=%s path=%s", p->res->name, p->path);
	return 0;
}

int plugin_new(const struct plugin_ctx *ctx, struct resource *r, plugin_event_fn *on_event,
	       void *userdata, struct plugin **ret)
{
	const char *dot = strrchr(r->socket, '.');
	struct plugin *p;
	int e = -ENOMEM, lock = -1;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->retry_backoff = BACKOFF_INIT(RETRY_MIN_USEC, 2, RETRY_MAX_USEC);
	p->listen_backoff = BACKOFF_INIT(LISTEN_BACKOFF_MIN, 2, LISTEN_BACKOFF_MAX);
	p->mask_slot = -1;
	p->on_event = on_event;
	p->userdata = userdata;
	p->stem = dot && streq(dot, ".sock") ? strndup(r->socket, (size_t)(dot - r->socket)) :
					       strdup(r->socket);
	if (!p->stem)
		goto fail;
	/* Chosen and bound under the lock: another instance starting now waits for our bind. */
	if (ctx->loop)
		lock = plugin_dir_lock(ctx->dir);
	p->path = pick_path(ctx->dir, r);
	if (!p->path)
		goto fail;
	p->endpoint = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
	e = grpc_server_new(ctx->loop, methods, ELEMENTSOF(methods), &ctx->limits, p, &p->server);
	if (e >= 0 && ctx->loop)
		e = loop_timer_new(ctx->loop, on_listen_retry, p, &p->listen_retry);
	if (e < 0)
		goto fail;
	grpc_server_set_event_cb(p->server, on_server_event, p);
	grpc_server_set_conn_closed_cb(p->server, plugin_conn_closed, p);
	p->res = r;
	/*
	 * Never over a live peer (every path taken: plugin_serve() stands down). A failure (the
	 * directory is missing) is plugin_serve()'s to retry and log.
	 */
	if (ctx->loop && !plugin_path_taken(p) && plugin_listen(p, true) == 0)
		p->served = true;
	plugin_dir_unlock(lock);
	plugin_peers_scan(p);
	*ret = p;
	return 0;
fail:
	plugin_dir_unlock(lock);
	grpc_server_free(p->server);
	free(p->path);
	free(p->stem);
	free(p);
	return e;
}

bool plugin_socket_ok(const struct plugin *p)
{
	struct stat st;

	return stat(p->path, &st) == 0 && st.st_ino == p->sock_ino && st.st_dev == p->sock_dev;
}

bool plugin_serve(struct plugin *p)
{
	bool was_ceded;
	int r, lock;

	if (p->shutting_down)
		return false;
	if (p->served && plugin_socket_ok(p))
		return true;
	lock = plugin_dir_lock(p->ctx->dir);
	if (plugin_path_taken(p)) {
		plugin_dir_unlock(lock);
		cede(p);
		return false;
	}
	was_ceded = p->ceded;
	p->ceded = false;
	r = plugin_listen(p, false);
	plugin_dir_unlock(lock);
	if (r < 0) {
		usec_t delay = backoff_next(&p->listen_backoff);

		(void)log_warn_errno(r, "cannot serve the device plugin socket, retrying",
				     "resource=%s path=%s retry_ms=%llu", p->res->name, p->path,
				     (unsigned long long)(delay / USEC_PER_MSEC));
		p->served = false;
		if (p->listen_retry)
			loop_timer_arm(p->listen_retry, delay);
		return false;
	}
	if (was_ceded)
		log_info("socket path free again, serving it", "resource=%s path=%s", p->res->name,
			 p->path);
	if (backoff_started(&p->listen_backoff))
		log_info("serving the device plugin socket again", "resource=%s path=%s",
			 p->res->name, p->path);
	backoff_reset(&p->listen_backoff);
	p->served = true;
	if (p->listen_retry)
		loop_timer_disarm(p->listen_retry);
	return true;
}

void plugin_unserve(struct plugin *p, bool fresh)
{
	p->served = false;
	if (fresh)
		backoff_reset(&p->listen_backoff);
}

void plugin_set_resource(struct plugin *p, struct resource *r)
{
	resource_free(p->res);
	p->res = r;
	p->live = mfree(p->live);
	p->in_use = mfree(p->in_use);
	expire_recent_older(p, 0);
	p->mask_slot = -1;
	plugin_refresh(p);
}

void plugin_apply_limits(struct plugin *p)
{
	if (grpc_server_set_limits(p->server, &p->ctx->limits) < 0)
		log_warn("invalid gRPC limits, keeping the old ones", "resource=%s", p->res->name);
}

const struct resource *plugin_resource(const struct plugin *p)
{
	return p->res;
}

struct live_scan {
	const struct resource *res;
	uint64_t *bits;
	unsigned n;
};

static void mark_live(const char *resource, const char *id, void *userdata)
{
	struct live_scan *ls = userdata;
	int dev;

	if (!resource || !id || !streq(resource, ls->res->name))
		return;
	dev = resource_device_lookup(ls->res, id, strlen(id));
	if (dev < 0)
		return;
	bitmap_set(ls->bits, (unsigned)dev);
	ls->n++;
}

int plugin_set_live_podres(struct plugin *p, const uint8_t *resp, size_t len)
{
	struct live_scan ls = { .res = p->res };
	int r;

	ls.bits = calloc(BITMAP_WORDS(p->res->n_devices) + 1, sizeof(uint64_t));
	if (!ls.bits)
		return -ENOMEM;
	r = podres_for_each_device(resp, len, mark_live, &ls);
	if (r < 0) {
		free(ls.bits);
		return r;
	}
	log_debug("pod-resources answer", "resource=%s live_units=%u", p->res->name, ls.n);
	free(p->live);
	p->live = ls.bits;
	plugin_refresh(p);
	return 0;
}

unsigned plugin_watchers(const struct plugin *p)
{
	return p->n_watchers;
}

unsigned plugin_kubelet_watchers(const struct plugin *p)
{
	return p->n_kubelet_watchers;
}

void plugin_expect_kubelet(struct plugin *p, pid_t kubelet_pid)
{
	p->expect_called = true;
	p->expect_armed = true;
	p->kubelet_pid = kubelet_pid;
}

struct grpc_server *plugin_grpc_server(struct plugin *p)
{
	return p->server;
}

const char *plugin_socket_path(const struct plugin *p)
{
	return p->path;
}

void plugin_get_stats(const struct plugin *p, struct plugin_stats *ret)
{
	*ret = p->stats;
	ret->mask_slot = p->mask_slot;
	grpc_server_get_stats(p->server, &ret->grpc);
}

static void shutdown_complete(struct grpc_server *s, void *userdata)
{
	struct plugin *p = userdata;

	if (p->shutdown_done)
		p->shutdown_done(p->shutdown_userdata);
}

void plugin_shutdown(struct plugin *p, usec_t grace_usec, void (*done)(void *userdata),
		     void *userdata)
{
	p->shutting_down = true;
	plugin_peers_free(p);
	if (p->ended_timer)
		loop_timer_disarm(p->ended_timer);
	if (p->retry)
		loop_timer_disarm(p->retry);
	if (p->listen_retry)
		loop_timer_disarm(p->listen_retry);
	p->shutdown_done = done;
	p->shutdown_userdata = userdata;
	grpc_server_shutdown(p->server, grace_usec, shutdown_complete, p);
}

struct plugin *plugin_free(struct plugin *p)
{
	if (!p)
		return NULL;
	p->shutting_down = true;
	plugin_peers_free(p);
	p->server = grpc_server_free(p->server);
	p->retry = loop_timer_free(p->retry);
	p->listen_retry = loop_timer_free(p->listen_retry);
	p->ended_timer = loop_timer_free(p->ended_timer);
	expire_recent_older(p, 0);
	free(p->live);
	free(p->in_use);
	grpc_shared_msg_unref(p->snap);
	resource_free(p->res);
	free(p->path);
	free(p->stem);
	free(p);
	return NULL;
}
