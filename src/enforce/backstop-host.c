/*
 * backstop-host.c: the one host read of the backstop (backstop.h): are we in the host's PID
 * namespace? The engine in backstop.c stays pure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backstop.h"
#include "file-read.h"

/*
 * The NVIDIA PID namespace test a process without capabilities can make: the NSpid line of
 * <@proc>/self/status lists our PID in the namespace of that procfs and in each one nested
 * below it, down to ours, so a single number means we are in its namespace. Our own status is
 * readable with no privilege, where <@proc>/1/ns/pid needs ptrace read access to PID 1, which
 * the kernel refuses to a root process with its capabilities dropped (PID 1 holds some: the
 * DaemonSet's case with hostPID). Returns 1, 0, or -errno (-ENOENT: no NSpid line, a kernel
 * before 4.1 or not a procfs).
 */
static int nspid_single(const char *proc)
{
	char path[4096], *text = NULL;
	const char *l;
	int r;

	(void)snprintf(path, sizeof(path), "%s/self/status", proc);
	r = read_file(path, (size_t)64 * 1024, &text, NULL);
	if (r < 0)
		return r;
	l = strstr(text, "\nNSpid:");
	if (!l) {
		free(text);
		return -ENOENT;
	}
	l += strlen("\nNSpid:");
	l += strspn(l, " \t");
	l += strspn(l, "0123456789");
	r = l[strspn(l, " \t")] == '\n' || l[strspn(l, " \t")] == 0;
	free(text);
	return r;
}

int backstop_host_pid(const char *host_proc, const char **why)
{
	const char *proc = host_proc ? host_proc : "/proc";
	struct stat self, host;
	char path[4096];
	int r;

	r = nspid_single(proc);
	if (r == 1)
		return 1;
	if (r == 0) {
		*why = "not in the host's PID namespace (hostPID: false): NVML's PIDs are not ours to "
		       "signal";
		return 0;
	}
	/* No NSpid line: the namespace links, which need ptrace access to the host's PID 1. */
	if (stat("/proc/self/ns/pid", &self) < 0) {
		*why = "our /proc/self/ns/pid cannot be read";
		return -errno;
	}
	(void)snprintf(path, sizeof(path), "%s/1/ns/pid", proc);
	if (stat(path, &host) < 0) {
		*why = "the host's /proc/1/ns/pid cannot be read (--host-proc)";
		return -errno;
	}
	if (self.st_dev == host.st_dev && self.st_ino == host.st_ino)
		return 1;
	*why = "not in the host's PID namespace (hostPID: false): NVML's PIDs are not ours to signal";
	return 0;
}
