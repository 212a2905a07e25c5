/* checkpoint.h: the sqlite store's WAL copied into the database on a thread of its own. */
#ifndef SPUR_CHECKPOINT_H
#define SPUR_CHECKPOINT_H

struct checkpointer;

/*
 * A thread with its own connection to the sqlite store in data_dir that
 * checkpoints when kicked: the syncs a checkpoint makes (the WAL's, then the
 * database's) are off the ingest writer, whose commits need not sync
 * (store_ingest's lazy). NULL with cause.
 */
struct checkpointer	*checkpointer_start(const char *data_dir, char **cause);
/* Any thread: the WAL has grown (store_checkpoint_elsewhere's kick). */
void			 checkpointer_kick(void *);
/* One last checkpoint, then the thread ends. */
void			 checkpointer_stop(struct checkpointer *);

#endif
