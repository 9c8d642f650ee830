#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "file-read.h"
#include "file-writer.h"
#include "oom.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#ifndef CONFIG_FIXTURES
#error "CONFIG_FIXTURES must name tests/fixtures/config"
#endif
#ifndef CONFIG_CORPUS
#error "CONFIG_CORPUS must name fuzz/corpus/config"
#endif

#define MIB	 ((uint64_t)1024 * 1024)
#define FX(name) CONFIG_FIXTURES "/" name

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const uuids[] = {
	"GPU-00000000-0000-0000-0000-000000000000",
	"GPU-00000000-0000-0000-0000-000000000001",
	"GPU-00000000-0000-0000-0000-000000000002",
	"GPU-00000000-0000-0000-0000-000000000003",
};

static char *fmt_error(const struct config_error *e)
{
	char *s = config_error_to_string(e);

	assert_non_null(s);
	return s;
}

/* Exactly one error, and it reads @want. */
static void assert_one_error(const struct config_diag *d, const char *want)
{
	char *s;

	if (d->n_errors != 1) {
		for (size_t i = 0; i < d->n_errors; i++) {
			s = fmt_error(&d->errors[i]);
			print_message("error %zu: %s\n", i, s);
			free(s);
		}
	}
	assert_int_equal(d->n_errors, 1);
	s = fmt_error(&d->errors[0]);
	assert_string_equal(s, want);
	free(s);
}

static int load_str(struct config *c, const char *yaml, struct config_diag *d)
{
	return config_load_buffer(c, "t.yaml", yaml, strlen(yaml), d);
}

/* Loads @yaml into fresh defaults, expects it to fail with exactly @want. */
static void expect_error(const char *yaml, const char *want)
{
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(load_str(&c, yaml, &d), -EINVAL);
	assert_one_error(&d, want);
	config_diag_release(&d);
	config_release(&c);
}

/* Loads @yaml into fresh defaults; it must succeed without errors or warnings. */
static void load_ok(struct config *c, const char *yaml)
{
	struct config_diag d = { 0 };

	assert_int_equal(config_init(c), 0);
	assert_int_equal(load_str(c, yaml, &d), 0);
	assert_int_equal(d.n_errors, 0);
	assert_int_equal(d.n_warnings, 0);
	config_diag_release(&d);
}

static void test_defaults(void **state)
{
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_null(c.config_file);
	assert_int_equal(c.mig_strategy, CONFIG_MIG_NONE);
	assert_true(c.fail_on_init_error);
	assert_string_equal(c.driver_root, "/");
	assert_null(c.dev_root);
	assert_false(c.pass_device_specs);
	assert_int_equal(c.device_list_strategy, CONFIG_DLS_ENVVAR);
	assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_UUID);
	assert_string_equal(c.container_driver_root, "/driver-root");
	assert_int_equal(c.n_gpus, 0);
	assert_false(c.time_slicing.rename_by_default);
	assert_false(c.time_slicing.fail_requests_greater_than_one);
	assert_int_equal(c.time_slicing.n_resources, 0);
	assert_int_equal(c.log_level, LOG_LEVEL_INFO);
	assert_string_equal(c.device_plugin_path, "/var/lib/kubelet/device-plugins");
	assert_null(c.kubelet_socket);
	assert_null(c.nvml_lib);
	assert_string_equal(c.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
	assert_string_equal(c.cdi_spec_dir, "/var/run/cdi");
	assert_int_equal(c.rediscover_interval, 60 * USEC_PER_SEC);
	assert_int_equal(c.health.poll_interval, 5 * USEC_PER_SEC);
	assert_int_equal(c.health.recovery_quiet_period, 0);
	assert_int_equal(c.health.n_ignored_xids, 0);
	assert_null(c.health.disable_healthchecks);
	assert_int_equal(c.grpc.max_recv_msg_bytes, 16 * MIB);
	assert_int_equal(c.grpc.max_connections, 64);
	assert_string_equal(c.gpumem.resource_name, "nvidia.com/gpumem");
	assert_int_equal(c.gpumem.devices.kind, CONFIG_DEVICES_LIST);
	assert_int_equal(c.gpumem.devices.n_refs, 0);
	assert_int_equal(c.gpumem.unit_mib, 1);
	assert_int_equal(c.gpumem.reserve_mib, 512);
	assert_int_equal(c.gpumem.on_split, CONFIG_ON_SPLIT_REJECT);
	assert_int_equal(c.gpumem.placement, CONFIG_PLACEMENT_MASK);
	assert_int_equal(c.gpumem.mask_hysteresis_mib, 1024);

	/* Validation fills in what derives from other settings. */
	assert_int_equal(config_validate(&c, &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_string_equal(c.dev_root, "/");
	assert_string_equal(c.kubelet_socket, "/var/lib/kubelet/device-plugins/kubelet.sock");
	config_release(&c);

	/* An empty file and a `null` document are the defaults. */
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("empty.yaml"), &d), 0);
	assert_string_equal(c.config_file, FX("empty.yaml"));
	assert_int_equal(config_load_file(&c, "/dev/null", &d), 0);
	assert_int_equal(load_str(&c, "# only a comment\n", &d), 0);
	assert_int_equal(load_str(&c, "null\n", &d), 0);
	assert_int_equal(load_str(&c, "---\n...\n", &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_true(c.fail_on_init_error);
	assert_int_equal(c.device_list_strategy, CONFIG_DLS_ENVVAR);
	config_release(&c);
	config_release(&c); /* release is safe on a released struct */
}

/* The Tegra keys: discovery strategy, host root, the iGPU's ID and carve-out, ID references. */
static void test_tegra_keys(void **state)
{
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(c.discovery, CONFIG_DISCOVERY_AUTO);
	assert_string_equal(c.host_root, "/");
	assert_string_equal(c.tegra_device_id, "tegra");
	assert_int_equal(c.tegra_mem_mib, 0);
	config_release(&c);
	load_ok(&c, "flags:\n  deviceDiscoveryStrategy: tegra\nedgegpu:\n  hostRoot: /host\n"
		    "  tegra:\n    deviceId: jetson-0\n    memoryMiB: 4096\n"
		    "  sharing:\n    memory:\n      devices: [jetson-0]\n");
	assert_int_equal(c.discovery, CONFIG_DISCOVERY_TEGRA);
	assert_string_equal(c.host_root, "/host");
	assert_string_equal(c.tegra_device_id, "jetson-0");
	assert_int_equal(c.tegra_mem_mib, 4096);
	assert_string_equal(c.gpumem.devices.refs[0].uuid, "jetson-0");
	config_release(&c);
	/* The default ID where a GPU UUID goes, before the section that could change it. */
	load_ok(&c, "sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		    "devices: [tegra]}\n");
	assert_string_equal(c.time_slicing.resources[0].devices.refs[0].uuid, "tegra");
	config_release(&c);
	load_ok(&c, "flags:\n  deviceDiscoveryStrategy: nvml\n");
	assert_int_equal(c.discovery, CONFIG_DISCOVERY_NVML);
	config_release(&c);
	expect_error("edgegpu:\n  tegra:\n    deviceId: \"a::b\"\n",
		     "t.yaml:3:15: edgegpu.tegra.deviceId: invalid device ID \"a::b\": letters, "
		     "digits and \"_.:-\" between a first and a last letter or digit, no \"::\", "
		     "at most 95 characters");
	expect_error("edgegpu:\n  tegra:\n    deviceId: tegra-\n",
		     "t.yaml:3:15: edgegpu.tegra.deviceId: invalid device ID \"tegra-\": letters, "
		     "digits and \"_.:-\" between a first and a last letter or digit, no \"::\", "
		     "at most 95 characters");
	expect_error("edgegpu:\n  tegra:\n    memoryMiB: -1\n",
		     "t.yaml:3:16: edgegpu.tegra.memoryMiB: must not be negative, got \"-1\"");
	expect_error("edgegpu:\n  tegra:\n    deviceId: jetson\n  sharing:\n    memory:\n"
		     "      devices: [tegra]\n",
		     "t.yaml:6:17: edgegpu.sharing.memory.devices[0]: expected a GPU index, a GPU "
		     "UUID (\"GPU-...\") or the Tegra device ID \"jetson\" "
		     "(edgegpu.tegra.deviceId), got \"tegra\"");
}

static void test_full_nvidia(void **state)
{
	static const char *const warned[] = {
		"flags.mpsRoot",
		"flags.gdsEnabled",
		"flags.mofedEnabled",
		"flags.plugin.cdiAnnotationPrefix",
		"flags.plugin.nvidiaCTKPath",
		"flags.gfd.oneshot",
		"flags.gfd.outputFile",
		"flags.gfd.sleepInterval",
		"imex.channelIDs",
		"imex.required",
	};
	struct config_diag d = { 0 };
	struct config c;
	char *s;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("full-nvidia.yaml"), &d), 0);
	assert_int_equal(d.n_errors, 0);
	assert_string_equal(c.config_file, FX("full-nvidia.yaml"));
	assert_int_equal(c.mig_strategy, CONFIG_MIG_NONE);
	assert_false(c.fail_on_init_error);
	assert_string_equal(c.driver_root, "/run/nvidia/driver");
	assert_string_equal(c.dev_root, "/run/nvidia/dev");
	assert_true(c.pass_device_specs);
	assert_int_equal(c.device_list_strategy, CONFIG_DLS_ENVVAR | CONFIG_DLS_CDI_CRI);
	assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_INDEX);
	/* Acted on since the Tegra backend: no warning. */
	assert_int_equal(c.discovery, CONFIG_DISCOVERY_AUTO);
	assert_string_equal(c.container_driver_root, "/host-driver");
	assert_int_equal(c.n_gpus, 2);
	assert_string_equal(c.gpus[0].pattern, "*A100*");
	assert_string_equal(c.gpus[0].name, "nvidia.com/a100");
	assert_int_equal(c.gpus[0].pos.line, 28);
	assert_string_equal(c.gpus[1].pattern, "NVIDIA A2");
	assert_string_equal(c.gpus[1].name, "nvidia.com/gpu-a2");
	assert_true(c.time_slicing.rename_by_default);
	assert_true(c.time_slicing.fail_requests_greater_than_one);
	assert_int_equal(c.time_slicing.n_resources, 1);
	assert_string_equal(c.time_slicing.resources[0].name, "nvidia.com/gpu");
	assert_string_equal(c.time_slicing.resources[0].rename, "nvidia.com/gpu.shared");
	assert_string_equal(config_ts_resource_name(&c.time_slicing.resources[0]),
			    "nvidia.com/gpu.shared");
	assert_int_equal(c.time_slicing.resources[0].replicas, 4);
	assert_int_equal(c.time_slicing.resources[0].devices.kind, CONFIG_DEVICES_ALL);
	/* GFD's noTimestamp is acted on (the labels' gfd.timestamp): no warning, its value. */
	assert_false(c.labels.no_timestamp);

	/* Every NVIDIA key we do not act on, set to its default: a warning each, in order. */
	assert_int_equal(d.n_warnings, ELEMENTSOF(warned));
	for (size_t i = 0; i < ELEMENTSOF(warned); i++) {
		assert_string_equal(d.warnings[i].key, warned[i]);
		assert_string_equal(d.warnings[i].file, FX("full-nvidia.yaml"));
	}
	s = fmt_error(&d.warnings[1]);
	assert_string_equal(
		s, FX("full-nvidia.yaml") ":9:15: flags.gdsEnabled: is not supported by "
					  "edgegpu and is ignored (it is set to its default)");
	free(s);
	s = fmt_error(&d.warnings[7]);
	assert_string_equal(
		s, FX("full-nvidia.yaml") ":25:20: flags.gfd.sleepInterval: is not "
					  "supported by edgegpu and is ignored (it is set to its "
					  "default)");
	free(s);

	config_diag_release(&d);
	config_release(&c);
}

static void test_json(void **state)
{
	struct config c;

	/* sigs.k8s.io/yaml reads JSON too, and so do we. */
	load_ok(&c, "{\"version\": \"v1\", \"flags\": {\"plugin\": {\"deviceListStrategy\": "
		    "\"cdi-annotations\", \"passDeviceSpecs\": true}}}");
	assert_int_equal(c.device_list_strategy, CONFIG_DLS_CDI_ANNOTATIONS);
	assert_true(c.pass_device_specs);
	config_release(&c);
}

static void test_time_slicing(void **state)
{
	const struct config_ts_resource *r;
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("timeslicing.yaml"), &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_false(c.time_slicing.rename_by_default);
	assert_int_equal(c.time_slicing.n_resources, 3);
	r = &c.time_slicing.resources[0];
	assert_string_equal(r->name, "nvidia.com/gpu");
	assert_string_equal(r->rename, "nvidia.com/gpu.small");
	assert_int_equal(r->replicas, 4);
	assert_int_equal(r->devices.kind, CONFIG_DEVICES_LIST);
	assert_int_equal(r->devices.n_refs, 2);
	assert_null(r->devices.refs[0].uuid);
	assert_int_equal(r->devices.refs[0].index, 0);
	assert_string_equal(r->devices.refs[1].uuid, uuids[1]);
	assert_int_equal(r->devices.refs[1].pos.line, 12);
	assert_int_equal(r->devices.refs[1].pos.column, 22);
	r = &c.time_slicing.resources[1];
	assert_string_equal(r->name, "nvidia.com/gpu");
	assert_null(r->rename);
	assert_int_equal(r->replicas, 2);
	assert_int_equal(r->devices.kind, CONFIG_DEVICES_LIST);
	r = &c.time_slicing.resources[2];
	assert_string_equal(r->name, "nvidia.com/gpu-a2");
	assert_int_equal(r->replicas, 3);
	assert_int_equal(r->devices.kind, CONFIG_DEVICES_COUNT);
	assert_int_equal(r->devices.count, 1);
	assert_int_equal(config_validate(&c, &d), 0);

	config_release(&c);

	/* renameByDefault names the resource <name>.shared; an explicit rename wins. */
	load_ok(&c,
		"sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
		"      - {name: gpu, replicas: 2, devices: [0]}\n      - {name: gpu, replicas: 3, "
		"devices: [1], rename: gpu-three}\n");
	assert_string_equal(c.time_slicing.resources[0].rename, "nvidia.com/gpu.shared");
	assert_string_equal(c.time_slicing.resources[1].rename, "nvidia.com/gpu-three");
	config_release(&c);
	config_diag_release(&d);
}

static void test_gpumem(void **state)
{
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("gpumem.yaml"), &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_string_equal(c.gpumem.resource_name, "nvidia.com/gpumem-edge");
	assert_int_equal(c.gpumem.devices.n_refs, 2);
	assert_int_equal(c.gpumem.devices.refs[0].index, 1);
	assert_null(c.gpumem.devices.refs[0].uuid);
	assert_string_equal(c.gpumem.devices.refs[1].uuid, uuids[2]);
	assert_int_equal(c.gpumem.unit_mib, 2);
	assert_int_equal(c.gpumem.reserve_mib, 256);
	assert_int_equal(c.gpumem.on_split, CONFIG_ON_SPLIT_ALLOW);
	assert_int_equal(c.gpumem.placement, CONFIG_PLACEMENT_PREFERRED);
	assert_int_equal(c.gpumem.mask_hysteresis_mib, 2048);
	assert_int_equal(c.gpumem.reserve_pos.line, 8);
	assert_int_equal(c.gpumem.reserve_pos.column, 19);
	config_diag_release(&d);
	config_release(&c);
}

static void test_edgegpu_section(void **state)
{
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("edgegpu.yaml"), &d), 0);
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_int_equal(c.log_level, LOG_LEVEL_DEBUG);
	assert_string_equal(c.device_plugin_path, "/tmp/dp");
	assert_string_equal(c.kubelet_socket, "/tmp/dp/kubelet.sock");
	assert_string_equal(c.nvml_lib, "/opt/nvml/libnvidia-ml.so.1");
	assert_string_equal(c.pod_resources_socket, "/tmp/pr.sock");
	assert_string_equal(c.cdi_spec_dir, "/tmp/cdi");
	assert_int_equal(c.rediscover_interval, 150 * USEC_PER_SEC);
	assert_int_equal(c.health.poll_interval, 1500 * USEC_PER_MSEC);
	assert_int_equal(c.health.recovery_quiet_period, 5 * USEC_PER_SEC);
	assert_int_equal(c.health.n_ignored_xids, 2);
	assert_int_equal(c.health.ignored_xids[0], 48);
	assert_int_equal(c.health.ignored_xids[1], 79);
	assert_string_equal(c.health.disable_healthchecks, "48,79");
	assert_int_equal(c.grpc.max_recv_msg_bytes, 8 * MIB);
	assert_int_equal(c.grpc.max_connections, 16);
	config_release(&c);
}

/* edgegpu.metrics and edgegpu.labels: defaults, values, errors naming file, line and key. */
static void test_metrics_section(void **state)
{
	struct config_diag d = { 0 };
	struct config c;
	const char *flags_env[] = { "NODE_NAME=edge-7", "METRICS_ADDRESS=127.0.0.1:0",
				    "KUBERNETES_VIRTUAL_GPUS=false", "LABELS_FILE=", NULL };

	assert_int_equal(config_init(&c), 0);
	assert_string_equal(c.metrics.address, ":9400");
	assert_int_equal(c.metrics.min_interval, USEC_PER_SEC);
	assert_int_equal(c.metrics.scrape_wait, 500 * USEC_PER_MSEC);
	assert_int_equal(c.metrics.hostname_label, CONFIG_HOSTNAME_LABEL_UPPER);
	assert_null(c.metrics.node_name);
	assert_int_equal(c.metrics.max_connections, 16);
	assert_string_equal(c.metrics.host_proc, "/proc");
	assert_string_equal(c.metrics.pod_log_dir, "/var/log");
	assert_false(c.metrics.kubernetes_virtual_gpus);
	assert_string_equal(c.labels.file, CONFIG_DEFAULT_LABELS_FILE);
	assert_int_equal(c.labels.expiry, 3600 * USEC_PER_SEC);
	config_release(&c);

	load_ok(&c, "edgegpu:\n  metrics:\n    address: \"\"\n    minInterval: 250ms\n"
		    "    scrapeWait: 0s\n    hostnameLabel: hostname\n    maxConnections: 4\n"
		    "    hostProc: /host/proc\n    kubernetesVirtualGpus: true\n"
		    "  labels:\n    file: /nfd/edgegpu\n"
		    "    expiry: 10m\n");
	assert_string_equal(c.metrics.address, "");
	assert_int_equal(c.metrics.min_interval, 250 * USEC_PER_MSEC);
	assert_int_equal(c.metrics.scrape_wait, 0);
	assert_int_equal(c.metrics.hostname_label, CONFIG_HOSTNAME_LABEL_LOWER);
	assert_int_equal(c.metrics.max_connections, 4);
	assert_string_equal(c.metrics.host_proc, "/host/proc");
	assert_true(c.metrics.kubernetes_virtual_gpus);
	assert_string_equal(c.labels.file, "/nfd/edgegpu");
	assert_int_equal(c.labels.expiry, 600 * USEC_PER_SEC);
	assert_int_equal(config_apply_env(&c, (char *const *)flags_env, &d), 0);
	assert_string_equal(c.metrics.node_name, "edge-7");
	assert_string_equal(c.metrics.address, "127.0.0.1:0");
	assert_false(c.metrics.kubernetes_virtual_gpus); /* the environment over the file */
	assert_string_equal(c.labels.file, "");
	assert_int_equal(config_validate(&c, &d), 0);
	config_release(&c);
	config_diag_release(&d);

	expect_error("edgegpu: {metrics: {hostnameLabel: HOSTNAME}}\n",
		     "t.yaml:1:36: edgegpu.metrics.hostnameLabel: invalid value \"HOSTNAME\", "
		     "expected one of: Hostname, hostname");
	expect_error("edgegpu: {metrics: {minInterval: 1ms}}\n",
		     "t.yaml:1:34: edgegpu.metrics.minInterval: must be at least 100ms, got 1ms");
	expect_error("edgegpu: {labels: {expiry: 30s}}\n",
		     "t.yaml:1:28: edgegpu.labels.expiry: must be at least 1m, got 30s");
	/* Issue 20's switches: booleans, a bad value named by file, line, column and key. */
	expect_error("edgegpu: {metrics: {kubernetesVirtualGpus: yes please}}\n",
		     "t.yaml:1:44: edgegpu.metrics.kubernetesVirtualGpus: expected true or false, "
		     "got \"yes please\"");
	expect_error("flags:\n  gfd:\n    noTimestamp: [true]\n",
		     "t.yaml:3:18: flags.gfd.noTimestamp: expected true or false, got a list");

	/* An address that can never listen: refused by the checks, at its line. */
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(load_str(&c, "version: v1\nedgegpu:\n  metrics:\n    address: [::1\n", &d),
			 -EINVAL);
	config_diag_release(&d);
	assert_int_equal(
		load_str(&c, "version: v1\nedgegpu:\n  metrics:\n    address: \"[::1\"\n", &d), 0);
	assert_int_equal(config_validate(&c, &d), -EINVAL);
	assert_one_error(&d, "t.yaml:4:14: edgegpu.metrics.address: address \"[::1\": missing ']' "
			     "after the IPv6 address");
	config_diag_release(&d);
	config_release(&c);
}

static void test_yaml_types(void **state)
{
	struct config c;

	/* go-yaml v2 booleans */
	load_ok(&c, "flags: {failOnInitError: no, plugin: {passDeviceSpecs: on}}\n");
	assert_false(c.fail_on_init_error);
	assert_true(c.pass_device_specs);
	config_release(&c);
	load_ok(&c, "flags: {failOnInitError: False, plugin: {passDeviceSpecs: YES}}\n");
	assert_false(c.fail_on_init_error);
	assert_true(c.pass_device_specs);
	config_release(&c);
	/* null is "not set" */
	load_ok(&c, "flags:\n  failOnInitError: ~\n  plugin:\nedgegpu: null\n");
	assert_true(c.fail_on_init_error);
	config_release(&c);
	/* Go integers and durations */
	load_ok(&c, "edgegpu:\n  sharing:\n    memory: {unitMiB: 0x10, reserveMiB: 1_024, "
		    "maskHysteresisMiB: 0o10}\n  health: {pollInterval: 1.5h, recoveryQuietPeriod: "
		    "\"1m30s\"}\n  rediscoverInterval: 2h45m\n");
	assert_int_equal(c.gpumem.unit_mib, 16);
	assert_int_equal(c.gpumem.reserve_mib, 1024);
	assert_int_equal(c.gpumem.mask_hysteresis_mib, 8);
	assert_int_equal(c.health.poll_interval, 5400 * USEC_PER_SEC);
	assert_int_equal(c.health.recovery_quiet_period, 90 * USEC_PER_SEC);
	assert_int_equal(c.rediscover_interval, (2 * 3600 + 45 * 60) * USEC_PER_SEC);
	config_release(&c);
	load_ok(&c, "edgegpu:\n  health: {pollInterval: .5s, recoveryQuietPeriod: 0}\n");
	assert_int_equal(c.health.poll_interval, 500 * USEC_PER_MSEC);
	assert_int_equal(c.health.recovery_quiet_period, 0);
	config_release(&c);
	/* aliases */
	load_ok(&c, "edgegpu:\n  health:\n    pollInterval: &p 2s\n    recoveryQuietPeriod: *p\n");
	assert_int_equal(c.health.poll_interval, 2 * USEC_PER_SEC);
	assert_int_equal(c.health.recovery_quiet_period, 2 * USEC_PER_SEC);
	config_release(&c);
	/* a number where a string is wanted is its text, as sigs.k8s.io/yaml converts it */
	load_ok(&c, "flags: {nvidiaDriverRoot: 123}\n");
	assert_string_equal(c.driver_root, "123");
	config_release(&c);

	expect_error("flags:\n  failOnInitError: \"true\"\n",
		     "t.yaml:2:20: flags.failOnInitError: expected true or false, got the string "
		     "\"true\"");
	expect_error("flags:\n  failOnInitError: maybe\n",
		     "t.yaml:2:20: flags.failOnInitError: expected true or false, got \"maybe\"");
	expect_error("flags:\n  failOnInitError: [true]\n",
		     "t.yaml:2:20: flags.failOnInitError: expected true or false, got a list");
	expect_error(
		"edgegpu: {grpc: {maxConnections: \"4\"}}\n",
		"t.yaml:1:34: edgegpu.grpc.maxConnections: expected an integer, got the string "
		"\"4\"");
	expect_error("edgegpu: {grpc: {maxConnections: 1.5}}\n",
		     "t.yaml:1:34: edgegpu.grpc.maxConnections: expected an integer, got \"1.5\"");
	expect_error("edgegpu: {grpc: {maxConnections: -1}}\n",
		     "t.yaml:1:34: edgegpu.grpc.maxConnections: must not be negative, got \"-1\"");
	expect_error("edgegpu: {grpc: {maxConnections: 99999999999999999999}}\n",
		     "t.yaml:1:34: edgegpu.grpc.maxConnections: expected an integer, got "
		     "\"99999999999999999999\"");
	expect_error("edgegpu: {grpc: {maxConnections: 5000}}\n",
		     "t.yaml:1:34: edgegpu.grpc.maxConnections: must be at most 4096, got 5000");
	expect_error(
		"edgegpu: {health: {pollInterval: 5}}\n",
		"t.yaml:1:34: edgegpu.health.pollInterval: expected a duration such as \"5s\", "
		"\"500ms\" or \"1m30s\", got \"5\"");
	expect_error("edgegpu: {health: {pollInterval: -1s}}\n",
		     "t.yaml:1:34: edgegpu.health.pollInterval: must not be negative, got \"-1s\"");
	expect_error("edgegpu: {health: {pollInterval: 10ms}}\n",
		     "t.yaml:1:34: edgegpu.health.pollInterval: must be at least 100ms, got 10ms");
	expect_error("edgegpu: {health: {pollInterval: 25h}}\n",
		     "t.yaml:1:34: edgegpu.health.pollInterval: must be at most 24h, got 25h");
	expect_error(
		"edgegpu: {health: {ignoredXids: 79}}\n",
		"t.yaml:1:33: edgegpu.health.ignoredXids: expected a list of XIDs, got \"79\"");
	expect_error("edgegpu: {health: {ignoredXids: [79, x]}}\n",
		     "t.yaml:1:38: edgegpu.health.ignoredXids[1]: expected an integer, got \"x\"");
	expect_error("edgegpu: {logLevel: verbose}\n",
		     "t.yaml:1:21: edgegpu.logLevel: invalid value \"verbose\", expected one of: "
		     "debug, info, warn, error");
	expect_error("flags:\n  nvidiaDriverRoot: \"a\\0b\"\n",
		     "t.yaml:2:21: flags.nvidiaDriverRoot: must not contain a NUL character");
	expect_error("flags:\n  plugin: {deviceListStrategy: []}\n",
		     "t.yaml:2:32: flags.plugin.deviceListStrategy: needs at least one strategy");
}

/* A fixture that must fail with exactly one error. */
struct bad_case {
	const char *file;
	int ret;
	const char *want;
};

static void test_error_kinds(void **state)
{
	static const struct bad_case cases[] = {
		{ FX("bad-syntax.yaml"), -EINVAL,
		  FX("bad-syntax.yaml") ":4:19: invalid YAML: mapping values are not allowed in this "
					"context" },
		{ FX("bad-unknown-key.yaml"), -EINVAL,
		  FX("bad-unknown-key.yaml") ":4:5: flags.plugin.passDeviceSpec: unknown key, did you "
					     "mean \"passDeviceSpecs\"?" },
		{ FX("bad-type.yaml"), -EINVAL,
		  FX("bad-type.yaml") ":3:20: flags.failOnInitError: expected true or false, got the "
				      "string \"yes\"" },
		{ FX("bad-enum.yaml"), -EINVAL,
		  FX("bad-enum.yaml") ":4:34: flags.plugin.deviceListStrategy[1]: invalid value "
				      "\"nvidia-magic\", expected one of: envvar, volume-mounts, "
				      "cdi-annotations, cdi-cri" },
		{ FX("bad-replicas.yaml"), -EINVAL,
		  FX("bad-replicas.yaml") ":6:19: sharing.timeSlicing.resources[0].replicas: must be "
					  "at least 2, got 1" },
		{ FX("bad-mig.yaml"), -EINVAL,
		  FX("bad-mig.yaml") ":3:16: flags.migStrategy: MIG is not supported by edgegpu yet; "
				     "only \"none\" is accepted" },
		{ FX("bad-mps.yaml"), -EINVAL,
		  FX("bad-mps.yaml") ":4:5: sharing.mps: MPS sharing is not supported by edgegpu; use "
				     "sharing.timeSlicing or edgegpu.sharing.memory" },
		{ FX("bad-gds.yaml"), -EINVAL,
		  FX("bad-gds.yaml") ":3:15: flags.gdsEnabled: is not supported by edgegpu; only the "
				     "default, false, is accepted" },
		{ FX("bad-unit.yaml"), -EINVAL,
		  FX("bad-unit.yaml") ":6:16: edgegpu.sharing.memory.unitMiB: must be at least 1, got "
				      "0" },
		{ FX("bad-overlap.yaml"), -EINVAL,
		  FX("bad-overlap.yaml") ":11:17: edgegpu.sharing.memory.devices[0]: GPU 1 is also "
					 "time-sliced by sharing.timeSlicing.resources[0]; a GPU can "
					 "be in only one of the two" },
		{ CONFIG_FIXTURES "/no-such-file.yaml", -ENOENT,
		  CONFIG_FIXTURES "/no-such-file.yaml: cannot read the file: No such file or "
				  "directory" },
		{ CONFIG_FIXTURES, -EISDIR,
		  CONFIG_FIXTURES ": cannot read the file: it is a directory, not a regular file" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct config_diag d = { 0 };
		struct config c;

		print_message("case %s\n", cases[i].file);
		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_load_file(&c, cases[i].file, &d), cases[i].ret);
		assert_one_error(&d, cases[i].want);
		assert_int_equal(d.n_warnings, 0);
		assert_null(c.config_file);
		/* Without a diag the result is the same. */
		assert_int_equal(config_load_file(&c, cases[i].file, NULL), cases[i].ret);
		config_diag_release(&d);
		config_release(&c);
	}
}

/*
 * A FIFO (or socket, or device) at the config path is refused at once, never read: opening it
 * blocked the daemon's only thread at start and on SIGHUP (issue 7 item 7). alarm() turns a hang
 * into a failure instead of a test timeout.
 */
static void test_not_regular_file(void **state)
{
	char dir[] = "/tmp/test-config-XXXXXX", fifo[64], *envp[2] = { NULL, NULL }, *env = NULL;
	struct config_diag d = { 0 };
	struct config c, saved;
	char *s;

	assert_non_null(mkdtemp(dir));
	(void)snprintf(fifo, sizeof(fifo), "%s/config.yaml", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(10);
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, fifo, &d), -EINVAL);
	assert_int_equal(d.n_errors, 1);
	s = fmt_error(&d.errors[0]);
	assert_non_null(strstr(s, fifo));
	assert_non_null(strstr(s, "cannot read the file: it is a FIFO, not a regular file"));
	free(s);
	config_diag_release(&d);

	/* The whole build, as at start and on SIGHUP: refused, and the old config kept. */
	assert_int_equal(config_load_file(&c, FX("full-nvidia.yaml"), NULL), 0);
	assert_int_equal(config_copy(&saved, &c), 0);
	assert_true(asprintf(&env, "CONFIG_FILE=%s", fifo) > 0);
	envp[0] = env;
	assert_int_equal(config_build(&c, envp, NULL, 0, &d), -EINVAL);
	assert_true(config_equal(&c, &saved));
	assert_int_equal(d.n_errors, 1);
	assert_string_equal(d.errors[0].file, fifo);
	config_diag_release(&d);

	/* /dev/null stays "no config" (NVIDIA's config-manager uses it). */
	assert_int_equal(config_load_file(&c, "/dev/null", &d), 0);
	assert_int_equal(d.n_errors, 0);
	alarm(0);
	free(env);
	config_release(&saved);
	config_release(&c);
	(void)unlink(fifo);
	(void)rmdir(dir);
}

/* A socket path longer than sun_path can never be served: refused at validation (item 1). */
static void test_socket_path_limit(void **state)
{
	char dir[128], sock[160], want[512];
	struct config_diag d = { 0 };
	struct config c;
	char *s;

	/* dir + "/nvidia-gpu.sock" (16 bytes) exactly 107 bytes: accepted. */
	memset(dir, 'd', sizeof(dir));
	dir[0] = '/';
	dir[107 - 16] = 0;
	{
		const struct config_flag flags[] = { { "device-plugin-path", dir } };

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_build(&c, (char *[]){ NULL }, flags, 1, &d), 0);
		assert_int_equal(d.n_errors, 0);
		config_release(&c);
	}
	/* One byte more: refused, naming the key, the path, its length and the limit. */
	dir[107 - 16] = 'd';
	dir[107 - 15] = 0;
	{
		const struct config_flag flags[] = { { "device-plugin-path", dir } };

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_build(&c, (char *[]){ NULL }, flags, 1, &d), -EINVAL);
		assert_int_equal(d.n_errors, 1);
		assert_string_equal(d.errors[0].key, "edgegpu.devicePluginPath");
		assert_null(d.errors[0].file);
		s = fmt_error(&d.errors[0]);
		(void)snprintf(
			want, sizeof(want),
			"edgegpu.devicePluginPath: the plugin socket of nvidia.com/gpu "
			"\"%s/nvidia-gpu.sock\" is 108 bytes, longer than the 107 a unix socket "
			"path can hold (sun_path); set a shorter edgegpu.devicePluginPath "
			"(--device-plugin-path, DEVICE_PLUGIN_PATH)",
			dir);
		assert_string_equal(s, want);
		free(s);
		config_diag_release(&d);
		config_release(&c);
	}
	/* A longer resource name from the file decides: the rename's socket is the longest. */
	dir[107 - 30] = 0;
	{
		assert_int_equal(config_init(&c), 0);
		assert_int_equal(
			load_str(&c,
				 "sharing: {timeSlicing: {resources: [{name: gpu, replicas: "
				 "2, rename: a-rather-long-shared-name}]}}\n",
				 &d),
			0);
		assert_int_equal(config_set_flag(&c, "device-plugin-path", dir, &d), 0);
		assert_int_equal(config_validate(&c, &d), -EINVAL);
		assert_int_equal(d.n_errors, 1);
		assert_non_null(strstr(d.errors[0].message,
				       "plugin socket of nvidia.com/a-rather-long-shared-name"));
		assert_null(c.kubelet_socket); /* unchanged on failure */
		config_diag_release(&d);
		config_release(&c);
	}
	/* The kubelet socket, by its own key. */
	memset(sock, 'k', sizeof(sock));
	sock[0] = '/';
	sock[120] = 0;
	{
		const struct config_flag flags[] = { { "kubelet-socket", sock } };

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_build(&c, (char *[]){ NULL }, flags, 1, &d), -EINVAL);
		assert_int_equal(d.n_errors, 1);
		assert_string_equal(d.errors[0].key, "edgegpu.kubeletSocket");
		assert_non_null(strstr(d.errors[0].message, "is 120 bytes, longer than the 107"));
		config_diag_release(&d);
		config_release(&c);
	}
	/* "" (do not register) is never too long. */
	{
		const struct config_flag flags[] = { { "kubelet-socket", "" } };

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_build(&c, (char *[]){ NULL }, flags, 1, &d), 0);
		config_release(&c);
	}
}

static void test_warning_at_default(void **state)
{
	struct config_diag d = { 0 };
	struct config c;
	char *s;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("warn-gds-default.yaml"), &d), 0);
	assert_int_equal(d.n_errors, 0);
	assert_int_equal(d.n_warnings, 1);
	s = fmt_error(&d.warnings[0]);
	assert_string_equal(
		s, FX("warn-gds-default.yaml") ":3:15: flags.gdsEnabled: is not "
					       "supported by edgegpu and is ignored (it is "
					       "set to its default)");
	free(s);
	assert_string_equal(d.warnings[0].file, FX("warn-gds-default.yaml"));
	assert_int_equal(d.warnings[0].line, 3);
	assert_int_equal(d.warnings[0].column, 15);
	assert_string_equal(d.warnings[0].key, "flags.gdsEnabled");
	config_diag_release(&d);
	config_release(&c);
}

static void test_more_errors(void **state)
{
	expect_error("version: v1\nflags:\n  failOnInitError: true\n  failOnInitError: false\n",
		     "t.yaml:4:3: flags.failOnInitError: duplicate key");
	expect_error("version: v2\n", "t.yaml:1:10: version: unknown version \"v2\", expected v1");
	expect_error("- a\n", "t.yaml:1:1: expected a mapping, got a list");
	expect_error("flags: true\n", "t.yaml:1:8: flags: expected a mapping, got \"true\"");
	expect_error("flag:\n  migStrategy: none\n",
		     "t.yaml:1:1: flag: unknown key, did you mean \"flags\"?");
	expect_error("edgegpu:\n  bogus: 1\n", "t.yaml:2:3: edgegpu.bogus: unknown key");
	expect_error("? [a]\n: b\n", "t.yaml:1:3: keys must be strings, got a list");
	expect_error("version: v1\n---\nflags: {}\n",
		     "t.yaml:3:1: more than one YAML document; edgegpu reads one");
	expect_error("version: \"v1\xff\"\n",
		     "t.yaml:1:13: invalid YAML: invalid leading UTF-8 octet");
	expect_error("sharing:\n  timeSlicing:\n    renameByDefault: true\n",
		     "t.yaml:3:5: sharing.timeSlicing.resources: no resources specified");
	expect_error("sharing:\n  timeSlicing:\n    resources: []\n",
		     "t.yaml:3:5: sharing.timeSlicing.resources: no resources specified");
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n",
		     "t.yaml:4:9: sharing.timeSlicing.resources[0].replicas: is required");
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - replicas: 2\n",
		     "t.yaml:4:9: sharing.timeSlicing.resources[0].name: is required");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		"devices: some}\n",
		"t.yaml:4:43: sharing.timeSlicing.resources[0].devices: expected \"all\", a count "
		"or a list of GPU indices or UUIDs, got \"some\"");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		"devices: 0}\n",
		"t.yaml:4:43: sharing.timeSlicing.resources[0].devices: a count of devices must "
		"be between 1 and 1024, got 0");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		"devices: [\"0:1\"]}\n",
		"t.yaml:4:44: sharing.timeSlicing.resources[0].devices[0]: MIG devices are not "
		"supported by edgegpu yet, got \"0:1\"");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		"devices: [gpu0]}\n",
		"t.yaml:4:44: sharing.timeSlicing.resources[0].devices[0]: expected a GPU index, "
		"a GPU UUID (\"GPU-...\") or the Tegra device ID \"tegra\" "
		"(edgegpu.tegra.deviceId), got \"gpu0\"");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: GPU_Big, replicas: 2}\n",
		"t.yaml:4:16: sharing.timeSlicing.resources[0].name: invalid resource name "
		"\"GPU_Big\": it must be at most 63 characters, and what follows \"nvidia.com/\" a "
		"DNS subdomain (lower-case letters, digits, '-' and '.')");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu-x, replicas: 2}\n",
		"t.yaml:4:16: sharing.timeSlicing.resources[0].name: \"nvidia.com/gpu-x\" is not "
		"a resource of this node (resources are nvidia.com/gpu and those in "
		"resources.gpus)");
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		     "devices: [0]}\n      - {name: gpu, replicas: 4, devices: [1, 0]}\n",
		     "t.yaml:5:43: sharing.timeSlicing.resources[1].devices: shares GPUs with "
		     "sharing.timeSlicing.resources[0], which time-slices the same resource");
	/* `all` beside another entry of the same resource names both (issue 7 item 5). */
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 4, "
		     "devices: [0]}\n      - {name: gpu, replicas: 2, devices: all}\n",
		     "t.yaml:5:43: sharing.timeSlicing.resources[1].devices: \"all\" takes every "
		     "GPU of \"nvidia.com/gpu\", but sharing.timeSlicing.resources[0].devices "
		     "(t.yaml:4:43) time-slices some of them too; list the GPUs of each entry "
		     "instead");
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		     "rename: gpu.two}\n      - {name: gpu, replicas: 4, devices: 1}\n",
		     "t.yaml:4:9: sharing.timeSlicing.resources[0].devices: \"all\" takes every "
		     "GPU of \"nvidia.com/gpu\", but sharing.timeSlicing.resources[1].devices "
		     "(t.yaml:5:43) time-slices some of them too; list the GPUs of each entry "
		     "instead");
	expect_error(
		"sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		"rename: gpumem, devices: [0]}\nedgegpu: {sharing: {memory: {devices: [1]}}}\n",
		"t.yaml:4:42: sharing.timeSlicing.resources[0].rename: \"nvidia.com/gpumem\" is "
		"the edgegpu.sharing.memory resource");
	expect_error("sharing:\n  timeSlicing:\n    resources:\n      - {name: gpu, replicas: 2, "
		     "devices: 2}\nedgegpu: {sharing: {memory: {devices: [1]}}}\n",
		     "t.yaml:5:40: edgegpu.sharing.memory.devices[0]: GPU 1 is also time-sliced by "
		     "sharing.timeSlicing.resources[0]; a GPU can be in only one of the two");
	expect_error(
		"edgegpu: {sharing: {memory: {devices: [0], resourceName: gpu}}}\n",
		"t.yaml:1:58: edgegpu.sharing.memory.resourceName: \"nvidia.com/gpu\" is already "
		"a whole-GPU resource");
	expect_error("edgegpu: {sharing: {memory: {devices: [0, \"0\"]}}}\n",
		     "t.yaml:1:43: edgegpu.sharing.memory.devices[1]: GPU 0 is listed twice");
	expect_error(
		"edgegpu: {sharing: {memory: {devices: all}}}\n",
		"t.yaml:1:39: edgegpu.sharing.memory.devices: expected a list of GPU indices or "
		"UUIDs, got \"all\"");
	expect_error(
		"edgegpu: {sharing: {memory: {onSplit: maybe}}}\n",
		"t.yaml:1:39: edgegpu.sharing.memory.onSplit: invalid value \"maybe\", expected "
		"one of: reject, allow");
	expect_error("resources:\n  mig:\n    - {pattern: \"*\", name: mig}\n",
		     "t.yaml:3:5: resources.mig: MIG is not supported by edgegpu yet");
	expect_error("resources:\n  gpus:\n    - {name: gpu}\n",
		     "t.yaml:3:7: resources.gpus[0].pattern: is required");
	expect_error("resources:\n  gpus:\n    - {pattern: \"\", name: gpu}\n",
		     "t.yaml:3:17: resources.gpus[0].pattern: must not be empty");
	expect_error("flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n",
		     "t.yaml:3:36: flags.plugin.sharedDevicesAllocationPolicy: only the "
		     "\"distributed\" policy is supported by edgegpu");
	expect_error(
		"flags:\n  deviceDiscoveryStrategy: gpu\n",
		"t.yaml:2:28: flags.deviceDiscoveryStrategy: invalid value \"gpu\", expected one "
		"of: auto, nvml, tegra");
	expect_error("imex:\n  channelIDs: [0]\n",
		     "t.yaml:2:15: imex.channelIDs: is not supported by edgegpu; only the default, "
		     "[], is accepted");
	expect_error("flags:\n  gfd:\n    sleepInterval: 30s\n",
		     "t.yaml:3:20: flags.gfd.sleepInterval: is not supported by edgegpu; only the "
		     "default, 1m, is accepted");
	expect_error(
		"flags:\n  plugin:\n    nvidiaCTKPath: /opt/nvidia-ctk\n",
		"t.yaml:3:20: flags.plugin.nvidiaCTKPath: is not supported by edgegpu; only the "
		"default, \"/usr/bin/nvidia-ctk\", is accepted");
}

/* Limits of our own on the YAML tree. */
static void test_yaml_limits(void **state)
{
	struct config_diag d = { 0 };
	struct buf b = { 0 };
	struct config c;
	char deep[200];

	memset(deep, '[', 100);
	memset(deep + 100, ']', 99);
	deep[199] = 0;
	expect_error(deep, "t.yaml:1:65: nested deeper than 64 levels");
	expect_error("version: *v\n",
		     "t.yaml:1:10: invalid YAML: alias *v names no anchor before it");
	/* An anchor counts from the end of its node: nothing contains itself. */
	expect_error("flags: &f {plugin: *f}\n",
		     "t.yaml:1:20: invalid YAML: alias *f names no anchor before it");

	assert_int_equal(buf_printf(&b, "edgegpu:\n  health:\n    ignoredXids:\n"), 0);
	for (int i = 0; i < 70000; i++)
		assert_int_equal(buf_printf(&b, "      - 0\n"), 0);
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_buffer(&c, "t.yaml", (char *)b.data, b.len, &d), -EINVAL);
	assert_int_equal(d.n_errors, 1);
	assert_null(d.errors[0].key);
	assert_string_equal(d.errors[0].message, "the document has more than 65536 YAML nodes");
	config_diag_release(&d);
	config_release(&c);
	buf_release(&b);
}

static void test_more_warnings(void **state)
{
	struct config_diag d = { 0 };
	struct config c;

	assert_int_equal(config_init(&c), 0);
	/* NVIDIA's Duration also takes nanoseconds; empty `mig` and `mps` are harmless. */
	assert_int_equal(load_str(&c,
				  "flags: {gfd: {sleepInterval: 60000000000}}\nresources: {mig: "
				  "[]}\nsharing: {mps: {}}\n",
				  &d),
			 0);
	assert_int_equal(d.n_errors, 0);
	assert_int_equal(d.n_warnings, 3);
	assert_string_equal(d.warnings[0].key, "flags.gfd.sleepInterval");
	assert_string_equal(d.warnings[1].key, "resources.mig");
	assert_string_equal(d.warnings[2].key, "sharing.mps");
	config_diag_release(&d);
	config_release(&c);
}

static void test_error_cap(void **state)
{
	struct config_diag d = { 0 };
	struct buf b = { 0 };
	struct config c;

	assert_int_equal(buf_printf(&b, "edgegpu:\n"), 0);
	for (int i = 0; i < 500; i++)
		assert_int_equal(buf_printf(&b, "  unknown%d: 1\n", i), 0);
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_buffer(&c, "t.yaml", (char *)b.data, b.len, &d), -EINVAL);
	assert_int_equal(d.n_errors, CONFIG_ERRORS_MAX);
	assert_string_equal(d.errors[CONFIG_ERRORS_MAX - 1].key, "edgegpu.unknown63");
	config_diag_release(&d);
	config_release(&c);
	buf_release(&b);
}

static void test_oversized(void **state)
{
	struct config_diag d = { 0 };
	char *dir = unit_tmpdir_dup("test-config"), *path = path_join(dir, "big.yaml"), *data;
	struct config c;
	char *s;

	assert_non_null(path);
	data = malloc(CONFIG_FILE_MAX + 1);
	assert_non_null(data);
	/* Exactly the limit, comments only: fine. */
	memset(data, '#', CONFIG_FILE_MAX);
	data[CONFIG_FILE_MAX - 1] = '\n';
	assert_int_equal(file_write_atomic(path, data, CONFIG_FILE_MAX, 0644, NULL), 0);
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, path, &d), 0);
	assert_int_equal(d.n_errors, 0);
	/* One byte more: refused, before parsing. */
	memset(data, '#', CONFIG_FILE_MAX + 1);
	assert_int_equal(file_write_atomic(path, data, CONFIG_FILE_MAX + 1, 0644, NULL), 0);
	assert_int_equal(config_load_file(&c, path, &d), -EFBIG);
	assert_int_equal(d.n_errors, 1);
	s = fmt_error(&d.errors[0]);
	assert_true(strncmp(s, path, strlen(path)) == 0);
	assert_string_equal(s + strlen(path), ": the file is larger than 1048576 bytes");
	free(s);
	assert_int_equal(config_load_buffer(&c, "mem", data, CONFIG_FILE_MAX + 1, NULL), -EFBIG);
	config_diag_release(&d);
	config_release(&c);
	free(data);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	free(path);
	free(dir);
}

static char *write_temp_config(char *dir, const char *text)
{
	char *path = path_join(dir, "config.yaml");

	assert_non_null(path);
	assert_int_equal(file_write_atomic(path, text, strlen(text), 0644, NULL), 0);
	return path;
}

static const char prec_yaml[] = "flags:\n"
				"  failOnInitError: false\n"
				"  nvidiaDriverRoot: /file-root\n"
				"  plugin:\n"
				"    passDeviceSpecs: true\n"
				"    deviceListStrategy: volume-mounts\n"
				"    deviceIDStrategy: index\n"
				"edgegpu:\n"
				"  logLevel: warn\n"
				"  devicePluginPath: /file-dp\n";

static void check_precedence(const struct config *c)
{
	assert_false(c->fail_on_init_error);				/* file */
	assert_true(c->pass_device_specs);				/* file */
	assert_int_equal(c->device_list_strategy, CONFIG_DLS_ENVVAR);	/* flag over env, file */
	assert_int_equal(c->device_id_strategy, CONFIG_DEVICE_ID_UUID); /* env over file */
	assert_string_equal(c->driver_root, "/flag-root");		/* flag over env, file */
	assert_string_equal(c->dev_root, "/flag-root");		/* follows the driver root */
	assert_int_equal(c->log_level, LOG_LEVEL_ERROR);	/* env over file */
	assert_string_equal(c->device_plugin_path, "/file-dp"); /* file */
	assert_string_equal(c->kubelet_socket, "/file-dp/kubelet.sock");
	assert_string_equal(c->cdi_spec_dir, "/var/run/cdi"); /* default */
}

static void test_precedence(void **state)
{
	char *dir = unit_tmpdir_dup("test-config"), *path = write_temp_config(dir, prec_yaml),
	     *env_cf = NULL;
	struct config_diag d = { 0 };
	struct config c;

	assert_true(asprintf(&env_cf, "CONFIG_FILE=%s", path) > 0);
	{
		char *const envp[] = { "DEVICE_ID_STRATEGY=uuid",
				       "DEVICE_LIST_STRATEGY=cdi-annotations, cdi-cri",
				       "NVIDIA_DRIVER_ROOT=/env-root",
				       "EDGEGPU_LOG_LEVEL=error",
				       "UNRELATED=1",
				       env_cf,
				       NULL };
		const struct config_flag flags[] = {
			{ "--device-list-strategy", "envvar" },
			{ "driver-root", "/flag-root" },
		};

		/* Step by step. */
		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_load_file(&c, path, &d), 0);
		assert_int_equal(c.device_list_strategy, CONFIG_DLS_VOLUME_MOUNTS);
		assert_int_equal(config_apply_env(&c, envp, &d), 0);
		assert_int_equal(c.device_list_strategy,
				 CONFIG_DLS_CDI_ANNOTATIONS | CONFIG_DLS_CDI_CRI);
		assert_string_equal(c.driver_root, "/env-root");
		for (size_t i = 0; i < ELEMENTSOF(flags); i++)
			assert_int_equal(config_set_flag(&c, flags[i].name, flags[i].value, &d), 0);
		assert_int_equal(config_validate(&c, &d), 0);
		assert_int_equal(d.n_errors + d.n_warnings, 0);
		check_precedence(&c);
		config_release(&c);

		/* All at once, the file named by CONFIG_FILE. */
		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_build(&c, envp, flags, ELEMENTSOF(flags), &d), 0);
		assert_int_equal(d.n_errors + d.n_warnings, 0);
		check_precedence(&c);
		assert_string_equal(c.config_file, path);
		config_release(&c);

		/* --config-file wins over CONFIG_FILE; "" means no file at all. */
		{
			const struct config_flag none[] = { { "config-file", "" } };

			assert_int_equal(config_init(&c), 0);
			assert_int_equal(config_build(&c, envp, none, 1, &d), 0);
			assert_null(c.config_file);
			assert_true(c.fail_on_init_error);
			assert_string_equal(c.driver_root, "/env-root");
			assert_string_equal(c.kubelet_socket,
					    "/var/lib/kubelet/device-plugins/kubelet.sock");
			config_release(&c);
		}
	}
	config_diag_release(&d);
	free(env_cf);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	free(path);
	free(dir);
}

static void test_env(void **state)
{
	struct config_diag d = { 0 };
	struct config c;
	char *s;

	{
		char *const envp[] = {
			"FAIL_ON_INIT_ERROR=", /* urfave/cli: "" is false */
			"PASS_DEVICE_SPECS=T",
			"MIG_STRATEGY=none",
			"NVIDIA_DEV_ROOT=/dev-root",
			"NVIDIA_CTK_PATH=/elsewhere/nvidia-ctk",
			"NVIDIA_CDI_HOOK_PATH=/usr/bin/nvidia-ctk", /* first name wins */
			"CONTAINER_DRIVER_ROOT=/ctr",
			"DEVICE_PLUGIN_PATH=/dp",
			"NVML_LIB=/lib/libnvidia-ml.so.1",
			"KUBELET_SOCKET=", /* do not register */
			"POD_RESOURCES_SOCKET=/pr.sock",
			"CDI_SPEC_DIR=/cdi",
			"DP_DISABLE_HEALTHCHECKS=xids",
			"GDS_ENABLED=false",
			"MPS_ROOT=/run/nvidia/mps",
			"IMEX_CHANNEL_IDS=",
			NULL
		};

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_apply_env(&c, envp, &d), 0);
		assert_int_equal(d.n_errors, 0);
		assert_false(c.fail_on_init_error);
		assert_true(c.pass_device_specs);
		assert_string_equal(c.dev_root, "/dev-root");
		assert_string_equal(c.container_driver_root, "/ctr");
		assert_string_equal(c.device_plugin_path, "/dp");
		assert_string_equal(c.nvml_lib, "/lib/libnvidia-ml.so.1");
		assert_string_equal(c.kubelet_socket, "");
		assert_string_equal(c.pod_resources_socket, "/pr.sock");
		assert_string_equal(c.cdi_spec_dir, "/cdi");
		assert_string_equal(c.health.disable_healthchecks, "xids");
		/* Warnings for the NVIDIA settings we do not act on, named by the variable. */
		assert_int_equal(d.n_warnings, 4);
		s = fmt_error(&d.warnings[0]);
		assert_string_equal(s, "MPS_ROOT: is ignored: MPS is not supported by edgegpu");
		free(s);
		assert_string_equal(d.warnings[1].key, "GDS_ENABLED");
		assert_string_equal(d.warnings[2].key, "NVIDIA_CDI_HOOK_PATH");
		assert_string_equal(d.warnings[3].key, "IMEX_CHANNEL_IDS");
		assert_null(d.warnings[3].file);
		assert_int_equal(config_validate(&c, &d), 0);
		assert_string_equal(c.kubelet_socket, "");
		assert_string_equal(c.dev_root, "/dev-root");
		config_diag_release(&d);
		config_release(&c);
	}
	{
		char *const envp[] = { "DEVICE_ID_STRATEGY=gpu",
				       "PASS_DEVICE_SPECS=yes",
				       "MIG_STRATEGY=single",
				       "DEVICE_LIST_STRATEGY=envvar,",
				       "CDI_ANNOTATION_PREFIX=example.com/",
				       NULL };
		static const char *const want[] = {
			"MIG_STRATEGY: MIG is not supported by edgegpu yet; only \"none\" is accepted",
			"PASS_DEVICE_SPECS: expected true or false, got \"yes\"",
			"DEVICE_LIST_STRATEGY: invalid value \"\", expected one of: envvar, "
			"volume-mounts, cdi-annotations, cdi-cri",
			"DEVICE_ID_STRATEGY: invalid value \"gpu\", expected one of: uuid, index",
			"CDI_ANNOTATION_PREFIX: is not supported by edgegpu; only the default, "
			"\"cdi.k8s.io/\", is accepted",
		};
		struct config before;

		assert_int_equal(config_init(&c), 0);
		assert_int_equal(config_copy(&before, &c), 0);
		assert_int_equal(config_apply_env(&c, envp, &d), -EINVAL);
		assert_int_equal(d.n_errors, ELEMENTSOF(want));
		for (size_t i = 0; i < ELEMENTSOF(want); i++) {
			s = fmt_error(&d.errors[i]);
			assert_string_equal(s, want[i]);
			free(s);
		}
		assert_true(config_equal(&c, &before));
		config_diag_release(&d);
		config_release(&before);
		config_release(&c);
	}
}

static void test_flags(void **state)
{
	struct config_diag d = { 0 };
	struct config c;
	bool is_bool = false;
	char *s;

	assert_true(config_flag_lookup("pass-device-specs", &is_bool));
	assert_true(is_bool);
	assert_true(config_flag_lookup("--device-list-strategy", &is_bool));
	assert_false(is_bool);
	assert_true(config_flag_lookup("nvidia-driver-root", NULL));
	assert_true(config_flag_lookup("container-driver-root", NULL));
	assert_true(config_flag_lookup("config-file", NULL));
	assert_true(config_flag_lookup("--gds-enabled", &is_bool));
	assert_true(is_bool);
	assert_false(config_flag_lookup("no-such-flag", NULL));

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_set_flag(&c, "--pass-device-specs", NULL, &d), 0);
	assert_true(c.pass_device_specs);
	assert_int_equal(config_set_flag(&c, "pass-device-specs", "false", &d), 0);
	assert_false(c.pass_device_specs);
	assert_int_equal(config_set_flag(&c, "fail-on-init-error", "0", &d), 0);
	assert_false(c.fail_on_init_error);
	/* GFD's --no-timestamp, bare and with a value; GFD_NO_TIMESTAMP from the environment. */
	assert_false(c.labels.no_timestamp);
	assert_int_equal(config_set_flag(&c, "--no-timestamp", NULL, &d), 0);
	assert_true(c.labels.no_timestamp);
	assert_int_equal(config_set_flag(&c, "no-timestamp", "false", &d), 0);
	assert_false(c.labels.no_timestamp);
	assert_int_equal(config_set_flag(&c, "no-timestamp", "sometimes", &d), -EINVAL);
	assert_false(c.labels.no_timestamp);
	assert_int_equal(d.n_errors, 1);
	config_diag_release(&d);
	d = (struct config_diag){ 0 };
	{
		char *const envp[] = { "GFD_NO_TIMESTAMP=true", NULL };

		assert_int_equal(config_apply_env(&c, envp, &d), 0);
		assert_true(c.labels.no_timestamp);
		c.labels.no_timestamp = false;
	}
	assert_int_equal(config_set_flag(&c, "nvidia-dev-root", "/d", &d), 0);
	assert_string_equal(c.dev_root, "/d");
	assert_int_equal(config_set_flag(&c, "device-id-strategy", "index", &d), 0);
	assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_INDEX);
	assert_int_equal(config_set_flag(&c, "device-list-strategy", "volume-mounts,envvar", &d),
			 0);
	assert_int_equal(c.device_list_strategy, CONFIG_DLS_ENVVAR | CONFIG_DLS_VOLUME_MOUNTS);
	assert_int_equal(config_set_flag(&c, "kubelet-socket", "", &d), 0);
	assert_string_equal(c.kubelet_socket, "");
	assert_int_equal(config_set_flag(&c, "rediscover-interval", "90s", &d), 0);
	assert_int_equal(c.rediscover_interval, 90 * USEC_PER_SEC);
	assert_int_equal(config_set_flag(&c, "log-level", "debug", &d), 0);
	assert_int_equal(c.log_level, LOG_LEVEL_DEBUG);
	assert_int_equal(d.n_errors + d.n_warnings, 0);

	assert_int_equal(config_set_flag(&c, "--frobnicate", "1", &d), -ENOENT);
	assert_int_equal(config_set_flag(&c, "device-id-strategy", NULL, &d), -EINVAL);
	assert_int_equal(config_set_flag(&c, "pass-device-specs", "", &d), -EINVAL);
	assert_int_equal(config_set_flag(&c, "gds-enabled", NULL, &d), -EINVAL);
	assert_int_equal(config_set_flag(&c, "mig-strategy", "mixed", &d), -EINVAL);
	assert_int_equal(d.n_errors, 5);
	s = fmt_error(&d.errors[0]);
	assert_string_equal(s, "--frobnicate: unknown flag");
	free(s);
	s = fmt_error(&d.errors[1]);
	assert_string_equal(s, "--device-id-strategy: needs a value");
	free(s);
	s = fmt_error(&d.errors[3]);
	assert_string_equal(s, "--gds-enabled: is not supported by edgegpu; only the default, "
			       "false, is accepted");
	free(s);
	/* Failed flags changed nothing. */
	assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_INDEX);
	assert_false(c.pass_device_specs);
	assert_int_equal(c.mig_strategy, CONFIG_MIG_NONE);
	config_diag_release(&d);
	config_release(&c);
}

static void check_round_trip(const char *path)
{
	struct config_diag d = { 0 };
	struct buf b1 = { 0 }, b2 = { 0 };
	struct config c, again;

	print_message("round trip %s\n", path);
	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, path, NULL), 0);
	assert_int_equal(config_validate(&c, NULL), 0);
	assert_int_equal(config_dump(&c, &b1), 0);

	assert_int_equal(config_init(&again), 0);
	assert_int_equal(config_load_buffer(&again, path, (char *)b1.data, b1.len, &d), 0);
	/* The dump leaves out what we do not act on, so it loads without a warning. */
	assert_int_equal(d.n_errors + d.n_warnings, 0);
	assert_int_equal(config_validate(&again, &d), 0);
	assert_true(config_equal(&c, &again));
	assert_int_equal(config_dump(&again, &b2), 0);
	assert_int_equal(b1.len, b2.len);
	assert_memory_equal(b1.data, b2.data, b1.len);
	buf_release(&b1);
	buf_release(&b2);
	config_release(&again);
	config_release(&c);
}

static void test_dump_round_trip(void **state)
{
	static const char *const files[] = {
		FX("full-nvidia.yaml"), FX("timeslicing.yaml"), FX("gpumem.yaml"),
		FX("edgegpu.yaml"),	FX("example.yaml"),	FX("empty.yaml"),
	};
	struct config c, other;
	struct buf b = { 0 };

	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		check_round_trip(files[i]);

	/* Odd strings survive quoting; a duration prints as Go would read it. */
	load_ok(&c, "flags: {nvidiaDriverRoot: \"/a \\\"b\\\"\\\\c\\td\\x01\"}\n"
		    "edgegpu: {health: {pollInterval: 1h0m1.25s}, kubeletSocket: \"\"}\n");
	assert_int_equal(config_dump(&c, &b), 0);
	assert_non_null(
		strstr((char *)b.data, "nvidiaDriverRoot: \"/a \\\"b\\\"\\\\c\\x09d\\x01\"\n"));
	assert_non_null(strstr((char *)b.data, "pollInterval: \"1h1.25s\"\n"));
	assert_non_null(strstr((char *)b.data, "kubeletSocket: \"\"\n"));
	load_ok(&other, (char *)b.data);
	assert_true(config_equal(&c, &other));
	config_release(&other);
	config_release(&c);
	buf_release(&b);

	/* config_equal sees every kind of difference. */
	load_ok(&c, "edgegpu: {health: {ignoredXids: [1]}}\n");
	load_ok(&other, "edgegpu: {health: {ignoredXids: [2]}}\n");
	assert_false(config_equal(&c, &other));
	config_release(&other);
	load_ok(&other, "edgegpu: {health: {ignoredXids: [1]}}\n");
	assert_true(config_equal(&c, &other));
	config_release(&other);
	load_ok(&other,
		"edgegpu: {health: {ignoredXids: [1]}, sharing: {memory: {devices: [0]}}}\n");
	assert_false(config_equal(&c, &other));
	config_release(&other);
	load_ok(&other, "edgegpu: {health: {ignoredXids: [1]}}\nresources: {gpus: [{pattern: x, "
			"name: y}]}\n");
	assert_false(config_equal(&c, &other));
	config_release(&other);
	config_release(&c);
}

/* What a reload must keep: the same settings at the same addresses. */
/* What a SIGHUP cannot apply: the NVML library and the driver roots (docs/config.md). */
static void test_restart_needed(void **state)
{
	const char *keys[4] = { NULL };
	struct config a, b;

	load_ok(&a, "version: v1\n");
	assert_int_equal(config_validate(&a, NULL), 0);
	assert_int_equal(config_copy(&b, &a), 0);
	assert_int_equal(config_restart_needed(&a, &b, keys, ELEMENTSOF(keys)), 0);
	/* Settings that apply on SIGHUP do not count. */
	assert_int_equal(config_set_flag(&b, "device-plugin-path", "/elsewhere", NULL), 0);
	assert_int_equal(config_set_flag(&b, "kubelet-socket", "/elsewhere/kubelet.sock", NULL), 0);
	assert_int_equal(config_set_flag(&b, "pod-resources-socket", "/x.sock", NULL), 0);
	assert_int_equal(config_set_flag(&b, "dev-root", "/dev-root", NULL), 0);
	assert_int_equal(config_restart_needed(&a, &b, keys, ELEMENTSOF(keys)), 0);
	/* Each of the three, in a fixed order; NULL (unset) to a value counts. */
	assert_int_equal(config_set_flag(&b, "nvml-lib", "/lib/libnvidia-ml.so.1", NULL), 0);
	assert_int_equal(config_set_flag(&b, "driver-root", "/run/nvidia/driver", NULL), 0);
	assert_int_equal(config_set_flag(&b, "container-driver-root", "/host", NULL), 0);
	assert_int_equal(config_restart_needed(&a, &b, keys, ELEMENTSOF(keys)), 3);
	assert_string_equal(keys[0], "flags.nvidiaDriverRoot");
	assert_string_equal(keys[1], "flags.plugin.containerDriverRoot");
	assert_string_equal(keys[2], "edgegpu.nvmlLib");
	/* Room for one: the count is still all of them. */
	keys[1] = NULL;
	assert_int_equal(config_restart_needed(&a, &b, keys, 1), 3);
	assert_null(keys[1]);
	assert_int_equal(config_restart_needed(&a, &b, NULL, 0), 3);
	config_release(&a);
	config_release(&b);
}

static void test_failed_load_keeps_old(void **state)
{
	static const char *const bad[] = {
		FX("bad-syntax.yaml"),	FX("bad-unknown-key.yaml"), FX("bad-type.yaml"),
		FX("bad-enum.yaml"),	FX("bad-replicas.yaml"),    FX("bad-mig.yaml"),
		FX("bad-mps.yaml"),	FX("bad-gds.yaml"),	    FX("bad-unit.yaml"),
		FX("bad-overlap.yaml"), FX("no-such-file.yaml"),    CONFIG_FIXTURES,
	};
	struct config c, saved;
	const char *driver_root, *ts_name;
	const struct config_ts_resource *ts;

	assert_int_equal(config_init(&c), 0);
	assert_int_equal(config_load_file(&c, FX("full-nvidia.yaml"), NULL), 0);
	assert_int_equal(config_copy(&saved, &c), 0);
	assert_true(config_equal(&c, &saved));
	driver_root = c.driver_root;
	ts = c.time_slicing.resources;
	ts_name = ts[0].name;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		assert_true(config_load_file(&c, bad[i], NULL) < 0);
		assert_true(config_equal(&c, &saved));
		assert_ptr_equal(c.driver_root, driver_root);
		assert_ptr_equal(c.time_slicing.resources, ts);
		assert_ptr_equal(c.time_slicing.resources[0].name, ts_name);
		assert_string_equal(c.config_file, FX("full-nvidia.yaml"));
	}
	{
		char *const envp[] = { "MIG_STRATEGY=mixed", "PASS_DEVICE_SPECS=false", NULL };
		const struct config_flag flags[] = { { "config-file", FX("bad-replicas.yaml") } };

		assert_int_equal(config_apply_env(&c, envp, NULL), -EINVAL);
		assert_true(config_equal(&c, &saved));
		assert_int_equal(config_set_flag(&c, "device-id-strategy", "serial", NULL),
				 -EINVAL);
		assert_true(config_equal(&c, &saved));
		assert_int_equal(config_build(&c, envp, flags, 1, NULL), -EINVAL);
		assert_true(config_equal(&c, &saved));
		assert_ptr_equal(c.driver_root, driver_root);
	}
	/* A good file does replace it. */
	assert_int_equal(config_load_file(&c, FX("timeslicing.yaml"), NULL), 0);
	assert_false(config_equal(&c, &saved));
	config_release(&saved);
	config_release(&c);
}

/* The whole start-up path, every allocation failed once in turn. */
static int pipeline(struct config *c, const char *file, struct config_diag *d, bool *ret_built)
{
	char *cf = NULL;
	char *envp[] = { "DEVICE_LIST_STRATEGY=envvar,cdi-cri", "GDS_ENABLED=false", NULL, NULL };
	const struct config_flag flags[] = { { "pass-device-specs", NULL },
					     { "log-level", "debug" } };
	struct buf b = { 0 };
	int r;

	if (asprintf(&cf, "CONFIG_FILE=%s", file) < 0)
		return -ENOMEM;
	envp[2] = cf;
	r = config_build(c, envp, flags, ELEMENTSOF(flags), d);
	*ret_built = r >= 0;
	if (r >= 0)
		r = config_dump(c, &b);
	buf_release(&b);
	free(cf);
	return r;
}

static void test_oom(void **state)
{
	static const char *const files[] = {
		FX("full-nvidia.yaml"), FX("timeslicing.yaml"), FX("gpumem.yaml"),
		FX("edgegpu.yaml"),	FX("bad-overlap.yaml"), FX("bad-syntax.yaml"),
	};
	static const int want[] = { 0, 0, 0, 0, -EINVAL, -EINVAL };

	for (size_t f = 0; f < ELEMENTSOF(files); f++) {
		long n;

		for (n = 0;; n++) {
			struct config_diag d = { 0 };
			struct config c, saved;
			const char *root;
			bool built = false;
			int r;

			assert_int_equal(config_init(&c), 0);
			assert_int_equal(config_copy(&saved, &c), 0);
			root = c.driver_root;
			oom_fail_at(n);
			r = pipeline(&c, files[f], &d, &built);
			oom_off();
			config_diag_release(&d);
			if (r != -ENOMEM) {
				assert_int_equal(r, want[f]);
				config_release(&saved);
				config_release(&c);
				break;
			}
			/* A build that ran out of memory kept nothing half-built. */
			if (!built) {
				assert_true(config_equal(&c, &saved));
				assert_ptr_equal(c.driver_root, root);
			}
			config_release(&saved);
			config_release(&c);
		}
		print_message("%s: %ld allocations failed in turn\n", files[f], n);
		assert_true(n > 20);
	}
}

static void replay_file(const char *path)
{
	char *data = NULL;
	size_t len = 0;

	assert_int_equal(read_file(path, 4 * CONFIG_FILE_MAX, &data, &len), 0);
	assert_int_equal(LLVMFuzzerTestOneInput((const uint8_t *)data, len), 0);
	free(data);
}

static size_t replay_dir(const char *dir)
{
	struct dirent *e;
	size_t n = 0;
	DIR *dp = opendir(dir);

	assert_non_null(dp);
	while ((e = readdir(dp))) {
		char *path;

		if (e->d_name[0] == '.')
			continue;
		path = path_join(dir, e->d_name);
		assert_non_null(path);
		replay_file(path);
		free(path);
		n++;
	}
	closedir(dp);
	return n;
}

/* The fuzz target over its seed corpus and the fixtures, then over mangled fixtures. */
static void test_fuzz_corpus(void **state)
{
	static const char *const seeds[] = { FX("full-nvidia.yaml"), FX("timeslicing.yaml"),
					     FX("gpumem.yaml"), FX("edgegpu.yaml") };
	uint64_t rng = 0x9e3779b97f4a7c15ULL;

	assert_true(replay_dir(CONFIG_CORPUS) >= 20);
	assert_true(replay_dir(CONFIG_FIXTURES) >= 15);
	for (size_t s = 0; s < ELEMENTSOF(seeds); s++) {
		char *data = NULL;
		size_t len = 0;

		assert_int_equal(read_file(seeds[s], CONFIG_FILE_MAX, &data, &len), 0);
		for (int i = 0; i < 40; i++) {
			char *m = malloc(len + 1);

			assert_non_null(m);
			memcpy(m, data, len + 1);
			for (int k = 0; k < 4; k++) {
				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				m[rng % len] = (char)"\n :-[]{}\"'&*!#,0a\t\\?|>"[(rng >> 32) % 23];
			}
			assert_int_equal(LLVMFuzzerTestOneInput((const uint8_t *)m, len), 0);
			free(m);
		}
		free(data);
	}
}

/* Takes every argument of @argv (NULL-terminated) into @a; returns the first failure. */
static int take_all(struct config_args *a, char **argv, char **reterr)
{
	int argc = 0, r = 0;

	while (argv[argc])
		argc++;
	*reterr = NULL;
	for (int i = 1; i < argc && r == 0; i++)
		r = config_args_take(a, argc, argv, &i, reterr);
	return r;
}

/* The command line's config flags: the three forms, positional arguments, and every refusal. */
static void test_args(void **state)
{
	char *ok[] = { "x",
		       "--device-plugin-path",
		       "/dp",
		       "pos",
		       "--pass-device-specs",
		       "--nvml-lib=/l.so",
		       "--fail-on-init-error=false",
		       NULL };
	char *unknown[] = { "x", "--frobnicate", NULL };
	char *unknown_eq[] = { "x", "--frobnicate=1", NULL };
	char *no_value[] = { "x", "--nvml-lib", NULL };
	char *positional[] = { "x", "a", "b", "c", "d", "e", NULL };
	char long_flag[200] = "--", *too_long[] = { "x", long_flag, NULL };
	char *many[CONFIG_ARGS_MAX_FLAGS + 3] = { "x" };
	struct config_args a = { 0 };
	struct config c = { 0 };
	char *err = NULL;

	assert_int_equal(take_all(&a, ok, &err), 0);
	assert_null(err);
	assert_int_equal(a.n_flags, 4);
	assert_string_equal(a.flags[0].name, "device-plugin-path");
	assert_string_equal(a.flags[0].value, "/dp");
	assert_string_equal(a.flags[1].name, "pass-device-specs");
	assert_null(a.flags[1].value);
	assert_string_equal(a.flags[2].name, "nvml-lib");
	assert_string_equal(a.flags[2].value, "/l.so");
	assert_int_equal(a.n_positional, 1);
	assert_string_equal(a.positional[0], "pos");
	assert_int_equal(config_args_build(&a, (char *[]){ NULL }, &c, stderr), 0);
	assert_string_equal(c.device_plugin_path, "/dp");
	config_release(&c);
	config_args_release(&a);
	assert_int_equal(a.n_flags, 0);

	assert_int_equal(take_all(&a, unknown, &err), -EINVAL);
	assert_string_equal(err, "unknown flag '--frobnicate' (see 'edgegpu --help')");
	free(err);
	assert_int_equal(take_all(&a, unknown_eq, &err), -EINVAL);
	assert_string_equal(err, "unknown flag '--frobnicate' (see 'edgegpu --help')");
	free(err);
	assert_int_equal(take_all(&a, no_value, &err), -EINVAL);
	assert_string_equal(err, "flag '--nvml-lib' needs a value (see 'edgegpu --help')");
	free(err);
	/* A verb's own usage is where its errors point. */
	a.verb = "labels";
	assert_int_equal(take_all(&a, unknown, &err), -EINVAL);
	assert_string_equal(err, "unknown flag '--frobnicate' (see 'edgegpu labels --help')");
	free(err);
	assert_int_equal(take_all(&a, no_value, &err), -EINVAL);
	assert_string_equal(err, "flag '--nvml-lib' needs a value (see 'edgegpu labels --help')");
	free(err);
	a.verb = NULL;
	assert_int_equal(take_all(&a, positional, &err), -EINVAL);
	assert_string_equal(err, "unexpected argument 'e'");
	free(err);
	memset(long_flag + 2, 'f', 150);
	memcpy(long_flag + 152, "=1", 3);
	assert_int_equal(take_all(&a, too_long, &err), -EINVAL);
	assert_non_null(strstr(err, "unknown flag '--fff"));
	free(err);
	assert_int_equal(a.n_flags, 0);

	for (size_t i = 1; i <= CONFIG_ARGS_MAX_FLAGS + 1; i++)
		many[i] = "--pass-device-specs";
	assert_int_equal(take_all(&a, many, &err), -EINVAL);
	assert_string_equal(err, "too many flags");
	free(err);
	assert_int_equal(a.n_flags, CONFIG_ARGS_MAX_FLAGS);
	config_args_release(&a);

	/* Out of memory: refused, nothing leaked, what was taken kept for release. */
	a = (struct config_args){ 0 };
	oom_fail_at(0);
	assert_int_equal(take_all(&a, ok, &err), -ENOMEM);
	oom_off();
	assert_string_equal(err, "out of memory");
	free(err);
	assert_int_equal(a.n_flags, 0);
	config_args_release(&a);
}

/* edgegpu.sharing.memory.enforcement (issue 19): defaults, every key, and each bad value. */
static void test_enforcement(void **state)
{
	const struct config_enforcement *e;
	struct config c;

	load_ok(&c, "");
	e = &c.gpumem.enforcement;
	assert_true(e->interposer);
	assert_true(e->driver);
	assert_int_equal(e->preload, CONFIG_PRELOAD_LD_SO_PRELOAD);
	assert_int_equal(e->managed, CONFIG_MANAGED_COUNT);
	assert_string_equal(e->library, "/usr/lib/edgegpu/libedgegpu-cuda.so");
	assert_string_equal(e->state_dir, "/var/lib/edgegpu");
	assert_false(e->backstop.enabled);
	assert_int_equal(e->backstop.tolerance_percent, 110);
	assert_int_equal(e->backstop.after, 30 * USEC_PER_SEC);
	assert_int_equal(e->backstop.interval, 2 * USEC_PER_SEC);
	config_release(&c);

	load_ok(&c,
		"edgegpu:\n  sharing:\n    memory:\n      enforcement:\n"
		"        interposer: false\n        driver: false\n        preload: LD_PRELOAD\n"
		"        library: /opt/ipz.so\n        stateDir: /srv/edgegpu\n"
		"        managed: ignore\n        backstop: {enabled: true, "
		"tolerancePercent: 150, after: 5s, interval: 500ms}\n");
	e = &c.gpumem.enforcement;
	assert_false(e->interposer);
	assert_false(e->driver);
	assert_int_equal(e->preload, CONFIG_PRELOAD_ENV);
	assert_int_equal(e->managed, CONFIG_MANAGED_IGNORE);
	assert_string_equal(e->library, "/opt/ipz.so");
	assert_string_equal(e->state_dir, "/srv/edgegpu");
	assert_true(e->backstop.enabled);
	assert_int_equal(e->backstop.tolerance_percent, 150);
	assert_int_equal(e->backstop.after, 5 * USEC_PER_SEC);
	assert_int_equal(e->backstop.interval, 500 * USEC_PER_MSEC);
	config_release(&c);

#define ENF "edgegpu:\n  sharing:\n    memory:\n      enforcement:\n        "
	expect_error(ENF "preload: ld.so.preload\n",
		     "t.yaml:5:18: edgegpu.sharing.memory.enforcement.preload: "
		     "invalid value \"ld.so.preload\", expected one of: ldSoPreload, LD_PRELOAD");
	expect_error(ENF "managed: always\n",
		     "t.yaml:5:18: edgegpu.sharing.memory.enforcement.managed: "
		     "invalid value \"always\", expected one of: count, ignore");
	expect_error(ENF "driver: maybe\n",
		     "t.yaml:5:17: edgegpu.sharing.memory.enforcement.driver: "
		     "expected true or false, got \"maybe\"");
	expect_error(ENF "stateDir: \"\"\n",
		     "t.yaml:5:19: edgegpu.sharing.memory.enforcement.stateDir: must not be empty");
	expect_error(ENF "library: \"\"\n",
		     "t.yaml:5:18: edgegpu.sharing.memory.enforcement.library: must not be empty");
	expect_error(ENF "backstop: {tolerancePercent: 99}\n",
		     "t.yaml:5:38: edgegpu.sharing.memory.enforcement.backstop.tolerancePercent: "
		     "must be at least 100, got 99");
	expect_error(ENF "backstop: {after: 0s}\n",
		     "t.yaml:5:27: edgegpu.sharing.memory.enforcement.backstop.after: "
		     "must be at least 1s, got 0s");
	expect_error(ENF "backstop: {interval: 2m}\n",
		     "t.yaml:5:30: edgegpu.sharing.memory.enforcement.backstop.interval: "
		     "must be at most 1m, got 2m");
	expect_error(ENF "limit: 10\n",
		     "t.yaml:5:9: edgegpu.sharing.memory.enforcement.limit: unknown key");
#undef ENF
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_nvidia),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_time_slicing),
		cmocka_unit_test(test_gpumem),
		cmocka_unit_test(test_enforcement),
		cmocka_unit_test(test_edgegpu_section),
		cmocka_unit_test(test_metrics_section),
		cmocka_unit_test(test_yaml_types),
		cmocka_unit_test(test_error_kinds),
		cmocka_unit_test(test_warning_at_default),
		cmocka_unit_test(test_more_errors),
		cmocka_unit_test(test_tegra_keys),
		cmocka_unit_test(test_yaml_limits),
		cmocka_unit_test(test_more_warnings),
		cmocka_unit_test(test_error_cap),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_dump_round_trip),
		cmocka_unit_test(test_failed_load_keeps_old),
		cmocka_unit_test(test_oom),
		cmocka_unit_test(test_fuzz_corpus),
		cmocka_unit_test(test_not_regular_file),
		cmocka_unit_test(test_socket_path_limit),
		cmocka_unit_test(test_restart_needed),
		cmocka_unit_test(test_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
