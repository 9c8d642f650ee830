/*
 * The metrics collector without its HTTP server: pod attribution from a pod-resources answer
 * and from GPU processes' cgroups, and the exposition rendered from them (labels, the holder of
 * a whole GPU, sums per container, unattributed processes, families written once each); and a
 * Tegra board's: an integrated GPU's sample under DCGM's names, the clock bounds, board power
 * and rails (hostile names), absent readings and -256 left out, the text format checked.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "loop.h"
#include "metrics-int.h"
#include "podresources.pb-c.h"
#include "resource.h"
#include "unit-fs.h"
#include "unit.h"
#include "version.h"

#define UUID0 "GPU-00000000-1111-2222-3333-444444444440"
#define UUID1 "GPU-00000001-1111-2222-3333-444444444441"
#define MIB   ((uint64_t)1 << 20)

struct env {
	char dir[64];
	struct gpu_device devs[2];
	struct gpu_info info;
	struct resource *res[2];
	struct metrics m;
	struct buf out;
	struct loop *loop;
};

static unsigned src_resources(const struct resource **ret, unsigned max, void *userdata)
{
	struct env *e = userdata;

	ret[0] = e->res[0];
	ret[1] = e->res[1];
	return 2;
}

static bool src_ready(struct buf *why, void *userdata)
{
	return true;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	(void)fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
	static const unsigned g0[] = { 0 }, g1[] = { 1 };
	const struct resource_spec mem = { .name = "nvidia.com/gpumem",
					   .kind = RESOURCE_GPUMEM,
					   .gpus = g0,
					   .n_gpus = 1,
					   .unit_mib = 256,
					   .reserve_mib = 512 };
	const struct resource_spec whole = {
		.name = "nvidia.com/gpu", .kind = RESOURCE_GPU, .gpus = g1, .n_gpus = 1
	};
	struct env *e = calloc(1, sizeof(*e));
	char path[256], *err = NULL;

	assert_non_null(e);
	unit_tmpdir("test-metrics", e->dir, sizeof(e->dir));
	for (unsigned i = 0; i < 2; i++) {
		struct gpu_device *d = &e->devs[i];

		d->index = i;
		d->minor = i;
		d->mem_total = 16384 * MIB;
		(void)snprintf(d->uuid, sizeof(d->uuid), "%s", i ? UUID1 : UUID0);
		(void)snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "00000000:0%u:00.0", i + 1);
		(void)snprintf(d->name, sizeof(d->name), "%s",
			       i ? "NVIDIA \"L4\"\\x\n" : "NVIDIA A2");
	}
	e->info = (struct gpu_info){ .devices = e->devs, .n_devices = 2 };
	(void)snprintf(e->info.driver_version, sizeof(e->info.driver_version), "550.54.15");
	e->info.cuda_driver_version = 12040;
	assert_int_equal(resource_new(&mem, &e->info, &e->res[0], &err), 0);
	assert_int_equal(resource_new(&whole, &e->info, &e->res[1], &err), 0);
	assert_int_equal(loop_new(&e->loop), 0);
	e->m.loop = e->loop; /* the attribution's thread hands its result back through it */
	e->m.src = (struct metrics_source){ .ready = src_ready, .resources = src_resources };
	e->m.userdata = e;
	e->m.hostname_label = strdup("Hostname");
	e->m.node_name = strdup("edge-1");
	(void)snprintf(path, sizeof(path), "%s/proc", e->dir);
	e->m.host_proc = strdup(path);
	(void)snprintf(path, sizeof(path), "%s/log", e->dir);
	e->m.pod_log_dir = strdup(path);
	assert_true(e->m.hostname_label && e->m.node_name && e->m.host_proc && e->m.pod_log_dir);
	assert_int_equal(metrics_pods_set_log_dir(&e->m), 0);
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	metrics_pods_release(&e->m);
	metrics_procs_release(&e->m);
	free(e->m.samples);
	free(e->m.sample_r);
	free(e->m.sample_uuids);
	free(e->m.gpus);
	free(e->m.hostname_label);
	free(e->m.node_name);
	free(e->m.host_proc);
	free(e->m.pod_log_dir);
	resource_free(e->res[0]);
	resource_free(e->res[1]);
	buf_release(&e->out);
	loop_free(e->loop);
	unit_rm_tree(e->dir);
	free(e);
	return 0;
}

/* One container holding @n IDs of @res (device indices @first...). */
struct holder {
	const char *pod, *container;
	const struct resource *res;
	unsigned first, n;
};

static uint8_t *encode(const struct holder *h, size_t n, size_t *ret_len)
{
	V1__ListPodResourcesResponse m = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
	V1__PodResources pods[8], *pp[8];
	V1__ContainerResources crs[8], *crp[8];
	V1__ContainerDevices cds[8], *cdp[8];
	char idbuf[8][16][128], *ids[8][16];
	uint8_t *out;

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		assert_true(h[i].n <= 16);
		for (unsigned k = 0; k < h[i].n; k++) {
			(void)resource_device_id(h[i].res, h[i].first + k, idbuf[i][k]);
			ids[i][k] = idbuf[i][k];
		}
		v1__container_devices__init(&cds[i]);
		cds[i].resource_name = h[i].res->name;
		cds[i].device_ids = ids[i];
		cds[i].n_device_ids = h[i].n;
		cdp[i] = &cds[i];
		v1__container_resources__init(&crs[i]);
		crs[i].name = (char *)h[i].container;
		crs[i].devices = &cdp[i];
		crs[i].n_devices = 1;
		crp[i] = &crs[i];
		v1__pod_resources__init(&pods[i]);
		pods[i].name = (char *)h[i].pod;
		pods[i].namespace_ = (char *)"default";
		pods[i].containers = &crp[i];
		pods[i].n_containers = 1;
		pp[i] = &pods[i];
	}
	m.pod_resources = pp;
	m.n_pod_resources = n;
	*ret_len = v1__list_pod_resources_response__get_packed_size(&m);
	out = malloc(*ret_len + 1);
	assert_non_null(out);
	v1__list_pod_resources_response__pack(&m, out);
	return out;
}

/* The value of the one sample whose line starts with @prefix; fails when not exactly one. */
static double value(const struct env *e, const char *prefix)
{
	const char *p = (const char *)e->out.data, *hit = NULL;
	size_t len = strlen(prefix);

	while (p && *p) {
		if (strncmp(p, prefix, len) == 0) {
			if (hit)
				fail_msg("two samples start with %s", prefix);
			hit = p;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	if (!hit) {
		fail_msg("no sample starts with %s in:\n%.*s", prefix, (int)e->out.len,
			 (const char *)e->out.data);
		return NAN;
	}
	{
		char line[1024];
		const char *eol = strchr(hit, '\n');
		size_t n = eol ? (size_t)(eol - hit) : strlen(hit);

		assert_true(n < sizeof(line));
		memcpy(line, hit, n);
		line[n] = 0;
		return strtod(strrchr(line, ' ') + 1, NULL);
	}
}

static unsigned count_lines(const struct env *e, const char *needle)
{
	unsigned n = 0;

	for (const char *p = (const char *)e->out.data; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void render(struct env *e)
{
	assert_int_equal(buf_append(&e->out, "", 0), 0);
	assert_int_equal(metrics_render(&e->m, &e->out), 0);
	assert_int_equal(buf_append(&e->out, "", 1), 0);
	e->out.len--;
}

static void test_pods_and_processes(void **state)
{
	struct env *e = *state;
	const struct holder h[] = {
		{ "infer-a", "c1", e->res[0], 0, 4 },
		{ "infer-b", "c1", e->res[0], 4, 2 },
		{ "train", "main", e->res[1], 0, 1 },
	};
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };
	char path[512], cid[65];
	size_t len;
	uint8_t *resp = encode(h, 3, &len);

	metrics_pods_store(&e->m, resp, len);
	free(resp);
	assert_true(e->m.pods_valid);
	assert_int_equal(e->m.n_holds, 3);
	assert_null(metrics_pods_sole_holder(&e->m, UUID0)); /* shared: gpumem */
	assert_string_equal(metrics_pods_sole_holder(&e->m, UUID1)->pod, "train");

	/* processes: infer-a (cgroup v2, containerd), a host one, one not in our /proc */
	(void)snprintf(path, sizeof(path), "%s/proc", e->dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/proc/1001", e->dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/proc/1003", e->dir);
	(void)mkdir(path, 0755);
	memset(cid, 'a', 64);
	cid[64] = 0;
	{
		char cg[512], p1[256];

		(void)snprintf(cg, sizeof(cg),
			       "0::/kubepods.slice/kubepods-burstable.slice/"
			       "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/"
			       "cri-containerd-%s.scope\n",
			       cid);
		(void)snprintf(p1, sizeof(p1), "%s/proc/1001", e->dir);
		write_file(p1, "cgroup", cg);
		(void)snprintf(p1, sizeof(p1), "%s/proc/1003", e->dir);
		write_file(p1, "cgroup", "0::/system.slice/ollama.service\n");
		(void)snprintf(p1, sizeof(p1), "%s/log", e->dir);
		(void)mkdir(p1, 0755);
		(void)snprintf(p1, sizeof(p1), "%s/log/containers", e->dir);
		(void)mkdir(p1, 0755);
		(void)snprintf(path, sizeof(path), "%s/log/containers/infer-a_default_c1-%s.log",
			       e->dir, cid);
		assert_int_equal(symlink("/nowhere", path), 0);
	}
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].temperature_c = 41;
	s[1].temperature_c = 38;
	s[0].mem_total = 16384 * MIB;
	s[0].mem_used = 2048 * MIB;
	s[0].n_procs = 4;
	s[0].procs[0] = (struct gpu_process){ 1001, 1024 * MIB };
	s[0].procs[1] = (struct gpu_process){ 1001, 512 * MIB }; /* a second context, summed */
	s[0].procs[2] = (struct gpu_process){ 1003, 100 * MIB };
	s[0].procs[3] = (struct gpu_process){ 4242, 8 * MIB };
	metrics_cache_store(&e->m, s, r, 2);
	/* Attributed on a thread of its own, never on the loop: the result comes back to it. */
	assert_true(metrics_attrib_pending(&e->m));
	while (metrics_attrib_pending(&e->m))
		assert_int_equal(loop_run_once(e->loop, USEC_INFINITY), 0);
	assert_int_equal(e->m.n_procs, 4);
	render(e);

	/* the whole GPU held by "train" carries its pod; the shared one none */
	assert_true(value(e, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"") == 38);
	assert_non_null(strstr((const char *)e->out.data, "pod=\"train\",namespace=\"default\","
							  "container=\"main\"}"));
	assert_null(strstr((const char *)e->out.data,
			   "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"" UUID0
			   "\",pci_bus_id=\"00000000:01:00.0\",device=\"nvidia0\","
			   "modelName=\"NVIDIA A2\",Hostname=\"edge-1\",DCGM_FI_DRIVER_VERSION="
			   "\"550.54.15\",pod="));
	assert_true(value(e, "DCGM_FI_DEV_FB_USED{gpu=\"0\"") == 2048);
	assert_true(value(e, "DCGM_FI_DEV_FB_FREE{gpu=\"0\"") == 14336);
	/* hostile model name escaped */
	assert_non_null(
		strstr((const char *)e->out.data, "modelName=\"NVIDIA \\\"L4\\\"\\\\x\\n\""));
	assert_true(value(e, "edgegpu_pod_gpumem_limit_bytes{gpu=\"0\",UUID=\"" UUID0
			     "\",Hostname=\"edge-1\",namespace=\"default\",pod=\"infer-a\"") ==
		    MIB * 4 * 256);
	assert_true(value(e, "edgegpu_pod_gpumem_limit_bytes{gpu=\"0\",UUID=\"" UUID0
			     "\",Hostname=\"edge-1\",namespace=\"default\",pod=\"infer-b\"") ==
		    MIB * 2 * 256);
	assert_true(value(e, "edgegpu_pod_gpu_memory_used_bytes{gpu=\"0\",UUID=\"" UUID0
			     "\",Hostname=\"edge-1\",namespace=\"default\",pod=\"infer-a\"") ==
		    1536 * MIB);
	assert_true(value(e, "edgegpu_pod_gpu_allocation{gpu=\"1\"") == 1);
	assert_non_null(
		strstr((const char *)e->out.data, "pid=\"1003\",reason=\"host\"} 104857600"));
	assert_non_null(
		strstr((const char *)e->out.data, "pid=\"4242\",reason=\"no-proc\"} 8388608"));
	assert_true(
		value(e,
		      "edgegpu_gpumem_units{gpu=\"0\",UUID=\"" UUID0
		      "\",Hostname=\"edge-1\",resource=\"nvidia.com/gpumem\",state=\"allocated\"") ==
		6);
	/* every family once, its samples together */
	assert_int_equal(count_lines(e, "# TYPE DCGM_FI_DEV_GPU_TEMP "), 1);
	assert_int_equal(count_lines(e, "# TYPE edgegpu_pod_gpu_memory_used_bytes "), 1);
	assert_int_equal(count_lines(e, "# TYPE process_resident_memory_bytes "), 1);
	assert_true(value(e, "edgegpu_build_info{") == 1);
	/* the binary's version, git revision and build date (scripts/version), as labels */
	assert_non_null(strstr((const char *)e->out.data,
			       "edgegpu_build_info{version=\"" EDGEGPU_VERSION
			       "\",revision=\"" EDGEGPU_REVISION
			       "\",build_date=\"" EDGEGPU_BUILD_DATE "\","));
	assert_true(value(e, "edgegpu_ready ") == 1);
}

/* What a GPU lacks is left out, never a sentinel; a failed sample leaves the GPU out. */
static void test_unsupported_left_out(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, -ENODEV };

	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].power_w = 20;
	s[1].power_w = 30;
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	assert_true(value(e, "DCGM_FI_DEV_POWER_USAGE{") == 20);
	assert_null(strstr((const char *)e->out.data, "DCGM_FI_DEV_GPU_TEMP"));
	assert_null(strstr((const char *)e->out.data, "DCGM_FI_DEV_FB_USED"));
	assert_null(strstr((const char *)e->out.data, "edgegpu_gpu_clock_event_active"));
	assert_null(strstr((const char *)e->out.data, "edgegpu_pod_"));
}

/* The clock-event bitmask as one 0/1 series per reason. */
static void test_clock_events(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].clock_reasons = 0x40 | 0x4;
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	assert_int_equal(count_lines(e, "edgegpu_gpu_clock_event_active{gpu=\"0\""), 9);
	assert_int_equal(count_lines(e, "edgegpu_gpu_clock_event_active{gpu=\"1\""), 0);
	assert_non_null(strstr((const char *)e->out.data, "clock_event=\"hw_thermal\"} 1"));
	assert_non_null(strstr((const char *)e->out.data, "clock_event=\"power_cap\"} 1"));
	assert_non_null(strstr((const char *)e->out.data, "clock_event=\"sw_thermal\"} 0"));
	assert_true(value(e, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"0\"") == 0x44);
}

static void one_proc(struct gpu_sample *s, uint32_t pid, uint64_t mem)
{
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].n_procs = 1;
	s[0].procs[0] = (struct gpu_process){ pid, mem };
}

static unsigned n_attributed;

/* m->attrib.done, which metrics_new() points at metrics.c's body refresh. */
static void count_attributed(struct metrics *m)
{
	(void)m;
	n_attributed++;
}

/*
 * The attribution's hand-over: one run at a time, the newest sample that came meanwhile waits
 * for it (an older waiting one is dropped), a result for GPUs that changed since is dropped,
 * and without a loop (or a thread) the processes are served as skipped, never mapped here.
 */
static void test_attribution_handoff(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	n_attributed = 0;
	e->m.attrib.done = count_attributed;
	one_proc(s, 4241, MIB);
	metrics_cache_store(&e->m, s, r, 2);
	assert_non_null(e->m.attrib.run);
	one_proc(s, 4242, 2 * MIB);
	metrics_cache_store(&e->m, s, r, 2);
	one_proc(s, 4243, 3 * MIB);
	metrics_cache_store(&e->m, s, r, 2);
	assert_non_null(e->m.attrib.next);
	while (metrics_attrib_pending(&e->m))
		assert_int_equal(loop_run_once(e->loop, USEC_INFINITY), 0);
	assert_int_equal(e->m.n_procs, 1);
	assert_int_equal(e->m.procs[0].pid, 4243);
	assert_int_equal(e->m.procs[0].mem, 3 * MIB);
	assert_int_equal(e->m.procs[0].kind, METRICS_PROC_NO_PROC);
	assert_int_equal(e->m.attrib.runs, 2); /* 4242's list never ran */
	assert_int_equal(n_attributed, 2);     /* metrics.c is told of each run's end */

	/* The GPUs change while a run is in flight: its result is not served. */
	one_proc(s, 4244, 4 * MIB);
	metrics_cache_store(&e->m, s, r, 2);
	assert_non_null(e->m.attrib.run);
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
	assert_false(metrics_attrib_pending(&e->m));
	while (e->m.attrib.run)
		assert_int_equal(loop_run_once(e->loop, USEC_INFINITY), 0);
	assert_int_equal(e->m.n_procs, 0);
	assert_non_null(e->m.podmap); /* the cache came back */

	/* No loop to hand a result back through: skipped, at once. */
	e->m.attrib.wake = loop_wake_free(e->m.attrib.wake);
	e->m.loop = NULL;
	one_proc(s, 4245, 5 * MIB);
	metrics_cache_store(&e->m, s, r, 2);
	assert_false(metrics_attrib_pending(&e->m));
	assert_int_equal(e->m.n_procs, 1);
	assert_int_equal(e->m.procs[0].kind, METRICS_PROC_SKIPPED);
	render(e);
	assert_non_null(
		strstr((const char *)e->out.data, "pid=\"4245\",reason=\"skipped\"} 5242880"));
	assert_non_null(strstr((const char *)e->out.data,
			       "edgegpu_attribution_cut_total{reason=\"time-budget\"} 0"));
	e->m.loop = e->loop;
}

/* --- a Tegra board: an integrated GPU's sample, the board's power and rails --- */

#define TEGRA "tegra"
/* The iGPU's labels: no PCI address, no /dev/nvidia node, no driver version without NVML. */
#define IGPU                                                                                 \
	"{gpu=\"0\",UUID=\"tegra\",pci_bus_id=\"\",device=\"\",modelName=\"Orin\",Hostname=" \
	"\"edge-1\",DCGM_FI_DRIVER_VERSION=\"\"}"

/*
 * GPU 0 becomes an Orin's iGPU as the Tegra backend gives it (ID "tegra", no PCI address, no
 * /dev/nvidia node), GPU 1 stays a discrete card (a Thor with one has both), on a board with
 * @model.
 */
static void tegra_gpus(struct env *e, const char *model)
{
	struct gpu_device *d = &e->devs[0];

	(void)snprintf(d->uuid, sizeof(d->uuid), TEGRA);
	(void)snprintf(d->name, sizeof(d->name), "Orin");
	d->pci_bus_id[0] = 0;
	d->integrated = true;
	d->mem_total = 7620 * MIB;
	e->info.board = (struct gpu_board){ .tegra = true, .chip_id = 35, .l4t_major = 36 };
	(void)snprintf(e->info.board.model, sizeof(e->info.board.model), "%s", model);
	(void)snprintf(e->info.board.soc, sizeof(e->info.board.soc), "tegra234");
	(void)snprintf(e->info.board.l4t, sizeof(e->info.board.l4t), "36.4.3");
	(void)snprintf(e->info.board.jetpack, sizeof(e->info.board.jetpack), "6.2");
	(void)snprintf(e->info.board.power_mode, sizeof(e->info.board.power_mode), "15W");
	e->info.driver_version[0] = 0; /* no NVML */
	e->info.cuda_driver_version = 0;
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
}

static void add_rail(struct gpu_sample *s, const char *name, double watts)
{
	assert_true(s->n_rails < GPU_SAMPLE_RAILS_MAX);
	(void)snprintf(s->rails[s->n_rails].name, sizeof(s->rails[0].name), "%s", name);
	s->rails[s->n_rails++].watts = watts;
}

/*
 * The text format's shape, line by line: comments are HELP or TYPE, a sample's family was
 * typed before it, label values end where their escaping says, the value is a number. And no
 * value is NaN or -256: an absent reading is left out, never written as a sentinel.
 */
static void check_exposition(const struct env *e)
{
	const char *p = (const char *)e->out.data;
	char typed[4096] = " ";
	size_t tl = 1;

	while (*p) {
		const char *eol = strchr(p, '\n'), *q = p;
		char name[128], *end;
		size_t n = 0;
		double v;

		assert_non_null(eol);
		if (startswith(p, "# TYPE ")) {
			const char *sp = strchr(p + 7, ' ');

			assert_true(sp && sp < eol && tl + (size_t)(sp - p) < sizeof(typed));
			tl += (size_t)snprintf(typed + tl, sizeof(typed) - tl, "%.*s ",
					       (int)(sp - p - 7), p + 7);
		} else if (!startswith(p, "# HELP ")) {
			assert_true(*p != '#');
			name[0] = ' ';
			for (n = 1; q < eol && *q != '{' && *q != ' '; q++) {
				assert_true(n + 2 < sizeof(name));
				name[n++] = *q;
			}
			name[n++] = ' ';
			name[n] = 0;
			if (!strstr(typed, name))
				fail_msg("untyped sample: %.*s", (int)(eol - p), p);
			if (*q == '{') {
				for (q++; *q != '}'; q++) {
					const char *eq = strchr(q, '=');

					assert_true(eq && eq < eol && eq[1] == '"');
					for (q = eq + 2; *q != '"'; q++) {
						assert_true(q < eol);
						if (*q == '\\') {
							assert_non_null(strchr("\\\"n", q[1]));
							q++;
						}
					}
					if (q[1] == ',')
						q++;
				}
				q++;
			}
			assert_int_equal(*q, ' ');
			v = strtod(q + 1, &end);
			assert_true(end == eol);
			if (isnan(v) || v == -256)
				fail_msg("a sentinel: %.*s", (int)(eol - p), p);
		}
		p = eol + 1;
	}
}

static bool has(const struct env *e, const char *needle)
{
	return strstr((const char *)e->out.data, needle) != NULL;
}

/* Every field of an Orin's sample, under DCGM's name where it means the same, ours where not. */
static void test_tegra_sample(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	tegra_gpus(e, "NVIDIA Jetson Orin Nano Developer Kit");
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].temperature_c = 47.5;
	s[0].power_w = 3.25; /* VDD_CPU_GPU_CV, the rail the GPU is on */
	s[0].mem_total = 7620 * MIB;
	s[0].mem_used = 2000 * MIB;
	s[0].mem_free = 5000 * MIB; /* not total - used: what the backend read */
	s[0].util_gpu = 37.5;
	s[0].util_mem = 12;	      /* EMC load */
	s[0].sm_clock_mhz = 612;      /* devfreq cur_freq */
	s[0].mem_clock_mhz = 2133;    /* EMC */
	s[0].sm_clock_min_mhz = 306;  /* devfreq min_freq */
	s[0].sm_clock_max_mhz = 1020; /* devfreq max_freq */
	s[0].board_power_w = 7.75;
	add_rail(&s[0], "VDD_IN", 7.75);
	add_rail(&s[0], "VDD_CPU_GPU_CV", 3.25);
	add_rail(&s[0], "VDD_SOC", 1.5);
	s[1].temperature_c = 50;
	s[1].board_power_w = 99; /* a second board reading (there is none): the first GPU's wins */
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);

	assert_true(value(e, "DCGM_FI_DEV_GPU_TEMP" IGPU) == 47.5);
	assert_true(value(e, "DCGM_FI_DEV_POWER_USAGE" IGPU) == 3.25);
	assert_true(value(e, "DCGM_FI_DEV_FB_USED" IGPU) == 2000);
	assert_true(value(e, "DCGM_FI_DEV_FB_FREE" IGPU) == 5000);
	assert_true(value(e, "DCGM_FI_DEV_FB_TOTAL" IGPU) == 7620);
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" IGPU) == 37.5);
	assert_true(value(e, "DCGM_FI_DEV_MEM_COPY_UTIL" IGPU) == 12);
	assert_true(value(e, "DCGM_FI_DEV_SM_CLOCK" IGPU) == 612);
	assert_true(value(e, "DCGM_FI_DEV_MEM_CLOCK" IGPU) == 2133);
	assert_true(value(e, "edgegpu_gpu_clock_min_hertz" IGPU) == 306e6);
	assert_true(value(e, "edgegpu_gpu_clock_max_hertz" IGPU) == 1020e6);
	assert_true(has(e, "# TYPE edgegpu_gpu_clock_max_hertz gauge\n"));
	/* the discrete card keeps its device node and lacks the bounds */
	assert_true(value(e, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"" UUID1
			     "\",pci_bus_id=\"00000000:02:00.0\",device=\"nvidia1\"") == 50);
	assert_int_equal(count_lines(e, "edgegpu_gpu_clock_max_hertz{"), 1);

	/* the board's: Hostname only, once per node */
	assert_true(value(e, "edgegpu_board_power_watts{Hostname=\"edge-1\"} ") == 7.75);
	assert_int_equal(count_lines(e, "edgegpu_board_power_watts{"), 1);
	assert_true(
		value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail=\"VDD_IN\"} ") ==
		7.75);
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail="
			     "\"VDD_CPU_GPU_CV\"} ") == 3.25);
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail="
			     "\"VDD_SOC\"} ") == 1.5);
	assert_int_equal(count_lines(e, "# TYPE edgegpu_board_rail_power_watts gauge\n"), 1);
	assert_true(value(e, "edgegpu_board_info{Hostname=\"edge-1\",model=\"NVIDIA Jetson Orin "
			     "Nano Developer Kit\",soc=\"tegra234\",l4t=\"36.4.3\",jetpack=\"6.2\","
			     "power_mode=\"15W\"} ") == 1);

	/* FB_FREE falls back to total - used when the backend gives no free figure */
	s[0].mem_free = UINT64_MAX;
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	assert_true(value(e, "DCGM_FI_DEV_FB_FREE" IGPU) == 5620);
}

/*
 * An Orin without NVML on a board whose GPU zone reads -256 (offline), with no rails: what is
 * missing is left out family by family, what is there stays.
 */
static void test_tegra_some_absent(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	tegra_gpus(e, "NVIDIA Jetson AGX Orin");
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[0].temperature_c = -256; /* the backend gives NaN; a sentinel passed on is dropped too */
	s[0].util_gpu = 5;
	s[0].sm_clock_max_mhz = 1300;
	s[0].mem_used = 100 * MIB; /* no total, no free: FB_FREE cannot be known */
	s[1].temperature_c = NAN;
	s[1].temp_slowdown_c = -300;
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);
	assert_false(has(e, "DCGM_FI_DEV_GPU_TEMP"));
	assert_false(has(e, "DCGM_FI_DEV_SLOWDOWN_TEMP"));
	assert_false(has(e, "-256"));
	assert_false(has(e, "DCGM_FI_DEV_FB_FREE"));
	assert_false(has(e, "DCGM_FI_DEV_FB_TOTAL"));
	assert_true(value(e, "DCGM_FI_DEV_FB_USED" IGPU) == 100);
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" IGPU) == 5);
	assert_true(value(e, "edgegpu_gpu_clock_max_hertz" IGPU) == 1300e6);
	assert_false(has(e, "edgegpu_gpu_clock_min_hertz"));
	assert_false(has(e, "DCGM_FI_DEV_MEM_CLOCK"));
	assert_false(has(e, "edgegpu_board_power_watts"));
	assert_false(has(e, "edgegpu_board_rail_power_watts"));
	assert_false(has(e, "edgegpu_pod_gpu_memory_used_bytes")); /* no process list: no usage */

	/* rails but no input rail and no sum (NaN): the rails alone */
	add_rail(&s[0], "VDD_GPU_SOC", 4);
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);
	assert_false(has(e, "edgegpu_board_power_watts"));
	assert_true(value(e, "edgegpu_board_rail_power_watts{") == 4);

	/* the power mode unreadable: an empty label value, the rest as found */
	e->info.board.power_mode[0] = 0;
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	assert_true(has(e, "jetpack=\"6.2\",power_mode=\"\"} 1\n"));
}

/* Rail names as a monitor gives them: escaped, cut, never a duplicate or an empty series. */
static void test_tegra_rail_names(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	tegra_gpus(e, "Evil \"Board\"\\\n");
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	add_rail(&s[0], "VDD_\"GPU\"\\\n", 1);
	add_rail(&s[0], "", 2);		  /* no name: which rail? left out */
	add_rail(&s[0], "VDD_SOC", NAN);  /* no reading */
	add_rail(&s[0], "VDD_SOC", 3);	  /* the first readable one */
	add_rail(&s[0], "VDD_SOC", 4);	  /* named twice: a duplicate series otherwise */
	add_rail(&s[0], "VIN", INFINITY); /* garbage */
	add_rail(&s[0], "x", 6);
	memset(s[0].rails[6].name, 'R', sizeof(s[0].rails[6].name)); /* no NUL: cut */
	add_rail(&s[0], "\xff\xfe", 5);				     /* not UTF-8 */
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail="
			     "\"VDD_\\\"GPU\\\"\\\\\\n\"} ") == 1);
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail="
			     "\"VDD_SOC\"} ") == 3);
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail=\"RRRRRRRRRRR"
			     "RRRRRRRRRRRRRRRRRRRR\"} ") == 6);
	assert_int_equal(count_lines(e, "edgegpu_board_rail_power_watts{"), 4);
	assert_false(has(e, "rail=\"\""));
	assert_true(value(e, "edgegpu_board_rail_power_watts{Hostname=\"edge-1\",rail="
			     "\"\xef\xbf\xbd\xef\xbf\xbd\"} ") == 5);
	assert_true(has(e, "model=\"Evil \\\"Board\\\"\\\\\\n\""));
}

/* A Tegra sample with nothing in it: no telemetry family at all, only what the board is. */
static void test_tegra_nan_everywhere(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };
	static const char *const families[] = {
		"DCGM_FI_DEV_GPU_TEMP",
		"DCGM_FI_DEV_POWER_USAGE",
		"DCGM_FI_DEV_FB_USED",
		"DCGM_FI_DEV_FB_FREE",
		"DCGM_FI_DEV_FB_TOTAL",
		"DCGM_FI_DEV_GPU_UTIL",
		"DCGM_FI_DEV_MEM_COPY_UTIL",
		"DCGM_FI_DEV_SM_CLOCK",
		"DCGM_FI_DEV_MEM_CLOCK",
		"edgegpu_gpu_clock_min_hertz",
		"edgegpu_gpu_clock_max_hertz",
		"edgegpu_board_power_watts",
		"edgegpu_board_rail_power_watts",
		"DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
		"edgegpu_pod_gpu_memory_used_bytes",
	};

	tegra_gpus(e, "NVIDIA Jetson Nano Developer Kit");
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);
	for (size_t i = 0; i < ELEMENTSOF(families); i++)
		if (has(e, families[i]))
			fail_msg("%s rendered from NaN", families[i]);
	assert_true(value(e, "edgegpu_board_info{") == 1);
	/* always: 0 is "none", and says so in DCGM-exporter's err_code/err_msg (issue 20) */
	assert_true(value(e,
			  "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"tegra\",pci_bus_id=\"\","
			  "device=\"\",modelName=\"Orin\",Hostname=\"edge-1\","
			  "DCGM_FI_DRIVER_VERSION=\"\",err_code=\"0\",err_msg=\"No Error\"}") == 0);

	/* Not a Tegra node: no board family at all. */
	e->info.board = (struct gpu_board){ 0 };
	e->devs[0].integrated = false;
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	check_exposition(e);
	assert_false(has(e, "edgegpu_board_"));
	assert_true(has(e, "device=\"nvidia0\""));
}

/* --- DCGM-exporter's labels: err_code/err_msg, device, pod_uid; --kubernetes-virtual-gpus --- */

/* NVIDIA's XID names as DCGM-exporter writes them; a code past the catalogue is unknown. */
static void test_xid_messages(void **state)
{
	assert_string_equal(metrics_xid_message(0), "No Error");
	assert_string_equal(metrics_xid_message(13), "Graphics Engine Exception");
	assert_string_equal(metrics_xid_message(31), "GPU memory page fault");
	assert_string_equal(metrics_xid_message(48), "Double Bit ECC Error");
	assert_string_equal(metrics_xid_message(79), "GPU has fallen off the bus");
	assert_string_equal(metrics_xid_message(130), "Robust Channel CE14 Error");
	assert_string_equal(metrics_xid_message(172), "Uncorrectable SRAM Error");
	assert_string_equal(metrics_xid_message(173), "Unknown Error");
	assert_string_equal(metrics_xid_message(UINT64_MAX), "Unknown Error");
}

/*
 * DCGM-exporter's device label is "nvidia" and the GPU's index, not its minor number: a GPU
 * whose node is /dev/nvidia3 but that is GPU 1 is device="nvidia1".
 */
static void test_device_is_the_index(void **state)
{
	struct env *e = *state;
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	e->devs[0].minor = 2;
	e->devs[1].minor = 3;
	assert_int_equal(metrics_set_gpus(&e->m, &e->info), 0);
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
	s[1].temperature_c = 40;
	metrics_cache_store(&e->m, s, r, 2);
	render(e);
	assert_true(value(e, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"" UUID1
			     "\",pci_bus_id=\"00000000:02:00.0\",device=\"nvidia1\",") == 40);
	assert_false(has(e, "device=\"nvidia3\""));
	assert_int_equal(count_lines(e, "DCGM_FI_DEV_XID_ERRORS{"), 2);
}

/* A process of pod @pod/@uid_ (the systemd form, '_' for '-'), container @ctr, cid of @c. */
static void fake_pod_proc(struct env *e, unsigned pid, const char *pod, const char *ctr,
			  const char *uid_, char c)
{
	char path[512], cg[512], cid[65];

	memset(cid, c, 64);
	cid[64] = 0;
	(void)snprintf(path, sizeof(path), "%s/proc", e->dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/proc/%u", e->dir, pid);
	(void)mkdir(path, 0755);
	(void)snprintf(cg, sizeof(cg),
		       "0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope\n", uid_,
		       cid);
	write_file(path, "cgroup", cg);
	(void)snprintf(path, sizeof(path), "%s/log", e->dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/log/containers", e->dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/log/containers/%s_default_%s-%s.log", e->dir, pod,
		       ctr, cid);
	assert_int_equal(symlink("/nowhere", path), 0);
}

/* The pod-resources answer naming the @n holders of @h, stored; two empty samples in @s. */
static void hold(struct env *e, const struct holder *h, size_t n, struct gpu_sample *s)
{
	size_t len;
	uint8_t *resp = encode(h, n, &len);

	metrics_pods_store(&e->m, resp, len);
	free(resp);
	gpu_sample_init(&s[0]);
	gpu_sample_init(&s[1]);
}

static void attribute(struct env *e, struct gpu_sample *s, int *r)
{
	metrics_cache_store(&e->m, s, r, 2);
	while (metrics_attrib_pending(&e->m))
		assert_int_equal(loop_run_once(e->loop, USEC_INFINITY), 0);
	render(e);
}

#define UID_A "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define UID_B "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1"
/* GPU 0's labels as the per-pod series carry them (no holder: GPU 0 is shared). */
#define GPU0                                                                                \
	"{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:01:00.0\",device=\"nvidia0\"," \
	"modelName=\"NVIDIA A2\",Hostname=\"edge-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""

/*
 * --kubernetes-virtual-gpus: GPU 0, shared (gpumem) by infer-a (two processes), infer-b (one
 * process whose SM share the driver cannot give) and idle (none), has its own
 * DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED and one more of each per container: the SM
 * shares and MiB of its processes, 0 for one running nothing, and none where a reading is
 * missing. pod_uid comes from the cgroups and stays once seen. Off: none of it.
 */
static void test_virtual_gpus(void **state)
{
	struct env *e = *state;
	const struct holder h[] = {
		{ "infer-a", "c1", e->res[0], 0, 4 },
		{ "infer-b", "c1", e->res[0], 4, 2 },
		{ "idle", "c1", e->res[0], 6, 1 },
		{ "train", "main", e->res[1], 0, 1 },
	};
	struct gpu_sample s[2], none[2];
	int r[2] = { 0, 0 };

	hold(e, h, 4, s);
	fake_pod_proc(e, 2001, "infer-a", "c1", "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0", 'a');
	fake_pod_proc(e, 2002, "infer-b", "c1", "1f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f1", 'b');
	s[0].util_gpu = 90;
	s[0].mem_used = 3000 * MIB;
	s[1].util_gpu = 10;
	s[1].mem_used = 100 * MIB;
	s[1].n_procs = 0; /* listed: none running */
	s[0].n_procs = 3;
	s[0].procs[0] = (struct gpu_process){ 2001, 1024 * MIB, 30 };
	s[0].procs[1] = (struct gpu_process){ 2001, 512 * MIB + 1, 25 }; /* a second context */
	s[0].procs[2] = (struct gpu_process){ 2002, 700 * MIB, NAN };

	/* off (the default): DCGM-exporter's usual series only */
	attribute(e, s, r);
	assert_int_equal(count_lines(e, "DCGM_FI_DEV_GPU_UTIL{"), 2);
	assert_false(has(e, "pod_uid="));
	/* the whole GPU's holder: pod_uid is not known (no process of "train") */
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"") == 10);

	e->m.virtual_gpus = true;
	render(e);
	check_exposition(e);
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 "} ") == 90);
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 ",pod=\"infer-a\",namespace=\"default\","
			     "container=\"c1\",pod_uid=\"" UID_A "\"}") == 55);
	assert_true(value(e, "DCGM_FI_DEV_FB_USED" GPU0 ",pod=\"infer-a\",namespace=\"default\","
			     "container=\"c1\",pod_uid=\"" UID_A "\"}") == 1536);
	/* infer-b: its memory, but no SM share (unknown, not 0) */
	assert_true(value(e, "DCGM_FI_DEV_FB_USED" GPU0 ",pod=\"infer-b\",namespace=\"default\","
			     "container=\"c1\",pod_uid=\"" UID_B "\"}") == 700);
	assert_false(has(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 ",pod=\"infer-b\""));
	/* idle: holds a share, runs nothing: 0, no pod_uid (no cgroup seen) */
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 ",pod=\"idle\",namespace=\"default\","
			     "container=\"c1\"}") == 0);
	assert_true(value(e, "DCGM_FI_DEV_FB_USED" GPU0 ",pod=\"idle\",namespace=\"default\","
			     "container=\"c1\"}") == 0);
	/* GPU 1 held whole by train: its own series, unlabelled, and train's */
	assert_int_equal(count_lines(e, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\""), 2);
	assert_int_equal(count_lines(e, "container=\"main\"} 0\n"), 2); /* GPU_UTIL, FB_USED */
	/* the other families keep DCGM-exporter's sole-holder rule */
	assert_int_equal(count_lines(e, "DCGM_FI_DEV_XID_ERRORS{"), 2);
	assert_int_equal(count_lines(e, "# TYPE DCGM_FI_DEV_GPU_UTIL "), 1);

	/* no process list (Tegra, or NVML without it), or a cut one: no per-pod series at all */
	s[0].n_procs = -1;
	attribute(e, s, r);
	assert_false(has(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 ",pod="));
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 "} ") == 90);
	s[0].n_procs = 3;
	s[0].procs_truncated = true;
	attribute(e, s, r);
	assert_false(has(e, "DCGM_FI_DEV_FB_USED" GPU0 ",pod="));
	s[0].procs_truncated = false;

	/* infer-a's processes end: its UID stays on its series (label set unchanged) */
	s[0].n_procs = 0;
	attribute(e, s, r);
	assert_true(value(e, "DCGM_FI_DEV_GPU_UTIL" GPU0 ",pod=\"infer-a\",namespace=\"default\","
			     "container=\"c1\",pod_uid=\"" UID_A "\"}") == 0);
	assert_string_equal(metrics_pods_uid(&e->m, "default", "infer-a"), UID_A);
	/* it no longer holds anything: its UID is let go */
	hold(e, &h[3], 1, none);
	assert_string_equal(metrics_pods_uid(&e->m, "default", "infer-a"), "");
	render(e);
	assert_false(has(e, "pod=\"infer-a\""));
}

/* A whole GPU's holder carries pod_uid on every GPU family once its cgroup named it. */
static void test_holder_pod_uid(void **state)
{
	struct env *e = *state;
	const struct holder h[] = { { "train", "main", e->res[1], 0, 1 } };
	struct gpu_sample s[2];
	int r[2] = { 0, 0 };

	hold(e, h, 1, s);
	fake_pod_proc(e, 3001, "train", "main", "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0", 'c');
	s[1].temperature_c = 50;
	s[1].n_procs = 1;
	s[1].procs[0] = (struct gpu_process){ 3001, MIB, NAN };
	attribute(e, s, r);
	check_exposition(e);
	assert_non_null(
		strstr((const char *)e->out.data,
		       "pod=\"train\",namespace=\"default\",container=\"main\",pod_uid=\"" UID_A
		       "\"} 50"));
	assert_non_null(strstr((const char *)e->out.data,
			       "container=\"main\",pod_uid=\"" UID_A "\",err_code=\"0\","
			       "err_msg=\"No Error\"} 0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pods_and_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsupported_left_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attribution_handoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tegra_sample, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tegra_some_absent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tegra_rail_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tegra_nan_everywhere, setup, teardown),
		cmocka_unit_test(test_xid_messages),
		cmocka_unit_test_setup_teardown(test_device_is_the_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_virtual_gpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_holder_pod_uid, setup, teardown),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
