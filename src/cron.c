/* cron.c: 5-field cron expressions and their next fire time in an IANA time zone. */

/*
 * Semantics (Vixie cron, as crontab(5) describes it):
 * - Fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or JAN-DEC,
 *   day-of-week 0-7 or SUN-SAT (0 and 7 are both Sunday); names are
 *   case-insensitive and allowed in ranges (MON-FRI), not in steps.
 * - Items: `*`, `N`, `A-B`, each with an optional `/STEP`; `N/STEP` means
 *   N-MAX/STEP (for day-of-week MAX is 7, so `1/2` is Mon, Wed, Fri, Sun);
 *   lists join items with commas.
 * - When day-of-month and day-of-week are both restricted (neither field starts
 *   with `*`), a day matches if either matches; otherwise both must.
 * - @hourly @daily @midnight @weekly @monthly @yearly @annually.
 *
 * Time zones (wall-clock times are matched in the schedule's zone):
 * - A wall time that does not exist that day (clocks spring forward over it)
 *   fires once, at the first instant after the gap: 02:30 on a day New York goes
 *   from 02:00 to 03:00 fires at 03:00 EDT. Every time in the gap maps to that
 *   same instant, so it fires once even for `* 2 * * *`, never twice, and never
 *   silently not at all.
 * - A wall time that happens twice (clocks fall back) fires once, at its first
 *   occurrence, when the job is at a fixed time: `30 1 * * *` fires at 01:30
 *   EDT and not again at 01:30 EST. A job whose minute or hour field is a step
 *   or holds `*` (an interval job: every 15 minutes, `0 * * * *`, `@hourly`)
 *   runs through the repeated hour as through any other, as Vixie cron does:
 *   every 15 minutes fires at 01:45 EDT, then 01:00 EST, 01:15 EST, and does
 *   not go 75 minutes without firing.
 * The fixed-time rule: a wall time fires at the first instant at which the
 * zone's clock reads it or later (tz_resolve); an interval job also fires at
 * the second occurrence of a wall time it matches (cron_next_repeated).
 *
 * The search walks days, skipping months that cannot match, and tries only the
 * listed hours and minutes of a matching day; it never scans minute by minute.
 */
#include "spur.h"
#include "cron.h"
#include "tz.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define CRON_EXPR_MAX	1024
/*
 * The search gives up after this many years. A schedule that can fire at all
 * fires within 40 years: the rarest is Feb 29 on one weekday (every 28 years, or
 * 40 across a century year that is not leap).
 */
#define CRON_HORIZON_YEARS 50
/* Years a fire time may fall in: ISO 8601 needs four digits. */
#define CRON_MIN_TIME	(-62135596800LL)	/* 0001-01-01T00:00:00Z */
#define CRON_MAX_TIME	(253402300799LL)	/* 9999-12-31T23:59:59Z */

enum cron_field { CRON_MIN, CRON_HOUR, CRON_DOM, CRON_MON, CRON_DOW };

struct cron_field_def {
	const char		*name;
	int			 min, max;
	const char *const	*names;		/* three-letter names of min..., or NULL */
};

static const char *const cron_months[] = {
	"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL
};
static const char *const cron_days[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const struct cron_field_def cron_fields[5] = {
	{ "minute", 0, 59, NULL },
	{ "hour", 0, 23, NULL },
	{ "day-of-month", 1, 31, NULL },
	{ "month", 1, 12, cron_months },
	{ "day-of-week", 0, 7, cron_days },
};

static const struct {
	const char	*name;
	const char	*expr;
} cron_macros[] = {
	{ "@yearly", "0 0 1 1 *" },
	{ "@annually", "0 0 1 1 *" },
	{ "@monthly", "0 0 1 * *" },
	{ "@weekly", "0 0 * * 0" },
	{ "@daily", "0 0 * * *" },
	{ "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

struct cron {
	uint64_t	 bits[5];	/* bit v set: value v matches (day-of-week 7 folded into 0) */
	int		 dom_star;	/* day-of-month field starts with '*' */
	int		 dow_star;
	int		 never;		/* no day of any year can match */
	int		 interval;	/* minute or hour field is a step or holds '*' */
	struct tz	*tz;
};

static void
cron_unexpected(const struct cron_field_def *f, char ch, char **cause)
{
	if (isprint((unsigned char)ch))
		xasprintf(cause, "%s: unexpected \"%c\"", f->name, ch);
	else
		xasprintf(cause, "%s: unexpected byte 0x%02x", f->name, (unsigned char)ch);
}

/* Reads a number or a name at *p; returns the value or -1 with *cause set. */
static int
cron_value(const struct cron_field_def *f, const char **p, const char *expr, char **cause,
    int *col)
{
	const char	*s = *p;
	long		 v = 0;
	int		 i, n;

	*col = (int)(s - expr) + 1;
	if (isdigit((unsigned char)*s)) {
		for (n = 0; isdigit((unsigned char)*s); s++, n++) {
			if (v < 100000)
				v = v * 10 + (*s - '0');
		}
		*p = s;
		if (v < f->min || v > f->max) {
			xasprintf(cause, "%s %.*s out of range %d-%d", f->name, n, *p - n,
			    f->min, f->max);
			return -1;
		}
		return (int)v;
	}
	if (isalpha((unsigned char)*s)) {
		for (n = 0; isalpha((unsigned char)s[n]); n++)
			;
		*p = s + n;
		if (f->names == NULL) {
			xasprintf(cause, "%s: expected a number, got \"%.*s\"", f->name, n, s);
			return -1;
		}
		for (i = 0; n == 3 && f->names[i] != NULL; i++) {
			if (strncasecmp(s, f->names[i], 3) == 0)
				return f->min + i;
		}
		xasprintf(cause, "unknown %s name \"%.*s\"", f->name, n, s);
		return -1;
	}
	if (*s == '\0' || *s == ',' || *s == ' ' || *s == '\t')
		xasprintf(cause, "%s: missing value", f->name);
	else
		cron_unexpected(f, *s, cause);
	return -1;
}

/* Parses one field (s, len bytes, at offset off in expr) into bits. */
static int
cron_field(const struct cron_field_def *f, const char *expr, size_t off, size_t len,
    uint64_t *bits, char **cause, int *col)
{
	const char	*p = expr + off, *end = expr + off + len, *item;
	int		 lo, hi, step, v;

	*bits = 0;
	for (;;) {
		item = p;
		*col = (int)(p - expr) + 1;
		if (p == end || *p == ',') {
			xasprintf(cause, "%s: empty item in list", f->name);
			return -1;
		}
		if (*p == '*') {
			p++;
			lo = f->min;
			hi = f->max;
		} else {
			if ((lo = cron_value(f, &p, expr, cause, col)) < 0)
				return -1;
			hi = lo;
			if (p < end && *p == '-') {
				p++;
				if ((hi = cron_value(f, &p, expr, cause, col)) < 0)
					return -1;
				if (hi < lo) {
					*col = (int)(item - expr) + 1;
					xasprintf(cause, "%s: range %.*s is reversed", f->name,
					    (int)(p - item), item);
					return -1;
				}
			} else if (p < end && *p == '/')
				hi = f->max;
		}
		step = 1;
		if (p < end && *p == '/') {
			p++;
			*col = (int)(p - expr) + 1;
			if (!isdigit((unsigned char)*p)) {
				xasprintf(cause, "%s: step must be a number", f->name);
				return -1;
			}
			for (step = 0; isdigit((unsigned char)*p); p++) {
				if (step < 100000)
					step = step * 10 + (*p - '0');
			}
			if (step < 1 || step > f->max) {
				xasprintf(cause, "%s: step %d out of range 1-%d", f->name, step,
				    f->max);
				return -1;
			}
		}
		if (p < end && *p != ',') {
			*col = (int)(p - expr) + 1;
			cron_unexpected(f, *p, cause);
			return -1;
		}
		for (v = lo; v <= hi; v += step)
			*bits |= 1ULL << v;
		if (p == end)
			break;
		p++;	/* the comma */
	}
	return 0;
}

/* Whether some month allows some listed day-of-month (Feb counts 29 days). */
static int
cron_dom_possible(const struct cron *c)
{
	int	 m, d;

	for (m = 1; m <= 12; m++) {
		if (!(c->bits[CRON_MON] & (1ULL << m)))
			continue;
		for (d = 1; d <= tz_days_in_month(2000, m); d++) {
			if (c->bits[CRON_DOM] & (1ULL << d))
				return 1;
		}
	}
	return 0;
}

/* Splits expr (a macro already expanded) into five fields and parses them. */
static int
cron_fields_parse(struct cron *c, const char *expr, char **cause, int *col)
{
	size_t	 off[5], len[5], i = 0, n = 0;

	for (;;) {
		while (expr[i] == ' ' || expr[i] == '\t')
			i++;
		if (expr[i] == '\0')
			break;
		if (n == 5) {
			*col = (int)i + 1;
			xasprintf(cause, "expected 5 fields (minute hour day-of-month month "
			    "day-of-week), got more");
			return -1;
		}
		off[n] = i;
		while (expr[i] != '\0' && expr[i] != ' ' && expr[i] != '\t')
			i++;
		len[n] = i - off[n];
		n++;
	}
	if (n < 5) {
		*col = n == 0 ? 1 : (int)(off[n - 1] + len[n - 1]) + 1;
		if (n == 0)
			xasprintf(cause, "empty cron expression");
		else
			xasprintf(cause, "expected 5 fields (minute hour day-of-month month "
			    "day-of-week), got %zu", n);
		return -1;
	}
	for (i = 0; i < 5; i++) {
		if (cron_field(&cron_fields[i], expr, off[i], len[i], &c->bits[i], cause,
		    col) != 0)
			return -1;
	}
	if (c->bits[CRON_DOW] & (1ULL << 7))
		c->bits[CRON_DOW] = (c->bits[CRON_DOW] & ~(1ULL << 7)) | 1;
	for (i = CRON_MIN; i <= CRON_HOUR; i++) {
		if (memchr(expr + off[i], '*', len[i]) != NULL ||
		    memchr(expr + off[i], '/', len[i]) != NULL)
			c->interval = 1;
	}
	c->dom_star = expr[off[CRON_DOM]] == '*';
	c->dow_star = expr[off[CRON_DOW]] == '*';
	/* With either day field starred a day needs both; then the month must hold the day. */
	c->never = (c->dom_star || c->dow_star) && !cron_dom_possible(c);
	return 0;
}

/* Expands @macro; returns the five-field form, or NULL with *cause set. */
static const char *
cron_macro(const char *expr, char **cause, int *col)
{
	const char	*s = expr, *e;
	size_t		 i, n;

	while (*s == ' ' || *s == '\t')
		s++;
	for (e = s; *e != '\0' && *e != ' ' && *e != '\t'; e++)
		;
	n = e - s;
	*col = (int)(s - expr) + 1;
	for (i = 0; i < SPUR_ARRLEN(cron_macros); i++) {
		if (strlen(cron_macros[i].name) == n &&
		    strncasecmp(s, cron_macros[i].name, n) == 0)
			break;
	}
	if (i == SPUR_ARRLEN(cron_macros)) {
		xasprintf(cause, "unknown macro \"%.*s\" (expected @hourly, @daily, @weekly, "
		    "@monthly, @yearly, @annually or @midnight)", (int)n, s);
		return NULL;
	}
	while (*e == ' ' || *e == '\t')
		e++;
	if (*e != '\0') {
		*col = (int)(e - expr) + 1;
		xasprintf(cause, "unexpected text after %s", cron_macros[i].name);
		return NULL;
	}
	return cron_macros[i].expr;
}

struct cron *
cron_parse(const char *expr, const char *tz, char **cause, int *col)
{
	struct cron	*c;
	const char	*s, *fields = expr;
	char		*why = NULL;

	*cause = NULL;
	*col = 1;
	if (strlen(expr) > CRON_EXPR_MAX) {
		xasprintf(cause, "cron expression longer than %d characters", CRON_EXPR_MAX);
		return NULL;
	}
	for (s = expr; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 && *s != '\t') {
			*col = (int)(s - expr) + 1;
			xasprintf(cause, "control character in cron expression");
			return NULL;
		}
	}
	for (s = expr; *s == ' ' || *s == '\t'; s++)
		;
	if (*s == '@' && (fields = cron_macro(expr, cause, col)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof *c);
	if (cron_fields_parse(c, fields, cause, col) != 0) {
		if (fields != expr)	/* a macro's expansion is always valid */
			fatal("cron macro expansion \"%s\": %s", fields, *cause);
		free(c);
		return NULL;
	}
	if ((c->tz = tz_load(tz, &why)) == NULL) {
		*col = 1;
		*cause = why;
		free(c);
		return NULL;
	}
	return c;
}

void
cron_free(struct cron *c)
{
	if (c == NULL)
		return;
	tz_free(c->tz);
	free(c);
}

const char *
cron_zone_name(const struct cron *c)
{
	return tz_name(c->tz);
}

static int
cron_day_matches(const struct cron *c, int d, int wd)
{
	int	 dom = (c->bits[CRON_DOM] >> d) & 1, dow = (c->bits[CRON_DOW] >> wd) & 1;

	if (c->dom_star || c->dow_star)
		return dom && dow;
	return dom || dow;
}

/* Whether the wall time (seconds since 1970-01-01T00:00 local) matches every field. */
static int
cron_wall_matches(const struct cron *c, int64_t wall)
{
	int64_t	 day = tz_floordiv(wall, 86400), y, secs = wall - day * 86400;
	int	 m, d;

	tz_civil_from_days(day, &y, &m, &d);
	return (c->bits[CRON_MIN] >> (secs / 60 % 60) & 1) &&
	    (c->bits[CRON_HOUR] >> (secs / 3600) & 1) && (c->bits[CRON_MON] >> m & 1) &&
	    cron_day_matches(c, d, tz_weekday(day));
}

/*
 * An interval job's first fire in (after, before) at the second occurrence of
 * a wall time (clocks fell back over it), or -1. The repeated stretches are
 * found from the zone's transitions, starting a day before after (one may hold
 * after); within one (a few hours at most) the minutes are tried one by one.
 */
static int64_t
cron_next_repeated(const struct cron *c, int64_t after, int64_t before)
{
	int64_t		 x = after - 86400, next, u, end;
	int32_t		 off0, off1;
	int		 n;

	for (n = 0; n < 1000 && x < before; n++, x = next) {
		off0 = tz_offset(c->tz, x, &next);
		if (next == INT64_MAX || next <= x || next >= before)
			break;
		off1 = tz_offset(c->tz, next, NULL);
		if (off1 >= off0)
			continue;
		/* [next, end): the zone's clock reads again what it read before next. */
		end = next + (off0 - off1);
		u = tz_floordiv(after, 60) * 60 + 60;
		if (u < next)
			u = next;
		for (; u < end && u < before; u += 60) {
			if (cron_wall_matches(c, u + off1))
				return u;
		}
	}
	return -1;
}

/* The next fire at the first instant showing a matching wall time (the fixed-time rule). */
static int64_t
cron_next_first(const struct cron *c, int64_t after)
{
	int64_t		 local, day, last, wall, t, y;
	int		 m, d, h, mi;

	if (c->never || after < CRON_MIN_TIME || after >= CRON_MAX_TIME)
		return -1;
	local = after + tz_offset(c->tz, after, NULL);
	day = tz_floordiv(local, 86400);
	last = day + CRON_HORIZON_YEARS * 366;
	tz_civil_from_days(day, &y, &m, &d);
	while (day <= last) {
		if (!(c->bits[CRON_MON] & (1ULL << m))) {
			/* Skip to the first of the next month. */
			day += tz_days_in_month(y, m) - d + 1;
			d = 1;
			if (++m == 13) {
				m = 1;
				y++;
			}
			continue;
		}
		if (cron_day_matches(c, d, tz_weekday(day))) {
			for (h = 0; h < 24; h++) {
				if (!(c->bits[CRON_HOUR] & (1ULL << h)))
					continue;
				for (mi = 0; mi < 60; mi++) {
					if (!(c->bits[CRON_MIN] & (1ULL << mi)))
						continue;
					wall = day * 86400 + h * 3600 + mi * 60;
					/* A wall time up to now's was shown no later than now. */
					if (wall <= local)
						continue;
					t = tz_resolve(c->tz, wall, NULL);
					if (t > after)
						return t <= CRON_MAX_TIME ? t : -1;
				}
			}
		}
		day++;
		if (++d > tz_days_in_month(y, m)) {
			d = 1;
			if (++m == 13) {
				m = 1;
				y++;
			}
		}
	}
	return -1;
}

int64_t
cron_next(const struct cron *c, int64_t after)
{
	int64_t	 t, r;

	t = cron_next_first(c, after);
	if (t == -1 || !c->interval)
		return t;
	r = cron_next_repeated(c, after, t);
	return r != -1 ? r : t;
}

char *
cron_format_local(const struct cron *c, int64_t t)
{
	int64_t		 local, day, y, secs;
	int32_t		 off;
	int		 m, d, a;
	char		 sign;

	off = tz_offset(c->tz, t, NULL);
	local = t + off;
	day = tz_floordiv(local, 86400);
	secs = local - day * 86400;
	tz_civil_from_days(day, &y, &m, &d);
	sign = off < 0 ? '-' : '+';
	a = off < 0 ? -off : off;
	/* Offsets with seconds exist only in old local mean times; keep them exact. */
	if (a % 60 != 0)
		return xprintf("%04lld-%02d-%02dT%02d:%02d:%02d%c%02d:%02d:%02d", (long long)y,
		    m, d, (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60), sign,
		    a / 3600, a / 60 % 60, a % 60);
	return xprintf("%04lld-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", (long long)y, m, d,
	    (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60), sign, a / 3600,
	    a / 60 % 60);
}
