/* server.c: the HTTP listener: limits, routes, and the webhook front door of SPEC section 5. */
#include "spur.h"
#include "api.h"
#include "api-events.h"
#include "console.h"
#include "console-assets.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "ingest.h"
#include "dispatch.h"
#include "lpause.h"
#include "node.h"
#include "openapi.h"
#include "reqclock.h"
#include "sandbox.h"
#include "serve.h"
#include "netguard.h"
#include "people.h"
#include "source.h"
#include "store.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <pthread.h>
#include <sys/queue.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SERVER_MAX_LISTEN	16
#define HOOK_MAX_HEADERS	256
#define SERVER_MAX_FRONTS	8
/*
 * Large request bodies are freed back to the system, not kept by glibc for
 * good (500 MiB after a few 25 MiB bodies). An allocation this large is a
 * mapping of its own, unmapped when freed: left to itself, glibc raises that
 * threshold to the largest block freed, and keeps twice as much at the top
 * of each thread's heap. The small pieces a body was read in (evbuffer's
 * chains) are given back by malloc_trim, a second after a body this large
 * was freed, at most once a second per front.
 */
#define SERVER_TRIM_BODY	(1 << 20)
#define SERVER_TRIM_DELAY_MS	1000

/*
 * The HTTP fronts: one thread per CPU, each with its own event base and evhttp
 * on the same listening sockets. A front reads a request, verifies, parses and
 * matches it (the costly part: HMAC over the body, JSON) and hands its event
 * to ingest without leaving its thread; the answer comes back to it when the
 * commit is done. The engine's loop keeps the store, runs and reports, and
 * answers /healthz and /metrics for the fronts.
 */
struct front {
	struct server			*srv;
	struct event_base		*base;
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound[SERVER_MAX_LISTEN];
	struct lpause			 pause[SERVER_MAX_LISTEN];	/* each one's, when accept() fails */
	size_t				 nbound;
	pthread_t			 thread;
	int				 started;
	struct event			*answer_ev;	/* answers made elsewhere, to send */
	struct event			*close_ev;	/* stop accepting */
	struct event			*limits_ev;	/* the config was reloaded */
	struct event			*trim_ev;	/* a large body was freed */
	struct reqclock			*clock;		/* limits.request */
	struct api_events		*events;	/* the org API's event streams */
	TAILQ_HEAD(hookreqs, hookreq)	 answers;	/* under srv->mu */
};

struct server {
	struct engine			*engine;
	struct front			 fronts[SERVER_MAX_FRONTS];
	int				 nfronts;
	int				 port;
	pthread_mutex_t			 mu;
	int				 inflight;	/* under mu */
	struct evhttp			*metrics_http;	/* metrics.listen's, on the loop */
	struct hookreqs			 asks;		/* under mu: for the loop to answer */
	struct event			*ask_ev;
	struct reqbudget		*budget;	/* limits.buffered, every front's */
};

enum hookreq_kind {
	HOOKREQ_HOOK, HOOKREQ_HEALTHZ, HOOKREQ_LIVEZ, HOOKREQ_METRICS,
	HOOKREQ_API,		/* /o/{org}/..., not a hook: api.c */
	HOOKREQ_CONSOLE,	/* the console's pages and sign-in: console.c */
	HOOKREQ_PERSON,		/* a hook whose actor must be looked up first: people.c */
};

static void	front_accept_error_cb(struct evconnlistener *, void *);
static void	server_console_headers(struct evkeyvalq *, const char *, const char *);

/*
 * One request from its arrival to its answer, owned by its front except while
 * ingest or the loop has it. req becomes NULL if the client leaves, and the
 * request still goes its way; only the front touches req.
 */
struct hookreq {
	struct server		*srv;
	struct front		*front;
	struct evhttp_request	*req;
	enum hookreq_kind	 kind;
	char			 route[16];
	const struct source	*src;
	struct config		*conf;
	struct automation_set	*set;
	char			*org_name;
	char			*hook;
	struct header		*headers;
	size_t			 nheaders;
	char			*body;
	size_t			 len;
	int64_t			 now;
	struct source_result	 res;
	/* The answer, when it is made off the front. */
	int			 status;
	const char		*ctype;
	char			*answer;
	size_t			 answer_len;	/* 0: strlen(answer); else bytes that may hold a NUL */
	char			*download;	/* a file to save, not show: its name */
	int			 retry_after;
	/* The org API's request and what its answer adds (api.c). */
	struct api_req		 api;
	char			*allow;		/* Allow of a 405: a copy (api.c's is on its stack) */
	int			 console;	/* a console page (console.c), not the org API */
	char			*form_action;	/* its CSP's form-action beside 'self' */
	char			*location;
	char			*set_cookie[2];
	char			*mcp_session;
	char			*stream_run;
	char			*stream_after;
	/* A verified event waiting for who its actor is (HOOKREQ_PERSON), and the groups asked. */
	struct spur_event	*person_ev;
	char			**person_groups;
	TAILQ_ENTRY(hookreq)	 entry;
};

static void
server_reply_len(struct server *srv, struct evhttp_request *req, const char *route, int status,
    const char *ctype, const char *body, size_t len)
{
	struct evbuffer	*out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char	*reason;

	switch (status) {
	case 200: reason = "OK"; break;
	case 201: reason = "Created"; break;
	case 202: reason = "Accepted"; break;
	case 204: reason = "No Content"; break;
	case 400: reason = "Bad Request"; break;
	case 401: reason = "Unauthorized"; break;
	case 404: reason = "Not Found"; break;
	case 405: reason = "Method Not Allowed"; break;
	case 409: reason = "Conflict"; break;
	case 413: reason = "Payload Too Large"; break;
	case 431: reason = "Request Header Fields Too Large"; break;
	case 503: reason = "Service Unavailable"; break;
	default: reason = "Error"; break;
	}
	if (ctype != NULL)
		evhttp_add_header(h, "Content-Type", ctype);
	if (body != NULL)
		evbuffer_add(out, body, len != 0 ? len : strlen(body));
	evhttp_send_reply(req, status, reason, out);
	evbuffer_free(out);
	metrics_request(srv->engine->metrics, route, status);
}

static void
server_reply(struct server *srv, struct evhttp_request *req, const char *route, int status,
    const char *ctype, const char *body)
{
	server_reply_len(srv, req, route, status, ctype, body, 0);
}

/*
 * A file a run left, saved by the browser, never shown: what an agent wrote
 * must not run as a page of the console's origin.
 */
static void
server_download_headers(struct evkeyvalq *h, const char *name)
{
	char	*v = xprintf("attachment; filename=\"%s\"", name);

	evhttp_add_header(h, "Content-Disposition", v);
	free(v);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Content-Security-Policy", "default-src 'none'; sandbox");
}

static void
server_reply_json(struct server *srv, struct evhttp_request *req, const char *route,
    int status, json_t *j)
{
	char	*s = json_dumps(j, JSON_COMPACT);

	server_reply(srv, req, route, status, "application/json", s);
	free(s);
	json_decref(j);
}

static void
server_unauthorized(struct server *srv, struct evhttp_request *req, const char *route)
{
	server_reply(srv, req, route, 401, "application/json", "{\"error\":\"unauthorized\"}");
}

static const char *
server_peer(struct evhttp_request *req)
{
	struct evhttp_connection	*evcon = evhttp_request_get_connection(req);
	const char			*addr = NULL;
	ev_uint16_t			 port;

	if (evcon != NULL)
		evhttp_connection_get_peer(evcon, (char **)&addr, &port);
	return addr != NULL ? addr : "-";
}

/*
 * The node of one Forwarded element's for= (RFC 7239 section 6): an address
 * without its port or brackets, or "-" for none, "unknown", an obfuscated
 * name or anything else that is no address (it ends the walk).
 */
static void
forwarded_node(struct buf *out, const char *el, size_t len)
{
	const char	*p = el, *end = el + len, *v;
	size_t		 n;

	while (p < end) {
		p += strspn(p, " \t;");
		if (p >= end)
			break;
		n = strcspn(p, ";");
		if (p + n > end)
			n = end - p;
		if (n > 4 && strncasecmp(p, "for=", 4) == 0) {
			v = p + 4;
			n -= 4;
			if (n > 0 && *v == '"') {
				v++;
				n = n > 1 && v[n - 2] == '"' ? n - 2 : n - 1;
			}
			if (n > 0 && *v == '[') {
				v++;
				n--;
				n = strcspn(v, "]") < n ? strcspn(v, "]") : 0;
			} else
				n = strcspn(v, ":\"") < n ? strcspn(v, ":\"") : n;
			if (n > 0 && strspn(v, "0123456789abcdefABCDEF.:") >= n) {
				buf_add(out, v, n);
				return;
			}
			break;
		}
		p += n;
	}
	buf_adds(out, "-");
}

/* Forwarded: for=A;proto=https, for="[B]:443" as "A, B" (quoted commas kept in their element). */
static char *
forwarded_list(const char *h)
{
	struct buf	 out;
	const char	*el = h, *p;
	int		 quoted = 0;

	buf_init(&out, 0);
	for (p = h;; p++) {
		if (*p == '"')
			quoted = !quoted;
		else if (*p == '\\' && quoted && p[1] != '\0')
			p++;
		else if ((*p == ',' && !quoted) || *p == '\0') {
			if (out.len > 0)
				buf_adds(&out, ",");
			forwarded_node(&out, el, p - el);
			if (*p == '\0')
				break;
			el = p + 1;
		}
	}
	return buf_take(&out);
}

/*
 * Who sent the request, for the log's peer=: the connection's peer; when that
 * is one of trusted_proxies, the last address of trusted_proxy_header's list
 * (X-Forwarded-For, or Forwarded's for=) that is not one of them (each proxy
 * appends the address it heard from, so any before that the client may have
 * written itself), followed by " via=" the peer. Only an address is taken
 * from the header: anything else ends the walk.
 */
static char *
server_client(struct server *srv, struct evhttp_request *req)
{
	const char		*peer = server_peer(req), *h;
	struct automation_set	*set;
	struct config		*conf = serve_config_ref(srv->engine, &set);
	char			*list = NULL, *client = NULL, *p, *item, *out;

	h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    conf->forwarded_rfc7239 ? "Forwarded" : "X-Forwarded-For");
	if (h != NULL && netguard_listed(peer, conf->trusted_proxies)) {
		list = conf->forwarded_rfc7239 ? forwarded_list(h) : xstrdup(h);
		do {
			p = strrchr(list, ',');
			item = p != NULL ? p + 1 : list;
			item += strspn(item, " \t");
			item[strcspn(item, " \t")] = '\0';
			if (strchr(item, '/') != NULL || !netguard_valid(item))
				break;
			client = item;
			if (p != NULL)
				*p = '\0';
		} while (p != NULL && netguard_listed(client, conf->trusted_proxies));
	}
	out = client != NULL ? xprintf("%s via=%s", client, peer) : xstrdup(peer);
	free(list);
	automation_set_unref(set);
	config_free(conf);
	return out;
}

/* Front: large bodies were freed a second ago; their pages go back to the system. */
static void
front_trim_cb(evutil_socket_t fd, short what, void *arg)
{
	malloc_trim(0);
}

static void
hookreq_free(struct hookreq *hr)
{
	struct server	*srv = hr->srv;
	struct timeval	 tv = { 0, SERVER_TRIM_DELAY_MS * 1000 };

	/* On the front's thread (or at shutdown, when nothing runs its timers). */
	if (hr->len >= SERVER_TRIM_BODY && !evtimer_pending(hr->front->trim_ev, NULL))
		evtimer_add(hr->front->trim_ev, &tv);

	free(hr->headers);
	free(hr->body);
	free(hr->org_name);
	free(hr->hook);
	free(hr->answer);
	api_req_clear(&hr->api);
	free(hr->allow);
	free(hr->mcp_session);
	free(hr->location);
	free(hr->set_cookie[0]);
	free(hr->set_cookie[1]);
	free(hr->form_action);
	free(hr->download);
	free(hr->stream_run);
	free(hr->stream_after);
	spur_event_free(hr->person_ev);
	strv_free(hr->person_groups);
	source_result_free(&hr->res);
	if (hr->set != NULL)
		automation_set_unref(hr->set);
	config_free(hr->conf);
	free(hr);
	pthread_mutex_lock(&srv->mu);
	srv->inflight--;
	pthread_mutex_unlock(&srv->mu);
}

/* The answer is about to go out: the connection no longer needs to tell us it closed. */
static struct evhttp_request *
hookreq_take(struct hookreq *hr)
{
	if (hr->req != NULL)
		reqclock_on_close(hr->front->clock, hr->req, NULL, NULL);
	return hr->req;
}

static void
hook_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct hookreq	*hr = arg;

	/* The client left: whatever stage the request is in goes on, the answer is dropped. */
	hr->req = NULL;
}

static struct hookreq *
hookreq_new(struct front *f, struct evhttp_request *req, enum hookreq_kind kind,
    const char *route)
{
	struct server	*srv = f->srv;
	struct hookreq	*hr = xcalloc(1, sizeof *hr);

	hr->srv = srv;
	hr->front = f;
	hr->req = req;
	hr->kind = kind;
	snprintf(hr->route, sizeof hr->route, "%s", route);
	pthread_mutex_lock(&srv->mu);
	srv->inflight++;
	pthread_mutex_unlock(&srv->mu);
	reqclock_on_close(f->clock, req, hook_close_cb, hr);
	return hr;
}

/* Any thread: the answer is made; its front sends it. */
static void
hookreq_answer(struct hookreq *hr, int status, const char *ctype, char *answer)
{
	struct server	*srv = hr->srv;

	hr->status = status;
	hr->ctype = ctype;
	hr->answer = answer;
	pthread_mutex_lock(&srv->mu);
	TAILQ_INSERT_TAIL(&hr->front->answers, hr, entry);
	event_active(hr->front->answer_ev, 0, 0);
	pthread_mutex_unlock(&srv->mu);
}

/* The first request of a queue that other threads add to, or NULL. */
static struct hookreq *
hookreq_pop(struct server *srv, struct hookreqs *q)
{
	struct hookreq	*hr;

	pthread_mutex_lock(&srv->mu);
	if ((hr = TAILQ_FIRST(q)) != NULL)
		TAILQ_REMOVE(q, hr, entry);
	pthread_mutex_unlock(&srv->mu);
	return hr;
}

/* Front: sends the answers made for it elsewhere. */
static void
front_answer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct front		*f = arg;
	struct server		*srv = f->srv;
	struct hookreq		*hr;
	struct evhttp_request	*req;
	int			 i;

	while ((hr = hookreq_pop(srv, &f->answers)) != NULL) {
		if ((req = hookreq_take(hr)) != NULL) {
			struct evkeyvalq *h = evhttp_request_get_output_headers(req);
			char ra[16];

			if (hr->retry_after) {
				snprintf(ra, sizeof ra, "%d", hr->kind != HOOKREQ_HOOK ?
				    hr->retry_after : 5);
				evhttp_add_header(h, "Retry-After", ra);
			}
			if (hr->allow != NULL)
				evhttp_add_header(h, "Allow", hr->allow);
			if (hr->mcp_session != NULL)
				evhttp_add_header(h, "Mcp-Session-Id", hr->mcp_session);
			if (hr->location != NULL)
				evhttp_add_header(h, "Location", hr->location);
			for (i = 0; i < 2; i++) {
				if (hr->set_cookie[i] != NULL)
					evhttp_add_header(h, "Set-Cookie", hr->set_cookie[i]);
			}
			if (hr->console)
				server_console_headers(h, "no-store", hr->form_action);
			if (hr->download != NULL)
				server_download_headers(h, hr->download);
			if (hr->stream_run != NULL) {
				/* The stream is the front's from here: it reads the run's files. */
				metrics_request(srv->engine->metrics, hr->route, 200);
				api_events_start(f->events, req, hr->stream_run,
				    hr->api.last_event_id);
			} else
				server_reply_len(srv, req, hr->route, hr->status, hr->ctype,
				    hr->answer, hr->answer_len);
		}
		hookreq_free(hr);
	}
}

/* ingest (on the loop, or on the front when the queue is full): the event's fate. */
static void
hook_done_cb(enum ingest_status status, const struct spur_event *ev, json_t *runs, void *arg)
{
	struct hookreq	*hr = arg;
	struct buf	 b;
	json_t		*id;
	size_t		 i;
	char		*own;

	/* A system that shows the answer to a person words it itself (a slash command's note). */
	if ((status == INGEST_NEW || status == INGEST_DUPLICATE) && hr->src != NULL &&
	    hr->src->answer != NULL && (own = hr->src->answer(ev, runs, status ==
	    INGEST_DUPLICATE, hr->conf->public_url)) != NULL) {
		hookreq_answer(hr, 200, "application/json", own);
		return;
	}
	/* Ids are letters, digits and '_': nothing to escape. */
	buf_init(&b, 0);
	switch (status) {
	case INGEST_NEW:
		buf_addf(&b, "{\"event\":\"%s\",\"runs\":[", ev->id);
		json_array_foreach(runs, i, id)
			buf_addf(&b, "%s\"%s\"", i > 0 ? "," : "", json_string_value(id));
		buf_adds(&b, "]}");
		break;
	case INGEST_DUPLICATE:
		buf_addf(&b, "{\"event\":\"%s\",\"duplicate\":true}", ev->id);
		break;
	default:
		buf_addf(&b, "{\"error\":\"unavailable\",\"detail\":\"%s\"}",
		    status == INGEST_QUEUE_FULL ? "queue full" : "store unavailable");
		hr->retry_after = 1;
		break;
	}
	hookreq_answer(hr, hr->retry_after ? 503 : 200, "application/json", buf_take(&b));
}

/* Loop (api.c): the org API's answer, for the front to send. */
static void
server_api_done(struct api_answer *a, void *arg)
{
	struct hookreq	*hr = arg;
	char		*body = a->body;

	a->body = NULL;
	hr->allow = a->allow != NULL ? xstrdup(a->allow) : NULL;
	hr->mcp_session = a->mcp_session;
	a->mcp_session = NULL;
	hr->location = a->location;
	a->location = NULL;
	hr->set_cookie[0] = a->set_cookie[0];
	hr->set_cookie[1] = a->set_cookie[1];
	a->set_cookie[0] = a->set_cookie[1] = NULL;
	hr->console = a->console;
	hr->form_action = a->form_action;
	a->form_action = NULL;
	hr->download = a->download;
	a->download = NULL;
	hr->answer_len = a->body_len;
	hr->stream_run = a->stream_run;
	a->stream_run = NULL;
	hr->retry_after = a->retry_after;
	hookreq_answer(hr, a->status, a->ctype != NULL ? a->ctype : "application/json", body);
}

/* Loop: /metrics, with what the engine's modules measure (metrics.c calls none of them). */
static char *
server_metrics(struct engine *e)
{
	struct metrics_live	 live;
	struct buf		 nb;
	char			*text;

	buf_init(&nb, 0);
	node_metrics(e->node, &nb);
	live.running = e->dispatch != NULL ? dispatch_running(e->dispatch) : 0;
	live.buffered = e->budget != NULL ? reqbudget_used(e->budget) : 0;
	live.node = buf_cstr(&nb);
	text = metrics_render(e->metrics, e, &live);
	buf_free(&nb);
	return text;
}

/* Loop: who the event's actor is is known (or the engine stops: NULL); on to ingest. */
static void
server_person_cb(struct person *p, void *arg)
{
	struct hookreq		*hr = arg;
	struct engine		*e = hr->srv->engine;
	struct spur_event	*ev = hr->person_ev;

	hr->person_ev = NULL;
	if (p == NULL) {
		spur_event_free(ev);
		hr->retry_after = 1;
		hookreq_answer(hr, 503, "application/json", xstrdup("{\"error\":\"unavailable\","
		    "\"detail\":\"stopping\"}"));
		return;
	}
	ev->person = p;
	ingest_submit(e->ingest, ingest_prepare(e->ingest, hr->set, ev), hook_done_cb, hr);
}

/* Loop: what only the loop can answer (it owns the store's connection). */
static void
server_ask_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server	*srv = arg;
	struct engine	*e = srv->engine;
	struct hookreq	*hr;
	char		*why;

	while ((hr = hookreq_pop(srv, &srv->asks)) != NULL) {
		if (hr->kind == HOOKREQ_PERSON)
			people_lookup(e->people, hr->person_ev, hr->person_groups,
			    server_person_cb, hr);
		else if (hr->kind == HOOKREQ_CONSOLE)
			console_handle(e, &hr->api, server_api_done, hr);
		else if (hr->kind == HOOKREQ_API)
			api_handle(e, &hr->api, server_api_done, hr);
		else if (hr->kind == HOOKREQ_METRICS)
			hookreq_answer(hr, 200, "text/plain; version=0.0.4",
			    server_metrics(e));
		else if (hr->kind == HOOKREQ_LIVEZ)
			hookreq_answer(hr, 200, "text/plain", xstrdup("ok\n"));	/* the loop turns */
		else if (e->draining)
			hookreq_answer(hr, 503, "text/plain", xstrdup("draining\n"));
		else if (store_writable(e->store) != 0)
			hookreq_answer(hr, 503, "text/plain", xstrdup("store unavailable\n"));
		else if (e->conf->sandbox.backend == SANDBOX_BWRAP &&
		    sandbox_available(e->conf->sandbox.user, &why) != 0) {
			/* Every run would fail: a load balancer should know (the answer is cached). */
			hookreq_answer(hr, 503, "text/plain", xprintf("%s\n", why));
			free(why);
		} else
			hookreq_answer(hr, 200, "text/plain", xstrdup("ok\n"));
	}
}

static void
server_ask(struct front *f, struct evhttp_request *req, enum hookreq_kind kind,
    const char *route)
{
	struct server	*srv = f->srv;
	struct hookreq	*hr = hookreq_new(f, req, kind, route);

	pthread_mutex_lock(&srv->mu);
	TAILQ_INSERT_TAIL(&srv->asks, hr, entry);
	event_active(srv->ask_ev, 0, 0);
	pthread_mutex_unlock(&srv->mu);
}

/* Splits "/o/{org}/hooks/{name}"; returns 0 and copies the segments. */
static int
server_hook_path(const char *path, char *org, size_t orglen, char *hook, size_t hooklen)
{
	const char	*p, *slash;
	size_t		 n;

	if (strncmp(path, "/o/", 3) != 0)
		return -1;
	p = path + 3;
	if ((slash = strchr(p, '/')) == NULL || (n = slash - p) == 0 || n >= orglen)
		return -1;
	memcpy(org, p, n);
	org[n] = '\0';
	p = slash;
	if (strncmp(p, "/hooks/", 7) != 0)
		return -1;
	p += 7;
	n = strcspn(p, "?");
	if (n == 0 || n >= hooklen || memchr(p, '/', n) != NULL)
		return -1;
	memcpy(hook, p, n);
	hook[n] = '\0';
	return 0;
}

/* Front: verification, normalization, matching and the runs' prompts. */
static struct ingest_item *
hookreq_verify(struct hookreq *hr)
{
	struct source_req	 sr;
	struct spur_event	*ev;

	memset(&sr, 0, sizeof sr);
	sr.conf = hr->conf;
	sr.org = config_org(hr->conf, hr->org_name);
	sr.org_name = hr->org_name;
	sr.hook = hr->hook;
	sr.headers = hr->headers;
	sr.nheaders = hr->nheaders;
	sr.body = hr->body;
	sr.len = hr->len;
	sr.body_own = &hr->body;	/* a JSON body becomes the event's payload text */
	sr.now_ms = hr->now;
	if (sr.org != NULL && hr->src == &source_webhook)
		sr.webhook = automation_webhook(hr->set, hr->org_name, hr->hook);
	hr->src->handle(&sr, &hr->res);
	if (hr->res.verdict != SOURCE_EVENT)
		return NULL;
	ev = hr->res.event;
	hr->res.event = NULL;
	/* Who the actor is, when authors needs more than the event says and it is not known. */
	if (automation_set_authors_need(hr->set, ev, &hr->person_groups) &&
	    (ev->person = people_cached(hr->srv->engine->people, ev, hr->person_groups)) ==
	    NULL) {
		hr->person_ev = ev;
		return NULL;
	}
	strv_free(hr->person_groups);
	hr->person_groups = NULL;
	return ingest_prepare(hr->srv->engine->ingest, hr->set, ev);
}

/*
 * limits.unsigned_body for a hook anyone may send to (auth: none), else -1:
 * those get the smaller limit, since nothing else bounds what strangers make
 * the engine hold.
 */
static long long
server_unsigned_limit(const struct config *conf, const struct automation_set *set,
    const char *org_name, const char *hook)
{
	const struct webhook_def	*def;

	if (source_find(hook) != &source_webhook || config_org(conf, org_name) == NULL ||
	    (def = automation_webhook(set, org_name, hook)) == NULL ||
	    def->auth != WH_AUTH_NONE)
		return -1;
	return (long long)conf->limit_unsigned_body;
}

/* Front, from its clock: the same limit, from a request's head before its body is read. */
static long long
front_body_limit_cb(const char *target, void *arg)
{
	struct front		*f = arg;
	struct automation_set	*set;
	struct config		*conf;
	char			 org[128], hook[128];
	long long		 limit;

	if (server_hook_path(target, org, sizeof org, hook, sizeof hook) != 0)
		return -1;
	conf = serve_config_ref(f->srv->engine, &set);
	limit = server_unsigned_limit(conf, set, org, hook);
	automation_set_unref(set);
	config_free(conf);
	return limit;
}

/* Front: a webhook, verified and answered here unless its event goes to ingest. */
static void
server_hook(struct front *f, struct evhttp_request *req, const char *org_name,
    const char *hook)
{
	struct server		*srv = f->srv;
	const struct source	*src = source_find(hook);
	struct evkeyvalq	*in = evhttp_request_get_input_headers(req);
	struct evkeyval		*kv;
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	struct hookreq		*hr;
	struct source_result	*res;
	struct ingest_item	*item;
	char			*peer;
	size_t			 nh = 0;
	long long		 limit;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		server_reply(srv, req, src->name, 405, NULL, NULL);
		return;
	}
	hr = hookreq_new(f, req, HOOKREQ_HOOK, src->name);
	hr->src = src;
	hr->conf = serve_config_ref(srv->engine, &hr->set);
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		if (nh == HOOK_MAX_HEADERS || (int)nh == hr->conf->limit_headers) {
			if ((req = hookreq_take(hr)) != NULL)
				server_reply(srv, req, src->name, 431, NULL, NULL);
			hookreq_free(hr);
			return;
		}
		nh++;
	}
	hr->len = evbuffer_get_length(body);
	limit = server_unsigned_limit(hr->conf, hr->set, org_name, hook);
	if (limit >= 0 && hr->len > (unsigned long long)limit) {
		if ((req = hookreq_take(hr)) != NULL) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
			    "close");
			server_reply(srv, req, src->name, 413, NULL, NULL);
		}
		hookreq_free(hr);
		return;
	}
	hr->org_name = xstrdup(org_name);
	hr->hook = xstrdup(hook);
	/* evhttp's own strings: the request is verified before this callback returns. */
	hr->headers = xcalloc(nh, sizeof *hr->headers);
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		hr->headers[hr->nheaders].name = kv->key;
		hr->headers[hr->nheaders].value = kv->value;
		hr->nheaders++;
	}
	hr->len = evbuffer_get_length(body);
	hr->body = xmalloc(hr->len + 1);
	evbuffer_copyout(body, hr->body, hr->len);
	hr->body[hr->len] = '\0';
	hr->now = now_ms();

	item = hookreq_verify(hr);
	/* The headers are evhttp's, gone with the request: nothing reads them after this. */
	free(hr->headers);
	hr->headers = NULL;
	hr->nheaders = 0;
	res = &hr->res;
	switch (res->verdict) {
	case SOURCE_UNAUTHORIZED:
		peer = server_client(srv, req);
		log_warn("event=hook.unauthorized org=%s hook=%s peer=%s reason=%s",
		    log_q(hr->org_name), log_q(hr->hook), peer, log_q(res->cause));
		free(peer);
		if ((req = hookreq_take(hr)) != NULL)
			server_unauthorized(srv, req, hr->route);
		break;
	case SOURCE_BAD:
		peer = server_client(srv, req);
		log_warn("event=hook.bad_request org=%s hook=%s peer=%s reason=%s",
		    log_q(hr->org_name), log_q(hr->hook), peer, log_q(res->cause));
		free(peer);
		if ((req = hookreq_take(hr)) != NULL)
			server_reply_json(srv, req, hr->route, 400, json_pack("{s:s,s:s}",
			    "error", "bad_request", "detail", res->cause != NULL ? res->cause :
			    "bad request"));
		break;
	case SOURCE_REPLY:
		log_info("event=hook.reply org=%s hook=%s status=%d", log_q(hr->org_name),
		    log_q(hr->hook), res->status);
		if ((req = hookreq_take(hr)) != NULL)
			server_reply(srv, req, hr->route, res->status, "application/json",
			    res->reply);
		break;
	case SOURCE_EVENT:
		if (item == NULL) {
			/* The loop asks who the actor is, then hands the event to ingest. */
			hr->kind = HOOKREQ_PERSON;
			pthread_mutex_lock(&srv->mu);
			TAILQ_INSERT_TAIL(&srv->asks, hr, entry);
			event_active(srv->ask_ev, 0, 0);
			pthread_mutex_unlock(&srv->mu);
			return;
		}
		/* Answered when ingest is done with it (hook_done_cb). */
		ingest_submit(srv->engine->ingest, item, hook_done_cb, hr);
		return;
	}
	hookreq_free(hr);
}

/* "/o/{org}/REST": the org into org and "/REST" returned; NULL: not such a path. */
static const char *
server_api_path(const char *uri, char *org, size_t orglen)
{
	const char	*p, *slash;
	size_t		 n;

	if (strncmp(uri, "/o/", 3) != 0)
		return NULL;
	p = uri + 3;
	if ((slash = strchr(p, '/')) == NULL || (n = slash - p) == 0 || n >= orglen ||
	    memchr(p, '?', n) != NULL)
		return NULL;
	memcpy(org, p, n);
	org[n] = '\0';
	return slash;
}

static char *
server_header_dup(struct evkeyvalq *in, const char *name)
{
	const char	*v = evhttp_find_header(in, name);

	return v != NULL ? xstrdup(v) : NULL;
}

/* Front: the OpenAPI document, compiled in. */
static void
server_openapi(struct server *srv, struct evhttp_request *req)
{
	struct evbuffer	*out = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evbuffer_add_reference(out, spur_openapi_json, spur_openapi_json_len, NULL, NULL);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
	metrics_request(srv->engine->metrics, "openapi", 200);
}

/*
 * What every console answer carries: no inline script, no framing, no sniffing.
 * form_action: one more origin its forms may post to (console.c says which).
 */
static void
server_console_headers(struct evkeyvalq *h, const char *cache, const char *form_action)
{
	char	*csp = xprintf("default-src 'none'; script-src 'self'; style-src 'self'; "
		    "img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; "
		    "form-action 'self'%s%s; frame-ancestors 'none'", form_action != NULL ? " " : "",
		    form_action != NULL ? form_action : "");

	evhttp_add_header(h, "Content-Security-Policy", csp);
	free(csp);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Referrer-Policy", "same-origin");
	evhttp_add_header(h, "Cache-Control", cache);
}

/* Front: one of the console's static files, compiled in. */
static void
server_console_asset(struct server *srv, struct evhttp_request *req, const char *name)
{
	const struct console_asset	*a = console_asset_find(name);
	struct evkeyvalq		*h = evhttp_request_get_output_headers(req);
	struct evbuffer			*out;

	if (a == NULL || strcmp(name, "index.html") == 0) {
		server_reply(srv, req, "console", 404, "application/json", "{\"error\":\"not_found\"}");
		return;
	}
	out = evbuffer_new();
	server_console_headers(h, "public, max-age=3600", NULL);
	evhttp_add_header(h, "Content-Type", a->ctype);
	evbuffer_add_reference(out, a->data, a->len, NULL, NULL);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
	metrics_request(srv->engine->metrics, "console", 200);
}

/* Front: an org API request goes to the loop, which owns the store and the keys. */
static void
server_api(struct front *f, struct evhttp_request *req, const char *org)
{
	struct server		*srv = f->srv;
	struct evkeyvalq	*in = evhttp_request_get_input_headers(req);
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	const char		*uri = evhttp_request_get_uri(req), *rest, *method;
	struct hookreq		*hr;
	char			 o[128];
	size_t			 n;

	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET: method = "GET"; break;
	case EVHTTP_REQ_POST: method = "POST"; break;
	case EVHTTP_REQ_PUT: method = "PUT"; break;
	case EVHTTP_REQ_DELETE: method = "DELETE"; break;
	default: method = "OTHER"; break;
	}
	rest = org != NULL ? server_api_path(uri, o, sizeof o) : uri;
	hr = org != NULL ? hookreq_new(f, req, HOOKREQ_API, "api") :
	    hookreq_new(f, req, HOOKREQ_CONSOLE, "console");
	hr->api.method = xstrdup(method);
	hr->api.org = org != NULL ? xstrdup(org) : NULL;
	n = strcspn(rest, "?");
	hr->api.path = xstrndup(rest, n);
	hr->api.query = rest[n] == '?' ? xstrdup(rest + n + 1) : NULL;
	hr->api.authorization = server_header_dup(in, "Authorization");
	hr->api.idempotency_key = server_header_dup(in, "Idempotency-Key");
	hr->api.last_event_id = server_header_dup(in, "Last-Event-ID");
	hr->api.mcp_session = server_header_dup(in, "Mcp-Session-Id");
	hr->api.mcp_version = server_header_dup(in, "MCP-Protocol-Version");
	hr->api.accept = server_header_dup(in, "Accept");
	hr->api.origin = server_header_dup(in, "Origin");
	hr->api.cookie = server_header_dup(in, "Cookie");
	hr->api.csrf = server_header_dup(in, "X-CSRF-Token");
	hr->api.peer = server_client(srv, req);
	hr->api.len = evbuffer_get_length(body);
	hr->api.body = xmalloc(hr->api.len + 1);
	evbuffer_copyout(body, hr->api.body, hr->api.len);
	hr->api.body[hr->api.len] = '\0';
	hr->len = hr->api.len;
	pthread_mutex_lock(&srv->mu);
	TAILQ_INSERT_TAIL(&srv->asks, hr, entry);
	event_active(srv->ask_ev, 0, 0);
	pthread_mutex_unlock(&srv->mu);
}

/* RFC 9110 tchar: what a header name is made of (no space, no colon, no control). */
static int
server_token(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
			return 0;
	}
	return 1;
}

/*
 * Why the request's length is not what every reader of it would agree on, or
 * NULL when it is (RFC 9112 section 6.3). evhttp takes the first of two
 * Content-Lengths, does not see "Transfer-Encoding " (a space before the
 * colon), reads Content-Length when the coding is not exactly chunked, and
 * reads no body for a GET: a proxy in front that frames the request otherwise
 * would pass a second request, hidden in this one's body, through to us.
 */
static const char *
server_framing_bad(struct evhttp_request *req)
{
	struct evkeyvalq	*in = evhttp_request_get_input_headers(req);
	struct evkeyval		*kv;
	const char		*cl = NULL, *te = NULL;
	int			 ncl = 0, nte = 0;

	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_POST:
	case EVHTTP_REQ_PUT:
	case EVHTTP_REQ_PATCH:
		break;
	default:
		/* evhttp reads no body for these: a length they announce is another request. */
		if ((cl = evhttp_find_header(in, "Content-Length")) != NULL &&
		    strspn(cl, "0") != strlen(cl))
			return "a body on a request that has none";
		if (evhttp_find_header(in, "Transfer-Encoding") != NULL)
			return "a body on a request that has none";
		cl = NULL;
		break;
	}
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		if (!server_token(kv->key))
			return "a header name that is not a token";
		if (strcasecmp(kv->key, "Content-Length") == 0) {
			cl = kv->value;
			ncl++;
		} else if (strcasecmp(kv->key, "Transfer-Encoding") == 0) {
			te = kv->value;
			nte++;
		}
	}
	if (ncl > 1)
		return "more than one Content-Length";
	if (cl != NULL && (cl[0] == '\0' || strspn(cl, "0123456789") != strlen(cl)))
		return "a Content-Length that is not a number";
	if (nte > 1)
		return "more than one Transfer-Encoding";
	if (te != NULL && cl != NULL)
		return "both Transfer-Encoding and Content-Length";
	if (te != NULL && strcasecmp(te, "chunked") != 0)
		return "a Transfer-Encoding other than chunked";
	return NULL;
}

/*
 * The probes and /metrics, answered on the loop: /livez while the loop turns,
 * /readyz (and /healthz, its older name) while this node should be sent work.
 */
struct server_probe {
	const char		*path;
	const char		*route;		/* its name in /metrics */
	enum hookreq_kind	 kind;
};

static const struct server_probe server_probes[] = {
	{ "/healthz", "healthz", HOOKREQ_HEALTHZ },
	{ "/readyz", "readyz", HOOKREQ_HEALTHZ },
	{ "/livez", "livez", HOOKREQ_LIVEZ },
	{ "/metrics", "metrics", HOOKREQ_METRICS },
};

static const struct server_probe *
server_probe(const char *uri, size_t n)
{
	size_t	i;

	for (i = 0; i < SPUR_ARRLEN(server_probes); i++) {
		if (strlen(server_probes[i].path) == n &&
		    strncmp(uri, server_probes[i].path, n) == 0)
			return &server_probes[i];
	}
	return NULL;
}

/* metrics.listen has its listener (made before the fronts start): the public one hides /metrics. */
static int
server_metrics_apart(const struct server *srv)
{
	return srv->metrics_http != NULL;
}

static void
server_request_cb(struct evhttp_request *req, void *arg)
{
	struct front	*f = arg;
	struct server	*srv = f->srv;
	const char	*uri = evhttp_request_get_uri(req);
	char		 org[128], hook[128];
	size_t		 n = strcspn(uri, "?");
	int		 get = evhttp_request_get_command(req) == EVHTTP_REQ_GET;
	const struct server_probe *probe;
	const char	*why;
	char		*peer;

	if (reqclock_done(f->clock, req) != 0) {
		/* It arrived whole while the budget was over: answered as busy all the same. */
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		server_reply(srv, req, "busy", 503, "application/json",
		    "{\"error\":\"unavailable\",\"detail\":\"server busy\"}");
		return;
	}
	if ((why = server_framing_bad(req)) != NULL) {
		/* What follows on the connection may be a smuggled request: never read it. */
		peer = server_client(srv, req);
		log_warn("event=http.bad_framing peer=%s reason=%s consequence=\"400, "
		    "connection closed\"", peer, log_q(why));
		free(peer);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		server_reply(srv, req, "other", 400, "application/json",
		    "{\"error\":\"bad_request\",\"detail\":\"ambiguous message length\"}");
		return;
	}
	if ((probe = server_probe(uri, n)) != NULL &&
	    (probe->kind != HOOKREQ_METRICS || !server_metrics_apart(srv))) {
		if (!get) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
			server_reply(srv, req, probe->route, 405, NULL, NULL);
		} else
			server_ask(f, req, probe->kind, probe->route);
		return;
	}
	if (server_hook_path(uri, org, sizeof org, hook, sizeof hook) == 0) {
		server_hook(f, req, org, hook);
		return;
	}
	if (n == 13 && strncmp(uri, "/openapi.json", 13) == 0) {
		if (!get) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
			server_reply(srv, req, "openapi", 405, NULL, NULL);
		} else
			server_openapi(srv, req);
		return;
	}
	if (server_api_path(uri, org, sizeof org) != NULL) {
		server_api(f, req, org);
		return;
	}
	{
		char *path = xstrndup(uri, n);

		if (strncmp(path, "/console/assets/", 16) == 0) {
			if (!get) {
				evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
				    "GET");
				server_reply(srv, req, "console", 405, NULL, NULL);
			} else
				server_console_asset(srv, req, path + 16);
			free(path);
			return;
		}
		if (console_path(path)) {
			free(path);
			server_api(f, req, NULL);
			return;
		}
		free(path);
	}
	server_reply(srv, req, "other", 404, "application/json", "{\"error\":\"not_found\"}");
}

/*
 * Our own listening socket: evhttp's listens with a backlog of 128, and a burst
 * of connections past it makes every new client (a health check too) wait for
 * a SYN retry.
 */
static int
server_listen_socket(const char *host, int port, char **cause)
{
	struct addrinfo	 hints, *res = NULL;
	char		 portstr[16];
	int		 fd = -1, on = 1, rc;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(portstr, sizeof portstr, "%d", port);
	if ((rc = getaddrinfo(host, portstr, &hints, &res)) != 0) {
		xasprintf(cause, "cannot listen on %s:%d: %s", host, port, gai_strerror(rc));
		return -1;
	}
	if ((fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    res->ai_protocol)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		xasprintf(cause, "cannot listen on %s:%d: %s", host, port, strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Every front accepts on the address (each on its own duplicate of the socket). */
/* HOST:PORT, [V6]:PORT or :PORT (any address): the host, to free, and the port. */
static char *
server_host(const char *addr, int *port)
{
	char	*host = xstrdup(addr), *colon;

	colon = strrchr(host, ':');
	*colon = '\0';
	*port = atoi(colon + 1);
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (host[0] == '\0') {
		free(host);
		host = xstrdup("0.0.0.0");
	}
	return host;
}

/* metrics.listen: /metrics alone, answered on the loop (which owns the store's connection). */
static void
server_metrics_cb(struct evhttp_request *req, void *arg)
{
	struct server	*srv = arg;
	const char	*uri = evhttp_request_get_uri(req);
	struct evbuffer	*b;
	char		*text;
	int		 status;

	if (strncmp(uri, "/metrics", 8) != 0 || (uri[8] != '\0' && uri[8] != '?'))
		status = 404;
	else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
		status = 405;
	} else
		status = 200;
	b = evbuffer_new();
	if (status == 200) {
		text = server_metrics(srv->engine);
		evbuffer_add(b, text, strlen(text));
		free(text);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		    "text/plain; version=0.0.4");
	}
	metrics_request(srv->engine->metrics, "metrics", status);
	evhttp_send_reply(req, status, status == 200 ? "OK" : status == 404 ? "Not Found" :
	    "Method Not Allowed", b);
	evbuffer_free(b);
}

static int
server_metrics_listen(struct server *srv, const char *addr, char **cause)
{
	char	*host;
	int	 port, fd;

	host = server_host(addr, &port);
	fd = server_listen_socket(host, port, cause);
	if (fd != -1 && ((srv->metrics_http = evhttp_new(srv->engine->base)) == NULL ||
	    evhttp_accept_socket_with_handle(srv->metrics_http, fd) == NULL)) {
		xasprintf(cause, "cannot listen on %s", addr);
		close(fd);
		fd = -1;
	}
	if (fd != -1) {
		evhttp_set_allowed_methods(srv->metrics_http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
		    EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
		evhttp_set_gencb(srv->metrics_http, server_metrics_cb, srv);
		log_info("event=listen addr=%s host=%s port=%d what=metrics", log_q(addr),
		    log_q(host), port);
	}
	free(host);
	return fd == -1 ? -1 : 0;
}

static int
server_bind(struct server *srv, const char *addr, char **cause)
{
	char				*host;
	int				 port, fd, dfd, i;
	struct evhttp_bound_socket	*b;
	struct front			*f;
	struct sockaddr_storage		 ss;
	socklen_t			 slen = sizeof ss;

	if (srv->fronts[0].nbound == SERVER_MAX_LISTEN) {
		xasprintf(cause, "too many listen addresses");
		return -1;
	}
	host = server_host(addr, &port);
	if ((fd = server_listen_socket(host, port, cause)) == -1) {
		free(host);
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &slen) == 0) {
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	for (i = 0; i < srv->nfronts; i++) {
		f = &srv->fronts[i];
		dfd = i == 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (dfd == -1 || (b = evhttp_accept_socket_with_handle(f->http, dfd)) == NULL) {
			xasprintf(cause, "cannot listen on %s", addr);
			if (dfd != -1)
				close(dfd);
			free(host);
			return -1;
		}
		lpause_init(&f->pause[f->nbound], f->base, evhttp_bound_socket_get_listener(b));
		evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(b),
		    front_accept_error_cb);
		f->bound[f->nbound++] = b;
	}
	if (srv->port == 0)
		srv->port = port;
	log_info("event=listen addr=%s host=%s port=%d fronts=%d", log_q(addr), log_q(host),
	    port, srv->nfronts);
	free(host);
	return 0;
}

/* libevent hands a listener's error callback evhttp's pointer, not ours: it is found by itself. */
static struct server	*server_self;

/* A front could not accept (no descriptor left): that listener rests (lpause.h). */
static void
front_accept_error_cb(struct evconnlistener *lis, void *arg)
{
	int		 err = EVUTIL_SOCKET_ERROR(), i;
	size_t		 j;
	struct front	*f;

	for (i = 0; server_self != NULL && i < server_self->nfronts; i++) {
		f = &server_self->fronts[i];
		for (j = 0; j < f->nbound; j++) {
			if (f->pause[j].lis != lis)
				continue;
			metrics_count(server_self->engine->metrics, "http_accept_pauses", 1);
			if (lpause_failed(&f->pause[j]))
				log_warn("event=http.accept_failed error=%s consequence=\"not "
				    "accepting for %d ms, new connections wait\" next_log_in_s=%d",
				    log_q(strerror(err)), LPAUSE_MS, LPAUSE_LOG_MS / 1000);
			return;
		}
	}
}

/* Front: stops accepting (the engine is stopping). */
static void
front_close_cb(evutil_socket_t fd, short what, void *arg)
{
	struct front	*f = arg;
	size_t		 i;

	for (i = 0; i < f->nbound; i++) {
		lpause_clear(&f->pause[i]);
		evhttp_del_accept_socket(f->http, f->bound[i]);
	}
	f->nbound = 0;
}

static void *
front_main(void *arg)
{
	struct front	*f = arg;

	event_base_loop(f->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* Front: the listener limits of conf (at start, and after a reload). */
static void
front_limits(struct front *f, const struct config *conf)
{
	struct timeval	 tv;

	/* Over the limit, evhttp answers 413 from Content-Length and reads no further. */
	evhttp_set_max_body_size(f->http, (ev_ssize_t)conf->limit_body);
	evhttp_set_max_headers_size(f->http, (ev_ssize_t)conf->limit_header);
	tv.tv_sec = conf->limit_idle;
	tv.tv_usec = 0;
	evhttp_set_timeout_tv(f->http, &tv);
	reqclock_set_limit(f->clock, (int)conf->limit_request);
	reqbudget_set_limit(f->srv->budget, (long long)conf->limit_buffered);
}

static void
front_limits_cb(evutil_socket_t fd, short what, void *arg)
{
	struct front		*f = arg;
	struct automation_set	*set;
	struct config		*conf = serve_config_ref(f->srv->engine, &set);

	front_limits(f, conf);
	automation_set_unref(set);
	config_free(conf);
}

static void
front_init(struct server *srv, struct front *f, const struct config *conf)
{
	f->srv = srv;
	TAILQ_INIT(&f->answers);
	if ((f->base = event_base_new()) == NULL || (f->http = evhttp_new(f->base)) == NULL)
		fatal("cannot make an HTTP front");
	/*
	 * Every method evhttp knows reaches the routes, which answer 405 with
	 * Allow for the ones they do not take: left out, TRACE and CONNECT got
	 * evhttp's 501 page (CONNECT only once the connection had idled out).
	 */
	evhttp_set_allowed_methods(f->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
	f->clock = reqclock_new(f->base, (int)conf->limit_request, srv->budget,
	    srv->engine->metrics);
	evhttp_set_bevcb(f->http, reqclock_bevcb, f->clock);
	reqclock_set_body_cb(f->clock, front_body_limit_cb, f);
	front_limits(f, conf);
	evhttp_set_gencb(f->http, server_request_cb, f);
	f->answer_ev = event_new(f->base, -1, 0, front_answer_cb, f);
	f->close_ev = event_new(f->base, -1, 0, front_close_cb, f);
	f->limits_ev = event_new(f->base, -1, 0, front_limits_cb, f);
	f->trim_ev = evtimer_new(f->base, front_trim_cb, f);
	f->events = api_events_new(f->base, f->clock, conf->store_url, conf->data_dir);
}

struct server *
server_create(struct engine *e, char **cause)
{
	struct server	*srv = xcalloc(1, sizeof *srv);
	size_t		 i;
	int		 n;

	srv->engine = e;
	mallopt(M_MMAP_THRESHOLD, SERVER_TRIM_BODY);
	pthread_mutex_init(&srv->mu, NULL);
	TAILQ_INIT(&srv->asks);
	srv->ask_ev = event_new(e->base, -1, 0, server_ask_cb, srv);
	srv->budget = e->budget = reqbudget_new((long long)e->conf->limit_buffered);
	server_self = srv;
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	srv->nfronts = n < 1 ? 1 : n > SERVER_MAX_FRONTS ? SERVER_MAX_FRONTS : n;
	for (n = 0; n < srv->nfronts; n++)
		front_init(srv, &srv->fronts[n], e->conf);
	for (i = 0; i < e->conf->nlisten; i++) {
		if (server_bind(srv, e->conf->listen[i], cause) != 0) {
			server_free(srv);
			return NULL;
		}
	}
	if (e->conf->metrics_listen != NULL &&
	    server_metrics_listen(srv, e->conf->metrics_listen, cause) != 0) {
		server_free(srv);
		return NULL;
	}
	for (n = 0; n < srv->nfronts; n++) {
		if (pthread_create(&srv->fronts[n].thread, NULL, front_main,
		    &srv->fronts[n]) != 0)
			fatal("cannot start an HTTP front");
		srv->fronts[n].started = 1;
	}
	return srv;
}

void
server_reload(struct server *srv)
{
	int	 i;

	if (srv == NULL)
		return;
	for (i = 0; i < srv->nfronts; i++)
		event_active(srv->fronts[i].limits_ev, 0, 0);
}

void
server_stop_accepting(struct server *srv)
{
	int	 i;

	for (i = 0; i < srv->nfronts; i++)
		event_active(srv->fronts[i].close_ev, 0, 0);
}

int
server_busy(struct server *srv)
{
	int	 n;

	pthread_mutex_lock(&srv->mu);
	n = srv->inflight;
	pthread_mutex_unlock(&srv->mu);
	return n;
}

int
server_port(const struct server *srv)
{
	return srv->port;
}

void
server_free(struct server *srv)
{
	struct hookreq	*hr;
	struct front	*f;
	size_t		 j;
	int		 i;

	if (srv == NULL)
		return;
	for (i = 0; i < srv->nfronts; i++) {
		f = &srv->fronts[i];
		if (f->started) {
			event_base_loopbreak(f->base);
			pthread_join(f->thread, NULL);
		}
	}
	if (srv->metrics_http != NULL)
		evhttp_free(srv->metrics_http);
	/* What ingest still holds comes back as answers, to the fronts' queues. */
	if (srv->engine->ingest != NULL)
		ingest_flush(srv->engine->ingest);
	for (i = 0; i < srv->nfronts; i++) {
		f = &srv->fronts[i];
		for (j = 0; j < f->nbound; j++)
			lpause_clear(&f->pause[j]);
		/* The streams let go of their requests before evhttp frees them. */
		api_events_free(f->events);
		/* Closing the connections drops the answers of requests still here. */
		if (f->http != NULL)
			evhttp_free(f->http);
		reqclock_free(f->clock);
		while ((hr = TAILQ_FIRST(&f->answers)) != NULL) {
			TAILQ_REMOVE(&f->answers, hr, entry);
			hookreq_free(hr);
		}
		if (f->answer_ev != NULL)
			event_free(f->answer_ev);
		if (f->close_ev != NULL)
			event_free(f->close_ev);
		if (f->limits_ev != NULL)
			event_free(f->limits_ev);
		if (f->trim_ev != NULL)
			event_free(f->trim_ev);

		if (f->base != NULL)
			event_base_free(f->base);
	}
	while ((hr = TAILQ_FIRST(&srv->asks)) != NULL) {
		TAILQ_REMOVE(&srv->asks, hr, entry);
		hookreq_free(hr);
	}
	if (srv->engine->budget == srv->budget)
		srv->engine->budget = NULL;
	reqbudget_free(srv->budget);
	if (server_self == srv)
		server_self = NULL;
	if (srv->ask_ev != NULL)
		event_free(srv->ask_ev);
	pthread_mutex_destroy(&srv->mu);
	free(srv);
}
