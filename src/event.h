/* event.h: the normalized event of SPEC section 6, the one shape every source produces.
 * Named spur_event because libevent owns "struct event" and event_new(). */
#ifndef SPUR_EVENT_H
#define SPUR_EVENT_H

#include <jansson.h>
#include <stdint.h>

/*
 * Who an event's actor is, beyond what the event says (people.c asks the
 * source's API, for authors: members, groups and teams).
 */
struct person {
	int	 guest;		/* Slack: restricted or ultra-restricted; Linear: a guest */
	int	 external;	/* Slack: of another workspace (Slack Connect); Gitea: no collaborator */
	char	**groups;	/* NULL-terminated: the named Slack user groups, Linear teams they are in */
	char	*failed;	/* the lookup failed (why): nothing is known, nothing is allowed */
};
void		 person_free(struct person *);
struct person	*person_dup(const struct person *);

struct spur_event {
	char	*id;		/* evt_... */
	char	*org;
	char	*source;	/* github slack linear webhook schedule */
	char	*type;		/* issue_comment.created, app_mention, Issue.update, schedule, ... */
	char	*delivery;	/* the delivery id the source gave, or one made up */
	int64_t	 received_at;	/* ms since the epoch */
	char	*thread;
	struct {
		char	*id;
		char	*name;
		char	*role;	/* github author_association, else NULL */
		int	 bot;
	} actor;
	char	*text;		/* third-party free text, "" when none */
	char	*url;
	char	*repository;	/* owner/repo (github), else NULL */
	char	*dedup;		/* deduplication key within the org, NULL: none */
	char	*replay;	/* a second one, from the signed content (source_replay_key) */
	int	 unsigned_body;	/* nothing vouches for it (auth: none): kept only if it starts a run */
	json_t	*payload;	/* the payload's tree, made on demand (spur_event_payload) */
	char	*payload_raw;	/* the payload's JSON text as received, when it was JSON */
	size_t	 payload_rawlen;
	/*
	 * Source-specific facts used by matching and delivery (an object, never NULL):
	 *  github:  label, comment_id, review_comment_id, installation_id, number,
	 *           is_pull_request, head_ref, head_repo, base_ref, fork
	 *  slack:   team, channel, ts, thread_ts, command, response_url
	 *  linear:  team, issue_id, identifier, to_state, to_state_type,
	 *           from_state_id, state_changed, labels (list of names)
	 *  webhook: hook
	 *  schedule: automation, scheduled_at
	 */
	json_t	*meta;
	/* A thread command's answer (thread-cmd.c), for a source's own 200 (source->answer). */
	char	*reply;
	/* The actor as the source's API told (people.c); NULL: not looked up. */
	struct person *person;
};

/* What every report spur posts carries, so that its own posts never start runs (bots: false). */
#define EVENT_OWN_MARKER	"<!-- spur:"

struct spur_event	*spur_event_new(const char *org, const char *source);
void		 spur_event_free(struct spur_event *);
/* The event as SPEC section 6 JSON (payload and meta included). */
json_t		*spur_event_to_json(const struct spur_event *);
/* The same without the payload. */
json_t		*spur_event_head_json(const struct spur_event *);
/*
 * Its text, compact, byte for byte what json_dumps of spur_event_head_json
 * gives (the store's json column), written straight out: the ingest path
 * makes one for every delivery.
 */
char		*spur_event_head_text(const struct spur_event *);
/*
 * The payload as JSON. A source may keep only its text (payload_raw, checked
 * when it arrived) and the tree is then parsed the first time it is asked for,
 * on the thread that owns the event: matching a `where`, building a prompt.
 */
json_t		*spur_event_payload(const struct spur_event *);
struct spur_event	*spur_event_from_json(const json_t *);
/* meta string value or NULL. */
const char	*spur_event_meta_str(const struct spur_event *, const char *);

/* json.c: the one dotted-path lookup ("pull_request.labels.0.name"). */
json_t		*json_path(const json_t *, const char *path);
struct buf;
/* s as a JSON string literal as jansson writes it (NULL: null); -1 if not UTF-8. */
int		 json_buf_str(struct buf *, const char *s);
const char	*json_path_str(const json_t *, const char *path);
/* A string, or JSON null for NULL. */
json_t		*json_str_or_null(const char *);
/* A scalar as text for matching: strings as is, numbers and booleans printed; NULL otherwise. */
char		*json_scalar_text(const json_t *);
/* Parses with a depth limit and a size limit; -1 with cause otherwise. */
json_t		*json_parse_bounded(const char *, size_t, int maxdepth, char **cause);

#endif
