#pragma once

/*
 * Private to plugin.c (lifecycle, socket, ListAndWatch, masking), plugin-alloc.c (the unary
 * calls) and plugin-peer.c (other instances' sockets on our path, takeover, the kubelet
 * streams we ended). Everything runs on the loop's thread.
 *
 * plugin.c and plugin-alloc.c call each other, and may: they are one object, struct plugin
 * (below), whose code is split by concern. plugin.c hands the unary calls to plugin-alloc.c;
 * an Allocate asks plugin_gpu_up() whether each GPU is healthy and, under gpumem masking, calls
 * plugin_refresh() to send the new device list. Cutting those calls would split the one
 * struct both read and write. scripts/check-layers allows this circle, and no other, because
 * of this line (plugin-peer.c is below plugin.c and calls neither):
 *
 * circle: plugin.c plugin-alloc.c (one struct plugin spans them)
 */

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backoff.h"
#include "grpc.h"
#include "plugin.h"

struct watcher {
	struct grpc_call *call;
	struct plugin *plugin;
	struct watcher *next;
	bool kubelet;  /* the kubelet's stream (plugin.h says how it is told) */
	bool ending;   /* we ended it (a peer that superseded us is gone) */
	pid_t pid;     /* the peer's, 0 when unknown */
	uint64_t conn; /* grpc_call_conn_id() */
};

/* Kubelet streams we ended whose connection the kubelet may not have closed yet. */
#define PLUGIN_ENDED_MAX 8

struct plugin_peer;

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
	bool served;		       /* our socket is listening */
	bool ceded;		       /* a live peer holds our path: standing down */
	char *stem;		       /* our socket name without ".sock": names our peers */
	struct plugin_peer *peers;     /* plugin-peer.c */
	const struct kubelet_reg *reg; /* plugin_set_reg(): its attempts are our clock */
	/* A takeover: until a Register sent after attempt @takeover_attempts is accepted */
	bool takeover;
	unsigned takeover_attempts;
	/* plugin-peer.c: kubelet streams we ended, STREAM_CLOSED held until the kubelet is done */
	uint64_t ended_conn[PLUGIN_ENDED_MAX];
	bool ended_closed[PLUGIN_ENDED_MAX];
	unsigned n_ended;
	usec_t ended_deadline;
	struct loop_timer *ended_timer;
	struct loop_timer *listen_retry; /* plugin_serve() failed: tries again */
	struct backoff listen_backoff;
	struct watcher *watchers;
	unsigned n_watchers;
	unsigned n_kubelet_watchers;
	bool expect_called; /* plugin_expect_kubelet() was called at least once */
	bool expect_armed;  /* the next stream is the kubelet's, when pids cannot tell */
	pid_t kubelet_pid;
	struct loop_timer *retry; /* builds the device list again after a failure */
	struct backoff retry_backoff;
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

/*
 * plugin-peer.c: true when @path is a socket that something listens on and that is not the one we bound
 * (@dev, @ino; 0: none). A stale socket (ECONNREFUSED), a missing path or any other file is
 * free to take.
 */
bool plugin_path_live(const char *path, dev_t dev, ino_t ino);

/*
 * The advisory lock on the device-plugin directory every edgegpu instance holds while it
 * chooses and binds a socket path. Returns the directory's fd, or -1 when it cannot be had
 * (then the caller goes on without it; said once). Tried for at most ~100 ms.
 */
int plugin_dir_lock(const char *dir);
void plugin_dir_unlock(int fd);

/* plugin-peer.c: the peers found at plugin_new(); all of them freed (no event). */
void plugin_peers_scan(struct plugin *p);
void plugin_peers_free(struct plugin *p);
/*
 * A kubelet stream we ended (struct watcher.ending) closed on connection @conn. Returns true
 * when its STREAM_CLOSED is held until the kubelet closes that connection (a registration at
 * our path is refused until the kubelet is done with the old stream), or a second at most;
 * false: report it now.
 */
bool plugin_ended_stream_closed(struct plugin *p, uint64_t conn);
/*
 * A kubelet stream opened: during a takeover, one from a registration sent before it is
 * ended at once (its list was sent: the stream is whole, if short).
 */
void plugin_takeover_stream(struct plugin *p, struct watcher *w);
/* grpc_server_conn_closed_fn for the plugin's server (@userdata: the plugin). */
void plugin_conn_closed(struct grpc_server *s, uint64_t conn_id, void *userdata);

/* The unary handlers (grpc_method_fn), in plugin-alloc.c; @userdata is the plugin. */
void plugin_handle_options(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
void plugin_handle_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
void plugin_handle_preferred(struct grpc_call *call, const uint8_t *req, size_t len,
			     void *userdata);
void plugin_handle_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata);
