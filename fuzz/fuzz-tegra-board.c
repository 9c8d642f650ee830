/*
 * libFuzzer target for the Tegra board parsers (src/gpu/tegra/tegra-board.h): the bytes as
 * each file's text (not NUL-terminated; copied to a buffer of their exact size so that a read
 * past the end is caught). nvpmodel takes two files: the bytes up to the first 0x01 are the
 * conf, the rest the status. Findings, besides crashes and reads past the end: a result other
 * than 0 or -EBADMSG, an output not NUL-terminated in its buffer, output left on -EBADMSG, an
 * L4T release that is not digits and dots (with the major at its head), a SoC that is not
 * "tegra" and digits, a model or mode name with a control character, a chip id outside 1..255.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tegra-board.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t size, int r)
{
	size_t n = strnlen(s, size);

	if (n == size || (r < 0 && n))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			abort();
}

static bool digits_dots(const char *s)
{
	return *s && strspn(s, "0123456789.") == strlen(s) && *s != '.';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1), l4t[32], soc[32], model[96], line[32], mode[64];
	const char *sep;
	unsigned chip;
	int r, major, tegra;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	r = tegra_parse_release(buf, size, l4t, sizeof(l4t), &major);
	if ((r != 0 && r != -EBADMSG) || strnlen(l4t, sizeof(l4t)) == sizeof(l4t) ||
	    (r == 0 ? !digits_dots(l4t) || major <= 0 || strtoul(l4t, NULL, 10) != (unsigned)major :
		      l4t[0] || major))
		abort();
	r = tegra_parse_compatible(buf, size, soc, sizeof(soc), &tegra);
	if ((r != 0 && r != -EBADMSG) || (r == 0) != (tegra != 0) ||
	    strnlen(soc, sizeof(soc)) == sizeof(soc) ||
	    (soc[0] &&
	     (strncmp(soc, "tegra", 5) != 0 || !digits_dots(soc + 5) || strchr(soc, '.'))) ||
	    (soc[0] && !tegra))
		abort();
	r = tegra_parse_model(buf, size, model, sizeof(model));
	if (r != 0 && r != -EBADMSG)
		abort();
	check_text(model, sizeof(model), r);
	r = tegra_parse_line(buf, size, line, sizeof(line));
	if (r != 0 && r != -EBADMSG)
		abort();
	check_text(line, sizeof(line), r);
	r = tegra_parse_chip_id(buf, size, &chip);
	if ((r != 0 && r != -EBADMSG) || (r == 0 ? chip == 0 || chip > 255 : chip != 0))
		abort();
	sep = memchr(buf, 1, size);
	r = tegra_parse_nvpmodel(buf, sep ? (size_t)(sep - buf) : size, sep ? sep + 1 : buf + size,
				 sep ? size - (size_t)(sep - buf) - 1 : 0, mode, sizeof(mode));
	if (r != 0 && r != -EBADMSG)
		abort();
	check_text(mode, sizeof(mode), r);
	(void)tegra_jetpack_of(l4t);
	free(buf);
	return 0;
}
