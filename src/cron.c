/* cron.c: placeholder until the cron parser lands; every expression is refused. */
#include "spur.h"
#include "cron.h"

struct cron *
cron_parse(const char *expr, const char *tz, char **cause, int *col)
{
	*cause = xstrdup("cron schedules are not available yet");
	*col = 1;
	return NULL;
}

void
cron_free(struct cron *c)
{
}

int64_t
cron_next(const struct cron *c, int64_t after)
{
	return -1;
}

char *
cron_format_local(const struct cron *c, int64_t t)
{
	return NULL;
}
