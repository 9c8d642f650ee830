/*
 * The doctor's compat layer (doctor.h): compat.cuda (--cuda-version against the driver),
 * compat.arch (the node's architecture) and compat.image (--image in the local stores, and for
 * which architectures). The pure parts are in doctor-compat.h, the stores in doctor-image.h.
 */
#include "doctor-compat.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "doctor-image.h"
#include "doctor-int.h"

#define FIX_CUDA_VERSION "Give --cuda-version as MAJOR.MINOR, for example --cuda-version 12.4."
#define FIX_CUDA_TOO_NEW                                                                        \
	"Upgrade the NVIDIA driver to one that supports this CUDA version (the evidence shows " \
	"the minimum), or run an image built for a CUDA version the driver supports. On "       \
	"datacenter GPUs NVIDIA's forward compatibility package (cuda-compat) can run a newer " \
	"CUDA on an older driver; it does not exist for GeForce or Jetson."
#define FIX_CUDA_MINOR                                                                           \
	"This driver runs the image through CUDA minor version compatibility: most programs "    \
	"work, but PTX JIT compilation and features of the newer toolkit need the driver shown " \
	"as the full-feature minimum. Upgrade the driver to it, or build the image's kernels "   \
	"for your GPUs' architecture (SASS) instead of PTX."
#define FIX_CUDA_TEGRA_OLD                                                                        \
	"On Jetson the CUDA driver comes with the L4T release: flash a JetPack whose CUDA is at " \
	"least the requested one (the evidence shows what this release ships), or run an image "  \
	"built for the CUDA this release ships."
#define FIX_CUDA_TEGRA_COMPAT                                                                \
	"Install NVIDIA's cuda-compat package for Jetson (from the JetPack apt repository, " \
	"matching the requested CUDA version) so that this L4T release runs the newer CUDA " \
	"minor, or run an image built for the CUDA this release ships."
#define FIX_IMAGE_REF \
	"Give --image a valid image reference, for example nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04."
#define FIX_IMAGE_ARCH                                                                          \
	"Run an image built for this node's architecture: pull or build the image for it (for " \
	"example docker buildx build --platform linux/arm64,linux/amd64 for a multi-arch "      \
	"image), then pull it on this node again. An image for another architecture fails to "  \
	"start with \"exec format error\"."
#define FIX_IMAGE_ABSENT                                                                      \
	"Pull the image on this node first (crictl pull REF where containerd runs the pods, " \
	"docker pull REF with Docker), then run the doctor again to check its architecture."

/*
 * Minimum Linux x86_64 driver per CUDA toolkit (GA release) for the full feature set, and the
 * minor version compatibility floor per major. Source: NVIDIA, CUDA Toolkit Release Notes,
 * "CUDA Toolkit and Corresponding Driver Versions" and "CUDA Toolkit and Minimum Required
 * Driver Version for CUDA Minor Version Compatibility"
 * (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/), and the CUDA Compatibility guide
 * (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html: 13.x
 * >= 580, 12.x >= 525, 11.x >= 450; 10.x has no minor version compatibility).
 */
static const struct cuda_row {
	unsigned major, minor;
	const char *driver;
} cuda_table[] = {
	{ 10, 0, "410.48" },	{ 10, 1, "418.39" },	{ 10, 2, "440.33" },
	{ 11, 0, "450.51.05" }, { 11, 1, "455.23" },	{ 11, 2, "460.27.03" },
	{ 11, 3, "465.19.01" }, { 11, 4, "470.42.01" }, { 11, 5, "495.29.05" },
	{ 11, 6, "510.39.01" }, { 11, 7, "515.43.04" }, { 11, 8, "520.61.05" },
	{ 12, 0, "525.60.13" }, { 12, 1, "530.30.02" }, { 12, 2, "535.54.03" },
	{ 12, 3, "545.23.06" }, { 12, 4, "550.54.14" }, { 12, 5, "555.42.02" },
	{ 12, 6, "560.28.03" }, { 12, 8, "570.26" },	{ 12, 9, "575.51.03" },
	{ 13, 0, "580.65.06" }, { 13, 1, "590.44.01" },
};

static const struct {
	unsigned major;
	const char *floor;
} cuda_floor[] = { { 11, "450.80.02" }, { 12, "525.60.13" }, { 13, "580.65.06" } };

int doctor_cuda_parse(const char *s, unsigned *ret_major, unsigned *ret_minor)
{
	const char *dot;
	char major[8];
	size_t n;

	if (!s || !(dot = strchr(s, '.')))
		return -EINVAL;
	n = (size_t)(dot - s);
	if (n == 0 || n >= sizeof(major) || !isdigit((unsigned char)dot[1]))
		return -EINVAL;
	memcpy(major, s, n);
	major[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)major[i]))
			return -EINVAL;
	if (safe_atou(major, ret_major) < 0 || safe_atou(dot + 1, ret_minor) < 0 ||
	    *ret_major == 0 || *ret_major > 99 || *ret_minor > 99)
		return -EINVAL;
	return 0;
}

const char *doctor_cuda_min_driver(unsigned major, unsigned minor)
{
	for (size_t i = 0; i < ELEMENTSOF(cuda_table); i++)
		if (cuda_table[i].major == major && cuda_table[i].minor == minor)
			return cuda_table[i].driver;
	return NULL;
}

const char *doctor_cuda_major_floor(unsigned major)
{
	for (size_t i = 0; i < ELEMENTSOF(cuda_floor); i++)
		if (cuda_floor[i].major == major)
			return cuda_floor[i].floor;
	return NULL;
}

/* Up to 3 numeric parts; returns how many, or -1 for bad text. */
static int driver_parts(const char *s, unsigned long v[3])
{
	int n = 0;

	v[0] = v[1] = v[2] = 0;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	while (n < 3) {
		char *end;

		v[n++] = strtoul(s, &end, 10);
		if (*end == 0)
			return n;
		if (*end != '.' || !isdigit((unsigned char)end[1]))
			return -1;
		s = end + 1;
	}
	return -1;
}

int doctor_driver_cmp(const char *a, const char *b)
{
	unsigned long va[3], vb[3];
	int na = driver_parts(a, va), nb = driver_parts(b, vb);

	if (na < 0 || nb < 0)
		return (na >= 0) - (nb >= 0);
	for (int i = 0; i < 3; i++)
		if (va[i] != vb[i])
			return va[i] < vb[i] ? -1 : 1;
	return 0;
}

int doctor_cuda_for_driver(const char *driver, unsigned *ret_major, unsigned *ret_minor)
{
	int found = -ENOENT;

	if (driver_parts(driver, (unsigned long[3]){ 0 }) < 0)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(cuda_table); i++)
		if (doctor_driver_cmp(driver, cuda_table[i].driver) >= 0) {
			*ret_major = cuda_table[i].major;
			*ret_minor = cuda_table[i].minor;
			found = 0;
		}
	return found;
}

enum doctor_cuda_verdict doctor_cuda_judge(unsigned req_major, unsigned req_minor,
					   unsigned nat_major, unsigned nat_minor,
					   const char *driver)
{
	const char *floor = doctor_cuda_major_floor(req_major);

	if (req_major < nat_major || (req_major == nat_major && req_minor <= nat_minor))
		return DOCTOR_CUDA_NATIVE;
	if (req_major > nat_major || !floor)
		return DOCTOR_CUDA_TOO_NEW;
	if (driver && *driver && doctor_driver_cmp(driver, floor) < 0)
		return DOCTOR_CUDA_BELOW_FLOOR;
	return DOCTOR_CUDA_MINOR;
}

int doctor_l4t_cuda(const char *l4t, unsigned *ret_major, unsigned *ret_minor,
		    unsigned *ret_compat_minor)
{
	unsigned long r, rev_major = 0;
	char *end;

	if (!l4t || !isdigit((unsigned char)l4t[0]))
		return -EINVAL;
	r = strtoul(l4t, &end, 10);
	if (*end == '.')
		rev_major = strtoul(end + 1, NULL, 10);
	else if (*end)
		return -EINVAL;
	/* edge-metrics.md (jtop's table) and JetPack release notes: R32 = JetPack 4 (10.2),
	 * R34/R35 = JetPack 5 (11.4, 11.8 through cuda-compat), R36 = JetPack 6 (12.2; 12.6 from
	 * 6.1 = R36.4), R38 = JetPack 7.0/7.1 on Thor (13.0), R39 = JetPack 7.2 (13.2, per
	 * k8s-device-plugin #1963 in anchors-2026.md). */
	switch (r) {
	case 32:
		*ret_major = 10, *ret_minor = 2, *ret_compat_minor = 2;
		return 0;
	case 34:
	case 35:
		*ret_major = 11, *ret_minor = 4, *ret_compat_minor = 8;
		return 0;
	case 36:
		*ret_major = 12, *ret_minor = rev_major >= 4 ? 6 : 2, *ret_compat_minor = UINT_MAX;
		return 0;
	case 38:
		*ret_major = 13, *ret_minor = 0, *ret_compat_minor = UINT_MAX;
		return 0;
	case 39:
		*ret_major = 13, *ret_minor = 2, *ret_compat_minor = UINT_MAX;
		return 0;
	default:
		return -ENOENT;
	}
}

void doctor_l4t_text(const struct gpu_board *b, char *buf, size_t size)
{
	const char *rev = strchr(b->l4t, '.');

	if (!b->l4t[0] || b->l4t_major <= 0)
		(void)snprintf(buf, size, "unknown");
	else
		(void)snprintf(buf, size, "R%d (release), REVISION: %s", b->l4t_major,
			       rev ? rev + 1 : "0");
}

const char *doctor_arch_name(const char *machine)
{
	static const char *const map[][2] = {
		{ "x86_64", "amd64" },	  { "aarch64", "arm64" },   { "arm64", "arm64" },
		{ "armv7l", "arm" },	  { "armv6l", "arm" },	    { "i686", "386" },
		{ "i386", "386" },	  { "ppc64le", "ppc64le" }, { "s390x", "s390x" },
		{ "riscv64", "riscv64" },
	};

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (streq(machine, map[i][0]))
			return map[i][1];
	return machine;
}

/* --- compat.cuda --- */

static void cuda_tegra(struct doctor *dr, const char *id, unsigned rmaj, unsigned rmin,
		       const char *source)
{
	const struct gpu_board *b = &doctor_facts(dr)->board;
	unsigned maj, min, cmin;
	struct doctor_check *c;
	char l4t[64];

	doctor_l4t_text(b, l4t, sizeof(l4t));
	if (doctor_l4t_cuda(b->l4t, &maj, &min, &cmin) < 0) {
		c = doctor_add(dr, id, DOCTOR_SKIP,
			       "the L4T release is unknown: cannot tell which CUDA it ships");
		doctor_evidence(c, "L4T release: %s", l4t);
		if (source)
			doctor_evidence(c, "%s", source);
		return;
	}
	if (rmaj < maj || (rmaj == maj && rmin <= min)) {
		c = doctor_add(dr, id, DOCTOR_PASS,
			       "CUDA %u.%u runs on this L4T release (it ships CUDA %u.%u)", rmaj,
			       rmin, maj, min);
	} else if (rmaj == maj && rmin <= cmin) {
		c = doctor_add(dr, id, DOCTOR_WARN,
			       "CUDA %u.%u needs the cuda-compat package on this L4T release "
			       "(it ships CUDA %u.%u)",
			       rmaj, rmin, maj, min);
		doctor_fix(c, FIX_CUDA_TEGRA_COMPAT);
	} else {
		c = doctor_add(dr, id, DOCTOR_FAIL,
			       "CUDA %u.%u is newer than this L4T release supports (CUDA %u.%u)",
			       rmaj, rmin, maj, min);
		doctor_evidence(c, "the container would fail with \"CUDA driver version is "
				   "insufficient for CUDA runtime version\"");
		doctor_fix(c, FIX_CUDA_TEGRA_OLD);
	}
	if (source)
		doctor_evidence(c, "%s", source);
	doctor_evidence(c, "Tegra board, L4T release: %s", l4t);
	if (b->jetpack[0])
		doctor_evidence(c, "JetPack: %s", b->jetpack);
	doctor_evidence(c, "CUDA shipped with this release: %u.%u", maj, min);
	if (cmin == UINT_MAX)
		doctor_evidence(c, "cuda-compat for Jetson: any CUDA %u.x", maj);
	else if (cmin > min)
		doctor_evidence(c, "cuda-compat for Jetson: up to CUDA %u.%u", maj, cmin);
	else
		doctor_evidence(c, "no cuda-compat package for this release");
	/* JetPack 5 and later support Xavier and Orin only: a Nano or TX2 stays on CUDA 10.2. */
	if (b->l4t_major == 32 && rmaj > maj)
		doctor_evidence(c, "L4T R32 (JetPack 4) is the last release for Jetson Nano and "
				   "TX2: on those boards only an image built for CUDA 10.2 runs");
}

/*
 * Judges CUDA @rmaj.@rmin against the driver (or, on a Jetson, the L4T release) as check @id;
 * @source (NULL: none) is an evidence line saying where that CUDA version came from.
 */
static void judge_cuda(struct doctor *dr, const char *id, unsigned rmaj, unsigned rmin,
		       const char *source)
{
	const struct doctor_facts *f = doctor_facts(dr);
	const char *drv = f->driver_version, *min, *floor;
	unsigned nmaj = 0, nmin = 0;
	struct doctor_check *c = NULL;
	enum doctor_cuda_verdict v;

	if (f->board.tegra) {
		cuda_tegra(dr, id, rmaj, rmin, source);
		return;
	}
	if (f->cuda_driver_version > 0) {
		nmaj = (unsigned)f->cuda_driver_version / 1000;
		nmin = (unsigned)f->cuda_driver_version % 1000 / 10;
	} else if (!drv[0] || doctor_cuda_for_driver(drv, &nmaj, &nmin) < 0) {
		c = doctor_add(dr, id, DOCTOR_SKIP,
			       "the driver version is unknown (NVML did not answer): cannot tell "
			       "whether it supports CUDA %u.%u",
			       rmaj, rmin);
		if (drv[0])
			doctor_evidence(c, "driver %s is older than CUDA 10.0's minimum", drv);
		if (source)
			doctor_evidence(c, "%s", source);
		return;
	}
	v = doctor_cuda_judge(rmaj, rmin, nmaj, nmin, drv);
	switch (v) {
	case DOCTOR_CUDA_NATIVE:
		c = doctor_add(dr, id, DOCTOR_PASS, "the driver supports CUDA %u.%u (up to %u.%u)",
			       rmaj, rmin, nmaj, nmin);
		break;
	case DOCTOR_CUDA_MINOR:
		c = doctor_add(
			dr, id, DOCTOR_WARN,
			"CUDA %u.%u runs only through minor version compatibility (the driver "
			"supports up to %u.%u)",
			rmaj, rmin, nmaj, nmin);
		doctor_fix(c, FIX_CUDA_MINOR);
		break;
	case DOCTOR_CUDA_TOO_NEW:
	case DOCTOR_CUDA_BELOW_FLOOR:
		if (v == DOCTOR_CUDA_TOO_NEW)
			c = doctor_add(dr, id, DOCTOR_FAIL,
				       "CUDA %u.%u is newer than the driver supports (up to %u.%u)",
				       rmaj, rmin, nmaj, nmin);
		else
			c = doctor_add(dr, id, DOCTOR_FAIL,
				       "the driver is older than CUDA %u.x's minor version "
				       "compatibility floor: CUDA %u.%u does not run (up to %u.%u)",
				       rmaj, rmaj, rmin, nmaj, nmin);
		doctor_evidence(c,
				"a CUDA %u.%u container fails with \"CUDA driver version is "
				"insufficient for CUDA runtime version\"",
				rmaj, rmin);
		doctor_fix(c, FIX_CUDA_TOO_NEW);
		break;
	}
	if (source)
		doctor_evidence(c, "%s", source);
	doctor_evidence(c, "driver version: %s", drv[0] ? drv : "unknown");
	if (f->cuda_driver_version > 0)
		doctor_evidence(c, "NVML CUDA driver version: %d (CUDA %u.%u)",
				f->cuda_driver_version, nmaj, nmin);
	min = doctor_cuda_min_driver(rmaj, rmin);
	floor = doctor_cuda_major_floor(rmaj);
	if (min)
		doctor_evidence(c, "CUDA %u.%u full feature set: driver >= %s (Linux x86_64)", rmaj,
				rmin, min);
	else
		doctor_evidence(c, "CUDA %u.%u is not in edgegpu's table (10.0 to 13.1)", rmaj,
				rmin);
	if (floor)
		doctor_evidence(c, "CUDA %u.x minor version compatibility: driver >= %s", rmaj,
				floor);
	if (v == DOCTOR_CUDA_TOO_NEW || v == DOCTOR_CUDA_BELOW_FLOOR)
		doctor_evidence(c, "forward compatibility: the cuda-compat package runs a newer "
				   "CUDA on datacenter GPUs only (not GeForce, not Jetson)");
}

static void check_cuda(struct doctor *dr)
{
	const struct doctor_opts *o = doctor_opts(dr);
	unsigned rmaj, rmin;
	struct doctor_check *c;

	if (!o->cuda_version) {
		doctor_add(dr, "compat.cuda", DOCTOR_SKIP, "no --cuda-version given");
		return;
	}
	if (doctor_cuda_parse(o->cuda_version, &rmaj, &rmin) < 0) {
		c = doctor_add(dr, "compat.cuda", DOCTOR_FAIL,
			       "--cuda-version '%s' is not a CUDA version (MAJOR.MINOR)",
			       o->cuda_version);
		doctor_fix(c, FIX_CUDA_VERSION);
		return;
	}
	judge_cuda(dr, "compat.cuda", rmaj, rmin, NULL);
}

/* --- compat.arch --- */

/* The node's architecture as OCI names it, into @buf; the evidence says where it came from. */
static const char *node_arch(struct doctor *dr, char *buf, size_t size, char *from,
			     size_t from_size)
{
	char *path = doctor_path(dr, "/proc/sys/kernel/arch"), *text = NULL;
	struct utsname u;
	int r = doctor_read(dr, "/proc/sys/kernel/arch", 256, &text, NULL);

	if (r >= 0) {
		text[strcspn(text, " \t\r\n")] = 0;
		if (text[0]) {
			(void)snprintf(buf, size, "%s", doctor_arch_name(text));
			(void)snprintf(from, from_size, "%s: %s", path ? path : "", text);
			free(text);
			free(path);
			return buf;
		}
	}
	free(text);
	/* Under another host root uname() is this machine's: a Jetson's userland is aarch64. */
	if (doctor_facts(dr)->board.tegra) {
		(void)snprintf(buf, size, "arm64");
		(void)snprintf(from, from_size,
			       "a Jetson/Tegra board (%s): L4T is aarch64 (%s: %s)",
			       doctor_facts(dr)->board.soc[0] ? doctor_facts(dr)->board.soc :
								"SoC unknown",
			       path ? path : "", r < 0 ? doctor_strerror(r) : "empty");
		free(path);
		return buf;
	}
	if (uname(&u) < 0) {
		free(path);
		return NULL;
	}
	(void)snprintf(buf, size, "%s", doctor_arch_name(u.machine));
	if (r < 0 && r != -ENOENT)
		(void)snprintf(from, from_size, "uname machine: %s (%s: cannot read: %s)",
			       u.machine, path ? path : "", doctor_strerror(r));
	else
		(void)snprintf(from, from_size, "uname machine: %s", u.machine);
	free(path);
	return buf;
}

/* --- compat.image --- */

static void platforms_text(const struct image_info *info, char *buf, size_t size)
{
	size_t off = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < info->n_platforms && off < size; i++) {
		const struct image_platform *p = &info->platforms[i];
		int n = snprintf(buf + off, size - off, "%s%s/%s%s%s", i ? ", " : "",
				 p->os[0] ? p->os : "?", p->arch, p->variant[0] ? "/" : "",
				 p->variant);

		if (n < 0)
			break;
		off += (size_t)n;
	}
}

static bool image_runs_on(const struct image_info *info, const char *arch)
{
	for (unsigned i = 0; i < info->n_platforms; i++) {
		const struct image_platform *p = &info->platforms[i];

		if ((!p->os[0] || streq(p->os, "linux")) && streq(p->arch, arch))
			return true;
	}
	return false;
}

/* The containerd socket as on the host: the runtime layer's, else the first one there. */
static const char *containerd_socket(struct doctor *dr)
{
	static const char *const known[] = { "/run/containerd/containerd.sock",
					     "/run/k3s/containerd/containerd.sock" };
	const char *set = doctor_facts(dr)->containerd_socket;
	struct stat st;

	if (set[0])
		return set;
	for (size_t i = 0; i < ELEMENTSOF(known); i++)
		if (doctor_stat(dr, known[i], &st, NULL) == 0)
			return known[i];
	return known[0];
}

struct store_result {
	const char *store;
	const char *host;	/* the socket as on the host */
	char *where;		/* the same under the host root, shown */
	int fd;			/* doctor_socket()'s, or -errno */
	char dial[FD_PATH_MAX]; /* what reaches it */
	int r;			/* 1 found, 0 absent, < 0 could not ask */
	char *err;
	struct image_info info;
};

/* The image's CUDA (struct image_info.cuda_version) and the store that said it. */
struct image_cuda {
	char version[32];
	char from[320];
};

/*
 * compat.image: --image in the local stores, and for which architectures. *@ic gets the
 * image's CUDA version when a store's config names one.
 */
static void check_image(struct doctor *dr, const char *arch, struct image_cuda *ic)
{
	const struct doctor_opts *o = doctor_opts(dr);
	struct store_result s[2] = { { .store = "docker" }, { .store = "containerd (k8s.io)" } };
	char *name = NULL, plats[512];
	unsigned found = 0, matching = 0;
	struct doctor_check *c;
	int r;

	if (!o->image) {
		doctor_add(dr, "compat.image", DOCTOR_SKIP, "no --image given");
		return;
	}
	r = image_ref_normalize(o->image, &name);
	if (r < 0) {
		c = doctor_add(dr, "compat.image", DOCTOR_FAIL, "'%s' is not an image reference",
			       o->image);
		if (r == -EINVAL)
			doctor_fix(c, FIX_IMAGE_REF);
		return;
	}
	s[0].host = "/var/run/docker.sock";
	s[1].host = containerd_socket(dr);
	for (size_t i = 0; i < ELEMENTSOF(s); i++) {
		s[i].where = doctor_path(dr, s[i].host);
		s[i].fd = doctor_socket(dr, s[i].host, s[i].dial);
		if (s[i].fd < 0) {
			s[i].r = set_error(&s[i].err, s[i].fd, "cannot connect to %s: %s",
					   s[i].where ? s[i].where : s[i].host,
					   doctor_strerror(s[i].fd));
			continue;
		}
		if (!s[i].where)
			continue;
		if (i == 0)
			s[i].r = image_docker_lookup(s[i].dial, o->image, o->timeout_ms, &s[i].info,
						     &s[i].err);
		else
			s[i].r = image_containerd_lookup(s[i].dial, "k8s.io", name, o->timeout_ms,
							 &s[i].info, &s[i].err);
		/* Messages name the socket under the root, not the fd it was reached through. */
		doctor_replace(&s[i].err, s[i].dial, s[i].where);
		if (s[i].r > 0) {
			found++;
			matching += image_runs_on(&s[i].info, arch);
			if (!ic->version[0] && s[i].info.cuda_version[0]) {
				(void)snprintf(ic->version, sizeof(ic->version), "%s",
					       s[i].info.cuda_version);
				(void)snprintf(
					ic->from, sizeof(ic->from),
					"the image's CUDA: CUDA_VERSION=%s in its config (%s "
					"at %s)",
					s[i].info.cuda_version, s[i].store, s[i].where);
			}
		}
	}
	if (found == 0)
		c = doctor_add(dr, "compat.image", DOCTOR_WARN,
			       "%s is in none of the local image stores asked: cannot tell its "
			       "architecture",
			       o->image);
	else if (matching < found)
		c = doctor_add(dr, "compat.image", DOCTOR_FAIL,
			       "%s is not built for this node's architecture (%s)", o->image, arch);
	else
		c = doctor_add(dr, "compat.image", DOCTOR_PASS, "%s is built for linux/%s",
			       o->image, arch);
	doctor_evidence(c, "node architecture: linux/%s", arch);
	for (size_t i = 0; i < ELEMENTSOF(s); i++) {
		if (!s[i].where)
			continue;
		if (s[i].r > 0) {
			platforms_text(&s[i].info, plats, sizeof(plats));
			doctor_evidence(c, "%s at %s: has %s%s%s%s, platforms %s", s[i].store,
					s[i].where, i == 1 ? name : o->image,
					s[i].info.media_type[0] ? " (" : "", s[i].info.media_type,
					s[i].info.media_type[0] ? ")" : "", plats);
		} else if (s[i].r == 0) {
			doctor_evidence(c, "%s at %s: no image %s", s[i].store, s[i].where,
					i == 1 ? name : o->image);
		} else {
			doctor_evidence(c, "%s at %s: could not ask: %s", s[i].store, s[i].where,
					s[i].err ? s[i].err : strerror(-s[i].r));
		}
	}
	if (found && matching < found)
		doctor_evidence(c, "a container from it fails with \"exec format error\": the pod "
				   "restarts again and again (CrashLoopBackOff)");
	doctor_fix(c, found == 0 ? FIX_IMAGE_ABSENT : matching < found ? FIX_IMAGE_ARCH : NULL);
	for (size_t i = 0; i < ELEMENTSOF(s); i++) {
		fd_close(s[i].fd);
		free(s[i].where);
		free(s[i].err);
	}
	free(name);
}

/*
 * compat.image-cuda: the CUDA the image is built for (CUDA_VERSION in its config, as NVIDIA's
 * CUDA and L4T images set it) against the driver or the L4T release, as compat.cuda judges
 * --cuda-version. On a Jetson the classic failure: a CUDA 12 image on an L4T R32 board.
 */
static void check_image_cuda(struct doctor *dr, const struct image_cuda *ic)
{
	unsigned maj, min;
	char mm[16];
	struct doctor_check *c;

	if (!doctor_opts(dr)->image) {
		doctor_add(dr, "compat.image-cuda", DOCTOR_SKIP, "no --image given");
		return;
	}
	/* "12.2.0" -> "12.2": the major.minor the driver tables speak. */
	(void)snprintf(mm, sizeof(mm), "%.*s", (int)strspn(ic->version, "0123456789"), ic->version);
	if (ic->version[strlen(mm)] == '.')
		(void)snprintf(mm + strlen(mm), sizeof(mm) - strlen(mm), ".%.*s",
			       (int)strspn(ic->version + strlen(mm) + 1, "0123456789"),
			       ic->version + strlen(mm) + 1);
	if (!ic->version[0] || doctor_cuda_parse(mm, &maj, &min) < 0) {
		c = doctor_add(dr, "compat.image-cuda", DOCTOR_SKIP,
			       "the image's CUDA version is unknown: its config sets no "
			       "CUDA_VERSION that the doctor could read");
		doctor_evidence(c, "%s",
				ic->version[0] ? ic->from :
						 "CUDA_VERSION: not found (an image not "
						 "in a local store, one not built from "
						 "NVIDIA's CUDA images, or a multi-arch "
						 "index whose configs are not read)");
		return;
	}
	judge_cuda(dr, "compat.image-cuda", maj, min, ic->from);
}

/*
 * The seed's "GPU models differ across nodes": the models here and the label a pod selects
 * this node's model by. Two models on one node warn: the label names GPU 0's only.
 */
static void check_models(struct doctor *dr)
{
	const struct doctor_facts *f = doctor_facts(dr);
	unsigned n = f->n_gpus < DOCTOR_MAX_GPUS ? f->n_gpus : DOCTOR_MAX_GPUS, distinct = 0;
	struct doctor_check *c;
	const char *other = NULL;

	if (!n) {
		doctor_add(dr, "compat.gpu-models", DOCTOR_SKIP,
			   "no GPU listed by NVML: no model to select by");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		bool seen = false;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = streq(f->names[i], f->names[j]);
		distinct += !seen;
		if (!seen && i > 0 && !other)
			other = f->names[i];
	}
	if (distinct == 1)
		c = doctor_add(dr, "compat.gpu-models", DOCTOR_PASS, "one GPU model: %s",
			       f->names[0]);
	else
		c = doctor_add(
			dr, "compat.gpu-models", DOCTOR_WARN,
			"%u GPU models on one node (%s, %s): the node's labels name GPU 0's only",
			distinct, f->names[0], other ? other : "?");
	for (unsigned i = 0; i < n; i++)
		doctor_evidence(c, "GPU %u: %s", i, f->names[i]);
	if (f->product_label[0])
		doctor_evidence(c,
				"pods select this node's model with nodeSelector "
				"nvidia.com/gpu.product: %s",
				f->product_label);
	if (distinct > 1)
		doctor_fix(
			c,
			"Keep one GPU model per node where pods must choose a model: the node "
			"label nvidia.com/gpu.product (which edgegpu writes for Node Feature "
			"Discovery) names GPU 0's model only. Or give each model its own resource "
			"name (resources.gpus, one pattern and name per model), so that a pod asks "
			"for the model it needs.");
}

void doctor_compat(struct doctor *dr)
{
	struct image_cuda ic = { "", "" };
	char arch[64], from[512];
	struct doctor_check *c;

	check_cuda(dr);
	check_models(dr);
	if (!node_arch(dr, arch, sizeof(arch), from, sizeof(from))) {
		c = doctor_add(dr, "compat.arch", DOCTOR_WARN,
			       "the node's architecture is unknown");
		doctor_evidence(c, "uname: %s", strerror(errno));
		doctor_add(dr, "compat.image", DOCTOR_SKIP,
			   "the node's architecture is unknown: nothing to compare --image with");
		check_image_cuda(dr, &ic);
		return;
	}
	c = doctor_add(dr, "compat.arch", DOCTOR_PASS, "the node is linux/%s", arch);
	doctor_evidence(c, "%s", from);
	check_image(dr, arch, &ic);
	check_image_cuda(dr, &ic);
}
