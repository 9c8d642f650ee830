#include "doctor-net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "address.h"

static usec_t deadline_in(unsigned timeout_ms)
{
	return now_usec() + (usec_t)timeout_ms * USEC_PER_MSEC;
}

/* Waits for @events on @fd until @deadline. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, usec_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		usec_t now = now_usec();
		int ms, n;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)MIN((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC, (usec_t)60000);
		n = poll(&p, 1, ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			return 0;
	}
}

int doctor_net_unix_probe(const char *path, unsigned timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	struct stat st;
	int fd, r = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A unix connect blocks while the listener's backlog is full, bounded by SO_SNDTIMEO;
	 * when that runs out it fails with EAGAIN. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		r = -errno;
		goto out;
	}
	while (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		break;
	}
out:
	(void)fd_close(fd);
	return r;
}

void doctor_net_http_release(struct doctor_net_http *h)
{
	free(h->body);
	*h = (struct doctor_net_http){ 0 };
}

/* The address to dial for @address: an unspecified host becomes loopback. */
static int dial_address(const char *address, struct sockaddr_storage *sa, socklen_t *len,
			char *host, size_t host_size, char **reterr)
{
	bool all;
	int r;

	r = address_parse(address, sa, len, &all, reterr);
	if (r < 0)
		return r;
	if (sa->ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		if (in->sin_addr.s_addr == htonl(INADDR_ANY))
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		(void)inet_ntop(AF_INET, &in->sin_addr, host, (socklen_t)host_size);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		if (all) {
			/* ":port" listens dual-stack; IPv4 loopback answers even where ::1 is off. */
			struct sockaddr_in in = { .sin_family = AF_INET,
						  .sin_port = in6->sin6_port,
						  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

			memset(sa, 0, sizeof(*sa));
			memcpy(sa, &in, sizeof(in));
			*len = sizeof(in);
			(void)snprintf(host, host_size, "127.0.0.1");
			return 0;
		}
		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
			in6->sin6_addr = in6addr_loopback;
		host[0] = '[';
		(void)inet_ntop(AF_INET6, &in6->sin6_addr, host + 1, (socklen_t)host_size - 2);
		(void)snprintf(host + strlen(host), host_size - strlen(host), "]");
	}
	return 0;
}

static int tcp_connect(const struct sockaddr_storage *sa, socklen_t len, usec_t deadline)
{
	int fd, r, err = 0;
	socklen_t elen = sizeof(err);

	fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, len) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		r = -errno;
		goto fail;
	}
	r = wait_fd(fd, POLLOUT, deadline);
	if (r < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
		r = -errno;
		goto fail;
	}
	if (err) {
		r = -err;
		goto fail;
	}
	return fd;
fail:
	(void)fd_close(fd);
	return r;
}

static int send_all(int fd, const char *data, size_t len, usec_t deadline)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		int r;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			r = wait_fd(fd, POLLOUT, deadline);
			if (r < 0)
				return r;
			continue;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads until EOF into @b (at most DOCTOR_NET_HTTP_MAX bytes). */
static int recv_all(int fd, struct buf *b, usec_t deadline)
{
	for (;;) {
		ssize_t n;
		int r;

		if (b->len >= DOCTOR_NET_HTTP_MAX)
			return -EFBIG;
		r = buf_reserve(b, 4096);
		if (r < 0)
			return r;
		n = recv(fd, b->data + b->len, MIN(b->cap - b->len, DOCTOR_NET_HTTP_MAX - b->len),
			 0);
		if (n == 0)
			return 0;
		if (n > 0) {
			b->len += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		r = wait_fd(fd, POLLIN, deadline);
		if (r < 0)
			return r;
	}
}

/* Case-insensitive search for header @name in the header block [@h, @end). */
static const char *find_header(const char *h, const char *end, const char *name)
{
	size_t n = strlen(name);

	while (h < end) {
		const char *eol = memchr(h, '\n', (size_t)(end - h));

		if (!eol)
			eol = end;
		if ((size_t)(eol - h) > n && strncasecmp(h, name, n) == 0 && h[n] == ':') {
			h += n + 1;
			while (h < eol && (*h == ' ' || *h == '\t'))
				h++;
			return h;
		}
		h = eol + 1;
	}
	return NULL;
}

/* Decodes a chunked body in place. Returns its length or -EBADMSG. */
static ssize_t dechunk(char *body, size_t len)
{
	size_t in = 0, out = 0;

	for (;;) {
		char *end;
		unsigned long n;

		if (in >= len)
			return -EBADMSG;
		errno = 0;
		n = strtoul(body + in, &end, 16);
		if (errno || end == body + in)
			return -EBADMSG;
		in = (size_t)(end - body);
		end = memchr(body + in, '\n', len - in);
		if (!end)
			return -EBADMSG;
		in = (size_t)(end - body) + 1;
		if (n == 0)
			return (ssize_t)out;
		if (n > len - in)
			return -EBADMSG;
		memmove(body + out, body + in, n);
		out += n;
		in += n;
		if (in < len && body[in] == '\r')
			in++;
		if (in < len && body[in] == '\n')
			in++;
	}
}

static int parse_answer(struct buf *b, struct doctor_net_http *ret, char **reterr)
{
	char *text, *hend, *body;
	const char *te;
	unsigned status = 0;
	size_t blen;

	if (buf_append(b, "", 1) < 0)
		return -ENOMEM;
	text = (char *)b->data;
	if (strncmp(text, "HTTP/1.", 7) == 0 && text[7] && text[8] == ' ')
		for (int i = 9; i < 12 && text[i] >= '0' && text[i] <= '9'; i++)
			status = status * 10 + (unsigned)(text[i] - '0');
	if (status < 100 || status > 999)
		return set_error(reterr, -EBADMSG, "the answer is not HTTP: \"%.40s\"", text);
	hend = strstr(text, "\r\n\r\n");
	body = hend ? hend + 4 : NULL;
	if (!hend) {
		hend = strstr(text, "\n\n");
		body = hend ? hend + 2 : NULL;
	}
	if (!hend)
		return set_error(reterr, -EBADMSG, "the answer ended inside its headers");
	blen = b->len - 1 - (size_t)(body - text);
	te = find_header(text, hend, "Transfer-Encoding");
	if (te && strncasecmp(te, "chunked", 7) == 0) {
		ssize_t n = dechunk(body, blen);

		if (n < 0)
			return set_error(reterr, -EBADMSG,
					 "the answer's chunked body is malformed");
		blen = (size_t)n;
	}
	ret->body = strndup(body, blen);
	if (!ret->body)
		return -ENOMEM;
	ret->body_len = blen;
	ret->status = status;
	return 0;
}

/* Sends @req on @fd and reads the answer to EOF; @what (a URL or a socket) prefixes errors. */
static int exchange(int fd, const char *req, usec_t deadline, const char *what,
		    struct doctor_net_http *ret, char **reterr)
{
	struct buf b = { 0 };
	int r;

	r = send_all(fd, req, strlen(req), deadline);
	if (r >= 0)
		r = recv_all(fd, &b, deadline);
	if (r < 0)
		r = set_error(reterr, r, "%s: %s", what,
			      r == -ETIMEDOUT ? "no complete answer within the timeout" :
			      r == -EFBIG     ? "the answer is too large" :
						strerror(-r));
	else
		r = parse_answer(&b, ret, reterr);
	buf_release(&b);
	return r;
}

int doctor_net_http_get_unix(const char *sock, const char *path, unsigned timeout_ms,
			     struct doctor_net_http *ret, char **reterr)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	usec_t deadline = deadline_in(timeout_ms);
	char *req = NULL;
	int fd = -1, r;

	*ret = (struct doctor_net_http){ 0 };
	if (strlen(sock) >= sizeof(sa.sun_path))
		return set_error(reterr, -ENAMETOOLONG, "%s: the path is too long", sock);
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	req = strdup_printf("GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: edgegpu-doctor\r\n"
			    "Accept: application/json\r\nConnection: close\r\n\r\n",
			    path);
	if (!req)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	/* A unix connect blocks while the listener's backlog is full, bounded by SO_SNDTIMEO
	 * (EAGAIN when it runs out); the exchange after it polls a non-blocking socket. */
	r = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ? -errno : 0;
	while (r == 0 && connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0)
		if (errno != EINTR)
			r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
	if (r == 0 && fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		r = -errno;
	if (r < 0) {
		r = set_error(reterr, r, "cannot connect to %s: %s", sock,
			      r == -ETIMEDOUT ? "no connection within the timeout" : strerror(-r));
		goto out;
	}
	r = exchange(fd, req, deadline, sock, ret, reterr);
out:
	(void)fd_close(fd);
	free(req);
	return r;
}

int doctor_net_http_get(const char *address, const char *path, unsigned timeout_ms,
			struct doctor_net_http *ret, char **ret_url, char **reterr)
{
	struct sockaddr_storage sa;
	socklen_t len;
	char host[INET6_ADDRSTRLEN + 2] = "";
	char *req = NULL, *url = NULL;
	usec_t deadline = deadline_in(timeout_ms);
	unsigned port;
	int fd = -1, r;

	*ret = (struct doctor_net_http){ 0 };
	r = dial_address(address, &sa, &len, host, sizeof(host), reterr);
	if (r < 0)
		return r;
	port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port :
					       ((struct sockaddr_in6 *)&sa)->sin6_port);
	url = strdup_printf("http://%s:%u%s", host, port, path);
	req = strdup_printf("GET %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: edgegpu-doctor\r\n"
			    "Accept: text/plain\r\nConnection: close\r\n\r\n",
			    path, host, port);
	if (!url || !req) {
		r = -ENOMEM;
		goto out;
	}
	fd = tcp_connect(&sa, len, deadline);
	if (fd < 0) {
		r = set_error(reterr, fd, "%s: %s", url,
			      fd == -ETIMEDOUT ? "no connection within the timeout" :
						 strerror(-fd));
		goto out;
	}
	r = exchange(fd, req, deadline, url, ret, reterr);
out:
	if (r >= 0 && ret_url) {
		*ret_url = url;
		url = NULL;
	}
	(void)fd_close(fd);
	free(req);
	free(url);
	return r;
}
