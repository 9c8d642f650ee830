/*
 * grpc: framing, header checks, percent-coding, grpc-timeout, limits, deadlines, cancel,
 * streaming and shutdown, first at the byte level (a client nghttp2_session in this process
 * feeds a memory connection, no sockets), then over real unix sockets on the loop, with our
 * own client against our own server.
 */

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc.h"
#include "h2.h"
#include "loop.h"
#include "oom.h"
#include "unit-fs.h"
#include "unit.h"

/*
 * Every umask() call this process makes, grpc-server.c's included (it is linked in here): the
 * mask is the process's, so one changed around bind() races every other thread's mkdir() and
 * open() (the CDI writer thread's mkdir made /var/run/cdi 0700 that way).
 */
static unsigned umask_calls;

mode_t umask(mode_t mask)
{
	umask_calls++;
	return (mode_t)syscall(SYS_umask, mask);
}

/* --- server side of the tests: a method table and what the handlers saw --- */

#define MAX_HELD 256

static struct {
	struct grpc_call *held[MAX_HELD];
	size_t n_held;
	int closes[GRPC_STATUS_COUNT];
	int n_closes;
	int events[GRPC_SERVER_EVENT_COUNT];
	uint32_t event_code;
	char seen_headers[1024];
	usec_t seen_deadline;
} T;

static void on_close(struct grpc_call *call, enum grpc_status status, void *ud)
{
	assert_true(status < GRPC_STATUS_COUNT);
	T.closes[status]++;
	T.n_closes++;
	for (size_t i = 0; i < T.n_held; i++)
		if (T.held[i] == call)
			T.held[i] = NULL;
}

static void h_echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	grpc_call_set_close_cb(call, on_close, NULL);
	assert_int_equal(grpc_call_send(call, req, len), 0);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
}

static void h_empty(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	assert_int_equal(grpc_call_send(call, NULL, 0), 0);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
}

#define FAIL_TEXT "r\xc3\xa9sum\xc3\xa9 100% \n done"
#define FAIL_WIRE "r%C3%A9sum%C3%A9 100%25 %0A done"

static void h_fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_NOT_FOUND, FAIL_TEXT), 0);
}

static void h_hold(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	assert_true(T.n_held < MAX_HELD);
	T.held[T.n_held++] = call;
	T.seen_deadline = grpc_call_deadline(call);
	grpc_call_set_close_cb(call, on_close, NULL);
}

static void h_watch(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	h_hold(call, req, len, ud);
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"first", 5), 0);
}

/* Answers with a message of the size given in the request (decimal text). */
static void h_big(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	char text[32] = "";
	uint8_t *msg;
	size_t n;

	memcpy(text, req, MIN(len, sizeof(text) - 1));
	n = strtoul(text, NULL, 10);
	msg = malloc(n ? n : 1);
	assert_non_null(msg);
	memset(msg, 'b', n);
	assert_int_equal(grpc_call_send(call, msg, n), 0);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
	free(msg);
}

/* Records the request headers our client sends. */
static void h_meta(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	static const char *const names[] = {
		":method", ":scheme",	   ":path",	 ":authority",
		"te",	   "content-type", "user-agent", "grpc-timeout"
	};
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		const char *v = grpc_call_header(call, names[i]);

		n += (size_t)snprintf(T.seen_headers + n, sizeof(T.seen_headers) - n, "%s=%s\n",
				      names[i], v ? v : "(none)");
	}
	T.seen_deadline = grpc_call_deadline(call);
	h_echo(call, req, len, ud);
}

static const struct grpc_method methods[] = {
	{ "/test.Svc/Echo", false, h_echo },  { "/test.Svc/Empty", false, h_empty },
	{ "/test.Svc/Fail", false, h_fail },  { "/test.Svc/Hold", false, h_hold },
	{ "/test.Svc/Watch", true, h_watch }, { "/test.Svc/Big", false, h_big },
	{ "/test.Svc/Meta", false, h_meta },
};

static void on_event(struct grpc_server *s, enum grpc_server_event ev, uint64_t conn_id,
		     uint32_t code, void *ud)
{
	T.events[ev]++;
	T.event_code = code;
}

static struct grpc_server *server_new(struct loop *l, const struct grpc_limits *lim)
{
	struct grpc_server *s;

	memset(&T, 0, sizeof(T));
	assert_int_equal(grpc_server_new(l, methods, ELEMENTSOF(methods), lim, NULL, &s), 0);
	grpc_server_set_event_cb(s, on_event, NULL);
	return s;
}

/* --- the test client: a raw nghttp2 client session --- */

struct tstream {
	int32_t id;
	const uint8_t *body;
	size_t body_len, body_off, chunk;
	bool end;
	int http_status;
	char content_type[64];
	int grpc_status; /* -1: none */
	char grpc_message[256];
	int header_blocks;
	bool trailers_only;
	struct buf data;
	bool ended;
	bool closed;
	uint32_t close_code;
	bool rst;
	uint32_t rst_code;
};

struct tc {
	nghttp2_session *s;
	struct grpc_server_conn *conn; /* memory mode */
	struct buf srv_out;
	size_t srv_off;
	int fd; /* socket mode */
	struct loop *loop;
	struct tstream st[300];
	size_t n;
	bool got_settings;
	uint32_t max_streams, window;
	bool goaway;
	uint32_t goaway_code;
	int feed_r;
	bool eof;
};

static int num(const char *v)
{
	return (int)strtol(v, NULL, 10);
}

static struct tstream *tc_stream(struct tc *tc, int32_t id)
{
	for (size_t i = 0; i < tc->n; i++)
		if (tc->st[i].id == id)
			return &tc->st[i];
	return NULL;
}

static int tc_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
			const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct tstream *st = tc_stream(ud, f->hd.stream_id);
	const char *n = (const char *)name, *v = (const char *)value;

	if (!st)
		return 0;
	if (streq(n, ":status"))
		st->http_status = num(v);
	else if (streq(n, "content-type"))
		(void)snprintf(st->content_type, sizeof(st->content_type), "%s", v);
	else if (streq(n, "grpc-status"))
		st->grpc_status = num(v);
	else if (streq(n, "grpc-message"))
		(void)snprintf(st->grpc_message, sizeof(st->grpc_message), "%s", v);
	return 0;
}

static int tc_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct tc *tc = ud;
	struct tstream *st = tc_stream(tc, f->hd.stream_id);

	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (!st)
			break;
		st->header_blocks++;
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
			st->ended = true;
			st->trailers_only = st->header_blocks == 1;
		}
		break;
	case NGHTTP2_DATA:
		if (st && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
			st->ended = true;
		break;
	case NGHTTP2_RST_STREAM:
		if (st) {
			st->rst = true;
			st->rst_code = f->rst_stream.error_code;
		}
		break;
	case NGHTTP2_GOAWAY:
		tc->goaway = true;
		tc->goaway_code = f->goaway.error_code;
		break;
	case NGHTTP2_SETTINGS:
		if (f->hd.flags & NGHTTP2_FLAG_ACK)
			break;
		tc->got_settings = true;
		for (size_t i = 0; i < f->settings.niv; i++) {
			if (f->settings.iv[i].settings_id ==
			    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
				tc->max_streams = f->settings.iv[i].value;
			if (f->settings.iv[i].settings_id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
				tc->window = f->settings.iv[i].value;
		}
		break;
	default:
		break;
	}
	return 0;
}

static int tc_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
		      size_t len, void *ud)
{
	struct tstream *st = tc_stream(ud, id);

	if (st)
		assert_int_equal(buf_append(&st->data, data, len), 0);
	return 0;
}

static int tc_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct tstream *st = tc_stream(ud, id);

	if (st) {
		st->closed = true;
		st->close_code = code;
	}
	return 0;
}

static ssize_t tc_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct tstream *st = src->ptr;
	size_t n = MIN(length, st->body_len - st->body_off);

	if (st->chunk)
		n = MIN(n, st->chunk);
	if (n)
		memcpy(buf, st->body + st->body_off, n);
	st->body_off += n;
	if (st->body_off == st->body_len) {
		if (!st->end)
			return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

static void tc_init_session(struct tc *tc)
{
	nghttp2_session_callbacks *cbs;

	assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
	nghttp2_session_callbacks_set_on_header_callback(cbs, tc_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, tc_on_frame);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, tc_on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, tc_on_close);
	assert_int_equal(nghttp2_session_client_new(&tc->s, cbs, tc), 0);
	nghttp2_session_callbacks_del(cbs);
	assert_int_equal(nghttp2_submit_settings(tc->s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

/* A client session that is fed to nothing (its output is captured). */
static void tc_offline(struct tc *tc)
{
	memset(tc, 0, sizeof(*tc));
	tc->fd = -1;
	tc_init_session(tc);
}

static void tc_mem(struct tc *tc, struct grpc_server *s)
{
	tc_offline(tc);
	assert_int_equal(grpc_server_conn_new_mem(s, &tc->srv_out, &tc->conn), 0);
}

static void tc_release(struct tc *tc)
{
	for (size_t i = 0; i < tc->n; i++)
		buf_release(&tc->st[i].data);
	nghttp2_session_del(tc->s);
	buf_release(&tc->srv_out);
	if (tc->fd >= 0)
		close(tc->fd);
}

/* Memory mode: move bytes both ways until neither side has anything to say. */
static void tc_pump(struct tc *tc)
{
	for (int i = 0; i < 100000; i++) {
		bool moved = false;
		const uint8_t *p;
		ssize_t n;

		while ((n = nghttp2_session_mem_send(tc->s, &p)) > 0) {
			moved = true;
			if (tc->feed_r == 0)
				tc->feed_r = grpc_server_conn_feed(tc->conn, p, (size_t)n);
		}
		assert_true(n >= 0);
		if (tc->feed_r == 0)
			tc->feed_r = grpc_server_conn_flush(tc->conn);
		if (tc->srv_out.len > tc->srv_off) {
			moved = true;
			n = nghttp2_session_mem_recv(tc->s, tc->srv_out.data + tc->srv_off,
						     tc->srv_out.len - tc->srv_off);
			assert_true(n >= 0);
			tc->srv_off = tc->srv_out.len;
		}
		if (!moved)
			return;
	}
	fail_msg("pump did not settle");
}

static struct tstream *tc_request_nv(struct tc *tc, const nghttp2_nv *nva, size_t n,
				     const void *body, size_t len, bool end, size_t chunk)
{
	struct tstream *st;
	nghttp2_data_provider prd = { .read_callback = tc_read_body };

	assert_true(tc->n < ELEMENTSOF(tc->st));
	st = &tc->st[tc->n++];
	memset(st, 0, sizeof(*st));
	st->grpc_status = -1;
	st->body = body;
	st->body_len = len;
	st->end = end;
	st->chunk = chunk;
	prd.source.ptr = st;
	st->id = nghttp2_submit_request(tc->s, NULL, nva, n, &prd, NULL);
	assert_true(st->id > 0);
	return st;
}

#define NV(n, v)                                                                               \
	{                                                                                      \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE \
	}

static struct tstream *tc_request(struct tc *tc, const char *path, const char *timeout,
				  const void *body, size_t len)
{
	nghttp2_nv nva[] = {
		NV(":method", "POST"),
		NV(":scheme", "http"),
		NV(":path", path),
		NV(":authority", "localhost"),
		NV("content-type", "application/grpc"),
		NV("te", "trailers"),
		NV("grpc-timeout", timeout ? timeout : ""),
	};

	return tc_request_nv(tc, nva, ELEMENTSOF(nva) - (timeout ? 0 : 1), body, len, true, 0);
}

/* A request whose body is sent but not ended. */
static struct tstream *tc_request_open(struct tc *tc, const char *path, const void *body,
				       size_t len)
{
	nghttp2_nv nva[] = {
		NV(":method", "POST"),
		NV(":scheme", "http"),
		NV(":path", path),
		NV(":authority", "localhost"),
		NV("content-type", "application/grpc"),
	};

	return tc_request_nv(tc, nva, ELEMENTSOF(nva), body, len, false, 0);
}

/* A prefixed message in a static buffer (one per call site is enough for these tests). */
static size_t frame(uint8_t *out, uint8_t flag, const void *msg, size_t len)
{
	out[0] = flag;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
	if (len)
		memcpy(out + 5, msg, len);
	return len + 5;
}

static void assert_status(const struct tstream *st, int http, int grpc, const char *msg)
{
	assert_true(st->ended);
	assert_int_equal(st->http_status, http);
	assert_string_equal(st->content_type, "application/grpc");
	assert_int_equal(st->grpc_status, grpc);
	if (msg)
		assert_string_equal(st->grpc_message, msg);
}

/* --- pure functions --- */

static void test_status_from_errno(void **state)
{
	assert_int_equal(grpc_status_from_errno(0), GRPC_STATUS_OK);
	assert_int_equal(grpc_status_from_errno(-EINVAL), GRPC_STATUS_INVALID_ARGUMENT);
	assert_int_equal(grpc_status_from_errno(-ENODEV), GRPC_STATUS_INVALID_ARGUMENT);
	assert_int_equal(grpc_status_from_errno(-EXDEV), GRPC_STATUS_FAILED_PRECONDITION);
	assert_int_equal(grpc_status_from_errno(-EMSGSIZE), GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_int_equal(grpc_status_from_errno(-ETIMEDOUT), GRPC_STATUS_DEADLINE_EXCEEDED);
	assert_int_equal(grpc_status_from_errno(-EOPNOTSUPP), GRPC_STATUS_UNIMPLEMENTED);
	assert_int_equal(grpc_status_from_errno(-ENOMEM), GRPC_STATUS_INTERNAL);
	assert_int_equal(grpc_status_from_errno(-EIO), GRPC_STATUS_INTERNAL);
	assert_int_equal(grpc_status_from_errno(-ENOENT), GRPC_STATUS_INTERNAL);
	assert_string_equal(grpc_status_name(GRPC_STATUS_OK), "OK");
	assert_string_equal(grpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
	assert_string_equal(grpc_status_name(GRPC_STATUS_UNAUTHENTICATED), "UNAUTHENTICATED");
	assert_string_equal(grpc_status_name(17), "UNKNOWN_STATUS");
	assert_string_equal(grpc_status_name(-1), "UNKNOWN_STATUS");
}

static void check_encode(const char *in, const char *want)
{
	char *e = grpc_percent_encode(in);

	assert_non_null(e);
	assert_string_equal(e, want);
	free(e);
}

static void check_decode(const char *in, const char *want)
{
	char *d = grpc_percent_decode(in, strlen(in));

	assert_non_null(d);
	assert_string_equal(d, want);
	free(d);
}

static void test_percent_coding(void **state)
{
	check_encode("r\xc3\xa9sum\xc3\xa9", "r%C3%A9sum%C3%A9");
	check_encode("plain text ~!", "plain text ~!");
	check_encode("100%", "100%25");
	check_encode("tab\tnl\n\x7f", "tab%09nl%0A%7F");
	check_encode("", "");
	/* A space at either end is encoded: HTTP/2 peers drop a value that starts or ends so. */
	check_encode("  refused: id  ", "%20 refused: id %20");
	check_encode(" ", "%20");
	check_decode("r%C3%A9sum%C3%A9", "r\xc3\xa9sum\xc3\xa9");
	check_decode("resource%20name%20rejected", "resource name rejected");
	check_decode("lower %c3%a9", "lower \xc3\xa9");
	/* Invalid escapes are left as they are. */
	check_decode("100%", "100%");
	check_decode("%", "%");
	check_decode("%4", "%4");
	check_decode("%zz%4g%%41", "%zz%4g%A");
	check_decode("end%2", "end%2");
	/* Only @len bytes are read. */
	char *d = grpc_percent_decode("ab%41cd", 5);
	assert_string_equal(d, "abA");
	free(d);
	/* Round trip. */
	char *e = grpc_percent_encode(FAIL_TEXT);
	assert_string_equal(e, FAIL_WIRE);
	d = grpc_percent_decode(e, strlen(e));
	assert_string_equal(d, FAIL_TEXT);
	free(e);
	free(d);
}

static void check_parse(const char *s, int want_r, usec_t want)
{
	usec_t v = 12345;

	assert_int_equal(grpc_timeout_parse(s, strlen(s), &v), want_r);
	if (want_r == 0)
		assert_int_equal(v, want);
	else
		assert_int_equal(v, 12345);
}

static void check_format(usec_t usec, const char *want)
{
	char buf[16];

	grpc_timeout_format(usec, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_timeout(void **state)
{
	check_parse("1H", 0, 3600 * USEC_PER_SEC);
	check_parse("2M", 0, 120 * USEC_PER_SEC);
	check_parse("10S", 0, 10 * USEC_PER_SEC);
	check_parse("250m", 0, 250 * USEC_PER_MSEC);
	check_parse("29999987u", 0, 29999987);
	check_parse("1500n", 0, 2); /* rounded up */
	check_parse("1000n", 0, 1);
	check_parse("0S", 0, 0);
	check_parse("99999999H", 0, 99999999ULL * 3600 * USEC_PER_SEC);
	check_parse("123456789S", -EINVAL, 0); /* more than 8 digits */
	check_parse("S", -EINVAL, 0);
	check_parse("10", -EINVAL, 0);
	check_parse("10s", -EINVAL, 0);
	check_parse("1x", -EINVAL, 0);
	check_parse("-1S", -EINVAL, 0);
	check_parse(" 1S", -EINVAL, 0);
	check_parse("", -EINVAL, 0);

	check_format(0, "0n");
	check_format(1, "1000n");
	check_format(99999, "99999000n");
	check_format(100000, "100000u");
	check_format(10 * USEC_PER_SEC, "10000000u");
	check_format(30 * USEC_PER_SEC, "30000000u");
	check_format(29999987, "29999987u");
	check_format(200 * USEC_PER_SEC, "200000m");
	check_format(100000001, "100001m"); /* rounded up */
	check_format(100000 * USEC_PER_SEC, "100000S");
	check_format(200000000 * USEC_PER_SEC, "3333334M");
	check_format(USEC_INFINITY, "99999999H");

	/* What we format, we parse, never shorter than asked. */
	for (usec_t u = 1; u < (usec_t)400 * 3600 * USEC_PER_SEC; u = u * 3 + 7) {
		char buf[16];
		usec_t back;

		grpc_timeout_format(u, buf, sizeof(buf));
		assert_int_equal(grpc_timeout_parse(buf, strlen(buf), &back), 0);
		assert_true(back >= u);
	}
}

static void test_deframer(void **state)
{
	struct grpc_deframer d;
	uint8_t in[64];
	const uint8_t *msg;
	size_t len, n;
	uint8_t flag;

	/* Two messages in one push, then one split byte by byte. */
	grpc_deframer_init(&d, 16);
	n = frame(in, 0, "abc", 3);
	n += frame(in + n, 0, "", 0);
	assert_int_equal(grpc_deframer_push(&d, in, n), 0);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 1);
	assert_int_equal(len, 3);
	assert_memory_equal(msg, "abc", 3);
	assert_int_equal(flag, 0);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 1);
	assert_int_equal(len, 0);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 0);
	assert_int_equal(grpc_deframer_pending(&d), 0);
	n = frame(in, 1, "hello", 5);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 0);
		assert_int_equal(grpc_deframer_push(&d, in + i, 1), 0);
	}
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 1);
	assert_int_equal(flag, 1);
	assert_memory_equal(msg, "hello", 5);

	/* Too large: known from the prefix alone, before the payload arrives. */
	assert_int_equal(grpc_deframer_push(&d, (const uint8_t *)"\0\0\0\0\x11", 5), 0);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), -EMSGSIZE);
	assert_int_equal(len, 17);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), -EMSGSIZE);
	grpc_deframer_release(&d);

	/* Exactly at the limit is fine; a flag of 2 is not. */
	grpc_deframer_init(&d, 3);
	n = frame(in, 0, "xyz", 3);
	n += frame(in + n, 2, "", 0);
	assert_int_equal(grpc_deframer_push(&d, in, n), 0);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), 1);
	assert_int_equal(grpc_deframer_next(&d, &msg, &len, &flag), -EBADMSG);
	assert_int_equal(flag, 2);
	grpc_deframer_release(&d);
}

/* --- byte level: a client nghttp2 session against a memory connection --- */

static void test_settings_at_accept(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	struct tc tc;

	tc_mem(&tc, s);
	/* SETTINGS are out before the client said anything. */
	assert_true(tc.srv_out.len >= 9);
	assert_int_equal(tc.srv_out.data[3], NGHTTP2_SETTINGS);
	tc_pump(&tc);
	assert_true(tc.got_settings);
	assert_true(tc.max_streams >= 100);
	assert_int_equal(tc.max_streams, 128);
	assert_int_equal(tc.window, 1024 * 1024);
	assert_int_equal(tc.feed_r, 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_unary_framing(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	struct tstream *a, *b, *c, *d;
	uint8_t req[64], two[64], empty[8];
	struct tc tc;
	size_t n, n2;

	tc_mem(&tc, s);
	n = frame(req, 0, "ping-pong", 9);
	/* The request arrives one byte per DATA frame. */
	a = tc_request(&tc, "/test.Svc/Echo", NULL, req, n);
	a->chunk = 1;
	b = tc_request(&tc, "/test.Svc/Empty", NULL, empty, frame(empty, 0, "", 0));
	tc_pump(&tc);
	assert_status(a, 200, 0, NULL);
	assert_false(a->trailers_only);
	assert_int_equal(a->header_blocks, 2);
	/* Exactly one message in the response: prefix + payload. */
	assert_int_equal(a->data.len, n);
	assert_memory_equal(a->data.data, req, n);
	/* Empty is the 5-byte frame 00 00 00 00 00. */
	assert_status(b, 200, 0, NULL);
	assert_int_equal(b->data.len, 5);
	assert_memory_equal(b->data.data, "\0\0\0\0\0", 5);

	/* Two messages in one DATA frame for a unary method: refused, the connection lives. */
	n2 = frame(two, 0, "x", 1);
	n2 += frame(two + n2, 0, "y", 1);
	c = tc_request(&tc, "/test.Svc/Echo", NULL, two, n2);
	/* No message at all. */
	d = tc_request(&tc, "/test.Svc/Echo", NULL, NULL, 0);
	tc_pump(&tc);
	assert_status(c, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "received a second request message for unary method /test.Svc/Echo");
	assert_true(c->trailers_only);
	assert_status(d, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "received no request message for unary method /test.Svc/Echo");
	assert_int_equal(tc.feed_r, 0);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_header_checks(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	uint8_t req[16];
	size_t n = frame(req, 0, "hi", 2);
	struct tc tc;
	struct tstream *get, *plain, *none, *proto, *semi, *svc, *meth, *bad_path, *tmo, *tmo9,
		*early, *sockauth, *ok;
	nghttp2_nv get_nv[] = { NV(":method", "GET"), NV(":scheme", "http"),
				NV(":path", "/test.Svc/Echo"),
				NV("content-type", "application/grpc") };
	nghttp2_nv plain_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				  NV(":path", "/test.Svc/Echo"), NV("content-type", "text/plain") };
	nghttp2_nv none_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				 NV(":path", "/test.Svc/Echo") };
	nghttp2_nv proto_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				  NV(":path", "/test.Svc/Echo"),
				  NV("content-type", "application/grpc+proto") };
	nghttp2_nv semi_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				 NV(":path", "/test.Svc/Echo"),
				 NV("content-type", "application/grpc;charset=utf-8") };
	nghttp2_nv sock_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				 NV(":path", "/test.Svc/Echo"),
				 NV(":authority", "/var/lib/kubelet/device-plugins/kubelet.sock"),
				 NV("content-type", "application/grpc") };
	nghttp2_nv grpcx_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				  NV(":path", "/test.Svc/Echo"),
				  NV("content-type", "application/grpcx") };

	tc_mem(&tc, s);
	get = tc_request_nv(&tc, get_nv, ELEMENTSOF(get_nv), req, n, true, 0);
	plain = tc_request_nv(&tc, plain_nv, ELEMENTSOF(plain_nv), req, n, true, 0);
	none = tc_request_nv(&tc, none_nv, ELEMENTSOF(none_nv), req, n, true, 0);
	proto = tc_request_nv(&tc, proto_nv, ELEMENTSOF(proto_nv), req, n, true, 0);
	semi = tc_request_nv(&tc, semi_nv, ELEMENTSOF(semi_nv), req, n, true, 0);
	svc = tc_request(&tc, "/foo.Bar/Baz", NULL, req, n);
	meth = tc_request(&tc, "/test.Svc/Nope", NULL, req, n);
	bad_path = tc_request(&tc, "nope", NULL, req, n);
	tmo = tc_request(&tc, "/test.Svc/Echo", "1x", req, n);
	tmo9 = tc_request(&tc, "/test.Svc/Echo", "123456789S", req, n);
	/* Answered at the headers, before the request ended: RST_STREAM(NO_ERROR) follows. */
	early = tc_request_nv(&tc, grpcx_nv, ELEMENTSOF(grpcx_nv), req, 0, false, 0);
	sockauth = tc_request_nv(&tc, sock_nv, ELEMENTSOF(sock_nv), req, n, true, 0);
	tc_pump(&tc);
	assert_status(
		get, 405, GRPC_STATUS_INTERNAL,
		"http2Server.operateHeaders parsed a :method field: GET which should be POST");
	assert_true(get->trailers_only);
	assert_status(plain, 415, GRPC_STATUS_INVALID_ARGUMENT,
		      "invalid gRPC request content-type \"text/plain\"");
	assert_true(plain->trailers_only);
	assert_status(none, 415, GRPC_STATUS_INVALID_ARGUMENT,
		      "invalid gRPC request content-type \"\"");
	assert_status(proto, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(proto->data.len, n);
	assert_status(semi, 200, GRPC_STATUS_OK, NULL);
	assert_status(svc, 200, GRPC_STATUS_UNIMPLEMENTED, "unknown service foo.Bar");
	assert_true(svc->trailers_only);
	assert_status(meth, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "unknown method Nope for service test.Svc");
	assert_status(bad_path, 200, GRPC_STATUS_UNIMPLEMENTED, "malformed method name: \"nope\"");
	assert_status(tmo, 400, GRPC_STATUS_INTERNAL, "malformed grpc-timeout: \"1x\"");
	assert_status(tmo9, 400, GRPC_STATUS_INTERNAL, NULL);
	assert_status(early, 415, GRPC_STATUS_INVALID_ARGUMENT, NULL);
	assert_true(early->rst);
	assert_int_equal(early->rst_code, NGHTTP2_NO_ERROR);
	assert_true(early->closed);
	/* A socket path as :authority (kubelets before 1.26) is accepted. */
	assert_status(sockauth, 200, GRPC_STATUS_OK, NULL);

	/* Sibling streams after all that, on the same connection. */
	ok = tc_request(&tc, "/test.Svc/Echo", NULL, req, n);
	tc_pump(&tc);
	assert_status(ok, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(tc.feed_r, 0);
	assert_false(tc.goaway);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_trailers_only_encoded_message(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	uint8_t req[8];
	struct tstream *st;
	struct tc tc;

	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Fail", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	/* One HEADERS frame with END_STREAM carries everything; no DATA. */
	assert_true(st->trailers_only);
	assert_int_equal(st->header_blocks, 1);
	assert_int_equal(st->data.len, 0);
	assert_status(st, 200, GRPC_STATUS_NOT_FOUND, FAIL_WIRE);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_message_limits(void **state)
{
	const struct grpc_limits lim = { .max_recv_msg = 1024 };
	struct grpc_server *s = server_new(NULL, &lim);
	static uint8_t big[2000 + 5], comp[16], comp2[16], flag2[16], req[16];
	nghttp2_nv gzip_nv[] = { NV(":method", "POST"), NV(":scheme", "http"),
				 NV(":path", "/test.Svc/Echo"),
				 NV("content-type", "application/grpc"),
				 NV("grpc-encoding", "gzip") };
	struct tstream *over, *at, *c1, *c2, *f2, *ok;
	struct tc tc;
	static uint8_t exact[1024 + 5];

	tc_mem(&tc, s);
	/* Only the prefix and a little of the 2000-byte message: refused at once. */
	frame(big, 0, NULL, 0);
	big[3] = 2000 >> 8;
	big[4] = 2000 & 0xff;
	over = tc_request_nv(&tc, gzip_nv, 4, big, 100, false, 0);
	memset(exact + 5, 'e', 1024);
	at = tc_request(&tc, "/test.Svc/Echo", NULL, exact, frame(exact, 0, exact + 5, 1024));
	c1 = tc_request(&tc, "/test.Svc/Echo", NULL, comp, frame(comp, 1, "zz", 2));
	c2 = tc_request_nv(&tc, gzip_nv, ELEMENTSOF(gzip_nv), comp2, frame(comp2, 1, "zz", 2), true,
			   0);
	f2 = tc_request(&tc, "/test.Svc/Echo", NULL, flag2, frame(flag2, 2, "zz", 2));
	tc_pump(&tc);
	assert_status(over, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
		      "grpc: received message larger than max (2000 vs. 1024)");
	assert_true(over->rst);
	assert_status(at, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(at->data.len, 1029);
	assert_status(c1, 200, GRPC_STATUS_INTERNAL,
		      "grpc: compressed flag set with identity or empty encoding");
	assert_status(c2, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "grpc: Decompressor is not installed for grpc-encoding \"gzip\"");
	assert_status(f2, 200, GRPC_STATUS_INTERNAL, "grpc: received unexpected payload format 2");
	ok = tc_request(&tc, "/test.Svc/Echo", NULL, req, frame(req, 0, "ok", 2));
	tc_pump(&tc);
	assert_status(ok, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(tc.feed_r, 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_send_rules(void **state)
{
	const struct grpc_limits lim = { .max_send_msg = 100 };
	struct grpc_server *s = server_new(NULL, &lim);
	static uint8_t big[101];
	uint8_t req[8];
	struct tstream *st;
	struct grpc_call *call;
	struct tc tc;

	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(T.n_held, 1);
	call = T.held[0];
	assert_string_equal(grpc_call_path(call), "/test.Svc/Hold");
	assert_string_equal(grpc_call_header(call, "te"), "trailers");
	assert_null(grpc_call_header(call, "x-missing"));
	assert_int_equal(grpc_call_deadline(call), USEC_INFINITY);
	assert_int_equal(grpc_call_conn_id(call), grpc_server_conn_id(tc.conn));
	assert_int_equal(grpc_call_send(call, big, sizeof(big)), -EMSGSIZE);
	assert_int_equal(grpc_call_send(call, big, 100), 0);
	assert_int_equal(grpc_call_send(call, big, 1), -EALREADY);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, ""), 0);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), -EPIPE);
	assert_int_equal(grpc_call_send(call, big, 1), -EPIPE);
	/* Answered after the feed: the output waits for a flush (or the loop). */
	assert_false(st->ended);
	assert_int_equal(T.n_closes, 0);
	tc_pump(&tc);
	assert_status(st, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(st->data.len, 105);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	assert_null(T.held[0]);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void deframe_all(const struct buf *b, size_t *ret_n, char *joined, size_t size)
{
	struct grpc_deframer d;
	const uint8_t *msg;
	size_t len, o = 0;
	uint8_t flag;

	*ret_n = 0;
	grpc_deframer_init(&d, 1 << 20);
	assert_int_equal(grpc_deframer_push(&d, b->data, b->len), 0);
	while (grpc_deframer_next(&d, &msg, &len, &flag) == 1) {
		assert_int_equal(flag, 0);
		o += (size_t)snprintf(joined + o, size - o, "%.*s|", (int)len, msg);
		(*ret_n)++;
	}
	assert_int_equal(grpc_deframer_pending(&d), 0);
	grpc_deframer_release(&d);
}

static void test_streaming_pushed_later(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	struct grpc_server_stats stats;
	char joined[128];
	uint8_t req[8];
	struct tstream *st;
	struct grpc_call *call;
	struct tc tc;
	size_t n;

	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(st->http_status, 200);
	assert_int_equal(st->data.len, 10);
	assert_false(st->ended);
	call = T.held[0];
	/* The stream stays open with nothing to send (the data provider is deferred). */
	tc_pump(&tc);
	assert_false(st->ended);
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"second", 6), 0);
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"third", 5), 0);
	tc_pump(&tc);
	/* Several messages in one DATA frame are fine for the peer's deframer. */
	deframe_all(&st->data, &n, joined, sizeof(joined));
	assert_int_equal(n, 3);
	assert_string_equal(joined, "first|second|third|");
	assert_false(st->ended);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.streams, 1);
	assert_int_equal(stats.calls, 1);
	assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
	tc_pump(&tc);
	assert_status(st, 200, 0, NULL);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.streams, 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_cancel_runs_close_cb(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	struct grpc_server_stats stats;
	uint8_t req[8], req2[8];
	struct tstream *st, *other;
	struct tc tc;

	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	other = tc_request(&tc, "/test.Svc/Hold", NULL, req2, frame(req2, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(T.n_held, 2);
	assert_int_equal(nghttp2_submit_rst_stream(tc.s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL),
			 0);
	tc_pump(&tc);
	assert_int_equal(T.closes[GRPC_STATUS_CANCELLED], 1);
	assert_null(T.held[0]);
	assert_non_null(T.held[1]);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.streams, 1);
	/* The sibling goes on. */
	assert_int_equal(grpc_call_send(T.held[1], (const uint8_t *)"x", 1), 0);
	assert_int_equal(grpc_call_finish(T.held[1], GRPC_STATUS_OK, NULL), 0);
	tc_pump(&tc);
	assert_status(other, 200, 0, NULL);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void run_loop_until(struct loop *l, const int *counter, int want)
{
	usec_t end = now_usec() + 5 * USEC_PER_SEC;

	while (*counter < want) {
		assert_true(now_usec() < end);
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	}
}

static void test_deadline_exceeded(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	uint8_t req[8];
	struct tstream *st, *unfinished;
	struct tc tc;
	usec_t before = now_usec();

	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Hold", "20m", req, frame(req, 0, "", 0));
	/* A request that never ends: expires before dispatch. */
	{
		nghttp2_nv nva[] = { NV(":method", "POST"), NV(":scheme", "http"),
				     NV(":path", "/test.Svc/Hold"), NV("grpc-timeout", "30000u"),
				     NV("content-type", "application/grpc") };

		unfinished = tc_request_nv(&tc, nva, ELEMENTSOF(nva), req, 0, false, 0);
	}
	tc_pump(&tc);
	assert_int_equal(T.n_held, 1);
	assert_true(T.seen_deadline >= before + 20 * USEC_PER_MSEC);
	assert_true(T.seen_deadline <= now_usec() + 20 * USEC_PER_MSEC);
	run_loop_until(l, &T.n_closes, 1);
	assert_int_equal(T.closes[GRPC_STATUS_DEADLINE_EXCEEDED], 1);
	tc_pump(&tc);
	assert_status(st, 200, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
	assert_true(st->trailers_only);
	/* The client had half-closed: the stream is closed, no RST needed. */
	assert_false(st->rst);
	for (int i = 0; i < 100 && !unfinished->ended; i++) {
		assert_int_equal(loop_run_once(l, 2 * USEC_PER_MSEC), 0);
		tc_pump(&tc);
	}
	assert_status(unfinished, 200, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
	/* The client had not half-closed: the status is followed by RST_STREAM(CANCEL). */
	assert_true(unfinished->rst);
	assert_int_equal(unfinished->rst_code, NGHTTP2_CANCEL);
	/* The handler never saw the second one, so no close callback ran for it. */
	assert_int_equal(T.n_closes, 1);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
	loop_free(l);
}

static void test_concurrent_streams(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	struct grpc_server_stats stats;
	struct tstream *st[150];
	uint8_t req[8];
	struct tc tc;
	size_t n = frame(req, 0, "", 0);

	tc_mem(&tc, s);
	tc_pump(&tc);
	for (int i = 0; i < 120; i++)
		st[i] = tc_request(&tc, "/test.Svc/Hold", NULL, req, n);
	tc_pump(&tc);
	assert_int_equal(T.n_held, 120);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.streams, 120);
	assert_true(stats.streams_peak >= 120);
	for (int i = 119; i >= 0; i--) {
		assert_int_equal(grpc_call_send(T.held[i], req, 1), 0);
		assert_int_equal(grpc_call_finish(T.held[i], GRPC_STATUS_OK, NULL), 0);
	}
	tc_pump(&tc);
	for (int i = 0; i < 120; i++)
		assert_status(st[i], 200, 0, NULL);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 120);
	/* Past MAX_CONCURRENT_STREAMS (128) the stream is refused, not the connection. */
	for (int i = 0; i < 130; i++)
		st[i] = tc_request(&tc, "/test.Svc/Hold", NULL, req, n);
	tc_pump(&tc);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.streams, 128);
	assert_int_equal(tc.feed_r, 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	/* Freeing the connection closed the held calls. */
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 128);
	grpc_server_free(s);
}

static void test_buffer_cap_input(void **state)
{
	const struct grpc_limits lim = { .max_recv_msg = (size_t)64 * 1024,
					 .max_conn_buffered = (size_t)100 * 1024 };
	struct grpc_server *s = server_new(NULL, &lim);
	static uint8_t part[60 * 1024 + 5];
	struct tc tc;

	tc_mem(&tc, s);
	frame(part, 0, NULL, 0);
	part[2] = 0x00;
	part[3] = 0xf0; /* 61440 bytes announced, within max_recv_msg */
	for (int i = 0; i < 3; i++)
		(void)tc_request_open(&tc, "/test.Svc/Echo", part, (size_t)50 * 1024);
	tc_pump(&tc);
	/* 150 KiB held for unfinished messages: GOAWAY(ENHANCE_YOUR_CALM), connection dead. */
	assert_int_equal(tc.feed_r, -ENOBUFS);
	assert_true(tc.goaway);
	assert_int_equal(tc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_OVERFLOW], 1);
	assert_int_equal(grpc_server_conn_feed(tc.conn, (const uint8_t *)"x", 1), -ENOBUFS);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void test_buffer_cap_output(void **state)
{
	const struct grpc_limits lim = { .max_recv_msg = (size_t)64 * 1024,
					 .max_conn_buffered = (size_t)200 * 1024 };
	struct grpc_server *s = server_new(NULL, &lim);
	static uint8_t chunk[32 * 1024];
	struct grpc_server_stats stats;
	uint8_t req[8];
	struct tc tc;
	int r = 0, sent = 0;

	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(T.n_held, 1);
	/* The peer stops reading (no pump): its 64 KiB window fills, then our queue grows. */
	while (sent < 100 && (r = grpc_call_send(T.held[0], chunk, sizeof(chunk))) == 0) {
		sent++;
		assert_int_equal(grpc_server_conn_flush(tc.conn), 0);
	}
	assert_int_equal(r, -ENOBUFS);
	assert_true(sent >= 7 && sent <= 9);
	assert_int_equal(grpc_server_conn_flush(tc.conn), -ENOBUFS);
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 1);
	tc_pump(&tc);
	assert_true(tc.goaway);
	assert_int_equal(tc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.goaways, 1);
	assert_int_equal(stats.conns, 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

/* The same peer, sent states with grpc_call_send_latest(): never over the cap. */
static void test_send_latest_peer_not_reading(void **state)
{
	const struct grpc_limits lim = { .max_recv_msg = (size_t)64 * 1024,
					 .max_conn_buffered = (size_t)200 * 1024 };
	struct grpc_server *s = server_new(NULL, &lim);
	static uint8_t chunk[32 * 1024];
	struct grpc_server_stats stats;
	struct grpc_deframer d;
	const uint8_t *msg;
	uint8_t req[8], flag;
	size_t len, n = 0;
	struct tc tc;
	int r;

	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(T.n_held, 1);
	for (int i = 0; i < 100; i++) {
		struct grpc_shared_msg *m;
		const uint8_t *pl;
		size_t pl_len;

		memset(chunk, 'a' + i % 26, sizeof(chunk));
		assert_int_equal(grpc_shared_msg_new(chunk, sizeof(chunk), &m), 0);
		pl = grpc_shared_msg_payload(m, &pl_len);
		assert_int_equal(pl_len, sizeof(chunk));
		assert_memory_equal(pl, chunk, pl_len);
		r = grpc_call_send_latest(T.held[0], m);
		grpc_shared_msg_unref(m);
		assert_true(r == 0 || r == 1);
		assert_int_equal(grpc_server_conn_flush(tc.conn), 0);
	}
	grpc_server_get_stats(s, &stats);
	assert_true(stats.msgs_replaced >= 90);
	assert_int_equal(stats.goaways, 0);
	assert_int_equal(T.n_closes, 0);
	/* The peer reads again: "first", the states under way when it stopped, the last one. */
	tc_pump(&tc);
	assert_false(tc.goaway);
	grpc_deframer_init(&d, 1 << 20);
	assert_int_equal(grpc_deframer_push(&d, tc.st[0].data.data, tc.st[0].data.len), 0);
	while (grpc_deframer_next(&d, &msg, &len, &flag) == 1) {
		n++;
		if (n > 1)
			assert_int_equal(len, sizeof(chunk));
	}
	assert_true(n >= 3 && n <= 5);
	assert_int_equal(msg[0], 'a' + 99 % 26);
	grpc_deframer_release(&d);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

/* Returns the error code of the first GOAWAY in @b after @skip bytes, or -1. */
static int64_t find_goaway(const struct buf *b, size_t skip)
{
	size_t off = skip;

	while (off + 9 <= b->len) {
		const uint8_t *f = b->data + off;
		size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];

		if (off + 9 + len > b->len)
			break;
		if (f[3] == NGHTTP2_GOAWAY && len >= 8)
			return (int64_t)((uint32_t)f[13] << 24 | (uint32_t)f[14] << 16 |
					 (uint32_t)f[15] << 8 | f[16]);
		off += 9 + len;
	}
	return -1;
}

static void test_protocol_errors_goaway(void **state)
{
	static const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
	struct grpc_server *s = server_new(NULL, NULL);
	struct grpc_server_conn *c;
	struct grpc_server_stats stats;
	struct buf out = { 0 };
	uint8_t req[8];
	struct tstream *st;
	struct tc tc;
	size_t off;

	/* Garbage preface: GOAWAY(PROTOCOL_ERROR). */
	assert_int_equal(grpc_server_conn_new_mem(s, &out, &c), 0);
	off = out.len;
	assert_int_equal(grpc_server_conn_feed(c, (const uint8_t *)garbage, sizeof(garbage) - 1),
			 -EPROTO);
	assert_int_equal(find_goaway(&out, off), NGHTTP2_PROTOCOL_ERROR);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_PROTOCOL], 1);
	assert_int_equal(T.event_code, NGHTTP2_PROTOCOL_ERROR);
	grpc_server_conn_free(c);
	buf_release(&out);

	/* A 20000-byte frame (over 16384): GOAWAY(FRAME_SIZE_ERROR). */
	assert_int_equal(grpc_server_conn_new_mem(s, &out, &c), 0);
	assert_int_equal(grpc_server_conn_feed(c, preface, sizeof(preface) - 1), 0);
	off = out.len;
	assert_int_equal(grpc_server_conn_feed(c, (const uint8_t *)"\0\x4e\x20\0\0\0\0\0\x01", 9),
			 -EPROTO);
	assert_int_equal(find_goaway(&out, off), NGHTTP2_FRAME_SIZE_ERROR);
	grpc_server_conn_free(c);
	buf_release(&out);

	/* A truncated frame (EOF inside it): GOAWAY(FRAME_SIZE_ERROR). */
	assert_int_equal(grpc_server_conn_new_mem(s, &out, &c), 0);
	assert_int_equal(grpc_server_conn_feed(c, preface, sizeof(preface) - 1), 0);
	assert_int_equal(grpc_server_conn_feed(c, (const uint8_t *)"\0\0\x08\x06\0\0\0\0\0abc", 12),
			 0);
	off = out.len;
	assert_int_equal(grpc_server_conn_feed_eof(c), -EPROTO);
	assert_int_equal(find_goaway(&out, off), NGHTTP2_FRAME_SIZE_ERROR);
	grpc_server_conn_free(c);
	buf_release(&out);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_PROTOCOL], 3);

	/* The server is fine: a new connection works. */
	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Echo", NULL, req, frame(req, 0, "a", 1));
	tc_pump(&tc);
	assert_status(st, 200, 0, NULL);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.goaways, 3);
	assert_int_equal(stats.conns, 1);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

static void on_done(struct grpc_server *s, void *ud)
{
	(*(int *)ud)++;
}

static void test_graceful_shutdown_mem(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	uint8_t req[8];
	struct tstream *watch, *hold, *late;
	struct tc tc;
	int done = 0;

	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	tc_mem(&tc, s);
	watch = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	hold = tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(T.n_held, 2);
	grpc_server_shutdown(s, 10 * USEC_PER_SEC, on_done, &done);
	tc_pump(&tc);
	/* GOAWAY(NO_ERROR); the stream is finished with OK; the unary call goes on. */
	assert_true(tc.goaway);
	assert_int_equal(tc.goaway_code, NGHTTP2_NO_ERROR);
	assert_status(watch, 200, GRPC_STATUS_OK, NULL);
	assert_false(hold->ended);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	/* A stream opened after the GOAWAY is not served. */
	late = tc_request(&tc, "/test.Svc/Echo", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_false(late->ended && late->grpc_status == 0);
	assert_int_equal(loop_run_once(l, 0), 0);
	assert_int_equal(done, 0);
	assert_int_equal(grpc_call_send(T.held[1], req, 1), 0);
	assert_int_equal(grpc_call_finish(T.held[1], GRPC_STATUS_OK, NULL), 0);
	tc_pump(&tc);
	assert_status(hold, 200, GRPC_STATUS_OK, NULL);
	/* Drained: the connection is closed, and done runs from the loop. */
	assert_int_equal(tc.feed_r, -ECONNRESET);
	run_loop_until(l, &done, 1);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
	loop_free(l);
}

static void test_conn_end_closes_calls(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	uint8_t req[8];
	struct tc tc;

	/* EOF from the peer: calls close with CANCELLED. */
	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	assert_int_equal(grpc_server_conn_feed_eof(tc.conn), -ECONNRESET);
	assert_int_equal(T.closes[GRPC_STATUS_CANCELLED], 1);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);

	/* Freeing the connection: UNAVAILABLE. */
	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	grpc_server_conn_free(tc.conn);
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 1);
	tc_release(&tc);

	/* Freeing the server frees its memory connections too. */
	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	grpc_server_free(s);
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 2);
	tc_release(&tc);
}

/* What the client has to send, taken out of its session instead of fed to the server. */
static void tc_capture(struct tc *tc, struct buf *into)
{
	const uint8_t *p;
	ssize_t n;

	while ((n = nghttp2_session_mem_send(tc->s, &p)) > 0)
		assert_int_equal(buf_append(into, p, (size_t)n), 0);
	assert_true(n >= 0);
}

/*
 * The connection state machine, through memory connections on a loop. HANDSHAKE ends either
 * with the preface (the idle timer takes over) or with the preface timeout (GOING_AWAY:
 * GOAWAY(NO_ERROR), then DEAD); a dead connection stays dead.
 */
static void test_conn_state_preface_timeout_mem(void **state)
{
	const struct grpc_limits lim = { .preface_timeout = 20 * USEC_PER_MSEC,
					 .idle_timeout = 3600 * USEC_PER_SEC };
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
	struct grpc_server_stats stats;
	struct grpc_server_conn *quiet;
	struct buf quiet_out = { 0 };
	struct grpc_server *s;
	struct tstream *st;
	struct loop *l;
	uint8_t req[8];
	struct tc tc;

	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, &lim);
	/*
	 * The talker is created first: its preface deadline comes first, and it would be the
	 * first one cut had its preface not moved it on.
	 */
	tc_mem(&tc, s);
	tc_pump(&tc);
	assert_true(tc.got_settings);
	assert_int_equal(grpc_server_conn_new_mem(s, &quiet_out, &quiet), 0);
	run_loop_until(l, &T.events[GRPC_SERVER_EVENT_PREFACE_TIMEOUT], 1);

	/* The quiet one: GOAWAY(NO_ERROR) after its SETTINGS, then dead; a late preface is refused. */
	assert_int_equal(find_goaway(&quiet_out, 0), NGHTTP2_NO_ERROR);
	assert_int_equal(grpc_server_conn_flush(quiet), -ECONNRESET);
	assert_int_equal(grpc_server_conn_feed(quiet, preface, sizeof(preface) - 1), -ECONNRESET);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.conns, 1);

	/* The talker is open and serves. */
	st = tc_request(&tc, "/test.Svc/Echo", NULL, req, frame(req, 0, "a", 1));
	tc_pump(&tc);
	assert_status(st, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(tc.feed_r, 0);
	assert_false(tc.goaway);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_PREFACE_TIMEOUT], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_IDLE], 0);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_conn_free(quiet);
	buf_release(&quiet_out);
	grpc_server_free(s);
	loop_free(l);
}

/*
 * Shutdown: an idle connection (OPEN, no stream) closes as soon as its GOAWAY is out; a busy
 * one drains (its call runs to its end, a stream past the GOAWAY is refused), then closes;
 * a dead connection serves nothing.
 */
static void test_conn_state_drain_mem(void **state)
{
	struct grpc_server_stats stats;
	struct tstream *hold, *late;
	struct buf late_in = { 0 };
	struct grpc_server *s;
	struct tc idle, busy;
	uint8_t req[8], req2[16];
	struct loop *l;
	int done = 0;

	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	tc_mem(&idle, s);
	tc_pump(&idle);
	tc_mem(&busy, s);
	hold = tc_request(&busy, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&busy);
	assert_int_equal(T.n_held, 1);
	/* Stream 3, sent after the server's GOAWAY(last_stream_id=1) but before the client saw it. */
	late = tc_request(&busy, "/test.Svc/Echo", NULL, req2, frame(req2, 0, "late", 4));
	tc_capture(&busy, &late_in);

	grpc_server_shutdown(s, USEC_INFINITY, on_done, &done);
	tc_pump(&idle);
	assert_true(idle.goaway);
	assert_int_equal(idle.goaway_code, NGHTTP2_NO_ERROR);
	assert_int_equal(idle.feed_r, -ECONNRESET);

	assert_int_equal(grpc_server_conn_flush(busy.conn), 0);
	assert_int_equal(grpc_server_conn_feed(busy.conn, late_in.data, late_in.len), 0);
	tc_pump(&busy);
	assert_true(busy.goaway);
	assert_int_equal(busy.goaway_code, NGHTTP2_NO_ERROR);
	assert_int_equal(busy.feed_r, 0);
	assert_true(late->closed);
	assert_int_equal(late->close_code, NGHTTP2_REFUSED_STREAM);
	assert_int_equal(late->header_blocks, 0);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.calls, 1);
	assert_int_equal(stats.conns, 1);
	assert_false(hold->ended);
	assert_int_equal(done, 0);

	/* The held call ends: the drained connection closes and the server is done. */
	assert_int_equal(grpc_call_finish(T.held[0], GRPC_STATUS_OK, NULL), 0);
	tc_pump(&busy);
	assert_status(hold, 200, GRPC_STATUS_OK, NULL);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	assert_int_equal(busy.feed_r, -ECONNRESET);
	run_loop_until(l, &done, 1);
	assert_int_equal(grpc_server_conn_feed(busy.conn, late_in.data, late_in.len), -ECONNRESET);
	assert_int_equal(grpc_server_conn_feed_eof(busy.conn), -ECONNRESET);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.calls, 1);
	assert_int_equal(stats.conns, 0);

	buf_release(&late_in);
	tc_release(&idle);
	tc_release(&busy);
	grpc_server_conn_free(idle.conn);
	grpc_server_conn_free(busy.conn);
	grpc_server_free(s);
	loop_free(l);
}

static void test_client_goaway(void **state)
{
	struct grpc_server *s = server_new(NULL, NULL);
	uint8_t req[8];
	struct tstream *st;
	struct tc tc;

	tc_mem(&tc, s);
	st = tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_pump(&tc);
	/* grpc-go's ClientConn.Close: GOAWAY(NO_ERROR); the open call still completes. */
	assert_int_equal(nghttp2_submit_goaway(tc.s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR,
					       (const uint8_t *)"client transport shutdown", 25),
			 0);
	tc_pump(&tc);
	assert_int_equal(tc.feed_r, 0);
	assert_int_equal(grpc_call_send(T.held[0], req, 1), 0);
	assert_int_equal(grpc_call_finish(T.held[0], GRPC_STATUS_OK, NULL), 0);
	tc_pump(&tc);
	assert_status(st, 200, 0, NULL);
	assert_int_equal(tc.feed_r, -ECONNRESET);
	tc_release(&tc);
	grpc_server_conn_free(tc.conn);
	grpc_server_free(s);
}

/* --- real sockets on the loop --- */

static char tmpdir[64];

static void make_tmpdir(void)
{
	unit_tmpdir("test-grpc", tmpdir, sizeof(tmpdir));
}

static char *tmp_path(const char *name)
{
	char *p = path_join(tmpdir, name);

	assert_non_null(p);
	return p;
}

static void rm_tmpdir(void)
{
	char dir[sizeof(tmpdir)];

	if (!tmpdir[0])
		return;
	memcpy(dir, tmpdir, sizeof(dir));
	tmpdir[0] = 0;
	unit_rm_tree(dir);
}

/* Also after a failed test, whose assertion skipped its own cleanup. */
static int teardown(void **state)
{
	rm_tmpdir();
	return 0;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return fd;
}

/* A socket file with nobody behind it, as a crashed process leaves it. */
static void make_stale_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

static void tc_sock(struct tc *tc, struct loop *l, const char *path)
{
	memset(tc, 0, sizeof(*tc));
	tc->loop = l;
	tc->fd = unix_connect(path);
	tc_init_session(tc);
}

typedef bool tc_cond_fn(struct tc *tc, void *arg);

/* Socket mode: run the loop and move bytes until @cond holds (5 s at most). */
static void tc_sock_until(struct tc *tc, tc_cond_fn *cond, void *arg)
{
	usec_t end = now_usec() + 5 * USEC_PER_SEC;

	while (!cond(tc, arg)) {
		const uint8_t *p;
		uint8_t buf[65536];
		ssize_t n;

		assert_true(now_usec() < end);
		while ((n = nghttp2_session_mem_send(tc->s, &p)) > 0) {
			size_t off = 0;

			while (off < (size_t)n) {
				ssize_t w = write(tc->fd, p + off, (size_t)n - off);

				if (w < 0 && errno == EAGAIN) {
					assert_int_equal(loop_run_once(tc->loop, USEC_PER_MSEC), 0);
					continue;
				}
				assert_true(w > 0);
				off += (size_t)w;
			}
		}
		assert_int_equal(loop_run_once(tc->loop, USEC_PER_MSEC), 0);
		while (!tc->eof && (n = read(tc->fd, buf, sizeof(buf))) != 0) {
			if (n < 0) {
				assert_true(errno == EAGAIN || errno == ECONNRESET);
				if (errno == ECONNRESET)
					tc->eof = true;
				break;
			}
			assert_true(nghttp2_session_mem_recv(tc->s, buf, (size_t)n) >= 0);
		}
		if (n == 0)
			tc->eof = true;
	}
}

static bool cond_ended(struct tc *tc, void *arg)
{
	return ((struct tstream *)arg)->ended;
}

static bool cond_data(struct tc *tc, void *arg)
{
	return ((struct tstream *)arg)->data.len > 0;
}

static bool cond_settings(struct tc *tc, void *arg)
{
	return tc->got_settings;
}

static bool cond_goaway(struct tc *tc, void *arg)
{
	return tc->goaway;
}

static bool cond_held(struct tc *tc, void *arg)
{
	return T.n_held > 0;
}

static bool cond_eof(struct tc *tc, void *arg)
{
	return tc->eof;
}

static void test_socket_listen(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	char *path, *path2;
	struct stat st, stale;
	unsigned calls;
	mode_t um;
	int fd;

	make_tmpdir();
	path = tmp_path("plugin.sock");
	path2 = tmp_path("other.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, "/nonexistent-dir/x.sock"), -ENOENT);

	/* A stale socket file is replaced; ours is 0600 and the umask is left as it was. */
	make_stale_socket(path);
	assert_int_equal(stat(path, &stale), 0);
	assert_true(S_ISSOCK(stale.st_mode));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), -1);
		assert_int_equal(errno, ECONNREFUSED);
	}
	close(fd);
	um = umask(0022);
	calls = umask_calls;
	assert_int_equal(grpc_server_listen(s, path), 0);
	assert_int_equal(umask_calls, calls); /* the process's umask is never changed */
	assert_int_equal(umask(um), 0022);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_string_equal(grpc_server_path(s), path);
	fd = unix_connect(path);
	close(fd);

	/* Listening elsewhere closes the old listener and removes its file. 0600 under any umask. */
	um = umask(0);
	calls = umask_calls;
	assert_int_equal(grpc_server_listen(s, path2), 0);
	assert_int_equal(umask_calls, calls);
	assert_int_equal(umask(um), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(stat(path2, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	grpc_server_unlisten(s);
	assert_int_equal(access(path2, F_OK), -1);
	assert_null(grpc_server_path(s));

	/* Someone replaced our file (a restarted kubelet cleaning up): theirs stays. */
	assert_int_equal(grpc_server_listen(s, path), 0);
	assert_int_equal(unlink(path), 0);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	grpc_server_unlisten(s);
	assert_int_equal(access(path, F_OK), 0);

	/* Even when the new file is a socket that got our old inode number back. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(grpc_server_listen(s, path), 0);
	assert_int_equal(stat(path, &stale), 0);
	assert_int_equal(unlink(path), 0);
	usleep(2000);
	make_stale_socket(path);
	assert_int_equal(stat(path, &st), 0);
	grpc_server_unlisten(s);
	assert_int_equal(access(path, F_OK), 0);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	free(path2);
	rm_tmpdir();
}

struct cres {
	int done;
	int r;
	enum grpc_status status;
	char msg[512];
	struct buf resp;
	int cred_r; /* grpc_client_call_peer_cred() from inside @done */
	pid_t pid;
};

static void cres_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		      const char *message, const uint8_t *resp, size_t len, void *ud)
{
	struct cres *res = ud;

	res->done++;
	res->r = r;
	res->status = status;
	res->cred_r = grpc_client_call_peer_cred(cc, &res->pid, NULL);
	assert_non_null(message);
	(void)snprintf(res->msg, sizeof(res->msg), "%s", message);
	/* Tolerant: the allocation failure tests fail this one too. */
	if (len && buf_append(&res->resp, resp, len) < 0)
		res->resp.len = SIZE_MAX;
}

static void client_call(struct loop *l, const char *sock, const char *path, const char *req,
			const struct grpc_client_opts *opts, struct cres *res)
{
	struct grpc_client_call *cc;

	buf_release(&res->resp);
	memset(res, 0, sizeof(*res));
	assert_int_equal(grpc_client_call_start(l, sock, path, (const uint8_t *)req,
						req ? strlen(req) : 0, opts, cres_done, res, &cc),
			 0);
	/* @done never runs inside start, even for an immediate failure. */
	assert_int_equal(res->done, 0);
	run_loop_until(l, &res->done, 1);
	assert_int_equal(res->done, 1);
}

static void test_socket_accept_emfile(void **state)
{
	struct grpc_server_stats stats;
	struct grpc_server *s;
	struct rlimit old, low;
	struct loop *l;
	char *path;
	usec_t t0, elapsed;
	int fd, fd2, next, holes[64];
	size_t n_holes = 0;

	make_tmpdir();
	path = tmp_path("emfile.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	fd = unix_connect(path);
	/*
	 * No fd left for accept4(): it fails with EMFILE while a connection waits. Holes below
	 * are filled first, so that the limit is the lowest free fd and above every fd in use
	 * (valgrind treats fds over the soft limit as invalid).
	 */
	for (;;) {
		next = dup(0);
		assert_true(next >= 0);
		if (next > fd)
			break;
		assert_true(n_holes < ELEMENTSOF(holes));
		holes[n_holes++] = next;
	}
	close(next);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)next;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* The listener pauses instead of firing again at once: the loop sleeps. */
	t0 = now_usec();
	for (int i = 0; i < 4; i++)
		(void)loop_run_once(l, 20 * USEC_PER_MSEC);
	elapsed = now_usec() - t0;
	grpc_server_get_stats(s, &stats);
	/* Restored before any assertion, so that a failure here cannot break later tests. */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_true(elapsed >= 60 * USEC_PER_MSEC);
	assert_int_equal(stats.conns, 0);
	/*
	 * With fds back, the listener resumes once the pause ends. (A new connection: valgrind
	 * emulates EMFILE by closing what accept() returned, so the first one may be gone.)
	 */
	fd2 = unix_connect(path);
	for (int i = 0; i < 100 && stats.conns == 0; i++) {
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		grpc_server_get_stats(s, &stats);
	}
	assert_true(stats.conns >= 1);
	close(fd);
	close(fd2);
	for (size_t i = 0; i < n_holes; i++)
		close(holes[i]);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

/* Reads @fd until EOF (running the loop), keeping what came; false after 5 s. */
static bool read_until_eof(struct loop *l, int fd, struct buf *got)
{
	usec_t end = now_usec() + 5 * USEC_PER_SEC;
	uint8_t buf[4096];

	while (now_usec() < end) {
		ssize_t n;

		assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n > 0)
			assert_int_equal(buf_append(got, buf, (size_t)n), 0);
	}
	return false;
}

static void wait_conns(struct loop *l, struct grpc_server *s, unsigned want)
{
	struct grpc_server_stats stats;

	for (int i = 0; i < 500; i++) {
		grpc_server_get_stats(s, &stats);
		if (stats.conns == want)
			return;
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	}
	assert_int_equal(stats.conns, want);
}

/*
 * epoll failure injection: this binary's epoll_ctl() comes before libc's for
 * the statically linked modules. The next @fail_mod EPOLL_CTL_MOD calls that set exactly
 * @fail_events fail with ENOMEM.
 */
static struct {
	int fail_mod;
	uint32_t fail_events;
} E;

/* NOLINTNEXTLINE(readability-inconsistent-declaration-parameter-name): glibc names it __event */
int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (op == EPOLL_CTL_MOD && E.fail_mod > 0 && ev && ev->events == E.fail_events) {
		E.fail_mod--;
		errno = ENOMEM;
		return -1;
	}
	return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}

/* Leaves no fd free for accept4() above the ones in use; returns the old limit. */
static struct rlimit starve_fds(int above, int *holes, size_t *n_holes, size_t max_holes)
{
	struct rlimit old, low;
	int next;

	for (;;) {
		next = dup(0);
		assert_true(next >= 0);
		if (next > above)
			break;
		assert_true(*n_holes < max_holes);
		holes[(*n_holes)++] = next;
	}
	close(next);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)next;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	return old;
}

static void test_socket_accept_pause_errors(void **state)
{
	struct grpc_server_stats stats;
	struct grpc_server *s;
	struct rlimit old;
	struct loop *l;
	char *path;
	int fd, fd2, holes[64];
	size_t n_holes = 0;

	make_tmpdir();
	path = tmp_path("pause.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);

	/*
	 * Resuming fails once: the listener is not left paused for good, the resume is tried
	 * again after another pause.
	 */
	fd = unix_connect(path);
	old = starve_fds(fd, holes, &n_holes, ELEMENTSOF(holes));
	(void)loop_run_once(l, 20 * USEC_PER_MSEC);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	E.fail_events = EPOLLIN;
	E.fail_mod = 1;
	fd2 = unix_connect(path);
	stats.conns = 0;
	for (int i = 0; i < 100 && stats.conns < 1; i++) {
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		grpc_server_get_stats(s, &stats);
	}
	assert_int_equal(E.fail_mod, 0);
	assert_true(stats.conns >= 1);
	close(fd);
	close(fd2);
	for (size_t i = 0; i < n_holes; i++)
		close(holes[i]);
	n_holes = 0;
	wait_conns(l, s, 0);

	/*
	 * Pausing fails: the listener's io is dropped rather than left to fire again at once
	 * (nothing here can tell that from a spin without timing it), and created again.
	 */
	fd = unix_connect(path);
	old = starve_fds(fd, holes, &n_holes, ELEMENTSOF(holes));
	E.fail_events = 0;
	E.fail_mod = 1;
	/* accept fails, the pause fails */
	for (int i = 0; i < 100 && E.fail_mod > 0; i++)
		(void)loop_run_once(l, 10 * USEC_PER_MSEC);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(E.fail_mod, 0);
	/* ... and served again once the pause is over. */
	fd2 = unix_connect(path);
	stats.conns = 0;
	for (int i = 0; i < 100 && stats.conns < 1; i++) {
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		grpc_server_get_stats(s, &stats);
	}
	assert_true(stats.conns >= 1);
	close(fd);
	close(fd2);
	for (size_t i = 0; i < n_holes; i++)
		close(holes[i]);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_socket_conn_cap(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	struct grpc_server_stats stats;
	int fds[63], extra;
	char *path;
	uint8_t req[8];
	struct buf got = { 0 };
	struct tstream *st, *watch;
	struct cres res = { 0 };
	struct tc tc;

	make_tmpdir();
	path = tmp_path("cap.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	/* The first connection is busy (a watch stays open); 63 strays say nothing. */
	tc_sock(&tc, l, path);
	watch = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "w", 1));
	tc_sock_until(&tc, cond_data, watch);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		fds[i] = unix_connect(path);
	wait_conns(l, s, 64);

	/* The 65th is served: the stray idle the longest makes room (GOAWAY(NO_ERROR), EOF). */
	extra = unix_connect(path);
	assert_true(read_until_eof(l, fds[0], &got));
	assert_int_equal(got.data[3], NGHTTP2_SETTINGS);
	assert_int_equal(find_goaway(&got, 0), NGHTTP2_NO_ERROR);
	buf_release(&got);
	wait_conns(l, s, 64);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.conns_refused, 0);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_EVICTED], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_REFUSED], 0);

	/* Our client too (the next stray goes), and the busy first connection is untouched. */
	client_call(l, path, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_OK);
	/* The server's process, as SO_PEERCRED reports it to a client. */
	assert_int_equal(res.cred_r, 0);
	assert_int_equal(res.pid, getpid());
	assert_int_equal(T.events[GRPC_SERVER_EVENT_EVICTED], 2);
	assert_non_null(T.held[0]);
	st = tc_request(&tc, "/test.Svc/Echo", NULL, req, frame(req, 0, "ok", 2));
	tc_sock_until(&tc, cond_ended, st);
	assert_status(st, 200, 0, NULL);
	assert_false(watch->ended);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		close(fds[i]);
	close(extra);
	tc_release(&tc);
	grpc_server_free(s);

	/* With every connection busy, a new one gets SETTINGS, GOAWAY(REFUSED_STREAM), EOF. */
	s = server_new(l, &(struct grpc_limits){ .max_conns = 1 });
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&tc, l, path);
	watch = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "w", 1));
	tc_sock_until(&tc, cond_data, watch);
	extra = unix_connect(path);
	assert_true(read_until_eof(l, extra, &got));
	assert_true(got.len > 9);
	assert_int_equal(got.data[3], NGHTTP2_SETTINGS);
	assert_int_equal(find_goaway(&got, 0), NGHTTP2_REFUSED_STREAM);
	grpc_server_get_stats(s, &stats);
	assert_int_equal(stats.conns_refused, 1);
	assert_int_equal(stats.conns, 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_REFUSED], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_EVICTED], 0);
	close(extra);
	buf_release(&got);
	/* Our client is refused while the cap holds, and served once a slot is free. */
	client_call(l, path, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, -ECONNRESET);
	assert_int_equal(res.status, GRPC_STATUS_UNAVAILABLE);
	tc_release(&tc);
	wait_conns(l, s, 0);
	client_call(l, path, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_OK);
	buf_release(&res.resp);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

/*
 * At the cap, the victim is the connection idle the longest, counted from the end of its last
 * stream, not the oldest: a connection that just finished a call outlives a younger stray.
 */
static void test_socket_evict_idle_longest(void **state)
{
	const struct grpc_limits lim = { .max_conns = 2 };
	struct grpc_server *s;
	struct tstream *st;
	struct buf got = { 0 };
	struct loop *l;
	uint8_t req[8];
	int stray, extra;
	struct tc old;
	char *path;

	make_tmpdir();
	path = tmp_path("evict.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, &lim);
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&old, l, path);
	tc_sock_until(&old, cond_settings, NULL);
	stray = unix_connect(path);
	wait_conns(l, s, 2);
	/* The older connection works after the stray came: idle since now, not since accept. */
	st = tc_request(&old, "/test.Svc/Echo", NULL, req, frame(req, 0, "1", 1));
	tc_sock_until(&old, cond_ended, st);
	assert_status(st, 200, GRPC_STATUS_OK, NULL);

	extra = unix_connect(path);
	assert_true(read_until_eof(l, stray, &got));
	assert_int_equal(find_goaway(&got, 0), NGHTTP2_NO_ERROR);
	wait_conns(l, s, 2);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_EVICTED], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_REFUSED], 0);
	st = tc_request(&old, "/test.Svc/Echo", NULL, req, frame(req, 0, "2", 1));
	tc_sock_until(&old, cond_ended, st);
	assert_status(st, 200, GRPC_STATUS_OK, NULL);
	assert_false(old.goaway);

	buf_release(&got);
	close(stray);
	close(extra);
	tc_release(&old);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_socket_preface_and_idle_timeouts(void **state)
{
	const struct grpc_limits lim = { .preface_timeout = 50 * USEC_PER_MSEC,
					 .idle_timeout = 200 * USEC_PER_MSEC };
	struct loop *l;
	struct grpc_server *s;
	struct buf got = { 0 };
	uint8_t req[8];
	struct tstream *st;
	struct tc tc;
	char *path;
	int quiet, half;

	make_tmpdir();
	path = tmp_path("timeouts.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, &lim);
	assert_int_equal(grpc_server_listen(s, path), 0);
	/* Nothing sent, and half a preface: both closed (GOAWAY(NO_ERROR), then EOF). */
	quiet = unix_connect(path);
	half = unix_connect(path);
	assert_int_equal(write(half, "PRI * HTTP/2.0\r\n", 16), 16);
	assert_true(read_until_eof(l, quiet, &got));
	assert_int_equal(find_goaway(&got, 0), NGHTTP2_NO_ERROR);
	buf_release(&got);
	assert_true(read_until_eof(l, half, &got));
	buf_release(&got);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_PREFACE_TIMEOUT], 2);
	close(quiet);
	close(half);

	/* A client that works is not cut while a stream is open, however long it takes. */
	tc_sock(&tc, l, path);
	st = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "w", 1));
	tc_sock_until(&tc, cond_data, st);
	for (int i = 0; i < 40; i++)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
	assert_false(tc.goaway);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_IDLE], 0);
	/* Once its last stream ends, idle_timeout later it is closed. */
	assert_int_equal(grpc_call_finish(T.held[0], GRPC_STATUS_OK, NULL), 0);
	tc_sock_until(&tc, cond_ended, st);
	tc_sock_until(&tc, cond_eof, NULL);
	assert_true(tc.goaway);
	assert_int_equal(tc.goaway_code, NGHTTP2_NO_ERROR);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_IDLE], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_PREFACE_TIMEOUT], 2);
	tc_release(&tc);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_socket_peer_cred(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	uint8_t req[8];
	struct tstream *st;
	struct tc tc;
	char *path;
	pid_t pid = 0;
	uid_t uid = 1;

	make_tmpdir();
	path = tmp_path("cred.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&tc, l, path);
	st = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "w", 1));
	tc_sock_until(&tc, cond_data, st);
	assert_int_equal(grpc_call_peer_cred(T.held[0], &pid, &uid), 0);
	assert_int_equal(pid, getpid());
	assert_int_equal(uid, getuid());
	assert_int_equal(grpc_call_peer_cred(T.held[0], NULL, NULL), 0);
	tc_release(&tc);
	grpc_server_free(s);

	/* A memory connection has none, unless set. */
	s = server_new(NULL, NULL);
	tc_mem(&tc, s);
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "w", 1));
	tc_pump(&tc);
	assert_int_equal(grpc_call_peer_cred(T.held[0], &pid, &uid), -ENODATA);
	grpc_server_conn_set_peer_cred(tc.conn, 42, 7);
	assert_int_equal(grpc_call_peer_cred(T.held[0], &pid, &uid), 0);
	assert_int_equal(pid, 42);
	assert_int_equal(uid, 7);
	grpc_server_conn_free(tc.conn);
	tc_release(&tc);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_socket_shutdown_drain(void **state)
{
	struct loop *l;
	struct grpc_server *s;
	uint8_t req[8];
	struct tstream *watch, *hold;
	struct tc tc;
	char *path;
	int done = 0;

	make_tmpdir();
	path = tmp_path("drain.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&tc, l, path);
	watch = tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	hold = tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_sock_until(&tc, cond_data, watch);
	while (T.n_held < 2)
		assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);

	grpc_server_shutdown(s, 10 * USEC_PER_SEC, on_done, &done);
	assert_int_equal(access(path, F_OK), -1);
	tc_sock_until(&tc, cond_goaway, NULL);
	assert_int_equal(tc.goaway_code, NGHTTP2_NO_ERROR);
	tc_sock_until(&tc, cond_ended, watch);
	assert_status(watch, 200, GRPC_STATUS_OK, NULL);
	/* The unary call in flight completes after the GOAWAY. */
	assert_false(hold->ended);
	assert_int_equal(grpc_call_send(T.held[1], req, 1), 0);
	assert_int_equal(grpc_call_finish(T.held[1], GRPC_STATUS_OK, NULL), 0);
	tc_sock_until(&tc, cond_ended, hold);
	assert_status(hold, 200, GRPC_STATUS_OK, NULL);
	/* Drained: the server closes the connection and says it is done. */
	tc_sock_until(&tc, cond_eof, NULL);
	run_loop_until(l, &done, 1);
	tc_release(&tc);

	/* A call that never finishes is cut at the end of the grace period. */
	grpc_server_free(s);
	s = server_new(l, NULL);
	done = 0;
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&tc, l, path);
	hold = tc_request(&tc, "/test.Svc/Hold", NULL, req, frame(req, 0, "", 0));
	tc_sock_until(&tc, cond_held, NULL);
	grpc_server_shutdown(s, 50 * USEC_PER_MSEC, on_done, &done);
	tc_sock_until(&tc, cond_eof, NULL);
	assert_false(hold->ended);
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 1);
	run_loop_until(l, &done, 1);
	tc_release(&tc);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void count_conn_closed(struct grpc_server *s, uint64_t conn_id, void *ud)
{
	(*(int *)ud)++;
}

/* Runs the loop until the server has @n connections. */
static void run_until_conns(struct loop *l, struct grpc_server *s, unsigned n)
{
	struct grpc_server_stats st;

	for (int i = 0; i < 2000; i++) {
		grpc_server_get_stats(s, &st);
		if (st.conns == n)
			return;
		assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);
	}
	fail_msg("the server never had %u connections", n);
}

/*
 * A held connection (no call) reports the end of its server: at once when nobody listens,
 * on GOAWAY at a graceful shutdown, and when the server's side is simply closed (a process
 * killed); it stays open meanwhile. The server's conn-closed callback runs once per
 * connection, and a touched socket is still the server's own (its unlisten removes it).
 */
static void test_client_hold(void **state)
{
	struct grpc_client_call *cc;
	struct grpc_server *s;
	struct cres res = { 0 };
	struct stat st0, st1;
	struct loop *l;
	char *path;
	int closed = 0, done = 0;

	make_tmpdir();
	path = tmp_path("hold.sock");
	assert_int_equal(loop_new(&l), 0);

	/* Nobody there: reported from the loop, never inside the start. */
	assert_int_equal(grpc_client_hold_start(l, path, cres_done, &res, &cc), 0);
	assert_int_equal(res.done, 0);
	run_loop_until(l, &res.done, 1);
	assert_int_equal(res.r, -ENOENT);

	/* Held while the server lives; the server's closing of it ends it. */
	s = server_new(l, NULL);
	grpc_server_set_conn_closed_cb(s, count_conn_closed, &closed);
	assert_int_equal(grpc_server_listen(s, path), 0);
	memset(&res, 0, sizeof(res));
	assert_int_equal(grpc_client_hold_start(l, path, cres_done, &res, &cc), 0);
	run_until_conns(l, s, 1);
	for (int i = 0; i < 20; i++)
		assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);
	assert_int_equal(res.done, 0);
	assert_int_equal(grpc_client_call_peer_cred(cc, &res.pid, NULL), 0);
	assert_int_equal(res.pid, getpid());

	/* A touch moves the times, and the file is still ours. */
	assert_int_equal(lstat(path, &st0), 0);
	assert_int_equal(grpc_server_touch(s), 0);
	assert_int_equal(lstat(path, &st1), 0);
	assert_int_equal(st0.st_ino, st1.st_ino);
	grpc_server_shutdown(s, USEC_PER_SEC, on_done, &done);
	assert_int_equal(access(path, F_OK), -1); /* removed: still ours */
	assert_int_equal(grpc_server_touch(s), -ENOENT);
	run_loop_until(l, &res.done, 1);
	assert_int_equal(res.r, -ECONNRESET);
	run_loop_until(l, &done, 1);
	assert_int_equal(closed, 1);
	grpc_server_free(s);

	/* The server's side closed without a word, as the kernel does for a killed process. */
	s = server_new(l, NULL);
	closed = 0;
	grpc_server_set_conn_closed_cb(s, count_conn_closed, &closed);
	assert_int_equal(grpc_server_listen(s, path), 0);
	memset(&res, 0, sizeof(res));
	assert_int_equal(grpc_client_hold_start(l, path, cres_done, &res, &cc), 0);
	run_until_conns(l, s, 1);
	grpc_server_free(s);
	assert_int_equal(closed, 1);
	run_loop_until(l, &res.done, 1);
	assert_int_equal(res.r, -ECONNRESET);

	/* Cancelled: no report. */
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	memset(&res, 0, sizeof(res));
	assert_int_equal(grpc_client_hold_start(l, path, cres_done, &res, &cc), 0);
	run_until_conns(l, s, 1);
	assert_null(grpc_client_call_cancel(cc));
	run_until_conns(l, s, 0);
	assert_int_equal(res.done, 0);
	grpc_server_free(s);
	buf_release(&res.resp);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_socket_overflow_peer_not_reading(void **state)
{
	const struct grpc_limits lim = { .max_recv_msg = (size_t)64 * 1024,
					 .max_conn_buffered = (size_t)1024 * 1024 };
	static uint8_t chunk[64 * 1024];
	struct grpc_server_stats stats;
	struct grpc_server *s;
	struct loop *l;
	uint8_t req[8];
	struct tc tc;
	char *path;
	usec_t t0;
	int r = 0, sent = 0;

	make_tmpdir();
	path = tmp_path("slow.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, &lim);
	assert_int_equal(grpc_server_listen(s, path), 0);
	tc_sock(&tc, l, path);
	/* Big windows: flow control does not stop the server, the full socket does. */
	{
		nghttp2_settings_entry iv = { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 30 };

		assert_int_equal(nghttp2_submit_settings(tc.s, NGHTTP2_FLAG_NONE, &iv, 1), 0);
		assert_int_equal(nghttp2_session_set_local_window_size(tc.s, NGHTTP2_FLAG_NONE, 0,
								       1 << 30),
				 0);
	}
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, req, frame(req, 0, "", 0));
	tc_sock_until(&tc, cond_held, NULL);
	/* The peer reads nothing more: the socket fills, then our queue reaches the cap. */
	while (sent < 1000 && (r = grpc_call_send(T.held[0], chunk, sizeof(chunk))) == 0) {
		sent++;
		assert_int_equal(loop_run_once(l, 0), 0);
	}
	assert_int_equal(r, -ENOBUFS);
	assert_true(sent >= 16);
	/* Closed from the loop after the linger time, though the peer never reads. */
	t0 = now_usec();
	do {
		assert_true(now_usec() - t0 < 3 * USEC_PER_SEC);
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
		grpc_server_get_stats(s, &stats);
	} while (stats.conns > 0);
	assert_true(now_usec() - t0 >= 900 * USEC_PER_MSEC);
	assert_int_equal(T.closes[GRPC_STATUS_UNAVAILABLE], 1);
	assert_int_equal(T.events[GRPC_SERVER_EVENT_OVERFLOW], 1);
	assert_int_equal(stats.goaways, 1);
	tc_release(&tc);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

static void test_client_against_server(void **state)
{
	const struct grpc_client_opts opts = { .timeout = 5 * USEC_PER_SEC };
	const struct grpc_client_opts auth = { .authority = "plugin.example" };
	struct loop *l;
	struct grpc_server *s;
	struct cres res = { 0 };
	usec_t before;
	char *path;

	make_tmpdir();
	path = tmp_path("srv.sock");
	assert_int_equal(loop_new(&l), 0);
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);

	/* Unary OK, and the request headers every gRPC server expects. */
	before = now_usec();
	client_call(l, path, "/test.Svc/Meta", "hello", &opts, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_OK);
	assert_int_equal(res.resp.len, 5);
	assert_memory_equal(res.resp.data, "hello", 5);
	assert_non_null(strstr(T.seen_headers,
			       ":method=POST\n:scheme=http\n:path=/test.Svc/Meta\n"
			       ":authority=localhost\nte=trailers\n"
			       "content-type=application/grpc\nuser-agent=edgegpu/"));
	/* grpc-timeout in grpc-go's format: 5 s less a little, in microseconds. */
	assert_non_null(strstr(T.seen_headers, "grpc-timeout=4"));
	assert_non_null(strstr(T.seen_headers, "u\n"));
	assert_true(T.seen_deadline <= before + 5 * USEC_PER_SEC + 500 * USEC_PER_MSEC);
	assert_true(T.seen_deadline > before + 4 * USEC_PER_SEC);

	client_call(l, path, "/test.Svc/Meta", NULL, &auth, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.resp.len, 0);
	assert_non_null(strstr(T.seen_headers, ":authority=plugin.example\n"));
	assert_non_null(strstr(T.seen_headers, "grpc-timeout=(none)\n"));

	/* An error status with its message percent-decoded. */
	client_call(l, path, "/test.Svc/Fail", "", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_NOT_FOUND);
	assert_string_equal(res.msg, FAIL_TEXT);
	assert_int_equal(res.resp.len, 0);

	/* Unknown method: UNIMPLEMENTED with grpc-go's text. */
	client_call(l, path, "/test.Svc/Nope", "", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_UNIMPLEMENTED);
	assert_string_equal(res.msg, "unknown method Nope for service test.Svc");

	/* A 3 MiB response crosses flow control windows intact. */
	client_call(l, path, "/test.Svc/Big", "3145728", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.resp.len, 3145728);
	assert_int_equal(res.resp.data[3145727], 'b');
	buf_release(&res.resp);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

/* A bare HTTP/2 server (our h2 module) for answers a gRPC server would never give. */
struct rawsrv {
	struct loop *l;
	int lfd, fd;
	struct loop_io *lio, *io;
	struct h2_session *h;
	int mode; /* 0: :status 503 without content-type; 1: gRPC headers, no grpc-status */
};

static void raw_flush(struct rawsrv *r)
{
	struct buf b = { 0 };

	assert_int_equal(h2_session_send(r->h, &b, SIZE_MAX), 0);
	if (b.len)
		assert_int_equal(write(r->fd, b.data, b.len), (ssize_t)b.len);
	buf_release(&b);
}

static int raw_open(void *ud, int32_t id)
{
	return 0;
}

static int raw_remote_end(void *ud, int32_t id, void *stream_ud)
{
	struct rawsrv *r = ud;
	const struct h2_nv h503[] = { { ":status", "503" } };
	const struct h2_nv h200[] = { { ":status", "200" },
				      { "content-type", "application/grpc" } };

	if (r->mode == 0) {
		assert_int_equal(h2_submit_response(r->h, id, h503, 1, true), 0);
	} else {
		assert_int_equal(h2_submit_response(r->h, id, h200, 2, false), 0);
		assert_int_equal(h2_stream_write(r->h, id, "\0\0\0\0\0", 5), 0);
		assert_int_equal(h2_stream_end(r->h, id, NULL, 0), 0);
	}
	return 0;
}

static const struct h2_callbacks raw_cbs = { .stream_open = raw_open,
					     .remote_end = raw_remote_end };

static void raw_io(struct loop_io *io, int fd, uint32_t ev, void *ud)
{
	struct rawsrv *r = ud;
	uint8_t buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0)
		assert_int_equal(h2_session_recv(r->h, buf, (size_t)n), 0);
	else
		r->io = loop_io_free(r->io);
	raw_flush(r);
}

static void raw_accept(struct loop_io *io, int fd, uint32_t ev, void *ud)
{
	struct rawsrv *r = ud;

	r->fd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(r->fd >= 0);
	assert_int_equal(h2_session_new(true, NULL, &raw_cbs, r, &r->h), 0);
	assert_int_equal(loop_io_new(r->l, r->fd, EPOLLIN, raw_io, r, &r->io), 0);
	raw_flush(r);
}

static int listen_unix(const char *path, bool do_listen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (do_listen)
		assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static void rawsrv_start(struct rawsrv *r, struct loop *l, const char *path, int mode)
{
	memset(r, 0, sizeof(*r));
	r->l = l;
	r->fd = -1;
	r->mode = mode;
	r->lfd = listen_unix(path, true);
	assert_int_equal(loop_io_new(l, r->lfd, EPOLLIN, raw_accept, r, &r->lio), 0);
}

static void rawsrv_stop(struct rawsrv *r)
{
	r->io = loop_io_free(r->io);
	r->lio = loop_io_free(r->lio);
	h2_session_free(r->h);
	if (r->fd >= 0)
		close(r->fd);
	close(r->lfd);
}

static void test_client_errors(void **state)
{
	struct grpc_client_opts opts = { .timeout = 100 * USEC_PER_MSEC };
	struct grpc_client_call *cc;
	struct loop *l;
	struct grpc_server *s;
	struct rawsrv raw;
	struct cres res = { 0 };
	char *missing, *stale, *mute, *srv, *raw_path;
	usec_t t0;
	int mute_fd;

	make_tmpdir();
	missing = tmp_path("missing.sock");
	stale = tmp_path("stale.sock");
	mute = tmp_path("mute.sock");
	srv = tmp_path("srv.sock");
	raw_path = tmp_path("raw.sock");
	assert_int_equal(loop_new(&l), 0);

	/* Socket file missing: -ENOENT, and the message names the path. */
	client_call(l, missing, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, -ENOENT);
	assert_int_equal(res.status, GRPC_STATUS_UNAVAILABLE);
	assert_non_null(strstr(res.msg, missing));
	assert_non_null(strstr(res.msg, "no such file or directory") ?:
				strstr(res.msg, "No such file"));

	/* A file but nobody listening: -ECONNREFUSED. */
	make_stale_socket(stale);
	client_call(l, stale, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, -ECONNREFUSED);
	assert_non_null(strstr(res.msg, stale));

	/* A server that accepts nothing and never answers: -ETIMEDOUT at the deadline. */
	mute_fd = listen_unix(mute, true);
	t0 = now_usec();
	client_call(l, mute, "/test.Svc/Echo", "x", &opts, &res);
	assert_int_equal(res.r, -ETIMEDOUT);
	assert_int_equal(res.status, GRPC_STATUS_DEADLINE_EXCEEDED);
	assert_true(now_usec() - t0 >= 100 * USEC_PER_MSEC);
	assert_true(now_usec() - t0 < 2 * USEC_PER_SEC);
	close(mute_fd);

	/* Our server, with a handler that never answers: the same, and the call closes there. */
	s = server_new(l, NULL);
	assert_int_equal(grpc_server_listen(s, srv), 0);
	client_call(l, srv, "/test.Svc/Hold", "x", &opts, &res);
	assert_int_equal(res.r, -ETIMEDOUT);
	run_loop_until(l, &T.n_closes, 1);
	assert_int_equal(T.closes[GRPC_STATUS_DEADLINE_EXCEEDED] + T.closes[GRPC_STATUS_CANCELLED],
			 1);

	/* A response over the receive limit: -EMSGSIZE. */
	opts = (struct grpc_client_opts){ .max_recv_msg = 1024 };
	client_call(l, srv, "/test.Svc/Big", "4096", &opts, &res);
	assert_int_equal(res.r, -EMSGSIZE);
	assert_int_equal(res.status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_string_equal(res.msg, "grpc: received message larger than max (4096 vs. 1024)");
	client_call(l, srv, "/test.Svc/Big", "1024", &opts, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.resp.len, 1024);

	/* A status error is no transport error: r == 0 with the server's status. */
	client_call(l, srv, "/test.Svc/Fail", "", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_NOT_FOUND);

	/* Cancel: @done never runs, and the server sees the call go. */
	T.n_closes = 0;
	assert_int_equal(grpc_client_call_start(l, srv, "/test.Svc/Hold", NULL, 0, NULL, cres_done,
						&res, &cc),
			 0);
	res.done = 0;
	while (T.n_held < 2)
		assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);
	assert_null(grpc_client_call_cancel(cc));
	run_loop_until(l, &T.n_closes, 1);
	assert_int_equal(T.closes[GRPC_STATUS_CANCELLED] >= 1, 1);
	assert_int_equal(res.done, 0);

	/* Not gRPC at all (HTTP 503, no content-type): mapped as grpc-go maps it. */
	rawsrv_start(&raw, l, raw_path, 0);
	client_call(l, raw_path, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_UNAVAILABLE);
	assert_string_equal(
		res.msg,
		"unexpected HTTP status code received from server: 503 (Service Unavailable); malformed header: missing HTTP content-type");
	rawsrv_stop(&raw);
	(void)unlink(raw_path);

	/* gRPC headers and a message, but the stream ends without grpc-status: -EPROTO. */
	rawsrv_start(&raw, l, raw_path, 1);
	client_call(l, raw_path, "/test.Svc/Echo", "x", NULL, &res);
	assert_int_equal(res.r, -EPROTO);
	assert_int_equal(res.status, GRPC_STATUS_INTERNAL);
	rawsrv_stop(&raw);

	/* Bad arguments fail at once and @done never runs. */
	assert_int_equal(grpc_client_call_start(l, srv, "no-slash", NULL, 0, NULL, cres_done, &res,
						&cc),
			 -EINVAL);
	buf_release(&res.resp);
	grpc_server_free(s);
	loop_free(l);
	free(missing);
	free(stale);
	free(mute);
	free(srv);
	free(raw_path);
	rm_tmpdir();
}

/*
 * The kubelet's dial-back: while our Register call is outstanding, the "kubelet" calls our
 * own server on the same loop, and answers Register only after that.
 */
static struct {
	struct loop *l;
	char *plugin_sock;
	struct grpc_call *reg;
} K;

static void kubelet_dialed(struct grpc_client_call *cc, int r, enum grpc_status status,
			   const char *message, const uint8_t *resp, size_t len, void *ud)
{
	assert_int_equal(r, 0);
	assert_int_equal(status, GRPC_STATUS_OK);
	assert_int_equal(grpc_call_send(K.reg, resp, len), 0);
	assert_int_equal(grpc_call_finish(K.reg, GRPC_STATUS_OK, NULL), 0);
}

static void h_register(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	struct grpc_client_call *cc;

	K.reg = call;
	assert_int_equal(grpc_client_call_start(K.l, K.plugin_sock, "/test.Svc/Echo",
						(const uint8_t *)"options", 7, NULL, kubelet_dialed,
						NULL, &cc),
			 0);
}

static const struct grpc_method kubelet_methods[] = {
	{ "/v1beta1.Registration/Register", false, h_register },
};

static void test_client_dial_back_same_loop(void **state)
{
	const struct grpc_client_opts opts = { .timeout = 2 * USEC_PER_SEC };
	struct grpc_server *plugin, *kubelet;
	struct cres res = { 0 };
	char *ksock;

	make_tmpdir();
	ksock = tmp_path("kubelet.sock");
	K.plugin_sock = tmp_path("plugin.sock");
	assert_int_equal(loop_new(&K.l), 0);
	plugin = server_new(K.l, NULL);
	assert_int_equal(grpc_server_listen(plugin, K.plugin_sock), 0);
	assert_int_equal(grpc_server_new(K.l, kubelet_methods, 1, NULL, NULL, &kubelet), 0);
	assert_int_equal(grpc_server_listen(kubelet, ksock), 0);
	client_call(K.l, ksock, "/v1beta1.Registration/Register", "req", &opts, &res);
	assert_int_equal(res.r, 0);
	assert_int_equal(res.status, GRPC_STATUS_OK);
	assert_int_equal(res.resp.len, 7);
	assert_memory_equal(res.resp.data, "options", 7);
	buf_release(&res.resp);
	grpc_server_free(kubelet);
	grpc_server_free(plugin);
	loop_free(K.l);
	free(ksock);
	free(K.plugin_sock);
	rm_tmpdir();
}

struct srv_thread {
	struct loop *l;
	struct loop_wake *stop;
	pthread_t th;
};

static void on_stop(struct loop_wake *w, void *ud)
{
	loop_exit(ud, 0);
}

static void *serve(void *arg)
{
	struct srv_thread *t = arg;

	(void)loop_run(t->l);
	return NULL;
}

static void test_client_sync(void **state)
{
	struct srv_thread t;
	struct grpc_server *s;
	enum grpc_status status = GRPC_STATUS_UNKNOWN;
	char *msg = NULL, *path, *missing;
	uint8_t *resp = NULL;
	size_t len = 0;

	make_tmpdir();
	path = tmp_path("sync.sock");
	missing = tmp_path("missing.sock");
	assert_int_equal(loop_new(&t.l), 0);
	assert_int_equal(loop_wake_new(t.l, on_stop, t.l, &t.stop), 0);
	s = server_new(t.l, NULL);
	assert_int_equal(grpc_server_listen(s, path), 0);
	assert_int_equal(pthread_create(&t.th, NULL, serve, &t), 0);

	assert_int_equal(grpc_client_call_sync(path, "/test.Svc/Echo", (const uint8_t *)"sync", 4,
					       NULL, &status, &msg, &resp, &len),
			 0);
	assert_int_equal(status, GRPC_STATUS_OK);
	assert_string_equal(msg, "");
	assert_int_equal(len, 4);
	assert_memory_equal(resp, "sync", 4);
	free(msg);
	free(resp);
	msg = NULL;
	assert_int_equal(grpc_client_call_sync(missing, "/test.Svc/Echo", NULL, 0, NULL, &status,
					       &msg, &resp, &len),
			 -ENOENT);
	assert_non_null(msg);
	assert_non_null(strstr(msg, missing));
	free(msg);

	loop_wake_signal(t.stop);
	assert_int_equal(pthread_join(t.th, NULL), 0);
	grpc_server_free(s);
	loop_wake_free(t.stop);
	loop_free(t.l);
	free(path);
	free(missing);
	rm_tmpdir();
}

/* --- allocation failures: fail the Nth allocation until a run needs none --- */

static void oh_echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	grpc_call_set_close_cb(call, on_close, NULL);
	(void)grpc_call_send(call, req, len);
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void oh_fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	(void)grpc_call_finish(call, GRPC_STATUS_NOT_FOUND, FAIL_TEXT);
}

static void oh_watch(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	grpc_call_set_close_cb(call, on_close, NULL);
	(void)grpc_call_send(call, (const uint8_t *)"first", 5);
}

static const struct grpc_method oom_methods[] = {
	{ "/test.Svc/Echo", false, oh_echo },
	{ "/test.Svc/Fail", false, oh_fail },
	{ "/test.Svc/Watch", true, oh_watch },
};

static bool contains(const struct buf *b, const char *needle)
{
	size_t n = strlen(needle);

	for (size_t i = 0; i + n <= b->len; i++)
		if (memcmp(b->data + i, needle, n) == 0)
			return true;
	return false;
}

typedef void oom_drive_fn(struct grpc_server *s, struct grpc_server_conn *c, const struct buf *in);
typedef void oom_check_fn(const struct buf *out);

/*
 * Runs @drive on a fresh server and memory connection, with the 0th, 1st, ... allocation
 * failing, until a run where none fails; that run's output goes to @check. Whatever failed,
 * the connection ends dead and nothing leaks. Returns the number of runs.
 */
static long oom_sweep(const struct grpc_method *m, size_t n, const struct buf *in,
		      oom_drive_fn *drive, oom_check_fn *check)
{
	long runs = 0;

	for (long fail = 0;; fail++) {
		struct grpc_server *s = NULL;
		struct grpc_server_conn *c = NULL;
		struct buf out = { 0 };
		long before = oom_failed;
		int r;

		memset(&T, 0, sizeof(T));
		oom_fail_at(fail);
		r = grpc_server_new(NULL, m, n, NULL, NULL, &s);
		if (r == 0)
			r = grpc_server_conn_new_mem(s, &out, &c);
		if (r == 0)
			drive(s, c, in);
		else
			assert_int_equal(r, -ENOMEM);
		oom_off();
		if (c)
			assert_true(grpc_server_conn_flush(c) < 0);
		grpc_server_conn_free(c);
		grpc_server_free(s);
		runs++;
		if (oom_failed == before) {
			check(&out);
			buf_release(&out);
			return runs;
		}
		buf_release(&out);
		assert_true(fail < 5000);
	}
}

static void oom_drive_session(struct grpc_server *s, struct grpc_server_conn *c,
			      const struct buf *in)
{
	/* In pieces, so that failures land between frames as well as inside. */
	for (size_t off = 0; off < in->len; off += 50)
		(void)grpc_server_conn_feed(c, in->data + off, MIN(50, in->len - off));
	(void)grpc_server_conn_flush(c);
	(void)grpc_server_conn_feed_eof(c);
}

static void oom_check_session(const struct buf *out)
{
	/* No allocation failed: the whole exchange happened. */
	assert_true(contains(out, "oom-echo-payload"));
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	assert_int_equal(T.closes[GRPC_STATUS_CANCELLED], 1);
}

static void test_oom_server_session(void **state)
{
	static uint8_t m1[32], m2[8], m3[8];
	struct buf in = { 0 };
	struct tc tc;

	/* What a client sends for three calls, captured once. */
	tc_offline(&tc);
	(void)tc_request(&tc, "/test.Svc/Echo", "5S", m1, frame(m1, 0, "oom-echo-payload", 16));
	(void)tc_request(&tc, "/test.Svc/Fail", NULL, m2, frame(m2, 0, "", 0));
	(void)tc_request(&tc, "/test.Svc/Watch", NULL, m3, frame(m3, 0, "", 0));
	tc_capture(&tc, &in);
	tc_release(&tc);
	assert_true(oom_sweep(oom_methods, ELEMENTSOF(oom_methods), &in, oom_drive_session,
			      oom_check_session) > 20);
	buf_release(&in);
}

/* A held call, shutdown, drain, finish, EOF: each handed-out call closed exactly once. */
static void oom_drive_states(struct grpc_server *s, struct grpc_server_conn *c,
			     const struct buf *in)
{
	(void)grpc_server_conn_feed(c, in->data, in->len);
	grpc_server_shutdown(s, USEC_INFINITY, NULL, NULL);
	(void)grpc_server_conn_flush(c);
	if (T.n_held == 1 && T.held[0])
		(void)grpc_call_finish(T.held[0], GRPC_STATUS_OK, NULL);
	(void)grpc_server_conn_flush(c);
	assert_true(grpc_server_conn_feed_eof(c) < 0);
	assert_int_equal(T.n_closes, (int)T.n_held);
}

static void oom_check_states(const struct buf *out)
{
	/* No allocation failed: drained, the call finished OK, closed after it. */
	assert_int_equal(T.n_held, 1);
	assert_int_equal(T.closes[GRPC_STATUS_OK], 1);
	assert_int_equal(find_goaway(out, 0), NGHTTP2_NO_ERROR);
}

/*
 * Allocation failures anywhere along a connection's life (open, a held call, shutdown and
 * drain, finish, EOF): no crash, no leak, the connection ends dead, and every call that
 * reached its handler gets exactly one close callback.
 */
static void test_oom_conn_states(void **state)
{
	static uint8_t m[8];
	struct buf in = { 0 };
	struct tc tc;

	tc_offline(&tc);
	(void)tc_request(&tc, "/test.Svc/Hold", NULL, m, frame(m, 0, "", 0));
	tc_capture(&tc, &in);
	tc_release(&tc);
	assert_true(oom_sweep(methods, ELEMENTSOF(methods), &in, oom_drive_states,
			      oom_check_states) > 10);
	buf_release(&in);
}

static void test_oom_client_call(void **state)
{
	const struct grpc_client_opts opts = { .timeout = 300 * USEC_PER_MSEC };
	struct grpc_server *s;
	struct loop *l;
	char *path;
	long runs = 0;

	make_tmpdir();
	path = tmp_path("oom.sock");
	assert_int_equal(loop_new(&l), 0);
	assert_int_equal(grpc_server_new(l, oom_methods, ELEMENTSOF(oom_methods), NULL, NULL, &s),
			 0);
	assert_int_equal(grpc_server_listen(s, path), 0);
	for (long fail = 0;; fail++) {
		struct grpc_client_call *cc;
		struct cres res = { 0 };
		long before = oom_failed;
		int r;

		oom_fail_at(fail);
		r = grpc_client_call_start(l, path, "/test.Svc/Echo", (const uint8_t *)"oom", 3,
					   &opts, cres_done, &res, &cc);
		if (r == 0)
			run_loop_until(l, &res.done, 1);
		oom_off();
		runs++;
		/* Let the server side finish whatever the failure left behind. */
		for (int i = 0; i < 5; i++)
			assert_int_equal(loop_run_once(l, USEC_PER_MSEC), 0);
		if (r < 0) {
			assert_int_equal(r, -ENOMEM);
		} else {
			assert_int_equal(res.done, 1);
			if (oom_failed == before) {
				assert_int_equal(res.r, 0);
				assert_int_equal(res.status, GRPC_STATUS_OK);
				assert_int_equal(res.resp.len, 3);
				buf_release(&res.resp);
				break;
			}
		}
		buf_release(&res.resp);
		assert_true(fail < 5000);
	}
	assert_true(runs > 20);
	grpc_server_free(s);
	loop_free(l);
	free(path);
	rm_tmpdir();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_status_from_errno, teardown),
		cmocka_unit_test_teardown(test_percent_coding, teardown),
		cmocka_unit_test_teardown(test_timeout, teardown),
		cmocka_unit_test_teardown(test_deframer, teardown),
		cmocka_unit_test_teardown(test_settings_at_accept, teardown),
		cmocka_unit_test_teardown(test_unary_framing, teardown),
		cmocka_unit_test_teardown(test_header_checks, teardown),
		cmocka_unit_test_teardown(test_trailers_only_encoded_message, teardown),
		cmocka_unit_test_teardown(test_message_limits, teardown),
		cmocka_unit_test_teardown(test_send_rules, teardown),
		cmocka_unit_test_teardown(test_streaming_pushed_later, teardown),
		cmocka_unit_test_teardown(test_cancel_runs_close_cb, teardown),
		cmocka_unit_test_teardown(test_deadline_exceeded, teardown),
		cmocka_unit_test_teardown(test_concurrent_streams, teardown),
		cmocka_unit_test_teardown(test_buffer_cap_input, teardown),
		cmocka_unit_test_teardown(test_buffer_cap_output, teardown),
		cmocka_unit_test_teardown(test_send_latest_peer_not_reading, teardown),
		cmocka_unit_test_teardown(test_protocol_errors_goaway, teardown),
		cmocka_unit_test_teardown(test_graceful_shutdown_mem, teardown),
		cmocka_unit_test_teardown(test_conn_end_closes_calls, teardown),
		cmocka_unit_test_teardown(test_conn_state_preface_timeout_mem, teardown),
		cmocka_unit_test_teardown(test_conn_state_drain_mem, teardown),
		cmocka_unit_test_teardown(test_client_goaway, teardown),
		cmocka_unit_test_teardown(test_socket_listen, teardown),
		cmocka_unit_test_teardown(test_socket_accept_emfile, teardown),
		cmocka_unit_test_teardown(test_socket_accept_pause_errors, teardown),
		cmocka_unit_test_teardown(test_socket_conn_cap, teardown),
		cmocka_unit_test_teardown(test_socket_evict_idle_longest, teardown),
		cmocka_unit_test_teardown(test_socket_preface_and_idle_timeouts, teardown),
		cmocka_unit_test_teardown(test_socket_peer_cred, teardown),
		cmocka_unit_test_teardown(test_socket_shutdown_drain, teardown),
		cmocka_unit_test_teardown(test_socket_overflow_peer_not_reading, teardown),
		cmocka_unit_test_teardown(test_client_against_server, teardown),
		cmocka_unit_test_teardown(test_client_errors, teardown),
		cmocka_unit_test_teardown(test_client_dial_back_same_loop, teardown),
		cmocka_unit_test_teardown(test_client_sync, teardown),
		cmocka_unit_test_teardown(test_client_hold, teardown),
		cmocka_unit_test_teardown(test_oom_server_session, teardown),
		cmocka_unit_test_teardown(test_oom_conn_states, teardown),
		cmocka_unit_test_teardown(test_oom_client_call, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
