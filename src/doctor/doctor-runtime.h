#pragma once

/*
 * What the files of the doctor's runtime layer share: doctor-runtime.c (runtime.layout,
 * runtime.containerd-nvidia, and doctor_runtime(), which runs the layer) and doctor-cdi.c
 * (runtime.toolkit, runtime.cdi, runtime.docker) call the helpers below, which live in
 * doctor-runtime-common.c and call neither.
 * Host paths are absolute paths as on the node; these helpers read them under the host root,
 * following symbolic links inside that root (an absolute link such as /var/run -> /run is
 * resolved against the root, not against this machine's /). The caller's thread; no logging.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "doctor-int.h"

struct doctor_toml;

/* Fix texts more than one check gives. */
#define FIX_TOML                                                                                \
	"Fix the TOML at the file and line shown (the runtime refuses to start with it), then " \
	"restart the runtime"
#define FIX_RUNTIME_BINARY                                                                       \
	"Install the NVIDIA Container Toolkit (package nvidia-container-toolkit), or point the " \
	"nvidia runtime (containerd: options.BinaryName; Docker: runtimes.nvidia.path) at the "  \
	"installed nvidia-container-runtime, then restart the runtime"

/* Docker's config. */
#define DAEMON_JSON "/etc/docker/daemon.json"

/* The largest config or spec file read (a bigger one is refused as -EFBIG). */
#define DOCTOR_RUNTIME_MAX_FILE (4u << 20)

/* The directories searched for the toolkit's binaries, in order. */
extern const char *const doctor_runtime_bin_dirs[];

/*
 * Finds the executable @name: an absolute path is checked as it is, a bare name is looked for
 * in doctor_runtime_bin_dirs. Returns the host path (heap; the caller frees) or NULL (not
 * found, or no memory: *@reterr -ENOENT or -ENOMEM when @reterr is not NULL).
 */
char *doctor_runtime_find_bin(const struct doctor *dr, const char *name, int *reterr) WARN_UNUSED;

/*
 * Evidence gathered before a check's status is known (doctor_add() fixes the status when it
 * records the check). Zero-initialise; doctor_runtime_emit() records the check and releases it.
 */
struct doctor_runtime_notes {
	struct buf b; /* lines, each ending in '\n' */
};

void doctor_runtime_note(struct doctor_runtime_notes *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Records check @id with @st, @summary (a plain string), the notes and @fix (a literal or NULL). */
void doctor_runtime_emit(struct doctor *dr, struct doctor_runtime_notes *n, const char *id,
			 enum doctor_status st, const char *summary, const char *fix);
/*
 * Reads and parses the TOML file @path under the host root into *@ret (the caller frees it
 * with doctor_toml_free()); a read or syntax error becomes a note naming file and line. A Go
 * template (k3s's *.tmpl) has its {{ ... }} lines blanked first (the line numbers stay);
 * *@base (may be NULL) says whether it pulls in k3s's base template. Returns 0 or -errno
 * (-EINVAL: not TOML).
 */
int doctor_runtime_toml_load(const struct doctor *dr, struct doctor_runtime_notes *n,
			     const char *path, struct doctor_toml **ret, bool *base) WARN_UNUSED;
/* Whether Docker is installed here; *@why (of @size) says what showed it. */
bool doctor_runtime_docker_present(const struct doctor *dr, char *why, size_t size);

void doctor_runtime_toolkit(struct doctor *dr);	   /* runtime.toolkit */
void doctor_runtime_cdi(struct doctor *dr);	   /* runtime.cdi */
void doctor_runtime_tegra_mode(struct doctor *dr); /* runtime.tegra-mode */
void doctor_runtime_docker(struct doctor *dr);	   /* runtime.docker */
