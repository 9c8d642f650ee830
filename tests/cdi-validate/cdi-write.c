/*
 * Test helper for the CDI validation test: builds a fake 2-GPU node under DIR/root (driver
 * files as empty files, device nodes as real character devices with /dev/null's numbers, so
 * the CDI library can inject them), then writes with edgegpu's own code:
 *   DIR/cdi/k8s.device-plugin.nvidia.com-gpu.json   the CDI spec (cdi_spec_write)
 *   DIR/cdi-hook/k8s.device-plugin.nvidia.com-gpu.json   the same with the ldcache hook and,
 *                            on GPU 0 (driver memory limits), nvidia-cdi-hook's
 *                            apply-cuda-memory-limits createRuntime hook
 *   DIR/cdi-ctr/k8s.device-plugin.nvidia.com-gpu.json    DIR/root as the container driver root
 *                            of a host /run/nvidia/driver (host paths in the spec)
 *   DIR/cdi-csv/k8s.device-plugin.nvidia.com-gpu.json    an integrated GPU described by node
 *                            patterns and CSV mount specs (as a Jetson's) over DIR/root-csv
 *   DIR/allocate-cdi.pb      a packed ContainerAllocateResponse, cdi-annotations + cdi-cri
 *   DIR/allocate-envvar.pb   one with envvar, volume-mounts, passDeviceSpecs and gpumem extras
 *   DIR/expect               "device <name> <minor>" per GPU, for the validator
 * Usage: cdi-write DIR. Needs root (mknod).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "allocate.h"
#include "cdi.h"
#include "deviceplugin.pb-c.h"
#include "file-writer.h"
#include "gpu.h"
#include "nvml-int.h"
#include "util.h"

#define VER  "550.54.15"
#define LIBD "/usr/lib/x86_64-linux-gnu"

static int make(const char *base, const char *rel, bool node)
{
	char path[512];
	size_t len;
	int fd;

	(void)snprintf(path, sizeof(path), "%s%s", base, rel);
	len = strlen(path);
	for (size_t i = 1; i < len; i++)
		if (path[i] == '/') {
			path[i] = '\0';
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				goto fail;
			path[i] = '/';
		}
	if (node) {
		if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) < 0)
			goto fail;
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	if (fd < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	(void)fprintf(stderr, "cdi-write: %s: %m%s\n", path,
		      node && errno == EPERM ? " (mknod needs root or CAP_MKNOD)" : "");
	return -1;
}

/*
 * The spec of a GPU whose description has node patterns and CSV mount specs, over DIR/root-csv:
 * pattern and CSV `dev` matches as real nodes, a CSV library, a bad CSV line.
 */
static int write_csv_spec(const char *dir)
{
	static const char *const globs[] = { "/dev/nvhost-*" };
	static const struct gpu_container c = { .node_globs = globs,
						.n_node_globs = ELEMENTSOF(globs),
						.mount_specs_dir = "/etc/csv.d" };
	static const char csv[] = "lib, /usr/lib/tegra/libcuda.so.1.1\r\n"
				  "dev, /dev/nvmap\r\n"
				  "a line without a comma\r\n";
	struct gpu_device igpu = {
		.uuid = "tegra", .nodes = { "/dev/nvhost-gpu" }, .n_nodes = 1, .container = &c
	};
	struct gpu_info info = {
		.driver_version = "36.4.3", .n_devices = 1, .devices = &igpu, .container = &c
	};
	char root[400], spec_dir[400], path[500];
	char *err = NULL;
	FILE *f;
	int r;

	(void)snprintf(root, sizeof(root), "%s/root-csv", dir);
	(void)snprintf(spec_dir, sizeof(spec_dir), "%s/cdi-csv", dir);
	if (make(root, "/dev/nvhost-gpu", true) < 0 || make(root, "/dev/nvhost-ctrl", true) < 0 ||
	    make(root, "/dev/nvmap", true) < 0 ||
	    make(root, "/usr/lib/tegra/libcuda.so.1.1", false) < 0 ||
	    make(root, "/etc/csv.d/drivers.csv", false) < 0)
		return -1;
	(void)snprintf(path, sizeof(path), "%s/etc/csv.d/drivers.csv", root);
	f = fopen(path, "we");
	if (!f || fputs(csv, f) < 0 || fclose(f) != 0) {
		(void)fprintf(stderr, "cdi-write: %s: %m\n", path);
		return -1;
	}
	r = cdi_spec_write(&(struct cdi_opts){ .spec_dir = spec_dir, .driver_root = root }, &info,
			   &err);
	if (r < 0) {
		(void)fprintf(stderr, "cdi-write: %s: %s\n", spec_dir, err ? err : strerror(-r));
		free(err);
		return -1;
	}
	return 0;
}

static int write_response(const char *dir, const char *name, const struct alloc_opts *o,
			  const struct gpu_device *const *gpus, size_t n,
			  const struct alloc_extra *x)
{
	V1beta1__ContainerAllocateResponse *r = NULL;
	uint8_t *wire = NULL;
	char *path = NULL;
	size_t len;
	int ret;

	ret = alloc_response_new(o, gpus, n, x, &r);
	if (ret < 0)
		goto out;
	len = v1beta1__container_allocate_response__get_packed_size(r);
	wire = malloc(len + 1);
	path = path_join(dir, name);
	if (!wire || !path) {
		ret = -ENOMEM;
		goto out;
	}
	(void)v1beta1__container_allocate_response__pack(r, wire);
	ret = file_write_atomic(path, wire, len, 0644, NULL);
out:
	if (ret < 0)
		(void)fprintf(stderr, "cdi-write: %s: %s\n", name, strerror(-ret));
	alloc_response_free(r);
	free(wire);
	free(path);
	return ret;
}

int main(int argc, char **argv)
{
	static const char *const files[] = {
		LIBD "/libcuda.so." VER,
		LIBD "/libnvidia-ml.so." VER,
		LIBD "/libnvidia-ptxjitcompiler.so." VER,
		"/usr/bin/nvidia-smi",
	};
	static const char *const nodes[] = {
		"/dev/nvidiactl",
		"/dev/nvidia-uvm",
		"/dev/nvidia0",
		"/dev/nvidia1",
	};
	/* As the NVML backend describes them. */
	struct gpu_device devs[] = {
		{ .index = 0,
		  .uuid = "GPU-8d1f0e52-aaaa-bbbb-cccc-000000000000",
		  .minor = 0,
		  .nodes = { "/dev/nvidia0" },
		  .n_nodes = 1,
		  .container = &nvml_container },
		{ .index = 1,
		  .uuid = "GPU-8d1f0e52-aaaa-bbbb-cccc-000000000001",
		  .minor = 1,
		  .nodes = { "/dev/nvidia1" },
		  .n_nodes = 1,
		  .container = &nvml_container },
	};
	struct gpu_info info = {
		.driver_version = VER, .n_devices = 2, .devices = devs, .container = &nvml_container
	};
	const struct gpu_device *const gpus[] = { &devs[0], &devs[1], &devs[0] };
	char root[400], spec_dir[400], hook_dir[400], ctr_dir[400], expect[400];
	char *err = NULL;
	FILE *f;
	int r;

	if (argc != 2) {
		(void)fprintf(stderr, "usage: cdi-write DIR\n");
		return 2;
	}
	(void)snprintf(root, sizeof(root), "%s/root", argv[1]);
	(void)snprintf(spec_dir, sizeof(spec_dir), "%s/cdi", argv[1]);
	(void)snprintf(hook_dir, sizeof(hook_dir), "%s/cdi-hook", argv[1]);
	(void)snprintf(ctr_dir, sizeof(ctr_dir), "%s/cdi-ctr", argv[1]);
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		if (make(root, files[i], false) < 0)
			return 1;
	for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
		if (make(root, nodes[i], true) < 0)
			return 1;

	r = cdi_spec_write(&(struct cdi_opts){ .spec_dir = spec_dir, .driver_root = root }, &info,
			   &err);
	if (r < 0) {
		(void)fprintf(stderr, "cdi-write: %s\n", err ? err : strerror(-r));
		free(err);
		return 1;
	}
	/* The DaemonSet layout: the driver tree is what /driver-root shows of the host's
	 * /run/nvidia/driver; the spec names the host's paths. */
	r = cdi_spec_write(&(struct cdi_opts){ .spec_dir = ctr_dir,
					       .driver_root = "/run/nvidia/driver",
					       .container_driver_root = root },
			   &info, &err);
	if (r < 0) {
		(void)fprintf(stderr, "cdi-write: %s: %s\n", ctr_dir, err ? err : strerror(-r));
		free(err);
		return 1;
	}
	devs[0].mem_limits = GPU_MEM_LIMITS_SUPPORTED;
	r = cdi_spec_write(&(struct cdi_opts){ .spec_dir = hook_dir,
					       .driver_root = root,
					       .ldcache_hook_path = "/usr/bin/nvidia-ctk",
					       .memlimit_hook_path = CDI_MEMLIMIT_HOOK_PATH },
			   &info, NULL);
	devs[0].mem_limits = GPU_MEM_LIMITS_UNKNOWN;
	if (r < 0) {
		(void)fprintf(stderr, "cdi-write: %s: %s\n", hook_dir, strerror(-r));
		return 1;
	}

	if (write_csv_spec(argv[1]) < 0)
		return 1;
	if (write_response(argv[1], "allocate-cdi.pb",
			   &(struct alloc_opts){ .strategies = ALLOC_CDI_ANNOTATIONS | ALLOC_CDI_CRI,
						 .pass_device_specs = true,
						 .dev_root = root },
			   gpus, ELEMENTSOF(gpus), NULL) < 0)
		return 1;
	if (write_response(argv[1], "allocate-envvar.pb",
			   &(struct alloc_opts){ .strategies = ALLOC_ENVVAR | ALLOC_VOLUME_MOUNTS,
						 .pass_device_specs = true,
						 .dev_root = root },
			   gpus, ELEMENTSOF(gpus),
			   &(struct alloc_extra){ .mem_limit_mib = (const uint64_t[]){ 1, 2, 3 },
						  .env = (const char *const[]){ "A=caf\xc3\xa9" },
						  .n_env = 1 }) < 0)
		return 1;

	(void)snprintf(expect, sizeof(expect), "%s/expect", argv[1]);
	f = fopen(expect, "we");
	if (!f) {
		(void)fprintf(stderr, "cdi-write: %s: %m\n", expect);
		return 1;
	}
	for (size_t i = 0; i < ELEMENTSOF(devs); i++)
		(void)fprintf(f, "device %s %u\n", devs[i].uuid, devs[i].minor);
	(void)fprintf(f, "root %s\n", root);
	if (fclose(f) != 0)
		return 1;
	return 0;
}
