/*
 * fuzz-cron.c: cron_parse and cron_next (cron.c, tz.c). Input: the expression
 * on the first line, an optional zone on the second (any name: tz_load must
 * refuse what is not a zone), an optional start (UTC seconds) on the third.
 * Every expression is also tried in a few fixed zones with DST quirks.
 */
#include "spur.h"
#include "cron.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static const char *zones[] = {
	"UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
	"America/Santiago",
};

static void
fuzz_cron(const char *expr, const char *tz, int64_t start)
{
	struct cron	*c;
	char		*cause = NULL, *s;
	int		 col = 0, i;
	int64_t		 t = start, next;

	if ((c = cron_parse(expr, tz, &cause, &col)) == NULL) {
		if (cause == NULL || col < 1)
			abort();	/* an error must say what and where */
		free(cause);
		return;
	}
	(void)cron_zone_name(c);
	for (i = 0; i < 4; i++) {
		if ((next = cron_next(c, t)) == -1)
			break;
		if (next <= t)
			abort();	/* must be strictly after */
		s = cron_format_local(c, next);
		free(s);
		t = next;
	}
	cron_free(c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char		*s = fuzz_strndup(data, size), *expr = s, *tz = NULL, *at = NULL;
	int64_t		 start = 1700000000;
	size_t		 i;

	if (strlen(s) != size) {
		free(s);	/* NUL inside: the YAML loader never passes one */
		return 0;
	}
	if ((tz = strchr(expr, '\n')) != NULL) {
		*tz++ = '\0';
		if ((at = strchr(tz, '\n')) != NULL) {
			*at++ = '\0';
			if (source_parse_int(at, &start) != 0 ||
			    start < -62135596800LL || start > 253402300799LL)
				start = 1700000000;
		}
		fuzz_cron(expr, tz, start);
	}
	for (i = 0; i < SPUR_ARRLEN(zones); i++)
		fuzz_cron(expr, zones[i], i == 0 ? start : 1710054000 + 86400 * (int64_t)i);
	free(s);
	return 0;
}
