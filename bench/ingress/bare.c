/* bench/ingress/bare.c: an evhttp server that answers 200 "ok" to anything, the ceiling for spur's ingress. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Same library, same listener setup and keep-alive handling as spur's server.c, and
 * nothing else: no parsing, no signature, no store. What spur adds over this is the cost
 * of what it promises.
 */
static void
bare_request_cb(struct evhttp_request *req, void *arg)
{
	struct evbuffer	*out = arg;

	evbuffer_add(out, "ok\n", 3);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain");
	evhttp_send_reply(req, 200, "OK", out);
}

static void
bare_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

int
main(int argc, char **argv)
{
	struct event_base	*base;
	struct evhttp		*http;
	struct evbuffer		*out;
	struct event		*sigterm, *sigint;
	const char		*host = "127.0.0.1";
	int			 port;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: bare PORT [HOST]\n");
		return 2;
	}
	port = atoi(argv[1]);
	if (argc == 3)
		host = argv[2];
	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL || (http = evhttp_new(base)) == NULL) {
		fprintf(stderr, "bare: cannot create the event base\n");
		return 1;
	}
	out = evbuffer_new();
	evhttp_set_gencb(http, bare_request_cb, out);
	if (evhttp_bind_socket(http, host, port) != 0) {
		fprintf(stderr, "bare: cannot listen on %s:%d\n", host, port);
		return 1;
	}
	sigterm = evsignal_new(base, SIGTERM, bare_signal_cb, base);
	sigint = evsignal_new(base, SIGINT, bare_signal_cb, base);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	fprintf(stderr, "bare: listening on %s:%d\n", host, port);
	event_base_dispatch(base);
	event_free(sigterm);
	event_free(sigint);
	evhttp_free(http);
	evbuffer_free(out);
	event_base_free(base);
	return 0;
}
