#pragma once

/* Socket helpers shared by the gRPC server (grpc.c) and client (grpc-client.c); not public. */

#include <stddef.h>

struct buf;
struct h2_session;

/*
 * Writes @h2's output to the non-blocking socket @fd: what is left in @out from @*off first,
 * then fresh output in pieces of up to @chunk bytes, until the session has nothing more or
 * the socket is full (EAGAIN). Returns 0, or -errno from the session or from send().
 */
int grpc_io_write(int fd, struct h2_session *h2, struct buf *out, size_t *off, size_t chunk);
