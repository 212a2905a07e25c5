/*
 * standalone.c: a main() for the fuzz targets without libFuzzer: replays files
 * (or every file of a directory) through LLVMFuzzerTestOneInput and prints TAP,
 * so `make check` runs every corpus under the normal ASan/UBSan build.
 * With no arguments it replays $SPUR_SRCDIR/fuzz/corpus/NAME, NAME being the
 * program's name without its "fuzz-" prefix.
 */
#include "spur.h"
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STANDALONE_MAX_INPUT	(16 * 1024 * 1024)

static int	 standalone_n;

static int
standalone_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
standalone_file(const char *path)
{
	char	*data, *cause;
	size_t	 len;

	if (read_file(path, STANDALONE_MAX_INPUT, &data, &len, &cause) != 0) {
		printf("not ok %d - %s: %s\n", ++standalone_n, path, cause);
		free(cause);
		return -1;
	}
	/* Said before the call: if the target crashes, the log names the input. */
	printf("# %s (%zu bytes)\n", path, len);
	fflush(stdout);
	LLVMFuzzerTestOneInput((const uint8_t *)data, len);
	free(data);
	printf("ok %d - %s\n", ++standalone_n, path);
	fflush(stdout);
	return 0;
}

/* Every regular file of dir, in name order, so runs are reproducible. */
static int
standalone_dir(const char *dir)
{
	DIR		 *d;
	struct dirent	 *de;
	char		**names = NULL;
	size_t		  n = 0, i;
	int		  rc = 0;
	struct stat	  sb;

	if ((d = opendir(dir)) == NULL) {
		printf("not ok %d - %s: cannot open\n", ++standalone_n, dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		names = xreallocarray(names, n + 1, sizeof *names);
		names[n++] = path_join(dir, de->d_name);
	}
	closedir(d);
	if (n != 0)
		qsort(names, n, sizeof *names, standalone_cmp);
	for (i = 0; i < n; i++) {
		if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode) &&
		    standalone_file(names[i]) != 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

static int
standalone_arg(const char *path)
{
	struct stat	sb;

	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		return standalone_dir(path);
	return standalone_file(path);
}

int
main(int argc, char **argv)
{
	const char	*name, *srcdir;
	char		*dir;
	int		 i, rc = 0;

	if (argc > 1) {
		for (i = 1; i < argc; i++) {
			if (standalone_arg(argv[i]) != 0)
				rc = 1;
		}
	} else {
		if ((name = strrchr(argv[0], '/')) != NULL)
			name++;
		else
			name = argv[0];
		if (strncmp(name, "fuzz-", 5) == 0)
			name += 5;
		if ((srcdir = getenv("SPUR_SRCDIR")) == NULL)
			srcdir = ".";
		dir = xprintf("%s/fuzz/corpus/%s", srcdir, name);
		if (standalone_dir(dir) != 0)
			rc = 1;
		free(dir);
	}
	if (standalone_n == 0) {
		printf("not ok 1 - no input given or found\n");
		standalone_n = 1;
		rc = 1;
	}
	printf("1..%d\n", standalone_n);
	return rc;
}
