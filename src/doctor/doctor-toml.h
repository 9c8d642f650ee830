#pragma once

/*
 * A small TOML reader for what containerd configs hold, used by the doctor's runtime layer:
 * [tables] and [[arrays of tables]] with dotted, "quoted" and 'literal' names; key = value with
 * dotted keys; basic and literal strings (single-line and multi-line), booleans, integers,
 * floats, arrays (any nesting; the string elements are kept) and inline tables; comments.
 * Dates and times are refused (containerd configs have none). Duplicate keys are an error,
 * as TOML says.
 *
 * The result is flat: one entry per key = value, named by its full path of segments
 * (["plugins", "io.containerd.grpc.v1.cri", "containerd", "default_runtime_name"]), in file
 * order. An element of an array of tables gets a segment "[N]" after the array's name.
 *
 * No I/O, no globals, no logging: any thread.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

enum doctor_toml_type {
	DOCTOR_TOML_STRING,
	DOCTOR_TOML_BOOL,
	DOCTOR_TOML_INT,
	DOCTOR_TOML_FLOAT,
	DOCTOR_TOML_ARRAY,
};

struct doctor_toml_entry {
	char **path; /* n_path segments */
	size_t n_path;
	enum doctor_toml_type type;
	char *value;   /* the string; "true"/"false"; the number as written; NULL for an array */
	char **strv;   /* an array's string elements, in order (others skipped) */
	size_t n_strv; /* ... and their count */
	unsigned line; /* 1-based line of the key */
};

struct doctor_toml {
	struct doctor_toml_entry *e;
	size_t n, cap;
};

#define DOCTOR_TOML_MAX_DEPTH 32

/*
 * Parses @len bytes of @data (NUL bytes are refused; @data may be NULL when @len is 0). On
 * success *@ret is a new document the caller frees with doctor_toml_free(). Numbers are TOML's
 * (no leading zero, '_' only between digits): another spelling is a syntax error, as it is
 * for containerd. Returns 0, -ENOMEM, or -EINVAL for a syntax error: then
 * *@reterr_line (if not NULL) is its 1-based line and *@reterr (if not NULL) a heap message the
 * caller frees ("expected '=' after the key"). Nothing is returned on failure.
 */
int doctor_toml_parse(const char *data, size_t len, struct doctor_toml **ret, unsigned *reterr_line,
		      char **reterr) WARN_UNUSED;

/* NULL-safe; returns NULL. */
struct doctor_toml *doctor_toml_free(struct doctor_toml *t);

/* The entry whose path is exactly @path (@n segments), or NULL. */
const struct doctor_toml_entry *doctor_toml_get(const struct doctor_toml *t,
						const char *const *path, size_t n);

/* Whether @e's path starts with @prefix (@n segments). */
bool doctor_toml_has_prefix(const struct doctor_toml_entry *e, const char *const *prefix, size_t n);
