/*
 * plugin: the DevicePlugin service over memory connections (an nghttp2 client in this
 * process, peer credentials set by hand), on a real loop for the plugin's retry timer:
 * which ListAndWatch stream is the kubelet's, no empty list when the first one cannot be
 * built, the CDI gate and the Allocate request checks; the stream events the registration
 * hears, health read back through the context on each refresh (an unhealthy GPU's devices
 * listed Unhealthy and refused by Allocate), and allocation failures (tests/unit/oom.h) in
 * plugin_new() and in a refresh, which keeps the last list and retries; a gpumem Allocate
 * with enforcement (its env and mounts).
 */

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "deviceplugin.pb-c.h"
#include "enforce.h"
#include "gpu.h"
#include "gpus.h"
#include "grpc.h"
#include "loop.h"
#include "oom.h"
#include "plugin.h"
#include "podresources.pb-c.h"
#include "resource.h"
#include "unit-podres.h"
#include "unit.h"

#define UUID0 "GPU-00000000-1111-2222-3333-444444444440"
#define UUID1 "GPU-00000001-1111-2222-3333-444444444441"

static struct gpu_device devs[2];
static struct gpu_info info = { .devices = devs, .n_devices = 2 };
static bool healthy[2];
static const int numa[2] = { -1, -1 };

static bool healthy_fn(unsigned gpu, void *userdata)
{
	return healthy[gpu];
}

/* --- a client on a memory connection --- */

struct strm {
	int32_t id;
	struct buf data;
	int grpc_status; /* -1: none yet */
	char grpc_message[512];
	bool closed;
};

struct cli {
	nghttp2_session *s;
	struct grpc_server_conn *conn;
	struct buf out;
	size_t off;
	struct strm st[8];
	size_t n;
	const uint8_t *body;
	size_t body_len;
};

static struct strm *cli_stream(struct cli *c, int32_t id)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->st[i].id == id)
			return &c->st[i];
	return NULL;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct strm *st = cli_stream(ud, f->hd.stream_id);

	if (!st)
		return 0;
	if (streq((const char *)name, "grpc-status"))
		st->grpc_status = (int)strtol((const char *)value, NULL, 10);
	else if (streq((const char *)name, "grpc-message"))
		(void)snprintf(st->grpc_message, sizeof(st->grpc_message), "%s", value);
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		   void *ud)
{
	struct strm *st = cli_stream(ud, id);

	if (st)
		assert_int_equal(buf_append(&st->data, data, len), 0);
	return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct strm *st = cli_stream(ud, id);

	if (st)
		st->closed = true;
	return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct cli *c = ud;
	size_t n = c->body_len;

	assert_true(n <= length);
	memcpy(buf, c->body, n);
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static void cli_new(struct cli *c, struct plugin *p, pid_t pid)
{
	nghttp2_session_callbacks *cbs;

	memset(c, 0, sizeof(*c));
	assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
	assert_int_equal(nghttp2_session_client_new(&c->s, cbs, c), 0);
	nghttp2_session_callbacks_del(cbs);
	assert_int_equal(nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
	assert_int_equal(grpc_server_conn_new_mem(plugin_grpc_server(p), &c->out, &c->conn), 0);
	grpc_server_conn_set_peer_cred(c->conn, pid, 1000);
}

static void cli_free(struct cli *c)
{
	for (size_t i = 0; i < c->n; i++)
		buf_release(&c->st[i].data);
	nghttp2_session_del(c->s);
	grpc_server_conn_free(c->conn);
	buf_release(&c->out);
}

static void cli_pump(struct cli *c)
{
	for (int i = 0; i < 10000; i++) {
		const uint8_t *p;
		bool moved = false;
		ssize_t n;

		while ((n = nghttp2_session_mem_send(c->s, &p)) > 0) {
			moved = true;
			assert_int_equal(grpc_server_conn_feed(c->conn, p, (size_t)n), 0);
		}
		assert_int_equal(grpc_server_conn_flush(c->conn), 0);
		if (c->out.len > c->off) {
			moved = true;
			n = nghttp2_session_mem_recv(c->s, c->out.data + c->off,
						     c->out.len - c->off);
			assert_true(n >= 0);
			c->off = c->out.len;
		}
		if (!moved)
			return;
	}
	fail_msg("pump did not settle");
}

#define NV(n, v)                                                                               \
	{                                                                                      \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE \
	}

/* Calls /v1beta1.DevicePlugin/@method with the request message @msg. */
static struct strm *cli_call(struct cli *c, const char *method, const void *msg, size_t len)
{
	static uint8_t body[8192];
	char path[128];
	nghttp2_data_provider prd = { .read_callback = read_body };
	struct strm *st;

	(void)snprintf(path, sizeof(path), "/v1beta1.DevicePlugin/%s", method);
	{
		nghttp2_nv nva[] = {
			NV(":method", "POST"),
			NV(":scheme", "http"),
			NV(":path", path),
			NV(":authority", "localhost"),
			NV("content-type", "application/grpc"),
		};

		assert_true(len + 5 <= sizeof(body));
		body[0] = 0;
		body[1] = (uint8_t)(len >> 24);
		body[2] = (uint8_t)(len >> 16);
		body[3] = (uint8_t)(len >> 8);
		body[4] = (uint8_t)len;
		if (len)
			memcpy(body + 5, msg, len);
		c->body = body;
		c->body_len = len + 5;
		assert_true(c->n < ELEMENTSOF(c->st));
		st = &c->st[c->n++];
		memset(st, 0, sizeof(*st));
		st->grpc_status = -1;
		st->id = nghttp2_submit_request(c->s, NULL, nva, ELEMENTSOF(nva), &prd, NULL);
		assert_true(st->id > 0);
	}
	cli_pump(c);
	return st;
}

static struct strm *cli_watch(struct cli *c)
{
	return cli_call(c, "ListAndWatch", NULL, 0);
}

static void cli_cancel(struct cli *c, struct strm *st)
{
	assert_int_equal(nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL),
			 0);
	cli_pump(c);
	assert_true(st->closed);
}

/* --- the plugin --- */

static int streams_lost;

static int streams_opened;

static void on_lost(struct plugin *p, enum plugin_event ev, void *userdata)
{
	if (ev == PLUGIN_EVENT_STREAM_OPENED)
		streams_opened++;
	else if (ev == PLUGIN_EVENT_STREAM_CLOSED)
		streams_lost++;
}

static void ctx_init(struct plugin_ctx *ctx, struct loop *l)
{
	memset(devs, 0, sizeof(devs));
	for (unsigned i = 0; i < 2; i++) {
		devs[i].index = i;
		(void)snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", i ? UUID1 : UUID0);
		devs[i].mem_total = (uint64_t)16 << 30;
		devs[i].numa_node = -1;
		devs[i].minor = i;
		healthy[i] = true;
	}
	streams_opened = 0;
	memset(ctx, 0, sizeof(*ctx));
	ctx->loop = l;
	ctx->dir = "/nonexistent";
	ctx->info = &info;
	ctx->gpu_healthy = healthy_fn;
	ctx->numa = numa;
	ctx->alloc.strategies = ALLOC_ENVVAR;
	streams_lost = 0;
}

static struct plugin *plugin_make(const struct plugin_ctx *ctx)
{
	static const unsigned all[] = { 0, 1 };
	const struct resource_spec spec = {
		.name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = all, .n_gpus = 2
	};
	struct resource *r = NULL;
	struct plugin *p = NULL;
	char *err = NULL;

	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	assert_int_equal(plugin_new(ctx, r, on_lost, NULL, &p), 0);
	return p;
}

static void test_kubelet_streams(void **state)
{
	struct plugin_ctx ctx;
	struct plugin *p;
	struct cli a, b, c, d;
	struct strm *sa, *sb, *sc, *s1, *s2, *s3;
	struct loop *l;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	p = plugin_make(&ctx);
	cli_new(&a, p, 100);
	cli_new(&b, p, 200);
	cli_new(&c, p, 100);
	cli_new(&d, p, 0);

	/* Nobody said who the kubelet is: every stream counts as the kubelet's. */
	sa = cli_watch(&a);
	assert_true(sa->data.len > 5);
	assert_int_equal(plugin_watchers(p), 1);
	assert_int_equal(plugin_kubelet_watchers(p), 1);
	assert_int_equal(streams_opened, 1);

	/* Registered with the kubelet at pid 100: a stream from pid 200 is a stray. */
	plugin_expect_kubelet(p, 100);
	sb = cli_watch(&b);
	assert_true(sb->data.len > 5);
	assert_int_equal(plugin_watchers(p), 2);
	assert_int_equal(plugin_kubelet_watchers(p), 1);
	assert_int_equal(streams_opened, 1); /* a stray's stream is not reported */
	sc = cli_watch(&c);
	assert_int_equal(plugin_watchers(p), 3);
	assert_int_equal(plugin_kubelet_watchers(p), 2);
	/* A stray's end does not ask for re-registration; the kubelet's does. */
	cli_cancel(&b, sb);
	assert_int_equal(plugin_watchers(p), 2);
	assert_int_equal(streams_lost, 0);
	cli_cancel(&c, sc);
	assert_int_equal(streams_lost, 1);
	assert_int_equal(plugin_kubelet_watchers(p), 1);

	/* Our kubelet pid unknown (PID namespaces): the first stream after Register is it. */
	plugin_expect_kubelet(p, 0);
	s1 = cli_watch(&b);
	s2 = cli_watch(&c);
	assert_int_equal(plugin_watchers(p), 3);
	assert_int_equal(plugin_kubelet_watchers(p), 2);
	cli_cancel(&c, s2);
	assert_int_equal(streams_lost, 1);
	cli_cancel(&b, s1);
	assert_int_equal(streams_lost, 2);

	/* The stream's pid unknown (a host process seen from a container): the same rule. */
	plugin_expect_kubelet(p, 100);
	s1 = cli_watch(&d);
	s2 = cli_watch(&d);
	s3 = cli_watch(&c);
	assert_int_equal(plugin_watchers(p), 4);
	assert_int_equal(plugin_kubelet_watchers(p), 3);
	cli_cancel(&d, s2);
	assert_int_equal(streams_lost, 2);
	cli_cancel(&d, s1);
	cli_cancel(&c, s3);
	assert_int_equal(streams_lost, 4);
	assert_int_equal(plugin_kubelet_watchers(p), 1);

	cli_free(&a);
	cli_free(&b);
	cli_free(&c);
	cli_free(&d);
	plugin_free(p);
	loop_free(l);
}

static bool all_unhealthy(const struct resource *r, unsigned d, void *u)
{
	return false;
}

static bool all_healthy(const struct resource *r, unsigned d, void *u)
{
	return true;
}

static size_t list_size(const struct plugin *p, resource_health_fn *fn)
{
	struct buf b = { 0 };
	size_t n;

	assert_int_equal(resource_encode_list(plugin_resource(p), numa, fn, NULL, &b), 0);
	n = b.len;
	buf_release(&b);
	return n;
}

/* The first list is too large to send: nothing is sent (never an empty list), then retried. */
static void test_first_list_fails(void **state)
{
	struct plugin_ctx ctx;
	struct plugin_stats stats;
	struct plugin *p;
	struct strm *st;
	struct loop *l;
	struct cli a;
	size_t ok_size, big_size;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	p = plugin_make(&ctx);
	ok_size = list_size(p, all_healthy);
	big_size = list_size(p, all_unhealthy);
	assert_true(big_size > ok_size);
	plugin_free(p);

	/* "Unhealthy" is longer than "Healthy": unhealthy GPUs make a list over the limit. */
	ctx.limits.max_send_msg = ok_size;
	healthy[0] = healthy[1] = false;
	p = plugin_make(&ctx);
	cli_new(&a, p, 100);
	st = cli_watch(&a);
	assert_int_equal(st->data.len, 0);
	assert_false(st->closed);
	assert_int_equal(plugin_watchers(p), 1);
	/* Retried from the loop until it works: the GPUs come back, the list goes out. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(loop_run_once(l, 20 * USEC_PER_MSEC), 0);
	cli_pump(&a);
	assert_int_equal(st->data.len, 0);
	healthy[0] = healthy[1] = true;
	for (int i = 0; i < 300 && st->data.len == 0; i++) {
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		cli_pump(&a);
	}
	assert_int_equal(st->data.len, 5 + ok_size);
	plugin_get_stats(p, &stats);
	assert_int_equal(stats.snapshots_sent, 1);
	cli_free(&a);
	plugin_free(p);
	loop_free(l);
}

static size_t allocate_req(uint8_t *out, const char *id, size_t len)
{
	out[0] = 0x0a;
	out[1] = (uint8_t)(len + 2);
	out[2] = 0x0a;
	out[3] = (uint8_t)len;
	memcpy(out + 4, id, len);
	return len + 4;
}

static void test_allocate_checks(void **state)
{
	static const char nul_id[] = UUID0 "\0junk";
	const char *cdi_error = "writing /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json: "
				"Read-only file system";
	struct plugin_ctx ctx;
	struct plugin *p;
	struct strm *st;
	struct loop *l;
	struct cli a;
	uint8_t req[128];
	size_t n;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	ctx.cdi_error = (const char *const *)&cdi_error;
	p = plugin_make(&ctx);
	cli_new(&a, p, 100);

	/* An ID with a NUL byte is not the ID before the NUL. */
	n = allocate_req(req, nul_id, sizeof(nul_id) - 1);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_INVALID_ARGUMENT);
	assert_non_null(strstr(st->grpc_message, "NUL"));
	assert_non_null(strstr(st->grpc_message, UUID0));
	/* A malformed request says so. */
	st = cli_call(&a, "Allocate", "\x0a\x05\x0a", 3);
	assert_int_equal(st->grpc_status, GRPC_STATUS_INVALID_ARGUMENT);
	assert_non_null(strstr(st->grpc_message, "malformed"));

	/* envvar delivery does not need a CDI spec. */
	n = allocate_req(req, UUID0, strlen(UUID0));
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);
	assert_true(st->data.len > 5);

	/* cdi-cri without a valid spec: FAILED_PRECONDITION and the reason. */
	ctx.alloc.strategies = ALLOC_CDI_CRI;
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_FAILED_PRECONDITION);
	assert_int_equal(st->data.len, 0);
	assert_non_null(strstr(st->grpc_message, "no valid CDI spec: writing /var/run/cdi/"));
	ctx.alloc.strategies = ALLOC_ENVVAR | ALLOC_CDI_ANNOTATIONS;
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_FAILED_PRECONDITION);
	/* The spec is written: served. */
	cdi_error = NULL;
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);
	assert_true(st->data.len > 5);
	/* No gate at all. */
	ctx.cdi_error = NULL;
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);

	cli_free(&a);
	plugin_free(p);
	loop_free(l);
}

static bool all_up(unsigned gpu, void *userdata)
{
	return true;
}

/* An AllocateRequest of one container asking for @ids. Returns the packed size. */
static size_t allocate_ids(uint8_t *out, size_t size, char **ids, size_t n)
{
	V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT, *crs[1];
	V1beta1__AllocateRequest m = V1BETA1__ALLOCATE_REQUEST__INIT;

	cr.devices_ids = ids;
	cr.n_devices_ids = n;
	crs[0] = &cr;
	m.container_requests = crs;
	m.n_container_requests = 1;
	assert_true(v1beta1__allocate_request__get_packed_size(&m) <= size);
	return v1beta1__allocate_request__pack(&m, out);
}

/*
 * Allocate at the node's GPU limit (GPU_NODE_MAX): one container asking for all 64 GPUs of a
 * resource gets every one, in order. A resource with a GPU slot past Allocate's per-GPU arrays
 * (resource_new() refuses to build one; here it is built by hand) is refused with INTERNAL,
 * naming the device and the limit, and nothing is written past the arrays (ASan watches).
 */
static void test_allocate_node_max(void **state)
{
	static struct gpu_device many[GPU_NODE_MAX + 1];
	static struct gpu_info mi = { .devices = many, .n_devices = GPU_NODE_MAX + 1 };
	static int mnuma[GPU_NODE_MAX + 1];
	static uint8_t req[4096];
	unsigned idx[GPU_NODE_MAX];
	char *ids[GPU_NODE_MAX + 1];
	const struct resource_spec spec = {
		.name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = idx, .n_gpus = GPU_NODE_MAX
	};
	V1beta1__AllocateResponse *resp;
	struct resource *r = NULL;
	struct plugin_ctx ctx;
	struct plugin *p;
	struct strm *st;
	struct loop *l;
	struct cli a;
	char *err = NULL;
	const char *visible = NULL;
	size_t n;

	unit_gpus_fill(many, GPU_NODE_MAX + 1);
	for (unsigned i = 0; i <= GPU_NODE_MAX; i++) {
		mnuma[i] = -1;
		ids[i] = many[i].uuid;
		if (i < GPU_NODE_MAX)
			idx[i] = i;
	}
	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	ctx.info = &mi;
	ctx.numa = mnuma;
	ctx.gpu_healthy = all_up;

	/* 64 GPUs, all asked for at once, the last first: every one is delivered. */
	assert_int_equal(resource_new(&spec, &mi, &r, &err), 0);
	assert_int_equal(plugin_new(&ctx, r, on_lost, NULL, &p), 0);
	cli_new(&a, p, 100);
	ids[0] = many[GPU_NODE_MAX - 1].uuid;
	ids[GPU_NODE_MAX - 1] = many[0].uuid;
	n = allocate_ids(req, sizeof(req), ids, GPU_NODE_MAX);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);
	assert_true(st->data.len > 5);
	resp = v1beta1__allocate_response__unpack(NULL, st->data.len - 5, st->data.data + 5);
	assert_non_null(resp);
	assert_int_equal(resp->n_container_responses, 1);
	for (size_t e = 0; e < resp->container_responses[0]->n_envs; e++)
		if (streq(resp->container_responses[0]->envs[e]->key, "NVIDIA_VISIBLE_DEVICES"))
			visible = resp->container_responses[0]->envs[e]->value;
	assert_non_null(visible);
	for (unsigned i = 0; i < GPU_NODE_MAX; i++)
		assert_non_null(strstr(visible, many[i].uuid));
	/* Whole GPUs keep the request's order: GPU 63 comes first. */
	assert_memory_equal(visible, many[GPU_NODE_MAX - 1].uuid, strlen(many[0].uuid));
	v1beta1__allocate_response__free_unpacked(resp, NULL);
	/* The 65th GPU is not part of the resource. */
	n = allocate_ids(req, sizeof(req), &ids[GPU_NODE_MAX], 1);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_INVALID_ARGUMENT);
	assert_non_null(strstr(st->grpc_message, "unknown device"));
	cli_free(&a);
	plugin_free(p);

	/* A 65-GPU resource, built by hand: slot 64 is refused, slot 63 still served. */
	r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->name = strdup("nvidia.com/gpu");
	r->socket = strdup("nvidia-gpu.sock");
	r->kind = RESOURCE_GPU;
	r->replicas = 1;
	r->n_gpus = r->n_devices = GPU_NODE_MAX + 1;
	r->gpus = calloc(GPU_NODE_MAX + 1, sizeof(*r->gpus));
	r->uuids = calloc(GPU_NODE_MAX + 1, sizeof(*r->uuids));
	assert_true(r->name && r->socket && r->gpus && r->uuids);
	for (unsigned i = 0; i <= GPU_NODE_MAX; i++) {
		r->gpus[i] = (struct resource_gpu){ .gpu = i, .first = i, .count = 1 };
		r->uuids[i] = strdup(many[i].uuid);
		assert_non_null(r->uuids[i]);
	}
	assert_int_equal(plugin_new(&ctx, r, on_lost, NULL, &p), 0);
	cli_new(&a, p, 100);
	n = allocate_ids(req, sizeof(req), &ids[GPU_NODE_MAX], 1);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_INTERNAL);
	assert_non_null(strstr(st->grpc_message, many[GPU_NODE_MAX].uuid));
	assert_non_null(strstr(st->grpc_message, "past the 64 GPUs one node is built for"));
	n = allocate_ids(req, sizeof(req), &ids[0], 1);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);
	cli_free(&a);
	plugin_free(p);
	loop_free(l);
}

/* The last ListAndWatch message on @st: how many devices, and how many of them Unhealthy. */
static void last_list(const struct strm *st, size_t *ret_n, size_t *ret_unhealthy,
		      char *unhealthy_id, size_t idsz)
{
	const uint8_t *last = NULL;
	size_t last_len = 0, off = 0;
	V1beta1__ListAndWatchResponse *m;

	while (off + 5 <= st->data.len) {
		const uint8_t *h = st->data.data + off;
		size_t len = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];

		assert_true(off + 5 + len <= st->data.len);
		last = h + 5;
		last_len = len;
		off += 5 + len;
	}
	assert_non_null(last);
	m = v1beta1__list_and_watch_response__unpack(NULL, last_len, last);
	assert_non_null(m);
	*ret_n = m->n_devices;
	*ret_unhealthy = 0;
	for (size_t i = 0; i < m->n_devices; i++)
		if (streq(m->devices[i]->health, "Unhealthy")) {
			(*ret_unhealthy)++;
			(void)snprintf(unhealthy_id, idsz, "%s", m->devices[i]->id);
		}
	v1beta1__list_and_watch_response__free_unpacked(m, NULL);
}

static uint64_t sent(const struct plugin *p)
{
	struct plugin_stats stats;

	plugin_get_stats(p, &stats);
	return stats.snapshots_sent;
}

/*
 * Health is read through the context on every refresh: a GPU turning unhealthy lists its
 * device Unhealthy in the next message and Allocate refuses it; back healthy, both recover.
 */
static void test_refresh_masks_unhealthy(void **state)
{
	struct plugin_ctx ctx;
	struct plugin *p;
	struct strm *st, *al;
	struct loop *l;
	struct cli a, k;
	uint8_t req[128];
	char id[128] = "";
	size_t n, bad;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	p = plugin_make(&ctx);
	cli_new(&k, p, 100);
	cli_new(&a, p, 100);
	st = cli_watch(&k);
	last_list(st, &n, &bad, id, sizeof(id));
	assert_int_equal(n, 2);
	assert_int_equal(bad, 0);

	healthy[1] = false;
	plugin_refresh(p);
	cli_pump(&k);
	last_list(st, &n, &bad, id, sizeof(id));
	assert_int_equal(n, 2);
	assert_int_equal(bad, 1);
	assert_string_equal(id, UUID1);
	n = allocate_req(req, UUID1, strlen(UUID1));
	al = cli_call(&a, "Allocate", req, n);
	assert_int_equal(al->grpc_status, GRPC_STATUS_INVALID_ARGUMENT);
	assert_non_null(strstr(al->grpc_message, "unhealthy"));
	/* A refresh that changes nothing sends nothing. */
	n = sent(p);
	plugin_refresh(p);
	assert_int_equal(sent(p), n);

	healthy[1] = true;
	plugin_refresh(p);
	cli_pump(&k);
	last_list(st, &n, &bad, id, sizeof(id));
	assert_int_equal(bad, 0);
	n = allocate_req(req, UUID1, strlen(UUID1));
	al = cli_call(&a, "Allocate", req, n);
	assert_int_equal(al->grpc_status, GRPC_STATUS_OK);
	/* The kubelet's stream ends: reported once; a stray's would not be (test_kubelet_streams). */
	cli_cancel(&k, st);
	assert_int_equal(streams_lost, 1);
	cli_free(&a);
	cli_free(&k);
	plugin_free(p);
	loop_free(l);
}

/* plugin_new() under allocation failure: -ENOMEM, the resource still the caller's. */
static void test_new_oom(void **state)
{
	static const unsigned all[] = { 0, 1 };
	const struct resource_spec spec = {
		.name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = all, .n_gpus = 2
	};
	struct plugin_ctx ctx;
	struct resource *r = NULL;
	struct plugin *p = NULL;
	struct loop *l;
	char *err = NULL;
	long n;
	int e;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	for (n = 0;; n++) {
		oom_fail_at(n);
		e = plugin_new(&ctx, r, on_lost, NULL, &p);
		oom_off();
		if (e == 0)
			break;
		assert_int_equal(e, -ENOMEM);
		assert_string_equal(r->name, "nvidia.com/gpu"); /* still ours */
	}
	assert_true(n > 0);
	plugin_free(p);
	loop_free(l);
}

/*
 * A refresh whose list cannot be built (the Nth allocation fails) keeps the last list on the
 * stream, never an empty one, and the retry from the loop brings the new one.
 */
static void test_refresh_oom_retries(void **state)
{
	struct plugin_ctx ctx;
	struct plugin *p;
	struct strm *st;
	struct loop *l;
	struct cli k;
	char id[128] = "";
	size_t n, bad;
	uint64_t before;
	long fails = 0;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	p = plugin_make(&ctx);
	cli_new(&k, p, 100);
	st = cli_watch(&k);
	for (long at = 0;; at++) {
		healthy[0] = !healthy[0]; /* every round has a new list to send */
		before = sent(p);
		oom_fail_at(at);
		plugin_refresh(p);
		oom_off();
		if (sent(p) > before)
			break;
		fails++;
		/* The stream still holds the previous list: two devices, never none. */
		cli_pump(&k);
		last_list(st, &n, &bad, id, sizeof(id));
		assert_int_equal(n, 2);
		assert_int_equal(bad, healthy[0] ? 1 : 0);
		/* The retry timer builds it again. */
		for (int i = 0; i < 300 && sent(p) == before; i++)
			assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		assert_int_equal(sent(p), before + 1);
		cli_pump(&k);
		last_list(st, &n, &bad, id, sizeof(id));
		assert_int_equal(bad, healthy[0] ? 0 : 1);
	}
	assert_true(fails > 0);
	cli_free(&k);
	plugin_free(p);
	loop_free(l);
}

static int mask_slot(const struct plugin *p)
{
	struct plugin_stats stats;

	plugin_get_stats(p, &stats);
	return stats.mask_slot;
}

/*
 * gpumem placement: mask offers one GPU's free units. Units that pods hold (pod-resources)
 * move it to the GPU with more free memory; an unhealthy GPU loses it; an answer that cannot
 * be read (malformed, out of memory) leaves the marks as they were.
 */
static void test_gpumem_mask_from_podres(void **state)
{
	static const unsigned all[] = { 0, 1 };
	const struct resource_spec spec = { .name = "nvidia.com/gpumem",
					    .kind = RESOURCE_GPUMEM,
					    .gpus = all,
					    .n_gpus = 2,
					    .unit_mib = 1024 };
	struct plugin_ctx ctx;
	struct resource *r = NULL;
	struct plugin *p = NULL;
	struct loop *l;
	char *err = NULL, idbuf[4][128], *ids[4];
	uint8_t answer[4096];
	size_t n;
	long at;
	int e;

	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	ctx.mask = true;
	ctx.mask_hysteresis_mib = 1024;
	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	assert_int_equal(plugin_new(&ctx, r, on_lost, NULL, &p), 0);
	plugin_refresh(p);
	assert_int_equal(mask_slot(p), 0); /* a tie goes to the lower index */

	/* Pods hold 3 units of GPU 0 (the first units): GPU 1 has 3 GiB more free. */
	for (unsigned i = 0; i < 3; i++) {
		assert_true(resource_device_id(r, i, idbuf[i]) > 0);
		ids[i] = idbuf[i];
	}
	n = unit_podres_answer("nvidia.com/gpumem", ids, 3, answer, sizeof(answer));
	assert_int_equal(plugin_set_live_podres(p, answer, n), 0);
	assert_int_equal(mask_slot(p), 1);

	/* Unreadable answers change nothing. */
	assert_int_equal(plugin_set_live_podres(p, (const uint8_t *)"\x0a\x05\x0a", 3), -EBADMSG);
	assert_int_equal(mask_slot(p), 1);
	n = unit_podres_answer("nvidia.com/gpumem", ids, 0, answer, sizeof(answer));
	for (at = 0;; at++) {
		oom_fail_at(at);
		e = plugin_set_live_podres(p, answer, n);
		oom_off();
		if (e == 0)
			break;
		/* protobuf-c's own failed allocation reads as a malformed answer (podres.h) */
		assert_true(e == -ENOMEM || e == -EBADMSG);
		assert_int_equal(mask_slot(p), 1);
	}
	assert_true(at > 0);
	/* Read at last: nothing held, the mask stays put (within the hysteresis). */
	assert_int_equal(mask_slot(p), 1);

	/* GPU 1 turns unhealthy: the mask goes back to GPU 0. */
	healthy[1] = false;
	plugin_refresh(p);
	assert_int_equal(mask_slot(p), 0);
	plugin_free(p);
	loop_free(l);
}

/* The value of env @key in container response @cr, or NULL. */
static const char *resp_env(const V1beta1__ContainerAllocateResponse *cr, const char *key)
{
	for (size_t e = 0; e < cr->n_envs; e++)
		if (streq(cr->envs[e]->key, key))
			return cr->envs[e]->value;
	return NULL;
}

/*
 * gpumem Allocate with enforcement: the grant's env beside the limit variables, and its
 * mounts (library and ld.so.preload read-only, the limits file read-only, the state
 * directory read-write), host paths under the state directory.
 */
static void test_gpumem_allocate_enforced(void **state)
{
	static const unsigned one[] = { 0 };
	const struct resource_spec spec = { .name = "nvidia.com/gpumem",
					    .kind = RESOURCE_GPUMEM,
					    .gpus = one,
					    .n_gpus = 1,
					    .unit_mib = 256 };
	char tmp[] = "/tmp/test-plugin-enforce-XXXXXX", lib[64], sd[64], idbuf[2][128];
	struct config_enforcement cfg = { .interposer = true, .library = lib, .state_dir = sd };
	V1beta1__ContainerAllocateResponse *cr;
	V1beta1__AllocateResponse *resp;
	struct resource *r = NULL;
	struct plugin_ctx ctx;
	struct plugin *p;
	struct strm *st;
	struct loop *l;
	struct cli a;
	char *err = NULL, *ids[2];
	uint8_t req[1024];
	unsigned ro = 0, rw = 0;
	FILE *fp;
	size_t n;

	assert_non_null(mkdtemp(tmp));
	(void)snprintf(lib, sizeof(lib), "%s/lib.so", tmp);
	(void)snprintf(sd, sizeof(sd), "%s/state", tmp);
	assert_non_null(fp = fopen(lib, "w"));
	assert_true(fputs("lib", fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(loop_new(&l), 0);
	ctx_init(&ctx, l);
	assert_int_equal(enforce_new(&cfg, "/", &ctx.enforce), 0);
	assert_int_equal(resource_new(&spec, &info, &r, &err), 0);
	assert_int_equal(plugin_new(&ctx, r, on_lost, NULL, &p), 0);
	plugin_refresh(p);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(resource_device_id(r, i, idbuf[i]) > 0);
		ids[i] = idbuf[i];
	}
	cli_new(&a, p, 100);
	n = allocate_ids(req, sizeof(req), ids, 2);
	st = cli_call(&a, "Allocate", req, n);
	assert_int_equal(st->grpc_status, GRPC_STATUS_OK);
	resp = v1beta1__allocate_response__unpack(NULL, st->data.len - 5, st->data.data + 5);
	assert_non_null(resp);
	cr = resp->container_responses[0];
	assert_string_equal(resp_env(cr, "EDGEGPU_GPUMEM_LIMIT_MIB"), "512");
	assert_string_equal(resp_env(cr, "NVIDIA_GPU_MEMORY_REQUEST"), "512");
	assert_string_equal(resp_env(cr, "NVIDIA_GPU_MEMORY_LIMIT"), "512");
	assert_string_equal(resp_env(cr, "EDGEGPU_GPUMEM_ENFORCEMENT"), "interposer");
	assert_int_equal(cr->n_mounts, 4);
	for (size_t m = 0; m < cr->n_mounts; m++) {
		assert_true(strncmp(cr->mounts[m]->host_path, sd, strlen(sd)) == 0);
		if (cr->mounts[m]->read_only)
			ro++;
		else
			rw++;
		if (!cr->mounts[m]->read_only)
			assert_string_equal(cr->mounts[m]->container_path, ENFORCE_CTR_STATE);
	}
	assert_int_equal(ro, 3);
	assert_int_equal(rw, 1);
	assert_non_null(enforce_find_unit(ctx.enforce, "nvidia.com/gpumem", ids[1]));
	v1beta1__allocate_response__free_unpacked(resp, NULL);
	cli_free(&a);
	plugin_free(p);
	enforce_free(ctx.enforce);
	loop_free(l);
	assert_int_equal(rm_tree_at(AT_FDCWD, tmp, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kubelet_streams),
		cmocka_unit_test(test_first_list_fails),
		cmocka_unit_test(test_allocate_checks),
		cmocka_unit_test(test_allocate_node_max),
		cmocka_unit_test(test_refresh_masks_unhealthy),
		cmocka_unit_test(test_new_oom),
		cmocka_unit_test(test_refresh_oom_retries),
		cmocka_unit_test(test_gpumem_mask_from_podres),
		cmocka_unit_test(test_gpumem_allocate_enforced),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
