#pragma once

/*
 * Talking to the fake NVML's control socket from tests: one command, one reply line.
 *
 * fake_nvml_ctl() sends @cmd to the socket at @path (NULL: $EDGEGPU_FAKE_NVML_CONTROL) and
 * copies the reply's payload (what follows "ok " or "error ") into @reply. Returns 0 for an
 * "ok" reply, -EPROTO for an "error" reply, or -errno when the socket fails.
 */

#include <stddef.h>
#include <stdint.h>

int fake_nvml_ctl(const char *path, const char *cmd, char *reply, size_t size);

/* printf-style form of the above, discarding the payload. */
int fake_nvml_ctlf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The "count FUNC" of the fake, or UINT64_MAX on failure. */
uint64_t fake_nvml_count(const char *func);
