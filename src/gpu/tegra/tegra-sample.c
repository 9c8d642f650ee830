/*
 * The Tegra iGPU's telemetry from sysfs and procfs (tegra-int.h), as edge-metrics.md §1.3
 * finds it: the GPU's devfreq node by its device-tree name, the EMC's devfreq node (Thor), the
 * GPU's thermal zone, the INA3221 / INA238 power monitors, /proc/meminfo. Every path is
 * resolved inside the host root (root_open(): sysfs links are relative, and an absolute or
 * climbing one never leaves the root), every file is read with a cap and parsed strictly
 * (tegra-parse.h), and a file that is missing or holds garbage leaves only its own field
 * absent. This runs every second: it logs at debug level only, and nothing for a file that is
 * simply not there (Thor has no load file).
 */

#define LOG_MODULE "gpu-tegra"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "file-read.h"
#include "log.h"
#include "tegra-int.h"
#include "tegra-parse.h"
#include "util.h"

/*
 * Entries read per directory while finding the paths: a Jetson has about ten devfreq nodes,
 * twenty thermal zones and thirty i2c devices. A host tree with more is not a Jetson's sysfs,
 * and a hostile one must not make discovery unbounded.
 */
#define TEGRA_SCAN_MAX 256
/* The names looked for are short ("thermal_zone12", "17000000.gv11b"); a longer one is none. */
#define TEGRA_ENTRY_MAX 64
/* A sysfs value: a number or a name, far shorter than this; a longer file is garbage. */
#define TEGRA_VALUE_MAX 256
/* /proc/meminfo is about 1.5 KiB; room for a kernel that adds keys. */
#define TEGRA_MEMINFO_MAX ((size_t)64 * 1024)
/* Channels probed per monitor: INA3221's hwmon has in1..in6 and in7 (the shunt sum, skipped). */
#define TEGRA_CHANNELS_MAX 8

/* ---- the pure parsers (tegra-parse.h) ---- */

static size_t strip_newline(const char *buf, size_t len)
{
	return len > 0 && buf[len - 1] == '\n' ? len - 1 : len;
}

/* Copies one number's bytes, newline stripped, into @s for safe_ato*(). */
static int number_text(const char *buf, size_t len, char *s, size_t size)
{
	len = strip_newline(buf, len);
	if (len == 0 || memchr(buf, 0, len))
		return -EINVAL;
	if (len >= size) {
		/* Longer than any value of the type: out of range if it is a number at all. */
		for (size_t i = 0; i < len; i++)
			if ((buf[i] < '0' || buf[i] > '9') && !(i == 0 && buf[i] == '-'))
				return -EINVAL;
		return -ERANGE;
	}
	memcpy(s, buf, len);
	s[len] = 0;
	return 0;
}

int tegra_parse_u64(const char *buf, size_t len, uint64_t *ret)
{
	char s[21]; /* UINT64_MAX has 20 digits */
	int r = number_text(buf, len, s, sizeof(s));

	return r < 0 ? r : safe_atou64(s, ret);
}

int tegra_parse_int(const char *buf, size_t len, int *ret)
{
	char s[12]; /* "-2147483648" */
	int r = number_text(buf, len, s, sizeof(s));

	return r < 0 ? r : safe_atoi(s, ret);
}

int tegra_parse_name(const char *buf, size_t len, char *out, size_t size)
{
	/* sysfs ends a value with '\n', the device tree a string with NUL. */
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == 0))
		len--;
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			return -EINVAL;
	if (len >= size)
		return -ENAMETOOLONG;
	memcpy(out, buf, len);
	out[len] = 0;
	return 0;
}

enum {
	MI_TOTAL,
	MI_AVAILABLE,
	MI_FREE,
	MI_BUFFERS,
	MI_CACHED,
	MI_N
};

/*
 * One meminfo line "Key:   <digits> kB" (@n bytes, no '\n'): its key's index in @keys and the
 * value in bytes. Returns 1, 0 for a line that is none of ours or not of that form, -ERANGE.
 */
static int meminfo_line(const char *l, size_t n, const char *const *keys, unsigned *ret_key,
			uint64_t *ret)
{
	const char *colon = memchr(l, ':', n), *p, *end = l + n;
	uint64_t v = 0;
	unsigned k;

	if (!colon)
		return 0;
	for (k = 0; k < MI_N; k++)
		if (strlen(keys[k]) == (size_t)(colon - l) && memcmp(l, keys[k], colon - l) == 0)
			break;
	if (k == MI_N)
		return 0;
	for (p = colon + 1; p < end && *p == ' '; p++)
		;
	if (p == end || *p < '0' || *p > '9')
		return 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (end - p != 3 || memcmp(p, " kB", 3) != 0)
		return 0;
	if (v > UINT64_MAX / 1024)
		return -ERANGE;
	*ret_key = k;
	*ret = v * 1024;
	return 1;
}

int tegra_parse_meminfo(const char *buf, size_t len, uint64_t *ret_total, uint64_t *ret_avail)
{
	static const char *const keys[MI_N] = { "MemTotal", "MemAvailable", "MemFree", "Buffers",
						"Cached" };
	uint64_t v[MI_N] = { 0 }, val = 0;
	bool seen[MI_N] = { false };
	const char *p = buf, *end = buf + len;
	unsigned k = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
		int r = meminfo_line(p, (size_t)(le - p), keys, &k, &val);

		if (r < 0)
			return r;
		if (r > 0 && !seen[k]) {
			seen[k] = true;
			v[k] = val;
		}
		p = nl ? nl + 1 : end;
	}
	if (!seen[MI_TOTAL])
		return -ENODATA;
	if (seen[MI_AVAILABLE])
		val = v[MI_AVAILABLE];
	else if (seen[MI_FREE]) {
		/* Kernels before 3.14: what jtop sums. Each term is < 2^64 / 1024: no overflow. */
		val = v[MI_FREE] + v[MI_BUFFERS];
		if (val > UINT64_MAX - v[MI_CACHED])
			return -ERANGE;
		val += v[MI_CACHED];
	} else
		return -ENODATA;
	*ret_total = v[MI_TOTAL];
	*ret_avail = val;
	return 0;
}

/* ---- reading below the root ---- */

/* <@dir>/<@name> below the root into a heap buffer; -ENOENT when @dir is "" (not found). */
static int read_rel(int root_fd, const char *dir, const char *name, size_t max, char **ret,
		    size_t *ret_len)
{
	char path[PATH_MAX];
	int r;

	if (!dir[0])
		return -ENOENT;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	r = read_file_at(root_fd, path, READ_IN_ROOT, max, ret, ret_len, NULL);
	/* A missing file is a board without it (or early boot): not worth a line. */
	if (r < 0 && r != -ENOENT)
		(void)log_debug_errno(r, "telemetry file unreadable", "path=%s", log_q(path));
	return r;
}

/* The paths a sample on this thread reads, for note_read(); NULL while finding them. */
static _Thread_local struct tegra_paths *sampling;

/* The record of @key in @p, added when new; NULL when the table is full. Under files_lock. */
static struct tegra_file_seen *file_seen(struct tegra_paths *p, uint32_t key)
{
	for (unsigned i = 0; i < p->n_files; i++)
		if (p->files[i].key == key)
			return &p->files[i];
	if (p->n_files >= ELEMENTSOF(p->files))
		return NULL;
	p->files[p->n_files] = (struct tegra_file_seen){ .key = key };
	return &p->files[p->n_files++];
}

/*
 * Says, once per change, that <@dir>/<@name> went bad (@r < 0: unreadable or garbage, or
 * missing after it was read well: a file a board never had stays quiet) or is good again.
 */
static void note_read(const char *dir, const char *name, int r)
{
	struct tegra_paths *p = sampling;
	struct tegra_file_seen *f;
	bool warn = false, back = false;
	char path[PATH_MAX];

	if (!p || !dir[0])
		return;
	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	while (atomic_flag_test_and_set_explicit(&p->files_lock, memory_order_acquire))
		;
	f = file_seen(p, fnv1a(path));
	if (f && r >= 0) {
		back = f->bad;
		f->good = true;
		f->bad = false;
	} else if (f && !f->bad && (r != -ENOENT || f->good)) {
		warn = f->bad = true;
	}
	atomic_flag_clear_explicit(&p->files_lock, memory_order_release);
	if (back)
		log_info("a Tegra telemetry file reads again", "path=%s", log_q(path));
	if (warn)
		(void)log_warn_errno(
			r,
			"a Tegra telemetry file is gone or holds garbage: its metric is "
			"left out until it reads again; the GPU stays healthy",
			"path=%s", log_q(path));
}

/* A number file: into *@u (unsigned), or with @u NULL into *@i (signed). */
static int read_number(int root_fd, const char *dir, const char *name, uint64_t *u, int *i)
{
	char *buf = NULL;
	size_t len = 0;
	int r = read_rel(root_fd, dir, name, TEGRA_VALUE_MAX, &buf, &len);

	if (r == 0)
		r = u ? tegra_parse_u64(buf, len, u) : tegra_parse_int(buf, len, i);
	free(buf);
	note_read(dir, name, r);
	return r;
}

static int read_u64(int root_fd, const char *dir, const char *name, uint64_t *ret)
{
	return read_number(root_fd, dir, name, ret, NULL);
}

static int read_name(int root_fd, const char *dir, const char *name, char *out, size_t size)
{
	char *buf = NULL;
	size_t len = 0;
	int r = read_rel(root_fd, dir, name, TEGRA_VALUE_MAX, &buf, &len);

	if (r == 0)
		r = tegra_parse_name(buf, len, out, size);
	free(buf);
	note_read(dir, name, r);
	return r;
}

/* ---- finding the paths ---- */

struct names {
	unsigned n;
	char (*v)[TEGRA_ENTRY_MAX];
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * The entries of @dir below the root (at most TEGRA_SCAN_MAX read, dot files and overlong
 * names left out), sorted so that the choice among several candidates does not depend on the
 * directory's order. Returns 0 (ret->v: heap, the caller frees) or -errno.
 */
static int list_dir(int root_fd, const char *dir, struct names *ret)
{
	struct dirent *de;
	unsigned scanned = 0;
	DIR *d;
	int r;

	*ret = (struct names){ 0 };
	r = root_opendir(root_fd, dir, &d);
	if (r < 0)
		return r;
	ret->v = calloc(TEGRA_SCAN_MAX, sizeof(*ret->v));
	if (!ret->v) {
		closedir(d);
		return -ENOMEM;
	}
	while (scanned < TEGRA_SCAN_MAX && (de = readdir(d))) {
		size_t l = strlen(de->d_name);

		scanned++;
		if (de->d_name[0] == '.' || l >= TEGRA_ENTRY_MAX)
			continue;
		memcpy(ret->v[ret->n++], de->d_name, l + 1);
	}
	closedir(d);
	qsort(ret->v, ret->n, sizeof(*ret->v), cmp_name);
	return 0;
}

/*
 * The directory @rel reaches below the root, links resolved inside it, as seen from the root
 * ("/sys/devices/gpu.0"), into @out (PATH_MAX). Returns 0 or -errno.
 */
static int resolve_dir(int root_fd, const char *rel, char *out)
{
	char *path = NULL;
	int fd = root_open(root_fd, rel, O_DIRECTORY, &path), r = 0;

	if (fd < 0)
		return fd;
	fd_close(fd);
	if (strlen(path) >= PATH_MAX)
		r = -ENAMETOOLONG;
	else
		memcpy(out, path, strlen(path) + 1);
	free(path);
	return r;
}

/* The device-tree names of the GPU across generations (jtop's list), or any with "gpu". */
static bool gpu_of_name(const char *n)
{
	static const char *const chips[] = { "gv11b", "gp10b", "ga10b", "gb10b" };

	for (size_t i = 0; i < ELEMENTSOF(chips); i++)
		if (streq(n, chips[i]))
			return true;
	return strstr(n, "gpu") != NULL;
}

/*
 * The GPU's devfreq node, its device, and the EMC's. Thor's GPU is `gpu-gpc-0` (its sibling
 * `gpu-nvd-0` is another clock domain of the same device), which wins over a device-tree
 * match; otherwise the first node, by name, whose device's of_node is a GPU's.
 */
static void find_devfreq(int root_fd, struct tegra_paths *p)
{
	struct names ls;
	int best = 0;

	if (list_dir(root_fd, "sys/class/devfreq", &ls) < 0)
		return;
	for (unsigned i = 0; i < ls.n; i++) {
		char dir[PATH_MAX], of_name[TEGRA_ENTRY_MAX] = "";
		const char *x = ls.v[i];
		int rank;

		if ((size_t)snprintf(dir, sizeof(dir), "sys/class/devfreq/%s", x) >= sizeof(dir))
			continue;
		(void)read_name(root_fd, dir, "device/of_node/name", of_name, sizeof(of_name));
		if (!p->emc_dir[0] && (strstr(x, "emc") || strstr(of_name, "emc"))) {
			(void)resolve_dir(root_fd, dir, p->emc_dir);
			continue;
		}
		rank = streq(x, "gpu-gpc-0") ? 2 : of_name[0] && gpu_of_name(of_name) ? 1 : 0;
		if (rank <= best)
			continue;
		if (resolve_dir(root_fd, dir, p->devfreq_dir) < 0)
			continue;
		best = rank;
		/* The device dir: where `load` is (none on Thor), as realpath() sees it. */
		if ((size_t)snprintf(dir, sizeof(dir), "sys/class/devfreq/%s/device", x) >=
			    sizeof(dir) ||
		    resolve_dir(root_fd, dir, p->gpu_dir) < 0)
			p->gpu_dir[0] = 0;
	}
	free(ls.v);
}

/* "GPU-therm" (Nano..Xavier), "gpu-thermal" (Orin, Thor): "gpu" before the first '-' or '_'. */
static bool gpu_zone_type(const char *t)
{
	return strcspn(t, "-_") == 3 && strncasecmp(t, "gpu", 3) == 0;
}

/* The lowest-numbered thermal zone whose type is the GPU's. */
static void find_thermal(int root_fd, struct tegra_paths *p)
{
	unsigned best = UINT_MAX, z;
	char dir[PATH_MAX];
	struct names ls;

	if (list_dir(root_fd, "sys/class/thermal", &ls) < 0)
		return;
	for (unsigned i = 0; i < ls.n; i++) {
		char type[TEGRA_ENTRY_MAX];

		if (!startswith(ls.v[i], "thermal_zone") ||
		    safe_atou(ls.v[i] + strlen("thermal_zone"), &z) < 0 || z >= best)
			continue;
		if ((size_t)snprintf(dir, sizeof(dir), "sys/class/thermal/%s", ls.v[i]) >=
		    sizeof(dir))
			continue;
		if (read_name(root_fd, dir, "type", type, sizeof(type)) == 0 && gpu_zone_type(type))
			best = z;
	}
	free(ls.v);
	if (best == UINT_MAX)
		return;
	/* A short fixed path: it fits. */
	(void)snprintf(dir, sizeof(dir), "sys/class/thermal/thermal_zone%u", best);
	if (resolve_dir(root_fd, dir, p->thermal_zone) < 0)
		p->thermal_zone[0] = 0;
}

/* The first entry of <@dev>/<@sub> whose name starts with @prefix, resolved into @out. */
static int find_child(int root_fd, const char *dev, const char *sub, const char *prefix, char *out)
{
	char dir[PATH_MAX];
	struct names ls;
	int r = -ENOENT;

	if ((size_t)snprintf(dir, sizeof(dir), "%s%s", dev, sub) >= sizeof(dir) ||
	    list_dir(root_fd, dir, &ls) < 0)
		return -ENOENT;
	for (unsigned i = 0; i < ls.n && r < 0; i++)
		if (startswith(ls.v[i], prefix)) {
			char child[PATH_MAX];

			if ((size_t)snprintf(child, sizeof(child), "%s/%s", dir, ls.v[i]) <
			    sizeof(child))
				r = resolve_dir(root_fd, child, out);
		}
	free(ls.v);
	return r;
}

/*
 * The power monitors on the i2c bus: INA3221 through iio (driver ina3221x, JetPack 4) or hwmon
 * (ina3221, JetPack 5+), and Thor's INA238 (hwmon).
 */
static void find_power(int root_fd, struct tegra_paths *p)
{
	struct names ls;

	if (list_dir(root_fd, "sys/bus/i2c/devices", &ls) < 0)
		return;
	for (unsigned i = 0; i < ls.n && p->n_power_dirs < ELEMENTSOF(p->power_dirs); i++) {
		char dev[PATH_MAX], name[TEGRA_ENTRY_MAX];
		char *out = p->power_dirs[p->n_power_dirs];
		int r = -ENOENT;

		if ((size_t)snprintf(dev, sizeof(dev), "sys/bus/i2c/devices/%s", ls.v[i]) >=
			    sizeof(dev) ||
		    read_name(root_fd, dev, "name", name, sizeof(name)) < 0)
			continue;
		if (streq(name, "ina3221x"))
			r = find_child(root_fd, dev, "", "iio:device", out);
		else if (streq(name, "ina3221") || streq(name, "ina238"))
			r = find_child(root_fd, dev, "/hwmon", "hwmon", out);
		if (r == 0)
			p->n_power_dirs++;
		else
			out[0] = 0;
	}
	free(ls.v);
}

unsigned tegra_paths_find(const char *host_root, const char *soc, struct tegra_paths *p)
{
	uint64_t mem_total = p->mem_total;
	char root[PATH_MAX];
	unsigned n;
	int root_fd;
	bool fits;

	/* @host_root may be p->host_root itself: copy it before @p is cleared. */
	fits = (size_t)snprintf(root, sizeof(root), "%s",
				host_root && host_root[0] ? host_root : "/") < sizeof(root);
	memset(p, 0, sizeof(*p));
	if (!fits) {
		/* Cut, it would name another directory: nothing to sample, not even meminfo. */
		log_debug("host root path too long: no telemetry paths", "max_bytes=%d",
			  PATH_MAX - 1);
		return 0;
	}
	memcpy(p->host_root, root, sizeof(root));
	p->mem_total = mem_total;
	root_fd = root_dir_open(root);
	if (root_fd < 0) {
		(void)log_debug_errno(root_fd, "host root unreadable", "root=%s", log_q(root));
		return 0;
	}
	find_devfreq(root_fd, p);
	find_thermal(root_fd, p);
	find_power(root_fd, p);
	fd_close(root_fd);
	n = !!p->gpu_dir[0] + !!p->devfreq_dir[0] + !!p->emc_dir[0] + !!p->thermal_zone[0] +
	    p->n_power_dirs;
	log_debug("tegra telemetry paths",
		  "soc=%s found=%u devfreq=%s emc=%s thermal=%s monitors=%u", log_q(soc ? soc : ""),
		  n, log_q(p->devfreq_dir), log_q(p->emc_dir), log_q(p->thermal_zone),
		  p->n_power_dirs);
	return n;
}

/* ---- one sample ---- */

/* A per-mille load file (0..1000) as percent; absent when out of range. */
static void fill_load(int root_fd, const char *dir, const char *name, double *field)
{
	uint64_t v;

	if (isnan(*field) && read_u64(root_fd, dir, name, &v) == 0 && v <= 1000)
		*field = (double)v / 10.0;
}

/* A devfreq frequency (Hz) as MHz. */
static void fill_mhz(int root_fd, const char *dir, const char *name, double *field)
{
	uint64_t hz;

	if (isnan(*field) && read_u64(root_fd, dir, name, &hz) == 0)
		*field = (double)hz / 1e6;
}

static void sample_temperature(int root_fd, const struct tegra_paths *p, struct gpu_sample *s)
{
	int mc;

	if (!isnan(s->temperature_c) ||
	    read_number(root_fd, p->thermal_zone, "temp", NULL, &mc) != 0)
		return;
	/*
	 * -256000 is the "no reading" sentinel (an idle AGX Orin's GPU zone); nothing at or below
	 * it is a reading of a working board, and nothing above 200 °C either.
	 */
	if (mc <= -256000 || mc > 200000)
		return;
	s->temperature_c = mc / 1000.0;
}

struct rails {
	unsigned n;
	struct gpu_rail r[GPU_SAMPLE_RAILS_MAX];
};

static void rail_add(struct rails *rs, const char *name, double watts)
{
	if (rs->n >= ELEMENTSOF(rs->r))
		return;
	struct gpu_rail *r = &rs->r[rs->n++];
	/* @name was parsed into GPU_RAIL_NAME_MAX bytes: it fits. */
	size_t l = strnlen(name, sizeof(r->name) - 1);

	memcpy(r->name, name, l);
	r->name[l] = 0;
	r->watts = watts;
}

/* A channel's name, or -errno; "NC" marks an unconnected channel (jtop skips it the same). */
static int rail_name(int root_fd, const char *dir, const char *file, char *out)
{
	int r = read_name(root_fd, dir, file, out, GPU_RAIL_NAME_MAX);

	return r < 0 ? r : strstr(out, "NC") ? -ENODEV : 0;
}

/* mV x mA from two files, in W. */
static int volt_amp(int root_fd, const char *dir, const char *v_file, const char *i_file,
		    double *ret)
{
	uint64_t mv, ma;

	if (read_u64(root_fd, dir, v_file, &mv) != 0 || read_u64(root_fd, dir, i_file, &ma) != 0)
		return -ENODATA;
	*ret = (double)mv * (double)ma / 1e6;
	return 0;
}

/* JetPack 4's iio: rail_name_<k>, in_voltage<k>_input x in_current<k>_input, or in_power (mW). */
static void rails_iio(int root_fd, const char *dir, struct rails *rs)
{
	for (unsigned k = 0; k < TEGRA_CHANNELS_MAX; k++) {
		/* Names of a few bytes and a channel number: they fit. */
		char f[64], v[64], i[64], name[GPU_RAIL_NAME_MAX];
		uint64_t mw;
		double w;

		(void)snprintf(f, sizeof(f), "rail_name_%u", k);
		if (rail_name(root_fd, dir, f, name) < 0)
			continue;
		(void)snprintf(v, sizeof(v), "in_voltage%u_input", k);
		(void)snprintf(i, sizeof(i), "in_current%u_input", k);
		(void)snprintf(f, sizeof(f), "in_power%u_input", k);
		/* V x I first: the driver's in_power is the same product rounded to a mW. */
		if (volt_amp(root_fd, dir, v, i, &w) == 0)
			rail_add(rs, name, w);
		else if (read_u64(root_fd, dir, f, &mw) == 0)
			rail_add(rs, name, (double)mw / 1e3);
	}
}

/*
 * hwmon (JetPack 5+): in<k>_label, in<k>_input (mV) x curr<k>_input (mA); channel 7 is the sum
 * of the shunt voltages, no rail. Thor's INA238 has no label and one channel, its power in µW:
 * it is the carrier's input, VIN.
 */
static void rails_hwmon(int root_fd, const char *dir, struct rails *rs)
{
	unsigned before = rs->n;
	uint64_t uw;

	for (unsigned k = 1; k <= TEGRA_CHANNELS_MAX; k++) {
		/* Names of a few bytes and a channel number: they fit. */
		char f[64], v[64], i[64], name[GPU_RAIL_NAME_MAX];
		double w;

		if (k == 7)
			continue;
		(void)snprintf(f, sizeof(f), "in%u_label", k);
		if (rail_name(root_fd, dir, f, name) < 0)
			continue;
		(void)snprintf(v, sizeof(v), "in%u_input", k);
		(void)snprintf(i, sizeof(i), "curr%u_input", k);
		if (volt_amp(root_fd, dir, v, i, &w) == 0)
			rail_add(rs, name, w);
	}
	if (rs->n == before && read_u64(root_fd, dir, "power1_input", &uw) == 0)
		rail_add(rs, "VIN", (double)uw / 1e6);
}

/* The module's input rail: the board's power by itself (edge-metrics.md §1.3). */
static bool input_rail(const char *name)
{
	return streq(name, "VDD_IN") || streq(name, "POM_5V_IN") || streq(name, "VIN");
}

static void sample_power(int root_fd, const struct tegra_paths *p, struct gpu_sample *s)
{
	struct rails rs = { 0 };
	double sum = 0;
	int in = -1, gpu = -1;

	for (unsigned d = 0; d < p->n_power_dirs && d < ELEMENTSOF(p->power_dirs); d++) {
		const char *base = strrchr(p->power_dirs[d], '/');

		base = base ? base + 1 : p->power_dirs[d];
		if (startswith(base, "iio:device"))
			rails_iio(root_fd, p->power_dirs[d], &rs);
		else
			rails_hwmon(root_fd, p->power_dirs[d], &rs);
	}
	if (rs.n == 0)
		return;
	for (unsigned i = 0; i < rs.n; i++) {
		sum += rs.r[i].watts;
		if (in < 0 && input_rail(rs.r[i].name))
			in = (int)i;
		if (gpu < 0 && strstr(rs.r[i].name, "GPU"))
			gpu = (int)i;
	}
	if (s->n_rails == 0) {
		memcpy(s->rails, rs.r, rs.n * sizeof(rs.r[0]));
		s->n_rails = rs.n;
	}
	/* The input rail alone, or (Xavier AGX: none) the sum; never the input plus sub-rails. */
	if (isnan(s->board_power_w))
		s->board_power_w = in >= 0 ? rs.r[in].watts : sum;
	if (isnan(s->power_w) && gpu >= 0)
		s->power_w = rs.r[gpu].watts;
}

/*
 * Memory. The GPU shares DRAM with the CPU: free is what the kernel could still hand out
 * (MemAvailable), system-wide. With a carve-out (p->mem_total smaller than RAM) the GPU may
 * have at most the carve-out, so free = min(available, carve-out) and used = carve-out - free:
 * the part of the GPU's share that is not available now, whoever holds it (the CPU too); with
 * most of the RAM available that is 0.
 */
static void sample_memory(int root_fd, const struct tegra_paths *p, struct gpu_sample *s)
{
	uint64_t total, mi_total = 0, avail = 0;
	char *buf = NULL;
	size_t len = 0;
	int r;

	/* The GPU's share is the caller's to say (discovery); without it there is none to fill. */
	if (p->mem_total == 0)
		return;
	if (s->mem_total == UINT64_MAX)
		s->mem_total = p->mem_total;
	if (s->mem_free != UINT64_MAX && s->mem_used != UINT64_MAX)
		return;
	r = read_rel(root_fd, "/proc", "meminfo", TEGRA_MEMINFO_MAX, &buf, &len);
	if (r == 0)
		r = tegra_parse_meminfo(buf, len, &mi_total, &avail);
	free(buf);
	note_read("/proc", "meminfo", r);
	if (r < 0)
		return;
	total = s->mem_total;
	if (s->mem_free == UINT64_MAX)
		s->mem_free = MIN(avail, total);
	if (s->mem_used == UINT64_MAX)
		s->mem_used = total - MIN(s->mem_free, total);
}

void tegra_sample_read(struct tegra_paths *p, struct gpu_sample *s)
{
	const char *root = p->host_root[0] ? p->host_root : "/";
	int root_fd = root_dir_open(root);

	if (root_fd < 0) {
		(void)log_debug_errno(root_fd, "host root unreadable", "root=%s", log_q(root));
		return;
	}
	sampling = p;
	fill_load(root_fd, p->gpu_dir, "load", &s->util_gpu);
	fill_mhz(root_fd, p->devfreq_dir, "cur_freq", &s->sm_clock_mhz);
	fill_mhz(root_fd, p->devfreq_dir, "min_freq", &s->sm_clock_min_mhz);
	fill_mhz(root_fd, p->devfreq_dir, "max_freq", &s->sm_clock_max_mhz);
	/* The EMC's devfreq (Thor): its clock; a load where its device has one, as the GPU's. */
	fill_mhz(root_fd, p->emc_dir, "cur_freq", &s->mem_clock_mhz);
	fill_load(root_fd, p->emc_dir, "device/load", &s->util_mem);
	sample_temperature(root_fd, p, s);
	sample_power(root_fd, p, s);
	sample_memory(root_fd, p, s);
	sampling = NULL;
	fd_close(root_fd);
}
