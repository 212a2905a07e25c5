/* secrets.h: sealed secrets in the store (SPEC section 15): AES-256-GCM under secrets.key, and a run's header secrets. */
#ifndef SPUR_SECRETS_H
#define SPUR_SECRETS_H

#include <stddef.h>

struct config;
struct engine;
struct secret;
struct store;
struct yerrs;

#define SECRETS_KEY_LEN		32	/* secrets.key: 64 hex digits */
#define SECRETS_NONCE_LEN	12	/* fresh for every value sealed */
#define SECRETS_TAG_LEN		16
#define SECRETS_VALUE_MAX	(64 * 1024)
#define SECRETS_HOSTS_MAX	16
#define SECRETS_PLACEHOLDER	"spur-secret-"	/* + 32 random hex digits, per run */
#define SECRETS_HEADER_DEFAULT	"Authorization: Bearer {value}"

/*
 * A header secret of one run (kind header): the value, unsealed, never enters
 * the sandbox; the sandbox's variable of that name holds the placeholder. The
 * run's proxy puts the value in header_name (format with "{value}" replaced)
 * for the hosts, and replaces the placeholder wherever it appears in their
 * request headers. hosts is NULL-terminated.
 */
struct header_secret {
	char	 *name;
	char	 *value;
	char	 *placeholder;
	char	**hosts;
	char	 *header_name;
	char	 *format;
};

/*
 * The run's header secrets (kind header among the names the automation asks
 * for), values unsealed; placeholders random per run. *out is NULL and *n 0
 * when there is none. -1 and cause when a sealed secret cannot be opened.
 */
int	 secrets_for_run(struct engine *, const char *org, char *const *names,
	     struct header_secret **out, size_t *n, char **cause);
void	 header_secrets_free(struct header_secret *, size_t);
/* A fresh placeholder: SECRETS_PLACEHOLDER and 32 random hex digits (to free). */
char	*secrets_placeholder(void);

/*
 * The value of the env-kind sealed secret org/name, unsealed (to free with
 * freezero), and known to the scrubber from now on. 1 when there is no sealed
 * secret of that name (or it is a header secret), -1 and cause when it does
 * not open.
 */
int	 secrets_env_value(struct engine *, const char *org, const char *name,
	     char **value, size_t *len, char **cause);

/*
 * The value of org/name, configured (orgs.NAME.secrets) or sealed of either
 * kind, to free with freezero: what a connection's header carries to host
 * (the run's proxy adds it, connections.c). A sealed header secret goes to its
 * own hosts only: -1 and cause for another. 1 when there is none, -1 and cause.
 */
int	 secrets_value(struct engine *, const char *org, const char *name, const char *host,
	     char **value, size_t *len, char **cause);

struct store_secret;
/* A header secret's hosts, NULL-terminated (to strv_free); NULL for an env secret. */
char	**secrets_row_hosts(const struct store_secret *);

/* The sealing itself (pure, for the unit tests). */

/* secrets.key's text: exactly 64 hex digits (a final newline is already cut). */
int	 secrets_key_parse(const char *text, size_t len, unsigned char key[SECRETS_KEY_LEN],
	     char **cause);
/*
 * What the seal binds besides the value: the org, the name, the kind, the
 * hosts and the header (NUL-separated; to free). A row moved or edited does
 * not open.
 */
char	*secrets_aad(const char *org, const char *name, const char *hosts,
	     const char *header, size_t *len);
/* Seals value under key with a fresh nonce: *sealed is ciphertext then tag (to free). */
int	 secrets_seal(const unsigned char key[SECRETS_KEY_LEN], const char *aad,
	     size_t aadlen, const char *value, size_t len,
	     unsigned char nonce[SECRETS_NONCE_LEN], unsigned char **sealed,
	     size_t *sealedlen);
/* Opens it: 0 and *value (NUL-terminated, freezero it), -1 on a bad tag. */
int	 secrets_open(const unsigned char key[SECRETS_KEY_LEN], const char *aad,
	     size_t aadlen, const unsigned char *nonce, size_t noncelen,
	     const unsigned char *sealed, size_t sealedlen, char **value, size_t *len);

/* secrets.key's 32 bytes (its reference read when the config left it unresolved). */
int	 secrets_key_get(const struct config *, unsigned char key[SECRETS_KEY_LEN],
	     char **cause);
/* A key from a reference (env:NAME, file:PATH relative to dir). */
int	 secrets_key_from_ref(const char *dir, const char *ref,
	     unsigned char key[SECRETS_KEY_LEN], char **cause);
struct store_secret;
/* Opens one row of the store; cause names the key and the secret when it does not. */
int	 secrets_row_open(const struct config *, const unsigned char key[SECRETS_KEY_LEN],
	     const struct store_secret *, char **value, size_t *len, char **cause);
/* What a sealed secret may be called: an environment variable's name. */
int	 secrets_name_valid(const char *);
/*
 * Seals value as org/name (kind header when hosts has any; header NULL: the
 * default) under secrets.key: 0; -1 and cause naming the field for a bad
 * request or a key that does not open what is sealed; -2 the store failed.
 */
int	 secrets_put(const struct config *, struct store *, const char *org,
	     const char *name, const char *value, size_t len, char *const *hosts,
	     const char *header, char **cause);

/* A header line "Name: FORMAT" (FORMAT writes {value}): 0 when it is one. */
int	 secrets_header_valid(const char *, char **cause);

/*
 * After the config is loaded (spur serve, spur check, a reload): every sealed
 * secret in data_dir's store is opened with secrets.key (a missing or wrong
 * key is an error naming it) and becomes known to its org (org_secret_known;
 * its value scrubbed). A name both configured and sealed is an error. With
 * unseal 0 (spur check --offline) only the names are read.
 */
int	 secrets_attach(struct config *, int unseal, struct yerrs *);
/* The engine's scrubber: sealed values unsealed since the config was loaded. */
size_t	 secrets_scrub_extra(const struct secret **, size_t max);

#endif
