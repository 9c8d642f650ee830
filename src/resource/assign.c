/*
 * assign.c: a config plus the GPUs discovered become resources. assign_gpus() decides, GPU by
 * GPU, whole device, time-sliced replicas or memory units, and under which resource name, and
 * reports what only the GPUs can tell in the config's own terms; assign_build_resources() groups
 * the GPUs by resource name into the resource_spec of each and builds the resources, logging
 * what it refused.
 */
#include "assign.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "gpu.h"
#include "resource.h"

#define LOG_MODULE "assign"
#include "log.h"

#define MIB	((uint64_t)1024 * 1024)
#define KEY_MAX 512

/* The errors of one assignment: recorded in @d, counted even when @d is NULL. */
struct errs {
	struct config_diag *d;
	const char *file;
	unsigned n;
};

#define ERR(x, pos, key, ...) \
	((x)->n++, config_diag_add_error((x)->d, (x)->file, pos, key, __VA_ARGS__))

bool assign_pattern_match(const char *p, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*p == '*') {
			star = p++;
			resume = s;
		} else if (*p == *s) {
			p++;
			s++;
		} else if (star) {
			p = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return !*p;
}

const char *assign_gpu_resource(const struct config *c, const char *gpu_name)
{
	for (size_t i = 0; i < c->n_gpus; i++)
		if (assign_pattern_match(c->gpus[i].pattern, gpu_name))
			return c->gpus[i].name;
	return CONFIG_DEFAULT_RESOURCE;
}

enum {
	OWNER_NONE = -1,
	OWNER_MEMORY = -2,
};

/* Position in info->devices of the GPU @ref names, or -1. */
static int resolve_ref(const struct gpu_info *info, const struct config_device_ref *ref)
{
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];

		if (ref->uuid ? strcasecmp(ref->uuid, g->uuid) == 0 : ref->index == g->index)
			return (int)i;
	}
	return -1;
}

static const char *owner_str(char *out, size_t size, int owner)
{
	if (owner == OWNER_MEMORY)
		(void)snprintf(out, size, "edgegpu.sharing.memory.devices");
	else
		(void)snprintf(out, size, "sharing.timeSlicing.resources[%d]", owner);
	return out;
}

static int assign_ts(struct errs *x, const struct config *c, const struct gpu_info *info, size_t ti,
		     int *owner, const char **base)
{
	const struct config_ts_resource *t = &c->time_slicing.resources[ti];
	const struct config_devices *d = &t->devices;
	char key[KEY_MAX], a[GPU_UUID_MAX + 8], o[64], q[96];
	int r;

	(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices", ti);
	if (d->kind == CONFIG_DEVICES_ALL) {
		for (unsigned g = 0; g < info->n_devices; g++)
			if (owner[g] == OWNER_NONE && streq(base[g], t->name))
				owner[g] = (int)ti;
		return 0;
	}
	if (d->kind == CONFIG_DEVICES_COUNT) {
		unsigned seen = 0;

		for (unsigned g = 0; g < info->n_devices && seen < d->count; g++) {
			if (!streq(base[g], t->name))
				continue;
			seen++;
			if (owner[g] != OWNER_NONE) {
				r = ERR(x, d->pos, key, "GPU %u is already in %s",
					info->devices[g].index, owner_str(o, sizeof(o), owner[g]));
				if (r < 0)
					return r;
			}
			owner[g] = (int)ti;
		}
		if (seen < d->count)
			return ERR(x, d->pos, key, "asks for %u GPUs of %s, the node has %u",
				   d->count, config_quote(q, sizeof(q), t->name), seen);
		return 0;
	}
	for (size_t k = 0; k < d->n_refs; k++) {
		const struct config_device_ref *ref = &d->refs[k];
		int g = resolve_ref(info, ref);

		(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices[%zu]",
			       ti, k);
		if (g < 0)
			r = ERR(x, ref->pos, key, "%s is not a GPU of this node",
				config_device_ref_str(a, sizeof(a), ref));
		else if (!streq(base[g], t->name))
			r = ERR(x, ref->pos, key, "%s is a %s GPU, not %s",
				config_device_ref_str(a, sizeof(a), ref), base[g],
				config_quote(q, sizeof(q), t->name));
		else if (owner[g] != OWNER_NONE && owner[g] != (int)ti)
			r = ERR(x, ref->pos, key, "%s is already in %s",
				config_device_ref_str(a, sizeof(a), ref),
				owner_str(o, sizeof(o), owner[g]));
		else if (owner[g] == (int)ti)
			r = ERR(x, ref->pos, key, "%s is listed twice",
				config_device_ref_str(a, sizeof(a), ref));
		else {
			owner[g] = (int)ti;
			r = 0;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int assign_gpus(const struct config *c, const struct gpu_info *info, struct assign_gpu **ret,
		struct config_diag *d)
{
	struct errs x = { .d = d, .file = c->config_file };
	const struct config_gpumem *m = &c->gpumem;
	unsigned n = info->n_devices;
	struct assign_gpu *as = NULL;
	const char **base = NULL;
	int *owner = NULL, r = 0;
	char key[KEY_MAX], a[GPU_UUID_MAX + 8];

	as = calloc(n ? n : 1, sizeof(*as));
	base = calloc(n ? n : 1, sizeof(*base));
	owner = calloc(n ? n : 1, sizeof(*owner));
	if (!as || !base || !owner) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned g = 0; g < n; g++) {
		base[g] = assign_gpu_resource(c, info->devices[g].name);
		owner[g] = OWNER_NONE;
	}
	for (size_t k = 0; k < m->devices.n_refs; k++) {
		const struct config_device_ref *ref = &m->devices.refs[k];
		int g = resolve_ref(info, ref);

		(void)snprintf(key, sizeof(key), "edgegpu.sharing.memory.devices[%zu]", k);
		if (g < 0)
			r = ERR(&x, ref->pos, key, "%s is not a GPU of this node",
				config_device_ref_str(a, sizeof(a), ref));
		else if (owner[g] != OWNER_NONE)
			r = ERR(&x, ref->pos, key, "GPU %u is listed twice",
				info->devices[g].index);
		else {
			const struct gpu_device *gd = &info->devices[g];
			uint64_t total = gd->mem_total / MIB;

			owner[g] = OWNER_MEMORY;
			if (total <= m->reserve_mib || total - m->reserve_mib < m->unit_mib)
				r = ERR(&x, m->reserve_pos, "edgegpu.sharing.memory.reserveMiB",
					"reserving %" PRIu64 " MiB of GPU %u (%s, %" PRIu64
					" MiB) leaves no %u MiB unit",
					m->reserve_mib, gd->index, gd->name, total, m->unit_mib);
		}
		if (r < 0)
			goto out;
	}
	/* Explicit lists and counts first, so `all` takes what is left. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t t = 0; t < c->time_slicing.n_resources; t++) {
			bool all = c->time_slicing.resources[t].devices.kind == CONFIG_DEVICES_ALL;

			if (all != (pass == 1))
				continue;
			r = assign_ts(&x, c, info, t, owner, base);
			if (r < 0)
				goto out;
		}
	for (unsigned g = 0; g < n; g++) {
		if (owner[g] == OWNER_MEMORY) {
			as[g] = (struct assign_gpu){ ASSIGN_GPU_MEMORY, m->resource_name, 1 };
		} else if (owner[g] >= 0) {
			const struct config_ts_resource *t = &c->time_slicing.resources[owner[g]];

			as[g] = (struct assign_gpu){ ASSIGN_GPU_TIME_SLICED,
						     config_ts_resource_name(t), t->replicas, t };
		} else {
			as[g] = (struct assign_gpu){ ASSIGN_GPU_WHOLE, base[g], 1 };
		}
	}
	if (x.n > 0)
		r = -EINVAL;
out:
	free(base);
	free(owner);
	if (r < 0) {
		free(as);
		return r;
	}
	*ret = as;
	return 0;
}

static void log_errors(const struct config_diag *dg)
{
	for (size_t i = 0; i < dg->n_errors; i++) {
		char *s = config_error_to_string(&dg->errors[i]);

		log_error("invalid config", "detail=%s", log_q(s ? s : "?"));
		free(s);
	}
}

struct spec_set {
	struct resource_spec specs[RESOURCE_NODE_MAX];
	unsigned gpus[RESOURCE_NODE_MAX][GPU_NODE_MAX];
	size_t n;
};

static struct resource_spec *spec_for(struct spec_set *s, const char *name, enum resource_kind kind)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->specs[i].name, name))
			return &s->specs[i];
	if (s->n == ELEMENTSOF(s->specs))
		return NULL;
	s->specs[s->n] =
		(struct resource_spec){ .name = name, .kind = kind, .gpus = s->gpus[s->n] };
	return &s->specs[s->n++];
}

int assign_build_resources(const struct config *cfg, const struct gpu_info *info,
			   struct resource **ret, size_t max)
{
	struct assign_gpu *as = NULL;
	struct config_diag dg = { 0 };
	struct spec_set *set;
	unsigned(*reps)[ELEMENTSOF(set->gpus[0])] = NULL; /* per spec, per entry of its gpus */
	size_t n = 0;
	int r;

	set = calloc(1, sizeof(*set));
	reps = calloc(ELEMENTSOF(set->specs), sizeof(*reps));
	if (!set || !reps) {
		free(set);
		free(reps);
		return -ENOMEM;
	}
	r = assign_gpus(cfg, info, &as, &dg);
	log_errors(&dg);
	config_diag_release(&dg);
	if (r < 0)
		goto out;
	if (info->n_devices > GPU_NODE_MAX)
		log_warn("more GPUs than one node is built for, advertising the first ones",
			 "gpus=%u limit=%d", info->n_devices, GPU_NODE_MAX);
	for (unsigned g = 0; g < info->n_devices && g < GPU_NODE_MAX; g++) {
		enum resource_kind kind = as[g].use == ASSIGN_GPU_WHOLE	      ? RESOURCE_GPU :
					  as[g].use == ASSIGN_GPU_TIME_SLICED ? RESOURCE_REPLICA :
										RESOURCE_GPUMEM;
		struct resource_spec *sp = spec_for(set, as[g].resource, kind);

		if (!sp) {
			r = -E2BIG;
			goto out;
		}
		if (sp->kind != kind) {
			log_error(
				"one resource name is used for two kinds of sharing",
				"resource=%s hint=%s", sp->name,
				log_q("some of its GPUs are time-sliced or memory-shared and others whole: give the shared ones another name (rename, or renameByDefault: true), or share all of them"));
			r = -EINVAL;
			goto out;
		}
		/* Two time-slicing entries may share a name with their own replica counts (GPU 0
		 * four ways, GPU 1 two ways): each GPU keeps its own. */
		reps[sp - set->specs][sp->n_gpus] = as[g].replicas;
		if (kind == RESOURCE_REPLICA)
			sp->gpu_replicas = reps[sp - set->specs];
		set->gpus[sp - set->specs][sp->n_gpus++] = g;
		sp->replicas = as[g].replicas;
		sp->fail_requests_gt_one = cfg->time_slicing.fail_requests_greater_than_one;
		sp->unit_mib = cfg->gpumem.unit_mib;
		sp->reserve_mib = cfg->gpumem.reserve_mib;
	}
	for (size_t i = 0; i < set->n && n < max; i++) {
		char *err = NULL;

		r = resource_new(&set->specs[i], info, &ret[n], &err);
		if (r < 0) {
			log_error_errno(r, "invalid resource", "resource=%s reason=%s",
					set->specs[i].name, log_q(err ? err : ""));
			free(err);
			while (n > 0) {
				n--;
				ret[n] = resource_free(ret[n]);
			}
			goto out;
		}
		if (ret[n]->unit_mib != ret[n]->unit_mib_asked)
			log_warn("gpumem unit doubled to keep the device list under 3 MiB",
				 "resource=%s unit_mib=%llu asked_mib=%llu units=%u", ret[n]->name,
				 (unsigned long long)ret[n]->unit_mib,
				 (unsigned long long)ret[n]->unit_mib_asked, ret[n]->n_devices);
		n++;
	}
	r = (int)n;
out:
	free(as);
	free(reps);
	free(set);
	return r;
}
