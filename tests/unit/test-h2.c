/* h2: the nghttp2 glue, driven at the byte level (client and server sessions in memory). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"
#include "oom.h"
#include "unit.h"

#define CLIENT_MAGIC "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

/* Frame bytes: an empty SETTINGS; a PING header announcing 20000 bytes; short PINGs. */
static const uint8_t settings_empty[9] = { 0, 0, 0, 0x04, 0, 0, 0, 0, 0 };
static const uint8_t ping_20000[9] = { 0, 0x4e, 0x20, 0x06, 0, 0, 0, 0, 0 };
static const uint8_t ping_4[13] = { 0, 0, 0x04, 0x06, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd' };
static const uint8_t ping_8_cut[12] = { 0, 0, 0x08, 0x06, 0, 0, 0, 0, 0, 'a', 'b', 'c' };

/* One side of a test connection: what its callbacks saw. */
struct side {
	struct h2_session *h;
	int32_t opened[8];
	size_t n_opened;
	char headers[2048]; /* "name=value\n" lines, all streams */
	int headers_end[3]; /* count per kind */
	struct buf data;
	int remote_ends;
	int closes;
	uint32_t close_code;
	void *close_ud;
	int goaways;
	uint32_t goaway_code;
	int fail_data; /* data callback returns this */
};

static int t_open(void *ud, int32_t id)
{
	struct side *s = ud;

	assert_true(s->n_opened < ELEMENTSOF(s->opened));
	s->opened[s->n_opened++] = id;
	assert_int_equal(h2_stream_set_userdata(s->h, id, s), 0);
	return 0;
}

static int t_header(void *ud, int32_t id, void *stream_ud, const char *name, size_t nl,
		    const char *value, size_t vl)
{
	struct side *s = ud;
	size_t n = strlen(s->headers);

	assert_int_equal(strlen(name), nl);
	assert_int_equal(strlen(value), vl);
	(void)snprintf(s->headers + n, sizeof(s->headers) - n, "%s=%s\n", name, value);
	return 0;
}

static int t_headers_end(void *ud, int32_t id, void *stream_ud, enum h2_headers_kind kind)
{
	struct side *s = ud;

	s->headers_end[kind]++;
	return 0;
}

static int t_data(void *ud, int32_t id, void *stream_ud, const uint8_t *data, size_t len)
{
	struct side *s = ud;

	if (s->fail_data)
		return s->fail_data;
	/* A failed append (allocation failure test) is a failed callback. */
	return buf_append(&s->data, data, len);
}

static int t_remote_end(void *ud, int32_t id, void *stream_ud)
{
	struct side *s = ud;

	s->remote_ends++;
	return 0;
}

static void t_close(void *ud, int32_t id, void *stream_ud, uint32_t code)
{
	struct side *s = ud;

	s->closes++;
	s->close_code = code;
	s->close_ud = stream_ud;
}

static void t_goaway(void *ud, int32_t last, uint32_t code)
{
	struct side *s = ud;

	s->goaways++;
	s->goaway_code = code;
}

static const struct h2_callbacks cbs = {
	.stream_open = t_open,
	.header = t_header,
	.headers_end = t_headers_end,
	.data = t_data,
	.remote_end = t_remote_end,
	.stream_close = t_close,
	.goaway = t_goaway,
};

struct pair {
	struct side srv, cli;
};

static void pair_init(struct pair *p, const struct h2_settings *srv_settings)
{
	const struct h2_settings cs = { .no_push = true };

	memset(p, 0, sizeof(*p));
	assert_int_equal(h2_session_new(true, srv_settings, &cbs, &p->srv, &p->srv.h), 0);
	assert_int_equal(h2_session_new(false, &cs, &cbs, &p->cli, &p->cli.h), 0);
}

static void pair_release(struct pair *p)
{
	h2_session_free(p->srv.h);
	h2_session_free(p->cli.h);
	buf_release(&p->srv.data);
	buf_release(&p->cli.data);
}

/* Moves bytes both ways until neither side has anything to say. */
static void pump(struct pair *p)
{
	for (int i = 0; i < 10000; i++) {
		struct buf a = { 0 }, b = { 0 };
		bool moved;

		assert_int_equal(h2_session_send(p->cli.h, &a, SIZE_MAX), 0);
		if (a.len)
			assert_int_equal(h2_session_recv(p->srv.h, a.data, a.len), 0);
		assert_int_equal(h2_session_send(p->srv.h, &b, SIZE_MAX), 0);
		if (b.len)
			assert_int_equal(h2_session_recv(p->cli.h, b.data, b.len), 0);
		moved = a.len || b.len;
		buf_release(&a);
		buf_release(&b);
		if (!moved)
			return;
	}
	fail_msg("pump did not settle");
}

static const struct h2_nv req_nva[] = {
	{ ":method", "POST" },
	{ ":scheme", "http" },
	{ ":path", "/pkg.Svc/M" },
	{ ":authority", "/var/lib/kubelet/device-plugins/kubelet.sock" },
	{ "content-type", "application/grpc" },
};

static void test_request_response_trailers(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" },
				      { "content-type", "application/grpc" } };
	const struct h2_nv trl[] = { { "grpc-status", "0" }, { "grpc-message", "fine" } };
	struct pair p;
	int32_t id;

	pair_init(&p, &(struct h2_settings){ .max_concurrent_streams = 100 });
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), &p, &id), 0);
	assert_int_equal(id, 1);
	/* The body goes out in pieces, as a caller writes it. */
	assert_int_equal(h2_stream_write(p.cli.h, id, "\0\0\0", 3), 0);
	pump(&p);
	assert_int_equal(h2_stream_write(p.cli.h, id, "\0\x02hi", 4), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	assert_int_equal(h2_stream_write(p.cli.h, id, "x", 1), -EPIPE);
	pump(&p);

	/* The socket-path authority passes: HTTP messaging is off. */
	assert_int_equal(p.srv.n_opened, 1);
	assert_non_null(
		strstr(p.srv.headers, ":authority=/var/lib/kubelet/device-plugins/kubelet.sock\n"));
	assert_int_equal(p.srv.headers_end[H2_HEADERS_REQUEST], 1);
	assert_int_equal(p.srv.remote_ends, 1);
	assert_int_equal(p.srv.data.len, 7);
	assert_memory_equal(p.srv.data.data, "\0\0\0\0\x02hi", 7);
	assert_true(h2_stream_userdata(p.srv.h, id) == &p.srv);

	assert_int_equal(h2_submit_response(p.srv.h, id, resp, ELEMENTSOF(resp), false), 0);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, ELEMENTSOF(resp), false), -EALREADY);
	assert_int_equal(h2_stream_write(p.srv.h, id, "\0\0\0\0\0", 5), 0);
	assert_int_equal(h2_session_buffered(p.srv.h), 5);
	pump(&p);
	assert_int_equal(h2_session_buffered(p.srv.h), 0);
	assert_int_equal(p.cli.headers_end[H2_HEADERS_RESPONSE], 1);
	assert_int_equal(p.cli.data.len, 5);
	assert_int_equal(p.cli.remote_ends, 0);
	assert_int_equal(h2_stream_end(p.srv.h, id, trl, ELEMENTSOF(trl)), 0);
	pump(&p);
	assert_int_equal(p.cli.headers_end[H2_HEADERS_TRAILERS], 1);
	assert_int_equal(p.cli.remote_ends, 1);
	assert_non_null(strstr(p.cli.headers, "grpc-status=0\ngrpc-message=fine\n"));
	assert_int_equal(p.srv.closes, 1);
	assert_int_equal(p.srv.close_code, H2_NO_ERROR);
	assert_true(p.srv.close_ud == &p.srv);
	assert_int_equal(p.cli.closes, 1);
	assert_int_equal(h2_session_streams(p.srv.h), 0);
	assert_int_equal(h2_session_peer_max_streams(p.cli.h), 100);
	pair_release(&p);
}

static void test_trailers_only_and_reset_after_end(void **state)
{
	const struct h2_nv resp[] = { { ":status", "415" },
				      { "content-type", "application/grpc" },
				      { "grpc-status", "3" } };
	struct pair p;
	int32_t id;

	pair_init(&p, NULL);
	/* The request is not finished when the server answers: RST(NO_ERROR) follows. */
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	pump(&p);
	assert_int_equal(p.srv.n_opened, 1);
	h2_stream_set_reset_after_end(p.srv.h, id, H2_NO_ERROR);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, ELEMENTSOF(resp), true), 0);
	assert_int_equal(h2_stream_write(p.srv.h, id, "x", 1), -EPIPE);
	pump(&p);
	assert_int_equal(p.cli.headers_end[H2_HEADERS_RESPONSE], 1);
	assert_int_equal(p.cli.remote_ends, 1);
	assert_non_null(strstr(p.cli.headers, ":status=415\n"));
	assert_int_equal(p.cli.closes, 1);
	assert_int_equal(p.cli.close_code, H2_NO_ERROR);
	assert_int_equal(p.srv.closes, 1);
	assert_int_equal(h2_session_streams(p.srv.h), 0);
	assert_int_equal(h2_session_streams(p.cli.h), 0);
	pair_release(&p);
}

static void test_deferred_stream_and_flow_control(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	const size_t big = (size_t)3 * 1024 * 1024;
	uint8_t *blob = malloc(big);
	struct pair p;
	int32_t id;

	assert_non_null(blob);
	for (size_t i = 0; i < big; i++)
		blob[i] = (uint8_t)(i * 7);
	pair_init(&p, &(struct h2_settings){ .initial_window_size = 1 << 20 });
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(p.srv.remote_ends, 1);
	/* Nothing to send yet: the provider defers, and the stream stays open. */
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, 1, false), 0);
	pump(&p);
	assert_false(h2_session_want_write(p.srv.h));
	assert_int_equal(p.cli.closes, 0);
	/* Pushed later: resumed, and 3 MiB cross the 64 KiB client window via WINDOW_UPDATEs. */
	assert_int_equal(h2_stream_write(p.srv.h, id, blob, big), 0);
	assert_true(h2_session_want_write(p.srv.h));
	pump(&p);
	assert_int_equal(p.cli.data.len, big);
	assert_memory_equal(p.cli.data.data, blob, big);
	assert_int_equal(h2_stream_write(p.srv.h, id, "tail", 4), 0);
	assert_int_equal(h2_stream_end(p.srv.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(p.cli.data.len, big + 4);
	assert_int_equal(p.cli.remote_ends, 1);
	assert_int_equal(p.cli.closes, 1);
	free(blob);
	pair_release(&p);
}

static void test_discard_and_reset(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	struct pair p;
	int32_t id;

	pair_init(&p, NULL);
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, 1, false), 0);
	assert_int_equal(h2_stream_write(p.srv.h, id, "dropped", 7), 0);
	h2_stream_discard(p.srv.h, id);
	assert_int_equal(h2_session_buffered(p.srv.h), 0);
	assert_int_equal(h2_stream_reset(p.srv.h, id, H2_CANCEL), 0);
	pump(&p);
	assert_int_equal(p.cli.data.len, 0);
	assert_int_equal(p.cli.closes, 1);
	assert_int_equal(p.cli.close_code, H2_CANCEL);
	assert_int_equal(p.srv.closes, 1);
	assert_int_equal(p.srv.close_code, H2_CANCEL);
	assert_int_equal(h2_stream_write(p.srv.h, id, "x", 1), -ENOENT);
	assert_int_equal(h2_stream_set_userdata(p.srv.h, id, NULL), -ENOENT);
	pair_release(&p);
}

/* Parses the frames in @b and returns the error code of the first GOAWAY, or -1. */
static int64_t find_goaway(const struct buf *b, size_t skip)
{
	size_t off = skip;

	while (off + 9 <= b->len) {
		const uint8_t *f = b->data + off;
		size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];

		if (off + 9 + len > b->len)
			break;
		if (f[3] == 0x7 && len >= 8)
			return (int64_t)((uint32_t)f[13] << 24 | (uint32_t)f[14] << 16 |
					 (uint32_t)f[15] << 8 | f[16]);
		off += 9 + len;
	}
	return -1;
}

static struct h2_session *server_with_settings_sent(struct side *s, struct buf *out)
{
	memset(s, 0, sizeof(*s));
	assert_int_equal(h2_session_new(true, NULL, &cbs, s, &s->h), 0);
	assert_int_equal(h2_session_send(s->h, out, SIZE_MAX), 0);
	/* The first frame out is SETTINGS (type 4) on stream 0. */
	assert_true(out->len >= 9);
	assert_int_equal(out->data[3], 0x4);
	return s->h;
}

/* Parses the frames in @b and returns the error code of the first RST_STREAM on @id, or -1. */
static int64_t find_rst(const struct buf *b, int32_t id)
{
	size_t off = 0;

	while (off + 9 <= b->len) {
		const uint8_t *f = b->data + off;
		size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
		int32_t sid = (int32_t)((uint32_t)(f[5] & 0x7f) << 24 | (uint32_t)f[6] << 16 |
					(uint32_t)f[7] << 8 | f[8]);

		if (off + 9 + len > b->len)
			break;
		if (f[3] == 0x3 && len == 4 && sid == id)
			return (int64_t)((uint32_t)f[9] << 24 | (uint32_t)f[10] << 16 |
					 (uint32_t)f[11] << 8 | f[12]);
		off += 9 + len;
	}
	return -1;
}

/*
 * A request HEADERS frame on stream 1 (END_HEADERS | END_STREAM) whose block is :method POST,
 * :scheme http, :path / (static table) and one literal field without indexing, written by hand
 * so that any byte can go in: HPACK encoders never check.
 */
static size_t raw_headers(uint8_t *out, const char *name, size_t nl, const char *value, size_t vl)
{
	size_t n = 9;

	out[n++] = 0x83;
	out[n++] = 0x86;
	out[n++] = 0x84;
	out[n++] = 0x00;
	out[n++] = (uint8_t)nl;
	memcpy(out + n, name, nl);
	n += nl;
	out[n++] = (uint8_t)vl;
	memcpy(out + n, value, vl);
	n += vl;
	out[0] = 0;
	out[1] = 0;
	out[2] = (uint8_t)(n - 9);
	out[3] = 0x1;
	out[4] = 0x5;
	out[5] = out[6] = out[7] = 0;
	out[8] = 1;
	return n;
}

static void test_malformed_header_field(void **state)
{
	static const struct {
		const char *name, *value;
		size_t nl, vl;
	} cases[] = {
		{ "x-ok", "a\0b", 4, 3 }, { "x-ok", "a\rb", 4, 3 }, { "x-ok", "a\nb", 4, 3 },
		{ "x\0ok", "ab", 4, 2 },  { "x\rok", "ab", 4, 2 },  { "x\nok", "ab", 4, 2 },
		{ "x-ok", "ab\0", 4, 3 },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		uint8_t frame[64];
		struct buf out = { 0 };
		struct side s;
		size_t n =
			raw_headers(frame, cases[i].name, cases[i].nl, cases[i].value, cases[i].vl);

		server_with_settings_sent(&s, &out);
		out.len = 0;
		assert_int_equal(h2_session_recv(s.h, (const uint8_t *)CLIENT_MAGIC,
						 sizeof(CLIENT_MAGIC) - 1),
				 0);
		assert_int_equal(h2_session_recv(s.h, settings_empty, sizeof(settings_empty)), 0);
		assert_true(h2_session_preface_done(s.h));
		assert_int_equal(h2_session_recv(s.h, frame, n), 0);
		assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
		/* RFC 9113 8.2.1: malformed, a stream error; the connection lives on. */
		assert_int_equal(find_rst(&out, 1), H2_PROTOCOL_ERROR);
		assert_int_equal(find_goaway(&out, 0), -1);
		assert_int_equal(s.headers_end[H2_HEADERS_REQUEST], 0);
		assert_int_equal(s.remote_ends, 0);
		assert_null(strstr(s.headers, "ok"));
		assert_int_equal(s.closes, 1);
		assert_int_equal(s.close_code, H2_PROTOCOL_ERROR);
		assert_false(h2_session_done(s.h));
		buf_release(&out);
		h2_session_free(s.h);
	}
}

static void test_preface_done(void **state)
{
	struct buf out = { 0 };
	struct side s;

	server_with_settings_sent(&s, &out);
	assert_false(h2_session_preface_done(s.h));
	assert_int_equal(h2_session_recv(s.h, (const uint8_t *)CLIENT_MAGIC, 10), 0);
	assert_false(h2_session_preface_done(s.h));
	assert_int_equal(h2_session_recv(s.h, (const uint8_t *)CLIENT_MAGIC + 10,
					 sizeof(CLIENT_MAGIC) - 1 - 10),
			 0);
	assert_false(h2_session_preface_done(s.h));
	assert_int_equal(h2_session_recv(s.h, settings_empty, sizeof(settings_empty)), 0);
	assert_true(h2_session_preface_done(s.h));
	buf_release(&out);
	h2_session_free(s.h);
}

/* Queues @head then @data as one shared block (our reference dropped at once). */
static int write_latest(struct h2_session *h, int32_t id, const char *head, size_t head_len,
			const void *data, size_t len)
{
	struct h2_blob *b;
	int r;

	assert_int_equal(h2_blob_new(head_len + len, &b), 0);
	memcpy(b->data, head, head_len);
	if (len)
		memcpy(b->data + head_len, data, len);
	r = h2_stream_write_latest(h, id, b);
	h2_blob_unref(b);
	return r;
}

static void test_write_latest(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	const size_t big = (size_t)200 * 1024;
	uint8_t *blob = malloc(big);
	struct buf held = { 0 };
	struct pair p;
	int32_t id;

	assert_non_null(blob);
	memset(blob, 'b', big);
	pair_init(&p, NULL);
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, 1, false), 0);
	/* Three states queued before anything is sent: only the last is kept. */
	assert_int_equal(write_latest(p.srv.h, id, "1", 1, "aaa", 3), 0);
	assert_int_equal(h2_stream_latest_pending(p.srv.h, id), 4);
	assert_int_equal(write_latest(p.srv.h, id, "2", 1, "bb", 2), 1);
	assert_int_equal(write_latest(p.srv.h, id, "3", 1, "c", 1), 1);
	assert_int_equal(h2_session_buffered(p.srv.h), 2);
	pump(&p);
	assert_int_equal(p.cli.data.len, 2);
	assert_memory_equal(p.cli.data.data, "3c", 2);
	assert_int_equal(h2_stream_latest_pending(p.srv.h, id), 0);

	/*
	 * A peer that does not read: the client's 64 KiB window stops a large state part-way
	 * (its bytes are held here, not delivered). That one is being written and stays; of
	 * the ones queued after it only the newest is kept.
	 */
	assert_int_equal(write_latest(p.srv.h, id, "4", 1, blob, big), 0);
	assert_int_equal(h2_session_send(p.srv.h, &held, SIZE_MAX), 0);
	assert_true(held.len > 0 && held.len < big);
	assert_int_equal(h2_stream_latest_pending(p.srv.h, id), 0);
	assert_int_equal(write_latest(p.srv.h, id, "5", 1, blob, big), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(write_latest(p.srv.h, id, "6", 1, blob, big), 1);
	assert_true(h2_session_buffered(p.srv.h) <= 2 * (big + 1));
	/* A plain write after a state ends the replaceable unit. */
	assert_int_equal(h2_stream_write(p.srv.h, id, "7", 1), 0);
	assert_int_equal(h2_stream_latest_pending(p.srv.h, id), 0);
	assert_int_equal(write_latest(p.srv.h, id, "8", 1, "x", 1), 0);
	{
		/* One block, queued twice: shared, not copied; the replaced one is let go. */
		struct h2_blob *b;

		assert_int_equal(h2_blob_new(2, &b), 0);
		memcpy(b->data, "8x", 2);
		assert_int_equal(h2_stream_write_latest(p.srv.h, id, b), 1);
		assert_int_equal(b->refs, 2);
		assert_int_equal(write_latest(p.srv.h, id, "8", 1, "x", 1), 1);
		assert_int_equal(b->refs, 1);
		h2_blob_unref(b);
	}
	assert_int_equal(h2_stream_end(p.srv.h, id, NULL, 0), 0);
	assert_int_equal(write_latest(p.srv.h, id, "9", 1, "x", 1), -EPIPE);
	/* The client reads again: 4 whole, then 6, 7 and 8. */
	assert_int_equal(h2_session_recv(p.cli.h, held.data, held.len), 0);
	pump(&p);
	assert_int_equal(p.cli.remote_ends, 1);
	assert_int_equal(p.cli.data.len, 2 + 2 * (1 + big) + 1 + 2);
	assert_memory_equal(p.cli.data.data + 2, "4", 1);
	assert_memory_equal(p.cli.data.data + 3 + big, "6", 1);
	assert_memory_equal(p.cli.data.data + 4 + 2 * big, "78x", 3);
	buf_release(&held);
	pair_release(&p);
	free(blob);
}

static void test_garbage_preface(void **state)
{
	static const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct buf out = { 0 };
	struct side s;
	size_t settings_len;

	server_with_settings_sent(&s, &out);
	settings_len = out.len;
	assert_int_equal(h2_session_recv(s.h, (const uint8_t *)garbage, sizeof(garbage) - 1),
			 -EPROTO);
	assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&out, settings_len), H2_PROTOCOL_ERROR);
	assert_true(h2_session_done(s.h));
	uint32_t code = 99;
	assert_true(h2_session_goaway_sent(s.h, &code));
	assert_int_equal(code, H2_PROTOCOL_ERROR);
	/* Later input is refused without touching nghttp2 again. */
	assert_int_equal(h2_session_recv(s.h, (const uint8_t *)"x", 1), -EPROTO);
	buf_release(&out);
	h2_session_free(s.h);
}

static void test_oversized_frame(void **state)
{
	/* Preface, empty SETTINGS, then a PING header announcing 20000 bytes (> 16384). */
	uint8_t in[24 + 9 + 9] = CLIENT_MAGIC;
	struct buf out = { 0 };
	struct side s;
	size_t off;

	memcpy(in + 24, settings_empty, sizeof(settings_empty));
	memcpy(in + 33, ping_20000, sizeof(ping_20000));
	server_with_settings_sent(&s, &out);
	off = out.len;
	assert_int_equal(h2_session_recv(s.h, in, sizeof(in)), 0);
	assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&out, off), H2_FRAME_SIZE_ERROR);
	assert_true(h2_session_done(s.h));
	buf_release(&out);
	h2_session_free(s.h);
}

static void test_short_ping_frame(void **state)
{
	/* A PING must carry 8 bytes: one with 4 is a FRAME_SIZE_ERROR. */
	uint8_t in[24 + 9 + 9 + 4] = CLIENT_MAGIC;
	struct buf out = { 0 };
	struct side s;
	size_t off;

	memcpy(in + 24, settings_empty, sizeof(settings_empty));
	memcpy(in + 33, ping_4, sizeof(ping_4));
	server_with_settings_sent(&s, &out);
	off = out.len;
	assert_int_equal(h2_session_recv(s.h, in, sizeof(in)), 0);
	assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&out, off), H2_FRAME_SIZE_ERROR);
	buf_release(&out);
	h2_session_free(s.h);
}

static void test_eof_truncation(void **state)
{
	uint8_t in[24 + 9 + 9 + 3] = CLIENT_MAGIC;
	struct buf out = { 0 };
	struct side s;
	size_t off;

	/* EOF right after a complete frame is clean. */
	memcpy(in + 24, settings_empty, sizeof(settings_empty));
	server_with_settings_sent(&s, &out);
	assert_int_equal(h2_session_recv(s.h, in, 33), 0);
	assert_int_equal(h2_session_recv_eof(s.h), 0);
	assert_false(h2_session_want_read(s.h));
	h2_session_free(s.h);
	buf_release(&out);

	/* EOF inside a frame: GOAWAY(FRAME_SIZE_ERROR). */
	memcpy(in + 33, ping_8_cut, sizeof(ping_8_cut));
	server_with_settings_sent(&s, &out);
	off = out.len;
	assert_int_equal(h2_session_recv(s.h, in, sizeof(in)), 0);
	assert_int_equal(h2_session_recv_eof(s.h), -EPROTO);
	assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&out, off), H2_FRAME_SIZE_ERROR);
	h2_session_free(s.h);
	buf_release(&out);

	/* EOF inside the preface: GOAWAY(PROTOCOL_ERROR). */
	server_with_settings_sent(&s, &out);
	off = out.len;
	assert_int_equal(h2_session_recv(s.h, in, 10), 0);
	assert_int_equal(h2_session_recv_eof(s.h), -EPROTO);
	assert_int_equal(h2_session_send(s.h, &out, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&out, off), H2_PROTOCOL_ERROR);
	h2_session_free(s.h);
	buf_release(&out);

	/* EOF before any byte: a connection that said nothing is not an error. */
	server_with_settings_sent(&s, &out);
	assert_int_equal(h2_session_recv_eof(s.h), 0);
	h2_session_free(s.h);
	buf_release(&out);
}

static void test_callback_failure_is_fatal(void **state)
{
	struct pair p;
	struct buf a = { 0 }, b = { 0 };
	int32_t id;

	pair_init(&p, NULL);
	p.srv.fail_data = -EIO;
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_write(p.cli.h, id, "abc", 3), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	assert_int_equal(h2_session_send(p.cli.h, &a, SIZE_MAX), 0);
	/* A negative errno from a callback never reaches nghttp2 as such: it becomes fatal. */
	assert_int_equal(h2_session_recv(p.srv.h, a.data, a.len), -EPROTO);
	assert_int_equal(h2_session_send(p.srv.h, &b, SIZE_MAX), 0);
	assert_int_equal(find_goaway(&b, 0), H2_INTERNAL_ERROR);
	assert_int_equal(h2_session_recv(p.cli.h, b.data, b.len), 0);
	assert_int_equal(p.cli.goaways, 1);
	assert_int_equal(p.cli.goaway_code, H2_INTERNAL_ERROR);
	buf_release(&a);
	buf_release(&b);
	pair_release(&p);
}

static void test_terminate(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	struct pair p;
	int32_t id;
	uint32_t code;

	pair_init(&p, NULL);
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, 1, false), 0);
	assert_int_equal(h2_session_terminate(p.srv.h, H2_ENHANCE_YOUR_CALM, "calm down"), 0);
	assert_false(h2_session_want_read(p.srv.h));
	/* Data queued after the GOAWAY never goes out. */
	assert_int_equal(h2_stream_write(p.srv.h, id, "late", 4), 0);
	pump(&p);
	assert_true(h2_session_done(p.srv.h));
	assert_true(h2_session_goaway_sent(p.srv.h, &code));
	assert_int_equal(code, H2_ENHANCE_YOUR_CALM);
	assert_int_equal(p.cli.goaways, 1);
	assert_int_equal(p.cli.goaway_code, H2_ENHANCE_YOUR_CALM);
	assert_int_equal(p.cli.data.len, 0);
	assert_true(h2_session_goaway_received(p.cli.h));
	pair_release(&p);
}

static void test_graceful_shutdown(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	struct pair p;
	int32_t id;

	pair_init(&p, NULL);
	assert_int_equal(h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
	assert_int_equal(h2_stream_end(p.cli.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(h2_submit_response(p.srv.h, id, resp, 1, false), 0);
	assert_int_equal(h2_session_shutdown(p.srv.h), 0);
	pump(&p);
	assert_int_equal(p.cli.goaways, 1);
	assert_int_equal(p.cli.goaway_code, H2_NO_ERROR);
	/* The open stream goes on after GOAWAY; the session ends once it closes. */
	assert_false(h2_session_done(p.srv.h));
	assert_int_equal(h2_stream_write(p.srv.h, id, "more", 4), 0);
	assert_int_equal(h2_stream_end(p.srv.h, id, NULL, 0), 0);
	pump(&p);
	assert_int_equal(p.cli.data.len, 4);
	assert_true(h2_session_done(p.srv.h));
	pair_release(&p);
}

static void test_free_with_open_streams(void **state)
{
	struct pair p;
	int32_t id;

	/* No callback runs and nothing leaks (valgrind checks this). */
	pair_init(&p, NULL);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
			h2_submit_request(p.cli.h, req_nva, ELEMENTSOF(req_nva), NULL, &id), 0);
		assert_int_equal(h2_stream_write(p.cli.h, id, "queued", 6), 0);
	}
	pump(&p);
	assert_int_equal(h2_session_streams(p.srv.h), 3);
	assert_int_equal(h2_session_streams(p.cli.h), 3);
	assert_int_equal(h2_stream_end(p.srv.h, p.srv.opened[0], NULL, 0), 0);
	pair_release(&p);
	assert_int_equal(p.srv.closes, 0);
}

/* Fail the Nth allocation (ours and nghttp2's, which is linked statically) until none fails. */
static void test_oom(void **state)
{
	const struct h2_nv resp[] = { { ":status", "200" } };
	const struct h2_nv trl[] = { { "grpc-status", "0" } };
	long runs = 0;

	for (long fail = 0;; fail++) {
		struct h2_session *srv = NULL, *cli = NULL;
		struct side ss = { 0 }, cs = { 0 };
		long before = oom_failed;
		bool complete = false;
		int32_t id = 0;

		oom_fail_at(fail);
		if (h2_session_new(true, NULL, &cbs, &ss, &srv) == 0 &&
		    h2_session_new(false, NULL, &cbs, &cs, &cli) == 0) {
			ss.h = srv;
			cs.h = cli;
			if (h2_submit_request(cli, req_nva, ELEMENTSOF(req_nva), NULL, &id) == 0) {
				(void)h2_stream_write(cli, id, "\0\0\0\0\x02hi", 7);
				(void)h2_stream_end(cli, id, NULL, 0);
			}
			for (int round = 0; round < 8; round++) {
				struct buf a = { 0 }, b = { 0 };

				if (h2_session_send(cli, &a, SIZE_MAX) == 0 && a.len)
					(void)h2_session_recv(srv, a.data, a.len);
				if (ss.remote_ends == 1 && round == 1 && ss.n_opened == 1) {
					int32_t sid = ss.opened[0];

					if (h2_submit_response(srv, sid, resp, 1, false) == 0 &&
					    h2_stream_write(srv, sid, "\0\0\0\0\0", 5) == 0)
						(void)h2_stream_end(srv, sid, trl, 1);
				}
				if (h2_session_send(srv, &b, SIZE_MAX) == 0 && b.len)
					(void)h2_session_recv(cli, b.data, b.len);
				buf_release(&a);
				buf_release(&b);
			}
			complete = cs.remote_ends == 1 && cs.data.len == 5;
		}
		oom_off();
		h2_session_free(srv);
		h2_session_free(cli);
		buf_release(&ss.data);
		buf_release(&cs.data);
		runs++;
		if (oom_failed == before) {
			assert_true(complete);
			break;
		}
		assert_true(fail < 5000);
	}
	assert_true(runs > 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_response_trailers),
		cmocka_unit_test(test_trailers_only_and_reset_after_end),
		cmocka_unit_test(test_deferred_stream_and_flow_control),
		cmocka_unit_test(test_discard_and_reset),
		cmocka_unit_test(test_garbage_preface),
		cmocka_unit_test(test_malformed_header_field),
		cmocka_unit_test(test_preface_done),
		cmocka_unit_test(test_write_latest),
		cmocka_unit_test(test_oversized_frame),
		cmocka_unit_test(test_short_ping_frame),
		cmocka_unit_test(test_eof_truncation),
		cmocka_unit_test(test_callback_failure_is_fatal),
		cmocka_unit_test(test_terminate),
		cmocka_unit_test(test_graceful_shutdown),
		cmocka_unit_test(test_free_with_open_streams),
		cmocka_unit_test(test_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
