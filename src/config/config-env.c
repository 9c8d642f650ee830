/*
 * config-env.c: the settings from the environment (NVIDIA's variable names and ours) and from
 * command-line flags, found through the flag and env names of the schema tables.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config-int.h"

extern char **environ;

const char *config_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static int apply_env_fields(struct ctx *x, const struct field *fields, struct config *c,
			    char *const *envp)
{
	int r;

	for (const struct field *f = fields; f->kind != K_END && !x->stop; f++) {
		if (is_section(f)) {
			r = apply_env_fields(x, f->arg, c, envp);
			if (r < 0)
				return r;
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(f->env) && f->env[i]; i++) {
			const char *v = config_env_get(envp, f->env[i]);
			struct src s = { ORIGIN_ENV, f->env[i], NULL, v };

			if (!v)
				continue;
			r = config_set_field(x, f, c, &s);
			if (r < 0)
				return r;
			break;
		}
	}
	return 0;
}

int config_apply_env(struct config *c, char *const *envp, struct config_diag *d)
{
	struct ctx x = { .d = d };
	struct config tmp;
	int r;

	r = config_copy(&tmp, c);
	if (r < 0)
		return r;
	r = apply_env_fields(&x, config_root_fields, &tmp, envp ? envp : environ);
	return config_commit(&x, c, &tmp, r);
}

static const struct field *flag_find(const struct field *fields, const char *name)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		if (is_section(f)) {
			const struct field *g = flag_find(f->arg, name);

			if (g)
				return g;
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(f->flag); i++)
			if (f->flag[i] && streq(f->flag[i], name))
				return f;
	}
	return NULL;
}

const char *config_flag_name(const char *name)
{
	if (name[0] == '-')
		name++;
	if (name[0] == '-')
		name++;
	return name;
}

bool config_flag_lookup(const char *name, bool *ret_is_bool)
{
	const struct field *f = flag_find(config_root_fields, config_flag_name(name));

	if (f && ret_is_bool)
		*ret_is_bool = f->kind == K_BOOL || f->kind == K_UNSUP_BOOL;
	return f;
}

int config_set_flag(struct config *c, const char *name, const char *value, struct config_diag *d)
{
	struct ctx x = { .d = d };
	const char *n = config_flag_name(name);
	const struct field *f = flag_find(config_root_fields, n);
	char key[KEY_MAX];
	struct src s = { ORIGIN_FLAG, key, NULL, value };
	struct config tmp;
	int r;

	(void)snprintf(key, sizeof(key), "--%s", n);
	if (!f) {
		r = config_diag_add(&x, false, NULL, (struct config_pos){ 0 }, key, "unknown flag");
		return r < 0 ? r : -ENOENT;
	}
	r = config_copy(&tmp, c);
	if (r < 0)
		return r;
	r = config_set_field(&x, f, &tmp, &s);
	return config_commit(&x, c, &tmp, r);
}

/* The value's form for --help: the field's own word, or one from its kind and values. */
static const char *value_form(const struct field *f, char *buf, size_t size)
{
	const struct enum_value *v;
	size_t n = 0;

	if (f->value)
		return f->value;
	switch (f->kind) {
	case K_BOOL:
	case K_UNSUP_BOOL:
		return "BOOL";
	case K_DURATION:
	case K_UNSUP_DURATION:
		return "DURATION";
	case K_U32:
	case K_U64:
		return "N";
	case K_UNSUP_EMPTY_LIST:
		return "LIST";
	case K_ENUM:
	case K_DLS:
		buf[0] = 0;
		for (v = f->arg; v->name && n < size; v++)
			if (!v->refuse)
				n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? "|" : "",
						      v->name);
		if (f->kind == K_DLS && n < size)
			(void)snprintf(buf + n, size - n, "[,...]");
		return buf;
	default:
		return "STRING";
	}
}

static int flags_foreach(const struct field *fields, char *path, size_t plen, config_flag_fn *fn,
			 void *userdata)
{
	char vbuf[256];
	int r;

	for (const struct field *f = fields; f->kind != K_END; f++) {
		size_t n = plen;

		if (f->key)
			n += (size_t)snprintf(path + plen, KEY_MAX - plen, "%s%s", plen ? "." : "",
					      f->key);
		if (n >= KEY_MAX)
			return -ENAMETOOLONG;
		if (is_section(f)) {
			r = flags_foreach(f->arg, path, n, fn, userdata);
			if (r < 0)
				return r;
			continue;
		}
		if (!f->flag[0] && !f->env[0])
			continue;
		r = fn(
			&(struct config_flag_info){
				.flag = { f->flag[0], f->flag[1] },
				.env = { f->env[0], f->env[1] },
				.key = f->key ? path : NULL,
				.value = value_form(f, vbuf, sizeof(vbuf)),
				.help = f->help ? f->help : "",
				.is_bool = f->kind == K_BOOL || f->kind == K_UNSUP_BOOL,
			},
			userdata);
		if (r < 0)
			return r;
		path[plen] = 0;
	}
	return 0;
}

int config_flags_foreach(config_flag_fn *fn, void *userdata)
{
	char path[KEY_MAX] = "";

	return flags_foreach(config_root_fields, path, 0, fn, userdata);
}
