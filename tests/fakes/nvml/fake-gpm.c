/*
 * The fake NVML's GPU Performance Monitoring (GPM) and PCIe throughput. A fixture GPU with
 * "gpm = on" answers as a Hopper GPU does: nvmlGpmQueryDeviceSupport says yes, samples can be
 * taken, and nvmlGpmMetricsGet between two samples of it gives the fixture's percentages and
 * MiB/s (the interval's length does not matter to a fixture). A GPU without it answers as real
 * NVML does for one that predates GPM: supported = 0 and NOT_SUPPORTED from nvmlGpmSampleGet
 * and nvmlGpmMetricsGet. nvmlDeviceGetPcieThroughput answers every GPU (fixture KB/s).
 * The fake counts the samples allocated and not freed ("gpm_samples"), so a test sees a leak.
 */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fake.h"

/* The prototypes nvml-api.h gives, so that the compiler checks each definition here. */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

#define SAMPLE_MAGIC 0x67706d73U
#define ID(sym)	     FAKE_FN_##sym

/* What nvmlGpmSample_t points at in the fake. */
struct nvml_gpm_sample {
	unsigned magic;
	bool taken;
	unsigned gpu, gen;
	unsigned long long seq; /* order of taking: sample2 must be the later */
};

static unsigned n_samples;	    /* allocated, not freed; under fake.mu */
static unsigned long long next_seq; /* under fake.mu */

unsigned fake_gpm_samples(void)
{
	return n_samples;
}

static int parse_double(const char *s, double max, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > max)
		return -1;
	*ret = v;
	return 0;
}

static int parse_u32(const char *s, unsigned *ret)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v > 0xffffffffUL)
		return -1;
	*ret = (unsigned)v;
	return 0;
}

int fake_gpm_set(struct fake_gpu *g, const char *key, const char *v, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		size_t offset;
		double max;
	} dbl[] = {
		{ "gpm_graphics", offsetof(struct fake_gpm, graphics), 100 },
		{ "gpm_tensor", offsetof(struct fake_gpm, tensor), 100 },
		{ "gpm_dram", offsetof(struct fake_gpm, dram), 100 },
		{ "gpm_pcie_tx", offsetof(struct fake_gpm, pcie_tx), 1e9 },
		{ "gpm_pcie_rx", offsetof(struct fake_gpm, pcie_rx), 1e9 },
	};
	int bad = 0;

	if (!strcmp(key, "gpm")) {
		if (!strcasecmp(v, "on"))
			g->gpm.on = true;
		else if (!strcasecmp(v, "off"))
			g->gpm.on = false;
		else
			bad = 1;
	} else if (!strcmp(key, "pcie_tx")) {
		bad = parse_u32(v, &g->gpm.tput_tx) < 0;
	} else if (!strcmp(key, "pcie_rx")) {
		bad = parse_u32(v, &g->gpm.tput_rx) < 0;
	} else {
		size_t i;

		for (i = 0; i < sizeof(dbl) / sizeof(dbl[0]); i++)
			if (!strcmp(key, dbl[i].key))
				break;
		if (i == sizeof(dbl) / sizeof(dbl[0]))
			return 0;
		bad = parse_double(v, dbl[i].max, (double *)((char *)&g->gpm + dbl[i].offset)) < 0;
	}
	if (bad) {
		(void)snprintf(err, errlen, "bad value \"%s\" for %s", v, key);
		return -1;
	}
	return 1;
}

static bool valid(const struct nvml_gpm_sample *s)
{
	return s && s->magic == SAMPLE_MAGIC;
}

enum nvml_return nvmlGpmQueryDeviceSupport(struct nvml_device *d, struct nvml_gpm_support *sup)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlGpmQueryDeviceSupport), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!sup)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (sup->version != NVML_GPM_SUPPORT_V1)
		return fake_leave(NVML_RET_ARGUMENT_VERSION_MISMATCH);
	sup->is_supported_device = g->gpm.on;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlGpmSampleAlloc(struct nvml_gpm_sample **ret)
{
	struct nvml_gpm_sample *s;
	enum nvml_return r = fake_enter(ID(nvmlGpmSampleAlloc), true);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!ret)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	s = calloc(1, sizeof(*s));
	if (!s)
		return fake_leave(NVML_RET_MEMORY);
	s->magic = SAMPLE_MAGIC;
	n_samples++;
	*ret = s;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlGpmSampleFree(struct nvml_gpm_sample *s)
{
	enum nvml_return r = fake_enter(ID(nvmlGpmSampleFree), true);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!valid(s))
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	s->magic = 0;
	free(s);
	n_samples--;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlGpmSampleGet(struct nvml_device *d, struct nvml_gpm_sample *s)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlGpmSampleGet), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!valid(s))
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (!g->gpm.on)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	s->taken = true;
	s->gpu = (unsigned)(g - fake.fx.gpus);
	s->gen = fake.gen;
	s->seq = ++next_seq;
	return fake_leave(NVML_RET_SUCCESS);
}

/* The fixture's value of GPM metric @id, or false when the fake does not know it. */
static bool metric_value(const struct fake_gpm *m, unsigned id, double *ret)
{
	switch (id) {
	case NVML_GPM_ID_GRAPHICS_UTIL:
		*ret = m->graphics;
		return true;
	case NVML_GPM_ID_ANY_TENSOR_UTIL:
		*ret = m->tensor;
		return true;
	case NVML_GPM_ID_DRAM_BW_UTIL:
		*ret = m->dram;
		return true;
	case NVML_GPM_ID_PCIE_TX_PER_SEC:
		*ret = m->pcie_tx;
		return true;
	case NVML_GPM_ID_PCIE_RX_PER_SEC:
		*ret = m->pcie_rx;
		return true;
	default:
		return false;
	}
}

enum nvml_return nvmlGpmMetricsGet(struct nvml_gpm_metrics_get *mg)
{
	const struct nvml_gpm_sample *a, *b;
	struct fake_gpu *g;
	enum nvml_return r = fake_enter(ID(nvmlGpmMetricsGet), true);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!mg)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (mg->version != NVML_GPM_METRICS_GET_V1)
		return fake_leave(NVML_RET_ARGUMENT_VERSION_MISMATCH);
	a = mg->sample1;
	b = mg->sample2;
	/* Two samples of one GPU, of this driver load, in the order taken. */
	if (mg->num_metrics == 0 || mg->num_metrics > NVML_GPM_ID_MAX || !valid(a) || !valid(b) ||
	    !a->taken || !b->taken || a->gpu != b->gpu || a->gen != b->gen || a->seq >= b->seq)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	if (a->gen != fake.gen || a->gpu >= fake.fx.n_gpus)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	g = &fake.fx.gpus[a->gpu];
	if (g->lost)
		return fake_leave(NVML_RET_GPU_IS_LOST);
	if (!g->gpm.on)
		return fake_leave(NVML_RET_NOT_SUPPORTED);
	for (unsigned i = 0; i < mg->num_metrics; i++) {
		struct nvml_gpm_metric *m = &mg->metrics[i];

		m->nvml_return = metric_value(&g->gpm, m->metric_id, &m->value) ?
					 NVML_RET_SUCCESS :
					 NVML_RET_NOT_SUPPORTED;
		memset(&m->metric_info, 0, sizeof(m->metric_info));
	}
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetPcieThroughput(struct nvml_device *d,
					     enum nvml_pcie_util_counter counter, unsigned *value)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetPcieThroughput), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!value || (counter != NVML_PCIE_TX && counter != NVML_PCIE_RX))
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*value = counter == NVML_PCIE_TX ? g->gpm.tput_tx : g->gpm.tput_rx;
	return fake_leave(NVML_RET_SUCCESS);
}
