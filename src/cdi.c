#include "cdi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"

#define CDI_VERSION "0.5.0"

/* Common device nodes, in the order NVIDIA's generated spec lists them; each only if present. */
static const char *const control_nodes[] = {
	"/dev/nvidia-uvm",
	"/dev/nvidia-uvm-tools",
	"/dev/nvidiactl",
	"/dev/nvidia-modeset",
};

/* Where the driver's libraries live, relative to the driver root, most common first. */
static const char *const lib_dirs[] = {
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu",
	"/lib64",
	"/usr/lib",
	"/lib",
};

static const char *const bin_dirs[] = {
	"/usr/bin",
	"/usr/sbin",
	"/bin",
	"/sbin",
};

/*
 * The compute and video libraries of the driver, found as <name>.so.<driver version>. The
 * soname is mounted too (same host file), because without nvidia-ctk's create-symlinks hook
 * nothing else would create libcuda.so.1 in the container. Graphics libraries are left out.
 */
static const struct driver_lib {
	const char *name;
	const char *soname; /* NULL: the versioned name is the soname */
	bool required;
} driver_libs[] = {
	{ "libcuda.so", "libcuda.so.1", true },
	{ "libcudadebugger.so", "libcudadebugger.so.1", false },
	{ "libnvidia-ml.so", "libnvidia-ml.so.1", false },
	{ "libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1", false },
	{ "libnvidia-nvvm.so", "libnvidia-nvvm.so.4", false },
	{ "libnvidia-opencl.so", "libnvidia-opencl.so.1", false },
	{ "libnvidia-cfg.so", "libnvidia-cfg.so.1", false },
	{ "libnvidia-allocator.so", "libnvidia-allocator.so.1", false },
	{ "libnvidia-gpucomp.so", NULL, false },
	{ "libnvidia-pkcs11.so", NULL, false },
	{ "libnvidia-pkcs11-openssl3.so", NULL, false },
	{ "libnvcuvid.so", "libnvcuvid.so.1", false },
	{ "libnvidia-encode.so", "libnvidia-encode.so.1", false },
	{ "libnvidia-opticalflow.so", "libnvidia-opticalflow.so.1", false },
};

static const char *const driver_bins[] = {
	"nvidia-smi",
	"nvidia-debugdump",
	"nvidia-persistenced",
	"nvidia-cuda-mps-control",
	"nvidia-cuda-mps-server",
};

#define MAX_MOUNTS (2 * ELEMENTSOF(driver_libs) + ELEMENTSOF(driver_bins))

struct spec_mount {
	char *host_path;
	char *container_path;
};

struct spec {
	const char *look_root;	   /* where the driver files are looked for, from here */
	const char *look_dev_root; /* where the control nodes are looked for, from here */
	const char *host_root;	   /* the same driver root on the host: the spec's host paths */
	const char *host_dev_root; /* the same dev root on the host */
	struct spec_mount mounts[MAX_MOUNTS];
	size_t n_mounts;
	const char *lib_dirs[ELEMENTSOF(lib_dirs)]; /* container dirs holding mounted libraries */
	size_t n_lib_dirs;
};

static void spec_release(struct spec *s)
{
	for (size_t i = 0; i < s->n_mounts; i++) {
		free(s->mounts[i].host_path);
		free(s->mounts[i].container_path);
	}
	s->n_mounts = 0;
}

static void set_err(char **reterr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char **reterr, const char *fmt, ...)
{
	va_list ap;

	if (!reterr)
		return;
	va_start(ap, fmt);
	if (vasprintf(reterr, fmt, ap) < 0)
		*reterr = NULL;
	va_end(ap);
}

/* Returns 1 if <root><path> exists (as a regular file when @regular), 0 if not, or -ENOMEM. */
static int exists(const char *root, const char *path, bool regular)
{
	struct stat st;
	char *p = root_join(root, path);
	int r;

	if (!p)
		return -ENOMEM;
	r = stat(p, &st) == 0 && (!regular || S_ISREG(st.st_mode));
	free(p);
	return r;
}

static int spec_add_mount(struct spec *s, const char *path, const char *container_path)
{
	struct spec_mount *m = &s->mounts[s->n_mounts];

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
		r = exists(s->look_root, path, true);
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
	char file[256];
	int r;

	for (size_t i = 0; i < ELEMENTSOF(driver_libs); i++) {
		const char *dir = NULL;

		(void)snprintf(file, sizeof(file), "%s.%s", driver_libs[i].name, version);
		r = spec_find_mount(s, lib_dirs, ELEMENTSOF(lib_dirs), file, driver_libs[i].soname,
				    &dir);
		if (r < 0)
			return r;
		if (r == 0 && driver_libs[i].required) {
			if (streq(s->look_root, s->host_root))
				set_err(reterr, "failed to locate %s under %s", file, s->look_root);
			else
				set_err(reterr,
					"failed to locate %s under %s (the container driver root, "
					"where the host's %s is expected to be mounted)",
					file, s->look_root, s->host_root);
			return -ENOENT;
		}
		if (r > 0)
			spec_add_lib_dir(s, dir);
	}
	for (size_t i = 0; i < ELEMENTSOF(driver_bins); i++) {
		r = spec_find_mount(s, bin_dirs, ELEMENTSOF(bin_dirs), driver_bins[i], NULL, NULL);
		if (r < 0)
			return r;
	}
	return 0;
}

/* CDI's rule (ValidateDeviceName): [A-Za-z0-9] first and last, [A-Za-z0-9_.:-] between. */
static bool cdi_device_name_valid(const char *n)
{
	size_t len = strlen(n);

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)n[i];
		bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			     (c >= 'A' && c <= 'Z');

		if (alnum)
			continue;
		if (i == 0 || i == len - 1 || !strchr("_-.:", c))
			return false;
	}
	return true;
}

/*
 * A small JSON writer: two-space indentation, one member or element per line. Errors are
 * sticky in @r, so callers check once at the end.
 */
struct json {
	struct buf *b;
	unsigned depth;
	bool comma; /* a value was written at this level */
	bool key;   /* a key was just written: its value follows on the same line */
	int r;
};

static void json_raw(struct json *j, const char *s, size_t n)
{
	if (j->r == 0)
		j->r = buf_append(j->b, s, n);
}

static void json_prefix(struct json *j)
{
	if (j->key) {
		j->key = false;
		return;
	}
	if (j->comma)
		json_raw(j, ",", 1);
	if (j->depth > 0) {
		json_raw(j, "\n", 1);
		for (unsigned i = 0; i < j->depth; i++)
			json_raw(j, "  ", 2);
	}
}

static void json_escape(struct json *j, const char *s)
{
	if (j->r == 0)
		j->r = alloc_utf8_valid(s) ? buf_json_string(j->b, s) : -EINVAL;
}

static void json_open(struct json *j, char c)
{
	json_prefix(j);
	json_raw(j, &c, 1);
	j->depth++;
	j->comma = false;
}

static void json_close(struct json *j, char c)
{
	j->depth--;
	if (j->comma) {
		json_raw(j, "\n", 1);
		for (unsigned i = 0; i < j->depth; i++)
			json_raw(j, "  ", 2);
	}
	json_raw(j, &c, 1);
	j->comma = true;
}

static void json_key(struct json *j, const char *k)
{
	json_prefix(j);
	json_escape(j, k);
	json_raw(j, ": ", 2);
	j->key = true;
}

static void json_str(struct json *j, const char *s)
{
	json_prefix(j);
	json_escape(j, s);
	j->comma = true;
}

static void json_kv(struct json *j, const char *k, const char *v)
{
	json_key(j, k);
	json_str(j, v);
}

static void json_device_node(struct json *j, const char *dev_root, const char *path)
{
	char *host = root_join(dev_root, path);

	if (!host) {
		if (j->r == 0)
			j->r = -ENOMEM;
		return;
	}
	json_open(j, '{');
	json_kv(j, "path", path);
	json_kv(j, "hostPath", host);
	json_close(j, '}');
	free(host);
}

static void json_devices(struct json *j, const struct cdi_opts *o, const struct gpu_info *info,
			 const char *dev_root)
{
	json_key(j, "devices");
	json_open(j, '[');
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];
		char id[GPU_UUID_MAX], node[32];

		(void)snprintf(node, sizeof(node), "/dev/nvidia%u", g->minor);
		json_open(j, '{');
		json_kv(j, "name", alloc_gpu_id(o->id_strategy, g, id, sizeof(id)));
		json_key(j, "containerEdits");
		json_open(j, '{');
		json_key(j, "deviceNodes");
		json_open(j, '[');
		json_device_node(j, dev_root, node);
		json_close(j, ']');
		json_close(j, '}');
		json_close(j, '}');
	}
	json_close(j, ']');
}

static void json_common_edits(struct json *j, const struct cdi_opts *o, const struct spec *s)
{
	static const char *const options[] = { "ro", "nosuid", "nodev", "bind" };
	bool any_node = false;

	json_key(j, "containerEdits");
	json_open(j, '{');
	json_key(j, "env");
	json_open(j, '[');
	json_str(j, "NVIDIA_VISIBLE_DEVICES=void");
	json_close(j, ']');
	for (size_t i = 0; i < ELEMENTSOF(control_nodes); i++) {
		int r = exists(s->look_dev_root, control_nodes[i], false);

		if (r < 0 && j->r == 0)
			j->r = r;
		if (r <= 0)
			continue;
		if (!any_node) {
			json_key(j, "deviceNodes");
			json_open(j, '[');
			any_node = true;
		}
		json_device_node(j, s->host_dev_root, control_nodes[i]);
	}
	if (any_node)
		json_close(j, ']');
	json_key(j, "mounts");
	json_open(j, '[');
	for (size_t i = 0; i < s->n_mounts; i++) {
		json_open(j, '{');
		json_kv(j, "hostPath", s->mounts[i].host_path);
		json_kv(j, "containerPath", s->mounts[i].container_path);
		json_key(j, "options");
		json_open(j, '[');
		for (size_t k = 0; k < ELEMENTSOF(options); k++)
			json_str(j, options[k]);
		json_close(j, ']');
		json_close(j, '}');
	}
	json_close(j, ']');
	if (o->ldcache_hook_path && s->n_lib_dirs > 0) {
		json_key(j, "hooks");
		json_open(j, '[');
		json_open(j, '{');
		json_kv(j, "hookName", "createContainer");
		json_kv(j, "path", o->ldcache_hook_path);
		json_key(j, "args");
		json_open(j, '[');
		json_str(j, "nvidia-ctk");
		json_str(j, "hook");
		json_str(j, "update-ldcache");
		for (size_t i = 0; i < s->n_lib_dirs; i++) {
			json_str(j, "--folder");
			json_str(j, s->lib_dirs[i]);
		}
		json_close(j, ']');
		json_close(j, '}');
		json_close(j, ']');
	}
	json_close(j, '}');
}

/* Is @p an existing directory (following symlinks)? */
static bool is_dir(const char *p)
{
	struct stat st;

	return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int cdi_spec_render(const struct cdi_opts *o, const struct gpu_info *info, struct buf *out,
		    char **reterr)
{
	const char *driver_root = o->driver_root && *o->driver_root ? o->driver_root : "/";
	const char *dev_root = o->dev_root && *o->dev_root ? o->dev_root : driver_root;
	const char *ver = info->driver_version;
	struct buf b = { 0 };
	struct json j = { .b = &b };
	struct spec s = { .host_root = driver_root, .host_dev_root = dev_root };
	int r;

	if (!ver[0] || strchr(ver, '/') || !alloc_utf8_valid(ver)) {
		set_err(reterr, "invalid driver version \"%s\" for the CDI spec", ver);
		return -EINVAL;
	}
	for (unsigned i = 0; i < info->n_devices; i++) {
		char id[GPU_UUID_MAX];

		alloc_gpu_id(o->id_strategy, &info->devices[i], id, sizeof(id));
		if (!cdi_device_name_valid(id)) {
			set_err(reterr, "invalid CDI device name for GPU %u",
				info->devices[i].index);
			return -EINVAL;
		}
	}
	/*
	 * Inside the DaemonSet the host's driver root is mounted at container_driver_root: look
	 * there, and write the host's paths (NVIDIA's transform from containerDriverRoot to
	 * nvidiaDriverRoot). The device nodes are looked for under <container root>/dev when that
	 * is a directory, else under our own /dev (NVIDIA's rule). Without the mount we run on the
	 * host, where the host paths are the ones to look at.
	 */
	if (is_dir(o->container_driver_root)) {
		char *ctr_dev = root_join(o->container_driver_root, "/dev");

		if (!ctr_dev) {
			set_err(reterr, "out of memory rendering the CDI spec");
			return -ENOMEM;
		}
		s.look_root = o->container_driver_root;
		s.look_dev_root = is_dir(ctr_dev) ? o->container_driver_root : "/";
		free(ctr_dev);
	} else {
		s.look_root = driver_root;
		s.look_dev_root = dev_root;
	}
	r = spec_find_files(&s, ver, reterr);
	if (r == -ENOMEM)
		set_err(reterr, "out of memory rendering the CDI spec");
	if (r < 0)
		goto out;

	json_open(&j, '{');
	json_kv(&j, "cdiVersion", CDI_VERSION);
	json_kv(&j, "kind", ALLOC_CDI_KIND_DEFAULT);
	json_devices(&j, o, info, dev_root);
	json_common_edits(&j, o, &s);
	json_close(&j, '}');
	json_raw(&j, "\n", 1);
	r = j.r;
	if (r == 0)
		r = buf_append(out, b.data, b.len);
	if (r == -EINVAL)
		set_err(reterr, "a path for the CDI spec is not valid UTF-8");
	else if (r < 0)
		set_err(reterr, "out of memory rendering the CDI spec");
out:
	spec_release(&s);
	buf_release(&b);
	return r;
}

/* mkdir -p with mode 0755 for the parts that are missing. */
static int mkdir_p(const char *dir)
{
	char *p = NULL;
	int r = 0;

	if (!dir[0])
		return -EINVAL;
	p = strdup(dir);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		char c = *s;

		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return r;
}

/* Thread-safe strerror: GNU strerror_r returns a pointer into @buf or a static string. */
static const char *errstr(int e, char *buf, size_t size)
{
	return strerror_r(e, buf, size);
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cdi_spec_write_file(const char *dir, const void *data, size_t len, char **reterr)
{
	char *path = NULL, *tmp = NULL, eb[128];
	const char *step = "write";
	int fd = -1, dfd = -1, r;

	if (!dir)
		dir = CDI_SPEC_DIR;
	r = mkdir_p(dir);
	if (r < 0) {
		set_err(reterr, "failed to create CDI spec directory %s: %s", dir,
			errstr(-r, eb, sizeof(eb)));
		return r;
	}
	path = path_join(dir, CDI_SPEC_FILE_NAME);
	if (!path || asprintf(&tmp, "%s/.%s.XXXXXX", dir, CDI_SPEC_FILE_NAME) < 0) {
		tmp = NULL;
		r = -ENOMEM;
		set_err(reterr, "out of memory writing the CDI spec");
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		tmp = mfree(tmp); /* nothing to remove */
		step = "create a temporary file for";
		goto fail;
	}
	if (fchmod(fd, 0644) < 0) {
		r = -errno;
		goto fail;
	}
	r = write_all(fd, data, len);
	if (r < 0)
		goto fail;
	/* The data must be on disk before the rename makes it the spec. */
	if (fsync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	r = close(fd);
	fd = -1;
	if (r < 0) {
		r = -errno;
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto fail;
	}
	tmp = mfree(tmp);
	/* And the rename itself, which lives in the directory. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		step = "sync the directory of";
		goto fail;
	}
	r = 0;
	goto out;
fail:
	set_err(reterr, "failed to %s CDI spec %s: %s", step, path, errstr(-r, eb, sizeof(eb)));
out:
	if (fd >= 0)
		(void)close(fd);
	if (dfd >= 0)
		(void)close(dfd);
	if (tmp)
		(void)unlink(tmp);
	free(tmp);
	free(path);
	return r;
}

int cdi_spec_verify(const char *dir, const void *expected, size_t len)
{
	char *path, *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r;

	path = path_join(dir ? dir : CDI_SPEC_DIR, CDI_SPEC_FILE_NAME);
	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
	free(path);
	if (fd < 0)
		return errno == ELOOP ? -ESTALE : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != (uint64_t)len) {
		r = -ESTALE;
		goto out;
	}
	/* A file that grew after the fstat is not ours either: -EFBIG past @len. */
	r = fd_read_all(fd, len, &buf, &got);
	if (r == -EFBIG)
		r = -ESTALE;
	if (r < 0)
		goto out;
	r = got == len && memcmp(buf, expected, len) == 0 ? 0 : -ESTALE;
out:
	free(buf);
	(void)close(fd);
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
