/*
 * api-events.c: GET /o/{org}/runs/{id}/events, Server-Sent Events served by
 * the front that read the request, from the run's files and a read-only
 * store connection of its own: the engine's loop never waits on a reader.
 *
 * On several nodes a run's log is on the node that runs it, and in the store
 * (copied there as it grows, dispatch.c): a run whose log is not here is
 * read from the store, so any node serves any run's events, and offsets are
 * the same bytes on every node.
 *
 * Each event's id is "hN.oB.uR": N state changes and B bytes of output sent
 * so far, and the run's usage as of R model requests (a usage event is sent
 * when more have been counted), so Last-Event-ID resumes all three exactly
 * ("hN.oB", from before usage events, is read too). The output is read from the log
 * at the reader's pace: no more is read while API_EVENTS_HIGH bytes wait to be
 * taken, so a slow reader costs that much memory and loses nothing. A reader
 * that takes nothing for API_EVENTS_STALL_MS while that much waits is closed
 * (it may resume). A stream ends after the run's terminal state, once its
 * output is all sent.
 */
#include "spur.h"
#include "api-events.h"
#include "reqclock.h"
#include "store.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API_EVENTS_TICK_MS	200
#define API_EVENTS_CHUNK	(32 * 1024)	/* output bytes read per tick */
#define API_EVENTS_HIGH		(256 * 1024)	/* unsent bytes: read no more of the log */
#define API_EVENTS_STALL_MS	10000		/* that much untaken this long: closed */
#define API_EVENTS_KEEPALIVE_MS	15000

struct api_stream {
	struct api_events	*owner;
	struct evhttp_request	*req;
	char			*run;
	char			*log;
	int			 fd;
	int			 remote;	/* several nodes: no log here, the store's copy */
	long long		 nstates;	/* state events sent */
	long long		 off;		/* output bytes sent */
	long long		 nusage;	/* requests of the last usage event sent */
	int64_t			 last_write;
	size_t			 owed;		/* unsent bytes at the last tick */
	int64_t			 stuck_since;	/* when the reader last took something */
	struct event		*tick;
	LIST_ENTRY(api_stream)	 entry;
};

struct api_events {
	struct event_base	*base;
	struct reqclock		*clock;
	char			*store_url;	/* NULL: sqlite3 in data_dir */
	char			*data_dir;
	struct store		*st;		/* read-only, this front's */
	LIST_HEAD(, api_stream)	 streams;
};

struct api_events *
api_events_new(struct event_base *base, struct reqclock *clock, const char *store_url,
    const char *data_dir)
{
	struct api_events	*ae = xcalloc(1, sizeof *ae);

	ae->store_url = store_url != NULL ? xstrdup(store_url) : NULL;
	ae->base = base;
	ae->clock = clock;
	ae->data_dir = xstrdup(data_dir);
	LIST_INIT(&ae->streams);
	return ae;
}

static void
api_stream_free(struct api_stream *s)
{
	LIST_REMOVE(s, entry);
	if (s->req != NULL)
		reqclock_on_close(s->owner->clock, s->req, NULL, NULL);
	if (s->fd != -1)
		close(s->fd);
	event_free(s->tick);
	free(s->run);
	free(s->log);
	free(s);
}

void
api_events_free(struct api_events *ae)
{
	if (ae == NULL)
		return;
	while (!LIST_EMPTY(&ae->streams))
		api_stream_free(LIST_FIRST(&ae->streams));
	store_close(ae->st);
	free(ae->store_url);
	free(ae->data_dir);
	free(ae);
}

static void
api_stream_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct api_stream	*s = arg;

	/*
	 * A reader gone mid-stream (EOF): evhttp let go of the request it had
	 * not seen answered (no connection any more), which is ours to free.
	 */
	if (evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	s->req = NULL;
	api_stream_free(s);
}

/* Ends the stream: the run is over (ok) or the reader is too far behind (closed). */
static void
api_stream_end(struct api_stream *s, int ok)
{
	struct evhttp_connection *evcon;

	if (s->req != NULL) {
		reqclock_on_close(s->owner->clock, s->req, NULL, NULL);
		if (ok)
			evhttp_send_reply_end(s->req);
		else if ((evcon = evhttp_request_get_connection(s->req)) != NULL) {
			log_warn("event=api.events_reader_stalled run=%s owed=%zu consequence=\"stream "
			    "closed, the reader may resume with Last-Event-ID\"", s->run, s->owed);
			evhttp_connection_free(evcon);
		}
		s->req = NULL;
	}
	api_stream_free(s);
}

static int	api_stream_store(struct api_stream *);

static void
api_stream_send(struct api_stream *s, const char *type, json_t *data)
{
	struct evbuffer	*out = evbuffer_new();
	char		*d = json_dumps(data, JSON_COMPACT);

	evbuffer_add_printf(out, "id: h%lld.o%lld.u%lld\nevent: %s\ndata: %s\n\n", s->nstates,
	    s->off, s->nusage, type, d);
	evhttp_send_reply_chunk(s->req, out);
	evbuffer_free(out);
	free(d);
	json_decref(data);
	s->last_write = now_ms();
}

/* Bytes the reader has not taken yet. */
static size_t
api_stream_owed(struct api_stream *s)
{
	struct evhttp_connection	*evcon = evhttp_request_get_connection(s->req);
	struct bufferevent		*bev;

	if (evcon == NULL || (bev = evhttp_connection_get_bufferevent(evcon)) == NULL)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(bev));
}

/*
 * The output written since the last tick, as text: invalid UTF-8 becomes
 * U+FFFD, a sequence cut at the end waits for the next tick. 1 when
 * something was sent.
 */
static int
api_stream_output(struct api_stream *s)
{
	unsigned char	 raw[API_EVENTS_CHUNK];
	struct buf	 b;
	ssize_t		 n;
	size_t		 i = 0;
	uint32_t	 cp;
	int		 len;

	if (!s->remote && s->fd == -1 &&
	    (s->fd = open(s->log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		/* Another node runs it, or ran it: its copy in the store, as it grows. */
		if (api_stream_store(s) != 0 || !store_shared(s->owner->st))
			return 0;
		s->remote = 1;
	}
	n = s->remote ? store_run_output_read(s->owner->st, s->run, s->off, raw, sizeof raw) :
	    pread(s->fd, raw, sizeof raw, (off_t)s->off);
	if (n <= 0)
		return 0;
	buf_init(&b, 0);
	while (i < (size_t)n) {
		len = utf8_len(raw + i, (size_t)n - i, &cp);
		if (len == -1 && n == (ssize_t)sizeof raw)
			break;
		if (len <= 0) {
			buf_adds(&b, "\xef\xbf\xbd");
			i++;
		} else if (cp == 0) {
			buf_adds(&b, "\xef\xbf\xbd");
			i++;
		} else {
			buf_add(&b, raw + i, (size_t)len);
			i += (size_t)len;
		}
	}
	if (i == 0) {
		buf_free(&b);
		return 0;
	}
	s->off += (long long)i;
	api_stream_send(s, "output", json_pack("{s:s%}", "text", b.data != NULL ? b.data : "",
	    b.len));
	buf_free(&b);
	return 1;
}

/* The front's read-only store, opened on first use; -1 when it cannot be. */
static int
api_stream_store(struct api_stream *s)
{
	char	*cause = NULL;

	if (s->owner->st != NULL)
		return 0;
	if ((s->owner->st = store_open_url(s->owner->store_url, s->owner->data_dir, 1,
	    &cause)) == NULL) {
		log_warn("event=api.events_store_failed error=%s", log_q(cause));
		free(cause);
		return -1;
	}
	return 0;
}

/* The run's usage, when more model requests were counted than the last usage event said. */
static void
api_stream_usage(struct api_stream *s)
{
	json_t		*u;
	long long	 n;

	if (api_stream_store(s) != 0)
		return;
	u = store_usage_json(s->owner->st, s->run);
	if ((n = json_integer_value(json_object_get(u, "requests"))) > s->nusage) {
		s->nusage = n;
		api_stream_send(s, "usage", u);
	} else
		json_decref(u);
}

/* The state changes not sent yet; 1 when the last one sent is terminal. */
static int
api_stream_states(struct api_stream *s, int *terminal)
{
	json_t		*hist, *h;
	size_t		 i;
	enum run_state	 st;

	*terminal = 0;
	if (api_stream_store(s) != 0)
		return -1;
	if ((hist = store_run_history(s->owner->st, s->run)) == NULL)
		return -1;
	json_array_foreach(hist, i, h) {
		if ((long long)i < s->nstates)
			continue;
		s->nstates = (long long)i + 1;
		if (run_state_parse(json_string_value(json_object_get(h, "state")), &st) == 0 &&
		    run_state_terminal(st))
			*terminal = 1;
		/* StreamState says cause always: null before the end. */
		if (json_object_get(h, "cause") == NULL)
			json_object_set_new(h, "cause", json_null());
		api_stream_send(s, "state", json_incref(h));
	}
	if (json_array_size(hist) > 0 && (long long)json_array_size(hist) <= s->nstates) {
		h = json_array_get(hist, json_array_size(hist) - 1);
		*terminal = run_state_parse(json_string_value(json_object_get(h, "state")),
		    &st) == 0 && run_state_terminal(st);
	}
	json_decref(hist);
	return 0;
}

static void
api_stream_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api_stream	*s = arg;
	struct timeval		 tv = { 0, API_EVENTS_TICK_MS * 1000 };
	struct evbuffer		*out;
	size_t			 owed = api_stream_owed(s);
	int64_t			 now = now_ms();
	int			 terminal = 0, more = 1;

	/* A reader that takes nothing while a full buffer waits for it. */
	if (owed < API_EVENTS_HIGH || owed < s->owed)
		s->stuck_since = now;
	else if (now - s->stuck_since >= API_EVENTS_STALL_MS) {
		s->owed = owed;
		api_stream_end(s, 0);
		return;
	}
	/* Output first, at the reader's pace: a terminal state is the stream's last event. */
	while (more && api_stream_owed(s) < API_EVENTS_HIGH)
		more = api_stream_output(s);
	if (!more)
		api_stream_usage(s);
	if (!more && api_stream_states(s, &terminal) == 0 && terminal &&
	    !api_stream_output(s)) {
		/* What the agent wrote before it ended is sent before the end is. */
		api_stream_end(s, 1);
		return;
	}
	s->owed = api_stream_owed(s);
	if (s->owed == 0 && now - s->last_write >= API_EVENTS_KEEPALIVE_MS) {
		out = evbuffer_new();
		evbuffer_add_printf(out, ": keepalive\n\n");
		evhttp_send_reply_chunk(s->req, out);
		evbuffer_free(out);
		s->last_write = now;
	}
	evtimer_add(s->tick, &tv);
}

/* "hN.oB.uR" (or "hN.oB") into its counts; -1 when it is not one of ours. */
static int
api_events_parse_id(const char *id, long long *n, long long *b, long long *r)
{
	char	 tail;

	*r = 0;
	if (id == NULL || *id != 'h')
		return -1;
	if (sscanf(id, "h%lld.o%lld.u%lld%c", n, b, r, &tail) != 3 &&
	    (strstr(id, ".u") != NULL || sscanf(id, "h%lld.o%lld%c", n, b, &tail) != 2))
		return -1;
	return *n < 0 || *b < 0 || *r < 0 ? -1 : 0;
}

void
api_events_start(struct api_events *ae, struct evhttp_request *req, const char *run,
    const char *last_event_id)
{
	struct api_stream	*s = xcalloc(1, sizeof *s);
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);

	s->owner = ae;
	s->req = req;
	s->run = xstrdup(run);
	s->log = run_log_path(ae->data_dir, run);
	s->fd = -1;
	if (api_events_parse_id(last_event_id, &s->nstates, &s->off, &s->nusage) != 0)
		s->nstates = s->off = s->nusage = 0;
	s->tick = evtimer_new(ae->base, api_stream_tick_cb, s);
	LIST_INSERT_HEAD(&ae->streams, s, entry);
	reqclock_on_close(ae->clock, req, api_stream_closed_cb, s);
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	evhttp_send_reply_start(req, 200, "OK");
	s->last_write = s->stuck_since = now_ms();
	api_stream_tick_cb(-1, 0, s);
}
