/* connections.h: the MCP servers an automation or API session connects its agent to (SPEC 18), checked and made into a run's. */
#ifndef SPUR_CONNECTIONS_H
#define SPUR_CONNECTIONS_H

#include <jansson.h>
#include <stddef.h>

struct engine;
struct header_secret;

#define CONNECTIONS_MAX		16	/* per automation or session */
#define CONNECTION_HEADERS_MAX	8
#define CONNECTION_ARGS_MAX	32
#define CONNECTION_NAME_MAX	32

/*
 * What a secret reference names: known(arg, NAME, HOST) is NULL when the org
 * has a secret of that name (orgs.NAME.secrets or sealed) that may go to HOST
 * (a sealed header secret goes to its own hosts only), else why.
 */
typedef const char *(*connection_known_fn)(void *arg, const char *name, const char *host);
/* For known: a secret found (or not) and its hosts when a header secret (NULL: any). */
const char *connection_secret_why(int found, char *const *hosts, const char *host);

/* A header a remote connection sets: its value the secret's, written as FORMAT says. */
struct connection_header {
	char	*name;		/* the header, e.g. Authorization */
	char	*secret;	/* the org's secret it carries */
	char	*format;	/* "{value}" or "SCHEME {value}" (connection_header_parse) */
};

/* One connection, checked: remote (url) or stdio (command). */
struct connection {
	char			 *name;
	char			 *url;		/* remote: https://HOST[:PORT][/PATH]; NULL: stdio */
	char			 *host;		/* remote: the URL's host, port and path ("/" when none) */
	int			  port;
	char			 *path;
	struct connection_header *headers;	/* remote */
	size_t			  nheaders;
	char			 *command;	/* stdio: a path or a name in the run's PATH */
	char			**args;		/* stdio: NULL-terminated; NULL: none given */
};

/* An automation's or session's connections, in their order. */
struct connections {
	struct connection	*v;
	size_t			 n;
};

/*
 * One connection as JSON: {name, url, headers?} (remote, Streamable HTTP) or
 * {name, command, args?} (stdio, in the run's environment). NULL when it is
 * one, else why (to free), *field the key at fault (NULL: the whole).
 */
char	*connection_error(const json_t *, connection_known_fn, void *,
	     const char **field);
/* The list: at most CONNECTIONS_MAX, each one, names unique. NULL, or why ("connections[1].url: ..."). */
char	*connections_error(const json_t *, connection_known_fn, void *);
/* The list as connections_error checks it, made typed; NULL and *why (to free) when it is not one. */
struct connections *connections_from_json(const json_t *, connection_known_fn, void *,
	     char **why);
/* The list as JSON, as the API and spur show answer it ({name, url, headers?} or {name, command, args?}). */
json_t	*connections_json(const struct connections *);
void	 connections_free(struct connections *);
/*
 * A header's value: a secret's name (the header is the value) or "SCHEME
 * {NAME}" (e.g. "Bearer {TRACKER_KEY}"): 0 with the name and the FORMAT
 * ("{value}", "Bearer {value}"), -1 when it is neither.
 */
int	 connection_header_parse(const char *, char **secret, char **format);
/* The entries to add to the run's network.allow ("host" or "host:port"), NULL-terminated; NULL: none. */
char	**connections_allow(char *const *allow, const struct connections *);
/* What the run's history says was configured: "connections: NAME (URL), NAME (stdio: CMD)". */
char	*connections_note(const struct connections *);

/*
 * A run's connections: each header secret unsealed into hs (the proxy adds
 * it outside the sandbox; the agent's configuration holds its placeholder),
 * and *servers the agent's MCP servers by name (remote: {type: http, url,
 * headers}; stdio: {type: stdio, command, args}). 0; -1 and cause (a secret
 * gone or that does not open).
 */
int	 connections_for_run(struct engine *, const char *org, const struct connections *,
	     struct header_secret **hs, size_t *nhs, json_t **servers, char **cause);
/*
 * Whether each stdio connection's command is in the run's environment: an
 * absolute path, or a name in the sandbox's PATH, on the host or in rootfs
 * (NULL: the host's). 0; -1 and cause naming the first one missing.
 */
int	 connections_commands(const struct connections *, const char *rootfs, char **cause);
/* The same for one connection (0 for a remote one). */
int	 connection_command(const struct connection *, const char *rootfs, char **cause);

#endif
