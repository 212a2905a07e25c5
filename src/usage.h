/* usage.h: the token usage of model API responses (usage.c), what it costs and the budgets it spends (budget.c). */
#ifndef SPUR_USAGE_H
#define SPUR_USAGE_H

#include <stddef.h>
#include <stdint.h>

/* The wire format of a model request, from its path: what its response reports and how. */
enum usage_api {
	USAGE_NONE,		/* no usage in its answer (count_tokens, a model list, ...) */
	USAGE_ANTHROPIC,	/* POST .../messages */
	USAGE_RESPONSES,	/* POST .../responses (OpenAI) */
	USAGE_CHAT,		/* POST .../chat/completions (OpenAI) */
};

/*
 * One response's usage, or a sum of them, as the API reported it. OpenAI's
 * input counts its cached tokens too (cache_read is part of it); Anthropic's
 * does not (cache reads and writes are apart): tokens, what a token budget
 * counts, counts each token once either way.
 */
struct usage_counts {
	uint64_t	 requests;
	uint64_t	 input;
	uint64_t	 output;
	uint64_t	 cache_read;
	uint64_t	 cache_write;
	uint64_t	 tokens;
};

#define USAGE_MODEL_MAX		200	/* a longer model name is cut */

enum usage_api	 usage_api_of(const char *method, const char *target);
/*
 * Whether the gateway forwards a request of method to path (after the agent's
 * base path; a query ignored): the paths whose usage it reads and those that
 * cost nothing (token counting, model lists). Every other is answered 404.
 */
int		 usage_path_known(const char *method, const char *path);
const char	*usage_api_name(enum usage_api);
/* Fills c->tokens from the rest, by the API's rule above. */
void		 usage_total(enum usage_api, struct usage_counts *);

/*
 * Reads one response body as it streams by, chunk by chunk (any boundaries),
 * keeping no more than the event or line being read (SSE), or the body up to
 * a bound (JSON): message_start and message_delta (Anthropic), any
 * response.* event carrying response.usage (Responses), and a top-level
 * usage (a chunk of Chat Completions, or any of the three unstreamed).
 * Later reports of a field replace earlier ones: they are running totals.
 */
struct usage_reader;
struct usage_reader *usage_reader_new(enum usage_api, int sse);
void		 usage_reader_feed(struct usage_reader *, const void *, size_t);
/*
 * At the body's end (or when it was cut off): 1 and c (requests 1, tokens
 * totalled) and *model (to free; "unknown" when none was said) when any usage
 * was read, else 0.
 */
int		 usage_reader_end(struct usage_reader *, struct usage_counts *, char **model);
void		 usage_reader_free(struct usage_reader *);

/*
 * A Chat Completions request body that streams without asking for its usage,
 * with stream_options.include_usage set; NULL when it needs no change (or is
 * not JSON).
 */
char		*usage_chat_request(const char *body, size_t len, size_t *outlen);

#endif
