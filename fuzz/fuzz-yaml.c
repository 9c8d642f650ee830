/*
 * libFuzzer target for the YAML/JSON tree (src/base/ytree.c): the input read as YAML, as YAML's
 * first document and as JSON, each under a small node bound so that the bound is reached. On
 * success the tree is checked whole: every child index inside the tree and not the node itself,
 * a mapping's children in pairs, a scalar NUL-terminated at its length, each expansion within
 * the bound, a mapping's first key found by lookup. On failure: a message and an empty tree.
 * Findings: a broken invariant (abort), crashes, leaks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ytree.h"

#define FUZZ_NODES 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The invariants of a loaded tree. */
static void check(const struct ytree *t)
{
	for (size_t i = 0; i < t->n_nodes; i++) {
		const struct ytree_node *n = &t->nodes[i];

		if (n->size == 0 || n->size > FUZZ_NODES || n->line == 0 || n->column == 0)
			abort();
		if (n->kind == YTREE_SCALAR) {
			if (!n->value || n->n_kids || n->value[n->len] != 0)
				abort();
			continue;
		}
		if (n->value || (n->kind == YTREE_MAP && n->n_kids % 2))
			abort();
		for (size_t k = 0; k < n->n_kids; k++)
			if (n->kids[k] >= t->n_nodes || n->kids[k] == i)
				abort();
		if (n->kind == YTREE_MAP) {
			/* A lookup of the first key finds a value. */
			if (n->n_kids && ytree_kid(t, n, 0)->kind == YTREE_SCALAR &&
			    strlen(ytree_kid(t, n, 0)->value) == ytree_kid(t, n, 0)->len &&
			    !ytree_get(t, n, ytree_kid(t, n, 0)->value))
				abort();
		}
	}
	if (t->has_root && t->root >= t->n_nodes)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned modes[] = { 0, YTREE_FIRST_DOCUMENT, YTREE_JSON };

	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct ytree t = { 0 };
		struct ytree_error err;
		int r;

		r = ytree_load(&t, (const char *)data, size, modes[m], FUZZ_NODES, &err);
		if (r == -EINVAL) {
			if (!err.message[0] || t.nodes || t.has_root)
				abort();
		} else if (r == 0) {
			check(&t);
		} else if (r != -ENOMEM) {
			abort();
		}
		ytree_release(&t);
	}
	return 0;
}
