#include "daemon.h"

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assign.h"
#include "cdi-writer.h"
#include "cdi.h"
#include "config-watch.h"
#include "config.h"
#include "daemon-internal.h"
#include "devnode.h"
#include "gpu-backend.h"
#include "gpu-monitor.h"
#include "kubelet.h"
#include "loop.h"
#include "metrics.h"
#include "plugin.h"
#include "podres.h"
#include "resource.h"

#define LOG_MODULE "daemon"
#include "log.h"

/* Blocks from this size up get their own mapping (daemon_run()). */
#define DAEMON_MMAP_THRESHOLD (64 * 1024)

#define STOP_GRACE	(500 * USEC_PER_MSEC)
#define STOP_DEADLINE	(900 * USEC_PER_MSEC)
#define NO_NVML_LOG_GAP (300 * USEC_PER_SEC)
#define PODRES_INTERVAL (2 * USEC_PER_SEC)

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

static int sync_plugins(struct daemon *d);

static void on_health(struct gpu_monitor *m, unsigned gpu, enum gpu_health health,
		      const char *reason, void *userdata)
{
	struct daemon *d = userdata;

	/* The monitor reports changes only; the plugins read it back (gpu_healthy()). */
	if (gpu >= d->info.n_devices)
		return;
	log_info("device health changed", "device=%s gpu=%u healthy=%s reason=%s",
		 d->info.devices[gpu].uuid, gpu, health == GPU_HEALTHY ? "yes" : "no",
		 log_q(reason ? reason : ""));
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		plugin_refresh(dp->plugin);
}

/* The monitor is the one record of health, by UUID: a plugin's view is derived from it. */
static bool gpu_healthy(unsigned gpu, void *userdata)
{
	struct daemon *d = userdata;

	return gpu < d->info.n_devices &&
	       gpu_monitor_health_by_uuid(d->monitor, d->info.devices[gpu].uuid) == GPU_HEALTHY;
}

static void gpu_state_release(struct daemon *d)
{
	gpu_info_release(&d->info);
	d->numa = mfree(d->numa);
	d->distance = mfree(d->distance);
}

/* The monitor's options from the config (start and SIGHUP). Returns 0 or -errno (logged). */
static int apply_monitor_opts(struct daemon *d)
{
	const struct config_health *h = &d->cfg.health;
	struct gpu_monitor_opts o = {
		.poll_interval = h->poll_interval,
		.event_poll_interval = h->event_poll_interval,
		.recovery_quiet = h->recovery_quiet_period,
		.ignored_xids = h->ignored_xids,
		.n_ignored_xids = (unsigned)h->n_ignored_xids,
		.call_timeout = h->call_timeout,
	};
	uint64_t *dis_xids = NULL;
	int r;

	if (h->disable_healthchecks && *h->disable_healthchecks) {
		r = gpu_parse_disable_healthchecks(h->disable_healthchecks, &o, &dis_xids);
		if (r < 0)
			return log_error_errno(r, "invalid DP_DISABLE_HEALTHCHECKS", "value=%s",
					       log_q(h->disable_healthchecks));
		if (o.disable_all)
			log_warn("health checks disabled",
				 "reason=\"DP_DISABLE_HEALTHCHECKS=all\"");
	}
	r = gpu_monitor_set_opts(d->monitor, &o);
	free(dis_xids);
	return r;
}

static void log_gpus(struct daemon *d)
{
	const struct gpu_board *b = &d->info.board;

	if (b->tegra && !d->board_logged) {
		log_info("found Tegra board",
			 "model=%s soc=%s chip_id=%u l4t=%s jetpack=%s power_mode=%s",
			 log_q(b->model[0] ? b->model : "unknown"), b->soc[0] ? b->soc : "unknown",
			 b->chip_id, b->l4t[0] ? b->l4t : "unknown",
			 b->jetpack[0] ? b->jetpack : "unknown", log_q(b->power_mode));
		d->board_logged = true;
	}
	for (unsigned i = 0; i < d->info.n_devices; i++) {
		const struct gpu_device *g = &d->info.devices[i];

		log_info("found GPU",
			 "gpu=%u device=%s name=%s memory_mib=%llu minor=%u numa=%d pci=%s", i,
			 g->uuid, log_q(g->name), (unsigned long long)(g->mem_total >> 20),
			 g->minor, g->numa_node, g->pci_bus_id);
	}
	if (d->info.n_devices > 1 && !d->distance)
		log_info("GPU topology not available, preferring by NUMA node only", NULL);
	for (unsigned i = 0; i < d->info.n_skipped; i++)
		log_warn("GPU skipped", "reason=%s",
			 log_q(d->info.skipped && d->info.skipped[i] ? d->info.skipped[i] : "?"));
	log_info("GPU discovery done", "gpus=%u driver=%s cuda_driver=%d", d->info.n_devices,
		 d->info.driver_version[0] ? d->info.driver_version : "none",
		 d->info.cuda_driver_version);
}

/* A discovery failed: keep what we have; with nothing, retry (and say so now and then). */
static void discovery_failed(struct daemon *d, int r, const char *err)
{
	usec_t now = now_usec();

	daemon_gpu_discovered(d, r, err);
	if (!d->discovered_once) {
		d->discovered_once = true;
		if (d->cfg.fail_on_init_error) {
			log_error_errno(
				r, "initialisation failed",
				"reason=%s hint=\"set failOnInitError: false to keep running on nodes without a GPU\"",
				log_q(err ? err : ""));
			loop_exit(d->loop, 1);
			return;
		}
	}
	if (d->info.n_devices) {
		log_error_errno(r, "GPU discovery failed on reload, keeping the devices unchanged",
				"reason=%s", log_q(err ? err : ""));
		(void)sync_plugins(d); /* the rest of a new config still applies */
		return;
	}
	if (!d->backend_err_logged || now - d->backend_err_logged >= NO_NVML_LOG_GAP) {
		log_warn_errno(r, "GPU discovery failed, registering nothing, retrying",
			       "reason=%s retry_s=%llu", log_q(err ? err : ""),
			       (unsigned long long)(d->cfg.rediscover_interval / USEC_PER_SEC));
		d->backend_err_logged = now;
	}
	loop_timer_arm(d->rediscover, d->cfg.rediscover_interval);
}

/* The monitor's discovery result (loop thread): adopt the GPUs, then the plugins follow. */
static void on_discovered(struct gpu_monitor *m, int r, struct gpu_info *info, int **distance,
			  const char *err, void *userdata)
{
	struct daemon *d = userdata;
	int *numa = NULL;
	unsigned n;

	if (d->stopping)
		return;
	if (r < 0) {
		discovery_failed(d, r, err);
		return;
	}
	n = info->n_devices;
	numa = calloc(n + 1, sizeof(int));
	if (!numa) {
		discovery_failed(d, -ENOMEM, "out of memory");
		return;
	}
	daemon_gpu_discovered(d, 0, NULL);
	gpu_state_release(d);
	d->info = *info;
	memset(info, 0, sizeof(*info));
	d->distance = *distance;
	*distance = NULL;
	d->numa = numa;
	for (unsigned i = 0; i < n; i++)
		d->numa[i] = d->info.devices[i].numa_node;
	d->ctx.info = &d->info;
	d->ctx.numa = d->numa;
	d->ctx.distance = d->distance;
	d->memlimit_hook_probe = MEMLIMIT_HOOK_UNPROBED; /* a new toolkit may come with new GPUs */
	log_gpus(d);
	if (n == 0) {
		log_warn("no devices found, retrying", "retry_s=%llu",
			 (unsigned long long)(d->cfg.rediscover_interval / USEC_PER_SEC));
		loop_timer_arm(d->rediscover, d->cfg.rediscover_interval);
	}
	r = sync_plugins(d);
	daemon_metrics_gpus(d);
	daemon_labels_update(d);
	daemon_backstop_gpus(d);
	if (!d->discovered_once) {
		/* The first bring-up: a config that cannot apply to these GPUs is an init error. */
		d->discovered_once = true;
		if (r < 0 && d->cfg.fail_on_init_error) {
			log_error_errno(
				r, "initialisation failed",
				"reason=\"the config cannot be applied to the GPUs found\" hint=\"set failOnInitError: false to keep running\"");
			loop_exit(d->loop, 1);
		}
	}
}

/* --- plugins --- */

static void dplugin_register(struct dplugin *dp);

/*
 * Which ListAndWatch stream is the kubelet's: the one from the process that answers on
 * kubelet.sock (plugin.h, plugin_expect_kubelet). The registration (kubelet.h) hears of the
 * kubelet's streams only; a monitoring agent or grpcurl watching us does not count.
 */
static void on_dial(struct kubelet_reg *reg, pid_t kubelet_pid, void *userdata)
{
	struct dplugin *dp = userdata;

	plugin_expect_kubelet(dp->plugin, kubelet_pid);
}

static void on_reg(struct kubelet_reg *reg, bool ok, void *userdata)
{
	struct dplugin *dp = userdata;

	/* The kubelet's backlog was full when we dialled: the pid comes only now. */
	if (ok)
		plugin_expect_kubelet(dp->plugin, kubelet_reg_peer_pid(reg));
	/* Our peers learn that we may be newer than them (plugin.h, upgrades). */
	plugin_register_done(dp->plugin, ok);
}

/*
 * Asks for registration (kubelet.c decides whether one is sent), unless the first CDI spec is
 * still being written: cdi_settled() asks then.
 */
static void dplugin_reg_start(struct dplugin *dp)
{
	if (!cdi_writer_first_pending(dp->d->cdi))
		kubelet_reg_start(dp->reg);
}

/* Serves our socket, then asks for registration. */
static void dplugin_register(struct dplugin *dp)
{
	if (plugin_serve(dp->plugin))
		dplugin_reg_start(dp);
}

/* The first CDI write attempt finished: the plugins that were served wait no longer. */
static void cdi_settled(void *userdata)
{
	struct daemon *d = userdata;

	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		if (!dp->stopping && plugin_socket_ok(dp->plugin))
			kubelet_reg_start(dp->reg);
}

/* The plugin's events go to the registration: it is the one that decides. */
static void on_plugin(struct plugin *p, enum plugin_event ev, void *userdata)
{
	struct dplugin *dp = userdata;
	bool ceded;

	switch (ev) {
	case PLUGIN_EVENT_STREAM_OPENED:
		kubelet_reg_stream_opened(dp->reg);
		break;
	case PLUGIN_EVENT_STREAM_CLOSED:
		/* A re-registration needs our socket; standing down, none is sent. */
		ceded = plugin_ceded(p);
		if (plugin_serve(p) && ceded)
			dplugin_reg_start(dp);
		kubelet_reg_stream_closed(dp->reg);
		break;
	case PLUGIN_EVENT_CEDED:
		/* Registering again would take the resource back from the instance that took over. */
		kubelet_reg_stop(dp->reg);
		break;
	case PLUGIN_EVENT_PEER_GONE:
		/*
		 * Our path back if the peer held it, then a Register, which waits for the end of
		 * the streams the plugin ended. An accepted one still waiting for its stream is
		 * left alone: the plugin ends that stream when it opens (older than the
		 * takeover), and its end registers again (or the watchdog does).
		 */
		if (plugin_serve(p) && kubelet_reg_state(dp->reg) != KUBELET_REG_WAITING_STREAM)
			dplugin_reg_start(dp);
		break;
	case PLUGIN_EVENT_SERVING:
	default:
		dplugin_reg_start(dp);
		break;
	}
}

static struct dplugin *dplugin_free(struct dplugin *dp)
{
	if (!dp)
		return NULL;
	if (dp->plugin)
		plugin_set_reg(dp->plugin, NULL);
	kubelet_reg_free(dp->reg);
	plugin_free(dp->plugin);
	free(dp->name);
	free(dp);
	return NULL;
}

/*
 * Adds a plugin for @r (taken: freed on failure too) and serves and registers it. A socket
 * that cannot be served yet is retried (plugin_serve); only a failure to create the objects
 * loses the resource, and that is logged.
 */
static int dplugin_add(struct daemon *d, struct resource *r)
{
	struct dplugin *dp = calloc(1, sizeof(*dp));
	int e = -ENOMEM;

	if (!dp || !(dp->name = strdup(r->name))) {
		log_error("cannot advertise resource: out of memory", "resource=%s", r->name);
		resource_free(r);
		free(dp);
		return -ENOMEM;
	}
	dp->d = d;
	/* plugin_new takes @r on success only (plugin.h). */
	e = plugin_new(&d->ctx, r, on_plugin, dp, &dp->plugin);
	if (e < 0) {
		resource_free(r);
		goto fail;
	}
	plugin_refresh(dp->plugin);
	e = kubelet_reg_new(d->kubelet, plugin_resource(dp->plugin)->name,
			    plugin_endpoint(dp->plugin), on_reg, dp, &dp->reg);
	if (e < 0)
		goto fail;
	kubelet_reg_set_dial_fn(dp->reg, on_dial);
	plugin_set_reg(dp->plugin, dp->reg);
	dp->next = d->plugins;
	d->plugins = dp;
	log_info("advertising resource", "resource=%s devices=%u socket=%s", dp->name,
		 plugin_resource(dp->plugin)->n_devices, plugin_socket_path(dp->plugin));
	dplugin_register(dp);
	return 0;
fail:
	(void)log_error_errno(e, "cannot advertise resource", "resource=%s", dp->name);
	dplugin_free(dp);
	return e;
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
	kubelet_reg_stop(dp->reg);
	dp->d->n_stopping++;
	plugin_shutdown(dp->plugin, STOP_GRACE, plugin_stopped, dp);
}

/* The CDI spec for the current GPUs, when a cdi-* strategy wants one (written off the loop). */
static void write_cdi(struct daemon *d)
{
	struct cdi_opts o = {
		.spec_dir = d->cfg.cdi_spec_dir,
		.driver_root = d->cfg.driver_root,
		.dev_root = d->cfg.dev_root,
		.container_driver_root = d->cfg.container_driver_root,
		.id_strategy = d->cfg.device_id_strategy == CONFIG_DEVICE_ID_INDEX ?
				       ALLOC_ID_INDEX :
				       ALLOC_ID_UUID,
	};

	/* The driver path's hook point: enforcement learns it in daemon_enforce_node(). */
	d->enforce_cdi_hook = false;
	if (!(d->cfg.device_list_strategy & (CONFIG_DLS_CDI_ANNOTATIONS | CONFIG_DLS_CDI_CRI))) {
		cdi_writer_clear(d->cdi);
		return;
	}
	if (daemon_cdi_memlimit_hook(d)) {
		o.memlimit_hook_path = CDI_MEMLIMIT_HOOK_PATH;
		d->enforce_cdi_hook = true;
	}
	(void)cdi_writer_set(d->cdi, &o, &d->info);
}

static void apply_ctx_from_config(struct daemon *d)
{
	const struct config *c = &d->cfg;

	d->ctx.loop = d->loop;
	d->ctx.gpu_healthy = gpu_healthy;
	d->ctx.health_userdata = d;
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
	d->ctx.alloc.look_dev_root = devnode_look_root(c->container_driver_root, c->dev_root);
	d->ctx.alloc.cdi_annotation_prefix = "cdi.k8s.io/";
	d->ctx.alloc.cdi_kind = "k8s.device-plugin.nvidia.com/gpu";
	d->ctx.split_allow = c->gpumem.on_split == CONFIG_ON_SPLIT_ALLOW;
	d->ctx.mask = c->gpumem.placement == CONFIG_PLACEMENT_MASK;
	d->ctx.mask_hysteresis_mib = c->gpumem.mask_hysteresis_mib;
	d->ctx.limits.max_recv_msg = (size_t)c->grpc.max_recv_msg_bytes;
	d->ctx.limits.max_conns = c->grpc.max_connections;
}

/* --- gpumem masking: which units live pods hold, from the kubelet's pod-resources API --- */

static void on_podres(struct podres *pr, const uint8_t *resp, size_t len, void *userdata)
{
	struct daemon *d = userdata;

	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		int r;

		if (plugin_resource(dp->plugin)->kind != RESOURCE_GPUMEM || dp->stopping ||
		    !d->ctx.mask)
			continue;
		r = plugin_set_live_podres(dp->plugin, resp, len);
		if (r == -EBADMSG)
			log_warn("malformed pod-resources answer, ignoring", "bytes=%zu", len);
		if (r < 0)
			return;
	}
	/* The allocations of pods that are gone: their directories go (enforce.h). */
	daemon_enforce_podres(d, resp, len);
}

static void podres_stop(struct daemon *d)
{
	if (d->metrics)
		metrics_set_podres(d->metrics, NULL);
	d->podres = podres_free(d->podres);
}

/*
 * The pod-resources poller: periodic for gpumem masking and for gpumem enforcement (the
 * allocations of gone pods are removed; an Allocate may come at any time, so it polls while
 * enforcement runs), on demand (each scrape) for metrics alone, off when none wants it. Call
 * when any changes; d->metrics_started too.
 */
static void update_podres(struct daemon *d)
{
	bool placement = false, mask, want;

	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		const struct resource *r = plugin_resource(dp->plugin);

		if (!dp->stopping && r->kind == RESOURCE_GPUMEM && r->n_gpus >= 2 && d->ctx.mask)
			placement = true;
	}
	mask = placement || d->enforce;
	want = (mask || d->metrics) && d->cfg.pod_resources_socket &&
	       *d->cfg.pod_resources_socket && !d->stopping;
	if (d->podres && (!want || d->podres_mask != mask))
		podres_stop(d);
	if (!want)
		return;
	if (!d->podres &&
	    podres_new(d->loop, d->cfg.pod_resources_socket, mask ? PODRES_INTERVAL : 0,
		       mask ? on_podres : NULL, d, &d->podres) == 0) {
		d->podres_mask = mask;
		if (placement)
			log_info("watching pod-resources for gpumem placement", "socket=%s",
				 d->cfg.pod_resources_socket);
		else if (mask)
			log_info("watching pod-resources for gpumem enforcement", "socket=%s",
				 d->cfg.pod_resources_socket);
	}
	if (d->metrics)
		metrics_set_podres(d->metrics, d->podres);
}

bool daemon_resource_matches(const struct resource *r, const struct gpu_info *info)
{
	for (unsigned s = 0; s < r->n_gpus; s++)
		if (r->gpus[s].gpu >= info->n_devices ||
		    !streq(r->uuids[s], info->devices[r->gpus[s].gpu].uuid))
			return false;
	return true;
}

size_t daemon_reload_match(const char *const *running, size_t n_running, const char *const *wanted,
			   size_t n_wanted, int *ret_take, bool *ret_add)
{
	size_t added = 0;

	for (size_t j = 0; j < n_wanted; j++)
		ret_add[j] = true;
	for (size_t i = 0; i < n_running; i++) {
		ret_take[i] = -1;
		for (size_t j = 0; running[i] && j < n_wanted; j++)
			if (ret_add[j] && streq(running[i], wanted[j])) {
				ret_take[i] = (int)j;
				ret_add[j] = false;
				break;
			}
	}
	for (size_t j = 0; j < n_wanted; j++)
		added += ret_add[j];
	return added;
}

/* Brings the plugins in line with the config and GPUs (daemon_reload_match() says how). */
static int sync_plugins(struct daemon *d)
{
	struct resource *res[RESOURCE_NODE_MAX];
	struct dplugin *live[ELEMENTSOF(res)];
	const char *running[ELEMENTSOF(res)], *wanted[ELEMENTSOF(res)];
	int take[ELEMENTSOF(res)];
	bool add[ELEMENTSOF(res)];
	size_t n_live = 0;
	int n = assign_build_resources(&d->cfg, &d->info, res, ELEMENTSOF(res));

	if (n < 0) {
		/* Keep what still matches the GPUs; a resource naming a GPU that is gone cannot stay. */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			if (!dp->stopping &&
			    !daemon_resource_matches(plugin_resource(dp->plugin), &d->info)) {
				log_error(
					"resource no longer matches the GPUs and the config cannot be applied, closing it",
					"resource=%s", dp->name);
				dplugin_stop(dp);
			}
		daemon_enforce_update(d);
		update_podres(d);
		return n;
	}
	write_cdi(d);
	/* Each live plugin came from the last build, whose names are unique: at most RESOURCE_NODE_MAX. */
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		if (!dp->stopping) {
			assert(n_live < ELEMENTSOF(live));
			live[n_live] = dp;
			running[n_live++] = dp->name;
		}
	for (int j = 0; j < n; j++)
		wanted[j] = res[j]->name;
	(void)daemon_reload_match(running, n_live, wanted, (size_t)n, take, add);
	for (size_t i = 0; i < n_live; i++) {
		if (take[i] < 0) {
			log_info("resource no longer advertised", "resource=%s", live[i]->name);
			dplugin_stop(live[i]);
			continue;
		}
		plugin_apply_limits(live[i]->plugin);
		plugin_set_resource(live[i]->plugin, res[take[i]]);
	}
	for (int j = 0; j < n; j++)
		if (add[j])
			(void)dplugin_add(d, res[j]);
	daemon_enforce_update(d);
	update_podres(d);
	return n;
}

/* While no GPU is found: try again, re-initialising the library (a driver may have come). */
static void rediscover_tick(struct loop_timer *t, void *userdata)
{
	struct daemon *d = userdata;

	if (d->info.n_devices || d->stopping)
		return;
	gpu_monitor_discover(d->monitor, true);
}

/* --- kubelet events --- */

static void on_kubelet(struct kubelet *k, enum kubelet_event ev, const char *name, void *userdata)
{
	struct daemon *d = userdata;

	if (d->stopping)
		return;
	switch (ev) {
	case KUBELET_EVENT_SOCKET_CREATED:
		d->kubelet_restarts++;
		log_info("kubelet socket created, re-registering", "socket=%s",
			 d->cfg.kubelet_socket);
		/* A live kubelet stream is the new kubelet's (or the old one's, whose end re-registers). */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			dplugin_register(dp);
		return;
	case KUBELET_EVENT_DIR_GONE:
		log_warn("device-plugin directory removed, serving again when it is back", "dir=%s",
			 name);
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			plugin_unserve(dp->plugin, false);
		return;
	case KUBELET_EVENT_DIR_BACK:
		log_info("device-plugin directory back, serving our sockets again", "dir=%s", name);
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
			plugin_unserve(dp->plugin, true);
			dplugin_register(dp);
		}
		return;
	case KUBELET_EVENT_FILE_DELETED:
		break;
	case KUBELET_EVENT_FILE_CREATED:
		/* Another instance put its socket at our path (renamed over ours): stand down. */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			if (!dp->stopping && !plugin_ceded(dp->plugin) &&
			    streq(name, plugin_endpoint(dp->plugin)) &&
			    !plugin_socket_ok(dp->plugin) && plugin_path_taken(dp->plugin)) {
				plugin_unserve(dp->plugin, false);
				(void)plugin_serve(dp->plugin);
			}
		/* fallthrough */
	case KUBELET_EVENT_FILE_CHANGED:
		/* Another instance of ours appeared or registered (plugin.h, upgrades). */
		for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
			if (!dp->stopping)
				plugin_peer_event(dp->plugin, name);
		return;
	case KUBELET_EVENT_COUNT:
	default:
		return;
	}
	/*
	 * Our socket deleted: made again, unless another instance took the path (the plugin
	 * stands down then); a peer's socket deleted while we stand down: the path is ours again.
	 */
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next) {
		if (dp->stopping || !streq(name, plugin_endpoint(dp->plugin)) ||
		    plugin_socket_ok(dp->plugin))
			continue;
		if (!plugin_ceded(dp->plugin) && !plugin_path_taken(dp->plugin))
			log_warn("device plugin socket deleted, recreating", "resource=%s path=%s",
				 dp->name, plugin_socket_path(dp->plugin));
		plugin_unserve(dp->plugin, false);
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
	podres_stop(d);
	/*
	 * Closing an inotify instance waits for a kernel grace period (10-20 ms): done while the
	 * kubelet still counts our devices, not between our streams' end and our exit, which is
	 * the time it counts none. The registrations are detached (kubelet.h); nothing watches now.
	 */
	d->config_watch = config_watch_free(d->config_watch);
	d->kubelet = kubelet_free(d->kubelet);
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		dplugin_stop(dp);
	if (d->n_stopping == 0)
		loop_exit(l, d->exit_code);
	else
		loop_timer_arm(d->stop_deadline, STOP_DEADLINE);
}

/*
 * Settings a SIGHUP cannot apply (the NVML library and the driver roots: the monitor's worker
 * holds the library they chose): @nc keeps the running values, and each is logged.
 */
static void keep_restart_settings(struct daemon *d, struct config *nc)
{
	const char *keys[8];
	int n = config_restart_needed(&d->cfg, nc, keys, ELEMENTSOF(keys));
	char **fields[] = { &nc->driver_root, &nc->container_driver_root, &nc->nvml_lib };
	const char *const old[] = { d->cfg.driver_root, d->cfg.container_driver_root,
				    d->cfg.nvml_lib };

	for (int i = 0; i < n && i < (int)ELEMENTSOF(keys); i++)
		log_warn("config setting needs a restart, keeping the running value", "key=%s",
			 keys[i]);
	if (n <= 0)
		return;
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		char *v = old[i] ? strdup(old[i]) : NULL;

		if (old[i] && !v)
			continue; /* out of memory: the new value stays, harmless until a restart */
		free(*fields[i]);
		*fields[i] = v;
	}
}

/*
 * devicePluginPath or kubeletSocket changed: the kubelet watch moves, every plugin closes at
 * the old place, and sync_plugins() (after the rediscovery) opens them at the new one.
 */
static void move_paths(struct daemon *d)
{
	int r = kubelet_set_paths(d->kubelet, d->cfg.device_plugin_path, d->cfg.kubelet_socket);

	if (r < 0) {
		(void)log_error_errno(r, "cannot move to the new device-plugin paths",
				      "dir=%s socket=%s", d->cfg.device_plugin_path,
				      d->cfg.kubelet_socket);
		return;
	}
	log_info("device-plugin paths changed, moving our sockets", "dir=%s kubelet_socket=%s",
		 d->cfg.device_plugin_path,
		 d->cfg.kubelet_socket && *d->cfg.kubelet_socket ? d->cfg.kubelet_socket :
								   "(registration off)");
	if (mkdir(d->cfg.device_plugin_path, 0750) < 0 && errno != EEXIST)
		(void)log_warn_errno(-errno, "creating the device-plugin directory failed",
				     "path=%s", d->cfg.device_plugin_path);
	for (struct dplugin *dp = d->plugins; dp; dp = dp->next)
		dplugin_stop(dp);
}

/*
 * A reload (SIGHUP, or the config file changed): a new config now, on the loop (the file read
 * is non-blocking and bounded); the rediscovery runs on the monitor's worker and on_discovered()
 * applies the result, so serving never waits for NVML.
 */
static void reload(struct daemon *d, const char *why)
{
	struct config_diag dg = { 0 };
	struct config nc = { 0 }, old;
	bool paths_changed, podres_changed;
	int r;

	if (d->stopping)
		return;
	log_info("reloading", "%s", why);
	r = config_init(&nc);
	if (r >= 0)
		r = config_build(&nc, d->envp, d->flags, d->n_flags, &dg);
	if (r >= 0)
		log_line_format = nc.log_format;
	log_diag(&dg, false);
	config_diag_release(&dg);
	if (r < 0) {
		config_release(&nc);
		return;
	}
	keep_restart_settings(d, &nc);
	paths_changed = !streq_ptr(nc.device_plugin_path, d->cfg.device_plugin_path) ||
			!streq_ptr(nc.kubelet_socket, d->cfg.kubelet_socket);
	podres_changed = !streq_ptr(nc.pod_resources_socket, d->cfg.pod_resources_socket);
	old = d->cfg;
	d->cfg = nc;
	log_max_level = d->cfg.log_level;
	apply_ctx_from_config(d);
	(void)apply_monitor_opts(d);
	daemon_metrics_reload(d, &old);
	daemon_labels_reload(d, &old);
	daemon_backstop_reload(d);
	config_release(&old);
	if (podres_changed)
		podres_stop(d);
	update_podres(d); /* metrics started or stopped; a new socket */
	if (paths_changed)
		move_paths(d);
	gpu_monitor_discover(d->monitor, false);
}

static void on_hup(struct loop *l, int signo, void *userdata)
{
	struct daemon *d = userdata;

	/* The file as read now is the one loaded: the watch must not load it again. */
	if (d->config_watch)
		config_watch_loaded(d->config_watch);
	reload(d, "signal=SIGHUP");
}

/* The config file's content changed (a ConfigMap update, an edit): as on SIGHUP. */
static void on_config_changed(struct config_watch *w, void *userdata)
{
	reload(userdata, "reason=config-file-changed");
}

/* Only a real file is watched: not /dev/null (NVIDIA's config-manager's "no config"). */
static void watch_config(struct daemon *d)
{
	const char *p = d->cfg.config_file;
	int r;

	if (!p || !*p || streq(p, "/dev/null"))
		return;
	r = config_watch_new(d->loop, p, on_config_changed, d, &d->config_watch);
	if (r < 0)
		(void)log_warn_errno(r, "cannot watch the config file, reload it with SIGHUP",
				     "path=%s", p);
}

int daemon_run(char *const *envp, const struct config_flag *flags, size_t n_flags)
{
	struct config_diag dg = { 0 };
	struct daemon d = { .envp = envp,
			    .flags = flags,
			    .n_flags = n_flags,
			    .exit_code = 0,
			    .memlimit_hook_probe = MEMLIMIT_HOOK_UNPROBED };
	struct gpu_backend_opts nvml_opts;
	int r, rc = 1;

	/*
	 * Large blocks from their own mappings, returned to the system when freed: every scrape
	 * answer is a copy of the exposition (~90 KiB for 8 GPUs, under glibc's 128 KiB default),
	 * and copies freed in the heap's middle stay resident, so the daemon's RSS followed the
	 * most scrapes ever in flight at once. A hint: failure changes nothing else.
	 */
	(void)mallopt(M_MMAP_THRESHOLD, DAEMON_MMAP_THRESHOLD);
	r = config_init(&d.cfg);
	if (r >= 0)
		r = config_build(&d.cfg, envp, flags, n_flags, &dg);
	if (r >= 0) /* the config's own warnings already in the format it asks for */
		log_line_format = d.cfg.log_format;
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
	/* A directory we cannot make now may come later (the kubelet makes it): watched, retried. */
	if (mkdir(d.cfg.device_plugin_path, 0750) < 0 && errno != EEXIST)
		(void)log_warn_errno(-errno,
				     "creating the device-plugin directory failed, waiting for it",
				     "path=%s", d.cfg.device_plugin_path);
	r = cdi_writer_new(d.loop, &d.cdi);
	if (r < 0) {
		log_error_errno(r, "starting failed", NULL);
		goto out;
	}
	d.ctx.cdi_error = cdi_writer_error(d.cdi);
	cdi_writer_set_settled_cb(d.cdi, cdi_settled, &d);
	r = kubelet_new(d.loop, d.cfg.device_plugin_path, d.cfg.kubelet_socket, on_kubelet, &d,
			&d.kubelet);
	if (r < 0) {
		log_error_errno(r, "starting failed", NULL);
		goto out;
	}
	log_info("starting", "device_plugin_path=%s kubelet_socket=%s", d.cfg.device_plugin_path,
		 d.cfg.kubelet_socket && *d.cfg.kubelet_socket ? d.cfg.kubelet_socket :
								 "(registration off)");
	/* The monitor keeps its own copy: a thread stuck in the driver may outlive us. */
	config_backend_opts(&d.cfg, &nvml_opts);
	nvml_opts.sysfs_root = getenv("EDGEGPU_SYSFS_ROOT"); /* tests: a fake /sys */
	r = gpu_monitor_new(d.loop, &nvml_opts, NULL, on_health, on_discovered, &d, &d.monitor);
	if (r < 0) {
		log_error_errno(r, "starting the GPU monitor failed", NULL);
		goto out;
	}
	if (apply_monitor_opts(&d) < 0)
		goto out;
	d.metrics_started = update_podres;
	daemon_metrics_start(&d);
	daemon_labels_start(&d);
	daemon_backstop_start(&d);
	update_podres(&d);
	watch_config(&d);
	gpu_monitor_discover(d.monitor, false);
	rc = loop_run(d.loop);
	if (rc < 0)
		rc = 1;
	if (d.monitor) {
		struct gpu_monitor_stats st;

		gpu_monitor_get_stats(d.monitor, &st);
		log_info(
			"health monitor stats",
			"events=%llu xids=%llu xids_ignored=%llu ecc_single=%llu ecc_double=%llu lost=%llu reinits=%llu wait_errors=%llu probes=%llu hung_calls=%llu",
			(unsigned long long)st.events, (unsigned long long)st.xids,
			(unsigned long long)st.xids_ignored, (unsigned long long)st.ecc_single,
			(unsigned long long)st.ecc_double, (unsigned long long)st.lost,
			(unsigned long long)st.reinits, (unsigned long long)st.wait_errors,
			(unsigned long long)st.probes, (unsigned long long)st.hung_calls);
	}
	log_info("stopped", NULL);
out:
	while (d.plugins) {
		struct dplugin *dp = d.plugins;

		d.plugins = dp->next;
		dplugin_free(dp);
	}
	daemon_enforce_free(&d); /* its files stay: the next start reads them back */
	d.config_watch = config_watch_free(d.config_watch);
	daemon_metrics_stop(&d);  /* before what it borrows: the poller and the monitor */
	daemon_backstop_stop(&d); /* before the monitor it listens to */
	daemon_labels_stop(&d);
	d.podres = podres_free(d.podres);
	d.kubelet = kubelet_free(d.kubelet);
	d.cdi = cdi_writer_free(d.cdi);
	d.monitor = gpu_monitor_free(d.monitor); /* never waits for a call stuck in NVML */
	gpu_state_release(&d);
	free(d.discovery_err);
	loop_timer_free(d.rediscover);
	loop_timer_free(d.stop_deadline);
	loop_timer_free(d.reap);
	loop_free(d.loop);
	config_release(&d.cfg);
	return rc;
}
