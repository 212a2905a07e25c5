/* ingest.c: matches a verified event, prepares its runs, and commits event and runs together. */
#include "spur.h"
#include "automation.h"
#include "checkpoint.h"
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

#include <sys/uio.h>
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
	int64_t			 log_seg;	/* its records end at (log_seg, log_end); 0: none */
	int64_t			 log_end;
	int			 lazy;		/* committed without a sync of the store */
	int			 rc;
	char			*cause;
	struct batch		*next;
};

/*
 * Commits run on a writer thread with its own store connection. The writer
 * takes everything pending as one batch (group commit), appends its records
 * to the payload log and syncs them (the one fsync a 200 waits for), applies
 * their rows to the store in a commit that need not sync (the records are
 * the durable copy: a start applies the ones the store lost, ingest_replay),
 * hands the batch to the loop to be answered, and takes the next batch at
 * once: what arrived meanwhile waits for no other thread. The store's own
 * syncs happen at its checkpoints, on a thread of their own (checkpoint.c).
 */
struct ingest {
	struct engine	*engine;
	struct event	*done_ev;	/* writer -> loop: batches are committed */
	long long	 queued;	/* runs queued in the store (recounted each second) */
	long long	 submitted;	/* runs submitted and not yet committed (under mu) */
	int64_t		 counted_at;

	struct store	*wstore;
	struct plog	*plog;		/* the writer appends and syncs; NULL: none (PostgreSQL) */
	struct checkpointer *ckpt;
	struct plog_at	*discards;	/* repeated deliveries' records, waiting for a synced commit */
	size_t		 ndiscards;
	size_t		 capdiscards;
	int64_t		 applied_seg;	/* the writer's: the last record applied ends here */
	int64_t		 applied_end;
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

/* Writer, after a synced commit: the repeated deliveries' records it or an earlier one found go. */
static void
ingest_discard(struct ingest *in)
{
	plog_discard(store_payload_dir(in->wstore), in->discards, in->ndiscards);
	in->ndiscards = 0;
}

/*
 * Writer, after the commit: the payloads are not needed any more. A repeated
 * delivery's record in the payload log is pointed to by no row: its space
 * goes back (a redelivery storm does not fill the disk for the retention
 * period), but only after a synced commit that says so: until then a start
 * may have to apply its record again, which needs it whole. Not after a
 * failed commit: the rows may yet be on disk.
 */
static void
ingest_committed(struct ingest *in, struct batch *b)
{
	struct ingest_item	**items = b->items;
	struct plog_at		*d;
	size_t			 i, n = b->n;

	for (i = 0; i < n; i++) {
		if (b->rc == 0 && items[i]->duplicate && items[i]->rec_seg > 0) {
			if (in->ndiscards == in->capdiscards) {
				in->capdiscards = in->capdiscards ? in->capdiscards * 2 : 16;
				in->discards = xreallocarray(in->discards, in->capdiscards,
				    sizeof *in->discards);
			}
			d = &in->discards[in->ndiscards++];
			d->seg = items[i]->rec_seg;
			d->off = items[i]->rec_off;
		}
		json_decref(items[i]->event->payload);
		items[i]->event->payload = NULL;
		free(items[i]->event->payload_raw);
		items[i]->event->payload_raw = NULL;
		items[i]->event->payload_rawlen = 0;
		free(items[i]->rec);
		items[i]->rec = NULL;
	}
	if (b->rc == 0 && b->log_seg > 0) {
		in->applied_seg = b->log_seg;
		in->applied_end = b->log_end;
	}
	if (b->rc == 0 && !b->lazy)
		ingest_discard(in);
}

/*
 * Writer, with nothing to commit but repeated deliveries' payloads to give
 * back: one synced commit (of where the log was applied, unchanged) makes
 * the rows that say they are repeated durable, then their space goes.
 */
static void
ingest_settle(struct ingest *in)
{
	char	*cause = NULL;

	if (store_ingest(in->wstore, NULL, 0, NULL, 0, in->applied_seg, in->applied_end, 0,
	    &cause) != 0) {
		log_warn("event=ingest.settle_failed error=%s consequence=\"repeated "
		    "payloads keep their space\"", log_q(cause));
		free(cause);
		in->ndiscards = 0;
		return;
	}
	ingest_discard(in);
}

/*
 * Writer: the batch's records go to the payload log in one write and one
 * sync. If the log cannot take them, the batch is committed as before there
 * was one: payloads in their rows, the commit synced.
 */
static void
ingest_log_batch(struct ingest *in, struct batch *b)
{
	struct ingest_item	*it;
	struct iovec		*iov;
	int64_t			 seg, off, pos;
	size_t			 i;
	int			 n = 0, unlogged = 0;
	char			*cause = NULL;

	b->log_seg = 0;
	if (in->plog == NULL) {
		b->lazy = 0;
		return;
	}
	iov = xcalloc(2 * b->n + 1, sizeof *iov);
	for (i = 0; i < b->n; i++) {
		it = b->items[i];
		it->payload_seg = it->rec_seg = 0;
		if (it->rec == NULL) {
			unlogged = 1;
			continue;
		}
		iov[n].iov_base = it->rec;
		iov[n++].iov_len = it->reclen;
		if (it->event->payload_raw != NULL && it->event->payload_rawlen > 0) {
			iov[n].iov_base = it->event->payload_raw;
			iov[n++].iov_len = it->event->payload_rawlen;
		}
	}
	if (n > 0 && (plog_write(in->plog, iov, n, &seg, &off, &cause) != 0 ||
	    plog_sync(in->plog, &cause) != 0)) {
		log_warn("event=ingest.payload_log_failed deliveries=%zu error=%s "
		    "consequence=\"payloads kept in the store\"", b->n, log_q(cause));
		free(cause);
		for (i = 0; i < b->n; i++) {
			free(b->items[i]->rec);
			b->items[i]->rec = NULL;
		}
		unlogged = 1;
		n = 0;
	}
	free(iov);
	if (n > 0) {
		for (i = 0, pos = off; i < b->n; i++) {
			it = b->items[i];
			if (it->rec == NULL)
				continue;
			it->rec_seg = seg;
			it->rec_off = pos;
			pos += (int64_t)it->reclen;
			if (it->event->payload_raw != NULL && it->event->payload_rawlen > 0) {
				it->payload_seg = seg;
				it->payload_off = pos;
				pos += (int64_t)it->event->payload_rawlen;
			}
		}
		b->log_seg = seg;
		b->log_end = pos;
	}
	/* Lazy only when all of it can be applied again from the log, and nothing waits on a sync. */
	b->lazy = !unlogged && in->ndiscards == 0;
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
		while (!in->stop && in->npending == 0 && in->nmarks == 0) {
			if (in->ndiscards > 0) {
				pthread_mutex_unlock(&in->mu);
				ingest_settle(in);
				pthread_mutex_lock(&in->mu);
				continue;
			}
			pthread_cond_wait(&in->work, &in->mu);
		}
		if (in->stop)
			break;
		b = in->writing = ingest_take_pending(in);
		pthread_mutex_unlock(&in->mu);
		t0 = now_ms();
		ingest_log_batch(in, b);
		b->rc = store_ingest(in->wstore, b->items, b->n, b->marks, b->nmarks,
		    b->log_seg, b->log_end, b->lazy, &b->cause);
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

/* A start's batch of records the store had not applied, on its way to the store and the loop. */
struct replay {
	struct ingest	*in;
	struct batch	*b;
	long long	 records;
	long long	 unreadable;
};

/* Start: applies a batch of records (synced: a crash now would start over) and queues it for the loop. */
static void
ingest_replay_commit(struct replay *r)
{
	struct ingest	*in = r->in;
	struct batch	*b = r->b;

	if (b == NULL)
		return;
	r->b = NULL;
	b->rc = store_ingest(in->wstore, b->items, b->n, NULL, 0, b->log_seg, b->log_end, 0,
	    &b->cause);
	if (b->rc != 0)
		fatal("cannot apply the payload log's records to the store: %s", b->cause);
	ingest_committed(in, b);
	/* Answered by no one, but logged, reported and acted on (thread commands) like any. */
	*in->done_tail = b;
	in->done_tail = &b->next;
}

static int
ingest_replay_record(int64_t seg, int64_t off, int64_t end, const unsigned char *meta,
    size_t metalen, const unsigned char *payload, size_t paylen, void *arg)
{
	struct replay		*r = arg;
	struct ingest_item	*it;
	struct batch		*b;
	char			*cause = NULL;

	(void)payload;
	if ((it = ingest_rec_read(meta, metalen, &cause)) == NULL) {
		log_error("event=ingest.record_unreadable segment=%lld offset=%lld error=%s "
		    "consequence=\"not applied\"", (long long)seg, (long long)off, log_q(cause));
		free(cause);
		r->unreadable++;
		return 0;
	}
	r->records++;
	it->rec_seg = seg;
	it->rec_off = off;
	if (paylen > 0) {
		it->payload_seg = seg;
		it->payload_off = off + PLOG_REC_HEAD + (int64_t)metalen;
		it->event->payload_rawlen = paylen;
	}
	if ((b = r->b) == NULL) {
		b = r->b = xcalloc(1, sizeof *b);
		b->pending = xcalloc(INGEST_MAX_BATCH, sizeof *b->pending);
		b->items = xcalloc(INGEST_MAX_BATCH, sizeof *b->items);
	}
	b->pending[b->n].item = it;
	b->items[b->n++] = it;
	b->log_seg = seg;
	b->log_end = end;
	if (b->n == INGEST_MAX_BATCH)
		ingest_replay_commit(r);
	return 0;
}

/*
 * Start, before anything is accepted: the records after the last one the
 * store applied were answered (or were about to be) but their rows are not
 * in the store (it lost commits that were not synced): they are applied now,
 * in order, deduplicated as they were the first time. A torn tail (a batch
 * whose sync never finished, so never answered) is cut off.
 */
static int
ingest_replay(struct ingest *in)
{
	struct replay		 r = { in, NULL, 0, 0 };
	struct plog_scan	 sc;
	int64_t			 seg, off;
	char			*cause = NULL;
	int			 rc;

	if ((rc = store_log_applied(in->wstore, &seg, &off, &cause)) < 0)
		fatal("cannot read where the payload log was applied: %s", cause);
	/*
	 * Nothing ever applied: a new store, or one whose log is payloads only.
	 * Nothing in the log was answered, and what is there is not read (a store
	 * made anew beside an old log must not take its events back): appends
	 * start a new segment.
	 */
	if (rc == 1)
		return 1;
	if (plog_scan(store_payload_dir(in->wstore), seg, off, ingest_replay_record, &r, &sc,
	    &cause) != 0)
		fatal("cannot read the payload log: %s", cause);
	ingest_replay_commit(&r);
	if (sc.cut_segments > 0)
		log_warn("event=ingest.log_cut segments=%d bytes=%lld consequence=\"a torn "
		    "tail of the payload log, never answered, was cut off\"", sc.cut_segments,
		    (long long)sc.cut_bytes);
	if (r.records > 0 || r.unreadable > 0)
		log_info("event=ingest.replayed records=%lld unreadable=%lld from_segment=%lld "
		    "from_offset=%lld", r.records, r.unreadable, (long long)seg, (long long)off);
	return 0;
}

struct ingest *
ingest_create(struct engine *e)
{
	struct ingest	*in = xcalloc(1, sizeof *in);
	char		*cause = NULL;
	int		 fresh;

	in->engine = e;
	in->done_ev = event_new(e->base, -1, 0, ingest_written_cb, in);
	in->queued = store_count_runs(e->store, RUN_QUEUED);
	if (in->queued < 0)
		in->queued = 0;
	in->counted_at = now_ms();
	if ((in->wstore = store_open_url(e->conf->store_url, e->conf->data_dir, 0, &cause)) ==
	    NULL)
		fatal("cannot open the store for the writer: %s", cause);
	in->done_tail = &in->done;
	/* sqlite's payload log; on PostgreSQL a payload is in its row, for every node. */
	if (store_payload_dir(in->wstore) != NULL) {
		fresh = ingest_replay(in);
		if ((in->plog = plog_open(store_payload_dir(in->wstore), fresh, &cause)) == NULL)
			fatal("cannot open the payload log: %s", cause);
		/* The loop's commits too: a checkpoint's syncs must not hold it either. */
		if ((in->ckpt = checkpointer_start(e->conf->data_dir, &cause)) != NULL) {
			store_checkpoint_elsewhere(in->wstore, checkpointer_kick, in->ckpt);
			store_checkpoint_elsewhere(e->store, checkpointer_kick, in->ckpt);
		} else {
			log_warn("event=ingest.checkpointer_failed error=%s consequence=\"the "
			    "writer checkpoints\"", log_q(cause));
			free(cause);
		}
	}
	if (in->done != NULL)
		event_active(in->done_ev, 0, 0);
	pthread_mutex_init(&in->mu, NULL);
	pthread_cond_init(&in->work, NULL);
	pthread_cond_init(&in->idle, NULL);
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
	free(it->rec);
	free(it->why);
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
	if (in->ckpt != NULL)
		store_checkpoint_elsewhere(in->engine->store, NULL, NULL);
	checkpointer_stop(in->ckpt);
	free(in->discards);
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
 * The record the writer will append to the payload log, made here on the
 * caller's thread. Not for a delivery anyone may send that starts nothing
 * (its event row alone is kept), nor for one too large to be a record: the
 * commit of its batch syncs the store itself.
 */
static void
ingest_record(struct ingest *in, struct ingest_item *it)
{
	if (in->plog == NULL || (it->event->unsigned_body && it->nruns == 0))
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
	n = it->command != THREAD_CMD_NONE ? 0 : automation_match_why(set, ev, matches,
	    INGEST_MAX_MATCHES, &it->why);
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
			    "delivery=%s thread=%s runs=%zu%s%s", log_q(ev->org), ev->source,
			    log_q(ev->type), ev->id, log_q(ev->delivery), log_q(ev->thread),
			    it->nruns, it->why != NULL ? " why=" : "", it->why != NULL ?
			    log_q(it->why) : "");
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
