/*
 * The YAML/JSON tree (src/base/ytree.c): the two readers, the bounds, and linear time. Time is
 * asserted on the work done, not on the clock: the number of realloc() calls while loading
 * (linked with -Wl,--wrap=realloc), which one call per child made 200,000 and doubling makes a
 * few dozen (libyaml's own buffers included).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util.h"
#include "ytree.h"

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

/* Loads @len bytes of @s, which must succeed; returns the root. */
static const struct ytree_node *load_n(struct ytree *t, const char *s, size_t len, unsigned flags)
{
	struct ytree_error err;
	int r;

	*t = (struct ytree){ 0 };
	reallocs = 0;
	r = ytree_load(t, s, len, flags, YTREE_NODES_MAX, &err);
	if (r < 0)
		fail_msg("%u:%u: %s (%d)", err.line, err.column, err.message, r);
	return ytree_root(t);
}

static const struct ytree_node *load(struct ytree *t, const char *s, unsigned flags)
{
	return load_n(t, s, strlen(s), flags);
}

/* Loading @len bytes of @s fails at @line:@column with a message containing @want. */
static void refused_n(const char *s, size_t len, unsigned flags, unsigned line, unsigned column,
		      const char *want)
{
	struct ytree t = { 0 };
	struct ytree_error err;

	assert_int_equal(ytree_load(&t, s, len, flags, YTREE_NODES_MAX, &err), -EINVAL);
	assert_null(ytree_root(&t));
	assert_null(t.nodes);
	if (!strstr(err.message, want))
		fail_msg("\"%s\": got \"%s\", want \"%s\"", s, err.message, want);
	if (err.line != line || err.column != column)
		fail_msg("\"%s\": %s at %u:%u, want %u:%u", s, err.message, err.line, err.column,
			 line, column);
}

static void refused(const char *s, unsigned flags, unsigned line, unsigned column, const char *want)
{
	refused_n(s, strlen(s), flags, line, column, want);
}

static void test_big_map_is_linear(void **state)
{
	struct buf b = { 0 };
	struct ytree t;
	const struct ytree_node *root;

	(void)state;
	assert_int_equal(buf_printf(&b, "{"), 0);
	for (unsigned i = 0; i < KEYS; i++)
		assert_int_equal(buf_printf(&b, "%s\"k%u\": %u", i ? ", " : "", i, i), 0);
	assert_int_equal(buf_printf(&b, ", \"runtimes\": {\"nvidia\": {\"path\": \"x\"}}}"), 0);
	for (unsigned flags = 0; flags <= YTREE_JSON; flags += YTREE_JSON) {
		root = load_n(&t, (const char *)b.data, b.len, flags);
		assert_non_null(root);
		assert_int_equal(root->kind, YTREE_MAP);
		assert_int_equal(root->n_kids, 2 * (KEYS + 1));
		assert_string_equal(
			ytree_str(ytree_get(
				&t, ytree_get(&t, ytree_get(&t, root, "runtimes"), "nvidia"),
				"path")),
			"x");
		/* log2(200,002 / 8) = 15 for the root's children; 200,002 when one by one. */
		assert_in_range(reallocs, 1, 200);
		ytree_release(&t);
	}
	buf_release(&b);
}

static void test_big_list_is_linear(void **state)
{
	struct buf b = { 0 };
	struct ytree t;

	(void)state;
	assert_int_equal(buf_printf(&b, "devices:\n"), 0);
	for (unsigned i = 0; i < KEYS; i++)
		assert_int_equal(buf_printf(&b, "- %u\n", i), 0);
	assert_int_equal(
		ytree_get(&t, load_n(&t, (const char *)b.data, b.len, 0), "devices")->n_kids, KEYS);
	assert_in_range(reallocs, 1, 200);
	ytree_release(&t);
	buf_release(&b);
}

/* Anchors are hashed: 50,000 anchors and 50,000 aliases, not 2.5 billion name compares. */
static void test_many_anchors(void **state)
{
	const struct ytree_node *root;
	struct buf b = { 0 };
	struct ytree t;

	(void)state;
	for (unsigned i = 0; i < 50000; i++)
		assert_int_equal(buf_printf(&b, "a%u: &x%u %u\n", i, i, i), 0);
	for (unsigned i = 0; i < 50000; i++)
		assert_int_equal(buf_printf(&b, "b%u: *x%u\n", i, 49999 - i), 0);
	root = load_n(&t, (const char *)b.data, b.len, 0);
	assert_string_equal(ytree_str(ytree_get(&t, root, "b0")), "49999");
	assert_ptr_equal(ytree_get(&t, root, "b1"), ytree_get(&t, root, "a49998"));
	ytree_release(&t);
	buf_release(&b);
}

/* The bound stays: one node past YTREE_NODES_MAX is refused, at its line. */
static void test_node_bound(void **state)
{
	struct buf b = { 0 };

	(void)state;
	for (unsigned i = 0; i < YTREE_NODES_MAX; i++)
		assert_int_equal(buf_printf(&b, "- %u\n", i), 0);
	refused_n((const char *)b.data, b.len, 0, YTREE_NODES_MAX, 3,
		  "the document has more than 262144 YAML nodes");
	b.len = 0;
	assert_int_equal(buf_printf(&b, "["), 0);
	for (unsigned i = 0; i < YTREE_NODES_MAX; i++)
		assert_int_equal(buf_printf(&b, "%s0", i ? "," : ""), 0);
	assert_int_equal(buf_printf(&b, "]"), 0);
	refused_n((const char *)b.data, b.len, YTREE_JSON, 1, 2 * YTREE_NODES_MAX,
		  "the document has more than 262144 JSON nodes");
	buf_release(&b);
}

/* 100,000 levels: refused at the 65th, by both readers, without recursion. */
static void test_deep(void **state)
{
	char *deep = malloc(200001);
	struct ytree t;

	(void)state;
	assert_non_null(deep);
	memset(deep, '[', 100000);
	memset(deep + 100000, ']', 100000);
	deep[200000] = 0;
	refused(deep, 0, 1, 65, "nested deeper than 64 levels");
	refused(deep, YTREE_JSON, 1, 65, "nested deeper than 64 levels");
	/* 64 is fine. */
	assert_int_equal(load_n(&t, deep + 100000 - 64, 128, YTREE_JSON)->kind, YTREE_SEQ);
	ytree_release(&t);
	assert_int_equal(load_n(&t, deep + 100000 - 64, 128, 0)->kind, YTREE_SEQ);
	ytree_release(&t);
	free(deep);
}

/* A "billion laughs": ten aliases a level, nine levels. Refused where it passes the bound. */
static void test_billion_laughs(void **state)
{
	struct buf b = { 0 };
	const struct ytree_node *root;
	struct ytree t;

	(void)state;
	assert_int_equal(buf_printf(&b, "l0: &l0 [lol]\n"), 0);
	for (int i = 1; i <= 9; i++)
		assert_int_equal(buf_printf(&b,
					    "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, "
					    "*l%d, *l%d, *l%d]\n",
					    i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
					    i - 1, i - 1, i - 1),
				 0);
	/* l5 expands to 211,111 nodes and fits; l6 is refused at its second alias. */
	refused_n((const char *)b.data, b.len, 0, 7, 15,
		  "aliases expand the document past 262144 YAML nodes");
	b.len = 0;
	/* Below the bound, an alias is its anchor's node, not a copy. */
	root = load(&t, "a: &x [1, {b: 2}]\nc: *x\nd: &s str\ne: *s\n", 0);
	assert_ptr_equal(ytree_get(&t, root, "a"), ytree_get(&t, root, "c"));
	assert_int_equal(ytree_get(&t, root, "c")->kind, YTREE_SEQ);
	assert_string_equal(ytree_str(ytree_get(&t, root, "e")), "str");
	/* The root, 4 keys, [1, {b: 2}] twice (5 nodes), str twice. */
	assert_int_equal(root->size, 1 + 4 + 2 * 5 + 2 * 1);
	ytree_release(&t);
	refused("a: *nothing\n", 0, 1, 4, "alias *nothing names no anchor before it");
	/* An anchor counts from the end of its node: nothing contains itself. */
	refused("a: &f {b: *f}\n", 0, 1, 11, "alias *f names no anchor before it");
	buf_release(&b);
}

static void test_yaml(void **state)
{
	const struct ytree_node *root, *n;
	struct ytree t;

	(void)state;
	root = load(&t, "a: yes\nb: 'yes'\nc: !!str 0x1F\nd:\n  - 1_000\n  - \"x\\0y\"\n", 0);
	assert_int_equal(root->kind, YTREE_MAP);
	assert_true(ytree_get(&t, root, "a")->plain);
	assert_false(ytree_get(&t, root, "b")->plain);
	assert_false(ytree_get(&t, root, "c")->plain);
	n = ytree_get(&t, root, "d");
	assert_int_equal(n->kind, YTREE_SEQ);
	assert_int_equal(n->line, 5);
	assert_int_equal(n->column, 3);
	assert_string_equal(ytree_str(ytree_kid(&t, n, 0)), "1_000");
	assert_int_equal(ytree_kid(&t, n, 1)->len, 3);
	assert_memory_equal(ytree_kid(&t, n, 1)->value, "x\0y", 4);
	assert_null(ytree_str(n));
	assert_null(ytree_get(&t, n, "a"));
	assert_null(ytree_get(&t, NULL, "a"));
	ytree_release(&t);

	/* A repeated key gives its last value (go-yaml v2, encoding/json). */
	root = load(&t, "k: 1\nk: 2\n", 0);
	assert_string_equal(ytree_str(ytree_get(&t, root, "k")), "2");
	ytree_release(&t);
	/* A key is compared whole: "a\0b" is not "a". */
	root = load(&t, "\"a\\0b\": 1\n", 0);
	assert_null(ytree_get(&t, root, "a"));
	ytree_release(&t);

	/* Empty, comments only, a BOM: no document. */
	assert_null(load(&t, "", 0));
	ytree_release(&t);
	assert_null(load(&t, "# nothing\n", 0));
	ytree_release(&t);
	assert_string_equal(ytree_str(load(&t, "\xef\xbb\xbfv", 0)), "v");
	ytree_release(&t);

	/* Documents: a second empty one is harmless, anything else refused, or not read. */
	assert_int_equal(load(&t, "a: 1\n---\n", 0)->kind, YTREE_MAP);
	ytree_release(&t);
	assert_int_equal(load(&t, "a: 1\n--- ~\n", 0)->kind, YTREE_MAP);
	ytree_release(&t);
	refused("a: 1\n---\nb: 2\n", 0, 3, 1, "more than one YAML document");
	assert_int_equal(load(&t, "a: 1\n---\n[\n", YTREE_FIRST_DOCUMENT)->kind, YTREE_MAP);
	ytree_release(&t);

	/* libyaml's errors, positioned. */
	refused("a: b: c\n", 0, 1, 5, "mapping values are not allowed");
	refused("a: \"v\xff\"\n", 0, 1, 6, "invalid leading UTF-8 octet");
	refused_n("a: \"v\0\"\n", 8, 0, 1, 6, "control characters are not allowed");
	refused("\t{}\n", 0, 1, 1, "cannot start any token");
}

/* JSON as JSON: each of libyaml's YAML 1.1 readings that JSON does not have. */
/* YAML 1.1's null, as go-yaml v2 reads it: plain only; a quoted "null" and "nil" are strings. */
static void test_is_null(void **state)
{
	static const struct {
		const char *doc;
		bool null;
	} cases[] = {
		{ "k: ~", true },	{ "k: null", true },	{ "k: Null", true },
		{ "k: NULL", true },	{ "k:", true },		{ "k: \"null\"", false },
		{ "k: 'null'", false }, { "k: nil", false },	{ "k: nULL", false },
		{ "k: \"\"", false },	{ "k: [null]", false }, { "k: {}", false },
	};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct ytree t = { 0 };
		const struct ytree_node *root = load(&t, cases[i].doc, 0);

		assert_int_equal(ytree_is_null(ytree_get(&t, root, "k")), cases[i].null);
		ytree_release(&t);
	}
}

static void test_json(void **state)
{
	const struct ytree_node *root, *n;
	struct ytree t;

	(void)state;
	root = load(&t,
		    "\xef\xbb\xbf\t{\"a\" :\t[true, false, null, -0.5e+3, 1e999, "
		    "123456789012345678901234567890],\r\n\"b\":\"\\/\\\"\\\\\\b\\f\\n\\r\\t\","
		    "\"c\":\"\\ud83d\\ude00 \\ud800 \\u00e9\", \"d\": \"true\", \"e\": {}, "
		    "\"f\": \"a\\u0000b\", \"a\": 2}",
		    YTREE_JSON);
	assert_int_equal(root->kind, YTREE_MAP);
	assert_int_equal(root->line, 1);
	assert_int_equal(root->column, 2);
	n = ytree_kid(&t, root, 1);
	assert_int_equal(n->kind, YTREE_SEQ);
	assert_int_equal(n->n_kids, 6);
	for (size_t i = 0; i < n->n_kids; i++)
		assert_true(ytree_kid(&t, n, i)->plain);
	assert_string_equal(ytree_str(ytree_kid(&t, n, 3)), "-0.5e+3");
	assert_string_equal(ytree_str(ytree_kid(&t, n, 4)), "1e999");
	assert_string_equal(ytree_str(ytree_kid(&t, n, 5)), "123456789012345678901234567890");
	/* A repeated key: the last value, as encoding/json. */
	assert_string_equal(ytree_str(ytree_get(&t, root, "a")), "2");
	assert_string_equal(ytree_str(ytree_get(&t, root, "b")), "/\"\\\b\f\n\r\t");
	assert_int_equal(ytree_get(&t, root, "b")->line, 2);
	/* A surrogate pair is one character; a lone surrogate U+FFFD, as encoding/json. */
	assert_string_equal(ytree_str(ytree_get(&t, root, "c")),
			    "\xf0\x9f\x98\x80 \xef\xbf\xbd \xc3\xa9");
	assert_false(ytree_get(&t, root, "d")->plain);
	assert_int_equal(ytree_get(&t, root, "e")->kind, YTREE_MAP);
	assert_int_equal(ytree_get(&t, root, "f")->len, 3);
	ytree_release(&t);

	/* A scalar document; nothing at all. */
	assert_string_equal(ytree_str(load(&t, " \"s\" ", YTREE_JSON)), "s");
	ytree_release(&t);
	assert_null(load(&t, " \r\n\t", YTREE_JSON));
	ytree_release(&t);

	/* YAML 1.1's plain scalars are not JSON values. */
	refused("[yes]", YTREE_JSON, 1, 2, "expected a JSON value, got 'y'");
	refused("[on]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[0x1F]", YTREE_JSON, 1, 3, "expected ',' or ']', got 'x'");
	refused("[1_000]", YTREE_JSON, 1, 3, "expected ',' or ']', got '_'");
	refused("[~]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[.inf]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[NaN]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[+1]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[01]", YTREE_JSON, 1, 3, "expected ',' or ']', got '1'");
	refused("[1.]", YTREE_JSON, 1, 2, "expected a JSON value");
	refused("[truex]", YTREE_JSON, 1, 6, "expected ',' or ']', got 'x'");
	/* YAML's syntax that JSON has not. */
	refused("{a: 1}", YTREE_JSON, 1, 2, "expected a string key, got 'a'");
	refused("a: 1", YTREE_JSON, 1, 1, "expected a JSON value, got 'a'");
	refused("['a']", YTREE_JSON, 1, 2, "a single quote");
	refused("{\"a\": 1} # c", YTREE_JSON, 1, 10, "a comment");
	refused("// c\n{}", YTREE_JSON, 1, 1, "a comment");
	refused("[1,]", YTREE_JSON, 1, 4, "expected a JSON value, got ']'");
	refused("{\"a\": 1,}", YTREE_JSON, 1, 9, "expected a string key, got '}'");
	refused("[&a 1, *a]", YTREE_JSON, 1, 2, "expected a JSON value, got '&'");
	refused("!!str 1", YTREE_JSON, 1, 1, "expected a JSON value, got '!'");
	refused("{} {}", YTREE_JSON, 1, 4, "expected the end after the JSON value");
	refused("---\n{}", YTREE_JSON, 1, 1, "expected a JSON value");
	refused("\f{}", YTREE_JSON, 1, 1, "the byte 0x0c");
	/* Strings: JSON's escapes only, no raw control character, no line folding. */
	refused("[\"\\x41\"]", YTREE_JSON, 1, 3, "invalid escape \\x");
	refused("[\"\\e\"]", YTREE_JSON, 1, 3, "invalid escape \\e");
	refused("[\"\\N\"]", YTREE_JSON, 1, 3, "invalid escape \\N");
	refused("[\"\\u12\"]", YTREE_JSON, 1, 5, "\\u needs four hex digits");
	refused("[\"a\n b\"]", YTREE_JSON, 1, 4, "a control character (0x0a)");
	refused_n("[\"a\0\"]", 6, YTREE_JSON, 1, 4, "a control character (0x00)");
	refused("[\"a\xff\"]", YTREE_JSON, 1, 4, "invalid UTF-8");
	refused("[\"\xed\xa0\x80\"]", YTREE_JSON, 1, 3, "invalid UTF-8");
	refused("[\"a", YTREE_JSON, 1, 4, "a string is not closed");
	refused("[\"a\\", YTREE_JSON, 1, 5, "a string is not closed");
	refused("\xff", YTREE_JSON, 1, 1, "the byte 0xff");
	refused("{\"a\" 1}", YTREE_JSON, 1, 6, "expected ':' after a key");
	refused("{\"a\": 1", YTREE_JSON, 1, 8, "expected ',' or '}', got the end of the input");
	/* A multi-byte character counts one column. */
	refused("[\"\xc3\xa9\", x]", YTREE_JSON, 1, 7, "expected a JSON value");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_big_map_is_linear),
		cmocka_unit_test(test_big_list_is_linear),
		cmocka_unit_test(test_many_anchors),
		cmocka_unit_test(test_node_bound),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_billion_laughs),
		cmocka_unit_test(test_yaml),
		cmocka_unit_test(test_is_null),
		cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
