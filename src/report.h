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
 * shown), followed by the run id: "<!-- spur:run_... -->". Slack and Linear
 * bodies end with a line holding it too, so a source can recognize spur's own
 * posts and never start runs from them.
 */
#include "event.h"

#define REPORT_MARKER		EVENT_OWN_MARKER

/* Each API's limit for one message body, in bytes (a safe bound for characters). */
#define REPORT_GITHUB_MAX	65000
#define REPORT_SLACK_MAX	39000
#define REPORT_LINEAR_MAX	100000

/*
 * The event was accepted and starts runs (run: the first of them): an eyes
 * reaction on the triggering GitHub comment or Slack message is stored for
 * the outbox.
 */
void	 report_accepted(struct engine *, const struct spur_event *, const char *run);
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
	const char	*result;	/* the agent's final message, may be NULL */
	const char	*proof;		/* PR URL, branch, "artifacts: DIR", may be NULL */
	int64_t		 duration_ms;	/* -1: never started */
	const char	*link;		/* public_url/runs/RUN, may be NULL */
};
/* The message in source's format (github, slack, linear), cut to max bytes. Pure. */
char	*report_format(const char *source, const struct report_facts *, size_t max);
/* s cut to at most max bytes on a UTF-8 boundary, saying so when cut. Pure. */
char	*report_cut(const char *s, size_t max, const char *more);

/* How the outbox sends a stored report: the request (URL and headers, auth included). */
int	 report_request(struct engine *, const json_t *target, const char *token,
	     char **url, char ***headers, char **cause);
void	 report_headers_free(char **);

enum report_verdict { REPORT_SENT, REPORT_RETRY, REPORT_FAILED };
/* What an API's answer means for a stored report; why is set unless sent. */
enum report_verdict report_verdict(const json_t *target, const struct http_response *,
	     char **why);

/* Every configured secret value replaced by [secret]. */
char	*report_scrub(struct engine *, const char *);

#endif
