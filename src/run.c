/* run.c: the one owner of a run's life: every change of a run's state goes through here. */
#include "spur.h"
#include "automation.h"
#include "report.h"
#include "run.h"
#include "scrub.h"
#include "serve.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

/* The state change; requeued names the run that continues this one, if any. */
static int
run_set_state_(struct engine *e, const char *run, enum run_state to, enum run_cause why,
    const char *reason, const char *requeued)
{
	char		*cause = NULL, *safe = scrub_for_engine(e, reason);
	json_t		*none;
	int		 terminal = run_state_terminal(to);

	if (!terminal)
		why = CAUSE_NONE;
	else if (why == CAUSE_NONE)
		fatal("run %s: the terminal state %s without a cause", run, run_state_name(to));
	/*
	 * An end and its report row are one commit: a crash between two commits
	 * left an ended run that no one would ever tell its thread about.
	 */
	store_tx_begin(e->store, NULL);
	if (store_run_set_state(e->store, run, to, why, safe, &cause) != 0) {
		store_tx_commit(e->store, NULL);
		log_warn("event=run.state_refused run=%s state=%s error=%s", run,
		    run_state_name(to), log_q(cause));
		free(cause);
		free(safe);
		return -1;
	}
	log_info("event=run.state run=%s state=%s cause=%s reason=%s", run, run_state_name(to),
	    why != CAUSE_NONE ? run_cause_name(why) : "-", log_q(safe));
	free(safe);
	if (!terminal) {
		store_tx_commit(e->store, NULL);
		return 0;
	}
	if (requeued != NULL) {
		/* Its continuation reports for both: the thread is told once. */
		none = json_object();
		store_report_note(e->store, run, "run_end", none, "none", requeued);
		json_decref(none);
	} else
		report_run_end(e, run);
	if (store_tx_commit(e->store, &cause) != 0) {
		log_error("event=run.state_commit_failed run=%s error=%s", run, log_q(cause));
		free(cause);
		return -1;
	}
	wake(e, WAKE_DISPATCH);
	return 0;
}

int
run_set_state(struct engine *e, const char *run, enum run_state to, enum run_cause why,
    const char *reason)
{
	return run_set_state_(e, run, to, why, reason, NULL);
}

void
run_set_phase(struct engine *e, const char *run, enum run_phase phase)
{
	static const char	*what[RUN_NPHASES] = {
		NULL, "cloning the repository", "the environment's setup is running",
		"the agent is working",
		"delivering: commit, push, pull request"
	};

	if (phase == PHASE_NONE || phase >= RUN_NPHASES)
		return;
	if (store_run_set_phase(e->store, run, phase, what[phase]) != 0)
		log_warn("event=run.phase_failed run=%s phase=%s", run, run_phase_name(phase));
	else
		log_debug("event=run.phase run=%s phase=%s", run, run_phase_name(phase));
}

void
run_interrupt(struct engine *e, const char *run, const char *reason)
{
	struct automation	*a = NULL;
	struct run_row		*j;
	char			*id = NULL, *cause = NULL, *why, *note = NULL;
	int			 rc;

	/*
	 * Its end and its continuation are one commit, taken once: another node
	 * that finds it so (a dead node's reaper, or the node itself stopping)
	 * waits for this one, then finds it ended.
	 */
	store_tx_begin(e->store, NULL);
	if ((rc = store_run_lock(e->store, run)) != 1) {
		store_tx_rollback(e->store);
		/*
		 * A store it cannot reach (a fenced node's, say) leaves the run as it
		 * is: running, for the node that reaps this one to end.
		 */
		if (rc < 0)
			log_warn("event=run.not_interrupted run=%s why=\"the store is "
			    "unavailable\"", run);
		else
			log_info("event=run.not_interrupted run=%s why=\"ended already\"", run);
		return;
	}
	if ((j = store_run_get(e->store, run, 0)) != NULL)
		a = automation_from_text(j->automation_json);
	if (a != NULL && !a->retry_never) {
		if ((id = store_run_retry(e->store, run, 1, &cause)) == NULL) {
			log_info("event=run.not_requeued run=%s why=%s", run, log_q(cause));
			free(cause);
		}
	}
	why = id != NULL ? xprintf("%s; queued again as %s", reason, id) : xstrdup(reason);
	if (id != NULL) {
		note = xprintf("queued again as %s, which reports for both", id);
		log_info("event=run.requeued run=%s as=%s", run, id);
	}
	run_set_state_(e, run, RUN_FAILED, CAUSE_INTERRUPTED, why, note);
	if (store_tx_commit(e->store, &cause) != 0) {
		log_error("event=run.interrupt_failed run=%s error=%s", run, log_q(cause));
		free(cause);
	}
	free(why);
	free(note);
	free(id);
	automation_free(a);
	run_row_free(j);
}

int
run_request_cancel(struct engine *e, const char *run, const char *reason)
{
	enum run_state	 st;

	if (store_run_get_state(e->store, run, &st) != 0)
		return -1;
	if (run_state_terminal(st))
		return 1;
	if (store_run_request_cancel(e->store, run, reason) != 0)
		return -1;
	log_info("event=run.cancel_requested run=%s reason=%s", run, log_q(reason));
	wake(e, WAKE_CANCELS);
	return 0;
}

char *
run_retry(struct engine *e, const char *run, const char *who, char **cause)
{
	enum run_state	 st;
	char		*id;

	if (store_run_get_state(e->store, run, &st) != 0) {
		xasprintf(cause, "no such run %s", run);
		return NULL;
	}
	if (!run_state_terminal(st)) {
		xasprintf(cause, "%s has not ended (%s)", run, run_state_name(st));
		return NULL;
	}
	if ((id = store_run_retry(e->store, run, 0, cause)) == NULL)
		return NULL;
	log_info("event=run.queued run=%s retry_of=%s by=%s", id, run, log_q(who));
	wake(e, WAKE_DISPATCH);
	return id;
}
