/* checkpoint.c: the sqlite store's WAL checkpoints, off the ingest writer's path. */
#include "spur.h"
#include "checkpoint.h"
#include "store.h"

#include <pthread.h>
#include <stdlib.h>

struct checkpointer {
	struct store	*store;
	pthread_t	 thread;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cond;
	int		 kicked;
	int		 stop;
};

static void *
checkpointer_main(void *arg)
{
	struct checkpointer	*c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		if (!c->kicked) {
			pthread_cond_wait(&c->cond, &c->mu);
			continue;
		}
		c->kicked = 0;
		pthread_mutex_unlock(&c->mu);
		/* Passive: a reader or the writer in the way is passed by, not waited for. */
		store_checkpoint(c->store);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	store_checkpoint(c->store);
	return NULL;
}

struct checkpointer *
checkpointer_start(const char *data_dir, char **cause)
{
	struct checkpointer	*c = xcalloc(1, sizeof *c);

	if ((c->store = store_open(data_dir, 0, cause)) == NULL) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cond, NULL);
	if (pthread_create(&c->thread, NULL, checkpointer_main, c) != 0)
		fatal("cannot start the checkpoint thread");
	return c;
}

void
checkpointer_kick(void *arg)
{
	struct checkpointer	*c = arg;

	pthread_mutex_lock(&c->mu);
	if (!c->kicked) {
		c->kicked = 1;
		pthread_cond_signal(&c->cond);
	}
	pthread_mutex_unlock(&c->mu);
}

void
checkpointer_stop(struct checkpointer *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cond);
	store_close(c->store);
	free(c);
}
