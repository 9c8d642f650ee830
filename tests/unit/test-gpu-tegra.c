/*
 * The Tegra backend on the fixture boards (tests/fixtures/tegra/make-board, built under
 * $TEGRA_BOARDS), with the fake NVML where the board has one (its nvml.conf): detection, the
 * board's fields, the devices and their nodes against expect.json, the carve-out, the NVML
 * merge, health, and hostile host trees (copies of a board with a file missing, garbage, huge,
 * a directory, or a link out of the root; devfreq and the GPU's node going and coming back).
 */

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu-open.h"
#include "gpu-tegra.h"
#include "tegra-board.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#ifndef FAKE_NVML_LIB
#error "FAKE_NVML_LIB (the built fake libnvidia-ml.so.1) must be defined"
#endif

struct env {
	char dir[64];	/* scratch: copies of boards */
	char root[128]; /* the host root under test */
	char *expect;	/* expect.json's text */
	struct gpu_backend *b;
	struct gpu_info info;
	char *err;
};

static const char *boards_dir(void)
{
	const char *d = getenv("TEGRA_BOARDS");

	assert_non_null(d);
	return d;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	unit_tmpdir("test-gpu-tegra", e->dir, sizeof(e->dir));
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	gpu_info_release(&e->info);
	gpu_backend_close(e->b);
	free(e->err);
	free(e->expect);
	unit_rm_tree(e->dir);
	free(e);
	return 0;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	assert_true(vsnprintf(cmd, sizeof(cmd), fmt, ap) < (int)sizeof(cmd));
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

/* The board's tree as the root, or a copy of it in the scratch dir (to make it hostile). */
static void use_board(struct env *e, const char *board, bool copy)
{
	char path[512];
	FILE *f;
	long n;

	if (copy) {
		(void)snprintf(e->root, sizeof(e->root), "%s/%s", e->dir, board);
		sh("cp -a '%s/%s' '%s'", boards_dir(), board, e->root);
	} else {
		(void)snprintf(e->root, sizeof(e->root), "%s/%s", boards_dir(), board);
	}
	(void)snprintf(path, sizeof(path), "%s/expect.json", e->root);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	free(e->expect);
	e->expect = calloc(1, (size_t)n + 1);
	assert_non_null(e->expect);
	assert_int_equal(fread(e->expect, 1, (size_t)n, f), (size_t)n);
	(void)fclose(f);
}

/* The first `"key": value` of expect.json (sorted keys: the iGPU's come first), as text. */
static const char *expect_raw(struct env *e, const char *key, char *out, size_t size)
{
	char pat[64];
	const char *p;
	size_t n;

	(void)snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(e->expect, pat);
	if (!p) {
		fail_msg("expect.json has no %s", key);
		return NULL; /* not reached: cmocka's _fail() does not say it does not return */
	}
	p += strlen(pat);
	if (*p == '"')
		p++;
	n = strcspn(p, "\",\n");
	assert_true(n < size);
	memcpy(out, p, n);
	out[n] = 0;
	return out;
}

static uint64_t expect_u64(struct env *e, const char *key)
{
	char s[64];

	return strtoull(expect_raw(e, key, s, sizeof(s)), NULL, 10);
}

/* Opens the backend of @kind on the root, with the board's fake NVML when @nvml. */
static int open_root(struct env *e, enum gpu_backend_kind kind, bool nvml, uint64_t mem_mib,
		     const char *id)
{
	char fixture[512];
	struct gpu_backend_opts o = {
		.kind = kind,
		.lib_path = FAKE_NVML_LIB,
		.sysfs_root = e->dir,
		.proc_root = e->dir,
		.host_root = e->root,
		.tegra_device_id = id,
		.tegra_mem_mib = mem_mib,
	};

	(void)snprintf(fixture, sizeof(fixture), "%s/nvml.conf", e->root);
	if (nvml && access(fixture, F_OK) == 0)
		assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", fixture, 1), 0);
	else if (nvml)
		fail_msg("board %s has no nvml.conf", e->root);
	else
		o.lib_path = "/nonexistent/libnvidia-ml.so.1";
	unsetenv("EDGEGPU_FAKE_NVML_CONTROL");
	free(e->err);
	e->err = NULL;
	return gpu_backend_open(&o, &e->b, &e->err);
}

static void discover(struct env *e)
{
	int r;

	gpu_info_release(&e->info);
	r = e->b->ops->discover(e->b, &e->info, &e->err);
	if (r < 0)
		print_error("discover: %d %s\n", r, e->err ? e->err : "");
	assert_int_equal(r, 0);
}

static void open_discover(struct env *e, const char *board, bool nvml)
{
	int r;

	use_board(e, board, false);
	r = open_root(e, GPU_BACKEND_AUTO, nvml, 0, NULL);
	if (r < 0)
		print_error("open: %d %s\n", r, e->err ? e->err : "");
	assert_int_equal(r, 0);
	discover(e);
}

static const struct gpu_device *igpu(struct env *e)
{
	for (unsigned i = 0; i < e->info.n_devices; i++)
		if (e->info.devices[i].integrated)
			return &e->info.devices[i];
	fail_msg("no integrated GPU");
	return NULL;
}

/* Whether the container delivers /dev/@node (a ctl node, a glob, or the GPU's own). */
static bool delivers(const struct gpu_device *d, const char *node)
{
	const struct gpu_container *c = d->container;

	for (size_t i = 0; i < c->n_ctl_nodes; i++)
		if (streq(c->ctl_nodes[i], node))
			return true;
	for (size_t i = 0; i < c->n_node_globs; i++)
		if (fnmatch(c->node_globs[i], node, FNM_PATHNAME) == 0)
			return true;
	for (unsigned i = 0; i < d->n_nodes; i++)
		if (streq(d->nodes[i], node))
			return true;
	return false;
}

/* The board fields, the iGPU and its nodes against expect.json. */
static void check_board(struct env *e, const char *name, int cc_major, int cc_minor,
			const char *arch)
{
	const struct gpu_device *d = igpu(e);
	const struct gpu_container *c = d->container;
	const char *p, *q, *end;
	char s[128];

	assert_true(e->info.board.tegra);
	assert_string_equal(e->info.board.soc, expect_raw(e, "soc", s, sizeof(s)));
	assert_string_equal(e->info.board.l4t, expect_raw(e, "l4t", s, sizeof(s)));
	assert_string_equal(e->info.board.jetpack, expect_raw(e, "jetpack", s, sizeof(s)));
	assert_string_equal(e->info.board.model, expect_raw(e, "model", s, sizeof(s)));
	assert_string_equal(e->info.board.power_mode, expect_raw(e, "power_mode", s, sizeof(s)));
	assert_int_equal(e->info.board.chip_id, expect_u64(e, "chip_id"));
	assert_int_equal(e->info.board.l4t_major, strtoul(e->info.board.l4t, NULL, 10));
	assert_string_equal(d->uuid, "tegra");
	assert_string_equal(d->name, name);
	assert_int_equal(d->cc_major, cc_major);
	assert_int_equal(d->cc_minor, cc_minor);
	assert_string_equal(d->arch, arch);
	assert_int_equal(d->mem_total, expect_u64(e, "mem_total"));
	assert_non_null(c);
	assert_ptr_equal(e->info.container, c);
	assert_string_equal(c->mount_specs_dir,
			    "/etc/nvidia-container-runtime/host-files-for-container.d");
	/* Never a /dev/nvidia<N> in what every container gets: it may be a discrete card's. */
	for (size_t i = 0; i < c->n_ctl_nodes; i++) {
		unsigned m;

		assert_false(startswith(c->ctl_nodes[i], "/dev/nvidia") &&
			     safe_atou(c->ctl_nodes[i] + 11, &m) == 0);
	}
	/* Every node of the board's devices.csv is delivered (a discrete card's by its GPU). */
	p = strstr(e->expect, "\"nodes\": [");
	assert_non_null(p);
	end = strchr(p, ']');
	for (p = strchr(p, '\n'); (p = strchr(p, '"')) && p < end; p = q + 1) {
		char node[96];
		bool other = false;

		q = strchr(p + 1, '"');
		(void)snprintf(node, sizeof(node), "%.*s", (int)(q - p - 1), p + 1);
		if (delivers(d, node))
			continue;
		for (unsigned i = 0; i < e->info.n_devices; i++)
			other |= !e->info.devices[i].integrated &&
				 streq(e->info.devices[i].nodes[0], node);
		if (!other)
			fail_msg("%s: node %s is not delivered", e->root, node);
	}
	assert_int_equal(e->b->ops->probe(e->b, d->index), 0);
}

static void test_nano_r32(void **state)
{
	struct env *e = *state;

	open_discover(e, "nano-r32", false);
	assert_string_equal(e->b->ops->name, "tegra");
	assert_int_equal(e->info.n_devices, 1);
	check_board(e, "NVIDIA Tegra X1", 5, 3, "maxwell");
	/* No NVML, no /dev/nvidia<N> on R32: its own node is the primary one. */
	assert_int_equal(igpu(e)->n_nodes, 1);
	assert_string_equal(igpu(e)->nodes[0], "/dev/nvhost-ctrl-gpu");
	assert_string_equal(igpu(e)->pci_bus_id, "");
	assert_int_equal(igpu(e)->numa_node, -1);
	assert_false(igpu(e)->events_supported);
	assert_int_equal(e->b->ops->events_open(e->b), -EOPNOTSUPP);
	assert_string_equal(e->info.driver_version, ""); /* the L4T release is in the board */
}

static void test_xavier_nx_r35(void **state)
{
	struct env *e = *state;

	open_discover(e, "xavier-nx-r35", false);
	assert_int_equal(e->info.n_devices, 1);
	check_board(e, "Xavier", 7, 2, "volta");
}

static void test_orin_nano_r36(void **state)
{
	struct env *e = *state;

	open_discover(e, "orin-nano-r36", false);
	assert_int_equal(e->info.n_devices, 1);
	check_board(e, "Orin", 8, 7, "ampere");
	/* JetPack 6 without NVML: the one /dev/nvidia<N> is the iGPU's. */
	assert_int_equal(igpu(e)->n_nodes, 1);
	assert_string_equal(igpu(e)->nodes[0], "/dev/nvidia0");
}

static void test_orin_nano_r36_nvml(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, "orin-nano-r36", true);
	assert_string_equal(e->b->ops->name, "tegra");
	assert_int_equal(e->info.n_devices, 1);
	check_board(e, "Orin (nvgpu)", 8, 7, "ampere");
	assert_string_equal(igpu(e)->nodes[0], "/dev/nvidia0");
	assert_string_equal(e->info.driver_version, "540.4.0");
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
}

static void test_agx_thor_r38(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, "agx-thor-r38", true);
	assert_int_equal(e->info.n_devices, 1);
	/* NVML answers NOT_SUPPORTED for memory: MemTotal it is. */
	check_board(e, "NVIDIA Thor", 11, 0, "blackwell");
	assert_string_equal(igpu(e)->pci_bus_id, "00000000:01:00.0");
	assert_true(igpu(e)->events_supported);
	assert_int_equal(e->b->ops->events_open(e->b), 0);
	e->b->ops->events_close(e->b);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(s.util_gpu == 37); /* NVML's answer, kept */
}

static void test_thor_dgpu(void **state)
{
	struct env *e = *state;
	const struct gpu_device *d;
	struct gpu_sample s;

	open_discover(e, "thor-dgpu", true);
	assert_int_equal(e->info.n_devices, 2);
	check_board(e, "NVIDIA Thor", 11, 0, "blackwell");
	/* NVML's order: the card (minor 0) first, the iGPU (minor 1) second. */
	d = &e->info.devices[0];
	assert_false(d->integrated);
	assert_string_equal(d->uuid, "GPU-1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f");
	assert_string_equal(d->name, "NVIDIA RTX 4000 SFF Ada Generation");
	assert_string_equal(d->nodes[0], "/dev/nvidia0");
	assert_ptr_not_equal(d->container, igpu(e)->container);
	assert_int_equal(d->index, 0);
	assert_int_equal(igpu(e)->index, 1);
	assert_string_equal(igpu(e)->nodes[0], "/dev/nvidia1");
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	assert_int_equal(e->b->ops->probe(e->b, 1), 0);
	assert_int_equal(e->b->ops->probe(e->b, 2), -EINVAL);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(s.util_gpu == 12);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 1, &s), 0);
	assert_true(s.util_gpu == 37);
	assert_int_equal(e->b->ops->distance(e->b, 1, 1), 0);
}

/* A card in MIG mode beside Thor's iGPU: left out of service, kept for GFD's labels. */
static void test_thor_mig_card(void **state)
{
	struct env *e = *state;

	open_discover(e, "thor-mig-card", true);
	assert_int_equal(e->info.n_devices, 1);
	assert_true(igpu(e)->integrated);
	assert_int_equal(e->info.n_skipped, 1);
	assert_non_null(strstr(e->info.skipped[0], "MIG"));
	assert_int_equal(e->info.n_mig_devices, 1);
	assert_string_equal(e->info.mig_devices[0].uuid,
			    "GPU-6b000000-0000-4000-8000-000000000006");
	assert_true(e->info.mig_devices[0].mig_capable);
}

static void test_arm64_server(void **state)
{
	struct env *e = *state;
	struct gpu_board board;
	struct gpu_backend *t = NULL;
	struct gpu_backend_opts o = { .kind = GPU_BACKEND_TEGRA };
	char *err = NULL;

	open_discover(e, "arm64-server", true);
	assert_string_equal(e->b->ops->name, "nvml");
	assert_int_equal(e->info.n_devices, 1);
	assert_false(e->info.devices[0].integrated);
	assert_false(e->info.board.tegra);
	assert_int_equal(tegra_board_read(e->root, &board), 0);
	assert_false(board.tegra);
	o.host_root = e->root;
	assert_int_equal(tegra_open(&o, NULL, &t, &err), -ENODEV);
	assert_non_null(err);
	free(err);
	/* The Tegra kind on a host without Tegra files: -ENODEV, NVML closed. */
	gpu_info_release(&e->info);
	gpu_backend_close(e->b);
	e->b = NULL;
	assert_int_equal(open_root(e, GPU_BACKEND_TEGRA, true, 0, NULL), -ENODEV);
	/* AUTO without NVML and without Tegra: NVML's error. */
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), -ENOENT);
}

static void test_kinds(void **state)
{
	struct env *e = *state;

	use_board(e, "orin-nano-r36", false);
	/* NVML kind: NVML alone, the iGPU as NVML lists it. */
	assert_int_equal(open_root(e, GPU_BACKEND_NVML, true, 0, NULL), 0);
	assert_string_equal(e->b->ops->name, "nvml");
	gpu_backend_close(e->b);
	e->b = NULL;
	/* Tegra kind without NVML: Tegra alone. */
	assert_int_equal(open_root(e, GPU_BACKEND_TEGRA, false, 0, NULL), 0);
	assert_string_equal(e->b->ops->name, "tegra");
	discover(e);
	assert_string_equal(igpu(e)->name, "Orin");
}

static void test_carve_out_and_id(void **state)
{
	struct env *e = *state;

	use_board(e, "xavier-nx-r35", false);
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 2048, "jetson-0"), 0);
	discover(e);
	assert_int_equal(igpu(e)->mem_total, (uint64_t)2048 * 1024 * 1024);
	assert_string_equal(igpu(e)->uuid, "jetson-0");
	gpu_backend_close(e->b);
	e->b = NULL;
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, "tegra::1"), -EINVAL);
	/* A host root that is not there: said, whatever the kind (not taken for "no Tegra"). */
	(void)snprintf(e->root, sizeof(e->root), "%s/no-such-root", e->dir);
	assert_int_equal(open_root(e, GPU_BACKEND_TEGRA, false, 0, NULL), -ENOENT);
	assert_non_null(strstr(e->err, "cannot open the host root"));
	assert_non_null(strstr(e->err, "edgegpu.hostRoot"));
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), -ENOENT);
	assert_non_null(strstr(e->err, "no-such-root"));
	use_board(e, "xavier-nx-r35", false);
	assert_int_equal(open_root(e, GPU_BACKEND_TEGRA, false, 0, "-tegra"), -EINVAL);
	assert_false(gpu_device_id_valid("tegra/0"));
	assert_false(gpu_device_id_valid(""));
	assert_true(gpu_device_id_valid("a"));
	assert_true(gpu_device_id_valid("tegra:0.igpu_x-1"));
}

/* --- hostile trees --- */

enum damage {
	MISSING,
	GARBAGE,
	HUGE,
	DIRECTORY,
	DAMAGE_COUNT
};

static void damage(struct env *e, const char *rel, enum damage how)
{
	char path[512];

	(void)snprintf(path, sizeof(path), "%s/%s", e->root, rel);
	sh("rm -rf '%s'", path);
	switch (how) {
	case MISSING:
		break;
	case GARBAGE:
		sh("head -c 300 /dev/urandom > '%s'; printf '\\0\\377# R\\n' >> '%s'", path, path);
		break;
	case HUGE:
		sh("head -c 3000000 /dev/zero | tr '\\0' 'R' > '%s'", path);
		break;
	case DIRECTORY:
		sh("mkdir -p '%s/x'", path);
		break;
	default:
		break;
	}
}

static void restore(struct env *e, const char *board, const char *rel)
{
	sh("rm -rf '%s/%s' && cp -a '%s/%s/%s' '%s/%s'", e->root, rel, boards_dir(), board, rel,
	   e->root, rel);
}

static void test_hostile_files(void **state)
{
	static const char *const files[] = {
		"etc/nv_tegra_release",
		"sys/devices/soc0/family",
		"sys/devices/soc0/soc_id",
		"sys/firmware/devicetree/base/model",
		"sys/firmware/devicetree/base/compatible",
		"etc/nvpmodel.conf",
		"var/lib/nvpmodel/status",
		"proc/meminfo",
	};
	struct env *e = *state;

	use_board(e, "orin-nano-r36", true);
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), 0);
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		for (enum damage how = 0; how < DAMAGE_COUNT; how++) {
			struct gpu_board b;
			const struct gpu_device *d;

			damage(e, files[i], how);
			/* The other files still say Tegra; the damaged one's fields are empty. */
			assert_int_equal(tegra_board_read(e->root, &b), 1);
			assert_true(b.tegra);
			if (i == 0)
				assert_string_equal(b.l4t, "");
			if (i == 3)
				assert_string_equal(b.model, "");
			if (i == 2 || i == 4) /* one of the two still names the SoC */
				assert_string_equal(b.soc, "tegra234");
			if ((i == 5 || i == 6) && !streq(b.power_mode, ""))
				fail_msg("%s damaged %d: power mode %s", files[i], how,
					 b.power_mode);
			/* The GPU is still served, and healthy: telemetry is no health. */
			discover(e);
			assert_int_equal(e->info.n_devices, 1);
			d = igpu(e);
			assert_string_equal(d->uuid, "tegra");
			if (i == 7)
				assert_int_equal(d->mem_total, 0);
			else
				assert_int_equal(d->mem_total, expect_u64(e, "mem_total"));
			assert_int_equal(e->b->ops->probe(e->b, 0), 0);
			restore(e, "orin-nano-r36", files[i]);
		}
}

static void test_release_truncated(void **state)
{
	struct env *e = *state;
	struct gpu_board b;
	char l4t[32];
	int major;

	use_board(e, "nano-r32", true);
	sh("printf '# R' > '%s/etc/nv_tegra_release'", e->root);
	assert_int_equal(tegra_board_read(e->root, &b), 1);
	assert_string_equal(b.l4t, "");
	assert_int_equal(b.l4t_major, 0);
	assert_string_equal(b.jetpack, "");
	assert_string_equal(b.soc, "tegra210");
	/* The parser on its own: bounded by the length, not by a NUL. */
	assert_int_equal(tegra_parse_release("# R36 (release), REVISION: 4.3, X", 27, l4t,
					     sizeof(l4t), &major),
			 -EBADMSG);
	assert_int_equal(tegra_parse_release("# R36 (release), REVISION: 4.3, X", 33, l4t,
					     sizeof(l4t), &major),
			 0);
	assert_string_equal(l4t, "36.4.3");
	assert_int_equal(major, 36);
	assert_string_equal(tegra_jetpack_of("38.2.1"), "7.0");
	assert_string_equal(tegra_jetpack_of("38.20"), "");
	assert_string_equal(tegra_soc_of_chip(38), "tegra264");
	assert_string_equal(tegra_soc_of_chip(36), "");
}

static void test_links_stay_in_root(void **state)
{
	struct env *e = *state;
	struct gpu_board b;
	char outside[128];

	use_board(e, "orin-nano-r36", true);
	/* A link to an absolute path outside the root reads that path inside the root: none. */
	(void)snprintf(outside, sizeof(outside), "%s/outside-model", e->dir);
	sh("printf 'EVIL\\0' > '%s'", outside);
	sh("rm '%s/sys/firmware/devicetree/base/model' && ln -s '%s' "
	   "'%s/sys/firmware/devicetree/base/model'",
	   e->root, outside, e->root);
	assert_int_equal(tegra_board_read(e->root, &b), 1);
	assert_string_equal(b.model, "");
	/* proc/device-tree, an absolute link, is followed inside the root. */
	sh("rm -rf '%s/sys/firmware/devicetree/base/model' '%s/proc/device-tree' && "
	   "mkdir '%s/dt2' && printf 'Model via proc\\0' > '%s/dt2/model' && "
	   "ln -s /dt2 '%s/proc/device-tree'",
	   e->root, e->root, e->root, e->root, e->root);
	assert_int_equal(tegra_board_read(e->root, &b), 1);
	assert_string_equal(b.model, "Model via proc");
}

static void test_node_gone_and_back(void **state)
{
	struct env *e = *state;

	use_board(e, "orin-nano-r36", true);
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), 0);
	discover(e);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	sh("mv '%s/dev/nvhost-ctrl-gpu' '%s/gone'", e->root, e->dir);
	assert_int_equal(e->b->ops->probe(e->b, 0), -ENODEV);
	sh("mv '%s/gone' '%s/dev/nvhost-ctrl-gpu'", e->dir, e->root);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	/* No node at all at discovery: served, unhealthy until one comes. */
	sh("mv '%s/dev' '%s/dev-away'", e->root, e->dir);
	discover(e);
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->b->ops->probe(e->b, 0), -ENODEV);
	sh("mv '%s/dev-away' '%s/dev'", e->dir, e->root);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
}

static void test_late_devfreq(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;
	bool sysfs;

	use_board(e, "orin-nano-r36", true);
	/* Whether sysfs gives clocks at all (tegra-sample.c may still be a skeleton). */
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), 0);
	discover(e);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	sysfs = !isnan(s.sm_clock_mhz);
	gpu_info_release(&e->info);
	gpu_backend_close(e->b);
	e->b = NULL;
	sh("mv '%s/sys/class/devfreq' '%s/devfreq-away' && mv "
	   "'%s/sys/devices/platform/bus@0/17000000.gpu/devfreq' '%s/devfreq-dev-away'",
	   e->root, e->dir, e->root, e->dir);
	assert_int_equal(open_root(e, GPU_BACKEND_AUTO, false, 0, NULL), 0);
	discover(e);
	/* Early boot: served and healthy without devfreq. */
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(isnan(s.sm_clock_mhz));
	sh("mv '%s/devfreq-away' '%s/sys/class/devfreq' && mv '%s/devfreq-dev-away' "
	   "'%s/sys/devices/platform/bus@0/17000000.gpu/devfreq'",
	   e->dir, e->root, e->dir, e->root);
	gpu_sample_init(&s);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	if (!sysfs) {
		print_message("tegra_paths_find() finds nothing yet: late devfreq not checked\n");
		return;
	}
	assert_true(s.sm_clock_mhz == 612);
	/* Found, then gone: the GPU's driver went away. */
	sh("mv '%s/sys/devices/platform/bus@0/17000000.gpu/devfreq' '%s/devfreq-dev-away'", e->root,
	   e->dir);
	assert_int_equal(e->b->ops->probe(e->b, 0), -ENODEV);
}

/*
 * Samples on a thread while discovery replaces the Tegra backend's own tables (its slots and
 * its reference-counted telemetry paths): no use after free (ASan), no race (TSan). A board
 * without NVML: NVML's own contract is that discovery never runs beside a probe that has not
 * yet made its first library call (gpu-backend.h), which a free-running thread would break.
 */
struct sampler {
	struct gpu_backend *b;
	atomic_bool stop;
	unsigned n;
};

static void *sample_loop(void *u)
{
	struct sampler *s = u;

	while (!atomic_load(&s->stop)) {
		struct gpu_sample x;

		gpu_sample_init(&x);
		(void)s->b->ops->sample(s->b, 0, &x);
		(void)s->b->ops->probe(s->b, 0);
		s->n++;
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct env *e = *state;
	struct sampler s = { 0 };
	pthread_t th;

	open_discover(e, "orin-nano-r36", false);
	s.b = e->b;
	assert_int_equal(pthread_create(&th, NULL, sample_loop, &s), 0);
	for (int i = 0; i < 30; i++)
		discover(e);
	atomic_store(&s.stop, true);
	assert_int_equal(pthread_join(th, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nano_r32, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xavier_nx_r35, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orin_nano_r36, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orin_nano_r36_nvml, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agx_thor_r38, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thor_dgpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thor_mig_card, setup, teardown),
		cmocka_unit_test_setup_teardown(test_arm64_server, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_carve_out_and_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links_stay_in_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_gone_and_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_devfreq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
