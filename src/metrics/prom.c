#include "prom.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

struct prom_name {
	char *name;
	enum prom_type type;
};

static const char *const prom_type_names[] = {
	[PROM_GAUGE] = "gauge",
	[PROM_COUNTER] = "counter",
	[PROM_HISTOGRAM] = "histogram",
	[PROM_UNTYPED] = "untyped",
};

static const char *const histogram_suffixes[] = { "_bucket", "_sum", "_count" };

void prom_labels_push(struct prom_labels *l, const char *name, const char *value)
{
	if (l->n < PROM_LABELS_MAX) {
		l->name[l->n] = name;
		l->value[l->n] = value;
	}
	if (l->n < UINT_MAX)
		l->n++;
}

void prom_init(struct prom *p, struct buf *out)
{
	*p = (struct prom){ .out = out, .cur = -1 };
}

static void prom_fail(struct prom *p, int r)
{
	if (p->err == 0)
		p->err = r;
	if (r == -ENOMEM)
		p->full = true;
}

static bool is_name_char(char c, bool first, bool colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return true;
	if (c == ':')
		return colon;
	return !first && c >= '0' && c <= '9';
}

static bool metric_name_valid(const char *s)
{
	if (!s || !*s)
		return false;
	for (const char *c = s; *c; c++)
		if (!is_name_char(*c, c == s, true))
			return false;
	return true;
}

static bool label_name_valid(const char *s)
{
	if (!s || !*s || strncmp(s, "__", 2) == 0)
		return false;
	for (const char *c = s; *c; c++)
		if (!is_name_char(*c, c == s, false))
			return false;
	return true;
}

/* Is @name @base followed by one of the histogram suffixes? */
static bool is_histogram_part(const char *name, const char *base)
{
	size_t n = strlen(base);

	if (strncmp(name, base, n) != 0)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(histogram_suffixes); i++)
		if (streq(name + n, histogram_suffixes[i]))
			return true;
	return false;
}

static bool name_taken(const struct prom *p, const char *name, enum prom_type type)
{
	for (size_t i = 0; i < p->n_names; i++) {
		const struct prom_name *e = &p->names[i];

		if (streq(e->name, name))
			return true;
		if (e->type == PROM_HISTOGRAM && is_histogram_part(name, e->name))
			return true;
		if (type == PROM_HISTOGRAM && is_histogram_part(e->name, name))
			return true;
	}
	return false;
}

/*
 * Appends @s escaped: backslash and line feed always, '"' when @quote. Bytes that are not
 * UTF-8 become U+FFFD. Each run of plain bytes goes in one append.
 */
static int append_escaped(struct buf *b, const char *s, bool quote)
{
	const unsigned char *run = (const unsigned char *)s, *c = run;
	int r;

	for (;;) {
		const char *esc = NULL;
		int n = utf8_seq(c); /* < 0: one U+FFFD for its first byte, then on */

		if (*c == '\\')
			esc = "\\\\";
		else if (*c == '\n')
			esc = "\\n";
		else if (*c == '"' && quote)
			esc = "\\\"";
		else if (n < 0)
			esc = "\xef\xbf\xbd";
		else if (*c) {
			c += (size_t)n;
			continue;
		}
		r = buf_append(b, run, (size_t)(c - run));
		if (r < 0 || !*c)
			return r;
		r = buf_append(b, esc, strlen(esc));
		if (r < 0)
			return r;
		c++;
		run = c;
	}
}

/* The shortest of %.15g, %.16g and %.17g that reads back as @v (finite, not integral). */
static void format_double(char *s, size_t size, double v)
{
	for (int prec = 15; prec <= 17; prec++) {
		(void)snprintf(s, size, "%.*g", prec, v);
		if (strtod(s, NULL) == v)
			return;
	}
}

/* printf's %lld, without printf (the hot path of a scrape: most values are integers). */
static void format_int(char *s, size_t size, int64_t v)
{
	char tmp[24];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	size_t n = 0, o = 0;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0 && o + 1 < size)
		s[o++] = '-';
	while (n && o + 1 < size)
		s[o++] = tmp[--n];
	s[o] = 0;
}

/* Formats @v as a sample value or an "le" bound into @s (at least 32 bytes). */
static void format_value(char *s, size_t size, double v)
{
	if (isnan(v))
		(void)snprintf(s, size, "NaN");
	else if (isinf(v))
		(void)snprintf(s, size, "%s", v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) <= 9007199254740992.0)
		format_int(s, size, (int64_t)v);
	else
		format_double(s, size, v);
}

void prom_family(struct prom *p, const char *name, enum prom_type type, const char *help)
{
	struct buf *b = p->out;
	size_t start = b->len;
	struct prom_name *e;
	int r = 0;

	p->cur = -1;
	if (p->full)
		return;
	if ((unsigned)type >= ELEMENTSOF(prom_type_names) || !metric_name_valid(name) ||
	    name_taken(p, name, type)) {
		prom_fail(p, -EINVAL);
		return;
	}
	if (p->n_names == p->cap_names) {
		size_t cap = p->cap_names ? p->cap_names * 2 : 32;
		struct prom_name *n = realloc(p->names, cap * sizeof(*n));

		if (!n)
			goto nomem;
		p->names = n;
		p->cap_names = cap;
	}
	e = &p->names[p->n_names];
	e->name = strdup(name);
	if (!e->name)
		goto nomem;
	e->type = type;

	if (help) {
		r = buf_printf(b, "# HELP %s ", name);
		if (r >= 0)
			r = append_escaped(b, help, false);
		if (r >= 0)
			r = buf_append(b, "\n", 1);
	}
	if (r >= 0)
		r = buf_printf(b, "# TYPE %s %s\n", name, prom_type_names[type]);
	if (r < 0) {
		free(e->name);
		goto nomem;
	}
	p->cur = (int)p->n_names++;
	return;
nomem:
	b->len = start;
	prom_fail(p, -ENOMEM);
}

static bool label_names_valid(const struct prom_labels *l, const char *extra)
{
	for (unsigned i = 0; l && i < l->n; i++) {
		if (!label_name_valid(l->name[i]) || (extra && streq(l->name[i], extra)))
			return false;
		for (unsigned j = 0; j < i; j++)
			if (streq(l->name[i], l->name[j]))
				return false;
	}
	return true;
}

static int append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

/* The hot path of a scrape: no printf here. */
static int append_label(struct buf *b, bool first, const char *name, const char *value)
{
	int r = buf_append(b, first ? "{" : ",", 1);

	if (r >= 0)
		r = append_str(b, name);
	if (r >= 0)
		r = buf_append(b, "=\"", 2);
	if (r >= 0)
		r = append_escaped(b, value ? value : "", true);
	if (r >= 0)
		r = buf_append(b, "\"", 1);
	return r;
}

/*
 * Writes one sample line: the current family's name + @suffix, the labels of @l plus
 * @extra_name=@extra_value when @extra_name is set, and @value already formatted.
 */
static void write_sample(struct prom *p, const char *suffix, const struct prom_labels *l,
			 const char *extra_name, const char *extra_value, const char *value)
{
	struct buf *b = p->out;
	size_t start = b->len;
	bool first = true;
	int r;

	r = append_str(b, p->names[p->cur].name);
	if (r >= 0 && suffix)
		r = append_str(b, suffix);
	for (unsigned i = 0; r >= 0 && l && i < l->n; i++, first = false)
		r = append_label(b, first, l->name[i], l->value[i]);
	if (r >= 0 && extra_name) {
		r = append_label(b, first, extra_name, extra_value);
		first = false;
	}
	if (r >= 0)
		r = append_str(b, first ? " " : "} ");
	if (r >= 0)
		r = append_str(b, value);
	if (r >= 0)
		r = buf_append(b, "\n", 1);
	if (r < 0) {
		b->len = start;
		prom_fail(p, -ENOMEM);
	}
}

/*
 * May the current family take a sample with @suffix and labels @l (+ @extra)? Records the
 * error when not.
 */
static bool sample_ok(struct prom *p, const char *suffix, const struct prom_labels *l,
		      const char *extra)
{
	enum prom_type type;
	bool suffix_ok = !suffix;

	if (p->full)
		return false;
	if (p->cur < 0) {
		prom_fail(p, -EINVAL);
		return false;
	}
	type = p->names[p->cur].type;
	if (type == PROM_HISTOGRAM) {
		suffix_ok = false;
		for (size_t i = 0; suffix && i < ELEMENTSOF(histogram_suffixes); i++)
			suffix_ok = suffix_ok || streq(suffix, histogram_suffixes[i]);
	}
	/* Before looking at the names: past PROM_LABELS_MAX they were never stored. */
	if (l && l->n + (extra ? 1 : 0) > PROM_LABELS_MAX) {
		prom_fail(p, -E2BIG);
		return false;
	}
	if (!suffix_ok || !label_names_valid(l, extra)) {
		prom_fail(p, -EINVAL);
		return false;
	}
	return true;
}

void prom_sample(struct prom *p, const char *suffix, const struct prom_labels *l, double value)
{
	char v[32];
	bool le = false;

	if (!sample_ok(p, suffix, l, NULL))
		return;
	if (suffix && streq(suffix, "_bucket")) {
		for (unsigned i = 0; l && i < l->n; i++)
			le = le || streq(l->name[i], "le");
		if (!le) {
			prom_fail(p, -EINVAL);
			return;
		}
	}
	format_value(v, sizeof(v), value);
	write_sample(p, suffix, l, NULL, NULL, v);
}

void prom_histogram(struct prom *p, const struct prom_labels *l, const double *bounds, size_t n,
		    const uint64_t *counts, double sum)
{
	char le[32], v[32];
	uint64_t total = 0;

	if (!sample_ok(p, "_bucket", l, "le"))
		return;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
			prom_fail(p, -EINVAL);
			return;
		}
	}
	for (size_t i = 0; i <= n && !p->full; i++) {
		total += counts[i];
		if (i < n)
			format_value(le, sizeof(le), bounds[i]);
		(void)snprintf(v, sizeof(v), "%" PRIu64, total);
		write_sample(p, "_bucket", l, "le", i < n ? le : "+Inf", v);
	}
	format_value(v, sizeof(v), sum);
	if (!p->full)
		write_sample(p, "_sum", l, NULL, NULL, v);
	(void)snprintf(v, sizeof(v), "%" PRIu64, total);
	if (!p->full)
		write_sample(p, "_count", l, NULL, NULL, v);
}

int prom_finish(struct prom *p)
{
	for (size_t i = 0; i < p->n_names; i++)
		free(p->names[i].name);
	p->names = mfree(p->names);
	p->n_names = p->cap_names = 0;
	p->cur = -1;
	return p->err;
}

int prom_gzip(const void *in, size_t len, struct buf *out)
{
	z_stream z = { 0 };
	size_t left = len;
	int r, zr;

	out->len = 0;
	/* windowBits 15 + 16: a gzip header and trailer around the deflate stream. */
	zr = deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (zr != Z_OK)
		return zr == Z_MEM_ERROR ? -ENOMEM : -EIO;
	z.next_in = (Bytef *)in;
	do {
		uInt chunk = left > UINT_MAX ? UINT_MAX : (uInt)left;
		int flush;

		z.avail_in = chunk;
		left -= chunk;
		flush = left ? Z_NO_FLUSH : Z_FINISH;
		do {
			size_t room = deflateBound(&z, z.avail_in) + 64;

			room = room > UINT_MAX ? UINT_MAX : room;
			r = buf_reserve(out, room);
			if (r < 0)
				goto fail;
			z.next_out = out->data + out->len;
			z.avail_out = (uInt)room;
			zr = deflate(&z, flush);
			out->len += room - z.avail_out;
			if (zr == Z_STREAM_ERROR) {
				r = -EIO;
				goto fail;
			}
		} while (z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	} while (left);
	(void)deflateEnd(&z);
	return 0;
fail:
	(void)deflateEnd(&z);
	out->len = 0;
	return r;
}

/* [@s, @e) without blanks at either end. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
}

/*
 * Is the qvalue [@s, @e) (RFC 9110 section 12.4.2: "0" ["." 0*3DIGIT] / "1" ["." 0*3"0"])
 * valid and above 0?
 */
static bool q_above_zero(const char *s, const char *e)
{
	size_t len = (size_t)(e - s);
	bool zero;

	if (len == 0 || (s[0] != '0' && s[0] != '1') || len > 5 || (len > 1 && s[1] != '.'))
		return false;
	zero = s[0] == '0';
	for (size_t i = 2; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' || (s[0] == '1' && s[i] != '0'))
			return false;
		zero = zero && s[i] == '0';
	}
	return !zero;
}

/*
 * One element of the list, [@s, @e): "coding *( ; param )". Sets [*@name, *@name_end) to the
 * coding and returns whether its q (1 when absent) is above 0; a malformed q refuses.
 */
static bool element_accepts(const char *s, const char *e, const char **name, const char **name_end)
{
	const char *semi = memchr(s, ';', (size_t)(e - s));
	bool ok = true;

	*name = s;
	*name_end = semi ? semi : e;
	trim(name, name_end);
	while (semi) {
		const char *k = semi + 1, *ke, *v, *ve;

		semi = memchr(k, ';', (size_t)(e - k));
		ve = semi ? semi : e;
		ke = memchr(k, '=', (size_t)(ve - k));
		if (!ke)
			continue;
		v = ke + 1;
		trim(&k, &ke);
		trim(&v, &ve);
		if (ke - k == 1 && (*k == 'q' || *k == 'Q'))
			ok = q_above_zero(v, ve);
	}
	return ok;
}

bool prom_accepts_gzip(const char *accept_encoding)
{
	const char *s = accept_encoding;
	int gzip = -1, star = -1; /* -1: not listed, else whether accepted */

	if (!s)
		return false;
	for (;;) {
		const char *comma = strchr(s, ','), *e = comma ? comma : s + strlen(s), *name, *ne;
		bool ok = element_accepts(s, e, &name, &ne);
		size_t n = (size_t)(ne - name);

		if ((n == 4 && strncasecmp(name, "gzip", 4) == 0) ||
		    (n == 6 && strncasecmp(name, "x-gzip", 6) == 0))
			gzip = gzip == 1 || ok;
		else if (n == 1 && *name == '*')
			star = star == 1 || ok;
		if (!comma)
			break;
		s = comma + 1;
	}
	return gzip >= 0 ? gzip == 1 : star == 1;
}
