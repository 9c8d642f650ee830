#pragma once

/*
 * The shared region of one gpumem container allocation: what every process of the container
 * has reserved on each of its GPUs. The device plugin creates and initialises it in Allocate
 * (region_create(), in <stateDir>/alloc/<name>/state/region on the host); the interposer of
 * each process in the container maps it (region_attach()) and reserves before it allocates.
 * The container never chooses its own limit: the limits come from the read-only limits file
 * (limits.h), which the interposer reads; the limits in the region are a copy for readers
 * (doctor, tests) and are checked against the file at attach.
 *
 * Layout (all fields naturally aligned, little-endian host order; one file, fixed size):
 *   header: magic, version, size of the whole struct, n_gpus, n_slots, the mutex
 *   gpus[REGION_GPUS_MAX]: UUID, limit, used (a cache of the sum over live slots), peak, OOMs
 *   slots[REGION_SLOTS]: (pid, start time) and what that process holds per GPU
 *
 * Concurrency: one process-shared, robust mutex (PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST)
 * guards every reservation, release and slot change. A process killed while holding it does
 * not wedge the others: the next locker gets EOWNERDEAD, recomputes every GPU's used from the
 * slots of live processes (the slots are the authority; gpus[].used is their sum), collects
 * dead slots, and marks the mutex consistent. Reading used/peak/oom without the lock is allowed
 * (atomic loads) for reporting.
 *
 * Processes: a slot is keyed by (pid, start time from /proc/<pid>/stat field 22), so a reused
 * PID is not mistaken for its dead predecessor. A slot is claimed at a process's first
 * reservation, starting from a hash of the PID (start-up cost flat in the number of
 * processes); dead slots are collected when a reservation would pass the limit, when no free
 * slot is found, and by region_collect() (cuMemGetInfo reporting), so a killed process's
 * memory comes back without anyone's help. A process that exits normally frees its slot.
 *
 * Not async-signal-safe. Thread-safe: one struct region_handle per process, shared by its
 * threads.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define REGION_MAGIC	UINT64_C(0x3147455250475045) /* "EPGPREG1" read as little-endian */
#define REGION_VERSION	1
#define REGION_GPUS_MAX 16
#define REGION_SLOTS	2048
#define REGION_UUID_MAX 96
#define REGION_FILE	"region" /* inside the state directory */

struct region_gpu {
	char uuid[REGION_UUID_MAX]; /* as in the limits file */
	uint64_t limit;		    /* bytes */
	uint64_t used;		    /* bytes reserved by live slots (atomic; the lock's cache) */
	uint64_t peak;		    /* highest used seen (atomic) */
	uint64_t ooms;		    /* reservations past the limit (atomic; report: not refused) */
};

struct region_slot {
	int32_t pid; /* 0: free (atomic) */
	uint32_t pad;
	uint64_t start_time; /* /proc/<pid>/stat field 22, clock ticks since boot */
	uint64_t used[REGION_GPUS_MAX];
};

struct region {
	uint64_t magic;
	uint32_t version;
	uint32_t size; /* sizeof(struct region) of the writer */
	uint32_t n_gpus;
	uint32_t n_slots;
	uint32_t flags; /* REGION_F_* */
	uint32_t pad;
	pthread_mutex_t lock; /* process-shared, robust */
	uint64_t generation;  /* bumped on every repair after EOWNERDEAD (tests read it) */
	struct region_gpu gpus[REGION_GPUS_MAX];
	struct region_slot slots[REGION_SLOTS];
};

/* Set by region_create() from the limits: reservations are counted but never refused. */
#define REGION_F_REPORT_ONLY (1u << 0)

struct region_init_gpu {
	const char *uuid;
	uint64_t limit; /* bytes */
};

/*
 * Plugin side. Creates @dir/region (dir must exist) with @n_gpus GPUs (<= REGION_GPUS_MAX),
 * initialised and fsync'ed, atomically: written to a temporary name in @dir and renamed, so a
 * process of the container never maps a half-initialised region. Mode 0666 (the container's
 * processes may run as any user). Returns 0, -EINVAL (n_gpus 0 or too many, a UUID too long),
 * or -errno from the file calls.
 */
int region_create(const char *dir, const struct region_init_gpu *gpus, size_t n_gpus,
		  bool report_only);

/*
 * Reads @path's header and checks magic, version and size without mapping it (doctor, tests).
 * Returns 0, -EBADMSG (not a region of this version), or -errno.
 */
int region_check_file(const char *path);

/* A process's view of a region: the mapping and its own slot. */
struct region_handle {
	struct region *r;
	int slot; /* -1: none claimed yet */
	pid_t pid;
	uint64_t start_time;
};

/*
 * Interposer side. Maps @path read-write (MAP_SHARED) after checking magic, version and size
 * (a region of another version is refused, never guessed at). Returns 0 and fills @h, -EBADMSG,
 * or -errno. The mapping lives until region_detach().
 */
int region_attach(const char *path, struct region_handle *h);
/* Frees this process's slot (releasing what it still holds) and unmaps. */
void region_detach(struct region_handle *h);

/*
 * Reserves @bytes on GPU @gpu (an index into r->gpus) for this process, claiming a slot
 * first if it has none. Atomic across processes: the sum of all live reservations never
 * passes the limit unless REGION_F_REPORT_ONLY. Returns 0, -ENOMEM (the limit would be
 * passed: the caller returns CUDA_ERROR_OUT_OF_MEMORY; r->gpus[gpu].ooms is bumped), -ENOSPC
 * (no slot even after collecting dead ones), -EINVAL (bad gpu), or -EOWNERDEAD never (repaired
 * inside).
 */
int region_reserve(struct region_handle *h, unsigned gpu, uint64_t bytes);
/* Gives back @bytes on @gpu (a rollback after a failed allocation, or a free). Never fails. */
void region_release(struct region_handle *h, unsigned gpu, uint64_t bytes);
/*
 * Collects the slots of dead processes (giving back what they held). Returns how many were
 * collected, or -errno from the lock.
 */
int region_collect(struct region_handle *h);
/* What live processes hold on @gpu now (after region_collect() if you need it fresh). */
uint64_t region_used(const struct region_handle *h, unsigned gpu);

/*
 * The process's start time (field 22 of /proc/<pid>/stat), or 0 when it cannot be read
 * (the process is gone). Used for slot keys and liveness.
 */
uint64_t region_proc_start_time(pid_t pid);

/*
 * Fork: the child must not share its parent's slot. Call from a pthread_atfork child handler:
 * the child claims its own slot at its first reservation.
 */
void region_forget_slot(struct region_handle *h);
