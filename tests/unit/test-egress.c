/* test-egress.c: the proxy's allow list, the addresses it refuses, HTTP request heads, the gateway's targets, and what it hears the model API say. */
#include "spur.h"
#include "agent.h"
#include "egress.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define KEY	"sk-ant-test-key-0f1e2d"

/* The model API: answers ...?status=N with status N, and an error body in its shape. */
static void
upstream_cb(struct evhttp_request *req, void *arg)
{
	const char	*uri = evhttp_request_get_uri(req);
	const char	*key = evhttp_find_header(evhttp_request_get_input_headers(req),
			    "x-api-key");
	struct evbuffer	*b = evbuffer_new();
	const char	*q = strstr(uri, "?status=");
	int		 status = 200;

	if (q != NULL)
		status = atoi(q + 8);
	/* The gateway sent the real key: what the API refuses is the key, not its absence. */
	if (key == NULL || strcmp(key, KEY) != 0)
		status = 400;
	evbuffer_add_printf(b, "{\"type\":\"%s\"}", status == 200 ? "message" : "error");
	evhttp_send_reply(req, status, "X", b);
	evbuffer_free(b);
}

struct answer {
	struct event_base	*base;
	int			 status;	/* -1: no answer */
};

static void
answer_cb(struct evhttp_request *req, void *arg)
{
	struct answer	*a = arg;

	a->status = req != NULL ? evhttp_request_get_response_code(req) : -1;
	event_base_loopexit(a->base, NULL);
}

/* One request of the agent through the gateway at port; the status it got. */
static int
ask(struct event_base *base, int port, int status)
{
	struct evhttp_connection	*c = evhttp_connection_base_new(base, NULL, "127.0.0.1",
					    port);
	struct evhttp_request		*req;
	struct answer			 a = { base, -1 };
	char				 uri[64];

	req = evhttp_request_new(answer_cb, &a);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "127.0.0.1");
	evhttp_add_header(evhttp_request_get_output_headers(req), "x-api-key",
	    AGENT_PLACEHOLDER_KEY);
	evbuffer_add_printf(evhttp_request_get_output_buffer(req), "{}");
	/* A path the gateway forwards (it answers others 404 itself). */
	snprintf(uri, sizeof uri, "/v1/messages?status=%d", status);
	evhttp_make_request(c, req, EVHTTP_REQ_POST, uri);
	event_base_dispatch(base);
	evhttp_connection_free(c);
	return a.status;
}

/* The gateway of one run against the upstream at port, asked statuses in turn; its log on stderr. */
static enum egress_verdict
gateway_run(struct event_base *base, int port, const int *statuses, size_t n,
    struct gateway_tally *tally, char *log, size_t loglen)
{
	struct gateway_spec	 gs = { .upstream = NULL, .prefix = "", .key = KEY };
	struct gateway		*g;
	enum egress_verdict	 v;
	char			*up, *cause = NULL;
	FILE			*f = tmpfile();
	int			 gport = 0, saved = dup(2);
	size_t			 i, got;

	up = xprintf("http://127.0.0.1:%d", port);
	gs.upstream = up;
	fflush(stderr);
	dup2(fileno(f), 2);
	if ((g = gateway_create(base, NULL, "run-t", &gs, NULL, &gport, &cause)) == NULL)
		fatal("gateway_create: %s", cause);
	for (i = 0; i < n; i++)
		is_int(ask(base, gport, statuses[i]), statuses[i],
		    "the agent gets the API's %d as it was", statuses[i]);
	*tally = *gateway_tally(g);
	v = egress_judge(gateway_tally(g), 0);
	gateway_free(g);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	got = fread(log, 1, loglen - 1, f);
	log[got] = '\0';
	fclose(f);
	free(up);
	return v;
}

/* How many times needle is in haystack. */
static int
count(const char *haystack, const char *needle)
{
	int	 n = 0;

	while ((haystack = strstr(haystack, needle)) != NULL) {
		n++;
		haystack += strlen(needle);
	}
	return n;
}

/* The gateway against a model API that refuses the key, limits, or answers. */
static void
test_tally(void)
{
	static const int	 refused[] = { 200, 401, 401, 500 };
	static const int	 refused_ok[] = { 403, 200 };
	static const int	 quota[] = { 200, 429, 529, 429 };
	static const int	 quota_ok[] = { 429, 200 };
	static const int	 fine[] = { 200, 404 };
	struct event_base	*base = event_base_new();
	struct evhttp		*http = evhttp_new(base);
	struct evhttp_bound_socket *bs;
	struct sockaddr_in	 sin;
	socklen_t		 slen = sizeof sin;
	struct gateway_tally	 t;
	char			 log[8192];
	int			 port;

	evhttp_set_gencb(http, upstream_cb, NULL);
	if ((bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0)) == NULL ||
	    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &slen) != 0)
		fatal("cannot listen for the fake model API");
	port = ntohs(sin.sin_port);

	is_int(gateway_run(base, port, refused, SPUR_ARRLEN(refused), &t, log, sizeof log),
	    EGRESS_MODEL_AUTH, "401 and no success after it: the API refused the key");
	is_int(t.answers, 4, "every upstream answer is counted");
	is_int(t.auth, 2, "both 401s are");
	is_int(t.last, 500, "and the last answer's status is kept");
	is_int(count(log, "event=gateway.model_refused run=run-t status=401"), 1,
	    "the refusal is logged once per run");
	ok(strstr(log, KEY) == NULL, "and the log holds no key");
	is_int(gateway_run(base, port, refused_ok, SPUR_ARRLEN(refused_ok), &t, log,
	    sizeof log), EGRESS_OK, "a 403 the agent got past is no verdict");
	is_int(t.auth, 1, "though it is counted");
	ok(strstr(log, "event=gateway.model_refused run=run-t status=403") != NULL,
	    "and logged");
	is_int(gateway_run(base, port, quota, SPUR_ARRLEN(quota), &t, log, sizeof log),
	    EGRESS_MODEL_QUOTA, "the last answers 429/529: the quota");
	is_int(t.quota, 3, "each 429 and 529 is counted");
	is_int(count(log, "model_refused"), 0, "a quota is no refusal of the key");
	ok(strstr(log, "event=gateway.answers run=run-t answers=4 key_refused=0 quota=3 "
	    "last=429") != NULL, "what the API answered the run is logged when it ends");
	is_int(gateway_run(base, port, quota_ok, SPUR_ARRLEN(quota_ok), &t, log,
	    sizeof log), EGRESS_OK, "a 429 the agent retried past is no verdict");
	is_int(gateway_run(base, port, fine, SPUR_ARRLEN(fine), &t, log, sizeof log),
	    EGRESS_OK, "other answers are no verdict");
	is_int(gateway_run(base, port, NULL, 0, &t, log, sizeof log), EGRESS_OK,
	    "nor is no answer");
	is_int(t.answers, 0, "with nothing counted");
	evhttp_free(http);
	event_base_free(base);
}

/* egress_verdict's precedence: the key, then the quota, then the proxy. */
static void
test_judge(void)
{
	struct gateway_tally	 t;

	memset(&t, 0, sizeof t);
	is_int(egress_judge(NULL, 0), EGRESS_OK, "no gateway, no refusal: OK");
	is_int(egress_judge(NULL, 2), EGRESS_DENIED, "a refused connection: DENIED");
	is_int(egress_judge(&t, 1), EGRESS_DENIED, "also beside a gateway that heard nothing");
	t.last = 529;
	is_int(egress_judge(&t, 1), EGRESS_MODEL_QUOTA, "the quota goes before the proxy");
	t.refused = 1;
	is_int(egress_judge(&t, 1), EGRESS_MODEL_AUTH, "and the key before the quota");
	is_int(egress_verdict(NULL), EGRESS_OK, "a run without network: OK");
}

static int
addr_ok(char *const *allow, const char *text, int port)
{
	struct sockaddr_in	 s4;
	struct sockaddr_in6	 s6;

	memset(&s4, 0, sizeof s4);
	memset(&s6, 0, sizeof s6);
	if (inet_pton(AF_INET, text, &s4.sin_addr) == 1) {
		s4.sin_family = AF_INET;
		s4.sin_port = htons(port);
		return proxy_address_ok(allow, (struct sockaddr *)&s4);
	}
	if (inet_pton(AF_INET6, text, &s6.sin6_addr) == 1) {
		s6.sin6_family = AF_INET6;
		s6.sin6_port = htons(port);
		return proxy_address_ok(allow, (struct sockaddr *)&s6);
	}
	return -1;
}

int
main(void)
{
	char	*allow[] = { "api.example.com", "*.example.org", "git.example.net:8443",
		    "127.0.0.1:9999", "10.1.2.3", NULL };
	char	*none[] = { NULL };
	static const char *private[] = {
		"127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.255", "0.0.0.0",
		"0.1.2.3", "224.0.0.1", "255.255.255.255", "198.18.0.1", "::1", "::",
		"fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1",
		"::ffff:169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1",
		"::127.0.0.1", "fec0::1",
	};
	static const char *public[] = {
		"93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1",
		"2606:2800:220:1::1", "::ffff:8.8.8.8", "11.0.0.1",
	};
	/* Wildcards match names: never an address, in any form a resolver reads as one. */
	char	*wild[] = { "*.0.0.1", "*.1", "*.example.org", NULL };
	static const char *literal[] = {
		"127.0.0.1", "10.0.0.1", "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433",
		"0x7f000001", "10.0.1", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "1.2.3.4.",
	};
	/* Heads a server could read as more (or other) lines than they are. */
	static const char *malformed[] = {
		"GET / HTTP/1.1\r\nX-A: a\nHost: evil",		/* bare LF in a value */
		"GET / HTTP/1.1\r\nX-A: a\rHost: evil",		/* bare CR */
		"GET / HTTP/1.1\nHost: evil",			/* bare LF after the request line */
		"GET / HTTP/1.1\r\nX-A\n: a",			/* LF in a name */
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b",		/* two Host */
		"GET / HTTP/1.1\r\nhost: a\r\nX: y\r\nHOST: a",	/* the same, any case */
		"GET / HTTP/1.1\r\nX-A: a\r\n\tfolded",		/* obs-fold by tab */
		"GET / HTTP/1.1\r\nX(A): a",			/* not a token */
		"GET / HTTP/1.1\r\nX\"A: a",
		"GET / HTTP/1.1\r\nX-A: a\x7f",			/* DEL */
		"GET / HTTP/1.1\r\nX-A: a\x01b",			/* a control character */
		"GET  / HTTP/1.1",				/* two spaces */
		"GET / HTTP/1.1 ",				/* a space after the version */
		"GET / x HTTP/1.1",				/* three words */
		"GET /\x80 HTTP/1.1",				/* not ASCII in the target */
		"G(T / HTTP/1.1",				/* a method that is no token */
		"GET / HTTP/1.10",				/* HTTP/1.x: one digit */
		"GET / HTTP/1.",
	};
	/* Targets and what goes upstream; NULL: refused (400). */
	static const struct { const char *in, *out; } targets[] = {
		{ "/v1/messages", "/v1/messages" },
		{ "/v1/messages?beta=true&x=/a?b", "/v1/messages?beta=true&x=/a?b" },
		{ "/v1/%61bc%7e%2D", "/v1/abc~-" },
		{ "/v1/a%20b%3f", "/v1/a%20b%3F" },
		{ "/v1/x?q=%2e%2e%2f", "/v1/x?q=%2E%2E%2F" },
		{ "/v1/.well", "/v1/.well" },
		{ "/v1/...", "/v1/..." },
		{ "/", "/" },
		{ "/v1/../v2/x", NULL },
		{ "/v1/./x", NULL },
		{ "/v1/..", NULL },
		{ "/v1/.", NULL },
		{ "/..?x", NULL },
		{ "/v1/%2e%2e/v2/x", NULL },
		{ "/v1/%2E%2E/v2/x", NULL },
		{ "/v1/%2e%2E/v2/x", NULL },
		{ "/v1/.%2e/v2/x", NULL },
		{ "/v1/%2e./v2/x", NULL },
		{ "/v1/%2e/x", NULL },
		{ "/v1/..%2fv2", NULL },
		{ "/v1/..%2Fv2", NULL },
		{ "/v1/x%2f..%2f..%2fv2", NULL },
		{ "/v1/..%5cv2", NULL },
		{ "/v1\\..\\v2", NULL },
		{ "/v1/..;/v2", NULL },
		{ "/v1/x%00", NULL },
		{ "/v1/x?a=%00", NULL },
		{ "/v1/%2", NULL },
		{ "/v1/%zz", NULL },
		{ "/v1/x#frag", NULL },
		{ "http://evil.test/v1/x", NULL },
		{ "*", NULL },
		{ "evil.test:443", NULL },
	};
	struct http_head	 h;
	struct in6_addr		 a6;
	const char		*req;
	char			*got, *cause;
	size_t			 i;

	/* The allow list: hosts, ports, wildcards. */
	ok(proxy_allowed(allow, "api.example.com", 443), "a listed host on 443");
	ok(proxy_allowed(allow, "API.Example.COM.", 80), "case and a final dot do not matter");
	ok(!proxy_allowed(allow, "api.example.com", 8080), "a listed host on another port is not");
	ok(!proxy_allowed(allow, "evil-api.example.com", 443), "a name that only ends alike is not");
	ok(!proxy_allowed(allow, "api.example.com.evil.test", 443), "nor one that starts alike");
	ok(proxy_allowed(allow, "a.b.example.org", 443), "*.example.org covers subdomains");
	ok(!proxy_allowed(allow, "example.org", 443), "but not example.org itself");
	ok(!proxy_allowed(allow, "badexample.org", 443), "nor a name that ends in it without a dot");
	ok(proxy_allowed(allow, "git.example.net", 8443), "host:port allows that port");
	ok(!proxy_allowed(allow, "git.example.net", 443), "and only that port");
	ok(proxy_allowed(allow, "127.0.0.1", 9999), "a literal address with its port");
	ok(!proxy_allowed(allow, "127.0.0.1", 80), "not on another port");
	ok(!proxy_allowed(allow, "localhost", 9999), "a name is not its address");
	ok(!proxy_allowed(none, "api.example.com", 443), "an empty list allows nothing");
	ok(!proxy_allowed(NULL, "api.example.com", 443), "no list allows nothing");
	ok(!proxy_allowed(allow, "", 443), "an empty host is refused");
	ok(!proxy_allowed(allow, "api.example.com", 0), "port 0 is refused");

	/* Wildcards and addresses. */
	for (i = 0; i < SPUR_ARRLEN(literal); i++) {
		ok(!proxy_allowed(wild, literal[i], 443), "no wildcard matches %s", literal[i]);
		is_int(addr_ok(wild, literal[i], 443), inet_pton(AF_INET, literal[i], &a6) == 1 ||
		    inet_pton(AF_INET6, literal[i], &a6) == 1 ? 0 : -1,
		    "nor reaches %s once resolved", literal[i]);
	}
	ok(proxy_allowed(wild, "a.b.example.org", 443), "a wildcard still matches names");
	ok(proxy_allowed(wild, "x.10.0.0.1.example.org", 443), "with numeric labels among them");

	/* Addresses: private ones only when named literally. */
	for (i = 0; i < SPUR_ARRLEN(private); i++)
		is_int(addr_ok(none, private[i], 443), 0, "%s is refused", private[i]);
	for (i = 0; i < SPUR_ARRLEN(public); i++)
		is_int(addr_ok(none, public[i], 443), 1, "%s may be reached", public[i]);
	is_int(addr_ok(allow, "127.0.0.1", 9999), 1, "127.0.0.1 when listed literally");
	is_int(addr_ok(allow, "::ffff:127.0.0.1", 9999), 1, "and its IPv4-mapped form");
	is_int(addr_ok(allow, "10.1.2.3", 443), 1, "10.1.2.3 when listed literally");
	is_int(addr_ok(allow, "10.1.2.4", 443), 0, "but not its neighbour");
	is_int(addr_ok(allow, "::1", 9999), 0, "::1 is not 127.0.0.1");
	is_int(addr_ok(allow, "127.0.0.1", 443), 0, "127.0.0.1 on a port its entry does not name");
	is_int(addr_ok(allow, "10.1.2.3", 8080), 0, "an entry without port covers 80 and 443 only");

	/* Request heads. */
	req = "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n"
	    "Proxy-Authorization:  x";
	ok(http_head_parse(req, strlen(req), &h) == 0, "a CONNECT head parses");
	is_str(h.method, "CONNECT", "method");
	is_str(h.target, "api.example.com:443", "target");
	is_str(http_head_get(&h, "proxy-authorization"), "x", "headers by any case, value trimmed");
	ok(http_head_get(&h, "x-missing") == NULL, "a missing header is NULL");
	http_head_clear(&h);
	req = "GET / HTTP/1.1\r\n folded: no";
	ok(http_head_parse(req, strlen(req), &h) == -1, "folded headers are refused");
	req = "GET / HTTP/1.1\r\nno colon";
	ok(http_head_parse(req, strlen(req), &h) == -1, "a header without a colon is refused");
	req = "GET /\r\n";
	ok(http_head_parse(req, strlen(req), &h) == -1, "a request line without version");
	req = "GET / SPDY/3";
	ok(http_head_parse(req, strlen(req), &h) == -1, "not HTTP/1.x");
	ok(http_head_parse("GET / HTTP/1.1\0x", 16, &h) == -1, "a NUL byte is refused");
	for (i = 0; i < SPUR_ARRLEN(malformed); i++)
		ok(http_head_parse(malformed[i], strlen(malformed[i]), &h) == -1,
		    "malformed head %zu is refused", i);
	req = "POST /v1/messages HTTP/1.1\r\nHost: a\r\nX-A: b\t \r\nX-B: \xc3\xa9";
	ok(http_head_parse(req, strlen(req), &h) == 0, "a well-formed head parses");
	is_str(http_head_get(&h, "x-a"), "b", "trailing blanks are no part of a value");
	is_str(http_head_get(&h, "x-b"), "\xc3\xa9", "bytes past ASCII are (obs-text)");
	http_head_clear(&h);

	/* The gateway's request targets. */
	for (i = 0; i < SPUR_ARRLEN(targets); i++) {
		cause = NULL;
		got = gateway_target(targets[i].in, &cause);
		is_str(got, targets[i].out, "target %s", targets[i].in);
		ok(got != NULL || (cause != NULL && *cause != '\0'), "refused with a reason");
		free(got);
		free(cause);
	}
	test_tally();
	test_judge();
	return tap_done();
}
