/*
 * backstop-host.c: the one host read of the backstop (backstop.h): are we in the host's PID
 * namespace? The engine in backstop.c stays pure.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "backstop.h"

int backstop_host_pid(const char *host_proc, const char **why)
{
	struct stat self, host;
	char path[4096];

	if (stat("/proc/self/ns/pid", &self) < 0) {
		*why = "our /proc/self/ns/pid cannot be read";
		return -errno;
	}
	(void)snprintf(path, sizeof(path), "%s/1/ns/pid", host_proc ? host_proc : "/proc");
	if (stat(path, &host) < 0) {
		*why = "the host's /proc/1/ns/pid cannot be read (--host-proc)";
		return -errno;
	}
	if (self.st_dev == host.st_dev && self.st_ino == host.st_ino)
		return 1;
	*why = "not in the host's PID namespace (hostPID: false): NVML's PIDs are not ours to signal";
	return 0;
}
