/*
 * config-schema.c: the schema, NVIDIA's config file plus our edgegpu section, as tables of
 * struct field (key, kind, where the value lives in struct config, flag and environment names,
 * limits) that every stage walks. Data only: it calls no other file of the module.
 */
#include <stdio.h>
#include <string.h>

#include "config-int.h"
#include "log.h"

#define MIG_REFUSED "MIG is not supported by edgegpu yet; only \"none\" is accepted"

static const struct enum_value mig_values[] = {
	{ "none", CONFIG_MIG_NONE },
	{ "single", CONFIG_MIG_SINGLE, MIG_REFUSED },
	{ "mixed", CONFIG_MIG_MIXED, MIG_REFUSED },
	{ NULL },
};

const struct enum_value config_dls_values[] = {
	{ "envvar", CONFIG_DLS_ENVVAR },
	{ "volume-mounts", CONFIG_DLS_VOLUME_MOUNTS },
	{ "cdi-annotations", CONFIG_DLS_CDI_ANNOTATIONS },
	{ "cdi-cri", CONFIG_DLS_CDI_CRI },
	{ NULL },
};

static const struct enum_value id_values[] = {
	{ "uuid", CONFIG_DEVICE_ID_UUID },
	{ "index", CONFIG_DEVICE_ID_INDEX },
	{ NULL },
};

/* NVIDIA's names: auto (its rule: Tegra on a Jetson, NVML elsewhere), nvml, tegra. */
static const struct enum_value discovery_values[] = {
	{ "auto", CONFIG_DISCOVERY_AUTO },
	{ "nvml", CONFIG_DISCOVERY_NVML },
	{ "tegra", CONFIG_DISCOVERY_TEGRA },
	{ NULL },
};

static const struct enum_value alloc_policy_values[] = {
	{ "distributed", 0 },
	{ "packed", 0, "only the \"distributed\" policy is supported by edgegpu" },
	{ NULL },
};

/* log.h's names: one list for what the log prints and what the config reads. */
#define LOG_VALUE(level, name) { name, level },
static const struct enum_value log_values[] = { LOG_LEVEL_NAMES(LOG_VALUE){ NULL } };
static const struct enum_value log_format_values[] = { LOG_FORMAT_NAMES(LOG_VALUE){ NULL } };
#undef LOG_VALUE

static const struct enum_value split_values[] = {
	{ "reject", CONFIG_ON_SPLIT_REJECT },
	{ "allow", CONFIG_ON_SPLIT_ALLOW },
	{ NULL },
};

static const struct enum_value placement_values[] = {
	{ "mask", CONFIG_PLACEMENT_MASK },
	{ "preferred", CONFIG_PLACEMENT_PREFERRED },
	{ NULL },
};

#define C(m) offsetof(struct config, m)

static const struct field gfd_fields[] = {
	{ "oneshot", K_UNSUP_BOOL, NOOFF, .min = false },
	/* GFD's switch for nvidia.com/gfd.timestamp, acted on: labels.c's writer. */
	{ "noTimestamp", K_BOOL, C(labels.no_timestamp), .flag = { "no-timestamp" },
	  .env = { "GFD_NO_TIMESTAMP" },
	  .help = "leave nvidia.com/gfd.timestamp out of the labels (GFD's switch)" },
	{ "sleepInterval", K_UNSUP_DURATION, NOOFF, .min = 60 * USEC_PER_SEC },
	{ "outputFile", K_UNSUP_STR, NOOFF,
	  .arg = "/etc/kubernetes/node-feature-discovery/features.d/gfd" },
	{ "machineTypeFile", K_UNSUP_STR, NOOFF, .arg = "/sys/class/dmi/id/product_name" },
	{ NULL },
};

static const struct field plugin_fields[] = {
	{ "passDeviceSpecs", K_BOOL, C(pass_device_specs), .flag = { "pass-device-specs" },
	  .env = { "PASS_DEVICE_SPECS" },
	  .help = "add DeviceSpecs for the GPU and control device nodes to each Allocate" },
	{ "deviceListStrategy", K_DLS, C(device_list_strategy), .arg = config_dls_values,
	  .flag = { "device-list-strategy" }, .env = { "DEVICE_LIST_STRATEGY" },
	  .help = "how a container is given its GPUs; a comma list of the values" },
	{ "deviceIDStrategy", K_ENUM, C(device_id_strategy), .arg = id_values,
	  .flag = { "device-id-strategy" }, .env = { "DEVICE_ID_STRATEGY" },
	  .help = "what the container runtime is given to name a GPU" },
	{ "containerDriverRoot", K_STR, C(container_driver_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "driver-root-ctr-path", "container-driver-root" },
	  .env = { "DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT" },
	  .help = "where the host driver root is mounted in our container (/driver-root)",
	  .value = "PATH" },
	{ "cdiAnnotationPrefix", K_UNSUP_STR, NOOFF, .arg = "cdi.k8s.io/",
	  .flag = { "cdi-annotation-prefix" }, .env = { "CDI_ANNOTATION_PREFIX" },
	  .help = "NVIDIA's, not acted on: only its default (cdi.k8s.io/) is accepted",
	  .value = "PREFIX" },
	{ "nvidiaCTKPath", K_UNSUP_STR, NOOFF, .arg = "/usr/bin/nvidia-ctk",
	  .flag = { "nvidia-cdi-hook-path", "nvidia-ctk-path" },
	  .env = { "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH" },
	  .help = "NVIDIA's, not acted on: only its default (/usr/bin/nvidia-ctk) is accepted",
	  .value = "PATH" },
	{ "sharedDevicesAllocationPolicy", K_ENUM, NOOFF, .arg = alloc_policy_values,
	  .flag = { "shared-devices-allocation-policy" },
	  .env = { "SHARED_DEVICES_ALLOCATION_POLICY" },
	  .help = "how shared GPUs are handed out; only distributed is accepted" },
	{ NULL },
};

static const struct field flags_fields[] = {
	{ "migStrategy", K_ENUM, C(mig_strategy), .arg = mig_values, .flag = { "mig-strategy" },
	  .env = { "MIG_STRATEGY" },
	  .help = "MIG handling; only none is accepted (MIG is not supported yet)" },
	{ "failOnInitError", K_BOOL, C(fail_on_init_error), .flag = { "fail-on-init-error" },
	  .env = { "FAIL_ON_INIT_ERROR" },
	  .help = "exit when GPU discovery fails (true) instead of serving nothing and retrying" },
	{ "nvidiaDriverRoot", K_STR, C(driver_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "driver-root", "nvidia-driver-root" }, .env = { "NVIDIA_DRIVER_ROOT" },
	  .help = "the driver root on the host (/); host paths of the CDI spec", .value = "DIR" },
	{ "nvidiaDevRoot", K_STR, C(dev_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "dev-root", "nvidia-dev-root" }, .env = { "NVIDIA_DEV_ROOT" },
	  .help = "the host prefix of /dev/nvidia* in DeviceSpecs (the driver root)",
	  .value = "DIR" },
	{ "mpsRoot", K_UNSUP_ANY, NOOFF, .arg = "is ignored: MPS is not supported by edgegpu",
	  .flag = { "mps-root" }, .env = { "MPS_ROOT" },
	  .help = "NVIDIA's; MPS is not supported: warned about and ignored", .value = "DIR" },
	{ "gdsEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "gds-enabled" },
	  .env = { "GDS_ENABLED" }, .help = "NVIDIA's, not acted on: only false is accepted" },
	{ "mofedEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "mofed-enabled" },
	  .env = { "MOFED_ENABLED" }, .help = "NVIDIA's, not acted on: only false is accepted" },
	{ "gdrcopyEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "gdrcopy-enabled" },
	  .env = { "GDRCOPY_ENABLED" }, .help = "NVIDIA's, not acted on: only false is accepted" },
	{ "useNodeFeatureAPI", K_UNSUP_BOOL, NOOFF, .min = false },
	{ "deviceDiscoveryStrategy", K_ENUM, C(discovery), .arg = discovery_values,
	  .flag = { "device-discovery-strategy" }, .env = { "DEVICE_DISCOVERY_STRATEGY" },
	  .help = "the GPU backend: auto (Tegra on a Jetson, NVML elsewhere), nvml or tegra" },
	{ "plugin", K_SECTION, 0, .arg = plugin_fields },
	{ "gfd", K_SECTION, 0, .arg = gfd_fields },
	{ NULL },
};

const struct field config_gpu_item_fields[] = {
	{ "pattern", K_STR, offsetof(struct config_gpu_pattern, pattern), .min = STR_NONEMPTY },
	{ "name", K_RESNAME, offsetof(struct config_gpu_pattern, name) },
	{ NULL },
};

static const struct field resources_fields[] = {
	{ "gpus", K_GPUS, 0 },
	{ "mig", K_REFUSE, 0, .arg = "MIG is not supported by edgegpu yet" },
	{ NULL },
};

#define T(m) offsetof(struct config_ts_resource, m)

const struct field config_ts_item_fields[] = {
	{ "name", K_RESNAME, T(name), POS(struct config_ts_resource, name_pos) },
	{ "rename", K_RESNAME, T(rename), POS(struct config_ts_resource, rename_pos) },
	{ "replicas", K_U32, T(replicas), .min = 2, .max = CONFIG_REPLICAS_MAX },
	{ "devices", K_TS_DEVICES, T(devices) },
	{ NULL },
};

static const struct field ts_fields[] = {
	{ "renameByDefault", K_BOOL, C(time_slicing.rename_by_default) },
	{ "failRequestsGreaterThanOne", K_BOOL, C(time_slicing.fail_requests_greater_than_one) },
	{ "resources", K_TS_RESOURCES, 0 },
	{ NULL },
};

static const struct field sharing_fields[] = {
	{ "timeSlicing", K_TIME_SLICING, 0, .arg = ts_fields },
	{ "mps", K_REFUSE, 0,
	  .arg = "MPS sharing is not supported by edgegpu; use sharing.timeSlicing or "
		 "edgegpu.sharing.memory" },
	{ NULL },
};

static const struct field imex_fields[] = {
	{ "channelIDs", K_UNSUP_EMPTY_LIST, NOOFF, .flag = { "imex-channel-ids" },
	  .env = { "IMEX_CHANNEL_IDS" },
	  .help = "NVIDIA's IMEX channels, not acted on: only an empty list is accepted" },
	{ "required", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "imex-required" },
	  .env = { "IMEX_REQUIRED" },
	  .help = "NVIDIA's IMEX switch, not acted on: only false is accepted" },
	{ NULL },
};

static const struct field health_fields[] = {
	{ "pollInterval", K_DURATION, C(health.poll_interval), .min = 100 * USEC_PER_MSEC,
	  .max = USEC_PER_SEC * 24 * 3600 },
	{ "eventPollInterval", K_DURATION, C(health.event_poll_interval),
	  .min = 100 * USEC_PER_MSEC, .max = USEC_PER_SEC * 24 * 3600 },
	{ "callTimeout", K_DURATION, C(health.call_timeout), .min = 100 * USEC_PER_MSEC,
	  .max = USEC_PER_SEC * 3600 },
	{ "recoveryQuietPeriod", K_DURATION, C(health.recovery_quiet_period), .min = 0,
	  .max = USEC_PER_SEC * 24 * 3600 },
	{ "ignoredXids", K_XIDS, 0 },
	{ "disableHealthchecks", K_STR, C(health.disable_healthchecks), .min = STR_EMPTY_IGNORED,
	  .env = { "DP_DISABLE_HEALTHCHECKS" },
	  .help = "NVIDIA's syntax: all, xids, or a comma list of XIDs to ignore",
	  .value = "LIST" },
	{ NULL },
};

static const struct field grpc_fields[] = {
	{ "maxRecvMsgBytes", K_U64, C(grpc.max_recv_msg_bytes), .min = (uint64_t)64 * 1024,
	  .max = 1024 * MIB },
	{ "maxConnections", K_U32, C(grpc.max_connections), .min = 1, .max = 4096 },
	{ NULL },
};

static const struct enum_value preload_values[] = {
	{ "ldSoPreload", CONFIG_PRELOAD_LD_SO_PRELOAD },
	{ "LD_PRELOAD", CONFIG_PRELOAD_ENV },
	{ NULL },
};

static const struct enum_value managed_values[] = {
	{ "count", CONFIG_MANAGED_COUNT },
	{ "ignore", CONFIG_MANAGED_IGNORE },
	{ NULL },
};

static const struct field backstop_fields[] = {
	{ "enabled", K_BOOL, C(gpumem.enforcement.backstop.enabled) },
	{ "tolerancePercent", K_U32, C(gpumem.enforcement.backstop.tolerance_percent), .min = 100,
	  .max = 1000 },
	{ "after", K_DURATION, C(gpumem.enforcement.backstop.after), .min = USEC_PER_SEC,
	  .max = USEC_PER_SEC * 3600 },
	{ "interval", K_DURATION, C(gpumem.enforcement.backstop.interval),
	  .min = 100 * USEC_PER_MSEC, .max = USEC_PER_SEC * 60 },
	{ NULL },
};

static const struct field enforcement_fields[] = {
	{ "interposer", K_BOOL, C(gpumem.enforcement.interposer) },
	{ "driver", K_BOOL, C(gpumem.enforcement.driver) },
	{ "preload", K_ENUM, C(gpumem.enforcement.preload), .arg = preload_values },
	{ "library", K_STR, C(gpumem.enforcement.library), .min = STR_NONEMPTY,
	  .flag = { "interposer-lib" }, .env = { "EDGEGPU_INTERPOSER_LIB" },
	  .help = "the interposer library in the image, installed under the state directory",
	  .value = "PATH" },
	{ "stateDir", K_STR, C(gpumem.enforcement.state_dir), .min = STR_NONEMPTY,
	  .flag = { "gpumem-state-dir" }, .env = { "EDGEGPU_GPUMEM_STATE_DIR" },
	  .help = "host directory of the gpumem enforcement state (/var/lib/edgegpu)",
	  .value = "DIR" },
	{ "managed", K_ENUM, C(gpumem.enforcement.managed), .arg = managed_values },
	{ "backstop", K_SECTION, 0, .arg = backstop_fields },
	{ NULL },
};

static const struct field gpumem_fields[] = {
	{ "resourceName", K_RESNAME, C(gpumem.resource_name),
	  POS(struct config, gpumem.resource_name_pos) },
	{ "devices", K_DEVICES, C(gpumem.devices) },
	{ "unitMiB", K_U32, C(gpumem.unit_mib), POS(struct config, gpumem.unit_pos), .min = 1,
	  .max = 1u << 20 },
	{ "reserveMiB", K_U64, C(gpumem.reserve_mib), POS(struct config, gpumem.reserve_pos),
	  .min = 0, .max = 1u << 24 },
	{ "onSplit", K_ENUM, C(gpumem.on_split), .arg = split_values },
	{ "placement", K_ENUM, C(gpumem.placement), .arg = placement_values },
	{ "maskHysteresisMiB", K_U64, C(gpumem.mask_hysteresis_mib), .min = 0, .max = 1u << 24 },
	{ "enforcement", K_SECTION, 0, .arg = enforcement_fields },
	{ NULL },
};

static const struct enum_value hostname_label_values[] = {
	{ "Hostname", CONFIG_HOSTNAME_LABEL_UPPER },
	{ "hostname", CONFIG_HOSTNAME_LABEL_LOWER },
	{ NULL },
};

static const struct field metrics_fields[] = {
	{ "address", K_STR, C(metrics.address), POS(struct config, metrics.address_pos),
	  .min = STR_EMPTY_OK, .flag = { "metrics-address" }, .env = { "METRICS_ADDRESS" },
	  .help = "listen address of /metrics, /healthz, /readyz (:9400); \"\" turns it off",
	  .value = "ADDR" },
	{ "minInterval", K_DURATION, C(metrics.min_interval), .min = 100 * USEC_PER_MSEC,
	  .max = USEC_PER_SEC * 3600, .flag = { "metrics-min-interval" },
	  .help = "GPU telemetry is sampled at most this often (1s)" },
	{ "scrapeWait", K_DURATION, C(metrics.scrape_wait), .min = 0, .max = USEC_PER_SEC * 10 },
	{ "hostnameLabel", K_ENUM, C(metrics.hostname_label), .arg = hostname_label_values },
	{ "nodeName", K_STR, C(metrics.node_name), .min = STR_EMPTY_IGNORED, .env = { "NODE_NAME" },
	  .help = "the Hostname label of the metrics (the host name)", .value = "NAME" },
	{ "maxConnections", K_U32, C(metrics.max_connections), .min = 1, .max = 1024 },
	{ "connectionTimeout", K_DURATION, C(metrics.connection_timeout), .min = USEC_PER_SEC,
	  .max = USEC_PER_SEC * 3600 },
	{ "hostProc", K_STR, C(metrics.host_proc), .min = STR_EMPTY_IGNORED,
	  .flag = { "host-proc" }, .env = { "HOST_PROC" },
	  .help = "the host's /proc, to map GPU processes to pods (/proc)", .value = "DIR" },
	{ "podLogDir", K_STR, C(metrics.pod_log_dir), .min = STR_EMPTY_IGNORED,
	  .flag = { "pod-log-dir" }, .env = { "POD_LOG_DIR" },
	  .help = "holds the kubelet's pods/ and containers/, which name containers (/var/log)",
	  .value = "DIR" },
	{ "kubernetesVirtualGpus", K_BOOL, C(metrics.kubernetes_virtual_gpus),
	  .flag = { "kubernetes-virtual-gpus" }, .env = { "KUBERNETES_VIRTUAL_GPUS" },
	  .help = "per-container GPU_UTIL and FB_USED for shared GPUs (DCGM-exporter's)" },
	{ NULL },
};

static const struct field labels_fields[] = {
	{ "file", K_STR, C(labels.file), .min = STR_EMPTY_OK, .flag = { "labels-file" },
	  .env = { "LABELS_FILE" },
	  .help = "the node labels file for NFD's local source; \"\" writes none",
	  .value = "PATH" },
	{ "expiry", K_DURATION, C(labels.expiry), .min = 60 * USEC_PER_SEC,
	  .max = USEC_PER_SEC * 3600 * 24 * 7 },
	{ NULL },
};

static const struct field edgegpu_sharing_fields[] = {
	{ "memory", K_SECTION, 0, .arg = gpumem_fields },
	{ NULL },
};

static const struct field tegra_fields[] = {
	{ "deviceId", K_STR, C(tegra_device_id), POS(struct config, tegra_device_id_pos),
	  .min = STR_NONEMPTY },
	{ "memoryMiB", K_U64, C(tegra_mem_mib), .min = 0, .max = 1u << 24 },
	{ NULL },
};

static const struct field edgegpu_fields[] = {
	{ "logLevel", K_ENUM, C(log_level), .arg = log_values, .flag = { "log-level" },
	  .env = { "EDGEGPU_LOG_LEVEL" }, .help = "the lowest level logged (info)" },
	{ "logFormat", K_ENUM, C(log_format), .arg = log_format_values, .flag = { "log-format" },
	  .env = { "EDGEGPU_LOG_FORMAT" },
	  .help = "the log lines' format: logfmt, or json (one object per line, the same fields)" },
	{ "devicePluginPath", K_STR, C(device_plugin_path), .min = STR_EMPTY_IGNORED,
	  .flag = { "device-plugin-path" }, .env = { "DEVICE_PLUGIN_PATH" },
	  .help = "where the plugin sockets go (/var/lib/kubelet/device-plugins)", .value = "DIR" },
	{ "kubeletSocket", K_STR, C(kubelet_socket), .min = STR_EMPTY_OK,
	  .flag = { "kubelet-socket" }, .env = { "KUBELET_SOCKET" },
	  .help = "the kubelet's registration socket (<device plugin path>/kubelet.sock); \"\" does not register",
	  .value = "PATH" },
	{ "nvmlLib", K_STR, C(nvml_lib), .min = STR_EMPTY_IGNORED, .flag = { "nvml-lib" },
	  .env = { "NVML_LIB" },
	  .help = "the NVML library (default: the loader's search, then under the driver root)",
	  .value = "PATH" },
	{ "podResourcesSocket", K_STR, C(pod_resources_socket), .min = STR_EMPTY_IGNORED,
	  .flag = { "pod-resources-socket" }, .env = { "POD_RESOURCES_SOCKET" },
	  .help = "the kubelet's pod-resources socket, for placement and per-pod metrics",
	  .value = "PATH" },
	{ "cdiSpecDir", K_STR, C(cdi_spec_dir), .min = STR_EMPTY_IGNORED,
	  .flag = { "cdi-spec-dir" }, .env = { "CDI_SPEC_DIR" },
	  .help = "where the CDI spec is written (/var/run/cdi)", .value = "DIR" },
	{ "rediscoverInterval", K_DURATION, C(rediscover_interval), .min = USEC_PER_SEC,
	  .max = USEC_PER_SEC * 24 * 3600, .flag = { "rediscover-interval" },
	  .help = "how often to look again after \"no devices found\" (60s)" },
	{ "hostRoot", K_STR, C(host_root), .min = STR_EMPTY_IGNORED, .flag = { "host-root" },
	  .env = { "EDGEGPU_HOST_ROOT" },
	  .help = "the host's root as edgegpu sees it (/); the Tegra backend reads the board there",
	  .value = "DIR" },
	{ "tegra", K_SECTION, 0, .arg = tegra_fields },
	{ "health", K_SECTION, 0, .arg = health_fields },
	{ "grpc", K_SECTION, 0, .arg = grpc_fields },
	{ "sharing", K_SECTION, 0, .arg = edgegpu_sharing_fields },
	{ "metrics", K_SECTION, 0, .arg = metrics_fields },
	{ "labels", K_SECTION, 0, .arg = labels_fields },
	{ NULL },
};

const struct field config_root_fields[] = {
	{ "version", K_VERSION, 0 },
	{ "flags", K_SECTION, 0, .arg = flags_fields },
	{ "resources", K_SECTION, 0, .arg = resources_fields },
	{ "sharing", K_SECTION, 0, .arg = sharing_fields },
	{ "imex", K_SECTION, 0, .arg = imex_fields },
	{ "edgegpu", K_SECTION, 0, .arg = edgegpu_fields },
	{ NULL, K_STR, C(config_file), .min = STR_EMPTY_IGNORED, .flag = { "config-file" },
	  .env = { "CONFIG_FILE" }, .flags = F_NOCMP,
	  .help = "the config file (NVIDIA's schema plus the edgegpu: section); none when unset",
	  .value = "FILE" },
	{ NULL },
};
