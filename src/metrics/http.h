#pragma once

/*
 * http: a small HTTP/1.1 server for /metrics and the health endpoints, libmicrohttpd driven
 * by our loop (MHD's epoll fd and its timeout on the loop, no thread of its own).
 *
 * The server accepts on its own listening socket and hands each connection to MHD, keeping a
 * table of them so that nothing a peer does holds a connection for long, and a newcomer (the
 * kubelet's liveness probe: a fresh connection and a request sent at once) always finds room:
 * - a connection must send a whole request (headers and body) within @timeout of its accept,
 *   or of the end of its previous answer (keep-alive), and an answer must be sent in full
 *   within @timeout of being queued: deadlines, not idle timeouts, so a byte every few seconds
 *   does not keep a connection (MHD's own idle timeout, the same value, applies as well);
 * - at max_connections (or max_per_ip from one address), the newcomer takes the place of the
 *   oldest connection still reading a request (idle keep-alive included), else of the oldest
 *   whose answer is not drained; when every connection is being answered or was accepted in
 *   the same batch (MHD has not read it yet), the newcomer is closed at once and counted as
 *   refused, never left waiting in the backlog;
 * - a deferred request (http_defer()) holds no slot: it waits for the handler, which bounds
 *   the wait, and at most max_deferred wait at once.
 * A connection closed by a deadline or to make room is counted in http_stats.evicted. The
 * memory of a connection is bounded too (request line and headers beyond it get 414/431 from
 * MHD). GET and HEAD reach the handler, HEAD answered without a body by MHD; any other method
 * gets 405 with "Allow: GET, HEAD" without reaching it. A request body is read and dropped
 * (413 past max_request_bytes).
 *
 * Threads: everything runs on the loop's thread, the handler included; no function here may
 * be called from another thread. MHD's messages go to the log at debug level.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loop.h"
#include "util.h"

struct http_server;
struct http_request;

struct http_opts {
	/*
	 * "[host]:port": ":9400" (every IPv4 and IPv6 address where the host has IPv6),
	 * "0.0.0.0:9400", "127.0.0.1:0" (a free port: see http_server_port()), "[::1]:9400",
	 * "[::]:9400" (IPv6 only). Numeric addresses only: host names are not resolved.
	 */
	const char *address;
	unsigned max_connections; /* connections at once, deferred ones aside; 0: 16 */
	/* request and write deadline, and idle timeout; 0: 10 s; rounded up to whole seconds */
	usec_t timeout;
	size_t max_request_bytes; /* memory of one connection; 0: 8 KiB */
	unsigned max_per_ip;	  /* connections per client address; 0: no limit of its own */
	unsigned max_deferred;	  /* deferred requests at once; 0: 64 */
};

/*
 * Runs on the loop for each complete GET or HEAD request. It answers with http_respond()
 * before returning, or calls http_defer() and answers later with http_respond() (on the loop's
 * thread). Returning without either is a bug: the client gets 500. @r is owned by the server;
 * it stays valid until http_respond() returns or the server is freed.
 */
typedef void http_handler_fn(struct http_request *r, void *userdata);

/*
 * Binds and listens on o->address (SOCK_CLOEXEC, SO_REUSEADDR) and serves on @l. Returns 0,
 * -EINVAL (a bad address or option: *@reterr says which part), -EADDRINUSE, -EACCES,
 * -EADDRNOTAVAIL, -ENOMEM, ... and then *@reterr, when @reterr is not NULL, is a heap message
 * the caller frees.
 */
int http_server_new(struct loop *l, const struct http_opts *o, http_handler_fn *fn, void *userdata,
		    struct http_server **ret, char **reterr) WARN_UNUSED;
/*
 * Closes every connection; deferred requests get 503 first (as far as their sockets take
 * it at once). Not from inside the handler. NULL-safe, returns NULL.
 */
struct http_server *http_server_free(struct http_server *s);
/* The bound port (the one the kernel chose for port 0). */
unsigned http_server_port(const struct http_server *s);

/* "GET" or "HEAD". */
const char *http_request_method(const struct http_request *r);
/* The path, percent-decoded, without the query string. */
const char *http_request_path(const struct http_request *r);
/* A request header (name case-insensitive), or NULL when absent. */
const char *http_request_header(const struct http_request *r, const char *name);

/*
 * Suspends the connection until http_respond(); only from inside the handler. The connection
 * then holds no slot and has no deadline of ours: the caller answers within a bounded time.
 * Returns 0, -EBUSY when max_deferred requests wait already (answer now instead), or -EINVAL
 * outside the handler or when @r was answered or deferred already.
 */
int http_defer(struct http_request *r);

/*
 * Answers @r with @status and a copy of @body. @content_type and @content_encoding may be
 * NULL (no such header). Returns 0, -EINVAL (a header value MHD refuses: CR, LF) or -ENOMEM;
 * the request is finished either way (on failure the connection is closed without answer).
 * @r is invalid after this returns.
 */
int http_respond(struct http_request *r, unsigned status, const char *content_type,
		 const char *content_encoding, const void *body, size_t len);
/*
 * The same with any headers: @headers is a NULL-terminated list of name, value pairs (may be
 * NULL).
 */
int http_respond_headers(struct http_request *r, unsigned status, const char *const *headers,
			 const void *body, size_t len);

/* Why the server closed a connection itself. */
enum http_evict {
	HTTP_EVICT_FULL,	     /* made room for a new connection */
	HTTP_EVICT_REQUEST_DEADLINE, /* no whole request within the timeout */
	HTTP_EVICT_WRITE_DEADLINE,   /* an answer not drained within the timeout */
	HTTP_EVICT_COUNT,
};
/* "full", "request_deadline", "write_deadline" (metric label values); NULL when out of range. */
const char *http_evict_reason(enum http_evict e);

struct http_stats {
	uint64_t requests;    /* requests answered, 405s included */
	uint64_t connections; /* connections handed to MHD */
	uint64_t refused; /* connections closed at once: no room (none to evict), or no memory */
	uint64_t evicted[HTTP_EVICT_COUNT]; /* connections closed by the server, by reason */
	unsigned open;			    /* connections open now, deferred ones included */
};
/* Copies the server's counters into *@ret. */
void http_server_get_stats(const struct http_server *s, struct http_stats *ret);
