#pragma once

/*
 * cli-int.h: what cli-help.c lends cli.c: the verbs and their own options, one table each,
 * which cli.c's parser reads and the help prints, and the help itself. The config flags come
 * from the config module (config_flags_foreach()), the doctor's options from
 * doctor_options[]; neither is listed here.
 */

#include <stdbool.h>
#include <stdio.h>

enum cli_verb {
	CLI_SERVE,
	CLI_DISCOVER,
	CLI_CHECK_CONFIG,
	CLI_LABELS,
	CLI_DOCTOR,
	CLI_VERSION,
	CLI_HELP,
	CLI_VERB_COUNT,
};

#define CLI_VERB_BIT(v) (1u << (v))

struct cli_verb_info {
	const char *name;
	const char *operands; /* after the options in the synopsis: "FILE", or "" */
	const char *brief;    /* one line, for the list of commands */
	const char *about;    /* a paragraph, lines ending in '\n' */
	bool config_flags;    /* takes the config flags */
};

/* A verb's own option: for the verbs of the @verbs bits (CLI_VERB_BIT()). */
struct cli_option {
	unsigned verbs;
	const char *name;  /* without the dashes */
	const char *value; /* NULL: a switch */
	const char *help;
};

extern const struct cli_verb_info cli_verbs[CLI_VERB_COUNT];
/* Ends with a NULL name. */
extern const struct cli_option cli_options[];

/* The usage of @verb on @f, or of the whole program when @verb is CLI_VERB_COUNT. */
void cli_help(FILE *f, enum cli_verb verb);
/* The man page edgegpu(8), in roff, on @f. */
void cli_man(FILE *f);
