/* The NVML backend's unit tests' shared fixture (unit-nvml.h). */

#include "unit-nvml.h"

#include <stdio.h>
#include <stdlib.h>

#include "fake-client.h"
#include "gpu-open.h"
#include "unit-fs.h"
#include "unit.h"

int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	unit_tmpdir("test-gpu-nvml", e->dir, sizeof(e->dir));
	(void)snprintf(e->sysfs, sizeof(e->sysfs), "%s/sys", e->dir);
	(void)snprintf(e->proc, sizeof(e->proc), "%s/proc", e->dir);
	(void)snprintf(e->sock, sizeof(e->sock), "%s/ctl.sock", e->dir);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_CONTROL", e->sock, 1), 0);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_SYSFS", e->sysfs, 1), 0);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_PROCFS", e->proc, 1), 0);
	*state = e;
	return 0;
}

void close_backend(struct env *e)
{
	gpu_info_release(&e->info);
	gpu_backend_close(e->b);
	e->b = NULL;
}

int teardown(void **state)
{
	struct env *e = *state;

	close_backend(e);
	free(e->err);
	unit_rm_tree(e->dir);
	free(e);
	return 0;
}

/* Opens @lib with the fixture @fixture (a file in tests/fakes/nvml/fixtures). */
int open_kind(struct env *e, enum gpu_backend_kind kind, const char *lib, const char *fixture)
{
	char path[512];
	struct gpu_backend_opts o = {
		.kind = kind,
		.lib_path = lib,
		.sysfs_root = e->sysfs,
		.proc_root = e->proc,
	};

	(void)snprintf(path, sizeof(path), "%s/%s", FAKE_NVML_FIXTURES, fixture);
	assert_int_equal(setenv("EDGEGPU_FAKE_NVML_FIXTURE", path, 1), 0);
	free(e->err);
	e->err = NULL;
	return gpu_backend_open(&o, &e->b, &e->err);
}

int open_fake(struct env *e, const char *lib, const char *fixture)
{
	return open_kind(e, GPU_BACKEND_NVML, lib, fixture);
}

void open_discover(struct env *e, const char *lib, const char *fixture)
{
	discover_ok(e, open_fake(e, lib, fixture));
}

void discover_ok(struct env *e, int open_r)
{
	int r = open_r;

	if (r < 0)
		print_error("open: %d %s\n", r, e->err ? e->err : "");
	assert_int_equal(r, 0);
	r = e->b->ops->discover(e->b, &e->info, &e->err);
	if (r < 0)
		print_error("discover: %d %s\n", r, e->err ? e->err : "");
	assert_int_equal(r, 0);
}

void ctl(const char *cmd)
{
	char reply[256];
	int r = fake_nvml_ctl(NULL, cmd, reply, sizeof(reply));

	if (r < 0)
		print_error("fake nvml \"%s\": %d %s\n", cmd, r, reply);
	assert_int_equal(r, 0);
}
