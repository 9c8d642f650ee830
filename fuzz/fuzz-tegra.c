/*
 * libFuzzer target for the parsers behind the Tegra telemetry (tegra-parse.h): the bytes
 * as one sysfs or procfs file (as read: not NUL-terminated, may hold NULs), given to each
 * parser. Findings, besides crashes and reads past the end: a number accepted from anything
 * but digits (a '-' first for an int) and one trailing '\n'; a name that is not printable
 * ASCII, does not fit, or is not the input less its trailing '\n' and NULs; an output written
 * on an error; a meminfo answer that changes when a line naming none of its keys is added
 * after the last complete line.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tegra-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* @s (@n bytes) is digits, '-' first when @sign, then at most one '\n'. */
static bool number_form(const char *s, size_t n, bool sign)
{
	size_t i = 0;

	if (n > 0 && s[n - 1] == '\n')
		n--;
	if (sign && n > 0 && s[0] == '-')
		i++;
	if (i == n)
		return false;
	for (; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static void check_numbers(const char *s, size_t n)
{
	uint64_t u = 42;
	int i = 42, r;

	r = tegra_parse_u64(s, n, &u);
	if ((r == 0 && !number_form(s, n, false)) || (r < 0 && u != 42) ||
	    (r < 0 && r != -EINVAL && r != -ERANGE))
		abort();
	r = tegra_parse_int(s, n, &i);
	if ((r == 0 && !number_form(s, n, true)) || (r < 0 && i != 42) ||
	    (r < 0 && r != -EINVAL && r != -ERANGE))
		abort();
}

static void check_name(const char *s, size_t n)
{
	char out[32];
	size_t l, k = n;
	int r;

	memset(out, 'x', sizeof(out));
	r = tegra_parse_name(s, n, out, sizeof(out));
	if (r < 0) {
		if (r != -EINVAL && r != -ENAMETOOLONG)
			abort();
		for (size_t i = 0; i < sizeof(out); i++)
			if (out[i] != 'x')
				abort();
		return;
	}
	l = strnlen(out, sizeof(out));
	if (l == 0 || l == sizeof(out))
		abort();
	while (k > 0 && (s[k - 1] == '\n' || s[k - 1] == 0))
		k--;
	if (k != l || memcmp(out, s, l) != 0)
		abort();
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
			abort();
}

static void check_meminfo(const char *s, size_t n)
{
	static const char extra[] = "NvMapMemUsed:     310000 kB\n";
	uint64_t t = 1, a = 2, t2 = 3, a2 = 4;
	char *more;
	int r, r2;

	r = tegra_parse_meminfo(s, n, &t, &a);
	if (r < 0 && (t != 1 || a != 2 || (r != -ENODATA && r != -ERANGE)))
		abort();
	if (r == 0 && (t % 1024 != 0 || a % 1024 != 0))
		abort();
	/* A line after the last complete one, naming no key: the same answer. */
	if (n == 0 || s[n - 1] != '\n')
		return;
	more = malloc(n + sizeof(extra));
	if (!more)
		return;
	memcpy(more, s, n);
	memcpy(more + n, extra, sizeof(extra) - 1);
	r2 = tegra_parse_meminfo(more, n + sizeof(extra) - 1, &t2, &a2);
	free(more);
	if (r2 != r || (r == 0 && (t2 != t || a2 != a)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;

	check_numbers(s, size);
	check_name(s, size);
	check_meminfo(s, size);
	return 0;
}
