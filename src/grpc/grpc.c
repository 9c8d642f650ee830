#include "grpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc-io.h"
#include "h2.h"

/*
 * What the server (grpc-server.c) and the client (grpc-client.c) share: status codes,
 * percent-encoding, grpc-timeout, the message deframer, and the socket write loop.
 */

/* --- status, percent-encoding, grpc-timeout --- */

static const char *const status_names[GRPC_STATUS_COUNT] = {
	[GRPC_STATUS_OK] = "OK",
	[GRPC_STATUS_CANCELLED] = "CANCELLED",
	[GRPC_STATUS_UNKNOWN] = "UNKNOWN",
	[GRPC_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
	[GRPC_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
	[GRPC_STATUS_NOT_FOUND] = "NOT_FOUND",
	[GRPC_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
	[GRPC_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
	[GRPC_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
	[GRPC_STATUS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
	[GRPC_STATUS_ABORTED] = "ABORTED",
	[GRPC_STATUS_OUT_OF_RANGE] = "OUT_OF_RANGE",
	[GRPC_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
	[GRPC_STATUS_INTERNAL] = "INTERNAL",
	[GRPC_STATUS_UNAVAILABLE] = "UNAVAILABLE",
	[GRPC_STATUS_DATA_LOSS] = "DATA_LOSS",
	[GRPC_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

enum grpc_status grpc_status_from_errno(int r)
{
	switch (r) {
	case 0:
		return GRPC_STATUS_OK;
	case -EINVAL:
	case -ENODEV:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case -EXDEV:
		return GRPC_STATUS_FAILED_PRECONDITION;
	case -EMSGSIZE:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case -ETIMEDOUT:
		return GRPC_STATUS_DEADLINE_EXCEEDED;
	case -EOPNOTSUPP:
		return GRPC_STATUS_UNIMPLEMENTED;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

const char *grpc_status_name(int status)
{
	if (status < 0 || status >= GRPC_STATUS_COUNT)
		return "UNKNOWN_STATUS";
	return status_names[status];
}

/*
 * gRPC leaves a space unencoded, but HTTP/2 refuses a field value that starts or ends with
 * one (RFC 9113 8.2.1: nghttp2 drops the header): a space at either end is encoded.
 */
static bool percent_needed(unsigned char c, bool edge)
{
	return c < 0x20 || c > 0x7e || c == '%' || (edge && c == ' ');
}

char *grpc_percent_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	char *out, *o;

	for (const char *p = s; *p; p++)
		n += percent_needed((unsigned char)*p, p == s || !p[1]) ? 3 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	o = out;
	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (percent_needed(c, p == s || !p[1])) {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 0xf];
		} else {
			*o++ = (char)c;
		}
	}
	*o = 0;
	return out;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *grpc_percent_decode(const char *s, size_t len)
{
	char *out = malloc(len + 1), *o;

	if (!out)
		return NULL;
	o = out;
	for (size_t i = 0; i < len; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < len && (hi = hexval(s[i + 1])) >= 0 &&
		    (lo = hexval(s[i + 2])) >= 0) {
			*o++ = (char)(hi << 4 | lo);
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = 0;
	return out;
}

int grpc_timeout_parse(const char *s, size_t len, usec_t *ret)
{
	uint64_t v = 0;

	if (!s || len < 2 || len > 9)
		return -EINVAL;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H':
		v *= 3600 * USEC_PER_SEC;
		break;
	case 'M':
		v *= 60 * USEC_PER_SEC;
		break;
	case 'S':
		v *= USEC_PER_SEC;
		break;
	case 'm':
		v *= USEC_PER_MSEC;
		break;
	case 'u':
		break;
	case 'n':
		v = (v + 999) / 1000;
		break;
	default:
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

void grpc_timeout_format(usec_t usec, char *buf, size_t size)
{
	static const struct {
		char unit;
		usec_t per;
	} units[] = {
		{ 'u', 1 },
		{ 'm', USEC_PER_MSEC },
		{ 'S', USEC_PER_SEC },
		{ 'M', 60 * USEC_PER_SEC },
		{ 'H', 3600 * USEC_PER_SEC },
	};
	const uint64_t max = 99999999;

	if (usec == 0) {
		(void)snprintf(buf, size, "0n");
		return;
	}
	if (usec <= max / 1000) {
		(void)snprintf(buf, size, "%" PRIu64 "n", (uint64_t)usec * 1000);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(units); i++) {
		uint64_t v = usec / units[i].per + ((usec % units[i].per) ? 1 : 0);

		if (v <= max || i + 1 == ELEMENTSOF(units)) {
			(void)snprintf(buf, size, "%" PRIu64 "%c", MIN(v, max), units[i].unit);
			return;
		}
	}
}

/* --- deframer --- */

void grpc_deframer_init(struct grpc_deframer *d, size_t max_msg)
{
	*d = (struct grpc_deframer){ .max_msg = max_msg };
}

void grpc_deframer_release(struct grpc_deframer *d)
{
	buf_release(&d->buf);
	d->off = 0;
}

int grpc_deframer_push(struct grpc_deframer *d, const uint8_t *data, size_t len)
{
	if (d->off > 0) {
		memmove(d->buf.data, d->buf.data + d->off, d->buf.len - d->off);
		d->buf.len -= d->off;
		d->off = 0;
	}
	return buf_append(&d->buf, data, len);
}

int grpc_deframer_next(struct grpc_deframer *d, const uint8_t **ret_msg, size_t *ret_len,
		       uint8_t *ret_flag)
{
	const uint8_t *p = d->buf.data + d->off;
	size_t avail = d->buf.len - d->off, len;

	if (avail < GRPC_PREFIX_LEN)
		return 0;
	len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
	*ret_flag = p[0];
	if (p[0] > 1)
		return -EBADMSG;
	if (len > d->max_msg) {
		*ret_len = len;
		return -EMSGSIZE;
	}
	if (avail - GRPC_PREFIX_LEN < len)
		return 0;
	*ret_msg = p + GRPC_PREFIX_LEN;
	*ret_len = len;
	d->off += GRPC_PREFIX_LEN + len;
	return 1;
}

size_t grpc_deframer_pending(const struct grpc_deframer *d)
{
	return d->buf.len - d->off;
}

/* --- socket output --- */

int grpc_io_write(int fd, struct h2_session *h2, struct buf *out, size_t *off, size_t chunk)
{
	int r = 0;

	for (;;) {
		ssize_t n;

		if (*off == out->len) {
			out->len = *off = 0;
			r = h2_session_send(h2, out, chunk);
			if (r < 0 || out->len == 0)
				break;
		}
		n = send(fd, out->data + *off, out->len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				r = -errno;
			break;
		}
		*off += (size_t)n;
	}
	return r;
}

int grpc_io_read(int fd, struct h2_session *h2, size_t budget)
{
	uint8_t buf[16384];
	size_t total = 0;

	while (total < budget) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0) {
			total += (size_t)n;
			if (h2_session_recv(h2, buf, (size_t)n) < 0)
				return GRPC_IO_READ_REJECTED;
			if (!h2_session_want_read(h2))
				return GRPC_IO_READ_SATED;
			continue;
		}
		if (n == 0)
			return GRPC_IO_READ_EOF;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			break;
		return -errno;
	}
	return GRPC_IO_READ_AGAIN;
}
