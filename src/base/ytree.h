#pragma once

/*
 * ytree: the one YAML/JSON document tree (the config file; the doctor's CDI specs, daemon.json,
 * edgecore.yaml and image JSON). Not "yaml.h"/"yaml_": those are libyaml's.
 *
 * YAML is read from libyaml's parser events (YAML 1.1, as the Go readers we mirror); JSON, with
 * YTREE_JSON, by a reader of RFC 8259 of our own, because libyaml reads JSON as YAML 1.1: it
 * types bare words (`yes`, `0x1F`), folds line breaks inside strings, refuses the surrogate pair
 * escapes that JSON writers emit for characters past U+FFFF, and takes YAML's escapes, single
 * quotes, comments, anchors and block style that no JSON reader takes.
 *
 * Nodes live in one array and refer to their children by index; an alias is the index of its
 * anchor's node, so the tree is a DAG and an alias costs one index, not a copy. Bounded, with a
 * positioned error and never a crash past a bound: nesting (YTREE_DEPTH_MAX levels), nodes
 * (@max_nodes), and the document with every alias expanded (@max_nodes too: a "billion laughs"
 * is refused at the level that passes it, so any walk of the tree does bounded work). Building
 * takes time and memory linear in the input (arrays grow by doubling; anchors are hashed).
 *
 * No globals, no logging: any thread. The tree owns all its strings.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define YTREE_DEPTH_MAX 64
/* The bound for a file read whole (the doctor's): a map of 100,000 keys is 200,001 nodes. */
#define YTREE_NODES_MAX (1u << 18)

enum ytree_kind {
	YTREE_SCALAR,
	YTREE_SEQ,
	YTREE_MAP, /* kids: key, value, key, value, ... */
};

struct ytree_node {
	enum ytree_kind kind;
	/*
	 * A scalar typed by its text: YAML's plain style not tagged !!str (`true`, `42`, `null`),
	 * or JSON's literals (numbers, true, false, null); false for a quoted string.
	 */
	bool plain;
	unsigned line, column; /* 1-based: where the node starts */
	char *value;	       /* a scalar's text, NUL-terminated; may hold NULs (JSON's \u0000) */
	size_t len;	       /* its length */
	size_t *kids;	       /* indexes into the tree's nodes */
	size_t n_kids, cap_kids;
	size_t size;  /* nodes in the expansion of this one (aliases followed) */
	char *anchor; /* while loading: a collection's anchor, defined at its end */
};

struct ytree_anchor {
	char *name;
	size_t node;
};

struct ytree {
	struct ytree_node *nodes;
	size_t n_nodes, cap_nodes;
	struct ytree_anchor *anchors; /* an open-addressing hash of the anchors */
	size_t n_anchors, cap_anchors;
	size_t root;
	bool has_root; /* false: the input holds no document (empty, or only comments) */
};

/* Why a load failed: where, and what to tell the user. */
struct ytree_error {
	unsigned line, column; /* 1-based; 0 when the input as a whole is meant */
	bool syntax;	       /* not YAML/JSON at all (rather than past a bound of ours) */
	char message[256];
};

enum {
	YTREE_JSON = 1u << 0, /* the input is JSON (RFC 8259), not YAML */
	/*
	 * Keep the first YAML document and read nothing after it (as Go's yaml.Unmarshal does);
	 * without it, a second document that is not empty is an error.
	 */
	YTREE_FIRST_DOCUMENT = 1u << 1,
};

/*
 * Builds @t (zeroed by the caller) from @len bytes of @data, read as @flags say. A leading UTF-8
 * BOM is skipped. Returns 0; -ENOMEM; or -EINVAL with @err filled (a syntax error, an alias to no
 * anchor before it, past a bound, a second document). On failure @t is left empty. The caller
 * releases a loaded @t with ytree_release().
 */
int ytree_load(struct ytree *t, const char *data, size_t len, unsigned flags, size_t max_nodes,
	       struct ytree_error *err) WARN_UNUSED;
void ytree_release(struct ytree *t);

/* The document's root, or NULL when there is none. */
const struct ytree_node *ytree_root(const struct ytree *t);

/* The @i-th item of a sequence, or the @i-th key (even) / value (odd) of a mapping. */
static inline const struct ytree_node *ytree_kid(const struct ytree *t, const struct ytree_node *n,
						 size_t i)
{
	return &t->nodes[n->kids[i]];
}

/*
 * A mapping's value for the scalar key @key (compared whole, NULs included), or NULL when @map is
 * NULL, not a mapping, or has no such key. A repeated key gives its last value, as Go's
 * encoding/json and go-yaml v2 (the readers of daemon.json and CDI specs) do.
 */
const struct ytree_node *ytree_get(const struct ytree *t, const struct ytree_node *map,
				   const char *key);

/*
 * YAML 1.1's null, as go-yaml v2 resolves a plain scalar: empty, "~", "null", "Null" or "NULL"
 * unquoted (an empty document is one). A quoted "null" is a string.
 */
bool ytree_is_null(const struct ytree_node *n);

/* A scalar's text, or NULL when @n is NULL or not a scalar. */
static inline const char *ytree_str(const struct ytree_node *n)
{
	return n && n->kind == YTREE_SCALAR ? n->value : NULL;
}
