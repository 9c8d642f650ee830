#pragma once

/*
 * The gRPC server's insides, shared by its three files and nobody else:
 *   grpc-server.c  the listener and the server's lifecycle (accept, refuse, evict, shutdown)
 *   grpc-conn.c    a connection: socket I/O, its timers, its state machine, its death
 *   grpc-call.c    a call: the h2 callbacks, routing, deadlines, send/finish
 *
 * The three files call each other, and may: they are one object, struct grpc_server (below),
 * with the connections and calls it owns, split by concern. A call enters and leaves its
 * connection (the re-entrancy guard that defers a kill) and marks it dirty; a connection frees
 * its calls and asks the server whether a shutdown is done; the server finishes calls and
 * expires connections. scripts/check-layers allows this circle, and no other, because of this
 * line:
 *
 * circle: grpc-server.c grpc-conn.c grpc-call.c (one struct grpc_server spans them)
 */

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "grpc.h"
#include "loop.h"
#include "util.h"

struct h2_callbacks;
struct h2_session;

#define MAX_HEADER_BYTES ((size_t)64 * 1024) /* per request header block */

/*
 * A connection's life. Every change goes through grpc_conn_set_state(), which holds the table
 * of legal transitions, asserts it and logs it (debug).
 *
 *   accept, new_mem      preface in
 *      HANDSHAKE ------------------------> OPEN
 *          |                                 |
 *          |        server shutdown          |
 *          +--------> DRAINING <-------------+
 *
 *   HANDSHAKE | OPEN | DRAINING ---------------> READ_DONE
 *          EOF, a protocol error, or a session that wants no more input
 *   HANDSHAKE | OPEN | DRAINING | READ_DONE ---> GOING_AWAY
 *          overflow, preface or idle timeout, eviction: our GOAWAY
 *   any state above ---------------------------> DEAD
 *          the kill, at the outermost leave: EOF, write error, linger timer,
 *          session done, grace over, free
 *   DEAD --------------------------------------> BURIED
 *          socket connections only: into the graveyard, freed from the loop
 *
 * READ_DONE and GOING_AWAY arm the linger timer (socket connections): a peer that reads
 * nothing gets LINGER_USEC to take our GOAWAY, then the connection dies. A memory connection
 * stays DEAD until its owner frees it.
 */
enum conn_state {
	CONN_HANDSHAKE,	 /* waiting for the client preface (the preface timer runs) */
	CONN_OPEN,	 /* serving streams (the idle timer runs while none is open) */
	CONN_DRAINING,	 /* server shutdown: GOAWAY(NO_ERROR) sent, open calls run to their end */
	CONN_READ_DONE,	 /* no more input (EOF, protocol error, end of session); output flushes */
	CONN_GOING_AWAY, /* closed by us (overflow, timeout, eviction): no new work, no sends */
	CONN_DEAD,	 /* calls closed, session and socket gone */
	CONN_BURIED,	 /* a dead socket connection in the server's graveyard */
};

/* What the connection timer is counting down. */
enum conn_timer {
	CONN_TIMER_PREFACE, /* from accept to the client preface */
	CONN_TIMER_OFF,	    /* a stream is open */
	CONN_TIMER_IDLE,    /* no stream is open */
};

enum call_state {
	CALL_RECV,     /* receiving the request */
	CALL_ABORTED,  /* answered before dispatch; further input is dropped */
	CALL_RUNNING,  /* handed to its handler */
	CALL_FINISHED, /* status submitted; waiting for the stream to close */
};

struct grpc_call {
	struct grpc_server_conn *conn;
	struct grpc_call *prev, *next;
	int32_t id; /* 0 once the stream is gone */
	enum call_state state;
	const struct grpc_method *method;
	struct buf hdrs; /* request header fields as "name\0value\0" pairs */
	bool hdr_overflow;
	bool hdr_done;
	const char *path;
	usec_t deadline;
	struct loop_timer *timer;
	struct grpc_deframer in;
	const uint8_t *req;
	size_t req_len;
	bool have_req;
	bool headers_sent;
	bool sent_msg;
	bool handed_out;  /* the handler saw it: the close callback is owed */
	bool user_closed; /* the close callback ran; the caller's pointer is dead */
	enum grpc_status status;
	grpc_call_close_fn *close_fn;
	void *close_ud;
	size_t in_accounted;  /* request message bytes counted in conn->in_bytes */
	size_t hdr_accounted; /* header bytes counted there, until the call is freed */
};

struct grpc_server_conn {
	struct grpc_server *server;
	struct grpc_server_conn *prev, *next;
	uint64_t id;
	enum conn_state state; /* changed only by grpc_conn_set_state() */
	int fd;
	bool mem; /* a memory connection (no socket), freed by its owner */
	struct loop_io *io;
	uint32_t io_events;
	struct loop_timer *linger;
	struct loop_timer *timer; /* preface, then idle timeout */
	enum conn_timer timer_mode;
	usec_t idle_since; /* accept, or the end of its last stream */
	bool have_peer;
	pid_t peer_pid;
	uid_t peer_uid;
	struct buf *mem_out;
	struct buf out; /* socket: staged output, out.data[out_off..len) unsent */
	size_t out_off;
	struct h2_session *h2;
	struct grpc_call *calls;
	size_t in_bytes; /* request bytes held by calls (headers and message bytes) */
	/*
	 * Nesting of entry points (loop callbacks, feed/flush, the server's sweeps). A callback
	 * into user code (a handler, a close callback) may send, finish or close calls of this
	 * connection, or flush it: the flush, the timer update and the kill wait for the
	 * outermost grpc_conn_leave(), so that nothing frees the session or the calls under a caller
	 * still using them. The server skips connections with depth > 0 for the same reason.
	 */
	unsigned depth;
	bool dirty;	   /* output may be pending: flush before leaving */
	bool kill_pending; /* DEAD is due: done by the outermost grpc_conn_leave() */
	bool overflow;	   /* GOING_AWAY because max_conn_buffered was passed */
	int dead_r;
	enum grpc_status kill_status;
};

struct grpc_server {
	struct loop *loop;
	const struct grpc_method *methods;
	size_t n_methods;
	struct grpc_limits lim;
	void *userdata;
	int listen_fd;
	struct loop_io *listen_io;
	char *path;
	dev_t path_dev;
	ino_t path_ino;
	struct timespec path_ctime; /* inode numbers are reused at once: this tells ours apart */
	struct grpc_server_conn *conns;
	struct grpc_server_conn *graveyard; /* dead socket connections, freed from the loop */
	struct loop_timer *defer; /* flushes connections dirtied from outside their callbacks */
	struct loop_timer *grace;
	struct loop_timer *accept_pause;
	bool accept_io_lost; /* pausing failed: the listener's io was dropped, resume recreates it */
	bool shutting_down;
	bool done_called;
	void (*done)(struct grpc_server *s, void *userdata);
	void *done_ud;
	uint64_t next_conn_id;
	struct grpc_server_stats stats;
	grpc_server_event_fn *event_fn;
	void *event_ud;
	grpc_server_conn_closed_fn *conn_closed_fn;
	void *conn_closed_ud;
};

/* Still taking input: HANDSHAKE, OPEN, DRAINING. */
static inline bool conn_reading(const struct grpc_server_conn *c)
{
	return c->state < CONN_READ_DONE;
}

/* No new work: GOING_AWAY or dead. */
static inline bool conn_closing(const struct grpc_server_conn *c)
{
	return c->state >= CONN_GOING_AWAY;
}

static inline bool conn_dead(const struct grpc_server_conn *c)
{
	return c->state >= CONN_DEAD;
}

/* Pushes @item on the front of the doubly linked list at @head. */
#define LIST_PREPEND(head, item)               \
	do {                                   \
		(item)->prev = NULL;           \
		(item)->next = (head);         \
		if (head)                      \
			(head)->prev = (item); \
		(head) = (item);               \
	} while (0)

/* Takes @item out of the doubly linked list at @head. */
#define LIST_REMOVE(head, item)                              \
	do {                                                 \
		assert(!(item)->prev == ((head) == (item))); \
		if ((item)->prev)                            \
			(item)->prev->next = (item)->next;   \
		else                                         \
			(head) = (item)->next;               \
		if ((item)->next)                            \
			(item)->next->prev = (item)->prev;   \
		(item)->prev = (item)->next = NULL;          \
	} while (0)

/* grpc-conn.c */
void grpc_conn_set_state(struct grpc_server_conn *c, enum conn_state to);
int grpc_conn_new(struct grpc_server *s, int fd, struct buf *mem_out,
		  struct grpc_server_conn **ret);
void grpc_conn_enter(struct grpc_server_conn *c);
void grpc_conn_leave(struct grpc_server_conn *c);
void grpc_conn_mark_dirty(struct grpc_server_conn *c);
size_t grpc_conn_buffered(const struct grpc_server_conn *c);
void grpc_conn_overflow(struct grpc_server_conn *c);
void grpc_conn_kill(struct grpc_server_conn *c);
void grpc_conn_expire(struct grpc_server_conn *c, enum grpc_server_event ev, const char *debug,
		      bool now);

/* grpc-call.c */
extern const struct h2_callbacks grpc_server_h2_callbacks;
void grpc_call_close_user(struct grpc_call *call, enum grpc_status status);
/* @c is call->conn, passed so that the list unlinking is plain to static analysers. */
void grpc_call_free(struct grpc_server_conn *c, struct grpc_call *call);

/* grpc-server.c */
void grpc_server_check_done(struct grpc_server *s);
