/* httpc.h: the one HTTP client: libcurl on a libevent loop (curlev.c), for the outbox, the systems' tokens and `spur doctor`. */
#ifndef SPUR_HTTPC_H
#define SPUR_HTTPC_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct httpc;
struct http_call;

#define HTTP_TIMEOUT_MS		30000L	/* a request's default timeout */

struct http_request {
	const char		 *method;	/* GET, POST */
	const char		 *url;
	const char *const	 *headers;	/* "Name: value", NULL-terminated; may be NULL */
	const char		 *body;		/* NULL: none */
	size_t			  body_len;
	long			  timeout_ms;	/* 0: the default (HTTP_TIMEOUT_MS) */
	/*
	 * Public addresses only (a callback or report webhook): a connection to
	 * another address, checked on the one connected to after DNS, is refused
	 * unless guard_allow (addresses and CIDRs, copied) names it.
	 */
	int			  guard;
	char *const		 *guard_allow;
};

struct http_response {
	int		 status;	/* HTTP status, 0 when there was no answer */
	const char	*error;		/* why there was no answer, else NULL */
	const char	*body;		/* NUL-terminated, never NULL, bounded (1 MiB) */
	size_t		 len;
	/*
	 * How long the server asked us to wait, -1 when it did not say: Retry-After
	 * (seconds or an HTTP date), or an API's x-ratelimit-reset when
	 * x-ratelimit-remaining is 0.
	 */
	long long	 retry_after_ms;
	/* A guarded request refused its address; error then says only that. */
	int		 refused;
	/* The final response's header lines, "name: value\r\n" each (bounded: 64 KiB). */
	const char	*head;
};

/* Called once per call, unless it was cancelled. */
typedef void (*http_done_cb)(const struct http_response *, void *);

struct httpc	*httpc_create(struct event_base *);
/* Cancels the calls in flight (no callbacks). */
void		 httpc_free(struct httpc *);
/* Starts one HTTP request on the client's loop; no redirects, http(s) only. */
/*
 * req made a request of method (NULL: POST with a body, else GET) for url,
 * headers and body (its length strlen's), every other field zero.
 */
void		 http_request_init(struct http_request *req, const char *method,
		     const char *url, const char *const *headers, const char *body);
struct http_call *httpc_request(struct httpc *, const struct http_request *, http_done_cb,
		     void *);
/* No callback after this; NULL does nothing. */
void		 httpc_cancel(struct http_call *);
/* A response header's value (the first of that name, case-insensitive), or NULL; free it. */
char		*http_response_header(const struct http_response *, const char *name);
/* Retry-After's value (delta seconds or IMF-fixdate) in ms from now_ms; -1 if unreadable. */
long long	 http_parse_retry_after(const char *, int64_t now);

#endif
