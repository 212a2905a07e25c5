/*
 * fuzz-source.c: the webhook sources (source-*.c) on hostile requests. Built
 * twice: fuzz-source (normalize only, as `spur fire` does, so the payload
 * parsers are reached) and fuzz-source-verify (FUZZ_VERIFY: signatures,
 * timestamps and replay windows with fixed secrets, at a fixed now).
 * Input: the hook on the first line (github, slack, linear, gitlab, gitea, or a generic hook
 * below), "Name: value" headers, an empty line, the body.
 */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "source.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_VERIFY
#define FUZZ_VERIFY 0
#endif

/* The now of every request: 2023-11-14T22:13:20Z; seeds are signed for it. */
#define FUZZ_NOW_MS	1700000000000LL

#define GH_SECRET	"fuzz-github-secret"
#define SLACK_SECRET	"fuzz-slack-secret"
#define LINEAR_SECRET	"fuzz-linear-secret"
#define GITEA_SECRET	"fuzz-gitea-secret"
#define GITLAB_SECRET	"fuzz-gitlab-secret"
#define HOOK_SECRET	"fuzz-hook-secret"
#define STD_SECRET	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define BEARER_SECRET	"fuzz-bearer-token"

static struct secret gh_secret = { "env:GH", GH_SECRET, sizeof GH_SECRET - 1 };
static struct secret hook_secret = { "env:HK", HOOK_SECRET, sizeof HOOK_SECRET - 1 };
static struct secret std_secret = { "env:STD", STD_SECRET, sizeof STD_SECRET - 1 };
static struct secret bearer_secret = { "env:BR", BEARER_SECRET, sizeof BEARER_SECRET - 1 };
static struct secret bad_std_secret = { "env:BAD", "whsec_***", 9 };

static struct named_secret named[] = {
	{ "HOOK", &hook_secret }, { "STD", &std_secret }, { "TOKEN", &bearer_secret },
	{ "BADSTD", &bad_std_secret },
};
static struct org acme = {
	.name = "acme",
	.secrets = named, .nsecrets = SPUR_ARRLEN(named),
};
static struct config conf = { .orgs = &acme, .norgs = 1 };

/* The generic hooks; an unknown hook name gets none, as the listener does. */
static struct webhook_def hooks[] = {
	{ .org = "acme", .name = "hmac", .auth = WH_AUTH_HMAC, .secret = "HOOK",
	  .header = "X-Signature", .prefix = "sha256=", .id_header = "X-Delivery",
	  .text_path = "text", .thread_path = "thread.id" },
	{ .org = "acme", .name = "hmac64", .auth = WH_AUTH_HMAC, .secret = "HOOK",
	  .header = "X-Signature", .base64 = 1, .text_path = "message.0.body" },
	{ .org = "acme", .name = "standard", .auth = WH_AUTH_STANDARD, .secret = "STD",
	  .text_path = "data.text", .thread_path = "data.id" },
	{ .org = "acme", .name = "badstd", .auth = WH_AUTH_STANDARD, .secret = "BADSTD" },
	{ .org = "acme", .name = "bearer", .auth = WH_AUTH_BEARER, .secret = "TOKEN" },
	{ .org = "acme", .name = "none", .auth = WH_AUTH_NONE, .text_path = "text" },
	{ .org = "acme", .name = "nosecret", .auth = WH_AUTH_HMAC, .secret = "MISSING",
	  .header = "X-Signature" },
};

/* A secret in a cause would be logged, unless the request itself carried it. */
static void
fuzz_secret(const char *cause, const uint8_t *data, size_t size, const char *secret)
{
	if (strstr(cause, secret) != NULL &&
	    memmem(data, size, secret, strlen(secret)) == NULL)
		abort();
}

/* What every verdict must hold, whatever the input: a broken one is a finding. */
static void
fuzz_check(const struct source_result *res, const uint8_t *data, size_t size)
{
	json_t	*j;
	char	*s;
	size_t	 i;

	switch (res->verdict) {
	case SOURCE_EVENT:
		if (res->event == NULL || res->event->org == NULL ||
		    res->event->source == NULL || res->event->meta == NULL)
			abort();
		/* The event must survive the round trip the store makes. */
		j = spur_event_to_json(res->event);
		if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL)
			abort();
		free(s);
		json_decref(j);
		break;
	case SOURCE_REPLY:
		if (res->reply == NULL || res->event != NULL)
			abort();
		break;
	case SOURCE_UNAUTHORIZED:
	case SOURCE_BAD:
		if (res->cause == NULL || res->event != NULL)
			abort();
		for (i = 0; i < SPUR_ARRLEN(named); i++)
			fuzz_secret(res->cause, data, size, named[i].secret->value);
		fuzz_secret(res->cause, data, size, GH_SECRET);
		fuzz_secret(res->cause, data, size, SLACK_SECRET);
		fuzz_secret(res->cause, data, size, LINEAR_SECRET);
		fuzz_secret(res->cause, data, size, GITEA_SECRET);
		fuzz_secret(res->cause, data, size, GITLAB_SECRET);
		break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_req		 fr;
	struct source_req	 req;
	struct source_result	 res;
	size_t			 i;
	static int		 ready;
	char			*cause;

	if (!ready) {
		/* The systems' sections are their files' own: made as the config makes them. */
		setenv("SPUR_FUZZ_SLACK", SLACK_SECRET, 1);
		setenv("SPUR_FUZZ_LINEAR", LINEAR_SECRET, 1);
		setenv("SPUR_FUZZ_GITEA", GITEA_SECRET, 1);
		setenv("SPUR_FUZZ_GITHUB", gh_secret.value, 1);
		setenv("SPUR_FUZZ_GITLAB", GITLAB_SECRET, 1);
		if (config_org_section(&acme, "github", "webhook_secret: env:SPUR_FUZZ_GITHUB",
		    &cause) != 0 || config_org_section(&acme, "slack", "signing_secret: env:SPUR_FUZZ_SLACK",
		    &cause) != 0 || config_org_section(&acme, "linear",
		    "webhook_secret: env:SPUR_FUZZ_LINEAR", &cause) != 0 ||
		    config_org_section(&acme, "gitea", "url: https://git.example.com\n"
		    "webhook_secret: env:SPUR_FUZZ_GITEA", &cause) != 0 ||
		    config_org_section(&acme, "gitlab", "webhook_secret: env:SPUR_FUZZ_GITLAB",
		    &cause) != 0)
			fatal("section: %s", cause);
		ready = 1;
	}
	fuzz_req_parse(&fr, data, size);
	memset(&req, 0, sizeof req);
	memset(&res, 0, sizeof res);
	req.conf = &conf;
	req.org = &acme;
	req.org_name = acme.name;
	req.hook = fr.hook;
	req.headers = fr.headers;
	req.nheaders = fr.nheaders;
	req.body = fr.body;
	req.len = fr.len;
	req.now_ms = FUZZ_NOW_MS;
	req.no_verify = !FUZZ_VERIFY;
	for (i = 0; i < SPUR_ARRLEN(hooks); i++) {
		if (strcmp(fr.hook, hooks[i].name) == 0)
			req.webhook = &hooks[i];
	}
	source_find(req.hook)->handle(&req, &res);
	fuzz_check(&res, data, size);
	/* For whoever curates the corpus: does a seed get past verification? */
	if (getenv("SPUR_FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "verdict %d status %d cause %s\n", (int)res.verdict,
		    res.status, res.cause != NULL ? res.cause : "-");
	source_result_free(&res);
	fuzz_req_free(&fr);
	return 0;
}
