/*
 * Allocate's side of enforcement: the verdict for one gpumem container, its directory
 * alloc/<name>/ (units, limits, state/region, mode) and the env and mounts it gets.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enforce-internal.h"
#include "gpu.h"
#include "limits-file.h"
#include "region.h"

#define LOG_MODULE "enforce"
#include "log.h"

#define MIB UINT64_C(1048576)

/* A fresh 16-hex name: random, so a name never comes back for another allocation. */
static void new_name(char ret[ENFORCE_NAME_LEN + 1])
{
	static uint64_t counter;
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint64_t)wall_usec() << 16 ^ (uint64_t)getpid() ^
		    ++counter * 0x9e3779b97f4a7c15u;
	(void)snprintf(ret, ENFORCE_NAME_LEN + 1, "%016" PRIx64, v);
}

/*
 * Writes @name in the directory @dfd (a new file: O_EXCL, nothing planted there is followed).
 * Not synced: the directory it is in appears whole by a rename, and after a crash it is read
 * back or removed (enforce.c), never used half-written. Returns 0 or -errno.
 */
static int write_new(int dfd, const char *name, const void *data, size_t len)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int r;

	if (fd < 0)
		return -errno;
	r = fd_write_all(fd, data, len);
	if (r >= 0 && fchmod(fd, 0644) < 0)
		r = -errno;
	if (close(fd) < 0 && r >= 0)
		r = -errno;
	return r;
}

static int write_units(int dfd, const char *resource, char *const *ids, size_t n_ids)
{
	struct buf b = { 0 };
	int r = buf_printf(&b, "%s\n", resource);

	for (size_t i = 0; r >= 0 && i < n_ids; i++)
		r = buf_printf(&b, "%s\n", ids[i]);
	if (r >= 0)
		r = write_new(dfd, "units", b.data, b.len);
	buf_release(&b);
	return r;
}

static int write_limits(const struct enforce *e, int dfd, bool report_only,
			const struct gpu_device *const *gpus, const uint64_t *limits_mib,
			size_t n_gpus)
{
	struct limits l = {
		.report_only = report_only,
		.count_managed = e->cfg.managed == CONFIG_MANAGED_COUNT,
		.n_gpus = (unsigned)n_gpus,
	};
	char buf[LIMITS_FILE_MAX];
	int n;

	if (n_gpus > REGION_GPUS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n_gpus; i++) {
		(void)snprintf(l.gpus[i].uuid, sizeof(l.gpus[i].uuid), "%s", gpus[i]->uuid);
		l.gpus[i].limit = limits_mib[i] * MIB;
	}
	n = limits_format(&l, buf, sizeof(buf));
	if (n < 0)
		return n;
	return write_new(dfd, "limits", buf, (size_t)n);
}

static int write_region(const char *state, const struct gpu_device *const *gpus,
			const uint64_t *limits_mib, size_t n_gpus, bool report_only)
{
	struct region_init_gpu rg[REGION_GPUS_MAX];

	if (n_gpus > REGION_GPUS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n_gpus; i++) {
		rg[i].uuid = gpus[i]->uuid;
		rg[i].limit = limits_mib[i] * MIB;
	}
	return region_create(state, rg, n_gpus, report_only);
}

/* Fills the new directory @tmp (alloc/@tmp, @dfd open on it). Returns 0 or -errno. */
static int fill_dir(struct enforce *e, struct ealloc *a, enum enforce_mode mode, int dfd,
		    const char *tmp, const struct gpu_device *const *gpus,
		    const uint64_t *limits_mib, size_t n_gpus, const char **ret_step)
{
	char *state = NULL, modeline[64];
	int r;

	*ret_step = "write units in";
	r = write_units(dfd, a->resource, a->ids, a->n_ids);
	if (r < 0 || (mode != ENFORCE_INTERPOSER && mode != ENFORCE_BOTH))
		goto mode;
	*ret_step = "write limits in";
	r = write_limits(e, dfd, mode == ENFORCE_BOTH, gpus, limits_mib, n_gpus);
	if (r < 0)
		return r;
	*ret_step = "create the region in";
	state = strdup_printf("%s/%s/state", e->alloc_dir, tmp);
	if (!state)
		return -ENOMEM;
	/* 0755 whatever the umask: the container's processes, any user, reach the region. */
	r = mkdirat(dfd, "state", 0755) < 0 || fchmodat(dfd, "state", 0755, 0) < 0 ? -errno : 0;
	if (r >= 0)
		r = write_region(state, gpus, limits_mib, n_gpus, mode == ENFORCE_BOTH);
	free(state);
mode:
	if (r < 0)
		return r;
	*ret_step = "write mode in";
	(void)snprintf(modeline, sizeof(modeline), "%s\n", enforce_mode_name(mode));
	return write_new(dfd, "mode", modeline, strlen(modeline));
}

/*
 * Makes alloc/@a->name/ for @a in @mode: units, mode and (interposer) limits and
 * state/region, built under a hidden name (ENFORCE_NEW_PREFIX) and renamed into place, so a
 * directory under its real name is always whole. Only the region is synced (region_create()):
 * nothing here must outlive a crash of the node, whose pods are all allocated again. Returns
 * 0 or -errno (nothing left behind; a->name ""); *@ret_step names what failed.
 */
static int write_dir(struct enforce *e, struct ealloc *a, enum enforce_mode mode,
		     const struct gpu_device *const *gpus, const uint64_t *limits_mib,
		     size_t n_gpus, const char **ret_step)
{
	char tmp[sizeof(ENFORCE_NEW_PREFIX) + ENFORCE_NAME_LEN];
	int afd, dfd = -1, r;

	*ret_step = "open";
	afd = enforce_alloc_dir_open(e);
	if (afd < 0) {
		a->name[0] = '\0';
		return afd;
	}
	new_name(a->name);
	(void)snprintf(tmp, sizeof(tmp), ENFORCE_NEW_PREFIX "%s", a->name);
	*ret_step = "create";
	r = mkdirat(afd, tmp, 0755) < 0 || fchmodat(afd, tmp, 0755, 0) < 0 ? -errno : 0;
	if (r >= 0) {
		dfd = openat(afd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = dfd < 0 ? -errno : 0;
	}
	if (r >= 0)
		r = fill_dir(e, a, mode, dfd, tmp, gpus, limits_mib, n_gpus, ret_step);
	if (dfd >= 0)
		(void)close(dfd);
	/* A random 64-bit name is new; a taken one fails the rename (never replaces it). */
	if (r >= 0) {
		*ret_step = "rename";
		r = renameat2(afd, tmp, afd, a->name, RENAME_NOREPLACE) < 0 ? -errno : 0;
	}
	if (r < 0) {
		if (rm_tree_at(afd, tmp, ENFORCE_TREE_DEPTH) < 0)
			log_debug("cannot remove a half-made allocation directory", "path=%s/%s",
				  e->alloc_dir, tmp);
		a->name[0] = '\0';
	} else if (mode == ENFORCE_INTERPOSER || mode == ENFORCE_BOTH) {
		a->state_dir = strdup_printf("%s/%s/state", e->alloc_dir, a->name);
		if (!a->state_dir)
			r = -ENOMEM; /* the directory stays: the record goes (enforce_allocate()) */
	}
	(void)close(afd);
	return r;
}

/* Says a container's verdict when it is not what the last one was (once per change). */
static void log_verdict(struct enforce *e, const struct enforce_grant *g, const char *resource)
{
	if (e->logged_any && e->logged_mode == g->mode && streq(e->logged_reason, g->reason))
		return;
	e->logged_any = true;
	e->logged_mode = g->mode;
	e->logged_reason = g->reason;
	if (g->mode == ENFORCE_ACCOUNTING)
		log_warn("gpumem limit NOT enforced: accounting only (metrics and alerts)",
			 "resource=%s reason=%s", resource, g->reason);
	else
		log_info("gpumem limit enforcement", "resource=%s mode=%s weaker_because=%s",
			 resource, enforce_mode_name(g->mode), g->reason[0] ? g->reason : "none");
}

static int add_env(struct enforce_grant *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int add_env(struct enforce_grant *g, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	if (!s)
		return -ENOMEM;
	g->env[g->n_env++] = s;
	return 0;
}

static int add_mount(struct enforce_grant *g, const char *ctr, const char *host_dir,
		     const char *name, bool ro)
{
	char *p = name ? path_join(host_dir, name) : strdup(host_dir);

	if (!p)
		return -ENOMEM;
	g->mounts[g->n_mounts++] = (struct alloc_mount){
		.container_path = ctr,
		.host_path = p,
		.read_only = ro,
	};
	return 0;
}

static int fill_grant(struct enforce *e, const struct ealloc *a, const uint64_t *limits_mib,
		      size_t n_gpus, struct enforce_grant *g)
{
	bool interposer = g->mode == ENFORCE_INTERPOSER || g->mode == ENFORCE_BOTH;
	bool equal = n_gpus > 0;
	int r = 0;

	for (size_t i = 1; i < n_gpus; i++)
		equal &= limits_mib[i] == limits_mib[0];
	/* The toolkit's hook applies one value to every GPU: only an equal limit is said. */
	if (equal) {
		r = add_env(g, "NVIDIA_GPU_MEMORY_REQUEST=%" PRIu64, limits_mib[0]);
		if (r >= 0)
			r = add_env(g, "NVIDIA_GPU_MEMORY_LIMIT=%" PRIu64, limits_mib[0]);
	}
	if (r >= 0)
		r = add_env(g, "EDGEGPU_GPUMEM_ENFORCEMENT=%s", enforce_mode_name(g->mode));
	if (r >= 0 && interposer && e->cfg.preload == CONFIG_PRELOAD_ENV)
		r = add_env(g, "LD_PRELOAD=%s", ENFORCE_CTR_LIB);
	if (r < 0 || !interposer)
		return r;
	r = add_mount(g, ENFORCE_CTR_LIB, e->lib_path, NULL, true);
	if (r >= 0 && e->cfg.preload == CONFIG_PRELOAD_LD_SO_PRELOAD)
		r = add_mount(g, ENFORCE_CTR_PRELOAD, e->preload_path, NULL, true);
	if (r >= 0) {
		char *dir = path_join(e->alloc_dir, a->name);

		r = dir ? add_mount(g, ENFORCE_CTR_LIMITS, dir, "limits", true) : -ENOMEM;
		free(dir);
	}
	if (r >= 0)
		r = add_mount(g, ENFORCE_CTR_STATE, a->state_dir, NULL, false);
	return r;
}

static struct ealloc *ealloc_new(const char *resource, char *const *ids, size_t n_ids,
				 const struct gpu_device *const *gpus, const uint64_t *limits_mib,
				 size_t n_gpus)
{
	struct ealloc *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->resource = strdup(resource);
	a->ids = calloc(n_ids + 1, sizeof(char *));
	a->uuids = calloc(n_gpus + 1, sizeof(char *));
	a->limit_mib = calloc(n_gpus + 1, sizeof(uint64_t));
	if (!a->resource || !a->ids || !a->uuids || !a->limit_mib)
		goto fail;
	for (; a->n_ids < n_ids; a->n_ids++)
		if (!(a->ids[a->n_ids] = strdup(ids[a->n_ids])))
			goto fail;
	for (; a->n_gpus < n_gpus; a->n_gpus++) {
		if (!(a->uuids[a->n_gpus] = strdup(gpus[a->n_gpus]->uuid)))
			goto fail;
		a->limit_mib[a->n_gpus] = limits_mib[a->n_gpus];
	}
	a->created = now_usec();
	return a;
fail:
	ealloc_free(a);
	return NULL;
}

int enforce_allocate(struct enforce *e, const struct gpu_info *info, const char *resource,
		     char *const *ids, size_t n_ids, const struct gpu_device *const *gpus,
		     const uint64_t *limits_mib, size_t n_gpus, struct enforce_grant *ret)
{
	struct enforce_verdict v;
	struct enforce_grant g = { 0 };
	struct ealloc *a;
	const char *step = NULL;
	int r;

	enforce_verdict(e, info, gpus, limits_mib, n_gpus, &v);
	g.mode = v.mode;
	g.reason = v.mode == ENFORCE_BOTH	     ? "" :
		   v.mode == ENFORCE_DRIVER	     ? v.interposer_reason :
		   v.mode == ENFORCE_INTERPOSER	     ? v.driver_reason :
		   streq(v.interposer_reason, "off") ? v.driver_reason :
						       v.interposer_reason;
	/* A unit is held by one container at a time: its earlier holder's pod is gone. */
	if (enforce_remove_holders(e, resource, ids, n_ids) == -ENOMEM)
		return -ENOMEM;
	a = ealloc_new(resource, ids, n_ids, gpus, limits_mib, n_gpus);
	if (!a)
		return -ENOMEM;
	r = write_dir(e, a, g.mode, gpus, limits_mib, n_gpus, &step);
	if (r == -ENOMEM) {
		ealloc_free(a);
		return r;
	}
	if (r < 0) {
		bool was_interposer = g.mode == ENFORCE_INTERPOSER || g.mode == ENFORCE_BOTH;

		if (was_interposer) {
			g.mode = g.mode == ENFORCE_BOTH ? ENFORCE_DRIVER : ENFORCE_ACCOUNTING;
			g.reason = "state-write-failed";
		}
		if (r != e->write_err)
			(void)log_warn_errno(
				r,
				"cannot write a gpumem allocation's state, not enforced by the interposer",
				"step=%s path=%s mode=%s", log_q(step), e->alloc_dir,
				enforce_mode_name(g.mode));
		e->write_err = r;
	} else {
		e->write_err = 0;
	}
	a->view.mode = g.mode;
	a->view.reason = g.reason;
	ealloc_fill_view(a);
	memcpy(g.name, a->name, sizeof(g.name));
	r = fill_grant(e, a, limits_mib, n_gpus, &g);
	if (r < 0) {
		enforce_remove(e, a);
		enforce_grant_release(&g);
		return r;
	}
	a->next = e->allocs;
	e->allocs = a;
	e->n_allocs++;
	log_verdict(e, &g, resource);
	log_debug("gpumem allocation", "name=%s resource=%s units=%zu gpus=%zu mode=%s",
		  a->name[0] ? a->name : "(none)", resource, n_ids, n_gpus,
		  enforce_mode_name(g.mode));
	*ret = g;
	return 0;
}

void enforce_grant_release(struct enforce_grant *g)
{
	for (size_t i = 0; i < g->n_env; i++)
		free(g->env[i]);
	for (size_t i = 0; i < g->n_mounts; i++)
		free((char *)g->mounts[i].host_path);
	g->n_env = g->n_mounts = 0;
}
