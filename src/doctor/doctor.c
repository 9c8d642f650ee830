/*
 * The doctor's run (doctor.h): its command line, then every layer in order (driver, runtime,
 * plugin, compat), then the report. The top of src/doctor: it calls the layers, the report
 * and the host-root file system; nothing in src/doctor calls it.
 */
#include "doctor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-compat.h"
#include "doctor-image.h"
#include "doctor-int.h"
#define LOG_MODULE "doctor"
#include "log.h"

extern char **environ;

/* In the order doctor_main() reads them into val[]; the switch (--json) last. */
enum {
	OPT_CUDA_VERSION,
	OPT_IMAGE,
	OPT_HOST_ROOT,
	OPT_TIMEOUT_MS,
	OPT_N_VALUED
};

const struct doctor_option doctor_options[] = {
	[OPT_CUDA_VERSION] = { "cuda-version", "X.Y",
			       "the CUDA version your pods are built for: can this driver run it?" },
	[OPT_IMAGE] = { "image", "REF", "an image in the local store: is it built for this node?" },
	[OPT_HOST_ROOT] = { "host-root", "DIR",
			    "read the host's files under DIR (the node's / mounted in a pod)" },
	[OPT_TIMEOUT_MS] = { "timeout-ms", "N",
			     "bound on one NVML call or socket exchange, in ms (5000)" },
	{ "json", NULL, "one JSON document (docs/doctor.schema.json) instead of text" },
	{ NULL },
};

int doctor_run(const struct doctor_opts *o)
{
	struct doctor dr = { .o = o };
	int r, rc;

	doctor_report_init(&dr.report);
	doctor_hostfs_open(&dr.fs, o->host_root);
	doctor_driver(&dr);
	doctor_runtime(&dr);
	doctor_plugin(&dr);
	doctor_enforce(&dr);
	doctor_backstop(&dr);
	doctor_compat(&dr);
	rc = doctor_report_exit_status(&dr.report);
	r = doctor_report_write(&dr.report, o->host_root, o->json, stdout);
	if (r < 0) {
		(void)fprintf(stderr, "edgegpu: doctor: writing the report failed: %s\n",
			      strerror(-r));
		rc = 1;
	}
	(void)fflush(stdout);
	doctor_hostfs_close(&dr.fs);
	doctor_report_release(&dr.report);
	return rc;
}

/*
 * The arguments left after the doctor's own options: --json, and config flags into @a. Returns
 * 0, or 2 (a usage error, said on stderr). --help is cli.c's (the doctor's usage is generated
 * there from doctor_options[]).
 */
static int parse_rest(int argc, char **argv, struct config_args *a, bool *json)
{
	for (int i = 1; i < argc; i++) {
		char *err = NULL;

		if (strcmp(argv[i], "--json") == 0) {
			*json = true;
			continue;
		}
		if (config_args_take(a, argc, argv, &i, &err) < 0) {
			(void)fprintf(stderr, "edgegpu: %s\n", err ? err : "out of memory");
			free(err);
			return 2;
		}
	}
	return 0;
}

/*
 * The doctor's own options (--cuda-version, --image, --host-root, --timeout-ms) are taken out
 * first; of the rest, --json and --help are the doctor's too and the others are config flags,
 * so the doctor sees the config the daemon would.
 */
int doctor_main(int argc, char **argv)
{
	const char *val[OPT_N_VALUED] = { NULL };
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	struct config_args a = { .verb = "doctor" };
	struct config c = { 0 };
	struct doctor_opts o = { .host_root = "/", .timeout_ms = 5000 };
	unsigned major, minor;
	int n_rest = 0, r = 2;

	if (!rest) {
		(void)fprintf(stderr, "edgegpu: out of memory\n");
		return 1;
	}
	rest[n_rest++] = argv[0];
	for (int i = 1; i < argc; i++) {
		size_t k = OPT_N_VALUED;
		const char *name;

		for (size_t j = 0; j < OPT_N_VALUED && k == OPT_N_VALUED; j++) {
			size_t len = strlen(doctor_options[j].name);

			if (strncmp(argv[i], "--", 2) == 0 &&
			    strncmp(argv[i] + 2, doctor_options[j].name, len) == 0 &&
			    (argv[i][2 + len] == 0 || argv[i][2 + len] == '='))
				k = j;
		}
		if (k == OPT_N_VALUED) {
			rest[n_rest++] = argv[i];
			continue;
		}
		name = doctor_options[k].name;
		val[k] = NULL;
		if (argv[i][2 + strlen(name)] == '=')
			val[k] = argv[i] + 3 + strlen(name);
		else if (i + 1 < argc)
			val[k] = argv[++i];
		if (!val[k] || !*val[k]) { /* the last argument, or --NAME= */
			(void)fprintf(
				stderr,
				"edgegpu: flag '--%s' needs a value (see 'edgegpu doctor --help')\n",
				name);
			goto out;
		}
	}
	o.cuda_version = val[OPT_CUDA_VERSION];
	o.image = val[OPT_IMAGE];
	if (o.cuda_version && doctor_cuda_parse(o.cuda_version, &major, &minor) < 0) {
		(void)fprintf(stderr,
			      "edgegpu: --cuda-version wants MAJOR.MINOR (e.g. 12.4), not '%s'\n",
			      o.cuda_version);
		goto out;
	}
	if (o.image) {
		char *norm = NULL;

		if (image_ref_normalize(o.image, &norm) < 0) {
			(void)fprintf(
				stderr,
				"edgegpu: --image wants an image reference "
				"(e.g. nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04), not '%s'\n",
				o.image);
			goto out;
		}
		free(norm);
	}
	if (val[OPT_HOST_ROOT])
		o.host_root = val[OPT_HOST_ROOT];
	if (val[OPT_TIMEOUT_MS] &&
	    (safe_atou(val[OPT_TIMEOUT_MS], &o.timeout_ms) < 0 || o.timeout_ms == 0)) {
		(void)fprintf(stderr,
			      "edgegpu: --timeout-ms wants a positive number of ms, not '%s'\n",
			      val[OPT_TIMEOUT_MS]);
		goto out;
	}
	r = parse_rest(n_rest, rest, &a, &o.json);
	if (r != 0)
		goto out;
	if (a.n_positional) {
		(void)fprintf(stderr, "edgegpu: unexpected argument '%s'\n", a.positional[0]);
		r = 2;
		goto out;
	}
	log_max_level = LOG_LEVEL_ERROR;
	if (config_args_build(&a, environ, &c, stderr) < 0) {
		(void)fprintf(stderr,
			      "edgegpu: doctor: the config is invalid (above); fix it first\n");
		r = 1;
		goto out;
	}
	o.cfg = &c;
	r = doctor_run(&o);
out:
	config_release(&c);
	config_args_release(&a);
	free(rest);
	return r;
}
