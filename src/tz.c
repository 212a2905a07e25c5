/* tz.c: IANA time zones read from TZif files (RFC 8536), without touching the process's TZ. */
#include "spur.h"
#include "tz.h"

#include <sys/stat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TZ_DIR		"/usr/share/zoneinfo"
#define TZ_NAME_MAX	255
#define TZ_FILE_MAX	(256 * 1024)	/* the largest real zone is a few KiB */
#define TZ_HOUR		3600
#define TZ_DAY		86400

/* One date rule of a POSIX TZ string: Jn, n or Mm.w.d, and the local time it applies at. */
struct tz_rule {
	char		 kind;	/* 'J', 'N' (zero-based day of year), 'M' */
	int		 n;	/* J: 1-365, N: 0-365 */
	int		 m, w, d; /* M: month 1-12, week 1-5 (5: last), weekday 0-6 */
	int32_t		 time;	/* seconds after local midnight; may be negative or > 24h */
};

struct tz {
	char		*name;
	int64_t		*times;	/* transition instants, ascending */
	int32_t		*offs;	/* offset in effect from times[i] on */
	size_t		 n;
	int32_t		 off0;	/* before the first transition */
	int		 rule;	/* footer: 0 none, 1 fixed offset, 2 with daylight time */
	int32_t		 std_off, dst_off;
	struct tz_rule	 start, end;
};

int64_t
tz_floordiv(int64_t a, int64_t b)
{
	int64_t	 q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

/* Howard Hinnant's days_from_civil: exact for every year an int64 holds here. */
int64_t
tz_days_from_civil(int64_t y, int m, int d)
{
	int64_t	 era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void
tz_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t	 era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int
tz_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int
tz_days_in_month(int64_t y, int m)
{
	static const int	 mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && tz_leap(y) ? 29 : mdays[m - 1];
}

int
tz_weekday(int64_t days)
{
	/* 1970-01-01 was a Thursday. */
	return (int)(((days % 7) + 11) % 7);
}

/* A zone name: path components of [A-Za-z0-9_+-], so it cannot climb out of the zoneinfo dir. */
static int
tz_valid_name(const char *s)
{
	const char	*p;
	size_t		 comp = 0;

	if (*s == '\0' || strlen(s) > TZ_NAME_MAX)
		return 0;
	for (p = s; *p != '\0'; p++) {
		if (*p == '/') {
			if (comp == 0)
				return 0;
			comp = 0;
			continue;
		}
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '+'))
			return 0;
		comp++;
	}
	return comp != 0;
}

static int64_t
tz_be(const unsigned char *p, int len)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 0; i < len; i++)
		v = (v << 8) | p[i];
	if (len == 4)
		return (int32_t)(uint32_t)v;
	return (int64_t)v;
}

/* POSIX TZ string pieces. Each returns the position after what it read, or NULL. */
static const char *
tz_posix_name(const char *p)
{
	const char	*s = p;

	if (*p == '<') {
		while (*++p != '>') {
			if (*p == '\0')
				return NULL;
		}
		return p - s >= 4 ? p + 1 : NULL;
	}
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
		p++;
	return p - s >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]] with hh up to 167 (RFC 8536 allows that for rule times). */
static const char *
tz_posix_secs(const char *p, int32_t *out)
{
	int	 sign = 1, part, i, v;
	int32_t	 secs = 0;

	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	for (part = 0; part < 3; part++) {
		if (part > 0) {
			if (*p != ':')
				break;
			p++;
		}
		if (*p < '0' || *p > '9')
			return NULL;
		for (v = 0, i = 0; *p >= '0' && *p <= '9'; p++, i++) {
			if (i == 3)
				return NULL;
			v = v * 10 + (*p - '0');
		}
		if (part == 0 ? v > 167 : v > 59)
			return NULL;
		secs = secs * 60 + v;
	}
	while (part++ < 3)
		secs *= 60;
	*out = sign * secs;
	return p;
}

static const char *
tz_posix_num(const char *p, int lo, int hi, int *out)
{
	int	 v = 0, i;

	for (i = 0; *p >= '0' && *p <= '9'; p++, i++) {
		if (i == 3)
			return NULL;
		v = v * 10 + (*p - '0');
	}
	if (i == 0 || v < lo || v > hi)
		return NULL;
	*out = v;
	return p;
}

static const char *
tz_posix_rule(const char *p, struct tz_rule *r)
{
	if (*p == 'J') {
		r->kind = 'J';
		p = tz_posix_num(p + 1, 1, 365, &r->n);
	} else if (*p == 'M') {
		r->kind = 'M';
		if ((p = tz_posix_num(p + 1, 1, 12, &r->m)) == NULL || *p++ != '.')
			return NULL;
		if ((p = tz_posix_num(p, 1, 5, &r->w)) == NULL || *p++ != '.')
			return NULL;
		p = tz_posix_num(p, 0, 6, &r->d);
	} else {
		r->kind = 'N';
		p = tz_posix_num(p, 0, 365, &r->n);
	}
	if (p == NULL)
		return NULL;
	r->time = 2 * TZ_HOUR;
	if (*p == '/')
		p = tz_posix_secs(p + 1, &r->time);
	return p;
}

/* The TZif footer, e.g. "EST5EDT,M3.2.0,M11.1.0" or "<+0530>-5:30"; empty means none. */
static int
tz_parse_footer(struct tz *tz, const char *s)
{
	const char	*p = s;
	int32_t		 v;

	if (*p == '\0')
		return 0;
	if ((p = tz_posix_name(p)) == NULL || (p = tz_posix_secs(p, &v)) == NULL)
		return -1;
	tz->std_off = -v;	/* POSIX counts hours west of Greenwich */
	tz->rule = 1;
	if (*p == '\0')
		return 0;
	if ((p = tz_posix_name(p)) == NULL)
		return -1;
	tz->dst_off = tz->std_off + TZ_HOUR;
	if (*p != ',' && *p != '\0') {
		if ((p = tz_posix_secs(p, &v)) == NULL)
			return -1;
		tz->dst_off = -v;
	}
	tz->rule = 2;
	if (*p == '\0') {
		/* POSIX leaves the default rule to the implementation; the US one is usual. */
		tz->start = (struct tz_rule){ 'M', 0, 3, 2, 0, 2 * TZ_HOUR };
		tz->end = (struct tz_rule){ 'M', 0, 11, 1, 0, 2 * TZ_HOUR };
		return 0;
	}
	if (*p++ != ',' || (p = tz_posix_rule(p, &tz->start)) == NULL)
		return -1;
	if (*p++ != ',' || (p = tz_posix_rule(p, &tz->end)) == NULL)
		return -1;
	return *p == '\0' ? 0 : -1;
}

/* The local time (seconds since 1970, in the offset before the change) a rule fires in year y. */
static int64_t
tz_rule_local(const struct tz_rule *r, int64_t y)
{
	int64_t	 days;
	int	 day, mdays;

	switch (r->kind) {
	case 'J':
		days = tz_days_from_civil(y, 1, 1) + r->n - 1;
		if (tz_leap(y) && r->n >= 60)
			days++;
		break;
	case 'N':
		days = tz_days_from_civil(y, 1, 1) + r->n;
		break;
	default:
		days = tz_days_from_civil(y, r->m, 1);
		day = 1 + (r->d - tz_weekday(days) + 7) % 7 + 7 * (r->w - 1);
		mdays = tz_days_in_month(y, r->m);
		while (day > mdays)
			day -= 7;
		days += day - 1;
		break;
	}
	return days * TZ_DAY + r->time;
}

/* Offset at t from the footer's rule, and the next change after t. */
static int32_t
tz_footer_offset(const struct tz *tz, int64_t t, int64_t *next)
{
	int64_t		 y, inst[8], tmp;
	int32_t		 after[8], cur, tmpo;
	int		 m, d, i, j, k = 0;

	if (tz->rule == 1) {
		*next = INT64_MAX;
		return tz->std_off;
	}
	tz_civil_from_days(tz_floordiv(t + tz->std_off, TZ_DAY), &y, &m, &d);
	for (i = -2; i <= 1; i++) {
		inst[k] = tz_rule_local(&tz->start, y + i) - tz->std_off;
		after[k++] = tz->dst_off;
		inst[k] = tz_rule_local(&tz->end, y + i) - tz->dst_off;
		after[k++] = tz->std_off;
	}
	/* Insertion sort; on a tie the end comes first so all-year daylight time stays daylight. */
	for (i = 1; i < k; i++) {
		for (j = i; j > 0 && (inst[j - 1] > inst[j] || (inst[j - 1] == inst[j] &&
		    after[j - 1] == tz->dst_off && after[j] == tz->std_off)); j--) {
			tmp = inst[j]; inst[j] = inst[j - 1]; inst[j - 1] = tmp;
			tmpo = after[j]; after[j] = after[j - 1]; after[j - 1] = tmpo;
		}
	}
	cur = after[0];
	*next = INT64_MAX;
	for (i = 0; i < k; i++) {
		if (inst[i] > t) {
			*next = inst[i];
			break;
		}
		cur = after[i];
	}
	return cur;
}

int32_t
tz_offset(const struct tz *tz, int64_t t, int64_t *next)
{
	int64_t		 dummy;
	size_t		 lo, hi, mid;

	if (next == NULL)
		next = &dummy;
	if (tz->n == 0 || t < tz->times[0]) {
		if (tz->n != 0) {
			*next = tz->times[0];
			return tz->off0;
		}
		if (tz->rule != 0)
			return tz_footer_offset(tz, t, next);
		*next = INT64_MAX;
		return tz->off0;
	}
	/* The last transition at or before t. */
	lo = 0;
	hi = tz->n;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (tz->times[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	if (lo + 1 < tz->n) {
		*next = tz->times[lo + 1];
		return tz->offs[lo];
	}
	if (tz->rule != 0)
		return tz_footer_offset(tz, t, next);
	*next = INT64_MAX;
	return tz->offs[lo];
}

int64_t
tz_resolve(const struct tz *tz, int64_t wall, int *gap)
{
	int64_t		 lo = wall - 2 * TZ_DAY, hi = wall + 2 * TZ_DAY;
	int64_t		 t, next, u;
	int32_t		 off;
	int		 dummy;

	if (gap == NULL)
		gap = &dummy;
	*gap = 0;
	/*
	 * Walk the stretches of constant offset around wall (no offset exceeds a
	 * day): the first stretch that shows wall gives the earliest instant; a
	 * stretch that starts past wall with none before showing it means wall
	 * was skipped, and that stretch's start is the first instant after it.
	 */
	for (t = lo; t < hi; t = next) {
		off = tz_offset(tz, t, &next);
		u = wall - off;
		if (u >= t && u < next)
			return u;
		if (t != lo && t + off > wall) {
			*gap = 1;
			return t;
		}
	}
	return wall - tz_offset(tz, wall, NULL);
}

static void
tz_set_utc(struct tz *tz)
{
	tz->n = 0;
	tz->off0 = 0;
	tz->rule = 1;
	tz->std_off = tz->dst_off = 0;
}

/* Reads the version 2+ (64-bit) part of a TZif file. */
static int
tz_parse(struct tz *tz, const unsigned char *data, size_t len, char **cause)
{
	const unsigned char	*p, *end = data + len, *tt, *idx, *types;
	uint64_t		 cnt[6], v1len;
	size_t			 i;
	char			*footer;
	const char		*nl;

	if (len < 44 || memcmp(data, "TZif", 4) != 0) {
		*cause = xstrdup("not a TZif file");
		return -1;
	}
	if (data[4] < '2') {
		*cause = xstrdup("TZif version 1 files are not supported");
		return -1;
	}
	for (i = 0; i < 6; i++)
		cnt[i] = (uint32_t)tz_be(data + 20 + 4 * i, 4);
	/* isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt */
	v1len = cnt[3] * 5 + cnt[4] * 6 + cnt[5] + cnt[2] * 8 + cnt[1] + cnt[0];
	if (v1len > len - 44 || len - 44 - v1len < 44) {
		*cause = xstrdup("truncated TZif file");
		return -1;
	}
	p = data + 44 + v1len;
	if (memcmp(p, "TZif", 4) != 0) {
		*cause = xstrdup("TZif file without a version 2 header");
		return -1;
	}
	for (i = 0; i < 6; i++)
		cnt[i] = (uint32_t)tz_be(p + 20 + 4 * i, 4);
	p += 44;
	if (cnt[2] != 0) {
		*cause = xstrdup("zones with leap seconds (right/...) are not supported");
		return -1;
	}
	if (cnt[4] == 0 || cnt[3] > 100000 || cnt[4] > 256 || cnt[5] > 65536 ||
	    cnt[3] * 9 + cnt[4] * 6 + cnt[5] + cnt[1] + cnt[0] > (uint64_t)(end - p)) {
		*cause = xstrdup("corrupt TZif file");
		return -1;
	}
	types = p + cnt[3] * 9;
	idx = p + cnt[3] * 8;
	tz->n = cnt[3];
	tz->times = xreallocarray(NULL, tz->n + 1, sizeof *tz->times);
	tz->offs = xreallocarray(NULL, tz->n + 1, sizeof *tz->offs);
	for (i = 0; i < tz->n; i++) {
		tz->times[i] = tz_be(p + 8 * i, 8);
		if (idx[i] >= cnt[4] || (i > 0 && tz->times[i] <= tz->times[i - 1])) {
			*cause = xstrdup("corrupt TZif file");
			return -1;
		}
		tt = types + 6 * idx[i];
		tz->offs[i] = (int32_t)tz_be(tt, 4);
	}
	tz->off0 = (int32_t)tz_be(types, 4);
	p = types + cnt[4] * 6 + cnt[5] + cnt[1] + cnt[0];
	/* The footer: a POSIX TZ string between newlines, for times after the table. */
	if (p >= end || *p != '\n' || (nl = memchr(p + 1, '\n', end - p - 1)) == NULL) {
		*cause = xstrdup("TZif file without a footer");
		return -1;
	}
	footer = xstrndup((const char *)p + 1, nl - (const char *)p - 1);
	if (tz_parse_footer(tz, footer) != 0) {
		xasprintf(cause, "bad TZ rule \"%s\" in TZif footer", footer);
		free(footer);
		return -1;
	}
	free(footer);
	for (i = 0; i < tz->n; i++) {
		if (tz->offs[i] < -26 * TZ_HOUR || tz->offs[i] > 26 * TZ_HOUR)
			break;
	}
	if (i != tz->n || tz->off0 < -26 * TZ_HOUR || tz->off0 > 26 * TZ_HOUR ||
	    tz->std_off < -26 * TZ_HOUR || tz->std_off > 26 * TZ_HOUR ||
	    tz->dst_off < -26 * TZ_HOUR || tz->dst_off > 26 * TZ_HOUR) {
		*cause = xstrdup("UTC offset out of range in TZif file");
		return -1;
	}
	return 0;
}

struct tz *
tz_load(const char *name, char **cause)
{
	struct tz	*tz;
	struct stat	 st;
	const char	*dir;
	char		*path = NULL, *data = NULL, *why = NULL;
	size_t		 len;

	tz = xcalloc(1, sizeof *tz);
	if (name == NULL || *name == '\0' || strcmp(name, "UTC") == 0) {
		tz->name = xstrdup("UTC");
		tz_set_utc(tz);
		return tz;
	}
	tz->name = xstrdup(name);
	if (!tz_valid_name(name)) {
		xasprintf(cause, "unknown time zone \"%s\"", name);
		goto fail;
	}
	if ((dir = getenv("TZDIR")) == NULL || *dir != '/')
		dir = TZ_DIR;
	path = path_join(dir, name);
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		xasprintf(cause, "unknown time zone \"%s\" (no %s)", name, path);
		goto fail;
	}
	if (read_file(path, TZ_FILE_MAX, &data, &len, &why) != 0)
		goto bad;
	if (tz_parse(tz, (unsigned char *)data, len, &why) != 0)
		goto bad;
	free(data);
	free(path);
	return tz;
bad:
	xasprintf(cause, "time zone \"%s\": %s", name, why);
	free(why);
fail:
	free(data);
	free(path);
	tz_free(tz);
	return NULL;
}

void
tz_free(struct tz *tz)
{
	if (tz == NULL)
		return;
	free(tz->name);
	free(tz->times);
	free(tz->offs);
	free(tz);
}

const char *
tz_name(const struct tz *tz)
{
	return tz->name;
}
