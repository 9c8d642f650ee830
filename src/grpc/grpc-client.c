/*
 * The gRPC client: one asynchronous unary call per connection, on the loop; or a connection
 * held open with no call (grpc_client_hold_start()), to learn when the server goes away.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc-io.h"
#include "grpc.h"
#include "h2.h"
#include "loop.h"
#include "version.h"

#define LOG_MODULE "grpc"
#include "log.h"

#define CLIENT_DEFAULT_MAX_RECV ((size_t)16 << 20)
#define CLIENT_STREAM_WINDOW	(4 * 1024 * 1024)
#define CLIENT_CONN_WINDOW	(16 * 1024 * 1024)
#define CLIENT_WRITE_CHUNK	((size_t)256 * 1024)
#define CLIENT_READ_BUDGET	((size_t)1024 * 1024) /* per wakeup */
#define CONNECT_RETRY_USEC	(10 * USEC_PER_MSEC)  /* listen backlog full: try again */
#define CONNECT_RETRY_MAX	500

struct grpc_client_call {
	struct loop *loop;
	char *sock;
	char *path;
	char *authority;
	char *metadata[9]; /* name, value pairs, NULL-terminated */
	bool streaming;
	bool hold; /* no call: the connection itself (@path NULL) */
	int fd;
	struct loop_io *io;
	uint32_t io_events;
	bool connecting; /* connect() in progress */
	unsigned connect_tries;
	struct loop_timer *kick; /* deferred report or connect retry */
	struct loop_timer *deadline_timer;
	usec_t deadline;
	usec_t timeout;
	char timeout_hdr[16]; /* grpc-timeout as sent */
	struct h2_session *h2;
	int32_t stream_id;
	struct buf out;
	size_t out_off;
	uint8_t *req; /* prefixed request, kept until submitted */
	size_t req_len;
	size_t max_recv;
	struct grpc_deframer in;

	/* the response */
	bool got_headers;
	int http_status; /* 0: no :status */
	bool grpc_ct;
	bool have_status;
	int status;
	char *message;
	uint8_t *resp;
	size_t resp_len;
	unsigned n_msgs;
	bool goaway_error;
	uint32_t goaway_code;

	/* the outcome, reported from the loop */
	bool result_ready;
	int result_r;
	enum grpc_status result_status;
	char *result_msg;

	grpc_client_done_fn *done;
	void *userdata;
	unsigned depth;
	bool in_done;
};

static const char *h2_error_name(uint32_t code)
{
	static const char *const names[] = {
		"NO_ERROR",
		"PROTOCOL_ERROR",
		"INTERNAL_ERROR",
		"FLOW_CONTROL_ERROR",
		"SETTINGS_TIMEOUT",
		"STREAM_CLOSED",
		"FRAME_SIZE_ERROR",
		"REFUSED_STREAM",
		"CANCEL",
		"COMPRESSION_ERROR",
		"CONNECT_ERROR",
		"ENHANCE_YOUR_CALM",
		"INADEQUATE_SECURITY",
		"HTTP_1_1_REQUIRED",
	};

	return code < ELEMENTSOF(names) ? names[code] : "UNKNOWN";
}

/* grpc-go's http2ErrConvTab. */
static enum grpc_status status_from_h2_error(uint32_t code)
{
	switch (code) {
	case H2_FLOW_CONTROL_ERROR:
	case H2_ENHANCE_YOUR_CALM:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case H2_REFUSED_STREAM:
		return GRPC_STATUS_UNAVAILABLE;
	case H2_CANCEL:
		return GRPC_STATUS_CANCELLED;
	case H2_INADEQUATE_SECURITY:
		return GRPC_STATUS_PERMISSION_DENIED;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

/* grpc-go's HTTPStatusConvTab, for responses that are not gRPC. */
static enum grpc_status status_from_http(int http)
{
	switch (http) {
	case 0: /* no :status at all */
	case 400:
		return GRPC_STATUS_INTERNAL;
	case 401:
		return GRPC_STATUS_UNAUTHENTICATED;
	case 403:
		return GRPC_STATUS_PERMISSION_DENIED;
	case 404:
		return GRPC_STATUS_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504:
		return GRPC_STATUS_UNAVAILABLE;
	default:
		return GRPC_STATUS_UNKNOWN;
	}
}

static const char *http_status_text(int http)
{
	switch (http) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 415:
		return "Unsupported Media Type";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "";
	}
}

/* Records the outcome once; it is reported when the current entry point unwinds. */
static void cc_result(struct grpc_client_call *cc, int r, enum grpc_status status, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));
static void cc_result(struct grpc_client_call *cc, int r, enum grpc_status status, const char *fmt,
		      ...)
{
	va_list ap;

	if (cc->result_ready)
		return;
	cc->result_ready = true;
	cc->result_r = r;
	cc->result_status = status;
	va_start(ap, fmt);
	cc->result_msg = strdup_vprintf(fmt, ap);
	va_end(ap);
	if (cc->depth == 0)
		loop_timer_arm(cc->kick, 0);
}

static void cc_free(struct grpc_client_call *cc)
{
	(void)loop_timer_free(cc->kick);
	(void)loop_timer_free(cc->deadline_timer);
	(void)loop_io_free(cc->io);
	(void)fd_close(cc->fd);
	h2_session_free(cc->h2);
	buf_release(&cc->out);
	grpc_deframer_release(&cc->in);
	free(cc->req);
	free(cc->sock);
	free(cc->path);
	free(cc->authority);
	for (size_t i = 0; i < ELEMENTSOF(cc->metadata); i++)
		free(cc->metadata[i]);
	free(cc->message);
	free(cc->resp);
	free(cc->result_msg);
	free(cc);
}

/* Best effort: GOAWAY(NO_ERROR) out of a non-blocking socket before closing it. */
static void cc_goodbye(struct grpc_client_call *cc)
{
	struct buf b = { 0 };

	if (!cc->h2 || cc->fd < 0)
		return;
	if (h2_session_terminate(cc->h2, H2_NO_ERROR, NULL) == 0 &&
	    h2_session_send(cc->h2, &b, SIZE_MAX) == 0) {
		if (cc->out_off < cc->out.len)
			(void)!send(cc->fd, cc->out.data + cc->out_off, cc->out.len - cc->out_off,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)!send(cc->fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	buf_release(&b);
}

static void cc_report(struct grpc_client_call *cc)
{
	const uint8_t *resp = NULL;
	size_t len = 0;

	if (cc->result_r == 0 && cc->result_status == GRPC_STATUS_OK) {
		resp = cc->resp;
		len = cc->resp_len;
	}
	cc_goodbye(cc);
	cc->in_done = true;
	cc->done(cc, cc->result_r, cc->result_status, cc->result_msg ? cc->result_msg : "", resp,
		 len, cc->userdata);
	cc_free(cc);
}

static void cc_enter(struct grpc_client_call *cc)
{
	cc->depth++;
}

/* Returns true when the call was reported and freed. */
static bool cc_leave(struct grpc_client_call *cc)
{
	if (--cc->depth > 0 || !cc->result_ready)
		return false;
	cc_report(cc);
	return true;
}

static void cc_update_events(struct grpc_client_call *cc)
{
	uint32_t ev = EPOLLIN;

	if (!cc->io)
		return;
	if (cc->connecting || cc->out_off < cc->out.len)
		ev |= EPOLLOUT;
	if (ev != cc->io_events && loop_io_set_events(cc->io, ev) == 0)
		cc->io_events = ev;
}

static void cc_flush(struct grpc_client_call *cc)
{
	int r = 0;

	if (cc->h2 && !cc->connecting && !cc->result_ready)
		r = grpc_io_write(cc->fd, cc->h2, &cc->out, &cc->out_off, CLIENT_WRITE_CHUNK);
	if (r < 0 && !cc->result_ready)
		cc_result(cc, -ECONNRESET, GRPC_STATUS_UNAVAILABLE,
			  "connection to %s lost while writing: %s", cc->sock, strerror(-r));
	cc_update_events(cc);
}

/* --- response parsing (h2 callbacks) --- */

static int cl_header(void *userdata, int32_t id, void *stream_ud, const char *name, size_t name_len,
		     const char *value, size_t value_len)
{
	struct grpc_client_call *cc = userdata;

	if (id != cc->stream_id || cc->result_ready)
		return 0;
	if (streq(name, ":status") && !cc->got_headers) {
		unsigned v;

		cc->http_status = safe_atou(value, &v) == 0 && v < 1000 ? (int)v : -1;
	} else if (streq(name, "content-type") && !cc->got_headers) {
		cc->grpc_ct = strncmp(value, "application/grpc", 16) == 0 &&
			      (value[16] == 0 || value[16] == '+' || value[16] == ';');
	} else if (streq(name, "grpc-status")) {
		unsigned v;

		if (safe_atou(value, &v) < 0 || v > INT32_MAX) {
			cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL,
				  "transport: malformed grpc-status: \"%s\"", value);
			return 0;
		}
		cc->have_status = true;
		cc->status = (int)v;
	} else if (streq(name, "grpc-message")) {
		free(cc->message);
		cc->message = grpc_percent_decode(value, value_len);
		if (!cc->message)
			return -ENOMEM;
	}
	return 0;
}

static int cl_headers_end(void *userdata, int32_t id, void *stream_ud, enum h2_headers_kind kind)
{
	struct grpc_client_call *cc = userdata;

	if (id != cc->stream_id || cc->result_ready)
		return 0;
	if (kind == H2_HEADERS_RESPONSE && !cc->got_headers) {
		cc->got_headers = true;
		if (!cc->grpc_ct || cc->http_status != 200) {
			/* Not gRPC: map the HTTP status as grpc-go does. */
			char http[128] = "", sep[3] = "";

			if (cc->http_status == 0)
				(void)snprintf(http, sizeof(http),
					       "malformed header: missing HTTP status");
			else if (cc->http_status != 200)
				(void)snprintf(
					http, sizeof(http),
					"unexpected HTTP status code received from server: %d (%s)",
					cc->http_status, http_status_text(cc->http_status));
			if (*http && !cc->grpc_ct)
				memcpy(sep, "; ", 3);
			(void)h2_stream_reset(cc->h2, id, H2_PROTOCOL_ERROR);
			cc_result(cc, 0, status_from_http(cc->http_status), "%s%s%s", http, sep,
				  cc->grpc_ct ? "" : "malformed header: missing HTTP content-type");
		}
	} else if (kind == H2_HEADERS_TRAILERS || cc->got_headers) {
		/* Trailers are checked once the stream ends. */
	}
	return 0;
}

static int cl_data(void *userdata, int32_t id, void *stream_ud, const uint8_t *data, size_t len)
{
	struct grpc_client_call *cc = userdata;
	const uint8_t *msg;
	size_t msg_len = 0;
	uint8_t flag = 0;
	int r;

	if (id != cc->stream_id || cc->result_ready || !cc->got_headers)
		return 0;
	r = grpc_deframer_push(&cc->in, data, len);
	if (r < 0)
		return r;
	while ((r = grpc_deframer_next(&cc->in, &msg, &msg_len, &flag)) > 0) {
		if (flag == 1) {
			cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL,
				  "grpc: compressed flag set with identity or empty encoding");
			break;
		}
		if (cc->streaming) {
			uint8_t *p;

			if (msg_len > cc->max_recv - cc->resp_len) {
				cc_result(cc, -EMSGSIZE, GRPC_STATUS_RESOURCE_EXHAUSTED,
					  "grpc: streamed messages larger than max (%zu)",
					  cc->max_recv);
				break;
			}
			p = realloc(cc->resp, cc->resp_len + msg_len + 1);
			if (!p)
				return -ENOMEM;
			cc->resp = p;
			memcpy(p + cc->resp_len, msg, msg_len);
			cc->resp_len += msg_len;
			cc->n_msgs++;
			continue;
		}
		if (++cc->n_msgs > 1) {
			cc_result(
				cc, -EPROTO, GRPC_STATUS_INTERNAL,
				"cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message");
			break;
		}
		cc->resp = malloc(msg_len ? msg_len : 1);
		if (!cc->resp)
			return -ENOMEM;
		memcpy(cc->resp, msg, msg_len);
		cc->resp_len = msg_len;
	}
	if (r == -EMSGSIZE)
		cc_result(cc, -EMSGSIZE, GRPC_STATUS_RESOURCE_EXHAUSTED,
			  "grpc: received message larger than max (%zu vs. %zu)", msg_len,
			  cc->max_recv);
	else if (r < 0)
		cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL,
			  "grpc: received unexpected payload format %u", flag);
	if (cc->result_ready)
		(void)h2_stream_reset(cc->h2, id, H2_CANCEL);
	return 0;
}

static int cl_remote_end(void *userdata, int32_t id, void *stream_ud)
{
	struct grpc_client_call *cc = userdata;

	if (id != cc->stream_id || cc->result_ready)
		return 0;
	if (!cc->have_status) {
		cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL,
			  "server closed the stream without sending a grpc-status");
		return 0;
	}
	if (cc->status == GRPC_STATUS_OK) {
		if (grpc_deframer_pending(&cc->in) > 0) {
			cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL,
				  "grpc: response stream ended inside a message");
			return 0;
		}
		if (cc->n_msgs == 0 && !cc->streaming) {
			cc_result(
				cc, -EPROTO, GRPC_STATUS_INTERNAL,
				"cardinality violation: received no response message from non-server-streaming RPC");
			return 0;
		}
	}
	cc_result(cc, 0, (enum grpc_status)cc->status, "%s", cc->message ? cc->message : "");
	return 0;
}

static void cl_stream_close(void *userdata, int32_t id, void *stream_ud, uint32_t error_code)
{
	struct grpc_client_call *cc = userdata;

	if (id != cc->stream_id || cc->result_ready)
		return;
	if (error_code == H2_REFUSED_STREAM && h2_session_goaway_received(cc->h2))
		cc_result(
			cc, -ECONNRESET, GRPC_STATUS_UNAVAILABLE,
			"server %s refused the call with GOAWAY (too many connections or shutting down)",
			cc->sock);
	else
		cc_result(cc, -ECONNRESET, status_from_h2_error(error_code),
			  "stream terminated by RST_STREAM with error code: %s",
			  h2_error_name(error_code));
}

static void cl_goaway(void *userdata, int32_t last_stream_id, uint32_t error_code)
{
	struct grpc_client_call *cc = userdata;

	/* A held connection has nothing to finish: the server wants it gone, and so it is. */
	if (cc->hold) {
		cc_result(cc, -ECONNRESET, GRPC_STATUS_UNAVAILABLE, "server %s sent GOAWAY(%s)",
			  cc->sock, h2_error_name(error_code));
		return;
	}
	if (error_code != H2_NO_ERROR) {
		cc->goaway_error = true;
		cc->goaway_code = error_code;
	}
}

static const struct h2_callbacks client_h2_callbacks = {
	.header = cl_header,
	.headers_end = cl_headers_end,
	.data = cl_data,
	.remote_end = cl_remote_end,
	.stream_close = cl_stream_close,
	.goaway = cl_goaway,
};

/* --- connection --- */

static void cc_lost(struct grpc_client_call *cc, const char *what)
{
	if (cc->goaway_error)
		cc_result(cc, -EPROTO, status_from_h2_error(cc->goaway_code),
			  "connection to %s closed with GOAWAY(%s)", cc->sock,
			  h2_error_name(cc->goaway_code));
	else
		cc_result(cc, -ECONNRESET, GRPC_STATUS_UNAVAILABLE,
			  "connection to %s closed before a status: %s", cc->sock, what);
}

static void cc_read(struct grpc_client_call *cc)
{
	int r = grpc_io_read(cc->fd, cc->h2, CLIENT_READ_BUDGET);

	if (r == GRPC_IO_READ_REJECTED)
		cc_result(cc, -EPROTO, GRPC_STATUS_INTERNAL, "HTTP/2 protocol error from %s",
			  cc->sock);
	else if (r == GRPC_IO_READ_EOF)
		cc_lost(cc, "end of file");
	else if (r < 0)
		cc_lost(cc, strerror(-r));
}

static int cc_start_session(struct grpc_client_call *cc)
{
	const struct h2_settings settings = {
		.initial_window_size = CLIENT_STREAM_WINDOW,
		.conn_window_size = CLIENT_CONN_WINDOW,
		.no_push = true,
	};
	struct h2_nv nva[16];
	size_t n = 0;
	int r;

	r = h2_session_new(false, &settings, &client_h2_callbacks, cc, &cc->h2);
	if (r < 0 || cc->hold)
		return r;
	nva[n++] = (struct h2_nv){ ":method", "POST" };
	nva[n++] = (struct h2_nv){ ":scheme", "http" };
	nva[n++] = (struct h2_nv){ ":path", cc->path };
	nva[n++] = (struct h2_nv){ ":authority", cc->authority };
	nva[n++] = (struct h2_nv){ "te", "trailers" };
	if (cc->deadline != USEC_INFINITY) {
		usec_t now = now_usec();

		grpc_timeout_format(cc->deadline > now ? cc->deadline - now : 0, cc->timeout_hdr,
				    sizeof(cc->timeout_hdr));
		nva[n++] = (struct h2_nv){ "grpc-timeout", cc->timeout_hdr };
	}
	nva[n++] = (struct h2_nv){ "content-type", "application/grpc" };
	nva[n++] = (struct h2_nv){ "user-agent", "edgegpu/" EDGEGPU_VERSION };
	for (size_t i = 0; cc->metadata[i] && cc->metadata[i + 1]; i += 2)
		nva[n++] = (struct h2_nv){ cc->metadata[i], cc->metadata[i + 1] };
	r = h2_submit_request(cc->h2, nva, n, cc, &cc->stream_id);
	if (r < 0)
		return r;
	r = h2_stream_write(cc->h2, cc->stream_id, cc->req, cc->req_len);
	if (r < 0)
		return r;
	r = h2_stream_end(cc->h2, cc->stream_id, NULL, 0);
	if (r < 0)
		return r;
	cc->req = mfree(cc->req);
	return 0;
}

static void on_cc_io(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct grpc_client_call *cc = userdata;

	cc_enter(cc);
	if (cc->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(cc->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			cc_result(cc, err == ENOENT ? -ENOENT : -ECONNREFUSED,
				  GRPC_STATUS_UNAVAILABLE, "dial unix %s: connect: %s", cc->sock,
				  strerror(err));
			goto out;
		}
		cc->connecting = false;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		cc_read(cc);
	cc_flush(cc);
out:
	(void)cc_leave(cc);
}

/* Returns 0 when connected or in progress; otherwise records the failure. */
static void cc_connect(struct grpc_client_call *cc)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int r;

	memcpy(sa.sun_path, cc->sock, strlen(cc->sock) + 1);
	cc->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (cc->fd < 0) {
		cc_result(cc, -errno, GRPC_STATUS_UNAVAILABLE, "socket: %s", strerror(errno));
		return;
	}
	if (connect(cc->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;

		if (err == EAGAIN && ++cc->connect_tries < CONNECT_RETRY_MAX) {
			/* The listen backlog is full: a unix socket says so at once. Retry. */
			cc->fd = fd_close(cc->fd);
			loop_timer_arm(cc->kick, CONNECT_RETRY_USEC);
			return;
		}
		if (err != EINPROGRESS) {
			cc->fd = fd_close(cc->fd);
			cc_result(cc, err == ENOENT ? -ENOENT : -ECONNREFUSED,
				  GRPC_STATUS_UNAVAILABLE, "dial unix %s: connect: %s", cc->sock,
				  strerror(err));
			return;
		}
		cc->connecting = true;
	}
	r = cc_start_session(cc);
	if (r == 0)
		r = loop_io_new(cc->loop, cc->fd, EPOLLIN | EPOLLOUT, on_cc_io, cc, &cc->io);
	if (r < 0) {
		cc_result(cc, r, GRPC_STATUS_INTERNAL, "starting the call failed: %s",
			  strerror(-r));
		return;
	}
	cc->io_events = EPOLLIN | EPOLLOUT;
}

static void on_cc_kick(struct loop_timer *t, void *userdata)
{
	struct grpc_client_call *cc = userdata;

	cc_enter(cc);
	if (!cc->result_ready && cc->fd < 0)
		cc_connect(cc);
	(void)cc_leave(cc);
}

static void on_cc_deadline(struct loop_timer *t, void *userdata)
{
	struct grpc_client_call *cc = userdata;
	char what[32];

	cc_enter(cc);
	if (cc->h2 && cc->stream_id > 0)
		(void)h2_stream_reset(cc->h2, cc->stream_id, H2_CANCEL);
	grpc_timeout_format(cc->timeout, what, sizeof(what));
	cc_result(cc, -ETIMEDOUT, GRPC_STATUS_DEADLINE_EXCEEDED,
		  "context deadline exceeded: no answer to %s from %s within %s", cc->path,
		  cc->sock, what);
	(void)cc_leave(cc);
}

/* Connects now; any outcome, even an immediate failure, is reported from the loop. */
static int cc_begin(struct grpc_client_call *cc, struct grpc_client_call **ret)
{
	cc->depth = 1;
	cc_connect(cc);
	if (cc->h2)
		cc_flush(cc);
	cc->depth = 0;
	if (cc->result_ready)
		loop_timer_arm(cc->kick, 0);
	*ret = cc;
	return 0;
}

int grpc_client_call_start(struct loop *l, const char *sock, const char *path, const uint8_t *req,
			   size_t len, const struct grpc_client_opts *opts,
			   grpc_client_done_fn *done, void *userdata, struct grpc_client_call **ret)
{
	struct sockaddr_un sa;
	struct grpc_client_call *cc;
	int r = -ENOMEM;

	if (!l || !sock || !path || *path != '/' || !done || (len > 0 && !req))
		return -EINVAL;
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	cc->loop = l;
	cc->fd = -1;
	cc->done = done;
	cc->userdata = userdata;
	cc->deadline = USEC_INFINITY;
	cc->max_recv = opts && opts->max_recv_msg ? opts->max_recv_msg : CLIENT_DEFAULT_MAX_RECV;
	grpc_deframer_init(&cc->in, cc->max_recv);
	cc->sock = strdup(sock);
	cc->path = strdup(path);
	cc->authority = strdup(opts && opts->authority ? opts->authority : "localhost");
	cc->streaming = opts && opts->server_streaming;
	for (size_t i = 0; opts && opts->metadata && opts->metadata[i]; i++) {
		if (i + 1 >= ELEMENTSOF(cc->metadata)) {
			r = -E2BIG;
			goto fail;
		}
		cc->metadata[i] = strdup(opts->metadata[i]);
		if (!cc->metadata[i])
			goto fail;
	}
	cc->req_len = GRPC_PREFIX_LEN + len;
	cc->req = malloc(cc->req_len);
	if (!cc->sock || !cc->path || !cc->authority || !cc->req)
		goto fail;
	cc->req[0] = 0;
	cc->req[1] = (uint8_t)(len >> 24);
	cc->req[2] = (uint8_t)(len >> 16);
	cc->req[3] = (uint8_t)(len >> 8);
	cc->req[4] = (uint8_t)len;
	if (len > 0)
		memcpy(cc->req + GRPC_PREFIX_LEN, req, len);
	r = loop_timer_new(l, on_cc_kick, cc, &cc->kick);
	if (r < 0)
		goto fail;
	if (opts && opts->timeout) {
		cc->timeout = opts->timeout;
		cc->deadline = now_usec() + opts->timeout;
		r = loop_timer_new(l, on_cc_deadline, cc, &cc->deadline_timer);
		if (r < 0)
			goto fail;
		loop_timer_arm_at(cc->deadline_timer, cc->deadline);
	}
	return cc_begin(cc, ret);
fail:
	cc_free(cc);
	return r;
}

int grpc_client_hold_start(struct loop *l, const char *sock, grpc_client_done_fn *done,
			   void *userdata, struct grpc_client_call **ret)
{
	struct sockaddr_un sa;
	struct grpc_client_call *cc;
	int r = -ENOMEM;

	if (!l || !sock || !done)
		return -EINVAL;
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	cc->loop = l;
	cc->fd = -1;
	cc->hold = true;
	cc->done = done;
	cc->userdata = userdata;
	cc->deadline = USEC_INFINITY;
	cc->max_recv = CLIENT_DEFAULT_MAX_RECV;
	grpc_deframer_init(&cc->in, cc->max_recv);
	cc->sock = strdup(sock);
	if (!cc->sock)
		goto fail;
	r = loop_timer_new(l, on_cc_kick, cc, &cc->kick);
	if (r < 0)
		goto fail;
	return cc_begin(cc, ret);
fail:
	cc_free(cc);
	return r;
}

struct grpc_client_call *grpc_client_call_cancel(struct grpc_client_call *cc)
{
	if (!cc || cc->in_done)
		return NULL;
	if (cc->h2 && cc->stream_id > 0)
		(void)h2_stream_reset(cc->h2, cc->stream_id, H2_CANCEL);
	cc_goodbye(cc);
	cc_free(cc);
	return NULL;
}

struct sync_result {
	struct loop *loop;
	bool done;
	int r;
	enum grpc_status status;
	char *message;
	uint8_t *resp;
	size_t len;
	bool oom;
};

static void sync_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		      const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct sync_result *res = userdata;

	res->done = true;
	res->r = r;
	res->status = status;
	res->message = strdup(message ? message : "");
	if (!res->message)
		res->oom = true;
	if (len > 0) {
		res->resp = malloc(len);
		if (res->resp) {
			memcpy(res->resp, resp, len);
			res->len = len;
		} else {
			res->oom = true;
		}
	}
	loop_exit(res->loop, 0);
}

int grpc_client_call_sync(const char *sock, const char *path, const uint8_t *req, size_t len,
			  const struct grpc_client_opts *opts, enum grpc_status *ret_status,
			  char **ret_message, uint8_t **ret_resp, size_t *ret_len)
{
	struct sync_result res = { 0 };
	struct grpc_client_call *cc;
	int r;

	r = loop_new(&res.loop);
	if (r < 0)
		return r;
	r = grpc_client_call_start(res.loop, sock, path, req, len, opts, sync_done, &res, &cc);
	if (r < 0) {
		if (ret_message)
			*ret_message = strdup(strerror(-r));
		res.loop = loop_free(res.loop);
		return r;
	}
	/* Runs until sync_done() calls loop_exit(), or epoll fails. */
	r = loop_run(res.loop);
	if (r < 0) {
		(void)grpc_client_call_cancel(cc);
		res.loop = loop_free(res.loop);
		free(res.message);
		free(res.resp);
		return r;
	}
	res.loop = loop_free(res.loop);
	if (res.oom) {
		free(res.message);
		free(res.resp);
		return -ENOMEM;
	}
	if (ret_status)
		*ret_status = res.status;
	if (ret_message)
		*ret_message = res.message;
	else
		free(res.message);
	if (ret_resp)
		*ret_resp = res.resp;
	else
		free(res.resp);
	if (ret_len)
		*ret_len = res.len;
	return res.r;
}

int grpc_client_call_peer_cred(const struct grpc_client_call *cc, pid_t *ret_pid, uid_t *ret_uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!cc || cc->fd < 0 || cc->connecting)
		return -ENOTCONN;
	if (getsockopt(cc->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (len != sizeof(cred))
		return -ENODATA;
	if (ret_pid)
		*ret_pid = cred.pid;
	if (ret_uid)
		*ret_uid = cred.uid;
	return 0;
}
