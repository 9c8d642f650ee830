/*
 * config-value.c: the scalars of NVIDIA's schema read as its Go code reads them (YAML 1.1 and
 * strconv.ParseBool booleans, Go base-0 integers, time.ParseDuration durations) and written
 * back (durations as Go prints them); resource names normalised as NewResourceName does; and
 * the quoting of user text in messages.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-int.h"

/* Renders @s for a message: quoted, escaped, cut after 60 characters. Returns @out. */
const char *config_quote(char *out, size_t size, const char *s)
{
	size_t o = 0, i;

	if (size < 8) {
		out[0] = 0;
		return out;
	}
	out[o++] = '"';
	for (i = 0; s && s[i] && o + 8 < size; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i >= 60) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (ch == '\t') {
			out[o++] = '\\';
			out[o++] = 't';
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o++] = '"';
	out[o] = 0;
	return out;
}

/* Looks @s up in parallel tables of true and false spellings. */
static int bool_lookup(const char *s, const char *const *t, const char *const *f, size_t n,
		       bool *ret)
{
	for (size_t i = 0; i < n; i++) {
		if (streq(s, t[i])) {
			*ret = true;
			return 0;
		}
		if (streq(s, f[i])) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

int config_parse_go_bool(const char *s, bool *ret)
{
	static const char *const t[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const f[] = { "0", "f", "F", "FALSE", "false", "False" };

	return bool_lookup(s, t, f, ELEMENTSOF(t), ret);
}

/* go-yaml v2 (YAML 1.1) booleans, as sigs.k8s.io/yaml resolves plain scalars. */
int config_parse_yaml_bool(const char *s, bool *ret)
{
	static const char *const t[] = { "y",	 "Y",	 "yes", "Yes", "YES", "true",
					 "True", "TRUE", "on",	"On",  "ON" };
	static const char *const f[] = { "n",	  "N",	   "no",  "No",	 "NO", "false",
					 "False", "FALSE", "off", "Off", "OFF" };

	return bool_lookup(s, t, f, ELEMENTSOF(t), ret);
}

/*
 * Go's strconv.ParseInt(s, 0, 64) / ParseUint, which go-yaml v2 applies after dropping
 * underscores: optional sign, then 0x, 0o, 0b or a leading 0 (octal), or decimal.
 */
int config_parse_go_int(const char *s, bool underscores, uint64_t *ret, bool *ret_neg)
{
	char tmp[80];
	size_t n = 0;
	const char *p;
	unsigned base = 10;
	uint64_t v = 0;
	bool neg = false;

	for (p = s; *p; p++) {
		if (*p == '_' && underscores)
			continue;
		if (n + 1 >= sizeof(tmp))
			return -ERANGE;
		tmp[n++] = *p;
	}
	tmp[n] = 0;
	p = tmp;
	if (*p == '+' || *p == '-') {
		neg = *p == '-';
		p++;
	}
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	} else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
		base = 8;
		p += 2;
	} else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
		base = 2;
		p += 2;
	} else if (p[0] == '0' && p[1]) {
		base = 8;
		p++;
	}
	if (!*p)
		return -EINVAL;
	for (; *p; p++) {
		unsigned dg;

		if (*p >= '0' && *p <= '9')
			dg = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			dg = (unsigned)(*p - 'a') + 10;
		else if (*p >= 'A' && *p <= 'F')
			dg = (unsigned)(*p - 'A') + 10;
		else
			return -EINVAL;
		if (dg >= base)
			return -EINVAL;
		if (v > (UINT64_MAX - dg) / base)
			return -ERANGE;
		v = v * base + dg;
	}
	if (neg && v > (uint64_t)INT64_MAX + 1)
		return -ERANGE;
	*ret = v;
	*ret_neg = neg && v != 0;
	return 0;
}

/*
 * Go's time.ParseDuration, converted to microseconds (sub-microsecond parts are dropped).
 * Returns 0 and sets *ret_neg for a negative duration, or -EINVAL / -ERANGE.
 */
int config_parse_go_duration(const char *s, usec_t *ret, bool *ret_neg)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{ "ns", 1 },
		{ "us", 1000 },
		{ "\xc2\xb5s", 1000 }, /* U+00B5 micro sign */
		{ "\xce\xbcs", 1000 }, /* U+03BC Greek mu */
		{ "ms", 1000000 },
		{ "s", 1000000000ULL },
		{ "m", 60ULL * 1000000000ULL },
		{ "h", 3600ULL * 1000000000ULL },
	};
	uint64_t total = 0;
	bool neg = false;

	if (*s == '+' || *s == '-') {
		neg = *s == '-';
		s++;
	}
	if (streq(s, "0")) {
		*ret = 0;
		*ret_neg = false;
		return 0;
	}
	if (!*s)
		return -EINVAL;
	while (*s) {
		uint64_t v = 0, f = 0, scale = 1, add;
		bool pre = false, post = false;
		size_t u, ul = 0;

		while (*s >= '0' && *s <= '9') {
			if (v > ((uint64_t)INT64_MAX - 9) / 10)
				return -ERANGE;
			v = v * 10 + (uint64_t)(*s++ - '0');
			pre = true;
		}
		if (*s == '.') {
			s++;
			while (*s >= '0' && *s <= '9') {
				if (scale < 1000000000000000000ULL) {
					f = f * 10 + (uint64_t)(*s - '0');
					scale *= 10;
				}
				s++;
				post = true;
			}
		}
		if (!pre && !post)
			return -EINVAL;
		for (u = 0; u < ELEMENTSOF(units); u++) {
			ul = strlen(units[u].name);
			if (strncmp(s, units[u].name, ul) == 0)
				break;
		}
		if (u == ELEMENTSOF(units))
			return -EINVAL;
		s += ul;
		if (v > (uint64_t)INT64_MAX / units[u].ns)
			return -ERANGE;
		add = v * units[u].ns;
		if (f)
			add += (uint64_t)((double)f * ((double)units[u].ns / (double)scale));
		if (add > (uint64_t)INT64_MAX - total)
			return -ERANGE;
		total += add;
	}
	*ret = total / NS_PER_USEC;
	*ret_neg = neg && total != 0;
	return 0;
}

/* Appends "<whole>[.<frac>]<unit>" with trailing zeros of the fraction dropped. */
static size_t format_frac(char *out, size_t size, uint64_t whole, uint64_t frac, unsigned digits,
			  const char *unit)
{
	char f[16];
	int n;

	(void)snprintf(f, sizeof(f), "%0*" PRIu64, (int)digits, frac);
	for (n = (int)digits; n > 0 && f[n - 1] == '0'; n--)
		;
	f[n] = 0;
	n = snprintf(out, size, "%" PRIu64 "%s%s%s", whole, *f ? "." : "", f, unit);
	return n < 0 ? 0 : MIN((size_t)n, size);
}

/*
 * Formats @u the way Go's Duration.String() does, less its zero components, so that
 * config_parse_go_duration() reads it back: "0s", "250us", "1.5ms", "1h2m3.5s".
 */
const char *config_format_duration(char *out, size_t size, usec_t u)
{
	size_t o = 0;

	if (u == 0) {
		(void)snprintf(out, size, "0s");
		return out;
	}
	if (u < USEC_PER_MSEC) {
		(void)snprintf(out, size, "%" PRIu64 "us", u);
		return out;
	}
	if (u < USEC_PER_SEC) {
		(void)format_frac(out, size, u / USEC_PER_MSEC, u % USEC_PER_MSEC, 3, "ms");
		return out;
	}
	out[0] = 0;
	if (u >= 3600 * USEC_PER_SEC)
		o += (size_t)snprintf(out + o, size - o, "%" PRIu64 "h", u / (3600 * USEC_PER_SEC));
	u %= 3600 * USEC_PER_SEC;
	if (u >= 60 * USEC_PER_SEC && o < size)
		o += (size_t)snprintf(out + o, size - o, "%" PRIu64 "m", u / (60 * USEC_PER_SEC));
	u %= 60 * USEC_PER_SEC;
	if (u && o < size)
		(void)format_frac(out + o, size - o, u / USEC_PER_SEC, u % USEC_PER_SEC, 6, "s");
	return out;
}

/* NVIDIA's NewResourceName: "nvidia.com/" is added when missing; then a DNS subdomain. */
int config_resname_normalize(const char *in, char **ret)
{
	const char *p;
	char *s;
	size_t len;
	bool label_start = true;

	if (strncmp(in, RESNAME_PREFIX, strlen(RESNAME_PREFIX)) == 0)
		s = strdup(in);
	else
		s = strdup_printf(RESNAME_PREFIX "%s", in);
	if (!s)
		return -ENOMEM;
	len = strlen(s);
	p = s + strlen(RESNAME_PREFIX);
	if (len > RESNAME_MAX || !*p)
		goto invalid;
	for (; *p; p++) {
		bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');

		if (*p == '.') {
			if (label_start || p[-1] == '-')
				goto invalid;
			label_start = true;
			continue;
		}
		if (!alnum && *p != '-')
			goto invalid;
		if (label_start && !alnum)
			goto invalid;
		label_start = false;
	}
	if (label_start || p[-1] == '-')
		goto invalid;
	*ret = s;
	return 0;
invalid:
	free(s);
	return -EINVAL;
}
