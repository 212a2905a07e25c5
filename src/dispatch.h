/* dispatch.h: takes queued runs from the store and starts them within the limits. */
#ifndef SPUR_DISPATCH_H
#define SPUR_DISPATCH_H

struct engine;
struct dispatch;

/* nodes.affinity by default: a follow-up waits this long for the live node that holds its session. */
#define DISPATCH_AFFINITY_MS	10000
/* Several nodes: a running run's new output goes to the store this often (nodes.output_flush). */
#define DISPATCH_OUTPUT_MS	1000
/* ... and at once when this much waits. */
#define DISPATCH_OUTPUT_CHUNK	(64 * 1024)
/* nodes.message_wait by default: a message's answer waits this long for another node's live run. */
#define DISPATCH_MESSAGE_MS	3000

struct dispatch	*dispatch_create(struct engine *, char **cause);
void		 dispatch_free(struct dispatch *);
/* Something changed (new runs, a run ended, a reload): look at the queue again. */
void		 dispatch_kick(struct dispatch *);
/*
 * A message's fate (SPEC 18): live, the run it was delivered into, or NULL
 * and why it waits as the session's next run. Both valid during the call.
 */
typedef void (*dispatch_offer_cb)(const char *live, const char *why, void *arg);
/*
 * A message's run just queued: delivered at once into its session's live run
 * here when that run's agent takes input. When that run is another node's
 * (several nodes), that node delivers it at its next look at the queue (the
 * commit's NOTIFY): cb waits for it, on the loop, up to nodes.message_wait.
 * cb is called once, maybe before this returns.
 */
void		 dispatch_offer(struct dispatch *, const char *run, dispatch_offer_cb,
		     void *arg);
/* Cancels a run this engine is running; 0 if it was found. */
int		 dispatch_cancel(struct dispatch *, const char *run, const char *reason);
int		 dispatch_running(const struct dispatch *);
/*
 * Applies the cancels stored for runs (store_run_request_cancel): a queued
 * run ends cancelled, a running one is stopped. The CLI asks by SIGUSR1.
 */
void		 dispatch_apply_cancels(struct dispatch *);
/* The thread's sessions are over: their workspaces are removed (a live run's at its end). */
void		 dispatch_session_close(struct dispatch *, const char *org, const char *thread);
/*
 * SIGTERM: no queued run starts any more; running ones go on. Returns how many
 * still run (dispatch_running says it again later).
 */
int		 dispatch_drain(struct dispatch *);
/* Ends every running run (the drain is over, or a second SIGTERM): interrupted, queued again. */
void		 dispatch_shutdown(struct dispatch *);

#endif
