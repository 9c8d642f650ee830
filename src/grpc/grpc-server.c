/*
 * The gRPC server: the unix-socket listener and the server's life (new, listen, accept,
 * pause and resume, refuse or evict at the cap, shutdown with grace, free), limits and stats.
 * Connections are in grpc-conn.c, calls in grpc-call.c; the API is in grpc.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc-server-int.h"
#include "grpc.h"
#include "h2.h"
#include "loop.h"

#define LOG_MODULE "grpc"
#include "log.h"

#define DEFAULT_MAX_RECV    ((size_t)16 << 20)
#define DEFAULT_MAX_SEND    (((size_t)4 << 20) - 1)
#define DEFAULT_MAX_CONNS   64
#define DEFAULT_MAX_STREAMS 128
#define ACCEPT_PAUSE_USEC   (100 * USEC_PER_MSEC) /* after accept fails with EMFILE & co */
#define PREFACE_TIMEOUT	    (10 * USEC_PER_SEC)	  /* to complete the client preface */
#define IDLE_TIMEOUT	    (300 * USEC_PER_SEC)  /* with no stream open */

void grpc_server_check_done(struct grpc_server *s)
{
	if (s->shutting_down && !s->done_called && s->stats.conns == 0 && s->loop)
		loop_timer_arm(s->defer, 0);
}

static void server_free_graveyard(struct grpc_server *s)
{
	while (s->graveyard) {
		struct grpc_server_conn *c = s->graveyard;

		s->graveyard = c->next;
		free(c);
	}
}

/* Over max_conns: SETTINGS and GOAWAY(REFUSED_STREAM), then close. */
static void server_refuse(struct grpc_server *s, int fd)
{
	static const struct h2_callbacks no_callbacks = { 0 };
	const struct h2_settings settings = { .max_concurrent_streams = 0 };
	struct h2_session *h = NULL;
	struct buf out = { 0 };
	uint8_t junk[4096];

	s->stats.conns_refused++;
	if (h2_session_new(true, &settings, &no_callbacks, NULL, &h) == 0 &&
	    h2_session_terminate(h, H2_REFUSED_STREAM, "too many connections") == 0 &&
	    h2_session_send(h, &out, SIZE_MAX) == 0)
		(void)!send(fd, out.data, out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)shutdown(fd, SHUT_WR);
	/* Unread input would turn our close into a reset that can hide the GOAWAY. */
	for (int i = 0; i < 16 && read(fd, junk, sizeof(junk)) > 0; i++)
		;
	(void)fd_close(fd);
	buf_release(&out);
	h2_session_free(h);
	log_debug("connection refused", "conns=%u", s->stats.conns);
	if (s->event_fn)
		s->event_fn(s, GRPC_SERVER_EVENT_REFUSED, ++s->next_conn_id, H2_REFUSED_STREAM,
			    s->event_ud);
}

static void on_accept(struct loop_io *io, int fd, uint32_t events, void *userdata);

static void on_accept_resume(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;
	int r;

	if (s->listen_fd < 0)
		return;
	if (s->accept_io_lost)
		r = loop_io_new(s->loop, s->listen_fd, EPOLLIN, on_accept, s, &s->listen_io);
	else
		r = loop_io_set_events(s->listen_io, EPOLLIN);
	if (r < 0) {
		/* Still short of something: try again after another pause, never give up. */
		log_debug_errno(r, "resuming accept failed, retrying", "path=%s", s->path);
		loop_timer_arm(s->accept_pause, ACCEPT_PAUSE_USEC);
		return;
	}
	s->accept_io_lost = false;
}

/* Stops accepting for ACCEPT_PAUSE_USEC. */
static void server_pause_accept(struct grpc_server *s)
{
	if (!s->accept_pause && loop_timer_new(s->loop, on_accept_resume, s, &s->accept_pause) < 0)
		return; /* the listener fires again: the next attempt may find memory */
	/*
	 * A listener that cannot be paused would spin: drop its io then, and let the resume
	 * create it again.
	 */
	if (!s->accept_io_lost && loop_io_set_events(s->listen_io, 0) < 0) {
		s->listen_io = loop_io_free(s->listen_io);
		s->accept_io_lost = true;
	}
	loop_timer_arm(s->accept_pause, ACCEPT_PAUSE_USEC);
}

/*
 * At the cap: closes the connection idle the longest (no stream open: strays, half-open
 * dials, clients that connected and said nothing), so that the kubelet's dial-back is served.
 * Returns false when every connection is busy.
 */
static bool server_evict_idle(struct grpc_server *s)
{
	struct grpc_server_conn *victim = NULL;

	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (conn_closing(c) || c->mem || c->calls || c->depth > 0)
			continue;
		if (!victim || c->idle_since < victim->idle_since)
			victim = c;
	}
	if (!victim)
		return false;
	grpc_conn_expire(victim, GRPC_SERVER_EVENT_EVICTED,
			 "connection limit: idle connection closed", true);
	return true;
}

static void on_accept(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct grpc_server *s = userdata;

	for (int i = 0; i < 16 && s->listen_fd >= 0; i++) {
		struct grpc_server_conn *c;
		int cfd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN)
				break;
			/*
			 * Out of fds or memory: the listener would fire again at once. Pause it
			 * for a moment rather than spin.
			 */
			log_debug_errno(-errno, "accept failed, pausing", "path=%s", s->path);
			server_pause_accept(s);
			break;
		}
		if (s->shutting_down) {
			(void)fd_close(cfd);
			continue;
		}
		if (s->stats.conns >= s->lim.max_conns && !server_evict_idle(s)) {
			server_refuse(s, cfd);
			continue;
		}
		if (grpc_conn_new(s, cfd, NULL, &c) < 0)
			(void)fd_close(cfd);
	}
}

/* Flushes (and so closes, if they are done) the connections marked dirty. */
static void server_flush_dirty(struct grpc_server *s)
{
	bool again;

	/* A flush can run close callbacks that touch other connections: rescan after each. */
	do {
		again = false;
		for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
			if (c->dirty && !conn_dead(c) && c->depth == 0) {
				grpc_conn_enter(c);
				assert(c->server == s);
				grpc_conn_leave(c);
				again = true;
				break;
			}
		}
	} while (again);
}

static void on_defer(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;

	server_flush_dirty(s);
	server_free_graveyard(s);
	if (s->shutting_down && !s->done_called && s->stats.conns == 0) {
		s->done_called = true;
		if (s->done)
			s->done(s, s->done_ud);
	}
}

static void on_grace(struct loop_timer *t, void *userdata)
{
	struct grpc_server *s = userdata;

	/* The grace period is over: whatever is still open is closed now. */
	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (conn_dead(c) || c->depth > 0)
			continue;
		c->kill_pending = true;
		c->dirty = true;
	}
	server_flush_dirty(s);
	grpc_server_check_done(s);
}

/* @dst = @src (NULL: all defaults), each 0 replaced by its default. */
static void limits_fill(struct grpc_limits *dst, const struct grpc_limits *src)
{
	*dst = src ? *src : (struct grpc_limits){ 0 };
	if (!dst->max_recv_msg)
		dst->max_recv_msg = DEFAULT_MAX_RECV;
	if (!dst->max_send_msg)
		dst->max_send_msg = DEFAULT_MAX_SEND;
	dst->max_send_msg = MIN(dst->max_send_msg, (size_t)UINT32_MAX);
	if (!dst->max_conns)
		dst->max_conns = DEFAULT_MAX_CONNS;
	if (!dst->max_conn_buffered)
		dst->max_conn_buffered = dst->max_recv_msg + ((size_t)4 << 20);
	if (!dst->max_concurrent_streams)
		dst->max_concurrent_streams = DEFAULT_MAX_STREAMS;
	if (!dst->preface_timeout)
		dst->preface_timeout = PREFACE_TIMEOUT;
	if (!dst->idle_timeout)
		dst->idle_timeout = IDLE_TIMEOUT;
}

int grpc_server_set_limits(struct grpc_server *s, const struct grpc_limits *limits)
{
	if (limits && limits->max_concurrent_streams && limits->max_concurrent_streams < 100)
		return -EINVAL;
	limits_fill(&s->lim, limits);
	return 0;
}

int grpc_server_new(struct loop *l, const struct grpc_method *methods, size_t n_methods,
		    const struct grpc_limits *limits, void *userdata, struct grpc_server **ret)
{
	struct grpc_server *s;

	if (n_methods > 0 && !methods)
		return -EINVAL;
	if (limits && limits->max_concurrent_streams && limits->max_concurrent_streams < 100)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = l;
	s->methods = methods;
	s->n_methods = n_methods;
	s->userdata = userdata;
	s->listen_fd = -1;
	limits_fill(&s->lim, limits);
	if (l) {
		int r = loop_timer_new(l, on_defer, s, &s->defer);

		if (r < 0) {
			free(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

void grpc_server_set_event_cb(struct grpc_server *s, grpc_server_event_fn *fn, void *userdata)
{
	s->event_fn = fn;
	s->event_ud = userdata;
}

void grpc_server_set_conn_closed_cb(struct grpc_server *s, grpc_server_conn_closed_fn *fn,
				    void *userdata)
{
	s->conn_closed_fn = fn;
	s->conn_closed_ud = userdata;
}

int grpc_server_listen(struct grpc_server *s, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd = -1, r;

	if (!s->loop || !path || !*path)
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	grpc_server_unlisten(s);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket from an earlier run (or a kubelet restart) is replaced. */
	if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(path) < 0 && errno != ENOENT) {
		r = -errno;
		goto fail;
	}
	/*
	 * No umask: it is the process's, and changing it around bind() raced the other threads'
	 * mkdir() and open() (the CDI writer's). The file comes with the process's umask, and
	 * whatever that lets others do with it, nobody connects before listen() (a socket that
	 * does not listen refuses), and by then chmod() has made it 0600.
	 */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto fail;
	}
	if (chmod(path, 0600) < 0 || listen(fd, SOMAXCONN) < 0 || stat(path, &st) < 0) {
		r = -errno;
		(void)unlink(path);
		goto fail;
	}
	s->path = strdup(path);
	if (!s->path) {
		r = -ENOMEM;
		(void)unlink(path);
		goto fail;
	}
	r = loop_io_new(s->loop, fd, EPOLLIN, on_accept, s, &s->listen_io);
	if (r < 0) {
		(void)unlink(path);
		s->path = mfree(s->path);
		goto fail;
	}
	s->listen_fd = fd;
	s->path_dev = st.st_dev;
	s->path_ino = st.st_ino;
	s->path_ctime = st.st_ctim;
	return 0;
fail:
	(void)fd_close(fd);
	return r;
}

/* True when the file at our path is still the socket we bound. */
static bool path_is_ours(const struct grpc_server *s)
{
	struct stat st;

	return s->path && lstat(s->path, &st) == 0 && st.st_dev == s->path_dev &&
	       st.st_ino == s->path_ino && st.st_ctim.tv_sec == s->path_ctime.tv_sec &&
	       st.st_ctim.tv_nsec == s->path_ctime.tv_nsec;
}

void grpc_server_unlisten(struct grpc_server *s)
{
	s->listen_io = loop_io_free(s->listen_io);
	s->listen_fd = fd_close(s->listen_fd);
	s->accept_io_lost = false;
	if (s->accept_pause)
		loop_timer_disarm(s->accept_pause);
	if (!s->path)
		return;
	/* Someone (a restarted kubelet) may have replaced the file: only remove our own. */
	if (path_is_ours(s))
		(void)unlink(s->path);
	s->path = mfree(s->path);
}

int grpc_server_touch(struct grpc_server *s)
{
	struct stat st;

	if (!path_is_ours(s))
		return -ENOENT;
	if (utimensat(AT_FDCWD, s->path, NULL, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* The ctime moved with the touch: it is still ours. */
	if (lstat(s->path, &st) == 0 && st.st_dev == s->path_dev && st.st_ino == s->path_ino)
		s->path_ctime = st.st_ctim;
	return 0;
}

const char *grpc_server_path(const struct grpc_server *s)
{
	return s->path;
}

void grpc_server_shutdown(struct grpc_server *s, usec_t grace_usec,
			  void (*done)(struct grpc_server *s, void *userdata), void *userdata)
{
	s->done = done;
	s->done_ud = userdata;
	grpc_server_unlisten(s);
	if (s->shutting_down)
		return;
	s->shutting_down = true;
	/* Nothing is flushed (or freed) here: that happens from the loop, or the next feed. */
	for (struct grpc_server_conn *c = s->conns; c; c = c->next) {
		if (conn_dead(c))
			continue;
		if (c->state == CONN_HANDSHAKE || c->state == CONN_OPEN)
			grpc_conn_set_state(c, CONN_DRAINING);
		(void)h2_session_shutdown(c->h2);
		for (struct grpc_call *call = c->calls; call; call = call->next)
			if (call->state == CALL_RUNNING && call->method->server_streaming &&
			    !call->user_closed)
				(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
		grpc_conn_mark_dirty(c);
	}
	if (s->loop) {
		if (grace_usec != USEC_INFINITY && !s->grace &&
		    loop_timer_new(s->loop, on_grace, s, &s->grace) == 0)
			loop_timer_arm(s->grace, grace_usec);
		loop_timer_arm(s->defer, 0);
	} else if (s->stats.conns == 0 && !s->done_called) {
		s->done_called = true;
		if (done)
			done(s, userdata);
	}
}

struct grpc_server *grpc_server_free(struct grpc_server *s)
{
	if (!s)
		return NULL;
	grpc_server_unlisten(s);
	while (s->conns) {
		struct grpc_server_conn *c = s->conns;

		c->depth++;
		c->kill_status = GRPC_STATUS_UNAVAILABLE;
		grpc_conn_kill(c);
		c->depth--;
		/* A socket connection went to the graveyard; a memory one is still listed. */
		if (c->state != CONN_BURIED) {
			LIST_REMOVE(s->conns, c);
			free(c);
		}
	}
	server_free_graveyard(s);
	(void)loop_timer_free(s->defer);
	(void)loop_timer_free(s->grace);
	(void)loop_timer_free(s->accept_pause);
	free(s);
	return NULL;
}

void grpc_server_get_stats(const struct grpc_server *s, struct grpc_server_stats *ret)
{
	*ret = s->stats;
}
