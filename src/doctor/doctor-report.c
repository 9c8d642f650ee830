/*
 * The doctor's report (doctor-report.h): the checks the layers record, their text and JSON
 * renderings, and the exit status. Calls nothing else of the doctor.
 */
#include "doctor-report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-int.h"

struct doctor_check {
	struct doctor_check *next;
	const char *id; /* a literal */
	enum doctor_status status;
	char *summary;
	struct buf evidence; /* lines, each ending in '\n' */
	const char *fix;     /* a literal, or NULL */
};

static const char *const status_name[] = {
	[DOCTOR_PASS] = "pass",
	[DOCTOR_WARN] = "warn",
	[DOCTOR_FAIL] = "fail",
	[DOCTOR_SKIP] = "skip",
};

void doctor_report_init(struct doctor_report *r)
{
	r->first = NULL;
	r->tail = &r->first;
	r->oom = false;
}

void doctor_report_release(struct doctor_report *r)
{
	while (r->first) {
		struct doctor_check *c = r->first;

		r->first = c->next;
		free(c->summary);
		buf_release(&c->evidence);
		free(c);
	}
	doctor_report_init(r);
}

struct doctor_check *doctor_report_vadd(struct doctor_report *r, const char *id,
					enum doctor_status st, const char *summary_fmt, va_list ap)
{
	struct doctor_check *c = calloc(1, sizeof(*c));

	if (!c) {
		r->oom = true;
		return NULL;
	}
	c->summary = strdup_vprintf(summary_fmt, ap);
	if (!c->summary) {
		free(c);
		r->oom = true;
		return NULL;
	}
	c->id = id;
	c->status = st;
	*r->tail = c;
	r->tail = &c->next;
	return c;
}

struct doctor_check *doctor_report_add(struct doctor_report *r, const char *id,
				       enum doctor_status st, const char *summary_fmt, ...)
{
	struct doctor_check *c;
	va_list ap;

	va_start(ap, summary_fmt);
	c = doctor_report_vadd(r, id, st, summary_fmt, ap);
	va_end(ap);
	return c;
}

struct doctor_check *doctor_add(struct doctor *dr, const char *id, enum doctor_status st,
				const char *summary_fmt, ...)
{
	struct doctor_check *c;
	va_list ap;

	va_start(ap, summary_fmt);
	c = doctor_report_vadd(&dr->report, id, st, summary_fmt, ap);
	va_end(ap);
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

static void print_lines(FILE *out, const char *text, const char *prefix)
{
	while (text && *text) {
		size_t n = strcspn(text, "\n");

		(void)fprintf(out, "%s%.*s\n", prefix, (int)n, text);
		text += n + (text[n] == '\n');
	}
}

/* @text word-wrapped to WRAP_COLUMNS, after @first on the first line and @next on the others. */
#define WRAP_COLUMNS 100
static void print_wrapped(FILE *out, const char *text, const char *first, const char *next)
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
		(void)fprintf(out, "%s%.*s\n", prefix, (int)cut, text);
		text += cut;
		while (*text == ' ')
			text++;
		prefix = next;
	}
}

static void report_text(const struct doctor_report *r, const unsigned count[4], FILE *out)
{
	char layer[32], last[32] = "";

	for (const struct doctor_check *c = r->first; c; c = c->next) {
		layer_of(c->id, layer, sizeof(layer));
		if (!streq(layer, last)) {
			(void)fprintf(out, "%s[%s]\n", last[0] ? "\n" : "", layer);
			memcpy(last, layer, sizeof(last));
		}
		(void)fprintf(out, "%-4s  %s: %s\n", status_name[c->status], c->id, c->summary);
		print_lines(out, (const char *)c->evidence.data, "      ");
		if (c->fix && (c->status == DOCTOR_FAIL || c->status == DOCTOR_WARN))
			print_wrapped(out, c->fix, "      fix: ", "           ");
	}
	(void)fprintf(out, "\ndoctor: %u pass, %u warn, %u fail, %u skip%s\n", count[DOCTOR_PASS],
		      count[DOCTOR_WARN], count[DOCTOR_FAIL], count[DOCTOR_SKIP],
		      r->oom ? " (out of memory: some checks are missing)" : "");
}

static int report_json(const struct doctor_report *rp, const char *host_root,
		       const unsigned count[4], FILE *out)
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b, .indent = 2 };
	char layer[32];
	int r;

	json_object_open(&j);
	json_key(&j, "schemaVersion");
	json_int(&j, 1);
	json_key(&j, "hostRoot");
	json_string(&j, host_root);
	json_key(&j, "ok");
	json_bool(&j, count[DOCTOR_FAIL] == 0 && !rp->oom);
	json_key(&j, "counts");
	json_object_open(&j);
	for (unsigned s = DOCTOR_PASS; s <= DOCTOR_SKIP; s++) {
		json_key(&j, status_name[s]);
		json_uint(&j, count[s]);
	}
	json_object_close(&j);
	json_key(&j, "checks");
	json_array_open(&j);
	for (const struct doctor_check *c = rp->first; c; c = c->next) {
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
	if (r >= 0 && fwrite(b.data, 1, b.len, out) != b.len)
		r = -EIO;
	buf_release(&b);
	return r;
}

static void count_checks(const struct doctor_report *r, unsigned count[4])
{
	for (const struct doctor_check *c = r->first; c; c = c->next)
		count[c->status]++;
}

int doctor_report_exit_status(const struct doctor_report *r)
{
	unsigned count[4] = { 0 };

	count_checks(r, count);
	return count[DOCTOR_FAIL] || r->oom ? 1 : 0;
}

int doctor_report_write(const struct doctor_report *r, const char *host_root, bool json, FILE *out)
{
	unsigned count[4] = { 0 };

	count_checks(r, count);
	if (json)
		return report_json(r, host_root, count, out);
	report_text(r, count, out);
	return 0;
}
