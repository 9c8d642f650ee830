/*
 * config-diag.c: the diagnostics every stage of the config module records its problems with
 * (config-int.h), bounded by CONFIG_ERRORS_MAX, and the public struct config_diag calls
 * (config.h). It is the lowest file of the module but for the scalar helpers of config-value.c:
 * every other file calls it, and it calls none of them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-int.h"

static void error_release(struct config_error *e)
{
	free(e->file);
	free(e->key);
	free(e->message);
}

void config_diag_release(struct config_diag *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_errors; i++)
		error_release(&d->errors[i]);
	for (size_t i = 0; i < d->n_warnings; i++)
		error_release(&d->warnings[i]);
	free(d->errors);
	free(d->warnings);
	*d = (struct config_diag){ 0 };
}

int config_error_format(const struct config_error *e, struct buf *out)
{
	int r = 0;

	if (e->file && e->line)
		r = buf_printf(out, "%s:%u:%u: ", e->file, e->line, e->column);
	else if (e->file)
		r = buf_printf(out, "%s: ", e->file);
	if (r >= 0 && e->key)
		r = buf_printf(out, "%s: ", e->key);
	if (r >= 0)
		r = buf_printf(out, "%s", e->message ? e->message : "");
	return r;
}

char *config_error_to_string(const struct config_error *e)
{
	struct buf b = { 0 };

	if (config_error_format(e, &b) < 0) {
		buf_release(&b);
		return NULL;
	}
	return (char *)b.data;
}

static int vdiag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		     const char *key, const char *fmt, va_list ap)
	__attribute__((format(printf, 6, 0)));
static int vdiag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		     const char *key, const char *fmt, va_list ap)
{
	struct config_error e = { 0 }, **arr;
	size_t *n;
	void *p;

	if (!warning) {
		if (x->n_errors >= CONFIG_ERRORS_MAX) {
			x->stop = true;
			return 0;
		}
		x->n_errors++;
		if (x->n_errors == CONFIG_ERRORS_MAX)
			x->stop = true;
	}
	if (!x->d)
		return 0;
	arr = warning ? &x->d->warnings : &x->d->errors;
	n = warning ? &x->d->n_warnings : &x->d->n_errors;
	if (warning && *n >= CONFIG_ERRORS_MAX)
		return 0;
	e.line = pos.line;
	e.column = pos.column;
	e.message = strdup_vprintf(fmt, ap);
	e.file = file ? strdup(file) : NULL;
	e.key = key ? strdup(key) : NULL;
	if (!e.message || (file && !e.file) || (key && !e.key))
		goto oom;
	/* Grow by one: diags are few, and bounded by CONFIG_ERRORS_MAX for errors. */
	p = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!p)
		goto oom;
	*arr = p;
	(*arr)[(*n)++] = e;
	return 0;
oom:
	error_release(&e);
	return -ENOMEM;
}

int config_diag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		    const char *key, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, warning, file, pos, key, fmt, ap);
	va_end(ap);
	return r;
}

static const char *src_file(const struct ctx *x, const struct src *s)
{
	return s->origin == ORIGIN_FILE ? x->file : NULL;
}

/* An error or a warning about the value @s. Returns 0 or -ENOMEM. */
int config_add_err(struct ctx *x, const struct src *s, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, false, src_file(x, s), s->pos, s->key, fmt, ap);
	va_end(ap);
	return r;
}

int config_add_warn(struct ctx *x, const struct src *s, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, true, src_file(x, s), s->pos, s->key, fmt, ap);
	va_end(ap);
	return r;
}

int config_pos_err(struct ctx *x, struct config_pos pos, const char *key, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, false, pos.line ? x->file : NULL, pos, key, fmt, ap);
	va_end(ap);
	return r;
}

int config_diag_add_error(struct config_diag *d, const char *file, struct config_pos pos,
			  const char *key, const char *fmt, ...)
{
	struct ctx x = { .d = d, .file = file, .n_errors = d ? (unsigned)d->n_errors : 0 };
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(&x, false, pos.line ? file : NULL, pos, key, fmt, ap);
	va_end(ap);
	return r;
}

const char *config_describe(char *out, size_t size, const struct ytree_node *n)
{
	if (n->kind == YTREE_SEQ)
		return "a list";
	if (n->kind == YTREE_MAP)
		return "a mapping";
	if (is_null(n))
		return "null";
	if (!is_plain(n)) {
		char q[96];

		(void)snprintf(out, size, "the string %s", config_quote(q, sizeof(q), scalar(n)));
		return out;
	}
	return config_quote(out, size, scalar(n));
}

int config_type_error(struct ctx *x, const struct src *s, const char *want)
{
	char q[128];

	if (s->origin == ORIGIN_FILE)
		return config_add_err(x, s, "expected %s, got %s", want,
				      config_describe(q, sizeof(q), s->node));
	return config_add_err(x, s, "expected %s, got %s", want,
			      config_quote(q, sizeof(q), s->text));
}
