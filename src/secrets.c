/* secrets.c: sealed secrets (SPEC section 15): AES-256-GCM under secrets.key in the store, opened for runs. */
#include "spur.h"
#include "conf.h"
#include "secrets.h"
#include "serve.h"
#include "store.h"
#include "ytree.h"

#include <sys/stat.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

/*
 * Each value is sealed on its own: a fresh random 96-bit nonce, AES-256-GCM,
 * and as associated data the org, the name, the hosts and the header line, so
 * that a row moved to another org or name, or turned from a header secret
 * into an env one (or bound to another host), does not open. The store holds
 * the nonce and the ciphertext with its tag, never a value; the key lives in
 * the operator's file or variable (secrets.key), never in data_dir.
 */

#define SECRETS_AAD_TAG		"spur sealed secret v1"
#define SECRETS_SCRUB_MAX	256
#define SECRETS_KEY_FILE_MAX	4096

/* A value of len bytes (and its NUL) wiped, then freed. */
static void
secrets_wipe(char *v, size_t len)
{
	if (v == NULL)
		return;
	explicit_bzero(v, len + 1);
	free(v);
}

int
secrets_key_parse(const char *text, size_t len, unsigned char key[SECRETS_KEY_LEN],
    char **cause)
{
	size_t	 i;

	if (len != 2 * SECRETS_KEY_LEN) {
		*cause = xprintf("must be %d hex digits (%d random bytes: openssl rand -hex %d), "
		    "not %zu characters", 2 * SECRETS_KEY_LEN, SECRETS_KEY_LEN,
		    SECRETS_KEY_LEN, len);
		return -1;
	}
	for (i = 0; i < len; i++) {
		if (hex_value(text[i]) < 0) {
			*cause = xprintf("must be %d hex digits, character %zu is not one",
			    2 * SECRETS_KEY_LEN, i + 1);
			return -1;
		}
	}
	if (hex_decode(text, len, key, SECRETS_KEY_LEN) != 0) {
		*cause = xstrdup("is not hex");
		return -1;
	}
	return 0;
}

char *
secrets_aad(const char *org, const char *name, const char *hosts, const char *header,
    size_t *len)
{
	const char	*parts[] = { SECRETS_AAD_TAG, org, name, hosts != NULL ? hosts : "",
	    header != NULL ? header : "" };
	size_t		 i, n = 0, l;
	char		*aad;

	for (i = 0; i < SPUR_ARRLEN(parts); i++)
		n += strlen(parts[i]) + 1;
	aad = xmalloc(n);
	for (i = 0, n = 0; i < SPUR_ARRLEN(parts); i++) {
		l = strlen(parts[i]);
		memcpy(aad + n, parts[i], l + 1);	/* each ends with its NUL */
		n += l + 1;
	}
	*len = n;
	return aad;
}

int
secrets_seal(const unsigned char key[SECRETS_KEY_LEN], const char *aad, size_t aadlen,
    const char *value, size_t len, unsigned char nonce[SECRETS_NONCE_LEN],
    unsigned char **sealed, size_t *sealedlen)
{
	EVP_CIPHER_CTX	*ctx;
	unsigned char	*out;
	int		 n, fin, rc = -1;

	if (len > SECRETS_VALUE_MAX)
		return -1;
	random_bytes(nonce, SECRETS_NONCE_LEN);
	out = xmalloc(len + SECRETS_TAG_LEN + 1);
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL)
		fatal("EVP_CIPHER_CTX_new failed");
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRETS_NONCE_LEN, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
	    EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)aadlen) != 1 ||
	    EVP_EncryptUpdate(ctx, out, &n, (const unsigned char *)value, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(ctx, out + n, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SECRETS_TAG_LEN,
	    out + n + fin) != 1) {
		free(out);
		goto out;
	}
	*sealed = out;
	*sealedlen = (size_t)(n + fin) + SECRETS_TAG_LEN;
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	return rc;
}

int
secrets_open(const unsigned char key[SECRETS_KEY_LEN], const char *aad, size_t aadlen,
    const unsigned char *nonce, size_t noncelen, const unsigned char *sealed,
    size_t sealedlen, char **value, size_t *len)
{
	EVP_CIPHER_CTX	*ctx;
	unsigned char	*out, tag[SECRETS_TAG_LEN];
	size_t		 clen;
	int		 n = 0, fin = 0, rc = -1;

	if (noncelen != SECRETS_NONCE_LEN || sealedlen < SECRETS_TAG_LEN ||
	    sealedlen - SECRETS_TAG_LEN > SECRETS_VALUE_MAX)
		return -1;
	clen = sealedlen - SECRETS_TAG_LEN;
	memcpy(tag, sealed + clen, SECRETS_TAG_LEN);
	out = xmalloc(clen + 1);
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL)
		fatal("EVP_CIPHER_CTX_new failed");
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRETS_NONCE_LEN, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) != 1 ||
	    EVP_DecryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)aadlen) != 1 ||
	    EVP_DecryptUpdate(ctx, out, &n, sealed, (int)clen) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SECRETS_TAG_LEN, tag) != 1 ||
	    EVP_DecryptFinal_ex(ctx, out + n, &fin) != 1) {
		explicit_bzero(out, clen + 1);
		free(out);
		goto out;
	}
	out[n + fin] = '\0';
	/* A value with a NUL in it was never sealed by spur. */
	if (strlen((char *)out) != (size_t)(n + fin)) {
		explicit_bzero(out, clen + 1);
		free(out);
		goto out;
	}
	*value = (char *)out;
	*len = (size_t)(n + fin);
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	return rc;
}

int
secrets_header_valid(const char *h, char **cause)
{
	const char	*colon = strchr(h, ':'), *p;

	if (colon == NULL || colon == h) {
		*cause = xstrdup("must be \"Name: FORMAT\"");
		return -1;
	}
	for (p = h; p < colon; p++) {
		if (!isalnum((unsigned char)*p) && strchr("!#$%&'*+-.^_`|~", *p) == NULL) {
			*cause = xstrdup("the header name is not an HTTP token");
			return -1;
		}
	}
	for (p = colon + 1; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 && *p != '\t') {
			*cause = xstrdup("no control characters or line breaks");
			return -1;
		}
	}
	if (strstr(colon + 1, "{value}") == NULL) {
		*cause = xstrdup("FORMAT must write {value}");
		return -1;
	}
	return 0;
}

int
secrets_key_from_ref(const char *dir, const char *ref, unsigned char key[SECRETS_KEY_LEN],
    char **cause)
{
	char		*data = NULL, *path, *why = NULL;
	const char	*v;
	size_t		 len = 0;
	int		 rc;

	if (strncmp(ref, "env:", 4) == 0 && ref[4] != '\0') {
		if ((v = getenv(ref + 4)) == NULL || *v == '\0') {
			*cause = xprintf("%s: environment variable %s is not set", ref, ref + 4);
			return -1;
		}
		rc = secrets_key_parse(v, strlen(v), key, &why);
	} else if ((strncmp(ref, "file:", 5) == 0 && ref[5] != '\0') ||
	    (strncmp(ref, "credential:", 11) == 0 && ref[11] != '\0')) {
		if (ref[0] == 'f')
			path = path_join(dir, ref + 5);
		else if ((path = credential_path(ref + 11, cause)) == NULL)
			return -1;
		if (read_file(path, SECRETS_KEY_FILE_MAX, &data, &len, &why) != 0) {
			*cause = xprintf("%s: %s", ref, why);
			free(why);
			free(path);
			return -1;
		}
		free(path);
		if (len > 0 && data[len - 1] == '\n')
			len--;
		if (len > 0 && data[len - 1] == '\r')
			len--;
		rc = secrets_key_parse(data, len, key, &why);
		explicit_bzero(data, len);
		free(data);
	} else {
		*cause = xprintf("%s: must be a reference, env:NAME, file:PATH or credential:NAME",
		    ref);
		return -1;
	}
	if (rc != 0) {
		*cause = xprintf("%s: %s", ref, why);
		free(why);
	}
	return rc;
}

int
secrets_key_get(const struct config *cf, unsigned char key[SECRETS_KEY_LEN], char **cause)
{
	const struct secret	*s = cf->secrets_key;
	char			*why = NULL, *tmp;
	int			 rc;

	if (s == NULL) {
		*cause = xprintf("secrets.key is not set in %s", cf->file);
		return -1;
	}
	if (s->value != NULL) {
		if ((rc = secrets_key_parse(s->value, s->len, key, &tmp)) != 0) {
			why = xprintf("%s: %s", s->ref, tmp);
			free(tmp);
		}
	} else
		rc = secrets_key_from_ref(cf->dir, s->ref, key, &why);
	if (rc != 0)
		*cause = xprintf("secrets.key (%s)", why);
	free(why);
	return rc;
}

/* Opens one row; cause names the key and the secret when it does not open. */
int
secrets_row_open(const struct config *cf, const unsigned char key[SECRETS_KEY_LEN],
    const struct store_secret *r, char **value, size_t *len, char **cause)
{
	char	*aad;
	size_t	 aadlen;
	int	 rc;

	aad = secrets_aad(r->org, r->name, r->hosts, r->header, &aadlen);
	rc = secrets_open(key, aad, aadlen, r->nonce, r->noncelen, r->sealed, r->sealedlen,
	    value, len);
	free(aad);
	if (rc != 0)
		*cause = xprintf("sealed secret %s of org %s does not open with secrets.key "
		    "(%s): a wrong key, or a row moved or edited (GCM tag mismatch)", r->name,
		    r->org, cf->secrets_key != NULL ? cf->secrets_key->ref : "not set");
	return rc;
}

/* An environment variable's name: what a sealed secret is called. */
int
secrets_name_valid(const char *s)
{
	size_t	 i;

	if (s == NULL || *s == '\0' || strlen(s) > 128 || isdigit((unsigned char)*s))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return 0;
	}
	return 1;
}

/* A host a header secret is bound to: a DNS name or address. */
static int
secrets_host_valid(const char *s)
{
	size_t	 n = strlen(s);

	return n > 0 && n <= 255 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") == n && s[0] != '.' && s[0] != '-';
}

/*
 * HOST:PORT ("[v6]:PORT" too; a bare IPv6 address has two colons or more).
 * The proxy compares the host alone, so a port would never match and the
 * header would silently never be added: refused instead.
 */
static int
secrets_host_has_port(const char *s)
{
	const char	*c = strchr(s, ':');

	if (s[0] == '[')
		return strchr(s, ']') != NULL && strchr(s, ']')[1] != '\0';
	return c != NULL && strchr(c + 1, ':') == NULL;
}

struct secrets_first {
	const struct config	*cf;
	const unsigned char	*key;
	char			*cause;
	int			 rows;
};

static int
secrets_first_cb(struct store_secret *r, void *arg)
{
	struct secrets_first	*f = arg;
	char			*v;
	size_t			 len;

	f->rows++;
	if (secrets_row_open(f->cf, f->key, r, &v, &len, &f->cause) != 0)
		return 1;
	secrets_wipe(v, len);
	return 1;
}

int
secrets_put(const struct config *cf, struct store *st, const char *org, const char *name,
    const char *value, size_t len, char *const *hosts, const char *header, char **cause)
{
	struct secrets_first	 f;
	struct store_secret	 r;
	unsigned char		 key[SECRETS_KEY_LEN];
	const struct org	*o;
	json_t			*hl = NULL;
	char			*aad = NULL, *why = NULL;
	size_t			 i, aadlen;
	int			 rc = -1;

	memset(&r, 0, sizeof r);
	if ((o = config_org(cf, org)) == NULL) {
		*cause = xprintf("org: no org %s in the config", org);
		return -1;
	}
	if (!secrets_name_valid(name)) {
		*cause = xprintf("name: %s is not an environment variable name ([A-Za-z_]"
		    "[A-Za-z0-9_]*)", name);
		return -1;
	}
	if (org_secret(o, name) != NULL) {
		*cause = xprintf("name: %s is already in orgs.%s.secrets: one name, one "
		    "secret", name, org);
		return -1;
	}
	if (len == 0 || len > SECRETS_VALUE_MAX || strlen(value) != len) {
		*cause = xprintf("value: must be 1..%d bytes of text", SECRETS_VALUE_MAX);
		return -1;
	}
	if (header != NULL && (hosts == NULL || hosts[0] == NULL)) {
		*cause = xstrdup("header: needs at least one host");
		return -1;
	}
	if (header != NULL && secrets_header_valid(header, &why) != 0) {
		*cause = xprintf("header: %s", why);
		free(why);
		return -1;
	}
	if (hosts != NULL && hosts[0] != NULL) {
		hl = json_array();
		for (i = 0; hosts[i] != NULL; i++) {
			if (i < SECRETS_HOSTS_MAX && secrets_host_valid(hosts[i]) &&
			    secrets_host_has_port(hosts[i])) {
				*cause = xprintf("hosts[%zu]: %s has a port: the header is added by "
				    "host alone (give the host without :PORT)", i, hosts[i]);
				json_decref(hl);
				return -1;
			}
			if (i == SECRETS_HOSTS_MAX || !secrets_host_valid(hosts[i])) {
				*cause = i == SECRETS_HOSTS_MAX ? xprintf("hosts: at most %d",
				    SECRETS_HOSTS_MAX) : xprintf("hosts[%zu]: not a host name", i);
				json_decref(hl);
				return -1;
			}
			json_array_append_new(hl, json_string(hosts[i]));
		}
		r.hosts = json_dumps(hl, JSON_COMPACT);
		json_decref(hl);
		r.header = xstrdup(header != NULL ? header : SECRETS_HEADER_DEFAULT);
	}
	if (secrets_key_get(cf, key, cause) != 0)
		goto out;
	/* A key that does not open what is already sealed would split the store in two. */
	memset(&f, 0, sizeof f);
	f.cf = cf;
	f.key = key;
	if (store_secrets_each(st, NULL, secrets_first_cb, &f) < 0 || f.cause != NULL) {
		*cause = f.cause != NULL ? f.cause : xstrdup("the store cannot be read");
		goto out;
	}
	r.org = xstrdup(org);
	r.name = xstrdup(name);
	r.kind = xstrdup(r.hosts != NULL ? "header" : "env");
	r.nonce = xmalloc(SECRETS_NONCE_LEN);
	r.noncelen = SECRETS_NONCE_LEN;
	aad = secrets_aad(org, name, r.hosts, r.header, &aadlen);
	if (secrets_seal(key, aad, aadlen, value, len, r.nonce, &r.sealed, &r.sealedlen) != 0) {
		*cause = xstrdup("the value cannot be sealed");
		goto out;
	}
	r.updated_at = now_ms();
	if (store_secret_put(st, &r) != 0) {
		*cause = xstrdup("the store cannot keep it");
		rc = -2;
		goto out;
	}
	log_info("event=secret.set org=%s name=%s kind=%s", log_q(org), log_q(name), r.kind);
	rc = 0;
out:
	explicit_bzero(key, sizeof key);
	free(aad);
	store_secret_clear(&r);
	return rc;
}

/* Values unsealed for runs since the config was loaded: the scrubber cuts them too. */
static struct secret	*secrets_scrub[SECRETS_SCRUB_MAX];
static size_t		 secrets_nscrub;

static void
secrets_scrub_add(const char *value, size_t len)
{
	struct secret	*s;
	size_t		 i;

	for (i = 0; i < secrets_nscrub; i++) {
		if (secrets_scrub[i]->len == len && memcmp(secrets_scrub[i]->value, value,
		    len) == 0)
			return;
	}
	if (secrets_nscrub == SECRETS_SCRUB_MAX) {
		/* The oldest goes: it was most likely replaced or reloaded into the config. */
		secret_free(secrets_scrub[0]);
		memmove(secrets_scrub, secrets_scrub + 1, (SECRETS_SCRUB_MAX - 1) *
		    sizeof *secrets_scrub);
		secrets_nscrub--;
	}
	s = xcalloc(1, sizeof *s);
	s->ref = xstrdup("sealed");
	s->value = xmalloc(len + 1);
	memcpy(s->value, value, len);
	s->value[len] = '\0';
	s->len = len;
	secrets_scrub[secrets_nscrub++] = s;
}

size_t
secrets_scrub_extra(const struct secret **out, size_t max)
{
	size_t	 i;

	for (i = 0; i < secrets_nscrub && i < max; i++)
		out[i] = secrets_scrub[i];
	return i;
}

/* The row of org/name of that kind (NULL: any) unsealed: 0, 1 when there is none, -1 and cause. */
static int
secrets_unseal(struct engine *e, const char *org, const char *name, const char *kind,
    struct store_secret *r, char **value, size_t *len, char **cause)
{
	unsigned char	 key[SECRETS_KEY_LEN];
	int		 rc;

	if ((rc = store_secret_get(e->store, org, name, r)) != 0) {
		if (rc < 0)
			*cause = xprintf("sealed secret %s: the store cannot be read", name);
		return rc;
	}
	if (kind != NULL && strcmp(r->kind, kind) != 0) {
		store_secret_clear(r);
		return 1;
	}
	if (secrets_key_get(e->conf, key, cause) != 0) {
		store_secret_clear(r);
		return -1;
	}
	rc = secrets_row_open(e->conf, key, r, value, len, cause);
	explicit_bzero(key, sizeof key);
	if (rc != 0) {
		log_error("event=secret.open_failed org=%s name=%s error=%s", log_q(org),
		    log_q(name), log_q(*cause));
		store_secret_clear(r);
		return -1;
	}
	secrets_scrub_add(*value, *len);
	return 0;
}

int
secrets_env_value(struct engine *e, const char *org, const char *name, char **value,
    size_t *len, char **cause)
{
	struct store_secret	 r;
	int			 rc;

	if ((rc = secrets_unseal(e, org, name, "env", &r, value, len, cause)) != 0)
		return rc;
	store_secret_clear(&r);
	return 0;
}

char **
secrets_row_hosts(const struct store_secret *r)
{
	json_t	*hosts;
	char	**out;
	size_t	 i;
	json_t	*v;

	if (strcmp(r->kind, "header") != 0)
		return NULL;
	hosts = json_loads(r->hosts != NULL ? r->hosts : "[]", 0, NULL);
	out = xcalloc(json_array_size(hosts) + 1, sizeof *out);
	json_array_foreach(hosts, i, v)
		out[i] = xstrdup(json_is_string(v) ? json_string_value(v) : "");
	json_decref(hosts);
	return out;
}

int
secrets_value(struct engine *e, const char *org, const char *name, const char *host,
    char **value, size_t *len, char **cause)
{
	const struct org	*o = config_org(e->conf, org);
	const struct secret	*s;
	struct store_secret	 r;
	char			**hosts;
	size_t			 i;
	int			 rc;

	if (o != NULL && (s = org_secret(o, name)) != NULL && s->value != NULL) {
		*value = xmalloc(s->len + 1);
		memcpy(*value, s->value, s->len);
		(*value)[s->len] = '\0';
		*len = s->len;
		return 0;
	}
	if ((rc = secrets_unseal(e, org, name, NULL, &r, value, len, cause)) != 0)
		return rc;
	/* A header secret goes to its own hosts only. */
	hosts = secrets_row_hosts(&r);
	for (i = 0, rc = hosts != NULL ? -1 : 0; hosts != NULL && hosts[i] != NULL; i++) {
		if (strcasecmp(hosts[i], host) == 0)
			rc = 0;
	}
	strv_free(hosts);
	if (rc != 0) {
		*cause = xprintf("secret %s is a header secret bound to other hosts than %s", name,
		    host);
		explicit_bzero(*value, *len);
		free(*value);
		*value = NULL;
	}
	store_secret_clear(&r);
	return rc;
}

void
header_secrets_free(struct header_secret *hs, size_t n)
{
	size_t	 i, j;

	for (i = 0; i < n; i++) {
		free(hs[i].name);
		freezero_str(hs[i].value);
		free(hs[i].placeholder);
		for (j = 0; hs[i].hosts != NULL && hs[i].hosts[j] != NULL; j++)
			free(hs[i].hosts[j]);
		free(hs[i].hosts);
		free(hs[i].header_name);
		free(hs[i].format);
	}
	free(hs);
}

char *
secrets_placeholder(void)
{
	unsigned char	 rnd[16];
	char		 hex[33];

	random_bytes(rnd, sizeof rnd);
	hex_encode(rnd, sizeof rnd, hex);
	return xprintf("%s%s", SECRETS_PLACEHOLDER, hex);
}

/* One header secret of a run from its row and value (taken). */
static void
secrets_header_make(struct header_secret *h, const struct store_secret *r, char *value)
{
	const char	*colon;

	h->name = xstrdup(r->name);
	h->value = value;
	h->placeholder = secrets_placeholder();
	h->hosts = secrets_row_hosts(r);
	colon = strchr(r->header != NULL ? r->header : SECRETS_HEADER_DEFAULT, ':');
	h->header_name = xstrndup(r->header != NULL ? r->header : SECRETS_HEADER_DEFAULT,
	    (size_t)(colon - (r->header != NULL ? r->header : SECRETS_HEADER_DEFAULT)));
	colon++;
	while (*colon == ' ' || *colon == '\t')
		colon++;
	h->format = xstrdup(colon);
}

int
secrets_for_run(struct engine *e, const char *org, char *const *names,
    struct header_secret **out, size_t *n, char **cause)
{
	struct store_secret	 r;
	const struct org	*o = config_org(e->conf, org);
	char			*value;
	size_t			 i, len;
	int			 rc;

	*out = NULL;
	*n = 0;
	for (i = 0; names != NULL && names[i] != NULL; i++) {
		/* A configured name is the config's (spur check refuses one in both). */
		if (o != NULL && org_secret(o, names[i]) != NULL)
			continue;
		if ((rc = secrets_unseal(e, org, names[i], "header", &r, &value, &len,
		    cause)) < 0) {
			header_secrets_free(*out, *n);
			*out = NULL;
			*n = 0;
			return -1;
		}
		if (rc == 1)
			continue;
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		memset(&(*out)[*n], 0, sizeof **out);
		secrets_header_make(&(*out)[(*n)++], &r, value);
		store_secret_clear(&r);
	}
	return 0;
}

struct secrets_attach_ctx {
	struct config		*cf;
	struct yerrs		*errs;
	int			 unseal;
	int			 keyok;
	unsigned char		 key[SECRETS_KEY_LEN];
};

static int
secrets_attach_cb(struct store_secret *r, void *arg)
{
	struct secrets_attach_ctx	*a = arg;
	struct org			*o = config_org(a->cf, r->org);
	struct named_secret		*ns;
	char				*cause = NULL, *value = NULL;
	size_t				 len = 0, i;
	json_t				*hosts = NULL, *v;

	if (o == NULL)
		return 0;	/* an org no longer configured: its secrets wait unused */
	if (org_secret(o, r->name) != NULL) {
		yerrs_add(a->errs, a->cf->file, 1, 1, "orgs.%s.secrets.%s is also a sealed "
		    "secret in the store: one name, one secret (spur secrets rm --org %s %s, "
		    "or remove it from the config)", r->org, r->name, r->org, r->name);
		return 0;
	}
	if (a->unseal) {
		if (a->keyok == 0 && secrets_key_get(a->cf, a->key, &cause) != 0) {
			yerrs_add(a->errs, a->cf->file, 1, 1, "%s, and the store holds sealed "
			    "secrets (%s of org %s)", cause, r->name, r->org);
			free(cause);
			return 1;
		}
		a->keyok = 1;
		/* A wrong key fails on the first value: one error says it. */
		if (secrets_row_open(a->cf, a->key, r, &value, &len, &cause) != 0) {
			yerrs_add(a->errs, a->cf->file, 1, 1, "%s", cause);
			free(cause);
			return 1;
		}
	}
	o->sealed = xreallocarray(o->sealed, o->nsealed + 1, sizeof *o->sealed);
	o->sealed_hosts = xreallocarray(o->sealed_hosts, o->nsealed + 1,
	    sizeof *o->sealed_hosts);
	o->sealed_hosts[o->nsealed] = NULL;
	if (r->hosts != NULL && (hosts = json_loads(r->hosts, 0, NULL)) != NULL &&
	    json_array_size(hosts) > 0) {
		o->sealed_hosts[o->nsealed] = xcalloc(json_array_size(hosts) + 1,
		    sizeof **o->sealed_hosts);
		json_array_foreach(hosts, i, v)
			o->sealed_hosts[o->nsealed][i] = xstrdup(json_string_value(v) != NULL ?
			    json_string_value(v) : "");
	}
	json_decref(hosts);
	ns = &o->sealed[o->nsealed++];
	ns->name = xstrdup(r->name);
	ns->secret = xcalloc(1, sizeof *ns->secret);
	ns->secret->ref = xstrdup("sealed");
	ns->secret->value = value;
	ns->secret->len = len;
	return 0;
}

int
secrets_attach(struct config *cf, int unseal, struct yerrs *errs)
{
	struct secrets_attach_ctx	 a;
	struct store			*st;
	struct stat			 sb;
	char				*path, *cause = NULL;
	size_t				 before = errs->nerrors;

	if (cf->store_url != NULL)
		return 0;	/* not in data_dir: serve opens that store and says what it has */
	path = path_join(cf->data_dir, "spur.db");
	if (stat(path, &sb) != 0) {
		free(path);
		return 0;	/* no store yet: nothing sealed */
	}
	free(path);
	if ((st = store_open(cf->data_dir, 1, &cause)) == NULL) {
		/* Not the config's fault: the engine's own open of the store says why. */
		free(cause);
		return 0;
	}
	memset(&a, 0, sizeof a);
	a.cf = cf;
	a.errs = errs;
	a.unseal = unseal;
	if (store_secrets_each(st, NULL, secrets_attach_cb, &a) < 0 && errs->nerrors == before)
		yerrs_add(errs, cf->file, 1, 1, "data_dir: the store's secrets cannot be read");
	explicit_bzero(a.key, sizeof a.key);
	store_close(st);
	return errs->nerrors == before ? 0 : -1;
}
