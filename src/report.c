/* report.c: reports back to threads: what each one says, where it goes, and what each API's answer means. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "outbox.h"
#include "report.h"
#include "run.h"
#include "scrub.h"
#include "serve.h"
#include "store.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPORT_LOOKUP_PAGE	100	/* comments or messages per page of a lookup */
#define REPORT_LOOKUP_SKEW_MS	(10LL * 60 * 1000)	/* our clock and the API's may differ */

char *
report_scrub(struct engine *e, const char *s)
{
	return scrub_for_engine(e, s);
}

char *
report_cut(const char *s, size_t max, const char *more)
{
	size_t	 len = strlen(s), keep, mlen = more != NULL ? strlen(more) : 0;

	if (len <= max)
		return xstrdup(s);
	keep = max > mlen ? max - mlen : 0;
	/* Never in the middle of a UTF-8 sequence. */
	while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
		keep--;
	return xprintf("%.*s%s", (int)keep, s, more != NULL ? more : "");
}

static void
report_duration(int64_t ms, char *out, size_t len)
{
	long long	 s = ms / 1000;

	if (ms < 0)
		snprintf(out, len, "not started");
	else if (s < 60)
		snprintf(out, len, "%lld.%llds", s, (long long)(ms % 1000) / 100);
	else if (s < 3600)
		snprintf(out, len, "%lldm %llds", s / 60, s % 60);
	else
		snprintf(out, len, "%lldh %lldm", s / 3600, (s % 3600) / 60);
}

/* Slack's mrkdwn needs only &, < and > escaped. */
static void
report_slack_escape(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '&')
			buf_adds(b, "&amp;");
		else if (*s == '<')
			buf_adds(b, "&lt;");
		else if (*s == '>')
			buf_adds(b, "&gt;");
		else
			buf_addc(b, *s);
	}
}

/* The fixed parts around the agent's message: head (before) and tail (after). */
static void
report_frame(const char *source, const struct report_facts *f, struct buf *head,
    struct buf *tail)
{
	int	 slack = strcmp(source, "slack") == 0;
	char	 dur[64];
	int	 ok = strcmp(f->state, "completed") == 0;

	report_duration(f->duration_ms, dur, sizeof dur);
	if (slack) {
		buf_addf(head, "*spur* · `%s` · *%s* · %s\n", f->automation, f->state, dur);
		if (!ok && f->cause != NULL && *f->cause != '\0')
			buf_addf(head, ">*Why:* %s.\n", f->cause);
		if (!ok && f->reason != NULL) {
			buf_adds(head, ">");
			report_slack_escape(head, f->reason);
			buf_adds(head, "\n");
		}
	} else {
		if (strcmp(source, "github") == 0)
			buf_addf(head, REPORT_MARKER "%s -->\n", f->run);
		buf_addf(head, "**spur** · `%s` · **%s** · %s\n", f->automation, f->state, dur);
		if (!ok && f->cause != NULL && *f->cause != '\0')
			buf_addf(head, "\n> **Why:** %s.\n>", f->cause);
		if (!ok && f->reason != NULL)
			buf_addf(head, "\n> %s\n", f->reason);
	}
	buf_adds(head, "\n");
	if (f->proof != NULL) {
		if (strncmp(f->proof, "http", 4) == 0)
			buf_addf(tail, slack ? "\n\n*Pull request:* <%s>" : "\n\n**Pull request:** %s",
			    f->proof);
		else if (strncmp(f->proof, "artifacts", 9) == 0)
			buf_addf(tail, slack ? "\n\n*Artifacts:* kept with the run" :
			    "\n\n**Artifacts:** kept with the run");
		else if (strcmp(f->proof, "report") != 0)
			buf_addf(tail, slack ? "\n\n*Branch:* `%s`" : "\n\n**Branch:** `%s`",
			    f->proof);
	}
	if (f->retry_of != NULL)
		buf_addf(tail, slack ? "\n\nThis run continues `%s`, which a stop of the engine "
		    "interrupted." : "\n\nThis run continues `%s`, which a stop of the engine "
		    "interrupted.", f->retry_of);
	if (f->link != NULL)
		buf_addf(tail, slack ? "\n\nRun <%s|%s>" : "\n\nRun [%s](%s)",
		    slack ? f->link : f->run, slack ? f->run : f->link);
	else
		buf_addf(tail, "\n\nRun `%s`", f->run);
	if (strcmp(source, "linear") == 0)
		buf_addf(tail, "\n\n" REPORT_MARKER "%s -->", f->run);
}

char *
report_format(const char *source, const struct report_facts *f, size_t max)
{
	struct buf	 head, tail, msg;
	char		*cut, *more;
	const char	*result = f->result != NULL && *f->result != '\0' ? f->result :
			    "_(no final message)_";
	size_t		 room;

	buf_init(&head, 0);
	buf_init(&tail, 0);
	buf_init(&msg, 0);
	report_frame(source, f, &head, &tail);
	if (strcmp(source, "slack") == 0) {
		report_slack_escape(&msg, result);
		result = buf_cstr(&msg);
	}
	room = head.len + tail.len + 64 < max ? max - head.len - tail.len : 64;
	more = xprintf("\n\n… (cut; the whole message: `spur show %s`)", f->run);
	cut = report_cut(result, room, more);
	free(more);
	buf_adds(&head, cut);
	buf_add(&head, tail.data, tail.len);
	free(cut);
	buf_free(&tail);
	buf_free(&msg);
	cut = buf_take(&head);
	if (strlen(cut) > max)
		cut[max] = '\0';	/* only when the frame alone is too big */
	return cut;
}

int
report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	const char	*source = json_string_value(json_object_get(target, "source"));
	const char	*path = json_string_value(json_object_get(target, "path"));
	struct org	*org = config_org(e->conf, json_string_value(json_object_get(target,
			    "org")));
	char		*base, **h;

	if (source != NULL && strcmp(source, "api") == 0)
		return callback_request(e, report, target, url, headers, cause);
	if (source == NULL || org == NULL) {
		xasprintf(cause, "the report's org is no longer configured");
		return -1;
	}
	if ((base = config_api_url(org, source)) == NULL) {
		xasprintf(cause, "no API for %s", source);
		return -1;
	}
	h = xcalloc(5, sizeof *h);
	if (strcmp(source, "github") == 0) {
		h[0] = xprintf("Authorization: Bearer %s", token != NULL ? token : "");
		h[1] = xstrdup("Accept: application/vnd.github+json");
		h[2] = xstrdup("X-GitHub-Api-Version: 2022-11-28");
		h[3] = xstrdup("Content-Type: application/json");
	} else if (strcmp(source, "slack") == 0) {
		if (org->slack == NULL || org->slack->bot_token == NULL)
			goto nocred;
		h[0] = xprintf("Authorization: Bearer %s", org->slack->bot_token->value);
		h[1] = xstrdup("Content-Type: application/json; charset=utf-8");
	} else if (strcmp(source, "linear") == 0) {
		if (org->linear == NULL || org->linear->api_key == NULL)
			goto nocred;
		/* Linear's personal API keys go bare, without "Bearer". */
		h[0] = xprintf("Authorization: %s", org->linear->api_key->value);
		h[1] = xstrdup("Content-Type: application/json");
	} else {
		free(h);
		free(base);
		xasprintf(cause, "cannot report to %s", source);
		return -1;
	}
	*url = xprintf("%s%s", base, path != NULL ? path : "");
	*headers = h;
	free(base);
	return 0;
nocred:
	free(h);
	free(base);
	xasprintf(cause, "%s has no credential configured for reports", source);
	return -1;
}

void
report_headers_free(char **h)
{
	size_t	 i;

	if (h == NULL)
		return;
	for (i = 0; h[i] != NULL; i++)
		freezero_str(h[i]);
	free(h);
}

enum report_verdict
report_verdict(const json_t *target, const struct http_response *r, char **why)
{
	const char	*source = json_string_value(json_object_get(target, "source"));
	json_t		*j = NULL, *v;
	const char	*err;
	enum report_verdict verdict = REPORT_FAILED;

	if (source != NULL && strcmp(source, "api") == 0)
		return callback_verdict(r, why);
	*why = NULL;
	if (r->status == 0) {
		*why = xprintf("network: %s", r->error != NULL ? r->error : "no answer");
		return REPORT_RETRY;
	}
	if (r->status == 429 || r->status >= 500) {
		*why = xprintf("HTTP %d", r->status);
		return REPORT_RETRY;
	}
	j = json_loadb(r->body, r->len, 0, NULL);
	if (source != NULL && strcmp(source, "slack") == 0 && r->status == 200) {
		if (json_is_true(json_object_get(j, "ok")))
			verdict = REPORT_SENT;
		else {
			err = json_string_value(json_object_get(j, "error"));
			if (err != NULL && strcmp(err, "already_reacted") == 0)
				verdict = REPORT_SENT;
			else {
				verdict = err != NULL && strcmp(err, "ratelimited") == 0 ?
				    REPORT_RETRY : REPORT_FAILED;
				*why = xprintf("slack: %s", err != NULL ? err : "not ok");
			}
		}
	} else if (source != NULL && strcmp(source, "linear") == 0 && r->status < 300 &&
	    json_is_true(json_path(j, "data.commentCreate.success")))
		verdict = REPORT_SENT;
	else if (source != NULL && strcmp(source, "linear") == 0) {
		v = json_path(j, "errors.0");
		err = json_string_value(json_path(v, "extensions.code"));
		verdict = err != NULL && strcmp(err, "RATELIMITED") == 0 ? REPORT_RETRY :
		    REPORT_FAILED;
		*why = xprintf("linear: HTTP %d: %s", r->status, json_string_value(
		    json_object_get(v, "message")) != NULL ? json_string_value(
		    json_object_get(v, "message")) : "commentCreate failed");
	} else if (r->status >= 200 && r->status < 300)
		verdict = REPORT_SENT;
	else {
		/* GitHub's rate limits answer 403 with a reset time or Retry-After. */
		verdict = r->status == 403 && r->retry_after_ms >= 0 ? REPORT_RETRY :
		    REPORT_FAILED;
		err = json_string_value(json_object_get(j, "message"));
		*why = xprintf("HTTP %d: %.200s", r->status, err != NULL ? err : "");
	}
	json_decref(j);
	return verdict;
}

int
report_idempotent(const json_t *report)
{
	const char	*kind = json_string_value(json_object_get(report, "kind"));
	const char	*source = json_string_value(json_path(report, "target.source"));

	/* A callback's receiver drops a webhook-id it has seen (Standard Webhooks). */
	if (source != NULL && strcmp(source, "api") == 0)
		return 1;
	/* GitHub answers 200 for a reaction that is there; Slack already_reacted. */
	return kind != NULL && strcmp(kind, "reaction") == 0;
}

int
report_lookup_request(struct engine *e, const json_t *report, const char *token,
    const char *page, char **url, char ***headers, char **body, char **cause)
{
	const json_t	*target = json_object_get(report, "target");
	const char	*source = json_string_value(json_object_get(target, "source"));
	const char	*path = json_string_value(json_object_get(target, "path"));
	const char	*repo = json_string_value(json_object_get(target, "repo"));
	const char	*rest = NULL, *channel, *ts, *issue;
	int64_t		 since = json_integer_value(json_object_get(report, "created_at")) -
			     REPORT_LOOKUP_SKEW_MS;
	json_t		*posted, *t = NULL, *q;
	struct buf	 b;
	struct tm	 tm;
	time_t		 secs;
	char		 when[32];
	int		 r = -1;

	*body = NULL;
	if (since < 0)
		since = 0;
	posted = json_loads(json_string_value(json_object_get(report, "body")) != NULL ?
	    json_string_value(json_object_get(report, "body")) : "", 0, NULL);
	buf_init(&b, 0);
	if (source != NULL && strcmp(source, "github") == 0) {
		/* issues/N/comments, or pulls/N/comments/ID/replies: pull N's review comments. */
		if (path != NULL && repo != NULL && strncmp(path, "/repos/", 7) == 0 &&
		    strncmp(path + 7, repo, strlen(repo)) == 0)
			rest = strstr(path + 7 + strlen(repo), "/comments");
		if (rest == NULL) {
			xasprintf(cause, "cannot look in the thread of %s", path != NULL ? path :
			    "?");
			goto out;
		}
		secs = (time_t)(since / 1000);
		gmtime_r(&secs, &tm);
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		buf_addf(&b, "%.*s?per_page=%d&since=%s&page=", (int)(rest + 9 - path), path,
		    REPORT_LOOKUP_PAGE, when);
		buf_addq(&b, page != NULL ? page : "1");
	} else if (source != NULL && strcmp(source, "slack") == 0) {
		channel = json_string_value(json_object_get(posted, "channel"));
		ts = json_string_value(json_object_get(posted, "thread_ts"));
		if (channel == NULL) {
			xasprintf(cause, "the stored Slack report names no channel");
			goto out;
		}
		/* A reply in the thread, or (no thread) a message in the channel. */
		buf_adds(&b, ts != NULL ? "/conversations.replies?channel=" :
		    "/conversations.history?channel=");
		buf_addq(&b, channel);
		if (ts != NULL) {
			buf_adds(&b, "&ts=");
			buf_addq(&b, ts);
		}
		buf_addf(&b, "&oldest=%lld.000000&limit=%d&include_all_metadata=true",
		    (long long)(since / 1000), REPORT_LOOKUP_PAGE);
		if (page != NULL) {
			buf_adds(&b, "&cursor=");
			buf_addq(&b, page);
		}
	} else if (source != NULL && strcmp(source, "linear") == 0) {
		issue = json_string_value(json_path(posted, "variables.input.issueId"));
		if (issue == NULL) {
			xasprintf(cause, "the stored Linear report names no issue");
			goto out;
		}
		/* The last comments: a report is posted soon after it is stored. */
		q = json_pack("{s:s,s:{s:s}}", "query", "query SpurReport($id: String!) { "
		    "issue(id: $id) { comments(last: 50) { nodes { body } } } }", "variables",
		    "id", issue);
		*body = json_dumps(q, JSON_COMPACT);
		json_decref(q);
	} else {
		xasprintf(cause, "cannot look in a %s thread", source != NULL ? source : "?");
		goto out;
	}
	t = json_deep_copy(target);
	json_object_set_new(t, "path", json_string(buf_cstr(&b)));
	r = report_request(e, report, t, token, url, headers, cause);
out:
	if (r != 0) {
		free(*body);
		*body = NULL;
	}
	json_decref(t);
	json_decref(posted);
	buf_free(&b);
	return r;
}

/* Whether one comment or message of a thread is report's. */
static int
report_is_ours(const char *source, const json_t *item, const char *run, const char *marker)
{
	const char	*text;
	const json_t	*md;

	if (strcmp(source, "slack") == 0) {
		md = json_object_get(item, "metadata");
		text = json_string_value(json_object_get(md, "event_type"));
		return text != NULL && strcmp(text, REPORT_SLACK_EVENT) == 0 &&
		    json_string_value(json_path(md, "event_payload.run")) != NULL &&
		    strcmp(json_string_value(json_path(md, "event_payload.run")), run) == 0;
	}
	text = json_string_value(json_object_get(item, "body"));
	return text != NULL && strstr(text, marker) != NULL;
}

enum report_lookup
report_lookup_verdict(const json_t *report, const char *page, const struct http_response *r,
    char **next, char **why)
{
	const char	*source = json_string_value(json_path(report, "target.source"));
	const char	*run = json_string_value(json_object_get(report, "run"));
	const char	*err, *cursor;
	json_t		*j, *list = NULL, *item;
	char		*marker;
	size_t		 i;
	long		 n;
	enum report_lookup v = REPORT_LOOKUP_RETRY;

	*next = NULL;
	*why = NULL;
	if (r->status == 0) {
		*why = xprintf("looking in the thread: network: %s", r->error != NULL ?
		    r->error : "no answer");
		return REPORT_LOOKUP_RETRY;
	}
	if (source == NULL || run == NULL) {
		*why = xprintf("looking in the thread: the report is unreadable");
		return REPORT_LOOKUP_RETRY;
	}
	j = json_loadb(r->body, r->len, 0, NULL);
	if (r->status < 200 || r->status >= 300) {
		err = json_string_value(json_object_get(j, "message"));
		if (err == NULL)
			err = json_string_value(json_path(j, "errors.0.message"));
		*why = xprintf("looking in the thread: HTTP %d: %.200s", r->status,
		    err != NULL ? err : "");
		goto out;
	}
	if (strcmp(source, "github") == 0)
		list = j;
	else if (strcmp(source, "slack") == 0) {
		if (!json_is_true(json_object_get(j, "ok"))) {
			err = json_string_value(json_object_get(j, "error"));
			*why = xprintf("looking in the thread: slack: %s", err != NULL ? err :
			    "not ok");
			goto out;
		}
		list = json_object_get(j, "messages");
	} else if (strcmp(source, "linear") == 0)
		list = json_path(j, "data.issue.comments.nodes");
	if (!json_is_array(list)) {
		err = json_string_value(json_path(j, "errors.0.message"));
		*why = xprintf("looking in the thread: %s: %.200s", source, err != NULL ? err :
		    "an unexpected answer");
		goto out;
	}
	marker = xprintf(REPORT_MARKER "%s -->", run);
	v = REPORT_LOOKUP_ABSENT;
	json_array_foreach(list, i, item) {
		if (report_is_ours(source, item, run, marker)) {
			v = REPORT_LOOKUP_FOUND;
			break;
		}
	}
	free(marker);
	if (v == REPORT_LOOKUP_FOUND)
		goto out;
	if (strcmp(source, "github") == 0 && json_array_size(list) >= REPORT_LOOKUP_PAGE) {
		/* A full page: there may be more after it. */
		n = page != NULL ? strtol(page, NULL, 10) : 1;
		*next = xprintf("%ld", (n > 0 ? n : 1) + 1);
		v = REPORT_LOOKUP_MORE;
	} else if (strcmp(source, "slack") == 0) {
		cursor = json_string_value(json_path(j, "response_metadata.next_cursor"));
		if (cursor != NULL && *cursor != '\0') {
			*next = xstrdup(cursor);
			v = REPORT_LOOKUP_MORE;
		}
	}
out:
	json_decref(j);
	return v;
}

/* Where a run's report (or the accept reaction) goes; NULL with why when nowhere. */
static json_t *
report_target(const json_t *ev, int reaction, const char **why)
{
	const char	*source = json_string_value(json_object_get(ev, "source"));
	const char	*org = json_string_value(json_object_get(ev, "org"));
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	const json_t	*meta = json_object_get(ev, "meta");
	json_t		*t;
	json_int_t	 n = json_integer_value(json_object_get(meta, "number"));
	json_int_t	 cid = json_integer_value(json_object_get(meta, "comment_id"));
	json_int_t	 rcid = json_integer_value(json_object_get(meta, "review_comment_id"));
	const char	*s;
	char		*path = NULL;

	if (source == NULL || org == NULL) {
		*why = "the run's event is unreadable";
		return NULL;
	}
	if (strcmp(source, "api") == 0) {
		if (reaction) {
			*why = "nothing to react to";
			return NULL;
		}
		return callback_target(ev, why);
	}
	if (strcmp(source, "github") == 0) {
		if (repo == NULL || (n == 0 && !reaction)) {
			*why = "the event has no issue or pull request to answer";
			return NULL;
		}
		if (reaction && rcid != 0)
			path = xprintf("/repos/%s/pulls/comments/%lld/reactions", repo,
			    (long long)rcid);
		else if (reaction && cid != 0)
			path = xprintf("/repos/%s/issues/comments/%lld/reactions", repo,
			    (long long)cid);
		else if (reaction) {
			*why = "no comment to react to";
			return NULL;
		} else if (rcid != 0)
			path = xprintf("/repos/%s/pulls/%lld/comments/%lld/replies", repo,
			    (long long)n, (long long)rcid);
		else
			path = xprintf("/repos/%s/issues/%lld/comments", repo, (long long)n);
		t = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "source", source, "org", org,
		    "method", "POST", "path", path, "repo", repo, "installation_id",
		    json_integer_value(json_object_get(meta, "installation_id")));
		free(path);
		return t;
	}
	if (strcmp(source, "slack") == 0) {
		if (json_string_value(json_object_get(meta, "channel")) == NULL ||
		    (reaction && json_string_value(json_object_get(meta, "ts")) == NULL)) {
			*why = reaction ? "no message to react to" : "no channel to answer";
			return NULL;
		}
		s = reaction ? "/reactions.add" : "/chat.postMessage";
		return json_pack("{s:s,s:s,s:s,s:s}", "source", source, "org", org, "method",
		    "POST", "path", s);
	}
	if (strcmp(source, "linear") == 0 && !reaction) {
		if (json_string_value(json_object_get(meta, "issue_id")) == NULL) {
			*why = "the event has no issue to answer";
			return NULL;
		}
		return json_pack("{s:s,s:s,s:s,s:s}", "source", source, "org", org, "method",
		    "POST", "path", "");
	}
	*why = reaction ? "nothing to react to" : "the event has no thread to answer "
	    "(generic webhooks and schedules)";
	return NULL;
}

/* The request body for a report: its text placed as each API wants it. */
static char *
report_body(const json_t *ev, const char *run, const char *text, int reaction)
{
	const char	*source = json_string_value(json_object_get(ev, "source"));
	const json_t	*meta = json_object_get(ev, "meta");
	const char	*ts = json_string_value(json_object_get(meta, "thread_ts"));
	json_t		*j;
	char		*s;

	if (ts == NULL)
		ts = json_string_value(json_object_get(meta, "ts"));
	if (strcmp(source, "github") == 0)
		j = reaction ? json_pack("{s:s}", "content", "eyes") :
		    json_pack("{s:s}", "body", text);
	else if (strcmp(source, "slack") == 0 && reaction)
		j = json_pack("{s:s,s:s,s:s}", "channel", json_string_value(json_object_get(
		    meta, "channel")), "timestamp", json_string_value(json_object_get(meta,
		    "ts")), "name", "eyes");
	else if (strcmp(source, "slack") == 0) {
		j = json_pack("{s:s,s:s}", "channel", json_string_value(json_object_get(meta,
		    "channel")), "text", text);
		if (ts != NULL)
			json_object_set_new(j, "thread_ts", json_string(ts));
		json_object_set_new(j, "unfurl_links", json_false());
		/* mrkdwn hides nothing: the run id goes where the outbox can look for it. */
		json_object_set_new(j, "metadata", json_pack("{s:s,s:{s:s}}", "event_type",
		    REPORT_SLACK_EVENT, "event_payload", "run", run));
	} else
		j = json_pack("{s:s,s:{s:{s:s,s:s}}}", "query", "mutation CommentCreate("
		    "$input: CommentCreateInput!) { commentCreate(input: $input) { success "
		    "comment { id } } }", "variables", "input", "issueId",
		    json_string_value(json_object_get(meta, "issue_id")), "body", text);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

int
report_ack(const struct spur_event *ev, const char *run, json_t **target, char **body)
{
	json_t		*evj;
	const char	*why;

	*target = NULL;
	*body = NULL;
	if (strcmp(ev->source, "github") != 0 && strcmp(ev->source, "slack") != 0)
		return -1;
	evj = spur_event_head_json(ev);
	if ((*target = report_target(evj, 1, &why)) != NULL)
		*body = report_body(evj, run, NULL, 1);
	json_decref(evj);
	return *target != NULL ? 0 : -1;
}

void
report_run_end(struct engine *e, const char *run)
{
	json_t			*j, *ev, *target = NULL, *aj, *none;
	struct report_facts	 f;
	enum run_cause		 why;
	const char		*nothread = NULL, *source;
	char			*result = NULL, *reason = NULL, *text = NULL, *body = NULL;
	char			*link = NULL;
	size_t			 max;

	if ((j = store_run_json(e->store, run, 1)) == NULL)
		return;
	if (store_report_exists(e->store, run, "run_end"))
		goto out;
	ev = json_object_get(j, "event");
	aj = json_object_get(j, "automation_config");
	if (json_is_string(json_object_get(aj, "report")) &&
	    strcmp(json_string_value(json_object_get(aj, "report")), "none") == 0) {
		none = json_object();
		store_report_note(e->store, run, "run_end", none, "none", "report: none");
		json_decref(none);
		goto out;
	}
	if ((target = report_target(ev, 0, &nothread)) == NULL) {
		none = json_object();
		store_report_note(e->store, run, "run_end", none, "no_thread", nothread);
		json_decref(none);
		goto out;
	}
	source = json_string_value(json_object_get(target, "source"));
	if (strcmp(source, "api") == 0) {
		body = callback_body(e, ev, run);
		goto store;
	}
	memset(&f, 0, sizeof f);
	f.run = run;
	f.automation = json_string_value(json_object_get(j, "automation"));
	f.state = json_string_value(json_object_get(j, "state"));
	f.reason = reason = report_scrub(e, json_string_value(json_object_get(j, "reason")));
	if (run_cause_parse(json_string_value(json_object_get(j, "cause")), &why) == 0)
		f.cause = run_cause_words(why);
	f.retry_of = json_string_value(json_object_get(j, "retry_of"));
	f.result = result = report_scrub(e, json_string_value(json_object_get(j, "result")));
	f.proof = json_string_value(json_object_get(j, "proof"));
	f.duration_ms = json_is_integer(json_object_get(j, "duration_ms")) ?
	    json_integer_value(json_object_get(j, "duration_ms")) : -1;
	if (e->conf->public_url != NULL && *e->conf->public_url != '\0') {
		max = strlen(e->conf->public_url);
		while (max > 0 && e->conf->public_url[max - 1] == '/')
			max--;
		link = xprintf("%.*s/runs/%s", (int)max, e->conf->public_url, run);
	}
	f.link = link;
	if (f.automation == NULL)
		f.automation = "?";
	if (f.state == NULL)
		f.state = "?";
	max = strcmp(source, "github") == 0 ? REPORT_GITHUB_MAX :
	    strcmp(source, "slack") == 0 ? REPORT_SLACK_MAX : REPORT_LINEAR_MAX;
	text = report_format(source, &f, max);
	body = report_body(ev, run, text, 0);
store:
	if (store_report_add(e->store, run, "run_end", target, body) == 0) {
		log_info("event=report.stored run=%s kind=run_end source=%s", run, source);
		outbox_kick(e->outbox);
	}
out:
	free(result);
	free(reason);
	free(text);
	free(body);
	free(link);
	json_decref(target);
	json_decref(j);
}
