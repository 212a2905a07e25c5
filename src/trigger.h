/* trigger.h: what automation.c (which builds triggers) and match.c (which evaluates them) share; private to the two. */
#ifndef SPUR_TRIGGER_H
#define SPUR_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct automation;
struct source;
struct source_check;
struct spur_event;
struct buf;

/* A regex compiled once at load (UTF mode, JIT where available). */
struct regex {
	char	*src;
	void	*code;		/* pcre2_code */
};

/* Compiles; on error returns NULL with cause (PCRE2's message) and the offset in the pattern. */
struct regex	*regex_compile(const char *, char **cause, size_t *offset);
void		 regex_free(struct regex *);
/* 1 match, 0 no match; a match or depth limit hit counts as no match and is logged. */
int		 regex_match(const struct regex *, const char *, size_t);

/* A `where` condition: a leaf on one payload path, or a group. */
enum cond_op {
	COND_EQUALS,
	COND_IN,
	COND_MATCH,
	COND_EXISTS,
	COND_NOT,	/* one kid */
	COND_ALL,	/* every kid */
	COND_ANY,	/* one kid at least */
};

struct cond {
	enum cond_op	  op;
	char		 *path;		/* leaves, and NOT of a path */
	char		 *value;	/* equals: normalized text */
	char		**values;	/* in: normalized texts */
	size_t		  nvalues;
	struct regex	 *re;		/* match */
	int		  exists;	/* exists: wanted */
	struct cond	**kids;
	size_t		  nkids;
};

void	 cond_free(struct cond *);
/* 1 when the condition holds on payload; otherwise 0 and, if why is not NULL, why. */
int	 cond_eval(const struct cond *, const json_t *payload, struct buf *why);

/* A trigger is on a system of source.h's table (trigger->system), a schedule or a generic hook. */
enum trigger_source {
	TRIG_SYSTEM,
	TRIG_SCHEDULE,
	TRIG_WEBHOOK,
};

/* The conditions a trigger checks, kept in the order the YAML lists them. */
enum trigger_check {
	CHECK_EVENTS,
	CHECK_REPOSITORIES,
	CHECK_TEXT,
	CHECK_WHERE,
	CHECK_LABELS,
	CHECK_SYSTEM,	/* a condition only the system has (source.h source_check) */
};
#define TRIGGER_MAX_CHECKS 16

/* A CHECK_SYSTEM condition and what it was written with (a list, or one string). */
struct trigger_cond {
	const struct source_check *check;
	char			 **values;
	size_t			   nvalues;
};

struct trigger {
	enum trigger_source	  source;
	const struct source	 *system;	/* TRIG_SYSTEM: which */
	char			 *label;	/* "on.NAME" or "on.NAME[1]", for why */
	char			**events;	/* EVENT or EVENT.ACTION as written */
	size_t			  nevents;
	char			**repositories;
	size_t			  nrepositories;
	struct regex		 *text;
	struct cond		 *where;	/* COND_ALL, NULL: none */
	char			**labels;
	size_t			  nlabels;
	struct schedule_def	 *schedule;	/* owned, schedule triggers */
	struct webhook_def	 *webhook;	/* owned, webhook triggers */
	enum trigger_check	  checks[TRIGGER_MAX_CHECKS];
	struct trigger_cond	  conds[TRIGGER_MAX_CHECKS];	/* of checks[i] == CHECK_SYSTEM */
	size_t			  nchecks;
};

/* The system's name, "schedule" or "webhook": the events' source it is for. */
const char	*trigger_source_name(const struct trigger *);
void		 trigger_clear(struct trigger *);

/* The automation-level checks, in YAML order (defaults after what is written). */
enum top_check {
	TOP_ON,
	TOP_AUTHORS,
	TOP_BOTS,
};

struct match_index;

struct automation_set {
	int			  refs;
	struct automation	**list;		/* by file name */
	size_t			  n;
	const struct webhook_def **webhooks;
	size_t			  nwebhooks;
	const struct schedule_def **schedules;
	size_t			  nschedules;
	struct match_index	 *index;
};

/* match.c: the index from (org, source, event type) to candidate automations. */
struct match_index	*match_index_build(const struct automation_set *);
void			 match_index_free(struct match_index *);

#endif
