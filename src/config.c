#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <yaml.h>

#include "gpu.h"
#include "resource.h"
#include "util.h"

extern char **environ;

#define NOOFF	       SIZE_MAX
#define POS(T, m)      (offsetof(T, m) + 1)
#define AT(b, off)     ((void *)((char *)(b) + (off)))
#define CAT(b, off)    ((const void *)((const char *)(b) + (off)))
#define MIB	       ((uint64_t)1024 * 1024)
#define NS_PER_USEC    1000ULL
#define RESNAME_PREFIX "nvidia.com/"
#define RESNAME_MAX    63
#define STR_MAX	       4096
#define KEY_MAX	       512

/* --- small helpers --- */

/*
 * Our own copies rather than strdup(): the allocations then go through malloc, which the OOM
 * test wraps.
 */
static char *xmemdup0(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

static char *xstrdup(const char *s)
{
	return s ? xmemdup0(s, strlen(s)) : NULL;
}

static char *xstrcat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 1);

	if (!p)
		return NULL;
	(void)snprintf(p, la + lb + 1, "%s%s", a, b);
	return p;
}

static char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *xvasprintf(const char *fmt, va_list ap)
{
	va_list aq;
	char *s;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	(void)vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

/* Renders @s for a message: quoted, escaped, cut after 60 characters. Returns @out. */
static const char *qstr(char *out, size_t size, const char *s)
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

/* Go's strconv.ParseBool. */
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

static int parse_go_bool(const char *s, bool *ret)
{
	static const char *const t[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const f[] = { "0", "f", "F", "FALSE", "false", "False" };

	return bool_lookup(s, t, f, ELEMENTSOF(t), ret);
}

/* go-yaml v2 (YAML 1.1) booleans, as sigs.k8s.io/yaml resolves plain scalars. */
static int parse_yaml_bool(const char *s, bool *ret)
{
	static const char *const t[] = { "y",	 "Y",	 "yes", "Yes", "YES", "true",
					 "True", "TRUE", "on",	"On",  "ON" };
	static const char *const f[] = { "n",	  "N",	   "no",  "No",	 "NO", "false",
					 "False", "FALSE", "off", "Off", "OFF" };

	return bool_lookup(s, t, f, ELEMENTSOF(t), ret);
}

static bool is_yaml_null(const char *s)
{
	return !*s || streq(s, "~") || streq(s, "null") || streq(s, "Null") || streq(s, "NULL");
}

/*
 * Go's strconv.ParseInt(s, 0, 64) / ParseUint, which go-yaml v2 applies after dropping
 * underscores: optional sign, then 0x, 0o, 0b or a leading 0 (octal), or decimal.
 */
static int parse_go_int(const char *s, bool underscores, uint64_t *ret, bool *ret_neg)
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
static int parse_go_duration(const char *s, usec_t *ret, bool *ret_neg)
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
 * parse_go_duration() reads it back: "0s", "250us", "1.5ms", "1h2m3.5s".
 */
static const char *format_duration(char *out, size_t size, usec_t u)
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
static int resname_normalize(const char *in, char **ret)
{
	const char *p;
	char *s;
	size_t len;
	bool label_start = true;

	if (strncmp(in, RESNAME_PREFIX, strlen(RESNAME_PREFIX)) == 0)
		s = xstrdup(in);
	else
		s = xstrcat(RESNAME_PREFIX, in);
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

/* --- the schema --- */

struct enum_value {
	const char *name;
	int value;
	const char *refuse; /* recognised, refused with this message */
	bool warn;	    /* accepted, not acted on: a warning */
};

#define MIG_REFUSED "MIG is not supported by edgegpu yet; only \"none\" is accepted"

static const struct enum_value mig_values[] = {
	{ "none", CONFIG_MIG_NONE },
	{ "single", CONFIG_MIG_SINGLE, MIG_REFUSED },
	{ "mixed", CONFIG_MIG_MIXED, MIG_REFUSED },
	{ NULL },
};

static const struct enum_value dls_values[] = {
	{ "envvar", CONFIG_DLS_ENVVAR },
	{ "volume-mounts", CONFIG_DLS_VOLUME_MOUNTS },
	{ "cdi-annotations", CONFIG_DLS_CDI_ANNOTATIONS },
	{ "cdi-cri", CONFIG_DLS_CDI_CRI },
	{ NULL },
};

static const struct enum_value id_values[] = {
	{ "uuid", CONFIG_DEVICE_ID_UUID },
	{ "index", CONFIG_DEVICE_ID_INDEX },
	{ NULL },
};

/* We discover with NVML: "auto" and "nvml" describe what we do, Tegra comes later. */
static const struct enum_value discovery_values[] = {
	{ "auto", 0, NULL, true },
	{ "nvml", 0, NULL, true },
	{ "tegra", 0, "the Tegra backend is not supported by edgegpu yet" },
	{ NULL },
};

static const struct enum_value alloc_policy_values[] = {
	{ "distributed", 0 },
	{ "packed", 0, "only the \"distributed\" policy is supported by edgegpu" },
	{ NULL },
};

static const struct enum_value log_values[] = {
	{ "debug", LOG_LEVEL_DEBUG },
	{ "info", LOG_LEVEL_INFO },
	{ "warn", LOG_LEVEL_WARN },
	{ "error", LOG_LEVEL_ERROR },
	{ NULL },
};

static const struct enum_value split_values[] = {
	{ "reject", CONFIG_ON_SPLIT_REJECT },
	{ "allow", CONFIG_ON_SPLIT_ALLOW },
	{ NULL },
};

static const struct enum_value placement_values[] = {
	{ "mask", CONFIG_PLACEMENT_MASK },
	{ "preferred", CONFIG_PLACEMENT_PREFERRED },
	{ NULL },
};

enum kind {
	K_END,
	K_SECTION,	/* arg: sub-table, same base */
	K_TIME_SLICING, /* a section that needs resources */
	K_BOOL,
	K_STR,	   /* min: enum str_mode */
	K_RESNAME, /* a resource name, normalised */
	K_U32,
	K_U64,
	K_DURATION,
	K_ENUM, /* arg: enum values; off may be NOOFF (checked, not stored) */
	K_DLS,
	K_XIDS,		/* c->health.ignored_xids */
	K_DEVICES,	/* struct config_devices, list only */
	K_TS_DEVICES,	/* struct config_devices: all | count | list */
	K_GPUS,		/* c->gpus */
	K_TS_RESOURCES, /* c->time_slicing.resources */
	K_VERSION,
	K_UNSUP_BOOL,	  /* min: the default */
	K_UNSUP_STR,	  /* arg: the default */
	K_UNSUP_DURATION, /* min: the default, usec */
	K_UNSUP_ANY,	  /* any value: a warning; arg: message */
	K_UNSUP_EMPTY_LIST,
	K_REFUSE, /* any value but an empty one: an error; arg: message */
};

enum str_mode {
	STR_NONEMPTY,	   /* "" is an error */
	STR_EMPTY_IGNORED, /* "" leaves the setting as it was */
	STR_EMPTY_OK,	   /* "" is a value */
};

#define F_NOCMP 1u /* not compared by config_equal() */

struct field {
	const char *key; /* NULL: not in the file (flags and environment only) */
	enum kind kind;
	size_t off;
	size_t pos; /* POS() of a struct config_pos recording where the value was, or 0 */
	const void *arg;
	uint64_t min, max;
	const char *flag[2];
	const char *env[2];
	unsigned flags;
};

#define C(m) offsetof(struct config, m)

#define UNSUP_WARN "is not supported by edgegpu and is ignored (it is set to its default)"

static const struct field gfd_fields[] = {
	{ "oneshot", K_UNSUP_BOOL, NOOFF, .min = false },
	{ "noTimestamp", K_UNSUP_BOOL, NOOFF, .min = false },
	{ "sleepInterval", K_UNSUP_DURATION, NOOFF, .min = 60 * USEC_PER_SEC },
	{ "outputFile", K_UNSUP_STR, NOOFF,
	  .arg = "/etc/kubernetes/node-feature-discovery/features.d/gfd" },
	{ "machineTypeFile", K_UNSUP_STR, NOOFF, .arg = "/sys/class/dmi/id/product_name" },
	{ NULL },
};

static const struct field plugin_fields[] = {
	{ "passDeviceSpecs", K_BOOL, C(pass_device_specs), .flag = { "pass-device-specs" },
	  .env = { "PASS_DEVICE_SPECS" } },
	{ "deviceListStrategy", K_DLS, C(device_list_strategy), .arg = dls_values,
	  .flag = { "device-list-strategy" }, .env = { "DEVICE_LIST_STRATEGY" } },
	{ "deviceIDStrategy", K_ENUM, C(device_id_strategy), .arg = id_values,
	  .flag = { "device-id-strategy" }, .env = { "DEVICE_ID_STRATEGY" } },
	{ "containerDriverRoot", K_STR, C(container_driver_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "driver-root-ctr-path", "container-driver-root" },
	  .env = { "DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT" } },
	{ "cdiAnnotationPrefix", K_UNSUP_STR, NOOFF, .arg = "cdi.k8s.io/",
	  .flag = { "cdi-annotation-prefix" }, .env = { "CDI_ANNOTATION_PREFIX" } },
	{ "nvidiaCTKPath", K_UNSUP_STR, NOOFF, .arg = "/usr/bin/nvidia-ctk",
	  .flag = { "nvidia-cdi-hook-path", "nvidia-ctk-path" },
	  .env = { "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH" } },
	{ "sharedDevicesAllocationPolicy", K_ENUM, NOOFF, .arg = alloc_policy_values,
	  .flag = { "shared-devices-allocation-policy" },
	  .env = { "SHARED_DEVICES_ALLOCATION_POLICY" } },
	{ NULL },
};

static const struct field flags_fields[] = {
	{ "migStrategy", K_ENUM, C(mig_strategy), .arg = mig_values, .flag = { "mig-strategy" },
	  .env = { "MIG_STRATEGY" } },
	{ "failOnInitError", K_BOOL, C(fail_on_init_error), .flag = { "fail-on-init-error" },
	  .env = { "FAIL_ON_INIT_ERROR" } },
	{ "nvidiaDriverRoot", K_STR, C(driver_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "driver-root", "nvidia-driver-root" }, .env = { "NVIDIA_DRIVER_ROOT" } },
	{ "nvidiaDevRoot", K_STR, C(dev_root), .min = STR_EMPTY_IGNORED,
	  .flag = { "dev-root", "nvidia-dev-root" }, .env = { "NVIDIA_DEV_ROOT" } },
	{ "mpsRoot", K_UNSUP_ANY, NOOFF, .arg = "is ignored: MPS is not supported by edgegpu",
	  .flag = { "mps-root" }, .env = { "MPS_ROOT" } },
	{ "gdsEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "gds-enabled" },
	  .env = { "GDS_ENABLED" } },
	{ "mofedEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "mofed-enabled" },
	  .env = { "MOFED_ENABLED" } },
	{ "gdrcopyEnabled", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "gdrcopy-enabled" },
	  .env = { "GDRCOPY_ENABLED" } },
	{ "useNodeFeatureAPI", K_UNSUP_BOOL, NOOFF, .min = false },
	{ "deviceDiscoveryStrategy", K_ENUM, NOOFF, .arg = discovery_values,
	  .flag = { "device-discovery-strategy" }, .env = { "DEVICE_DISCOVERY_STRATEGY" } },
	{ "plugin", K_SECTION, 0, .arg = plugin_fields },
	{ "gfd", K_SECTION, 0, .arg = gfd_fields },
	{ NULL },
};

static const struct field gpu_item_fields[] = {
	{ "pattern", K_STR, offsetof(struct config_gpu_pattern, pattern), .min = STR_NONEMPTY },
	{ "name", K_RESNAME, offsetof(struct config_gpu_pattern, name) },
	{ NULL },
};

static const struct field resources_fields[] = {
	{ "gpus", K_GPUS, 0 },
	{ "mig", K_REFUSE, 0, .arg = "MIG is not supported by edgegpu yet" },
	{ NULL },
};

#define T(m) offsetof(struct config_ts_resource, m)

static const struct field ts_item_fields[] = {
	{ "name", K_RESNAME, T(name), POS(struct config_ts_resource, name_pos) },
	{ "rename", K_RESNAME, T(rename), POS(struct config_ts_resource, rename_pos) },
	{ "replicas", K_U32, T(replicas), .min = 2, .max = CONFIG_REPLICAS_MAX },
	{ "devices", K_TS_DEVICES, T(devices) },
	{ NULL },
};

static const struct field ts_fields[] = {
	{ "renameByDefault", K_BOOL, C(time_slicing.rename_by_default) },
	{ "failRequestsGreaterThanOne", K_BOOL, C(time_slicing.fail_requests_greater_than_one) },
	{ "resources", K_TS_RESOURCES, 0 },
	{ NULL },
};

static const struct field sharing_fields[] = {
	{ "timeSlicing", K_TIME_SLICING, 0, .arg = ts_fields },
	{ "mps", K_REFUSE, 0,
	  .arg = "MPS sharing is not supported by edgegpu; use sharing.timeSlicing or "
		 "edgegpu.sharing.memory" },
	{ NULL },
};

static const struct field imex_fields[] = {
	{ "channelIDs", K_UNSUP_EMPTY_LIST, NOOFF, .flag = { "imex-channel-ids" },
	  .env = { "IMEX_CHANNEL_IDS" } },
	{ "required", K_UNSUP_BOOL, NOOFF, .min = false, .flag = { "imex-required" },
	  .env = { "IMEX_REQUIRED" } },
	{ NULL },
};

static const struct field health_fields[] = {
	{ "pollInterval", K_DURATION, C(health.poll_interval), .min = 100 * USEC_PER_MSEC,
	  .max = USEC_PER_SEC * 24 * 3600 },
	{ "eventPollInterval", K_DURATION, C(health.event_poll_interval),
	  .min = 100 * USEC_PER_MSEC, .max = USEC_PER_SEC * 24 * 3600 },
	{ "callTimeout", K_DURATION, C(health.call_timeout), .min = 100 * USEC_PER_MSEC,
	  .max = USEC_PER_SEC * 3600 },
	{ "recoveryQuietPeriod", K_DURATION, C(health.recovery_quiet_period), .min = 0,
	  .max = USEC_PER_SEC * 24 * 3600 },
	{ "ignoredXids", K_XIDS, 0 },
	{ "disableHealthchecks", K_STR, C(health.disable_healthchecks), .min = STR_EMPTY_IGNORED,
	  .env = { "DP_DISABLE_HEALTHCHECKS" } },
	{ NULL },
};

static const struct field grpc_fields[] = {
	{ "maxRecvMsgBytes", K_U64, C(grpc.max_recv_msg_bytes), .min = (uint64_t)64 * 1024,
	  .max = 1024 * MIB },
	{ "maxConnections", K_U32, C(grpc.max_connections), .min = 1, .max = 4096 },
	{ NULL },
};

static const struct field gpumem_fields[] = {
	{ "resourceName", K_RESNAME, C(gpumem.resource_name),
	  POS(struct config, gpumem.resource_name_pos) },
	{ "devices", K_DEVICES, C(gpumem.devices) },
	{ "unitMiB", K_U32, C(gpumem.unit_mib), POS(struct config, gpumem.unit_pos), .min = 1,
	  .max = 1u << 20 },
	{ "reserveMiB", K_U64, C(gpumem.reserve_mib), POS(struct config, gpumem.reserve_pos),
	  .min = 0, .max = 1u << 24 },
	{ "onSplit", K_ENUM, C(gpumem.on_split), .arg = split_values },
	{ "placement", K_ENUM, C(gpumem.placement), .arg = placement_values },
	{ "maskHysteresisMiB", K_U64, C(gpumem.mask_hysteresis_mib), .min = 0, .max = 1u << 24 },
	{ NULL },
};

static const struct field edgegpu_sharing_fields[] = {
	{ "memory", K_SECTION, 0, .arg = gpumem_fields },
	{ NULL },
};

static const struct field edgegpu_fields[] = {
	{ "logLevel", K_ENUM, C(log_level), .arg = log_values, .flag = { "log-level" },
	  .env = { "EDGEGPU_LOG_LEVEL" } },
	{ "devicePluginPath", K_STR, C(device_plugin_path), .min = STR_EMPTY_IGNORED,
	  .flag = { "device-plugin-path" }, .env = { "DEVICE_PLUGIN_PATH" } },
	{ "kubeletSocket", K_STR, C(kubelet_socket), .min = STR_EMPTY_OK,
	  .flag = { "kubelet-socket" }, .env = { "KUBELET_SOCKET" } },
	{ "nvmlLib", K_STR, C(nvml_lib), .min = STR_EMPTY_IGNORED, .flag = { "nvml-lib" },
	  .env = { "NVML_LIB" } },
	{ "podResourcesSocket", K_STR, C(pod_resources_socket), .min = STR_EMPTY_IGNORED,
	  .flag = { "pod-resources-socket" }, .env = { "POD_RESOURCES_SOCKET" } },
	{ "cdiSpecDir", K_STR, C(cdi_spec_dir), .min = STR_EMPTY_IGNORED,
	  .flag = { "cdi-spec-dir" }, .env = { "CDI_SPEC_DIR" } },
	{ "rediscoverInterval", K_DURATION, C(rediscover_interval), .min = USEC_PER_SEC,
	  .max = USEC_PER_SEC * 24 * 3600, .flag = { "rediscover-interval" } },
	{ "health", K_SECTION, 0, .arg = health_fields },
	{ "grpc", K_SECTION, 0, .arg = grpc_fields },
	{ "sharing", K_SECTION, 0, .arg = edgegpu_sharing_fields },
	{ NULL },
};

static const struct field root_fields[] = {
	{ "version", K_VERSION, 0 },
	{ "flags", K_SECTION, 0, .arg = flags_fields },
	{ "resources", K_SECTION, 0, .arg = resources_fields },
	{ "sharing", K_SECTION, 0, .arg = sharing_fields },
	{ "imex", K_SECTION, 0, .arg = imex_fields },
	{ "edgegpu", K_SECTION, 0, .arg = edgegpu_fields },
	{ NULL, K_STR, C(config_file), .min = STR_EMPTY_IGNORED, .flag = { "config-file" },
	  .env = { "CONFIG_FILE" }, .flags = F_NOCMP },
	{ NULL },
};

static bool is_section(const struct field *f)
{
	return f->kind == K_SECTION || f->kind == K_TIME_SLICING;
}

/* --- diagnostics --- */

static void error_release(struct config_error *e)
{
	free(e->file);
	free(e->key);
	free(e->message);
}

void config_diag_release(struct config_diag *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_errors; i++)
		error_release(&d->errors[i]);
	for (size_t i = 0; i < d->n_warnings; i++)
		error_release(&d->warnings[i]);
	free(d->errors);
	free(d->warnings);
	*d = (struct config_diag){ 0 };
}

int config_error_format(const struct config_error *e, struct buf *out)
{
	int r = 0;

	if (e->file && e->line)
		r = buf_printf(out, "%s:%u:%u: ", e->file, e->line, e->column);
	else if (e->file)
		r = buf_printf(out, "%s: ", e->file);
	if (r >= 0 && e->key)
		r = buf_printf(out, "%s: ", e->key);
	if (r >= 0)
		r = buf_printf(out, "%s", e->message ? e->message : "");
	return r;
}

char *config_error_to_string(const struct config_error *e)
{
	struct buf b = { 0 };

	if (config_error_format(e, &b) < 0) {
		buf_release(&b);
		return NULL;
	}
	return (char *)b.data;
}

enum origin {
	ORIGIN_FILE,
	ORIGIN_ENV,
	ORIGIN_FLAG,
};

/*
 * The YAML document as a tree of our own: nodes by index, aliases resolved to the index of
 * their anchor's node.
 */
#define YAML_DEPTH_MAX 64
#define YAML_NODES_MAX 65536

enum ykind {
	Y_SCALAR,
	Y_SEQ,
	Y_MAP,
};

struct ynode {
	enum ykind kind;
	bool plain; /* a plain scalar, typed by its text */
	struct config_pos pos;
	char *value; /* scalar: NUL-terminated, may also hold NULs */
	size_t len;
	size_t *kids; /* sequence: items; mapping: key, value, key, value, ... */
	size_t n_kids, cap_kids;
	char *anchor; /* a collection's anchor, until its end */
};

struct yanchor {
	char *name;
	size_t node;
};

struct ydoc {
	struct ynode *nodes;
	size_t n_nodes, cap_nodes;
	struct yanchor *anchors;
	size_t n_anchors, cap_anchors;
	size_t root;
	bool has_root;
};

struct ctx {
	struct config_diag *d;
	const char *file; /* for positions from the file */
	const struct ydoc *doc;
	unsigned n_errors;
	bool stop; /* too many errors */
};

/* Where a value comes from. */
struct src {
	enum origin origin;
	const char *key;
	const struct ynode *node; /* ORIGIN_FILE */
	const char *text;	  /* ORIGIN_ENV, ORIGIN_FLAG (NULL: a bare flag) */
	struct config_pos pos;
};

static int vdiag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		     const char *key, const char *fmt, va_list ap)
	__attribute__((format(printf, 6, 0)));
static int vdiag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		     const char *key, const char *fmt, va_list ap)
{
	struct config_error e = { 0 }, **arr;
	size_t *n;
	void *p;

	if (!warning) {
		if (x->n_errors >= CONFIG_ERRORS_MAX) {
			x->stop = true;
			return 0;
		}
		x->n_errors++;
		if (x->n_errors == CONFIG_ERRORS_MAX)
			x->stop = true;
	}
	if (!x->d)
		return 0;
	arr = warning ? &x->d->warnings : &x->d->errors;
	n = warning ? &x->d->n_warnings : &x->d->n_errors;
	if (warning && *n >= CONFIG_ERRORS_MAX)
		return 0;
	e.line = pos.line;
	e.column = pos.column;
	e.message = xvasprintf(fmt, ap);
	e.file = xstrdup(file);
	e.key = xstrdup(key);
	if (!e.message || (file && !e.file) || (key && !e.key))
		goto oom;
	/* Grow by one: diags are few, and bounded by CONFIG_ERRORS_MAX for errors. */
	p = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!p)
		goto oom;
	*arr = p;
	(*arr)[(*n)++] = e;
	return 0;
oom:
	error_release(&e);
	return -ENOMEM;
}

static int diag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		    const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int diag_add(struct ctx *x, bool warning, const char *file, struct config_pos pos,
		    const char *key, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, warning, file, pos, key, fmt, ap);
	va_end(ap);
	return r;
}

static const char *src_file(const struct ctx *x, const struct src *s)
{
	return s->origin == ORIGIN_FILE ? x->file : NULL;
}

/* An error or a warning about the value @s. Returns 0 or -ENOMEM. */
static int add_err(struct ctx *x, const struct src *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int add_err(struct ctx *x, const struct src *s, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, false, src_file(x, s), s->pos, s->key, fmt, ap);
	va_end(ap);
	return r;
}

static int add_warn(struct ctx *x, const struct src *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int add_warn(struct ctx *x, const struct src *s, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdiag_add(x, true, src_file(x, s), s->pos, s->key, fmt, ap);
	va_end(ap);
	return r;
}

/* --- YAML nodes --- */

static const char *scalar(const struct ynode *n)
{
	return n->value;
}

static bool is_plain(const struct ynode *n)
{
	return n->kind == Y_SCALAR && n->plain;
}

static bool is_null(const struct ynode *n)
{
	return is_plain(n) && is_yaml_null(scalar(n));
}

static size_t seq_len(const struct ynode *n)
{
	return n->n_kids;
}

static size_t map_len(const struct ynode *n)
{
	return n->n_kids / 2;
}

/* The @i-th item of a sequence, or the @i-th key (even) / value (odd) of a mapping. */
static const struct ynode *kid(const struct ydoc *doc, const struct ynode *n, size_t i)
{
	return &doc->nodes[n->kids[i]];
}

/* How a value looks, for "expected X, got Y". */
static const char *describe(char *out, size_t size, const struct ynode *n)
{
	if (n->kind == Y_SEQ)
		return "a list";
	if (n->kind == Y_MAP)
		return "a mapping";
	if (is_null(n))
		return "null";
	if (!is_plain(n)) {
		char q[96];

		(void)snprintf(out, size, "the string %s", qstr(q, sizeof(q), scalar(n)));
		return out;
	}
	return qstr(out, size, scalar(n));
}

static int type_error(struct ctx *x, const struct src *s, const char *want)
{
	char q[128];

	if (s->origin == ORIGIN_FILE)
		return add_err(x, s, "expected %s, got %s", want, describe(q, sizeof(q), s->node));
	return add_err(x, s, "expected %s, got %s", want, qstr(q, sizeof(q), s->text));
}

/* --- getting typed values from a source; 1: got it, 0: an error was recorded --- */

static int get_text(struct ctx *x, const struct src *s, const char **ret)
{
	int r;

	if (s->origin != ORIGIN_FILE) {
		if (!s->text) {
			r = add_err(x, s, "needs a value");
			return r < 0 ? r : 0;
		}
		*ret = s->text;
		return 1;
	}
	if (s->node->kind != Y_SCALAR) {
		r = type_error(x, s, "a string");
		return r < 0 ? r : 0;
	}
	if (strlen(scalar(s->node)) != s->node->len) {
		r = add_err(x, s, "must not contain a NUL character");
		return r < 0 ? r : 0;
	}
	if (s->node->len > STR_MAX) {
		r = add_err(x, s, "is longer than %d characters", STR_MAX);
		return r < 0 ? r : 0;
	}
	*ret = scalar(s->node);
	return 1;
}

static int get_bool(struct ctx *x, const struct src *s, bool *ret)
{
	int r;

	if (s->origin == ORIGIN_FILE) {
		if (is_plain(s->node) && parse_yaml_bool(scalar(s->node), ret) == 0)
			return 1;
	} else if (s->origin == ORIGIN_FLAG && !s->text) {
		*ret = true;
		return 1;
	} else if (s->origin == ORIGIN_ENV && !*s->text) {
		/* urfave/cli: a variable set to "" means false. */
		*ret = false;
		return 1;
	} else if (parse_go_bool(s->text, ret) == 0) {
		return 1;
	}
	r = type_error(x, s, "true or false");
	return r < 0 ? r : 0;
}

static int get_uint(struct ctx *x, const struct src *s, uint64_t *ret)
{
	bool neg = false;
	int r;

	if (s->origin == ORIGIN_FILE) {
		if (!is_plain(s->node) || parse_go_int(scalar(s->node), true, ret, &neg) < 0) {
			r = type_error(x, s, "an integer");
			return r < 0 ? r : 0;
		}
	} else {
		if (!s->text || parse_go_int(s->text, false, ret, &neg) < 0) {
			r = s->text ? type_error(x, s, "an integer") :
				      add_err(x, s, "needs a value");
			return r < 0 ? r : 0;
		}
	}
	if (neg) {
		char q[96];

		r = add_err(x, s, "must not be negative, got %s",
			    qstr(q, sizeof(q),
				 s->origin == ORIGIN_FILE ? scalar(s->node) : s->text));
		return r < 0 ? r : 0;
	}
	return 1;
}

static int get_duration(struct ctx *x, const struct src *s, usec_t *ret)
{
	const char *t = NULL;
	char q[96];
	bool neg;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	r = parse_go_duration(t, ret, &neg);
	if (r == -ERANGE)
		r = add_err(x, s, "duration %s is too long", qstr(q, sizeof(q), t));
	else if (r < 0)
		r = add_err(x, s,
			    "expected a duration such as \"5s\", \"500ms\" or \"1m30s\", got %s",
			    qstr(q, sizeof(q), t));
	else if (neg)
		r = add_err(x, s, "must not be negative, got %s", qstr(q, sizeof(q), t));
	else
		return 1;
	return r < 0 ? r : 0;
}

static const struct enum_value *enum_lookup(const struct enum_value *v, const char *s)
{
	for (; v->name; v++)
		if (streq(v->name, s))
			return v;
	return NULL;
}

static int enum_error(struct ctx *x, const struct src *s, const struct enum_value *v,
		      const char *got)
{
	char q[96], list[256];
	size_t o = 0;

	list[0] = 0;
	for (; v->name && o < sizeof(list); v++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", v->name);
	return add_err(x, s, "invalid value %s, expected one of: %s", qstr(q, sizeof(q), got),
		       list);
}

/* --- setting one field from one source --- */

static int set_field(struct ctx *x, const struct field *f, void *base, const struct src *s);

static void free_devices(struct config_devices *d)
{
	for (size_t i = 0; i < d->n_refs; i++)
		free(d->refs[i].uuid);
	d->refs = mfree(d->refs);
	d->n_refs = 0;
}

static int set_str(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	char **p = AT(base, f->off), *v;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	if (!*t) {
		if (f->min == STR_EMPTY_IGNORED)
			return 0;
		if (f->min == STR_NONEMPTY)
			return add_err(x, s, "must not be empty");
	}
	v = xstrdup(t);
	if (!v)
		return -ENOMEM;
	free(*p);
	*p = v;
	return 0;
}

static int set_resname(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	char **p = AT(base, f->off), *v = NULL;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	r = resname_normalize(t, &v);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		char q[96];

		return add_err(x, s,
			       "invalid resource name %s: it must be at most %d characters, and "
			       "what follows \"" RESNAME_PREFIX "\" a DNS subdomain (lower-case "
			       "letters, digits, '-' and '.')",
			       qstr(q, sizeof(q), t), RESNAME_MAX);
	}
	free(*p);
	*p = v;
	return 0;
}

static int set_uint(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	uint64_t v = 0;
	int r;

	r = get_uint(x, s, &v);
	if (r <= 0)
		return r;
	if (v < f->min)
		return add_err(x, s, "must be at least %" PRIu64 ", got %" PRIu64, f->min, v);
	if (f->max && v > f->max)
		return add_err(x, s, "must be at most %" PRIu64 ", got %" PRIu64, f->max, v);
	if (f->kind == K_U32)
		*(unsigned *)AT(base, f->off) = (unsigned)v;
	else
		*(uint64_t *)AT(base, f->off) = v;
	return 0;
}

static int set_duration(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	char a[64], b[64];
	usec_t v = 0;
	int r;

	r = get_duration(x, s, &v);
	if (r <= 0)
		return r;
	if (v < f->min)
		return add_err(x, s, "must be at least %s, got %s",
			       format_duration(a, sizeof(a), f->min),
			       format_duration(b, sizeof(b), v));
	if (v > f->max)
		return add_err(x, s, "must be at most %s, got %s",
			       format_duration(a, sizeof(a), f->max),
			       format_duration(b, sizeof(b), v));
	*(usec_t *)AT(base, f->off) = v;
	return 0;
}

static int set_enum(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const struct enum_value *v;
	const char *t = NULL;
	int r;

	r = get_text(x, s, &t);
	if (r <= 0)
		return r;
	v = enum_lookup(f->arg, t);
	if (!v)
		return enum_error(x, s, f->arg, t);
	if (v->refuse)
		return add_err(x, s, "%s", v->refuse);
	if (v->warn)
		return add_warn(x, s, "is not acted on by edgegpu and is ignored");
	if (f->off != NOOFF)
		*(int *)AT(base, f->off) = v->value;
	return 0;
}

/* One device-list strategy name into *bits; 1 ok, 0 error recorded. */
static int dls_one(struct ctx *x, const struct src *s, const char *name, unsigned *bits)
{
	const struct enum_value *v = enum_lookup(dls_values, name);
	int r;

	if (v) {
		*bits |= (unsigned)v->value;
		return 1;
	}
	r = enum_error(x, s, dls_values, name);
	return r < 0 ? r : 0;
}

static int set_dls(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	unsigned bits = 0;
	bool bad = false;
	int r;

	if (s->origin == ORIGIN_FILE && s->node->kind == Y_SEQ) {
		size_t n = seq_len(s->node);

		if (n == 0)
			return add_err(x, s, "needs at least one strategy");
		if (n > CONFIG_LIST_MAX)
			return add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
		for (size_t i = 0; i < n && !x->stop; i++) {
			char key[KEY_MAX];
			struct src is = { ORIGIN_FILE, key };

			is.node = kid(x->doc, s->node, i);
			is.pos = is.node->pos;
			(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
			if (is.node->kind != Y_SCALAR) {
				r = type_error(x, &is, "a strategy name");
				if (r < 0)
					return r;
				bad = true;
				continue;
			}
			r = dls_one(x, &is, scalar(is.node), &bits);
			if (r < 0)
				return r;
			bad |= r == 0;
		}
	} else if (s->origin == ORIGIN_FILE) {
		const char *t = NULL;

		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		r = dls_one(x, s, t, &bits);
		if (r <= 0)
			return r;
	} else {
		/* urfave/cli string slices: split on ',', each piece trimmed. */
		const char *p = s->text;

		if (!p)
			return add_err(x, s, "needs a value");
		for (;;) {
			const char *e = strchr(p, ','), *end = e ? e : p + strlen(p);
			char piece[64];
			size_t len;

			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			len = (size_t)(end - p);
			if (len >= sizeof(piece))
				len = sizeof(piece) - 1;
			memcpy(piece, p, len);
			piece[len] = 0;
			r = dls_one(x, s, piece, &bits);
			if (r < 0)
				return r;
			bad |= r == 0;
			if (!e)
				break;
			p = e + 1;
		}
	}
	if (!bad)
		*(unsigned *)AT(base, f->off) = bits;
	return 0;
}

static int set_xids(struct ctx *x, void *base, const struct src *s)
{
	struct config *c = base;
	uint64_t *v;
	size_t n;

	if (s->origin != ORIGIN_FILE || s->node->kind != Y_SEQ)
		return type_error(x, s, "a list of XIDs");
	n = seq_len(s->node);
	if (n > CONFIG_LIST_MAX)
		return add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n && !x->stop; i++) {
		char key[KEY_MAX];
		struct src is = { ORIGIN_FILE, key };

		is.node = kid(x->doc, s->node, i);
		is.pos = is.node->pos;
		int r;

		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		r = get_uint(x, &is, &v[i]);
		if (r < 0) {
			free(v);
			return r;
		}
	}
	free(c->health.ignored_xids);
	c->health.ignored_xids = v;
	c->health.n_ignored_xids = n;
	return 0;
}

/* One `devices` entry, as NVIDIA's ReplicaDevices reads list items. */
static int parse_ref(struct ctx *x, const struct src *s, struct config_device_ref *ref)
{
	const char *t = scalar(s->node);
	char q[96];
	uint64_t v;
	unsigned u;
	bool neg;

	ref->pos = s->pos;
	if (s->node->kind != Y_SCALAR || is_null(s->node))
		return type_error(x, s, "a GPU index or UUID");
	if (strlen(t) != s->node->len)
		return add_err(x, s, "must not contain a NUL character");
	/* A plain scalar that go-yaml reads as an integer is an index; so is a quoted number. */
	if (is_plain(s->node) && parse_go_int(t, true, &v, &neg) == 0) {
		if (neg || v > UINT32_MAX)
			return add_err(x, s, "GPU index %s is out of range", qstr(q, sizeof(q), t));
		ref->index = (unsigned)v;
		return 0;
	}
	if (*t >= '0' && *t <= '9' && strspn(t, "0123456789") == strlen(t)) {
		if (safe_atou(t, &u) < 0)
			return add_err(x, s, "GPU index %s is out of range", qstr(q, sizeof(q), t));
		ref->index = u;
		return 0;
	}
	if (strncmp(t, "MIG-", 4) == 0 || strchr(t, ':'))
		return add_err(x, s, "MIG devices are not supported by edgegpu yet, got %s",
			       qstr(q, sizeof(q), t));
	if (strncmp(t, "GPU-", 4) == 0 && strlen(t) > 4 && strlen(t) < GPU_UUID_MAX &&
	    !strpbrk(t, " \t\r\n")) {
		ref->uuid = xstrdup(t);
		return ref->uuid ? 0 : -ENOMEM;
	}
	return add_err(x, s, "expected a GPU index or a GPU UUID (\"GPU-...\"), got %s",
		       qstr(q, sizeof(q), t));
}

static bool ref_same(const struct config_device_ref *a, const struct config_device_ref *b)
{
	if (a->uuid || b->uuid)
		return a->uuid && b->uuid && strcasecmp(a->uuid, b->uuid) == 0;
	return a->index == b->index;
}

static const char *ref_str(char *out, size_t size, const struct config_device_ref *r)
{
	if (r->uuid)
		(void)snprintf(out, size, "%s", r->uuid);
	else
		(void)snprintf(out, size, "GPU %u", r->index);
	return out;
}

static int set_devices(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	struct config_devices *d = AT(base, f->off);
	const struct ynode *n = s->node;
	size_t len;

	if (n->kind == Y_SCALAR && f->kind == K_TS_DEVICES) {
		uint64_t v;
		bool neg;

		if (is_plain(n) && parse_go_int(scalar(n), true, &v, &neg) == 0) {
			if (neg || v == 0 || v > CONFIG_LIST_MAX)
				return add_err(
					x, s,
					"a count of devices must be between 1 and %d, got %s%" PRIu64,
					CONFIG_LIST_MAX, neg ? "-" : "", v);
			free_devices(d);
			d->kind = CONFIG_DEVICES_COUNT;
			d->count = (unsigned)v;
			d->pos = s->pos;
			return 0;
		}
		if (streq(scalar(n), "all")) {
			free_devices(d);
			d->kind = CONFIG_DEVICES_ALL;
			d->count = 0;
			d->pos = s->pos;
			return 0;
		}
		return type_error(x, s, "\"all\", a count or a list of GPU indices or UUIDs");
	}
	if (n->kind != Y_SEQ)
		return type_error(x, s,
				  f->kind == K_TS_DEVICES ?
					  "\"all\", a count or a list of GPU indices or UUIDs" :
					  "a list of GPU indices or UUIDs");
	len = seq_len(n);
	if (len > CONFIG_LIST_MAX)
		return add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	free_devices(d);
	d->kind = CONFIG_DEVICES_LIST;
	d->count = 0;
	d->pos = s->pos;
	d->refs = calloc(len ? len : 1, sizeof(*d->refs));
	if (!d->refs)
		return -ENOMEM;
	for (size_t i = 0; i < len && !x->stop; i++) {
		char key[KEY_MAX], a[GPU_UUID_MAX + 8];
		struct src is = { ORIGIN_FILE, key };
		struct config_device_ref *ref = &d->refs[d->n_refs];

		is.node = kid(x->doc, n, i);
		is.pos = is.node->pos;
		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		unsigned before = x->n_errors;
		int r;

		d->n_refs++;
		r = parse_ref(x, &is, ref);
		if (r < 0)
			return r;
		if (x->n_errors != before)
			continue;
		for (size_t j = 0; j + 1 < d->n_refs; j++) {
			if (ref_same(&d->refs[j], ref)) {
				r = add_err(x, &is, "%s is listed twice",
					    ref_str(a, sizeof(a), ref));
				if (r < 0)
					return r;
				break;
			}
		}
	}
	return 0;
}

static int parse_map(struct ctx *x, const struct field *fields, void *base, const char *path,
		     const struct ynode *node);

static void free_fields(const struct field *fields, void *base);

static bool map_has(const struct ydoc *doc, const struct ynode *map, const char *key)
{
	for (size_t i = 0; i + 1 < map->n_kids; i += 2) {
		const struct ynode *k = kid(doc, map, i), *v = kid(doc, map, i + 1);

		if (k->kind == Y_SCALAR && streq(scalar(k), key) && !is_null(v))
			return true;
	}
	return false;
}

static int set_items(struct ctx *x, const struct field *f, struct config *c, const struct src *s)
{
	const struct field *item_fields = f->kind == K_GPUS ? gpu_item_fields : ts_item_fields;
	size_t isize = f->kind == K_GPUS ? sizeof(struct config_gpu_pattern) :
					   sizeof(struct config_ts_resource);
	void **arr = f->kind == K_GPUS ? (void **)&c->gpus : (void **)&c->time_slicing.resources;
	size_t *n_arr = f->kind == K_GPUS ? &c->n_gpus : &c->time_slicing.n_resources;
	size_t n;
	char *items;
	int r;

	if (s->node->kind != Y_SEQ)
		return type_error(x, s, "a list");
	n = seq_len(s->node);
	if (n > CONFIG_LIST_MAX)
		return add_err(x, s, "has more than %d entries", CONFIG_LIST_MAX);
	items = calloc(n ? n : 1, isize);
	if (!items)
		return -ENOMEM;
	for (size_t i = 0; i < *n_arr; i++)
		free_fields(item_fields, (char *)*arr + i * isize);
	free(*arr);
	*arr = items;
	*n_arr = n;
	for (size_t i = 0; i < n && !x->stop; i++) {
		char key[KEY_MAX];
		struct src is = { ORIGIN_FILE, key };
		void *item = items + i * isize;
		struct config_pos *ipos;

		is.node = kid(x->doc, s->node, i);
		is.pos = is.node->pos;
		(void)snprintf(key, sizeof(key), "%s[%zu]", s->key, i);
		if (is.node->kind != Y_MAP) {
			r = type_error(x, &is, "a mapping");
			if (r < 0)
				return r;
			continue;
		}
		ipos = f->kind == K_GPUS ? &((struct config_gpu_pattern *)item)->pos :
					   &((struct config_ts_resource *)item)->pos;
		*ipos = is.pos;
		r = parse_map(x, item_fields, item, key, is.node);
		if (r < 0)
			return r;
		/* Required keys, named by their full path at the entry. */
		for (const struct field *rf = item_fields; rf->key; rf++) {
			char rkey[KEY_MAX + 64];
			struct src rs = is;

			if (rf->kind == K_TS_DEVICES || streq(rf->key, "rename") ||
			    map_has(x->doc, is.node, rf->key))
				continue;
			(void)snprintf(rkey, sizeof(rkey), "%s.%s", key, rf->key);
			rs.key = rkey;
			r = add_err(x, &rs, "is required");
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int set_unsupported(struct ctx *x, const struct field *f, const struct src *s)
{
	char q[96], a[64];
	const char *t = NULL;
	bool b = false;
	usec_t u = 0;
	int r;

	switch (f->kind) {
	case K_UNSUP_BOOL:
		r = get_bool(x, s, &b);
		if (r <= 0)
			return r;
		if (b == (bool)f->min)
			return add_warn(x, s, UNSUP_WARN);
		return add_err(x, s,
			       "is not supported by edgegpu; only the default, %s, is accepted",
			       f->min ? "true" : "false");
	case K_UNSUP_STR:
		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		if (streq(t, f->arg))
			return add_warn(x, s, UNSUP_WARN);
		return add_err(x, s,
			       "is not supported by edgegpu; only the default, %s, is accepted",
			       qstr(q, sizeof(q), f->arg));
	case K_UNSUP_DURATION:
		/* NVIDIA's Duration also takes a plain number of nanoseconds. */
		if (s->origin == ORIGIN_FILE && is_plain(s->node)) {
			uint64_t ns;
			bool neg;

			if (parse_go_int(scalar(s->node), true, &ns, &neg) == 0 && !neg) {
				u = ns / NS_PER_USEC;
				goto have_duration;
			}
		}
		r = get_duration(x, s, &u);
		if (r <= 0)
			return r;
have_duration:
		if (u == f->min)
			return add_warn(x, s, UNSUP_WARN);
		return add_err(x, s,
			       "is not supported by edgegpu; only the default, %s, is accepted",
			       format_duration(a, sizeof(a), f->min));
	case K_UNSUP_ANY:
		return add_warn(x, s, "%s", (const char *)f->arg);
	case K_UNSUP_EMPTY_LIST:
		if (s->origin == ORIGIN_FILE) {
			if (s->node->kind != Y_SEQ)
				return type_error(x, s, "a list");
			if (seq_len(s->node) == 0)
				return add_warn(x, s, UNSUP_WARN);
		} else if (s->text && !*s->text) {
			return add_warn(x, s, UNSUP_WARN);
		}
		return add_err(x, s,
			       "is not supported by edgegpu; only the default, [], is accepted");
	case K_REFUSE:
		if ((s->node->kind == Y_SEQ && seq_len(s->node) == 0) ||
		    (s->node->kind == Y_MAP && map_len(s->node) == 0))
			return add_warn(x, s,
					"is not supported by edgegpu and is ignored (it is empty)");
		return add_err(x, s, "%s", (const char *)f->arg);
	default:
		return 0;
	}
}

static int set_field(struct ctx *x, const struct field *f, void *base, const struct src *s)
{
	const char *t = NULL;
	int r;

	if (f->pos && s->origin == ORIGIN_FILE)
		*(struct config_pos *)AT(base, f->pos - 1) = s->pos;
	switch (f->kind) {
	case K_SECTION:
	case K_TIME_SLICING:
	case K_XIDS:
	case K_DEVICES:
	case K_TS_DEVICES:
	case K_GPUS:
	case K_TS_RESOURCES:
	case K_REFUSE:
		/* Only the file has these; no flag or variable names them. */
		if (!s->node)
			return 0;
		break;
	default:
		break;
	}
	switch (f->kind) {
	case K_SECTION:
		return parse_map(x, f->arg, base, s->key, s->node);
	case K_TIME_SLICING: {
		unsigned before = x->n_errors;

		r = parse_map(x, f->arg, base, s->key, s->node);
		if (r < 0 || s->node->kind != Y_MAP || x->n_errors != before)
			return r;
		if (((struct config *)base)->time_slicing.n_resources == 0) {
			char key[KEY_MAX];
			struct src rs = *s;

			(void)snprintf(key, sizeof(key), "%s.resources", s->key);
			rs.key = key;
			return add_err(x, &rs, "no resources specified");
		}
		return 0;
	}
	case K_BOOL: {
		bool b = false;

		r = get_bool(x, s, &b);
		if (r > 0)
			*(bool *)AT(base, f->off) = b;
		return r < 0 ? r : 0;
	}
	case K_STR:
		return set_str(x, f, base, s);
	case K_RESNAME:
		return set_resname(x, f, base, s);
	case K_U32:
	case K_U64:
		return set_uint(x, f, base, s);
	case K_DURATION:
		return set_duration(x, f, base, s);
	case K_ENUM:
		return set_enum(x, f, base, s);
	case K_DLS:
		return set_dls(x, f, base, s);
	case K_XIDS:
		return set_xids(x, base, s);
	case K_DEVICES:
	case K_TS_DEVICES:
		return set_devices(x, f, base, s);
	case K_GPUS:
	case K_TS_RESOURCES:
		return set_items(x, f, base, s);
	case K_VERSION:
		r = get_text(x, s, &t);
		if (r <= 0)
			return r;
		if (*t && !streq(t, "v1")) {
			char q[96];

			return add_err(x, s, "unknown version %s, expected v1",
				       qstr(q, sizeof(q), t));
		}
		return 0;
	case K_UNSUP_BOOL:
	case K_UNSUP_STR:
	case K_UNSUP_DURATION:
	case K_UNSUP_ANY:
	case K_UNSUP_EMPTY_LIST:
	case K_REFUSE:
		return set_unsupported(x, f, s);
	case K_END:
		break;
	}
	return 0;
}

/* --- walking the document --- */

/* Levenshtein distance, case-insensitive, for "did you mean"; large for long strings. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[65], cur[65];

	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + ((a[i - 1] | 0x20) != (b[j - 1] | 0x20));

			cur[j] = MIN(MIN(prev[j] + 1, cur[j - 1] + 1), sub);
		}
		memcpy(prev, cur, sizeof(prev));
	}
	return prev[lb];
}

static int unknown_key(struct ctx *x, const struct field *fields, const struct src *s,
		       const char *key)
{
	const char *best = NULL;
	size_t bd = 3;

	for (const struct field *f = fields; f->kind != K_END; f++) {
		size_t dist;

		if (!f->key)
			continue;
		dist = edit_distance(key, f->key);
		if (dist < bd) {
			bd = dist;
			best = f->key;
		}
	}
	if (best)
		return add_err(x, s, "unknown key, did you mean \"%s\"?", best);
	return add_err(x, s, "unknown key");
}

static int parse_map(struct ctx *x, const struct field *fields, void *base, const char *path,
		     const struct ynode *node)
{
	uint64_t seen = 0;

	if (is_null(node))
		return 0;
	if (node->kind != Y_MAP) {
		struct src s = { ORIGIN_FILE, path[0] ? path : NULL, node, NULL, node->pos };

		return type_error(x, &s, "a mapping");
	}
	for (size_t p = 0; p + 1 < node->n_kids && !x->stop; p += 2) {
		const struct ynode *k = kid(x->doc, node, p), *v = kid(x->doc, node, p + 1);
		char key[KEY_MAX];
		struct src s = { ORIGIN_FILE, key };
		const struct field *f;
		unsigned i = 0;
		int r;

		s.node = k;
		s.pos = k->pos;
		if (k->kind != Y_SCALAR) {
			char q[96];

			s.key = path[0] ? path : NULL;
			r = add_err(x, &s, "keys must be strings, got %s",
				    describe(q, sizeof(q), k));
			if (r < 0)
				return r;
			continue;
		}
		(void)snprintf(key, sizeof(key), "%s%s%s", path, path[0] ? "." : "", scalar(k));
		for (f = fields; f->kind != K_END; f++, i++)
			if (f->key && streq(f->key, scalar(k)))
				break;
		if (f->kind == K_END || strlen(scalar(k)) != k->len)
			r = unknown_key(x, fields, &s, scalar(k));
		else if (seen & (UINT64_C(1) << i))
			r = add_err(x, &s, "duplicate key");
		else {
			seen |= UINT64_C(1) << i;
			if (is_null(v))
				continue; /* null is "not set", as for NVIDIA's pointer fields */
			s.node = v;
			s.pos = v->pos;
			r = set_field(x, f, base, &s);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- walking the tables: free, copy, compare --- */

static void free_fields(const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *c = base;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			free_fields(f->arg, base);
			break;
		case K_STR:
		case K_RESNAME: {
			char **p = AT(base, f->off);

			*p = mfree(*p);
			break;
		}
		case K_XIDS:
			c->health.ignored_xids = mfree(c->health.ignored_xids);
			c->health.n_ignored_xids = 0;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			free_devices(AT(base, f->off));
			break;
		case K_GPUS:
			for (size_t i = 0; i < c->n_gpus; i++)
				free_fields(gpu_item_fields, &c->gpus[i]);
			c->gpus = mfree(c->gpus);
			c->n_gpus = 0;
			break;
		case K_TS_RESOURCES:
			for (size_t i = 0; i < c->time_slicing.n_resources; i++)
				free_fields(ts_item_fields, &c->time_slicing.resources[i]);
			c->time_slicing.resources = mfree(c->time_slicing.resources);
			c->time_slicing.n_resources = 0;
			break;
		default:
			break;
		}
	}
}

/* Clears every pointer of a shallow copy, so a half-done deep copy frees only its own. */
static void detach_fields(const struct field *fields, void *base)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *c = base;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			detach_fields(f->arg, base);
			break;
		case K_STR:
		case K_RESNAME:
			*(char **)AT(base, f->off) = NULL;
			break;
		case K_XIDS:
			c->health.ignored_xids = NULL;
			c->health.n_ignored_xids = 0;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			((struct config_devices *)AT(base, f->off))->refs = NULL;
			((struct config_devices *)AT(base, f->off))->n_refs = 0;
			break;
		case K_GPUS:
			c->gpus = NULL;
			c->n_gpus = 0;
			break;
		case K_TS_RESOURCES:
			c->time_slicing.resources = NULL;
			c->time_slicing.n_resources = 0;
			break;
		default:
			break;
		}
	}
}

static int copy_items(const struct field *item_fields, size_t isize, void **dst, size_t *dst_n,
		      const void *src, size_t n);

/* @dst is a detached shallow copy of @src. */
static int copy_fields(const struct field *fields, void *dst, const void *src)
{
	int r;

	for (const struct field *f = fields; f->kind != K_END; f++) {
		struct config *dc = dst;
		const struct config *sc = src;

		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			r = copy_fields(f->arg, dst, src);
			if (r < 0)
				return r;
			break;
		case K_STR:
		case K_RESNAME: {
			const char *s = *(char *const *)CAT(src, f->off);

			if (s && !(*(char **)AT(dst, f->off) = xstrdup(s)))
				return -ENOMEM;
			break;
		}
		case K_XIDS:
			if (!sc->health.n_ignored_xids)
				break;
			dc->health.ignored_xids =
				malloc(sc->health.n_ignored_xids * sizeof(uint64_t));
			if (!dc->health.ignored_xids)
				return -ENOMEM;
			memcpy(dc->health.ignored_xids, sc->health.ignored_xids,
			       sc->health.n_ignored_xids * sizeof(uint64_t));
			dc->health.n_ignored_xids = sc->health.n_ignored_xids;
			break;
		case K_DEVICES:
		case K_TS_DEVICES: {
			struct config_devices *dd = AT(dst, f->off);
			const struct config_devices *sd = CAT(src, f->off);

			if (!sd->refs)
				break;
			dd->refs = calloc(sd->n_refs ? sd->n_refs : 1, sizeof(*dd->refs));
			if (!dd->refs)
				return -ENOMEM;
			dd->n_refs = sd->n_refs;
			for (size_t i = 0; i < sd->n_refs; i++) {
				dd->refs[i] = sd->refs[i];
				dd->refs[i].uuid = NULL;
				if (sd->refs[i].uuid &&
				    !(dd->refs[i].uuid = xstrdup(sd->refs[i].uuid)))
					return -ENOMEM;
			}
			break;
		}
		case K_GPUS:
			r = copy_items(gpu_item_fields, sizeof(*sc->gpus), (void **)&dc->gpus,
				       &dc->n_gpus, sc->gpus, sc->n_gpus);
			if (r < 0)
				return r;
			break;
		case K_TS_RESOURCES:
			r = copy_items(ts_item_fields, sizeof(*sc->time_slicing.resources),
				       (void **)&dc->time_slicing.resources,
				       &dc->time_slicing.n_resources, sc->time_slicing.resources,
				       sc->time_slicing.n_resources);
			if (r < 0)
				return r;
			break;
		default:
			break;
		}
	}
	return 0;
}

static int copy_items(const struct field *item_fields, size_t isize, void **dst, size_t *dst_n,
		      const void *src, size_t n)
{
	char *items;

	if (!src)
		return 0;
	items = calloc(n ? n : 1, isize);
	if (!items)
		return -ENOMEM;
	*dst = items;
	*dst_n = n;
	for (size_t i = 0; i < n; i++) {
		memcpy(items + i * isize, (const char *)src + i * isize, isize);
		detach_fields(item_fields, items + i * isize);
	}
	for (size_t i = 0; i < n; i++) {
		int r = copy_fields(item_fields, items + i * isize, (const char *)src + i * isize);

		if (r < 0)
			return r;
	}
	return 0;
}

static bool devices_equal(const struct config_devices *a, const struct config_devices *b)
{
	if (a->kind != b->kind || a->count != b->count || a->n_refs != b->n_refs)
		return false;
	for (size_t i = 0; i < a->n_refs; i++)
		if (!streq_ptr(a->refs[i].uuid, b->refs[i].uuid) ||
		    (!a->refs[i].uuid && a->refs[i].index != b->refs[i].index))
			return false;
	return true;
}

static bool fields_equal(const struct field *fields, const void *a, const void *b)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		const struct config *ca = a, *cb = b;

		if (f->flags & F_NOCMP)
			continue;
		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING:
			if (!fields_equal(f->arg, a, b))
				return false;
			break;
		case K_BOOL:
			if (*(const bool *)CAT(a, f->off) != *(const bool *)CAT(b, f->off))
				return false;
			break;
		case K_STR:
		case K_RESNAME:
			if (!streq_ptr(*(char *const *)CAT(a, f->off),
				       *(char *const *)CAT(b, f->off)))
				return false;
			break;
		case K_U32:
		case K_DLS:
			if (*(const unsigned *)CAT(a, f->off) != *(const unsigned *)CAT(b, f->off))
				return false;
			break;
		case K_ENUM:
			if (f->off != NOOFF &&
			    *(const int *)CAT(a, f->off) != *(const int *)CAT(b, f->off))
				return false;
			break;
		case K_U64:
		case K_DURATION:
			if (*(const uint64_t *)CAT(a, f->off) != *(const uint64_t *)CAT(b, f->off))
				return false;
			break;
		case K_XIDS:
			if (ca->health.n_ignored_xids != cb->health.n_ignored_xids ||
			    (ca->health.n_ignored_xids &&
			     memcmp(ca->health.ignored_xids, cb->health.ignored_xids,
				    ca->health.n_ignored_xids * sizeof(uint64_t)) != 0))
				return false;
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			if (!devices_equal(CAT(a, f->off), CAT(b, f->off)))
				return false;
			break;
		case K_GPUS:
			if (ca->n_gpus != cb->n_gpus)
				return false;
			for (size_t i = 0; i < ca->n_gpus; i++)
				if (!fields_equal(gpu_item_fields, &ca->gpus[i], &cb->gpus[i]))
					return false;
			break;
		case K_TS_RESOURCES:
			if (ca->time_slicing.n_resources != cb->time_slicing.n_resources)
				return false;
			for (size_t i = 0; i < ca->time_slicing.n_resources; i++)
				if (!fields_equal(ts_item_fields, &ca->time_slicing.resources[i],
						  &cb->time_slicing.resources[i]))
					return false;
			break;
		default:
			break;
		}
	}
	return true;
}

/* --- the struct --- */

int config_init(struct config *c)
{
	*c = (struct config){
		.mig_strategy = CONFIG_MIG_NONE,
		.fail_on_init_error = true,
		.device_list_strategy = CONFIG_DLS_ENVVAR,
		.device_id_strategy = CONFIG_DEVICE_ID_UUID,
		.log_level = LOG_LEVEL_INFO,
		.rediscover_interval = 60 * USEC_PER_SEC,
		.health = { .poll_interval = 5 * USEC_PER_SEC,
			    .event_poll_interval = 60 * USEC_PER_SEC,
			    .call_timeout = 10 * USEC_PER_SEC },
		.grpc = { .max_recv_msg_bytes = 16 * MIB, .max_connections = 64 },
		.gpumem = {
			.devices = { .kind = CONFIG_DEVICES_LIST },
			.unit_mib = 1,
			.reserve_mib = 512,
			.on_split = CONFIG_ON_SPLIT_REJECT,
			.placement = CONFIG_PLACEMENT_MASK,
			.mask_hysteresis_mib = 1024,
		},
	};
	c->driver_root = xstrdup("/");
	c->container_driver_root = xstrdup("/driver-root");
	c->device_plugin_path = xstrdup(CONFIG_DEFAULT_DEVICE_PLUGIN);
	c->pod_resources_socket = xstrdup(CONFIG_DEFAULT_POD_RESOURCES);
	c->cdi_spec_dir = xstrdup("/var/run/cdi");
	c->gpumem.resource_name = xstrdup(CONFIG_DEFAULT_GPUMEM);
	if (!c->driver_root || !c->container_driver_root || !c->device_plugin_path ||
	    !c->pod_resources_socket || !c->cdi_spec_dir || !c->gpumem.resource_name) {
		free(c->driver_root);
		free(c->container_driver_root);
		free(c->device_plugin_path);
		free(c->pod_resources_socket);
		free(c->cdi_spec_dir);
		free(c->gpumem.resource_name);
		*c = (struct config){ 0 };
		return -ENOMEM;
	}
	return 0;
}

void config_release(struct config *c)
{
	if (!c)
		return;
	free_fields(root_fields, c);
	/* The analyser does not follow free_fields() through the field offsets. */
	*c = (struct config){ 0 };
} /* NOLINT(clang-analyzer-unix.Malloc) */

int config_copy(struct config *ret, const struct config *src)
{
	int r;

	*ret = *src;
	detach_fields(root_fields, ret);
	r = copy_fields(root_fields, ret, src);
	if (r < 0)
		config_release(ret);
	return r;
}

bool config_equal(const struct config *a, const struct config *b)
{
	return fields_equal(root_fields, a, b);
}

/* --- cross-checks --- */

static bool is_base_resource(const struct config *c, const char *name)
{
	if (streq(name, CONFIG_DEFAULT_RESOURCE))
		return true;
	for (size_t i = 0; i < c->n_gpus; i++)
		if (streq(c->gpus[i].name, name))
			return true;
	return false;
}

static int pos_err(struct ctx *x, struct config_pos pos, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int pos_err(struct ctx *x, struct config_pos pos, const char *key, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int r;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	if (!msg)
		return -ENOMEM;
	r = diag_add(x, false, pos.line ? x->file : NULL, pos, key, "%s", msg);
	free(msg);
	return r;
}

/* Does a time-slicing `devices` value take GPU @ref, as far as the text tells? */
static const struct config_device_ref *ts_takes(const struct config_devices *d,
						const struct config_device_ref *ref)
{
	static const struct config_device_ref counted = { 0 };

	if (d->kind == CONFIG_DEVICES_COUNT)
		return !ref->uuid && ref->index < d->count ? &counted : NULL;
	if (d->kind == CONFIG_DEVICES_LIST)
		for (size_t i = 0; i < d->n_refs; i++)
			if (ref_same(&d->refs[i], ref))
				return &d->refs[i];
	return NULL;
}

/* Where a time-slicing entry's `devices` is, for messages: its value, else the entry. */
static struct config_pos ts_devices_pos(const struct config_ts_resource *t)
{
	return t->devices.pos.line ? t->devices.pos : t->pos;
}

/*
 * Entry @all says `devices: all` (or leaves it out) and entry @other of the same resource lists
 * or counts GPUs: an error at the `all` entry that names the other one with its position.
 */
static int all_beside_other(struct ctx *x, const struct config *c, size_t all, size_t other)
{
	const struct config_ts_resource *a = &c->time_slicing.resources[all],
					*o = &c->time_slicing.resources[other];
	struct config_pos op = ts_devices_pos(o);
	char key[KEY_MAX], where[320] = "", q[96];

	(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices", all);
	if (op.line)
		(void)snprintf(where, sizeof(where), " (%s:%u:%u)", x->file ? x->file : "", op.line,
			       op.column);
	return pos_err(
		x, ts_devices_pos(a), key,
		"\"all\" takes every GPU of %s, but sharing.timeSlicing.resources[%zu].devices%s "
		"time-slices some of them too; list the GPUs of each entry instead",
		qstr(q, sizeof(q), a->name), other, where);
}

static int check_time_slicing(struct ctx *x, struct config *c)
{
	const struct config_gpumem *m = &c->gpumem;
	bool gpumem_on = m->devices.n_refs > 0;
	char key[KEY_MAX], q[96], a[GPU_UUID_MAX + 8];
	int r;

	for (size_t i = 0; i < c->time_slicing.n_resources && !x->stop; i++) {
		struct config_ts_resource *t = &c->time_slicing.resources[i];
		const char *eff = config_ts_resource_name(t);

		if (!t->name)
			continue;
		if (!is_base_resource(c, t->name)) {
			(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].name",
				       i);
			r = pos_err(
				x, t->name_pos, key,
				"%s is not a resource of this node (resources are " CONFIG_DEFAULT_RESOURCE
				" and those in resources.gpus)",
				qstr(q, sizeof(q), t->name));
			if (r < 0)
				return r;
		}
		if (t->rename && !streq(t->rename, t->name)) {
			(void)snprintf(key, sizeof(key),
				       "sharing.timeSlicing.resources[%zu].rename", i);
			if (is_base_resource(c, t->rename))
				r = pos_err(x, t->rename_pos.line ? t->rename_pos : t->pos, key,
					    "%s is already the name of a resource",
					    qstr(q, sizeof(q), t->rename));
			else if (gpumem_on && streq(t->rename, m->resource_name))
				r = pos_err(x, t->rename_pos.line ? t->rename_pos : t->pos, key,
					    "%s is the edgegpu.sharing.memory resource",
					    qstr(q, sizeof(q), t->rename));
			else
				r = 0;
			if (r < 0)
				return r;
		}
		for (size_t j = 0; j < i; j++) {
			const struct config_ts_resource *o = &c->time_slicing.resources[j];
			bool overlap = false;

			if (!o->name)
				continue;
			if (!streq(o->name, t->name)) {
				if (streq(config_ts_resource_name(o), eff)) {
					(void)snprintf(key, sizeof(key),
						       "sharing.timeSlicing.resources[%zu].rename",
						       i);
					r = pos_err(
						x, t->rename_pos.line ? t->rename_pos : t->pos, key,
						"%s is also the name of sharing.timeSlicing.resources[%zu]",
						qstr(q, sizeof(q), eff), j);
					if (r < 0)
						return r;
				}
				continue;
			}
			/*
			 * The same resource twice: the device sets must not meet. `all` is every GPU
			 * of the resource, so beside any other entry it would claim GPUs twice (or,
			 * read as "the rest", make a GPU's replica count depend on entry order).
			 */
			if ((t->devices.kind == CONFIG_DEVICES_ALL) !=
			    (o->devices.kind == CONFIG_DEVICES_ALL)) {
				r = all_beside_other(x, c,
						     t->devices.kind == CONFIG_DEVICES_ALL ? i : j,
						     t->devices.kind == CONFIG_DEVICES_ALL ? j : i);
				if (r < 0)
					return r;
				continue;
			}
			if (t->devices.kind == CONFIG_DEVICES_ALL ||
			    (t->devices.kind == CONFIG_DEVICES_COUNT &&
			     o->devices.kind == CONFIG_DEVICES_COUNT))
				overlap = true; /* both all, or both the first GPUs */
			else if (t->devices.kind == CONFIG_DEVICES_LIST)
				for (size_t k = 0; k < t->devices.n_refs && !overlap; k++)
					overlap = ts_takes(&o->devices, &t->devices.refs[k]);
			else
				for (size_t k = 0; k < o->devices.n_refs && !overlap; k++)
					overlap = ts_takes(&t->devices, &o->devices.refs[k]);
			if (overlap) {
				(void)snprintf(key, sizeof(key),
					       "sharing.timeSlicing.resources[%zu].devices", i);
				r = pos_err(
					x, t->devices.pos.line ? t->devices.pos : t->pos, key,
					"shares GPUs with sharing.timeSlicing.resources[%zu], which "
					"time-slices the same resource",
					j);
				if (r < 0)
					return r;
			}
		}
		/* A GPU can be time-sliced or memory-shared, not both. */
		for (size_t k = 0; k < m->devices.n_refs; k++) {
			const struct config_device_ref *mr = &m->devices.refs[k];

			if (!ts_takes(&t->devices, mr))
				continue;
			(void)snprintf(key, sizeof(key), "edgegpu.sharing.memory.devices[%zu]", k);
			r = pos_err(
				x, mr->pos, key,
				"%s is also time-sliced by sharing.timeSlicing.resources[%zu]; a GPU "
				"can be in only one of the two",
				ref_str(a, sizeof(a), mr), i);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int check_gpumem(struct ctx *x, const struct config *c)
{
	const struct config_gpumem *m = &c->gpumem;
	char q[96];

	if (!m->devices.n_refs)
		return 0;
	/* Time-slicing renames that take this name are reported at the rename. */
	if (!is_base_resource(c, m->resource_name))
		return 0;
	return pos_err(x, m->resource_name_pos, "edgegpu.sharing.memory.resourceName",
		       "%s is already a whole-GPU resource", qstr(q, sizeof(q), m->resource_name));
}

/* What the file alone implies: renameByDefault names. */
static int finish_file(struct ctx *x, struct config *c)
{
	for (size_t i = 0; i < c->time_slicing.n_resources; i++) {
		struct config_ts_resource *t = &c->time_slicing.resources[i];
		char *v;

		if (t->rename || !t->name || !c->time_slicing.rename_by_default)
			continue;
		if (strlen(t->name) + strlen(".shared") > RESNAME_MAX) {
			char key[KEY_MAX];
			int r;

			(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].name",
				       i);
			r = pos_err(x, t->name_pos, key,
				    "is too long to add \".shared\" (renameByDefault) within %d "
				    "characters",
				    RESNAME_MAX);
			if (r < 0)
				return r;
			continue;
		}
		v = xstrcat(t->name, ".shared");
		if (!v)
			return -ENOMEM;
		t->rename = v;
	}
	return 0;
}

static int check_config(struct ctx *x, struct config *c)
{
	int r = check_time_slicing(x, c);

	if (r >= 0)
		r = check_gpumem(x, c);
	return r;
}

/* --- loading --- */

static int syntax_error(struct ctx *x, const yaml_parser_t *p, const char *data, size_t len)
{
	struct config_pos pos = { 0 };

	/* libyaml's loader fails some allocations without setting an error. */
	if (p->error == YAML_MEMORY_ERROR || p->error == YAML_NO_ERROR)
		return -ENOMEM;
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		pos.line = 1;
		pos.column = 1;
		for (size_t i = 0; i < p->problem_offset && i < len; i++) {
			if (data[i] == '\n') {
				pos.line++;
				pos.column = 1;
			} else if (((unsigned char)data[i] & 0xc0) != 0x80) {
				pos.column++;
			}
		}
		return diag_add(x, false, x->file, pos, NULL, "invalid YAML: %s",
				p->problem ? p->problem : "unreadable input");
	}
	pos.line = (unsigned)p->problem_mark.line + 1;
	pos.column = (unsigned)p->problem_mark.column + 1;
	if (p->context)
		return diag_add(x, false, x->file, pos, NULL,
				"invalid YAML: %s %s (line %zu column %zu)",
				p->problem ? p->problem : "syntax error", p->context,
				p->context_mark.line + 1, p->context_mark.column + 1);
	return diag_add(x, false, x->file, pos, NULL, "invalid YAML: %s",
			p->problem ? p->problem : "syntax error");
}

static void ydoc_release(struct ydoc *doc)
{
	for (size_t i = 0; i < doc->n_nodes; i++) {
		free(doc->nodes[i].value);
		free(doc->nodes[i].kids);
		free(doc->nodes[i].anchor);
	}
	for (size_t i = 0; i < doc->n_anchors; i++)
		free(doc->anchors[i].name);
	free(doc->nodes);
	free(doc->anchors);
	*doc = (struct ydoc){ 0 };
}

/* Grows an array of @size-byte elements to hold one more; returns 0 or -ENOMEM. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

struct builder {
	struct ydoc *doc;
	size_t stack[YAML_DEPTH_MAX];
	size_t depth;
	unsigned documents;
	size_t events;
};

static struct config_pos mark_pos(yaml_mark_t m)
{
	return (struct config_pos){ (unsigned)m.line + 1, (unsigned)m.column + 1 };
}

/* Hangs node @i under the open collection, or makes it a document's root. 1: stop. */
static int attach(struct ctx *x, struct builder *b, size_t i)
{
	struct ydoc *doc = b->doc;
	struct ynode *parent;
	int r;

	if (b->depth == 0) {
		if (b->documents <= 1) {
			doc->root = i;
			doc->has_root = true;
			return 0;
		}
		/* NVIDIA reads the first document only; a second one is surely a mistake. */
		if (is_null(&doc->nodes[i]))
			return 0;
		r = diag_add(x, false, x->file, doc->nodes[i].pos, NULL,
			     "more than one YAML document; edgegpu reads one");
		return r < 0 ? r : 1;
	}
	parent = &doc->nodes[b->stack[b->depth - 1]];
	r = grow((void **)&parent->kids, &parent->cap_kids, parent->n_kids, sizeof(size_t));
	if (r < 0)
		return r;
	parent->kids[parent->n_kids++] = i;
	return 0;
}

static int new_node(struct ctx *x, struct builder *b, enum ykind kind, const yaml_event_t *e,
		    size_t *ret)
{
	struct ydoc *doc = b->doc;
	int r;

	r = grow((void **)&doc->nodes, &doc->cap_nodes, doc->n_nodes, sizeof(*doc->nodes));
	if (r < 0)
		return r;
	doc->nodes[doc->n_nodes] = (struct ynode){ .kind = kind, .pos = mark_pos(e->start_mark) };
	*ret = doc->n_nodes++;
	return 0;
}

static int add_anchor(struct builder *b, char *name, size_t node)
{
	struct ydoc *doc = b->doc;
	int r = grow((void **)&doc->anchors, &doc->cap_anchors, doc->n_anchors,
		     sizeof(*doc->anchors));

	if (r < 0) {
		free(name);
		return r;
	}
	doc->anchors[doc->n_anchors++] = (struct yanchor){ name, node };
	return 0;
}

/* One parser event into the tree: 0 go on, 1 stop (an error was recorded), or -ENOMEM. */
static int build_event(struct ctx *x, struct builder *b, yaml_event_t *e)
{
	struct ydoc *doc = b->doc;
	size_t i = 0;
	char *anchor;
	int r;

	if (++b->events > YAML_NODES_MAX) {
		r = diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
			     "the document has more than %d YAML nodes", YAML_NODES_MAX);
		return r < 0 ? r : 1;
	}
	switch (e->type) {
	case YAML_DOCUMENT_START_EVENT:
		b->documents++;
		return 0;
	case YAML_SCALAR_EVENT: {
		const char *tag = (const char *)e->data.scalar.tag;

		r = new_node(x, b, Y_SCALAR, e, &i);
		if (r < 0)
			return r;
		/* The value moves into the tree; libyaml allocated it with malloc(). */
		doc->nodes[i].value = (char *)e->data.scalar.value;
		doc->nodes[i].len = e->data.scalar.length;
		e->data.scalar.value = NULL;
		/* A plain scalar is typed by its text, unless tagged !!str. */
		doc->nodes[i].plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
				      !(tag && streq(tag, YAML_STR_TAG));
		if (e->data.scalar.anchor) {
			anchor = (char *)e->data.scalar.anchor;
			e->data.scalar.anchor = NULL;
			r = add_anchor(b, anchor, i);
			if (r < 0)
				return r;
		}
		return attach(x, b, i);
	}
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		bool seq = e->type == YAML_SEQUENCE_START_EVENT;

		if (b->depth == YAML_DEPTH_MAX) {
			r = diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
				     "nested deeper than %d levels", YAML_DEPTH_MAX);
			return r < 0 ? r : 1;
		}
		r = new_node(x, b, seq ? Y_SEQ : Y_MAP, e, &i);
		if (r < 0)
			return r;
		/* Anchors of collections count from their end: no node contains itself. */
		anchor = (char *)(seq ? e->data.sequence_start.anchor :
					e->data.mapping_start.anchor);
		if (seq)
			e->data.sequence_start.anchor = NULL;
		else
			e->data.mapping_start.anchor = NULL;
		doc->nodes[i].anchor = anchor;
		r = attach(x, b, i);
		if (r != 0)
			return r;
		b->stack[b->depth++] = i;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth == 0)
			return 0; /* libyaml balances its events; this is for the analysers */
		i = b->stack[--b->depth];
		anchor = doc->nodes[i].anchor;
		doc->nodes[i].anchor = NULL;
		return anchor ? add_anchor(b, anchor, i) : 0;
	case YAML_ALIAS_EVENT:
		for (size_t a = doc->n_anchors; a > 0; a--) {
			if (streq(doc->anchors[a - 1].name, (const char *)e->data.alias.anchor))
				return attach(x, b, doc->anchors[a - 1].node);
		}
		r = diag_add(x, false, x->file, mark_pos(e->start_mark), NULL,
			     "invalid YAML: alias *%.64s names no anchor before it",
			     (const char *)e->data.alias.anchor);
		return r < 0 ? r : 1;
	default:
		return 0;
	}
}

/*
 * Builds our own tree from libyaml's events rather than using its document loader, which
 * leaks on some allocation failures, and so that nesting and size have limits of our own.
 * Errors are recorded in @x; returns 0 or -ENOMEM.
 */
static int ydoc_load(struct ctx *x, struct ydoc *doc, const char *data, size_t len)
{
	struct builder b = { .doc = doc };
	yaml_parser_t parser;
	bool done = false;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while (!done) {
		yaml_event_t e;

		if (!yaml_parser_parse(&parser, &e)) {
			r = syntax_error(x, &parser, data, len);
			break;
		}
		done = e.type == YAML_STREAM_END_EVENT;
		r = build_event(x, &b, &e);
		yaml_event_delete(&e);
		if (r != 0)
			break;
	}
	yaml_parser_delete(&parser);
	return r < 0 ? r : 0;
}

static int parse_yaml(struct ctx *x, struct config *c, const char *data, size_t len)
{
	struct ydoc doc = { 0 };
	int r;

	r = ydoc_load(x, &doc, data, len);
	if (r >= 0 && x->n_errors == 0 && doc.has_root) {
		x->doc = &doc;
		r = parse_map(x, root_fields, c, "", &doc.nodes[doc.root]);
		x->doc = NULL;
	}
	ydoc_release(&doc);
	return r;
}

int config_load_buffer(struct config *c, const char *name, const char *data, size_t len,
		       struct config_diag *d)
{
	struct ctx x = { .d = d, .file = name };
	struct config tmp;
	char *file;
	int r;

	if (len > CONFIG_FILE_MAX) {
		r = diag_add(&x, false, name, (struct config_pos){ 0 }, NULL,
			     "the file is larger than %zu bytes", CONFIG_FILE_MAX);
		return r < 0 ? r : -EFBIG;
	}
	file = xstrdup(name);
	if (name && !file)
		return -ENOMEM;
	r = config_copy(&tmp, c);
	if (r < 0) {
		free(file);
		return r;
	}
	free(tmp.config_file);
	tmp.config_file = file;
	r = parse_yaml(&x, &tmp, data, len);
	if (r >= 0 && x.n_errors == 0)
		r = finish_file(&x, &tmp);
	if (r >= 0 && x.n_errors == 0)
		r = check_config(&x, &tmp);
	if (r >= 0 && x.n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		config_release(&tmp);
		return r;
	}
	config_release(c);
	*c = tmp;
	return 0;
}

static const char *file_type(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

/*
 * Reads the config file without ever blocking: opened O_NONBLOCK, and refused unless it is a
 * regular file (a FIFO at the path would otherwise stall the daemon's only thread at start and on
 * every SIGHUP). /dev/null is the one exception, because NVIDIA's config-manager points the file
 * there for "no config", and reading it never blocks. Returns 0, -ENOMEM, -EFBIG, -EINVAL (not
 * a regular file; *@ret_type says what it is; -EISDIR for a directory) or -errno of open/read.
 */
static int read_config_file(const char *path, char **ret, size_t *ret_len, const char **ret_type)
{
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) && !(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))) {
		*ret_type = file_type(st.st_mode);
		r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	r = fd_read_all(fd, CONFIG_FILE_MAX, ret, ret_len);
out:
	(void)close(fd);
	return r;
}

int config_load_file(struct config *c, const char *path, struct config_diag *d)
{
	struct ctx x = { .d = d, .file = path };
	const char *type = NULL;
	char *data = NULL;
	size_t len = 0;
	int r, q;

	r = read_config_file(path, &data, &len, &type);
	if (r == -ENOMEM)
		return r;
	if (r == -EFBIG) {
		q = diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
			     "the file is larger than %zu bytes", CONFIG_FILE_MAX);
		return q < 0 ? q : r;
	}
	if (type) {
		q = diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
			     "cannot read the file: it is %s, not a regular file", type);
		return q < 0 ? q : r;
	}
	if (r < 0) {
		char eb[128];

		q = diag_add(&x, false, path, (struct config_pos){ 0 }, NULL,
			     "cannot read the file: %s", strerror_r(-r, eb, sizeof(eb)));
		return q < 0 ? q : r;
	}
	r = config_load_buffer(c, path, data, len, d);
	free(data);
	return r;
}

/* --- environment and flags --- */

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static int apply_env_fields(struct ctx *x, const struct field *fields, struct config *c,
			    char *const *envp)
{
	int r;

	for (const struct field *f = fields; f->kind != K_END && !x->stop; f++) {
		if (is_section(f)) {
			r = apply_env_fields(x, f->arg, c, envp);
			if (r < 0)
				return r;
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(f->env) && f->env[i]; i++) {
			const char *v = env_get(envp, f->env[i]);
			struct src s = { ORIGIN_ENV, f->env[i], NULL, v };

			if (!v)
				continue;
			r = set_field(x, f, c, &s);
			if (r < 0)
				return r;
			break;
		}
	}
	return 0;
}

int config_apply_env(struct config *c, char *const *envp, struct config_diag *d)
{
	struct ctx x = { .d = d };
	struct config tmp;
	int r;

	r = config_copy(&tmp, c);
	if (r < 0)
		return r;
	r = apply_env_fields(&x, root_fields, &tmp, envp ? envp : environ);
	if (r >= 0 && x.n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		config_release(&tmp);
		return r;
	}
	config_release(c);
	*c = tmp;
	return 0;
}

static const struct field *flag_find(const struct field *fields, const char *name)
{
	for (const struct field *f = fields; f->kind != K_END; f++) {
		if (is_section(f)) {
			const struct field *g = flag_find(f->arg, name);

			if (g)
				return g;
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(f->flag); i++)
			if (f->flag[i] && streq(f->flag[i], name))
				return f;
	}
	return NULL;
}

static const char *flag_name(const char *name)
{
	if (name[0] == '-')
		name++;
	if (name[0] == '-')
		name++;
	return name;
}

bool config_flag_lookup(const char *name, bool *ret_is_bool)
{
	const struct field *f = flag_find(root_fields, flag_name(name));

	if (f && ret_is_bool)
		*ret_is_bool = f->kind == K_BOOL || f->kind == K_UNSUP_BOOL;
	return f;
}

int config_set_flag(struct config *c, const char *name, const char *value, struct config_diag *d)
{
	struct ctx x = { .d = d };
	const char *n = flag_name(name);
	const struct field *f = flag_find(root_fields, n);
	char key[KEY_MAX];
	struct src s = { ORIGIN_FLAG, key, NULL, value };
	struct config tmp;
	int r;

	(void)snprintf(key, sizeof(key), "--%s", n);
	if (!f) {
		r = diag_add(&x, false, NULL, (struct config_pos){ 0 }, key, "unknown flag");
		return r < 0 ? r : -ENOENT;
	}
	r = config_copy(&tmp, c);
	if (r < 0)
		return r;
	r = set_field(&x, f, &tmp, &s);
	if (r >= 0 && x.n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		config_release(&tmp);
		return r;
	}
	config_release(c);
	*c = tmp;
	return 0;
}

/* Fits in sockaddr_un.sun_path with its NUL? */
static bool sun_path_fits(const char *path)
{
	return strlen(path) <= CONFIG_SOCKET_PATH_MAX;
}

static int socket_too_long(struct ctx *x, const char *key, const char *names, const char *what,
			   const char *path)
{
	return pos_err(x, (struct config_pos){ 0 }, key,
		       "the %s \"%s\" is %zu bytes, longer than the %d a unix socket path can hold "
		       "(sun_path); set a shorter %s",
		       what, path, strlen(path), CONFIG_SOCKET_PATH_MAX, names);
}

/*
 * Every resource name this config can advertise: nvidia.com/gpu, the resources.gpus names, the
 * time-slicing names and the gpumem name. Which of them are used depends on the GPUs, so each
 * is checked: the longest socket path decides.
 */
static int check_plugin_sockets(struct ctx *x, const struct config *c)
{
	const char *longest = NULL;
	char *worst = NULL;
	size_t n_names = 1 + c->n_gpus + c->time_slicing.n_resources + 1;
	int r = 0;

	for (size_t i = 0; i < n_names; i++) {
		const char *name = NULL;
		char *sock, *path;

		if (i == 0)
			name = CONFIG_DEFAULT_RESOURCE;
		else if (i <= c->n_gpus)
			name = c->gpus[i - 1].name;
		else if (i <= c->n_gpus + c->time_slicing.n_resources)
			name = config_ts_resource_name(
				&c->time_slicing.resources[i - 1 - c->n_gpus]);
		else if (c->gpumem.devices.n_refs)
			name = c->gpumem.resource_name;
		if (!name)
			continue;
		sock = resource_socket_name(name);
		path = sock ? path_join(c->device_plugin_path, sock) : NULL;
		free(sock);
		if (!path) {
			r = -ENOMEM;
			goto out;
		}
		if (!worst || strlen(path) > strlen(worst)) {
			free(worst);
			worst = path;
			longest = name;
		} else {
			free(path);
		}
	}
	if (worst && !sun_path_fits(worst)) {
		char what[128];

		(void)snprintf(what, sizeof(what), "plugin socket of %s", longest);
		r = socket_too_long(
			x, "edgegpu.devicePluginPath",
			"edgegpu.devicePluginPath (--device-plugin-path, DEVICE_PLUGIN_PATH)", what,
			worst);
	}
out:
	free(worst);
	return r;
}

/* The sockets we serve or dial must fit in sun_path: a config where one cannot never works. */
static int check_socket_paths(struct ctx *x, const struct config *c, const char *kubelet_socket)
{
	int r;

	r = check_plugin_sockets(x, c);
	if (r >= 0 && kubelet_socket && *kubelet_socket && !sun_path_fits(kubelet_socket))
		r = socket_too_long(
			x, c->kubelet_socket ? "edgegpu.kubeletSocket" : "edgegpu.devicePluginPath",
			c->kubelet_socket ?
				"edgegpu.kubeletSocket (--kubelet-socket, KUBELET_SOCKET)" :
				"edgegpu.devicePluginPath (--device-plugin-path, DEVICE_PLUGIN_PATH), or "
				"set edgegpu.kubeletSocket",
			"kubelet socket", kubelet_socket);
	/* Dialled only for gpumem placement: mask. */
	if (r >= 0 && c->gpumem.devices.n_refs && c->gpumem.placement == CONFIG_PLACEMENT_MASK &&
	    c->pod_resources_socket && *c->pod_resources_socket &&
	    !sun_path_fits(c->pod_resources_socket))
		r = socket_too_long(
			x, "edgegpu.podResourcesSocket",
			"edgegpu.podResourcesSocket (--pod-resources-socket, POD_RESOURCES_SOCKET)",
			"pod-resources socket", c->pod_resources_socket);
	return r;
}

int config_validate(struct config *c, struct config_diag *d)
{
	struct ctx x = { .d = d, .file = c->config_file };
	char *dev_root = NULL, *kubelet_socket = NULL;
	int r;

	r = check_config(&x, c);
	if (r < 0)
		return r;
	if (x.n_errors > 0)
		return -EINVAL;
	if (!c->kubelet_socket) {
		kubelet_socket = path_join(c->device_plugin_path, "kubelet.sock");
		if (!kubelet_socket)
			return -ENOMEM;
	}
	r = check_socket_paths(&x, c, kubelet_socket ? kubelet_socket : c->kubelet_socket);
	if (r >= 0 && x.n_errors > 0)
		r = -EINVAL;
	if (r < 0) {
		free(kubelet_socket);
		return r;
	}
	if (!c->dev_root && !(dev_root = xstrdup(c->driver_root))) {
		free(kubelet_socket);
		return -ENOMEM;
	}
	if (dev_root)
		c->dev_root = dev_root;
	if (kubelet_socket)
		c->kubelet_socket = kubelet_socket;
	return 0;
}

int config_build(struct config *c, char *const *envp, const struct config_flag *flags,
		 size_t n_flags, struct config_diag *d)
{
	const char *path = NULL;
	struct config tmp;
	int r, first = 0;

	if (!envp)
		envp = environ;
	for (size_t i = 0; i < n_flags; i++)
		if (streq(flag_name(flags[i].name), "config-file"))
			path = flags[i].value;
	if (!path)
		path = env_get(envp, "CONFIG_FILE");
	r = config_init(&tmp);
	if (r < 0)
		return r;
	if (path && *path) {
		r = config_load_file(&tmp, path, d);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && !first)
			first = r;
	}
	r = config_apply_env(&tmp, envp, d);
	if (r == -ENOMEM)
		goto out;
	if (r < 0 && !first)
		first = r;
	for (size_t i = 0; i < n_flags; i++) {
		r = config_set_flag(&tmp, flags[i].name, flags[i].value, d);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && !first)
			first = r;
	}
	/* config_file says what was loaded, whatever the flags and environment said. */
	if (!streq_ptr(tmp.config_file, path)) {
		free(tmp.config_file);
		tmp.config_file = NULL;
		if (path && *path && !(tmp.config_file = xstrdup(path))) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (path && !*path)
		tmp.config_file = mfree(tmp.config_file);
	r = first;
	if (r >= 0)
		r = config_validate(&tmp, d);
out:
	if (r < 0) {
		config_release(&tmp);
		return r;
	}
	config_release(c);
	*c = tmp;
	return 0;
}

/* --- dump --- */

static int dump_str(struct buf *out, const char *s)
{
	int r = buf_append(out, "\"", 1);

	for (; r >= 0 && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			r = buf_printf(out, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			r = buf_printf(out, "\\x%02x", ch);
		else
			r = buf_append(out, s, 1);
	}
	return r < 0 ? r : buf_append(out, "\"", 1);
}

static int dump_fields(const struct field *fields, const void *base, unsigned indent,
		       struct buf *out);

static int dump_devices(const struct config_devices *d, unsigned indent, struct buf *out)
{
	int r = 0;

	if (d->kind == CONFIG_DEVICES_ALL)
		return buf_printf(out, " all\n");
	if (d->kind == CONFIG_DEVICES_COUNT)
		return buf_printf(out, " %u\n", d->count);
	if (!d->n_refs)
		return buf_printf(out, " []\n");
	r = buf_printf(out, "\n");
	for (size_t i = 0; i < d->n_refs && r >= 0; i++) {
		r = buf_printf(out, "%*s- ", (int)indent + 2, "");
		if (r >= 0 && d->refs[i].uuid)
			r = dump_str(out, d->refs[i].uuid);
		else if (r >= 0)
			r = buf_printf(out, "%u", d->refs[i].index);
		if (r >= 0)
			r = buf_printf(out, "\n");
	}
	return r;
}

static int dump_items(const struct field *item_fields, const void *items, size_t isize, size_t n,
		      unsigned indent, struct buf *out)
{
	struct buf tmp = { 0 };
	int r = 0;

	for (size_t i = 0; i < n && r >= 0; i++) {
		tmp.len = 0;
		r = dump_fields(item_fields, (const char *)items + i * isize, indent + 4, &tmp);
		if (r < 0 || tmp.len < indent + 4)
			continue;
		/* "    name: x" becomes "  - name: x": the first key goes on the dash line. */
		tmp.data[indent + 2] = '-';
		r = buf_append(out, tmp.data, tmp.len);
	}
	buf_release(&tmp);
	return r;
}

static int dump_fields(const struct field *fields, const void *base, unsigned indent,
		       struct buf *out)
{
	int r = 0;

	for (const struct field *f = fields; f->kind != K_END && r >= 0; f++) {
		const struct config *c = base;
		char a[64];

		if (!f->key)
			continue;
		switch (f->kind) {
		case K_SECTION:
		case K_TIME_SLICING: {
			struct buf sub = { 0 };

			if (f->kind == K_TIME_SLICING && !c->time_slicing.n_resources)
				break;
			r = dump_fields(f->arg, base, indent + 2, &sub);
			if (r >= 0 && sub.len)
				r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0 && sub.len)
				r = buf_append(out, sub.data, sub.len);
			buf_release(&sub);
			break;
		}
		case K_VERSION:
			r = buf_printf(out, "%*sversion: v1\n", (int)indent, "");
			break;
		case K_BOOL:
			r = buf_printf(out, "%*s%s: %s\n", (int)indent, "", f->key,
				       *(const bool *)CAT(base, f->off) ? "true" : "false");
			break;
		case K_STR:
		case K_RESNAME: {
			const char *s = *(char *const *)CAT(base, f->off);

			if (!s)
				break;
			r = buf_printf(out, "%*s%s: ", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_str(out, s);
			if (r >= 0)
				r = buf_printf(out, "\n");
			break;
		}
		case K_U32:
			r = buf_printf(out, "%*s%s: %u\n", (int)indent, "", f->key,
				       *(const unsigned *)CAT(base, f->off));
			break;
		case K_U64:
			r = buf_printf(out, "%*s%s: %" PRIu64 "\n", (int)indent, "", f->key,
				       *(const uint64_t *)CAT(base, f->off));
			break;
		case K_DURATION:
			r = buf_printf(out, "%*s%s: \"%s\"\n", (int)indent, "", f->key,
				       format_duration(a, sizeof(a),
						       *(const usec_t *)CAT(base, f->off)));
			break;
		case K_ENUM: {
			const struct enum_value *v = f->arg;

			if (f->off == NOOFF)
				break;
			for (; v->name && v->value != *(const int *)CAT(base, f->off); v++)
				;
			if (v->name)
				r = buf_printf(out, "%*s%s: %s\n", (int)indent, "", f->key,
					       v->name);
			break;
		}
		case K_DLS:
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			for (const struct enum_value *v = dls_values; v->name && r >= 0; v++)
				if (*(const unsigned *)CAT(base, f->off) & (unsigned)v->value)
					r = buf_printf(out, "%*s- %s\n", (int)indent + 2, "",
						       v->name);
			break;
		case K_XIDS:
			r = buf_printf(out, "%*s%s:%s\n", (int)indent, "", f->key,
				       c->health.n_ignored_xids ? "" : " []");
			for (size_t i = 0; i < c->health.n_ignored_xids && r >= 0; i++)
				r = buf_printf(out, "%*s- %" PRIu64 "\n", (int)indent + 2, "",
					       c->health.ignored_xids[i]);
			break;
		case K_DEVICES:
		case K_TS_DEVICES:
			r = buf_printf(out, "%*s%s:", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_devices(CAT(base, f->off), indent, out);
			break;
		case K_GPUS:
			if (!c->n_gpus)
				break;
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_items(gpu_item_fields, c->gpus, sizeof(*c->gpus),
					       c->n_gpus, indent, out);
			break;
		case K_TS_RESOURCES:
			r = buf_printf(out, "%*s%s:\n", (int)indent, "", f->key);
			if (r >= 0)
				r = dump_items(ts_item_fields, c->time_slicing.resources,
					       sizeof(*c->time_slicing.resources),
					       c->time_slicing.n_resources, indent, out);
			break;
		default:
			break;
		}
	}
	return r;
}

int config_dump(const struct config *c, struct buf *out)
{
	int r;

	r = buf_printf(out, "# edgegpu effective configuration\n");
	if (r >= 0 && c->config_file) {
		r = buf_printf(out, "# config file: ");
		if (r >= 0)
			r = dump_str(out, c->config_file);
		if (r >= 0)
			r = buf_printf(out, "\n");
	}
	if (r >= 0)
		r = dump_fields(root_fields, c, 0, out);
	return r;
}

/* --- helpers for the daemon --- */

int config_restart_needed(const struct config *old, const struct config *new, const char **ret_keys,
			  size_t max)
{
	static const struct {
		const char *key;
		size_t offset;
	} restart[] = {
		{ "flags.nvidiaDriverRoot", offsetof(struct config, driver_root) },
		{ "flags.plugin.containerDriverRoot",
		  offsetof(struct config, container_driver_root) },
		{ "edgegpu.nvmlLib", offsetof(struct config, nvml_lib) },
	};
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(restart); i++) {
		const char *a = *(char *const *)((const char *)old + restart[i].offset),
			   *b = *(char *const *)((const char *)new + restart[i].offset);

		if (streq_ptr(a, b))
			continue;
		if (n < max)
			ret_keys[n] = restart[i].key;
		n++;
	}
	return (int)n;
}

bool config_pattern_match(const char *p, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*p == '*') {
			star = p++;
			resume = s;
		} else if (*p == *s) {
			p++;
			s++;
		} else if (star) {
			p = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return !*p;
}

const char *config_gpu_resource(const struct config *c, const char *gpu_name)
{
	for (size_t i = 0; i < c->n_gpus; i++)
		if (config_pattern_match(c->gpus[i].pattern, gpu_name))
			return c->gpus[i].name;
	return CONFIG_DEFAULT_RESOURCE;
}

enum {
	OWNER_NONE = -1,
	OWNER_MEMORY = -2,
};

/* Position in info->devices of the GPU @ref names, or -1. */
static int resolve_ref(const struct gpu_info *info, const struct config_device_ref *ref)
{
	for (unsigned i = 0; i < info->n_devices; i++) {
		const struct gpu_device *g = &info->devices[i];

		if (ref->uuid ? strcasecmp(ref->uuid, g->uuid) == 0 : ref->index == g->index)
			return (int)i;
	}
	return -1;
}

static const char *owner_str(char *out, size_t size, int owner)
{
	if (owner == OWNER_MEMORY)
		(void)snprintf(out, size, "edgegpu.sharing.memory.devices");
	else
		(void)snprintf(out, size, "sharing.timeSlicing.resources[%d]", owner);
	return out;
}

static int assign_ts(struct ctx *x, const struct config *c, const struct gpu_info *info, size_t ti,
		     int *owner, const char **base)
{
	const struct config_ts_resource *t = &c->time_slicing.resources[ti];
	const struct config_devices *d = &t->devices;
	char key[KEY_MAX], a[GPU_UUID_MAX + 8], o[64], q[96];
	int r;

	(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices", ti);
	if (d->kind == CONFIG_DEVICES_ALL) {
		for (unsigned g = 0; g < info->n_devices; g++)
			if (owner[g] == OWNER_NONE && streq(base[g], t->name))
				owner[g] = (int)ti;
		return 0;
	}
	if (d->kind == CONFIG_DEVICES_COUNT) {
		unsigned seen = 0;

		for (unsigned g = 0; g < info->n_devices && seen < d->count; g++) {
			if (!streq(base[g], t->name))
				continue;
			seen++;
			if (owner[g] != OWNER_NONE) {
				r = pos_err(x, d->pos, key, "GPU %u is already in %s",
					    info->devices[g].index,
					    owner_str(o, sizeof(o), owner[g]));
				if (r < 0)
					return r;
			}
			owner[g] = (int)ti;
		}
		if (seen < d->count)
			return pos_err(x, d->pos, key, "asks for %u GPUs of %s, the node has %u",
				       d->count, qstr(q, sizeof(q), t->name), seen);
		return 0;
	}
	for (size_t k = 0; k < d->n_refs; k++) {
		const struct config_device_ref *ref = &d->refs[k];
		int g = resolve_ref(info, ref);

		(void)snprintf(key, sizeof(key), "sharing.timeSlicing.resources[%zu].devices[%zu]",
			       ti, k);
		if (g < 0)
			r = pos_err(x, ref->pos, key, "%s is not a GPU of this node",
				    ref_str(a, sizeof(a), ref));
		else if (!streq(base[g], t->name))
			r = pos_err(x, ref->pos, key, "%s is a %s GPU, not %s",
				    ref_str(a, sizeof(a), ref), base[g],
				    qstr(q, sizeof(q), t->name));
		else if (owner[g] != OWNER_NONE && owner[g] != (int)ti)
			r = pos_err(x, ref->pos, key, "%s is already in %s",
				    ref_str(a, sizeof(a), ref), owner_str(o, sizeof(o), owner[g]));
		else if (owner[g] == (int)ti)
			r = pos_err(x, ref->pos, key, "%s is listed twice",
				    ref_str(a, sizeof(a), ref));
		else {
			owner[g] = (int)ti;
			r = 0;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int config_assign_gpus(const struct config *c, const struct gpu_info *info,
		       struct config_gpu_assignment **ret, struct config_diag *d)
{
	struct ctx x = { .d = d, .file = c->config_file };
	const struct config_gpumem *m = &c->gpumem;
	unsigned n = info->n_devices;
	struct config_gpu_assignment *as = NULL;
	const char **base = NULL;
	int *owner = NULL, r = 0;
	char key[KEY_MAX], a[GPU_UUID_MAX + 8];

	as = calloc(n ? n : 1, sizeof(*as));
	base = calloc(n ? n : 1, sizeof(*base));
	owner = calloc(n ? n : 1, sizeof(*owner));
	if (!as || !base || !owner) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned g = 0; g < n; g++) {
		base[g] = config_gpu_resource(c, info->devices[g].name);
		owner[g] = OWNER_NONE;
	}
	for (size_t k = 0; k < m->devices.n_refs; k++) {
		const struct config_device_ref *ref = &m->devices.refs[k];
		int g = resolve_ref(info, ref);

		(void)snprintf(key, sizeof(key), "edgegpu.sharing.memory.devices[%zu]", k);
		if (g < 0)
			r = pos_err(&x, ref->pos, key, "%s is not a GPU of this node",
				    ref_str(a, sizeof(a), ref));
		else if (owner[g] != OWNER_NONE)
			r = pos_err(&x, ref->pos, key, "GPU %u is listed twice",
				    info->devices[g].index);
		else {
			const struct gpu_device *gd = &info->devices[g];
			uint64_t total = gd->mem_total / MIB;

			owner[g] = OWNER_MEMORY;
			if (total <= m->reserve_mib || total - m->reserve_mib < m->unit_mib)
				r = pos_err(&x, m->reserve_pos, "edgegpu.sharing.memory.reserveMiB",
					    "reserving %" PRIu64 " MiB of GPU %u (%s, %" PRIu64
					    " MiB) leaves no %u MiB unit",
					    m->reserve_mib, gd->index, gd->name, total,
					    m->unit_mib);
		}
		if (r < 0)
			goto out;
	}
	/* Explicit lists and counts first, so `all` takes what is left. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t t = 0; t < c->time_slicing.n_resources; t++) {
			bool all = c->time_slicing.resources[t].devices.kind == CONFIG_DEVICES_ALL;

			if (all != (pass == 1))
				continue;
			r = assign_ts(&x, c, info, t, owner, base);
			if (r < 0)
				goto out;
		}
	for (unsigned g = 0; g < n; g++) {
		if (owner[g] == OWNER_MEMORY) {
			as[g] = (struct config_gpu_assignment){ CONFIG_GPU_MEMORY, m->resource_name,
								1 };
		} else if (owner[g] >= 0) {
			const struct config_ts_resource *t = &c->time_slicing.resources[owner[g]];

			as[g] = (struct config_gpu_assignment){ CONFIG_GPU_TIME_SLICED,
								config_ts_resource_name(t),
								t->replicas, t };
		} else {
			as[g] = (struct config_gpu_assignment){ CONFIG_GPU_WHOLE, base[g], 1 };
		}
	}
	if (x.n_errors > 0)
		r = -EINVAL;
out:
	free(base);
	free(owner);
	if (r < 0) {
		free(as);
		return r;
	}
	*ret = as;
	return 0;
}
