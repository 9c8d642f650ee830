#pragma once

/* Socket helpers shared by the gRPC server (grpc-conn.c) and client (grpc-client.c); not public. */

#include <stddef.h>

struct buf;
struct h2_session;

/*
 * Writes @h2's output to the non-blocking socket @fd: what is left in @out from @*off first,
 * then fresh output in pieces of up to @chunk bytes, until the session has nothing more or
 * the socket is full (EAGAIN). Returns 0, or -errno from the session or from send().
 */
int grpc_io_write(int fd, struct h2_session *h2, struct buf *out, size_t *off, size_t chunk);

/* Where grpc_io_read() stopped (or a negative errno: the socket failed). */
enum grpc_io_read_end {
	GRPC_IO_READ_AGAIN,    /* the socket is drained or @budget spent: read on the next wakeup */
	GRPC_IO_READ_SATED,    /* the session wants no more input (it is ending or terminating) */
	GRPC_IO_READ_REJECTED, /* the session failed on the input: a protocol error */
	GRPC_IO_READ_EOF,      /* the peer closed its side */
};

/*
 * Reads the non-blocking socket @fd into @h2 until the socket is drained (EAGAIN), about
 * @budget bytes are read (fairness between connections), or the session stops. Returns one of
 * enum grpc_io_read_end, or -errno from read().
 */
int grpc_io_read(int fd, struct h2_session *h2, size_t budget);
