/* store-item.h: an ingest item (store.h) made by hand, for the programs that drive the store (tests/store-*.c). */
#ifndef SPUR_TESTS_STORE_ITEM_H
#define SPUR_TESTS_STORE_ITEM_H

#include <stddef.h>

struct ingest_item;
struct spur_event;

/*
 * An item for ev (which it takes) with nruns runs, run i's id ids[i] and
 * automation autos[i], each with a prompt and its automation's snapshot; ack:
 * the reaction's target (JSON text), NULL: none.
 */
struct ingest_item	*store_item_new(struct spur_event *ev, const char *const *ids,
			    const char *const *autos, size_t nruns, const char *ack);
void			 store_item_free(struct ingest_item *);

#endif
