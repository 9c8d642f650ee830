/*
 * Arbitrary bytes into a server session: grpc_server_conn_feed() -> nghttp2_session_mem_recv,
 * then EOF, with a method table holding a unary and a server-streaming method (modelled on
 * nghttp2's own fuzz target, which runs a whole session through mem_recv with no I/O).
 */

#include <stddef.h>
#include <stdint.h>

#include "grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_close(struct grpc_call *call, enum grpc_status status, void *userdata)
{
	(void)call;
	(void)status;
	(*(unsigned *)userdata)++;
}

static void h_unary(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	grpc_call_set_close_cb(call, on_close, userdata);
	if (len > 0 && req[0] == 'e') {
		/* An error with a message that needs percent-encoding, Trailers-Only. */
		(void)grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "bad \xc3\xa9 100%");
		return;
	}
	(void)grpc_call_send(call, req, len);
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void h_stream(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	static const uint8_t snapshot[] = "\x0a\x13\x0a\x04\x64\x65\x76\x30\x12\x07Healthy";

	grpc_call_set_close_cb(call, on_close, userdata);
	/* Stays open (as ListAndWatch does) until the peer or the connection ends it. */
	(void)grpc_call_send(call, snapshot, sizeof(snapshot) - 1);
	(void)grpc_call_send(call, req, len);
}

static const struct grpc_method methods[] = {
	{ "/v1beta1.DevicePlugin/Allocate", false, h_unary },
	{ "/v1beta1.DevicePlugin/ListAndWatch", true, h_stream },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/*
	 * Small limits, so that inputs of fuzzer size can reach them. The input's length picks
	 * a tight buffer cap for odd sizes (the overflow path) and a graceful shutdown before
	 * EOF for multiples of 3, without taking bytes away from the HTTP/2 stream.
	 */
	const struct grpc_limits limits = {
		.max_recv_msg = 4096,
		.max_send_msg = 4096,
		.max_conn_buffered = size % 2 ? 1500 : 64 * 1024,
	};
	struct grpc_server *s = NULL;
	struct grpc_server_conn *c = NULL;
	struct buf out = { 0 };
	unsigned closes = 0;

	if (grpc_server_new(NULL, methods, sizeof(methods) / sizeof(methods[0]), &limits, &closes,
			    &s) < 0)
		return 0;
	if (grpc_server_conn_new_mem(s, &out, &c) < 0)
		goto out;
	/* Odd-sized pieces split frames at arbitrary points; flush between them. */
	for (size_t off = 0; off < size; off += 1021) {
		size_t n = size - off < 1021 ? size - off : 1021;

		if (grpc_server_conn_feed(c, data + off, n) < 0)
			break;
		(void)grpc_server_conn_flush(c);
		out.len = 0; /* the output is produced, not checked */
	}
	if (size % 3 == 0) {
		grpc_server_shutdown(s, 0, NULL, NULL);
		(void)grpc_server_conn_flush(c);
	}
	(void)grpc_server_conn_feed_eof(c);
	c = grpc_server_conn_free(c);
out:
	grpc_server_free(s);
	buf_release(&out);
	return 0;
}
