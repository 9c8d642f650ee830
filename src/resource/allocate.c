#include "allocate.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "deviceplugin.pb-c.h"
#include "devnode.h"
#include "gpu.h"
#include "pbwire.h"

const char *alloc_gpu_id(enum alloc_id_strategy s, const struct gpu_device *g, char *buf,
			 size_t size)
{
	if (s == ALLOC_ID_INDEX)
		(void)snprintf(buf, size, "%u", g->index);
	else
		(void)snprintf(buf, size, "%s", g->uuid);
	return buf;
}

const char *alloc_cdi_name(const struct alloc_opts *o, const struct gpu_device *g, char *buf,
			   size_t size)
{
	char id[GPU_UUID_MAX];

	(void)snprintf(buf, size, "%s=%s", o->cdi_kind ? o->cdi_kind : ALLOC_CDI_KIND_DEFAULT,
		       alloc_gpu_id(o->id_strategy, g, id, sizeof(id)));
	return buf;
}

/* Every string that goes into the response passes through here (kubelet-contract.md P13). */
static int dup_utf8(const char *s, char **ret)
{
	char *d;

	if (!utf8_valid(s))
		return -EINVAL;
	d = strdup(s);
	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

static void free_str(char *s)
{
	if (s && s != protobuf_c_empty_string)
		free(s);
}

/*
 * The arrays of a response are sized once, up front, from the request (so no realloc):
 * these are the capacities, checked by assert when an entry is added.
 */
struct builder {
	V1beta1__ContainerAllocateResponse *r;
	size_t cap_envs, cap_mounts, cap_devices, cap_cdi;
};

static int set_env(struct builder *b, const char *key, const char *value)
{
	V1beta1__ContainerAllocateResponse *r = b->r;
	V1beta1__ContainerAllocateResponse__EnvsEntry *e = NULL;
	char *k = NULL, *v = NULL;
	int ret;

	ret = dup_utf8(value, &v);
	if (ret < 0)
		return ret;
	/* A map: a second value for a key replaces the first (volume-mounts after envvar). */
	for (size_t i = 0; i < r->n_envs; i++)
		if (streq(r->envs[i]->key, key)) {
			free_str(r->envs[i]->value);
			r->envs[i]->value = v;
			return 0;
		}
	ret = dup_utf8(key, &k);
	if (ret < 0)
		goto out_free;
	e = malloc(sizeof(*e));
	if (!e) {
		ret = -ENOMEM;
		goto out_free;
	}
	*e = (V1beta1__ContainerAllocateResponse__EnvsEntry)
		V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
	e->key = k;
	e->value = v;
	assert(r->n_envs < b->cap_envs);
	r->envs[r->n_envs++] = e;
	return 0;
out_free:
	free(k);
	free(v);
	return ret;
}

static int add_mount(struct builder *b, const char *container_path, const char *host_path,
		     bool read_only)
{
	V1beta1__Mount *m = NULL;
	char *c = NULL, *h = NULL;
	int r;

	r = dup_utf8(container_path, &c);
	if (r < 0)
		goto out_free;
	r = dup_utf8(host_path, &h);
	if (r < 0)
		goto out_free;
	m = malloc(sizeof(*m));
	if (!m) {
		r = -ENOMEM;
		goto out_free;
	}
	*m = (V1beta1__Mount)V1BETA1__MOUNT__INIT;
	m->container_path = c;
	m->host_path = h;
	m->read_only = read_only;
	assert(b->r->n_mounts < b->cap_mounts);
	b->r->mounts[b->r->n_mounts++] = m;
	return 0;
out_free:
	free(c);
	free(h);
	return r;
}

/*
 * Adds a "rw" DeviceSpec for @path, the host's node under @dev_root; @must_exist: only if it
 * is there as seen from here, under @look_root (devnode_present()).
 */
static int add_device(struct builder *b, const char *look_root, const char *dev_root,
		      const char *path, bool must_exist)
{
	V1beta1__DeviceSpec *d = NULL;
	char *c = NULL, *h = NULL, *p = NULL;
	int r;

	if (must_exist) {
		r = devnode_present(look_root, path);
		if (r <= 0)
			return r;
	}
	h = root_join(dev_root, path);
	if (!h)
		return -ENOMEM;
	if (!utf8_valid(h)) {
		r = -EINVAL;
		goto out_free;
	}
	r = dup_utf8(path, &c);
	if (r < 0)
		goto out_free;
	p = strdup("rw");
	d = malloc(sizeof(*d));
	if (!p || !d) {
		r = -ENOMEM;
		goto out_free;
	}
	*d = (V1beta1__DeviceSpec)V1BETA1__DEVICE_SPEC__INIT;
	d->container_path = c;
	d->host_path = h;
	d->permissions = p;
	assert(b->r->n_devices < b->cap_devices);
	b->r->devices[b->r->n_devices++] = d;
	return 0;
out_free:
	free(d);
	free(p);
	free(c);
	free(h);
	return r;
}

static int add_cdi_device(struct builder *b, const char *name)
{
	V1beta1__CDIDevice *d = NULL;
	char *n = NULL;
	int r;

	r = dup_utf8(name, &n);
	if (r < 0)
		return r;
	d = malloc(sizeof(*d));
	if (!d) {
		free(n);
		return -ENOMEM;
	}
	*d = (V1beta1__CDIDevice)V1BETA1__CDIDEVICE__INIT;
	d->name = n;
	assert(b->r->n_cdi_devices < b->cap_cdi);
	b->r->cdi_devices[b->r->n_cdi_devices++] = d;
	return 0;
}

/* A random (version 4) UUID, lowercase, 36 characters plus NUL. */
static int uuid4(char buf[static 37])
{
	uint8_t u[16];
	size_t got = 0;

	while (got < sizeof(u)) {
		ssize_t n = getrandom(u + got, sizeof(u) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
	(void)snprintf(buf, 37,
		       "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		       u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		       u[13], u[14], u[15]);
	return 0;
}

static int add_annotation(struct builder *b, const char *prefix, const char *value)
{
	V1beta1__ContainerAllocateResponse__AnnotationsEntry *e = NULL;
	char *k = NULL, *v = NULL;
	char u[37];
	int r;

	r = uuid4(u);
	if (r < 0)
		return r;
	if (!utf8_valid(prefix))
		return -EINVAL;
	if (asprintf(&k, "%snvidia-device-plugin_%s", prefix, u) < 0)
		return -ENOMEM;
	r = dup_utf8(value, &v);
	if (r < 0)
		goto out_free;
	e = malloc(sizeof(*e));
	if (!e) {
		r = -ENOMEM;
		goto out_free;
	}
	*e = (V1beta1__ContainerAllocateResponse__AnnotationsEntry)
		V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ANNOTATIONS_ENTRY__INIT;
	e->key = k;
	e->value = v;
	b->r->annotations[b->r->n_annotations++] = e;
	return 0;
out_free:
	free(k);
	free(v);
	return r;
}

/* Joins @strs with commas into a heap string. */
static char *join(char *const *strs, size_t n)
{
	struct buf out = { 0 };

	for (size_t i = 0; i < n; i++)
		if ((i > 0 && buf_append(&out, ",", 1) < 0) ||
		    buf_append(&out, strs[i], strlen(strs[i])) < 0)
			goto fail;
	if (buf_append(&out, "", 1) < 0)
		goto fail;
	return (char *)out.data;
fail:
	buf_release(&out);
	return NULL;
}

static int add_extra_env(struct builder *b, const char *entry)
{
	const char *eq = strchr(entry, '=');
	char *key = NULL;
	int r;

	if (!eq || eq == entry)
		return -EINVAL;
	key = strndup(entry, (size_t)(eq - entry));
	if (!key)
		return -ENOMEM;
	r = set_env(b, key, eq + 1);
	free(key);
	return r;
}

static int add_mem_limits(struct builder *b, const uint64_t *limits, size_t n)
{
	char key[64], value[32];
	uint64_t total = 0;
	int r;

	for (size_t i = 0; i < n; i++) {
		if (total + limits[i] < total)
			return -EINVAL;
		total += limits[i];
	}
	(void)snprintf(value, sizeof(value), "%" PRIu64, total);
	r = set_env(b, "EDGEGPU_GPUMEM_LIMIT_MIB", value);
	if (r < 0)
		return r;
	/* HAMi-core's variable, indexed by the device's position inside the container. */
	for (size_t i = 0; i < n; i++) {
		(void)snprintf(key, sizeof(key), "CUDA_DEVICE_MEMORY_LIMIT_%zu", i);
		(void)snprintf(value, sizeof(value), "%" PRIu64 "m", limits[i]);
		r = set_env(b, key, value);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_extras(struct builder *b, const struct alloc_extra *extra, const uint64_t *limits,
		      size_t n_uniq)
{
	int r;

	if (extra->mem_limit_mib) {
		r = add_mem_limits(b, limits, n_uniq);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < extra->n_env; i++) {
		r = add_extra_env(b, extra->env[i]);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < extra->n_mounts; i++) {
		const struct alloc_mount *m = &extra->mounts[i];

		if (!m->container_path || m->container_path[0] != '/' || !m->host_path ||
		    m->host_path[0] != '/')
			return -EINVAL;
		r = add_mount(b, m->container_path, m->host_path, m->read_only);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * De-duplicates @gpus by UUID into @uniq (first occurrence kept) and sums the per-entry
 * memory limits per GPU into @limits (when @mem is set). Returns the number of GPUs or -EINVAL
 * on overflow.
 */
static ssize_t dedup_gpus(const struct gpu_device *const *gpus, size_t n, const uint64_t *mem,
			  const struct gpu_device **uniq, uint64_t *limits)
{
	size_t n_uniq = 0;

	for (size_t i = 0; i < n; i++) {
		size_t j;

		assert(gpus[i]);
		for (j = 0; j < n_uniq; j++)
			if (uniq[j] == gpus[i] || streq(uniq[j]->uuid, gpus[i]->uuid))
				break;
		if (j == n_uniq) {
			uniq[n_uniq] = gpus[i];
			limits[n_uniq] = 0;
			n_uniq++;
		}
		if (mem) {
			if (limits[j] + mem[i] < limits[j])
				return -EINVAL;
			limits[j] += mem[i];
		}
	}
	return (ssize_t)n_uniq;
}

/*
 * Sizes the arrays for the worst case of this request (see struct builder); @n_globbed: the
 * nodes the patterns matched, known only once they are expanded.
 */
static int builder_init(struct builder *b, const struct gpu_device *const *uniq, size_t n_uniq,
			size_t n_globbed, const struct alloc_extra *extra)
{
	V1beta1__ContainerAllocateResponse *r;
	size_t n_nodes = n_globbed;

	assert(n_uniq > 0);
	for (size_t i = 0; i < n_uniq; i++)
		n_nodes += MIN(uniq[i]->n_nodes, GPU_NODES_MAX) +
			   (uniq[i]->container ? uniq[i]->container->n_ctl_nodes : 0);

	b->r = r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	*r = (V1beta1__ContainerAllocateResponse)V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
	b->cap_envs = 2 + n_uniq + extra->n_env;
	b->cap_mounts = n_uniq + extra->n_mounts;
	b->cap_devices = n_nodes;
	b->cap_cdi = n_uniq;
	r->envs = calloc(b->cap_envs, sizeof(V1beta1__ContainerAllocateResponse__EnvsEntry *));
	r->mounts = calloc(b->cap_mounts, sizeof(V1beta1__Mount *));
	r->devices = calloc(b->cap_devices + 1, sizeof(V1beta1__DeviceSpec *));
	r->annotations = calloc(1, sizeof(V1beta1__ContainerAllocateResponse__AnnotationsEntry *));
	r->cdi_devices = calloc(b->cap_cdi, sizeof(V1beta1__CDIDevice *));
	if (!r->envs || !r->mounts || !r->devices || !r->annotations || !r->cdi_devices)
		return -ENOMEM;
	return 0;
}

/* Is @path a control node of a GPU before @i with a different container description? */
static bool ctl_node_added(const struct gpu_device *const *uniq, size_t i, const char *path)
{
	for (size_t j = 0; j < i; j++) {
		const struct gpu_container *c = uniq[j]->container;

		for (size_t k = 0; c && c != uniq[i]->container && k < c->n_ctl_nodes; k++)
			if (streq(c->ctl_nodes[k], path))
				return true;
	}
	return false;
}

/* Is @path one of the @n GPUs' own nodes? */
static bool own_node(const struct gpu_device *const *uniq, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < MIN(uniq[i]->n_nodes, GPU_NODES_MAX); k++)
			if (streq(uniq[i]->nodes[k], path))
				return true;
	return false;
}

/* Is @path a control node or an own node of one of the @n GPUs? */
static bool node_named(const struct gpu_device *const *uniq, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++) {
		const struct gpu_container *c = uniq[i]->container;

		for (size_t k = 0; c && k < c->n_ctl_nodes; k++)
			if (streq(c->ctl_nodes[k], path))
				return true;
	}
	return own_node(uniq, n, path);
}

/*
 * The control nodes the GPUs' backends name, each once, in the order of the first GPU that
 * names it, and only those present under @dev_root; then the nodes their patterns matched
 * (@globbed, sorted) that are not named otherwise; then each GPU's own nodes.
 */
static int add_device_nodes(struct builder *b, const char *look_root, const char *dev_root,
			    const struct gpu_device *const *uniq, size_t n,
			    const struct devnode_set *globbed)
{
	int r;

	for (size_t i = 0; i < n; i++) {
		const struct gpu_container *c = uniq[i]->container;
		bool seen = false;

		for (size_t j = 0; c && j < i && !seen; j++)
			seen = uniq[j]->container == c;
		for (size_t k = 0; c && !seen && k < c->n_ctl_nodes; k++) {
			/* Named twice (another backend's, or a GPU's own node): delivered once. */
			if (ctl_node_added(uniq, i, c->ctl_nodes[k]) ||
			    own_node(uniq, n, c->ctl_nodes[k]))
				continue;
			r = add_device(b, look_root, dev_root, c->ctl_nodes[k], true);
			if (r < 0)
				return r;
		}
	}
	for (size_t i = 0; i < globbed->n; i++) {
		if (node_named(uniq, n, globbed->paths[i]))
			continue;
		/* Present when expanded, a moment ago: not stat()ed twice. */
		r = add_device(b, look_root, dev_root, globbed->paths[i], false);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < MIN(uniq[i]->n_nodes, GPU_NODES_MAX); k++) {
			r = add_device(b, look_root, dev_root, uniq[i]->nodes[k], false);
			if (r < 0)
				return r;
		}
	return 0;
}

static int add_cdi(struct builder *b, const struct alloc_opts *o, unsigned strategies,
		   const struct gpu_device *const *uniq, size_t n)
{
	char **names = NULL, *value = NULL;
	size_t n_names = 0;
	int r = -ENOMEM;

	names = calloc(n, sizeof(*names));
	if (!names)
		goto out;
	for (; n_names < n; n_names++) {
		char id[GPU_UUID_MAX];

		if (asprintf(&names[n_names], "%s=%s",
			     o->cdi_kind ? o->cdi_kind : ALLOC_CDI_KIND_DEFAULT,
			     alloc_gpu_id(o->id_strategy, uniq[n_names], id, sizeof(id))) < 0)
			goto out;
	}
	if (strategies & ALLOC_CDI_ANNOTATIONS) {
		value = join(names, n);
		if (!value)
			goto out;
		r = add_annotation(b,
				   o->cdi_annotation_prefix ? o->cdi_annotation_prefix :
							      ALLOC_CDI_ANNOTATION_PREFIX,
				   value);
		if (r < 0)
			goto out;
	}
	if (strategies & ALLOC_CDI_CRI)
		for (size_t i = 0; i < n; i++) {
			r = add_cdi_device(b, names[i]);
			if (r < 0)
				goto out;
		}
	r = 0;
out:
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	free(value);
	return r;
}

static int add_devices(struct builder *b, const struct alloc_opts *o, unsigned strategies,
		       const struct gpu_device *const *uniq, size_t n,
		       const struct devnode_set *globbed)
{
	char **ids = NULL, *value = NULL;
	size_t n_ids = 0;
	int r = -ENOMEM;

	ids = calloc(n, sizeof(*ids));
	if (!ids)
		goto out;
	for (; n_ids < n; n_ids++) {
		ids[n_ids] = malloc(GPU_UUID_MAX);
		if (!ids[n_ids])
			goto out;
		alloc_gpu_id(o->id_strategy, uniq[n_ids], ids[n_ids], GPU_UUID_MAX);
	}
	if (strategies & ALLOC_ENVVAR) {
		value = join(ids, n);
		if (!value)
			goto out;
		r = set_env(b, "NVIDIA_VISIBLE_DEVICES", value);
		if (r < 0)
			goto out;
	}
	/* Applied after envvar, so envvar,volume-mounts behaves like volume-mounts (2.2). */
	if (strategies & ALLOC_VOLUME_MOUNTS) {
		r = set_env(b, "NVIDIA_VISIBLE_DEVICES", ALLOC_VOLUME_MOUNTS_DIR);
		if (r < 0)
			goto out;
		for (size_t i = 0; i < n; i++) {
			char path[sizeof(ALLOC_VOLUME_MOUNTS_DIR) + GPU_UUID_MAX + 1];

			(void)snprintf(path, sizeof(path), ALLOC_VOLUME_MOUNTS_DIR "/%s", ids[i]);
			r = add_mount(b, path, "/dev/null", false);
			if (r < 0)
				goto out;
		}
	}
	if (o->pass_device_specs) {
		r = add_device_nodes(b, alloc_look_dev_root(o), o->dev_root, uniq, n, globbed);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	for (size_t i = 0; i < n_ids; i++)
		free(ids[i]);
	free(ids);
	free(value);
	return r;
}

/*
 * Expands the node patterns of each container description of the @n GPUs (each description
 * once) under @dev_root into @set.
 */
static int glob_nodes(const char *dev_root, const struct gpu_device *const *uniq, size_t n,
		      struct devnode_set *set)
{
	for (size_t i = 0; i < n; i++) {
		const struct gpu_container *c = uniq[i]->container;
		bool seen = false;
		int r;

		for (size_t j = 0; c && j < i && !seen; j++)
			seen = uniq[j]->container == c;
		if (!c || seen || c->n_node_globs == 0)
			continue;
		r = devnode_set_glob(set, dev_root, c->node_globs, c->n_node_globs);
		if (r < 0)
			return r;
	}
	return 0;
}

int alloc_response_new(const struct alloc_opts *o, const struct gpu_device *const *gpus,
		       size_t n_gpus, const struct alloc_extra *extra,
		       V1beta1__ContainerAllocateResponse **ret)
{
	static const struct alloc_extra no_extra = { 0 };
	unsigned strategies = o->strategies ? o->strategies : ALLOC_ENVVAR;
	bool device_specs = o->pass_device_specs &&
			    (strategies & (ALLOC_ENVVAR | ALLOC_VOLUME_MOUNTS));
	const struct gpu_device **uniq = NULL;
	struct devnode_set globbed = { 0 };
	struct builder b = { 0 };
	uint64_t *limits = NULL;
	ssize_t n_uniq;
	int r;

	if (n_gpus == 0)
		return -EINVAL;
	if (!extra)
		extra = &no_extra;
	uniq = calloc(n_gpus, sizeof(const struct gpu_device *));
	limits = calloc(n_gpus, sizeof(*limits));
	if (!uniq || !limits) {
		r = -ENOMEM;
		goto out;
	}
	n_uniq = dedup_gpus(gpus, n_gpus, extra->mem_limit_mib, uniq, limits);
	if (n_uniq < 0) {
		r = (int)n_uniq;
		goto out;
	}
	/* Only DeviceSpecs use the patterns: a CDI-only or plain envvar response skips the glob. */
	if (device_specs) {
		r = glob_nodes(alloc_look_dev_root(o), uniq, (size_t)n_uniq, &globbed);
		if (r < 0)
			goto out;
	}
	r = builder_init(&b, uniq, (size_t)n_uniq, globbed.n, extra);
	if (r < 0)
		goto out;
	if (strategies & (ALLOC_CDI_ANNOTATIONS | ALLOC_CDI_CRI)) {
		r = add_cdi(&b, o, strategies, uniq, (size_t)n_uniq);
		if (r < 0)
			goto out;
	}
	/* CDI-only: no env, no mounts and no DeviceSpecs even with passDeviceSpecs (1.5). */
	if (strategies & (ALLOC_ENVVAR | ALLOC_VOLUME_MOUNTS)) {
		r = add_devices(&b, o, strategies, uniq, (size_t)n_uniq, &globbed);
		if (r < 0)
			goto out;
	}
	r = add_extras(&b, extra, limits, (size_t)n_uniq);
	if (r < 0)
		goto out;
	*ret = b.r;
	b.r = NULL;
out:
	alloc_response_free(b.r);
	devnode_set_release(&globbed);
	free(uniq);
	free(limits);
	return r;
}

V1beta1__ContainerAllocateResponse *alloc_response_free(V1beta1__ContainerAllocateResponse *r)
{
	if (!r)
		return NULL;
	for (size_t i = 0; i < r->n_envs; i++) {
		free_str(r->envs[i]->key);
		free_str(r->envs[i]->value);
		free(r->envs[i]);
	}
	for (size_t i = 0; i < r->n_mounts; i++) {
		free_str(r->mounts[i]->container_path);
		free_str(r->mounts[i]->host_path);
		free(r->mounts[i]);
	}
	for (size_t i = 0; i < r->n_devices; i++) {
		free_str(r->devices[i]->container_path);
		free_str(r->devices[i]->host_path);
		free_str(r->devices[i]->permissions);
		free(r->devices[i]);
	}
	for (size_t i = 0; i < r->n_annotations; i++) {
		free_str(r->annotations[i]->key);
		free_str(r->annotations[i]->value);
		free(r->annotations[i]);
	}
	for (size_t i = 0; i < r->n_cdi_devices; i++) {
		free_str(r->cdi_devices[i]->name);
		free(r->cdi_devices[i]);
	}
	free(r->envs);
	free(r->mounts);
	free(r->devices);
	free(r->annotations);
	free(r->cdi_devices);
	free(r);
	return NULL;
}

bool alloc_uses_cdi(const struct alloc_opts *o)
{
	return (o->strategies & (ALLOC_CDI_ANNOTATIONS | ALLOC_CDI_CRI)) != 0;
}

/* protobuf-c reports any failure as NULL: this allocator remembers whether memory ran out. */
struct alloc_watch {
	ProtobufCAllocator a;
	bool failed;
};

static void *watch_alloc(void *data, size_t size)
{
	void *p = malloc(size);

	if (!p)
		((struct alloc_watch *)data)->failed = true;
	return p;
}

static void watch_free(void *data, void *p)
{
	free(p);
}

static void id_printable(const uint8_t *id, size_t len, char *out, size_t size)
{
	size_t o = 0;

	if (size == 0)
		return;
	for (size_t i = 0; i < len && i < 128 && o + 3 < size; i++) {
		if (id[i] == 0) {
			out[o++] = '\\';
			out[o++] = '0';
		} else {
			out[o++] = (char)id[i];
		}
	}
	out[o] = 0;
}

/* Finds a device ID with a NUL byte. Returns 0, -EINVAL (@bad/@badlen set) or -EBADMSG. */
static int find_nul_id(const uint8_t *req, size_t len, const uint8_t **bad, size_t *badlen)
{
	struct pb_reader rd, sub;
	struct pb_field f, g;
	int r, q;

	pb_reader_init(&rd, req, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		if (f.number != 1 || f.wire != PB_LEN)
			continue;
		pb_reader_init(&sub, f.data, f.len);
		while ((q = pb_next(&sub, &g)) > 0) {
			if (g.number == 1 && g.wire == PB_LEN && memchr(g.data, 0, g.len)) {
				*bad = g.data;
				*badlen = g.len;
				return -EINVAL;
			}
		}
		if (q < 0)
			return q;
	}
	return r;
}

int alloc_request_unpack(const uint8_t *req, size_t len, struct V1beta1__AllocateRequest **ret,
			 char *reterr_id, size_t size)
{
	struct alloc_watch w = { .a = { .alloc = watch_alloc, .free = watch_free } };
	V1beta1__AllocateRequest *m;
	const uint8_t *bad = NULL;
	size_t badlen = 0;
	int r;

	w.a.allocator_data = &w;
	r = find_nul_id(req, len, &bad, &badlen);
	if (r == -EINVAL && reterr_id)
		id_printable(bad, badlen, reterr_id, size);
	if (r < 0)
		return r;
	m = v1beta1__allocate_request__unpack(&w.a, len, req);
	if (!m)
		return w.failed ? -ENOMEM : -EBADMSG;
	*ret = m;
	return 0;
}
