/* server.c: the HTTP listener: limits, routes, and the webhook front door of SPEC section 5. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "ingest.h"
#include "serve.h"
#include "source.h"
#include "store.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <pthread.h>
#include <sys/queue.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_MAX_LISTEN	16
#define HOOK_MAX_HEADERS	256
#define SERVER_MAX_WORKERS	4

struct server {
	struct engine			*engine;
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound[SERVER_MAX_LISTEN];
	size_t				 nbound;
	int				 port;
	int				 inflight;

	/*
	 * Verification and parsing (the costly part: HMAC over the body, JSON) run
	 * on worker threads; the loop keeps accepting and answering meanwhile.
	 */
	pthread_t			 workers[SERVER_MAX_WORKERS];
	int				 nworkers;
	pthread_mutex_t			 mu;
	pthread_cond_t			 cv;
	TAILQ_HEAD(, hookreq)		 todo;
	TAILQ_HEAD(, hookreq)		 done;
	struct event			*done_ev;
	int				 stop;
};

/*
 * One webhook request, from its arrival to its answer. The worker reads only
 * what is copied here (and the config and automations it holds references to);
 * req becomes NULL if the client leaves, and the request still goes its way.
 */
struct hookreq {
	struct server		*srv;
	struct evhttp_request	*req;
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
	struct ingest_item	*item;		/* SOURCE_EVENT: matched and prepared */
	TAILQ_ENTRY(hookreq)	 entry;
};

static void
server_reply(struct server *srv, struct evhttp_request *req, const char *route, int status,
    const char *ctype, const char *body)
{
	struct evbuffer	*out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char	*reason;

	switch (status) {
	case 200: reason = "OK"; break;
	case 400: reason = "Bad Request"; break;
	case 401: reason = "Unauthorized"; break;
	case 404: reason = "Not Found"; break;
	case 405: reason = "Method Not Allowed"; break;
	case 413: reason = "Payload Too Large"; break;
	case 431: reason = "Request Header Fields Too Large"; break;
	case 503: reason = "Service Unavailable"; break;
	default: reason = "Error"; break;
	}
	if (ctype != NULL)
		evhttp_add_header(h, "Content-Type", ctype);
	if (body != NULL)
		evbuffer_add(out, body, strlen(body));
	evhttp_send_reply(req, status, reason, out);
	evbuffer_free(out);
	metrics_request(srv->engine->metrics, route, status);
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

static void
server_unavailable(struct server *srv, struct evhttp_request *req, const char *route,
    const char *why)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
	server_reply_json(srv, req, route, 503, json_pack("{s:s,s:s}", "error",
	    "unavailable", "detail", why));
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

static void
hookreq_free(struct hookreq *hr)
{
	size_t	 i;

	for (i = 0; i < hr->nheaders; i++) {
		free((char *)hr->headers[i].name);
		free((char *)hr->headers[i].value);
	}
	free(hr->headers);
	free(hr->body);
	free(hr->org_name);
	free(hr->hook);
	source_result_free(&hr->res);
	ingest_item_free(hr->item);
	if (hr->set != NULL)
		automation_set_unref(hr->set);
	config_free(hr->conf);
	hr->srv->inflight--;
	free(hr);
}

/* The answer is about to go out: the connection no longer needs to tell us it closed. */
static struct evhttp_request *
hookreq_take(struct hookreq *hr)
{
	struct evhttp_connection	*evcon;

	if (hr->req != NULL && (evcon = evhttp_request_get_connection(hr->req)) != NULL)
		evhttp_connection_set_closecb(evcon, NULL, NULL);
	return hr->req;
}

static void
hook_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct hookreq	*hr = arg;

	/* The client left: whatever stage the request is in goes on, the answer is dropped. */
	hr->req = NULL;
}

static void
hook_done_cb(enum ingest_status status, const struct spur_event *ev, json_t *runs, void *arg)
{
	struct hookreq		*hr = arg;
	struct server		*srv = hr->srv;
	struct evhttp_request	*req = hookreq_take(hr);

	if (req == NULL)
		;
	else if (status == INGEST_NEW)
		server_reply_json(srv, req, hr->route, 200, json_pack("{s:s,s:O}",
		    "event", ev->id, "runs", runs));
	else if (status == INGEST_DUPLICATE)
		server_reply_json(srv, req, hr->route, 200, json_pack("{s:s,s:b}",
		    "event", ev->id, "duplicate", 1));
	else if (status == INGEST_QUEUE_FULL)
		server_unavailable(srv, req, hr->route, "queue full");
	else
		server_unavailable(srv, req, hr->route, "store unavailable");
	hookreq_free(hr);
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

/*
 * Worker thread: verification, normalization, matching and the runs' prompts;
 * nothing that touches the loop.
 */
static void
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
	sr.now_ms = hr->now;
	if (sr.org != NULL && hr->src == &source_webhook)
		sr.webhook = automation_webhook(hr->set, hr->org_name, hr->hook);
	hr->src->handle(&sr, &hr->res);
	if (hr->res.verdict != SOURCE_EVENT)
		return;
	ev = hr->res.event;
	hr->res.event = NULL;
	/* A JSON body is the payload: keep its text so the store need not re-serialize it. */
	if (hr->len > 0 && ev->payload_raw == NULL && (hr->body[strspn(hr->body,
	    " \t\r\n")] == '{' || hr->body[strspn(hr->body, " \t\r\n")] == '[')) {
		ev->payload_raw = hr->body;
		ev->payload_rawlen = hr->len;
		hr->body = NULL;
	}
	hr->item = ingest_prepare(hr->set, ev);
}

static void *
server_worker_main(void *arg)
{
	struct server	*srv = arg;
	struct hookreq	*hr;

	pthread_mutex_lock(&srv->mu);
	for (;;) {
		while (!srv->stop && TAILQ_EMPTY(&srv->todo))
			pthread_cond_wait(&srv->cv, &srv->mu);
		if (srv->stop)
			break;
		hr = TAILQ_FIRST(&srv->todo);
		TAILQ_REMOVE(&srv->todo, hr, entry);
		pthread_mutex_unlock(&srv->mu);
		hookreq_verify(hr);
		pthread_mutex_lock(&srv->mu);
		TAILQ_INSERT_TAIL(&srv->done, hr, entry);
		event_active(srv->done_ev, 0, 0);
	}
	pthread_mutex_unlock(&srv->mu);
	return NULL;
}

/* Loop: a verified (or refused) request: answer it, or hand its event to ingest. */
static void
hookreq_verified(struct hookreq *hr)
{
	struct server		*srv = hr->srv;
	struct source_result	*res = &hr->res;
	struct evhttp_request	*req = hr->req;
	struct ingest_item	*item;
	const char		*peer = req != NULL ? server_peer(req) : "-";

	switch (res->verdict) {
	case SOURCE_UNAUTHORIZED:
		log_warn("event=hook.unauthorized org=%s hook=%s peer=%s reason=%s",
		    log_q(hr->org_name), log_q(hr->hook), peer, log_q(res->cause));
		if ((req = hookreq_take(hr)) != NULL)
			server_unauthorized(srv, req, hr->route);
		break;
	case SOURCE_BAD:
		log_warn("event=hook.bad_request org=%s hook=%s peer=%s reason=%s",
		    log_q(hr->org_name), log_q(hr->hook), peer, log_q(res->cause));
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
		/* ingest owns the event now; it may answer at once (queue full). */
		item = hr->item;
		hr->item = NULL;
		ingest_submit(srv->engine->ingest, item, hook_done_cb, hr);
		return;
	}
	hookreq_free(hr);
}

static void
server_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server	*srv = arg;
	struct hookreq	*hr;

	for (;;) {
		pthread_mutex_lock(&srv->mu);
		if ((hr = TAILQ_FIRST(&srv->done)) != NULL)
			TAILQ_REMOVE(&srv->done, hr, entry);
		pthread_mutex_unlock(&srv->mu);
		if (hr == NULL)
			break;
		hookreq_verified(hr);
	}
}

static void
server_hook(struct server *srv, struct evhttp_request *req, const char *org_name,
    const char *hook)
{
	struct engine		*e = srv->engine;
	const struct source	*src = source_find(hook);
	struct evkeyvalq	*in = evhttp_request_get_input_headers(req);
	struct evkeyval		*kv;
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	struct hookreq		*hr;
	size_t			 nh = 0;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		server_reply(srv, req, src->name, 405, NULL, NULL);
		return;
	}
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		if (nh == HOOK_MAX_HEADERS || (int)nh == e->conf->limit_headers) {
			server_reply(srv, req, src->name, 431, NULL, NULL);
			return;
		}
		nh++;
	}
	hr = xcalloc(1, sizeof *hr);
	hr->srv = srv;
	hr->req = req;
	snprintf(hr->route, sizeof hr->route, "%s", src->name);
	hr->src = src;
	hr->conf = config_ref(e->conf);
	hr->set = automation_set_ref(e->automations);
	hr->org_name = xstrdup(org_name);
	hr->hook = xstrdup(hook);
	hr->headers = xcalloc(nh, sizeof *hr->headers);
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		hr->headers[hr->nheaders].name = xstrdup(kv->key);
		hr->headers[hr->nheaders].value = xstrdup(kv->value);
		hr->nheaders++;
	}
	hr->len = evbuffer_get_length(body);
	hr->body = xmalloc(hr->len + 1);
	evbuffer_copyout(body, hr->body, hr->len);
	hr->body[hr->len] = '\0';
	hr->now = now_ms();
	srv->inflight++;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), hook_close_cb, hr);
	pthread_mutex_lock(&srv->mu);
	TAILQ_INSERT_TAIL(&srv->todo, hr, entry);
	pthread_cond_signal(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
}

static void
server_request_cb(struct evhttp_request *req, void *arg)
{
	struct server	*srv = arg;
	struct engine	*e = srv->engine;
	const char	*uri = evhttp_request_get_uri(req);
	char		 org[128], hook[128], *text;
	size_t		 n = strcspn(uri, "?");
	int		 get = evhttp_request_get_command(req) == EVHTTP_REQ_GET;

	if (n == 8 && strncmp(uri, "/healthz", 8) == 0) {
		if (!get) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
			server_reply(srv, req, "healthz", 405, NULL, NULL);
		} else if (store_writable(e->store) == 0)
			server_reply(srv, req, "healthz", 200, "text/plain", "ok\n");
		else
			server_reply(srv, req, "healthz", 503, "text/plain", "store unavailable\n");
		return;
	}
	if (n == 8 && strncmp(uri, "/metrics", 8) == 0) {
		if (!get) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
			server_reply(srv, req, "metrics", 405, NULL, NULL);
			return;
		}
		text = metrics_render(e->metrics, e);
		server_reply(srv, req, "metrics", 200, "text/plain; version=0.0.4", text);
		free(text);
		return;
	}
	if (server_hook_path(uri, org, sizeof org, hook, sizeof hook) == 0) {
		server_hook(srv, req, org, hook);
		return;
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

static int
server_bind(struct server *srv, const char *addr, char **cause)
{
	char				*host, *colon;
	int				 port;
	struct evhttp_bound_socket	*b;
	struct sockaddr_storage		 ss;
	socklen_t			 slen = sizeof ss;
	int				 fd;

	if (srv->nbound == SERVER_MAX_LISTEN) {
		xasprintf(cause, "too many listen addresses");
		return -1;
	}
	host = xstrdup(addr);
	colon = strrchr(host, ':');
	*colon = '\0';
	port = atoi(colon + 1);
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (host[0] == '\0') {
		free(host);
		host = xstrdup("0.0.0.0");
	}
	if ((fd = server_listen_socket(host, port, cause)) == -1) {
		free(host);
		return -1;
	}
	if ((b = evhttp_accept_socket_with_handle(srv->http, fd)) == NULL) {
		xasprintf(cause, "cannot listen on %s", addr);
		close(fd);
		free(host);
		return -1;
	}
	if (getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *)&ss, &slen) == 0) {
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	if (srv->nbound == 0)
		srv->port = port;
	srv->bound[srv->nbound++] = b;
	log_info("event=listen addr=%s host=%s port=%d", log_q(addr), log_q(host), port);
	free(host);
	return 0;
}

struct server *
server_create(struct engine *e, char **cause)
{
	struct server	*srv = xcalloc(1, sizeof *srv);
	struct timeval	 tv;
	size_t		 i;

	srv->engine = e;
	if ((srv->http = evhttp_new(e->base)) == NULL)
		fatal("evhttp_new failed");
	evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_PATCH);
	/* Over the limit, evhttp answers 413 from Content-Length and reads no further. */
	evhttp_set_max_body_size(srv->http, (ev_ssize_t)e->conf->limit_body);
	evhttp_set_max_headers_size(srv->http, (ev_ssize_t)e->conf->limit_header);
	tv.tv_sec = e->conf->limit_idle;
	tv.tv_usec = 0;
	evhttp_set_timeout_tv(srv->http, &tv);
	evhttp_set_gencb(srv->http, server_request_cb, srv);
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->cv, NULL);
	TAILQ_INIT(&srv->todo);
	TAILQ_INIT(&srv->done);
	srv->done_ev = event_new(e->base, -1, 0, server_done_cb, srv);
	srv->nworkers = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (srv->nworkers < 1)
		srv->nworkers = 1;
	if (srv->nworkers > SERVER_MAX_WORKERS)
		srv->nworkers = SERVER_MAX_WORKERS;
	for (i = 0; i < (size_t)srv->nworkers; i++) {
		if (pthread_create(&srv->workers[i], NULL, server_worker_main, srv) != 0)
			fatal("cannot start a request worker");
	}
	for (i = 0; i < e->conf->nlisten; i++) {
		if (server_bind(srv, e->conf->listen[i], cause) != 0) {
			server_free(srv);
			return NULL;
		}
	}
	return srv;
}

void
server_stop_accepting(struct server *srv)
{
	size_t	 i;

	for (i = 0; i < srv->nbound; i++)
		evhttp_del_accept_socket(srv->http, srv->bound[i]);
	srv->nbound = 0;
}

int
server_busy(const struct server *srv)
{
	return srv->inflight;
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
	int		 i;

	if (srv == NULL)
		return;
	pthread_mutex_lock(&srv->mu);
	srv->stop = 1;
	pthread_cond_broadcast(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
	for (i = 0; i < srv->nworkers; i++)
		pthread_join(srv->workers[i], NULL);
	/* Closing the connections drops the answers of requests still here. */
	evhttp_free(srv->http);
	while ((hr = TAILQ_FIRST(&srv->todo)) != NULL) {
		TAILQ_REMOVE(&srv->todo, hr, entry);
		hookreq_free(hr);
	}
	while ((hr = TAILQ_FIRST(&srv->done)) != NULL) {
		TAILQ_REMOVE(&srv->done, hr, entry);
		hookreq_free(hr);
	}
	if (srv->done_ev != NULL)
		event_free(srv->done_ev);
	pthread_mutex_destroy(&srv->mu);
	pthread_cond_destroy(&srv->cv);
	free(srv);
}
