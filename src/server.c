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
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_MAX_LISTEN	16
#define HOOK_MAX_HEADERS	256

struct server {
	struct engine			*engine;
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound[SERVER_MAX_LISTEN];
	size_t				 nbound;
	int				 port;
	int				 inflight;
};

/* A webhook request waiting for its commit. */
struct hookreq {
	struct server		*srv;
	struct evhttp_request	*req;
	char			 route[16];
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
hook_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct hookreq	*hr = arg;

	/* The client left before its commit: the commit still happens, the answer is dropped. */
	ingest_cancel(hr->srv->engine->ingest, hr);
	hr->srv->inflight--;
	free(hr);
}

static void
hook_done_cb(enum ingest_status status, const struct spur_event *ev, json_t *runs, void *arg)
{
	struct hookreq			*hr = arg;
	struct server			*srv = hr->srv;
	struct evhttp_connection	*evcon = evhttp_request_get_connection(hr->req);

	if (evcon != NULL)
		evhttp_connection_set_closecb(evcon, NULL, NULL);
	switch (status) {
	case INGEST_NEW:
		server_reply_json(srv, hr->req, hr->route, 200, json_pack("{s:s,s:O}",
		    "event", ev->id, "runs", runs));
		break;
	case INGEST_DUPLICATE:
		server_reply_json(srv, hr->req, hr->route, 200, json_pack("{s:s,s:b}",
		    "event", ev->id, "duplicate", 1));
		break;
	case INGEST_QUEUE_FULL:
		server_unavailable(srv, hr->req, hr->route, "queue full");
		break;
	default:
		server_unavailable(srv, hr->req, hr->route, "store unavailable");
		break;
	}
	srv->inflight--;
	free(hr);
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

static void
server_hook(struct server *srv, struct evhttp_request *req, const char *org_name,
    const char *hook)
{
	struct engine		*e = srv->engine;
	const struct source	*src = source_find(hook);
	struct evkeyvalq	*in = evhttp_request_get_input_headers(req);
	struct evkeyval		*kv;
	struct header		 headers[HOOK_MAX_HEADERS];
	struct source_req	 sr;
	struct source_result	 res;
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	struct hookreq		*hr;
	char			*data;
	size_t			 len, nh = 0;
	const char		*route = src->name;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		server_reply(srv, req, route, 405, NULL, NULL);
		return;
	}
	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		if (nh == HOOK_MAX_HEADERS || (int)nh == e->conf->limit_headers) {
			server_reply(srv, req, route, 431, NULL, NULL);
			return;
		}
		headers[nh].name = kv->key;
		headers[nh].value = kv->value;
		nh++;
	}
	len = evbuffer_get_length(body);
	data = xmalloc(len + 1);
	evbuffer_copyout(body, data, len);
	data[len] = '\0';

	memset(&sr, 0, sizeof sr);
	memset(&res, 0, sizeof res);
	sr.conf = e->conf;
	sr.org = config_org(e->conf, org_name);
	sr.org_name = org_name;
	sr.hook = hook;
	sr.headers = headers;
	sr.nheaders = nh;
	sr.body = data;
	sr.len = len;
	sr.now_ms = now_ms();
	if (sr.org != NULL && src == &source_webhook)
		sr.webhook = automation_webhook(e->automations, org_name, hook);
	src->handle(&sr, &res);

	switch (res.verdict) {
	case SOURCE_UNAUTHORIZED:
		log_warn("event=hook.unauthorized org=%s hook=%s peer=%s reason=%s",
		    log_q(org_name), log_q(hook), server_peer(req), log_q(res.cause));
		server_unauthorized(srv, req, route);
		break;
	case SOURCE_BAD:
		log_warn("event=hook.bad_request org=%s hook=%s peer=%s reason=%s",
		    log_q(org_name), log_q(hook), server_peer(req), log_q(res.cause));
		server_reply_json(srv, req, route, 400, json_pack("{s:s,s:s}", "error",
		    "bad_request", "detail", res.cause != NULL ? res.cause : "bad request"));
		break;
	case SOURCE_REPLY:
		log_info("event=hook.reply org=%s hook=%s status=%d", log_q(org_name),
		    log_q(hook), res.status);
		server_reply(srv, req, route, res.status, "application/json", res.reply);
		break;
	case SOURCE_EVENT:
		/* A JSON body is the payload: keep its text so the store need not re-serialize it. */
		if (len > 0 && (data[strspn(data, " \t\r\n")] == '{' ||
		    data[strspn(data, " \t\r\n")] == '[') && res.event->payload_raw == NULL) {
			res.event->payload_raw = data;
			res.event->payload_rawlen = len;
			data = NULL;
		}
		hr = xcalloc(1, sizeof *hr);
		hr->srv = srv;
		hr->req = req;
		snprintf(hr->route, sizeof hr->route, "%s", route);
		srv->inflight++;
		evhttp_connection_set_closecb(evhttp_request_get_connection(req),
		    hook_close_cb, hr);
		ingest_submit(e->ingest, res.event, hook_done_cb, hr);
		res.event = NULL;
		break;
	}
	source_result_free(&res);
	free(data);
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

static int
server_bind(struct server *srv, const char *addr, char **cause)
{
	char				*host, *colon;
	int				 port;
	struct evhttp_bound_socket	*b;
	struct sockaddr_storage		 ss;
	socklen_t			 slen = sizeof ss;

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
	if ((b = evhttp_bind_socket_with_handle(srv->http, host, port)) == NULL) {
		xasprintf(cause, "cannot listen on %s", addr);
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
	if (srv == NULL)
		return;
	evhttp_free(srv->http);
	free(srv);
}
