/* reqclock.c: a deadline for every request a front reads (limits.request). */
#include "spur.h"
#include "reqclock.h"
#include "serve.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <netdb.h>
#include <stdatomic.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REQCLOCK_SWEEP_MS	250
#define REQCLOCK_HEAD_MAX	16384	/* the part of a head looked at for its target and length */

/* Why a request being read was refused: the answer the sweep writes. */
enum rqrefuse { RQ_OK, RQ_BUSY, RQ_TOO_LARGE };

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
	long long		 held;		/* its bytes in the budget */
	enum rqrefuse		 refused;	/* answered (503, 413) and closed */
	int			 head_seen;	/* its request's head was looked at */
	int			 watched;	/* our close callback is on its connection */
	reqclock_close_cb	 close_cb;	/* the front's, while it holds a request */
	void			*close_arg;
	struct rqconn		*chain;		/* in its hash bucket */
	TAILQ_ENTRY(rqconn)	 entry;
};

struct reqbudget {
	atomic_llong		 used;
	atomic_llong		 limit;
};

struct reqclock {
	struct event		*sweep;
	struct reqbudget	*budget;
	struct metrics		*metrics;
	int64_t			 limit_ms;
	reqclock_body_cb	 body_cb;
	void			*body_arg;
	char			*head;		/* REQCLOCK_HEAD_MAX + 1, for body_cb */
	TAILQ_HEAD(, rqconn)	 conns;
	struct rqconn		**buckets;	/* by bufferevent */
	size_t			 nbuckets;	/* a power of two */
	size_t			 n;
};

static void	reqclock_input_cb(struct evbuffer *, const struct evbuffer_cb_info *, void *);

struct reqbudget *
reqbudget_new(long long limit)
{
	struct reqbudget	*b = xcalloc(1, sizeof *b);

	atomic_init(&b->used, 0);
	atomic_init(&b->limit, limit);
	return b;
}

void
reqbudget_set_limit(struct reqbudget *b, long long limit)
{
	atomic_store(&b->limit, limit);
}

long long
reqbudget_used(struct reqbudget *b)
{
	return atomic_load(&b->used);
}

void
reqbudget_free(struct reqbudget *b)
{
	free(b);
}

/* The connection's request is whole, refused or gone: its bytes leave the budget. */
static void
reqclock_release(struct rqconn *c)
{
	if (c->held > 0)
		atomic_fetch_sub(&c->rc->budget->used, c->held);
	c->held = 0;
}

static const char *
reqclock_peer(int s, char *host, size_t len)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sslen = sizeof ss;

	if (getpeername(s, (struct sockaddr *)&ss, &sslen) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sslen, host, len, NULL, 0,
	    NI_NUMERICHOST) != 0)
		snprintf(host, len, "unknown");
	return host;
}

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
	reqclock_release(c);
	evbuffer_remove_cb(bufferevent_get_input(c->bev), reqclock_input_cb, c);
	bufferevent_decref(c->bev);
	free(c);
}

/*
 * The first bytes of a request: if its whole head is here and it announces a
 * body larger than its target may have, 0 (refuse it, 413). The buffer starts
 * with the request line only before evhttp has consumed any of it; anything
 * else is left to the front.
 */
static int
reqclock_head_ok(struct reqclock *rc, struct rqconn *c, struct evbuffer *buf)
{
	char		*h = rc->head, *end, *line, *target, *sp, *v;
	size_t		 n;
	long long	 limit, len;

	n = evbuffer_copyout(buf, h, REQCLOCK_HEAD_MAX);
	h[n] = '\0';
	if ((end = strstr(h, "\r\n\r\n")) == NULL) {
		/* Not whole yet: wait for more, unless it can never be looked at here. */
		c->head_seen = n == REQCLOCK_HEAD_MAX || strchr(h, '\n') != NULL;
		return 1;
	}
	c->head_seen = 1;
	end[2] = '\0';
	/* "METHOD /target HTTP/1.1" */
	if ((target = strchr(h, ' ')) == NULL || target[1] != '/' ||
	    (sp = strchr(target + 1, ' ')) == NULL || sp > strchr(h, '\r'))
		return 1;
	*sp = '\0';
	if ((limit = rc->body_cb(target + 1, rc->body_arg)) < 0)
		return 1;
	for (line = strchr(sp + 1, '\n'); line != NULL; line = strchr(line, '\n')) {
		line++;
		if (strncasecmp(line, "Content-Length:", 15) != 0)
			continue;
		v = line + 15 + strspn(line + 15, " \t");
		len = strtoll(v, NULL, 10);
		if (len > limit) {
			log_info("event=http.too_large target=%s length=%lld limit=%lld "
			    "consequence=\"413, connection closed\"", log_q(target + 1), len,
			    limit);
			return 0;
		}
	}
	return 1;
}

/*
 * Bytes came in: if no request was being read, one starts now; they count in
 * the budget. Over it, a connection whose request is being read reads no
 * more, and the sweep, run at once, answers and closes it unless evhttp finds
 * the request whole in what it has (then the front answers it).
 */
static void
reqclock_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct rqconn		*c = arg;
	struct reqbudget	*b = c->rc->budget;
	bufferevent_data_cb	 r, w;
	bufferevent_event_cb	 e;
	long long		 used, limit;
	char			 host[NI_MAXHOST];

	if (info->n_added == 0)
		return;
	if (c->started == 0) {
		bufferevent_getcb(c->bev, &r, &w, &e, NULL);
		if (r == NULL && w == NULL && e == NULL) {
			/* evhttp let go: read nothing more until the sweep closes it. */
			bufferevent_disable(c->bev, EV_READ | EV_WRITE);
			return;
		}
		c->started = now_ms();
	}
	if (c->refused)
		return;
	/*
	 * evhttp is answering (its read callback is off while it writes): what
	 * comes meanwhile is what a client sends past an answer it already has
	 * (a 413, say), which goes with the connection, or the start of the next
	 * request, which is read once the answer is out. Only the bytes of a
	 * request being read count.
	 */
	bufferevent_getcb(c->bev, &r, &w, &e, NULL);
	if (r == NULL)
		return;
	if (!c->head_seen && c->rc->body_cb != NULL && !reqclock_head_ok(c->rc, c, buf)) {
		c->refused = RQ_TOO_LARGE;
		reqclock_release(c);
		bufferevent_disable(c->bev, EV_READ);
		event_active(c->rc->sweep, EV_TIMEOUT, 0);
		return;
	}
	c->held += (long long)info->n_added;
	used = atomic_fetch_add(&b->used, (long long)info->n_added) + (long long)info->n_added;
	if (used <= (limit = atomic_load(&b->limit)))
		return;
	c->refused = RQ_BUSY;
	reqclock_release(c);
	bufferevent_disable(c->bev, EV_READ);
	log_warn("event=http.busy peer=%s buffered=%lld limit=%lld consequence=\"503, "
	    "connection closed\"", reqclock_peer(bufferevent_getfd(c->bev), host, sizeof host),
	    used, limit);
	metrics_count(c->rc->metrics, "http_busy_refusals", 1);
	event_active(c->rc->sweep, EV_TIMEOUT, 0);
}

/* A request refused while it was read: the answer, written past evhttp, which is not answering. */
static void
reqclock_refuse(struct rqconn *c, int s)
{
	static const char	 body[] = "{\"error\":\"unavailable\",\"detail\":\"server busy\"}";
	char			 msg[256];
	int			 n;

	if (c->refused == RQ_TOO_LARGE)
		n = snprintf(msg, sizeof msg, "HTTP/1.1 413 Payload Too Large\r\n"
		    "Connection: close\r\nContent-Length: 0\r\n\r\n");
	else
		n = snprintf(msg, sizeof msg, "HTTP/1.1 503 Service Unavailable\r\n"
		    "Content-Type: application/json\r\nRetry-After: 5\r\n"
		    "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", sizeof body - 1,
		    body);
	/* Nothing of this connection is being written: evhttp answers a request once it is whole. */
	(void)send(s, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(s, SHUT_RDWR);
	/*
	 * evhttp frees the connection as for a client that left, without reading
	 * what the kernel still holds of the body. c may be gone after this.
	 */
	bufferevent_trigger_event(c->bev, BEV_EVENT_EOF | BEV_EVENT_READING, 0);
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
	char			 host[NI_MAXHOST];

	for (c = TAILQ_FIRST(&rc->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		bufferevent_getcb(c->bev, &r, &w, &e, NULL);
		if (r == NULL && w == NULL && e == NULL) {
			reqclock_forget(rc, c);
			continue;
		}
		if (c->refused && c->started != 0) {
			c->started = 0;
			if ((s = bufferevent_getfd(c->bev)) != -1)
				reqclock_refuse(c, s);
			continue;
		}
		if (c->started == 0 || now - c->started < rc->limit_ms)
			continue;
		c->started = 0;
		if ((s = bufferevent_getfd(c->bev)) == -1)
			continue;
		log_info("event=http.request_timeout peer=%s limit_s=%lld consequence="
		    "\"connection closed\"", reqclock_peer(s, host, sizeof host),
		    (long long)(rc->limit_ms / 1000));
		metrics_count(rc->metrics, "http_request_timeouts", 1);
		shutdown(s, SHUT_RDWR);
	}
}

struct reqclock *
reqclock_new(struct event_base *base, int seconds, struct reqbudget *budget,
    struct metrics *metrics)
{
	struct reqclock	*rc = xcalloc(1, sizeof *rc);
	struct timeval	 tv = { 0, REQCLOCK_SWEEP_MS * 1000 };

	rc->budget = budget;
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

int
reqclock_done(struct reqclock *rc, struct evhttp_request *req)
{
	struct rqconn	*c;
	int		 refused;

	if ((c = reqclock_conn(rc, req)) == NULL)
		return 0;
	c->started = 0;
	c->head_seen = 0;
	refused = c->refused == RQ_BUSY;
	c->refused = RQ_OK;
	reqclock_release(c);
	if (!c->watched) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(req),
		    reqclock_closed_cb, c);
		c->watched = 1;
	}
	return refused ? -1 : 0;
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
reqclock_set_body_cb(struct reqclock *rc, reqclock_body_cb cb, void *arg)
{
	rc->body_cb = cb;
	rc->body_arg = arg;
	if (rc->head == NULL)
		rc->head = xmalloc(REQCLOCK_HEAD_MAX + 1);
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
	free(rc->head);
	free(rc->buckets);
	free(rc);
}
