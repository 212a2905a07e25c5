/*
 * console.c: the web console (SPEC section 14) on the engine's loop: the
 * pages' shell, sign-in (a one-time link from `spur console-link`, or
 * GitHub through console-github.c), the sessions they make, and the
 * principal the org API sees for a session's cookie. The pages themselves
 * (console/, compiled in) use the org API and nothing else.
 */
#include "spur.h"
#include "api.h"
#include "conf.h"
#include "console.h"
#include "console-assets.h"
#include "console-github.h"
#include "console-github-app.h"
#include "keys.h"
#include "serve.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONSOLE_OAUTH_COOKIE	"spur_oauth"
#define CONSOLE_APP_COOKIE	"spur_ghapp"	/* the GitHub App manifest flow's state.org */
#define CONSOLE_APP_S		3600		/* GitHub's code is good this long */

int
console_path(const char *path)
{
	return strcmp(path, "/console") == 0 || strncmp(path, "/console/", 9) == 0 ||
	    strncmp(path, "/runs/", 6) == 0;
}

/* The value of a cookie in a Cookie header, copied into out; -1 when absent or too long. */
static int
console_cookie(const char *header, const char *name, char *out, size_t outlen)
{
	const char	*p = header;
	size_t		 n = strlen(name), len;

	while (p != NULL && *p != '\0') {
		while (*p == ' ' || *p == ';')
			p++;
		len = strcspn(p, ";");
		if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
			if (len - n - 1 >= outlen || len - n - 1 == 0)
				return -1;
			memcpy(out, p + n + 1, len - n - 1);
			out[len - n - 1] = '\0';
			return 0;
		}
		p += len;
	}
	return -1;
}

/* The session a request's cookie names, if it is one and has not expired: 0; else 1 (or -1). */
static int
console_session(struct engine *e, const char *cookie_header, struct console_session *cs)
{
	char	 token[128], hash[65];
	int	 rc;

	memset(cs, 0, sizeof *cs);
	if (cookie_header == NULL || console_cookie(cookie_header, CONSOLE_COOKIE, token,
	    sizeof token) != 0)
		return 1;
	key_hash(token, strlen(token), hash);
	explicit_bzero(token, sizeof token);
	if ((rc = store_console_session_get(e->store, hash, cs)) != 0)
		return rc;
	if (cs->expires_at <= now_ms()) {
		store_console_session_end(e->store, hash);
		store_console_session_clear(cs);
		return 1;
	}
	return 0;
}

static int
console_org_in(const char *orgs_json, const char *org)
{
	json_t	*orgs = json_loads(orgs_json, 0, NULL), *o;
	size_t	 i;
	int	 in = 0;

	json_array_foreach(orgs, i, o) {
		if (json_is_string(o) && strcmp(json_string_value(o), org) == 0)
			in = 1;
	}
	json_decref(orgs);
	return in;
}

/* A GitHub user's membership is checked again when this old; a link's never is. */
static int
console_stale(const struct console_session *cs, int64_t now)
{
	return strncmp(cs->user, "link:", 5) != 0 && now - cs->checked_at >= CONSOLE_RECHECK_MS;
}

int
console_principal(struct engine *e, const char *cookie_header, const char *path_org,
    struct api_key *out, char **csrf)
{
	struct console_session	 cs;
	int			 rc;

	memset(out, 0, sizeof *out);
	*csrf = NULL;
	if ((rc = console_session(e, cookie_header, &cs)) != 0)
		return rc;
	if (console_stale(&cs, now_ms())) {
		/* GET /console/api/me checks it again; until then the API says 401. */
		store_console_session_clear(&cs);
		return 1;
	}
	snprintf(out->id, sizeof out->id, "console");
	snprintf(out->name, sizeof out->name, "%s", cs.user);
	if (console_org_in(cs.orgs, path_org))
		snprintf(out->org, sizeof out->org, "%s", path_org);
	out->scopes = SCOPE_SESSIONS_READ | SCOPE_SESSIONS_WRITE | SCOPE_RUNS_READ |
	    SCOPE_RUNS_WRITE | SCOPE_AUTOMATIONS_READ | SCOPE_CONSOLE;
	out->last_used = now_ms();
	*csrf = cs.csrf;
	cs.csrf = NULL;
	store_console_session_clear(&cs);
	return 0;
}

char *
console_link_make(struct store *st, const char *org, int64_t now)
{
	char	*token = key_token(32), hash[65];

	key_hash(token, strlen(token), hash);
	if (store_console_link_add(st, hash, org, now + CONSOLE_LINK_MS) != 0) {
		free(token);
		return NULL;
	}
	return token;
}

/* ----- answers ----- */

static void
console_answer(api_done_cb done, void *arg, int status, const char *ctype, char *body)
{
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = status;
	a.ctype = ctype;
	a.body = body;
	a.console = 1;
	done(&a, arg);
	api_answer_clear(&a);
}

static void
console_json(api_done_cb done, void *arg, int status, json_t *j)
{
	console_answer(done, arg, status, "application/json", json_dumps(j, JSON_COMPACT));
	json_decref(j);
}

static void
console_unauthorized(api_done_cb done, void *arg)
{
	console_answer(done, arg, 401, "application/json", xstrdup("{\"error\":\"unauthorized\"}"));
}

/* A same-origin path to go back to: "/…", never "//host" or a backslash; else /console. */
static const char *
console_next(const char *next)
{
	if (next == NULL || next[0] != '/' || next[1] == '/' || strchr(next, '\\') != NULL ||
	    strlen(next) > 512 || strspn(next, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
	    "TUVWXYZ0123456789/_-.?=&%") != strlen(next))
		return "/console";
	return next;
}

static void
console_redirect(api_done_cb done, void *arg, const char *to, char *cookie, char *cookie2)
{
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = 302;
	a.location = xstrdup(to);
	a.set_cookie[0] = cookie;
	a.set_cookie[1] = cookie2;
	a.console = 1;
	done(&a, arg);
	api_answer_clear(&a);
}

/* Set-Cookie for the session (value NULL: one that removes it). */
static char *
console_set_cookie(struct engine *e, const char *name, const char *value, const char *path,
    long long max_age)
{
	const char	*url = e->conf->public_url;
	int		 secure = url != NULL && strncmp(url, "https://", 8) == 0;

	return xprintf("%s=%s; Path=%s; Max-Age=%lld; HttpOnly; SameSite=Lax%s", name,
	    value != NULL ? value : "", path, value != NULL ? max_age : 0LL,
	    secure ? "; Secure" : "");
}

/* A new session for user with orgs (a JSON array): its cookie, to free. */
static char *
console_session_new(struct engine *e, const char *user, json_t *orgs, char **token_out)
{
	struct console_session	 cs;
	char			*token = key_token(32), hash[65], *orgs_text, *cookie;
	int64_t			 now = now_ms();

	key_hash(token, strlen(token), hash);
	orgs_text = json_dumps(orgs, JSON_COMPACT);
	memset(&cs, 0, sizeof cs);
	cs.hash = hash;
	cs.user = (char *)user;
	cs.orgs = orgs_text;
	cs.csrf = key_token(24);
	cs.created_at = cs.checked_at = now;
	cs.expires_at = now + CONSOLE_SESSION_MS;
	if (store_console_session_add(e->store, &cs) != 0) {
		free(cs.csrf);
		free(orgs_text);
		free(token);
		return NULL;
	}
	log_info("event=console.signed_in user=%s orgs=%s", log_q(user), log_q(orgs_text));
	cookie = console_set_cookie(e, CONSOLE_COOKIE, token, "/", CONSOLE_SESSION_MS / 1000);
	free(cs.csrf);
	free(orgs_text);
	if (token_out != NULL)
		*token_out = token;
	else {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	return cookie;
}

static void
console_shell(api_done_cb done, void *arg)
{
	const struct console_asset *a = console_asset_find("index.html");

	if (a == NULL) {
		console_answer(done, arg, 404, "text/plain", xstrdup("the console is not built in\n"));
		return;
	}
	console_answer(done, arg, 200, "text/html; charset=utf-8", xstrndup((const char *)a->data,
	    a->len));
}

/* GET /console/link/TOKEN: a one-time link becomes a session for its org. */
static void
console_link(struct engine *e, const char *token, const char *query, api_done_cb done,
    void *arg)
{
	char	 hash[65], *org, *next = api_query_value(query, "next"), *cookie;
	json_t	*orgs;

	key_hash(token, strlen(token), hash);
	if ((org = store_console_link_take(e->store, hash, now_ms())) == NULL) {
		log_warn("event=console.link_refused reason=\"unknown, used or expired\"");
		console_answer(done, arg, 404, "text/plain; charset=utf-8", xstrdup("This sign-in "
		    "link is unknown, used or expired: ask for a new one (spur console-link).\n"));
		free(next);
		return;
	}
	orgs = json_pack("[s]", org);
	{
		char *user = xprintf("link:%s", org);

		cookie = console_session_new(e, user, orgs, NULL);
		free(user);
	}
	json_decref(orgs);
	if (cookie == NULL)
		console_answer(done, arg, 503, "text/plain", xstrdup("store unavailable\n"));
	else
		console_redirect(done, arg, console_next(next), cookie, NULL);
	free(org);
	free(next);
}

/* The sign-in of a GitHub user, waiting for GitHub. */
struct console_wait {
	struct engine	*e;
	api_done_cb	 done;
	void		*arg;
	char		*next;
	char		*hash;		/* a re-check: the session's */
	char		*csrf;
	char		*user;
};

static void
console_wait_free(struct console_wait *w)
{
	free(w->next);
	free(w->hash);
	free(w->csrf);
	free(w->user);
	free(w);
}

static void
console_github_done(const char *user, json_t *orgs, const char *error, void *arg)
{
	struct console_wait	*w = arg;
	char			*cookie, *clear;

	clear = console_set_cookie(w->e, CONSOLE_OAUTH_COOKIE, NULL, "/console/auth", 0);
	if (user == NULL || json_array_size(orgs) == 0) {
		log_warn("event=console.github_refused user=%s reason=%s", log_q(user),
		    log_q(error != NULL ? error : "not a member of any org's github_org or teams"));
		if (user == NULL)
			/* The error is meant for the person, and scrubbed (console-github.c). */
			console_answer(w->done, w->arg, 403, "text/plain; charset=utf-8", xprintf(
			    "Sign-in with GitHub failed: %s. Start again from the console.\n",
			    error != NULL ? error : "no answer from GitHub"));
		else
			console_answer(w->done, w->arg, 403, "text/plain; charset=utf-8", xprintf(
			    "Signed in to GitHub as %s, but that account may not see any org here: "
			    "ask for membership of the GitHub organization (and team) the console "
			    "names.\n", user));
		free(clear);
	} else if ((cookie = console_session_new(w->e, user, orgs, NULL)) == NULL) {
		console_answer(w->done, w->arg, 503, "text/plain", xstrdup("store unavailable\n"));
		free(clear);
	} else
		console_redirect(w->done, w->arg, console_next(w->next), cookie, clear);
	console_wait_free(w);
}

static void
console_auth_github(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char	*state, *next = api_query_value(req->query, "next"), *url, *cookie, *redirect;

	if (!console_github_enabled(e->conf)) {
		console_answer(done, arg, 404, "application/json", xstrdup("{\"error\":\"not_found\"}"));
		free(next);
		return;
	}
	state = key_token(24);
	redirect = xprintf("%s/console/auth/github/callback", e->conf->public_url);
	url = console_github_authorize_url(e->conf, state, redirect);
	{
		char *value = xprintf("%s.%s", state, console_next(next));

		cookie = console_set_cookie(e, CONSOLE_OAUTH_COOKIE, value, "/console/auth", 600);
		free(value);
	}
	console_redirect(done, arg, url, cookie, NULL);
	free(url);
	free(redirect);
	free(state);
	free(next);
}

static void
console_auth_callback(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char			 saved[700], *state = api_query_value(req->query, "state");
	char			*code = api_query_value(req->query, "code"), *dot, *redirect;
	struct console_wait	*w;

	if (!console_github_enabled(e->conf) || state == NULL || code == NULL ||
	    req->cookie == NULL || console_cookie(req->cookie, CONSOLE_OAUTH_COOKIE, saved,
	    sizeof saved) != 0 || (dot = strchr(saved, '.')) == NULL ||
	    (size_t)(dot - saved) != strlen(state) || !ct_equal(saved, state, strlen(state))) {
		log_warn("event=console.github_refused reason=\"state missing or not this "
		    "browser's\"");
		console_answer(done, arg, 400, "text/plain; charset=utf-8", xstrdup("This sign-in "
		    "did not start here (its state does not match): start again from the "
		    "console.\n"));
		free(state);
		free(code);
		return;
	}
	w = xcalloc(1, sizeof *w);
	w->e = e;
	w->done = done;
	w->arg = arg;
	w->next = xstrdup(dot + 1);
	redirect = xprintf("%s/console/auth/github/callback", e->conf->public_url);
	console_github_signin(e, code, redirect, console_github_done, w);
	free(redirect);
	free(state);
	free(code);
}

static void
console_me_answer(struct console_wait *w, const char *orgs_text)
{
	json_t	*orgs = json_loads(orgs_text, 0, NULL);

	console_json(w->done, w->arg, 200, json_pack("{s:s,s:o,s:s}", "user", w->user, "orgs",
	    orgs != NULL ? orgs : json_array(), "csrf", w->csrf));
}

static void
console_recheck_done(const char *user, json_t *orgs, const char *error, void *arg)
{
	struct console_wait	*w = arg;
	char			*text;

	if (user == NULL || json_array_size(orgs) == 0) {
		log_warn("event=console.recheck_refused user=%s reason=%s", log_q(w->user),
		    log_q(error != NULL ? error : "no longer a member"));
		store_console_session_end(w->e->store, w->hash);
		console_unauthorized(w->done, w->arg);
	} else {
		text = json_dumps(orgs, JSON_COMPACT);
		store_console_session_checked(w->e->store, w->hash, text, now_ms());
		console_me_answer(w, text);
		free(text);
	}
	console_wait_free(w);
}

/* GET /console/api/me: who is signed in, where, and the CSRF token; a stale check redone. */
static void
console_me(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	struct console_session	 cs;
	struct console_wait	*w;

	if (console_session(e, req->cookie, &cs) != 0) {
		console_unauthorized(done, arg);
		return;
	}
	w = xcalloc(1, sizeof *w);
	w->e = e;
	w->done = done;
	w->arg = arg;
	w->user = xstrdup(cs.user);
	w->csrf = xstrdup(cs.csrf);
	w->hash = xstrdup(cs.hash);
	if (console_stale(&cs, now_ms()))
		console_github_recheck(e, cs.user, console_recheck_done, w);
	else {
		console_me_answer(w, cs.orgs);
		console_wait_free(w);
	}
	store_console_session_clear(&cs);
}

static void
console_logout(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	struct console_session	 cs;
	struct api_answer	 a;

	if (console_session(e, req->cookie, &cs) != 0) {
		console_unauthorized(done, arg);
		return;
	}
	if (req->csrf == NULL || strlen(req->csrf) != strlen(cs.csrf) ||
	    !ct_equal(req->csrf, cs.csrf, strlen(cs.csrf))) {
		store_console_session_clear(&cs);
		console_answer(done, arg, 403, "application/json",
		    xstrdup("{\"error\":\"forbidden\",\"detail\":\"csrf\"}"));
		return;
	}
	store_console_session_end(e->store, cs.hash);
	log_info("event=console.signed_out user=%s", log_q(cs.user));
	store_console_session_clear(&cs);
	memset(&a, 0, sizeof a);
	a.status = 204;
	a.console = 1;
	a.set_cookie[0] = console_set_cookie(e, CONSOLE_COOKIE, NULL, "/", 0);
	done(&a, arg);
	api_answer_clear(&a);
}

/*
 * The person of the request's session when it may see org (a GitHub one
 * checked within the hour): 0 with *user (to free); else the answer is given
 * (to sign-in, coming back to the same address) and -1.
 */
static int
console_person_of(struct engine *e, const struct api_req *req, const char *org, char **user,
    api_done_cb done, void *arg)
{
	struct console_session	 cs;
	struct buf		 to;
	char			*back;
	int			 ok;

	if (console_session(e, req->cookie, &cs) != 0) {
		back = xprintf("%s%s%s", req->path, req->query != NULL ? "?" : "",
		    req->query != NULL ? req->query : "");
		buf_init(&to, 0);
		buf_adds(&to, "/console/login?next=");
		buf_addq(&to, console_next(back));
		console_redirect(done, arg, buf_cstr(&to), NULL, NULL);
		buf_free(&to);
		free(back);
		return -1;
	}
	ok = org != NULL && console_org_in(cs.orgs, org) && !console_stale(&cs, now_ms());
	*user = ok ? xstrdup(cs.user) : NULL;
	store_console_session_clear(&cs);
	if (!ok) {
		console_answer(done, arg, 403, "text/plain; charset=utf-8", xstrdup("This "
		    "console session may not see that org (or its membership is due a check: "
		    "open the console first).\n"));
		return -1;
	}
	return 0;
}

/* GET /console/github/app?org=ORG&owner=LOGIN: the page that posts the App's manifest. */
static void
console_github_app(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char			*org = api_query_value(req->query, "org");
	char			*owner = api_query_value(req->query, "owner"), *user = NULL;
	char			*state, *value, *fa = NULL;
	const struct org	*o = org != NULL ? config_org(e->conf, org) : NULL;
	struct api_answer	 a;

	if (o == NULL || (owner != NULL && *owner != '\0' && !console_github_login_valid(owner))) {
		console_answer(done, arg, 400, "text/plain; charset=utf-8", xstrdup("Name a "
		    "configured org (?org=NAME) and, for an organization's App, its GitHub login "
		    "(&owner=LOGIN).\n"));
	} else if (console_person_of(e, req, org, &user, done, arg) == 0) {
		state = key_token(24);
		memset(&a, 0, sizeof a);
		a.body = console_github_app_form(e, org, owner != NULL ? owner : "", state, &fa);
		a.status = a.body != NULL ? 200 : 400;
		if (a.body == NULL)
			a.body = xstrdup("The org's github.git_url is no origin.\n");
		a.ctype = a.body != NULL && a.status == 200 ? "text/html; charset=utf-8" :
		    "text/plain; charset=utf-8";
		a.form_action = fa;
		value = xprintf("%s.%s", state, org);
		a.set_cookie[0] = console_set_cookie(e, CONSOLE_APP_COOKIE, value,
		    "/console/github/app", CONSOLE_APP_S);
		a.console = 1;
		log_info("event=console.github_app_form org=%s user=%s owner=%s", org, log_q(user),
		    log_q(owner != NULL ? owner : ""));
		done(&a, arg);
		api_answer_clear(&a);
		free(value);
		free(state);
	}
	free(user);
	free(org);
	free(owner);
}

static void
console_github_app_done(int status, char *html, void *arg)
{
	struct console_wait	*w = arg;
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = status;
	a.ctype = "text/html; charset=utf-8";
	a.body = html;
	a.set_cookie[0] = console_set_cookie(w->e, CONSOLE_APP_COOKIE, NULL,
	    "/console/github/app", 0);
	a.console = 1;
	w->done(&a, w->arg);
	api_answer_clear(&a);
	console_wait_free(w);
}

/* GET /console/github/app/created?code=&state=: GitHub made the App; store what it gives. */
static void
console_github_app_back(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char			 saved[300], *state = api_query_value(req->query, "state");
	char			*code = api_query_value(req->query, "code"), *dot, *user = NULL;
	struct console_wait	*w;

	if (state == NULL || code == NULL || req->cookie == NULL ||
	    console_cookie(req->cookie, CONSOLE_APP_COOKIE, saved, sizeof saved) != 0 ||
	    (dot = strchr(saved, '.')) == NULL || (size_t)(dot - saved) != strlen(state) ||
	    !ct_equal(saved, state, strlen(state)) || config_org(e->conf, dot + 1) == NULL) {
		log_warn("event=console.github_app_refused reason=\"state missing or not this "
		    "browser's\"");
		console_answer(done, arg, 400, "text/plain; charset=utf-8", xstrdup("This GitHub "
		    "App was not asked for from this browser (its state does not match): start "
		    "again from /console/github/app.\n"));
	} else if (console_person_of(e, req, dot + 1, &user, done, arg) == 0) {
		w = xcalloc(1, sizeof *w);
		w->e = e;
		w->done = done;
		w->arg = arg;
		console_github_app_created(e, dot + 1, user, code, console_github_app_done, w);
	}
	free(user);
	free(state);
	free(code);
}

void
console_handle(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	const char		*p = req->path;
	struct console_session	 cs;
	int			 get = strcmp(req->method, "GET") == 0;
	char			*to;

	if (strcmp(p, "/console/auth/providers") == 0 && get)
		console_json(done, arg, 200, json_pack("{s:b}", "github",
		    console_github_enabled(e->conf)));
	else if (strcmp(p, "/console/api/me") == 0 && get)
		console_me(e, req, done, arg);
	else if (strcmp(p, "/console/logout") == 0 && strcmp(req->method, "POST") == 0)
		console_logout(e, req, done, arg);
	else if (strncmp(p, "/console/link/", 14) == 0 && get && strchr(p + 14, '/') == NULL &&
	    p[14] != '\0')
		console_link(e, p + 14, req->query, done, arg);
	else if (strcmp(p, "/console/auth/github") == 0 && get)
		console_auth_github(e, req, done, arg);
	else if (strcmp(p, "/console/auth/github/callback") == 0 && get)
		console_auth_callback(e, req, done, arg);
	else if (strcmp(p, "/console/github/app") == 0 && get)
		console_github_app(e, req, done, arg);
	else if (strcmp(p, "/console/github/app/created") == 0 && get)
		console_github_app_back(e, req, done, arg);
	else if (strncmp(p, "/runs/", 6) == 0 && get) {
		/* The report's link: after sign-in it lands here again. */
		if (console_session(e, req->cookie, &cs) != 0) {
			to = xprintf("/console/login?next=%s", p);
			console_redirect(done, arg, to, NULL, NULL);
			free(to);
		} else {
			store_console_session_clear(&cs);
			console_shell(done, arg);
		}
	} else if (get && strncmp(p, "/console/api/", 13) != 0 &&
	    strncmp(p, "/console/auth/", 14) != 0 && strncmp(p, "/console/link/", 14) != 0)
		console_shell(done, arg);
	else
		console_answer(done, arg, get ? 404 : 405, "application/json", xstrdup(get ?
		    "{\"error\":\"not_found\"}" : "{\"error\":\"method_not_allowed\"}"));
}
