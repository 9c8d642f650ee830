/*
 * labels: the GFD label set for hand-built GPUs and configs read from YAML (family of every
 * compute capability, product sanitising of hostile names, time-slicing, gpumem, versions, the
 * machine type from a fake sysfs), a Tegra board's (Orin, Thor's blackwell, Thor with a
 * discrete card, hostile board strings, none off Tegra), every value checked against
 * Kubernetes' rules. The features.d writer: test-labels-writer.c.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu-arch.h"
#include "gpu.h"
#include "labels.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#define MIB ((uint64_t)1024 * 1024)

static void load(struct config *c, const char *yaml)
{
	struct config_diag d = { 0 };

	assert_int_equal(config_init(c), 0);
	assert_int_equal(config_load_buffer(c, "t.yaml", yaml, strlen(yaml), &d), 0);
	assert_int_equal(config_validate(c, &d), 0);
	assert_int_equal(d.n_errors, 0);
	config_diag_release(&d);
}

static struct gpu_device gpu(const char *name, uint64_t mem_mib, int major, int minor)
{
	struct gpu_device g = { .numa_node = -1, .cc_major = major, .cc_minor = minor };
	static unsigned n;

	g.index = n % 8;
	g.minor = n % 8;
	(void)snprintf(g.uuid, sizeof(g.uuid), "GPU-00000000-0000-0000-0000-%012u", n++ % 8);
	(void)snprintf(g.name, sizeof(g.name), "%s", name);
	g.mem_total = mem_mib * MIB;
	g.pci_class = 0x030200; /* a 3D controller, as data-center GPUs are */
	return g;
}

static struct gpu_info info_of(struct gpu_device *devs, unsigned n)
{
	struct gpu_info info = { .cuda_driver_version = 12040, .n_devices = n, .devices = devs };

	(void)snprintf(info.driver_version, sizeof(info.driver_version), "550.54.15");
	for (unsigned i = 0; i < n; i++) {
		devs[i].index = i;
		(void)snprintf(devs[i].uuid, sizeof(devs[i].uuid),
			       "GPU-00000000-0000-0000-0000-%012u", i);
	}
	return info;
}

/* Kubernetes: <= 63 bytes, empty or alphanumeric at both ends, [-_.A-Za-z0-9] between. */
static bool label_value_valid(const char *v)
{
	size_t n = strlen(v);

	if (n == 0)
		return true;
	if (n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

/* Builds the labels (with the gpumem enforcement mode @mode, or NULL); checks each line's
   shape, the sort order and every value. Caller frees. */
static char *build_mode(const struct gpu_info *info, const struct config *c, const char *sysfs,
			const char *mode)
{
	struct buf out = { 0 };
	char prev[256] = "", key[256], val[256];
	char *s;

	assert_int_equal(labels_build(info, c, sysfs, mode, &out), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	s = (char *)out.data;
	for (const char *line = s; *line;) {
		const char *nl = strchr(line, '\n'), *eq = strchr(line, '=');

		assert_non_null(nl);
		assert_true(eq && eq < nl);
		assert_true(eq - line < (long)sizeof(key) && nl - eq < (long)sizeof(val));
		(void)snprintf(key, sizeof(key), "%.*s", (int)(eq - line), line);
		(void)snprintf(val, sizeof(val), "%.*s", (int)(nl - eq - 1), eq + 1);
		if (!label_value_valid(val))
			fail_msg("invalid label value: %s=%s", key, val);
		assert_true(startswith(key, "nvidia.com/") || startswith(key, LABELS_BOARD_PREFIX));
		if (strcmp(prev, key) >= 0)
			fail_msg("not sorted: %s before %s", prev, key);
		memcpy(prev, key, sizeof(key));
		line = nl + 1;
	}
	return s;
}

static char *build(const struct gpu_info *info, const struct config *c, const char *sysfs)
{
	return build_mode(info, c, sysfs, NULL);
}

/* The value of @key in @labels, or NULL (static buffer). */
static const char *value_of(const char *labels, const char *key)
{
	static char v[128];
	size_t kl = strlen(key);

	for (const char *line = labels; line && *line;) {
		const char *nl = strchr(line, '\n');

		if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
			(void)snprintf(v, sizeof(v), "%.*s", (int)(nl - line - kl - 1),
				       line + kl + 1);
			return v;
		}
		line = nl ? nl + 1 : NULL;
	}
	return NULL;
}

static void expect_label(const char *labels, const char *key, const char *want)
{
	const char *v = value_of(labels, key);

	if (!want) {
		if (v)
			fail_msg("%s should be absent, is %s", key, v);
		return;
	}
	if (!v)
		fail_msg("%s missing in:\n%s", key, labels);
	assert_string_equal(v, want);
}

/* expect_label() for each "key=value" of @want (NULL-terminated). */
static void expect_labels(const char *labels, const char *const *want)
{
	for (; *want; want++) {
		char key[128];
		const char *eq = strchr(*want, '=');

		assert_non_null(eq);
		(void)snprintf(key, sizeof(key), "%.*s", (int)(eq - *want), *want);
		expect_label(labels, key, eq + 1);
	}
}

static char *fake_sysfs(const char *product_name)
{
	char *root = unit_tmpdir_dup("test-labels"), *p;

	unit_make_path(root, "/class/dmi/id/");
	if (product_name) {
		p = strdup_printf("%s/class/dmi/id/product_name", root);
		assert_int_equal(
			file_write_atomic(p, product_name, strlen(product_name), 0644, NULL), 0);
		free(p);
	}
	return root;
}

static void test_full_set(void **state)
{
	struct gpu_device devs[2] = { gpu("NVIDIA A2", 15356, 8, 6),
				      gpu("NVIDIA A2", 15356, 8, 6) };
	struct gpu_info info = info_of(devs, 2);
	char *sysfs = fake_sysfs("PowerEdge R750xa\n"), *l;
	struct config c;

	load(&c, "version: v1\n");
	l = build(&info, &c, sysfs);
	/* Everything, in order: what GFD writes for this node (less its timestamp). */
	assert_string_equal(l, "nvidia.com/cuda.driver-version.full=550.54.15\n"
			       "nvidia.com/cuda.driver-version.major=550\n"
			       "nvidia.com/cuda.driver-version.minor=54\n"
			       "nvidia.com/cuda.driver-version.revision=15\n"
			       "nvidia.com/cuda.driver.major=550\n"
			       "nvidia.com/cuda.driver.minor=54\n"
			       "nvidia.com/cuda.driver.rev=15\n"
			       "nvidia.com/cuda.runtime-version.full=12.4\n"
			       "nvidia.com/cuda.runtime-version.major=12\n"
			       "nvidia.com/cuda.runtime-version.minor=4\n"
			       "nvidia.com/cuda.runtime.major=12\n"
			       "nvidia.com/cuda.runtime.minor=4\n"
			       "nvidia.com/gpu.compute.major=8\n"
			       "nvidia.com/gpu.compute.minor=6\n"
			       "nvidia.com/gpu.count=2\n"
			       "nvidia.com/gpu.family=ampere\n"
			       "nvidia.com/gpu.machine=PowerEdge-R750xa\n"
			       "nvidia.com/gpu.memory=15356\n"
			       "nvidia.com/gpu.mode=compute\n"
			       "nvidia.com/gpu.product=NVIDIA-A2\n"
			       "nvidia.com/gpu.replicas=1\n"
			       "nvidia.com/gpu.sharing-strategy=none\n"
			       "nvidia.com/mig.capable=false\n"
			       "nvidia.com/mps.capable=false\n");
	free(l);

	/* No GPU: no labels. */
	info.n_devices = 0;
	l = build(&info, &c, sysfs);
	assert_string_equal(l, "");
	free(l);
	config_release(&c);
	unit_rm_tree(sysfs);
	free(sysfs);
}

static void test_family(void **state)
{
	static const struct {
		int major, minor;
		const char *family;
	} table[] = {
		{ 1, 0, "tesla" },	  { 1, 3, "tesla" },	  { 2, 1, "fermi" },
		{ 3, 5, "kepler" },	  { 3, 7, "kepler" },	  { 4, 0, "undefined" },
		{ 5, 0, "maxwell" },	  { 5, 3, "maxwell" },	  { 6, 0, "pascal" },
		{ 6, 2, "pascal" },	  { 7, 0, "volta" },	  { 7, 2, "volta" },
		{ 7, 4, "volta" },	  { 7, 5, "turing" },	  { 8, 0, "ampere" },
		{ 8, 6, "ampere" },	  { 8, 7, "ampere" },	  { 8, 8, "ampere" },
		{ 8, 9, "ada-lovelace" }, { 9, 0, "hopper" },	  { 10, 0, "blackwell" },
		{ 10, 1, "blackwell" },	  { 11, 0, "blackwell" }, { 12, 0, "blackwell" },
		{ 12, 1, "blackwell" },	  { 13, 0, "rubin" },	  { 14, 0, "undefined" },
		{ 99, 9, "undefined" },
	};
	char *sysfs = fake_sysfs(NULL), *l, want[16];
	struct config c;

	load(&c, "version: v1\n");
	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		struct gpu_device d = gpu("NVIDIA X", 1024, table[i].major, table[i].minor);
		struct gpu_info info = info_of(&d, 1);

		l = build(&info, &c, sysfs);
		expect_label(l, "nvidia.com/gpu.family", table[i].family);
		(void)snprintf(want, sizeof(want), "%d", table[i].major);
		expect_label(l, "nvidia.com/gpu.compute.major", want);
		(void)snprintf(want, sizeof(want), "%d", table[i].minor);
		expect_label(l, "nvidia.com/gpu.compute.minor", want);
		free(l);
	}
	/* Compute capability unknown (major 0): no family, no compute labels, as GFD. */
	{
		struct gpu_device d = gpu("NVIDIA X", 1024, 0, 0);
		struct gpu_info info = info_of(&d, 1);

		l = build(&info, &c, sysfs);
		expect_label(l, "nvidia.com/gpu.family", NULL);
		expect_label(l, "nvidia.com/gpu.compute.major", NULL);
		expect_label(l, "nvidia.com/gpu.compute.minor", NULL);
		expect_label(l, "nvidia.com/gpu.product", "NVIDIA-X");
		free(l);
	}
	config_release(&c);
	unit_rm_tree(sysfs);
	free(sysfs);
}

static void expect_product(const struct config *c, const char *name, const char *want)
{
	struct gpu_device d = gpu(name, 1024, 8, 7);
	struct gpu_info info = info_of(&d, 1);
	char *l = build(&info, c, NULL);

	expect_label(l, "nvidia.com/gpu.product", want);
	free(l);
}

static void test_product(void **state)
{
	char long_name[GPU_NAME_MAX], want[64];
	struct config c;

	load(&c, "version: v1\n");
	/* GFD's rule: keep [A-Za-z0-9-_. ], fields joined by '-'. */
	expect_product(&c, "Tesla T4", "Tesla-T4");
	expect_product(&c, "NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB");
	expect_product(&c, "NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090");
	expect_product(&c, "Orin (nvgpu)", "Orin-nvgpu");
	expect_product(&c, "  NVIDIA   H100  80GB HBM3 ", "NVIDIA-H100-80GB-HBM3");
	/* Hostile: quotes, backslashes, newlines, '=' and '/', UTF-8. */
	expect_product(&c, "NVIDIA \"Fancy\" GPU", "NVIDIA-Fancy-GPU");
	expect_product(&c, "a\\b\nc=d/e", "abcde");
	expect_product(&c, "NVIDIA RTX\xe2\x84\xa2 5000 \xc3\xa9t\xc3\xa9", "NVIDIA-RTX-5000-t");
	/* Nothing usable left, or only separators: not an empty or invalid value. */
	expect_product(&c, "\xe6\x97\xa5\xe6\x9c\xac", "unknown");
	expect_product(&c, "--- ... ___", "unknown");
	expect_product(&c, "-Leading and trailing.-", "Leading-and-trailing");
	/* The longest name a GPU can have is cut to 63, ending on an alphanumeric. */
	memset(long_name, 'A', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	memset(want, 'A', 63);
	want[63] = 0;
	expect_product(&c, long_name, want);
	memset(long_name, 'B', 62);
	(void)snprintf(long_name + 62, sizeof(long_name) - 62, " more words here");
	memset(want, 'B', 62);
	want[62] = 0;
	expect_product(&c, long_name, want); /* "BBB...B-" cut: the dash goes */
	config_release(&c);
}

static void test_time_slicing(void **state)
{
	struct gpu_device devs[2] = { gpu("NVIDIA A2", 15356, 8, 6),
				      gpu("NVIDIA L4", 23034, 8, 9) };
	struct gpu_info info = info_of(devs, 2);
	char *l, long_name[GPU_NAME_MAX];
	struct config c;

	/* Time-sliced without a rename: -SHARED, as GFD. */
	load(&c, "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
		 "replicas: 4}]}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-A2-SHARED");
	expect_label(l, "nvidia.com/gpu.replicas", "4");
	expect_label(l, "nvidia.com/gpu.sharing-strategy", "time-slicing");
	/* Mixed models: the first GPU's model, and GFD's count: the GPUs of that model. */
	expect_label(l, "nvidia.com/gpu.count", "1");
	expect_label(l, "nvidia.com/gpu.memory", "15356");
	free(l);
	/* A long name still leaves room for the suffix. */
	memset(long_name, 'Z', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	memcpy(devs[0].name, long_name, sizeof(long_name));
	l = build(&info, &c, NULL);
	assert_int_equal(strlen(value_of(l, "nvidia.com/gpu.product")), 63);
	assert_non_null(strstr(value_of(l, "nvidia.com/gpu.product"), "ZZZ-SHARED"));
	free(l);
	(void)snprintf(devs[0].name, sizeof(devs[0].name), "NVIDIA A2");
	config_release(&c);

	/* Renamed, by name or by default: no suffix. */
	load(&c, "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, rename: "
		 "gpu.shared, replicas: 3}]}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-A2");
	expect_label(l, "nvidia.com/gpu.replicas", "3");
	expect_label(l, "nvidia.com/gpu.sharing-strategy", "time-slicing");
	free(l);
	config_release(&c);
	load(&c,
	     "version: v1\nsharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, "
	     "replicas: 2}]}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-A2");
	expect_label(l, "nvidia.com/gpu.replicas", "2");
	free(l);
	config_release(&c);

	/* Another resource time-sliced: nvidia.com/gpu is not shared. */
	load(&c, "version: v1\nresources: {gpus: [{pattern: \"NVIDIA L4\", name: l4}]}\n"
		 "sharing: {timeSlicing: {resources: [{name: l4, replicas: 2}]}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-A2");
	expect_label(l, "nvidia.com/gpu.replicas", "1");
	expect_label(l, "nvidia.com/gpu.sharing-strategy", "none");
	free(l);
	config_release(&c);
}

static void test_gpumem(void **state)
{
	struct gpu_device devs[3] = { gpu("NVIDIA A2", 15356, 8, 6), gpu("NVIDIA A2", 15356, 8, 6),
				      gpu("NVIDIA A2", 15000, 8, 6) };
	struct gpu_info info = info_of(devs, 3);
	struct config c;
	char *l;

	/* Off: none of ours. */
	load(&c, "version: v1\n");
	l = build_mode(&info, &c, NULL, "interposer");
	assert_null(strstr(l, "gpumem"));
	free(l);
	config_release(&c);

	/* Two GPUs of three: their memory summed, the unit as configured. */
	load(&c, "version: v1\nedgegpu: {sharing: {memory: {devices: [1, 2], unitMiB: 256}}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpumem.unit-mib", "256");
	expect_label(l, "nvidia.com/gpumem.total-mib", "30356");
	expect_label(l, "nvidia.com/gpu.count", "3"); /* GFD counts GPUs, not resources */
	assert_null(strstr(l, "enforcement"));	      /* no mode given (enforcement not running) */
	free(l);
	/* The node's enforcement mode, as the daemon gives it, beside the gpumem labels. */
	l = build_mode(&info, &c, NULL, "both");
	expect_label(l, "edgegpu.io/gpumem.enforcement", "both");
	free(l);
	l = build_mode(&info, &c, NULL, "");
	assert_null(strstr(l, "enforcement"));
	free(l);
	config_release(&c);

	/* A renamed resource keys its labels; the default unit is 1 MiB. */
	load(&c, "version: v1\nedgegpu: {sharing: {memory: {resourceName: gpumem-edge, devices: "
		 "[0]}}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpumem-edge.unit-mib", "1");
	expect_label(l, "nvidia.com/gpumem-edge.total-mib", "15356");
	free(l);
	config_release(&c);

	/* A config that does not fit these GPUs (GPU 7): left out, not a failure. */
	load(&c, "version: v1\nedgegpu: {sharing: {memory: {devices: [7]}}}\n");
	l = build_mode(&info, &c, NULL, "accounting"); /* no gpumem served: no mode either */
	assert_null(strstr(l, "gpumem"));
	free(l);
	config_release(&c);

	/* A unit so small the device list would pass 3 MiB: the doubled unit is labelled. */
	devs[0].mem_total = 600000 * MIB;
	load(&c, "version: v1\nedgegpu: {sharing: {memory: {devices: [0]}}}\n");
	l = build(&info, &c, NULL);
	assert_true(strtoull(value_of(l, "nvidia.com/gpumem.unit-mib"), NULL, 10) > 1);
	expect_label(l, "nvidia.com/gpumem.total-mib", "600000");
	free(l);
	config_release(&c);
}

static void test_versions_memory_machine(void **state)
{
	struct gpu_device d = gpu("NVIDIA A2", 0, 8, 6);
	struct gpu_info info = info_of(&d, 1);
	char *sysfs, *l;
	struct config c;

	load(&c, "version: v1\n");
	/* X.Y: an empty revision, as GFD. */
	(void)snprintf(info.driver_version, sizeof(info.driver_version), "535.183");
	info.cuda_driver_version = 12020;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/cuda.driver-version.full", "535.183");
	expect_label(l, "nvidia.com/cuda.driver-version.revision", "");
	expect_label(l, "nvidia.com/cuda.driver.rev", "");
	expect_label(l, "nvidia.com/cuda.runtime-version.full", "12.2");
	expect_label(l, "nvidia.com/gpu.memory", NULL); /* 0 MiB: left out */
	free(l);
	/* Not X.Y[.Z], or not a label value: no driver labels; CUDA unknown: no runtime. */
	static const char *const bad[] = { "",	      "550",
					   "1.2.3.4", "unknown.unknown.unknown.x",
					   "550..15", "550.54.15 beta",
					   ".54.15",  "550.54." };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		(void)snprintf(info.driver_version, sizeof(info.driver_version), "%s", bad[i]);
		info.cuda_driver_version = 0;
		l = build(&info, &c, NULL);
		assert_null(strstr(l, "cuda."));
		expect_label(l, "nvidia.com/gpu.product", "NVIDIA-A2");
		free(l);
	}

	/* Machine type: missing file, hostile content, all of it unusable. */
	sysfs = fake_sysfs(NULL);
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.machine", "unknown");
	free(l);
	unit_rm_tree(sysfs);
	free(sysfs);
	sysfs = fake_sysfs("  Jetson AGX Orin (\"Developer Kit\")\t\n");
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.machine", "Jetson-AGX-Orin-Developer-Kit");
	free(l);
	unit_rm_tree(sysfs);
	free(sysfs);
	sysfs = fake_sysfs("\xe6\x97\xa5\n");
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.machine", "unknown");
	free(l);
	unit_rm_tree(sysfs);
	free(sysfs);
	config_release(&c);
}

/* --- a Tegra board --- */

/* A board as the Tegra backend reads it: tegra, the strings given ("" unknown). */
static struct gpu_board board(const char *model, const char *soc, const char *l4t,
			      const char *jetpack, const char *power_mode)
{
	struct gpu_board b = { .tegra = true };

	(void)snprintf(b.model, sizeof(b.model), "%s", model);
	(void)snprintf(b.soc, sizeof(b.soc), "%s", soc);
	(void)snprintf(b.l4t, sizeof(b.l4t), "%s", l4t);
	(void)snprintf(b.jetpack, sizeof(b.jetpack), "%s", jetpack);
	(void)snprintf(b.power_mode, sizeof(b.power_mode), "%s", power_mode);
	return b;
}

/* An iGPU as the Tegra backend gives it without NVML: ID "tegra", the carve-out, no PCI. */
static struct gpu_device igpu(const char *name, uint64_t mem_mib, int major, int minor)
{
	struct gpu_device g = gpu(name, mem_mib, major, minor);

	g.integrated = true;
	g.pci_class = 0; /* no PCI device */
	return g;
}

/* An Orin Nano without NVML: every label, exactly; no CUDA driver label, never "unknown". */
static void test_tegra_orin(void **state)
{
	struct gpu_device d = igpu("Orin", 7620, 8, 7);
	struct gpu_info info = info_of(&d, 1);
	char *sysfs = fake_sysfs(NULL), *l; /* no DMI on a device-tree board */
	struct config c;

	(void)snprintf(d.uuid, sizeof(d.uuid), "tegra");
	info.driver_version[0] = 0;
	info.cuda_driver_version = 0;
	info.board = board("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
			   "tegra234", "36.4.3", "6.2", "15W");
	load(&c, "version: v1\n");
	l = build(&info, &c, sysfs);
	assert_string_equal(l,
			    "edgegpu.io/board.jetpack=6.2\n"
			    "edgegpu.io/board.l4t=36.4.3\n"
			    "edgegpu.io/board.model=NVIDIA-Jetson-Orin-Nano-Engineering-Reference-"
			    "Developer-Kit-Sup\n" /* a real model past 63 bytes: cut */
			    "edgegpu.io/board.power-mode=15W\n"
			    "edgegpu.io/board.soc=tegra234\n"
			    "nvidia.com/gpu.compute.major=8\n"
			    "nvidia.com/gpu.compute.minor=7\n"
			    "nvidia.com/gpu.count=1\n"
			    "nvidia.com/gpu.family=ampere\n"
			    "nvidia.com/gpu.machine=unknown\n"
			    "nvidia.com/gpu.memory=7620\n"
			    "nvidia.com/gpu.mode=compute\n"
			    "nvidia.com/gpu.product=Orin\n"
			    "nvidia.com/gpu.replicas=1\n"
			    "nvidia.com/gpu.sharing-strategy=none\n"
			    "nvidia.com/mig.capable=false\n"
			    "nvidia.com/mps.capable=false\n");
	free(l);
	config_release(&c);

	/* time-sliced, and the carve-out as gpumem: the sharing labels follow */
	load(&c, "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
		 "replicas: 4}]}}\nedgegpu: {sharing: {memory: {devices: [0], unitMiB: 256}}}\n");
	info.board.power_mode[0] = 0; /* nvpmodel unreadable: left out */
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.product", "Orin-SHARED");
	expect_label(l, "nvidia.com/gpu.replicas", "4");
	expect_label(l, "nvidia.com/gpu.sharing-strategy", "time-slicing");
	expect_label(l, "nvidia.com/gpumem.total-mib", "7620");
	expect_label(l, "edgegpu.io/board.power-mode", NULL);
	expect_label(l, "edgegpu.io/board.soc", "tegra234");
	free(l);
	config_release(&c);
	unit_rm_tree(sysfs);
	free(sysfs);
}

/* Thor: compute capability 11.0 is blackwell (GFD says undefined); NVML gives its driver. */
static void test_tegra_thor(void **state)
{
	struct gpu_device devs[2] = { igpu("NVIDIA Thor", 125772, 11, 0),
				      gpu("NVIDIA RTX PRO 6000 Blackwell Max-Q", 97887, 12, 0) };
	struct gpu_info info = info_of(devs, 1);
	const struct gpu_board thor =
		board("NVIDIA Jetson AGX Thor Developer Kit", "tegra264", "38.2.0", "7.0", "MAXN");
	struct config c;
	char *l;

	assert_string_equal(gpu_arch_gfd_family(gpu_arch_from_cc(11, 0)), "blackwell");
	(void)snprintf(info.driver_version, sizeof(info.driver_version), "580.00");
	info.cuda_driver_version = 13000;
	info.board = thor;
	load(&c, "version: v1\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-Thor");
	expect_label(l, "nvidia.com/gpu.family", "blackwell");
	expect_label(l, "nvidia.com/gpu.compute.major", "11");
	expect_label(l, "nvidia.com/gpu.compute.minor", "0");
	expect_label(l, "nvidia.com/gpu.memory", "125772");
	expect_label(l, "nvidia.com/gpu.count", "1");
	expect_label(l, "nvidia.com/cuda.driver-version.full", "580.00");
	expect_label(l, "nvidia.com/cuda.runtime-version.full", "13.0");
	expect_label(l, "edgegpu.io/board.model", "NVIDIA-Jetson-AGX-Thor-Developer-Kit");
	expect_label(l, "edgegpu.io/board.soc", "tegra264");
	expect_label(l, "edgegpu.io/board.l4t", "38.2.0");
	expect_label(l, "edgegpu.io/board.jetpack", "7.0");
	expect_label(l, "edgegpu.io/board.power-mode", "MAXN");
	free(l);

	/*
	 * With a discrete card: as on any node, the labels describe the first GPU and count the
	 * GPUs of its model (GFD's count); the board's stay. iGPU listed first: Thor's model,
	 * memory and family. The iGPU, without a PCI class, counts as a 3D controller beside
	 * the card's: compute.
	 */
	info = info_of(devs, 2);
	info.board = thor;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.count", "1");
	expect_label(l, "nvidia.com/gpu.mode", "compute");
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-Thor");
	expect_label(l, "nvidia.com/gpu.memory", "125772");
	expect_label(l, "nvidia.com/gpu.compute.major", "11");
	expect_label(l, "edgegpu.io/board.soc", "tegra264");
	free(l);
	/* the dGPU first: its model and compute capability */
	{
		struct gpu_device swapped[2] = { devs[1], devs[0] };

		info = info_of(swapped, 2);
		info.board = thor;
		l = build(&info, &c, NULL);
		expect_label(l, "nvidia.com/gpu.count", "1");
		expect_label(l, "nvidia.com/gpu.product", "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q");
		expect_label(l, "nvidia.com/gpu.compute.major", "12");
		expect_label(l, "nvidia.com/gpu.family", "blackwell");
		expect_label(l, "edgegpu.io/board.model", "NVIDIA-Jetson-AGX-Thor-Developer-Kit");
		free(l);
	}
	config_release(&c);
}

/* Board strings as a device tree or a hand-edited file may hold them: always valid values. */
static void test_tegra_hostile_board(void **state)
{
	struct gpu_device d = igpu("Xavier", 7765, 7, 2);
	struct gpu_info info = info_of(&d, 1);
	char model[sizeof(info.board.model)], want[64];
	struct config c;
	char *l;

	load(&c, "version: v1\n");
	info.board = board("  NVIDIA \"Jetson\" Xavier NX\n(P3668)=x/y\\z \xc3\xa9 ", "tegra194\n",
			   "R35 (release)", "", "MODE 20W/6CORE=\"\"");
	l = build(&info, &c, NULL); /* build() checks every value against Kubernetes' rules */
	expect_label(l, "edgegpu.io/board.model",
		     "NVIDIA-Jetson-Xavier-NXP3668xyz" /* the newline is no space */);
	expect_label(l, "edgegpu.io/board.soc", "tegra194");
	expect_label(l, "edgegpu.io/board.l4t", "R35-release");
	expect_label(l, "edgegpu.io/board.jetpack", NULL); /* unknown: left out */
	expect_label(l, "edgegpu.io/board.power-mode", "MODE-20W6CORE");
	free(l);

	/* nothing usable left, and a model filling its array: "unknown", and cut to 63 */
	info.board = board("\xe6\x97\xa5 --- ...", "tegra194", "", "", "___");
	l = build(&info, &c, NULL);
	expect_label(l, "edgegpu.io/board.model", "unknown");
	expect_label(l, "edgegpu.io/board.power-mode", "unknown");
	expect_label(l, "edgegpu.io/board.l4t", NULL);
	free(l);
	memset(model, 'M', sizeof(model) - 1);
	model[sizeof(model) - 1] = 0;
	model[62] = '-';
	info.board = board(model, "", "", "", "");
	l = build(&info, &c, NULL);
	memset(want, 'M', 62);
	want[62] = 0;
	expect_label(l, "edgegpu.io/board.model", want); /* cut at 63, the trailing '-' gone */
	expect_label(l, "edgegpu.io/board.soc", NULL);
	free(l);
	config_release(&c);
}

/* Not a Tegra board (an arm64 server, an x86 node): no board label, whatever the struct holds. */
static void test_not_tegra(void **state)
{
	struct gpu_device d = gpu("NVIDIA L4", 23034, 8, 9);
	struct gpu_info info = info_of(&d, 1);
	struct config c;
	char *l;

	load(&c, "version: v1\n");
	l = build(&info, &c, NULL);
	assert_null(strstr(l, "edgegpu.io/"));
	expect_label(l, "nvidia.com/gpu.product", "NVIDIA-L4");
	free(l);
	info.board = board("leftover", "tegra234", "36.4.3", "6.2", "MAXN");
	info.board.tegra = false;
	l = build(&info, &c, NULL);
	assert_null(strstr(l, "edgegpu.io/"));
	free(l);
	/* a Tegra board without a GPU served: no labels at all, as on any node */
	info.board.tegra = true;
	info.n_devices = 0;
	l = build(&info, &c, NULL);
	assert_string_equal(l, "");
	free(l);
	config_release(&c);
}

/* GFD's gpu.mode from the PCI classes of every GPU, MIG-enabled ones included. */
static void test_mode(void **state)
{
	struct gpu_device devs[2] = { gpu("NVIDIA GeForce RTX 4090", 24564, 8, 9),
				      gpu("NVIDIA GeForce RTX 4090", 24564, 8, 9) };
	struct gpu_device mig = gpu("NVIDIA GeForce RTX 4090", 24564, 8, 9);
	struct gpu_info info = info_of(devs, 2);
	struct config c;
	char *l;

	load(&c, "version: v1\n");
	/* VGA controllers (a GeForce with a display): graphics. */
	devs[0].pci_class = devs[1].pci_class = 0x030000;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "graphics");
	expect_label(l, "nvidia.com/gpu.family", "ada-lovelace");
	free(l);
	/* 3D controllers: compute. */
	devs[0].pci_class = devs[1].pci_class = 0x030200;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "compute");
	free(l);
	/* Mixed, another class (GFD's "switch" case), or one unknown: unknown. */
	devs[1].pci_class = 0x030000;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "unknown");
	free(l);
	devs[0].pci_class = devs[1].pci_class = 0x068000;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "unknown");
	free(l);
	devs[0].pci_class = devs[1].pci_class = 0x030200;
	devs[1].pci_class = 0;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "unknown");
	free(l);
	/*
	 * A Tegra iGPU beside a discrete card counts as a 3D controller whatever class is read at
	 * the PCI address NVML gives it (no PCI device of its own: what sits there, if anything,
	 * is another device, such as an NVMe drive, 0x010802).
	 */
	devs[0].pci_class = devs[1].pci_class = 0x030200;
	devs[1].integrated = true;
	devs[1].pci_class = 0x010802;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "compute");
	free(l);
	devs[1].integrated = false;
	/* A MIG-enabled GPU discovery left out counts too (GFD sees every GPU). */
	devs[1].pci_class = 0x030200;
	mig.pci_class = 0x030000;
	mig.mig_enabled = mig.mig_capable = true;
	info.mig_devices = &mig;
	info.n_mig_devices = 1;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpu.mode", "unknown");
	free(l);
	config_release(&c);
}

/* mig.capable from NVML (any GPU), gpu.count as GFD counts: the GPUs of the model described. */
static void test_mig_and_count(void **state)
{
	struct gpu_device devs[3] = { gpu("NVIDIA A100-SXM4-40GB", 40960, 8, 0),
				      gpu("NVIDIA A2", 15356, 8, 6),
				      gpu("NVIDIA A100-SXM4-40GB", 40960, 8, 0) };
	struct gpu_device migs[2] = { gpu("NVIDIA A100-SXM4-40GB", 40960, 8, 0),
				      gpu("NVIDIA H100 80GB HBM3", 81559, 9, 0) };
	struct gpu_info info = info_of(devs, 3);
	struct config c;
	char product[64];
	char *l;

	load(&c, "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
		 "replicas: 2}]}}\n");
	/* Without MIG: false, and two A100s of three GPUs. */
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/mig.capable", "false");
	expect_label(l, "nvidia.com/gpu.count", "2");
	expect_label(l, "nvidia.com/mig.strategy", NULL); /* GFD's "none": not written */
	free(l);
	/* One capable GPU is enough (GFD's rule), whichever it is. */
	devs[1].mig_capable = true;
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/mig.capable", "true");
	free(l);
	devs[1].mig_capable = false;

	/* MIG-enabled GPUs discovery skipped: counted with their model, and capable. */
	for (unsigned i = 0; i < 2; i++)
		migs[i].mig_enabled = migs[i].mig_capable = true;
	info.mig_devices = migs;
	info.n_mig_devices = 2;
	l = build(&info, &c, NULL);
	expect_labels(
		l, (const char *const[]){ "nvidia.com/mig.capable=true", "nvidia.com/gpu.count=3",
					  "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-SHARED",
					  "nvidia.com/gpu.replicas=2", NULL });
	free(l);

	/*
	 * Every GPU MIG-enabled: GFD (MIG strategy none) still labels the node, the first one's
	 * model without sharing: replicas 0, strategy none, no -SHARED.
	 */
	info.n_devices = 0;
	l = build(&info, &c, NULL);
	expect_labels(
		l, (const char *const[]){
			   "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count=1",
			   "nvidia.com/gpu.memory=40960", "nvidia.com/gpu.family=ampere",
			   "nvidia.com/gpu.replicas=0", "nvidia.com/gpu.sharing-strategy=none",
			   "nvidia.com/mig.capable=true", "nvidia.com/gpu.mode=compute", NULL });
	free(l);
	/* The doctor's product line is the label written, there too. */
	labels_product(&info, &c, product, sizeof(product));
	assert_string_equal(product, "NVIDIA-A100-SXM4-40GB");
	/* And no GPU at all: nothing. */
	info.n_mig_devices = 0;
	l = build(&info, &c, NULL);
	assert_string_equal(l, "");
	free(l);
	labels_product(&info, &c, product, sizeof(product));
	assert_string_equal(product, "");
	config_release(&c);
}

/* The timestamp goes where its key sorts; lines without it stay as they were. */
static void test_timestamp(void **state)
{
	static const char lines[] = "nvidia.com/cuda.driver.major=550\n"
				    "nvidia.com/gpu.count=1\n";
	struct buf out = { 0 };

	assert_int_equal(labels_add_timestamp(lines, strlen(lines), 1733300000, &out), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.data, "nvidia.com/cuda.driver.major=550\n"
						    "nvidia.com/gfd.timestamp=1733300000\n"
						    "nvidia.com/gpu.count=1\n");
	out.len = 0;
	assert_int_equal(labels_add_timestamp("edgegpu.io/board.soc=t\n", 23, 7, &out), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.data,
			    "edgegpu.io/board.soc=t\nnvidia.com/gfd.timestamp=7\n");
	buf_release(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_set),
		cmocka_unit_test(test_family),
		cmocka_unit_test(test_product),
		cmocka_unit_test(test_time_slicing),
		cmocka_unit_test(test_gpumem),
		cmocka_unit_test(test_versions_memory_machine),
		cmocka_unit_test(test_tegra_orin),
		cmocka_unit_test(test_tegra_thor),
		cmocka_unit_test(test_tegra_hostile_board),
		cmocka_unit_test(test_not_tegra),
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_mig_and_count),
		cmocka_unit_test(test_timestamp),
	};

	log_max_level = LOG_LEVEL_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
