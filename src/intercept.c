/* intercept.c: a run's certificate authority, and the TLS interception that puts header secrets into the requests to their hosts. */
#include "spur.h"
#include "egress.h"
#include "intercept.h"
#include "store.h"	/* struct mcp_call_row */

#include <sys/stat.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/*
 * The model. The sandbox holds a placeholder; the value stays in this
 * process. For a CONNECT to a host a secret is bound to, the proxy is the
 * server the client talks TLS to (a certificate of the run's CA, which only
 * the run's sandbox trusts) and the client of the real upstream (verified
 * against the system's trust or egress.ca_file, with the real name). Between
 * the two it reads the request head, sets the secret's header and replaces
 * its placeholder, and asks for Connection: close, so that every request of
 * the client comes through a new CONNECT and a new head. The key of the CA
 * never leaves this process; OpenSSL clears it when it is freed.
 */

#define IC_CA_DAYS		30		/* a run is shorter; a clock skew is not */
#define IC_LEAVES_MAX		64		/* leaf certificates cached per run */
#define IC_LINGER_MS		20
#define IC_LINGER_MAX		250		/* times IC_LINGER_MS: 5 s to flush the last bytes */
#define IC_PLACEHOLDER_MAX	96		/* bytes; the stream watch keeps one less */
#define IC_HANDSHAKE_SECS	30
#define IC_IDLE_SECS		900
#define IC_MCP_MAX		16		/* remote connections of a run (CONNECTIONS_MAX) */
#define IC_MCP_BODY_MAX		(16 * 1024)	/* of a request body, read for its calls */
#define IC_MCP_ANSWER_MAX	4096		/* of an answer, read for its JSON-RPC error */
#define IC_MCP_CALLS_MAX	16		/* rows of one batch */
#define IC_MCP_NAME_MAX		128		/* a method's or tool's name kept */

struct ic_leaf {
	char	*host;
	X509	*cert;
};

/* A remote MCP connection of the run (SPEC 18): the requests to its URL are read for their calls. */
struct ic_mcp {
	char	*name;
	char	*host;
	int	 port;
	char	*path;
};

struct intercept {
	char			*run;
	struct ic_mcp		 mcp[IC_MCP_MAX];
	size_t			 nmcp;
	struct header_secret	*secrets;
	size_t			 nsecrets;
	EVP_PKEY		*ca_key;
	X509			*ca;
	EVP_PKEY		*leaf_key;	/* one key for every leaf of the run */
	struct ic_leaf		 leaves[IC_LEAVES_MAX];
	size_t			 nleaves;
	SSL_CTX			*server;	/* toward the sandbox */
	SSL_CTX			*client;	/* toward the real upstreams */
};

/*
 * Secrets.
 */

static int
ic_host_eq(const char *a, const char *b)
{
	size_t	la = strlen(a), lb = strlen(b);

	if (la > 0 && a[la - 1] == '.')
		la--;
	if (lb > 0 && b[lb - 1] == '.')
		lb--;
	return la == lb && strncasecmp(a, b, la) == 0;
}

static int
ic_secret_bound(const struct header_secret *s, const char *host)
{
	char	**h;

	for (h = s->hosts; h != NULL && *h != NULL; h++) {
		if (ic_host_eq(*h, host))
			return 1;
	}
	return 0;
}

int
intercept_bound(const struct intercept *ic, const char *host)
{
	size_t	i;

	if (ic == NULL || host == NULL)
		return 0;
	for (i = 0; i < ic->nsecrets; i++) {
		if (ic_secret_bound(&ic->secrets[i], host))
			return 1;
	}
	return 0;
}

const char *
intercept_foreign(const struct intercept *ic, const char *host, const void *data, size_t len)
{
	const struct header_secret	*s;
	size_t				 i;

	if (ic == NULL)
		return NULL;
	for (i = 0; i < ic->nsecrets; i++) {
		s = &ic->secrets[i];
		if (host != NULL && ic_secret_bound(s, host))
			continue;
		if (memmem(data, len, s->placeholder, strlen(s->placeholder)) != NULL)
			return s->name;
	}
	return NULL;
}

struct intercept_watch {
	const struct intercept	*ic;
	char			*host;
	char			 tail[IC_PLACEHOLDER_MAX];	/* the stream's last bytes */
	size_t			 ntail;
};

struct intercept_watch *
intercept_watch_new(const struct intercept *ic, const char *host)
{
	struct intercept_watch	*w = xcalloc(1, sizeof *w);

	w->ic = ic;
	w->host = xstrdup(host);
	return w;
}

const char *
intercept_watch_feed(void *arg, const void *data, size_t len)
{
	struct intercept_watch	*w = arg;
	char			 joint[2 * IC_PLACEHOLDER_MAX];
	const char		*name;
	size_t			 n, keep = IC_PLACEHOLDER_MAX - 1;

	/* One that straddles two reads: the last bytes of one and the first of the next. */
	n = len < keep ? len : keep;
	memcpy(joint, w->tail, w->ntail);
	memcpy(joint + w->ntail, data, n);
	if ((name = intercept_foreign(w->ic, w->host, joint, w->ntail + n)) != NULL ||
	    (name = intercept_foreign(w->ic, w->host, data, len)) != NULL)
		return name;
	if (len >= keep) {
		memcpy(w->tail, (const char *)data + len - keep, keep);
		w->ntail = keep;
	} else {
		n = w->ntail + len > keep ? w->ntail + len - keep : 0;	/* old bytes to drop */
		memmove(w->tail, w->tail + n, w->ntail - n);
		memcpy(w->tail + w->ntail - n, data, len);
		w->ntail = w->ntail - n + len;
	}
	return NULL;
}

void
intercept_watch_free(struct intercept_watch *w)
{
	if (w == NULL)
		return;
	free(w->host);
	free(w);
}

/* s with every from replaced by to. */
static char *
ic_replace(const char *s, const char *from, const char *to)
{
	struct buf	 b;
	const char	*p;
	size_t		 fl = strlen(from);
	char		*out;

	if (fl == 0 || strstr(s, from) == NULL)
		return xstrdup(s);
	buf_init(&b, 0);
	while ((p = strstr(s, from)) != NULL) {
		buf_add(&b, s, p - s);
		buf_add(&b, to, strlen(to));
		s = p + fl;
	}
	buf_adds(&b, s);
	out = buf_take(&b);
	buf_free(&b);
	return out;
}

static int
ic_field_ok(const char *s)
{
	const unsigned char	*p;

	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			return 0;
	}
	return 1;
}

/* The host part of a Host header ("h", "h:443", "[::1]:443"). */
static char *
ic_host_of(const char *v)
{
	const char	*end;

	if (*v == '[') {
		end = strchr(v, ']');
		return end != NULL ? xstrndup(v + 1, end - v - 1) : xstrdup(v);
	}
	end = strrchr(v, ':');
	return end != NULL ? xstrndup(v, end - v) : xstrdup(v);
}

char *
intercept_rewrite(const struct intercept *ic, const char *host, const char *text, size_t len,
    size_t *outlen, int *status, const char **why, char **applied)
{
	struct http_head		 h;
	const struct header_secret	*s;
	struct buf			 b, log;
	const char			*hn, *hv;
	char				*v, *w, *hh;
	size_t				 i, j;
	int				 skip;

	if (applied != NULL)
		*applied = NULL;
	if (intercept_foreign(ic, host, text, len) != NULL) {
		*status = 403;
		*why = "a secret's placeholder may only go to the secret's hosts";
		return NULL;
	}
	if (http_head_parse(text, len, &h) != 0 || h.target[0] != '/') {
		http_head_clear(&h);	/* a parsed head whose target is not origin-form */
		*status = 400;
		*why = "malformed request head (origin-form HTTP/1.x expected)";
		return NULL;
	}
	if ((hv = http_head_get(&h, "host")) != NULL) {
		hh = ic_host_of(hv);
		skip = !ic_host_eq(hh, host);
		free(hh);
		if (skip) {
			http_head_clear(&h);
			*status = 403;
			*why = "the Host header names another host than the CONNECT";
			return NULL;
		}
	}
	buf_init(&b, 0);
	buf_init(&log, 0);
	buf_addf(&b, "%s %s %s\r\n", h.method, h.target, h.version);
	for (i = 0; i < h.n; i++) {
		hn = h.name[i];
		if (strcasecmp(hn, "connection") == 0 || strcasecmp(hn, "keep-alive") == 0 ||
		    strncasecmp(hn, "proxy-", 6) == 0)
			continue;
		skip = 0;
		v = xstrdup(h.value[i]);
		for (j = 0; j < ic->nsecrets; j++) {
			s = &ic->secrets[j];
			if (!ic_secret_bound(s, host))
				continue;
			if (strcasecmp(hn, s->header_name != NULL ? s->header_name :
			    INTERCEPT_HEADER) == 0)
				skip = 1;	/* set below, from FORMAT */
			w = ic_replace(v, s->placeholder, s->value);
			free(v);
			v = w;
		}
		if (!skip)
			buf_addf(&b, "%s: %s\r\n", hn, v);
		explicit_bzero(v, strlen(v));
		free(v);
	}
	for (j = 0; j < ic->nsecrets; j++) {
		s = &ic->secrets[j];
		if (!ic_secret_bound(s, host))
			continue;
		v = ic_replace(s->format != NULL ? s->format : INTERCEPT_FORMAT, "{value}",
		    s->value);
		hn = s->header_name != NULL ? s->header_name : INTERCEPT_HEADER;
		buf_addf(&b, "%s: %s\r\n", hn, v);
		explicit_bzero(v, strlen(v));
		free(v);
		buf_addf(&log, "%s%s:%s", log.len > 0 ? "," : "", s->name, hn);
	}
	buf_addf(&b, "Connection: close\r\n\r\n");
	http_head_clear(&h);
	if (applied != NULL)
		*applied = buf_take(&log);
	buf_free(&log);
	*outlen = b.len;
	v = buf_take(&b);
	buf_free(&b);
	return v;
}

/*
 * The certificate authority and the leaves.
 */

static EVP_PKEY *
ic_ec_key(void)
{
	return EVP_EC_gen("P-256");
}

static int
ic_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX	 ctx;
	X509_EXTENSION	*ext;
	int		 rc;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		return -1;
	rc = X509_add_ext(cert, ext, -1) == 1 ? 0 : -1;
	X509_EXTENSION_free(ext);
	return rc;
}

static X509 *
ic_cert_new(const char *cn, EVP_PKEY *key, long before, long days)
{
	X509		*c;
	X509_NAME	*name;
	ASN1_INTEGER	*serial;
	BIGNUM		*bn;

	if ((c = X509_new()) == NULL)
		return NULL;
	X509_set_version(c, 2);
	bn = BN_new();
	BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
	serial = X509_get_serialNumber(c);
	BN_to_ASN1_INTEGER(bn, serial);
	BN_free(bn);
	X509_gmtime_adj(X509_getm_notBefore(c), before);
	X509_time_adj_ex(X509_getm_notAfter(c), (int)days, 0, NULL);
	name = X509_get_subject_name(c);
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"spur", -1,
	    -1, 0);
	if (cn != NULL)
		X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
		    -1, -1, 0);
	X509_set_pubkey(c, key);
	return c;
}

static int
ic_is_ip(const char *host)
{
	struct in6_addr	a6;
	struct in_addr	a4;

	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

/*
 * The CA may only sign for the run's bound hosts (name constraints): even its
 * certificate, trusted inside, vouches for nothing else.
 */
static char *
ic_constraints(const struct intercept *ic)
{
	struct buf	 b;
	size_t		 i;
	char		**h, *v;
	struct in6_addr	 a6;

	buf_init(&b, 0);
	buf_addf(&b, "critical");
	for (i = 0; i < ic->nsecrets; i++) {
		for (h = ic->secrets[i].hosts; h != NULL && *h != NULL; h++) {
			if (inet_pton(AF_INET6, *h, &a6) == 1)
				buf_addf(&b, ",permitted;IP:%s/ffff:ffff:ffff:ffff:ffff:ffff:"
				    "ffff:ffff", *h);
			else if (ic_is_ip(*h))
				buf_addf(&b, ",permitted;IP:%s/255.255.255.255", *h);
			else
				buf_addf(&b, ",permitted;DNS:%s", *h);
		}
	}
	v = buf_take(&b);
	buf_free(&b);
	return v;
}

static int
ic_make_ca(struct intercept *ic)
{
	char	*cn, *nc;
	int	 rc = -1;

	if ((ic->ca_key = ic_ec_key()) == NULL || (ic->leaf_key = ic_ec_key()) == NULL)
		return -1;
	cn = xprintf("spur run %s", ic->run);
	ic->ca = ic_cert_new(cn, ic->ca_key, -3600, IC_CA_DAYS);
	free(cn);
	if (ic->ca == NULL)
		return -1;
	X509_set_issuer_name(ic->ca, X509_get_subject_name(ic->ca));
	nc = ic_constraints(ic);
	if (ic_ext(ic->ca, ic->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
	    ic_ext(ic->ca, ic->ca, NID_key_usage, "critical,keyCertSign,cRLSign") == 0 &&
	    ic_ext(ic->ca, ic->ca, NID_subject_key_identifier, "hash") == 0 &&
	    ic_ext(ic->ca, ic->ca, NID_name_constraints, nc) == 0 &&
	    X509_sign(ic->ca, ic->ca_key, EVP_sha256()) > 0)
		rc = 0;
	free(nc);
	return rc;
}

/* The host's leaf, made on first use and kept for the run. */
static X509 *
ic_leaf(struct intercept *ic, const char *host)
{
	X509	*c;
	char	*san;
	size_t	 i;
	int	 ok;

	for (i = 0; i < ic->nleaves; i++) {
		if (strcasecmp(ic->leaves[i].host, host) == 0)
			return ic->leaves[i].cert;
	}
	/*
	 * An address gets no CN: a verifier reads a CN that looks like a name
	 * ("127.0.0.1" does) as a DNS name when the leaf has no DNS SAN, and when
	 * the run's hosts mix addresses and names the CA's DNS subtrees refuse it
	 * ("permitted subtree violation").
	 */
	if ((c = ic_cert_new(ic_is_ip(host) ? NULL : host, ic->leaf_key, -3600,
	    IC_CA_DAYS)) == NULL)
		return NULL;
	X509_set_issuer_name(c, X509_get_subject_name(ic->ca));
	san = xprintf("%s:%s", ic_is_ip(host) ? "IP" : "DNS", host);
	ok = ic_ext(c, ic->ca, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
	    ic_ext(c, ic->ca, NID_key_usage, "critical,digitalSignature") == 0 &&
	    ic_ext(c, ic->ca, NID_ext_key_usage, "serverAuth") == 0 &&
	    ic_ext(c, ic->ca, NID_subject_key_identifier, "hash") == 0 &&
	    ic_ext(c, ic->ca, NID_authority_key_identifier, "keyid:always") == 0 &&
	    ic_ext(c, ic->ca, NID_subject_alt_name, san) == 0 &&
	    X509_sign(c, ic->ca_key, EVP_sha256()) > 0;
	free(san);
	if (!ok) {
		X509_free(c);
		return NULL;
	}
	if (ic->nleaves == IC_LEAVES_MAX) {
		/* The oldest goes: hosts are few (those of the run's secrets). */
		free(ic->leaves[0].host);
		X509_free(ic->leaves[0].cert);
		memmove(&ic->leaves[0], &ic->leaves[1], (IC_LEAVES_MAX - 1) *
		    sizeof ic->leaves[0]);
		ic->nleaves--;
	}
	ic->leaves[ic->nleaves].host = xstrdup(host);
	ic->leaves[ic->nleaves].cert = c;
	ic->nleaves++;
	return c;
}

/* HTTP/1.1 only: a client offering h2 falls back. */
static int
ic_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int	i;

	for (i = 0; i < inlen; i += 1 + in[i]) {
		if (in[i] == 8 && i + 9 <= inlen && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	}
	return SSL_TLSEXT_ERR_NOACK;
}

char *
intercept_ca_pem(const struct intercept *ic)
{
	BIO	*bio = BIO_new(BIO_s_mem());
	char	*data, *out;
	long	 n;

	PEM_write_bio_X509(bio, ic->ca);
	n = BIO_get_mem_data(bio, &data);
	out = xstrndup(data, (size_t)n);
	BIO_free(bio);
	return out;
}

struct intercept *
intercept_create(const char *run, const struct header_secret *hs, size_t n,
    const char *ca_file, char **cause)
{
	struct intercept	*ic;
	size_t			 i, k;

	for (i = 0; i < n; i++) {
		if (hs[i].value == NULL || hs[i].placeholder == NULL ||
		    strlen(hs[i].placeholder) < 8 ||
		    strlen(hs[i].placeholder) > IC_PLACEHOLDER_MAX || !ic_field_ok(hs[i].value) ||
		    (hs[i].format != NULL && !ic_field_ok(hs[i].format))) {
			*cause = xprintf("secret %s cannot go in a header (empty, short "
			    "placeholder or a control character)", hs[i].name);
			return NULL;
		}
	}
	ic = xcalloc(1, sizeof *ic);
	ic->run = xstrdup(run);
	ic->secrets = xcalloc(n > 0 ? n : 1, sizeof *ic->secrets);
	for (i = 0; i < n; i++) {
		ic->secrets[i].name = xstrdup(hs[i].name);
		ic->secrets[i].value = xstrdup(hs[i].value);
		ic->secrets[i].placeholder = xstrdup(hs[i].placeholder);
		for (k = 0; hs[i].hosts != NULL && hs[i].hosts[k] != NULL; k++)
			;
		ic->secrets[i].hosts = xcalloc(k + 1, sizeof *ic->secrets[i].hosts);
		for (k = 0; hs[i].hosts != NULL && hs[i].hosts[k] != NULL; k++)
			ic->secrets[i].hosts[k] = xstrdup(hs[i].hosts[k]);
		if (hs[i].header_name != NULL)
			ic->secrets[i].header_name = xstrdup(hs[i].header_name);
		if (hs[i].format != NULL)
			ic->secrets[i].format = xstrdup(hs[i].format);
	}
	ic->nsecrets = n;
	if (ic_make_ca(ic) != 0) {
		*cause = xstrdup("cannot make the run's certificate authority");
		goto fail;
	}
	ic->server = SSL_CTX_new(TLS_server_method());
	ic->client = SSL_CTX_new(TLS_client_method());
	if (ic->server == NULL || ic->client == NULL) {
		*cause = xstrdup("cannot make a TLS context");
		goto fail;
	}
	SSL_CTX_set_min_proto_version(ic->server, TLS1_2_VERSION);
	SSL_CTX_set_min_proto_version(ic->client, TLS1_2_VERSION);
	SSL_CTX_set_alpn_select_cb(ic->server, ic_alpn_cb, NULL);
	SSL_CTX_set_alpn_protos(ic->client, (const unsigned char *)"\x08http/1.1", 9);
	SSL_CTX_set_verify(ic->client, SSL_VERIFY_PEER, NULL);
	if (ca_file != NULL ? SSL_CTX_load_verify_locations(ic->client, ca_file, NULL) != 1 :
	    SSL_CTX_set_default_verify_paths(ic->client) != 1) {
		*cause = xprintf("cannot load the upstreams' trust (%s)", ca_file != NULL ?
		    ca_file : "the system's");
		goto fail;
	}
	return ic;
fail:
	intercept_free(ic);
	return NULL;
}

void
intercept_add_mcp(struct intercept *ic, const char *name, const char *host, int port,
    const char *path)
{
	struct ic_mcp	*m;

	if (ic->nmcp == IC_MCP_MAX)
		return;
	m = &ic->mcp[ic->nmcp++];
	m->name = xstrdup(name);
	m->host = xstrdup(host);
	m->port = port;
	m->path = xstrdup(path);
}

void
intercept_free(struct intercept *ic)
{
	size_t	i, k;

	if (ic == NULL)
		return;
	for (i = 0; i < ic->nsecrets; i++) {
		free(ic->secrets[i].name);
		explicit_bzero(ic->secrets[i].value, strlen(ic->secrets[i].value));
		free(ic->secrets[i].value);
		free(ic->secrets[i].placeholder);
		for (k = 0; ic->secrets[i].hosts[k] != NULL; k++)
			free(ic->secrets[i].hosts[k]);
		free(ic->secrets[i].hosts);
		free(ic->secrets[i].header_name);
		free(ic->secrets[i].format);
	}
	free(ic->secrets);
	for (i = 0; i < ic->nmcp; i++) {
		free(ic->mcp[i].name);
		free(ic->mcp[i].host);
		free(ic->mcp[i].path);
	}
	for (i = 0; i < ic->nleaves; i++) {
		free(ic->leaves[i].host);
		X509_free(ic->leaves[i].cert);
	}
	/* EVP_PKEY_free clears the private key's memory. */
	EVP_PKEY_free(ic->ca_key);
	EVP_PKEY_free(ic->leaf_key);
	X509_free(ic->ca);
	SSL_CTX_free(ic->server);
	SSL_CTX_free(ic->client);
	free(ic->run);
	free(ic);
}

static int
ic_write_all(int fd, const char *p, size_t n)
{
	ssize_t	w;

	while (n > 0) {
		if ((w = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
ic_write_file(const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
	int	 fd;
	int	 rc = 0;

	(void)unlink(path);
	if ((fd = open(path, O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC|O_NOFOLLOW, 0644)) == -1)
		return -1;
	/* The sandbox user reads it, whatever the engine's umask. */
	if (fchmod(fd, 0644) != 0)
		rc = -1;
	if (ic_write_all(fd, a, alen) != 0 || ic_write_all(fd, b, blen) != 0)
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

int
intercept_write_ca(const struct intercept *ic, const char *dir, char **cause)
{
	const char	*sys = getenv(X509_get_default_cert_file_env());
	char		*pem = intercept_ca_pem(ic), *path, *bundle = NULL, *why;
	size_t		 blen = 0;
	int		 rc = -1;

	if (sys == NULL)
		sys = X509_get_default_cert_file();
	/* No system bundle: the run's CA alone, which is all intercepted hosts need. */
	if (read_file(sys, 16 * 1024 * 1024, &bundle, &blen, &why) != 0) {
		free(why);
		bundle = xstrdup("");
		blen = 0;
	}
	path = path_join(dir, "ca.pem");
	if (ic_write_file(path, pem, strlen(pem), "", 0) != 0) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		goto out;
	}
	free(path);
	path = path_join(dir, "ca-bundle.pem");
	if (ic_write_file(path, bundle, blen, pem, strlen(pem)) != 0) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(path);
	free(bundle);
	free(pem);
	return rc;
}

/*
 * One intercepted connection.
 */

enum ic_state {
	IC_UPSTREAM,		/* TLS to the real host */
	IC_REQUEST,		/* reading the client's request head */
	IC_RESPONSE,		/* the head went up; reading the response's head */
	IC_RELAY,		/* the rest, both ways */
	IC_CLOSING,		/* an answer of ours, or the end, being flushed */
	IC_DONE
};

struct intercept_conn {
	struct intercept	*ic;
	enum ic_state		 state;
	struct bufferevent	*cli;		/* the socket, then TLS over it */
	struct bufferevent	*up;		/* TLS over the upstream socket */
	struct relay		*relay;
	struct intercept_watch	*watch;		/* the body: no other host's placeholder */
	char			*host;
	int			 port;
	uint64_t		 in, out;	/* before the relay */
	const char		*verdict;
	struct event		*linger;
	int			 lingered;
	void			(*done)(struct intercept_conn *, const char *, uint64_t,
				    uint64_t, void *);
	void			*arg;
	/* A POST to a remote MCP connection's URL: its calls, read as they pass. */
	const char		*mcp;		/* the connection's name; NULL: none */
	int64_t			 at;
	struct buf		 body;		/* its first IC_MCP_BODY_MAX bytes */
	size_t			 body_len;	/* its Content-Length */
	int			 status;	/* the answer's; 0: none yet */
	int			 has_error;
	long			 error_code;
	json_t			*parsed;	/* the body, the rows' names point into it */
	struct mcp_call_row	 calls[IC_MCP_CALLS_MAX];
	size_t			 ncalls;
};

static const char *
ic_state_name(enum ic_state st)
{
	static const char *const names[] = { "upstream", "request", "response", "relay",
	    "closing", "done" };

	return names[st];
}

/* States only go forward (an answer of ours may come from any of the first four). */
static void
ic_set_state(struct intercept_conn *c, enum ic_state st, const char *reason)
{
	if (st <= c->state)
		fatal("intercept: %s to %s", ic_state_name(c->state), ic_state_name(st));
	log_debug("event=egress.intercept_state run=%s host=%s from=%s to=%s reason=%s",
	    c->ic->run, log_q(c->host), ic_state_name(c->state), ic_state_name(st),
	    log_q(reason));
	c->state = st;
}

static void	ic_cli_read_cb(struct bufferevent *, void *);
static void	ic_up_read_cb(struct bufferevent *, void *);
static void	ic_event_cb(struct bufferevent *, short, void *);

static void
ic_finish(struct intercept_conn *c)
{
	uint64_t	in = c->in, out = c->out;

	if (c->state == IC_DONE)
		return;
	ic_set_state(c, IC_DONE, c->verdict != NULL ? c->verdict : "closed");
	/* The relay's side a is the client: a to b is what the run sent. */
	if (c->relay != NULL) {
		out += relay_bytes(c->relay, 1);
		in += relay_bytes(c->relay, 0);
	}
	c->done(c, c->verdict, in, out, c->arg);
}

/* Whether what is written to the client has left through its socket. */
static int
ic_flushed(struct bufferevent *bev)
{
	struct bufferevent	*under = bufferevent_get_underlying(bev);

	return evbuffer_get_length(bufferevent_get_output(bev)) == 0 &&
	    (under == NULL || evbuffer_get_length(bufferevent_get_output(under)) == 0);
}

/* TLS over a socket: its output is written after ours; wait for it (bounded), then end. */
static void
ic_linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct intercept_conn	*c = arg;
	struct timeval		 tv = { 0, IC_LINGER_MS * 1000 };
	struct bufferevent	*under;

	if (c->cli != NULL && !ic_flushed(c->cli) && c->lingered++ < IC_LINGER_MAX) {
		if ((under = bufferevent_get_underlying(c->cli)) != NULL)
			bufferevent_enable(under, EV_WRITE);
		evtimer_add(c->linger, &tv);
		return;
	}
	ic_finish(c);
}

static void
ic_close(struct intercept_conn *c)
{
	struct timeval	 tv = { 0, 0 };

	if (c->state == IC_CLOSING || c->state == IC_DONE)
		return;
	ic_set_state(c, IC_CLOSING, c->verdict != NULL ? c->verdict : "closed");
	if (c->linger == NULL)
		c->linger = evtimer_new(bufferevent_get_base(c->cli), ic_linger_cb, c);
	if (c->up != NULL && c->relay == NULL)
		bufferevent_disable(c->up, EV_READ);
	bufferevent_disable(c->cli, EV_READ);
	bufferevent_enable(c->cli, EV_WRITE);
	evtimer_add(c->linger, &tv);
}

/* Our own answer to the client (over TLS once it is up), then the end. */
static void
ic_answer(struct intercept_conn *c, int status, const char *why, const char *verdict)
{
	c->verdict = verdict;
	proxy_answer(bufferevent_get_output(c->cli), status, why, verdict);
	ic_close(c);
}

/* Another host's placeholder in the body: the request is cut (its answer may have begun). */
static void
ic_body_refused(struct intercept_conn *c, const char *name)
{
	log_warn("event=egress.placeholder_refused run=%s host=%s secret=%s where=body",
	    c->ic->run, log_q(c->host), name);
	c->verdict = "refused";
	c->lingered = IC_LINGER_MAX;
	ic_close(c);
}

static void
ic_relay_done(struct relay *r, void *arg)
{
	struct intercept_conn	*c = arg;

	if (relay_cut(r) != NULL) {
		ic_body_refused(c, relay_cut(r));
		return;
	}
	ic_close(c);
}

/*
 * The calls to a remote MCP connection (SPEC 18): the JSON-RPC messages of a
 * POST to its URL, read from the body's first IC_MCP_BODY_MAX bytes as they
 * pass (a longer body, or one that is not JSON, is one row without a method),
 * and the answer's status, with its JSON-RPC error when the answer came with
 * its head. Names and statuses only: a call's text is never kept.
 */

/* A POST to a connection's URL: its body is kept (bounded) from here on. */
static void
ic_mcp_begin(struct intercept_conn *c, const char *text, size_t len)
{
	const struct ic_mcp	*m;
	struct http_head	 h;
	const char		*cl;
	char			*end;
	size_t			 i, plen;

	if (c->ic->nmcp == 0 || http_head_parse(text, len, &h) != 0)
		return;
	plen = strcspn(h.target, "?");
	for (i = 0; i < c->ic->nmcp && strcmp(h.method, "POST") == 0; i++) {
		m = &c->ic->mcp[i];
		if (m->port == c->port && ic_host_eq(m->host, c->host) &&
		    strlen(m->path) == plen && strncmp(m->path, h.target, plen) == 0) {
			c->mcp = m->name;
			break;
		}
	}
	if (c->mcp != NULL) {
		c->at = now_ms();
		if ((cl = http_head_get(&h, "content-length")) != NULL)
			c->body_len = strtoull(cl, &end, 10);
		buf_init(&c->body, IC_MCP_BODY_MAX);
	}
	http_head_clear(&h);
}

static void
ic_mcp_body(struct intercept_conn *c, const void *data, size_t len)
{
	if (c->mcp != NULL && c->body.len < IC_MCP_BODY_MAX)
		buf_add(&c->body, data, len < IC_MCP_BODY_MAX - c->body.len ? len :
		    IC_MCP_BODY_MAX - c->body.len);
}

/* A header's value in an answer's head (NUL-terminated), to its line's end. */
static const char *
ic_field(const char *head, const char *name)
{
	const char	*p;
	size_t		 n = strlen(name);

	for (p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':')
			return p + 3 + n + strspn(p + 3 + n, " \t");
	}
	return NULL;
}

/* The answer's status, and its JSON-RPC error when what came with the head holds it. */
static void
ic_mcp_answer(struct intercept_conn *c, const char *head, struct evbuffer *in)
{
	const char	*ct, *data, *p, *end;
	size_t		 have = evbuffer_get_length(in);
	json_t		*j = NULL, *e;

	if (c->mcp == NULL)
		return;
	if (have > IC_MCP_ANSWER_MAX)
		have = IC_MCP_ANSWER_MAX;
	c->status = atoi(head + 9);
	if ((ct = ic_field(head, "content-type")) == NULL || have == 0)
		return;
	data = (const char *)evbuffer_pullup(in, have);
	if (strncasecmp(ct, "application/json", 16) == 0)
		j = json_loadb(data, have, 0, NULL);
	else if (strncasecmp(ct, "text/event-stream", 17) == 0 &&
	    (p = memmem(data, have, "data:", 5)) != NULL &&
	    (end = memchr(p, '\n', have - (p - data))) != NULL)
		j = json_loadb(p + 5, end - p - 5, 0, NULL);	/* the first event */
	if (json_is_object(e = json_object_get(j, "error")) &&
	    json_is_integer(json_object_get(e, "code"))) {
		c->has_error = 1;
		c->error_code = (long)json_integer_value(json_object_get(e, "code"));
	}
	json_decref(j);
}

/* A message of the body: a row when it is a request or a notification. */
static void
ic_mcp_row(struct intercept_conn *c, const json_t *m, int single)
{
	struct mcp_call_row	*r;
	const char		*method = json_string_value(json_object_get(m, "method"));
	json_t			*p = json_object_get(m, "params");

	if (c->ncalls == IC_MCP_CALLS_MAX || (method == NULL && json_is_object(m)))
		return;
	r = &c->calls[c->ncalls++];
	r->at = c->at;
	r->connection = c->mcp;
	r->method = method;
	r->tool = method != NULL && strcmp(method, "tools/call") == 0 ?
	    json_string_value(json_object_get(p, "name")) : NULL;
	r->status = c->status;
	r->has_error = single && c->has_error;
	r->error_code = c->error_code;
}

const struct mcp_call_row *
intercept_conn_calls(struct intercept_conn *c, size_t *n)
{
	json_t	*m;
	size_t	 i;

	if (c->mcp != NULL && c->parsed == NULL) {
		if (c->body_len <= IC_MCP_BODY_MAX)
			c->parsed = json_loadb(c->body.data != NULL ? c->body.data : "",
			    c->body.len, 0, NULL);
		if (c->parsed == NULL)
			c->parsed = json_null();	/* not read: one row, no method */
		if (json_is_array(c->parsed)) {
			json_array_foreach(c->parsed, i, m)
				ic_mcp_row(c, m, 0);
		} else
			ic_mcp_row(c, c->parsed, 1);
	}
	*n = c->ncalls;
	return c->calls;
}

static void
ic_cli_read_cb(struct bufferevent *bev, void *arg)
{
	struct intercept_conn	*c = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	char			*text, *head, *applied;
	const char		*why, *name;
	size_t			 len, outlen;
	int			 status, rc;

	if (c->state == IC_RESPONSE) {
		/* A body, while the answer's head is awaited (a read may bring none: TLS's own records). */
		if (evbuffer_get_length(in) == 0)
			return;
		if ((name = intercept_watch_feed(c->watch, evbuffer_pullup(in, -1),
		    evbuffer_get_length(in))) != NULL) {
			evbuffer_drain(in, evbuffer_get_length(in));
			ic_body_refused(c, name);
			return;
		}
		c->out += evbuffer_get_length(in);
		ic_mcp_body(c, evbuffer_pullup(in, -1), evbuffer_get_length(in));
		evbuffer_add_buffer(bufferevent_get_output(c->up), in);
		return;
	}
	if (c->state != IC_REQUEST)
		return;
	if ((rc = http_head_take(in, &text, &len)) <= 0) {
		if (rc < 0)
			ic_answer(c, 400, "request head too large", "bad-request");
		return;
	}
	head = intercept_rewrite(c->ic, c->host, text, len, &outlen, &status, &why, &applied);
	if (head == NULL) {
		if (status == 403 && (name = intercept_foreign(c->ic, c->host, text, len)) !=
		    NULL)
			log_warn("event=egress.placeholder_refused run=%s host=%s secret=%s "
			    "where=https", c->ic->run, log_q(c->host), name);
		free(text);
		ic_answer(c, status, why, status == 403 ? "refused" : "bad-request");
		return;
	}
	ic_mcp_begin(c, text, len);
	free(text);
	log_info("event=egress.intercept run=%s host=%s port=%d headers=%s", c->ic->run,
	    log_q(c->host), c->port, log_q(applied));
	free(applied);
	c->out += outlen;
	evbuffer_add(bufferevent_get_output(c->up), head, outlen);
	explicit_bzero(head, outlen);
	free(head);
	ic_set_state(c, IC_RESPONSE, "request head sent");
	bufferevent_enable(c->up, EV_READ);
	if (evbuffer_get_length(in) > 0)
		ic_cli_read_cb(bev, c);
}

/* The answer's head: one request per connection, so the client opens a new one for the next. */
static void
ic_up_read_cb(struct bufferevent *bev, void *arg)
{
	struct intercept_conn	*c = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer		*to = bufferevent_get_output(c->cli);
	struct evbuffer_ptr	 end;
	char			*text, *line, *next;
	size_t			 len;
	int			 info;

	if (c->state != IC_RESPONSE)
		return;
	for (;;) {
		end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (end.pos == -1) {
			if (evbuffer_get_length(in) > HTTP_HEAD_MAX)
				ic_answer(c, 502, "the upstream's answer head is too large",
				    "failed");
			return;
		}
		len = (size_t)end.pos + 4;
		text = xmalloc(len + 1);
		evbuffer_remove(in, text, len);
		text[len] = '\0';
		c->in += len;
		/* 1xx (100 Continue) heads go as they are; the final one is closed. */
		info = strncmp(text, "HTTP/1.", 7) == 0 && text[8] == ' ' && text[9] == '1';
		if (info) {
			evbuffer_add(to, text, len);
			free(text);
			continue;
		}
		text[len - 4] = '\0';
		ic_mcp_answer(c, text, in);
		for (line = text; line != NULL; line = next) {
			if ((next = strstr(line, "\r\n")) != NULL) {
				*next = '\0';
				next += 2;
			}
			if (line != text && (strncasecmp(line, "connection:", 11) == 0 ||
			    strncasecmp(line, "keep-alive:", 11) == 0))
				continue;
			evbuffer_add_printf(to, "%s\r\n", line);
		}
		evbuffer_add_printf(to, "Connection: close\r\n\r\n");
		free(text);
		break;
	}
	ic_set_state(c, IC_RELAY, "answer head sent");
	c->relay = relay_start_watched(c->cli, c->up, ic_relay_done, c, intercept_watch_feed,
	    c->watch);
}

static void
ic_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct intercept_conn	*c = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	if (c->state == IC_CLOSING || c->state == IC_DONE)
		return;
	if (bev == c->up && c->state == IC_RESPONSE) {
		ic_answer(c, 502, "the upstream closed without an answer", "failed");
		return;
	}
	/* The client left, or its TLS failed (it does not trust the CA): nothing to flush. */
	if (c->verdict == NULL)
		c->verdict = "closed";
	c->lingered = IC_LINGER_MAX;
	ic_close(c);
}

/* The upstream's TLS is up (verified) or failed. */
static void
ic_up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct intercept_conn	*c = arg;
	SSL			*ssl, *cs;
	X509			*leaf;
	struct bufferevent	*tls;
	struct timeval		 tv = { IC_HANDSHAKE_SECS, 0 };
	long			 vr;
	char			*why;

	if (what & BEV_EVENT_CONNECTED) {
		/* Answer the CONNECT, then be the server the client asked for. */
		evbuffer_add_printf(bufferevent_get_output(c->cli),
		    "HTTP/1.1 200 Connection established\r\n\r\n");
		if ((leaf = ic_leaf(c->ic, c->host)) == NULL || (cs = SSL_new(c->ic->server)) ==
		    NULL) {
			c->verdict = "failed";
			ic_close(c);
			return;
		}
		SSL_use_certificate(cs, leaf);
		SSL_use_PrivateKey(cs, c->ic->leaf_key);
		tls = bufferevent_openssl_filter_new(bufferevent_get_base(c->cli), c->cli, cs,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
		if (tls == NULL) {
			SSL_free(cs);
			c->verdict = "failed";
			ic_close(c);
			return;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
		c->cli = tls;
		ic_set_state(c, IC_REQUEST, "upstream verified");
		c->verdict = "intercepted";
		bufferevent_setcb(c->cli, ic_cli_read_cb, NULL, ic_event_cb, c);
		bufferevent_setcb(c->up, ic_up_read_cb, NULL, ic_event_cb, c);
		bufferevent_setwatermark(c->cli, EV_READ, 0, HTTP_HEAD_MAX + 8);
		bufferevent_set_timeouts(c->cli, &tv, NULL);
		/* An API may think long before its answer's head: as long as a tunnel may idle. */
		tv.tv_sec = IC_IDLE_SECS;
		bufferevent_set_timeouts(c->up, &tv, &tv);
		bufferevent_enable(c->cli, EV_READ | EV_WRITE);
		bufferevent_disable(c->up, EV_READ);
		return;
	}
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	ssl = bufferevent_openssl_get_ssl(bev);
	vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (vr != X509_V_OK)
		why = xprintf("the upstream's certificate is not trusted for %s (%s)", c->host,
		    X509_verify_cert_error_string(vr));
	else
		why = xprintf("no TLS with the upstream %s", c->host);
	log_warn("event=egress.upstream_tls_failed run=%s host=%s port=%d reason=%s",
	    c->ic->run, log_q(c->host), c->port, log_q(why));
	/* Still the plain CONNECT: answered in clear. */
	bufferevent_free(c->up);
	c->up = NULL;
	ic_answer(c, 502, why, "refused");
	free(why);
}

struct intercept_conn *
intercept_conn_start(struct intercept *ic, struct bufferevent *cli, struct bufferevent *up,
    const char *host, int port, void (*done)(struct intercept_conn *, const char *, uint64_t,
    uint64_t, void *), void *arg)
{
	struct intercept_conn	*c = xcalloc(1, sizeof *c);
	struct timeval		 tv = { IC_HANDSHAKE_SECS, 0 };
	SSL			*ssl;

	c->ic = ic;
	c->cli = cli;
	c->host = xstrdup(host);
	c->watch = intercept_watch_new(ic, host);
	c->port = port;
	c->done = done;
	c->arg = arg;
	c->state = IC_UPSTREAM;		/* the first state, not a transition */
	bufferevent_setcb(cli, NULL, NULL, ic_event_cb, c);
	bufferevent_disable(cli, EV_READ);
	bufferevent_set_timeouts(cli, NULL, NULL);
	ssl = SSL_new(ic->client);
	if (ic_is_ip(host))
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	else {
		SSL_set_tlsext_host_name(ssl, host);
		SSL_set1_host(ssl, host);
	}
	c->up = bufferevent_openssl_filter_new(bufferevent_get_base(up), up, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		SSL_free(ssl);
		bufferevent_free(up);
		ic_answer(c, 502, "no TLS with the upstream", "failed");
		return c;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(c->up, 1);
	bufferevent_setcb(c->up, NULL, NULL, ic_up_event_cb, c);
	bufferevent_set_timeouts(c->up, &tv, &tv);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	return c;
}

void
intercept_conn_free(struct intercept_conn *c)
{
	if (c == NULL)
		return;
	if (c->relay != NULL)
		relay_free(c->relay);
	else {
		if (c->cli != NULL)
			bufferevent_free(c->cli);
		if (c->up != NULL)
			bufferevent_free(c->up);
	}
	if (c->linger != NULL)
		event_free(c->linger);
	intercept_watch_free(c->watch);
	if (c->mcp != NULL)
		buf_free(&c->body);
	json_decref(c->parsed);
	free(c->host);
	free(c);
}
