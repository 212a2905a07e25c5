/* tz.h: IANA time zones read from TZif files, and civil-date arithmetic for cron. */
#ifndef SPUR_TZ_H
#define SPUR_TZ_H

#include <stdint.h>

struct tz;

/*
 * Loads zone `name` from $TZDIR or /usr/share/zoneinfo (NULL, "" and "UTC" are
 * built in, so UTC works without tzdata). The name is checked first so it cannot
 * leave the zoneinfo directory. Returns NULL with *cause on error.
 */
struct tz	*tz_load(const char *name, char **cause);
void		 tz_free(struct tz *);
const char	*tz_name(const struct tz *);
/*
 * The offset from UTC in seconds at instant t; if next is not NULL it gets the
 * next instant after t at which the offset may change (INT64_MAX if never).
 */
int32_t		 tz_offset(const struct tz *, int64_t t, int64_t *next);
/*
 * Maps a local wall time (seconds since 1970-01-01T00:00 local) to an instant:
 * the earliest instant showing that wall time, or, when the wall time falls in
 * a gap (clocks moved forward over it), the instant the gap ends. *gap (if not
 * NULL) is set to 1 in the second case.
 */
int64_t		 tz_resolve(const struct tz *, int64_t wall, int *gap);

/* Proleptic Gregorian calendar: days since 1970-01-01 and back. */
int64_t		 tz_days_from_civil(int64_t y, int m, int d);
void		 tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
int		 tz_days_in_month(int64_t y, int m);
/* 0 Sunday .. 6 Saturday. */
int		 tz_weekday(int64_t days);
/* Floor division, for negative times. */
int64_t		 tz_floordiv(int64_t a, int64_t b);

#endif
