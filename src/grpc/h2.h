#pragma once

/*
 * h2: the nghttp2 session glue. Bytes go in through h2_session_recv() and come out through
 * h2_session_send(); there are no sockets in this API, so a whole session can be driven from
 * memory (unit tests, fuzzers).
 *
 * One struct h2_session per HTTP/2 connection, in the server or the client role. Streams are
 * named by their HTTP/2 id. Each stream owns an output queue drained by an nghttp2 data
 * provider: callers append bytes with h2_stream_write() and end the stream with
 * h2_stream_end(), and never see nghttp2's NGHTTP2_ERR_DEFERRED / resume_data dance.
 *
 * The session never validates HTTP semantics (nghttp2's HTTP messaging is off): the caller
 * checks :method, :path, content-type and friends itself. One wire rule is checked here, since
 * nghttp2 skips it along with HTTP messaging: a header field whose name or value holds NUL, CR
 * or LF (RFC 9113 section 8.2.1) resets its stream with RST_STREAM(PROTOCOL_ERROR); the header
 * callback never sees that field, and no further callback but stream_close runs for the stream.
 *
 * Errors: functions return 0 or a negative errno; nghttp2's NGHTTP2_ERR_NOMEM becomes
 * -ENOMEM and every other nghttp2 error -EPROTO. Callbacks return 0 or a negative errno; a
 * negative return is fatal to the connection (nghttp2 sees NGHTTP2_ERR_CALLBACK_FAILURE and
 * the session is terminated with GOAWAY(INTERNAL_ERROR)). To refuse one stream, a callback
 * calls h2_stream_reset() and returns 0.
 *
 * Callbacks run inside h2_session_recv() and h2_session_send(). They may call any h2_stream_*
 * or h2_submit_* function, but never h2_session_free().
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct h2_session;

/* HTTP/2 error codes (RFC 9113 section 7). */
enum h2_error {
	H2_NO_ERROR = 0x0,
	H2_PROTOCOL_ERROR = 0x1,
	H2_INTERNAL_ERROR = 0x2,
	H2_FLOW_CONTROL_ERROR = 0x3,
	H2_SETTINGS_TIMEOUT = 0x4,
	H2_STREAM_CLOSED = 0x5,
	H2_FRAME_SIZE_ERROR = 0x6,
	H2_REFUSED_STREAM = 0x7,
	H2_CANCEL = 0x8,
	H2_COMPRESSION_ERROR = 0x9,
	H2_CONNECT_ERROR = 0xa,
	H2_ENHANCE_YOUR_CALM = 0xb,
	H2_INADEQUATE_SECURITY = 0xc,
	H2_HTTP_1_1_REQUIRED = 0xd,
};

/* A header field; both strings NUL-terminated. Submit functions copy them. */
struct h2_nv {
	const char *name;
	const char *value;
};

enum h2_headers_kind {
	H2_HEADERS_REQUEST,  /* server: the request header block */
	H2_HEADERS_RESPONSE, /* client: the (first) response header block */
	H2_HEADERS_TRAILERS, /* any later header block */
};

struct h2_callbacks {
	/* Server role: the peer opens stream @id. Attach state with h2_stream_set_userdata(). */
	int (*stream_open)(void *userdata, int32_t id);
	/* One header field of the block being received. @name and @value are NUL-terminated. */
	int (*header)(void *userdata, int32_t id, void *stream_ud, const char *name,
		      size_t name_len, const char *value, size_t value_len);
	/* The header block is complete. */
	int (*headers_end)(void *userdata, int32_t id, void *stream_ud, enum h2_headers_kind kind);
	/* A piece of DATA payload (flow control is handled: the window is returned at once). */
	int (*data)(void *userdata, int32_t id, void *stream_ud, const uint8_t *data, size_t len);
	/* The peer half-closed the stream (END_STREAM on HEADERS or DATA). */
	int (*remote_end)(void *userdata, int32_t id, void *stream_ud);
	/* The stream is gone: both sides closed, or reset by either side (@error_code). */
	void (*stream_close)(void *userdata, int32_t id, void *stream_ud, uint32_t error_code);
	/* The peer sent GOAWAY. */
	void (*goaway)(void *userdata, int32_t last_stream_id, uint32_t error_code);
};

/* The local SETTINGS sent when the session starts. Zero fields are not sent. */
struct h2_settings {
	uint32_t max_concurrent_streams;
	uint32_t initial_window_size;
	uint32_t max_header_list_size;
	uint32_t conn_window_size; /* connection receive window; 0: HTTP/2's 65535 */
	bool no_push;		   /* send ENABLE_PUSH=0 (clients) */
};

/*
 * Creates a session and queues the initial SETTINGS (send them with h2_session_send() at
 * once: gRPC peers wait for the server's SETTINGS). @cb must outlive the session.
 * Returns 0, -ENOMEM or -EPROTO.
 */
int h2_session_new(bool server, const struct h2_settings *settings, const struct h2_callbacks *cb,
		   void *userdata, struct h2_session **ret) WARN_UNUSED;
/*
 * Frees the session and every stream's queued output. No callback runs: nghttp2 does not
 * report the streams still open, so the caller closes its own per-stream state.
 * NULL-safe, returns NULL. Never call it from inside a callback.
 */
struct h2_session *h2_session_free(struct h2_session *h);

/*
 * Feeds bytes read from the peer. Returns 0, -ENOMEM, or -EPROTO when the input is not
 * HTTP/2 (bad client preface, callback failure, flooding). On -EPROTO a GOAWAY with the
 * matching error code is queued: flush it with h2_session_send(), then close. Protocol errors
 * that nghttp2 handles itself (oversized frame, bad frame length, ...) return 0 and queue a
 * GOAWAY; h2_session_done() then turns true once it is sent.
 */
int h2_session_recv(struct h2_session *h, const uint8_t *data, size_t len);
/*
 * The peer closed its side of the connection. Returns 0 when the input ended on a frame
 * boundary, or -EPROTO when it ended inside the preface (GOAWAY(PROTOCOL_ERROR) queued) or
 * inside a frame (truncated frame: GOAWAY(FRAME_SIZE_ERROR) queued).
 */
int h2_session_recv_eof(struct h2_session *h);

/*
 * Appends queued output to @out until @out holds at least @max bytes or nothing is left.
 * Returns 0, -ENOMEM or -EPROTO.
 */
int h2_session_send(struct h2_session *h, struct buf *out, size_t max);
/* Whether nghttp2 has output queued that h2_session_send() would produce. */
bool h2_session_want_write(const struct h2_session *h);
/* Whether the session still expects input from the peer. */
bool h2_session_want_read(const struct h2_session *h);
/* Nothing more to read or write: the connection can be closed. */
bool h2_session_done(const struct h2_session *h);

/*
 * Queues GOAWAY(@error_code, @debug may be NULL) and ends the session once it is sent: no
 * more input is processed and no more output follows. Returns 0, -ENOMEM or -EPROTO.
 */
int h2_session_terminate(struct h2_session *h, uint32_t error_code, const char *debug);
/*
 * Graceful GOAWAY(NO_ERROR) naming the last stream the peer opened: open streams go on, new
 * ones are refused, and the session is done once the open streams are closed.
 * Returns 0, -ENOMEM or -EPROTO.
 */
int h2_session_shutdown(struct h2_session *h);
/* Whether a GOAWAY was sent; its error code in *ret_code (may be NULL). */
bool h2_session_goaway_sent(const struct h2_session *h, uint32_t *ret_code);
/* Whether the peer sent GOAWAY. */
bool h2_session_goaway_received(const struct h2_session *h);
/* Server role: whether the client connection preface (magic, then SETTINGS) has arrived. */
bool h2_session_preface_done(const struct h2_session *h);
/* Bytes queued in stream output queues, not yet handed to nghttp2. */
size_t h2_session_buffered(const struct h2_session *h);
/* Number of streams known to the session (open or half-closed). */
size_t h2_session_streams(const struct h2_session *h);
/* The SETTINGS_MAX_CONCURRENT_STREAMS the peer announced (HTTP/2 default: unlimited). */
uint32_t h2_session_peer_max_streams(const struct h2_session *h);

/* --- streams --- */

/* Attaches caller state to stream @id. Returns 0 or -ENOENT (no such stream). */
int h2_stream_set_userdata(struct h2_session *h, int32_t id, void *stream_ud);
void *h2_stream_userdata(struct h2_session *h, int32_t id);

/*
 * Client role: submits a request with @nva; the body follows with h2_stream_write() and
 * h2_stream_end(). Returns 0 and the stream id, -ENOMEM or -EPROTO.
 */
int h2_submit_request(struct h2_session *h, const struct h2_nv *nva, size_t n, void *stream_ud,
		      int32_t *ret_id) WARN_UNUSED;
/*
 * Server role: submits the response header block. With @end_stream it carries END_STREAM
 * (a Trailers-Only response); otherwise the body follows with h2_stream_write() and
 * h2_stream_end(). Returns 0, -ENOENT, -EALREADY (response already submitted), -ENOMEM or
 * -EPROTO.
 */
int h2_submit_response(struct h2_session *h, int32_t id, const struct h2_nv *nva, size_t n,
		       bool end_stream);
/* Appends body bytes to the stream's queue. Returns 0, -ENOENT, -EPIPE (ended) or -ENOMEM. */
int h2_stream_write(struct h2_session *h, int32_t id, const void *data, size_t len);
/*
 * A reference-counted block of body bytes that many streams queue without a copy each (the
 * same ListAndWatch list for every watcher). The creator fills data[0..len). Single-threaded,
 * like the session. h2_blob_new() returns 0 (one reference) or -ENOMEM; h2_blob_unref() is
 * NULL-safe, frees with the last reference and returns NULL.
 */
struct h2_blob {
	unsigned refs;
	size_t len;
	uint8_t data[];
};
int h2_blob_new(size_t len, struct h2_blob **ret) WARN_UNUSED;
struct h2_blob *h2_blob_ref(struct h2_blob *b);
struct h2_blob *h2_blob_unref(struct h2_blob *b);

/*
 * Queues @b (a reference is taken) as the stream's current state: if the block queued by the
 * previous call has not begun to go out (nghttp2 took none of its bytes), it is replaced. So
 * a peer that does not read holds at most the block being written plus the newest one, both
 * shared with the other streams. A later h2_stream_write() copies the blocks still queued
 * into the stream's own queue first, to keep the order.
 * Returns 1 (a pending block was replaced), 0 (queued), -ENOENT or -EPIPE.
 */
int h2_stream_write_latest(struct h2_session *h, int32_t id, struct h2_blob *b);
/* Bytes of the block that h2_stream_write_latest() would replace now (0: none). */
size_t h2_stream_latest_pending(struct h2_session *h, int32_t id);
/*
 * Ends the local side once the queued bytes are sent: with trailers (a HEADERS frame carrying
 * END_STREAM) when @n > 0, else END_STREAM on the last DATA frame.
 * Returns 0, -ENOENT, -EPIPE (already ended) or -ENOMEM.
 */
int h2_stream_end(struct h2_session *h, int32_t id, const struct h2_nv *trailers, size_t n);
/* Drops queued bytes not yet handed to nghttp2. */
void h2_stream_discard(struct h2_session *h, int32_t id);
/* Sends RST_STREAM(@error_code). Returns 0, -ENOENT, -ENOMEM or -EPROTO. */
int h2_stream_reset(struct h2_session *h, int32_t id, uint32_t error_code);
/*
 * When our END_STREAM goes out while the peer has not half-closed, follow it with
 * RST_STREAM(@error_code), as gRPC servers do.
 */
void h2_stream_set_reset_after_end(struct h2_session *h, int32_t id, uint32_t error_code);
