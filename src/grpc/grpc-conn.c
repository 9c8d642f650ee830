/*
 * A gRPC server connection: its state machine (grpc-server-int.h draws it), socket reads and
 * writes, the preface, idle and linger timers, its death and burial, and the in-memory
 * connections that fuzzers and tests feed.
 */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "grpc-io.h"
#include "grpc-server-int.h"
#include "grpc.h"
#include "h2.h"
#include "loop.h"

#define LOG_MODULE "grpc"
#include "log.h"

#define STREAM_WINDOW ((size_t)1024 * 1024)	/* SETTINGS_INITIAL_WINDOW_SIZE */
#define CONN_WINDOW   ((size_t)4 * 1024 * 1024) /* connection receive window */
#define WRITE_CHUNK   ((size_t)256 * 1024)	/* output staged per write step */
#define READ_BUDGET   ((size_t)256 * 1024)	/* bytes read per wakeup, for fairness */
#define LINGER_USEC   (1 * USEC_PER_SEC)	/* a dying connection's time to flush */

static const char *const conn_state_names[] = {
	[CONN_HANDSHAKE] = "handshake",	  [CONN_OPEN] = "open",
	[CONN_DRAINING] = "draining",	  [CONN_READ_DONE] = "read-done",
	[CONN_GOING_AWAY] = "going-away", [CONN_DEAD] = "dead",
	[CONN_BURIED] = "buried",
};

/* The one place a connection changes state: the transitions drawn in grpc-server-int.h. */
void grpc_conn_set_state(struct grpc_server_conn *c, enum conn_state to)
{
	static const unsigned legal[] = {
		[CONN_HANDSHAKE] = 1u << CONN_OPEN | 1u << CONN_DRAINING | 1u << CONN_READ_DONE |
				   1u << CONN_GOING_AWAY | 1u << CONN_DEAD,
		[CONN_OPEN] = 1u << CONN_DRAINING | 1u << CONN_READ_DONE | 1u << CONN_GOING_AWAY |
			      1u << CONN_DEAD,
		[CONN_DRAINING] = 1u << CONN_READ_DONE | 1u << CONN_GOING_AWAY | 1u << CONN_DEAD,
		[CONN_READ_DONE] = 1u << CONN_GOING_AWAY | 1u << CONN_DEAD,
		[CONN_GOING_AWAY] = 1u << CONN_DEAD,
		[CONN_DEAD] = 1u << CONN_BURIED,
		[CONN_BURIED] = 0,
	};

	if (!(legal[c->state] & (1u << to))) {
		log_error("illegal connection state change", "conn=%" PRIu64 " from=%s to=%s",
			  c->id, conn_state_names[c->state], conn_state_names[to]);
		assert(!"illegal connection state change");
	}
	log_debug("connection state", "conn=%" PRIu64 " from=%s to=%s", c->id,
		  conn_state_names[c->state], conn_state_names[to]);
	c->state = to;
}

void grpc_conn_enter(struct grpc_server_conn *c)
{
	c->depth++;
}

void grpc_conn_mark_dirty(struct grpc_server_conn *c)
{
	c->dirty = true;
	if (c->depth == 0 && c->server->loop)
		loop_timer_arm(c->server->defer, 0);
}

static size_t conn_out_pending(const struct grpc_server_conn *c)
{
	return c->out.len - c->out_off;
}

size_t grpc_conn_buffered(const struct grpc_server_conn *c)
{
	return c->in_bytes + h2_session_buffered(c->h2) + conn_out_pending(c);
}

/* Past max_conn_buffered: GOAWAY(ENHANCE_YOUR_CALM), then close. */
void grpc_conn_overflow(struct grpc_server_conn *c)
{
	if (conn_closing(c))
		return;
	log_debug("connection over its buffer limit, closing", "conn=%" PRIu64 " bytes=%zu", c->id,
		  grpc_conn_buffered(c));
	grpc_conn_set_state(c, CONN_GOING_AWAY);
	c->overflow = true;
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	if (h2_session_terminate(c->h2, H2_ENHANCE_YOUR_CALM, "buffered bytes limit") < 0)
		c->kill_pending = true;
	grpc_conn_mark_dirty(c);
}

static void conn_update_events(struct grpc_server_conn *c)
{
	uint32_t ev = 0;

	if (!c->io)
		return;
	if (conn_reading(c))
		ev |= EPOLLIN;
	if (conn_out_pending(c) > 0)
		ev |= EPOLLOUT;
	if (ev != c->io_events && loop_io_set_events(c->io, ev) == 0)
		c->io_events = ev;
}

/* Produces and writes output until nothing is left or the socket is full. */
static int conn_write(struct grpc_server_conn *c)
{
	int r = grpc_io_write(c->fd, c->h2, &c->out, &c->out_off, WRITE_CHUNK);

	if (conn_out_pending(c) == 0 && c->out.cap > WRITE_CHUNK * 2) {
		buf_release(&c->out);
		c->out_off = 0;
	}
	conn_update_events(c);
	return r;
}

static void conn_flush(struct grpc_server_conn *c)
{
	while (c->dirty && !conn_dead(c)) {
		int r;

		c->dirty = false;
		if (!c->mem) {
			r = conn_write(c);
		} else {
			struct buf scratch = { 0 };

			r = h2_session_send(c->h2, c->mem_out ? c->mem_out : &scratch, SIZE_MAX);
			buf_release(&scratch);
		}
		if (r < 0) {
			log_debug_errno(r, "connection write failed", "conn=%" PRIu64, c->id);
			c->kill_pending = true;
			break;
		}
	}
}

static void on_linger(struct loop_timer *t, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	grpc_conn_enter(c);
	c->kill_pending = true;
	grpc_conn_leave(c);
}

/* No more input; the input itself may have moved @c to GOING_AWAY already (overflow). */
static void conn_input_done(struct grpc_server_conn *c)
{
	if (conn_reading(c))
		grpc_conn_set_state(c, CONN_READ_DONE);
}

/* The peer closed its side, or the socket failed: no more input, and the connection dies. */
static void conn_input_eof(struct grpc_server_conn *c)
{
	/* A truncated frame is answered with GOAWAY. */
	(void)h2_session_recv_eof(c->h2);
	conn_input_done(c);
	c->kill_status = GRPC_STATUS_CANCELLED;
	c->kill_pending = true;
}

/*
 * A dead socket connection leaves the server's list at once, and its memory is released from
 * the loop once no callback can be using it (the libuv close_cb rule).
 */
static void conn_bury(struct grpc_server *s, struct grpc_server_conn *c)
{
	LIST_REMOVE(s->conns, c);
	grpc_conn_set_state(c, CONN_BURIED);
	c->next = s->graveyard;
	s->graveyard = c;
	if (s->loop)
		loop_timer_arm(s->defer, 0);
}

/* Closes the calls, the session and the socket; a memory connection's struct stays. */
void grpc_conn_kill(struct grpc_server_conn *c)
{
	struct grpc_server *s = c->server;
	uint32_t code = H2_NO_ERROR;
	bool event = false;
	enum grpc_server_event ev = GRPC_SERVER_EVENT_PROTOCOL;

	if (conn_dead(c))
		return;
	if (c->h2 && h2_session_goaway_sent(c->h2, &code) && code != H2_NO_ERROR)
		event = true;
	if (c->overflow) {
		c->dead_r = -ENOBUFS;
		ev = GRPC_SERVER_EVENT_OVERFLOW;
		code = H2_ENHANCE_YOUR_CALM;
		event = true;
	} else {
		c->dead_r = event ? -EPROTO : -ECONNRESET;
	}
	grpc_conn_set_state(c, CONN_DEAD);
	while (c->calls) {
		struct grpc_call *call = c->calls;

		grpc_call_close_user(call, c->kill_status);
		grpc_call_free(c, call);
	}
	c->h2 = h2_session_free(c->h2);
	c->io = loop_io_free(c->io);
	c->linger = loop_timer_free(c->linger);
	c->timer = loop_timer_free(c->timer);
	c->fd = c->fd >= 0 ? fd_close(c->fd) : -1;
	buf_release(&c->out);
	c->out_off = 0;
	s->stats.conns--;
	if (event) {
		s->stats.goaways++;
		log_debug("connection closed with GOAWAY", "conn=%" PRIu64 " h2_error=%u", c->id,
			  code);
		if (s->event_fn)
			s->event_fn(s, ev, c->id, code, s->event_ud);
	}
	if (s->conn_closed_fn)
		s->conn_closed_fn(s, c->id, s->conn_closed_ud);
	if (!c->mem)
		conn_bury(s, c);
	grpc_server_check_done(s);
}

/*
 * The connection timer: first the preface timeout from accept, then, once the preface is in,
 * the idle timeout whenever no stream is open.
 */
static void conn_update_timer(struct grpc_server_conn *c)
{
	if (c->state == CONN_HANDSHAKE && h2_session_preface_done(c->h2))
		grpc_conn_set_state(c, CONN_OPEN);
	if (!c->timer || conn_closing(c))
		return;
	if (c->timer_mode == CONN_TIMER_PREFACE) {
		if (!h2_session_preface_done(c->h2))
			return;
		c->timer_mode = CONN_TIMER_OFF;
		loop_timer_disarm(c->timer);
	}
	if (c->calls) {
		if (c->timer_mode == CONN_TIMER_IDLE)
			loop_timer_disarm(c->timer);
		c->timer_mode = CONN_TIMER_OFF;
	} else if (c->timer_mode != CONN_TIMER_IDLE) {
		c->timer_mode = CONN_TIMER_IDLE;
		c->idle_since = now_usec();
		loop_timer_arm(c->timer, c->server->lim.idle_timeout);
	}
}

void grpc_conn_leave(struct grpc_server_conn *c)
{
	if (c->depth == 1 && !conn_dead(c)) {
		/* After the flush: sending a stream's end is what closes it. */
		conn_flush(c);
		conn_update_timer(c);
		if (!conn_dead(c) && !c->kill_pending && h2_session_done(c->h2) &&
		    conn_out_pending(c) == 0)
			c->kill_pending = true;
		/*
		 * A connection that stopped reading is dying (error, overflow, EOF, end of
		 * session): it gets a moment to flush its GOAWAY, even to a peer that reads
		 * nothing, and is closed then.
		 */
		if (!conn_dead(c) && !c->kill_pending && !conn_reading(c) && !c->mem &&
		    !c->linger && loop_timer_new(c->server->loop, on_linger, c, &c->linger) == 0)
			loop_timer_arm(c->linger, LINGER_USEC);
		if (c->kill_pending)
			grpc_conn_kill(c);
	}
	c->depth--;
}

/*
 * Closes @c for a reason of ours (@ev): GOAWAY(NO_ERROR, @debug), then a moment to flush it
 * (@now: closed as soon as it is written, freeing the slot at once). Reports @ev.
 */
void grpc_conn_expire(struct grpc_server_conn *c, enum grpc_server_event ev, const char *debug,
		      bool now)
{
	struct grpc_server *s = c->server;
	uint64_t id = c->id;

	if (conn_closing(c))
		return;
	log_debug("closing connection", "conn=%" PRIu64 " why=\"%s\"", id, debug);
	grpc_conn_enter(c);
	grpc_conn_set_state(c, CONN_GOING_AWAY);
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	if (h2_session_terminate(c->h2, H2_NO_ERROR, debug) < 0 || now)
		c->kill_pending = true;
	c->dirty = true;
	grpc_conn_leave(c);
	if (s->event_fn)
		s->event_fn(s, ev, id, H2_NO_ERROR, s->event_ud);
}

static void on_conn_timer(struct loop_timer *t, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	if (c->timer_mode == CONN_TIMER_PREFACE)
		grpc_conn_expire(c, GRPC_SERVER_EVENT_PREFACE_TIMEOUT, "no HTTP/2 preface in time",
				 false);
	else if (!c->calls)
		grpc_conn_expire(c, GRPC_SERVER_EVENT_IDLE, "idle", false);
}

static void on_conn_io(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct grpc_server_conn *c = userdata;

	grpc_conn_enter(c);
	if (conn_reading(c) && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		switch (grpc_io_read(c->fd, c->h2, READ_BUDGET)) {
		case GRPC_IO_READ_AGAIN:
			break;
		case GRPC_IO_READ_REJECTED:
		case GRPC_IO_READ_SATED:
			conn_input_done(c);
			break;
		default: /* EOF or a socket error */
			conn_input_eof(c);
			break;
		}
	} else if (!conn_reading(c) && (events & (EPOLLHUP | EPOLLERR))) {
		c->kill_pending = true;
	}
	c->dirty = true;
	grpc_conn_leave(c);
}

int grpc_conn_new(struct grpc_server *s, int fd, struct buf *mem_out, struct grpc_server_conn **ret)
{
	const struct h2_settings settings = {
		.max_concurrent_streams = s->lim.max_concurrent_streams,
		.initial_window_size = STREAM_WINDOW,
		.max_header_list_size = MAX_HEADER_BYTES,
		.conn_window_size = CONN_WINDOW,
	};
	struct grpc_server_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->server = s;
	c->fd = fd;
	c->mem_out = mem_out;
	c->mem = fd < 0;
	c->kill_status = GRPC_STATUS_UNAVAILABLE;
	r = h2_session_new(true, &settings, &grpc_server_h2_callbacks, c, &c->h2);
	if (r < 0)
		goto fail;
	if (fd >= 0) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		/* Who is on the other side (plugin.c tells the kubelet's streams from others). */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
		    len == sizeof(cred)) {
			c->have_peer = true;
			c->peer_pid = cred.pid;
			c->peer_uid = cred.uid;
		}
		r = loop_io_new(s->loop, fd, EPOLLIN, on_conn_io, c, &c->io);
		if (r < 0)
			goto fail;
		c->io_events = EPOLLIN;
	}
	c->idle_since = now_usec();
	if (s->loop) {
		r = loop_timer_new(s->loop, on_conn_timer, c, &c->timer);
		if (r < 0)
			goto fail;
		loop_timer_arm(c->timer, s->lim.preface_timeout);
	}
	c->id = ++s->next_conn_id;
	LIST_PREPEND(s->conns, c);
	s->stats.conns++;
	s->stats.conns_peak = MAX(s->stats.conns_peak, s->stats.conns);
	/* SETTINGS go out at once: grpc-go, grpcio and grpc-js wait for them. */
	grpc_conn_enter(c);
	c->dirty = true;
	grpc_conn_leave(c);
	*ret = c;
	return 0;
fail:
	(void)loop_io_free(c->io);
	h2_session_free(c->h2);
	free(c);
	return r;
}

int grpc_server_conn_new_mem(struct grpc_server *s, struct buf *out, struct grpc_server_conn **ret)
{
	return grpc_conn_new(s, -1, out, ret);
}

int grpc_server_conn_feed(struct grpc_server_conn *c, const uint8_t *data, size_t len)
{
	if (conn_dead(c))
		return c->dead_r;
	grpc_conn_enter(c);
	if (conn_reading(c) &&
	    (h2_session_recv(c->h2, data, len) < 0 || !h2_session_want_read(c->h2)))
		conn_input_done(c);
	c->dirty = true;
	grpc_conn_leave(c);
	return conn_dead(c) ? c->dead_r : 0;
}

int grpc_server_conn_feed_eof(struct grpc_server_conn *c)
{
	if (conn_dead(c))
		return c->dead_r;
	grpc_conn_enter(c);
	conn_input_eof(c);
	c->dirty = true;
	grpc_conn_leave(c);
	return c->dead_r;
}

int grpc_server_conn_flush(struct grpc_server_conn *c)
{
	if (conn_dead(c))
		return c->dead_r;
	grpc_conn_enter(c);
	c->dirty = true;
	grpc_conn_leave(c);
	return conn_dead(c) ? c->dead_r : 0;
}

struct grpc_server_conn *grpc_server_conn_free(struct grpc_server_conn *c)
{
	if (!c)
		return NULL;
	c->depth++;
	grpc_conn_kill(c);
	c->depth--;
	if (c->state != CONN_BURIED) {
		LIST_REMOVE(c->server->conns, c);
		free(c);
	}
	return NULL;
}

uint64_t grpc_server_conn_id(const struct grpc_server_conn *c)
{
	return c->id;
}

void grpc_server_conn_set_peer_cred(struct grpc_server_conn *c, pid_t pid, uid_t uid)
{
	c->have_peer = true;
	c->peer_pid = pid;
	c->peer_uid = uid;
}
