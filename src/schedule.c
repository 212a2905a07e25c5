/* schedule.c: fires schedule triggers on time as events, once each, across restarts and reloads. */

/*
 * One libevent timer per engine, set to the earliest next fire time of all
 * schedules. Fire times are computed in wall-clock time (cron_next), but the
 * timer is relative (libevent's monotonic clock), so each wake re-reads the
 * wall clock: an early wake just re-arms, a late one fires the most recent due
 * time. The timer never sleeps longer than SCHEDULE_MAX_SLEEP so that a wall
 * clock that jumped is noticed within that time; that is the only wake-up that
 * is not a fire.
 *
 * A fire is an event like a webhook delivery, submitted through ingest so that
 * the event and its runs are committed together. Its dedup key
 * schedule:NAME@TIME makes the store answer "duplicate" to a second fire of the
 * same time, whatever the path (timer, catch-up, reload, restart), so a time
 * fires at most once; the catch-up at start makes it fire at least once when the
 * engine was down at that time (within schedules.catch_up).
 */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "cron.h"
#include "event.h"
#include "ingest.h"
#include "schedule.h"
#include "serve.h"
#include "store.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHEDULE_MAX_SLEEP	300		/* seconds: wall-clock re-check */
#define SCHEDULE_RETRY		30		/* seconds: after a fire the store refused */
#define SCHEDULE_LOOKBACK	(366 * 86400LL)	/* how far back a skip is still reported */
#define SCHEDULE_MAX_WINDOW	(60 * 366 * 86400LL)

struct sched_entry {
	const struct schedule_def *def;		/* owned by s->set */
	int64_t			 next;		/* next fire time, -1: never */
};

struct scheduler {
	struct engine		*engine;
	struct automation_set	*set;		/* referenced: defs point into it */
	struct sched_entry	*entries;
	size_t			 n;
	struct event		*timer;
	struct event		*retry;
	int64_t			 target;
};

static void	scheduler_timer_cb(evutil_socket_t, short, void *);
static void	scheduler_retry_cb(evutil_socket_t, short, void *);

char *
schedule_format_utc(int64_t t, char *out, size_t len)
{
	time_t		 tt = (time_t)t;
	struct tm	 tm;

	if (gmtime_r(&tt, &tm) == NULL || strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, len, "%lld", (long long)t);
	return out;
}

int64_t
schedule_prev(const struct cron *c, int64_t now, int64_t window)
{
	int64_t	 step = 60, t, last = -1;

	if (window < 0)
		return -1;
	if (window > SCHEDULE_MAX_WINDOW)
		window = SCHEDULE_MAX_WINDOW;
	/*
	 * Widen the look back by doubling until it holds a fire time: the times
	 * then walked forward all lie in the last half, which held none before.
	 */
	for (;;) {
		if (step > window)
			step = window;
		t = cron_next(c, now - step - 1);
		if (t != -1 && t <= now) {
			while (t != -1 && t <= now) {
				last = t;
				t = cron_next(c, t);
			}
			return last;
		}
		if (step >= window)
			return -1;
		step *= 2;
	}
}

/* The seconds of wall-clock time, floored (fire times are whole minutes). */
static int64_t
scheduler_now(void)
{
	return now_ms() / 1000;
}

static void
scheduler_done_cb(enum ingest_status status, const struct spur_event *ev, json_t *runs,
    void *arg)
{
	struct scheduler	*s = arg;
	const char		*name = spur_event_meta_str(ev, "automation");
	const char		*at = spur_event_meta_str(ev, "scheduled_at");

	switch (status) {
	case INGEST_NEW:
		log_info("event=schedule.fired org=%s automation=%s scheduled_at=%s "
		    "event_id=%s runs=%zu", log_q(ev->org), log_q(name), at, ev->id,
		    json_array_size(runs));
		break;
	case INGEST_DUPLICATE:
		log_info("event=schedule.already_fired org=%s automation=%s scheduled_at=%s "
		    "event_id=%s", log_q(ev->org), log_q(name), at, ev->id);
		break;
	default:
		/* The catch-up pass retries it while it is within the window. */
		log_error("event=schedule.fire_failed org=%s automation=%s scheduled_at=%s "
		    "reason=%s retry_in=%ds", log_q(ev->org), log_q(name), at,
		    status == INGEST_QUEUE_FULL ? "queue_full" : "store_unavailable",
		    SCHEDULE_RETRY);
		if (!evtimer_pending(s->retry, NULL)) {
			struct timeval tv = { SCHEDULE_RETRY, 0 };
			evtimer_add(s->retry, &tv);
		}
		break;
	}
}

static char *
scheduler_key(const struct schedule_def *d, int64_t t)
{
	char	 ts[32];

	return xprintf("schedule:%s@%s", d->automation, schedule_format_utc(t, ts, sizeof ts));
}

struct spur_event *
schedule_event(const struct schedule_def *d, int64_t t)
{
	struct spur_event	*ev;
	const char		*zone = cron_zone_name(d->parsed);
	char			 ts[32];

	schedule_format_utc(t, ts, sizeof ts);
	ev = spur_event_new(d->org, "schedule");
	ev->type = xstrdup("schedule");
	ev->dedup = scheduler_key(d, t);
	ev->thread = xstrdup(ev->dedup);
	ev->delivery = xstrdup(ev->dedup);
	json_object_set_new(ev->meta, "automation", json_string(d->automation));
	json_object_set_new(ev->meta, "scheduled_at", json_string(ts));
	ev->payload = json_pack("{s:s,s:s,s:s,s:s}", "automation", d->automation,
	    "cron", d->cron, "timezone", zone, "scheduled_at", ts);
	return ev;
}

/* Submits the event of fire time t; how says why now (on_time, late, catch_up). */
static void
scheduler_fire(struct scheduler *s, const struct schedule_def *d, int64_t t, const char *how)
{
	struct spur_event	*ev = schedule_event(d, t);
	char			 ts[32];

	schedule_format_utc(t, ts, sizeof ts);
	log_info("event=schedule.fire org=%s automation=%s scheduled_at=%s how=%s "
	    "late_ms=%lld", log_q(d->org), log_q(d->automation), ts, how,
	    (long long)(now_ms() - t * 1000));
	metrics_observe(s->engine->metrics, METRICS_HIST_SCHEDULE_LAG, (now_ms() - t * 1000) /
	    1000.0);
	ingest_submit(s->engine->ingest, ingest_prepare(s->engine->ingest,
	    s->engine->automations, ev),
	    scheduler_done_cb, s);
}

/* Sets the timer to the earliest next fire time (or the wall-clock re-check). */
static void
scheduler_arm(struct scheduler *s)
{
	struct timeval	 tv;
	int64_t		 target = -1, delay;
	size_t		 i;
	char		 ts[32];

	for (i = 0; i < s->n; i++) {
		if (s->entries[i].next != -1 && (target == -1 || s->entries[i].next < target))
			target = s->entries[i].next;
	}
	s->target = target;
	evtimer_del(s->timer);
	if (target == -1)
		return;
	delay = target * 1000 - now_ms();
	if (delay < 0)
		delay = 0;
	if (delay > SCHEDULE_MAX_SLEEP * 1000)
		delay = SCHEDULE_MAX_SLEEP * 1000;
	tv.tv_sec = delay / 1000;
	tv.tv_usec = (delay % 1000) * 1000;
	evtimer_add(s->timer, &tv);
	log_debug("event=schedule.armed next=%s sleep_ms=%lld",
	    schedule_format_utc(target, ts, sizeof ts), (long long)delay);
}

/* The window within which a missed time still fires. */
static int64_t
scheduler_window(const struct scheduler *s)
{
	return s->engine->conf->schedule_catch_up;
}

/*
 * When the store first saw d (-1: it cannot say). A schedule is its
 * automation, cron and zone: a changed expression is a new schedule.
 */
static int64_t
scheduler_seen(struct scheduler *s, const struct schedule_def *d, int64_t now)
{
	char	*spec = xprintf("%s %s", d->cron, cron_zone_name(d->parsed));
	int64_t	 seen = store_schedule_seen(s->engine->store, d->org, d->automation, spec, now);

	free(spec);
	return seen;
}

/*
 * Catch-up: for each schedule, the most recent time at or before now fires if it
 * is not stored yet and within schedules.catch_up; else it is reported skipped.
 * Only a time that fell after the schedule was first seen was missed: one
 * before it (a new schedule, a fresh store) neither fires nor is skipped.
 */
static void
scheduler_catch_up(struct scheduler *s)
{
	const struct schedule_def	*d;
	int64_t				 now = scheduler_now(), m, window, lookback, seen;
	size_t				 i;
	char				*key, ts[32];
	int				 have;

	window = scheduler_window(s);
	lookback = window > SCHEDULE_LOOKBACK ? window : SCHEDULE_LOOKBACK;
	for (i = 0; i < s->n; i++) {
		d = s->entries[i].def;
		seen = scheduler_seen(s, d, now);
		if ((m = schedule_prev(d->parsed, now, lookback)) == -1 || (seen != -1 && m < seen))
			continue;
		key = scheduler_key(d, m);
		have = seen == -1 ? -1 : store_event_exists(s->engine->store, d->org, key);
		free(key);
		schedule_format_utc(m, ts, sizeof ts);
		if (have == 1)
			continue;
		if (have == -1) {
			struct timeval tv = { SCHEDULE_RETRY, 0 };
			log_error("event=schedule.catch_up_failed org=%s automation=%s "
			    "scheduled_at=%s reason=store_unavailable retry_in=%ds",
			    log_q(d->org), log_q(d->automation), ts, SCHEDULE_RETRY);
			if (!evtimer_pending(s->retry, NULL))
				evtimer_add(s->retry, &tv);
			continue;
		}
		if (window > 0 && now - m <= window)
			scheduler_fire(s, d, m, "catch_up");
		else
			log_warn("event=schedule.skipped org=%s automation=%s scheduled_at=%s "
			    "age=%llds catch_up=%llds reason=\"missed while the engine was "
			    "down, older than schedules.catch_up\"", log_q(d->org),
			    log_q(d->automation), ts, (long long)(now - m), (long long)window);
	}
}

/* Takes the schedules of s->set and computes each next fire time. */
static void
scheduler_load(struct scheduler *s)
{
	const struct schedule_def	**defs;
	const struct schedule_def	 *d;
	int64_t				  now = scheduler_now();
	size_t				  i;
	char				  ts[32], *local;

	s->n = automation_schedules(s->set, &defs);
	s->entries = s->n > 0 ? xcalloc(s->n, sizeof *s->entries) : NULL;
	for (i = 0; i < s->n; i++) {
		d = defs[i];
		s->entries[i].def = d;
		s->entries[i].next = cron_next(d->parsed, now);
		if (s->entries[i].next == -1) {
			log_warn("event=schedule.never org=%s automation=%s cron=%s timezone=%s",
			    log_q(d->org), log_q(d->automation), log_q(d->cron),
			    log_q(cron_zone_name(d->parsed)));
			continue;
		}
		local = cron_format_local(d->parsed, s->entries[i].next);
		log_info("event=schedule.next org=%s automation=%s cron=%s timezone=%s "
		    "next=%s next_local=%s", log_q(d->org), log_q(d->automation),
		    log_q(d->cron), log_q(cron_zone_name(d->parsed)),
		    schedule_format_utc(s->entries[i].next, ts, sizeof ts), local);
		free(local);
	}
}

static void
scheduler_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct scheduler		*s = arg;
	struct sched_entry		*en;
	const struct schedule_def	*d;
	int64_t				 nowms = now_ms(), now = nowms / 1000, t, grace;
	size_t				 i;
	char				 from[32], ts[32];

	/* Stopping: a time due now is left to the catch-up of the next start. */
	if (s->engine->stopping)
		return;
	grace = scheduler_window(s);
	if (grace < SCHEDULE_GRACE)
		grace = SCHEDULE_GRACE;
	for (i = 0; i < s->n; i++) {
		en = &s->entries[i];
		d = en->def;
		if (en->next == -1 || en->next * 1000 > nowms)
			continue;
		/* Woken late (suspend, clock jump): only the most recent due time counts. */
		t = schedule_prev(d->parsed, now, now - en->next);
		if (t == -1)
			t = en->next;
		if (t != en->next)
			log_warn("event=schedule.skipped org=%s automation=%s from=%s to=%s "
			    "reason=\"the engine woke late; only the most recent time fires\"",
			    log_q(d->org), log_q(d->automation),
			    schedule_format_utc(en->next, from, sizeof from),
			    schedule_format_utc(t, ts, sizeof ts));
		if (now - t <= grace)
			scheduler_fire(s, d, t, now - t < 2 ? "on_time" : "late");
		else
			log_warn("event=schedule.skipped org=%s automation=%s scheduled_at=%s "
			    "age=%llds reason=\"noticed later than schedules.catch_up\"",
			    log_q(d->org), log_q(d->automation),
			    schedule_format_utc(t, ts, sizeof ts), (long long)(now - t));
		en->next = cron_next(d->parsed, now);
	}
	scheduler_arm(s);
}

static void
scheduler_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct scheduler	*s = arg;

	if (!s->engine->stopping)
		scheduler_catch_up(s);
}

struct scheduler *
scheduler_create(struct engine *e)
{
	struct scheduler	*s = xcalloc(1, sizeof *s);

	s->engine = e;
	s->timer = evtimer_new(e->base, scheduler_timer_cb, s);
	s->retry = evtimer_new(e->base, scheduler_retry_cb, s);
	s->set = automation_set_ref(e->automations);
	s->target = -1;
	scheduler_load(s);
	scheduler_catch_up(s);
	scheduler_arm(s);
	return s;
}

void
scheduler_reload(struct scheduler *s)
{
	char	 ts[32];

	evtimer_del(s->timer);
	free(s->entries);
	s->entries = NULL;
	automation_set_unref(s->set);
	s->set = automation_set_ref(s->engine->automations);
	scheduler_load(s);
	scheduler_catch_up(s);
	scheduler_arm(s);
	log_info("event=schedule.reloaded schedules=%zu next=%s", s->n,
	    s->target == -1 ? "none" : schedule_format_utc(s->target, ts, sizeof ts));
}

int64_t
scheduler_next(const struct scheduler *s)
{
	return s->target;
}

void
scheduler_free(struct scheduler *s)
{
	if (s == NULL)
		return;
	if (s->engine->ingest != NULL)
		ingest_cancel(s->engine->ingest, s);
	event_free(s->timer);
	event_free(s->retry);
	free(s->entries);
	automation_set_unref(s->set);
	free(s);
}
