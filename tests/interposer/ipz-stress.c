/*
 * ipz-stress PROCS PAIRS MAX_KIB [SEED]: PROCS processes (forked before any CUDA call, so each
 * is a process of its own to the driver and the interposer) each make PAIRS random allocations
 * on device 0 of 1 KiB to MAX_KIB, through cuMemAlloc_v2, cuMemAllocPitch_v2 and
 * cuMemAllocManaged in turn, holding up to 32 at once and freeing a random one when full; all
 * freed at the end. Only SUCCESS and OUT_OF_MEMORY are accepted. Each process prints
 * "pid=<pid> ok=<n> oom=<n>". Whether the processes together stayed within the limit is for the
 * caller to judge (the fake driver's EDGEGPU_FAKE_CUDA_SHM meter, the region). Exit 0 when
 * every process did.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "ipz-test.h"

#define LIVE 32

static unsigned long long next_rand(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static int child(unsigned long long seed, long pairs, unsigned long long max_kib)
{
	cu_deviceptr live[LIVE] = { 0 };
	unsigned long long ok = 0, oom = 0;
	struct cu_api api;
	int n = 0;
	void *h;

	ipz_context = "ipz-stress";
	h = ipz_open_driver();
	if (!h || ipz_load_dlsym(h, &api) < 0 || ipz_use_device(&api, 0) < 0)
		return 1;
	for (long i = 0; i < pairs && !ipz_failures; i++) {
		unsigned long long kib = 1 + next_rand(&seed) % max_kib;
		cu_deviceptr p = 0;
		size_t pitch;
		int r;

		if (n == LIVE) {
			int k = (int)(next_rand(&seed) % LIVE);

			OK(api.cuMemFree_v2(live[k]));
			live[k] = live[--n];
		}
		switch (i % 3) {
		case 0:
			r = api.cuMemAlloc_v2(&p, kib * 1024);
			break;
		case 1:
			r = api.cuMemAllocPitch_v2(&p, &pitch, 1024, kib, 4);
			break;
		default:
			r = api.cuMemAllocManaged(&p, kib * 1024, CU_ATTACH_GLOBAL);
		}
		if (r == CU_RES_SUCCESS) {
			live[n++] = p;
			ok++;
		} else if (r == CU_RES_OUT_OF_MEMORY) {
			oom++;
		} else {
			CHECK(0, "allocation %ld of %llu KiB: %d", i, kib, r);
		}
	}
	while (n)
		OK(api.cuMemFree_v2(live[--n]));
	(void)printf("pid=%d ok=%llu oom=%llu\n", (int)getpid(), ok, oom);
	return ipz_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	int procs, failed = 0;
	long pairs;
	unsigned long long max_kib, seed;

	if (argc < 4 || (procs = atoi(argv[1])) <= 0 || (pairs = atol(argv[2])) <= 0 ||
	    (max_kib = strtoull(argv[3], NULL, 10)) == 0) {
		(void)fprintf(stderr, "usage: ipz-stress PROCS PAIRS MAX_KIB [SEED]\n");
		return 2;
	}
	seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
	(void)fflush(stdout);
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			int rc = child(seed * 1000003 + (unsigned long long)i, pairs, max_kib);

			(void)fflush(stdout);
			_exit(rc);
		}
	}
	for (int i = 0; i < procs; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	if (failed)
		(void)fprintf(stderr, "ipz-stress: %d processes failed\n", failed);
	return failed ? 1 : 0;
}
