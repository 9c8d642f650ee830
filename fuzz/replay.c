/*
 * Replays a fuzz corpus without libFuzzer: runs LLVMFuzzerTestOneInput over every file of
 * each directory (or file) given, in name order. Fails if nothing was replayed, so a missing
 * corpus cannot pass silently. Built in every build; `meson test --suite fuzz-replay`.
 */

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (16 << 20)

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *data;
	size_t n;

	if (!f) {
		(void)fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	data = malloc(REPLAY_MAX_INPUT);
	if (!data) {
		(void)fclose(f);
		return -1;
	}
	n = fread(data, 1, REPLAY_MAX_INPUT, f);
	(void)fclose(f);
	/* An exact-size copy, so that ASan sees reads past the end of the input. */
	uint8_t *exact = malloc(n ? n : 1);
	if (!exact) {
		free(data);
		return -1;
	}
	memcpy(exact, data, n);
	free(data);
	(void)LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, unsigned *count)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	DIR *d = opendir(dir);

	if (!d) {
		(void)fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));

			if (!nn) {
				r = -1;
				break;
			}
			names = nn;
		}
		size_t len = strlen(dir) + strlen(de->d_name) + 2;

		names[n] = malloc(len);
		if (!names[n]) {
			r = -1;
			break;
		}
		(void)snprintf(names[n], len, "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof(*names), cmp);
	for (size_t i = 0; i < n; i++) {
		if (r == 0 && replay_file(names[i]) == 0)
			(*count)++;
		else
			r = -1;
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	unsigned count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			(void)fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count) < 0 :
					  replay_file(argv[i]) < 0)
			return 1;
		if (!S_ISDIR(st.st_mode))
			count++;
	}
	printf("replayed %u inputs\n", count);
	return count > 0 ? 0 : 1;
}
