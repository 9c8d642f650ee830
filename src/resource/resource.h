#pragma once

/*
 * The resources edgegpu advertises and their device IDs:
 *   RESOURCE_GPU      one device per GPU, ID = GPU UUID (what the kubelet sees; the ID handed
 *                     to the container follows deviceIDStrategy, see allocate.h)
 *   RESOURCE_REPLICA  time-sliced: each GPU's own replica count of devices, ID = "<uuid>::<n>"
 *                     with 0 <= n < that GPU's count (GPUs of one resource may differ: GPU 0
 *                     four ways and GPU 1 two ways is six devices)
 *   RESOURCE_GPUMEM   memory slices: one device per unit of a GPU's memory less the reserve,
 *                     ID = <gpu letter><unit offset in base 36>, at most 6 bytes
 *
 * Devices are implicit (index ranges per GPU), so a 160k-unit resource costs a few bytes per
 * GPU, not per unit. Pure logic: no I/O, no logging.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct gpu_info;

/*
 * The most resources (names) one node advertises: assign_build_resources() refuses a config
 * that makes more (-E2BIG), and its callers size their arrays with it. The GPUs one resource
 * holds are limited by GPU_NODE_MAX (gpu.h).
 */
#define RESOURCE_NODE_MAX 32

enum resource_kind {
	RESOURCE_GPU,
	RESOURCE_REPLICA,
	RESOURCE_GPUMEM,
	RESOURCE_KIND_COUNT,
};

/* What the daemon asks for, built from the config. */
struct resource_spec {
	const char *name; /* "nvidia.com/gpu" */
	enum resource_kind kind;
	const unsigned *gpus; /* indices into gpu_info.devices */
	unsigned n_gpus;
	unsigned replicas; /* RESOURCE_REPLICA: >= 2, for every GPU unless gpu_replicas */
	const unsigned *gpu_replicas; /* RESOURCE_REPLICA, or NULL: per entry of @gpus, each >= 2 */
	bool fail_requests_gt_one;    /* RESOURCE_REPLICA */
	uint64_t unit_mib;	      /* RESOURCE_GPUMEM: >= 1 */
	uint64_t reserve_mib;	      /* RESOURCE_GPUMEM */
	size_t max_list_bytes; /* RESOURCE_GPUMEM: 0 = 3 MiB; the unit doubles until it fits */
};

struct resource_gpu {
	unsigned gpu;	/* index into gpu_info.devices */
	unsigned first; /* index of its first device */
	unsigned count; /* its devices: 1, replicas, or units */
	char letter;	/* RESOURCE_GPUMEM */
};

struct resource {
	char *name;   /* "nvidia.com/gpu" */
	char *socket; /* "nvidia-gpu.sock" */
	enum resource_kind kind;
	unsigned replicas; /* RESOURCE_REPLICA: the most replicas of any GPU (each GPU's own count
	                      is gpus[s].count); 1 otherwise */
	bool fail_requests_gt_one;
	uint64_t unit_mib;	 /* effective unit, after doubling */
	uint64_t unit_mib_asked; /* configured unit */
	uint64_t reserve_mib;
	unsigned n_gpus;
	struct resource_gpu *gpus;
	unsigned n_devices;
	char **uuids;		 /* per resource_gpu, copied from gpu_info */
	int16_t letter_slot[26]; /* RESOURCE_GPUMEM: slot of each letter, -1 none */
};

/*
 * Builds a resource for @spec over @info. Returns 0, -ENOMEM or -EINVAL (then @reterr says why:
 * no GPUs, more than GPU_NODE_MAX GPUs, reserve larger than a GPU, too many GPUs for letters,
 * unit 0, ...).
 */
int resource_new(const struct resource_spec *spec, const struct gpu_info *info,
		 struct resource **ret, char **reterr) WARN_UNUSED;
struct resource *resource_free(struct resource *r);

/* Writes device @i's ID into @buf (>= 128 bytes); returns its length. */
size_t resource_device_id(const struct resource *r, unsigned i, char *buf);
/* Parses an ID; returns the device index, or -ENOENT for an ID this resource does not have. */
int resource_device_lookup(const struct resource *r, const char *id, size_t len);
/* The resource_gpu slot (index into r->gpus) that device @i belongs to. */
unsigned resource_device_slot(const struct resource *r, unsigned i);
static inline unsigned resource_device_gpu(const struct resource *r, unsigned i)
{
	return r->gpus[resource_device_slot(r, i)].gpu;
}

/* Per-device health for a snapshot: true = "Healthy". */
typedef bool resource_health_fn(const struct resource *r, unsigned device, void *userdata);

/*
 * Encodes a full ListAndWatchResponse (protobuf wire format) into @out. @numa gives each GPU's
 * NUMA node (indexed by gpu_info index; -1 = no TopologyInfo; units never carry one).
 * Returns 0 or -ENOMEM.
 */
int resource_encode_list(const struct resource *r, const int *numa, resource_health_fn *health,
			 void *userdata, struct buf *out) WARN_UNUSED;
/* Exact size of that message for all-healthy devices, without building it. */
size_t resource_list_size(const struct resource *r, const int *numa);

/* --- GetPreferredAllocation --- */

struct resource_pref_ctx {
	const int *numa;     /* per gpu_info index */
	const int *distance; /* n_all x n_all matrix (gpu_info indices), or NULL */
	unsigned n_all;	     /* gpu_info.n_devices */
};

/*
 * Chooses exactly @size devices from @available (device indices), including all of @must.
 * GPU: must-include first, then the best-connected set (same NUMA node, then topology
 * distance; ties to lower indices). REPLICA: NVIDIA's distributed policy, the least-used GPU
 * first, where used is the fraction of its own replicas taken (with equal counts this is
 * NVIDIA's count of replicas taken); ties to the GPU with fewer taken, then the lower GPU
 * index, then the lower replica. GPUMEM: all on one GPU, best fit (the GPU with the
 * fewest free units that still fits; must-include keeps their GPU), lowest offsets first.
 * Writes device indices to @ret (room for @size) and returns how many (== size unless too few
 * are available), or -EINVAL.
 */
int resource_preferred(const struct resource *r, const struct resource_pref_ctx *ctx,
		       const unsigned *available, size_t n_available, const unsigned *must,
		       size_t n_must, unsigned size, unsigned *ret);
