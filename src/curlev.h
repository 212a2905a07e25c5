/* curlev.h: libcurl's multi interface driven by a libevent base (the outbox's and the gateway's transfers). */
#ifndef SPUR_CURLEV_H
#define SPUR_CURLEV_H

#include <curl/curl.h>

struct event_base;
struct curlev;

/*
 * A transfer finished. It has already left the multi: the callback owns easy
 * again (to clean up or reuse) and may add and remove other handles, but
 * must not free the curlev.
 */
typedef void (*curlev_done_cb)(CURL *easy, CURLcode result, void *arg);

/* Initializes libcurl the first time; out of memory is fatal. */
struct curlev	*curlev_create(struct event_base *, curlev_done_cb, void *arg);
CURLMcode	 curlev_add(struct curlev *, CURL *);
/* Takes a transfer out (no callback for it); nothing when it already left. */
void		 curlev_remove(struct curlev *, CURL *);
/* Remove every transfer first. */
void		 curlev_free(struct curlev *);

#endif
