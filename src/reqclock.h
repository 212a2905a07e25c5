/* reqclock.h: a deadline for every request a front reads, so a client cannot trickle one forever. */
#ifndef SPUR_REQCLOCK_H
#define SPUR_REQCLOCK_H

struct bufferevent;
struct event_base;
struct evhttp_connection;
struct evhttp_request;
struct metrics;
struct reqclock;

typedef void (*reqclock_close_cb)(struct evhttp_connection *, void *);
/* The largest body a request to target may have, or -1 for limits.body alone. */
typedef long long (*reqclock_body_cb)(const char *target, void *);

/*
 * The bytes of the requests being read, every front's connections together
 * (limits.buffered): evhttp holds a request whole in memory before anyone
 * sees it, so without a bound, clients sending large bodies at once could
 * make the engine run out of memory. A connection whose bytes would take the
 * total over the limit is answered 503 (Retry-After) and closed; the others
 * go on. A request's bytes count from its first byte until it is whole and
 * handed over, or its connection goes.
 */
struct reqbudget;
struct reqbudget *reqbudget_new(long long limit);
void		 reqbudget_set_limit(struct reqbudget *, long long limit);
/* Any thread: the bytes of the requests being read now. */
long long	 reqbudget_used(struct reqbudget *);
void		 reqbudget_free(struct reqbudget *);

/*
 * evhttp's own timeout (limits.idle) closes a connection that goes silent; a
 * client sending a byte a second is never silent. A request clock starts when
 * the first byte of a request arrives, stops when evhttp hands over the whole
 * request, and a connection whose request is not whole after seconds is shut.
 */
/*
 * Each connection it closes counts in spur_http_request_timeouts_total, each
 * one refused for the budget in spur_http_busy_refusals_total.
 */
struct reqclock	*reqclock_new(struct event_base *, int seconds, struct reqbudget *,
		     struct metrics *);
/* For evhttp_set_bevcb: the bufferevent of a new connection, with its clock. */
struct bufferevent *reqclock_bevcb(struct event_base *, void *);
/*
 * The request is whole (the front's request callback): its clock stops and
 * its bytes leave the budget. -1: it went over the budget while it was read;
 * answer it 503. (One found too large for its target is for the front to refuse.)
 */
int		 reqclock_done(struct reqclock *, struct evhttp_request *);
/*
 * cb runs if the request's connection closes (NULL: no longer). The connection's
 * close callback belongs to the clock: this is the front's way to set it.
 */
void		 reqclock_on_close(struct reqclock *, struct evhttp_request *,
		     reqclock_close_cb, void *);
/* A new limit, from now on for every request being read. */
void		 reqclock_set_limit(struct reqclock *, int seconds);
/*
 * Bodies smaller than limits.body for some targets (auth: none hooks): a
 * request whose head arrives at once, with a Content-Length over what cb
 * says for its target, is answered 413 and closed before its body is read.
 * The front checks every request again once it is whole (a head that came
 * in pieces is not seen here: evhttp has consumed its lines).
 */
void		 reqclock_set_body_cb(struct reqclock *, reqclock_body_cb, void *);
/* After evhttp_free: the connections it let go of. */
void		 reqclock_free(struct reqclock *);

#endif
