/*
 * libFuzzer target for podmap_parse_cgroup(): the bytes as the text of /proc/<pid>/cgroup (as
 * read: not NUL-terminated). Findings, besides crashes and reads past the end: a pod UID that
 * is not a dashed UUID or 32 hex digits, a container ID that is not 64 hex digits, a runtime
 * outside the four names, a container without a pod, a result on -EBADMSG, -EBADMSG for text
 * that has a "<digits>:<controllers>:/<path>" line (or the reverse), and an answer that
 * changes when a line that names no pod is added after it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF", s[i]) || !s[i])
			return false;
	return true;
}

static void check_id(const struct podmap_id *id)
{
	size_t u = strnlen(id->pod_uid, sizeof(id->pod_uid));
	size_t c = strnlen(id->container_id, sizeof(id->container_id));

	if (u == sizeof(id->pod_uid) || c == sizeof(id->container_id))
		abort(); /* not terminated */
	if (u == 36) {
		for (size_t i = 0; i < 36; i++)
			if (i == 8 || i == 13 || i == 18 || i == 23 ? id->pod_uid[i] != '-' :
								      !hex(id->pod_uid + i, 1))
				abort();
	} else if (u != 32 ? u != 0 : !hex(id->pod_uid, 32)) {
		abort();
	}
	if (c != 0 && (c != 64 || !hex(id->container_id, 64)))
		abort();
	if (!id->runtime || !(streq(id->runtime, "") || streq(id->runtime, "containerd") ||
			      streq(id->runtime, "cri-o") || streq(id->runtime, "docker")))
		abort();
	if (id->kind == PODMAP_POD ? u == 0 : id->kind != PODMAP_HOST || u || c)
		abort();
}

/* Whether some line has the "<digits>:<anything>:/<path>" form, with no NUL in it. */
static bool has_cgroup_line(const char *s, size_t n)
{
	for (size_t pos = 0; pos < n;) {
		const char *l = s + pos, *nl = memchr(l, '\n', n - pos), *c1, *c2;
		size_t ll = nl ? (size_t)(nl - l) : n - pos, d = 0;

		pos += ll + 1;
		if (ll && l[ll - 1] == '\r')
			ll--;
		while (d < ll && l[d] >= '0' && l[d] <= '9')
			d++;
		c1 = d && d < ll && l[d] == ':' ? l + d : NULL;
		c2 = c1 ? memchr(c1 + 1, ':', ll - d - 1) : NULL;
		if (c2 && c2 + 1 < l + ll && c2[1] == '/' && !memchr(l, 0, ll))
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char host[] = "\n0::/system.slice/sshd.service\n";
	struct podmap_id id, id2;
	char *more;
	int r;

	memset(&id, 0xa5, sizeof(id));
	r = podmap_parse_cgroup((const char *)data, size, &id);
	if (r != 0 && r != -EBADMSG)
		abort();
	if ((r == 0) != has_cgroup_line((const char *)data, size))
		abort();
	if (r < 0) {
		for (size_t i = 0; i < sizeof(id); i++)
			if (((const unsigned char *)&id)[i] != 0xa5)
				abort(); /* untouched on failure */
		return 0;
	}
	check_id(&id);

	/* A host line after it changes nothing (the earlier pod line, if any, still wins). */
	more = malloc(size + sizeof(host));
	if (!more)
		abort();
	memcpy(more, data, size);
	memcpy(more + size, host, sizeof(host) - 1);
	if (podmap_parse_cgroup(more, size + sizeof(host) - 1, &id2) != 0 || id2.kind != id.kind ||
	    !streq(id2.pod_uid, id.pod_uid) || !streq(id2.container_id, id.container_id) ||
	    !streq(id2.runtime, id.runtime))
		abort();
	free(more);
	return 0;
}
