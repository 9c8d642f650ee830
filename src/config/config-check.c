/*
 * config-check.c: the checks across settings that need no GPUs: time-slicing entries against the
 * resources and each other, the memory-sharing resource name, renameByDefault names, and socket
 * paths that must fit a sockaddr_un; and config_validate(), which runs them and fills the
 * derived defaults.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "config-int.h"
#include "gpu.h"

static bool is_base_resource(const struct config *c, const char *name)
{
	if (streq(name, CONFIG_DEFAULT_RESOURCE))
		return true;
	for (size_t i = 0; i < c->n_gpus; i++)
		if (streq(c->gpus[i].name, name))
			return true;
	return false;
}

/* Does a time-slicing `devices` value take GPU @ref, as far as the text tells? */
static const struct config_device_ref *ts_takes(const struct config_devices *d,
						const struct config_device_ref *ref)
{
	static const struct config_device_ref counted = { 0 };

	if (d->kind == CONFIG_DEVICES_COUNT)
		return !ref->uuid && ref->index < d->count ? &counted : NULL;
	if (d->kind == CONFIG_DEVICES_LIST)
		for (size_t i = 0; i < d->n_refs; i++)
			if (config_ref_same(&d->refs[i], ref))
				return &d->refs[i];
	return NULL;
}

/* Where a time-slicing entry's `devices` is, for messages: its value, else the entry. */
static struct config_pos ts_devices_pos(const struct config_ts_resource *t)
{
	return t->devices.pos.line ? t->devices.pos : t->pos;
}

/*
 * Entry @all says `devices: all` (or leaves it out) and entry @other of the same resource lists
 * or counts GPUs: an error at the `all` entry that names the other one with its position.
 */
static int all_beside_other(struct ctx *x, const struct config *c, size_t all, size_t other)
{
	const struct config_ts_resource *a = &c->time_slicing.resources[all],
					*o = &c->time_slicing.resources[other];
	struct config_pos op = ts_devices_pos(o);
	char key[KEY_MAX], where[320] = "", q[96];

	(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices", all);
	if (op.line)
		(void)snprintf(where, sizeof(where), " (%s:%u:%u)", x->file ? x->file : "", op.line,
			       op.column);
	return config_pos_err(
		x, ts_devices_pos(a), key,
		"\"all\" takes every GPU of %s, but sharing.timeSlicing.resources[%zu].devices%s "
		"time-slices some of them too; list the GPUs of each entry instead",
		config_quote(q, sizeof(q), a->name), other, where);
}

static int check_time_slicing(struct ctx *x, struct config *c)
{
	const struct config_gpumem *m = &c->gpumem;
	bool gpumem_on = m->devices.n_refs > 0;
	char key[KEY_MAX], q[96], a[GPU_UUID_MAX + 8];
	int r;

	for (size_t i = 0; i < c->time_slicing.n_resources && !x->stop; i++) {
		struct config_ts_resource *t = &c->time_slicing.resources[i];
		const char *eff = config_ts_resource_name(t);

		if (!t->name)
			continue;
		if (!is_base_resource(c, t->name)) {
			(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].name",
				       i);
			r = config_pos_err(
				x, t->name_pos, key,
				"%s is not a resource of this node (resources are " CONFIG_DEFAULT_RESOURCE
				" and those in resources.gpus)",
				config_quote(q, sizeof(q), t->name));
			if (r < 0)
				return r;
		}
		if (t->rename && !streq(t->rename, t->name)) {
			(void)snprintf(key, sizeof(key),
				       "sharing.timeSlicing.resources[%zu].rename", i);
			if (is_base_resource(c, t->rename))
				r = config_pos_err(x, t->rename_pos.line ? t->rename_pos : t->pos,
						   key, "%s is already the name of a resource",
						   config_quote(q, sizeof(q), t->rename));
			else if (gpumem_on && streq(t->rename, m->resource_name))
				r = config_pos_err(x, t->rename_pos.line ? t->rename_pos : t->pos,
						   key, "%s is the edgegpu.sharing.memory resource",
						   config_quote(q, sizeof(q), t->rename));
			else
				r = 0;
			if (r < 0)
				return r;
		}
		for (size_t j = 0; j < i; j++) {
			const struct config_ts_resource *o = &c->time_slicing.resources[j];
			bool overlap = false;

			if (!o->name)
				continue;
			if (!streq(o->name, t->name)) {
				if (streq(config_ts_resource_name(o), eff)) {
					(void)snprintf(key, sizeof(key),
						       "sharing.timeSlicing.resources[%zu].rename",
						       i);
					r = config_pos_err(
						x, t->rename_pos.line ? t->rename_pos : t->pos, key,
						"%s is also the name of sharing.timeSlicing.resources[%zu]",
						config_quote(q, sizeof(q), eff), j);
					if (r < 0)
						return r;
				}
				continue;
			}
			/*
			 * The same resource twice: the device sets must not meet. `all` is every GPU
			 * of the resource, so beside any other entry it would claim GPUs twice (or,
			 * read as "the rest", make a GPU's replica count depend on entry order).
			 */
			if ((t->devices.kind == CONFIG_DEVICES_ALL) !=
			    (o->devices.kind == CONFIG_DEVICES_ALL)) {
				r = all_beside_other(x, c,
						     t->devices.kind == CONFIG_DEVICES_ALL ? i : j,
						     t->devices.kind == CONFIG_DEVICES_ALL ? j : i);
				if (r < 0)
					return r;
				continue;
			}
			if (t->devices.kind == CONFIG_DEVICES_ALL ||
			    (t->devices.kind == CONFIG_DEVICES_COUNT &&
			     o->devices.kind == CONFIG_DEVICES_COUNT))
				overlap = true; /* both all, or both the first GPUs */
			else if (t->devices.kind == CONFIG_DEVICES_LIST)
				for (size_t k = 0; k < t->devices.n_refs && !overlap; k++)
					overlap = ts_takes(&o->devices, &t->devices.refs[k]);
			else
				for (size_t k = 0; k < o->devices.n_refs && !overlap; k++)
					overlap = ts_takes(&t->devices, &o->devices.refs[k]);
			if (overlap) {
				(void)snprintf(key, sizeof(key),
					       "sharing.timeSlicing.resources[%zu].devices", i);
				r = config_pos_err(
					x, t->devices.pos.line ? t->devices.pos : t->pos, key,
					"shares GPUs with sharing.timeSlicing.resources[%zu], which "
					"time-slices the same resource",
					j);
				if (r < 0)
					return r;
			}
		}
		/* A GPU can be time-sliced or memory-shared, not both. */
		for (size_t k = 0; k < m->devices.n_refs; k++) {
			const struct config_device_ref *mr = &m->devices.refs[k];

			if (!ts_takes(&t->devices, mr))
				continue;
			(void)snprintf(key, sizeof(key), "edgegpu.sharing.memory.devices[%zu]", k);
			r = config_pos_err(
				x, mr->pos, key,
				"%s is also time-sliced by sharing.timeSlicing.resources[%zu]; a GPU "
				"can be in only one of the two",
				config_device_ref_str(a, sizeof(a), mr), i);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int check_gpumem(struct ctx *x, const struct config *c)
{
	const struct config_gpumem *m = &c->gpumem;
	char q[96];

	if (!m->devices.n_refs)
		return 0;
	/* Time-slicing renames that take this name are reported at the rename. */
	if (!is_base_resource(c, m->resource_name))
		return 0;
	return config_pos_err(x, m->resource_name_pos, "edgegpu.sharing.memory.resourceName",
			      "%s is already a whole-GPU resource",
			      config_quote(q, sizeof(q), m->resource_name));
}

/* What the file alone implies: renameByDefault names. */
int config_finish_file(struct ctx *x, struct config *c)
{
	for (size_t i = 0; i < c->time_slicing.n_resources; i++) {
		struct config_ts_resource *t = &c->time_slicing.resources[i];
		char *v;

		if (t->rename || !t->name || !c->time_slicing.rename_by_default)
			continue;
		if (strlen(t->name) + strlen(".shared") > RESNAME_MAX) {
			char key[KEY_MAX];
			int r;

			(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].name",
				       i);
			r = config_pos_err(
				x, t->name_pos, key,
				"is too long to add \".shared\" (renameByDefault) within %d "
				"characters",
				RESNAME_MAX);
			if (r < 0)
				return r;
			continue;
		}
		v = strdup_printf("%s.shared", t->name);
		if (!v)
			return -ENOMEM;
		t->rename = v;
	}
	return 0;
}

/*
 * A `devices` entry that names a device by a name of ours (not "GPU-..."): only the Tegra
 * iGPU's configured ID is one. @key_fmt names the list, "%zu" its entry.
 */
static int check_named_refs(struct ctx *x, const struct config *c, const struct config_devices *d,
			    const char *list)
{
	char key[KEY_MAX], q[96], id[96];

	for (size_t k = 0; k < d->n_refs && !x->stop; k++) {
		const struct config_device_ref *ref = &d->refs[k];
		int r;

		if (!ref->uuid || strncmp(ref->uuid, "GPU-", 4) == 0 ||
		    streq_ptr(ref->uuid, c->tegra_device_id))
			continue;
		(void)snprintf(key, sizeof(key), "%s[%zu]", list, k);
		r = config_pos_err(x, ref->pos, key,
				   "expected a GPU index, a GPU UUID (\"GPU-...\") or the Tegra "
				   "device ID %s (edgegpu.tegra.deviceId), got %s",
				   config_quote(id, sizeof(id), c->tegra_device_id),
				   config_quote(q, sizeof(q), ref->uuid));
		if (r < 0)
			return r;
	}
	return 0;
}

/* edgegpu.tegra.deviceId: a CDI device name and a device-plugin ID alike. */
static int check_tegra(struct ctx *x, const struct config *c)
{
	char key[KEY_MAX], q[96];
	int r = 0;

	if (c->tegra_device_id && !gpu_device_id_valid(c->tegra_device_id))
		return config_pos_err(x, c->tegra_device_id_pos, "edgegpu.tegra.deviceId",
				      "invalid device ID %s: letters, digits and \"_.:-\" between "
				      "a first and a last letter or digit, no \"::\", at most %d "
				      "characters",
				      config_quote(q, sizeof(q), c->tegra_device_id),
				      GPU_UUID_MAX - 1);
	for (size_t i = 0; i < c->time_slicing.n_resources && r >= 0; i++) {
		(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices", i);
		r = check_named_refs(x, c, &c->time_slicing.resources[i].devices, key);
	}
	if (r >= 0)
		r = check_named_refs(x, c, &c->gpumem.devices, "edgegpu.sharing.memory.devices");
	return r;
}

int config_check(struct ctx *x, struct config *c)
{
	int r = check_tegra(x, c);

	if (r >= 0)
		r = check_time_slicing(x, c);
	if (r >= 0)
		r = check_gpumem(x, c);
	return r;
}

/* Fits in sockaddr_un.sun_path with its NUL? */
static bool sun_path_fits(const char *path)
{
	return strlen(path) <= CONFIG_SOCKET_PATH_MAX;
}

static int socket_too_long(struct ctx *x, const char *key, const char *names, const char *what,
			   const char *path)
{
	return config_pos_err(
		x, (struct config_pos){ 0 }, key,
		"the %s \"%s\" is %zu bytes, longer than the %d a unix socket path can hold "
		"(sun_path); set a shorter %s",
		what, path, strlen(path), CONFIG_SOCKET_PATH_MAX, names);
}

/*
 * Every resource name this config can advertise: nvidia.com/gpu, the resources.gpus names, the
 * time-slicing names and the gpumem name. Which of them are used depends on the GPUs, so each
 * is checked: the longest socket path decides.
 */
static int check_plugin_sockets(struct ctx *x, const struct config *c)
{
	const char *longest = NULL;
	char *worst = NULL;
	size_t n_names = 1 + c->n_gpus + c->time_slicing.n_resources + 1;
	int r = 0;

	for (size_t i = 0; i < n_names; i++) {
		const char *name = NULL;
		char *sock, *path;

		if (i == 0)
			name = CONFIG_DEFAULT_RESOURCE;
		else if (i <= c->n_gpus)
			name = c->gpus[i - 1].name;
		else if (i <= c->n_gpus + c->time_slicing.n_resources)
			name = config_ts_resource_name(
				&c->time_slicing.resources[i - 1 - c->n_gpus]);
		else if (c->gpumem.devices.n_refs)
			name = c->gpumem.resource_name;
		if (!name)
			continue;
		sock = config_socket_name(name);
		path = sock ? path_join(c->device_plugin_path, sock) : NULL;
		free(sock);
		if (!path) {
			r = -ENOMEM;
			goto out;
		}
		if (!worst || strlen(path) > strlen(worst)) {
			free(worst);
			worst = path;
			longest = name;
		} else {
			free(path);
		}
	}
	if (worst && !sun_path_fits(worst)) {
		char what[128];

		(void)snprintf(what, sizeof(what), "plugin socket of %s", longest);
		r = socket_too_long(
			x, "edgegpu.devicePluginPath",
			"edgegpu.devicePluginPath (--device-plugin-path, DEVICE_PLUGIN_PATH)", what,
			worst);
	}
out:
	free(worst);
	return r;
}

/* The metrics address must parse: a bad one can never work. */
static int check_metrics_address(struct ctx *x, const struct config *c)
{
	struct sockaddr_storage sa;
	socklen_t len;
	char *err = NULL;
	bool all;
	int r;

	if (!c->metrics.address || !*c->metrics.address ||
	    address_parse(c->metrics.address, &sa, &len, &all, &err) == 0)
		return 0;
	r = config_pos_err(x, c->metrics.address_pos, "edgegpu.metrics.address", "%s",
			   err ? err : "not an address");
	free(err);
	return r;
}

/* The sockets we serve or dial must fit in sun_path: a config where one cannot never works. */
static int check_socket_paths(struct ctx *x, const struct config *c, const char *kubelet_socket)
{
	int r;

	r = check_plugin_sockets(x, c);
	if (r >= 0 && kubelet_socket && *kubelet_socket && !sun_path_fits(kubelet_socket))
		r = socket_too_long(
			x, c->kubelet_socket ? "edgegpu.kubeletSocket" : "edgegpu.devicePluginPath",
			c->kubelet_socket ?
				"edgegpu.kubeletSocket (--kubelet-socket, KUBELET_SOCKET)" :
				"edgegpu.devicePluginPath (--device-plugin-path, DEVICE_PLUGIN_PATH), or "
				"set edgegpu.kubeletSocket",
			"kubelet socket", kubelet_socket);
	/* Dialled only for gpumem placement: mask. */
	if (r >= 0 && c->gpumem.devices.n_refs && c->gpumem.placement == CONFIG_PLACEMENT_MASK &&
	    c->pod_resources_socket && *c->pod_resources_socket &&
	    !sun_path_fits(c->pod_resources_socket))
		r = socket_too_long(
			x, "edgegpu.podResourcesSocket",
			"edgegpu.podResourcesSocket (--pod-resources-socket, POD_RESOURCES_SOCKET)",
			"pod-resources socket", c->pod_resources_socket);
	return r;
}

int config_validate(struct config *c, struct config_diag *d)
{
	struct ctx x = { .d = d, .file = c->config_file };
	char *dev_root = NULL, *kubelet_socket = NULL;
	int r;

	r = config_check(&x, c);
	if (r < 0)
		return r;
	if (x.n_errors > 0)
		return -EINVAL;
	if (!c->kubelet_socket) {
		kubelet_socket = path_join(c->device_plugin_path, "kubelet.sock");
		if (!kubelet_socket)
			return -ENOMEM;
	}
	r = check_socket_paths(&x, c, kubelet_socket ? kubelet_socket : c->kubelet_socket);
	if (r >= 0)
		r = check_metrics_address(&x, c);
	if (r >= 0 && x.n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		free(kubelet_socket);
		return r;
	}
	if (!c->dev_root && !(dev_root = (c->driver_root ? strdup(c->driver_root) : NULL))) {
		free(kubelet_socket);
		return -ENOMEM;
	}
	if (dev_root)
		c->dev_root = dev_root;
	if (kubelet_socket)
		c->kubelet_socket = kubelet_socket;
	return 0;
}

char *config_socket_name(const char *name)
{
	const char *base = name;
	char *s = NULL;

	if (strncmp(name, "nvidia.com/", 11) == 0)
		base = name + 11;
	if (asprintf(&s, "nvidia-%s.sock", base) < 0)
		return NULL;
	for (char *p = s; *p; p++)
		if (*p == '/')
			*p = '-';
	return s;
}
