/*
 * podmap-read.c: every read of the host's files for podmap.h: a process's cgroup file, the
 * kubelet's log directories, and the cache that spares a batch what the last one read. Each
 * read is bounded (podmap_limits), refuses what is not a regular file before opening it, and
 * opens nothing below a root through a symlink (O_NOFOLLOW on each single component).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-read.h"
#include "podmap.h"

#define CID_LEN 64
/* A miss is trusted while its directory is unchanged, for at most this long. */
#define MISS_TTL (60 * USEC_PER_SEC)

/*
 * Opens the directory @name of @dfd without following a link: -ELOOP when @name is a link,
 * -EINVAL when it is another kind of file, else -errno of openat().
 */
static int open_dir_at(int dfd, const char *name)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0)
		return fd;
	if (errno != ENOTDIR && errno != ELOOP)
		return -errno;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return S_ISLNK(st.st_mode) ? -ELOOP : -EINVAL;
}

/* A root given by the operator: links followed. Returns an fd or -errno. */
static int open_root(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);

	return fd < 0 ? -errno : fd;
}

/* A pid the proc root does not hold. */
static void id_no_proc(struct podmap_id *id)
{
	memset(id, 0, sizeof(*id));
	id->kind = PODMAP_NO_PROC;
	id->runtime = "";
}

int podmap_read_pid_at(int proc_fd, int pid, size_t max, struct podmap_id *ret)
{
	char name[16], *text = NULL;
	struct podmap_id id;
	size_t len = 0;
	bool cut = false;
	int dfd = -1, r;

	if (pid <= 0)
		return -EINVAL;
	if (!max)
		max = PODMAP_CGROUP_BYTES;
	(void)snprintf(name, sizeof(name), "%d", pid);
	dfd = open_dir_at(proc_fd, name);
	if (dfd < 0) {
		r = dfd;
		goto out;
	}
	/* Refused before it is opened: opening a FIFO blocks, opening a device may act. */
	r = read_file_at(dfd, "cgroup", READ_NOFOLLOW | READ_PREFIX, max, &text, &len, NULL);
	if (r == -EISDIR || r == -EBADFD)
		r = -EINVAL;
	if (r < 0)
		goto out;
	cut = r == 1;
	/* Read in part: its last line may be cut anywhere, so it is left out. */
	while (cut && len > 0 && text[len - 1] != '\n')
		len--;
	r = podmap_parse_cgroup(text, len, &id);
	if (cut)
		r = r == 0 && id.kind == PODMAP_POD ? 1 : -EFBIG;
	if (r >= 0)
		*ret = id;
out:
	if (r == -ENOENT || r == -ESRCH) {
		id_no_proc(ret);
		r = 0;
	}
	free(text);
	fd_close(dfd);
	return r;
}

/* /proc/<pid>/stat is one line of a few hundred bytes; comm is at most 64 of them. */
#define STAT_MAX 1024

int podmap_parse_start_time(const char *text, size_t len, uint64_t *ret)
{
	const char *p = NULL, *end = text + len;
	unsigned tok = 0;

	/* comm may hold spaces and ')': the fields start after its last ')'. */
	for (const char *s = text; s < end; s++)
		if (*s == ')')
			p = s + 1;
	if (!p)
		return -EBADMSG;
	/* after "pid (comm)", " state" is token 0 (field 3): starttime (field 22) is token 19 */
	for (; p < end; p++) {
		uint64_t v = 0;
		bool digits = false;

		if (*p != ' ')
			continue;
		if (tok++ != 19)
			continue;
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			if (v > (UINT64_MAX - 9) / 10)
				return -EBADMSG;
			v = v * 10 + (uint64_t)(*p - '0');
			digits = true;
		}
		if (!digits || (p < end && *p != ' ' && *p != '\n'))
			return -EBADMSG;
		*ret = v;
		return 0;
	}
	return -EBADMSG;
}

int podmap_read_start_time_at(int proc_fd, int pid, uint64_t *ret)
{
	char name[16], *text = NULL;
	size_t len = 0;
	int dfd, r;

	if (pid <= 0)
		return -EINVAL;
	(void)snprintf(name, sizeof(name), "%d", pid);
	dfd = open_dir_at(proc_fd, name);
	if (dfd < 0)
		return dfd == -ELOOP || dfd == -EINVAL ? dfd : -ESRCH;
	r = read_file_at(dfd, "stat", READ_NOFOLLOW | READ_PREFIX, STAT_MAX, &text, &len, NULL);
	fd_close(dfd);
	if (r == -ENOENT || r == -ESRCH)
		return -ESRCH;
	if (r == -EISDIR || r == -EBADFD)
		return -EINVAL;
	if (r < 0)
		return r;
	r = podmap_parse_start_time(text, len, ret);
	free(text);
	return r;
}

/* --- the cache --- */

enum entry_state {
	ENTRY_UNKNOWN, /* not looked up yet */
	ENTRY_FOUND,
	ENTRY_MISSING, /* not in its directory's last complete listing */
};

struct ctr_entry {
	char cid[CID_LEN + 1];
	enum entry_state state;
	struct podmap_names names;
};

/*
 * The last listing of a directory: what it found holds while the directory is unchanged (for
 * containers/ and pods/, their misses; for a pod's directory, its container).
 */
struct dir_seen {
	bool valid; /* final, and the directory had not changed for a second then */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	usec_t at; /* containers/ and pods/ are listed again MISS_TTL after */
};

struct pod_entry {
	char uid[40];
	enum entry_state state;
	struct podmap_names names; /* container: the directory's one container, or "" */
	char dir[NAME_MAX + 1];
	bool counted;	      /* names.container is what the directory below held */
	struct dir_seen seen; /* that directory, when it was counted */
};

struct podmap_cache {
	char *proc_root, *log_root;
	struct ctr_entry *ctrs; /* by cid */
	size_t n_ctrs;
	struct pod_entry *pods; /* by uid */
	size_t n_pods;
	struct dir_seen seen_ctrs, seen_pods;
	uint64_t dir_reads;
};

int podmap_cache_new(const char *proc_root, const char *log_root, struct podmap_cache **ret)
{
	struct podmap_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->proc_root = strdup(proc_root ? proc_root : "/proc");
	c->log_root = strdup(log_root ? log_root : "/var/log");
	if (!c->proc_root || !c->log_root) {
		podmap_cache_free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

uint64_t podmap_cache_dir_reads(const struct podmap_cache *c)
{
	return c->dir_reads;
}

size_t podmap_cache_entries(const struct podmap_cache *c)
{
	return c->n_ctrs + c->n_pods;
}

struct podmap_cache *podmap_cache_free(struct podmap_cache *c)
{
	if (!c)
		return NULL;
	free(c->ctrs);
	free(c->pods);
	free(c->proc_root);
	free(c->log_root);
	free(c);
	return NULL;
}

static int cmp_ctr(const void *a, const void *b)
{
	return strcmp(((const struct ctr_entry *)a)->cid, ((const struct ctr_entry *)b)->cid);
}

static int cmp_pod(const void *a, const void *b)
{
	return strcmp(((const struct pod_entry *)a)->uid, ((const struct pod_entry *)b)->uid);
}

/* Sorts @n elements and drops the duplicates; returns how many are left. */
static size_t sort_unique(void *arr, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *a = arr;
	size_t k = 0;

	if (n == 0)
		return 0;
	qsort(a, n, size, cmp);
	for (size_t i = 1; i < n; i++)
		if (cmp(a + k * size, a + i * size) != 0 && ++k != i)
			memcpy(a + k * size, a + i * size, size);
	return k + 1;
}

/*
 * Sorts the @n entries a batch wants and drops the duplicates; each then takes what @known
 * (@n_known, sorted: the cache) knew of it. Returns how many are left.
 */
static size_t want_from(void *arr, size_t n, size_t size, int (*cmp)(const void *, const void *),
			const void *known, size_t n_known)
{
	char *a = arr;

	n = sort_unique(arr, n, size, cmp);
	for (size_t i = 0; i < n && n_known; i++) {
		const void *old = bsearch(a + i * size, known, n_known, size, cmp);

		if (old)
			memcpy(a + i * size, old, size);
	}
	return n;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * Whether @st had not changed for a second: an entry added in the same timestamp tick as the
 * last change, but after a listing, would leave the mtime as the listing saw it.
 */
static bool settled(const struct stat *st)
{
	usec_t wall = wall_usec();

	return st->st_mtim.tv_sec >= 0 && (usec_t)st->st_mtim.tv_sec < wall / USEC_PER_SEC - 1;
}

/* Whether the directory @st is the one @s saw, unchanged since, and that listing was final. */
static bool seen_same(const struct dir_seen *s, const struct stat *st)
{
	return s->valid && s->dev == st->st_dev && s->ino == st->st_ino &&
	       same_time(&s->mtime, &st->st_mtim);
}

/* A listing of @st; @final: what it found holds while the directory does not change. */
static void seen_set(struct dir_seen *s, const struct stat *st, bool final)
{
	s->valid = final && settled(st);
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->mtime = st->st_mtim;
	s->at = now_usec();
}

struct batch {
	struct podmap_cache *c;
	struct podmap_limits lim;
	struct podmap_stats *st;
	int log_fd;  /* or -errno when it cannot be opened; valid once log_opened */
	int pods_fd; /* <log_root>/pods, the same; valid once pods_opened */
	bool log_opened, pods_opened;
	bool timed_out;
};

static bool past_deadline(struct batch *b)
{
	if (!b->timed_out && b->lim.deadline && now_usec() >= b->lim.deadline) {
		b->timed_out = true;
		b->st->cuts[PODMAP_CUT_TIME]++;
	}
	return b->timed_out;
}

/* Opens <log_root>/@sub (not through a link). Returns an fd or -errno. */
static int open_log_dir(struct batch *b, const char *sub)
{
	int r;

	if (!b->log_opened) {
		b->log_fd = open_root(b->c->log_root);
		b->log_opened = true;
	}
	if (b->log_fd < 0)
		return b->log_fd;
	r = open_dir_at(b->log_fd, sub);
	if (r == -ELOOP)
		b->st->cuts[PODMAP_CUT_LINK]++;
	return r;
}

/* <log_root>/pods, opened once a batch: the batch's fd, or -errno. */
static int pods_dir(struct batch *b)
{
	if (!b->pods_opened) {
		b->pods_fd = open_log_dir(b, "pods");
		b->pods_opened = true;
	}
	return b->pods_fd;
}

typedef void entry_fn(struct batch *b, DIR *d, const struct dirent *de, void *userdata);

/*
 * Calls @fn for each entry of the directory @fd (not owned) but "." and "..", at most @cap.
 * Returns 0 when every entry was seen, -E2BIG past @cap, -ETIMEDOUT past the deadline, or
 * -errno.
 */
static int list_dir(struct batch *b, int fd, unsigned cap, entry_fn *fn, void *userdata)
{
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3), r = 0;
	unsigned seen = 0;
	struct dirent *de;
	DIR *d;

	if (dup_fd < 0)
		return -errno;
	d = fdopendir(dup_fd);
	if (!d) {
		r = -errno;
		fd_close(dup_fd);
		return r;
	}
	b->c->dir_reads++;
	b->st->dir_reads++;
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			r = errno ? -errno : 0;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		b->st->entries++;
		if (seen++ == cap) {
			b->st->cuts[PODMAP_CUT_DIR_ENTRIES]++;
			r = -E2BIG;
			break;
		}
		if (seen % 64 == 0 && past_deadline(b)) {
			r = -ETIMEDOUT;
			break;
		}
		fn(b, d, de, userdata);
	}
	(void)closedir(d);
	return r;
}

/* DT_DIR, DT_LNK, ... of an entry; fstatat() where the file system does not say. */
static unsigned entry_type(DIR *d, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type;
	if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return DT_UNKNOWN;
	return S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
}

struct wanted {
	struct ctr_entry *ctrs;
	size_t n_ctrs;
	struct pod_entry *pods;
	size_t n_pods;
};

static void on_container_link(struct batch *b, DIR *d, const struct dirent *de, void *userdata)
{
	struct wanted *w = userdata;
	struct ctr_entry key, *e;

	if (!podmap_parse_container_log(de->d_name, key.cid, &key.names))
		return;
	e = bsearch(&key, w->ctrs, w->n_ctrs, sizeof(key), cmp_ctr);
	if (!e || e->state == ENTRY_FOUND)
		return;
	e->state = ENTRY_FOUND;
	e->names = key.names;
}

static void on_pod_dir(struct batch *b, DIR *d, const struct dirent *de, void *userdata)
{
	struct wanted *w = userdata;
	struct pod_entry *e;
	char uid[40];
	struct podmap_names names;
	unsigned type;

	if (!podmap_parse_pod_dir(de->d_name, uid, &names))
		return;
	e = bsearch(uid, w->pods, w->n_pods, sizeof(*e), cmp_pod);
	if (!e || e->state == ENTRY_FOUND)
		return;
	/* The kubelet makes directories: a link may lead anywhere, and is not followed. */
	type = entry_type(d, de);
	if (type == DT_LNK)
		b->st->cuts[PODMAP_CUT_LINK]++;
	if (type != DT_DIR)
		return;
	e->state = ENTRY_FOUND;
	e->names = names;
	e->counted = false;
	(void)snprintf(e->dir, sizeof(e->dir), "%s", de->d_name);
}

/*
 * Lists containers/ (or pods/, @pods) for the entries of @w it is to find, unless its misses
 * still hold.
 */
static int lookup(struct batch *b, struct dir_seen *seen, bool pods, struct wanted *w)
{
	size_t n = pods ? w->n_pods : w->n_ctrs;
	bool unknown = false, missing = false;
	struct stat st;
	int fd, r;

	for (size_t i = 0; i < n; i++) {
		enum entry_state s = pods ? w->pods[i].state : w->ctrs[i].state;

		unknown |= s == ENTRY_UNKNOWN;
		missing |= s == ENTRY_MISSING;
	}
	if (!unknown && !missing)
		return 0;
	if (past_deadline(b))
		return -ETIMEDOUT;
	fd = pods ? pods_dir(b) : open_log_dir(b, "containers");
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	r = 0;
	if (!unknown && seen_same(seen, &st) && now_usec() - seen->at < MISS_TTL)
		goto out;
	r = list_dir(b, fd, b->lim.dir_entries, pods ? on_pod_dir : on_container_link, w);
	seen_set(seen, &st, r == 0);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		enum entry_state *s = pods ? &w->pods[i].state : &w->ctrs[i].state;

		if (*s != ENTRY_FOUND)
			*s = ENTRY_MISSING;
	}
out:
	if (!pods)
		fd_close(fd);
	return r;
}

struct count_ctx {
	unsigned dirs;
	char name[64];
};

static void on_pod_entry(struct batch *b, DIR *d, const struct dirent *de, void *userdata)
{
	struct count_ctx *x = userdata;

	/* Container directories only: a link is not a container, wherever it leads. */
	if (entry_type(d, de) != DT_DIR)
		return;
	/* A valid name has at most 63 bytes. */
	if (x->dirs++ == 0 && podmap_container_name_valid(de->d_name))
		(void)snprintf(x->name, sizeof(x->name), "%.63s", de->d_name);
}

/*
 * Names the one container subdirectory of @e's directory in @e ("" for none, several, or more
 * entries than the cap), unless it was counted and is unchanged. Returns 0, -ETIMEDOUT, or
 * -errno of opening it (-ELOOP: it is a link now).
 */
static int count_containers(struct batch *b, int pods_fd, struct pod_entry *e)
{
	struct count_ctx x = { 0 };
	struct stat st;
	int fd = open_dir_at(pods_fd, e->dir), r;

	if (fd == -ELOOP)
		b->st->cuts[PODMAP_CUT_LINK]++;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	r = 0;
	if (e->counted && seen_same(&e->seen, &st))
		goto out;
	if (past_deadline(b)) {
		r = -ETIMEDOUT;
		goto out;
	}
	r = list_dir(b, fd, b->lim.pod_dir_entries, on_pod_entry, &x);
	if (r == -ETIMEDOUT)
		goto out;
	if (r < 0 || x.dirs != 1)
		x.name[0] = 0;
	memcpy(e->names.container, x.name, sizeof(x.name));
	e->counted = true;
	/* A directory past the cap is not listed again until it changes. */
	seen_set(&e->seen, &st, r == 0 || r == -E2BIG);
	r = 0;
out:
	fd_close(fd);
	return r;
}

static void count_read(struct podmap_stats *st, int r)
{
	if (r == 1 || r == -EFBIG)
		st->cuts[PODMAP_CUT_CGROUP_SIZE]++;
	else if (r == -ELOOP)
		st->cuts[PODMAP_CUT_LINK]++;
	else if (r == -EINVAL)
		st->cuts[PODMAP_CUT_NOT_REGULAR]++;
}

/* Step 1: each process's cgroup. */
static int read_cgroups(struct batch *b, struct podmap_query *q, size_t n)
{
	int proc_fd = open_root(b->c->proc_root);

	for (size_t i = 0; i < n; i++) {
		q[i].names_r = -EINVAL;
		if (q[i].pid == 0 || q[i].pid > INT_MAX) {
			q[i].r = -EINVAL; /* not a pid: nothing to read */
			continue;
		}
		if (proc_fd == -ENOENT) {
			id_no_proc(&q[i].id); /* no proc root: no process is in it */
			q[i].r = 0;
		} else if (proc_fd < 0) {
			q[i].r = proc_fd;
		} else if (past_deadline(b)) {
			q[i].r = -ETIMEDOUT;
		} else {
			q[i].r = podmap_read_pid_at(proc_fd, (int)q[i].pid, b->lim.cgroup_bytes,
						    &q[i].id);
		}
		if (q[i].r == -ENOMEM) {
			fd_close(proc_fd);
			return -ENOMEM;
		}
		count_read(b->st, q[i].r);
	}
	fd_close(proc_fd);
	return 0;
}

static bool names_pod(const struct podmap_query *q)
{
	return q->r >= 0 && q->id.kind == PODMAP_POD && q->id.pod_uid[0];
}

/* The entries the batch wants, with what the cache knew of them. */
static int want_containers(const struct podmap_cache *c, const struct podmap_query *q, size_t n,
			   struct wanted *w)
{
	w->ctrs = calloc(n + 1, sizeof(*w->ctrs));
	if (!w->ctrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (names_pod(&q[i]) && q[i].id.container_id[0])
			(void)snprintf(w->ctrs[w->n_ctrs++].cid, CID_LEN + 1, "%s",
				       q[i].id.container_id);
	w->n_ctrs = want_from(w->ctrs, w->n_ctrs, sizeof(*w->ctrs), cmp_ctr, c->ctrs, c->n_ctrs);
	return 0;
}

static const struct ctr_entry *find_ctr(const struct wanted *w, const char *cid)
{
	struct ctr_entry key;

	if (!w->n_ctrs || strlen(cid) != CID_LEN)
		return NULL;
	memcpy(key.cid, cid, CID_LEN + 1);
	return bsearch(&key, w->ctrs, w->n_ctrs, sizeof(key), cmp_ctr);
}

/* A process's container named by a link, or NULL. */
static const struct ctr_entry *ctr_found(const struct wanted *w, const struct podmap_query *q)
{
	const struct ctr_entry *e = q->id.container_id[0] ? find_ctr(w, q->id.container_id) : NULL;

	return e && e->state == ENTRY_FOUND ? e : NULL;
}

/* The pods of the processes no link names. */
static int want_pods(const struct podmap_cache *c, const struct podmap_query *q, size_t n,
		     struct wanted *w)
{
	w->pods = calloc(n + 1, sizeof(*w->pods));
	if (!w->pods)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (names_pod(&q[i]) && !ctr_found(w, &q[i]))
			(void)snprintf(w->pods[w->n_pods++].uid, sizeof(w->pods->uid), "%s",
				       q[i].id.pod_uid);
	w->n_pods = want_from(w->pods, w->n_pods, sizeof(*w->pods), cmp_pod, c->pods, c->n_pods);
	return 0;
}

/* Step 3: the container of each pod found, where no link named the process's. */
static int count_pods(struct batch *b, struct wanted *w)
{
	int r = 0;

	for (size_t i = 0; i < w->n_pods; i++) {
		struct pod_entry *e = &w->pods[i];
		int fd;

		if (e->state != ENTRY_FOUND)
			continue;
		fd = pods_dir(b);
		if (fd < 0)
			return fd;
		r = count_containers(b, fd, e);
		if (r == -ETIMEDOUT)
			break;
		/* Gone, or a link now: the pod is named, its container is not. */
		if (r < 0) {
			e->names.container[0] = 0;
			e->counted = false;
		}
		r = 0;
	}
	return r;
}

static void fill_names(struct batch *b, struct podmap_query *q, size_t n, const struct wanted *w)
{
	for (size_t i = 0; i < n; i++) {
		const struct ctr_entry *ce;
		const struct pod_entry *pe;
		struct pod_entry key;

		if (!names_pod(&q[i]))
			continue;
		ce = ctr_found(w, &q[i]);
		if (ce) {
			q[i].names = ce->names;
			q[i].names_r = 0;
			continue;
		}
		(void)snprintf(key.uid, sizeof(key.uid), "%s", q[i].id.pod_uid);
		pe = w->n_pods ? bsearch(&key, w->pods, w->n_pods, sizeof(key), cmp_pod) : NULL;
		if (pe && pe->state == ENTRY_FOUND && (pe->counted || !b->timed_out)) {
			q[i].names = pe->names;
			q[i].names_r = 0;
		} else {
			q[i].names_r = b->timed_out ? -ETIMEDOUT : -ENOENT;
		}
	}
}

int podmap_cache_map(struct podmap_cache *c, struct podmap_query *q, size_t n,
		     const struct podmap_limits *lim, struct podmap_stats *st)
{
	struct batch b = { .c = c, .st = st, .log_fd = -EBADF, .pods_fd = -EBADF };
	struct wanted w = { 0 };
	int r;

	if (lim)
		b.lim = *lim;
	if (!b.lim.cgroup_bytes)
		b.lim.cgroup_bytes = PODMAP_CGROUP_BYTES;
	if (!b.lim.dir_entries)
		b.lim.dir_entries = PODMAP_DIR_ENTRIES;
	if (!b.lim.pod_dir_entries)
		b.lim.pod_dir_entries = PODMAP_POD_DIR_ENTRIES;
	r = read_cgroups(&b, q, n);
	if (r < 0)
		goto out;
	r = want_containers(c, q, n, &w);
	if (r < 0)
		goto out;
	/* Neither a listing that failed nor one cut short fails the batch: its misses say so. */
	(void)lookup(&b, &c->seen_ctrs, false, &w);
	r = want_pods(c, q, n, &w);
	if (r < 0)
		goto out;
	(void)lookup(&b, &c->seen_pods, true, &w);
	(void)count_pods(&b, &w);
	fill_names(&b, q, n, &w);
	/* What this batch asked for is what the cache keeps. */
	free(c->ctrs);
	free(c->pods);
	c->ctrs = w.ctrs;
	c->n_ctrs = w.n_ctrs;
	c->pods = w.pods;
	c->n_pods = w.n_pods;
	w.ctrs = NULL;
	w.pods = NULL;
out:
	free(w.ctrs);
	free(w.pods);
	fd_close(b.pods_fd);
	fd_close(b.log_fd);
	return r;
}
