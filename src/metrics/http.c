#define LOG_MODULE "http"

#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "log.h"

#define HTTP_DEFAULT_MAX_CONNECTIONS 16
#define HTTP_DEFAULT_TIMEOUT	     (10 * USEC_PER_SEC)
#define HTTP_DEFAULT_REQUEST_BYTES   8192
#define HTTP_DEFAULT_MAX_DEFERRED    64
/* Connections accepted per wake-up of the listening socket, so a flood cannot hog the loop. */
#define HTTP_ACCEPT_BATCH 64
/* How long accepting pauses when accept() fails for want of fds or memory. */
#define HTTP_ACCEPT_PAUSE (100 * USEC_PER_MSEC)

/*
 * Where a connection is. Its deadline and whether it may be evicted follow from it: a peer
 * controls how long a connection reads a request or drains an answer, so both have a deadline
 * (not an idle timeout, which a byte every few seconds defeats) and either gives way to a new
 * connection when the server is full. A deferred one waits for us, not for the peer: it holds
 * no slot (its own budget, max_deferred) and the handler bounds its wait.
 */
enum conn_phase {
	CONN_REQUEST,  /* reading a request: since the accept, or since the last answer went out */
	CONN_WRITING,  /* an answer queued, not all of it sent yet */
	CONN_DEFERRED, /* suspended until the handler answers */
	CONN_CLOSING,  /* shut down by us; MHD sees the EOF and closes it in its next run */
};

struct http_conn {
	struct http_server *server;
	int fd; /* MHD's: shut down, never closed, by us */
	struct sockaddr_storage addr;
	enum conn_phase phase;
	usec_t since; /* when the phase began */
	uint64_t run; /* s->runs then: MHD has served it once s->runs is past this */
	struct http_conn *prev, *next;
};

/* Connections by phase, oldest first (a phase change moves one to the tail). */
struct conn_list {
	struct http_conn *head, *tail;
	unsigned n;
};

struct http_server {
	struct loop *loop;
	struct MHD_Daemon *mhd;
	int listen_fd;
	unsigned port;
	size_t max_request_bytes;
	unsigned max_connections, max_per_ip, max_deferred;
	usec_t timeout;
	/* CONN_REQUEST and CONN_WRITING (one deadline, so the head expires first), the others */
	struct conn_list active, deferred_conns, closing;
	uint64_t runs; /* MHD_run() calls done */
	bool warned_full;
	struct loop_io *listen_io;
	struct loop_io *mhd_io;
	struct loop_timer *timer; /* MHD's timeout, our next deadline, and runs after a resume */
	struct loop_timer *accept_timer; /* ends a pause of accepting */
	http_handler_fn *fn;
	void *userdata;
	struct http_request *deferred; /* suspended requests, a list through next/prev */
	bool freeing;
	struct http_stats stats;
};

struct http_request {
	struct http_server *server;
	struct MHD_Connection *conn;
	struct http_conn *hc; /* NULL when its tracking could not be allocated */
	const char *method;
	const char *path;
	size_t body;		     /* request body bytes dropped so far */
	struct MHD_Response *answer; /* what to queue once the handler or the resume is done */
	unsigned status;
	bool in_handler;
	bool deferred;
	bool answered; /* http_respond() ran (answer set, or NULL when it failed) */
	struct http_request *next, *prev;
};

static const char *const evict_reasons[HTTP_EVICT_COUNT] = {
	[HTTP_EVICT_FULL] = "full",
	[HTTP_EVICT_REQUEST_DEADLINE] = "request_deadline",
	[HTTP_EVICT_WRITE_DEADLINE] = "write_deadline",
};

const char *http_evict_reason(enum http_evict e)
{
	return (unsigned)e < HTTP_EVICT_COUNT ? evict_reasons[e] : NULL;
}

/* --- the connection table --- */

static struct conn_list *list_of(struct http_server *s, enum conn_phase p)
{
	switch (p) {
	case CONN_REQUEST:
	case CONN_WRITING:
		return &s->active;
	case CONN_DEFERRED:
		return &s->deferred_conns;
	case CONN_CLOSING:
		break;
	}
	return &s->closing;
}

static void list_unlink(struct conn_list *l, struct http_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
	l->n--;
}

static void list_append(struct conn_list *l, struct http_conn *c)
{
	c->prev = l->tail;
	c->next = NULL;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
}

static void conns_free(struct conn_list *l)
{
	struct http_conn *c, *next;

	for (c = l->head; c; c = next) {
		next = c->next;
		free(c);
	}
	*l = (struct conn_list){ 0 };
}

/* Moves @c to @p, starting the phase's clock now. NULL-safe. */
static void conn_set_phase(struct http_conn *c, enum conn_phase p)
{
	struct http_server *s;

	if (!c || c->phase == CONN_CLOSING)
		return;
	s = c->server;
	list_unlink(list_of(s, c->phase), c);
	c->phase = p;
	c->since = now_usec();
	c->run = s->runs;
	list_append(list_of(s, p), c);
}

/* The tracking of @conn (NULL: none, as when it could not be allocated). */
static struct http_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return i ? i->socket_context : NULL;
}

/*
 * Closes @c the way MHD copes with: shutdown() makes its socket read EOF (and fail writes),
 * so MHD closes it itself in its next run, calling the completion callbacks as for a peer
 * that went away. The fd stays MHD's until then.
 */
static void conn_evict(struct http_conn *c, enum http_evict why)
{
	struct http_server *s = c->server;

	s->stats.evicted[why]++;
	log_debug("http connection closed", "reason=%s phase=%s age_ms=%llu",
		  http_evict_reason(why), c->phase == CONN_REQUEST ? "request" : "writing",
		  (unsigned long long)((now_usec() - c->since) / USEC_PER_MSEC));
	conn_set_phase(c, CONN_CLOSING);
	(void)shutdown(c->fd, SHUT_RDWR);
}

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return false;
}

/*
 * The connection to close for a newcomer (from @from when not NULL): the oldest one reading a
 * request (an idle keep-alive, a half-sent header, a body that does not come), else the oldest
 * one whose answer is not drained; in either case only one MHD has run on since it got there:
 * a connection accepted in this batch may hold a request MHD has not read yet (a probe, say),
 * and must not lose its place to the connections that follow it.
 */
static struct http_conn *victim(struct http_server *s, const struct sockaddr_storage *from)
{
	for (int pass = 0; pass < 2; pass++) {
		enum conn_phase want = pass == 0 ? CONN_REQUEST : CONN_WRITING;

		for (struct http_conn *c = s->active.head; c; c = c->next)
			if (c->phase == want && c->run < s->runs &&
			    (!from || same_address(&c->addr, from)))
				return c;
	}
	return NULL;
}

static unsigned count_from(struct http_server *s, const struct sockaddr_storage *from)
{
	unsigned n = 0;

	for (struct http_conn *c = s->active.head; c; c = c->next)
		n += same_address(&c->addr, from);
	return n;
}

/* Makes room for a connection from @from: true when there is some (evicting if need be). */
static bool make_room(struct http_server *s, const struct sockaddr_storage *from)
{
	struct http_conn *c;

	if (s->max_per_ip && count_from(s, from) >= s->max_per_ip) {
		c = victim(s, from);
		if (!c)
			return false;
		conn_evict(c, HTTP_EVICT_FULL);
	}
	if (s->active.n < s->max_connections)
		return true;
	c = victim(s, NULL);
	if (!c)
		return false;
	if (!s->warned_full) {
		s->warned_full = true;
		log_warn("http connections at their cap, closing the oldest idle or stalled ones",
			 "max_connections=%u", s->max_connections);
	}
	conn_evict(c, HTTP_EVICT_FULL);
	return true;
}

/* Closes the connections past their deadline; returns the next one (USEC_INFINITY: none). */
static usec_t expire(struct http_server *s, usec_t now)
{
	struct http_conn *c;

	while ((c = s->active.head) && now - c->since >= s->timeout)
		conn_evict(c, c->phase == CONN_REQUEST ? HTTP_EVICT_REQUEST_DEADLINE :
							 HTTP_EVICT_WRITE_DEADLINE);
	return c ? c->since + s->timeout : USEC_INFINITY;
}

static void http_run(struct http_server *s)
{
	MHD_UNSIGNED_LONG_LONG ms;
	usec_t now, next;

	if (MHD_run(s->mhd) != MHD_YES)
		log_debug("libmicrohttpd run failed", NULL);
	s->runs++;
	now = now_usec();
	next = expire(s, now);
	/* One timer for both: whichever of MHD's timeout and our next deadline comes first. */
	if (MHD_get_timeout(s->mhd, &ms) == MHD_YES)
		next = MIN(next, now + (usec_t)ms * USEC_PER_MSEC);
	if (next == USEC_INFINITY)
		loop_timer_disarm(s->timer);
	else
		loop_timer_arm_at(s->timer, next);
}

static void on_mhd_io(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	http_run(userdata);
}

static void on_timer(struct loop_timer *t, void *userdata)
{
	http_run(userdata);
}

static void on_accept_timer(struct loop_timer *t, void *userdata)
{
	struct http_server *s = userdata;

	(void)loop_io_set_events(s->listen_io, EPOLLIN);
}

static void on_listen(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct http_server *s = userdata;

	for (unsigned i = 0; i < HTTP_ACCEPT_BATCH; i++) {
		struct sockaddr_storage sa = { 0 };
		socklen_t len = sizeof(sa);
		int c = accept4(fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (c < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				break;
			/* Out of fds or memory: the socket stays readable, so pause a while. */
			log_debug_errno(errno, "accept failed, pausing", NULL);
			(void)loop_io_set_events(s->listen_io, 0);
			loop_timer_arm(s->accept_timer, HTTP_ACCEPT_PAUSE);
			break;
		}
		if (!make_room(s, &sa)) {
			log_debug("http connection refused: every one is busy", NULL);
			s->stats.refused++;
			(void)fd_close(c);
			continue;
		}
		/* Closes @c itself when it refuses: a limit reached (ENFILE) or no memory. */
		if (MHD_add_connection(s->mhd, c, (struct sockaddr *)&sa, len) != MHD_YES)
			s->stats.refused++;
	}
	http_run(s);
}

/* Tracks a connection MHD took (from inside MHD_add_connection), and forgets it once closed. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	const union MHD_ConnectionInfo *i;
	struct http_conn *c = *socket_context;

	if (toe != MHD_CONNECTION_NOTIFY_STARTED) {
		if (s->stats.open > 0)
			s->stats.open--;
		if (c) {
			list_unlink(list_of(s, c->phase), c);
			free(c);
			*socket_context = NULL;
		}
		return;
	}
	s->stats.connections++;
	s->stats.open++;
	i = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	c = calloc(1, sizeof(*c));
	if (!c || !i) {
		/* Untracked, it would escape the deadlines: close it instead. */
		log_debug("http connection not tracked, closing it", NULL);
		s->stats.refused++;
		if (i)
			(void)shutdown(i->connect_fd, SHUT_RDWR);
		free(c);
		return;
	}
	*c = (struct http_conn){ .server = s, .fd = i->connect_fd, .phase = CONN_REQUEST };
	i = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (i && i->client_addr && i->client_addr->sa_family == AF_INET)
		memcpy(&c->addr, i->client_addr, sizeof(struct sockaddr_in));
	else if (i && i->client_addr && i->client_addr->sa_family == AF_INET6)
		memcpy(&c->addr, i->client_addr, sizeof(struct sockaddr_in6));
	c->since = now_usec();
	c->run = s->runs;
	list_append(&s->active, c);
	*socket_context = c;
}

static void deferred_unlink(struct http_request *r)
{
	struct http_server *s = r->server;

	if (!r->deferred)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		s->deferred = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->next = r->prev = NULL;
	r->deferred = false;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_request *r = *con_cls;

	/* Done with this request: a keep-alive connection now waits for the next one. */
	conn_set_phase(conn_of(conn), CONN_REQUEST);
	if (!r)
		return;
	deferred_unlink(r);
	if (r->answer)
		MHD_destroy_response(r->answer);
	free(r);
	*con_cls = NULL;
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];
	size_t n;

	if (log_max_level > LOG_LEVEL_DEBUG)
		return;
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = 0;
	log_debug("libmicrohttpd message", "err=%s", log_q(msg));
}

/* A response with a copy of @body and @headers (name, value, ..., NULL); NULL on failure. */
static struct MHD_Response *response_new(const char *const *headers, const void *body, size_t len,
					 int *ret)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!resp) {
		*ret = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2) {
		if (MHD_add_response_header(resp, headers[i], headers[i + 1]) != MHD_YES) {
			MHD_destroy_response(resp);
			*ret = -EINVAL;
			return NULL;
		}
	}
	*ret = 0;
	return resp;
}

/* Queues an answer made here (405, 413, 500); MHD_NO closes the connection. */
static enum MHD_Result answer_now(struct http_server *s, struct MHD_Connection *conn,
				  unsigned status, const char *const *headers, const char *body)
{
	struct MHD_Response *resp;
	enum MHD_Result ok;
	int r;

	resp = response_new(headers, body, strlen(body), &r);
	if (!resp)
		return MHD_NO;
	conn_set_phase(conn_of(conn), CONN_WRITING);
	ok = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ok;
}

static enum MHD_Result queue_answer(struct http_request *r)
{
	enum MHD_Result ok;

	if (!r->answer)
		return MHD_NO;
	conn_set_phase(r->hc, CONN_WRITING);
	ok = MHD_queue_response(r->conn, r->status, r->answer);
	MHD_destroy_response(r->answer);
	r->answer = NULL;
	return ok;
}

/* Does the request announce a body longer than @max (or an unreadable length)? */
static bool body_too_big(struct MHD_Connection *conn, size_t max)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	uint64_t n;

	return v && (safe_atou64(v, &n) < 0 || n > max);
}

static const char *const text_plain[] = { "Content-Type", "text/plain; charset=utf-8", NULL };

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	static const char *const allow[] = { "Allow", "GET, HEAD", "Content-Type",
					     "text/plain; charset=utf-8", NULL };
	struct http_server *s = cls;
	struct http_request *r = *con_cls;

	if (!r) {
		if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD)) {
			s->stats.requests++;
			return answer_now(s, conn, MHD_HTTP_METHOD_NOT_ALLOWED, allow,
					  "method not allowed\n");
		}
		/* MHD takes an early answer only now, before the body: judge it by its length. */
		if (body_too_big(conn, s->max_request_bytes)) {
			s->stats.requests++;
			return answer_now(s, conn, MHD_HTTP_CONTENT_TOO_LARGE, text_plain,
					  "request body too large\n");
		}
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		*r = (struct http_request){ .server = s,
					    .conn = conn,
					    .hc = conn_of(conn),
					    .method = method,
					    .path = url };
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		/* A chunked body without a length: past the limit, close. */
		r->body += *upload_data_size;
		*upload_data_size = 0;
		return r->body > s->max_request_bytes ? MHD_NO : MHD_YES;
	}
	if (r->answered) /* resumed after a deferred http_respond() */
		return queue_answer(r);
	if (r->deferred) /* resumed spuriously: stay suspended */
		return MHD_YES;
	if (s->freeing)
		return MHD_NO;

	s->stats.requests++;
	r->in_handler = true;
	s->fn(r, s->userdata);
	r->in_handler = false;
	if (r->answered)
		return queue_answer(r);
	if (r->deferred) {
		conn_set_phase(r->hc, CONN_DEFERRED);
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	log_debug("handler returned without an answer", "path=%s", log_q(url));
	return answer_now(s, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, text_plain, "internal error\n");
}

int http_defer(struct http_request *r)
{
	struct http_server *s = r->server;

	if (!r->in_handler || r->deferred || r->answered)
		return -EINVAL;
	if (s->deferred_conns.n >= s->max_deferred)
		return -EBUSY;
	r->deferred = true;
	r->prev = NULL;
	r->next = s->deferred;
	if (s->deferred)
		s->deferred->prev = r;
	s->deferred = r;
	return 0;
}

int http_respond_headers(struct http_request *r, unsigned status, const char *const *headers,
			 const void *body, size_t len)
{
	struct http_server *s = r->server;
	int ret;

	if (r->answered)
		return -EALREADY;
	r->answer = response_new(headers, body, len, &ret);
	r->status = status;
	r->answered = true;
	if (r->deferred) {
		deferred_unlink(r);
		conn_set_phase(r->hc, CONN_WRITING);
		MHD_resume_connection(r->conn);
		/* MHD picks the resumed connection up in its next run. */
		loop_timer_arm(s->timer, 0);
	}
	return ret;
}

int http_respond(struct http_request *r, unsigned status, const char *content_type,
		 const char *content_encoding, const void *body, size_t len)
{
	const char *headers[5];
	size_t n = 0;

	if (content_type) {
		headers[n++] = "Content-Type";
		headers[n++] = content_type;
	}
	if (content_encoding) {
		headers[n++] = "Content-Encoding";
		headers[n++] = content_encoding;
	}
	headers[n] = NULL;
	return http_respond_headers(r, status, headers, body, len);
}

const char *http_request_method(const struct http_request *r)
{
	return r->method;
}

const char *http_request_path(const struct http_request *r)
{
	return r->path;
}

const char *http_request_header(const struct http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

unsigned http_server_port(const struct http_server *s)
{
	return s->port;
}

void http_server_get_stats(const struct http_server *s, struct http_stats *ret)
{
	*ret = s->stats;
}

/* A listening socket on @sa; IPv6 dual-stack when @all. Returns the fd or -errno. */
static int listen_on(const struct sockaddr_storage *sa, socklen_t len, bool all)
{
	int fd, one = 1, v6only = !all, r;

	fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (sa->ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) < 0) ||
	    bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 128) < 0) {
		r = -errno;
		(void)fd_close(fd);
		return r;
	}
	return fd;
}

static int http_listen(struct http_server *s, const char *address, char **reterr)
{
	struct sockaddr_storage sa;
	socklen_t len = 0;
	bool all;
	int r;

	memset(&sa, 0, sizeof(sa));
	r = address_parse(address, &sa, &len, &all, reterr);
	if (r < 0)
		return r;
	r = listen_on(&sa, len, all);
	if (all && (r == -EAFNOSUPPORT || r == -EADDRNOTAVAIL)) {
		/* No IPv6 on this host: every IPv4 address. */
		struct sockaddr_in *in = (struct sockaddr_in *)&sa;
		uint16_t port = ((struct sockaddr_in6 *)&sa)->sin6_port;

		memset(&sa, 0, sizeof(sa));
		in->sin_family = AF_INET;
		in->sin_port = port;
		in->sin_addr.s_addr = htonl(INADDR_ANY);
		len = sizeof(*in);
		r = listen_on(&sa, len, false);
	}
	if (r < 0)
		return set_error(reterr, r, "cannot listen on \"%s\": %s", address, strerror(-r));
	s->listen_fd = r;
	len = sizeof(sa);
	if (getsockname(s->listen_fd, (struct sockaddr *)&sa, &len) < 0)
		return set_error(reterr, -errno, "cannot read the port of \"%s\": %m", address);
	if (sa.ss_family == AF_INET6)
		s->port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
	else
		s->port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
	return 0;
}

int http_server_new(struct loop *l, const struct http_opts *o, http_handler_fn *fn, void *userdata,
		    struct http_server **ret, char **reterr)
{
	unsigned max_conn = o->max_connections ? o->max_connections : HTTP_DEFAULT_MAX_CONNECTIONS;
	usec_t timeout = o->timeout ? o->timeout : HTTP_DEFAULT_TIMEOUT;
	size_t mem = o->max_request_bytes ? o->max_request_bytes : HTTP_DEFAULT_REQUEST_BYTES;
	unsigned max_deferred = o->max_deferred ? o->max_deferred : HTTP_DEFAULT_MAX_DEFERRED;
	unsigned timeout_s;
	const union MHD_DaemonInfo *info;
	struct http_server *s;
	int r;

	*ret = NULL;
	if (timeout > (usec_t)UINT32_MAX * USEC_PER_SEC)
		return set_error(reterr, -EINVAL, "http timeout too large");
	timeout_s = (unsigned)((timeout + USEC_PER_SEC - 1) / USEC_PER_SEC);
	/* MHD needs room for its own bookkeeping and the answer's headers. */
	if (mem < 1024)
		return set_error(reterr, -EINVAL,
				 "http max request bytes %zu below the minimum of 1024", mem);
	s = calloc(1, sizeof(*s));
	if (!s)
		return set_error(reterr, -ENOMEM, "out of memory");
	s->loop = l;
	s->fn = fn;
	s->userdata = userdata;
	s->listen_fd = -1;
	s->max_request_bytes = mem;
	s->max_connections = max_conn;
	s->max_per_ip = o->max_per_ip;
	s->max_deferred = max_deferred;
	s->timeout = (usec_t)timeout_s * USEC_PER_SEC;

	r = http_listen(s, o->address, reterr);
	if (r < 0)
		goto fail;
	s->mhd = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, on_request, s,
		/* ours, the deferred ones, and the ones closing after an eviction */
		MHD_OPTION_CONNECTION_LIMIT, 2 * max_conn + max_deferred,
		MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
		on_connection, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
	if (!s->mhd) {
		r = set_error(reterr, -ENOMEM,
			      "cannot start libmicrohttpd (see its debug messages)");
		goto fail;
	}
	info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info) {
		r = set_error(reterr, -EIO, "libmicrohttpd has no epoll fd");
		goto fail;
	}
	r = loop_timer_new(l, on_timer, s, &s->timer);
	if (r >= 0)
		r = loop_timer_new(l, on_accept_timer, s, &s->accept_timer);
	if (r >= 0)
		r = loop_io_new(l, info->epoll_fd, EPOLLIN, on_mhd_io, s, &s->mhd_io);
	if (r >= 0)
		r = loop_io_new(l, s->listen_fd, EPOLLIN, on_listen, s, &s->listen_io);
	if (r < 0) {
		r = set_error(reterr, r, "cannot watch the http sockets: %s", strerror(-r));
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	http_server_free(s);
	return r;
}

struct http_server *http_server_free(struct http_server *s)
{
	static const char busy[] = "shutting down\n";

	if (!s)
		return NULL;
	s->freeing = true;
	s->listen_io = loop_io_free(s->listen_io);
	/*
	 * Out of our epoll set before MHD_stop_daemon() closes MHD's epoll fd: after the close,
	 * its number may already be another thread's (a GPU worker loading NVML opens files),
	 * and the removal would touch that fd. ThreadSanitizer saw exactly that.
	 */
	s->mhd_io = loop_io_free(s->mhd_io);
	if (s->mhd) {
		/* MHD aborts when stopped with a suspended connection: answer them all. */
		while (s->deferred)
			(void)http_respond_headers(s->deferred, MHD_HTTP_SERVICE_UNAVAILABLE,
						   text_plain, busy, sizeof(busy) - 1);
		for (unsigned i = 0; i < 4; i++)
			(void)MHD_run(s->mhd);
		MHD_stop_daemon(s->mhd);
	}
	/* MHD_stop_daemon() reports each connection closed; free what it might not have. */
	conns_free(&s->active);
	conns_free(&s->deferred_conns);
	conns_free(&s->closing);
	s->timer = loop_timer_free(s->timer);
	s->accept_timer = loop_timer_free(s->accept_timer);
	s->listen_fd = fd_close(s->listen_fd);
	free(s);
	return NULL;
}
