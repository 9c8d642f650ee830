#pragma once

/*
 * The kubelet side of the lifecycle: Register() calls on kubelet.sock with retry and backoff,
 * and inotify watches that report a new kubelet.sock (the kubelet restarted, which also
 * deletes our sockets), deleted files, and the device-plugin directory itself going away and
 * coming back. Logs (module=kubelet). Everything runs on the loop's thread.
 *
 * Directory watching. A directory that exists is watched itself. When it is deleted or
 * renamed away (or is missing from the start) its parent is watched instead until a
 * directory of that name appears there again; when the parent is missing too, watching is
 * retried with backoff (100 ms doubling to 10 s). Only one parent level is watched: a
 * missing grandparent is polled by that backoff. Limits: a path through a symlink whose
 * target is deleted and recreated is seen again only when something is created under the
 * symlink's own name; and when the device-plugin directory itself is bind-mounted into a
 * container (a DaemonSet's hostPath) and the host deletes it, the kernel detaches that mount
 * (IN_UNMOUNT: DIR_GONE), and whatever the path shows afterwards is not the host's new
 * directory. Mounting the parent (/var/lib/kubelet) avoids that.
 */

#include <stdbool.h>
#include <sys/types.h>

#include "util.h"

struct loop;
struct kubelet;
struct kubelet_reg;

enum kubelet_event {
	/*
	 * kubelet.sock appeared: a (new) kubelet is serving. Also sent right after DIR_BACK
	 * (or after kubelet.sock's own directory came back, when that is another one) if
	 * kubelet.sock is already there, since its creation may have come before the watch.
	 * May come twice for one socket; treat it as idempotent.
	 */
	KUBELET_EVENT_SOCKET_CREATED,
	/* A file in the device-plugin directory was deleted or renamed away: @name. */
	KUBELET_EVENT_FILE_DELETED,
	/*
	 * A file in the device-plugin directory was created or renamed in (kubelet.sock aside:
	 * SOCKET_CREATED): @name. Our own sockets' creation is reported too.
	 */
	KUBELET_EVENT_FILE_CREATED,
	/*
	 * The attributes of a file in the device-plugin directory changed (chmod, utimensat):
	 * @name. An instance touches its socket when the kubelet accepts its Register (plugin.h,
	 * plugin_registered()), so its peers learn of it. @name "" (inotify's queue overflowed,
	 * events were lost): any file may have been created or changed.
	 */
	KUBELET_EVENT_FILE_CHANGED,
	/*
	 * The device-plugin directory was deleted or renamed away (@name: its path). Our
	 * sockets in it are gone; the owner cannot serve them until DIR_BACK.
	 */
	KUBELET_EVENT_DIR_GONE,
	/*
	 * The device-plugin directory exists again (or, when it was missing at kubelet_new(),
	 * exists now) and is watched (@name: its path). The owner listens on its plugin
	 * sockets again and registers. Followed by SOCKET_CREATED when kubelet.sock is in it.
	 */
	KUBELET_EVENT_DIR_BACK,
	KUBELET_EVENT_COUNT,
};

/*
 * Re-entrancy: the event callback may call anything in this module except kubelet_free()
 * and kubelet_set_paths() on @k (they free the watch that is reporting).
 */
typedef void kubelet_event_fn(struct kubelet *k, enum kubelet_event ev, const char *name,
			      void *userdata);

/*
 * Watches @plugin_dir (and the directory of @kubelet_sock when it differs). @kubelet_sock NULL
 * or "" disables registration (NVIDIA's --kubelet-socket ""). A directory that does not exist
 * is not an error: it is waited for (see above) and reported with DIR_BACK when it appears.
 * Returns 0, -ENOMEM or -ENAMETOOLONG (@kubelet_sock longer than sun_path allows).
 */
int kubelet_new(struct loop *l, const char *plugin_dir, const char *kubelet_sock,
		kubelet_event_fn *fn, void *userdata, struct kubelet **ret) WARN_UNUSED;
/*
 * Free the registrations of @k first; any still alive are stopped (IDLE) and detached: they
 * send nothing more and can only be freed. NULL-safe, returns NULL.
 */
struct kubelet *kubelet_free(struct kubelet *k);
bool kubelet_enabled(const struct kubelet *k);
/* True while the device-plugin directory exists and is watched. */
bool kubelet_dir_present(const struct kubelet *k);

/*
 * For a reload (SIGHUP) that changes devicePluginPath or kubeletSocket: moves the watches to
 * the new directories. Nothing is reported for the new directories' current state: the owner
 * listens in @plugin_dir (kubelet_dir_present() says whether it exists; if not, DIR_BACK will
 * come) and registers. When anything changed, every registration of @k is stopped (a call
 * in flight to the old kubelet is cancelled) and left in KUBELET_REG_IDLE with
 * kubelet_reg_registered() false: call kubelet_reg_start() on each to register with the new
 * kubelet. Returns 1 when something changed, 0 when both paths are the same, or -ENOMEM /
 * -ENAMETOOLONG (then nothing changed). Not from inside kubelet_event_fn.
 */
int kubelet_set_paths(struct kubelet *k, const char *plugin_dir,
		      const char *kubelet_sock) WARN_UNUSED;

/*
 * Registration: one state machine per resource, owned here with its timers. The owner only
 * reports events: start/stop, and the kubelet's ListAndWatch streams opening and closing.
 *
 *                      +------------------ retry timer -------------------+
 *                      v                                                  |
 *   IDLE --start--> REGISTERING --refused/failed, no stream open--> BACKING_OFF
 *                      |        |                                         |
 *    accepted, no stream        accepted (or refused while a        stream opened
 *                      v        v  kubelet stream is open)                |
 *            WAITING_STREAM --stream opened--> REGISTERED <---------------+
 *                      |                            |
 *            no stream in 2 s               last kubelet stream closed
 *                      v                            v
 *                 REGISTERING                  REGISTERING
 *
 *   stop (any state): STOPPED, a call in flight cancelled, any timer dropped; only a start
 *   leaves it (stream events do not). kubelet_set_paths() and kubelet_free(): IDLE.
 *   The last kubelet stream closed, in any state but STOPPED: a start.
 *   start while REGISTERING: the attempt in flight finishes first; if it fails, the retry
 *   comes at once instead of after the backoff; if it succeeds, nothing more is sent.
 *   start while the kubelet holds one of our streams: nothing (a second Register at the same
 *   socket is refused while the kubelet holds our stream), except that STOPPED becomes
 *   REGISTERED; from any other state: REGISTERING.
 *   Backoff: 1 ms growing four-fold to 5 s, reset by success and by start. Each transition is
 *   checked against the table of legal ones (kubelet.c, set_state()) and logged at debug
 *   ("registration state changed").
 */
enum kubelet_reg_state {
	KUBELET_REG_IDLE,	    /* created, never started (or reset by kubelet_set_paths) */
	KUBELET_REG_REGISTERING,    /* a Register call is in flight */
	KUBELET_REG_WAITING_STREAM, /* accepted; the kubelet's ListAndWatch not open yet */
	KUBELET_REG_REGISTERED,	    /* accepted, and the kubelet streams from us */
	KUBELET_REG_BACKING_OFF,    /* the last attempt failed; a retry is armed */
	KUBELET_REG_STOPPED,	    /* kubelet_reg_stop(): nothing sent until the next start */
	KUBELET_REG_STATE_COUNT,
};

/*
 * A registration attempt finished: @ok true once the kubelet accepted it.
 *
 * State when it runs: WAITING_STREAM or REGISTERED (@ok, or !@ok while a kubelet stream is
 * open), else BACKING_OFF with the retry already armed.
 * Re-entrancy: it may call kubelet_reg_stop() (the retry is dropped: nothing is sent again),
 * kubelet_reg_start() (the retry happens now, replacing the armed one) or kubelet_reg_free()
 * on @reg; nothing touches @reg after it returns. kubelet_reg_peer_pid() is valid in it.
 */
typedef void kubelet_reg_fn(struct kubelet_reg *reg, bool ok, void *userdata);

/*
 * A Register request was just handed to a new connection to kubelet.sock, from the
 * registration's own loop context, before the loop runs again: so before our plugin server
 * can accept the kubelet's dial-back (the ListAndWatch that follows an accepted Register).
 * @kubelet_pid is the process listening on kubelet.sock (SO_PEERCRED), i.e. the kubelet that
 * will dial back; 0 when unknown (a kubelet in a PID namespace we cannot see, such as the
 * host's when we run in a container without hostPID, shows as 0). The owner hands it to the
 * plugin so the plugin tells the kubelet's stream from other ListAndWatch clients.
 *
 * Runs once per attempt whose connection was made at once (always, unless the kubelet's
 * listen backlog was full; then the pid is known only in kubelet_reg_fn, through
 * kubelet_reg_peer_pid()). May be called from inside kubelet_reg_start(). Re-entrancy: it
 * may call kubelet_reg_stop(), kubelet_reg_start() or kubelet_reg_free() on @reg.
 */
typedef void kubelet_reg_dial_fn(struct kubelet_reg *reg, pid_t kubelet_pid, void *userdata);

/*
 * A registration of @resource served at @endpoint (a file name in the plugin directory), in
 * state IDLE. @fn may be NULL. Returns 0 or -ENOMEM.
 */
int kubelet_reg_new(struct kubelet *k, const char *resource, const char *endpoint,
		    kubelet_reg_fn *fn, void *userdata, struct kubelet_reg **ret) WARN_UNUSED;
/* Sets (NULL: clears) the dial hook; it gets the userdata given to kubelet_reg_new(). */
void kubelet_reg_set_dial_fn(struct kubelet_reg *reg, kubelet_reg_dial_fn *fn);
/* Registers now (see the state machine). Nothing is sent while registration is disabled. */
void kubelet_reg_start(struct kubelet_reg *reg);
/* Stops retrying (see the state machine). Safe from inside kubelet_reg_fn. */
void kubelet_reg_stop(struct kubelet_reg *reg);
/*
 * The kubelet opened / closed one of its ListAndWatch streams on our endpoint (the plugin
 * tells the kubelet's streams from others', plugin_expect_kubelet(); report only those).
 * The close of the last one is a start (the kubelet went away or dropped us), unless STOPPED.
 */
void kubelet_reg_stream_opened(struct kubelet_reg *reg);
void kubelet_reg_stream_closed(struct kubelet_reg *reg);
enum kubelet_reg_state kubelet_reg_state(const struct kubelet_reg *reg);
/*
 * "idle", "registering", "waiting-stream", "registered", "backing-off", "stopped";
 * "invalid" otherwise.
 */
const char *kubelet_reg_state_name(enum kubelet_reg_state s);
/* True when the kubelet accepted the last Register (WAITING_STREAM or REGISTERED). */
bool kubelet_reg_registered(const struct kubelet_reg *reg);
/* Successful registrations so far (unused today; the metrics issue exports it). */
unsigned kubelet_reg_count(const struct kubelet_reg *reg);
/*
 * Register calls started so far (the one in flight included): an instance's clock for "did
 * this happen after our latest Register was sent" (plugin_peer_event()).
 */
unsigned kubelet_reg_attempts(const struct kubelet_reg *reg);
/*
 * The pid of the kubelet that the current (or last) attempt connected to, see
 * kubelet_reg_dial_fn; 0 when unknown or before the first connection. Reset to 0 when an
 * attempt starts.
 */
pid_t kubelet_reg_peer_pid(const struct kubelet_reg *reg);
/* Cancels a call in flight. Safe from inside its own kubelet_reg_fn. NULL-safe, returns NULL. */
struct kubelet_reg *kubelet_reg_free(struct kubelet_reg *reg);
