/* source.h: what the listener asks of each webhook source (source-*.c): verify, normalize, answer. */
#ifndef SPUR_SOURCE_H
#define SPUR_SOURCE_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct org;
struct event;
struct webhook_def;

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
	int64_t				 now_ms;
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
	struct event		*event;
	int			 status;
	char			*reply;		/* JSON body for SOURCE_REPLY */
	char			*cause;
};

struct source {
	const char	*name;
	void		(*handle)(const struct source_req *, struct source_result *);
};

/* The source for a hook path segment: github, slack, linear, else the generic one. */
const struct source	*source_find(const char *hook);
void			 source_result_free(struct source_result *);
/* Case-insensitive header lookup; NULL when absent. */
const char		*source_header(const struct source_req *, const char *);
/*
 * Checks "hex" against HMAC-SHA256(key, parts...) in constant time.
 * Used by every source, so there is one comparison and one HMAC.
 */
int			 source_check_hmac_hex(const char *key, size_t keylen,
			     const char *given_hex, const void *msg, size_t msglen);
/* Decodes application/x-www-form-urlencoded into a JSON object of strings. */
struct json_t		*form_decode(const char *, size_t);

extern const struct source source_github;
extern const struct source source_slack;
extern const struct source source_linear;
extern const struct source source_webhook;

#endif
