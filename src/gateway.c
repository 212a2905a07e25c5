/* gateway.c: a run's model API endpoint: requests go upstream with the org's real key, responses stream back. */
#include "spur.h"
#include "budget.h"
#include "curlev.h"
#include "egress.h"
#include "store.h"
#include "usage.h"

#include <sys/queue.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#define GATEWAY_BODY_MAX	(64 * 1024 * 1024)	/* a request with a long context */
#define GATEWAY_PAUSE_AT	(1024 * 1024)	/* stop reading upstream while the agent lags */
#define GATEWAY_HEAD_SECS	60
#define GATEWAY_CONNECT_SECS	30L
#define GATEWAY_IDLE_SECS	600L		/* upstream silent this long: the request fails */

/*
 * Headers never copied from the agent: hop-by-hop ones, what curl sets
 * itself, and every credential (the agent only has a placeholder).
 */
static const char *gateway_drop_req[] = {
	"host", "content-length", "connection", "keep-alive", "transfer-encoding",
	"proxy-connection", "proxy-authorization", "te", "upgrade", "expect",
	"x-api-key", "authorization", "api-key", "x-goog-api-key",
	/* curl asks for what it can decode, so usage is read from plain text. */
	"accept-encoding",
};

/* Hop-by-hop headers of the upstream response, replaced by our own framing. */
static const char *gateway_drop_resp[] = {
	"connection", "keep-alive", "transfer-encoding", "content-length",
	"proxy-connection", "upgrade", "trailer", "content-encoding",
};

struct gconn {
	struct gateway		*g;
	struct bufferevent	*cli;
	struct http_head	 head;
	struct evbuffer		*body;
	size_t			 need;		/* body bytes still to read */
	CURL			*easy;
	struct curl_slist	*hdrs;
	struct evbuffer		*resp;		/* response headers gathered */
	int			 sent_head;
	int			 paused;
	int			 done;
	long			 status;
	enum usage_api		 api;		/* the request's wire format */
	int			 sse;		/* the answer is text/event-stream */
	struct usage_reader	*usage;		/* reading a 2xx answer's usage */
	uint64_t		 in, out;
	int			 inflight;	/* holds one of the run's model_requests */
	int			 waiting;	/* on g->waiting, for one of them */
	int			 deferred;	/* its local path's answer comes later */
	char			 error[CURL_ERROR_SIZE];
	LIST_ENTRY(gconn)	 entry;
	TAILQ_ENTRY(gconn)	 wentry;
};

struct gateway {
	struct event_base	*base;
	struct store		*store;
	char			*run;
	char			*upstream;
	char			*prefix;
	char			*key;
	char			*host;		/* of upstream, for the log */
	int			 port;
	int			 bearer;
	char			*path;
	struct evconnlistener	*lis;
	struct egress_gate	 gate;
	struct curlev		*curl;
	struct gateway_tally	 tally;
	char			*org;
	char			*automation;
	struct price		*prices;	/* the agent's own, before the defaults */
	size_t			 nprices;
	struct budget_limits	 budget;
	uint64_t		 spent_tokens;	/* the run's, so far */
	double			 spent_usd;
	char			*stopped;	/* the budget that refused a request, in words */
	char			*agent;		/* whose prices: agents.NAME.prices */
	int			 max_inflight;	/* limits.model_requests */
	int			 inflight;
	int			 closing;	/* gateway_free: start nothing */
	LIST_HEAD(, gconn)	 conns;
	TAILQ_HEAD(, gconn)	 waiting;	/* model requests waiting for one in flight to end */
	const struct gateway_local *local;	/* a path it answers itself, and its server */
	void			*local_arg;
};

static void	gconn_start(struct gconn *);
static void	gateway_stop(struct gateway *, const char *);

static int
gateway_in(const char *name, const char **list, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (strcasecmp(name, list[i]) == 0)
			return 1;
	}
	return 0;
}

/* Whether a path segment (decoded) is "." or "..", also as "..;x", which some servers read so. */
static int
gateway_dot_segment(const char *seg, size_t len)
{
	const char	*semi = memchr(seg, ';', len);

	if (semi != NULL)
		len = semi - seg;
	return (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.');
}

char *
gateway_target(const char *target, char **cause)
{
	static const char	 unreserved[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
	struct buf		 b;
	const char		*p;
	unsigned char		 c;
	size_t			 seg = 1;
	int			 query = 0;

	if (target[0] != '/') {
		*cause = xstrdup("the target is not a path");
		return NULL;
	}
	buf_init(&b, 0);
	buf_addc(&b, '/');
	for (p = target + 1; *p != '\0'; p++) {
		c = (unsigned char)*p;
		if (!query && (c == '/' || c == '?')) {
			if (gateway_dot_segment(b.data + seg, b.len - seg))
				goto dots;
			buf_addc(&b, (char)c);
			seg = b.len;
			query = c == '?';
			continue;
		}
		if (c == '%') {
			if (hex_decode(p + 1, strnlen(p + 1, 2), &c, 1) != 0) {
				*cause = xstrdup("a bad percent-encoding");
				goto fail;
			}
			p += 2;
			if (c == '\0' || (!query && (c == '/' || c == '\\'))) {
				*cause = xstrdup("an encoded /, \\ or NUL");
				goto fail;
			}
			/* Unreserved ones mean the same decoded: so %2e%2e is seen as "..". */
			if (!query && strchr(unreserved, c) != NULL)
				buf_addc(&b, (char)c);
			else
				buf_addf(&b, "%%%02X", c);
			continue;
		}
		if (strchr(unreserved, c) == NULL && strchr("!$&'()*+,;=:@", c) == NULL &&
		    !(query && (c == '/' || c == '?'))) {
			*cause = xprintf("a character not allowed in a path (0x%02x)", c);
			goto fail;
		}
		buf_addc(&b, (char)c);
	}
	if (!query && gateway_dot_segment(b.data + seg, b.len - seg))
		goto dots;
	return buf_take(&b);
dots:
	*cause = xstrdup("a dot segment (. or ..)");
fail:
	buf_free(&b);
	return NULL;
}

int
gateway_tally_add(struct gateway_tally *t, long status)
{
	t->answers++;
	t->last = status;
	if (status >= 200 && status <= 299)
		t->refused = 0;
	else if (status == 401 || status == 403) {
		t->refused = 1;
		return ++t->auth == 1;
	} else if (status == 429 || status == 529)
		t->quota++;
	return 0;
}

const struct gateway_tally *
gateway_tally(const struct gateway *g)
{
	return &g->tally;
}

/* Records why the run's model requests are refused from now on (the first reason), and logs it. */
static void
gateway_stop(struct gateway *g, const char *why)
{
	if (g->stopped != NULL)
		return;
	g->stopped = xstrdup(why);
	log_warn("event=gateway.budget_spent run=%s why=%s consequence=\"model requests "
	    "refused, the run ends failed\"", g->run, log_q(why));
}

/* Whether a budget in money applies to the run: then every model needs a price. */
static int
gateway_in_money(const struct gateway *g)
{
	return g->budget.usd > 0 || g->budget.org_usd_per_day > 0 ||
	    g->budget.org_usd_per_month > 0;
}

/* "no price for model X", when a budget in money applies and model has none; else NULL. */
static char *
gateway_unpriced(const struct gateway *g, const char *model)
{
	if (!gateway_in_money(g))
		return NULL;
	if (model == NULL || *model == '\0')
		return xstrdup("the request names no model, and a budget in money needs "
		    "its price");
	if (budget_price(g->prices, g->nprices, model) != NULL)
		return NULL;
	return xprintf("no price for model \"%.*s\" under a budget in money: set "
	    "agents.%s.prices.%.*s", USAGE_MODEL_MAX, model, g->agent, USAGE_MODEL_MAX, model);
}

/*
 * After an answer's usage is added: a run that passed its own budget (the
 * requests in flight when it was reached), or used a model without a price
 * under a budget in money, ends failed for its budget however its agent ends.
 */
static void
gateway_over(struct gateway *g, const char *model)
{
	char	*why;

	if ((g->budget.tokens > 0 && g->spent_tokens > (uint64_t)g->budget.tokens) ||
	    (g->budget.usd > 0 && g->spent_usd > g->budget.usd)) {
		if ((why = budget_spent(g->store, g->org, &g->budget, g->spent_tokens,
		    g->spent_usd)) != NULL) {
			gateway_stop(g, why);
			free(why);
		}
	}
	/* An answer that named no model ("unknown"): its request's model was checked before it went up. */
	if (strcmp(model, "unknown") != 0 && (why = gateway_unpriced(g, model)) != NULL) {
		gateway_stop(g, why);
		free(why);
	}
}

/* A model request ended: its place in flight goes to the next waiting, if any. */
static void
gconn_release(struct gconn *gc)
{
	struct gateway	*g = gc->g;
	struct gconn	*next;

	if (gc->waiting) {
		TAILQ_REMOVE(&g->waiting, gc, wentry);
		gc->waiting = 0;
	}
	if (!gc->inflight)
		return;
	gc->inflight = 0;
	g->inflight--;
	while (!g->closing && g->inflight < g->max_inflight &&
	    (next = TAILQ_FIRST(&g->waiting)) != NULL) {
		TAILQ_REMOVE(&g->waiting, next, wentry);
		next->waiting = 0;
		gconn_start(next);
	}
}

/*
 * The answer's usage, once it has ended (or was cut off): stored for the run,
 * its model and the day, priced, and added to what the run spent.
 */
static void
gconn_account(struct gconn *gc)
{
	struct gateway		*g = gc->g;
	struct store_usage	 u;
	char			*model = NULL;

	if (gc->usage == NULL)
		return;
	memset(&u, 0, sizeof u);
	if (usage_reader_end(gc->usage, &u.c, &model)) {
		u.run = g->run;
		u.org = g->org;
		u.automation = g->automation;
		u.model = model;
		u.api = usage_api_name(gc->api);
		u.cost_usd = budget_cost(budget_price(g->prices, g->nprices, model), gc->api,
		    &u.c);
		g->spent_tokens += u.c.tokens;
		g->spent_usd += u.cost_usd;
		gateway_over(g, model);
		if (g->store != NULL && store_usage_add(g->store, &u) != 0)
			log_warn("event=gateway.usage_not_stored run=%s", g->run);
		log_info("event=gateway.usage run=%s model=%s input=%llu output=%llu "
		    "cache_read=%llu cache_write=%llu cost_usd=%.6f", g->run, log_q(model),
		    (unsigned long long)u.c.input, (unsigned long long)u.c.output,
		    (unsigned long long)u.c.cache_read, (unsigned long long)u.c.cache_write,
		    u.cost_usd);
		free(model);
	}
	usage_reader_free(gc->usage);
	gc->usage = NULL;
}

static void
gconn_free(struct gconn *gc)
{
	if (gc->deferred)
		gc->g->local->cancel(gc->g->local_arg, (struct gateway_call *)gc);
	gconn_account(gc);
	gconn_release(gc);
	LIST_REMOVE(gc, entry);
	egress_gate_leave(&gc->g->gate);
	if (gc->easy != NULL) {
		curlev_remove(gc->g->curl, gc->easy);
		curl_easy_cleanup(gc->easy);
	}
	/* The list holds the real key. */
	if (gc->hdrs != NULL) {
		struct curl_slist *h;

		for (h = gc->hdrs; h != NULL; h = h->next)
			explicit_bzero(h->data, strlen(h->data));
		curl_slist_free_all(gc->hdrs);
	}
	if (gc->cli != NULL)
		bufferevent_free(gc->cli);
	if (gc->body != NULL)
		evbuffer_free(gc->body);
	if (gc->resp != NULL)
		evbuffer_free(gc->resp);
	http_head_clear(&gc->head);
	free(gc);
}

static void
gconn_record(struct gconn *gc, const char *verdict)
{
	egress_record(gc->g->store, gc->g->run, "gateway", gc->g->host, gc->g->port, gc->in,
	    gc->out, verdict);
}

static void
gconn_closed_cb(struct bufferevent *bev, short what, void *arg)
{
	gconn_free(arg);
}

/* Closes once everything is written to the agent. */
static void
gconn_close(struct gconn *gc)
{
	gc->done = 1;
	egress_close_flushed(gc->cli, gconn_closed_cb, gc);
}

/* The gateway's own answer: j (taken) as the body, with extra header lines (CRLF each). */
static void
gconn_answer(struct gconn *gc, int status, json_t *j, const char *extra, const char *verdict)
{
	char	*s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	gconn_record(gc, verdict);
	evbuffer_add_printf(bufferevent_get_output(gc->cli), "HTTP/1.1 %d Spur Gateway\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n%s"
	    "Connection: close\r\n\r\n%s", status, strlen(s), extra, s);
	free(s);
	gconn_close(gc);
}

/* An error in the API's own JSON shape, so agents show it as an API error. */
static void
gconn_fail(struct gconn *gc, int status, const char *msg, const char *verdict)
{
	gconn_answer(gc, status, json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error",
	    "type", "api_error", "message", msg), "", verdict);
}

/*
 * A model request after a budget was spent, refused as the API refuses a
 * spent account, so that the agent stops rather than retries: Anthropic's
 * 402 billing_error, OpenAI's 429 insufficient_quota; and x-should-retry:
 * false, which the vendors' SDKs obey.
 */
static void
gconn_refuse_budget(struct gconn *gc, const char *why)
{
	struct gateway	*g = gc->g;
	char		*msg = xprintf("spur: %s", why);

	gateway_stop(g, why);
	if (gc->api == USAGE_ANTHROPIC)
		gconn_answer(gc, 402, json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error",
		    "type", "billing_error", "message", msg), "x-should-retry: false\r\n",
		    "budget");
	else
		gconn_answer(gc, 429, json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message", msg,
		    "type", "insufficient_quota", "param", "code", "insufficient_quota"),
		    "x-should-retry: false\r\n", "budget");
	free(msg);
}

static void
gconn_send_head(struct gconn *gc)
{
	struct evbuffer	*out = bufferevent_get_output(gc->cli);

	if (gc->sent_head)
		return;
	gc->sent_head = 1;
	curl_easy_getinfo(gc->easy, CURLINFO_RESPONSE_CODE, &gc->status);
	/* The key is a secret, the status is not: the operator learns why the agent stopped. */
	if (gateway_tally_add(&gc->g->tally, gc->status))
		log_warn("event=gateway.model_refused run=%s status=%ld host=%s", gc->g->run,
		    gc->status, log_q(gc->g->host));
	if (gc->api != USAGE_NONE && gc->status >= 200 && gc->status <= 299)
		gc->usage = usage_reader_new(gc->api, gc->sse);
	evbuffer_add_printf(out, "HTTP/1.1 %ld Upstream\r\n", gc->status);
	evbuffer_add_buffer(out, gc->resp);
	/* No length: the body ends when the connection does, as it streams. */
	evbuffer_add_printf(out, "Connection: close\r\n\r\n");
}

static size_t
gconn_header_cb(char *data, size_t size, size_t n, void *arg)
{
	struct gconn	*gc = arg;
	size_t		 len = size * n, nl;
	char		*line, *colon;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* A status line: an interim (1xx) response's headers are dropped. */
		evbuffer_drain(gc->resp, evbuffer_get_length(gc->resp));
		return len;
	}
	nl = len;
	while (nl > 0 && (data[nl - 1] == '\n' || data[nl - 1] == '\r'))
		nl--;
	if (nl == 0 || (colon = memchr(data, ':', nl)) == NULL)
		return len;
	line = xstrndup(data, nl);
	line[colon - data] = '\0';
	if (strcasecmp(line, "content-type") == 0)
		gc->sse = strcasestr(line + (colon - data) + 1, "text/event-stream") != NULL;
	if (!gateway_in(line, gateway_drop_resp, SPUR_ARRLEN(gateway_drop_resp)))
		evbuffer_add_printf(gc->resp, "%s:%s\r\n", line, line + (colon - data) + 1);
	free(line);
	return len;
}

static size_t
gconn_write_cb(char *data, size_t size, size_t n, void *arg)
{
	struct gconn	*gc = arg;
	struct evbuffer	*out = bufferevent_get_output(gc->cli);
	size_t		 len = size * n;

	if (evbuffer_get_length(out) >= GATEWAY_PAUSE_AT) {
		gc->paused = 1;
		return CURL_WRITEFUNC_PAUSE;
	}
	gconn_send_head(gc);
	evbuffer_add(out, data, len);
	if (gc->usage != NULL)
		usage_reader_feed(gc->usage, data, len);
	gc->in += len;
	return len;
}

static void
gconn_drained_cb(struct bufferevent *bev, void *arg)
{
	struct gconn	*gc = arg;

	if (gc->paused && gc->easy != NULL) {
		gc->paused = 0;
		curl_easy_pause(gc->easy, CURLPAUSE_CONT);
	}
}

static void
gconn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gconn	*gc = arg;

	/* The agent went away (or never sent its request): stop the upstream one. */
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		if (gc->head.method != NULL)
			gconn_record(gc, "closed");
		gconn_free(gc);
	}
}

/* gateway_unpriced for the model the request's body names. */
static char *
gconn_unpriced(struct gconn *gc)
{
	json_t		*j;
	char		*why;
	size_t		 len = evbuffer_get_length(gc->body);

	if (!gateway_in_money(gc->g))
		return NULL;
	j = json_loadb(len > 0 ? (char *)evbuffer_pullup(gc->body, -1) : "", len, 0, NULL);
	why = gateway_unpriced(gc->g, json_string_value(json_object_get(j, "model")));
	json_decref(j);
	return why;
}

/* The request is all here: send it upstream. */
/* The local path's answer (taken), now or when it came later. */
static void
gconn_local_send(struct gconn *gc, int status, json_t *answer)
{
	struct evbuffer	*out = bufferevent_get_output(gc->cli);
	char		*s = NULL;

	if (answer != NULL)
		s = json_dumps(answer, JSON_COMPACT);
	json_decref(answer);
	evbuffer_add_printf(out, "HTTP/1.1 %d Spur Gateway\r\n%sContent-Length: %zu\r\n%s"
	    "Connection: close\r\n\r\n%s", status, s != NULL ?
	    "Content-Type: application/json\r\n" : "", s != NULL ? strlen(s) : 0,
	    status == 405 ? "Allow: POST\r\n" : "", s != NULL ? s : "");
	free(s);
	gconn_close(gc);
}

void
gateway_local_answer(struct gateway_call *call, int status, json_t *answer)
{
	struct gconn	*gc = (struct gconn *)call;

	gc->deferred = 0;
	gconn_local_send(gc, status, answer);
}

/* The gateway's own path (the run's MCP server) is answered here: nothing goes upstream. */
static void
gconn_local(struct gconn *gc)
{
	json_t		*answer;
	size_t		 len = evbuffer_get_length(gc->body);
	int		 status;

	status = gc->g->local->handle(gc->g->local_arg, gc->head.method, http_head_get(&gc->head,
	    "authorization"), http_head_get(&gc->head, "mcp-protocol-version"), len > 0 ?
	    (const char *)evbuffer_pullup(gc->body, -1) : "", len, &answer,
	    (struct gateway_call *)gc);
	if (status == 0)
		gc->deferred = 1;
	else
		gconn_local_send(gc, status, answer);
}

static void
gconn_start(struct gconn *gc)
{
	struct gateway	*g = gc->g;
	const char	*path = gc->head.target;
	char		*url, *h, *why, *body;
	size_t		 i, plen = strlen(g->prefix), blen;
	CURLMcode	 mc;

	if (g->local != NULL && strcmp(path, g->local->path) == 0) {
		gconn_local(gc);
		return;
	}
	/* The target is normalized (gateway_target): under the prefix, it stays under upstream. */
	if (strncmp(path, g->prefix, plen) != 0 ||
	    (path[plen] != '/' && path[plen] != '?' && path[plen] != '\0')) {
		gconn_fail(gc, 404, "spur gateway: not a path of the model API", "denied");
		return;
	}
	if (!usage_path_known(gc->head.method, path + plen)) {
		gconn_fail(gc, 404, "spur gateway: not a path the gateway meters or knows to "
		    "cost nothing", "denied");
		return;
	}
	gc->api = usage_api_of(gc->head.method, path);
	/* At most limits.model_requests at once: the budget is checked as each starts. */
	if (gc->api != USAGE_NONE && g->inflight >= g->max_inflight) {
		gc->waiting = 1;
		TAILQ_INSERT_TAIL(&g->waiting, gc, wentry);
		return;
	}
	/* A model request: none starts once a budget is spent, or without a price under one. */
	if (gc->api != USAGE_NONE &&
	    ((why = budget_spent(g->store, g->org, &g->budget, g->spent_tokens,
	    g->spent_usd)) != NULL || (why = gconn_unpriced(gc)) != NULL)) {
		gconn_refuse_budget(gc, why);
		free(why);
		return;
	}
	if (gc->api != USAGE_NONE) {
		gc->inflight = 1;
		g->inflight++;
	}
	/* A streamed Chat Completions answer says its usage only when asked to. */
	if (gc->api == USAGE_CHAT && (blen = evbuffer_get_length(gc->body)) > 0 &&
	    (body = usage_chat_request((char *)evbuffer_pullup(gc->body, -1), blen,
	    &blen)) != NULL) {
		evbuffer_drain(gc->body, evbuffer_get_length(gc->body));
		evbuffer_add(gc->body, body, blen);
		free(body);
	}
	url = xprintf("%s%s", g->upstream, path + plen);
	gc->easy = curl_easy_init();
	curl_easy_setopt(gc->easy, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(gc->easy, CURLOPT_PRIVATE, gc);
	curl_easy_setopt(gc->easy, CURLOPT_CUSTOMREQUEST, gc->head.method);
	curl_easy_setopt(gc->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(gc->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(gc->easy, CURLOPT_CONNECTTIMEOUT, GATEWAY_CONNECT_SECS);
	curl_easy_setopt(gc->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(gc->easy, CURLOPT_LOW_SPEED_TIME, GATEWAY_IDLE_SECS);
	curl_easy_setopt(gc->easy, CURLOPT_ERRORBUFFER, gc->error);
	curl_easy_setopt(gc->easy, CURLOPT_HEADERFUNCTION, gconn_header_cb);
	curl_easy_setopt(gc->easy, CURLOPT_HEADERDATA, gc);
	curl_easy_setopt(gc->easy, CURLOPT_WRITEFUNCTION, gconn_write_cb);
	curl_easy_setopt(gc->easy, CURLOPT_WRITEDATA, gc);
	/* The engine's own environment must not send model traffic elsewhere. */
	curl_easy_setopt(gc->easy, CURLOPT_PROXY, "");
	curl_easy_setopt(gc->easy, CURLOPT_ACCEPT_ENCODING, "");
	blen = evbuffer_get_length(gc->body);
	if (blen > 0 || strcmp(gc->head.method, "POST") == 0 ||
	    strcmp(gc->head.method, "PUT") == 0 || strcmp(gc->head.method, "PATCH") == 0) {
		curl_easy_setopt(gc->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
		curl_easy_setopt(gc->easy, CURLOPT_POSTFIELDS,
		    blen > 0 ? (char *)evbuffer_pullup(gc->body, -1) : "");
		gc->out = blen;
	} else if (strcmp(gc->head.method, "HEAD") == 0)
		curl_easy_setopt(gc->easy, CURLOPT_NOBODY, 1L);
	for (i = 0; i < gc->head.n; i++) {
		if (gateway_in(gc->head.name[i], gateway_drop_req,
		    SPUR_ARRLEN(gateway_drop_req)) ||
		    strncasecmp(gc->head.name[i], "proxy-", 6) == 0)
			continue;
		h = xprintf("%s: %s", gc->head.name[i], gc->head.value[i]);
		gc->hdrs = curl_slist_append(gc->hdrs, h);
		free(h);
	}
	/* The credential, in the header the agent used for its placeholder. */
	if (http_head_get(&gc->head, "x-api-key") != NULL ||
	    (http_head_get(&gc->head, "authorization") == NULL && !g->bearer))
		h = xprintf("x-api-key: %s", g->key);
	else
		h = xprintf("Authorization: Bearer %s", g->key);
	gc->hdrs = curl_slist_append(gc->hdrs, h);
	explicit_bzero(h, strlen(h));
	free(h);
	gc->hdrs = curl_slist_append(gc->hdrs, "Expect:");
	curl_easy_setopt(gc->easy, CURLOPT_HTTPHEADER, gc->hdrs);
	bufferevent_setcb(gc->cli, NULL, gconn_drained_cb, gconn_event_cb, gc);
	bufferevent_setwatermark(gc->cli, EV_WRITE, GATEWAY_PAUSE_AT / 2, 0);
	/* Reading stays on to see the agent hang up; it sends nothing more. */
	bufferevent_enable(gc->cli, EV_READ | EV_WRITE);
	if ((mc = curlev_add(g->curl, gc->easy)) != CURLM_OK) {
		curl_easy_cleanup(gc->easy);
		gc->easy = NULL;
		gconn_fail(gc, 502, curl_multi_strerror(mc), "failed");
	}
}

static void
gconn_read_cb(struct bufferevent *bev, void *arg)
{
	struct gconn		*gc = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	const char		*cl, *te;
	char			*text, *target, *cause, *msg;
	unsigned long long	 n;
	size_t			 len;
	int			 rc;

	if (gc->easy != NULL || gc->done || gc->waiting || gc->deferred) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (gc->head.method == NULL) {
		if ((rc = http_head_take(in, &text, &len)) <= 0) {
			if (rc < 0)
				gconn_fail(gc, 431, "spur gateway: request head too large",
				    "bad-request");
			return;
		}
		if (http_head_parse(text, len, &gc->head) != 0) {
			free(text);
			gconn_fail(gc, 400, "spur gateway: bad request", "bad-request");
			return;
		}
		explicit_bzero(text, len);
		free(text);
		if ((target = gateway_target(gc->head.target, &cause)) == NULL) {
			msg = xprintf("spur gateway: bad request target: %s", cause);
			gconn_fail(gc, 400, msg, "bad-request");
			free(msg);
			free(cause);
			return;
		}
		free(gc->head.target);
		gc->head.target = target;
		cl = http_head_get(&gc->head, "content-length");
		te = http_head_get(&gc->head, "transfer-encoding");
		if (te != NULL) {
			gconn_fail(gc, 411, "spur gateway: send a Content-Length", "bad-request");
			return;
		}
		n = 0;
		if (cl != NULL) {
			/* Digits only, and one: what curl sends is its own, the length read is this. */
			errno = 0;
			n = strtoull(cl, NULL, 10);
			if (*cl == '\0' || strspn(cl, "0123456789") != strlen(cl) || errno != 0 ||
			    http_head_count(&gc->head, "content-length") > 1) {
				gconn_fail(gc, 400, "spur gateway: bad Content-Length", "bad-request");
				return;
			}
			if (n > GATEWAY_BODY_MAX) {
				gconn_fail(gc, 413, "spur gateway: body too large", "bad-request");
				return;
			}
		}
		gc->need = (size_t)n;
		bufferevent_setwatermark(bev, EV_READ, 0, 0);
		bufferevent_set_timeouts(bev, NULL, NULL);
	}
	len = evbuffer_get_length(in);
	if (len > gc->need)
		len = gc->need;
	evbuffer_remove_buffer(in, gc->body, len);
	gc->need -= len;
	if (gc->need == 0)
		gconn_start(gc);
}

static void
gateway_accept_cb(struct evconnlistener *l, int fd, struct sockaddr *sa, int len, void *arg)
{
	struct gateway	*g = arg;
	struct gconn	*gc;
	struct timeval	 tv = { GATEWAY_HEAD_SECS, 0 };

	if (egress_gate_admit(&g->gate, fd) != 0)
		return;
	gc = xcalloc(1, sizeof *gc);
	gc->g = g;
	gc->body = evbuffer_new();
	gc->resp = evbuffer_new();
	evutil_make_socket_nonblocking(fd);
	gc->cli = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
	LIST_INSERT_HEAD(&g->conns, gc, entry);
	bufferevent_setcb(gc->cli, gconn_read_cb, NULL, gconn_event_cb, gc);
	bufferevent_setwatermark(gc->cli, EV_READ, 0, HTTP_HEAD_MAX + 8);
	bufferevent_set_timeouts(gc->cli, &tv, NULL);
	bufferevent_enable(gc->cli, EV_READ);
}

static void
gateway_accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct gateway	*g = arg;

	egress_gate_failed(&g->gate);
}

/* The upstream transfer ended: the rest of the answer, or the API's 502 when none began. */
static void
gconn_done_cb(CURL *easy, CURLcode result, void *arg)
{
	struct gconn	*gc;
	char		*msg;

	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&gc);
	if (result != CURLE_OK && !gc->sent_head) {
		msg = xprintf("spur gateway: upstream: %s", gc->error[0] != '\0' ?
		    gc->error : curl_easy_strerror(result));
		curl_easy_cleanup(easy);
		gc->easy = NULL;
		gconn_release(gc);
		gconn_fail(gc, 502, msg, "failed");
		free(msg);
		return;
	}
	gconn_send_head(gc);	/* an empty body */
	gconn_account(gc);
	gconn_record(gc, result == CURLE_OK ? "allowed" : "failed");
	curl_easy_cleanup(easy);
	gc->easy = NULL;
	gconn_release(gc);	/* before the close, which frees gc (deferred) */
	gconn_close(gc);
}

struct gateway *
gateway_create(struct event_base *base, struct store *store, const char *run,
    const struct gateway_spec *gs, const char *path, int *port, char **cause)
{
	struct gateway	*g;
	CURLU		*u;
	char		*host = NULL, *portstr = NULL;

	g = xcalloc(1, sizeof *g);
	g->base = base;
	g->store = store;
	g->run = xstrdup(run);
	if ((g->local = gs->local) != NULL)
		g->local_arg = g->local->create(gs->local_ctx, run);
	g->upstream = xstrdup(gs->upstream);
	/* "https://api.openai.com/v1/" and ".../v1" are the same base. */
	if (*g->upstream != '\0' && g->upstream[strlen(g->upstream) - 1] == '/')
		g->upstream[strlen(g->upstream) - 1] = '\0';
	g->prefix = xstrdup(gs->prefix);
	g->key = xstrdup(gs->key);
	g->bearer = gs->bearer;
	g->org = xstrdup(gs->org != NULL ? gs->org : "");
	g->automation = xstrdup(gs->automation != NULL ? gs->automation : "");
	g->budget = gs->budget;
	g->agent = xstrdup(gs->agent != NULL ? gs->agent : "");
	g->max_inflight = gs->model_requests > 0 ? gs->model_requests : 4;
	TAILQ_INIT(&g->waiting);
	if (gs->nprices > 0) {
		size_t i;

		g->prices = xcalloc(gs->nprices, sizeof *g->prices);
		for (i = 0; i < gs->nprices; i++) {
			g->prices[i] = gs->prices[i];
			g->prices[i].model = xstrdup(gs->prices[i].model);
		}
		g->nprices = gs->nprices;
	}
	LIST_INIT(&g->conns);
	u = curl_url();
	if (curl_url_set(u, CURLUPART_URL, g->upstream, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &portstr, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		*cause = xprintf("bad model API URL %s", g->upstream);
		curl_url_cleanup(u);
		curl_free(host);
		gateway_free(g);
		return NULL;
	}
	g->host = xstrdup(host);
	g->port = atoi(portstr);
	curl_free(host);
	curl_free(portstr);
	curl_url_cleanup(u);
	g->curl = curlev_create(base, gconn_done_cb, g);
	if (path != NULL)
		g->path = xstrdup(path);
	if ((g->lis = egress_listen(base, path, port, gateway_accept_cb, g, cause)) == NULL) {
		gateway_free(g);
		return NULL;
	}
	egress_gate_init(&g->gate, base, g->lis, "gateway", g->run);
	evconnlistener_set_error_cb(g->lis, gateway_accept_error_cb);
	return g;
}

const char *
gateway_stopped(const struct gateway *g)
{
	return g->stopped;
}

const char *
gateway_local_token(const struct gateway *g)
{
	return g->local != NULL ? g->local->token(g->local_arg) : NULL;
}

void
gateway_free(struct gateway *g)
{
	struct gconn	*gc;
	size_t		 i;

	if (g == NULL)
		return;
	if (g->lis != NULL)
		evconnlistener_free(g->lis);
	egress_gate_clear(&g->gate);
	g->closing = 1;
	while ((gc = LIST_FIRST(&g->conns)) != NULL) {
		if (gc->easy != NULL)
			gconn_record(gc, "closed");
		gconn_free(gc);
	}
	if (g->tally.answers > 0)
		log_info("event=gateway.answers run=%s answers=%u key_refused=%u quota=%u "
		    "last=%ld", g->run, g->tally.answers, g->tally.auth, g->tally.quota,
		    g->tally.last);
	curlev_free(g->curl);
	if (g->local != NULL)
		g->local->free(g->local_arg);
	if (g->path != NULL)
		(void)unlink(g->path);
	if (g->key != NULL)
		freezero_str(g->key);
	for (i = 0; i < g->nprices; i++)
		free(g->prices[i].model);
	free(g->prices);
	free(g->org);
	free(g->automation);
	free(g->agent);
	free(g->stopped);
	free(g->path);
	free(g->host);
	free(g->upstream);
	free(g->prefix);
	free(g->run);
	free(g);
}
