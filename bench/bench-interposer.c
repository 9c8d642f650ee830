/*
 * bench-interposer: what libedgegpu-cuda.so adds (bench/run bench_interposer runs it).
 *
 *   bench-interposer pairs N      N cuMemAlloc_v2(1 MiB) + cuMemFree_v2 pairs through
 *                                 dlsym(dlopen("libcuda.so.1")), the way the CUDA runtime
 *                                 reaches them; run once against the fake driver directly and
 *                                 once under LD_PRELOAD in a container's set-up: the
 *                                 difference is the interposer's cost. Prints
 *                                 "case=pairs ns=<median ns per pair of 31 runs>".
 *   bench-interposer start N LIB  N fork+exec of /bin/true, alternately without and with
 *                                 LD_PRELOAD=LIB, in 10 rounds; prints "case=start base_us=
 *                                 ipz_us= added_us=" (medians of the rounds, per process).
 * Exit 0, 1 when a call fails.
 */
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda-api.h"

extern char **environ;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int pairs(long n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	cu_fn_cuInit *init;
	cu_fn_cuDevicePrimaryCtxRetain *retain;
	cu_fn_cuCtxSetCurrent *set;
	cu_fn_cuMemAlloc_v2 *alloc;
	cu_fn_cuMemFree_v2 *release;
	struct cu_ctx *ctx = NULL;
	double runs[31];
	cu_deviceptr p;
	long i;
	int k;

	if (!h) {
		fprintf(stderr, "bench-interposer: %s\n", dlerror());
		return 1;
	}
	init = (cu_fn_cuInit *)dlsym(h, "cuInit");
	retain = (cu_fn_cuDevicePrimaryCtxRetain *)dlsym(h, "cuDevicePrimaryCtxRetain");
	set = (cu_fn_cuCtxSetCurrent *)dlsym(h, "cuCtxSetCurrent");
	alloc = (cu_fn_cuMemAlloc_v2 *)dlsym(h, "cuMemAlloc_v2");
	release = (cu_fn_cuMemFree_v2 *)dlsym(h, "cuMemFree_v2");
	if (!init || !retain || !set || !alloc || !release || init(0) != CU_RES_SUCCESS ||
	    retain(&ctx, 0) != CU_RES_SUCCESS || set(ctx) != CU_RES_SUCCESS)
		return 1;
	for (k = 0; k < 31; k++) {
		double t0 = now_ns();

		for (i = 0; i < n; i++)
			if (alloc(&p, 1 << 20) != CU_RES_SUCCESS || release(p) != CU_RES_SUCCESS)
				return 1;
		runs[k] = (now_ns() - t0) / (double)n;
	}
	qsort(runs, 31, sizeof(runs[0]), cmp_double);
	printf("case=pairs ns=%.1f\n", runs[15]);
	return 0;
}

/* Microseconds per fork+exec+wait of /bin/true over @n, with @env. */
static double spawn_us(long n, char **env)
{
	char *argv[] = { "/bin/true", NULL };
	double t0 = now_ns();
	pid_t pid;
	long i;
	int st;

	for (i = 0; i < n; i++) {
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, env) != 0 ||
		    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return -1;
	}
	return (now_ns() - t0) / 1e3 / (double)n;
}

static int start(long n, const char *lib)
{
	static char preload[4096];
	char *base_env[] = { "PATH=/usr/bin:/bin", NULL };
	char *ipz_env[] = { "PATH=/usr/bin:/bin", preload, NULL };
	double base[10], ipz[10];
	int k;

	(void)snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib);
	for (k = 0; k < 10; k++) {
		base[k] = spawn_us(n / 10, base_env);
		ipz[k] = spawn_us(n / 10, ipz_env);
		if (base[k] < 0 || ipz[k] < 0)
			return 1;
	}
	qsort(base, 10, sizeof(base[0]), cmp_double);
	qsort(ipz, 10, sizeof(ipz[0]), cmp_double);
	printf("case=start n=%ld base_us=%.1f ipz_us=%.1f added_us=%.1f\n", n, base[5], ipz[5],
	       ipz[5] - base[5]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "pairs") == 0)
		return pairs(atol(argv[2]));
	if (argc == 4 && strcmp(argv[1], "start") == 0)
		return start(atol(argv[2]), argv[3]);
	fprintf(stderr, "usage: bench-interposer pairs N | start N LIB\n");
	return 2;
}
