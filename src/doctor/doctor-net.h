#pragma once

/*
 * doctor-net: the doctor's bounded, blocking socket probes. Each call opens its own socket,
 * never waits past its @timeout_ms, closes what it opened and logs nothing; errors come back
 * as negative errno plus, where the caller shows them, a heap message (*reterr, caller frees).
 * Any thread; no shared state.
 */

#include <stddef.h>

#include "util.h"

/*
 * Connects to the unix stream socket at @path and closes the connection at once: does anyone
 * accept there? Returns 0, or -ENOENT (no such file), -ENOTSOCK (the file is not a socket),
 * -ECONNREFUSED (a socket file nobody listens on: left over by a process that died),
 * -ETIMEDOUT (the listener's backlog stayed full for @timeout_ms: hung), -EACCES,
 * -ENAMETOOLONG (over sun_path), or another -errno of connect().
 */
int doctor_net_unix_probe(const char *path, unsigned timeout_ms) WARN_UNUSED;

/* An HTTP answer: the status code and the body (NUL-terminated heap string). */
struct doctor_net_http {
	unsigned status;
	char *body;
	size_t body_len;
};

void doctor_net_http_release(struct doctor_net_http *h);

/* The largest answer doctor_net_http_get*() read (headers and body): Docker's image inspect
 * JSON of a many-layered image included. */
#define DOCTOR_NET_HTTP_MAX ((size_t)4 << 20)

/*
 * GET http://@address@path with HTTP/1.1 and "Connection: close", reading until the server
 * closes, all within @timeout_ms. @address is as edgegpu.metrics.address takes it
 * (address_parse(): "host:port", "[v6]:port", ":port"); an address without a host
 * (":9400") or with an unspecified one (0.0.0.0, [::]) is reached on loopback (127.0.0.1 or
 * [::1]). The host actually dialled is written to @ret_url ("http://127.0.0.1:9400/readyz",
 * heap, caller frees; may be NULL). A chunked body is decoded. Returns 0 and fills @ret
 * (release it with doctor_net_http_release()), or -EINVAL (a bad address), -ECONNREFUSED,
 * -ETIMEDOUT, -EFBIG (over DOCTOR_NET_HTTP_MAX), -EBADMSG (not HTTP), -ENOMEM or another
 * -errno, with *reterr saying what failed (may be NULL).
 */
int doctor_net_http_get(const char *address, const char *path, unsigned timeout_ms,
			struct doctor_net_http *ret, char **ret_url, char **reterr) WARN_UNUSED;

/*
 * GET @path (already escaped) over the unix stream socket @sock, as Docker's Engine API is
 * reached, otherwise as doctor_net_http_get(): "Connection: close", everything within
 * @timeout_ms, a chunked body decoded. Returns 0 and fills @ret, or -ENOENT, -ECONNREFUSED,
 * -ETIMEDOUT, -EFBIG, -EBADMSG, -ENOMEM or another -errno, with *reterr naming @sock and what
 * failed (may be NULL).
 */
int doctor_net_http_get_unix(const char *sock, const char *path, unsigned timeout_ms,
			     struct doctor_net_http *ret, char **reterr) WARN_UNUSED;
