/*
 * Proves interposer/cuda-api.h ABI-identical to NVIDIA's cuda.h and cudaTypedefs.h (the CUDA
 * toolkit's, where it is installed: tests/abi/meson.build looks for it). Everything is a
 * _Static_assert: the file compiles only when the two agree.
 *
 *  - every struct we declare: same size and alignment, and the offset and size of the fields
 *    the interposer and the fake driver read;
 *  - every enum value and flag we name;
 *  - every function of CUDA_API_FUNCTIONS: the list expanded with NVIDIA's type names
 *    (CUDA_REAL_TYPE) is __builtin_types_compatible_p with typeof(&symbol) from cuda.h, or,
 *    for the names cuda.h maps to a newer variant (cuGetProcAddress, cuGraphAddNode,
 *    cuDeviceGetUuid, the _ptsz ones), with cudaTypedefs.h's PFN_<name>_v<version>.
 *
 * main() only reports success.
 */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

#include "cuda-api.h"
#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a)
#define ST(a, b)   _Static_assert(sizeof(a) == sizeof(b) && _Alignof(a) == _Alignof(b), #a)
#define F(o, of, t, tf)                                                      \
	_Static_assert(offsetof(o, of) == offsetof(t, tf) &&                 \
			       sizeof(((o *)0)->of) == sizeof(((t *)0)->tf), \
		       #o "." #of)
ST(enum cu_result, CUresult);
ST(cu_device, CUdevice);
ST(cu_deviceptr, CUdeviceptr);
ST(cu_mem_handle, CUmemGenericAllocationHandle);
ST(struct cu_uuid, CUuuid);
ST(struct cu_mem_location, CUmemLocation);
ST(struct cu_mem_alloc_prop, CUmemAllocationProp);
F(struct cu_mem_alloc_prop, location, CUmemAllocationProp, location);
F(struct cu_mem_alloc_prop, alloc_flags, CUmemAllocationProp, allocFlags);
F(struct cu_mem_alloc_prop, win32_handle_meta_data, CUmemAllocationProp, win32HandleMetaData);
ST(struct cu_mem_pool_props, CUmemPoolProps);
F(struct cu_mem_pool_props, max_size, CUmemPoolProps, maxSize);
F(struct cu_mem_pool_props, usage, CUmemPoolProps, usage);
F(struct cu_mem_pool_props, reserved, CUmemPoolProps, reserved);
ST(struct cu_mem_access_desc, CUmemAccessDesc);
ST(struct cu_array_desc, CUDA_ARRAY_DESCRIPTOR);
F(struct cu_array_desc, format, CUDA_ARRAY_DESCRIPTOR, Format);
F(struct cu_array_desc, num_channels, CUDA_ARRAY_DESCRIPTOR, NumChannels);
ST(struct cu_array3d_desc, CUDA_ARRAY3D_DESCRIPTOR);
F(struct cu_array3d_desc, flags, CUDA_ARRAY3D_DESCRIPTOR, Flags);
F(struct cu_array3d_desc, depth, CUDA_ARRAY3D_DESCRIPTOR, Depth);
ST(struct cu_array_mem_req, CUDA_ARRAY_MEMORY_REQUIREMENTS);
ST(struct cu_mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS);
F(struct cu_mem_alloc_node_params, bytesize, CUDA_MEM_ALLOC_NODE_PARAMS, bytesize);
F(struct cu_mem_alloc_node_params, dptr, CUDA_MEM_ALLOC_NODE_PARAMS, dptr);
ST(struct cu_mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS_v2);
ST(struct cu_graph_node_params, CUgraphNodeParams);
F(struct cu_graph_node_params, u.alloc, CUgraphNodeParams, alloc);
F(struct cu_graph_node_params, u.free.dptr, CUgraphNodeParams, free.dptr);
F(struct cu_graph_node_params, reserved2, CUgraphNodeParams, reserved2);
ST(struct cu_graph_edge_data, CUgraphEdgeData);
SAME(CU_RES_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(CU_RES_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(CU_RES_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME(CU_RES_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(CU_RES_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(CU_RES_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME(CU_RES_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
SAME(CU_RES_ILLEGAL_STATE, CUDA_ERROR_ILLEGAL_STATE);
SAME(CU_RES_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED);
SAME(CU_RES_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
SAME(CU_POOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
SAME(CU_POOL_ATTR_USED_MEM_HIGH, CU_MEMPOOL_ATTR_USED_MEM_HIGH);
SAME(CU_POOL_ATTR_RELEASE_THRESHOLD, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME(CU_POOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
     CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
SAME(CU_GRAPH_MEM_RESERVED_CURRENT, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
SAME(CU_GRAPH_MEM_RESERVED_HIGH, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
SAME(CU_NODE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
SAME(CU_NODE_MEM_FREE, CU_GRAPH_NODE_TYPE_MEM_FREE);
SAME(CU_NODE_CONDITIONAL, CU_GRAPH_NODE_TYPE_CONDITIONAL);
SAME(CU_PROC_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
SAME(CU_PROC_LEGACY_STREAM, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
SAME(CU_PROC_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
SAME(CU_LOC_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME(CU_LOC_HOST, CU_MEM_LOCATION_TYPE_HOST);
SAME(CU_LOC_HOST_NUMA_CURRENT, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
SAME(CU_ALLOC_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME(CU_ALLOC_MANAGED, CU_MEM_ALLOCATION_TYPE_MANAGED);
SAME(CU_ACCESS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME(CU_HANDLE_FABRIC, CU_MEM_HANDLE_TYPE_FABRIC);
SAME(CU_FMT_FLOAT, CU_AD_FORMAT_FLOAT);
SAME(CU_FMT_SIGNED_INT32, CU_AD_FORMAT_SIGNED_INT32);
SAME(CU_FMT_HALF, CU_AD_FORMAT_HALF);
SAME(CU_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL);
SAME(CU_ATTACH_SINGLE, CU_MEM_ATTACH_SINGLE);
/* function types */
#define CUDA_REAL_TYPE(t)		     CUDA_REAL_TYPE_##t
#define CUDA_REAL_TYPE_result		     CUresult
#define CUDA_REAL_TYPE_device		     CUdevice
#define CUDA_REAL_TYPE_deviceptr	     CUdeviceptr
#define CUDA_REAL_TYPE_mem_handle	     CUmemGenericAllocationHandle
#define CUDA_REAL_TYPE_uint64		     cuuint64_t
#define CUDA_REAL_TYPE_uuid		     CUuuid
#define CUDA_REAL_TYPE_context		     CUcontext
#define CUDA_REAL_TYPE_stream		     CUstream
#define CUDA_REAL_TYPE_array		     CUarray
#define CUDA_REAL_TYPE_mipmapped_array	     CUmipmappedArray
#define CUDA_REAL_TYPE_mem_pool		     CUmemoryPool
#define CUDA_REAL_TYPE_graph		     CUgraph
#define CUDA_REAL_TYPE_graph_node	     CUgraphNode
#define CUDA_REAL_TYPE_graph_exec	     CUgraphExec
#define CUDA_REAL_TYPE_proc_query_result     CUdriverProcAddressQueryResult
#define CUDA_REAL_TYPE_mem_location	     CUmemLocation
#define CUDA_REAL_TYPE_mem_alloc_type	     CUmemAllocationType
#define CUDA_REAL_TYPE_mem_alloc_prop	     CUmemAllocationProp
#define CUDA_REAL_TYPE_mem_access_desc	     CUmemAccessDesc
#define CUDA_REAL_TYPE_mem_pool_props	     CUmemPoolProps
#define CUDA_REAL_TYPE_mempool_attr	     CUmemPool_attribute
#define CUDA_REAL_TYPE_array_desc	     CUDA_ARRAY_DESCRIPTOR
#define CUDA_REAL_TYPE_array3d_desc	     CUDA_ARRAY3D_DESCRIPTOR
#define CUDA_REAL_TYPE_array_mem_req	     CUDA_ARRAY_MEMORY_REQUIREMENTS
#define CUDA_REAL_TYPE_mem_alloc_node_params CUDA_MEM_ALLOC_NODE_PARAMS
#define CUDA_REAL_TYPE_graph_node_params     CUgraphNodeParams
#define CUDA_REAL_TYPE_graph_edge_data	     CUgraphEdgeData
#define CUDA_REAL_TYPE_graph_mem_attr	     CUgraphMem_attribute
#define RT(sym, r, params)		     typedef r real_fn_##sym params;
CUDA_API_FUNCTIONS(RT, CUDA_REAL_TYPE)
#include <cudaTypedefs.h>
#define CHK(sym, ver) _Static_assert(__builtin_types_compatible_p(real_fn_##sym *, PFN_##ver), #sym)
CHK(cuInit, cuInit_v2000);
CHK(cuMemAlloc_v2, cuMemAlloc_v3020);
CHK(cuMemAllocPitch_v2, cuMemAllocPitch_v3020);
CHK(cuMemFree_v2, cuMemFree_v3020);
CHK(cuDeviceGetUuid, cuDeviceGetUuid_v9020);
CHK(cuDeviceGetUuid_v2, cuDeviceGetUuid_v11040);
CHK(cuDeviceTotalMem_v2, cuDeviceTotalMem_v3020);
CHK(cuMemGetInfo_v2, cuMemGetInfo_v3020);
CHK(cuGetProcAddress, cuGetProcAddress_v11030);
CHK(cuGetProcAddress_v2, cuGetProcAddress_v12000);
CHK(cuGraphAddNode, cuGraphAddNode_v12020);
CHK(cuGraphAddNode_v2, cuGraphAddNode_v12030);
CHK(cuMemAllocAsync_ptsz, cuMemAllocAsync_v11020_ptsz);
CHK(cuMemFreeAsync_ptsz, cuMemFreeAsync_v11020_ptsz);
CHK(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync_v11020_ptsz);
CHK(cuGraphLaunch_ptsz, cuGraphLaunch_v10000_ptsz);
CHK(cuStreamSynchronize_ptsz, cuStreamSynchronize_v7000_ptsz);
CHK(cuArrayCreate_v2, cuArrayCreate_v3020);
CHK(cuArray3DCreate_v2, cuArray3DCreate_v3020);
#undef cuGetProcAddress
_Static_assert(__builtin_types_compatible_p(real_fn_cuInit *, typeof(&cuInit)), "cuInit");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDriverGetVersion *,
					    typeof(&cuDriverGetVersion)),
	       "cuDriverGetVersion");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGet *, typeof(&cuDeviceGet)),
	       "cuDeviceGet");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGetCount *, typeof(&cuDeviceGetCount)),
	       "cuDeviceGetCount");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGetUuid_v2 *,
					    typeof(&cuDeviceGetUuid_v2)),
	       "cuDeviceGetUuid_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceTotalMem_v2 *,
					    typeof(&cuDeviceTotalMem_v2)),
	       "cuDeviceTotalMem_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuCtxGetDevice *, typeof(&cuCtxGetDevice)),
	       "cuCtxGetDevice");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDevicePrimaryCtxRetain *,
					    typeof(&cuDevicePrimaryCtxRetain)),
	       "cuDevicePrimaryCtxRetain");
_Static_assert(__builtin_types_compatible_p(real_fn_cuCtxSetCurrent *, typeof(&cuCtxSetCurrent)),
	       "cuCtxSetCurrent");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGetProcAddress_v2 *,
					    typeof(&cuGetProcAddress_v2)),
	       "cuGetProcAddress_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemGetInfo_v2 *, typeof(&cuMemGetInfo_v2)),
	       "cuMemGetInfo_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAlloc_v2 *, typeof(&cuMemAlloc_v2)),
	       "cuMemAlloc_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAllocPitch_v2 *,
					    typeof(&cuMemAllocPitch_v2)),
	       "cuMemAllocPitch_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemFree_v2 *, typeof(&cuMemFree_v2)),
	       "cuMemFree_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAllocManaged *,
					    typeof(&cuMemAllocManaged)),
	       "cuMemAllocManaged");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemCreate *, typeof(&cuMemCreate)),
	       "cuMemCreate");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemRelease *, typeof(&cuMemRelease)),
	       "cuMemRelease");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemMap *, typeof(&cuMemMap)), "cuMemMap");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemUnmap *, typeof(&cuMemUnmap)),
	       "cuMemUnmap");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAddressReserve *,
					    typeof(&cuMemAddressReserve)),
	       "cuMemAddressReserve");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAddressFree *, typeof(&cuMemAddressFree)),
	       "cuMemAddressFree");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemSetAccess *, typeof(&cuMemSetAccess)),
	       "cuMemSetAccess");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAllocAsync *, typeof(&cuMemAllocAsync)),
	       "cuMemAllocAsync");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemAllocFromPoolAsync *,
					    typeof(&cuMemAllocFromPoolAsync)),
	       "cuMemAllocFromPoolAsync");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemFreeAsync *, typeof(&cuMemFreeAsync)),
	       "cuMemFreeAsync");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemPoolCreate *, typeof(&cuMemPoolCreate)),
	       "cuMemPoolCreate");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemPoolDestroy *, typeof(&cuMemPoolDestroy)),
	       "cuMemPoolDestroy");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemPoolTrimTo *, typeof(&cuMemPoolTrimTo)),
	       "cuMemPoolTrimTo");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemPoolGetAttribute *,
					    typeof(&cuMemPoolGetAttribute)),
	       "cuMemPoolGetAttribute");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGetDefaultMemPool *,
					    typeof(&cuDeviceGetDefaultMemPool)),
	       "cuDeviceGetDefaultMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGetMemPool *,
					    typeof(&cuDeviceGetMemPool)),
	       "cuDeviceGetMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceSetMemPool *,
					    typeof(&cuDeviceSetMemPool)),
	       "cuDeviceSetMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemGetDefaultMemPool *,
					    typeof(&cuMemGetDefaultMemPool)),
	       "cuMemGetDefaultMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemGetMemPool *, typeof(&cuMemGetMemPool)),
	       "cuMemGetMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMemSetMemPool *, typeof(&cuMemSetMemPool)),
	       "cuMemSetMemPool");
_Static_assert(__builtin_types_compatible_p(real_fn_cuArrayCreate_v2 *, typeof(&cuArrayCreate_v2)),
	       "cuArrayCreate_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuArray3DCreate_v2 *,
					    typeof(&cuArray3DCreate_v2)),
	       "cuArray3DCreate_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuArrayDestroy *, typeof(&cuArrayDestroy)),
	       "cuArrayDestroy");
_Static_assert(__builtin_types_compatible_p(real_fn_cuArrayGetMemoryRequirements *,
					    typeof(&cuArrayGetMemoryRequirements)),
	       "cuArrayGetMemoryRequirements");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMipmappedArrayCreate *,
					    typeof(&cuMipmappedArrayCreate)),
	       "cuMipmappedArrayCreate");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMipmappedArrayDestroy *,
					    typeof(&cuMipmappedArrayDestroy)),
	       "cuMipmappedArrayDestroy");
_Static_assert(__builtin_types_compatible_p(real_fn_cuMipmappedArrayGetMemoryRequirements *,
					    typeof(&cuMipmappedArrayGetMemoryRequirements)),
	       "cuMipmappedArrayGetMemoryRequirements");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphCreate *, typeof(&cuGraphCreate)),
	       "cuGraphCreate");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphDestroy *, typeof(&cuGraphDestroy)),
	       "cuGraphDestroy");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphAddMemAllocNode *,
					    typeof(&cuGraphAddMemAllocNode)),
	       "cuGraphAddMemAllocNode");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphAddMemFreeNode *,
					    typeof(&cuGraphAddMemFreeNode)),
	       "cuGraphAddMemFreeNode");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphAddNode_v2 *,
					    typeof(&cuGraphAddNode_v2)),
	       "cuGraphAddNode_v2");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphInstantiateWithFlags *,
					    typeof(&cuGraphInstantiateWithFlags)),
	       "cuGraphInstantiateWithFlags");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphLaunch *, typeof(&cuGraphLaunch)),
	       "cuGraphLaunch");
_Static_assert(__builtin_types_compatible_p(real_fn_cuGraphExecDestroy *,
					    typeof(&cuGraphExecDestroy)),
	       "cuGraphExecDestroy");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGetGraphMemAttribute *,
					    typeof(&cuDeviceGetGraphMemAttribute)),
	       "cuDeviceGetGraphMemAttribute");
_Static_assert(__builtin_types_compatible_p(real_fn_cuDeviceGraphMemTrim *,
					    typeof(&cuDeviceGraphMemTrim)),
	       "cuDeviceGraphMemTrim");
_Static_assert(__builtin_types_compatible_p(real_fn_cuStreamSynchronize *,
					    typeof(&cuStreamSynchronize)),
	       "cuStreamSynchronize");

int main(void)
{
	(void)printf("cuda-api.h matches cuda.h %d\n", CUDA_VERSION);
	return 0;
}
