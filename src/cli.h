#pragma once

/*
 * Subcommands: serve (default), discover [--json], check-config FILE, labels, version. Flags
 * use NVIDIA's names (--device-list-strategy, --pass-device-specs, ...) plus ours; docs/config.md
 * lists them. Flag over environment over config file over default.
 */

/* Runs the verb named by argv[1] (or serve); returns the process exit code. */
int cli_main(int argc, char **argv);
