/* run.h: the one owner of a run's life: every change of a run's state goes through run.c. */
#ifndef SPUR_RUN_H
#define SPUR_RUN_H

#include "store.h"

struct engine;

/*
 * Moves a run to a state (memcached's conn_set_state): the store checks the
 * transition in the transaction that writes it, with the time, the cause (for
 * a terminal state; CAUSE_NONE otherwise) and the reason, secrets cut out of
 * it. Logged; on a terminal state the thread's report is queued and dispatch
 * looks at the queue again. -1 when the transition is refused (logged).
 */
int		 run_set_state(struct engine *, const char *run, enum run_state,
		     enum run_cause, const char *reason);
/* A running run's phase: cloning, agent, delivering (stored, in its history). */
void		 run_set_phase(struct engine *, const char *run, enum run_phase);
/*
 * Ends a run a stop or a crash interrupted (failed, cause interrupted). Unless
 * its automation says retry: never, or it is itself such a retry, a new run
 * of the same event and automation is queued (it joins the same session),
 * linked to it, and only that one's end is reported: the thread is told once.
 */
void		 run_interrupt(struct engine *, const char *run, const char *reason);
/*
 * Asks for a live run's end, cancelled with reason: stored, then applied by
 * dispatch (a queued run ends at once, a running one when its sandbox is
 * gone). 0: asked; 1: the run had already ended; -1: no such run or the store
 * failed.
 */
int		 run_request_cancel(struct engine *, const char *run, const char *reason);
/*
 * A new run of an ended run's event and automation, queued (who: for the log);
 * its id, or NULL with cause (not ended, no such run, the store).
 */
char		*run_retry(struct engine *, const char *run, const char *who, char **cause);

#endif
