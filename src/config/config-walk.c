/*
 * config-walk.c: the walkers that follow the schema tables over a struct config: free, detach
 * (clear the pointers of a shallow copy), deep copy, compare, and dump as YAML; and on them the
 * struct's release, copy and compare (config.h) and the commit of an atomic step on a copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config-int.h"

void config_free_devices(struct config_devices *d)
{
	for (size_t i = 0; i < d->n_refs; i++)
		free(d->refs[i].uuid);
	d->refs = mfree(d->refs);
	d->n_refs = 0;
}

void config_free_fields(const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *c = base;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			config_free_fields(f->arg, base);
			break;
		case K_STR:
		case K_RESNAME: {
			char **p = AT(base, f->off);

			*p = mfree(*p);
			break;
		}
		case K_XIDS:
			c->health.ignored_xids = mfree(c->health.ignored_xids);
			c->health.n_ignored_xids = 0;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			config_free_devices(AT(base, f->off));
			break;
		case K_GPUS:
			for (size_t i = 0; i < c->n_gpus; i++)
				config_free_fields(config_gpu_item_fields, &c->gpus[i]);
			c->gpus = mfree(c->gpus);
			c->n_gpus = 0;
			break;
		case K_TS_RESOURCES:
			for (size_t i = 0; i < c->time_slicing.n_resources; i++)
				config_free_fields(config_ts_item_fields,
						   &c->time_slicing.resources[i]);
			c->time_slicing.resources = mfree(c->time_slicing.resources);
			c->time_slicing.n_resources = 0;
			break;
		default:
			break;
		}
	}
}

/* Clears every pointer of a shallow copy, so a half-done deep copy frees only its own. */
void config_detach_fields(const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *c = base;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			config_detach_fields(f->arg, base);
			break;
		case K_STR:
		case K_RESNAME:
			*(char **)AT(base, f->off) = NULL;
			break;
		case K_XIDS:
			c->health.ignored_xids = NULL;
			c->health.n_ignored_xids = 0;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			((struct config_devices *)AT(base, f->off))->refs = NULL;
			((struct config_devices *)AT(base, f->off))->n_refs = 0;
			break;
		case K_GPUS:
			c->gpus = NULL;
			c->n_gpus = 0;
			break;
		case K_TS_RESOURCES:
			c->time_slicing.resources = NULL;
			c->time_slicing.n_resources = 0;
			break;
		default:
			break;
		}
	}
}

static int copy_items(const struct field *item_fields, size_t isize, void **dst, size_t *dst_n,
		      const void *src, size_t n);

/* @dst is a detached shallow copy of @src. */
int config_copy_fields(const struct field *fields, void *dst, const void *src)
{
	int r;

	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *dc = dst;
		const struct config *sc = src;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			r = config_copy_fields(f->arg, dst, src);
			if (r < 0)
				return r;
			break;
		case K_STR:
		case K_RESNAME: {
			const char *s = *(char *const *)CAT(src, f->off);

			if (s && !(*(char **)AT(dst, f->off) = strdup(s)))
				return -ENOMEM;
			break;
		}
		case K_XIDS:
			if (!sc->health.n_ignored_xids)
				break;
			dc->health.ignored_xids =
				malloc(sc->health.n_ignored_xids * sizeof(uint64_t));
			if (!dc->health.ignored_xids)
				return -ENOMEM;
			memcpy(dc->health.ignored_xids, sc->health.ignored_xids,
			       sc->health.n_ignored_xids * sizeof(uint64_t));
			dc->health.n_ignored_xids = sc->health.n_ignored_xids;
			break;
		case K_DEVICES:
		case K_TS_DEVICES: {
			struct config_devices *dd = AT(dst, f->off);
			const struct config_devices *sd = CAT(src, f->off);

			if (!sd->refs)
				break;
			dd->refs = calloc(sd->n_refs ? sd->n_refs : 1, sizeof(*dd->refs));
			if (!dd->refs)
				return -ENOMEM;
			dd->n_refs = sd->n_refs;
			for (size_t i = 0; i < sd->n_refs; i++) {
				dd->refs[i] = sd->refs[i];
				dd->refs[i].uuid = NULL;
				if (sd->refs[i].uuid &&
				    !(dd->refs[i].uuid = strdup(sd->refs[i].uuid)))
					return -ENOMEM;
			}
			break;
		}
		case K_GPUS:
			r = copy_items(config_gpu_item_fields, sizeof(*sc->gpus),
				       (void **)&dc->gpus, &dc->n_gpus, sc->gpus, sc->n_gpus);
			if (r < 0)
				return r;
			break;
		case K_TS_RESOURCES:
			r = copy_items(config_ts_item_fields, sizeof(*sc->time_slicing.resources),
				       (void **)&dc->time_slicing.resources,
				       &dc->time_slicing.n_resources, sc->time_slicing.resources,
				       sc->time_slicing.n_resources);
			if (r < 0)
				return r;
			break;
		default:
			break;
		}
	}
	return 0;
}

static int copy_items(const struct field *item_fields, size_t isize, void **dst, size_t *dst_n,
		      const void *src, size_t n)
{
	char *items;

	if (!src)
		return 0;
	items = calloc(n ? n : 1, isize);
	if (!items)
		return -ENOMEM;
	*dst = items;
	*dst_n = n;
	for (size_t i = 0; i < n; i++) {
		memcpy(items + i * isize, (const char *)src + i * isize, isize);
		config_detach_fields(item_fields, items + i * isize);
	}
	for (size_t i = 0; i < n; i++) {
		int r = config_copy_fields(item_fields, items + i * isize,
					   (const char *)src + i * isize);

		if (r < 0)
			return r;
	}
	return 0;
}

static bool devices_equal(const struct config_devices *a, const struct config_devices *b)
{
	if (a->kind != b->kind || a->count != b->count || a->n_refs != b->n_refs)
		return false;
	for (size_t i = 0; i < a->n_refs; i++)
		if (!streq_ptr(a->refs[i].uuid, b->refs[i].uuid) ||
		    (!a->refs[i].uuid && a->refs[i].index != b->refs[i].index))
			return false;
	return true;
}

bool config_fields_equal(const struct field *fields, const void *a, const void *b)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		const struct config *ca = a, *cb = b;

		if (f->flags & F_NOCMP)
			continue;
		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			if (!config_fields_equal(f->arg, a, b))
				return false;
			break;
		case K_BOOL:
			if (*(const bool *)CAT(a, f->off) != *(const bool *)CAT(b, f->off))
				return false;
			break;
		case K_STR:
		case K_RESNAME:
			if (!streq_ptr(*(char *const *)CAT(a, f->off),
				       *(char *const *)CAT(b, f->off)))
				return false;
			break;
		case K_U32:
		case K_DLS:
			if (*(const unsigned *)CAT(a, f->off) != *(const unsigned *)CAT(b, f->off))
				return false;
			break;
		case K_ENUM:
			if (f->off != NOOFF &&
			    *(const int *)CAT(a, f->off) != *(const int *)CAT(b, f->off))
				return false;
			break;
		case K_U64:
		case K_DURATION:
			if (*(const uint64_t *)CAT(a, f->off) != *(const uint64_t *)CAT(b, f->off))
				return false;
			break;
		case K_XIDS:
			if (ca->health.n_ignored_xids != cb->health.n_ignored_xids ||
			    (ca->health.n_ignored_xids &&
			     memcmp(ca->health.ignored_xids, cb->health.ignored_xids,
				    ca->health.n_ignored_xids * sizeof(uint64_t)) != 0))
				return false;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			if (!devices_equal(CAT(a, f->off), CAT(b, f->off)))
				return false;
			break;
		case K_GPUS:
			if (ca->n_gpus != cb->n_gpus)
				return false;
			for (size_t i = 0; i < ca->n_gpus; i++)
				if (!config_fields_equal(config_gpu_item_fields, &ca->gpus[i],
							 &cb->gpus[i]))
					return false;
			break;
		case K_TS_RESOURCES:
			if (ca->time_slicing.n_resources != cb->time_slicing.n_resources)
				return false;
			for (size_t i = 0; i < ca->time_slicing.n_resources; i++)
				if (!config_fields_equal(config_ts_item_fields,
							 &ca->time_slicing.resources[i],
							 &cb->time_slicing.resources[i]))
					return false;
			break;
		default:
			break;
		}
	}
	return true;
}

int config_dump_str(struct buf *out, const char *s)
{
	int r = buf_append(out, "\"", 1);

	for (; r >= 0 && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			r = buf_printf(out, "\\%c", ch);
		} else if (ch < 0x20 || ch == 0x7f) {
			r = buf_printf(out, "\\x%02x", ch);
		} else if (ch == 0xc2 && ((unsigned char)s[1] & 0xe0) == 0x80) {
			/* U+0080..U+009F: YAML refuses these unescaped ("\x81" loads as one) */
			r = buf_printf(out, "\\x%02x", (unsigned char)s[1]);
			s++;
		} else if (ch == 0xef && (unsigned char)s[1] == 0xbf &&
			   ((unsigned char)s[2] == 0xbe || (unsigned char)s[2] == 0xbf)) {
			/* U+FFFE, U+FFFF: not printable either */
			r = buf_printf(out, "\\u%04x", 0xffc0 | ((unsigned char)s[2] & 0x3f));
			s += 2;
		} else {
			r = buf_append(out, s, 1);
		}
	}
	return r < 0 ? r : buf_append(out, "\"", 1);
}

static int dump_devices(const struct config_devices *d, unsigned indent, struct buf *out)
{
	int r = 0;

	if (d->kind == CONFIG_DEVICES_ALL)
		return buf_printf(out, " all\n");
	if (d->kind == CONFIG_DEVICES_COUNT)
		return buf_printf(out, " %u\n", d->count);
	if (!d->n_refs)
		return buf_printf(out, " []\n");
	r = buf_printf(out, "\n");
	for (size_t i = 0; i < d->n_refs && r >= 0; i++) {
		r = buf_printf(out, "%*s- ", (int)indent + 2, "");
		if (r >= 0 && d->refs[i].uuid)
			r = config_dump_str(out, d->refs[i].uuid);
		else if (r >= 0)
			r = buf_printf(out, "%u", d->refs[i].index);
		if (r >= 0)
			r = buf_printf(out, "\n");
	}
	return r;
}

static int dump_items(const struct field *item_fields, const void *items, size_t isize, size_t n,
		      unsigned indent, struct buf *out)
{
	struct buf tmp = { 0 };
	int r = 0;

	for (size_t i = 0; i < n && r >= 0; i++) {
		tmp.len = 0;
		r = config_dump_fields(item_fields, (const char *)items + i * isize, indent + 4,
				       &tmp);
		if (r < 0 || !tmp.data || tmp.len < indent + 4)
			continue;
		/* "    name: x" becomes "  - name: x": the first key goes on the dash line. */
		tmp.data[indent + 2] = '-';
		r = buf_append(out, tmp.data, tmp.len);
	}
	buf_release(&tmp);
	return r;
}

int config_dump_fields(const struct field *fields, const void *base, unsigned indent,
		       struct buf *out)
{
	int r = 0;

	for (const struct field *f = fields; f->kind != K_END && r >= 0; f++) {
		const struct config *c = base;
		char a[64];

		if (!f->key)
			continue;
		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING: {
			struct buf sub = { 0 };

			if (f->kind == K_TIME_SLICING && !c->time_slicing.n_resources)
				break;
			r = config_dump_fields(f->arg, base, indent + 2, &sub);
			if (r >= 0 && sub.len)
				r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0 && sub.len)
				r = buf_append(out, sub.data, sub.len);
			buf_release(&sub);
			break;
		}
		case K_VERSION:
			r = buf_printf(out, "%*sversion: v1\n", (int)indent, "");
			break;
		case K_BOOL:
			r = buf_printf(out, "%*s%s: %s\n", (int)indent, "", f->key,
				       *(const bool *)CAT(base, f->off) ? "true" : "false");
			break;
		case K_STR:
		case K_RESNAME: {
			const char *s = *(char *const *)CAT(base, f->off);

			if (!s)
				break;
			r = buf_printf(out, "%*s%s: ", (int)indent, "", f->key);
			if (r >= 0)
				r = config_dump_str(out, s);
			if (r >= 0)
				r = buf_printf(out, "\n");
			break;
		}
		case K_U32:
			r = buf_printf(out, "%*s%s: %u\n", (int)indent, "", f->key,
				       *(const unsigned *)CAT(base, f->off));
			break;
		case K_U64:
			r = buf_printf(out, "%*s%s: %" PRIu64 "\n", (int)indent, "", f->key,
				       *(const uint64_t *)CAT(base, f->off));
			break;
		case K_DURATION:
			r = buf_printf(out, "%*s%s: \"%s\"\n", (int)indent, "", f->key,
				       config_format_duration(a, sizeof(a),
							      *(const usec_t *)CAT(base, f->off)));
			break;
		case K_ENUM: {
			const struct enum_value *v = f->arg;

			if (f->off == NOOFF)
				break;
			for (; v->name && v->value != *(const int *)CAT(base, f->off); v++)
				;
			if (v->name)
				r = buf_printf(out, "%*s%s: %s\n", (int)indent, "", f->key,
					       v->name);
			break;
		}
		case K_DLS:
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			for (const struct enum_value *v = config_dls_values; v->name && r >= 0; v++)
				if (*(const unsigned *)CAT(base, f->off) & (unsigned)v->value)
					r = buf_printf(out, "%*s- %s\n", (int)indent + 2, "",
						       v->name);
			break;
		case K_XIDS:
			r = buf_printf(out, "%*s%s:%s\n", (int)indent, "", f->key,
				       c->health.n_ignored_xids ? "" : " []");
			for (size_t i = 0; i < c->health.n_ignored_xids && r >= 0; i++)
				r = buf_printf(out, "%*s- %" PRIu64 "\n", (int)indent + 2, "",
					       c->health.ignored_xids[i]);
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			r = buf_printf(out, "%*s%s:", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_devices(CAT(base, f->off), indent, out);
			break;
		case K_GPUS:
			if (!c->n_gpus)
				break;
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_items(config_gpu_item_fields, c->gpus, sizeof(*c->gpus),
					       c->n_gpus, indent, out);
			break;
		case K_TS_RESOURCES:
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_items(config_ts_item_fields, c->time_slicing.resources,
					       sizeof(*c->time_slicing.resources),
					       c->time_slicing.n_resources, indent, out);
			break;
		default:
			break;
		}
	}
	return r;
}

void config_release(struct config *c)
{
	if (!c)
		return;
	config_free_fields(config_root_fields, c);
	/* The analyser does not follow config_free_fields() through the field offsets. */
	*c = (struct config){ 0 };
} /* NOLINT(clang-analyzer-unix.Malloc) */

int config_copy(struct config *ret, const struct config *src)
{
	int r;

	*ret = *src;
	config_detach_fields(config_root_fields, ret);
	r = config_copy_fields(config_root_fields, ret, src);
	if (r < 0)
		config_release(ret);
	return r;
}

bool config_equal(const struct config *a, const struct config *b)
{
	return config_fields_equal(config_root_fields, a, b);
}

int config_commit(struct ctx *x, struct config *c, struct config *tmp, int r)
{
	if (r >= 0 && x->n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		config_release(tmp);
		return r;
	}
	config_release(c);
	*c = *tmp;
	return 0;
}
