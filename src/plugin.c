#include "plugin.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "deviceplugin.pb-c.h"
#include "gpu.h"
#include "loop.h"
#include "pbwire.h"
#include "resource.h"

#define LOG_MODULE "plugin"
#include "log.h"

/* Units handed out by Allocate count as live for this long even before pod-resources shows them. */
#define RECENT_ALLOC_USEC (30 * USEC_PER_SEC)
/* A device list that could not be built is tried again after this, doubling up to the max. */
#define RETRY_MIN_USEC (100 * USEC_PER_MSEC)
#define RETRY_MAX_USEC (10 * USEC_PER_SEC)

struct watcher {
	struct grpc_call *call;
	struct plugin *plugin;
	struct watcher *next;
	bool kubelet; /* the kubelet's stream (plugin.h says how it is told) */
	pid_t pid;    /* the peer's, 0 when unknown */
};

struct recent_alloc {
	usec_t when;
	unsigned *devs;
	size_t n;
	struct recent_alloc *next;
};

struct plugin {
	const struct plugin_ctx *ctx;
	struct resource *res;
	struct grpc_server *server;
	char *path;
	dev_t sock_dev;
	ino_t sock_ino;
	struct watcher *watchers;
	unsigned n_watchers;
	unsigned n_kubelet_watchers;
	bool expect_called; /* plugin_expect_kubelet() was called at least once */
	bool expect_armed;  /* the next stream is the kubelet's, when pids cannot tell */
	pid_t kubelet_pid;
	struct loop_timer *retry; /* builds the device list again after a failure */
	usec_t retry_usec;
	/* The last list sent (encoded ListAndWatchResponse), shared by every stream; or NULL. */
	struct grpc_shared_msg *snap;
	size_t snap_len;
	uint64_t *live;	  /* gpumem: devices in use per pod-resources, or NULL */
	uint64_t *in_use; /* live | recent, rebuilt by update_mask() */
	struct recent_alloc *recent;
	int mask_slot;
	bool shutting_down;
	uint64_t refused;
	plugin_event_fn *on_stream_lost;
	void *userdata;
	void (*shutdown_done)(void *userdata);
	void *shutdown_userdata;
	struct plugin_stats stats;
};

/* --- health and gpumem masking --- */

/*
 * A GPU's health. A resource built before a reload that failed half-way could name a GPU
 * index the current discovery does not have: such a GPU is unhealthy, never read past.
 */
static bool gpu_up(const struct plugin *p, unsigned gpu)
{
	return gpu < p->ctx->info->n_devices && p->ctx->gpu_healthy[gpu];
}

static inline bool bit_get(const uint64_t *bits, unsigned d)
{
	return bits[d / 64] >> (d % 64) & 1;
}

static void expire_recent(struct plugin *p)
{
	usec_t now = now_usec();
	struct recent_alloc **pp = &p->recent;

	while (*pp) {
		struct recent_alloc *ra = *pp;

		if (now - ra->when > RECENT_ALLOC_USEC) {
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
	size_t nwords = (p->res->n_devices + 63) / 64 + 1;

	expire_recent(p);
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
				p->in_use[ra->devs[i] / 64] |= (uint64_t)1 << (ra->devs[i] % 64);
	return 0;
}

static unsigned slot_free_units(const struct plugin *p, unsigned s)
{
	const struct resource_gpu *g = &p->res->gpus[s];
	unsigned used = 0;

	for (unsigned i = 0; i < g->count; i++)
		used += bit_get(p->in_use, g->first + i);
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

		if (!gpu_up(p, r->gpus[s].gpu))
			continue;
		f = slot_free_units(p, s);
		if (best < 0 || f > best_free) {
			best = (int)s;
			best_free = f;
		}
	}
	if (cur >= 0 && best >= 0 && cur != best && gpu_up(p, r->gpus[cur].gpu)) {
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

	if (!gpu_up(p, r->gpus[s].gpu))
		return false;
	if (p->mask_slot < 0 || (unsigned)p->mask_slot == s)
		return true;
	return bit_get(p->in_use, d);
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
	p->retry_usec = p->retry_usec ? MIN(p->retry_usec * 2, RETRY_MAX_USEC) : RETRY_MIN_USEC;
	loop_timer_arm(p->retry, p->retry_usec);
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
		p->retry_usec = 0;
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
	p->retry_usec = 0;
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
	free(w);
	log_warn("ListAndWatch stream ended by the kubelet", "resource=%s grpc_status=%s",
		 p->res->name, grpc_status_name((int)status));
	if (p->on_stream_lost)
		p->on_stream_lost(p, p->userdata);
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
	if (!p->snap) {
		/* Sends to every stream, this one included, once a list exists. */
		plugin_refresh(p);
		return;
	}
	update_mask(p);
	(void)send_snapshot(w, p->snap);
}

/* --- unary helpers --- */

static void reply(struct grpc_call *call, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(n ? n : 1);
	int r;

	if (!b) {
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	protobuf_c_message_pack(m, b);
	r = grpc_call_send(call, b, n);
	free(b);
	if (r == -EMSGSIZE)
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				       "response larger than the kubelet accepts (4 MiB)");
	else if (r < 0)
		(void)grpc_call_finish(call, grpc_status_from_errno(r),
				       "sending the response failed");
	else
		(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void fail(struct grpc_call *call, enum grpc_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct grpc_call *call, enum grpc_status st, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("request refused", "method=%s grpc_status=%s err=%s", grpc_call_path(call),
		 grpc_status_name((int)st), log_q(msg));
	(void)grpc_call_finish(call, st, msg);
}

static void handle_options(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.pre_start_required = false;
	o.get_preferred_allocation_available = true;
	reply(call, &o.base);
}

static void handle_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	V1beta1__PreStartContainerRequest *m =
		v1beta1__pre_start_container_request__unpack(NULL, len, req);
	V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

	if (!m) {
		fail(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed PreStartContainerRequest");
		return;
	}
	v1beta1__pre_start_container_request__free_unpacked(m, NULL);
	reply(call, &o.base);
}

/*
 * Maps an Allocate request's IDs to device indices. An unknown or duplicate ID is an error.
 * Returns the count, or -EINVAL with @bad naming the ID and @why saying what is wrong.
 */
static int map_ids(const struct plugin *p, char **ids, size_t n, uint64_t *seen, unsigned *out,
		   const char **bad, const char **why)
{
	for (size_t i = 0; i < n; i++) {
		int d = resource_device_lookup(p->res, ids[i], strlen(ids[i]));

		if (d < 0 || (seen[d / 64] >> (d % 64) & 1)) {
			*bad = ids[i];
			*why = d < 0 ? "unknown device" : "duplicate device";
			return -EINVAL;
		}
		seen[d / 64] |= (uint64_t)1 << (d % 64);
		out[i] = (unsigned)d;
	}
	return (int)n;
}

/* One ContainerPreferredAllocationRequest, decoded in place (IDs mapped, never copied). */
struct pref_req {
	unsigned *avail, *must;
	size_t n_avail, n_must;
	int64_t size;
};

/*
 * Decodes a ContainerPreferredAllocationRequest in one pass after a counting pass: available
 * IDs this resource does not have are skipped (the kubelet may list anything); an unknown or
 * duplicate must-include ID is an error. @seen and @must_bits are zeroed bitmaps.
 * Returns 0, -EBADMSG, -ENOMEM, or -EINVAL with @bad/@badlen naming the ID.
 */
static int decode_pref(const struct plugin *p, const uint8_t *data, size_t len, uint64_t *seen,
		       uint64_t *must_bits, struct pref_req *q, const char **why,
		       const uint8_t **bad, size_t *badlen)
{
	struct pb_reader rd;
	struct pb_field f;
	size_t na = 0, nm = 0, k = 0;
	int r;

	pb_reader_init(&rd, data, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		na += f.number == 1;
		nm += f.number == 2;
	}
	if (r < 0)
		return r;
	q->avail = malloc((na + 1) * sizeof(*q->avail));
	q->must = malloc((nm + 1) * sizeof(*q->must));
	if (!q->avail || !q->must)
		return -ENOMEM;
	pb_reader_init(&rd, data, len);
	while (pb_next(&rd, &f) > 0) {
		int d;

		if (f.number == 3 && f.wire == PB_VARINT) {
			q->size = (int64_t)(int32_t)f.varint;
			continue;
		}
		if ((f.number != 1 && f.number != 2) || f.wire != PB_LEN)
			continue;
		d = resource_device_lookup(p->res, (const char *)f.data, f.len);
		if (f.number == 1) {
			if (d >= 0 && !(seen[d / 64] >> (d % 64) & 1)) {
				seen[d / 64] |= (uint64_t)1 << (d % 64);
				q->avail[q->n_avail++] = (unsigned)d;
			}
			continue;
		}
		if (d < 0 || (must_bits[d / 64] >> (d % 64) & 1)) {
			*why = d < 0 ? "unknown device" : "duplicate device";
			*bad = f.data;
			*badlen = f.len;
			return -EINVAL;
		}
		must_bits[d / 64] |= (uint64_t)1 << (d % 64);
		q->must[q->n_must++] = (unsigned)d;
	}
	/* must-include devices are not also candidates */
	for (size_t i = 0; i < q->n_avail; i++)
		if (!(must_bits[q->avail[i] / 64] >> (q->avail[i] % 64) & 1))
			q->avail[k++] = q->avail[i];
	q->n_avail = k;
	return 0;
}

static void handle_preferred(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct plugin *p = userdata;
	const struct resource *res = p->res;
	V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *crs[16], *cr;
	struct resource_pref_ctx pctx = { .numa = p->ctx->numa,
					  .distance = p->ctx->distance,
					  .n_all = p->ctx->info->n_devices };
	size_t nwords = (res->n_devices + 63) / 64 + 1;
	struct pref_req q = { 0 };
	uint64_t *seen = NULL, *must_bits = NULL;
	unsigned *pick = NULL;
	usec_t t0 = now_usec();
	struct pb_reader rd;
	struct pb_field f;
	int r;

	p->stats.preferred++;
	out.container_responses = crs;
	seen = malloc(nwords * sizeof(*seen));
	must_bits = malloc(nwords * sizeof(*must_bits));
	if (!seen || !must_bits)
		goto oom;
	pb_reader_init(&rd, req, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		const char *why = NULL;
		const uint8_t *bad = NULL;
		size_t badlen = 0;
		char *ip;
		int np;

		if (f.number != 1 || f.wire != PB_LEN)
			continue;
		if (out.n_container_responses == ELEMENTSOF(crs)) {
			fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			     "too many container requests (at most %zu)", ELEMENTSOF(crs));
			goto out;
		}
		free(q.avail);
		free(q.must);
		free(pick);
		pick = NULL;
		memset(&q, 0, sizeof(q));
		memset(seen, 0, nwords * sizeof(*seen));
		memset(must_bits, 0, nwords * sizeof(*must_bits));
		r = decode_pref(p, f.data, f.len, seen, must_bits, &q, &why, &bad, &badlen);
		if (r == -ENOMEM)
			goto oom;
		if (r == -EINVAL) {
			fail(call, GRPC_STATUS_INVALID_ARGUMENT, "must-include %s: %.*s", why,
			     (int)MIN(badlen, 128), (const char *)bad);
			goto out;
		}
		if (r < 0)
			break;
		if (q.size < 0 || (uint64_t)q.size > q.n_avail + q.n_must ||
		    (size_t)q.size < q.n_must) {
			fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			     "allocation_size %lld is out of range (%zu devices available, %zu must-include)",
			     (long long)q.size, q.n_avail + q.n_must, q.n_must);
			goto out;
		}
		pick = malloc(((size_t)q.size + 1) * sizeof(*pick));
		if (!pick)
			goto oom;
		np = resource_preferred(res, &pctx, q.avail, q.n_avail, q.must, q.n_must,
					(unsigned)q.size, pick);
		if (np < 0) {
			fail(call, grpc_status_from_errno(np), "choosing devices failed");
			goto out;
		}
		cr = calloc(1, sizeof(*cr));
		if (!cr)
			goto oom;
		v1beta1__container_preferred_allocation_response__init(cr);
		crs[out.n_container_responses++] = cr;
		/* One block for every ID string (the slot past the last ID holds it until packed). */
		cr->deviceids = calloc((size_t)np + 1, sizeof(char *));
		ip = malloc((size_t)np * 128 + 1);
		if (!cr->deviceids || !ip) {
			free(ip);
			goto oom;
		}
		cr->deviceids[np] = ip;
		for (int i = 0; i < np; i++) {
			size_t l = resource_device_id(res, pick[i], ip);

			cr->deviceids[i] = ip;
			ip += l + 1;
		}
		cr->n_deviceids = (size_t)np;
	}
	if (r < 0) {
		fail(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed PreferredAllocationRequest");
		goto out;
	}
	reply(call, &out.base);
	log_debug("preferred allocation",
		  "resource=%s bytes=%zu available=%zu size=%lld dur_us=%llu", res->name, len,
		  q.n_avail + q.n_must, (long long)q.size, (unsigned long long)(now_usec() - t0));
	goto out;
oom:
	fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
out:
	for (size_t c = 0; c < out.n_container_responses; c++) {
		if (crs[c]->deviceids)
			free(crs[c]->deviceids[crs[c]->n_deviceids]);
		free(crs[c]->deviceids);
		free(crs[c]);
	}
	free(seen);
	free(must_bits);
	free(q.avail);
	free(q.must);
	free(pick);
}

static void remember_alloc(struct plugin *p, const unsigned *devs, size_t n)
{
	struct recent_alloc *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return;
	ra->devs = malloc((n + 1) * sizeof(*devs));
	if (!ra->devs) {
		free(ra);
		return;
	}
	memcpy(ra->devs, devs, n * sizeof(*devs));
	ra->n = n;
	ra->when = now_usec();
	ra->next = p->recent;
	p->recent = ra;
}

/* Builds one container's response. Returns 0, or a gRPC status with @msg filled. */
static enum grpc_status allocate_one(struct plugin *p, const V1beta1__ContainerAllocateRequest *q,
				     uint64_t *seen, size_t nwords,
				     V1beta1__ContainerAllocateResponse **ret, char *msg,
				     size_t msgsz)
{
	const struct resource *res = p->res;
	const struct gpu_device *gpus[64];
	uint64_t limits[64];
	unsigned *devs = NULL, order[64], slot_units[64] = { 0 };
	const char *bad = NULL, *why = NULL;
	struct alloc_extra extra = { 0 };
	size_t n_gpus = 0;
	enum grpc_status st = GRPC_STATUS_OK;
	int n, r;

	if (q->n_devices_ids == 0) {
		snprintf(msg, msgsz, "invalid allocation request for \"%s\": no devices requested",
			 res->name);
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	devs = malloc(q->n_devices_ids * sizeof(*devs));
	if (!devs) {
		snprintf(msg, msgsz, "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	memset(seen, 0, nwords * sizeof(*seen));
	n = map_ids(p, q->devices_ids, q->n_devices_ids, seen, devs, &bad, &why);
	if (n < 0) {
		snprintf(msg, msgsz, "invalid allocation request for \"%s\": %s: %s", res->name,
			 why, bad);
		st = GRPC_STATUS_INVALID_ARGUMENT;
		goto out;
	}
	if (res->kind == RESOURCE_REPLICA && res->fail_requests_gt_one && n > 1) {
		snprintf(
			msg, msgsz,
			"invalid allocation request for \"%s\": invalid request: maximum request size for shared resources is 1; found %d",
			res->name, n);
		st = GRPC_STATUS_INVALID_ARGUMENT;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		unsigned s = resource_device_slot(res, devs[i]);

		if (!gpu_up(p, res->gpus[s].gpu)) {
			char id[128];

			resource_device_id(res, devs[i], id);
			snprintf(
				msg, msgsz,
				"invalid allocation request for \"%s\": device %s is unhealthy (GPU %u)",
				res->name, id, res->gpus[s].gpu);
			st = GRPC_STATUS_INVALID_ARGUMENT;
			goto out;
		}
		/* Whole GPUs in the order the request first names them (NVIDIA keeps it), each once. */
		if (slot_units[s]++ == 0 && n_gpus < ELEMENTSOF(gpus))
			order[n_gpus++] = s;
	}
	/*
	 * Replicas and units come in the kubelet's set order, which is random: deliver their GPUs
	 * in index order so CUDA device 0 (and CUDA_DEVICE_MEMORY_LIMIT_0) is stable.
	 */
	if (res->kind != RESOURCE_GPU)
		for (size_t k = 1; k < n_gpus; k++)
			for (size_t j = k; j > 0 && order[j - 1] > order[j]; j--) {
				unsigned t = order[j];

				order[j] = order[j - 1];
				order[j - 1] = t;
			}
	for (size_t k = 0; k < n_gpus; k++) {
		gpus[k] = &p->ctx->info->devices[res->gpus[order[k]].gpu];
		limits[k] = (uint64_t)slot_units[order[k]] * res->unit_mib;
	}
	if (res->kind == RESOURCE_GPUMEM) {
		if (n_gpus > 1 && !p->ctx->split_allow) {
			snprintf(
				msg, msgsz,
				"gpumem request of %d units (%llu MiB) spans %zu GPUs and onSplit is reject: a container's nvidia.com/gpumem must come from one GPU; retry the pod, or set edgegpu.sharing.memory.onSplit: allow",
				n, (unsigned long long)((uint64_t)n * res->unit_mib), n_gpus);
			st = GRPC_STATUS_FAILED_PRECONDITION;
			goto out;
		}
		extra.mem_limit_mib = limits;
	}
	r = alloc_response_new(&p->ctx->alloc, gpus, n_gpus, &extra, ret);
	if (r < 0) {
		snprintf(msg, msgsz, "building the allocate response failed: %s", strerror(-r));
		st = grpc_status_from_errno(r);
		goto out;
	}
	if (res->kind == RESOURCE_GPUMEM)
		remember_alloc(p, devs, (size_t)n);
out:
	free(devs);
	return st;
}

static void handle_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct plugin *p = userdata;
	V1beta1__AllocateRequest *m;
	V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
	V1beta1__ContainerAllocateResponse **crs = NULL;
	size_t nwords = (p->res->n_devices + 63) / 64 + 1;
	uint64_t *seen = NULL;
	char msg[1024];

	usec_t t0 = now_usec();
	int r;

	p->stats.allocates++;
	/*
	 * While no valid CDI spec exists, CDI names resolve nowhere: every container would fail
	 * at creation. Refuse, saying why, until the daemon has written the spec.
	 */
	if (p->ctx->cdi_error && *p->ctx->cdi_error && alloc_uses_cdi(&p->ctx->alloc)) {
		p->stats.allocate_errors++;
		fail(call, GRPC_STATUS_FAILED_PRECONDITION, "no valid CDI spec: %s",
		     *p->ctx->cdi_error);
		return;
	}
	r = alloc_request_unpack(req, len, &m, msg, sizeof(msg));
	if (r < 0) {
		p->stats.allocate_errors++;
		if (r == -ENOMEM)
			fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
			     "out of memory decoding the AllocateRequest");
		else if (r == -EINVAL)
			fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			     "invalid allocation request for \"%s\": device ID with a NUL byte: %s",
			     p->res->name, msg);
		else
			fail(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed AllocateRequest");
		return;
	}
	if (m->n_container_requests == 0) {
		p->stats.allocate_errors++;
		fail(call, GRPC_STATUS_INVALID_ARGUMENT,
		     "AllocateRequest for \"%s\" has no container requests", p->res->name);
		goto out;
	}
	crs = calloc(m->n_container_requests + 1, sizeof(*crs));
	seen = malloc(nwords * sizeof(*seen));
	if (!crs || !seen) {
		fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	out.container_responses = crs;
	for (size_t c = 0; c < m->n_container_requests; c++) {
		enum grpc_status st = allocate_one(p, m->container_requests[c], seen, nwords,
						   &crs[c], msg, sizeof(msg));

		if (st != GRPC_STATUS_OK) {
			p->stats.allocate_errors++;
			fail(call, st, "%s", msg);
			goto out;
		}
		out.n_container_responses++;
	}
	reply(call, &out.base);
	log_debug("allocate", "resource=%s containers=%zu bytes=%zu dur_us=%llu", p->res->name,
		  m->n_container_requests, len, (unsigned long long)(now_usec() - t0));
	if (p->res->kind == RESOURCE_GPUMEM && p->ctx->mask)
		plugin_refresh(p);
out:
	for (size_t c = 0; crs && c < out.n_container_responses; c++)
		alloc_response_free(crs[c]);
	free(crs);
	free(seen);
	v1beta1__allocate_request__free_unpacked(m, NULL);
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
	{ "/v1beta1.DevicePlugin/GetDevicePluginOptions", false, handle_options },
	{ "/v1beta1.DevicePlugin/ListAndWatch", true, handle_list_and_watch },
	{ "/v1beta1.DevicePlugin/GetPreferredAllocation", false, handle_preferred },
	{ "/v1beta1.DevicePlugin/Allocate", false, handle_allocate },
	{ "/v1beta1.DevicePlugin/PreStartContainer", false, handle_prestart },
};

int plugin_new(const struct plugin_ctx *ctx, struct resource *r, plugin_event_fn *on_stream_lost,
	       void *userdata, struct plugin **ret)
{
	struct plugin *p;
	int e;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->mask_slot = -1;
	p->on_stream_lost = on_stream_lost;
	p->userdata = userdata;
	p->path = path_join(ctx->dir, r->socket);
	if (!p->path) {
		free(p);
		return -ENOMEM;
	}
	e = grpc_server_new(ctx->loop, methods, ELEMENTSOF(methods), &ctx->limits, p, &p->server);
	if (e < 0) {
		free(p->path);
		free(p);
		return e;
	}
	grpc_server_set_event_cb(p->server, on_server_event, p);
	p->res = r;
	*ret = p;
	return 0;
}

int plugin_listen(struct plugin *p)
{
	struct stat st;
	int r;

	r = grpc_server_listen(p->server, p->path);
	if (r < 0)
		return log_error_errno(r, "serving device plugin socket failed",
				       "resource=%s path=%s", p->res->name, p->path);
	if (stat(p->path, &st) == 0) {
		p->sock_dev = st.st_dev;
		p->sock_ino = st.st_ino;
	}
	log_info("serving device plugin socket", "resource=%s path=%s", p->res->name, p->path);
	return 0;
}

bool plugin_socket_ok(const struct plugin *p)
{
	struct stat st;

	return stat(p->path, &st) == 0 && st.st_ino == p->sock_ino && st.st_dev == p->sock_dev;
}

void plugin_set_resource(struct plugin *p, struct resource *r)
{
	struct recent_alloc *ra;

	resource_free(p->res);
	p->res = r;
	p->live = mfree(p->live);
	p->in_use = mfree(p->in_use);
	while ((ra = p->recent)) {
		p->recent = ra->next;
		free(ra->devs);
		free(ra);
	}
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

void plugin_set_live(struct plugin *p, const uint64_t *bitmap)
{
	size_t nwords = (p->res->n_devices + 63) / 64 + 1;

	if (!bitmap) {
		p->live = mfree(p->live);
	} else {
		if (!p->live)
			p->live = calloc(nwords, sizeof(uint64_t));
		if (!p->live)
			return;
		memcpy(p->live, bitmap, nwords * sizeof(uint64_t));
	}
	plugin_refresh(p);
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
	if (p->retry)
		loop_timer_disarm(p->retry);
	p->shutdown_done = done;
	p->shutdown_userdata = userdata;
	grpc_server_shutdown(p->server, grace_usec, shutdown_complete, p);
}

struct plugin *plugin_free(struct plugin *p)
{
	struct recent_alloc *ra;

	if (!p)
		return NULL;
	p->shutting_down = true;
	p->server = grpc_server_free(p->server);
	p->retry = loop_timer_free(p->retry);
	while ((ra = p->recent)) {
		p->recent = ra->next;
		free(ra->devs);
		free(ra);
	}
	free(p->live);
	free(p->in_use);
	grpc_shared_msg_unref(p->snap);
	resource_free(p->res);
	free(p->path);
	free(p);
	return NULL;
}
