/* test-ids.c: the ids spur makes: their shape, their order, their spread. */
#include "spur.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int
id_shape(const char *id, const char *prefix)
{
	size_t	 n = strlen(prefix), i;

	if (strncmp(id, prefix, n) != 0 || strlen(id) != n + 20)
		return 0;
	for (i = n; id[i] != '\0'; i++) {
		if (strchr("0123456789abcdefghjkmnpqrstvwxyz", id[i]) == NULL)
			return 0;
	}
	return 1;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
main(void)
{
	struct timespec	 ms = { 0, 2 * 1000 * 1000 };
	char		*a, *b, *ids[1000];
	size_t		 i, dup = 0;

	a = random_id("evt_");
	ok(id_shape(a, "evt_"), "random_id: prefix and 20 base32 characters (%s)", a);
	free(a);
	a = time_id("run_");
	ok(id_shape(a, "run_"), "time_id: the same shape (%s)", a);
	nanosleep(&ms, NULL);
	b = time_id("run_");
	ok(strcmp(a, b) < 0, "time_id: an id made 2 ms later sorts after (%s < %s)", a, b);
	free(a);
	free(b);

	/* Made within the same millisecond or a few: still all different. */
	for (i = 0; i < SPUR_ARRLEN(ids); i++)
		ids[i] = time_id("evt_");
	qsort(ids, SPUR_ARRLEN(ids), sizeof ids[0], cmp);
	for (i = 1; i < SPUR_ARRLEN(ids); i++)
		dup += strcmp(ids[i - 1], ids[i]) == 0;
	is_int(dup, 0, "time_id: 1,000 ids in a row, no two the same");
	for (i = 0; i < SPUR_ARRLEN(ids); i++)
		free(ids[i]);
	return tap_done();
}
