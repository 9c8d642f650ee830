/* Image stores for the doctor's compat layer (doctor-image.h). */
#include "doctor-image.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "doctor-net.h"
#include "grpc.h"
#include "pbwire.h"
#include "ytree.h"

#define BLOB_MAX ((size_t)4 << 20)

#define MT_OCI_INDEX	     "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST	     "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST	     "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST   "application/vnd.docker.distribution.manifest.v2+json"
#define PATH_IMAGES_GET	     "/containerd.services.images.v1.Images/Get"
#define PATH_CONTENT_READ    "/containerd.services.content.v1.Content/Read"
#define CONTAINERD_NS_HEADER "containerd-namespace"

/* --- references --- */

static bool ref_component_ok(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
		    !strchr("._-", s[i]))
			return false;
	return true;
}

int image_ref_normalize(const char *ref, char **ret)
{
	const char *slash, *path, *last, *at, *p;
	bool domain = false, tagged;
	size_t name_end;

	if (!ref || !*ref)
		return -EINVAL;
	for (p = ref; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return -EINVAL;
	at = strchr(ref, '@');
	name_end = at ? (size_t)(at - ref) : strlen(ref);
	if (at && (!startswith(at + 1, "sha256:") || strlen(at + 1) != 7 + 64))
		return -EINVAL;
	slash = memchr(ref, '/', name_end);
	if (slash) {
		size_t n = (size_t)(slash - ref);

		domain = memchr(ref, '.', n) || memchr(ref, ':', n) ||
			 (n == 9 && startswith(ref, "localhost"));
	}
	path = domain ? slash + 1 : ref;
	/* A ':' after the last '/' is a tag (plain loops: gcc's -Wstringop-overread cannot see
	 * that last <= ref + name_end). */
	last = path;
	for (p = path; p < ref + name_end; p++)
		if (*p == '/')
			last = p + 1;
	tagged = at != NULL;
	for (p = last; p < ref + name_end && !tagged; p++)
		tagged = *p == ':';
	/* Each path component: lower case, digits, separators; the tag after ':' in the last. */
	for (p = path; p < ref + name_end;) {
		const char *end = memchr(p, '/', (size_t)(ref + name_end - p));
		const char *colon;
		size_t n;

		if (!end)
			end = ref + name_end;
		colon = end == ref + name_end ? memchr(p, ':', (size_t)(end - p)) : NULL;
		n = (size_t)((colon ? colon : end) - p);
		if (!ref_component_ok(p, n))
			return -EINVAL;
		if (colon && (end - colon < 2 || memchr(colon + 1, ':', (size_t)(end - colon - 1))))
			return -EINVAL;
		p = end + (end < ref + name_end);
		if (end < ref + name_end && p == ref + name_end)
			return -EINVAL;
	}
	*ret = strdup_printf("%s%s%.*s%s%s", domain ? "" : "docker.io/",
			     !domain && !slash ? "library/" : "", (int)name_end, ref,
			     tagged ? "" : ":latest", at ? at : "");
	return *ret ? 0 : -ENOMEM;
}

/* --- JSON (ytree.h) --- */

/* @map's value for @key, or for @alt_key (Docker's capitalised names) when not NULL. */
static const struct ytree_node *get(const struct ytree *t, const struct ytree_node *map,
				    const char *key, const char *alt_key)
{
	const struct ytree_node *n = ytree_get(t, map, key);

	return n || !alt_key ? n : ytree_get(t, map, alt_key);
}

static void copy_str(char *dst, size_t size, const char *src)
{
	(void)snprintf(dst, size, "%s", src ? src : "");
}

static void add_platform(struct image_info *info, const char *os, const char *arch,
			 const char *variant)
{
	struct image_platform *pl;

	if (!arch || !*arch || streq(arch, "unknown"))
		return;
	if (info->n_platforms >= IMAGE_MAX_PLATFORMS)
		return;
	pl = &info->platforms[info->n_platforms++];
	copy_str(pl->os, sizeof(pl->os), os);
	copy_str(pl->arch, sizeof(pl->arch), arch);
	copy_str(pl->variant, sizeof(pl->variant), variant);
}

/* CUDA_VERSION=<v> in the Env list of @config (an image config's "config", Docker's "Config"). */
static void cuda_from_env(const struct ytree *t, const struct ytree_node *config,
			  struct image_info *info)
{
	const struct ytree_node *env = get(t, config, "Env", NULL);

	for (size_t i = 0; env && env->kind == YTREE_SEQ && i < env->n_kids; i++) {
		const char *e = ytree_str(ytree_kid(t, env, i));

		if (e && startswith(e, "CUDA_VERSION=") && e[13])
			copy_str(info->cuda_version, sizeof(info->cuda_version), e + 13);
	}
}

int image_json_platforms(const char *json, size_t len, struct image_info *info, char **ret_config)
{
	const struct ytree_node *root, *n;
	struct ytree t = { 0 };
	struct ytree_error err;
	int r;

	*ret_config = NULL;
	r = ytree_load(&t, json, len, YTREE_JSON, YTREE_NODES_MAX, &err);
	if (r < 0) {
		r = r == -ENOMEM ? -ENOMEM : -EBADMSG;
		goto out;
	}
	r = -EBADMSG;
	root = ytree_root(&t);
	if (!root || root->kind != YTREE_MAP)
		goto out;
	n = get(&t, root, "manifests", NULL);
	if (n && n->kind == YTREE_SEQ) {
		for (size_t i = 0; i < n->n_kids; i++) {
			const struct ytree_node *pl =
				get(&t, ytree_kid(&t, n, i), "platform", NULL);

			add_platform(info, ytree_str(get(&t, pl, "os", NULL)),
				     ytree_str(get(&t, pl, "architecture", NULL)),
				     ytree_str(get(&t, pl, "variant", NULL)));
		}
		r = 0;
		goto out;
	}
	n = get(&t, root, "architecture", "Architecture");
	if (ytree_str(n)) {
		add_platform(info, ytree_str(get(&t, root, "os", "Os")), ytree_str(n),
			     ytree_str(get(&t, root, "variant", "Variant")));
		cuda_from_env(&t, get(&t, root, "config", "Config"), info);
		r = 0;
		goto out;
	}
	n = get(&t, get(&t, root, "config", NULL), "digest", NULL);
	if (ytree_str(n)) {
		*ret_config = strdup(ytree_str(n));
		r = *ret_config ? 0 : -ENOMEM;
	}
out:
	ytree_release(&t);
	return r;
}

/* --- Docker: the Engine API, HTTP/1.1 over its unix socket (doctor-net.c) --- */

int image_docker_lookup(const char *sock, const char *ref, unsigned timeout_ms,
			struct image_info *info, char **reterr)
{
	struct doctor_net_http ans = { 0 };
	struct buf path = { 0 };
	char *config = NULL;
	int r;

	r = buf_printf(&path, "/images/");
	for (const char *p = ref; r >= 0 && *p; p++)
		r = isalnum((unsigned char)*p) || strchr("._-/:@", *p) ?
			    buf_append(&path, p, 1) :
			    buf_printf(&path, "%%%02X", (unsigned char)*p);
	if (r >= 0)
		r = buf_printf(&path, "/json");
	if (r < 0)
		goto out;
	r = doctor_net_http_get_unix(sock, (const char *)path.data, timeout_ms, &ans, reterr);
	if (r == -EBADMSG)
		r = -EPROTO;
	if (r < 0)
		goto out;
	if (ans.status == 404) {
		r = 0;
		goto out;
	}
	if (ans.status != 200) {
		r = set_error(reterr, -EPROTO, "%s: HTTP %u: %.200s", sock, ans.status, ans.body);
		goto out;
	}
	r = image_json_platforms(ans.body, ans.body_len, info, &config);
	if (r < 0 || info->n_platforms == 0) {
		r = set_error(reterr, -EPROTO, "%s: the image inspect JSON names no architecture",
			      sock);
		goto out;
	}
	r = 1;
out:
	free(config);
	doctor_net_http_release(&ans);
	buf_release(&path);
	return r;
}

/* --- containerd: Images/Get and Content/Read --- */

static int pb_put_string(struct buf *b, uint32_t field, const char *s)
{
	uint8_t hdr[16];
	size_t n = 0, len = strlen(s);
	uint64_t v = (uint64_t)field << 3 | PB_LEN;

	for (int i = 0; i < 2; i++) {
		while (v >= 0x80) {
			hdr[n++] = (uint8_t)(v | 0x80);
			v >>= 7;
		}
		hdr[n++] = (uint8_t)v;
		v = len;
	}
	if (buf_append(b, hdr, n) < 0 || buf_append(b, s, len) < 0)
		return -ENOMEM;
	return 0;
}

/* The first length-delimited field @number of a message, or NULL/0. */
static const uint8_t *pb_find(const uint8_t *msg, size_t len, uint32_t number, size_t *ret_len)
{
	struct pb_reader rd;
	struct pb_field f;

	pb_reader_init(&rd, msg, len);
	while (pb_next(&rd, &f) > 0)
		if (f.number == number && f.wire == PB_LEN) {
			*ret_len = f.len;
			return f.data;
		}
	*ret_len = 0;
	return NULL;
}

static int grpc_call(const char *sock, const char *ns, const char *path, const struct buf *req,
		     bool streaming, usec_t deadline, uint8_t **ret, size_t *ret_len, char **reterr)
{
	const char *md[] = { CONTAINERD_NS_HEADER, ns, NULL };
	struct grpc_client_opts o = { .metadata = md,
				      .server_streaming = streaming,
				      .max_recv_msg = BLOB_MAX };
	enum grpc_status st = GRPC_STATUS_OK;
	char *msg = NULL;
	usec_t now = now_usec();
	int r;

	if (now >= deadline)
		return set_error(reterr, -ETIMEDOUT, "%s: no time left", sock);
	o.timeout = deadline - now;
	r = grpc_client_call_sync(sock, path, req->data, req->len, &o, &st, &msg, ret, ret_len);
	if (r < 0) {
		r = set_error(reterr, r, "%s", msg ? msg : strerror(-r));
	} else if (st == GRPC_STATUS_NOT_FOUND) {
		free(*ret);
		*ret = NULL;
		r = 0;
	} else if (st != GRPC_STATUS_OK) {
		free(*ret);
		*ret = NULL;
		r = set_error(reterr, -EPROTO, "%s: %s: %s", path + 1, grpc_status_name((int)st),
			      msg ? msg : "");
	} else {
		r = 1;
	}
	free(msg);
	return r;
}

/* Reads the blob @digest whole (ReadContentResponse: offset = 1, data = 2, concatenated). */
static int read_blob(const char *sock, const char *ns, const char *digest, usec_t deadline,
		     struct buf *blob, char **reterr)
{
	struct buf req = { 0 };
	uint8_t *resp = NULL;
	size_t len = 0;
	struct pb_reader rd;
	struct pb_field f;
	int r;

	r = pb_put_string(&req, 1, digest);
	if (r < 0)
		return r;
	r = grpc_call(sock, ns, PATH_CONTENT_READ, &req, true, deadline, &resp, &len, reterr);
	buf_release(&req);
	if (r == 0)
		return set_error(reterr, -ENOENT, "containerd has no content %s", digest);
	if (r < 0)
		return r;
	pb_reader_init(&rd, resp, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		if (f.number == 1 && f.wire == PB_VARINT && f.varint != blob->len)
			r = -EBADMSG;
		else if (f.number == 2 && f.wire == PB_LEN && buf_append(blob, f.data, f.len) < 0)
			r = -ENOMEM;
		if (r < 0)
			break;
	}
	free(resp);
	if (r < 0)
		return set_error(reterr, r == -ENOMEM ? r : -EPROTO,
				 "containerd: a Content/Read reply for %s we cannot read", digest);
	return 0;
}

int image_containerd_lookup(const char *sock, const char *ns, const char *name, unsigned timeout_ms,
			    struct image_info *info, char **reterr)
{
	usec_t deadline = now_usec() + (usec_t)timeout_ms * USEC_PER_MSEC;
	struct buf req = { 0 }, blob = { 0 };
	const uint8_t *image, *target, *s;
	uint8_t *resp = NULL;
	size_t len = 0, ilen, tlen, slen;
	char *config = NULL;
	int r;

	r = pb_put_string(&req, 1, name);
	if (r < 0)
		return r;
	r = grpc_call(sock, ns, PATH_IMAGES_GET, &req, false, deadline, &resp, &len, reterr);
	if (r <= 0)
		goto out;
	/* GetImageResponse.image = 1; Image.target = 3; Descriptor media_type = 1, digest = 2. */
	image = pb_find(resp, len, 1, &ilen);
	target = image ? pb_find(image, ilen, 3, &tlen) : NULL;
	s = target ? pb_find(target, tlen, 2, &slen) : NULL;
	if (!s || slen == 0 || slen >= sizeof(info->digest)) {
		r = set_error(reterr, -EPROTO, "containerd: image %s has no target digest", name);
		goto out;
	}
	memcpy(info->digest, s, slen);
	s = pb_find(target, tlen, 1, &slen);
	(void)snprintf(info->media_type, sizeof(info->media_type), "%.*s", (int)slen,
		       s ? (const char *)s : "");
	r = read_blob(sock, ns, info->digest, deadline, &blob, reterr);
	if (r < 0)
		goto out;
	r = image_json_platforms((const char *)blob.data, blob.len, info, &config);
	if (r >= 0 && config) {
		char *again = NULL;

		blob.len = 0;
		r = read_blob(sock, ns, config, deadline, &blob, reterr);
		if (r >= 0)
			r = image_json_platforms((const char *)blob.data, blob.len, info, &again);
		free(again);
	}
	if (r < 0 && (!reterr || !*reterr))
		r = set_error(reterr, r,
			      "containerd: the content of %s is not an image index, "
			      "manifest or config we can read",
			      name);
	else if (r >= 0 && info->n_platforms == 0)
		r = set_error(reterr, -EPROTO, "containerd: %s names no platform", name);
	else if (r >= 0)
		r = 1;
out:
	free(config);
	free(resp);
	buf_release(&req);
	buf_release(&blob);
	return r;
}
