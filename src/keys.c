/* keys.c: the org API's keys: rk_live_ID_SECRET, of which the store keeps the id and a hash. */
#include "spur.h"
#include "keys.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KEY_ID_LEN	16	/* hex: 64 bits, public */
#define KEY_SECRET_LEN	32	/* bytes: 256 bits, base64url without padding: 43 chars */
#define KEY_SECRET_B64	43

static const struct {
	const char	*name;
	unsigned	 bit;
} scopes[] = {
	{ "sessions:read", SCOPE_SESSIONS_READ },
	{ "sessions:write", SCOPE_SESSIONS_WRITE },
	{ "runs:read", SCOPE_RUNS_READ },
	{ "runs:write", SCOPE_RUNS_WRITE },
	{ "automations:read", SCOPE_AUTOMATIONS_READ },
	{ "secrets:write", SCOPE_SECRETS_WRITE },
	{ "secrets:use", SCOPE_SECRETS_USE },
	{ "mcp", SCOPE_MCP },
};

unsigned
key_scope_parse(const char *s)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(scopes); i++) {
		if (strcmp(s, scopes[i].name) == 0)
			return scopes[i].bit;
	}
	return 0;
}

char *
key_scopes_text(unsigned bits)
{
	struct buf	 b;
	size_t		 i;

	buf_init(&b, 0);
	for (i = 0; i < SPUR_ARRLEN(scopes); i++) {
		if (bits & scopes[i].bit)
			buf_addf(&b, "%s%s", b.len > 0 ? " " : "", scopes[i].name);
	}
	return buf_take(&b);
}

unsigned
key_scopes_from_text(const char *text)
{
	char		*copy = xstrdup(text != NULL ? text : ""), *p = copy, *w;
	unsigned	 bits = 0;

	while ((w = strsep(&p, " ")) != NULL) {
		if (*w != '\0')
			bits |= key_scope_parse(w);
	}
	free(copy);
	return bits;
}

void
key_hash(const char *key, size_t len, char out[65])
{
	unsigned char	 h[32];

	sha256(key, len, h);
	hex_encode(h, sizeof h, out);
}

char *
key_token(size_t nbytes)
{
	unsigned char	 raw[64];
	char		*b64;

	if (nbytes > sizeof raw)
		nbytes = sizeof raw;
	random_bytes(raw, nbytes);
	/* One shell word, one URL-safe token, one cookie value. */
	b64 = base64url_encode(raw, nbytes);
	explicit_bzero(raw, sizeof raw);
	return b64;
}

void
key_make(const char *org, const char *name, unsigned bits, int64_t expires_at,
    char **secret, struct store_key *row)
{
	unsigned char	 id[KEY_ID_LEN / 2];
	char		 idhex[KEY_ID_LEN + 1], hash[65], *b64;

	random_bytes(id, sizeof id);
	hex_encode(id, sizeof id, idhex);
	b64 = key_token(KEY_SECRET_LEN);
	*secret = xprintf(KEY_PREFIX "%s_%s", idhex, b64);
	explicit_bzero(b64, strlen(b64));
	free(b64);
	key_hash(*secret, strlen(*secret), hash);
	memset(row, 0, sizeof *row);
	row->id = xprintf("key_%s", idhex);
	row->org = xstrdup(org);
	row->name = name != NULL ? xstrdup(name) : NULL;
	row->hash = xstrdup(hash);
	row->scopes = key_scopes_text(bits);
	row->created_at = now_ms();
	row->expires_at = expires_at;
}

/* "Bearer rk_live_ID_SECRET": the key's id (key_ID) into id; -1 when it is not of that form. */
static int
key_split(const char *auth, const char **key, char id[32])
{
	const char	*k, *p;
	size_t		 i;

	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
		return -1;
	for (k = auth + 7; *k == ' '; k++)
		;
	if (strncmp(k, KEY_PREFIX, strlen(KEY_PREFIX)) != 0)
		return -1;
	p = k + strlen(KEY_PREFIX);
	for (i = 0; i < KEY_ID_LEN; i++) {
		if (hex_value(p[i]) < 0)
			return -1;
	}
	if (p[KEY_ID_LEN] != '_' || strlen(p + KEY_ID_LEN + 1) != KEY_SECRET_B64)
		return -1;
	snprintf(id, 32, "key_%.*s", KEY_ID_LEN, p);
	*key = k;
	return 0;
}

int
key_check(struct store *st, const char *auth, int64_t now, struct api_key *out,
    const char **why)
{
	/* Compared against when there is no such key, so every refusal costs the same. */
	static const char	 dummy[65] =
	    "0000000000000000000000000000000000000000000000000000000000000000";
	struct store_key	 row;
	const char		*key = "", *want = dummy;
	char			 id[32] = "key_", hash[65];
	int			 found = 0, rc;

	memset(out, 0, sizeof *out);
	*why = NULL;
	if (key_split(auth, &key, id) != 0)
		*why = auth == NULL ? "no key" : "not a key";
	if ((rc = store_key_get(st, id, &row)) < 0)
		return -2;
	if (rc == 0 && row.hash != NULL && strlen(row.hash) == 64) {
		found = 1;
		want = row.hash;
	}
	key_hash(key, strlen(key), hash);
	if (!ct_equal(hash, want, 64) || !found || *why != NULL) {
		if (*why == NULL)
			*why = "unknown key";
		store_key_clear(&row);
		return -1;
	}
	if (row.revoked_at != 0)
		*why = "revoked key";
	else if (row.expires_at != 0 && row.expires_at <= now)
		*why = "expired key";
	if (*why == NULL) {
		snprintf(out->id, sizeof out->id, "%s", row.id);
		snprintf(out->org, sizeof out->org, "%s", row.org);
		snprintf(out->name, sizeof out->name, "%s", row.name != NULL ? row.name : "");
		out->scopes = key_scopes_from_text(row.scopes);
		out->last_used = row.last_used;
	}
	store_key_clear(&row);
	return *why == NULL ? 0 : -1;
}
