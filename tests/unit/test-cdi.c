#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi-writer.h"
#include "cdi.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu.h"
#include "log.h"
#include "loop.h"
#include "mount-specs.h"
#include "nvml-int.h"
#include "oom.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#define VER   "550.54.15"
#define UUID0 "GPU-abcdef00-1111-2222-3333-444444444440"
#define UUID1 "GPU-abcdef01-1111-2222-3333-444444444441"
#define LIBD  "/usr/lib/x86_64-linux-gnu"

static char tmp[64];
static char root[96]; /* driver root; also the dev root unless a test says otherwise */

/* Two GPUs as the NVML backend describes them. */
static struct gpu_device devices[] = {
	{ .index = 0,
	  .uuid = UUID0,
	  .minor = 3,
	  .nodes = { "/dev/nvidia3" },
	  .n_nodes = 1,
	  .container = &nvml_container },
	{ .index = 1,
	  .uuid = UUID1,
	  .minor = 7,
	  .nodes = { "/dev/nvidia7" },
	  .n_nodes = 1,
	  .container = &nvml_container },
};
static struct gpu_info info = {
	.driver_version = VER, .n_devices = 2, .devices = devices, .container = &nvml_container
};

static int setup(void **state)
{
	unit_tmpdir("test-cdi", tmp, sizeof(tmp));
	(void)snprintf(root, sizeof(root), "%s/driver", tmp);
	return 0;
}

static int teardown(void **state)
{
	unit_rm_tree(tmp);
	return 0;
}

/* The fake driver root of every test: some libraries, another version, nvidia-smi, nodes. */
static void make_root(const char *r)
{
	static const char *const files[] = {
		LIBD "/libcuda.so." VER,
		LIBD "/libcuda.so.535.104.05",
		LIBD "/libnvidia-ml.so." VER,
		LIBD "/libnvidia-nvvm.so." VER,
		LIBD "/libnvidia-gpucomp.so." VER,
		LIBD "/libnvidia-cfg.so." VER "/", /* a directory: not a library */
		"/lib64/libnvidia-ptxjitcompiler.so." VER,
		"/usr/bin/nvidia-smi",
		"/dev/nvidiactl",
		"/dev/nvidia-uvm",
		"/dev/nvidia3",
		"/dev/nvidia7",
	};

	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		unit_make_path(r, files[i]);
}

/* Replaces every "@R@" in @t with @r and every "@D@" with @d. */
static char *expand(const char *t, const char *r, const char *d)
{
	struct buf b = { 0 };

	for (const char *p = t; *p;) {
		if (strncmp(p, "@R@", 3) == 0 || strncmp(p, "@D@", 3) == 0) {
			const char *s = p[1] == 'R' ? r : d;

			assert_int_equal(buf_append(&b, s, strlen(s)), 0);
			p += 3;
		} else {
			assert_int_equal(buf_append(&b, p, 1), 0);
			p++;
		}
	}
	assert_int_equal(buf_append(&b, "", 1), 0);
	return (char *)b.data;
}

#define MOUNT(host, ctr)                            \
	"      {\n"                                 \
	"        \"hostPath\": \"@R@" host "\",\n"  \
	"        \"containerPath\": \"" ctr "\",\n" \
	"        \"options\": [\n"                  \
	"          \"ro\",\n"                       \
	"          \"nosuid\",\n"                   \
	"          \"nodev\",\n"                    \
	"          \"bind\"\n"                      \
	"        ]\n"                               \
	"      }"

#define DEVICE(name, node)                            \
	"    {\n"                                     \
	"      \"name\": \"" name "\",\n"             \
	"      \"containerEdits\": {\n"               \
	"        \"deviceNodes\": [\n"                \
	"          {\n"                               \
	"            \"path\": \"" node "\",\n"       \
	"            \"hostPath\": \"@D@" node "\"\n" \
	"          }\n"                               \
	"        ]\n"                                 \
	"      }\n"                                   \
	"    }"

#define NODE(node)                                \
	"      {\n"                               \
	"        \"path\": \"" node "\",\n"       \
	"        \"hostPath\": \"@D@" node "\"\n" \
	"      }"

/* The whole spec for the 2-GPU info over make_root(), devices named by @a and @b. */
#define SPEC(a, b, hooks)                                                                                                                                                                                                                                                                                                                                                 \
	"{\n"                                                                                                                                                                                                                                                                                                                                                             \
	"  \"cdiVersion\": \"0.5.0\",\n"                                                                                                                                                                                                                                                                                                                                  \
	"  \"kind\": \"k8s.device-plugin.nvidia.com/gpu\",\n"                                                                                                                                                                                                                                                                                                             \
	"  \"devices\": [\n" DEVICE(a, "/dev/nvidia3") ",\n" DEVICE(                                                                                                                                                                                                                                                                                                      \
		b,                                                                                                                                                                                                                                                                                                                                                        \
		"/dev/nvidia7") "\n"                                                                                                                                                                                                                                                                                                                                      \
				"  ],\n"                                                                                                                                                                                                                                                                                                                                  \
				"  \"containerEdits\": {\n"                                                                                                                                                                                                                                                                                                               \
				"    \"env\": [\n"                                                                                                                                                                                                                                                                                                                        \
				"      \"NVIDIA_VISIBLE_DEVICES=void\"\n"                                                                                                                                                                                                                                                                                                 \
				"    ],\n"                                                                                                                                                                                                                                                                                                                                \
				"    \"deviceNodes\": [\n" NODE("/dev/nvidiactl") ",\n" NODE(                                                                                                                                                                                                                                                                             \
					"/dev/nvidia-uvm") "\n"                                                                                                                                                                                                                                                                                                           \
							   "    ],\n"                                                                                                                                                                                                                                                                                                     \
							   "    \"mounts\": [\n" MOUNT(LIBD "/libcuda.so." VER, LIBD "/libcuda.so." VER) ",\n" MOUNT(LIBD "/libcuda.so." VER, LIBD "/libcuda.so.1") ",\n" MOUNT(LIBD "/libnvidia-ml.so." VER, LIBD "/libnvidia-ml.so." VER) ",\n" MOUNT(                                                                                  \
								   LIBD "/libnvidia-ml.so." VER,                                                                                                                                                                                                                                                                          \
								   LIBD                                                                                                                                                                                                                                                                                                   \
								   "/libnvidia-ml.so.1") ",\n" MOUNT("/lib64/libnvidia-ptxjitcompiler.so." VER,                                                                                                                                                                                                                           \
												     "/lib64/libnvidia-ptxjitcompiler.so." VER) ",\n" MOUNT("/lib64/libnvidia-ptxjitcompiler.so." VER,                                                                                                                                                                    \
																			    "/lib64/libnvidia-ptxjitcompiler.so.1") ",\n" MOUNT(LIBD                                                                                                                                                      \
																										"/libnvidia-nvvm.so." VER,                                                                                                                                \
																										LIBD                                                                                                                                                      \
																										"/libnvidia-nvvm.so." VER) ",\n" MOUNT(LIBD                                                                                                               \
																														       "/libnvidia-nvvm.so." VER,                                                                                         \
																														       LIBD                                                                                                               \
																														       "/libnvidia-nvvm.so.4") ",\n" MOUNT(LIBD                                                                           \
																																			   "/libnvidia-gpucomp.so." VER,                                                  \
																																			   LIBD                                                                           \
																																			   "/libnvidia-gpucomp.so." VER) ",\n" MOUNT("/usr/bin/nvidia-smi",               \
																																								     "/usr/bin/nvidia-smi") "\n"          \
																																											    "    ]" hooks \
																																											    "\n"          \
																																											    "  }\n"       \
																																											    "}\n"

static void assert_render(const struct cdi_opts *o, const char *tmpl, const char *r, const char *d)
{
	struct buf out = { 0 };
	char *want = expand(tmpl, r, d);
	char *err = NULL;

	assert_int_equal(buf_append(&out, "keep:", 5), 0);
	assert_int_equal(cdi_spec_render(o, &info, &out, &err), 0);
	assert_null(err);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_int_equal(strncmp((char *)out.data, "keep:", 5), 0); /* appended */
	assert_string_equal((char *)out.data + 5, want);
	free(want);
	buf_release(&out);
}

static void test_render(void **state)
{
	struct cdi_opts o = { .driver_root = root, .id_strategy = ALLOC_ID_UUID };

	make_root(root);
	assert_render(&o, SPEC(UUID0, UUID1, ""), root, root);

	/* Index names, and a trailing slash on the root changes no path. */
	{
		char slash[128];

		(void)snprintf(slash, sizeof(slash), "%s//", root);
		o.driver_root = slash;
		o.id_strategy = ALLOC_ID_INDEX;
		assert_render(&o, SPEC("0", "1", ""), root, root);
	}
}

static void test_render_dev_root(void **state)
{
	char dev[128];
	struct cdi_opts o = { .driver_root = root };

	/* The nodes are looked up and pointed at under the dev root, the files under the driver root. */
	make_root(root);
	(void)snprintf(dev, sizeof(dev), "%s/devroot", tmp);
	unit_make_path(dev, "/dev/nvidiactl");
	unit_make_path(dev, "/dev/nvidia-uvm");
	o.dev_root = dev;
	assert_render(&o, SPEC(UUID0, UUID1, ""), root, dev);

	/* With only nvidia-uvm-tools and modeset there, exactly those two are listed. */
	(void)snprintf(dev, sizeof(dev), "%s/devroot2", tmp);
	unit_make_path(dev, "/dev/nvidia-uvm-tools");
	unit_make_path(dev, "/dev/nvidia-modeset");
	{
		struct buf out = { 0 };
		char *want = expand("\"deviceNodes\": [\n" NODE("/dev/nvidia-uvm-tools") ",\n" NODE(
					    "/dev/nvidia-modeset") "\n    ],\n    \"mounts\"",
				    root, dev);

		assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), 0);
		assert_int_equal(buf_append(&out, "", 1), 0);
		assert_non_null(strstr((char *)out.data, want));
		free(want);
		buf_release(&out);
	}

	/* No control node at all: no common deviceNodes key. */
	(void)snprintf(dev, sizeof(dev), "%s/devroot3", tmp);
	unit_make_path(dev, "/dev/");
	{
		struct buf out = { 0 };

		assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), 0);
		assert_int_equal(buf_append(&out, "", 1), 0);
		assert_non_null(strstr((char *)out.data, "\"env\": [\n      "
							 "\"NVIDIA_VISIBLE_DEVICES=void\"\n    ],\n"
							 "    \"mounts\""));
		buf_release(&out);
	}
}

static void test_ldcache_hook(void **state)
{
	struct cdi_opts o = { .driver_root = root, .ldcache_hook_path = "/usr/bin/nvidia-ctk" };

	make_root(root);
	assert_render(&o,
		      SPEC(UUID0, UUID1,
			   ",\n"
			   "    \"hooks\": [\n"
			   "      {\n"
			   "        \"hookName\": \"createContainer\",\n"
			   "        \"path\": \"/usr/bin/nvidia-ctk\",\n"
			   "        \"args\": [\n"
			   "          \"nvidia-ctk\",\n"
			   "          \"hook\",\n"
			   "          \"update-ldcache\",\n"
			   "          \"--folder\",\n"
			   "          \"" LIBD "\",\n"
			   "          \"--folder\",\n"
			   "          \"/lib64\"\n"
			   "        ]\n"
			   "      }\n"
			   "    ]"),
		      root, root);
}

static void test_missing_libcuda(void **state)
{
	char other[128], want[256];
	struct cdi_opts o = { .driver_root = root };
	struct buf out = { 0 };
	char *err = NULL;

	/* Only a libcuda of another version: that is not the driver's. */
	(void)snprintf(other, sizeof(other), "%s/other-root", tmp);
	unit_make_path(other, LIBD "/libcuda.so.535.104.05");
	unit_make_path(other, LIBD "/libnvidia-ml.so." VER);
	o.driver_root = other;
	assert_int_equal(cdi_spec_render(&o, &info, &out, &err), -ENOENT);
	(void)snprintf(want, sizeof(want), "failed to locate libcuda.so." VER " under %s", other);
	assert_non_null(err);
	assert_string_equal(err, want);
	assert_int_equal(out.len, 0);
	free(err);
	err = NULL;

	/* cdi_spec_write fails the same way and writes nothing. */
	(void)snprintf(want, sizeof(want), "%s/missing-spec-dir", tmp);
	o.spec_dir = want;
	assert_int_equal(cdi_spec_write(&o, &info, &err), -ENOENT);
	assert_non_null(strstr(err, "failed to locate libcuda.so." VER));
	assert_int_equal(access(want, F_OK), -1);
	free(err);
}

/*
 * A backend with other device nodes and driver files (a Jetson, say) gets a spec from its own
 * description: its GPU's nodes, its control nodes that exist, its libraries where it says
 * they live, and nothing of NVML's.
 */
static void test_other_backend(void **state)
{
	static const char *const ctl[] = { "/dev/nvmap", "/dev/nvhost-ctrl" };
	static const struct gpu_driver_lib libs[] = { { "libnvrm_gpu.so", NULL, true },
						      { "libcuda.so", "libcuda.so.1", false } };
	static const char *const lib_dirs[] = { "/usr/lib/aarch64-linux-gnu/nvidia" };
	static const struct gpu_container tegra = { .ctl_nodes = ctl,
						    .n_ctl_nodes = ELEMENTSOF(ctl),
						    .libs = libs,
						    .n_libs = ELEMENTSOF(libs),
						    .lib_dirs = lib_dirs,
						    .n_lib_dirs = ELEMENTSOF(lib_dirs) };
	struct gpu_device igpu = { .index = 0,
				   .uuid = "GPU-tegra-0",
				   .nodes = { "/dev/nvhost-gpu", "/dev/nvhost-as-gpu" },
				   .n_nodes = 2,
				   .container = &tegra };
	struct gpu_info ti = {
		.driver_version = "36.4.3", .n_devices = 1, .devices = &igpu, .container = &tegra
	};
	struct cdi_opts o = { .driver_root = root };
	struct buf out = { 0 };
	char *want, *err = NULL;

	unit_make_path(root, "/usr/lib/aarch64-linux-gnu/nvidia/libnvrm_gpu.so.36.4.3");
	unit_make_path(root, "/dev/nvmap");
	want = expand(
		"{\n"
		"  \"cdiVersion\": \"0.5.0\",\n"
		"  \"kind\": \"k8s.device-plugin.nvidia.com/gpu\",\n"
		"  \"devices\": [\n"
		"    {\n"
		"      \"name\": \"GPU-tegra-0\",\n"
		"      \"containerEdits\": {\n"
		"        \"deviceNodes\": [\n"
		"          {\n"
		"            \"path\": \"/dev/nvhost-gpu\",\n"
		"            \"hostPath\": \"@D@/dev/nvhost-gpu\"\n"
		"          },\n"
		"          {\n"
		"            \"path\": \"/dev/nvhost-as-gpu\",\n"
		"            \"hostPath\": \"@D@/dev/nvhost-as-gpu\"\n"
		"          }\n"
		"        ]\n"
		"      }\n"
		"    }\n"
		"  ],\n"
		"  \"containerEdits\": {\n"
		"    \"env\": [\n"
		"      \"NVIDIA_VISIBLE_DEVICES=void\"\n"
		"    ],\n"
		"    \"deviceNodes\": [\n" NODE(
			"/dev/nvmap") "\n"
				      "    ],\n"
				      "    \"mounts\": [\n" MOUNT(
					      "/usr/lib/aarch64-linux-gnu/nvidia/libnvrm_gpu.so.36.4.3",
					      "/usr/lib/aarch64-linux-gnu/nvidia/libnvrm_gpu.so.36.4.3") "\n"
													 "    ]\n"
													 "  }\n"
													 "}\n",
		root, root);
	assert_int_equal(cdi_spec_render(&o, &ti, &out, &err), 0);
	assert_null(err);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_string_equal((char *)out.data, want);
	free(want);
	buf_release(&out);

	/* Its required library, not NVML's libcuda, is the one whose absence fails the spec. */
	o.driver_root = tmp;
	assert_int_equal(cdi_spec_render(&o, &ti, &out, &err), -ENOENT);
	assert_non_null(strstr(err, "libnvrm_gpu.so.36.4.3"));
	assert_int_equal(out.len, 0);
	free(err);
	err = NULL;

	/*
	 * A control node that is the GPU's own node (an R32 Jetson's primary node) is in the
	 * device's edits only; a backend that lists no library needs no driver version.
	 */
	{
		static const struct gpu_container no_libs = { .ctl_nodes = ctl,
							      .n_ctl_nodes = ELEMENTSOF(ctl) };
		const char *first;

		o.driver_root = root;
		igpu.container = &no_libs;
		ti.container = &no_libs;
		(void)snprintf(igpu.nodes[0], sizeof(igpu.nodes[0]), "/dev/nvmap");
		igpu.n_nodes = 1;
		ti.driver_version[0] = 0;
		assert_int_equal(cdi_spec_render(&o, &ti, &out, &err), 0);
		assert_null(err);
		assert_int_equal(buf_append(&out, "", 1), 0);
		first = strstr((char *)out.data, "\"/dev/nvmap\"");
		assert_non_null(first);
		assert_null(strstr(first + 1, "\"/dev/nvmap\""));
		assert_true(first < strstr((char *)out.data, "\"NVIDIA_VISIBLE_DEVICES=void\""));
		buf_release(&out);
		/* With libraries listed, an empty version is still refused. */
		ti.container = &tegra;
		igpu.container = &tegra;
		assert_int_equal(cdi_spec_render(&o, &ti, &out, &err), -EINVAL);
		assert_non_null(strstr(err, "driver version"));
		free(err);
	}
}

#define CSV_DIR "/etc/nvidia-container-runtime/host-files-for-container.d"
#define TEGRA	"/usr/lib/aarch64-linux-gnu/tegra"

static void symlink_at(const char *base, const char *rel, const char *target)
{
	char path[512];

	unit_make_path(base, rel);
	(void)snprintf(path, sizeof(path), "%s%s", base, rel);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(target, path), 0);
}

/* Renders with stderr (the log) captured into @log (NUL-terminated, @size bytes). */
static int render_logged(const struct cdi_opts *o, const struct gpu_info *i, struct buf *out,
			 char *log, size_t size)
{
	enum log_level level = log_max_level;
	FILE *f = tmpfile();
	int saved, r;
	size_t len;

	assert_non_null(f);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0 && dup2(fileno(f), STDERR_FILENO) >= 0);
	log_max_level = LOG_LEVEL_INFO;
	r = cdi_spec_render(o, i, out, NULL);
	log_max_level = level;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(f);
	len = fread(log, 1, size - 1, f);
	log[len] = '\0';
	(void)fclose(f);
	return r;
}

/*
 * A container description with node patterns and CSV mount specs (as a Jetson's, built here):
 * the patterns' and the CSV dev lines' matches join the control nodes (each once, sorted, a
 * GPU's own node left to its device), the CSV lib/sym/dir entries that are there inside the
 * root are mounted like libraries (each once), and every bad file or line is skipped, logged
 * with its file and line.
 */
static void test_node_globs_and_csv(void **state)
{
	static const char *const ctl[] = { "/dev/nvmap" };
	static const char *const globs[] = { "/dev/nvhost-*", "/dev/none*", "nvhost-*" };
	static const struct gpu_container tegra = { .ctl_nodes = ctl,
						    .n_ctl_nodes = ELEMENTSOF(ctl),
						    .node_globs = globs,
						    .n_node_globs = ELEMENTSOF(globs),
						    .mount_specs_dir = CSV_DIR };
	static const char devices_csv[] = "dev, /dev/nvgpu/igpu0/*\r\n"
					  "dev, /dev/nvmap\r\n"
					  "dev, /dev/nvhost-ctrl\r\n"
					  "dev, /dev/gpudir*\r\n"
					  "dev, /dev/v4l2-none\r\n";
	static const char drivers_csv[] = "lib, " TEGRA "/libcuda.so.1.1\n"
					  "sym, " TEGRA "/libcuda.so\n"
					  "sym, /usr/lib/dangling.so\n"
					  "dir, /usr/share/nvidia\n"
					  "lib, /usr/lib/missing.so\n"
					  "dir, " TEGRA "/libcuda.so.1.1\n" /* not a directory */
					  "  lib ,\t" TEGRA "/libcuda.so.1.1  \n"
					  "# a comment\n"
					  "\n"
					  "lib /usr/lib/no-comma.so\n"
					  "foo, /usr/lib/x.so\n"
					  "lib, ../etc/hostname\n"
					  "lib, /usr/../../etc/hostname\n"
					  "lib, usr/lib/relative.so\n"
					  "lib, /\n"
					  "lib,\n"
					  "lib, /usr/lib/\xff.so\n";
	static const char l4t_csv[] = "lib, " TEGRA "/libcuda.so.1.1\n"
				      "sym, /usr/lib/abs.so\n"
				      "sym, /usr/lib/out.so\n";
	struct gpu_device igpu = {
		.uuid = "tegra", .nodes = { "/dev/nvhost-gpu" }, .n_nodes = 1, .container = &tegra
	};
	struct gpu_info ti = {
		.driver_version = "36.4.3", .n_devices = 1, .devices = &igpu, .container = &tegra
	};
	char r2[128], outside[160], log[8192];
	struct cdi_opts o = { .driver_root = r2 };
	struct buf out = { 0 }, huge = { 0 };
	char *want;

	(void)snprintf(r2, sizeof(r2), "%s/tegra", tmp);
	(void)snprintf(outside, sizeof(outside), "%s/outside.so", tmp);
	unit_make_path(tmp, "/outside.so");
	for (const char *const *f =
		     (const char *const[]){ "/dev/nvmap", "/dev/nvhost-ctrl", "/dev/nvhost-gpu",
					    "/dev/nvgpu/igpu0/ctrl", "/dev/nvgpu/igpu0/as",
					    "/dev/gpudir0/", "/usr/share/nvidia/",
					    "/usr/lib/hidden.so", "/etc/hostname", NULL };
	     *f; f++)
		unit_make_path(r2, *f);
	unit_make_path(r2, TEGRA "/libcuda.so.1.1");
	symlink_at(r2, TEGRA "/libcuda.so", "libcuda.so.1.1");
	symlink_at(r2, "/usr/lib/dangling.so", "/nowhere/libx.so");
	symlink_at(r2, "/usr/lib/abs.so", TEGRA "/libcuda.so.1.1"); /* resolved in the root */
	symlink_at(r2, "/usr/lib/out.so", outside); /* there outside the root only */
	unit_write_at(r2, CSV_DIR "/devices.csv", devices_csv, sizeof(devices_csv) - 1);
	unit_write_at(r2, CSV_DIR "/drivers.csv", drivers_csv, sizeof(drivers_csv) - 1);
	unit_write_at(r2, CSV_DIR "/l4t.csv", l4t_csv, sizeof(l4t_csv) - 1);
	unit_write_at(r2, CSV_DIR "/.csv", "lib, /usr/lib/hidden.so\n", 24);
	unit_write_at(r2, CSV_DIR "/notes.txt", "lib, /usr/lib/hidden.so\n", 24);
	unit_write_at(r2, CSV_DIR "/devices.csv.bak", "lib, /usr/lib/hidden.so\n", 24);
	unit_make_path(r2, CSV_DIR "/dir.csv/");
	while (huge.len <= MOUNT_SPECS_FILE_MAX)
		assert_int_equal(buf_append(&huge, "lib, /usr/lib/hidden.so\n", 24), 0);
	unit_write_at(r2, CSV_DIR "/huge.csv", (const char *)huge.data, huge.len);
	buf_release(&huge);

	want = expand(
		"{\n"
		"  \"cdiVersion\": \"0.5.0\",\n"
		"  \"kind\": \"k8s.device-plugin.nvidia.com/gpu\",\n"
		"  \"devices\": [\n" DEVICE(
			"tegra",
			"/dev/nvhost-gpu") "\n"
					   "  ],\n"
					   "  \"containerEdits\": {\n"
					   "    \"env\": [\n"
					   "      \"NVIDIA_VISIBLE_DEVICES=void\"\n"
					   "    ],\n"
					   "    \"deviceNodes\": [\n" NODE("/dev/nvmap") ",\n" NODE("/dev/nvgpu/igpu0/as") ",\n" NODE("/dev/nvgpu/igpu0/ctrl") ",\n" NODE(
						   "/dev/"
						   "nvhost-"
						   "ctrl") "\n"
							   "    ],\n"
							   "    \"mounts\": [\n" MOUNT(TEGRA "/libcuda.so.1.1", TEGRA "/libcuda.so.1.1") ",\n" MOUNT(
								   TEGRA "/libcuda.so", TEGRA
								   "/libcuda.so") ",\n" MOUNT("/usr/share/nvidia",
											      "/usr/share/"
											      "nvidia") ",\n" MOUNT("/usr/lib/"
														    "abs.so",
														    "/usr/lib/"
														    "abs.so") "\n"
															      "    ]\n"
															      "  }\n"
															      "}\n",
		r2, r2);
	assert_int_equal(render_logged(&o, &ti, &out, log, sizeof(log)), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_string_equal((char *)out.data, want);
	free(want);
	buf_release(&out);
	/* One line per bad file, naming it and its first bad line. */
	assert_non_null(strstr(log,
			       "msg=\"invalid lines skipped in a CSV mount spec\" file=\"" CSV_DIR
			       "/drivers.csv\" line=10 reason=\"no comma"));
	assert_non_null(strstr(log, "invalid_lines=8"));
	assert_non_null(strstr(log, "msg=\"CSV mount spec too large, skipped\""));
	assert_non_null(strstr(log, "file=\"" CSV_DIR "/huge.csv\" max_bytes=1048576"));
	assert_non_null(strstr(log, "file=\"" CSV_DIR "/dir.csv\" is=\"a directory\""));
	assert_null(strstr(log, "hidden"));
	assert_null(strstr(log, "level=error"));

	/* A missing directory is normal; a file in its place is logged; neither fails. */
	{
		static const struct gpu_container missing = { .mount_specs_dir = "/etc/missing.d" };
		static const struct gpu_container file = { .mount_specs_dir = "/etc/hostname" };
		struct gpu_info mi = ti;

		igpu.container = mi.container = &missing;
		assert_int_equal(render_logged(&o, &mi, &out, log, sizeof(log)), 0);
		assert_int_equal(buf_append(&out, "", 1), 0);
		assert_null(strstr((char *)out.data, "libcuda.so.1.1"));
		assert_null(strstr(log, "level=warn"));
		buf_release(&out);
		igpu.container = mi.container = &file;
		assert_int_equal(render_logged(&o, &mi, &out, log, sizeof(log)), 0);
		assert_non_null(strstr(log, "level=warn module=mount-specs msg=\"CSV mount specs "
					    "directory unreadable, its files not mounted\""));
		assert_non_null(strstr(log, "dir=\"/etc/hostname\""));
		buf_release(&out);
	}
}

/* Out of memory anywhere in the patterns and CSV files: -ENOMEM, nothing half written. */
static void test_csv_oom(void **state)
{
	static const char csv[] = "lib, " TEGRA "/libcuda.so.1.1\ndev, /dev/nvhost-gpu\nbad\n";
	static const char *const globs[] = { "/dev/nvhost-*" };
	static const struct gpu_container tegra = { .node_globs = globs,
						    .n_node_globs = ELEMENTSOF(globs),
						    .mount_specs_dir = CSV_DIR };
	struct gpu_device igpu = { .uuid = "tegra", .container = &tegra };
	struct gpu_info ti = {
		.driver_version = "36.4.3", .n_devices = 1, .devices = &igpu, .container = &tegra
	};
	char r2[128];
	struct cdi_opts o = { .driver_root = r2 };
	long n;

	(void)snprintf(r2, sizeof(r2), "%s/tegra-oom", tmp);
	unit_make_path(r2, "/dev/nvhost-ctrl");
	unit_make_path(r2, "/dev/nvhost-gpu");
	unit_make_path(r2, TEGRA "/libcuda.so.1.1");
	unit_write_at(r2, CSV_DIR "/drivers.csv", csv, sizeof(csv) - 1);
	for (n = 0;; n++) {
		struct buf out = { 0 };
		int r;

		oom_fail_at(n);
		r = cdi_spec_render(&o, &ti, &out, NULL);
		oom_off();
		if (r == 0) {
			assert_int_equal(buf_append(&out, "", 1), 0);
			assert_non_null(strstr((char *)out.data, "/dev/nvhost-gpu"));
			assert_non_null(strstr((char *)out.data, "libcuda.so.1.1"));
			buf_release(&out);
			break;
		}
		assert_int_equal(r, -ENOMEM);
		assert_int_equal(out.len, 0);
	}
	assert_true(n > 10);
}

static void test_invalid(void **state)
{
	struct gpu_device bad[] = { { .index = 0, .uuid = "GPU bad name", .minor = 0 } };
	struct gpu_info bad_info = {
		.driver_version = VER, .n_devices = 1, .devices = bad, .container = &nvml_container
	};
	struct gpu_info no_ver = { .n_devices = 2,
				   .devices = devices,
				   .container = &nvml_container };
	struct cdi_opts o = { .driver_root = root };
	struct buf out = { 0 };
	char *err = NULL;

	make_root(root);
	assert_int_equal(cdi_spec_render(&o, &no_ver, &out, &err), -EINVAL);
	assert_non_null(err);
	err = mfree(err);
	(void)snprintf(no_ver.driver_version, sizeof(no_ver.driver_version), "../../x");
	assert_int_equal(cdi_spec_render(&o, &no_ver, &out, NULL), -EINVAL);

	/* A name CDI refuses (ValidateDeviceName) fails here, not in the runtime. */
	assert_int_equal(cdi_spec_render(&o, &bad_info, &out, &err), -EINVAL);
	assert_non_null(err);
	err = mfree(err);
	(void)snprintf(bad[0].uuid, sizeof(bad[0].uuid), "GPU-x-");
	assert_int_equal(cdi_spec_render(&o, &bad_info, &out, NULL), -EINVAL);
	/* ...but the index strategy does not use the UUID. */
	o.id_strategy = ALLOC_ID_INDEX;
	assert_int_equal(cdi_spec_render(&o, &bad_info, &out, NULL), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_non_null(strstr((char *)out.data, "\"name\": \"0\""));
	buf_release(&out);
}

static void test_escaping(void **state)
{
	/* A root with a quote, a backslash and a tab must come out as valid JSON escapes. */
	char odd[128], bad[128];
	struct cdi_opts o = { 0 };
	struct buf out = { 0 };

	(void)snprintf(odd, sizeof(odd), "%s/a\"b\\c\td", tmp);
	unit_make_path(odd, LIBD "/libcuda.so." VER);
	o.driver_root = odd;
	assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_non_null(strstr((char *)out.data, "/a\\\"b\\\\c\\td" LIBD "/libcuda.so." VER "\""));
	assert_null(strchr((char *)out.data, '\t'));
	buf_release(&out);

	/* A root that is not UTF-8 cannot be written as JSON. */
	(void)snprintf(bad, sizeof(bad), "%s/\xff", tmp);
	unit_make_path(bad, LIBD "/libcuda.so." VER);
	o.driver_root = bad;
	assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), -EINVAL);
	assert_int_equal(out.len, 0);
}

static void test_write(void **state)
{
	char dir[128], path[256];
	struct cdi_opts o = { .driver_root = root };
	struct buf want = { 0 };
	struct dirent *de;
	struct stat st;
	size_t len = 0, n = 0;
	char *data = NULL, *err = NULL;
	mode_t old;
	DIR *d;

	make_root(root);
	(void)snprintf(dir, sizeof(dir), "%s/run/cdi", tmp); /* neither part exists yet */
	o.spec_dir = dir;
	old = umask(077); /* the mode is 0644 whatever the umask */
	assert_int_equal(cdi_spec_write(&o, &info, &err), 0);
	umask(old);
	assert_null(err);

	(void)snprintf(path, sizeof(path), "%s/k8s.device-plugin.nvidia.com-gpu.json", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0644);
	/* So are the directories it made: a runtime that is not root still reads the spec. */
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	(void)snprintf(path, sizeof(path), "%s/run", tmp);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	(void)snprintf(path, sizeof(path), "%s/k8s.device-plugin.nvidia.com-gpu.json", dir);
	assert_int_equal(cdi_spec_render(&o, &info, &want, NULL), 0);
	assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
	assert_int_equal(len, want.len);
	assert_memory_equal(data, want.data, len);
	data = mfree(data);

	/* Rewriting replaces the file and leaves no temporary file behind. */
	(void)snprintf(devices[1].nodes[0], sizeof(devices[1].nodes[0]), "/dev/nvidia9");
	assert_int_equal(cdi_spec_write(&o, &info, NULL), 0);
	(void)snprintf(devices[1].nodes[0], sizeof(devices[1].nodes[0]), "/dev/nvidia7");
	assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
	assert_non_null(strstr(data, "/dev/nvidia9"));
	data = mfree(data);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			assert_string_equal(de->d_name, "k8s.device-plugin.nvidia.com-gpu.json");
			n++;
		}
	closedir(d);
	assert_int_equal(n, 1);
	buf_release(&want);

	/* A spec dir that cannot be created is an error that names it. */
	(void)snprintf(dir, sizeof(dir), "%s/run/cdi/k8s.device-plugin.nvidia.com-gpu.json/x", tmp);
	assert_true(cdi_spec_write(&o, &info, &err) < 0);
	assert_non_null(err);
	assert_non_null(strstr(err, dir));
	free(err);
}

/*
 * The DaemonSet layout (issue 7 item 6): the host's driver root (here /run/nvidia/driver, which
 * does not exist in this process's view) is mounted at container_driver_root. The files and
 * control nodes are looked for there, and the spec names the host's paths.
 */
static void test_container_driver_root(void **state)
{
	char ctr[128], want[512];
	struct cdi_opts o = { .driver_root = "/run/nvidia/driver" };
	struct buf out = { 0 };
	char *err = NULL;

	(void)snprintf(ctr, sizeof(ctr), "%s/driver-root", tmp);
	make_root(ctr);
	o.container_driver_root = ctr;
	assert_render(&o, SPEC(UUID0, UUID1, ""), "/run/nvidia/driver", "/run/nvidia/driver");

	/* A separate host dev root names the nodes; they are still found under <ctr>/dev. */
	o.dev_root = "/";
	assert_render(&o, SPEC(UUID0, UUID1, ""), "/run/nvidia/driver", "");

	/* Nothing of the driver under the container root: the message names both roots. */
	o.dev_root = NULL;
	(void)snprintf(ctr, sizeof(ctr), "%s/empty-driver-root", tmp);
	unit_make_path(ctr, "/usr/lib/");
	assert_int_equal(cdi_spec_render(&o, &info, &out, &err), -ENOENT);
	(void)snprintf(want, sizeof(want),
		       "failed to locate libcuda.so." VER " under %s (the container driver root, "
		       "where the host's /run/nvidia/driver is expected to be mounted)",
		       ctr);
	assert_string_equal(err, want);
	assert_int_equal(out.len, 0);
	err = mfree(err);

	/* No such mount (edgegpu on the host): the driver root itself, as before. */
	(void)snprintf(ctr, sizeof(ctr), "%s/no-such-dir", tmp);
	make_root(root);
	o.driver_root = root;
	assert_render(&o, SPEC(UUID0, UUID1, ""), root, root);
	o.container_driver_root = "";
	assert_render(&o, SPEC(UUID0, UUID1, ""), root, root);
}

/* Runs @fn in a child (to drop privileges or mount privately); returns its r and message. */
struct child_result {
	int r;
	char msg[512];
};

static bool in_child(int (*fn)(void *arg, char **reterr), void *arg, struct child_result *res)
{
	int p[2], status;
	pid_t pid;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct child_result cr = { 0 };
		char *err = NULL;

		close(p[0]);
		cr.r = fn(arg, &err);
		if (err)
			(void)snprintf(cr.msg, sizeof(cr.msg), "%s", err);
		if (write(p[1], &cr, sizeof(cr)) != (ssize_t)sizeof(cr))
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], res, sizeof(*res));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return n == (ssize_t)sizeof(*res) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static char wdir[128];
static char big[64 * 1024];

#define SKIP_R 1000 /* the child could not set the case up */

/* As an unprivileged user in a directory it cannot write: -EACCES. */
static int write_unwritable(void *arg, char **reterr)
{
	if (geteuid() == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			return SKIP_R;
	} else if (chmod(wdir, 0555) < 0) {
		return SKIP_R;
	}
	return cdi_spec_write_file(wdir, "{}\n", 3, reterr);
}

/* On a 4 KiB tmpfs holding a small spec, a 64 KiB spec: -ENOSPC, the old spec intact. */
static int write_full_disk(void *arg, char **reterr)
{
	int r;

	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", wdir, "tmpfs", 0, "size=4k") < 0)
		return SKIP_R;
	if (cdi_spec_write_file(wdir, "{\"old\": 1}\n", 11, NULL) < 0)
		return SKIP_R + 1;
	r = cdi_spec_write_file(wdir, big, sizeof(big), reterr);
	if (cdi_spec_verify(wdir, "{\"old\": 1}\n", 11) != 0)
		return SKIP_R + 2; /* the old spec was touched */
	{
		DIR *d = opendir(wdir);
		struct dirent *de;

		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
			    strcmp(de->d_name, CDI_SPEC_FILE_NAME) != 0)
				r = SKIP_R + 3; /* a temporary file left behind */
		if (d)
			closedir(d);
	}
	return r;
}

/* A read-only mount: -EROFS. */
static int write_read_only(void *arg, char **reterr)
{
	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", wdir, "tmpfs", MS_RDONLY, "size=64k") < 0)
		return SKIP_R;
	return cdi_spec_write_file(wdir, "{}\n", 3, reterr);
}

static void test_write_file_errors(void **state)
{
	struct child_result cr;
	char want[256];

	memset(big, ' ', sizeof(big));
	assert_int_equal(chmod(tmp, 0755), 0); /* mkdtemp's 0700 would stop nobody earlier */
	(void)snprintf(wdir, sizeof(wdir), "%s/unwritable", tmp);
	unit_make_path(wdir, "/");
	(void)snprintf(want, sizeof(want),
		       "failed to create a temporary file for CDI spec %s/" CDI_SPEC_FILE_NAME
		       ": Permission denied",
		       wdir);
	assert_true(in_child(write_unwritable, NULL, &cr));
	if (cr.r == SKIP_R) {
		print_message("skipped: cannot drop privileges\n");
	} else {
		assert_int_equal(cr.r, -EACCES);
		assert_string_equal(cr.msg, want);
	}

	(void)snprintf(wdir, sizeof(wdir), "%s/full", tmp);
	unit_make_path(wdir, "/");
	assert_true(in_child(write_full_disk, NULL, &cr));
	if (cr.r == SKIP_R) {
		print_message("skipped: cannot mount a tmpfs (needs CAP_SYS_ADMIN)\n");
	} else {
		assert_int_equal(cr.r, -ENOSPC);
		(void)snprintf(want, sizeof(want),
			       "failed to write CDI spec %s/" CDI_SPEC_FILE_NAME
			       ": No space left on device",
			       wdir);
		assert_string_equal(cr.msg, want);
	}

	(void)snprintf(wdir, sizeof(wdir), "%s/ro", tmp);
	unit_make_path(wdir, "/");
	assert_true(in_child(write_read_only, NULL, &cr));
	if (cr.r != SKIP_R) {
		assert_int_equal(cr.r, -EROFS);
		assert_non_null(strstr(cr.msg, "Read-only file system"));
	}
}

static void test_verify(void **state)
{
	struct cdi_opts o = { .driver_root = root };
	char dir[128], path[256], other[256];
	struct buf spec = { 0 };
	FILE *f;

	make_root(root);
	(void)snprintf(dir, sizeof(dir), "%s/cdi", tmp);
	(void)snprintf(path, sizeof(path), "%s/" CDI_SPEC_FILE_NAME, dir);
	assert_int_equal(cdi_spec_verify(dir, "x", 1), -ENOENT); /* no dir yet */
	assert_int_equal(cdi_spec_render(&o, &info, &spec, NULL), 0);
	assert_int_equal(cdi_spec_write_file(dir, spec.data, spec.len, NULL), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), 0);

	/* Altered in place, same length: stale. Longer or shorter: stale. */
	f = fopen(path, "r+");
	assert_non_null(f);
	assert_int_equal(fputc('[', f), '[');
	(void)fclose(f);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ESTALE);
	assert_int_equal(cdi_spec_write_file(dir, spec.data, spec.len - 1, NULL), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ESTALE);
	assert_int_equal(cdi_spec_write_file(dir, spec.data, spec.len, NULL), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len - 1), -ESTALE);

	/* Vanished, or its directory with it. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ENOENT);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ENOENT);

	/* A symlink to an identical file is not ours; a FIFO is refused without blocking. */
	assert_int_equal(cdi_spec_write_file(dir, spec.data, spec.len, NULL), 0);
	(void)snprintf(other, sizeof(other), "%s/copy.json", tmp);
	assert_int_equal(rename(path, other), 0);
	assert_int_equal(symlink(other, path), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ESTALE);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	alarm(10);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), -ESTALE);
	alarm(0);
	/* Rewriting replaces whatever is there. */
	assert_int_equal(cdi_spec_write_file(dir, spec.data, spec.len, NULL), 0);
	assert_int_equal(cdi_spec_verify(dir, spec.data, spec.len), 0);
	buf_release(&spec);
}

/*
 * Every allocation failure gives -ENOMEM and leaves nothing behind: no output, no file, no
 * leak (valgrind/ASan), never a spec that silently lacks a library or a node.
 */
static void test_oom(void **state)
{
	struct cdi_opts o = { .driver_root = root, .ldcache_hook_path = "/usr/bin/nvidia-ctk" };
	struct buf want = { 0 };
	char dir[128], path[256];
	long failed, n;

	make_root(root);
	assert_int_equal(cdi_spec_render(&o, &info, &want, NULL), 0);

	failed = oom_failed;
	for (n = 0;; n++) {
		struct buf out = { 0 };
		char *err = NULL;
		int r;

		oom_fail_at(n);
		r = cdi_spec_render(&o, &info, &out, &err);
		oom_off();
		if (r == 0) {
			assert_int_equal(out.len, want.len);
			assert_memory_equal(out.data, want.data, want.len);
			assert_null(err);
			buf_release(&out);
			break;
		}
		assert_int_equal(r, -ENOMEM);
		assert_int_equal(out.len, 0);
		free(err);
	}
	assert_int_equal(oom_failed - failed, n);
	assert_true(n > 30);

	(void)snprintf(dir, sizeof(dir), "%s/oom/cdi", tmp);
	(void)snprintf(path, sizeof(path), "%s/" CDI_SPEC_FILE_NAME, dir);
	o.spec_dir = dir;
	for (n = 0;; n++) {
		char *err = NULL;
		int r;

		oom_fail_at(n);
		r = cdi_spec_write(&o, &info, &err);
		oom_off();
		free(err);
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_int_equal(access(path, F_OK), -1);
	}
	assert_int_equal(access(path, F_OK), 0);
	buf_release(&want);
}

struct settled {
	struct loop *loop;
	struct cdi_writer *w;
	int calls;
	bool pending_in_cb;
};

static void on_settled(void *userdata)
{
	struct settled *s = userdata;

	s->calls++;
	s->pending_in_cb = cdi_writer_first_pending(s->w);
	loop_exit(s->loop, 0);
}

/*
 * The first write attempt holds registration back until it has finished, written or failed:
 * the settled callback comes exactly once, after which first_pending is false.
 */
static void test_writer_first_attempt(void **state)
{
	char dir[256], path[320], blocker[128];
	struct cdi_opts o = { .driver_root = root };
	struct settled s = { 0 };
	struct stat st;

	(void)state;
	make_root(root);
	assert_int_equal(loop_new(&s.loop), 0);
	assert_int_equal(cdi_writer_new(s.loop, &s.w), 0);
	cdi_writer_set_settled_cb(s.w, on_settled, &s);
	assert_false(cdi_writer_first_pending(s.w));

	/* Written: pending until the thread's result reaches the loop. */
	(void)snprintf(dir, sizeof(dir), "%s/run/cdi", tmp);
	o.spec_dir = dir;
	assert_int_equal(cdi_writer_set(s.w, &o, &info), 0);
	assert_true(cdi_writer_first_pending(s.w));
	assert_non_null(*cdi_writer_error(s.w));
	assert_int_equal(loop_run(s.loop), 0);
	assert_int_equal(s.calls, 1);
	assert_false(s.pending_in_cb);
	assert_null(*cdi_writer_error(s.w));
	(void)snprintf(path, sizeof(path), "%s/k8s.device-plugin.nvidia.com-gpu.json", dir);
	assert_int_equal(stat(path, &st), 0);
	s.w = cdi_writer_free(s.w);
	s.loop = loop_free(s.loop); /* an exited loop stays exited */

	/* Failed (the spec dir's parent is a regular file): settled too, with the reason kept. */
	assert_int_equal(loop_new(&s.loop), 0);
	assert_int_equal(cdi_writer_new(s.loop, &s.w), 0);
	cdi_writer_set_settled_cb(s.w, on_settled, &s);
	(void)snprintf(blocker, sizeof(blocker), "%s/blocker", tmp);
	assert_int_equal(file_write_atomic(blocker, "x", 1, 0644, NULL), 0);
	(void)snprintf(dir, sizeof(dir), "%s/cdi", blocker);
	o.spec_dir = dir;
	assert_int_equal(cdi_writer_set(s.w, &o, &info), 0);
	assert_true(cdi_writer_first_pending(s.w));
	assert_int_equal(loop_run(s.loop), 0);
	assert_int_equal(s.calls, 2);
	assert_false(s.pending_in_cb);
	assert_non_null(*cdi_writer_error(s.w));
	assert_non_null(strstr(*cdi_writer_error(s.w), "cannot write the CDI spec"));
	s.w = cdi_writer_free(s.w);
	s.loop = loop_free(s.loop);
}

/* The apply-cuda-memory-limits hook: on the GPUs whose driver limits memory, and only those. */
static void test_memlimit_hook(void **state)
{
	struct cdi_opts o = { .driver_root = root, .memlimit_hook_path = CDI_MEMLIMIT_HOOK_PATH };
	struct buf out = { 0 };
	char want[1024];
	static char filler[4096];

	make_root(root);
	devices[1].mem_limits = GPU_MEM_LIMITS_SUPPORTED;
	assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	(void)snprintf(want, sizeof(want),
		       "      \"name\": \"" UUID1 "\",\n"
		       "      \"containerEdits\": {\n"
		       "        \"deviceNodes\": [\n"
		       "          {\n"
		       "            \"path\": \"/dev/nvidia7\",\n"
		       "            \"hostPath\": \"%s/dev/nvidia7\"\n"
		       "          }\n"
		       "        ],\n"
		       "        \"hooks\": [\n"
		       "          {\n"
		       "            \"hookName\": \"createRuntime\",\n"
		       "            \"path\": \"/usr/bin/nvidia-cdi-hook\",\n"
		       "            \"args\": [\n"
		       "              \"nvidia-cdi-hook\",\n"
		       "              \"apply-cuda-memory-limits\",\n"
		       "              \"--driver-root\",\n"
		       "              \"%s\",\n"
		       "              \"--gpu-id\",\n"
		       "              \"" UUID1 "\"\n"
		       "            ]\n"
		       "          }\n"
		       "        ]\n",
		       root, root);
	assert_non_null(strstr((char *)out.data, want));
	/* GPU 0 (unknown) has none: one hook in the spec. */
	assert_null(strstr(strstr((char *)out.data, "apply-cuda") + 1, "apply-cuda"));
	buf_release(&out);
	/* Without the hook path (no usable nvidia-cdi-hook): no hook whatever the GPUs say. */
	o.memlimit_hook_path = NULL;
	assert_int_equal(cdi_spec_render(&o, &info, &out, NULL), 0);
	assert_int_equal(buf_append(&out, "", 1), 0);
	assert_null(strstr((char *)out.data, "hooks"));
	buf_release(&out);
	devices[1].mem_limits = GPU_MEM_LIMITS_UNKNOWN;

	/* The binary's scan: found, absent, across a 1 MiB seam, missing, a directory. */
	memset(filler, 'x', sizeof(filler));
	unit_write_at(root, "/usr/bin/nvidia-cdi-hook",
		      "\0update-ldcache\0apply-cuda-memory-limits\0", 42);
	assert_int_equal(cdi_hook_has_memory_limits(root, CDI_MEMLIMIT_HOOK_PATH), 1);
	unit_write_at(root, "/usr/bin/old-hook", "\0update-ldcache\0create-symlinks\0", 32);
	assert_int_equal(cdi_hook_has_memory_limits(root, "/usr/bin/old-hook"), 0);
	{
		char path[256];
		FILE *f;

		(void)snprintf(path, sizeof(path), "%s/usr/bin/seam", root);
		f = fopen(path, "we");
		assert_non_null(f);
		for (unsigned i = 0; i < 256; i++) /* exactly 1 MiB of filler */
			assert_int_equal(fwrite(filler, 1, sizeof(filler), f), sizeof(filler));
		assert_int_equal(fseek(f, -10, SEEK_CUR), 0);
		assert_int_equal(fputs("apply-cuda-memory-limits", f) >= 0, 1);
		assert_int_equal(fclose(f), 0);
	}
	assert_int_equal(cdi_hook_has_memory_limits(root, "/usr/bin/seam"), 1);
	assert_int_equal(cdi_hook_has_memory_limits(root, "/usr/bin/none"), -ENOENT);
	assert_int_equal(cdi_hook_has_memory_limits(root, "/usr/bin"), -EISDIR);
	/* A link leading out of the root stays inside it. */
	{
		char link[256];

		(void)snprintf(link, sizeof(link), "%s/usr/bin/out", root);
		assert_int_equal(symlink("/proc/self/exe", link), 0);
		assert_int_equal(cdi_hook_has_memory_limits(root, "/usr/bin/out"), -ENOENT);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_render, setup, teardown),
		cmocka_unit_test_setup_teardown(test_render_dev_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ldcache_hook, setup, teardown),
		cmocka_unit_test_setup_teardown(test_memlimit_hook, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_libcuda, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_backend, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_globs_and_csv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csv_oom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_escaping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_container_driver_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_file_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_first_attempt, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
