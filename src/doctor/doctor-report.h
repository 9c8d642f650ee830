#pragma once

/*
 * The doctor's report: the checks every layer records, each with a status, its evidence and
 * its fix, rendered as text (one block per check, grouped by layer) or as one JSON document
 * (docs/doctor.schema.json), and the exit status they add up to.
 *
 * A check has a stable id "<layer>.<name>" (driver.nvml, runtime.containerd, ...). Its fix is a
 * fixed string per failure (no values formatted in: those go in the evidence), so
 * docs/troubleshooting.md can show it word for word and a test can check that it does.
 *
 * Out of memory never loses the report: a check that cannot be recorded sets the report's oom
 * flag (the report then says so and the doctor fails), a lost evidence line loses only itself.
 *
 * Ownership: the report owns its checks and their strings (ids and fixes are literals, not
 * copied); doctor_report_release() frees them. One thread: the doctor's.
 */

#include <stdbool.h>
#include <stdio.h>

#include "util.h"

enum doctor_status {
	DOCTOR_PASS,
	DOCTOR_WARN,
	DOCTOR_FAIL,
	DOCTOR_SKIP, /* does not apply here (no Docker on a containerd node, no --image given) */
};

struct doctor;
struct doctor_check;

/* The checks, in the order recorded. Zero-initialise, then doctor_report_init(). */
struct doctor_report {
	struct doctor_check *first, **tail;
	bool oom; /* a check could not be recorded: the report says so and the doctor fails */
};

void doctor_report_init(struct doctor_report *r);
/* Frees every check; the report is empty (and initialised) again. */
void doctor_report_release(struct doctor_report *r);

/*
 * Records one check in @r. @id is "<layer>.<name>" (a string literal, not copied),
 * @summary_fmt one line. Returns the check, to add evidence and a fix to, or NULL when out of
 * memory (r->oom is then set; doctor_evidence()/doctor_fix() accept NULL).
 */
struct doctor_check *doctor_report_add(struct doctor_report *r, const char *id,
				       enum doctor_status st, const char *summary_fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct doctor_check *doctor_report_vadd(struct doctor_report *r, const char *id,
					enum doctor_status st, const char *summary_fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
/* doctor_report_add() to the report of the doctor @dr: what the layers call. */
struct doctor_check *doctor_add(struct doctor *dr, const char *id, enum doctor_status st,
				const char *summary_fmt, ...) __attribute__((format(printf, 4, 5)));
/* Appends one line of evidence (a path and what it held, a version, a count). */
void doctor_evidence(struct doctor_check *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Sets the fix: a fixed string (a literal), shown word for word by docs/troubleshooting.md. */
void doctor_fix(struct doctor_check *c, const char *fix);

/* The doctor's exit status for @r: 0 when no check failed (warnings allowed), 1 otherwise. */
int doctor_report_exit_status(const struct doctor_report *r);
/*
 * Writes @r to @out: text, or with @json the JSON document (its hostRoot @host_root). Returns 0,
 * or for JSON -ENOMEM / -EIO when the document could not be built or written whole (the text
 * report is written line by line; its write errors are left to the caller's fflush()).
 */
int doctor_report_write(const struct doctor_report *r, const char *host_root, bool json,
			FILE *out) WARN_UNUSED;
