/*
 * The doctor's YAML/JSON tree (src/doctor/doctor-yaml.c): a 100,000-key map and a 100,000-item list
 * are built in linear time. Asserted on the work done, not on the clock: the number of
 * realloc() calls while loading (linked with -Wl,--wrap=realloc), which one call per child
 * made 200,000 and doubling makes a few dozen (libyaml's own buffers included).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-yaml.h"
#include "unit.h"
#include "util.h"

#define KEYS 100000

static long reallocs;

/* NOLINTBEGIN(bugprone-reserved-identifier): the names ld's --wrap gives */
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
/* NOLINTEND(bugprone-reserved-identifier) */
void *__wrap_realloc(void *p, size_t n) /* NOLINT(bugprone-reserved-identifier) */
{
	reallocs++;
	return __real_realloc(p, n);
}

static struct doctor_ynode *load(const struct buf *b)
{
	struct doctor_ynode *doc = NULL;
	char *err = NULL;
	unsigned line = 0;
	int r;

	reallocs = 0;
	r = doctor_yaml_load((const char *)b->data, b->len, &doc, &line, &err);
	if (r < 0)
		fail_msg("line %u: %s (%d)", line, err ? err : "", r);
	free(err);
	return doc;
}

static void test_big_map_is_linear(void **state)
{
	struct buf b = { 0 };
	struct doctor_ynode *doc;

	(void)state;
	assert_int_equal(buf_printf(&b, "{"), 0);
	for (unsigned i = 0; i < KEYS; i++)
		assert_int_equal(buf_printf(&b, "%s\"k%u\": %u", i ? ", " : "", i, i), 0);
	assert_int_equal(buf_printf(&b, ", \"runtimes\": {\"nvidia\": {\"path\": \"x\"}}}"), 0);
	doc = load(&b);
	assert_non_null(doc);
	assert_int_equal(doc->kind, DOCTOR_YMAP);
	assert_int_equal(doc->n_kids, 2 * (KEYS + 1));
	assert_string_equal(
		doctor_ynode_str(doctor_ynode_get(
			doctor_ynode_get(doctor_ynode_get(doc, "runtimes"), "nvidia"), "path")),
		"x");
	/* log2(200,002 / 8) = 15 for the root's children; 200,002 when growing one by one. */
	assert_in_range(reallocs, 1, 200);
	doctor_ynode_free(doc);
	buf_release(&b);
}

static void test_big_list_is_linear(void **state)
{
	struct buf b = { 0 };
	struct doctor_ynode *doc;

	(void)state;
	assert_int_equal(buf_printf(&b, "devices:\n"), 0);
	for (unsigned i = 0; i < KEYS; i++)
		assert_int_equal(buf_printf(&b, "- %u\n", i), 0);
	doc = load(&b);
	assert_non_null(doc);
	assert_int_equal(doctor_ynode_get(doc, "devices")->n_kids, KEYS);
	assert_in_range(reallocs, 1, 200);
	doctor_ynode_free(doc);
	buf_release(&b);
}

/* The bound stays: one node past DOCTOR_YAML_MAX_NODES is refused, at its line. */
static void test_node_bound(void **state)
{
	struct buf b = { 0 };
	struct doctor_ynode *doc = NULL;
	char *err = NULL;
	unsigned line = 0;

	(void)state;
	for (unsigned i = 0; i < DOCTOR_YAML_MAX_NODES; i++)
		assert_int_equal(buf_printf(&b, "- %u\n", i), 0);
	assert_int_equal(doctor_yaml_load((const char *)b.data, b.len, &doc, &line, &err), -EINVAL);
	assert_null(doc);
	assert_non_null(strstr(err, "more than"));
	assert_int_equal(line, DOCTOR_YAML_MAX_NODES);
	free(err);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_big_map_is_linear),
		cmocka_unit_test(test_big_list_is_linear),
		cmocka_unit_test(test_node_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
