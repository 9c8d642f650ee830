#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "config.h"
#include "util.h"

/*
 * edgegpu doctor: checks the layers a GPU pod needs, in order (driver, container runtime,
 * device plugin, compatibility), on this host or on a tree laid out like one (--host-root), and
 * says for each check pass / warn / fail / skip, the evidence, and the exact fix.
 *
 * A check is one result with a stable id "<layer>.<name>" (driver.nvml, runtime.containerd,
 * plugin.kubelet-socket, compat.cuda, ...). Its fix text is a fixed string per failure (no
 * values formatted in: those go in the evidence), so docs/troubleshooting.md can show it word
 * for word and a test can check that it does.
 *
 * Output: text (one block per check) or, with --json, one JSON document described by
 * docs/doctor.schema.json. Exit status: 0 when no check failed (warnings allowed), 1 when one
 * did, 2 for a usage error.
 *
 * Threads: the doctor runs on the caller's thread. A check that may hang (an NVML call, a
 * socket peer) bounds itself: NVML runs on a worker joined with a deadline, a socket gets a
 * receive/send timeout; a hung peer is a failed check, never a hung doctor.
 *
 * Ownership: struct doctor owns every check, its strings and the facts; doctor_run() releases
 * them before it returns.
 */

enum doctor_status {
	DOCTOR_PASS,
	DOCTOR_WARN,
	DOCTOR_FAIL,
	DOCTOR_SKIP, /* does not apply here (no Docker on a containerd node, no --image given) */
};

struct doctor_opts {
	const char *host_root;	  /* every host path is read under it; "/" by default */
	const char *cuda_version; /* --cuda-version "12.4", or NULL */
	const char *image;	  /* --image REF, or NULL */
	bool json;		  /* --json */
	const struct config *cfg; /* the effective config (flags, environment, file) */
	unsigned timeout_ms;	  /* bound on one NVML call or socket exchange (5000) */
};

#define DOCTOR_MAX_GPUS 64

/*
 * What one layer learns and a later one uses. Filled by the layer that finds it; zero/empty
 * means unknown. Owned by struct doctor.
 */
struct doctor_facts {
	bool nvml_ok;			 /* NVML loaded and initialised */
	char driver_version[64];	 /* from NVML, "550.54.15" */
	char kmod_version[64];		 /* from /proc/driver/nvidia/version */
	int cuda_driver_version;	 /* NVML's, 12040 for 12.4 */
	unsigned n_gpus;		 /* GPUs NVML (or the Tegra probe) sees */
	char uuids[DOCTOR_MAX_GPUS][96]; /* their UUIDs, in NVML order */
	char names[DOCTOR_MAX_GPUS][96]; /* their product names, in NVML order */
	char product_label[96];		 /* nvidia.com/gpu.product's value (labels.c, from GPU 0) */
	bool tegra;			 /* a Jetson/Tegra board */
	char l4t_release[64];		 /* "R36 (release), REVISION: 4.0", from nv_tegra_release */
	char runtime[16];		 /* "containerd", "docker", "" */
	char containerd_config[256];	 /* host path of the containerd config found, "" none */
	char containerd_socket[256];	 /* host path of the containerd socket for that layout */
	char layout[16];		 /* "kubeadm", "k3s", "microk8s", "kubeedge", "" */
	bool plugin_ready;		 /* the running daemon's /readyz said 200 */
};

struct doctor;
struct doctor_check;

/*
 * Records one check. @id is "<layer>.<name>" (a string literal), @summary_fmt one line. Returns
 * the check, to add evidence and a fix to, or NULL when out of memory (the doctor then reports
 * itself failed; doctor_evidence()/doctor_fix() accept NULL).
 */
struct doctor_check *doctor_add(struct doctor *dr, const char *id, enum doctor_status st,
				const char *summary_fmt, ...) __attribute__((format(printf, 4, 5)));
/* Appends one line of evidence (a path and what it held, a version, a count). */
void doctor_evidence(struct doctor_check *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Sets the fix: a fixed string (a literal), shown word for word by docs/troubleshooting.md. */
void doctor_fix(struct doctor_check *c, const char *fix);

const struct doctor_opts *doctor_opts(const struct doctor *dr);
struct doctor_facts *doctor_facts(struct doctor *dr);
/*
 * Host paths. Every path the doctor opens, lists, reads, stats, dlopens or connects to is a path
 * as on the host ("/var/lib/kubelet/device-plugins") resolved inside the host root as if the
 * doctor were chroot(2)ed there (root_open(), util.h): an absolute link target is taken under
 * the root too (/var/run -> /run, /var/lib/kubelet -> /data/kubelet), ".." never climbs above
 * it, and nothing outside it is ever reached. Files are read only when they are regular files,
 * and never opened otherwise (a FIFO would block the doctor; a device may act when opened).
 */

/* @path under the host root, for showing only (evidence, messages): never opened. Caller frees. */
char *doctor_path(const struct doctor *dr, const char *path) WARN_UNUSED;
/*
 * Opens @path inside the host root: root_open() (O_PATH fd, @flags 0, O_NOFOLLOW, O_DIRECTORY;
 * *@ret_real, may be NULL, the host path reached). The caller closes the fd. Returns it or -errno
 * (-ENOENT, -ENOTDIR, -ELOOP, -EACCES, ...; the host root's own open error for every path when
 * the root cannot be opened).
 */
int doctor_open(const struct doctor *dr, const char *path, int flags, char **ret_real) WARN_UNUSED;
/* stat() of @path inside the root; *@ret_real (may be NULL) as doctor_open()'s, on success. */
int doctor_stat(const struct doctor *dr, const char *path, struct stat *st, char **ret_real);
/* lstat(): the last component is not followed (a link is described itself). */
int doctor_lstat(const struct doctor *dr, const char *path, struct stat *st);
/*
 * Reads @path inside the root, at most @max bytes, NUL-terminated (read_file_at()). Returns
 * 0, -ENOENT, -EISDIR, -EBADFD (not a regular file: a FIFO, socket or device is not opened),
 * -EFBIG (over @max), -ENOMEM or another -errno. doctor_strerror() words the error.
 */
int doctor_read(const struct doctor *dr, const char *path, size_t max, char **ret,
		size_t *ret_len) WARN_UNUSED;
/* The target of the link @path (the link itself inside the root) into @buf. 0, -EINVAL: no link. */
int doctor_readlink(const struct doctor *dr, const char *path, char *buf, size_t size);
/* Opens the directory @path inside the root for readdir(); NULL and *@reterr -errno on failure. */
DIR *doctor_opendir(const struct doctor *dr, const char *path, int *reterr) WARN_UNUSED;
/*
 * Finds the unix socket @path inside the root for connect(): returns an O_PATH fd of the socket
 * (the caller closes it after the connection is made) and writes to @dial the path to connect to,
 * /proc/self/fd/N, which reaches that very socket (and is short, whatever the length of
 * @path). Returns the fd, -ENOTSOCK (something else is there) or -errno as doctor_open().
 */
int doctor_socket(const struct doctor *dr, const char *path, char dial[FD_PATH_MAX]) WARN_UNUSED;
/*
 * In the heap string *@s (may be NULL), every @from not followed by a digit becomes @to: a
 * message that names the /proc/self/fd/N a file was reached through names the file instead.
 * Out of memory leaves *@s as it was.
 */
void doctor_replace(char **s, const char *from, const char *to);
/*
 * strerror() for the doctor's host-path errors: -EBADFD is "not a regular file ...", -ENOTSOCK
 * (doctor_socket()) "not a socket".
 */
const char *doctor_strerror(int r);

/* The layers, in the order doctor_run() calls them; each adds its checks. */
void doctor_driver(struct doctor *dr);	/* doctor-driver.c */
void doctor_runtime(struct doctor *dr); /* doctor-runtime.c */
void doctor_plugin(struct doctor *dr);	/* doctor-plugin.c */
void doctor_compat(struct doctor *dr);	/* doctor-compat.c */

/* Runs every layer and prints the report on stdout. Returns the exit status (0 or 1). */
int doctor_run(const struct doctor_opts *o);

/*
 * Doctor threads still running: an NVML call that did not return in time is left behind, and
 * the driver library's destructors may wait for it forever, so main() must leave with _exit().
 */
unsigned doctor_live_threads(void);
