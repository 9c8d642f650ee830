/*
 * Proves src/gpu/nvml/nvml-api.h ABI-identical to NVIDIA's nvml.h (fetched from Debian's
 * libnvidia-ml-dev by scripts/fetch-nvml-header). Everything is a _Static_assert: the file
 * compiles only when the two agree.
 *
 *  - every struct we declare: same size, alignment, and offset and size of every field;
 *  - every enum: same size and signedness, and every value we name;
 *  - every #define constant we use;
 *  - every function in NVML_API_FUNCTIONS_ABI, NVML_API_FUNCTIONS_COUNTERS and
 *    NVML_API_FAKE_FUNCTIONS: the list expanded with NVIDIA's type names (NVML_REAL_TYPE, the
 *    same mapping NVML_OWN_TYPE gives ours, each pair checked below) is
 *    __builtin_types_compatible_p with typeof(&symbol) from nvml.h.
 *
 * Run by tests/abi/abi-check; it prints nothing and main() only reports success.
 */

#define NVML_NO_UNVERSIONED_FUNC_DEFS /* declares the _v2 and v1 names as themselves */
#include <nvml.h>
#include <stddef.h>
#include <stdio.h>

#include "nvml-api.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)
#define SAME_TYPE(a, b)                                                      \
	_Static_assert(sizeof(a) == sizeof(b) && _Alignof(a) == _Alignof(b), \
		       "size or alignment of " #a " != " #b)
#define SIGNED(t) ((long long)(t)-1 < 0)
#define SAME_ENUM(a, b)  \
	SAME_TYPE(a, b); \
	_Static_assert(SIGNED(a) == SIGNED(b), "signedness " #a)
#define FIELD_SIZE(t, f) sizeof(((t *)0)->f)
#define FIELD_TYPE(t, f) typeof(((t *)0)->f)
/* Same offset and size; for fields that are not handles also the same C type. */
#define SAME_FIELD(ours, of, theirs, tf)                                       \
	_Static_assert(offsetof(ours, of) == offsetof(theirs, tf) &&           \
			       FIELD_SIZE(ours, of) == FIELD_SIZE(theirs, tf), \
		       #ours "." #of " != " #theirs "." #tf)
#define SAME_SCALAR_FIELD(ours, of, theirs, tf)                                                    \
	SAME_FIELD(ours, of, theirs, tf);                                                          \
	_Static_assert(__builtin_types_compatible_p(FIELD_TYPE(ours, of), FIELD_TYPE(theirs, tf)), \
		       "type of " #ours "." #of)

/* --- NVIDIA's names for the types the prototype lists use --- */
#define NVML_REAL_TYPE(t)			     NVML_REAL_TYPE_##t
#define NVML_REAL_TYPE_ret			     nvmlReturn_t
#define NVML_REAL_TYPE_device			     nvmlDevice_t
#define NVML_REAL_TYPE_event_set		     nvmlEventSet_t
#define NVML_REAL_TYPE_gpu_instance		     nvmlGpuInstance_t
#define NVML_REAL_TYPE_compute_instance		     nvmlComputeInstance_t
#define NVML_REAL_TYPE_pci_info			     nvmlPciInfo_t
#define NVML_REAL_TYPE_memory			     nvmlMemory_t
#define NVML_REAL_TYPE_utilization		     nvmlUtilization_t
#define NVML_REAL_TYPE_event_data		     nvmlEventData_t
#define NVML_REAL_TYPE_process_info		     nvmlProcessInfo_t
#define NVML_REAL_TYPE_process_utilization_sample    nvmlProcessUtilizationSample_t
#define NVML_REAL_TYPE_topology_level		     nvmlGpuTopologyLevel_t
#define NVML_REAL_TYPE_temperature_sensor	     nvmlTemperatureSensors_t
#define NVML_REAL_TYPE_temperature_threshold	     nvmlTemperatureThresholds_t
#define NVML_REAL_TYPE_clock_type		     nvmlClockType_t
#define NVML_REAL_TYPE_enable_state		     nvmlEnableState_t
#define NVML_REAL_TYPE_memory_error_type	     nvmlMemoryErrorType_t
#define NVML_REAL_TYPE_ecc_counter_type		     nvmlEccCounterType_t
#define NVML_REAL_TYPE_architecture		     nvmlDeviceArchitecture_t
#define NVML_REAL_TYPE_device_attributes	     nvmlDeviceAttributes_t
#define NVML_REAL_TYPE_gpu_instance_info	     nvmlGpuInstanceInfo_t
#define NVML_REAL_TYPE_compute_instance_info	     nvmlComputeInstanceInfo_t
#define NVML_REAL_TYPE_gpu_instance_profile_info     nvmlGpuInstanceProfileInfo_t
#define NVML_REAL_TYPE_compute_instance_profile_info nvmlComputeInstanceProfileInfo_t
#define NVML_REAL_TYPE_pcie_util_counter	     nvmlPcieUtilCounter_t
#define NVML_REAL_TYPE_memory_v2		     nvmlMemory_v2_t
#define NVML_REAL_TYPE_field_value		     nvmlFieldValue_t
#define NVML_REAL_TYPE_gpm_sample		     nvmlGpmSample_t
#define NVML_REAL_TYPE_gpm_metrics_get		     nvmlGpmMetricsGet_t
#define NVML_REAL_TYPE_gpm_support		     nvmlGpmSupport_t

/* Each pair of the mapping has the same size and alignment (structs and enums in detail below). */
#define SAME_MAPPED(t) SAME_TYPE(NVML_OWN_TYPE(t), NVML_REAL_TYPE(t))
SAME_MAPPED(ret);
SAME_MAPPED(device);
SAME_MAPPED(event_set);
SAME_MAPPED(gpu_instance);
SAME_MAPPED(compute_instance);
SAME_MAPPED(pci_info);
SAME_MAPPED(memory);
SAME_MAPPED(utilization);
SAME_MAPPED(event_data);
SAME_MAPPED(process_info);
SAME_MAPPED(process_utilization_sample);
SAME_MAPPED(topology_level);
SAME_MAPPED(temperature_sensor);
SAME_MAPPED(temperature_threshold);
SAME_MAPPED(clock_type);
SAME_MAPPED(enable_state);
SAME_MAPPED(memory_error_type);
SAME_MAPPED(ecc_counter_type);
SAME_MAPPED(architecture);
SAME_MAPPED(device_attributes);
SAME_MAPPED(gpu_instance_info);
SAME_MAPPED(compute_instance_info);
SAME_MAPPED(gpu_instance_profile_info);
SAME_MAPPED(compute_instance_profile_info);
SAME_MAPPED(pcie_util_counter);
SAME_MAPPED(memory_v2);
SAME_MAPPED(field_value);
SAME_MAPPED(gpm_sample);
SAME_MAPPED(gpm_metrics_get);
SAME_MAPPED(gpm_support);
_Static_assert(__builtin_types_compatible_p(NVML_OWN_TYPE(architecture),
					    NVML_REAL_TYPE(architecture)),
	       "nvmlDeviceArchitecture_t");

/* --- functions --- */
#define SAME_PROTOTYPE(sym, r, params)                                          \
	_Static_assert(__builtin_types_compatible_p(typeof(&sym), r(*) params), \
		       "prototype of " #sym " differs from nvml.h");
/* Not NVML_API_FUNCTIONS_NEW: the CUDA 13.4 memory-limit functions are newer than this nvml.h. */
NVML_API_FUNCTIONS_ABI(SAME_PROTOTYPE, NVML_REAL_TYPE)
NVML_API_FUNCTIONS_COUNTERS(SAME_PROTOTYPE, NVML_REAL_TYPE)
NVML_API_FAKE_FUNCTIONS(SAME_PROTOTYPE, NVML_REAL_TYPE)
/* Listed in NVML_API_FUNCTIONS_NEW, but older than this nvml.h. */
SAME_PROTOTYPE(nvmlDeviceGetPcieThroughput, NVML_REAL_TYPE(ret),
	       (NVML_REAL_TYPE(device), NVML_REAL_TYPE(pcie_util_counter), unsigned *))
/* Their structs, pinned to the sizes and offsets NVIDIA documents (a path pointer, then bytes). */
_Static_assert(sizeof(struct nvml_set_memory_limits) == 24 &&
		       offsetof(struct nvml_set_memory_limits, hard) == 16,
	       "nvmlSetMemoryLimits_v1_t");
_Static_assert(sizeof(struct nvml_get_memory_limits) == 32 &&
		       offsetof(struct nvml_get_memory_limits, current_used) == 24,
	       "nvmlGetMemoryLimits_v1_t");
/* nvmlPciInfoExt_v1_t (NVML 12.535): 64 bytes, version 0x1000040, as NVIDIA's header says. */
_Static_assert(sizeof(struct nvml_pci_info_ext) == 64 &&
		       offsetof(struct nvml_pci_info_ext, base_class) == 24 &&
		       offsetof(struct nvml_pci_info_ext, bus_id) == 32 &&
		       NVML_PCI_INFO_EXT_V1 == 0x1000040,
	       "nvmlPciInfoExt_v1_t");
/*
 * GPM: listed in NVML_API_FUNCTIONS_NEW, but this nvml.h (11.8) has it already: the functions,
 * the structs field by field, the versions and the metric ids we read, against NVIDIA's.
 */
SAME_PROTOTYPE(nvmlGpmQueryDeviceSupport, NVML_REAL_TYPE(ret),
	       (NVML_REAL_TYPE(device), NVML_REAL_TYPE(gpm_support) *))
SAME_PROTOTYPE(nvmlGpmSampleAlloc, NVML_REAL_TYPE(ret), (NVML_REAL_TYPE(gpm_sample) *))
SAME_PROTOTYPE(nvmlGpmSampleGet, NVML_REAL_TYPE(ret),
	       (NVML_REAL_TYPE(device), NVML_REAL_TYPE(gpm_sample)))
SAME_PROTOTYPE(nvmlGpmSampleFree, NVML_REAL_TYPE(ret), (NVML_REAL_TYPE(gpm_sample)))
SAME_PROTOTYPE(nvmlGpmMetricsGet, NVML_REAL_TYPE(ret), (NVML_REAL_TYPE(gpm_metrics_get) *))
SAME_TYPE(struct nvml_gpm_metric, nvmlGpmMetric_t);
SAME_SCALAR_FIELD(struct nvml_gpm_metric, metric_id, nvmlGpmMetric_t, metricId);
SAME_FIELD(struct nvml_gpm_metric, nvml_return, nvmlGpmMetric_t, nvmlReturn);
SAME_SCALAR_FIELD(struct nvml_gpm_metric, value, nvmlGpmMetric_t, value);
SAME_FIELD(struct nvml_gpm_metric, metric_info, nvmlGpmMetric_t, metricInfo);
SAME_SCALAR_FIELD(struct nvml_gpm_metric, metric_info.short_name, nvmlGpmMetric_t,
		  metricInfo.shortName);
SAME_SCALAR_FIELD(struct nvml_gpm_metric, metric_info.long_name, nvmlGpmMetric_t,
		  metricInfo.longName);
SAME_SCALAR_FIELD(struct nvml_gpm_metric, metric_info.unit, nvmlGpmMetric_t, metricInfo.unit);
SAME_TYPE(struct nvml_gpm_metrics_get, nvmlGpmMetricsGet_t);
SAME_SCALAR_FIELD(struct nvml_gpm_metrics_get, version, nvmlGpmMetricsGet_t, version);
SAME_SCALAR_FIELD(struct nvml_gpm_metrics_get, num_metrics, nvmlGpmMetricsGet_t, numMetrics);
SAME_FIELD(struct nvml_gpm_metrics_get, sample1, nvmlGpmMetricsGet_t, sample1);
SAME_FIELD(struct nvml_gpm_metrics_get, sample2, nvmlGpmMetricsGet_t, sample2);
SAME_FIELD(struct nvml_gpm_metrics_get, metrics, nvmlGpmMetricsGet_t, metrics);
SAME_TYPE(struct nvml_gpm_support, nvmlGpmSupport_t);
SAME_SCALAR_FIELD(struct nvml_gpm_support, version, nvmlGpmSupport_t, version);
SAME_SCALAR_FIELD(struct nvml_gpm_support, is_supported_device, nvmlGpmSupport_t,
		  isSupportedDevice);
SAME(NVML_GPM_METRICS_GET_V1, NVML_GPM_METRICS_GET_VERSION);
SAME(NVML_GPM_SUPPORT_V1, NVML_GPM_SUPPORT_VERSION);
SAME(NVML_GPM_ID_MAX, NVML_GPM_METRIC_MAX);
SAME(NVML_GPM_ID_GRAPHICS_UTIL, NVML_GPM_METRIC_GRAPHICS_UTIL);
SAME(NVML_GPM_ID_ANY_TENSOR_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL);
SAME(NVML_GPM_ID_DRAM_BW_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL);
SAME(NVML_GPM_ID_PCIE_TX_PER_SEC, NVML_GPM_METRIC_PCIE_TX_PER_SEC);
SAME(NVML_GPM_ID_PCIE_RX_PER_SEC, NVML_GPM_METRIC_PCIE_RX_PER_SEC);

/* --- enums --- */
SAME_ENUM(enum nvml_pcie_util_counter, nvmlPcieUtilCounter_t);
SAME(NVML_PCIE_TX, NVML_PCIE_UTIL_TX_BYTES);
SAME(NVML_PCIE_RX, NVML_PCIE_UTIL_RX_BYTES);
SAME_ENUM(enum nvml_return, nvmlReturn_t);
SAME(NVML_RET_SUCCESS, NVML_SUCCESS);
SAME(NVML_RET_UNINITIALIZED, NVML_ERROR_UNINITIALIZED);
SAME(NVML_RET_INVALID_ARGUMENT, NVML_ERROR_INVALID_ARGUMENT);
SAME(NVML_RET_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
SAME(NVML_RET_NO_PERMISSION, NVML_ERROR_NO_PERMISSION);
SAME(NVML_RET_ALREADY_INITIALIZED, NVML_ERROR_ALREADY_INITIALIZED);
SAME(NVML_RET_NOT_FOUND, NVML_ERROR_NOT_FOUND);
SAME(NVML_RET_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
SAME(NVML_RET_INSUFFICIENT_POWER, NVML_ERROR_INSUFFICIENT_POWER);
SAME(NVML_RET_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED);
SAME(NVML_RET_TIMEOUT, NVML_ERROR_TIMEOUT);
SAME(NVML_RET_IRQ_ISSUE, NVML_ERROR_IRQ_ISSUE);
SAME(NVML_RET_LIBRARY_NOT_FOUND, NVML_ERROR_LIBRARY_NOT_FOUND);
SAME(NVML_RET_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND);
SAME(NVML_RET_CORRUPTED_INFOROM, NVML_ERROR_CORRUPTED_INFOROM);
SAME(NVML_RET_GPU_IS_LOST, NVML_ERROR_GPU_IS_LOST);
SAME(NVML_RET_RESET_REQUIRED, NVML_ERROR_RESET_REQUIRED);
SAME(NVML_RET_OPERATING_SYSTEM, NVML_ERROR_OPERATING_SYSTEM);
SAME(NVML_RET_LIB_RM_VERSION_MISMATCH, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
SAME(NVML_RET_IN_USE, NVML_ERROR_IN_USE);
SAME(NVML_RET_MEMORY, NVML_ERROR_MEMORY);
SAME(NVML_RET_NO_DATA, NVML_ERROR_NO_DATA);
SAME(NVML_RET_VGPU_ECC_NOT_SUPPORTED, NVML_ERROR_VGPU_ECC_NOT_SUPPORTED);
SAME(NVML_RET_INSUFFICIENT_RESOURCES, NVML_ERROR_INSUFFICIENT_RESOURCES);
SAME(NVML_RET_FREQ_NOT_SUPPORTED, NVML_ERROR_FREQ_NOT_SUPPORTED);
SAME(NVML_RET_ARGUMENT_VERSION_MISMATCH, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME(NVML_RET_UNKNOWN, NVML_ERROR_UNKNOWN);

SAME_ENUM(enum nvml_topology_level, nvmlGpuTopologyLevel_t);
SAME(NVML_TOPO_INTERNAL, NVML_TOPOLOGY_INTERNAL);
SAME(NVML_TOPO_SINGLE, NVML_TOPOLOGY_SINGLE);
SAME(NVML_TOPO_MULTIPLE, NVML_TOPOLOGY_MULTIPLE);
SAME(NVML_TOPO_HOSTBRIDGE, NVML_TOPOLOGY_HOSTBRIDGE);
SAME(NVML_TOPO_NODE, NVML_TOPOLOGY_NODE);
SAME(NVML_TOPO_SYSTEM, NVML_TOPOLOGY_SYSTEM);

SAME_ENUM(enum nvml_temperature_sensor, nvmlTemperatureSensors_t);
SAME(NVML_TEMP_GPU, NVML_TEMPERATURE_GPU);

SAME_ENUM(enum nvml_temperature_threshold, nvmlTemperatureThresholds_t);
SAME(NVML_TEMP_THRESHOLD_SHUTDOWN, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
SAME(NVML_TEMP_THRESHOLD_SLOWDOWN, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
SAME(NVML_TEMP_THRESHOLD_MEM_MAX, NVML_TEMPERATURE_THRESHOLD_MEM_MAX);
SAME(NVML_TEMP_THRESHOLD_GPU_MAX, NVML_TEMPERATURE_THRESHOLD_GPU_MAX);

SAME_ENUM(enum nvml_clock_type, nvmlClockType_t);
SAME(NVML_CLK_GRAPHICS, NVML_CLOCK_GRAPHICS);
SAME(NVML_CLK_SM, NVML_CLOCK_SM);
SAME(NVML_CLK_MEM, NVML_CLOCK_MEM);
SAME(NVML_CLK_VIDEO, NVML_CLOCK_VIDEO);

SAME_ENUM(enum nvml_enable_state, nvmlEnableState_t);
SAME(NVML_STATE_DISABLED, NVML_FEATURE_DISABLED);
SAME(NVML_STATE_ENABLED, NVML_FEATURE_ENABLED);

SAME_ENUM(enum nvml_memory_error_type, nvmlMemoryErrorType_t);
SAME(NVML_ECC_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED);
SAME(NVML_ECC_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);

SAME_ENUM(enum nvml_ecc_counter_type, nvmlEccCounterType_t);
SAME(NVML_ECC_VOLATILE, NVML_VOLATILE_ECC);
SAME(NVML_ECC_AGGREGATE, NVML_AGGREGATE_ECC);

/* --- constants --- */
SAME(NVML_BUF_PCI_BUS_ID, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
SAME(NVML_BUF_PCI_BUS_ID_LEGACY, NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
SAME(NVML_BUF_UUID, NVML_DEVICE_UUID_BUFFER_SIZE);
SAME(NVML_BUF_UUID_V2, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
SAME(NVML_BUF_NAME, NVML_DEVICE_NAME_BUFFER_SIZE);
SAME(NVML_BUF_NAME_V2, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
SAME(NVML_BUF_DRIVER_VERSION, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
SAME(NVML_BUF_NVML_VERSION, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
SAME(NVML_EVENT_SINGLE_BIT_ECC, nvmlEventTypeSingleBitEccError);
SAME(NVML_EVENT_DOUBLE_BIT_ECC, nvmlEventTypeDoubleBitEccError);
SAME(NVML_EVENT_PSTATE, nvmlEventTypePState);
SAME(NVML_EVENT_XID_CRITICAL, nvmlEventTypeXidCriticalError);
SAME(NVML_EVENT_CLOCK, nvmlEventTypeClock);
SAME(NVML_MIG_DISABLE, NVML_DEVICE_MIG_DISABLE);
SAME(NVML_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE);
SAME(NVML_ARCH_KEPLER, NVML_DEVICE_ARCH_KEPLER);
SAME(NVML_ARCH_MAXWELL, NVML_DEVICE_ARCH_MAXWELL);
SAME(NVML_ARCH_PASCAL, NVML_DEVICE_ARCH_PASCAL);
SAME(NVML_ARCH_VOLTA, NVML_DEVICE_ARCH_VOLTA);
SAME(NVML_ARCH_TURING, NVML_DEVICE_ARCH_TURING);
SAME(NVML_ARCH_AMPERE, NVML_DEVICE_ARCH_AMPERE);
SAME(NVML_ARCH_ADA, NVML_DEVICE_ARCH_ADA);
SAME(NVML_ARCH_HOPPER, NVML_DEVICE_ARCH_HOPPER);
SAME(NVML_ARCH_UNKNOWN, NVML_DEVICE_ARCH_UNKNOWN);

/* --- structs --- */
SAME_TYPE(struct nvml_pci_info, nvmlPciInfo_t);
SAME_SCALAR_FIELD(struct nvml_pci_info, bus_id_legacy, nvmlPciInfo_t, busIdLegacy);
SAME_SCALAR_FIELD(struct nvml_pci_info, domain, nvmlPciInfo_t, domain);
SAME_SCALAR_FIELD(struct nvml_pci_info, bus, nvmlPciInfo_t, bus);
SAME_SCALAR_FIELD(struct nvml_pci_info, device, nvmlPciInfo_t, device);
SAME_SCALAR_FIELD(struct nvml_pci_info, pci_device_id, nvmlPciInfo_t, pciDeviceId);
SAME_SCALAR_FIELD(struct nvml_pci_info, pci_subsystem_id, nvmlPciInfo_t, pciSubSystemId);
SAME_SCALAR_FIELD(struct nvml_pci_info, bus_id, nvmlPciInfo_t, busId);

SAME_TYPE(struct nvml_memory, nvmlMemory_t);
SAME_SCALAR_FIELD(struct nvml_memory, total, nvmlMemory_t, total);
SAME_SCALAR_FIELD(struct nvml_memory, free, nvmlMemory_t, free);
SAME_SCALAR_FIELD(struct nvml_memory, used, nvmlMemory_t, used);

SAME_TYPE(struct nvml_memory_v2, nvmlMemory_v2_t);
SAME_SCALAR_FIELD(struct nvml_memory_v2, version, nvmlMemory_v2_t, version);
SAME_SCALAR_FIELD(struct nvml_memory_v2, total, nvmlMemory_v2_t, total);
SAME_SCALAR_FIELD(struct nvml_memory_v2, reserved, nvmlMemory_v2_t, reserved);
SAME_SCALAR_FIELD(struct nvml_memory_v2, free, nvmlMemory_v2_t, free);
SAME_SCALAR_FIELD(struct nvml_memory_v2, used, nvmlMemory_v2_t, used);
SAME(NVML_MEMORY_V2_VERSION, nvmlMemory_v2);

SAME_TYPE(union nvml_value, nvmlValue_t);
SAME_SCALAR_FIELD(union nvml_value, d, nvmlValue_t, dVal);
SAME_SCALAR_FIELD(union nvml_value, ui, nvmlValue_t, uiVal);
SAME_SCALAR_FIELD(union nvml_value, ul, nvmlValue_t, ulVal);
SAME_SCALAR_FIELD(union nvml_value, ull, nvmlValue_t, ullVal);
SAME_SCALAR_FIELD(union nvml_value, sll, nvmlValue_t, sllVal);

SAME_TYPE(struct nvml_field_value, nvmlFieldValue_t);
SAME_SCALAR_FIELD(struct nvml_field_value, field_id, nvmlFieldValue_t, fieldId);
SAME_SCALAR_FIELD(struct nvml_field_value, scope_id, nvmlFieldValue_t, scopeId);
SAME_SCALAR_FIELD(struct nvml_field_value, timestamp, nvmlFieldValue_t, timestamp);
SAME_SCALAR_FIELD(struct nvml_field_value, latency_us, nvmlFieldValue_t, latencyUsec);
SAME_FIELD(struct nvml_field_value, value_type, nvmlFieldValue_t, valueType);
SAME_FIELD(struct nvml_field_value, ret, nvmlFieldValue_t, nvmlReturn);
SAME_FIELD(struct nvml_field_value, value, nvmlFieldValue_t, value);
SAME(NVML_FI_MEMORY_TEMP, NVML_FI_DEV_MEMORY_TEMP);
SAME(NVML_FI_NVLINK_LINK_COUNT, NVML_FI_DEV_NVLINK_LINK_COUNT);
SAME(NVML_FI_NVLINK_THRU_RAW_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX);
SAME(NVML_FI_NVLINK_THRU_RAW_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX);
SAME(NVML_VALUE_DOUBLE, NVML_VALUE_TYPE_DOUBLE);
SAME(NVML_VALUE_UINT, NVML_VALUE_TYPE_UNSIGNED_INT);
SAME(NVML_VALUE_ULONG, NVML_VALUE_TYPE_UNSIGNED_LONG);
SAME(NVML_VALUE_ULL, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
SAME(NVML_VALUE_SLL, NVML_VALUE_TYPE_SIGNED_LONG_LONG);

SAME_TYPE(struct nvml_utilization, nvmlUtilization_t);
SAME_SCALAR_FIELD(struct nvml_utilization, gpu, nvmlUtilization_t, gpu);
SAME_SCALAR_FIELD(struct nvml_utilization, memory, nvmlUtilization_t, memory);

SAME_TYPE(struct nvml_event_data, nvmlEventData_t);
SAME_FIELD(struct nvml_event_data, device, nvmlEventData_t, device);
SAME_SCALAR_FIELD(struct nvml_event_data, event_type, nvmlEventData_t, eventType);
SAME_SCALAR_FIELD(struct nvml_event_data, event_data, nvmlEventData_t, eventData);
SAME_SCALAR_FIELD(struct nvml_event_data, gpu_instance_id, nvmlEventData_t, gpuInstanceId);
SAME_SCALAR_FIELD(struct nvml_event_data, compute_instance_id, nvmlEventData_t, computeInstanceId);

SAME_TYPE(struct nvml_process_info, nvmlProcessInfo_t);
SAME_SCALAR_FIELD(struct nvml_process_info, pid, nvmlProcessInfo_t, pid);
SAME_SCALAR_FIELD(struct nvml_process_info, used_gpu_memory, nvmlProcessInfo_t, usedGpuMemory);
SAME_SCALAR_FIELD(struct nvml_process_info, gpu_instance_id, nvmlProcessInfo_t, gpuInstanceId);
SAME_SCALAR_FIELD(struct nvml_process_info, compute_instance_id, nvmlProcessInfo_t,
		  computeInstanceId);

SAME_TYPE(struct nvml_process_utilization_sample, nvmlProcessUtilizationSample_t);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, pid, nvmlProcessUtilizationSample_t, pid);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, time_stamp,
		  nvmlProcessUtilizationSample_t, timeStamp);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, sm_util, nvmlProcessUtilizationSample_t,
		  smUtil);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, mem_util, nvmlProcessUtilizationSample_t,
		  memUtil);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, enc_util, nvmlProcessUtilizationSample_t,
		  encUtil);
SAME_SCALAR_FIELD(struct nvml_process_utilization_sample, dec_util, nvmlProcessUtilizationSample_t,
		  decUtil);

SAME_TYPE(struct nvml_device_attributes, nvmlDeviceAttributes_t);
SAME_SCALAR_FIELD(struct nvml_device_attributes, multiprocessor_count, nvmlDeviceAttributes_t,
		  multiprocessorCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, shared_copy_engine_count, nvmlDeviceAttributes_t,
		  sharedCopyEngineCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, shared_decoder_count, nvmlDeviceAttributes_t,
		  sharedDecoderCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, shared_encoder_count, nvmlDeviceAttributes_t,
		  sharedEncoderCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, shared_jpeg_count, nvmlDeviceAttributes_t,
		  sharedJpegCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, shared_ofa_count, nvmlDeviceAttributes_t,
		  sharedOfaCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, gpu_instance_slice_count, nvmlDeviceAttributes_t,
		  gpuInstanceSliceCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, compute_instance_slice_count,
		  nvmlDeviceAttributes_t, computeInstanceSliceCount);
SAME_SCALAR_FIELD(struct nvml_device_attributes, memory_size_mb, nvmlDeviceAttributes_t,
		  memorySizeMB);

SAME_TYPE(struct nvml_instance_placement, nvmlGpuInstancePlacement_t);
SAME_SCALAR_FIELD(struct nvml_instance_placement, start, nvmlGpuInstancePlacement_t, start);
SAME_SCALAR_FIELD(struct nvml_instance_placement, size, nvmlGpuInstancePlacement_t, size);
SAME_TYPE(struct nvml_instance_placement, nvmlComputeInstancePlacement_t);
SAME_SCALAR_FIELD(struct nvml_instance_placement, start, nvmlComputeInstancePlacement_t, start);
SAME_SCALAR_FIELD(struct nvml_instance_placement, size, nvmlComputeInstancePlacement_t, size);

SAME_TYPE(struct nvml_gpu_instance_info, nvmlGpuInstanceInfo_t);
SAME_FIELD(struct nvml_gpu_instance_info, device, nvmlGpuInstanceInfo_t, device);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_info, id, nvmlGpuInstanceInfo_t, id);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_info, profile_id, nvmlGpuInstanceInfo_t, profileId);
SAME_FIELD(struct nvml_gpu_instance_info, placement, nvmlGpuInstanceInfo_t, placement);

SAME_TYPE(struct nvml_compute_instance_info, nvmlComputeInstanceInfo_t);
SAME_FIELD(struct nvml_compute_instance_info, device, nvmlComputeInstanceInfo_t, device);
SAME_FIELD(struct nvml_compute_instance_info, gpu_instance, nvmlComputeInstanceInfo_t, gpuInstance);
SAME_SCALAR_FIELD(struct nvml_compute_instance_info, id, nvmlComputeInstanceInfo_t, id);
SAME_SCALAR_FIELD(struct nvml_compute_instance_info, profile_id, nvmlComputeInstanceInfo_t,
		  profileId);
SAME_FIELD(struct nvml_compute_instance_info, placement, nvmlComputeInstanceInfo_t, placement);

SAME_TYPE(struct nvml_gpu_instance_profile_info, nvmlGpuInstanceProfileInfo_t);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, id, nvmlGpuInstanceProfileInfo_t, id);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, is_p2p_supported,
		  nvmlGpuInstanceProfileInfo_t, isP2pSupported);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, slice_count, nvmlGpuInstanceProfileInfo_t,
		  sliceCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, instance_count,
		  nvmlGpuInstanceProfileInfo_t, instanceCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, multiprocessor_count,
		  nvmlGpuInstanceProfileInfo_t, multiprocessorCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, copy_engine_count,
		  nvmlGpuInstanceProfileInfo_t, copyEngineCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, decoder_count,
		  nvmlGpuInstanceProfileInfo_t, decoderCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, encoder_count,
		  nvmlGpuInstanceProfileInfo_t, encoderCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, jpeg_count, nvmlGpuInstanceProfileInfo_t,
		  jpegCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, ofa_count, nvmlGpuInstanceProfileInfo_t,
		  ofaCount);
SAME_SCALAR_FIELD(struct nvml_gpu_instance_profile_info, memory_size_mb,
		  nvmlGpuInstanceProfileInfo_t, memorySizeMB);

SAME_TYPE(struct nvml_compute_instance_profile_info, nvmlComputeInstanceProfileInfo_t);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, id, nvmlComputeInstanceProfileInfo_t,
		  id);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, slice_count,
		  nvmlComputeInstanceProfileInfo_t, sliceCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, instance_count,
		  nvmlComputeInstanceProfileInfo_t, instanceCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, multiprocessor_count,
		  nvmlComputeInstanceProfileInfo_t, multiprocessorCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, shared_copy_engine_count,
		  nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, shared_decoder_count,
		  nvmlComputeInstanceProfileInfo_t, sharedDecoderCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, shared_encoder_count,
		  nvmlComputeInstanceProfileInfo_t, sharedEncoderCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, shared_jpeg_count,
		  nvmlComputeInstanceProfileInfo_t, sharedJpegCount);
SAME_SCALAR_FIELD(struct nvml_compute_instance_profile_info, shared_ofa_count,
		  nvmlComputeInstanceProfileInfo_t, sharedOfaCount);

#ifdef ABI_NEGATIVE_CHECK
/* abi-check compiles this too and expects it to fail: the assertions above are live. */
SAME_FIELD(struct nvml_pci_info, bus, nvmlPciInfo_t, device);
_Static_assert(__builtin_types_compatible_p(typeof(&nvmlDeviceGetUUID),
					    nvml_fn_nvmlDeviceGetName *),
	       "a prototype of ours is never compatible with NVIDIA's by name");
#endif

int main(void)
{
	(void)printf("ok: src/gpu/nvml/nvml-api.h matches nvml.h (NVML API %d)\n",
		     NVML_API_VERSION);
	return 0;
}
