/*
 * The GPU monitor's options that come from outside (gpu-monitor.h): NVIDIA's
 * DP_DISABLE_HEALTHCHECKS syntax and the application XIDs its plugin ignores. No state.
 */

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-monitor.h"
#include "util.h"

bool gpu_xid_is_application(uint64_t xid)
{
	static const uint64_t app[] = { 13, 31, 43, 45, 68, 109 };

	for (size_t i = 0; i < ELEMENTSOF(app); i++)
		if (app[i] == xid)
			return true;
	return false;
}

int gpu_parse_disable_healthchecks(const char *s, struct gpu_monitor_opts *o, uint64_t **ret_xids)
{
	bool all = false, xids = false;
	uint64_t *list = NULL;
	unsigned n = o->n_ignored_xids;
	char *copy = NULL, *save = NULL;
	int r = 0;

	*ret_xids = NULL;
	if (!s || !*s)
		return 0;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	for (char *p = copy; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *end = item + strlen(item);
		uint64_t xid;
		uint64_t *grown;

		while (*item == ' ' || *item == '\t')
			item++;
		while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = 0;
		if (!*item)
			continue;
		if (streq(item, "all")) {
			all = true;
			continue;
		}
		if (streq(item, "xids")) {
			xids = true;
			continue;
		}
		if (safe_atou64(item, &xid) < 0) {
			r = -EINVAL;
			goto out;
		}
		if (!list) {
			list = calloc(n ? n : 1, sizeof(*list));
			if (!list) {
				r = -ENOMEM;
				goto out;
			}
			if (n)
				memcpy(list, o->ignored_xids, n * sizeof(*list));
		}
		grown = reallocarray(list, n + 1, sizeof(*list));
		if (!grown) {
			r = -ENOMEM;
			goto out;
		}
		list = grown;
		list[n++] = xid;
	}
	o->disable_all = o->disable_all || all;
	o->disable_xids = o->disable_xids || xids;
	if (list) {
		o->ignored_xids = list;
		o->n_ignored_xids = n;
		*ret_xids = list;
		list = NULL;
	}
out:
	free(list);
	free(copy);
	return r;
}
