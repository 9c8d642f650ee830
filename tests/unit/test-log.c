/*
 * log.c's two formats: the JSON line has the logfmt line's fields (ts, level, module, msg and
 * each key=value of the tail, unquoted), escapes what RFC 8259 asks for, turns bytes that are
 * not UTF-8 into U+FFFD, and stays one valid object when the line is cut.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_MODULE "test"
#include "log.h"
#include "unit.h"

/* What one log call writes on stderr. */
static char *capture(enum log_format fmt, enum log_level level, const char *module, int r,
		     const char *msg, const char *tail)
{
	static char out[65536];
	int p[2], saved;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	log_line_format = fmt;
	(void)log_emit(level, module, r, msg, tail ? "%s" : NULL, tail);
	log_line_format = LOG_FORMAT_LOGFMT;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	(void)close(saved);
	(void)close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = 0;
	(void)close(p[0]);
	return out;
}

/* @line after its timestamp: "ts":"YYYY-MM-DDTHH:MM:SS.mmmZ" is checked and skipped. */
static const char *after_ts(const char *line, bool json)
{
	const char *lead = json ? "{\"ts\":\"" : "ts=";

	assert_true(strncmp(line, lead, strlen(lead)) == 0);
	line += strlen(lead);
	assert_true(line[4] == '-' && line[10] == 'T' && line[23] == 'Z');
	return line + 24;
}

static void test_json_fields(void **state)
{
	char *line = capture(LOG_FORMAT_JSON, LOG_LEVEL_WARN, "kubelet", -ENOENT,
			     "register failed, retrying",
			     "resource=nvidia.com/gpu reason=\"dial: \\\"x\\\" \\\\ gone\\n\" "
			     "attempt=3");

	assert_string_equal(after_ts(line, true),
			    "\",\"level\":\"warn\",\"module\":\"kubelet\","
			    "\"msg\":\"register failed, retrying\",\"resource\":\"nvidia.com/gpu\","
			    "\"reason\":\"dial: \\\"x\\\" \\\\ gone\\n\",\"attempt\":\"3\","
			    "\"err\":\"No such file or directory\",\"errno\":\"2\"}\n");

	/* No module, no tail. */
	line = capture(LOG_FORMAT_JSON, LOG_LEVEL_INFO, NULL, 0, "started", NULL);
	assert_string_equal(after_ts(line, true), "\",\"level\":\"info\",\"msg\":\"started\"}\n");

	/* A value printed with %s that held a space stays one value. */
	line = capture(LOG_FORMAT_JSON, LOG_LEVEL_ERROR, "m", 0, "x", "why=two words n=1");
	assert_string_equal(after_ts(line, true),
			    "\",\"level\":\"error\",\"module\":\"m\","
			    "\"msg\":\"x\",\"why\":\"two words\",\"n\":\"1\"}\n");
}

static void test_json_escaping(void **state)
{
	/* Control characters, quote, backslash, DEL; valid UTF-8 (2, 3, 4 bytes) kept as it is;
	 * a lone continuation byte, 0xff, an overlong '/', a surrogate and a cut sequence
	 * replaced. */
	char *line = capture(LOG_FORMAT_JSON, LOG_LEVEL_INFO, "m", 0,
			     "a\"b\\c\nd\re\tf\x01g\x1fh\x7f"
			     "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
			     "|\x80|\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82",
			     NULL);

	assert_string_equal(
		after_ts(line, true),
		"\",\"level\":\"info\",\"module\":\"m\",\"msg\":\"a\\\"b\\\\c\\nd\\re\\tf"
		"\\u0001g\\u001fh\\u007f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
		"|\\ufffd|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\"}\n");
}

/* A tail that fills the line: still one object, closed, on one line. */
static void test_json_cut(void **state)
{
	char tail[4100], *line;
	size_t n;

	memcpy(tail, "v=", 2);
	memset(tail + 2, 1, 4090); /* 6 bytes each in JSON: more than a line holds */
	tail[4092] = 0;
	line = capture(LOG_FORMAT_JSON, LOG_LEVEL_INFO, "m", -EIO, "cut", tail);
	n = strlen(line);
	assert_true(n > 16000 && n < 16384);
	assert_string_equal(line + n - 9, "\\u0001\"}\n");
	assert_ptr_equal(strchr(line, '\n'), line + n - 1);
	assert_null(strstr(line, "errno")); /* no room left for it */
}

/* logfmt is what it was. */
static void test_logfmt(void **state)
{
	char *line = capture(LOG_FORMAT_LOGFMT, LOG_LEVEL_WARN, "kubelet", -ENOENT, "say \"hi\"",
			     "a=1 b=\"x y\"");

	assert_string_equal(after_ts(line, false),
			    " level=warn module=kubelet msg=\"say \\\"hi\\\"\" a=1 b=\"x y\" "
			    "err=\"No such file or directory\" errno=2\n");
	line = capture(LOG_FORMAT_LOGFMT, LOG_LEVEL_INFO, NULL, 0, "m", NULL);
	assert_string_equal(after_ts(line, false), " level=info msg=\"m\"\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_fields),
		cmocka_unit_test(test_json_escaping),
		cmocka_unit_test(test_json_cut),
		cmocka_unit_test(test_logfmt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
