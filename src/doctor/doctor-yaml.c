/* The doctor's YAML/JSON tree (doctor-yaml.h). */
#include "doctor-yaml.h"

#include <errno.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64

struct builder {
	struct doctor_ynode *stack[MAX_DEPTH + 1];
	unsigned depth;
	size_t n_nodes;
	unsigned line0; /* lines skipped before the document */
	struct doctor_ynode *root;
};

struct doctor_ynode *doctor_ynode_free(struct doctor_ynode *n)
{
	if (!n)
		return NULL;
	for (size_t i = 0; i < n->n_kids; i++)
		doctor_ynode_free(n->kids[i]);
	free(n->kids);
	free(n->value);
	free(n);
	return NULL;
}

/* Adds @n under the node being built (or as the root). Takes @n, also on failure. */
static int attach(struct builder *b, struct doctor_ynode *n)
{
	struct doctor_ynode *p = b->depth ? b->stack[b->depth - 1] : NULL;
	int r;

	if (!p) {
		if (b->root)
			doctor_ynode_free(b->root);
		b->root = n;
		return 0;
	}
	/* Doubling: one realloc per child made building a 100,000-key map quadratic. */
	r = array_grow((void **)&p->kids, &p->cap_kids, p->n_kids, sizeof(struct doctor_ynode *));
	if (r < 0) {
		doctor_ynode_free(n);
		return r;
	}
	p->kids[p->n_kids++] = n;
	return 0;
}

static int on_event(struct builder *b, const yaml_event_t *e, char **reterr)
{
	struct doctor_ynode *n;
	int r;

	switch (e->type) {
	case YAML_SCALAR_EVENT:
	case YAML_ALIAS_EVENT:
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		break;
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		if (b->depth)
			b->depth--;
		return 0;
	default:
		return 0;
	}
	if (++b->n_nodes > DOCTOR_YAML_MAX_NODES)
		return set_error(reterr, -EINVAL, "more than %u nodes", DOCTOR_YAML_MAX_NODES);
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->line = b->line0 + (unsigned)e->start_mark.line + 1;
	if (e->type == YAML_SCALAR_EVENT || e->type == YAML_ALIAS_EVENT) {
		n->kind = DOCTOR_YSCALAR;
		n->value =
			e->type == YAML_SCALAR_EVENT ?
				strndup((const char *)e->data.scalar.value, e->data.scalar.length) :
				strdup("");
		if (!n->value) {
			free(n);
			return -ENOMEM;
		}
		return attach(b, n);
	}
	n->kind = e->type == YAML_MAPPING_START_EVENT ? DOCTOR_YMAP : DOCTOR_YSEQ;
	if (b->depth >= MAX_DEPTH) {
		free(n);
		return set_error(reterr, -EINVAL, "nested more than %d deep", MAX_DEPTH);
	}
	r = attach(b, n);
	if (r < 0)
		return r;
	b->stack[b->depth++] = n;
	return 0;
}

int doctor_yaml_load(const char *data, size_t len, struct doctor_ynode **ret, unsigned *reterr_line,
		     char **reterr)
{
	struct builder b = { 0 };
	yaml_parser_t p;
	bool done = false;
	int r = 0;

	while (len && (*data == ' ' || *data == '\t' || *data == '\n' || *data == '\r')) {
		b.line0 += *data == '\n';
		data++;
		len--;
	}
	if (!yaml_parser_initialize(&p))
		return -ENOMEM;
	yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
	while (!done) {
		yaml_event_t e;

		if (!yaml_parser_parse(&p, &e)) {
			if (p.error == YAML_MEMORY_ERROR) {
				r = -ENOMEM;
			} else {
				if (reterr_line)
					*reterr_line = b.line0 + (unsigned)p.problem_mark.line + 1;
				r = set_error(reterr, -EINVAL, "%s%s%s",
					      p.problem ? p.problem : "syntax error",
					      p.context ? " " : "", p.context ? p.context : "");
			}
			break;
		}
		/* One document: stop at its end. */
		done = e.type == YAML_STREAM_END_EVENT || e.type == YAML_DOCUMENT_END_EVENT;
		r = on_event(&b, &e, reterr);
		if (r == -EINVAL && reterr_line)
			*reterr_line = b.line0 + (unsigned)e.start_mark.line + 1;
		yaml_event_delete(&e);
		if (r < 0)
			break;
	}
	yaml_parser_delete(&p);
	if (r < 0) {
		doctor_ynode_free(b.root);
		return r;
	}
	if (!b.root) {
		b.root = calloc(1, sizeof(*b.root));
		if (!b.root)
			return -ENOMEM;
		b.root->kind = DOCTOR_YMAP;
		b.root->line = 1;
	}
	*ret = b.root;
	return 0;
}

const struct doctor_ynode *doctor_ynode_get(const struct doctor_ynode *map, const char *key)
{
	if (!map || map->kind != DOCTOR_YMAP)
		return NULL;
	for (size_t i = 0; i + 1 < map->n_kids; i += 2)
		if (map->kids[i]->kind == DOCTOR_YSCALAR && streq(map->kids[i]->value, key))
			return map->kids[i + 1];
	return NULL;
}

const char *doctor_ynode_str(const struct doctor_ynode *n)
{
	return n && n->kind == DOCTOR_YSCALAR ? n->value : NULL;
}
