#pragma once

/*
 * A pod-resources List answer for unit tests (tests that link a library naming kubelet): one
 * pod, one container, holding @n @ids of @res. Test thread only; fails the test on error.
 */

#include <stddef.h>
#include <stdint.h>

/* Packs the answer into @out (@max bytes, which must be enough). Returns its length. */
size_t unit_podres_answer(const char *res, char **ids, size_t n, uint8_t *out, size_t max);
