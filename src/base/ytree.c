/*
 * ytree.c: the YAML/JSON tree (ytree.h). One builder, fed by two readers: libyaml's parser
 * events for YAML, and a JSON reader of our own (iterative: its nesting is the builder's stack,
 * never the C stack).
 */
#include "ytree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct builder {
	struct ytree *t;
	struct ytree_error *err;
	unsigned flags;
	size_t max_nodes;
	size_t count; /* nodes and aliases so far */
	size_t stack[YTREE_DEPTH_MAX];
	unsigned depth;
	unsigned documents;
};

/* Fills @b's error; returns -EINVAL. */
static int __attribute__((format(printf, 5, 6)))
fail(struct builder *b, bool syntax, unsigned line, unsigned column, const char *fmt, ...)
{
	va_list ap;

	b->err->line = line;
	b->err->column = column;
	b->err->syntax = syntax;
	va_start(ap, fmt);
	(void)vsnprintf(b->err->message, sizeof(b->err->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *lang(const struct builder *b)
{
	return b->flags & YTREE_JSON ? "JSON" : "YAML";
}

void ytree_release(struct ytree *t)
{
	for (size_t i = 0; i < t->n_nodes; i++) {
		free(t->nodes[i].value);
		free(t->nodes[i].kids);
		free(t->nodes[i].anchor);
	}
	for (size_t i = 0; i < t->cap_anchors; i++)
		free(t->anchors[i].name);
	free(t->nodes);
	free(t->anchors);
	*t = (struct ytree){ 0 };
}

const struct ytree_node *ytree_root(const struct ytree *t)
{
	return t->has_root ? &t->nodes[t->root] : NULL;
}

const struct ytree_node *ytree_get(const struct ytree *t, const struct ytree_node *map,
				   const char *key)
{
	const struct ytree_node *found = NULL;
	size_t len = strlen(key);

	if (!map || map->kind != YTREE_MAP)
		return NULL;
	for (size_t i = 0; i + 1 < map->n_kids; i += 2) {
		const struct ytree_node *k = ytree_kid(t, map, i);

		if (k->kind == YTREE_SCALAR && k->len == len && memcmp(k->value, key, len) == 0)
			found = ytree_kid(t, map, i + 1);
	}
	return found;
}

bool ytree_is_null(const struct ytree_node *n)
{
	return n->kind == YTREE_SCALAR && n->plain &&
	       (!*n->value || streq(n->value, "~") || streq(n->value, "null") ||
		streq(n->value, "Null") || streq(n->value, "NULL"));
}

/* --- the anchors: an open-addressing hash (FNV-1a), so an alias costs O(1), not O(anchors) --- */

static size_t hash(const char *s)
{
	size_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static struct ytree_anchor *anchor_slot(const struct ytree *t, const char *name)
{
	size_t i = hash(name) & (t->cap_anchors - 1);

	while (t->anchors[i].name && !streq(t->anchors[i].name, name))
		i = (i + 1) & (t->cap_anchors - 1);
	return &t->anchors[i];
}

static int anchors_grow(struct ytree *t)
{
	struct ytree_anchor *old = t->anchors;
	size_t old_cap = t->cap_anchors, cap = old_cap ? old_cap * 2 : 16;

	if (cap > SIZE_MAX / sizeof(*old))
		return -ENOMEM;
	t->anchors = calloc(cap, sizeof(*old));
	if (!t->anchors) {
		t->anchors = old;
		return -ENOMEM;
	}
	t->cap_anchors = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].name)
			*anchor_slot(t, old[i].name) = old[i];
	free(old);
	return 0;
}

/* Defines (or redefines: YAML allows it) anchor @name as node @node. Takes @name. */
static int anchor_add(struct ytree *t, char *name, size_t node)
{
	struct ytree_anchor *a;
	int r;

	if (2 * (t->n_anchors + 1) > t->cap_anchors) {
		r = anchors_grow(t);
		if (r < 0) {
			free(name);
			return r;
		}
	}
	a = anchor_slot(t, name);
	if (a->name) {
		free(name);
	} else {
		a->name = name;
		t->n_anchors++;
	}
	a->node = node;
	return 0;
}

/* --- the builder: what both readers call --- */

/* Counts one node or alias against the bound. */
static int count(struct builder *b, unsigned line, unsigned column)
{
	if (++b->count > b->max_nodes)
		return fail(b, false, line, column, "the document has more than %zu %s nodes",
			    b->max_nodes, lang(b));
	return 0;
}

/* Adds @size, a finished child's expansion, to the open collection's. */
static int grow_size(struct builder *b, size_t size, unsigned line, unsigned column)
{
	struct ytree_node *p = &b->t->nodes[b->stack[b->depth - 1]];

	/* Both at most max_nodes: no overflow. */
	p->size += size;
	if (p->size > b->max_nodes)
		return fail(b, false, line, column, "aliases expand the document past %zu %s nodes",
			    b->max_nodes, lang(b));
	return 0;
}

/*
 * Hangs node @i under the open collection, or makes it a document's root. @done: its expansion
 * is known now (a scalar, an alias); an opened collection's is added at its end.
 */
static int attach(struct builder *b, size_t i, bool done, unsigned line, unsigned column)
{
	struct ytree *t = b->t;
	struct ytree_node *p;
	int r;

	if (b->depth == 0) {
		if (b->documents <= 1) {
			t->root = i;
			t->has_root = true;
			return 0;
		}
		/* A second document: an empty one is harmless, anything else surely a mistake. */
		if (ytree_is_null(&t->nodes[i]))
			return 0;
		return fail(b, false, line, column,
			    "more than one YAML document; edgegpu reads one");
	}
	p = &t->nodes[b->stack[b->depth - 1]];
	r = array_grow((void **)&p->kids, &p->cap_kids, p->n_kids, sizeof(*p->kids));
	if (r < 0)
		return r;
	p->kids[p->n_kids++] = i;
	return done ? grow_size(b, t->nodes[i].size, line, column) : 0;
}

/* A new node, not yet attached. */
static int new_node(struct builder *b, enum ytree_kind kind, unsigned line, unsigned column,
		    size_t *ret)
{
	struct ytree *t = b->t;
	int r;

	r = count(b, line, column);
	if (r < 0)
		return r;
	if (kind != YTREE_SCALAR && b->depth == YTREE_DEPTH_MAX)
		return fail(b, false, line, column, "nested deeper than %d levels",
			    YTREE_DEPTH_MAX);
	r = array_grow((void **)&t->nodes, &t->cap_nodes, t->n_nodes, sizeof(*t->nodes));
	if (r < 0)
		return r;
	t->nodes[t->n_nodes] =
		(struct ytree_node){ .kind = kind, .line = line, .column = column, .size = 1 };
	*ret = t->n_nodes++;
	return 0;
}

/* A scalar of @len bytes at @value (copied), attached. */
static int add_scalar(struct builder *b, const char *value, size_t len, bool plain, unsigned line,
		      unsigned column, size_t *ret)
{
	struct ytree_node *n;
	size_t i;
	int r;

	r = new_node(b, YTREE_SCALAR, line, column, &i);
	if (r < 0)
		return r;
	n = &b->t->nodes[i];
	n->value = malloc(len + 1);
	if (!n->value)
		return -ENOMEM;
	if (len)
		memcpy(n->value, value, len);
	n->value[len] = 0;
	n->len = len;
	n->plain = plain;
	*ret = i;
	return attach(b, i, true, line, column);
}

/* Opens a sequence or a mapping: attached, and the new innermost collection. */
static int open_collection(struct builder *b, enum ytree_kind kind, unsigned line, unsigned column,
			   size_t *ret)
{
	size_t i = 0;
	int r;

	r = new_node(b, kind, line, column, &i);
	if (r < 0)
		return r;
	r = attach(b, i, false, line, column);
	if (r < 0)
		return r;
	b->stack[b->depth++] = i;
	*ret = i;
	return 0;
}

/* Closes the innermost collection; its expansion is now known. */
static int close_collection(struct builder *b, size_t *ret)
{
	const struct ytree_node *n;

	*ret = b->stack[--b->depth];
	n = &b->t->nodes[*ret];
	return b->depth ? grow_size(b, n->size, n->line, n->column) : 0;
}

/* --- YAML: libyaml's events --- */

static int yaml_syntax_error(struct builder *b, const yaml_parser_t *p, const char *data,
			     size_t len)
{
	unsigned line = 1, column = 1;

	/* libyaml's loader fails some allocations without setting an error. */
	if (p->error == YAML_MEMORY_ERROR || p->error == YAML_NO_ERROR)
		return -ENOMEM;
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		for (size_t i = 0; i < p->problem_offset && i < len; i++) {
			if (data[i] == '\n') {
				line++;
				column = 1;
			} else if (((unsigned char)data[i] & 0xc0) != 0x80) {
				column++;
			}
		}
		return fail(b, true, line, column, "%s",
			    p->problem ? p->problem : "unreadable input");
	}
	line = (unsigned)p->problem_mark.line + 1;
	column = (unsigned)p->problem_mark.column + 1;
	if (p->context)
		return fail(b, true, line, column, "%s %s (line %zu column %zu)",
			    p->problem ? p->problem : "syntax error", p->context,
			    p->context_mark.line + 1, p->context_mark.column + 1);
	return fail(b, true, line, column, "%s", p->problem ? p->problem : "syntax error");
}

/* One parser event into the tree: 0 go on, 1 the document is done, or a negative errno. */
static int yaml_event(struct builder *b, yaml_event_t *e)
{
	unsigned line = (unsigned)e->start_mark.line + 1,
		 column = (unsigned)e->start_mark.column + 1;
	struct ytree *t = b->t;
	struct ytree_anchor *a;
	char *anchor;
	size_t i = 0;
	int r;

	switch (e->type) {
	case YAML_DOCUMENT_START_EVENT:
		b->documents++;
		return 0;
	case YAML_DOCUMENT_END_EVENT:
		return b->flags & YTREE_FIRST_DOCUMENT ? 1 : 0;
	case YAML_SCALAR_EVENT: {
		const char *tag = (const char *)e->data.scalar.tag;
		/* A plain scalar is typed by its text, unless tagged !!str. */
		bool plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
			     !(tag && streq(tag, YAML_STR_TAG));

		r = add_scalar(b, (const char *)e->data.scalar.value, e->data.scalar.length, plain,
			       line, column, &i);
		if (r < 0 || !e->data.scalar.anchor)
			return r;
		anchor = (char *)e->data.scalar.anchor;
		e->data.scalar.anchor = NULL; /* libyaml allocated it with malloc() */
		return anchor_add(t, anchor, i);
	}
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		bool seq = e->type == YAML_SEQUENCE_START_EVENT;

		r = open_collection(b, seq ? YTREE_SEQ : YTREE_MAP, line, column, &i);
		if (r < 0)
			return r;
		/* A collection's anchor is defined at its end: no node contains itself. */
		anchor = (char *)(seq ? e->data.sequence_start.anchor :
					e->data.mapping_start.anchor);
		if (seq)
			e->data.sequence_start.anchor = NULL;
		else
			e->data.mapping_start.anchor = NULL;
		t->nodes[i].anchor = anchor;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth == 0)
			return 0; /* libyaml balances its events; this is for the analysers */
		r = close_collection(b, &i);
		if (r < 0)
			return r;
		anchor = t->nodes[i].anchor;
		t->nodes[i].anchor = NULL;
		return anchor ? anchor_add(t, anchor, i) : 0;
	case YAML_ALIAS_EVENT:
		r = count(b, line, column);
		if (r < 0)
			return r;
		a = t->cap_anchors ? anchor_slot(t, (const char *)e->data.alias.anchor) : NULL;
		if (!a || !a->name)
			return fail(b, true, line, column, "alias *%.64s names no anchor before it",
				    (const char *)e->data.alias.anchor);
		return attach(b, a->node, true, line, column);
	default:
		return 0;
	}
}

static int load_yaml(struct builder *b, const char *data, size_t len)
{
	yaml_parser_t parser;
	bool done = false;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while (!done) {
		yaml_event_t e;

		if (!yaml_parser_parse(&parser, &e)) {
			r = yaml_syntax_error(b, &parser, data, len);
			break;
		}
		done = e.type == YAML_STREAM_END_EVENT;
		r = yaml_event(b, &e);
		yaml_event_delete(&e);
		if (r != 0)
			break;
	}
	yaml_parser_delete(&parser);
	return r < 0 ? r : 0;
}

/* --- JSON (RFC 8259) --- */

struct jreader {
	struct builder *b;
	const char *p, *end;
	const char *mark; /* line and column are counted up to here */
	unsigned line, column;
	struct buf s; /* a string being decoded */
};

/* Where @j->p is: counted on from the last call, so linear over the whole input. */
static void jpos(struct jreader *j, unsigned *line, unsigned *column)
{
	for (; j->mark < j->p; j->mark++) {
		if (*j->mark == '\n') {
			j->line++;
			j->column = 1;
		} else if (((unsigned char)*j->mark & 0xc0) != 0x80) {
			j->column++;
		}
	}
	*line = j->line;
	*column = j->column;
}

static int __attribute__((format(printf, 2, 3))) jfail(struct jreader *j, const char *fmt, ...)
{
	unsigned line, column;
	char msg[200];
	va_list ap;

	jpos(j, &line, &column);
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail(j->b, true, line, column, "%s", msg);
}

/* What is at @j->p, for an error message. */
static const char *jwhat(const struct jreader *j, char *out, size_t size)
{
	unsigned char c;

	if (j->p >= j->end)
		return "the end of the input";
	c = (unsigned char)*j->p;
	if (c == '#' || (c == '/' && j->p + 1 < j->end && (j->p[1] == '/' || j->p[1] == '*')))
		return "a comment (JSON has none)";
	if (c == '\'')
		return "a single quote (JSON strings take double quotes)";
	if (c > 0x20 && c < 0x7f)
		(void)snprintf(out, size, "'%c'", c);
	else
		(void)snprintf(out, size, "the byte 0x%02x", c);
	return out;
}

/* JSON's whitespace: space, tab, line feed, carriage return, and nothing else. */
static void jskip(struct jreader *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int hex4(const char *p, unsigned *ret)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
	}
	*ret = v;
	return 0;
}

/*
 * The \u escape at @j->p (past the backslash and the u). A surrogate pair is one character; a
 * lone surrogate becomes U+FFFD, as Go's encoding/json (Docker's reader) makes it.
 */
static int junicode(struct jreader *j)
{
	unsigned cp, lo;

	if (j->end - j->p < 4 || hex4(j->p, &cp) < 0)
		return jfail(j, "\\u needs four hex digits");
	j->p += 4;
	if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' &&
	    j->p[1] == 'u' && hex4(j->p + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		j->p += 6;
	} else if (cp >= 0xd800 && cp < 0xe000) {
		cp = 0xfffd;
	}
	return buf_put_utf8(&j->s, cp);
}

/* The string at @j->p (its opening quote) into @j->s, decoded. */
static int jstring(struct jreader *j)
{
	/* JSON's escapes and what they stand for; \u apart. YAML's \x, \e, \N... are not. */
	static const char escapes[] = "\"\\/bfnrt", unescaped[] = "\"\\/\b\f\n\r\t";
	const char *run;
	int r;

	j->s.len = 0;
	run = ++j->p;
	for (;;) {
		unsigned char c, u[4] = { 0 };
		const char *esc;
		int n;

		if (j->p >= j->end)
			return jfail(j, "a string is not closed");
		c = (unsigned char)*j->p;
		if (c == '"' || c == '\\') {
			r = buf_append(&j->s, run, (size_t)(j->p - run));
			if (r < 0)
				return r;
			if (c == '"')
				break;
			if (++j->p >= j->end)
				return jfail(j, "a string is not closed");
			c = (unsigned char)*j->p++;
			esc = c ? strchr(escapes, c) : NULL;
			if (esc) {
				r = buf_append(&j->s, &unescaped[esc - escapes], 1);
			} else if (c == 'u') {
				r = junicode(j);
			} else {
				j->p -= 2;
				return jfail(j, "invalid escape \\%c in a string",
					     c > 0x20 && c < 0x7f ? c : '?');
			}
			if (r < 0)
				return r;
			run = j->p;
			continue;
		}
		if (c < 0x20)
			return jfail(j, "a control character (0x%02x) in a string: escape it", c);
		/* utf8_seq() reads up to 4 bytes and stops at a NUL: give it a padded copy. */
		memcpy(u, j->p,
		       (size_t)(j->end - j->p) < sizeof(u) ? (size_t)(j->end - j->p) : sizeof(u));
		n = utf8_seq(u);
		if (n < 0)
			return jfail(j, "invalid UTF-8 in a string");
		j->p += n;
	}
	j->p++; /* the closing quote */
	return 0;
}

/* A number's end, or NULL when @p does not start one (RFC 8259's grammar, no more). */
static const char *jnumber(const char *p, const char *end)
{
	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if (p < end && *p >= '1' && *p <= '9')
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (p < end && *p == '.') {
		if (++p >= end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

static bool jword(const struct jreader *j, const char *w)
{
	size_t n = strlen(w);

	return (size_t)(j->end - j->p) >= n && memcmp(j->p, w, n) == 0;
}

/* One value at @j->p: a scalar, or the opening of a collection (left open). */
static int jvalue(struct jreader *j)
{
	unsigned line, column;
	const char *e = NULL;
	char what[16];
	size_t i;
	int r;

	jskip(j);
	jpos(j, &line, &column);
	if (j->p < j->end && (*j->p == '{' || *j->p == '[')) {
		r = open_collection(j->b, *j->p == '{' ? YTREE_MAP : YTREE_SEQ, line, column, &i);
		j->p++;
		return r;
	}
	if (j->p < j->end && *j->p == '"') {
		r = jstring(j);
		return r < 0 ? r :
			       add_scalar(j->b, (const char *)j->s.data, j->s.len, false, line,
					  column, &i);
	}
	if (jword(j, "true") || jword(j, "null"))
		e = j->p + 4;
	else if (jword(j, "false"))
		e = j->p + 5;
	else
		e = jnumber(j->p, j->end);
	if (!e)
		return jfail(j, "expected a JSON value, got %s", jwhat(j, what, sizeof(what)));
	r = add_scalar(j->b, j->p, (size_t)(e - j->p), true, line, column, &i);
	j->p = e;
	return r;
}

/* A mapping's key and its colon. */
static int jkey(struct jreader *j)
{
	unsigned line, column;
	char what[16];
	size_t i;
	int r;

	jskip(j);
	jpos(j, &line, &column);
	if (j->p >= j->end || *j->p != '"')
		return jfail(j, "expected a string key, got %s", jwhat(j, what, sizeof(what)));
	r = jstring(j);
	if (r < 0)
		return r;
	r = add_scalar(j->b, (const char *)j->s.data, j->s.len, false, line, column, &i);
	if (r < 0)
		return r;
	jskip(j);
	if (j->p >= j->end || *j->p != ':')
		return jfail(j, "expected ':' after a key, got %s", jwhat(j, what, sizeof(what)));
	j->p++;
	return 0;
}

static int load_json(struct builder *b, const char *data, size_t len)
{
	struct jreader j = {
		.b = b, .p = data, .end = data + len, .mark = data, .line = 1, .column = 1
	};
	struct ytree *t = b->t;
	char what[16];
	size_t i;
	int r;

	/* RFC 8259 lets a reader skip a BOM; Docker does. */
	if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
		j.p = j.mark = data + 3;
	jskip(&j);
	if (j.p == j.end)
		return 0; /* nothing: no document, as an empty YAML file */
	b->documents = 1;
	r = jvalue(&j);
	while (r >= 0 && b->depth > 0) {
		const struct ytree_node *top = &t->nodes[b->stack[b->depth - 1]];
		char close = top->kind == YTREE_MAP ? '}' : ']';

		jskip(&j);
		if (j.p < j.end && *j.p == close) {
			j.p++;
			r = close_collection(b, &i);
			continue;
		}
		if (top->n_kids > 0) {
			if (j.p >= j.end || *j.p != ',') {
				r = jfail(&j, "expected ',' or '%c', got %s", close,
					  jwhat(&j, what, sizeof(what)));
				break;
			}
			j.p++;
		}
		if (top->kind == YTREE_MAP)
			r = jkey(&j);
		if (r >= 0)
			r = jvalue(&j);
	}
	if (r >= 0) {
		jskip(&j);
		if (j.p < j.end)
			r = jfail(&j, "expected the end after the JSON value, got %s",
				  jwhat(&j, what, sizeof(what)));
	}
	buf_release(&j.s);
	return r;
}

int ytree_load(struct ytree *t, const char *data, size_t len, unsigned flags, size_t max_nodes,
	       struct ytree_error *err)
{
	struct builder b = { .t = t, .err = err, .flags = flags, .max_nodes = max_nodes };

	int r;

	*err = (struct ytree_error){ 0 };
	r = flags & YTREE_JSON ? load_json(&b, data, len) : load_yaml(&b, data, len);
	if (r < 0)
		ytree_release(t); /* nothing half-built is left to be read */
	return r;
}
