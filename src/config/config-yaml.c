/*
 * config-yaml.c: the YAML document as a tree of our own, built from libyaml's parser events
 * (nodes by index, aliases resolved to their anchor's node), with limits on nesting and size,
 * one document only, and syntax errors turned into positioned diagnostics.
 */
#include <errno.h>
#include <stdlib.h>
#include <yaml.h>

#include "config-int.h"

static int syntax_error(struct ctx *x, const yaml_parser_t *p, const char *data, size_t len)
{
	struct config_pos pos = { 0 };

	/* libyaml's loader fails some allocations without setting an error. */
	if (p->error == YAML_MEMORY_ERROR || p->error == YAML_NO_ERROR)
		return -ENOMEM;
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		pos.line = 1;
		pos.column = 1;
		for (size_t i = 0; i < p->problem_offset && i < len; i++) {
			if (data[i] == '\n') {
				pos.line++;
				pos.column = 1;
			} else if (((unsigned char)data[i] & 0xc0) != 0x80) {
				pos.column++;
			}
		}
		return config_diag_add(x, false, x->file, pos, NULL, "invalid YAML: %s",
				       p->problem ? p->problem : "unreadable input");
	}
	pos.line = (unsigned)p->problem_mark.line + 1;
	pos.column = (unsigned)p->problem_mark.column + 1;
	if (p->context)
		return config_diag_add(x, false, x->file, pos, NULL,
				       "invalid YAML: %s %s (line %zu column %zu)",
				       p->problem ? p->problem : "syntax error", p->context,
				       p->context_mark.line + 1, p->context_mark.column + 1);
	return config_diag_add(x, false, x->file, pos, NULL, "invalid YAML: %s",
			       p->problem ? p->problem : "syntax error");
}

void config_ydoc_release(struct ydoc *doc)
{
	for (size_t i = 0; i < doc->n_nodes; i++) {
		free(doc->nodes[i].value);
		free(doc->nodes[i].kids);
		free(doc->nodes[i].anchor);
	}
	for (size_t i = 0; i < doc->n_anchors; i++)
		free(doc->anchors[i].name);
	free(doc->nodes);
	free(doc->anchors);
	*doc = (struct ydoc){ 0 };
}

struct builder {
	struct ydoc *doc;
	size_t stack[YAML_DEPTH_MAX];
	size_t depth;
	unsigned documents;
	size_t events;
};

static struct config_pos mark_pos(yaml_mark_t m)
{
	return (struct config_pos){ (unsigned)m.line + 1, (unsigned)m.column + 1 };
}

/* Hangs node @i under the open collection, or makes it a document's root. 1: stop. */
static int attach(struct ctx *x, struct builder *b, size_t i)
{
	struct ydoc *doc = b->doc;
	struct ynode *parent;
	int r;

	if (b->depth == 0) {
		if (b->documents <= 1) {
			doc->root = i;
			doc->has_root = true;
			return 0;
		}
		/* NVIDIA reads the first document only; a second one is surely a mistake. */
		if (is_null(&doc->nodes[i]))
			return 0;
		r = config_diag_add(x, false, x->file, doc->nodes[i].pos, NULL,
				    "more than one YAML document; edgegpu reads one");
		return r < 0 ? r : 1;
	}
	parent = &doc->nodes[b->stack[b->depth - 1]];
	r = array_grow((void **)&parent->kids, &parent->cap_kids, parent->n_kids, sizeof(size_t));
	if (r < 0)
		return r;
	parent->kids[parent->n_kids++] = i;
	return 0;
}

static int new_node(struct ctx *x, struct builder *b, enum ykind kind, const yaml_event_t *e,
		    size_t *ret)
{
	struct ydoc *doc = b->doc;
	int r;

	r = array_grow((void **)&doc->nodes, &doc->cap_nodes, doc->n_nodes, sizeof(*doc->nodes));
	if (r < 0)
		return r;
	doc->nodes[doc->n_nodes] = (struct ynode){ .kind = kind, .pos = mark_pos(e->start_mark) };
	*ret = doc->n_nodes++;
	return 0;
}

static int add_anchor(struct builder *b, char *name, size_t node)
{
	struct ydoc *doc = b->doc;
	int r = array_grow((void **)&doc->anchors, &doc->cap_anchors, doc->n_anchors,
			   sizeof(*doc->anchors));

	if (r < 0) {
		free(name);
		return r;
	}
	doc->anchors[doc->n_anchors++] = (struct yanchor){ name, node };
	return 0;
}

/* One parser event into the tree: 0 go on, 1 stop (an error was recorded), or -ENOMEM. */
static int build_event(struct ctx *x, struct builder *b, yaml_event_t *e)
{
	struct ydoc *doc = b->doc;
	size_t i = 0;
	char *anchor;
	int r;

	if (++b->events > YAML_NODES_MAX) {
		r = config_diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
				    "the document has more than %d YAML nodes", YAML_NODES_MAX);
		return r < 0 ? r : 1;
	}
	switch (e->type) {
	case YAML_DOCUMENT_START_EVENT:
		b->documents++;
		return 0;
	case YAML_SCALAR_EVENT: {
		const char *tag = (const char *)e->data.scalar.tag;

		r = new_node(x, b, Y_SCALAR, e, &i);
		if (r < 0)
			return r;
		/* The value moves into the tree; libyaml allocated it with malloc(). */
		doc->nodes[i].value = (char *)e->data.scalar.value;
		doc->nodes[i].len = e->data.scalar.length;
		e->data.scalar.value = NULL;
		/* A plain scalar is typed by its text, unless tagged !!str. */
		doc->nodes[i].plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
				      !(tag && streq(tag, YAML_STR_TAG));
		if (e->data.scalar.anchor) {
			anchor = (char *)e->data.scalar.anchor;
			e->data.scalar.anchor = NULL;
			r = add_anchor(b, anchor, i);
			if (r < 0)
				return r;
		}
		return attach(x, b, i);
	}
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		bool seq = e->type == YAML_SEQUENCE_START_EVENT;

		if (b->depth == YAML_DEPTH_MAX) {
			r = config_diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
					    "nested deeper than %d levels", YAML_DEPTH_MAX);
			return r < 0 ? r : 1;
		}
		r = new_node(x, b, seq ? Y_SEQ : Y_MAP, e, &i);
		if (r < 0)
			return r;
		/* Anchors of collections count from their end: no node contains itself. */
		anchor = (char *)(seq ? e->data.sequence_start.anchor :
					e->data.mapping_start.anchor);
		if (seq)
			e->data.sequence_start.anchor = NULL;
		else
			e->data.mapping_start.anchor = NULL;
		doc->nodes[i].anchor = anchor;
		r = attach(x, b, i);
		if (r != 0)
			return r;
		b->stack[b->depth++] = i;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth == 0)
			return 0; /* libyaml balances its events; this is for the analysers */
		i = b->stack[--b->depth];
		anchor = doc->nodes[i].anchor;
		doc->nodes[i].anchor = NULL;
		return anchor ? add_anchor(b, anchor, i) : 0;
	case YAML_ALIAS_EVENT:
		for (size_t a = doc->n_anchors; a > 0; a--) {
			if (streq(doc->anchors[a - 1].name, (const char *)e->data.alias.anchor))
				return attach(x, b, doc->anchors[a - 1].node);
		}
		r = config_diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
				    "invalid YAML: alias *%.64s names no anchor before it",
				    (const char *)e->data.alias.anchor);
		return r < 0 ? r : 1;
	default:
		return 0;
	}
}

/*
 * Builds our own tree from libyaml's events rather than using its document loader, which
 * leaks on some allocation failures, and so that nesting and size have limits of our own.
 * Errors are recorded in @x; returns 0 or -ENOMEM.
 */
int config_ydoc_load(struct ctx *x, struct ydoc *doc, const char *data, size_t len)
{
	struct builder b = { .doc = doc };
	yaml_parser_t parser;
	bool done = false;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while (!done) {
		yaml_event_t e;

		if (!yaml_parser_parse(&parser, &e)) {
			r = syntax_error(x, &parser, data, len);
			break;
		}
		done = e.type == YAML_STREAM_END_EVENT;
		r = build_event(x, &b, &e);
		yaml_event_delete(&e);
		if (r != 0)
			break;
	}
	yaml_parser_delete(&parser);
	return r < 0 ? r : 0;
}
