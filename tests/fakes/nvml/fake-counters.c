/*
 * The fake NVML's entry points for DCGM-exporter's other default counters: memory info v2,
 * field values (memory temperature, NVLink link count and raw throughput), PCIe replays,
 * encoder/decoder utilisation, remapped rows; and their fixture keys. A GPU without a feature
 * answers as real NVML does: NOT_SUPPORTED from the call (remapped rows), or SUCCESS from
 * nvmlDeviceGetFieldValues with NOT_SUPPORTED in the field's own return code. The old/ fake
 * leaves the symbols out (FUNCTION_NOT_FOUND for a caller that looks them up). Every function
 * holds fake.mu from fake_enter_dev() to fake_leave(), as fake-api.c's do.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake.h"

#define ID(sym) FAKE_FN_##sym

/* The prototypes nvml-api.h gives, so that the definitions below are checked against them. */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

void fake_counters_defaults(struct fake_gpu *g)
{
	g->mem_temp = -1; /* GDDR boards (the A2 the defaults describe) have no memory sensor */
	g->mem_temp_type = NVML_VALUE_UINT;
	g->nvlink_err_link = -1;
}

/* nvmlValueType_t by a short name, for "memory_temperature_type". */
static const char *const value_types[] = {
	[NVML_VALUE_DOUBLE] = "double", [NVML_VALUE_UINT] = "uint", [NVML_VALUE_ULONG] = "ulong",
	[NVML_VALUE_ULL] = "ull",	[NVML_VALUE_SLL] = "sll",   [NVML_VALUE_SINT] = "int",
	[NVML_VALUE_USHORT] = "ushort",
};

/* The memory temperature @c as a field of type @t answers it. */
static void set_value(struct nvml_field_value *v, enum nvml_value_type t, unsigned c)
{
	v->value_type = t;
	switch (t) {
	case NVML_VALUE_DOUBLE:
		v->value.d = c;
		break;
	case NVML_VALUE_UINT:
		v->value.ui = c;
		break;
	case NVML_VALUE_ULONG:
		v->value.ul = c;
		break;
	case NVML_VALUE_ULL:
		v->value.ull = c;
		break;
	case NVML_VALUE_SLL:
		v->value.sll = c;
		break;
	case NVML_VALUE_SINT:
		v->value.si = (int)c;
		break;
	case NVML_VALUE_USHORT:
		v->value.us = (unsigned short)c;
		break;
	}
}

static int parse_u32(const char *s, unsigned *ret)
{
	unsigned long long v;

	if (fake_parse_ull(s, &v) < 0 || v > 0xffffffffULL)
		return -1;
	*ret = (unsigned)v;
	return 0;
}

/* "a:b:c..." into @n unsigned long longs; 0 or -1. */
static int parse_tuple(const char *s, unsigned long long *v, unsigned n)
{
	char buf[128], *save = NULL, *tok;
	unsigned i = 0;

	if (strlen(s) >= sizeof(buf))
		return -1;
	memcpy(buf, s, strlen(s) + 1);
	for (tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		if (i == n || fake_parse_ull(tok, &v[i]) < 0)
			return -1;
		i++;
	}
	return i == n ? 0 : -1;
}

int fake_counters_set(struct fake_gpu *g, const char *key, const char *v)
{
	unsigned long long t[4];

	if (!strcmp(key, "memory_reserved"))
		return fake_parse_ull(v, &g->mem_reserved) < 0 ? -1 : 1;
	if (!strcmp(key, "memory_temperature")) {
		unsigned c;

		if (!strcmp(v, "none")) {
			g->mem_temp = -1;
			return 1;
		}
		if (parse_u32(v, &c) < 0 || c > 200)
			return -1;
		g->mem_temp = (int)c;
		return 1;
	}
	if (!strcmp(key, "memory_temperature_type")) {
		for (size_t i = 0; i < sizeof(value_types) / sizeof(value_types[0]); i++) {
			if (!strcmp(v, value_types[i])) {
				g->mem_temp_type = (enum nvml_value_type)i;
				return 1;
			}
		}
		return -1;
	}
	if (!strcmp(key, "pcie_replay"))
		return parse_u32(v, &g->pcie_replay) < 0 ? -1 : 1;
	if (!strcmp(key, "enc_util"))
		return parse_u32(v, &g->enc_util) < 0 || g->enc_util > 100 ? -1 : 1;
	if (!strcmp(key, "dec_util"))
		return parse_u32(v, &g->dec_util) < 0 || g->dec_util > 100 ? -1 : 1;
	if (!strcmp(key, "remapped_rows")) {
		if (!strcmp(v, "none")) {
			g->remap = false;
			return 1;
		}
		if (parse_tuple(v, t, 4) < 0 || t[0] > 0xffffffffULL || t[1] > 0xffffffffULL ||
		    t[2] > 1 || t[3] > 1)
			return -1;
		g->remap = true;
		g->remap_corr = (unsigned)t[0];
		g->remap_unc = (unsigned)t[1];
		g->remap_pending = (unsigned)t[2];
		g->remap_failure = (unsigned)t[3];
		return 1;
	}
	if (!strcmp(key, "nvlink_link_error")) {
		const char *colon = strchr(v, ':');
		unsigned long long link;
		char num[16];
		int code;

		if (!strcmp(v, "none")) {
			g->nvlink_err_link = -1;
			return 1;
		}
		if (!colon || (size_t)(colon - v) >= sizeof(num))
			return -1;
		memcpy(num, v, (size_t)(colon - v));
		num[colon - v] = '\0';
		code = fake_code_lookup(colon + 1);
		if (fake_parse_ull(num, &link) < 0 || link >= NVML_NVLINK_MAX_LINKS_COUNT ||
		    code <= 0)
			return -1;
		g->nvlink_err_link = (int)link;
		g->nvlink_err = (enum nvml_return)code;
		return 1;
	}
	if (!strcmp(key, "nvlink")) {
		if (!strcmp(v, "none")) {
			g->nvlinks = 0;
			return 1;
		}
		if (parse_tuple(v, t, 3) < 0 || t[0] > NVML_NVLINK_MAX_LINKS_COUNT)
			return -1;
		g->nvlinks = (unsigned)t[0];
		g->nvlink_tx = t[1];
		g->nvlink_rx = t[2];
		return 1;
	}
	return 0;
}

enum nvml_return nvmlDeviceGetMemoryInfo_v2(struct nvml_device *d, struct nvml_memory_v2 *m)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetMemoryInfo_v2), d, &g);
	unsigned long long used;

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!m)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (m->version != NVML_MEMORY_V2_VERSION)
		return fake_leave(NVML_RET_ARGUMENT_VERSION_MISMATCH);
	used = g->mem_used < g->mem_total ? g->mem_used : g->mem_total;
	m->total = g->mem_total;
	m->used = used;
	m->reserved = g->mem_reserved < g->mem_total - used ? g->mem_reserved : g->mem_total - used;
	m->free = g->mem_total - used - m->reserved;
	return fake_leave(NVML_RET_SUCCESS);
}

/* One field of a GPU; sets v->ret (and the value on success). fake.mu held. */
static void field_value(const struct fake_gpu *g, struct nvml_field_value *v, long long now_us)
{
	v->timestamp = now_us;
	v->latency_us = 0;
	v->ret = NVML_RET_SUCCESS;
	switch (v->field_id) {
	case NVML_FI_MEMORY_TEMP:
		if (g->mem_temp < 0)
			break;
		set_value(v, g->mem_temp_type, (unsigned)g->mem_temp);
		return;
	case NVML_FI_NVLINK_LINK_COUNT:
		if (!g->nvlinks)
			break;
		v->value_type = NVML_VALUE_UINT;
		v->value.ui = g->nvlinks;
		return;
	case NVML_FI_NVLINK_THRU_RAW_TX:
	case NVML_FI_NVLINK_THRU_RAW_RX:
		if (!g->nvlinks)
			break;
		if (v->scope_id >= g->nvlinks) {
			v->ret = NVML_RET_INVALID_ARGUMENT;
			return;
		}
		if ((int)v->scope_id == g->nvlink_err_link) {
			v->ret = g->nvlink_err;
			return;
		}
		v->value_type = NVML_VALUE_ULL;
		v->value.ull = v->field_id == NVML_FI_NVLINK_THRU_RAW_TX ? g->nvlink_tx :
									   g->nvlink_rx;
		return;
	default:
		break;
	}
	v->ret = NVML_RET_NOT_SUPPORTED;
}

enum nvml_return nvmlDeviceGetFieldValues(struct nvml_device *d, int count,
					  struct nvml_field_value *values)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetFieldValues), d, &g);
	struct timespec ts;
	long long now_us;

	if (r != NVML_RET_SUCCESS)
		return r;
	if (count <= 0 || !values)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	(void)clock_gettime(CLOCK_REALTIME, &ts);
	now_us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	for (int i = 0; i < count; i++)
		field_value(g, &values[i], now_us);
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetPcieReplayCounter(struct nvml_device *d, unsigned *value)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetPcieReplayCounter), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!value)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*value = g->pcie_replay;
	return fake_leave(NVML_RET_SUCCESS);
}

/*
 * Encoder or decoder: percent over a sampling period (NVML's is about a second). NVML does not
 * answer either for a GPU in MIG mode (NOT_SUPPORTED, as its reference says).
 */
static enum nvml_return video_util(enum fake_fn fn, struct nvml_device *d, bool enc, unsigned *util,
				   unsigned *period_us)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(fn, d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!util || !period_us)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (g->mig)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	*util = enc ? g->enc_util : g->dec_util;
	*period_us = 1000000;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetEncoderUtilization(struct nvml_device *d, unsigned *util,
						 unsigned *period_us)
{
	return video_util(ID(nvmlDeviceGetEncoderUtilization), d, true, util, period_us);
}

enum nvml_return nvmlDeviceGetDecoderUtilization(struct nvml_device *d, unsigned *util,
						 unsigned *period_us)
{
	return video_util(ID(nvmlDeviceGetDecoderUtilization), d, false, util, period_us);
}

enum nvml_return nvmlDeviceGetRemappedRows(struct nvml_device *d, unsigned *corr, unsigned *unc,
					   unsigned *pending, unsigned *failure)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetRemappedRows), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!corr || !unc || !pending || !failure)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	/* Nor for a GPU in MIG mode, whose rows NVML does not report while it is on. */
	if (!g->remap || g->mig)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	*corr = g->remap_corr;
	*unc = g->remap_unc;
	*pending = g->remap_pending;
	*failure = g->remap_failure;
	return fake_leave(NVML_RET_SUCCESS);
}
