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

#include "log.h"

#define HTTP_DEFAULT_MAX_CONNECTIONS 16
#define HTTP_DEFAULT_TIMEOUT	     (10 * USEC_PER_SEC)
#define HTTP_DEFAULT_REQUEST_BYTES   8192
/* Connections accepted per wake-up of the listening socket, so a flood cannot hog the loop. */
#define HTTP_ACCEPT_BATCH 64
/* How long accepting pauses when accept() fails for want of fds or memory. */
#define HTTP_ACCEPT_PAUSE (100 * USEC_PER_MSEC)

struct http_server {
	struct loop *loop;
	struct MHD_Daemon *mhd;
	int listen_fd;
	unsigned port;
	size_t max_request_bytes;
	struct loop_io *listen_io;
	struct loop_io *mhd_io;
	struct loop_timer *timer;	 /* MHD's timeout, and runs after a resume */
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

static void http_run(struct http_server *s)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_run(s->mhd) != MHD_YES)
		log_debug("libmicrohttpd run failed", NULL);
	if (MHD_get_timeout(s->mhd, &ms) == MHD_YES)
		loop_timer_arm(s->timer, (usec_t)ms * USEC_PER_MSEC);
	else
		loop_timer_disarm(s->timer);
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
		struct sockaddr_storage sa;
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
		/* Closes @c itself when it refuses: a limit reached (ENFILE) or no memory. */
		if (MHD_add_connection(s->mhd, c, (struct sockaddr *)&sa, len) != MHD_YES)
			s->stats.refused++;
	}
	http_run(s);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		s->stats.connections++;
		s->stats.open++;
	} else if (s->stats.open > 0) {
		s->stats.open--;
	}
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
	ok = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ok;
}

static enum MHD_Result queue_answer(struct http_request *r)
{
	enum MHD_Result ok;

	if (!r->answer)
		return MHD_NO;
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
		*r = (struct http_request){
			.server = s, .conn = conn, .method = method, .path = url
		};
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
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	log_debug("handler returned without an answer", "path=%s", log_q(url));
	return answer_now(s, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, text_plain, "internal error\n");
}

void http_defer(struct http_request *r)
{
	struct http_server *s = r->server;

	if (!r->in_handler || r->deferred || r->answered)
		return;
	r->deferred = true;
	r->prev = NULL;
	r->next = s->deferred;
	if (s->deferred)
		s->deferred->prev = r;
	s->deferred = r;
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

/*
 * Parses "[host]:port" into @sa (*@all: no host, every address). Numeric hosts only.
 * Returns 0 or -EINVAL with *@reterr naming the bad part.
 */
int http_parse_address(const char *a, struct sockaddr_storage *sa, socklen_t *len, bool *all,
		       char **reterr)
{
	const char *colon, *host_end, *host = a;
	char hostbuf[INET6_ADDRSTRLEN];
	unsigned port;
	size_t n;

	*all = false;
	if (!a || !*a)
		return set_error(reterr, -EINVAL, "empty address: expected [host]:port");
	if (*a == '[') {
		host = a + 1;
		host_end = strchr(host, ']');
		if (!host_end)
			return set_error(reterr, -EINVAL,
					 "address \"%s\": missing ']' after the IPv6 address", a);
		colon = host_end + 1;
		if (*colon != ':')
			return set_error(reterr, -EINVAL,
					 "address \"%s\": missing \":port\" after ']'", a);
	} else {
		colon = strrchr(a, ':');
		if (!colon)
			return set_error(reterr, -EINVAL, "address \"%s\": missing \":port\"", a);
		host_end = colon;
		if (memchr(a, ':', (size_t)(colon - a)))
			return set_error(
				reterr, -EINVAL,
				"address \"%s\": an IPv6 address needs brackets: [addr]:port", a);
	}
	if (!colon[1])
		return set_error(reterr, -EINVAL, "address \"%s\": missing port after ':'", a);
	if (safe_atou(colon + 1, &port) < 0 || port > 65535)
		return set_error(reterr, -EINVAL,
				 "address \"%s\": port \"%s\" is not a number from 0 to 65535", a,
				 colon + 1);

	n = (size_t)(host_end - host);
	memset(sa, 0, sizeof(*sa));
	if (n == 0 && *a != '[') {
		*all = true;
		n = 0;
	}
	if (n >= sizeof(hostbuf))
		return set_error(
			reterr, -EINVAL,
			"address \"%s\": host \"%.*s\" is not an IP address (host names are not resolved)",
			a, (int)n, host);
	memcpy(hostbuf, host, n);
	hostbuf[n] = 0;
	if (*all || *a == '[') {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		if (!*all && inet_pton(AF_INET6, hostbuf, &in6->sin6_addr) != 1)
			return set_error(reterr, -EINVAL,
					 "address \"%s\": \"%s\" is not an IPv6 address", a,
					 hostbuf);
		*len = sizeof(*in6);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, hostbuf, &in->sin_addr) != 1)
			return set_error(
				reterr, -EINVAL,
				"address \"%s\": host \"%s\" is not an IP address (host names are not resolved)",
				a, hostbuf);
		*len = sizeof(*in);
	}
	return 0;
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
	r = http_parse_address(address, &sa, &len, &all, reterr);
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
	unsigned per_ip = o->max_per_ip ? o->max_per_ip : max_conn;
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

	r = http_listen(s, o->address, reterr);
	if (r < 0)
		goto fail;
	s->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET |
					  MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
				  0, NULL, NULL, on_request, s, MHD_OPTION_CONNECTION_LIMIT,
				  max_conn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
				  MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
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
	if (s->mhd) {
		/* MHD aborts when stopped with a suspended connection: answer them all. */
		while (s->deferred)
			(void)http_respond_headers(s->deferred, MHD_HTTP_SERVICE_UNAVAILABLE,
						   text_plain, busy, sizeof(busy) - 1);
		for (unsigned i = 0; i < 4; i++)
			(void)MHD_run(s->mhd);
		MHD_stop_daemon(s->mhd);
	}
	s->mhd_io = loop_io_free(s->mhd_io);
	s->timer = loop_timer_free(s->timer);
	s->accept_timer = loop_timer_free(s->accept_timer);
	s->listen_fd = fd_close(s->listen_fd);
	free(s);
	return NULL;
}
