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
 * Every body spur posts in markdown starts with this marker (an HTML comment,
 * not shown) followed by the run id, "<!-- spur:run_... -->", or ends with a
 * line holding it; a system whose markup has no hidden comments carries the
 * run id in the message's metadata instead (its source-*.c). So a source can
 * recognize spur's own posts and never start runs from them, and the outbox
 * can find a report already in its thread.
 */
#include "event.h"
#include "store.h"

#define REPORT_MARKER		EVENT_OWN_MARKER

/*
 * The event starts runs (run: the first of them): the eyes reaction on the
 * triggering comment or message that says it was accepted, as the
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
/* What report.c keeps between calls (its parsed automations), freed at the engine's end. */
void	 report_cleanup(void);

/*
 * reports.progress: the run's one status message in its thread (posted on
 * accept, edited as the run moves, at most once every reports.edit_interval,
 * REPORT_EDIT_MS by default; the report at the end replaces it).
 * report_status: the run moved (queued, running); report_status_posted: the
 * outbox got the message's id.
 */
#define REPORT_EDIT_MS		10000
#define REPORT_NOTE_MS		60000	/* reports.note_interval: a run's notes (thread_post) */
/* A run's report waits this long for its status message's id, to replace it. */
#define REPORT_STATUS_WAIT_MS	60000
void	 report_status(struct engine *, const char *run);
void	 report_status_posted(struct engine *, const char *run, const char *id);
/*
 * An edit of a running run's status was sent: the next, reports.refresh on
 * (REPORT_REFRESH_MS by default), tells its time.
 */
#define REPORT_REFRESH_MS	60000
void	 report_status_edited(struct engine *, const char *run);
/*
 * The status message in b's markup, from the run's row (with its event's head)
 * and its history h (nh rows, oldest first) at now: queued, running since when
 * and for how long so far, or ended in how long (its report follows in the
 * thread); with link (NULL: none); then its phases as a checklist, each passed
 * one with how long it took, the current one since when. Pure.
 */
struct report_backend;
struct history_row;
char	*report_status_line(const struct report_backend *, const struct run_row *,
	     const struct history_row *h, size_t nh, const char *link, int64_t now);
/* Whether the automation's report_to destinations hear of a run that ended in state. */
struct automation;
int	 report_dest_heard(const struct automation *, enum run_state);
/* A report that was to replace the status message was given up: it is posted instead. */
void	 report_edit_given_up(struct engine *, const json_t *report);
/* The id of the message a sent report of kind status posted, from the API's answer. */
char	*report_message_id(const json_t *report, const struct http_response *);

/*
 * A short answer in ev's thread (a thread command's, thread-cmd.c): stored
 * for the outbox under the event's id (kind reply), posted once like a
 * report. Nothing where the event's system has no thread to answer.
 */
void	 report_reply(struct engine *, const struct spur_event *, const char *text);
/*
 * A note of run's agent (the run's MCP server's thread_post, kind note:N,
 * and thread_ask, ask:N; N from 1) in its thread: scrubbed like a report,
 * stored for the outbox, posted once. 0, or -1 with *why (nothing to post
 * to, or stored not).
 */
int	 report_note(struct engine *, const char *run, const char *kind, const char *text,
	     const char **why);
/* {public_url}/runs/RUN, or NULL without a public_url. */
char	*report_link(struct engine *, const char *run);
/* The run's id linked to its page in source's markup (`RUN` without a public_url). */
char	*report_run_ref(struct engine *, const char *source, const char *run);

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
	const char	*usage;		/* "1.2M tokens, $3.40" (budget_words), NULL: no model used */
	const char	*link;		/* public_url/runs/RUN, may be NULL */
};
/*
 * A run's facts from its row (store_run_get with RUN_GET_USAGE) at now: the
 * usage's words go in usage. Pure: the caller cuts secrets out of reason and
 * result and adds the link.
 */
struct run_row;
void	 report_facts_of(const struct run_row *, int64_t now, struct report_facts *,
	     char *usage, size_t usagelen);
/* The message in the markup of source's backend, cut to max bytes. Pure. */
char	*report_format(const char *source, const struct report_facts *, size_t max);
/* s in mrkdwn (a backend's with .mrkdwn): only &, < and > escaped (as &amp; &lt; &gt;). */
struct buf;
void	 report_mrkdwn_escape(struct buf *, const char *);
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
 * there before it is posted again, by its marker (or the message's metadata),
 * in what the backend lists of its thread (the comments since the report was
 * stored, the thread's replies, the last comments). The request
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
	     const struct http_response *, char **next, char **found, char **why);
/* Whether posting report twice does no harm (reactions): then it is never looked for. */
int	 report_idempotent(const json_t *report);

/*
 * One outside system a thread can be on, in its own source-*.c (as OpenSMTPD's
 * queue backends, tmux's cmd_entry): where its reports go, how they are asked,
 * what its answers mean, how a report already posted is found in its thread.
 * Found by the event's source (report_backend_find); adding a system is one
 * file and one entry in report.c's table. NULL members: the system has none.
 */
enum report_marker_at { REPORT_MARKER_NONE, REPORT_MARKER_HEAD, REPORT_MARKER_TAIL };
struct buf;
struct org;
struct report_backend {
	const char		*name;		/* the event's source */
	size_t			 max;		/* a message's limit in bytes; 0: not text */
	int			 mrkdwn;	/* mrkdwn, else markdown */
	enum report_marker_at	 marker;	/* where a text's hidden marker goes */
	/* The accept reaction on the event's message: its target and body; -1: none. */
	int	 (*ack)(const json_t *ev, const char *run, json_t **target, char **body);
	/* Where a run's report goes; NULL with why when nowhere. */
	json_t	*(*target)(const json_t *ev, const char **why);
	/*
	 * The request body of a message of kind (run_end, status) in the thread:
	 * text (report_format's, NULL when max is 0) placed.
	 */
	char	*(*body)(struct engine *, const json_t *ev, const char *run, const char *kind,
		     const char *text);
	/* The request (URL and headers) that sends a stored report to target. */
	int	 (*request)(struct engine *, const json_t *report, const json_t *target,
		     const char *token, char **url, char ***headers, char **cause);
	enum report_verdict (*verdict)(const json_t *target, const struct http_response *,
		     char **why);
	/* Whether posting report twice does no harm; NULL: only reactions. */
	int	 (*idempotent)(const json_t *report);
	/*
	 * The lookup of a report in its thread (see report_lookup_request): one
	 * page's path (or POST body) since a time (ms), for what was posted; the
	 * list of items in an answer (NULL with why); whether an item is the run's
	 * (NULL: its body holds marker); the next page (NULL: none).
	 */
	int	 (*lookup_request)(const json_t *report, const json_t *posted, const char *page,
		     int64_t since, struct buf *path, char **body, char **cause);
	const json_t *(*lookup_list)(const json_t *answer, char **why);
	int	 (*lookup_ours)(const json_t *item, const char *run, const char *kind,
		     const char *marker);
	char	*(*lookup_next)(const json_t *answer, const json_t *list, const char *page);
	/*
	 * The status message (reports.progress), where the system can edit one:
	 * where it is posted (NULL with why: not here), the edit of message id
	 * (an edit is the same however often it is sent: never looked for) and
	 * its body, and a message's id in a post's answer or a lookup's item.
	 */
	json_t	*(*status_target)(const json_t *ev, const char **why);
	json_t	*(*edit_target)(const json_t *ev, const char *id);
	char	*(*edit_body)(const json_t *ev, const char *run, const char *kind,
		     const char *id, const char *text);
	char	*(*message_id)(const json_t *answer_or_item);
	/*
	 * A thread spur opens itself (a slash command has none): its status
	 * message is posted whatever reports.progress says, opens with who asked
	 * (status_head), and every later message of the run goes in its thread,
	 * the report included (it follows the status message, never replaces it).
	 */
	int	 (*opens_thread)(const json_t *ev);
	void	 (*status_head)(const json_t *ev, struct buf *);
};
extern const struct report_backend report_api;
/* The backend of a source (by its name; "api" for API sessions), or NULL. */
const struct report_backend *report_backend_find(const char *source);
/* Each backend in turn: the first after prev (NULL: the first), NULL after the last. */
const struct report_backend *report_backend_next(const struct report_backend *prev);

/* Helpers for the backends (report-common.c). */
#define REPORT_LOOKUP_PAGE	100	/* comments or messages per page of a lookup */
/* target's org and *url (the org's API for the source + target's path); NULL with cause. */
struct org *report_api_url(struct engine *, const json_t *target, char **url, char **cause);
/* No answer, 429 or 5xx: retried (1, *v and *why set); 0: the backend decides. */
int	 report_verdict_transport(const struct http_response *, enum report_verdict *v,
	     char **why);
/* 2xx sent; a rate limit's 403 retried; any other refusal given up, with the API's message. */
enum report_verdict report_verdict_http(const struct http_response *, const json_t *answer,
	     char **why);
/* A REST API's verdict (the backend's verdict): transport, then the answer's JSON as above. */
enum report_verdict report_verdict_rest(const json_t *target, const struct http_response *,
	     char **why);
/* {"body": text}: a REST API's message (body and edit_body), and a message's integer "id". */
char	*report_body_field(struct engine *, const json_t *ev, const char *run, const char *kind,
	     const char *text);
char	*report_edit_body_field(const json_t *ev, const char *run, const char *kind,
	     const char *id, const char *text);
char	*report_message_id_int(const json_t *);
/* A lookup whose answer is the list itself, REPORT_LOOKUP_PAGE a page, pages 1, 2, ... */
const json_t *report_lookup_list_array(const json_t *answer, char **why);
char	*report_lookup_next_page(const json_t *answer, const json_t *list, const char *page);

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

#endif
