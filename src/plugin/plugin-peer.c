/*
 * The other instances that serve our resource, for upgrades that go wrong (plugin.h,
 * plugin_peer_event(); docs/upgrade.md): which of them may hold a registration newer than
 * ours, a connection to each that ends when its process dies, and the takeover when one the
 * kubelet may have been using is gone. Also the directory lock that keeps two instances
 * from choosing one socket path, and the test of whether something listens on a path.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "grpc.h"
#include "kubelet.h"
#include "loop.h"
#include "plugin-internal.h"
#include "plugin.h"
#include "resource.h"

#define LOG_MODULE "plugin"
#include "log.h"

/* A connection accepted or one that would be (a full backlog says EAGAIN) counts as live. */
bool plugin_path_live(const char *path, dev_t dev, ino_t ino)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	bool live;
	int fd;

	if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	if (ino && st.st_ino == ino && st.st_dev == dev)
		return false;
	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN ||
	       errno == EINPROGRESS;
	(void)close(fd);
	return live;
}

/* A peer that closes our connection within this long of its making, 3 times in a row... */
#define PEER_QUICK_USEC (1 * USEC_PER_SEC)
#define PEER_QUICK_MAX	3
/* ...is connected to again only after this, doubling up to the max. */
#define PEER_BACKOFF_MIN (1 * USEC_PER_SEC)
#define PEER_BACKOFF_MAX (30 * USEC_PER_SEC)
/* A kubelet that keeps the connection of a stream we ended open is waited for this long. */
#define ENDED_GRACE_USEC (1 * USEC_PER_SEC)
/* The directory lock: tried this many times, a millisecond apart. */
#define DIR_LOCK_TRIES	   100
#define DIR_LOCK_WAIT_NSEC 1000000L

struct plugin_peer {
	struct plugin *p;
	struct plugin_peer *next; /* p->peers */
	char *name;		  /* its socket's file name in the device-plugin directory */
	char *path;
	struct grpc_client_call *hold;
	struct loop_timer *retry; /* connecting again after quick closes */
	usec_t since;		  /* when the current connection was started */
	struct backoff backoff;
	unsigned quick; /* connections it closed quickly, in a row */
	bool dying;	/* connection ended, nothing listens: the verdict is due from the loop */
	/*
	 * Our registration attempts (kubelet_reg_attempts()) when it last appeared or was
	 * touched after one of ours was sent: it may hold a registration newer than ours.
	 * 0: it registered (if ever) before our latest accepted Register.
	 */
	unsigned newer;
};

/* --- the directory lock --- */

int plugin_dir_lock(const char *dir)
{
	static bool warned;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1; /* no directory: nothing to bind in either */
	for (unsigned i = 0; i < DIR_LOCK_TRIES; i++) {
		struct timespec ts = { .tv_nsec = DIR_LOCK_WAIT_NSEC };

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		(void)nanosleep(&ts, NULL);
	}
	/* Each instance holds it for a bind: only a stranger keeps it this long. */
	if (!warned)
		log_warn_errno(
			-errno,
			"cannot lock the device-plugin directory, choosing the socket path without it",
			"path=%s", dir);
	warned = true;
	(void)fd_close(fd);
	return -1;
}

void plugin_dir_unlock(int fd)
{
	/* Closing the last descriptor releases the lock. */
	if (fd >= 0)
		(void)fd_close(fd);
}

/* --- peers --- */

_Static_assert(CONFIG_SOCKET_ALT_PATHS <= 10, "family_name() reads one digit");

/* True when @name is <stem>.sock or <stem>-N.sock (N from 1 to CONFIG_SOCKET_ALT_PATHS - 1). */
static bool family_name(const struct plugin *p, const char *name)
{
	size_t n = strlen(p->stem);

	if (strncmp(name, p->stem, n) != 0)
		return false;
	name += n;
	if (streq(name, ".sock"))
		return true;
	return name[0] == '-' && name[1] >= '1' && name[1] < '0' + CONFIG_SOCKET_ALT_PATHS &&
	       streq(name + 2, ".sock");
}

static struct plugin_peer *peer_find(const struct plugin *p, const char *name)
{
	for (struct plugin_peer *pe = p->peers; pe; pe = pe->next)
		if (streq(pe->name, name))
			return pe;
	return NULL;
}

static void peer_free(struct plugin_peer *pe)
{
	for (struct plugin_peer **pp = &pe->p->peers; *pp; pp = &(*pp)->next)
		if (*pp == pe) {
			*pp = pe->next;
			break;
		}
	grpc_client_call_cancel(pe->hold);
	loop_timer_free(pe->retry);
	free(pe->name);
	free(pe->path);
	free(pe);
}

void plugin_peers_free(struct plugin *p)
{
	while (p->peers)
		peer_free(p->peers);
}

static unsigned reg_attempts(const struct plugin *p)
{
	return p->reg ? kubelet_reg_attempts(p->reg) : 0;
}

void plugin_set_reg(struct plugin *p, const struct kubelet_reg *reg)
{
	p->reg = reg;
}

static void end_stream(struct watcher *w)
{
	if (w->ending)
		return;
	w->ending = true;
	(void)grpc_call_finish(w->call, GRPC_STATUS_OK, NULL);
}

/*
 * Ends the kubelet's streams on our socket, so that we can register again at our path (the
 * kubelet refuses that while one of ours lives). One it no longer reads (we were superseded)
 * ends unnoticed; if it was still reading it, it sees no devices until our new registration's
 * first list.
 */
static void end_kubelet_streams(struct plugin *p)
{
	for (struct watcher *w = p->watchers; w; w = w->next)
		if (w->kubelet)
			end_stream(w);
}

void plugin_takeover_stream(struct plugin *p, struct watcher *w)
{
	if (p->takeover && w->kubelet && reg_attempts(p) <= p->takeover_attempts) {
		log_info("kubelet stream of a registration older than our takeover, ending it",
			 "resource=%s", p->res->name);
		end_stream(w);
	}
}

/* Reports the held STREAM_CLOSED events: the kubelet closed their connection, or @all. */
static void ended_flush(struct plugin *p, bool all)
{
	unsigned n = 0;

	for (unsigned i = 0; i < p->n_ended;) {
		if (!all && !p->ended_closed[i]) {
			i++;
			continue;
		}
		p->n_ended--;
		p->ended_conn[i] = p->ended_conn[p->n_ended];
		p->ended_closed[i] = p->ended_closed[p->n_ended];
		n++;
	}
	while (n-- > 0 && !p->shutting_down && p->on_event)
		p->on_event(p, PLUGIN_EVENT_STREAM_CLOSED, p->userdata);
}

static void on_ended_timer(struct loop_timer *t, void *userdata)
{
	struct plugin *p = userdata;

	ended_flush(p, false);
	if (p->n_ended == 0)
		return;
	if (now_usec() < p->ended_deadline) {
		loop_timer_arm_at(p->ended_timer, p->ended_deadline);
		return;
	}
	log_warn("kubelet kept the connection of our ended stream open, registering anyway",
		 "resource=%s streams=%u", p->res->name, p->n_ended);
	ended_flush(p, true);
}

bool plugin_ended_stream_closed(struct plugin *p, uint64_t conn)
{
	if (!p->ctx->loop || p->n_ended == PLUGIN_ENDED_MAX)
		return false;
	if (!p->ended_timer && loop_timer_new(p->ctx->loop, on_ended_timer, p, &p->ended_timer) < 0)
		return false;
	if (p->n_ended == 0) {
		p->ended_deadline = now_usec() + ENDED_GRACE_USEC;
		loop_timer_arm_at(p->ended_timer, p->ended_deadline);
	}
	p->ended_conn[p->n_ended] = conn;
	p->ended_closed[p->n_ended] = false;
	p->n_ended++;
	return true;
}

void plugin_conn_closed(struct grpc_server *s, uint64_t conn_id, void *userdata)
{
	struct plugin *p = userdata;
	bool found = false;

	if (p->shutting_down)
		return;
	for (unsigned i = 0; i < p->n_ended; i++)
		if (p->ended_conn[i] == conn_id) {
			p->ended_closed[i] = true;
			found = true;
		}
	/* Reported from the loop, not from inside the server's connection teardown. */
	if (found)
		loop_timer_arm(p->ended_timer, 0);
}

/* Its connection ended and nothing listens at its path any more. */
static void peer_gone(struct plugin_peer *pe)
{
	struct plugin *p = pe->p;
	bool ours = streq(pe->name, p->endpoint), act = ours || pe->newer;

	if (ours) {
		/* We stood down for it: plugin_serve() says "socket path free again". */
		log_debug("instance at our socket path is gone", "resource=%s path=%s",
			  p->res->name, pe->path);
	} else if (pe->newer) {
		log_warn("instance that may have superseded us is gone, registering again",
			 "resource=%s path=%s kubelet_streams=%u", p->res->name, pe->path,
			 p->n_kubelet_watchers);
		p->takeover = true;
		p->takeover_attempts = reg_attempts(p);
		end_kubelet_streams(p);
	} else {
		log_info("another instance serving the resource is gone",
			 "resource=%s path=%s newer=no", p->res->name, pe->path);
	}
	peer_free(pe);
	if (act && p->on_event)
		p->on_event(p, PLUGIN_EVENT_PEER_GONE, p->userdata);
}

static void peer_connect(struct plugin_peer *pe);

static void peer_hold_done(struct grpc_client_call *cc, int r, enum grpc_status status,
			   const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct plugin_peer *pe = userdata;
	struct plugin *p = pe->p;
	usec_t delay;

	pe->hold = NULL;
	if (!plugin_path_live(pe->path, p->sock_dev, p->sock_ino)) {
		log_debug("connection to another instance ended, and nothing listens there",
			  "resource=%s path=%s reason=%s", p->res->name, pe->path,
			  log_q(message ? message : ""));
		/*
		 * Decided on the next turn of the loop: a touch it made before it died (it
		 * registered) is then read from the directory watch, whose event may wait in
		 * this same batch.
		 */
		pe->dying = true;
		loop_timer_arm(pe->retry, 0);
		return;
	}
	/* Alive: it closed an idle connection, or made room for others. */
	if (now_usec() - pe->since < PEER_QUICK_USEC)
		pe->quick++;
	else
		pe->quick = 0;
	if (pe->quick < PEER_QUICK_MAX) {
		peer_connect(pe);
		return;
	}
	delay = backoff_next(&pe->backoff);
	log_debug("another instance keeps closing our connection, connecting again later",
		  "resource=%s path=%s retry_ms=%llu", p->res->name, pe->path,
		  (unsigned long long)(delay / USEC_PER_MSEC));
	loop_timer_arm(pe->retry, delay);
}

static void peer_connect(struct plugin_peer *pe)
{
	int r;

	pe->since = now_usec();
	r = grpc_client_hold_start(pe->p->ctx->loop, pe->path, peer_hold_done, pe, &pe->hold);
	if (r < 0) {
		/* Out of memory: try again later rather than lose sight of it. */
		pe->hold = NULL;
		loop_timer_arm(pe->retry, backoff_next(&pe->backoff));
	} else if (pe->quick == 0) {
		backoff_reset(&pe->backoff);
	}
}

static void on_peer_retry(struct loop_timer *t, void *userdata)
{
	struct plugin_peer *pe = userdata;
	struct plugin *p = pe->p;

	if (pe->dying) {
		pe->dying = false;
		if (!plugin_path_live(pe->path, p->sock_dev, p->sock_ino)) {
			peer_gone(pe);
			return;
		}
		pe->quick = 0; /* another instance took that path meanwhile */
	}
	if (!pe->hold)
		peer_connect(pe);
}

/* A live socket not ours at @name: watch it (if new), and note whether it may be newer. */
static void peer_seen(struct plugin *p, const char *name, unsigned attempts)
{
	struct plugin_peer *pe = peer_find(p, name);
	char *path;

	/* Even if it is dying: what it did before (a registration) decides what we do. */
	if (pe) {
		if (attempts > 0 && !pe->newer)
			log_info("another instance may have registered after us",
				 "resource=%s path=%s", p->res->name, pe->path);
		if (attempts > 0)
			pe->newer = attempts;
		return;
	}
	path = path_join(p->ctx->dir, name);
	if (!path)
		return;
	if (!plugin_path_live(path, p->sock_dev, p->sock_ino)) {
		free(path); /* our own, a stale file or nothing */
		/*
		 * The one we stood down for died before we could watch it (between our probe
		 * and this one): nothing else would tell us, so it is gone now.
		 */
		if (p->ceded && streq(name, p->endpoint) && p->on_event) {
			log_debug("instance at our socket path gone before it was watched",
				  "resource=%s", p->res->name);
			p->on_event(p, PLUGIN_EVENT_PEER_GONE, p->userdata);
		}
		return;
	}
	pe = calloc(1, sizeof(*pe));
	if (!pe || !(pe->name = strdup(name)) ||
	    loop_timer_new(p->ctx->loop, on_peer_retry, pe, &pe->retry) < 0) {
		log_error("cannot watch another instance: out of memory", "resource=%s path=%s",
			  p->res->name, path);
		if (pe)
			free(pe->name);
		free(pe);
		free(path);
		return;
	}
	pe->p = p;
	pe->path = path;
	pe->backoff = BACKOFF_INIT(PEER_BACKOFF_MIN, 2, PEER_BACKOFF_MAX);
	pe->newer = attempts;
	pe->next = p->peers;
	p->peers = pe;
	log_info("another instance serves the resource, watching it",
		 "resource=%s path=%s newer=%s", p->res->name, path, attempts ? "maybe" : "no");
	peer_connect(pe);
}

void plugin_peer_event(struct plugin *p, const char *name)
{
	unsigned n = reg_attempts(p);
	char alt[256];

	if (!p->ctx->loop || p->shutting_down)
		return;
	if (*name) {
		if (family_name(p, name))
			peer_seen(p, name, n);
		return;
	}
	/* Events were lost: every path may have changed. */
	(void)snprintf(alt, sizeof(alt), "%s.sock", p->stem);
	peer_seen(p, alt, n);
	for (unsigned i = 1; i < CONFIG_SOCKET_ALT_PATHS; i++) {
		(void)snprintf(alt, sizeof(alt), "%s-%u.sock", p->stem, i);
		peer_seen(p, alt, n);
	}
}

void plugin_peers_scan(struct plugin *p)
{
	plugin_peer_event(p, "");
}

void plugin_register_done(struct plugin *p, bool ok)
{
	unsigned n = reg_attempts(p);
	int r;

	if (p->shutting_down)
		return;
	if (!ok) {
		/* A stream of an older registration of ours keeps the kubelet from taking it. */
		if (p->takeover)
			end_kubelet_streams(p);
		return;
	}
	/* IN_ATTRIB tells every peer, which is how they learn that we may be newer. */
	r = grpc_server_touch(p->server);
	if (r < 0)
		log_debug_errno(r, "cannot touch our socket", "resource=%s path=%s", p->res->name,
				p->path);
	for (struct plugin_peer *pe = p->peers; pe; pe = pe->next)
		if (pe->newer && pe->newer < n)
			pe->newer = 0;
	if (p->takeover && n > p->takeover_attempts)
		p->takeover = false;
}
