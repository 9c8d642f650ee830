#pragma once

/*
 * gRPC over HTTP/2 on unix sockets, server and client, driven by our loop.
 *
 * Server: a method table routed by :path; unary and server-streaming methods. A handler gets
 * the request bytes and a struct grpc_call; it answers at once or later (the call stays valid
 * until its close callback has run). Wire rules (kubelet-contract.md section 3): SETTINGS at
 * accept, our own header checks instead of nghttp2's HTTP messaging, Trailers-Only errors,
 * percent-encoded grpc-message, grpc-timeout honoured, size limits, a cap on connections and
 * on buffered bytes per connection.
 *
 * Client: one asynchronous unary call per connection (Register, pod-resources List), with a
 * deadline, te: trailers, :authority localhost and percent-decoding of grpc-message.
 *
 * Protocol status (enum grpc_status) is kept apart from C errors (negative errno).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct loop;
struct grpc_server;
struct grpc_call;
struct grpc_client_call;

enum grpc_status {
	GRPC_STATUS_OK = 0,
	GRPC_STATUS_CANCELLED = 1,
	GRPC_STATUS_UNKNOWN = 2,
	GRPC_STATUS_INVALID_ARGUMENT = 3,
	GRPC_STATUS_DEADLINE_EXCEEDED = 4,
	GRPC_STATUS_NOT_FOUND = 5,
	GRPC_STATUS_ALREADY_EXISTS = 6,
	GRPC_STATUS_PERMISSION_DENIED = 7,
	GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
	GRPC_STATUS_FAILED_PRECONDITION = 9,
	GRPC_STATUS_ABORTED = 10,
	GRPC_STATUS_OUT_OF_RANGE = 11,
	GRPC_STATUS_UNIMPLEMENTED = 12,
	GRPC_STATUS_INTERNAL = 13,
	GRPC_STATUS_UNAVAILABLE = 14,
	GRPC_STATUS_DATA_LOSS = 15,
	GRPC_STATUS_UNAUTHENTICATED = 16,
	GRPC_STATUS_COUNT,
};

/* The one table: -EINVAL/-ENODEV -> INVALID_ARGUMENT, -EXDEV -> FAILED_PRECONDITION,
 * -EMSGSIZE -> RESOURCE_EXHAUSTED, -ETIMEDOUT -> DEADLINE_EXCEEDED, -EOPNOTSUPP ->
 * UNIMPLEMENTED, 0 -> OK, anything else -> INTERNAL. */
enum grpc_status grpc_status_from_errno(int r);
/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_STATUS" for values out of range. */
const char *grpc_status_name(int status);

/*
 * Percent-encodes @s for grpc-message: bytes outside 0x20-0x7E and '%' become %XX.
 * Returns a heap string or NULL on OOM.
 */
char *grpc_percent_encode(const char *s) WARN_UNUSED;
/* Decodes %XX; invalid escapes are kept as they are. Returns a heap string or NULL on OOM. */
char *grpc_percent_decode(const char *s, size_t len) WARN_UNUSED;

/*
 * Parses a grpc-timeout value ("10S", "29999987u", at most 8 digits and one of H M S m u n).
 * Returns 0 and the timeout in microseconds (rounded up), or -EINVAL.
 */
int grpc_timeout_parse(const char *s, size_t len, usec_t *ret) WARN_UNUSED;
/* Formats @usec as grpc-go does (finest unit whose value fits in 8 digits) into @buf (>= 16). */
void grpc_timeout_format(usec_t usec, char *buf, size_t size);

/* 5-byte gRPC message prefix. */
#define GRPC_PREFIX_LEN 5

/*
 * Server limits. Zero fields take the default shown.
 */
struct grpc_limits {
	size_t max_recv_msg;		 /* 16 MiB: largest request message accepted */
	size_t max_send_msg;		 /* 4 MiB - 1: largest message we send (kubelet limit) */
	unsigned max_conns;		 /* 64: connections past this are refused (GOAWAY) */
	size_t max_conn_buffered;	 /* max_recv_msg + 4 MiB: per-connection buffered bytes */
	unsigned max_concurrent_streams; /* 128: SETTINGS_MAX_CONCURRENT_STREAMS (>= 100) */
};

/*
 * A method handler. @req/@len is the request message without its 5-byte prefix (valid only
 * during the call). The handler must eventually call grpc_call_finish() (unary: after one
 * grpc_call_send()), unless the call is closed first. It may do so inside the handler.
 */
typedef void grpc_handler_fn(struct grpc_call *call, const uint8_t *req, size_t len,
			     void *userdata);

/*
 * Runs once when the call ends for any reason: finished and flushed, cancelled by the peer
 * (RST_STREAM), deadline passed, connection closed, server freed. After it returns the call
 * pointer is invalid. @status is the status sent, or CANCELLED/DEADLINE_EXCEEDED/UNAVAILABLE.
 */
typedef void grpc_call_close_fn(struct grpc_call *call, enum grpc_status status, void *userdata);

struct grpc_method {
	const char *path;      /* "/v1beta1.DevicePlugin/Allocate" */
	bool server_streaming; /* ListAndWatch */
	grpc_handler_fn *handler;
};

struct grpc_server_stats {
	unsigned conns; /* open now */
	unsigned conns_peak;
	unsigned conns_refused; /* over max_conns */
	unsigned streams;	/* open now */
	unsigned streams_peak;
	uint64_t calls;	  /* dispatched to a handler */
	uint64_t goaways; /* connections ended with GOAWAY for an error */
};

/*
 * Creates a server for @methods (the array must outlive the server). @userdata is passed to
 * every handler. Returns 0, -ENOMEM or -EINVAL.
 */
int grpc_server_new(struct loop *l, const struct grpc_method *methods, size_t n_methods,
		    const struct grpc_limits *limits, void *userdata,
		    struct grpc_server **ret) WARN_UNUSED;

/*
 * Listens on the unix socket @path: an existing file there is removed first (stale socket),
 * the socket is created under umask 077 and chmod'ed 0600. A server listens on one path at a
 * time; listening again closes the old listener (open connections stay). Returns 0 or -errno.
 */
int grpc_server_listen(struct grpc_server *s, const char *path) WARN_UNUSED;
/* Closes the listener and unlinks its path if it is still ours (same inode). */
void grpc_server_unlisten(struct grpc_server *s);
/* The path listened on, or NULL. */
const char *grpc_server_path(const struct grpc_server *s);

/*
 * Graceful shutdown: stop listening, send GOAWAY(NO_ERROR) on every connection, finish open
 * streaming calls with OK, and let in-flight unary calls complete. Connections close once
 * drained, or after @grace_usec. @done (may be NULL) runs when the last connection is gone.
 */
void grpc_server_shutdown(struct grpc_server *s, usec_t grace_usec,
			  void (*done)(struct grpc_server *s, void *userdata), void *userdata);

/* Closes everything at once (close callbacks run) and frees. NULL-safe, returns NULL. */
struct grpc_server *grpc_server_free(struct grpc_server *s);
void grpc_server_get_stats(const struct grpc_server *s, struct grpc_server_stats *ret);

/*
 * Feeds bytes to a server connection with no socket: for the fuzzer and byte-level tests.
 * grpc_server_conn_new_mem() creates a connection whose output is appended to @out (may be
 * NULL: output discarded). Returns 0 or -errno; grpc_server_conn_feed() returns 0, or a
 * negative errno once the connection is dead (protocol error, GOAWAY sent).
 */
struct grpc_server_conn;
int grpc_server_conn_new_mem(struct grpc_server *s, struct buf *out,
			     struct grpc_server_conn **ret) WARN_UNUSED;
int grpc_server_conn_feed(struct grpc_server_conn *c, const uint8_t *data, size_t len);
struct grpc_server_conn *grpc_server_conn_free(struct grpc_server_conn *c);

/* --- calls (server side) --- */

/*
 * Sends one message (without prefix; the layer adds it). For a unary call, at most once.
 * Returns 0, -EMSGSIZE (over max_send_msg), -EPIPE (call already closed or finished),
 * -ENOMEM. Output is buffered without limit only up to max_conn_buffered.
 */
int grpc_call_send(struct grpc_call *c, const uint8_t *msg, size_t len);
/*
 * Ends the call with @status and @message (may be NULL; percent-encoded on the wire).
 * A call that sent nothing yet gets a Trailers-Only response. Returns 0 or -EPIPE.
 */
int grpc_call_finish(struct grpc_call *c, enum grpc_status status, const char *message);
/* Sets the close callback and its userdata. */
void grpc_call_set_close_cb(struct grpc_call *c, grpc_call_close_fn *fn, void *userdata);
const char *grpc_call_path(const struct grpc_call *c);
/* The absolute CLOCK_MONOTONIC deadline from grpc-timeout, or USEC_INFINITY. */
usec_t grpc_call_deadline(const struct grpc_call *c);
/* A request header value, or NULL. */
const char *grpc_call_header(const struct grpc_call *c, const char *name);
/* An id unique among the server's connections, for logs and "same connection" checks. */
uint64_t grpc_call_conn_id(const struct grpc_call *c);

/* --- client --- */

/*
 * Completion of a client call. @r is 0 when a gRPC status arrived (then @status/@message are
 * the server's, message percent-decoded, and @resp/@len the response message when status is
 * OK), or a negative errno for a transport failure:
 *   -ENOENT        socket file missing
 *   -ECONNREFUSED  nobody listening
 *   -ETIMEDOUT     deadline passed
 *   -EMSGSIZE      response larger than the receive limit
 *   -EPROTO        HTTP/2 or gRPC protocol violation by the server
 *   -ECONNRESET    connection closed before a status
 * @message always holds a human-readable description (for transport errors too).
 * Pointers are valid only during the callback. The call object is freed after it returns.
 */
typedef void grpc_client_done_fn(struct grpc_client_call *cc, int r, enum grpc_status status,
				 const char *message, const uint8_t *resp, size_t len,
				 void *userdata);

struct grpc_client_opts {
	usec_t timeout;	       /* deadline from now; 0: none (no grpc-timeout sent) */
	size_t max_recv_msg;   /* 0: 16 MiB */
	const char *authority; /* NULL: "localhost" */
};

/*
 * Starts a unary call of @path on the unix socket @sock with request @req (no prefix).
 * @done runs exactly once, from the loop, never inside this function. Returns 0 or -errno
 * (then @done never runs); failures to connect are reported through @done.
 */
int grpc_client_call_start(struct loop *l, const char *sock, const char *path, const uint8_t *req,
			   size_t len, const struct grpc_client_opts *opts,
			   grpc_client_done_fn *done, void *userdata,
			   struct grpc_client_call **ret) WARN_UNUSED;
/* Aborts the call: @done does not run. NULL-safe, returns NULL. */
struct grpc_client_call *grpc_client_call_cancel(struct grpc_client_call *cc);

/*
 * Blocking form for CLIs and tests: runs a private loop. On success (r == 0) *ret_status,
 * *ret_message (heap) and *ret_resp/*ret_len (heap) are filled; the caller frees them.
 * Returns 0 or the transport errno; ret_message is set for transport errors too.
 */
int grpc_client_call_sync(const char *sock, const char *path, const uint8_t *req, size_t len,
			  const struct grpc_client_opts *opts, enum grpc_status *ret_status,
			  char **ret_message, uint8_t **ret_resp, size_t *ret_len) WARN_UNUSED;
