/*
 * console-signin.h: how the web console signs a person in through an outside
 * system (console.c asks; the system's console-*.c answers): its routes
 * /console/auth/<name> and /console/auth/<name>/callback, and its answers.
 */
#ifndef SPUR_CONSOLE_SIGNIN_H
#define SPUR_CONSOLE_SIGNIN_H

#include <jansson.h>

struct config;
struct engine;

/*
 * cb(user, orgs, NULL, arg): the person's login and the spur org names it may
 * see (a JSON array, borrowed: empty when none, which the console refuses);
 * cb(NULL, NULL, error, arg): no answer could be had, error a sentence for the
 * person, scrubbed of every secret. Always later, from the loop; exactly once.
 */
typedef void (*console_signin_cb)(const char *user, json_t *orgs, const char *error,
	     void *arg);

struct console_signin {
	const char	*name;		/* the routes' segment, the log's events' prefix */
	const char	*title;		/* as people write it */
	const char	*member_of;	/* what lets a person see an org, for the log */
	/* 1 when some org offers it. */
	int		 (*enabled)(const struct config *);
	/* Where the browser goes first (state and redirect_uri in it); NULL: not enabled. */
	char		*(*authorize_url)(const struct config *, const char *state,
			    const char *redirect_uri);
	/* The code the callback got -> who the person is and what it may see. */
	void		 (*signin)(struct engine *, const char *code, const char *redirect_uri,
			    console_signin_cb, void *arg);
	/* What user may still see, checked with each org's own credential. */
	void		 (*recheck)(struct engine *, const char *user, console_signin_cb,
			    void *arg);
};

extern const struct console_signin console_signin;

#endif
