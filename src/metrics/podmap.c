/*
 * podmap.c: the pure half of podmap.h: cgroup text and the kubelet's log names. Every read of the
 * host's files is podmap-read.c's.
 */
#include "podmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define CID_LEN 64

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	return true;
}

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static bool is_alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/*
 * A pod UID as the kubelet writes it: a dashed UUID, or 32 hex digits (static pods). @sep is the
 * separator expected at the dash positions ('_' in systemd slice names). Copies the dashed form
 * into @out (40 bytes).
 */
static bool uid_parse(const char *s, size_t n, char sep, char *out)
{
	if (n == 32 && is_hex(s, n)) {
		memcpy(out, s, n);
		out[n] = 0;
		return true;
	}
	if (n != 36)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != sep : !is_hex(s + i, 1))
			return false;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = s[i];
		if (s[i] == sep)
			out[i] = '-';
	}
	out[n] = 0;
	return true;
}

/* RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends. */
static bool dns_label_valid(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* RFC 1123 subdomain: at most 253 bytes of labels joined by '.'. */
static bool dns_subdomain_valid(const char *s, size_t n)
{
	size_t start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		if (!dns_label_valid(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *p, size_t *rest)
{
	size_t pl = strlen(p);

	if (n < pl || memcmp(s, p, pl) != 0)
		return false;
	*rest = pl;
	return true;
}

static bool has_suffix(const char *s, size_t n, const char *sfx)
{
	size_t sl = strlen(sfx);

	return n >= sl && memcmp(s + n - sl, sfx, sl) == 0;
}

static bool mem_contains(const char *s, size_t n, const char *needle)
{
	size_t nl = strlen(needle);

	for (size_t i = 0; i + nl <= n; i++)
		if (memcmp(s + i, needle, nl) == 0)
			return true;
	return false;
}

/* A pod component: "pod<uid>" (cgroupfs) or "...kubepods...-pod<uid_>.slice" (systemd). */
static bool pod_component(const char *c, size_t n, bool after_kubepods, char *uid)
{
	size_t off;

	if (after_kubepods && has_prefix(c, n, "pod", &off) &&
	    uid_parse(c + off, n - off, '-', uid))
		return true;
	if (!has_suffix(c, n, ".slice") || !mem_contains(c, n, "kubepods"))
		return false;
	n -= strlen(".slice");
	for (size_t i = n; i-- > 0;)
		if (i + 4 <= n && memcmp(c + i, "-pod", 4) == 0)
			return uid_parse(c + i + 4, n - i - 4, '_', uid);
	return false;
}

/* The component after the pod's: a container scope or ID. Returns false when it names none. */
static bool container_component(const char *c, size_t n, struct podmap_id *id)
{
	static const struct {
		const char *prefix, *runtime;
		bool conmon;
	} forms[] = {
		{ "cri-containerd-", "containerd", false },
		{ "crio-conmon-", "cri-o", true },
		{ "crio-", "cri-o", false },
		{ "docker-", "docker", false },
	};
	bool scope = has_suffix(c, n, ".scope");
	size_t off;

	if (scope)
		n -= strlen(".scope");
	if (!scope && n == CID_LEN && is_hex(c, n)) {
		memcpy(id->container_id, c, n);
		id->container_id[n] = 0;
		id->runtime = "";
		return true;
	}
	for (size_t i = 0; i < ELEMENTSOF(forms); i++) {
		if (!has_prefix(c, n, forms[i].prefix, &off))
			continue;
		if (n - off != CID_LEN || !is_hex(c + off, CID_LEN))
			return false;
		/* Without .scope only CRI-O's cgroupfs form has a prefix. */
		if (!scope && strcmp(forms[i].runtime, "cri-o") != 0)
			return false;
		id->runtime = forms[i].runtime;
		if (forms[i].conmon)
			return false; /* the pod's monitor, not a container */
		memcpy(id->container_id, c + off, CID_LEN);
		id->container_id[CID_LEN] = 0;
		return true;
	}
	return false;
}

/* 2: pod and container, 1: pod only, 0: no pod. */
static int parse_path(const char *p, size_t n, struct podmap_id *id)
{
	bool kubepods = false;
	size_t i = 0;

	memset(id, 0, sizeof(*id));
	id->kind = PODMAP_HOST;
	id->runtime = "";
	while (i < n) {
		size_t start, len;

		while (i < n && p[i] == '/')
			i++;
		start = i;
		while (i < n && p[i] != '/')
			i++;
		len = i - start;
		if (len == 0)
			break;
		if (pod_component(p + start, len, kubepods, id->pod_uid)) {
			id->kind = PODMAP_POD;
			while (i < n && p[i] == '/')
				i++;
			start = i;
			while (i < n && p[i] != '/')
				i++;
			return i > start && container_component(p + start, i - start, id) ? 2 : 1;
		}
		if (mem_contains(p + start, len, "kubepods"))
			kubepods = true;
	}
	return 0;
}

int podmap_parse_cgroup(const char *text, size_t len, struct podmap_id *ret)
{
	struct podmap_id best = { .kind = PODMAP_HOST, .runtime = "" }, cur;
	int best_rank = -1;
	size_t pos = 0;

	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos), *c1, *c2;
		size_t ll = nl ? (size_t)(nl - line) : len - pos;
		int rank;

		pos += ll + 1;
		if (ll > 0 && line[ll - 1] == '\r')
			ll--;
		c1 = memchr(line, ':', ll);
		if (!c1 || !all_digits(line, (size_t)(c1 - line)))
			continue;
		c2 = memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line));
		if (!c2 || c2 + 1 >= line + ll || c2[1] != '/')
			continue;
		if (memchr(line, 0, ll))
			continue;
		rank = parse_path(c2 + 1, ll - (size_t)(c2 + 1 - line), &cur);
		if (rank > best_rank) {
			best = cur;
			best_rank = rank;
		}
	}
	if (best_rank < 0)
		return -EBADMSG;
	*ret = best;
	return 0;
}

static void copy_part(char *dst, const char *s, size_t n)
{
	memcpy(dst, s, n);
	dst[n] = 0;
}

/* "<pod>_<namespace>_<container>-<cid>.log" */
bool podmap_parse_container_log(const char *name, char *ret_cid, struct podmap_names *ret)
{
	size_t n = strlen(name);
	const char *u1, *u2, *dash;

	if (!has_suffix(name, n, ".log"))
		return false;
	n -= strlen(".log");
	if (n < CID_LEN + 1 || name[n - CID_LEN - 1] != '-' || !is_hex(name + n - CID_LEN, CID_LEN))
		return false;
	dash = name + n - CID_LEN - 1;
	u1 = memchr(name, '_', (size_t)(dash - name));
	if (!u1)
		return false;
	u2 = memchr(u1 + 1, '_', (size_t)(dash - u1 - 1));
	if (!u2 || memchr(u2 + 1, '_', (size_t)(dash - u2 - 1)))
		return false;
	if (!dns_subdomain_valid(name, (size_t)(u1 - name)) ||
	    !dns_label_valid(u1 + 1, (size_t)(u2 - u1 - 1)) ||
	    !dns_label_valid(u2 + 1, (size_t)(dash - u2 - 1)))
		return false;
	copy_part(ret->pod, name, (size_t)(u1 - name));
	copy_part(ret->namespace_, u1 + 1, (size_t)(u2 - u1 - 1));
	copy_part(ret->container, u2 + 1, (size_t)(dash - u2 - 1));
	copy_part(ret_cid, dash + 1, CID_LEN);
	return true;
}

/* "<namespace>_<pod>_<uid>" */
bool podmap_parse_pod_dir(const char *name, char *ret_uid, struct podmap_names *ret)
{
	size_t n = strlen(name);
	const char *u1 = memchr(name, '_', n), *u2;

	if (!u1)
		return false;
	u2 = memchr(u1 + 1, '_', n - (size_t)(u1 + 1 - name));
	if (!u2 || memchr(u2 + 1, '_', n - (size_t)(u2 + 1 - name)))
		return false;
	if (!dns_label_valid(name, (size_t)(u1 - name)) ||
	    !dns_subdomain_valid(u1 + 1, (size_t)(u2 - u1 - 1)) ||
	    !uid_parse(u2 + 1, n - (size_t)(u2 + 1 - name), '-', ret_uid))
		return false;
	copy_part(ret->namespace_, name, (size_t)(u1 - name));
	copy_part(ret->pod, u1 + 1, (size_t)(u2 - u1 - 1));
	ret->container[0] = 0;
	return true;
}

bool podmap_container_name_valid(const char *name)
{
	return dns_label_valid(name, strlen(name));
}
