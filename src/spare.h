/* spare.h: a run's and a session's directories made ahead, renamed into place when a run starts. */
#ifndef SPUR_SPARE_H
#define SPUR_SPARE_H

struct event_base;
struct spare;

/*
 * What a start makes, as spare_take hands it over:
 *   SPARE_RUN      runs/ID: 0750 less the umask, with artifacts/ (0700) and
 *                  an empty output.log (0640 less the umask);
 *   SPARE_SESSION  sessions/ID: 0711, with workspace/ and home/ (0700).
 * All of them the engine's: the sandbox's uid gets its own by the same
 * checked request as before (PRIV_PREPARE_DIR chowns what is there).
 */
enum spare_kind {
	SPARE_RUN,
	SPARE_SESSION,
	SPARE_KINDS
};

/* Loop: removes what an earlier engine left under data_dir and makes the first ones soon. */
struct spare	*spare_create(struct event_base *, const char *data_dir);
void		 spare_free(struct spare *);

/*
 * Renames a spare of kind into path (which must not exist: it is never
 * replaced) and makes another one a moment later, off the start's path.
 * 0, or -1 when there was none or path is there already: the caller makes
 * it as before.
 */
int		 spare_take(struct spare *, enum spare_kind, const char *path);

/* How many starts took a spare, and how many found none (tests, metrics). */
void		 spare_counts(const struct spare *, unsigned long *taken,
		    unsigned long *missed);

#endif
