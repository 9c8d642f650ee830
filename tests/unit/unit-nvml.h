#pragma once

/*
 * The NVML backend's unit tests (test-gpu-nvml.c, test-gpu-nvml-counters.c,
 * test-gpu-gpm.c): a scratch
 * environment, the backend opened on a fake libnvidia-ml.so.1 (tests/fakes/nvml) with one of
 * its fixtures, and the fake's control socket. Each function checks what it does with
 * cmocka's assertions (a failure fails the running test). Built into the tests that list
 * unit-nvml.c in tests/unit/meson.build, which also define FAKE_NVML_* there.
 */

#include "gpu-backend.h"
#include "gpu.h"

struct env {
	char dir[64];
	char sysfs[128];
	char proc[128];
	char sock[128];
	struct gpu_backend *b; /* owned: closed by teardown() */
	struct gpu_info info;  /* owned: released by teardown() */
	char *err;	       /* owned, heap */
};

/* cmocka fixture: a new struct env in *@state, its directory made, the fake's variables set. */
int setup(void **state);
/* cmocka fixture: closes the backend and removes what setup() made. */
int teardown(void **state);
/* Releases e->info and closes e->b (NULL after), for a test that opens another backend. */
void close_backend(struct env *e);

/*
 * Opens @lib as a backend of @kind with the fixture @fixture (a file in
 * tests/fakes/nvml/fixtures). Returns gpu_backend_open()'s result; e->err gets its message.
 */
int open_kind(struct env *e, enum gpu_backend_kind kind, const char *lib, const char *fixture);
/* open_kind() for GPU_BACKEND_NVML. */
int open_fake(struct env *e, const char *lib, const char *fixture);
/* open_fake() and a discovery into e->info, both asserted to succeed. */
void open_discover(struct env *e, const char *lib, const char *fixture);
/* @open_r, an open's result, asserted 0 (with e->err printed), then discover_ok()'s discovery. */
void discover_ok(struct env *e, int open_r);
/* One control command to the fake, asserted to succeed. */
void ctl(const char *cmd);
