/* console.h: the web console (SPEC section 14): its routes, sign-in sessions and one-time links. */
#ifndef SPUR_CONSOLE_H
#define SPUR_CONSOLE_H

#include <stdint.h>

#include "api.h"

struct engine;
struct store;
struct api_key;

#define CONSOLE_COOKIE		"spur_console"
#define CONSOLE_SESSION_MS	(12LL * 3600 * 1000)	/* a sign-in lasts this long */
#define CONSOLE_RECHECK_MS	(3600LL * 1000)		/* a signed-in person's membership is checked again */
#define CONSOLE_LINK_MS		(10LL * 60 * 1000)	/* a one-time link is good this long */

/* Whether a request path is the console's (served by console_handle, or an asset). */
int		 console_path(const char *path);
/* Loop: answers a console request (not an asset: those the fronts serve). */
void		 console_handle(struct engine *, const struct api_req *, api_done_cb, void *);
/*
 * Loop (api.c): the principal of a request that carries the console's
 * cookie: 0 with *out filled (its org is path_org when the session may see
 * it, else "") and *csrf (to free); 1 when there is no usable session (401);
 * -1 when the store could not answer.
 */
int		 console_principal(struct engine *, const char *cookie_header,
		     const char *path_org, struct api_key *out, char **csrf);
/* A one-time link for org (spur console-link): its token, to free; NULL on failure. */
char		*console_link_make(struct store *, const char *org, int64_t now);

#endif
