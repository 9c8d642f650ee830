#include "fake-client.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_TIMEOUT_MS 10000

int fake_nvml_ctl(const char *path, const char *cmd, char *reply, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[16384];
	size_t len = 0, n = strlen(cmd);
	int fd, r = 0;

	if (!path)
		path = getenv("EDGEGPU_FAKE_NVML_CONTROL");
	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto out;
	}
	if (send(fd, cmd, n, MSG_NOSIGNAL) != (ssize_t)n || send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		r = -EIO;
		goto out;
	}
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t k;

		if (poll(&p, 1, CTL_TIMEOUT_MS) <= 0) {
			r = -ETIMEDOUT;
			goto out;
		}
		k = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (k <= 0) {
			r = -ECONNRESET;
			goto out;
		}
		len += (size_t)k;
		if (memchr(buf, '\n', len) || len == sizeof(buf) - 1)
			break;
	}
	buf[len] = 0;
	buf[strcspn(buf, "\n")] = 0;
	if (strncmp(buf, "ok", 2) == 0 && (buf[2] == 0 || buf[2] == ' ')) {
		if (reply)
			(void)snprintf(reply, size, "%s", buf[2] ? buf + 3 : "");
	} else {
		if (reply)
			(void)snprintf(reply, size, "%s",
				       strncmp(buf, "error ", 6) == 0 ? buf + 6 : buf);
		r = -EPROTO;
	}
out:
	(void)close(fd);
	return r;
}

int fake_nvml_ctlf(const char *fmt, ...)
{
	char cmd[4096], reply[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is above; clang 14 errs */
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = fake_nvml_ctl(NULL, cmd, reply, sizeof(reply));
	if (r == -EPROTO)
		(void)fprintf(stderr, "fake nvml: \"%s\": %s\n", cmd, reply);
	return r;
}

uint64_t fake_nvml_count(const char *func)
{
	char cmd[256], reply[64], *end;
	unsigned long long v;

	(void)snprintf(cmd, sizeof(cmd), "count %s", func);
	if (fake_nvml_ctl(NULL, cmd, reply, sizeof(reply)) < 0)
		return UINT64_MAX;
	errno = 0;
	v = strtoull(reply, &end, 10);
	if (errno || *end)
		return UINT64_MAX;
	return v;
}
