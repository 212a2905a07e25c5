/* outbox.h: the one HTTP client (libcurl multi on the libevent loop) and the sender of stored reports. */
#ifndef SPUR_OUTBOX_H
#define SPUR_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

struct engine;
struct outbox;
struct http_call;

#define OUTBOX_BACKOFF_BASE_MS	2000LL
#define OUTBOX_BACKOFF_MAX_MS	(30LL * 60 * 1000)

struct http_request {
	const char		 *method;	/* GET, POST */
	const char		 *url;
	const char *const	 *headers;	/* "Name: value", NULL-terminated; may be NULL */
	const char		 *body;		/* NULL: none */
	size_t			  body_len;
	long			  timeout_ms;	/* 0: the default (30 s) */
};

struct http_response {
	int		 status;	/* HTTP status, 0 when there was no answer */
	const char	*error;		/* why there was no answer, else NULL */
	const char	*body;		/* NUL-terminated, never NULL, bounded (1 MiB) */
	size_t		 len;
	/*
	 * How long the server asked us to wait, -1 when it did not say: Retry-After
	 * (seconds or an HTTP date), or GitHub's x-ratelimit-reset when
	 * x-ratelimit-remaining is 0.
	 */
	long long	 retry_after_ms;
};

/* Called once per call, unless it was cancelled. */
typedef void (*http_done_cb)(const struct http_response *, void *);

struct outbox	*outbox_create(struct engine *);
/* Cancels calls in flight (no callbacks); unsent reports stay stored for the next start. */
void		 outbox_free(struct outbox *);
/* A report was stored: send what is due. */
void		 outbox_kick(struct outbox *);

/* ingest: the writer committed (or dropped) the mark of report id; it may be looked at again. */
void		 outbox_marked(struct outbox *, int64_t id);

/* Starts one HTTP request on the engine's loop; no redirects, http(s) only. */
struct http_call *outbox_http(struct outbox *, const struct http_request *, http_done_cb,
		     void *);
/* No callback after this. */
void		 outbox_http_cancel(struct http_call *);

/*
 * The wait before attempt attempts+1 (attempts >= 1 already failed): exponential
 * from OUTBOX_BACKOFF_BASE_MS with equal jitter from rnd, capped at
 * OUTBOX_BACKOFF_MAX_MS; a server's retry_after_ms (>= 0) is honoured as the
 * minimum, up to give_up_ms (reports.give_up: a report is given up once it
 * has been retried that long). Pure, for tests.
 */
long long	 outbox_backoff_ms(int attempts, long long retry_after_ms, long long give_up_ms,
		     uint32_t rnd);
/* Retry-After's value (delta seconds or IMF-fixdate) in ms from now_ms; -1 if unreadable. */
long long	 outbox_parse_retry_after(const char *, int64_t now);

#endif
