/*
 * The profiling ratios and PCIe rates of an NVML GPU, DCGM-exporter's DCGM_FI_PROF_* fields.
 * DCGM reads them from its own profiler; NVML's GPU Performance Monitoring (GPM) gives the same
 * quantities on the GPUs that have it (Hopper and later, R520+ drivers): a metric is computed
 * between two GPM samples, so each GPU keeps its previous sample (struct nvml_dev.gpm_prev) and
 * every sampling tick yields the ratios over the interval since the last one. Where GPM is
 * missing, only the PCIe rates have another source: nvmlDeviceGetPcieThroughput.
 */

#define LOG_MODULE "gpu-nvml"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>

#include "log.h"
#include "nvml-int.h"
#include "util.h"

#define GPM_YES 1
#define GPM_NO	(-1)

#define MIB 1048576.0
#define KB  1024.0 /* NVML's "KB/s" (nvmlDeviceGetPcieThroughput) is KiB/s */

/* The GPM metrics read, and where each goes: a percent -> a 0-1 ratio, MiB/s -> B/s. */
static const struct {
	unsigned id;
	double scale;
	size_t offset;
} gpm_metrics[] = {
	{ NVML_GPM_ID_GRAPHICS_UTIL, 0.01, offsetof(struct gpu_sample, prof_gr_active) },
	{ NVML_GPM_ID_ANY_TENSOR_UTIL, 0.01, offsetof(struct gpu_sample, prof_tensor_active) },
	{ NVML_GPM_ID_DRAM_BW_UTIL, 0.01, offsetof(struct gpu_sample, prof_dram_active) },
	{ NVML_GPM_ID_PCIE_TX_PER_SEC, MIB, offsetof(struct gpu_sample, pcie_tx_bps) },
	{ NVML_GPM_ID_PCIE_RX_PER_SEC, MIB, offsetof(struct gpu_sample, pcie_rx_bps) },
};

static bool gpm_loaded(const struct nvml_backend *n)
{
	return n->f.nvmlGpmQueryDeviceSupport && n->f.nvmlGpmSampleAlloc && n->f.nvmlGpmSampleGet &&
	       n->f.nvmlGpmSampleFree && n->f.nvmlGpmMetricsGet;
}

/* Asks once per discovery whether the GPU has GPM; a failure other than "no" asks again. */
static bool has_gpm(struct nvml_backend *n, struct nvml_dev *d, struct nvml_device *h,
		    enum nvml_return *worst)
{
	struct nvml_gpm_support sup = { .version = NVML_GPM_SUPPORT_V1 };
	int known = atomic_load(&d->gpm);
	enum nvml_return r;

	if (known)
		return known == GPM_YES;
	if (!gpm_loaded(n)) {
		atomic_store(&d->gpm, GPM_NO);
		return false;
	}
	r = NVC(n, nvmlGpmQueryDeviceSupport)(h, &sup);
	if (r == NVML_RET_SUCCESS || r == NVML_RET_NOT_SUPPORTED) {
		known = r == NVML_RET_SUCCESS && sup.is_supported_device ? GPM_YES : GPM_NO;
		atomic_store(&d->gpm, known);
		log_debug("nvml gpm", "device=%s supported=%s", d->uuid,
			  known == GPM_YES ? "true" : "false");
		return known == GPM_YES;
	}
	nvml_note_failure(r, worst);
	return false;
}

static void pcie_throughput(struct nvml_backend *n, struct nvml_device *h, struct gpu_sample *s,
			    enum nvml_return *worst)
{
	unsigned kb;
	enum nvml_return r;

	if (!n->f.nvmlDeviceGetPcieThroughput)
		return;
	r = NVC(n, nvmlDeviceGetPcieThroughput)(h, NVML_PCIE_TX, &kb);
	if (r == NVML_RET_SUCCESS)
		s->pcie_tx_bps = kb * KB;
	nvml_note_failure(r, worst);
	if (r != NVML_RET_SUCCESS && r != NVML_RET_NOT_SUPPORTED)
		return; /* a lost GPU answers the same again: one failure is enough */
	r = NVC(n, nvmlDeviceGetPcieThroughput)(h, NVML_PCIE_RX, &kb);
	if (r == NVML_RET_SUCCESS)
		s->pcie_rx_bps = kb * KB;
	nvml_note_failure(r, worst);
}

/* The ratios between @prev and @cur into @s; a metric NVML could not compute stays NaN. */
static void gpm_metrics_between(struct nvml_backend *n, struct nvml_gpm_sample *prev,
				struct nvml_gpm_sample *cur, struct gpu_sample *s,
				enum nvml_return *worst)
{
	struct nvml_gpm_metrics_get g = {
		.version = NVML_GPM_METRICS_GET_V1,
		.num_metrics = ELEMENTSOF(gpm_metrics),
		.sample1 = prev,
		.sample2 = cur,
	};
	enum nvml_return r;

	for (size_t i = 0; i < ELEMENTSOF(gpm_metrics); i++)
		g.metrics[i].metric_id = gpm_metrics[i].id;
	r = NVC(n, nvmlGpmMetricsGet)(&g);
	if (r != NVML_RET_SUCCESS) {
		nvml_note_failure(r, worst);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(gpm_metrics); i++) {
		const struct nvml_gpm_metric *m = &g.metrics[i];

		if (m->nvml_return != NVML_RET_SUCCESS || !isfinite(m->value) || m->value < 0)
			continue;
		*(double *)((char *)s + gpm_metrics[i].offset) = m->value * gpm_metrics[i].scale;
	}
}

void nvml_gpm_sample(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
		     struct gpu_sample *s, enum nvml_return *worst)
{
	struct nvml_gpm_sample *cur = NULL, *prev;
	struct nvml_dev *d;
	enum nvml_return r;

	/*
	 * Unlike the rest of a sample, this reads and writes the device table after library
	 * calls (the sample's earlier ones, and its own). That relies on the monitor's rule
	 * (gpu-backend.h): no discovery or re-init, which replace or release the table's GPM
	 * state, while a sample is inside, hung or not. Two samples of one GPU (a hung one and its
	 * successor) only exchange gpm_prev atomically.
	 */
	if (gpu >= n->n_devs || !h)
		return;
	d = &n->devs[gpu];
	if (!has_gpm(n, d, h, worst)) {
		pcie_throughput(n, h, s, worst);
		return;
	}
	r = NVC(n, nvmlGpmSampleAlloc)(&cur);
	if (r != NVML_RET_SUCCESS) {
		nvml_note_failure(r, worst);
		return;
	}
	r = NVC(n, nvmlGpmSampleGet)(h, cur);
	if (r != NVML_RET_SUCCESS) {
		nvml_note_failure(r, worst);
		(void)NVC(n, nvmlGpmSampleFree)(cur);
		return;
	}
	/* Taken, not read: a hung sample finishing later must not compute against it again. */
	prev = atomic_exchange(&d->gpm_prev, NULL);
	if (prev) {
		gpm_metrics_between(n, prev, cur, s, worst);
		(void)NVC(n, nvmlGpmSampleFree)(prev);
	}
	prev = atomic_exchange(&d->gpm_prev, cur);
	if (prev) /* another sample stored one meanwhile: keep the newer */
		(void)NVC(n, nvmlGpmSampleFree)(prev);
}

void nvml_gpm_release(struct nvml_backend *n, struct nvml_dev *devs, unsigned n_devs)
{
	for (unsigned i = 0; i < n_devs; i++) {
		struct nvml_gpm_sample *prev = atomic_exchange(&devs[i].gpm_prev, NULL);

		if (prev && n->f.nvmlGpmSampleFree)
			(void)NVC(n, nvmlGpmSampleFree)(prev);
		atomic_store(&devs[i].gpm, 0);
	}
}
