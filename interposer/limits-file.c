#include "limits-file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * No libc beyond string functions and snprintf: the interposer parses this before anything
 * else is set up, in any process of the container, and must not allocate.
 */

static bool uuid_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= REGION_UUID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

int limits_format(const struct limits *l, char *buf, size_t size)
{
	size_t off = 0;
	int n;

	if (l->n_gpus == 0 || l->n_gpus > REGION_GPUS_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < l->n_gpus; i++)
		if (!uuid_ok(l->gpus[i].uuid))
			return -EINVAL;
	n = snprintf(buf, size, "edgegpu-limits %d\nmode %s\nmanaged %s\n", LIMITS_VERSION,
		     l->report_only ? "report" : "enforce", l->count_managed ? "count" : "ignore");
	if (n < 0 || (size_t)n >= size)
		return -ENOSPC;
	off = (size_t)n;
	for (unsigned i = 0; i < l->n_gpus; i++) {
		n = snprintf(buf + off, size - off, "gpu %s %llu\n", l->gpus[i].uuid,
			     (unsigned long long)l->gpus[i].limit);
		if (n < 0 || (size_t)n >= size - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	return (int)off;
}

/* One whitespace-separated word of [*p, end) into @w (NUL-terminated); false if none fits. */
static bool word(const char **p, const char *end, char *w, size_t size)
{
	size_t n = 0;

	while (*p < end && (**p == ' ' || **p == '\t'))
		(*p)++;
	while (*p < end && **p != ' ' && **p != '\t') {
		if (n + 1 >= size)
			return false;
		w[n++] = *(*p)++;
	}
	w[n] = '\0';
	return n > 0;
}

static bool parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return true;
}

int limits_parse(const char *text, size_t len, struct limits *ret, unsigned *reterr_line)
{
	struct limits l = { .count_managed = true };
	bool have_version = false, have_mode = false;
	const char *p = text, *end = text + len;
	unsigned line = 0;

	if (len > LIMITS_FILE_MAX)
		goto bad;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char key[32], a[REGION_UUID_MAX], b[32], extra[8];

		if (!eol)
			eol = end;
		line++;
		if (memchr(p, '\0', (size_t)(eol - p)))
			goto bad;
		if (!word(&p, eol, key, sizeof(key))) {
			p = eol + 1;
			continue; /* an empty line, or a key too long for any we know */
		}
		if (!have_version) {
			uint64_t v;

			if (strcmp(key, "edgegpu-limits") != 0 || !word(&p, eol, b, sizeof(b)) ||
			    !parse_u64(b, &v) || v != LIMITS_VERSION)
				goto bad;
			have_version = true;
		} else if (!strcmp(key, "mode")) {
			if (!word(&p, eol, a, sizeof(a)))
				goto bad;
			if (!strcmp(a, "enforce"))
				l.report_only = false;
			else if (!strcmp(a, "report"))
				l.report_only = true;
			else
				goto bad;
			have_mode = true;
		} else if (!strcmp(key, "managed")) {
			if (!word(&p, eol, a, sizeof(a)))
				goto bad;
			if (!strcmp(a, "count"))
				l.count_managed = true;
			else if (!strcmp(a, "ignore"))
				l.count_managed = false;
			else
				goto bad;
		} else if (!strcmp(key, "gpu")) {
			/* A UUID limits_format() would refuse (a control byte) is refused here too. */
			if (l.n_gpus >= REGION_GPUS_MAX || !word(&p, eol, a, sizeof(a)) ||
			    !uuid_ok(a) || !word(&p, eol, b, sizeof(b)) ||
			    !parse_u64(b, &l.gpus[l.n_gpus].limit))
				goto bad;
			memcpy(l.gpus[l.n_gpus].uuid, a, sizeof(a));
			l.n_gpus++;
		} else {
			p = eol + 1; /* a key of a newer plugin */
			continue;
		}
		if (word(&p, eol, extra, sizeof(extra)))
			goto bad; /* trailing words on a line we know */
		p = eol + 1;
	}
	if (!have_version || !have_mode || l.n_gpus == 0) {
		line = 0;
		goto bad;
	}
	*ret = l;
	return 0;
bad:
	if (reterr_line)
		*reterr_line = line;
	return -EBADMSG;
}
