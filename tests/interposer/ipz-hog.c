/*
 * ipz-hog CHUNK_MIB [MAX_MIB] [loop]: on device 0, allocates CHUNK_MIB at a time with
 * cuMemAlloc_v2 until the driver (or the interposer) says CUDA_ERROR_OUT_OF_MEMORY or MAX_MIB
 * are held, prints "allocated <MiB>", then either holds the memory until stdin is closed (prints
 * "holding"; frees and exits 0 at EOF) or, with "loop", prints "looping" and allocates and frees
 * one chunk for ever (to be killed at a random point). For the isolation and SIGKILL tests.
 * Exit 1 when an error other than OUT_OF_MEMORY came back.
 */
#include <unistd.h>

#include "ipz-test.h"

#define MAX_CHUNKS 4096

int main(int argc, char **argv)
{
	static cu_deviceptr held[MAX_CHUNKS];
	unsigned long long chunk, max, n = 0;
	struct cu_api api;
	bool loop;
	char buf[64];
	void *h;
	int r = CU_RES_SUCCESS;

	if (argc < 2 || atoi(argv[1]) <= 0) {
		(void)fprintf(stderr, "usage: ipz-hog CHUNK_MIB [MAX_MIB] [loop]\n");
		return 2;
	}
	chunk = (unsigned long long)atoi(argv[1]) * MIB;
	max = argc > 2 && atoi(argv[2]) > 0 ? (unsigned long long)atoi(argv[2]) * MIB : ~0ull;
	loop = argc > 3 && !strcmp(argv[3], "loop");
	ipz_context = "ipz-hog";
	h = ipz_open_driver();
	if (!h || ipz_load_dlsym(h, &api) < 0 || ipz_use_device(&api, 0) < 0)
		return 1;
	while (n < MAX_CHUNKS && (n + 1) * chunk <= max) {
		r = api.cuMemAlloc_v2(&held[n], chunk);
		if (r != CU_RES_SUCCESS)
			break;
		n++;
	}
	(void)printf("allocated %llu\n", n * chunk / MIB);
	if (r != CU_RES_SUCCESS && r != CU_RES_OUT_OF_MEMORY) {
		(void)printf("error %d\n", r);
		return 1;
	}
	if (loop) {
		(void)printf("looping\n");
		(void)fflush(stdout);
		for (;;) {
			cu_deviceptr p = 0;

			if (api.cuMemAlloc_v2(&p, chunk) == CU_RES_SUCCESS)
				(void)api.cuMemFree_v2(p);
		}
	}
	(void)printf("holding\n");
	(void)fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	for (unsigned long long i = 0; i < n; i++)
		OK(api.cuMemFree_v2(held[i]));
	return ipz_failures ? 1 : 0;
}
