/* bench/ingress/floor.c: the least a durable webhook receiver does: HMAC, append, group fdatasync, 200. */
#include "spur.h"

#include <sys/queue.h>
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>

/*
 * Not a webhook server anyone should run: it parses no JSON, deduplicates
 * nothing and keeps no index. It is the floor under any receiver that keeps
 * the promise "a 200 means the delivery is on disk" on this machine: one
 * evhttp loop checks X-Hub-Signature-256 over the body and appends the body to
 * a file; a writer thread fdatasyncs what was appended (one sync for all that
 * arrived meanwhile, as spur's group commit) and hands the answers back. If
 * this cannot reach a throughput, no durable receiver can.
 */
struct waiting {
	struct evhttp_request	*req;
	TAILQ_ENTRY(waiting)	 entry;
};
TAILQ_HEAD(waitq, waiting);

struct floor {
	struct event_base	*base;
	const char		*secret;
	int			 fd;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	struct waitq		 appended;	/* written, not yet synced */
	struct waitq		 synced;	/* synced, to answer */
	struct event		*synced_ev;
	int			 stop;
	int			 failed;
};

/* X-Hub-Signature-256: sha256=<64 hex>, with spur's own HMAC and constant-time compare. */
static int
floor_verify(struct floor *fl, const char *sig, const unsigned char *body, size_t len)
{
	unsigned char	 want[32], got[32];

	if (sig == NULL || strncmp(sig, "sha256=", 7) != 0 ||
	    hex_decode(sig + 7, strlen(sig + 7), got, sizeof got) != 0)
		return -1;
	hmac_sha256(fl->secret, strlen(fl->secret), body, len, want);
	return ct_equal(want, got, sizeof want) ? 0 : -1;
}

static void
floor_reply(struct evhttp_request *req, int status, const char *reason, const char *text)
{
	struct evbuffer	*out = evbuffer_new();

	evbuffer_add(out, text, strlen(text));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain");
	evhttp_send_reply(req, status, reason, out);
	evbuffer_free(out);
}

/* The client left before its answer (wrk stopping): evhttp frees the request. */
static void
floor_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct waiting	*w = arg;

	w->req = NULL;
}

static void
floor_request_cb(struct evhttp_request *req, void *arg)
{
	struct floor	*fl = arg;
	struct evbuffer	*in = evhttp_request_get_input_buffer(req);
	size_t		 len = evbuffer_get_length(in);
	unsigned char	*body = evbuffer_pullup(in, -1);
	const char	*sig = evhttp_find_header(evhttp_request_get_input_headers(req),
			    "X-Hub-Signature-256");
	struct waiting	*w;
	ssize_t		 n;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		floor_reply(req, 405, "Method Not Allowed", "");
		return;
	}
	if (floor_verify(fl, sig, body, len) != 0) {
		floor_reply(req, 401, "Unauthorized", "{\"error\":\"unauthorized\"}");
		return;
	}
	/* One write per delivery; the file offset is the loop's alone. */
	if ((n = write(fl->fd, body, len)) < 0 || (size_t)n != len) {
		floor_reply(req, 503, "Service Unavailable", "cannot append\n");
		return;
	}
	if ((w = malloc(sizeof *w)) == NULL) {
		floor_reply(req, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	w->req = req;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), floor_close_cb, w);
	pthread_mutex_lock(&fl->mu);
	TAILQ_INSERT_TAIL(&fl->appended, w, entry);
	pthread_cond_signal(&fl->cv);
	pthread_mutex_unlock(&fl->mu);
}

/* Loop: everything the writer synced is on disk; answer it. */
static void
floor_synced_cb(evutil_socket_t fd, short what, void *arg)
{
	struct floor	*fl = arg;
	struct waitq	 done;
	struct waiting	*w;
	int		 failed;

	TAILQ_INIT(&done);
	pthread_mutex_lock(&fl->mu);
	TAILQ_CONCAT(&done, &fl->synced, entry);
	failed = fl->failed;
	pthread_mutex_unlock(&fl->mu);
	while ((w = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, w, entry);
		if (w->req != NULL) {
			evhttp_connection_set_closecb(evhttp_request_get_connection(w->req),
			    NULL, NULL);
			if (failed)
				floor_reply(w->req, 503, "Service Unavailable",
				    "fdatasync failed\n");
			else
				floor_reply(w->req, 200, "OK", "ok\n");
		}
		free(w);
	}
}

static void *
floor_writer(void *arg)
{
	struct floor	*fl = arg;
	struct waitq	 batch;
	int		 rc;

	TAILQ_INIT(&batch);
	pthread_mutex_lock(&fl->mu);
	for (;;) {
		while (!fl->stop && TAILQ_EMPTY(&fl->appended))
			pthread_cond_wait(&fl->cv, &fl->mu);
		if (fl->stop)
			break;
		/* What was appended before the sync is covered by it. */
		TAILQ_CONCAT(&batch, &fl->appended, entry);
		pthread_mutex_unlock(&fl->mu);
		if ((rc = fdatasync(fl->fd)) != 0)
			fprintf(stderr, "floor: fdatasync: %s\n", strerror(errno));
		pthread_mutex_lock(&fl->mu);
		if (rc != 0)
			fl->failed = 1;
		TAILQ_CONCAT(&fl->synced, &batch, entry);
		event_active(fl->synced_ev, 0, 0);
	}
	pthread_mutex_unlock(&fl->mu);
	return NULL;
}

static void
floor_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

int
main(int argc, char **argv)
{
	struct floor	 fl;
	struct evhttp	*http;
	struct event	*sigterm, *sigint;
	pthread_t	 writer;
	const char	*host = "127.0.0.1";

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: floor PORT FILE SECRET [HOST]\n");
		return 2;
	}
	if (argc == 5)
		host = argv[4];
	memset(&fl, 0, sizeof fl);
	fl.secret = argv[3];
	signal(SIGPIPE, SIG_IGN);
	if ((fl.fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) == -1) {
		fprintf(stderr, "floor: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	evthread_use_pthreads();
	if ((fl.base = event_base_new()) == NULL || (http = evhttp_new(fl.base)) == NULL) {
		fprintf(stderr, "floor: cannot create the event base\n");
		return 1;
	}
	pthread_mutex_init(&fl.mu, NULL);
	pthread_cond_init(&fl.cv, NULL);
	TAILQ_INIT(&fl.appended);
	TAILQ_INIT(&fl.synced);
	fl.synced_ev = event_new(fl.base, -1, 0, floor_synced_cb, &fl);
	evhttp_set_max_body_size(http, 25 << 20);
	evhttp_set_gencb(http, floor_request_cb, &fl);
	if (evhttp_bind_socket(http, host, atoi(argv[1])) != 0) {
		fprintf(stderr, "floor: cannot listen on %s:%s\n", host, argv[1]);
		return 1;
	}
	if (pthread_create(&writer, NULL, floor_writer, &fl) != 0) {
		fprintf(stderr, "floor: cannot start the writer\n");
		return 1;
	}
	sigterm = evsignal_new(fl.base, SIGTERM, floor_signal_cb, fl.base);
	sigint = evsignal_new(fl.base, SIGINT, floor_signal_cb, fl.base);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	fprintf(stderr, "floor: listening on %s:%s, appending to %s\n", host, argv[1], argv[2]);
	event_base_dispatch(fl.base);
	pthread_mutex_lock(&fl.mu);
	fl.stop = 1;
	pthread_cond_signal(&fl.cv);
	pthread_mutex_unlock(&fl.mu);
	pthread_join(writer, NULL);
	event_free(sigterm);
	event_free(sigint);
	event_free(fl.synced_ev);
	evhttp_free(http);
	event_base_free(fl.base);
	close(fl.fd);
	return 0;
}
