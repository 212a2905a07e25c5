/* people.h: who an event's actor is, asked of its source's API (authors: members, groups, teams), cached. */
#ifndef SPUR_PEOPLE_H
#define SPUR_PEOPLE_H

struct engine;
struct people;
struct person;
struct spur_event;

#define PEOPLE_TTL_MS		(10LL * 60 * 1000)	/* a person's facts are asked again after */
#define PEOPLE_MAX		4096			/* people cached; the oldest go first */

struct people	*people_create(struct engine *);
/* Cancels the lookups in flight: each one's callback gets NULL. */
void		 people_free(struct people *);
/*
 * Any thread: a copy of what is known of ev's actor, covering every group of
 * groups (NULL-terminated, may be NULL), or NULL when it must be looked up.
 */
struct person	*people_cached(struct people *, const struct spur_event *, char *const *groups);
/*
 * Loop: asks ev's source who its actor is, and whether they are in each of
 * groups; cb gets the facts (its own; failed says why nothing is known), or
 * NULL when the engine stops first.
 */
typedef void	(*people_cb)(struct person *, void *);
void		 people_lookup(struct people *, const struct spur_event *, char *const *groups,
		     people_cb, void *);

#endif
