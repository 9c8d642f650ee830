/* The doctor's config readers: doctor-toml.c (containerd configs) and the JSON tree (ytree.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-toml.h"
#include "oom.h"
#include "unit.h"
#include "ytree.h"

static const char containerd_v2[] =
	"# containerd config, version 2\n"
	"version = 2\n"
	"root = '/var/lib/containerd'   # literal string\n"
	"oom_score = -999\n"
	"\n"
	"[grpc]\n"
	"  address = \"/run/containerd/containerd.sock\"\n"
	"  max_recv_message_size = 16_777_216\n"
	"\n"
	"[plugins.\"io.containerd.grpc.v1.cri\"]\n"
	"  sandbox_image = \"registry.k8s.io/pause:3.9\"\n"
	"  stats_collect_period = 10.5\n"
	"  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
	"    default_runtime_name = \"nvidia\"\n"
	"    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
	"      runtime_type = \"io.containerd.runc.v2\"\n"
	"      privileged_without_host_devices = false\n"
	"      pod_annotations = [ \"io.katacontainers.*\", # a comment inside\n"
	"        'b', 3, [\"nested\"], {x = 1},\n"
	"      ]\n"
	"      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
	"        BinaryName = \"/usr/bin/nvidia-container-runtime\"\n"
	"        'quoted key'.sub = \"caf\\u00e9\\t\"\n"
	"[proxy_plugins]\n"
	"  stargz = { type = \"snapshot\", address = \"/run/stargz.sock\" }\n"
	"[[mirrors]]\n"
	"  name = \"a\"\n"
	"[[mirrors]]\n"
	"  name = \"b\"\n"
	"[text]\n"
	"  multi = \"\"\"\n"
	"one \\\n"
	"   two\"\"\"\n"
	"  lit = '''x\n"
	"y'''\n";

static const struct doctor_toml_entry *get(const struct doctor_toml *t, const char *dotted)
{
	/* "a|b.c|d": segments split on '|' (names hold dots). */
	char *copy = strdup(dotted), *segs[16], *save = NULL;
	const struct doctor_toml_entry *e;
	size_t n = 0;

	assert_non_null(copy);
	for (char *s = strtok_r(copy, "|", &save); s && n < 16; s = strtok_r(NULL, "|", &save))
		segs[n++] = s;
	e = doctor_toml_get(t, (const char *const *)segs, n);
	free(copy);
	return e;
}

static void expect(const struct doctor_toml *t, const char *path, enum doctor_toml_type type,
		   const char *value, unsigned line)
{
	const struct doctor_toml_entry *e = get(t, path);

	if (!e) {
		print_error("no entry %s\n", path);
		fail();
		return;
	}
	assert_int_equal(e->type, type);
	if (value)
		assert_string_equal(e->value, value);
	assert_int_equal(e->line, line);
}

static void test_containerd_config(void **state)
{
	const char *pfx = "plugins|io.containerd.grpc.v1.cri|containerd|runtimes|nvidia";
	const struct doctor_toml_entry *e;
	struct doctor_toml *t = NULL;
	char *err = NULL, path[256];
	unsigned line = 0;

	(void)state;
	assert_int_equal(doctor_toml_parse(containerd_v2, strlen(containerd_v2), &t, &line, &err),
			 0);
	assert_null(err);
	expect(t, "version", DOCTOR_TOML_INT, "2", 2);
	expect(t, "root", DOCTOR_TOML_STRING, "/var/lib/containerd", 3);
	expect(t, "oom_score", DOCTOR_TOML_INT, "-999", 4);
	expect(t, "grpc|max_recv_message_size", DOCTOR_TOML_INT, "16_777_216", 8);
	expect(t, "plugins|io.containerd.grpc.v1.cri|stats_collect_period", DOCTOR_TOML_FLOAT,
	       "10.5", 12);
	expect(t, "plugins|io.containerd.grpc.v1.cri|containerd|default_runtime_name",
	       DOCTOR_TOML_STRING, "nvidia", 14);
	(void)snprintf(path, sizeof(path), "%s|privileged_without_host_devices", pfx);
	expect(t, path, DOCTOR_TOML_BOOL, "false", 17);
	(void)snprintf(path, sizeof(path), "%s|pod_annotations", pfx);
	expect(t, path, DOCTOR_TOML_ARRAY, NULL, 18);
	e = get(t, path);
	assert_int_equal(e->n_strv, 2);
	assert_string_equal(e->strv[0], "io.katacontainers.*");
	assert_string_equal(e->strv[1], "b");
	(void)snprintf(path, sizeof(path), "%s|options|BinaryName", pfx);
	expect(t, path, DOCTOR_TOML_STRING, "/usr/bin/nvidia-container-runtime", 22);
	(void)snprintf(path, sizeof(path), "%s|options|quoted key|sub", pfx);
	expect(t, path, DOCTOR_TOML_STRING, "caf\xc3\xa9\t", 23);
	expect(t, "proxy_plugins|stargz|address", DOCTOR_TOML_STRING, "/run/stargz.sock", 25);
	expect(t, "mirrors|[0]|name", DOCTOR_TOML_STRING, "a", 27);
	expect(t, "mirrors|[1]|name", DOCTOR_TOML_STRING, "b", 29);
	expect(t, "text|multi", DOCTOR_TOML_STRING, "one two", 31);
	expect(t, "text|lit", DOCTOR_TOML_STRING, "x\ny", 34);
	assert_null(get(t, "plugins|io|containerd"));
	{
		static const char *const p[] = { "plugins", "io.containerd.grpc.v1.cri" };

		assert_true(doctor_toml_has_prefix(
			get(t, "plugins|io.containerd.grpc.v1.cri|sandbox_image"), p, 2));
		assert_false(doctor_toml_has_prefix(get(t, "root"), p, 2));
	}
	t = doctor_toml_free(t);
	assert_null(t);
}

static void test_errors(void **state)
{
	static const struct {
		const char *in;
		unsigned line;
		const char *msg;
	} cases[] = {
		{ "a = nvidia\n", 1, "invalid value 'nvidia'" },
		{ "\n\n[a\nb = 1\n", 3, "expected ']' after the table name" },
		{ "[[a]\n", 1, "expected ']]' after the table name" },
		{ "a = 1\na = 2\n", 2, "duplicate key 'a'" },
		{ "[t]\nx.y = 1\n[t]\nx.y = 2\n", 4, "duplicate key 'y'" },
		{ "a = \"open\n", 1, "unterminated string" },
		{ "a = \"\"\"open\n\n", 3, "unterminated string" },
		{ "a = \"bad \\q\"\n", 1, "invalid escape" },
		{ "a = \"\\ud800\"\n", 1, "invalid Unicode scalar" },
		{ "a\n", 1, "expected '=' after the key" },
		{ "= 1\n", 1, "a key is missing" },
		{ "a =\n", 1, "a value is missing" },
		{ "a = 1 b = 2\n", 1, "unexpected 'b' after the value" },
		{ "a = [1, 2\n", 2, "unterminated array" },
		{ "a = [1 2]\n", 1, "expected ',' or ']'" },
		{ "a = { b = 1 c = 2 }\n", 1, "expected ',' or '}'" },
		{ "d = 1979-05-27\n", 1, "dates are not supported" },
		{ "a = 0x\n", 1, "invalid value '0x'" },
		{ "a = 1__0\n", 1, "invalid value" },
		{ "a.\"\"\"b\"\"\" = 1\n", 1, "multi-line" },
		{ "x = 1\ny = \"\x01\"\n", 2, "control character 0x01" },
		{ "a = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
		  1, "nested more than" },
	};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct doctor_toml *t = NULL;
		char *err = NULL;
		unsigned line = 0;
		int r = doctor_toml_parse(cases[i].in, strlen(cases[i].in), &t, &line, &err);

		if (r != -EINVAL || !err || !strstr(err, cases[i].msg) || line != cases[i].line) {
			print_error("case %zu %s: r=%d line=%u err=%s (want line %u '%s')\n", i,
				    cases[i].in, r, line, err ? err : "(null)", cases[i].line,
				    cases[i].msg);
			fail();
		}
		assert_null(t);
		free(err);
	}
	/* A NUL byte: not text. */
	{
		static const char nul[] = "a = 1\nb = \"x\0y\"\n";
		struct doctor_toml *t = NULL;
		unsigned line = 0;

		assert_int_equal(doctor_toml_parse(nul, sizeof(nul) - 1, &t, &line, NULL), -EINVAL);
		assert_int_equal(line, 2);
	}
}

/* Every prefix of a valid config parses or fails with a line and message, never crashes. */
static void test_truncations(void **state)
{
	size_t len = strlen(containerd_v2);

	(void)state;
	for (size_t n = 0; n <= len; n++) {
		char *copy = malloc(n ? n : 1);
		struct doctor_toml *t = NULL;
		char *err = NULL;
		unsigned line = 0;
		int r;

		assert_non_null(copy);
		memcpy(copy, containerd_v2, n);
		r = doctor_toml_parse(copy, n, &t, &line, &err);
		assert_true(r == 0 || r == -EINVAL);
		assert_true(r == 0 ? t && !err : !t && err && line >= 1);
		doctor_toml_free(t);
		free(err);
		free(copy);
	}
}

static void test_oom(void **state)
{
	long n;

	(void)state;
	for (n = 0;; n++) {
		struct doctor_toml *t = NULL;
		char *err = NULL;
		unsigned line = 0;
		int r;

		oom_fail_at(n);
		r = doctor_toml_parse(containerd_v2, strlen(containerd_v2), &t, &line, &err);
		oom_off();
		if (r == 0) {
			doctor_toml_free(t);
			break;
		}
		assert_int_equal(r, -ENOMEM);
		assert_null(t);
		assert_null(err);
	}
	assert_true(n > 10);
}

static void test_yaml_tree(void **state)
{
	static const char json[] =
		"\n\t{\n\t\"runtimes\": {\n\t\t\"nvidia\": {\"path\": \"/usr/bin/x\", "
		"\"args\": []}\n\t},\n\t\"default-runtime\": \"nvidia\"\n}\n";
	static const char bad[] = "{\n  \"a\": 1\n  \"b\": 2\n}\n";
	struct ytree doc = { 0 };
	const struct ytree_node *root, *nv;
	struct ytree_error err;

	(void)state;
	assert_int_equal(ytree_load(&doc, json, strlen(json), YTREE_JSON, YTREE_NODES_MAX, &err),
			 0);
	root = ytree_root(&doc);
	assert_int_equal(root->kind, YTREE_MAP);
	nv = ytree_get(&doc, ytree_get(&doc, root, "runtimes"), "nvidia");
	assert_non_null(nv);
	assert_int_equal(nv->line, 4);
	assert_string_equal(ytree_str(ytree_get(&doc, nv, "path")), "/usr/bin/x");
	assert_int_equal(ytree_get(&doc, nv, "args")->kind, YTREE_SEQ);
	assert_string_equal(ytree_str(ytree_get(&doc, root, "default-runtime")), "nvidia");
	assert_null(ytree_get(&doc, root, "missing"));
	assert_null(ytree_str(nv));
	ytree_release(&doc);

	assert_int_equal(ytree_load(&doc, bad, strlen(bad), YTREE_JSON, YTREE_NODES_MAX, &err),
			 -EINVAL);
	assert_null(ytree_root(&doc));
	assert_int_equal(err.line, 3);
	assert_true(err.message[0]);
	ytree_release(&doc);

	assert_int_equal(ytree_load(&doc, "", 0, YTREE_JSON, YTREE_NODES_MAX, &err), 0);
	assert_null(ytree_root(&doc));
	ytree_release(&doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_containerd_config), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_truncations),	  cmocka_unit_test(test_oom),
		cmocka_unit_test(test_yaml_tree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
