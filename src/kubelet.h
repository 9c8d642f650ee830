#pragma once

/*
 * The kubelet side of the lifecycle: Register() calls on kubelet.sock with retry and backoff,
 * and an inotify watch on the device-plugin directory that reports a new kubelet.sock (the
 * kubelet restarted, which also deletes our sockets) and deleted files. Logs (module=kubelet).
 */

#include <stdbool.h>

#include "util.h"

struct loop;
struct kubelet;
struct kubelet_reg;

enum kubelet_event {
	KUBELET_EVENT_SOCKET_CREATED, /* kubelet.sock appeared: a (new) kubelet is serving */
	KUBELET_EVENT_FILE_DELETED,   /* a file in the plugin directory was deleted: @name */
	KUBELET_EVENT_COUNT,
};

typedef void kubelet_event_fn(struct kubelet *k, enum kubelet_event ev, const char *name,
			      void *userdata);
/*
 * A registration attempt finished: @ok true once the kubelet accepted it. The kubelet opens
 * ListAndWatch right after it accepts; an owner that sees no stream follow should register
 * again, and one whose stream is still open should stop retrying after a refusal.
 */
typedef void kubelet_reg_fn(struct kubelet_reg *reg, bool ok, void *userdata);

/*
 * Watches @plugin_dir (and the directory of @kubelet_sock when it differs). @kubelet_sock NULL
 * or "" disables registration (NVIDIA's --kubelet-socket ""). Returns 0 or -errno.
 */
int kubelet_new(struct loop *l, const char *plugin_dir, const char *kubelet_sock,
		kubelet_event_fn *fn, void *userdata, struct kubelet **ret) WARN_UNUSED;
struct kubelet *kubelet_free(struct kubelet *k);
bool kubelet_enabled(const struct kubelet *k);

/* A registration of @resource served at @endpoint (a file name in the plugin directory). */
int kubelet_reg_new(struct kubelet *k, const char *resource, const char *endpoint,
		    kubelet_reg_fn *fn, void *userdata, struct kubelet_reg **ret) WARN_UNUSED;
/*
 * Registers now. A pending retry is replaced; an attempt in flight is allowed to finish and,
 * when it fails, is retried at once. Retries with backoff (1 ms growing to 5 s) until the
 * kubelet accepts.
 */
void kubelet_reg_start(struct kubelet_reg *reg);
/* Stops retrying (an attempt in flight is cancelled). */
void kubelet_reg_stop(struct kubelet_reg *reg);
bool kubelet_reg_registered(const struct kubelet_reg *reg);
/* Successful registrations so far. */
unsigned kubelet_reg_count(const struct kubelet_reg *reg);
struct kubelet_reg *kubelet_reg_free(struct kubelet_reg *reg);
