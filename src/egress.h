/* egress.h: a run's network: the allow-listed proxy and the model gateway (SPEC section 8). */
#ifndef SPUR_EGRESS_H
#define SPUR_EGRESS_H

#include <sys/types.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "budget.h"
#include "lpause.h"

struct engine;
struct automation;
struct sandbox_spec;
struct egress;
struct event_base;
struct evdns_base;
struct evconnlistener;
struct bufferevent;
struct store;
struct header_secret;
struct config;

/* Where the forwarder listens inside a sandbox (its own network namespace). */
#define EGRESS_PROXY_PORT	3128
#define EGRESS_GATEWAY_PORT	3129
#define EGRESS_INSIDE_DIR	"/run/spur"	/* the run's sockets and the forwarder */

/*
 * Gives a run the network it may have: adds binds to spec, "K=V" strings to
 * env (at *nenv, at most max), and may wrap *argv (e.g. with the in-sandbox
 * forwarder). Its header secrets (hs, nhs; intercept.h) go into the requests
 * to their hosts, with the run's CA trusted inside. The automation's remote
 * connections' hosts join its allow list; servers (connections_for_run, or
 * NULL) go into the agent's MCP configuration. *out is what to free when
 * the run ends (NULL: nothing opened). -1 and cause when the run cannot get
 * its network.
 */
int	 egress_attach(struct engine *, const char *run, const char *org,
	     const struct automation *, const struct header_secret *hs, size_t nhs,
	     const json_t *servers, const char *home, struct sandbox_spec *,
	     char **env, size_t *nenv, size_t max, char ***argv, struct egress **out,
	     char **cause);
void	 egress_free(struct egress *);
/* The MCP servers the agent's session is given in its protocol (agent_setup's); NULL: none. */
const json_t	*egress_session_mcp(const struct egress *);
/*
 * The in-sandbox forwarder (spur-forward) a networked run needs: beside this
 * spur's executable (the build tree), else in SPUR_PKGLIBEXECDIR. NULL and
 * cause when it is in neither.
 */
char	*egress_forwarder(char **cause);
/*
 * The model API an agent's runs reach through the gateway: agents.NAME.api_url
 * or the vendor's base, the path under it that lists models (a call any good
 * key may make) and whether the key goes as a bearer token (else x-api-key).
 * -1 for an agent without a model API (command).
 */
int	 egress_model_api(const struct config *, const char *agent, const char **upstream,
	     const char **models, int *bearer);

/* What the run's model API said: the cause of a run that failed because of it. */
enum egress_verdict { EGRESS_OK, EGRESS_MODEL_AUTH, EGRESS_MODEL_QUOTA, EGRESS_DENIED };
/* Why the run's budget stopped its model requests (gateway_stopped); NULL: it did not. */
const char	*egress_budget_stopped(const struct egress *);
/*
 * MODEL_AUTH when the model API refused the key (401/403) and the agent got no
 * successful answer after it; MODEL_QUOTA when its last answers were 429/529
 * (the agent gave up on them); DENIED when the proxy refused the run at least
 * one connection; else OK. In that order of precedence. NULL (no network): OK.
 * Call it before egress_free.
 */
enum egress_verdict egress_verdict(const struct egress *);

/*
 * relay.c: for egress.c, proxy.c, gateway.c and intercept.c only.
 */

/* A listener on a unix socket at path (mode 0666), or when path is NULL on 127.0.0.1:0. */
struct evconnlistener *egress_listen(struct event_base *, const char *path, int *port,
	     void (*)(struct evconnlistener *, int, struct sockaddr *, int, void *),
	     void *, char **cause);

/*
 * What a run's listener (proxy, gateway) takes: at most EGRESS_MAX_CONNS
 * connections open at once, so that one agent cannot use up the engine's
 * descriptors (each is one here, two once proxied); past that a connection is
 * closed at once. When accept() itself fails (the engine out of descriptors),
 * the listener rests (lpause.h).
 */
#define EGRESS_MAX_CONNS	256
struct egress_gate {
	struct lpause		 pause;
	const char		*what;		/* "proxy", "gateway": for the log */
	const char		*run;
	int			 open;		/* connections taken and not yet freed */
	int			 capped;	/* the cap was logged for this run */
};
void	 egress_gate_init(struct egress_gate *, struct event_base *, struct evconnlistener *,
	     const char *what, const char *run);
/* A new connection: 0 to take it, -1 over the cap (fd closed). */
int	 egress_gate_admit(struct egress_gate *, int fd);
/* A connection it took is freed. */
void	 egress_gate_leave(struct egress_gate *);
/* From the listener's error callback. */
void	 egress_gate_failed(struct egress_gate *);
void	 egress_gate_clear(struct egress_gate *);

/* One HTTP/1.x request head as it came: request line and headers. */
#define HTTP_HEAD_MAX		(32 * 1024)
#define HTTP_HEADERS_MAX	128
struct http_head {
	char	*method;
	char	*target;
	char	*version;
	char	*name[HTTP_HEADERS_MAX];
	char	*value[HTTP_HEADERS_MAX];
	size_t	 n;
};
/*
 * Takes one head out of in, its CRLF CRLF dropped: 1 and *text (NUL-terminated,
 * *len bytes, to free) when it is all there, 0 while more must come, -1 when
 * more than HTTP_HEAD_MAX came without its end.
 */
struct evbuffer;
int		 http_head_take(struct evbuffer *in, char **text, size_t *len);
/* Parses text (the head without its final CRLF CRLF); -1 when it is no request, or malformed. */
int		 http_head_parse(const char *, size_t, struct http_head *);
const char	*http_head_get(const struct http_head *, const char *name);
/* How many headers of that name the head has. */
size_t		 http_head_count(const struct http_head *, const char *name);
void		 http_head_clear(struct http_head *);

/*
 * Two connections joined: what one reads the other writes, with back
 * pressure. done is called once, when either side ended and what was read
 * has been written; the relay then frees both. What a sends is shown to watch
 * (each read, before it goes on; NULL: nothing is); when watch returns a
 * name, that read is dropped and the relay ends: relay_cut then returns the
 * name.
 */
struct relay;
struct relay	*relay_start_watched(struct bufferevent *, struct bufferevent *,
		     void (*done)(struct relay *, void *), void *,
		     const char *(*watch)(void *, const void *, size_t), void *);
const char	*relay_cut(const struct relay *);
/* Bytes a to b and b to a so far. */
uint64_t	 relay_bytes(const struct relay *, int a_to_b);
void		 relay_free(struct relay *);
/* The proxy's own answer: status, the reason in the body, the verdict in X-Spur-Verdict. */
void		 proxy_answer(struct evbuffer *, int status, const char *reason,
		     const char *verdict);

/* proxy.c: the HTTP proxy of one run: CONNECT and absolute-URI requests, allow list. */
struct proxy;
/* allow is copied; the connections are logged for run and stored, secrets cut from their hosts. */
struct proxy	*proxy_create(struct event_base *, struct evdns_base *, struct engine *,
		     const char *run, char *const *allow, const char *path, int *port,
		     char **cause);
void		 proxy_free(struct proxy *);
/* The run's header secrets (intercept.h): their hosts are intercepted; it outlives the proxy. */
struct intercept;
void		 proxy_set_intercept(struct proxy *, struct intercept *);
/*
 * Whether a host:port request may go out; whether addr (with its port) may be
 * connected: any public address, a private one only when an entry names it
 * literally with that port (or without one, for 80 and 443).
 */
int		 proxy_allowed(char *const *allow, const char *host, int port);
int		 proxy_address_ok(char *const *allow, const struct sockaddr *);
/* How many connections the proxy refused the run (host not allowed, or a private address). */
unsigned	 proxy_refused(const struct proxy *);

/* gateway.c: the model API of one run, forwarded upstream with the real key. */
struct gateway;
/* A request to a gateway's local path whose answer comes later (gateway_local_answer). */
struct gateway_call;
/*
 * A path a run's gateway answers itself, by these callbacks: the run's own
 * MCP server (runmcp.c), which dispatch.c registers, so that nothing of the
 * engine's core names it.
 */
struct spur_event;
struct gateway_local {
	const char	*path;
	/* ctx: gateway_spec.local_ctx (the engine, which the gateway does not know). */
	void		*(*create)(void *ctx, const char *run);
	void		 (*free)(void *);
	/* The per-run credential the agent is configured with. */
	const char	*(*token)(const void *);
	/*
	 * One request (auth, version: its Authorization and MCP-Protocol-Version
	 * headers, NULL: none): the status, and the JSON answer to send (NULL:
	 * none); or 0: the answer comes later, by gateway_local_answer(call, ...),
	 * unless cancel(call) comes first (the agent went away, the run ended).
	 */
	int		 (*handle)(void *, const char *method, const char *auth,
			    const char *version, const char *body, size_t len,
			    json_t **answer, struct gateway_call *call);
	void		 (*cancel)(void *, struct gateway_call *);
	/*
	 * A question of a run in a thread (thread_ask): whether one of
	 * org's thread awaits an answer (any thread); the reply, on the loop,
	 * to the run that asked (engine: struct engine *).
	 */
	int		 (*awaits)(const char *org, const char *thread);
	void		 (*reply)(void *engine, const struct spur_event *);
};
/* The answer (taken) of a call its handle deferred; call is gone after it. */
void		 gateway_local_answer(struct gateway_call *, int status, json_t *answer);

struct gateway_spec {
	const char	*upstream;	/* base URL requests go to */
	const char	*prefix;	/* path prefix of the in-sandbox base URL, dropped */
	const char	*key;		/* the org's credential */
	int		 bearer;	/* no credential header came: Authorization, else x-api-key */
	const char	*org;		/* whose usage it is (SPEC section 16) */
	const char	*automation;
	const struct price *prices;	/* agents.NAME.prices (budget.h), copied */
	size_t		 nprices;
	struct budget_limits budget;	/* the run's and its org's */
	const char	*agent;		/* its name, for the price a refusal asks for */
	int		 model_requests; /* in flight at once (limits.model_requests) */
	const struct gateway_local *local; /* NULL: no path of its own */
	void		*local_ctx;	/* what local->create is given */
};
/*
 * A request's origin-form target as it goes upstream: unreserved characters
 * decoded, other encodings in upper case; NULL and cause for a dot segment
 * (also encoded, as %2e%2e), an encoded '/', '\' or NUL, a literal '\' or '#'
 * or anything else that is not a path: nothing can climb out of the API's path.
 */
char		*gateway_target(const char *target, char **cause);
/* What the model API answered a run: its own answers, not the gateway's errors. */
struct gateway_tally {
	unsigned	 answers;
	unsigned	 auth;		/* 401, 403: the API refused the key */
	unsigned	 quota;		/* 429, 529: rate limited, overloaded */
	long		 last;		/* the status of the last answer; 0: none yet */
	int		 refused;	/* a 401/403 and no 2xx answer after it */
};
/* Counts one answer of the API; 1 when it is the first refusal of the key. */
int		 gateway_tally_add(struct gateway_tally *, long status);
const struct gateway_tally *gateway_tally(const struct gateway *);
/* Why the gateway refused the run a model request for its budget, in words; NULL: it did not. */
const char	*gateway_stopped(const struct gateway *);
/* egress_verdict's rule, from what the gateway (NULL: none) and the proxy saw. */
enum egress_verdict egress_judge(const struct gateway_tally *, unsigned refused);
struct gateway	*gateway_create(struct event_base *, struct store *, const char *run,
		     const struct gateway_spec *, const char *path, int *port, char **cause);
void		 gateway_free(struct gateway *);
/* The credential of its local path's server (the agent's configuration), NULL: none. */
const char	*gateway_local_token(const struct gateway *);

/* egress.c: logs one connection of a run and stores it (the connections table). */
void		 egress_record(struct store *, const char *run, const char *kind,
		     const char *host, int port, uint64_t in, uint64_t out,
		     const char *verdict);
/* One JSON-RPC message of the run to a remote connection (intercept_conn_calls): logged and stored. */
struct mcp_call_row;
void		 egress_mcp_record(struct store *, const char *run, const struct mcp_call_row *);
/*
 * Closes a connection once its answer is out: stops reading, and calls done
 * once the output is written (what is BEV_EVENT_WRITING) or when it fails
 * first; done frees it.
 */
void		 egress_close_flushed(struct bufferevent *,
		     void (*done)(struct bufferevent *, short, void *), void *);

#endif
