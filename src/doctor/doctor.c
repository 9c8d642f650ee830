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

static void usage(FILE *f)
{
	(void)fputs(
		"usage: edgegpu doctor [--json] [--cuda-version X.Y] [--image REF] [--host-root DIR]\n"
		"                      [--timeout-ms N] [FLAGS]\n"
		"\n"
		"Checks the layers a GPU pod needs, in order: the driver, the container runtime, the\n"
		"device plugin and the compatibility of a CUDA version or an image with them; says for\n"
		"each check pass, warn, fail or skip, the evidence and the fix (docs/doctor.md,\n"
		"docs/troubleshooting.md). Exit status 0 when no check failed, 1 when one did, 2 for a\n"
		"usage error.\n"
		"\n"
		"  --json               one JSON document (docs/doctor.schema.json) instead of text\n"
		"  --cuda-version X.Y   the CUDA version your pods are built for: can this driver run it?\n"
		"  --image REF          an image in the local store: is it built for this node?\n"
		"  --host-root DIR      read the host's files under DIR (the node's / mounted in a pod)\n"
		"  --timeout-ms N       bound on one NVML call or socket exchange (5000)\n"
		"\n"
		"FLAGS are the daemon's config flags ('edgegpu --help', docs/config.md): the doctor sees\n"
		"the config the daemon would.\n",
		f);
}

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
 * The arguments left after the doctor's own options: --help (the doctor's usage; returns -1),
 * --json, and config flags into @a. Returns 0, or 2 (a usage error, said on stderr).
 */
static int parse_rest(int argc, char **argv, struct config_args *a, bool *json)
{
	for (int i = 1; i < argc; i++) {
		char *err = NULL;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return -1;
		}
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
	static const char *const own[] = { "cuda-version", "image", "host-root", "timeout-ms" };
	const char *val[ELEMENTSOF(own)] = { NULL };
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	struct config_args a = { 0 };
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
		size_t k = ELEMENTSOF(own);

		for (size_t j = 0; j < ELEMENTSOF(own) && k == ELEMENTSOF(own); j++) {
			size_t len = strlen(own[j]);

			if (strncmp(argv[i], "--", 2) == 0 &&
			    strncmp(argv[i] + 2, own[j], len) == 0 &&
			    (argv[i][2 + len] == 0 || argv[i][2 + len] == '='))
				k = j;
		}
		if (k == ELEMENTSOF(own)) {
			rest[n_rest++] = argv[i];
			continue;
		}
		if (argv[i][2 + strlen(own[k])] == '=') {
			val[k] = argv[i] + 3 + strlen(own[k]);
		} else if (i + 1 < argc) {
			val[k] = argv[++i];
		} else {
			(void)fprintf(stderr, "edgegpu: flag '--%s' needs a value\n", own[k]);
			goto out;
		}
		if (!*val[k]) {
			(void)fprintf(stderr, "edgegpu: flag '--%s' needs a value\n", own[k]);
			goto out;
		}
	}
	o.cuda_version = val[0];
	o.image = val[1];
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
	if (val[2])
		o.host_root = val[2];
	if (val[3] && (safe_atou(val[3], &o.timeout_ms) < 0 || o.timeout_ms == 0)) {
		(void)fprintf(stderr,
			      "edgegpu: --timeout-ms wants a positive number of ms, not '%s'\n",
			      val[3]);
		goto out;
	}
	r = parse_rest(n_rest, rest, &a, &o.json);
	if (r != 0) {
		r = r < 0 ? 0 : r; /* --help: usage said, success */
		goto out;
	}
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
