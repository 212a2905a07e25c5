/* ingest.h: from a verified event to its committed event and runs (group commit). */
#ifndef SPUR_INGEST_H
#define SPUR_INGEST_H

#include <jansson.h>

struct engine;
struct spur_event;

enum ingest_status { INGEST_NEW, INGEST_DUPLICATE, INGEST_UNAVAILABLE, INGEST_QUEUE_FULL };

/* Called once the event is committed (or could not be): runs is a list of run ids. */
typedef void (*ingest_done_cb)(enum ingest_status, const struct spur_event *, json_t *runs,
    void *);

struct ingest	*ingest_create(struct engine *);
void		 ingest_free(struct ingest *);
/* Matches ev, prepares its runs and queues it for the next commit; takes ev. */
void		 ingest_submit(struct ingest *, struct spur_event *, ingest_done_cb, void *);
/* Forgets the callback of a pending submission (its client went away). */
void		 ingest_cancel(struct ingest *, void *);
/* Commits what is pending now (called at shutdown). */
void		 ingest_flush(struct ingest *);
long long	 ingest_queued(const struct ingest *);

#endif
