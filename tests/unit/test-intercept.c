/* test-intercept.c: header secrets: the run's CA, the request heads the proxy rewrites for a secret's host, and the placeholders it refuses elsewhere. */
#include "spur.h"
#include "egress.h"
#include "intercept.h"
#include "tap.h"

#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define PH_API	"spur-secret-0123456789abcdef0123456789abcdef"
#define PH_KEY	"spur-secret-fedcba9876543210fedcba9876543210"

static char	*api_hosts[] = { "api.example.com", "10.1.2.3", NULL };
static char	*key_hosts[] = { "registry.example.org", NULL };

static struct header_secret secrets[] = {
	{ "API_TOKEN", "tok-VALUE-1", PH_API, api_hosts, NULL, NULL },
	{ "REG_KEY", "key-VALUE-2", PH_KEY, key_hosts, "X-Api-Key", "key={value}" },
};

static X509 *
ca_of(const struct intercept *ic)
{
	char	*pem = intercept_ca_pem(ic);
	BIO	*bio = BIO_new_mem_buf(pem, -1);
	X509	*x = PEM_read_bio_X509(bio, NULL, NULL, NULL);

	BIO_free(bio);
	free(pem);
	return x;
}

/* The head as it goes up, or "<status>" when it is refused. */
static char *
rewrite(struct intercept *ic, const char *host, const char *head)
{
	const char	*why;
	char		*out, *r;
	size_t		 len;
	int		 status;

	if ((out = intercept_rewrite(ic, host, head, strlen(head), &len, &status, &why,
	    NULL)) == NULL)
		return xprintf("<%d>", status);
	r = xstrndup(out, len);
	free(out);
	return r;
}

static void
test_ca(void)
{
	struct intercept	*a, *b;
	X509			*ca, *cb;
	EVP_PKEY		*k;
	BASIC_CONSTRAINTS	*bc;
	char			*cause = NULL, dir[] = "/tmp/spur-test-intercept-XXXXXX", *p, *data;
	size_t			 len;
	struct stat		 st;

	a = intercept_create("run-a", secrets, 2, NULL, &cause);
	b = intercept_create("run-b", secrets, 2, NULL, &cause);
	ok(a != NULL && b != NULL, "a run's CA is made (%s)", cause != NULL ? cause : "ok");
	if (a == NULL || b == NULL)
		return;
	ca = ca_of(a);
	cb = ca_of(b);
	bc = X509_get_ext_d2i(ca, NID_basic_constraints, NULL, NULL);
	ok(bc != NULL && bc->ca, "its certificate is a CA");
	BASIC_CONSTRAINTS_free(bc);
	k = X509_get0_pubkey(ca);
	ok(EVP_PKEY_is_a(k, "EC") && EVP_PKEY_get_bits(k) == 256, "its key is EC P-256");
	ok(X509_get_ext_by_NID(ca, NID_name_constraints, -1) >= 0,
	    "it is constrained to the secrets' hosts");
	ok(X509_verify(ca, X509_get0_pubkey(ca)) == 1, "it is self-signed");
	ok(X509_cmp(ca, cb) != 0 && X509_verify(ca, X509_get0_pubkey(cb)) != 1,
	    "another run's CA is another key: it vouches for nothing of this run");
	X509_free(ca);
	X509_free(cb);

	ok(mkdtemp(dir) != NULL, "a directory");
	ok(intercept_write_ca(a, dir, &cause) == 0, "the CA is written beside the sockets");
	p = path_join(dir, "ca-bundle.pem");
	ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "the bundle is readable by the sandbox");
	ok(read_file(p, 64 << 20, &data, &len, &cause) == 0 && strstr(data, "PRIVATE") == NULL &&
	    strstr(data, "BEGIN CERTIFICATE") != NULL, "it holds certificates and no key");
	free(data);
	(void)unlink(p);
	free(p);
	p = path_join(dir, "ca.pem");
	(void)unlink(p);
	free(p);
	(void)rmdir(dir);
	intercept_free(a);
	intercept_free(b);
}

static void
test_rewrite(struct intercept *ic)
{
	char	*s;

	s = rewrite(ic, "api.example.com", "GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: keep-alive\r\nAccept: */*");
	is_str(s, "GET /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*\r\n"
	    "Authorization: Bearer tok-VALUE-1\r\nConnection: close\r\n\r\n",
	    "no header: the default Authorization: Bearer is set, Connection: close");
	free(s);
	s = rewrite(ic, "API.example.com.", "GET / HTTP/1.1\r\nauthorization: Bearer " PH_API
	    "\r\nX-Also: a " PH_API " b\r\nProxy-Authorization: x");
	is_str(s, "GET / HTTP/1.1\r\nX-Also: a tok-VALUE-1 b\r\nAuthorization: Bearer tok-VALUE-1"
	    "\r\nConnection: close\r\n\r\n",
	    "the agent's own Authorization is replaced, the placeholder elsewhere too, proxy headers "
	    "dropped; names in any case, a final dot");
	free(s);
	s = rewrite(ic, "registry.example.org", "PUT /pkg HTTP/1.1\r\nX-Api-Key: x\r\n"
	    "Content-Length: 3");
	is_str(s, "PUT /pkg HTTP/1.1\r\nContent-Length: 3\r\nX-Api-Key: key=key-VALUE-2\r\n"
	    "Connection: close\r\n\r\n", "a named header from its format");
	free(s);
	s = rewrite(ic, "10.1.2.3", "GET / HTTP/1.1\r\nHost: 10.1.2.3:443");
	ok(strstr(s, "Authorization: Bearer tok-VALUE-1") != NULL, "an address as a host, Host with a port");
	free(s);
	s = rewrite(ic, "registry.example.org", "GET / HTTP/1.1\r\nX-T: " PH_API);
	is_str(s, "<403>", "another secret's placeholder in a header: 403");
	free(s);
	s = rewrite(ic, "registry.example.org", "GET /?t=" PH_API " HTTP/1.1");
	is_str(s, "<403>", "...in the target: 403");
	free(s);
	s = rewrite(ic, "api.example.com", "GET / HTTP/1.1\r\nHost: registry.example.org");
	is_str(s, "<403>", "a Host for another host: 403");
	free(s);
	s = rewrite(ic, "api.example.com", "GET https://api.example.com/ HTTP/1.1");
	is_str(s, "<400>", "an absolute target: 400");
	free(s);
	s = rewrite(ic, "api.example.com", "GET / HTTP/1.1\r\nX-A: a\nAuthorization: evil");
	is_str(s, "<400>", "a bare LF: 400");
	free(s);
}

static void
test_foreign(struct intercept *ic)
{
	struct intercept_watch	*w;
	const char		*body = "xx" PH_KEY "yy";
	size_t			 i;
	const char		*found = NULL;

	is_str(intercept_foreign(ic, "evil.example", PH_API, strlen(PH_API)), "API_TOKEN",
	    "a placeholder to a host of no secret is named");
	ok(intercept_foreign(ic, "api.example.com", PH_API, strlen(PH_API)) == NULL,
	    "to its own host it is not foreign");
	ok(intercept_bound(ic, "registry.example.org") && !intercept_bound(ic, "example.org") &&
	    !intercept_bound(ic, "x.registry.example.org"), "only the exact hosts are intercepted");
	w = intercept_watch_new(ic, "api.example.com");
	for (i = 0; body[i] != '\0' && found == NULL; i++)
		found = intercept_watch_feed(w, body + i, 1);
	is_str(found, "REG_KEY", "a placeholder a byte at a time in a body is found");
	intercept_watch_free(w);
}

int
main(void)
{
	struct intercept	*ic;
	struct header_secret	 bad = { "BAD", "a\r\nX-Evil: 1", PH_API, api_hosts, NULL, NULL };
	char			*cause = NULL;

	test_ca();
	ic = intercept_create("run", secrets, 2, NULL, &cause);
	ok(ic != NULL, "made");
	test_rewrite(ic);
	test_foreign(ic);
	intercept_free(ic);
	ok(intercept_create("run", &bad, 1, NULL, &cause) == NULL && strstr(cause, "BAD") != NULL,
	    "a value with a line break cannot go in a header");
	free(cause);
	cause = NULL;
	ok(intercept_create("run", secrets, 1, "/nonexistent/ca.pem", &cause) == NULL &&
	    strstr(cause, "/nonexistent/ca.pem") != NULL, "an unreadable egress.ca_file is an error naming it");
	free(cause);
	return tap_done();
}
