/*
 * c-peer: our gRPC layer's side of the interop suite (tests/interop/run.py drives it).
 *
 *   c-peer server SOCK            serve edgegpu.interop.Test on the unix socket SOCK
 *   c-peer client SOCK CHECK      run one client check against the server on SOCK
 *
 * Only the public API of src/grpc/grpc.h and src/base/loop.h is used. A check prints one line, "ok: ..."
 * or the reason it failed, and exits 0 or 2 (1 is left to valgrind's --error-exitcode).
 * The server exits 0 after SIGTERM once grpc_server_shutdown() has drained every connection.
 */

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grpc.h"
#include "interop.pb-c.h"
#include "loop.h"

#define EXIT_CHECK_FAILED 2

#define PATH_UNARY  "/edgegpu.interop.Test/Unary"
#define PATH_STREAM "/edgegpu.interop.Test/Stream"
#define PATH_STATS  "/edgegpu.interop.Test/Stats"

#define TAG_UNKNOWN (-1)
#define TAG_OPEN    (-2)
#define MAX_TAGS    1024

/* The status message of the "error" check: non-ASCII, '%', a tab and spaces. */
static const char err_msg[] = "bad r\xc3\xa9sum\xc3\xa9: 100% done\t[x]";
#define BIG_SIZE (3u << 20)

static void pattern_fill(uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i % 251);
}

static bool pattern_ok(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(i % 251))
			return false;
	return true;
}

/* --- server --- */

struct tag {
	struct tag *next;
	char *name;
	int status;
};

struct peer {
	struct loop *loop;
	struct grpc_server *server;
	struct tag *tags; /* newest first */
	unsigned n_tags;
	bool stopping;
};

/* One per call. Freed when the call has closed and no answer is being written. */
struct call_state {
	struct peer *peer;
	struct grpc_call *call;
	struct loop_timer *timer;
	char *tag;
	bool closed;
	bool busy;
	/* Unary */
	uint32_t response_size;
	int32_t status_code;
	char *status_message;
	uint32_t received;
	bool received_ok;
	/* Stream */
	uint32_t count;
	uint32_t sent;
	uint32_t interval_ms;
	uint32_t size;
	bool hold_open;
};

static struct tag *tag_find(struct peer *p, const char *name)
{
	for (struct tag *t = p->tags; t; t = t->next)
		if (streq(t->name, name))
			return t;
	return NULL;
}

static void tag_set(struct peer *p, const char *name, int status)
{
	struct tag *t, **pp;

	if (!name)
		return;
	t = tag_find(p, name);
	if (t) {
		t->status = status;
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return;
	t->name = strdup(name);
	if (!t->name) {
		free(t);
		return;
	}
	t->status = status;
	t->next = p->tags;
	p->tags = t;
	if (++p->n_tags <= MAX_TAGS)
		return;
	/* Drop the oldest. */
	for (pp = &p->tags; (*pp)->next; pp = &(*pp)->next)
		;
	free((*pp)->name);
	free(*pp);
	*pp = NULL;
	p->n_tags--;
}

static void tags_free(struct peer *p)
{
	while (p->tags) {
		struct tag *t = p->tags;

		p->tags = t->next;
		free(t->name);
		free(t);
	}
	p->n_tags = 0;
}

static struct call_state *call_state_free(struct call_state *st)
{
	if (!st)
		return NULL;
	loop_timer_free(st->timer);
	free(st->tag);
	free(st->status_message);
	free(st);
	return NULL;
}

static void call_closed(struct grpc_call *call, enum grpc_status status, void *userdata)
{
	struct call_state *st = userdata;

	st->closed = true;
	st->call = NULL;
	tag_set(st->peer, st->tag, (int)status);
	st->timer = loop_timer_free(st->timer);
	if (!st->busy)
		call_state_free(st);
}

/* Marks the end of a section in which call_closed() may have run. Returns true if @st is gone. */
static bool call_state_release(struct call_state *st)
{
	st->busy = false;
	if (!st->closed)
		return false;
	call_state_free(st);
	return true;
}

static struct call_state *call_state_new(struct peer *p, struct grpc_call *call, const char *tag)
{
	struct call_state *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->peer = p;
	st->call = call;
	if (tag && tag[0]) {
		st->tag = strdup(tag);
		if (!st->tag)
			return call_state_free(st);
	}
	grpc_call_set_close_cb(call, call_closed, st);
	tag_set(p, st->tag, TAG_OPEN);
	return st;
}

/* Packs @msg and sends it on @call; on failure finishes the call with INTERNAL. */
static int send_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *b = malloc(n ? n : 1);
	int r;

	if (!b)
		return grpc_call_finish(call, GRPC_STATUS_INTERNAL, "out of memory");
	protobuf_c_message_pack(msg, b);
	r = grpc_call_send(call, b, n);
	free(b);
	if (r < 0)
		(void)grpc_call_finish(call, grpc_status_from_errno(r), "send failed");
	return r;
}

static void unary_answer(struct call_state *st)
{
	Edgegpu__Interop__UnaryResponse resp = EDGEGPU__INTEROP__UNARY_RESPONSE__INIT;
	uint8_t *payload = NULL;

	st->busy = true;
	if (st->status_code) {
		(void)grpc_call_finish(st->call, (enum grpc_status)st->status_code,
				       st->status_message);
		goto out;
	}
	payload = malloc(st->response_size ? st->response_size : 1);
	if (!payload) {
		(void)grpc_call_finish(st->call, GRPC_STATUS_INTERNAL, "out of memory");
		goto out;
	}
	pattern_fill(payload, st->response_size);
	resp.payload.data = payload;
	resp.payload.len = st->response_size;
	resp.received = st->received;
	resp.received_ok = st->received_ok;
	if (send_message(st->call, &resp.base) < 0 || st->closed)
		goto out;
	(void)grpc_call_finish(st->call, GRPC_STATUS_OK, NULL);
out:
	free(payload);
	(void)call_state_release(st);
}

static void unary_timer(struct loop_timer *t, void *userdata)
{
	unary_answer(userdata);
}

static void handle_unary(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct peer *p = userdata;
	Edgegpu__Interop__UnaryRequest *u;
	struct call_state *st;

	u = edgegpu__interop__unary_request__unpack(NULL, len, req);
	if (!u) {
		(void)grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "bad UnaryRequest");
		return;
	}
	st = call_state_new(p, call, u->tag);
	if (!st)
		goto oom;
	st->response_size = u->response_size;
	st->status_code = u->status_code;
	st->received = (uint32_t)u->payload.len;
	st->received_ok = pattern_ok(u->payload.data, u->payload.len);
	if (u->status_message && u->status_message[0]) {
		st->status_message = strdup(u->status_message);
		if (!st->status_message)
			goto oom;
	}
	if (u->sleep_ms) {
		if (loop_timer_new(p->loop, unary_timer, st, &st->timer) < 0)
			goto oom;
		loop_timer_arm(st->timer, (usec_t)u->sleep_ms * USEC_PER_MSEC);
	} else {
		unary_answer(st);
	}
	edgegpu__interop__unary_request__free_unpacked(u, NULL);
	return;
oom:
	edgegpu__interop__unary_request__free_unpacked(u, NULL);
	/* The close callback frees st, if there is one. */
	(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

/* Sends the next stream message, or ends the stream when all are out. */
static void stream_step(struct call_state *st)
{
	Edgegpu__Interop__StreamResponse m = EDGEGPU__INTEROP__STREAM_RESPONSE__INIT;
	uint8_t *payload = NULL;

	st->busy = true;
	if (st->sent < st->count) {
		payload = malloc(st->size ? st->size : 1);
		if (!payload) {
			(void)grpc_call_finish(st->call, GRPC_STATUS_INTERNAL, "out of memory");
			goto out;
		}
		pattern_fill(payload, st->size);
		m.seq = st->sent;
		m.payload.data = payload;
		m.payload.len = st->size;
		if (send_message(st->call, &m.base) < 0 || st->closed)
			goto out;
		st->sent++;
	}
	if (st->sent < st->count)
		loop_timer_arm(st->timer, (usec_t)st->interval_ms * USEC_PER_MSEC);
	else if (!st->hold_open)
		(void)grpc_call_finish(st->call, GRPC_STATUS_OK, NULL);
out:
	free(payload);
	(void)call_state_release(st);
}

static void stream_timer(struct loop_timer *t, void *userdata)
{
	stream_step(userdata);
}

static void handle_stream(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct peer *p = userdata;
	Edgegpu__Interop__StreamRequest *s;
	struct call_state *st;

	s = edgegpu__interop__stream_request__unpack(NULL, len, req);
	if (!s) {
		(void)grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "bad StreamRequest");
		return;
	}
	st = call_state_new(p, call, s->tag);
	if (!st || loop_timer_new(p->loop, stream_timer, st, &st->timer) < 0) {
		edgegpu__interop__stream_request__free_unpacked(s, NULL);
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	st->count = s->count;
	st->interval_ms = s->interval_ms;
	st->size = s->size;
	st->hold_open = s->hold_open;
	edgegpu__interop__stream_request__free_unpacked(s, NULL);
	stream_step(st);
}

static void handle_stats(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	Edgegpu__Interop__StatsResponse resp = EDGEGPU__INTEROP__STATS_RESPONSE__INIT;
	struct peer *p = userdata;
	Edgegpu__Interop__StatsRequest *s;
	struct grpc_server_stats stats;
	struct tag *t;

	s = edgegpu__interop__stats_request__unpack(NULL, len, req);
	if (!s) {
		(void)grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "bad StatsRequest");
		return;
	}
	grpc_server_get_stats(p->server, &stats);
	resp.streams = stats.streams;
	resp.streams_peak = stats.streams_peak;
	resp.conns = stats.conns;
	resp.calls = stats.calls;
	resp.tag_status = TAG_UNKNOWN;
	if (s->tag && s->tag[0]) {
		t = tag_find(p, s->tag);
		if (t)
			resp.tag_status = t->status;
	}
	edgegpu__interop__stats_request__free_unpacked(s, NULL);
	if (send_message(call, &resp.base) == 0)
		(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static const struct grpc_method methods[] = {
	{ .path = PATH_UNARY, .handler = handle_unary },
	{ .path = PATH_STREAM, .server_streaming = true, .handler = handle_stream },
	{ .path = PATH_STATS, .handler = handle_stats },
};

static void on_event(struct grpc_server *s, enum grpc_server_event ev, uint64_t conn_id,
		     uint32_t h2_error, void *userdata)
{
	static const char *const names[] = {
		[GRPC_SERVER_EVENT_REFUSED] = "refused",
		[GRPC_SERVER_EVENT_OVERFLOW] = "overflow",
		[GRPC_SERVER_EVENT_PROTOCOL] = "protocol",
	};
	const char *name = (unsigned)ev < ELEMENTSOF(names) ? names[ev] : "unknown";

	/* run.py reads these lines to see that each connection fault was reported once. */
	(void)fprintf(stderr, "c-peer: event=%s conn=%llu h2_error=%u\n", name,
		      (unsigned long long)conn_id, h2_error);
}

static void shutdown_done(struct grpc_server *s, void *userdata)
{
	struct peer *p = userdata;

	loop_exit(p->loop, 0);
}

static void on_signal(struct loop *l, int signo, void *userdata)
{
	struct peer *p = userdata;

	if (p->stopping) {
		loop_exit(l, 1);
		return;
	}
	p->stopping = true;
	(void)fprintf(stderr, "c-peer: signal %d, shutting down\n", signo);
	grpc_server_shutdown(p->server, 2 * USEC_PER_SEC, shutdown_done, p);
}

static int run_server(const char *sock)
{
	struct grpc_limits limits = { 0 }; /* every default */
	struct peer p = { 0 };
	int r;

	r = loop_new(&p.loop);
	if (r < 0) {
		(void)fprintf(stderr, "c-peer: loop_new: %s\n", strerror(-r));
		return 1;
	}
	r = loop_signal_add(p.loop, SIGTERM, on_signal, &p);
	if (r >= 0)
		r = loop_signal_add(p.loop, SIGINT, on_signal, &p);
	if (r < 0) {
		(void)fprintf(stderr, "c-peer: loop_signal_add: %s\n", strerror(-r));
		goto out;
	}
	r = grpc_server_new(p.loop, methods, ELEMENTSOF(methods), &limits, &p, &p.server);
	if (r < 0) {
		(void)fprintf(stderr, "c-peer: grpc_server_new: %s\n", strerror(-r));
		goto out;
	}
	grpc_server_set_event_cb(p.server, on_event, &p);
	r = grpc_server_listen(p.server, sock);
	if (r < 0) {
		(void)fprintf(stderr, "c-peer: grpc_server_listen %s: %s\n", sock, strerror(-r));
		goto out;
	}
	(void)printf("c-peer server listening on %s\n", sock);
	(void)fflush(stdout);
	r = loop_run(p.loop);
	if (r < 0)
		(void)fprintf(stderr, "c-peer: loop_run: %s\n", strerror(-r));
	else
		(void)fprintf(stderr, "c-peer: server stopped\n");
out:
	p.server = grpc_server_free(p.server);
	tags_free(&p);
	p.loop = loop_free(p.loop);
	return r == 0 ? 0 : 1;
}

/* --- client --- */

static double timeout_scale(void)
{
	const char *e = getenv("INTEROP_TIMEOUT_SCALE");
	double f = e ? strtod(e, NULL) : 1.0;

	return f > 1.0 ? f : 1.0;
}

static usec_t scaled(usec_t u)
{
	return (usec_t)((double)u * timeout_scale());
}

/* A failure message for the check's output line. */
struct result {
	char line[512];
};

__attribute__((format(printf, 2, 3))) static int fail(struct result *res, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(res->line, sizeof(res->line), fmt, ap);
	va_end(ap);
	return -1;
}

__attribute__((format(printf, 2, 3))) static int ok(struct result *res, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(res->line, sizeof(res->line), fmt, ap);
	va_end(ap);
	return 0;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *ret_len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(n ? n : 1);

	if (!b)
		return NULL;
	protobuf_c_message_pack(m, b);
	*ret_len = n;
	return b;
}

/* The outcome of one synchronous call. */
struct sync_call {
	int r;
	enum grpc_status status;
	char *message;
	uint8_t *resp;
	size_t len;
	usec_t elapsed;
};

static void sync_call_release(struct sync_call *c)
{
	c->message = mfree(c->message);
	c->resp = mfree(c->resp);
}

static int do_unary(const char *sock, const Edgegpu__Interop__UnaryRequest *req, usec_t timeout,
		    struct sync_call *ret)
{
	struct grpc_client_opts opts = { .timeout = timeout };
	uint8_t *b;
	size_t n;
	usec_t t0;

	*ret = (struct sync_call){ 0 };
	b = pack(&req->base, &n);
	if (!b)
		return -ENOMEM;
	t0 = now_usec();
	ret->r = grpc_client_call_sync(sock, PATH_UNARY, b, n, &opts, &ret->status, &ret->message,
				       &ret->resp, &ret->len);
	ret->elapsed = now_usec() - t0;
	free(b);
	return 0;
}

static const char *describe(const struct sync_call *c, char *buf, size_t size)
{
	if (c->r < 0)
		(void)snprintf(buf, size, "transport error %d (%s): %s", c->r, strerror(-c->r),
			       c->message ? c->message : "(no message)");
	else
		(void)snprintf(buf, size, "status %d (%s) message \"%s\"", c->status,
			       grpc_status_name(c->status), c->message ? c->message : "");
	return buf;
}

static int verify_unary(const struct sync_call *c, size_t sent, size_t want, struct result *res)
{
	Edgegpu__Interop__UnaryResponse *u;
	char buf[600];
	int r = 0;

	if (c->r < 0 || c->status != GRPC_STATUS_OK)
		return fail(res, "call failed: %s", describe(c, buf, sizeof(buf)));
	u = edgegpu__interop__unary_response__unpack(NULL, c->len, c->resp);
	if (!u)
		return fail(res, "response of %zu bytes does not decode", c->len);
	if (u->payload.len != want || !pattern_ok(u->payload.data, u->payload.len))
		r = fail(res, "response payload: %zu bytes, want %zu", u->payload.len, want);
	else if (u->received != sent || !u->received_ok)
		r = fail(res, "server received %u bytes (pattern ok %d), sent %zu", u->received,
			 u->received_ok, sent);
	edgegpu__interop__unary_response__free_unpacked(u, NULL);
	return r;
}

static int check_unary(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	uint8_t payload[1000];
	struct sync_call c;
	int r;

	pattern_fill(payload, sizeof(payload));
	req.payload.data = payload;
	req.payload.len = sizeof(payload);
	req.response_size = sizeof(payload);
	if (do_unary(sock, &req, scaled(10 * USEC_PER_SEC), &c) < 0)
		return fail(res, "out of memory");
	r = verify_unary(&c, sizeof(payload), sizeof(payload), res);
	if (r == 0)
		r = ok(res, "1000 bytes each way in %.1f ms", (double)c.elapsed / 1000.0);
	sync_call_release(&c);
	return r;
}

static int check_error(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct sync_call c;
	char buf[600];
	int r;

	req.status_code = GRPC_STATUS_INVALID_ARGUMENT;
	req.status_message = (char *)err_msg;
	if (do_unary(sock, &req, scaled(10 * USEC_PER_SEC), &c) < 0)
		return fail(res, "out of memory");
	if (c.r == 0 && c.status == GRPC_STATUS_INVALID_ARGUMENT && streq_ptr(c.message, err_msg))
		r = ok(res, "status %d message \"%s\"", c.status, c.message);
	else
		r = fail(res, "got %s, want status 3 message \"%s\"",
			 describe(&c, buf, sizeof(buf)), err_msg);
	sync_call_release(&c);
	return r;
}

static int check_big(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct sync_call c;
	uint8_t *payload;
	int r;

	payload = malloc(BIG_SIZE);
	if (!payload)
		return fail(res, "out of memory");
	pattern_fill(payload, BIG_SIZE);
	req.payload.data = payload;
	req.payload.len = BIG_SIZE;
	req.response_size = BIG_SIZE;
	r = do_unary(sock, &req, scaled(20 * USEC_PER_SEC), &c);
	free(payload);
	if (r < 0)
		return fail(res, "out of memory");
	r = verify_unary(&c, BIG_SIZE, BIG_SIZE, res);
	if (r == 0)
		r = ok(res, "3 MiB each way in %.1f ms", (double)c.elapsed / 1000.0);
	sync_call_release(&c);
	return r;
}

/* Polls Stats until the call tagged @tag has closed with @want1 or @want2. */
static int wait_tag(const char *sock, const char *tag, int want1, int want2, int *ret,
		    struct result *res)
{
	Edgegpu__Interop__StatsRequest req = EDGEGPU__INTEROP__STATS_REQUEST__INIT;
	struct grpc_client_opts opts = { .timeout = scaled(10 * USEC_PER_SEC) };
	usec_t end = now_usec() + scaled(5 * USEC_PER_SEC);
	struct timespec pause = { .tv_nsec = 50L * 1000 * 1000 };
	int last = TAG_UNKNOWN;
	uint8_t *b;
	size_t n;

	req.tag = (char *)tag;
	b = pack(&req.base, &n);
	if (!b)
		return fail(res, "out of memory");
	while (now_usec() < end) {
		Edgegpu__Interop__StatsResponse *s;
		struct sync_call c = { 0 };
		char buf[600];

		c.r = grpc_client_call_sync(sock, PATH_STATS, b, n, &opts, &c.status, &c.message,
					    &c.resp, &c.len);
		if (c.r < 0 || c.status != GRPC_STATUS_OK) {
			fail(res, "stats: %s", describe(&c, buf, sizeof(buf)));
			sync_call_release(&c);
			free(b);
			return -1;
		}
		s = edgegpu__interop__stats_response__unpack(NULL, c.len, c.resp);
		sync_call_release(&c);
		if (!s) {
			free(b);
			return fail(res, "stats response does not decode");
		}
		last = s->tag_status;
		edgegpu__interop__stats_response__free_unpacked(s, NULL);
		if (last == want1 || last == want2) {
			free(b);
			*ret = last;
			return 0;
		}
		if (last >= 0) {
			free(b);
			return fail(res, "server closed the call with status %d, want %d or %d",
				    last, want1, want2);
		}
		(void)nanosleep(&pause, NULL);
	}
	free(b);
	return fail(res, "server never closed the call (tag status %d)", last);
}

static void make_tag(char *buf, size_t size, const char *check)
{
	(void)snprintf(buf, size, "c-%s-%d-%llu", check, (int)getpid(),
		       (unsigned long long)now_usec());
}

static int check_deadline(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct sync_call c;
	char tag[96], buf[600];
	int r, code = -1;

	make_tag(tag, sizeof(tag), "deadline");
	req.sleep_ms = 3000;
	req.tag = tag;
	if (do_unary(sock, &req, 300 * USEC_PER_MSEC, &c) < 0)
		return fail(res, "out of memory");
	/* Our own timer or the server's DEADLINE_EXCEEDED, whichever comes first. */
	if (!(c.r == -ETIMEDOUT || (c.r == 0 && c.status == GRPC_STATUS_DEADLINE_EXCEEDED)))
		r = fail(res, "got %s, want -ETIMEDOUT or DEADLINE_EXCEEDED",
			 describe(&c, buf, sizeof(buf)));
	else if (!c.message || !c.message[0])
		r = fail(res, "no error message");
	else if (c.elapsed < 250 * USEC_PER_MSEC || c.elapsed > scaled(2 * USEC_PER_SEC))
		r = fail(res, "deadline of 300 ms reported after %.1f ms",
			 (double)c.elapsed / 1000.0);
	else
		r = 0;
	if (r == 0 && wait_tag(sock, tag, GRPC_STATUS_CANCELLED, GRPC_STATUS_DEADLINE_EXCEEDED,
			       &code, res) == 0)
		r = ok(res, "%s after %.1f ms; server closed the call with %d",
		       describe(&c, buf, sizeof(buf)), (double)c.elapsed / 1000.0, code);
	else
		r = -1;
	sync_call_release(&c);
	return r;
}

/* missing/refused: @sock is a path with no socket, or a socket file nobody listens on. */
static int check_transport(const char *sock, int want, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct sync_call c;
	char buf[600];
	int r;

	if (do_unary(sock, &req, scaled(5 * USEC_PER_SEC), &c) < 0)
		return fail(res, "out of memory");
	if (c.r == want && c.message && c.message[0])
		r = ok(res, "%s", describe(&c, buf, sizeof(buf)));
	else
		r = fail(res, "got %s, want transport error %d (%s) with a message",
			 describe(&c, buf, sizeof(buf)), want, strerror(-want));
	sync_call_release(&c);
	return r;
}

/* parallel / cancel: asynchronous calls on one loop. */
struct async_ctx {
	struct loop *loop;
	unsigned pending;
	unsigned failed;
	char first_error[600];
};

/* One asynchronous call; @cc is cleared when its done callback has run (the call is freed). */
struct async_slot {
	struct async_ctx *ctx;
	struct grpc_client_call *cc;
	unsigned done;
};

static void async_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		       const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct async_slot *slot = userdata;
	struct async_ctx *a = slot->ctx;
	struct sync_call c = { .r = r,
			       .status = status,
			       .message = (char *)message,
			       .resp = (uint8_t *)resp,
			       .len = len };
	struct result res;

	slot->cc = NULL;
	slot->done++;
	if (verify_unary(&c, 10, 10, &res) < 0 && a->failed++ == 0)
		(void)snprintf(a->first_error, sizeof(a->first_error), "%s", res.line);
	if (--a->pending == 0)
		loop_exit(a->loop, 0);
}

static void async_guard(struct loop_timer *t, void *userdata)
{
	struct async_ctx *a = userdata;

	loop_exit(a->loop, -ETIMEDOUT);
}

#define N_PARALLEL 50

/* Many calls at once on one loop, each sleeping 500 ms at the server: they must overlap. */
static int check_parallel(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct grpc_client_opts opts = { .timeout = scaled(10 * USEC_PER_SEC) };
	struct async_slot slots[N_PARALLEL] = { 0 };
	struct async_ctx a = { 0 };
	struct loop_timer *guard = NULL;
	uint8_t payload[10], *b = NULL;
	usec_t t0, el;
	size_t n;
	int r;

	pattern_fill(payload, sizeof(payload));
	req.payload.data = payload;
	req.payload.len = sizeof(payload);
	req.response_size = sizeof(payload);
	req.sleep_ms = 500;
	b = pack(&req.base, &n);
	r = b ? loop_new(&a.loop) : -ENOMEM;
	if (r < 0)
		goto out;
	r = loop_timer_new(a.loop, async_guard, &a, &guard);
	if (r < 0)
		goto out;
	loop_timer_arm(guard, scaled(15 * USEC_PER_SEC));
	t0 = now_usec();
	for (unsigned i = 0; i < N_PARALLEL; i++) {
		slots[i].ctx = &a;
		r = grpc_client_call_start(a.loop, sock, PATH_UNARY, b, n, &opts, async_done,
					   &slots[i], &slots[i].cc);
		if (r < 0)
			goto out;
		a.pending++;
	}
	r = loop_run(a.loop);
	el = now_usec() - t0;
	if (r < 0)
		r = fail(res, "%u of %d calls still pending after 15 s", a.pending, N_PARALLEL);
	else if (a.failed)
		r = fail(res, "%u of %d calls failed, first: %s", a.failed, N_PARALLEL,
			 a.first_error);
	else if (el > scaled(3 * USEC_PER_SEC))
		r = fail(res, "%d calls sleeping 500 ms took %.1f ms: not concurrent", N_PARALLEL,
			 (double)el / 1000.0);
	else
		r = ok(res, "%d concurrent calls of 500 ms done in %.1f ms", N_PARALLEL,
		       (double)el / 1000.0);
out:
	if (r < -1)
		r = fail(res, "setting up: %s", strerror(-r));
	for (unsigned i = 0; i < N_PARALLEL; i++)
		slots[i].cc = grpc_client_call_cancel(slots[i].cc);
	loop_timer_free(guard);
	loop_free(a.loop);
	free(b);
	return r;
}

static void cancel_timer(struct loop_timer *t, void *userdata)
{
	struct async_ctx *a = userdata;

	loop_exit(a->loop, 0);
}

static void cancel_done(struct grpc_client_call *cc, int r, enum grpc_status status,
			const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct async_slot *slot = userdata;

	slot->cc = NULL;
	slot->done++;
}

/* Starts a slow call and cancels it after 300 ms: done must not run, the server must see it. */
static int check_cancel(const char *sock, struct result *res)
{
	Edgegpu__Interop__UnaryRequest req = EDGEGPU__INTEROP__UNARY_REQUEST__INIT;
	struct grpc_client_opts opts = { .timeout = scaled(10 * USEC_PER_SEC) };
	struct loop_timer *timer = NULL;
	struct async_ctx a = { 0 };
	struct async_slot slot = { .ctx = &a };
	uint8_t *b = NULL;
	char tag[96];
	int r, code = -1;
	size_t n;

	make_tag(tag, sizeof(tag), "cancel");
	req.sleep_ms = 5000;
	req.tag = tag;
	b = pack(&req.base, &n);
	r = b ? loop_new(&a.loop) : -ENOMEM;
	if (r < 0)
		goto out;
	r = loop_timer_new(a.loop, cancel_timer, &a, &timer);
	if (r < 0)
		goto out;
	r = grpc_client_call_start(a.loop, sock, PATH_UNARY, b, n, &opts, cancel_done, &slot,
				   &slot.cc);
	if (r < 0)
		goto out;
	loop_timer_arm(timer, scaled(300 * USEC_PER_MSEC));
	r = loop_run(a.loop);
	if (r < 0)
		goto out;
	if (slot.done) {
		r = fail(res, "the call ended before it was cancelled");
		goto out;
	}
	slot.cc = grpc_client_call_cancel(slot.cc);
	/* Give the loop a moment: a done callback must not run after the cancel. */
	loop_timer_arm(timer, 200 * USEC_PER_MSEC);
	r = loop_run(a.loop);
	if (r < 0)
		goto out;
	if (slot.done)
		r = fail(res, "done callback ran %u times for a cancelled call", slot.done);
	else if (wait_tag(sock, tag, GRPC_STATUS_CANCELLED, GRPC_STATUS_CANCELLED, &code, res) == 0)
		r = ok(res, "server closed the cancelled call with status %d", code);
	else
		r = -1;
out:
	if (r < -1)
		r = fail(res, "setting up: %s", strerror(-r));
	slot.cc = grpc_client_call_cancel(slot.cc);
	loop_timer_free(timer);
	loop_free(a.loop);
	free(b);
	return r;
}

static int run_client(const char *sock, const char *check)
{
	struct result res = { .line = "" };
	int r;

	if (streq(check, "unary"))
		r = check_unary(sock, &res);
	else if (streq(check, "error"))
		r = check_error(sock, &res);
	else if (streq(check, "big"))
		r = check_big(sock, &res);
	else if (streq(check, "deadline"))
		r = check_deadline(sock, &res);
	else if (streq(check, "parallel"))
		r = check_parallel(sock, &res);
	else if (streq(check, "cancel"))
		r = check_cancel(sock, &res);
	else if (streq(check, "missing"))
		r = check_transport(sock, -ENOENT, &res);
	else if (streq(check, "refused"))
		r = check_transport(sock, -ECONNREFUSED, &res);
	else {
		(void)printf("unknown check \"%s\"\n", check);
		return EXIT_CHECK_FAILED;
	}
	(void)printf("%s%s\n", r == 0 ? "ok: " : "", res.line);
	return r == 0 ? 0 : EXIT_CHECK_FAILED;
}

int main(int argc, char **argv)
{
	if (argc == 3 && streq(argv[1], "server"))
		return run_server(argv[2]);
	if (argc == 4 && streq(argv[1], "client"))
		return run_client(argv[2], argv[3]);
	(void)fprintf(stderr, "usage: c-peer server SOCK | c-peer client SOCK CHECK\n");
	return EXIT_CHECK_FAILED;
}
