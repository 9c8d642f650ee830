#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "gpu.h"
#include "kubelet.h"
#include "loop.h"
#include "plugin.h"
#include "podres.h"
#include "resource.h"

#define LOG_MODULE "daemon"
#include "log.h"

#define STOP_GRACE	(500 * USEC_PER_MSEC)
#define STOP_DEADLINE	(900 * USEC_PER_MSEC)
#define NO_NVML_LOG_GAP (300 * USEC_PER_SEC)
#define PODRES_INTERVAL (2 * USEC_PER_SEC)
#define STREAM_WATCHDOG (2 * USEC_PER_SEC)

struct dplugin {
	struct daemon *d;
	struct plugin *plugin;
	struct kubelet_reg *reg;
	char *name;
	bool stopping;
	bool stopped;
	struct loop_timer *watchdog; /* registered, but no ListAndWatch stream yet */
	struct dplugin *next;
};

struct daemon {
	struct loop *loop;
	char *const *envp;
	const struct config_flag *flags;
	size_t n_flags;
	struct config cfg;

	struct gpu_backend *backend;
	char *backend_err;
	usec_t backend_err_logged;
	struct gpu_info info;
	bool *gpu_healthy;
	int *numa;
	int *distance;
	struct gpu_monitor *monitor;
	uint64_t *disabled_xids;

	struct plugin_ctx ctx;
	struct kubelet *kubelet;
	struct dplugin *plugins;
	unsigned n_stopping;

	struct podres *podres;

	struct loop_timer *rediscover;
	struct loop_timer *stop_deadline;
	struct loop_timer *reap;
	bool stopping;
	int exit_code;
};

static void log_diag(const struct config_diag *dg, bool errors_are_fatal)
{
	for (size_t i = 0; i < dg->n_warnings; i++) {
		char *s = config_error_to_string(&dg->warnings[i]);

		log_warn("config setting ignored", "detail=%s", log_q(s ? s : "?"));
		free(s);
	}
	for (size_t i = 0; i < dg->n_errors; i++) {
		char *s = config_error_to_string(&dg->errors[i]);

		if (errors_are_fatal)
			log_error("invalid config", "detail=%s", log_q(s ? s : "?"));
		else
			log_error("invalid config, keeping the previous one", "detail=%s",
				  log_q(s ? s : "?"));
		free(s);
	}
}

/* --- GPU state --- */

static void on_health(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
		      const char *reason, void *userdata)
{
	struct daemon *d = userdata;

	if (gpu >= d->info.n_devices)
		return;
	d->gpu_healthy[gpu] = health == GPU_HEALTHY;
	log_info("device health changed", "device=%s gpu=%u healthy=%s reason=%s",
		 d->info.devices[gpu].uuid, gpu, health == GPU_HEALTHY ? "yes" : "no",
		 log_q(reason ? reason : ""));
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		plugin_refresh(dp->plugin);
}

static void gpu_state_release(struct daemon *d)
{
	d->monitor = gpu_monitor_free(d->monitor);
	gpu_info_release(&d->info);
	d->gpu_healthy = mfree(d->gpu_healthy);
	d->numa = mfree(d->numa);
	d->distance = mfree(d->distance);
}

static int start_monitor(struct daemon *d)
{
	struct gpu_monitor_opts o = {
		.poll_interval = d->cfg.health.poll_interval,
		.recovery_quiet = d->cfg.health.recovery_quiet_period,
		.ignored_xids = d->cfg.health.ignored_xids,
		.n_ignored_xids = (unsigned)d->cfg.health.n_ignored_xids,
		/*
		 * NVML's event wait cannot be interrupted: this bounds both the idle wake-ups and how
		 * long a stop waits for the thread (SIGTERM must finish within 1 s).
		 */
		.wait_timeout = 700 * USEC_PER_MSEC,
	};
	uint64_t *all = NULL;
	int r;

	d->disabled_xids = mfree(d->disabled_xids);
	if (d->cfg.health.disable_healthchecks && *d->cfg.health.disable_healthchecks) {
		struct gpu_monitor_opts dis = { 0 };

		r = gpu_parse_disable_healthchecks(d->cfg.health.disable_healthchecks, &dis,
						   &d->disabled_xids);
		if (r < 0)
			return log_error_errno(r, "invalid DP_DISABLE_HEALTHCHECKS", "value=%s",
					       log_q(d->cfg.health.disable_healthchecks));
		o.disable_all = dis.disable_all;
		o.disable_xids = dis.disable_xids;
		if (dis.n_ignored_xids) {
			all = calloc(o.n_ignored_xids + dis.n_ignored_xids + 1, sizeof(*all));
			if (!all)
				return -ENOMEM;
			if (o.n_ignored_xids)
				memcpy(all, o.ignored_xids, o.n_ignored_xids * sizeof(*all));
			memcpy(all + o.n_ignored_xids, dis.ignored_xids,
			       dis.n_ignored_xids * sizeof(*all));
			o.n_ignored_xids += dis.n_ignored_xids;
			o.ignored_xids = all;
		}
	}
	r = gpu_monitor_new(d->loop, d->backend, &d->info, &o, on_health, d, &d->monitor);
	free(all);
	if (r < 0)
		return log_error_errno(r, "starting the health monitor failed", NULL);
	if (o.disable_all)
		log_warn("health checks disabled", "reason=\"DP_DISABLE_HEALTHCHECKS=all\"");
	return 0;
}

/* Opens NVML if needed and discovers the GPUs into d->info. Returns the GPU count or -errno. */
static int discover(struct daemon *d)
{
	struct gpu_nvml_opts o = {
		.lib_path = d->cfg.nvml_lib,
		.driver_root = d->cfg.container_driver_root,
		.sysfs_root = getenv("EDGEGPU_SYSFS_ROOT"), /* tests: a fake /sys */
	};
	struct gpu_info ni = { 0 };
	bool *healthy = NULL;
	int *numa = NULL, *distance = NULL;
	char *err = NULL;
	unsigned n;
	int r;

	if (!d->backend) {
		r = gpu_nvml_open(&o, &d->backend, &err);
		if (r < 0) {
			free(d->backend_err);
			d->backend_err = err;
			return r;
		}
	}
	/*
	 * Discovery must not run beside the monitor. The old GPU state stays in place until the
	 * new one is complete: plugins keep reading it if discovery fails.
	 */
	d->monitor = gpu_monitor_free(d->monitor);
	r = d->backend->ops->discover(d->backend, &ni, &err);
	if (r < 0) {
		free(d->backend_err);
		d->backend_err = err;
		return r;
	}
	free(err);
	n = ni.n_devices;
	healthy = calloc(n + 1, sizeof(bool));
	numa = calloc(n + 1, sizeof(int));
	distance = calloc((size_t)n * n + 1, sizeof(int));
	if (!healthy || !numa || !distance) {
		gpu_info_release(&ni);
		free(healthy);
		free(numa);
		free(distance);
		return -ENOMEM;
	}
	gpu_state_release(d);
	d->info = ni;
	d->gpu_healthy = healthy;
	d->numa = numa;
	d->distance = distance;
	for (unsigned i = 0; i < n; i++) {
		const struct gpu_device *g = &d->info.devices[i];

		d->gpu_healthy[i] = true;
		d->numa[i] = g->numa_node;
		log_info("found GPU",
			 "gpu=%u device=%s name=%s memory_mib=%llu minor=%u numa=%d pci=%s", i,
			 g->uuid, log_q(g->name), (unsigned long long)(g->mem_total >> 20),
			 g->minor, g->numa_node, g->pci_bus_id);
	}
	/* Topology is read once; an error falls back to a plain choice, never a failed admission. */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n; j++) {
			int v = i == j ? 0 : d->backend->ops->distance(d->backend, i, j);

			if (v < 0) {
				d->distance = mfree(d->distance);
				log_info("GPU topology not available, preferring by NUMA node only",
					 NULL);
				goto topo_done;
			}
			d->distance[i * n + j] = v;
		}
topo_done:
	for (unsigned i = 0; i < d->info.n_skipped; i++)
		log_warn("GPU skipped", "reason=%s",
			 log_q(d->info.skipped && d->info.skipped[i] ? d->info.skipped[i] : "?"));
	log_info("GPU discovery done", "gpus=%u driver=%s cuda_driver=%d", n,
		 d->info.driver_version, d->info.cuda_driver_version);
	d->ctx.info = &d->info;
	d->ctx.gpu_healthy = d->gpu_healthy;
	d->ctx.numa = d->numa;
	d->ctx.distance = d->distance;
	return (int)n;
}

/* --- resources from the config --- */

struct spec_set {
	struct resource_spec specs[32];
	unsigned gpus[32][64];
	size_t n;
};

static struct resource_spec *spec_for(struct spec_set *s, const char *name, enum resource_kind kind)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->specs[i].name, name))
			return &s->specs[i];
	if (s->n == ELEMENTSOF(s->specs))
		return NULL;
	s->specs[s->n] =
		(struct resource_spec){ .name = name, .kind = kind, .gpus = s->gpus[s->n] };
	return &s->specs[s->n++];
}

int daemon_build_resources(const struct config *cfg, const struct gpu_info *info,
			   struct resource **ret, size_t max)
{
	struct config_gpu_assignment *as = NULL;
	struct config_diag dg = { 0 };
	struct spec_set *set;
	unsigned(*reps)[ELEMENTSOF(set->gpus[0])] = NULL; /* per spec, per entry of its gpus */
	size_t n = 0;
	int r;

	set = calloc(1, sizeof(*set));
	reps = calloc(ELEMENTSOF(set->specs), sizeof(*reps));
	if (!set || !reps) {
		free(set);
		free(reps);
		return -ENOMEM;
	}
	r = config_assign_gpus(cfg, info, &as, &dg);
	log_diag(&dg, true);
	config_diag_release(&dg);
	if (r < 0)
		goto out;
	if (info->n_devices > ELEMENTSOF(set->gpus[0]))
		log_warn("more GPUs than one node is built for, advertising the first ones",
			 "gpus=%u limit=%zu", info->n_devices, ELEMENTSOF(set->gpus[0]));
	for (unsigned g = 0; g < info->n_devices && g < ELEMENTSOF(set->gpus[0]); g++) {
		enum resource_kind kind = as[g].use == CONFIG_GPU_WHOLE	      ? RESOURCE_GPU :
					  as[g].use == CONFIG_GPU_TIME_SLICED ? RESOURCE_REPLICA :
										RESOURCE_GPUMEM;
		struct resource_spec *sp = spec_for(set, as[g].resource, kind);

		if (!sp) {
			r = -E2BIG;
			goto out;
		}
		if (sp->kind != kind) {
			log_error(
				"one resource name is used for two kinds of sharing",
				"resource=%s hint=%s", sp->name,
				log_q("some of its GPUs are time-sliced or memory-shared and others whole: give the shared ones another name (rename, or renameByDefault: true), or share all of them"));
			r = -EINVAL;
			goto out;
		}
		/* Two time-slicing entries may share a name with their own replica counts (GPU 0
		 * four ways, GPU 1 two ways): each GPU keeps its own. */
		reps[sp - set->specs][sp->n_gpus] = as[g].replicas;
		if (kind == RESOURCE_REPLICA)
			sp->gpu_replicas = reps[sp - set->specs];
		set->gpus[sp - set->specs][sp->n_gpus++] = g;
		sp->replicas = as[g].replicas;
		sp->fail_requests_gt_one = cfg->time_slicing.fail_requests_greater_than_one;
		sp->unit_mib = cfg->gpumem.unit_mib;
		sp->reserve_mib = cfg->gpumem.reserve_mib;
	}
	for (size_t i = 0; i < set->n && n < max; i++) {
		char *err = NULL;

		r = resource_new(&set->specs[i], info, &ret[n], &err);
		if (r < 0) {
			log_error_errno(r, "invalid resource", "resource=%s reason=%s",
					set->specs[i].name, log_q(err ? err : ""));
			free(err);
			while (n > 0) {
				n--;
				ret[n] = resource_free(ret[n]);
			}
			goto out;
		}
		if (ret[n]->unit_mib != ret[n]->unit_mib_asked)
			log_warn("gpumem unit doubled to keep the device list under 3 MiB",
				 "resource=%s unit_mib=%llu asked_mib=%llu units=%u", ret[n]->name,
				 (unsigned long long)ret[n]->unit_mib,
				 (unsigned long long)ret[n]->unit_mib_asked, ret[n]->n_devices);
		n++;
	}
	r = (int)n;
out:
	free(as);
	free(reps);
	free(set);
	return r;
}

/* --- plugins --- */

static void dplugin_register(struct dplugin *dp);

static void on_reg(struct kubelet_reg *reg, bool ok, void *userdata)
{
	struct dplugin *dp = userdata;

	if (ok) {
		loop_timer_arm(dp->watchdog, STREAM_WATCHDOG);
		return;
	}
	/* Refused while the kubelet still streams from us: it has us, a retry would be refused too. */
	if (plugin_watchers(dp->plugin) > 0) {
		log_info("kubelet still holds our ListAndWatch stream, not registering again",
			 "resource=%s", dp->name);
		kubelet_reg_stop(dp->reg);
	}
}

static void stream_watchdog(struct loop_timer *t, void *userdata)
{
	struct dplugin *dp = userdata;

	if (dp->stopping || plugin_watchers(dp->plugin) > 0)
		return;
	log_warn("registered, but the kubelet opened no ListAndWatch stream, registering again",
		 "resource=%s wait_ms=%llu", dp->name,
		 (unsigned long long)(STREAM_WATCHDOG / USEC_PER_MSEC));
	dplugin_register(dp);
}

static void dplugin_register(struct dplugin *dp)
{
	if (dp->stopping || !kubelet_enabled(dp->d->kubelet))
		return;
	if (!plugin_socket_ok(dp->plugin) && plugin_listen(dp->plugin) < 0)
		return;
	loop_timer_disarm(dp->watchdog);
	kubelet_reg_start(dp->reg);
}

static void on_stream_lost(struct plugin *p, void *userdata)
{
	struct dplugin *dp = userdata;

	if (plugin_watchers(p) == 0)
		dplugin_register(dp);
}

static struct dplugin *dplugin_free(struct dplugin *dp)
{
	if (!dp)
		return NULL;
	kubelet_reg_free(dp->reg);
	plugin_free(dp->plugin);
	loop_timer_free(dp->watchdog);
	free(dp->name);
	free(dp);
	return NULL;
}

static int dplugin_add(struct daemon *d, struct resource *r)
{
	struct dplugin *dp = calloc(1, sizeof(*dp));
	int e;

	if (!dp) {
		resource_free(r);
		return -ENOMEM;
	}
	dp->d = d;
	dp->name = strdup(r->name);
	if (!dp->name) {
		resource_free(r);
		free(dp);
		return -ENOMEM;
	}
	e = loop_timer_new(d->loop, stream_watchdog, dp, &dp->watchdog);
	if (e < 0) {
		resource_free(r);
		dplugin_free(dp);
		return e;
	}
	e = plugin_new(&d->ctx, r, on_stream_lost, dp, &dp->plugin);
	if (e < 0) {
		resource_free(r);
		dplugin_free(dp);
		return log_error_errno(e, "creating device plugin failed", "resource=%s", r->name);
	}
	plugin_refresh(dp->plugin);
	e = plugin_listen(dp->plugin);
	if (e < 0) {
		dplugin_free(dp);
		return e;
	}
	e = kubelet_reg_new(d->kubelet, plugin_resource(dp->plugin)->name,
			    plugin_resource(dp->plugin)->socket, on_reg, dp, &dp->reg);
	if (e < 0) {
		dplugin_free(dp);
		return e;
	}
	dp->next = d->plugins;
	d->plugins = dp;
	log_info("advertising resource", "resource=%s devices=%u socket=%s", dp->name,
		 plugin_resource(dp->plugin)->n_devices, plugin_socket_path(dp->plugin));
	dplugin_register(dp);
	return 0;
}

/* Frees the plugins that finished stopping (not from inside their own server's callback). */
static void reap_plugins(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;

	for (struct dplugin **pp = &d->plugins; *pp;) {
		struct dplugin *dp = *pp;

		if (dp->stopped) {
			*pp = dp->next;
			dplugin_free(dp);
		} else {
			pp = &dp->next;
		}
	}
}

static void plugin_stopped(void *userdata)
{
	struct dplugin *dp = userdata;
	struct daemon *d = dp->d;

	if (d->n_stopping > 0)
		d->n_stopping--;
	if (d->stopping) {
		if (d->n_stopping == 0)
			loop_exit(d->loop, d->exit_code);
		return;
	}
	dp->stopped = true;
	loop_timer_arm(d->reap, 0);
}

static void dplugin_stop(struct dplugin *dp)
{
	if (dp->stopping)
		return;
	dp->stopping = true;
	loop_timer_disarm(dp->watchdog);
	kubelet_reg_stop(dp->reg);
	dp->d->n_stopping++;
	plugin_shutdown(dp->plugin, STOP_GRACE, plugin_stopped, dp);
}

static int write_cdi(struct daemon *d)
{
	struct cdi_opts o = {
		.spec_dir = d->cfg.cdi_spec_dir,
		.driver_root = d->cfg.driver_root,
		.dev_root = d->cfg.dev_root,
		.id_strategy = d->cfg.device_id_strategy == CONFIG_DEVICE_ID_INDEX ?
				       ALLOC_ID_INDEX :
				       ALLOC_ID_UUID,
	};
	char *err = NULL;
	int r;

	if (!(d->cfg.device_list_strategy & (CONFIG_DLS_CDI_ANNOTATIONS | CONFIG_DLS_CDI_CRI)))
		return 0;
	r = cdi_spec_write(&o, &d->info, &err);
	if (r < 0)
		log_error_errno(r, "unable to create cdi spec file", "dir=%s reason=%s", o.spec_dir,
				log_q(err ? err : ""));
	else
		log_info("cdi spec written", "dir=%s", o.spec_dir);
	free(err);
	return r;
}

static void apply_ctx_from_config(struct daemon *d)
{
	const struct config *c = &d->cfg;

	d->ctx.loop = d->loop;
	d->ctx.dir = c->device_plugin_path;
	d->ctx.alloc.strategies =
		(c->device_list_strategy & CONFIG_DLS_ENVVAR ? ALLOC_ENVVAR : 0) |
		(c->device_list_strategy & CONFIG_DLS_VOLUME_MOUNTS ? ALLOC_VOLUME_MOUNTS : 0) |
		(c->device_list_strategy & CONFIG_DLS_CDI_ANNOTATIONS ? ALLOC_CDI_ANNOTATIONS : 0) |
		(c->device_list_strategy & CONFIG_DLS_CDI_CRI ? ALLOC_CDI_CRI : 0);
	d->ctx.alloc.id_strategy =
		c->device_id_strategy == CONFIG_DEVICE_ID_INDEX ? ALLOC_ID_INDEX : ALLOC_ID_UUID;
	d->ctx.alloc.pass_device_specs = c->pass_device_specs;
	d->ctx.alloc.dev_root = c->dev_root;
	d->ctx.alloc.cdi_annotation_prefix = "cdi.k8s.io/";
	d->ctx.alloc.cdi_kind = "k8s.device-plugin.nvidia.com/gpu";
	d->ctx.split_allow = c->gpumem.on_split == CONFIG_ON_SPLIT_ALLOW;
	d->ctx.mask = c->gpumem.placement == CONFIG_PLACEMENT_MASK;
	d->ctx.mask_hysteresis_mib = c->gpumem.mask_hysteresis_mib;
	d->ctx.limits.max_recv_msg = (size_t)c->grpc.max_recv_msg_bytes;
	d->ctx.limits.max_conns = c->grpc.max_connections;
}

/* --- gpumem masking: which units live pods hold, from the kubelet's pod-resources API --- */

struct live_scan {
	const struct resource *res;
	uint64_t *bits;
	unsigned n;
};

static void mark_live(const char *resource, const char *id, void *userdata)
{
	struct live_scan *ls = userdata;
	int dev;

	if (!resource || !id || !streq(resource, ls->res->name))
		return;
	dev = resource_device_lookup(ls->res, id, strlen(id));
	if (dev < 0)
		return;
	ls->bits[dev / 64] |= (uint64_t)1 << (dev % 64);
	ls->n++;
}

static void on_podres(struct podres *pr, const uint8_t *resp, size_t len, void *userdata)
{
	struct daemon *d = userdata;

	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		struct live_scan ls = { .res = plugin_resource(dp->plugin) };

		if (ls.res->kind != RESOURCE_GPUMEM || dp->stopping)
			continue;
		ls.bits = calloc((ls.res->n_devices + 63) / 64 + 1, sizeof(uint64_t));
		if (!ls.bits)
			return;
		if (podres_for_each_device(resp, len, mark_live, &ls) < 0) {
			log_warn("malformed pod-resources answer, ignoring", "bytes=%zu", len);
			free(ls.bits);
			return;
		}
		log_debug("pod-resources answer", "resource=%s live_units=%u", ls.res->name, ls.n);
		plugin_set_live(dp->plugin, ls.bits);
		free(ls.bits);
	}
}

static void update_podres(struct daemon *d)
{
	bool need = false;

	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);

		if (!dp->stopping && r->kind == RESOURCE_GPUMEM && r->n_gpus >= 2 && d->ctx.mask)
			need = true;
	}
	if (!need || !d->cfg.pod_resources_socket || !*d->cfg.pod_resources_socket) {
		d->podres = podres_free(d->podres);
		return;
	}
	if (!d->podres && podres_new(d->loop, d->cfg.pod_resources_socket, PODRES_INTERVAL,
				     on_podres, d, &d->podres) == 0)
		log_info("watching pod-resources for gpumem placement", "socket=%s",
			 d->cfg.pod_resources_socket);
}

/* True when every GPU of @r is still at its index with the same UUID. */
static bool resource_matches(const struct resource *r, const struct gpu_info *info)
{
	for (unsigned s = 0; s < r->n_gpus; s++)
		if (r->gpus[s].gpu >= info->n_devices ||
		    !streq(r->uuids[s], info->devices[r->gpus[s].gpu].uuid))
			return false;
	return true;
}

/*
 * Brings the plugins in line with the config and GPUs: same resource name -> new device list on
 * the open stream; added -> new plugin and registration; removed -> closed.
 */
static int sync_plugins(struct daemon *d)
{
	struct resource *res[32];
	int n = daemon_build_resources(&d->cfg, &d->info, res, ELEMENTSOF(res));

	if (n < 0) {
		/* Keep what still matches the GPUs; a resource naming a GPU that is gone cannot stay. */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			if (!dp->stopping &&
			    !resource_matches(plugin_resource(dp->plugin), &d->info)) {
				log_error(
					"resource no longer matches the GPUs and the config cannot be applied, closing it",
					"resource=%s", dp->name);
				dplugin_stop(dp);
			}
		return n;
	}
	(void)write_cdi(d);
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		bool keep = false;

		if (dp->stopping)
			continue;

		for (int i = 0; i < n; i++)
			if (res[i] && streq(res[i]->name, dp->name)) {
				plugin_set_resource(dp->plugin, res[i]);
				res[i] = NULL;
				keep = true;
				break;
			}
		if (!keep) {
			log_info("resource no longer advertised", "resource=%s", dp->name);
			dplugin_stop(dp);
		}
	}
	for (int i = 0; i < n; i++)
		if (res[i])
			(void)dplugin_add(d, res[i]);
	update_podres(d);
	return n;
}

static void rediscover_tick(struct loop_timer *t, void *userdata);

/* Discovery and plugins at start, and again while no GPU has been found. */
static int bring_up(struct daemon *d)
{
	int n = discover(d);

	if (n < 0) {
		usec_t now = now_usec();

		if (!d->backend_err_logged || now - d->backend_err_logged >= NO_NVML_LOG_GAP) {
			log_warn_errno(
				n, "GPU discovery failed, registering nothing, retrying",
				"reason=%s retry_s=%llu",
				log_q(d->backend_err ? d->backend_err : ""),
				(unsigned long long)(d->cfg.rediscover_interval / USEC_PER_SEC));
			d->backend_err_logged = now;
		}
		loop_timer_arm(d->rediscover, d->cfg.rediscover_interval);
		return n;
	}
	if (n == 0) {
		log_warn("no devices found, retrying", "retry_s=%llu",
			 (unsigned long long)(d->cfg.rediscover_interval / USEC_PER_SEC));
		loop_timer_arm(d->rediscover, d->cfg.rediscover_interval);
		return 0;
	}
	n = start_monitor(d);
	if (n < 0)
		return n;
	return sync_plugins(d);
}

static void rediscover_tick(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;

	if (d->plugins || d->stopping)
		return;
	if (d->backend && d->backend->ops->reinit) {
		char *err = NULL;

		if (d->backend->ops->reinit(d->backend, &err) < 0) {
			free(d->backend_err);
			d->backend_err = err;
		} else {
			free(err);
		}
	}
	(void)bring_up(d);
}

/* --- kubelet events --- */

static void on_kubelet(struct kubelet *k, enum kubelet_event ev, const char *name, void *userdata)
{
	struct daemon *d = userdata;

	if (d->stopping)
		return;
	if (ev == KUBELET_EVENT_SOCKET_CREATED) {
		log_info("kubelet socket created, re-registering", "socket=%s",
			 d->cfg.kubelet_socket);
		/* A live stream is the new kubelet's (or the old one's, whose end re-registers). */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			if (plugin_watchers(dp->plugin) == 0)
				dplugin_register(dp);
		return;
	}
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		if (dp->stopping || !streq(name, plugin_resource(dp->plugin)->socket) ||
		    plugin_socket_ok(dp->plugin))
			continue;
		log_warn("device plugin socket deleted, recreating", "resource=%s path=%s",
			 dp->name, plugin_socket_path(dp->plugin));
		if (plugin_listen(dp->plugin) < 0)
			continue;
		/* A live stream means the kubelet still has us: a second Register would be refused. */
		if (plugin_watchers(dp->plugin) == 0)
			dplugin_register(dp);
	}
}

/* --- signals --- */

static void stop_deadline(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;

	log_warn("stop took too long, exiting", NULL);
	loop_exit(d->loop, d->exit_code);
}

static void on_stop_signal(struct loop *l, int signo, void *userdata)
{
	struct daemon *d = userdata;

	if (d->stopping)
		return;
	log_info("stopping", "signal=%s", signo == SIGTERM ? "SIGTERM" : "SIGINT");
	d->stopping = true;
	loop_timer_disarm(d->rediscover);
	d->podres = podres_free(d->podres);
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		dplugin_stop(dp);
	if (d->n_stopping == 0)
		loop_exit(l, d->exit_code);
	else
		loop_timer_arm(d->stop_deadline, STOP_DEADLINE);
}

static void on_hup(struct loop *l, int signo, void *userdata)
{
	struct daemon *d = userdata;
	struct config_diag dg = { 0 };
	struct config nc = { 0 };
	char(*old_uuid)[GPU_UUID_MAX] = NULL;
	bool *old_health = NULL;
	unsigned old_n = d->info.n_devices;
	int r;

	if (d->stopping)
		return;
	log_info("reloading", "signal=SIGHUP");
	r = config_init(&nc);
	if (r >= 0)
		r = config_build(&nc, d->envp, d->flags, d->n_flags, &dg);
	log_diag(&dg, false);
	config_diag_release(&dg);
	if (r < 0) {
		config_release(&nc);
		return;
	}
	config_release(&d->cfg);
	d->cfg = nc;
	log_max_level = d->cfg.log_level;
	apply_ctx_from_config(d);
	if (!d->backend || !d->info.n_devices) {
		(void)bring_up(d);
		return;
	}
	/* Discovery must not run beside the monitor: stop it, and carry each GPU's faults over. */
	old_uuid = calloc(old_n, sizeof(*old_uuid));
	old_health = calloc(old_n, sizeof(*old_health));
	if (!old_uuid || !old_health)
		goto out;
	for (unsigned i = 0; i < old_n; i++) {
		memcpy(old_uuid[i], d->info.devices[i].uuid, GPU_UUID_MAX);
		old_health[i] = d->gpu_healthy[i];
	}
	r = discover(d); /* stops the monitor */
	if (r < 0) {
		log_error_errno(r, "GPU discovery failed on reload, keeping the devices unchanged",
				"reason=%s", log_q(d->backend_err ? d->backend_err : ""));
		if (start_monitor(d) == 0)
			for (unsigned i = 0; i < old_n; i++)
				if (!old_health[i])
					gpu_monitor_mark_unhealthy(d->monitor, i,
								   "unhealthy before the reload");
		goto out;
	}
	if (d->info.n_devices && start_monitor(d) == 0)
		for (unsigned i = 0; i < d->info.n_devices; i++)
			for (unsigned k = 0; k < old_n; k++)
				if (!old_health[k] && streq(old_uuid[k], d->info.devices[i].uuid))
					gpu_monitor_mark_unhealthy(d->monitor, i,
								   "unhealthy before the reload");
	(void)sync_plugins(d);
out:
	free(old_uuid);
	free(old_health);
}

int daemon_run(char *const *envp, const struct config_flag *flags, size_t n_flags)
{
	struct config_diag dg = { 0 };
	struct daemon d = { .envp = envp, .flags = flags, .n_flags = n_flags, .exit_code = 0 };
	int r, rc = 1;

	r = config_init(&d.cfg);
	if (r >= 0)
		r = config_build(&d.cfg, envp, flags, n_flags, &dg);
	log_diag(&dg, true);
	config_diag_release(&dg);
	if (r < 0) {
		log_error_errno(r, "cannot start without a valid config", NULL);
		config_release(&d.cfg);
		return 1;
	}
	log_max_level = d.cfg.log_level;
	r = loop_new(&d.loop);
	if (r < 0) {
		log_error_errno(r, "creating the event loop failed", NULL);
		goto out;
	}
	apply_ctx_from_config(&d);
	if ((r = loop_signal_add(d.loop, SIGTERM, on_stop_signal, &d)) < 0 ||
	    (r = loop_signal_add(d.loop, SIGINT, on_stop_signal, &d)) < 0 ||
	    (r = loop_signal_add(d.loop, SIGHUP, on_hup, &d)) < 0 ||
	    (r = loop_timer_new(d.loop, rediscover_tick, &d, &d.rediscover)) < 0 ||
	    (r = loop_timer_new(d.loop, stop_deadline, &d, &d.stop_deadline)) < 0 ||
	    (r = loop_timer_new(d.loop, reap_plugins, &d, &d.reap)) < 0) {
		log_error_errno(r, "setting up the event loop failed", NULL);
		goto out;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	if (mkdir(d.cfg.device_plugin_path, 0750) < 0 && errno != EEXIST) {
		log_error_errno(-errno, "creating the device-plugin directory failed", "path=%s",
				d.cfg.device_plugin_path);
		goto out;
	}
	r = kubelet_new(d.loop, d.cfg.device_plugin_path, d.cfg.kubelet_socket, on_kubelet, &d,
			&d.kubelet);
	if (r < 0)
		goto out;
	log_info("starting", "device_plugin_path=%s kubelet_socket=%s", d.cfg.device_plugin_path,
		 d.cfg.kubelet_socket && *d.cfg.kubelet_socket ? d.cfg.kubelet_socket :
								 "(registration off)");
	r = bring_up(&d);
	if (r < 0 && d.cfg.fail_on_init_error) {
		log_error_errno(
			r, "initialisation failed",
			"reason=%s hint=\"set failOnInitError: false to keep running on nodes without a GPU\"",
			log_q(d.backend_err ? d.backend_err : ""));
		goto out;
	}
	rc = loop_run(d.loop);
	if (rc < 0)
		rc = 1;
	if (d.monitor) {
		struct gpu_monitor_stats st;

		gpu_monitor_get_stats(d.monitor, &st);
		log_info(
			"health monitor stats",
			"events=%llu xids=%llu xids_ignored=%llu ecc_single=%llu ecc_double=%llu lost=%llu reinits=%llu wait_errors=%llu",
			(unsigned long long)st.events, (unsigned long long)st.xids,
			(unsigned long long)st.xids_ignored, (unsigned long long)st.ecc_single,
			(unsigned long long)st.ecc_double, (unsigned long long)st.lost,
			(unsigned long long)st.reinits, (unsigned long long)st.wait_errors);
	}
	log_info("stopped", NULL);
out:
	while (d.plugins) {
		struct dplugin *dp = d.plugins;

		d.plugins = dp->next;
		dplugin_free(dp);
	}
	d.podres = podres_free(d.podres);
	d.kubelet = kubelet_free(d.kubelet);
	gpu_state_release(&d);
	gpu_backend_close(d.backend);
	free(d.backend_err);
	free(d.disabled_xids);
	loop_timer_free(d.rediscover);
	loop_timer_free(d.stop_deadline);
	loop_timer_free(d.reap);
	loop_free(d.loop);
	config_release(&d.cfg);
	return rc;
}
