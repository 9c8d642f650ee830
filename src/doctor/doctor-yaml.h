#pragma once

/*
 * A small YAML/JSON tree for the doctor (CDI specs, Docker's daemon.json, KubeEdge's
 * edgecore.yaml), built from libyaml's events. JSON is read as YAML (flow style); leading
 * whitespace before the document is skipped, so a tab-indented JSON file parses. Aliases read
 * as empty scalars; only the first document is kept. Bounded: nesting depth (64) and node count
 * (DOCTOR_YAML_MAX_NODES: a map of 100,000 keys is 200,001 nodes); building takes time and
 * memory linear in the nodes (each node's children grow by doubling).
 *
 * No globals, no logging: any thread. The tree owns all its strings.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

enum doctor_ynode_kind {
	DOCTOR_YSCALAR,
	DOCTOR_YMAP, /* kids: key, value, key, value, ... */
	DOCTOR_YSEQ,
};

#define DOCTOR_YAML_MAX_NODES (1u << 18)

struct doctor_ynode {
	enum doctor_ynode_kind kind;
	char *value; /* a scalar's text ("" for null/alias); NULL for maps and sequences */
	struct doctor_ynode **kids;
	size_t n_kids;
	size_t cap_kids; /* @kids' room: grown by doubling, so building is linear in the nodes */
	unsigned line;	 /* 1-based */
};

/*
 * Parses @len bytes of @data. On success *@ret is the root (an empty map for an empty
 * document), which the caller frees with doctor_ynode_free(). Returns 0, -ENOMEM, or -EINVAL:
 * then *@reterr_line (if not NULL) is the 1-based line and *@reterr (if not NULL) a heap message
 * from libyaml ("did not find expected ',' or '}'"), which the caller frees.
 */
int doctor_yaml_load(const char *data, size_t len, struct doctor_ynode **ret, unsigned *reterr_line,
		     char **reterr) WARN_UNUSED;

/* NULL-safe; returns NULL. */
struct doctor_ynode *doctor_ynode_free(struct doctor_ynode *n);

/* A map's value for the scalar key @key; NULL when @map is not a map or has no such key. */
const struct doctor_ynode *doctor_ynode_get(const struct doctor_ynode *map, const char *key);

/* A scalar's text, or NULL when @n is NULL or not a scalar. */
const char *doctor_ynode_str(const struct doctor_ynode *n);
