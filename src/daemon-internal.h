#pragma once

/*
 * The daemon's pure decisions, apart from its loop and objects so that tests/unit/test-daemon.c
 * can check them. Private to daemon.c.
 */

#include <stdbool.h>
#include <stddef.h>

struct gpu_info;
struct resource;

/*
 * A reload's plan, by resource name. @running[i] names running plugin i's resource, or is NULL
 * for a plugin that is stopping (it drains; a wanted resource of its name gets a new plugin:
 * replaced). Sets @ret_take[i] to the index in @wanted of the resource plugin i takes over
 * (kept: its new device list goes out on its open stream, its socket and registration stay),
 * or -1 (removed: it closes). Sets @ret_add[j] for each wanted resource that no running plugin
 * takes (added: a new plugin, socket and registration). Each wanted resource goes to one
 * plugin at most. Returns the number added.
 */
size_t daemon_reload_match(const char *const *running, size_t n_running, const char *const *wanted,
			   size_t n_wanted, int *ret_take, bool *ret_add);

/*
 * True when every GPU of @r is still at its index in @info with the same UUID: after a reload
 * whose config cannot be applied, only such resources stay.
 */
bool daemon_resource_matches(const struct resource *r, const struct gpu_info *info);
