/*
 * doctor-compat: --cuda-version parsing, NVIDIA's driver table and the judgement of a driver,
 * the L4T -> CUDA mapping, architecture names; doctor-image: reference normalisation, the
 * platforms of an OCI index, a manifest, a config and Docker's inspect JSON; Docker's HTTP
 * answer read from a socket peer (plain and chunked, 404, an error status, a peer that never
 * answers is bounded by the timeout); and the gRPC client's metadata and server-streaming
 * options against a real grpc_server on its own thread, as image_containerd_lookup() uses them
 * (Images/Get, Content/Read in several messages, NOT_FOUND).
 */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "doctor-compat.h"
#include "doctor-image.h"
#include "grpc.h"
#include "log.h"
#include "loop.h"
#include "unit.h"
#include "util.h"

static void test_cuda_parse(void **state)
{
	static const char *const bad[] = { "",	   "12",    "abc",   "12.x",  "12.4.1",
					   "-1.0", " 12.4", "12.4 ", "12.",   ".4",
					   "0.1",  "12.-1", "+12.4", "1e2.1", "100.0" };
	unsigned maj = 0, min = 0;

	(void)state;
	assert_int_equal(doctor_cuda_parse("12.4", &maj, &min), 0);
	assert_int_equal(maj, 12);
	assert_int_equal(min, 4);
	assert_int_equal(doctor_cuda_parse("10.0", &maj, &min), 0);
	assert_int_equal(maj, 10);
	assert_int_equal(min, 0);
	assert_int_equal(doctor_cuda_parse(NULL, &maj, &min), -EINVAL);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_int_equal(doctor_cuda_parse(bad[i], &maj, &min), -EINVAL);
}

static void test_cuda_table(void **state)
{
	unsigned maj = 0, min = 0;

	(void)state;
	assert_string_equal(doctor_cuda_min_driver(10, 0), "410.48");
	assert_string_equal(doctor_cuda_min_driver(12, 4), "550.54.14");
	assert_string_equal(doctor_cuda_min_driver(13, 0), "580.65.06");
	assert_null(doctor_cuda_min_driver(12, 7)); /* there was no 12.7 */
	assert_null(doctor_cuda_min_driver(9, 2));
	assert_string_equal(doctor_cuda_major_floor(11), "450.80.02");
	assert_string_equal(doctor_cuda_major_floor(12), "525.60.13");
	assert_null(doctor_cuda_major_floor(10));

	assert_true(doctor_driver_cmp("525.60.13", "525.105.17") < 0);
	assert_true(doctor_driver_cmp("550.54.15", "550.54.14") > 0);
	assert_int_equal(doctor_driver_cmp("570.26", "570.26.0"), 0);
	assert_true(doctor_driver_cmp("garbage", "410.48") < 0);

	assert_int_equal(doctor_cuda_for_driver("550.54.15", &maj, &min), 0);
	assert_int_equal(maj, 12);
	assert_int_equal(min, 4);
	assert_int_equal(doctor_cuda_for_driver("535.183.01", &maj, &min), 0);
	assert_int_equal(maj, 12);
	assert_int_equal(min, 2);
	assert_int_equal(doctor_cuda_for_driver("470.42.01", &maj, &min), 0);
	assert_int_equal(maj, 11);
	assert_int_equal(min, 4);
	assert_int_equal(doctor_cuda_for_driver("390.12", &maj, &min), -ENOENT);
	assert_int_equal(doctor_cuda_for_driver("x", &maj, &min), -EINVAL);
}

static void test_cuda_judge(void **state)
{
	(void)state;
	/* Driver 550.54.15 reports CUDA 12.4 (12040). */
	assert_int_equal(doctor_cuda_judge(12, 4, 12, 4, "550.54.15"), DOCTOR_CUDA_NATIVE);
	assert_int_equal(doctor_cuda_judge(11, 8, 12, 4, "550.54.15"), DOCTOR_CUDA_NATIVE);
	assert_int_equal(doctor_cuda_judge(12, 8, 12, 4, "550.54.15"), DOCTOR_CUDA_MINOR);
	assert_int_equal(doctor_cuda_judge(13, 0, 12, 4, "550.54.15"), DOCTOR_CUDA_TOO_NEW);
	/* 10.x had no minor version compatibility. */
	assert_int_equal(doctor_cuda_judge(10, 2, 10, 1, "418.39"), DOCTOR_CUDA_TOO_NEW);
	/* A driver under the major's floor (450.36 reported 11.0 before 450.80.02). */
	assert_int_equal(doctor_cuda_judge(11, 4, 11, 0, "450.51.05"), DOCTOR_CUDA_BELOW_FLOOR);
	assert_int_equal(doctor_cuda_judge(11, 4, 11, 0, "450.80.02"), DOCTOR_CUDA_MINOR);
	assert_int_equal(doctor_cuda_judge(11, 4, 11, 0, NULL), DOCTOR_CUDA_MINOR);
}

static void test_l4t(void **state)
{
	unsigned maj = 0, min = 0, cmin = 0;

	(void)state;
	assert_int_equal(doctor_l4t_cuda("35.4.1", &maj, &min, &cmin), 0);
	assert_int_equal(maj, 11);
	assert_int_equal(min, 4);
	assert_int_equal(cmin, 8);
	assert_int_equal(doctor_l4t_cuda("36.2.0", &maj, &min, &cmin), 0);
	assert_int_equal(maj, 12);
	assert_int_equal(min, 2);
	assert_int_equal(cmin, UINT_MAX);
	assert_int_equal(doctor_l4t_cuda("36.4.3", &maj, &min, &cmin), 0);
	assert_int_equal(min, 6);
	assert_int_equal(doctor_l4t_cuda("38.2.0", &maj, &min, &cmin), 0);
	assert_int_equal(maj, 13);
	assert_int_equal(min, 0);
	assert_int_equal(doctor_l4t_cuda("32.7.4", &maj, &min, &cmin), 0);
	assert_int_equal(maj, 10);
	assert_int_equal(cmin, 2);
	assert_int_equal(doctor_l4t_cuda("28.1", &maj, &min, &cmin), -ENOENT);
	assert_int_equal(doctor_l4t_cuda("", &maj, &min, &cmin), -EINVAL);
	assert_int_equal(doctor_l4t_cuda("release 36", &maj, &min, &cmin), -EINVAL);
	/* gpu_board.l4t: digits and dots only; a major alone is its .0 */
	assert_int_equal(doctor_l4t_cuda("R36 (release), REVISION: 4.3", &maj, &min, &cmin),
			 -EINVAL);
	assert_int_equal(doctor_l4t_cuda("36x", &maj, &min, &cmin), -EINVAL);
	assert_int_equal(doctor_l4t_cuda("39", &maj, &min, &cmin), 0);
	assert_int_equal(min, 2);
}

static void test_l4t_text(void **state)
{
	struct gpu_board b = { .tegra = true, .l4t = "36.4.3", .l4t_major = 36 };
	char buf[64];

	(void)state;
	doctor_l4t_text(&b, buf, sizeof(buf));
	assert_string_equal(buf, "R36 (release), REVISION: 4.3");
	b = (struct gpu_board){ .tegra = true, .l4t = "32", .l4t_major = 32 };
	doctor_l4t_text(&b, buf, sizeof(buf));
	assert_string_equal(buf, "R32 (release), REVISION: 0");
	b = (struct gpu_board){ .tegra = true };
	doctor_l4t_text(&b, buf, sizeof(buf));
	assert_string_equal(buf, "unknown");
}

static void test_arch(void **state)
{
	(void)state;
	assert_string_equal(doctor_arch_name("x86_64"), "amd64");
	assert_string_equal(doctor_arch_name("aarch64"), "arm64");
	assert_string_equal(doctor_arch_name("armv7l"), "arm");
	assert_string_equal(doctor_arch_name("mips"), "mips");
}

static void test_ref_normalize(void **state)
{
	static const char *const cases[][2] = {
		{ "nginx", "docker.io/library/nginx:latest" },
		{ "nginx:1.27", "docker.io/library/nginx:1.27" },
		{ "library/nginx", "docker.io/library/nginx:latest" },
		{ "user/app:v1", "docker.io/user/app:v1" },
		{ "docker.io/library/nginx:latest", "docker.io/library/nginx:latest" },
		{ "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
		  "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04" },
		{ "localhost:5000/app", "localhost:5000/app:latest" },
		{ "localhost/app", "localhost/app:latest" },
		{ "ghcr.io/a/b/c", "ghcr.io/a/b/c:latest" },
		{ "app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		  "docker.io/library/app@sha256:"
		  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" },
	};
	static const char *const bad[] = { "",	     "NGINX", "a b",	   "nginx:",
					   "a//b",   "a/",    "nginx:1:2", "app@sha256:12",
					   "/nginx", "x\ty",  "app@md5:0" };
	char *s = NULL;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		assert_int_equal(image_ref_normalize(cases[i][0], &s), 0);
		assert_string_equal(s, cases[i][1]);
		s = mfree(s);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		if (image_ref_normalize(bad[i], &s) != -EINVAL)
			fail_msg("'%s' accepted as '%s'", bad[i], s);
	}
}

static void test_json_platforms(void **state)
{
	static const char index[] =
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"sha256:aa\",\"size\":1,\"platform\":{\"architecture\":\"amd64\","
		"\"os\":\"linux\"}},{\"digest\":\"sha256:bb\",\"platform\":{\"architecture\":"
		"\"arm64\",\"os\":\"linux\",\"variant\":\"v8\"}},{\"digest\":\"sha256:cc\","
		"\"platform\":{\"architecture\":\"unknown\",\"os\":\"unknown\"}}]}";
	static const char manifest[] =
		"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/vnd.oci.image.config."
		"v1+json\",\"digest\":\"sha256:cfg\",\"size\":10},\"layers\":[{\"digest\":"
		"\"sha256:l\"}]}";
	static const char config[] = "{\"architecture\":\"arm64\",\"os\":\"linux\",\"rootfs\":{}}";
	static const char inspect[] =
		"{\"Id\":\"sha256:x\",\"RepoTags\":[\"a:b\"],\"Architecture\":"
		"\"amd64\",\"Os\":\"linux\",\"Size\":12,\"Config\":{}}";
	struct image_info info = { 0 };
	char *cfg = NULL;

	(void)state;
	assert_int_equal(image_json_platforms(index, strlen(index), &info, &cfg), 0);
	assert_null(cfg);
	assert_int_equal(info.n_platforms, 2); /* the "unknown" attestation entry left out */
	assert_string_equal(info.platforms[0].arch, "amd64");
	assert_string_equal(info.platforms[1].arch, "arm64");
	assert_string_equal(info.platforms[1].variant, "v8");

	memset(&info, 0, sizeof(info));
	assert_int_equal(image_json_platforms(manifest, strlen(manifest), &info, &cfg), 0);
	assert_string_equal(cfg, "sha256:cfg");
	assert_int_equal(info.n_platforms, 0);
	cfg = mfree(cfg);

	assert_int_equal(image_json_platforms(config, strlen(config), &info, &cfg), 0);
	assert_int_equal(info.n_platforms, 1);
	assert_string_equal(info.platforms[0].arch, "arm64");
	assert_string_equal(info.platforms[0].os, "linux");

	memset(&info, 0, sizeof(info));
	assert_int_equal(image_json_platforms(inspect, strlen(inspect), &info, &cfg), 0);
	assert_int_equal(info.n_platforms, 1);
	assert_string_equal(info.platforms[0].arch, "amd64");

	assert_string_equal(info.cuda_version, "");

	/* NVIDIA's CUDA images: CUDA_VERSION in the config's Env (OCI) or Config.Env (Docker). */
	static const char cuda_config[] =
		"{\"architecture\":\"arm64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\","
		"\"CUDA_VERSION=12.2.0\",\"NVIDIA_REQUIRE_CUDA=cuda>=12.2\"]}}";
	static const char cuda_inspect[] =
		"{\"Architecture\":\"amd64\",\"Os\":\"linux\",\"Config\":{\"Env\":"
		"[\"CUDA_VERSION=10.2.460\"]}}";
	static const char odd_env[] = "{\"architecture\":\"arm64\",\"config\":{\"Env\":"
				      "[1,{\"a\":2},\"CUDA_VERSION=\",\"XCUDA_VERSION=9\"]}}";

	memset(&info, 0, sizeof(info));
	assert_int_equal(image_json_platforms(cuda_config, strlen(cuda_config), &info, &cfg), 0);
	assert_string_equal(info.cuda_version, "12.2.0");
	memset(&info, 0, sizeof(info));
	assert_int_equal(image_json_platforms(cuda_inspect, strlen(cuda_inspect), &info, &cfg), 0);
	assert_string_equal(info.cuda_version, "10.2.460");
	memset(&info, 0, sizeof(info));
	assert_int_equal(image_json_platforms(odd_env, strlen(odd_env), &info, &cfg), 0);
	assert_string_equal(info.cuda_version, "");

	assert_int_equal(image_json_platforms("{\"a\":1}", 7, &info, &cfg), -EBADMSG);
	assert_int_equal(image_json_platforms("[1,2]", 5, &info, &cfg), -EBADMSG);
	assert_int_equal(image_json_platforms("{\"a\":", 5, &info, &cfg), -EBADMSG);
	assert_int_equal(image_json_platforms("", 0, &info, &cfg), -EBADMSG);
	assert_null(cfg);
}

/* --- a socket peer on its own thread --- */

struct peer {
	char path[108];
	int lfd;
	const char *answer; /* NULL: accept, read, never answer until the client is gone */
	bool no_accept;
	char request[1024];
	pthread_t thread;
};

static void *peer_main(void *userdata)
{
	struct peer *p = userdata;
	size_t len = 0;
	char c;
	int fd;

	fd = accept(p->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	while (len + 1 < sizeof(p->request) && read(fd, &p->request[len], 1) == 1) {
		len++;
		if (len >= 4 && memcmp(&p->request[len - 4], "\r\n\r\n", 4) == 0)
			break;
	}
	p->request[len] = 0;
	if (p->answer)
		(void)!write(fd, p->answer, strlen(p->answer));
	else
		while (read(fd, &c, 1) > 0) /* until the client gives up */
			;
	close(fd);
	return NULL;
}

static void peer_start(struct peer *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	(void)snprintf(p->path, sizeof(p->path), "/tmp/test-doctor-compat-%d.sock", (int)getpid());
	(void)unlink(p->path);
	memcpy(sa.sun_path, p->path, strlen(p->path) + 1);
	p->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(p->lfd >= 0);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(p->lfd, 4), 0);
	if (!p->no_accept)
		assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static void peer_stop(struct peer *p)
{
	if (!p->no_accept)
		pthread_join(p->thread, NULL);
	close(p->lfd);
	(void)unlink(p->path);
}

static int docker_answer(const char *answer, bool no_accept, unsigned timeout_ms,
			 struct image_info *info, char **err, char *request, size_t size)
{
	struct peer p = { .answer = answer, .no_accept = no_accept };
	int r;

	peer_start(&p);
	r = image_docker_lookup(p.path, "my app:1", timeout_ms, info, err);
	peer_stop(&p);
	if (request)
		(void)snprintf(request, size, "%s", p.request);
	return r;
}

static void test_docker_http(void **state)
{
	static const char plain[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				    "Content-Length: 40\r\n\r\n"
				    "{\"Architecture\":\"arm64\",\"Os\":\"linux\"}\n";
	static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				      "10\r\n{\"Architecture\":\r\n"
				      "15\r\n\"amd64\",\"Os\":\"linux\"}\r\n0\r\n\r\n";
	static const char notfound[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 30\r\n\r\n"
				       "{\"message\":\"No such image\"}\n\n";
	static const char broken[] = "HTTP/1.1 500 Internal Server Error\r\n\r\noops";
	struct image_info info = { 0 };
	char *err = NULL, req[1024];
	usec_t t0;

	(void)state;
	assert_int_equal(docker_answer(plain, false, 2000, &info, &err, req, sizeof(req)), 1);
	assert_true(startswith(req, "GET /images/my%20app:1/json HTTP/1.1\r\n"));
	assert_int_equal(info.n_platforms, 1);
	assert_string_equal(info.platforms[0].arch, "arm64");

	memset(&info, 0, sizeof(info));
	assert_int_equal(docker_answer(chunked, false, 2000, &info, &err, NULL, 0), 1);
	assert_string_equal(info.platforms[0].arch, "amd64");

	assert_int_equal(docker_answer(notfound, false, 2000, &info, &err, NULL, 0), 0);
	assert_int_equal(docker_answer(broken, false, 2000, &info, &err, NULL, 0), -EPROTO);
	assert_non_null(strstr(err, "HTTP 500"));
	err = mfree(err);

	/* A peer that takes the connection and never answers, or never accepts: bounded. */
	t0 = now_usec();
	assert_int_equal(docker_answer(NULL, false, 200, &info, &err, NULL, 0), -ETIMEDOUT);
	err = mfree(err);
	assert_int_equal(docker_answer(NULL, true, 200, &info, &err, NULL, 0), -ETIMEDOUT);
	err = mfree(err);
	assert_true(now_usec() - t0 < 3 * USEC_PER_SEC);

	assert_int_equal(image_docker_lookup("/nonexistent/docker.sock", "a", 200, &info, &err),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/docker.sock"));
	free(err);
}

/* --- a containerd stand-in: Images/Get and Content/Read on a real grpc_server --- */

struct fake_cd {
	struct loop *loop;
	struct grpc_server *srv;
	struct loop_wake *stop;
	pthread_t thread;
	char ns_seen[64];
	char path[108];
};

static const char cd_manifest[] =
	"{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:cfg\",\"size\":3},\"layers\":[]}";
static const char cd_config[] = "{\"architecture\":\"arm64\",\"os\":\"linux\"}";

static void put_str(struct buf *b, uint8_t tag, const char *s, size_t len)
{
	uint8_t hdr[2] = { tag, (uint8_t)len };

	assert_true(len < 128);
	assert_int_equal(buf_append(b, hdr, 2), 0);
	assert_int_equal(buf_append(b, s, len), 0);
}

static void cd_get(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct fake_cd *f = userdata;
	const char *ns = grpc_call_header(call, "containerd-namespace");
	struct buf desc = { 0 }, image = { 0 }, resp = { 0 };

	(void)snprintf(f->ns_seen, sizeof(f->ns_seen), "%s", ns ? ns : "");
	if (len < 2 || (size_t)req[1] + 2 != len ||
	    memcmp(req + 2, "docker.io/library/app:1", strlen("docker.io/library/app:1")) != 0) {
		(void)grpc_call_finish(call, GRPC_STATUS_NOT_FOUND, "image not found");
		return;
	}
	put_str(&desc, 0x0a, "application/vnd.oci.image.manifest.v1+json",
		strlen("application/vnd.oci.image.manifest.v1+json"));
	put_str(&desc, 0x12, "sha256:man", 10);
	put_str(&image, 0x0a, "docker.io/library/app:1", strlen("docker.io/library/app:1"));
	put_str(&image, 0x1a, (const char *)desc.data, desc.len);
	put_str(&resp, 0x0a, (const char *)image.data, image.len);
	(void)grpc_call_send(call, resp.data, resp.len);
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	buf_release(&desc);
	buf_release(&image);
	buf_release(&resp);
}

/* Sends the blob in 16-byte messages (offset = 1, data = 2), as containerd chunks it. */
static void cd_read(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	const char *blob = len > 2 && memcmp(req + 2, "sha256:man", 10) == 0 ? cd_manifest :
			   len > 2 && memcmp(req + 2, "sha256:cfg", 10) == 0 ? cd_config :
									       NULL;

	(void)userdata;
	if (!blob) {
		(void)grpc_call_finish(call, GRPC_STATUS_NOT_FOUND, "content not found");
		return;
	}
	for (size_t off = 0; off < strlen(blob); off += 16) {
		struct buf m = { 0 };
		size_t n = MIN(strlen(blob) - off, 16);
		uint8_t o[2] = { 0x08, (uint8_t)off };

		assert_true(off < 128);
		if (off)
			assert_int_equal(buf_append(&m, o, 2), 0);
		put_str(&m, 0x12, blob + off, n);
		(void)grpc_call_send(call, m.data, m.len);
		buf_release(&m);
	}
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static const struct grpc_method cd_methods[] = {
	{ "/containerd.services.images.v1.Images/Get", false, cd_get },
	{ "/containerd.services.content.v1.Content/Read", true, cd_read },
};

static void cd_on_stop(struct loop_wake *w, void *userdata)
{
	(void)w;
	loop_exit(userdata, 0);
}

static void *cd_main(void *userdata)
{
	struct fake_cd *f = userdata;

	(void)loop_run(f->loop);
	return NULL;
}

static void test_containerd(void **state)
{
	struct fake_cd f = { 0 };
	struct image_info info = { 0 };
	char *err = NULL;

	(void)state;
	(void)snprintf(f.path, sizeof(f.path), "/tmp/test-doctor-compat-cd-%d.sock", (int)getpid());
	assert_int_equal(loop_new(&f.loop), 0);
	assert_int_equal(
		grpc_server_new(f.loop, cd_methods, ELEMENTSOF(cd_methods), NULL, &f, &f.srv), 0);
	assert_int_equal(grpc_server_listen(f.srv, f.path), 0);
	assert_int_equal(loop_wake_new(f.loop, cd_on_stop, f.loop, &f.stop), 0);
	assert_int_equal(pthread_create(&f.thread, NULL, cd_main, &f), 0);

	assert_int_equal(image_containerd_lookup(f.path, "k8s.io", "docker.io/library/app:1", 2000,
						 &info, &err),
			 1);
	assert_string_equal(f.ns_seen, "k8s.io");
	assert_string_equal(info.digest, "sha256:man");
	assert_string_equal(info.media_type, "application/vnd.oci.image.manifest.v1+json");
	assert_int_equal(info.n_platforms, 1);
	assert_string_equal(info.platforms[0].arch, "arm64");

	memset(&info, 0, sizeof(info));
	assert_int_equal(image_containerd_lookup(f.path, "k8s.io", "docker.io/library/none:1", 2000,
						 &info, &err),
			 0);
	assert_int_equal(image_containerd_lookup("/nonexistent/containerd.sock", "k8s.io",
						 "docker.io/library/app:1", 200, &info, &err),
			 -ENOENT);
	assert_non_null(err);
	free(err);

	loop_wake_signal(f.stop);
	pthread_join(f.thread, NULL);
	f.srv = grpc_server_free(f.srv);
	f.stop = loop_wake_free(f.stop);
	f.loop = loop_free(f.loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_parse),    cmocka_unit_test(test_cuda_table),
		cmocka_unit_test(test_cuda_judge),    cmocka_unit_test(test_l4t),
		cmocka_unit_test(test_l4t_text),      cmocka_unit_test(test_arch),
		cmocka_unit_test(test_ref_normalize), cmocka_unit_test(test_json_platforms),
		cmocka_unit_test(test_docker_http),   cmocka_unit_test(test_containerd),
	};

	log_max_level = LOG_LEVEL_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
