#include "mount-specs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "allocate.h"
#include "file-read.h"
#include "log.h"

#define LOG_MODULE "mount-specs"

/* The toolkit's names of the types, in enum mount_spec_type order. */
static const char *const type_names[MOUNT_SPEC_COUNT] = { "dev", "lib", "sym", "dir" };

/* The first bad line of a file and how many there were, for one log line per file. */
struct bad_lines {
	size_t first, count;
	const char *reason;
};

static void bad_line(struct bad_lines *bad, size_t line, const char *reason)
{
	if (bad->count++ == 0) {
		bad->first = line;
		bad->reason = reason;
	}
}

static void trim(const char **s, const char **end)
{
	while (*s < *end && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*end > *s && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
		(*end)--;
}

/* The type named by [@s, @end), or MOUNT_SPEC_COUNT. */
static enum mount_spec_type type_of(const char *s, const char *end)
{
	for (int t = 0; t < MOUNT_SPEC_COUNT; t++)
		if ((size_t)(end - s) == strlen(type_names[t]) &&
		    memcmp(s, type_names[t], (size_t)(end - s)) == 0)
			return (enum mount_spec_type)t;
	return MOUNT_SPEC_COUNT;
}

/*
 * Parses the line [@s, @end) (its LF dropped). Returns 1 with *@ret_type and *@ret_path (heap)
 * set, 0 for a line to skip silently (blank, comment), -EINVAL with *@reason set, or -ENOMEM.
 */
static int parse_line(const char *s, const char *end, enum mount_spec_type *ret_type,
		      char **ret_path, const char **reason)
{
	const char *comma, *path;
	enum mount_spec_type t;
	char *p;

	if (end > s && end[-1] == '\r')
		end--;
	if ((size_t)(end - s) > MOUNT_SPECS_LINE_MAX) {
		*reason = "line too long";
		return -EINVAL;
	}
	trim(&s, &end);
	if (s == end || *s == '#')
		return 0;
	if (memchr(s, '\0', (size_t)(end - s))) {
		*reason = "NUL byte";
		return -EINVAL;
	}
	comma = memchr(s, ',', (size_t)(end - s));
	if (!comma) {
		*reason = "no comma (want \"<type>, <path>\")";
		return -EINVAL;
	}
	path = comma + 1;
	trim(&s, &comma);
	t = type_of(s, comma);
	if (t == MOUNT_SPEC_COUNT) {
		*reason = "unknown type (want dev, lib, sym or dir)";
		return -EINVAL;
	}
	trim(&path, &end);
	p = strndup(path, (size_t)(end - path));
	if (!p)
		return -ENOMEM;
	if (!*p)
		*reason = "empty path";
	else if (!utf8_valid(p))
		*reason = "path not valid UTF-8";
	else if (!path_is_clean_absolute(p))
		*reason = "path not absolute, or with a . or .. component";
	else if (p[strspn(p, "/")] == '\0')
		*reason = "path is the root";
	else {
		*ret_type = t;
		*ret_path = p;
		return 1;
	}
	free(p);
	return -EINVAL;
}

int mount_specs_parse(struct mount_specs *specs, const char *name, const char *text, size_t len)
{
	struct bad_lines bad = { 0 };
	const char *s = text, *end = text + len;
	size_t line = 0, before = specs->n;
	bool full = false;
	int r = 0;

	while (s < end && !full) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *eol = nl ? nl : end, *reason = NULL;
		enum mount_spec_type t = MOUNT_SPEC_DEV;
		char *path = NULL;

		line++;
		r = parse_line(s, eol, &t, &path, &reason);
		s = nl ? nl + 1 : end;
		if (r == -ENOMEM)
			break;
		if (r == -EINVAL)
			bad_line(&bad, line, reason);
		if (r <= 0)
			continue;
		full = specs->n >= MOUNT_SPECS_ENTRIES_MAX;
		r = full ? 0 :
			   array_grow((void **)&specs->v, &specs->cap, specs->n, sizeof(*specs->v));
		if (full || r < 0) {
			free(path);
			if (r < 0)
				break;
			continue;
		}
		specs->v[specs->n++] = (struct mount_spec){ .type = t, .path = path };
	}
	if (bad.count > 0)
		log_warn("invalid lines skipped in a CSV mount spec",
			 "file=%s line=%zu reason=%s invalid_lines=%zu", log_q(name), bad.first,
			 log_q(bad.reason), bad.count);
	if (full)
		log_warn("too many CSV mount spec entries, the rest ignored",
			 "file=%s line=%zu max=%d", log_q(name), line, MOUNT_SPECS_ENTRIES_MAX);
	if (r == -ENOMEM)
		return r;
	return (int)(specs->n - before);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_csv_name(const char *n)
{
	size_t len = strlen(n);

	/* ".csv" alone is not a spec (the toolkit ignores it): a name is needed before it. */
	return len > 4 && streq(n + len - 4, ".csv");
}

/*
 * The *.csv names of the directory @dir (inside @root_fd), sorted, into *@ret (heap, each name
 * heap; at most MOUNT_SPECS_FILES_MAX kept). Returns the count, or -errno of opening or
 * reading the directory.
 */
static int list_csv(int root_fd, const char *dir, char ***ret, size_t *ret_n, bool *ret_more)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = NULL;
	int r;

	r = root_opendir(root_fd, dir, &d);
	if (r < 0)
		return r;
	*ret_more = false;
	/*
	 * Every *.csv name is kept until sorted, so "the first in name order" holds whatever
	 * order readdir gives; a directory is bounded by its filesystem, and these names are
	 * a few hundred bytes each at most.
	 */
	while ((errno = 0, de = readdir(d))) {
		if (!is_csv_name(de->d_name))
			continue;
		r = array_grow((void **)&names, &cap, n, sizeof(*names));
		if (r < 0)
			goto out;
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (errno != 0) {
		r = -errno;
		goto out;
	}
	if (n > 0)
		qsort(names, n, sizeof(*names), cmp_name);
	if (n > MOUNT_SPECS_FILES_MAX) {
		*ret_more = true;
		for (size_t i = MOUNT_SPECS_FILES_MAX; i < n; i++)
			free(names[i]);
		n = MOUNT_SPECS_FILES_MAX;
	}
	*ret = names;
	*ret_n = n;
	names = NULL;
	n = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

static int read_one(struct mount_specs *specs, int root_fd, const char *root_name, const char *path)
{
	const char *what = NULL;
	char *text = NULL;
	size_t len = 0;
	int r;

	r = read_file_at(root_fd, path, READ_IN_ROOT, MOUNT_SPECS_FILE_MAX, &text, &len, &what);
	if (r == -ENOMEM)
		return r;
	if (r == -EFBIG) {
		log_warn("CSV mount spec too large, skipped", "root=%s file=%s max_bytes=%zu",
			 log_q(root_name), log_q(path), MOUNT_SPECS_FILE_MAX);
		return 0;
	}
	if (r < 0) {
		(void)log_warn_errno(r, "CSV mount spec unreadable, skipped",
				     "root=%s file=%s is=%s", log_q(root_name), log_q(path),
				     log_q(what ? what : ""));
		return 0;
	}
	r = mount_specs_parse(specs, path, text, len);
	free(text);
	return r;
}

int mount_specs_read(struct mount_specs *specs, int root_fd, const char *root_name, const char *dir)
{
	char **names = NULL;
	size_t n = 0, before = specs->n;
	bool more = false;
	int r;

	r = list_csv(root_fd, dir, &names, &n, &more);
	if (r == -ENOMEM)
		return r;
	if (r == -ENOENT) {
		log_debug("no CSV mount specs directory", "root=%s dir=%s", log_q(root_name),
			  log_q(dir));
		return 0;
	}
	if (r < 0) {
		(void)log_warn_errno(r,
				     "CSV mount specs directory unreadable, its files not mounted",
				     "root=%s dir=%s", log_q(root_name), log_q(dir));
		return 0;
	}
	if (more)
		log_warn("too many CSV mount spec files, the last in name order ignored",
			 "root=%s dir=%s max=%d", log_q(root_name), log_q(dir),
			 MOUNT_SPECS_FILES_MAX);
	for (size_t i = 0; i < n && r >= 0; i++) {
		char *path = path_join(dir, names[i]);

		r = path ? read_one(specs, root_fd, root_name, path) : -ENOMEM;
		free(path);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (r < 0)
		return r;
	return (int)(specs->n - before);
}

void mount_specs_release(struct mount_specs *specs)
{
	for (size_t i = 0; i < specs->n; i++)
		free(specs->v[i].path);
	free(specs->v);
	*specs = (struct mount_specs){ 0 };
}
