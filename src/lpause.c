/* lpause.c: a listener rests after a failed accept() instead of spinning on it. */
#include "spur.h"
#include "lpause.h"

#include <string.h>
#include <event2/event.h>
#include <event2/listener.h>

static void
lpause_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lpause	*lp = arg;

	evconnlistener_enable(lp->lis);
}

void
lpause_init(struct lpause *lp, struct event_base *base, struct evconnlistener *lis)
{
	memset(lp, 0, sizeof *lp);
	lp->lis = lis;
	lp->resume = evtimer_new(base, lpause_resume_cb, lp);
}

int
lpause_failed(struct lpause *lp)
{
	struct timeval	 tv = { 0, LPAUSE_MS * 1000 };
	int64_t		 now = now_ms();

	evconnlistener_disable(lp->lis);
	evtimer_add(lp->resume, &tv);
	if (lp->logged != 0 && now - lp->logged < LPAUSE_LOG_MS)
		return 0;
	lp->logged = now;
	return 1;
}

void
lpause_clear(struct lpause *lp)
{
	if (lp->resume != NULL)
		event_free(lp->resume);
	lp->resume = NULL;
}
