/*
 * The NVML backend against the fake libnvidia-ml.so.1 (tests/fakes/nvml), loaded through the
 * real dlopen path. With EDGEGPU_NVML_REAL=1 only the "real" group runs, against the
 * driver's library (scripts/hw-check).
 */

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-client.h"
#include "gpu-open.h"
#include "nvml-api.h"
#include "unit-fs.h"
#include "unit-nvml.h"
#include "unit.h"
#include "util.h"

#ifndef FAKE_NVML_LIB
#error "FAKE_NVML_LIB (the built fake libnvidia-ml.so.1) must be defined"
#endif

static void test_discover_two(void **state)
{
	struct env *e = *state;
	const struct gpu_device *d;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_LIB, "two-gpus.conf");
	assert_string_equal(e->info.driver_version, "550.54.15");
	assert_string_equal(e->info.lib_version, "12.550.54.15");
	assert_int_equal(e->info.cuda_driver_version, 12040);
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->info.n_skipped, 0);

	d = &e->info.devices[0];
	assert_int_equal(d->index, 0);
	assert_string_equal(d->uuid, "GPU-8d1f3c2a-5b6e-4f70-9a1b-2c3d4e5f6a70");
	assert_string_equal(d->name, "NVIDIA A2");
	assert_int_equal(d->minor, 0);
	assert_int_equal(d->mem_total, 15356ULL << 20);
	assert_string_equal(d->pci_bus_id, "00000000:17:00.0");
	assert_int_equal(d->numa_node, 0);
	assert_int_equal(d->cc_major, 8);
	assert_int_equal(d->cc_minor, 6);
	assert_string_equal(d->arch, "ampere");
	assert_false(d->mig_enabled);
	assert_true(d->events_supported);
	assert_false(d->integrated);
	/* What a container needs: its node by minor number, and NVML's control nodes. */
	assert_int_equal(d->n_nodes, 1);
	assert_string_equal(d->nodes[0], "/dev/nvidia0");
	assert_ptr_equal(d->container, e->info.container);
	assert_non_null(d->container);
	assert_int_equal(d->container->n_ctl_nodes, 4);
	assert_string_equal(d->container->ctl_nodes[0], "/dev/nvidiactl");
	assert_string_equal(d->container->ctl_nodes[3], "/dev/nvidia-modeset");
	assert_string_equal(d->container->libs[0].name, "libcuda.so");
	assert_true(d->container->libs[0].required);

	d = &e->info.devices[1];
	assert_int_equal(d->index, 1);
	assert_string_equal(d->uuid, "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d");
	assert_string_equal(d->name, "NVIDIA L4");
	assert_int_equal(d->minor, 1);
	assert_int_equal(d->mem_total, 23034ULL << 20);
	assert_string_equal(d->pci_bus_id, "00000000:CA:00.0");
	assert_int_equal(d->numa_node, 1); /* sysfs path lower-cased: 0000:ca:00.0 */
	assert_int_equal(d->cc_major, 8);
	assert_int_equal(d->cc_minor, 9);
	assert_string_equal(d->arch, "ada-lovelace"); /* GFD's name, not a shortening */
	assert_false(d->mig_enabled);
	assert_true(d->events_supported);
	assert_int_equal(d->n_nodes, 1);
	assert_string_equal(d->nodes[0], "/dev/nvidia1");

	assert_int_equal(e->b->ops->distance(e->b, 0, 1), 20);
	assert_int_equal(e->b->ops->distance(e->b, 1, 0), 20);
	assert_int_equal(e->b->ops->distance(e->b, 0, 0), 0);
	assert_int_equal(e->b->ops->distance(e->b, 0, 2), -EINVAL);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	assert_int_equal(e->b->ops->probe(e->b, 1), 0);
	assert_int_equal(e->b->ops->probe(e->b, 2), -EINVAL);

	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(fabs(s.temperature_c - 41) < 1e-9);
	assert_true(fabs(s.power_w - 21.5) < 1e-9);
	assert_true(fabs(s.power_limit_w - 60) < 1e-9);
	assert_int_equal(s.mem_total, 15356ULL << 20);
	assert_int_equal(s.mem_used, 512ULL << 20);
	assert_true(fabs(s.util_gpu - 35) < 1e-9);
	assert_true(fabs(s.util_mem - 12) < 1e-9);
	assert_true(fabs(s.sm_clock_mhz - 1770) < 1e-9);
	assert_true(fabs(s.mem_clock_mhz - 6251) < 1e-9);
	assert_true(fabs(s.temp_slowdown_c - 90) < 1e-9);
	assert_true(fabs(s.temp_shutdown_c - 95) < 1e-9);
	assert_int_equal(s.ecc_corrected, 3);
	assert_int_equal(s.ecc_uncorrected, 0);

	/* A runtime change through the control socket shows in the next sample. */
	ctl("temp 0 77");
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(fabs(s.temperature_c - 77) < 1e-9);
}

static void test_numa(void **state)
{
	struct env *e = *state;
	char dir[256], path[300];
	FILE *f;

	/* GPU 3's file is written here, with junk in it; the fake writes GPU 1's and 2's. */
	(void)snprintf(dir, sizeof(dir), "%s/bus/pci/devices/0000:04:00.0", e->sysfs);
	(void)snprintf(path, sizeof(path), "%s/numa_node", dir);
	assert_int_equal(mkdir(e->sysfs, 0755), 0);
	(void)snprintf(path, sizeof(path), "%s/bus", e->sysfs);
	assert_int_equal(mkdir(path, 0755), 0);
	(void)snprintf(path, sizeof(path), "%s/bus/pci", e->sysfs);
	assert_int_equal(mkdir(path, 0755), 0);
	(void)snprintf(path, sizeof(path), "%s/bus/pci/devices", e->sysfs);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	(void)snprintf(path, sizeof(path), "%s/numa_node", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	(void)fputs("junk\n", f);
	(void)fclose(f);

	open_discover(e, FAKE_NVML_LIB, "numa.conf");
	assert_int_equal(e->info.n_devices, 4);
	assert_int_equal(e->info.devices[0].numa_node, -1); /* no file */
	assert_int_equal(e->info.devices[1].numa_node, -1); /* "-1" */
	assert_int_equal(e->info.devices[2].numa_node, 1);  /* "1" */
	assert_int_equal(e->info.devices[3].numa_node, -1); /* "junk" */
	(void)snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:03:00.0/numa_node", e->sysfs);
	assert_int_equal(access(path, R_OK), 0); /* the path discovery read */
}

static void test_mig_skipped(void **state)
{
	struct env *e = *state;

	open_discover(e, FAKE_NVML_LIB, "mig.conf");
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->info.n_skipped, 1);
	assert_int_equal(e->info.devices[0].index, 1);
	assert_string_equal(e->info.devices[0].uuid, "GPU-a1000000-0000-4000-8000-000000000001");
	assert_non_null(e->info.skipped);
	assert_non_null(strstr(e->info.skipped[0], "GPU-a1000000-0000-4000-8000-000000000000"));
	assert_non_null(strstr(e->info.skipped[0], "MIG mode is enabled"));
	assert_non_null(strstr(e->info.skipped[0], "not supported"));
	/* The backend's indices follow the usable devices: 0 is the whole GPU. */
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	assert_int_equal(e->b->ops->probe(e->b, 1), -EINVAL);
}

/* <sysfs>/bus/pci/devices/@id/class holding @text. */
static void write_class(const struct env *e, const char *id, const char *text)
{
	char rel[128];

	(void)snprintf(rel, sizeof(rel), "/bus/pci/devices/%s/class", id);
	unit_write_at(e->sysfs, rel, text, strlen(text));
}

/*
 * What GFD's labels need from discovery: MIG capability (nvmlDeviceGetMigMode answering),
 * the PCI class (nvmlDeviceGetPciInfoExt), and the MIG-enabled GPUs it leaves out, described.
 */
static void test_gfd_fields(void **state)
{
	struct env *e = *state;
	const struct gpu_device *m;

	open_discover(e, FAKE_NVML_LIB, "gfd-mig.conf");
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->info.n_skipped, 2);
	assert_int_equal(e->info.n_mig_devices, 2);
	assert_true(e->info.devices[0].mig_capable);
	assert_false(e->info.devices[0].mig_enabled);
	assert_int_equal(e->info.devices[0].pci_class, 0x030200); /* the fake's default */
	m = &e->info.mig_devices[0];
	assert_true(m->mig_enabled && m->mig_capable);
	assert_int_equal(m->index, 1);
	assert_string_equal(m->name, "NVIDIA A100-SXM4-40GB");
	assert_string_equal(m->uuid, "GPU-af000000-0000-4000-8000-000000000001");
	assert_int_equal(m->mem_total, 40960ULL << 20);
	assert_int_equal(m->cc_major, 8);
	assert_int_equal(m->pci_class, 0x030200);
	assert_int_equal(m->n_nodes, 0); /* not a usable device */
	m = &e->info.mig_devices[1];
	assert_string_equal(m->name, "NVIDIA H100 80GB HBM3");
	assert_int_equal(m->cc_major, 9);
	assert_int_equal(m->mem_total, 81559ULL << 20);
	close_backend(e);

	/* GeForce: VGA controllers, MIG mode NOT_SUPPORTED (not capable), nothing left out. */
	open_discover(e, FAKE_NVML_LIB, "geforce.conf");
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->info.n_mig_devices, 0);
	assert_null(e->info.mig_devices);
	for (unsigned i = 0; i < 2; i++) {
		assert_false(e->info.devices[i].mig_capable);
		assert_int_equal(e->info.devices[i].pci_class, 0x030000);
		assert_string_equal(e->info.devices[i].arch, "ada-lovelace");
	}
	assert_int_equal(fake_nvml_count("nvmlDeviceGetPciInfoExt"), 2);
	close_backend(e);

	/*
	 * An old driver: no nvmlDeviceGetPciInfoExt, the class from sysfs (the fake writes it for
	 * GPUs whose fixture names it); no nvmlDeviceGetMigMode: not capable.
	 */
	open_discover(e, FAKE_NVML_OLD_LIB, "geforce.conf");
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->info.devices[1].pci_class, 0x030000);
	assert_false(e->info.devices[1].mig_capable);
	close_backend(e);
	/* Neither answers: unknown (0). */
	open_discover(e, FAKE_NVML_OLD_LIB, "two-gpus.conf");
	assert_int_equal(e->info.devices[0].pci_class, 0);
	close_backend(e);
	/* A class file with junk, or past 24 bits: unknown, never a class made of part of it. */
	write_class(e, "0000:17:00.0", "0x030000junk\n");
	write_class(e, "0000:ca:00.0", "0x3030200\n");
	open_discover(e, FAKE_NVML_OLD_LIB, "two-gpus.conf");
	assert_int_equal(e->info.devices[0].pci_class, 0);
	assert_int_equal(e->info.devices[1].pci_class, 0);
	close_backend(e);
	/* And the kernel's own form, read as it is. */
	write_class(e, "0000:17:00.0", "0x030000\n");
	open_discover(e, FAKE_NVML_OLD_LIB, "two-gpus.conf");
	assert_int_equal(e->info.devices[0].pci_class, 0x030000);
}

static void test_lib_missing(void **state)
{
	struct env *e = *state;
	struct gpu_backend_opts o = { .kind = GPU_BACKEND_NVML, .driver_root = e->dir };
	void *system_nvml;
	char want[256];
	int r;

	r = open_fake(e, "/nonexistent/lib/libnvidia-ml.so.1", "two-gpus.conf");
	assert_int_equal(r, -ENOENT);
	assert_null(e->b);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "/nonexistent/lib/libnvidia-ml.so.1"));
	assert_non_null(strstr(e->err, "--nvml-lib"));

	/* No --nvml-lib: the loader's search, then the driver root's library directories. */
	free(e->err);
	e->err = NULL;
	system_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	r = gpu_backend_open(&o, &e->b, &e->err);
	if (system_nvml) {
		/* This host has a driver: the loader's search finds it first. */
		(void)dlclose(system_nvml);
		assert_true(r == 0 || r == -EXDEV || r == -ENXIO);
		return;
	}
	assert_int_equal(r, -ENOENT);
	assert_non_null(e->err);
	(void)snprintf(want, sizeof(want), "%s/usr/lib64/libnvidia-ml.so.1", e->dir);
	assert_non_null(strstr(e->err, want));
	assert_non_null(strstr(e->err, "Install the NVIDIA driver"));
	assert_non_null(strstr(e->err, "--container-driver-root"));
	assert_non_null(strstr(e->err, "NVIDIA container runtime"));
}

static void test_driver_root_search(void **state)
{
	struct env *e = *state;
	/* Sized for any checkout path: the fake's path is compiled in (FAKE_NVML_LIB). */
	char dir[1024], cmd[4096], path[1024];
	struct gpu_backend_opts o = { .kind = GPU_BACKEND_NVML,
				      .driver_root = e->dir,
				      .sysfs_root = e->sysfs };
	void *system_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int r;

	if (system_nvml) {
		/* The loader's search wins on a host with a driver; covered by the real group. */
		(void)dlclose(system_nvml);
		assert_int_equal(gpu_backend_open(&o, &e->b, &e->err), 0);
		return;
	}
	assert_true(snprintf(dir, sizeof(dir), "%s/usr/lib64", e->dir) < (int)sizeof(dir));
	assert_true(snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s' '%s/'", dir, FAKE_NVML_LIB,
			     dir) < (int)sizeof(cmd));
	assert_int_equal(system(cmd), 0);
	assert_true(snprintf(path, sizeof(path), "%s/two-gpus.conf", FAKE_NVML_FIXTURES) <
		    (int)sizeof(path));
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
	r = gpu_backend_open(&o, &e->b, &e->err);
	assert_int_equal(r, 0);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(fake_nvml_count("nvmlInit_v2"), 1);
}

/* gpu_backend_open() chooses: AUTO finds NVML, an unknown kind is refused. */
static void test_backend_open(void **state)
{
	struct env *e = *state;
	struct gpu_backend_opts bad = { .kind = GPU_BACKEND_COUNT };
	struct gpu_backend *b = NULL;

	assert_int_equal(open_kind(e, GPU_BACKEND_AUTO, FAKE_NVML_LIB, "two-gpus.conf"), 0);
	assert_non_null(e->b);
	assert_string_equal(e->b->ops->name, "nvml");
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 2);

	assert_int_equal(gpu_backend_open(&bad, &b, &e->err), -EINVAL);
	assert_null(b);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "unknown GPU backend"));
}

/* When no backend opens, AUTO hands back the first one's error and message as they are. */
static void test_backend_open_auto_fails(void **state)
{
	struct env *e = *state;

	assert_int_equal(open_kind(e, GPU_BACKEND_AUTO, FAKE_NVML_LIB, "init-fail.conf"), -ENXIO);
	assert_null(e->b);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "modprobe nvidia"));
}

static void test_init_failure(void **state)
{
	struct env *e = *state;
	int r = open_fake(e, FAKE_NVML_LIB, "init-fail.conf");

	assert_int_equal(r, -ENXIO);
	assert_null(e->b);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "Driver Not Loaded"));
	assert_non_null(strstr(e->err, "modprobe nvidia"));
}

static void test_version_mismatch(void **state)
{
	struct env *e = *state;
	int r = open_fake(e, FAKE_NVML_LIB, "mismatch.conf");

	assert_int_equal(r, -EXDEV);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "12.550.54.15")); /* the library */
	assert_non_null(strstr(e->err, "535.104.05"));	 /* the kernel module, from /proc */
	assert_non_null(strstr(e->err, "version mismatch"));
	assert_non_null(strstr(e->err, "reboot"));
	assert_non_null(strstr(e->err, "modprobe nvidia"));
}

static void test_missing_symbol(void **state)
{
	struct env *e = *state;
	int r = open_fake(e, FAKE_NVML_NOSYM_LIB, "two-gpus.conf");

	assert_int_equal(r, -ENOSYS);
	assert_null(e->b);
	assert_non_null(e->err);
	assert_non_null(strstr(e->err, "nvmlDeviceGetMinorNumber"));
	assert_non_null(strstr(e->err, FAKE_NVML_NOSYM_LIB));
}

static void test_old_driver(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_OLD_LIB, "two-gpus.conf");
	assert_int_equal(e->info.n_devices, 2);
	/* PCI info through _v2, the architecture from the compute capability. */
	assert_string_equal(e->info.devices[1].pci_bus_id, "00000000:CA:00.0");
	assert_int_equal(fake_nvml_count("nvmlDeviceGetPciInfo_v2"), 2);
	assert_int_equal(fake_nvml_count("nvmlDeviceGetPciInfo_v3"), 0);
	assert_string_equal(e->info.devices[0].arch, "ampere");
	assert_string_equal(e->info.devices[1].arch, "ada-lovelace");
	assert_int_equal(e->info.cuda_driver_version, 12040); /* v1 function */
	assert_int_equal(e->b->ops->distance(e->b, 0, 1), -EOPNOTSUPP);
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(isnan(s.temperature_c));
	assert_true(isnan(s.power_w));
	assert_true(isnan(s.sm_clock_mhz));
	assert_int_equal(s.ecc_corrected, UINT64_MAX);
	assert_int_equal(s.mem_total, 15356ULL << 20);
}

static void test_not_supported_and_nth_failure(void **state)
{
	struct env *e = *state;
	struct gpu_sample s;

	open_discover(e, FAKE_NVML_LIB, "two-gpus.conf");
	ctl("set 0 not_supported nvmlDeviceGetPowerUsage,nvmlDeviceGetTemperature");
	assert_int_equal(e->b->ops->sample(e->b, 0, &s), 0);
	assert_true(isnan(s.power_w));
	assert_true(isnan(s.temperature_c));
	assert_true(fabs(s.sm_clock_mhz - 1770) < 1e-9);
	assert_int_equal(e->b->ops->sample(e->b, 1, &s), 0);
	assert_true(fabs(s.power_w - 16) < 1e-9);

	/* The second nvmlDeviceGetUUID call from now fails: GPU 1 is skipped, with the reason. */
	ctl("fail nvmlDeviceGetUUID GPU_IS_LOST 2");
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->info.n_skipped, 1);
	assert_non_null(strstr(e->info.skipped[0], "GPU 1"));
	assert_non_null(strstr(e->info.skipped[0], "nvmlDeviceGetUUID"));
	assert_non_null(strstr(e->info.skipped[0], "GPU is lost"));
	/* Only that call: the next discovery sees both again. */
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 2);

	/* A mismatch during discovery fails it with -EXDEV. */
	ctl("mismatch on");
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), -EXDEV);
	assert_non_null(strstr(e->err, "550.54.15"));
}

static void test_probe_lost(void **state)
{
	struct env *e = *state;

	open_discover(e, FAKE_NVML_LIB, "two-gpus.conf");
	ctl("lost 1");
	assert_int_equal(e->b->ops->probe(e->b, 1), -ENODEV);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	ctl("back 1");
	assert_int_equal(e->b->ops->probe(e->b, 1), 0);
	ctl("mismatch on");
	assert_int_equal(e->b->ops->probe(e->b, 0), -EXDEV);
	ctl("mismatch off"); /* like a module reload: stale until re-initialised */
	assert_int_equal(e->b->ops->probe(e->b, 0), -EXDEV);
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
	assert_int_equal(e->b->ops->probe(e->b, 1), 0);
	assert_int_equal(fake_nvml_count("nvmlInit_v2"), 2);
	assert_int_equal(fake_nvml_count("nvmlShutdown"), 1);

	/* A reinit that still meets a mismatch says so. */
	ctl("mismatch on");
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), -EXDEV);
	assert_non_null(strstr(e->err, "12.550.54.15"));
	assert_int_equal(e->b->ops->probe(e->b, 0), -EXDEV);
	ctl("mismatch off");
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(e->b->ops->probe(e->b, 0), 0);
}

struct injector {
	const char *cmd;
	usec_t sent;
};

/* Waits until a thread is blocked in nvmlEventSetWait_v2, then injects. */
static void *inject_when_waiting(void *arg)
{
	struct injector *inj = arg;
	char reply[64];

	for (int i = 0; i < 500; i++) {
		if (fake_nvml_ctl(NULL, "waiters", reply, sizeof(reply)) == 0 &&
		    strcmp(reply, "1") == 0)
			break;
		(void)usleep(2000);
	}
	(void)usleep(20000);
	inj->sent = now_usec();
	(void)fake_nvml_ctlf("%s", inj->cmd);
	return NULL;
}

static int wait_with(struct env *e, const char *cmd, usec_t timeout, struct gpu_event *ev,
		     usec_t *latency)
{
	struct injector inj = { .cmd = cmd };
	pthread_t t;
	int r;

	assert_int_equal(pthread_create(&t, NULL, inject_when_waiting, &inj), 0);
	r = e->b->ops->event_wait(e->b, timeout, ev);
	*latency = now_usec() - inj.sent;
	assert_int_equal(pthread_join(t, NULL), 0);
	return r;
}

static void test_events(void **state)
{
	struct env *e = *state;
	struct gpu_event ev;
	usec_t t0, latency;
	int r;

	open_discover(e, FAKE_NVML_LIB, "two-gpus.conf");
	assert_int_equal(e->b->ops->events_open(e->b), 0);

	/* A blocked wait wakes at once on an injected XID. */
	r = wait_with(e, "xid 1 79", 10 * USEC_PER_SEC, &ev, &latency);
	assert_int_equal(r, 1);
	assert_int_equal(ev.kind, GPU_EVENT_XID);
	assert_int_equal(ev.gpu, 1);
	assert_int_equal(ev.xid, 79);
	assert_true(latency < 200 * USEC_PER_MSEC);

	/* And honours its timeout when nothing comes. */
	t0 = now_usec();
	r = e->b->ops->event_wait(e->b, 300 * USEC_PER_MSEC, &ev);
	assert_int_equal(r, 0);
	assert_true(now_usec() - t0 >= 290 * USEC_PER_MSEC);
	assert_true(now_usec() - t0 < USEC_PER_SEC);

	ctl("ecc 0 single");
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), 1);
	assert_int_equal(ev.kind, GPU_EVENT_ECC_SINGLE);
	assert_int_equal(ev.gpu, 0);
	ctl("ecc 1 double");
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), 1);
	assert_int_equal(ev.kind, GPU_EVENT_ECC_DOUBLE);
	assert_int_equal(ev.gpu, 1);

	r = wait_with(e, "lost 0", 10 * USEC_PER_SEC, &ev, &latency);
	assert_int_equal(r, 1);
	assert_int_equal(ev.kind, GPU_EVENT_LOST);
	assert_int_equal(ev.gpu, -1);
	assert_true(latency < 200 * USEC_PER_MSEC);
	ctl("back 0");

	r = wait_with(e, "mismatch on", 10 * USEC_PER_SEC, &ev, &latency);
	assert_int_equal(r, 1);
	assert_int_equal(ev.kind, GPU_EVENT_DRIVER_CHANGED);
	assert_int_equal(ev.gpu, -1);
	ctl("mismatch off");
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), 1);
	assert_int_equal(ev.kind, GPU_EVENT_DRIVER_CHANGED); /* stale until re-initialised */

	/* After a re-init the set is gone until opened again. */
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), -EBADF);
	assert_int_equal(e->b->ops->events_open(e->b), 0);
	ctl("xid 0 48");
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), 1);
	assert_int_equal(ev.kind, GPU_EVENT_XID);
	assert_int_equal(ev.gpu, 0);
	assert_int_equal(ev.xid, 48);

	/* Other errors become -errno. */
	ctl("fail nvmlEventSetWait_v2 UNKNOWN");
	assert_int_equal(e->b->ops->event_wait(e->b, USEC_PER_SEC, &ev), -EIO);
	e->b->ops->events_close(e->b);
	assert_int_equal(fake_nvml_count("nvmlEventSetFree"), 2);
}

/* Thor (11.0, an architecture NVML's value does not name here) is blackwell; Orin's T23X goes
   by its capability, ampere; NVML's Blackwell value is blackwell. */
static void test_arch(void **state)
{
	struct env *e = *state;

	open_discover(e, FAKE_NVML_LIB, "arch.conf");
	assert_int_equal(e->info.n_devices, 3);
	assert_string_equal(e->info.devices[0].arch, "blackwell");
	assert_string_equal(e->info.devices[1].arch, "ampere");
	assert_string_equal(e->info.devices[2].arch, "blackwell");
}

static void test_events_unsupported(void **state)
{
	struct env *e = *state;
	char reply[64];

	open_discover(e, FAKE_NVML_LIB, "no-events.conf");
	assert_false(e->info.devices[0].events_supported);
	assert_true(e->info.devices[1].events_supported);
	assert_string_equal(e->info.devices[0].arch, "kepler");
	assert_int_equal(e->b->ops->events_open(e->b), 0);
	/* Only GPU 1 was registered. */
	assert_int_equal(fake_nvml_ctl(NULL, "xid 0 79", reply, sizeof(reply)), 0);
	assert_string_equal(reply, "delivered=0");
	assert_int_equal(fake_nvml_ctl(NULL, "xid 1 79", reply, sizeof(reply)), 0);
	assert_string_equal(reply, "delivered=1");
	e->b->ops->events_close(e->b);

	/* No GPU with events at all: -EOPNOTSUPP, and no set left behind. */
	ctl("set 1 events none");
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_false(e->info.devices[1].events_supported);
	assert_int_equal(e->b->ops->events_open(e->b), -EOPNOTSUPP);
	assert_int_equal(fake_nvml_ctl(NULL, "sets", reply, sizeof(reply)), 0);
	assert_string_equal(reply, "0");
}

static void test_hotplug(void **state)
{
	struct env *e = *state;
	char cmd[4096];

	open_discover(e, FAKE_NVML_LIB, "zero-gpus.conf");
	assert_int_equal(e->info.n_devices, 0);
	assert_int_equal(e->b->ops->events_open(e->b), -EOPNOTSUPP);
	/* GPUs appear without a driver reload: the next discovery sees them. */
	(void)snprintf(cmd, sizeof(cmd), "load %s/two-gpus.conf", FAKE_NVML_FIXTURES);
	ctl(cmd);
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->b->ops->probe(e->b, 1), 0);
	/* A reload with another fixture: stale until re-initialised, then the GPUs it keeps. */
	(void)snprintf(cmd, sizeof(cmd), "reload %s/mig.conf", FAKE_NVML_FIXTURES);
	ctl(cmd);
	assert_int_equal(e->b->ops->probe(e->b, 0), -EXDEV);
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(e->b->ops->probe(e->b, 0), -ENODEV); /* its UUID is gone */
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 1);
	assert_int_equal(e->info.n_skipped, 1);
}

/* --- the driver's own library (scripts/hw-check sets EDGEGPU_NVML_REAL=1) --- */

static void test_real(void **state)
{
	struct env *e = *state;
	struct gpu_backend_opts o = { .kind = GPU_BACKEND_NVML,
				      .lib_path = getenv("EDGEGPU_NVML_LIB") };
	struct gpu_event ev;
	int r;

	discover_ok(e, gpu_backend_open(&o, &e->b, &e->err));
	print_message("driver %s, CUDA %d, NVML %s, %u GPUs, %u skipped\n", e->info.driver_version,
		      e->info.cuda_driver_version, e->info.lib_version, e->info.n_devices,
		      e->info.n_skipped);
	assert_true(e->info.n_devices + e->info.n_skipped >= 1);
	assert_true(e->info.driver_version[0] != 0);
	for (unsigned i = 0; i < e->info.n_skipped; i++)
		print_message("skipped: %s\n", e->info.skipped[i]);
	for (unsigned i = 0; i < e->info.n_devices; i++) {
		const struct gpu_device *d = &e->info.devices[i];
		struct gpu_sample s;

		print_message("GPU %u: %s %s minor=%u mem=%llu MiB pci=%s numa=%d cc=%d.%d arch=%s "
			      "events=%s\n",
			      d->index, d->uuid, d->name, d->minor,
			      (unsigned long long)(d->mem_total >> 20), d->pci_bus_id, d->numa_node,
			      d->cc_major, d->cc_minor, d->arch,
			      d->events_supported ? "yes" : "no");
		assert_int_equal(strncmp(d->uuid, "GPU-", 4), 0);
		assert_true(d->name[0] != 0);
		/* DDDDDDDD:BB:DD.F */
		assert_int_equal(strlen(d->pci_bus_id), 16);
		assert_int_equal(strspn(d->pci_bus_id, "0123456789abcdefABCDEF:."), 16);
		assert_true(d->pci_bus_id[8] == ':' && d->pci_bus_id[11] == ':' &&
			    d->pci_bus_id[14] == '.');
		assert_true(d->numa_node >= -1);
		assert_true(d->integrated || d->mem_total > 0);
		assert_string_not_equal(d->arch, "");
		assert_int_equal(e->b->ops->probe(e->b, i), 0);
		assert_int_equal(e->b->ops->sample(e->b, i, &s), 0);
		print_message("GPU %u: %.0f C, %.1f W of %.1f W, util %.0f%%, sm %.0f MHz\n", i,
			      s.temperature_c, s.power_w, s.power_limit_w, s.util_gpu,
			      s.sm_clock_mhz);
		if (i > 0) {
			r = e->b->ops->distance(e->b, 0, i);
			assert_true(r >= 0 || r == -EOPNOTSUPP);
		}
	}
	r = e->b->ops->events_open(e->b);
	assert_true(r == 0 || r == -EOPNOTSUPP);
	if (r == 0) {
		r = e->b->ops->event_wait(e->b, 200 * USEC_PER_MSEC, &ev);
		assert_true(r == 0 || r == 1);
		e->b->ops->events_close(e->b);
	}
	assert_int_equal(e->b->ops->reinit(e->b, &e->err), 0);
	assert_int_equal(e->b->ops->probe(e->b, 0), e->info.n_devices ? 0 : -EINVAL);

	/* Closing unloads the library (dlclose); loading it again must work. */
	{
		struct gpu_info again = { 0 };
		unsigned n = e->info.n_devices;

		gpu_backend_close(e->b);
		e->b = NULL;
		assert_int_equal(gpu_backend_open(&o, &e->b, &e->err), 0);
		assert_int_equal(e->b->ops->discover(e->b, &again, &e->err), 0);
		assert_int_equal(again.n_devices, n);
		for (unsigned i = 0; i < n; i++)
			assert_string_equal(again.devices[i].uuid, e->info.devices[i].uuid);
		gpu_info_release(&again);
	}
}

/* One backend call on a thread of its own, so that the test can look at it while it hangs. */
struct hung_op {
	struct gpu_backend *b;
	bool discover; /* else sample GPU 1 */
	int r;
	struct gpu_sample s;
	struct gpu_info info;
	char *err;
};

static void *run_op(void *arg)
{
	struct hung_op *op = arg;

	if (op->discover)
		op->r = op->b->ops->discover(op->b, &op->info, &op->err);
	else
		op->r = op->b->ops->sample(op->b, 1, &op->s);
	return NULL;
}

static unsigned ctl_number(const char *cmd)
{
	char reply[64];

	assert_int_equal(fake_nvml_ctl(NULL, cmd, reply, sizeof(reply)), 0);
	return (unsigned)strtoul(reply, NULL, 10);
}

/*
 * A call that hangs is named by the backend (struct gpu_backend.call): for each function a
 * sample or a discovery makes, the fake holds that function and the name must be its own.
 * A function called through its pointer without the naming macro would leave the name of
 * the call before it (issue 16: the power readings were reported as the temperature threshold).
 */
static void test_hung_call_named(void **state)
{
	static const char *const sampled[] = {
		"nvmlDeviceGetMemoryInfo_v2", /* v1 only where v2 fails (test-gpu-nvml-counters) */
		"nvmlDeviceGetTemperature",
		"nvmlDeviceGetTemperatureThreshold",
		"nvmlDeviceGetPowerUsage",
		"nvmlDeviceGetEnforcedPowerLimit",
		"nvmlDeviceGetUtilizationRates",
		"nvmlDeviceGetClockInfo",
		"nvmlDeviceGetTotalEccErrors",
		"nvmlDeviceGetTotalEnergyConsumption",
		"nvmlDeviceGetCurrentClocksThrottleReasons",
		"nvmlDeviceGetComputeRunningProcesses_v3",
		"nvmlDeviceGetFieldValues",
		"nvmlDeviceGetPcieReplayCounter",
		"nvmlDeviceGetEncoderUtilization",
		"nvmlDeviceGetDecoderUtilization",
		"nvmlDeviceGetRemappedRows",
	};
	static const char *const discovered[] = {
		"nvmlDeviceGetHandleByIndex_v2",
		"nvmlDeviceGetUUID",
		"nvmlDeviceGetName",
		"nvmlDeviceGetMigMode",
		"nvmlDeviceGetMinorNumber",
		"nvmlDeviceGetPciInfo_v3",
		"nvmlDeviceGetMemoryInfo",
		"nvmlDeviceGetCudaComputeCapability",
		"nvmlDeviceGetArchitecture",
		"nvmlDeviceGetSupportedEventTypes",
	};
	struct env *e = *state;

	open_discover(e, FAKE_NVML_LIB, "two-gpus.conf");
	for (size_t k = 0; k < ELEMENTSOF(sampled) + ELEMENTSOF(discovered); k++) {
		bool disc = k >= ELEMENTSOF(sampled);
		const char *fn = disc ? discovered[k - ELEMENTSOF(sampled)] : sampled[k];
		struct hung_op op = { .b = e->b, .discover = disc };
		char cmd[128];
		const char *call;
		pthread_t t;

		(void)snprintf(cmd, sizeof(cmd), "block %s", fn);
		ctl(cmd);
		assert_int_equal(pthread_create(&t, NULL, run_op, &op), 0);
		(void)snprintf(cmd, sizeof(cmd), "blocked %s", fn);
		for (int i = 0; i < 1000 && ctl_number(cmd) == 0; i++)
			(void)usleep(5000);
		assert_int_equal(ctl_number(cmd), 1);
		call = atomic_load(&e->b->call);
		/* Released before any verdict: a thread left in the fake would hang the teardown. */
		(void)snprintf(cmd, sizeof(cmd), "release %s", fn);
		ctl(cmd);
		assert_int_equal(pthread_join(t, NULL), 0);
		if (!call || strcmp(call, fn) != 0)
			fail_msg("a call hung in %s is named %s", fn, call ? call : "(null)");
		assert_int_equal(op.r, 0);
		gpu_info_release(&op.info);
		free(op.err);
	}
}

/* The worker's copy of the options stands alone: the caller's strings may go first. */
static void test_opts_copy(void **state)
{
	char *lib = strdup(FAKE_NVML_LIB), *root = strdup("/driver-root");
	struct gpu_backend_opts src = { .kind = GPU_BACKEND_NVML,
					.lib_path = lib,
					.driver_root = root };
	struct gpu_backend_opts dst;
	struct gpu_backend *b = NULL;
	char *err = NULL;

	(void)state;
	assert_int_equal(gpu_backend_opts_copy(&dst, &src), 0);
	free(lib);
	free(root);
	assert_int_equal(dst.kind, GPU_BACKEND_NVML);
	assert_string_equal(dst.lib_path, FAKE_NVML_LIB);
	assert_string_equal(dst.driver_root, "/driver-root");
	assert_null(dst.sysfs_root);
	assert_null(dst.proc_root);
	assert_int_equal(gpu_backend_open(&dst, &b, &err), 0);
	gpu_backend_close(b);
	free(err);
	gpu_backend_opts_release(&dst);
	assert_null(dst.lib_path);
	assert_null(dst.driver_root);
}

/*
 * Driver memory limits (CUDA 13.4): GetMemoryLimits_v1 SUCCESS is SUPPORTED, NOT_SUPPORTED or
 * another error UNSUPPORTED, a library without the function UNKNOWN. And the fake's Set is
 * recorded where a test can read it (the control command "limits GPU").
 */
static void test_mem_limits(void **state)
{
	struct env *e = *state;
	struct nvml_set_memory_limits set = { "/sys/fs/cgroup/kubepods/pod1/ctr", 1ULL << 30,
					      2ULL << 30 };
	struct nvml_get_memory_limits got = { .name_space = set.name_space };
	nvml_fn_nvmlDeviceSetMemoryLimits_v1 *set_fn;
	nvml_fn_nvmlDeviceGetMemoryLimits_v1 *get_fn;
	nvml_fn_nvmlDeviceGetHandleByIndex_v2 *handle_fn;
	struct nvml_device *h = NULL;
	char reply[512];
	void *dl;

	open_discover(e, FAKE_NVML_LIB, "memory-limits.conf");
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->info.devices[0].mem_limits, GPU_MEM_LIMITS_SUPPORTED);
	assert_int_equal(e->info.devices[1].mem_limits, GPU_MEM_LIMITS_UNSUPPORTED);

	/* Any other error: unsupported too, and discovery goes on. */
	ctl("fail nvmlDeviceGetMemoryLimits_v1 NO_PERMISSION");
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.n_devices, 2);
	assert_int_equal(e->info.devices[0].mem_limits, GPU_MEM_LIMITS_UNSUPPORTED);
	ctl("fail nvmlDeviceGetMemoryLimits_v1 off");
	ctl("set 1 memory_limits supported");
	gpu_info_release(&e->info);
	assert_int_equal(e->b->ops->discover(e->b, &e->info, &e->err), 0);
	assert_int_equal(e->info.devices[1].mem_limits, GPU_MEM_LIMITS_SUPPORTED);

	/* The fake's Set, as the toolkit's hook calls it, and what Get and "limits" say of it. */
	dl = dlopen(FAKE_NVML_LIB, RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(dl);
	set_fn = (nvml_fn_nvmlDeviceSetMemoryLimits_v1 *)dlsym(dl, "nvmlDeviceSetMemoryLimits_v1");
	get_fn = (nvml_fn_nvmlDeviceGetMemoryLimits_v1 *)dlsym(dl, "nvmlDeviceGetMemoryLimits_v1");
	handle_fn =
		(nvml_fn_nvmlDeviceGetHandleByIndex_v2 *)dlsym(dl, "nvmlDeviceGetHandleByIndex_v2");
	assert_true(set_fn && get_fn && handle_fn);
	assert_int_equal(handle_fn(0, &h), NVML_RET_SUCCESS);
	assert_int_equal(get_fn(h, &got), NVML_RET_SUCCESS); /* never set: cleared */
	assert_true(got.soft == 0 && got.hard == NVML_MEMORY_LIMIT_MAX);
	assert_int_equal(set_fn(h, &set), NVML_RET_SUCCESS);
	assert_int_equal(get_fn(h, &got), NVML_RET_SUCCESS);
	assert_true(got.soft == 1ULL << 30 && got.hard == 2ULL << 30 && got.current_used == 0);
	assert_int_equal(fake_nvml_ctl(NULL, "limits 0", reply, sizeof(reply)), 0);
	assert_string_equal(reply, "/sys/fs/cgroup/kubepods/pod1/ctr=1073741824:2147483648");
	set.soft = 3ULL << 30; /* above hard */
	assert_int_equal(set_fn(h, &set), NVML_RET_INVALID_ARGUMENT);
	ctl("set 0 memory_limits not_supported");
	assert_int_equal(set_fn(h, &set), NVML_RET_NOT_SUPPORTED);
	(void)dlclose(dl);

	/* A library before CUDA 13.4 lacks the function: unknown, not unsupported. */
	close_backend(e);
	open_discover(e, FAKE_NVML_OLD_LIB, "memory-limits.conf");
	assert_int_equal(e->info.devices[0].mem_limits, GPU_MEM_LIMITS_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest fake[] = {
		cmocka_unit_test_setup_teardown(test_discover_two, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mig_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gfd_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lib_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_root_search, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backend_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backend_open_auto_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_symbol, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_supported_and_nth_failure, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_probe_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_arch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events_unsupported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hotplug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_opts_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_call_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mem_limits, setup, teardown),
	};
	const struct CMUnitTest real[] = {
		cmocka_unit_test_setup_teardown(test_real, setup, teardown),
	};
	const char *mode = getenv("EDGEGPU_NVML_REAL");
	const char *ld = getenv("LD_LIBRARY_PATH");

	/* The loader's search must be the system's (see tests/unit/meson.build). */
	if (ld && strstr(ld, "fakes/nvml")) {
		(void)fprintf(stderr, "LD_LIBRARY_PATH holds a fake NVML directory: %s\n", ld);
		return 1;
	}

	if (mode && streq(mode, "1"))
		return cmocka_run_group_tests_name("gpu-nvml-real", real, NULL, NULL);
	return cmocka_run_group_tests_name("gpu-nvml", fake, NULL, NULL);
}
