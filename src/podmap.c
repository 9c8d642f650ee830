#include "podmap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP_FILE_MAX	  ((size_t)64 * 1024)
#define CID_LEN		  64
#define CACHE_ENTRIES_MAX 65536

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	return true;
}

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static bool is_alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/*
 * A pod UID as the kubelet writes it: a dashed UUID, or 32 hex digits (static pods). @sep is the
 * separator expected at the dash positions ('_' in systemd slice names). Copies the dashed form
 * into @out (40 bytes).
 */
static bool uid_parse(const char *s, size_t n, char sep, char *out)
{
	if (n == 32 && is_hex(s, n)) {
		memcpy(out, s, n);
		out[n] = 0;
		return true;
	}
	if (n != 36)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != sep : !is_hex(s + i, 1))
			return false;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = s[i];
		if (s[i] == sep)
			out[i] = '-';
	}
	out[n] = 0;
	return true;
}

/* RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends. */
static bool dns_label_valid(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* RFC 1123 subdomain: at most 253 bytes of labels joined by '.'. */
static bool dns_subdomain_valid(const char *s, size_t n)
{
	size_t start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		if (!dns_label_valid(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *p, size_t *rest)
{
	size_t pl = strlen(p);

	if (n < pl || memcmp(s, p, pl) != 0)
		return false;
	*rest = pl;
	return true;
}

static bool has_suffix(const char *s, size_t n, const char *sfx)
{
	size_t sl = strlen(sfx);

	return n >= sl && memcmp(s + n - sl, sfx, sl) == 0;
}

static bool mem_contains(const char *s, size_t n, const char *needle)
{
	size_t nl = strlen(needle);

	for (size_t i = 0; i + nl <= n; i++)
		if (memcmp(s + i, needle, nl) == 0)
			return true;
	return false;
}

/* A pod component: "pod<uid>" (cgroupfs) or "...kubepods...-pod<uid_>.slice" (systemd). */
static bool pod_component(const char *c, size_t n, bool after_kubepods, char *uid)
{
	size_t off;

	if (after_kubepods && has_prefix(c, n, "pod", &off) &&
	    uid_parse(c + off, n - off, '-', uid))
		return true;
	if (!has_suffix(c, n, ".slice") || !mem_contains(c, n, "kubepods"))
		return false;
	n -= strlen(".slice");
	for (size_t i = n; i-- > 0;)
		if (i + 4 <= n && memcmp(c + i, "-pod", 4) == 0)
			return uid_parse(c + i + 4, n - i - 4, '_', uid);
	return false;
}

/* The component after the pod's: a container scope or ID. Returns false when it names none. */
static bool container_component(const char *c, size_t n, struct podmap_id *id)
{
	static const struct {
		const char *prefix, *runtime;
		bool conmon;
	} forms[] = {
		{ "cri-containerd-", "containerd", false },
		{ "crio-conmon-", "cri-o", true },
		{ "crio-", "cri-o", false },
		{ "docker-", "docker", false },
	};
	bool scope = has_suffix(c, n, ".scope");
	size_t off;

	if (scope)
		n -= strlen(".scope");
	if (!scope && n == CID_LEN && is_hex(c, n)) {
		memcpy(id->container_id, c, n);
		id->container_id[n] = 0;
		id->runtime = "";
		return true;
	}
	for (size_t i = 0; i < ELEMENTSOF(forms); i++) {
		if (!has_prefix(c, n, forms[i].prefix, &off))
			continue;
		if (n - off != CID_LEN || !is_hex(c + off, CID_LEN))
			return false;
		/* Without .scope only CRI-O's cgroupfs form has a prefix. */
		if (!scope && strcmp(forms[i].runtime, "cri-o") != 0)
			return false;
		id->runtime = forms[i].runtime;
		if (forms[i].conmon)
			return false; /* the pod's monitor, not a container */
		memcpy(id->container_id, c + off, CID_LEN);
		id->container_id[CID_LEN] = 0;
		return true;
	}
	return false;
}

/* 2: pod and container, 1: pod only, 0: no pod. */
static int parse_path(const char *p, size_t n, struct podmap_id *id)
{
	bool kubepods = false;
	size_t i = 0;

	memset(id, 0, sizeof(*id));
	id->kind = PODMAP_HOST;
	id->runtime = "";
	while (i < n) {
		size_t start, len;

		while (i < n && p[i] == '/')
			i++;
		start = i;
		while (i < n && p[i] != '/')
			i++;
		len = i - start;
		if (len == 0)
			break;
		if (pod_component(p + start, len, kubepods, id->pod_uid)) {
			id->kind = PODMAP_POD;
			while (i < n && p[i] == '/')
				i++;
			start = i;
			while (i < n && p[i] != '/')
				i++;
			return i > start && container_component(p + start, i - start, id) ? 2 : 1;
		}
		if (mem_contains(p + start, len, "kubepods"))
			kubepods = true;
	}
	return 0;
}

int podmap_parse_cgroup(const char *text, size_t len, struct podmap_id *ret)
{
	struct podmap_id best = { .kind = PODMAP_HOST, .runtime = "" }, cur;
	int best_rank = -1;
	size_t pos = 0;

	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos), *c1, *c2;
		size_t ll = nl ? (size_t)(nl - line) : len - pos;
		int rank;

		pos += ll + 1;
		if (ll > 0 && line[ll - 1] == '\r')
			ll--;
		c1 = memchr(line, ':', ll);
		if (!c1 || !all_digits(line, (size_t)(c1 - line)))
			continue;
		c2 = memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line));
		if (!c2 || c2 + 1 >= line + ll || c2[1] != '/')
			continue;
		if (memchr(line, 0, ll))
			continue;
		rank = parse_path(c2 + 1, ll - (size_t)(c2 + 1 - line), &cur);
		if (rank > best_rank) {
			best = cur;
			best_rank = rank;
		}
	}
	if (best_rank < 0)
		return -EBADMSG;
	*ret = best;
	return 0;
}

int podmap_read_pid(const char *proc_root, int pid, struct podmap_id *ret)
{
	char path[4096], *text = NULL;
	size_t len = 0;
	struct stat st;
	int fd = -1, r;

	if (pid <= 0)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root ? proc_root : "/proc", pid) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto out;
	}
	r = fd_read_all(fd, CGROUP_FILE_MAX, &text, &len);
	if (r < 0)
		goto out;
	r = podmap_parse_cgroup(text, len, ret);
out:
	if (r == -ENOENT || r == -ESRCH) {
		memset(ret, 0, sizeof(*ret));
		ret->kind = PODMAP_NO_PROC;
		ret->runtime = "";
		r = 0;
	}
	free(text);
	fd_close(fd);
	return r;
}

static void copy_part(char *dst, const char *s, size_t n)
{
	memcpy(dst, s, n);
	dst[n] = 0;
}

/* "<pod>_<namespace>_<container>-<cid>.log" */
static bool parse_container_log(const char *name, char *cid, struct podmap_names *ret)
{
	size_t n = strlen(name);
	const char *u1, *u2, *dash;

	if (!has_suffix(name, n, ".log"))
		return false;
	n -= strlen(".log");
	if (n < CID_LEN + 1 || name[n - CID_LEN - 1] != '-' || !is_hex(name + n - CID_LEN, CID_LEN))
		return false;
	dash = name + n - CID_LEN - 1;
	u1 = memchr(name, '_', (size_t)(dash - name));
	if (!u1)
		return false;
	u2 = memchr(u1 + 1, '_', (size_t)(dash - u1 - 1));
	if (!u2 || memchr(u2 + 1, '_', (size_t)(dash - u2 - 1)))
		return false;
	if (!dns_subdomain_valid(name, (size_t)(u1 - name)) ||
	    !dns_label_valid(u1 + 1, (size_t)(u2 - u1 - 1)) ||
	    !dns_label_valid(u2 + 1, (size_t)(dash - u2 - 1)))
		return false;
	copy_part(ret->pod, name, (size_t)(u1 - name));
	copy_part(ret->namespace_, u1 + 1, (size_t)(u2 - u1 - 1));
	copy_part(ret->container, u2 + 1, (size_t)(dash - u2 - 1));
	copy_part(cid, dash + 1, CID_LEN);
	return true;
}

/* "<namespace>_<pod>_<uid>" */
static bool parse_pod_dir(const char *name, char *uid, struct podmap_names *ret)
{
	size_t n = strlen(name);
	const char *u1 = memchr(name, '_', n), *u2;

	if (!u1)
		return false;
	u2 = memchr(u1 + 1, '_', n - (size_t)(u1 + 1 - name));
	if (!u2 || memchr(u2 + 1, '_', n - (size_t)(u2 + 1 - name)))
		return false;
	if (!dns_label_valid(name, (size_t)(u1 - name)) ||
	    !dns_subdomain_valid(u1 + 1, (size_t)(u2 - u1 - 1)) ||
	    !uid_parse(u2 + 1, n - (size_t)(u2 + 1 - name), '-', uid))
		return false;
	copy_part(ret->namespace_, name, (size_t)(u1 - name));
	copy_part(ret->pod, u1 + 1, (size_t)(u2 - u1 - 1));
	ret->container[0] = 0;
	return true;
}

static char *join3(const char *root, const char *a, const char *b)
{
	return b ? strdup_printf("%s/%s/%s", root, a, b) : strdup_printf("%s/%s", root, a);
}

/*
 * The one container subdirectory of <log_root>/pods/<dir>, into @ret (64 bytes); "" when there
 * are none, several, or its name is not a container name. Returns 0, -ENOMEM or -errno.
 */
static int pod_single_container(const char *log_root, const char *dir, char *ret)
{
	char *path = join3(log_root, "pods", dir), name[64] = "";
	unsigned n = 0;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (!path)
		return -ENOMEM;
	d = opendir(path);
	if (!d) {
		r = -errno;
		goto out;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool is_dir = de->d_type == DT_DIR;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_UNKNOWN)
			is_dir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(st.st_mode);
		if (!is_dir)
			continue;
		if (n++ == 0 && dns_label_valid(de->d_name, strlen(de->d_name)))
			copy_part(name, de->d_name, strlen(de->d_name));
	}
	(void)closedir(d);
	if (n != 1)
		name[0] = 0;
	memcpy(ret, name, sizeof(name));
out:
	free(path);
	return r;
}

typedef bool scan_fn(const char *name, void *userdata);

/* Calls @fn for each entry of <log_root>/<sub> until it returns true. Returns 1 (stopped), 0 or
 * -errno. */
static int scan_dir(const char *log_root, const char *sub, scan_fn *fn, void *userdata)
{
	char *path = join3(log_root, sub, NULL);
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (!path)
		return -ENOMEM;
	d = opendir(path);
	free(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && fn(de->d_name, userdata)) {
			r = 1;
			break;
		}
	(void)closedir(d);
	return r;
}

struct find_ctx {
	const struct podmap_id *id;
	struct podmap_names names;
	char dir[256 + 64 + 48];
};

static bool find_container(const char *name, void *userdata)
{
	struct find_ctx *f = userdata;
	char cid[CID_LEN + 1];

	return parse_container_log(name, cid, &f->names) && strcmp(cid, f->id->container_id) == 0;
}

static bool find_pod(const char *name, void *userdata)
{
	struct find_ctx *f = userdata;
	char uid[40];

	if (!parse_pod_dir(name, uid, &f->names) || strcmp(uid, f->id->pod_uid) != 0)
		return false;
	(void)snprintf(f->dir, sizeof(f->dir), "%s", name);
	return true;
}

int podmap_resolve(const char *log_root, const struct podmap_id *id, struct podmap_names *ret)
{
	struct find_ctx f = { .id = id };
	int r, r2;

	if (id->kind != PODMAP_POD || !id->pod_uid[0])
		return -EINVAL;
	if (!log_root)
		log_root = "/var/log";
	r = id->container_id[0] ? scan_dir(log_root, "containers", find_container, &f) : -ENOENT;
	if (r > 0) {
		*ret = f.names;
		return 0;
	}
	r2 = scan_dir(log_root, "pods", find_pod, &f);
	if (r2 > 0) {
		r2 = pod_single_container(log_root, f.dir, f.names.container);
		if (r2 == -ENOMEM)
			return r2;
		*ret = f.names;
		return 0;
	}
	/* Neither names it: a real error of either directory wins over "not there". */
	if (r2 < 0 && r2 != -ENOENT)
		return r2;
	if (r < 0 && r != -ENOENT)
		return r;
	return -ENOENT;
}

/* --- the cache --- */

struct ctr_entry {
	char cid[CID_LEN + 1];
	struct podmap_names names;
};

struct pod_entry {
	char uid[40];
	bool counted; /* names.container holds the single container, or "" */
	struct podmap_names names;
	char dir[256 + 64 + 48];
};

struct podmap_cache {
	char *log_root;
	struct ctr_entry *ctrs;
	size_t n_ctrs, cap_ctrs;
	struct pod_entry *pods;
	size_t n_pods, cap_pods;
	bool reread_done; /* in this batch */
	uint64_t dir_reads;
};

int podmap_cache_new(const char *log_root, struct podmap_cache **ret)
{
	struct podmap_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->log_root = strdup(log_root ? log_root : "/var/log");
	if (!c->log_root) {
		free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

void podmap_cache_begin(struct podmap_cache *c)
{
	c->reread_done = false;
}

uint64_t podmap_cache_dir_reads(const struct podmap_cache *c)
{
	return c->dir_reads;
}

struct podmap_cache *podmap_cache_free(struct podmap_cache *c)
{
	if (!c)
		return NULL;
	free(c->ctrs);
	free(c->pods);
	free(c->log_root);
	free(c);
	return NULL;
}

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	p = reallocarray(*arr, nc, size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

/* The new tables, built beside the old ones and swapped in when both listings are done. */
struct reread_ctx {
	struct podmap_cache *c;
	struct ctr_entry *ctrs;
	size_t n_ctrs, cap_ctrs;
	struct pod_entry *pods;
	size_t n_pods, cap_pods;
	int r;
};

static bool add_container(const char *name, void *userdata)
{
	struct reread_ctx *x = userdata;
	struct ctr_entry e;

	if (x->n_ctrs >= CACHE_ENTRIES_MAX || !parse_container_log(name, e.cid, &e.names))
		return false;
	x->r = grow((void **)&x->ctrs, &x->cap_ctrs, x->n_ctrs, sizeof(e));
	if (x->r < 0)
		return true;
	x->ctrs[x->n_ctrs++] = e;
	return false;
}

static bool add_pod(const char *name, void *userdata)
{
	struct reread_ctx *x = userdata;
	struct pod_entry e = { 0 };

	if (x->n_pods >= CACHE_ENTRIES_MAX || !parse_pod_dir(name, e.uid, &e.names))
		return false;
	(void)snprintf(e.dir, sizeof(e.dir), "%s", name);
	x->r = grow((void **)&x->pods, &x->cap_pods, x->n_pods, sizeof(e));
	if (x->r < 0)
		return true;
	x->pods[x->n_pods++] = e;
	return false;
}

static int cmp_ctr(const void *a, const void *b)
{
	return strcmp(((const struct ctr_entry *)a)->cid, ((const struct ctr_entry *)b)->cid);
}

static int cmp_pod(const void *a, const void *b)
{
	return strcmp(((const struct pod_entry *)a)->uid, ((const struct pod_entry *)b)->uid);
}

static int cache_reread(struct podmap_cache *c)
{
	struct reread_ctx x = { .c = c };
	int r1, r2;

	c->reread_done = true;
	r1 = scan_dir(c->log_root, "containers", add_container, &x);
	c->dir_reads++;
	if (x.r == 0) {
		r2 = scan_dir(c->log_root, "pods", add_pod, &x);
		c->dir_reads++;
	} else {
		r2 = x.r;
	}
	if (x.r < 0) {
		free(x.ctrs);
		free(x.pods);
		return x.r;
	}
	if (x.n_ctrs)
		qsort(x.ctrs, x.n_ctrs, sizeof(*x.ctrs), cmp_ctr);
	if (x.n_pods)
		qsort(x.pods, x.n_pods, sizeof(*x.pods), cmp_pod);
	free(c->ctrs);
	free(c->pods);
	c->ctrs = x.ctrs;
	c->n_ctrs = x.n_ctrs;
	c->cap_ctrs = x.cap_ctrs;
	c->pods = x.pods;
	c->n_pods = x.n_pods;
	c->cap_pods = x.cap_pods;
	/* Both listings failed for a reason other than absence: say so. */
	if (r1 < 0 && r2 < 0)
		return r2 != -ENOENT ? r2 : r1;
	return 0;
}

static const struct ctr_entry *find_ctr(const struct podmap_cache *c, const char *cid)
{
	struct ctr_entry key;

	if (!c->n_ctrs || strlen(cid) != CID_LEN)
		return NULL;
	memcpy(key.cid, cid, CID_LEN + 1);
	return bsearch(&key, c->ctrs, c->n_ctrs, sizeof(key), cmp_ctr);
}

static struct pod_entry *find_pod_entry(const struct podmap_cache *c, const char *uid)
{
	struct pod_entry key;

	if (!c->n_pods)
		return NULL;
	(void)snprintf(key.uid, sizeof(key.uid), "%s", uid);
	return bsearch(&key, c->pods, c->n_pods, sizeof(key), cmp_pod);
}

int podmap_cache_resolve(struct podmap_cache *c, const struct podmap_id *id,
			 struct podmap_names *ret)
{
	const struct ctr_entry *ce;
	struct pod_entry *pe = NULL;
	int r = -ENOENT;

	if (id->kind != PODMAP_POD || !id->pod_uid[0])
		return -EINVAL;
	for (;;) {
		ce = id->container_id[0] ? find_ctr(c, id->container_id) : NULL;
		if (ce) {
			*ret = ce->names;
			return 0;
		}
		/* A new container of a known pod must not hide behind the pod's entry. */
		if (!(id->container_id[0] && !c->reread_done)) {
			pe = find_pod_entry(c, id->pod_uid);
			if (pe)
				break;
		}
		if (c->reread_done)
			return r;
		r = cache_reread(c);
		if (r == -ENOMEM)
			return r;
		if (r == 0)
			r = -ENOENT;
	}
	if (!pe->counted) {
		int k = pod_single_container(c->log_root, pe->dir, pe->names.container);

		c->dir_reads++;
		if (k == -ENOMEM)
			return k;
		pe->counted = true;
	}
	*ret = pe->names;
	return 0;
}
