/*
 * ipz-procaddr: cuGetProcAddress and dlsym through libedgegpu-cuda.so map by address.
 *
 *   ipz-procaddr LIB FAKE_DIR
 *
 * As root, in a private mount namespace, it puts a limits file and a region for the fake's two
 * devices (1 GiB each) at IPZ_DIR (a tmpfs there, or on its parent), then runs itself again
 * with LD_PRELOAD=LIB and the fake libcuda.so.1 from FAKE_DIR, which checks, for every entry
 * of cuda-api.h's CUDA_API_PROCS, every CUDA version from the entry's first to 13.0 and every
 * flag (default, legacy stream, per-thread stream), through both cuGetProcAddress and
 * cuGetProcAddress_v2:
 *   - the answer is what dlsym(RTLD_DEFAULT, <the variant the driver picks>) gives, i.e. our
 *     wrapper of exactly that variant when we wrap it (we are preloaded, so first) and the
 *     driver's own function otherwise; a _ptsz request gets the _ptsz wrapper;
 *   - dlsym(libcuda handle, name) gives the same for every exported name;
 *   - cuGetProcAddress("cuGetProcAddress") gives our wrapper of the variant the driver chose;
 *   - an unknown name passes the driver's answer through;
 *   - a limit hit through the mapped pointers is CUDA_ERROR_OUT_OF_MEMORY, and the reported
 *     total is the slice.
 * Exit 0, 1 on a failed check (each said on stderr), 77 (skip) when not root or without
 * mount namespaces.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda-api.h"
#include "limits-file.h"
#include "region.h"

#ifndef IPZ_DIR
#define IPZ_DIR "/usr/local/edgegpu"
#endif

#define GIB (UINT64_C(1) << 30)

static int failures;

#define CHECK(cond, ...)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			(void)fprintf(stderr, "ipz-procaddr: FAIL %s:%d: ", __FILE__, __LINE__); \
			(void)fprintf(stderr, __VA_ARGS__);                                      \
			(void)fputc('\n', stderr);                                               \
			failures++;                                                              \
		}                                                                                \
	} while (0)

struct proc {
	const char *base, *sym;
	int first, ptsz;
};

#define P(base, sym, first, ptsz) { #base, #sym, first, ptsz },
static const struct proc procs[] = { CUDA_API_PROCS(P) };
#undef P
#define N_PROCS (sizeof(procs) / sizeof(procs[0]))

/* The driver's rule (cuda-api.h): the highest first version <= version, _ptsz only if asked. */
static const char *pick(const char *base, int version, cu_uint64 flags)
{
	const char *best = NULL;
	size_t i;

	for (i = 0; i < N_PROCS; i++)
		if (strcmp(procs[i].base, base) == 0 && procs[i].first <= version &&
		    (!procs[i].ptsz || (flags & CU_PROC_PER_THREAD_DEFAULT_STREAM)))
			best = procs[i].sym;
	return best;
}

static bool ours(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "edgegpu-cuda");
}

static const char *sym_name(const void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_sname ? info.dli_sname : "?";
}

static int child(void)
{
	static const int versions[] = { 11030, 11040, 11060, 12000, 12020, 12030, 13000 };
	static const cu_uint64 flags[] = { CU_PROC_DEFAULT, CU_PROC_LEGACY_STREAM,
					   CU_PROC_PER_THREAD_DEFAULT_STREAM };
	cu_fn_cuGetProcAddress *gpa;
	cu_fn_cuGetProcAddress_v2 *gpa2;
	enum cu_proc_query_result st;
	unsigned mapped = 0, checked = 0;
	void *h, *p;
	size_t i, v, f;

	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		(void)fprintf(stderr, "ipz-procaddr: dlopen libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	gpa = (cu_fn_cuGetProcAddress *)dlsym(h, "cuGetProcAddress");
	gpa2 = (cu_fn_cuGetProcAddress_v2 *)dlsym(h, "cuGetProcAddress_v2");
	CHECK(ours((void *)gpa) && ours((void *)gpa2),
	      "dlsym(libcuda, cuGetProcAddress*) not ours");
	if (!gpa || !gpa2)
		return 1;
	CHECK(((cu_fn_cuInit *)dlsym(h, "cuInit"))(0) == CU_RES_SUCCESS, "cuInit");

	for (i = 0; i < N_PROCS; i++) {
		void *want_sym = dlsym(RTLD_DEFAULT, procs[i].sym);

		CHECK(dlsym(h, procs[i].sym) == want_sym, "dlsym(libcuda, %s) = %s, not %s",
		      procs[i].sym, sym_name(dlsym(h, procs[i].sym)), sym_name(want_sym));
		for (v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
			if (versions[v] < procs[i].first)
				continue;
			for (f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
				const char *s = pick(procs[i].base, versions[v], flags[f]);
				void *want = s ? dlsym(RTLD_DEFAULT, s) : NULL;

				p = NULL;
				CHECK(gpa(procs[i].base, &p, versions[v], flags[f]) ==
						      CU_RES_SUCCESS &&
					      p == want,
				      "cuGetProcAddress(%s, %d, %llu) = %s, want %s", procs[i].base,
				      versions[v], (unsigned long long)flags[f], sym_name(p), s);
				p = NULL;
				st = CU_PROC_SYMBOL_NOT_FOUND;
				CHECK(gpa2(procs[i].base, &p, versions[v], flags[f], &st) ==
						      CU_RES_SUCCESS &&
					      p == want && st == CU_PROC_SUCCESS,
				      "cuGetProcAddress_v2(%s, %d, %llu) = %s, want %s",
				      procs[i].base, versions[v], (unsigned long long)flags[f],
				      sym_name(p), s);
				checked++;
				mapped += ours(p);
			}
		}
	}
	CHECK(mapped > 100, "only %u of %u answers were our wrappers", mapped, checked);

	/* A per-thread-stream request gets the _ptsz wrapper, which is ours. */
	p = NULL;
	(void)gpa2("cuMemAllocAsync", &p, 12000, CU_PROC_PER_THREAD_DEFAULT_STREAM, &st);
	CHECK(ours(p) && strcmp(sym_name(p), "cuMemAllocAsync_ptsz") == 0,
	      "cuMemAllocAsync per-thread = %s", sym_name(p));
	/* cuGetProcAddress itself: our wrapper of the variant the driver returned. */
	p = NULL;
	(void)gpa("cuGetProcAddress", &p, 12000, 0);
	CHECK(ours(p) && strcmp(sym_name(p), "cuGetProcAddress_v2") == 0,
	      "cuGetProcAddress(cuGetProcAddress, 12000) = %s", sym_name(p));
	p = NULL;
	(void)gpa("cuGetProcAddress", &p, 11030, 0);
	CHECK(ours(p) && strcmp(sym_name(p), "cuGetProcAddress") == 0,
	      "cuGetProcAddress(cuGetProcAddress, 11030) = %s", sym_name(p));
	/* Unknown: the driver's answer, untouched. */
	p = NULL;
	st = CU_PROC_SUCCESS;
	(void)gpa2("cuNoSuchFunction", &p, 13000, 0, &st);
	CHECK(st == CU_PROC_SYMBOL_NOT_FOUND && !p, "unknown symbol: status %d", (int)st);
	CHECK(gpa("cuNoSuchFunction", &p, 11030, 0) == CU_RES_NOT_FOUND && !p,
	      "unknown symbol (11.x): not the driver's NOT_FOUND");

	/* The mapped pointers enforce: 1 GiB slice of device 0. */
	{
		cu_fn_cuDevicePrimaryCtxRetain *retain = NULL;
		cu_fn_cuCtxSetCurrent *set = NULL;
		cu_fn_cuMemAlloc_v2 *alloc = NULL;
		cu_fn_cuMemFree_v2 *release = NULL;
		cu_fn_cuMemGetInfo_v2 *info = NULL;
		struct cu_ctx *ctx = NULL;
		cu_deviceptr a = 0, b = 0;
		size_t fr = 0, tot = 0;

		(void)gpa2("cuDevicePrimaryCtxRetain", (void **)&retain, 13000, 0, &st);
		(void)gpa2("cuCtxSetCurrent", (void **)&set, 13000, 0, &st);
		(void)gpa2("cuMemAlloc", (void **)&alloc, 13000, 0, &st);
		(void)gpa2("cuMemFree", (void **)&release, 13000, 0, &st);
		(void)gpa2("cuMemGetInfo", (void **)&info, 13000, 0, &st);
		if (!retain || !set || !alloc || !release || !info)
			return 1;
		CHECK(retain(&ctx, 0) == CU_RES_SUCCESS && set(ctx) == CU_RES_SUCCESS, "context");
		CHECK(info(&fr, &tot) == CU_RES_SUCCESS && tot == GIB && fr == GIB,
		      "cuMemGetInfo: free %zu total %zu, want the 1 GiB slice", fr, tot);
		CHECK(alloc(&a, 600 << 20) == CU_RES_SUCCESS, "first 600 MiB");
		CHECK(alloc(&b, 600 << 20) == CU_RES_OUT_OF_MEMORY, "second 600 MiB not refused");
		CHECK(info(&fr, &tot) == CU_RES_SUCCESS && fr == GIB - (600 << 20),
		      "free after 600 MiB: %zu", fr);
		CHECK(release(a) == CU_RES_SUCCESS, "free");
		CHECK(alloc(&b, 600 << 20) == CU_RES_SUCCESS, "600 MiB after the free");
		CHECK(release(b) == CU_RES_SUCCESS, "free");
		CHECK(release(0xdead0000) == CU_RES_INVALID_VALUE,
		      "unknown pointer reaches the driver");

		/* A fork child counts in a slot of its own; when it dies, its memory comes back. */
		CHECK(alloc(&a, 100 << 20) == CU_RES_SUCCESS, "100 MiB before the fork");
		pid_t pid = fork();
		if (pid == 0)
			_exit(alloc(&b, 800 << 20) == CU_RES_SUCCESS &&
					      alloc(&b, 200 << 20) == CU_RES_OUT_OF_MEMORY ?
				      0 :
				      1);
		int wst = -1;
		CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) &&
			      WEXITSTATUS(wst) == 0,
		      "fork child: 800 MiB beside the parent's 100, then refused");
		CHECK(info(&fr, &tot) == CU_RES_SUCCESS && fr == GIB - (100 << 20),
		      "free after the child died: %zu, want the slice less the parent's 100 MiB",
		      fr);
		CHECK(release(a) == CU_RES_SUCCESS, "free");
	}

	/*
	 * RTLD_NEXT means "after the caller": from this program, a wrapped name is ours (we come
	 * right after the program). Our dlsym must reach glibc's as a tail call to keep that.
	 */
	p = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
	CHECK(ours(p), "dlsym(RTLD_NEXT, cuMemAlloc_v2) from the program = %s, not ours",
	      sym_name(p));
	if (failures == 0)
		printf("ipz-procaddr: %u cuGetProcAddress answers checked, %u mapped to wrappers\n",
		       checked, mapped);
	return failures ? 1 : 0;
}

/* IPZ_DIR with a limits file and a region, on a tmpfs of this mount namespace only. */
static int place_files(void)
{
	struct limits l = { .count_managed = true, .n_gpus = 2 };
	struct region_init_gpu g[2];
	char buf[LIMITS_FILE_MAX], parent[256];
	struct stat st;
	int fd, n, i;

	if (stat(IPZ_DIR, &st) == 0) {
		if (mount("ipz", IPZ_DIR, "tmpfs", 0, "mode=0755") < 0)
			return -errno;
	} else {
		(void)snprintf(parent, sizeof(parent), "%s", IPZ_DIR);
		*strrchr(parent, '/') = '\0';
		if (mount("ipz", parent, "tmpfs", 0, "mode=0755") < 0 || mkdir(IPZ_DIR, 0755) < 0)
			return -errno;
	}
	for (i = 0; i < 2; i++) {
		(void)snprintf(l.gpus[i].uuid, sizeof(l.gpus[i].uuid),
			       "GPU-00000000-0000-4000-8000-%012x", i);
		l.gpus[i].limit = GIB;
		g[i].uuid = l.gpus[i].uuid;
		g[i].limit = GIB;
	}
	n = limits_format(&l, buf, sizeof(buf));
	if (n < 0)
		return n;
	fd = open(IPZ_DIR "/limits", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		return -EIO;
	close(fd);
	if (mkdir(IPZ_DIR "/state", 0777) < 0)
		return -errno;
	return region_create(IPZ_DIR "/state", g, 2, false);
}

int main(int argc, char **argv)
{
	int r;

	if (argc == 2 && strcmp(argv[1], "--child") == 0)
		return child();
	if (argc != 3) {
		(void)fprintf(stderr, "usage: ipz-procaddr LIB FAKE_DIR\n");
		return 2;
	}
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("ipz-procaddr: skipped (needs root and a private mount namespace)\n");
		return 77;
	}
	r = place_files();
	if (r < 0) {
		(void)fprintf(stderr, "ipz-procaddr: cannot place " IPZ_DIR ": %s\n", strerror(-r));
		return 1;
	}
	if (setenv("LD_PRELOAD", argv[1], 1) < 0 || setenv("LD_LIBRARY_PATH", argv[2], 1) < 0 ||
	    setenv("EDGEGPU_FAKE_CUDA_DEVICES", "2", 1) < 0)
		return 1;
	execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
	(void)fprintf(stderr, "ipz-procaddr: exec: %s\n", strerror(errno));
	return 1;
}
