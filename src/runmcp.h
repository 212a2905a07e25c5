/* runmcp.h: a run's own MCP server (SPEC 18), on its gateway: tools on the run's own thread. */
#ifndef SPUR_RUNMCP_H
#define SPUR_RUNMCP_H

#include <stddef.h>
#include <jansson.h>

struct engine;
struct runmcp;
struct gateway_local;
struct gateway_call;

/* Where the run's gateway serves it, beside the model API's paths. */
#define RUNMCP_PATH	"/spur/mcp"

/*
 * The server of run (its thread, org and prompt's nonce read from the
 * engine's store), with a per-run placeholder credential of its own:
 * nothing of the org's is in it.
 */
struct runmcp	*runmcp_create(struct engine *, const char *run);
void		 runmcp_free(struct runmcp *);
/* The credential the agent sends (Authorization: Bearer ...). */
const char	*runmcp_token(const struct runmcp *);
/*
 * One HTTP request to RUNMCP_PATH (Streamable HTTP, JSON answers; version:
 * its MCP-Protocol-Version, NULL: none): the status, and in *answer the JSON
 * to send (NULL: none, as for 202); 0: the answer comes later on call
 * (thread_ask), unless runmcp_cancel(call).
 */
int		 runmcp_handle(struct runmcp *, const char *method, const char *auth,
		     const char *version, const char *body, size_t len, json_t **answer,
		     struct gateway_call *);
void		 runmcp_cancel(struct runmcp *, struct gateway_call *);
/* The same as a gateway's local path (egress.h), for dispatch.c to register. */
extern const struct gateway_local runmcp_local;

#endif
