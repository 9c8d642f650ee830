#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocate.h"
#include "deviceplugin.pb-c.h"
#include "devnode.h"
#include "gpu.h"
#include "nvml-int.h"
#include "oom.h"
#include "unit-fs.h"
#include "unit.h"

#define UUID0 "GPU-abcdef00-1111-2222-3333-444444444440"
#define UUID1 "GPU-abcdef01-1111-2222-3333-444444444441"
#define KIND  "k8s.device-plugin.nvidia.com/gpu"

/*
 * Two GPUs as the NVML backend describes them, whose minor numbers differ from their
 * indices, to tell the two apart.
 */
static struct gpu_device gpu0 = { .index = 0,
				  .uuid = UUID0,
				  .minor = 2,
				  .nodes = { "/dev/nvidia2" },
				  .n_nodes = 1,
				  .container = &nvml_container };
static struct gpu_device gpu1 = { .index = 1,
				  .uuid = UUID1,
				  .minor = 5,
				  .nodes = { "/dev/nvidia5" },
				  .n_nodes = 1,
				  .container = &nvml_container };

static char dev_root[64];

/* A fake dev root with only two of the four control nodes, as empty files. */
static int setup_root(void **state)
{
	unit_tmpdir("test-allocate", dev_root, sizeof(dev_root));
	unit_make_path(dev_root, "/dev/nvidiactl");
	unit_make_path(dev_root, "/dev/nvidia-uvm");
	return 0;
}

static int teardown_root(void **state)
{
	unit_rm_tree(dev_root);
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/*
 * Packs @r with protobuf-c, decodes it back, and checks the decoded message field by field:
 * the response is a valid message and survives the wire unchanged.
 */
static void assert_roundtrip(const V1beta1__ContainerAllocateResponse *r)
{
	size_t len = v1beta1__container_allocate_response__get_packed_size(r);
	uint8_t *wire = malloc(len ? len : 1);
	V1beta1__ContainerAllocateResponse *d;

	assert_non_null(wire);
	assert_int_equal(v1beta1__container_allocate_response__pack(r, wire), len);
	d = v1beta1__container_allocate_response__unpack(NULL, len, wire);
	assert_non_null(d);
	assert_int_equal(d->n_envs, r->n_envs);
	for (size_t i = 0; i < r->n_envs; i++) {
		assert_string_equal(d->envs[i]->key, r->envs[i]->key);
		assert_string_equal(d->envs[i]->value, r->envs[i]->value);
	}
	assert_int_equal(d->n_mounts, r->n_mounts);
	for (size_t i = 0; i < r->n_mounts; i++) {
		assert_string_equal(d->mounts[i]->container_path, r->mounts[i]->container_path);
		assert_string_equal(d->mounts[i]->host_path, r->mounts[i]->host_path);
		assert_int_equal(d->mounts[i]->read_only, r->mounts[i]->read_only);
	}
	assert_int_equal(d->n_devices, r->n_devices);
	for (size_t i = 0; i < r->n_devices; i++) {
		assert_string_equal(d->devices[i]->container_path, r->devices[i]->container_path);
		assert_string_equal(d->devices[i]->host_path, r->devices[i]->host_path);
		assert_string_equal(d->devices[i]->permissions, r->devices[i]->permissions);
	}
	assert_int_equal(d->n_annotations, r->n_annotations);
	for (size_t i = 0; i < r->n_annotations; i++) {
		assert_string_equal(d->annotations[i]->key, r->annotations[i]->key);
		assert_string_equal(d->annotations[i]->value, r->annotations[i]->value);
	}
	assert_int_equal(d->n_cdi_devices, r->n_cdi_devices);
	for (size_t i = 0; i < r->n_cdi_devices; i++)
		assert_string_equal(d->cdi_devices[i]->name, r->cdi_devices[i]->name);
	v1beta1__container_allocate_response__free_unpacked(d, NULL);
	free(wire);
}

/* Builds a response that must succeed, and checks it on the wire. */
static V1beta1__ContainerAllocateResponse *build(const struct alloc_opts *o,
						 const struct gpu_device *const *gpus, size_t n,
						 const struct alloc_extra *extra)
{
	V1beta1__ContainerAllocateResponse *r = NULL;

	assert_int_equal(alloc_response_new(o, gpus, n, extra, &r), 0);
	assert_non_null(r);
	assert_roundtrip(r);
	return r;
}

static void assert_env(const V1beta1__ContainerAllocateResponse *r, size_t i, const char *key,
		       const char *value)
{
	assert_true(i < r->n_envs);
	assert_string_equal(r->envs[i]->key, key);
	assert_string_equal(r->envs[i]->value, value);
}

static void assert_device(const V1beta1__ContainerAllocateResponse *r, size_t i, const char *root,
			  const char *path)
{
	char host[256];

	(void)snprintf(host, sizeof(host), "%s%s", root, path);
	assert_true(i < r->n_devices);
	assert_string_equal(r->devices[i]->container_path, path);
	assert_string_equal(r->devices[i]->host_path, host);
	assert_string_equal(r->devices[i]->permissions, "rw");
}

static void assert_nothing_but_envs(const V1beta1__ContainerAllocateResponse *r)
{
	assert_int_equal(r->n_mounts, 0);
	assert_int_equal(r->n_devices, 0);
	assert_int_equal(r->n_annotations, 0);
	assert_int_equal(r->n_cdi_devices, 0);
}

static const struct gpu_device *const both[] = { &gpu0, &gpu1 };

static void test_envvar(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_envs, 1);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0 "," UUID1);
	assert_nothing_but_envs(r);
	r = alloc_response_free(r);
	assert_null(r);

	/* 0 means envvar; the request order is kept. */
	o.strategies = 0;
	r = build(&o, (const struct gpu_device *const[]){ &gpu1, &gpu0 }, 2, NULL);
	assert_int_equal(r->n_envs, 1);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID1 "," UUID0);
	assert_nothing_but_envs(r);
	alloc_response_free(r);
}

static void test_envvar_index(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR, .id_strategy = ALLOC_ID_INDEX };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_envs, 1);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "0,1");
	assert_nothing_but_envs(r);
	alloc_response_free(r);

	r = build(&o, (const struct gpu_device *const[]){ &gpu1 }, 1, NULL);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "1");
	alloc_response_free(r);
}

static void assert_volume_mounts(const V1beta1__ContainerAllocateResponse *r, const char *id0,
				 const char *id1)
{
	assert_int_equal(r->n_envs, 1);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices");
	assert_int_equal(r->n_mounts, 2);
	assert_string_equal(r->mounts[0]->container_path, id0);
	assert_string_equal(r->mounts[1]->container_path, id1);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(r->mounts[i]->host_path, "/dev/null");
		assert_false(r->mounts[i]->read_only);
	}
	assert_int_equal(r->n_devices, 0);
	assert_int_equal(r->n_annotations, 0);
	assert_int_equal(r->n_cdi_devices, 0);
}

static void test_volume_mounts(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_VOLUME_MOUNTS };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_volume_mounts(r, "/var/run/nvidia-container-devices/" UUID0,
			     "/var/run/nvidia-container-devices/" UUID1);
	alloc_response_free(r);

	o.id_strategy = ALLOC_ID_INDEX;
	r = build(&o, both, 2, NULL);
	assert_volume_mounts(r, "/var/run/nvidia-container-devices/0",
			     "/var/run/nvidia-container-devices/1");
	alloc_response_free(r);
}

static void test_envvar_volume_mounts(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR | ALLOC_VOLUME_MOUNTS };
	V1beta1__ContainerAllocateResponse *r;

	/* volume-mounts comes after envvar and overwrites the one env var (2.2). */
	r = build(&o, both, 2, NULL);
	assert_volume_mounts(r, "/var/run/nvidia-container-devices/" UUID0,
			     "/var/run/nvidia-container-devices/" UUID1);
	alloc_response_free(r);
}

static bool is_uuid4(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!strchr("0123456789abcdef", s[i]) || s[i] == '\0') {
			return false;
		}
	}
	return s[14] == '4' && strchr("89ab", s[19]);
}

static void test_cdi_annotations(void **state)
{
	static const char key_prefix[] = "cdi.k8s.io/nvidia-device-plugin_";
	struct alloc_opts o = { .strategies = ALLOC_CDI_ANNOTATIONS };
	V1beta1__ContainerAllocateResponse *r, *r2;
	const char *key;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_annotations, 1);
	key = r->annotations[0]->key;
	assert_int_equal(strncmp(key, key_prefix, strlen(key_prefix)), 0);
	assert_true(is_uuid4(key + strlen(key_prefix)));
	assert_string_equal(r->annotations[0]->value, KIND "=" UUID0 "," KIND "=" UUID1);
	assert_int_equal(r->n_envs, 0);
	assert_int_equal(r->n_mounts, 0);
	assert_int_equal(r->n_devices, 0);
	assert_int_equal(r->n_cdi_devices, 0);

	/* A fresh UUID per response. */
	r2 = build(&o, both, 2, NULL);
	assert_false(str_eq(r2->annotations[0]->key, key));
	assert_true(is_uuid4(r2->annotations[0]->key + strlen(key_prefix)));
	alloc_response_free(r2);
	alloc_response_free(r);

	/* --cdi-annotation-prefix replaces only the prefix; index names follow the strategy. */
	o.cdi_annotation_prefix = "example.com/";
	o.id_strategy = ALLOC_ID_INDEX;
	r = build(&o, (const struct gpu_device *const[]){ &gpu1 }, 1, NULL);
	assert_int_equal(strncmp(r->annotations[0]->key, "example.com/nvidia-device-plugin_",
				 strlen("example.com/nvidia-device-plugin_")),
			 0);
	assert_true(is_uuid4(r->annotations[0]->key + strlen("example.com/nvidia-device-plugin_")));
	assert_string_equal(r->annotations[0]->value, KIND "=1");
	alloc_response_free(r);
}

static void test_cdi_cri(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_CDI_CRI };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_cdi_devices, 2);
	assert_string_equal(r->cdi_devices[0]->name, KIND "=" UUID0);
	assert_string_equal(r->cdi_devices[1]->name, KIND "=" UUID1);
	assert_int_equal(r->n_envs, 0);
	assert_int_equal(r->n_mounts, 0);
	assert_int_equal(r->n_devices, 0);
	assert_int_equal(r->n_annotations, 0);
	alloc_response_free(r);

	o.id_strategy = ALLOC_ID_INDEX;
	o.cdi_kind = "example.com/gpu";
	r = build(&o, both, 2, NULL);
	assert_string_equal(r->cdi_devices[0]->name, "example.com/gpu=0");
	assert_string_equal(r->cdi_devices[1]->name, "example.com/gpu=1");
	alloc_response_free(r);
}

static void test_envvar_cdi_cri(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR | ALLOC_CDI_CRI };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_envs, 1);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0 "," UUID1);
	assert_int_equal(r->n_cdi_devices, 2);
	assert_string_equal(r->cdi_devices[0]->name, KIND "=" UUID0);
	assert_string_equal(r->cdi_devices[1]->name, KIND "=" UUID1);
	assert_int_equal(r->n_annotations, 0);
	assert_int_equal(r->n_mounts, 0);
	alloc_response_free(r);

	/* Both CDI strategies together fill both fields. */
	o.strategies = ALLOC_CDI_CRI | ALLOC_CDI_ANNOTATIONS;
	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_cdi_devices, 2);
	assert_int_equal(r->n_annotations, 1);
	assert_string_equal(r->annotations[0]->value, KIND "=" UUID0 "," KIND "=" UUID1);
	assert_int_equal(r->n_envs, 0);
	alloc_response_free(r);
}

static void test_cdi_only_ignores_pass_device_specs(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_CDI_CRI | ALLOC_CDI_ANNOTATIONS,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_devices, 0);
	assert_int_equal(r->n_envs, 0);
	assert_int_equal(r->n_mounts, 0);
	assert_int_equal(r->n_cdi_devices, 2);
	alloc_response_free(r);

	/* Mixed: the non-CDI part brings the DeviceSpecs back. */
	o.strategies = ALLOC_ENVVAR | ALLOC_CDI_CRI;
	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_devices, 4);
	assert_int_equal(r->n_cdi_devices, 2);
	alloc_response_free(r);
}

/*
 * In the DaemonSet the host's /dev is seen under the container driver root (the Jetson
 * overlay mounts it there): presence is checked there, the DeviceSpecs name the host's paths.
 */
static void test_look_dev_root(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = "/",
				.look_dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;

	(void)state;
	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_devices, 4);
	assert_device(r, 0, "", "/dev/nvidiactl");
	assert_device(r, 1, "", "/dev/nvidia-uvm");
	assert_device(r, 2, "", "/dev/nvidia2");
	assert_device(r, 3, "", "/dev/nvidia5");
	alloc_response_free(r);

	/* The rule: <container driver root>/dev present -> there; absent -> our own "/". */
	assert_string_equal(devnode_look_root(dev_root, "/host-dev"), dev_root);
	assert_string_equal(devnode_look_root("/nonexistent-driver-root", "/host-dev"),
			    "/host-dev");
	assert_string_equal(devnode_look_root(NULL, NULL), "/");
	assert_string_equal(devnode_look_root(dev_root, NULL), dev_root);
}

static void test_pass_device_specs(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;
	char root_slash[80];

	/* Only nvidiactl and nvidia-uvm exist under the fake root; per-GPU nodes always. */
	r = build(&o, both, 2, NULL);
	assert_int_equal(r->n_devices, 4);
	assert_device(r, 0, dev_root, "/dev/nvidiactl");
	assert_device(r, 1, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 2, dev_root, "/dev/nvidia2");
	assert_device(r, 3, dev_root, "/dev/nvidia5");
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0 "," UUID1);
	alloc_response_free(r);

	/* A trailing slash on the root changes nothing. */
	(void)snprintf(root_slash, sizeof(root_slash), "%s/", dev_root);
	o.dev_root = root_slash;
	o.strategies = ALLOC_VOLUME_MOUNTS;
	r = build(&o, (const struct gpu_device *const[]){ &gpu1 }, 1, NULL);
	assert_int_equal(r->n_devices, 3);
	assert_device(r, 0, dev_root, "/dev/nvidiactl");
	assert_device(r, 1, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 2, dev_root, "/dev/nvidia5");
	assert_int_equal(r->n_mounts, 1);
	alloc_response_free(r);

	/* All four nodes when all exist; the default root "/" gives plain /dev paths. */
	for (const char *const *n =
		     (const char *const[]){ "nvidia-uvm-tools", "nvidia-modeset", NULL };
	     *n; n++) {
		char path[128];
		int fd;

		(void)snprintf(path, sizeof(path), "%s/dev/%s", dev_root, *n);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	o.dev_root = dev_root;
	o.strategies = ALLOC_ENVVAR;
	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, NULL);
	assert_int_equal(r->n_devices, 5);
	assert_device(r, 0, dev_root, "/dev/nvidiactl");
	assert_device(r, 1, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 2, dev_root, "/dev/nvidia-uvm-tools");
	assert_device(r, 3, dev_root, "/dev/nvidia-modeset");
	assert_device(r, 4, dev_root, "/dev/nvidia2");
	alloc_response_free(r);
	for (const char *const *n =
		     (const char *const[]){ "nvidia-uvm-tools", "nvidia-modeset", NULL };
	     *n; n++) {
		char path[128];

		(void)snprintf(path, sizeof(path), "%s/dev/%s", dev_root, *n);
		assert_int_equal(unlink(path), 0);
	}

	o.dev_root = "/";
	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, NULL);
	assert_true(r->n_devices >= 1);
	assert_device(r, r->n_devices - 1, "", "/dev/nvidia2");
	alloc_response_free(r);
	o.dev_root = NULL;
	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, NULL);
	assert_device(r, r->n_devices - 1, "", "/dev/nvidia2");
	alloc_response_free(r);
}

/* Creates <dev_root><path> as an empty file (a device node, for stat()). */
static void touch_node(const char *path)
{
	char p[256];
	int fd;

	(void)snprintf(p, sizeof(p), "%s%s", dev_root, path);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
}

/*
 * A backend with other device nodes (a Jetson, say) is delivered as it describes itself:
 * its control nodes that exist, each once even when two backends name it, then each GPU's
 * own nodes; nothing of NVML's. The CDI and env strategies are unchanged by it.
 */
static void test_other_backend_nodes(void **state)
{
	static const char *const tegra_ctl[] = { "/dev/nvmap", "/dev/nvhost-ctrl",
						 "/dev/nvidiactl" };
	static const struct gpu_container tegra = { .ctl_nodes = tegra_ctl,
						    .n_ctl_nodes = ELEMENTSOF(tegra_ctl) };
	struct gpu_device igpu = { .index = 0,
				   .uuid = "GPU-tegra-0",
				   .minor = 0,
				   .nodes = { "/dev/nvhost-gpu", "/dev/nvhost-as-gpu" },
				   .n_nodes = 2,
				   .container = &tegra };
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;
	char path[128];

	touch_node("/dev/nvmap");
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 4);
	assert_device(r, 0, dev_root, "/dev/nvmap");
	assert_device(r, 1, dev_root, "/dev/nvidiactl");
	assert_device(r, 2, dev_root, "/dev/nvhost-gpu");
	assert_device(r, 3, dev_root, "/dev/nvhost-as-gpu");
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "GPU-tegra-0");
	alloc_response_free(r);

	/* With an NVML GPU beside it: nvidiactl once (the first GPU's order), then uvm. */
	r = build(&o, (const struct gpu_device *const[]){ &igpu, &gpu1 }, 2, NULL);
	assert_int_equal(r->n_devices, 6);
	assert_device(r, 0, dev_root, "/dev/nvmap");
	assert_device(r, 1, dev_root, "/dev/nvidiactl");
	assert_device(r, 2, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 3, dev_root, "/dev/nvhost-gpu");
	assert_device(r, 4, dev_root, "/dev/nvhost-as-gpu");
	assert_device(r, 5, dev_root, "/dev/nvidia5");
	alloc_response_free(r);

	/* A control node that is also the GPU's own node (a Jetson's primary node): once. */
	(void)snprintf(igpu.nodes[0], sizeof(igpu.nodes[0]), "/dev/nvhost-ctrl");
	igpu.n_nodes = 1;
	touch_node("/dev/nvhost-ctrl");
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 3);
	assert_device(r, 0, dev_root, "/dev/nvmap");
	assert_device(r, 1, dev_root, "/dev/nvidiactl");
	assert_device(r, 2, dev_root, "/dev/nvhost-ctrl");
	alloc_response_free(r);
	(void)snprintf(path, sizeof(path), "%s/dev/nvhost-ctrl", dev_root);
	assert_int_equal(unlink(path), 0);

	/* No container description and no nodes: nothing to deliver but the env. */
	igpu.container = NULL;
	igpu.n_nodes = 0;
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_nothing_but_envs(r);
	alloc_response_free(r);

	(void)snprintf(path, sizeof(path), "%s/dev/nvmap", dev_root);
	assert_int_equal(unlink(path), 0);
}

static void remove_node(const char *rel)
{
	char path[256];

	(void)snprintf(path, sizeof(path), "%s%s", dev_root, rel);
	assert_int_equal(remove(path), 0);
}

/* The Tegra-like container of the pattern tests: built here, not taken from a backend. */
static const char *const glob_ctl[] = { "/dev/nvmap", "/dev/nvhost-ctrl" };
static const char *const glob_patterns[] = {
	"/dev/nvhost-*",     "/dev/dri/renderD*", "/dev/none-*", /* matches nothing */
	"dev/nvhost-*",						 /* not absolute */
	"/etc/host*",						 /* not under /dev */
	"/dev/../etc/host*",					 /* climbs out */
	"/dev/.*",						 /* matches . and .. */
	"/dev/gpudir*",						 /* matches a directory */
};
static const struct gpu_container glob_container = { .ctl_nodes = glob_ctl,
						     .n_ctl_nodes = ELEMENTSOF(glob_ctl),
						     .node_globs = glob_patterns,
						     .n_node_globs = ELEMENTSOF(glob_patterns) };

/*
 * Node patterns (gpu_container.node_globs): matches under the dev root delivered "rw" after the
 * control nodes, sorted, each once (a control node or an own node a pattern also matches is not
 * repeated); what cannot or must not be delivered is skipped, never an error.
 */
static void test_node_globs(void **state)
{
	static const char *const files[] = {
		"/dev/nvmap",	      "/dev/nvhost-ctrl",     "/dev/nvhost-gpu",
		"/dev/nvhost-as-gpu", "/dev/dri/renderD129",  "/dev/dri/renderD128",
		"/dev/dri/card0",     "/dev/nvhost-\xff\xfe", "/dev/gpudir0/",
		"/etc/hostname",
	};
	struct gpu_device igpu = { .index = 0,
				   .uuid = "tegra",
				   .nodes = { "/dev/nvhost-gpu" },
				   .n_nodes = 1,
				   .container = &glob_container };
	struct gpu_device twin = igpu;
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;

	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		unit_make_path(dev_root, files[i]);
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 6);
	assert_device(r, 0, dev_root, "/dev/nvmap");
	assert_device(r, 1, dev_root, "/dev/nvhost-ctrl");
	assert_device(r, 2, dev_root, "/dev/dri/renderD128");
	assert_device(r, 3, dev_root, "/dev/dri/renderD129");
	assert_device(r, 4, dev_root, "/dev/nvhost-as-gpu");
	assert_device(r, 5, dev_root, "/dev/nvhost-gpu");
	alloc_response_free(r);

	/* Two GPUs with the same description and an NVML one: every node once. */
	(void)snprintf(twin.uuid, sizeof(twin.uuid), "tegra-1");
	(void)snprintf(twin.nodes[0], sizeof(twin.nodes[0]), "/dev/nvhost-as-gpu");
	r = build(&o, (const struct gpu_device *const[]){ &igpu, &twin, &gpu1 }, 3, NULL);
	assert_int_equal(r->n_devices, 9);
	assert_device(r, 0, dev_root, "/dev/nvmap");
	assert_device(r, 1, dev_root, "/dev/nvhost-ctrl");
	assert_device(r, 2, dev_root, "/dev/nvidiactl");
	assert_device(r, 3, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 4, dev_root, "/dev/dri/renderD128");
	assert_device(r, 5, dev_root, "/dev/dri/renderD129");
	assert_device(r, 6, dev_root, "/dev/nvhost-gpu");
	assert_device(r, 7, dev_root, "/dev/nvhost-as-gpu");
	assert_device(r, 8, dev_root, "/dev/nvidia5");
	alloc_response_free(r);

	/* One match, then none: the count follows what is there on each call. */
	remove_node("/dev/dri/renderD129");
	remove_node("/dev/nvhost-as-gpu");
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 4);
	assert_device(r, 2, dev_root, "/dev/dri/renderD128");
	alloc_response_free(r);
	remove_node("/dev/dri/renderD128");
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 3);
	assert_device(r, 2, dev_root, "/dev/nvhost-gpu");
	alloc_response_free(r);

	/* No DeviceSpecs without passDeviceSpecs or with CDI only: no pattern is expanded. */
	unit_make_path(dev_root, "/dev/dri/renderD128");
	o.pass_device_specs = false;
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_nothing_but_envs(r);
	alloc_response_free(r);
	o.pass_device_specs = true;
	o.strategies = ALLOC_CDI_CRI;
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 0);
	alloc_response_free(r);

	remove_node("/dev/dri/renderD128");
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		if (!strstr(files[i], "renderD12") && !streq(files[i], "/dev/nvhost-as-gpu"))
			remove_node(files[i]);
	remove_node("/dev/dri");
	remove_node("/etc");
}

/* A dev root holding glob(3)'s special characters is taken literally. */
static void test_node_globs_odd_root(void **state)
{
	static const char *const pat[] = { "/dev/nvhost-*" };
	static const struct gpu_container c = { .node_globs = pat, .n_node_globs = 1 };
	struct gpu_device igpu = { .uuid = "tegra", .container = &c };
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR, .pass_device_specs = true };
	V1beta1__ContainerAllocateResponse *r;
	char root[128];

	(void)snprintf(root, sizeof(root), "%s/[a]*?\\", dev_root);
	unit_make_path(dev_root, "/[a]*?\\/dev/nvhost-ctrl");
	unit_make_path(dev_root, "/a/dev/nvhost-other"); /* what "[a]" would match as a pattern */
	o.dev_root = root;
	r = build(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL);
	assert_int_equal(r->n_devices, 1);
	assert_device(r, 0, root, "/dev/nvhost-ctrl");
	alloc_response_free(r);
	remove_node("/[a]*?\\/dev/nvhost-ctrl");
	remove_node("/[a]*?\\/dev");
	remove_node("/[a]*?\\");
	remove_node("/a/dev/nvhost-other");
	remove_node("/a/dev");
	remove_node("/a");
}

/*
 * The presence rule (devnode_present()): a control node that is a directory is not a device
 * node and is not delivered (it was, before node patterns shared the rule).
 */
static void test_ctl_node_directory(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;

	unit_make_path(dev_root, "/dev/nvidia-modeset/");
	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, NULL);
	assert_int_equal(r->n_devices, 3);
	assert_device(r, 0, dev_root, "/dev/nvidiactl");
	assert_device(r, 1, dev_root, "/dev/nvidia-uvm");
	assert_device(r, 2, dev_root, "/dev/nvidia2");
	alloc_response_free(r);
	remove_node("/dev/nvidia-modeset");
}

static void test_dedup(void **state)
{
	/* Two replicas of GPU 0 (one a copy of the struct, as a replica table might hold). */
	struct gpu_device copy0 = gpu0;
	const struct gpu_device *const gpus[] = { &gpu0, &copy0, &gpu1, &gpu0 };
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR | ALLOC_CDI_CRI | ALLOC_CDI_ANNOTATIONS,
				.pass_device_specs = true,
				.dev_root = dev_root };
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, gpus, ELEMENTSOF(gpus), NULL);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0 "," UUID1);
	assert_int_equal(r->n_devices, 4);
	assert_device(r, 2, dev_root, "/dev/nvidia2");
	assert_device(r, 3, dev_root, "/dev/nvidia5");
	assert_int_equal(r->n_cdi_devices, 2);
	assert_string_equal(r->annotations[0]->value, KIND "=" UUID0 "," KIND "=" UUID1);
	alloc_response_free(r);

	o.strategies = ALLOC_VOLUME_MOUNTS;
	r = build(&o, gpus, ELEMENTSOF(gpus), NULL);
	assert_int_equal(r->n_mounts, 2);
	alloc_response_free(r);

	/* Two replicas of one GPU alone deliver it once. */
	o.strategies = ALLOC_ENVVAR;
	o.id_strategy = ALLOC_ID_INDEX;
	r = build(&o, (const struct gpu_device *const[]){ &gpu1, &gpu1 }, 2, NULL);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "1");
	assert_int_equal(r->n_devices, 3);
	alloc_response_free(r);
}

static void test_gpumem_one_gpu(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	struct alloc_extra x = { .mem_limit_mib = (const uint64_t[]){ 4096 } };
	const struct gpu_device **units;
	uint64_t *unit_mib;
	V1beta1__ContainerAllocateResponse *r;

	r = build(&o, (const struct gpu_device *const[]){ &gpu1 }, 1, &x);
	assert_int_equal(r->n_envs, 3);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID1);
	assert_env(r, 1, "EDGEGPU_GPUMEM_LIMIT_MIB", "4096");
	assert_env(r, 2, "CUDA_DEVICE_MEMORY_LIMIT_0", "4096m");
	assert_nothing_but_envs(r);
	alloc_response_free(r);

	/* One entry per unit: 16,384 units of 2 MiB on one GPU give one 32,768 MiB limit. */
	units = calloc(16384, sizeof(const struct gpu_device *));
	unit_mib = calloc(16384, sizeof(*unit_mib));
	assert_non_null(units);
	assert_non_null(unit_mib);
	for (size_t i = 0; i < 16384; i++) {
		units[i] = &gpu0;
		unit_mib[i] = 2;
	}
	x.mem_limit_mib = unit_mib;
	r = build(&o, units, 16384, &x);
	assert_int_equal(r->n_envs, 3);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0);
	assert_env(r, 1, "EDGEGPU_GPUMEM_LIMIT_MIB", "32768");
	assert_env(r, 2, "CUDA_DEVICE_MEMORY_LIMIT_0", "32768m");
	alloc_response_free(r);
	free(units);
	free(unit_mib);

	/* The limits reach the container in CDI-only mode too. */
	o.strategies = ALLOC_CDI_CRI;
	x.mem_limit_mib = (const uint64_t[]){ 512 };
	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, &x);
	assert_int_equal(r->n_envs, 2);
	assert_env(r, 0, "EDGEGPU_GPUMEM_LIMIT_MIB", "512");
	assert_env(r, 1, "CUDA_DEVICE_MEMORY_LIMIT_0", "512m");
	assert_int_equal(r->n_cdi_devices, 1);
	alloc_response_free(r);
}

static void test_gpumem_two_gpus(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	struct alloc_extra x = { .mem_limit_mib = (const uint64_t[]){ 1000, 3000 } };
	V1beta1__ContainerAllocateResponse *r;
	V1beta1__ContainerAllocateResponse *none = NULL;

	r = build(&o, (const struct gpu_device *const[]){ &gpu1, &gpu0 }, 2, &x);
	assert_int_equal(r->n_envs, 4);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID1 "," UUID0);
	assert_env(r, 1, "EDGEGPU_GPUMEM_LIMIT_MIB", "4000");
	assert_env(r, 2, "CUDA_DEVICE_MEMORY_LIMIT_0", "1000m");
	assert_env(r, 3, "CUDA_DEVICE_MEMORY_LIMIT_1", "3000m");
	alloc_response_free(r);

	/* Units interleaved over two GPUs are summed per GPU, in first-seen order. */
	x.mem_limit_mib = (const uint64_t[]){ 1, 2, 3 };
	o.id_strategy = ALLOC_ID_INDEX;
	r = build(&o, (const struct gpu_device *const[]){ &gpu1, &gpu0, &gpu1 }, 3, &x);
	assert_int_equal(r->n_envs, 4);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "1,0");
	assert_env(r, 1, "EDGEGPU_GPUMEM_LIMIT_MIB", "6");
	assert_env(r, 2, "CUDA_DEVICE_MEMORY_LIMIT_0", "4m");
	assert_env(r, 3, "CUDA_DEVICE_MEMORY_LIMIT_1", "2m");
	alloc_response_free(r);

	/* A sum that overflows is refused, per GPU and in total. */
	x.mem_limit_mib = (const uint64_t[]){ UINT64_MAX, 1 };
	assert_int_equal(alloc_response_new(&o, (const struct gpu_device *const[]){ &gpu0, &gpu0 },
					    2, &x, &none),
			 -EINVAL);
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &none), -EINVAL);
	assert_null(none);
}

static void test_invalid_utf8(void **state)
{
	struct gpu_device bad = gpu0;
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	V1beta1__ContainerAllocateResponse *r = NULL;
	struct alloc_extra x = { 0 };

	/* A UUID that is not UTF-8, in every strategy that puts it on the wire. */
	(void)snprintf(bad.uuid, sizeof(bad.uuid), "GPU-\xff\xfe");
	for (unsigned s = 1; s < (1u << 4); s <<= 1) {
		o.strategies = s;
		assert_int_equal(alloc_response_new(&o, (const struct gpu_device *const[]){ &bad },
						    1, NULL, &r),
				 -EINVAL);
		assert_null(r);
	}
	/* The index strategy does not send the UUID. */
	o.strategies = ALLOC_ENVVAR;
	o.id_strategy = ALLOC_ID_INDEX;
	r = build(&o, (const struct gpu_device *const[]){ &bad }, 1, NULL);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", "0");
	r = alloc_response_free(r);

	x.env = (const char *const[]){ "GOOD=yes", "BAD=\xc0\xaf" };
	x.n_env = 2;
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	x.env = (const char *const[]){ "K\xff=v" };
	x.n_env = 1;
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	x.n_env = 0;
	x.mounts = &(const struct alloc_mount){ .container_path = "/x\xff", .host_path = "/y" };
	x.n_mounts = 1;
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);

	o.pass_device_specs = true;
	o.dev_root = "/tmp/\xe0\x80\xaf";
	assert_int_equal(alloc_response_new(&o, both, 2, NULL, &r), -EINVAL);
	o.pass_device_specs = false;
	o.strategies = ALLOC_CDI_ANNOTATIONS;
	o.cdi_annotation_prefix = "\xff/";
	assert_int_equal(alloc_response_new(&o, both, 2, NULL, &r), -EINVAL);
	o.strategies = ALLOC_CDI_CRI;
	o.cdi_kind = "k\xff/gpu";
	assert_int_equal(alloc_response_new(&o, both, 2, NULL, &r), -EINVAL);
	assert_null(r);
}

static void test_extra_env(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	struct alloc_extra x = {
		.mem_limit_mib = (const uint64_t[]){ 100 },
		.env = (const char *const[]){ "FOO=bar", "EMPTY=", "EQ=a=b", "FOO=baz" },
		.n_env = 4,
	};
	V1beta1__ContainerAllocateResponse *r = NULL;

	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, &x);
	assert_int_equal(r->n_envs, 6);
	assert_env(r, 0, "NVIDIA_VISIBLE_DEVICES", UUID0);
	assert_env(r, 1, "EDGEGPU_GPUMEM_LIMIT_MIB", "100");
	assert_env(r, 2, "CUDA_DEVICE_MEMORY_LIMIT_0", "100m");
	assert_env(r, 3, "FOO", "baz"); /* a later key replaces the earlier value */
	assert_env(r, 4, "EMPTY", "");
	assert_env(r, 5, "EQ", "a=b");
	r = alloc_response_free(r);

	x.mem_limit_mib = NULL;
	x.env = (const char *const[]){ "=value" };
	x.n_env = 1;
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	x.env = (const char *const[]){ "NOEQUALS" };
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	x.env = (const char *const[]){ "" };
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	assert_null(r);
}

static void test_extra_mounts(void **state)
{
	const struct alloc_mount mounts[] = {
		{ .container_path = "/etc/edgegpu/limits",
		  .host_path = "/run/edgegpu/a/limits",
		  .read_only = true },
		{ .container_path = "/data", .host_path = "/srv/data" },
	};
	struct alloc_opts o = { .strategies = ALLOC_VOLUME_MOUNTS };
	struct alloc_extra x = { .mounts = mounts, .n_mounts = 2 };
	V1beta1__ContainerAllocateResponse *r = NULL;

	r = build(&o, (const struct gpu_device *const[]){ &gpu0 }, 1, &x);
	assert_int_equal(r->n_mounts, 3);
	assert_string_equal(r->mounts[0]->container_path,
			    "/var/run/nvidia-container-devices/" UUID0);
	assert_string_equal(r->mounts[1]->container_path, "/etc/edgegpu/limits");
	assert_string_equal(r->mounts[1]->host_path, "/run/edgegpu/a/limits");
	assert_true(r->mounts[1]->read_only);
	assert_string_equal(r->mounts[2]->container_path, "/data");
	assert_false(r->mounts[2]->read_only);
	r = alloc_response_free(r);

	x.mounts = &(const struct alloc_mount){ .container_path = "rel", .host_path = "/x" };
	x.n_mounts = 1;
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	x.mounts = &(const struct alloc_mount){ .container_path = "/x", .host_path = NULL };
	assert_int_equal(alloc_response_new(&o, both, 2, &x, &r), -EINVAL);
	assert_null(r);
}

static void test_no_gpus(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };
	V1beta1__ContainerAllocateResponse *r = NULL;

	assert_int_equal(alloc_response_new(&o, both, 0, NULL, &r), -EINVAL);
	assert_null(r);
	assert_null(alloc_response_free(NULL));
}

static void test_names(void **state)
{
	struct alloc_opts o = { .id_strategy = ALLOC_ID_UUID };
	char buf[ALLOC_CDI_NAME_MAX], small[8];

	assert_string_equal(alloc_cdi_name(&o, &gpu1, buf, sizeof(buf)), KIND "=" UUID1);
	o.id_strategy = ALLOC_ID_INDEX;
	assert_string_equal(alloc_cdi_name(&o, &gpu1, buf, sizeof(buf)), KIND "=1");
	o.cdi_kind = "a.b/c";
	assert_string_equal(alloc_cdi_name(&o, &gpu1, buf, sizeof(buf)), "a.b/c=1");
	assert_string_equal(alloc_gpu_id(ALLOC_ID_UUID, &gpu0, buf, sizeof(buf)), UUID0);
	assert_string_equal(alloc_gpu_id(ALLOC_ID_INDEX, &gpu1, buf, sizeof(buf)), "1");
	assert_string_equal(alloc_gpu_id(ALLOC_ID_UUID, &gpu0, small, sizeof(small)), "GPU-abc");
}

/* Every allocation failure gives -ENOMEM, no response and (under valgrind/ASan) no leak. */
/* Out of memory while the patterns are expanded and their nodes added: -ENOMEM, no leak. */
static void test_oom_globs(void **state)
{
	struct gpu_device igpu = { .uuid = "tegra",
				   .nodes = { "/dev/nvhost-gpu" },
				   .n_nodes = 1,
				   .container = &glob_container };
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR,
				.pass_device_specs = true,
				.dev_root = dev_root };
	long n;

	unit_make_path(dev_root, "/dev/nvhost-ctrl");
	unit_make_path(dev_root, "/dev/nvhost-as-gpu");
	unit_make_path(dev_root, "/dev/dri/renderD128");
	for (n = 0;; n++) {
		V1beta1__ContainerAllocateResponse *r = NULL;
		int ret;

		oom_fail_at(n);
		ret = alloc_response_new(&o, (const struct gpu_device *const[]){ &igpu }, 1, NULL,
					 &r);
		oom_off();
		if (ret == 0) {
			assert_int_equal(r->n_devices, 4);
			alloc_response_free(r);
			break;
		}
		assert_int_equal(ret, -ENOMEM);
		assert_null(r);
	}
	assert_true(n > 10);
	remove_node("/dev/nvhost-ctrl");
	remove_node("/dev/nvhost-as-gpu");
	remove_node("/dev/dri/renderD128");
	remove_node("/dev/dri");
}

static void test_oom(void **state)
{
	struct gpu_device copy1 = gpu1;
	const struct gpu_device *const gpus[] = { &gpu0, &gpu1, &copy1 };
	const struct alloc_mount mount = { .container_path = "/a", .host_path = "/b" };
	struct alloc_extra x = { .mem_limit_mib = (const uint64_t[]){ 1, 2, 3 },
				 .env = (const char *const[]){ "A=1", "B=2", "A=3" },
				 .n_env = 3,
				 .mounts = &mount,
				 .n_mounts = 1 };
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR | ALLOC_VOLUME_MOUNTS |
					      ALLOC_CDI_ANNOTATIONS | ALLOC_CDI_CRI,
				.pass_device_specs = true,
				.dev_root = dev_root };
	long failed = oom_failed, n;

	for (n = 0;; n++) {
		V1beta1__ContainerAllocateResponse *r = NULL;
		int ret;

		oom_fail_at(n);
		ret = alloc_response_new(&o, gpus, ELEMENTSOF(gpus), &x, &r);
		oom_off();
		if (ret == 0) {
			assert_roundtrip(r);
			assert_int_equal(r->n_envs, 6);
			assert_int_equal(r->n_mounts, 3);
			assert_int_equal(r->n_devices, 4);
			alloc_response_free(r);
			break;
		}
		assert_int_equal(ret, -ENOMEM);
		assert_null(r);
	}
	/* Each of the n allocations was failed once: the wrappers saw them all. */
	assert_int_equal(oom_failed - failed, n);
	assert_true(n > 40);
}

/* AllocateRequest { container_requests { devices_ids: ... } } by hand, so any byte can go in. */
static size_t alloc_req(uint8_t *out, const char *const *ids, const size_t *lens, size_t n)
{
	size_t inner = 0, o = 0;

	for (size_t i = 0; i < n; i++)
		inner += 2 + lens[i];
	out[o++] = 0x0a;
	out[o++] = (uint8_t)inner;
	for (size_t i = 0; i < n; i++) {
		out[o++] = 0x0a;
		out[o++] = (uint8_t)lens[i];
		memcpy(out + o, ids[i], lens[i]);
		o += lens[i];
	}
	return o;
}

static void test_request_unpack(void **state)
{
	static const char *const ok_ids[] = { "GPU-a", "GPU-b" };
	static const size_t ok_lens[] = { 5, 5 };
	static const char *const nul_ids[] = { "GPU-a", "GPU-b\0x" };
	static const size_t nul_lens[] = { 5, 7 };
	static const uint8_t cut[] = { 0x0a, 0x05, 0x0a, 0x03, 'a' };
	V1beta1__AllocateRequest *m = NULL;
	uint8_t req[64];
	char bad[64] = "";
	size_t n;
	long k;

	n = alloc_req(req, ok_ids, ok_lens, 2);
	assert_int_equal(alloc_request_unpack(req, n, &m, bad, sizeof(bad)), 0);
	assert_int_equal(m->n_container_requests, 1);
	assert_int_equal(m->container_requests[0]->n_devices_ids, 2);
	assert_string_equal(m->container_requests[0]->devices_ids[1], "GPU-b");
	v1beta1__allocate_request__free_unpacked(m, NULL);
	m = NULL;

	/* "GPU-b\0x" would read as GPU-b: refused, and named. */
	n = alloc_req(req, nul_ids, nul_lens, 2);
	assert_int_equal(alloc_request_unpack(req, n, &m, bad, sizeof(bad)), -EINVAL);
	assert_null(m);
	assert_string_equal(bad, "GPU-b\\0x");
	assert_int_equal(alloc_request_unpack(req, n, &m, NULL, 0), -EINVAL);
	assert_int_equal(alloc_request_unpack(cut, sizeof(cut), &m, bad, sizeof(bad)), -EBADMSG);
	assert_null(m);

	/* Out of memory is told apart from malformed, at every allocation. */
	n = alloc_req(req, ok_ids, ok_lens, 2);
	for (k = 0;; k++) {
		int r;

		oom_fail_at(k);
		r = alloc_request_unpack(req, n, &m, bad, sizeof(bad));
		oom_off();
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_null(m);
	}
	assert_true(k >= 3);
	v1beta1__allocate_request__free_unpacked(m, NULL);
}

static void test_uses_cdi(void **state)
{
	struct alloc_opts o = { .strategies = ALLOC_ENVVAR };

	assert_false(alloc_uses_cdi(&o));
	o.strategies = 0;
	assert_false(alloc_uses_cdi(&o));
	o.strategies = ALLOC_ENVVAR | ALLOC_CDI_CRI;
	assert_true(alloc_uses_cdi(&o));
	o.strategies = ALLOC_CDI_ANNOTATIONS;
	assert_true(alloc_uses_cdi(&o));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envvar),
		cmocka_unit_test(test_envvar_index),
		cmocka_unit_test(test_volume_mounts),
		cmocka_unit_test(test_envvar_volume_mounts),
		cmocka_unit_test(test_cdi_annotations),
		cmocka_unit_test(test_cdi_cri),
		cmocka_unit_test(test_envvar_cdi_cri),
		cmocka_unit_test(test_cdi_only_ignores_pass_device_specs),
		cmocka_unit_test(test_pass_device_specs),
		cmocka_unit_test(test_look_dev_root),
		cmocka_unit_test(test_other_backend_nodes),
		cmocka_unit_test(test_node_globs),
		cmocka_unit_test(test_node_globs_odd_root),
		cmocka_unit_test(test_ctl_node_directory),
		cmocka_unit_test(test_oom_globs),
		cmocka_unit_test(test_dedup),
		cmocka_unit_test(test_gpumem_one_gpu),
		cmocka_unit_test(test_gpumem_two_gpus),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_extra_env),
		cmocka_unit_test(test_extra_mounts),
		cmocka_unit_test(test_no_gpus),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_oom),
		cmocka_unit_test(test_request_unpack),
		cmocka_unit_test(test_uses_cdi),
	};

	return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
