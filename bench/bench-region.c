/*
 * The shared region's costs (interposer/region.h), in-process and across processes. Prints:
 *   case=pair ns=<median of runs, per region_reserve + region_release pair, uncontended>
 *   case=procs n=<n> base_ms=<n forks doing nothing> with_ms=<n forks attaching and reserving>
 *       added_ms=<the difference>
 * The n processes start together (they wait on one pipe the parent closes) and the time runs
 * from that close to the last one reaped; each attaches, reserves 1 MiB, releases and detaches.
 * Usage: bench-region [N_PROCS] (default 500).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void pair(const char *path)
{
	enum {
		RUNS = 31,
		PAIRS = 100000
	};
	struct region_handle h;
	uint64_t t[RUNS];

	if (region_attach(path, &h) < 0 || region_reserve(&h, 0, 1) < 0)
		exit(1);
	for (int k = 0; k < RUNS; k++) {
		uint64_t t0 = now_ns();

		for (int i = 0; i < PAIRS; i++) {
			if (region_reserve(&h, 0, 4096) < 0)
				exit(1);
			region_release(&h, 0, 4096);
		}
		t[k] = now_ns() - t0;
	}
	region_detach(&h);
	qsort(t, RUNS, sizeof(t[0]), cmp_u64);
	printf("case=pair ns=%.1f\n", (double)t[RUNS / 2] / PAIRS);
}

/*
 * Forks @n children that wait for one start, then (with @path) attach and reserve; the ms from
 * the start to the last one reaped.
 */
static double procs(unsigned n, const char *path)
{
	int go[2];
	char c;
	uint64_t t0;

	if (pipe(go) < 0)
		exit(1);
	for (unsigned i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			exit(1);
		if (pid == 0) {
			struct region_handle h;

			close(go[1]);
			if (read(go[0], &c, 1) != 0)
				_exit(1);
			if (path) {
				if (region_attach(path, &h) < 0 ||
				    region_reserve(&h, 0, 1 << 20) < 0)
					_exit(2);
				region_release(&h, 0, 1 << 20);
				region_detach(&h);
			}
			_exit(0);
		}
	}
	close(go[0]);
	t0 = now_ns();
	close(go[1]);
	for (unsigned i = 0; i < n; i++) {
		int ws;

		if (wait(&ws) < 0 || ws != 0)
			exit(1);
	}
	return (double)(now_ns() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 500;
	struct region_init_gpu g = { "GPU-bench", (uint64_t)n << 21 };
	char dir[] = "/tmp/bench-region-XXXXXX", path[64];
	double base[5], with[5];

	if (!mkdtemp(dir) || region_create(dir, &g, 1, false) < 0)
		return 1;
	snprintf(path, sizeof(path), "%s/%s", dir, REGION_FILE);
	pair(path);
	/* Alternated, the median of five each: forks on a shared machine are noisy. */
	for (int k = 0; k < 5; k++) {
		base[k] = procs(n, NULL);
		with[k] = procs(n, path);
	}
	qsort(base, 5, sizeof(base[0]), cmp_double);
	qsort(with, 5, sizeof(with[0]), cmp_double);
	printf("case=procs n=%u base_ms=%.1f with_ms=%.1f added_ms=%.1f\n", n, base[2], with[2],
	       with[2] - base[2]);
	unlink(path);
	rmdir(dir);
	return 0;
}
