/*
 * The driver layer's host checks (doctor-driver.h): nvidia-smi on the PATH, persistence mode,
 * and whether the driver and the container runtime come back after a reboot (systemd units, the kernel module for the running kernel). Every
 * file is read under the host root; symlinks are followed inside it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor-driver.h"

bool doctor_host_exists(const struct doctor *dr, const char *path)
{
	struct stat st;

	return doctor_stat(dr, path, &st, NULL) == 0;
}

void doctor_note_unreadable(struct buf *b, const char *path, int r)
{
	if (r < 0 && r != -ENOENT &&
	    buf_printf(b, "%s: cannot read: %s\n", path, doctor_strerror(r)) < 0)
		buf_release(b);
}

void doctor_evidence_unreadable(struct doctor_check *c, struct buf *b)
{
	for (const char *p = (const char *)b->data; p && *p;) {
		size_t n = strcspn(p, "\n");

		doctor_evidence(c, "%.*s", (int)n, p);
		p += n + (p[n] == '\n');
	}
	buf_release(b);
}

/* --- nvidia-smi --- */

void doctor_check_smi(struct doctor_driver *d)
{
	static const char *const dirs[] = { "/usr/bin", "/usr/sbin", "/usr/local/bin",
					    "/bin",	"/sbin",     "/usr/local/nvidia/bin" };
	struct doctor_check *c;
	char *found = NULL, *noexec = NULL;

	if (d->f->board.tegra && d->f->board.l4t_major > 0 && d->f->board.l4t_major < 36) {
		(void)doctor_add(d->dr, "driver.nvidia-smi", DOCTOR_SKIP,
				 "L4T R%d ships no nvidia-smi (tegrastats shows the GPU)",
				 d->f->board.l4t_major);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(dirs) && !found; i++) {
		char *path = path_join(dirs[i], "nvidia-smi"), *real = NULL;
		struct stat st;

		if (path && doctor_stat(d->dr, path, &st, &real) == 0 && S_ISREG(st.st_mode)) {
			if (st.st_mode & 0111)
				found = strdup_printf("%s%s%s", path,
						      streq(real, path) ? "" : " -> ",
						      streq(real, path) ? "" : real);
			else if (!noexec)
				noexec = strdup(path);
		}
		free(real);
		free(path);
	}
	if (found) {
		c = doctor_add(d->dr, "driver.nvidia-smi", DOCTOR_PASS,
			       "nvidia-smi is on the PATH");
		doctor_evidence(c, "%s", found);
	} else if (noexec) {
		c = doctor_add(d->dr, "driver.nvidia-smi", DOCTOR_WARN,
			       "nvidia-smi is there but not executable");
		doctor_evidence(c, "%s: no execute permission", noexec);
		doctor_fix(c, "Make it executable (chmod 0755 on the path shown) or reinstall the "
			      "package that owns it (dpkg -S nvidia-smi).");
	} else {
		c = doctor_add(d->dr, "driver.nvidia-smi", DOCTOR_WARN,
			       "nvidia-smi is not on the PATH: the first check of a GPU node, "
			       "nvidia-smi listing the GPU and the driver version, cannot be run");
		doctor_evidence(c, "looked in /usr/bin, /usr/sbin, /usr/local/bin, /bin, /sbin, "
				   "/usr/local/nvidia/bin");
		doctor_fix(c,
			   "Install the driver's utilities, which bring nvidia-smi (Debian: apt "
			   "install nvidia-smi; Ubuntu: apt install nvidia-utils-<driver branch>, "
			   "e.g. nvidia-utils-550), then run nvidia-smi: it must list the GPU.");
	}
	free(found);
	free(noexec);
}

/* --- systemd units --- */

enum unit_state {
	UNIT_MISSING,
	UNIT_DISABLED, /* installed, started by nothing at boot */
	UNIT_ENABLED,
	UNIT_MASKED,
};

static const char *const unit_state_name[] = {
	[UNIT_MISSING] = "not installed",
	[UNIT_DISABLED] = "installed, not enabled",
	[UNIT_ENABLED] = "enabled",
	[UNIT_MASKED] = "masked",
};

static const char *const unit_dirs[] = { "/etc/systemd/system", "/usr/local/lib/systemd/system",
					 "/lib/systemd/system", "/usr/lib/systemd/system" };

static bool have_systemd(const struct doctor *dr)
{
	for (size_t i = 0; i < ELEMENTSOF(unit_dirs); i++) {
		struct stat st;

		if (doctor_stat(dr, unit_dirs[i], &st, NULL) == 0 && S_ISDIR(st.st_mode))
			return true;
	}
	return false;
}

/* A <unit dir>/<target>.wants/@name (or .requires) link: enabled. *@ret_by says which. */
static bool unit_wanted(const struct doctor *dr, const char *name, char **ret_by)
{
	for (size_t i = 0; i < ELEMENTSOF(unit_dirs); i++) {
		int r;
		DIR *dp = doctor_opendir(dr, unit_dirs[i], &r);
		struct dirent *de;

		while (dp && (de = readdir(dp))) {
			size_t n = strlen(de->d_name);
			char *link;
			struct stat st;
			bool hit;

			if (!(n > 6 && streq(de->d_name + n - 6, ".wants")) &&
			    !(n > 9 && streq(de->d_name + n - 9, ".requires")))
				continue;
			/* The link itself (what it points at may be anywhere), inside the root. */
			link = strdup_printf("%s/%s/%s", unit_dirs[i], de->d_name, name);
			hit = link && doctor_lstat(dr, link, &st) == 0;
			free(link);
			if (hit) {
				*ret_by = strdup_printf("%s/%s", unit_dirs[i], de->d_name);
				(void)closedir(dp);
				return true;
			}
		}
		if (dp)
			(void)closedir(dp);
	}
	return false;
}

static enum unit_state unit_state(const struct doctor *dr, const char *name, char **ret_where)
{
	char *etc = strdup_printf("/etc/systemd/system/%s", name), target[64];
	enum unit_state st = UNIT_MISSING;

	*ret_where = NULL;
	if (etc && doctor_readlink(dr, etc, target, sizeof(target)) == 0) {
		if (streq(target, "/dev/null")) {
			*ret_where = strdup(etc);
			st = UNIT_MASKED;
			goto out;
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(unit_dirs) && !*ret_where; i++) {
		char *p = path_join(unit_dirs[i], name);

		if (p && doctor_host_exists(dr, p))
			*ret_where = p;
		else
			free(p);
	}
	if (*ret_where) {
		char *by = NULL;

		st = unit_wanted(dr, name, &by) ? UNIT_ENABLED : UNIT_DISABLED;
		if (by) {
			free(*ret_where);
			*ret_where = by;
		}
	}
out:
	free(etc);
	return st;
}

/* --- persistence --- */

/*
 * nvidia-persistenced's pid file names a live process of that name under <root>/proc. Files
 * there but unreadable are noted in @why.
 */
static int persistenced_pid(const struct doctor *dr, struct buf *why)
{
	static const char *const pidfiles[] = {
		"/run/nvidia-persistenced/nvidia-persistenced.pid",
		"/var/run/nvidia-persistenced/nvidia-persistenced.pid"
	};
	int pid = 0;

	for (size_t i = 0; i < ELEMENTSOF(pidfiles) && !pid; i++) {
		char *text = NULL, *comm = NULL, *path = NULL;
		unsigned v;
		int r = doctor_read(dr, pidfiles[i], DOCTOR_HOST_FILE_MAX, &text, NULL);

		doctor_note_unreadable(why, pidfiles[i], r);
		if (r == 0) {
			text[strcspn(text, " \n")] = 0;
			if (safe_atou(text, &v) == 0 && v > 0 && v < INT_MAX &&
			    (path = strdup_printf("/proc/%u/comm", v))) {
				r = doctor_read(dr, path, DOCTOR_HOST_FILE_MAX, &comm, NULL);
				doctor_note_unreadable(why, path, r);
				if (r == 0 && startswith(comm, "nvidia-persiste"))
					pid = (int)v;
			}
		}
		free(path);
		free(comm);
		free(text);
	}
	return pid;
}

void doctor_check_persistence(struct doctor_driver *d)
{
	struct doctor_check *c;
	struct buf why = { 0 };
	char *where = NULL;
	enum unit_state us;
	int pid;

	if (d->f->board.tegra) {
		(void)doctor_add(d->dr, "driver.persistence", DOCTOR_SKIP,
				 "a Jetson's integrated GPU has no persistence mode");
		return;
	}
	pid = persistenced_pid(d->dr, &why);
	us = unit_state(d->dr, "nvidia-persistenced.service", &where);
	if (pid > 0) {
		c = doctor_add(d->dr, "driver.persistence", DOCTOR_PASS,
			       "persistence mode is on: nvidia-persistenced runs");
		doctor_evidence(c, "nvidia-persistenced: pid %d", pid);
	} else {
		c = doctor_add(
			d->dr, "driver.persistence", DOCTOR_WARN,
			"persistence mode is off: nvidia-persistenced is not running, so the "
			"driver sets each GPU up again for every CUDA process and pods start "
			"slowly");
		doctor_evidence(c, "no live nvidia-persistenced behind "
				   "/run/nvidia-persistenced/nvidia-persistenced.pid");
		doctor_fix(c, "Start the persistence daemon and enable it at boot: systemctl "
			      "enable --now nvidia-persistenced.service (it comes with the driver; "
			      "nvidia-smi -pm 1 also works, until the next reboot).");
	}
	doctor_evidence_unreadable(c, &why);
	doctor_evidence(c, "nvidia-persistenced.service: %s%s%s%s", unit_state_name[us],
			where ? " (" : "", where ? where : "", where ? ")" : "");
	free(where);
}

/* --- start at boot --- */

/* A unit the node needs at boot, and the command that enables it (the fix, word for word). */
struct boot_unit {
	const char *name;
	const char *enable;
	const char *unmask;
};

#define ENABLE(u) "systemctl enable --now " u
#define UNMASK(u) "systemctl unmask " u " && systemctl enable --now " u

static const struct boot_unit u_persistenced = { "nvidia-persistenced.service",
						 ENABLE("nvidia-persistenced.service"),
						 UNMASK("nvidia-persistenced.service") };
static const struct boot_unit u_k3s[] = {
	{ "k3s.service", ENABLE("k3s.service"), UNMASK("k3s.service") },
	{ "k3s-agent.service", ENABLE("k3s-agent.service"), UNMASK("k3s-agent.service") },
};
static const struct boot_unit u_microk8s = {
	"snap.microk8s.daemon-containerd.service",
	ENABLE("snap.microk8s.daemon-containerd.service") " (or: snap start --enable microk8s)",
	UNMASK("snap.microk8s.daemon-containerd.service"),
};
/* kubeadm and KubeEdge nodes: each one installed must start at boot. */
static const struct boot_unit u_node[] = {
	{ "containerd.service", ENABLE("containerd.service"), UNMASK("containerd.service") },
	{ "edgecore.service", ENABLE("edgecore.service"), UNMASK("edgecore.service") },
	{ "kubelet.service", ENABLE("kubelet.service"), UNMASK("kubelet.service") },
};
static const struct boot_unit u_docker = { "docker.service", ENABLE("docker.service"),
					   UNMASK("docker.service") };

struct boot {
	struct doctor_driver *d;
	struct doctor_check *c; /* NULL until the result is known: the lines wait in @ev */
	struct buf ev;
	enum doctor_status st;
	char summary[256];
	const char *fix;
	unsigned n_runtime; /* runtime units found */
};

static void boot_finding(struct boot *b, enum doctor_status st, const char *fix, const char *fmt,
			 ...) __attribute__((format(printf, 4, 5)));

/* Records a finding when it is worse than the one held: the first of the worst wins. */
static void boot_finding(struct boot *b, enum doctor_status st, const char *fix, const char *fmt,
			 ...)
{
	va_list ap;

	if (st == DOCTOR_SKIP || st == DOCTOR_PASS || st <= b->st)
		return;
	b->st = st;
	b->fix = fix;
	va_start(ap, fmt);
	(void)vsnprintf(b->summary, sizeof(b->summary), fmt, ap);
	va_end(ap);
}

static void boot_line(struct boot *b, const char *line)
{
	if (buf_printf(&b->ev, "%s\n", line ? line : "(out of memory)") < 0)
		buf_release(&b->ev);
}

/* Looks at @u; returns its state, and records a finding at @bad when it is not enabled. */
static enum unit_state boot_unit(struct boot *b, const struct boot_unit *u, enum doctor_status bad,
				 bool report)
{
	char *where = NULL, *line;
	enum unit_state st = unit_state(b->d->dr, u->name, &where);

	if (st != UNIT_MISSING || report) {
		line = strdup_printf("%s: %s%s%s%s", u->name, unit_state_name[st],
				     where ? " (" : "", where ? where : "", where ? ")" : "");
		boot_line(b, line);
		free(line);
	}
	free(where);
	if (st == UNIT_DISABLED && bad != DOCTOR_PASS)
		boot_finding(b, bad, u->enable,
			     "%s is not enabled: after a reboot it does not start and the GPUs "
			     "are gone",
			     u->name);
	else if (st == UNIT_MASKED && bad != DOCTOR_PASS)
		boot_finding(b, bad, u->unmask,
			     "%s is masked: after a reboot it does not start and the GPUs are gone",
			     u->name);
	return st;
}

static void boot_units(struct boot *b)
{
	enum unit_state k3s[ELEMENTSOF(u_k3s)];
	bool k3s_any = false, k3s_on = false, own;
	enum unit_state mk;

	if (!b->d->f->board.tegra)
		(void)boot_unit(b, &u_persistenced, DOCTOR_WARN, true);
	/* A node runs k3s or k3s-agent: one of them enabled is enough. */
	for (size_t i = 0; i < ELEMENTSOF(u_k3s); i++) {
		char *where = NULL;

		k3s[i] = unit_state(b->d->dr, u_k3s[i].name, &where);
		free(where);
		k3s_any = k3s_any || k3s[i] != UNIT_MISSING;
		k3s_on = k3s_on || k3s[i] == UNIT_ENABLED;
	}
	for (size_t i = 0; i < ELEMENTSOF(u_k3s); i++)
		(void)boot_unit(b, &u_k3s[i], k3s_on ? DOCTOR_PASS : DOCTOR_FAIL, false);
	mk = boot_unit(b, &u_microk8s, k3s_any ? DOCTOR_PASS : DOCTOR_FAIL, false);
	own = k3s_any || mk != UNIT_MISSING;
	b->n_runtime = own;
	/* k3s and MicroK8s run their own containerd: a disabled containerd.service is theirs. */
	for (size_t i = 0; i < ELEMENTSOF(u_node); i++)
		if (boot_unit(b, &u_node[i], own ? DOCTOR_PASS : DOCTOR_FAIL, false) !=
		    UNIT_MISSING)
			b->n_runtime++;
	if (boot_unit(b, &u_docker, DOCTOR_WARN, false) != UNIT_MISSING)
		b->n_runtime++;
	if (!b->n_runtime)
		boot_finding(b, DOCTOR_WARN,
			     "Install the container runtime and enable it at boot: apt install "
			     "containerd && systemctl enable --now containerd.service (k3s and "
			     "MicroK8s bring their own and enable it when installed).",
			     "%s",
			     "no container runtime unit (containerd, docker, k3s, MicroK8s, "
			     "edgecore): it may not start after a reboot");
}

/* How far and how much of /lib/modules/<release> is looked through (a kernel has ~7,000 files). */
#define MODULE_DEPTH   32
#define MODULE_ENTRIES 200000

/*
 * 1 when a regular file nvidia.ko* or nvidia-current.ko* is below the directory @d, else 0. No
 * link is followed: each directory is opened O_NOFOLLOW relative to its parent's fd. *@budget
 * bounds the entries looked at.
 */
static int find_module(DIR *d, unsigned depth, unsigned *budget)
{
	struct dirent *de;
	int found = 0;

	while (!found && *budget > 0 && (de = readdir(d))) {
		const char *n = de->d_name;
		struct stat st;

		(*budget)--;
		if (streq(n, ".") || streq(n, "..") ||
		    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			found = startswith(n, "nvidia.ko") || startswith(n, "nvidia-current.ko");
		} else if (S_ISDIR(st.st_mode) && depth > 0) {
			int fd = openat(dirfd(d), n,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
						O_CLOEXEC);
			DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;

			if (!sub) {
				fd_close(fd);
				continue;
			}
			found = find_module(sub, depth - 1, budget);
			(void)closedir(sub);
		}
	}
	return found;
}

/* The NVIDIA module for the running kernel, under <root>/lib/modules/<release>. */
static void boot_module(struct boot *b)
{
	const struct doctor *dr = b->d->dr;
	char *rel = NULL, *path = NULL, *line = NULL;
	unsigned budget = MODULE_ENTRIES;
	bool found = false;
	DIR *d = NULL;
	int r;

	if (b->d->f->board.tegra) {
		boot_line(b, "kernel module: the Jetson's GPU driver comes with the L4T kernel");
		return;
	}
	r = doctor_read(dr, "/proc/sys/kernel/osrelease", DOCTOR_HOST_FILE_MAX, &rel, NULL);
	if (r < 0) {
		line = strdup_printf("kernel release: unknown (/proc/sys/kernel/osrelease: %s)",
				     r == -ENOENT ? "missing" : doctor_strerror(r));
		boot_line(b, line);
		boot_finding(b, DOCTOR_WARN, NULL, "%s",
			     "the running kernel is unknown: whether the NVIDIA module loads after "
			     "a reboot was not checked");
		goto out;
	}
	rel[strcspn(rel, "\n")] = 0;
	path = strdup_printf("/lib/modules/%s", rel);
	if (path)
		d = doctor_opendir(dr, path, &r);
	if (d) {
		found = find_module(d, MODULE_DEPTH, &budget) > 0;
		(void)closedir(d);
	}
	line = strdup_printf("kernel module: %s in %s", found ? "nvidia.ko found" : "no nvidia.ko",
			     path ? path : "/lib/modules");
	boot_line(b, line);
	if (!found)
		boot_finding(
			b, DOCTOR_FAIL,
			"Build the driver for the running kernel: dkms autoinstall (keep the "
			"driver's DKMS package, e.g. nvidia-kernel-dkms, installed so that kernel "
			"updates rebuild it), or install the prebuilt module package for this "
			"kernel (Ubuntu: linux-modules-nvidia-<branch>-$(uname -r)); then modprobe "
			"nvidia.",
			"no NVIDIA kernel module for the running kernel %s: after a reboot the "
			"GPUs are gone",
			rel);
out:
	free(line);
	free(path);
	free(rel);
}

void doctor_check_boot(struct doctor_driver *d)
{
	struct boot b = { .d = d, .st = DOCTOR_PASS };
	const char *ev;

	bool units = have_systemd(d->dr);

	boot_module(&b);
	if (units)
		boot_units(&b);
	else
		boot_line(&b, "no systemd unit directory: the start at boot of the services was "
			      "not checked");
	if (b.st == DOCTOR_PASS && !units && d->f->board.tegra)
		b.st = DOCTOR_SKIP;
	if (b.st == DOCTOR_PASS || b.st == DOCTOR_SKIP)
		(void)snprintf(b.summary, sizeof(b.summary), "%s",
			       units ? "the NVIDIA driver and the container runtime start at boot" :
			       d->f->board.tegra ?
				       "no systemd here: nothing to check" :
				       "the NVIDIA kernel module is built for the running kernel "
				       "(no systemd: the services were not checked)");
	b.c = doctor_add(d->dr, "driver.boot", b.st, "%s", b.summary);
	for (ev = (const char *)b.ev.data; ev && *ev;) {
		size_t n = strcspn(ev, "\n");

		doctor_evidence(b.c, "%.*s", (int)n, ev);
		ev += n + (ev[n] == '\n');
	}
	if (b.st != DOCTOR_PASS)
		doctor_fix(b.c, b.fix);
	buf_release(&b.ev);
}
