/* fire.c: the dry run of one payload (spur fire, the console's why): nothing stored or started. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "fire.h"
#include "prompt.h"
#include "repo.h"
#include "source.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FIRE_MAX_MATCHES	256

json_t *
fire_event(struct automation_set *set, const char *org, struct spur_event *ev)
{
	const struct automation	*matches[FIRE_MAX_MATCHES], *a;
	json_t			*out, *list, *nomatch, *evj, *m;
	char			*prompt, *repo, *cause, *reason, **groups = NULL;
	size_t			 n, i, j;
	int			 assumed = 0;

	if (ev->id == NULL)
		ev->id = time_id("evt_");
	/*
	 * A dry run asks no API who the actor is: it is taken for a full member
	 * (authors: members), in no group or team, and the answer says so.
	 */
	if (ev->person == NULL && automation_set_authors_need(set, ev, &groups)) {
		ev->person = xcalloc(1, sizeof *ev->person);
		ev->person->groups = xcalloc(1, sizeof *ev->person->groups);
		assumed = 1;
	}
	for (i = 0; groups != NULL && groups[i] != NULL; i++)
		free(groups[i]);
	free(groups);
	n = automation_match(set, ev, matches, FIRE_MAX_MATCHES);
	out = json_object();
	if (assumed)
		json_object_set_new(out, "assumed", json_string("the actor is taken for a full "
		    "member of the workspace, in no group or team: spur fire asks no API who "
		    "people are"));
	evj = spur_event_to_json(ev);
	json_object_set_new(out, "event", evj);
	list = json_array();
	for (i = 0; i < n; i++) {
		prompt = prompt_build(matches[i]->prompt, ev, NULL);
		m = json_pack("{s:s,s:s,s:s}", "automation", matches[i]->name, "file",
		    matches[i]->file, "prompt", prompt);
		/* The repository a run would work on, as the engine chooses it. */
		cause = NULL;
		repo_choose(matches[i], evj, &repo, &cause);
		json_object_set_new(m, "repository", repo != NULL ? json_string(repo) :
		    json_null());
		if (cause != NULL)
			json_object_set_new(m, "repository_error", json_string(cause));
		json_array_append_new(list, m);
		free(repo);
		free(cause);
		free(prompt);
	}
	json_object_set_new(out, "matches", list);
	nomatch = json_array();
	for (i = 0; i < automation_count(set); i++) {
		a = automation_get(set, i);
		for (j = 0; j < n; j++) {
			if (matches[j] == a)
				break;
		}
		if (j < n || strcmp(a->org, org) != 0)
			continue;
		reason = automation_why(a, ev);
		json_array_append_new(nomatch, json_pack("{s:s,s:s,s:s}", "automation", a->name,
		    "file", a->file, "why", reason != NULL ? reason : "matched"));
		free(reason);
	}
	json_object_set_new(out, "not_matched", nomatch);
	return out;
}

static int
fire_has_header(const struct header *h, size_t n, const char *name)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strcasecmp(h[i].name, name) == 0)
			return 1;
	}
	return 0;
}

int
fire_payload(const struct config *conf, struct automation_set *set, const char *org,
    const char *hook, const char *event, struct header *headers, size_t nh, char *body,
    size_t len, json_t **out, char **cause)
{
	const struct source	*src = source_find(hook);
	struct source_req	 sr;
	struct source_result	 res;
	int			 rc;

	*out = NULL;
	*cause = NULL;
	if (src->event_header != NULL && event != NULL && !fire_has_header(headers, nh,
	    src->event_header)) {
		headers[nh].name = src->event_header;
		headers[nh++].value = event;
	}
	if (!fire_has_header(headers, nh, "Content-Type")) {
		headers[nh].name = "Content-Type";
		headers[nh++].value = len > 0 && (body[0] == '{' || body[0] == '[') ?
		    "application/json" : "application/x-www-form-urlencoded";
	}
	memset(&sr, 0, sizeof sr);
	memset(&res, 0, sizeof res);
	sr.conf = (struct config *)conf;
	sr.org = config_org(conf, org);
	sr.org_name = org;
	sr.hook = hook;
	sr.headers = headers;
	sr.nheaders = nh;
	sr.body = body;
	sr.len = len;
	sr.now_ms = now_ms();
	sr.no_verify = 1;	/* a dry run needs no secret */
	if (src == &source_webhook && (sr.webhook = automation_webhook(set, org, hook)) == NULL) {
		xasprintf(cause, "no automation of org %s declares the webhook \"%s\"", org, hook);
		return -1;
	}
	src->handle(&sr, &res);
	switch (res.verdict) {
	case SOURCE_EVENT:
		*out = fire_event(set, org, res.event);
		rc = 0;
		break;
	case SOURCE_REPLY:
		*out = json_pack("{s:s}", "reply", res.reply != NULL ? res.reply : "");
		rc = 1;
		break;
	default:
		*cause = xstrdup(res.cause != NULL ? res.cause : "not an event");
		rc = -1;
		break;
	}
	source_result_free(&res);
	return rc;
}
