/* api.h: the org API (SPEC section 12): keys checked, routes answered, on the engine's loop. */
#ifndef SPUR_API_H
#define SPUR_API_H

#include <jansson.h>
#include <stddef.h>

struct engine;
struct api_key;

/* A request under /o/{org}/ that is not a hook, as the front read it. */
struct api_req {
	char		*method;	/* "GET", "POST", ... */
	char		*org;		/* the path's */
	char		*path;		/* after /o/{org}, without the query: "/sessions/ses_1" */
	char		*query;		/* after '?', NULL: none */
	char		*authorization;
	char		*idempotency_key;
	char		*last_event_id;
	char		*mcp_session;	/* Mcp-Session-Id */
	char		*mcp_version;	/* MCP-Protocol-Version */
	char		*accept;
	char		*origin;	/* Origin, NULL: none (not a browser) */
	char		*cookie;	/* Cookie (the console's session) */
	char		*csrf;		/* X-CSRF-Token */
	char		*peer;		/* who sent it, for the log (server_client) */
	char		*body;
	size_t		 len;
};

/* What to send back; the front sends it (or hands the connection to an event stream). */
struct api_answer {
	int		 status;
	const char	*ctype;		/* NULL: application/json */
	char		*body;
	int		 retry_after;	/* seconds, 0: no Retry-After */
	const char	*allow;		/* Allow, for a 405 */
	char		*mcp_session;	/* Mcp-Session-Id to set, NULL: none */
	char		*stream_run;	/* not NULL: serve the run's events (SSE) from here */
	char		*stream_after;	/* the Last-Event-ID to resume after */
	char		*location;	/* Location, for a redirect */
	char		*set_cookie[2];	/* Set-Cookie */
	int		 console;	/* a console page: its security headers */
	char		*form_action;	/* an origin its forms may post to besides 'self' */
	size_t		 body_len;	/* 0: body is text; else its bytes (a NUL among them) */
	char		*download;	/* a file to save as this name (a run's artifact) */
};

typedef void (*api_done_cb)(struct api_answer *, void *arg);

/* Loop: answers req; done runs once, on the loop (maybe before this returns). */
void		 api_handle(struct engine *, const struct api_req *, api_done_cb, void *);
void		 api_req_clear(struct api_req *);
/* The value of name in a query string ("a=1&b=2"), decoded (to free); NULL: absent. */
char		*api_query_value(const char *query, const char *name);
void		 api_answer_clear(struct api_answer *);

/*
 * Loop: one call of the API for a key already checked (the MCP server's tools
 * use it): method and path as in the routes ("/sessions/ses_1/messages"),
 * body a JSON object or NULL. done gets the status and the answer's JSON
 * (borrowed: it is freed after done returns).
 */
typedef void (*api_call_cb)(int status, json_t *answer, void *arg);
void		 api_call(struct engine *, const struct api_key *, const char *method,
		     const char *path, const char *query, json_t *body,
		     const char *idempotency_key, api_call_cb, void *);

/* mcp.c: /o/{org}/mcp for a key with the mcp scope (checked by api.c). */
/* Whether an MCP request's Origin may use the server: one mcp.allowed_origins names. */
int		 mcp_origin_allowed(char *const *allowed, const char *origin);
void		 mcp_handle(struct engine *, const struct api_key *, const struct api_req *,
		     api_done_cb, void *);
void		 mcp_free_all(void);

#endif
