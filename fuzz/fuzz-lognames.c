/*
 * libFuzzer target for the kubelet's log names podmap reads (podmap.h): the bytes, up to the
 * first NUL, as a /var/log/containers entry, a /var/log/pods entry and a container directory
 * name. Findings, besides crashes and overflows of the fixed-size results: a name accepted
 * whose parts do not put the name back together, a part that breaks the kubelet's rules (DNS
 * label or subdomain, 64-hex container ID, UUID pod UID), or an accepted name with a part
 * longer than the kubelet allows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool label(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      (max > 63 && s[i] == '.')))
			return false;
	/* A subdomain's labels: none empty, none starting or ending with '-'. */
	return !strstr(s, "..") && !strstr(s, ".-") && !strstr(s, "-.") && s[0] != '.' &&
	       s[n - 1] != '.';
}

static bool hexn(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	return true;
}

static bool uid_ok(const char *s)
{
	if (strlen(s) == 32)
		return hexn(s, 32);
	if (strlen(s) != 36)
		return false;
	for (size_t i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ?
			    s[i] != '-' :
			    !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *name = malloc(size + 1), cid[65], uid[40], back[1024];
	struct podmap_names n;

	if (!name)
		abort();
	memcpy(name, data, size);
	name[size] = 0;

	memset(&n, 0x5a, sizeof(n));
	if (podmap_parse_container_log(name, cid, &n)) {
		if (!label(n.pod, 253) || !label(n.namespace_, 63) || !label(n.container, 63) ||
		    !hexn(cid, 64))
			abort();
		(void)snprintf(back, sizeof(back), "%s_%s_%s-%s.log", n.pod, n.namespace_,
			       n.container, cid);
		if (!streq(back, name))
			abort();
	}
	memset(&n, 0x5a, sizeof(n));
	if (podmap_parse_pod_dir(name, uid, &n)) {
		if (!label(n.namespace_, 63) || !label(n.pod, 253) || n.container[0] ||
		    !uid_ok(uid))
			abort();
		(void)snprintf(back, sizeof(back), "%s_%s_%s", n.namespace_, n.pod, uid);
		if (!streq(back, name))
			abort();
	}
	if (podmap_container_name_valid(name) != (label(name, 63) && !strchr(name, '.')))
		abort();
	free(name);
	return 0;
}
