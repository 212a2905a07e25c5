/* github-app.c: the token spur uses for an org's GitHub API and git: configured, or a GitHub App's. */
#include "spur.h"
#include "conf.h"
#include "github-app.h"
#include "httpc.h"
#include "serve.h"

#include <sys/queue.h>
#include <event2/event.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GITHUB_JWT_BACKDATE	60	/* clocks drift: iat a minute in the past */
#define GITHUB_JWT_LIFE		540	/* exp within GitHub's 10 minutes */
#define GITHUB_TOKEN_MARGIN	300	/* a cached token is renewed this long before it expires */
#define GITHUB_CACHE_MAX	256

/* One cached installation token. */
struct github_cached {
	char				*org;
	char				*repo;		/* the repository it was looked up for */
	long long			 installation;
	char				*token;
	int64_t				 expires;	/* seconds since the epoch */
	LIST_ENTRY(github_cached)	 entry;
};
static LIST_HEAD(, github_cached) github_cache = LIST_HEAD_INITIALIZER(github_cache);
static int github_ncache;

/*
 * An installation lookup and token exchange in flight, shared by every request
 * for the same installation (or repository): a run's clone and its eyes
 * reaction ask at once, and must not each exchange.
 */
struct github_flight {
	struct engine			*e;
	char				*org;
	char				*repo;
	long long			 installation;
	char				*jwt;
	struct http_call		*call;
	LIST_HEAD(, github_req)		 waiters;
	LIST_ENTRY(github_flight)	 entry;
};
static LIST_HEAD(, github_flight) github_flights = LIST_HEAD_INITIALIZER(github_flights);

struct github_req {
	struct engine		*e;
	char			*org;
	char			*repo;
	long long		 installation;
	github_token_cb		 cb;
	void			*arg;
	struct event		*ev;		/* a callback deferred to the loop */
	struct github_flight	*flight;	/* waiting for it */
	LIST_ENTRY(github_req)	 wentry;
	char			*token;		/* for the deferred callback */
	char			*cause;
	int			 permanent;	/* the cause is the config's: retrying cannot help */
};

static void
github_cached_free(struct github_cached *c)
{
	LIST_REMOVE(c, entry);
	github_ncache--;
	free(c->org);
	free(c->repo);
	freezero_str(c->token);
	free(c);
}

void
github_app_cleanup(void)
{
	while (!LIST_EMPTY(&github_cache))
		github_cached_free(LIST_FIRST(&github_cache));
}

/* An encrypted key must never make OpenSSL ask a terminal for its passphrase. */
static int
github_no_passphrase_cb(char *buf, int size, int rwflag, void *arg)
{
	return -1;
}

/* OpenSSL's reason for the last failure, its queue emptied. */
static const char *
github_ssl_reason(void)
{
	unsigned long	 e = ERR_peek_last_error();
	const char	*r = e != 0 ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r != NULL ? r : "unknown error";
}

/*
 * The App's private key, or NULL and why: what the text is instead (a public
 * key, an encrypted key, a truncated file), never the text.
 */
static EVP_PKEY *
github_key_read(const char *pem, size_t len, char **why)
{
	BIO		*bio;
	EVP_PKEY	*key = NULL;
	char		*name = NULL, *header = NULL;
	unsigned char	*data = NULL;
	long		 dlen = 0;
	const char	*kind = NULL;

	if (len > INT_MAX || (bio = BIO_new_mem_buf(pem, (int)len)) == NULL)
		fatal("BIO_new_mem_buf");
	/* The block's label and headers first: they say what the file is. */
	if (PEM_read_bio(bio, &name, &header, &data, &dlen) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_NO_START_LINE)
			xasprintf(why, "is not a PEM key (no -----BEGIN "
			    "line)");
		else
			xasprintf(why, "is truncated or damaged (%s)",
			    github_ssl_reason());
		goto out;
	}
	if (strcmp(name, "ENCRYPTED PRIVATE KEY") == 0 || strstr(header, "ENCRYPTED") != NULL) {
		xasprintf(why, "is encrypted (-----BEGIN %s-----) and spur "
		    "has no passphrase: give it the key as GitHub generated it, or decrypt it "
		    "with openssl pkey", name);
		goto out;
	}
	if (strstr(name, "PUBLIC KEY") != NULL)
		kind = "a public key";
	else if (strcmp(name, "CERTIFICATE") == 0)
		kind = "a certificate";
	else if (strstr(name, "PRIVATE KEY") == NULL)
		kind = "something else";
	if (kind != NULL) {
		xasprintf(why, "is %s (-----BEGIN %s-----), not the "
		    "App's RSA private key", kind, name);
		goto out;
	}
	(void)BIO_reset(bio);
	ERR_clear_error();
	if ((key = PEM_read_bio_PrivateKey(bio, NULL, github_no_passphrase_cb, NULL)) ==
	    NULL) {
		xasprintf(why, "holds a -----BEGIN %s----- block that is not a valid "
		    "key (%s): truncated, or in another form than its label says", name,
		    github_ssl_reason());
		goto out;
	}
	if (EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
		xasprintf(why, "is not an RSA key (it is %s): GitHub "
		    "Apps sign with RS256", EVP_PKEY_get0_type_name(key) != NULL ?
		    EVP_PKEY_get0_type_name(key) : "another type");
		EVP_PKEY_free(key);
		key = NULL;
	}
out:
	ERR_clear_error();
	BIO_free(bio);
	OPENSSL_free(name);
	OPENSSL_free(header);
	OPENSSL_free(data);
	return key;
}

/* github_jwt with why a phrase about the key ("is a public key ..."). */
static char *
github_jwt_why(const char *pem, size_t len, long long app_id, int64_t now_s, char **why)
{
	EVP_PKEY	*key;
	EVP_MD_CTX	*ctx = NULL;
	unsigned char	*sig = NULL;
	size_t		 siglen = 0;
	char		*head, *claims, *input = NULL, *s64, *jwt = NULL, *payload;

	if ((key = github_key_read(pem, len, why)) == NULL)
		return NULL;
	head = base64url_encode((const unsigned char *)"{\"alg\":\"RS256\",\"typ\":\"JWT\"}", 27);
	payload = xprintf("{\"iat\":%lld,\"exp\":%lld,\"iss\":\"%lld\"}",
	    (long long)(now_s - GITHUB_JWT_BACKDATE), (long long)(now_s + GITHUB_JWT_LIFE),
	    app_id);
	claims = base64url_encode((const unsigned char *)payload, strlen(payload));
	free(payload);
	input = xprintf("%s.%s", head, claims);
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(ctx, NULL, &siglen, (unsigned char *)input, strlen(input)) != 1) {
		xasprintf(why, "cannot sign the GitHub App JWT (%s)",
		    github_ssl_reason());
		goto out;
	}
	sig = xmalloc(siglen);
	if (EVP_DigestSign(ctx, sig, &siglen, (unsigned char *)input, strlen(input)) != 1) {
		xasprintf(why, "cannot sign the GitHub App JWT (%s)",
		    github_ssl_reason());
		goto out;
	}
	s64 = base64url_encode(sig, siglen);
	jwt = xprintf("%s.%s", input, s64);
	free(s64);
out:
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(key);
	free(sig);
	free(head);
	free(claims);
	free(input);
	return jwt;
}

char *
github_jwt(const char *pem, size_t len, long long app_id, int64_t now_s, char **cause)
{
	char	*jwt, *why = NULL;

	if ((jwt = github_jwt_why(pem, len, app_id, now_s, &why)) == NULL) {
		xasprintf(cause, "github.private_key %s", why);
		free(why);
	}
	return jwt;
}

int
github_key_check(const char *pem, size_t len, char **why)
{
	char	*jwt;

	if ((jwt = github_jwt_why(pem, len, 1, 0, why)) == NULL)
		return -1;
	freezero_str(jwt);
	return 0;
}

static void
github_flight_free(struct github_flight *f)
{
	LIST_REMOVE(f, entry);
	if (f->call != NULL)
		httpc_cancel(f->call);
	free(f->org);
	free(f->repo);
	freezero_str(f->jwt);
	free(f);
}

static void
github_req_free(struct github_req *r)
{
	if (r->ev != NULL)
		event_free(r->ev);
	if (r->flight != NULL) {
		/* The last one waiting takes the exchange with it. */
		LIST_REMOVE(r, wentry);
		if (LIST_EMPTY(&r->flight->waiters))
			github_flight_free(r->flight);
	}
	free(r->org);
	free(r->repo);
	freezero_str(r->token);
	free(r->cause);
	free(r);
}

void
github_req_cancel(struct github_req *r)
{
	if (r != NULL)
		github_req_free(r);
}

static void
github_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct github_req	*r = arg;

	r->cb(r->token, r->token == NULL ? (r->cause != NULL ? r->cause : "no token") : NULL,
	    r->permanent, r->arg);
	github_req_free(r);
}

/* Ends the request from the loop: token (copied) or cause. */
static void
github_finish(struct github_req *r, const char *token, char *cause)
{
	struct timeval	 tv = { 0, 0 };

	r->token = token != NULL ? xstrdup(token) : NULL;
	r->cause = cause;
	if (r->ev == NULL)
		r->ev = evtimer_new(r->e->base, github_deferred_cb, r);
	evtimer_add(r->ev, &tv);
}

static struct github_cached *
github_cache_find(const char *org, const char *repo, long long installation)
{
	struct github_cached	*c, *next;
	int64_t			 now = now_ms() / 1000;

	for (c = LIST_FIRST(&github_cache); c != NULL; c = next) {
		next = LIST_NEXT(c, entry);
		if (c->expires - GITHUB_TOKEN_MARGIN <= now) {
			github_cached_free(c);
			continue;
		}
		if (strcmp(c->org, org) != 0)
			continue;
		if (installation != 0 ? c->installation == installation :
		    (repo != NULL && c->repo != NULL && strcmp(c->repo, repo) == 0))
			return c;
	}
	return NULL;
}

static void
github_cache_add(const char *org, const char *repo, long long installation, const char *token,
    int64_t expires)
{
	struct github_cached	*c;

	if (github_ncache >= GITHUB_CACHE_MAX)
		github_cached_free(LIST_FIRST(&github_cache));
	c = xcalloc(1, sizeof *c);
	c->org = xstrdup(org);
	c->repo = repo != NULL ? xstrdup(repo) : NULL;
	c->installation = installation;
	c->token = xstrdup(token);
	c->expires = expires;
	LIST_INSERT_HEAD(&github_cache, c, entry);
	github_ncache++;
}

/* Ends the request with what no retry can change (the config's key, no token at all). */
static void
github_fail(struct github_req *r, char *cause)
{
	r->permanent = 1;
	github_finish(r, NULL, cause);
}

/* Ends a flight: every request waiting for it gets the token or the cause. */
static void
github_flight_end(struct github_flight *f, const char *token, char *cause)
{
	struct github_req	*r;

	f->call = NULL;
	while ((r = LIST_FIRST(&f->waiters)) != NULL) {
		LIST_REMOVE(r, wentry);
		r->flight = NULL;
		github_finish(r, token, cause != NULL ? xstrdup(cause) : NULL);
	}
	free(cause);
	github_flight_free(f);
}

static struct github_flight *
github_flight_find(const char *org, const char *repo, long long installation)
{
	struct github_flight	*f;

	LIST_FOREACH(f, &github_flights, entry) {
		if (strcmp(f->org, org) != 0)
			continue;
		if (installation != 0 ? f->installation == installation :
		    (repo != NULL && f->repo != NULL && strcmp(f->repo, repo) == 0))
			return f;
	}
	return NULL;
}

static void	github_exchange(struct github_flight *);

static const char *const *
github_headers(struct github_flight *r, char **auth)
{
	static const char	*h[5];

	*auth = xprintf("Authorization: Bearer %s", r->jwt);
	h[0] = *auth;
	h[1] = "Accept: application/vnd.github+json";
	h[2] = "X-GitHub-Api-Version: 2022-11-28";
	h[3] = NULL;
	return h;
}

static char *
github_api(struct github_flight *r, const char *path)
{
	char	*base = config_api_url(config_org(r->e->conf, r->org), "github"), *url;

	url = xprintf("%s%s", base, path);
	free(base);
	return url;
}

static void
github_token_done_cb(const struct http_response *res, void *arg)
{
	struct github_flight	*r = arg;
	json_t			*j;
	const char		*tok, *exp;
	struct tm		 tm;
	int64_t			 expires;

	r->call = NULL;
	j = json_loadb(res->body, res->len, 0, NULL);
	tok = json_string_value(json_object_get(j, "token"));
	exp = json_string_value(json_object_get(j, "expires_at"));
	if (res->status != 201 || tok == NULL) {
		github_flight_end(r, NULL, xprintf("GitHub App token exchange failed: %s%d",
		    res->status == 0 ? "no answer " : "HTTP ", res->status));
		json_decref(j);
		return;
	}
	memset(&tm, 0, sizeof tm);
	/* Without a readable expiry, assume GitHub's hour. */
	expires = exp != NULL && strptime(exp, "%Y-%m-%dT%H:%M:%SZ", &tm) != NULL ?
	    (int64_t)timegm(&tm) : now_ms() / 1000 + 3600;
	github_cache_add(r->org, r->repo, r->installation, tok, expires);
	log_info("event=github.app_token org=%s installation=%lld expires_in=%lld", r->org,
	    r->installation, (long long)(expires - now_ms() / 1000));
	github_flight_end(r, tok, NULL);
	json_decref(j);
}

static void
github_exchange(struct github_flight *r)
{
	struct http_request	 req;
	char			*auth, *path, *url;

	path = xprintf("/app/installations/%lld/access_tokens", r->installation);
	url = github_api(r, path);
	memset(&req, 0, sizeof req);
	req.method = "POST";
	req.url = url;
	req.headers = github_headers(r, &auth);
	req.body = "";
	req.body_len = 0;
	r->call = httpc_request(r->e->http, &req, github_token_done_cb, r);
	freezero_str(auth);
	free(path);
	free(url);
}

static void
github_installation_cb(const struct http_response *res, void *arg)
{
	struct github_flight	*r = arg;
	struct github_cached	*c;
	json_t			*j;
	char			*tok;

	r->call = NULL;
	j = json_loadb(res->body, res->len, 0, NULL);
	r->installation = json_integer_value(json_object_get(j, "id"));
	json_decref(j);
	if (res->status != 200 || r->installation <= 0) {
		github_flight_end(r, NULL, xprintf("the GitHub App is not installed on %s "
		    "(HTTP %d)", r->repo, res->status));
		return;
	}
	/* The installation's token may be cached already: it serves this repository too. */
	if ((c = github_cache_find(r->org, NULL, r->installation)) != NULL) {
		tok = xstrdup(c->token);	/* adding may evict c */
		github_cache_add(r->org, r->repo, r->installation, tok, c->expires);
		github_flight_end(r, tok, NULL);
		freezero_str(tok);
		return;
	}
	github_exchange(r);
}

struct github_req *
github_token(struct engine *e, const char *orgname, const char *repo, long long installation,
    github_token_cb cb, void *arg)
{
	struct github_req	*r = xcalloc(1, sizeof *r);
	struct org		*org = orgname != NULL ? config_org(e->conf, orgname) : NULL;
	struct github_cached	*c;
	struct github_flight	*f;
	struct http_request	 req;
	char			*cause = NULL, *auth, *path, *url, *jwt;

	r->e = e;
	r->cb = cb;
	r->arg = arg;
	r->org = xstrdup(orgname != NULL ? orgname : "");
	r->repo = repo != NULL ? xstrdup(repo) : NULL;
	r->installation = installation;
	if (org == NULL || org->github == NULL) {
		github_fail(r, xprintf("github is not configured for org %s", r->org));
		return r;
	}
	if (org->github->token != NULL) {
		github_finish(r, org->github->token->value, NULL);
		return r;
	}
	if (org->github->app_id == 0 || org->github->private_key == NULL) {
		github_fail(r, xprintf("org %s has no github token or app", r->org));
		return r;
	}
	if ((c = github_cache_find(r->org, repo, installation)) != NULL) {
		github_finish(r, c->token, NULL);
		return r;
	}
	if ((f = github_flight_find(r->org, repo, installation)) != NULL) {
		r->flight = f;
		LIST_INSERT_HEAD(&f->waiters, r, wentry);
		return r;
	}
	if (installation == 0 && repo == NULL) {
		github_fail(r, xstrdup("no repository to find the App's installation"));
		return r;
	}
	jwt = github_jwt(org->github->private_key->value, org->github->private_key->len,
	    org->github->app_id, now_ms() / 1000, &cause);
	if (jwt == NULL) {
		github_fail(r, cause);
		return r;
	}
	f = xcalloc(1, sizeof *f);
	f->e = e;
	f->org = xstrdup(r->org);
	f->repo = repo != NULL ? xstrdup(repo) : NULL;
	f->installation = installation;
	f->jwt = jwt;
	LIST_INIT(&f->waiters);
	LIST_INSERT_HEAD(&github_flights, f, entry);
	r->flight = f;
	LIST_INSERT_HEAD(&f->waiters, r, wentry);
	if (installation != 0) {
		github_exchange(f);
		return r;
	}
	/* owner/repo: the repository's installation; an owner alone: the org's. */
	path = xprintf(strchr(repo, '/') != NULL ? "/repos/%s/installation" :
	    "/orgs/%s/installation", repo);
	url = github_api(f, path);
	memset(&req, 0, sizeof req);
	req.method = "GET";
	req.url = url;
	req.headers = github_headers(f, &auth);
	f->call = httpc_request(e->http, &req, github_installation_cb, f);
	freezero_str(auth);
	free(path);
	free(url);
	return r;
}
