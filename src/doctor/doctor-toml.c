/* The doctor's TOML reader (doctor-toml.h). */
#include "doctor-toml.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_ENTRIES 8192 /* duplicate detection is quadratic: keep it bounded */
#define MAX_SEGS    64

struct aot {
	char *key; /* an array of tables' path, segments joined by '\x1f' */
	unsigned count;
};

struct parser {
	const char *p, *end;
	unsigned line;
	struct doctor_toml *t;
	char *table[MAX_SEGS]; /* the current [table]'s path */
	size_t n_table;
	struct aot *aot;
	size_t n_aot;
	unsigned depth;
	unsigned err_line;
	char *err;
};

static int fail(struct parser *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parser *x, const char *fmt, ...)
{
	va_list ap;

	if (x->err)
		return -EINVAL;
	va_start(ap, fmt);
	x->err = strdup_vprintf(fmt, ap);
	va_end(ap);
	x->err_line = x->line;
	return x->err ? -EINVAL : -ENOMEM;
}

static bool at_end(const struct parser *x)
{
	return x->p >= x->end;
}

static void skip_ws(struct parser *x)
{
	while (!at_end(x) && (*x->p == ' ' || *x->p == '\t'))
		x->p++;
}

static void skip_comment(struct parser *x)
{
	if (!at_end(x) && *x->p == '#')
		while (!at_end(x) && *x->p != '\n')
			x->p++;
}

static bool at_newline(const struct parser *x)
{
	return !at_end(x) &&
	       (*x->p == '\n' || (*x->p == '\r' && x->p + 1 < x->end && x->p[1] == '\n'));
}

static void take_newline(struct parser *x)
{
	x->p += *x->p == '\r' ? 2 : 1;
	x->line++;
}

/* Whitespace, newlines and comments (inside arrays). */
static void skip_blank(struct parser *x)
{
	for (;;) {
		skip_ws(x);
		skip_comment(x);
		if (!at_newline(x))
			return;
		take_newline(x);
	}
}

/* The end of a line: whitespace, a comment, then a newline or the end of the data. */
static int expect_eol(struct parser *x)
{
	skip_ws(x);
	skip_comment(x);
	if (at_end(x))
		return 0;
	if (!at_newline(x))
		return fail(x, "unexpected '%c' after the value (one key = value per line)", *x->p);
	take_newline(x);
	return 0;
}

static int parse_escape(struct parser *x, struct buf *b)
{
	static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
	const char *k;
	uint32_t c = 0;
	unsigned digits;

	if (at_end(x))
		return fail(x, "unterminated string");
	k = strchr(from, *x->p);
	if (k && *x->p) {
		x->p++;
		return buf_append(b, &to[k - from], 1);
	}
	if (*x->p != 'u' && *x->p != 'U')
		return fail(x, "invalid escape '\\%c' in a string", *x->p);
	digits = *x->p++ == 'u' ? 4 : 8;
	for (unsigned i = 0; i < digits; i++, x->p++) {
		char h = '\0';
		unsigned v;

		if (!at_end(x))
			h = *x->p;
		if (h >= '0' && h <= '9')
			v = (unsigned)(h - '0');
		else if (h >= 'a' && h <= 'f')
			v = (unsigned)(h - 'a' + 10);
		else if (h >= 'A' && h <= 'F')
			v = (unsigned)(h - 'A' + 10);
		else
			return fail(x, "invalid \\u escape in a string");
		c = c << 4 | v;
	}
	if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return fail(x, "invalid Unicode scalar in a \\u escape");
	return buf_put_utf8(b, c);
}

/* A string starting at x->p (a quote); the text goes into @b, NUL-terminated. */
static int parse_string(struct parser *x, struct buf *b, bool multiline_ok)
{
	char q = *x->p;
	bool multi = x->end - x->p >= 3 && x->p[1] == q && x->p[2] == q;
	int r;

	if (multi && !multiline_ok)
		return fail(x, "a key cannot be a multi-line string");
	x->p += multi ? 3 : 1;
	if (multi && at_newline(x))
		take_newline(x); /* a newline right after the opening quotes is trimmed */
	for (;;) {
		unsigned char c;

		if (at_end(x))
			return fail(x, "unterminated string");
		c = (unsigned char)*x->p;
		if (c == (unsigned char)q) {
			if (!multi) {
				x->p++;
				break;
			}
			if (x->end - x->p >= 3 && x->p[1] == q && x->p[2] == q) {
				/* Up to two quotes may end the content: """a"""" is a". */
				size_t extra = 0;

				while (extra < 2 && x->p + 3 + extra < x->end &&
				       x->p[3 + extra] == q)
					extra++;
				if (extra && buf_append(b, x->p, extra) < 0)
					return -ENOMEM;
				x->p += 3 + extra;
				break;
			}
		}
		if (at_newline(x)) {
			if (!multi)
				return fail(x, "unterminated string (a newline inside quotes)");
			take_newline(x);
			if (buf_append(b, "\n", 1) < 0)
				return -ENOMEM;
			continue;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail(x, "control character 0x%02x in a string", c);
		x->p++;
		if (c == '\\' && q == '"') {
			if (multi &&
			    (at_newline(x) || (!at_end(x) && (*x->p == ' ' || *x->p == '\t')))) {
				/* A line-ending backslash trims the whitespace that follows. */
				const char *save = x->p;

				skip_ws(x);
				if (!at_newline(x)) {
					x->p = save;
					return fail(x, "invalid escape '\\ ' in a string");
				}
				while (!at_end(x) &&
				       (at_newline(x) || *x->p == ' ' || *x->p == '\t')) {
					if (at_newline(x))
						take_newline(x);
					else
						x->p++;
				}
				continue;
			}
			r = parse_escape(x, b);
			if (r < 0)
				return r;
			continue;
		}
		if (buf_append(b, &c, 1) < 0)
			return -ENOMEM;
	}
	return buf_append(b, "", 1);
}

static bool is_bare(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

static void free_segs(char **segs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(segs[i]);
}

/* A dotted key into @segs (appended after *@n). */
/*
 * @n bytes at @s as a string. Not strndup(): the input is not NUL-terminated, and strndup may
 * look one byte past @n (ASan's does).
 */
static char *dup_range(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static int parse_key(struct parser *x, char **segs, size_t *n)
{
	for (;;) {
		struct buf b = { 0 };
		int r;

		skip_ws(x);
		if (*n >= MAX_SEGS)
			return fail(x, "a key with more than %d parts", MAX_SEGS);
		if (!at_end(x) && (*x->p == '"' || *x->p == '\'')) {
			r = parse_string(x, &b, false);
			if (r < 0) {
				buf_release(&b);
				return r;
			}
			segs[(*n)++] = (char *)b.data;
		} else {
			const char *s = x->p;

			while (!at_end(x) && is_bare(*x->p))
				x->p++;
			if (x->p == s)
				return at_end(x) || at_newline(x) || *x->p == '=' ?
					       fail(x, "a key is missing") :
					       fail(x, "unexpected '%c' in a key", *x->p);
			segs[*n] = dup_range(s, (size_t)(x->p - s));
			if (!segs[*n])
				return -ENOMEM;
			(*n)++;
		}
		skip_ws(x);
		if (at_end(x) || *x->p != '.')
			return 0;
		x->p++;
	}
}

const struct doctor_toml_entry *doctor_toml_get(const struct doctor_toml *t,
						const char *const *path, size_t n)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (t->e[i].n_path == n && doctor_toml_has_prefix(&t->e[i], path, n))
			return &t->e[i];
	return NULL;
}

bool doctor_toml_has_prefix(const struct doctor_toml_entry *e, const char *const *prefix, size_t n)
{
	if (e->n_path < n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!streq(e->path[i], prefix[i]))
			return false;
	return true;
}

static void entry_release(struct doctor_toml_entry *e)
{
	free_segs(e->path, e->n_path);
	free(e->path);
	free(e->value);
	free_segs(e->strv, e->n_strv);
	free(e->strv);
}

/* Adds an entry named @segs; takes nothing (copies). Returns the entry or NULL (x->err set). */
static struct doctor_toml_entry *add_entry(struct parser *x, char *const *segs, size_t n,
					   enum doctor_toml_type type, unsigned line)
{
	struct doctor_toml *t = x->t;
	struct doctor_toml_entry *e;

	if (doctor_toml_get(t, (const char *const *)segs, n)) {
		x->line = line;
		(void)fail(x, "duplicate key '%s'", segs[n - 1]);
		return NULL;
	}
	if (t->n >= MAX_ENTRIES) {
		(void)fail(x, "more than %d keys", MAX_ENTRIES);
		return NULL;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 32;
		void *p = realloc(t->e, cap * sizeof(*t->e));

		if (!p)
			return NULL;
		t->e = p;
		t->cap = cap;
	}
	e = &t->e[t->n];
	*e = (struct doctor_toml_entry){ .type = type, .line = line };
	e->path = calloc(MAX(n, (size_t)1), sizeof(char *));
	if (!e->path)
		return NULL;
	for (; e->n_path < n; e->n_path++) {
		e->path[e->n_path] = strdup(segs[e->n_path]);
		if (!e->path[e->n_path]) {
			entry_release(e);
			return NULL;
		}
	}
	t->n++;
	return e;
}

static int oom_or_err(const struct parser *x)
{
	return x->err ? -EINVAL : -ENOMEM;
}

static bool valid_number(const char *s, bool *is_float)
{
	const char *d = s + (*s == '+' || *s == '-');
	bool digit = false, prev_digit = false;

	*is_float = false;
	if (streq(d, "inf") || streq(d, "nan")) {
		*is_float = true;
		return true;
	}
	if (d == s && d[0] == '0' && (d[1] == 'x' || d[1] == 'o' || d[1] == 'b')) {
		const char *ok = d[1] == 'x' ? "0123456789abcdefABCDEF" :
				 d[1] == 'o' ? "01234567" :
					       "01";

		d += 2;
		if (!*d)
			return false;
		for (; *d; d++)
			if (!(strchr(ok, *d) || (*d == '_' && d[1] && strchr(ok, d[1]))))
				return false;
		return true;
	}
	for (; *d; d++) {
		if (*d >= '0' && *d <= '9') {
			digit = prev_digit = true;
			continue;
		}
		if (*d == '_' && prev_digit && d[1] >= '0' && d[1] <= '9')
			continue;
		if (*d == '.' || *d == 'e' || *d == 'E') {
			*is_float = true;
			prev_digit = false;
			if ((*d == 'e' || *d == 'E') && (d[1] == '+' || d[1] == '-'))
				d++;
			continue;
		}
		return false;
	}
	return digit;
}

static int parse_value(struct parser *x, char **segs, size_t n, bool keep,
		       struct doctor_toml_entry *array);

static int parse_array(struct parser *x, char **segs, size_t n, bool keep, unsigned line)
{
	struct doctor_toml_entry *e = NULL;
	int r;

	if (keep) {
		e = add_entry(x, segs, n, DOCTOR_TOML_ARRAY, line);
		if (!e)
			return oom_or_err(x);
	}
	x->p++;
	for (;;) {
		skip_blank(x);
		if (at_end(x))
			return fail(x, "unterminated array");
		if (*x->p == ']') {
			x->p++;
			return 0;
		}
		/* Elements are parsed without recording, so @e stays where it is. */
		r = parse_value(x, segs, n, false, keep ? e : NULL);
		if (r < 0)
			return r;
		skip_blank(x);
		if (!at_end(x) && *x->p == ',') {
			x->p++;
			continue;
		}
		if (at_end(x))
			return fail(x, "unterminated array");
		if (*x->p != ']')
			return fail(x, "expected ',' or ']' in an array");
	}
}

static int parse_inline_table(struct parser *x, char **segs, size_t n, bool keep)
{
	size_t base = n;
	int r = 0;

	x->p++;
	skip_ws(x);
	if (!at_end(x) && *x->p == '}') {
		x->p++;
		return 0;
	}
	for (;;) {
		r = parse_key(x, segs, &n);
		if (r < 0)
			goto out;
		skip_ws(x);
		if (at_end(x) || *x->p != '=') {
			r = fail(x, "expected '=' after the key");
			goto out;
		}
		x->p++;
		skip_ws(x);
		r = parse_value(x, segs, n, keep, NULL);
		if (r < 0)
			goto out;
		free_segs(segs + base, n - base);
		n = base;
		skip_ws(x);
		if (!at_end(x) && *x->p == ',') {
			x->p++;
			continue;
		}
		if (!at_end(x) && *x->p == '}') {
			x->p++;
			break;
		}
		r = fail(x, "expected ',' or '}' in an inline table");
		goto out;
	}
out:
	free_segs(segs + base, n - base);
	return r;
}

/*
 * A value for the key @segs (@n segments). @keep false parses without recording (inside
 * arrays); @array, when not NULL, is the array entry collecting string elements.
 */
static int parse_value(struct parser *x, char **segs, size_t n, bool keep,
		       struct doctor_toml_entry *array)
{
	unsigned line = x->line;
	struct doctor_toml_entry *e;
	struct buf b = { 0 };
	const char *s;
	bool is_float;
	int r = 0;

	if (at_end(x) || at_newline(x))
		return fail(x, "a value is missing after '='");
	if (++x->depth > DOCTOR_TOML_MAX_DEPTH) {
		r = fail(x, "values nested more than %d deep", DOCTOR_TOML_MAX_DEPTH);
		goto out;
	}
	if (*x->p == '[') {
		r = parse_array(x, segs, n, keep, line);
		goto out;
	}
	if (*x->p == '{') {
		r = parse_inline_table(x, segs, n, keep);
		goto out;
	}
	if (*x->p == '"' || *x->p == '\'') {
		r = parse_string(x, &b, true);
		if (r < 0)
			goto out;
		if (array) {
			char **v = realloc(array->strv, (array->n_strv + 1) * sizeof(*v));

			if (!v) {
				r = -ENOMEM;
				goto out;
			}
			array->strv = v;
			v[array->n_strv++] = (char *)b.data;
			b = (struct buf){ 0 };
		} else if (keep) {
			e = add_entry(x, segs, n, DOCTOR_TOML_STRING, line);
			if (!e) {
				r = oom_or_err(x);
				goto out;
			}
			e->value = (char *)b.data;
			b = (struct buf){ 0 };
		}
		goto out;
	}
	s = x->p;
	while (!at_end(x) && (is_bare(*x->p) || *x->p == '+' || *x->p == '.' || *x->p == ':'))
		x->p++;
	if (x->p == s) {
		r = fail(x, "invalid value starting with '%c'", *x->p);
		goto out;
	}
	b.data = (uint8_t *)dup_range(s, (size_t)(x->p - s));
	if (!b.data) {
		r = -ENOMEM;
		goto out;
	}
	if (streq((char *)b.data, "true") || streq((char *)b.data, "false")) {
		is_float = false;
		e = keep ? add_entry(x, segs, n, DOCTOR_TOML_BOOL, line) : NULL;
	} else if (valid_number((char *)b.data, &is_float)) {
		e = keep ? add_entry(x, segs, n, is_float ? DOCTOR_TOML_FLOAT : DOCTOR_TOML_INT,
				     line) :
			   NULL;
	} else {
		x->line = line;
		r = fail(x, "invalid value '%s' (strings need quotes; dates are not supported)",
			 (char *)b.data);
		goto out;
	}
	if (keep && !e) {
		r = oom_or_err(x);
		goto out;
	}
	if (e) {
		e->value = (char *)b.data;
		b.data = NULL;
	}
out:
	x->depth--;
	free(b.data);
	return r;
}

static int parse_table_header(struct parser *x)
{
	bool aot = x->end - x->p >= 2 && x->p[1] == '[';
	char *segs[MAX_SEGS];
	size_t n = 0;
	int r;

	x->p += aot ? 2 : 1;
	r = parse_key(x, segs, &n);
	if (r < 0)
		goto out;
	if (at_end(x) || *x->p != ']' || (aot && (x->end - x->p < 2 || x->p[1] != ']'))) {
		r = fail(x, aot ? "expected ']]' after the table name" :
				  "expected ']' after the table name");
		goto out;
	}
	x->p += aot ? 2 : 1;
	r = expect_eol(x);
	if (r < 0)
		goto out;
	free_segs(x->table, x->n_table);
	memcpy(x->table, segs, n * sizeof(*segs));
	x->n_table = n;
	n = 0;
	if (aot) {
		struct buf key = { 0 };
		struct aot *a = NULL;

		for (size_t i = 0; i < x->n_table; i++)
			if (buf_printf(&key, "%s\x1f", x->table[i]) < 0) {
				buf_release(&key);
				return -ENOMEM;
			}
		for (size_t i = 0; i < x->n_aot && !a; i++)
			if (streq(x->aot[i].key, (char *)key.data))
				a = &x->aot[i];
		if (a) {
			buf_release(&key);
		} else {
			a = realloc(x->aot, (x->n_aot + 1) * sizeof(*a));
			if (!a) {
				buf_release(&key);
				return -ENOMEM;
			}
			x->aot = a;
			a = &x->aot[x->n_aot++];
			*a = (struct aot){ .key = (char *)key.data };
		}
		if (x->n_table >= MAX_SEGS)
			return fail(x, "a table name with more than %d parts", MAX_SEGS - 1);
		x->table[x->n_table] = strdup_printf("[%u]", a->count++);
		if (!x->table[x->n_table])
			return -ENOMEM;
		x->n_table++;
	}
out:
	free_segs(segs, n);
	return r;
}

static int parse_keyval(struct parser *x)
{
	char *segs[MAX_SEGS];
	size_t n = x->n_table;
	int r;

	for (size_t i = 0; i < x->n_table; i++) {
		segs[i] = strdup(x->table[i]);
		if (!segs[i]) {
			free_segs(segs, i);
			return -ENOMEM;
		}
	}
	r = parse_key(x, segs, &n);
	if (r < 0)
		goto out;
	if (at_end(x) || *x->p != '=') {
		r = fail(x, "expected '=' after the key");
		goto out;
	}
	x->p++;
	skip_ws(x);
	r = parse_value(x, segs, n, true, NULL);
	if (r < 0)
		goto out;
	r = expect_eol(x);
out:
	free_segs(segs, n);
	return r;
}

int doctor_toml_parse(const char *data, size_t len, struct doctor_toml **ret, unsigned *reterr_line,
		      char **reterr)
{
	struct parser x = { .p = data, .end = data + len, .line = 1 };
	int r = 0;

	x.t = calloc(1, sizeof(*x.t));
	if (!x.t)
		return -ENOMEM;
	if (memchr(data, 0, len)) {
		const char *z = memchr(data, 0, len);

		for (const char *c = data; c < z; c++)
			x.line += *c == '\n';
		r = fail(&x, "a NUL byte (this is not a text file)");
		goto out;
	}
	while (!at_end(&x)) {
		skip_ws(&x);
		skip_comment(&x);
		if (at_end(&x))
			break;
		if (at_newline(&x)) {
			take_newline(&x);
			continue;
		}
		r = *x.p == '[' ? parse_table_header(&x) : parse_keyval(&x);
		if (r < 0)
			goto out;
	}
out:
	free_segs(x.table, x.n_table);
	for (size_t i = 0; i < x.n_aot; i++)
		free(x.aot[i].key);
	free(x.aot);
	if (r < 0 && x.err) {
		r = -EINVAL;
		if (reterr_line)
			*reterr_line = x.err_line;
		if (reterr) {
			free(*reterr);
			*reterr = x.err;
			x.err = NULL;
		}
	}
	free(x.err);
	if (r < 0) {
		doctor_toml_free(x.t);
		return r;
	}
	*ret = x.t;
	return 0;
}

struct doctor_toml *doctor_toml_free(struct doctor_toml *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n; i++)
		entry_release(&t->e[i]);
	free(t->e);
	free(t);
	return NULL;
}
