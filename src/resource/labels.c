#include "labels.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "assign.h"
#include "backoff.h"
#include "config.h"
#include "file-read.h"
#include "file-writer.h"
#include "gpu-arch.h"
#include "gpu.h"
#include "loop.h"
#include "resource.h"

#define LOG_MODULE "labels"
#include "log.h"

#define LABEL_VALUE_MAX	 63
#define MACHINE_FILE_MAX 4096
/* Room to spare: at most 32 now (10 GPU, 12 CUDA, 2 sharing, 3 gpumem, 5 board). */
#define LABELS_MAX  40
#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (30 * USEC_PER_SEC)
/* PCI class codes (GFD's nvpci.PCIVgaControllerClass, PCI3dControllerClass). */
#define PCI_CLASS_VGA 0x030000u
#define PCI_CLASS_3D  0x030200u

/* The labels as "key=value\0" strings in one buffer, in the order added. */
struct label_set {
	struct buf text;
	size_t off[LABELS_MAX];
	size_t n;
	int r;
};

static void set_add(struct label_set *s, const char *key, const char *value)
{
	size_t at = s->text.len;

	if (s->r < 0)
		return;
	assert(s->n < LABELS_MAX);
	s->r = buf_printf(&s->text, "%s=%s", key, value);
	if (s->r == 0)
		s->r = buf_append(&s->text, "", 1);
	if (s->r == 0)
		s->off[s->n++] = at;
}

static void set_addf(struct label_set *s, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_addf(struct label_set *s, const char *key, const char *fmt, ...)
{
	char v[128];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	set_add(s, key, v);
}

/* Orders "key=value" strings by key alone ("a.b=" before "a.b.c="). */
static int key_cmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;

		if (ca == '=')
			ca = 0;
		if (cb == '=')
			cb = 0;
		if (ca != cb || !ca)
			return ca - cb;
	}
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_label_char(char c)
{
	return is_alnum(c) || c == '-' || c == '_' || c == '.';
}

/*
 * Makes @s (a string of label characters) a valid label value in place: cut to @max bytes, then
 * anything but alphanumerics dropped from both ends. "unknown" when nothing is left.
 */
static void label_value_fix(char *s, size_t max)
{
	size_t n = strlen(s), start = 0;

	if (n > max)
		n = max;
	while (n > 0 && !is_alnum(s[n - 1]))
		n--;
	while (start < n && !is_alnum(s[start]))
		start++;
	memmove(s, s + start, n - start);
	s[n - start] = 0;
	if (!s[0])
		(void)snprintf(s, max + 1, "%s", max >= 7 ? "unknown" : "x");
}

/* GFD's sanitise(): keep [A-Za-z0-9-_. ], then the space-separated fields joined by '-'. */
static void gfd_sanitise(const char *in, char *out, size_t size)
{
	size_t o = 0;
	bool pending_dash = false;

	for (const char *p = in; *p && o + 2 < size; p++) {
		if (*p == ' ') {
			pending_dash = o > 0;
			continue;
		}
		if (!is_label_char(*p))
			continue;
		if (pending_dash)
			out[o++] = '-';
		pending_dash = false;
		out[o++] = *p;
	}
	out[o] = 0;
}

/*
 * edgegpu's own labels for a Tegra board (nothing elsewhere): each string of @b that is known,
 * sanitised as GFD sanitises a product name and made a valid label value ("unknown" when
 * nothing usable is left of it).
 */
static void board_labels(struct label_set *s, const struct gpu_board *b)
{
	const struct {
		const char *key, *raw;
	} v[] = {
		{ LABELS_BOARD_PREFIX "board.model", b->model },
		{ LABELS_BOARD_PREFIX "board.soc", b->soc },
		{ LABELS_BOARD_PREFIX "board.l4t", b->l4t },
		{ LABELS_BOARD_PREFIX "board.jetpack", b->jetpack },
		{ LABELS_BOARD_PREFIX "board.power-mode", b->power_mode },
	};
	/*
	 * Zeroed, though gfd_sanitise() always ends it with a NUL: the analyzer cannot tell that
	 * strlen() stops there and reports label_value_fix() reading bytes past it.
	 */
	char value[sizeof(b->model) + 2] = "";

	if (!b->tegra)
		return;
	for (size_t i = 0; i < ELEMENTSOF(v); i++) {
		if (!v[i].raw[0])
			continue;
		gfd_sanitise(v[i].raw, value, sizeof(value));
		label_value_fix(value, LABEL_VALUE_MAX);
		set_add(s, v[i].key, value);
	}
}

/* The DMI product name as GFD's machine-type labeler reads it, made a valid label value. */
static void machine_type(const char *sysfs_root, char *out, size_t size)
{
	char *path =
		strdup_printf("%s/class/dmi/id/product_name", sysfs_root ? sysfs_root : "/sys");
	char *text = NULL;
	size_t len = 0, start = 0, o = 0;

	(void)snprintf(out, size, "unknown");
	if (!path || read_file(path, MACHINE_FILE_MAX, &text, &len) < 0)
		goto out;
	while (len > 0 &&
	       (text[len - 1] == ' ' || (text[len - 1] >= '\t' && text[len - 1] <= '\r')))
		len--;
	while (start < len && (text[start] == ' ' || (text[start] >= '\t' && text[start] <= '\r')))
		start++;
	for (size_t i = start; i < len && o + 1 < size; i++) {
		char c = text[i];

		if (c == ' ')
			c = '-';
		if (is_label_char(c))
			out[o++] = c;
	}
	out[o] = 0;
	label_value_fix(out, MIN(size - 1, (size_t)LABEL_VALUE_MAX));
out:
	free(text);
	free(path);
}

/* A part of a version: label characters only, alphanumeric at both ends, or empty. */
static bool version_part_valid(const char *s, size_t n)
{
	if (n == 0)
		return true;
	if (n > LABEL_VALUE_MAX || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_label_char(s[i]))
			return false;
	return true;
}

static void driver_labels(struct label_set *s, const char *v)
{
	const char *d1 = strchr(v, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	char major[64], minor[64], rev[64];
	size_t n = strlen(v);

	/* GFD: "X.Y[.Z]". */
	if (!d1 || (d2 && strchr(d2 + 1, '.')) || !version_part_valid(v, n) || d1 == v)
		return;
	if (!version_part_valid(v, (size_t)(d1 - v)))
		return;
	if (!d2)
		d2 = v + n;
	if (d2 == d1 + 1 || !version_part_valid(d1 + 1, (size_t)(d2 - d1 - 1)))
		return;
	if (*d2 && !version_part_valid(d2 + 1, strlen(d2 + 1)))
		return;
	(void)snprintf(major, sizeof(major), "%.*s", (int)(d1 - v), v);
	(void)snprintf(minor, sizeof(minor), "%.*s", (int)(d2 - d1 - 1), d1 + 1);
	(void)snprintf(rev, sizeof(rev), "%s", *d2 ? d2 + 1 : "");
	set_add(s, "nvidia.com/cuda.driver.major", major);
	set_add(s, "nvidia.com/cuda.driver.minor", minor);
	set_add(s, "nvidia.com/cuda.driver.rev", rev);
	set_add(s, "nvidia.com/cuda.driver-version.major", major);
	set_add(s, "nvidia.com/cuda.driver-version.minor", minor);
	set_add(s, "nvidia.com/cuda.driver-version.revision", rev);
	set_add(s, "nvidia.com/cuda.driver-version.full", v);
}

static void runtime_labels(struct label_set *s, int cuda)
{
	int major = cuda / 1000, minor = cuda % 1000 / 10;

	if (cuda <= 0)
		return;
	set_addf(s, "nvidia.com/cuda.runtime.major", "%d", major);
	set_addf(s, "nvidia.com/cuda.runtime.minor", "%d", minor);
	set_addf(s, "nvidia.com/cuda.runtime-version.major", "%d", major);
	set_addf(s, "nvidia.com/cuda.runtime-version.minor", "%d", minor);
	set_addf(s, "nvidia.com/cuda.runtime-version.full", "%d.%d", major, minor);
}

/* A label key <resource>.<suffix> within Kubernetes' 63-byte limit for the name part. */
static bool resource_key(char *out, size_t size, const char *resource, const char *suffix)
{
	const char *slash = strrchr(resource, '/');
	size_t name_len = strlen(slash ? slash + 1 : resource) + 1 + strlen(suffix);

	if (name_len > LABEL_VALUE_MAX)
		return false;
	return snprintf(out, size, "%s.%s", resource, suffix) < (int)size;
}

static int gpumem_labels(struct label_set *s, const struct gpu_info *info, const struct config *cfg,
			 const char *enforcement)
{
	struct assign_gpu *as = NULL;
	struct resource *res = NULL;
	unsigned *idx = NULL, n = 0;
	uint64_t total_mib = 0;
	char key[256], *err = NULL;
	int r;

	if (cfg->gpumem.devices.n_refs == 0)
		return 0;
	r = assign_gpus(cfg, info, &as, NULL);
	if (r < 0)
		return r == -ENOMEM ? r : 0; /* the config does not apply to these GPUs */
	idx = calloc(info->n_devices, sizeof(*idx));
	if (!idx) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < info->n_devices; i++)
		if (as[i].use == ASSIGN_GPU_MEMORY) {
			idx[n++] = i;
			total_mib += info->devices[i].mem_total >> 20;
		}
	if (n == 0)
		goto out;
	r = resource_new(&(struct resource_spec){ .name = cfg->gpumem.resource_name,
						  .kind = RESOURCE_GPUMEM,
						  .gpus = idx,
						  .n_gpus = n,
						  .unit_mib = cfg->gpumem.unit_mib,
						  .reserve_mib = cfg->gpumem.reserve_mib },
			 info, &res, &err);
	if (r < 0) {
		r = r == -ENOMEM ? r : 0;
		goto out;
	}
	if (resource_key(key, sizeof(key), cfg->gpumem.resource_name, "unit-mib"))
		set_addf(s, key, "%llu", (unsigned long long)res->unit_mib);
	if (resource_key(key, sizeof(key), cfg->gpumem.resource_name, "total-mib"))
		set_addf(s, key, "%llu", (unsigned long long)total_mib);
	if (enforcement && *enforcement)
		set_add(s, LABELS_BOARD_PREFIX "gpumem.enforcement", enforcement);
out:
	resource_free(res);
	free(err);
	free(idx);
	free(as);
	return r;
}

/* The time-slicing entry for nvidia.com/gpu, or NULL. */
static const struct config_ts_resource *default_ts(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->time_slicing.n_resources; i++)
		if (streq(cfg->time_slicing.resources[i].name, CONFIG_DEFAULT_RESOURCE))
			return &cfg->time_slicing.resources[i];
	return NULL;
}

/* @name as GFD's product label: sanitised, "-SHARED" when @shared, a valid label value. */
static void product_of(const char *name, bool shared, char *out, size_t size)
{
	char product[GPU_NAME_MAX + 16] = "";

	gfd_sanitise(name, product, sizeof(product));
	if (shared) {
		label_value_fix(product, LABEL_VALUE_MAX - strlen("-SHARED"));
		memcpy(product + strlen(product), "-SHARED", sizeof("-SHARED"));
	} else {
		label_value_fix(product, LABEL_VALUE_MAX);
	}
	(void)snprintf(out, size, "%s", product);
}

/* GPU @i of those GFD sees: discovery's, then the MIG-enabled ones it left out. */
static const struct gpu_device *gfd_gpu(const struct gpu_info *info, unsigned i)
{
	return i < info->n_devices ? &info->devices[i] : &info->mig_devices[i - info->n_devices];
}

/*
 * nvidia.com/gpu.replicas: the first time-slicing entry's for nvidia.com/gpu, else 1; 0 when
 * every GPU is MIG-enabled (GFD labels those without sharing under the "none" strategy).
 */
static unsigned gfd_replicas(const struct gpu_info *info, const struct config_ts_resource *ts)
{
	if (!info->n_devices)
		return 0;
	return ts && ts->replicas > 0 ? ts->replicas : 1;
}

/* The product value of the model described (gfd_gpu(info, 0)), "-SHARED" as GFD adds it. */
static void product_label(const struct gpu_info *info, const struct config_ts_resource *ts,
			  char *out, size_t size)
{
	product_of(gfd_gpu(info, 0)->name, gfd_replicas(info, ts) > 1 && !ts->rename, out, size);
}

void labels_product(const struct gpu_info *info, const struct config *cfg, char *out, size_t size)
{
	if (!info->n_devices && !info->n_mig_devices) {
		(void)snprintf(out, size, "%s", "");
		return;
	}
	product_label(info, default_ts(cfg), out, size);
}

/*
 * GFD's gpu.mode: "graphics" when every GPU is a VGA controller (PCI class 0x030000),
 * "compute" when every one is a 3D controller (0x030200), else (mixed, another class, one
 * unknown) "unknown". A Tegra iGPU counts as a 3D controller: it runs CUDA, where GFD,
 * finding no PCI device, says unknown. It is no PCI device, so what discovery read at the
 * address NVML gives it (nothing, or another device there) is not its class.
 */
static const char *gpu_mode(const struct gpu_info *info, unsigned n)
{
	uint32_t first = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct gpu_device *g = gfd_gpu(info, i);
		uint32_t c = g->integrated ? PCI_CLASS_3D : g->pci_class;

		if (i == 0)
			first = c;
		if (c == 0 || c != first)
			return "unknown";
	}
	return first == PCI_CLASS_VGA ? "graphics" : first == PCI_CLASS_3D ? "compute" : "unknown";
}

int labels_build(const struct gpu_info *info, const struct config *cfg, const char *sysfs_root,
		 const char *gpumem_enforcement, struct buf *out)
{
	const struct config_ts_resource *ts = default_ts(cfg);
	const struct gpu_device *g;
	struct label_set s = { 0 };
	char product[LABEL_VALUE_MAX + 1], machine[LABEL_VALUE_MAX + 1] = "";
	unsigned n = info->n_devices + info->n_mig_devices, count = 0, replicas;
	bool mig_capable = false;
	int r;

	if (n == 0)
		return 0;
	/*
	 * The model described: the first GPU discovery serves, else (every GPU MIG-enabled) the
	 * first MIG-enabled one, which GFD labels without sharing (replicas 0) under the "none"
	 * MIG strategy, the only one edgegpu runs. gpu.count: the GPUs of that model, MIG-enabled
	 * ones included, as GFD counts them per model.
	 */
	g = gfd_gpu(info, 0);
	replicas = gfd_replicas(info, ts);
	for (unsigned i = 0; i < n; i++) {
		count += streq(gfd_gpu(info, i)->name, g->name);
		mig_capable |= gfd_gpu(info, i)->mig_capable;
	}

	product_label(info, ts, product, sizeof(product));
	set_add(&s, "nvidia.com/gpu.product", product);
	set_addf(&s, "nvidia.com/gpu.count", "%u", count);
	if (g->mem_total >> 20)
		set_addf(&s, "nvidia.com/gpu.memory", "%llu",
			 (unsigned long long)(g->mem_total >> 20));
	if (g->cc_major > 0) {
		/* GFD's values, but blackwell for 11.x (Thor) where GFD says undefined: gpu-arch.c. */
		set_add(&s, "nvidia.com/gpu.family",
			gpu_arch_gfd_family(gpu_arch_from_cc(g->cc_major, g->cc_minor)));
		set_addf(&s, "nvidia.com/gpu.compute.major", "%d", g->cc_major);
		set_addf(&s, "nvidia.com/gpu.compute.minor", "%d", g->cc_minor);
	}
	machine_type(sysfs_root, machine, sizeof(machine));
	set_add(&s, "nvidia.com/gpu.machine", machine);
	set_add(&s, "nvidia.com/gpu.mode", gpu_mode(info, n));
	set_add(&s, "nvidia.com/mig.capable", mig_capable ? "true" : "false");
	set_add(&s, "nvidia.com/mps.capable", "false");
	driver_labels(&s, info->driver_version);
	runtime_labels(&s, info->cuda_driver_version);
	set_addf(&s, "nvidia.com/gpu.replicas", "%u", replicas);
	set_add(&s, "nvidia.com/gpu.sharing-strategy", replicas > 1 ? "time-slicing" : "none");
	board_labels(&s, &info->board);
	r = s.r;
	if (r == 0)
		r = gpumem_labels(&s, info, cfg, gpumem_enforcement);
	if (r == 0)
		r = s.r;
	if (r < 0)
		goto out;
	/* Sorted by key: an insertion sort of the offsets. */
	for (size_t i = 1; i < s.n; i++) {
		size_t at = s.off[i], j = i;
		const char *t = (const char *)s.text.data;

		for (; j > 0 && key_cmp(t + s.off[j - 1], t + at) > 0; j--)
			s.off[j] = s.off[j - 1];
		s.off[j] = at;
	}
	for (size_t i = 0; i < s.n && r == 0; i++)
		r = buf_printf(out, "%s\n", (const char *)s.text.data + s.off[i]);
out:
	buf_release(&s.text);
	return r;
}

/* --- the features.d writer --- */

/* A write this slow is reported (the labels lapse if it never returns). */
#define STUCK_USEC (5 * USEC_PER_SEC)

struct labels_writer {
	struct loop_timer *timer; /* the refresh, or a failed write's retry */
	struct file_writer *fw;
	char *path;
	usec_t expiry;
	struct buf want;      /* the lines asked for */
	struct buf submitted; /* the lines of the newest write handed to fw */
	bool have_submitted;
	bool submitted_ok; /* and it is in the file */
	bool warned;	/* a failure or a stuck write was logged at warn since the last success */
	bool timestamp; /* each write carries nvidia.com/gfd.timestamp=<stamp> */
	time_t stamp;	/* when it was turned on */
	struct backoff backoff; /* its max: at most the refresh interval */
	uint64_t writes;
};

static void writer_write(struct labels_writer *w);

static void writer_timer(struct loop_timer *t, void *userdata)
{
	writer_write(userdata);
}

static usec_t refresh_interval(const struct labels_writer *w)
{
	return MAX(w->expiry / 2, USEC_PER_MSEC);
}

static void writer_failed(struct labels_writer *w, int r, const char *step)
{
	if (!w->warned)
		log_warn_errno(r, "cannot write the labels file, retrying", "path=%s step=%s",
			       log_q(w->path), log_q(step ? step : ""));
	else
		log_debug_errno(r, "cannot write the labels file, retrying", "path=%s step=%s",
				log_q(w->path), log_q(step ? step : ""));
	w->warned = true;
	w->backoff.max = w->expiry > 0 ? MIN(BACKOFF_MAX, refresh_interval(w)) : BACKOFF_MAX;
	loop_timer_arm(w->timer, backoff_next(&w->backoff));
}

static void writer_done(struct file_writer *fw, const struct file_write_result *res, void *userdata)
{
	struct labels_writer *w = userdata;

	if (res->r < 0) {
		writer_failed(w, res->r, res->step);
		return;
	}
	w->submitted_ok = true;
	w->writes++;
	if (w->warned)
		log_info("labels file written", "path=%s dur_ms=%llu", log_q(w->path),
			 (unsigned long long)(res->dur / USEC_PER_MSEC));
	else
		log_debug("labels file written", "path=%s", log_q(w->path));
	w->warned = false;
	backoff_reset(&w->backoff);
	if (w->expiry > 0)
		loop_timer_arm(w->timer, refresh_interval(w));
	else
		loop_timer_disarm(w->timer);
}

static void writer_stuck(struct file_writer *fw, usec_t waited, void *userdata)
{
	struct labels_writer *w = userdata;

	log_warn("labels file write not finished, serving on, writing again when it returns",
		 "path=%s dur_ms=%llu", log_q(w->path),
		 (unsigned long long)(waited / USEC_PER_MSEC));
	w->warned = true;
}

int labels_writer_new(struct loop *l, const char *path, usec_t expiry, struct labels_writer **ret)
{
	struct labels_writer *w = NULL;
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	struct file_writer_opts fo = {
		.mode = 0644,
		.stuck_after = STUCK_USEC,
		.done = writer_done,
		.stuck = writer_stuck,
	};
	int r;

	if (!*name || streq(name, ".") || streq(name, ".."))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	fo.userdata = w;
	w->expiry = expiry;
	w->backoff = BACKOFF_INIT(BACKOFF_MIN, 2, BACKOFF_MAX);
	w->path = strdup(path);
	if (!w->path) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = loop_timer_new(l, writer_timer, w, &w->timer)) < 0 ||
	    (r = file_writer_new(l, &fo, &w->fw)) < 0)
		goto fail;
	*ret = w;
	return 0;
fail:
	labels_writer_free(w);
	return r;
}

struct labels_writer *labels_writer_free(struct labels_writer *w)
{
	if (!w)
		return NULL;
	file_writer_free(w->fw);
	loop_timer_free(w->timer);
	buf_release(&w->want);
	buf_release(&w->submitted);
	free(w->path);
	free(w);
	return NULL;
}

uint64_t labels_writer_writes(const struct labels_writer *w)
{
	return w->writes;
}

void labels_writer_set_timestamp(struct labels_writer *w, bool on)
{
	w->timestamp = on;
	w->stamp = time(NULL);
}

int labels_add_timestamp(const char *lines, size_t len, time_t when, struct buf *out)
{
	static const char key[] = LABELS_TIMESTAMP_KEY "=";
	size_t at = 0;
	int r;

	/* Before the first line whose key sorts after ours: the lines stay sorted. */
	while (at < len) {
		const char *nl = memchr(lines + at, '\n', len - at);

		if (key_cmp(lines + at, key) > 0)
			break;
		at = nl ? (size_t)(nl - lines) + 1 : len;
	}
	r = buf_append(out, lines, at);
	if (r == 0)
		r = buf_printf(out, "%s%lld\n", key, (long long)when);
	if (r == 0)
		r = buf_append(out, lines + at, len - at);
	return r;
}

/*
 * The whole file for @lines: header, expiry directive, lines (with the timestamp when asked).
 * Returns 0 or -ENOMEM.
 */
static int compose(const struct labels_writer *w, const struct buf *lines, struct buf *out)
{
	struct timespec ts;
	struct tm tm;
	char when[40];
	int r;

	r = buf_printf(out, "# written by edgegpu: GPU node labels for node-feature-discovery\n");
	if (r == 0 && w->expiry > 0) {
		(void)clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)((w->expiry + USEC_PER_SEC - 1) / USEC_PER_SEC);
		if (!gmtime_r(&ts.tv_sec, &tm) ||
		    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			(void)snprintf(when, sizeof(when), "1970-01-01T00:00:00Z");
		r = buf_printf(out, "# +expiry-time=%s\n", when);
	}
	if (r == 0 && w->timestamp && lines->len)
		r = labels_add_timestamp((const char *)lines->data, lines->len, w->stamp, out);
	else if (r == 0 && lines->len)
		r = buf_append(out, lines->data, lines->len);
	return r;
}

/* Hands the file for the wanted lines to the file writer (its thread does the disk part). */
static void writer_write(struct labels_writer *w)
{
	struct buf file = { 0 };
	int r;

	loop_timer_disarm(w->timer);
	r = compose(w, &w->want, &file);
	if (r == 0)
		r = file_writer_write(w->fw, w->path, file.data, file.len);
	buf_release(&file);
	if (r == 0) {
		w->submitted.len = 0;
		r = buf_append(&w->submitted, w->want.data, w->want.len);
		w->have_submitted = r == 0;
		w->submitted_ok = false;
		return;
	}
	writer_failed(w, r, "start a thread for");
}

int labels_writer_set(struct labels_writer *w, const char *lines, size_t len)
{
	struct buf next = { 0 }, file = { 0 };
	int r;

	if (memchr(lines, 0, len))
		return -EINVAL;
	r = buf_append(&next, lines, len);
	if (r == 0 && len > 0 && lines[len - 1] != '\n')
		r = buf_append(&next, "\n", 1);
	if (r == 0)
		r = compose(w, &next, &file);
	if (r == 0 && file.len > LABELS_FILE_MAX)
		r = -EFBIG;
	buf_release(&file);
	if (r < 0) {
		buf_release(&next);
		return r;
	}
	buf_release(&w->want);
	w->want = next;
	/*
	 * The lines of the newest write, in the file or on their way there: nothing to do. (A
	 * failed one waits for its retry, which writes these.)
	 */
	if (w->have_submitted && w->want.len == w->submitted.len &&
	    (!w->want.len || memcmp(w->want.data, w->submitted.data, w->want.len) == 0) &&
	    (w->submitted_ok || file_writer_busy(w->fw)))
		return 0;
	backoff_reset(&w->backoff);
	writer_write(w);
	return 0;
}
