/*
 * podmap: cgroup texts as the kernel writes them for containerd, CRI-O and Docker (cri-dockerd)
 * pods under cgroup v1, v2 and hybrid, with the cgroupfs and systemd drivers, every QoS class, a
 * cgroup namespace, conmon, k3s and kind; host processes and garbage. Then naming against log
 * trees built in a temporary directory (symlinks whose targets are missing, pod directories,
 * hostile names), and the cache's re-reads counted.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podmap.h"
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

static char *mkdtemp_dir(void)
{
	char *d = strdup("/tmp/test-podmap-XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void put(const char *dir, const char *name, const char *content)
{
	char *p = path_join(dir, name);

	assert_non_null(p);
	assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
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

static void rm_rf(const char *dir)
{
	char *cmd = strdup_printf("rm -rf '%s'", dir);

	assert_non_null(cmd);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static void test_read_pid(void **state)
{
	char *root = mkdtemp_dir(), *big;
	struct podmap_id id;

	mkdirf(root, "4242");
	put(root, "4242/cgroup", v2_crio);
	assert_int_equal(podmap_read_pid(root, 4242, &id), 0);
	assert_int_equal(id.kind, PODMAP_POD);
	assert_string_equal(id.container_id, CID);
	assert_string_equal(id.runtime, "cri-o");

	/* Gone: no directory, or a directory without the file. */
	assert_int_equal(podmap_read_pid(root, 4243, &id), 0);
	assert_int_equal(id.kind, PODMAP_NO_PROC);
	mkdirf(root, "4244");
	assert_int_equal(podmap_read_pid(root, 4244, &id), 0);
	assert_int_equal(id.kind, PODMAP_NO_PROC);

	/* Garbage, a FIFO (would block a plain open and read), a directory, a huge file. */
	mkdirf(root, "4245");
	put(root, "4245/cgroup", "not a cgroup file\n");
	assert_int_equal(podmap_read_pid(root, 4245, &id), -EBADMSG);
	mkdirf(root, "4246");
	{
		char *fifo = strdup_printf("%s/4246/cgroup", root);

		assert_int_equal(mkfifo(fifo, 0600), 0);
		free(fifo);
	}
	assert_int_equal(podmap_read_pid(root, 4246, &id), -EINVAL);
	mkdirf(root, "4247");
	mkdirf(root, "4247/cgroup");
	assert_int_equal(podmap_read_pid(root, 4247, &id), -EINVAL);
	mkdirf(root, "4248");
	big = malloc((size_t)100 * 1024 + 1);
	assert_non_null(big);
	for (size_t i = 0; i < (size_t)100 * 1024; i++)
		big[i] = i % 64 == 63 ? '\n' : '/';
	big[(size_t)100 * 1024] = 0;
	put(root, "4248/cgroup", big);
	free(big);
	assert_int_equal(podmap_read_pid(root, 4248, &id), -EFBIG);
	assert_int_equal(podmap_read_pid(root, 0, &id), -EINVAL);
	assert_int_equal(podmap_read_pid(root, -1, &id), -EINVAL);

	/* This process, in the real /proc: it exists, whatever its cgroup. */
	assert_int_equal(podmap_read_pid(NULL, getpid(), &id), 0);
	assert_int_not_equal(id.kind, PODMAP_NO_PROC);
	rm_rf(root);
	free(root);
}

/* A log tree: /containers symlinks (targets missing for some) and /pods directories. */
#define UID_S "11111111-2222-4333-8444-555555555555"
#define UID_N "66666666-7777-4888-9999-aaaaaaaaaaaa"
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
	char *root = mkdtemp_dir();
	char long_ctr[80], long_pod[300], name[512];

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
	return root;
}

static struct podmap_id pod_id(const char *uid, const char *cid)
{
	struct podmap_id id = { .kind = PODMAP_POD, .runtime = "" };

	(void)snprintf(id.pod_uid, sizeof(id.pod_uid), "%s", uid);
	(void)snprintf(id.container_id, sizeof(id.container_id), "%s", cid);
	return id;
}

static void expect_names(const struct podmap_names *n, const char *ns, const char *pod,
			 const char *ctr)
{
	assert_string_equal(n->namespace_, ns);
	assert_string_equal(n->pod, pod);
	assert_string_equal(n->container, ctr);
}

static void test_resolve(void **state)
{
	char *root = make_tree();
	struct podmap_names n;
	struct podmap_id id;

	id = pod_id(UID, CID);
	assert_int_equal(podmap_resolve(root, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "trainer");
	id = pod_id(UID, CID2); /* dangling symlink: only the name counts */
	assert_int_equal(podmap_resolve(root, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "side-car");
	/* By pod: two containers, so none named; one container, named. */
	id = pod_id(UID, "");
	assert_int_equal(podmap_resolve(root, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "");
	id = pod_id(UID_S, CID_S);
	assert_int_equal(podmap_resolve(root, &id, &n), 0);
	expect_names(&n, "default", "single.app", "app");
	id = pod_id(UID_N, "");
	assert_int_equal(podmap_resolve(root, &id, &n), 0);
	expect_names(&n, "kube-system", "empty", "");
	/* Hostile entries name nothing: CID_X only has those, an unknown pod has none. */
	memset(&n, 0x41, sizeof(n));
	id = pod_id("99999999-2222-4333-8444-555555555555", CID_X);
	assert_int_equal(podmap_resolve(root, &id, &n), -ENOENT);
	assert_int_equal(n.namespace_[0], 0x41); /* untouched */
	/* Not a pod; no log tree at all. */
	id = pod_id(UID, CID);
	id.kind = PODMAP_HOST;
	assert_int_equal(podmap_resolve(root, &id, &n), -EINVAL);
	id = pod_id(UID, CID);
	assert_int_equal(podmap_resolve("/nonexistent-log-root", &id, &n), -ENOENT);
	rm_rf(root);
	free(root);
}

static void test_cache(void **state)
{
	char *root = make_tree();
	struct podmap_cache *c = NULL;
	struct podmap_names n;
	struct podmap_id id;

	assert_int_equal(podmap_cache_new(root, &c), 0);
	podmap_cache_begin(c);
	/* The first lookup lists both directories once; later ones hit. */
	id = pod_id(UID, CID);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "trainer");
	assert_int_equal(podmap_cache_dir_reads(c), 2);
	id = pod_id(UID, CID2);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "side-car");
	assert_int_equal(podmap_cache_dir_reads(c), 2);
	/* By pod: its directory is read once, then cached. */
	id = pod_id(UID_N, "");
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "kube-system", "empty", "");
	assert_int_equal(podmap_cache_dir_reads(c), 3);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	assert_int_equal(podmap_cache_dir_reads(c), 3);

	/* A miss re-reads once per batch, however many processes ask. */
	podmap_cache_begin(c);
	id = pod_id("99999999-2222-4333-8444-555555555555", CID_X);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), -ENOENT);
	assert_int_equal(podmap_cache_dir_reads(c), 5);
	for (int i = 0; i < 10; i++)
		assert_int_equal(podmap_cache_resolve(c, &id, &n), -ENOENT);
	assert_int_equal(podmap_cache_dir_reads(c), 5);

	/* The container appears: not seen in this batch, found in the next. */
	mkdirf(root, "pods/"
		     "team-a_late_99999999-2222-4333-8444-555555555555");
	link_in(root, "late_team-a_worker-" CID_X ".log", "x");
	assert_int_equal(podmap_cache_resolve(c, &id, &n), -ENOENT);
	assert_int_equal(podmap_cache_dir_reads(c), 5);
	podmap_cache_begin(c);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "team-a", "late", "worker");
	assert_int_equal(podmap_cache_dir_reads(c), 7);

	/* A batch of hits reads nothing, even with the tree gone. */
	podmap_cache_begin(c);
	rm_rf(root);
	id = pod_id(UID, CID);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "ml", "gpu-job-7d9f", "trainer");
	assert_int_equal(podmap_cache_dir_reads(c), 7);
	/* A miss then re-reads the empty tree: the stale entries go. */
	id = pod_id(UID_S, CID_S);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), -ENOENT);
	assert_int_equal(podmap_cache_dir_reads(c), 9);
	podmap_cache_begin(c);
	id = pod_id(UID, CID);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), -ENOENT);
	id.kind = PODMAP_HOST;
	assert_int_equal(podmap_cache_resolve(c, &id, &n), -EINVAL);
	c = podmap_cache_free(c);
	assert_null(c);
	free(root);
}

static void test_cache_new_container_of_known_pod(void **state)
{
	char *root = make_tree();
	struct podmap_cache *c = NULL;
	struct podmap_names n;
	struct podmap_id id;

	assert_int_equal(podmap_cache_new(root, &c), 0);
	id = pod_id(UID_S, "");
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "default", "single.app", "app");
	assert_int_equal(podmap_cache_dir_reads(c), 3);
	/* The pod restarts its container: the new ID is not in the cache, and the pod entry
	 * must not answer for it before the directories are read again. */
	podmap_cache_begin(c);
	link_in(root, "single.app_default_gpu-" CID_S ".log", "x");
	id = pod_id(UID_S, CID_S);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	expect_names(&n, "default", "single.app", "gpu");
	assert_int_equal(podmap_cache_dir_reads(c), 5);
	assert_int_equal(podmap_cache_resolve(c, &id, &n), 0);
	assert_int_equal(podmap_cache_dir_reads(c), 5);
	podmap_cache_free(c);
	rm_rf(root);
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
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_new_container_of_known_pod),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
