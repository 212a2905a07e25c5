/* test-delivery.c: the pure parts of delivery: the GitHub App JWT, report formatting and cutting, backoff, which addresses a callback may reach. */
#include "spur.h"
#include "github-app.h"
#include "netguard.h"
#include "outbox.h"
#include "conf.h"
#include "report.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* base64url back to bytes, through the standard alphabet. */
static unsigned char *
b64url_decode(const char *s, size_t len, size_t *outlen)
{
	char		*t = xmalloc(len + 4);
	unsigned char	*out = NULL;
	size_t		 i;

	for (i = 0; i < len; i++)
		t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (i % 4 != 0)
		t[i++] = '=';
	if (base64_decode(t, i, &out, outlen) != 0)
		out = NULL;
	free(t);
	return out;
}

static void
test_jwt(void)
{
	EVP_PKEY	*key = EVP_RSA_gen(2048), *other = EVP_RSA_gen(2048);
	BIO		*bio = BIO_new(BIO_s_mem());
	char		*pem, *jwt, *cause = NULL, *dot1, *dot2;
	long		 pemlen;
	unsigned char	*sig, *part;
	size_t		 siglen, partlen;
	EVP_MD_CTX	*ctx;
	json_t		*claims, *head;

	PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL);
	pemlen = BIO_get_mem_data(bio, &pem);
	jwt = github_jwt(pem, (size_t)pemlen, 12345, 1700000000, &cause);
	ok(jwt != NULL, "a JWT is made from an RSA PEM key");
	dot1 = strchr(jwt, '.');
	dot2 = dot1 != NULL ? strchr(dot1 + 1, '.') : NULL;
	ok(dot1 != NULL && dot2 != NULL && strchr(dot2 + 1, '.') == NULL, "it has three parts");
	ok(strpbrk(jwt, "+/=") == NULL, "it is base64url without padding");

	part = b64url_decode(jwt, dot1 - jwt, &partlen);
	head = json_loadb((char *)part, partlen, 0, NULL);
	is_str(json_string_value(json_object_get(head, "alg")), "RS256", "alg is RS256");
	json_decref(head);
	free(part);
	part = b64url_decode(dot1 + 1, dot2 - dot1 - 1, &partlen);
	claims = json_loadb((char *)part, partlen, 0, NULL);
	is_int(json_integer_value(json_object_get(claims, "iat")), 1700000000 - 60,
	    "iat is 60 s in the past");
	ok(json_integer_value(json_object_get(claims, "exp")) > 1700000000 &&
	    json_integer_value(json_object_get(claims, "exp")) <= 1700000000 + 600,
	    "exp is within 10 minutes");
	is_str(json_string_value(json_object_get(claims, "iss")), "12345", "iss is the app id");
	json_decref(claims);
	free(part);

	sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &siglen);
	ctx = EVP_MD_CTX_new();
	EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key);
	ok(EVP_DigestVerify(ctx, sig, siglen, (unsigned char *)jwt, dot2 - jwt) == 1,
	    "the signature verifies with the public key");
	EVP_MD_CTX_free(ctx);
	ctx = EVP_MD_CTX_new();
	EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, other);
	ok(EVP_DigestVerify(ctx, sig, siglen, (unsigned char *)jwt, dot2 - jwt) != 1,
	    "and not with another key");
	EVP_MD_CTX_free(ctx);
	free(sig);
	free(jwt);

	jwt = github_jwt("not a key", 9, 1, 1700000000, &cause);
	ok(jwt == NULL && cause != NULL && strstr(cause, "not a key") == NULL,
	    "a bad key is an error that does not repeat the key");
	free(cause);
	BIO_free(bio);
	EVP_PKEY_free(key);
	EVP_PKEY_free(other);
}

static void
test_format(void)
{
	struct report_facts	 f;
	char			*s, *big;
	size_t			 n = 200000;

	memset(&f, 0, sizeof f);
	f.run = "run_abc";
	f.automation = "fix";
	f.state = "failed";
	f.reason = "agent exited 3";
	f.result = "it <broke> & burned";
	f.proof = NULL;
	f.duration_ms = 65000;
	f.link = "http://spur.example/runs/run_abc";
	s = report_format("github", &f, report_backend_find("github")->max);
	ok(strncmp(s, REPORT_MARKER "run_abc -->\n", strlen(REPORT_MARKER "run_abc -->\n")) == 0, "github: starts with the marker");
	ok(strstr(s, "**failed**") != NULL && strstr(s, "1m 5s") != NULL &&
	    strstr(s, "> agent exited 3") != NULL, "github: state, duration, reason");
	ok(strstr(s, "it <broke> & burned") != NULL, "github: the message as is");
	ok(strstr(s, "[run_abc](http://spur.example/runs/run_abc)") != NULL, "github: the link");
	free(s);
	s = report_format("slack", &f, report_backend_find("slack")->max);
	ok(strstr(s, "*failed*") != NULL && strstr(s, "it &lt;broke&gt; &amp; burned") != NULL,
	    "slack: mrkdwn, escaped");
	ok(strstr(s, "<http://spur.example/runs/run_abc|run_abc>") != NULL, "slack: the link");
	free(s);
	f.state = "completed";
	f.proof = "https://github.com/acme/api/pull/9";
	s = report_format("linear", &f, report_backend_find("linear")->max);
	ok(strstr(s, "**Pull request:** https://github.com/acme/api/pull/9") != NULL,
	    "linear: the pull request");
	ok(strstr(s, "> agent exited") == NULL, "a completed run shows no reason");
	free(s);

	big = xmalloc(n + 1);
	memset(big, 'x', n);
	big[n] = '\0';
	/* A multibyte character right at the cut. */
	memcpy(big + 38000, "\xc3\xa9\xc3\xa9\xc3\xa9", 6);
	f.result = big;
	s = report_format("github", &f, report_backend_find("github")->max);
	ok(strlen(s) <= report_backend_find("github")->max && strstr(s, "(cut; the whole message") != NULL &&
	    strstr(s, "pull/9") != NULL, "github: cut to its limit, saying so, the PR kept");
	free(s);
	s = report_format("slack", &f, report_backend_find("slack")->max);
	ok(strlen(s) <= report_backend_find("slack")->max && strstr(s, "(cut;") != NULL, "slack: cut to 39000");
	free(s);
	s = report_cut("ab\xc3\xa9" "cd", 3, "");
	is_str(s, "ab", "cutting never splits a UTF-8 character");
	free(s);
	s = report_cut("short", 10, "!");
	is_str(s, "short", "what fits is not cut");
	free(s);
	free(big);
}

#define DAY_MS	(24LL * 3600 * 1000)

static void
test_backoff(void)
{
	const long long	 B = OUTBOX_BACKOFF_BASE_MS;
	long long	 d1 = outbox_backoff_ms(1, B, -1, DAY_MS, 0), d2 = outbox_backoff_ms(2, B, -1, DAY_MS, 0);
	long long	 dmax = outbox_backoff_ms(40, B, -1, DAY_MS, 0xffffffff);

	is_int(d1, OUTBOX_BACKOFF_BASE_MS / 2, "the first retry waits at least half the base");
	ok(outbox_backoff_ms(1, B, -1, DAY_MS, 0xffffffff) <= OUTBOX_BACKOFF_BASE_MS,
	    "and at most the base");
	is_int(d2, OUTBOX_BACKOFF_BASE_MS, "it doubles");
	ok(dmax <= OUTBOX_BACKOFF_MAX_MS && dmax >= OUTBOX_BACKOFF_MAX_MS / 2, "it is capped");
	ok(outbox_backoff_ms(1, B, 7000, DAY_MS, 5) >= 7000 && outbox_backoff_ms(1, B, 7000, DAY_MS, 5) < 7250,
	    "Retry-After is honoured");
	ok(outbox_backoff_ms(3, B, 0, DAY_MS, 1) < 1000, "Retry-After: 0 means soon");
	is_int(outbox_backoff_ms(1, B, 2 * DAY_MS, DAY_MS, 0), DAY_MS,
	    "a Retry-After past reports.give_up waits no longer than it");
	ok(outbox_backoff_ms(1, 200, -1, DAY_MS, 0xffffffff) <= 200 &&
	    outbox_backoff_ms(2, 200, -1, DAY_MS, 0) == 200,
	    "reports.backoff sets the base: 200ms, then doubling");
	is_int(http_parse_retry_after("3", 0), 3000, "Retry-After in seconds");
	is_int(http_parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", 40000), 60000,
	    "Retry-After as a date");
	is_int(http_parse_retry_after("soon", 0), -1, "an unreadable Retry-After is ignored");
	is_int(http_parse_retry_after("-5", 0), -1, "a negative one too");
}

static void
test_verdict(void)
{
	json_t			*gh = json_pack("{s:s}", "source", "github");
	json_t			*sl = json_pack("{s:s}", "source", "slack");
	json_t			*li = json_pack("{s:s}", "source", "linear");
	struct http_response	 r;
	char			*why = NULL;

	memset(&r, 0, sizeof r);
	r.retry_after_ms = -1;
	r.body = "{}";
	r.len = 2;
	r.status = 201;
	is_int(report_verdict(gh, &r, &why), REPORT_SENT, "github 201: sent");
	free(why);
	r.status = 429;
	is_int(report_verdict(gh, &r, &why), REPORT_RETRY, "429: retried");
	free(why);
	r.status = 502;
	is_int(report_verdict(gh, &r, &why), REPORT_RETRY, "5xx: retried");
	free(why);
	r.status = 0;
	r.error = "connection refused";
	is_int(report_verdict(sl, &r, &why), REPORT_RETRY, "no answer: retried");
	free(why);
	r.error = NULL;
	r.status = 404;
	r.body = "{\"message\":\"Not Found\"}";
	r.len = strlen(r.body);
	is_int(report_verdict(gh, &r, &why), REPORT_FAILED, "github 404: given up");
	ok(why != NULL && strstr(why, "Not Found") != NULL, "saying why");
	free(why);
	r.status = 403;
	r.retry_after_ms = 5000;
	is_int(report_verdict(gh, &r, &why), REPORT_RETRY, "github 403 rate limited: retried");
	free(why);
	r.retry_after_ms = -1;
	r.status = 200;
	r.body = "{\"ok\":false,\"error\":\"channel_not_found\"}";
	r.len = strlen(r.body);
	is_int(report_verdict(sl, &r, &why), REPORT_FAILED, "slack ok:false: given up");
	free(why);
	r.body = "{\"ok\":true}";
	r.len = strlen(r.body);
	is_int(report_verdict(sl, &r, &why), REPORT_SENT, "slack ok:true: sent");
	free(why);
	r.body = "{\"data\":{\"commentCreate\":{\"success\":true}}}";
	r.len = strlen(r.body);
	is_int(report_verdict(li, &r, &why), REPORT_SENT, "linear success: sent");
	free(why);
	r.status = 400;
	r.body = "{\"errors\":[{\"message\":\"x\",\"extensions\":{\"code\":\"RATELIMITED\"}}]}";
	r.len = strlen(r.body);
	is_int(report_verdict(li, &r, &why), REPORT_RETRY, "linear RATELIMITED: retried");
	free(why);
	json_decref(gh);
	json_decref(sl);
	json_decref(li);
}

/* Callbacks (source-api.c): the Standard Webhooks library's own vector, and the verdicts. */
static void
test_callback(void)
{
	struct secret		 sec;
	struct http_response	 r;
	json_t			*api = json_pack("{s:s}", "source", "api");
	json_t			*rep = json_pack("{s:s,s:s,s:o}", "run", "run_1", "kind",
				    "run_end", "target", json_pack("{s:s}", "source", "api"));
	char			*sig, *cause = NULL, *why = NULL, *id;
	static const int	 retried[] = { 0, 408, 429, 500, 503 };
	static const int	 refused[] = { 301, 400, 401, 404, 410, 422 };
	size_t			 i;

	sec.ref = "env:X";
	sec.value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
	sec.len = strlen(sec.value);
	sig = callback_signature(&sec, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
	    "{\"test\": 2432232314}", &cause);
	is_str(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	    "the signature of the Standard Webhooks test vector");
	free(sig);
	sec.value = "whsec_not base64!";
	sec.len = strlen(sec.value);
	sig = callback_signature(&sec, "m", "1", "{}", &cause);
	ok(sig == NULL && cause != NULL && strstr(cause, "whsec_") != NULL &&
	    strstr(cause, "not base64!") == NULL, "a secret that is not whsec_ base64 is "
	    "refused, without quoting it");
	free(cause);
	id = callback_id(rep);
	is_str(id, "run_1", "webhook-id: the run's id");
	free(id);
	is_int(report_idempotent(rep), 1, "a callback is posted again rather than looked for");

	memset(&r, 0, sizeof r);
	r.retry_after_ms = -1;
	r.body = "";
	for (i = 0; i < sizeof retried / sizeof retried[0]; i++) {
		r.status = retried[i];
		is_int(report_verdict(api, &r, &why), REPORT_RETRY, "callback %d: retried",
		    retried[i]);
		free(why);
	}
	for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		r.status = refused[i];
		is_int(report_verdict(api, &r, &why), REPORT_FAILED, "callback %d: given up",
		    refused[i]);
		ok(why != NULL && strstr(why, "given up") != NULL, "saying so");
		free(why);
	}
	r.status = 204;
	is_int(report_verdict(api, &r, &why), REPORT_SENT, "callback 204: sent");
	free(why);
	json_decref(api);
	json_decref(rep);
}

/* Whether a callback may connect to addr (v4 or v6 text) with allow. */
static int
guard_allows(const char *addr, char *const *allow)
{
	struct sockaddr_in	 a4;
	struct sockaddr_in6	 a6;

	memset(&a4, 0, sizeof a4);
	memset(&a6, 0, sizeof a6);
	if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1) {
		a4.sin_family = AF_INET;
		return netguard_allowed((struct sockaddr *)&a4, allow);
	}
	if (inet_pton(AF_INET6, addr, &a6.sin6_addr) != 1)
		return -1;
	a6.sin6_family = AF_INET6;
	return netguard_allowed((struct sockaddr *)&a6, allow);
}

static void
test_netguard(void)
{
	static const char *const closed[] = { "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1",
		"172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
		"224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1",
		"ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
		"::7f00:1", NULL };
	static const char *const open[] = { "8.8.8.8", "1.1.1.1", "172.32.0.1", "192.169.0.1",
		"100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", NULL };
	char	*allow[] = { "127.0.0.1", "10.0.0.0/8", "fd00::/8", NULL };
	size_t	 i;

	for (i = 0; closed[i] != NULL; i++)
		is_int(guard_allows(closed[i], NULL), 0, "netguard: %s is refused", closed[i]);
	for (i = 0; open[i] != NULL; i++)
		is_int(guard_allows(open[i], NULL), 1, "netguard: %s is public", open[i]);
	ok(guard_allows("127.0.0.1", allow) == 1 && guard_allows("::ffff:127.0.0.1", allow) == 1,
	    "netguard: an allowed address, as IPv4 or IPv4-mapped");
	ok(guard_allows("127.0.0.2", allow) == 0 && guard_allows("::1", allow) == 0,
	    "netguard: loopback the list does not name stays refused");
	ok(guard_allows("10.200.3.4", allow) == 1 && guard_allows("fd12::1", allow) == 1 &&
	    guard_allows("fe80::1", allow) == 0, "netguard: CIDRs");
	ok(netguard_valid("10.0.0.0/8") && netguard_valid("::1") && netguard_valid("fd00::/128") &&
	    !netguard_valid("10.0.0.0/33") && !netguard_valid("localhost") && !netguard_valid("1.2.3.4/") &&
	    !netguard_valid("1.2.3.4:80") && !netguard_valid(""), "netguard: what the allow list takes");
}

int
main(void)
{
	test_verdict();
	test_callback();
	test_jwt();
	test_format();
	test_backoff();
	test_netguard();
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
