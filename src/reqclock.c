/* reqclock.c: a deadline for every request a front reads (limits.request). */
#include "spur.h"
#include "reqclock.h"
#include "serve.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <netdb.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQCLOCK_SWEEP_MS	250

/*
 * evhttp 2.1 says nothing about a connection until its first request is
 * whole, and frees it without telling anyone. So each connection's bufferevent
 * is made here and keeps one reference of ours: evhttp's free only drops its
 * own, and the sweep sees that evhttp let go (its callbacks are gone) and
 * drops ours. From its first whole request on, a connection tells us when it
 * closes (its close callback is ours, and passes the news on to the front's),
 * so its descriptor goes with it; only one that never sent a whole request
 * waits for the sweep. The clock of a connection starts with the first byte
 * of a request (a callback on its input buffer) and stops when the request is
 * whole; one that runs out is shut down, and evhttp, reading end of file
 * there, frees the connection as for any client that left.
 */
struct rqconn {
	struct reqclock		*rc;
	struct bufferevent	*bev;
	int64_t			 started;	/* a request is being read since; 0: none */
	int			 watched;	/* our close callback is on its connection */
	reqclock_close_cb	 close_cb;	/* the front's, while it holds a request */
	void			*close_arg;
	struct rqconn		*chain;		/* in its hash bucket */
	TAILQ_ENTRY(rqconn)	 entry;
};

struct reqclock {
	struct event		*sweep;
	struct metrics		*metrics;
	int64_t			 limit_ms;
	TAILQ_HEAD(, rqconn)	 conns;
	struct rqconn		**buckets;	/* by bufferevent */
	size_t			 nbuckets;	/* a power of two */
	size_t			 n;
};

static void	reqclock_input_cb(struct evbuffer *, const struct evbuffer_cb_info *, void *);

static size_t
reqclock_hash(const struct reqclock *rc, const struct bufferevent *bev)
{
	uint64_t	 h = (uint64_t)(uintptr_t)bev * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (rc->nbuckets - 1);
}

static void
reqclock_grow(struct reqclock *rc)
{
	struct rqconn	*c;

	free(rc->buckets);
	rc->nbuckets = rc->nbuckets ? rc->nbuckets * 2 : 64;
	rc->buckets = xcalloc(rc->nbuckets, sizeof *rc->buckets);
	TAILQ_FOREACH(c, &rc->conns, entry) {
		size_t h = reqclock_hash(rc, c->bev);
		c->chain = rc->buckets[h];
		rc->buckets[h] = c;
	}
}

static struct rqconn *
reqclock_find(struct reqclock *rc, const struct bufferevent *bev)
{
	struct rqconn	*c;

	if (rc->nbuckets == 0)
		return NULL;
	for (c = rc->buckets[reqclock_hash(rc, bev)]; c != NULL; c = c->chain) {
		if (c->bev == bev)
			return c;
	}
	return NULL;
}

static void
reqclock_forget(struct reqclock *rc, struct rqconn *c)
{
	struct rqconn	**p = &rc->buckets[reqclock_hash(rc, c->bev)];

	while (*p != c)
		p = &(*p)->chain;
	*p = c->chain;
	TAILQ_REMOVE(&rc->conns, c, entry);
	rc->n--;
	evbuffer_remove_cb(bufferevent_get_input(c->bev), reqclock_input_cb, c);
	bufferevent_decref(c->bev);
	free(c);
}

/* Bytes came in: if no request was being read, one starts now. */
static void
reqclock_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct rqconn		*c = arg;
	bufferevent_data_cb	 r, w;
	bufferevent_event_cb	 e;

	if (info->n_added == 0 || c->started != 0)
		return;
	bufferevent_getcb(c->bev, &r, &w, &e, NULL);
	if (r == NULL && w == NULL && e == NULL) {
		/* evhttp let go: read nothing more until the sweep closes it. */
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		return;
	}
	c->started = now_ms();
}

static void
reqclock_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reqclock		*rc = arg;
	struct rqconn		*c, *next;
	bufferevent_data_cb	 r, w;
	bufferevent_event_cb	 e;
	int64_t			 now = now_ms();
	int			 s;
	struct sockaddr_storage	 ss;
	socklen_t		 sslen;
	char			 host[NI_MAXHOST];

	for (c = TAILQ_FIRST(&rc->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		bufferevent_getcb(c->bev, &r, &w, &e, NULL);
		if (r == NULL && w == NULL && e == NULL) {
			reqclock_forget(rc, c);
			continue;
		}
		if (c->started == 0 || now - c->started < rc->limit_ms)
			continue;
		c->started = 0;
		if ((s = bufferevent_getfd(c->bev)) == -1)
			continue;
		sslen = sizeof ss;
		if (getpeername(s, (struct sockaddr *)&ss, &sslen) != 0 ||
		    getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof host, NULL, 0,
		    NI_NUMERICHOST) != 0)
			snprintf(host, sizeof host, "unknown");
		log_info("event=http.request_timeout peer=%s limit_s=%lld consequence="
		    "\"connection closed\"", host, (long long)(rc->limit_ms / 1000));
		metrics_count(rc->metrics, "http_request_timeouts", 1);
		shutdown(s, SHUT_RDWR);
	}
}

struct reqclock *
reqclock_new(struct event_base *base, int seconds, struct metrics *metrics)
{
	struct reqclock	*rc = xcalloc(1, sizeof *rc);
	struct timeval	 tv = { 0, REQCLOCK_SWEEP_MS * 1000 };

	rc->metrics = metrics;
	rc->limit_ms = (int64_t)seconds * 1000;
	TAILQ_INIT(&rc->conns);
	reqclock_grow(rc);
	rc->sweep = event_new(base, -1, EV_PERSIST, reqclock_sweep_cb, rc);
	event_add(rc->sweep, &tv);
	return rc;
}

struct bufferevent *
reqclock_bevcb(struct event_base *base, void *arg)
{
	struct reqclock		*rc = arg;
	struct bufferevent	*bev;
	struct rqconn		*c;
	size_t			 h;

	if ((bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof *c);
	c->rc = rc;
	c->bev = bev;
	bufferevent_incref(bev);
	evbuffer_add_cb(bufferevent_get_input(bev), reqclock_input_cb, c);
	TAILQ_INSERT_TAIL(&rc->conns, c, entry);
	if (++rc->n > 2 * rc->nbuckets)
		reqclock_grow(rc);
	else {
		h = reqclock_hash(rc, bev);
		c->chain = rc->buckets[h];
		rc->buckets[h] = c;
	}
	return bev;
}

/* evhttp is freeing the connection (it still holds its own reference). */
static void
reqclock_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct rqconn	*c = arg;

	if (c->close_cb != NULL)
		c->close_cb(evcon, c->close_arg);
	reqclock_forget(c->rc, c);
}

static struct rqconn *
reqclock_conn(struct reqclock *rc, struct evhttp_request *req)
{
	struct evhttp_connection	*evcon = evhttp_request_get_connection(req);

	if (evcon == NULL)
		return NULL;
	return reqclock_find(rc, evhttp_connection_get_bufferevent(evcon));
}

void
reqclock_done(struct reqclock *rc, struct evhttp_request *req)
{
	struct rqconn	*c;

	if ((c = reqclock_conn(rc, req)) == NULL)
		return;
	c->started = 0;
	if (!c->watched) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(req),
		    reqclock_closed_cb, c);
		c->watched = 1;
	}
}

void
reqclock_on_close(struct reqclock *rc, struct evhttp_request *req, reqclock_close_cb cb,
    void *arg)
{
	struct rqconn	*c;

	if ((c = reqclock_conn(rc, req)) != NULL && c->watched) {
		c->close_cb = cb;
		c->close_arg = arg;
	} else if (evhttp_request_get_connection(req) != NULL) {
		/* A connection evhttp made itself (ours could not be made). */
		evhttp_connection_set_closecb(evhttp_request_get_connection(req), cb, arg);
	}
}

void
reqclock_set_limit(struct reqclock *rc, int seconds)
{
	rc->limit_ms = (int64_t)seconds * 1000;
}

void
reqclock_free(struct reqclock *rc)
{
	struct rqconn	*c;

	if (rc == NULL)
		return;
	while ((c = TAILQ_FIRST(&rc->conns)) != NULL)
		reqclock_forget(rc, c);
	event_free(rc->sweep);
	free(rc->buckets);
	free(rc);
}
