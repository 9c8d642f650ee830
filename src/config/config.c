/*
 * config.c: the public entry points of the config module (config.h): init; loading a buffer or
 * a file (read without blocking, parsed into a copy that replaces the config only when clean);
 * the whole build sequence; the dump; what a reload cannot apply. The rest of the module is
 * spread over config-*.c by concern, each lower than this file; config-int.h is what they share
 * and draws their order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-int.h"
#include "file-read.h"

extern char **environ;

int config_init(struct config *c)
{
	*c = (struct config){
		.mig_strategy = CONFIG_MIG_NONE,
		.fail_on_init_error = true,
		.device_list_strategy = CONFIG_DLS_ENVVAR,
		.device_id_strategy = CONFIG_DEVICE_ID_UUID,
		.log_level = LOG_LEVEL_INFO,
		.log_format = LOG_FORMAT_LOGFMT,
		.rediscover_interval = 60 * USEC_PER_SEC,
		.health = { .poll_interval = 5 * USEC_PER_SEC,
			    .event_poll_interval = 60 * USEC_PER_SEC,
			    .call_timeout = 10 * USEC_PER_SEC },
		.grpc = { .max_recv_msg_bytes = 16 * MIB, .max_connections = 64 },
		.gpumem = {
			.devices = { .kind = CONFIG_DEVICES_LIST },
			.unit_mib = 1,
			.reserve_mib = 512,
			.on_split = CONFIG_ON_SPLIT_REJECT,
			.placement = CONFIG_PLACEMENT_MASK,
			.mask_hysteresis_mib = 1024,
			.enforcement = {
				.interposer = true,
				.driver = true,
				.preload = CONFIG_PRELOAD_LD_SO_PRELOAD,
				.managed = CONFIG_MANAGED_COUNT,
				.backstop = { .tolerance_percent = 110,
					      .after = 30 * USEC_PER_SEC,
					      .interval = 2 * USEC_PER_SEC },
			},
		},
		.metrics = {
			.min_interval = USEC_PER_SEC,
			.scrape_wait = 500 * USEC_PER_MSEC,
			.hostname_label = CONFIG_HOSTNAME_LABEL_UPPER,
			.max_connections = 16,
			.connection_timeout = 10 * USEC_PER_SEC,
		},
		.labels = { .expiry = 3600 * USEC_PER_SEC },
	};
	c->driver_root = strdup("/");
	c->container_driver_root = strdup("/driver-root");
	c->device_plugin_path = strdup(CONFIG_DEFAULT_DEVICE_PLUGIN);
	c->pod_resources_socket = strdup(CONFIG_DEFAULT_POD_RESOURCES);
	c->cdi_spec_dir = strdup("/var/run/cdi");
	c->gpumem.resource_name = strdup(CONFIG_DEFAULT_GPUMEM);
	c->metrics.address = strdup(":9400");
	c->metrics.host_proc = strdup("/proc");
	c->metrics.pod_log_dir = strdup("/var/log");
	c->labels.file = strdup(CONFIG_DEFAULT_LABELS_FILE);
	c->host_root = strdup("/");
	c->tegra_device_id = strdup("tegra");
	c->gpumem.enforcement.library = strdup(CONFIG_DEFAULT_INTERPOSER_LIB);
	c->gpumem.enforcement.state_dir = strdup(CONFIG_DEFAULT_GPUMEM_STATE_DIR);
	if (!c->host_root || !c->tegra_device_id || !c->gpumem.enforcement.library ||
	    !c->gpumem.enforcement.state_dir || !c->driver_root || !c->container_driver_root ||
	    !c->device_plugin_path || !c->pod_resources_socket || !c->cdi_spec_dir ||
	    !c->gpumem.resource_name || !c->metrics.address || !c->metrics.host_proc ||
	    !c->metrics.pod_log_dir || !c->labels.file) {
		config_release(c);
		return -ENOMEM;
	}
	return 0;
}

/* The file as a tree, then the tree into @c; problems are recorded in @x. 0 or -ENOMEM. */
static int parse_yaml(struct ctx *x, struct config *c, const char *data, size_t len)
{
	struct ytree doc = { 0 };
	struct ytree_error err;
	int r;

	r = ytree_load(&doc, data, len, 0, YAML_NODES_MAX, &err);
	if (r == -EINVAL)
		r = config_diag_add(x, false, x->file, (struct config_pos){ err.line, err.column },
				    NULL, "%s%s", err.syntax ? "invalid YAML: " : "", err.message);
	else if (r >= 0 && x->n_errors == 0 && doc.has_root) {
		x->doc = &doc;
		r = config_parse_map(x, config_root_fields, c, "", ytree_root(&doc));
		x->doc = NULL;
	}
	ytree_release(&doc);
	return r;
}

int config_load_buffer(struct config *c, const char *name, const char *data, size_t len,
		       struct config_diag *d)
{
	struct ctx x = { .d = d, .file = name };
	struct config tmp;
	char *file;
	int r;

	if (len > CONFIG_FILE_MAX) {
		r = config_diag_add(&x, false, name, (struct config_pos){ 0 }, NULL,
				    "the file is larger than %zu bytes", CONFIG_FILE_MAX);
		return r < 0 ? r : -EFBIG;
	}
	file = name ? strdup(name) : NULL;
	if (name && !file)
		return -ENOMEM;
	r = config_copy(&tmp, c);
	if (r < 0) {
		free(file);
		return r;
	}
	free(tmp.config_file);
	tmp.config_file = file;
	r = parse_yaml(&x, &tmp, data, len);
	if (r >= 0 && x.n_errors == 0)
		r = config_finish_file(&x, &tmp);
	if (r >= 0 && x.n_errors == 0)
		r = config_check(&x, &tmp);
	return config_commit(&x, c, &tmp, r);
}

/*
 * Reads the config file without ever blocking (file-read.h): refused unless it is a regular
 * file (a FIFO at the path would otherwise stall the daemon's only thread at start and on every
 * SIGHUP). /dev/null is the one exception, because NVIDIA's config-manager points the file there
 * for "no config", and reading it never blocks. Returns 0, -ENOMEM, -EFBIG, -EINVAL (not a
 * regular file; *@ret_type says what it is; -EISDIR for a directory) or -errno of open/read.
 */
static int read_config_file(const char *path, char **ret, size_t *ret_len, const char **ret_type)
{
	int r = read_file_at(AT_FDCWD, path, READ_DEV_NULL, CONFIG_FILE_MAX, ret, ret_len,
			     ret_type);

	return r == -EBADFD ? -EINVAL : r;
}

int config_load_file(struct config *c, const char *path, struct config_diag *d)
{
	struct ctx x = { .d = d, .file = path };
	const char *type = NULL;
	char *data = NULL;
	size_t len = 0;
	int r, q;

	r = read_config_file(path, &data, &len, &type);
	if (r == -ENOMEM)
		return r;
	if (r == -EFBIG) {
		q = config_diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
				    "the file is larger than %zu bytes", CONFIG_FILE_MAX);
		return q < 0 ? q : r;
	}
	if (type) {
		q = config_diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
				    "cannot read the file: it is %s, not a regular file", type);
		return q < 0 ? q : r;
	}
	if (r < 0) {
		char eb[128];

		q = config_diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
				    "cannot read the file: %s", strerror_r(-r, eb, sizeof(eb)));
		return q < 0 ? q : r;
	}
	r = config_load_buffer(c, path, data, len, d);
	free(data);
	return r;
}

int config_build(struct config *c, char *const *envp, const struct config_flag *flags,
		 size_t n_flags, struct config_diag *d)
{
	const char *path = NULL;
	struct config tmp;
	int r, first = 0;

	if (!envp)
		envp = environ;
	for (size_t i = 0; i < n_flags; i++)
		if (streq(config_flag_name(flags[i].name), "config-file"))
			path = flags[i].value;
	if (!path)
		path = config_env_get(envp, "CONFIG_FILE");
	r = config_init(&tmp);
	if (r < 0)
		return r;
	if (path && *path) {
		r = config_load_file(&tmp, path, d);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && !first)
			first = r;
	}
	r = config_apply_env(&tmp, envp, d);
	if (r == -ENOMEM)
		goto out;
	if (r < 0 && !first)
		first = r;
	for (size_t i = 0; i < n_flags; i++) {
		r = config_set_flag(&tmp, flags[i].name, flags[i].value, d);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && !first)
			first = r;
	}
	/* config_file says what was loaded, whatever the flags and environment said. */
	if (!streq_ptr(tmp.config_file, path)) {
		free(tmp.config_file);
		tmp.config_file = NULL;
		if (path && *path && !(tmp.config_file = strdup(path))) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (path && !*path)
		tmp.config_file = mfree(tmp.config_file);
	r = first;
	if (r >= 0)
		r = config_validate(&tmp, d);
out:
	if (r < 0) {
		config_release(&tmp);
		return r;
	}
	config_release(c);
	*c = tmp;
	return 0;
}

int config_dump(const struct config *c, struct buf *out)
{
	int r;

	r = buf_printf(out, "# edgegpu effective configuration\n");
	if (r >= 0 && c->config_file) {
		r = buf_printf(out, "# config file: ");
		if (r >= 0)
			r = config_dump_str(out, c->config_file);
		if (r >= 0)
			r = buf_printf(out, "\n");
	}
	if (r >= 0)
		r = config_dump_fields(config_root_fields, c, 0, out);
	return r;
}

void config_backend_opts(const struct config *c, struct gpu_backend_opts *ret)
{
	static const enum gpu_backend_kind kinds[] = {
		[CONFIG_DISCOVERY_AUTO] = GPU_BACKEND_AUTO,
		[CONFIG_DISCOVERY_NVML] = GPU_BACKEND_NVML,
		[CONFIG_DISCOVERY_TEGRA] = GPU_BACKEND_TEGRA,
	};

	*ret = (struct gpu_backend_opts){
		.kind = c->discovery >= 0 && c->discovery < CONFIG_DISCOVERY_COUNT ?
				kinds[c->discovery] :
				GPU_BACKEND_AUTO,
		.lib_path = c->nvml_lib,
		.driver_root = c->container_driver_root,
		.host_root = c->host_root,
		.tegra_device_id = c->tegra_device_id,
		.tegra_mem_mib = c->tegra_mem_mib,
	};
}

int config_restart_needed(const struct config *old, const struct config *new, const char **ret_keys,
			  size_t max)
{
	static const struct {
		const char *key;
		size_t offset;
	} restart[] = {
		{ "flags.nvidiaDriverRoot", offsetof(struct config, driver_root) },
		{ "flags.plugin.containerDriverRoot",
		  offsetof(struct config, container_driver_root) },
		{ "edgegpu.nvmlLib", offsetof(struct config, nvml_lib) },
		{ "edgegpu.hostRoot", offsetof(struct config, host_root) },
		{ "edgegpu.tegra.deviceId", offsetof(struct config, tegra_device_id) },
	};
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(restart); i++) {
		const char *a = *(char *const *)((const char *)old + restart[i].offset),
			   *b = *(char *const *)((const char *)new + restart[i].offset);

		if (streq_ptr(a, b))
			continue;
		if (n < max)
			ret_keys[n] = restart[i].key;
		n++;
	}
	/* The backend is chosen and opened once: its settings too. */
	if (old->discovery != new->discovery) {
		if (n < max)
			ret_keys[n] = "flags.deviceDiscoveryStrategy";
		n++;
	}
	if (old->tegra_mem_mib != new->tegra_mem_mib) {
		if (n < max)
			ret_keys[n] = "edgegpu.tegra.memoryMiB";
		n++;
	}
	return (int)n;
}
