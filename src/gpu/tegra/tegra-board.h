#pragma once

/*
 * The parsers behind tegra_board_read() (gpu-tegra.h): each one a pure function of a buffer
 * as read from the host's file (not NUL-terminated, any bytes), so that a fuzzer can drive it
 * (fuzz/fuzz-tegra.c). Each returns 0 and fills its output, or -EBADMSG when the buffer does
 * not hold what the file should (outputs then empty: "" or 0); never reads past @len. Any
 * thread. The files and their formats are in docs/jetson.md.
 */

#include <stddef.h>
#include <stdint.h>

/*
 * etc/nv_tegra_release: its first line "# R36 (release), REVISION: 4.3, ..." gives @l4t
 * "36.4.3" (@size bytes) and *@major 36. The BOARD field is ignored (often wrong).
 */
int tegra_parse_release(const char *buf, size_t len, char *l4t, size_t size, int *major);

/*
 * The device tree's compatible (NUL-separated strings): the SoC entry "nvidia,tegraNNN" gives
 * @soc "tegraNNN". *@tegra_ret is set true when any entry starts with "nvidia,tegra".
 */
int tegra_parse_compatible(const char *buf, size_t len, char *soc, size_t size, int *tegra_ret);

/* The device tree's model (a NUL-terminated string): printable text only, trimmed. */
int tegra_parse_model(const char *buf, size_t len, char *model, size_t size);

/* A one-line sysfs text value (soc0/family): trimmed, printable. */
int tegra_parse_line(const char *buf, size_t len, char *out, size_t size);

/* soc0/soc_id: a decimal chip id 1..255. */
int tegra_parse_chip_id(const char *buf, size_t len, unsigned *ret);

/*
 * nvpmodel: the mode whose ID the status file names ("pmode:0002 ..."), by the conf file's
 * "< POWER_MODEL ID=2 NAME=MAXN_SUPER >" lines: its NAME into @name.
 */
int tegra_parse_nvpmodel(const char *conf, size_t conf_len, const char *status, size_t status_len,
			 char *name, size_t size);

/* The SoC of a chip id (33 -> "tegra210", ...); "" for one not known. */
const char *tegra_soc_of_chip(unsigned chip_id);

/* The JetPack release of an L4T release ("36.4.3" -> "6.2"); "" for one not known. */
const char *tegra_jetpack_of(const char *l4t);
