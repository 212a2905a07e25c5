/* api-events.h: a run's Server-Sent Events (SPEC section 12), served by an HTTP front. */
#ifndef SPUR_API_EVENTS_H
#define SPUR_API_EVENTS_H

struct event_base;
struct evhttp_request;
struct reqclock;
struct api_events;

/* One per front: its streams, on its base, closed through its clock; the store spur.yaml names. */
struct api_events *api_events_new(struct event_base *, struct reqclock *,
		     const char *store_url, const char *data_dir);
void		 api_events_free(struct api_events *);
/* Front: req (checked by api.c) becomes the run's event stream, resumed after last_event_id. */
void		 api_events_start(struct api_events *, struct evhttp_request *, const char *run,
		     const char *last_event_id);

#endif
