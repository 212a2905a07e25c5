/* outbox.h: the sender of stored reports, on the engine's HTTP client (httpc.h). */
#ifndef SPUR_OUTBOX_H
#define SPUR_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "httpc.h"

struct engine;
struct outbox;

/* reports.backoff by default: a failed report's first retry waits about this long. */
#define OUTBOX_BACKOFF_BASE_MS	2000LL
#define OUTBOX_BACKOFF_MAX_MS	(30LL * 60 * 1000)

struct outbox	*outbox_create(struct engine *);
/* Cancels calls in flight (no callbacks); unsent reports stay stored for the next start. */
void		 outbox_free(struct outbox *);
/* A report was stored: send what is due (others post WAKE_OUTBOX, wake.h). */
void		 outbox_kick(struct outbox *);


/*
 * The wait before attempt attempts+1 (attempts >= 1 already failed): exponential
 * from base_ms (reports.backoff) with equal jitter from rnd, capped at
 * OUTBOX_BACKOFF_MAX_MS; a server's retry_after_ms (>= 0) is honoured as the
 * minimum, up to give_up_ms (reports.give_up: a report is given up once it
 * has been retried that long). Pure, for tests.
 */
long long	 outbox_backoff_ms(int attempts, long long base_ms, long long retry_after_ms,
		     long long give_up_ms, uint32_t rnd);

#endif
