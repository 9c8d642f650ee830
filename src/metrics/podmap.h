#pragma once

/*
 * podmap: which pod and container a process belongs to, from files only. The container and pod
 * come from the process's cgroup path (/proc/<pid>/cgroup), their names from the kubelet's log
 * directories (/var/log/containers symlinks, /var/log/pods directories), so no API server, CRI
 * socket or pod-resources call is needed.
 *
 * Cgroup paths understood (cgroup v1 controller lines, the v2 "0::" line, or both):
 *   cgroupfs driver:  /kubepods[/<qos>]/pod<uid>/<cid>          (containerd, Docker, k3s)
 *                     /kubepods[/<qos>]/pod<uid>/crio-<cid>     (CRI-O)
 *   systemd driver:   /kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_>.slice/
 *                     {cri-containerd,crio,docker}-<cid>.scope
 * with <qos> besteffort or burstable (Guaranteed pods have no QoS level), <uid_> the UID with '_'
 * for '-', and anything before "kubepods" (a cgroup namespace shows "/../.."; kind and nested
 * setups a parent slice). A "crio-conmon-<cid>.scope" is CRI-O's monitor, not the container: it
 * maps to the pod with no container. Pod UIDs are 36-character dashed UUIDs, or 32 hex digits for
 * static pods; container IDs 64 hex digits.
 *
 * The host's files are read as a hostile tree: every read is bounded (bytes per cgroup file,
 * entries per directory listing, a deadline for the whole batch), nothing but a regular file is
 * ever read (a FIFO, device or socket is refused before it is opened, and opened O_NONBLOCK),
 * and no symlink is ever followed below the two roots given (the log tree's container links
 * are only named, never opened). The reads block in the kernel like any file read, so a batch
 * belongs on a thread of its own, never on the event loop (metrics-pods.c runs it so).
 *
 * No global state; thread-compatible. Nothing here logs.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Defaults of struct podmap_limits (a field left 0 takes them). */
#define PODMAP_CGROUP_BYTES    ((size_t)16 * 1024) /* real files: a few hundred bytes */
#define PODMAP_DIR_ENTRIES     131072 /* containers/, pods/: one per container or pod */
#define PODMAP_POD_DIR_ENTRIES 1024   /* a pod's directory: one per container */

enum podmap_kind {
	PODMAP_POD,	/* in a pod's cgroup */
	PODMAP_HOST,	/* in no Kubernetes pod cgroup */
	PODMAP_NO_PROC, /* the pid is not in the proc root read */
};

struct podmap_id {
	enum podmap_kind kind;
	char pod_uid[40];      /* "0f1e..-..." dashed form, "" when the cgroup names none */
	char container_id[80]; /* 64 hex, "" when none */
	const char *runtime;   /* static: "containerd", "cri-o", "docker", "" */
};

/*
 * Parses the text of /proc/<pid>/cgroup (@len bytes, need not be NUL-terminated). PODMAP_POD
 * when a pod is found (container_id may be "" for the pause container, a pod-level cgroup or
 * conmon), else PODMAP_HOST. When several lines name a pod (cgroup v1), the first that names a
 * container wins. Returns 0, or -EBADMSG when no line has the "<id>:<controllers>:/<path>" form
 * (*@ret is then untouched). Pure.
 */
int podmap_parse_cgroup(const char *text, size_t len, struct podmap_id *ret) WARN_UNUSED;

/*
 * Reads <@proc_fd>/<pid>/cgroup: "<pid>" must be a directory and "cgroup" a regular file, neither
 * a symlink; at most @max bytes are read (0: PODMAP_CGROUP_BYTES). A longer file is parsed up to
 * its last whole line. A pid that is not there (ENOENT, ESRCH) gives kind PODMAP_NO_PROC.
 * Returns 0; 1 when the file was longer than @max and its start names a pod (that is *@ret);
 * -EFBIG when it was longer and its start names none (what follows is unknown); -EINVAL (pid <= 0,
 * "<pid>" not a directory, or "cgroup" not a regular file: a FIFO, device, socket, directory);
 * -ELOOP ("<pid>" or "cgroup" is a symlink); -EBADMSG (no cgroup line); -ENOMEM; or -errno of
 * open/read. *@ret is set when it returns >= 0.
 */
int podmap_read_pid_at(int proc_fd, int pid, size_t max, struct podmap_id *ret) WARN_UNUSED;

/*
 * The start time of a process (field 22 of /proc/<pid>/stat, clock ticks since boot), which
 * with the pid names one process for good (a pid is reused, the pair is not). Pure parse of
 * @len bytes of that file's text: 0, or -EBADMSG. The read: "<pid>" a directory and "stat" a
 * regular file in @proc_fd, neither a symlink, at most 1 KiB read. Returns 0, -ESRCH (no such
 * process), -EINVAL (pid <= 0, or not a directory / regular file), -ELOOP, -EBADMSG, -ENOMEM
 * or -errno of the read.
 */
int podmap_parse_start_time(const char *text, size_t len, uint64_t *ret) WARN_UNUSED;
int podmap_read_start_time_at(int proc_fd, int pid, uint64_t *ret) WARN_UNUSED;

struct podmap_names {
	char namespace_[64];
	char pod[256];
	char container[64];
};

/*
 * The kubelet's names, pure: a /var/log/containers entry "<pod>_<namespace>_<container>-<cid>.log"
 * (@ret_cid: 65 bytes) and a /var/log/pods entry "<namespace>_<pod>_<uid>" (@ret_uid: 40 bytes,
 * the dashed form; names.container ""). False when the name breaks the kubelet's rules (DNS
 * names, no '_' inside a part, a 64-hex ID, a UUID, sizes); the out-parameters are then
 * unspecified.
 */
bool podmap_parse_container_log(const char *name, char *ret_cid, struct podmap_names *ret);
bool podmap_parse_pod_dir(const char *name, char *ret_uid, struct podmap_names *ret);
/* A container name (a pod directory's subdirectory): an RFC 1123 label. */
bool podmap_container_name_valid(const char *name);

/* Limits of one podmap_cache_map() batch; zero fields take the PODMAP_* defaults. */
struct podmap_limits {
	usec_t deadline;	  /* CLOCK_MONOTONIC (now_usec()); 0: none */
	size_t cgroup_bytes;	  /* read of each /proc/<pid>/cgroup */
	unsigned dir_entries;	  /* entries scanned in one listing of containers/ or pods/ */
	unsigned pod_dir_entries; /* entries scanned in one pod's directory */
};

/* Why a batch did less than all (each counted once per occurrence in struct podmap_stats). */
enum podmap_cut {
	PODMAP_CUT_TIME,	/* the deadline passed: the rest of the batch was skipped */
	PODMAP_CUT_CGROUP_SIZE, /* a cgroup file longer than cgroup_bytes: read in part */
	PODMAP_CUT_DIR_ENTRIES, /* a listing stopped at its entry cap */
	PODMAP_CUT_LINK,	/* a symlink where a file or directory was to be opened */
	PODMAP_CUT_NOT_REGULAR, /* a FIFO, device, socket or directory where a file was expected */
	PODMAP_CUT_COUNT,
};

struct podmap_stats {
	unsigned cuts[PODMAP_CUT_COUNT];
	unsigned dir_reads; /* listings done: containers/, pods/ and pod directories each count one */
	uint64_t entries;   /* directory entries scanned */
};

/* One process of a batch. */
struct podmap_query {
	uint32_t pid; /* in */
	/*
	 * out: as podmap_read_pid_at() (0 and 1 both mean @id is set; a missing proc root gives
	 * PODMAP_NO_PROC), -ETIMEDOUT when the deadline passed before its turn, or -EINVAL for a
	 * pid of 0 or past INT_MAX.
	 */
	int r;
	struct podmap_id id;
	/*
	 * out, when @id names a pod: 0 (@names set); -ENOENT (neither directory names it, or a
	 * listing was cut before it: see the stats); -ETIMEDOUT (the deadline passed first);
	 * -ENOMEM; or -errno of opening the log directories. Otherwise -EINVAL.
	 */
	int names_r;
	struct podmap_names names;
};

/*
 * Remembers what the log directories said, for batches that map many processes again and
 * again: a container or pod seen once is not looked up again; one not found is looked up again
 * only once its directory changed (its mtime, or a minute passed), so an unchanged tree costs
 * one fstat() per directory and batch. What it keeps is what the last batch asked for (no more
 * than two entries per process of that batch), whatever the size of the directories. Owned by
 * its creator; one thread at a time.
 */
struct podmap_cache;

/*
 * @proc_root: the host's /proc (NULL: "/proc"); @log_root: holds containers/ and pods/ (NULL:
 * "/var/log"). Both are copied; each is opened, links followed, at the start of each batch (the
 * operator's choice), while nothing below them is reached through a link. Returns 0 or -ENOMEM.
 */
int podmap_cache_new(const char *proc_root, const char *log_root,
		     struct podmap_cache **ret) WARN_UNUSED;

/*
 * Maps the @n processes of @q (pids in, the rest out), within @lim (NULL: defaults, no
 * deadline): reads each cgroup file, then lists containers/ (names "<pod>_<namespace>_<container>
 * -<cid>.log", the kubelet's symlinks: only names are read) for the container IDs not known,
 * then pods/ ("<namespace>_<pod>_<uid>" directories) for the pods of processes whose container
 * no link names; a pod's container is its directory's one container subdirectory ("" unless
 * there is exactly one, and "" past pod_dir_entries entries). Entries whose names break the kubelet's rules (DNS names, no '_' inside
 * a part, a 64-hex ID, sizes) are skipped, and so is a pods/ entry that is not a directory. Adds
 * what was cut short to *@st (zero it first). Returns 0 or -ENOMEM (then the queries are
 * unspecified).
 */
int podmap_cache_map(struct podmap_cache *c, struct podmap_query *q, size_t n,
		     const struct podmap_limits *lim, struct podmap_stats *st) WARN_UNUSED;

/* Directory listings done so far, every batch together. */
uint64_t podmap_cache_dir_reads(const struct podmap_cache *c);
/* Containers and pods remembered now (found or known missing). */
size_t podmap_cache_entries(const struct podmap_cache *c);
/* NULL-safe; returns NULL. */
struct podmap_cache *podmap_cache_free(struct podmap_cache *c);
