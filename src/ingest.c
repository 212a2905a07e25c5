/* ingest.c: matches a verified event, prepares its runs, and commits event and runs together. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "egress.h"
#include "event.h"
#include "ingest.h"
#include "plog.h"
#include "prompt.h"
#include "report.h"
#include "serve.h"
#include "store.h"
#include "thread-cmd.h"
#include "writer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define INGEST_MAX_MATCHES	64

/* A submission waiting for its commit: whom to answer (cb NULL: its client went away). */
struct ingest_wait {
	struct ingest		*in;
	ingest_done_cb		 cb;
	void			*arg;
	struct ingest_wait	*prev;
	struct ingest_wait	*next;
};

/*
 * Ingest prepares deliveries on the fronts' threads and hands them to the
 * writer (writer.c), which commits them in groups; its completions come back
 * here on the loop, where each delivery is answered and, after each commit,
 * its runs' status messages are stored and the dispatcher and outbox kicked.
 */
struct ingest {
	struct engine	*engine;
	struct writer	*writer;
	pthread_mutex_t	 mu;		/* the counts and the waits */
	long long	 queued;	/* runs queued in the store (recounted each second) */
	long long	 submitted;	/* runs submitted and not yet committed */
	int64_t		 counted_at;
	struct ingest_wait *waits;

	/* The loop's, for the commit being completed: what its deliveries left to do. */
	json_t		*statuses;	/* its new runs, for their status messages */
	long long	 done_queued;
	long long	 done_submitted;
	int		 done_acked;
};

static void	ingest_delivered_cb(int, struct ingest_item *, void *);
static void	ingest_replayed_cb(int, struct ingest_item *, void *);
static void	ingest_batch_done_cb(int, double, void *);

struct ingest *
ingest_create(struct engine *e)
{
	struct ingest	*in = xcalloc(1, sizeof *in);

	in->engine = e;
	pthread_mutex_init(&in->mu, NULL);
	in->statuses = json_array();
	in->queued = store_count_runs(e->store, RUN_QUEUED);
	if (in->queued < 0)
		in->queued = 0;
	in->counted_at = now_ms();
	in->writer = e->writer = writer_create(e->base, e->store, e->conf->store_url,
	    e->conf->data_dir, ingest_replayed_cb, ingest_batch_done_cb, in);
	return in;
}

void
ingest_free(struct ingest *in)
{
	if (in == NULL)
		return;
	writer_free(in->writer);
	in->engine->writer = NULL;
	json_decref(in->statuses);
	pthread_mutex_destroy(&in->mu);
	free(in);
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

/*
 * The record the writer will append to the payload log, made here on the
 * caller's thread. Not for a delivery anyone may send that starts nothing
 * (its event row alone is kept), nor for one too large to be a record: the
 * commit of its batch syncs the store itself.
 */
static void
ingest_record(struct ingest *in, struct ingest_item *it)
{
	if (!writer_logs(in->writer) || (it->event->unsigned_body && it->nruns == 0))
		return;
	ingest_rec_make(it);
	/* Past what a start reads as a record (limits.body set that high): kept by the commit. */
	if (it->reclen - PLOG_REC_HEAD > PLOG_REC_MAX || it->event->payload_rawlen > PLOG_REC_MAX) {
		free(it->rec);
		it->rec = NULL;
	}
}

/* A run of the event for automation a, with its prompt. */
static void
ingest_add_run(struct ingest_item *it, const struct automation *a, char *prompt)
{
	struct new_run	*r = &it->runs[it->nruns++];
	json_t		*aj;

	r->id = time_id("run_");
	r->automation = xstrdup(a->name);
	r->conc_key = ingest_conc_key(a, it->event);
	r->prompt = prompt;
	aj = automation_to_json(a);
	r->automation_json = json_dumps(aj, JSON_COMPACT);
	json_decref(aj);
}

/* The rows' JSON is made here, on the caller's thread, not on the writer. */
static void
ingest_event_json(struct ingest_item *it)
{
	it->event_json = spur_event_head_text(it->event);
}

/* Any thread: whether ev is a reply in a thread where a live run awaits an answer. */
static int
ingest_answers(struct engine *e, const struct spur_event *ev)
{
	return e->run_local != NULL && e->run_local->awaits != NULL && ev->org != NULL &&
	    ev->thread != NULL && ev->text != NULL && *ev->text != '\0' &&
	    e->run_local->awaits(ev->org, ev->thread);
}

struct ingest_item *
ingest_prepare(struct ingest *in, const struct automation_set *set,
    struct spur_event *ev)
{
	const struct automation	*matches[INGEST_MAX_MATCHES];
	struct ingest_item	*it = xcalloc(1, sizeof *it);
	json_t			*target;
	size_t			 n, i;

	if (ev->id == NULL)
		ev->id = time_id("evt_");
	it->event = ev;
	/* A thread command is read before any automation: it never starts a run. */
	it->command = thread_cmd_parse(ev);
	/* Nor does a reply while a live run asks its thread a question (thread_ask). */
	it->answers = it->command == THREAD_CMD_NONE && ingest_answers(in->engine, ev);
	if (it->answers)
		it->why = xstrdup("a reply while a live run of the thread asks a question");
	n = it->command != THREAD_CMD_NONE || it->answers ? 0 : automation_match_why(set, ev,
	    matches, INGEST_MAX_MATCHES, &it->why);
	if (n == 0 && ev->unsigned_body) {
		/* Anyone may send these: one that starts nothing keeps no payload to fill the disk. */
		free(ev->payload_raw);
		ev->payload_raw = NULL;
		ev->payload_rawlen = 0;
		json_decref(ev->payload);
		ev->payload = NULL;
	}
	if (n > 0)
		it->runs = xcalloc(n, sizeof *it->runs);
	for (i = 0; i < n; i++)
		ingest_add_run(it, matches[i], prompt_build(matches[i]->prompt, ev, NULL));
	if (n > 0 && report_ack(ev, it->runs[0].id, &target, &it->ack_body) == 0) {
		it->ack_target = json_dumps(target, JSON_COMPACT);
		json_decref(target);
	}
	ingest_event_json(it);
	ingest_record(in, it);
	return it;
}

struct ingest_item *
ingest_prepare_run(struct ingest *in, struct spur_event *ev, const struct automation *a,
    const char *prompt)
{
	struct ingest_item	*it = xcalloc(1, sizeof *it);

	if (ev->id == NULL)
		ev->id = time_id("evt_");
	it->event = ev;
	it->runs = xcalloc(1, sizeof *it->runs);
	ingest_add_run(it, a, xstrdup(prompt));
	ingest_event_json(it);
	ingest_record(in, it);
	return it;
}

/* Any thread: the fronts submit as their requests are verified. */
void
ingest_submit(struct ingest *in, struct ingest_item *it, ingest_done_cb cb, void *arg)
{
	struct engine		*e = in->engine;
	struct ingest_wait	*wt;
	long long		 queued;
	int			 limit;

	pthread_mutex_lock(&e->conf_mu);
	limit = e->conf->limit_queue;
	pthread_mutex_unlock(&e->conf_mu);
	pthread_mutex_lock(&in->mu);
	/* What waits for the commit counts: a burst cannot pass the bound before it lands. */
	if ((queued = in->queued + in->submitted) >= limit) {
		pthread_mutex_unlock(&in->mu);
		log_warn("event=ingest.queue_full org=%s queued=%lld limit=%d",
		    log_q(it->event->org), queued, limit);
		cb(INGEST_QUEUE_FULL, it->event, NULL, arg);
		ingest_item_free(it);
		return;
	}
	in->submitted += (long long)it->nruns;
	wt = xcalloc(1, sizeof *wt);
	wt->in = in;
	wt->cb = cb;
	wt->arg = arg;
	if ((wt->next = in->waits) != NULL)
		wt->next->prev = wt;
	in->waits = wt;
	pthread_mutex_unlock(&in->mu);
	writer_deliver(in->writer, it, ingest_delivered_cb, wt);
}

void
ingest_cancel(struct ingest *in, void *arg)
{
	struct ingest_wait	*wt;

	pthread_mutex_lock(&in->mu);
	for (wt = in->waits; wt != NULL; wt = wt->next) {
		if (wt->arg == arg)
			wt->cb = NULL;
	}
	pthread_mutex_unlock(&in->mu);
}

/* Loop: one delivery of a commit (or of a start's replay: wt NULL), answered. */
static void
ingest_answer(struct ingest *in, int rc, struct ingest_item *it, struct ingest_wait *wt)
{
	struct engine		*e = in->engine;
	struct spur_event	*ev = it->event;
	enum ingest_status	 status;
	ingest_done_cb		 cb = NULL;
	void			*arg = NULL;
	json_t			*runs = json_array();
	size_t			 j;

	if (wt != NULL) {
		pthread_mutex_lock(&in->mu);
		if (wt->prev != NULL)
			wt->prev->next = wt->next;
		else
			in->waits = wt->next;
		if (wt->next != NULL)
			wt->next->prev = wt->prev;
		cb = wt->cb;
		arg = wt->arg;
		pthread_mutex_unlock(&in->mu);
		free(wt);
		in->done_submitted += (long long)it->nruns;
	}
	if (rc != 0)
		status = INGEST_UNAVAILABLE;
	else if (it->duplicate) {
		status = INGEST_DUPLICATE;
		log_info("event=ingest.duplicate org=%s source=%s event_id=%s delivery=%s",
		    log_q(ev->org), ev->source, ev->id, log_q(ev->delivery));
	} else {
		status = INGEST_NEW;
		for (j = 0; j < it->nruns; j++) {
			json_array_append_new(runs, json_string(it->runs[j].id));
			log_info("event=run.queued run=%s org=%s automation=%s "
			    "event_id=%s thread=%s", it->runs[j].id, log_q(ev->org),
			    log_q(it->runs[j].automation), ev->id, log_q(ev->thread));
			json_array_append_new(in->statuses, json_string(it->runs[j].id));
		}
		log_info("event=ingest.stored org=%s source=%s type=%s event_id=%s "
		    "delivery=%s thread=%s runs=%zu%s%s", log_q(ev->org), ev->source,
		    log_q(ev->type), ev->id, log_q(ev->delivery), log_q(ev->thread),
		    it->nruns, it->why != NULL ? " why=" : "", it->why != NULL ?
		    log_q(it->why) : "");
		in->done_queued += (long long)it->nruns;
		metrics_count(e->metrics, "events", 1);
		if (it->command != THREAD_CMD_NONE)
			thread_cmd_apply(e, ev, it->command);
		if (it->answers)
			e->run_local->reply(e, ev);
		if (it->nruns > 0 && it->ack_target != NULL)
			in->done_acked = 1;
	}
	if (cb != NULL)
		cb(status, ev, runs, arg);
	json_decref(runs);
	ingest_item_free(it);
}

static void
ingest_delivered_cb(int rc, struct ingest_item *it, void *arg)
{
	struct ingest_wait	*wt = arg;

	ingest_answer(wt->in, rc, it, wt);
}

/* Loop: a record a start applied again: answered by no one, but logged, reported and acted on. */
static void
ingest_replayed_cb(int rc, struct ingest_item *it, void *arg)
{
	ingest_answer(arg, rc, it, NULL);
}

/* Loop: after the deliveries of a commit, what they left to do. */
static void
ingest_batch_done_cb(int rc, double seconds, void *arg)
{
	struct ingest	*in = arg;
	struct engine	*e = in->engine;
	json_t		*statuses = in->statuses, *id;
	long long	 queued = in->done_queued, recount;
	size_t		 i;
	int		 acked = in->done_acked;

	if (seconds >= 0)
		metrics_observe(e->metrics, METRICS_HIST_STORE_COMMIT, seconds);
	in->statuses = json_array();
	in->done_queued = 0;
	in->done_acked = 0;
	/*
	 * The runs' status messages (reports.progress), stored after the answers and
	 * in one transaction that need not sync (the outbox's synced mark before it
	 * posts one makes it durable): a crash before that loses them, and the
	 * report is then posted as a message of its own.
	 */
	if (json_array_size(statuses) > 0) {
		if (store_tx_begin_lazy(e->store, NULL) != 0)
			log_warn("event=ingest.status_tx_failed runs=%zu",
			    json_array_size(statuses));
		json_array_foreach(statuses, i, id)
			report_status(e, json_string_value(id));
		if (store_tx_commit(e->store, NULL) != 0)
			log_warn("event=ingest.status_commit_failed runs=%zu",
			    json_array_size(statuses));
	}
	json_decref(statuses);
	pthread_mutex_lock(&in->mu);
	in->submitted -= in->done_submitted;
	in->done_submitted = 0;
	if (rc == 0)
		in->queued += queued;
	pthread_mutex_unlock(&in->mu);
	if (rc != 0)
		return;
	/* A recount is a query: once a second is enough to keep the bound honest. */
	if (now_ms() - in->counted_at >= 1000) {
		recount = store_count_runs(e->store, RUN_QUEUED);
		pthread_mutex_lock(&in->mu);
		in->queued = recount;
		pthread_mutex_unlock(&in->mu);
		in->counted_at = now_ms();
	}
	wake(e, (queued ? WAKE_DISPATCH : 0) | (acked ? WAKE_OUTBOX : 0));
}

/* Loop: commits everything pending now and answers it, waiting for the writer (shutdown). */
void
ingest_flush(struct ingest *in)
{
	writer_flush(in->writer);
}
