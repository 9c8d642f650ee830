/*
 * DCGM-exporter's other default counters from NVML, for nvml_sample(): memory temperature and
 * NVLink bandwidth (field values), PCIe replays, encoder and decoder utilisation, remapped
 * rows. Every function is optional (an older driver lacks it: the pointer is NULL) and a GPU
 * without the feature answers NOT_SUPPORTED: either leaves the sample's value NaN /
 * UINT64_MAX, never a sentinel. Each call goes through NVC(), so that a hang in it is reported
 * under its own name.
 */

#include <pthread.h>
#include <stdint.h>

#include "nvml-int.h"
#include "util.h"

/*
 * A field's value as an unsigned 64-bit number; false when the field did not answer, or
 * answered a negative number or a type NVML did not have when this was written.
 */
static bool field_u64(const struct nvml_field_value *v, uint64_t *ret)
{
	if (v->ret != NVML_RET_SUCCESS)
		return false;
	switch (v->value_type) {
	case NVML_VALUE_UINT:
		*ret = v->value.ui;
		return true;
	case NVML_VALUE_ULONG:
		*ret = v->value.ul;
		return true;
	case NVML_VALUE_ULL:
		*ret = v->value.ull;
		return true;
	case NVML_VALUE_SLL:
		if (v->value.sll < 0)
			return false;
		*ret = (uint64_t)v->value.sll;
		return true;
	case NVML_VALUE_SINT:
		if (v->value.si < 0)
			return false;
		*ret = (uint64_t)v->value.si;
		return true;
	case NVML_VALUE_USHORT:
		*ret = v->value.us;
		return true;
	case NVML_VALUE_DOUBLE:
		if (!(v->value.d >= 0) || v->value.d >= 0x1p64)
			return false;
		*ret = (uint64_t)v->value.d;
		return true;
	}
	return false;
}

_Static_assert(2 * NVML_NVLINK_MAX_LINKS_COUNT <= 64,
	       "struct nvml_dev.nvlink_known has a bit each");

/*
 * NVLink bandwidth as DCGM counts DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: the raw throughput
 * counters (KiB, transmitted and received, NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX/RX) summed over
 * the GPU's links. The total is a Prometheus counter, and a fall reads as a reset (rate() would
 * count all of it again), so a counter that does not answer this time (its field's own error)
 * adds what it answered last; one that never answered adds nothing. No answer at all, or a sum
 * past 64 bits, leaves the total absent.
 */
static void sample_nvlink(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
			  unsigned links, struct gpu_sample *s, enum nvml_return *worst)
{
	struct nvml_field_value fv[2 * NVML_NVLINK_MAX_LINKS_COUNT] = { 0 };
	uint64_t sum = 0, v;
	bool any = false, wrapped = false;
	struct nvml_dev *d;
	enum nvml_return r;

	links = MIN(links, (unsigned)NVML_NVLINK_MAX_LINKS_COUNT);
	for (unsigned l = 0; l < links; l++) {
		size_t i = (size_t)l * 2;

		fv[i] = (struct nvml_field_value){ .field_id = NVML_FI_NVLINK_THRU_RAW_TX,
						   .scope_id = l };
		fv[i + 1] = (struct nvml_field_value){ .field_id = NVML_FI_NVLINK_THRU_RAW_RX,
						       .scope_id = l };
	}
	r = NVC(n, nvmlDeviceGetFieldValues)(h, (int)(2 * links), fv);
	if (r != NVML_RET_SUCCESS) {
		nvml_note_failure(r, worst);
		return;
	}
	/* Held for the arithmetic only: a sample left hung in the library may finish beside us. */
	(void)pthread_mutex_lock(&n->devs_mu);
	d = gpu < n->n_devs ? &n->devs[gpu] : NULL;
	for (unsigned i = 0; i < 2 * links; i++) {
		if (field_u64(&fv[i], &v)) {
			if (d) {
				d->nvlink_last[i] = v;
				d->nvlink_known |= 1ULL << i;
			}
		} else if (d && (d->nvlink_known & (1ULL << i))) {
			v = d->nvlink_last[i];
		} else {
			continue;
		}
		wrapped |= __builtin_add_overflow(sum, v, &sum);
		any = true;
	}
	(void)pthread_mutex_unlock(&n->devs_mu);
	if (any && !wrapped && sum != UINT64_MAX)
		s->nvlink_bw_total = sum;
}

/*
 * One nvmlDeviceGetFieldValues call for the memory temperature and the NVLink link count (a GPU
 * without NVLink answers NOT_SUPPORTED for it, or 0), a second one for the links' counters
 * only where there are links.
 */
static void sample_fields(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
			  struct gpu_sample *s, enum nvml_return *worst)
{
	struct nvml_field_value fv[2] = {
		{ .field_id = NVML_FI_MEMORY_TEMP },
		{ .field_id = NVML_FI_NVLINK_LINK_COUNT },
	};
	enum nvml_return r;
	uint64_t v;

	if (!n->f.nvmlDeviceGetFieldValues)
		return;
	r = NVC(n, nvmlDeviceGetFieldValues)(h, (int)ELEMENTSOF(fv), fv);
	if (r != NVML_RET_SUCCESS) {
		nvml_note_failure(r, worst);
		return;
	}
	if (field_u64(&fv[0], &v))
		s->mem_temp_c = (double)v;
	if (field_u64(&fv[1], &v) && v > 0)
		sample_nvlink(n, gpu, h, (unsigned)MIN(v, (uint64_t)UINT32_MAX), s, worst);
}

/* Video engines: percent over NVML's own sampling period (which is not kept). */
static void sample_video(struct nvml_backend *n, struct nvml_device *h, struct gpu_sample *s,
			 enum nvml_return *worst)
{
	unsigned u, period_us;
	enum nvml_return r;

	if (n->f.nvmlDeviceGetEncoderUtilization) {
		r = NVC(n, nvmlDeviceGetEncoderUtilization)(h, &u, &period_us);
		if (r == NVML_RET_SUCCESS)
			s->enc_util = u;
		nvml_note_failure(r, worst);
	}
	if (n->f.nvmlDeviceGetDecoderUtilization) {
		r = NVC(n, nvmlDeviceGetDecoderUtilization)(h, &u, &period_us);
		if (r == NVML_RET_SUCCESS)
			s->dec_util = u;
		nvml_note_failure(r, worst);
	}
}

void nvml_sample_counters(struct nvml_backend *n, unsigned gpu, struct nvml_device *h,
			  struct gpu_sample *s, enum nvml_return *worst)
{
	enum nvml_return r;
	unsigned v;

	sample_fields(n, gpu, h, s, worst);
	if (n->f.nvmlDeviceGetPcieReplayCounter) {
		r = NVC(n, nvmlDeviceGetPcieReplayCounter)(h, &v);
		if (r == NVML_RET_SUCCESS)
			s->pcie_replay = v;
		nvml_note_failure(r, worst);
	}
	sample_video(n, h, s, worst);
	if (n->f.nvmlDeviceGetRemappedRows) {
		unsigned corr, unc, pending, failure;

		/* Ampere and later datacenter GPUs; the others answer NOT_SUPPORTED. */
		r = NVC(n, nvmlDeviceGetRemappedRows)(h, &corr, &unc, &pending, &failure);
		if (r == NVML_RET_SUCCESS) {
			s->remap_corr = corr;
			s->remap_unc = unc;
			s->remap_failure = failure ? 1 : 0;
		}
		nvml_note_failure(r, worst);
	}
}
