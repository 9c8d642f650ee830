/*
 * libFuzzer target for the doctor's TOML reader (doctor-toml.h): the bytes as a containerd
 * config.toml. Findings, besides crashes and leaks: an INT or FLOAT value that is not a TOML
 * number of that type, a BOOL that is not true/false, an entry with no path or a NULL
 * segment, a line outside the text, two entries with one path (duplicates are an error), a
 * failure without its message and line or with *ret set, an answer that changes when a
 * newline is added after the text, and a document that does not round-trip: each entry
 * written back as `"seg"."seg" = value` (strings escaped, arrays as their string elements)
 * must parse to the same entries, of the same types, with the same values.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool digits(const char *s, const char *ok, bool *any)
{
	bool prev = false;

	*any = false;
	for (; *s; s++) {
		if (strchr(ok, *s)) {
			prev = *any = true;
			continue;
		}
		if (*s != '_' || !prev || !s[1] || !strchr(ok, s[1]))
			return false;
		prev = false;
	}
	return *any;
}

/* TOML's integer: [+-]dec (no leading zero), or 0x/0o/0b digits, '_' only between digits. */
static bool toml_int(const char *s)
{
	bool any;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b'))
		return digits(s + 2,
			      s[1] == 'x' ? "0123456789abcdefABCDEF" :
			      s[1] == 'o' ? "01234567" :
					    "01",
			      &any);
	s += *s == '+' || *s == '-';
	if (s[0] == '0' && s[1])
		return false;
	return digits(s, "0123456789", &any);
}

/* Whether s[0..n) is digits of @ok with '_' only between them, as digits() reads a string. */
static bool digits_n(const char *s, size_t n, const char *ok)
{
	char *part = strndup(s, n);
	bool any, r;

	if (!part)
		abort();
	r = digits(part, ok, &any);
	free(part);
	return r;
}

/*
 * TOML's float: int part, then .frac and/or e[+-]exp, each digits; or [+-]inf/nan. Any length:
 * the parser takes a number of any length, so the oracle must too (it once refused 256 chars
 * and more, and the fuzzer called a valid float a bug).
 */
static bool toml_float(const char *s)
{
	const char *dot, *e;
	bool any;

	s += *s == '+' || *s == '-';
	if (streq(s, "inf") || streq(s, "nan"))
		return true;
	e = strpbrk(s, "eE");
	dot = strchr(s, '.');
	if ((!e && !dot) || (e && dot && dot > e))
		return false;
	if (!digits_n(s, (size_t)((dot ? dot : e) - s), "0123456789") ||
	    (s[0] == '0' && s[1] != (dot ? '.' : *e)))
		return false;
	if (dot &&
	    !digits_n(dot + 1, (size_t)((e ? e : dot + strlen(dot)) - dot - 1), "0123456789"))
		return false;
	if (e) {
		const char *x = e + 1 + (e[1] == '+' || e[1] == '-');

		if (!digits(x, "0123456789", &any))
			return false;
	}
	return true;
}

static void put_string(struct buf *b, const char *s)
{
	if (buf_append(b, "\"", 1) < 0)
		abort();
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int r;

		if (c == '"' || c == '\\')
			r = buf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			r = buf_printf(b, "\\u%04x", c);
		else
			r = buf_append(b, s, 1);
		if (r < 0)
			abort();
	}
	if (buf_append(b, "\"", 1) < 0)
		abort();
}

/* The document written back, one line per entry. */
static void write_back(const struct doctor_toml *t, struct buf *b)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct doctor_toml_entry *e = &t->e[i];

		for (size_t k = 0; k < e->n_path; k++) {
			if (k && buf_append(b, ".", 1) < 0)
				abort();
			put_string(b, e->path[k]);
		}
		if (buf_append(b, " = ", 3) < 0)
			abort();
		if (e->type == DOCTOR_TOML_STRING) {
			put_string(b, e->value);
		} else if (e->type == DOCTOR_TOML_ARRAY) {
			if (buf_append(b, "[", 1) < 0)
				abort();
			for (size_t k = 0; k < e->n_strv; k++) {
				if (k && buf_append(b, ", ", 2) < 0)
					abort();
				put_string(b, e->strv[k]);
			}
			if (buf_append(b, "]", 1) < 0)
				abort();
		} else if (buf_printf(b, "%s", e->value) < 0) {
			abort();
		}
		if (buf_append(b, "\n", 1) < 0)
			abort();
	}
}

static bool same_strv(char **a, size_t na, char **b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!streq(a[i], b[i]))
			return false;
	return true;
}

/* Same entries, types and values (lines aside when @lines is false). */
static bool same_doc(const struct doctor_toml *a, const struct doctor_toml *b, bool lines)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct doctor_toml_entry *x = &a->e[i], *y = &b->e[i];

		if (x->type != y->type || (lines && x->line != y->line) ||
		    !same_strv(x->path, x->n_path, y->path, y->n_path) ||
		    !same_strv(x->strv, x->n_strv, y->strv, y->n_strv) ||
		    (x->value && (!y->value || !streq(x->value, y->value))) ||
		    (!x->value && y->value))
			return false;
	}
	return true;
}

static void check_doc(const struct doctor_toml *t, unsigned lines)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct doctor_toml_entry *e = &t->e[i];

		if (e->n_path == 0 || e->line == 0 || e->line > lines)
			abort();
		for (size_t k = 0; k < e->n_path; k++)
			if (!e->path[k])
				abort();
		if (doctor_toml_get(t, (const char *const *)e->path, e->n_path) != e)
			abort(); /* the first entry with this path is this one: no duplicate */
		if (e->type == DOCTOR_TOML_ARRAY ? e->value != NULL : e->value == NULL)
			abort();
		if (e->type != DOCTOR_TOML_ARRAY && e->n_strv)
			abort();
		for (size_t k = 0; k < e->n_strv; k++)
			if (!e->strv[k])
				abort();
		if (e->type == DOCTOR_TOML_BOOL && !streq(e->value, "true") &&
		    !streq(e->value, "false"))
			abort();
		if (e->type == DOCTOR_TOML_INT && !toml_int(e->value))
			abort();
		if (e->type == DOCTOR_TOML_FLOAT && !toml_float(e->value))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doctor_toml *t = (struct doctor_toml *)&size, *t2 = NULL;
	struct buf back = { 0 };
	unsigned line = 0, lines = 1;
	char *err = NULL, *more;
	int r;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	r = doctor_toml_parse((const char *)data, size, &t, &line, &err);
	if (r < 0) {
		if (r != -EINVAL || !err || !*err || line == 0 || line > lines ||
		    t != (struct doctor_toml *)&size)
			abort();
		free(err);
		t = NULL;
	} else {
		if (r != 0 || err || !t)
			abort();
		check_doc(t, lines);
		write_back(t, &back);
		if (doctor_toml_parse((const char *)back.data, back.len, &t2, NULL, NULL) != 0 ||
		    !same_doc(t, t2, false))
			abort();
		t2 = doctor_toml_free(t2);
	}

	/* A newline after the text changes nothing (unless it makes a lone CR a CRLF). */
	if (size == 0 || data[size - 1] != '\r') {
		more = malloc(size + 1);
		if (!more)
			abort();
		memcpy(more, data, size);
		more[size] = '\n';
		r = doctor_toml_parse(more, size + 1, &t2, NULL, NULL);
		if ((r == 0) != (t != NULL) || (t && !same_doc(t, t2, true)))
			abort();
		doctor_toml_free(t2);
		free(more);
	}
	doctor_toml_free(t);
	buf_release(&back);
	return 0;
}
