#include "devnode.h"

#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "allocate.h"
#include "log.h"

#define LOG_MODULE "devnode"

int devnode_present(const char *root, const char *path)
{
	char *p = root_join(root, path);
	struct stat st;
	int r;

	if (!p)
		return -ENOMEM;
	r = stat(p, &st) == 0 && !S_ISDIR(st.st_mode);
	free(p);
	return r;
}

/* @root with glob(3)'s special characters escaped, trailing slashes dropped ("/" is ""). */
static char *glob_escape(const char *root)
{
	size_t n = root ? strlen(root) : 0;
	char *e, *o;

	while (n > 0 && root[n - 1] == '/')
		n--;
	e = o = malloc(2 * n + 1);
	if (!e)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (strchr("*?[]\\", root[i]))
			*o++ = '\\';
		*o++ = root[i];
	}
	*o = '\0';
	return e;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts @set and drops the duplicates; returns how many it holds now. */
static size_t set_normalise(struct devnode_set *set)
{
	size_t o = 0;

	if (set->n == 0)
		return 0;
	qsort(set->paths, set->n, sizeof(*set->paths), cmp_path);
	for (size_t i = 1; i < set->n; i++) {
		if (streq(set->paths[o], set->paths[i]))
			free(set->paths[i]);
		else
			set->paths[++o] = set->paths[i];
	}
	set->n = o + 1;
	return set->n;
}

/* Adds the container path of one match (<root><path>) if it is a node to deliver. */
static int add_match(struct devnode_set *set, const char *pattern, const char *root,
		     size_t root_len, const char *match)
{
	const char *path = match + root_len;
	char *copy;
	int r;

	/* glob(3) gives back the root as it was written; anything else is not under it. */
	if (strncmp(match, root, root_len) != 0) {
		log_debug("device node pattern match skipped", "pattern=%s match=%s reason=%s",
			  log_q(pattern), log_q(match), "not under the dev root");
		return 0;
	}
	if (!path_is_clean_absolute(path) || strncmp(path, "/dev/", 5) != 0) {
		log_debug("device node pattern match skipped", "pattern=%s match=%s reason=%s",
			  log_q(pattern), log_q(path), "not a plain path under /dev");
		return 0;
	}
	if (!alloc_utf8_valid(path)) {
		log_debug("device node pattern match skipped", "pattern=%s match=%s reason=%s",
			  log_q(pattern), log_q(path), "not valid UTF-8");
		return 0;
	}
	r = devnode_present(NULL, match);
	if (r <= 0)
		return r;
	r = array_grow((void **)&set->paths, &set->cap, set->n, sizeof(*set->paths));
	if (r < 0)
		return r;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	set->paths[set->n++] = copy;
	return 0;
}

/* Expands one pattern under @root (@eroot: escaped; @root_len: without trailing slashes). */
static int glob_one(struct devnode_set *set, const char *root, const char *eroot, size_t root_len,
		    const char *pattern)
{
	glob_t g = { 0 };
	char *full;
	int r;

	if (!path_is_clean_absolute(pattern) || strncmp(pattern, "/dev/", 5) != 0) {
		log_debug("device node pattern skipped", "pattern=%s reason=%s", log_q(pattern),
			  "not an absolute path under /dev without . or .. components");
		return 0;
	}
	full = root_join(eroot, pattern);
	if (!full)
		return -ENOMEM;
	/* Unsorted: the set is sorted once, whatever the number of patterns. */
	r = glob(full, GLOB_NOSORT, NULL, &g);
	free(full);
	if (r == GLOB_NOSPACE) {
		globfree(&g);
		return -ENOMEM;
	}
	if (r != 0) {
		log_debug("device node pattern matched nothing", "pattern=%s reason=%s",
			  log_q(pattern), r == GLOB_NOMATCH ? "no match" : "read error");
		globfree(&g);
		return 0;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		r = add_match(set, pattern, root, root_len, g.gl_pathv[i]);
		if (r < 0)
			break;
	}
	globfree(&g);
	return r < 0 ? r : 0;
}

int devnode_set_glob(struct devnode_set *set, const char *root, const char *const *patterns,
		     size_t n_patterns)
{
	size_t before = set->n, root_len;
	char *eroot;
	int r = 0;

	if (n_patterns == 0)
		return 0;
	eroot = glob_escape(root);
	if (!eroot)
		return -ENOMEM;
	root_len = root ? strlen(root) : 0;
	while (root_len > 0 && root[root_len - 1] == '/')
		root_len--;
	for (size_t i = 0; i < n_patterns && r >= 0; i++)
		r = glob_one(set, root ? root : "", eroot, root_len, patterns[i]);
	free(eroot);
	/* Sorted and unique again: it held @before distinct paths, and still holds them all. */
	set_normalise(set);
	if (r < 0)
		return r;
	return (int)(set->n - before);
}

bool devnode_set_has(const struct devnode_set *set, const char *path)
{
	return set->n > 0 &&
	       bsearch(&path, set->paths, set->n, sizeof(*set->paths), cmp_path) != NULL;
}

void devnode_set_release(struct devnode_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		free(set->paths[i]);
	free(set->paths);
	*set = (struct devnode_set){ 0 };
}
