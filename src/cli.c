#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "version.h"

static int verb_version(int argc, char **argv)
{
	printf("edgegpu %s\n", EDGEGPU_VERSION);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} verbs[] = {
	{ "version", verb_version },
};

int cli_main(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : "serve";

	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verb, verbs[i].name) == 0)
			return verbs[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "edgegpu: unknown command '%s'\n", verb);
	return 2;
}
