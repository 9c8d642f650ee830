/*
 * ipz-info MIB[,MIB...] [alloc=MIB] [nvml]: what a process is told about device memory. The
 * list gives the expected total of each visible device in CUDA order (the slice under the
 * interposer, so after CUDA_VISIBLE_DEVICES the limit follows the device). For each device:
 * cuDeviceTotalMem_v2 and cuMemGetInfo_v2's total are that, free equals it with nothing held.
 * With alloc=X, X MiB are then allocated on device 0 (past the slice in report mode) and free
 * must be the slice less X, clamped at 0, never an error. With "nvml", nvmlDeviceGetMemoryInfo
 * (and _v2 where the library has it) of the same devices, found by UUID, must say the same.
 * Exit 0 when every check passed.
 */
#include "ipz-test.h"

typedef int nvml_init_fn(void);
typedef int nvml_by_uuid_fn(const char *uuid, struct ipz_nvml_device **dev);

static struct {
	ipz_nvml_fn_nvmlDeviceGetMemoryInfo *info;
	ipz_nvml_fn_nvmlDeviceGetMemoryInfo_v2 *info_v2;
	nvml_by_uuid_fn *by_uuid;
} nvml;

static int nvml_load(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_init_fn *init;

	if (!h) {
		(void)fprintf(stderr, "cannot load libnvidia-ml.so.1: %s\n", dlerror());
		return -1;
	}
	init = (nvml_init_fn *)dlsym(h, "nvmlInit_v2");
	nvml.by_uuid = (nvml_by_uuid_fn *)dlsym(h, "nvmlDeviceGetHandleByUUID");
	nvml.info = (ipz_nvml_fn_nvmlDeviceGetMemoryInfo *)dlsym(h, "nvmlDeviceGetMemoryInfo");
	nvml.info_v2 =
		(ipz_nvml_fn_nvmlDeviceGetMemoryInfo_v2 *)dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
	if (!init || !nvml.by_uuid || !nvml.info || init() != IPZ_NVML_SUCCESS) {
		(void)fprintf(stderr, "libnvidia-ml.so.1 unusable\n");
		return -1;
	}
	return 0;
}

static void check_nvml(const struct cu_api *a, int ordinal, unsigned long long total,
		       unsigned long long free_want)
{
	struct ipz_nvml_memory m = { 0 };
	struct ipz_nvml_memory_v2 m2 = { .version = IPZ_NVML_MEMORY_V2 };
	struct ipz_nvml_device *dev = NULL;
	struct cu_uuid u;
	char s[64];
	int r;

	if (OK(a->cuDeviceGetUuid_v2(&u, ordinal)))
		return;
	ipz_uuid_string(&u, s);
	r = nvml.by_uuid(s, &dev);
	CHECK(r == IPZ_NVML_SUCCESS, "nvmlDeviceGetHandleByUUID(%s): %d", s, r);
	if (r)
		return;
	r = nvml.info(dev, &m);
	CHECK(r == IPZ_NVML_SUCCESS, "nvmlDeviceGetMemoryInfo: %d", r);
	CHECK(m.total == total, "nvml total %llu, want %llu (%s)", m.total, total, s);
	CHECK(m.free == free_want, "nvml free %llu, want %llu (%s)", m.free, free_want, s);
	if (!nvml.info_v2)
		return;
	r = nvml.info_v2(dev, &m2);
	if (r == IPZ_NVML_ERROR_FUNCTION_NOT_FOUND || r == IPZ_NVML_ERROR_NOT_SUPPORTED) {
		(void)fprintf(stderr,
			      "ipz-info: nvmlDeviceGetMemoryInfo_v2: %d (not in the library)\n", r);
		return;
	}
	CHECK(r == IPZ_NVML_SUCCESS, "nvmlDeviceGetMemoryInfo_v2: %d", r);
	CHECK(m2.total == total, "nvml v2 total %llu, want %llu", m2.total, total);
	CHECK(m2.free == free_want, "nvml v2 free %llu, want %llu", m2.free, free_want);
}

static void check_device(const struct cu_api *a, int ordinal, unsigned long long total,
			 unsigned long long held, bool with_nvml)
{
	unsigned long long want_free = held > total ? 0 : total - held;
	size_t t = 0, f = 0;

	if (ipz_use_device(a, ordinal) < 0)
		return;
	if (!OK(a->cuDeviceTotalMem_v2(&t, ordinal)))
		CHECK(t == total, "device %d: cuDeviceTotalMem_v2 %zu, want %llu", ordinal, t,
		      total);
	if (!OK(a->cuMemGetInfo_v2(&f, &t))) {
		CHECK(t == total, "device %d: cuMemGetInfo_v2 total %zu, want %llu", ordinal, t,
		      total);
		CHECK(f == want_free, "device %d: cuMemGetInfo_v2 free %zu, want %llu", ordinal, f,
		      want_free);
	}
	if (with_nvml)
		check_nvml(a, ordinal, total, want_free);
}

/*
 * Parses "MIB[,MIB...]" into want (bytes, at most max); the count, or -1 for an empty list, an
 * entry that is not a whole number, or too many. A list that parses to nothing must fail here:
 * the checks below read want[0].
 */
static int parse_list(const char *s, unsigned long long *want, int max)
{
	int n = 0;

	for (;;) {
		char *end;

		if (n == max || *s < '0' || *s > '9')
			return -1;
		want[n++] = strtoull(s, &end, 10) * MIB;
		if (*end == '\0')
			return n;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

static int usage(void)
{
	(void)fprintf(stderr, "usage: ipz-info MIB[,MIB...] [alloc=MIB] [nvml]\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned long long want[16], alloc = 0;
	int n, count = -1;
	bool with_nvml = false;
	struct cu_api api;
	cu_deviceptr p = 0;
	void *h;

	if (argc < 2)
		return usage();
	n = parse_list(argv[1], want, 16);
	if (n < 0)
		return usage();
	for (int i = 2; i < argc; i++) {
		long long v;

		if (!strncmp(argv[i], "alloc=", 6)) {
			v = ipz_number(argv[i] + 6);
			if (v < 0)
				return usage();
			alloc = (unsigned long long)v * MIB;
		} else if (!strcmp(argv[i], "nvml")) {
			with_nvml = true;
		} else {
			return usage();
		}
	}
	ipz_context = "ipz-info";
	h = ipz_open_driver();
	if (!h || ipz_load_dlsym(h, &api) < 0 || (with_nvml && nvml_load() < 0))
		return 1;
	if (OK(api.cuInit(0)) || OK(api.cuDeviceGetCount(&count)))
		return 1;
	CHECK(count == n, "%d devices visible, want %d", count, n);
	for (int i = 0; i < n && i < count; i++)
		check_device(&api, i, want[i], 0, with_nvml);
	if (alloc) {
		ipz_context = "ipz-info after alloc";
		if (ipz_use_device(&api, 0) == 0 && !OK(api.cuMemAlloc_v2(&p, alloc))) {
			check_device(&api, 0, want[0], alloc, with_nvml);
			OK(api.cuMemFree_v2(p));
		}
	}
	if (ipz_failures) {
		(void)fprintf(stderr, "ipz-info: %d checks failed\n", ipz_failures);
		return 1;
	}
	(void)printf("ipz-info: ok\n");
	return 0;
}
