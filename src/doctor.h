/* doctor.h: what a system's doctor check (source.h) asks of `spur doctor` (cmd-doctor.c). */
#ifndef SPUR_DOCTOR_H
#define SPUR_DOCTOR_H

#include <stddef.h>
#include <jansson.h>

struct automation_set;
struct config;
struct event_base;
struct httpc;
struct store;

/* One run of `spur doctor`: what it checks and what it found. */
struct doctor {
	struct config		*conf;
	struct automation_set	*set;
	struct event_base	*base;
	struct httpc		*http;
	json_t			*checks;	/* every verdict, for --json */
	int			 json;
	int			 counts[3];	/* by verdict */
	unsigned long long	 min_free;
	/* The first server Date seen, to compare the clock with: seconds, 0: none yet. */
	long long		 server_date;
	long long		 server_date_at;
	char			*server_date_from;
	struct store		*store;		/* NULL: none yet (usage read from it when there is) */
	/*
	 * What the automations ask of a system, for doctor_uses and doctor_looks_up:
	 * cmd-doctor.c answers, so that doctor.c (which the systems' files call)
	 * calls no automation code.
	 */
	int	(*uses)(const struct doctor *, const char *org, const char *src,
		    const char *event);
	int	(*looks_up)(const struct doctor *, const char *org, const char *src,
		    int groups);
	/*
	 * The event types (without their actions) of org's src triggers, each
	 * once: a JSON array; the fixed repositories org's automations name, or
	 * src's triggers and report destinations do: {repository: whose}.
	 */
	json_t	*(*events)(const struct doctor *, const char *org, const char *src);
	json_t	*(*repos)(const struct doctor *, const char *org, const char *src);
};

enum doctor_verdict { DOCTOR_PASS, DOCTOR_FAIL, DOCTOR_SKIP };

/* One answer, copied out of the client's callback. */
struct doctor_answer {
	int		 status;	/* 0: no answer (error says why) */
	char		*error;
	char		*body;
	size_t		 len;
	json_t		*json;		/* the body parsed, NULL if it is no JSON */
	char		*head;
	int		 done;
};

/* One verdict: printed at once (a slow API shows where it is), kept for --json. */
void	 doctor_say(struct doctor *, const char *org, const char *check, enum doctor_verdict,
	     const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* One request (headers NULL-terminated), waited for on the doctor's own loop. */
void	 doctor_http(struct doctor *, const char *method, const char *url,
	     const char *const *headers, const char *body, struct doctor_answer *);
/* What an answer that is not the one hoped for says, in a phrase. */
char	*doctor_why(const struct doctor_answer *);
void	 doctor_answer_clear(struct doctor_answer *);
/* Whether a comma- or space-separated list holds item (a token's scopes). */
int	 doctor_list_has(const char *list, const char *item);
/* Whether an automation of org listens to src's event (NULL: any event of src). */
int	 doctor_uses(const struct doctor *, const char *org, const char *src,
	     const char *event);
/*
 * Whether an automation of org on src asks who its authors are (people.c):
 * groups: one that names groups or teams; else one whose authors are not
 * any nor a list of users alone.
 */
int	 doctor_looks_up(const struct doctor *, const char *org, const char *src,
	     int groups);

#endif
