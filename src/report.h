/* report.h: telling the thread: reactions on accept, one message at every run's end (SPEC section 9). */
#ifndef SPUR_REPORT_H
#define SPUR_REPORT_H

struct engine;
struct spur_event;

/* The event was accepted and starts runs: e.g. an eyes reaction on the comment. */
void	 report_accepted(struct engine *, const struct spur_event *);
/* The run ended (any state): its report is stored for the outbox to send. */
void	 report_run_end(struct engine *, const char *run);

#endif
