/*
 * daemon-enforce-info.c: saying which gpumem enforcement is in force. Whether our CDI spec
 * carries the toolkit's apply-cuda-memory-limits hook (the driver path's last condition), the
 * node's mode for the label edgegpu.io/gpumem.enforcement, and the metric families
 * edgegpu_gpumem_enforcement_info (the node) and edgegpu_gpumem_container_enforcement_info
 * (each gpumem container allocation). The node's verdict is the one daemon-enforce.c got from
 * enforce_verdict(e, info, NULL, NULL, 0) (d->enforce_verdict), so the label, the metric, the
 * log and doctor (enforce_decide() on the same facts) agree. Loop thread; calls nothing in
 * daemon.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "daemon-internal.h"
#include "enforce.h"
#include "podres.h"
#include "prom.h"

#define LOG_MODULE "daemon"
#include "log.h"

/*
 * The binary is searched once per discovery (d->memlimit_hook_probe, reset by on_discovered():
 * a toolkit upgrade comes with a rediscovery at the latest): a bounded read of a ~10 MiB file,
 * usually page-cached, on the loop like the rest of the spec's rendering (cdi_writer_set()).
 */
bool daemon_cdi_memlimit_hook(struct daemon *d)
{
	bool any = false;
	int r;

	if (d->cfg.gpumem.devices.n_refs == 0 || !d->cfg.gpumem.enforcement.driver)
		return false;
	for (unsigned i = 0; i < d->info.n_devices; i++)
		any |= d->info.devices[i].mem_limits == GPU_MEM_LIMITS_SUPPORTED;
	if (!any)
		return false;
	if (d->memlimit_hook_probe != MEMLIMIT_HOOK_UNPROBED)
		return d->memlimit_hook_probe == 1;
	r = cdi_hook_has_memory_limits(d->cfg.host_root, CDI_MEMLIMIT_HOOK_PATH);
	d->memlimit_hook_probe = r;
	if (r < 0)
		log_warn_errno(r,
			       "GPUs limit memory per cgroup but nvidia-cdi-hook cannot be read: "
			       "gpumem limits not enforced by the driver",
			       "path=%s host_root=%s", CDI_MEMLIMIT_HOOK_PATH, d->cfg.host_root);
	else if (r == 0)
		log_warn(
			"GPUs limit memory per cgroup but nvidia-cdi-hook lacks " CDI_MEMLIMIT_SUBCOMMAND
			": gpumem limits not enforced by the driver",
			"path=%s hint=\"install an NVIDIA Container Toolkit whose nvidia-cdi-hook "
			"has apply-cuda-memory-limits\"",
			CDI_MEMLIMIT_HOOK_PATH);
	else
		log_info(
			"nvidia-cdi-hook applies the driver's memory limits: the CDI spec carries it",
			"path=%s", CDI_MEMLIMIT_HOOK_PATH);
	return r == 1;
}

const char *daemon_enforce_mode(const struct daemon *d)
{
	return d->enforce && d->enforce_logged ? enforce_mode_name(d->enforce_verdict.mode) : NULL;
}

/*
 * The holders of the allocations' first units in the last pod-resources answer, found in one
 * walk of it (an allocation's units are held by one container). Owned strings.
 */
struct owner {
	char *alloc, *ns, *pod, *container;
};
struct collect_ctx {
	const struct daemon *d;
	struct prom *p;
	struct owner *owners;
	size_t n_owners, cap_owners;
};

static void owner_of(const char *namespace_, const char *pod, const char *container,
		     const char *resource, const char *id, void *userdata)
{
	struct collect_ctx *x = userdata;
	const struct enforce_alloc *a = enforce_find_unit(x->d->enforce, resource, id);
	struct owner *o;

	if (!a || !a->n_ids || !streq(a->ids[0], id))
		return;
	if (x->n_owners == x->cap_owners) {
		size_t cap = x->cap_owners ? 2 * x->cap_owners : 16;
		struct owner *v = reallocarray(x->owners, cap, sizeof(*v));

		if (!v)
			return; /* out of memory: the allocation is shown without its pod */
		x->owners = v;
		x->cap_owners = cap;
	}
	o = &x->owners[x->n_owners];
	*o = (struct owner){ strdup(a->name), strdup(namespace_), strdup(pod), strdup(container) };
	if (!o->alloc || !o->ns || !o->pod || !o->container) {
		free(o->alloc);
		free(o->ns);
		free(o->pod);
		free(o->container);
		return;
	}
	x->n_owners++;
}

static void one_alloc(const struct enforce_alloc *a, void *userdata)
{
	struct collect_ctx *x = userdata;
	const struct owner *o = NULL;
	struct prom_labels l = { 0 };

	for (size_t i = 0; i < x->n_owners && !o; i++)
		if (streq(x->owners[i].alloc, a->name))
			o = &x->owners[i];
	prom_labels_push(&l, "allocation", a->name);
	prom_labels_push(&l, "resource", a->resource);
	prom_labels_push(&l, "namespace", o ? o->ns : "");
	prom_labels_push(&l, "pod", o ? o->pod : "");
	prom_labels_push(&l, "container", o ? o->container : "");
	prom_labels_push(&l, "mode", enforce_mode_name(a->mode));
	prom_labels_push(&l, "reason", a->reason ? a->reason : "");
	prom_sample(x->p, NULL, &l, 1);
}

void daemon_enforce_collect(const struct daemon *d, struct prom *p)
{
	const struct enforce_verdict *v = &d->enforce_verdict;
	struct collect_ctx x = { .d = d, .p = p };
	struct prom_labels l = { 0 };

	if (!daemon_enforce_mode(d))
		return;
	prom_family(p, "edgegpu_gpumem_enforcement_info", PROM_GAUGE,
		    "1: which enforcement holds nvidia.com/gpumem limits on this node (driver, "
		    "interposer, both, accounting) and why the driver path and the interposer are "
		    "not in force (\"\" when they are).");
	prom_labels_push(&l, "mode", enforce_mode_name(v->mode));
	prom_labels_push(&l, "driver_reason", v->driver_reason);
	prom_labels_push(&l, "interposer_reason", v->interposer_reason);
	prom_sample(p, NULL, &l, 1);
	prom_family(p, "edgegpu_gpumem_container_enforcement_info", PROM_GAUGE,
		    "1 per gpumem container allocation: its enforcement mode and why not a "
		    "stronger one; namespace, pod and container from the last pod-resources "
		    "answer (\"\" until it lists the container).");
	if (d->enforce_podres.len)
		(void)podres_for_each_owner(d->enforce_podres.data, d->enforce_podres.len, owner_of,
					    &x);
	enforce_for_each_alloc(d->enforce, one_alloc, &x);
	for (size_t i = 0; i < x.n_owners; i++) {
		free(x.owners[i].alloc);
		free(x.owners[i].ns);
		free(x.owners[i].pod);
		free(x.owners[i].container);
	}
	free(x.owners);
}
