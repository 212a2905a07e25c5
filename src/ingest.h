/* ingest.h: from a verified event to its committed event and runs (group commit). */
#ifndef SPUR_INGEST_H
#define SPUR_INGEST_H

#include <jansson.h>
#include <stddef.h>

struct automation;
struct automation_set;
struct engine;
struct ingest_item;
struct report_mark;
struct spur_event;

enum ingest_status { INGEST_NEW, INGEST_DUPLICATE, INGEST_UNAVAILABLE, INGEST_QUEUE_FULL };

/* Called once the event is committed (or could not be): runs is a list of run ids. */
typedef void (*ingest_done_cb)(enum ingest_status, const struct spur_event *, json_t *runs,
    void *);

struct ingest	*ingest_create(struct engine *);
void		 ingest_free(struct ingest *);
/*
 * Any thread: matches ev against the automations, prepares the runs it starts
 * (prompt included) and the reaction that acknowledges it, and appends its
 * payload to the payload log; takes ev.
 */
struct ingest_item *ingest_prepare(struct ingest *, const struct automation_set *,
		     struct spur_event *);
/*
 * Any thread: the same for an event that names its one run (the org API's
 * sessions): automation a, prompt as given; takes ev.
 */
struct ingest_item *ingest_prepare_run(struct ingest *, struct spur_event *,
		     const struct automation *, const char *prompt);
void		 ingest_item_free(struct ingest_item *);
/*
 * Any thread: queues a prepared event for the next commit, or answers at once
 * (queue full); takes it. cb runs on the loop, or in this call.
 */
void		 ingest_submit(struct ingest *, struct ingest_item *, ingest_done_cb, void *);
/* Forgets the callback of a pending submission (its client went away). */
void		 ingest_cancel(struct ingest *, void *);
/* Commits what is pending now (called at shutdown). */
void		 ingest_flush(struct ingest *);

/* ingest-rec.c: an item's payload log record (ingest_item.rec), made where it is prepared. */
void		 ingest_rec_make(struct ingest_item *);
/* The item a record's meta describes (its payload stays in the log); NULL with cause. */
struct ingest_item *ingest_rec_read(const unsigned char *meta, size_t metalen, char **cause);

#endif
