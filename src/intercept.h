/* intercept.h: header secrets added outside the sandbox: a run's certificate authority and the TLS interception of their hosts (SPEC section 15). */
#ifndef SPUR_INTERCEPT_H
#define SPUR_INTERCEPT_H

#include <stddef.h>
#include <stdint.h>

#include "secrets.h"	/* struct header_secret: a run's, values unsealed */

struct bufferevent;

/* When a header secret names no header (secrets.h's default, split). */
#define INTERCEPT_HEADER	"Authorization"
#define INTERCEPT_FORMAT	"Bearer {value}"

/*
 * The interception of one run: its CA (an EC P-256 key made here, kept in
 * this process, cleared when freed), the leaf certificate of each host made
 * on demand, and the trust used for the real upstreams (ca_file, NULL: the
 * system's). The secrets are copied. NULL and cause when a secret cannot be
 * sent in a header (a control character) or the CA cannot be made.
 */
struct intercept;
struct intercept *intercept_create(const char *run, const struct header_secret *, size_t,
		     const char *ca_file, char **cause);
void		 intercept_free(struct intercept *);
/*
 * Writes dir/ca.pem (the run's CA certificate) and dir/ca-bundle.pem (the
 * system bundle, then the CA), readable by the sandbox.
 */
int		 intercept_write_ca(const struct intercept *, const char *dir, char **cause);
/* The CA certificate in PEM (for tests and the bundle). */
char		*intercept_ca_pem(const struct intercept *);
/*
 * A remote MCP connection of the run (SPEC 18) on one of its hosts: the
 * POSTs to its URL (host, port, path) are read for their JSON-RPC calls.
 */
void		 intercept_add_mcp(struct intercept *, const char *name, const char *host,
		     int port, const char *path);
/* Whether a header secret is bound to host: its connections are intercepted. */
int		 intercept_bound(const struct intercept *, const char *host);
/*
 * The name of a secret whose placeholder is in data though host is not one
 * of its hosts; NULL when there is none.
 */
const char	*intercept_foreign(const struct intercept *, const char *host, const void *,
		     size_t);

/*
 * Looks for placeholders of secrets not bound to host in a stream (a request
 * body), across the reads it comes in; relay_start_watched's watch.
 */
struct intercept_watch;
struct intercept_watch *intercept_watch_new(const struct intercept *, const char *host);
/* The name of the secret whose placeholder the stream now holds; NULL: none yet. */
const char	*intercept_watch_feed(void *, const void *, size_t);
void		 intercept_watch_free(struct intercept_watch *);

/*
 * A request head (without its last CRLF CRLF) as it goes to host: the bound
 * secrets' headers set, their placeholders replaced, Connection: close.
 * NULL when it is refused: *status 400 (malformed) or 403 (a placeholder of
 * another host, or a Host header for another host), *why says why. applied
 * (when not NULL) gets "secret:header" words for the log.
 */
char		*intercept_rewrite(const struct intercept *, const char *host, const char *head,
		     size_t len, size_t *outlen, int *status, const char **why, char **applied);

/*
 * One intercepted CONNECT: cli is the client (the CONNECT read, nothing
 * answered yet), up the connected upstream. Takes both. Verifies the upstream
 * (TLS, the real name), answers the CONNECT, terminates the client's TLS with
 * the host's leaf certificate, rewrites the request head and relays the
 * rest; one request per connection. done is called once, from the loop, with
 * a verdict ("intercepted", "refused", "failed") and the bytes moved; the
 * caller then frees it.
 */
struct intercept_conn;
struct intercept_conn *intercept_conn_start(struct intercept *, struct bufferevent *cli,
		     struct bufferevent *up, const char *host, int port,
		     void (*done)(struct intercept_conn *, const char *verdict, uint64_t in,
		     uint64_t out, void *), void *);
void		 intercept_conn_free(struct intercept_conn *);
/*
 * The JSON-RPC messages its request carried when it went to a remote MCP
 * connection's URL (intercept_add_mcp), with the answer's status: names
 * only, valid until it is freed; *n 0: none. Call it from done.
 */
struct mcp_call_row;
const struct mcp_call_row *intercept_conn_calls(struct intercept_conn *, size_t *n);

#endif
