#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h> /* fchmod() only: never fstat() (see below) */
#include <unistd.h>

/*
 * This file is linked into libedgegpu-cuda.so, whose glibc floor is 2.17: no fstat()/stat()
 * (their 2.33 symbols), nothing newer than 2.17, and nothing that allocates on the
 * reserve/release path (it runs inside cuMemAlloc of any process). The sizes of the header
 * fields read before mapping are fixed by the layout in region.h.
 */

/* The fields region_check_file() reads with pread() before anything is mapped. */
struct region_head {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	uint32_t n_gpus;
	uint32_t n_slots;
	uint32_t flags;
	uint32_t pad;
};

_Static_assert(offsetof(struct region, lock) >= sizeof(struct region_head),
	       "the header read before mapping is a prefix of struct region");
/* NOLINTNEXTLINE(bugprone-sizeof-expression): a bound checked at build time, meant */
_Static_assert(sizeof(struct region) < UINT32_MAX, "the size fits the header's field");

#define LOAD(x)	    __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* Field 22 of /proc/<pid>/stat and the state (field 3) into @state; 0 when unreadable. */
static uint64_t proc_stat(pid_t pid, char *state)
{
	char path[32], buf[1024];
	const char *p, *end;
	unsigned field = 2; /* the comm field ends at the last ')' */
	uint64_t v = 0;
	ssize_t n;
	int dfd, fd;

	if (pid <= 0)
		return 0;
	/*
	 * Opened relative to /proc, not as "/proc/<pid>/stat": qemu-user answers that path for
	 * its own process (and "/proc/self/stat") with a stat line it makes up, whose start time
	 * is not the kernel's, so a process under qemu would record one start time for itself
	 * and every other process would read another, and take it for a reused PID.
	 */
	dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	(void)snprintf(path, sizeof(path), "%d/stat", (int)pid); /* 32 hold any pid */
	fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return 0;
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return 0;
	/*
	 * The comm field may hold spaces and parentheses (a process can name itself ") 1 2"):
	 * only the last ')' of the line ends it. Field 22 is well inside the first 1,024 bytes
	 * (comm is at most 64 bytes, fields 3-21 at most 20 digits each).
	 */
	p = memrchr(buf, ')', (size_t)n);
	if (!p)
		return 0;
	end = buf + n;
	if (end - p < 3)
		return 0;
	*state = p[2];
	for (p++; p < end && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field != 22 || p >= end || *p < '0' || *p > '9')
		return 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p >= end || *p != ' ')
		return 0; /* cut short: not the whole number */
	return v;
}

uint64_t region_proc_start_time(pid_t pid)
{
	char state;

	return proc_stat(pid, &state);
}

/*
 * Whether the process of @s is gone: no such PID, or the PID now belongs to a process that
 * started at another time (PID reuse), or a zombie. A PID we cannot look at (EPERM, /proc unreadable) is
 * taken as alive: holding its memory a while longer never lets the container pass its limit.
 */
static bool slot_dead(const struct region_slot *s)
{
	char state = 0;
	uint64_t st;

	if (kill(s->pid, 0) < 0 && errno == ESRCH)
		return true;
	st = proc_stat(s->pid, &state);
	/* A zombie no one has reaped yet holds no device memory either. */
	return st != 0 && (st != s->start_time || state == 'Z' || state == 'X');
}

/* Gives back what slot @i holds and frees it. Under the lock. */
static void slot_free(struct region *r, unsigned i)
{
	struct region_slot *s = &r->slots[i];

	for (unsigned g = 0; g < r->n_gpus; g++) {
		uint64_t used = LOAD(r->gpus[g].used);

		STORE(r->gpus[g].used, used - (s->used[g] < used ? s->used[g] : used));
		s->used[g] = 0;
	}
	s->start_time = 0;
	STORE(s->pid, 0);
}

/*
 * Frees the slots of dead processes (never @self's). Under the lock. Returns how many. @quick:
 * kill(pid, 0) alone, no /proc read, for the path of a reservation that would pass the limit
 * (a process retrying its allocations must not hold the lock for a /proc read per process);
 * a reused PID is found by the full collection (region_collect(), a full table, a repair).
 */
static int collect_locked(struct region *r, pid_t self, bool quick)
{
	int n = 0;

	for (unsigned i = 0; i < r->n_slots; i++) {
		struct region_slot *s = &r->slots[i];

		if (s->pid == 0 || s->pid == self)
			continue;
		if (quick ? kill(s->pid, 0) < 0 && errno == ESRCH : slot_dead(s)) {
			slot_free(r, i);
			n++;
		}
	}
	return n;
}

/*
 * After EOWNERDEAD: the dead owner may have stopped between changing its slot and the GPU's
 * counter. The slots are the authority: collect the dead ones, then make every GPU's used the
 * sum of what the live slots hold.
 */
static void repair_locked(struct region *r)
{
	(void)collect_locked(r, getpid(), false);
	for (unsigned g = 0; g < r->n_gpus; g++) {
		uint64_t sum = 0;

		for (unsigned i = 0; i < r->n_slots; i++)
			if (r->slots[i].pid != 0)
				sum += r->slots[i].used[g];
		STORE(r->gpus[g].used, sum);
		if (sum > LOAD(r->gpus[g].peak))
			STORE(r->gpus[g].peak, sum);
	}
	STORE(r->generation, LOAD(r->generation) + 1);
}

static int region_lock(struct region *r)
{
	int e = pthread_mutex_lock(&r->lock);

	if (e == EOWNERDEAD) {
		repair_locked(r);
		e = pthread_mutex_consistent(&r->lock);
		if (e) {
			(void)pthread_mutex_unlock(&r->lock);
			return -e;
		}
		return 0;
	}
	return -e;
}

static void region_unlock(struct region *r)
{
	(void)pthread_mutex_unlock(&r->lock);
}

/* Checks the header of the open region @fd, before any mapping. */
static int check_fd(int fd)
{
	struct region_head h;
	off_t size;
	ssize_t n;

	size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return -errno;
	do
		n = pread(fd, &h, sizeof(h), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(h) || h.magic != REGION_MAGIC || h.version != REGION_VERSION ||
	    h.size != sizeof(struct region) || (uint64_t)size != sizeof(struct region) ||
	    h.n_gpus == 0 || h.n_gpus > REGION_GPUS_MAX || h.n_slots == 0 ||
	    h.n_slots > REGION_SLOTS)
		return -EBADMSG;
	return 0;
}

int region_check_file(const char *path)
{
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = check_fd(fd);
	close(fd);
	return r;
}

static int init_lock(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int e;

	e = pthread_mutexattr_init(&a);
	if (e)
		return -e;
	e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!e)
		e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!e)
		e = pthread_mutex_init(m, &a);
	(void)pthread_mutexattr_destroy(&a);
	return -e;
}

int region_create(const char *dir, const struct region_init_gpu *gpus, size_t n_gpus,
		  bool report_only)
{
	char tmp[4096], path[4096];
	struct region *r = MAP_FAILED;
	int fd = -1, dfd, ret;

	if (n_gpus == 0 || n_gpus > REGION_GPUS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n_gpus; i++)
		if (!gpus[i].uuid || !gpus[i].uuid[0] || strlen(gpus[i].uuid) >= REGION_UUID_MAX)
			return -EINVAL;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, REGION_FILE) >= sizeof(tmp) ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, REGION_FILE) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* The container's processes may run as any user; a umask must not narrow this. */
	if (fchmod(fd, 0666) < 0 || ftruncate(fd, sizeof(struct region)) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	r = mmap(NULL, sizeof(struct region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		ret = -errno;
		goto out_unlink;
	}
	/* ftruncate() made it zeros: every slot free, every counter 0. */
	r->version = REGION_VERSION;
	r->size = sizeof(struct region);
	r->n_gpus = (uint32_t)n_gpus;
	r->n_slots = REGION_SLOTS;
	r->flags = report_only ? REGION_F_REPORT_ONLY : 0;
	for (size_t i = 0; i < n_gpus; i++) {
		memcpy(r->gpus[i].uuid, gpus[i].uuid, strlen(gpus[i].uuid) + 1);
		r->gpus[i].limit = gpus[i].limit;
	}
	ret = init_lock(&r->lock);
	if (ret < 0)
		goto out_unlink;
	r->magic = REGION_MAGIC;
	if (msync(r, sizeof(struct region), MS_SYNC) < 0 || fsync(fd) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	if (rename(tmp, path) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	/* The rename itself on disk: a node that reboots now finds the region or nothing. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	ret = 0;
	goto out;
out_unlink:
	(void)unlink(tmp);
out:
	if (r != MAP_FAILED)
		(void)munmap(r, sizeof(struct region));
	close(fd);
	return ret;
}

int region_attach(const char *path, struct region_handle *h)
{
	void *p;
	int fd, ret;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = check_fd(fd);
	if (ret < 0)
		goto out;
	p = mmap(NULL, sizeof(struct region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	*h = (struct region_handle){ .r = p, .slot = -1 };
out:
	close(fd);
	return ret;
}

/* Whether @h's slot is still its own (not collected by a process that took it for dead). */
static bool own_slot(const struct region_handle *h)
{
	return h->slot >= 0 && h->r->slots[h->slot].pid == h->pid &&
	       h->r->slots[h->slot].start_time == h->start_time;
}

/*
 * Claims a slot for (pid, st), starting at a hash of the PID and probing linearly, so that
 * hundreds of processes starting together each find a free slot in a step or two. Under the
 * lock. Returns the slot, or -ENOSPC.
 */
static int claim_locked(struct region *r, pid_t pid, uint64_t st)
{
	unsigned n = r->n_slots, start = ((uint32_t)pid * 2654435761u) % n;

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned k = 0; k < n; k++) {
			unsigned i = (start + k) % n;
			struct region_slot *s = &r->slots[i];

			if (s->pid == pid)
				slot_free(
					r,
					i); /* our PID's earlier process: dead, or us after exec */
			if (s->pid != 0)
				continue;
			s->start_time = st;
			memset(s->used, 0, sizeof(s->used));
			STORE(s->pid, (int32_t)pid);
			return (int)i;
		}
		if (collect_locked(r, pid, false) == 0)
			break;
	}
	return -ENOSPC;
}

int region_reserve(struct region_handle *h, unsigned gpu, uint64_t bytes)
{
	struct region *r = h->r;
	struct region_gpu *g;
	bool report_only;
	uint64_t used;
	pid_t pid = 0;
	uint64_t st = 0;
	int ret;

	if (gpu >= r->n_gpus)
		return -EINVAL;
	if (bytes == 0)
		return 0;
	/* The /proc read of the first reservation stays outside the lock. */
	if (h->slot < 0 || !own_slot(h)) {
		pid = getpid();
		st = region_proc_start_time(pid);
	}
	ret = region_lock(r);
	if (ret < 0)
		return ret;
	if (!own_slot(h)) {
		if (pid == 0) {
			/* Collected since the look above (taken for dead): rare, read /proc here. */
			pid = getpid();
			st = region_proc_start_time(pid);
		}
		ret = claim_locked(r, pid, st);
		if (ret < 0)
			goto out;
		h->pid = pid;
		h->start_time = st;
		h->slot = ret;
	}
	g = &r->gpus[gpu];
	report_only = r->flags & REGION_F_REPORT_ONLY;
	used = g->used;
	if (bytes > UINT64_MAX - used || used + bytes > g->limit) {
		/*
		 * A dead process may hold what we need: look before refusing. Not in report mode,
		 * where a container over its limit would pay the look on every allocation.
		 */
		if (!report_only && collect_locked(r, h->pid, true) > 0)
			used = g->used;
		if (bytes > UINT64_MAX - used || used + bytes > g->limit) {
			STORE(g->ooms, g->ooms + 1);
			if (bytes > UINT64_MAX - used || !report_only) {
				ret = -ENOMEM;
				goto out;
			}
		}
	}
	used += bytes;
	r->slots[h->slot].used[gpu] += bytes;
	STORE(g->used, used);
	if (used > g->peak)
		STORE(g->peak, used);
	ret = 0;
out:
	region_unlock(r);
	return ret;
}

void region_release(struct region_handle *h, unsigned gpu, uint64_t bytes)
{
	struct region *r = h->r;
	struct region_slot *s;
	uint64_t n, used;

	if (gpu >= r->n_gpus || bytes == 0 || h->slot < 0)
		return;
	if (region_lock(r) < 0)
		return;
	/* A slot collected under us: what it held was given back then. */
	if (!own_slot(h))
		goto out;
	s = &r->slots[h->slot];
	n = bytes < s->used[gpu] ? bytes : s->used[gpu];
	s->used[gpu] -= n;
	used = r->gpus[gpu].used;
	STORE(r->gpus[gpu].used, used - (n < used ? n : used));
out:
	region_unlock(r);
}

int region_collect(struct region_handle *h)
{
	int n, ret;

	ret = region_lock(h->r);
	if (ret < 0)
		return ret;
	n = collect_locked(h->r, getpid(), false);
	region_unlock(h->r);
	return n;
}

uint64_t region_used(const struct region_handle *h, unsigned gpu)
{
	if (gpu >= h->r->n_gpus)
		return 0;
	return LOAD(h->r->gpus[gpu].used);
}

void region_detach(struct region_handle *h)
{
	if (!h->r)
		return;
	if (h->slot >= 0 && region_lock(h->r) == 0) {
		if (own_slot(h))
			slot_free(h->r, (unsigned)h->slot);
		region_unlock(h->r);
	}
	(void)munmap(h->r, sizeof(struct region));
	*h = (struct region_handle){ .slot = -1 };
}

void region_forget_slot(struct region_handle *h)
{
	h->slot = -1;
	h->pid = 0;
	h->start_time = 0;
}
