#pragma once

/*
 * assign: turns a validated config plus the GPUs discovered into resources. Each GPU becomes
 * one device of a whole-GPU resource (nvidia.com/gpu or its resources.gpus name), replicas of a
 * time-sliced resource (sharing.timeSlicing), or memory units of the gpumem resource
 * (edgegpu.sharing.memory). assign_gpus() makes that decision and checks what only the GPUs can
 * tell, in the config's own terms (struct config_diag, positions from the file);
 * assign_build_resources() groups the GPUs by resource name and builds the struct resource of
 * each, logging what it refused (module=assign). Loop thread only (it logs); no global state.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

struct config;
struct config_diag;
struct config_ts_resource;
struct gpu_info;
struct resource;

/* Wildcard match, `*` = any run of characters, anchored at both ends, case-sensitive. */
bool assign_pattern_match(const char *pattern, const char *s);

/*
 * The resource of a GPU by its NVML name: the first matching resources.gpus entry, else
 * CONFIG_DEFAULT_RESOURCE. Points into @c or at a static string.
 */
const char *assign_gpu_resource(const struct config *c, const char *gpu_name);

enum assign_use {
	ASSIGN_GPU_WHOLE,	/* one device of @resource */
	ASSIGN_GPU_TIME_SLICED, /* @replicas devices "<uuid>::<n>" of @resource */
	ASSIGN_GPU_MEMORY,	/* units of c->gpumem.resource_name */
};

struct assign_gpu {
	enum assign_use use;
	const char *resource;		     /* points into the config (or a static string) */
	unsigned replicas;		     /* time-sliced: replicas; otherwise 1 */
	const struct config_ts_resource *ts; /* time-sliced: its entry; otherwise NULL */
};

/*
 * Decides what each of the info->n_devices discovered GPUs becomes, and checks what only the
 * GPUs can tell: a `devices` entry naming no GPU, a time-slicing entry listing a GPU of another
 * resource, a count larger than the GPUs there are, a GPU claimed twice after indices and UUIDs
 * are resolved, a reserveMiB that leaves a sharing.memory GPU no whole unit. On success *ret is
 * a heap array of info->n_devices entries (caller frees; they point into @c, which must outlive
 * them). Returns 0, -EINVAL (errors in @d, which may be NULL; positions from the file) or
 * -ENOMEM. Logs nothing.
 */
int assign_gpus(const struct config *c, const struct gpu_info *info, struct assign_gpu **ret,
		struct config_diag *d) WARN_UNUSED;

/*
 * Builds the resources @cfg asks for over the discovered GPUs: one per resource name, in the
 * order the GPUs first name them. Logs the config problems assign_gpus() found, a name used for
 * two kinds of sharing, a resource resource_new() refused, and a gpumem unit that had to
 * double. Fills up to @max entries of @ret (caller frees each with resource_free()). Returns the
 * count, or -EINVAL (the config does not apply to these GPUs), -E2BIG (more resource names than
 * one node is built for), -ENOMEM or resource_new()'s error; on failure @ret holds nothing.
 */
int assign_build_resources(const struct config *cfg, const struct gpu_info *info,
			   struct resource **ret, size_t max);
