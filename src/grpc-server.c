#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc-io.h"
#include "grpc.h"
#include "h2.h"
#include "loop.h"

#define LOG_MODULE "grpc"
#include "log.h"

/* The gRPC server: unix-socket listener, connections, calls (the API is in grpc.h). */

#define DEFAULT_MAX_RECV    ((size_t)16 << 20)
#define DEFAULT_MAX_SEND    (((size_t)4 << 20) - 1)
#define DEFAULT_MAX_CONNS   64
#define DEFAULT_MAX_STREAMS 128
#define MAX_HEADER_BYTES    ((size_t)64 * 1024)	      /* per request header block */
#define STREAM_WINDOW	    ((size_t)1024 * 1024)     /* SETTINGS_INITIAL_WINDOW_SIZE */
#define CONN_WINDOW	    ((size_t)4 * 1024 * 1024) /* connection receive window */
#define WRITE_CHUNK	    ((size_t)256 * 1024)      /* output staged per write step */
#define READ_BUDGET	    ((size_t)256 * 1024)      /* bytes read per wakeup, for fairness */
#define LINGER_USEC	    (1 * USEC_PER_SEC)	      /* a dying connection's time to flush */
#define ACCEPT_PAUSE_USEC   (100 * USEC_PER_MSEC)     /* after accept fails with EMFILE & co */
#define PREFACE_TIMEOUT	    (10 * USEC_PER_SEC)	      /* to complete the client preface */
#define IDLE_TIMEOUT	    (300 * USEC_PER_SEC)      /* with no stream open */

/* --- server --- */

enum call_state {
	CALL_RECV,     /* receiving the request */
	CALL_ABORTED,  /* answered before dispatch; further input is dropped */
	CALL_RUNNING,  /* handed to its handler */
	CALL_FINISHED, /* status submitted; waiting for the stream to close */
};

struct grpc_call {
	struct grpc_server_conn *conn;
	struct grpc_call *prev, *next;
	int32_t id; /* 0 once the stream is gone */
	enum call_state state;
	const struct grpc_method *method;
	struct buf hdrs; /* request header fields as "name\0value\0" pairs */
	bool hdr_overflow;
	bool hdr_done;
	const char *path;
	usec_t deadline;
	struct loop_timer *timer;
	struct grpc_deframer in;
	const uint8_t *req;
	size_t req_len;
	bool have_req;
	bool headers_sent;
	bool sent_msg;
	bool handed_out;  /* the handler saw it: the close callback is owed */
	bool user_closed; /* the close callback ran; the caller's pointer is dead */
	enum grpc_status status;
	grpc_call_close_fn *close_fn;
	void *close_ud;
	size_t in_accounted;  /* request message bytes counted in conn->in_bytes */
	size_t hdr_accounted; /* header bytes counted there, until the call is freed */
};

struct grpc_server_conn {
	struct grpc_server *server;
	struct grpc_server_conn *prev, *next;
	uint64_t id;
	int fd;
	bool mem; /* a memory connection (no socket), freed by its owner */
	struct loop_io *io;
	uint32_t io_events;
	struct loop_timer *linger;
	struct loop_timer *timer; /* preface, then idle timeout */
	bool preface_done;
	bool idle_armed;
	usec_t idle_since; /* accept, or the end of its last stream */
	bool have_peer;
	pid_t peer_pid;
	uid_t peer_uid;
	struct buf *mem_out;
	struct buf out; /* socket: staged output, out.data[out_off..len) unsent */
	size_t out_off;
	struct h2_session *h2;
	struct grpc_call *calls;
	size_t in_bytes; /* request bytes held by calls (headers and message bytes) */
	unsigned depth;	 /* nesting of entry points; frees wait for 0 */
	bool dirty;	 /* output may be pending: flush before leaving */
	bool reading;
	bool closing;  /* no new work: GOAWAY for an error queued, or dying */
	bool overflow; /* max_conn_buffered passed */
	bool kill_pending;
	bool dead;   /* calls closed, session and socket gone */
	bool buried; /* dead socket connection, in the server's graveyard */
	bool shutdown_sent;
	int dead_r;
	enum grpc_status kill_status;
};

struct grpc_server {
	struct loop *loop;
	const struct grpc_method *methods;
	size_t n_methods;
	struct grpc_limits lim;
	void *userdata;
	int listen_fd;
	struct loop_io *listen_io;
	char *path;
	dev_t path_dev;
	ino_t path_ino;
	struct timespec path_ctime; /* inode numbers are reused at once: this tells ours apart */
	struct grpc_server_conn *conns;
	struct grpc_server_conn *graveyard; /* dead socket connections, freed from the loop */
	struct loop_timer *defer; /* flushes connections dirtied from outside their callbacks */
	struct loop_timer *grace;
	struct loop_timer *accept_pause;
	bool accept_io_lost; /* pausing failed: the listener's io was dropped, resume recreates it */
	bool shutting_down;
	bool done_called;
	void (*done)(struct grpc_server *s, void *userdata);
	void *done_ud;
	uint64_t next_conn_id;
	struct grpc_server_stats stats;
	grpc_server_event_fn *event_fn;
	void *event_ud;
};

static void conn_leave(struct grpc_server_conn *c);

static void conn_enter(struct grpc_server_conn *c)
{
	c->depth++;
}

static void conn_mark_dirty(struct grpc_server_conn *c)
{
	c->dirty = true;
	if (c->depth == 0 && c->server->loop)
		loop_timer_arm(c->server->defer, 0);
}

static size_t conn_out_pending(const struct grpc_server_conn *c)
{
	return c->out.len - c->out_off;
}

static size_t conn_buffered(const struct grpc_server_conn *c)
{
	return c->in_bytes + h2_session_buffered(c->h2) + conn_out_pending(c);
}

/* Past max_conn_buffered: GOAWAY(ENHANCE_YOUR_CALM), then close. */
static void conn_overflow(struct grpc_server_conn *c)
{
	if (c->closing)
		return;
	log_debug("connection over its buffer limit, closing", "conn=%" PRIu64 " bytes=%zu", c->id,
		  conn_buffered(c));
	c->closing = true;
	c->overflow = true;
	c->reading = false;
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	if (h2_session_terminate(c->h2, H2_ENHANCE_YOUR_CALM, "buffered bytes limit") < 0)
		c->kill_pending = true;
	conn_mark_dirty(c);
}

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

static void call_close_user(struct grpc_call *call, enum grpc_status status)
{
	if (!call->handed_out || call->user_closed)
		return;
	call->user_closed = true;
	if (call->close_fn)
		call->close_fn(call, status, call->close_ud);
}

/* @c is call->conn, passed so that the list unlinking is plain to static analysers. */
static void call_free(struct grpc_server_conn *c, struct grpc_call *call)
{
	assert(!call->prev == (c->calls == call));
	if (call->prev)
		call->prev->next = call->next;
	else
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
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
	conn_mark_dirty(call->conn);
	return 0;
}

/* Answers a call before it reaches a handler. */
static void call_abort(struct grpc_call *call, const char *http, enum grpc_status status,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void call_abort(struct grpc_call *call, const char *http, enum grpc_status status,
		       const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
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
	conn_mark_dirty(call->conn);
}

static void on_deadline(struct loop_timer *t, void *userdata)
{
	struct grpc_call *call = userdata;
	struct grpc_server_conn *c = call->conn;

	conn_enter(c);
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
		call_close_user(call, GRPC_STATUS_DEADLINE_EXCEEDED);
		break;
	default:
		break;
	}
	conn_leave(c);
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

	if (c->closing)
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
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
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

	if (!call || call->hdr_done || call->state != CALL_RECV || c->closing)
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
	if (conn_buffered(c) > c->server->lim.max_conn_buffered)
		conn_overflow(c);
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
	    c->closing)
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

	if (!call || call->state != CALL_RECV || c->closing)
		return 0;
	kind = call->method && call->method->server_streaming ? "server streaming" : "unary";
	if (call->have_req) {
		call_abort(call, NULL, GRPC_STATUS_UNIMPLEMENTED,
			   "received a second request message for %s method %s", kind, call->path);
		return 0;
	}
	if (conn_buffered(c) + len > c->server->lim.max_conn_buffered) {
		conn_overflow(c);
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

	if (!call || call->state != CALL_RECV || c->closing)
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
	call_close_user(call, status);
	call_free(c, call);
}

static const struct h2_callbacks server_h2_callbacks = {
	.stream_open = srv_stream_open,
	.header = srv_header,
	.headers_end = srv_headers_end,
	.data = srv_data,
	.remote_end = srv_remote_end,
	.stream_close = srv_stream_close,
};

/* --- connections --- */

static void conn_update_events(struct grpc_server_conn *c)
{
	uint32_t ev = 0;

	if (!c->io)
		return;
	if (c->reading)
		ev |= EPOLLIN;
	if (conn_out_pending(c) > 0)
		ev |= EPOLLOUT;
	if (ev != c->io_events && loop_io_set_events(c->io, ev) == 0)
		c->io_events = ev;
}

/* Produces and writes output until nothing is left or the socket is full. */
static int conn_write(struct grpc_server_conn *c)
{
	int r = grpc_io_write(c->fd, c->h2, &c->out, &c->out_off, WRITE_CHUNK);

	if (conn_out_pending(c) == 0 && c->out.cap > WRITE_CHUNK * 2) {
		buf_release(&c->out);
		c->out_off = 0;
	}
	conn_update_events(c);
	return r;
}

static void conn_flush(struct grpc_server_conn *c)
{
	while (c->dirty && !c->dead) {
		int r;

		c->dirty = false;
		if (!c->mem) {
			r = conn_write(c);
		} else {
			struct buf scratch = { 0 };

			r = h2_session_send(c->h2, c->mem_out ? c->mem_out : &scratch, SIZE_MAX);
			buf_release(&scratch);
		}
		if (r < 0) {
			log_debug_errno(r, "connection write failed", "conn=%" PRIu64, c->id);
			c->kill_pending = true;
			break;
		}
	}
}

static void on_linger(struct loop_timer *t, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	conn_enter(c);
	c->kill_pending = true;
	conn_leave(c);
}

static void server_check_done(struct grpc_server *s)
{
	if (s->shutting_down && !s->done_called && s->stats.conns == 0 && s->loop)
		loop_timer_arm(s->defer, 0);
}

static void conn_unlink(struct grpc_server_conn **head, struct grpc_server_conn *c)
{
	assert(!c->prev == (*head == c));
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

/*
 * A dead socket connection leaves the server's list at once, and its memory is released from
 * the loop once no callback can be using it (the libuv close_cb rule).
 */
static void conn_bury(struct grpc_server *s, struct grpc_server_conn *c)
{
	conn_unlink(&s->conns, c);
	c->buried = true;
	c->next = s->graveyard;
	s->graveyard = c;
	if (s->loop)
		loop_timer_arm(s->defer, 0);
}

static void server_free_graveyard(struct grpc_server *s)
{
	while (s->graveyard) {
		struct grpc_server_conn *c = s->graveyard;

		s->graveyard = c->next;
		free(c);
	}
}

/* Closes the calls, the session and the socket; a memory connection's struct stays. */
static void conn_kill(struct grpc_server_conn *c)
{
	struct grpc_server *s = c->server;
	uint32_t code = H2_NO_ERROR;
	bool event = false;
	enum grpc_server_event ev = GRPC_SERVER_EVENT_PROTOCOL;

	if (c->dead)
		return;
	if (c->h2 && h2_session_goaway_sent(c->h2, &code) && code != H2_NO_ERROR)
		event = true;
	if (c->overflow) {
		c->dead_r = -ENOBUFS;
		ev = GRPC_SERVER_EVENT_OVERFLOW;
		code = H2_ENHANCE_YOUR_CALM;
		event = true;
	} else {
		c->dead_r = event ? -EPROTO : -ECONNRESET;
	}
	c->dead = true;
	c->closing = true;
	c->reading = false;
	while (c->calls) {
		struct grpc_call *call = c->calls;

		call_close_user(call, c->kill_status);
		call_free(c, call);
	}
	c->h2 = h2_session_free(c->h2);
	c->io = loop_io_free(c->io);
	c->linger = loop_timer_free(c->linger);
	c->timer = loop_timer_free(c->timer);
	c->fd = c->fd >= 0 ? fd_close(c->fd) : -1;
	buf_release(&c->out);
	c->out_off = 0;
	s->stats.conns--;
	if (event) {
		s->stats.goaways++;
		log_debug("connection closed with GOAWAY", "conn=%" PRIu64 " h2_error=%u", c->id,
			  code);
		if (s->event_fn)
			s->event_fn(s, ev, c->id, code, s->event_ud);
	}
	if (!c->mem)
		conn_bury(s, c);
	server_check_done(s);
}

/*
 * The connection timer: first the preface timeout from accept, then, once the preface is in,
 * the idle timeout whenever no stream is open.
 */
static void conn_update_timer(struct grpc_server_conn *c)
{
	if (!c->timer || c->closing)
		return;
	if (!c->preface_done) {
		if (!h2_session_preface_done(c->h2))
			return;
		c->preface_done = true;
		loop_timer_disarm(c->timer);
	}
	if (c->calls) {
		if (c->idle_armed)
			loop_timer_disarm(c->timer);
		c->idle_armed = false;
	} else if (!c->idle_armed) {
		c->idle_armed = true;
		c->idle_since = now_usec();
		loop_timer_arm(c->timer, c->server->lim.idle_timeout);
	}
}

static void conn_leave(struct grpc_server_conn *c)
{
	if (c->depth == 1 && !c->dead) {
		/* After the flush: sending a stream's end is what closes it. */
		conn_flush(c);
		conn_update_timer(c);
		if (!c->dead && !c->kill_pending && h2_session_done(c->h2) &&
		    conn_out_pending(c) == 0)
			c->kill_pending = true;
		/*
		 * A connection that stopped reading is dying (error, overflow, EOF, end of
		 * session): it gets a moment to flush its GOAWAY, even to a peer that reads
		 * nothing, and is closed then.
		 */
		if (!c->dead && !c->kill_pending && !c->reading && !c->mem && !c->linger &&
		    loop_timer_new(c->server->loop, on_linger, c, &c->linger) == 0)
			loop_timer_arm(c->linger, LINGER_USEC);
		if (c->kill_pending)
			conn_kill(c);
	}
	c->depth--;
}

/*
 * Closes @c for a reason of ours (@ev): GOAWAY(NO_ERROR, @debug), then a moment to flush it
 * (@now: closed as soon as it is written, freeing the slot at once). Reports @ev.
 */
static void conn_expire(struct grpc_server_conn *c, enum grpc_server_event ev, const char *debug,
			bool now)
{
	struct grpc_server *s = c->server;
	uint64_t id = c->id;

	if (c->dead || c->closing)
		return;
	log_debug("closing connection", "conn=%" PRIu64 " why=\"%s\"", id, debug);
	conn_enter(c);
	c->closing = true;
	c->reading = false;
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	if (h2_session_terminate(c->h2, H2_NO_ERROR, debug) < 0 || now)
		c->kill_pending = true;
	c->dirty = true;
	conn_leave(c);
	if (s->event_fn)
		s->event_fn(s, ev, id, H2_NO_ERROR, s->event_ud);
}

static void on_conn_timer(struct loop_timer *t, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	if (!c->preface_done)
		conn_expire(c, GRPC_SERVER_EVENT_PREFACE_TIMEOUT, "no HTTP/2 preface in time",
			    false);
	else if (!c->calls)
		conn_expire(c, GRPC_SERVER_EVENT_IDLE, "idle", false);
}

static void conn_read(struct grpc_server_conn *c)
{
	uint8_t buf[16384];
	size_t total = 0;
	int r;

	while (c->reading && total < READ_BUDGET) {
		ssize_t n = read(c->fd, buf, sizeof(buf));

		if (n > 0) {
			total += (size_t)n;
			r = h2_session_recv(c->h2, buf, (size_t)n);
			if (r < 0 || !h2_session_want_read(c->h2))
				c->reading = false;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		/* EOF or a socket error: answer a truncated frame with GOAWAY, then close. */
		(void)h2_session_recv_eof(c->h2);
		c->reading = false;
		c->kill_status = GRPC_STATUS_CANCELLED;
		c->kill_pending = true;
	}
}

static void on_conn_io(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	conn_enter(c);
	if (c->reading && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_read(c);
	else if (!c->reading && (events & (EPOLLHUP | EPOLLERR)))
		c->kill_pending = true;
	c->dirty = true;
	conn_leave(c);
}

static int conn_new(struct grpc_server *s, int fd, struct buf *mem_out,
		    struct grpc_server_conn **ret)
{
	const struct h2_settings settings = {
		.max_concurrent_streams = s->lim.max_concurrent_streams,
		.initial_window_size = STREAM_WINDOW,
		.max_header_list_size = MAX_HEADER_BYTES,
		.conn_window_size = CONN_WINDOW,
	};
	struct grpc_server_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->server = s;
	c->fd = fd;
	c->mem_out = mem_out;
	c->mem = fd < 0;
	c->reading = true;
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	r = h2_session_new(true, &settings, &server_h2_callbacks, c, &c->h2);
	if (r < 0)
		goto fail;
	if (fd >= 0) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		/* Who is on the other side (plugin.c tells the kubelet's streams from others). */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
		    len == sizeof(cred)) {
			c->have_peer = true;
			c->peer_pid = cred.pid;
			c->peer_uid = cred.uid;
		}
		r = loop_io_new(s->loop, fd, EPOLLIN, on_conn_io, c, &c->io);
		if (r < 0)
			goto fail;
		c->io_events = EPOLLIN;
	}
	c->idle_since = now_usec();
	if (s->loop) {
		r = loop_timer_new(s->loop, on_conn_timer, c, &c->timer);
		if (r < 0)
			goto fail;
		loop_timer_arm(c->timer, s->lim.preface_timeout);
	}
	c->id = ++s->next_conn_id;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->stats.conns++;
	s->stats.conns_peak = MAX(s->stats.conns_peak, s->stats.conns);
	/* SETTINGS go out at once: grpc-go, grpcio and grpc-js wait for them. */
	conn_enter(c);
	c->dirty = true;
	conn_leave(c);
	*ret = c;
	return 0;
fail:
	(void)loop_io_free(c->io);
	h2_session_free(c->h2);
	free(c);
	return r;
}

/* Over max_conns: SETTINGS and GOAWAY(REFUSED_STREAM), then close. */
static void server_refuse(struct grpc_server *s, int fd)
{
	static const struct h2_callbacks no_callbacks = { 0 };
	const struct h2_settings settings = { .max_concurrent_streams = 0 };
	struct h2_session *h = NULL;
	struct buf out = { 0 };
	uint8_t junk[4096];

	s->stats.conns_refused++;
	if (h2_session_new(true, &settings, &no_callbacks, NULL, &h) == 0 &&
	    h2_session_terminate(h, H2_REFUSED_STREAM, "too many connections") == 0 &&
	    h2_session_send(h, &out, SIZE_MAX) == 0)
		(void)!send(fd, out.data, out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)shutdown(fd, SHUT_WR);
	/* Unread input would turn our close into a reset that can hide the GOAWAY. */
	for (int i = 0; i < 16 && read(fd, junk, sizeof(junk)) > 0; i++)
		;
	(void)fd_close(fd);
	buf_release(&out);
	h2_session_free(h);
	log_debug("connection refused", "conns=%u", s->stats.conns);
	if (s->event_fn)
		s->event_fn(s, GRPC_SERVER_EVENT_REFUSED, ++s->next_conn_id, H2_REFUSED_STREAM,
			    s->event_ud);
}

static void on_accept(struct loop_io *io, int fd, uint32_t events, void *userdata);

static void on_accept_resume(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;
	int r;

	if (s->listen_fd < 0)
		return;
	if (s->accept_io_lost)
		r = loop_io_new(s->loop, s->listen_fd, EPOLLIN, on_accept, s, &s->listen_io);
	else
		r = loop_io_set_events(s->listen_io, EPOLLIN);
	if (r < 0) {
		/* Still short of something: try again after another pause, never give up. */
		log_debug_errno(r, "resuming accept failed, retrying", "path=%s", s->path);
		loop_timer_arm(s->accept_pause, ACCEPT_PAUSE_USEC);
		return;
	}
	s->accept_io_lost = false;
}

/* Stops accepting for ACCEPT_PAUSE_USEC. */
static void server_pause_accept(struct grpc_server *s)
{
	if (!s->accept_pause && loop_timer_new(s->loop, on_accept_resume, s, &s->accept_pause) < 0)
		return; /* the listener fires again: the next attempt may find memory */
	/*
	 * A listener that cannot be paused would spin: drop its io then, and let the resume
	 * create it again.
	 */
	if (!s->accept_io_lost && loop_io_set_events(s->listen_io, 0) < 0) {
		s->listen_io = loop_io_free(s->listen_io);
		s->accept_io_lost = true;
	}
	loop_timer_arm(s->accept_pause, ACCEPT_PAUSE_USEC);
}

/*
 * At the cap: closes the connection idle the longest (no stream open: strays, half-open
 * dials, clients that connected and said nothing), so that the kubelet's dial-back is served.
 * Returns false when every connection is busy.
 */
static bool server_evict_idle(struct grpc_server *s)
{
	struct grpc_server_conn *victim = NULL;

	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (c->dead || c->closing || c->mem || c->calls || c->depth > 0)
			continue;
		if (!victim || c->idle_since < victim->idle_since)
			victim = c;
	}
	if (!victim)
		return false;
	conn_expire(victim, GRPC_SERVER_EVENT_EVICTED, "connection limit: idle connection closed",
		    true);
	return true;
}

static void on_accept(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct grpc_server *s = userdata;

	for (int i = 0; i < 16 && s->listen_fd >= 0; i++) {
		struct grpc_server_conn *c;
		int cfd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN)
				break;
			/*
			 * Out of fds or memory: the listener would fire again at once. Pause it
			 * for a moment rather than spin.
			 */
			log_debug_errno(-errno, "accept failed, pausing", "path=%s", s->path);
			server_pause_accept(s);
			break;
		}
		if (s->shutting_down) {
			(void)fd_close(cfd);
			continue;
		}
		if (s->stats.conns >= s->lim.max_conns && !server_evict_idle(s)) {
			server_refuse(s, cfd);
			continue;
		}
		if (conn_new(s, cfd, NULL, &c) < 0)
			(void)fd_close(cfd);
	}
}

/* Flushes (and so closes, if they are done) the connections marked dirty. */
static void server_flush_dirty(struct grpc_server *s)
{
	bool again;

	/* A flush can run close callbacks that touch other connections: rescan after each. */
	do {
		again = false;
		for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
			if (c->dirty && !c->dead && c->depth == 0) {
				conn_enter(c);
				assert(c->server == s);
				conn_leave(c);
				again = true;
				break;
			}
		}
	} while (again);
}

static void on_defer(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;

	server_flush_dirty(s);
	server_free_graveyard(s);
	if (s->shutting_down && !s->done_called && s->stats.conns == 0) {
		s->done_called = true;
		if (s->done)
			s->done(s, s->done_ud);
	}
}

static void on_grace(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;

	/* The grace period is over: whatever is still open is closed now. */
	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (c->dead || c->depth > 0)
			continue;
		c->kill_pending = true;
		c->dirty = true;
	}
	server_flush_dirty(s);
	server_check_done(s);
}

/* @dst = @src (NULL: all defaults), each 0 replaced by its default. */
static void limits_fill(struct grpc_limits *dst, const struct grpc_limits *src)
{
	*dst = src ? *src : (struct grpc_limits){ 0 };
	if (!dst->max_recv_msg)
		dst->max_recv_msg = DEFAULT_MAX_RECV;
	if (!dst->max_send_msg)
		dst->max_send_msg = DEFAULT_MAX_SEND;
	dst->max_send_msg = MIN(dst->max_send_msg, (size_t)UINT32_MAX);
	if (!dst->max_conns)
		dst->max_conns = DEFAULT_MAX_CONNS;
	if (!dst->max_conn_buffered)
		dst->max_conn_buffered = dst->max_recv_msg + ((size_t)4 << 20);
	if (!dst->max_concurrent_streams)
		dst->max_concurrent_streams = DEFAULT_MAX_STREAMS;
	if (!dst->preface_timeout)
		dst->preface_timeout = PREFACE_TIMEOUT;
	if (!dst->idle_timeout)
		dst->idle_timeout = IDLE_TIMEOUT;
}

int grpc_server_set_limits(struct grpc_server *s, const struct grpc_limits *limits)
{
	if (limits && limits->max_concurrent_streams && limits->max_concurrent_streams < 100)
		return -EINVAL;
	limits_fill(&s->lim, limits);
	return 0;
}

int grpc_server_new(struct loop *l, const struct grpc_method *methods, size_t n_methods,
		    const struct grpc_limits *limits, void *userdata, struct grpc_server **ret)
{
	struct grpc_server *s;

	if (n_methods > 0 && !methods)
		return -EINVAL;
	if (limits && limits->max_concurrent_streams && limits->max_concurrent_streams < 100)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = l;
	s->methods = methods;
	s->n_methods = n_methods;
	s->userdata = userdata;
	s->listen_fd = -1;
	limits_fill(&s->lim, limits);
	if (l) {
		int r = loop_timer_new(l, on_defer, s, &s->defer);

		if (r < 0) {
			free(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

void grpc_server_set_event_cb(struct grpc_server *s, grpc_server_event_fn *fn, void *userdata)
{
	s->event_fn = fn;
	s->event_ud = userdata;
}

int grpc_server_listen(struct grpc_server *s, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old_umask;
	int fd = -1, r;

	if (!s->loop || !path || !*path)
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	grpc_server_unlisten(s);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket from an earlier run (or a kubelet restart) is replaced. */
	if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(path) < 0 && errno != ENOENT) {
		r = -errno;
		goto fail;
	}
	old_umask = umask(0077);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0)
		r = -errno;
	umask(old_umask);
	if (r < 0)
		goto fail;
	if (chmod(path, 0600) < 0 || listen(fd, SOMAXCONN) < 0 || stat(path, &st) < 0) {
		r = -errno;
		(void)unlink(path);
		goto fail;
	}
	s->path = strdup(path);
	if (!s->path) {
		r = -ENOMEM;
		(void)unlink(path);
		goto fail;
	}
	r = loop_io_new(s->loop, fd, EPOLLIN, on_accept, s, &s->listen_io);
	if (r < 0) {
		(void)unlink(path);
		s->path = mfree(s->path);
		goto fail;
	}
	s->listen_fd = fd;
	s->path_dev = st.st_dev;
	s->path_ino = st.st_ino;
	s->path_ctime = st.st_ctim;
	return 0;
fail:
	(void)fd_close(fd);
	return r;
}

void grpc_server_unlisten(struct grpc_server *s)
{
	struct stat st;

	s->listen_io = loop_io_free(s->listen_io);
	s->listen_fd = fd_close(s->listen_fd);
	s->accept_io_lost = false;
	if (s->accept_pause)
		loop_timer_disarm(s->accept_pause);
	if (!s->path)
		return;
	/* Someone (a restarted kubelet) may have replaced the file: only remove our own. */
	if (lstat(s->path, &st) == 0 && st.st_dev == s->path_dev && st.st_ino == s->path_ino &&
	    st.st_ctim.tv_sec == s->path_ctime.tv_sec &&
	    st.st_ctim.tv_nsec == s->path_ctime.tv_nsec)
		(void)unlink(s->path);
	s->path = mfree(s->path);
}

const char *grpc_server_path(const struct grpc_server *s)
{
	return s->path;
}

void grpc_server_shutdown(struct grpc_server *s, usec_t grace_usec,
			  void (*done)(struct grpc_server *s, void *userdata), void *userdata)
{
	s->done = done;
	s->done_ud = userdata;
	grpc_server_unlisten(s);
	if (s->shutting_down)
		return;
	s->shutting_down = true;
	/* Nothing is flushed (or freed) here: that happens from the loop, or the next feed. */
	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (c->dead || c->shutdown_sent)
			continue;
		c->shutdown_sent = true;
		(void)h2_session_shutdown(c->h2);
		for (struct grpc_call *call = c->calls; call; call = call->next)
			if (call->state == CALL_RUNNING && call->method->server_streaming &&
			    !call->user_closed)
				(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
		conn_mark_dirty(c);
	}
	if (s->loop) {
		if (grace_usec != USEC_INFINITY && !s->grace &&
		    loop_timer_new(s->loop, on_grace, s, &s->grace) == 0)
			loop_timer_arm(s->grace, grace_usec);
		loop_timer_arm(s->defer, 0);
	} else if (s->stats.conns == 0 && !s->done_called) {
		s->done_called = true;
		if (done)
			done(s, userdata);
	}
}

struct grpc_server *grpc_server_free(struct grpc_server *s)
{
	if (!s)
		return NULL;
	grpc_server_unlisten(s);
	while (s->conns) {
		struct grpc_server_conn *c = s->conns;

		c->depth++;
		c->kill_status = GRPC_STATUS_UNAVAILABLE;
		conn_kill(c);
		c->depth--;
		/* A socket connection went to the graveyard; a memory one is still listed. */
		if (!c->buried) {
			conn_unlink(&s->conns, c);
			free(c);
		}
	}
	server_free_graveyard(s);
	(void)loop_timer_free(s->defer);
	(void)loop_timer_free(s->grace);
	(void)loop_timer_free(s->accept_pause);
	free(s);
	return NULL;
}

void grpc_server_get_stats(const struct grpc_server *s, struct grpc_server_stats *ret)
{
	*ret = s->stats;
}

int grpc_server_conn_new_mem(struct grpc_server *s, struct buf *out, struct grpc_server_conn **ret)
{
	return conn_new(s, -1, out, ret);
}

int grpc_server_conn_feed(struct grpc_server_conn *c, const uint8_t *data, size_t len)
{
	if (c->dead)
		return c->dead_r;
	conn_enter(c);
	if (c->reading && h2_session_recv(c->h2, data, len) < 0)
		c->reading = false;
	if (c->reading && !h2_session_want_read(c->h2))
		c->reading = false;
	c->dirty = true;
	conn_leave(c);
	return c->dead ? c->dead_r : 0;
}

int grpc_server_conn_feed_eof(struct grpc_server_conn *c)
{
	if (c->dead)
		return c->dead_r;
	conn_enter(c);
	(void)h2_session_recv_eof(c->h2);
	c->reading = false;
	c->kill_status = GRPC_STATUS_CANCELLED;
	c->kill_pending = true;
	c->dirty = true;
	conn_leave(c);
	return c->dead_r;
}

int grpc_server_conn_flush(struct grpc_server_conn *c)
{
	if (c->dead)
		return c->dead_r;
	conn_enter(c);
	c->dirty = true;
	conn_leave(c);
	return c->dead ? c->dead_r : 0;
}

struct grpc_server_conn *grpc_server_conn_free(struct grpc_server_conn *c)
{
	if (!c)
		return NULL;
	c->depth++;
	conn_kill(c);
	c->depth--;
	if (!c->buried) {
		conn_unlink(&c->server->conns, c);
		free(c);
	}
	return NULL;
}

uint64_t grpc_server_conn_id(const struct grpc_server_conn *c)
{
	return c->id;
}

void grpc_server_conn_set_peer_cred(struct grpc_server_conn *c, pid_t pid, uid_t uid)
{
	c->have_peer = true;
	c->peer_pid = pid;
	c->peer_uid = uid;
}

/* --- calls --- */

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
	if (c->closing)
		return -EPIPE;
	if (len > c->server->lim.max_send_msg)
		return -EMSGSIZE;
	if (!call->method->server_streaming && call->sent_msg)
		return -EALREADY;
	if (shared)
		replaceable = h2_stream_latest_pending(c->h2, call->id);
	if (conn_buffered(c) - replaceable + len + GRPC_PREFIX_LEN >
	    c->server->lim.max_conn_buffered) {
		conn_overflow(c);
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
	conn_mark_dirty(c);
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
	    call->conn->closing)
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
