/*
 * The fake NVML's control socket: a thread serving one text command per line on the unix
 * socket named by EDGEGPU_FAKE_NVML_CONTROL. Every reply is one line, "ok[ payload]" or
 * "error <why>". The commands are listed in README.md and by "help".
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fake.h"

#define MAX_ARGS   8
#define REPLY_SIZE 8192
#define LINE_MAX_  4096

static struct {
	bool running;
	int listen_fd;
	int stop_pipe[2];
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} ctl = { .listen_fd = -1, .stop_pipe = { -1, -1 } };

static const char help[] =
	"xid GPU N [COUNT] | ecc GPU single|double [COUNT] | lost GPU | back GPU | temp GPU C | "
	"mismatch on|off | reload [FIXTURE] | load FIXTURE | fail FUNC CODE|off [NTH] | counts | "
	"count FUNC | set GPU|global KEY VALUE | waiters | sets | block FUNC [GPU] | "
	"release FUNC [GPU] | blocked FUNC | limits GPU | gpm_samples | ping";

static int reply(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int reply(char *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is above; clang 14 errs */
	(void)vsnprintf(out, REPLY_SIZE, fmt, ap);
	va_end(ap);
	return 0;
}

static int parse_gpu(const char *s, unsigned *ret)
{
	char *end;
	unsigned long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v >= fake.fx.n_gpus)
		return -1;
	*ret = (unsigned)v;
	return 0;
}

static int parse_count(const char *s, unsigned long *ret)
{
	char *end;

	if (!s) {
		*ret = 1;
		return 0;
	}
	errno = 0;
	*ret = strtoul(s, &end, 10);
	return errno || *end || *ret == 0 || *ret > 10000000UL ? -1 : 0;
}

/* The driver went away and came back: handles and event sets are invalid until nvmlInit. */
static void driver_reloaded(void)
{
	fake.stale = true;
	fake.gen++;
	(void)pthread_cond_broadcast(&fake.cond);
}

static int load_fixture(const char *path, char *out)
{
	static struct fake_fixture fx; /* large; only this thread uses it */
	char err[256];

	if (fake_fixture_load(path, &fx, err, sizeof(err)) < 0)
		return reply(out, "error %s", err);
	fake.fx = fx;
	fake.fixture_error[0] = 0;
	(void)pthread_cond_broadcast(&fake.cond);
	return 1;
}

/* With fake.mu held. */
static void command(char *line, char *out)
{
	char *argv[MAX_ARGS + 1] = { 0 }, *save = NULL, *rest = NULL;
	unsigned gpu, argc = 0;
	unsigned long count;

	for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		argv[argc++] = t;
		if (argc == 3 && argv[0] && !strcmp(argv[0], "set")) {
			rest = save; /* the value may hold spaces */
			break;
		}
		if (argc == MAX_ARGS)
			break;
	}
	if (argc == 0) {
		reply(out, "error empty command");
		return;
	}
	if (!strcmp(argv[0], "ping")) {
		reply(out, "ok");
	} else if (!strcmp(argv[0], "help")) {
		reply(out, "ok %s", help);
	} else if (!strcmp(argv[0], "xid") && argc >= 3) {
		unsigned long long xid;
		unsigned n = 0;
		char *end;

		errno = 0;
		xid = strtoull(argv[2], &end, 10);
		if (parse_gpu(argv[1], &gpu) < 0 || errno || *end ||
		    parse_count(argv[3], &count) < 0) {
			reply(out, "error usage: xid GPU N [COUNT]");
			return;
		}
		for (unsigned long i = 0; i < count; i++)
			n += fake_deliver(gpu, NVML_EVENT_XID_CRITICAL, xid);
		reply(out, "ok delivered=%u", n);
	} else if (!strcmp(argv[0], "ecc") && argc >= 3) {
		bool dbe = !strcmp(argv[2], "double");
		unsigned n = 0;

		if (parse_gpu(argv[1], &gpu) < 0 || (!dbe && strcmp(argv[2], "single") != 0) ||
		    parse_count(argv[3], &count) < 0) {
			reply(out, "error usage: ecc GPU single|double [COUNT]");
			return;
		}
		for (unsigned long i = 0; i < count; i++) {
			if (dbe)
				fake.fx.gpus[gpu].ecc_uncorrected++;
			else
				fake.fx.gpus[gpu].ecc_corrected++;
			n += fake_deliver(
				gpu, dbe ? NVML_EVENT_DOUBLE_BIT_ECC : NVML_EVENT_SINGLE_BIT_ECC,
				0);
		}
		reply(out, "ok delivered=%u", n);
	} else if ((!strcmp(argv[0], "lost") || !strcmp(argv[0], "back")) && argc == 2) {
		if (parse_gpu(argv[1], &gpu) < 0) {
			reply(out, "error no such GPU");
			return;
		}
		fake.fx.gpus[gpu].lost = argv[0][0] == 'l';
		if (fake.fx.gpus[gpu].lost)
			for (unsigned i = 0; i < FAKE_MAX_SETS; i++)
				if (fake.sets[i].used && fake.sets[i].mask[gpu])
					fake.sets[i].lost_pending = true;
		(void)pthread_cond_broadcast(&fake.cond);
		reply(out, "ok");
	} else if (!strcmp(argv[0], "temp") && argc == 3) {
		char err[128];

		if (parse_gpu(argv[1], &gpu) < 0 ||
		    fake_gpu_set(&fake.fx.gpus[gpu], gpu, "temperature", argv[2], err,
				 sizeof(err)) < 0) {
			reply(out, "error usage: temp GPU C");
			return;
		}
		reply(out, "ok");
	} else if (!strcmp(argv[0], "mismatch") && argc == 2) {
		if (!strcmp(argv[1], "on")) {
			fake.fx.mismatch = true;
			(void)pthread_cond_broadcast(&fake.cond);
		} else if (!strcmp(argv[1], "off")) {
			if (fake.fx.mismatch) {
				fake.fx.mismatch = false;
				driver_reloaded();
			}
		} else {
			reply(out, "error usage: mismatch on|off");
			return;
		}
		reply(out, "ok");
	} else if (!strcmp(argv[0], "reload")) {
		if (argc >= 2 && load_fixture(argv[1], out) == 0)
			return;
		driver_reloaded();
		reply(out, "ok gen=%u", fake.gen);
	} else if (!strcmp(argv[0], "load") && argc == 2) {
		if (load_fixture(argv[1], out) == 0)
			return;
		reply(out, "ok gpus=%u", fake.fx.n_gpus);
	} else if (!strcmp(argv[0], "fail") && argc >= 3) {
		int id = fake_fn_lookup(argv[1]);
		int code = !strcmp(argv[2], "off") ? 0 : fake_code_lookup(argv[2]);
		unsigned long nth = 0;

		if (id < 0 || code < 0 || (argc >= 4 && parse_count(argv[3], &nth) < 0)) {
			reply(out, "error usage: fail FUNC CODE|off [NTH]");
			return;
		}
		fake.fx.fail[id] =
			(struct fake_fail){ .active = code != 0, .code = code, .nth = nth };
		reply(out, "ok");
	} else if ((!strcmp(argv[0], "block") || !strcmp(argv[0], "release")) &&
		   (argc == 2 || argc == 3)) {
		int id = fake_fn_lookup(argv[1]);
		bool block = argv[0][0] == 'b';

		if (id < 0) {
			reply(out, "error unknown function");
			return;
		}
		if (argc == 3) {
			/* One GPU: its calls of FUNC hang, the other GPUs' answer. */
			if (parse_gpu(argv[2], &gpu) < 0) {
				reply(out, "error no such GPU");
				return;
			}
			if (block)
				fake.blocked_gpus[id] |= (uint32_t)1 << gpu;
			else
				fake.blocked_gpus[id] &= ~((uint32_t)1 << gpu);
		} else if (block) {
			fake.blocked[id / 64] |= (uint64_t)1 << (id % 64);
		} else {
			/* Releases the function for every GPU too. */
			fake.blocked[id / 64] &= ~((uint64_t)1 << (id % 64));
			fake.blocked_gpus[id] = 0;
		}
		(void)pthread_cond_broadcast(&fake.cond);
		reply(out, "ok");
	} else if (!strcmp(argv[0], "blocked") && argc == 2) {
		int id = fake_fn_lookup(argv[1]);

		if (id < 0) {
			reply(out, "error unknown function");
			return;
		}
		reply(out, "ok %u", fake.blocked_in[id]);
	} else if (!strcmp(argv[0], "counts")) {
		size_t n = (size_t)snprintf(out, REPLY_SIZE, "ok {");

		for (int i = 0; i < FAKE_FN_COUNT && n < REPLY_SIZE; i++)
			n += (size_t)snprintf(out + n, REPLY_SIZE - n, "%s\"%s\":%llu",
					      i ? "," : "", fake_fn_names[i],
					      (unsigned long long)fake.counts[i]);
		if (n < REPLY_SIZE)
			(void)snprintf(out + n, REPLY_SIZE - n, "}");
	} else if (!strcmp(argv[0], "count") && argc == 2) {
		int id = fake_fn_lookup(argv[1]);

		if (id < 0) {
			reply(out, "error unknown function");
			return;
		}
		reply(out, "ok %llu", (unsigned long long)fake.counts[id]);
	} else if (!strcmp(argv[0], "set") && argc == 3 && rest) {
		char err[256];
		int r;

		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (!strcmp(argv[1], "global"))
			r = fake_global_set(&fake.fx, argv[2], rest, err, sizeof(err));
		else if (parse_gpu(argv[1], &gpu) == 0)
			r = fake_gpu_set(&fake.fx.gpus[gpu], gpu, argv[2], rest, err, sizeof(err));
		else
			r = -1, snprintf(err, sizeof(err), "no such GPU \"%s\"", argv[1]);
		if (r < 0) {
			reply(out, "error %s", err);
			return;
		}
		(void)pthread_cond_broadcast(&fake.cond);
		reply(out, "ok");
	} else if (!strcmp(argv[0], "limits") && argc == 2) {
		/* What nvmlDeviceSetMemoryLimits_v1 recorded: "ok PATH=SOFT:HARD ..." (bytes). */
		size_t n;

		if (parse_gpu(argv[1], &gpu) < 0) {
			reply(out, "error no such GPU");
			return;
		}
		n = (size_t)snprintf(out, REPLY_SIZE, "ok");
		for (unsigned i = 0; i < fake.fx.gpus[gpu].n_limits && n < REPLY_SIZE; i++) {
			const struct fake_limit *l = &fake.fx.gpus[gpu].limits[i];

			n += (size_t)snprintf(out + n, REPLY_SIZE - n, " %s=%llu:%llu", l->path,
					      l->soft, l->hard);
		}
	} else if (!strcmp(argv[0], "waiters")) {
		reply(out, "ok %u", fake.waiters);
	} else if (!strcmp(argv[0], "sets")) {
		unsigned n = 0;

		for (unsigned i = 0; i < FAKE_MAX_SETS; i++)
			n += fake.sets[i].used;
		reply(out, "ok %u", n);
	} else if (!strcmp(argv[0], "gpm_samples")) {
		reply(out, "ok %u", fake_gpm_samples());
	} else {
		reply(out, "error unknown command or arguments; commands: %s", help);
	}
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Serves one connection until EOF or stop. */
static void serve(int fd)
{
	static char buf[LINE_MAX_], out[REPLY_SIZE + 2];
	size_t len = 0;

	for (;;) {
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { ctl.stop_pipe[0], POLLIN, 0 } };
		char *nl;
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[1].revents)
			return;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
		while ((nl = memchr(buf, '\n', len))) {
			size_t used = (size_t)(nl - buf) + 1;

			*nl = 0;
			(void)pthread_mutex_lock(&fake.mu);
			command(buf, out);
			(void)pthread_mutex_unlock(&fake.mu);
			n = (ssize_t)strlen(out);
			out[n++] = '\n';
			if (write_all(fd, out, (size_t)n) < 0)
				return;
			memmove(buf, buf + used, len - used);
			len -= used;
		}
		if (len == sizeof(buf) - 1) {
			static const char too_long[] = "error line too long\n";

			(void)write_all(fd, too_long, sizeof(too_long) - 1);
			return;
		}
	}
}

static void *control_thread(void *arg)
{
	for (;;) {
		struct pollfd p[2] = { { ctl.listen_fd, POLLIN, 0 },
				       { ctl.stop_pipe[0], POLLIN, 0 } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(fd);
		(void)close(fd);
	}
	return NULL;
}

int fake_control_start(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	sigset_t all, old;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ctl.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctl.listen_fd < 0)
		return -1;
	(void)unlink(path);
	if (bind(ctl.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(ctl.listen_fd, 16) < 0 || pipe2(ctl.stop_pipe, O_CLOEXEC) < 0)
		goto fail;
	memcpy(ctl.path, path, strlen(path) + 1);
	/* The thread takes no signal meant for the process under test. */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&ctl.thread, NULL, control_thread, NULL);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		errno = r;
		goto fail;
	}
	ctl.running = true;
	return 0;
fail:
	r = errno;
	(void)close(ctl.listen_fd);
	ctl.listen_fd = -1;
	for (int i = 0; i < 2; i++)
		if (ctl.stop_pipe[i] >= 0)
			(void)close(ctl.stop_pipe[i]);
	ctl.stop_pipe[0] = ctl.stop_pipe[1] = -1;
	(void)unlink(path);
	errno = r;
	return -1;
}

void fake_control_stop(void)
{
	if (!ctl.running)
		return;
	(void)!write(ctl.stop_pipe[1], "x", 1);
	(void)pthread_join(ctl.thread, NULL);
	(void)close(ctl.listen_fd);
	(void)close(ctl.stop_pipe[0]);
	(void)close(ctl.stop_pipe[1]);
	(void)unlink(ctl.path);
	ctl.running = false;
}
