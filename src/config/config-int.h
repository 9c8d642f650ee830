#pragma once

/*
 * config-int.h: what the files of the config module share and nothing else sees. The schema
 * (struct field tables walked by every stage), the parse context that collects diagnostics
 * about the YAML tree (base's ytree.h), and the helpers each file lends the others: typed Go
 * scalars (config-value.c), diagnostics (config-diag.c), the tables (config-schema.c), setters
 * and the mapping walk (config-set.c), free/copy/compare/dump walkers and the commit of a copy
 * (config-walk.c), cross-checks (config-check.c), environment and flags (config-env.c).
 *
 * The files call one way, no circle (scripts/check-layers checks it), lowest first:
 *   config-value.c, config-schema.c   call no other file of the module
 *   config-diag.c                      value
 *   config-walk.c                      schema, value
 *   config-set.c                       diag, walk, schema, value
 *   config-check.c                     diag, set, value
 *   config-env.c                       diag, set, walk, schema
 *   config-args.c                      the command line's config flags (config.h)
 *   config.c                           the entry points: any of them
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "util.h"
#include "ytree.h"

#define NOOFF	       SIZE_MAX
#define POS(T, m)      (offsetof(T, m) + 1)
#define AT(b, off)     ((void *)((char *)(b) + (off)))
#define CAT(b, off)    ((const void *)((const char *)(b) + (off)))
#define MIB	       ((uint64_t)1024 * 1024)
#define NS_PER_USEC    1000ULL
#define RESNAME_PREFIX "nvidia.com/"
#define RESNAME_MAX    63
#define STR_MAX	       4096
#define KEY_MAX	       512

#define UNSUP_WARN "is not supported by edgegpu and is ignored (it is set to its default)"

/* --- the schema --- */

struct enum_value {
	const char *name;
	int value;
	const char *refuse; /* recognised, refused with this message */
	bool warn;	    /* accepted, not acted on: a warning */
};

enum kind {
	K_END,
	K_SECTION,	/* arg: sub-table, same base */
	K_TIME_SLICING, /* a section that needs resources */
	K_BOOL,
	K_STR,	   /* min: enum str_mode */
	K_RESNAME, /* a resource name, normalised */
	K_U32,
	K_U64,
	K_DURATION,
	K_ENUM, /* arg: enum values; off may be NOOFF (checked, not stored) */
	K_DLS,
	K_XIDS,		/* c->health.ignored_xids */
	K_DEVICES,	/* struct config_devices, list only */
	K_TS_DEVICES,	/* struct config_devices: all | count | list */
	K_GPUS,		/* c->gpus */
	K_TS_RESOURCES, /* c->time_slicing.resources */
	K_VERSION,
	K_UNSUP_BOOL,	  /* min: the default */
	K_UNSUP_STR,	  /* arg: the default */
	K_UNSUP_DURATION, /* min: the default, usec */
	K_UNSUP_ANY,	  /* any value: a warning; arg: message */
	K_UNSUP_EMPTY_LIST,
	K_REFUSE, /* any value but an empty one: an error; arg: message */
};

enum str_mode {
	STR_NONEMPTY,	   /* "" is an error */
	STR_EMPTY_IGNORED, /* "" leaves the setting as it was */
	STR_EMPTY_OK,	   /* "" is a value */
};

#define F_NOCMP 1u /* not compared by config_equal() */

struct field {
	const char *key; /* NULL: not in the file (flags and environment only) */
	enum kind kind;
	size_t off;
	size_t pos; /* POS() of a struct config_pos recording where the value was, or 0 */
	const void *arg;
	uint64_t min, max;
	const char *flag[2];
	const char *env[2];
	unsigned flags;
	/*
	 * For --help and the man page (config_flags_foreach()), on every field with a flag or an
	 * environment name: one line saying what it sets, and the value's name for a string
	 * ("PATH", "ADDR"; NULL: derived from the kind).
	 */
	const char *help;
	const char *value;
};

static inline bool is_section(const struct field *f)
{
	return f->kind == K_SECTION || f->kind == K_TIME_SLICING;
}

/* The tables of config-schema.c. */
extern const struct field config_root_fields[];
extern const struct field config_gpu_item_fields[];
extern const struct field config_ts_item_fields[];
extern const struct enum_value config_dls_values[];

/* --- the parse context --- */

enum origin {
	ORIGIN_FILE,
	ORIGIN_ENV,
	ORIGIN_FLAG,
};

/* The config file's bound on its YAML tree (ytree.h), in nodes. */
#define YAML_NODES_MAX 65536

struct ctx {
	struct config_diag *d;
	const char *file; /* for positions from the file */
	const struct ytree *doc;
	unsigned n_errors;
	bool stop; /* too many errors */
};

/* Where a value comes from. */
struct src {
	enum origin origin;
	const char *key;
	const struct ytree_node *node; /* ORIGIN_FILE */
	const char *text;	       /* ORIGIN_ENV, ORIGIN_FLAG (NULL: a bare flag) */
	struct config_pos pos;
};

/* --- config-value.c: Go-typed scalars --- */

/* Go's strconv.ParseBool. */
int config_parse_go_bool(const char *s, bool *ret);
/* go-yaml v2 (YAML 1.1) booleans, as sigs.k8s.io/yaml resolves plain scalars. */
int config_parse_yaml_bool(const char *s, bool *ret);
/*
 * Go's strconv.ParseInt(s, 0, 64) / ParseUint, which go-yaml v2 applies after dropping
 * underscores (when @underscores): optional sign, then 0x, 0o, 0b or a leading 0 (octal), or
 * decimal. Returns 0, -EINVAL or -ERANGE.
 */
int config_parse_go_int(const char *s, bool underscores, uint64_t *ret, bool *ret_neg);
/*
 * Go's time.ParseDuration, converted to microseconds (sub-microsecond parts are dropped).
 * Returns 0 and sets *ret_neg for a negative duration, or -EINVAL / -ERANGE.
 */
int config_parse_go_duration(const char *s, usec_t *ret, bool *ret_neg);
/*
 * Formats @u the way Go's Duration.String() does, less its zero components, so that
 * config_parse_go_duration() reads it back: "0s", "250us", "1.5ms", "1h2m3.5s". Returns @out.
 */
const char *config_format_duration(char *out, size_t size, usec_t u);
/* NVIDIA's NewResourceName into a new string: 0, -EINVAL or -ENOMEM. */
int config_resname_normalize(const char *in, char **ret);

/* --- YAML nodes (ytree.h), as the config reads them --- */

static inline const char *scalar(const struct ytree_node *n)
{
	return n->value;
}

static inline bool is_plain(const struct ytree_node *n)
{
	return n->kind == YTREE_SCALAR && n->plain;
}

static inline bool is_null(const struct ytree_node *n)
{
	return ytree_is_null(n);
}

static inline size_t seq_len(const struct ytree_node *n)
{
	return n->n_kids;
}

static inline size_t map_len(const struct ytree_node *n)
{
	return n->n_kids / 2;
}

static inline struct config_pos node_pos(const struct ytree_node *n)
{
	return (struct config_pos){ n->line, n->column };
}

/* --- config-diag.c: diagnostics; each returns 0 or -ENOMEM --- */

int config_diag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		    const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* An error or a warning about the value @s. */
int config_add_err(struct ctx *x, const struct src *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int config_add_warn(struct ctx *x, const struct src *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An error at @pos of the file (no file when @pos has no line). */
int config_pos_err(struct ctx *x, struct config_pos pos, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* How a value looks, for "expected X, got Y". */
const char *config_describe(char *out, size_t size, const struct ytree_node *n);
/* "expected @want, got ..." about @s. */
int config_type_error(struct ctx *x, const struct src *s, const char *want);

/* --- config-set.c: values into the struct --- */

/* Sets field @f of @base from @s; problems are recorded in @x. Returns 0 or -ENOMEM. */
int config_set_field(struct ctx *x, const struct field *f, void *base, const struct src *s);
/* Sets @base from the mapping @node, whose dotted key is @path ("" at the root). */
int config_parse_map(struct ctx *x, const struct field *fields, void *base, const char *path,
		     const struct ytree_node *node);
bool config_ref_same(const struct config_device_ref *a, const struct config_device_ref *b);

/* --- config-walk.c: the tables walked --- */

void config_free_devices(struct config_devices *d);
void config_free_fields(const struct field *fields, void *base);
/* Clears every pointer of a shallow copy, so a half-done deep copy frees only its own. */
void config_detach_fields(const struct field *fields, void *base);
/* @dst is a detached shallow copy of @src; deep-copies it. 0 or -ENOMEM. */
int config_copy_fields(const struct field *fields, void *dst, const void *src);
bool config_fields_equal(const struct field *fields, const void *a, const void *b);
int config_dump_fields(const struct field *fields, const void *base, unsigned indent,
		       struct buf *out);
int config_dump_str(struct buf *out, const char *s);

/*
 * Ends an atomic step on a copy: when @r >= 0 and @x recorded no error, *@tmp replaces *@c (the
 * old one released); otherwise *@tmp is released and *@c left as it was. Returns 0, -EINVAL
 * (errors recorded) or @r.
 */
int config_commit(struct ctx *x, struct config *c, struct config *tmp, int r);

/* --- config-check.c --- */

/* What the file alone implies: renameByDefault names. */
int config_finish_file(struct ctx *x, struct config *c);
/* The cross-checks that need no GPUs. */
int config_check(struct ctx *x, struct config *c);

/* --- config-env.c --- */

/* The value of @name in @envp, or NULL. */
const char *config_env_get(char *const *envp, const char *name);
/* @name without its leading "-" or "--". */
const char *config_flag_name(const char *name);
