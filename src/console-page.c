/* console-page.c: what the console's pages answer with, and who is signed in (console-page.h). */
#include "spur.h"
#include "api.h"
#include "conf.h"
#include "console.h"
#include "console-page.h"
#include "keys.h"
#include "serve.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of a cookie in a Cookie header, copied into out; -1 when absent or too long. */
int
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
int
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

int
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

/* A signed-in person's membership is checked again when this old; a link's never is. */
int
console_stale(const struct console_session *cs, int64_t now)
{
	return strncmp(cs->user, "link:", 5) != 0 && now - cs->checked_at >= CONSOLE_RECHECK_MS;
}

void
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

void
console_json(api_done_cb done, void *arg, int status, json_t *j)
{
	console_answer(done, arg, status, "application/json", json_dumps(j, JSON_COMPACT));
	json_decref(j);
}

/* A same-origin path to go back to: "/…", never "//host" or a backslash; else /console. */
const char *
console_next(const char *next)
{
	if (next == NULL || next[0] != '/' || next[1] == '/' || strchr(next, '\\') != NULL ||
	    strlen(next) > 512 || strspn(next, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
	    "TUVWXYZ0123456789/_-.?=&%") != strlen(next))
		return "/console";
	return next;
}

void
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
char *
console_set_cookie(struct engine *e, const char *name, const char *value, const char *path,
    long long max_age)
{
	const char	*url = e->conf->public_url;
	int		 secure = url != NULL && strncmp(url, "https://", 8) == 0;

	return xprintf("%s=%s; Path=%s; Max-Age=%lld; HttpOnly; SameSite=Lax%s", name,
	    value != NULL ? value : "", path, value != NULL ? max_age : 0LL,
	    secure ? "; Secure" : "");
}

/*
 * The person of the request's session when it may see org (one signed in
 * through an outside system, checked again within the hour): 0 with *user (to
 * free); else the answer is given (to sign-in, coming back to the same
 * address) and -1.
 */
int
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
