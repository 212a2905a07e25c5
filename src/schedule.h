/* schedule.h: the scheduler that turns schedule triggers into events on the event loop. */
#ifndef SPUR_SCHEDULE_H
#define SPUR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

struct engine;
struct cron;
struct scheduler;

/*
 * Creates the scheduler of e (after e->ingest and e->dispatch): takes the schedules
 * of e->automations, fires the catch-ups (below) and arms one timer for the earliest
 * next fire time. Each fire is an event of source "schedule" submitted through
 * ingest_submit like a webhook delivery, deduplicated on (org, schedule:NAME@TIME).
 *
 * Catch-up: at start and after a reload, the most recent fire time at or before
 * now of each schedule is fired once if no event has its key yet and it is at most
 * schedules.catch_up seconds old; older, it is logged as skipped. Only that one
 * time, never the ones before it. While running, a time the engine notices late
 * (suspend, wall clock jumped forward) follows the same rule, with a grace of at
 * least SCHEDULE_GRACE seconds so that a busy loop never drops a fire.
 */
#define SCHEDULE_GRACE	60
struct scheduler	*scheduler_create(struct engine *);
void			 scheduler_free(struct scheduler *);
/* Takes the schedules of the (new) e->automations: re-arms and runs catch-up. */
void			 scheduler_reload(struct scheduler *);
/* The earliest armed fire time (UTC seconds), -1 if none. */
int64_t			 scheduler_next(const struct scheduler *);

/*
 * The most recent fire time t of c with now - window <= t <= now, or -1. Costs a
 * few cron_next calls however dense the schedule or wide the window.
 */
int64_t			 schedule_prev(const struct cron *, int64_t now, int64_t window);
/* The event of schedule d firing at t (what the scheduler submits; spur fire shows it). */
struct schedule_def;
struct spur_event	*schedule_event(const struct schedule_def *, int64_t t);
/* t as ISO 8601 UTC without fractions, e.g. 2026-03-08T08:00:00Z. */
char			*schedule_format_utc(int64_t t, char *out, size_t len);

#endif
