#pragma once

/*
 * The v1beta1.DevicePlugin service for one resource: a gRPC server on its socket in the
 * device-plugin directory, GetDevicePluginOptions, ListAndWatch (a full snapshot at once and
 * on every change, never an empty list, the stream held open until shutdown),
 * GetPreferredAllocation, Allocate and PreStartContainer. Logs (module=plugin).
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "allocate.h"
#include "grpc.h"
#include "util.h"

struct enforce;
struct loop;
struct kubelet_reg;
struct gpu_info;
struct resource;
struct plugin;

/* Whether GPU @gpu (a gpu_info index) is healthy now. */
typedef bool plugin_health_fn(unsigned gpu, void *userdata);

/* Shared by every plugin; owned by the daemon, which keeps it valid while plugins live. */
struct plugin_ctx {
	struct loop *loop;
	const char *dir; /* device-plugin directory */
	const struct gpu_info *info;
	/*
	 * Health is not kept here: every list and Allocate asks (the daemon answers from the GPU
	 * monitor). Call plugin_refresh() when it changes.
	 */
	plugin_health_fn *gpu_healthy;
	void *health_userdata;
	const int *numa;     /* per gpu_info index; -1 none */
	const int *distance; /* n x n topology distances, or NULL */
	struct alloc_opts alloc;
	bool split_allow;	      /* gpumem onSplit: allow */
	bool mask;		      /* gpumem placement: mask */
	uint64_t mask_hysteresis_mib; /* 1024 */
	struct grpc_limits limits;
	/*
	 * CDI gate: points to the daemon's reason why no valid CDI spec exists (NULL string: a
	 * valid spec is there); the pointer itself may be NULL (no gate). While the reason is
	 * set and alloc.strategies include cdi-annotations or cdi-cri, Allocate fails with
	 * FAILED_PRECONDITION "no valid CDI spec: <reason>".
	 */
	const char *const *cdi_error;
	/*
	 * gpumem enforcement (enforce.h), owned by the daemon, or NULL: none. Allocate of a
	 * gpumem resource asks it for the container's env and mounts (enforce_allocate()).
	 */
	struct enforce *enforce;
};

enum plugin_event {
	/*
	 * One of the kubelet's ListAndWatch streams opened / ended (the kubelet went away or
	 * dropped us). Only for the kubelet's streams (see plugin_expect_kubelet()), never for
	 * others', and not while shutting down.
	 */
	PLUGIN_EVENT_STREAM_OPENED,
	PLUGIN_EVENT_STREAM_CLOSED,
	/* Our socket is served again after plugin_serve() failed (from its retry timer). */
	PLUGIN_EVENT_SERVING,
	/*
	 * Another running instance serves at our socket path (it replaced our socket): the
	 * plugin stopped listening and stands down. The owner stops registering (re-registering
	 * would take the resource back and the two would fight). Streams already open stay. It
	 * ends when plugin_serve() finds the path free again (it then returns true).
	 */
	PLUGIN_EVENT_CEDED,
	/*
	 * A peer (see plugin_peer_event()) is gone, and we must serve again: it held our own
	 * path (we stood down for it), or it may have registered after us, so that the kubelet
	 * was using it. In the second case the plugin has already ended the kubelet's
	 * ListAndWatch streams on our socket (STREAM_CLOSED follows for each): the kubelet
	 * refuses a second registration at one path while our stream lives, and a superseded
	 * stream is one it no longer reads. The owner serves and registers (plugin_serve(),
	 * then a start of the registration, which waits for those streams to close).
	 */
	PLUGIN_EVENT_PEER_GONE,
};

/* The plugin's events for its owner. It may not free @p. */
typedef void plugin_event_fn(struct plugin *p, enum plugin_event ev, void *userdata);

/*
 * Takes ownership of @r on success; on failure the caller still owns @r (and may read it to
 * log). With a loop, the socket path is chosen and bound at once (see plugin_serve()), both
 * under an advisory lock on the device-plugin directory that every edgegpu instance takes
 * for that, so two instances started together never pick the same path; the other live
 * instances' sockets found then are watched (plugin_peer_event()). Returns 0 or -errno.
 */
int plugin_new(const struct plugin_ctx *ctx, struct resource *r, plugin_event_fn *on_event,
	       void *userdata, struct plugin **ret) WARN_UNUSED;

/*
 * Makes sure our socket is served, (re)creating it (replacing a stale file) unless it is
 * served and still ours. The path is <dir>/<r->socket>, or, when another running instance
 * already served there at plugin_new(), the first free <stem>-N.sock (N from 1; logged); it
 * never changes afterwards. A live peer's socket (one that accepts connections and is not
 * ours) is never replaced: the plugin cedes instead (PLUGIN_EVENT_CEDED, returns false, no
 * retry); the owner calls plugin_serve() again when the path may be free (it was deleted).
 * On other failures retries with backoff (100 ms doubling to 10 s), forever, saying so once
 * per step, and reports PLUGIN_EVENT_SERVING when it works. Returns true when the socket is
 * served. False while shutting down.
 */
bool plugin_serve(struct plugin *p);
/*
 * The socket is gone (its directory went, or the file was deleted): the next plugin_serve()
 * makes it again. @fresh: start the backoff over (the directory is back).
 */
void plugin_unserve(struct plugin *p, bool fresh);
/* True when our socket file is still there and is ours. */
bool plugin_socket_ok(const struct plugin *p);
/* True when a live socket that is not ours is at our path (see plugin_serve()). */
bool plugin_path_taken(const struct plugin *p);
/* True while standing down for a live peer at our path (PLUGIN_EVENT_CEDED). */
bool plugin_ceded(const struct plugin *p);
/* The socket's file name in the device-plugin directory: the endpoint Register sends. */
const char *plugin_endpoint(const struct plugin *p);

/*
 * Upgrades (docs/upgrade.md). Other instances serving this resource (peers) sit at our
 * socket path (one that took it: we stood down) or at one of its <stem>-N.sock alternatives.
 * The plugin holds a connection to each live peer (grpc_client_hold_start(): the kernel
 * closes it the moment that process dies) and notes which may have registered after us:
 * one whose socket appeared, or was touched (an instance touches its socket whenever the
 * kubelet accepts its Register, plugin_register_done()), after our latest Register was
 * sent.
 * The kubelet gives a plugin no sign that a newer registration superseded it: it just stops
 * reading the old stream, so this is the only way to know.
 *
 * A peer is gone when its connection ended and its path then refuses connections or is
 * missing (a stale socket, left by a killed process, is removed only once a connection to it
 * is refused). If it held our path, or may have registered after us, the plugin reports
 * PLUGIN_EVENT_PEER_GONE (logged once); a peer that registered before our latest
 * registration going away changes nothing (logged). A peer that closes our connection but
 * still listens is connected to again (after 3 quick closes in a row, with backoff from 1 s
 * doubling to 30 s). At most CONFIG_SOCKET_ALT_PATHS peers.
 *
 * plugin_peer_event(): a file named @name in the device-plugin directory was created,
 * renamed in or touched ("" after lost inotify events: every path is looked at).
 *
 * The takeover, when a peer that may have registered after us is gone: every kubelet stream
 * of ours from a registration sent before it is ended (the kubelet refuses a registration at
 * our path while one lives, and may be using none of them), and PLUGIN_EVENT_PEER_GONE asks
 * the owner to register. Until a Register sent after the takeover is accepted, a kubelet
 * stream that opens for an older registration is ended too, and so are ours when that
 * Register is refused (plugin_register_done()).
 */
void plugin_peer_event(struct plugin *p, const char *name);
/*
 * The registration whose attempts (kubelet_reg_attempts()) tell which events came after our
 * latest Register was sent; NULL (the default): none was ever sent. It must outlive the
 * plugin, or be set back to NULL first.
 */
void plugin_set_reg(struct plugin *p, const struct kubelet_reg *reg);
/*
 * A Register of ours finished (kubelet_reg_fn). Accepted: touches our socket (its peers learn
 * of it), forgets which peers registered before that attempt was sent (ours is newer) and
 * ends a takeover. Refused during a takeover: ends our kubelet streams (see above).
 */
void plugin_register_done(struct plugin *p, bool ok);

/*
 * Recomputes the snapshot and pushes it to every open ListAndWatch stream if it changed.
 * When it cannot be built (out of memory, or over max_send_msg) the previous one stays, a
 * stream that has none yet gets nothing (never an empty list), and it is tried again from
 * the loop with backoff (100 ms doubling to 10 s) until it works.
 */
void plugin_refresh(struct plugin *p);

/* Replaces the resource (SIGHUP with a changed device list); takes ownership; refreshes. */
void plugin_set_resource(struct plugin *p, struct resource *r);
/* The context's gRPC limits changed (SIGHUP): new connections and calls get them. */
void plugin_apply_limits(struct plugin *p);
const struct resource *plugin_resource(const struct plugin *p);

/*
 * gpumem masking: marks the units that live pods hold, from an encoded pod-resources
 * ListPodResourcesResponse, and refreshes. Returns 0, -ENOMEM or -EBADMSG (the old marks stay).
 */
int plugin_set_live_podres(struct plugin *p, const uint8_t *resp, size_t len) WARN_UNUSED;

/* Number of open ListAndWatch streams, the kubelet's and any other client's (for stats). */
unsigned plugin_watchers(const struct plugin *p);

/*
 * Which ListAndWatch stream is the kubelet's. Only the kubelet's stream should stop the daemon
 * from registering again (kubelet-contract.md 2.6): a stray watcher (grpcurl, a monitoring
 * agent) held open across a kubelet restart must not. The daemon calls this when it sends
 * Register, with the pid on the far side of its kubelet.sock connection (SO_PEERCRED), or 0
 * when unknown. A stream is then the kubelet's when:
 *   - both pids are known (non-zero): the stream's connection peer pid equals @kubelet_pid
 *     (the kubelet dials back from the process we registered with);
 *   - else (PID namespaces: a containerised daemon sees host processes as pid 0; a memory
 *     connection has none): it is the first ListAndWatch stream opened after the last call.
 * Before the first call every stream counts as the kubelet's (an owner that never registers
 * cannot tell them apart). A stream keeps the verdict it got when it opened.
 */
void plugin_expect_kubelet(struct plugin *p, pid_t kubelet_pid);
/* Number of open ListAndWatch streams that are the kubelet's (the rule above). */
unsigned plugin_kubelet_watchers(const struct plugin *p);
/* The plugin's gRPC server, for tests and fuzzers (memory connections). */
struct grpc_server *plugin_grpc_server(struct plugin *p);
const char *plugin_socket_path(const struct plugin *p);

/* Upper bounds (seconds) of the Allocate latency histogram's buckets. */
#define PLUGIN_ALLOC_BUCKETS 10
extern const double plugin_alloc_bounds[PLUGIN_ALLOC_BUCKETS];

struct plugin_stats {
	uint64_t sockets_served;     /* times our socket was (re)created */
	uint64_t snapshots_sent;     /* messages pushed on streams */
	uint64_t snapshots_replaced; /* of those, replacing one the peer had not begun to read */
	uint64_t allocates;
	uint64_t allocate_errors;
	uint64_t preferred;
	size_t last_list_bytes;
	int mask_slot; /* gpumem: the slot whose free units are offered, -1 none */
	/* Allocate calls answered OK, by latency (per bucket; the last: above every bound) */
	uint64_t alloc_hist[PLUGIN_ALLOC_BUCKETS + 1];
	double alloc_seconds; /* their sum */
	struct grpc_server_stats grpc;
};
void plugin_get_stats(const struct plugin *p, struct plugin_stats *ret);

/*
 * Graceful stop: ListAndWatch streams finish with OK (the kubelet unregisters the resource),
 * the socket is removed. @done may be NULL.
 */
void plugin_shutdown(struct plugin *p, usec_t grace_usec, void (*done)(void *userdata),
		     void *userdata);
struct plugin *plugin_free(struct plugin *p);
