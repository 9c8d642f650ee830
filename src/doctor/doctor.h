#pragma once

/*
 * edgegpu doctor: checks the layers a GPU pod needs, in order (driver, container runtime,
 * device plugin, compatibility), on this host or on a tree laid out like one (--host-root), and
 * says for each check pass / warn / fail / skip, the evidence, and the exact fix
 * (docs/doctor.md, docs/troubleshooting.md).
 *
 * This is all the rest of the program sees of it; src/doctor/doctor-int.h is the inside.
 */

/*
 * `edgegpu doctor ARGS`: @argv[0] is "doctor"; the doctor's own options (--json,
 * --cuda-version, --image, --host-root, --timeout-ms, --help) and the config flags the daemon
 * takes, so the doctor sees the config the daemon would. Prints the report on stdout. Returns
 * the exit status: 0 when no check failed (warnings allowed), 1 when one did (or the config is
 * invalid), 2 for a usage error (said on stderr). The caller's thread.
 */
int doctor_main(int argc, char **argv);

/*
 * The doctor's own options, for its parser and for `edgegpu doctor --help` and the man page
 * (cli-help.c), so the two cannot differ: name (no dashes), the value's form (NULL: a switch) and
 * one line of help. Ends with a NULL name.
 */
struct doctor_option {
	const char *name;
	const char *value;
	const char *help;
};

extern const struct doctor_option doctor_options[];
