/* wake.h: the engine's wake bus: a module says what should look again, its owner does. */
#ifndef SPUR_WAKE_H
#define SPUR_WAKE_H

struct engine;

/* What can be woken; a set of them is or'ed. */
enum wake_what {
	WAKE_DISPATCH	= 1 << 0,	/* queued runs may start: dispatch.c looks at the queue */
	WAKE_OUTBOX	= 1 << 1,	/* a report was stored or may go: outbox.c sends what is due */
	WAKE_CANCELS	= 1 << 2,	/* a cancel was stored: dispatch.c stops the runs it names */
};
#define WAKE_NKINDS	3

typedef void	(*wake_cb)(void *arg);

/*
 * Loop: the owner of each kind in what (one bit each) is cb(arg) from now on;
 * cb NULL: no one (the owner is going), and a wake of it does nothing.
 */
void		 wake_subscribe(struct engine *, unsigned what, wake_cb, void *);
/*
 * Loop: wakes the owners of what, in this call: a module low in the house
 * wakes one above it without calling it (or linking to it). The handlers are
 * short: they arm an event (a due timer, an active event), or act on what the
 * store already says (the cancels).
 */
void		 wake(struct engine *, unsigned what);

#endif
