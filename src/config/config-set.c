/*
 * config-set.c: one value from one source (a YAML node, an environment variable, a flag) into
 * one field of the struct: the typed getters with their "expected X, got Y" errors, a setter
 * per field kind (strings, resource names, bounded integers and durations, enums, device-list
 * strategies, XID and device lists, the resources.gpus and time-slicing entries), and the NVIDIA
 * keys we accept only at their defaults; and the walk of a YAML mapping against a table, with its
 * unknown- and duplicate-key errors and "did you mean" suggestions. The walk and the setters
 * recurse into each other (a section is a mapping), which is why they share this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config-int.h"
#include "gpu.h"

static int get_text(struct ctx *x, const struct src *s, const char **ret)
{
	int r;

	if (s->origin != ORIGIN_FILE) {
		if (!s->text) {
			r = config_add_err(x, s, "needs a value");
			return r < 0 ? r : 0;
		}
		*ret = s->text;
		return 1;
	}
	if (s->node->kind != YTREE_SCALAR) {
		r = config_type_error(x, s, "a string");
		return r < 0 ? r : 0;
	}
	if (strlen(scalar(s->node)) != s->node->len) {
		r = config_add_err(x, s, "must not contain a NUL character");
		return r < 0 ? r : 0;
	}
	if (s->node->len > STR_MAX) {
		r = config_add_err(x, s, "is longer than %d characters", STR_MAX);
		return r < 0 ? r : 0;
	}
	*ret = scalar(s->node);
	return 1;
}

static int get_bool(struct ctx *x, const struct src *s, bool *ret)
{
	int r;

	if (s->origin == ORIGIN_FILE) {
		if (is_plain(s->node) && config_parse_yaml_bool(scalar(s->node), ret) == 0)
			return 1;
	} else if (s->origin == ORIGIN_FLAG && !s->text) {
		*ret = true;
		return 1;
	} else if (s->origin == ORIGIN_ENV && !*s->text) {
		/* urfave/cli: a variable set to "" means false. */
		*ret = false;
		return 1;
	} else if (config_parse_go_bool(s->text, ret) == 0) {
		return 1;
	}
	r = config_type_error(x, s, "true or false");
	return r < 0 ? r : 0;
}

static int get_uint(struct ctx *x, const struct src *s, uint64_t *ret)
{
	bool neg = false;
	int r;

	if (s->origin == ORIGIN_FILE) {
		if (!is_plain(s->node) ||
		    config_parse_go_int(scalar(s->node), true, ret, &neg) < 0) {
			r = config_type_error(x, s, "an integer");
			return r < 0 ? r : 0;
		}
	} else {
		if (!s->text || config_parse_go_int(s->text, false, ret, &neg) < 0) {
			r = s->text ? config_type_error(x, s, "an integer") :
				      config_add_err(x, s, "needs a value");
			return r < 0 ? r : 0;
		}
	}
	if (neg) {
		char q[96];

		r = config_add_err(x, s, "must not be negative, got %s",
				   config_quote(q, sizeof(q),
						s->origin == ORIGIN_FILE ? scalar(s->node) :
									   s->text));
		return r < 0 ? r : 0;
	}
	return 1;
}

static int get_duration(struct ctx *x, const struct src *s, usec_t *ret)
{
	const char *t = NULL;
	char q[96];
	bool neg;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	r = config_parse_go_duration(t, ret, &neg);
	if (r == -ERANGE)
		r = config_add_err(x, s, "duration %s is too long", config_quote(q, sizeof(q), t));
	else if (r < 0)
		r = config_add_err(
			x, s, "expected a duration such as \"5s\", \"500ms\" or \"1m30s\", got %s",
			config_quote(q, sizeof(q), t));
	else if (neg)
		r = config_add_err(x, s, "must not be negative, got %s",
				   config_quote(q, sizeof(q), t));
	else
		return 1;
	return r < 0 ? r : 0;
}

static const struct enum_value *enum_lookup(const struct enum_value *v, const char *s)
{
	for (; v->name; v++)
		if (streq(v->name, s))
			return v;
	return NULL;
}

static int enum_error(struct ctx *x, const struct src *s, const struct enum_value *v,
		      const char *got)
{
	char q[96], list[256];
	size_t o = 0;

	list[0] = 0;
	for (; v->name && o < sizeof(list); v++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", v->name);
	return config_add_err(x, s, "invalid value %s, expected one of: %s",
			      config_quote(q, sizeof(q), got), list);
}

static int set_str(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	char **p = AT(base, f->off), *v;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	if (!*t) {
		if (f->min == STR_EMPTY_IGNORED)
			return 0;
		if (f->min == STR_NONEMPTY)
			return config_add_err(x, s, "must not be empty");
	}
	v = strdup(t);
	if (!v)
		return -ENOMEM;
	free(*p);
	*p = v;
	return 0;
}

static int set_resname(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	char **p = AT(base, f->off), *v = NULL;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	r = config_resname_normalize(t, &v);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		char q[96];

		return config_add_err(
			x, s,
			"invalid resource name %s: it must be at most %d characters, and "
			"what follows \"" RESNAME_PREFIX "\" a DNS subdomain (lower-case "
			"letters, digits, '-' and '.')",
			config_quote(q, sizeof(q), t), RESNAME_MAX);
	}
	free(*p);
	*p = v;
	return 0;
}

static int set_uint(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	uint64_t v = 0;
	int r;

	r = get_uint(x, s, &v);
	if (r <= 0)
		return r;
	if (v < f->min)
		return config_add_err(x, s, "must be at least %" PRIu64 ", got %" PRIu64, f->min,
				      v);
	if (f->max && v > f->max)
		return config_add_err(x, s, "must be at most %" PRIu64 ", got %" PRIu64, f->max, v);
	if (f->kind == K_U32)
		*(unsigned *)AT(base, f->off) = (unsigned)v;
	else
		*(uint64_t *)AT(base, f->off) = v;
	return 0;
}

static int set_duration(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	char a[64], b[64];
	usec_t v = 0;
	int r;

	r = get_duration(x, s, &v);
	if (r <= 0)
		return r;
	if (v < f->min)
		return config_add_err(x, s, "must be at least %s, got %s",
				      config_format_duration(a, sizeof(a), f->min),
				      config_format_duration(b, sizeof(b), v));
	if (v > f->max)
		return config_add_err(x, s, "must be at most %s, got %s",
				      config_format_duration(a, sizeof(a), f->max),
				      config_format_duration(b, sizeof(b), v));
	*(usec_t *)AT(base, f->off) = v;
	return 0;
}

static int set_enum(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const struct enum_value *v;
	const char *t = NULL;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	v = enum_lookup(f->arg, t);
	if (!v)
		return enum_error(x, s, f->arg, t);
	if (v->refuse)
		return config_add_err(x, s, "%s", v->refuse);
	if (v->warn)
		return config_add_warn(x, s, "is not acted on by edgegpu and is ignored");
	if (f->off != NOOFF)
		*(int *)AT(base, f->off) = v->value;
	return 0;
}

/* One device-list strategy name into *bits; 1 ok, 0 error recorded. */
static int dls_one(struct ctx *x, const struct src *s, const char *name, unsigned *bits)
{
	const struct enum_value *v = enum_lookup(config_dls_values, name);
	int r;

	if (v) {
		*bits |= (unsigned)v->value;
		return 1;
	}
	r = enum_error(x, s, config_dls_values, name);
	return r < 0 ? r : 0;
}

static int set_dls(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	unsigned bits = 0;
	bool bad = false;
	int r;

	if (s->origin == ORIGIN_FILE && s->node->kind == YTREE_SEQ) {
		size_t n = seq_len(s->node);

		if (n == 0)
			return config_add_err(x, s, "needs at least one strategy");
		if (n > CONFIG_LIST_MAX)
			return config_add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
		for (size_t i = 0; i < n && !x->stop; i++) {
			char key[KEY_MAX];
			struct src is = { ORIGIN_FILE, key };

			is.node = ytree_kid(x->doc, s->node, i);
			is.pos = node_pos(is.node);
			(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
			if (is.node->kind != YTREE_SCALAR) {
				r = config_type_error(x, &is, "a strategy name");
				if (r < 0)
					return r;
				bad = true;
				continue;
			}
			r = dls_one(x, &is, scalar(is.node), &bits);
			if (r < 0)
				return r;
			bad |= r == 0;
		}
	} else if (s->origin == ORIGIN_FILE) {
		const char *t = NULL;

		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		r = dls_one(x, s, t, &bits);
		if (r <= 0)
			return r;
	} else {
		/* urfave/cli string slices: split on ',', each piece trimmed. */
		const char *p = s->text;

		if (!p)
			return config_add_err(x, s, "needs a value");
		for (;;) {
			const char *e = strchr(p, ','), *end = e ? e : p + strlen(p);
			char piece[64];
			size_t len;

			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			len = (size_t)(end - p);
			if (len >= sizeof(piece))
				len = sizeof(piece) - 1;
			memcpy(piece, p, len);
			piece[len] = 0;
			r = dls_one(x, s, piece, &bits);
			if (r < 0)
				return r;
			bad |= r == 0;
			if (!e)
				break;
			p = e + 1;
		}
	}
	if (!bad)
		*(unsigned *)AT(base, f->off) = bits;
	return 0;
}

static int set_xids(struct ctx *x, void *base, const struct src *s)
{
	struct config *c = base;
	uint64_t *v;
	size_t n;

	if (s->origin != ORIGIN_FILE || s->node->kind != YTREE_SEQ)
		return config_type_error(x, s, "a list of XIDs");
	n = seq_len(s->node);
	if (n > CONFIG_LIST_MAX)
		return config_add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n && !x->stop; i++) {
		char key[KEY_MAX];
		struct src is = { ORIGIN_FILE, key };

		is.node = ytree_kid(x->doc, s->node, i);
		is.pos = node_pos(is.node);
		int r;

		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		r = get_uint(x, &is, &v[i]);
		if (r < 0) {
			free(v);
			return r;
		}
	}
	free(c->health.ignored_xids);
	c->health.ignored_xids = v;
	c->health.n_ignored_xids = n;
	return 0;
}

/* One `devices` entry, as NVIDIA's ReplicaDevices reads list items. */
static int parse_ref(struct ctx *x, const struct src *s, struct config_device_ref *ref)
{
	const char *t = scalar(s->node);
	char q[96];
	uint64_t v;
	unsigned u;
	bool neg;

	ref->pos = s->pos;
	if (s->node->kind != YTREE_SCALAR || is_null(s->node))
		return config_type_error(x, s, "a GPU index or UUID");
	if (strlen(t) != s->node->len)
		return config_add_err(x, s, "must not contain a NUL character");
	/* A plain scalar that go-yaml reads as an integer is an index; so is a quoted number. */
	if (is_plain(s->node) && config_parse_go_int(t, true, &v, &neg) == 0) {
		if (neg || v > UINT32_MAX)
			return config_add_err(x, s, "GPU index %s is out of range",
					      config_quote(q, sizeof(q), t));
		ref->index = (unsigned)v;
		return 0;
	}
	if (*t >= '0' && *t <= '9' && strspn(t, "0123456789") == strlen(t)) {
		if (safe_atou(t, &u) < 0)
			return config_add_err(x, s, "GPU index %s is out of range",
					      config_quote(q, sizeof(q), t));
		ref->index = u;
		return 0;
	}
	if (strncmp(t, "MIG-", 4) == 0 || strchr(t, ':'))
		return config_add_err(x, s, "MIG devices are not supported by edgegpu yet, got %s",
				      config_quote(q, sizeof(q), t));
	/* A name of ours (the Tegra iGPU's "tegra") is checked against the config later. */
	if ((strncmp(t, "GPU-", 4) == 0 && strlen(t) > 4 && strlen(t) < GPU_UUID_MAX &&
	     !strpbrk(t, " \t\r\n")) ||
	    gpu_device_id_valid(t)) {
		ref->uuid = strdup(t);
		return ref->uuid ? 0 : -ENOMEM;
	}
	return config_add_err(x, s, "expected a GPU index or a GPU UUID (\"GPU-...\"), got %s",
			      config_quote(q, sizeof(q), t));
}

bool config_ref_same(const struct config_device_ref *a, const struct config_device_ref *b)
{
	if (a->uuid || b->uuid)
		return a->uuid && b->uuid && strcasecmp(a->uuid, b->uuid) == 0;
	return a->index == b->index;
}

const char *config_device_ref_str(char *out, size_t size, const struct config_device_ref *r)
{
	if (r->uuid)
		(void)snprintf(out, size, "%s", r->uuid);
	else
		(void)snprintf(out, size, "GPU %u", r->index);
	return out;
}

static int set_devices(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	struct config_devices *d = AT(base, f->off);
	const struct ytree_node *n = s->node;
	size_t len;

	if (n->kind == YTREE_SCALAR && f->kind == K_TS_DEVICES) {
		uint64_t v;
		bool neg;

		if (is_plain(n) && config_parse_go_int(scalar(n), true, &v, &neg) == 0) {
			if (neg || v == 0 || v > CONFIG_LIST_MAX)
				return config_add_err(
					x, s,
					"a count of devices must be between 1 and %d, got %s%" PRIu64,
					CONFIG_LIST_MAX, neg ? "-" : "", v);
			config_free_devices(d);
			d->kind = CONFIG_DEVICES_COUNT;
			d->count = (unsigned)v;
			d->pos = s->pos;
			return 0;
		}
		if (streq(scalar(n), "all")) {
			config_free_devices(d);
			d->kind = CONFIG_DEVICES_ALL;
			d->count = 0;
			d->pos = s->pos;
			return 0;
		}
		return config_type_error(x, s,
					 "\"all\", a count or a list of GPU indices or UUIDs");
	}
	if (n->kind != YTREE_SEQ)
		return config_type_error(
			x, s,
			f->kind == K_TS_DEVICES ?
				"\"all\", a count or a list of GPU indices or UUIDs" :
				"a list of GPU indices or UUIDs");
	len = seq_len(n);
	if (len > CONFIG_LIST_MAX)
		return config_add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	config_free_devices(d);
	d->kind = CONFIG_DEVICES_LIST;
	d->count = 0;
	d->pos = s->pos;
	d->refs = calloc(len ? len : 1, sizeof(*d->refs));
	if (!d->refs)
		return -ENOMEM;
	for (size_t i = 0; i < len && !x->stop; i++) {
		char key[KEY_MAX], a[GPU_UUID_MAX + 8];
		struct src is = { ORIGIN_FILE, key };
		struct config_device_ref *ref = &d->refs[d->n_refs];

		is.node = ytree_kid(x->doc, n, i);
		is.pos = node_pos(is.node);
		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		unsigned before = x->n_errors;
		int r;

		d->n_refs++;
		r = parse_ref(x, &is, ref);
		if (r < 0)
			return r;
		if (x->n_errors != before)
			continue;
		for (size_t j = 0; j + 1 < d->n_refs; j++) {
			if (config_ref_same(&d->refs[j], ref)) {
				r = config_add_err(x, &is, "%s is listed twice",
						   config_device_ref_str(a, sizeof(a), ref));
				if (r < 0)
					return r;
				break;
			}
		}
	}
	return 0;
}

static bool map_has(const struct ytree *doc, const struct ytree_node *map, const char *key)
{
	for (size_t i = 0; i + 1 < map->n_kids; i += 2) {
		const struct ytree_node *k = ytree_kid(doc, map, i),
					*v = ytree_kid(doc, map, i + 1);

		if (k->kind == YTREE_SCALAR && streq(scalar(k), key) && !is_null(v))
			return true;
	}
	return false;
}

static int set_items(struct ctx *x, const struct field *f, struct config *c, const struct src *s)
{
	const struct field *item_fields = f->kind == K_GPUS ? config_gpu_item_fields :
							      config_ts_item_fields;
	size_t isize = f->kind == K_GPUS ? sizeof(struct config_gpu_pattern) :
					   sizeof(struct config_ts_resource);
	void **arr = f->kind == K_GPUS ? (void **)&c->gpus : (void **)&c->time_slicing.resources;
	size_t *n_arr = f->kind == K_GPUS ? &c->n_gpus : &c->time_slicing.n_resources;
	size_t n;
	char *items;
	int r;

	if (s->node->kind != YTREE_SEQ)
		return config_type_error(x, s, "a list");
	n = seq_len(s->node);
	if (n > CONFIG_LIST_MAX)
		return config_add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	items = calloc(n ? n : 1, isize);
	if (!items)
		return -ENOMEM;
	for (size_t i = 0; i < *n_arr; i++)
		config_free_fields(item_fields, (char *)*arr + i * isize);
	free(*arr);
	*arr = items;
	*n_arr = n;
	for (size_t i = 0; i < n && !x->stop; i++) {
		char key[KEY_MAX];
		struct src is = { ORIGIN_FILE, key };
		void *item = items + i * isize;
		struct config_pos *ipos;

		is.node = ytree_kid(x->doc, s->node, i);
		is.pos = node_pos(is.node);
		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		if (is.node->kind != YTREE_MAP) {
			r = config_type_error(x, &is, "a mapping");
			if (r < 0)
				return r;
			continue;
		}
		ipos = f->kind == K_GPUS ? &((struct config_gpu_pattern *)item)->pos :
					   &((struct config_ts_resource *)item)->pos;
		*ipos = is.pos;
		r = config_parse_map(x, item_fields, item, key, is.node);
		if (r < 0)
			return r;
		/* Required keys, named by their full path at the entry. */
		for (const struct field *rf = item_fields; rf->key; rf++) {
			char rkey[KEY_MAX + 64];
			struct src rs = is;

			if (rf->kind == K_TS_DEVICES || streq(rf->key, "rename") ||
			    map_has(x->doc, is.node, rf->key))
				continue;
			(void)snprintf(rkey, sizeof(rkey), "%s.%s", key, rf->key);
			rs.key = rkey;
			r = config_add_err(x, &rs, "is required");
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int set_unsupported(struct ctx *x, const struct field *f, const struct src *s)
{
	char q[96], a[64];
	const char *t = NULL;
	bool b = false;
	usec_t u = 0;
	int r;

	switch (f->kind) {
	case K_UNSUP_BOOL:
		r = get_bool(x, s, &b);
		if (r <= 0)
			return r;
		if (b == (bool)f->min)
			return config_add_warn(x, s, UNSUP_WARN);
		return config_add_err(
			x, s, "is not supported by edgegpu; only the default, %s, is accepted",
			f->min ? "true" : "false");
	case K_UNSUP_STR:
		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		if (streq(t, f->arg))
			return config_add_warn(x, s, UNSUP_WARN);
		return config_add_err(
			x, s, "is not supported by edgegpu; only the default, %s, is accepted",
			config_quote(q, sizeof(q), f->arg));
	case K_UNSUP_DURATION:
		/* NVIDIA's Duration also takes a plain number of nanoseconds. */
		if (s->origin == ORIGIN_FILE && is_plain(s->node)) {
			uint64_t ns;
			bool neg;

			if (config_parse_go_int(scalar(s->node), true, &ns, &neg) == 0 && !neg) {
				u = ns / NS_PER_USEC;
				goto have_duration;
			}
		}
		r = get_duration(x, s, &u);
		if (r <= 0)
			return r;
have_duration:
		if (u == f->min)
			return config_add_warn(x, s, UNSUP_WARN);
		return config_add_err(
			x, s, "is not supported by edgegpu; only the default, %s, is accepted",
			config_format_duration(a, sizeof(a), f->min));
	case K_UNSUP_ANY:
		return config_add_warn(x, s, "%s", (const char *)f->arg);
	case K_UNSUP_EMPTY_LIST:
		if (s->origin == ORIGIN_FILE) {
			if (s->node->kind != YTREE_SEQ)
				return config_type_error(x, s, "a list");
			if (seq_len(s->node) == 0)
				return config_add_warn(x, s, UNSUP_WARN);
		} else if (s->text && !*s->text) {
			return config_add_warn(x, s, UNSUP_WARN);
		}
		return config_add_err(
			x, s, "is not supported by edgegpu; only the default, [], is accepted");
	case K_REFUSE:
		if ((s->node->kind == YTREE_SEQ && seq_len(s->node) == 0) ||
		    (s->node->kind == YTREE_MAP && map_len(s->node) == 0))
			return config_add_warn(
				x, s, "is not supported by edgegpu and is ignored (it is empty)");
		return config_add_err(x, s, "%s", (const char *)f->arg);
	default:
		return 0;
	}
}

int config_set_field(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	int r;

	if (f->pos && s->origin == ORIGIN_FILE)
		*(struct config_pos *)AT(base, f->pos - 1) = s->pos;
	switch (f->kind) {
	case K_SECTION:
	case K_TIME_SLICING:
	case K_XIDS:
	case K_DEVICES:
	case K_TS_DEVICES:
	case K_GPUS:
	case K_TS_RESOURCES:
	case K_REFUSE:
		/* Only the file has these; no flag or variable names them. */
		if (!s->node)
			return 0;
		break;
	default:
		break;
	}
	switch (f->kind) {
	case K_SECTION:
		return config_parse_map(x, f->arg, base, s->key, s->node);
	case K_TIME_SLICING: {
		unsigned before = x->n_errors;

		r = config_parse_map(x, f->arg, base, s->key, s->node);
		if (r < 0 || s->node->kind != YTREE_MAP || x->n_errors != before)
			return r;
		if (((struct config *)base)->time_slicing.n_resources == 0) {
			char key[KEY_MAX];
			struct src rs = *s;

			(void)snprintf(key, sizeof(key), "%s.resources", s->key);
			rs.key = key;
			return config_add_err(x, &rs, "no resources specified");
		}
		return 0;
	}
	case K_BOOL: {
		bool b = false;

		r = get_bool(x, s, &b);
		if (r > 0)
			*(bool *)AT(base, f->off) = b;
		return r < 0 ? r : 0;
	}
	case K_STR:
		return set_str(x, f, base, s);
	case K_RESNAME:
		return set_resname(x, f, base, s);
	case K_U32:
	case K_U64:
		return set_uint(x, f, base, s);
	case K_DURATION:
		return set_duration(x, f, base, s);
	case K_ENUM:
		return set_enum(x, f, base, s);
	case K_DLS:
		return set_dls(x, f, base, s);
	case K_XIDS:
		return set_xids(x, base, s);
	case K_DEVICES:
	case K_TS_DEVICES:
		return set_devices(x, f, base, s);
	case K_GPUS:
	case K_TS_RESOURCES:
		return set_items(x, f, base, s);
	case K_VERSION:
		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		if (*t && !streq(t, "v1")) {
			char q[96];

			return config_add_err(x, s, "unknown version %s, expected v1",
					      config_quote(q, sizeof(q), t));
		}
		return 0;
	case K_UNSUP_BOOL:
	case K_UNSUP_STR:
	case K_UNSUP_DURATION:
	case K_UNSUP_ANY:
	case K_UNSUP_EMPTY_LIST:
	case K_REFUSE:
		return set_unsupported(x, f, s);
	case K_END:
		break;
	}
	return 0;
}

/* Levenshtein distance, case-insensitive, for "did you mean"; large for long strings. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[65], cur[65];

	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + ((a[i - 1] | 0x20) != (b[j - 1] | 0x20));

			cur[j] = MIN(MIN(prev[j] + 1, cur[j - 1] + 1), sub);
		}
		memcpy(prev, cur, sizeof(prev));
	}
	return prev[lb];
}

static int unknown_key(struct ctx *x, const struct field *fields, const struct src *s,
		       const char *key)
{
	const char *best = NULL;
	size_t bd = 3;

	for (const struct field *f = fields; f->kind != K_END; f++) {
		size_t dist;

		if (!f->key)
			continue;
		dist = edit_distance(key, f->key);
		if (dist < bd) {
			bd = dist;
			best = f->key;
		}
	}
	if (best)
		return config_add_err(x, s, "unknown key, did you mean \"%s\"?", best);
	return config_add_err(x, s, "unknown key");
}

int config_parse_map(struct ctx *x, const struct field *fields, void *base, const char *path,
		     const struct ytree_node *node)
{
	uint64_t seen = 0;

	if (is_null(node))
		return 0;
	if (node->kind != YTREE_MAP) {
		struct src s = { ORIGIN_FILE, path[0] ? path : NULL, node, NULL, node_pos(node) };

		return config_type_error(x, &s, "a mapping");
	}
	for (size_t p = 0; p + 1 < node->n_kids && !x->stop; p += 2) {
		const struct ytree_node *k = ytree_kid(x->doc, node, p),
					*v = ytree_kid(x->doc, node, p + 1);
		char key[KEY_MAX];
		struct src s = { ORIGIN_FILE, key };
		const struct field *f;
		unsigned i = 0;
		int r;

		s.node = k;
		s.pos = node_pos(k);
		if (k->kind != YTREE_SCALAR) {
			char q[96];

			s.key = path[0] ? path : NULL;
			r = config_add_err(x, &s, "keys must be strings, got %s",
					   config_describe(q, sizeof(q), k));
			if (r < 0)
				return r;
			continue;
		}
		(void)snprintf(key, sizeof(key), "%s%s%s", path, path[0] ? "." : "", scalar(k));
		for (f = fields; f->kind != K_END; f++, i++)
			if (f->key && streq(f->key, scalar(k)))
				break;
		if (f->kind == K_END || strlen(scalar(k)) != k->len)
			r = unknown_key(x, fields, &s, scalar(k));
		else if (seen & (UINT64_C(1) << i))
			r = config_add_err(x, &s, "duplicate key");
		else {
			seen |= UINT64_C(1) << i;
			if (is_null(v))
				continue; /* null is "not set", as for NVIDIA's pointer fields */
			s.node = v;
			s.pos = node_pos(v);
			r = config_set_field(x, f, base, &s);
		}
		if (r < 0)
			return r;
	}
	return 0;
}
