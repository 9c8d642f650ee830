#pragma once

/*
 * config: the effective configuration of the daemon, built from a YAML file with NVIDIA's
 * k8s-device-plugin schema (`version: v1`, `flags`, `resources`, `sharing`, `imex`) plus our own
 * `edgegpu:` section, then environment variables, then command-line flags, over built-in
 * defaults. docs/config.md lists every key with its default, flag and environment variable.
 *
 * Precedence is flag > environment > file > default, which falls out of calling the steps in
 * this order on one struct:
 *
 *	config_init(&c);                    defaults
 *	config_load_file(&c, path, &d);     the file overlays the defaults
 *	config_apply_env(&c, envp, &d);     NVIDIA's environment names, and ours
 *	config_set_flag(&c, name, value, &d) for each command-line flag
 *	config_validate(&c, &d);            cross-checks, derived defaults (dev root, ...)
 *
 * config_build() does all of it in one call and is what the daemon uses at start and on
 * SIGHUP. Every step is atomic: when it fails the target struct is left exactly as it was,
 * so a bad new config on reload keeps the old one.
 *
 * Problems are returned, never logged (this module logs nothing above debug): each is a
 * struct config_error with file, line, column and a dotted key such as
 * `sharing.timeSlicing.resources[0].replicas`, collected in a struct config_diag together
 * with warnings (NVIDIA keys we do not act on, set to their defaults). Positions point at the
 * offending value, except for unknown and duplicate keys, which point at the key. Values from
 * the environment or flags have no file and no position; their key is the variable name
 * (`DEVICE_LIST_STRATEGY`) or the flag (`--device-list-strategy`).
 *
 * Values are typed as NVIDIA's Go code types them: YAML 1.1 booleans as in go-yaml v2 (true,
 * yes, on, ...; a quoted "true" is a string), integers in Go's base-0 syntax (0x10, 0o17, 1_000),
 * Go durations ("5s", "1m30s", "1.5h"); booleans from the environment or flags use Go's
 * strconv.ParseBool (1, t, true, TRUE, 0, f, false, ...) and an empty environment value is
 * false, as urfave/cli reads it. Unlike NVIDIA's non-strict parser, a key that is in neither
 * schema is an error.
 *
 * No global state: every function works on the structs it is given. Thread-compatible.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu-backend.h"
#include "log.h"
#include "util.h"

/* The largest config file accepted (bytes). */
#define CONFIG_FILE_MAX ((size_t)1024 * 1024)
/* Collection stops after this many errors; the load fails anyway. */
#define CONFIG_ERRORS_MAX 64
/* Longest list accepted anywhere in the file (devices, resources, XIDs). */
#define CONFIG_LIST_MAX 1024
/* Longest unix socket path: sockaddr_un.sun_path is 108 bytes with the NUL. */
#define CONFIG_SOCKET_PATH_MAX 107
/* Most replicas per time-sliced GPU. */
#define CONFIG_REPLICAS_MAX 1024

#define CONFIG_DEFAULT_RESOURCE		"nvidia.com/gpu"
#define CONFIG_DEFAULT_GPUMEM		"nvidia.com/gpumem"
#define CONFIG_DEFAULT_INTERPOSER_LIB	"/usr/lib/edgegpu/libedgegpu-cuda.so"
#define CONFIG_DEFAULT_GPUMEM_STATE_DIR "/var/lib/edgegpu"
#define CONFIG_DEFAULT_DEVICE_PLUGIN	"/var/lib/kubelet/device-plugins"
#define CONFIG_DEFAULT_POD_RESOURCES	"/var/lib/kubelet/pod-resources/kubelet.sock"
#define CONFIG_DEFAULT_LABELS_FILE	"/etc/kubernetes/node-feature-discovery/features.d/edgegpu"

enum config_mig_strategy {
	CONFIG_MIG_NONE,   /* the only one accepted: MIG is not supported yet */
	CONFIG_MIG_SINGLE, /* refused */
	CONFIG_MIG_MIXED,  /* refused */
	CONFIG_MIG_COUNT,
};

/* flags.plugin.deviceListStrategy is a set of these bits (never empty). */
enum config_device_list_strategy {
	CONFIG_DLS_ENVVAR = 1u << 0,	      /* NVIDIA_VISIBLE_DEVICES (default) */
	CONFIG_DLS_VOLUME_MOUNTS = 1u << 1,   /* /var/run/nvidia-container-devices/<id> */
	CONFIG_DLS_CDI_ANNOTATIONS = 1u << 2, /* cdi.k8s.io/... annotation */
	CONFIG_DLS_CDI_CRI = 1u << 3,	      /* CDIDevices in the response */
};

enum config_device_id_strategy {
	CONFIG_DEVICE_ID_UUID, /* default */
	CONFIG_DEVICE_ID_INDEX,
	CONFIG_DEVICE_ID_COUNT,
};

/* flags.deviceDiscoveryStrategy: NVIDIA's names; what gpu-open.h's backend kinds do. */
enum config_discovery {
	CONFIG_DISCOVERY_AUTO, /* default: NVIDIA's rule */
	CONFIG_DISCOVERY_NVML,
	CONFIG_DISCOVERY_TEGRA,
	CONFIG_DISCOVERY_COUNT,
};

enum config_on_split {
	CONFIG_ON_SPLIT_REJECT, /* default: FAILED_PRECONDITION */
	CONFIG_ON_SPLIT_ALLOW,
	CONFIG_ON_SPLIT_COUNT,
};

enum config_placement {
	CONFIG_PLACEMENT_MASK,	    /* default */
	CONFIG_PLACEMENT_PREFERRED, /* GetPreferredAllocation only */
	CONFIG_PLACEMENT_COUNT,
};

/* A position in the config file, 1-based; line 0 means "not from the file". */
struct config_pos {
	unsigned line, column;
};

/* One entry of a `devices` list: a GPU index or a GPU UUID (MIG references are refused). */
struct config_device_ref {
	char *uuid; /* "GPU-..." or the Tegra device ID (checked against edgegpu.tegra.deviceId),
			   or NULL for an index */
	unsigned index; /* NVML index, when uuid is NULL */
	struct config_pos pos;
};

enum config_devices_kind {
	CONFIG_DEVICES_ALL,   /* every GPU of the resource not given to edgegpu.sharing.memory */
	CONFIG_DEVICES_COUNT, /* the first `count` GPUs of the resource, by index */
	CONFIG_DEVICES_LIST,
};

struct config_devices {
	enum config_devices_kind kind;
	unsigned count;
	struct config_device_ref *refs;
	size_t n_refs;
	struct config_pos pos; /* of the `devices` value */
};

/* resources.gpus[]: GPUs whose NVML name matches @pattern (`*` wildcards, anchored) get @name. */
struct config_gpu_pattern {
	char *pattern;
	char *name; /* normalised: always "nvidia.com/<dns-subdomain>" */
	struct config_pos pos;
};

/* sharing.timeSlicing.resources[] */
struct config_ts_resource {
	char *name;	   /* the resource shared, normalised ("nvidia.com/gpu") */
	char *rename;	   /* the name advertised instead, or NULL; renameByDefault fills in
	                   "<name>.shared" when the file gives none */
	unsigned replicas; /* 2..CONFIG_REPLICAS_MAX */
	struct config_devices devices;
	struct config_pos pos, name_pos, rename_pos;
};

struct config_time_slicing {
	bool rename_by_default;
	bool fail_requests_greater_than_one;
	struct config_ts_resource *resources; /* none: time-slicing is off */
	size_t n_resources;
};

enum config_preload {
	CONFIG_PRELOAD_LD_SO_PRELOAD, /* a read-only /etc/ld.so.preload mount (default) */
	CONFIG_PRELOAD_ENV,	      /* LD_PRELOAD in the container's environment */
};

enum config_managed {
	CONFIG_MANAGED_COUNT,  /* cuMemAllocManaged counts against the limit (default) */
	CONFIG_MANAGED_IGNORE, /* it does not (discrete GPUs that oversubscribe on purpose) */
};

/* edgegpu.sharing.memory.enforcement.backstop: the node-side kill policy (docs/sharing.md). */
struct config_backstop {
	bool enabled;		    /* false */
	unsigned tolerance_percent; /* 110: above limit x 1.10 ... */
	usec_t after;		    /* 30 s: ... continuously for this long */
	usec_t interval;	    /* 2 s: sampling period */
};

/* edgegpu.sharing.memory.enforcement: how a gpumem limit is made to hold (docs/sharing.md). */
struct config_enforcement {
	bool interposer; /* true: mount libedgegpu-cuda.so into gpumem containers */
	bool driver;	 /* true: use the driver's limits where the node has them */
	enum config_preload preload;
	char *library;	 /* "/usr/lib/edgegpu/libedgegpu-cuda.so": the source, in the image */
	char *state_dir; /* "/var/lib/edgegpu": a host path, seen at the same path */
	enum config_managed managed;
	struct config_backstop backstop;
};

/* edgegpu.sharing.memory: the nvidia.com/gpumem resource. Off unless devices are listed. */
struct config_gpumem {
	char *resource_name;	       /* "nvidia.com/gpumem" */
	struct config_devices devices; /* always CONFIG_DEVICES_LIST */
	unsigned unit_mib;	       /* 1 */
	uint64_t reserve_mib;	       /* 512 */
	enum config_on_split on_split;
	enum config_placement placement;
	uint64_t mask_hysteresis_mib; /* 1024 */
	struct config_enforcement enforcement;
	struct config_pos resource_name_pos, unit_pos, reserve_pos;
};

struct config_health {
	usec_t poll_interval;	      /* 5 s: probe period for GPUs without events */
	usec_t event_poll_interval;   /* 60 s: probe period for GPUs whose events work */
	usec_t call_timeout;	      /* 10 s: an NVML call running longer is reported hung */
	usec_t recovery_quiet_period; /* 0: off */
	uint64_t *ignored_xids;	      /* on top of the application XIDs NVIDIA ignores */
	size_t n_ignored_xids;
	char *disable_healthchecks; /* DP_DISABLE_HEALTHCHECKS as given, or NULL; parse it
	                                 with gpu_parse_disable_healthchecks() */
};

struct config_grpc {
	uint64_t max_recv_msg_bytes; /* 16 MiB */
	unsigned max_connections;    /* 64 */
};

enum config_hostname_label {
	CONFIG_HOSTNAME_LABEL_UPPER, /* "Hostname", every released DCGM-exporter (default) */
	CONFIG_HOSTNAME_LABEL_LOWER, /* "hostname", DCGM-exporter's master since 2026-05 */
	CONFIG_HOSTNAME_LABEL_COUNT,
};

/* edgegpu.metrics: the HTTP server (/metrics, /healthz, /readyz). */
struct config_metrics {
	char *address;	     /* ":9400"; "": no server */
	usec_t min_interval; /* 1 s: telemetry sampled at most this often */
	usec_t scrape_wait;  /* 500 ms: how long a scrape waits for a fresh sample */
	enum config_hostname_label hostname_label;
	char *node_name;	   /* the Hostname label's value; NULL: gethostname() */
	unsigned max_connections;  /* 16 */
	usec_t connection_timeout; /* 10 s */
	char *host_proc;	   /* "/proc": the host's, for GPU processes' cgroups */
	char *pod_log_dir;	   /* "/var/log": the kubelet's pods/ and containers/ */
	/* false: DCGM-exporter's --kubernetes-virtual-gpus (per-pod GPU_UTIL, FB_USED) */
	bool kubernetes_virtual_gpus;
	struct config_pos address_pos;
};

/* edgegpu.labels: node labels for NFD's local feature source. */
struct config_labels {
	char *file;    /* <features.d>/edgegpu; "": none */
	usec_t expiry; /* 1 h: the file's labels lapse this long after the last write */
	/* flags.gfd.noTimestamp (--no-timestamp, GFD_NO_TIMESTAMP): no nvidia.com/gfd.timestamp */
	bool no_timestamp;
};

struct config {
	char *config_file; /* --config-file / CONFIG_FILE, or the file last loaded; NULL: none */

	/* flags: */
	enum config_mig_strategy mig_strategy;
	bool fail_on_init_error;	 /* true */
	char *driver_root;		 /* host driver root, "/" */
	char *dev_root;			 /* host /dev root; NULL until validated: = driver_root */
	enum config_discovery discovery; /* flags.deviceDiscoveryStrategy */
	/* flags.plugin: */
	bool pass_device_specs;
	unsigned device_list_strategy; /* CONFIG_DLS_* bits */
	enum config_device_id_strategy device_id_strategy;
	char *container_driver_root; /* "/driver-root": the host driver root inside our container */

	/* resources.gpus, in order; a GPU matching none is CONFIG_DEFAULT_RESOURCE */
	struct config_gpu_pattern *gpus;
	size_t n_gpus;

	struct config_time_slicing time_slicing;

	/* edgegpu: */
	enum log_level log_level;   /* info */
	enum log_format log_format; /* logfmt */
	char *device_plugin_path;   /* /var/lib/kubelet/device-plugins */
	char *kubelet_socket;	    /* NULL until validated: <device_plugin_path>/kubelet.sock;
	                                 "": do not register (NVIDIA's --kubelet-socket "") */
	char *nvml_lib;		    /* NULL: loader search, then under the driver root */
	char *pod_resources_socket; /* /var/lib/kubelet/pod-resources/kubelet.sock */
	char *cdi_spec_dir;	    /* /var/run/cdi */
	usec_t rediscover_interval; /* 60 s: re-check after "no devices found" */
	struct config_health health;
	struct config_grpc grpc;
	struct config_gpumem gpumem;
	struct config_metrics metrics;
	struct config_labels labels;
	/* The host's root as we see it ("/"; the Tegra backend reads the board below it). */
	char *host_root;
	/* edgegpu.tegra: */
	char *tegra_device_id;	/* "tegra": the iGPU's device ID (NVIDIA's) */
	uint64_t tegra_mem_mib; /* 0: MemTotal */
	struct config_pos tegra_device_id_pos;
};

/* One problem. Every string is owned by the diag that holds it. */
struct config_error {
	char *file;	       /* NULL for the environment and flags */
	unsigned line, column; /* 1-based; 0 when not known (a file that cannot be read) */
	char *key;	       /* dotted path, env var or --flag; NULL for YAML syntax errors */
	char *message;
};

/* Errors and warnings, appended to by every function below. Zero-initialised is empty. */
struct config_diag {
	struct config_error *errors;
	size_t n_errors;
	struct config_error *warnings;
	size_t n_warnings;
};

void config_diag_release(struct config_diag *d);

/*
 * Appends "FILE:LINE:COL: KEY: MESSAGE" to @out (no newline), leaving out the parts that are
 * not known: "KEY: MESSAGE" for the environment, "FILE: MESSAGE" for an unreadable file.
 * Returns 0 or -ENOMEM.
 */
int config_error_format(const struct config_error *e, struct buf *out) WARN_UNUSED;
/* The same as a heap string (caller frees), or NULL on OOM. */
char *config_error_to_string(const struct config_error *e) WARN_UNUSED;

/*
 * For modules that check a config against what only they know (assign.h): appends an error to
 * @d (NULL: none is kept), at @pos of @file (no file when @pos has no line), under the dotted
 * @key (may be NULL). Nothing is added once @d holds CONFIG_ERRORS_MAX errors. Returns 0 or
 * -ENOMEM.
 */
int config_diag_add_error(struct config_diag *d, const char *file, struct config_pos pos,
			  const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Renders @s for a message as the config's errors quote values: in double quotes, escaped, cut
 * after 60 characters. Returns @out. */
const char *config_quote(char *out, size_t size, const char *s);

/* A device reference for a message: its UUID, or "GPU <index>". Returns @out. */
const char *config_device_ref_str(char *out, size_t size, const struct config_device_ref *r);

/* Fills @c with the defaults. Returns 0 or -ENOMEM (then @c needs no release). */
int config_init(struct config *c) WARN_UNUSED;
/* Frees everything @c owns and zeroes it. Safe on a zeroed struct. */
void config_release(struct config *c);
/* Deep copy of @src into @ret (uninitialised). Returns 0 or -ENOMEM. */
int config_copy(struct config *ret, const struct config *src) WARN_UNUSED;
/* True when two configs have the same settings (file positions and config_file ignored). */
bool config_equal(const struct config *a, const struct config *b);

/*
 * Reads @path (at most CONFIG_FILE_MAX bytes) and overlays its settings on @c; records @path
 * in c->config_file. An empty file, or one holding only comments or `null`, changes nothing
 * (NVIDIA's config-manager points the file at /dev/null for "no config").
 * Never blocks: the file is opened O_NONBLOCK and must be a regular file (or /dev/null); a FIFO,
 * socket or device at @path is refused ("cannot read the file: it is a FIFO, not a regular
 * file") instead of stalling the caller's thread.
 * Returns 0 on success, -EINVAL when the file has errors or is not a regular file, -EISDIR for
 * a directory, -EFBIG when it is too large, -errno when it cannot be read, or -ENOMEM. Every
 * failure but -ENOMEM adds an error to @d (which may be NULL); warnings are added either way.
 * On failure @c is unchanged.
 */
int config_load_file(struct config *c, const char *path, struct config_diag *d) WARN_UNUSED;
/* The same for an in-memory document; @name is used in messages and as c->config_file. */
int config_load_buffer(struct config *c, const char *name, const char *data, size_t len,
		       struct config_diag *d) WARN_UNUSED;

/*
 * Applies the environment variables that name settings (see docs/config.md). @envp is a
 * NULL-terminated "NAME=value" array, or NULL for `environ`. Where a setting has two names
 * (NVIDIA_CDI_HOOK_PATH, NVIDIA_CTK_PATH) the first one present wins. Returns 0, -EINVAL (errors
 * in @d) or -ENOMEM; on failure @c is unchanged.
 */
int config_apply_env(struct config *c, char *const *envp, struct config_diag *d) WARN_UNUSED;

/*
 * Applies one command-line flag. @name is the long name with or without the leading dashes
 * ("device-list-strategy", NVIDIA's aliases included); @value is its argument, or NULL for a
 * bare boolean flag (true). Repeating a flag replaces the earlier value. Returns 0, -ENOENT for
 * an unknown flag, -EINVAL for a bad value (both with an error in @d), or -ENOMEM; on failure
 * @c is unchanged.
 */
int config_set_flag(struct config *c, const char *name, const char *value,
		    struct config_diag *d) WARN_UNUSED;

/*
 * True when @name is a flag config_set_flag() knows; *ret_is_bool (may be NULL) tells whether it
 * is a boolean, which may stand alone (--pass-device-specs) or take =true/=false.
 */
bool config_flag_lookup(const char *name, bool *ret_is_bool);

/*
 * A setting that has a command-line flag or an environment name, as `edgegpu --help` and the
 * man page show it. Every string lives as long as the program, except @key and @value, which
 * live until the callback returns.
 */
struct config_flag_info {
	const char *flag[2]; /* without the dashes; either or both may be NULL */
	const char *env[2];  /* the first one set wins; either or both may be NULL */
	const char *key;     /* the dotted key in the file; NULL for --config-file */
	const char *value;   /* the value's form: "BOOL", "DURATION", "N", "uuid|index", "PATH" */
	const char *help;    /* one line, no final period */
	bool is_bool;	     /* the flag may stand alone (true) or take =BOOL */
};

typedef int config_flag_fn(const struct config_flag_info *info, void *userdata);

/*
 * Calls @fn for every setting with a flag or an environment name, in the schema's order (the
 * file's layout, --config-file last). Stops at the first negative return of @fn and returns
 * it; 0 otherwise. What --help, the man page and the tests that compare them walk, so that no
 * list of flags is written twice.
 */
int config_flags_foreach(config_flag_fn *fn, void *userdata);

/*
 * Cross-checks the settings (time-slicing resources that name no resource, a GPU listed both for
 * time-slicing and for sharing.memory, clashing resource names, ...) and fills in the derived
 * defaults (dev root = driver root, kubelet socket under the device-plugin path). Refuses a
 * config that can never work: a socket path longer than CONFIG_SOCKET_PATH_MAX bytes, for the
 * plugin socket of any resource the config can advertise (<devicePluginPath>/<socket name as
 * config_socket_name() builds it>, nvidia.com/gpu always counted), the kubelet socket, and the
 * pod-resources socket when gpumem placement: mask dials it. The error names the key, the path,
 * its length and the limit. Checks that need the discovered GPUs are assign_gpus() (assign.h).
 * Returns 0, -EINVAL (errors in @d) or -ENOMEM; on failure @c is unchanged.
 */
int config_validate(struct config *c, struct config_diag *d) WARN_UNUSED;

/* A command-line flag for config_build(): name as for config_set_flag(), value or NULL. */
struct config_flag {
	const char *name;
	const char *value;
};

/*
 * The whole sequence: defaults, then the file named by the `config-file` flag or else by
 * CONFIG_FILE (none when both are unset or empty), the environment @envp (NULL: environ), the
 * @n_flags @flags in order, and config_validate(). Errors of every stage are collected. On
 * success *c is released and replaced; on failure it is untouched. Returns 0, or the first
 * failure's code as the steps above return it.
 */
int config_build(struct config *c, char *const *envp, const struct config_flag *flags,
		 size_t n_flags, struct config_diag *d) WARN_UNUSED;

/*
 * The command line of a verb that takes config flags (serve, check-config, discover, labels,
 * doctor): its flags and its positional arguments, in order. config-args.c. Zero-initialise;
 * config_args_release() frees the flags' names (values point into argv) and empties it.
 */
#define CONFIG_ARGS_MAX_FLAGS	   64
#define CONFIG_ARGS_MAX_POSITIONAL 4
struct config_args {
	const char *verb; /* for the errors' "see 'edgegpu VERB --help'"; NULL: edgegpu --help */
	struct config_flag flags[CONFIG_ARGS_MAX_FLAGS];
	size_t n_flags;
	const char *positional[CONFIG_ARGS_MAX_POSITIONAL];
	size_t n_positional;
};

/*
 * Takes @argv[*@i] into @a: a config flag ("--name", "--name=value", or "--name value", when
 * *@i then moves past the value) or else a positional argument. The verb handles its own
 * options (--json, --help, ...) before calling this. Returns 0, or -EINVAL (an unknown flag, a
 * missing value, too many flags or arguments) or -ENOMEM, with *@reterr (heap, the caller
 * frees and prints it after "edgegpu: "; NULL when out of memory) saying which.
 */
int config_args_take(struct config_args *a, int argc, char **argv, int *i,
		     char **reterr) WARN_UNUSED;
void config_args_release(struct config_args *a);
/*
 * config_init() and config_build() of @a's flags over @envp, printing every warning and error
 * on @diag ("warning: ..." / "error: ..."). Returns 0 or as config_build(); @c is the caller's
 * to release either way.
 */
int config_args_build(const struct config_args *a, char *const *envp, struct config *c,
		      FILE *diag) WARN_UNUSED;

/*
 * Appends @c as YAML to @out: every setting we act on, in the schema's layout, which
 * config_load_file() reads back to an equal config (config_equal()). NVIDIA keys we do not act
 * on are left out. Returns 0 or -ENOMEM.
 */
int config_dump(const struct config *c, struct buf *out) WARN_UNUSED;

/* --- helpers for the daemon --- */

/*
 * The GPU backend's options from @c (the daemon's and `discover`'s): the kind
 * (flags.deviceDiscoveryStrategy), the NVML library and driver root, the host root and the
 * Tegra iGPU's ID and memory. The strings point into @c. The caller adds what tests override
 * (sysfs_root). Any thread.
 */
void config_backend_opts(const struct config *c, struct gpu_backend_opts *ret);

/*
 * The settings a SIGHUP reload cannot apply, because the process holds what they chose: the
 * NVML library loaded (`edgegpu.nvmlLib`, and the driver roots it was searched under,
 * `flags.plugin.containerDriverRoot`) and the driver root the CDI spec and NVML describe
 * (`flags.nvidiaDriverRoot`). Every other setting applies on SIGHUP (docs/config.md, "What
 * SIGHUP applies"). Compares @old (the running config) with @new (the reloaded one, both
 * validated) and stores the dotted key of each of these settings that differs into @ret_keys,
 * at most @max of them (static strings; @ret_keys may be NULL when @max is 0). Returns how many
 * differ, which may be more than @max. Pure: no allocation, no logging; any thread.
 */
int config_restart_needed(const struct config *old, const struct config *new, const char **ret_keys,
			  size_t max);

/* The name a time-sliced resource is advertised under. */
static inline const char *config_ts_resource_name(const struct config_ts_resource *r)
{
	return r->rename ? r->rename : r->name;
}

/*
 * The socket file name of a resource: nvidia.com/gpu -> nvidia-gpu.sock, any other "/" -> "-".
 * The plugin serves it, the config check refuses two resources that share one, the doctor
 * looks for it. Returns a heap string (caller frees), or NULL when out of memory.
 */
char *config_socket_name(const char *name) WARN_UNUSED;

/*
 * Names a plugin tries when a live peer holds its socket path (an upgrade whose instances
 * overlap): <stem>-1.sock up to <stem>-7.sock. The doctor looks for them too.
 */
#define CONFIG_SOCKET_ALT_PATHS 8
