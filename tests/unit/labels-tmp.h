#pragma once

/*
 * What test-labels.c and test-labels-writer.c share: a fresh directory under /tmp (the caller
 * frees the name) and its removal, tree and all. Test thread only.
 */

#include <stdlib.h>

#include "unit.h"
#include "util.h"

static inline char *tmpdir(void)
{
	char *d = strdup("/tmp/test-labels-XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static inline void rm_rf(const char *dir)
{
	char *cmd = strdup_printf("rm -rf '%s'", dir);

	assert_non_null(cmd);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}
