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
 * No global state; thread-compatible. Nothing here logs.
 */

#include <stddef.h>
#include <stdint.h>

#include "util.h"

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
 * Reads <proc_root>/<pid>/cgroup (@proc_root NULL: "/proc"; at most 64 KiB, opened O_NONBLOCK and
 * refused unless a regular file) and parses it. A pid that is not there (ENOENT, ESRCH) gives
 * kind PODMAP_NO_PROC and 0. Returns 0, -EINVAL (pid <= 0, or not a regular file), -EBADMSG,
 * -EFBIG (over 64 KiB) or -errno.
 */
int podmap_read_pid(const char *proc_root, int pid, struct podmap_id *ret) WARN_UNUSED;

struct podmap_names {
	char namespace_[64];
	char pod[256];
	char container[64];
};

/*
 * Names the container of @id (kind PODMAP_POD): first <log_root>/containers/
 * <pod>_<namespace>_<container>-<cid>.log, the kubelet's symlinks (only the name is read; the
 * target may be missing), else, by pod UID, <log_root>/pods/<namespace>_<pod>_<uid>/ (container
 * "" unless that directory has exactly one container subdirectory). Entries whose names break the
 * kubelet's rules (DNS names, no '_' inside a part, a 64-hex ID, sizes) are skipped. @log_root
 * NULL is "/var/log". Returns 0, -EINVAL (@id is not a pod), -ENOENT (neither directory names
 * it), or -errno of opendir() (ENOENT of a missing directory is -ENOENT). *@ret is set only on
 * success.
 */
int podmap_resolve(const char *log_root, const struct podmap_id *id,
		   struct podmap_names *ret) WARN_UNUSED;

/*
 * A cache of both directories for a scrape that maps many processes. Lookups hit the cache;
 * a miss re-lists the directories, at most once per batch (podmap_cache_begin() starts one), so a
 * process of an unknown pod costs one re-read per scrape, not one per process. Entries of pods
 * that are gone stay until the next re-read. Owned by its creator; one thread at a time.
 */
struct podmap_cache;

/* @log_root: as for podmap_resolve() (copied). Returns 0 or -ENOMEM. */
int podmap_cache_new(const char *log_root, struct podmap_cache **ret) WARN_UNUSED;
/* Starts a batch: the next miss may re-read the directories. */
void podmap_cache_begin(struct podmap_cache *c);
/* As podmap_resolve(), through the cache. Returns 0, -EINVAL, -ENOENT, -ENOMEM or -errno. */
int podmap_cache_resolve(struct podmap_cache *c, const struct podmap_id *id,
			 struct podmap_names *ret) WARN_UNUSED;
/* Directory listings done so far (containers/, pods/ and pod directories each count one). */
uint64_t podmap_cache_dir_reads(const struct podmap_cache *c);
/* NULL-safe; returns NULL. */
struct podmap_cache *podmap_cache_free(struct podmap_cache *c);
