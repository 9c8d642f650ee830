#pragma once

/*
 * What the interposer's test programs (ipz-*.c) share: loading the CUDA driver the way the CUDA
 * runtime does (dlopen("libcuda.so.1"), then dlsym, or cuGetProcAddress for every entry point),
 * checks that print what failed, and a current context. Header-only (static functions) so that
 * each program builds alone with `cc -I interposer ipz-x.c -ldl -lpthread`, also inside an old
 * Debian root (tests/interposer's bullseye phase). Nothing here knows of the interposer: the
 * programs run as well against the fake driver alone, which is how they are tested themselves.
 *
 * Not thread-safe (the failure count is a plain global); programs that fork check in each child.
 */

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-api.h"

#define MIB (1024ull * 1024ull)

/* Not every program uses every helper. */
#define IPZ_HELPER static __attribute__((unused))

/* Every function of CUDA_API_FUNCTIONS, by its exported name; NULL when not found. */
struct cu_api {
#define IPZ_API_FIELD(sym, r, params) cu_fn_##sym *sym;
	CUDA_API_FUNCTIONS(IPZ_API_FIELD, CUDA_OWN_TYPE)
};

static int ipz_failures;
static const char *ipz_context = ""; /* what is being tested, for the messages */

static void ipz_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ipz_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	ipz_failures++;
	(void)fprintf(stderr, "FAIL %s:%d [%s] ", file, line, ipz_context);
	va_start(ap, fmt);
	(void)vfprintf(stderr, fmt, ap);
	va_end(ap);
	(void)fputc('\n', stderr);
}

#define CHECK(cond, ...)                                           \
	do {                                                       \
		if (!(cond))                                       \
			ipz_fail(__FILE__, __LINE__, __VA_ARGS__); \
	} while (0)

/* Calls expr (a CUDA call) and checks its result is want; evaluates to the result. */
#define EXPECT_RES(expr, want)                                                         \
	__extension__({                                                                \
		int r_ = (int)(expr);                                                  \
		if (r_ != (int)(want))                                                 \
			ipz_fail(__FILE__, __LINE__, "%s: got %d, want %d", #expr, r_, \
				 (int)(want));                                         \
		r_;                                                                    \
	})
#define OK(expr) EXPECT_RES(expr, CU_RES_SUCCESS)

/* dlopen("libcuda.so.1") as the runtime does; NULL (message printed) when absent. */
IPZ_HELPER void *ipz_open_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		(void)fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror());
	return h;
}

/* Fills api with dlsym(handle, name) for every function; -1 when one is missing. */
IPZ_HELPER int ipz_load_dlsym(void *handle, struct cu_api *api)
{
	int missing = 0;

	memset(api, 0, sizeof(*api));
#define IPZ_DLSYM(sym, r, params)                                       \
	api->sym = (cu_fn_##sym *)dlsym(handle, #sym);                  \
	if (!api->sym) {                                                \
		(void)fprintf(stderr, "libcuda.so.1 lacks %s\n", #sym); \
		missing++;                                              \
	}
	CUDA_API_FUNCTIONS(IPZ_DLSYM, CUDA_OWN_TYPE)
	return missing ? -1 : 0;
}

/*
 * Fills api through the driver's cuGetProcAddress, as the CUDA runtime (11.3 and later) does:
 * first cuGetProcAddress itself (v2 when use_v2, asking with version 12000, else the 11.x one
 * with 11030) is asked for through the dlsym'd one, then every entry of CUDA_API_PROCS is asked
 * for by base name at its own version, the _ptsz ones with the per-thread stream flag. Each
 * answer must be the one the table says (checked by the caller against a dlsym'd table where
 * nothing interposes). -1 when an entry point is missing.
 */
IPZ_HELPER int ipz_load_getproc(const struct cu_api *dl, struct cu_api *api, bool use_v2)
{
	cu_fn_cuGetProcAddress *gp1 = dl->cuGetProcAddress;
	cu_fn_cuGetProcAddress_v2 *gp2 = dl->cuGetProcAddress_v2;
	enum cu_proc_query_result st;
	void *fn = NULL;
	int missing = 0;

	memset(api, 0, sizeof(*api));
	if (use_v2) {
		if (gp2("cuGetProcAddress", &fn, 12000, CU_PROC_DEFAULT, &st) || !fn ||
		    st != CU_PROC_SUCCESS)
			return -1;
		gp2 = (cu_fn_cuGetProcAddress_v2 *)fn;
	} else {
		if (gp1("cuGetProcAddress", &fn, 11030, CU_PROC_DEFAULT) || !fn)
			return -1;
		gp1 = (cu_fn_cuGetProcAddress *)fn;
	}
#define IPZ_GETPROC(base, sym, ver, ptsz)                                                     \
	do {                                                                                  \
		cu_uint64 fl_ = (ptsz) ? CU_PROC_PER_THREAD_DEFAULT_STREAM : CU_PROC_DEFAULT; \
		int r_;                                                                       \
		fn = NULL;                                                                    \
		st = CU_PROC_SYMBOL_NOT_FOUND;                                                \
		if (use_v2)                                                                   \
			r_ = gp2(#base, &fn, ver, fl_, &st);                                  \
		else                                                                          \
			r_ = gp1(#base, &fn, ver, fl_);                                       \
		if (r_ || !fn || (use_v2 && st != CU_PROC_SUCCESS)) {                         \
			(void)fprintf(stderr, "cuGetProcAddress%s(%s, %d): %d, status %d\n",  \
				      use_v2 ? "_v2" : "", #base, ver, r_, (int)st);          \
			missing++;                                                            \
		}                                                                             \
		api->sym = (cu_fn_##sym *)fn;                                                 \
	} while (0);
	CUDA_API_PROCS(IPZ_GETPROC)
	return missing ? -1 : 0;
}

/* cuInit, then device ordinal's primary context made current. */
IPZ_HELPER int ipz_use_device(const struct cu_api *api, int ordinal)
{
	struct cu_ctx *ctx = NULL;
	cu_device dev = 0;

	if (OK(api->cuInit(0)) || OK(api->cuDeviceGet(&dev, ordinal)) ||
	    OK(api->cuDevicePrimaryCtxRetain(&ctx, dev)) || OK(api->cuCtxSetCurrent(ctx)))
		return -1;
	return 0;
}

/* The device's UUID as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (buf of at least 41). */
IPZ_HELPER void ipz_uuid_string(const struct cu_uuid *u, char *buf)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	(void)sprintf(buf,
		      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		      b[12], b[13], b[14], b[15]);
}
