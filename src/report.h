/* report.h: telling the thread: reactions on accept, one message at every run's end (SPEC section 9). */
#ifndef SPUR_REPORT_H
#define SPUR_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct spur_event;
struct http_response;

/*
 * Every GitHub body spur posts starts with this marker (an HTML comment, not
 * shown), followed by the run id: "<!-- spur:run_... -->"; Linear bodies end
 * with a line holding it. Slack's mrkdwn has no hidden comments: a Slack report
 * carries the run id in the message's metadata instead (event_type
 * REPORT_SLACK_EVENT, event_payload {"run": RUN}). So a source can recognize
 * spur's own posts and never start runs from them, and the outbox can find a
 * report already in its thread.
 */
#include "event.h"

#define REPORT_MARKER		EVENT_OWN_MARKER
#define REPORT_SLACK_EVENT	"spur_report"

/* Each API's limit for one message body, in bytes (a safe bound for characters). */
#define REPORT_GITHUB_MAX	65000
#define REPORT_SLACK_MAX	39000
#define REPORT_LINEAR_MAX	100000

/*
 * The event starts runs (run: the first of them): the eyes reaction on the
 * triggering GitHub comment or Slack message that says it was accepted, as the
 * target and body of a report that ingest stores with the event. -1: none.
 */
int	 report_ack(const struct spur_event *, const char *run, json_t **target,
	     char **body);
/*
 * The run ended (any state): its one report is stored for the outbox to send,
 * or, when the run's thread cannot be answered (generic webhooks, schedules,
 * report: none), stored as such. A second call for the same run adds nothing.
 */
void	 report_run_end(struct engine *, const char *run);

/* What a run's report says, before it is fitted to one API. */
struct report_facts {
	const char	*run;
	const char	*automation;
	const char	*state;
	const char	*reason;
	const char	*cause;		/* why it ended, in plain words (run_cause_words), may be NULL */
	const char	*retry_of;	/* the interrupted run this one continues, may be NULL */
	const char	*result;	/* the agent's final message, may be NULL */
	const char	*proof;		/* PR URL, branch, "artifacts: DIR", may be NULL */
	int64_t		 duration_ms;	/* -1: never started */
	const char	*link;		/* public_url/runs/RUN, may be NULL */
};
/* The message in source's format (github, slack, linear), cut to max bytes. Pure. */
char	*report_format(const char *source, const struct report_facts *, size_t max);
/* s cut to at most max bytes on a UTF-8 boundary, saying so when cut. Pure. */
char	*report_cut(const char *s, size_t max, const char *more);

/*
 * How the outbox sends a stored report (the store's row: run, kind, body) to
 * target (the row's, or a lookup's): the request (URL and headers, auth or
 * signature included).
 */
int	 report_request(struct engine *, const json_t *report, const json_t *target,
	     const char *token, char **url, char ***headers, char **cause);
void	 report_headers_free(char **);

enum report_verdict { REPORT_SENT, REPORT_RETRY, REPORT_FAILED };
/* What an API's answer means for a stored report; why is set unless sent. */
enum report_verdict report_verdict(const json_t *target, const struct http_response *,
	     char **why);

/*
 * A report whose last attempt may have reached its thread (the engine stopped
 * between the API's answer and the store, or no answer came) is looked for
 * there before it is posted again, by its marker (or Slack metadata): GitHub
 * lists the (review thread's) comments since the report was stored,
 * Slack the thread's replies, Linear the last comments. The request
 * for one page: page NULL for the first, else what report_lookup_verdict gave;
 * *body NULL for a GET, else the POST body.
 */
int	 report_lookup_request(struct engine *, const json_t *report, const char *token,
	     const char *page, char **url, char ***headers, char **body, char **cause);

enum report_lookup {
	REPORT_LOOKUP_FOUND,	/* posted already: mark it sent */
	REPORT_LOOKUP_ABSENT,	/* not in the thread: post it */
	REPORT_LOOKUP_MORE,	/* not on this page: ask for *page */
	REPORT_LOOKUP_RETRY	/* the thread could not be read (why): look again later */
};
/* What one page (page as asked, NULL: the first) of the thread says about report; *next set on MORE, *why on RETRY. */
enum report_lookup report_lookup_verdict(const json_t *report, const char *page,
	     const struct http_response *, char **next, char **why);
/* Whether posting report twice does no harm (reactions): then it is never looked for. */
int	 report_idempotent(const json_t *report);

/*
 * source-api.c: an API session's thread is its callback_url (SPEC 12), told
 * CALLBACK_RUN_ENDED in a POST signed with Standard Webhooks under
 * orgs.NAME.api.callback_secret. The body: {"type", "session", "run" (the run
 * as GET /o/ORG/runs/ID lists it, secrets scrubbed), "metadata"}.
 */
#define CALLBACK_RUN_ENDED	"run.ended"
struct secret;
/* The stored target {source: api, org, method, url}, or NULL with why (no callback_url). */
json_t	*callback_target(const json_t *ev, const char **why);
/* The body of run's callback, from its event ev. */
char	*callback_body(struct engine *, const json_t *ev, const char *run);
/* The webhook-id of a stored report: the same on every attempt. */
char	*callback_id(const json_t *report);
/* "v1," + base64 HMAC-SHA256 of id "." ts "." body under the whsec_ secret; NULL with cause. */
char	*callback_signature(const struct secret *, const char *id, const char *ts,
	     const char *body, char **cause);
/* The signed request of an attempt (its timestamp is now). */
int	 callback_request(struct engine *, const json_t *report, const json_t *target,
	     char **url, char ***headers, char **cause);
/* 2xx sent; no answer, 408, 429, 5xx retried; any other refusal given up, saying so. */
enum report_verdict callback_verdict(const struct http_response *, char **why);

/* Every configured secret value, in any written form, replaced by [secret] (scrub_secrets). */
char	*report_scrub(struct engine *, const char *);

#endif
