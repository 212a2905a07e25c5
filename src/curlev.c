/* curlev.c: libcurl's multi interface driven by a libevent base, so transfers share the engine's loop. */
#include "spur.h"
#include "curlev.h"

#include <stdlib.h>

#include <curl/curl.h>
#include <event2/event.h>

struct curlev {
	struct event_base	*base;
	CURLM			*multi;
	struct event		*timer;		/* curl's timeout */
	curlev_done_cb		 done;
	void			*arg;
};

/*
 * Each finished transfer leaves the multi before its callback: the callback
 * may clean it up at once, and the message does not outlive the removal.
 */
static void
curlev_check(struct curlev *cv)
{
	CURLMsg		*m;
	CURL		*easy;
	CURLcode	 result;
	int		 left;

	while ((m = curl_multi_info_read(cv->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		easy = m->easy_handle;
		result = m->data.result;
		curl_multi_remove_handle(cv->multi, easy);
		cv->done(easy, result, cv->arg);
	}
}

static void
curlev_ready_cb(evutil_socket_t fd, short what, void *arg)
{
	struct curlev	*cv = arg;
	int		 running, flags = 0;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(cv->multi, fd, flags, &running);
	curlev_check(cv);
}

static void
curlev_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct curlev	*cv = arg;
	int		 running;

	curl_multi_socket_action(cv->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	curlev_check(cv);
}

/* curl says which sockets to watch: one persistent event a socket, made again when what changes. */
static int
curlev_watch_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct curlev	*cv = userp;
	struct event	*ev = socketp;
	short		 kind = EV_PERSIST;

	if (ev != NULL) {
		event_free(ev);
		curl_multi_assign(cv->multi, s, NULL);
	}
	if (what == CURL_POLL_REMOVE)
		return 0;
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if ((ev = event_new(cv->base, s, kind, curlev_ready_cb, cv)) == NULL)
		fatal("event_new");
	event_add(ev, NULL);
	curl_multi_assign(cv->multi, s, ev);
	return 0;
}

/* curl wants to act again in ms (-1: no timeout); 0 runs from the loop, never from inside curl. */
static int
curlev_timer_cb(CURLM *multi, long ms, void *userp)
{
	struct curlev	*cv = userp;
	struct timeval	 tv;

	if (ms < 0) {
		evtimer_del(cv->timer);
		return 0;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(cv->timer, &tv);
	return 0;
}

struct curlev *
curlev_create(struct event_base *base, curlev_done_cb done, void *arg)
{
	struct curlev	*cv = xcalloc(1, sizeof *cv);
	static int	 inited;

	/* Before the first multi; the engine calls curl from its one thread. */
	if (!inited) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
			fatal("curl_global_init");
		inited = 1;
	}
	cv->base = base;
	cv->done = done;
	cv->arg = arg;
	if ((cv->multi = curl_multi_init()) == NULL)
		fatal("curl_multi_init");
	if ((cv->timer = evtimer_new(base, curlev_timeout_cb, cv)) == NULL)
		fatal("evtimer_new");
	curl_multi_setopt(cv->multi, CURLMOPT_SOCKETFUNCTION, curlev_watch_cb);
	curl_multi_setopt(cv->multi, CURLMOPT_SOCKETDATA, cv);
	curl_multi_setopt(cv->multi, CURLMOPT_TIMERFUNCTION, curlev_timer_cb);
	curl_multi_setopt(cv->multi, CURLMOPT_TIMERDATA, cv);
	return cv;
}

CURLMcode
curlev_add(struct curlev *cv, CURL *easy)
{
	return curl_multi_add_handle(cv->multi, easy);
}

void
curlev_remove(struct curlev *cv, CURL *easy)
{
	/* curl answers OK for a handle that already left (a finished one). */
	curl_multi_remove_handle(cv->multi, easy);
}

void
curlev_free(struct curlev *cv)
{
	if (cv == NULL)
		return;
	curl_multi_cleanup(cv->multi);
	event_free(cv->timer);
	free(cv);
}
