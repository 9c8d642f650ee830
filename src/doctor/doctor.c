/*
 * The doctor's frame: the list of checks, the host-root paths, the report (text or JSON) and
 * the exit status. The layers themselves live in doctor-driver.c, doctor-runtime.c,
 * doctor-plugin.c and doctor-compat.c.
 */
#include "doctor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-read.h"

struct doctor_check {
	struct doctor_check *next;
	const char *id; /* a literal */
	enum doctor_status status;
	char *summary;
	struct buf evidence; /* lines, each ending in '\n' */
	const char *fix;     /* a literal, or NULL */
};

struct doctor {
	const struct doctor_opts *o;
	struct doctor_facts facts;
	struct doctor_check *first, **tail;
	int root_fd; /* the host root, O_PATH: every host path is opened under it; or -errno */
	bool oom;    /* a check could not be recorded: the report says so and the doctor fails */
};

static const char *const status_name[] = {
	[DOCTOR_PASS] = "pass",
	[DOCTOR_WARN] = "warn",
	[DOCTOR_FAIL] = "fail",
	[DOCTOR_SKIP] = "skip",
};

struct doctor_check *doctor_add(struct doctor *dr, const char *id, enum doctor_status st,
				const char *summary_fmt, ...)
{
	struct doctor_check *c = calloc(1, sizeof(*c));
	va_list ap;

	if (!c) {
		dr->oom = true;
		return NULL;
	}
	va_start(ap, summary_fmt);
	c->summary = strdup_vprintf(summary_fmt, ap);
	va_end(ap);
	if (!c->summary) {
		free(c);
		dr->oom = true;
		return NULL;
	}
	c->id = id;
	c->status = st;
	*dr->tail = c;
	dr->tail = &c->next;
	return c;
}

void doctor_evidence(struct doctor_check *c, const char *fmt, ...)
{
	char *line;
	va_list ap;

	if (!c)
		return;
	va_start(ap, fmt);
	line = strdup_vprintf(fmt, ap);
	va_end(ap);
	/* Out of memory loses one evidence line, never the check itself. */
	if (line && buf_printf(&c->evidence, "%s\n", line) < 0)
		buf_release(&c->evidence);
	free(line);
}

void doctor_fix(struct doctor_check *c, const char *fix)
{
	if (c)
		c->fix = fix;
}

const struct doctor_opts *doctor_opts(const struct doctor *dr)
{
	return dr->o;
}

struct doctor_facts *doctor_facts(struct doctor *dr)
{
	return &dr->facts;
}

char *doctor_path(const struct doctor *dr, const char *path)
{
	return root_join(dr->o->host_root, path);
}

int doctor_open(const struct doctor *dr, const char *path, int flags, char **ret_real)
{
	if (dr->root_fd < 0)
		return dr->root_fd;
	return root_open(dr->root_fd, path, flags, ret_real);
}

static int stat_flags(const struct doctor *dr, const char *path, int flags, struct stat *st,
		      char **ret_real)
{
	int fd = doctor_open(dr, path, flags, ret_real), r = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0)
		r = -errno;
	fd_close(fd);
	if (r < 0 && ret_real)
		*ret_real = mfree(*ret_real);
	return r;
}

int doctor_stat(const struct doctor *dr, const char *path, struct stat *st, char **ret_real)
{
	return stat_flags(dr, path, 0, st, ret_real);
}

int doctor_lstat(const struct doctor *dr, const char *path, struct stat *st)
{
	return stat_flags(dr, path, O_NOFOLLOW, st, NULL);
}

int doctor_read(const struct doctor *dr, const char *path, size_t max, char **ret, size_t *ret_len)
{
	if (dr->root_fd < 0)
		return dr->root_fd;
	return read_file_at(dr->root_fd, path, READ_IN_ROOT, max, ret, ret_len, NULL);
}

int doctor_readlink(const struct doctor *dr, const char *path, char *buf, size_t size)
{
	int fd = doctor_open(dr, path, O_NOFOLLOW, NULL), r;
	ssize_t n;

	if (fd < 0)
		return fd;
	n = readlinkat(fd, "", buf, size - 1);
	r = n < 0 ? -errno : 0;
	if (n >= 0)
		buf[n] = 0;
	fd_close(fd);
	return r;
}

DIR *doctor_opendir(const struct doctor *dr, const char *path, int *reterr)
{
	int fd = doctor_open(dr, path, O_DIRECTORY, NULL), dfd = -1;
	DIR *d = NULL;

	if (fd >= 0) {
		dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
		if (dfd < 0)
			dfd = -errno;
		fd_close(fd);
	}
	if (fd < 0 || dfd < 0) {
		*reterr = fd < 0 ? fd : dfd;
		return NULL;
	}
	d = fdopendir(dfd);
	if (!d) {
		*reterr = -errno;
		fd_close(dfd);
	}
	return d;
}

int doctor_socket(const struct doctor *dr, const char *path, char dial[FD_PATH_MAX])
{
	int fd = doctor_open(dr, path, 0, NULL), r = 0;
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISSOCK(st.st_mode))
		r = -ENOTSOCK;
	if (r < 0) {
		fd_close(fd);
		return r;
	}
	(void)fd_path(fd, dial);
	return fd;
}

void doctor_replace(char **s, const char *from, const char *to)
{
	struct buf b = { 0 };
	size_t n = strlen(from);
	const char *p = *s, *hit;

	if (!p)
		return;
	while ((hit = strstr(p, from))) {
		bool whole = hit[n] < '0' || hit[n] > '9';

		if (buf_append(&b, p, (size_t)(hit - p)) < 0 ||
		    buf_printf(&b, "%s", whole ? to : from) < 0)
			goto oom;
		p = hit + n;
	}
	if (buf_printf(&b, "%s", p) < 0)
		goto oom;
	free(*s);
	*s = (char *)b.data;
	return;
oom:
	buf_release(&b);
}

const char *doctor_strerror(int r)
{
	if (r == -EBADFD)
		return "not a regular file (a FIFO, a socket or a device): not read";
	if (r == -ENOTSOCK)
		return "not a socket";
	return strerror(-r);
}

/* "driver.nvml" -> "driver" in @buf. */
static const char *layer_of(const char *id, char *buf, size_t size)
{
	size_t n = strcspn(id, ".");

	if (n >= size)
		n = size - 1;
	memcpy(buf, id, n);
	buf[n] = 0;
	return buf;
}

static void print_lines(const char *text, const char *prefix)
{
	while (text && *text) {
		size_t n = strcspn(text, "\n");

		printf("%s%.*s\n", prefix, (int)n, text);
		text += n + (text[n] == '\n');
	}
}

/* @text word-wrapped to WRAP_COLUMNS, after @first on the first line and @next on the others. */
#define WRAP_COLUMNS 100
static void print_wrapped(const char *text, const char *first, const char *next)
{
	const char *prefix = first;

	while (*text) {
		size_t room = WRAP_COLUMNS - strlen(prefix), n = strlen(text), cut = n;

		if (n > room) {
			cut = room;
			while (cut > 0 && text[cut] != ' ')
				cut--;
			if (cut == 0) /* one word longer than the line: keep it whole */
				cut = strcspn(text, " ");
		}
		printf("%s%.*s\n", prefix, (int)cut, text);
		text += cut;
		while (*text == ' ')
			text++;
		prefix = next;
	}
}

static void report_text(const struct doctor *dr, const unsigned count[4])
{
	char layer[32], last[32] = "";

	for (const struct doctor_check *c = dr->first; c; c = c->next) {
		layer_of(c->id, layer, sizeof(layer));
		if (!streq(layer, last)) {
			printf("%s[%s]\n", last[0] ? "\n" : "", layer);
			memcpy(last, layer, sizeof(last));
		}
		printf("%-4s  %s: %s\n", status_name[c->status], c->id, c->summary);
		print_lines((const char *)c->evidence.data, "      ");
		if (c->fix && (c->status == DOCTOR_FAIL || c->status == DOCTOR_WARN))
			print_wrapped(c->fix, "      fix: ", "           ");
	}
	printf("\ndoctor: %u pass, %u warn, %u fail, %u skip%s\n", count[DOCTOR_PASS],
	       count[DOCTOR_WARN], count[DOCTOR_FAIL], count[DOCTOR_SKIP],
	       dr->oom ? " (out of memory: some checks are missing)" : "");
}

static int report_json(const struct doctor *dr, const unsigned count[4])
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b, .indent = 2 };
	char layer[32];
	int r;

	json_object_open(&j);
	json_key(&j, "schemaVersion");
	json_int(&j, 1);
	json_key(&j, "hostRoot");
	json_string(&j, dr->o->host_root);
	json_key(&j, "ok");
	json_bool(&j, count[DOCTOR_FAIL] == 0 && !dr->oom);
	json_key(&j, "counts");
	json_object_open(&j);
	for (unsigned s = DOCTOR_PASS; s <= DOCTOR_SKIP; s++) {
		json_key(&j, status_name[s]);
		json_uint(&j, count[s]);
	}
	json_object_close(&j);
	json_key(&j, "checks");
	json_array_open(&j);
	for (const struct doctor_check *c = dr->first; c; c = c->next) {
		const char *ev = (const char *)c->evidence.data;

		json_object_open(&j);
		json_key(&j, "id");
		json_string(&j, c->id);
		json_key(&j, "layer");
		json_string(&j, layer_of(c->id, layer, sizeof(layer)));
		json_key(&j, "status");
		json_string(&j, status_name[c->status]);
		json_key(&j, "summary");
		json_string(&j, c->summary);
		json_key(&j, "evidence");
		json_array_open(&j);
		while (ev && *ev) {
			size_t n = strcspn(ev, "\n");
			char *line = strndup(ev, n);

			if (!line)
				json_fail(&j, -ENOMEM);
			json_string(&j, line);
			free(line);
			ev += n + (ev[n] == '\n');
		}
		json_array_close(&j);
		if (c->fix) {
			json_key(&j, "fix");
			json_string(&j, c->fix);
		}
		json_object_close(&j);
	}
	json_array_close(&j);
	json_object_close(&j);
	r = j.r;
	if (r >= 0 && buf_printf(&b, "\n") < 0)
		r = -ENOMEM;
	if (r >= 0 && fwrite(b.data, 1, b.len, stdout) != b.len)
		r = -EIO;
	buf_release(&b);
	return r;
}

int doctor_run(const struct doctor_opts *o)
{
	struct doctor dr = { .o = o };
	unsigned count[4] = { 0 };
	int r, rc;

	dr.tail = &dr.first;
	/* The operator names the root: its own links are followed, nothing below it escapes. */
	dr.root_fd = open(o->host_root && *o->host_root ? o->host_root : "/",
			  O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dr.root_fd < 0)
		dr.root_fd = -errno;
	doctor_driver(&dr);
	doctor_runtime(&dr);
	doctor_plugin(&dr);
	doctor_compat(&dr);
	for (const struct doctor_check *c = dr.first; c; c = c->next)
		count[c->status]++;
	rc = count[DOCTOR_FAIL] || dr.oom ? 1 : 0;
	if (o->json) {
		r = report_json(&dr, count);
		if (r < 0) {
			(void)fprintf(stderr, "edgegpu: doctor: writing the report failed: %s\n",
				      strerror(-r));
			rc = 1;
		}
	} else {
		report_text(&dr, count);
	}
	(void)fflush(stdout);
	fd_close(dr.root_fd);
	while (dr.first) {
		struct doctor_check *c = dr.first;

		dr.first = c->next;
		free(c->summary);
		buf_release(&c->evidence);
		free(c);
	}
	return rc;
}
