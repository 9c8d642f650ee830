/*
 * The command line's config flags (config.h, struct config_args): what every verb that reads
 * the config (the daemon, check-config, discover, labels, the doctor) splits its argv with, so
 * that a flag means the same, and is refused with the same words, whichever verb is given it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* *@reterr = the message (NULL when out of memory); returns @r. */
static int fail(char **reterr, int r, char *msg)
{
	*reterr = msg;
	return r;
}

int config_args_take(struct config_args *a, int argc, char **argv, int *i, char **reterr)
{
	const char *arg = argv[*i], *name, *eq, *value = NULL;
	bool is_bool = false;
	char nbuf[128];

	*reterr = NULL;
	if (strncmp(arg, "--", 2) != 0) {
		if (a->n_positional == ELEMENTSOF(a->positional))
			return fail(reterr, -EINVAL,
				    strdup_printf("unexpected argument '%s'", arg));
		a->positional[a->n_positional++] = arg;
		return 0;
	}
	name = arg + 2;
	eq = strchr(name, '=');
	if (eq) {
		if ((size_t)(eq - name) >= sizeof(nbuf))
			return fail(reterr, -EINVAL, strdup_printf("unknown flag '%s'", arg));
		memcpy(nbuf, name, (size_t)(eq - name));
		nbuf[eq - name] = 0;
		name = nbuf;
		value = eq + 1;
	}
	if (!config_flag_lookup(name, &is_bool))
		return fail(reterr, -EINVAL,
			    strdup_printf("unknown flag '--%s' (see 'edgegpu %s%s--help')", name,
					  a->verb ? a->verb : "", a->verb ? " " : ""));
	if (!value && !is_bool) {
		if (*i + 1 >= argc)
			return fail(reterr, -EINVAL,
				    strdup_printf(
					    "flag '--%s' needs a value (see 'edgegpu %s%s--help')",
					    name, a->verb ? a->verb : "", a->verb ? " " : ""));
		value = argv[++*i];
	}
	if (a->n_flags == ELEMENTSOF(a->flags))
		return fail(reterr, -EINVAL, strdup("too many flags"));
	a->flags[a->n_flags].name = strdup(name); /* name may point into nbuf */
	a->flags[a->n_flags].value = value;
	if (!a->flags[a->n_flags].name)
		return fail(reterr, -ENOMEM, strdup("out of memory"));
	a->n_flags++;
	return 0;
}

void config_args_release(struct config_args *a)
{
	for (size_t i = 0; i < a->n_flags; i++)
		free((char *)a->flags[i].name);
	*a = (struct config_args){ 0 };
}

int config_args_build(const struct config_args *a, char *const *envp, struct config *c, FILE *diag)
{
	struct config_diag d = { 0 };
	int r;

	r = config_init(c);
	if (r >= 0)
		r = config_build(c, envp, a->flags, a->n_flags, &d);
	for (size_t i = 0; i < d.n_warnings; i++) {
		char *s = config_error_to_string(&d.warnings[i]);

		(void)fprintf(diag, "warning: %s\n", s ? s : "?");
		free(s);
	}
	for (size_t i = 0; i < d.n_errors; i++) {
		char *s = config_error_to_string(&d.errors[i]);

		(void)fprintf(diag, "error: %s\n", s ? s : "?");
		free(s);
	}
	config_diag_release(&d);
	return r;
}
