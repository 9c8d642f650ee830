#pragma once

/*
 * Writes the CDI spec for the discovered GPUs (cdiVersion 0.5.0, kind
 * k8s.device-plugin.nvidia.com/gpu): one device per GPU named by UUID or index with its own
 * device nodes, common edits for the control nodes that exist, the nodes the backend's
 * patterns match (gpu_container.node_globs, devnode.h), the driver libraries and binaries
 * found under driver_root, and the lib/sym/dir entries that exist and dev entries that match
 * of the backend's CSV mount specs (gpu_container.mount_specs_dir, mount-specs.h; mounted
 * read-only like the libraries). The nodes and file names are the backend's
 * (gpu_device.nodes, gpu_info.container): nothing here is NVML's but the kind and the env. Written atomically as <dir>/k8s.device-plugin.nvidia.com-gpu.json.
 *
 * No hooks by default: edgegpu does not depend on nvidia-ctk. Each library is also mounted at
 * its soname (libcuda.so.1, ...), so the loader finds it in the container without an ldcache
 * update as long as the library directory is one the container's loader searches (true for
 * the Debian/Ubuntu multiarch directories). Set ldcache_hook_path to add NVIDIA's
 * update-ldcache createContainer hook for other layouts (a /usr/lib64 host, say).
 */

#include <stdint.h>

#include "allocate.h"

struct gpu_info;

#define CDI_SPEC_FILE_NAME "k8s.device-plugin.nvidia.com-gpu.json"
#define CDI_SPEC_DIR	   "/var/run/cdi"

struct cdi_opts {
	const char *spec_dir;	 /* NULL: "/var/run/cdi" (created when missing) */
	const char *driver_root; /* host driver root (nvidiaDriverRoot): the spec's host paths;
	                            NULL or "": "/" */
	const char *dev_root;	 /* host dev root (nvidiaDevRoot); NULL or "": driver_root */
	/*
	 * Where the host's driver_root is mounted in our container (containerDriverRoot, the
	 * DaemonSet's /driver-root). When it is a directory, the driver files are looked for
	 * under it and the control nodes under <it>/dev (or our own /dev when it has none), and
	 * the spec still names the host paths (driver_root, dev_root), as NVIDIA's plugin does.
	 * NULL, "" or not a directory: we run on the host, and look at driver_root and dev_root
	 * themselves.
	 */
	const char *container_driver_root;
	enum alloc_id_strategy id_strategy;
	/* NULL: no hooks. Else the nvidia-ctk binary (e.g. "/usr/bin/nvidia-ctk") for an
	 * "nvidia-ctk hook update-ldcache --folder <dir>..." createContainer hook. */
	const char *ldcache_hook_path;
	/*
	 * NULL: none. Else the host path of NVIDIA's nvidia-cdi-hook (CDI_MEMLIMIT_HOOK_PATH) whose
	 * apply-cuda-memory-limits subcommand (container toolkit 1.19+, PR #2075) the daemon has
	 * found (cdi_hook_has_memory_limits()): each GPU whose driver limits memory per cgroup
	 * (gpu_device.mem_limits SUPPORTED) gets a createRuntime hook
	 * "nvidia-cdi-hook apply-cuda-memory-limits --driver-root <driver_root> --gpu-id <UUID>"
	 * in its device edits, which at container creation applies the container's
	 * NVIDIA_GPU_MEMORY_REQUEST / NVIDIA_GPU_MEMORY_LIMIT (MiB) to its cgroup through NVML.
	 */
	const char *memlimit_hook_path;
};

/* Where NVIDIA's toolkit installs nvidia-cdi-hook (its plugin's nvidiaCDIHookPath default). */
#define CDI_MEMLIMIT_HOOK_PATH "/usr/bin/nvidia-cdi-hook"
/* The subcommand the driver-enforced gpumem limits need, and what the binary is searched for. */
#define CDI_MEMLIMIT_SUBCOMMAND "apply-cuda-memory-limits"
/* A hook binary larger than this is not searched (NVIDIA's is about 10 MiB). */
#define CDI_HOOK_SCAN_MAX ((uint64_t)128 << 20)

/*
 * Whether the nvidia-cdi-hook at @path inside @root (a host root the caller names; NULL or "":
 * "/"; links stay inside it) supports apply-cuda-memory-limits: a bounded scan of the
 * regular file for the subcommand's name (its first CDI_HOOK_SCAN_MAX bytes, read in 1 MiB
 * pieces; a Go binary holds its subcommand names as strings). Blocking file I/O: the daemon
 * calls it once per discovery, doctor once. Any thread. Returns 1 (supported), 0 (a binary
 * without it: an older toolkit), or -errno: -ENOENT (no hook), -EISDIR / -EBADFD (not a
 * regular file), -EACCES, -EIO, -ENOMEM.
 */
int cdi_hook_has_memory_limits(const char *root, const char *path) WARN_UNUSED;

/*
 * Generates the spec JSON and appends it to @out (the bytes cdi_spec_write_file() writes, and
 * what cdi_spec_verify() compares against; also for tests and `edgegpu discover`). Only reads
 * the filesystem (stat and glob under the roots of @o, the CSV mount specs); no globals, so it
 * may run on any thread. What it skips (a bad CSV line, an unreadable CSV directory) it logs
 * (modules "mount-specs", "devnode", "cdi") without failing. @out is
 * left as it was on failure. Returns 0, -ENOMEM, -ENOENT (a required library, libcuda.so.<driver version> for NVML, not found
 * under the driver root, or under container_driver_root when that is mounted), or -EINVAL (no
 * driver version, a device name CDI refuses, a string that is not UTF-8). On failure @reterr
 * (if not NULL) gets a heap message the caller frees, e.g.
 * "failed to locate libcuda.so.550.54.15 under /driver-root (the container driver root, where
 * the host's /run/nvidia/driver is expected to be mounted)".
 */
int cdi_spec_render(const struct cdi_opts *o, const struct gpu_info *info, struct buf *out,
		    char **reterr) WARN_UNUSED;

/*
 * Writes @len bytes of @data as <@dir>/CDI_SPEC_FILE_NAME (@dir NULL: CDI_SPEC_DIR), mode 0644
 * whatever the umask, creating @dir (mode 0755, parents too) when missing. Atomic and durable:
 * a unique temporary file in @dir (mkostemp), written, fsync'ed, renamed over the spec, then
 * @dir fsync'ed; a reader sees the old spec or the new one, never a part. On failure the
 * temporary file is removed and any old spec is left as it was.
 *
 * Thread-safe (no globals, no strerror): meant to run off the event loop, since fsync on an SD
 * card can take seconds. Returns 0, or -errno of the step that failed: -ENOSPC (full disk),
 * -EDQUOT, -EACCES / -EPERM / -EROFS (unwritable dir), -EIO, -ENOTDIR, -ENOMEM, ... On failure
 * @reterr (if not NULL) gets a heap message naming the file and the reason, e.g. "failed to
 * write CDI spec /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json: No space left on device".
 */
int cdi_spec_write_file(const char *dir, const void *data, size_t len, char **reterr) WARN_UNUSED;

/*
 * Checks that <@dir>/CDI_SPEC_FILE_NAME (@dir NULL: CDI_SPEC_DIR) is still the spec we wrote:
 * a regular file (not followed through a symlink) holding exactly @len bytes equal to
 * @expected. Never blocks on a FIFO (opened O_NONBLOCK); reads at most @len + 4 KiB.
 * Thread-safe. Returns 0 when it is, -ENOENT when it (or @dir) vanished, -ESTALE when
 * something else is there (altered, truncated, replaced by a symlink or a non-regular file),
 * or another -errno when it cannot be read (-EACCES, -EIO, -ENOMEM).
 */
int cdi_spec_verify(const char *dir, const void *expected, size_t len) WARN_UNUSED;

/*
 * cdi_spec_write_file(), cdi_spec_verify() and cdi_spec_write() are the tests' and
 * tests/cdi-validate's: the daemon (cdi-writer.c) writes through file-writer.h (the same
 * mkdir_parents() and file_write_atomic(), off the loop) and compares with file_equals().
 *
 * cdi_spec_render() then cdi_spec_write_file() to o->spec_dir, in one call (kept for callers
 * that do both on one thread). Returns 0 or -errno of either; on failure @reterr (if not NULL)
 * gets a heap message.
 */
int cdi_spec_write(const struct cdi_opts *o, const struct gpu_info *info,
		   char **reterr) WARN_UNUSED;
