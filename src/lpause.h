/*
 * lpause.h: a listener whose accept() fails for a reason that does not pass
 * (no descriptor or memory left) rests for a moment instead of failing again
 * at once, forever: its socket stays readable, and libevent would call accept
 * in a loop, logging each failure. Clients wait in the listen backlog.
 */
#ifndef SPUR_LPAUSE_H
#define SPUR_LPAUSE_H

#include <stdint.h>

#define LPAUSE_MS	250	/* how long a listener rests */
#define LPAUSE_LOG_MS	10000	/* a rest is worth a log line at most this often */

struct event;
struct event_base;
struct evconnlistener;

struct lpause {
	struct evconnlistener	*lis;
	struct event		*resume;
	int64_t			 logged;	/* when a rest was last said */
};

void	 lpause_init(struct lpause *, struct event_base *, struct evconnlistener *);
/*
 * From the listener's error callback (errno still the accept's): it rests.
 * 1 when the caller should log it now, 0 when it was said lately.
 */
int	 lpause_failed(struct lpause *);
void	 lpause_clear(struct lpause *);

#endif
