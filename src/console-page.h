/*
 * console-page.h: what the console's pages answer with (status and body, a
 * redirect, cookies) and who is signed in, for console.c and for the pages an
 * outside system adds to the console (struct console_pages, its console-*.c).
 */
#ifndef SPUR_CONSOLE_PAGE_H
#define SPUR_CONSOLE_PAGE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "api.h"

struct engine;
struct console_session;

/* The value of a cookie in a Cookie header, copied into out; -1 when absent or too long. */
int		 console_cookie(const char *header, const char *name, char *out, size_t outlen);
/* The session a request's cookie names, if it is one and has not expired: 0; else 1 (or -1). */
int		 console_session(struct engine *, const char *cookie_header,
		     struct console_session *);
/* Whether org is in a session's orgs (a JSON array). */
int		 console_org_in(const char *orgs_json, const char *org);
/* A signed-in person's membership is checked again when this old; a link's never is. */
int		 console_stale(const struct console_session *, int64_t now);
/*
 * The person of the request's session when it may see org: 0 with *user (to
 * free); else the answer is given (to sign-in, coming back to the same
 * address, or 403) and -1.
 */
int		 console_person_of(struct engine *, const struct api_req *, const char *org,
		     char **user, api_done_cb, void *);

/* Answers with a console page's headers; body is taken. */
void		 console_answer(api_done_cb, void *, int status, const char *ctype, char *body);
void		 console_json(api_done_cb, void *, int status, json_t *);
void		 console_redirect(api_done_cb, void *, const char *to, char *cookie,
		     char *cookie2);
/* A same-origin path to go back to: "/…", never "//host" or a backslash; else /console. */
const char	*console_next(const char *next);
/* Set-Cookie for name (value NULL: one that removes it), to free. */
char		*console_set_cookie(struct engine *, const char *name, const char *value,
		     const char *path, long long max_age);

/*
 * Pages an outside system adds to the console (a setup flow: an App made
 * from a manifest), under prefix; console.c routes a GET of prefix, or of a path
 * below it, to handle with the rest of the path ("" or "/...").
 */
struct console_pages {
	const char	*prefix;
	void		 (*handle)(struct engine *, const struct api_req *, const char *rest,
			    api_done_cb, void *);
};

extern const struct console_pages console_pages;

#endif
