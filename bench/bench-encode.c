/*
 * ListAndWatch message size and encode time for gpumem resources, and the in-process cost
 * of GetPreferredAllocation over 163,840 units. Prints one line per case:
 *   case=<name> devices=<n> unit_mib=<u> bytes=<b> encode_us=<median of runs>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "resource.h"
#include "util.h"

static bool healthy(const struct resource *r, unsigned d, void *u)
{
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void one(const char *name, unsigned n_gpus, uint64_t mib_each, int runs)
{
	struct gpu_device devs[4] = { 0 };
	struct gpu_info info = { .devices = devs, .n_devices = n_gpus };
	unsigned idx[4] = { 0, 1, 2, 3 };
	struct resource_spec spec = { .name = "nvidia.com/gpumem",
				      .kind = RESOURCE_GPUMEM,
				      .gpus = idx,
				      .n_gpus = n_gpus,
				      .unit_mib = 1,
				      .reserve_mib = 512 };
	struct resource *r = NULL;
	struct buf b = { 0 };
	uint64_t t[64];
	char *err = NULL;

	for (unsigned i = 0; i < n_gpus; i++) {
		snprintf(devs[i].uuid, sizeof(devs[i].uuid), "GPU-bench-%u", i);
		devs[i].mem_total = mib_each << 20;
		devs[i].numa_node = -1;
	}
	if (resource_new(&spec, &info, &r, &err) < 0) {
		fprintf(stderr, "bench-encode: %s\n", err ? err : "resource_new failed");
		exit(1);
	}
	for (int k = 0; k < runs; k++) {
		usec_t t0 = now_usec();

		if (resource_encode_list(r, NULL, healthy, NULL, &b) < 0)
			exit(1);
		t[k] = now_usec() - t0;
	}
	qsort(t, (size_t)runs, sizeof(t[0]), cmp_u64);
	printf("case=%s devices=%u unit_mib=%llu bytes=%zu encode_us=%llu\n", name, r->n_devices,
	       (unsigned long long)r->unit_mib, b.len, (unsigned long long)t[runs / 2]);
	buf_release(&b);
	resource_free(r);
}

int main(void)
{
	one("1x16GiB", 1, 16384, 21);
	one("2x80GiB", 2, 81920, 21);
	one("3x80GiB", 3, 81920, 21);
	return 0;
}
