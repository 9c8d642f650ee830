#pragma once

/*
 * labels: node labels with the names and values of NVIDIA's GPU Feature Discovery (GFD), plus
 * ours for the sharing setup, and a writer that keeps them in one Node Feature Discovery
 * features.d file.
 *
 * GFD labels one GPU model per node. So do we: product, memory, family and compute capability
 * come from the first GPU (index 0: on a Thor with a discrete card, whichever the backend lists
 * first; with every GPU MIG-enabled, the first of those); gpu.count is the number of GPUs of
 * that model, MIG-enabled ones included, as GFD counts. Values follow GFD's rules,
 * then are made valid Kubernetes label values (<= 63
 * bytes, alphanumeric at both ends, [-_.A-Za-z0-9] between), which GFD does not guarantee for
 * odd names; a name left empty becomes "unknown".
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util.h"

struct buf;
struct config;
struct gpu_info;
struct loop;

/* The prefix of edgegpu's own labels that are not about a resource (the Tegra board's). */
#define LABELS_BOARD_PREFIX "edgegpu.io/"

/* NFD ignores a features.d file larger than this. */
#define LABELS_FILE_MAX ((size_t)64 * 1024)

/*
 * Appends the label lines "key=value\n", sorted by key, for @info's GPUs and the config @cfg
 * (validated) to @out. Nothing when @info has no GPU, served or MIG-enabled. The labels:
 *   nvidia.com/gpu.product        the name sanitised as GFD does ([A-Za-z0-9-_. ] kept, runs of
 *                                 spaces to '-'), "-SHARED" appended when nvidia.com/gpu is
 *                                 time-sliced (replicas > 1) without a rename
 *   nvidia.com/gpu.count         the GPUs named as the one described, MIG-enabled included
 *   nvidia.com/gpu.memory        MiB; left out when 0
 *   nvidia.com/gpu.family, gpu.compute.major, gpu.compute.minor (left out when major is 0);
 *                                 family by GFD's table, 10.x-12.x blackwell, 13.x rubin
 *   nvidia.com/gpu.machine        <sysfs_root>/class/dmi/id/product_name (@sysfs_root NULL:
 *                                 "/sys"), spaces to '-', "unknown" when unreadable
 *   nvidia.com/gpu.mode          GFD's rule over every GPU's PCI class: graphics (all VGA
 *                                 controllers), compute (all 3D controllers; a Tegra iGPU counts
 *                                 as one, whatever was read at its NVML PCI address), else
 *                                 unknown
 *   nvidia.com/mig.capable       true when any GPU is (gpu_device.mig_capable)
 *   nvidia.com/mps.capable=false
 *   (no nvidia.com/mig.strategy: GFD writes none under the "none" strategy, edgegpu's only one)
 *   nvidia.com/cuda.driver-version.{major,minor,revision,full} and the deprecated
 *   cuda.driver.{major,minor,rev} (left out unless the driver version is X.Y or X.Y.Z);
 *   cuda.runtime-version.{major,minor,full} and the deprecated cuda.runtime.{major,minor}
 *                                 (left out when the CUDA driver version is unknown)
 *   nvidia.com/gpu.replicas       the replicas of the first time-slicing entry for
 *                                 nvidia.com/gpu, else 1 (as GFD); 0 when the GPU described is
 *                                 MIG-enabled (GFD labels those without sharing)
 *   nvidia.com/gpu.sharing-strategy  time-slicing when those replicas are > 1, else none
 *   <gpumem resource>.unit-mib, .total-mib  ours: the unit the resource advertises (after any
 *                                 doubling) and the memory of the GPUs given to it, MiB summed;
 *                                 left out when gpumem is off or does not apply to these GPUs
 *   edgegpu.io/gpumem.enforcement  ours, beside those two: @gpumem_enforcement as given (the
 *                                 node's mode, "driver", "interposer", "both" or "accounting",
 *                                 which the daemon has from enforce_verdict(); this layer
 *                                 cannot name src/enforce); left out when NULL or ""
 *   edgegpu.io/board.{model,soc,l4t,jetpack,power-mode}  ours, on a Tegra board only
 *                                 (info->board.tegra): the device-tree model, "tegra234",
 *                                 "36.4.3", "6.2", the nvpmodel mode, each left out when unknown
 *                                 and sanitised like the product
 * On a Tegra board the GFD labels describe the iGPU like any GPU (product "Orin", memory the
 * carve-out, family from its compute capability: Thor's 11.0 is blackwell); the CUDA driver
 * labels need NVML's driver version and are left out without it.
 * nvidia.com/gfd.timestamp is not among them: the writer adds it to what it writes
 * (labels_writer_set_timestamp()), `edgegpu labels` to what it prints (labels_add_timestamp()).
 * Returns 0 or -ENOMEM (@out may then hold part of the lines).
 */
int labels_build(const struct gpu_info *info, const struct config *cfg, const char *sysfs_root,
		 const char *gpumem_enforcement, struct buf *out) WARN_UNUSED;

/* GFD's label for when the labels were written: Unix seconds. */
#define LABELS_TIMESTAMP_KEY "nvidia.com/gfd.timestamp"

/*
 * Appends @lines (@len bytes of sorted "key=value\n" lines, as labels_build() gives them) to
 * @out with "nvidia.com/gfd.timestamp=<@when>\n" at its place in the order: GFD's timestamp
 * label, which GFD's --no-timestamp (our flags.gfd.noTimestamp) leaves out. Returns 0 or
 * -ENOMEM. Any thread.
 */
int labels_add_timestamp(const char *lines, size_t len, time_t when, struct buf *out) WARN_UNUSED;

/* nvidia.com/gpu.product's value as labels_build() makes it ("" without a GPU), in @out. */
void labels_product(const struct gpu_info *info, const struct config *cfg, char *out, size_t size);

/*
 * A writer on the loop that owns one NFD features.d file. The file holds a comment, the
 * "# +expiry-time=<RFC3339 UTC>" directive (now + @expiry; none when @expiry is 0) and the
 * label lines (with nvidia.com/gfd.timestamp when asked). It is written atomically (file_write_atomic(), file-writer.h: ".<name>.XXXXXX" in the same
 * directory, a dotfile, which NFD ignores; fsync, rename, directory fsync), so a reader sees
 * the old file or the new one, never part of one; and off the loop, through file-writer.h: a
 * slow or frozen disk never holds Allocate. A write still running after 5 s is logged once
 * ("labels file write not finished, ..."); newer lines wait for it, only the newest.
 * Loop thread only; owned by its creator.
 */
struct labels_writer;

/*
 * @path: the file (copied); @expiry: how long NFD keeps the labels if we stop refreshing them.
 * Writes nothing yet. Returns 0, -EINVAL (@path has no file name) or -ENOMEM.
 */
int labels_writer_new(struct loop *l, const char *path, usec_t expiry,
		      struct labels_writer **ret) WARN_UNUSED;

/*
 * New label lines (@len bytes, copied; a missing final newline is added). Starts a write at
 * once when they differ from the lines of the newest write (the first call always writes), and
 * again every @expiry/2 to move the expiry forward; labels_writer_writes() counts them once on
 * disk. A failed write (a missing directory, ...) is logged at warn once, then at debug until a
 * write succeeds, and retried with back-off (from 100 ms, doubling, at most 30 s or
 * @expiry/2). Returns 0 (writing, or pending a retry), -EFBIG (the file would be over
 * LABELS_FILE_MAX: refused, the old lines stay), -EINVAL (a NUL byte) or -ENOMEM.
 */
int labels_writer_set(struct labels_writer *w, const char *lines, size_t len) WARN_UNUSED;

/*
 * Whether each write from now on carries nvidia.com/gfd.timestamp (off at first), whose value
 * is the time of this call, the same at every write: GFD's is the time it started labelling
 * (its start, or its restart on SIGHUP), not of each pass, so the node's label changes only
 * then. What labels_writer_set() compares to decide whether to write stays the lines without
 * it.
 */
void labels_writer_set_timestamp(struct labels_writer *w, bool on);

/* Stops the timers; leaves the file in place (a write in progress finishes on its own). NULL-safe; returns NULL. */
struct labels_writer *labels_writer_free(struct labels_writer *w);

/* Files written (renamed into place, the result back on the loop) so far, for tests. */
uint64_t labels_writer_writes(const struct labels_writer *w);
