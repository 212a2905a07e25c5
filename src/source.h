/* source.h: what the listener asks of each webhook source (source-*.c): verify, normalize, answer. */
#ifndef SPUR_SOURCE_H
#define SPUR_SOURCE_H

#include <stddef.h>
#include <stdint.h>

struct aload;
struct buf;
struct cfgctx;
struct config;
struct doctor;
struct engine;
struct forge;
struct json_t;
struct report_backend;
struct ynode;
struct person;
struct org;
struct spur_event;
struct webhook_def;
struct secret;
struct http_response;

struct header {
	const char	*name;
	const char	*value;
};

struct source_req {
	const struct config		*conf;
	const struct org		*org;	/* NULL: unknown org (still verify, same time) */
	const char			*org_name;
	const char			*hook;	/* the path segment after /hooks/ */
	const struct header		*headers;
	size_t				 nheaders;
	const char			*body;	/* raw bytes, NUL-terminated for convenience */
	size_t				 len;
	char				**body_own; /* the caller's buffer of body, if it may be taken */
	int64_t				 now_ms;
	int				 no_verify; /* spur fire: normalize only, check no signature or timestamp */
	const struct webhook_def	*webhook; /* generic hooks: the definition, NULL if none */
};

enum source_verdict {
	SOURCE_EVENT,		/* res->event is a new normalized event (id not yet set) */
	SOURCE_REPLY,		/* answer res->status with res->reply, store nothing (ping, challenge) */
	SOURCE_UNAUTHORIZED,	/* 401; res->cause says why, for the log only */
	SOURCE_BAD,		/* 400; res->cause is the detail */
};

struct source_result {
	enum source_verdict	 verdict;
	struct spur_event		*event;
	int			 status;
	char			*reply;		/* JSON body for SOURCE_REPLY */
	char			*cause;
};

/*
 * Where a thread command's run is looked for when the command's own thread
 * has none (thread-cmd.c): the latest run of the threads that start with
 * prefix, asked by actor (a slash command is a thread of its own), or
 * whose status message is status_msg (a reply under spur's message).
 */
struct thread_scope {
	char	*prefix;
	char	*actor;
	char	*status_msg;
};

/*
 * A condition of an on.NAME trigger that only this system has (an issue
 * tracker's teams, the state an issue moved to): written as a list of names,
 * one string, or one of names.
 */
enum source_check_kind { SOURCE_CHECK_LIST, SOURCE_CHECK_STRING, SOURCE_CHECK_ENUM };

struct source_check {
	const char		*key;
	enum source_check_kind	 kind;
	const char *const	*names;		/* SOURCE_CHECK_ENUM: the values allowed */
	/*
	 * 1 when ev passes (values: the list, or the one string); otherwise 0
	 * and, when why is not NULL, why (match.c wrote "LABEL.KEY: " before).
	 */
	int			(*match)(char *const *values, size_t n,
				    const struct spur_event *, struct buf *why);
	/* SOURCE_CHECK_LIST: NULL when an item is one, else the error (a format, %s: the item). */
	const char		*(*item_check)(const char *);
};

/*
 * A credential being fetched for a system's API (source.h cred), and its
 * answer: token NULL when cause says why (permanent: the configuration's
 * fault, which no retry changes); both valid only during the call.
 */
struct source_cred;
typedef void (*source_cred_cb)(const char *token, const char *cause, int permanent, void *);

struct source {
	const char	*name;
	const char	*title;		/* as people write it (a proper noun) */
	void		(*handle)(const struct source_req *, struct source_result *);
	/*
	 * Thread commands (/cancel, /retry, thread-cmd.c): the text of ev after
	 * what addresses spur (a leading mention), or NULL when ev is not a
	 * message in a thread; *bare: the command may come without its '/' (a
	 * slash command's text: `/spur cancel`).
	 */
	const char	*(*command_text)(const struct spur_event *, int *bare);
	/* Fills scope when the command's thread has no run of its own; NULL: nothing else. */
	void		(*command_scope)(const struct spur_event *, struct thread_scope *);
	/*
	 * The body of a stored event's 200, when the system shows it to a person
	 * (a slash command's ephemeral note): what it started (runs, with
	 * public_url for their links), or ev->reply. NULL: the JSON of ids.
	 */
	char		*(*answer)(const struct spur_event *, const struct json_t *runs,
			    int duplicate, const char *public_url);
	/*
	 * Who an actor is, where the event does not say (people.c; authors:
	 * members, groups, teams): the step-th request to the system's API (a
	 * target for report_request, *body for a POST), NULL when there is none
	 * left; and what its answer (status, the JSON or NULL) adds to p, -1
	 * with why when it tells nothing.
	 */
	struct json_t	*(*person_request)(const struct spur_event *, char *const *groups,
			    size_t step, char **body);
	int		 (*person_answer)(const struct spur_event *, char *const *groups,
			    size_t step, int status, const struct json_t *, struct person *,
			    char **why);

	/*
	 * What the rest of spur asks of a system of the table (source_next):
	 * each hook NULL when the system has none of it.
	 *
	 * orgs.NAME.<name>: the section (parsed with conf.h's leaf parsers), its
	 * secrets (each passed to add, for scrub.c), the API's URL.
	 */
	void		*(*conf_parse)(struct cfgctx *, const struct ynode *);
	void		 (*conf_free)(void *);
	void		 (*conf_secrets)(const void *, void (*add)(void *,
			    const struct secret *), void *arg);
	const char	*api_url;	/* the default of <name>.api_url */
	const char	*(*conf_api_url)(const void *);
	/* The signature's timestamp must be this close to the clock (ms; 0: none). */
	int64_t		 window_ms;

	/*
	 * on.<name>: the trigger's keys, whether an event (as written under
	 * events) is one of the system's (NULL, or why not), and the conditions
	 * only it has (terminated by a NULL key).
	 */
	const char *const *trigger_keys;
	char		*(*event_check)(const char *);
	const struct source_check *checks;

	/*
	 * repository: {<name>: ...}: the part parsed (automation.h's leaf
	 * parsers) into JSON, checked again in a snapshot; at a run, the
	 * repository it names for the event's meta (NULL: none, *why set when
	 * that is a refusal), why none, and its entries for a refusal's list.
	 */
	struct json_t	*(*repo_parse)(struct aload *, const struct ynode *);
	int		 (*repo_valid)(const struct json_t *);
	const char	*(*repo_choose)(const struct json_t *map, const struct json_t *meta,
			    char **why);
	char		*(*repo_none)(const struct json_t *meta);
	void		 (*repo_list)(struct buf *, const struct json_t *map, size_t *n);
	/* A line of the PR's body by which the system links it to the event's thread (event JSON). */
	char		*(*pr_line)(const struct json_t *event);

	/*
	 * report: {<name>: VALUE}: the destination, shaped as the event of a
	 * thread there (automation.h), or NULL and why (a format with one %s
	 * for VALUE); an example VALUE for messages that name every destination.
	 */
	struct json_t	*(*report_dest)(const char *, const char **why);
	const char	*report_example;
	const struct report_backend *report;	/* how a thread there is answered */

	/*
	 * authors (people.c): the org's credential person_request needs (its
	 * key, e.g. "NAME.api_key", and the scopes it needs, or ""), whether
	 * the org has it; person_teams: its groups are called teams.
	 */
	const char	*person_key;
	const char	*person_scope;
	int		 (*person_ready)(const struct org *);
	int		 person_teams;
	/* What a person.external is on this system, in words (NULL: "of another workspace"). */
	const char	*outsider;
	/*
	 * authors as a mapping (an, automation.h's leaf parsers): what of it
	 * lets no one in on this system; alone: the automation's only system.
	 */
	void		 (*authors_check)(struct aload *, const struct ynode *an, int alone);

	/* The event's fields in the prompt's block (prompt.h's field helpers). */
	void		 (*prompt)(struct buf *, const struct json_t *event);
	/* spur doctor: the org's credentials at the system's API (doctor.h). */
	void		 (*doctor)(struct doctor *, const struct org *);
	/* What the system's own credentials refuse when the clock is off (doctor), or NULL. */
	const char	*clock_why;

	/*
	 * The header that names a delivery's event type (spur fire, the API's
	 * POST /automations/why, which ask for the type), NULL: none; on.<name> without
	 * events matches every type: what to warn (NULL: nothing).
	 */
	const char	*event_header;
	const char	*events_warn;
	/* authors by default: the event's actor.role says who is a member. */
	int		 actor_role;
	/* What the event's url shows a reader ("the comment"), NULL: "the message". */
	const char	*url_noun;
	/* A report destination in words (the API's), NULL: "<name> <its one value>". */
	char		*(*report_words)(const struct json_t *dest);

	/*
	 * The org's token for the system's API and git (acting on repo, OWNER/NAME
	 * or an owner alone; installation: the event's, 0: none): the callback
	 * always comes later, from the loop, unless cancelled. cred_cleanup
	 * forgets what is cached. NULL: the system's report backend needs none.
	 */
	struct source_cred *(*cred)(struct engine *, const char *org, const char *repo,
			    long long installation, source_cred_cb, void *);
	void		 (*cred_cancel)(struct source_cred *);
	void		 (*cred_cleanup)(void);
	/* A run's MCP tools on its event's item (terminated by a NULL name); NULL: none. */
	const struct source_tool *tools;
	/* Where repositories live and pull requests open (forge.h); NULL: not a forge. */
	const struct forge *forge;
	/*
	 * orgs.NAME.console: sign-in to the web console through this system (its
	 * console-*.c), the section's parser, what it needs across orgs (orgs:
	 * the orgs mapping), its free and its secrets.
	 */
	void		*(*console_parse)(struct cfgctx *, const struct ynode *, const struct org *);
	void		 (*console_check)(struct cfgctx *, const struct config *,
			    const struct ynode *orgs);
	void		 (*console_free)(void *);
	void		 (*console_secrets)(const void *, void (*add)(void *,
			    const struct secret *), void *arg);
};

/*
 * A tool of a run's MCP server (runmcp.c, SPEC 18) on the run's own item at
 * the system: its name, description and arguments (the JSON text of its
 * schema's properties), whether it changes something there (writes: no
 * readOnlyHint). check: NULL when args name only the event's own repository,
 * item, team, channel or thread (event: the run's event JSON), else why it is
 * refused. request: the step-th request from first (the system's own words
 * for its first) and what state holds (a path under the API's URL sent with
 * the org's credential, or a whole URL, a redirect's, sent without one; a GET,
 * or a POST of *body when it sets one), NULL when the tool is done; answer:
 * what that response adds to state and to out (the text, fenced by runmcp.c
 * as third-party data), or -1 with why the tool failed. The credential is the
 * system's cred, or where it has none, its report backend's (report_request).
 */
struct source_tool {
	const char	*name;
	const char	*about;
	const char	*props;
	const char	*first;
	char		*(*check)(const struct json_t *event, const struct json_t *args);
	char		*(*request)(const struct source_tool *, const struct json_t *event,
			    const struct json_t *args, struct json_t *state, size_t step,
			    char **body);
	int		 (*answer)(struct json_t *state, size_t step,
			    const struct http_response *, struct buf *out, char **why);
	int		 writes;
};

/*
 * The systems of the table in order (source-table.h): the one after
 * prev, the first when prev is NULL, NULL after the last.
 */
const struct source	*source_next(const struct source *prev);
/* The system of that name, or NULL (the generic webhook is no system). */
const struct source	*source_system(const char *);
/* The org's section of a system (or of the system of that name), NULL when it has none. */
const void		*source_conf(const struct org *, const struct source *);
const void		*source_conf_named(const struct org *, const char *);
/* The org's API base URL of a system (org NULL: the default), no trailing slash. */
char			*source_api_url(const struct org *, const struct source *);
/* How many systems the table has. */
size_t			 source_count(void);
/*
 * The systems' names, then extra's, in one string: "a, b, c", last before
 * the last one (" or ", ", ").
 */
char			*source_names(const char *const *extra, const char *last);
/* Whether s is a system's name or one of extra's. */
int			 source_name_in(const char *s, const char *const *extra);
/* Whether s is in the list (case-insensitive when icase). */
int			 source_list_has(char *const *, size_t, const char *s, int icase);
/* "[a, b, c]", for why. */
void			 source_why_list(struct buf *, char *const *, size_t);

/* The source for a hook path segment: a system of the table, else the generic one. */
const struct source	*source_find(const char *hook);
void			 source_result_free(struct source_result *);
/*
 * Whether a header value can serve as an id (a delivery, a dedup key): 1 to 200
 * printable ASCII characters. Headers are not signed: anything else is ignored.
 */
int			 source_id_ok(const char *);
/*
 * Why a request cannot be checked against a real secret, or NULL when it can
 * (then *key is the secret). configured: the org has this source's section;
 * s: its secret; what: e.g. "NAME.webhook_secret". An unusable secret still
 * gets a dummy key, so that every refusal costs the same HMAC.
 */
char			*source_no_key(const struct source_req *, int configured,
			     const struct secret *, const char *what, const void **key,
			     size_t *keylen);
/* Case-insensitive header lookup; NULL when absent. */
const char		*source_header(const struct source_req *, const char *);
/*
 * Checks "hex" against HMAC-SHA256(key, msg) in constant time.
 * Used by every source, so there is one comparison and one HMAC.
 * Returns 0 on a match, -1 on a mismatch, -2 when given_hex is not 64 hex
 * digits (the HMAC is computed in every case, so all three take as long).
 */
int			 source_check_hmac_hex(const void *key, size_t keylen,
			     const char *given_hex, const void *msg, size_t msglen);
/* Decodes application/x-www-form-urlencoded into a JSON object of strings. */
struct json_t		*form_decode(const char *, size_t);

/*
 * Helpers the source-*.c files share (source.c), so that every source words
 * its answers, bounds its JSON and treats a missing secret the same way.
 */
#define SOURCE_JSON_DEPTH	64	/* deeper payloads are refused (400) */
#define SOURCE_MAX_SIGNATURES	16	/* entries of a multi-signature header looked at */

enum source_body { SOURCE_BODY_JSON, SOURCE_BODY_FORM, SOURCE_BODY_OTHER };

struct secret;

/*
 * The HMAC key for a secret, or a fixed dummy key when the secret is missing
 * (unknown org, source not configured): returns 0 for a real key, -1 for the
 * dummy, so the caller still does the same work and then refuses.
 */
int			 source_key(const struct secret *, const void **key,
			     size_t *keylen);
/* Classifies Content-Type; a missing or form type whose body opens with '{' is JSON. */
enum source_body	 source_body_kind(const struct source_req *);
/*
 * The event keeps the JSON body, byte for byte, as its payload text: the
 * caller's buffer when it lets go of it (body_own), else a copy.
 */
void			 source_keep_body(const struct source_req *, struct spur_event *);
/* Parses a JSON object body with the depth bound; NULL with cause otherwise. */
struct json_t		*source_parse_object(const char *, size_t, char **cause);
/*
 * The same check of the whole text (jscan.c), but the tree holds only the
 * kept paths: what a normalizer reads. The event keeps the text, and the full
 * tree is made only if something asks for it (spur_event_payload).
 */
struct json_t		*source_parse_kept(const char *, size_t, const char *const *keep,
			    char **cause);
/* Parses a decimal integer (at most 18 digits, optional '-'); -1 if not one. */
int			 source_parse_int(const char *, int64_t *);
/* Checks that at_ms is within window_ms of now_ms either way; cause says which side. */
int			 source_check_window(int64_t at_ms, int64_t now_ms, int64_t window_ms,
			     const char *what, char **cause);
void			 source_unauthorized(struct source_result *, const char *, ...)
			     __attribute__((format(printf, 2, 3)));
void			 source_bad(struct source_result *, const char *, ...)
			     __attribute__((format(printf, 2, 3)));
/* Answers status with body (stolen) and stores nothing. */
void			 source_reply(struct source_result *, int, struct json_t *);
/*
 * Copies at most len - 1 bytes of s into buf with anything but printable
 * ASCII replaced by '?': request text quoted in a cause stays short and
 * valid UTF-8 for the JSON 400 detail.
 */
const char		*source_safe(const char *, char *buf, size_t len);
/*
 * The event's second dedup key, from what the signature covers: "source:scope:"
 * and the SHA-256 of the body. The delivery id beside a signed body is not
 * signed, so a captured body sent again under a new id is a duplicate only by
 * this key.
 */
char			*source_replay_key(const struct source_req *, const char *source,
			    const char *scope);
/* A new event of this request's org and source, received at req->now_ms. */
struct spur_event		*source_event_new(const struct source_req *, const char *);
/* A copy of the string or scalar at path, or NULL. */
char			*source_path_text(const struct json_t *, const char *);
/*
 * A forge's webhook events and their actions (space separated; "": written
 * without one; "*": any); why s (EVENT or EVENT.ACTION) is none of them, or
 * NULL when it is one. system names the forge in the why.
 */
struct source_event_def {
	const char	*event;
	const char	*actions;
};
char			*source_event_check(const char *system,
			    const struct source_event_def *, size_t n, const char *s);
/*
 * report: {SYSTEM: OWNER/NAME#N}: an issue or pull request of a forge, shaped
 * as its thread's event, or NULL and *why = bad (the system's words, one %s);
 * and the same in words.
 */
struct json_t		*source_issue_dest(const char *system, const char *s, const char *bad,
			    const char **why);
char			*source_issue_words(const struct json_t *dest);

/* The systems of the table are named in source-table.h (their files' headers name them too). */
extern const struct source source_webhook;

#endif
