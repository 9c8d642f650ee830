#pragma once

/*
 * Builds the ContainerAllocateResponse for a set of GPUs, exactly as NVIDIA's plugin does for
 * each deviceListStrategy (nvidia-plugin.md section 2), plus edgegpu's per-allocation extras
 * (gpumem limits, extra env, mounts and files). Pure: no NVML, no I/O except stat() of the
 * control device nodes under dev_root and glob(3) of the backend's node patterns there
 * (devnode.h), both only for DeviceSpecs (passDeviceSpecs).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct gpu_device;
struct V1beta1__AllocateRequest;
struct V1beta1__ContainerAllocateResponse;

enum alloc_strategy {
	ALLOC_ENVVAR = 1 << 0,
	ALLOC_VOLUME_MOUNTS = 1 << 1,
	ALLOC_CDI_ANNOTATIONS = 1 << 2,
	ALLOC_CDI_CRI = 1 << 3,
};

enum alloc_id_strategy {
	ALLOC_ID_UUID,
	ALLOC_ID_INDEX,
};

#define ALLOC_CDI_KIND_DEFAULT	    "k8s.device-plugin.nvidia.com/gpu"
#define ALLOC_CDI_ANNOTATION_PREFIX "cdi.k8s.io/"
#define ALLOC_VOLUME_MOUNTS_DIR	    "/var/run/nvidia-container-devices"
/* Room for "<kind>=<id>" from a gpu_device with a kind of up to 150 characters. */
#define ALLOC_CDI_NAME_MAX 256

struct alloc_opts {
	unsigned strategies; /* enum alloc_strategy bits; 0 means envvar */
	enum alloc_id_strategy id_strategy;
	bool pass_device_specs;
	const char *dev_root;		   /* host prefix for DeviceSpec.host_path; NULL or "/" */
	const char *cdi_annotation_prefix; /* NULL: "cdi.k8s.io/" */
	const char *cdi_kind;		   /* NULL: "k8s.device-plugin.nvidia.com/gpu" */
};

/* A bind mount added to one allocation (a file or a directory of the host). */
struct alloc_mount {
	const char *container_path; /* absolute */
	const char *host_path;	    /* absolute */
	bool read_only;
};

/*
 * Per-allocation extras on top of the device delivery. They are added whatever the strategy,
 * CDI-only included (the gpumem limit must reach the container however the GPU gets there).
 */
struct alloc_extra {
	/*
	 * gpumem: MiB per entry of @gpus (an array of n_gpus), or NULL for none. Entries for a GPU
	 * that appears more than once (one entry per unit) are summed into that GPU's limit.
	 */
	const uint64_t *mem_limit_mib;
	/* Further env entries, "KEY=VALUE" strings (may be NULL); a later key replaces an earlier. */
	const char *const *env;
	size_t n_env;
	/* Further mounts (files or directories per allocation), after the volume-mounts ones. */
	const struct alloc_mount *mounts;
	size_t n_mounts;
};

/*
 * Builds one container response for @gpus (duplicates, by UUID, are removed, first occurrence
 * kept, so two replicas of one GPU deliver it once). With mem_limit_mib set, adds
 * EDGEGPU_GPUMEM_LIMIT_MIB=<sum> and CUDA_DEVICE_MEMORY_LIMIT_<i>=<n>m per GPU in
 * NVIDIA_VISIBLE_DEVICES order (so CUDA_DEVICE_MEMORY_LIMIT_0 for a single GPU).
 * Env entries keep insertion order. With passDeviceSpecs (and a non-CDI strategy) the device
 * nodes come from the GPUs (gpu.h): their containers' control nodes, each once and only when
 * present under dev_root on this call (devnode_present(): not a directory); then what their
 * node patterns match there on this call (devnode_set_glob()), sorted, each once, less the
 * nodes named otherwise; then each GPU's own nodes.
 * Returns 0, -ENOMEM, or -EINVAL (no GPUs, a string that is not valid UTF-8, an extra env entry
 * without "KEY=", a relative mount path, a limit sum that overflows); the caller frees with
 * alloc_response_free(). @ret is set only on success.
 */
int alloc_response_new(const struct alloc_opts *o, const struct gpu_device *const *gpus,
		       size_t n_gpus, const struct alloc_extra *extra,
		       struct V1beta1__ContainerAllocateResponse **ret) WARN_UNUSED;
/* Frees a response built by alloc_response_new(). NULL-safe, returns NULL. */
struct V1beta1__ContainerAllocateResponse *
alloc_response_free(struct V1beta1__ContainerAllocateResponse *r);

/*
 * The ID handed to the runtime for @g under @s: the UUID, or the NVML index in decimal, into
 * @buf. Returns buf (truncated, always NUL-terminated, if @size is too small).
 */
const char *alloc_gpu_id(enum alloc_id_strategy s, const struct gpu_device *g, char *buf,
			 size_t size);

/*
 * The CDI device name of a GPU: "<cdi_kind>=<uuid|index>" into @buf (ALLOC_CDI_NAME_MAX is
 * always enough). Returns buf.
 */
const char *alloc_cdi_name(const struct alloc_opts *o, const struct gpu_device *g, char *buf,
			   size_t size);

/* True if @s is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF). */
bool alloc_utf8_valid(const char *s);

/* True when @o delivers devices through CDI (cdi-annotations or cdi-cri). */
bool alloc_uses_cdi(const struct alloc_opts *o);

/*
 * Unpacks an AllocateRequest (@req/@len, the message without its gRPC prefix), telling apart
 * what the caller answers differently:
 *   0        *ret set; free it with v1beta1__allocate_request__free_unpacked(*ret, NULL)
 *   -ENOMEM  out of memory while unpacking (RESOURCE_EXHAUSTED: the request may be fine)
 *   -EBADMSG not a valid AllocateRequest (malformed)
 *   -EINVAL  a device ID holds a NUL byte, which a C string would silently cut short
 *            ("GPU-1\0junk" must not allocate GPU-1): @reterr_id (may be NULL; @size bytes,
 *            always terminated) gets the ID, NUL bytes written as \0, cut at 128 bytes
 * @ret is set only on success.
 */
int alloc_request_unpack(const uint8_t *req, size_t len, struct V1beta1__AllocateRequest **ret,
			 char *reterr_id, size_t size) WARN_UNUSED;
