/*
 * fakenvml-ctl: sends commands to the fake NVML's control socket.
 *
 *   fakenvml-ctl [-s SOCKET] COMMAND [ARG...]    one command (arguments joined by spaces)
 *   fakenvml-ctl [-s SOCKET] < commands          one command per line
 *
 * SOCKET defaults to $EDGEGPU_FAKE_NVML_CONTROL. Prints each reply's payload; exits 0 when
 * every reply was "ok", 1 when one was "error", 2 on usage or socket errors.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fake-client.h"

static int one(const char *sock, const char *cmd)
{
	char reply[16384];
	int r = fake_nvml_ctl(sock, cmd, reply, sizeof(reply));

	if (r == -EPROTO) {
		(void)fprintf(stderr, "fakenvml-ctl: %s: %s\n", cmd, reply);
		return 1;
	}
	if (r < 0) {
		(void)fprintf(stderr, "fakenvml-ctl: %s: %s\n", cmd, strerror(-r));
		return 2;
	}
	if (reply[0])
		(void)puts(reply);
	return 0;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	char cmd[4096];
	size_t n = 0;
	int i = 1;

	if (argc > 2 && strcmp(argv[1], "-s") == 0) {
		sock = argv[2];
		i = 3;
	}
	if (i < argc && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
		(void)printf("usage: fakenvml-ctl [-s SOCKET] [COMMAND [ARG...]]\n");
		return 0;
	}
	if (i == argc) {
		char line[4096];
		int rc = 0;

		while (fgets(line, sizeof(line), stdin)) {
			int r;

			line[strcspn(line, "\r\n")] = 0;
			if (!line[0] || line[0] == '#')
				continue;
			r = one(sock, line);
			if (r > rc)
				rc = r;
		}
		return rc;
	}
	cmd[0] = 0;
	for (; i < argc; i++) {
		int k = snprintf(cmd + n, sizeof(cmd) - n, "%s%s", n ? " " : "", argv[i]);

		if (k < 0 || (size_t)k >= sizeof(cmd) - n) {
			(void)fprintf(stderr, "fakenvml-ctl: command too long\n");
			return 2;
		}
		n += (size_t)k;
	}
	return one(sock, cmd);
}
