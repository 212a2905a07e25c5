/* store-item.c: an ingest item made by hand (store-item.h). */
#include "spur.h"
#include "event.h"
#include "store.h"
#include "store-item.h"

#include <stdlib.h>

struct ingest_item *
store_item_new(struct spur_event *ev, const char *const *ids, const char *const *autos,
    size_t nruns, const char *ack)
{
	struct ingest_item	*it = xcalloc(1, sizeof *it);
	size_t			 i;

	it->event = ev;
	it->nruns = nruns;
	it->runs = xcalloc(nruns + 1, sizeof *it->runs);
	for (i = 0; i < nruns; i++) {
		it->runs[i].id = xstrdup(ids[i]);
		it->runs[i].automation = xstrdup(autos[i]);
		it->runs[i].prompt = xprintf("the prompt of %s", ids[i]);
		it->runs[i].automation_json = xprintf("{\"name\":\"%s\"}", autos[i]);
	}
	if (ack != NULL) {
		it->ack_target = xstrdup(ack);
		it->ack_body = xstrdup("eyes");
	}
	return it;
}

void
store_item_free(struct ingest_item *it)
{
	size_t	 i;

	for (i = 0; i < it->nruns; i++) {
		free(it->runs[i].id);
		free(it->runs[i].automation);
		free(it->runs[i].prompt);
		free(it->runs[i].automation_json);
	}
	free(it->runs);
	free(it->ack_target);
	free(it->ack_body);
	spur_event_free(it->event);
	free(it);
}
