/* test-cron.c: cron parsing, errors with columns, next fire times across DST, leap years and zones. */
#include "spur.h"
#include "cron.h"
#include "tz.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "YYYY-MM-DDTHH:MM:SS" followed by Z or +HH:MM / -HH:MM, to UTC seconds. */
static int64_t
iso(const char *s)
{
	int	 y, mo, d, h, mi, sec, oh = 0, om = 0, n = 0;
	char	 sign = 'Z';

	if (sscanf(s, "%d-%d-%dT%d:%d:%d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
		fatal("bad test time %s", s);
	if (s[n] != 'Z' && sscanf(s + n, "%c%d:%d", &sign, &oh, &om) != 3)
		fatal("bad test time %s", s);
	return tz_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
	    (sign == '-' ? -1 : sign == '+' ? 1 : 0) * (oh * 3600 + om * 60);
}

/* The fire times after start, as local ISO strings, compared with want (space separated). */
static void
seq(const char *expr, const char *zone, const char *start, const char *want)
{
	struct cron	*c;
	struct buf	 b;
	char		*cause, *s, name[256];
	int64_t		 t;
	int		 col, n, i;

	snprintf(name, sizeof name, "'%s' in %s after %s", expr, zone ? zone : "UTC", start);
	if ((c = cron_parse(expr, zone, &cause, &col)) == NULL) {
		ok(0, "%s: parse failed at %d: %s", name, col, cause);
		free(cause);
		return;
	}
	for (n = 1, s = (char *)want; *s != '\0'; s++)
		n += *s == ' ';
	buf_init(&b, 0);
	t = iso(start);
	for (i = 0; i < n; i++) {
		if (i > 0)
			buf_adds(&b, " ");
		if ((t = cron_next(c, t)) == -1) {
			buf_adds(&b, "-1");
			break;
		}
		s = cron_format_local(c, t);
		buf_adds(&b, s);
		free(s);
	}
	is_str(buf_cstr(&b), want, "%s", name);
	buf_free(&b);
	cron_free(c);
}

/* expr must be refused at column col with a cause containing what. */
static void
bad(const char *expr, const char *zone, int want_col, const char *what)
{
	struct cron	*c;
	char		*cause = NULL, name[128];
	size_t		 i;
	int		 col = -1;

	/* The expression as a printable test name. */
	for (i = 0; expr[i] != '\0' && i < sizeof name - 1; i++)
		name[i] = expr[i] >= 0x20 && expr[i] < 0x7f ? expr[i] : '?';
	name[i] = '\0';
	c = cron_parse(expr, zone, &cause, &col);
	if (c != NULL) {
		ok(0, "'%s' refused", name);
		cron_free(c);
		return;
	}
	if (!ok(cause != NULL && strstr(cause, what) != NULL, "'%s': cause has '%s'", name,
	    what))
		printf("#   cause: %s\n", cause ? cause : "(null)");
	is_int(col, want_col, "'%s': column", name);
	free(cause);
}

static void
test_basic(void)
{
	seq("*/15 * * * *", NULL, "2024-01-01T00:00:00Z",
	    "2024-01-01T00:15:00+00:00 2024-01-01T00:30:00+00:00 2024-01-01T00:45:00+00:00 "
	    "2024-01-01T01:00:00+00:00");
	/* Strictly after, also from the middle of a minute. */
	seq("* * * * *", "", "2024-01-01T00:00:30Z",
	    "2024-01-01T00:01:00+00:00 2024-01-01T00:02:00+00:00");
	seq("5/20 */6 * * *", "UTC", "2024-01-01T00:00:00Z",
	    "2024-01-01T00:05:00+00:00 2024-01-01T00:25:00+00:00 2024-01-01T00:45:00+00:00 "
	    "2024-01-01T06:05:00+00:00");
	seq("1-30/10,59 23 * * *", NULL, "2024-01-01T00:00:00Z",
	    "2024-01-01T23:01:00+00:00 2024-01-01T23:11:00+00:00 2024-01-01T23:21:00+00:00 "
	    "2024-01-01T23:59:00+00:00 2024-01-02T23:01:00+00:00");
	seq("0 0 1 jan,Jul *", NULL, "2024-01-01T00:00:00Z",
	    "2024-07-01T00:00:00+00:00 2025-01-01T00:00:00+00:00");
	seq("0 9 * * mon-FRI", NULL, "2024-09-06T10:00:00Z",
	    "2024-09-09T09:00:00+00:00 2024-09-10T09:00:00+00:00");
	seq("0 0 * NOV-dec *", NULL, "2024-12-31T00:00:00Z", "2025-11-01T00:00:00+00:00");
	/* 0 and 7 are both Sunday; ranges may end at 7. */
	seq("0 0 * * 7", NULL, "2024-09-01T00:00:00Z", "2024-09-08T00:00:00+00:00");
	seq("0 0 * * 0", NULL, "2024-09-01T00:00:00Z", "2024-09-08T00:00:00+00:00");
	seq("0 0 * * SUN", NULL, "2024-09-01T00:00:00Z", "2024-09-08T00:00:00+00:00");
	seq("0 0 * * 5-7", NULL, "2024-09-01T00:00:00Z",
	    "2024-09-06T00:00:00+00:00 2024-09-07T00:00:00+00:00 2024-09-08T00:00:00+00:00 "
	    "2024-09-13T00:00:00+00:00");
	/* N/STEP runs to the field's end, which for days of the week is 7 (Sunday). */
	seq("0 0 * * 1/2", NULL, "2024-09-01T00:00:00Z",
	    "2024-09-02T00:00:00+00:00 2024-09-04T00:00:00+00:00 2024-09-06T00:00:00+00:00 "
	    "2024-09-08T00:00:00+00:00");
	seq("0 0 * * */2", NULL, "2024-09-01T00:00:00Z",
	    "2024-09-03T00:00:00+00:00 2024-09-05T00:00:00+00:00 2024-09-07T00:00:00+00:00 "
	    "2024-09-08T00:00:00+00:00");
	/* Surrounding blanks and tabs. */
	seq(" \t0  12\t* * *  ", NULL, "2024-01-01T00:00:00Z", "2024-01-01T12:00:00+00:00");
}

static void
test_macros(void)
{
	seq("@hourly", NULL, "2024-01-01T00:00:00Z",
	    "2024-01-01T01:00:00+00:00 2024-01-01T02:00:00+00:00");
	seq("@daily", NULL, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00+00:00");
	seq("@midnight", NULL, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00+00:00");
	seq("@weekly", NULL, "2024-09-04T00:00:00Z", "2024-09-08T00:00:00+00:00");
	seq("@monthly", NULL, "2024-01-31T00:00:00Z", "2024-02-01T00:00:00+00:00");
	seq("@yearly", NULL, "2024-01-01T00:00:00Z", "2025-01-01T00:00:00+00:00");
	seq("@annually", NULL, "2024-06-01T00:00:00Z", "2025-01-01T00:00:00+00:00");
	seq("  @DAILY ", "Asia/Kolkata", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00+05:30");
}

static void
test_days(void)
{
	/* Leap days: every four years, and not in 2100. */
	seq("0 0 29 2 *", NULL, "2023-01-01T00:00:00Z",
	    "2024-02-29T00:00:00+00:00 2028-02-29T00:00:00+00:00 2032-02-29T00:00:00+00:00");
	seq("0 0 29 2 *", NULL, "2096-03-01T00:00:00Z", "2104-02-29T00:00:00+00:00");
	seq("0 0 29 2 *", NULL, "1999-01-01T00:00:00Z", "2000-02-29T00:00:00+00:00");
	/* The 31st skips months without one; the last second of a month. */
	seq("0 12 31 * *", NULL, "2024-01-31T12:00:00Z",
	    "2024-03-31T12:00:00+00:00 2024-05-31T12:00:00+00:00 2024-07-31T12:00:00+00:00 "
	    "2024-08-31T12:00:00+00:00 2024-10-31T12:00:00+00:00");
	seq("59 23 31 12 *", NULL, "2024-12-31T23:58:59Z",
	    "2024-12-31T23:59:00+00:00 2025-12-31T23:59:00+00:00");
	/* Both day fields restricted: either matches (Fridays, and the 13th). */
	seq("0 0 13 * 5", NULL, "2024-09-01T00:00:00Z",
	    "2024-09-06T00:00:00+00:00 2024-09-13T00:00:00+00:00 2024-09-20T00:00:00+00:00 "
	    "2024-09-27T00:00:00+00:00 2024-10-04T00:00:00+00:00 2024-10-11T00:00:00+00:00 "
	    "2024-10-13T00:00:00+00:00 2024-10-18T00:00:00+00:00");
	seq("0 0 30 2 MON", NULL, "2024-01-01T00:00:00Z", "2024-02-05T00:00:00+00:00");
	/* A field starting with '*' is not restricted: both must match. */
	seq("0 0 */2 * 5", NULL, "2024-09-01T00:00:00Z",
	    "2024-09-13T00:00:00+00:00 2024-09-27T00:00:00+00:00 2024-10-11T00:00:00+00:00 "
	    "2024-10-25T00:00:00+00:00");
	seq("0 0 13 * */2", NULL, "2024-01-01T00:00:00Z",
	    "2024-01-13T00:00:00+00:00 2024-02-13T00:00:00+00:00 2024-04-13T00:00:00+00:00 "
	    "2024-06-13T00:00:00+00:00");
	seq("0 0 * * 1", NULL, "2024-09-01T00:00:00Z", "2024-09-02T00:00:00+00:00");
	seq("0 0 1-31 * 1", NULL, "2024-09-01T00:00:00Z", "2024-09-02T00:00:00+00:00");
	/* Never: February 30th, April 31st; and the rare but possible Feb 29 on a Sunday. */
	seq("0 0 30 2 *", NULL, "2024-01-01T00:00:00Z", "-1");
	seq("0 0 31 4,6,9,11 *", "Europe/Berlin", "2024-01-01T00:00:00Z", "-1");
	seq("0 0 30,31 2 */2", NULL, "2024-01-01T00:00:00Z", "-1");
	seq("0 0 29 2 */7", NULL, "2033-01-01T00:00:00Z", "2060-02-29T00:00:00+00:00");
	seq("0 0 29 2 sun", NULL, "2033-01-01T00:00:00Z", "2033-02-06T00:00:00+00:00");
	/* The end of year 9999 is the end of time. */
	seq("0 0 1 1 *", NULL, "9999-06-01T00:00:00Z", "-1");
	seq("0 0 31 12 *", NULL, "9999-06-01T00:00:00Z", "9999-12-31T00:00:00+00:00 -1");
}

static void
test_dst(void)
{
	/* New York, 2024-03-10: 02:00 EST becomes 03:00 EDT. The gap fires once, at 03:00. */
	seq("30 2 * * *", "America/New_York", "2024-03-09T12:00:00Z",
	    "2024-03-10T03:00:00-04:00 2024-03-11T02:30:00-04:00");
	seq("*/15 2 * * *", "America/New_York", "2024-03-10T06:00:00Z",
	    "2024-03-10T03:00:00-04:00 2024-03-11T02:00:00-04:00");
	seq("0 * * * *", "America/New_York", "2024-03-10T05:30:00Z",
	    "2024-03-10T01:00:00-05:00 2024-03-10T03:00:00-04:00 2024-03-10T04:00:00-04:00");
	seq("0 3 * * *", "America/New_York", "2024-03-10T05:30:00Z",
	    "2024-03-10T03:00:00-04:00 2024-03-11T03:00:00-04:00");
	seq("30 2 * * *", "America/New_York", "2024-03-10T07:00:00Z",
	    "2024-03-11T02:30:00-04:00");
	/* New York, 2024-11-03: 02:00 EDT becomes 01:00 EST. The repeated hour fires once. */
	seq("30 1 * * *", "America/New_York", "2024-11-02T12:00:00Z",
	    "2024-11-03T01:30:00-04:00 2024-11-04T01:30:00-05:00");
	/*
	 * An interval job (minute or hour a step or '*') runs through the repeated
	 * hour as Vixie cron does: every 15 minutes never goes 75 minutes without firing.
	 */
	seq("*/30 * * * *", "America/New_York", "2024-11-03T04:00:00Z",
	    "2024-11-03T00:30:00-04:00 2024-11-03T01:00:00-04:00 2024-11-03T01:30:00-04:00 "
	    "2024-11-03T01:00:00-05:00 2024-11-03T01:30:00-05:00 2024-11-03T02:00:00-05:00");
	seq("*/30 * * * *", "America/New_York", "2024-11-03T06:10:00Z",
	    "2024-11-03T01:30:00-05:00 2024-11-03T02:00:00-05:00");
	seq("*/15 * * * *", "America/New_York", "2024-11-03T05:40:00Z",
	    "2024-11-03T01:45:00-04:00 2024-11-03T01:00:00-05:00 2024-11-03T01:15:00-05:00 "
	    "2024-11-03T01:30:00-05:00 2024-11-03T01:45:00-05:00 2024-11-03T02:00:00-05:00");
	seq("*/15 * * * *", "Europe/London", "2024-10-27T00:40:00Z",
	    "2024-10-27T01:45:00+01:00 2024-10-27T01:00:00+00:00 2024-10-27T01:15:00+00:00 "
	    "2024-10-27T01:30:00+00:00 2024-10-27T01:45:00+00:00 2024-10-27T02:00:00+00:00");
	seq("0 * * * *", "America/New_York", "2024-11-03T04:30:00Z",
	    "2024-11-03T01:00:00-04:00 2024-11-03T01:00:00-05:00 2024-11-03T02:00:00-05:00");
	seq("@hourly", "Europe/London", "2024-10-26T23:30:00Z",
	    "2024-10-27T01:00:00+01:00 2024-10-27T01:00:00+00:00 2024-10-27T02:00:00+00:00");
	seq("0-59/20 1 * * *", "America/New_York", "2024-11-03T05:30:00Z",
	    "2024-11-03T01:40:00-04:00 2024-11-03T01:00:00-05:00 2024-11-03T01:20:00-05:00 "
	    "2024-11-03T01:40:00-05:00 2024-11-04T01:00:00-05:00");
	seq("30 */2 * * *", "America/New_York", "2024-11-03T04:00:00Z",
	    "2024-11-03T00:30:00-04:00 2024-11-03T02:30:00-05:00");
	seq("30 1 * * *", "Europe/London", "2024-10-26T12:00:00Z",
	    "2024-10-27T01:30:00+01:00 2024-10-28T01:30:00+00:00");
	seq("0,30 1 * * *", "America/New_York", "2024-11-03T04:00:00Z",
	    "2024-11-03T01:00:00-04:00 2024-11-03T01:30:00-04:00 2024-11-04T01:00:00-05:00");
	/* Berlin, 2024-03-31 02:00 CET -> 03:00 CEST and 2024-10-27 03:00 CEST -> 02:00 CET. */
	seq("30 2 * * *", "Europe/Berlin", "2024-03-30T12:00:00Z",
	    "2024-03-31T03:00:00+02:00 2024-04-01T02:30:00+02:00");
	seq("30 2 * * *", "Europe/Berlin", "2024-10-26T12:00:00Z",
	    "2024-10-27T02:30:00+02:00 2024-10-28T02:30:00+01:00");
	seq("0 2-3 * * *", "Europe/Berlin", "2024-10-26T23:00:00Z",
	    "2024-10-27T02:00:00+02:00 2024-10-27T03:00:00+01:00 2024-10-28T02:00:00+01:00");
	/* Lord Howe moves by 30 minutes: 2024-10-06 02:00 -> 02:30, 2024-04-07 02:00 -> 01:30. */
	seq("15 2 * * *", "Australia/Lord_Howe", "2024-10-05T00:00:00Z",
	    "2024-10-06T02:30:00+11:00 2024-10-07T02:15:00+11:00");
	seq("*/10 2 * * *", "Australia/Lord_Howe", "2024-10-05T14:00:00Z",
	    "2024-10-06T02:30:00+11:00 2024-10-06T02:40:00+11:00 2024-10-06T02:50:00+11:00 "
	    "2024-10-07T02:00:00+11:00");
	seq("45 1 * * *", "Australia/Lord_Howe", "2024-04-06T00:00:00Z",
	    "2024-04-07T01:45:00+11:00 2024-04-08T01:45:00+10:30");
	seq("*/15 1 * * *", "Australia/Lord_Howe", "2024-04-06T13:00:00Z",
	    "2024-04-07T01:00:00+11:00 2024-04-07T01:15:00+11:00 2024-04-07T01:30:00+11:00 "
	    "2024-04-07T01:45:00+11:00 2024-04-07T01:30:00+10:30 2024-04-07T01:45:00+10:30 "
	    "2024-04-08T01:00:00+10:30");
	/* Sao Paulo skipped midnight (2018-11-04) and repeated 23:00 (2019-02-16). */
	seq("0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00:00Z",
	    "2018-11-04T01:00:00-02:00 2018-11-05T00:00:00-02:00");
	seq("30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00:00Z",
	    "2019-02-16T23:30:00-02:00 2019-02-17T23:30:00-03:00");
	/* Samoa skipped all of 2011-12-30. */
	seq("0 12 30 12 *", "Pacific/Apia", "2011-12-01T00:00:00Z",
	    "2011-12-31T00:00:00+14:00 2012-12-30T12:00:00+14:00");
	/* Past the TZif table the zone's POSIX rule applies (second Sunday of March 2100). */
	seq("30 2 14 3 *", "America/New_York", "2100-01-01T00:00:00Z",
	    "2100-03-14T03:00:00-04:00 2101-03-14T02:30:00-04:00");
	seq("0 0 1 7 *", "Europe/Berlin", "2300-01-01T00:00:00Z", "2300-07-01T00:00:00+02:00");
	/* Zones without daylight time. */
	seq("0 9 * * *", "Asia/Kolkata", "2024-01-01T00:00:00Z",
	    "2024-01-01T09:00:00+05:30 2024-01-02T09:00:00+05:30");
	seq("0 9 * * *", "Etc/UTC", "2024-01-01T00:00:00Z", "2024-01-01T09:00:00+00:00");
	seq("0 0 * * *", "America/St_Johns", "2024-07-01T00:00:00Z", "2024-07-01T00:00:00-02:30");
}

static void
test_errors(void)
{
	bad("60 * * * *", NULL, 1, "minute 60 out of range 0-59");
	bad("* 24 * * *", NULL, 3, "hour 24 out of range 0-23");
	bad("* * 0 * *", NULL, 5, "day-of-month 0 out of range 1-31");
	bad("* * 32 * *", NULL, 5, "day-of-month 32 out of range");
	bad("* * * 13 *", NULL, 7, "month 13 out of range 1-12");
	bad("* * * 0 *", NULL, 7, "month 0 out of range");
	bad("* * * * 8", NULL, 9, "day-of-week 8 out of range 0-7");
	bad("1,2,99999999999 * * * *", NULL, 5, "out of range");
	bad("0 1-2,5-1 * * *", NULL, 7, "range 5-1 is reversed");
	bad("* * 10-5 * *", NULL, 5, "reversed");
	bad("* * * * FRI-MON", NULL, 9, "range FRI-MON is reversed");
	bad("*/0 * * * *", NULL, 3, "step 0 out of range");
	bad("* 1-5/0 * * *", NULL, 7, "hour: step 0 out of range 1-23");
	bad("*/60 * * * *", NULL, 3, "step 60 out of range 1-59");
	bad("* * * * 1/x", NULL, 11, "step must be a number");
	bad("1,,2 * * * *", NULL, 3, "empty item");
	bad("1, * * * *", NULL, 3, "empty item");
	bad(",1 * * * *", NULL, 1, "empty item");
	bad("* * * *", NULL, 8, "expected 5 fields");
	bad("* * * * * *", NULL, 11, "expected 5 fields");
	bad("", NULL, 1, "empty cron expression");
	bad("   ", NULL, 1, "empty cron expression");
	bad("* * * FOO *", NULL, 7, "unknown month name \"FOO\"");
	bad("* * * * MONDAY", NULL, 9, "unknown day-of-week name \"MONDAY\"");
	bad("JAN * * * *", NULL, 1, "minute: expected a number, got \"JAN\"");
	bad("* * JAN * *", NULL, 5, "day-of-month: expected a number");
	bad("1x * * * *", NULL, 2, "minute: unexpected \"x\"");
	bad("* * * * 1-", NULL, 11, "day-of-week: missing value");
	bad("*5 * * * *", NULL, 2, "unexpected \"5\"");
	bad("* * * * \xc3\xa9", NULL, 9, "unexpected byte 0xc3");
	bad("* * *\n* *", NULL, 6, "control character");
	bad("@reboot", NULL, 1, "unknown macro \"@reboot\"");
	bad("  @dail", NULL, 3, "unknown macro");
	bad("@daily 5", NULL, 8, "unexpected text after @daily");
	bad("0 0 * * *", "Mars/Olympus", 1, "unknown time zone \"Mars/Olympus\"");
	bad("0 0 * * *", "../../../etc/passwd", 1, "unknown time zone");
	bad("0 0 * * *", "/etc/passwd", 1, "unknown time zone");
	bad("0 0 * * *", "America//New_York", 1, "unknown time zone");
	bad("0 0 * * *", "America/", 1, "unknown time zone");
	bad("0 0 * * *", "America", 1, "unknown time zone");	/* a directory */
	bad("0 0 * * *", "America/New York", 1, "unknown time zone");
	/* The expression is checked before the zone. */
	bad("61 0 * * *", "Mars/Olympus", 1, "minute 61");
}

/* Writes dir/name as a TZif v2 file with no transitions, one type and footer, or raw bytes. */
static void
write_zone(const char *dir, const char *name, const char *footer, const char *raw, size_t rawlen)
{
	static const unsigned char hdr[44] = { 'T', 'Z', 'i', 'f', '2', [39] = 1, [43] = 4 };
	static const unsigned char v1[6 + 4] = { 0, 0, 0, 0, 0, 0, 'U', 'T', 'C', 0 };
	char	*path = path_join(dir, name);
	FILE	*f;

	if ((f = fopen(path, "w")) == NULL)
		fatal("%s", path);
	if (raw != NULL)
		fwrite(raw, 1, rawlen, f);
	else {
		fwrite(hdr, 1, sizeof hdr, f);
		fwrite(v1, 1, sizeof v1, f);
		fwrite(hdr, 1, sizeof hdr, f);
		fwrite(v1, 1, sizeof v1, f);
		fprintf(f, "\n%s\n", footer);
	}
	fclose(f);
	free(path);
}

/* Zone files spur did not get from tzdata: the POSIX footer alone, and broken files. */
static void
test_tzdir(void)
{
	char	 dir[] = "/tmp/test-cron.XXXXXX";
	char	*old = getenv("TZDIR") ? xstrdup(getenv("TZDIR")) : NULL;

	if (mkdtemp(dir) == NULL)
		fatal("mkdtemp");
	setenv("TZDIR", dir, 1);
	write_zone(dir, "US", "EST5EDT,M3.2.0,M11.1.0", NULL, 0);
	write_zone(dir, "LH", "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", NULL, 0);
	write_zone(dir, "Jul", "AAA-1BBB,J60/3,299/-1", NULL, 0);
	write_zone(dir, "Fixed", "<-0330>3:30", NULL, 0);
	write_zone(dir, "NoRule", "", NULL, 0);
	write_zone(dir, "BadRule", "EST5EDT,M13.1.0,M11.1.0", NULL, 0);
	write_zone(dir, "Text", NULL, "hello world, not a zone\n", 24);
	write_zone(dir, "Short", NULL, "TZif2", 5);
	write_zone(dir, "V1", NULL, "TZif\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
	    "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1\0\0\0\4", 44);
	seq("30 2 10 3 *", "US", "2024-01-01T00:00:00Z", "2024-03-10T03:00:00-04:00");
	seq("30 1 3 11 *", "US", "2024-06-01T00:00:00Z", "2024-11-03T01:30:00-04:00");
	seq("15 2 6 10 *", "LH", "2024-06-01T00:00:00Z", "2024-10-06T02:30:00+11:00");
	seq("45 1 7 4 *", "LH", "2024-01-01T00:00:00Z", "2024-04-07T01:45:00+11:00");
	/* J60 is Mar 1 in every year; zero-based 299 is Oct 26 in a leap year. */
	seq("0 12 1 3 *", "Jul", "2024-01-01T00:00:00Z", "2024-03-01T12:00:00+02:00");
	seq("0 12 29 2 *", "Jul", "2024-01-01T00:00:00Z", "2024-02-29T12:00:00+01:00");
	seq("30 23 25 10 *", "Jul", "2024-01-01T00:00:00Z", "2024-10-25T23:30:00+01:00");
	seq("0 12 * * *", "Fixed", "2024-01-01T00:00:00Z", "2024-01-01T12:00:00-03:30");
	seq("0 12 * * *", "NoRule", "2024-01-01T00:00:00Z", "2024-01-01T12:00:00+00:00");
	bad("0 0 * * *", "BadRule", 1, "bad TZ rule \"EST5EDT,M13.1.0,M11.1.0\"");
	bad("0 0 * * *", "Text", 1, "not a TZif file");
	bad("0 0 * * *", "Short", 1, "not a TZif file");
	bad("0 0 * * *", "V1", 1, "version 1");
	bad("0 0 * * *", "Missing", 1, "unknown time zone \"Missing\"");
	if (old != NULL)
		setenv("TZDIR", old, 1);
	else
		unsetenv("TZDIR");
	free(old);
	rm_rf(dir);
}

int
main(void)
{
	test_basic();
	test_macros();
	test_days();
	test_dst();
	test_errors();
	test_tzdir();
	return tap_done();
}
