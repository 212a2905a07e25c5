/* cron.h: 5-field cron expressions evaluated in an IANA time zone (semantics atop cron.c). */
#ifndef SPUR_CRON_H
#define SPUR_CRON_H

#include <stdint.h>

struct cron;

/*
 * Parses expr for the zone tz (NULL or "" means UTC). On error returns NULL,
 * sets *cause and *col (1-based column in expr of the problem; 1 for an
 * unknown time zone).
 */
struct cron	*cron_parse(const char *expr, const char *tz, char **cause, int *col);
void		 cron_free(struct cron *);
/*
 * The first fire time strictly after `after` (UTC seconds), or -1 if it never
 * fires (e.g. "0 0 30 2 *"; the search stops 50 years ahead, past the rarest
 * schedule that can fire) or the time would leave years 0001-9999.
 */
int64_t		 cron_next(const struct cron *, int64_t after);
/* Formats t as ISO 8601 in the cron's zone with its offset, e.g. 2026-03-08T03:00:00-04:00. */
char		*cron_format_local(const struct cron *, int64_t t);
/* The zone's IANA name as given, "UTC" by default. */
const char	*cron_zone_name(const struct cron *);

#endif
