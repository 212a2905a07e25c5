/* proxy.c: a run's HTTP proxy (CONNECT and absolute-URI requests) and its allow list. */
#include "spur.h"
#include "egress.h"
#include "intercept.h"
#include "scrub.h"
#include "serve.h"
#include "store.h"

#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define PROXY_HEAD_SECS		30		/* to send the request head */

/*
 * The allow list and the addresses a run may reach.
 */

/* Splits an allow entry "host[:port]"; port 0: 80 and 443. */
static void
proxy_entry(const char *e, char *host, size_t len, int *port)
{
	const char	*colon = strrchr(e, ':');
	size_t		 n = colon != NULL ? (size_t)(colon - e) : strlen(e);

	*port = colon != NULL ? atoi(colon + 1) : 0;
	if (n >= len)
		n = len - 1;
	memcpy(host, e, n);
	host[n] = '\0';
	if (n > 0 && host[n - 1] == '.')
		host[n - 1] = '\0';
}

/* Whether host is an address in any form a resolver takes (127.1, 0x7f.0.0.1, 2130706433, ::1). */
static int
proxy_host_literal(const char *host)
{
	struct in6_addr	 a6;
	struct in_addr	 a4;

	return inet_aton(host, &a4) != 0 || inet_pton(AF_INET6, host, &a6) == 1;
}

static int
proxy_host_match(const char *pattern, const char *host)
{
	struct in6_addr	 a6, b6;
	struct in_addr	 a4, b4;
	size_t		 hl, sl;

	if (inet_pton(AF_INET, pattern, &a4) == 1)
		return inet_pton(AF_INET, host, &b4) == 1 && a4.s_addr == b4.s_addr;
	if (inet_pton(AF_INET6, pattern, &a6) == 1)
		return inet_pton(AF_INET6, host, &b6) == 1 && memcmp(&a6, &b6, sizeof a6) == 0;
	if (strncmp(pattern, "*.", 2) == 0) {
		/* Names only: "*.0.0.1" must not reach 10.0.0.1 or 127.0.0.1. */
		if (proxy_host_literal(host))
			return 0;
		/* A subdomain only: "*.example.com" is not example.com itself. */
		hl = strlen(host);
		sl = strlen(pattern + 1);
		return hl > sl && strcasecmp(host + hl - sl, pattern + 1) == 0;
	}
	return strcasecmp(pattern, host) == 0;
}

int
proxy_allowed(char *const *allow, const char *host, int port)
{
	char	 h[256], name[256];
	size_t	 n;
	int	 p;

	if (allow == NULL || host == NULL || *host == '\0' || port <= 0 || port > 65535)
		return 0;
	if ((n = strlen(host)) >= sizeof name)
		return 0;
	memcpy(name, host, n + 1);
	if (n > 0 && name[n - 1] == '.')
		name[n - 1] = '\0';
	for (; *allow != NULL; allow++) {
		proxy_entry(*allow, h, sizeof h, &p);
		if (p != 0 ? p != port : (port != 80 && port != 443))
			continue;
		if (proxy_host_match(h, name))
			return 1;
	}
	return 0;
}

static int
proxy_v4_private(uint32_t a)
{
	return (a >> 24) == 0 ||		/* 0.0.0.0/8 */
	    (a >> 24) == 10 ||			/* 10/8 */
	    (a >> 22) == (100 << 2 | 1) ||	/* 100.64/10, CGNAT */
	    (a >> 24) == 127 ||			/* loopback */
	    (a >> 16) == (169 << 8 | 254) ||	/* link-local, metadata endpoints */
	    (a >> 20) == (172 << 4 | 1) ||	/* 172.16/12 */
	    (a >> 16) == (192 << 8 | 168) ||	/* 192.168/16 */
	    (a >> 8) == (192u << 16 | 0 << 8 | 0) || /* 192.0.0/24 */
	    (a >> 17) == (198u << 7 | 18 >> 1) ||	/* 198.18/15, benchmarking */
	    (a >> 28) >= 14;			/* multicast, reserved, broadcast */
}

/* Whether an address is private, loopback, link-local or otherwise not the internet. */
static int
proxy_private(const struct sockaddr *sa)
{
	const uint8_t	*b;
	uint32_t	 v4;

	if (sa->sa_family == AF_INET) {
		v4 = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
		return proxy_v4_private(v4);
	}
	if (sa->sa_family != AF_INET6)
		return 1;
	b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	/* IPv4-mapped (::ffff:a.b.c.d), -compatible (::a.b.c.d) and NAT64 (64:ff9b::/96). */
	if ((memcmp(b, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) ||
	    (memcmp(b, "\0\0\0\0\0\0\0\0\0\0\0\0", 12) == 0) ||
	    (memcmp(b, "\0\x64\xff\x9b\0\0\0\0\0\0\0\0", 12) == 0)) {
		v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
		return proxy_v4_private(v4);
	}
	if (b[0] == 0x20 && b[1] == 0x02) {	/* 6to4 carries an IPv4 address */
		v4 = (uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5];
		return proxy_v4_private(v4);
	}
	return (b[0] & 0xfe) == 0xfc ||			/* ULA fc00::/7 */
	    (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||	/* link-local fe80::/10 */
	    (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) ||	/* site-local fec0::/10 */
	    b[0] == 0xff;				/* multicast */
}

/* The address as text; an IPv4-mapped one as IPv4, as an allow list would name it. */
static int
proxy_addr_text(const struct sockaddr *sa, char *text, size_t len)
{
	const struct sockaddr_in6	*s6 = (const struct sockaddr_in6 *)sa;
	const uint8_t			*b;

	if (sa->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, text,
		    len) != NULL ? 0 : -1;
	if (sa->sa_family != AF_INET6)
		return -1;
	b = s6->sin6_addr.s6_addr;
	if (memcmp(b, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
		return inet_ntop(AF_INET, b + 12, text, len) != NULL ? 0 : -1;
	return inet_ntop(AF_INET6, &s6->sin6_addr, text, len) != NULL ? 0 : -1;
}

int
proxy_address_ok(char *const *allow, const struct sockaddr *sa)
{
	char	 text[INET6_ADDRSTRLEN], h[256];
	int	 p, port;

	if (!proxy_private(sa))
		return 1;
	/* A private address only when the list names it literally. */
	if (allow == NULL || proxy_addr_text(sa, text, sizeof text) != 0)
		return 0;
	port = ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port :
	    ((const struct sockaddr_in6 *)sa)->sin6_port);
	for (; *allow != NULL; allow++) {
		proxy_entry(*allow, h, sizeof h, &p);
		if (p != 0 ? p != port : (port != 80 && port != 443))
			continue;
		if (proxy_host_match(h, text))
			return 1;
	}
	return 0;
}

/*
 * The proxy: one listener per run; each connection asks for one host.
 */

struct pconn {
	struct proxy			*p;
	struct bufferevent		*cli;
	struct bufferevent		*up;
	struct relay			*relay;
	struct intercept_conn		*icc;		/* a host of a header secret */
	struct intercept_watch		*watch;		/* what it sends: no placeholder */
	struct evdns_getaddrinfo_request *dns;
	struct evutil_addrinfo		*ai;
	struct http_head		 head;
	char				*host;
	int				 port;
	int				 tunnel;	/* CONNECT, else absolute-URI */
	int				 resolving;
	uint64_t			 head_out;	/* request head bytes sent upstream */
	LIST_ENTRY(pconn)		 entry;
};

struct proxy {
	struct event_base	*base;
	struct evdns_base	*dns;
	struct engine		*engine;
	char			*run;
	char			**allow;
	char			*path;
	struct evconnlistener	*lis;
	struct egress_gate	 gate;
	unsigned		 refused;	/* connections refused by policy */
	struct intercept	*intercept;	/* the run's header secrets; NULL: none */
	LIST_HEAD(, pconn)	 conns;
};

static void
pconn_free(struct pconn *pc)
{
	LIST_REMOVE(pc, entry);
	egress_gate_leave(&pc->p->gate);
	if (pc->dns != NULL)
		evdns_getaddrinfo_cancel(pc->dns);	/* its callback still runs, with pc gone */
	if (pc->ai != NULL)
		evutil_freeaddrinfo(pc->ai);
	if (pc->icc != NULL)
		intercept_conn_free(pc->icc);
	if (pc->relay != NULL)
		relay_free(pc->relay);
	else {
		if (pc->cli != NULL)
			bufferevent_free(pc->cli);
		if (pc->up != NULL)
			bufferevent_free(pc->up);
	}
	http_head_clear(&pc->head);
	intercept_watch_free(pc->watch);
	free(pc->host);
	free(pc);
}

/* The host is the agent's to choose: a secret in it is cut out before it is logged or stored. */
static void
pconn_record(struct pconn *pc, uint64_t in, uint64_t out, const char *verdict)
{
	char	*host = scrub_for_engine(pc->p->engine, pc->host != NULL ? pc->host : "");

	egress_record(pc->p->engine->store, pc->p->run, "proxy", host, pc->port, in, out,
	    verdict);
	free(host);
	if (strcmp(verdict, "denied") == 0 || strcmp(verdict, "refused") == 0)
		pc->p->refused++;
}

void
proxy_set_intercept(struct proxy *p, struct intercept *ic)
{
	p->intercept = ic;
}

unsigned
proxy_refused(const struct proxy *p)
{
	return p->refused;
}

static void
pconn_closed_cb(struct bufferevent *bev, short what, void *arg)
{
	pconn_free(arg);
}

/* Answers with an error and closes once it is written. */
static void
pconn_fail(struct pconn *pc, int status, const char *reason, const char *verdict)
{
	pconn_record(pc, 0, 0, verdict);
	if (pc->up != NULL) {
		bufferevent_free(pc->up);
		pc->up = NULL;
	}
	proxy_answer(bufferevent_get_output(pc->cli), status, reason, verdict);
	egress_close_flushed(pc->cli, pconn_closed_cb, pc);
}

static void
pconn_relay_done(struct relay *r, void *arg)
{
	struct pconn	*pc = arg;

	/* A placeholder in what it sent (a body, a plain protocol in a tunnel): cut there. */
	if (relay_cut(r) != NULL)
		log_warn("event=egress.placeholder_refused run=%s host=%s secret=%s where=%s",
		    pc->p->run, log_q(pc->host), relay_cut(r), pc->tunnel ? "tunnel" : "body");
	/* cli is side a: a to b is what the run sent out. */
	pconn_record(pc, relay_bytes(r, 0), relay_bytes(r, 1) + pc->head_out,
	    relay_cut(r) != NULL ? "refused" : "allowed");
	pconn_free(pc);
}

/* The request head for the origin server: origin-form target, no proxy headers. */
static void
pconn_origin_head(struct pconn *pc, struct evbuffer *out)
{
	const char	*t = pc->head.target + strlen("http://");
	const char	*path = strchr(t, '/');
	size_t		 i, before = evbuffer_get_length(out);

	evbuffer_add_printf(out, "%s %s %s\r\n", pc->head.method, path != NULL ? path : "/",
	    pc->head.version);
	for (i = 0; i < pc->head.n; i++) {
		if (strncasecmp(pc->head.name[i], "proxy-", 6) == 0 ||
		    strcasecmp(pc->head.name[i], "connection") == 0 ||
		    strcasecmp(pc->head.name[i], "keep-alive") == 0)
			continue;
		evbuffer_add_printf(out, "%s: %s\r\n", pc->head.name[i], pc->head.value[i]);
	}
	if (http_head_get(&pc->head, "host") == NULL)
		evbuffer_add_printf(out, "Host: %s:%d\r\n", pc->host, pc->port);
	/* One request per connection: a next one might be for another host. */
	evbuffer_add_printf(out, "Connection: close\r\n\r\n");
	pc->head_out = evbuffer_get_length(out) - before;
}

static void	pconn_connect(struct pconn *);

static void
pconn_intercept_done(struct intercept_conn *icc, const char *verdict, uint64_t in,
    uint64_t out, void *arg)
{
	struct pconn			*pc = arg;
	const struct mcp_call_row	*calls;
	struct mcp_call_row		 r;
	size_t				 i, n;
	char				*method, *tool;

	pconn_record(pc, in, out, verdict);
	/* Names the agent chose: a secret in them is cut out, as from a host. */
	calls = intercept_conn_calls(icc, &n);
	for (i = 0; i < n; i++) {
		r = calls[i];
		method = r.method != NULL ? scrub_for_engine(pc->p->engine, r.method) : NULL;
		tool = r.tool != NULL ? scrub_for_engine(pc->p->engine, r.tool) : NULL;
		r.method = method;
		r.tool = tool;
		egress_mcp_record(pc->p->engine->store, pc->p->run, &r);
		free(method);
		free(tool);
	}
	pconn_free(pc);
}

static void
pconn_up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct pconn	*pc = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* A host of a header secret: TLS ends here, the secret goes in (intercept.c). */
		if (pc->tunnel && intercept_bound(pc->p->intercept, pc->host)) {
			pc->icc = intercept_conn_start(pc->p->intercept, pc->cli, pc->up, pc->host,
			    pc->port, pconn_intercept_done, pc);
			pc->cli = pc->up = NULL;
			return;
		}
		if (pc->tunnel)
			evbuffer_add_printf(bufferevent_get_output(pc->cli),
			    "HTTP/1.1 200 Connection established\r\n\r\n");
		else
			pconn_origin_head(pc, bufferevent_get_output(pc->up));
		if (pc->p->intercept != NULL)
			pc->watch = intercept_watch_new(pc->p->intercept, pc->host);
		pc->relay = relay_start_watched(pc->cli, pc->up, pconn_relay_done, pc,
		    pc->watch != NULL ? intercept_watch_feed : NULL, pc->watch);
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF | BEV_EVENT_TIMEOUT)) {
		/* Try the host's next acceptable address. */
		bufferevent_free(pc->up);
		pc->up = NULL;
		pconn_connect(pc);
	}
}

/* Connects to the next acceptable address of pc->ai; fails when none is left. */
static void
pconn_connect(struct pconn *pc)
{
	struct evutil_addrinfo	*a;
	struct timeval		 tv = { PROXY_HEAD_SECS, 0 };
	int			 refused = 0, tried = 0;

	while ((a = pc->ai) != NULL) {
		pc->ai = a->ai_next;
		a->ai_next = NULL;
		if (!proxy_address_ok(pc->p->allow, a->ai_addr)) {
			refused++;
			evutil_freeaddrinfo(a);
			continue;
		}
		tried++;
		pc->up = bufferevent_socket_new(pc->p->base, -1, BEV_OPT_CLOSE_ON_FREE);
		bufferevent_setcb(pc->up, NULL, NULL, pconn_up_event_cb, pc);
		bufferevent_set_timeouts(pc->up, &tv, &tv);
		if (bufferevent_socket_connect(pc->up, a->ai_addr, (int)a->ai_addrlen) == 0) {
			evutil_freeaddrinfo(a);
			return;
		}
		bufferevent_free(pc->up);
		pc->up = NULL;
		evutil_freeaddrinfo(a);
	}
	if (refused > 0 && tried == 0)
		pconn_fail(pc, 403, "the host's address is private, loopback or link-local "
		    "(name it literally in network.allow to reach it)", "refused");
	else
		pconn_fail(pc, 502, "cannot connect", "failed");
}

static void
pconn_dns_cb(int err, struct evutil_addrinfo *ai, void *arg)
{
	struct pconn	*pc = arg;

	if (err == EVUTIL_EAI_CANCEL)
		return;		/* pc is gone */
	pc->dns = NULL;
	pc->resolving = 0;
	if (err != 0 || ai == NULL) {
		if (ai != NULL)
			evutil_freeaddrinfo(ai);
		pconn_fail(pc, 502, "cannot resolve the host", "failed");
		return;
	}
	pc->ai = ai;
	pconn_connect(pc);
}

/* Takes the target apart: CONNECT host:port, else http://host[:port]/path. */
static int
pconn_target(struct pconn *pc)
{
	const char	*t = pc->head.target, *end, *colon;
	char		*hostport;
	long		 port;

	pc->tunnel = strcmp(pc->head.method, "CONNECT") == 0;
	if (!pc->tunnel) {
		if (strncasecmp(t, "http://", 7) != 0)
			return -1;
		t += 7;
	}
	end = t + strcspn(t, "/?#");
	hostport = xstrndup(t, end - t);
	if (strchr(hostport, '@') != NULL) {
		free(hostport);
		return -1;
	}
	if (hostport[0] == '[') {
		if ((colon = strchr(hostport, ']')) == NULL) {
			free(hostport);
			return -1;
		}
		pc->host = xstrndup(hostport + 1, colon - hostport - 1);
		colon = colon[1] == ':' ? colon + 1 : NULL;
	} else {
		colon = strrchr(hostport, ':');
		pc->host = xstrndup(hostport, colon != NULL ? (size_t)(colon - hostport) :
		    strlen(hostport));
	}
	port = pc->tunnel ? -1 : 80;
	if (colon != NULL)
		port = strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
		    colon[1] != '\0' && strlen(colon + 1) <= 5 ? strtol(colon + 1, NULL, 10) : -1;
	free(hostport);
	if (port <= 0 || port > 65535 || *pc->host == '\0')
		return -1;
	pc->port = (int)port;
	return 0;
}

static void
pconn_head_cb(struct bufferevent *bev, void *arg)
{
	struct pconn			*pc = arg;
	struct evbuffer			*in = bufferevent_get_input(bev);
	struct evutil_addrinfo		 hints;
	struct evdns_getaddrinfo_request *req;
	char				*text, port[8];
	const char			*name;
	size_t				 len;
	int				 rc;

	if ((rc = http_head_take(in, &text, &len)) <= 0) {
		if (rc < 0)
			pconn_fail(pc, 400, "request head too large", "bad-request");
		return;
	}
	bufferevent_disable(bev, EV_READ);
	bufferevent_set_timeouts(bev, NULL, NULL);
	if (http_head_parse(text, len, &pc->head) != 0 || pconn_target(pc) != 0) {
		free(text);
		pconn_fail(pc, 400, "expected CONNECT host:port or an absolute http:// URI",
		    "bad-request");
		return;
	}
	/* A placeholder goes only to its secret's hosts (and there only inside TLS). */
	if ((name = intercept_foreign(pc->p->intercept, pc->host, text, len)) != NULL) {
		free(text);
		log_warn("event=egress.placeholder_refused run=%s host=%s secret=%s where=%s",
		    pc->p->run, log_q(pc->host), name, pc->tunnel ? "connect" : "http");
		pconn_fail(pc, 403, "a secret's placeholder may only go to the secret's hosts",
		    "refused");
		return;
	}
	free(text);
	if (!proxy_allowed(pc->p->allow, pc->host, pc->port)) {
		pconn_fail(pc, 403, "host not in the automation's network.allow", "denied");
		return;
	}
	/* Resolved here, outside the sandbox; a literal address resolves to itself. */
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	snprintf(port, sizeof port, "%d", pc->port);
	pc->resolving = 1;
	req = evdns_getaddrinfo(pc->p->dns, pc->host, port, &hints, pconn_dns_cb, pc);
	if (pc->resolving)
		pc->dns = req;
}

static void
pconn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct pconn	*pc = arg;

	/* The run went away before its request was through. */
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		if (pc->host != NULL)
			pconn_record(pc, 0, 0, "closed");
		pconn_free(pc);
	}
}

static void
proxy_accept_cb(struct evconnlistener *l, int fd, struct sockaddr *sa, int len, void *arg)
{
	struct proxy	*p = arg;
	struct pconn	*pc;
	struct timeval	 tv = { PROXY_HEAD_SECS, 0 };

	if (egress_gate_admit(&p->gate, fd) != 0)
		return;
	pc = xcalloc(1, sizeof *pc);
	pc->p = p;
	evutil_make_socket_nonblocking(fd);
	pc->cli = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
	LIST_INSERT_HEAD(&p->conns, pc, entry);
	bufferevent_setcb(pc->cli, pconn_head_cb, NULL, pconn_event_cb, pc);
	bufferevent_setwatermark(pc->cli, EV_READ, 0, HTTP_HEAD_MAX + 8);
	bufferevent_set_timeouts(pc->cli, &tv, NULL);
	bufferevent_enable(pc->cli, EV_READ);
}

static void
proxy_accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct proxy	*p = arg;

	egress_gate_failed(&p->gate);
}

struct proxy *
proxy_create(struct event_base *base, struct evdns_base *dns, struct engine *engine,
    const char *run, char *const *allow, const char *path, int *port, char **cause)
{
	struct proxy	*p;
	size_t		 n, i;

	p = xcalloc(1, sizeof *p);
	p->base = base;
	p->dns = dns;
	p->engine = engine;
	p->run = xstrdup(run);
	for (n = 0; allow != NULL && allow[n] != NULL; n++)
		;
	p->allow = xcalloc(n + 1, sizeof *p->allow);
	for (i = 0; i < n; i++)
		p->allow[i] = xstrdup(allow[i]);
	LIST_INIT(&p->conns);
	if (path != NULL)
		p->path = xstrdup(path);
	if ((p->lis = egress_listen(base, path, port, proxy_accept_cb, p, cause)) == NULL) {
		proxy_free(p);
		return NULL;
	}
	egress_gate_init(&p->gate, base, p->lis, "proxy", p->run);
	evconnlistener_set_error_cb(p->lis, proxy_accept_error_cb);
	return p;
}

void
proxy_free(struct proxy *p)
{
	struct pconn	*pc;
	size_t		 i;

	if (p == NULL)
		return;
	if (p->lis != NULL)
		evconnlistener_free(p->lis);
	egress_gate_clear(&p->gate);
	/* The run ended: what is still open is cut, and logged with what it moved. */
	while ((pc = LIST_FIRST(&p->conns)) != NULL) {
		if (pc->icc != NULL)
			pconn_record(pc, 0, 0, "intercepted");
		else if (pc->relay != NULL)
			pconn_record(pc, relay_bytes(pc->relay, 0),
			    relay_bytes(pc->relay, 1) + pc->head_out, "allowed");
		else if (pc->host != NULL)
			pconn_record(pc, 0, 0, "closed");
		pconn_free(pc);
	}
	if (p->path != NULL)
		(void)unlink(p->path);
	for (i = 0; p->allow[i] != NULL; i++)
		free(p->allow[i]);
	free(p->allow);
	free(p->path);
	free(p->run);
	free(p);
}
