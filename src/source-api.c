/* source-api.c: the org API as a thread to answer: a session's callback_url, the run.ended body, its Standard Webhooks signature, what the receiver's answer means. */
#include "spur.h"
#include "conf.h"
#include "outbox.h"
#include "report.h"
#include "scrub.h"
#include "serve.h"
#include "source.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Only the URL and the body are stored with the report (store_report_add);
 * the signature is made at each attempt, with that attempt's timestamp, from
 * the secret in the config: the secret is never in the store.
 */

json_t *
callback_target(const json_t *ev, const char **why)
{
	const char	*org = json_string_value(json_object_get(ev, "org"));
	const char	*url = json_string_value(json_path(ev, "meta.callback_url"));
	const char	*secret = json_string_value(json_path(ev, "meta.callback_secret"));
	json_t		*t;

	if (org == NULL) {
		*why = "the run's event is unreadable";
		return NULL;
	}
	if (url == NULL || *url == '\0') {
		*why = "the session has no callback_url (its runs are read through the API)";
		return NULL;
	}
	t = json_pack("{s:s,s:s,s:s,s:s}", "source", "api", "org", org, "method", "POST",
	    "url", url);
	/* A report destination may name the org's secret that signs it (its name only). */
	if (secret != NULL)
		json_object_set_new(t, "secret", json_string(secret));
	return t;
}

char *
callback_body(struct engine *e, const json_t *ev, const char *run)
{
	const json_t	*meta = json_object_get(ev, "meta");
	json_t		*r, *j, *v;
	const char	*k;
	char		*s, *safe;

	if ((r = store_run_json(e->store, run, 0)) == NULL)
		r = json_pack("{s:s}", "id", run);
	/* What the agent wrote may quote a secret of the config: never sent out. */
	for (k = "result"; k != NULL; k = strcmp(k, "result") == 0 ? "reason" : NULL) {
		v = json_object_get(r, k);
		if (json_is_string(v)) {
			safe = report_scrub(e, json_string_value(v));
			json_object_set_new(r, k, json_string(safe));
			free(safe);
		}
	}
	v = json_object_get(meta, "metadata");
	j = json_pack("{s:s,s:O,s:o,s:O}", "type", CALLBACK_RUN_ENDED, "session",
	    json_object_get(meta, "session") != NULL ? json_object_get(meta, "session") :
	    json_null(), "run", r, "metadata", v != NULL ? v : json_null());
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

char *
callback_id(const json_t *report)
{
	const char	*run = json_string_value(json_object_get(report, "run"));
	const char	*kind = json_string_value(json_object_get(report, "kind"));

	/* One run_end per run: the run's id is the message's, on every attempt. */
	if (kind == NULL || strcmp(kind, "run_end") == 0)
		return xstrdup(run != NULL ? run : "");
	return xprintf("%s_%s", run != NULL ? run : "", kind);
}

char *
callback_signature(const struct secret *secret, const char *id, const char *ts,
    const char *body, char **cause)
{
	unsigned char	*key, mac[32];
	size_t		 keylen;
	char		*b64, *sig;

	if (webhook_standard_key(secret->value, secret->len, &key, &keylen) != 0) {
		*cause = xprintf("the callback secret is not whsec_ followed by base64");
		return NULL;
	}
	webhook_standard_hmac(key, keylen, id, ts, body, strlen(body), mac);
	explicit_bzero(key, keylen);
	free(key);
	b64 = base64_encode(mac, sizeof mac);
	explicit_bzero(mac, sizeof mac);
	sig = xprintf("v1,%s", b64);
	free(b64);
	return sig;
}

int
callback_request(struct engine *e, const json_t *report, const json_t *target, char **url,
    char ***headers, char **cause)
{
	const char	*oname = json_string_value(json_object_get(target, "org"));
	const char	*u = json_string_value(json_object_get(target, "url"));
	const char	*body = json_string_value(json_object_get(report, "body"));
	const char	*sname = json_string_value(json_object_get(target, "secret"));
	struct org	*org = config_org(e->conf, oname);
	struct secret	*key;
	char		*id, *sig, ts[32], **h, *what;

	if (org == NULL) {
		xasprintf(cause, "the report's org is no longer configured");
		return -1;
	}
	if (u == NULL || body == NULL) {
		xasprintf(cause, "the stored callback has no url or body");
		return -1;
	}
	what = sname != NULL ? xprintf("orgs.%s.secrets.%s", oname, sname) :
	    xprintf("orgs.%s.api.callback_secret", oname);
	key = sname != NULL ? org_secret(org, sname) : org->api != NULL ?
	    org->api->callback_secret : NULL;
	if (key == NULL) {
		xasprintf(cause, "%s is not configured: the callback is not sent unsigned", what);
		free(what);
		return -1;
	}
	id = callback_id(report);
	snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
	if ((sig = callback_signature(key, id, ts, body, cause)) == NULL) {
		free(*cause);
		xasprintf(cause, "%s is not whsec_ followed by base64", what);
		free(what);
		free(id);
		return -1;
	}
	free(what);
	h = xcalloc(5, sizeof *h);
	h[0] = xstrdup("Content-Type: application/json");
	h[1] = xprintf("webhook-id: %s", id);
	h[2] = xprintf("webhook-timestamp: %s", ts);
	h[3] = xprintf("webhook-signature: %s", sig);
	freezero_str(sig);
	free(id);
	*url = xstrdup(u);
	*headers = h;
	return 0;
}

enum report_verdict
callback_verdict(const struct http_response *r, char **why)
{
	*why = NULL;
	if (r->refused) {
		/* Not retried, and nothing said of the address but that. */
		*why = xstrdup("refused: private address");
		return REPORT_FAILED;
	}
	if (r->status == 0) {
		*why = xprintf("network: %s", r->error != NULL ? r->error : "no answer");
		return REPORT_RETRY;
	}
	if (r->status >= 200 && r->status < 300)
		return REPORT_SENT;
	/* The receiver is down or busy: later, like any report. */
	if (r->status == 408 || r->status == 429 || r->status >= 500) {
		*why = xprintf("callback_url answered HTTP %d", r->status);
		return REPORT_RETRY;
	}
	/* A refusal (or a redirect, never followed) will not change by asking again. */
	*why = xprintf("callback_url answered HTTP %d: given up (a 3xx or a 4xx other "
	    "than 408 and 429 is not retried)", r->status);
	return REPORT_FAILED;
}

static json_t *
api_report_target(const json_t *ev, const char **why)
{
	return callback_target(ev, why);
}

static char *
api_report_body(struct engine *e, const json_t *ev, const char *run, const char *kind,
    const char *text)
{
	return callback_body(e, ev, run);
}

static int
api_report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	return callback_request(e, report, target, url, headers, cause);
}

static enum report_verdict
api_report_verdict(const json_t *target, const struct http_response *r, char **why)
{
	return callback_verdict(r, why);
}

/* A callback's receiver drops a webhook-id it has seen (Standard Webhooks). */
static int
api_report_idempotent(const json_t *report)
{
	return 1;
}

/* No reaction, no lookup: a callback is posted again rather than looked for. */
const struct report_backend report_api = {
	.name = "api",
	.max = 0,
	.target = api_report_target,
	.body = api_report_body,
	.request = api_report_request,
	.verdict = api_report_verdict,
	.idempotent = api_report_idempotent,
};
