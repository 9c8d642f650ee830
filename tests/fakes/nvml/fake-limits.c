/*
 * The fake NVML's per-cgroup memory limits (CUDA 13.4): nvmlDeviceGetMemoryLimits_v1 and
 * nvmlDeviceSetMemoryLimits_v1, supported only with "memory_limits = supported" and not on a
 * MIG GPU. The limits are recorded per GPU and cgroup path (the control command "limits GPU"
 * lists them). Every function holds fake.mu from fake_enter_dev() to fake_leave().
 */

#include <stdio.h>
#include <string.h>

#include "fake.h"

/* The prototypes nvml-api.h gives, so that the definitions below are checked against them. */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

#define ID(sym) FAKE_FN_##sym

/* The GPU's record for @path, or NULL; with @add, a new one (NULL when full). fake.mu held. */
static struct fake_limit *limit_of(struct fake_gpu *g, const char *path, bool add)
{
	for (unsigned i = 0; i < g->n_limits; i++)
		if (!strcmp(g->limits[i].path, path))
			return &g->limits[i];
	if (!add || g->n_limits == FAKE_MAX_LIMITS)
		return NULL;
	g->limits[g->n_limits] = (struct fake_limit){ .hard = NVML_MEMORY_LIMIT_MAX };
	(void)snprintf(g->limits[g->n_limits].path, FAKE_LIMIT_PATH, "%s", path);
	return &g->limits[g->n_limits++];
}

/* A cgroup never limited reads as cleared: soft 0, hard NVML_MEMORY_LIMIT_MAX, nothing used. */
enum nvml_return nvmlDeviceGetMemoryLimits_v1(struct nvml_device *d,
					      struct nvml_get_memory_limits *lim)
{
	struct fake_gpu *g;
	const struct fake_limit *l;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetMemoryLimits_v1), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!g->mem_limits || g->mig)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	if (!lim || !lim->name_space || lim->name_space[0] != '/')
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	l = limit_of(g, lim->name_space, false);
	lim->soft = l ? l->soft : 0;
	lim->hard = l ? l->hard : NVML_MEMORY_LIMIT_MAX;
	lim->current_used = l ? l->used : 0;
	return fake_leave(NVML_RET_SUCCESS);
}

/* Records the limits per cgroup path (the control command "limits GPU" lists them); soft above
   hard is INVALID_ARGUMENT, as is a path that is not absolute. */
enum nvml_return nvmlDeviceSetMemoryLimits_v1(struct nvml_device *d,
					      struct nvml_set_memory_limits *lim)
{
	struct fake_gpu *g;
	struct fake_limit *l;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceSetMemoryLimits_v1), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!g->mem_limits || g->mig)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	if (!lim || !lim->name_space || lim->name_space[0] != '/' ||
	    strlen(lim->name_space) >= FAKE_LIMIT_PATH || lim->soft > lim->hard)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	l = limit_of(g, lim->name_space, true);
	if (!l)
		return fake_leave(NVML_RET_INSUFFICIENT_RESOURCES);
	l->soft = lim->soft;
	l->hard = lim->hard;
	return fake_leave(NVML_RET_SUCCESS);
}
