/*
 * libFuzzer target for the limits file (interposer/limits-file.h), which every process of a
 * gpumem container parses before anything else. Findings, besides crashes and reads past the
 * input: an accepted file whose limits do not survive limits_format() and limits_parse() again
 * unchanged, a GPU count out of range, a UUID empty, unterminated or with whitespace, a result
 * written on failure, or an error line past the input's last line.
 */
#include <stdlib.h>
#include <string.h>

#include "limits-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[LIMITS_FILE_MAX * 2];
	struct limits l, again;
	unsigned line = 0, lines = 1;
	int n;

	memset(&l, 0xa5, sizeof(l));
	if (limits_parse((const char *)data, size, &l, &line) < 0) {
		for (size_t i = 0; i < size; i++)
			lines += data[i] == '\n';
		if (line > lines || l.n_gpus != 0xa5a5a5a5u)
			abort();
		return 0;
	}
	if (l.n_gpus == 0 || l.n_gpus > REGION_GPUS_MAX)
		abort();
	for (unsigned i = 0; i < l.n_gpus; i++) {
		size_t len = strnlen(l.gpus[i].uuid, REGION_UUID_MAX);

		if (len == 0 || len == REGION_UUID_MAX)
			abort();
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)l.gpus[i].uuid[k] <= ' ')
				abort();
	}
	n = limits_format(&l, buf, sizeof(buf));
	if (n < 0 || limits_parse(buf, (size_t)n, &again, NULL) < 0 ||
	    again.report_only != l.report_only || again.count_managed != l.count_managed ||
	    again.n_gpus != l.n_gpus)
		abort();
	for (unsigned i = 0; i < l.n_gpus; i++)
		if (strcmp(again.gpus[i].uuid, l.gpus[i].uuid) != 0 ||
		    again.gpus[i].limit != l.gpus[i].limit)
			abort();
	return 0;
}
