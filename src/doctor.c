/*
 * The doctor's frame: the list of checks, the host-root paths, the report (text or JSON) and
 * the exit status. The layers themselves live in doctor-driver.c, doctor-runtime.c,
 * doctor-plugin.c and doctor-compat.c.
 */
#include "doctor.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	bool oom; /* a check could not be recorded: the report says so and the doctor fails */
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

/* Appends component @c (@n bytes) to @out, a path without a trailing slash. */
static int push(struct buf *out, const char *c, size_t n)
{
	return buf_printf(out, "/%.*s", (int)n, c);
}

int doctor_resolve(const struct doctor *dr, const char *path, char **ret)
{
	struct buf out = { 0 }, todo = { 0 };
	const char *p;
	unsigned links = 0;
	int r;

	/* @todo holds what is left to walk; a symlink's target is put in front of it. */
	r = buf_printf(&todo, "%s", path);
	if (r < 0)
		goto out;
	p = (const char *)todo.data;
	for (;;) {
		char target[PATH_MAX], *full, *rest;
		struct stat st;
		size_t n;
		ssize_t len;

		p += strspn(p, "/");
		if (!*p)
			break;
		n = strcspn(p, "/");
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			/* Never above the host root. */
			char *slash = out.len ? strrchr((char *)out.data, '/') : NULL;

			if (slash)
				out.len = (size_t)(slash - (char *)out.data);
			if (out.data)
				((char *)out.data)[out.len] = 0;
			p += n;
			continue;
		}
		r = push(&out, p, n);
		if (r < 0)
			goto out;
		p += n;
		full = doctor_path(dr, (const char *)out.data);
		if (!full) {
			r = -ENOMEM;
			goto out;
		}
		if (lstat(full, &st) < 0) {
			r = -errno;
			free(full);
			/* The missing path, as far as it is known, for the caller's message. */
			if (buf_printf(&out, "%s", p) < 0)
				r = -ENOMEM;
			goto out;
		}
		len = S_ISLNK(st.st_mode) ? readlink(full, target, sizeof(target) - 1) : 0;
		free(full);
		if (len < 0) {
			r = -errno;
			goto out;
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > 32) {
			r = -ELOOP;
			goto out;
		}
		target[len] = 0;
		rest = strdup_printf("%s/%s", target, p);
		if (!rest) {
			r = -ENOMEM;
			goto out;
		}
		/* The link itself goes; an absolute target starts again at the root. */
		out.len = target[0] == '/' ?
				  0 :
				  (size_t)(strrchr((char *)out.data, '/') - (char *)out.data);
		((char *)out.data)[out.len] = 0;
		buf_release(&todo);
		r = buf_printf(&todo, "%s", rest);
		free(rest);
		if (r < 0)
			goto out;
		p = (const char *)todo.data;
	}
	r = 0;
out:
	if (r == 0 || r == -ENOENT) {
		char *s = out.len ? strdup((const char *)out.data) : strdup("/");

		if (!s) {
			r = -ENOMEM;
		} else {
			*ret = s;
		}
	}
	buf_release(&out);
	buf_release(&todo);
	return r;
}

int doctor_stat(const struct doctor *dr, const char *path, struct stat *st, char **ret_real)
{
	char *real = NULL, *full;
	int r = doctor_resolve(dr, path, &real);

	if (r < 0)
		goto out;
	full = doctor_path(dr, real);
	r = !full ? -ENOMEM : stat(full, st) < 0 ? -errno : 0;
	free(full);
out:
	if (ret_real && real)
		*ret_real = real;
	else
		free(real);
	return r;
}

int doctor_read(const struct doctor *dr, const char *path, size_t max, char **ret, size_t *ret_len)
{
	char *real = NULL, *full = NULL;
	int r = doctor_resolve(dr, path, &real);

	if (r >= 0) {
		full = doctor_path(dr, real);
		r = full ? read_file(full, max, ret, ret_len) : -ENOMEM;
	}
	free(full);
	free(real);
	return r;
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
	while (dr.first) {
		struct doctor_check *c = dr.first;

		dr.first = c->next;
		free(c->summary);
		buf_release(&c->evidence);
		free(c);
	}
	return rc;
}
