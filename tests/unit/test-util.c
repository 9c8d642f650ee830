#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "util.h"

static void test_safe_atou(void **state)
{
	unsigned u = 7;
	uint64_t v;
	int i;

	assert_int_equal(safe_atou("42", &u), 0);
	assert_int_equal(u, 42);
	assert_int_equal(safe_atou("", &u), -EINVAL);
	assert_int_equal(safe_atou("-1", &u), -EINVAL);
	assert_int_equal(safe_atou(" 1", &u), -EINVAL);
	assert_int_equal(safe_atou("1x", &u), -EINVAL);
	assert_int_equal(safe_atou("4294967296", &u), -ERANGE);
	assert_int_equal(safe_atou64("18446744073709551616", &v), -ERANGE);
	assert_int_equal(safe_atoi("-12", &i), 0);
	assert_int_equal(i, -12);
	assert_int_equal(safe_atoi("2147483648", &i), -ERANGE);
	assert_int_equal(safe_atoi("-", &i), -EINVAL);
}

static void test_buf(void **state)
{
	struct buf b = { 0 };

	assert_int_equal(buf_append(&b, "abc", 3), 0);
	assert_int_equal(buf_printf(&b, "-%d-", 12), 0);
	assert_int_equal(b.len, 7);
	assert_string_equal((char *)b.data, "abc-12-");
	buf_consume(&b, 4);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.data, "12-", 3);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(buf_append(&b, "x", 1), 0);
	assert_int_equal(b.len, 10003);
	buf_consume(&b, 20000);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	assert_null(b.data);
}

static void test_json_string(void **state)
{
	struct buf b = { 0 };

	assert_int_equal(buf_json_string(&b, "plain"), 0);
	assert_string_equal((char *)b.data, "\"plain\"");
	b.len = 0;
	assert_int_equal(buf_json_string(&b, "a\"b\\c\nd\te\rf\001g r\xc3\xa9"), 0);
	assert_string_equal((char *)b.data, "\"a\\\"b\\\\c\\nd\\te\\rf\\u0001g r\xc3\xa9\"");
	b.len = 0;
	assert_int_equal(buf_json_string(&b, ""), 0);
	assert_string_equal((char *)b.data, "\"\"");
	buf_release(&b);
}

/* Takes the writer's output as a C string (the buffer gets a NUL, not counted in len). */
static const char *json_out(struct json_writer *j)
{
	assert_int_equal(j->r, 0);
	assert_int_equal(buf_append(j->b, "", 1), 0);
	j->b->len--;
	return (const char *)j->b->data;
}

/* Writes one document of every kind of value, nested, into @j. */
static void json_sample(struct json_writer *j)
{
	json_object_open(j);
	json_key(j, "s");
	json_string(j, "a\"b\\c\n");
	json_key(j, "i");
	json_int(j, INT64_MIN);
	json_key(j, "u");
	json_uint(j, UINT64_MAX);
	json_key(j, "list");
	json_array_open(j);
	json_bool(j, true);
	json_bool(j, false);
	json_string(j, NULL);
	json_object_open(j);
	json_object_close(j);
	json_array_open(j);
	json_array_close(j);
	json_array_close(j);
	json_key(j, "o");
	json_object_open(j);
	json_key(j, "k");
	json_int(j, -1);
	json_object_close(j);
	json_object_close(j);
}

static void test_json_writer(void **state)
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b };

	json_sample(&j);
	assert_string_equal(json_out(&j),
			    "{\"s\":\"a\\\"b\\\\c\\n\",\"i\":-9223372036854775808,"
			    "\"u\":18446744073709551615,\"list\":[true,false,\"\",{},[]],"
			    "\"o\":{\"k\":-1}}");
	buf_release(&b);

	j = (struct json_writer){ .b = &b, .indent = 2 };
	json_sample(&j);
	assert_string_equal(json_out(&j), "{\n"
					  "  \"s\": \"a\\\"b\\\\c\\n\",\n"
					  "  \"i\": -9223372036854775808,\n"
					  "  \"u\": 18446744073709551615,\n"
					  "  \"list\": [\n"
					  "    true,\n"
					  "    false,\n"
					  "    \"\",\n"
					  "    {},\n"
					  "    []\n"
					  "  ],\n"
					  "  \"o\": {\n"
					  "    \"k\": -1\n"
					  "  }\n"
					  "}");
	buf_release(&b);
}

static void test_json_writer_error(void **state)
{
	struct buf b = { 0 };
	struct json_writer j = { .b = &b };
	size_t len;

	/* The first error sticks: nothing is written after it, and a later one does not replace it. */
	json_object_open(&j);
	json_key(&j, "a");
	json_fail(&j, -ENOMEM);
	len = b.len;
	json_string(&j, "x");
	json_fail(&j, -EINVAL);
	json_object_close(&j);
	assert_int_equal(j.r, -ENOMEM);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, "{\"a\":", len);
	buf_release(&b);
}

static void test_helpers(void **state)
{
	char *s, *err = NULL;
	uint64_t w[BITMAP_WORDS(130)] = { 0 };

	(void)state;
	s = root_join("/host//", "/dev/nvidia0");
	assert_string_equal(s, "/host/dev/nvidia0");
	free(s);
	s = root_join("/", "/dev/nvidia0");
	assert_string_equal(s, "/dev/nvidia0");
	free(s);
	s = root_join(NULL, "/dev/x");
	assert_string_equal(s, "/dev/x");
	free(s);

	s = strdup_printf("%s=%d", "a", 7);
	assert_string_equal(s, "a=7");
	free(s);

	assert_int_equal(set_error(&err, -ENOENT, "no %s", "lib"), -ENOENT);
	assert_string_equal(err, "no lib");
	assert_int_equal(set_error(&err, -EIO, "second"), -EIO); /* replaces, no leak */
	assert_string_equal(err, "second");
	free(err);
	assert_int_equal(set_error(NULL, -EINVAL, "dropped"), -EINVAL);

	assert_int_equal(BITMAP_WORDS(130), 3);
	bitmap_set(w, 0);
	bitmap_set(w, 129);
	assert_true(bitmap_test(w, 0) && bitmap_test(w, 129));
	assert_false(bitmap_test(w, 64) || bitmap_test(w, 1));
	assert_int_equal(w[2], 2);
	bitmap_clear(w, 129);
	assert_false(bitmap_test(w, 129));
	assert_int_equal(w[2], 0);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/test-util-XXXXXX";
	char *p, *content = NULL;
	size_t len = 0;
	struct stat st;

	assert_non_null(mkdtemp(dir));
	p = path_join(dir, "f.txt");
	assert_non_null(p);
	assert_int_equal(write_file_atomic(p, "hello", 5, 0640), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(read_file(p, 100, &content, &len), 0);
	assert_int_equal(len, 5);
	assert_string_equal(content, "hello");
	free(content);
	assert_int_equal(read_file(p, 4, &content, &len), -EFBIG);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(read_file(p, 100, &content, &len), -ENOENT);
	free(p);
	p = path_join("/a/b//", "/c");
	assert_string_equal(p, "/a/b/c");
	free(p);
	p = path_join("/", "x");
	assert_string_equal(p, "/x");
	free(p);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_safe_atou),	  cmocka_unit_test(test_buf),
		cmocka_unit_test(test_json_string),	  cmocka_unit_test(test_files),
		cmocka_unit_test(test_helpers),		  cmocka_unit_test(test_json_writer),
		cmocka_unit_test(test_json_writer_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
