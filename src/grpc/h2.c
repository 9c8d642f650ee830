#include "h2.h"

#include <assert.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MODULE "h2"
#include "log.h"

/* Compact a stream's output queue once this much has been consumed from its front. */
#define OUT_COMPACT_MIN ((size_t)64 * 1024)

struct h2_stream {
	struct h2_session *h;
	int32_t id;
	void *ud;
	struct buf out; /* queued body bytes; out.data[off..len) not yet handed to nghttp2 */
	size_t off;
	bool provider;	/* a data provider drains @out */
	bool deferred;	/* the provider returned NGHTTP2_ERR_DEFERRED */
	bool end;	/* h2_stream_end() was called */
	bool responded; /* server: response header block submitted */
	bool malformed; /* a header field broke RFC 9113 8.2.1: reset, input ignored */
	/*
	 * Shared blocks from h2_stream_write_latest(), after @out: @cur is being written (from
	 * @cur_off; @out is empty while it is set), @pend is the newest, not begun, replaceable.
	 */
	struct h2_blob *cur;
	size_t cur_off;
	struct h2_blob *pend;
	nghttp2_nv *trailers;
	size_t n_trailers;
	int64_t rst_after_end; /* < 0: none */
	struct h2_stream *prev, *next;
};

struct h2_session {
	nghttp2_session *s;
	bool server;
	const struct h2_callbacks *cb;
	void *ud;
	struct h2_stream *streams;
	size_t n_streams;
	size_t buffered;

	/* Input framing, tracked only to tell a clean EOF from a truncated frame. */
	size_t preface_left;
	uint8_t hdr[9];
	size_t hdr_have;
	size_t payload_left;

	bool failed;	  /* mem_recv failed; nghttp2 terminates the session */
	bool terminating; /* h2_session_terminate(): stop reading */
	bool terminated;  /* ... and its GOAWAY is sent: stop writing */
	bool eof;
	bool goaway_sent;
	uint32_t goaway_code;
	bool goaway_recv;
	bool preface_done; /* client magic and the first SETTINGS frame received */
};

static int errno_from_ng(int rv)
{
	return rv == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
}

static int cb_ret(int r)
{
	return r < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static struct h2_stream *stream_get(struct h2_session *h, int32_t id)
{
	struct h2_stream *st;

	if (id <= 0)
		return NULL;
	st = nghttp2_session_get_stream_user_data(h->s, id);
	if (st)
		return st;
	/* A client stream exists in nghttp2 only once its HEADERS went out. */
	for (st = h->streams; st; st = st->next)
		if (st->id == id)
			return st;
	return NULL;
}

static struct h2_stream *stream_new(struct h2_session *h)
{
	struct h2_stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->h = h;
	st->rst_after_end = -1;
	st->next = h->streams;
	if (h->streams)
		h->streams->prev = st;
	h->streams = st;
	h->n_streams++;
	return st;
}

static size_t stream_queued(const struct h2_stream *st)
{
	return st->out.len - st->off + (st->cur ? st->cur->len - st->cur_off : 0) +
	       (st->pend ? st->pend->len : 0);
}

/* @h is st->h, passed so that the list unlinking is plain to static analysers. */
static void stream_free(struct h2_session *h, struct h2_stream *st)
{
	assert(!st->prev == (h->streams == st));
	if (st->prev)
		st->prev->next = st->next;
	else
		h->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	h->n_streams--;
	h->buffered -= stream_queued(st);
	buf_release(&st->out);
	h2_blob_unref(st->cur);
	h2_blob_unref(st->pend);
	free(st->trailers);
	free(st);
}

/* --- nghttp2 callbacks --- */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st;
	int32_t id = frame->hd.stream_id;

	if (!h->server || frame->hd.type != NGHTTP2_HEADERS ||
	    frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	st = stream_new(h);
	if (!st)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
	st->id = id;
	if (nghttp2_session_set_stream_user_data(s, id, st) < 0) {
		stream_free(h, st);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (h->cb->stream_open)
		return cb_ret(h->cb->stream_open(h->ud, id));
	return 0;
}

/* RFC 9113 section 8.2.1: a field name or value with NUL, CR or LF makes a message malformed. */
static bool field_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] == 0 || p[i] == '\r' || p[i] == '\n')
			return false;
	return true;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st = stream_get(h, frame->hd.stream_id);

	if (!st || st->malformed || h->terminating)
		return 0;
	/*
	 * With HTTP messaging off, nghttp2 hands fields over unchecked: a malformed request is
	 * a stream error (RFC 9113 8.1.1), so the stream is reset and the rest of it ignored.
	 */
	if (!field_ok(name, namelen) || !field_ok(value, valuelen)) {
		log_debug("malformed header field, resetting stream", "stream=%d",
			  (int)frame->hd.stream_id);
		st->malformed = true;
		(void)nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id,
						NGHTTP2_PROTOCOL_ERROR);
		return 0;
	}
	if (!h->cb->header)
		return 0;
	return cb_ret(h->cb->header(h->ud, st->id, st->ud, (const char *)name, namelen,
				    (const char *)value, valuelen));
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st;
	int r = 0;

	if (h->terminating)
		return 0;
	switch (frame->hd.type) {
	case NGHTTP2_HEADERS: {
		enum h2_headers_kind kind;

		st = stream_get(h, frame->hd.stream_id);
		if (!st || st->malformed)
			return 0;
		if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
			kind = H2_HEADERS_REQUEST;
		else if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE)
			kind = H2_HEADERS_RESPONSE;
		else
			kind = H2_HEADERS_TRAILERS;
		if (h->cb->headers_end)
			r = h->cb->headers_end(h->ud, st->id, st->ud, kind);
		if (r < 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && h->cb->remote_end) {
			st = stream_get(h, frame->hd.stream_id);
			if (st)
				r = h->cb->remote_end(h->ud, st->id, st->ud);
		}
		break;
	}
	case NGHTTP2_DATA:
		if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) || !h->cb->remote_end)
			return 0;
		st = stream_get(h, frame->hd.stream_id);
		if (st && !st->malformed)
			r = h->cb->remote_end(h->ud, st->id, st->ud);
		break;
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
			h->preface_done = true;
		break;
	case NGHTTP2_GOAWAY:
		h->goaway_recv = true;
		if (h->cb->goaway)
			h->cb->goaway(h->ud, frame->goaway.last_stream_id,
				      frame->goaway.error_code);
		break;
	default:
		break;
	}
	return cb_ret(r);
}

static int on_data_chunk_recv(nghttp2_session *s, uint8_t flags, int32_t stream_id,
			      const uint8_t *data, size_t len, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st = stream_get(h, stream_id);

	if (!st || st->malformed || !h->cb->data || h->terminating)
		return 0;
	return cb_ret(h->cb->data(h->ud, stream_id, st->ud, data, len));
}

static int on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st = stream_get(h, stream_id);

	if (!st)
		return 0;
	(void)nghttp2_session_set_stream_user_data(s, stream_id, NULL);
	if (h->cb->stream_close)
		h->cb->stream_close(h->ud, stream_id, st->ud, error_code);
	stream_free(h, st);
	return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
			break;
		st = stream_get(h, frame->hd.stream_id);
		/* The stream is still open here: nghttp2 closes it after this callback. */
		if (st && st->rst_after_end >= 0 &&
		    nghttp2_session_get_stream_remote_close(s, st->id) == 0)
			(void)nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id,
							(uint32_t)st->rst_after_end);
		break;
	case NGHTTP2_GOAWAY:
		h->goaway_sent = true;
		h->goaway_code = frame->goaway.error_code;
		if (h->terminating)
			h->terminated = true;
		break;
	default:
		break;
	}
	return 0;
}

/* A request that never went out (GOAWAY arrived first, say) ends like a refused stream. */
static int on_frame_not_send(nghttp2_session *s, const nghttp2_frame *frame, int lib_error_code,
			     void *ud)
{
	struct h2_session *h = ud;
	struct h2_stream *st;

	if (h->server || frame->hd.type != NGHTTP2_HEADERS ||
	    frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	st = stream_get(h, frame->hd.stream_id);
	if (!st)
		return 0;
	/* nghttp2 may still close the stream it opened for these HEADERS: it must not find us. */
	(void)nghttp2_session_set_stream_user_data(s, st->id, NULL);
	if (h->cb->stream_close)
		h->cb->stream_close(h->ud, st->id, st->ud, NGHTTP2_REFUSED_STREAM);
	stream_free(h, st);
	return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
			 uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
	struct h2_stream *st = source->ptr;
	size_t n;

	if (st->off == st->out.len && (st->cur || st->pend)) {
		/* The newest block begins: it is being written, no longer replaceable. */
		if (!st->cur) {
			st->cur = st->pend;
			st->pend = NULL;
			st->cur_off = 0;
		}
		n = MIN(length, st->cur->len - st->cur_off);
		memcpy(buf, st->cur->data + st->cur_off, n);
		st->cur_off += n;
		st->h->buffered -= n;
		if (st->cur_off == st->cur->len)
			st->cur = h2_blob_unref(st->cur);
		return (ssize_t)n;
	}
	n = MIN(length, st->out.len - st->off);
	if (n > 0) {
		memcpy(buf, st->out.data + st->off, n);
		st->off += n;
		st->h->buffered -= n;
		if (st->off == st->out.len) {
			st->off = st->out.len = 0;
		} else if (st->off >= OUT_COMPACT_MIN && st->off > st->out.len / 2) {
			memmove(st->out.data, st->out.data + st->off, st->out.len - st->off);
			st->out.len -= st->off;
			st->off = 0;
		}
	}
	if (stream_queued(st) > 0)
		return (ssize_t)n;
	if (!st->end) {
		if (n > 0)
			return (ssize_t)n;
		st->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	if (st->n_trailers > 0) {
		*data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (nghttp2_submit_trailer(s, stream_id, st->trailers, st->n_trailers) < 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return (ssize_t)n;
}

/* --- input tracking --- */

static void track_input(struct h2_session *h, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t k;

		if (h->preface_left > 0) {
			k = MIN(n, h->preface_left);
			h->preface_left -= k;
		} else if (h->hdr_have < sizeof(h->hdr)) {
			k = MIN(n, sizeof(h->hdr) - h->hdr_have);
			memcpy(h->hdr + h->hdr_have, p, k);
			h->hdr_have += k;
			if (h->hdr_have == sizeof(h->hdr)) {
				h->payload_left = (size_t)h->hdr[0] << 16 | (size_t)h->hdr[1] << 8 |
						  h->hdr[2];
				if (h->payload_left == 0)
					h->hdr_have = 0;
			}
		} else {
			k = MIN(n, h->payload_left);
			h->payload_left -= k;
			if (h->payload_left == 0)
				h->hdr_have = 0;
		}
		p += k;
		n -= k;
	}
}

/* --- session --- */

int h2_session_new(bool server, const struct h2_settings *settings, const struct h2_callbacks *cb,
		   void *userdata, struct h2_session **ret)
{
	nghttp2_session_callbacks *cbs = NULL;
	nghttp2_option *opt = NULL;
	nghttp2_settings_entry iv[5];
	struct h2_session *h;
	size_t n_iv = 0;
	int rv, r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->server = server;
	h->cb = cb;
	h->ud = userdata;
	h->preface_left = server ? NGHTTP2_CLIENT_MAGIC_LEN : 0;

	rv = nghttp2_session_callbacks_new(&cbs);
	if (rv < 0)
		goto fail;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, on_frame_not_send);

	rv = nghttp2_option_new(&opt);
	if (rv < 0)
		goto fail;
	/* gRPC peers send :authority values (socket paths) that HTTP messaging rejects. */
	nghttp2_option_set_no_http_messaging(opt, 1);
	nghttp2_option_set_no_closed_streams(opt, 1);

	if (server)
		rv = nghttp2_session_server_new2(&h->s, cbs, h, opt);
	else
		rv = nghttp2_session_client_new2(&h->s, cbs, h, opt);
	if (rv < 0)
		goto fail;

	if (settings && settings->max_concurrent_streams)
		iv[n_iv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
						       settings->max_concurrent_streams };
	if (settings && settings->initial_window_size)
		iv[n_iv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
						       settings->initial_window_size };
	if (settings && settings->max_header_list_size)
		iv[n_iv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
						       settings->max_header_list_size };
	if (settings && settings->no_push)
		iv[n_iv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 };
	rv = nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, n_iv);
	if (rv < 0)
		goto fail;
	if (settings && settings->conn_window_size > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE) {
		rv = nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0,
							   (int32_t)settings->conn_window_size);
		if (rv < 0)
			goto fail;
	}
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cbs);
	*ret = h;
	return 0;
fail:
	r = errno_from_ng(rv);
	log_debug("nghttp2 session setup failed", "err=\"%s\"", nghttp2_strerror(rv));
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_session_del(h->s);
	free(h);
	return r;
}

struct h2_session *h2_session_free(struct h2_session *h)
{
	if (!h)
		return NULL;
	nghttp2_session_del(h->s);
	while (h->streams)
		stream_free(h, h->streams);
	free(h);
	return NULL;
}

int h2_session_recv(struct h2_session *h, const uint8_t *data, size_t len)
{
	ssize_t n;
	uint32_t code;

	if (h->failed)
		return -EPROTO;
	if (h->terminating || h->eof || len == 0)
		return 0;
	track_input(h, data, len);
	n = nghttp2_session_mem_recv(h->s, data, len);
	if (n >= 0)
		return 0;
	log_debug("nghttp2 input rejected", "err=\"%s\"", nghttp2_strerror((int)n));
	switch (n) {
	case NGHTTP2_ERR_BAD_CLIENT_MAGIC:
		code = NGHTTP2_PROTOCOL_ERROR;
		break;
	case NGHTTP2_ERR_FLOODED:
	case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
		code = NGHTTP2_ENHANCE_YOUR_CALM;
		break;
	default:
		code = NGHTTP2_INTERNAL_ERROR;
		break;
	}
	h->failed = true;
	/* The session can still send: queue GOAWAY so the peer learns why. */
	(void)nghttp2_session_terminate_session(h->s, code);
	return errno_from_ng((int)n);
}

int h2_session_recv_eof(struct h2_session *h)
{
	uint32_t code;

	if (h->eof)
		return 0;
	h->eof = true;
	if (h->failed || h->terminating)
		return 0;
	if (h->server && h->preface_left > 0 && h->preface_left < NGHTTP2_CLIENT_MAGIC_LEN)
		code = NGHTTP2_PROTOCOL_ERROR;
	else if (h->hdr_have > 0)
		code = NGHTTP2_FRAME_SIZE_ERROR;
	else
		return 0;
	h->failed = true;
	(void)nghttp2_session_terminate_session(h->s, code);
	return -EPROTO;
}

int h2_session_send(struct h2_session *h, struct buf *out, size_t max)
{
	while (!h->terminated && out->len < max) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(h->s, &p);
		int r;

		if (n < 0) {
			log_debug("nghttp2 output failed", "err=\"%s\"", nghttp2_strerror((int)n));
			return errno_from_ng((int)n);
		}
		if (n == 0)
			break;
		r = buf_append(out, p, (size_t)n);
		if (r < 0)
			return r;
	}
	return 0;
}

bool h2_session_want_write(const struct h2_session *h)
{
	return !h->terminated && nghttp2_session_want_write(h->s);
}

bool h2_session_want_read(const struct h2_session *h)
{
	return !h->terminating && !h->eof && nghttp2_session_want_read(h->s);
}

bool h2_session_done(const struct h2_session *h)
{
	if (h->terminated)
		return true;
	if (h->eof || h->terminating)
		return !nghttp2_session_want_write(h->s);
	return !nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s);
}

int h2_session_terminate(struct h2_session *h, uint32_t error_code, const char *debug)
{
	int rv;

	if (h->terminating || h->failed)
		return 0;
	rv = nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
				   nghttp2_session_get_last_proc_stream_id(h->s), error_code,
				   (const uint8_t *)debug, debug ? strlen(debug) : 0);
	if (rv < 0)
		return errno_from_ng(rv);
	h->terminating = true;
	return 0;
}

int h2_session_shutdown(struct h2_session *h)
{
	int rv;

	if (h->terminating || h->failed)
		return 0;
	rv = nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
				   nghttp2_session_get_last_proc_stream_id(h->s), NGHTTP2_NO_ERROR,
				   NULL, 0);
	return rv < 0 ? errno_from_ng(rv) : 0;
}

bool h2_session_goaway_sent(const struct h2_session *h, uint32_t *ret_code)
{
	if (h->goaway_sent && ret_code)
		*ret_code = h->goaway_code;
	return h->goaway_sent;
}

bool h2_session_preface_done(const struct h2_session *h)
{
	return h->preface_done;
}

bool h2_session_goaway_received(const struct h2_session *h)
{
	return h->goaway_recv;
}

size_t h2_session_buffered(const struct h2_session *h)
{
	return h->buffered;
}

size_t h2_session_streams(const struct h2_session *h)
{
	return h->n_streams;
}

uint32_t h2_session_peer_max_streams(const struct h2_session *h)
{
	return nghttp2_session_get_remote_settings(h->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

/* --- streams --- */

int h2_stream_set_userdata(struct h2_session *h, int32_t id, void *stream_ud)
{
	struct h2_stream *st = stream_get(h, id);

	if (!st)
		return -ENOENT;
	st->ud = stream_ud;
	return 0;
}

void *h2_stream_userdata(struct h2_session *h, int32_t id)
{
	struct h2_stream *st = stream_get(h, id);

	return st ? st->ud : NULL;
}

static int nv_convert(const struct h2_nv *nva, size_t n, nghttp2_nv **ret)
{
	nghttp2_nv *v = calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (nghttp2_nv){
			.name = (uint8_t *)(uintptr_t)nva[i].name,
			.value = (uint8_t *)(uintptr_t)nva[i].value,
			.namelen = strlen(nva[i].name),
			.valuelen = strlen(nva[i].value),
			.flags = NGHTTP2_NV_FLAG_NONE,
		};
	*ret = v;
	return 0;
}

/* A deep copy of @nva in one allocation, for trailers submitted later. */
static int nv_copy(const struct h2_nv *nva, size_t n, nghttp2_nv **ret)
{
	size_t size = n * sizeof(nghttp2_nv);
	nghttp2_nv *v;
	uint8_t *p;

	for (size_t i = 0; i < n; i++)
		size += strlen(nva[i].name) + strlen(nva[i].value) + 2;
	v = malloc(size ? size : 1);
	if (!v)
		return -ENOMEM;
	p = (uint8_t *)(v + n);
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(nva[i].name), vl = strlen(nva[i].value);

		v[i] = (nghttp2_nv){ .name = p, .namelen = nl, .flags = NGHTTP2_NV_FLAG_NONE };
		memcpy(p, nva[i].name, nl + 1);
		p += nl + 1;
		v[i].value = p;
		v[i].valuelen = vl;
		memcpy(p, nva[i].value, vl + 1);
		p += vl + 1;
	}
	*ret = v;
	return 0;
}

int h2_submit_request(struct h2_session *h, const struct h2_nv *nva, size_t n, void *stream_ud,
		      int32_t *ret_id)
{
	nghttp2_data_provider prd = { .read_callback = read_body };
	struct h2_stream *st;
	nghttp2_nv *v = NULL;
	int32_t id;
	int r;

	if (h->server)
		return -EINVAL;
	r = nv_convert(nva, n, &v);
	if (r < 0)
		return r;
	st = stream_new(h);
	if (!st) {
		free(v);
		return -ENOMEM;
	}
	st->ud = stream_ud;
	st->provider = true;
	prd.source.ptr = st;
	id = nghttp2_submit_request(h->s, NULL, v, n, &prd, st);
	free(v);
	if (id < 0) {
		stream_free(h, st);
		return errno_from_ng(id);
	}
	st->id = id;
	*ret_id = id;
	return 0;
}

int h2_submit_response(struct h2_session *h, int32_t id, const struct h2_nv *nva, size_t n,
		       bool end_stream)
{
	nghttp2_data_provider prd = { .read_callback = read_body };
	struct h2_stream *st = stream_get(h, id);
	nghttp2_nv *v = NULL;
	int rv, r;

	if (!st)
		return -ENOENT;
	if (st->responded)
		return -EALREADY;
	r = nv_convert(nva, n, &v);
	if (r < 0)
		return r;
	prd.source.ptr = st;
	rv = nghttp2_submit_response(h->s, id, v, n, end_stream ? NULL : &prd);
	free(v);
	if (rv < 0)
		return errno_from_ng(rv);
	st->responded = true;
	if (end_stream)
		st->end = true;
	else
		st->provider = true;
	return 0;
}

static void stream_resume(struct h2_stream *st)
{
	if (!st->deferred)
		return;
	st->deferred = false;
	(void)nghttp2_session_resume_data(st->h->s, st->id);
}

int h2_stream_write(struct h2_session *h, int32_t id, const void *data, size_t len)
{
	struct h2_stream *st = stream_get(h, id);
	int r;

	if (!st)
		return -ENOENT;
	if (st->end)
		return -EPIPE;
	/* Plain bytes go after the shared blocks: copy those into @out first (rare). */
	if (st->cur || st->pend) {
		size_t cl = st->cur ? st->cur->len - st->cur_off : 0;
		size_t pl = st->pend ? st->pend->len : 0;

		r = buf_reserve(&st->out, cl + pl + len);
		if (r < 0)
			return r;
		if (cl)
			memcpy(st->out.data + st->out.len, st->cur->data + st->cur_off, cl);
		if (pl)
			memcpy(st->out.data + st->out.len + cl, st->pend->data, pl);
		st->out.len += cl + pl;
		st->cur = h2_blob_unref(st->cur);
		st->pend = h2_blob_unref(st->pend);
	}
	r = buf_append(&st->out, data, len);
	if (r < 0)
		return r;
	h->buffered += len;
	stream_resume(st);
	return 0;
}

int h2_stream_write_latest(struct h2_session *h, int32_t id, struct h2_blob *b)
{
	struct h2_stream *st = stream_get(h, id);
	bool replaced;

	if (!st)
		return -ENOENT;
	if (st->end)
		return -EPIPE;
	replaced = st->pend != NULL;
	if (st->pend)
		h->buffered -= st->pend->len;
	h2_blob_unref(st->pend);
	st->pend = h2_blob_ref(b);
	h->buffered += b->len;
	stream_resume(st);
	return replaced ? 1 : 0;
}

size_t h2_stream_latest_pending(struct h2_session *h, int32_t id)
{
	struct h2_stream *st = stream_get(h, id);

	return st && st->pend ? st->pend->len : 0;
}

int h2_stream_end(struct h2_session *h, int32_t id, const struct h2_nv *trailers, size_t n)
{
	struct h2_stream *st = stream_get(h, id);

	if (!st)
		return -ENOENT;
	if (st->end)
		return -EPIPE;
	if (n > 0) {
		int r = nv_copy(trailers, n, &st->trailers);

		if (r < 0)
			return r;
		st->n_trailers = n;
	}
	st->end = true;
	stream_resume(st);
	return 0;
}

void h2_stream_discard(struct h2_session *h, int32_t id)
{
	struct h2_stream *st = stream_get(h, id);

	if (!st)
		return;
	h->buffered -= stream_queued(st);
	st->off = st->out.len = 0;
	st->cur = h2_blob_unref(st->cur);
	st->pend = h2_blob_unref(st->pend);
}

int h2_stream_reset(struct h2_session *h, int32_t id, uint32_t error_code)
{
	int rv = nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, id, error_code);

	return rv < 0 ? errno_from_ng(rv) : 0;
}

void h2_stream_set_reset_after_end(struct h2_session *h, int32_t id, uint32_t error_code)
{
	struct h2_stream *st = stream_get(h, id);

	if (st)
		st->rst_after_end = error_code;
}

int h2_blob_new(size_t len, struct h2_blob **ret)
{
	struct h2_blob *b;

	if (len > SIZE_MAX - sizeof(*b))
		return -ENOMEM;
	b = malloc(sizeof(*b) + len);
	if (!b)
		return -ENOMEM;
	b->refs = 1;
	b->len = len;
	*ret = b;
	return 0;
}

struct h2_blob *h2_blob_ref(struct h2_blob *b)
{
	if (b)
		b->refs++;
	return b;
}

struct h2_blob *h2_blob_unref(struct h2_blob *b)
{
	if (b && --b->refs == 0)
		free(b);
	return NULL;
}
