/* Fixture files for the fake NVML: see README.md for the format. */

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fake.h"

#define FAKE_FN_NAME(sym, r, params) [FAKE_FN_##sym] = #sym,
const char *const fake_fn_names[FAKE_FN_COUNT] = { NVML_API_FUNCTIONS(
	FAKE_FN_NAME, NVML_OWN_TYPE) NVML_API_FAKE_FUNCTIONS(FAKE_FN_NAME, NVML_OWN_TYPE) };

static const struct {
	enum nvml_return code;
	const char *name;
	const char *text; /* what real NVML's nvmlErrorString says */
} codes[] = {
	{ NVML_RET_SUCCESS, "SUCCESS", "Success" },
	{ NVML_RET_UNINITIALIZED, "UNINITIALIZED", "Uninitialized" },
	{ NVML_RET_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid Argument" },
	{ NVML_RET_NOT_SUPPORTED, "NOT_SUPPORTED", "Not Supported" },
	{ NVML_RET_NO_PERMISSION, "NO_PERMISSION", "Insufficient Permissions" },
	{ NVML_RET_ALREADY_INITIALIZED, "ALREADY_INITIALIZED", "Already Initialized" },
	{ NVML_RET_NOT_FOUND, "NOT_FOUND", "Not Found" },
	{ NVML_RET_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE", "Insufficient Size" },
	{ NVML_RET_INSUFFICIENT_POWER, "INSUFFICIENT_POWER", "Insufficient External Power" },
	{ NVML_RET_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED", "Driver Not Loaded" },
	{ NVML_RET_TIMEOUT, "TIMEOUT", "Timeout" },
	{ NVML_RET_IRQ_ISSUE, "IRQ_ISSUE", "Interrupt request issue" },
	{ NVML_RET_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found" },
	{ NVML_RET_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND", "Function Not Found" },
	{ NVML_RET_CORRUPTED_INFOROM, "CORRUPTED_INFOROM", "Corrupted infoROM" },
	{ NVML_RET_GPU_IS_LOST, "GPU_IS_LOST", "GPU is lost" },
	{ NVML_RET_RESET_REQUIRED, "RESET_REQUIRED", "GPU requires restart" },
	{ NVML_RET_OPERATING_SYSTEM, "OPERATING_SYSTEM",
	  "The operating system has blocked the request." },
	{ NVML_RET_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH",
	  "RM has detected an NVML/RM version mismatch." },
	{ NVML_RET_IN_USE, "IN_USE", "In use by another client" },
	{ NVML_RET_MEMORY, "MEMORY", "Insufficient Memory" },
	{ NVML_RET_NO_DATA, "NO_DATA", "No data" },
	{ NVML_RET_VGPU_ECC_NOT_SUPPORTED, "VGPU_ECC_NOT_SUPPORTED", "vGPU ECC not supported" },
	{ NVML_RET_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES", "Insufficient resources" },
	{ NVML_RET_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED", "Frequency not supported" },
	{ NVML_RET_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH",
	  "Argument version mismatch" },
	{ NVML_RET_UNKNOWN, "UNKNOWN", "Unknown Error" },
};

static const char *const arch_names[] = {
	[NVML_ARCH_KEPLER] = "kepler", [NVML_ARCH_MAXWELL] = "maxwell",
	[NVML_ARCH_PASCAL] = "pascal", [NVML_ARCH_VOLTA] = "volta",
	[NVML_ARCH_TURING] = "turing", [NVML_ARCH_AMPERE] = "ampere",
	[NVML_ARCH_ADA] = "ada",       [NVML_ARCH_HOPPER] = "hopper",
};

int fake_fn_lookup(const char *name)
{
	for (int i = 0; i < FAKE_FN_COUNT; i++)
		if (strcmp(fake_fn_names[i], name) == 0)
			return i;
	return -1;
}

int fake_code_lookup(const char *s)
{
	char *end;
	long v;

	if (strncasecmp(s, "NVML_ERROR_", 11) == 0)
		s += 11;
	else if (strncasecmp(s, "NVML_", 5) == 0)
		s += 5;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcasecmp(codes[i].name, s) == 0)
			return (int)codes[i].code;
	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < 0 || v > 999)
		return -1;
	return (int)v;
}

const char *fake_error_string(enum nvml_return r)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].code == r)
			return codes[i].text;
	return "Unknown Error";
}

static int fail_msg(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is above; clang 14 errs */
	(void)vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_ull(const char *s, unsigned long long *ret)
{
	unsigned long long v, mul = 1;
	char *end;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	if (strcasecmp(end, "KiB") == 0)
		mul = 1ULL << 10;
	else if (strcasecmp(end, "MiB") == 0)
		mul = 1ULL << 20;
	else if (strcasecmp(end, "GiB") == 0)
		mul = 1ULL << 30;
	else if (*end)
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*ret = v * mul;
	return 0;
}

int fake_parse_ull(const char *s, unsigned long long *ret)
{
	return parse_ull(s, ret);
}

static int parse_uint(const char *s, unsigned *ret)
{
	unsigned long long v;

	if (parse_ull(s, &v) < 0 || v > 0xffffffffULL)
		return -1;
	*ret = (unsigned)v;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	if (!strcasecmp(s, "on") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcmp(s, "1"))
		*ret = true;
	else if (!strcasecmp(s, "off") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
		 !strcmp(s, "0"))
		*ret = false;
	else
		return -1;
	return 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	(void)snprintf(dst, size, "%s", src);
}

/* "nvmlA,nvmlB" -> bits in @mask. */
static int parse_fn_list(const char *s, uint64_t *mask, char *err, size_t errlen)
{
	char buf[1024], *save = NULL, *tok;

	copy_str(buf, sizeof(buf), s);
	memset(mask, 0, sizeof(uint64_t) * FAKE_FN_WORDS);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		int id = fake_fn_lookup(tok);

		if (id < 0)
			return fail_msg(err, errlen, "unknown function \"%s\"", tok);
		mask[id / 64] |= 1ULL << (id % 64);
	}
	return 0;
}

/* "FUNC:CODE[:NTH]" */
static int parse_fail(struct fake_fixture *fx, const char *s, char *err, size_t errlen)
{
	char buf[256], *fn, *code, *nth;
	int id, c;
	unsigned long long n = 0;

	copy_str(buf, sizeof(buf), s);
	fn = buf;
	code = strchr(fn, ':');
	if (!code)
		return fail_msg(err, errlen, "fail wants FUNC:CODE[:NTH], got \"%s\"", s);
	*code++ = 0;
	nth = strchr(code, ':');
	if (nth)
		*nth++ = 0;
	id = fake_fn_lookup(fn);
	if (id < 0)
		return fail_msg(err, errlen, "unknown function \"%s\"", fn);
	c = fake_code_lookup(code);
	if (c < 0)
		return fail_msg(err, errlen, "unknown return code \"%s\"", code);
	if (nth && (parse_ull(nth, &n) < 0 || n == 0))
		return fail_msg(err, errlen, "bad call number \"%s\"", nth);
	fx->fail[id] = (struct fake_fail){ .active = c != 0, .code = c, .nth = n };
	return 0;
}

static int parse_events(const char *s, unsigned long long *ret)
{
	char buf[128], *save = NULL, *tok;
	unsigned long long m = 0;

	if (isdigit((unsigned char)*s))
		return parse_ull(s, ret);
	copy_str(buf, sizeof(buf), s);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (!strcasecmp(tok, "xid"))
			m |= NVML_EVENT_XID_CRITICAL;
		else if (!strcasecmp(tok, "sbe"))
			m |= NVML_EVENT_SINGLE_BIT_ECC;
		else if (!strcasecmp(tok, "dbe"))
			m |= NVML_EVENT_DOUBLE_BIT_ECC;
		else if (!strcasecmp(tok, "pstate"))
			m |= NVML_EVENT_PSTATE;
		else if (!strcasecmp(tok, "clock"))
			m |= NVML_EVENT_CLOCK;
		else if (strcasecmp(tok, "none") != 0)
			return -1;
	}
	*ret = m;
	return 0;
}

void fake_gpu_defaults(struct fake_gpu *g, unsigned index)
{
	memset(g, 0, sizeof(*g));
	(void)snprintf(g->name, sizeof(g->name), "NVIDIA Fake GPU");
	(void)snprintf(g->uuid, sizeof(g->uuid), "GPU-00000000-0000-4000-8000-%012x", index);
	(void)snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "00000000:%02X:00.0", index + 1);
	g->minor = index;
	g->pci_device_id = 0x25B610DE;
	g->pci_subsystem_id = 0x157E10DE;
	g->mem_total = 16ULL << 30;
	g->temp = 40;
	g->temp_slowdown = 90;
	g->temp_shutdown = 95;
	g->temp_gpu_max = 88;
	g->power_mw = 20000;
	g->power_limit_mw = 60000;
	g->clock_graphics = 1770;
	g->clock_sm = 1770;
	g->clock_mem = 6251;
	g->clock_video = 1500;
	g->sm_count = 10;
	g->ecc = true;
	g->cc_major = 8;
	g->cc_minor = 6;
	g->arch = NVML_ARCH_AMPERE;
	g->pci_class = 0x030200; /* 3D controller: a data-center GPU, GFD's "compute" */
	for (unsigned j = 0; j < FAKE_MAX_GPUS; j++)
		g->topo[j] = -1;
	fake_counters_defaults(g);
}

void fake_fixture_defaults(struct fake_fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	copy_str(fx->driver_version, sizeof(fx->driver_version), "550.54.15");
	copy_str(fx->nvml_version, sizeof(fx->nvml_version), "12.550.54.15");
	fx->cuda_version = 12040;
}

int fake_gpu_set(struct fake_gpu *g, unsigned index, const char *key, const char *v, char *err,
		 size_t errlen)
{
	bool b;
	int r;

	if (!strcmp(key, "name")) {
		/* "\n" and "\\" stand for a newline and a backslash: hostile names from hardware */
		size_t o = 0;

		for (size_t i = 0; v[i] && o + 1 < sizeof(g->name); i++) {
			if (v[i] == '\\' && v[i + 1] == 'n') {
				g->name[o++] = '\n';
				i++;
			} else if (v[i] == '\\' && v[i + 1] == '\\') {
				g->name[o++] = '\\';
				i++;
			} else {
				g->name[o++] = v[i];
			}
		}
		g->name[o] = 0;
	} else if (!strcmp(key, "uuid")) {
		copy_str(g->uuid, sizeof(g->uuid), v);
	} else if (!strcmp(key, "pci_bus_id")) {
		char tmp[32];

		if (fake_sysfs_bus_id(v, tmp, sizeof(tmp)) < 0)
			return fail_msg(err, errlen, "bad pci_bus_id \"%s\"", v);
		copy_str(g->pci_bus_id, sizeof(g->pci_bus_id), v);
	} else if (!strcmp(key, "minor")) {
		if (parse_uint(v, &g->minor) < 0)
			goto bad;
	} else if (!strcmp(key, "pci_device_id")) {
		if (parse_uint(v, &g->pci_device_id) < 0)
			goto bad;
	} else if (!strcmp(key, "pci_subsystem_id")) {
		if (parse_uint(v, &g->pci_subsystem_id) < 0)
			goto bad;
	} else if (!strcmp(key, "memory_total")) {
		if (parse_ull(v, &g->mem_total) < 0)
			goto bad;
	} else if (!strcmp(key, "memory_used")) {
		if (parse_ull(v, &g->mem_used) < 0)
			goto bad;
	} else if (!strcmp(key, "temperature")) {
		if (parse_uint(v, &g->temp) < 0)
			goto bad;
	} else if (!strcmp(key, "temperature_slowdown")) {
		if (parse_uint(v, &g->temp_slowdown) < 0)
			goto bad;
	} else if (!strcmp(key, "temperature_shutdown")) {
		if (parse_uint(v, &g->temp_shutdown) < 0)
			goto bad;
	} else if (!strcmp(key, "temperature_gpu_max")) {
		if (parse_uint(v, &g->temp_gpu_max) < 0)
			goto bad;
	} else if (!strcmp(key, "power")) {
		if (parse_uint(v, &g->power_mw) < 0)
			goto bad;
	} else if (!strcmp(key, "power_limit")) {
		if (parse_uint(v, &g->power_limit_mw) < 0)
			goto bad;
	} else if (!strcmp(key, "util_gpu")) {
		if (parse_uint(v, &g->util_gpu) < 0 || g->util_gpu > 100)
			goto bad;
	} else if (!strcmp(key, "util_mem")) {
		if (parse_uint(v, &g->util_mem) < 0 || g->util_mem > 100)
			goto bad;
	} else if (!strcmp(key, "clock_graphics")) {
		if (parse_uint(v, &g->clock_graphics) < 0)
			goto bad;
	} else if (!strcmp(key, "clock_sm")) {
		if (parse_uint(v, &g->clock_sm) < 0)
			goto bad;
	} else if (!strcmp(key, "clock_mem")) {
		if (parse_uint(v, &g->clock_mem) < 0)
			goto bad;
	} else if (!strcmp(key, "clock_video")) {
		if (parse_uint(v, &g->clock_video) < 0)
			goto bad;
	} else if (!strcmp(key, "sm_count")) {
		if (parse_uint(v, &g->sm_count) < 0)
			goto bad;
	} else if (!strcmp(key, "ecc")) {
		if (parse_bool(v, &g->ecc) < 0)
			goto bad;
	} else if (!strcmp(key, "ecc_corrected")) {
		if (parse_ull(v, &g->ecc_corrected) < 0)
			goto bad;
	} else if (!strcmp(key, "ecc_uncorrected")) {
		if (parse_ull(v, &g->ecc_uncorrected) < 0)
			goto bad;
	} else if (!strcmp(key, "energy")) {
		if (parse_ull(v, &g->energy_mj) < 0)
			goto bad;
	} else if (!strcmp(key, "clock_reasons")) {
		if (parse_ull(v, &g->clock_reasons) < 0)
			goto bad;
	} else if (!strcmp(key, "events")) {
		if (parse_events(v, &g->events) < 0)
			goto bad;
		g->events_set = true;
	} else if (!strcmp(key, "compute_capability")) {
		unsigned long ma, mi;
		char *end;

		errno = 0;
		ma = strtoul(v, &end, 10);
		if (errno || end == v || *end != '.' || !isdigit((unsigned char)end[1]) || ma > 99)
			goto bad;
		mi = strtoul(end + 1, &end, 10);
		if (errno || *end || mi > 99)
			goto bad;
		g->cc_major = (int)ma;
		g->cc_minor = (int)mi;
	} else if (!strcmp(key, "architecture")) {
		bool found = false;

		for (unsigned i = 0; i < sizeof(arch_names) / sizeof(arch_names[0]); i++)
			if (arch_names[i] && !strcasecmp(arch_names[i], v)) {
				g->arch = i;
				found = true;
			}
		if (!found && !strcasecmp(v, "unknown")) {
			g->arch = NVML_ARCH_UNKNOWN;
			found = true;
		}
		if (!found && parse_uint(v, &g->arch) < 0)
			goto bad;
	} else if (!strcmp(key, "mig")) {
		if (parse_bool(v, &g->mig) < 0)
			goto bad;
		if (g->mig)
			g->mig_capable = true;
	} else if (!strcmp(key, "mig_capable")) {
		if (parse_bool(v, &g->mig_capable) < 0)
			goto bad;
	} else if (!strcmp(key, "pci_class")) {
		char *end;

		errno = 0;
		g->pci_class = (unsigned)strtoul(v, &end, 16);
		if (errno || end == v || *end || g->pci_class > 0xffffff)
			goto bad;
		g->pci_class_set = true;
	} else if (!strcmp(key, "memory_limits")) {
		if (!strcmp(v, "supported"))
			g->mem_limits = true;
		else if (!strcmp(v, "not_supported"))
			g->mem_limits = false;
		else
			goto bad;
	} else if (!strcmp(key, "numa")) {
		if (!strcmp(v, "none"))
			g->numa[0] = 0;
		else
			copy_str(g->numa, sizeof(g->numa), v);
	} else if (!strcmp(key, "processes")) {
		char buf[4096], *save = NULL, *tok;

		copy_str(buf, sizeof(buf), v);
		g->n_procs = 0;
		for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			char *colon = strchr(tok, ':');

			if (!colon || g->n_procs == FAKE_MAX_PROCS)
				goto bad;
			*colon = 0;
			if (parse_uint(tok, &g->procs[g->n_procs].pid) < 0 ||
			    parse_ull(colon + 1, &g->procs[g->n_procs].used) < 0)
				goto bad;
			g->n_procs++;
		}
	} else if (!strcmp(key, "process_sm_util")) {
		char buf[4096], *save = NULL, *tok;

		copy_str(buf, sizeof(buf), v);
		g->proc_util = true;
		g->n_proc_utils = 0;
		for (tok = strtok_r(buf, ", ", &save); tok && strcmp(v, "none") != 0;
		     tok = strtok_r(NULL, ", ", &save)) {
			char *colon = strchr(tok, ':');
			struct fake_proc_util *u = &g->proc_utils[g->n_proc_utils];

			if (!colon || g->n_proc_utils == FAKE_MAX_PROCS)
				goto bad;
			*colon = 0;
			if (parse_uint(tok, &u->pid) < 0 || parse_uint(colon + 1, &u->sm_util) < 0)
				goto bad;
			g->n_proc_utils++;
		}
	} else if (!strcmp(key, "topology")) {
		char buf[512], *save = NULL, *tok;

		copy_str(buf, sizeof(buf), v);
		for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			char *colon = strchr(tok, ':');
			unsigned j, level;

			if (!colon)
				goto bad;
			*colon = 0;
			if (parse_uint(tok, &j) < 0 || j >= FAKE_MAX_GPUS ||
			    parse_uint(colon + 1, &level) < 0 || level > 1000)
				goto bad;
			g->topo[j] = (int)level;
		}
	} else if (!strcmp(key, "lost")) {
		if (parse_bool(v, &b) < 0)
			goto bad;
		g->lost = b;
	} else if (!strcmp(key, "not_supported")) {
		return parse_fn_list(v, g->not_supported, err, errlen);
	} else if ((r = fake_gpm_set(g, key, v, err, errlen)) != 0) {
		return r < 0 ? -1 : 0;
	} else if ((r = fake_counters_set(g, key, v)) < 0) {
		goto bad;
	} else if (r == 0) {
		return fail_msg(err, errlen, "unknown gpu key \"%s\"", key);
	}
	return 0;
bad:
	return fail_msg(err, errlen, "bad value \"%s\" for %s", v, key);
}

int fake_global_set(struct fake_fixture *fx, const char *key, const char *v, char *err,
		    size_t errlen)
{
	if (!strcmp(key, "driver_version")) {
		copy_str(fx->driver_version, sizeof(fx->driver_version), v);
	} else if (!strcmp(key, "nvml_version")) {
		copy_str(fx->nvml_version, sizeof(fx->nvml_version), v);
	} else if (!strcmp(key, "kernel_driver_version")) {
		copy_str(fx->kernel_version, sizeof(fx->kernel_version), v);
	} else if (!strcmp(key, "cuda_driver_version")) {
		unsigned u;

		if (parse_uint(v, &u) < 0 || u > 0x7fffffff)
			goto bad;
		fx->cuda_version = (int)u;
	} else if (!strcmp(key, "init_error")) {
		int c = fake_code_lookup(v);

		if (c < 0)
			goto bad;
		fx->init_error = c;
	} else if (!strcmp(key, "mismatch")) {
		if (parse_bool(v, &fx->mismatch) < 0)
			goto bad;
	} else if (!strcmp(key, "not_supported")) {
		return parse_fn_list(v, fx->not_supported, err, errlen);
	} else if (!strcmp(key, "block")) {
		return parse_fn_list(v, fx->block, err, errlen);
	} else if (!strcmp(key, "fail")) {
		return parse_fail(fx, v, err, errlen);
	} else {
		return fail_msg(err, errlen, "unknown key \"%s\"", key);
	}
	return 0;
bad:
	return fail_msg(err, errlen, "bad value \"%s\" for %s", v, key);
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int fake_fixture_load(const char *path, struct fake_fixture *fx, char *err, size_t errlen)
{
	char line[2048], msg[256];
	unsigned lineno = 0;
	bool in_gpu = false;
	FILE *f;
	int r = 0;

	fake_fixture_defaults(fx);
	f = fopen(path, "re");
	if (!f)
		return fail_msg(err, errlen, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq, *hash;

		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		s = trim(line);
		if (!*s)
			continue;
		if (!strcmp(s, "[gpu]")) {
			if (fx->n_gpus == FAKE_MAX_GPUS) {
				r = fail_msg(err, errlen, "%s:%u: more than %d GPUs", path, lineno,
					     FAKE_MAX_GPUS);
				break;
			}
			fake_gpu_defaults(&fx->gpus[fx->n_gpus], fx->n_gpus);
			fx->n_gpus++;
			in_gpu = true;
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			r = fail_msg(err, errlen, "%s:%u: expected key = value or [gpu]", path,
				     lineno);
			break;
		}
		*eq = 0;
		if (in_gpu)
			r = fake_gpu_set(&fx->gpus[fx->n_gpus - 1], fx->n_gpus - 1, trim(s),
					 trim(eq + 1), msg, sizeof(msg));
		else
			r = fake_global_set(fx, trim(s), trim(eq + 1), msg, sizeof(msg));
		if (r < 0) {
			(void)fail_msg(err, errlen, "%s:%u: %s", path, lineno, msg);
			break;
		}
	}
	(void)fclose(f);
	return r;
}

int fake_parse_bus_id(const char *s, unsigned v[4])
{
	static const unsigned long max[4] = { 0xffffffffUL, 0xff, 0x1f, 0x7 };

	for (int i = 0; i < 4; i++) {
		unsigned long x;
		char *end;

		if (!isxdigit((unsigned char)*s))
			return -1;
		errno = 0;
		x = strtoul(s, &end, 16);
		if (errno || x > max[i] || *end != (i < 2 ? ':' : i == 2 ? '.' : 0))
			return -1;
		v[i] = (unsigned)x;
		s = end + 1;
	}
	return 0;
}

int fake_sysfs_bus_id(const char *bus_id, char *out, size_t outlen)
{
	unsigned b[4];
	int n;

	if (fake_parse_bus_id(bus_id, b) < 0)
		return -1;
	n = snprintf(out, outlen, "%04x:%02x:%02x.%x", b[0], b[1], b[2], b[3]);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}
