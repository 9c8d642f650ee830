/*
 * The board of a Tegra host (gpu-tegra.h tegra_board_read()) and the parsers of its files
 * (tegra-board.h): nv_tegra_release, soc0, the device tree, nvpmodel, /proc/meminfo.
 */

#define LOG_MODULE "gpu-tegra"

#include "tegra-board.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "file-read.h"
#include "gpu-tegra.h"
#include "log.h"
#include "util.h"

/* The largest file the board's reader takes: each is a line or a few dozen. */
#define BOARD_FILE_MAX ((size_t)64 * 1024)

/* The line of @buf that starts at @p, up to @end: its length without the newline. */
static size_t line_len(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return (size_t)((nl ? nl : end) - p);
}

static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* Copies @n bytes of @s, trimmed of blanks at both ends, into @out; -EBADMSG when it does not
   fit, is empty, or holds anything but printable ASCII. */
static int copy_trimmed(const char *s, size_t n, char *out, size_t size)
{
	*out = 0;
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	if (n == 0 || n >= size || !printable(s, n))
		return -EBADMSG;
	memcpy(out, s, n);
	out[n] = 0;
	return 0;
}

/* A decimal number of 1-3 digits at *@p (before @end), advanced past it; -1 when none. */
static int small_number(const char **p, const char *end)
{
	int v = 0, n = 0;

	while (*p < end && **p >= '0' && **p <= '9' && n < 4) {
		v = v * 10 + (**p - '0');
		(*p)++;
		n++;
	}
	return n == 0 || n > 3 ? -1 : v;
}

/* How many bytes from @p (before @end) are digits. Bounded: the buffer has no NUL. */
static size_t digits_at(const char *p, const char *end)
{
	size_t n = 0;

	while (p + n < end && p[n] >= '0' && p[n] <= '9')
		n++;
	return n;
}

static bool skip(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
		return false;
	*p += n;
	return true;
}

int tegra_parse_release(const char *buf, size_t len, char *l4t, size_t size, int *major)
{
	const char *p = buf, *end = buf + line_len(buf, buf + len);
	int maj, min1, min2 = -1;

	*l4t = 0;
	*major = 0;
	if (!skip(&p, end, "# R"))
		return -EBADMSG;
	maj = small_number(&p, end);
	if (maj <= 0 || !skip(&p, end, " (release), REVISION: "))
		return -EBADMSG;
	min1 = small_number(&p, end);
	if (min1 < 0)
		return -EBADMSG;
	if (skip(&p, end, ".")) {
		min2 = small_number(&p, end);
		if (min2 < 0)
			return -EBADMSG;
	}
	if (p < end && *p != ',')
		return -EBADMSG;
	if (min2 >= 0 ? snprintf(l4t, size, "%d.%d.%d", maj, min1, min2) >= (int)size :
			snprintf(l4t, size, "%d.%d", maj, min1) >= (int)size) {
		*l4t = 0;
		return -EBADMSG;
	}
	*major = maj;
	return 0;
}

int tegra_parse_compatible(const char *buf, size_t len, char *soc, size_t size, int *tegra_ret)
{
	static const char prefix[] = "nvidia,tegra";
	const char *p = buf, *end = buf + len;

	*soc = 0;
	*tegra_ret = 0;
	while (p < end) {
		const char *nul = memchr(p, 0, (size_t)(end - p));
		size_t n = (size_t)((nul ? nul : end) - p), digits;

		if (n > sizeof(prefix) - 1 && memcmp(p, prefix, sizeof(prefix) - 1) == 0) {
			const char *d = p + sizeof(prefix) - 1;

			*tegra_ret = 1;
			digits = n - (sizeof(prefix) - 1);
			/* "nvidia,tegra234" is the SoC; "nvidia,tegra234-gpu" would be a block. */
			if (!*soc && digits >= 2 && digits <= 4 &&
			    digits_at(d, d + digits) == digits && digits + 6 < size)
				(void)snprintf(soc, size, "tegra%.*s", (int)digits, d);
		}
		p += n + 1;
	}
	return *tegra_ret ? 0 : -EBADMSG;
}

int tegra_parse_model(const char *buf, size_t len, char *model, size_t size)
{
	const char *nul = memchr(buf, 0, len);

	/* The device tree's strings end in a NUL; trailing newline or NULs are tolerated. */
	return copy_trimmed(buf, line_len(buf, nul ? nul : buf + len), model, size);
}

int tegra_parse_line(const char *buf, size_t len, char *out, size_t size)
{
	return copy_trimmed(buf, line_len(buf, buf + len), out, size);
}

int tegra_parse_chip_id(const char *buf, size_t len, unsigned *ret)
{
	char s[16];
	unsigned v;

	*ret = 0;
	if (copy_trimmed(buf, line_len(buf, buf + len), s, sizeof(s)) < 0 || safe_atou(s, &v) < 0 ||
	    v == 0 || v > 255)
		return -EBADMSG;
	*ret = v;
	return 0;
}

/* The value of " KEY=value" in the "< POWER_MODEL ... >" line [@p, @end), or -EBADMSG. */
static int model_attr(const char *p, const char *end, const char *key, const char **val, size_t *n)
{
	size_t k = strlen(key);

	for (; p + k < end; p++)
		if ((p[-1] == ' ' || p[-1] == '\t') && memcmp(p, key, k) == 0 && p[k] == '=') {
			*val = p + k + 1;
			*n = 0;
			while (*val + *n < end && !strchr(" \t>\r", (*val)[*n]))
				(*n)++;
			return 0;
		}
	return -EBADMSG;
}

int tegra_parse_nvpmodel(const char *conf, size_t conf_len, const char *status, size_t status_len,
			 char *name, size_t size)
{
	const char *p = status, *end = status + line_len(status, status + status_len);
	int id;

	*name = 0;
	if (!skip(&p, end, "pmode:"))
		return -EBADMSG;
	/* "pmode:0002": four digits, leading zeros. */
	while (p < end - 1 && *p == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	id = small_number(&p, end);
	if (id < 0 || (p < end && *p != ' ' && *p != '\t' && *p != '\r'))
		return -EBADMSG;
	for (p = conf; p < conf + conf_len;) {
		size_t n = line_len(p, conf + conf_len);
		const char *le = p + n, *v;
		size_t vn;
		char num[8];
		unsigned u;

		if (n > 15 && memcmp(p, "< POWER_MODEL ", 14) == 0 &&
		    model_attr(p + 1, le, "ID", &v, &vn) == 0 && vn < sizeof(num)) {
			memcpy(num, v, vn);
			num[vn] = 0;
			if (safe_atou(num, &u) == 0 && u == (unsigned)id &&
			    model_attr(p + 1, le, "NAME", &v, &vn) == 0)
				return copy_trimmed(v, vn, name, size);
		}
		p = le + (le < conf + conf_len);
	}
	return -EBADMSG;
}

const char *tegra_soc_of_chip(unsigned chip_id)
{
	switch (chip_id) {
	case 33:
		return "tegra210";
	case 24:
		return "tegra186";
	case 25:
		return "tegra194";
	case 35:
		return "tegra234";
	case 38:
		return "tegra264";
	default:
		return "";
	}
}

const char *tegra_jetpack_of(const char *l4t)
{
	/* The releases docs/jetson.md sources; a prefix ending in "." takes every patch level. */
	static const struct {
		const char *l4t, *jetpack;
	} table[] = {
		{ "32.7.4", "4.6.4" }, { "35.4.1", "5.1.2" }, { "36.4.3", "6.2" },
		{ "38.2.", "7.0" },    { "38.2", "7.0" },     { "38.4", "7.1" },
		{ "39.2", "7.2" },
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		size_t n = strlen(table[i].l4t);

		if (table[i].l4t[n - 1] == '.' ? strncmp(l4t, table[i].l4t, n) == 0 :
						 streq(l4t, table[i].l4t))
			return table[i].jetpack;
	}
	return "";
}

/* --- reading the host's files --- */

/*
 * Reads @rel under @root (resolved inside it: an absolute link such as proc/device-tree starts
 * again at the root). Returns 0, or -errno after a log line naming the file: debug for a file
 * that is not there (boards differ), warn for one that is there and cannot be read.
 */
static int board_file(const char *root, const char *rel, char **ret, size_t *ret_len)
{
	int r = root_read_file(root, rel, BOARD_FILE_MAX, ret, ret_len);

	if (r == -ENOENT || r == -ENOTDIR)
		log_debug("tegra board file not found", "root=%s file=%s", root, rel);
	else if (r < 0)
		log_warn_errno(r, "tegra board file cannot be read, leaving its fields empty",
			       "root=%s file=%s", root, rel);
	return r;
}

static void bad_file(const char *root, const char *rel)
{
	log_warn("tegra board file holds no value we understand, leaving its fields empty",
		 "root=%s file=%s", root, rel);
}

/* The device tree's file @name, first at sys/firmware/devicetree/base, then proc/device-tree. */
static int dt_file(const char *root, const char *name, char **ret, size_t *ret_len)
{
	char rel[96];
	int r;

	(void)snprintf(rel, sizeof(rel), "sys/firmware/devicetree/base/%s", name);
	r = board_file(root, rel, ret, ret_len);
	if (r != -ENOENT && r != -ENOTDIR)
		return r;
	(void)snprintf(rel, sizeof(rel), "proc/device-tree/%s", name);
	return board_file(root, rel, ret, ret_len);
}

static void read_power_mode(const char *root, struct gpu_board *b)
{
	char *conf = NULL, *status = NULL;
	size_t conf_len, status_len;

	if (board_file(root, "var/lib/nvpmodel/status", &status, &status_len) < 0 ||
	    board_file(root, "etc/nvpmodel.conf", &conf, &conf_len) < 0)
		goto out;
	if (tegra_parse_nvpmodel(conf, conf_len, status, status_len, b->power_mode,
				 sizeof(b->power_mode)) < 0)
		log_warn("nvpmodel's mode in force is not in its conf file, or a file holds "
			 "garbage: no power mode",
			 "root=%s files=%s", root, "var/lib/nvpmodel/status,etc/nvpmodel.conf");
out:
	free(conf);
	free(status);
}

int tegra_board_read(const char *host_root, struct gpu_board *ret)
{
	const char *root = host_root && *host_root ? host_root : "/";
	struct gpu_board b = { 0 };
	char *text = NULL, family[32] = "";
	size_t len;
	int has_compat = 0, r;

	memset(ret, 0, sizeof(*ret));
	/* NVIDIA's rule, first file: the L4T release. */
	r = board_file(root, "etc/nv_tegra_release", &text, &len);
	if (r != -ENOENT && r != -ENOTDIR)
		b.tegra = true; /* present, even when unreadable */
	if (r == -ENOMEM)
		return -ENOMEM;
	if (r >= 0 && tegra_parse_release(text, len, b.l4t, sizeof(b.l4t), &b.l4t_major) < 0)
		bad_file(root, "etc/nv_tegra_release");
	text = mfree(text);
	/* soc0: the family ("Tegra", or "tegra210" on old kernels) and the chip id. */
	r = board_file(root, "sys/devices/soc0/family", &text, &len);
	if (r >= 0 && tegra_parse_line(text, len, family, sizeof(family)) < 0)
		bad_file(root, "sys/devices/soc0/family");
	if (strncasecmp(family, "tegra", 5) == 0)
		b.tegra = true;
	text = mfree(text);
	r = board_file(root, "sys/devices/soc0/soc_id", &text, &len);
	if (r >= 0 && tegra_parse_chip_id(text, len, &b.chip_id) < 0)
		bad_file(root, "sys/devices/soc0/soc_id");
	text = mfree(text);
	/* The device tree: compatible names the SoC, model the board. */
	r = dt_file(root, "compatible", &text, &len);
	if (r >= 0 && tegra_parse_compatible(text, len, b.soc, sizeof(b.soc), &has_compat) < 0)
		log_debug("device-tree compatible names no Tegra SoC", "root=%s", root);
	if (has_compat)
		b.tegra = true;
	text = mfree(text);
	if (!b.tegra) {
		log_debug("no Tegra files under the host root", "root=%s", root);
		return 0;
	}
	r = dt_file(root, "model", &text, &len);
	if (r >= 0 && tegra_parse_model(text, len, b.model, sizeof(b.model)) < 0)
		bad_file(root, "device-tree model");
	text = mfree(text);
	if (!b.soc[0])
		(void)snprintf(b.soc, sizeof(b.soc), "%s", tegra_soc_of_chip(b.chip_id));
	/* Old L4T kernels wrote the SoC itself as the family ("tegra210"). */
	if (!b.soc[0] && strlen(family) > 5 &&
	    strspn(family + 5, "0123456789") == strlen(family) - 5)
		(void)snprintf(b.soc, sizeof(b.soc), "%s", family);
	(void)snprintf(b.jetpack, sizeof(b.jetpack), "%s", tegra_jetpack_of(b.l4t));
	read_power_mode(root, &b);
	*ret = b;
	return 1;
}
