/* writer.c: the store's one writer thread: typed jobs, group commits, completions on the loop. */
#include "spur.h"
#include "checkpoint.h"
#include "event.h"
#include "ingest.h"
#include "plog.h"
#include "store.h"
#include "writer.h"

#include <sys/uio.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WRITER_MAX_BATCH	512

/* What a commit carries, each type with its completion (redis's bio.c: a queue of typed jobs). */
enum writer_op { WRITER_DELIVERY, WRITER_MARK };

struct writer_job {
	enum writer_op		 op;
	struct ingest_item	*item;		/* DELIVERY: the event and its runs */
	writer_delivered_cb	 delivered;
	struct report_mark	 mark;		/* MARK: its strings are the job's */
	writer_marked_cb	 marked;
	void			*arg;
};

/* The jobs of one commit, from the writer's taking them to the loop's completing them. */
struct writer_batch {
	struct writer_job	*jobs;		/* the deliveries, in the order they came */
	struct ingest_item	**items;	/* their items, as store_ingest takes them */
	size_t			 n;
	struct writer_job	*marks;
	struct report_mark	*markv;		/* their marks, as store_ingest takes them */
	size_t			 nmarks;
	int64_t			 log_seg;	/* its records end at (log_seg, log_end); 0: none */
	int64_t			 log_end;
	double			 seconds;	/* the commit's time; -1: a start's replay */
	int			 lazy;		/* committed without a sync of the store */
	int			 rc;
	char			*cause;
	struct writer_batch	*next;
};

/*
 * The writer has its own store connection. It takes everything pending as one
 * batch (group commit), appends its records to the payload log and syncs them
 * (the one fsync a 200 waits for), applies their rows to the store in a commit
 * that need not sync (the records are the durable copy: a start applies the
 * ones the store lost, writer_replay), hands the batch to the loop to be
 * completed, and takes the next batch at once: what arrived meanwhile waits
 * for no other thread. The store's own syncs happen at its checkpoints, on a
 * thread of their own (checkpoint.c).
 */
struct writer {
	struct event		*done_ev;	/* writer -> loop: batches are committed */
	struct store		*loop_store;
	writer_delivered_cb	 replayed;
	writer_batch_cb		 batch_done;
	void			*arg;

	struct store		*store;
	struct plog		*plog;		/* the writer appends and syncs; NULL: none (PostgreSQL) */
	struct checkpointer	*ckpt;
	struct plog_at		*discards;	/* repeated deliveries' records, waiting for a synced commit */
	size_t			 ndiscards;
	size_t			 capdiscards;
	int64_t			 applied_seg;	/* the writer's: the last record applied ends here */
	int64_t			 applied_end;

	pthread_t		 thread;
	pthread_mutex_t		 mu;
	pthread_cond_t		 work;		/* to the writer: something is pending, or stop */
	pthread_cond_t		 idle;		/* from the writer: a batch is done */
	struct writer_job	*pending;	/* deliveries */
	size_t			 npending;
	size_t			 cap;
	struct writer_job	*marks;
	size_t			 nmarks;
	size_t			 capmarks;
	int			 writing;	/* a batch is between taken and done */
	struct writer_batch	*done;		/* committed (or not), for the loop to complete */
	struct writer_batch	**done_tail;
	int			 stop;
};

static void	writer_done_cb(evutil_socket_t, short, void *);

/* Writer, after a synced commit: the repeated deliveries' records it or an earlier one found go. */
static void
writer_discard(struct writer *w)
{
	plog_discard(store_payload_dir(w->store), w->discards, w->ndiscards);
	w->ndiscards = 0;
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
writer_committed(struct writer *w, struct writer_batch *b)
{
	struct ingest_item	**items = b->items;
	struct plog_at		*d;
	size_t			 i, n = b->n;

	for (i = 0; i < n; i++) {
		if (b->rc == 0 && items[i]->duplicate && items[i]->rec_seg > 0) {
			if (w->ndiscards == w->capdiscards) {
				w->capdiscards = w->capdiscards ? w->capdiscards * 2 : 16;
				w->discards = xreallocarray(w->discards, w->capdiscards,
				    sizeof *w->discards);
			}
			d = &w->discards[w->ndiscards++];
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
		w->applied_seg = b->log_seg;
		w->applied_end = b->log_end;
	}
	if (b->rc == 0 && !b->lazy)
		writer_discard(w);
}

/*
 * Writer, with nothing to commit but repeated deliveries' payloads to give
 * back: one synced commit (of where the log was applied, unchanged) makes
 * the rows that say they are repeated durable, then their space goes.
 */
static void
writer_settle(struct writer *w)
{
	char	*cause = NULL;

	if (store_ingest(w->store, NULL, 0, NULL, 0, w->applied_seg, w->applied_end, 0,
	    &cause) != 0) {
		log_warn("event=ingest.settle_failed error=%s consequence=\"repeated "
		    "payloads keep their space\"", log_q(cause));
		free(cause);
		w->ndiscards = 0;
		return;
	}
	writer_discard(w);
}

/*
 * Writer: the batch's records go to the payload log in one write and one
 * sync. If the log cannot take them, the batch is committed as before there
 * was one: payloads in their rows, the commit synced.
 */
static void
writer_log_batch(struct writer *w, struct writer_batch *b)
{
	struct ingest_item	*it;
	struct iovec		*iov;
	int64_t			 seg, off, pos;
	size_t			 i;
	int			 n = 0, unlogged = 0;
	char			*cause = NULL;

	b->log_seg = 0;
	if (w->plog == NULL) {
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
	if (n > 0 && (plog_write(w->plog, iov, n, &seg, &off, &cause) != 0 ||
	    plog_sync(w->plog, &cause) != 0)) {
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
	b->lazy = !unlogged && w->ndiscards == 0;
}

static struct writer_batch *
writer_batch_new(size_t n)
{
	struct writer_batch	*b = xcalloc(1, sizeof *b);

	b->jobs = xcalloc(n > 0 ? n : 1, sizeof *b->jobs);
	b->items = xcalloc(n > 0 ? n : 1, sizeof *b->items);
	return b;
}

/* Writer, with mu held: what is pending becomes a batch (at most WRITER_MAX_BATCH deliveries). */
static struct writer_batch *
writer_take_pending(struct writer *w)
{
	struct writer_batch	*b;
	size_t			 n, i;

	n = w->npending < WRITER_MAX_BATCH ? w->npending : WRITER_MAX_BATCH;
	b = writer_batch_new(n);
	b->marks = w->marks;
	b->nmarks = w->nmarks;
	w->marks = NULL;
	w->nmarks = w->capmarks = 0;
	if (n > 0) {
		memcpy(b->jobs, w->pending, n * sizeof *b->jobs);
		memmove(w->pending, w->pending + n, (w->npending - n) * sizeof *w->pending);
		w->npending -= n;
	}
	for (i = 0; i < n; i++)
		b->items[i] = b->jobs[i].item;
	b->n = n;
	b->markv = xcalloc(b->nmarks > 0 ? b->nmarks : 1, sizeof *b->markv);
	for (i = 0; i < b->nmarks; i++)
		b->markv[i] = b->marks[i].mark;
	return b;
}

/* Writer: the batch is the loop's now. */
static void
writer_post(struct writer *w, struct writer_batch *b)
{
	*w->done_tail = b;
	w->done_tail = &b->next;
}

static void *
writer_main(void *arg)
{
	struct writer		*w = arg;
	struct writer_batch	*b;
	int64_t			 t0;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && w->npending == 0 && w->nmarks == 0) {
			if (w->ndiscards > 0) {
				pthread_mutex_unlock(&w->mu);
				writer_settle(w);
				pthread_mutex_lock(&w->mu);
				continue;
			}
			pthread_cond_wait(&w->work, &w->mu);
		}
		if (w->stop)
			break;
		b = writer_take_pending(w);
		w->writing = 1;
		pthread_mutex_unlock(&w->mu);
		t0 = now_ms();
		writer_log_batch(w, b);
		b->rc = store_ingest(w->store, b->items, b->n, b->markv, b->nmarks,
		    b->log_seg, b->log_end, b->lazy, &b->cause);
		b->seconds = (now_ms() - t0) / 1000.0;
		writer_committed(w, b);
		pthread_mutex_lock(&w->mu);
		w->writing = 0;
		writer_post(w, b);
		pthread_cond_broadcast(&w->idle);
		event_active(w->done_ev, 0, 0);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* A start's batch of records the store had not applied, on its way to the store and the loop. */
struct replay {
	struct writer		*w;
	struct writer_batch	*b;
	long long		 records;
	long long		 unreadable;
};

/* Start: applies a batch of records (synced: a crash now would start over) and queues it for the loop. */
static void
writer_replay_commit(struct replay *r)
{
	struct writer		*w = r->w;
	struct writer_batch	*b = r->b;

	if (b == NULL)
		return;
	r->b = NULL;
	b->rc = store_ingest(w->store, b->items, b->n, NULL, 0, b->log_seg, b->log_end, 0,
	    &b->cause);
	b->seconds = -1;
	if (b->rc != 0)
		fatal("cannot apply the payload log's records to the store: %s", b->cause);
	writer_committed(w, b);
	/* Answered by no one, but logged, reported and acted on (thread commands) like any. */
	writer_post(w, b);
}

static int
writer_replay_record(int64_t seg, int64_t off, int64_t end, const unsigned char *meta,
    size_t metalen, const unsigned char *payload, size_t paylen, void *arg)
{
	struct replay		*r = arg;
	struct ingest_item	*it;
	struct writer_batch	*b;
	struct writer_job	*j;
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
	if ((b = r->b) == NULL)
		b = r->b = writer_batch_new(WRITER_MAX_BATCH);
	j = &b->jobs[b->n];
	j->op = WRITER_DELIVERY;
	j->item = it;
	j->delivered = r->w->replayed;
	j->arg = r->w->arg;
	b->items[b->n++] = it;
	b->log_seg = seg;
	b->log_end = end;
	if (b->n == WRITER_MAX_BATCH)
		writer_replay_commit(r);
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
writer_replay(struct writer *w)
{
	struct replay		 r = { w, NULL, 0, 0 };
	struct plog_scan	 sc;
	int64_t			 seg, off;
	char			*cause = NULL;
	int			 rc;

	if ((rc = store_log_applied(w->store, &seg, &off, &cause)) < 0)
		fatal("cannot read where the payload log was applied: %s", cause);
	/*
	 * Nothing ever applied: a new store, or one whose log is payloads only.
	 * Nothing in the log was answered, and what is there is not read (a store
	 * made anew beside an old log must not take its events back): appends
	 * start a new segment.
	 */
	if (rc == 1)
		return 1;
	if (plog_scan(store_payload_dir(w->store), seg, off, writer_replay_record, &r, &sc,
	    &cause) != 0)
		fatal("cannot read the payload log: %s", cause);
	writer_replay_commit(&r);
	if (sc.cut_segments > 0)
		log_warn("event=ingest.log_cut segments=%d bytes=%lld consequence=\"a torn "
		    "tail of the payload log, never answered, was cut off\"", sc.cut_segments,
		    (long long)sc.cut_bytes);
	if (r.records > 0 || r.unreadable > 0)
		log_info("event=ingest.replayed records=%lld unreadable=%lld from_segment=%lld "
		    "from_offset=%lld", r.records, r.unreadable, (long long)seg, (long long)off);
	return 0;
}

struct writer *
writer_create(struct event_base *base, struct store *loop_store, const char *url,
    const char *data_dir, writer_delivered_cb replayed,
    writer_batch_cb batch_done, void *arg)
{
	struct writer	*w = xcalloc(1, sizeof *w);
	char		*cause = NULL;
	int		 fresh;

	w->done_ev = event_new(base, -1, 0, writer_done_cb, w);
	w->loop_store = loop_store;
	w->replayed = replayed;
	w->batch_done = batch_done;
	w->arg = arg;
	if ((w->store = store_open_url(url, data_dir, 0, &cause)) == NULL)
		fatal("cannot open the store for the writer: %s", cause);
	w->done_tail = &w->done;
	/* sqlite's payload log; on PostgreSQL a payload is in its row, for every node. */
	if (store_payload_dir(w->store) != NULL) {
		fresh = writer_replay(w);
		if ((w->plog = plog_open(store_payload_dir(w->store), fresh, &cause)) == NULL)
			fatal("cannot open the payload log: %s", cause);
		/* The loop's commits too: a checkpoint's syncs must not hold it either. */
		if ((w->ckpt = checkpointer_start(data_dir, &cause)) != NULL) {
			store_checkpoint_elsewhere(w->store, checkpointer_kick, w->ckpt);
			store_checkpoint_elsewhere(loop_store, checkpointer_kick, w->ckpt);
		} else {
			log_warn("event=ingest.checkpointer_failed error=%s consequence=\"the "
			    "writer checkpoints\"", log_q(cause));
			free(cause);
		}
	}
	if (w->done != NULL)
		event_active(w->done_ev, 0, 0);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->idle, NULL);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
		fatal("cannot start the writer thread");
	return w;
}

void
writer_free(struct writer *w)
{
	if (w == NULL)
		return;
	writer_flush(w);
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	if (w->ckpt != NULL)
		store_checkpoint_elsewhere(w->loop_store, NULL, NULL);
	checkpointer_stop(w->ckpt);
	free(w->discards);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->idle);
	store_close(w->store);
	plog_close(w->plog);
	event_free(w->done_ev);
	free(w->pending);
	free(w->marks);
	free(w);
}

void
writer_horizon(struct writer *w, int64_t at)
{
	/* The writer's thread reads it as it waits (store-pg.c keeps it atomic). */
	if (w != NULL)
		store_horizon(w->store, at);
}

int
writer_logs(const struct writer *w)
{
	return w->plog != NULL;
}

void
writer_deliver(struct writer *w, struct ingest_item *it, writer_delivered_cb cb, void *arg)
{
	struct writer_job	*j;

	pthread_mutex_lock(&w->mu);
	if (w->npending == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->pending = xreallocarray(w->pending, w->cap, sizeof *w->pending);
	}
	j = &w->pending[w->npending++];
	memset(j, 0, sizeof *j);
	j->op = WRITER_DELIVERY;
	j->item = it;
	j->delivered = cb;
	j->arg = arg;
	if (w->npending == 1)
		pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
}

void
writer_mark(struct writer *w, const struct report_mark *m, writer_marked_cb cb, void *arg)
{
	struct writer_job	*j;

	pthread_mutex_lock(&w->mu);
	if (w->nmarks == w->capmarks) {
		w->capmarks = w->capmarks ? w->capmarks * 2 : 64;
		w->marks = xreallocarray(w->marks, w->capmarks, sizeof *w->marks);
	}
	j = &w->marks[w->nmarks];
	memset(j, 0, sizeof *j);
	j->op = WRITER_MARK;
	j->mark = *m;
	j->mark.error = m->error != NULL ? xstrdup(m->error) : NULL;
	j->mark.status_id = m->status_id != NULL ? xstrdup(m->status_id) : NULL;
	j->marked = cb;
	j->arg = arg;
	if (++w->nmarks == 1 && w->npending == 0)
		pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
}

/* Loop: a batch's completions, the deliveries' in order, the commit's, then the marks'. */
static void
writer_complete(struct writer *w, struct writer_batch *b)
{
	size_t	 i;

	if (b->rc != 0)
		log_error("event=ingest.commit_failed deliveries=%zu error=%s", b->n,
		    log_q(b->cause));
	for (i = 0; i < b->n; i++)
		b->jobs[i].delivered(b->rc, b->items[i], b->jobs[i].arg);
	w->batch_done(b->rc, b->seconds, w->arg);
	for (i = 0; i < b->nmarks; i++) {
		b->marks[i].marked(b->marks[i].mark.id, b->marks[i].arg);
		free(b->marks[i].mark.error);
		free(b->marks[i].mark.status_id);
	}
	free(b->cause);
	free(b->marks);
	free(b->markv);
	free(b->items);
	free(b->jobs);
	free(b);
}

/* Loop: the batches the writer is done with, oldest first, completed. */
static void
writer_complete_done(struct writer *w)
{
	struct writer_batch	*b, *next;

	pthread_mutex_lock(&w->mu);
	b = w->done;
	w->done = NULL;
	w->done_tail = &w->done;
	pthread_mutex_unlock(&w->mu);
	for (; b != NULL; b = next) {
		next = b->next;
		writer_complete(w, b);
	}
}

static void
writer_done_cb(evutil_socket_t fd, short what, void *arg)
{
	writer_complete_done(arg);
}

void
writer_flush(struct writer *w)
{
	int	 idle;

	for (;;) {
		pthread_mutex_lock(&w->mu);
		while (w->writing || w->npending > 0 || w->nmarks > 0)
			pthread_cond_wait(&w->idle, &w->mu);
		idle = w->done == NULL;
		pthread_mutex_unlock(&w->mu);
		if (idle)
			return;
		/* Completing may queue more (an outbox mark): round again until nothing is left. */
		writer_complete_done(w);
	}
}
