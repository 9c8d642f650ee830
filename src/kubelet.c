#include "kubelet.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "deviceplugin.pb-c.h"
#include "grpc.h"
#include "loop.h"

#define LOG_MODULE "kubelet"
#include "log.h"

#define REGISTER_TIMEOUT (20 * USEC_PER_SEC)
#define BACKOFF_FIRST	 (1 * USEC_PER_MSEC)
#define BACKOFF_MAX	 (5 * USEC_PER_SEC)

struct kubelet {
	struct loop *loop;
	char *plugin_dir;
	char *sock;	 /* kubelet.sock path, NULL when registration is off */
	char *sock_name; /* its base name */
	struct loop_watch *watch_plugin, *watch_sock;
	kubelet_event_fn *fn;
	void *userdata;
};

struct kubelet_reg {
	struct kubelet *k;
	char *resource;
	char *endpoint;
	kubelet_reg_fn *fn;
	void *userdata;
	struct grpc_client_call *call;
	struct loop_timer *retry;
	usec_t backoff;
	bool again; /* started again while a call was in flight */
	bool registered;
	unsigned count;
	unsigned failures; /* consecutive, for log rate */
};

static void on_watch(struct loop_watch *w, const char *name, uint32_t mask, void *userdata)
{
	struct kubelet *k = userdata;

	if (k->sock_name && (mask & (IN_CREATE | IN_MOVED_TO)) && streq(name, k->sock_name)) {
		/* Only a watch on the kubelet socket's own directory may say it was created. */
		if (w == k->watch_sock || (!k->watch_sock && w == k->watch_plugin))
			k->fn(k, KUBELET_EVENT_SOCKET_CREATED, name, k->userdata);
		return;
	}
	if ((mask & (IN_DELETE | IN_MOVED_FROM)) && w == k->watch_plugin)
		k->fn(k, KUBELET_EVENT_FILE_DELETED, name, k->userdata);
}

int kubelet_new(struct loop *l, const char *plugin_dir, const char *kubelet_sock,
		kubelet_event_fn *fn, void *userdata, struct kubelet **ret)
{
	const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM;
	struct kubelet *k;
	char *tmp = NULL;
	int r;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->loop = l;
	k->fn = fn;
	k->userdata = userdata;
	k->plugin_dir = strdup(plugin_dir);
	if (!k->plugin_dir) {
		r = -ENOMEM;
		goto fail;
	}
	r = loop_watch_new(l, plugin_dir, mask, on_watch, k, &k->watch_plugin);
	if (r < 0) {
		log_error_errno(r, "watching the device-plugin directory failed", "path=%s",
				plugin_dir);
		goto fail;
	}
	if (kubelet_sock && *kubelet_sock) {
		char *dir;

		k->sock = strdup(kubelet_sock);
		tmp = strdup(kubelet_sock);
		if (!k->sock || !tmp) {
			r = -ENOMEM;
			goto fail;
		}
		k->sock_name = strdup(basename(tmp));
		if (!k->sock_name) {
			r = -ENOMEM;
			goto fail;
		}
		/* basename() may have modified tmp: take the directory from a fresh copy */
		free(tmp);
		tmp = strdup(kubelet_sock);
		if (!tmp) {
			r = -ENOMEM;
			goto fail;
		}
		dir = dirname(tmp);
		{
			struct stat a, b;

			if (stat(dir, &a) == 0 && stat(plugin_dir, &b) == 0 &&
			    (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
				r = loop_watch_new(l, dir, mask, on_watch, k, &k->watch_sock);
				if (r < 0) {
					log_error_errno(
						r, "watching the kubelet socket directory failed",
						"path=%s", dir);
					goto fail;
				}
			}
		}
	}
	free(tmp);
	*ret = k;
	return 0;
fail:
	free(tmp);
	kubelet_free(k);
	return r;
}

struct kubelet *kubelet_free(struct kubelet *k)
{
	if (!k)
		return NULL;
	loop_watch_free(k->watch_plugin);
	loop_watch_free(k->watch_sock);
	free(k->plugin_dir);
	free(k->sock);
	free(k->sock_name);
	free(k);
	return NULL;
}

bool kubelet_enabled(const struct kubelet *k)
{
	return k->sock != NULL;
}

static void reg_attempt(struct kubelet_reg *reg);

static void reg_retry(struct loop_timer *t, void *userdata)
{
	reg_attempt(userdata);
}

static void reg_schedule_retry(struct kubelet_reg *reg)
{
	loop_timer_arm(reg->retry, reg->backoff);
	reg->backoff = reg->backoff * 4 > BACKOFF_MAX ? BACKOFF_MAX : reg->backoff * 4;
}

static void reg_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		     const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct kubelet_reg *reg = userdata;
	bool again = reg->again;

	reg->call = NULL;
	reg->again = false;
	if (r == 0 && status == GRPC_STATUS_OK) {
		reg->registered = true;
		reg->count++;
		reg->failures = 0;
		reg->backoff = BACKOFF_FIRST;
		log_info("registered with the kubelet", "resource=%s endpoint=%s registrations=%u",
			 reg->resource, reg->endpoint, reg->count);
		/*
		 * A start requested meanwhile is not repeated: a second Register at the same socket is
		 * refused while the kubelet holds our stream. The owner re-registers when no stream
		 * follows (see kubelet_reg_fn).
		 */
		if (reg->fn)
			reg->fn(reg, true, reg->userdata);
		return;
	}
	reg->registered = false;
	reg->failures++;
	/* Log the first failures, then one in ten, so a long kubelet outage stays readable. */
	if (reg->failures <= 3 || reg->failures % 10 == 0) {
		if (r < 0)
			log_warn_errno(r, "register failed, retrying",
				       "resource=%s socket=%s reason=%s attempt=%u", reg->resource,
				       reg->k->sock, log_q(message ? message : ""), reg->failures);
		else
			log_warn("register refused by the kubelet, retrying",
				 "resource=%s grpc_status=%s reason=%s attempt=%u", reg->resource,
				 grpc_status_name((int)status), log_q(message ? message : ""),
				 reg->failures);
	}
	if (reg->fn)
		reg->fn(reg, false, reg->userdata);
	if (again) {
		reg->backoff = BACKOFF_FIRST;
		reg_attempt(reg);
	} else {
		reg_schedule_retry(reg);
	}
}

static void reg_attempt(struct kubelet_reg *reg)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	struct grpc_client_opts co = { .timeout = REGISTER_TIMEOUT };
	uint8_t buf[1024];
	size_t n;
	int r;

	if (!reg->k->sock)
		return;
	loop_timer_disarm(reg->retry);
	opts.get_preferred_allocation_available = true;
	req.version = (char *)"v1beta1";
	req.endpoint = reg->endpoint;
	req.resource_name = reg->resource;
	req.options = &opts;
	n = v1beta1__register_request__get_packed_size(&req);
	if (n > sizeof(buf)) {
		log_error("register request too large", "resource=%s", reg->resource);
		return;
	}
	v1beta1__register_request__pack(&req, buf);
	r = grpc_client_call_start(reg->k->loop, reg->k->sock, "/v1beta1.Registration/Register",
				   buf, n, &co, reg_done, reg, &reg->call);
	if (r < 0) {
		log_warn_errno(r, "register failed, retrying", "resource=%s socket=%s",
			       reg->resource, reg->k->sock);
		reg_schedule_retry(reg);
	}
}

int kubelet_reg_new(struct kubelet *k, const char *resource, const char *endpoint,
		    kubelet_reg_fn *fn, void *userdata, struct kubelet_reg **ret)
{
	struct kubelet_reg *reg;
	int r;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->k = k;
	reg->fn = fn;
	reg->userdata = userdata;
	reg->backoff = BACKOFF_FIRST;
	reg->resource = strdup(resource);
	reg->endpoint = strdup(endpoint);
	if (!reg->resource || !reg->endpoint) {
		kubelet_reg_free(reg);
		return -ENOMEM;
	}
	r = loop_timer_new(k->loop, reg_retry, reg, &reg->retry);
	if (r < 0) {
		kubelet_reg_free(reg);
		return r;
	}
	*ret = reg;
	return 0;
}

void kubelet_reg_start(struct kubelet_reg *reg)
{
	reg->registered = false;
	if (reg->call) {
		reg->again = true;
		return;
	}
	reg->backoff = BACKOFF_FIRST;
	reg_attempt(reg);
}

void kubelet_reg_stop(struct kubelet_reg *reg)
{
	reg->call = grpc_client_call_cancel(reg->call);
	loop_timer_disarm(reg->retry);
	reg->again = false;
}

bool kubelet_reg_registered(const struct kubelet_reg *reg)
{
	return reg->registered;
}

unsigned kubelet_reg_count(const struct kubelet_reg *reg)
{
	return reg->count;
}

struct kubelet_reg *kubelet_reg_free(struct kubelet_reg *reg)
{
	if (!reg)
		return NULL;
	grpc_client_call_cancel(reg->call);
	loop_timer_free(reg->retry);
	free(reg->resource);
	free(reg->endpoint);
	free(reg);
	return NULL;
}
