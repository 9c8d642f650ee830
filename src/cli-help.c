/*
 * cli-help.c: the verbs and their own options (the tables cli.c's parser reads), and
 * `edgegpu --help`, `edgegpu VERB --help` and the man page edgegpu(8), all printed from the
 * tables the parsers read: these two, the doctor's options (doctor_options[]) and the config
 * flags (config_flags_foreach()), so that nothing can be accepted without being listed, or
 * listed without being accepted. It calls nothing in cli.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli-int.h"
#include "config.h"
#include "doctor.h"
#include "version.h"

#define PRECEDENCE \
	"flag > environment > config file > default;\n  the keys are the config file's, docs/config.md"

const struct cli_verb_info cli_verbs[CLI_VERB_COUNT] = {
	[CLI_SERVE] = { "serve", "", "run the device plugin (the default command)",
			"Runs the device plugin: discovers the GPUs, registers their resources with "
			"the kubelet, serves Allocate, metrics, health and node labels, and applies "
			"a changed config on SIGHUP or when the config file changes.\n",
			true },
	[CLI_DISCOVER] = { "discover", "",
			   "print the driver, the GPUs and the resources the plugin would serve",
			   "Discovers the GPUs as the daemon would and prints the driver, each GPU "
			   "and the resources the config makes of them; --json prints one JSON "
			   "object instead.\n",
			   true },
	[CLI_CHECK_CONFIG] = { "check-config", "FILE",
			       "check a config file and print the effective config",
			       "Reads FILE as the config file, applies the environment and the "
			       "flags, checks the result and prints it as YAML; exit status 1 and "
			       "the errors (file, line, column, key) when it is invalid.\n",
			       true },
	[CLI_LABELS] = { "labels", "", "print the node labels for the GPUs found",
			 "Prints the node labels the daemon writes for Node Feature Discovery "
			 "(GPU Feature Discovery's names and values) for the GPUs found.\n",
			 true },
	[CLI_DOCTOR] = { "doctor", "",
			 "diagnose the node: driver, container runtime, device plugin",
			 "Checks the layers a GPU pod needs, in order: the driver, the container "
			 "runtime, the device plugin and the compatibility of a CUDA version or an "
			 "image with them; says for each check pass, warn, fail or skip, the "
			 "evidence and the fix (docs/doctor.md, docs/troubleshooting.md). Exit "
			 "status 0 when no check failed, 1 when one did, 2 for a usage error.\n",
			 true },
	[CLI_VERSION] = { "version", "", "print the version, revision and build date",
			  "Prints the version, the git revision and the build date, one per line, "
			  "or one JSON object with --json.\n",
			  false },
	[CLI_HELP] = { "help", "[COMMAND | --man]", "print a command's usage, or the man page",
		       "Prints the usage of COMMAND (as COMMAND --help does), of the whole program "
		       "without one, or the manual page edgegpu(8) in roff with --man.\n",
		       false },
};

/* The verbs' own options: cli.c's parse_args() reads this table, the help below prints it. */
const struct cli_option cli_options[] = {
	{ CLI_VERB_BIT(CLI_DISCOVER) | CLI_VERB_BIT(CLI_VERSION), "json", NULL,
	  "one JSON object on stdout instead of text" },
	{ CLI_VERB_BIT(CLI_HELP), "man", NULL, "the man page edgegpu(8), in roff" },
	{ 0, NULL },
};

/* --- text --- */

struct help {
	FILE *f;
	const char *skip; /* a config flag the verb takes as its own option (doctor --host-root) */
	bool env_only;	  /* the pass that lists the settings with no flag */
};

static void print_names(FILE *f, const char *const names[2], const char *sep, const char *pre)
{
	for (int i = 0; i < 2; i++)
		if (names[i])
			(void)fprintf(f, "%s%s%s", i && names[0] ? sep : "", pre, names[i]);
}

static int help_flag(const struct config_flag_info *fi, void *userdata)
{
	struct help *h = userdata;

	/* A flag the verb takes as its own option: the setting is listed as one without. */
	bool flagless = !fi->flag[0] || (h->skip && strcmp(fi->flag[0], h->skip) == 0);

	if (h->env_only != flagless)
		return 0;
	(void)fputs("  ", h->f);
	if (!flagless) {
		print_names(h->f, fi->flag, ", ", "--");
		(void)fprintf(h->f, fi->is_bool ? "[=%s]\n" : " %s\n", fi->value);
		(void)fputs("      ", h->f);
	}
	if (fi->env[0]) {
		(void)fputs("env ", h->f);
		print_names(h->f, fi->env, ", ", "");
	}
	if (fi->key)
		(void)fprintf(h->f, "%skey %s", fi->env[0] ? "; " : "", fi->key);
	if (flagless)
		(void)fprintf(h->f, " (%s)", fi->value);
	(void)fprintf(h->f, "\n      %s\n", fi->help);
	return 0;
}

static void help_option(FILE *f, const char *name, const char *value, const char *help)
{
	char left[64];

	(void)snprintf(left, sizeof(left), "--%s%s%s", name, value ? " " : "", value ? value : "");
	(void)fprintf(f, "  %-22s %s\n", left, help);
}

static void help_config_flags(FILE *f, const char *skip)
{
	struct help h = { .f = f, .skip = skip };

	(void)fprintf(f, "\nConfig flags (%s):\n", PRECEDENCE);
	(void)config_flags_foreach(help_flag, &h);
	(void)fputs("\nSettings with an environment variable and no flag:\n", f);
	h.env_only = true;
	(void)config_flags_foreach(help_flag, &h);
}

/* The verbs of the @verbs bits, ", " between them, into @buf. */
static void verb_names(unsigned verbs, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (int v = 0; v < CLI_VERB_COUNT && n < size; v++)
		if (verbs & CLI_VERB_BIT(v))
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "",
					      cli_verbs[v].name);
}

/* "[--NAME]" or "[--NAME VALUE]" after @buf's @n bytes, unless the operands already name it. */
static size_t synopsis_option(char *buf, size_t size, size_t n, enum cli_verb v, const char *name,
			      const char *value)
{
	char opt[64];

	(void)snprintf(opt, sizeof(opt), "--%s", name);
	if (n >= size || strstr(cli_verbs[v].operands, opt))
		return n;
	return n + (size_t)snprintf(buf + n, size - n, " [%s%s%s]", opt, value ? " " : "",
				    value ? value : "");
}

/*
 * @v's synopsis, from the tables the parser reads: the switches, the options with a value, the
 * operands, and [FLAGS] when it takes the config flags ("[serve]" for the default verb).
 */
static void synopsis(enum cli_verb v, char *buf, size_t size)
{
	size_t n =
		(size_t)snprintf(buf, size, "%s", v == CLI_SERVE ? "[serve]" : cli_verbs[v].name);

	for (int with_value = 0; with_value < 2; with_value++) {
		for (const struct cli_option *o = cli_options; o->name; o++)
			if ((o->verbs & CLI_VERB_BIT(v)) && !o->value == !with_value)
				n = synopsis_option(buf, size, n, v, o->name, o->value);
		for (const struct doctor_option *o = doctor_options; v == CLI_DOCTOR && o->name;
		     o++)
			if (!o->value == !with_value)
				n = synopsis_option(buf, size, n, v, o->name, o->value);
	}
	if (n < size && cli_verbs[v].operands[0])
		n += (size_t)snprintf(buf + n, size - n, " %s", cli_verbs[v].operands);
	if (n < size && cli_verbs[v].config_flags)
		(void)snprintf(buf + n, size - n, " [FLAGS]");
}

static void help_synopsis(FILE *f, const char *lead, enum cli_verb v)
{
	char s[256];

	synopsis(v, s, sizeof(s));
	(void)fprintf(f, "%sedgegpu %s\n", lead, s);
}

/* @s folded into lines of at most 90 columns (a longer word stands alone). */
static void print_wrapped(FILE *f, const char *s)
{
	size_t col = 0;

	while (*s) {
		size_t w = strcspn(s, " \n");

		if (col && col + 1 + w > 90) {
			(void)fputc('\n', f);
			col = 0;
		} else if (col) {
			(void)fputc(' ', f);
			col++;
		}
		(void)fwrite(s, 1, w, f);
		col += w;
		s += w;
		if (*s == '\n')
			col = 0, (void)fputc('\n', f);
		if (*s)
			s++;
	}
}

static void help_verb(FILE *f, enum cli_verb v)
{
	help_synopsis(f, "usage: ", v);
	(void)fputc('\n', f);
	print_wrapped(f, cli_verbs[v].about);
	(void)fputs("\nOptions:\n", f);
	if (v == CLI_DOCTOR)
		for (const struct doctor_option *o = doctor_options; o->name; o++)
			help_option(f, o->name, o->value, o->help);
	for (const struct cli_option *o = cli_options; o->name; o++)
		if (o->verbs & CLI_VERB_BIT(v))
			help_option(f, o->name, o->value, o->help);
	(void)fputs("  -h, --help             this help\n", f);
	if (!cli_verbs[v].config_flags)
		return;
	if (v == CLI_DOCTOR)
		(void)fputs(
			"\nThe doctor takes the config flags and sees the config the daemon would;\n"
			"its own --host-root (above) comes first, so the config's edgegpu.hostRoot\n"
			"comes from EDGEGPU_HOST_ROOT or the file only (listed below without its\n"
			"flag).\n",
			f);
	help_config_flags(f, v == CLI_DOCTOR ? "host-root" : NULL);
}

void cli_help(FILE *f, enum cli_verb verb)
{
	if (verb < CLI_VERB_COUNT) {
		help_verb(f, verb);
		return;
	}
	for (int v = 0; v < CLI_VERB_COUNT; v++)
		help_synopsis(f, v ? "       " : "usage: ", (enum cli_verb)v);
	(void)fputs(
		"\nKubernetes device plugin for edge GPUs: nvidia.com/gpu (whole or time-sliced) "
		"and\nnvidia.com/gpumem (memory slices) over the kubelet device-plugin API "
		"v1beta1.\n\nCommands:\n",
		f);
	for (int v = 0; v < CLI_VERB_COUNT; v++)
		(void)fprintf(f, "  %-14s %s\n", cli_verbs[v].name, cli_verbs[v].brief);
	(void)fputs("\nCommand options ('edgegpu COMMAND --help' says more):\n", f);
	for (const struct cli_option *o = cli_options; o->name; o++) {
		char verbs[128], help[256];

		verb_names(o->verbs, verbs, sizeof(verbs));
		(void)snprintf(help, sizeof(help), "%s: %s", verbs, o->help);
		help_option(f, o->name, o->value, help);
	}
	for (const struct doctor_option *o = doctor_options; o->name; o++) {
		char help[256];

		(void)snprintf(help, sizeof(help), "doctor: %s", o->help);
		help_option(f, o->name, o->value, help);
	}
	help_config_flags(f, NULL);
	(void)fputs(
		"\nExit status: 0 success, 1 failure, 2 usage error. The manual: man 8 edgegpu.\n",
		f);
}

/* --- roff --- */

/* @s for roff: '-' and '\' escaped, a line never starting with '.' or '\''. */
static void man_text(FILE *f, const char *s)
{
	bool bol = true;

	for (; *s; s++) {
		if (bol && (*s == '.' || *s == '\''))
			(void)fputs("\\&", f);
		if (*s == '-')
			(void)fputs("\\-", f);
		else if (*s == '\\')
			(void)fputs("\\e", f);
		else
			(void)fputc(*s, f);
		bol = *s == '\n';
	}
}

static void man_names(FILE *f, const char *const names[2], const char *pre)
{
	for (int i = 0; i < 2; i++) {
		if (!names[i])
			continue;
		if (i && names[0])
			(void)fputs(", ", f);
		(void)fputs("\\fB", f);
		man_text(f, pre);
		man_text(f, names[i]);
		(void)fputs("\\fR", f);
	}
}

static int man_flag(const struct config_flag_info *fi, void *userdata)
{
	FILE *f = userdata;

	if (!fi->flag[0])
		return 0;
	(void)fputs(".TP\n", f);
	man_names(f, fi->flag, "--");
	(void)fputs(fi->is_bool ? "[=\\fI" : " \\fI", f);
	man_text(f, fi->value);
	(void)fputs(fi->is_bool ? "\\fR]\n" : "\\fR\n", f);
	man_text(f, fi->help);
	(void)fputs("\n.br\n", f);
	if (fi->env[0]) {
		(void)fputs("Environment: ", f);
		man_names(f, fi->env, "");
		(void)fputs(".\n", f);
	}
	if (fi->key) {
		(void)fputs("Config key: \\fB", f);
		man_text(f, fi->key);
		(void)fputs("\\fR.\n", f);
	}
	return 0;
}

static int man_env(const struct config_flag_info *fi, void *userdata)
{
	FILE *f = userdata;

	for (int i = 0; i < 2; i++) {
		if (!fi->env[i])
			continue;
		(void)fputs(".TP\n.B ", f);
		man_text(f, fi->env[i]);
		(void)fputs("\n", f);
		man_text(f, fi->help);
		(void)fputs(" (", f);
		if (fi->flag[0]) {
			man_names(f, fi->flag, "--");
			(void)fputs("; ", f);
		}
		if (fi->key) {
			(void)fputs("key \\fB", f);
			man_text(f, fi->key);
			(void)fputs("\\fR", f);
		} else {
			(void)fputs("no key", f);
		}
		(void)fputs(").\n", f);
	}
	return 0;
}

static void man_option(FILE *f, const char *name, const char *value, const char *help,
		       const char *verbs)
{
	(void)fputs(".TP\n\\fB\\-\\-", f);
	man_text(f, name);
	(void)fputs("\\fR", f);
	if (value) {
		(void)fputs(" \\fI", f);
		man_text(f, value);
		(void)fputs("\\fR", f);
	}
	(void)fputs("\n(", f);
	man_text(f, verbs);
	(void)fputs(") ", f);
	man_text(f, help);
	(void)fputs("\n", f);
}

void cli_man(FILE *f)
{
	(void)fprintf(f, ".TH EDGEGPU 8 \"\" \"edgegpu %s\" \"System Administration\"\n",
		      EDGEGPU_VERSION);
	(void)fputs(".SH NAME\nedgegpu \\- Kubernetes device plugin for edge GPUs\n.SH SYNOPSIS\n",
		    f);
	for (int v = 0; v < CLI_VERB_COUNT; v++) {
		char syn[256];
		size_t w;

		synopsis((enum cli_verb)v, syn, sizeof(syn));
		w = strcspn(syn, " ");
		(void)fputs(v ? ".br\n" : "", f);
		(void)fputs(".B edgegpu\n", f);
		if (v == CLI_SERVE) {
			(void)fputs("[\\fBserve\\fR]", f);
		} else {
			(void)fputs("\\fB", f);
			man_text(f, cli_verbs[v].name);
			(void)fputs("\\fR", f);
		}
		man_text(f, syn + w);
		(void)fputs("\n", f);
	}
	(void)fputs(".SH DESCRIPTION\n", f);
	man_text(f,
		 "edgegpu serves NVIDIA GPUs to Kubernetes pods over the kubelet's device-plugin "
		 "API v1beta1: nvidia.com/gpu (whole GPUs, or time-sliced replicas) and "
		 "nvidia.com/gpumem (slices of a GPU's memory, with limits that hold). It reads "
		 "the config file schema of NVIDIA's k8s-device-plugin plus an edgegpu: section, "
		 "serves GPU metrics and health on HTTP, writes node labels for Node Feature "
		 "Discovery, and diagnoses a node with the doctor command.\n");
	(void)fputs(".PP\n", f);
	man_text(f, "Every setting can come from a command-line flag, an environment variable or "
		    "the config file; the first of these that is given wins, else the default "
		    "applies.\n");
	(void)fputs(".SH COMMANDS\n", f);
	for (int v = 0; v < CLI_VERB_COUNT; v++) {
		(void)fputs(".TP\n.B ", f);
		man_text(f, cli_verbs[v].name);
		(void)fputs("\n", f);
		man_text(f, cli_verbs[v].about);
	}
	(void)fputs(".SH OPTIONS\n.SS Command options\n", f);
	for (const struct cli_option *o = cli_options; o->name; o++) {
		char verbs[128];

		verb_names(o->verbs, verbs, sizeof(verbs));
		man_option(f, o->name, o->value, o->help, verbs);
	}
	for (const struct doctor_option *o = doctor_options; o->name; o++)
		man_option(f, o->name, o->value, o->help, "doctor");
	(void)fputs(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\n(every command) the command's usage\n",
		    f);
	(void)fputs(
		".SS Config flags\nserve, discover, check\\-config, labels and doctor take them "
		"all, except that the doctor's own \\fB\\-\\-host\\-root\\fR comes "
		"first (edgegpu.hostRoot then comes from the environment or the file). A flag that names a boolean may stand "
		"alone (true) or take =\\fIBOOL\\fR.\n",
		f);
	(void)config_flags_foreach(man_flag, f);
	(void)fputs(".SH ENVIRONMENT\n", f);
	(void)config_flags_foreach(man_env, f);
	(void)fputs(".SH FILES\n"
		    ".TP\n.I /var/lib/kubelet/device\\-plugins/kubelet.sock\n"
		    "The kubelet's registration socket; the plugin sockets go beside it.\n"
		    ".TP\n.I /var/lib/kubelet/pod\\-resources/kubelet.sock\n"
		    "The kubelet's pod-resources API.\n"
		    ".TP\n.I /var/run/cdi\n"
		    "Where the CDI spec of the GPUs is written.\n"
		    ".TP\n.I /etc/kubernetes/node\\-feature\\-discovery/features.d/edgegpu\n"
		    "The node labels for Node Feature Discovery.\n"
		    ".TP\n.I /var/lib/edgegpu\n"
		    "The gpumem enforcement state: the interposer library and one directory per "
		    "container.\n",
		    f);
	(void)fputs(
		".SH EXIT STATUS\n"
		".TP\n.B 0\nSuccess; for the doctor, no check failed.\n"
		".TP\n.B 1\nA failure: an invalid config, no GPU could be discovered, the daemon "
		"could not start or run; for the doctor, a check failed.\n"
		".TP\n.B 2\nA usage error: an unknown command or flag, a missing value.\n",
		f);
	(void)fputs(".SH SEE ALSO\n.BR kubelet (8),\n.BR nvidia\\-smi (1),\n"
		    ".BR containerd (8);\n"
		    "docs/config.md, docs/doctor.md and docs/metrics.md in the source tree.\n",
		    f);
}
