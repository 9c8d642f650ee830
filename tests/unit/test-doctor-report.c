/*
 * The doctor's report (src/doctor/doctor-report.c): checks recorded in order, their text
 * rendering (layer headers, evidence, fixes only on warn and fail, wrapped at 100 columns),
 * the JSON document, the exit status, and out of memory never losing the report's verdict.
 * Output goes to open_memstream() and is compared whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-report.h"
#include "oom.h"
#include "unit.h"

/* @r written to a string (heap); *@ret_r the writer's return. */
static char *render(const struct doctor_report *r, bool json, int *ret_r)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	assert_non_null(f);
	*ret_r = doctor_report_write(r, "/host", json, f);
	assert_int_equal(fclose(f), 0);
	assert_non_null(s);
	return s;
}

static void assert_render(const struct doctor_report *r, bool json, const char *want)
{
	int wr;
	char *s = render(r, json, &wr);

	assert_int_equal(wr, 0);
	assert_string_equal(s, want);
	free(s);
}

static void test_empty(void **state)
{
	struct doctor_report r = { 0 };

	doctor_report_init(&r);
	assert_int_equal(doctor_report_exit_status(&r), 0);
	assert_render(&r, false, "\ndoctor: 0 pass, 0 warn, 0 fail, 0 skip\n");
	assert_render(&r, true,
		      "{\n  \"schemaVersion\": 1,\n  \"hostRoot\": \"/host\",\n  \"ok\": true,\n"
		      "  \"counts\": {\n    \"pass\": 0,\n    \"warn\": 0,\n    \"fail\": 0,\n"
		      "    \"skip\": 0\n  },\n  \"checks\": []\n}\n");
	doctor_report_release(&r);
}

static void test_text(void **state)
{
	struct doctor_report r = { 0 };
	struct doctor_check *c;

	doctor_report_init(&r);
	c = doctor_report_add(&r, "driver.nvml", DOCTOR_PASS, "NVML %s, %u GPU(s)", "550.54", 2u);
	doctor_evidence(c, "lib: %s", "/usr/lib/libnvidia-ml.so.1");
	doctor_fix(c, "never shown: the check passed");
	c = doctor_report_add(&r, "driver.devices", DOCTOR_WARN, "no /dev/nvidia-uvm");
	doctor_evidence(c, "one\ntwo"); /* a line with a newline is two lines */
	doctor_fix(c, "modprobe nvidia-uvm");
	c = doctor_report_add(&r, "runtime.docker", DOCTOR_SKIP, "no Docker");
	doctor_fix(c, "never shown: skipped");
	assert_int_equal(doctor_report_exit_status(&r), 0); /* warnings allowed */
	assert_render(&r, false,
		      "[driver]\n"
		      "pass  driver.nvml: NVML 550.54, 2 GPU(s)\n"
		      "      lib: /usr/lib/libnvidia-ml.so.1\n"
		      "warn  driver.devices: no /dev/nvidia-uvm\n"
		      "      one\n"
		      "      two\n"
		      "      fix: modprobe nvidia-uvm\n"
		      "\n[runtime]\n"
		      "skip  runtime.docker: no Docker\n"
		      "\ndoctor: 1 pass, 1 warn, 0 fail, 1 skip\n");
	(void)doctor_report_add(&r, "compat.cuda", DOCTOR_FAIL, "%s", "100% wrong");
	assert_int_equal(doctor_report_exit_status(&r), 1);
	doctor_report_release(&r);
	/* Released, the report is empty and usable again. */
	assert_null(r.first);
	assert_int_equal(doctor_report_exit_status(&r), 0);
	(void)doctor_report_add(&r, "plugin.dir", DOCTOR_PASS, "ok");
	assert_render(&r, false,
		      "[plugin]\npass  plugin.dir: ok\n\ndoctor: 1 pass, 0 warn, 0 fail, 0 skip\n");
	doctor_report_release(&r);
}

static void test_fix_wrapped(void **state)
{
	struct doctor_report r = { 0 };
	char word[150];
	struct doctor_check *c;

	memset(word, 'x', sizeof(word) - 1);
	word[sizeof(word) - 1] = 0;
	doctor_report_init(&r);
	c = doctor_report_add(&r, "a.b", DOCTOR_FAIL, "s");
	doctor_fix(c, "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm nnnn oooo "
		      "pppp qqqq rrrr ssss tttt uuuu");
	assert_render(&r, false,
		      "[a]\nfail  a.b: s\n"
		      /* 100 columns exactly: the most a line holds */
		      "      fix: aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm "
		      "nnnn oooo pppp qqqq rrrr\n"
		      "           ssss tttt uuuu\n"
		      "\ndoctor: 0 pass, 0 warn, 1 fail, 0 skip\n");
	doctor_report_release(&r);

	/* One word longer than the line is kept whole, on its own line. */
	c = doctor_report_add(&r, "a.b", DOCTOR_WARN, "s");
	doctor_fix(c, word);
	{
		int wr;
		char *s = render(&r, false, &wr);
		char *line = strstr(s, "      fix: x");

		assert_non_null(line);
		assert_int_equal(strcspn(line, "\n"), strlen("      fix: ") + strlen(word));
		free(s);
	}
	doctor_report_release(&r);
}

/* Hostile ids and text: no layer, a layer too long for the buffer, JSON's special bytes. */
static void test_hostile(void **state)
{
	static const char long_id[] = "abcdefghijklmnopqrstuvwxyz0123456789.check";
	struct doctor_report r = { 0 };
	struct doctor_check *c;
	int wr;
	char *s;

	doctor_report_init(&r);
	(void)doctor_report_add(&r, "nolayer", DOCTOR_PASS, "a");
	(void)doctor_report_add(&r, long_id, DOCTOR_PASS, "b");
	c = doctor_report_add(&r, "x.y", DOCTOR_FAIL, "quote \" backslash \\ tab \t bell \a");
	doctor_evidence(c, "ctl \x01 end");
	doctor_fix(c, "fix \"it\"");
	doctor_evidence(NULL, "ignored");
	doctor_fix(NULL, "ignored");
	s = render(&r, false, &wr);
	assert_int_equal(wr, 0);
	assert_non_null(strstr(s, "[nolayer]\npass  nolayer: a\n"));
	/* The layer is cut at 31 bytes, the id shown whole. */
	assert_non_null(strstr(s, "\n[abcdefghijklmnopqrstuvwxyz01234]\npass  " /**/
				  "abcdefghijklmnopqrstuvwxyz0123456789.check: b\n"));
	free(s);
	s = render(&r, true, &wr);
	assert_int_equal(wr, 0);
	assert_non_null(strstr(s, "\"ok\": false"));
	assert_non_null(
		strstr(s, "\"summary\": \"quote \\\" backslash \\\\ tab \\t bell \\u0007\""));
	assert_non_null(strstr(s, "\"evidence\": [\n        \"ctl \\u0001 end\"\n      ]"));
	assert_non_null(strstr(s, "\"fix\": \"fix \\\"it\\\"\""));
	assert_non_null(strstr(s, "\"layer\": \"nolayer\""));
	/* A check without a fix has no "fix" key: one check of three has one. */
	assert_null(strstr(strstr(s, "\"fix\"") + 1, "\"fix\""));
	free(s);
	doctor_report_release(&r);
}

static void test_json(void **state)
{
	struct doctor_report r = { 0 };
	struct doctor_check *c;

	doctor_report_init(&r);
	c = doctor_report_add(&r, "driver.nvml", DOCTOR_WARN, "slow");
	doctor_evidence(c, "took %d ms", 900);
	doctor_fix(c, "wait");
	assert_render(&r, true,
		      "{\n  \"schemaVersion\": 1,\n  \"hostRoot\": \"/host\",\n  \"ok\": true,\n"
		      "  \"counts\": {\n    \"pass\": 0,\n    \"warn\": 1,\n    \"fail\": 0,\n"
		      "    \"skip\": 0\n  },\n  \"checks\": [\n    {\n"
		      "      \"id\": \"driver.nvml\",\n      \"layer\": \"driver\",\n"
		      "      \"status\": \"warn\",\n      \"summary\": \"slow\",\n"
		      "      \"evidence\": [\n        \"took 900 ms\"\n      ],\n"
		      "      \"fix\": \"wait\"\n    }\n  ]\n}\n");
	doctor_report_release(&r);
}

/* A JSON report that cannot be written whole is an error; the text one is the caller's. */
static void test_write_error(void **state)
{
	struct doctor_report r = { 0 };
	FILE *ro = fopen("/dev/null", "r");

	assert_non_null(ro);
	doctor_report_init(&r);
	(void)doctor_report_add(&r, "a.b", DOCTOR_PASS, "s");
	assert_int_equal(doctor_report_write(&r, "/", true, ro), -EIO);
	assert_int_equal(doctor_report_write(&r, "/", false, ro), 0);
	assert_int_equal(fclose(ro), 0);
	doctor_report_release(&r);
}

/*
 * Every allocation failing in turn: a check lost sets oom, which fails the doctor and says so;
 * a lost evidence line loses only itself. Nothing leaks (the sanitizer build checks).
 */
static void test_oom(void **state)
{
	for (long n = 0;; n++) {
		struct doctor_report r = { 0 };
		struct doctor_check *c;
		long failed = oom_failed;
		int wr;
		char *s;

		doctor_report_init(&r);
		oom_fail_at(n);
		c = doctor_report_add(&r, "a.b", DOCTOR_PASS, "summary %d", 1);
		doctor_evidence(c, "evidence %d", 2);
		oom_off();
		if (oom_failed == failed) {
			assert_false(r.oom);
			doctor_report_release(&r);
			break;
		}
		if (!c) {
			assert_true(r.oom);
			assert_null(r.first);
			assert_int_equal(doctor_report_exit_status(&r), 1);
			s = render(&r, false, &wr);
			assert_string_equal(
				s, "\ndoctor: 0 pass, 0 warn, 0 fail, 0 skip (out of memory: "
				   "some checks are missing)\n");
			free(s);
			s = render(&r, true, &wr);
			assert_non_null(strstr(s, "\"ok\": false"));
			free(s);
		} else {
			assert_false(r.oom);
			assert_int_equal(doctor_report_exit_status(&r), 0);
			s = render(&r, false, &wr);
			assert_non_null(strstr(s, "pass  a.b: summary 1\n"));
			assert_null(strstr(s, "evidence 2"));
			free(s);
		}
		doctor_report_release(&r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),	    cmocka_unit_test(test_text),
		cmocka_unit_test(test_fix_wrapped), cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_json),	    cmocka_unit_test(test_write_error),
		cmocka_unit_test(test_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
