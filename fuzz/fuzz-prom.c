/*
 * libFuzzer target for the Prometheus text writer: a family and one sample (or histogram) with
 * names, help text, label values and a value from the input, then a strict checker of the
 * text format 0.0.4 reads every line of the output back. Findings: a line the checker
 * rejects, a label value that does not decode to what was passed (when it was UTF-8), an
 * accepted name the checker calls invalid, output on error that is not whole lines, a gzip
 * that does not inflate back, crashes and leaks.
 *
 * Layout: byte 0: bits 0-1 the type, bit 6 a fuzzed family name (else "fuzz_metric"), bit 7
 * fuzzed label names (else l0, l1, ...); byte 1: the label count (0-31, past
 * PROM_LABELS_MAX on purpose). Then length-prefixed fields (one length byte): family name,
 * help, and per label its name and value. The last 8 bytes, when there are, are the value.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "prom.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIELDS_MAX (2 + 2 * 32)

/* A NUL-terminated copy of the next length-prefixed field (empty at the end of input). */
static char *next_field(const uint8_t **p, const uint8_t *end)
{
	size_t n = 0;
	char *s;

	if (*p < end) {
		n = **p;
		(*p)++;
		if (n > (size_t)(end - *p))
			n = (size_t)(end - *p);
	}
	s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, *p, n);
	s[n] = 0;
	*p += n;
	return s;
}

static bool oracle_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		for (size_t j = 1; j <= k; j++) {
			if (i + j >= n || (s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

static bool name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* Length of the name at @s ([a-zA-Z_:][a-zA-Z0-9_:]*, no ':' for labels). */
static size_t name_len(const char *s, const char *end, bool colon)
{
	const char *c = s;

	while (c < end && name_char(*c, c == s, colon))
		c++;
	return (size_t)(c - s);
}

/* The checker's state: the family being read. */
struct check {
	char family[256];
	char type[16];
	bool help_seen, type_seen;
	/* the labels of the last sample line, decoded */
	char values[FIELDS_MAX][256 * 6];
	char names[FIELDS_MAX][256];
	size_t n_labels;
	size_t samples;
};

/* Decodes a label value at @s (after the opening quote); returns the end quote or NULL. */
static const char *read_value(const char *s, const char *end, char *out, size_t size)
{
	size_t n = 0;

	while (s < end && *s != '"') {
		char c = *s++;

		if (c == '\n')
			return NULL;
		if (c == '\\') {
			if (s == end)
				return NULL;
			c = *s++;
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return NULL;
		}
		if (n + 1 >= size)
			return NULL;
		out[n++] = c;
	}
	out[n] = 0;
	return s < end ? s : NULL;
}

static bool check_value(const char *s, const char *end)
{
	char tmp[64], *e;
	size_t n = (size_t)(end - s);

	if (n == 0 || n >= sizeof(tmp))
		return false;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	if (streq(tmp, "NaN") || streq(tmp, "+Inf") || streq(tmp, "-Inf"))
		return true;
	if (strspn(tmp, "0123456789+-.e") != n)
		return false; /* no "inf", "nan", hex or blanks */
	(void)strtod(tmp, &e);
	return *e == 0;
}

static bool check_line(struct check *c, const char *s, const char *end)
{
	size_t n;

	if (end - s >= 7 && memcmp(s, "# HELP ", 7) == 0) {
		s += 7;
		n = name_len(s, end, true);
		if (n == 0 || n >= sizeof(c->family) || c->help_seen || c->type_seen || s[n] != ' ')
			return false;
		memcpy(c->family, s, n);
		c->family[n] = 0;
		c->help_seen = true;
		for (s += n + 1; s < end; s++)
			if (*s == '\\' && (s + 1 == end || (s[1] != '\\' && s[1] != 'n')))
				return false;
			else if (*s == '\\')
				s++;
		return true;
	}
	if (end - s >= 7 && memcmp(s, "# TYPE ", 7) == 0) {
		s += 7;
		n = name_len(s, end, true);
		if (n == 0 || n >= sizeof(c->family) || c->type_seen || s[n] != ' ')
			return false;
		if (c->help_seen && (strlen(c->family) != n || memcmp(c->family, s, n) != 0))
			return false;
		memcpy(c->family, s, n);
		c->family[n] = 0;
		c->type_seen = true;
		s += n + 1;
		n = (size_t)(end - s);
		if (n >= sizeof(c->type))
			return false;
		memcpy(c->type, s, n);
		c->type[n] = 0;
		return streq(c->type, "gauge") || streq(c->type, "counter") ||
		       streq(c->type, "histogram") || streq(c->type, "untyped");
	}
	/* A sample of the family whose TYPE came first. */
	if (!c->type_seen)
		return false;
	n = name_len(s, end, true);
	if (n < strlen(c->family) || memcmp(s, c->family, strlen(c->family)) != 0)
		return false;
	{
		const char *suffix = s + strlen(c->family);
		size_t sl = n - strlen(c->family);
		bool hist = streq(c->type, "histogram");

		if (!(sl == 0 && !hist) &&
		    !(hist && ((sl == 7 && memcmp(suffix, "_bucket", 7) == 0) ||
			       (sl == 4 && memcmp(suffix, "_sum", 4) == 0) ||
			       (sl == 6 && memcmp(suffix, "_count", 6) == 0))))
			return false;
	}
	s += n;
	c->n_labels = 0;
	if (s < end && *s == '{') {
		s++;
		while (s < end && *s != '}') {
			if (c->n_labels == FIELDS_MAX)
				return false;
			n = name_len(s, end, false);
			if (n == 0 || n >= sizeof(c->names[0]) || s[n] != '=' || s[n + 1] != '"')
				return false;
			memcpy(c->names[c->n_labels], s, n);
			c->names[c->n_labels][n] = 0;
			s = read_value(s + n + 2, end, c->values[c->n_labels],
				       sizeof(c->values[0]));
			if (!s || !oracle_utf8_valid((const unsigned char *)c->values[c->n_labels],
						     strlen(c->values[c->n_labels])))
				return false;
			c->n_labels++;
			s++; /* the closing quote */
			if (s < end && *s == ',')
				s++;
			else if (s < end && *s != '}')
				return false;
		}
		if (s == end)
			return false;
		s++;
	}
	if (s == end || *s != ' ')
		return false;
	c->samples++;
	return check_value(s + 1, end);
}

/* Checks the whole output; aborts on a bad line. */
static void check_all(const struct buf *b, struct check *c)
{
	const char *s = (const char *)b->data, *end;

	if (b->len == 0)
		return;
	end = s + b->len;
	if (b->data[b->len - 1] != '\n')
		abort();
	if (!oracle_utf8_valid(b->data, b->len))
		abort();
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));

		if (!check_line(c, s, nl)) {
			(void)fprintf(stderr, "bad line: %.*s\n", (int)(nl - s), s);
			abort();
		}
		s = nl + 1;
	}
}

static void check_gzip(const struct buf *b)
{
	struct buf gz = { 0 };
	uint8_t *back;
	uLongf n = b->len + 1;
	z_stream z = { 0 };

	if (b->len == 0 || prom_gzip(b->data, b->len, &gz) < 0)
		return;
	back = malloc(n);
	if (!back || inflateInit2(&z, 15 + 16) != Z_OK)
		abort();
	z.next_in = gz.data;
	z.avail_in = (uInt)gz.len;
	z.next_out = back;
	z.avail_out = (uInt)n;
	if (inflate(&z, Z_FINISH) != Z_STREAM_END || z.total_out != b->len ||
	    memcmp(back, b->data, b->len) != 0)
		abort();
	inflateEnd(&z);
	free(back);
	buf_release(&gz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum prom_type types[] = { PROM_GAUGE, PROM_COUNTER, PROM_HISTOGRAM,
						PROM_UNTYPED };
	static const double bounds[] = { 0.25, 1, 2.5 };
	static const uint64_t counts[] = { 1, 0, 7, 2 };
	char *fields[FIELDS_MAX] = { 0 }, gen[32][4];
	const uint8_t *p = data + 2, *end = data + size;
	struct prom_labels l = { 0 };
	struct buf b = { 0 };
	struct check *c;
	struct prom pr;
	double value = 1;
	unsigned n;
	int err;

	if (size < 2)
		return 0;
	if (size >= 10) {
		memcpy(&value, end - 8, 8);
		end -= 8;
	}
	n = data[1] % 32;
	fields[0] = next_field(&p, end);
	fields[1] = next_field(&p, end);
	for (unsigned i = 0; i < n; i++) {
		fields[2 + 2 * i] = next_field(&p, end);
		fields[3 + 2 * i] = next_field(&p, end);
		(void)snprintf(gen[i], sizeof(gen[i]), "l%u", i);
		prom_labels_push(&l, data[0] & 0x80 ? fields[2 + 2 * i] : gen[i],
				 fields[3 + 2 * i]);
	}

	prom_init(&pr, &b);
	prom_family(&pr, data[0] & 0x40 ? fields[0] : "fuzz_metric", types[data[0] & 3], fields[1]);
	if (types[data[0] & 3] == PROM_HISTOGRAM)
		prom_histogram(&pr, &l, bounds, ELEMENTSOF(bounds), counts, value);
	else
		prom_sample(&pr, NULL, &l, value);
	err = prom_finish(&pr);

	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	check_all(&b, c);
	/* A sample that was accepted is there, with every label value decoded back. */
	if (err == 0) {
		if (c->samples == 0)
			abort();
		if (c->n_labels != n) /* the last line: the sample, or the histogram's _count */
			abort();
		for (unsigned i = 0; i < n; i++) {
			const char *in = fields[3 + 2 * i];

			if (oracle_utf8_valid((const unsigned char *)in, strlen(in)) &&
			    !streq(c->values[i], in))
				abort();
		}
	} else if (err != -EINVAL && err != -E2BIG && err != -ENOMEM) {
		abort();
	}
	check_gzip(&b);
	(void)prom_accepts_gzip((const char *)fields[1]);

	free(c);
	buf_release(&b);
	for (size_t i = 0; i < FIELDS_MAX; i++)
		free(fields[i]);
	return 0;
}
