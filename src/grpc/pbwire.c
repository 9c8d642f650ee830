#include "pbwire.h"

#include <errno.h>

static int read_varint(struct pb_reader *r, uint64_t *ret)
{
	uint64_t v = 0;

	/* Tags and short lengths are one byte: the common case of a list of IDs. */
	if (r->p < r->end && !(*r->p & 0x80)) {
		*ret = *r->p++;
		return 0;
	}

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (r->p >= r->end)
			return -EBADMSG;
		b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -EBADMSG;
}

int pb_next(struct pb_reader *r, struct pb_field *f)
{
	uint64_t key, len;

	if (r->p >= r->end)
		return 0;
	if (read_varint(r, &key) < 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX)
		return -EBADMSG;
	f->number = (uint32_t)(key >> 3);
	f->varint = 0;
	f->data = NULL;
	f->len = 0;
	f->wire = (uint32_t)(key & 7);
	switch (f->wire) {
	case PB_VARINT:
		return read_varint(r, &f->varint) < 0 ? -EBADMSG : 1;
	case PB_I64:
	case PB_I32: {
		size_t n = f->wire == PB_I64 ? 8 : 4;

		if ((size_t)(r->end - r->p) < n)
			return -EBADMSG;
		for (size_t i = 0; i < n; i++)
			f->varint |= (uint64_t)r->p[i] << (8 * i);
		r->p += n;
		return 1;
	}
	case PB_LEN:
		if (read_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p))
			return -EBADMSG;
		f->data = r->p;
		f->len = (size_t)len;
		r->p += len;
		return 1;
	default:
		return -EBADMSG; /* groups (3, 4) are not used by these APIs */
	}
}
