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
		cmocka_unit_test(test_safe_atou),   cmocka_unit_test(test_buf),
		cmocka_unit_test(test_json_string), cmocka_unit_test(test_files),
		cmocka_unit_test(test_helpers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
