/*
 * labels: the GFD label set for hand-built GPUs and configs read from YAML (family of every
 * compute capability, product sanitising of hostile names, time-slicing, gpumem, versions, the
 * machine type from a fake sysfs), every value checked against Kubernetes' rules; then the
 * features.d writer on a real loop: content, atomic replacement seen through inotify and an fd
 * on the old file, rewrites only on change, the expiry moving forward, a missing directory
 * created later, the 64 KiB limit.
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
#include "gpu.h"
#include "labels.h"
#include "loop.h"
#include "unit.h"
#include "util.h"

#define MIB ((uint64_t)1024 * 1024)

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test-labels-XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *dir)
{
	char *cmd = strdup_printf("rm -rf '%s'", dir);

	assert_non_null(cmd);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

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

/* Builds the labels; checks each line's shape, the sort order and every value. Caller frees. */
static char *build(const struct gpu_info *info, const struct config *c, const char *sysfs)
{
	struct buf out = { 0 };
	char prev[256] = "", key[256], val[256];
	char *s;

	assert_int_equal(labels_build(info, c, sysfs, &out), 0);
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
		assert_true(strncmp(key, "nvidia.com/", 11) == 0);
		if (strcmp(prev, key) >= 0)
			fail_msg("not sorted: %s before %s", prev, key);
		memcpy(prev, key, sizeof(key));
		line = nl + 1;
	}
	return s;
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

static char *fake_sysfs(const char *product_name)
{
	char *root = tmpdir(), *p;

	p = strdup_printf("mkdir -p '%s/class/dmi/id'", root);
	assert_int_equal(system(p), 0);
	free(p);
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
	rm_rf(sysfs);
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
	rm_rf(sysfs);
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
	/* Mixed models: the first GPU's model; the count is every GPU's, as GFD's. */
	expect_label(l, "nvidia.com/gpu.count", "2");
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
	l = build(&info, &c, NULL);
	assert_null(strstr(l, "gpumem"));
	free(l);
	config_release(&c);

	/* Two GPUs of three: their memory summed, the unit as configured. */
	load(&c, "version: v1\nedgegpu: {sharing: {memory: {devices: [1, 2], unitMiB: 256}}}\n");
	l = build(&info, &c, NULL);
	expect_label(l, "nvidia.com/gpumem.unit-mib", "256");
	expect_label(l, "nvidia.com/gpumem.total-mib", "30356");
	expect_label(l, "nvidia.com/gpu.count", "3"); /* GFD counts GPUs, not resources */
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
	l = build(&info, &c, NULL);
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
	rm_rf(sysfs);
	free(sysfs);
	sysfs = fake_sysfs("  Jetson AGX Orin (\"Developer Kit\")\t\n");
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.machine", "Jetson-AGX-Orin-Developer-Kit");
	free(l);
	rm_rf(sysfs);
	free(sysfs);
	sysfs = fake_sysfs("\xe6\x97\xa5\n");
	l = build(&info, &c, sysfs);
	expect_label(l, "nvidia.com/gpu.machine", "unknown");
	free(l);
	rm_rf(sysfs);
	free(sysfs);
	config_release(&c);
}

/* --- the writer --- */

struct wfix {
	struct loop *loop;
	char *dir;
	char *path;
};

static void wfix_init(struct wfix *f)
{
	assert_int_equal(loop_new(&f->loop), 0);
	f->dir = tmpdir();
	f->path = path_join(f->dir, "edgegpu");
	assert_non_null(f->path);
}

static void wfix_release(struct wfix *f)
{
	rm_rf(f->dir);
	free(f->dir);
	free(f->path);
	loop_free(f->loop);
}

static char *slurp(const char *path)
{
	char *s = NULL;

	assert_int_equal(read_file(path, 1 << 20, &s, NULL), 0);
	return s;
}

/* The expiry directive's time, as Unix seconds. */
static time_t expiry_of(const char *file)
{
	const char *p = strstr(file, "# +expiry-time=");
	struct tm tm = { 0 };
	const char *end;

	assert_non_null(p);
	end = strptime(p + strlen("# +expiry-time="), "%Y-%m-%dT%H:%M:%SZ", &tm);
	assert_non_null(end);
	assert_int_equal(*end, '\n');
	return timegm(&tm);
}

/* Runs the loop until @w has written @n files (at most 20 s: a failure, not a pace). */
static void wait_writes(struct wfix *f, struct labels_writer *w, uint64_t n)
{
	usec_t deadline = now_usec() + 20 * USEC_PER_SEC;

	while (labels_writer_writes(w) < n) {
		assert_true(now_usec() < deadline);
		assert_int_equal(loop_run_once(f->loop, 100 * USEC_PER_MSEC), 0);
	}
}

static const char lines_a[] = "nvidia.com/gpu.count=1\nnvidia.com/gpu.product=NVIDIA-A2\n";
static const char lines_b[] = "nvidia.com/gpu.count=2\nnvidia.com/gpu.product=NVIDIA-A2\n";

static void test_writer_content_and_changes(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	time_t now = time(NULL), exp;
	char *s;

	wfix_init(&f);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	assert_int_equal(access(f.path, F_OK), -1); /* nothing before the first set */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	/* A comment, the expiry ten minutes ahead, the lines as given. */
	assert_true(s[0] == '#');
	exp = expiry_of(s);
	assert_true(exp >= now + 600 && exp <= time(NULL) + 601);
	assert_non_null(strstr(s, "Z\n"
				  "nvidia.com/gpu.count=1\nnvidia.com/gpu.product=NVIDIA-A2\n"));
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);

	/*
	 * The same lines: no write. Others: a write. Back: a write. (Had the same lines started
	 * a write, the second write counted would be theirs, and the file would not hold b.)
	 */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	assert_int_equal(labels_writer_writes(w), 1);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 3);
	/* A missing last newline is added; the same lines then. */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a) - 1), 0);
	assert_int_equal(labels_writer_writes(w), 3);
	/* A NUL byte is refused. */
	assert_int_equal(labels_writer_set(w, "a=b\0c=d\n", 8), -EINVAL);
	assert_int_equal(labels_writer_writes(w), 3);

	/* Freed: the file stays. */
	w = labels_writer_free(w);
	assert_null(w);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);

	/* Expiry 0: no directive. */
	assert_int_equal(labels_writer_new(f.loop, f.path, 0, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	assert_null(strstr(s, "expiry"));
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	labels_writer_free(w);

	assert_int_equal(labels_writer_new(f.loop, "/tmp/", 0, &w), -EINVAL);
	wfix_release(&f);
}

struct seen {
	char created[8][64];
	int n_created;
	char moved_to[8][64];
	int n_moved;
};

static void on_watch(struct loop_watch *wt, const char *name, uint32_t mask, void *userdata)
{
	struct seen *s = userdata;

	if ((mask & IN_CREATE) && s->n_created < 8)
		(void)snprintf(s->created[s->n_created++], 64, "%s", name);
	if ((mask & IN_MOVED_TO) && s->n_moved < 8)
		(void)snprintf(s->moved_to[s->n_moved++], 64, "%s", name);
}

static void test_writer_atomic(void **state)
{
	struct labels_writer *w = NULL;
	struct loop_watch *watch = NULL;
	struct seen seen = { 0 };
	struct stat st1, st2;
	struct wfix f;
	char old[4096];
	ssize_t n;
	int fd;

	wfix_init(&f);
	/*
	 * A symlink planted where a temporary file could go is never followed: each write makes
	 * a new dotfile, O_EXCL, under a name of its own.
	 */
	{
		char *tmp = path_join(f.dir, ".edgegpu.tmp"), *victim = path_join(f.dir, "victim");

		assert_int_equal(file_write_atomic(victim, "keep\n", 5, 0644, NULL), 0);
		assert_int_equal(symlink(victim, tmp), 0);
		assert_int_equal(labels_writer_new(f.loop, f.path, 0, &w), 0);
		assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
		wait_writes(&f, w, 1);
		w = labels_writer_free(w);
		assert_int_equal(lstat(tmp, &st1), 0);
		assert_true(S_ISLNK(st1.st_mode));
		assert_int_equal(unlink(tmp), 0);
		free(tmp);
		tmp = slurp(victim);
		assert_string_equal(tmp, "keep\n");
		free(tmp);
		assert_int_equal(unlink(victim), 0);
		free(victim);
	}
	assert_int_equal(
		loop_watch_new(f.loop, f.dir, IN_CREATE | IN_MOVED_TO, on_watch, &seen, &watch), 0);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	assert_int_equal(stat(f.path, &st1), 0);
	assert_int_equal(st1.st_mode & 0777, 0644);
	/* A reader holding the old file keeps reading all of it after the replacement: the file
	 * is never rewritten in place. */
	fd = open(f.path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	wait_writes(&f, w, 2);
	n = pread(fd, old, sizeof(old) - 1, 0);
	assert_true(n > 0);
	old[n] = 0;
	assert_string_equal(strstr(old, "nvidia.com/"), lines_a);
	close(fd);
	assert_int_equal(stat(f.path, &st2), 0);
	assert_true(st1.st_ino != st2.st_ino);
	/* What inotify saw: only dotfiles created, each write renamed onto the file. */
	while (seen.n_moved < 2)
		assert_int_equal(loop_run_once(f.loop, 5 * USEC_PER_SEC), 0);
	assert_true(seen.n_created >= 2);
	for (int i = 0; i < seen.n_created; i++)
		assert_true(startswith(seen.created[i], ".edgegpu."));
	assert_string_equal(seen.moved_to[0], "edgegpu");
	assert_string_equal(seen.moved_to[1], "edgegpu");
	/* No temporary left behind: the file is all there is. */
	{
		DIR *d = opendir(f.dir);
		struct dirent *de;

		assert_non_null(d);
		while ((de = readdir(d)))
			if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
				assert_string_equal(de->d_name, "edgegpu");
		closedir(d);
	}
	labels_writer_free(w);
	loop_watch_free(watch);
	wfix_release(&f);
}

static void test_writer_expiry_moves(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	time_t e1, e2;
	char *s;

	wfix_init(&f);
	/* Expiry 2 s: rewritten every second, the directive a second further each time. */
	assert_int_equal(labels_writer_new(f.loop, f.path, 2 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	s = slurp(f.path);
	e1 = expiry_of(s);
	free(s);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	e2 = expiry_of(s);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);
	assert_true(e2 > e1);
	labels_writer_free(w);
	wfix_release(&f);
}

static void test_writer_missing_dir(void **state)
{
	struct labels_writer *w = NULL;
	struct wfix f;
	char *dir, *path, *s;

	wfix_init(&f);
	dir = path_join(f.dir, "features.d");
	path = path_join(dir, "edgegpu");
	assert_int_equal(labels_writer_new(f.loop, path, 600 * USEC_PER_SEC, &w), 0);
	/* Not there yet: accepted, retried. */
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	assert_int_equal(loop_run_once(f.loop, 0), 0);
	assert_int_equal(labels_writer_writes(w), 0);
	/* Newer lines while waiting replace the pending ones. */
	assert_int_equal(labels_writer_set(w, lines_b, strlen(lines_b)), 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	wait_writes(&f, w, 1);
	s = slurp(path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_b);
	free(s);
	labels_writer_free(w);
	free(path);
	free(dir);
	wfix_release(&f);
}

/* Lines of @path holding @needle. */
static int count_lines(const char *path, const char *needle)
{
	char *s = NULL;
	int n = 0;

	assert_int_equal(read_file(path, 1 << 20, &s, NULL), 0);
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	free(s);
	return n;
}

static void test_writer_logs_once(void **state)
{
	struct labels_writer *w = NULL;
	char *dir, *path, *log;
	int saved, fd;
	usec_t deadline = now_usec() + 20 * USEC_PER_SEC;
	struct wfix f;

	wfix_init(&f);
	dir = path_join(f.dir, "features.d");
	path = path_join(dir, "edgegpu");
	log = path_join(f.dir, "stderr");
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
	log_max_level = LOG_LEVEL_DEBUG;
	assert_int_equal(labels_writer_new(f.loop, path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	/* Three failed tries: one warning, then debug lines. */
	while (count_lines(log, "cannot write the labels file") < 3) {
		assert_true(now_usec() < deadline);
		assert_int_equal(loop_run_once(f.loop, 100 * USEC_PER_MSEC), 0);
	}
	assert_int_equal(mkdir(dir, 0755), 0);
	wait_writes(&f, w, 1);
	log_max_level = LOG_LEVEL_ERROR;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	close(fd);
	assert_int_equal(
		count_lines(
			log,
			"level=warn module=labels msg=\"cannot write the labels file, retrying\""),
		1);
	assert_true(
		count_lines(
			log,
			"level=debug module=labels msg=\"cannot write the labels file, retrying\"") >=
		2);
	assert_int_equal(count_lines(log, "errno=2"), count_lines(log, "cannot write the labels"));
	/* The recovery is said once, at info. */
	assert_int_equal(count_lines(log, "level=info module=labels msg=\"labels file written\""),
			 1);
	labels_writer_free(w);
	free(log);
	free(path);
	free(dir);
	wfix_release(&f);
}

static void test_writer_size_limit(void **state)
{
	struct labels_writer *w = NULL;
	size_t len = LABELS_FILE_MAX;
	struct wfix f;
	char *big, *s;

	wfix_init(&f);
	assert_int_equal(labels_writer_new(f.loop, f.path, 600 * USEC_PER_SEC, &w), 0);
	assert_int_equal(labels_writer_set(w, lines_a, strlen(lines_a)), 0);
	wait_writes(&f, w, 1);
	big = malloc(len + 1);
	assert_non_null(big);
	for (size_t i = 0; i < len; i++)
		big[i] = i % 32 == 31 ? '\n' : 'x';
	big[len] = 0;
	/* The lines alone fit 64 KiB, with the header they do not: refused, the old file stays. */
	assert_int_equal(labels_writer_set(w, big, len), -EFBIG);
	assert_int_equal(labels_writer_writes(w), 1);
	s = slurp(f.path);
	assert_string_equal(strstr(s, "nvidia.com/"), lines_a);
	free(s);
	/* Just under the limit is fine. */
	assert_int_equal(labels_writer_set(w, big, len - 200), 0);
	wait_writes(&f, w, 2);
	s = slurp(f.path);
	assert_true(strlen(s) <= LABELS_FILE_MAX);
	free(s);
	free(big);
	labels_writer_free(w);
	wfix_release(&f);
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
		cmocka_unit_test(test_writer_content_and_changes),
		cmocka_unit_test(test_writer_atomic),
		cmocka_unit_test(test_writer_expiry_moves),
		cmocka_unit_test(test_writer_missing_dir),
		cmocka_unit_test(test_writer_logs_once),
		cmocka_unit_test(test_writer_size_limit),
	};

	log_max_level = LOG_LEVEL_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
