#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assign.h"
#include "cli-int.h"
#include "config.h"
#include "daemon.h"
#include "doctor.h"
#include "gpu-open.h"
#include "labels.h"
#include "resource.h"
#include "version.h"

#define LOG_MODULE "cli"
#include "log.h"

extern char **environ;

/* A verb's command line: its config flags and positional arguments, and --json. */
struct cli_args {
	struct config_args c;
	bool json;
};

static bool is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* The option of @verb named by @arg ("--name"), or NULL. */
static const struct cli_option *option_find(enum cli_verb verb, const char *arg)
{
	if (strncmp(arg, "--", 2) != 0)
		return NULL;
	for (const struct cli_option *o = cli_options; o->name; o++)
		if ((o->verbs & CLI_VERB_BIT(verb)) && strcmp(arg + 2, o->name) == 0)
			return o;
	return NULL;
}

static int usage_error(enum cli_verb verb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "edgegpu: <what>" and where to read the verb's usage, on stderr. Returns 2. */
static int usage_error(enum cli_verb verb, const char *fmt, ...)
{
	va_list ap;

	(void)fputs("edgegpu: ", stderr);
	va_start(ap, fmt);
	(void)vfprintf(stderr, fmt, ap);
	va_end(ap);
	(void)fprintf(stderr, " (see 'edgegpu %s --help')\n", cli_verbs[verb].name);
	return 2;
}

/*
 * Splits argv into the verb's options, config flags (when the verb takes them) and positional
 * arguments (-h and --help are cli_main()'s). Returns 0, or 2 (usage error, already reported
 * on stderr).
 */
static int parse_args(enum cli_verb verb, int argc, char **argv, struct cli_args *a)
{
	a->c.verb = cli_verbs[verb].name;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const struct cli_option *o;
		char *err = NULL;

		o = option_find(verb, arg);
		if (o && strcmp(o->name, "json") == 0) {
			a->json = true;
			continue;
		}
		if (o) /* the verb reads it from argv itself */
			continue;
		if (!cli_verbs[verb].config_flags) {
			if (strncmp(arg, "--", 2) == 0)
				return usage_error(verb, "unknown flag '%s'", arg);
			if (a->c.n_positional == ELEMENTSOF(a->c.positional))
				return usage_error(verb, "unexpected argument '%s'", arg);
			a->c.positional[a->c.n_positional++] = arg;
			continue;
		}
		if (config_args_take(&a->c, argc, argv, &i, &err) < 0) {
			(void)fprintf(stderr, "edgegpu: %s\n", err ? err : "out of memory");
			free(err);
			return 2;
		}
	}
	return 0;
}

static void free_args(struct cli_args *a)
{
	config_args_release(&a->c);
}

/* The config, and its log format for what the verb logs from then on. */
static int build_config(const struct cli_args *a, struct config *c)
{
	int r = config_args_build(&a->c, environ, c, stderr);

	if (r >= 0)
		log_line_format = c->log_format;
	return r;
}

/* @j's document and a newline on stdout; its error, or -EIO when stdout refuses it. */
static int write_json(const struct json_writer *j)
{
	int r = j->r;

	if (r == 0)
		r = buf_append(j->b, "\n", 1);
	if (r == 0 && fwrite(j->b->data, 1, j->b->len, stdout) != j->b->len)
		r = -EIO;
	return r;
}

static int verb_version(int argc, char **argv)
{
	struct cli_args a = { 0 };
	struct buf out = { 0 };
	struct json_writer j = { .b = &out };
	int r;

	r = parse_args(CLI_VERSION, argc, argv, &a);
	if (r == 0 && a.c.n_positional)
		r = usage_error(CLI_VERSION, "unexpected argument '%s'", a.c.positional[0]);
	if (r != 0)
		goto out;
	if (!a.json) {
		printf("edgegpu %s\nrevision: %s\nbuild date: %s\n", EDGEGPU_VERSION,
		       EDGEGPU_REVISION, EDGEGPU_BUILD_DATE);
		goto out;
	}
	json_object_open(&j);
	json_key(&j, "version");
	json_string(&j, EDGEGPU_VERSION);
	json_key(&j, "revision");
	json_string(&j, EDGEGPU_REVISION);
	json_key(&j, "buildDate");
	json_string(&j, EDGEGPU_BUILD_DATE);
	json_object_close(&j);
	r = write_json(&j);
	if (r < 0) {
		(void)fprintf(stderr, "edgegpu: %s\n", strerror(-r));
		r = 1;
	}
out:
	buf_release(&out);
	free_args(&a);
	return r;
}

/* `help [COMMAND | --man]`. */
static int verb_help(int argc, char **argv)
{
	struct cli_args a = { 0 };
	int r;

	r = parse_args(CLI_HELP, argc, argv, &a);
	if (r != 0)
		return r;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--man") == 0) {
			cli_man(stdout);
			return 0;
		}
	if (a.c.n_positional > 1)
		return usage_error(CLI_HELP, "unexpected argument '%s'", a.c.positional[1]);
	for (int v = 0; v < CLI_VERB_COUNT && a.c.n_positional; v++)
		if (strcmp(a.c.positional[0], cli_verbs[v].name) == 0) {
			cli_help(stdout, (enum cli_verb)v);
			return 0;
		}
	if (a.c.n_positional)
		return usage_error(CLI_HELP, "unknown command '%s'", a.c.positional[0]);
	cli_help(stdout, CLI_VERB_COUNT);
	return 0;
}

static int verb_serve(int argc, char **argv)
{
	struct cli_args a = { 0 };
	int r;

	r = parse_args(CLI_SERVE, argc, argv, &a);
	if (r == 0 && a.c.n_positional) {
		(void)fprintf(stderr, "edgegpu: unexpected argument '%s'\n", a.c.positional[0]);
		r = 2;
	}
	if (r == 0)
		r = daemon_run(environ, a.c.flags, a.c.n_flags);
	free_args(&a);
	return r;
}

static int verb_check_config(int argc, char **argv)
{
	struct cli_args a = { 0 };
	struct config c = { 0 };
	struct buf out = { 0 };
	int r;

	r = parse_args(CLI_CHECK_CONFIG, argc, argv, &a);
	if (r != 0)
		goto out;
	if (a.c.n_positional != 1) {
		r = usage_error(CLI_CHECK_CONFIG, "%s", "check-config takes one FILE");
		goto out;
	}
	if (a.c.n_flags == ELEMENTSOF(a.c.flags)) {
		r = 2;
		goto out;
	}
	a.c.flags[a.c.n_flags].name = strdup("config-file");
	a.c.flags[a.c.n_flags].value = a.c.positional[0];
	if (!a.c.flags[a.c.n_flags].name) {
		r = 1;
		goto out;
	}
	a.c.n_flags++;
	if (build_config(&a, &c) < 0) {
		(void)fprintf(stderr, "%s: invalid config\n", a.c.positional[0]);
		r = 1;
		goto out;
	}
	if (config_dump(&c, &out) < 0) {
		r = 1;
		goto out;
	}
	(void)fwrite(out.data, 1, out.len, stdout);
	r = 0;
out:
	buf_release(&out);
	config_release(&c);
	free_args(&a);
	return r;
}

static const char *kind_name(enum resource_kind k)
{
	return k == RESOURCE_GPU ? "gpu" : k == RESOURCE_REPLICA ? "time-sliced" : "gpumem";
}

/* `discover --json`: the driver, the GPUs and the resources, on one line of stdout. */
static int discover_json(const struct gpu_info *info, struct resource *const *res, int n)
{
	struct buf out = { 0 };
	struct json_writer j = { .b = &out };
	char cc[32], warning[256];
	int r;

	json_object_open(&j);
	json_key(&j, "driver_version");
	json_string(&j, info->driver_version);
	json_key(&j, "cuda_driver_version");
	json_int(&j, info->cuda_driver_version);
	json_key(&j, "nvml_version");
	json_string(&j, info->lib_version);
	json_key(&j, "skipped");
	json_uint(&j, info->n_skipped);
	if (info->board.tegra) {
		const struct gpu_board *b = &info->board;

		json_key(&j, "board");
		json_object_open(&j);
		json_key(&j, "model");
		json_string(&j, b->model);
		json_key(&j, "soc");
		json_string(&j, b->soc);
		json_key(&j, "chip_id");
		json_uint(&j, b->chip_id);
		json_key(&j, "l4t");
		json_string(&j, b->l4t);
		json_key(&j, "jetpack");
		json_string(&j, b->jetpack);
		json_key(&j, "power_mode");
		json_string(&j, b->power_mode);
		json_object_close(&j);
	}
	json_key(&j, "gpus");
	json_array_open(&j);
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];

		json_object_open(&j);
		json_key(&j, "index");
		json_uint(&j, g->index);
		json_key(&j, "uuid");
		json_string(&j, g->uuid);
		json_key(&j, "name");
		json_string(&j, g->name);
		json_key(&j, "minor");
		json_uint(&j, g->minor);
		json_key(&j, "memory_mib");
		json_uint(&j, g->mem_total >> 20);
		json_key(&j, "pci_bus_id");
		json_string(&j, g->pci_bus_id);
		json_key(&j, "numa_node");
		json_int(&j, g->numa_node);
		(void)snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
		json_key(&j, "compute_capability");
		json_string(&j, cc);
		json_key(&j, "architecture");
		json_string(&j, g->arch);
		json_key(&j, "events_supported");
		json_bool(&j, g->events_supported);
		json_object_close(&j);
	}
	json_array_close(&j);
	json_key(&j, "resources");
	json_array_open(&j);
	for (int i = 0; i < n; i++) {
		const struct resource *rs = res[i];

		json_object_open(&j);
		json_key(&j, "name");
		json_string(&j, rs->name);
		json_key(&j, "kind");
		json_string(&j, kind_name(rs->kind));
		json_key(&j, "socket");
		json_string(&j, rs->socket);
		json_key(&j, "devices");
		json_uint(&j, rs->n_devices);
		json_key(&j, "list_bytes");
		json_uint(&j, resource_list_size(rs, NULL));
		if (rs->kind == RESOURCE_GPUMEM) {
			json_key(&j, "unit_mib");
			json_uint(&j, rs->unit_mib);
			json_key(&j, "unit_mib_configured");
			json_uint(&j, rs->unit_mib_asked);
		}
		if (rs->kind == RESOURCE_GPUMEM && rs->unit_mib != rs->unit_mib_asked) {
			(void)snprintf(
				warning, sizeof(warning),
				"unit doubled from %llu to %llu MiB to keep the ListAndWatch message under 3 MiB: a request counts units, the limit is units x %llu MiB",
				(unsigned long long)rs->unit_mib_asked,
				(unsigned long long)rs->unit_mib, (unsigned long long)rs->unit_mib);
			json_key(&j, "warning");
			json_string(&j, warning);
		}
		json_object_close(&j);
	}
	json_array_close(&j);
	json_object_close(&j);
	r = write_json(&j);
	buf_release(&out);
	return r;
}

/*
 * Builds the config from @a and discovers the GPUs, as the daemon does. Returns 0, or 1 with the
 * reason on stderr; *@b and *@info are the caller's to release either way.
 */
static int discover_gpus(const struct cli_args *a, struct config *c, struct gpu_backend **b,
			 struct gpu_info *info)
{
	struct gpu_backend_opts o = { 0 };
	char *err = NULL;
	int r;

	if (build_config(a, c) < 0)
		return 1;
	config_backend_opts(c, &o);
	o.sysfs_root = getenv("EDGEGPU_SYSFS_ROOT"); /* tests: a fake /sys */
	r = gpu_backend_open(&o, b, &err);
	if (r < 0) {
		(void)fprintf(stderr, "edgegpu: %s\n", err ? err : strerror(-r));
		goto out;
	}
	r = (*b)->ops->discover(*b, info, &err);
	if (r < 0)
		(void)fprintf(stderr, "edgegpu: discovery failed: %s\n", err ? err : strerror(-r));
out:
	free(err);
	return r < 0 ? 1 : 0;
}

static int verb_discover(int argc, char **argv)
{
	struct cli_args a = { 0 };
	struct config c = { 0 };
	struct gpu_backend *b = NULL;
	struct gpu_info info = { 0 };
	struct resource *res[RESOURCE_NODE_MAX];
	int r, n = 0, rc = 1;

	log_max_level = LOG_LEVEL_WARN;
	r = parse_args(CLI_DISCOVER, argc, argv, &a);
	if (r != 0) {
		rc = r;
		goto out;
	}
	if (discover_gpus(&a, &c, &b, &info) != 0)
		goto out;
	n = assign_build_resources(&c, &info, res, ELEMENTSOF(res));
	if (a.json) {
		r = discover_json(&info, res, n);
		if (r < 0)
			(void)fprintf(stderr, "edgegpu: %s\n", strerror(-r));
	} else {
		if (info.driver_version[0])
			printf("driver %s, CUDA driver %d.%d, %u GPU(s)%s\n", info.driver_version,
			       info.cuda_driver_version / 1000,
			       info.cuda_driver_version % 1000 / 10, info.n_devices,
			       info.n_skipped ? " (some MIG-enabled GPUs skipped)" : "");
		else /* a Jetson without NVML: the L4T release on the board line says it */
			printf("no NVML driver, %u GPU(s)\n", info.n_devices);
		if (info.board.tegra)
			printf("board %s, SoC %s, L4T %s, JetPack %s, power mode %s\n",
			       info.board.model[0] ? info.board.model : "unknown",
			       info.board.soc[0] ? info.board.soc : "unknown",
			       info.board.l4t[0] ? info.board.l4t : "unknown",
			       info.board.jetpack[0] ? info.board.jetpack : "unknown",
			       info.board.power_mode[0] ? info.board.power_mode : "unknown");
		for (unsigned i = 0; i < info.n_devices; i++) {
			const struct gpu_device *g = &info.devices[i];

			printf("  %u  %s  %-24s %6llu MiB  %s  pci %s  numa %d  cc %d.%d%s\n",
			       g->index, g->uuid, g->name, (unsigned long long)(g->mem_total >> 20),
			       g->n_nodes ? g->nodes[0] : "-",
			       g->pci_bus_id[0] ? g->pci_bus_id : "-", g->numa_node, g->cc_major,
			       g->cc_minor, g->events_supported ? "" : "  (no events: polled)");
		}
		for (int i = 0; i < n; i++) {
			printf("resource %s (%s): %u devices", res[i]->name,
			       kind_name(res[i]->kind), res[i]->n_devices);
			if (res[i]->kind == RESOURCE_GPUMEM)
				printf(", unit %llu MiB%s", (unsigned long long)res[i]->unit_mib,
				       res[i]->unit_mib != res[i]->unit_mib_asked ?
					       " (doubled to fit the kubelet's limit)" :
					       "");
			printf("\n");
		}
	}
	for (int i = 0; i < n; i++)
		resource_free(res[i]);
	rc = n < 0 || r < 0 ? 1 : 0;
out:
	gpu_info_release(&info);
	gpu_backend_close(b);
	config_release(&c);
	free_args(&a);
	return rc;
}

/* `labels`: the node labels the daemon writes for NFD, GFD's names and values, on stdout. */
static int verb_labels(int argc, char **argv)
{
	struct cli_args a = { 0 };
	struct config c = { 0 };
	struct gpu_backend *b = NULL;
	struct gpu_info info = { 0 };
	struct buf lines = { 0 }, out = { 0 };
	int r, rc = 1;

	log_max_level = LOG_LEVEL_WARN;
	r = parse_args(CLI_LABELS, argc, argv, &a);
	if (r != 0) {
		rc = r;
		goto out;
	}
	if (a.c.n_positional) {
		(void)fprintf(stderr, "edgegpu: unexpected argument '%s'\n", a.c.positional[0]);
		rc = 2;
		goto out;
	}
	if (discover_gpus(&a, &c, &b, &info) != 0)
		goto out;
	if (info.n_devices + info.n_mig_devices == 0)
		(void)fprintf(stderr, "edgegpu: no usable GPU found: no labels\n");
	r = labels_build(&info, &c, getenv("EDGEGPU_SYSFS_ROOT"), NULL, &lines);
	/* As GFD's one-shot output: with its timestamp unless --no-timestamp. */
	if (r == 0 && lines.len && !c.labels.no_timestamp)
		r = labels_add_timestamp((const char *)lines.data, lines.len, time(NULL), &out);
	else if (r == 0)
		r = buf_append(&out, lines.data, lines.len);
	if (r == 0 && out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
		r = -EIO;
	if (r < 0) {
		(void)fprintf(stderr, "edgegpu: %s\n", strerror(-r));
		goto out;
	}
	rc = 0;
out:
	buf_release(&lines);
	buf_release(&out);
	gpu_info_release(&info);
	gpu_backend_close(b);
	config_release(&c);
	free_args(&a);
	return rc;
}

/* `doctor`: the doctor parses its own command line (src/doctor/doctor.c, doctor_options[]). */
static int verb_doctor(int argc, char **argv)
{
	return doctor_main(argc, argv);
}

static int (*const verb_fns[CLI_VERB_COUNT])(int argc, char **argv) = {
	[CLI_SERVE] = verb_serve,
	[CLI_DISCOVER] = verb_discover,
	[CLI_CHECK_CONFIG] = verb_check_config,
	[CLI_LABELS] = verb_labels,
	[CLI_DOCTOR] = verb_doctor,
	[CLI_VERSION] = verb_version,
	[CLI_HELP] = verb_help,
};

int cli_main(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : "serve";
	bool flags_only = argc > 1 && strncmp(verb, "--", 2) == 0; /* serve's flags, no verb */
	int v = CLI_SERVE;

	if (argc > 1 && is_help(verb)) {
		cli_help(stdout, CLI_VERB_COUNT);
		return 0;
	}
	if (argc > 1 && strcmp(verb, "--version") == 0)
		return verb_version(1, argv);
	if (!flags_only) {
		for (v = 0; v < CLI_VERB_COUNT && strcmp(verb, cli_verbs[v].name) != 0; v++)
			;
		if (v == CLI_VERB_COUNT) {
			(void)fprintf(stderr,
				      "edgegpu: unknown command '%s' (see 'edgegpu --help')\n",
				      verb);
			return 2;
		}
	}
	/* -h or --help anywhere: the verb's usage, on stdout, and nothing else. */
	for (int i = flags_only ? 1 : 2; i < argc; i++)
		if (is_help(argv[i])) {
			cli_help(stdout, (enum cli_verb)v);
			return 0;
		}
	if (flags_only)
		return verb_serve(argc, argv);
	return verb_fns[v](argc > 1 ? argc - 1 : argc, argc > 1 ? argv + 1 : argv);
}
