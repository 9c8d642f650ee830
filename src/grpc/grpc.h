#pragma once

/*
 * gRPC over HTTP/2 on unix sockets, server and client, driven by our loop.
 *
 * Server: a method table routed by :path; unary and server-streaming methods. A handler gets
 * the request bytes and a struct grpc_call; it answers at once or later (the call stays valid
 * until its close callback has run). Wire rules (kubelet-contract.md section 3): SETTINGS at
 * accept, our own header checks instead of nghttp2's HTTP messaging, Trailers-Only errors,
 * percent-encoded grpc-message, grpc-timeout honoured, size limits, a cap on connections and
 * on buffered bytes per connection. What peers see (checks in grpc-go's order):
 *   duplicate :authority/host       HTTP 400, grpc-status 13
 *   a "connection" header           RST_STREAM(PROTOCOL_ERROR)
 *   content-type not application/grpc, application/grpc+..., application/grpc;...
 *                                   HTTP 415, grpc-status 3
 *   malformed grpc-timeout          HTTP 400, grpc-status 13
 *   :method not POST                HTTP 405, grpc-status 13
 *   unknown :path                   Trailers-Only grpc-status 12 ("unknown service S",
 *                                   "unknown method M for service S")
 *   message over max_recv_msg       grpc-status 8, as soon as its prefix arrives
 *   compressed flag, no encoding    grpc-status 13 (flag 1 with an encoding: 12)
 *   zero or two request messages    grpc-status 12
 *   deadline passed                 grpc-status 4, then RST_STREAM(CANCEL) if the peer has
 *                                   not half-closed
 *   a header name or value with NUL, CR or LF
 *                                   RST_STREAM(PROTOCOL_ERROR) (RFC 9113 8.2.1, in h2.c)
 * A response that ends before the request did is followed by RST_STREAM(NO_ERROR).
 * Connections that do nothing are closed with GOAWAY(NO_ERROR): no client preface (magic and
 * SETTINGS) within preface_timeout, or no stream open for idle_timeout. At max_conns, an
 * accept closes the connection idle the longest (no stream open) to make room, so that a
 * client that comes to work (the kubelet dialling back) is not refused because of strays;
 * only when every connection has a stream open does the new one get SETTINGS and
 * GOAWAY(REFUSED_STREAM). Past max_conn_buffered, GOAWAY(ENHANCE_YOUR_CALM); HTTP/2 errors
 * get GOAWAY with their code (a frame cut short by EOF: FRAME_SIZE_ERROR; a bad preface:
 * PROTOCOL_ERROR). A dying connection gets one second to flush its GOAWAY, then it is closed.
 *
 * Client: one asynchronous unary call per connection (Register, pod-resources List), with a
 * deadline, te: trailers, :authority localhost and percent-decoding of grpc-message.
 *
 * Protocol status (enum grpc_status) is kept apart from C errors (negative errno).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
 * Percent-encodes @s for grpc-message: bytes outside 0x20-0x7E, '%', and a space at either end
 * (HTTP/2 refuses a value that starts or ends with one) become %XX.
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
 * Reassembles length-prefixed messages (1 flag byte, 4-byte big-endian length, payload) from
 * a byte stream: DATA frames split and join messages at will. Embedded in its owner;
 * grpc_deframer_init() before use, grpc_deframer_release() after.
 */
struct grpc_deframer {
	struct buf buf;
	size_t off; /* bytes of buf already handed out */
	size_t max_msg;
};

void grpc_deframer_init(struct grpc_deframer *d, size_t max_msg);
void grpc_deframer_release(struct grpc_deframer *d);
/* Appends bytes; invalidates messages returned before. Returns 0 or -ENOMEM. */
int grpc_deframer_push(struct grpc_deframer *d, const uint8_t *data, size_t len) WARN_UNUSED;
/*
 * Takes the next complete message. Returns 1 with *ret_msg and *ret_len (valid until the
 * next push or release) and *ret_flag (the compressed flag, 0 or 1); 0 when more bytes are
 * needed; -EMSGSIZE as soon as a prefix announces more than max_msg (*ret_len: the announced
 * length); -EBADMSG when the flag byte is neither 0 nor 1 (*ret_flag: its value). After an
 * error the deframer keeps returning it.
 */
int grpc_deframer_next(struct grpc_deframer *d, const uint8_t **ret_msg, size_t *ret_len,
		       uint8_t *ret_flag) WARN_UNUSED;
/* Bytes held that were not handed out yet. */
size_t grpc_deframer_pending(const struct grpc_deframer *d);

/*
 * Server limits. Zero fields take the default shown.
 */
struct grpc_limits {
	size_t max_recv_msg;		 /* 16 MiB: largest request message accepted */
	size_t max_send_msg;		 /* 4 MiB - 1: largest message we send (kubelet limit) */
	unsigned max_conns;		 /* 64: connections past this are refused (GOAWAY) */
	size_t max_conn_buffered;	 /* max_recv_msg + 4 MiB: per-connection buffered bytes */
	unsigned max_concurrent_streams; /* 128: SETTINGS_MAX_CONCURRENT_STREAMS (>= 100) */
	usec_t preface_timeout;		 /* 10 s: accept to the client preface complete */
	usec_t idle_timeout;		 /* 300 s: a connection with no stream open is closed */
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
	uint64_t calls;		/* dispatched to a handler */
	uint64_t goaways;	/* connections ended with GOAWAY for an error */
	uint64_t msgs_replaced; /* grpc_call_send_latest() replacing a message not yet sent */
};

/*
 * Creates a server for @methods (the array must outlive the server). @userdata is passed to
 * every handler. @l may be NULL for a memory-only server (fuzzers, byte-level tests): then
 * nothing listens, grpc-timeout is parsed but no deadline timer runs, and output is flushed
 * only by grpc_server_conn_feed()/grpc_server_conn_flush(). Returns 0, -ENOMEM or -EINVAL
 * (max_concurrent_streams below 100).
 */
int grpc_server_new(struct loop *l, const struct grpc_method *methods, size_t n_methods,
		    const struct grpc_limits *limits, void *userdata,
		    struct grpc_server **ret) WARN_UNUSED;
/*
 * New limits (SIGHUP): they apply to connections accepted and calls started from now on; open
 * ones keep theirs. Returns 0 or -EINVAL (max_concurrent_streams under 100).
 */
int grpc_server_set_limits(struct grpc_server *s, const struct grpc_limits *limits);

/*
 * Listens on the unix socket @path: an existing file there is removed first (stale socket),
 * the socket is bound and chmod'ed 0600 before it listens (nobody can connect before that;
 * the process's umask is never changed: other threads create files meanwhile). A server
 * listens on one path at a time; listening again closes the old listener (open connections
 * stay). Returns 0 or -errno.
 */
int grpc_server_listen(struct grpc_server *s, const char *path) WARN_UNUSED;
/* Closes the listener and unlinks its path if it is still ours (same inode). */
void grpc_server_unlisten(struct grpc_server *s);
/*
 * Sets the times of the socket file we listen on to now, if the file at the path is still
 * ours (inotify reports IN_ATTRIB to whoever watches the directory), and keeps recognising
 * it as ours afterwards (its ctime moved). Returns 0, -ENOENT (not listening, or the file is
 * not ours) or -errno from utimensat().
 */
int grpc_server_touch(struct grpc_server *s);
/* The path listened on, or NULL. */
const char *grpc_server_path(const struct grpc_server *s);

/*
 * Graceful shutdown: stop listening, send GOAWAY(NO_ERROR) on every connection, finish open
 * streaming calls with OK, and let in-flight unary calls complete. Connections close once
 * drained, or after @grace_usec. @done (may be NULL) runs when the last connection is gone.
 */
void grpc_server_shutdown(struct grpc_server *s, usec_t grace_usec,
			  void (*done)(struct grpc_server *s, void *userdata), void *userdata);

/*
 * Closes everything at once (close callbacks run with UNAVAILABLE) and frees, memory
 * connections included. Never from inside a handler or close callback of this server.
 * NULL-safe, returns NULL.
 */
struct grpc_server *grpc_server_free(struct grpc_server *s);
void grpc_server_get_stats(const struct grpc_server *s, struct grpc_server_stats *ret);

/*
 * Connection-level events, for the caller to log (this module logs at debug only):
 * REFUSED: an accept past max_conns got GOAWAY(REFUSED_STREAM); OVERFLOW: a connection
 * passed max_conn_buffered and got GOAWAY(ENHANCE_YOUR_CALM); PROTOCOL: a connection ended
 * with GOAWAY for an HTTP/2 error (@h2_error: its code); PREFACE_TIMEOUT: no client preface
 * within preface_timeout; IDLE: no stream open for idle_timeout; EVICTED: closed, idle the
 * longest, to make room at max_conns (the last three send GOAWAY(NO_ERROR)). At most once per
 * connection.
 */
enum grpc_server_event {
	GRPC_SERVER_EVENT_REFUSED,
	GRPC_SERVER_EVENT_OVERFLOW,
	GRPC_SERVER_EVENT_PROTOCOL,
	GRPC_SERVER_EVENT_PREFACE_TIMEOUT,
	GRPC_SERVER_EVENT_IDLE,
	GRPC_SERVER_EVENT_EVICTED,
	GRPC_SERVER_EVENT_COUNT,
};
typedef void grpc_server_event_fn(struct grpc_server *s, enum grpc_server_event ev,
				  uint64_t conn_id, uint32_t h2_error, void *userdata);
void grpc_server_set_event_cb(struct grpc_server *s, grpc_server_event_fn *fn, void *userdata);
/*
 * Runs when any connection of the server ends, however it ended (after its calls' close
 * callbacks), with the id grpc_call_conn_id() gave its calls: for a caller that waits for a
 * client to be done with a connection (the kubelet closes it once a ListAndWatch stream it
 * was reading has ended). Same re-entrancy rules as a close callback.
 */
typedef void grpc_server_conn_closed_fn(struct grpc_server *s, uint64_t conn_id, void *userdata);
void grpc_server_set_conn_closed_cb(struct grpc_server *s, grpc_server_conn_closed_fn *fn,
				    void *userdata);

/*
 * Feeds bytes to a server connection with no socket: for the fuzzer and byte-level tests.
 * grpc_server_conn_new_mem() creates a connection whose output is appended to @out (may be
 * NULL: output discarded); the server's SETTINGS are in @out when it returns. Returns 0 or
 * -errno; grpc_server_conn_feed() returns 0, or a negative errno once the connection is dead:
 * -EPROTO (HTTP/2 error, GOAWAY with its code sent), -ENOBUFS (max_conn_buffered passed,
 * GOAWAY(ENHANCE_YOUR_CALM) sent), -ECONNRESET (the session ended: peer GOAWAY or EOF, or a
 * graceful shutdown drained). Output is appended during feed and flush, and from the loop
 * when the server has one.
 */
struct grpc_server_conn;
int grpc_server_conn_new_mem(struct grpc_server *s, struct buf *out,
			     struct grpc_server_conn **ret) WARN_UNUSED;
int grpc_server_conn_feed(struct grpc_server_conn *c, const uint8_t *data, size_t len);
/* The peer closed its side (EOF). Returns like grpc_server_conn_feed(); dead afterwards. */
int grpc_server_conn_feed_eof(struct grpc_server_conn *c);
/* Appends pending output (answers given after the feed that carried the request). */
int grpc_server_conn_flush(struct grpc_server_conn *c);
/* Frees a memory connection; its calls close with UNAVAILABLE. NULL-safe, returns NULL. */
struct grpc_server_conn *grpc_server_conn_free(struct grpc_server_conn *c);
/* The connection's id, as grpc_call_conn_id() reports it. */
uint64_t grpc_server_conn_id(const struct grpc_server_conn *c);
/*
 * Sets the peer credentials grpc_call_peer_cred() reports for a memory connection (a socket
 * connection has its own, from SO_PEERCRED at accept), for tests of peer-based decisions.
 */
void grpc_server_conn_set_peer_cred(struct grpc_server_conn *c, pid_t pid, uid_t uid);

/* --- calls (server side) --- */

/*
 * Sends one message (without prefix; the layer adds it). For a unary call, at most once.
 * Returns 0, -EMSGSIZE (over max_send_msg), -EPIPE (call already closed or finished),
 * -EALREADY (unary: a message was sent already), -ENOMEM. Output is buffered without limit
 * only up to max_conn_buffered: past it the connection gets GOAWAY(ENHANCE_YOUR_CALM) and is
 * closed from the loop (its calls close with UNAVAILABLE), and this returns -ENOBUFS.
 * Output is flushed later, never inside this call, so no close callback runs from inside it.
 */
int grpc_call_send(struct grpc_call *c, const uint8_t *msg, size_t len);
/*
 * A message to send on many calls without a copy per call (one ListAndWatch list for every
 * watcher): prefixed once, reference-counted, immutable. grpc_shared_msg_new() copies @msg
 * and returns 0 (one reference, the caller's), -ENOMEM or -EMSGSIZE (over 4 GiB);
 * grpc_shared_msg_unref() drops the caller's reference (calls keep their own), NULL-safe,
 * returns NULL. grpc_shared_msg_payload() gives the message without its prefix.
 * Loop thread only, like the calls.
 */
struct grpc_shared_msg;
int grpc_shared_msg_new(const uint8_t *msg, size_t len, struct grpc_shared_msg **ret) WARN_UNUSED;
struct grpc_shared_msg *grpc_shared_msg_unref(struct grpc_shared_msg *m);
const uint8_t *grpc_shared_msg_payload(const struct grpc_shared_msg *m, size_t *ret_len);
/*
 * Sends @m as the call's current state (server streaming: ListAndWatch): a message sent
 * with this function that no byte of has left yet is replaced, so a peer that does not read
 * holds at most the message being written plus the newest one (references to shared
 * messages, not copies), however often the state changes. Returns 1 (a pending message was
 * replaced), else as grpc_call_send() (never -ENOMEM).
 */
int grpc_call_send_latest(struct grpc_call *c, struct grpc_shared_msg *m);
/*
 * Ends the call with @status and @message (may be NULL; percent-encoded on the wire).
 * A call that sent nothing yet gets a Trailers-Only response. Returns 0, -EPIPE or -ENOMEM.
 * The close callback runs later, once the status is flushed (not from inside this call).
 * A unary call finished with OK must have sent its one message: gRPC clients fail a unary
 * response without one ("cardinality violation"), and this layer does not invent it.
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
/*
 * The credentials of the process on the far side of the call's connection, taken with
 * SO_PEERCRED when it was accepted (the process that connected, as seen from our PID
 * namespace: 0 for a process outside it). Either ret_ pointer may be NULL. Returns 0, or
 * -ENODATA when unknown (a memory connection without grpc_server_conn_set_peer_cred()).
 */
int grpc_call_peer_cred(const struct grpc_call *c, pid_t *ret_pid, uid_t *ret_uid);

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
 *   -ECONNRESET    connection closed before a status (also: RST_STREAM from the server,
 *                  or GOAWAY refusing the call, as a server over its connection cap does)
 * For transport errors @status is the code grpc-go would report (UNAVAILABLE,
 * DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, or the RST_STREAM code's mapping).
 * A response that is not gRPC (no application/grpc content-type, or :status other than 200)
 * arrives as r == 0 with @status mapped from the HTTP status as grpc-go maps it (404 ->
 * UNIMPLEMENTED, 503 -> UNAVAILABLE, ..., others UNKNOWN) and grpc-go's text.
 * @message always holds a human-readable description (for transport errors too: -ENOENT
 * and -ECONNREFUSED name the socket path). The call is sent with te: trailers, :authority
 * (opts), content-type application/grpc, user-agent edgegpu/<version> and, with a timeout,
 * grpc-timeout in grpc-go's format; after the outcome the client sends GOAWAY and closes.
 * Pointers are valid only during the callback. The call object is freed after it returns.
 */
typedef void grpc_client_done_fn(struct grpc_client_call *cc, int r, enum grpc_status status,
				 const char *message, const uint8_t *resp, size_t len,
				 void *userdata);

struct grpc_client_opts {
	usec_t timeout;	       /* deadline from now; 0: none (no grpc-timeout sent) */
	size_t max_recv_msg;   /* 0: 16 MiB */
	const char *authority; /* NULL: "localhost" */
	/* NULL, or extra request metadata: name, value, name, value, ..., NULL (at most 4 pairs;
	 * lowercase names, as HTTP/2 wants), e.g. containerd's "containerd-namespace". */
	const char *const *metadata;
	/* A server-streaming method: every response message is kept, concatenated in order, as
	 * @resp (for a protobuf reply, concatenation merges: repeated bytes fields can be read
	 * one after the other); none at all is not an error. */
	bool server_streaming;
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
/*
 * Holds a connection to the server at @sock open with no call on it: the HTTP/2 client
 * preface and SETTINGS, then only what the protocol needs (SETTINGS and PING answered). Its
 * use is the end: the kernel closes the server's side the moment that process dies, so
 * @done says at once that the server went away. @done runs exactly once, from the loop,
 * never inside this function, when the connection cannot be made (-ENOENT, -ECONNREFUSED)
 * or ends: the server closed it (-ECONNRESET: EOF, a reset, or its GOAWAY, after which we
 * close) or broke the protocol (-EPROTO); @resp is NULL. A server may close an idle
 * connection (edgegpu's after idle_timeout): the caller decides whether to connect again.
 * grpc_client_call_cancel() closes it without @done; grpc_client_call_peer_cred() works
 * as for a call. Returns 0 or -errno (then @done never runs).
 */
int grpc_client_hold_start(struct loop *l, const char *sock, grpc_client_done_fn *done,
			   void *userdata, struct grpc_client_call **ret) WARN_UNUSED;
/* Aborts the call (or hold): @done does not run. NULL-safe, returns NULL. */
struct grpc_client_call *grpc_client_call_cancel(struct grpc_client_call *cc);
/*
 * The credentials of the server process on the far side of @cc's connection (SO_PEERCRED: the
 * process that listened, as seen from our PID namespace, 0 for one outside it), for the
 * daemon to tell the kubelet's ListAndWatch stream (plugin_expect_kubelet()). Valid once
 * connected, and from inside @done. Either ret_ pointer may be NULL. Returns 0, -ENOTCONN
 * (not connected, or the connection is gone) or -errno from getsockopt().
 */
int grpc_client_call_peer_cred(const struct grpc_client_call *cc, pid_t *ret_pid, uid_t *ret_uid);

/*
 * Blocking form for CLIs and tests: runs a private loop. On success (r == 0) *ret_status,
 * *ret_message (heap) and *ret_resp with *ret_len (heap; NULL when the message is empty) are
 * filled; the caller frees them. Any ret_ pointer may be NULL. Returns 0 or the transport
 * errno; ret_message is set for transport errors too.
 */
int grpc_client_call_sync(const char *sock, const char *path, const uint8_t *req, size_t len,
			  const struct grpc_client_opts *opts, enum grpc_status *ret_status,
			  char **ret_message, uint8_t **ret_resp, size_t *ret_len) WARN_UNUSED;
