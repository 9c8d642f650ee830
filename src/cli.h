#pragma once

/* Subcommands: serve (default), discover, check-config, version. */

/* Runs the verb named by argv[1] (or serve); returns the process exit code. */
int cli_main(int argc, char **argv);
