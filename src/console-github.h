/* console-github.h: signing in to the console with GitHub (the OAuth web flow, membership). */
#ifndef SPUR_CONSOLE_GITHUB_H
#define SPUR_CONSOLE_GITHUB_H

#include <jansson.h>

struct config;
struct engine;

/* 1 when some org has console.github_client_id (sign-in with GitHub offered). */
int	 console_github_enabled(const struct config *);
/* The GitHub authorize URL (client_id, redirect_uri, state, scope read:org); NULL: not enabled. */
char	*console_github_authorize_url(const struct config *, const char *state,
	    const char *redirect_uri);
/*
 * Loop, async: code -> token -> user -> the orgs (spur org names) the user may
 * see; cb(user or NULL, orgs (borrowed), error or NULL, arg) on the loop.
 */
typedef void (*console_github_cb)(const char *user, json_t *orgs, const char *error, void *arg);
void	 console_github_signin(struct engine *, const char *code, const char *redirect_uri,
	    console_github_cb, void *arg);
/* Loop, async: the orgs user may still see. */
void	 console_github_recheck(struct engine *, const char *user, console_github_cb, void *arg);

#endif
