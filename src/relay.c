/* relay.c: what a run's listeners share (proxy.c, gateway.c, intercept.c): the gate, request heads, the relay. */
#include "spur.h"
#include "egress.h"

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
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define RELAY_HIGH		(256 * 1024)	/* stop reading while the other side has this much */
#define RELAY_IDLE_SECS		900		/* a tunnel silent this long is closed */

struct evconnlistener *
egress_listen(struct event_base *base, const char *path, int *port,
    void (*cb)(struct evconnlistener *, int, struct sockaddr *, int, void *), void *arg,
    char **cause)
{
	struct evconnlistener	*l;
	struct sockaddr_un	 sun;
	struct sockaddr_in	 sin;
	socklen_t		 len = sizeof sin;
	unsigned		 flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC;

	if (path != NULL) {
		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		if (strlen(path) >= sizeof sun.sun_path) {
			*cause = xprintf("%s: socket path too long", path);
			return NULL;
		}
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
		(void)unlink(path);
		l = evconnlistener_new_bind(base, cb, arg, flags, 64,
		    (struct sockaddr *)&sun, sizeof sun);
		/* The sandbox user connects; the directory decides who else can. */
		if (l != NULL && chmod(path, 0666) != 0) {
			evconnlistener_free(l);
			l = NULL;
		}
	} else {
		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		l = evconnlistener_new_bind(base, cb, arg, flags | LEV_OPT_REUSEABLE, 64,
		    (struct sockaddr *)&sin, sizeof sin);
		if (l != NULL && getsockname(evconnlistener_get_fd(l),
		    (struct sockaddr *)&sin, &len) == 0)
			*port = ntohs(sin.sin_port);
	}
	if (l == NULL)
		*cause = xprintf("listen %s: %s", path != NULL ? path : "127.0.0.1",
		    strerror(errno));
	return l;
}

void
egress_gate_init(struct egress_gate *g, struct event_base *base, struct evconnlistener *lis,
    const char *what, const char *run)
{
	memset(g, 0, sizeof *g);
	lpause_init(&g->pause, base, lis);
	g->what = what;
	g->run = run;
}

int
egress_gate_admit(struct egress_gate *g, int fd)
{
	if (g->open >= EGRESS_MAX_CONNS) {
		evutil_closesocket(fd);
		if (!g->capped)
			log_warn("event=egress.too_many_connections run=%s listener=%s limit=%d "
			    "consequence=\"new connections closed until some end\"", g->run, g->what,
			    EGRESS_MAX_CONNS);
		g->capped = 1;
		return -1;
	}
	g->open++;
	return 0;
}

void
egress_gate_leave(struct egress_gate *g)
{
	g->open--;
}

void
egress_gate_failed(struct egress_gate *g)
{
	int	 err = EVUTIL_SOCKET_ERROR();

	if (lpause_failed(&g->pause))
		log_warn("event=egress.accept_failed run=%s listener=%s error=%s consequence="
		    "\"not accepting for %d ms\"", g->run, g->what, log_q(strerror(err)),
		    LPAUSE_MS);
}

void
egress_gate_clear(struct egress_gate *g)
{
	lpause_clear(&g->pause);
}

/*
 * HTTP request heads.
 */

/* RFC 9110 token characters, for methods and header names. */
static int
http_token(const char *s)
{
	return *s != '\0' && strspn(s, "!#$%&'*+-.^_`|~0123456789"
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(s);
}

/* A field value: visible characters, spaces and tabs (a bare CR or LF makes one line two). */
static int
http_field_value(const char *s)
{
	const unsigned char	*p;

	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			return 0;
	}
	return 1;
}

/*
 * Strict, because what passes here is sent on: METHOD SP target SP HTTP/1.x,
 * then name: value lines, each ended by CRLF; no folding, no second Host.
 */
int
http_head_parse(const char *text, size_t len, struct http_head *h)
{
	char		*copy, *line, *next, *sp, *colon, *v, *end;
	const char	*t;
	int		 first = 1;

	memset(h, 0, sizeof *h);
	if (memchr(text, '\0', len) != NULL)
		return -1;
	copy = xstrndup(text, len);
	for (line = copy; line != NULL; line = next) {
		if ((next = strstr(line, "\r\n")) != NULL) {
			*next = '\0';
			next += 2;
		}
		if (first) {
			first = 0;
			if ((sp = strchr(line, ' ')) == NULL)
				goto fail;
			h->method = xstrndup(line, sp - line);
			line = sp + 1;
			if ((sp = strchr(line, ' ')) == NULL)
				goto fail;
			h->target = xstrndup(line, sp - line);
			h->version = xstrdup(sp + 1);
			for (t = h->target; *t > ' ' && *t < 0x7f; t++)
				;
			if (!http_token(h->method) || *h->target == '\0' || *t != '\0' ||
			    strncmp(h->version, "HTTP/1.", 7) != 0 ||
			    strspn(h->version + 7, "0123456789") != 1 || h->version[8] != '\0')
				goto fail;
			continue;
		}
		if (*line == ' ' || *line == '\t' || h->n == HTTP_HEADERS_MAX)
			goto fail;	/* obsolete folding, or too many */
		if ((colon = strchr(line, ':')) == NULL || colon == line)
			goto fail;
		v = colon + 1;
		v += strspn(v, " \t");
		for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
			;
		*end = '\0';
		h->name[h->n] = xstrndup(line, colon - line);
		h->value[h->n] = xstrdup(v);
		h->n++;
		if (!http_token(h->name[h->n - 1]) || !http_field_value(v) ||
		    http_head_count(h, "host") > 1)
			goto fail;
	}
	free(copy);
	return first ? -1 : 0;
fail:
	free(copy);
	http_head_clear(h);
	return -1;
}

int
http_head_take(struct evbuffer *in, char **text, size_t *len)
{
	struct evbuffer_ptr	 end;

	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos == -1)
		return evbuffer_get_length(in) > HTTP_HEAD_MAX ? -1 : 0;
	*len = (size_t)end.pos;
	*text = xmalloc(*len + 1);
	evbuffer_remove(in, *text, *len);
	evbuffer_drain(in, 4);
	(*text)[*len] = '\0';
	return 1;
}

size_t
http_head_count(const struct http_head *h, const char *name)
{
	size_t	i, n = 0;

	for (i = 0; i < h->n; i++)
		n += strcasecmp(h->name[i], name) == 0;
	return n;
}

const char *
http_head_get(const struct http_head *h, const char *name)
{
	size_t	i;

	for (i = 0; i < h->n; i++) {
		if (strcasecmp(h->name[i], name) == 0)
			return h->value[i];
	}
	return NULL;
}

void
http_head_clear(struct http_head *h)
{
	size_t	i;

	free(h->method);
	free(h->target);
	free(h->version);
	for (i = 0; i < h->n; i++) {
		free(h->name[i]);
		free(h->value[i]);
	}
	memset(h, 0, sizeof *h);
}

/*
 * The relay: two bufferevents joined, with back pressure both ways.
 */

struct relay {
	struct bufferevent	*bev[2];
	uint64_t		 bytes[2];	/* read from side i, written to the other */
	int			 closing;
	void			(*done)(struct relay *, void *);
	void			*arg;
	struct event		*done_ev;
	const char		*(*watch)(void *, const void *, size_t);
	void			*watch_arg;
	const char		*cut;		/* what watch found */
};

static void	relay_read_cb(struct bufferevent *, void *);
static void	relay_event_cb(struct bufferevent *, short, void *);

static int
relay_side(struct relay *r, struct bufferevent *bev)
{
	return bev == r->bev[0] ? 0 : 1;
}

static void
relay_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	r->done(r, r->arg);
}

/* Ends once: from the loop, never inside a bufferevent callback of ours. */
static void
relay_end(struct relay *r)
{
	if (r->closing)
		return;
	r->closing = 1;
	bufferevent_disable(r->bev[0], EV_READ | EV_WRITE);
	bufferevent_disable(r->bev[1], EV_READ | EV_WRITE);
	event_active(r->done_ev, EV_TIMEOUT, 1);
}

static void
relay_drained_cb(struct bufferevent *bev, void *arg)
{
	struct relay	*r = arg;
	int		 i = relay_side(r, bev);

	/* bev's output drained: read from the other side again. */
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_setcb(bev, relay_read_cb, NULL, relay_event_cb, r);
	bufferevent_enable(r->bev[!i], EV_READ);
}

static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct relay		*r = arg;
	int			 i = relay_side(r, bev);
	struct bufferevent	*to = r->bev[!i];
	struct evbuffer		*in = bufferevent_get_input(bev);
	size_t			 len = evbuffer_get_length(in);

	if (r->closing)
		return;
	if (i == 0 && r->watch != NULL && len > 0 &&
	    (r->cut = r->watch(r->watch_arg, evbuffer_pullup(in, -1), len)) != NULL) {
		evbuffer_drain(in, len);
		relay_end(r);
		return;
	}
	r->bytes[i] += len;
	evbuffer_add_buffer(bufferevent_get_output(to), in);
	if (evbuffer_get_length(bufferevent_get_output(to)) >= RELAY_HIGH) {
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, RELAY_HIGH / 2, 0);
		bufferevent_setcb(to, relay_read_cb, relay_drained_cb,
		    relay_event_cb, r);
	}
}

static void
relay_flushed_cb(struct bufferevent *bev, void *arg)
{
	relay_end(arg);
}

static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct relay		*r = arg;
	int			 i = relay_side(r, bev);
	struct bufferevent	*to = r->bev[!i];

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	/* What this side said last still goes to the other, then both close. */
	if (what & BEV_EVENT_EOF)
		relay_read_cb(bev, r);
	if (r->closing)
		return;		/* what it read was cut */
	if ((what & BEV_EVENT_EOF) && evbuffer_get_length(bufferevent_get_output(to)) > 0) {
		bufferevent_disable(bev, EV_READ);
		bufferevent_disable(to, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, 0, 0);
		bufferevent_setcb(to, NULL, relay_flushed_cb, relay_event_cb, r);
		bufferevent_setcb(bev, NULL, NULL, relay_event_cb, r);
		return;
	}
	relay_end(r);
}

const char *
relay_cut(const struct relay *r)
{
	return r->cut;
}

struct relay *
relay_start_watched(struct bufferevent *a, struct bufferevent *b,
    void (*done)(struct relay *, void *), void *arg,
    const char *(*watch)(void *, const void *, size_t), void *watch_arg)
{
	struct relay	*r = xcalloc(1, sizeof *r);
	struct timeval	 tv = { RELAY_IDLE_SECS, 0 };

	r->watch = watch;
	r->watch_arg = watch_arg;
	r->bev[0] = a;
	r->bev[1] = b;
	r->done = done;
	r->arg = arg;
	r->done_ev = event_new(bufferevent_get_base(a), -1, 0, relay_done_cb, r);
	bufferevent_setcb(a, relay_read_cb, NULL, relay_event_cb, r);
	bufferevent_setcb(b, relay_read_cb, NULL, relay_event_cb, r);
	bufferevent_set_timeouts(a, &tv, NULL);
	bufferevent_set_timeouts(b, &tv, NULL);
	bufferevent_enable(a, EV_READ | EV_WRITE);
	bufferevent_enable(b, EV_READ | EV_WRITE);
	/* Anything already read (a request body after its head) goes now. */
	if (evbuffer_get_length(bufferevent_get_input(a)) > 0)
		relay_read_cb(a, r);
	if (evbuffer_get_length(bufferevent_get_input(b)) > 0)
		relay_read_cb(b, r);
	return r;
}

uint64_t
relay_bytes(const struct relay *r, int a_to_b)
{
	return r->bytes[a_to_b ? 0 : 1];
}

void
relay_free(struct relay *r)
{
	if (r == NULL)
		return;
	bufferevent_free(r->bev[0]);
	bufferevent_free(r->bev[1]);
	event_free(r->done_ev);
	free(r);
}

void
proxy_answer(struct evbuffer *out, int status, const char *reason, const char *verdict)
{
	char	*body = xprintf("spur proxy: %s\n", reason);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n"
	    "X-Spur-Verdict: %s\r\n\r\n%s", status, status == 403 ? "Forbidden" :
	    status == 400 ? "Bad Request" : "Bad Gateway", strlen(body), verdict, body);
	free(body);
}
