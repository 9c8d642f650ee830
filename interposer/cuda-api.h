#pragma once

/*
 * Our own declarations of the part of NVIDIA's CUDA driver API (and of NVML) that the
 * interposer wraps and that the fake driver in tests/fakes/cuda implements, under our own
 * names, so that nothing of NVIDIA's is needed to build either: the interposer is built on
 * machines without the CUDA toolkit and must not pick up whatever cuda.h happens to be
 * installed (a newer header renames functions with #define, e.g. cuMemAlloc -> cuMemAlloc_v2,
 * and changes which variant a plain name means). Own names (snake_case, NVIDIA's name in the
 * comment) let a test include this header beside NVIDIA's cuda.h and compare the two, as
 * tests/abi does for src/gpu/nvml/nvml-api.h.
 *
 * Values and layouts are those of cuda.h and cudaTypedefs.h from CUDA 13.0 (CUDA_VERSION 13000);
 * every one of them is unchanged since the CUDA version that introduced it (the driver keeps
 * old entry points ABI-stable and adds _v2 names instead). Sizes assume LP64 (amd64, arm64),
 * where CUdeviceptr is 64 bits.
 *
 * Function prototypes are written once, in the X-macro list CUDA_API_FUNCTIONS: FN(symbol,
 * return type, (parameter types)), every CUDA type spelled T(name). CUDA_OWN_TYPE gives our
 * types; cu_fn_<symbol> is the resulting function type (e.g. cu_fn_cuMemAlloc_v2). The list
 * names the exact exported symbols (versioned: cuMemAlloc_v2, not cuMemAlloc).
 *
 * CUDA_API_PROCS is what cuGetProcAddress answers for the same functions: P(base name as the
 * caller asks for it, exported symbol, first CUDA version of that symbol, per-thread stream).
 * For a request (base, version, flags) the driver picks the entry with the highest first
 * version <= version, and an entry with per-thread 1 (the _ptsz variant) only when the flags
 * ask for the per-thread default stream. Versions are those of cudaTypedefs.h's
 * PFN_<base>_v<version> names.
 *
 * NVML: the few NVML declarations the interposer needs to report memory (nvmlDeviceGetMemoryInfo,
 * _v2, nvmlDeviceGetUUID), values of nvml.h (NVML API 12). The interposer links nothing of src/,
 * so it cannot use src/gpu/nvml/nvml-api.h; names here take the ipz_nvml_ prefix so that both
 * headers can be included together.
 */

#include <stddef.h>
#include <stdint.h>

/* CUresult (only the values we return or test for) */
enum cu_result {
	CU_RES_SUCCESS = 0,	      /* CUDA_SUCCESS */
	CU_RES_INVALID_VALUE = 1,     /* CUDA_ERROR_INVALID_VALUE */
	CU_RES_OUT_OF_MEMORY = 2,     /* CUDA_ERROR_OUT_OF_MEMORY */
	CU_RES_NOT_INITIALIZED = 3,   /* CUDA_ERROR_NOT_INITIALIZED */
	CU_RES_DEINITIALIZED = 4,     /* CUDA_ERROR_DEINITIALIZED */
	CU_RES_NO_DEVICE = 100,	      /* CUDA_ERROR_NO_DEVICE */
	CU_RES_INVALID_DEVICE = 101,  /* CUDA_ERROR_INVALID_DEVICE */
	CU_RES_INVALID_CONTEXT = 201, /* CUDA_ERROR_INVALID_CONTEXT */
	CU_RES_INVALID_HANDLE = 400,  /* CUDA_ERROR_INVALID_HANDLE */
	CU_RES_ILLEGAL_STATE = 401,   /* CUDA_ERROR_ILLEGAL_STATE */
	CU_RES_NOT_FOUND = 500,	      /* CUDA_ERROR_NOT_FOUND */
	CU_RES_NOT_PERMITTED = 800,   /* CUDA_ERROR_NOT_PERMITTED */
	CU_RES_NOT_SUPPORTED = 801,   /* CUDA_ERROR_NOT_SUPPORTED */
	CU_RES_UNKNOWN = 999,	      /* CUDA_ERROR_UNKNOWN */
};

/* Opaque integers (STYLE 3.3 allows typedefs for these). */
typedef int cu_device;			  /* CUdevice: an ordinal among the visible devices */
typedef unsigned long long cu_deviceptr;  /* CUdeviceptr (_v2, 64 bits) */
typedef unsigned long long cu_mem_handle; /* CUmemGenericAllocationHandle */
typedef uint64_t cu_uint64;		  /* cuuint64_t */

/* Opaque handles, used only as pointers: CUcontext, CUstream, CUarray, CUmipmappedArray,
 * CUmemoryPool, CUgraph, CUgraphNode, CUgraphExec. */
struct cu_ctx;
struct cu_stream;
struct cu_array;
struct cu_mipmapped_array;
struct cu_mem_pool;
struct cu_graph;
struct cu_graph_node;
struct cu_graph_exec;

/* CUuuid: the 16 bytes of the GPU's UUID (the "GPU-" string NVML prints, in binary). */
struct cu_uuid {
	char bytes[16];
};

/* cuGetProcAddress flags (CUdriverProcAddress_flags) */
#define CU_PROC_DEFAULT	      0	       /* CU_GET_PROC_ADDRESS_DEFAULT */
#define CU_PROC_LEGACY_STREAM (1 << 0) /* CU_GET_PROC_ADDRESS_LEGACY_STREAM */
#define CU_PROC_PER_THREAD_DEFAULT_STREAM \
	(1 << 1) /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

/* CUdriverProcAddressQueryResult */
enum cu_proc_query_result {
	CU_PROC_SUCCESS = 0,		    /* CU_GET_PROC_ADDRESS_SUCCESS */
	CU_PROC_SYMBOL_NOT_FOUND = 1,	    /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
	CU_PROC_VERSION_NOT_SUFFICIENT = 2, /* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
};

/* cuMemAllocManaged flags (CUmemAttach_flags) */
#define CU_ATTACH_GLOBAL 0x1 /* CU_MEM_ATTACH_GLOBAL */
#define CU_ATTACH_HOST	 0x2 /* CU_MEM_ATTACH_HOST */
#define CU_ATTACH_SINGLE 0x4 /* CU_MEM_ATTACH_SINGLE */

/* CUmemLocationType */
enum cu_mem_location_type {
	CU_LOC_INVALID = 0x0,		/* CU_MEM_LOCATION_TYPE_INVALID (and _NONE) */
	CU_LOC_DEVICE = 0x1,		/* CU_MEM_LOCATION_TYPE_DEVICE: id is a device ordinal */
	CU_LOC_HOST = 0x2,		/* CU_MEM_LOCATION_TYPE_HOST */
	CU_LOC_HOST_NUMA = 0x3,		/* CU_MEM_LOCATION_TYPE_HOST_NUMA */
	CU_LOC_HOST_NUMA_CURRENT = 0x4, /* CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT */
	CU_LOC_MAX = 0x7FFFFFFF,	/* CU_MEM_LOCATION_TYPE_MAX (makes the enum 32 bits) */
};

/* CUmemLocation (_v1) */
struct cu_mem_location {
	enum cu_mem_location_type type;
	int id;
};

/* CUmemAllocationType */
enum cu_mem_alloc_type {
	CU_ALLOC_INVALID = 0x0, /* CU_MEM_ALLOCATION_TYPE_INVALID */
	CU_ALLOC_PINNED = 0x1,	/* CU_MEM_ALLOCATION_TYPE_PINNED */
	CU_ALLOC_MANAGED = 0x2, /* CU_MEM_ALLOCATION_TYPE_MANAGED */
	CU_ALLOC_MAX = 0x7FFFFFFF,
};

/* CUmemAllocationHandleType */
enum cu_mem_handle_type {
	CU_HANDLE_NONE = 0x0,		       /* CU_MEM_HANDLE_TYPE_NONE */
	CU_HANDLE_POSIX_FILE_DESCRIPTOR = 0x1, /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
	CU_HANDLE_WIN32 = 0x2,		       /* CU_MEM_HANDLE_TYPE_WIN32 */
	CU_HANDLE_WIN32_KMT = 0x4,	       /* CU_MEM_HANDLE_TYPE_WIN32_KMT */
	CU_HANDLE_FABRIC = 0x8,		       /* CU_MEM_HANDLE_TYPE_FABRIC */
	CU_HANDLE_MAX = 0x7FFFFFFF,
};

/* CUmemAccess_flags */
enum cu_mem_access_flags {
	CU_ACCESS_PROT_NONE = 0x0,	/* CU_MEM_ACCESS_FLAGS_PROT_NONE */
	CU_ACCESS_PROT_READ = 0x1,	/* CU_MEM_ACCESS_FLAGS_PROT_READ */
	CU_ACCESS_PROT_READWRITE = 0x3, /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
	CU_ACCESS_PROT_MAX = 0x7FFFFFFF,
};

/* CUmemAccessDesc (_v1) */
struct cu_mem_access_desc {
	struct cu_mem_location location;
	enum cu_mem_access_flags flags;
};

/* CUmemAllocationProp (_v1): what cuMemCreate makes and where. */
struct cu_mem_alloc_prop {
	enum cu_mem_alloc_type type;
	enum cu_mem_handle_type requested_handle_types;
	struct cu_mem_location location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

/* CUmemPoolProps (_v1) */
struct cu_mem_pool_props {
	enum cu_mem_alloc_type alloc_type;
	enum cu_mem_handle_type handle_types;
	struct cu_mem_location location;
	void *win32_security_attributes;
	size_t max_size; /* 0: the system's default */
	unsigned short usage;
	unsigned char reserved[54];
};

/* CUmemPool_attribute; the RESERVED and USED attributes are cuuint64_t values. */
enum cu_mempool_attr {
	CU_POOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
	CU_POOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
	CU_POOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
	CU_POOL_ATTR_RELEASE_THRESHOLD = 4,
	CU_POOL_ATTR_RESERVED_MEM_CURRENT = 5, /* device memory the pool holds now */
	CU_POOL_ATTR_RESERVED_MEM_HIGH = 6,
	CU_POOL_ATTR_USED_MEM_CURRENT = 7,
	CU_POOL_ATTR_USED_MEM_HIGH = 8,
};

/* CUarray_format (the plain formats; the fake sizes elements from these) */
enum cu_array_format {
	CU_FMT_UNSIGNED_INT8 = 0x01,
	CU_FMT_UNSIGNED_INT16 = 0x02,
	CU_FMT_UNSIGNED_INT32 = 0x03,
	CU_FMT_SIGNED_INT8 = 0x08,
	CU_FMT_SIGNED_INT16 = 0x09,
	CU_FMT_SIGNED_INT32 = 0x0a,
	CU_FMT_HALF = 0x10,
	CU_FMT_FLOAT = 0x20,
	CU_FMT_MAX = 0x7FFFFFFF, /* CU_AD_FORMAT_MAX */
};

/* CUDA_ARRAY_DESCRIPTOR (_v2) */
struct cu_array_desc {
	size_t width;
	size_t height;
	enum cu_array_format format;
	unsigned num_channels;
};

/* CUDA_ARRAY3D_DESCRIPTOR (_v2) */
struct cu_array3d_desc {
	size_t width;
	size_t height;
	size_t depth;
	enum cu_array_format format;
	unsigned num_channels;
	unsigned flags; /* CUDA_ARRAY3D_* */
};

/* CUDA_ARRAY_MEMORY_REQUIREMENTS (_v1): what cuArrayGetMemoryRequirements fills. */
struct cu_array_mem_req {
	size_t size;
	size_t alignment;
	unsigned reserved[4];
};

/* CUDA_MEM_ALLOC_NODE_PARAMS (_v1; _v2 has the same layout) */
struct cu_mem_alloc_node_params {
	struct cu_mem_pool_props pool_props;	       /* in: location (device) of the memory */
	const struct cu_mem_access_desc *access_descs; /* in */
	size_t access_desc_count;		       /* in */
	size_t bytesize;			       /* in */
	cu_deviceptr dptr;			       /* out: the address the graph allocates at */
};

/* CUgraphNodeType */
enum cu_graph_node_type {
	CU_NODE_KERNEL = 0,
	CU_NODE_MEMCPY = 1,
	CU_NODE_MEMSET = 2,
	CU_NODE_HOST = 3,
	CU_NODE_GRAPH = 4,
	CU_NODE_EMPTY = 5,
	CU_NODE_WAIT_EVENT = 6,
	CU_NODE_EVENT_RECORD = 7,
	CU_NODE_EXT_SEMAS_SIGNAL = 8,
	CU_NODE_EXT_SEMAS_WAIT = 9,
	CU_NODE_MEM_ALLOC = 10, /* CU_GRAPH_NODE_TYPE_MEM_ALLOC */
	CU_NODE_MEM_FREE = 11,	/* CU_GRAPH_NODE_TYPE_MEM_FREE */
	CU_NODE_BATCH_MEM_OP = 12,
	CU_NODE_CONDITIONAL = 13,
};

/* CUgraphEdgeData (cuGraphAddNode_v2's dependencyData) */
struct cu_graph_edge_data {
	unsigned char from_port;
	unsigned char to_port;
	unsigned char type;
	unsigned char reserved[5];
};

/* CUgraphNodeParams (cuGraphAddNode, _v2): 256 bytes; the union is 29 long longs, of which we
 * read only the two memory node kinds. */
struct cu_graph_node_params {
	enum cu_graph_node_type type;
	int reserved0[3];
	union {
		long long reserved1[29];
		struct cu_mem_alloc_node_params alloc; /* CU_NODE_MEM_ALLOC */
		struct {
			cu_deviceptr dptr;
		} free; /* CU_NODE_MEM_FREE: CUDA_MEM_FREE_NODE_PARAMS */
	} u;
	long long reserved2;
};

/* CUgraphMem_attribute (cuuint64_t values) */
enum cu_graph_mem_attr {
	CU_GRAPH_MEM_USED_CURRENT = 0,	   /* CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT */
	CU_GRAPH_MEM_USED_HIGH = 1,	   /* CU_GRAPH_MEM_ATTR_USED_MEM_HIGH */
	CU_GRAPH_MEM_RESERVED_CURRENT = 2, /* CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT */
	CU_GRAPH_MEM_RESERVED_HIGH = 3,	   /* CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH */
};

/* --- NVML (nvml.h) --- */

/* nvmlReturn_t values we return or test for */
#define IPZ_NVML_SUCCESS			 0  /* NVML_SUCCESS */
#define IPZ_NVML_ERROR_UNINITIALIZED		 1  /* NVML_ERROR_UNINITIALIZED */
#define IPZ_NVML_ERROR_INVALID_ARGUMENT		 2  /* NVML_ERROR_INVALID_ARGUMENT */
#define IPZ_NVML_ERROR_NOT_SUPPORTED		 3  /* NVML_ERROR_NOT_SUPPORTED */
#define IPZ_NVML_ERROR_FUNCTION_NOT_FOUND	 13 /* NVML_ERROR_FUNCTION_NOT_FOUND */
#define IPZ_NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25 /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
#define IPZ_NVML_UUID_BUFFER_SIZE		 80 /* NVML_DEVICE_UUID_BUFFER_SIZE */

struct ipz_nvml_device; /* nvmlDevice_t points to it */

/* nvmlMemory_t (v1), bytes */
struct ipz_nvml_memory {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

/* nvmlMemory_v2_t, bytes; version must be IPZ_NVML_MEMORY_V2 (nvmlMemory_v2) */
struct ipz_nvml_memory_v2 {
	unsigned version;
	unsigned long long total;
	unsigned long long reserved; /* by the driver (system use) */
	unsigned long long free;
	unsigned long long used;
};
/* NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | 2 << 24 */
#define IPZ_NVML_MEMORY_V2 ((unsigned)(sizeof(struct ipz_nvml_memory_v2) | (2u << 24)))

#define IPZ_NVML_FUNCTIONS(FN)                                                                 \
	FN(nvmlDeviceGetMemoryInfo, int, (struct ipz_nvml_device *, struct ipz_nvml_memory *)) \
	FN(nvmlDeviceGetMemoryInfo_v2, int,                                                    \
	   (struct ipz_nvml_device *, struct ipz_nvml_memory_v2 *))                            \
	FN(nvmlDeviceGetUUID, int, (struct ipz_nvml_device *, char *, unsigned))

/* One function type per entry: ipz_nvml_fn_<symbol> (nvmlReturn_t is an int-sized enum). */
#define IPZ_NVML_DECLARE_FN_TYPE(sym, r, params) typedef r ipz_nvml_fn_##sym params;
IPZ_NVML_FUNCTIONS(IPZ_NVML_DECLARE_FN_TYPE)

/* --- CUDA types by name, for the prototype list --- */

#define CUDA_OWN_TYPE(t)		    CUDA_OWN_TYPE_##t
#define CUDA_OWN_TYPE_result		    enum cu_result
#define CUDA_OWN_TYPE_device		    cu_device
#define CUDA_OWN_TYPE_deviceptr		    cu_deviceptr
#define CUDA_OWN_TYPE_mem_handle	    cu_mem_handle
#define CUDA_OWN_TYPE_uint64		    cu_uint64
#define CUDA_OWN_TYPE_uuid		    struct cu_uuid
#define CUDA_OWN_TYPE_context		    struct cu_ctx *
#define CUDA_OWN_TYPE_stream		    struct cu_stream *
#define CUDA_OWN_TYPE_array		    struct cu_array *
#define CUDA_OWN_TYPE_mipmapped_array	    struct cu_mipmapped_array *
#define CUDA_OWN_TYPE_mem_pool		    struct cu_mem_pool *
#define CUDA_OWN_TYPE_graph		    struct cu_graph *
#define CUDA_OWN_TYPE_graph_node	    struct cu_graph_node *
#define CUDA_OWN_TYPE_graph_exec	    struct cu_graph_exec *
#define CUDA_OWN_TYPE_proc_query_result	    enum cu_proc_query_result
#define CUDA_OWN_TYPE_mem_location	    struct cu_mem_location
#define CUDA_OWN_TYPE_mem_alloc_type	    enum cu_mem_alloc_type
#define CUDA_OWN_TYPE_mem_alloc_prop	    struct cu_mem_alloc_prop
#define CUDA_OWN_TYPE_mem_access_desc	    struct cu_mem_access_desc
#define CUDA_OWN_TYPE_mem_pool_props	    struct cu_mem_pool_props
#define CUDA_OWN_TYPE_mempool_attr	    enum cu_mempool_attr
#define CUDA_OWN_TYPE_array_desc	    struct cu_array_desc
#define CUDA_OWN_TYPE_array3d_desc	    struct cu_array3d_desc
#define CUDA_OWN_TYPE_array_mem_req	    struct cu_array_mem_req
#define CUDA_OWN_TYPE_mem_alloc_node_params struct cu_mem_alloc_node_params
#define CUDA_OWN_TYPE_graph_node_params	    struct cu_graph_node_params
#define CUDA_OWN_TYPE_graph_edge_data	    struct cu_graph_edge_data
#define CUDA_OWN_TYPE_graph_mem_attr	    enum cu_graph_mem_attr

/* Every CUDA driver function the interposer wraps or calls and the fake implements, by its
 * exported (versioned) symbol. */
#define CUDA_API_FUNCTIONS(FN, T)                                                                  \
	FN(cuInit, T(result), (unsigned))                                                          \
	FN(cuDriverGetVersion, T(result), (int *))                                                 \
	FN(cuDeviceGet, T(result), (T(device) *, int))                                             \
	FN(cuDeviceGetCount, T(result), (int *))                                                   \
	FN(cuDeviceGetUuid, T(result), (T(uuid) *, T(device)))                                     \
	FN(cuDeviceGetUuid_v2, T(result), (T(uuid) *, T(device)))                                  \
	FN(cuDeviceTotalMem_v2, T(result), (size_t *, T(device)))                                  \
	FN(cuCtxGetDevice, T(result), (T(device) *))                                               \
	FN(cuDevicePrimaryCtxRetain, T(result), (T(context) *, T(device)))                         \
	FN(cuCtxSetCurrent, T(result), (T(context)))                                               \
	FN(cuGetProcAddress, T(result), (const char *, void **, int, T(uint64)))                   \
	FN(cuGetProcAddress_v2, T(result),                                                         \
	   (const char *, void **, int, T(uint64), T(proc_query_result) *))                        \
	FN(cuMemGetInfo_v2, T(result), (size_t *, size_t *))                                       \
	FN(cuMemAlloc_v2, T(result), (T(deviceptr) *, size_t))                                     \
	FN(cuMemAllocPitch_v2, T(result), (T(deviceptr) *, size_t *, size_t, size_t, unsigned))    \
	FN(cuMemFree_v2, T(result), (T(deviceptr)))                                                \
	FN(cuMemAllocManaged, T(result), (T(deviceptr) *, size_t, unsigned))                       \
	FN(cuMemCreate, T(result),                                                                 \
	   (T(mem_handle) *, size_t, const T(mem_alloc_prop) *, unsigned long long))               \
	FN(cuMemRelease, T(result), (T(mem_handle)))                                               \
	FN(cuMemMap, T(result), (T(deviceptr), size_t, size_t, T(mem_handle), unsigned long long)) \
	FN(cuMemUnmap, T(result), (T(deviceptr), size_t))                                          \
	FN(cuMemAddressReserve, T(result),                                                         \
	   (T(deviceptr) *, size_t, size_t, T(deviceptr), unsigned long long))                     \
	FN(cuMemAddressFree, T(result), (T(deviceptr), size_t))                                    \
	FN(cuMemSetAccess, T(result), (T(deviceptr), size_t, const T(mem_access_desc) *, size_t))  \
	FN(cuMemAllocAsync, T(result), (T(deviceptr) *, size_t, T(stream)))                        \
	FN(cuMemAllocAsync_ptsz, T(result), (T(deviceptr) *, size_t, T(stream)))                   \
	FN(cuMemAllocFromPoolAsync, T(result), (T(deviceptr) *, size_t, T(mem_pool), T(stream)))   \
	FN(cuMemAllocFromPoolAsync_ptsz, T(result),                                                \
	   (T(deviceptr) *, size_t, T(mem_pool), T(stream)))                                       \
	FN(cuMemFreeAsync, T(result), (T(deviceptr), T(stream)))                                   \
	FN(cuMemFreeAsync_ptsz, T(result), (T(deviceptr), T(stream)))                              \
	FN(cuMemPoolCreate, T(result), (T(mem_pool) *, const T(mem_pool_props) *))                 \
	FN(cuMemPoolDestroy, T(result), (T(mem_pool)))                                             \
	FN(cuMemPoolTrimTo, T(result), (T(mem_pool), size_t))                                      \
	FN(cuMemPoolGetAttribute, T(result), (T(mem_pool), T(mempool_attr), void *))               \
	FN(cuDeviceGetDefaultMemPool, T(result), (T(mem_pool) *, T(device)))                       \
	FN(cuDeviceGetMemPool, T(result), (T(mem_pool) *, T(device)))                              \
	FN(cuDeviceSetMemPool, T(result), (T(device), T(mem_pool)))                                \
	FN(cuMemGetDefaultMemPool, T(result),                                                      \
	   (T(mem_pool) *, T(mem_location) *, T(mem_alloc_type)))                                  \
	FN(cuMemGetMemPool, T(result), (T(mem_pool) *, T(mem_location) *, T(mem_alloc_type)))      \
	FN(cuMemSetMemPool, T(result), (T(mem_location) *, T(mem_alloc_type), T(mem_pool)))        \
	FN(cuArrayCreate_v2, T(result), (T(array) *, const T(array_desc) *))                       \
	FN(cuArray3DCreate_v2, T(result), (T(array) *, const T(array3d_desc) *))                   \
	FN(cuArrayDestroy, T(result), (T(array)))                                                  \
	FN(cuArrayGetMemoryRequirements, T(result), (T(array_mem_req) *, T(array), T(device)))     \
	FN(cuMipmappedArrayCreate, T(result),                                                      \
	   (T(mipmapped_array) *, const T(array3d_desc) *, unsigned))                              \
	FN(cuMipmappedArrayDestroy, T(result), (T(mipmapped_array)))                               \
	FN(cuMipmappedArrayGetMemoryRequirements, T(result),                                       \
	   (T(array_mem_req) *, T(mipmapped_array), T(device)))                                    \
	FN(cuGraphCreate, T(result), (T(graph) *, unsigned))                                       \
	FN(cuGraphDestroy, T(result), (T(graph)))                                                  \
	FN(cuGraphAddMemAllocNode, T(result),                                                      \
	   (T(graph_node) *, T(graph), T(graph_node) const *, size_t, T(mem_alloc_node_params) *)) \
	FN(cuGraphAddMemFreeNode, T(result),                                                       \
	   (T(graph_node) *, T(graph), T(graph_node) const *, size_t, T(deviceptr)))               \
	FN(cuGraphAddNode, T(result),                                                              \
	   (T(graph_node) *, T(graph), T(graph_node) const *, size_t, T(graph_node_params) *))     \
	FN(cuGraphAddNode_v2, T(result),                                                           \
	   (T(graph_node) *, T(graph), T(graph_node) const *, const T(graph_edge_data) *, size_t,  \
	    T(graph_node_params) *))                                                               \
	FN(cuGraphInstantiateWithFlags, T(result),                                                 \
	   (T(graph_exec) *, T(graph), unsigned long long))                                        \
	FN(cuGraphLaunch, T(result), (T(graph_exec), T(stream)))                                   \
	FN(cuGraphLaunch_ptsz, T(result), (T(graph_exec), T(stream)))                              \
	FN(cuGraphExecDestroy, T(result), (T(graph_exec)))                                         \
	FN(cuDeviceGetGraphMemAttribute, T(result), (T(device), T(graph_mem_attr), void *))        \
	FN(cuDeviceGraphMemTrim, T(result), (T(device)))                                           \
	FN(cuStreamSynchronize, T(result), (T(stream)))                                            \
	FN(cuStreamSynchronize_ptsz, T(result), (T(stream)))                                       \
	FN(cuCtxSynchronize, T(result), (void))

/* One function type per entry: cu_fn_<symbol>, e.g. cu_fn_cuMemAlloc_v2. */
#define CUDA_API_DECLARE_FN_TYPE(sym, r, params) typedef r cu_fn_##sym params;
CUDA_API_FUNCTIONS(CUDA_API_DECLARE_FN_TYPE, CUDA_OWN_TYPE)

/* What cuGetProcAddress(base, version, flags) returns, see the top comment. Entries of one base
 * name are in increasing version order; the _ptsz entry follows the legacy one it replaces. */
#define CUDA_API_PROCS(P)                                                                         \
	P(cuInit, cuInit, 2000, 0)                                                                \
	P(cuDriverGetVersion, cuDriverGetVersion, 2020, 0)                                        \
	P(cuDeviceGet, cuDeviceGet, 2000, 0)                                                      \
	P(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)                                            \
	P(cuDeviceGetUuid, cuDeviceGetUuid, 9020, 0)                                              \
	P(cuDeviceGetUuid, cuDeviceGetUuid_v2, 11040, 0)                                          \
	P(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, 0)                                         \
	P(cuCtxGetDevice, cuCtxGetDevice, 2000, 0)                                                \
	P(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)                            \
	P(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0)                                              \
	P(cuGetProcAddress, cuGetProcAddress, 11030, 0)                                           \
	P(cuGetProcAddress, cuGetProcAddress_v2, 12000, 0)                                        \
	P(cuMemGetInfo, cuMemGetInfo_v2, 3020, 0)                                                 \
	P(cuMemAlloc, cuMemAlloc_v2, 3020, 0)                                                     \
	P(cuMemAllocPitch, cuMemAllocPitch_v2, 3020, 0)                                           \
	P(cuMemFree, cuMemFree_v2, 3020, 0)                                                       \
	P(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)                                          \
	P(cuMemCreate, cuMemCreate, 10020, 0)                                                     \
	P(cuMemRelease, cuMemRelease, 10020, 0)                                                   \
	P(cuMemMap, cuMemMap, 10020, 0)                                                           \
	P(cuMemUnmap, cuMemUnmap, 10020, 0)                                                       \
	P(cuMemAddressReserve, cuMemAddressReserve, 10020, 0)                                     \
	P(cuMemAddressFree, cuMemAddressFree, 10020, 0)                                           \
	P(cuMemSetAccess, cuMemSetAccess, 10020, 0)                                               \
	P(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                                             \
	P(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, 1)                                        \
	P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)                             \
	P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, 1)                        \
	P(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                                               \
	P(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, 1)                                          \
	P(cuMemPoolCreate, cuMemPoolCreate, 11020, 0)                                             \
	P(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0)                                           \
	P(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)                                             \
	P(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0)                                 \
	P(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0)                         \
	P(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0)                                       \
	P(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, 0)                                       \
	P(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool, 13000, 0)                               \
	P(cuMemGetMemPool, cuMemGetMemPool, 13000, 0)                                             \
	P(cuMemSetMemPool, cuMemSetMemPool, 13000, 0)                                             \
	P(cuArrayCreate, cuArrayCreate_v2, 3020, 0)                                               \
	P(cuArray3DCreate, cuArray3DCreate_v2, 3020, 0)                                           \
	P(cuArrayDestroy, cuArrayDestroy, 2000, 0)                                                \
	P(cuArrayGetMemoryRequirements, cuArrayGetMemoryRequirements, 11060, 0)                   \
	P(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0)                                \
	P(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0)                              \
	P(cuMipmappedArrayGetMemoryRequirements, cuMipmappedArrayGetMemoryRequirements, 11060, 0) \
	P(cuGraphCreate, cuGraphCreate, 10000, 0)                                                 \
	P(cuGraphDestroy, cuGraphDestroy, 10000, 0)                                               \
	P(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 11040, 0)                               \
	P(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode, 11040, 0)                                 \
	P(cuGraphAddNode, cuGraphAddNode, 12020, 0)                                               \
	P(cuGraphAddNode, cuGraphAddNode_v2, 12030, 0)                                            \
	P(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0)                     \
	P(cuGraphLaunch, cuGraphLaunch, 10000, 0)                                                 \
	P(cuGraphLaunch, cuGraphLaunch_ptsz, 10000, 1)                                            \
	P(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0)                                       \
	P(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute, 11040, 0)                   \
	P(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0)                                   \
	P(cuStreamSynchronize, cuStreamSynchronize, 2000, 0)                                      \
	P(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000, 1)                                 \
	P(cuCtxSynchronize, cuCtxSynchronize, 2000, 0)
