#pragma once

/*
 * The pure parsers behind the Tegra backend's sysfs and procfs reads (tegra-sample.c), one per
 * kind of file: public so that the fuzz target (fuzz/fuzz-tegra.c) and the unit test reach
 * them without a host tree, and tegra.c reads the same files the same way. Each takes the bytes as read (@buf, @len: not NUL-terminated, may hold NULs),
 * never reads past @len, allocates nothing, logs nothing, and on an error leaves its outputs
 * as they were. Any thread.
 */

#include <stddef.h>
#include <stdint.h>

/*
 * One sysfs number: decimal digits with at most one trailing '\n', nothing else (no sign, no
 * space, no NUL). Returns 0, -EINVAL (empty, garbage, a sign) or -ERANGE (past UINT64_MAX, or
 * longer than any uint64_t).
 */
int tegra_parse_u64(const char *buf, size_t len, uint64_t *ret);

/* As tegra_parse_u64(), signed, for an int ("-256000"): 0, -EINVAL or -ERANGE. */
int tegra_parse_int(const char *buf, size_t len, int *ret);

/*
 * A name: a sysfs attribute ("GPU-therm\n", "ina3221x\n") or a device-tree string ("gv11b\0"),
 * its trailing '\n' and NULs dropped, into @out (@size bytes, NUL-terminated). Returns 0;
 * -EINVAL when it is empty or holds a byte that is not printable ASCII (a NUL inside, a
 * control byte, UTF-8); -ENAMETOOLONG when it does not fit @out.
 */
int tegra_parse_name(const char *buf, size_t len, char *out, size_t size);

/*
 * /proc/meminfo: *@ret_total = MemTotal and *@ret_avail = MemAvailable, or where the kernel
 * has no MemAvailable (before 3.14) MemFree + Buffers + Cached, both in bytes. A line that is
 * not "Key: <digits> kB" is skipped; a key seen twice counts once (its first line). Returns 0
 * with both set; -ENODATA when either is missing (both left as they were); -ERANGE when a
 * value in bytes passes UINT64_MAX.
 */
int tegra_parse_meminfo(const char *buf, size_t len, uint64_t *ret_total, uint64_t *ret_avail);
