/* dispatch.c: takes queued runs from the store and starts them within the node's limits. */
#include "spur.h"
#include "dispatch.h"
#include "serve.h"
#include "store.h"

#include <stdlib.h>

struct dispatch {
	struct engine	*engine;
	int		 running;
};

/* A run that was running when the engine died ends failed, reason interrupted. */
static void
dispatch_recover(struct dispatch *d)
{
	json_t		*ids = store_runs_in_state(d->engine->store, RUN_RUNNING), *id;
	size_t		 i;
	char		*cause;

	json_array_foreach(ids, i, id) {
		if (store_run_set_state(d->engine->store, json_string_value(id), RUN_FAILED,
		    "interrupted", &cause) != 0) {
			log_error("event=run.recover_failed run=%s error=%s",
			    json_string_value(id), log_q(cause));
			free(cause);
			continue;
		}
		log_warn("event=run.interrupted run=%s state=failed reason=interrupted",
		    json_string_value(id));
	}
	json_decref(ids);
}

struct dispatch *
dispatch_create(struct engine *e, char **cause)
{
	struct dispatch	*d = xcalloc(1, sizeof *d);

	d->engine = e;
	dispatch_recover(d);
	return d;
}

void
dispatch_free(struct dispatch *d)
{
	free(d);
}

void
dispatch_kick(struct dispatch *d)
{
}

int
dispatch_cancel(struct dispatch *d, const char *run, const char *reason)
{
	return -1;
}

int
dispatch_running(const struct dispatch *d)
{
	return d->running;
}

void
dispatch_shutdown(struct dispatch *d)
{
}
