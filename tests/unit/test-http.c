/*
 * The HTTP server on real sockets and our loop, with curl as the client where a real one
 * helps and raw sockets where the test needs to misbehave (half requests, idle connections,
 * huge headers). Every wait runs the loop until the awaited event, with a generous deadline
 * that only a failure reaches.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http.h"
#include "loop.h"
#include "unit.h"

#define DEADLINE (20 * USEC_PER_SEC)

#define BIG_BODY ((size_t)32 << 20)

struct ctx {
	struct loop *loop;
	struct http_server *server;
	unsigned calls;
	char last_path[256];
	char last_method[16];
	char last_header[256];
	struct http_request *deferred; /* the last one */
	struct http_request *waiting[8];
	unsigned n_waiting;
	unsigned busy; /* deferrals refused (answered 503 at once) */
};

static void handler(struct http_request *r, void *userdata)
{
	struct ctx *c = userdata;
	const char *path = http_request_path(r), *h = http_request_header(r, "x-test");
	char body[512];

	c->calls++;
	(void)snprintf(c->last_path, sizeof(c->last_path), "%s", path);
	(void)snprintf(c->last_method, sizeof(c->last_method), "%s", http_request_method(r));
	(void)snprintf(c->last_header, sizeof(c->last_header), "%s", h ? h : "(none)");
	if (streq(path, "/slow")) {
		if (http_defer(r) < 0) {
			c->busy++;
			assert_int_equal(http_respond(r, 503, "text/plain", NULL, "busy\n", 5), 0);
			return;
		}
		assert_int_equal(http_defer(r), -EINVAL); /* once only */
		assert_true(c->n_waiting < ELEMENTSOF(c->waiting));
		c->waiting[c->n_waiting++] = r;
		c->deferred = r;
		return;
	}
	if (streq(path, "/big")) {
		static char *big;

		if (!big)
			big = calloc(1, BIG_BODY);
		assert_non_null(big);
		assert_int_equal(http_respond(r, 200, "text/plain", NULL, big, BIG_BODY), 0);
		return;
	}
	if (streq(path, "/silent"))
		return; /* a handler bug: the server answers 500 */
	if (streq(path, "/hello")) {
		(void)snprintf(body, sizeof(body), "hello %s\n", h ? h : "");
		assert_int_equal(http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8",
					      NULL, body, strlen(body)),
				 0);
		return;
	}
	assert_int_equal(http_respond(r, 404, "text/plain", NULL, "not found\n", 10), 0);
}

/*
 * Every epoll_ctl() of the test binary (ours and MHD's) lands here (-Wl,--wrap): a removal of
 * an fd that is already closed is counted. Its number may already be another thread's fd.
 */
/* NOLINTNEXTLINE(bugprone-reserved-identifier) */
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
/* NOLINTNEXTLINE(bugprone-reserved-identifier) */
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
static unsigned removed_closed;

int __wrap_epoll_ctl(int epfd, int op, int fd,
		     struct epoll_event *ev) /* NOLINT(bugprone-reserved-identifier) */
{
	if (op == EPOLL_CTL_DEL && fcntl(fd, F_GETFD) < 0 && errno == EBADF)
		removed_closed++;
	return __real_epoll_ctl(epfd, op, fd, ev);
}

static void start(struct ctx *c, const struct http_opts *o)
{
	char *err = NULL;
	int r;

	memset(c, 0, sizeof(*c));
	assert_int_equal(loop_new(&c->loop), 0);
	r = http_server_new(c->loop, o, handler, c, &c->server, &err);
	if (r < 0)
		print_error("http_server_new: %s\n", err);
	assert_int_equal(r, 0);
	assert_null(err);
	assert_true(http_server_port(c->server) > 0);
}

static void stop(struct ctx *c)
{
	c->server = http_server_free(c->server);
	loop_free(c->loop);
}

/* A client socket: what it reads lands in @in, @eof when the server closed. */
struct client {
	int fd;
	struct loop_io *io;
	struct buf in;
	bool eof;
};

static void on_client(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct client *cl = userdata;

	for (;;) {
		ssize_t n;

		assert_int_equal(buf_reserve(&cl->in, 4096), 0);
		n = read(fd, cl->in.data + cl->in.len, 4096);
		if (n > 0) {
			cl->in.len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		cl->eof = true; /* EOF, or a reset */
		cl->io = loop_io_free(cl->io);
		return;
	}
}

/* Connects from @src (NULL: any) to 127.0.0.1:@port and sends @req (may be NULL). */
static void client_open(struct ctx *c, struct client *cl, const char *src, const char *req)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	memset(cl, 0, sizeof(*cl));
	cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(cl->fd >= 0);
	if (src) {
		assert_int_equal(inet_pton(AF_INET, src, &sa.sin_addr), 1);
		assert_int_equal(bind(cl->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	sa.sin_port = htons((uint16_t)http_server_port(c->server));
	assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
	/* Completes in the kernel's backlog, before the server accepts. */
	assert_int_equal(connect(cl->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (req)
		assert_int_equal(write(cl->fd, req, strlen(req)), (ssize_t)strlen(req));
	assert_int_equal(fcntl(cl->fd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(loop_io_new(c->loop, cl->fd, EPOLLIN, on_client, cl, &cl->io), 0);
}

static void client_close(struct client *cl)
{
	cl->io = loop_io_free(cl->io);
	cl->fd = fd_close(cl->fd);
	buf_release(&cl->in);
}

static const char *client_text(struct client *cl)
{
	assert_int_equal(buf_reserve(&cl->in, 1), 0);
	cl->in.data[cl->in.len] = 0;
	return (const char *)cl->in.data;
}

/* Runs the loop until @done(@arg) or the deadline; returns whether it got there. */
static bool run_until(struct ctx *c, bool (*done)(const void *arg), const void *arg)
{
	usec_t end = now_usec() + DEADLINE;

	while (!done(arg)) {
		if (now_usec() > end)
			return false;
		assert_int_equal(loop_run_once(c->loop, 100 * USEC_PER_MSEC), 0);
	}
	return true;
}

static bool client_eof(const void *arg)
{
	return ((const struct client *)arg)->eof;
}

/* A whole response in: headers and Content-Length bytes of body. */
static bool client_answered(const void *arg)
{
	const struct client *cl = arg;
	const char *s = (const char *)cl->in.data, *end, *cl_hdr;
	unsigned long n;

	if (cl->eof)
		return true;
	if (!s)
		return false;
	end = memmem(s, cl->in.len, "\r\n\r\n", 4);
	if (!end)
		return false;
	cl_hdr = memmem(s, (size_t)(end - s), "Content-Length: ", 16);
	if (!cl_hdr)
		return true;
	n = strtoul(cl_hdr + 16, NULL, 10);
	return cl->in.len >= (size_t)(end + 4 - s) + n;
}

/*
 * Runs curl with @args (the URL last) while the loop serves; returns its exit status and its
 * output (-i: the status line, headers and body) in @out.
 */
static int run_curl(struct ctx *c, const char *const *args, struct buf *out)
{
	const char *argv[32] = { "curl", "-sS", "-i", "--max-time", "10" };
	struct client cl = { 0 };
	int p[2], status;
	size_t n = 5;
	pid_t pid;

	for (size_t i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(p[1], 1) < 0)
			_exit(126);
		execvp("curl", (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	cl.fd = p[0];
	assert_int_equal(fcntl(cl.fd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(loop_io_new(c->loop, cl.fd, EPOLLIN, on_client, &cl, &cl.io), 0);
	assert_true(run_until(c, client_eof, &cl));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	*out = cl.in;
	cl.in = (struct buf){ 0 };
	client_close(&cl);
	assert_int_equal(buf_reserve(out, 1), 0);
	out->data[out->len] = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char url[128];

static const char *url_of(struct ctx *c, const char *path)
{
	(void)snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", http_server_port(c->server),
		       path);
	return url;
}

/* Freed, the server takes its fds out of the loop before they are closed, never after. */
static void test_free_removes_before_close(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct buf out;
	struct ctx c;

	start(&c, &o);
	assert_int_equal(run_curl(&c, (const char *[]){ url_of(&c, "/hello"), NULL }, &out), 0);
	buf_release(&out);
	removed_closed = 0;
	stop(&c);
	assert_int_equal(removed_closed, 0);
}

static void test_get_and_404(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct http_stats st;
	struct buf out;
	struct ctx c;

	start(&c, &o);
	assert_int_equal(run_curl(&c,
				  (const char *[]){ "-H", "X-Test: \"quoted\" value",
						    url_of(&c, "/hello?x=1&y=2"), NULL },
				  &out),
			 0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr((char *)out.data,
			       "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr((char *)out.data, "\r\n\r\nhello \"quoted\" value\n"));
	assert_string_equal(c.last_path, "/hello"); /* no query string */
	assert_string_equal(c.last_method, "GET");
	assert_string_equal(c.last_header, "\"quoted\" value");
	buf_release(&out);

	assert_int_equal(run_curl(&c, (const char *[]){ url_of(&c, "/nope"), NULL }, &out), 0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 404 Not Found\r\n"));
	assert_non_null(strstr((char *)out.data, "\r\n\r\nnot found\n"));
	assert_string_equal(c.last_header, "(none)");
	assert_int_equal(c.calls, 2);
	buf_release(&out);

	/* A handler that answers nothing: 500, not a hung client. */
	assert_int_equal(run_curl(&c, (const char *[]){ url_of(&c, "/silent"), NULL }, &out), 0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 500 Internal Server Error\r\n"));
	buf_release(&out);

	http_server_get_stats(c.server, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.connections, 3);
	assert_int_equal(st.refused, 0);
	stop(&c);
}

static void test_405_and_head(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct buf out;
	struct client cl;
	struct ctx c;
	const char *t;

	start(&c, &o);
	assert_int_equal(
		run_curl(&c,
			 (const char *[]){ "-X", "POST", "-d", "x=1", url_of(&c, "/hello"), NULL },
			 &out),
		0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 405 Method Not Allowed\r\n"));
	assert_non_null(strstr((char *)out.data, "\r\nAllow: GET, HEAD\r\n"));
	buf_release(&out);
	assert_int_equal(
		run_curl(&c, (const char *[]){ "-X", "DELETE", url_of(&c, "/x"), NULL }, &out), 0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 405 Method Not Allowed\r\n"));
	buf_release(&out);
	assert_int_equal(c.calls, 0); /* the handler never saw them */

	/* HEAD: the headers of GET, Content-Length included, and not one byte of body. */
	client_open(&c, &cl, NULL, "HEAD /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(run_until(&c, client_eof, &cl));
	t = client_text(&cl);
	assert_int_equal(strncmp(t, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(t, "Content-Length: 7\r\n")); /* "hello \n" */
	assert_non_null(strstr(t, "\r\n\r\n"));
	assert_string_equal(strstr(t, "\r\n\r\n"), "\r\n\r\n");
	assert_string_equal(c.last_method, "HEAD");
	client_close(&cl);
	stop(&c);
}

static bool deferred_set(const void *arg)
{
	return ((const struct ctx *)arg)->deferred != NULL;
}

static void test_deferred_answer(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct client slow, fast;
	struct ctx c;

	start(&c, &o);
	client_open(&c, &slow, NULL, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, deferred_set, &c));
	/* While /slow waits, another client is answered. */
	client_open(&c, &fast, NULL, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &fast));
	assert_int_equal(strncmp(client_text(&fast), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_int_equal(slow.in.len, 0);

	assert_int_equal(http_respond(c.deferred, 200, "text/plain", "identity", "late\n", 5), 0);
	c.deferred = NULL;
	assert_true(run_until(&c, client_answered, &slow));
	assert_int_equal(strncmp(client_text(&slow), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(client_text(&slow), "\r\nContent-Encoding: identity\r\n"));
	assert_non_null(strstr(client_text(&slow), "\r\n\r\nlate\n"));
	assert_false(slow.eof); /* keep-alive: the connection serves on */
	client_close(&slow);
	client_close(&fast);
	stop(&c);
}

static void test_free_with_deferred_request(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct client cl;
	struct ctx c;

	start(&c, &o);
	client_open(&c, &cl, NULL, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, deferred_set, &c));
	c.server = http_server_free(c.server);
	assert_true(run_until(&c, client_eof, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 503 Service Unavailable\r\n", 34), 0);
	client_close(&cl);
	loop_free(c.loop);
}

static void test_slowloris_cut_after_timeout(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0", .timeout = 1 };
	struct client stall, good;
	struct http_stats st;
	struct ctx c;
	usec_t t0;

	/* 1 us rounds up to MHD's whole second. */
	start(&c, &o);
	t0 = now_usec();
	client_open(&c, &stall, NULL, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Test: a");
	client_open(&c, &good, NULL, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &good));
	assert_int_equal(strncmp(client_text(&good), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_false(stall.eof);
	assert_true(now_usec() - t0 < 900 * USEC_PER_MSEC); /* at once, not after the timeout */

	assert_true(run_until(&c, client_eof, &stall));
	assert_true(now_usec() - t0 >= 900 * USEC_PER_MSEC);
	assert_int_equal(stall.in.len, 0); /* cut, never answered */
	assert_int_equal(c.calls, 1);
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.connections, 2);
	client_close(&stall);
	client_close(&good);
	stop(&c);
}

static bool all_handled(const void *arg)
{
	const struct ctx *c = arg;
	struct http_stats st;

	http_server_get_stats(c->server, &st);
	return st.connections + st.refused >= 66 && st.open == 16;
}

static bool none_open(const void *arg)
{
	const struct ctx *c = arg;
	struct http_stats st;

	http_server_get_stats(c->server, &st);
	return st.open == 0;
}

static void test_connection_flood(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0", .max_connections = 16, .timeout = 1 };
	static struct client idle[66];
	struct http_stats st;
	struct client cl;
	struct ctx c;

	start(&c, &o);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++)
		client_open(&c, &idle[i], NULL, NULL);
	assert_true(run_until(&c, all_handled, &c));
	http_server_get_stats(c.server, &st);
	/*
	 * The first wake-up accepts 64: 16 taken, 48 closed at once (not left in the backlog);
	 * none of the 16 can make room yet, MHD has not read them. The next takes the last two,
	 * each in place of the oldest idle one.
	 */
	assert_int_equal(st.connections, 18);
	assert_int_equal(st.refused, 48);
	assert_int_equal(st.evicted[HTTP_EVICT_FULL], 2);
	assert_int_equal(st.open, 16);

	/* After the idle ones time out, a new request is answered. */
	assert_true(run_until(&c, none_open, &c));
	client_open(&c, &cl, NULL, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 200 OK\r\n", 17), 0);
	client_close(&cl);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++) {
		assert_true(run_until(&c, client_eof, &idle[i]));
		assert_int_equal(idle[i].in.len, 0);
		client_close(&idle[i]);
	}
	stop(&c);
}

static bool refused_16(const void *arg)
{
	const struct ctx *c = arg;
	struct http_stats st;

	http_server_get_stats(c->server, &st);
	return st.refused >= 16 && st.open >= 4;
}

/* One address holding its share of connections leaves room for the others. */
static void test_per_ip_limit(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0", .max_connections = 16, .max_per_ip = 4 };
	static struct client idle[20];
	struct http_stats st;
	struct client cl;
	struct ctx c;
	usec_t t0;

	start(&c, &o);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++)
		client_open(&c, &idle[i], "127.0.0.2", NULL);
	assert_true(run_until(&c, refused_16, &c));
	t0 = now_usec();
	client_open(&c, &cl, "127.0.0.3", "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_true(now_usec() - t0 < 5 * USEC_PER_SEC); /* not after the 10 s timeout */
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.refused, 16);
	assert_int_equal(st.open, 5);
	client_close(&cl);

	/* Later, the address at its share: a newcomer from it takes the place of its oldest. */
	client_open(&c, &cl, "127.0.0.2", "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_true(run_until(&c, client_eof, &idle[0]));
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.evicted[HTTP_EVICT_FULL], 1);
	assert_int_equal(st.refused, 16);
	client_close(&cl);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++)
		client_close(&idle[i]);
	stop(&c);
}

/* The server has accepted at least @n connections in all. */
struct accepted {
	const struct ctx *c;
	uint64_t n;
};

static bool accepted_reached(const void *arg)
{
	const struct accepted *a = arg;
	struct http_stats st;

	http_server_get_stats(a->c->server, &st);
	return st.connections >= a->n;
}

/*
 * A full server makes room for a newcomer, as the kubelet's probe is one: the oldest idle
 * connection gives way. A burst that follows the newcomer in the same accept batch cannot
 * push it out before MHD has read its request; the burst is refused instead.
 */
static void test_full_server_evicts_the_oldest_idle(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0", .max_connections = 4 };
	struct client idle[4], probe, probe2, burst[5];
	struct http_stats st;
	struct ctx c;

	start(&c, &o);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++)
		client_open(&c, &idle[i], NULL, NULL);
	assert_true(run_until(&c, accepted_reached, &(struct accepted){ &c, 4 }));
	client_open(&c, &probe, NULL,
		    "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(run_until(&c, client_answered, &probe));
	assert_int_equal(strncmp(client_text(&probe), "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_true(run_until(&c, client_eof, &idle[0])); /* the oldest made room */
	assert_int_equal(idle[0].in.len, 0);
	client_close(&idle[0]);
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.evicted[HTTP_EVICT_FULL], 1);
	assert_int_equal(st.refused, 0);

	/* Full again (the probe closed its connection). */
	client_open(&c, &idle[0], NULL, NULL);
	assert_true(run_until(&c, accepted_reached, &(struct accepted){ &c, 6 }));
	/*
	 * A probe, then five more at once, all in the backlog before the server looks: the probe
	 * and three of them take the four idle ones' places; the last two find only connections
	 * MHD has not read yet, the probe's among them, and are refused.
	 */
	client_open(&c, &probe2, NULL,
		    "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	for (size_t i = 0; i < ELEMENTSOF(burst); i++)
		client_open(&c, &burst[i], NULL, NULL);
	assert_true(run_until(&c, client_answered, &probe2));
	assert_int_equal(strncmp(client_text(&probe2), "HTTP/1.1 200 OK\r\n", 17), 0);
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.evicted[HTTP_EVICT_FULL], 1 + 4);
	assert_int_equal(st.refused, 2);
	for (size_t i = 0; i < ELEMENTSOF(idle); i++) {
		assert_true(run_until(&c, client_eof, &idle[i]));
		assert_int_equal(idle[i].in.len, 0);
		client_close(&idle[i]);
	}
	for (size_t i = 0; i < ELEMENTSOF(burst); i++)
		client_close(&burst[i]);
	client_close(&probe);
	client_close(&probe2);
	stop(&c);
}

/* A client that sends @drip one byte per tick of its timer, after @head, until cut. */
struct dripper {
	struct client cl;
	struct loop_timer *timer;
	const char *drip;
	size_t sent;
};

static void on_drip(struct loop_timer *t, void *userdata)
{
	struct dripper *d = userdata;

	if (d->cl.eof || !d->drip[d->sent])
		return;
	if (write(d->cl.fd, d->drip + d->sent, 1) == 1)
		d->sent++;
	loop_timer_arm(t, 200 * USEC_PER_MSEC);
}

static void dripper_open(struct ctx *c, struct dripper *d, const char *head, const char *drip)
{
	memset(d, 0, sizeof(*d));
	client_open(c, &d->cl, NULL, head);
	d->drip = drip;
	assert_int_equal(loop_timer_new(c->loop, on_drip, d, &d->timer), 0);
	loop_timer_arm(d->timer, 0);
}

static void dripper_close(struct dripper *d)
{
	d->timer = loop_timer_free(d->timer);
	client_close(&d->cl);
}

static char drip_bytes[4096];

/*
 * A byte every 200 ms keeps MHD's idle timeout (1 s) from ever firing; the request deadline
 * cuts the header and the body all the same.
 */
static void test_drip_cut_at_the_request_deadline(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0", .timeout = USEC_PER_SEC };
	struct dripper head, body;
	struct http_stats st;
	struct ctx c;

	memset(drip_bytes, 'a', sizeof(drip_bytes) - 1);
	start(&c, &o);
	dripper_open(&c, &head, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Drip: ", drip_bytes);
	dripper_open(&c, &body, "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n",
		     drip_bytes);
	assert_true(run_until(&c, client_eof, &head.cl));
	assert_true(run_until(&c, client_eof, &body.cl));
	assert_int_equal(head.cl.in.len, 0);
	assert_int_equal(body.cl.in.len, 0);
	assert_true(head.sent >= 1 && body.sent >= 1); /* they had begun dripping */
	assert_int_equal(c.calls, 0);
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.evicted[HTTP_EVICT_REQUEST_DEADLINE], 2);
	dripper_close(&head);
	dripper_close(&body);
	stop(&c);
}

/* A client that reads its answer a little at a time, on a timer. */
struct sipper {
	int fd;
	struct loop_timer *timer;
	size_t got;
};

static void on_sip(struct loop_timer *t, void *userdata)
{
	struct sipper *sp = userdata;
	static char b[512 * 1024];
	ssize_t n = read(sp->fd, b, sizeof(b));

	if (n > 0)
		sp->got += (size_t)n;
	loop_timer_arm(t, 100 * USEC_PER_MSEC);
}

/*
 * A client reading up to 512 KiB every 100 ms keeps the connection busy, never idle for MHD's
 * timeout (the server's socket drains and MHD writes again several times a second); the
 * write deadline closes it all the same, with most of the 32 MiB answer unsent.
 */
static void test_slow_reader_cut_at_the_write_deadline(void **state)
{
	static const char req[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
	struct http_opts o = { .address = "127.0.0.1:0", .timeout = USEC_PER_SEC };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sipper sp = { .fd = -1 };
	struct http_stats st;
	struct ctx c;
	static char b[65536];
	ssize_t n;

	start(&c, &o);
	sp.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(sp.fd >= 0);
	sa.sin_port = htons((uint16_t)http_server_port(c.server));
	assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
	assert_true(connect(sp.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
		    errno == EINPROGRESS);
	assert_true(run_until(&c, accepted_reached, &(struct accepted){ &c, 1 }));
	assert_int_equal(write(sp.fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
	assert_int_equal(loop_timer_new(c.loop, on_sip, &sp, &sp.timer), 0);
	loop_timer_arm(sp.timer, 0);
	assert_true(run_until(&c, none_open, &c));
	sp.timer = loop_timer_free(sp.timer);
	/* What the kernel holds still comes, then the end: far from the whole answer. */
	assert_int_equal(fcntl(sp.fd, F_SETFL, 0), 0);
	while ((n = read(sp.fd, b, sizeof(b))) > 0)
		sp.got += (size_t)n;
	assert_true(sp.got > 0 && sp.got < BIG_BODY);
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.evicted[HTTP_EVICT_WRITE_DEADLINE], 1);
	sp.fd = fd_close(sp.fd);
	stop(&c);
}

static bool waiting_3(const void *arg)
{
	const struct ctx *c = arg;

	return c->n_waiting == 3 && c->busy == 1;
}

/*
 * Deferred requests hold no slot: with two connections allowed and three answers deferred,
 * two more clients are served at once. A deferral past max_deferred is refused (the handler
 * answers at once).
 */
static void test_deferred_requests_hold_no_slot(void **state)
{
	static const char slow[] = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char hello[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
	struct http_opts o = { .address = "127.0.0.1:0", .max_connections = 2, .max_deferred = 3 };
	struct client waiting[4], fast[2];
	struct http_stats st;
	struct ctx c;

	start(&c, &o);
	/* One at a time: each is deferred (and leaves its slot) before the next comes. */
	for (size_t i = 0; i < 3; i++) {
		client_open(&c, &waiting[i], NULL, slow);
		assert_true(run_until(&c, deferred_set, &c));
		c.deferred = NULL;
	}
	client_open(&c, &waiting[3], NULL, slow);
	assert_true(run_until(&c, waiting_3, &c));
	assert_true(run_until(&c, client_answered, &waiting[3]));
	assert_int_equal(strncmp(client_text(&waiting[3]), "HTTP/1.1 503 ", 13), 0);
	for (size_t i = 0; i < ELEMENTSOF(fast); i++)
		client_open(&c, &fast[i], NULL, hello);
	for (size_t i = 0; i < ELEMENTSOF(fast); i++) {
		assert_true(run_until(&c, client_answered, &fast[i]));
		assert_int_equal(strncmp(client_text(&fast[i]), "HTTP/1.1 200 OK\r\n", 17), 0);
	}
	http_server_get_stats(c.server, &st);
	assert_int_equal(st.refused, 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(waiting[i].in.len, 0);
		assert_int_equal(http_respond(c.waiting[i], 200, "text/plain", NULL, "late\n", 5),
				 0);
	}
	c.n_waiting = 0;
	for (size_t i = 0; i < 3; i++) {
		assert_true(run_until(&c, client_answered, &waiting[i]));
		assert_int_equal(strncmp(client_text(&waiting[i]), "HTTP/1.1 200 OK\r\n", 17), 0);
	}
	for (size_t i = 0; i < ELEMENTSOF(waiting); i++)
		client_close(&waiting[i]);
	for (size_t i = 0; i < ELEMENTSOF(fast); i++)
		client_close(&fast[i]);
	stop(&c);
}

#define BIG ((size_t)16 * 1024)

static void test_oversized_request(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	static char req[24 * 1024];
	struct client cl;
	struct ctx c;
	size_t n;

	start(&c, &o);
	/* A 16 KiB header against the 8 KiB default. */
	n = (size_t)snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(req + n, 'a', BIG);
	memcpy(req + n + BIG, "\r\n\r\n", 5);
	client_open(&c, &cl, NULL, req);
	assert_true(run_until(&c, client_eof, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 431 ", 13), 0);
	client_close(&cl);

	/* A 16 KiB path. */
	n = (size_t)snprintf(req, sizeof(req), "GET /");
	memset(req + n, 'p', BIG);
	memcpy(req + n + BIG, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
	client_open(&c, &cl, NULL, req);
	assert_true(run_until(&c, client_eof, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 414 ", 13), 0);
	client_close(&cl);

	/* A GET with a 16 KiB body. */
	n = (size_t)snprintf(req, sizeof(req),
			     "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 16384\r\n\r\n");
	memset(req + n, 'b', BIG);
	req[n + BIG] = 0;
	client_open(&c, &cl, NULL, req);
	assert_true(run_until(&c, client_eof, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 413 ", 13), 0);
	client_close(&cl);
	assert_int_equal(c.calls, 0);

	/* The server is fine afterwards. */
	client_open(&c, &cl, NULL, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(run_until(&c, client_answered, &cl));
	assert_int_equal(strncmp(client_text(&cl), "HTTP/1.1 200 OK\r\n", 17), 0);
	client_close(&cl);
	stop(&c);
}

static void test_any_address_port_zero(void **state)
{
	struct http_opts o = { .address = ":0" };
	struct buf out;
	struct ctx c;
	char u[64];
	int fd;

	start(&c, &o);
	assert_int_equal(run_curl(&c, (const char *[]){ url_of(&c, "/hello"), NULL }, &out), 0);
	assert_non_null(strstr((char *)out.data, "HTTP/1.1 200 OK\r\n"));
	buf_release(&out);
	/* IPv6 too, where the host has it. */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
					   .sin6_addr = IN6ADDR_LOOPBACK_INIT };

		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			(void)snprintf(u, sizeof(u), "http://[::1]:%u/hello",
				       http_server_port(c.server));
			assert_int_equal(run_curl(&c, (const char *[]){ "-g", u, NULL }, &out), 0);
			assert_non_null(strstr((char *)out.data, "HTTP/1.1 200 OK\r\n"));
			buf_release(&out);
		}
		close(fd);
	}
	stop(&c);
}

static void test_bad_addresses(void **state)
{
	static const struct {
		const char *address;
		const char *msg;
	} cases[] = {
		{ "", "empty address" },
		{ ":", "missing port after ':'" },
		{ "1.2.3.4", "missing \":port\"" },
		{ "[::1", "missing ']'" },
		{ "[::1]", "missing \":port\" after ']'" },
		{ "[::1]9400", "missing \":port\" after ']'" },
		{ "host:99999", "port \"99999\" is not a number from 0 to 65535" },
		{ "127.0.0.1:-1", "port \"-1\"" },
		{ "127.0.0.1:80x", "port \"80x\"" },
		{ "x:1", "host \"x\" is not an IP address (host names are not resolved)" },
		{ "localhost:9400", "host \"localhost\" is not an IP address" },
		{ "::1:9400", "an IPv6 address needs brackets" },
		{ "[1.2.3.4]:80", "\"1.2.3.4\" is not an IPv6 address" },
		{ "[]:80", "\"\" is not an IPv6 address" },
		{ "300.1.1.1:80", "host \"300.1.1.1\"" },
	};
	struct http_server *s = NULL;
	struct loop *l = NULL;

	assert_int_equal(loop_new(&l), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct http_opts o = { .address = cases[i].address };
		char *err = NULL;

		assert_int_equal(http_server_new(l, &o, handler, NULL, &s, &err), -EINVAL);
		assert_null(s);
		assert_non_null(err);
		if (!strstr(err, cases[i].msg)) {
			print_error("address \"%s\": got \"%s\", want \"%s\"\n", cases[i].address,
				    err, cases[i].msg);
			fail();
		}
		assert_non_null(strstr(err, cases[i].address)); /* says which address */
		free(err);
	}
	loop_free(l);
}

static void test_address_in_use(void **state)
{
	struct http_opts o = { .address = "127.0.0.1:0" };
	struct http_server *s = NULL;
	char addr[32], *err = NULL;
	struct ctx c;

	start(&c, &o);
	(void)snprintf(addr, sizeof(addr), "127.0.0.1:%u", http_server_port(c.server));
	o.address = addr;
	assert_int_equal(http_server_new(c.loop, &o, handler, NULL, &s, &err), -EADDRINUSE);
	assert_null(s);
	assert_non_null(strstr(err, addr));
	assert_non_null(strstr(err, "in use"));
	free(err);
	stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_removes_before_close),
		cmocka_unit_test(test_get_and_404),
		cmocka_unit_test(test_405_and_head),
		cmocka_unit_test(test_deferred_answer),
		cmocka_unit_test(test_free_with_deferred_request),
		cmocka_unit_test(test_slowloris_cut_after_timeout),
		cmocka_unit_test(test_connection_flood),
		cmocka_unit_test(test_per_ip_limit),
		cmocka_unit_test(test_full_server_evicts_the_oldest_idle),
		cmocka_unit_test(test_drip_cut_at_the_request_deadline),
		cmocka_unit_test(test_slow_reader_cut_at_the_write_deadline),
		cmocka_unit_test(test_deferred_requests_hold_no_slot),
		cmocka_unit_test(test_oversized_request),
		cmocka_unit_test(test_any_address_port_zero),
		cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test(test_address_in_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
