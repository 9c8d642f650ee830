#pragma once

/*
 * A minimal protobuf wire-format reader for the few messages big enough to matter: a
 * GetPreferredAllocation request for a gpumem node lists every free unit (163,840 IDs is
 * 1 MiB), and decoding it in place saves one allocation per ID. Everything else goes through
 * protobuf-c.
 */

#include <stddef.h>
#include <stdint.h>

struct pb_reader {
	const uint8_t *p;
	const uint8_t *end;
};

enum {
	PB_VARINT = 0,
	PB_I64 = 1,
	PB_LEN = 2,
	PB_I32 = 5,
};

struct pb_field {
	uint32_t number;
	uint32_t wire;
	uint64_t varint;     /* PB_VARINT, PB_I64, PB_I32 */
	const uint8_t *data; /* PB_LEN */
	size_t len;	     /* PB_LEN */
};

static inline void pb_reader_init(struct pb_reader *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->end = p + len;
}

/* Reads the next field. Returns 1 and fills @f, 0 at the end, or -EBADMSG. */
int pb_next(struct pb_reader *r, struct pb_field *f);
