#include "cdi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devnode.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu.h"
#include "log.h"
#include "mount-specs.h"

#define LOG_MODULE "cdi"

#define CDI_VERSION "0.5.0"

struct spec_mount {
	char *host_path;
	char *container_path;
};

struct spec {
	const char *look_root;	       /* where the driver files are looked for, from here */
	const char *look_dev_root;     /* where the control nodes are looked for, from here */
	const char *host_root;	       /* the same driver root on the host: the spec's host paths */
	const char *host_dev_root;     /* the same dev root on the host */
	const struct gpu_container *c; /* the backend's files and nodes (NULL: none) */
	struct spec_mount *mounts;     /* each container path once */
	size_t n_mounts, cap_mounts;
	const char **lib_dirs; /* container dirs holding mounted libraries */
	size_t n_lib_dirs;
	/* Common nodes besides the control nodes: pattern and CSV `dev` matches (devnode.h). */
	struct devnode_set nodes;
};

static int spec_init(struct spec *s)
{
	size_t n_dirs = s->c ? s->c->n_lib_dirs : 0;

	s->lib_dirs = calloc(n_dirs + 1, sizeof(*s->lib_dirs));
	return s->lib_dirs ? 0 : -ENOMEM;
}

static void spec_release(struct spec *s)
{
	for (size_t i = 0; i < s->n_mounts; i++) {
		free(s->mounts[i].host_path);
		free(s->mounts[i].container_path);
	}
	s->n_mounts = s->cap_mounts = 0;
	s->mounts = mfree(s->mounts);
	s->lib_dirs = mfree(s->lib_dirs);
	devnode_set_release(&s->nodes);
}

/*
 * Returns 1 if <root><path> is a regular file, 0 if not, or -ENOMEM. (Device nodes:
 * devnode_present().)
 */
static int exists(const char *root, const char *path)
{
	struct stat st;
	char *p = root_join(root, path);
	int r;

	if (!p)
		return -ENOMEM;
	r = stat(p, &st) == 0 && S_ISREG(st.st_mode);
	free(p);
	return r;
}

/* Mounts <host root>@path at @container_path, unless something is mounted there already. */
static int spec_add_mount(struct spec *s, const char *path, const char *container_path)
{
	struct spec_mount *m;
	int r;

	for (size_t i = 0; i < s->n_mounts; i++)
		if (streq(s->mounts[i].container_path, container_path))
			return 0;
	r = array_grow((void **)&s->mounts, &s->cap_mounts, s->n_mounts, sizeof(*s->mounts));
	if (r < 0)
		return r;
	m = &s->mounts[s->n_mounts];
	m->host_path = root_join(s->host_root, path);
	m->container_path = strdup(container_path);
	if (!m->host_path || !m->container_path) {
		free(m->host_path);
		free(m->container_path);
		return -ENOMEM;
	}
	s->n_mounts++;
	return 0;
}

/*
 * Finds <dir>/@file under s->look_root in the first of @dirs that has it and mounts the host's
 * copy (under s->host_root) at the same path in the container (and at <dir>/@soname when set).
 * Returns 1 if found, 0 if not, or -ENOMEM; sets *@ret_dir to the directory.
 */
static int spec_find_mount(struct spec *s, const char *const *dirs, size_t n_dirs, const char *file,
			   const char *soname, const char **ret_dir)
{
	char path[PATH_MAX], soname_path[PATH_MAX];

	for (size_t i = 0; i < n_dirs; i++) {
		int r;

		(void)snprintf(path, sizeof(path), "%s/%s", dirs[i], file);
		r = exists(s->look_root, path);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		r = spec_add_mount(s, path, path);
		if (r < 0)
			return r;
		if (soname) {
			(void)snprintf(soname_path, sizeof(soname_path), "%s/%s", dirs[i], soname);
			r = spec_add_mount(s, path, soname_path);
			if (r < 0)
				return r;
		}
		if (ret_dir)
			*ret_dir = dirs[i];
		return 1;
	}
	return 0;
}

static void spec_add_lib_dir(struct spec *s, const char *dir)
{
	for (size_t i = 0; i < s->n_lib_dirs; i++)
		if (streq(s->lib_dirs[i], dir))
			return;
	s->lib_dirs[s->n_lib_dirs++] = dir;
}

static int spec_find_files(struct spec *s, const char *version, char **reterr)
{
	const struct gpu_container *c = s->c;
	char file[256];
	int r;

	for (size_t i = 0; c && i < c->n_libs; i++) {
		const char *dir = NULL;

		(void)snprintf(file, sizeof(file), "%s.%s", c->libs[i].name, version);
		r = spec_find_mount(s, c->lib_dirs, c->n_lib_dirs, file, c->libs[i].soname, &dir);
		if (r < 0)
			return r;
		if (r == 0 && c->libs[i].required) {
			if (streq(s->look_root, s->host_root))
				return set_error(reterr, -ENOENT, "failed to locate %s under %s",
						 file, s->look_root);
			return set_error(reterr, -ENOENT,
					 "failed to locate %s under %s (the container driver root, "
					 "where the host's %s is expected to be mounted)",
					 file, s->look_root, s->host_root);
		}
		if (r > 0)
			spec_add_lib_dir(s, dir);
	}
	for (size_t i = 0; c && i < c->n_bins; i++) {
		r = spec_find_mount(s, c->bin_dirs, c->n_bin_dirs, c->bins[i], NULL, NULL);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Is the CSV entry @m there, inside the look root @root_fd (links resolved inside it), as its
 * type wants: a regular file for lib, a directory for dir, either for sym (a dangling link is
 * not there)? Returns 1, 0 or -ENOMEM.
 */
static int spec_csv_present(int root_fd, const struct mount_spec *m)
{
	struct stat st;
	int fd, r;

	fd = root_open(root_fd, m->path, 0, NULL);
	if (fd == -ENOMEM)
		return fd;
	if (fd < 0)
		return 0;
	r = fstat(fd, &st);
	fd_close(fd);
	if (r < 0)
		return 0;
	switch (m->type) {
	case MOUNT_SPEC_LIB:
		return S_ISREG(st.st_mode);
	case MOUNT_SPEC_DIR:
		return S_ISDIR(st.st_mode);
	case MOUNT_SPEC_SYM:
		return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
	default:
		return 0;
	}
}

/*
 * The backend's CSV mount specs (gpu_container.mount_specs_dir, under the look root): lib, sym
 * and dir entries that are there become mounts at the same path, dev entries are expanded
 * into s->nodes like node patterns. Only -ENOMEM fails: a root or directory that cannot be
 * read is logged (mount-specs.h) and leaves the spec without those files.
 */
static int spec_read_mount_specs(struct spec *s)
{
	struct mount_specs ms = { 0 };
	const char **devs = NULL;
	size_t n_devs = 0;
	int root_fd, r;

	root_fd = root_dir_open(s->look_root);
	if (root_fd < 0) {
		(void)log_warn_errno(root_fd, "driver root unreadable, CSV mount specs not read",
				     "root=%s dir=%s", log_q(s->look_root),
				     log_q(s->c->mount_specs_dir));
		return 0;
	}
	r = mount_specs_read(&ms, root_fd, s->look_root, s->c->mount_specs_dir);
	if (r < 0)
		goto out;
	devs = calloc(ms.n + 1, sizeof(*devs));
	if (!devs) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ms.n; i++) {
		const struct mount_spec *m = &ms.v[i];

		if (m->type == MOUNT_SPEC_DEV) {
			devs[n_devs++] = m->path;
			continue;
		}
		r = spec_csv_present(root_fd, m);
		if (r == 0)
			log_debug("CSV mount spec entry not found, not mounted", "root=%s path=%s",
				  log_q(s->look_root), log_q(m->path));
		if (r > 0)
			r = spec_add_mount(s, m->path, m->path);
		if (r < 0)
			goto out;
	}
	r = devnode_set_glob(&s->nodes, s->look_dev_root, devs, n_devs);
out:
	free(devs);
	mount_specs_release(&ms);
	fd_close(root_fd);
	return r < 0 ? r : 0;
}

/* The backend's node patterns and CSV mount specs, after its libraries and binaries. */
static int spec_find_more(struct spec *s)
{
	int r;

	if (!s->c)
		return 0;
	r = devnode_set_glob(&s->nodes, s->look_dev_root, s->c->node_globs, s->c->n_node_globs);
	if (r >= 0 && s->c->mount_specs_dir)
		r = spec_read_mount_specs(s);
	return r < 0 ? r : 0;
}

/* Every string of the spec goes through here: one that is not UTF-8 fails the spec. */
static void spec_str(struct json_writer *j, const char *v)
{
	if (!utf8_valid(v))
		json_fail(j, -EINVAL);
	json_string(j, v);
}

static void spec_kv(struct json_writer *j, const char *k, const char *v)
{
	json_key(j, k);
	spec_str(j, v);
}

static void spec_device_node(struct json_writer *j, const char *dev_root, const char *path)
{
	char *host = root_join(dev_root, path);

	if (!host) {
		json_fail(j, -ENOMEM);
		return;
	}
	json_object_open(j);
	spec_kv(j, "path", path);
	spec_kv(j, "hostPath", host);
	json_object_close(j);
	free(host);
}

/*
 * A "hooks" list of one hook: opens it up to its args, whose first (argv[0]) is @argv0; the
 * caller adds the others, then closes it with spec_hook_close().
 */
static void spec_hook_open(struct json_writer *j, const char *hook_name, const char *path,
			   const char *argv0)
{
	json_key(j, "hooks");
	json_array_open(j);
	json_object_open(j);
	spec_kv(j, "hookName", hook_name);
	spec_kv(j, "path", path);
	json_key(j, "args");
	json_array_open(j);
	spec_str(j, argv0);
}

static void spec_hook_close(struct json_writer *j)
{
	json_array_close(j); /* args */
	json_object_close(j);
	json_array_close(j); /* hooks */
}

/*
 * The toolkit's createRuntime hook that applies the container's gpumem limit on @g through
 * the driver (one per GPU, as the toolkit's own spec generator emits it): argv[0] is the
 * binary's name, then the subcommand, the host's driver root and the GPU's UUID.
 */
static void spec_memlimit_hook(struct json_writer *j, const struct cdi_opts *o,
			       const char *driver_root, const struct gpu_device *g)
{
	spec_hook_open(j, "createRuntime", o->memlimit_hook_path, "nvidia-cdi-hook");
	spec_str(j, CDI_MEMLIMIT_SUBCOMMAND);
	spec_str(j, "--driver-root");
	spec_str(j, driver_root);
	spec_str(j, "--gpu-id");
	spec_str(j, g->uuid);
	spec_hook_close(j);
}

static void spec_devices(struct json_writer *j, const struct cdi_opts *o,
			 const struct gpu_info *info, const char *driver_root, const char *dev_root)
{
	json_key(j, "devices");
	json_array_open(j);
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];
		char id[GPU_UUID_MAX];

		json_object_open(j);
		spec_kv(j, "name", alloc_gpu_id(o->id_strategy, g, id, sizeof(id)));
		json_key(j, "containerEdits");
		json_object_open(j);
		json_key(j, "deviceNodes");
		json_array_open(j);
		for (unsigned k = 0; k < MIN(g->n_nodes, GPU_NODES_MAX); k++)
			spec_device_node(j, dev_root, g->nodes[k]);
		json_array_close(j);
		if (o->memlimit_hook_path && g->mem_limits == GPU_MEM_LIMITS_SUPPORTED)
			spec_memlimit_hook(j, o, driver_root, g);
		json_object_close(j);
		json_object_close(j);
	}
	json_array_close(j);
}

/* Is @path a GPU's own node (in that device's edits)? */
static bool spec_own_node(const struct gpu_info *info, const char *path)
{
	for (unsigned i = 0; i < info->n_devices; i++)
		for (unsigned k = 0; k < MIN(info->devices[i].n_nodes, GPU_NODES_MAX); k++)
			if (streq(info->devices[i].nodes[k], path))
				return true;
	return false;
}

/* Is @path a control node of the spec or a GPU's own node (in a device's edits)? */
static bool spec_node_named(const struct spec *s, const struct gpu_info *info, const char *path)
{
	for (size_t i = 0; s->c && i < s->c->n_ctl_nodes; i++)
		if (streq(s->c->ctl_nodes[i], path))
			return true;
	return spec_own_node(info, path);
}

static void spec_node(struct json_writer *j, const struct spec *s, bool *any_node, const char *path)
{
	if (!*any_node) {
		json_key(j, "deviceNodes");
		json_array_open(j);
		*any_node = true;
	}
	spec_device_node(j, s->host_dev_root, path);
}

/*
 * The common device nodes: the control nodes present (devnode_present()) that are no GPU's
 * own, in the backend's order; then the pattern and CSV matches (sorted) not named otherwise. No key when none.
 */
static void spec_common_nodes(struct json_writer *j, const struct spec *s,
			      const struct gpu_info *info)
{
	bool any_node = false;

	for (size_t i = 0; s->c && i < s->c->n_ctl_nodes; i++) {
		int r;

		/* A GPU's own node is in that device's edits, not twice in the spec. */
		if (spec_own_node(info, s->c->ctl_nodes[i]))
			continue;
		r = devnode_present(s->look_dev_root, s->c->ctl_nodes[i]);

		if (r < 0)
			json_fail(j, r);
		if (r > 0)
			spec_node(j, s, &any_node, s->c->ctl_nodes[i]);
	}
	for (size_t i = 0; i < s->nodes.n; i++)
		if (!spec_node_named(s, info, s->nodes.paths[i]))
			spec_node(j, s, &any_node, s->nodes.paths[i]);
	if (any_node)
		json_array_close(j);
}

static void spec_common_edits(struct json_writer *j, const struct cdi_opts *o, const struct spec *s,
			      const struct gpu_info *info)
{
	static const char *const options[] = { "ro", "nosuid", "nodev", "bind" };

	json_key(j, "containerEdits");
	json_object_open(j);
	json_key(j, "env");
	json_array_open(j);
	spec_str(j, "NVIDIA_VISIBLE_DEVICES=void");
	json_array_close(j);
	spec_common_nodes(j, s, info);
	json_key(j, "mounts");
	json_array_open(j);
	for (size_t i = 0; i < s->n_mounts; i++) {
		json_object_open(j);
		spec_kv(j, "hostPath", s->mounts[i].host_path);
		spec_kv(j, "containerPath", s->mounts[i].container_path);
		json_key(j, "options");
		json_array_open(j);
		for (size_t k = 0; k < ELEMENTSOF(options); k++)
			spec_str(j, options[k]);
		json_array_close(j);
		json_object_close(j);
	}
	json_array_close(j);
	if (o->ldcache_hook_path && s->n_lib_dirs > 0) {
		spec_hook_open(j, "createContainer", o->ldcache_hook_path, "nvidia-ctk");
		spec_str(j, "hook");
		spec_str(j, "update-ldcache");
		for (size_t i = 0; i < s->n_lib_dirs; i++) {
			spec_str(j, "--folder");
			spec_str(j, s->lib_dirs[i]);
		}
		spec_hook_close(j);
	}
	json_object_close(j);
}

int cdi_spec_render(const struct cdi_opts *o, const struct gpu_info *info, struct buf *out,
		    char **reterr)
{
	const char *driver_root = o->driver_root && *o->driver_root ? o->driver_root : "/";
	const char *dev_root = o->dev_root && *o->dev_root ? o->dev_root : driver_root;
	const char *ver = info->driver_version;
	struct buf b = { 0 };
	struct json_writer j = { .b = &b, .indent = 2 };
	struct spec s = { .host_root = driver_root,
			  .host_dev_root = dev_root,
			  .c = info->container };
	int r;

	/* The version names the libraries' files: needed only where the backend lists some. */
	if ((info->container && info->container->n_libs > 0 && !ver[0]) || strchr(ver, '/') ||
	    !utf8_valid(ver)) {
		return set_error(reterr, -EINVAL, "invalid driver version \"%s\" for the CDI spec",
				 ver);
	}
	for (unsigned i = 0; i < info->n_devices; i++) {
		char id[GPU_UUID_MAX];

		alloc_gpu_id(o->id_strategy, &info->devices[i], id, sizeof(id));
		if (!gpu_cdi_name_valid(id)) {
			return set_error(reterr, -EINVAL, "invalid CDI device name for GPU %u",
					 info->devices[i].index);
		}
	}
	/*
	 * Inside the DaemonSet the host's driver root is mounted at container_driver_root: look
	 * there, and write the host's paths (NVIDIA's transform from containerDriverRoot to
	 * nvidiaDriverRoot). The device nodes are looked for under <container root>/dev when that
	 * is a directory, else under our own /dev (NVIDIA's rule). Without the mount we run on the
	 * host, where the host paths are the ones to look at.
	 */
	s.look_root = devnode_is_dir(o->container_driver_root) ? o->container_driver_root :
								 driver_root;
	s.look_dev_root = devnode_look_root(o->container_driver_root, dev_root);
	r = spec_init(&s);
	if (r == 0)
		r = spec_find_files(&s, ver, reterr);
	if (r == 0)
		r = spec_find_more(&s);
	if (r == -ENOMEM)
		(void)set_error(reterr, r, "out of memory rendering the CDI spec");
	if (r < 0)
		goto out;

	json_object_open(&j);
	spec_kv(&j, "cdiVersion", CDI_VERSION);
	spec_kv(&j, "kind", ALLOC_CDI_KIND_DEFAULT);
	spec_devices(&j, o, info, driver_root, dev_root);
	spec_common_edits(&j, o, &s, info);
	json_object_close(&j);
	r = j.r;
	if (r == 0)
		r = buf_append(&b, "\n", 1);
	if (r == 0)
		r = buf_append(out, b.data, b.len);
	if (r == -EINVAL)
		(void)set_error(reterr, r, "a path for the CDI spec is not valid UTF-8");
	else if (r < 0)
		(void)set_error(reterr, r, "out of memory rendering the CDI spec");
out:
	spec_release(&s);
	buf_release(&b);
	return r;
}

int cdi_hook_has_memory_limits(const char *root, const char *path)
{
	static const char needle[] = CDI_MEMLIMIT_SUBCOMMAND;
	const size_t nlen = sizeof(needle) - 1, piece = (size_t)1 << 20;
	int root_fd = -EBADF, pfd = -EBADF, fd = -EBADF, r;
	uint64_t total = 0;
	size_t have = 0;
	char *buf = NULL;

	root_fd = root_dir_open(root);
	if (root_fd < 0)
		return root_fd;
	r = root_open(root_fd, path, 0, NULL);
	if (r < 0)
		goto out;
	pfd = r;
	r = fd_check_regular(pfd);
	if (r < 0)
		goto out;
	r = fd_reopen(pfd, O_RDONLY | O_NONBLOCK);
	if (r < 0)
		goto out;
	fd = r;
	/* The last nlen - 1 bytes of a piece stay in front of the next: a match across the seam. */
	buf = malloc(piece + nlen);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	r = 0;
	while (total < CDI_HOOK_SCAN_MAX) {
		ssize_t n = read(fd, buf + have, piece);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		have += (size_t)n;
		if (memmem(buf, have, needle, nlen)) {
			r = 1;
			break;
		}
		if (have >= nlen) {
			memmove(buf, buf + have - (nlen - 1), nlen - 1);
			have = nlen - 1;
		}
	}
out:
	free(buf);
	(void)fd_close(fd);
	(void)fd_close(pfd);
	(void)fd_close(root_fd);
	return r;
}

/* Thread-safe strerror: GNU strerror_r returns a pointer into @buf or a static string. */
static const char *errstr(int e, char *buf, size_t size)
{
	return strerror_r(e, buf, size);
}

int cdi_spec_write_file(const char *dir, const void *data, size_t len, char **reterr)
{
	const char *step = "write";
	char *path = NULL, eb[128];
	int r;

	if (!dir)
		dir = CDI_SPEC_DIR;
	r = mkdir_parents(dir, 0755);
	if (r < 0)
		return set_error(reterr, r, "failed to create CDI spec directory %s: %s", dir,
				 errstr(-r, eb, sizeof(eb)));
	path = path_join(dir, CDI_SPEC_FILE_NAME);
	if (!path)
		return set_error(reterr, -ENOMEM, "out of memory writing the CDI spec");
	r = file_write_atomic(path, data, len, 0644, &step);
	if (r < 0)
		(void)set_error(reterr, r, "failed to %s CDI spec %s: %s", step, path,
				errstr(-r, eb, sizeof(eb)));
	free(path);
	return r;
}

int cdi_spec_verify(const char *dir, const void *expected, size_t len)
{
	char *path = path_join(dir ? dir : CDI_SPEC_DIR, CDI_SPEC_FILE_NAME);
	int r;

	if (!path)
		return -ENOMEM;
	r = file_equals(path, expected, len);
	free(path);
	return r;
}

int cdi_spec_write(const struct cdi_opts *o, const struct gpu_info *info, char **reterr)
{
	struct buf b = { 0 };
	int r;

	r = cdi_spec_render(o, info, &b, reterr);
	if (r < 0)
		return r;
	r = cdi_spec_write_file(o->spec_dir, b.data, b.len, reterr);
	buf_release(&b);
	return r;
}
