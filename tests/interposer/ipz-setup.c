/*
 * ipz-setup: makes and reads the files the device plugin gives a gpumem container, for the
 * interposer's tests and for people trying the interposer by hand.
 *
 *   ipz-setup DIR UUID:BYTES[,UUID:BYTES...] [--report] [--managed-ignore]
 *       writes DIR/limits (limits_format()) and DIR/state/region (region_create()), making
 *       DIR/state; --report: mode report (count, never refuse); --managed-ignore: managed
 *       memory not counted.
 *   ipz-setup --show DIR/state/region
 *       one line per GPU: gpu=<i> uuid= limit= used= peak= ooms=; then slots= (claimed
 *       slots) generation= (repairs after a process died holding the lock). Read-only.
 *
 * Exit 0, 1 on an error (said on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "limits-file.h"
#include "region.h"

static int usage(void)
{
	(void)fprintf(stderr, "usage: ipz-setup DIR UUID:BYTES[,UUID:BYTES...] [--report] "
			      "[--managed-ignore]\n       ipz-setup --show DIR/state/region\n");
	return 2;
}

static int show(const char *path)
{
	const struct region *r;
	unsigned slots = 0;
	int fd, ret;

	ret = region_check_file(path);
	if (ret < 0) {
		(void)fprintf(stderr, "ipz-setup: %s: %s\n", path,
			      ret == -EBADMSG ? "not a region of this version" : strerror(-ret));
		return 1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		(void)fprintf(stderr, "ipz-setup: %s: %s\n", path, strerror(errno));
		return 1;
	}
	r = mmap(NULL, sizeof(*r), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED) {
		(void)fprintf(stderr, "ipz-setup: mmap %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (unsigned g = 0; g < r->n_gpus; g++)
		printf("gpu=%u uuid=%.*s limit=%llu used=%llu peak=%llu ooms=%llu\n", g,
		       REGION_UUID_MAX, r->gpus[g].uuid,
		       (unsigned long long)__atomic_load_n(&r->gpus[g].limit, __ATOMIC_RELAXED),
		       (unsigned long long)__atomic_load_n(&r->gpus[g].used, __ATOMIC_RELAXED),
		       (unsigned long long)__atomic_load_n(&r->gpus[g].peak, __ATOMIC_RELAXED),
		       (unsigned long long)__atomic_load_n(&r->gpus[g].ooms, __ATOMIC_RELAXED));
	for (unsigned i = 0; i < r->n_slots; i++)
		slots += __atomic_load_n(&r->slots[i].pid, __ATOMIC_RELAXED) != 0;
	printf("slots=%u generation=%llu\n", slots,
	       (unsigned long long)__atomic_load_n(&r->generation, __ATOMIC_RELAXED));
	munmap((void *)r, sizeof(*r));
	return 0;
}

/* "UUID:BYTES[,...]" into @l; the UUID is everything before the last ':' of each item. */
static int parse_gpus(char *spec, struct limits *l)
{
	char *save = NULL;

	for (char *item = strtok_r(spec, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(item, ':'), *end;
		unsigned long long v;

		if (!colon || colon == item || l->n_gpus >= REGION_GPUS_MAX ||
		    (size_t)(colon - item) >= REGION_UUID_MAX)
			return -EINVAL;
		*colon = '\0';
		errno = 0;
		v = strtoull(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || colon[1] == '-')
			return -EINVAL;
		(void)snprintf(l->gpus[l->n_gpus].uuid, REGION_UUID_MAX, "%s",
			       item); /* fits: above */
		l->gpus[l->n_gpus++].limit = v;
	}
	return l->n_gpus ? 0 : -EINVAL;
}

static int write_limits(const char *dir, const struct limits *l)
{
	char text[LIMITS_FILE_MAX], path[PATH_MAX], tmp[PATH_MAX];
	int n, fd;

	n = limits_format(l, text, sizeof(text));
	if (n < 0)
		return n;
	if (snprintf(path, sizeof(path), "%s/limits", dir) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s/.limits.tmp", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)n) != n || fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
		n = errno ? -errno : -EIO;
		close(fd);
		unlink(tmp);
		return n;
	}
	close(fd);
	return rename(tmp, path) < 0 ? -errno : 0;
}

int main(int argc, char **argv)
{
	struct limits l = { .count_managed = true };
	struct region_init_gpu g[REGION_GPUS_MAX];
	char state[PATH_MAX];
	const char *dir = NULL;
	char *spec = NULL;
	int ret;

	if (argc == 3 && !strcmp(argv[1], "--show"))
		return show(argv[2]);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--report"))
			l.report_only = true;
		else if (!strcmp(argv[i], "--managed-ignore"))
			l.count_managed = false;
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else if (argv[i][0] != '-' && !spec)
			spec = argv[i];
		else
			return usage(); /* an unknown option, or a third word */
	}
	if (!dir || !spec)
		return usage();
	if (parse_gpus(spec, &l) < 0) {
		(void)fprintf(stderr,
			      "ipz-setup: bad GPU list (UUID:BYTES[,UUID:BYTES...], at most %d)\n",
			      REGION_GPUS_MAX);
		return 2;
	}
	if ((size_t)snprintf(state, sizeof(state), "%s/state", dir) >= sizeof(state))
		return usage();
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		(void)fprintf(stderr, "ipz-setup: mkdir %s: %s\n", dir, strerror(errno));
		return 1;
	}
	/* A container's processes may be any user: the state directory is theirs to enter. */
	if ((mkdir(state, 0755) < 0 && errno != EEXIST) || chmod(state, 0755) < 0) {
		(void)fprintf(stderr, "ipz-setup: %s: %s\n", state, strerror(errno));
		return 1;
	}
	ret = write_limits(dir, &l);
	if (ret < 0) {
		(void)fprintf(stderr, "ipz-setup: %s/limits: %s\n", dir, strerror(-ret));
		return 1;
	}
	for (unsigned i = 0; i < l.n_gpus; i++)
		g[i] = (struct region_init_gpu){ l.gpus[i].uuid, l.gpus[i].limit };
	ret = region_create(state, g, l.n_gpus, l.report_only);
	if (ret < 0) {
		(void)fprintf(stderr, "ipz-setup: %s/%s: %s\n", state, REGION_FILE, strerror(-ret));
		return 1;
	}
	return 0;
}
