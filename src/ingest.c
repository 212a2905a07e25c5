/* ingest.c: matches a verified event, prepares its runs, and commits event and runs together. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "dispatch.h"
#include "event.h"
#include "ingest.h"
#include "report.h"
#include "prompt.h"
#include "serve.h"
#include "store.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#define INGEST_MAX_MATCHES	64
#define INGEST_MAX_BATCH	512

struct pending {
	struct spur_event *ev;
	struct new_run	*runs;
	size_t		 nruns;
	ingest_done_cb	 cb;
	void		*arg;
};

struct ingest {
	struct engine	*engine;
	struct event	*commit_ev;
	struct pending	*pending;
	size_t		 npending;
	size_t		 cap;
	long long	 queued;	/* runs queued in the store, as of the last commit */
};

static void	ingest_commit_cb(evutil_socket_t, short, void *);

struct ingest *
ingest_create(struct engine *e)
{
	struct ingest	*in = xcalloc(1, sizeof *in);

	in->engine = e;
	in->commit_ev = event_new(e->base, -1, 0, ingest_commit_cb, in);
	in->queued = store_count_runs(e->store, RUN_QUEUED);
	if (in->queued < 0)
		in->queued = 0;
	return in;
}

static void
pending_free(struct pending *p)
{
	size_t	 i;

	for (i = 0; i < p->nruns; i++) {
		free(p->runs[i].id);
		free(p->runs[i].automation);
		free(p->runs[i].conc_key);
		free(p->runs[i].prompt);
		json_decref(p->runs[i].automation_json);
	}
	free(p->runs);
	spur_event_free(p->ev);
}

void
ingest_free(struct ingest *in)
{
	if (in == NULL)
		return;
	ingest_flush(in);
	event_free(in->commit_ev);
	free(in->pending);
	free(in);
}

long long
ingest_queued(const struct ingest *in)
{
	return in->queued;
}

static char *
ingest_conc_key(const struct automation *a, const struct spur_event *ev)
{
	switch (a->conc_key) {
	case CONC_THREAD:
		return xprintf("%s/thread/%s", ev->org, ev->thread != NULL ? ev->thread : "");
	case CONC_AUTOMATION:
		return xprintf("%s/automation/%s", ev->org, a->name);
	default:
		return NULL;
	}
}

void
ingest_submit(struct ingest *in, struct spur_event *ev, ingest_done_cb cb, void *arg)
{
	struct engine		*e = in->engine;
	const struct automation	*matches[INGEST_MAX_MATCHES];
	struct pending		*p;
	size_t			 n, i;

	if (in->queued >= e->conf->limit_queue) {
		log_warn("event=ingest.queue_full org=%s queued=%lld limit=%d",
		    log_q(ev->org), in->queued, e->conf->limit_queue);
		cb(INGEST_QUEUE_FULL, ev, NULL, arg);
		spur_event_free(ev);
		return;
	}
	if (ev->id == NULL)
		ev->id = random_id("evt_");
	if (in->npending == in->cap) {
		in->cap = in->cap ? in->cap * 2 : 64;
		in->pending = xreallocarray(in->pending, in->cap, sizeof *in->pending);
	}
	p = &in->pending[in->npending++];
	memset(p, 0, sizeof *p);
	p->ev = ev;
	p->cb = cb;
	p->arg = arg;
	n = automation_match(e->automations, ev, matches, INGEST_MAX_MATCHES);
	if (n > 0)
		p->runs = xcalloc(n, sizeof *p->runs);
	for (i = 0; i < n; i++) {
		struct new_run *r = &p->runs[p->nruns++];
		r->id = random_id("run_");
		r->automation = xstrdup(matches[i]->name);
		r->conc_key = ingest_conc_key(matches[i], ev);
		r->prompt = prompt_build(matches[i]->prompt, ev, NULL);
		r->automation_json = automation_to_json(matches[i]);
	}
	if (in->npending == 1)
		event_active(in->commit_ev, 0, 0);
}

void
ingest_cancel(struct ingest *in, void *arg)
{
	size_t	 i;

	for (i = 0; i < in->npending; i++) {
		if (in->pending[i].arg == arg)
			in->pending[i].cb = NULL;
	}
}

static void
ingest_commit_batch(struct ingest *in, struct pending *batch, size_t n)
{
	struct engine		*e = in->engine;
	struct ingest_item	*items;
	char			*cause = NULL;
	size_t			 i, j;
	int			 rc;
	json_t			*runs;
	enum ingest_status	 status;
	int64_t			 t0 = now_ms();

	items = xcalloc(n, sizeof *items);
	for (i = 0; i < n; i++) {
		items[i].event = batch[i].ev;
		items[i].runs = batch[i].runs;
		items[i].nruns = batch[i].nruns;
	}
	rc = store_ingest(e->store, items, n, &cause);
	if (rc != 0) {
		log_error("event=ingest.commit_failed deliveries=%zu error=%s", n, log_q(cause));
		free(cause);
	} else
		log_debug("event=ingest.commit deliveries=%zu ms=%lld", n,
		    (long long)(now_ms() - t0));
	for (i = 0; i < n; i++) {
		struct pending *p = &batch[i];
		runs = json_array();
		if (rc != 0)
			status = INGEST_UNAVAILABLE;
		else if (items[i].duplicate) {
			status = INGEST_DUPLICATE;
			log_info("event=ingest.duplicate org=%s source=%s event_id=%s delivery=%s",
			    log_q(p->ev->org), p->ev->source, p->ev->id, log_q(p->ev->delivery));
		} else {
			status = INGEST_NEW;
			for (j = 0; j < p->nruns; j++) {
				json_array_append_new(runs, json_string(p->runs[j].id));
				log_info("event=run.queued run=%s org=%s automation=%s "
				    "event_id=%s thread=%s", p->runs[j].id, log_q(p->ev->org),
				    log_q(p->runs[j].automation), p->ev->id,
				    log_q(p->ev->thread));
			}
			in->queued += p->nruns;
			log_info("event=ingest.stored org=%s source=%s type=%s event_id=%s "
			    "delivery=%s thread=%s runs=%zu", log_q(p->ev->org), p->ev->source,
			    log_q(p->ev->type), p->ev->id, log_q(p->ev->delivery),
			    log_q(p->ev->thread), p->nruns);
			metrics_count(e->metrics, "events", 1);
			/* The thread hears that its event was taken (an eyes reaction). */
			if (p->nruns > 0)
				report_accepted(e, p->ev, p->runs[0].id);
		}
		if (p->cb != NULL)
			p->cb(status, p->ev, runs, p->arg);
		json_decref(runs);
		pending_free(p);
	}
	free(items);
	if (rc == 0) {
		in->queued = store_count_runs(e->store, RUN_QUEUED);
		if (e->dispatch != NULL)
			dispatch_kick(e->dispatch);
	}
}

static void
ingest_commit_cb(evutil_socket_t fd, short what, void *arg)
{
	ingest_flush(arg);
}

void
ingest_flush(struct ingest *in)
{
	struct pending	*batch;
	size_t		 n;

	while (in->npending > 0) {
		/* Callbacks may submit more; take the batch first. */
		n = in->npending < INGEST_MAX_BATCH ? in->npending : INGEST_MAX_BATCH;
		batch = xmalloc(n * sizeof *batch);
		memcpy(batch, in->pending, n * sizeof *batch);
		memmove(in->pending, in->pending + n, (in->npending - n) * sizeof *batch);
		in->npending -= n;
		ingest_commit_batch(in, batch, n);
		free(batch);
	}
}
