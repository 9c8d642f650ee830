#pragma once

/*
 * Private to plugin.c (lifecycle, socket, ListAndWatch, masking) and plugin-alloc.c (the
 * unary calls). Everything runs on the loop's thread.
 */

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "grpc.h"
#include "plugin.h"

struct watcher {
	struct grpc_call *call;
	struct plugin *plugin;
	struct watcher *next;
	bool kubelet; /* the kubelet's stream (plugin.h says how it is told) */
	pid_t pid;    /* the peer's, 0 when unknown */
};

struct recent_alloc {
	usec_t when;
	unsigned *devs;
	size_t n;
	struct recent_alloc *next;
};

struct plugin {
	const struct plugin_ctx *ctx;
	struct resource *res;
	struct grpc_server *server;
	char *path;
	const char *endpoint; /* @path's file name: what Register sends */
	dev_t sock_dev;
	ino_t sock_ino;
	bool served;			 /* our socket is listening */
	bool ceded;			 /* a live peer holds our path: standing down */
	struct loop_timer *listen_retry; /* plugin_serve() failed: tries again */
	usec_t listen_backoff;
	struct watcher *watchers;
	unsigned n_watchers;
	unsigned n_kubelet_watchers;
	bool expect_called; /* plugin_expect_kubelet() was called at least once */
	bool expect_armed;  /* the next stream is the kubelet's, when pids cannot tell */
	pid_t kubelet_pid;
	struct loop_timer *retry; /* builds the device list again after a failure */
	usec_t retry_usec;
	/* The last list sent (encoded ListAndWatchResponse), shared by every stream; or NULL. */
	struct grpc_shared_msg *snap;
	size_t snap_len;
	uint64_t *live;	  /* gpumem: devices in use per pod-resources, or NULL */
	uint64_t *in_use; /* live | recent, rebuilt by update_mask() */
	struct recent_alloc *recent;
	int mask_slot;
	bool shutting_down;
	uint64_t refused;
	plugin_event_fn *on_event;
	void *userdata;
	void (*shutdown_done)(void *userdata);
	void *shutdown_userdata;
	struct plugin_stats stats;
};

/*
 * A GPU's health, from the context's health callback. A resource built before a reload that
 * failed half-way could name a GPU index the current discovery does not have: such a GPU is
 * unhealthy, never read past.
 */
bool plugin_gpu_up(const struct plugin *p, unsigned gpu);

/* Sends @m and finishes the call OK (or with the status a send failure maps to). */
void plugin_reply(struct grpc_call *call, const ProtobufCMessage *m);
/* Finishes the call with @st and the formatted message, and logs the refusal. */
void plugin_fail(struct grpc_call *call, enum grpc_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The unary handlers (grpc_method_fn), in plugin-alloc.c; @userdata is the plugin. */
void plugin_handle_options(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
void plugin_handle_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
void plugin_handle_preferred(struct grpc_call *call, const uint8_t *req, size_t len,
			     void *userdata);
void plugin_handle_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
