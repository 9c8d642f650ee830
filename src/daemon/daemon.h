#pragma once

/*
 * The `serve` daemon: config -> GPU discovery -> resources -> one plugin per resource,
 * registered with the kubelet, kept registered across kubelet restarts, health-monitored,
 * reloaded on SIGHUP and when the config file changes (config-watch.h), stopped cleanly on
 * SIGTERM/SIGINT (the old instance of an upgrade, see plugin.h for sharing the socket path).
 * Logs (module=daemon).
 */

#include <stddef.h>

struct config;
struct config_flag;

/*
 * Runs until SIGTERM/SIGINT. @envp and @flags are kept for SIGHUP reloads (the config is
 * rebuilt from the same environment and flags). Returns the process exit code.
 */
int daemon_run(char *const *envp, const struct config_flag *flags, size_t n_flags);
