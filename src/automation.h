/* automation.h: automations loaded from YAML (automation.c) and matched against events (match.c). */
#ifndef SPUR_AUTOMATION_H
#define SPUR_AUTOMATION_H

#include <jansson.h>
#include <stddef.h>

#include "env.h"

struct agent;
struct config;
struct connections;
struct spur_event;
struct yerrs;
struct ynode;

enum proof_kind { PROOF_PULL_REQUEST, PROOF_COMMIT, PROOF_ARTIFACTS, PROOF_REPORT, PROOF_NONE };
enum concurrency_key { CONC_THREAD, CONC_AUTOMATION, CONC_NONE };
enum on_busy { BUSY_QUEUE, BUSY_CANCEL_RUNNING, BUSY_SKIP };
enum webhook_auth { WH_AUTH_NONE, WH_AUTH_HMAC, WH_AUTH_STANDARD, WH_AUTH_BEARER };

/* A generic webhook declared by an automation's webhook trigger. */
struct webhook_def {
	char		*org;
	char		*name;
	enum webhook_auth auth;
	char		*secret;	/* name of the org secret */
	char		*header;	/* hmac: header carrying the signature */
	char		*prefix;	/* hmac: e.g. "sha256=" */
	int		 base64;	/* hmac: encoding base64 (else hex) */
	char		*id_header;	/* hmac: header whose value deduplicates */
	char		*text_path;	/* payload path of the external text */
	char		*thread_path;	/* payload path keying the thread */
};

/* A schedule trigger. */
struct schedule_def {
	char		*org;
	char		*automation;
	char		*cron;		/* as written */
	char		*timezone;	/* IANA name, "UTC" by default */
	struct cron	*parsed;
};

#define AUTOMATION_SECRETS_MAX	32	/* secrets one automation may name */
#define AUTOMATION_ASK_TIMEOUT	1800	/* ask_timeout: a thread_ask's wait (seconds) */

struct automation {
	char		 *name;
	char		 *org;
	char		 *file;
	const struct agent *agent;	/* agent.c's, never NULL */
	char		 *agent_name;	/* its name: "claude", ... */
	char		 *model;
	char		**command;	/* NULL-terminated, agent: command */
	char		 *prompt;
	char		 *repository;	/* fixed OWNER/NAME, NULL: none or chosen by the event */
	/*
	 * repository as a mapping, the event choosing (repo.c repo_choose): NULL,
	 * or {NAME: what the system's repo_parse made of it (source.h, e.g.
	 * {CHANNEL: REPO}), ..., "text": true, "default": REPO}, each key optional.
	 */
	json_t		 *repository_map;
	char		**repositories;	/* NULL-terminated globs a repo: token must match */
	enum proof_kind	  proof;
	char		**artifacts;	/* NULL-terminated */
	char		**secrets;	/* NULL-terminated */
	char		**network_allow; /* NULL-terminated, NULL: none */
	struct connections *connections; /* MCP servers (connections.h), checked; NULL: none */
	struct {
		int	  draft;
		char	**reviewers;	/* NULL-terminated logins, NULL: none */
		char	**labels;	/* NULL-terminated, NULL: none */
	} pull_request;			/* pull_request: how a proof: pull_request PR opens */
	long long	  timeout;	/* seconds, 0: the config's */
	long long	  ask_timeout;	/* seconds a thread_ask waits for its answer */
	long long	  budget_tokens;	/* budget.tokens, per run; 0: none */
	double		  budget_usd;	/* budget.usd, per run; 0: none */
	enum concurrency_key conc_key;
	enum on_busy	  on_busy;
	int		  report_thread;
	/*
	 * report's destinations besides the thread, each shaped as the event of
	 * a thread there (report.c answers it like one): a system's, as its
	 * report_dest makes it (source.h: {"source": NAME, "meta": {"channel"}},
	 * or with "repository"), or {"source": "api", "meta": {"callback_url",
	 * "callback_secret"?}}. NULL: none.
	 */
	json_t		 *report_to;
	char		**report_on;	/* the end states destinations hear of; NULL: every one */
	int		  retry_never;	/* retry: never: an interrupted run is not queued again */
	int		  authors_any;	/* authors: any */
	/*
	 * authors as a mapping: who may start runs, by id or login (users), by
	 * a system's group id (groups) or team key (teams); NULL: none. Without
	 * one (members): the actor's role OWNER/MEMBER/COLLABORATOR where the
	 * event says it (source.h actor_role), else not a guest nor of another
	 * workspace (people.c).
	 */
	char		**author_users;
	char		**author_groups;
	int		  authors_listed;
	int		  bots;
	struct env_conf	  env;		/* environment, the org's default merged in key by key */
	/* triggers are private to automation.c/match.c (trigger.h) */
	struct trigger	 *triggers;
	size_t		  ntriggers;
	int		  checks[3];	/* on, authors, bots in YAML order, for why */
	size_t		  nchecks;
};

struct automation_set;

/*
 * An environment mapping (orgs.NAME.environment in spur.yaml; what names it in
 * messages), its errors added to errs at their positions; -1 when it had any.
 */
int			 automation_env_parse(const struct ynode *, const char *file,
			     const char *what, struct yerrs *, struct env_conf *);

/*
 * The leaf parsers a system's part of an automation calls (source.h
 * repo_parse), each error added at the node's position: an error; the keys of
 * a mapping (-1 when it is none); KEY: OWNER/REPO pairs, keys checked by check
 * (NULL: any), NULL with errors.
 */
struct aload;
void			 automation_error(struct aload *, const struct ynode *, const char *, ...)
			     __attribute__((format(printf, 3, 4)));
int			 automation_map_check(struct aload *, const struct ynode *,
			     const char *what, const char *const *keys);
json_t			*automation_repo_pairs(struct aload *, const struct ynode *,
			     const char *what, const char *(*check)(const char *));
/* Such pairs in a snapshot: an object of string values, or absent. */
int			 automation_repo_pairs_valid(const json_t *);

/*
 * Loads every *.yaml of dir (sorted by file name; hidden files and other names are
 * skipped); every problem of every file goes to errs as FILE:LINE:COL; NULL if any is
 * an error (warnings, what may be intended, load).
 * Defaults: name from the file name, org when the config has only one, agent claude,
 * proof report, concurrency thread/queue, report thread, authors members, bots false,
 * timeout 0 (the config's). With conf NULL, org is required and secrets go unchecked.
 * The set is reference-counted: a reload swaps sets while runs keep theirs.
 */
struct automation_set	*automation_load(const struct config *, const char *dir, struct yerrs *);
struct automation_set	*automation_set_ref(struct automation_set *);
void			 automation_set_unref(struct automation_set *);
size_t			 automation_count(const struct automation_set *);
const struct automation	*automation_get(const struct automation_set *, size_t);
const struct automation	*automation_find(const struct automation_set *, const char *org,
			     const char *name);
const struct webhook_def *automation_webhook(const struct automation_set *, const char *org,
			     const char *name);
size_t			 automation_schedules(const struct automation_set *,
			     const struct schedule_def ***);

/*
 * Matching. Fills out[] with the automations the event starts (at most max), in file
 * name order, and returns how many. Cost does not grow with automations of other orgs,
 * sources or event types. An events filter "EVENT" takes every action, "EVENT.ACTION"
 * one; schedule triggers take source "schedule" events whose meta.automation is the
 * automation, webhook triggers source "webhook" events whose meta.hook is theirs.
 * `where` compares text (YAML true/false/numbers as JSON prints them); exists treats
 * JSON null as absent. labels, teams and to_state compare case-insensitively.
 * authors: members reads actor.role where a system says it (source.h actor_role), else
 * the person looked up; bots: false drops actor.bot events.
 */
size_t			 automation_match(const struct automation_set *, const struct spur_event *,
			     const struct automation **out, size_t max);
/* The same; when nothing matches, *why says why (each candidate's first failure, to free). */
size_t			 automation_match_why(const struct automation_set *,
			     const struct spur_event *, const struct automation **out, size_t max,
			     char **why);
/*
 * Why an automation does not match: the first failing condition, in YAML order, e.g.
 * `on.NAME.text: "^/fix\b" did not match`, `authors: actor role NONE is not a member`,
 * `no NAME trigger` (several triggers of the source: their reasons joined by "; ").
 * NULL when it matches; else a string the caller frees.
 */
char			*automation_why(const struct automation *, const struct spur_event *);

/*
 * Whether ev's author may start a run of a (its authors and bots, as matching
 * checks them): thread commands act for the same people. 0 with why (if not
 * NULL) when not.
 */
/*
 * Whether checking a's authors for ev needs to know more of its actor than
 * the event says (a system that looks people up, authors members or groups/teams):
 * people.c looks the actor up first (struct person, ev->person). The group
 * ids or team keys it names are added to *groups (a NULL-terminated list).
 */
int			 automation_authors_need(const struct automation *, const struct spur_event *);
/* The same for every automation of ev's org with a trigger of ev's source; their groups into *groups. */
int			 automation_set_authors_need(const struct automation_set *,
			     const struct spur_event *, char ***groups);
struct buf;
int			 automation_allows(const struct automation *, const struct spur_event *,
			     struct buf *why);

/*
 * The automation as JSON: what a run keeps so a reload does not change it (everything
 * but the triggers). from_json returns NULL on a malformed object; its result has no
 * triggers and is freed with automation_free.
 */
json_t			*automation_to_json(const struct automation *);
/* The triggers as the API shows them: [{"source", "events": [...]}]. */
json_t			*automation_triggers_json(const struct automation *);
/* Why host is not a network.allow entry, as a format with one %s; NULL when it is one. */
const char		*automation_host_error(const char *host);
/* An environment as a run's snapshot keeps it; NULL when it is empty. */
json_t			*env_to_json(const struct env_conf *);
struct automation	*automation_from_json(const json_t *);
/* The same from its compact text (a run's snapshot as stored); NULL: malformed or NULL. */
struct automation	*automation_from_text(const char *);
void			 automation_free(struct automation *);

const char		*proof_kind_name(enum proof_kind);

#endif
