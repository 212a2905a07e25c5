/* fire.h: the dry run of one payload: what `spur fire` prints and the console's why shows. */
#ifndef SPUR_FIRE_H
#define SPUR_FIRE_H

#include <jansson.h>
#include <stddef.h>

struct automation_set;
struct config;
struct header;
struct spur_event;

/*
 * The event ev would be, each automation of org it matches with the exact
 * prompt and repository its run would get, and why each other one of org does
 * not: {"event", "matches": [{automation, file, prompt, repository,
 * repository_error?}], "not_matched": [{automation, file, why}]}.
 */
json_t	*fire_event(struct automation_set *, const char *org, struct spur_event *ev);
/*
 * A payload as a source would take it, no signature verified: 0 and *out as
 * fire_event says; 1 and *out {"reply": text} when the source answers it
 * itself (a challenge); -1 and *cause (to free). hook: a system's name
 * (source.h) or a generic hook's; event: the event type, sent in the
 * system's event_header when it has one (or NULL).
 * headers has room for two more.
 */
int	 fire_payload(const struct config *, struct automation_set *, const char *org,
	    const char *hook, const char *event, struct header *headers, size_t nheaders,
	    char *body, size_t len, json_t **out, char **cause);

#endif
