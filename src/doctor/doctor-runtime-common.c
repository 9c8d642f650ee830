/*
 * What the doctor's runtime layer shares (doctor-runtime.h): the toolkit's binaries, the notes a
 * check gathers before its status is known, the TOML loader for containerd's and the toolkit's
 * configs, and whether Docker is installed. doctor-runtime.c (runtime.layout,
 * runtime.containerd-nvidia) and doctor-cdi.c (runtime.toolkit, runtime.cdi, runtime.docker)
 * call down into this file; it calls neither.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor-runtime.h"
#include "doctor-toml.h"

const char *const doctor_runtime_bin_dirs[] = {
	"/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin", "/usr/local/nvidia/toolkit", NULL,
};

/* --- host paths --- */

static bool is_executable(const struct doctor *dr, const char *path)
{
	struct stat st;

	return doctor_stat(dr, path, &st, NULL) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

char *doctor_runtime_find_bin(const struct doctor *dr, const char *name, int *reterr)
{
	int r = -ENOENT;

	if (strchr(name, '/')) {
		if (name[0] == '/' && is_executable(dr, name)) {
			char *s = strdup(name);

			if (s)
				return s;
			r = -ENOMEM;
		}
		goto out;
	}
	for (size_t i = 0; doctor_runtime_bin_dirs[i]; i++) {
		char *p = path_join(doctor_runtime_bin_dirs[i], name);

		if (!p) {
			r = -ENOMEM;
			break;
		}
		if (is_executable(dr, p))
			return p;
		free(p);
	}
out:
	if (reterr)
		*reterr = r;
	return NULL;
}

void doctor_runtime_note(struct doctor_runtime_notes *n, const char *fmt, ...)
{
	char *line;
	va_list ap;

	va_start(ap, fmt);
	line = strdup_vprintf(fmt, ap);
	va_end(ap);
	/* Out of memory loses one line of evidence, never the check. */
	if (line && buf_printf(&n->b, "%s\n", line) < 0)
		buf_release(&n->b);
	free(line);
}

void doctor_runtime_emit(struct doctor *dr, struct doctor_runtime_notes *n, const char *id,
			 enum doctor_status st, const char *summary, const char *fix)
{
	struct doctor_check *c = doctor_add(dr, id, st, "%s", summary);
	const char *p = (const char *)n->b.data;

	while (p && *p) {
		size_t len = strcspn(p, "\n");

		doctor_evidence(c, "%.*s", (int)len, p);
		p += len + (p[len] == '\n');
	}
	if (st == DOCTOR_FAIL || st == DOCTOR_WARN)
		doctor_fix(c, fix);
	buf_release(&n->b);
}

int doctor_runtime_toml_load(const struct doctor *dr, struct doctor_runtime_notes *n,
			     const char *path, struct doctor_toml **ret, bool *base)
{
	unsigned line = 0, directives = 0;
	char *data = NULL, *err = NULL;
	bool pulls_base = false;
	size_t len = 0;
	int r;

	r = doctor_read(dr, path, DOCTOR_RUNTIME_MAX_FILE, &data, &len);
	if (r < 0) {
		doctor_runtime_note(n, "%s: %s", path, doctor_strerror(r));
		return r;
	}
	if (strlen(path) > 5 && streq(path + strlen(path) - 5, ".tmpl")) {
		for (char *p = data; p < data + len;) {
			char *eol = memchr(p, '\n', (size_t)(data + len - p));
			char *s = p + strspn(p, " \t");

			if (!eol)
				eol = data + len;
			if (s < eol && startswith(s, "{{")) {
				directives++;
				if (strstr(s, "template \"base\"") &&
				    strstr(s, "template \"base\"") < eol)
					pulls_base = true;
				memset(p, ' ', (size_t)(eol - p));
			}
			p = eol + 1;
		}
		doctor_runtime_note(n, "%s: a template; %u {{ }} line(s) not read%s", path,
				    directives,
				    pulls_base ? ", including k3s's base template" : "");
	}
	if (base)
		*base = pulls_base;
	r = doctor_toml_parse(data, len, ret, &line, &err);
	if (r == -EINVAL)
		doctor_runtime_note(n, "%s:%u: %s", path, line, err ? err : "invalid TOML");
	else if (r < 0)
		doctor_runtime_note(n, "%s: %s", path, strerror(-r));
	free(data);
	free(err);
	return r;
}

bool doctor_runtime_docker_present(const struct doctor *dr, char *why, size_t size)
{
	static const char *const signs[] = {
		DAEMON_JSON,
		"/var/run/docker.sock",
		"/run/docker.sock",
		"/etc/systemd/system/multi-user.target.wants/docker.service",
	};
	struct stat st;
	bool enabled;

	/* An enabled unit is a link (inside the root); what it points at may not be there. */
	enabled = doctor_lstat(dr, signs[ELEMENTSOF(signs) - 1], &st) == 0;
	for (size_t i = 0; i < ELEMENTSOF(signs); i++)
		if ((i == ELEMENTSOF(signs) - 1 && enabled) ||
		    doctor_stat(dr, signs[i], &st, NULL) == 0) {
			(void)snprintf(why, size, "%s present", signs[i]);
			return true;
		}
	return false;
}
