/* httpc.c: the one HTTP client: libcurl on a libevent loop (curlev.c), bounded answers, the headers kept. */
#include "spur.h"
#include "curlev.h"
#include "httpc.h"
#include "netguard.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <curl/curl.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HTTP_BODY_MAX		(1024 * 1024)
#define HTTP_HEAD_MAX		(64 * 1024)
#define HTTP_CONNECT_MS		10000L

struct http_call {
	struct httpc		*hc;
	CURL			*easy;
	struct curl_slist	*headers;
	char			*body;
	size_t			 body_len;
	struct buf		 resp;
	struct buf		 head;		/* the last response's header lines */
	int			 toobig;
	int			 guard;
	char			**allow;	/* NULL-terminated */
	int			 refused;
	char			 errbuf[CURL_ERROR_SIZE];
	http_done_cb		 cb;
	void			*arg;
	LIST_ENTRY(http_call)	 entry;
};

struct httpc {
	struct curlev		*curl;
	LIST_HEAD(, http_call)	 calls;
};

static size_t
http_write_fn(char *data, size_t size, size_t n, void *arg)
{
	struct http_call	*c = arg;

	if (buf_add(&c->resp, data, size * n) != 0) {
		c->toobig = 1;
		return 0;
	}
	return size * n;
}

/* Keeps the header lines of the last response (after a 100 Continue, the final one's). */
static size_t
http_header_fn(char *data, size_t size, size_t n, void *arg)
{
	struct http_call	*c = arg;
	size_t			 len = size * n;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		c->head.len = 0;
		return len;
	}
	/* Past the bound the rest is dropped: what spur reads comes first in practice. */
	(void)buf_add(&c->head, data, len);
	return len;
}

char *
http_response_header(const struct http_response *r, const char *name)
{
	const char	*p = r->head, *eol, *v;
	size_t		 nl = strlen(name);

	while (p != NULL && *p != '\0') {
		eol = p + strcspn(p, "\r\n");
		if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
			v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			while (eol > v && (eol[-1] == ' ' || eol[-1] == '\t'))
				eol--;
			return xprintf("%.*s", (int)(eol - v), v);
		}
		p = eol + strspn(eol, "\r\n");
	}
	return NULL;
}

/*
 * Opens each socket curl connects with, after DNS: a guarded call's to an
 * address that is not public and not allowed is refused before it exists,
 * so nothing (an open port, a closed one) is learnt about it.
 */
static curl_socket_t
http_opensocket_fn(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct http_call	*c = arg;

	if (c->guard && !netguard_allowed(&a->addr, c->allow)) {
		c->refused = 1;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

void
http_request_init(struct http_request *req, const char *method, const char *url,
    const char *const *headers, const char *body)
{
	memset(req, 0, sizeof *req);
	req->method = method != NULL ? method : body != NULL ? "POST" : "GET";
	req->url = url;
	req->headers = headers;
	req->body = body;
	req->body_len = body != NULL ? strlen(body) : 0;
}

struct http_call *
httpc_request(struct httpc *hc, const struct http_request *req, http_done_cb cb, void *arg)
{
	struct http_call	*c = xcalloc(1, sizeof *c);
	size_t			 i;

	c->hc = hc;
	c->cb = cb;
	c->arg = arg;
	buf_init(&c->resp, HTTP_BODY_MAX);
	buf_init(&c->head, HTTP_HEAD_MAX);
	c->easy = curl_easy_init();
	if (c->easy == NULL)
		fatal("curl_easy_init");
	for (i = 0; req->headers != NULL && req->headers[i] != NULL; i++)
		c->headers = curl_slist_append(c->headers, req->headers[i]);
	/* No "Expect: 100-continue" round trip. */
	c->headers = curl_slist_append(c->headers, "Expect:");
	curl_easy_setopt(c->easy, CURLOPT_URL, req->url);
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms :
	    HTTP_TIMEOUT_MS);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, HTTP_CONNECT_MS);
	curl_easy_setopt(c->easy, CURLOPT_USERAGENT, "spur/" PACKAGE_VERSION);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, http_write_fn);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, http_header_fn);
	curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
	if (req->guard) {
		c->guard = 1;
		for (i = 0; req->guard_allow != NULL && req->guard_allow[i] != NULL; i++)
			;
		c->allow = xcalloc(i + 1, sizeof *c->allow);
		for (i = 0; req->guard_allow != NULL && req->guard_allow[i] != NULL; i++)
			c->allow[i] = xstrdup(req->guard_allow[i]);
		curl_easy_setopt(c->easy, CURLOPT_OPENSOCKETFUNCTION, http_opensocket_fn);
		curl_easy_setopt(c->easy, CURLOPT_OPENSOCKETDATA, c);
		/*
		 * Its own connection, made here: not one another call opened to
		 * the same name, nor through a proxy from the environment.
		 */
		curl_easy_setopt(c->easy, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(c->easy, CURLOPT_FORBID_REUSE, 1L);
		curl_easy_setopt(c->easy, CURLOPT_PROXY, "");
	}
	if (req->body != NULL) {
		c->body = xmalloc(req->body_len + 1);
		c->body_len = req->body_len;
		memcpy(c->body, req->body, req->body_len);
		c->body[req->body_len] = '\0';
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	}
	curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, req->method);
	if (strcmp(req->method, "GET") == 0)
		curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	LIST_INSERT_HEAD(&hc->calls, c, entry);
	curlev_add(hc->curl, c->easy);
	return c;
}

void
httpc_cancel(struct http_call *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	LIST_REMOVE(c, entry);
	curlev_remove(c->hc->curl, c->easy);
	curl_easy_cleanup(c->easy);
	/* Headers may hold a credential. */
	curl_slist_free_all(c->headers);
	/* So may the body (an OAuth code exchange's client secret). */
	if (c->body != NULL)
		explicit_bzero(c->body, c->body_len);
	free(c->body);
	for (i = 0; c->allow != NULL && c->allow[i] != NULL; i++)
		free(c->allow[i]);
	free(c->allow);
	buf_free(&c->resp);
	buf_free(&c->head);
	free(c);
}

long long
http_parse_retry_after(const char *v, int64_t now)
{
	struct tm	 tm;
	char		*end;
	long long	 n;
	time_t		 t;

	if (v == NULL || *v == '\0')
		return -1;
	if (isdigit((unsigned char)*v)) {
		n = strtoll(v, &end, 10);
		if (*end != '\0' || n < 0 || n > 7 * 86400)
			return -1;
		return n * 1000;
	}
	memset(&tm, 0, sizeof tm);
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *end != '\0')
		return -1;
	t = timegm(&tm);
	return (long long)t * 1000 > now ? (long long)t * 1000 - now : 0;
}

/* A finished transfer: its caller's callback, then it is freed. */
static void
http_call_done_cb(CURL *easy, CURLcode result, void *arg)
{
	struct http_response	 r;
	struct http_call	*c;
	long			 status = 0;
	long long		 reset;
	char			*ra, *remaining, *rl_reset;

	(void)arg;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&c);
	memset(&r, 0, sizeof r);
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
	if (result != CURLE_OK && c->refused) {
		/* Not curl's words: they would tell the other addresses' fate. */
		r.refused = 1;
		r.error = "refused: private address";
	} else if (result != CURLE_OK) {
		r.status = 0;
		r.error = c->toobig ? "answer too big" : (c->errbuf[0] != '\0' ?
		    c->errbuf : curl_easy_strerror(result));
	} else
		r.status = (int)status;
	r.body = buf_cstr(&c->resp);
	r.len = c->resp.len;
	r.head = buf_cstr(&c->head);
	ra = http_response_header(&r, "retry-after");
	r.retry_after_ms = http_parse_retry_after(ra, now_ms());
	remaining = http_response_header(&r, "x-ratelimit-remaining");
	rl_reset = http_response_header(&r, "x-ratelimit-reset");
	if (r.retry_after_ms < 0 && remaining != NULL && strcmp(remaining, "0") == 0 &&
	    rl_reset != NULL) {
		reset = strtoll(rl_reset, NULL, 10) * 1000;
		r.retry_after_ms = reset > now_ms() ? reset - now_ms() : 0;
	}
	free(ra);
	free(remaining);
	free(rl_reset);
	c->cb(&r, c->arg);
	httpc_cancel(c);
}

struct httpc *
httpc_create(struct event_base *base)
{
	struct httpc	*hc = xcalloc(1, sizeof *hc);

	LIST_INIT(&hc->calls);
	hc->curl = curlev_create(base, http_call_done_cb, hc);
	return hc;
}

void
httpc_free(struct httpc *hc)
{
	struct http_call	*c;

	if (hc == NULL)
		return;
	while ((c = LIST_FIRST(&hc->calls)) != NULL)
		httpc_cancel(c);
	curlev_free(hc->curl);
	free(hc);
}
