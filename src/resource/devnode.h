#pragma once

/*
 * devnode: the device nodes a container gets besides its GPUs' own, found under a dev root
 * the same way by Allocate (allocate.c) and by the CDI spec (cdi.c): one presence rule and one
 * expansion of the backend's node patterns (gpu_container.node_globs) and of the `dev` lines of
 * CSV mount specs, so that a node Allocate delivers is a node the spec lists.
 *
 * Only stat() and glob(3) under the root; no globals; any thread. Nothing is cached: nodes
 * come and go with kernel modules (a Jetson's nvhost nodes appear during boot), and the
 * container description they come from is the backend's static data, which holds no state.
 * Expanding a pattern reads the directories its wildcards are in (/dev, /dev/dri: a few
 * hundred entries, tens of microseconds), which Allocate can afford on each call.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * A set of container paths of device nodes ("/dev/nvmap"), heap strings owned by the set,
 * kept sorted (strcmp) and free of duplicates by every devnode_set_glob(). Zero-initialise it;
 * devnode_set_release() frees it.
 */
struct devnode_set {
	char **paths;
	size_t n, cap;
};

/*
 * The presence rule for every node delivered "when present" (control nodes, pattern matches):
 * stat() of <@root><@path> (links followed) finds something that is not a directory. On a
 * node that is a character device; the test fixtures use empty regular files instead, so no
 * other type test is made. @root NULL or "/": none. Returns 1, 0, or -ENOMEM.
 */
int devnode_present(const char *root, const char *path) WARN_UNUSED;

/*
 * Expands each of @patterns (glob(3) syntax: "/dev/nvhost-*", "/dev/dri/renderD[0-9]*") under
 * @root (its own wildcard characters are escaped) and adds to @set the container path of each
 * match that devnode_present() accepts. Skipped with a debug line (the pattern or match named):
 * a pattern that is not absolute, not under "/dev/" or that holds a "." or ".." component; a
 * pattern that matches nothing or whose directory cannot be read; a match with a "." or ".."
 * component (".*" matches them) or that is not valid UTF-8 (it could not go into a response).
 * Returns the number of paths @set gained (0 included), or -ENOMEM; on failure @set holds
 * what it held plus possibly some matches, still sorted and unique, for the caller to release.
 */
int devnode_set_glob(struct devnode_set *set, const char *root, const char *const *patterns,
		     size_t n_patterns) WARN_UNUSED;

/* Whether @set holds @path (binary search). */
bool devnode_set_has(const struct devnode_set *set, const char *path);

/* Frees what @set holds and zeroes it. */
void devnode_set_release(struct devnode_set *set);
