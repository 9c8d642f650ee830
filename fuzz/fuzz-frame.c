/*
 * The gRPC message deframer on arbitrary input, pushed in pieces whose sizes come from the
 * input itself; plus the other parsers of peer text (grpc-timeout, percent-decoding).
 * Layout: byte 0 picks the receive limit, byte 1 the piece size, the rest is the stream.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t limits[] = { 0, 1, 5, 16, 1024, 16 << 20 };
	struct grpc_deframer d;
	size_t piece, off = 2, total = 0;
	char *dec;
	usec_t t;

	if (size < 2)
		return 0;
	grpc_deframer_init(&d, limits[data[0] % (sizeof(limits) / sizeof(limits[0]))]);
	piece = (size_t)data[1] + 1;
	while (off < size) {
		size_t n = size - off < piece ? size - off : piece;
		const uint8_t *msg;
		size_t len;
		uint8_t flag;
		int r;

		if (grpc_deframer_push(&d, data + off, n) < 0)
			break;
		off += n;
		while ((r = grpc_deframer_next(&d, &msg, &len, &flag)) > 0) {
			/* Touch every byte handed out: ASan checks the bounds. */
			for (size_t i = 0; i < len; i++)
				total += msg[i];
			if (flag > 1)
				abort();
		}
		if (r < 0)
			break;
	}
	grpc_deframer_release(&d);

	if (grpc_timeout_parse((const char *)data + 2, size - 2 < 12 ? size - 2 : 12, &t) == 0 &&
	    t == USEC_INFINITY)
		abort(); /* 8 digits of hours stay far below the sentinel */
	dec = grpc_percent_decode((const char *)data + 2, size - 2);
	if (dec && strlen(dec) > size - 2)
		abort();
	free(dec);
	return total == (size_t)-1;
}
