/* egress.h: a run's network: the allow-listed proxy and the model gateway (SPEC section 8). */
#ifndef SPUR_EGRESS_H
#define SPUR_EGRESS_H

#include <stddef.h>

struct engine;
struct automation;
struct sandbox_spec;
struct egress;

/*
 * Gives a run the network it may have: adds binds to spec, "K=V" strings to
 * env (at *nenv, at most max), and may wrap *argv (e.g. with the in-sandbox
 * forwarder). *out is what to free when the run ends (NULL: nothing opened).
 * -1 and cause when the run cannot get its network.
 */
int	 egress_attach(struct engine *, const char *run, const char *org,
	     const struct automation *, const char *home, struct sandbox_spec *,
	     char **env, size_t *nenv, size_t max, char ***argv, struct egress **out,
	     char **cause);
void	 egress_free(struct egress *);

#endif
