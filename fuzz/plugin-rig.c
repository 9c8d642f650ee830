/* The fuzzers' device plugin (plugin-rig.h). */
#include "plugin-rig.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "gpus.h"
#include "log.h"
#include "plugin.h"

static struct gpu_device devs[RIG_GPUS];
static struct gpu_info info = { .devices = devs, .n_devices = RIG_GPUS };
static const int numa[RIG_GPUS] = { 0, 0, 1, 1 };
static struct plugin_ctx ctx;

static bool healthy_fn(unsigned gpu, void *userdata)
{
	const struct rig *r = userdata;

	return gpu < RIG_GPUS && r->healthy[gpu];
}

const char *rig_uuid(unsigned gpu)
{
	return devs[gpu].uuid;
}

void rig_init(struct rig *r, uint8_t sel)
{
	static const unsigned all[RIG_GPUS] = { 0, 1, 2, 3 }, reps[RIG_GPUS] = { 4, 2, 3, 2 };
	struct resource_spec spec = { .name = "nvidia.com/gpu", .gpus = all, .n_gpus = RIG_GPUS };
	struct resource *res = NULL;
	char *err = NULL;

	log_max_level = LOG_LEVEL_COUNT; /* refusals are what a fuzzer sends most */
	memset(r, 0, sizeof(*r));
	unit_gpus_fill(devs, RIG_GPUS);
	switch (sel & 3) {
	case 1:
	case 3:
		spec.name = "nvidia.com/gpu.shared";
		spec.kind = RESOURCE_REPLICA;
		spec.replicas = 2;
		spec.gpu_replicas = sel & 2 ? reps : NULL;
		spec.fail_requests_gt_one = sel & 4;
		break;
	case 2:
		spec.name = "nvidia.com/gpumem";
		spec.kind = RESOURCE_GPUMEM;
		spec.unit_mib = 4096;
		spec.reserve_mib = 1024;
		break;
	}
	for (unsigned i = 0; i < RIG_GPUS; i++)
		r->healthy[i] = (sel >> 4) == 0xf || !(sel >> (4 + i) & 1);
	memset(&ctx, 0, sizeof(ctx));
	ctx.dir = "/nonexistent";
	ctx.info = &info;
	ctx.gpu_healthy = healthy_fn;
	ctx.health_userdata = r;
	ctx.numa = numa;
	ctx.alloc.strategies = ALLOC_ENVVAR;
	ctx.alloc.id_strategy = ALLOC_ID_UUID;
	ctx.split_allow = r->split_allow = sel & 8;
	ctx.limits = (struct grpc_limits){ .max_recv_msg = 1 << 20, .max_send_msg = 4 << 20 };
	if (resource_new(&spec, &info, &res, &err) < 0 ||
	    plugin_new(&ctx, res, NULL, NULL, &r->plugin) < 0)
		abort();
	r->res = plugin_resource(r->plugin);
	r->ids = calloc(r->res->n_devices, sizeof(*r->ids));
	if (!r->ids)
		abort();
	for (unsigned i = 0; i < r->res->n_devices; i++)
		(void)resource_device_id(r->res, i, r->ids[i]);
}

void rig_free(struct rig *r)
{
	plugin_free(r->plugin);
	free(r->ids);
}

int rig_find(const struct rig *r, const char *id, size_t len)
{
	for (unsigned i = 0; i < r->res->n_devices; i++)
		if (strlen(r->ids[i]) == len && memcmp(r->ids[i], id, len) == 0)
			return (int)i;
	return -1;
}

/* A varint at *@p (before @end); false when cut short or too long. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned s = 0; s < 64 && *p < end; s += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

void rig_scan(const uint8_t *p, size_t len, unsigned id_fields, bool *field0, bool *nul)
{
	const uint8_t *end = p + len;
	uint64_t k, n;

	*field0 = *nul = false;
	while (p < end && varint(&p, end, &k)) {
		*field0 |= k >> 3 == 0;
		if ((k & 7) == 0) {
			if (!varint(&p, end, &n))
				return;
			continue;
		}
		if ((k & 7) == 1 || (k & 7) == 5) {
			if (end - p < ((k & 7) == 1 ? 8 : 4))
				return;
			p += (k & 7) == 1 ? 8 : 4;
			continue;
		}
		if ((k & 7) != 2 || !varint(&p, end, &n) || n > (uint64_t)(end - p))
			return;
		if (k >> 3 == 1) {
			const uint8_t *q = p, *qe = p + n;
			uint64_t j, l;

			while (q < qe && varint(&q, qe, &j)) {
				*field0 |= j >> 3 == 0;
				if ((j & 7) == 0) {
					if (!varint(&q, qe, &l))
						break;
					continue;
				}
				if ((j & 7) == 1 || (j & 7) == 5) {
					if (qe - q < ((j & 7) == 1 ? 8 : 4))
						break;
					q += (j & 7) == 1 ? 8 : 4;
					continue;
				}
				if ((j & 7) != 2 || !varint(&q, qe, &l) || l > (uint64_t)(qe - q))
					break;
				if (j >> 3 >= 1 && j >> 3 <= id_fields && memchr(q, 0, l))
					*nul = true;
				q += l;
			}
		}
		p += n;
	}
}

/* --- the client --- */

struct cli {
	struct rig_answer *a;
	struct buf data; /* DATA received, still framed */
	const uint8_t *body;
	size_t body_len;
};

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct cli *c = ud;

	if (streq((const char *)name, "grpc-status"))
		c->a->status = (int)strtol((const char *)value, NULL, 10);
	else if (streq((const char *)name, "grpc-message"))
		(void)snprintf(c->a->message, sizeof(c->a->message), "%s", value);
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		   void *ud)
{
	struct cli *c = ud;

	if (buf_append(&c->data, data, len) < 0)
		abort();
	return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct cli *c = ud;
	size_t n = MIN(length, c->body_len);

	memcpy(buf, c->body, n);
	c->body += n;
	c->body_len -= n;
	if (c->body_len == 0)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define NV(n, v)                                                                               \
	{                                                                                      \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE \
	}

void rig_call(struct rig *r, const char *method, const uint8_t *msg, size_t len,
	      struct rig_answer *ret)
{
	nghttp2_data_provider prd = { .read_callback = read_body };
	nghttp2_session_callbacks *cbs;
	struct grpc_server_conn *conn;
	struct buf out = { 0 }, body = { 0 };
	struct cli c = { .a = ret };
	nghttp2_session *s;
	char path[128];
	size_t off = 0;
	uint8_t pre[5] = { 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			   (uint8_t)len };

	memset(ret, 0, sizeof(*ret));
	ret->status = -1;
	(void)snprintf(path, sizeof(path), "/v1beta1.DevicePlugin/%s", method);
	if (buf_append(&body, pre, sizeof(pre)) < 0 || buf_append(&body, msg, len) < 0)
		abort();
	c.body = body.data;
	c.body_len = body.len;
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		abort();
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
	if (nghttp2_session_client_new(&s, cbs, &c) != 0)
		abort();
	nghttp2_session_callbacks_del(cbs);
	{
		nghttp2_nv nva[] = {
			NV(":method", "POST"),
			NV(":scheme", "http"),
			NV(":path", path),
			NV(":authority", "localhost"),
			NV("content-type", "application/grpc"),
		};

		if (nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0) != 0 ||
		    nghttp2_submit_request(s, NULL, nva, ELEMENTSOF(nva), &prd, NULL) <= 0)
			abort();
	}
	if (grpc_server_conn_new_mem(plugin_grpc_server(r->plugin), &out, &conn) < 0)
		abort();
	for (int i = 0; i < 1000; i++) {
		const uint8_t *p;
		bool moved = false;
		ssize_t n;

		while ((n = nghttp2_session_mem_send(s, &p)) > 0) {
			moved = true;
			if (grpc_server_conn_feed(conn, p, (size_t)n) < 0)
				abort();
		}
		if (grpc_server_conn_flush(conn) < 0)
			abort();
		if (out.len > off) {
			moved = true;
			if (nghttp2_session_mem_recv(s, out.data + off, out.len - off) < 0)
				abort();
			off = out.len;
		}
		if (!moved)
			break;
	}
	if (ret->status < 0)
		abort(); /* a unary call always ends with a status */
	/* The gRPC messages: a unary answer has at most one. */
	for (size_t o = 0; o + 5 <= c.data.len;) {
		size_t n = (size_t)c.data.data[o + 1] << 24 | (size_t)c.data.data[o + 2] << 16 |
			   (size_t)c.data.data[o + 3] << 8 | c.data.data[o + 4];

		if (c.data.data[o] != 0 || n > c.data.len - o - 5)
			abort();
		ret->msg.len = 0;
		if (buf_append(&ret->msg, c.data.data + o + 5, n) < 0)
			abort();
		ret->n_msgs++;
		o += 5 + n;
	}
	nghttp2_session_del(s);
	grpc_server_conn_free(conn);
	buf_release(&out);
	buf_release(&body);
	buf_release(&c.data);
}

void rig_answer_release(struct rig_answer *a)
{
	buf_release(&a->msg);
}
