#pragma once

/*
 * The limits file of one gpumem container allocation: written by the device plugin in
 * Allocate (limits_format()), mounted read-only at IPZ_DIR "/limits" in the container, read by
 * the interposer (limits_parse()). It is the only source of a container's limits: the
 * environment is never trusted for them. Text, so a person can read it:
 *
 *   edgegpu-limits 1
 *   mode enforce            enforce | report (the driver enforces; count, never refuse)
 *   managed count           count | ignore (cuMemAllocManaged against the limit)
 *   gpu GPU-8d1f... 4294967296
 *
 * One "gpu <uuid> <bytes>" line per GPU in the container's device order. Unknown keys are
 * skipped (a newer plugin may add some); a missing or malformed required line is an error.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"

#define LIMITS_VERSION	1
#define LIMITS_FILE_MAX 8192 /* a file longer than this is refused */

struct limits {
	bool report_only;   /* mode report */
	bool count_managed; /* managed count */
	unsigned n_gpus;
	struct {
		char uuid[REGION_UUID_MAX];
		uint64_t limit; /* bytes */
	} gpus[REGION_GPUS_MAX];
};

/*
 * Writes @l as the file's text into @buf (NUL-terminated). Returns the length, or -ENOSPC
 * (buf too small), -EINVAL (no GPUs, too many, a UUID with whitespace or too long).
 */
int limits_format(const struct limits *l, char *buf, size_t size);

/*
 * Parses @len bytes of @text into @ret (set only on success). Returns 0, or -EBADMSG with
 * @reterr_line set to the 1-based line that is wrong (0: a required line is missing).
 * Pure: no I/O, no allocation (the interposer calls it before anything else is set up).
 */
int limits_parse(const char *text, size_t len, struct limits *ret, unsigned *reterr_line);
