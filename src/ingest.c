/* ingest.c: matches a verified event, prepares its runs, and commits event and runs together. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "dispatch.h"
#include "event.h"
#include "ingest.h"
#include "outbox.h"
#include "plog.h"
#include "prompt.h"
#include "report.h"
#include "serve.h"
#include "store.h"
#include "thread-cmd.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define INGEST_MAX_MATCHES	64
#define INGEST_MAX_BATCH	512

struct pending {
	struct ingest_item *item;
	ingest_done_cb	 cb;
	void		*arg;
};

/* A batch of deliveries and outbox marks, from the writer's taking it to the loop's answering it. */
struct batch {
	struct pending		*pending;
	struct ingest_item	**items;
	size_t			 n;
	struct report_mark	*marks;
	size_t			 nmarks;
	int			 rc;
	char			*cause;
	struct batch		*next;
};

/*
 * Commits run on a writer thread with its own store connection. The writer
 * takes everything pending as one batch (group commit), commits it and hands
 * it to the loop to be answered, and takes the next batch at once: what
 * arrived during a commit waits for no other thread.
 */
struct ingest {
	struct engine	*engine;
	struct event	*done_ev;	/* writer -> loop: batches are committed */
	long long	 queued;	/* runs queued in the store (recounted each second) */
	long long	 submitted;	/* runs submitted and not yet committed (under mu) */
	int64_t		 counted_at;

	struct store	*wstore;
	struct plog	*plog;		/* the fronts append payloads, the writer syncs */
	pthread_t	 thread;
	pthread_mutex_t	 mu;
	pthread_cond_t	 work;		/* to the writer: something is pending, or stop */
	pthread_cond_t	 idle;		/* from the writer: a batch is done */
	struct pending	*pending;
	size_t		 npending;
	size_t		 cap;
	struct report_mark *marks;	/* the outbox's, for the next batch */
	size_t		 nmarks;
	size_t		 capmarks;
	struct batch	*writing;	/* owned by the writer, but for the callbacks */
	struct batch	*done;		/* committed (or not), for the loop to answer */
	struct batch	**done_tail;
	int		 stop;
};

static void	ingest_written_cb(evutil_socket_t, short, void *);
static void	ingest_finish_batch(struct ingest *, struct batch *);

/*
 * Writer, after the commit: the payloads are not needed any more. A repeated
 * delivery's copy in the payload log is pointed to by no row: its space goes
 * back (a redelivery storm does not fill the disk for the retention period).
 * Not after a failed commit: the rows may yet be on disk.
 */
static void
ingest_committed(struct ingest *in, struct batch *b)
{
	struct ingest_item	**items = b->items;
	size_t			 i, n = b->n;

	for (i = 0; i < n; i++) {
		if (b->rc == 0 && items[i]->duplicate && items[i]->payload_seg > 0)
			plog_discard(store_payload_dir(in->wstore), items[i]->payload_seg,
			    items[i]->payload_off, items[i]->event->payload_rawlen);
		json_decref(items[i]->event->payload);
		items[i]->event->payload = NULL;
		free(items[i]->event->payload_raw);
		items[i]->event->payload_raw = NULL;
		items[i]->event->payload_rawlen = 0;
	}
}

/* Writer, with mu held: what is pending becomes a batch (at most INGEST_MAX_BATCH deliveries). */
static struct batch *
ingest_take_pending(struct ingest *in)
{
	struct batch	*b = xcalloc(1, sizeof *b);
	size_t		 n, i;

	b->marks = in->marks;
	b->nmarks = in->nmarks;
	in->marks = NULL;
	in->nmarks = in->capmarks = 0;
	n = in->npending < INGEST_MAX_BATCH ? in->npending : INGEST_MAX_BATCH;
	b->pending = xcalloc(n > 0 ? n : 1, sizeof *b->pending);
	b->items = xcalloc(n > 0 ? n : 1, sizeof *b->items);
	if (n > 0) {
		memcpy(b->pending, in->pending, n * sizeof *b->pending);
		memmove(in->pending, in->pending + n, (in->npending - n) *
		    sizeof *in->pending);
		in->npending -= n;
	}
	for (i = 0; i < n; i++)
		b->items[i] = b->pending[i].item;
	b->n = n;
	return b;
}

static void *
ingest_writer_main(void *arg)
{
	struct ingest	*in = arg;
	struct batch	*b;
	int64_t		 t0;

	pthread_mutex_lock(&in->mu);
	for (;;) {
		while (!in->stop && in->npending == 0 && in->nmarks == 0)
			pthread_cond_wait(&in->work, &in->mu);
		if (in->stop)
			break;
		b = in->writing = ingest_take_pending(in);
		pthread_mutex_unlock(&in->mu);
		t0 = now_ms();
		b->rc = store_ingest(in->wstore, b->items, b->n, b->marks, b->nmarks,
		    &b->cause);
		metrics_observe(in->engine->metrics, METRICS_HIST_STORE_COMMIT,
		    (now_ms() - t0) / 1000.0);
		ingest_committed(in, b);
		pthread_mutex_lock(&in->mu);
		in->writing = NULL;
		*in->done_tail = b;
		in->done_tail = &b->next;
		pthread_cond_broadcast(&in->idle);
		event_active(in->done_ev, 0, 0);
	}
	pthread_mutex_unlock(&in->mu);
	return NULL;
}

struct ingest *
ingest_create(struct engine *e)
{
	struct ingest	*in = xcalloc(1, sizeof *in);
	char		*cause = NULL;

	in->engine = e;
	in->done_ev = event_new(e->base, -1, 0, ingest_written_cb, in);
	in->queued = store_count_runs(e->store, RUN_QUEUED);
	if (in->queued < 0)
		in->queued = 0;
	in->counted_at = now_ms();
	if ((in->wstore = store_open_url(e->conf->store_url, e->conf->data_dir, 0, &cause)) ==
	    NULL)
		fatal("cannot open the store for the writer: %s", cause);
	/* sqlite's payload log; on PostgreSQL a payload is in its row, for every node. */
	if (store_payload_dir(in->wstore) != NULL) {
		if ((in->plog = plog_open(store_payload_dir(in->wstore), &cause)) == NULL)
			fatal("cannot open the payload log: %s", cause);
		store_write_payloads(in->wstore, in->plog);
	}
	pthread_mutex_init(&in->mu, NULL);
	pthread_cond_init(&in->work, NULL);
	pthread_cond_init(&in->idle, NULL);
	in->done_tail = &in->done;
	if (pthread_create(&in->thread, NULL, ingest_writer_main, in) != 0)
		fatal("cannot start the writer thread");
	return in;
}

void
ingest_item_free(struct ingest_item *it)
{
	size_t	 i;

	if (it == NULL)
		return;
	for (i = 0; i < it->nruns; i++) {
		free(it->runs[i].id);
		free(it->runs[i].automation);
		free(it->runs[i].conc_key);
		free(it->runs[i].prompt);
		free(it->runs[i].automation_json);
	}
	free(it->runs);
	free(it->event_json);
	free(it->ack_target);
	free(it->ack_body);
	spur_event_free(it->event);
	free(it);
}

void
ingest_free(struct ingest *in)
{
	if (in == NULL)
		return;
	ingest_flush(in);
	pthread_mutex_lock(&in->mu);
	in->stop = 1;
	pthread_cond_signal(&in->work);
	pthread_mutex_unlock(&in->mu);
	pthread_join(in->thread, NULL);
	pthread_mutex_destroy(&in->mu);
	pthread_cond_destroy(&in->work);
	pthread_cond_destroy(&in->idle);
	store_close(in->wstore);
	plog_close(in->plog);
	event_free(in->done_ev);
	free(in->pending);
	free(in->marks);
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
 * The payload goes to the payload log now, on the caller's thread; the writer
 * syncs the log before the commit. If it cannot, the row keeps it.
 */
static void
ingest_payload(struct ingest *in, struct ingest_item *it)
{
	struct spur_event	*ev = it->event;
	char			*cause = NULL;

	if (in->plog != NULL && ev->payload_raw != NULL && plog_append(in->plog, ev->payload_raw,
	    ev->payload_rawlen, &it->payload_seg, &it->payload_off, &cause) != 0) {
		log_warn("event=ingest.payload_log_failed event_id=%s error=%s "
		    "consequence=\"payload kept in the store\"", ev->id, log_q(cause));
		free(cause);
		it->payload_seg = 0;
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
	json_t	*head = spur_event_head_json(it->event);

	it->event_json = json_dumps(head, JSON_COMPACT);
	json_decref(head);
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
	n = it->command != THREAD_CMD_NONE ? 0 : automation_match(set, ev, matches,
	    INGEST_MAX_MATCHES);
	if (n == 0 && ev->unsigned_body) {
		/* Anyone may send these: one that starts nothing keeps no payload to fill the disk. */
		free(ev->payload_raw);
		ev->payload_raw = NULL;
		ev->payload_rawlen = 0;
		json_decref(ev->payload);
		ev->payload = NULL;
	}
	ingest_payload(in, it);
	if (n > 0)
		it->runs = xcalloc(n, sizeof *it->runs);
	for (i = 0; i < n; i++)
		ingest_add_run(it, matches[i], prompt_build(matches[i]->prompt, ev, NULL));
	if (n > 0 && report_ack(ev, it->runs[0].id, &target, &it->ack_body) == 0) {
		it->ack_target = json_dumps(target, JSON_COMPACT);
		json_decref(target);
	}
	ingest_event_json(it);
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
	ingest_payload(in, it);
	it->runs = xcalloc(1, sizeof *it->runs);
	ingest_add_run(it, a, xstrdup(prompt));
	ingest_event_json(it);
	return it;
}

/* Any thread: the fronts submit as their requests are verified. */
void
ingest_submit(struct ingest *in, struct ingest_item *it, ingest_done_cb cb, void *arg)
{
	struct engine	*e = in->engine;
	struct pending	*p;
	long long	 queued;
	int		 limit;

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
	if (in->npending == in->cap) {
		in->cap = in->cap ? in->cap * 2 : 64;
		in->pending = xreallocarray(in->pending, in->cap, sizeof *in->pending);
	}
	in->submitted += (long long)it->nruns;
	p = &in->pending[in->npending++];
	p->item = it;
	p->cb = cb;
	p->arg = arg;
	if (in->npending == 1)
		pthread_cond_signal(&in->work);
	pthread_mutex_unlock(&in->mu);
}

static void
ingest_cancel_batch(struct batch *b, void *arg)
{
	size_t	 i;

	for (i = 0; i < b->n; i++) {
		if (b->pending[i].arg == arg)
			b->pending[i].cb = NULL;
	}
}

void
ingest_cancel(struct ingest *in, void *arg)
{
	struct batch	*b;
	size_t		 i;

	pthread_mutex_lock(&in->mu);
	for (i = 0; i < in->npending; i++) {
		if (in->pending[i].arg == arg)
			in->pending[i].cb = NULL;
	}
	/* The writer never reads the callbacks: they are the loop's, in flight or done. */
	if (in->writing != NULL)
		ingest_cancel_batch(in->writing, arg);
	for (b = in->done; b != NULL; b = b->next)
		ingest_cancel_batch(b, arg);
	pthread_mutex_unlock(&in->mu);
}

void
ingest_mark(struct ingest *in, const struct report_mark *m)
{
	pthread_mutex_lock(&in->mu);
	if (in->nmarks == in->capmarks) {
		in->capmarks = in->capmarks ? in->capmarks * 2 : 64;
		in->marks = xreallocarray(in->marks, in->capmarks, sizeof *in->marks);
	}
	in->marks[in->nmarks] = *m;
	in->marks[in->nmarks].error = m->error != NULL ? xstrdup(m->error) : NULL;
	in->marks[in->nmarks].status_id = m->status_id != NULL ? xstrdup(m->status_id) :
	    NULL;
	if (++in->nmarks == 1 && in->npending == 0)
		pthread_cond_signal(&in->work);
	pthread_mutex_unlock(&in->mu);
}

/* Loop: answers every delivery of the batch the writer committed (or could not). */
static void
ingest_finish_batch(struct ingest *in, struct batch *d)
{
	struct engine		*e = in->engine;
	struct pending		*batch = d->pending;
	struct ingest_item	**items = d->items;
	size_t			 n = d->n, i, j;
	int			 rc = d->rc, acked = 0;
	long long		 queued = 0, recount, submitted = 0;
	json_t			*runs, *statuses = json_array(), *id;
	enum ingest_status	 status;

	if (rc != 0) {
		log_error("event=ingest.commit_failed deliveries=%zu error=%s", n,
		    log_q(d->cause));
	}
	free(d->cause);
	for (i = 0; i < n; i++) {
		struct pending		*p = &batch[i];
		struct ingest_item	*it = items[i];
		struct spur_event	*ev = it->event;

		submitted += (long long)it->nruns;
		runs = json_array();
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
				json_array_append_new(statuses, json_string(it->runs[j].id));
			}
			log_info("event=ingest.stored org=%s source=%s type=%s event_id=%s "
			    "delivery=%s thread=%s runs=%zu", log_q(ev->org), ev->source,
			    log_q(ev->type), ev->id, log_q(ev->delivery), log_q(ev->thread),
			    it->nruns);
			queued += it->nruns;
			metrics_count(e->metrics, "events", 1);
			if (it->command != THREAD_CMD_NONE)
				thread_cmd_apply(e, ev, it->command);
			if (it->nruns > 0 && it->ack_target != NULL)
				acked = 1;
		}
		if (p->cb != NULL)
			p->cb(status, ev, runs, p->arg);
		json_decref(runs);
		ingest_item_free(it);
	}
	/*
	 * The runs' status messages (reports.progress), stored after the answers and
	 * in one transaction (one fsync on the loop, not one a run): a crash before
	 * it loses them, and the report is then posted as a message of its own.
	 */
	if (json_array_size(statuses) > 0) {
		if (store_tx_begin(e->store, NULL) != 0)
			log_warn("event=ingest.status_tx_failed runs=%zu",
			    json_array_size(statuses));
		json_array_foreach(statuses, i, id)
			report_status(e, json_string_value(id));
		if (store_tx_commit(e->store, NULL) != 0)
			log_warn("event=ingest.status_commit_failed runs=%zu",
			    json_array_size(statuses));
	}
	json_decref(statuses);
	for (i = 0; i < d->nmarks; i++) {
		/* Committed or not, the outbox may look at the report again. */
		outbox_marked(e->outbox, d->marks[i].id);
		free(d->marks[i].error);
		free(d->marks[i].status_id);
	}
	free(d->marks);
	free(items);
	free(batch);
	free(d);
	pthread_mutex_lock(&in->mu);
	in->submitted -= submitted;
	pthread_mutex_unlock(&in->mu);
	if (rc == 0) {
		pthread_mutex_lock(&in->mu);
		in->queued += queued;
		pthread_mutex_unlock(&in->mu);
		/* A recount is a query: once a second is enough to keep the bound honest. */
		if (now_ms() - in->counted_at >= 1000) {
			recount = store_count_runs(e->store, RUN_QUEUED);
			pthread_mutex_lock(&in->mu);
			in->queued = recount;
			pthread_mutex_unlock(&in->mu);
			in->counted_at = now_ms();
		}
		if (queued && e->dispatch != NULL)
			dispatch_kick(e->dispatch);
		if (acked)
			outbox_kick(e->outbox);
	}
}

/* Loop: the batches the writer is done with, oldest first. */
static struct batch *
ingest_take_done(struct ingest *in)
{
	struct batch	*b;

	pthread_mutex_lock(&in->mu);
	b = in->done;
	in->done = NULL;
	in->done_tail = &in->done;
	pthread_mutex_unlock(&in->mu);
	return b;
}

static void
ingest_finish_all(struct ingest *in, struct batch *b)
{
	struct batch	*next;

	for (; b != NULL; b = next) {
		next = b->next;
		ingest_finish_batch(in, b);
	}
}

static void
ingest_written_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ingest	*in = arg;

	ingest_finish_all(in, ingest_take_done(in));
}

/* Loop: commits everything pending now and answers it, waiting for the writer (shutdown). */
void
ingest_flush(struct ingest *in)
{
	int	 idle;

	for (;;) {
		pthread_mutex_lock(&in->mu);
		while (in->writing != NULL || in->npending > 0 || in->nmarks > 0)
			pthread_cond_wait(&in->idle, &in->mu);
		idle = in->done == NULL;
		pthread_mutex_unlock(&in->mu);
		if (idle)
			return;
		/* Answering may queue more (an outbox mark): round again until nothing is left. */
		ingest_finish_all(in, ingest_take_done(in));
	}
}
