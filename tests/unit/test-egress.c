/* test-egress.c: the proxy's allow list, the addresses it refuses, HTTP request heads, and the gateway's targets. */
#include "spur.h"
#include "egress.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

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
	return tap_done();
}
