/*
 * libedgegpu-cuda.so: set-up, the real driver handles, the dlsym override and
 * cuGetProcAddress. How a call reaches a wrapper:
 *   - a program linked with -lcuda calls our exported symbol (we are preloaded, so first);
 *   - the CUDA runtime dlopens libcuda.so.1 and asks dlsym(handle, "cuGetProcAddress"), which
 *     a preload does not interpose: our dlsym override maps the returned pointer;
 *   - then it asks cuGetProcAddress(_v2) for everything else: our wrapper calls the real one
 *     with the same arguments and maps the pointer the driver chose.
 * Mapping is by the real pointer's address, never by name: the driver decides which variant
 * (_v2, _ptsz, a newer ABI) a request means, and a variant we do not wrap passes through
 * unchanged, so a new CUDA version is served by the driver instead of a wrong guess of ours.
 *
 * Nothing runs at load time: no constructor, no signal handler. The set-up runs on the first
 * CUDA or NVML call (pthread_once), so a process that never touches the GPU pays only the
 * loader's cost, and a machine without a driver breaks nothing.
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glibc-floor.h"
#include "ipz-int.h"

struct ipz ipz;
struct ipz_real ipz_real;

typedef void *dlsym_fn(void *, const char *);
static dlsym_fn *real_dlsym;

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static void *cuda_lib;
static void *nvml_lib;
/* Set on the thread running a set-up: a dlsym from libcuda's own constructors passes through. */
static __thread bool in_setup;

void ipz_say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n, p;

	p = snprintf(buf, sizeof(buf), "edgegpu-cuda: ");
	va_start(ap, fmt);
	n = vsnprintf(buf + p, sizeof(buf) - (size_t)p - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = p + n;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(STDERR_FILENO, buf, (size_t)n);
}

/* The real dlsym: glibc 2.34 moved it into libc with a new version; older ones have the base. */
static dlsym_fn *dlsym_real(void)
{
	dlsym_fn *f = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);

	if (IPZ_LIKELY(f))
		return f;
	f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", IPZ_GLIBC_BASE);
	__atomic_store_n(&real_dlsym, f, __ATOMIC_RELEASE);
	return f;
}

/* ---- the wrapper table: real pointer -> our wrapper, sorted by address ---- */

#define IPZ_COUNT(sym) +1 /* NOLINT(bugprone-macro-parentheses): a term of "0 +1 +1 ..." */
#define IPZ_N_CU       (0 IPZ_CU_WRAPPED(IPZ_COUNT))
#define IPZ_N_NVML     (0 IPZ_NVML_WRAPPED(IPZ_COUNT))

struct ipz_map {
	const void *real;
	void *wrapper;
};
/* Filled once by the set-up of each side, then read without a lock (published by n). */
static struct ipz_map cu_map[IPZ_N_CU];
static struct ipz_map nvml_map[IPZ_N_NVML];
static unsigned cu_map_n, nvml_map_n;

static int map_cmp(const void *a, const void *b)
{
	const struct ipz_map *x = a, *y = b;

	return (x->real > y->real) - (x->real < y->real);
}

static void *map_find(const struct ipz_map *m, unsigned n, const void *real)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (m[mid].real == real)
			return m[mid].wrapper;
		if ((uintptr_t)m[mid].real < (uintptr_t)real)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Two names of one real function (an alias in the driver) keep the first wrapper. */
static unsigned map_build(struct ipz_map *m, unsigned n)
{
	unsigned i, out = 0;

	qsort(m, n, sizeof(*m), map_cmp);
	for (i = 0; i < n; i++) {
		if (!m[i].real || (out > 0 && m[out - 1].real == m[i].real))
			continue;
		m[out++] = m[i];
	}
	return out;
}

void *ipz_wrapper_for(const void *real)
{
	unsigned n;
	void *w;

	if (!real || !ipz.enforcing)
		return NULL;
	n = __atomic_load_n(&cu_map_n, __ATOMIC_ACQUIRE);
	w = map_find(cu_map, n, real);
	if (w)
		return w;
	n = __atomic_load_n(&nvml_map_n, __ATOMIC_ACQUIRE);
	return map_find(nvml_map, n, real);
}

/* ---- set-up: limits file and region (once per process) ---- */

static void atfork_child(void)
{
	ipz_table_child();
	/* The child is a new process: its reservations go into a slot of its own. */
	region_forget_slot(&ipz.region);
}

/* Reads IPZ_DIR/limits; 0, -ENOENT (not a gpumem container), or another error said here. */
static int read_limits(struct limits *l)
{
	char buf[LIMITS_FILE_MAX + 1];
	size_t len = 0;
	unsigned line = 0;
	ssize_t n;
	int fd, r;

	fd = open(IPZ_DIR "/limits", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r != -ENOENT)
			ipz_say("cannot open " IPZ_DIR "/limits (%s): no memory limit enforced",
				strerror(-r));
		return r;
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			(void)close(fd);
			ipz_say("cannot read " IPZ_DIR "/limits (%s): no memory limit enforced",
				strerror(-r));
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	(void)close(fd);
	if (len > LIMITS_FILE_MAX) {
		ipz_say(IPZ_DIR "/limits is longer than %d bytes: no memory limit enforced",
			LIMITS_FILE_MAX);
		return -EFBIG;
	}
	r = limits_parse(buf, len, l, &line);
	if (r < 0)
		ipz_say(IPZ_DIR "/limits is malformed (line %u): no memory limit enforced", line);
	return r;
}

/* The region's GPUs and mode are those of the limits file (the file is the authority). */
static bool region_matches(const struct region *r, const struct limits *l)
{
	unsigned i;

	if (r->n_gpus != l->n_gpus || !!(r->flags & REGION_F_REPORT_ONLY) != l->report_only)
		return false;
	for (i = 0; i < l->n_gpus; i++)
		if (strcmp(r->gpus[i].uuid, l->gpus[i].uuid) != 0 ||
		    r->gpus[i].limit != l->gpus[i].limit)
			return false;
	return true;
}

/* A region of this process alone, in a file created and unlinked at once (shm, else tmp). */
static int private_region(void)
{
	static const char *const bases[] = { "/dev/shm", "/tmp" };
	struct region_init_gpu g[REGION_GPUS_MAX];
	char dir[64], path[80];
	unsigned i;
	int r = -ENOENT;

	for (i = 0; i < ipz.limits.n_gpus; i++) {
		g[i].uuid = ipz.limits.gpus[i].uuid;
		g[i].limit = ipz.limits.gpus[i].limit;
	}
	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		(void)snprintf(dir, sizeof(dir), "%s/edgegpu-cuda.XXXXXX", bases[i]);
		if (!mkdtemp(dir)) {
			r = -errno;
			continue;
		}
		(void)snprintf(path, sizeof(path), "%s/" REGION_FILE, dir);
		r = region_create(dir, g, ipz.limits.n_gpus, ipz.limits.report_only);
		if (r >= 0)
			r = region_attach(path, &ipz.region);
		(void)unlink(path);
		(void)rmdir(dir);
		if (r >= 0)
			return 0;
	}
	return r;
}

static void setup(void)
{
	int r;

	if (read_limits(&ipz.limits) < 0)
		return; /* pass-through */
	ipz.report_only = ipz.limits.report_only;
	ipz.count_managed = ipz.limits.count_managed;
	r = region_attach(IPZ_DIR "/state/" REGION_FILE, &ipz.region);
	if (r >= 0 && !region_matches(ipz.region.r, &ipz.limits)) {
		region_detach(&ipz.region);
		r = -EBADMSG;
	}
	if (r < 0) {
		ipz_say("no usable shared region " IPZ_DIR "/state/" REGION_FILE
			" (%s): limits enforced per process, not across the container",
			strerror(-r));
		r = private_region();
		if (r < 0) {
			ipz_say("cannot create a private region (%s): no memory limit enforced",
				strerror(-r));
			return;
		}
		ipz.private_region = true;
	}
	(void)pthread_atfork(ipz_table_lock, ipz_table_unlock, atfork_child);
	ipz.enforcing = true;
}

static void setup_run(void)
{
	in_setup = true;
	setup();
	in_setup = false;
}

/* ---- the drivers ---- */

static void cuda_setup(void)
{
	dlsym_fn *sym = dlsym_real();
	unsigned n = 0;

	in_setup = true;
	(void)pthread_once(&setup_once, setup_run);
	in_setup = true;
	cuda_lib = dlopen("libcuda.so.1", RTLD_LAZY);
	if (!cuda_lib || !sym)
		goto out;
#define IPZ_RESOLVE(s, r, params) ipz_real.s = (cu_fn_##s *)sym(cuda_lib, #s);
	CUDA_API_FUNCTIONS(IPZ_RESOLVE, CUDA_OWN_TYPE)
#undef IPZ_RESOLVE
	ipz_real.cuDeviceGetAttribute =
		(ipz_fn_cuDeviceGetAttribute *)sym(cuda_lib, "cuDeviceGetAttribute");
#define IPZ_RESOLVE(s, params) ipz_real.s = (cu_fn_##s *)sym(cuda_lib, #s);
	IPZ_EXTRA_FUNCTIONS(IPZ_RESOLVE)
#undef IPZ_RESOLVE
#define IPZ_MAP(s) cu_map[n++] = (struct ipz_map){ (const void *)ipz_real.s, (void *)(s) };
	IPZ_CU_WRAPPED(IPZ_MAP)
#undef IPZ_MAP
	__atomic_store_n(&cu_map_n, map_build(cu_map, n), __ATOMIC_RELEASE);
out:
	in_setup = false;
}

static void nvml_setup(void)
{
	dlsym_fn *sym = dlsym_real();
	unsigned n = 0;

	in_setup = true;
	(void)pthread_once(&setup_once, setup_run);
	in_setup = true;
	nvml_lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
	if (!nvml_lib || !sym)
		goto out;
#define IPZ_RESOLVE(s, r, params) ipz_real.s = (ipz_nvml_fn_##s *)sym(nvml_lib, #s);
	IPZ_NVML_FUNCTIONS(IPZ_RESOLVE)
#undef IPZ_RESOLVE
#define IPZ_MAP(s) nvml_map[n++] = (struct ipz_map){ (const void *)ipz_real.s, (void *)(s) };
	IPZ_NVML_WRAPPED(IPZ_MAP)
#undef IPZ_MAP
	__atomic_store_n(&nvml_map_n, map_build(nvml_map, n), __ATOMIC_RELEASE);
out:
	in_setup = false;
}

bool ipz_cuda_ready(void)
{
	(void)pthread_once(&cuda_once, cuda_setup);
	return cuda_lib != NULL;
}

bool ipz_nvml_ready(void)
{
	(void)pthread_once(&nvml_once, nvml_setup);
	return nvml_lib != NULL;
}

/* ---- dlsym ---- */

/*
 * A lookup of a "cu"/"nvml" name: map the real answer to our wrapper. The set-up runs only when
 * the driver library is already in the process (RTLD_NOLOAD): curl_easy_init or a program's
 * own "cu" names never make us load libcuda.
 */
static __attribute__((noinline)) void *dlsym_driver(dlsym_fn *real, void *handle, const char *name)
{
	void *p = real(handle, name);
	void *w, *lib;

	if (!p || in_setup)
		return p;
	if (name[0] == 'c') {
		if (!__atomic_load_n(&cu_map_n, __ATOMIC_ACQUIRE)) {
			lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
			if (!lib)
				return p;
			(void)ipz_cuda_ready();
			(void)dlclose(lib);
		}
	} else if (!__atomic_load_n(&nvml_map_n, __ATOMIC_ACQUIRE)) {
		lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (!lib)
			return p;
		(void)ipz_nvml_ready();
		(void)dlclose(lib);
	}
	w = ipz_wrapper_for(p);
	return w ? w : p;
}

/*
 * Every dlsym of the process comes here. Anything but a "cu"/"nvml" name through a real handle
 * goes to glibc as a tail call (the library is built -O2, interposer/meson.build), so glibc
 * sees the caller's return address: RTLD_NEXT means "after the caller", not "after us".
 */
IPZ_EXPORT void *dlsym(void *handle, const char *name)
{
	dlsym_fn *real = dlsym_real();

	if (IPZ_UNLIKELY(!real))
		return NULL;
	if (IPZ_LIKELY(handle == RTLD_NEXT ||
		       !((name[0] == 'c' && name[1] == 'u') ||
			 (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'))))
		return real(handle, name);
	return dlsym_driver(real, handle, name);
}

/* ---- cuGetProcAddress ---- */

static void proc_map(void **pfn)
{
	void *w;

	if (pfn && *pfn) {
		w = ipz_wrapper_for(*pfn);
		if (w)
			*pfn = w;
	}
}

/* CUDA 11.3-11.x (and the ABI symbol cuGetProcAddress ever since). */
IPZ_EXPORT enum cu_result cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
					   cu_uint64 flags)
{
	enum cu_result r;

	if (!ipz_cuda_ready())
		return CU_RES_NOT_INITIALIZED;
	if (!ipz_real.cuGetProcAddress)
		return CU_RES_NOT_FOUND;
	r = ipz_real.cuGetProcAddress(symbol, pfn, cuda_version, flags);
	if (r == CU_RES_SUCCESS)
		proc_map(pfn);
	return r;
}

/* CUDA 12.0+: the same with the symbol status. */
IPZ_EXPORT enum cu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
					      cu_uint64 flags, enum cu_proc_query_result *status)
{
	enum cu_result r;

	if (!ipz_cuda_ready())
		return CU_RES_NOT_INITIALIZED;
	if (!ipz_real.cuGetProcAddress_v2)
		return CU_RES_NOT_FOUND;
	r = ipz_real.cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
	if (r == CU_RES_SUCCESS)
		proc_map(pfn);
	return r;
}
