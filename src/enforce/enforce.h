#pragma once

/*
 * gpumem enforcement, the device plugin's side (docs/sharing.md "Limits that hold"): the
 * interposer library installed in the host's state directory, one directory per gpumem
 * container allocation (its read-only limits file, its shared region, its mode), the env and
 * mounts Allocate adds, which enforcement is in force on the node and for each container,
 * and the removal of an allocation's directory once pod-resources shows its pod gone.
 *
 * Host layout (all under the configured stateDir, a host path the daemon sees at the same
 * path; /work/notes/i19-design.md):
 *   lib/libedgegpu-cuda.so, lib/ld.so.preload          installed by enforce_new()/enforce_install()
 *   alloc/<name>/{units,mode,limits,state/region}      one per allocation
 *
 * Ownership: one struct enforce per daemon, used on the loop thread only. It owns its
 * allocation records and the files under stateDir it created; nothing else writes there.
 * Logs (module=enforce): each reason a limit is not enforced once per change, loudly.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocate.h"
#include "enforce-mode.h"
#include "util.h"

struct config_enforcement;
struct gpu_device;
struct gpu_info;
struct enforce;

/* Paths inside a gpumem container (fixed; the interposer has them compiled in). */
#define ENFORCE_CTR_DIR	    "/usr/local/edgegpu"
#define ENFORCE_CTR_LIB	    ENFORCE_CTR_DIR "/libedgegpu-cuda.so"
#define ENFORCE_CTR_LIMITS  ENFORCE_CTR_DIR "/limits"
#define ENFORCE_CTR_STATE   ENFORCE_CTR_DIR "/state"
#define ENFORCE_CTR_PRELOAD "/etc/ld.so.preload"

/* What the daemon knows of the node, beside the GPUs (enforce_set_node()). */
struct enforce_node {
	bool cgroup_v2;	   /* <hostRoot>/sys/fs/cgroup/cgroup.controllers exists */
	bool cdi_delivery; /* the device list strategy is cdi-annotations or cdi-cri */
	bool cdi_hook;	   /* our CDI spec carries nvidia-cdi-hook apply-cuda-memory-limits */
};

/*
 * Creates the enforcement state from @cfg (copied): makes stateDir/lib and stateDir/alloc,
 * installs the library (enforce_install()), and reads back the allocation directories a
 * previous run left (kept until pod-resources shows them gone). Never fails for the files:
 * a failure is logged and leaves the interposer "not-installed" (retried by
 * enforce_install()). Returns 0 or -ENOMEM.
 */
int enforce_new(const struct config_enforcement *cfg, const char *host_root,
		struct enforce **ret) WARN_UNUSED;
/* NULL-safe; returns NULL. Leaves every file in place (a restart reads them back). */
struct enforce *enforce_free(struct enforce *e);

/*
 * Copies cfg->library to stateDir/lib/libedgegpu-cuda.so when its content differs, and
 * writes stateDir/lib/ld.so.preload, each atomically (temporary file, fsync, rename: a
 * container never maps a half-written library). Returns 0 or -errno (logged once per
 * change of errno); the interposer counts as installed only after a success.
 */
int enforce_install(struct enforce *e);

/* The node's facts beside the GPUs; call again when they change (a reload, a new CDI spec). */
void enforce_set_node(struct enforce *e, const struct enforce_node *n);

/*
 * The verdict for a container on @gpus with @limits_mib (n entries): the node's facts, the
 * config, the GPUs' memory-limit support, MIG, integration, and whether the limits are equal.
 * With n == 0, the verdict for the node as a whole (every GPU of @info, equal limits): the
 * label, the node metric and doctor use it.
 */
void enforce_verdict(const struct enforce *e, const struct gpu_info *info,
		     const struct gpu_device *const *gpus, const uint64_t *limits_mib, size_t n,
		     struct enforce_verdict *ret);

/* What Allocate adds to one gpumem container (alloc_extra's env and mounts). */
#define ENFORCE_ENV_MAX	  4
#define ENFORCE_MOUNT_MAX 4
struct enforce_grant {
	enum enforce_mode mode;
	const char *reason; /* why not stronger ("" none): a static string */
	char name[17];	    /* the allocation directory's name; "" when none was made */
	/* "KEY=VALUE" entries, owned: NVIDIA_GPU_MEMORY_REQUEST, _LIMIT, EDGEGPU_GPUMEM_ENFORCEMENT,
	 * LD_PRELOAD (preload: LD_PRELOAD) */
	char *env[ENFORCE_ENV_MAX];
	size_t n_env;
	/* host paths owned (container paths static) */
	struct alloc_mount mounts[ENFORCE_MOUNT_MAX];
	size_t n_mounts;
};

/*
 * One gpumem container allocation of @resource with unit IDs @ids (n_ids) on @gpus with
 * @limits_mib (n_gpus entries, the container's device order): decides its mode and makes
 * alloc/<name>/ with its units and mode, and when the interposer is in force its limits file
 * and region (region_create()); a directory for every mode, so the backstop and a restart
 * know each gpumem container. Any earlier allocation holding one of these units is removed
 * first (a unit is held by one container at a time). The directory is built under a hidden
 * name and renamed into place (never seen partial); only the region is synced, so Allocate
 * pays one fsync with the interposer and none without (blocking, on the loop). A failure to write the directory does not fail
 * the Allocate: the grant falls back to what still holds (driver, or accounting) with the
 * reason "state-write-failed", logged at warn. Returns 0 or -ENOMEM; @ret is filled on
 * success and released with enforce_grant_release().
 */
int enforce_allocate(struct enforce *e, const struct gpu_info *info, const char *resource,
		     char *const *ids, size_t n_ids, const struct gpu_device *const *gpus,
		     const uint64_t *limits_mib, size_t n_gpus,
		     struct enforce_grant *ret) WARN_UNUSED;
void enforce_grant_release(struct enforce_grant *g);

/*
 * A stable pod-resources answer (podres_fn): every allocation none of whose units a pod holds
 * now, and that is older than the grace period (2 min, for an Allocate whose pod is not
 * listed yet), is removed with its directory. Returns the number removed, -EBADMSG or -ENOMEM.
 */
int enforce_set_live_podres(struct enforce *e, const uint8_t *resp, size_t len);

/*
 * How long an allocation whose units no pod holds is kept (ENFORCE_GRACE, 2 min: the pod of an
 * Allocate is listed only once its container exists). Tests make it short.
 */
void enforce_set_grace(struct enforce *e, usec_t grace);
/* The config it was made from (its copy): a reload with another one makes a new state. */
const struct config_enforcement *enforce_config(const struct enforce *e);
/* Whether the library is installed now (the last enforce_install() worked). NULL: false. */
bool enforce_installed(const struct enforce *e);
/* The number of allocations held (the daemon polls pod-resources while there are any). */
size_t enforce_n_allocs(const struct enforce *e);

/* An allocation, for metrics, doctor and the backstop; valid during the callback. */
struct enforce_alloc {
	const char *name;
	const char *resource;
	char *const *ids;
	size_t n_ids;
	enum enforce_mode mode;
	const char *reason;
	unsigned n_gpus;
	const char *const *uuids;  /* n_gpus */
	const uint64_t *limit_mib; /* n_gpus */
	const char *state_dir;	   /* host path of alloc/<name>/state, or NULL */
};
typedef void enforce_alloc_fn(const struct enforce_alloc *a, void *userdata);
void enforce_for_each_alloc(const struct enforce *e, enforce_alloc_fn *fn, void *userdata);
/* The allocation holding unit @id of @resource, or NULL. */
const struct enforce_alloc *enforce_find_unit(const struct enforce *e, const char *resource,
					      const char *id);
