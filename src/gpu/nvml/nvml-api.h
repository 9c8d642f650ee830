#pragma once

/*
 * Our own declarations of the part of NVIDIA's NVML API that edgegpu uses (and that the fake
 * library in tests/fakes/nvml implements), under our own names, so that nothing of NVIDIA's
 * is needed to build. tests/abi/abi-nvml.c includes this header beside NVIDIA's real nvml.h
 * and proves the two ABI-identical: sizeof and offsetof of every struct, every enum value
 * and constant, and every function type through __builtin_types_compatible_p.
 *
 * Function prototypes are written once, in the X-macro lists NVML_API_FUNCTIONS (what
 * src/gpu/nvml/nvml-load.c looks up with dlsym) and NVML_API_FAKE_FUNCTIONS (what the fake also
 * exports for NVIDIA's k8s-device-plugin v0.17). NVML_API_FUNCTIONS is the ABI-checked
 * NVML_API_FUNCTIONS_ABI plus NVML_API_FUNCTIONS_NEW, the functions newer than the header the
 * ABI test has (see there: not checked). Each entry is FN(symbol, return type,
 * (parameter types)), with every NVML type spelled T(name). Expanded with NVML_OWN_TYPE the
 * lists give our types; the ABI test expands the same lists with NVIDIA's type names and
 * checks each result against typeof(&symbol) from the real header.
 *
 * Values below are those of nvml.h from Debian's libnvidia-ml-dev 11.8 (NVML API 11), which
 * the ABI test fetches; later drivers keep them.
 */

/* nvmlReturn_t */
enum nvml_return {
	NVML_RET_SUCCESS = 0,
	NVML_RET_UNINITIALIZED = 1,
	NVML_RET_INVALID_ARGUMENT = 2,
	NVML_RET_NOT_SUPPORTED = 3,
	NVML_RET_NO_PERMISSION = 4,
	NVML_RET_ALREADY_INITIALIZED = 5,
	NVML_RET_NOT_FOUND = 6,
	NVML_RET_INSUFFICIENT_SIZE = 7,
	NVML_RET_INSUFFICIENT_POWER = 8,
	NVML_RET_DRIVER_NOT_LOADED = 9,
	NVML_RET_TIMEOUT = 10,
	NVML_RET_IRQ_ISSUE = 11,
	NVML_RET_LIBRARY_NOT_FOUND = 12,
	NVML_RET_FUNCTION_NOT_FOUND = 13,
	NVML_RET_CORRUPTED_INFOROM = 14,
	NVML_RET_GPU_IS_LOST = 15,
	NVML_RET_RESET_REQUIRED = 16,
	NVML_RET_OPERATING_SYSTEM = 17,
	NVML_RET_LIB_RM_VERSION_MISMATCH = 18,
	NVML_RET_IN_USE = 19,
	NVML_RET_MEMORY = 20,
	NVML_RET_NO_DATA = 21,
	NVML_RET_VGPU_ECC_NOT_SUPPORTED = 22,
	NVML_RET_INSUFFICIENT_RESOURCES = 23,
	NVML_RET_FREQ_NOT_SUPPORTED = 24,
	NVML_RET_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_RET_UNKNOWN = 999,
};

/* Buffer sizes (NVML_DEVICE_*_BUFFER_SIZE, NVML_SYSTEM_*_BUFFER_SIZE). */
#define NVML_BUF_PCI_BUS_ID	   32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define NVML_BUF_PCI_BUS_ID_LEGACY 16 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
#define NVML_BUF_UUID		   80 /* NVML_DEVICE_UUID_BUFFER_SIZE */
#define NVML_BUF_UUID_V2	   96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_BUF_NAME		   64 /* NVML_DEVICE_NAME_BUFFER_SIZE */
#define NVML_BUF_NAME_V2	   96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_BUF_DRIVER_VERSION	   80 /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define NVML_BUF_NVML_VERSION	   80 /* NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE */

/* Event types (nvmlEventType*). */
#define NVML_EVENT_SINGLE_BIT_ECC 0x0000000000000001ULL /* nvmlEventTypeSingleBitEccError */
#define NVML_EVENT_DOUBLE_BIT_ECC 0x0000000000000002ULL /* nvmlEventTypeDoubleBitEccError */
#define NVML_EVENT_PSTATE	  0x0000000000000004ULL /* nvmlEventTypePState */
#define NVML_EVENT_XID_CRITICAL	  0x0000000000000008ULL /* nvmlEventTypeXidCriticalError */
#define NVML_EVENT_CLOCK	  0x0000000000000010ULL /* nvmlEventTypeClock */

/* MIG modes (NVML_DEVICE_MIG_DISABLE / _ENABLE). */
#define NVML_MIG_DISABLE 0x0
#define NVML_MIG_ENABLE	 0x1

/* nvmlDeviceArchitecture_t values (NVML_DEVICE_ARCH_*). */
#define NVML_ARCH_KEPLER    2
#define NVML_ARCH_MAXWELL   3
#define NVML_ARCH_PASCAL    4
#define NVML_ARCH_VOLTA	    5
#define NVML_ARCH_TURING    6
#define NVML_ARCH_AMPERE    7
#define NVML_ARCH_ADA	    8
#define NVML_ARCH_HOPPER    9
#define NVML_ARCH_BLACKWELL 10 /* NVML_DEVICE_ARCH_BLACKWELL in later headers than the ABI test's */
#define NVML_ARCH_UNKNOWN   0xffffffffU

/* Opaque handles: nvmlDevice_t, nvmlEventSet_t, nvmlGpuInstance_t, nvmlComputeInstance_t. */
struct nvml_device;
struct nvml_event_set;
struct nvml_gpu_instance;
struct nvml_compute_instance;

/* nvmlPciInfo_t */
struct nvml_pci_info {
	char bus_id_legacy[NVML_BUF_PCI_BUS_ID_LEGACY];
	unsigned domain;
	unsigned bus;
	unsigned device;
	unsigned pci_device_id; /* device id << 16 | vendor id */
	unsigned pci_subsystem_id;
	char bus_id[NVML_BUF_PCI_BUS_ID]; /* "00000000:01:00.0" */
};

/*
 * nvmlPciInfoExt_v1_t (NVML 12.535 and later): nvmlPciInfo_t's fields plus the PCI class,
 * which GFD's nvidia.com/gpu.mode reads. @version must be NVML_PCI_INFO_EXT_V1.
 */
struct nvml_pci_info_ext {
	unsigned version;
	unsigned domain;
	unsigned bus;
	unsigned device;
	unsigned pci_device_id;
	unsigned pci_subsystem_id;
	unsigned base_class; /* 0x03: display controller */
	unsigned sub_class;  /* 0x00: VGA, 0x02: 3D controller */
	char bus_id[NVML_BUF_PCI_BUS_ID];
};

/* NVML_STRUCT_VERSION(PciInfoExt, 1): the struct's size | 1 << 24. */
#define NVML_PCI_INFO_EXT_V1 ((unsigned)sizeof(struct nvml_pci_info_ext) | (1U << 24))

/* nvmlMemory_t (v1), bytes */
struct nvml_memory {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

/* nvmlUtilization_t, percent */
struct nvml_utilization {
	unsigned gpu;
	unsigned memory;
};

/* nvmlEventData_t */
struct nvml_event_data {
	struct nvml_device *device;
	unsigned long long event_type;
	unsigned long long event_data; /* the XID for NVML_EVENT_XID_CRITICAL */
	unsigned gpu_instance_id;      /* 0xFFFFFFFF outside MIG */
	unsigned compute_instance_id;
};

/* nvmlProcessInfo_t (the struct nvmlDeviceGetComputeRunningProcesses_v3 fills) */
struct nvml_process_info {
	unsigned pid;
	unsigned long long used_gpu_memory;
	unsigned gpu_instance_id;
	unsigned compute_instance_id;
};

/*
 * nvmlProcessUtilizationSample_t (nvmlDeviceGetProcessUtilization): one process's share of
 * the engines over one of the driver's sample periods, in percent; time_stamp in µs.
 */
struct nvml_process_utilization_sample {
	unsigned pid;
	unsigned long long time_stamp;
	unsigned sm_util;
	unsigned mem_util;
	unsigned enc_util;
	unsigned dec_util;
};

/* nvmlGpuTopologyLevel_t */
enum nvml_topology_level {
	NVML_TOPO_INTERNAL = 0,
	NVML_TOPO_SINGLE = 10,
	NVML_TOPO_MULTIPLE = 20,
	NVML_TOPO_HOSTBRIDGE = 30,
	NVML_TOPO_NODE = 40,
	NVML_TOPO_SYSTEM = 50,
};

/* nvmlTemperatureSensors_t */
enum nvml_temperature_sensor {
	NVML_TEMP_GPU = 0,
};

/* nvmlTemperatureThresholds_t */
enum nvml_temperature_threshold {
	NVML_TEMP_THRESHOLD_SHUTDOWN = 0,
	NVML_TEMP_THRESHOLD_SLOWDOWN = 1,
	NVML_TEMP_THRESHOLD_MEM_MAX = 2,
	NVML_TEMP_THRESHOLD_GPU_MAX = 3,
};

/* nvmlClockType_t */
enum nvml_clock_type {
	NVML_CLK_GRAPHICS = 0,
	NVML_CLK_SM = 1,
	NVML_CLK_MEM = 2,
	NVML_CLK_VIDEO = 3,
};

/* nvmlEnableState_t */
enum nvml_enable_state {
	NVML_STATE_DISABLED = 0,
	NVML_STATE_ENABLED = 1,
};

/* nvmlMemoryErrorType_t */
enum nvml_memory_error_type {
	NVML_ECC_CORRECTED = 0,
	NVML_ECC_UNCORRECTED = 1,
};

/* nvmlEccCounterType_t */
enum nvml_ecc_counter_type {
	NVML_ECC_VOLATILE = 0,
	NVML_ECC_AGGREGATE = 1,
};

/*
 * nvmlSetMemoryLimits_v1_t / nvmlGetMemoryLimits_v1_t (CUDA 13.4, NVML 615: per-cgroup device
 * memory limits). Not in the header the ABI test has: the layout is the one NVIDIA's NVML API
 * reference and CUDA 13.4's nvml.h give (a cgroup directory path, then bytes; no version
 * field despite the _v1), as far as public copies of that header show. Unverified against
 * NVIDIA's own file by a test.
 */
struct nvml_set_memory_limits {
	const char *name_space;	 /* full path of the cgroup directory */
	unsigned long long soft; /* bytes */
	unsigned long long hard; /* bytes; NVML_MEMORY_LIMIT_MAX with soft 0: cleared */
};
struct nvml_get_memory_limits {
	const char *name_space;		 /* in */
	unsigned long long soft;	 /* out, bytes */
	unsigned long long hard;	 /* out, bytes */
	unsigned long long current_used; /* out, bytes charged to the cgroup */
};
#define NVML_MEMORY_LIMIT_MAX 0xffffffffffffffffULL /* NVML_DEVICE_MEMORY_LIMIT_MAX */

/* nvmlPcieUtilCounter_t: nvmlDeviceGetPcieThroughput's direction */
enum nvml_pcie_util_counter {
	NVML_PCIE_TX = 0, /* NVML_PCIE_UTIL_TX_BYTES */
	NVML_PCIE_RX = 1, /* NVML_PCIE_UTIL_RX_BYTES */
};

/*
 * GPU Performance Monitoring (GPM, NVML 12.x drivers, Hopper and later): nvmlGpmSample_t,
 * nvmlGpmMetricId_t (the ids edgegpu reads), nvmlGpmMetric_t, nvmlGpmMetricsGet_t and
 * nvmlGpmSupport_t, under our own names. metrics[] is sized by NVML_GPM_METRIC_MAX (98), which
 * version 1 of nvmlGpmMetricsGet_t implies; tests/abi checks all of it against nvml.h.
 */
struct nvml_gpm_sample;		       /* opaque: nvmlGpmSample_t is a pointer to it */
#define NVML_GPM_ID_GRAPHICS_UTIL   1  /* percent of time the graphics engine was busy */
#define NVML_GPM_ID_ANY_TENSOR_UTIL 5  /* percent of time SMs did any tensor operation */
#define NVML_GPM_ID_DRAM_BW_UTIL    10 /* percent of the theoretical DRAM bandwidth used */
#define NVML_GPM_ID_PCIE_TX_PER_SEC 20 /* MiB/s from the GPU */
#define NVML_GPM_ID_PCIE_RX_PER_SEC 21 /* MiB/s to the GPU */
#define NVML_GPM_ID_MAX		    98 /* NVML_GPM_METRIC_MAX */
#define NVML_GPM_METRICS_GET_V1	    1  /* NVML_GPM_METRICS_GET_VERSION */
#define NVML_GPM_SUPPORT_V1	    1  /* NVML_GPM_SUPPORT_VERSION */

struct nvml_gpm_metric {
	unsigned metric_id;	      /* in */
	enum nvml_return nvml_return; /* out: value valid only on SUCCESS */
	double value;		      /* out */
	struct {
		char *short_name, *long_name, *unit; /* out, may be NULL */
	} metric_info;
};

struct nvml_gpm_metrics_get {
	unsigned version;     /* NVML_GPM_METRICS_GET_V1 */
	unsigned num_metrics; /* entries of metrics[] to fill */
	struct nvml_gpm_sample *sample1, *sample2;
	struct nvml_gpm_metric metrics[NVML_GPM_ID_MAX];
};

struct nvml_gpm_support {
	unsigned version; /* NVML_GPM_SUPPORT_V1 */
	unsigned is_supported_device;
};

/*
 * nvmlMemory_v2_t (NVML 11.6+), bytes: "used" leaves out what the driver reserves, which v1's
 * "used" counts on drivers from R510. The caller sets version to NVML_MEMORY_V2_VERSION.
 */
struct nvml_memory_v2 {
	unsigned version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
};
/* nvmlMemory_v2: NVML_STRUCT_VERSION(Memory, 2), the size with the version in the top byte */
#define NVML_MEMORY_V2_VERSION ((unsigned)(sizeof(struct nvml_memory_v2) | (2U << 24)))

/*
 * nvmlValueType_t. SINT and USHORT (siVal, usVal) came with NVML 12 drivers, after the ABI
 * test's nvml.h: a driver may answer a field with them, so the reader takes every type.
 */
enum nvml_value_type {
	NVML_VALUE_DOUBLE = 0,
	NVML_VALUE_UINT = 1,
	NVML_VALUE_ULONG = 2,
	NVML_VALUE_ULL = 3,
	NVML_VALUE_SLL = 4,
	NVML_VALUE_SINT = 5,   /* NVML_VALUE_TYPE_SIGNED_INT */
	NVML_VALUE_USHORT = 6, /* NVML_VALUE_TYPE_UNSIGNED_SHORT */
};

/* nvmlValue_t */
union nvml_value {
	double d;
	unsigned ui;
	unsigned long ul;
	unsigned long long ull;
	long long sll;
	int si;
	unsigned short us;
};

/* nvmlFieldValue_t: one field of nvmlDeviceGetFieldValues, its own return code in ret */
struct nvml_field_value {
	unsigned field_id;
	unsigned scope_id; /* the link for per-link NVLink fields */
	long long timestamp;
	long long latency_us;
	enum nvml_value_type value_type;
	enum nvml_return ret;
	union nvml_value value;
};

/* Field ids (NVML_FI_DEV_*) read by nvml-fields.c. */
#define NVML_FI_MEMORY_TEMP	    82	/* NVML_FI_DEV_MEMORY_TEMP, degrees C */
#define NVML_FI_NVLINK_LINK_COUNT   91	/* NVML_FI_DEV_NVLINK_LINK_COUNT */
#define NVML_FI_NVLINK_THRU_RAW_TX  140 /* NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, KiB, per link */
#define NVML_FI_NVLINK_THRU_RAW_RX  141 /* NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX, KiB, per link */
#define NVML_NVLINK_MAX_LINKS_COUNT 18	/* NVML_NVLINK_MAX_LINKS (12 before NVML 12) */

/* --- structs only the fake uses (NVIDIA's plugin's MIG paths) --- */

/* nvmlDeviceAttributes_t */
struct nvml_device_attributes {
	unsigned multiprocessor_count;
	unsigned shared_copy_engine_count;
	unsigned shared_decoder_count;
	unsigned shared_encoder_count;
	unsigned shared_jpeg_count;
	unsigned shared_ofa_count;
	unsigned gpu_instance_slice_count;
	unsigned compute_instance_slice_count;
	unsigned long long memory_size_mb;
};

/* nvmlGpuInstancePlacement_t, nvmlComputeInstancePlacement_t */
struct nvml_instance_placement {
	unsigned start;
	unsigned size;
};

/* nvmlGpuInstanceInfo_t */
struct nvml_gpu_instance_info {
	struct nvml_device *device;
	unsigned id;
	unsigned profile_id;
	struct nvml_instance_placement placement;
};

/* nvmlComputeInstanceInfo_t */
struct nvml_compute_instance_info {
	struct nvml_device *device;
	struct nvml_gpu_instance *gpu_instance;
	unsigned id;
	unsigned profile_id;
	struct nvml_instance_placement placement;
};

/* nvmlGpuInstanceProfileInfo_t */
struct nvml_gpu_instance_profile_info {
	unsigned id;
	unsigned is_p2p_supported;
	unsigned slice_count;
	unsigned instance_count;
	unsigned multiprocessor_count;
	unsigned copy_engine_count;
	unsigned decoder_count;
	unsigned encoder_count;
	unsigned jpeg_count;
	unsigned ofa_count;
	unsigned long long memory_size_mb;
};

/* nvmlComputeInstanceProfileInfo_t */
struct nvml_compute_instance_profile_info {
	unsigned id;
	unsigned slice_count;
	unsigned instance_count;
	unsigned multiprocessor_count;
	unsigned shared_copy_engine_count;
	unsigned shared_decoder_count;
	unsigned shared_encoder_count;
	unsigned shared_jpeg_count;
	unsigned shared_ofa_count;
};

/* --- types by name, for the prototype lists --- */

#define NVML_OWN_TYPE(t)			    NVML_OWN_TYPE_##t
#define NVML_OWN_TYPE_ret			    enum nvml_return
#define NVML_OWN_TYPE_device			    struct nvml_device *
#define NVML_OWN_TYPE_event_set			    struct nvml_event_set *
#define NVML_OWN_TYPE_gpu_instance		    struct nvml_gpu_instance *
#define NVML_OWN_TYPE_compute_instance		    struct nvml_compute_instance *
#define NVML_OWN_TYPE_pci_info			    struct nvml_pci_info
#define NVML_OWN_TYPE_memory			    struct nvml_memory
#define NVML_OWN_TYPE_utilization		    struct nvml_utilization
#define NVML_OWN_TYPE_event_data		    struct nvml_event_data
#define NVML_OWN_TYPE_process_info		    struct nvml_process_info
#define NVML_OWN_TYPE_process_utilization_sample    struct nvml_process_utilization_sample
#define NVML_OWN_TYPE_topology_level		    enum nvml_topology_level
#define NVML_OWN_TYPE_temperature_sensor	    enum nvml_temperature_sensor
#define NVML_OWN_TYPE_temperature_threshold	    enum nvml_temperature_threshold
#define NVML_OWN_TYPE_clock_type		    enum nvml_clock_type
#define NVML_OWN_TYPE_enable_state		    enum nvml_enable_state
#define NVML_OWN_TYPE_memory_error_type		    enum nvml_memory_error_type
#define NVML_OWN_TYPE_ecc_counter_type		    enum nvml_ecc_counter_type
#define NVML_OWN_TYPE_architecture		    unsigned
#define NVML_OWN_TYPE_device_attributes		    struct nvml_device_attributes
#define NVML_OWN_TYPE_gpu_instance_info		    struct nvml_gpu_instance_info
#define NVML_OWN_TYPE_compute_instance_info	    struct nvml_compute_instance_info
#define NVML_OWN_TYPE_gpu_instance_profile_info	    struct nvml_gpu_instance_profile_info
#define NVML_OWN_TYPE_compute_instance_profile_info struct nvml_compute_instance_profile_info
#define NVML_OWN_TYPE_set_memory_limits		    struct nvml_set_memory_limits
#define NVML_OWN_TYPE_get_memory_limits		    struct nvml_get_memory_limits
#define NVML_OWN_TYPE_pci_info_ext		    struct nvml_pci_info_ext
#define NVML_OWN_TYPE_pcie_util_counter		    enum nvml_pcie_util_counter
#define NVML_OWN_TYPE_gpm_sample		    struct nvml_gpm_sample *
#define NVML_OWN_TYPE_gpm_metrics_get		    struct nvml_gpm_metrics_get
#define NVML_OWN_TYPE_gpm_support		    struct nvml_gpm_support
#define NVML_OWN_TYPE_memory_v2			    struct nvml_memory_v2
#define NVML_OWN_TYPE_field_value		    struct nvml_field_value

/*
 * What src/gpu/nvml/nvml-load.c resolves with dlsym (which of them are required is decided
 * there): the functions the ABI test checks against NVIDIA's header (two lists), then the
 * newer ones.
 */
#define NVML_API_FUNCTIONS(FN, T)     \
	NVML_API_FUNCTIONS_ABI(FN, T) \
	NVML_API_FUNCTIONS_COUNTERS(FN, T) NVML_API_FUNCTIONS_NEW(FN, T)

/* Functions the ABI test's nvml.h (NVML API 11) declares. */
#define NVML_API_FUNCTIONS_ABI(FN, T)                                                        \
	FN(nvmlInit_v2, T(ret), (void))                                                      \
	FN(nvmlShutdown, T(ret), (void))                                                     \
	FN(nvmlErrorString, const char *, (T(ret)))                                          \
	FN(nvmlSystemGetDriverVersion, T(ret), (char *, unsigned))                           \
	FN(nvmlSystemGetNVMLVersion, T(ret), (char *, unsigned))                             \
	FN(nvmlSystemGetCudaDriverVersion, T(ret), (int *))                                  \
	FN(nvmlSystemGetCudaDriverVersion_v2, T(ret), (int *))                               \
	FN(nvmlDeviceGetCount_v2, T(ret), (unsigned *))                                      \
	FN(nvmlDeviceGetHandleByIndex_v2, T(ret), (unsigned, T(device) *))                   \
	FN(nvmlDeviceGetHandleByUUID, T(ret), (const char *, T(device) *))                   \
	FN(nvmlDeviceGetUUID, T(ret), (T(device), char *, unsigned))                         \
	FN(nvmlDeviceGetName, T(ret), (T(device), char *, unsigned))                         \
	FN(nvmlDeviceGetMinorNumber, T(ret), (T(device), unsigned *))                        \
	FN(nvmlDeviceGetPciInfo_v3, T(ret), (T(device), T(pci_info) *))                      \
	FN(nvmlDeviceGetPciInfo_v2, T(ret), (T(device), T(pci_info) *))                      \
	FN(nvmlDeviceGetMemoryInfo, T(ret), (T(device), T(memory) *))                        \
	FN(nvmlDeviceGetCudaComputeCapability, T(ret), (T(device), int *, int *))            \
	FN(nvmlDeviceGetArchitecture, T(ret), (T(device), T(architecture) *))                \
	FN(nvmlDeviceGetMigMode, T(ret), (T(device), unsigned *, unsigned *))                \
	FN(nvmlDeviceGetTopologyCommonAncestor, T(ret),                                      \
	   (T(device), T(device), T(topology_level) *))                                      \
	FN(nvmlDeviceGetSupportedEventTypes, T(ret), (T(device), unsigned long long *))      \
	FN(nvmlDeviceRegisterEvents, T(ret), (T(device), unsigned long long, T(event_set)))  \
	FN(nvmlEventSetCreate, T(ret), (T(event_set) *))                                     \
	FN(nvmlEventSetWait_v2, T(ret), (T(event_set), T(event_data) *, unsigned))           \
	FN(nvmlEventSetFree, T(ret), (T(event_set)))                                         \
	FN(nvmlDeviceGetTemperature, T(ret), (T(device), T(temperature_sensor), unsigned *)) \
	FN(nvmlDeviceGetTemperatureThreshold, T(ret),                                        \
	   (T(device), T(temperature_threshold), unsigned *))                                \
	FN(nvmlDeviceGetPowerUsage, T(ret), (T(device), unsigned *))                         \
	FN(nvmlDeviceGetEnforcedPowerLimit, T(ret), (T(device), unsigned *))                 \
	FN(nvmlDeviceGetUtilizationRates, T(ret), (T(device), T(utilization) *))             \
	FN(nvmlDeviceGetClockInfo, T(ret), (T(device), T(clock_type), unsigned *))           \
	FN(nvmlDeviceGetEccMode, T(ret), (T(device), T(enable_state) *, T(enable_state) *))  \
	FN(nvmlDeviceGetTotalEccErrors, T(ret),                                              \
	   (T(device), T(memory_error_type), T(ecc_counter_type), unsigned long long *))     \
	FN(nvmlDeviceGetComputeRunningProcesses_v3, T(ret),                                  \
	   (T(device), unsigned *, T(process_info) *))                                       \
	FN(nvmlDeviceGetTotalEnergyConsumption, T(ret), (T(device), unsigned long long *))   \
	FN(nvmlDeviceGetProcessUtilization, T(ret),                                          \
	   (T(device), T(process_utilization_sample) *, unsigned *, unsigned long long))     \
	FN(nvmlDeviceGetCurrentClocksThrottleReasons, T(ret), (T(device), unsigned long long *))

/*
 * Functions the ABI test's nvml.h also declares (checked there), for DCGM-exporter's other
 * default counters (nvml-fields.c); all optional.
 */
#define NVML_API_FUNCTIONS_COUNTERS(FN, T)                                               \
	FN(nvmlDeviceGetMemoryInfo_v2, T(ret), (T(device), T(memory_v2) *))              \
	FN(nvmlDeviceGetFieldValues, T(ret), (T(device), int, T(field_value) *))         \
	FN(nvmlDeviceGetPcieReplayCounter, T(ret), (T(device), unsigned *))              \
	FN(nvmlDeviceGetEncoderUtilization, T(ret), (T(device), unsigned *, unsigned *)) \
	FN(nvmlDeviceGetDecoderUtilization, T(ret), (T(device), unsigned *, unsigned *)) \
	FN(nvmlDeviceGetRemappedRows, T(ret),                                            \
	   (T(device), unsigned *, unsigned *, unsigned *, unsigned *))

/*
 * Optional functions, some newer than the ABI test's nvml.h: the memory limits and
 * nvmlDeviceGetPciInfoExt follow NVIDIA's NVML API reference, unchecked by tests/abi. That
 * header has the GPM functions and nvmlDeviceGetPcieThroughput: tests/abi checks those one by
 * one (listed here to leave the list above as it was).
 */
#define NVML_API_FUNCTIONS_NEW(FN, T)                                                 \
	FN(nvmlDeviceGetMemoryLimits_v1, T(ret), (T(device), T(get_memory_limits) *)) \
	FN(nvmlDeviceSetMemoryLimits_v1, T(ret), (T(device), T(set_memory_limits) *)) \
	FN(nvmlDeviceGetPciInfoExt, T(ret), (T(device), T(pci_info_ext) *))           \
	FN(nvmlGpmQueryDeviceSupport, T(ret), (T(device), T(gpm_support) *))          \
	FN(nvmlGpmSampleAlloc, T(ret), (T(gpm_sample) *))                             \
	FN(nvmlGpmSampleGet, T(ret), (T(device), T(gpm_sample)))                      \
	FN(nvmlGpmSampleFree, T(ret), (T(gpm_sample)))                                \
	FN(nvmlGpmMetricsGet, T(ret), (T(gpm_metrics_get) *))                         \
	FN(nvmlDeviceGetPcieThroughput, T(ret), (T(device), T(pcie_util_counter), unsigned *))

/* Also exported by the fake, for NVIDIA's k8s-device-plugin v0.17 (nvidia-plugin.md §5.3). */
#define NVML_API_FAKE_FUNCTIONS(FN, T)                                                        \
	FN(nvmlDeviceGetNvLinkState, T(ret), (T(device), unsigned, T(enable_state) *))        \
	FN(nvmlDeviceGetNvLinkRemotePciInfo_v2, T(ret), (T(device), unsigned, T(pci_info) *)) \
	FN(nvmlDeviceGetGpuInstanceProfileInfo, T(ret),                                       \
	   (T(device), unsigned, T(gpu_instance_profile_info) *))                             \
	FN(nvmlDeviceGetMaxMigDeviceCount, T(ret), (T(device), unsigned *))                   \
	FN(nvmlDeviceGetMigDeviceHandleByIndex, T(ret), (T(device), unsigned, T(device) *))   \
	FN(nvmlDeviceIsMigDeviceHandle, T(ret), (T(device), unsigned *))                      \
	FN(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, T(ret), (T(device), T(device) *))    \
	FN(nvmlDeviceGetAttributes_v2, T(ret), (T(device), T(device_attributes) *))           \
	FN(nvmlDeviceGetGpuInstanceId, T(ret), (T(device), unsigned *))                       \
	FN(nvmlDeviceGetComputeInstanceId, T(ret), (T(device), unsigned *))                   \
	FN(nvmlDeviceGetGpuInstanceById, T(ret), (T(device), unsigned, T(gpu_instance) *))    \
	FN(nvmlGpuInstanceGetComputeInstanceById, T(ret),                                     \
	   (T(gpu_instance), unsigned, T(compute_instance) *))                                \
	FN(nvmlGpuInstanceGetInfo, T(ret), (T(gpu_instance), T(gpu_instance_info) *))         \
	FN(nvmlComputeInstanceGetInfo_v2, T(ret),                                             \
	   (T(compute_instance), T(compute_instance_info) *))                                 \
	FN(nvmlGpuInstanceGetComputeInstanceProfileInfo, T(ret),                              \
	   (T(gpu_instance), unsigned, unsigned, T(compute_instance_profile_info) *))

/* One function type per entry: nvml_fn_<symbol>, e.g. nvml_fn_nvmlInit_v2. */
#define NVML_API_DECLARE_FN_TYPE(sym, r, params) typedef r nvml_fn_##sym params;
NVML_API_FUNCTIONS(NVML_API_DECLARE_FN_TYPE, NVML_OWN_TYPE)
NVML_API_FAKE_FUNCTIONS(NVML_API_DECLARE_FN_TYPE, NVML_OWN_TYPE)
