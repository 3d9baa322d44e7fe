/* replay.c - runs a libFuzzer target over files, without libFuzzer.
 *
 *   replay PATH...   each PATH is a file or a directory (its regular files,
 *                    not recursive, in name order)
 *
 * Links with one fuzz_*.c so the seed corpora run under plain gcc (with
 * ASan/UBSan) in `make check`. Prints one line per input on failure to open,
 * and a summary "replayed N inputs" on stdout. A crash in the target aborts
 * the process (non-zero exit), which is how a bad input is reported. */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	if (!buf) {
		fclose(f);
		return -1;
	}
	for (;;) {
		if (len == cap) {
			uint8_t *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = bigger;
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		fprintf(stderr, "replay: %s: read error\n", path);
		free(buf);
		return -1;
	}
	/* an exact-size copy, so ASan sees reads past the input's end */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	if (getenv("REPLAY_VERBOSE"))
		fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE-OR-DIR...\n", argv[0]);
		return 2;
	}
	unsigned long inputs = 0, errors = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			errors++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				errors++;
			else
				inputs++;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			errors++;
			continue;
		}
		for (int j = 0; j < n; j++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
			if (names[j]->d_name[0] != '.' && stat(path, &st) == 0 &&
			    S_ISREG(st.st_mode)) {
				if (run_file(path) < 0)
					errors++;
				else
					inputs++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("replayed %lu inputs, %lu unreadable\n", inputs, errors);
	return errors ? 1 : 0;
}
