#include "enforce.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enforce-internal.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu.h"
#include "limits-file.h"
#include "podres.h"

#define LOG_MODULE "enforce"
#include "log.h"

/* A units file past this is not ours (65,536 one-MiB units of ~60 bytes fit). */
#define UNITS_MAX (8u << 20)
#define SMALL_MAX 4096
/* The library is read whole to compare and copy; a real one is a few hundred KiB. */
#define LIBRARY_MAX (64u << 20)

static const char preload_line[] = ENFORCE_CTR_LIB "\n";

void ealloc_free(struct ealloc *a)
{
	if (!a)
		return;
	for (size_t i = 0; a->ids && i < a->n_ids; i++)
		free(a->ids[i]);
	for (unsigned i = 0; a->uuids && i < a->n_gpus; i++)
		free(a->uuids[i]);
	free(a->ids);
	free(a->uuids);
	free(a->limit_mib);
	free(a->resource);
	free(a->state_dir);
	free(a);
}

void ealloc_fill_view(struct ealloc *a)
{
	a->view.name = a->name;
	a->view.resource = a->resource;
	a->view.ids = a->ids;
	a->view.n_ids = a->n_ids;
	a->view.n_gpus = a->n_gpus;
	a->view.uuids = (const char *const *)a->uuids;
	a->view.limit_mib = a->limit_mib;
	a->view.state_dir = a->state_dir;
}

int enforce_alloc_dir_open(const struct enforce *e)
{
	int fd = open(e->alloc_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

void enforce_remove(struct enforce *e, struct ealloc *a)
{
	for (struct ealloc **pp = &e->allocs; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			e->n_allocs--;
			break;
		}
	if (a->name[0]) {
		int fd = enforce_alloc_dir_open(e);
		int r = fd < 0 ? fd : rm_tree_at(fd, a->name, ENFORCE_TREE_DEPTH);

		if (fd >= 0)
			(void)close(fd);
		if (r < 0)
			(void)log_warn_errno(r, "cannot remove a gpumem allocation directory",
					     "path=%s/%s", e->alloc_dir, a->name);
		else
			log_debug("gpumem allocation removed", "name=%s resource=%s", a->name,
				  a->resource);
	}
	ealloc_free(a);
}

/* --- a set of (resource, unit ID) pairs, for the scans over every allocation --- */

struct idset {
	const char **res, **ids;
	size_t mask;
	bool owned; /* the set holds copies (freed with it) */
};

static uint32_t pair_hash(const char *res, const char *id)
{
	return fnv1a(id) * 31u ^ fnv1a(res);
}

static int idset_init(struct idset *s, size_t n)
{
	size_t size = 16;

	while (size < 2 * n)
		size *= 2;
	s->res = calloc(size, sizeof(*s->res));
	s->ids = calloc(size, sizeof(*s->ids));
	s->mask = size - 1;
	if (!s->res || !s->ids) {
		free(s->res);
		free(s->ids);
		return -ENOMEM;
	}
	return 0;
}

static void idset_release(struct idset *s)
{
	for (size_t i = 0; s->owned && i <= s->mask; i++)
		free((char *)s->ids[i]); /* one block: the ID, then its resource */
	free(s->res);
	free(s->ids);
}

/*
 * Adds the pair (borrowed, or copied when s->owned); the set was sized for every add.
 * Returns 0 or -ENOMEM.
 */
static int idset_add(struct idset *s, const char *res, const char *id)
{
	size_t i = pair_hash(res, id) & s->mask;

	for (; s->ids[i]; i = (i + 1) & s->mask)
		if (streq(s->ids[i], id) && streq(s->res[i], res))
			return 0;
	if (s->owned) {
		size_t ni = strlen(id) + 1, nr = strlen(res) + 1;
		char *p = malloc(ni + nr);

		if (!p)
			return -ENOMEM;
		memcpy(p, id, ni);
		memcpy(p + ni, res, nr);
		id = p;
		res = p + ni;
	}
	s->res[i] = res;
	s->ids[i] = id;
	return 0;
}

static bool idset_has(const struct idset *s, const char *res, const char *id)
{
	for (size_t i = pair_hash(res, id) & s->mask; s->ids[i]; i = (i + 1) & s->mask)
		if (streq(s->ids[i], id) && streq(s->res[i], res))
			return true;
	return false;
}

static bool holds_any(const struct ealloc *a, const struct idset *s)
{
	for (size_t i = 0; i < a->n_ids; i++)
		if (idset_has(s, a->resource, a->ids[i]))
			return true;
	return false;
}

int enforce_remove_holders(struct enforce *e, const char *resource, char *const *ids, size_t n_ids)
{
	struct idset s;
	int n = 0;

	if (!e->allocs)
		return 0;
	if (idset_init(&s, n_ids) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n_ids; i++)
		(void)idset_add(&s, resource, ids[i]); /* borrowed: never fails */
	for (struct ealloc *a = e->allocs, *next; a; a = next) {
		next = a->next;
		if (streq(a->resource, resource) && holds_any(a, &s)) {
			log_info("gpumem units allocated again, removing their earlier allocation",
				 "name=%s resource=%s", a->name[0] ? a->name : "(none)", resource);
			enforce_remove(e, a);
			n++;
		}
	}
	idset_release(&s);
	return n;
}

/* --- install --- */

int enforce_install(struct enforce *e)
{
	char *lib = NULL;
	size_t len = 0;
	const char *step = "read", *path = e->cfg.library;
	int r;

	r = mkdir_parents(e->lib_dir, 0755);
	if (r < 0) {
		step = "create the directory";
		path = e->lib_dir;
		goto fail;
	}
	r = read_file(e->cfg.library, LIBRARY_MAX, &lib, &len);
	if (r < 0)
		goto fail;
	/* Rewritten only when it differs: a container maps the installed one now. */
	if (file_equals(e->lib_path, lib, len) != 0) {
		path = e->lib_path;
		r = file_write_atomic(e->lib_path, lib, len, 0755, &step);
		if (r < 0)
			goto fail;
		log_info("interposer library installed", "source=%s path=%s bytes=%zu",
			 e->cfg.library, e->lib_path, len);
	}
	if (file_equals(e->preload_path, preload_line, sizeof(preload_line) - 1) != 0) {
		path = e->preload_path;
		r = file_write_atomic(e->preload_path, preload_line, sizeof(preload_line) - 1, 0644,
				      &step);
		if (r < 0)
			goto fail;
	}
	free(lib);
	if (!e->installed && e->install_err)
		log_info("interposer library installed after earlier failures", "path=%s",
			 e->lib_path);
	e->installed = true;
	e->install_err = 0;
	return 0;
fail:
	free(lib);
	e->installed = false;
	if (r != e->install_err) {
		if (r == -ENOENT && path == e->cfg.library)
			(void)log_warn_errno(
				r,
				"interposer library not found: gpumem limits are not enforced by the interposer",
				"path=%s hint=%s", path,
				log_q("the image ships it at /usr/lib/edgegpu/libedgegpu-cuda.so; point edgegpu.sharing.memory.enforcement.library (--interposer-lib) at it"));
		else
			(void)log_warn_errno(
				r,
				"cannot install the interposer library: gpumem limits are not enforced by the interposer",
				"step=%s path=%s", log_q(step), path);
		e->install_err = r;
	}
	return r;
}

/* --- reading back what an earlier run left --- */

static bool name_valid(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == ENFORCE_NAME_LEN;
}

/* The reasons a mode file may name, so a record keeps a static string. */
static const char *known_reason(const char *s)
{
	static const char *const reasons[] = {
		"off",
		"integrated",
		"driver-unsupported",
		"mig",
		"cgroup-v1",
		"not-cdi",
		"no-cdi-hook",
		"unequal-limits",
		"not-installed",
		"state-write-failed",
	};

	for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
		if (streq(s, reasons[i]))
			return reasons[i];
	return "unknown";
}

static void parse_mode(struct ealloc *a, char *text)
{
	char *nl = strchr(text, '\n');

	if (nl)
		*nl = '\0';
	a->view.reason = "";
	a->view.mode = ENFORCE_ACCOUNTING;
	for (int m = 0; m < ENFORCE_MODE_COUNT; m++)
		if (streq(text, enforce_mode_name((enum enforce_mode)m)))
			a->view.mode = (enum enforce_mode)m;
	if (strncmp(text, "accounting ", 11) == 0)
		a->view.reason = known_reason(text + 11);
}

/* Fills @a's IDs from a units file: the resource on line 1, then one ID a line. */
static int parse_units(struct ealloc *a, char *text)
{
	size_t n = 0;
	char *save = NULL, *line;

	for (char *p = text; *p; p++)
		n += *p == '\n';
	a->ids = calloc(n + 1, sizeof(char *));
	if (!a->ids)
		return -ENOMEM;
	line = strtok_r(text, "\n", &save);
	if (!line || !*line || !utf8_valid(line))
		return -EBADMSG;
	a->resource = strdup(line);
	if (!a->resource)
		return -ENOMEM;
	while ((line = strtok_r(NULL, "\n", &save))) {
		if (!utf8_valid(line))
			return -EBADMSG;
		a->ids[a->n_ids] = strdup(line);
		if (!a->ids[a->n_ids])
			return -ENOMEM;
		a->n_ids++;
	}
	return a->n_ids ? 0 : -EBADMSG;
}

/* The GPUs and limits of @a from its limits file (absent for driver and accounting). */
static int parse_limits(struct ealloc *a, const char *text, size_t len)
{
	struct limits l;
	unsigned line;

	if (limits_parse(text, len, &l, &line) < 0)
		return -EBADMSG;
	a->uuids = calloc(l.n_gpus, sizeof(char *));
	a->limit_mib = calloc(l.n_gpus, sizeof(uint64_t));
	if (!a->uuids || !a->limit_mib)
		return -ENOMEM;
	for (unsigned i = 0; i < l.n_gpus; i++) {
		a->uuids[i] = strdup(l.gpus[i].uuid);
		if (!a->uuids[i])
			return -ENOMEM;
		a->n_gpus++;
		a->limit_mib[i] = l.gpus[i].limit >> 20;
	}
	return 0;
}

/* Reads alloc/@name (a directory, @dfd open on it). Returns 0, -EBADMSG (not usable), -errno. */
static int load_one(struct enforce *e, int dfd, const char *name, usec_t age, struct ealloc **ret)
{
	struct ealloc *a = calloc(1, sizeof(*a));
	char *text = NULL;
	size_t len;
	struct stat st;
	int r;

	if (!a)
		return -ENOMEM;
	memcpy(a->name, name, sizeof(a->name));
	r = read_file_at(dfd, "units", READ_NOFOLLOW, UNITS_MAX, &text, NULL, NULL);
	if (r < 0)
		goto out;
	r = parse_units(a, text);
	if (r < 0)
		goto out;
	text = mfree(text);
	if (read_file_at(dfd, "mode", READ_NOFOLLOW, SMALL_MAX, &text, NULL, NULL) >= 0)
		parse_mode(a, text);
	else
		a->view.reason = "unknown";
	text = mfree(text);
	if (read_file_at(dfd, "limits", READ_NOFOLLOW, LIMITS_FILE_MAX, &text, &len, NULL) >= 0) {
		r = parse_limits(a, text, len);
		if (r < 0)
			goto out;
	}
	if (fstatat(dfd, "state", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		a->state_dir = strdup_printf("%s/%s/state", e->alloc_dir, name);
		if (!a->state_dir) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* Its grace runs from the directory's creation, not from this restart. */
	a->created = now_usec() > age ? now_usec() - age : 0;
	ealloc_fill_view(a);
	*ret = a;
	a = NULL;
out:
	free(text);
	ealloc_free(a);
	return r;
}

/* The age of what @st describes, by the wall clock (its mtime: its files are written once). */
static usec_t age_of(const struct stat *st)
{
	usec_t t = (usec_t)st->st_mtim.tv_sec * USEC_PER_SEC + (usec_t)st->st_mtim.tv_nsec / 1000;
	usec_t now = wall_usec();

	return now > t ? now - t : 0;
}

static void load_allocs(struct enforce *e)
{
	int afd = enforce_alloc_dir_open(e);
	unsigned kept = 0, dropped = 0, skipped = 0, unopened = 0;
	struct dirent *de;
	DIR *d;

	if (afd < 0) {
		(void)log_warn_errno(afd, "cannot read the gpumem allocation directory", "path=%s",
				     e->alloc_dir);
		return;
	}
	d = fdopendir(afd);
	if (!d) {
		(void)close(afd);
		return;
	}
	while ((de = readdir(d))) {
		struct ealloc *a = NULL;
		struct stat st;
		int fd, r;

		/* A directory a crash left half-built: never used, removed (links only unlinked). */
		if (strncmp(de->d_name, ENFORCE_NEW_PREFIX, strlen(ENFORCE_NEW_PREFIX)) == 0) {
			r = rm_tree_at(dirfd(d), de->d_name, ENFORCE_TREE_DEPTH);
			if (r < 0)
				(void)log_warn_errno(
					r, "cannot remove a half-built allocation directory",
					"path=%s/%s", e->alloc_dir, de->d_name);
			dropped++;
			continue;
		}
		if (de->d_name[0] == '.')
			continue;
		/* Not ours (a link, a file, another name): left alone, never followed. */
		if (!name_valid(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode)) {
			skipped++;
			continue;
		}
		/*
		 * Not opened (EMFILE, ENOMEM, a race): nothing says it is damaged, and a container
		 * may have its limits mounted, so it stays; not read back, it is not reused.
		 */
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			(void)log_warn_errno(-errno, "cannot open a gpumem allocation directory",
					     "path=%s/%s", e->alloc_dir, de->d_name);
			unopened++;
			continue;
		}
		r = load_one(e, fd, de->d_name, age_of(&st), &a);
		(void)close(fd);
		if (r == -ENOMEM) {
			log_error("out of memory reading back gpumem allocations", NULL);
			break;
		}
		if (r < 0) {
			/* Half-made (a crash) or damaged: nothing can use it any more. */
			(void)log_warn_errno(r,
					     "removing an unreadable gpumem allocation directory",
					     "path=%s/%s", e->alloc_dir, de->d_name);
			r = rm_tree_at(dirfd(d), de->d_name, ENFORCE_TREE_DEPTH);
			if (r < 0)
				(void)log_warn_errno(r, "cannot remove it", "path=%s/%s",
						     e->alloc_dir, de->d_name);
			dropped++;
			continue;
		}
		a->next = e->allocs;
		e->allocs = a;
		e->n_allocs++;
		kept++;
	}
	(void)closedir(d);
	if (kept || dropped || skipped || unopened)
		log_info("gpumem allocations read back",
			 "kept=%u removed=%u not_ours=%u unopened=%u path=%s", kept, dropped,
			 skipped, unopened, e->alloc_dir);
}

/* --- the state --- */

int enforce_new(const struct config_enforcement *cfg, const char *host_root, struct enforce **ret)
{
	struct enforce *e = calloc(1, sizeof(*e));
	int r;

	if (!e)
		return -ENOMEM;
	e->cfg = *cfg;
	e->cfg.library = strdup(cfg->library ? cfg->library : "");
	e->cfg.state_dir = strdup(cfg->state_dir ? cfg->state_dir : "");
	e->host_root = strdup(host_root ? host_root : "/");
	e->grace = ENFORCE_GRACE;
	if (!e->cfg.library || !e->cfg.state_dir || !e->host_root)
		goto oom;
	e->lib_dir = strdup_printf("%s/lib", e->cfg.state_dir);
	e->alloc_dir = strdup_printf("%s/alloc", e->cfg.state_dir);
	e->lib_path = strdup_printf("%s/lib/" ENFORCE_LIB_NAME, e->cfg.state_dir);
	e->preload_path = strdup_printf("%s/lib/" ENFORCE_PRELOAD_NAME, e->cfg.state_dir);
	if (!e->lib_dir || !e->alloc_dir || !e->lib_path || !e->preload_path)
		goto oom;
	r = mkdir_parents(e->alloc_dir, 0755);
	if (r < 0)
		(void)log_warn_errno(
			r,
			"cannot create the gpumem state directory: limits are not enforced by the interposer",
			"path=%s", e->alloc_dir);
	if (e->cfg.interposer)
		(void)enforce_install(e);
	load_allocs(e);
	*ret = e;
	return 0;
oom:
	enforce_free(e);
	return -ENOMEM;
}

struct enforce *enforce_free(struct enforce *e)
{
	if (!e)
		return NULL;
	while (e->allocs) {
		struct ealloc *a = e->allocs;

		e->allocs = a->next;
		ealloc_free(a);
	}
	free(e->cfg.library);
	free(e->cfg.state_dir);
	free(e->host_root);
	free(e->lib_dir);
	free(e->alloc_dir);
	free(e->lib_path);
	free(e->preload_path);
	free(e);
	return NULL;
}

void enforce_set_node(struct enforce *e, const struct enforce_node *n)
{
	e->node = *n;
}

void enforce_set_grace(struct enforce *e, usec_t grace)
{
	e->grace = grace;
}

const struct config_enforcement *enforce_config(const struct enforce *e)
{
	return &e->cfg;
}

bool enforce_installed(const struct enforce *e)
{
	return e && e->installed;
}

void enforce_verdict(const struct enforce *e, const struct gpu_info *info,
		     const struct gpu_device *const *gpus, const uint64_t *limits_mib, size_t n,
		     struct enforce_verdict *ret)
{
	struct enforce_inputs in = {
		.want_driver = e->cfg.driver,
		.want_interposer = e->cfg.interposer,
		.gpus_support_limits = true,
		.cgroup_v2 = e->node.cgroup_v2,
		.cdi_delivery = e->node.cdi_delivery,
		.cdi_hook = e->node.cdi_hook,
		.equal_limits = true,
		.interposer_installed = e->installed,
	};
	size_t count = n ? n : (info ? info->n_devices : 0);

	for (size_t i = 0; i < count; i++) {
		const struct gpu_device *g = n ? gpus[i] : &info->devices[i];

		if (g->mem_limits != GPU_MEM_LIMITS_SUPPORTED)
			in.gpus_support_limits = false;
		in.mig |= g->mig_enabled;
		in.integrated |= g->integrated;
		if (n && limits_mib[i] != limits_mib[0])
			in.equal_limits = false;
	}
	if (count == 0)
		in.gpus_support_limits = false;
	enforce_decide(&in, ret);
}

/* --- removal of allocations whose pods are gone --- */

struct live_scan {
	struct idset set;
	int r;
};

/* The strings live during the call only: copied. */
static void add_live(const char *resource, const char *id, void *userdata)
{
	struct live_scan *ls = userdata;

	if (ls->r >= 0)
		ls->r = idset_add(&ls->set, resource, id);
}

static void count_pair(const char *resource, const char *id, void *userdata)
{
	(*(size_t *)userdata)++;
}

int enforce_set_live_podres(struct enforce *e, const uint8_t *resp, size_t len)
{
	struct live_scan ls = { .r = 0 };
	size_t n = 0;
	usec_t now = now_usec();
	int removed = 0, r;

	r = podres_for_each_device(resp, len, count_pair, &n);
	if (r < 0)
		return r;
	if (!e->allocs)
		return 0;
	if (idset_init(&ls.set, n) < 0)
		return -ENOMEM;
	ls.set.owned = true;
	(void)podres_for_each_device(resp, len, add_live, &ls);
	if (ls.r < 0) {
		idset_release(&ls.set);
		return ls.r;
	}
	for (struct ealloc *a = e->allocs, *next; a; a = next) {
		next = a->next;
		/* An Allocate's pod is listed only once its container exists. */
		if (now - a->created < e->grace || holds_any(a, &ls.set))
			continue;
		log_info("gpumem allocation's pod is gone, removing it", "name=%s resource=%s",
			 a->name[0] ? a->name : "(none)", a->resource);
		enforce_remove(e, a);
		removed++;
	}
	idset_release(&ls.set);
	return removed;
}

size_t enforce_n_allocs(const struct enforce *e)
{
	return e ? e->n_allocs : 0;
}

void enforce_for_each_alloc(const struct enforce *e, enforce_alloc_fn *fn, void *userdata)
{
	for (const struct ealloc *a = e->allocs; a; a = a->next)
		fn(&a->view, userdata);
}

const struct enforce_alloc *enforce_find_unit(const struct enforce *e, const char *resource,
					      const char *id)
{
	for (const struct ealloc *a = e->allocs; a; a = a->next) {
		if (!streq(a->resource, resource))
			continue;
		for (size_t i = 0; i < a->n_ids; i++)
			if (streq(a->ids[i], id))
				return &a->view;
	}
	return NULL;
}
