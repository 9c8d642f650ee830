/*
 * A gRPC server call: the h2 callbacks that build it from a stream, routing and the request
 * checks, deadlines, and what a handler does with it (send, send_latest, finish, headers, peer
 * credentials); shared messages.
 */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc-server-int.h"
#include "grpc.h"
#include "h2.h"
#include "loop.h"

#define LOG_MODULE "grpc"
#include "log.h"

static void call_account(struct grpc_call *call, size_t n)
{
	call->in_accounted += n;
	call->conn->in_bytes += n;
}

static void call_release_input(struct grpc_call *call)
{
	grpc_deframer_release(&call->in);
	call->req = NULL;
	call->req_len = 0;
	call->conn->in_bytes -= call->in_accounted;
	call->in_accounted = 0;
}

void grpc_call_close_user(struct grpc_call *call, enum grpc_status status)
{
	if (!call->handed_out || call->user_closed)
		return;
	call->user_closed = true;
	if (call->close_fn)
		call->close_fn(call, status, call->close_ud);
}

void grpc_call_free(struct grpc_server_conn *c, struct grpc_call *call)
{
	LIST_REMOVE(c->calls, call);
	call_release_input(call);
	c->in_bytes -= call->hdr_accounted;
	if (call->id && c->h2)
		(void)h2_stream_set_userdata(c->h2, call->id, NULL);
	(void)loop_timer_free(call->timer);
	buf_release(&call->hdrs);
	c->server->stats.streams--;
	free(call);
}

static const char *call_find_header(const struct grpc_call *call, const char *name,
				    unsigned *ret_count)
{
	const char *first = NULL;
	unsigned count = 0;
	size_t off = 0;

	while (off < call->hdrs.len) {
		const char *n = (const char *)call->hdrs.data + off;
		const char *v = n + strlen(n) + 1;

		if (streq(n, name)) {
			if (!first)
				first = v;
			count++;
		}
		off = (size_t)(v - (const char *)call->hdrs.data) + strlen(v) + 1;
	}
	if (ret_count)
		*ret_count = count;
	return first;
}

/*
 * Submits the status: trailers after a response that has begun, or a Trailers-Only response
 * (with @http as :status; NULL: 200) before that.
 */
static int call_submit_status(struct grpc_call *call, enum grpc_status status, const char *msg,
			      const char *http)
{
	struct h2_session *h2 = call->conn->h2;
	struct h2_nv nva[4];
	char code[16], *enc = NULL;
	size_t n = 0;
	int r;

	(void)snprintf(code, sizeof(code), "%d", (int)status);
	if (msg && *msg) {
		enc = grpc_percent_encode(msg);
		if (!enc)
			return -ENOMEM;
	}
	if (!call->headers_sent) {
		nva[n++] = (struct h2_nv){ ":status", http ? http : "200" };
		nva[n++] = (struct h2_nv){ "content-type", "application/grpc" };
	}
	nva[n++] = (struct h2_nv){ "grpc-status", code };
	if (enc)
		nva[n++] = (struct h2_nv){ "grpc-message", enc };
	if (!call->headers_sent)
		r = h2_submit_response(h2, call->id, nva, n, true);
	else
		r = h2_stream_end(h2, call->id, nva, n);
	free(enc);
	if (r < 0)
		return r;
	call->headers_sent = true;
	grpc_conn_mark_dirty(call->conn);
	return 0;
}

/* Answers a call before it reaches a handler. */
static void call_abort(struct grpc_call *call, const char *http, enum grpc_status status,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void call_abort(struct grpc_call *call, const char *http, enum grpc_status status,
		       const char *fmt, ...)
{
	char *msg;
	va_list ap;

	va_start(ap, fmt);
	msg = strdup_vprintf(fmt, ap);
	va_end(ap);
	log_debug("call rejected", "conn=%" PRIu64 " stream=%d grpc_status=%d msg=\"%s\"",
		  call->conn->id, (int)call->id, (int)status, msg ? msg : "");
	call->state = CALL_ABORTED;
	call->status = status;
	call_release_input(call);
	(void)loop_timer_free(call->timer);
	call->timer = NULL;
	if (call_submit_status(call, status, msg, http) < 0)
		(void)h2_stream_reset(call->conn->h2, call->id, H2_INTERNAL_ERROR);
	free(msg);
	grpc_conn_mark_dirty(call->conn);
}

static void on_deadline(struct loop_timer *t, void *userdata)
{
	struct grpc_call *call = userdata;
	struct grpc_server_conn *c = call->conn;

	grpc_conn_enter(c);
	h2_stream_set_reset_after_end(c->h2, call->id, H2_CANCEL);
	switch (call->state) {
	case CALL_RECV:
		call_abort(call, NULL, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
		break;
	case CALL_RUNNING:
		if (call_submit_status(call, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded",
				       NULL) < 0)
			(void)h2_stream_reset(c->h2, call->id, H2_CANCEL);
		call->state = CALL_FINISHED;
		call->status = GRPC_STATUS_DEADLINE_EXCEEDED;
		grpc_call_close_user(call, GRPC_STATUS_DEADLINE_EXCEEDED);
		break;
	default:
		break;
	}
	grpc_conn_leave(c);
}

static bool content_type_ok(const char *ct)
{
	static const char base[] = "application/grpc";

	if (!ct || strncmp(ct, base, sizeof(base) - 1) != 0)
		return false;
	ct += sizeof(base) - 1;
	return *ct == 0 || *ct == '+' || *ct == ';';
}

/* Finds the method for @path, or explains (as grpc-go does) why there is none. */
static const struct grpc_method *server_route(const struct grpc_server *s, const char *path,
					      char *err, size_t size)
{
	const char *sm = path ? path : "", *slash;
	size_t svc_len;
	bool known = false;

	for (size_t i = 0; i < s->n_methods; i++)
		if (streq(s->methods[i].path, sm))
			return &s->methods[i];
	if (*sm == '/')
		sm++;
	slash = strrchr(sm, '/');
	if (!slash) {
		(void)snprintf(err, size, "malformed method name: \"%s\"", path ? path : "");
		return NULL;
	}
	svc_len = (size_t)(slash - sm);
	for (size_t i = 0; i < s->n_methods && !known; i++) {
		const char *p = s->methods[i].path;

		if (*p == '/')
			p++;
		known = strncmp(p, sm, svc_len) == 0 && p[svc_len] == '/';
	}
	if (known)
		(void)snprintf(err, size, "unknown method %s for service %.*s", slash + 1,
			       (int)svc_len, sm);
	else
		(void)snprintf(err, size, "unknown service %.*s", (int)svc_len, sm);
	return NULL;
}

static int srv_stream_open(void *userdata, int32_t id)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_server *s = c->server;
	struct grpc_call *call;

	if (conn_closing(c))
		return 0;
	call = calloc(1, sizeof(*call));
	if (!call) {
		(void)h2_stream_reset(c->h2, id, H2_INTERNAL_ERROR);
		return 0;
	}
	call->conn = c;
	call->id = id;
	call->deadline = USEC_INFINITY;
	grpc_deframer_init(&call->in, s->lim.max_recv_msg);
	LIST_PREPEND(c->calls, call);
	s->stats.streams++;
	s->stats.streams_peak = MAX(s->stats.streams_peak, s->stats.streams);
	(void)h2_stream_set_userdata(c->h2, id, call);
	/* As grpc-go: a response that ends before the request did is followed by RST(NO_ERROR). */
	h2_stream_set_reset_after_end(c->h2, id, H2_NO_ERROR);
	return 0;
}

static int srv_header(void *userdata, int32_t id, void *stream_ud, const char *name,
		      size_t name_len, const char *value, size_t value_len)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_call *call = stream_ud;
	size_t n = name_len + value_len + 2;

	if (!call || call->hdr_done || call->state != CALL_RECV || conn_closing(c))
		return 0;
	if (call->hdr_overflow || call->hdrs.len + n > MAX_HEADER_BYTES) {
		call->hdr_overflow = true;
		return 0;
	}
	if (buf_append(&call->hdrs, name, name_len + 1) < 0 ||
	    buf_append(&call->hdrs, value, value_len + 1) < 0) {
		call->hdr_overflow = true;
		return 0;
	}
	call->hdr_accounted += n;
	c->in_bytes += n;
	if (grpc_conn_buffered(c) > c->server->lim.max_conn_buffered)
		grpc_conn_overflow(c);
	return 0;
}

static int srv_headers_end(void *userdata, int32_t id, void *stream_ud, enum h2_headers_kind kind)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_server *s = c->server;
	struct grpc_call *call = stream_ud;
	const char *ct, *timeout, *method;
	unsigned n_authority, n_host;
	char err[256];
	usec_t t;

	if (!call || kind != H2_HEADERS_REQUEST || call->hdr_done || call->state != CALL_RECV ||
	    conn_closing(c))
		return 0;
	call->hdr_done = true;
	call->path = call_find_header(call, ":path", NULL);
	if (call->hdr_overflow) {
		call_abort(call, "431", GRPC_STATUS_RESOURCE_EXHAUSTED,
			   "header list larger than %zu bytes", MAX_HEADER_BYTES);
		return 0;
	}
	/* The checks and their order follow grpc-go's operateHeaders. */
	(void)call_find_header(call, ":authority", &n_authority);
	(void)call_find_header(call, "host", &n_host);
	if (n_authority > 1 || n_host > 1) {
		call_abort(
			call, "400", GRPC_STATUS_INTERNAL,
			"num values of :authority: %u, num values of host: %u, both must only have 1 value as per HTTP/2 spec",
			n_authority, n_host);
		return 0;
	}
	if (call_find_header(call, "connection", NULL)) {
		call->state = CALL_ABORTED;
		(void)h2_stream_reset(c->h2, id, H2_PROTOCOL_ERROR);
		return 0;
	}
	ct = call_find_header(call, "content-type", NULL);
	if (!content_type_ok(ct)) {
		call_abort(call, "415", GRPC_STATUS_INVALID_ARGUMENT,
			   "invalid gRPC request content-type \"%s\"", ct ? ct : "");
		return 0;
	}
	timeout = call_find_header(call, "grpc-timeout", NULL);
	if (timeout && grpc_timeout_parse(timeout, strlen(timeout), &t) < 0) {
		call_abort(call, "400", GRPC_STATUS_INTERNAL, "malformed grpc-timeout: \"%s\"",
			   timeout);
		return 0;
	}
	method = call_find_header(call, ":method", NULL);
	if (!method || !streq(method, "POST")) {
		call_abort(
			call, "405", GRPC_STATUS_INTERNAL,
			"http2Server.operateHeaders parsed a :method field: %s which should be POST",
			method ? method : "");
		return 0;
	}
	call->method = server_route(s, call->path, err, sizeof(err));
	if (!call->method) {
		call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED, "%s", err);
		return 0;
	}
	if (timeout) {
		usec_t now = now_usec();

		call->deadline = t > USEC_INFINITY - 1 - now ? USEC_INFINITY - 1 : now + t;
		if (s->loop) {
			if (loop_timer_new(s->loop, on_deadline, call, &call->timer) < 0) {
				call_abort(call, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED,
					   "out of memory");
				return 0;
			}
			loop_timer_arm_at(call->timer, call->deadline);
		}
	}
	return 0;
}

static int srv_data(void *userdata, int32_t id, void *stream_ud, const uint8_t *data, size_t len)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_call *call = stream_ud;
	const char *kind;
	const uint8_t *msg;
	size_t msg_len = 0;
	uint8_t flag = 0;
	int r;

	if (!call || call->state != CALL_RECV || conn_closing(c))
		return 0;
	kind = call->method && call->method->server_streaming ? "server streaming" : "unary";
	if (call->have_req) {
		call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED,
			   "received a second request message for %s method %s", kind, call->path);
		return 0;
	}
	if (grpc_conn_buffered(c) + len > c->server->lim.max_conn_buffered) {
		grpc_conn_overflow(c);
		return 0;
	}
	if (grpc_deframer_push(&call->in, data, len) < 0) {
		call_abort(call, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return 0;
	}
	call_account(call, len);
	r = grpc_deframer_next(&call->in, &msg, &msg_len, &flag);
	if (r == 0)
		return 0;
	if (r == -EMSGSIZE) {
		call_abort(call, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED,
			   "grpc: received message larger than max (%zu vs. %zu)", msg_len,
			   c->server->lim.max_recv_msg);
		return 0;
	}
	if (r < 0) {
		call_abort(call, NULL, GRPC_STATUS_INTERNAL,
			   "grpc: received unexpected payload format %u", flag);
		return 0;
	}
	if (flag == 1) {
		const char *enc = call_find_header(call, "grpc-encoding", NULL);

		if (!enc || !*enc || streq(enc, "identity"))
			call_abort(call, NULL, GRPC_STATUS_INTERNAL,
				   "grpc: compressed flag set with identity or empty encoding");
		else
			call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED,
				   "grpc: Decompressor is not installed for grpc-encoding \"%s\"",
				   enc);
		return 0;
	}
	call->req = msg;
	call->req_len = msg_len;
	call->have_req = true;
	if (grpc_deframer_pending(&call->in) > 0)
		call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED,
			   "received a second request message for %s method %s", kind, call->path);
	return 0;
}

static int srv_remote_end(void *userdata, int32_t id, void *stream_ud)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_server *s = c->server;
	struct grpc_call *call = stream_ud;
	static const uint8_t empty[1];

	if (!call || call->state != CALL_RECV || conn_closing(c))
		return 0;
	if (!call->have_req) {
		if (grpc_deframer_pending(&call->in) > 0)
			call_abort(call, NULL, GRPC_STATUS_INTERNAL,
				   "grpc: request stream ended inside a message");
		else
			call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED,
				   "received no request message for %s method %s",
				   call->method->server_streaming ? "server streaming" : "unary",
				   call->path);
		return 0;
	}
	call->state = CALL_RUNNING;
	call->handed_out = true;
	s->stats.calls++;
	call->method->handler(call, call->req_len ? call->req : empty, call->req_len, s->userdata);
	/* The handler returned: the request bytes are no longer needed. */
	call_release_input(call);
	return 0;
}

static void srv_stream_close(void *userdata, int32_t id, void *stream_ud, uint32_t error_code)
{
	struct grpc_server_conn *c = userdata;
	struct grpc_call *call = stream_ud;
	enum grpc_status status = GRPC_STATUS_CANCELLED;

	if (!call)
		return;
	call->id = 0;
	if (call->state == CALL_FINISHED && error_code == H2_NO_ERROR)
		status = call->status;
	grpc_call_close_user(call, status);
	grpc_call_free(c, call);
}

const struct h2_callbacks grpc_server_h2_callbacks = {
	.stream_open = srv_stream_open,
	.header = srv_header,
	.headers_end = srv_headers_end,
	.data = srv_data,
	.remote_end = srv_remote_end,
	.stream_close = srv_stream_close,
};

/* --- what a handler does with its call --- */

static void prefix_write(uint8_t *prefix, size_t len)
{
	prefix[0] = 0;
	prefix[1] = (uint8_t)(len >> 24);
	prefix[2] = (uint8_t)(len >> 16);
	prefix[3] = (uint8_t)(len >> 8);
	prefix[4] = (uint8_t)len;
}

/* @shared: the message with its prefix, queued as the call's latest state; else @msg/@len. */
static int call_send(struct grpc_call *call, const uint8_t *msg, size_t len, struct h2_blob *shared)
{
	struct grpc_server_conn *c;
	uint8_t prefix[GRPC_PREFIX_LEN];
	size_t replaceable = 0;
	int r;

	if (!call || call->user_closed || call->state != CALL_RUNNING || !call->id)
		return -EPIPE;
	c = call->conn;
	if (conn_closing(c))
		return -EPIPE;
	if (len > c->server->lim.max_send_msg)
		return -EMSGSIZE;
	if (!call->method->server_streaming && call->sent_msg)
		return -EALREADY;
	if (shared)
		replaceable = h2_stream_latest_pending(c->h2, call->id);
	if (grpc_conn_buffered(c) - replaceable + len + GRPC_PREFIX_LEN >
	    c->server->lim.max_conn_buffered) {
		grpc_conn_overflow(c);
		return -ENOBUFS;
	}
	if (!call->headers_sent) {
		static const struct h2_nv nva[] = {
			{ ":status", "200" },
			{ "content-type", "application/grpc" },
		};

		r = h2_submit_response(c->h2, call->id, nva, ELEMENTSOF(nva), false);
		if (r < 0)
			return r;
		call->headers_sent = true;
	}
	if (shared) {
		r = h2_stream_write_latest(c->h2, call->id, shared);
		if (r > 0)
			c->server->stats.msgs_replaced++;
	} else {
		prefix_write(prefix, len);
		r = h2_stream_write(c->h2, call->id, prefix, sizeof(prefix));
		if (r == 0 && len > 0)
			r = h2_stream_write(c->h2, call->id, msg, len);
	}
	if (r < 0)
		return r;
	call->sent_msg = true;
	grpc_conn_mark_dirty(c);
	return r;
}

int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	return call_send(call, msg, len, NULL);
}

/* A shared message is an h2 block holding the prefix and the message. */
int grpc_shared_msg_new(const uint8_t *msg, size_t len, struct grpc_shared_msg **ret)
{
	struct h2_blob *b;
	int r;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	r = h2_blob_new(len + GRPC_PREFIX_LEN, &b);
	if (r < 0)
		return r;
	prefix_write(b->data, len);
	if (len)
		memcpy(b->data + GRPC_PREFIX_LEN, msg, len);
	*ret = (struct grpc_shared_msg *)b;
	return 0;
}

struct grpc_shared_msg *grpc_shared_msg_unref(struct grpc_shared_msg *m)
{
	return (struct grpc_shared_msg *)h2_blob_unref((struct h2_blob *)m);
}

const uint8_t *grpc_shared_msg_payload(const struct grpc_shared_msg *m, size_t *ret_len)
{
	const struct h2_blob *b = (const struct h2_blob *)m;

	*ret_len = b->len - GRPC_PREFIX_LEN;
	return b->data + GRPC_PREFIX_LEN;
}

int grpc_call_send_latest(struct grpc_call *call, struct grpc_shared_msg *m)
{
	struct h2_blob *b = (struct h2_blob *)m;

	return call_send(call, NULL, b->len - GRPC_PREFIX_LEN, b);
}

int grpc_call_finish(struct grpc_call *call, enum grpc_status status, const char *message)
{
	int r;

	if (!call || call->user_closed || call->state != CALL_RUNNING || !call->id ||
	    conn_closing(call->conn))
		return -EPIPE;
	r = call_submit_status(call, status, message, NULL);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		(void)h2_stream_reset(call->conn->h2, call->id, H2_INTERNAL_ERROR);
	call->state = CALL_FINISHED;
	call->status = status;
	if (call->timer)
		loop_timer_disarm(call->timer);
	return r < 0 ? -EPIPE : 0;
}

void grpc_call_set_close_cb(struct grpc_call *call, grpc_call_close_fn *fn, void *userdata)
{
	call->close_fn = fn;
	call->close_ud = userdata;
}

const char *grpc_call_path(const struct grpc_call *call)
{
	return call->path;
}

usec_t grpc_call_deadline(const struct grpc_call *call)
{
	return call->deadline;
}

const char *grpc_call_header(const struct grpc_call *call, const char *name)
{
	return call_find_header(call, name, NULL);
}

uint64_t grpc_call_conn_id(const struct grpc_call *call)
{
	return call->conn->id;
}

int grpc_call_peer_cred(const struct grpc_call *call, pid_t *ret_pid, uid_t *ret_uid)
{
	const struct grpc_server_conn *c = call->conn;

	if (!c->have_peer)
		return -ENODATA;
	if (ret_pid)
		*ret_pid = c->peer_pid;
	if (ret_uid)
		*ret_uid = c->peer_uid;
	return 0;
}
