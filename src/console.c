/*
 * console.c: the web console (SPEC section 14) on the engine's loop: the
 * pages' shell, sign-in (a one-time link from `spur console-link`, or an
 * outside system's through console-signin.h), the sessions they make, and the
 * principal the org API sees for a session's cookie. The pages themselves
 * (console/, compiled in) use the org API and nothing else.
 */
#include "spur.h"
#include "api.h"
#include "conf.h"
#include "console.h"
#include "console-assets.h"
#include "console-page.h"
#include "console-signin.h"
#include "keys.h"
#include "serve.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONSOLE_OAUTH_COOKIE	"spur_oauth"

int
console_path(const char *path)
{
	return strcmp(path, "/console") == 0 || strncmp(path, "/console/", 9) == 0 ||
	    strncmp(path, "/runs/", 6) == 0;
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
console_unauthorized(api_done_cb done, void *arg)
{
	console_answer(done, arg, 401, "application/json", xstrdup("{\"error\":\"unauthorized\"}"));
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

/* A sign-in through the outside system, waiting for it. */
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
console_signin_done(const char *user, json_t *orgs, const char *error, void *arg)
{
	const struct console_signin *si = &console_signin;
	struct console_wait	*w = arg;
	char			*cookie, *clear, *why;

	clear = console_set_cookie(w->e, CONSOLE_OAUTH_COOKIE, NULL, "/console/auth", 0);
	if (user == NULL || json_array_size(orgs) == 0) {
		why = xprintf("not a member of any org's %s", si->member_of);
		log_warn("event=console.%s_refused user=%s reason=%s", si->name, log_q(user),
		    log_q(error != NULL ? error : why));
		free(why);
		if (user == NULL && error != NULL)
			/* The error is meant for the person, and scrubbed (console-signin.h). */
			console_answer(w->done, w->arg, 403, "text/plain; charset=utf-8", xprintf(
			    "Sign-in with %s failed: %s. Start again from the console.\n",
			    si->title, error));
		else if (user == NULL)
			console_answer(w->done, w->arg, 403, "text/plain; charset=utf-8", xprintf(
			    "Sign-in with %s failed: no answer from %s. Start again from the "
			    "console.\n", si->title, si->title));
		else
			console_answer(w->done, w->arg, 403, "text/plain; charset=utf-8", xprintf(
			    "Signed in to %s as %s, but that account may not see any org here: "
			    "ask for membership of the %s organization (and team) the console "
			    "names.\n", si->title, user, si->title));
		free(clear);
	} else if ((cookie = console_session_new(w->e, user, orgs, NULL)) == NULL) {
		console_answer(w->done, w->arg, 503, "text/plain", xstrdup("store unavailable\n"));
		free(clear);
	} else
		console_redirect(w->done, w->arg, console_next(w->next), cookie, clear);
	console_wait_free(w);
}

/* Whether p is /console/auth/<the sign-in's name> and then tail. */
static int
console_signin_route(const char *p, const char *tail)
{
	size_t	n = strlen(console_signin.name);

	return strncmp(p, "/console/auth/", 14) == 0 &&
	    strncmp(p + 14, console_signin.name, n) == 0 && strcmp(p + 14 + n, tail) == 0;
}

static void
console_auth_start(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char	*state, *next = api_query_value(req->query, "next"), *url, *cookie, *redirect;

	if (!console_signin.enabled(e->conf)) {
		console_answer(done, arg, 404, "application/json", xstrdup("{\"error\":\"not_found\"}"));
		free(next);
		return;
	}
	state = key_token(24);
	redirect = xprintf("%s/console/auth/%s/callback", e->conf->public_url,
	    console_signin.name);
	url = console_signin.authorize_url(e->conf, state, redirect);
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

	if (!console_signin.enabled(e->conf) || state == NULL || code == NULL ||
	    req->cookie == NULL || console_cookie(req->cookie, CONSOLE_OAUTH_COOKIE, saved,
	    sizeof saved) != 0 || (dot = strchr(saved, '.')) == NULL ||
	    (size_t)(dot - saved) != strlen(state) || !ct_equal(saved, state, strlen(state))) {
		log_warn("event=console.%s_refused reason=\"state missing or not this "
		    "browser's\"", console_signin.name);
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
	redirect = xprintf("%s/console/auth/%s/callback", e->conf->public_url,
	    console_signin.name);
	console_signin.signin(e, code, redirect, console_signin_done, w);
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
		console_signin.recheck(e, cs.user, console_recheck_done, w);
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

void
console_handle(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	const char		*p = req->path;
	struct console_session	 cs;
	int			 get = strcmp(req->method, "GET") == 0;
	char			*to;

	if (strcmp(p, "/console/auth/providers") == 0 && get)
		console_json(done, arg, 200, json_pack("{s:b}", console_signin.name,
		    console_signin.enabled(e->conf)));
	else if (strcmp(p, "/console/api/me") == 0 && get)
		console_me(e, req, done, arg);
	else if (strcmp(p, "/console/logout") == 0 && strcmp(req->method, "POST") == 0)
		console_logout(e, req, done, arg);
	else if (strncmp(p, "/console/link/", 14) == 0 && get && strchr(p + 14, '/') == NULL &&
	    p[14] != '\0')
		console_link(e, p + 14, req->query, done, arg);
	else if (console_signin_route(p, "") && get)
		console_auth_start(e, req, done, arg);
	else if (console_signin_route(p, "/callback") && get)
		console_auth_callback(e, req, done, arg);
	else if (get && strncmp(p, console_pages.prefix, strlen(console_pages.prefix)) == 0 &&
	    (p[strlen(console_pages.prefix)] == '\0' || p[strlen(console_pages.prefix)] == '/'))
		console_pages.handle(e, req, p + strlen(console_pages.prefix), done, arg);
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
