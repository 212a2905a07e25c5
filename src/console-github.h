/* console-github.h: sign-in to the web console with GitHub, and which orgs a person may see. */
#ifndef SPUR_CONSOLE_GITHUB_H
#define SPUR_CONSOLE_GITHUB_H

#include <stddef.h>
#include <jansson.h>

#include "console-signin.h"

struct config;
struct engine;
struct secret;

/*
 * orgs.NAME.console (source-github.c parses it): who may see the org in the
 * web console when signed in with GitHub. Every org that has it names the
 * same OAuth app (client id, secret, github_url): one per installation.
 */
struct org_console {
	char		*github_client_id;
	struct secret	*github_client_secret;
	char		*github_org;		/* members of this GitHub org... */
	char		**teams;		/* ...and of one of these team slugs; NULL: any member */
	char		*github_url;		/* the OAuth host, no trailing slash */
};

/* 1 when some org has console.github_client_id (sign-in with GitHub offered). */
int	 console_github_enabled(const struct config *);
/*
 * The GitHub authorize URL (client_id, redirect_uri, state, scope "read:org"),
 * every value percent-encoded; NULL: not enabled. Caller frees.
 */
char	*console_github_authorize_url(const struct config *, const char *state,
	     const char *redirect_uri);

/*
 * Loop, async: code -> the person's token (POST {github_url}/login/oauth/
 * access_token) -> login (GET {api}/user) -> for each org with console, its
 * membership (GET {api}/user/memberships/orgs/{github_org}, state active) and,
 * with teams, one of them (GET {api}/orgs/{github_org}/teams/{slug}/
 * memberships/{login}, state active). The token is dropped at the end.
 */
void	 console_github_signin(struct engine *, const char *code, const char *redirect_uri,
	     console_signin_cb, void *arg);
/*
 * Loop, async: the orgs user may still see, checked with each org's own GitHub
 * credential (github.token or its App's installation token on the GitHub
 * org): GET {api}/orgs/{github_org}/members/{user} (204 member, 404 not) and
 * the team route. An org whose membership cannot be told for a reason of its
 * configuration (no credential, App not installed, a credential that cannot
 * see members) is left out, with a warning logged; GitHub unreachable or
 * failing ends it with an error instead.
 */
void	 console_github_recheck(struct engine *, const char *user, console_signin_cb,
	     void *arg);

/* Pure parts, for tests. */
/*
 * The access token of POST /login/oauth/access_token's JSON answer, or NULL
 * and why (GitHub's error code, e.g. bad_verification_code); caller frees.
 */
char	*console_github_parse_token(int status, const char *body, size_t len, char **cause);
/* 1 when a membership answer (org or team) says state "active", else 0. */
int	 console_github_active(int status, const char *body, size_t len);
/* 1 when s may go into an API path as a GitHub login: letters, digits, - ([bot] suffix no). */
int	 console_github_login_valid(const char *s);

#endif
