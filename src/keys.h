/* keys.h: the org API's keys (SPEC section 12): made once, kept as a hash, checked in constant time. */
#ifndef SPUR_KEYS_H
#define SPUR_KEYS_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct store_key;

enum key_scope {
	SCOPE_SESSIONS_READ	= 1 << 0,
	SCOPE_SESSIONS_WRITE	= 1 << 1,
	SCOPE_RUNS_READ		= 1 << 2,
	SCOPE_RUNS_WRITE	= 1 << 3,
	SCOPE_AUTOMATIONS_READ	= 1 << 4,
	SCOPE_SECRETS_WRITE	= 1 << 5,
	SCOPE_MCP		= 1 << 6,
	SCOPE_CONSOLE		= 1 << 7,	/* a person signed in to the console, never a key's */
	SCOPE_SECRETS_USE	= 1 << 8,	/* a session may name the org's secrets */
};
/* What `spur keys create` grants without --scope: everything but secrets:write and secrets:use. */
#define SCOPE_DEFAULT	(SCOPE_SESSIONS_READ | SCOPE_SESSIONS_WRITE | SCOPE_RUNS_READ | \
	SCOPE_RUNS_WRITE | SCOPE_AUTOMATIONS_READ | SCOPE_MCP)

#define KEY_PREFIX	"rk_live_"

/* A key that was checked: who is asking. */
struct api_key {
	char		 id[32];
	char		 org[128];
	char		 name[128];
	unsigned	 scopes;
	int64_t		 last_used;	/* ms, 0: never */
};

/* nbytes (at most 64) random bytes as base64url without padding (to free). */
char		*key_token(size_t nbytes);
/* The SHA-256 of a secret as 64 hex digits: what the store keeps of keys, cookies, links. */
void		 key_hash(const char *, size_t, char out[65]);
/* One scope by name (0: unknown); scopes as space-separated text (to free). */
unsigned	 key_scope_parse(const char *);
char		*key_scopes_text(unsigned);
unsigned	 key_scopes_from_text(const char *);
/*
 * A new key for org: *secret is the whole key, to print once (to free); row
 * gets what the store keeps (store_key_clear it).
 */
void		 key_make(const char *org, const char *name, unsigned scopes,
		     int64_t expires_at, char **secret, struct store_key *row);
/*
 * The key of an Authorization header ("Bearer rk_live_..."), checked against
 * the store in the same time whether or not it exists: 0 and *out when it is
 * known, not revoked and not expired; -1 otherwise (*why for the log), -2 when
 * the store could not answer.
 */
int		 key_check(struct store *, const char *authorization, int64_t now,
		     struct api_key *out, const char **why);

#endif
