/*
 * metrics-render.c: the exposition: GPU families with DCGM-exporter's names, units and labels,
 * the pod families, the health monitor's records, the process metrics, and the daemon's own
 * families through its collect callback (docs/metrics.md lists them all).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "file-read.h"
#include "http.h"
#include "metrics-int.h"
#include "prom.h"
#include "resource.h"
#include "version.h"

static double u64(uint64_t v)
{
	return v == UINT64_MAX ? NAN : (double)v;
}

/* Bytes as whole MiB (DCGM's FB_* unit); NaN for "not supported". */
static double mib(uint64_t v)
{
	return v == UINT64_MAX ? NAN : (double)(v >> 20);
}

/* What the driver says is free (NVML, or the Tegra backend's share of DRAM), else total - used. */
static double fb_free(const struct gpu_sample *s)
{
	if (s->mem_free != UINT64_MAX)
		return mib(s->mem_free);
	if (s->mem_total == UINT64_MAX || s->mem_used == UINT64_MAX || s->mem_used > s->mem_total)
		return NAN;
	return (double)((s->mem_total - s->mem_used) >> 20);
}

/*
 * -256 °C is Tegra's "no reading" (an offline thermal zone: tegrastats' and jtop's sentinel),
 * and no sensor reads lower: left out like NaN, should a backend ever pass one on.
 */
static double celsius(double c)
{
	return c <= -256 ? NAN : c;
}

#define TEMP(f)                                           \
	static double get_##f(const struct gpu_sample *s) \
	{                                                 \
		return celsius(s->f);                     \
	}
TEMP(temperature_c)
TEMP(temp_slowdown_c)
TEMP(temp_shutdown_c)
TEMP(mem_temp_c)
#undef TEMP

/* devfreq's bounds, in MHz in the sample, in hertz in the exposition (base units). */
#define HERTZ(f)                                          \
	static double get_##f(const struct gpu_sample *s) \
	{                                                 \
		return s->f * 1e6;                        \
	}
HERTZ(sm_clock_min_mhz)
HERTZ(sm_clock_max_mhz)
#undef HERTZ

#define FIELD(f)                                          \
	static double get_##f(const struct gpu_sample *s) \
	{                                                 \
		return s->f;                              \
	}
FIELD(power_w)
FIELD(power_limit_w)
FIELD(util_gpu)
FIELD(util_mem)
FIELD(sm_clock_mhz)
FIELD(mem_clock_mhz)
FIELD(enc_util)
FIELD(dec_util)
FIELD(remap_failure)
FIELD(prof_gr_active)
FIELD(prof_tensor_active)
FIELD(prof_dram_active)
FIELD(pcie_tx_bps)
FIELD(pcie_rx_bps)
#undef FIELD

/* Counters and bitmasks: UINT64_MAX is "not supported". */
#define U64(f)                                            \
	static double get_##f(const struct gpu_sample *s) \
	{                                                 \
		return u64(s->f);                         \
	}
U64(energy_mj)
U64(ecc_corrected)
U64(ecc_uncorrected)
U64(clock_reasons)
U64(pcie_replay)
U64(remap_corr)
U64(remap_unc)
U64(nvlink_bw_total)
#undef U64

#define MIB(f)                                            \
	static double get_##f(const struct gpu_sample *s) \
	{                                                 \
		return mib(s->f);                         \
	}
MIB(mem_used)
MIB(mem_total)
MIB(mem_reserved)
#undef MIB

static const struct gpu_family {
	const char *name;
	enum prom_type type;
	const char *help;
	double (*get)(const struct gpu_sample *s);
} gpu_families[] = {
	{ "DCGM_FI_DEV_GPU_TEMP", PROM_GAUGE, "GPU temperature (in C).", get_temperature_c },
	{ "DCGM_FI_DEV_SLOWDOWN_TEMP", PROM_GAUGE, "Slowdown temperature threshold (in C).",
	  get_temp_slowdown_c },
	{ "DCGM_FI_DEV_SHUTDOWN_TEMP", PROM_GAUGE, "Shutdown temperature threshold (in C).",
	  get_temp_shutdown_c },
	{ "DCGM_FI_DEV_POWER_USAGE", PROM_GAUGE, "Power draw (in W).", get_power_w },
	{ "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", PROM_GAUGE, "Enforced power limit (in W).",
	  get_power_limit_w },
	{ "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", PROM_COUNTER,
	  "Total energy consumption since the driver was last loaded (in mJ).", get_energy_mj },
	{ "DCGM_FI_DEV_FB_USED", PROM_GAUGE, "Framebuffer memory used (in MiB).", get_mem_used },
	{ "DCGM_FI_DEV_FB_FREE", PROM_GAUGE, "Framebuffer memory free (in MiB).", fb_free },
	{ "DCGM_FI_DEV_FB_TOTAL", PROM_GAUGE, "Framebuffer memory total (in MiB).", get_mem_total },
	{ "DCGM_FI_DEV_GPU_UTIL", PROM_GAUGE, "GPU utilization (in %).", get_util_gpu },
	{ "DCGM_FI_DEV_MEM_COPY_UTIL", PROM_GAUGE, "Memory utilization (in %).", get_util_mem },
	{ "DCGM_FI_DEV_SM_CLOCK", PROM_GAUGE, "SM clock frequency (in MHz).", get_sm_clock_mhz },
	{ "DCGM_FI_DEV_MEM_CLOCK", PROM_GAUGE, "Memory clock frequency (in MHz).",
	  get_mem_clock_mhz },
	/*
	 * Not DCGM_FI_DEV_MAX_SM_CLOCK: that is the chip's maximum (nvmlDeviceGetMaxClockInfo),
	 * these are the bounds the clock governor (devfreq, set by nvpmodel) keeps it in now.
	 */
	{ "edgegpu_gpu_clock_min_hertz", PROM_GAUGE,
	  "Lower bound the GPU clock governor (devfreq min_freq) keeps the clock at, in Hz.",
	  get_sm_clock_min_mhz },
	{ "edgegpu_gpu_clock_max_hertz", PROM_GAUGE,
	  "Upper bound the GPU clock governor (devfreq max_freq, the power mode's cap) keeps the "
	  "clock at, in Hz.",
	  get_sm_clock_max_mhz },
	{ "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", PROM_COUNTER,
	  "Total number of single-bit volatile ECC errors.", get_ecc_corrected },
	{ "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", PROM_COUNTER,
	  "Total number of double-bit volatile ECC errors.", get_ecc_uncorrected },
	{ "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", PROM_GAUGE,
	  "Current clock event (throttle) reasons, NVML's bitmask.", get_clock_reasons },
	/* The rest of DCGM-exporter 4.x's default counters, its HELP verbatim. */
	{ "DCGM_FI_DEV_MEMORY_TEMP", PROM_GAUGE, "Memory temperature (in C).", get_mem_temp_c },
	{ "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", PROM_COUNTER, "Total number of PCIe retries.",
	  get_pcie_replay },
	{ "DCGM_FI_DEV_ENC_UTIL", PROM_GAUGE, "Encoder utilization (in %).", get_enc_util },
	{ "DCGM_FI_DEV_DEC_UTIL", PROM_GAUGE, "Decoder utilization (in %).", get_dec_util },
	{ "DCGM_FI_DEV_FB_RESERVED", PROM_GAUGE, "Framebuffer memory reserved (in MiB).",
	  get_mem_reserved },
	{ "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", PROM_COUNTER,
	  "Number of remapped rows for uncorrectable errors", get_remap_unc },
	{ "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", PROM_COUNTER,
	  "Number of remapped rows for correctable errors", get_remap_corr },
	{ "DCGM_FI_DEV_ROW_REMAP_FAILURE", PROM_GAUGE, "Whether remapping of rows has failed",
	  get_remap_failure },
	{ "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", PROM_COUNTER,
	  "Total number of NVLink bandwidth counters for all lanes.", get_nvlink_bw_total },
	{ "DCGM_FI_PROF_GR_ENGINE_ACTIVE", PROM_GAUGE,
	  "Ratio of time the graphics engine is active.", get_prof_gr_active },
	{ "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", PROM_GAUGE,
	  "Ratio of cycles the tensor (HMMA) pipe is active.", get_prof_tensor_active },
	{ "DCGM_FI_PROF_DRAM_ACTIVE", PROM_GAUGE,
	  "Ratio of cycles the device memory interface is active sending or receiving data.",
	  get_prof_dram_active },
	{ "DCGM_FI_PROF_PCIE_TX_BYTES", PROM_GAUGE,
	  "The rate of data transmitted over the PCIe bus - including both protocol headers and "
	  "data payloads - in bytes per second.",
	  get_pcie_tx_bps },
	{ "DCGM_FI_PROF_PCIE_RX_BYTES", PROM_GAUGE,
	  "The rate of data received over the PCIe bus - including both protocol headers and data "
	  "payloads - in bytes per second.",
	  get_pcie_rx_bps },
};

/* NVML's clock-event bits by DCGM-exporter's clock_event names. */
static const struct {
	uint64_t bit;
	const char *name;
} clock_events[] = {
	{ 0x1, "gpu_idle" },	{ 0x2, "clocks_setting" },  { 0x4, "power_cap" },
	{ 0x8, "hw_slowdown" }, { 0x10, "sync_boost" },	    { 0x20, "sw_thermal" },
	{ 0x40, "hw_thermal" }, { 0x80, "hw_power_brake" }, { 0x100, "display_clocks" },
};

/* The cached sample of @uuid, or NULL when none (or it failed). */
static const struct gpu_sample *sample_of(const struct metrics *m, const char *uuid)
{
	for (unsigned i = 0; i < m->n_samples; i++)
		if (m->sample_r[i] == 0 && streq(m->sample_uuids[i], uuid))
			return &m->samples[i];
	return NULL;
}

/* pod, namespace, container and, once its cgroup named it, pod_uid: DCGM-exporter's set. */
static void holder_labels(const struct metrics *m, const char *ns, const char *pod,
			  const char *container, struct prom_labels *l)
{
	const char *uid = metrics_pods_uid(m, ns, pod);

	prom_labels_push(l, "pod", pod);
	prom_labels_push(l, "namespace", ns);
	prom_labels_push(l, "container", container);
	if (*uid)
		prom_labels_push(l, "pod_uid", uid);
}

/* gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION [+ holder]. */
static void gpu_labels(const struct metrics *m, const struct metrics_gpu *g, bool holder,
		       struct prom_labels *l)
{
	const struct metrics_hold *h = holder ? g->holder : NULL;

	*l = (struct prom_labels){ 0 };
	prom_labels_push(l, "gpu", g->index);
	prom_labels_push(l, "UUID", g->uuid);
	prom_labels_push(l, "pci_bus_id", g->pci);
	prom_labels_push(l, "device", g->device);
	prom_labels_push(l, "modelName", g->model);
	prom_labels_push(l, m->hostname_label, m->node_name);
	prom_labels_push(l, "DCGM_FI_DRIVER_VERSION", m->driver_version);
	if (h)
		holder_labels(m, h->namespace_, h->pod, h->container, l);
}

/* The families DCGM-exporter's --kubernetes-virtual-gpus splits per pod, from its processes. */
enum per_pod {
	PER_POD_NONE,
	PER_POD_SM_UTIL, /* DCGM_FI_DEV_GPU_UTIL: the processes' SM shares, in % */
	PER_POD_FB_USED, /* DCGM_FI_DEV_FB_USED: the processes' memory, in MiB */
};

static enum per_pod per_pod_of(const struct metrics *m, const char *family)
{
	if (!m->virtual_gpus)
		return PER_POD_NONE;
	if (streq(family, "DCGM_FI_DEV_GPU_UTIL"))
		return PER_POD_SM_UTIL;
	if (streq(family, "DCGM_FI_DEV_FB_USED"))
		return PER_POD_FB_USED;
	return PER_POD_NONE;
}

/*
 * What the container's processes on GPU @uuid add up to: 0 with none there (it holds the GPU
 * but runs nothing on it), NaN when one of them has no reading (the driver cannot say: the
 * series is left out rather than show a part as the whole).
 */
static double container_share(const struct metrics *m, const char *uuid,
			      const struct metrics_hold *h, enum per_pod what)
{
	double sum = 0;

	for (unsigned i = 0; i < m->n_procs; i++) {
		const struct metrics_proc *p = &m->procs[i];

		if (p->kind != METRICS_PROC_POD || !streq(p->uuid, uuid) ||
		    !streq(p->pod, h->pod) || !streq(p->namespace_, h->namespace_) ||
		    !streq(p->container, h->container))
			continue;
		if (what == PER_POD_SM_UTIL && isnan(p->sm_util))
			return NAN;
		if (what == PER_POD_FB_USED && p->mem == UINT64_MAX)
			return NAN;
		sum += what == PER_POD_SM_UTIL ? p->sm_util : (double)p->mem;
	}
	return what == PER_POD_FB_USED ? floor(sum / (1 << 20)) : MIN(sum, 100.0);
}

/*
 * DCGM-exporter's virtual-GPU series: one per container holding GPU @g (any share of it, one
 * series however many devices of it the container holds), with its pod's labels, valued from
 * its processes. Follows the GPU's own series in the same family.
 */
static void render_per_pod(const struct metrics *m, struct prom *p, const struct metrics_gpu *g,
			   enum per_pod what)
{
	const struct gpu_sample *s = sample_of(m, g->uuid);
	struct prom_labels l;

	/* no process list (a Tegra iGPU, NVML without it) or a cut one: no share is known */
	if (!s || s->n_procs < 0 || s->procs_truncated)
		return;
	for (unsigned i = 0; i < m->n_holds; i++) {
		const struct metrics_hold *h = &m->holds[i];
		bool seen = false;
		double v;

		if (!streq(h->uuid, g->uuid))
			continue;
		for (unsigned j = 0; j < i && !seen; j++)
			seen = streq(m->holds[j].uuid, h->uuid) && streq(m->holds[j].pod, h->pod) &&
			       streq(m->holds[j].namespace_, h->namespace_) &&
			       streq(m->holds[j].container, h->container);
		v = seen ? NAN : container_share(m, g->uuid, h, what);
		if (isnan(v))
			continue;
		gpu_labels(m, g, false, &l);
		holder_labels(m, h->namespace_, h->pod, h->container, &l);
		prom_sample(p, NULL, &l, v);
	}
}

/* gpu, UUID, Hostname: the short set of edgegpu's per-GPU and per-pod families. */
static void short_labels(const struct metrics *m, const char *index, const char *uuid,
			 struct prom_labels *l)
{
	*l = (struct prom_labels){ 0 };
	prom_labels_push(l, "gpu", index);
	prom_labels_push(l, "UUID", uuid);
	prom_labels_push(l, m->hostname_label, m->node_name);
}

static const char *index_of(const struct metrics *m, const char *uuid)
{
	for (unsigned i = 0; i < m->n_gpus; i++)
		if (streq(m->gpus[i].uuid, uuid))
			return m->gpus[i].index;
	return "";
}

static void render_gpus(struct metrics *m, struct prom *p)
{
	struct prom_labels l;

	for (size_t f = 0; f < ELEMENTSOF(gpu_families); f++) {
		enum per_pod split = per_pod_of(m, gpu_families[f].name);
		bool started = false;

		for (unsigned i = 0; i < m->n_gpus; i++) {
			const struct gpu_sample *s = sample_of(m, m->gpus[i].uuid);
			double v = s ? gpu_families[f].get(s) : NAN;

			if (isnan(v))
				continue; /* not supported: left out, never a sentinel */
			if (!started) {
				prom_family(p, gpu_families[f].name, gpu_families[f].type,
					    gpu_families[f].help);
				started = true;
			}
			/* split per pod: the GPU's own series is the whole GPU's, unlabelled */
			gpu_labels(m, &m->gpus[i], !split, &l);
			prom_sample(p, NULL, &l, v);
			if (split)
				render_per_pod(m, p, &m->gpus[i], split);
		}
	}
	if (!m->n_gpus)
		return;
	prom_family(p, "DCGM_FI_DEV_XID_ERRORS", PROM_GAUGE,
		    "Value of the last XID error encountered.");
	for (unsigned i = 0; i < m->n_gpus; i++) {
		const struct gpu_monitor_gpu_stats *st = m->mon ? gpu_monitor_gpu_stats(m->mon, i) :
								  NULL;
		uint64_t xid = st ? st->last_xid : 0;
		char code[24];

		/* DCGM-exporter's: the XID again as err_code, NVIDIA's name of it as err_msg */
		(void)snprintf(code, sizeof(code), "%llu", (unsigned long long)xid);
		gpu_labels(m, &m->gpus[i], true, &l);
		prom_labels_push(&l, "err_code", code);
		prom_labels_push(&l, "err_msg", metrics_xid_message(xid));
		prom_sample(p, NULL, &l, (double)xid);
	}
	for (unsigned i = 0, started = 0; i < m->n_gpus; i++) {
		const struct gpu_sample *s = sample_of(m, m->gpus[i].uuid);

		if (!s || s->clock_reasons == UINT64_MAX)
			continue;
		if (!started++)
			prom_family(p, "edgegpu_gpu_clock_event_active", PROM_GAUGE,
				    "1 while the GPU's clocks are reduced for this reason.");
		for (size_t c = 0; c < ELEMENTSOF(clock_events); c++) {
			gpu_labels(m, &m->gpus[i], true, &l);
			prom_labels_push(&l, "clock_event", clock_events[c].name);
			prom_sample(p, NULL, &l, (s->clock_reasons & clock_events[c].bit) ? 1 : 0);
		}
	}
}

/*
 * The sample that speaks for the board (Tegra): the first GPU's, in discovery order, with a
 * board power or a rail. Board series are the board's, not a GPU's: one set per node, whatever
 * the GPUs (a Thor with a discrete card has its rails once, on the iGPU's sample). NULL: none.
 */
static const struct gpu_sample *board_sample(const struct metrics *m)
{
	for (unsigned i = 0; i < m->n_gpus; i++) {
		const struct gpu_sample *s = sample_of(m, m->gpus[i].uuid);

		if (s && (isfinite(s->board_power_w) || s->n_rails > 0))
			return s;
	}
	return NULL;
}

/*
 * Board power, its rails and what the board is: labelled Hostname only (and rail), so a
 * dashboard joins them to the GPU series by Hostname. A rail without a name, without a finite
 * reading, or named twice (the second would be a duplicate series) is left out.
 */
static void render_board(struct metrics *m, struct prom *p)
{
	const struct gpu_sample *s = board_sample(m);
	struct prom_labels l;
	char names[GPU_SAMPLE_RAILS_MAX][GPU_RAIL_NAME_MAX];
	unsigned n = 0;

	if (m->board.tegra) {
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, m->hostname_label, m->node_name);
		prom_labels_push(&l, "model", m->board.model);
		prom_labels_push(&l, "soc", m->board.soc);
		prom_labels_push(&l, "l4t", m->board.l4t);
		prom_labels_push(&l, "jetpack", m->board.jetpack);
		prom_labels_push(&l, "power_mode", m->board.power_mode);
		prom_family(p, "edgegpu_board_info", PROM_GAUGE,
			    "The Tegra board as discovered (device-tree model, SoC, L4T, JetPack, "
			    "nvpmodel power mode), as labels.");
		prom_sample(p, NULL, &l, 1);
	}
	if (!s)
		return;
	l = (struct prom_labels){ 0 };
	prom_labels_push(&l, m->hostname_label, m->node_name);
	if (isfinite(s->board_power_w)) {
		prom_family(
			p, "edgegpu_board_power_watts", PROM_GAUGE,
			"Power into the board: its input rail, or the sum of its rails where it "
			"has none (never an input rail plus its sub-rails), in W.");
		prom_sample(p, NULL, &l, s->board_power_w);
	}
	for (unsigned i = 0; i < MIN(s->n_rails, (unsigned)GPU_SAMPLE_RAILS_MAX); i++) {
		const struct gpu_rail *r = &s->rails[i];
		bool seen = false;

		/* the name may fill its array without a NUL */
		(void)snprintf(names[n], sizeof(names[n]), "%.*s", (int)sizeof(r->name) - 1,
			       r->name);
		for (unsigned j = 0; j < n && !seen; j++)
			seen = streq(names[j], names[n]);
		if (!names[n][0] || seen || !isfinite(r->watts))
			continue;
		if (n == 0)
			prom_family(
				p, "edgegpu_board_rail_power_watts", PROM_GAUGE,
				"Power on one of the board's monitored rails (INA3221 channel), "
				"in W; sub-rails of the input rail are part of it, not extra.");
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, m->hostname_label, m->node_name);
		prom_labels_push(&l, "rail", names[n]);
		prom_sample(p, NULL, &l, r->watts);
		n++;
	}
}

static void render_health(struct metrics *m, struct prom *p)
{
	struct prom_labels l;
	char code[24];

	if (!m->n_gpus || !m->mon)
		return;
	prom_family(p, "edgegpu_gpu_healthy", PROM_GAUGE, "1 when the GPU is healthy, 0 when not.");
	for (unsigned i = 0; i < m->n_gpus; i++) {
		gpu_labels(m, &m->gpus[i], false, &l);
		prom_sample(p, NULL, &l,
			    gpu_monitor_health_by_uuid(m->mon, m->gpus[i].uuid) == GPU_HEALTHY);
	}
	prom_family(p, "edgegpu_gpu_health_transitions_total", PROM_COUNTER,
		    "GPU health changes, by the state entered and the reason.");
	for (unsigned i = 0; i < m->n_gpus; i++) {
		const struct gpu_monitor_gpu_stats *st = gpu_monitor_gpu_stats(m->mon, i);

		for (int to = 0; st && to < 2; to++)
			for (int r = 0; r < GPU_REASON_COUNT; r++) {
				if (!st->transitions[to][r])
					continue;
				short_labels(m, m->gpus[i].index, m->gpus[i].uuid, &l);
				prom_labels_push(&l, "to", to ? "healthy" : "unhealthy");
				prom_labels_push(&l, "reason", gpu_reason_name(r));
				prom_sample(p, NULL, &l, (double)st->transitions[to][r]);
			}
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0)
			prom_family(p, "edgegpu_xid_errors_total", PROM_COUNTER,
				    "Critical XID errors, by code.");
		else
			prom_family(p, "edgegpu_xid_last_timestamp_seconds", PROM_GAUGE,
				    "When the XID was last seen (Unix time).");
		for (unsigned i = 0; i < m->n_gpus; i++) {
			const struct gpu_monitor_gpu_stats *st = gpu_monitor_gpu_stats(m->mon, i);

			for (unsigned x = 0; st && x < st->n_xids; x++) {
				(void)snprintf(code, sizeof(code), "%llu",
					       (unsigned long long)st->xids[x].xid);
				short_labels(m, m->gpus[i].index, m->gpus[i].uuid, &l);
				prom_labels_push(&l, "xid", code);
				prom_sample(p, NULL, &l,
					    pass == 0 ?
						    (double)st->xids[x].count :
						    (double)st->xids[x].last_wall / USEC_PER_SEC);
			}
		}
	}
}

static void pod_labels(const struct metrics *m, const char *uuid, const char *ns, const char *pod,
		       const char *container, struct prom_labels *l)
{
	short_labels(m, index_of(m, uuid), uuid, l);
	prom_labels_push(l, "namespace", ns);
	prom_labels_push(l, "pod", pod);
	prom_labels_push(l, "container", container);
}

/* Two processes of one container on one GPU (both mapped to a pod). */
static bool same_container(const struct metrics_proc *a, const struct metrics_proc *b)
{
	return a->kind == METRICS_PROC_POD && b->kind == METRICS_PROC_POD &&
	       streq(a->uuid, b->uuid) && streq(a->pod, b->pod) &&
	       streq(a->namespace_, b->namespace_) && streq(a->container, b->container);
}

static const char *const proc_reasons[] = {
	[METRICS_PROC_HOST] = "host",
	[METRICS_PROC_UNKNOWN_POD] = "unknown-pod",
	[METRICS_PROC_NO_PROC] = "no-proc",
	[METRICS_PROC_SKIPPED] = "skipped",
};

/* gpumem units per GPU: allocated (pod-resources) and free, and the unit's size. */
static void render_units(struct metrics *m, struct prom *p)
{
	const struct resource *res[RESOURCE_NODE_MAX];
	unsigned n = m->src.resources(res, ELEMENTSOF(res), m->userdata);
	struct prom_labels l;
	bool started = false;

	for (unsigned i = 0; i < n; i++) {
		const struct resource *r = res[i];

		if (r->kind != RESOURCE_GPUMEM)
			continue;
		if (!started) {
			prom_family(p, "edgegpu_gpumem_unit_bytes", PROM_GAUGE,
				    "Size of one unit of the gpumem resource.");
			started = true;
		}
		l = (struct prom_labels){ 0 };
		prom_labels_push(&l, "resource", r->name);
		prom_sample(p, NULL, &l, (double)(r->unit_mib << 20));
	}
	if (!started || !m->pods_valid)
		return;
	prom_family(p, "edgegpu_gpumem_units", PROM_GAUGE,
		    "gpumem units per GPU, allocated to pods or free.");
	for (unsigned i = 0; i < n; i++) {
		const struct resource *r = res[i];

		for (unsigned s = 0; r->kind == RESOURCE_GPUMEM && s < r->n_gpus; s++) {
			uint64_t used = 0;

			for (unsigned h = 0; h < m->n_holds; h++)
				if (m->holds[h].gpumem && streq(m->holds[h].uuid, r->uuids[s]) &&
				    streq(m->holds[h].resource, r->name))
					used += m->holds[h].count;
			used = MIN(used, (uint64_t)r->gpus[s].count);
			for (int st = 0; st < 2; st++) {
				short_labels(m, index_of(m, r->uuids[s]), r->uuids[s], &l);
				prom_labels_push(&l, "resource", r->name);
				prom_labels_push(&l, "state", st ? "free" : "allocated");
				prom_sample(p, NULL, &l,
					    st ? (double)(r->gpus[s].count - used) : (double)used);
			}
		}
	}
}

static void render_pods(struct metrics *m, struct prom *p)
{
	struct prom_labels l;
	char pid[16];

	render_units(m, p);
	if (m->n_holds) {
		prom_family(p, "edgegpu_pod_gpu_allocation", PROM_GAUGE,
			    "Devices of the resource the container holds on this GPU.");
		for (unsigned i = 0; i < m->n_holds; i++) {
			const struct metrics_hold *h = &m->holds[i];

			pod_labels(m, h->uuid, h->namespace_, h->pod, h->container, &l);
			prom_labels_push(&l, "resource", h->resource);
			prom_sample(p, NULL, &l, h->count);
		}
		prom_family(p, "edgegpu_pod_gpumem_limit_bytes", PROM_GAUGE,
			    "The gpumem slice granted to the container on this GPU.");
		for (unsigned i = 0; i < m->n_holds; i++) {
			const struct metrics_hold *h = &m->holds[i];

			if (!h->gpumem)
				continue;
			pod_labels(m, h->uuid, h->namespace_, h->pod, h->container, &l);
			prom_labels_push(&l, "resource", h->resource);
			prom_sample(p, NULL, &l, (double)h->count * (double)h->unit_bytes);
		}
	}
	if (!m->n_procs)
		return;
	/* Per container: the sum of its processes on the GPU, at the first of them. */
	prom_family(p, "edgegpu_pod_gpu_memory_used_bytes", PROM_GAUGE,
		    "GPU memory used by the container's processes.");
	for (unsigned i = 0; i < m->n_procs; i++) {
		const struct metrics_proc *a = &m->procs[i];
		bool seen = false;
		double sum = 0;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = same_container(a, &m->procs[j]);
		if (a->kind != METRICS_PROC_POD || seen)
			continue;
		for (unsigned j = i; j < m->n_procs; j++)
			if (same_container(a, &m->procs[j]) && m->procs[j].mem != UINT64_MAX)
				sum += (double)m->procs[j].mem;
		pod_labels(m, a->uuid, a->namespace_, a->pod, a->container, &l);
		prom_sample(p, NULL, &l, sum);
	}
	prom_family(p, "edgegpu_unattributed_gpu_memory_used_bytes", PROM_GAUGE,
		    "GPU memory used by a process that maps to no pod, and why.");
	for (unsigned i = 0; i < m->n_procs; i++) {
		const struct metrics_proc *a = &m->procs[i];

		if (a->kind == METRICS_PROC_POD)
			continue;
		(void)snprintf(pid, sizeof(pid), "%u", a->pid);
		short_labels(m, index_of(m, a->uuid), a->uuid, &l);
		prom_labels_push(&l, "pid", pid);
		prom_labels_push(&l, "reason", proc_reasons[a->kind]);
		prom_sample(p, NULL, &l, a->mem == UINT64_MAX ? NAN : (double)a->mem);
	}
}

/* --- the process itself --- */

/* /proc/self/stat is one line of ~300 bytes; what follows the fields read is not needed. */
#define PROC_SELF_STAT_MAX 1023
/* /proc/stat has a line per CPU and one of interrupt counts (tens of KiB) before btime. */
#define PROC_STAT_MAX ((size_t)1024 * 1024)

static void render_process(struct metrics *m, struct prom *p)
{
	char *text = NULL, *s;
	unsigned long long utime = 0, stime = 0, vsize = 0, start = 0, rss = 0;
	long tck = sysconf(_SC_CLK_TCK), pg = sysconf(_SC_PAGESIZE);
	double boot = 0;
	struct rlimit rl;
	DIR *d;
	int fds = 0;

	if (read_file_at(AT_FDCWD, "/proc/self/stat", READ_PREFIX, PROC_SELF_STAT_MAX, &text, NULL,
			 NULL) >= 0) {
		/* after "pid (comm) ": field 3 (state) is token 0; utime is field 14, stime 15,
		   starttime 22, vsize 23, rss 24 */
		s = strrchr(text, ')');
		for (unsigned tok = 0; s && (s = strchr(s, ' ')); tok++) {
			unsigned long long v = strtoull(++s, NULL, 10);

			if (tok == 11)
				utime = v;
			else if (tok == 12)
				stime = v;
			else if (tok == 19)
				start = v;
			else if (tok == 20)
				vsize = v;
			else if (tok == 21)
				rss = v;
		}
		text = mfree(text);
	}
	if (!m->boot_time && read_file_at(AT_FDCWD, "/proc/stat", READ_PREFIX, PROC_STAT_MAX, &text,
					  NULL, NULL) >= 0) {
		for (s = text; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL)
			if (startswith(s, "btime ")) {
				m->boot_time = strtod(s + 6, NULL);
				break;
			}
		text = mfree(text);
	}
	boot = m->boot_time;
	d = opendir("/proc/self/fd");
	if (d) {
		for (const struct dirent *e = readdir(d); e; e = readdir(d))
			fds += e->d_name[0] != '.';
		(void)closedir(d);
		fds--; /* the directory's own descriptor */
	}
	if (tck <= 0)
		tck = 100;
	prom_family(p, "process_cpu_seconds_total", PROM_COUNTER,
		    "Total user and system CPU time spent in seconds.");
	prom_sample(p, NULL, NULL, (double)(utime + stime) / (double)tck);
	prom_family(p, "process_resident_memory_bytes", PROM_GAUGE,
		    "Resident memory size in bytes.");
	prom_sample(p, NULL, NULL, (double)rss * (double)pg);
	prom_family(p, "process_virtual_memory_bytes", PROM_GAUGE, "Virtual memory size in bytes.");
	prom_sample(p, NULL, NULL, (double)vsize);
	prom_family(p, "process_start_time_seconds", PROM_GAUGE,
		    "Start time of the process since unix epoch in seconds.");
	prom_sample(p, NULL, NULL,
		    boot > 0 ? boot + (double)start / (double)tck :
			       (double)m->started_wall / USEC_PER_SEC);
	prom_family(p, "process_open_fds", PROM_GAUGE, "Number of open file descriptors.");
	prom_sample(p, NULL, NULL, fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		prom_family(p, "process_max_fds", PROM_GAUGE,
			    "Maximum number of open file descriptors.");
		prom_sample(p, NULL, NULL,
			    rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
	}
}

/* The HTTP server's own: what a flood or a slow client made it do (docs/failures.md). */
static void render_http(struct metrics *m, struct prom *p)
{
	struct http_stats st;

	http_server_get_stats(m->http, &st);
	prom_family(p, "edgegpu_http_connections_evicted_total", PROM_COUNTER,
		    "HTTP connections the server closed: full (room made for a new one), "
		    "request_deadline, write_deadline (connectionTimeout).");
	for (unsigned i = 0; i < HTTP_EVICT_COUNT; i++) {
		struct prom_labels l = { 0 };

		prom_labels_push(&l, "reason", http_evict_reason(i));
		prom_sample(p, NULL, &l, (double)st.evicted[i]);
	}
	prom_family(p, "edgegpu_http_connections_refused_total", PROM_COUNTER,
		    "HTTP connections closed at once: every slot busy answering, or no memory.");
	prom_sample(p, NULL, NULL, (double)st.refused);
	prom_family(p, "edgegpu_http_connections_open", PROM_GAUGE,
		    "HTTP connections open, deferred answers included.");
	prom_sample(p, NULL, NULL, st.open);
}

static void render_self(struct metrics *m, struct prom *p)
{
	struct prom_labels l = { 0 };
	usec_t now = now_usec();
	bool ready;

	prom_labels_push(&l, "version", EDGEGPU_VERSION);
	prom_labels_push(&l, "revision", EDGEGPU_REVISION);
	prom_labels_push(&l, "build_date", EDGEGPU_BUILD_DATE);
	prom_labels_push(&l, "driver_version", m->driver_version);
	prom_labels_push(&l, "nvml_version", m->nvml_version);
	prom_labels_push(&l, "cuda_driver_version", m->cuda_version);
	prom_family(
		p, "edgegpu_build_info", PROM_GAUGE,
		"edgegpu's version, git revision and build date, and the driver it found, as labels.");
	prom_sample(p, NULL, &l, 1);
	m->why.len = 0;
	ready = m->src.ready(&m->why, m->userdata);
	prom_family(
		p, "edgegpu_ready", PROM_GAUGE,
		"1 when /readyz answers 200: every resource served and registered, or nothing to serve (edgegpu_gpu_discovery_state says why).");
	prom_sample(p, NULL, NULL, ready);
	if (m->mon) {
		struct gpu_monitor_stats st;

		gpu_monitor_get_stats(m->mon, &st);
		prom_family(p, "edgegpu_nvml_hung_calls_total", PROM_COUNTER,
			    "NVML calls that ran past the call timeout.");
		prom_sample(p, NULL, NULL, (double)st.hung_calls);
		prom_family(p, "edgegpu_nvml_call_hung", PROM_GAUGE,
			    "1 while an NVML call is hung.");
		prom_sample(p, NULL, NULL, gpu_monitor_hung_calls(m->mon) > 0);
		prom_family(
			p, "edgegpu_nvml_hung_threads", PROM_GAUGE,
			"Threads inside NVML calls that ran past the call timeout (at most 4).");
		prom_sample(p, NULL, NULL, gpu_monitor_hung_calls(m->mon));
		prom_family(
			p, "edgegpu_nvml_worker_limit_total", PROM_COUNTER,
			"Hung NVML calls no new worker thread could take the place of: every GPU "
			"was Unhealthy until a call returned.");
		prom_sample(p, NULL, NULL, (double)st.worker_limit);
		prom_family(
			p, "edgegpu_gpu_probes_deferred_total", PROM_COUNTER,
			"GPU health probe rounds that waited: a hung NVML call held the worker.");
		prom_sample(p, NULL, NULL, (double)st.probes_deferred);
		prom_family(p, "edgegpu_gpu_threads", PROM_GAUGE,
			    "GPU monitor threads: the worker, the event thread, and those left in "
			    "hung NVML calls.");
		prom_sample(p, NULL, NULL, gpu_monitor_live_threads());
	}
	if (m->sampled_at) {
		prom_family(p, "edgegpu_metrics_sample_age_seconds", PROM_GAUGE,
			    "Age of the GPU samples served.");
		prom_sample(p, NULL, NULL, (double)(now - m->sampled_at) / USEC_PER_SEC);
	}
	prom_family(p, "edgegpu_metrics_samples_total", PROM_COUNTER,
		    "GPU telemetry samples taken (none while nobody scrapes).");
	prom_sample(p, NULL, NULL, (double)m->samples_taken);
	prom_family(p, "edgegpu_metrics_scrapes_throttled_total", PROM_COUNTER,
		    "Scrapes answered 429: more than maxConnections a second.");
	prom_sample(p, NULL, NULL, (double)m->throttled);
	if (m->http)
		render_http(m, p);
	metrics_attrib_render(m, p);
}

int metrics_render(struct metrics *m, struct buf *out)
{
	struct prom p;

	out->len = 0;
	for (unsigned i = 0; i < m->n_gpus; i++)
		m->gpus[i].holder = metrics_pods_sole_holder(m, m->gpus[i].uuid);
	prom_init(&p, out);
	render_gpus(m, &p);
	render_board(m, &p);
	render_health(m, &p);
	render_pods(m, &p);
	render_self(m, &p);
	if (m->src.collect)
		m->src.collect(&p, m->userdata);
	render_process(m, &p);
	return prom_finish(&p);
}
