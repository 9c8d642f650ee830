/*
 * enforce.c and enforce-alloc.c: the library install, the allocation directories (units,
 * mode, limits, region), the env and mounts of a grant, the removal of allocations whose pods
 * are gone or whose units are taken again, the read-back after a restart, and the hostile
 * trees (a file where a directory goes, links, garbage, a huge units file, thousands of stale
 * directories).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "enforce.h"
#include "file-read.h"
#include "gpu.h"
#include "limits-file.h"
#include "region.h"
#include "unit-fs.h"
#include "unit-podres.h"
#include "unit.h"

#define UUID0 "GPU-abcdef00-1111-2222-3333-444444444440"
#define UUID1 "GPU-abcdef01-1111-2222-3333-444444444441"
#define RES   "nvidia.com/gpumem"

static struct gpu_device gpus_arr[2] = {
	{ .index = 0, .uuid = UUID0, .mem_limits = GPU_MEM_LIMITS_UNSUPPORTED },
	{ .index = 1, .uuid = UUID1, .mem_limits = GPU_MEM_LIMITS_UNSUPPORTED },
};
static struct gpu_info info = { .n_devices = 2, .devices = gpus_arr };

/*
 * The next openat() of this name fails with EMFILE (once: the descriptors come back):
 * -Wl,--wrap=openat64, the name openat has under _FILE_OFFSET_BITS=64 (tests/unit/meson.build).
 */
static const char *openat_fails;

/* NOLINTBEGIN(bugprone-reserved-identifier): the names ld's --wrap gives */
int __real_openat64(int dfd, const char *path, int flags, ...);
int __wrap_openat64(int dfd, const char *path, int flags, ...);
/* NOLINTEND(bugprone-reserved-identifier) */
int __wrap_openat64(int dfd, const char *path, int flags,
		    ...) /* NOLINT(bugprone-reserved-identifier) */
{
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (openat_fails && strcmp(path, openat_fails) == 0) {
		openat_fails = NULL;
		errno = EMFILE;
		return -1;
	}
	return __real_openat64(dfd, path, flags, mode);
}

struct fx {
	char dir[64];
	char lib[128], state[128], alloc[160];
	struct config_enforcement cfg;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int fd;

	assert_non_null(f);
	unit_tmpdir("test-enforce", f->dir, sizeof(f->dir));
	(void)snprintf(f->lib, sizeof(f->lib), "%s/src.so", f->dir);
	(void)snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	(void)snprintf(f->alloc, sizeof(f->alloc), "%s/alloc", f->state);
	fd = open(f->lib, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "\177ELF-not-really", 16), 16);
	close(fd);
	f->cfg = (struct config_enforcement){
		.interposer = true,
		.driver = true,
		.preload = CONFIG_PRELOAD_LD_SO_PRELOAD,
		.library = f->lib,
		.state_dir = f->state,
		.managed = CONFIG_MANAGED_COUNT,
	};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unit_rm_tree(f->dir);
	free(f);
	return 0;
}

static char *slurp(const char *dir, const char *name)
{
	char path[512], *t = NULL;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_file(path, 1 << 20, &t, NULL) < 0)
		return NULL;
	return t;
}

/* Whether <dir>/<name> is there (itself, links not followed). */
static bool exists(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static const char *env_of(const struct enforce_grant *g, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < g->n_env; i++)
		if (strncmp(g->env[i], key, n) == 0 && g->env[i][n] == '=')
			return g->env[i] + n + 1;
	return NULL;
}

static const struct alloc_mount *mount_of(const struct enforce_grant *g, const char *ctr)
{
	for (size_t i = 0; i < g->n_mounts; i++)
		if (strcmp(g->mounts[i].container_path, ctr) == 0)
			return &g->mounts[i];
	return NULL;
}

/* One-GPU allocation of @n units "<UUID0>::<first+i>" at @mib. */
static int alloc(struct enforce *e, unsigned first, unsigned n, uint64_t mib,
		 struct enforce_grant *g)
{
	char *ids[64];
	const struct gpu_device *gp[1] = { &gpus_arr[0] };
	int r;

	assert_true(n <= 64);
	for (unsigned i = 0; i < n; i++)
		assert_non_null(ids[i] = strdup_printf(UUID0 "::%u", first + i));
	r = enforce_allocate(e, &info, RES, ids, n, gp, &mib, 1, g);
	for (unsigned i = 0; i < n; i++)
		free(ids[i]);
	return r;
}

/* A pod-resources answer holding @ids of RES (heap: the caller frees). */
static uint8_t *podres(char **ids, size_t n, size_t *ret_len)
{
	uint8_t *out = malloc(4096);

	assert_non_null(out);
	*ret_len = unit_podres_answer(RES, ids, n, out, 4096);
	return out;
}

static void test_install(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	char *t, libdir[256];

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_true(enforce_installed(e));
	(void)snprintf(libdir, sizeof(libdir), "%s/lib", f->state);
	t = slurp(libdir, "libedgegpu-cuda.so");
	assert_non_null(t);
	assert_memory_equal(t, "\177ELF-not-really", 16);
	free(t);
	t = slurp(libdir, "ld.so.preload");
	assert_string_equal(t, "/usr/local/edgegpu/libedgegpu-cuda.so\n");
	free(t);
	/* Installed again with the same content: nothing to do, still installed. */
	assert_int_equal(enforce_install(e), 0);
	/* The source gone: not installed, said, and the next verdict is not the interposer. */
	assert_int_equal(unlink(f->lib), 0);
	assert_int_equal(enforce_install(e), -ENOENT);
	assert_false(enforce_installed(e));
	enforce_free(e);
}

static void test_allocate_interposer(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };
	const struct alloc_mount *m;
	struct limits l;
	unsigned line;
	char dir[256], *t;

	f->cfg.driver = false;
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(alloc(e, 0, 3, 3, &g), 0);
	assert_int_equal(g.mode, ENFORCE_INTERPOSER);
	assert_string_equal(g.reason, "off");
	assert_int_equal(strlen(g.name), 16);
	assert_string_equal(env_of(&g, "NVIDIA_GPU_MEMORY_REQUEST"), "3");
	assert_string_equal(env_of(&g, "NVIDIA_GPU_MEMORY_LIMIT"), "3");
	assert_string_equal(env_of(&g, "EDGEGPU_GPUMEM_ENFORCEMENT"), "interposer");
	assert_null(env_of(&g, "LD_PRELOAD"));
	assert_int_equal(g.n_mounts, 4);
	(void)snprintf(dir, sizeof(dir), "%s/alloc/%s", f->state, g.name);
	m = mount_of(&g, ENFORCE_CTR_LIB);
	assert_true(m && m->read_only && strstr(m->host_path, "/lib/libedgegpu-cuda.so"));
	m = mount_of(&g, ENFORCE_CTR_PRELOAD);
	assert_true(m && m->read_only && strstr(m->host_path, "/lib/ld.so.preload"));
	m = mount_of(&g, ENFORCE_CTR_LIMITS);
	assert_true(m && m->read_only && strncmp(m->host_path, dir, strlen(dir)) == 0);
	m = mount_of(&g, ENFORCE_CTR_STATE);
	assert_true(m && !m->read_only && strncmp(m->host_path, dir, strlen(dir)) == 0);

	t = slurp(dir, "units");
	assert_string_equal(t, RES "\n" UUID0 "::0\n" UUID0 "::1\n" UUID0 "::2\n");
	free(t);
	t = slurp(dir, "mode");
	assert_string_equal(t, "interposer\n");
	free(t);
	t = slurp(dir, "limits");
	assert_non_null(t);
	assert_int_equal(limits_parse(t, strlen(t), &l, &line), 0);
	assert_false(l.report_only);
	assert_true(l.count_managed);
	assert_int_equal(l.n_gpus, 1);
	assert_string_equal(l.gpus[0].uuid, UUID0);
	assert_int_equal(l.gpus[0].limit, 3 * 1048576);
	free(t);
	assert_true(exists(dir, "state/region"));
	(void)snprintf(dir, sizeof(dir), "%s/alloc/%s/state/region", f->state, g.name);
	assert_int_equal(region_check_file(dir), 0);
	assert_non_null(enforce_find_unit(e, RES, UUID0 "::1"));
	assert_null(enforce_find_unit(e, RES, UUID0 "::3"));
	enforce_grant_release(&g);
	enforce_free(e);
}

static void test_allocate_ld_preload_and_unequal(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };
	const struct gpu_device *gp[2] = { &gpus_arr[0], &gpus_arr[1] };
	uint64_t mib[2] = { 4, 2 };
	char *ids[] = { (char *)"a", (char *)"b" };

	f->cfg.preload = CONFIG_PRELOAD_ENV;
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(enforce_allocate(e, &info, RES, ids, 2, gp, mib, 2, &g), 0);
	/* No driver support on these GPUs: the interposer, and the reason says so. */
	assert_int_equal(g.mode, ENFORCE_INTERPOSER);
	assert_string_equal(g.reason, "driver-unsupported");
	assert_string_equal(env_of(&g, "LD_PRELOAD"), "/usr/local/edgegpu/libedgegpu-cuda.so");
	/* The toolkit's hook applies one value to every GPU: none said for unequal limits. */
	assert_null(env_of(&g, "NVIDIA_GPU_MEMORY_REQUEST"));
	assert_null(env_of(&g, "NVIDIA_GPU_MEMORY_LIMIT"));
	assert_int_equal(g.n_mounts, 3);
	assert_null(mount_of(&g, ENFORCE_CTR_PRELOAD));
	enforce_grant_release(&g);
	enforce_free(e);
}

static void test_units_taken_again_and_pod_gone(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g1 = { 0 }, g2 = { 0 }, g3 = { 0 };
	char *live[] = { (char *)UUID0 "::5" };
	uint8_t *resp;
	size_t len;

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(alloc(e, 0, 4, 4, &g1), 0);
	assert_int_equal(alloc(e, 4, 2, 2, &g2), 0);
	assert_true(exists(f->alloc, g1.name));
	/* Unit 3 comes back in a new allocation: the first one's pod is gone. */
	assert_int_equal(alloc(e, 3, 1, 1, &g3), 0);
	assert_false(exists(f->alloc, g1.name));
	assert_true(exists(f->alloc, g2.name));
	assert_int_equal(enforce_n_allocs(e), 2);

	/* Within the grace, nothing goes whatever pod-resources says. */
	resp = podres(live, 1, &len);
	assert_int_equal(enforce_set_live_podres(e, resp, len), 0);
	enforce_set_grace(e, 0);
	/* g2 holds unit 5 (listed): kept; g3's unit 3 is listed by no pod: removed. */
	assert_int_equal(enforce_set_live_podres(e, resp, len), 1);
	assert_true(exists(f->alloc, g2.name));
	assert_false(exists(f->alloc, g3.name));
	assert_int_equal(enforce_set_live_podres(e, (const uint8_t *)"\xff\xff", 2), -EBADMSG);
	free(resp);
	enforce_grant_release(&g1);
	enforce_grant_release(&g2);
	enforce_grant_release(&g3);
	enforce_free(e);
}

static void write_text(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void test_restart_reads_back_and_survives_hostile_trees(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };
	const struct enforce_alloc *a;
	char p[512], outside[256];
	char *big;

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(alloc(e, 0, 2, 2, &g), 0);
	enforce_free(e);

	/* What a crash, a person or a hostile host leaves beside it. */
	(void)snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	unit_make_path(f->dir, "/outside/keep");
	(void)snprintf(p, sizeof(p), "%s/alloc/00000000000000aa", f->state);
	assert_int_equal(symlink(outside, p), 0);	      /* a link with our kind of name */
	unit_make_path(f->state, "/alloc/00000000000000bb/"); /* no units: half-made */
	(void)snprintf(p, sizeof(p), "%s/alloc/00000000000000cc", f->state);
	unit_make_path(f->state, "/alloc/00000000000000cc/");
	(void)snprintf(p, sizeof(p), "%s/alloc/00000000000000cc/units", f->state);
	big = malloc(9u << 20);
	assert_non_null(big);
	memset(big, 'x', 9u << 20);
	write_text(p, big, 9u << 20); /* a huge units file */
	free(big);
	unit_make_path(f->state, "/alloc/00000000000000dd/link/");
	(void)snprintf(p, sizeof(p), "%s/alloc/00000000000000dd/units", f->state);
	write_text(p, "\n\n", 2); /* garbage units */
	(void)snprintf(p, sizeof(p), "%s/alloc/00000000000000dd/link/out", f->state);
	assert_int_equal(symlink(outside, p), 0); /* removed as a link, never followed */
	unit_make_path(f->state, "/alloc/not-ours/");
	unit_make_path(f->state, "/alloc/.new-00000000000000ee/state/"); /* a crash mid-build */

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(enforce_n_allocs(e), 1);
	a = enforce_find_unit(e, RES, UUID0 "::1");
	assert_non_null(a);
	assert_string_equal(a->name, g.name);
	assert_int_equal(a->mode, ENFORCE_INTERPOSER);
	assert_int_equal(a->n_gpus, 1);
	assert_string_equal(a->uuids[0], UUID0);
	assert_int_equal(a->limit_mib[0], 2);
	assert_non_null(a->state_dir);
	assert_true(exists(f->alloc, "00000000000000aa"));
	assert_false(exists(f->alloc, "00000000000000bb"));
	assert_false(exists(f->alloc, "00000000000000cc"));
	assert_false(exists(f->alloc, "00000000000000dd"));
	assert_true(exists(f->alloc, "not-ours"));
	assert_false(exists(f->alloc, ".new-00000000000000ee"));
	assert_true(exists(outside, "keep"));
	/* The read-back one keeps its age: with no grace and no pod, it goes. */
	enforce_set_grace(e, 0);
	{
		size_t len;
		uint8_t *resp = podres(NULL, 0, &len);

		assert_int_equal(enforce_set_live_podres(e, resp, len), 1);
		free(resp);
	}
	assert_false(exists(f->alloc, g.name));
	assert_true(exists(outside, "keep"));
	enforce_grant_release(&g);
	enforce_free(e);
}

/*
 * An allocation directory that cannot be opened at read-back (out of descriptors) was once
 * taken for a damaged one and removed, under the container that has its limits mounted.
 */
static void test_restart_keeps_what_it_cannot_open(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };
	char dir[256];

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(alloc(e, 0, 2, 2, &g), 0);
	enforce_free(e);

	openat_fails = g.name;
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_null(openat_fails);
	assert_int_equal(enforce_n_allocs(e), 0);
	(void)snprintf(dir, sizeof(dir), "%s/%s", f->alloc, g.name);
	assert_true(exists(dir, "units"));
	enforce_free(e);

	/* Once it opens again, it is read back whole. */
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(enforce_n_allocs(e), 1);
	assert_non_null(enforce_find_unit(e, RES, UUID0 "::1"));
	enforce_grant_release(&g);
	enforce_free(e);
}

/* 3,000 directories a long-gone run left: read back, and removed in one pass once stale. */
static void test_thousands_of_stale_dirs(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	char p[256], text[128];
	uint8_t *resp;
	size_t len;
	int n;

	for (unsigned i = 0; i < 3000; i++) {
		(void)snprintf(p, sizeof(p), "/alloc/%016x/", i + 1);
		unit_make_path(f->state, p);
		(void)snprintf(p, sizeof(p), "%s/alloc/%016x/units", f->state, i + 1);
		n = snprintf(text, sizeof(text), RES "\nGPU-x::%u\n", i);
		write_text(p, text, (size_t)n);
	}
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_int_equal(enforce_n_allocs(e), 3000);
	assert_non_null(enforce_find_unit(e, RES, "GPU-x::2999"));
	enforce_set_grace(e, 0);
	resp = podres(NULL, 0, &len);
	assert_int_equal(enforce_set_live_podres(e, resp, len), 3000);
	free(resp);
	assert_int_equal(enforce_n_allocs(e), 0);
	(void)snprintf(p, sizeof(p), "%016x", 1);
	assert_false(exists(f->alloc, p));
	enforce_free(e);
}

static void test_state_unwritable_falls_back(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };
	char p[256];

	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	/* alloc/ replaced by a file: nothing can be written there. */
	(void)snprintf(p, sizeof(p), "%s/alloc", f->state);
	unit_rm_tree(p);
	write_text(p, "x", 1);
	assert_int_equal(alloc(e, 0, 2, 2, &g), 0);
	assert_int_equal(g.mode, ENFORCE_ACCOUNTING);
	assert_string_equal(g.reason, "state-write-failed");
	assert_string_equal(g.name, "");
	assert_string_equal(env_of(&g, "EDGEGPU_GPUMEM_ENFORCEMENT"), "accounting");
	assert_string_equal(env_of(&g, "NVIDIA_GPU_MEMORY_LIMIT"), "2");
	assert_int_equal(g.n_mounts, 0);
	/* Still known (the backstop and metrics see it), without a directory. */
	assert_non_null(enforce_find_unit(e, RES, UUID0 "::0"));
	enforce_grant_release(&g);
	enforce_free(e);
}

static void test_state_dir_is_a_file(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_grant g = { 0 };

	write_text(f->state, "x", 1);
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	assert_false(enforce_installed(e));
	assert_int_equal(alloc(e, 0, 1, 1, &g), 0);
	assert_int_equal(g.mode, ENFORCE_ACCOUNTING);
	assert_string_equal(g.reason, "not-installed");
	enforce_grant_release(&g);
	enforce_free(e);
}

static void test_verdict_driver(void **state)
{
	struct fx *f = *state;
	struct enforce *e = NULL;
	struct enforce_verdict v;
	struct gpu_device d[1] = { { .uuid = UUID0, .mem_limits = GPU_MEM_LIMITS_SUPPORTED } };
	struct gpu_info ni = { .n_devices = 1, .devices = d };
	struct enforce_node node = { .cgroup_v2 = true, .cdi_delivery = true, .cdi_hook = true };

	f->cfg.interposer = false;
	assert_int_equal(enforce_new(&f->cfg, "/", &e), 0);
	enforce_verdict(e, &ni, NULL, NULL, 0, &v);
	assert_int_equal(v.mode, ENFORCE_ACCOUNTING);
	assert_string_equal(v.driver_reason, "cgroup-v1");
	enforce_set_node(e, &node);
	enforce_verdict(e, &ni, NULL, NULL, 0, &v);
	assert_int_equal(v.mode, ENFORCE_DRIVER);
	assert_string_equal(v.interposer_reason, "off");
	enforce_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_install, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocate_interposer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocate_ld_preload_and_unequal, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_units_taken_again_and_pod_gone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_restart_reads_back_and_survives_hostile_trees,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_keeps_what_it_cannot_open, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_thousands_of_stale_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_unwritable_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_is_a_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verdict_driver, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
