/* console-github.c: sign-in to the web console with GitHub (OAuth web flow), and which orgs a person may see. */
#include "spur.h"
#include "conf.h"
#include "console-github.h"
#include "github-app.h"
#include "httpc.h"
#include "scrub.h"
#include "serve.h"

#include <ctype.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define CGH_TIMEOUT_MS	10000		/* a person waits at the other end */
#define CGH_SCOPE	"read:org"	/* private org and team memberships */

/*
 * One sign-in or re-check: a chain of requests, one at a time (orgs are few),
 * in the order spur.yaml lists the orgs.
 */
struct cgh {
	struct engine		*e;
	struct config		*conf;		/* the config it started with */
	int			 recheck;	/* with each org's credential, not the person's */
	char			*token;		/* the person's, or the org being checked's */
	char			*login;
	json_t			*orgs;		/* spur org names it may see, so far */
	size_t			 org;		/* conf->orgs index being checked */
	size_t			 team;		/* its console->teams index being checked */
	struct http_call	*call;
	struct source_cred	*gh;
	char			*error;
	console_signin_cb	 cb;
	void			*arg;
};

static void	cgh_next_org(struct cgh *);

/* The org's console section (source-github.c parses it). */
static const struct org_console *
cgh_cs(const struct org *o)
{
	return o->console;
}

/* The OAuth app: every org with console names the same one (source-github.c). */
static const struct org_console *
cgh_app(const struct config *cf)
{
	size_t	 i;

	for (i = 0; cf != NULL && i < cf->norgs; i++) {
		if (cf->orgs[i].console != NULL && cgh_cs(&cf->orgs[i])->github_client_id != NULL &&
		    cgh_cs(&cf->orgs[i])->github_client_secret != NULL)
			return cf->orgs[i].console;
	}
	return NULL;
}

int
console_github_enabled(const struct config *cf)
{
	return cgh_app(cf) != NULL;
}

char *
console_github_authorize_url(const struct config *cf, const char *state,
    const char *redirect_uri)
{
	const struct org_console	*app = cgh_app(cf);
	struct buf			 b;

	if (app == NULL)
		return NULL;
	buf_init(&b, 0);
	buf_addf(&b, "%s/login/oauth/authorize?client_id=", app->github_url);
	buf_addq(&b, app->github_client_id);
	buf_adds(&b, "&redirect_uri=");
	buf_addq(&b, redirect_uri);
	buf_adds(&b, "&scope=");
	buf_addq(&b, CGH_SCOPE);
	buf_adds(&b, "&state=");
	buf_addq(&b, state);
	/* Only people already in a GitHub org may see anything: no sign-up offered. */
	buf_adds(&b, "&allow_signup=false");
	return buf_take(&b);
}

char *
console_github_parse_token(int status, const char *body, size_t len, char **cause)
{
	json_t		*j = json_loadb(body, len, 0, NULL);
	const char	*tok = json_string_value(json_object_get(j, "access_token"));
	const char	*err = json_string_value(json_object_get(j, "error"));
	const char	*p;
	char		*out = NULL;

	if (status == 200 && tok != NULL && *tok != '\0') {
		out = xstrdup(tok);
		goto out;
	}
	/* GitHub's error codes are lowercase words (bad_verification_code): only those are repeated. */
	for (p = err; p != NULL && *p != '\0'; p++) {
		if (!islower((unsigned char)*p) && *p != '_')
			break;
	}
	if (err != NULL && *err != '\0' && *p == '\0' && strlen(err) <= 64)
		xasprintf(cause, "GitHub refused the sign-in (%s)%s", err,
		    strcmp(err, "bad_verification_code") == 0 ?
		    ": the code was used already or is older than 10 minutes, sign in again" :
		    strcmp(err, "incorrect_client_credentials") == 0 ||
		    strcmp(err, "redirect_uri_mismatch") == 0 ?
		    ": the console's OAuth app is misconfigured, tell the operator" : "");
	else if (status == 0)
		xasprintf(cause, "GitHub did not answer the sign-in");
	else
		xasprintf(cause, "GitHub answered the sign-in with HTTP %d", status);
out:
	json_decref(j);
	return out;
}

int
console_github_active(int status, const char *body, size_t len)
{
	json_t		*j;
	const char	*state;
	int		 active;

	if (status != 200)
		return 0;
	j = json_loadb(body, len, 0, NULL);
	state = json_string_value(json_object_get(j, "state"));
	active = state != NULL && strcmp(state, "active") == 0;
	json_decref(j);
	return active;
}

int
console_github_login_valid(const char *s)
{
	size_t	 n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > 39 || s[0] == '-')
		return 0;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && *s != '-')
			return 0;
	}
	return 1;
}

static void
cgh_free(struct cgh *c)
{
	if (c->call != NULL)
		httpc_cancel(c->call);
	github_req_cancel(c->gh);
	freezero_str(c->token);
	free(c->login);
	json_decref(c->orgs);
	free(c->error);
	config_free(c->conf);
	free(c);
}

static void
cgh_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cgh	*c = arg;

	if (c->error != NULL)
		c->cb(NULL, NULL, c->error, c->arg);
	else
		c->cb(c->login, c->orgs, NULL, c->arg);
	cgh_free(c);
}

/* Ends it on the loop's next turn: with error (a sentence, scrubbed here), or the orgs. */
static void
cgh_finish(struct cgh *c, const char *error)
{
	struct timeval	 tv = { 0, 0 };

	if (error != NULL) {
		c->error = scrub_for_engine(c->e, error);
		log_warn("event=console.github_%s user=%s error=%s",
		    c->recheck ? "recheck_failed" : "signin_failed", log_q(c->login),
		    log_q(c->error));
	} else
		log_info("event=console.github_%s user=%s orgs=%zu",
		    c->recheck ? "recheck" : "signin", log_q(c->login), json_array_size(c->orgs));
	if (event_base_once(c->e->base, -1, EV_TIMEOUT, cgh_done_cb, c, &tv) != 0)
		fatal("event_base_once");
}

static const struct org *
cgh_org(struct cgh *c)
{
	return &c->conf->orgs[c->org];
}

/* A GET on the org's GitHub API (orgs.NAME.github.api_url) with the token held. */
static void
cgh_get(struct cgh *c, const struct org *o, const char *path, http_done_cb done)
{
	struct http_request	 req;
	char			*base = github_api_base(o), *url, *auth;
	const char		*h[4];

	url = xprintf("%s%s", base, path);
	auth = xprintf("Authorization: Bearer %s", c->token);
	h[0] = auth;
	h[1] = "Accept: application/vnd.github+json";
	h[2] = "X-GitHub-Api-Version: 2022-11-28";
	h[3] = NULL;
	memset(&req, 0, sizeof req);
	req.method = "GET";
	req.url = url;
	req.headers = h;
	req.timeout_ms = CGH_TIMEOUT_MS;
	c->call = httpc_request(c->e->http, &req, done, c);
	freezero_str(auth);
	free(base);
	free(url);
}

/*
 * An answer that says nothing about membership (GitHub down, rate limited, no
 * answer) ends it with the error: 1, and the caller returns.
 */
static int
cgh_unanswered(struct cgh *c, const struct http_response *res, const char *what)
{
	char	*why;

	c->call = NULL;
	if (res->status != 0 && res->status != 429 && res->status < 500)
		return 0;
	why = res->status == 0 ? xprintf("GitHub did not answer (%s) while checking %s",
	    res->error != NULL ? res->error : "no answer", what) :
	    xprintf("GitHub answered HTTP %d while checking %s", res->status, what);
	cgh_finish(c, why);
	free(why);
	return 1;
}

/*
 * The org cannot be told for a reason of configuration (a credential that
 * may not see members, a token without read:org): left out, and said so.
 */
static void
cgh_skip_org(struct cgh *c, const char *why, int status)
{
	const struct org	*o = cgh_org(c);

	log_warn("event=console.github_org_unchecked org=%s github_org=%s user=%s status=%d "
	    "why=%s", o->name, log_q(cgh_cs(o)->github_org), log_q(c->login), status,
	    log_q(why));
	c->org++;
	cgh_next_org(c);
}

static void
cgh_member(struct cgh *c)
{
	const struct org	*o = cgh_org(c);

	json_array_append_new(c->orgs, json_string(o->name));
	c->org++;
	cgh_next_org(c);
}

static void
cgh_not_member(struct cgh *c, const char *what)
{
	const struct org	*o = cgh_org(c);

	log_info("event=console.github_not_member org=%s github_org=%s user=%s not=%s", o->name,
	    log_q(cgh_cs(o)->github_org), log_q(c->login), what);
	c->org++;
	cgh_next_org(c);
}

static void	cgh_team(struct cgh *);

static void
cgh_team_cb(const struct http_response *res, void *arg)
{
	struct cgh	*c = arg;

	if (cgh_unanswered(c, res, "a team membership"))
		return;
	if (console_github_active(res->status, res->body, res->len)) {
		cgh_member(c);
		return;
	}
	if (res->status == 401 || res->status == 403) {
		cgh_skip_org(c, c->recheck ? "the org's GitHub credential may not read team "
		    "memberships (Members: read)" : "the sign-in token may not read team "
		    "memberships (read:org; an org restricting OAuth apps must approve the app)",
		    res->status);
		return;
	}
	/* 404, or a pending invitation: not in this team; the next may do. */
	c->team++;
	cgh_team(c);
}

static void
cgh_team(struct cgh *c)
{
	const struct org_console	*cs = cgh_cs(cgh_org(c));
	struct buf			 b;

	if (cs->teams == NULL || cs->teams[c->team] == NULL) {
		cgh_not_member(c, "team");
		return;
	}
	buf_init(&b, 0);
	buf_adds(&b, "/orgs/");
	buf_addq(&b, cs->github_org);
	buf_adds(&b, "/teams/");
	buf_addq(&b, cs->teams[c->team]);
	buf_adds(&b, "/memberships/");
	buf_addq(&b, c->login);
	cgh_get(c, cgh_org(c), buf_cstr(&b), cgh_team_cb);
	buf_free(&b);
}

/* The org's membership is settled: with teams, one of them must say so too. */
static void
cgh_org_member(struct cgh *c)
{
	if (cgh_cs(cgh_org(c))->teams == NULL) {
		cgh_member(c);
		return;
	}
	c->team = 0;
	cgh_team(c);
}

/* Sign-in: GET /user/memberships/orgs/{org} with the person's token. */
static void
cgh_membership_cb(const struct http_response *res, void *arg)
{
	struct cgh	*c = arg;

	if (cgh_unanswered(c, res, "an org membership"))
		return;
	if (console_github_active(res->status, res->body, res->len)) {
		cgh_org_member(c);
		return;
	}
	/*
	 * 404: not a member; 403: an org restricting OAuth apps that has not
	 * approved this one, which GitHub answers as if the person were not in it.
	 */
	if (res->status == 403)
		log_warn("event=console.github_org_refused org=%s github_org=%s user=%s status=403 "
		    "why=%s", cgh_org(c)->name, log_q(cgh_cs(cgh_org(c))->github_org),
		    log_q(c->login), log_q("GitHub refused the membership check: approve the "
		    "console's OAuth app in the organization's third-party access settings"));
	cgh_not_member(c, "org");
}

/* Re-check: GET /orgs/{org}/members/{user} with the org's credential: 204 or 404. */
static void
cgh_members_cb(const struct http_response *res, void *arg)
{
	struct cgh	*c = arg;

	if (cgh_unanswered(c, res, "an org membership"))
		return;
	if (res->status == 204)
		cgh_org_member(c);
	else if (res->status == 404)
		cgh_not_member(c, "org");
	else
		/* 302: the credential is not the org's own, and sees public members only. */
		cgh_skip_org(c, "the org's GitHub credential may not read the GitHub org's "
		    "members (a token of a member with read:org, or an App with Members: read)",
		    res->status);
}

static void
cgh_org_token_cb(const char *token, const char *cause, int permanent, void *arg)
{
	struct cgh	*c = arg;
	struct buf	 b;
	char		*why;

	c->gh = NULL;
	if (token == NULL) {
		if (permanent || (cause != NULL && strstr(cause, "not installed") != NULL)) {
			cgh_skip_org(c, cause != NULL ? cause : "no GitHub credential", 0);
			return;
		}
		why = xprintf("the GitHub credential of org %s: %s", cgh_org(c)->name,
		    cause != NULL ? cause : "none");
		cgh_finish(c, why);
		free(why);
		return;
	}
	freezero_str(c->token);
	c->token = xstrdup(token);
	buf_init(&b, 0);
	buf_adds(&b, "/orgs/");
	buf_addq(&b, cgh_cs(cgh_org(c))->github_org);
	buf_adds(&b, "/members/");
	buf_addq(&b, c->login);
	cgh_get(c, cgh_org(c), buf_cstr(&b), cgh_members_cb);
	buf_free(&b);
}

/* The next org with console, or the end. */
static void
cgh_next_org(struct cgh *c)
{
	const struct org	*o;
	struct buf		 b;

	while (c->org < c->conf->norgs && c->conf->orgs[c->org].console == NULL)
		c->org++;
	if (c->org == c->conf->norgs) {
		cgh_finish(c, NULL);
		return;
	}
	o = cgh_org(c);
	if (c->recheck) {
		c->gh = github_token(c->e, o->name, cgh_cs(o)->github_org, 0, cgh_org_token_cb, c);
		return;
	}
	buf_init(&b, 0);
	buf_adds(&b, "/user/memberships/orgs/");
	buf_addq(&b, cgh_cs(o)->github_org);
	cgh_get(c, o, buf_cstr(&b), cgh_membership_cb);
	buf_free(&b);
}

static struct cgh *
cgh_create(struct engine *e, int recheck, console_signin_cb cb, void *arg)
{
	struct cgh	*c = xcalloc(1, sizeof *c);

	c->e = e;
	c->conf = config_ref(e->conf);
	c->recheck = recheck;
	c->orgs = json_array();
	c->cb = cb;
	c->arg = arg;
	return c;
}

static void
cgh_user_cb(const struct http_response *res, void *arg)
{
	struct cgh	*c = arg;
	json_t		*j;
	const char	*login;
	char		*why;

	if (cgh_unanswered(c, res, "who signed in"))
		return;
	if (res->status != 200) {
		why = xprintf("GitHub answered HTTP %d when asked who signed in", res->status);
		cgh_finish(c, why);
		free(why);
		return;
	}
	j = json_loadb(res->body, res->len, 0, NULL);
	login = json_string_value(json_object_get(j, "login"));
	if (!console_github_login_valid(login)) {
		json_decref(j);
		cgh_finish(c, "GitHub's answer about who signed in has no valid login");
		return;
	}
	c->login = xstrdup(login);
	json_decref(j);
	c->org = 0;
	cgh_next_org(c);
}

static void
cgh_exchange_cb(const struct http_response *res, void *arg)
{
	struct cgh	*c = arg;
	char		*cause = NULL;
	const struct org *o;
	size_t		 i;

	c->call = NULL;
	if ((c->token = console_github_parse_token(res->status, res->body, res->len,
	    &cause)) == NULL) {
		cgh_finish(c, cause);
		free(cause);
		return;
	}
	/* Who the person is: the API of the first org with console (one GitHub for all). */
	for (i = 0, o = NULL; i < c->conf->norgs && o == NULL; i++) {
		if (c->conf->orgs[i].console != NULL)
			o = &c->conf->orgs[i];
	}
	cgh_get(c, o, "/user", cgh_user_cb);
}

void
console_github_signin(struct engine *e, const char *code, const char *redirect_uri,
    console_signin_cb cb, void *arg)
{
	struct cgh			*c = cgh_create(e, 0, cb, arg);
	const struct org_console	*app = cgh_app(c->conf);
	struct http_request		 req;
	struct buf			 b;
	char				*url;
	const char			*h[] = { "Accept: application/json",
	    "Content-Type: application/x-www-form-urlencoded", NULL };

	if (app == NULL) {
		cgh_finish(c, "sign-in with GitHub is not configured");
		return;
	}
	if (code == NULL || *code == '\0' || strlen(code) > 256) {
		cgh_finish(c, "GitHub sent back no sign-in code");
		return;
	}
	buf_init(&b, 0);
	buf_adds(&b, "client_id=");
	buf_addq(&b, app->github_client_id);
	buf_adds(&b, "&client_secret=");
	buf_addq(&b, app->github_client_secret->value);
	buf_adds(&b, "&code=");
	buf_addq(&b, code);
	buf_adds(&b, "&redirect_uri=");
	buf_addq(&b, redirect_uri);
	url = xprintf("%s/login/oauth/access_token", app->github_url);
	memset(&req, 0, sizeof req);
	req.method = "POST";
	req.url = url;
	req.headers = h;
	req.body = b.data;
	req.body_len = b.len;
	req.timeout_ms = CGH_TIMEOUT_MS;
	c->call = httpc_request(e->http, &req, cgh_exchange_cb, c);
	/* The body holds the client secret. */
	if (b.data != NULL)
		explicit_bzero(b.data, b.len);
	buf_free(&b);
	free(url);
}

void
console_github_recheck(struct engine *e, const char *user, console_signin_cb cb, void *arg)
{
	struct cgh	*c = cgh_create(e, 1, cb, arg);

	if (!console_github_login_valid(user)) {
		cgh_finish(c, "not a GitHub login");
		return;
	}
	c->login = xstrdup(user);
	c->org = 0;
	cgh_next_org(c);
}

const struct console_signin console_signin = {
	.name = "github",
	.title = "GitHub",
	.member_of = "github_org or teams",
	.enabled = console_github_enabled,
	.authorize_url = console_github_authorize_url,
	.signin = console_github_signin,
	.recheck = console_github_recheck,
};
