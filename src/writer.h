/* writer.h: the store's one writer thread: typed jobs committed in groups, completions on the loop. */
#ifndef SPUR_WRITER_H
#define SPUR_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct ingest_item;
struct report_mark;
struct store;
struct writer;

/* Loop: a delivery's commit is done (rc 0) or failed; the item is the callback's to free. */
typedef void	(*writer_delivered_cb)(int rc, struct ingest_item *, void *arg);
/* Loop: a report mark went with a commit, done or not (the report may be looked at again). */
typedef void	(*writer_marked_cb)(int64_t id, void *arg);
/*
 * Loop: a commit's deliveries had their callbacks, its marks have theirs next;
 * seconds is how long the commit took (the log's sync and the store's), -1
 * for a start's replay.
 */
typedef void	(*writer_batch_cb)(int rc, double seconds, void *arg);

/*
 * Loop, at the start: opens the writer's own store connection (url, data_dir)
 * and, on sqlite, the payload log: the records the store had not applied are
 * applied first, each handed to replayed(rc, item, arg) on the loop like any
 * delivery. batch_done(rc, seconds, arg) runs after each commit's deliveries. loop_store
 * is the loop's connection, whose checkpoints go to the same thread as the
 * writer's. Fatal when the store or the log cannot be opened.
 */
struct writer	*writer_create(struct event_base *, struct store *loop_store, const char *url,
		     const char *data_dir, writer_delivered_cb replayed,
		     writer_batch_cb batch_done, void *arg);
/* Loop: commits what is pending, answers it, and stops the thread. */
void		 writer_free(struct writer *);
/*
 * Loop: no commit of the writer's waits for the store past at (ms, the
 * node's lease: store_horizon); 0: none. A node cut off from PostgreSQL
 * stops within its lease, not after the writer's connection gives up.
 */
void		 writer_horizon(struct writer *, int64_t at);
/* Any thread: whether deliveries get a payload log record (sqlite), or their payload is in the row. */
int		 writer_logs(const struct writer *);
/* Any thread: queues a delivery for the next commit; takes it; cb(arg) on the loop. */
void		 writer_deliver(struct writer *, struct ingest_item *, writer_delivered_cb, void *);
/* Any thread: queues a report mark (copied) for the next commit; cb(id, arg) on the loop after. */
void		 writer_mark(struct writer *, const struct report_mark *, writer_marked_cb, void *);
/* Loop: commits what is pending now and runs the completions, until nothing is left. */
void		 writer_flush(struct writer *);

#endif
