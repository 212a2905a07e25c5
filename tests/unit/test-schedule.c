/* test-schedule.c: the scheduler's pure parts: the most recent fire time in a window, UTC formatting. */
#include "spur.h"
#include "cron.h"
#include "schedule.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The obvious way: walk every fire time forward from the window's start. */
static int64_t
naive_prev(const struct cron *c, int64_t now, int64_t window)
{
	int64_t	 t, last = -1;

	if (window < 0)
		return -1;
	for (t = cron_next(c, now - window - 1); t != -1 && t <= now; t = cron_next(c, t))
		last = t;
	return last;
}

int
main(void)
{
	static const struct {
		const char	*expr;
		const char	*zone;
	} crons[] = {
		{ "* * * * *", NULL },
		{ "*/15 * * * *", NULL },
		{ "0 9 * * *", "Asia/Kolkata" },
		{ "30 2 * * *", "America/New_York" },	/* in the spring gap */
		{ "30 1 * * *", "America/New_York" },	/* twice in the fall */
		{ "* 0 1 * *", NULL },			/* dense, then a month of nothing */
		{ "0 0 29 2 *", NULL },
		{ "45 23 * * 5", "Pacific/Chatham" },
		{ "0 0 30 2 *", NULL },			/* never */
	};
	static const int64_t windows[] = { 0, 1, 59, 60, 61, 3600, 86399, 86400 * 40,
	    86400 * 400 };
	/* 2026-03-08T06:59:59Z, 2026-03-08T07:30:00Z (a New York spring-forward day), ... */
	static const int64_t nows[] = { 1772953199, 1772955000, 1772956800, 1793496600,
	    1793500200, 1800000000, 1709164800, 1709251199 };
	struct cron	*c;
	char		*cause, buf[64];
	int		 col;
	size_t		 i, j, k;
	int64_t		 got, want;
	int		 bad;

	for (i = 0; i < SPUR_ARRLEN(crons); i++) {
		c = cron_parse(crons[i].expr, crons[i].zone, &cause, &col);
		if (!ok(c != NULL, "parse '%s'", crons[i].expr)) {
			free(cause);
			continue;
		}
		bad = 0;
		for (j = 0; j < SPUR_ARRLEN(nows); j++) {
			for (k = 0; k < SPUR_ARRLEN(windows); k++) {
				got = schedule_prev(c, nows[j], windows[k]);
				want = naive_prev(c, nows[j], windows[k]);
				if (got != want && bad++ < 5)
					printf("# '%s' now=%lld window=%lld: got %lld want %lld\n",
					    crons[i].expr, (long long)nows[j],
					    (long long)windows[k], (long long)got, (long long)want);
			}
		}
		ok(bad == 0, "schedule_prev of '%s' %s agrees with walking every time",
		    crons[i].expr, crons[i].zone != NULL ? crons[i].zone : "UTC");
		cron_free(c);
	}

	c = cron_parse("0 9 * * *", NULL, &cause, &col);
	is_int(schedule_prev(c, 1772960400, 0), 1772960400,
	    "a fire time equal to now is the most recent one");
	is_int(schedule_prev(c, 1772960399, 3600), -1, "none in the window: -1");
	is_int(schedule_prev(c, 1772960399, 86400), 1772960400 - 86400,
	    "yesterday's time within a day");
	is_int(schedule_prev(c, 1772960400, -1), -1, "a negative window holds nothing");
	is_int(schedule_prev(c, 1772960400, INT64_MAX), 1772960400,
	    "an unbounded window does not overflow");
	cron_free(c);

	is_str(schedule_format_utc(0, buf, sizeof buf), "1970-01-01T00:00:00Z", "epoch in UTC");
	is_str(schedule_format_utc(1772960400, buf, sizeof buf), "2026-03-08T09:00:00Z",
	    "a fire time in UTC, no fraction");
	return tap_done();
}
