/*
 * podmap: cgroup texts as the kernel writes them for containerd, CRI-O and Docker (cri-dockerd)
 * pods under cgroup v1, v2 and hybrid, with the cgroupfs and systemd drivers, every QoS class, a
 * cgroup namespace, conmon, k3s and kind; host processes and garbage. Then batches against proc
 * and log trees built in a temporary directory (symlinks whose targets are missing, pod
 * directories, hostile names), the cache's listings counted, and hostile trees: links out of
 * the tree, FIFOs, oversized files and directories, a deadline already past.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file-writer.h"
#include "podmap.h"
#include "unit-fs.h"
#include "unit.h"
#include "util.h"

#define UID  "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
#define UIDU "0f1e2d3c_4b5a_4978_8695_a4b3c2d1e0f9"
#define CID  "3f8ca1b2c3d4e5f60718293a4b5c6d7e8f9011223344556677889900aabbccdd"
#define CID2 "aa11bb22cc33dd44ee55ff6600778899aabbccddeeff00112233445566778899"

static struct podmap_id parse_ok(const char *text)
{
	struct podmap_id id;

	memset(&id, 0x55, sizeof(id));
	assert_int_equal(podmap_parse_cgroup(text, strlen(text), &id), 0);
	return id;
}

static void expect_pod(const char *text, const char *uid, const char *cid, const char *runtime)
{
	struct podmap_id id = parse_ok(text);

	if (id.kind != PODMAP_POD)
		fail_msg("not a pod: %s", text);
	assert_string_equal(id.pod_uid, uid);
	assert_string_equal(id.container_id, cid);
	assert_string_equal(id.runtime, runtime);
}

static void expect_host(const char *text)
{
	struct podmap_id id = parse_ok(text);

	if (id.kind != PODMAP_HOST)
		fail_msg("not a host process: %s", text);
	assert_string_equal(id.pod_uid, "");
	assert_string_equal(id.container_id, "");
}

/* containerd, cgroup v1, cgroupfs driver (legacy hierarchy: no "0::" line). */
static const char v1_containerd_cgroupfs[] =
	"12:hugetlb:/kubepods/besteffort/pod" UID "/" CID "\n"
	"11:pids:/kubepods/besteffort/pod" UID "/" CID "\n"
	"10:freezer:/kubepods/besteffort/pod" UID "/" CID "\n"
	"9:cpu,cpuacct:/kubepods/besteffort/pod" UID "/" CID "\n"
	"8:net_cls,net_prio:/kubepods/besteffort/pod" UID "/" CID "\n"
	"7:devices:/kubepods/besteffort/pod" UID "/" CID "\n"
	"6:perf_event:/kubepods/besteffort/pod" UID "/" CID "\n"
	"5:rdma:/\n"
	"4:blkio:/kubepods/besteffort/pod" UID "/" CID "\n"
	"3:cpuset:/kubepods/besteffort/pod" UID "/" CID "\n"
	"2:memory:/kubepods/besteffort/pod" UID "/" CID "\n"
	"1:name=systemd:/kubepods/besteffort/pod" UID "/" CID "\n";

/* containerd, cgroup v1, systemd driver, Burstable. */
static const char v1_containerd_systemd[] =
	"12:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	".slice/cri-containerd-" CID ".scope\n"
	"11:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	".slice/cri-containerd-" CID ".scope\n"
	"5:rdma:/\n"
	"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	".slice/cri-containerd-" CID ".scope\n";

/* containerd, cgroup v2, systemd driver, Guaranteed (no QoS level). */
static const char v2_containerd_guaranteed[] = "0::/kubepods.slice/kubepods-pod" UIDU
					       ".slice/cri-containerd-" CID ".scope\n";

/* CRI-O, cgroup v2, systemd driver, Burstable; its conmon beside it. */
static const char v2_crio[] =
	"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/crio-" CID
	".scope\n";
static const char v2_crio_conmon[] =
	"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	".slice/crio-conmon-" CID ".scope\n";
/* CRI-O (OpenShift, cgroup v2) puts the workload one level down in the scope. */
static const char v2_crio_nested[] =
	"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	".slice/crio-" CID ".scope/container\n";

/* CRI-O, cgroup v1, cgroupfs driver. */
static const char v1_crio_cgroupfs[] = "11:memory:/kubepods/burstable/pod" UID "/crio-" CID "\n"
				       "1:name=systemd:/kubepods/burstable/pod" UID "/crio-" CID
				       "\n";

/* Docker via cri-dockerd, cgroup v1: systemd driver, and cgroupfs driver (bare ID). */
static const char v1_docker_systemd[] =
	"10:cpu,cpuacct:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	".slice/docker-" CID ".scope\n"
	"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	".slice/docker-" CID ".scope\n";
static const char v1_docker_cgroupfs[] = "4:memory:/kubepods/pod" UID "/" CID "\n"
					 "1:name=systemd:/kubepods/pod" UID "/" CID "\n";

/* Hybrid: v1 controllers in the pod, the unified hierarchy at its root. */
static const char hybrid[] = "12:memory:/kubepods/burstable/pod" UID "/" CID "\n"
			     "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n"
			     "0::/\n";
/* Hybrid with systemd managing the unified hierarchy too. */
static const char hybrid_systemd[] =
	"12:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	".slice/cri-containerd-" CID ".scope\n"
	"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	".slice/cri-containerd-" CID ".scope\n";

/* Read from inside a container with its own cgroup namespace. */
static const char cgroupns[] = "0::/../../kubepods.slice/kubepods-besteffort.slice/"
			       "kubepods-besteffort-pod" UIDU ".slice/cri-containerd-" CID
			       ".scope\n";
/* k3s: cgroupfs driver on cgroup v2. */
static const char k3s[] = "0::/kubepods/besteffort/pod" UID "/" CID "\n";
/* kind: the kubelet's cgroup root below kubelet.slice. */
static const char kind[] =
	"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	"kubelet-kubepods-besteffort-pod" UIDU ".slice/cri-containerd-" CID ".scope\n";

static void test_parse_pods(void **state)
{
	expect_pod(v1_containerd_cgroupfs, UID, CID, "");
	expect_pod(v1_containerd_systemd, UID, CID, "containerd");
	expect_pod(v2_containerd_guaranteed, UID, CID, "containerd");
	expect_pod(v2_crio, UID, CID, "cri-o");
	expect_pod(v2_crio_nested, UID, CID, "cri-o");
	expect_pod(v1_crio_cgroupfs, UID, CID, "cri-o");
	expect_pod(v1_docker_systemd, UID, CID, "docker");
	expect_pod(v1_docker_cgroupfs, UID, CID, "");
	expect_pod(hybrid, UID, CID, "");
	expect_pod(hybrid_systemd, UID, CID, "containerd");
	expect_pod(cgroupns, UID, CID, "containerd");
	expect_pod(k3s, UID, CID, "");
	expect_pod(kind, UID, CID, "containerd");
	/* Guaranteed with cgroupfs, Burstable with systemd on v2. */
	expect_pod("0::/kubepods/pod" UID "/" CID "\n", UID, CID, "");
	expect_pod("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
		   ".slice/cri-containerd-" CID ".scope\n",
		   UID, CID, "containerd");
	/* A static pod's UID is 32 hex digits. */
	expect_pod("0::/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" CID "\n",
		   "0123456789abcdef0123456789abcdef", CID, "");
	expect_pod("0::/kubepods.slice/kubepods-burstable.slice/"
		   "kubepods-burstable-pod0123456789abcdef0123456789abcdef.slice\n",
		   "0123456789abcdef0123456789abcdef", "", "");
	/* No trailing newline. */
	expect_pod("0::/kubepods/besteffort/pod" UID "/" CID, UID, CID, "");
}

static void test_parse_pod_without_container(void **state)
{
	/* conmon: the pod, not a container. */
	expect_pod(v2_crio_conmon, UID, "", "cri-o");
	/* The pod-level cgroup (the pause process under some setups). */
	expect_pod("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
		   ".slice\n",
		   UID, "", "");
	expect_pod("0::/kubepods/burstable/pod" UID "\n", UID, "", "");
	/* Not a container ID: too short, not hex, or a prefix that needs .scope. */
	expect_pod("0::/kubepods/burstable/pod" UID "/" CID "0\n", UID, "", "");
	expect_pod("0::/kubepods/burstable/pod" UID "/zz" CID "\n", UID, "", "");
	expect_pod("0::/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-0123.scope\n", UID,
		   "", "");
	expect_pod("0::/kubepods/burstable/pod" UID "/docker-" CID "\n", UID, "", "");
	/* A v1 line with the container wins over one with only the pod, whatever the order. */
	expect_pod("3:cpu:/kubepods/burstable/pod" UID "\n"
		   "2:memory:/kubepods/burstable/pod" UID "/" CID "\n",
		   UID, CID, "");
}

static void test_parse_host(void **state)
{
	expect_host("0::/\n");
	expect_host("0::/system.slice/containerd.service\n");
	expect_host("0::/system.slice/kubelet.service\n");
	expect_host("0::/user.slice/user-1000.slice/session-3.scope\n");
	expect_host("0::/init.scope\n");
	expect_host("12:memory:/user.slice\n11:pids:/user.slice/user-1000.slice/session-2.scope\n"
		    "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n0::/user.slice\n");
	/* The QoS level without a pod, and a kubepods look-alike. */
	expect_host("0::/kubepods.slice/kubepods-burstable.slice\n");
	expect_host("0::/kubepods/besteffort\n");
	expect_host("0::/system.slice/pod" UID "/" CID "\n");
	expect_host("0::/system.slice/docker-" CID ".scope\n");
	/* A pod UID of the wrong shape. */
	expect_host("0::/kubepods/burstable/pod" UID "0/" CID "\n");
	expect_host("0::/kubepods/burstable/podxyz/" CID "\n");
	expect_host("0::/kubepods.slice/kubepods-pod" UID ".slice\n"); /* dashes, not '_' */
	/* Lines that do not parse are skipped when one does. */
	expect_host("garbage\n0::/\n");
}

/* A fixed sequence (xorshift), the same on every run. */
static uint32_t next_random(void)
{
	static uint32_t x = 2463534242u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

static void test_parse_garbage(void **state)
{
	static const char *const bad[] = {
		"",
		"\n\n",
		"hello world\n",
		"1:cpu\n",
		"x::/kubepods/besteffort/pod" UID "/" CID "\n",
		":memory:/kubepods/besteffort/pod" UID "/" CID "\n",
		"0::kubepods/besteffort/pod" UID "/" CID "\n",
		"0::\n",
	};
	const char nul[] = "0::/kube\0pods/besteffort/pod" UID "\n";
	struct podmap_id id = { .kind = PODMAP_NO_PROC };

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_int_equal(podmap_parse_cgroup(bad[i], strlen(bad[i]), &id), -EBADMSG);
	assert_int_equal(podmap_parse_cgroup(nul, sizeof(nul) - 1, &id), -EBADMSG);
	assert_int_equal(id.kind, PODMAP_NO_PROC); /* untouched */
	/* Only @len bytes are read: the pod is cut off. */
	assert_int_equal(podmap_parse_cgroup(k3s, strlen("0::/kubepods"), &id), 0);
	assert_int_equal(id.kind, PODMAP_HOST);
	/* Random bytes never crash and never overflow the fields. */
	for (int round = 0; round < 2000; round++) {
		char text[300];
		size_t n = (size_t)(next_random() % sizeof(text));

		for (size_t i = 0; i < n; i++)
			text[i] = "0:/kubepods-_.slicepod0123abcdef\n"[next_random() % 34];
		if (podmap_parse_cgroup(text, n, &id) == 0) {
			assert_true(strlen(id.pod_uid) < sizeof(id.pod_uid));
			assert_true(strlen(id.container_id) == 0 || strlen(id.container_id) == 64);
		}
	}
}

/* --- files --- */

static void put(const char *dir, const char *name, const char *content)
{
	char *p = path_join(dir, name);

	assert_non_null(p);
	assert_int_equal(file_write_atomic(p, content, strlen(content), 0644, NULL), 0);
	free(p);
}

/* mkdir <root>/<sub> */
static void mkdirf(const char *root, const char *sub)
{
	char *p = path_join(root, sub);

	assert_non_null(p);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
}

static int read_pid(const char *root, int pid, size_t max, struct podmap_id *id)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	assert_true(fd >= 0);
	r = podmap_read_pid_at(fd, pid, max, id);
	(void)close(fd);
	return r;
}

/* A file of @size bytes: @first, then lines of '/' padding, then @last. */
static void put_padded(const char *dir, const char *name, const char *first, size_t size,
		       const char *last)
{
	char *text = malloc(size + 1);
	size_t a = strlen(first), z = strlen(last);

	assert_non_null(text);
	assert_true(a + z < size);
	memcpy(text, first, a);
	for (size_t i = a; i < size - z; i++)
		text[i] = i % 64 == 63 ? '\n' : '/';
	text[size - z - 1] = '\n';
	memcpy(text + size - z, last, z);
	text[size] = 0;
	put(dir, name, text);
	free(text);
}

static void test_read_pid(void **state)
{
	char *root = unit_tmpdir_dup("test-podmap"), *outside = unit_tmpdir_dup("test-podmap"), *p;
	struct podmap_id id;

	mkdirf(root, "4242");
	put(root, "4242/cgroup", v2_crio);
	assert_int_equal(read_pid(root, 4242, 0, &id), 0);
	assert_int_equal(id.kind, PODMAP_POD);
	assert_string_equal(id.container_id, CID);
	assert_string_equal(id.runtime, "cri-o");

	/* Gone: no directory, or a directory without the file. */
	assert_int_equal(read_pid(root, 4243, 0, &id), 0);
	assert_int_equal(id.kind, PODMAP_NO_PROC);
	mkdirf(root, "4244");
	assert_int_equal(read_pid(root, 4244, 0, &id), 0);
	assert_int_equal(id.kind, PODMAP_NO_PROC);

	/* Garbage, a FIFO (would block a plain open and read), a directory, a huge file. */
	mkdirf(root, "4245");
	put(root, "4245/cgroup", "not a cgroup file\n");
	assert_int_equal(read_pid(root, 4245, 0, &id), -EBADMSG);
	mkdirf(root, "4246");
	p = strdup_printf("%s/4246/cgroup", root);
	assert_int_equal(mkfifo(p, 0600), 0);
	free(p);
	assert_int_equal(read_pid(root, 4246, 0, &id), -EINVAL);
	mkdirf(root, "4247");
	mkdirf(root, "4247/cgroup");
	assert_int_equal(read_pid(root, 4247, 0, &id), -EINVAL);
	mkdirf(root, "4248");
	put_padded(root, "4248/cgroup", "", (size_t)100 * 1024, "");
	assert_int_equal(read_pid(root, 4248, 0, &id), -EFBIG);
	assert_int_equal(read_pid(root, 0, 0, &id), -EINVAL);
	assert_int_equal(read_pid(root, -1, 0, &id), -EINVAL);

	/* 64 KiB: only the start is read. The pod named there is used; one named only past the
	 * cap is not guessed at (the host's, it would say). */
	mkdirf(root, "4249");
	put_padded(root, "4249/cgroup", v2_crio, (size_t)64 * 1024, "");
	memset(&id, 0, sizeof(id));
	assert_int_equal(read_pid(root, 4249, 0, &id), 1);
	assert_int_equal(id.kind, PODMAP_POD);
	assert_string_equal(id.container_id, CID);
	mkdirf(root, "4250");
	put_padded(root, "4250/cgroup", "0::/system.slice/x.service\n", (size_t)64 * 1024, v2_crio);
	assert_int_equal(read_pid(root, 4250, 0, &id), -EFBIG);
	/* A cap inside the first line leaves no whole line. */
	assert_int_equal(read_pid(root, 4242, 10, &id), -EFBIG);

	/* Links lead out of the tree: neither the pid directory nor the file is followed, though
	 * what they lead to is a valid pod cgroup. */
	mkdirf(outside, "7");
	put(outside, "7/cgroup", v2_crio);
	p = strdup_printf("%s/7", outside);
	assert_non_null(p);
	{
		char *l = strdup_printf("%s/4251", root);

		assert_int_equal(symlink(p, l), 0);
		free(l);
	}
	free(p);
	assert_int_equal(read_pid(root, 4251, 0, &id), -ELOOP);
	mkdirf(root, "4252");
	p = strdup_printf("%s/7/cgroup", outside);
	{
		char *l = strdup_printf("%s/4252/cgroup", root);

		assert_int_equal(symlink(p, l), 0);
		free(l);
	}
	free(p);
	assert_int_equal(read_pid(root, 4252, 0, &id), -ELOOP);

	/* This process, in the real /proc: it exists, whatever its cgroup. */
	assert_true(read_pid("/proc", getpid(), 0, &id) >= 0);
	assert_int_not_equal(id.kind, PODMAP_NO_PROC);
	unit_rm_tree(root);
	unit_rm_tree(outside);
	free(root);
	free(outside);
}

/* A log tree: /containers symlinks (targets missing for some) and /pods directories. */
#define UID_S "11111111-2222-4333-8444-555555555555"
#define UID_N "66666666-7777-4888-9999-aaaaaaaaaaaa"
#define UID_L "12121212-3434-4565-8787-909090909090"
#define UID_9 "99999999-2222-4333-8444-555555555555"
#define CID_S "5555555555555555555555555555555555555555555555555555555555555555"
#define CID_X "7777777777777777777777777777777777777777777777777777777777777777"

static void link_in(const char *root, const char *name, const char *target)
{
	char *p = strdup_printf("%s/containers/%s", root, name);

	assert_non_null(p);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

static char *make_tree(void)
{
	char *root = unit_tmpdir_dup("test-podmap");
	char long_ctr[80], long_pod[300], name[512];

	mkdirf(root, "proc");
	mkdirf(root, "containers");
	mkdirf(root, "pods");
	/* A pod with two containers, one name with dashes. */
	mkdirf(root, "pods/"
		     "ml_gpu-job-7d9f_" UID);
	mkdirf(root, "pods/"
		     "ml_gpu-job-7d9f_" UID "/trainer");
	mkdirf(root, "pods/"
		     "ml_gpu-job-7d9f_" UID "/side-car");
	link_in(root, "gpu-job-7d9f_ml_trainer-" CID ".log",
		"/var/log/pods/ml_gpu-job-7d9f_" UID "/trainer/0.log");
	link_in(root, "gpu-job-7d9f_ml_side-car-" CID2 ".log", "/nonexistent/0.log");
	/* A pod with one container and no symlink (log rotation, a truncated name, ...). */
	mkdirf(root, "pods/"
		     "default_single.app_" UID_S);
	mkdirf(root, "pods/"
		     "default_single.app_" UID_S "/app");
	put(root, "pods/default_single.app_" UID_S "/notes.txt", "a file is not a container\n");
	/* A pod without container directories. */
	mkdirf(root, "pods/"
		     "kube-system_empty_" UID_N);

	/* Hostile names, each close to a valid one for CID_X or UID_N. */
	memset(long_ctr, 'c', 64);
	long_ctr[64] = 0;
	memset(long_pod, 'p', 70); /* a label of 70 in the pod name */
	long_pod[70] = 0;
	link_in(root, "p_ns_c-" CID_X "0.log", "x"); /* 65 hex */
	link_in(root,
		"p_ns_c-"
		"Z777777777777777777777777777777777777777777777777777777777777777.log",
		"x");				      /* not hex */
	link_in(root, "p_ns_c_d-" CID_X ".log", "x"); /* an extra part */
	link_in(root, "p_ns-" CID_X ".log", "x");     /* no container */
	link_in(root, "p__c-" CID_X ".log", "x");     /* empty namespace */
	link_in(root, "P_ns_c-" CID_X ".log", "x");   /* upper case */
	link_in(root, "p_ns_c-" CID_X ".txt", "x");   /* not .log */
	link_in(root, "p_..._c-" CID_X ".log", "x");  /* dots */
	link_in(root, "p_-ns_c-" CID_X ".log", "x");  /* dash first */
	link_in(root, ".p_ns_c-" CID_X ".log", "x");  /* hidden */
	(void)snprintf(name, sizeof(name), "p_ns_%s-%s.log", long_ctr, CID_X);
	link_in(root, name, "x"); /* container name of 64 */
	(void)snprintf(name, sizeof(name), "%s_ns_c-%s.log", long_pod, CID_X);
	link_in(root, name, "x");
	mkdirf(root, "pods/"
		     "kube_system_x_" UID_N); /* too many parts */
	mkdirf(root, "pods/"
		     "ns_pod_" UID_N "x"); /* long UID */
	mkdirf(root, "pods/"
		     "Ns_pod_" UID_N); /* upper case */
	mkdirf(root, "pods/"
		     "ns_.._" UID_N); /* dots */
	mkdirf(root, "pods/"
		     ".ns_pod_" UID_N); /* hidden */
	return root;
}

/* Moves the mtime of <root>/<sub> an hour back: changed long ago, as most of a node's tree. */
static void age(const char *root, const char *sub)
{
	struct timespec t[2];
	char *p = path_join(root, sub);

	assert_non_null(p);
	assert_int_equal(clock_gettime(CLOCK_REALTIME, &t[0]), 0);
	t[0].tv_sec -= 3600;
	t[1] = t[0];
	assert_int_equal(utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW), 0);
	free(p);
}

static void age_tree(const char *root)
{
	age(root, "containers");
	age(root, "pods");
	age(root, "pods/ml_gpu-job-7d9f_" UID);
	age(root, "pods/default_single.app_" UID_S);
	age(root, "pods/kube-system_empty_" UID_N);
}

/* <root>/proc/<pid>/cgroup naming pod @uid and container @cid ("" for none). */
static void proc_put(const char *root, int pid, const char *uid, const char *cid)
{
	char *dir = strdup_printf("%s/proc/%d", root, pid), *text;

	assert_non_null(dir);
	(void)mkdir(dir, 0755);
	text = strdup_printf("0::/kubepods/besteffort/pod%s%s%s\n", uid, *cid ? "/" : "", cid);
	assert_non_null(text);
	put(dir, "cgroup", text);
	free(text);
	free(dir);
}

static struct podmap_cache *cache_of(const char *root)
{
	struct podmap_cache *c = NULL;
	char *proc = path_join(root, "proc");

	assert_non_null(proc);
	assert_int_equal(podmap_cache_new(proc, root, &c), 0);
	free(proc);
	return c;
}

/* One batch of pids 1..n, where <root>/proc holds them. */
static void map(struct podmap_cache *c, struct podmap_query *q, size_t n,
		const struct podmap_limits *lim, struct podmap_stats *st)
{
	memset(q, 0x55, n * sizeof(*q));
	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < n; i++)
		q[i].pid = (uint32_t)i + 1;
	assert_int_equal(podmap_cache_map(c, q, n, lim, st), 0);
}

static void expect_names(const struct podmap_query *q, const char *ns, const char *pod,
			 const char *ctr)
{
	assert_int_equal(q->r, 0);
	assert_int_equal(q->id.kind, PODMAP_POD);
	assert_int_equal(q->names_r, 0);
	assert_string_equal(q->names.namespace_, ns);
	assert_string_equal(q->names.pod, pod);
	assert_string_equal(q->names.container, ctr);
}

static void test_map(void **state)
{
	char *root = make_tree();
	struct podmap_cache *c = cache_of(root);
	struct podmap_query q[9];
	struct podmap_stats st;

	proc_put(root, 1, UID, CID);
	proc_put(root, 2, UID, CID2);	 /* dangling symlink: only the name counts */
	proc_put(root, 3, UID, "");	 /* by pod: two containers, so none named */
	proc_put(root, 4, UID_S, CID_S); /* by pod: one container, named */
	proc_put(root, 5, UID_N, "");
	proc_put(root, 6, UID_9, CID_X); /* hostile entries only: named by nothing */
	proc_put(root, 8, UID, CID);	 /* the same container twice; no /proc/7: gone */
	mkdirf(root, "proc/9");
	put(root, "proc/9/cgroup", "0::/system.slice/ollama.service\n");
	map(c, q, 9, NULL, &st);
	expect_names(&q[0], "ml", "gpu-job-7d9f", "trainer");
	expect_names(&q[1], "ml", "gpu-job-7d9f", "side-car");
	expect_names(&q[2], "ml", "gpu-job-7d9f", "");
	expect_names(&q[3], "default", "single.app", "app");
	expect_names(&q[4], "kube-system", "empty", "");
	assert_int_equal(q[5].r, 0);
	assert_int_equal(q[5].names_r, -ENOENT);
	assert_int_equal(q[6].r, 0);
	assert_int_equal(q[6].id.kind, PODMAP_NO_PROC);
	assert_int_equal(q[6].names_r, -EINVAL);
	expect_names(&q[7], "ml", "gpu-job-7d9f", "trainer");
	assert_int_equal(q[8].id.kind, PODMAP_HOST);
	assert_int_equal(q[8].names_r, -EINVAL);
	for (unsigned i = 0; i < PODMAP_CUT_COUNT; i++)
		assert_int_equal(st.cuts[i], 0);
	/* containers/, pods/, and the directories of the three pods named by UID only */
	assert_int_equal(st.dir_reads, 5);
	podmap_cache_free(c);

	/* No log tree at all; no proc root at all. */
	assert_int_equal(podmap_cache_new(NULL, "/nonexistent-log-root", &c), 0);
	memset(q, 0, sizeof(q[0]));
	q[0].pid = (uint32_t)getpid();
	assert_int_equal(podmap_cache_map(c, q, 1, NULL, &st), 0);
	assert_int_equal(q[0].r, 0);
	podmap_cache_free(c);
	assert_int_equal(podmap_cache_new("/nonexistent-proc", NULL, &c), 0);
	assert_int_equal(podmap_cache_map(c, q, 1, NULL, &st), 0);
	assert_int_equal(q[0].r, 0);
	assert_int_equal(q[0].id.kind, PODMAP_NO_PROC);
	podmap_cache_free(c);
	unit_rm_tree(root);
	free(root);
}

static void test_cache(void **state)
{
	char *root = make_tree();
	struct podmap_cache *c = cache_of(root);
	struct podmap_query q[3];
	struct podmap_stats st;

	age_tree(root);
	proc_put(root, 1, UID, CID);
	proc_put(root, 2, UID, CID2);
	proc_put(root, 3, UID_N, "");
	map(c, q, 3, NULL, &st);
	expect_names(&q[0], "ml", "gpu-job-7d9f", "trainer");
	expect_names(&q[2], "kube-system", "empty", "");
	assert_int_equal(podmap_cache_dir_reads(c), 3);
	/* The same processes again: nothing is listed. */
	map(c, q, 3, NULL, &st);
	expect_names(&q[1], "ml", "gpu-job-7d9f", "side-car");
	expect_names(&q[2], "kube-system", "empty", "");
	assert_int_equal(st.dir_reads, 0);
	assert_int_equal(podmap_cache_dir_reads(c), 3);

	/* A miss lists both directories once, however many processes ask; while they do not
	 * change, it is a miss again without a listing. */
	proc_put(root, 1, UID_9, CID_X);
	proc_put(root, 2, UID_9, CID_X);
	proc_put(root, 3, UID_9, "");
	map(c, q, 3, NULL, &st);
	assert_int_equal(q[0].names_r, -ENOENT);
	assert_int_equal(q[2].names_r, -ENOENT);
	assert_int_equal(st.dir_reads, 2);
	map(c, q, 3, NULL, &st);
	assert_int_equal(q[1].names_r, -ENOENT);
	assert_int_equal(st.dir_reads, 0);
	/* What is kept is what the last batch asked for: one container and one pod. */
	assert_int_equal(podmap_cache_entries(c), 2);

	/* The container appears: its directory changed, so it is listed again. */
	mkdirf(root, "pods/team-a_late_" UID_9);
	mkdirf(root, "pods/team-a_late_" UID_9 "/worker");
	link_in(root, "late_team-a_worker-" CID_X ".log", "x");
	map(c, q, 3, NULL, &st);
	expect_names(&q[0], "team-a", "late", "worker");
	expect_names(&q[2], "team-a", "late", "worker");
	/* containers/, pods/ (for pid 3) and the pod's directory */
	assert_int_equal(st.dir_reads, 3);

	/* A directory that changed within the last second is listed on each miss: an entry
	 * added in the same timestamp tick would not change its mtime again. */
	proc_put(root, 1, UID_L, CID_S);
	map(c, q, 1, NULL, &st);
	assert_int_equal(q[0].names_r, -ENOENT);
	assert_int_equal(st.dir_reads, 2);
	map(c, q, 1, NULL, &st);
	assert_int_equal(q[0].names_r, -ENOENT);
	assert_int_equal(st.dir_reads, 2);
	podmap_cache_free(c);
	unit_rm_tree(root);
	free(root);
}

static void test_cache_new_container_of_known_pod(void **state)
{
	char *root = make_tree();
	struct podmap_cache *c = cache_of(root);
	struct podmap_query q[1];
	struct podmap_stats st;

	age_tree(root);
	proc_put(root, 1, UID_S, "");
	map(c, q, 1, NULL, &st);
	expect_names(&q[0], "default", "single.app", "app");
	/* The pod restarts its container: the new ID must not hide behind the pod's entry. */
	link_in(root, "single.app_default_gpu-" CID_S ".log", "x");
	proc_put(root, 1, UID_S, CID_S);
	map(c, q, 1, NULL, &st);
	expect_names(&q[0], "default", "single.app", "gpu");
	assert_int_equal(st.dir_reads, 1);
	podmap_cache_free(c);
	unit_rm_tree(root);
	free(root);
}

/* Links out of the tree, a FIFO, an oversized pod directory and listing, a past deadline. */
static void test_hostile_tree(void **state)
{
	char *root = make_tree(), *outside = unit_tmpdir_dup("test-podmap"), *p, *l;
	struct podmap_limits lim = { .pod_dir_entries = 16, .dir_entries = 64 };
	struct podmap_cache *c = cache_of(root);
	struct podmap_query q[5];
	struct podmap_stats st;
	char name[128];

	age_tree(root);
	/* A pods/ entry that is a link to a directory out of the tree, whose one subdirectory
	 * would become the container's name. */
	mkdirf(outside, "secret-label");
	l = strdup_printf("%s/pods/evil_pod_" UID_L, root);
	assert_int_equal(symlink(outside, l), 0);
	free(l);
	proc_put(root, 1, UID_L, "");
	/* A pod directory with more entries than the cap. */
	mkdirf(root, "pods/big_pod_" UID_9);
	for (int i = 0; i < 40; i++) {
		(void)snprintf(name, sizeof(name), "pods/big_pod_" UID_9 "/c%d", i);
		mkdirf(root, name);
	}
	age(root, "pods/big_pod_" UID_9);
	proc_put(root, 2, UID_9, "");
	/* A FIFO as a cgroup file, and a cgroup file that is a link to a pod's. */
	mkdirf(root, "proc/3");
	p = strdup_printf("%s/proc/3/cgroup", root);
	assert_int_equal(mkfifo(p, 0600), 0);
	free(p);
	mkdirf(root, "proc/4");
	p = strdup_printf("%s/proc/1/cgroup", root);
	l = strdup_printf("%s/proc/4/cgroup", root);
	assert_int_equal(symlink(p, l), 0);
	free(p);
	free(l);
	proc_put(root, 5, UID_S, "");
	age(root, "pods");
	map(c, q, 5, &lim, &st);
	assert_int_equal(q[0].r, 0);
	assert_int_equal(q[0].names_r, -ENOENT);
	assert_int_equal(q[1].r, 0);
	expect_names(&q[1], "big", "pod", "");
	assert_int_equal(q[2].r, -EINVAL);
	assert_int_equal(q[3].r, -ELOOP);
	expect_names(&q[4], "default", "single.app", "app");
	assert_int_equal(st.cuts[PODMAP_CUT_LINK], 2);
	assert_int_equal(st.cuts[PODMAP_CUT_NOT_REGULAR], 1);
	assert_int_equal(st.cuts[PODMAP_CUT_DIR_ENTRIES], 1);
	assert_int_equal(st.cuts[PODMAP_CUT_TIME], 0);
	/* The oversized directory is not listed again while it does not change. */
	map(c, q, 5, &lim, &st);
	expect_names(&q[1], "big", "pod", "");
	assert_int_equal(st.cuts[PODMAP_CUT_DIR_ENTRIES], 0);

	/* containers/ past its cap: the listing stops, and its misses are not trusted. */
	for (int i = 0; i < 100; i++) {
		(void)snprintf(name, sizeof(name), "p%d_ns_c-%064x.log", i, i);
		link_in(root, name, "x");
	}
	age(root, "containers");
	proc_put(root, 1, UID_9, CID_X);
	map(c, q, 1, &lim, &st);
	assert_int_equal(q[0].names_r, 0); /* by its pod */
	assert_int_equal(st.cuts[PODMAP_CUT_DIR_ENTRIES], 1);
	map(c, q, 1, &lim, &st);
	assert_int_equal(st.cuts[PODMAP_CUT_DIR_ENTRIES], 1);
	/* Only what was asked for is kept, whatever the listings held. */
	assert_true(podmap_cache_entries(c) <= 2);

	/* containers/ itself a link out of the tree, to a valid link for the container. */
	unit_rm_tree(root);
	free(root);
	root = make_tree();
	age_tree(root);
	unit_rm_tree(outside);
	assert_int_equal(mkdir(outside, 0755), 0);
	mkdirf(outside, "containers");
	link_in(outside, "leak_ns_c-" CID_X ".log", "x");
	p = strdup_printf("%s/containers", root);
	l = strdup_printf("%s/containers", outside);
	unit_rm_tree(p);
	assert_int_equal(symlink(l, p), 0);
	free(p);
	free(l);
	podmap_cache_free(c);
	c = cache_of(root);
	proc_put(root, 1, UID_9, CID_X);
	map(c, q, 1, NULL, &st);
	assert_int_equal(q[0].names_r, -ENOENT);
	assert_int_equal(st.cuts[PODMAP_CUT_LINK], 1);

	/* A deadline already past: nothing is read. */
	lim = (struct podmap_limits){ .deadline = now_usec() };
	map(c, q, 1, &lim, &st);
	assert_int_equal(q[0].r, -ETIMEDOUT);
	assert_int_equal(st.cuts[PODMAP_CUT_TIME], 1);
	assert_int_equal(st.dir_reads, 0);
	podmap_cache_free(c);
	unit_rm_tree(root);
	unit_rm_tree(outside);
	free(root);
	free(outside);
}

static void test_start_time(void **state)
{
	/* comm with spaces and ')' in it; starttime is field 22 */
	static const char stat[] =
		"4242 (a) b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 987654321 1000 20 "
		"18446744073709551615\n";
	char *root = unit_tmpdir_dup("podmap-stat"), path[512];
	uint64_t v = 0;
	int fd;
	FILE *f;

	assert_int_equal(podmap_parse_start_time(stat, strlen(stat), &v), 0);
	assert_int_equal(v, 987654321);
	assert_int_equal(podmap_parse_start_time("1 (x) S 1 2", 11, &v), -EBADMSG);
	assert_int_equal(podmap_parse_start_time("no paren", 8, &v), -EBADMSG);
	assert_int_equal(
		podmap_parse_start_time("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x1 2",
					57, &v),
		-EBADMSG);
	assert_int_equal(
		podmap_parse_start_time(
			"1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99999999999999999999999 2",
			78, &v),
		-EBADMSG);

	unit_make_path(root, "/7/stat");
	unit_make_path(root, "/8/stat/");
	(void)snprintf(path, sizeof(path), "%s/7/stat", root);
	f = fopen(path, "w");
	assert_non_null(f);
	(void)fputs(stat, f);
	(void)fclose(f);
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	v = 0;
	assert_int_equal(podmap_read_start_time_at(fd, 7, &v), 0);
	assert_int_equal(v, 987654321);
	assert_int_equal(podmap_read_start_time_at(fd, 9, &v), -ESRCH);
	assert_int_equal(podmap_read_start_time_at(fd, 8, &v), -EINVAL); /* a directory */
	assert_int_equal(podmap_read_start_time_at(fd, 0, &v), -EINVAL);
	(void)close(fd);
	unit_rm_tree(root);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_pods),
		cmocka_unit_test(test_parse_pod_without_container),
		cmocka_unit_test(test_parse_host),
		cmocka_unit_test(test_parse_garbage),
		cmocka_unit_test(test_read_pid),
		cmocka_unit_test(test_map),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_new_container_of_known_pod),
		cmocka_unit_test(test_hostile_tree),
		cmocka_unit_test(test_start_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
