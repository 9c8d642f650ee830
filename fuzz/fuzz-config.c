/*
 * libFuzzer target for the config parser: bytes in as a YAML document, then, when they load
 * and validate, the dump must load back to an equal config. Crashes, leaks and a broken
 * round trip are findings.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void format_all(const struct config_diag *d)
{
	struct buf b = { 0 };

	for (size_t i = 0; i < d->n_errors; i++)
		(void)!config_error_format(&d->errors[i], &b);
	for (size_t i = 0; i < d->n_warnings; i++)
		(void)!config_error_format(&d->warnings[i], &b);
	buf_release(&b);
}

static void round_trip(const struct config *c)
{
	struct config again;
	struct buf out = { 0 };
	int r;

	if (config_dump(c, &out) < 0)
		goto out;
	if (config_init(&again) < 0)
		goto out;
	r = config_load_buffer(&again, "dump.yaml", (const char *)out.data, out.len, NULL);
	if (r == -ENOMEM)
		goto out_release;
	if (r < 0 || config_validate(&again, NULL) < 0 || !config_equal(c, &again))
		abort();
out_release:
	config_release(&again);
out:
	buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_diag d = { 0 };
	struct config c, saved;

	if (config_init(&c) < 0)
		return 0;
	if (config_copy(&saved, &c) < 0) {
		config_release(&c);
		return 0;
	}
	if (config_load_buffer(&c, "fuzz.yaml", (const char *)data, size, &d) == 0) {
		if (config_validate(&c, &d) == 0)
			round_trip(&c);
	} else if (!config_equal(&c, &saved)) {
		abort(); /* a failed load must leave the config as it was */
	}
	format_all(&d);
	config_diag_release(&d);
	config_release(&saved);
	config_release(&c);
	return 0;
}
