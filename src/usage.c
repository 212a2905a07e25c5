/* usage.c: the token usage a model API reports in its responses, read as they stream through the gateway. */
#include "spur.h"
#include "event.h"
#include "usage.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define USAGE_EVENT_MAX		(8 * 1024 * 1024)	/* one SSE event's data (response.completed holds the whole output) */
#define USAGE_BODY_MAX		(16 * 1024 * 1024)	/* an unstreamed answer */

/* Where the reader is in an SSE line. */
enum usage_line { LINE_START, LINE_DATA, LINE_EVENT, LINE_SKIP };

/*
 * The named events that carry usage; the data of any other named event
 * (Anthropic's content_block_delta, Responses' output_text.delta: nearly all
 * of a stream) is passed over without being kept. Unnamed events (Chat
 * Completions) are all read.
 */
static const char *usage_events[] = { "message_start", "message_delta", "response.completed",
	"response.incomplete", "response.failed", "response.done", "message" };

struct usage_reader {
	enum usage_api		 api;
	int			 sse;
	enum usage_line		 line;
	char			 pre[6];	/* the start of a line, until it is known */
	size_t			 npre;
	char			 event[32];	/* the event's name, while it is read */
	size_t			 nevent;
	int			 skip;		/* its name says it has no usage */
	struct buf		 data;		/* the event's data lines (SSE), or the body */
	int			 toobig;	/* the event or body passed its bound */
	int			 seen;
	struct usage_counts	 c;
	char			*model;
};

enum usage_api
usage_api_of(const char *method, const char *target)
{
	size_t	 len = strcspn(target, "?");

	if (strcmp(method, "POST") != 0)
		return USAGE_NONE;
#define ENDS(s)	(len >= sizeof(s) - 1 && memcmp(target + len - (sizeof(s) - 1), s, sizeof(s) - 1) == 0)
	if (ENDS("/messages"))
		return USAGE_ANTHROPIC;
	if (ENDS("/responses"))
		return USAGE_RESPONSES;
	if (ENDS("/chat/completions"))
		return USAGE_CHAT;
#undef ENDS
	return USAGE_NONE;
}

/*
 * The paths forwarded, after the prefix and an optional "/v1": those whose
 * usage is read (model requests, POST) and those that cost nothing (token
 * counting, model lists). Any other (batches, /v1/complete, a background
 * Responses result fetched by GET, "/v1/Messages") would spend the org's key
 * unmetered, so it is answered 404. Case and a trailing '/' count.
 */
static const struct {
	const char	*method;
	const char	*path;	/* ending in '*': one more segment, any */
} usage_paths[] = {
	{ "POST", "/messages" },
	{ "POST", "/messages/count_tokens" },
	{ "POST", "/responses" },
	{ "POST", "/responses/input_tokens" },
	{ "POST", "/chat/completions" },
	{ "GET", "/models" },
	{ "GET", "/models/*" },
	{ "HEAD", "/" },
};

int
usage_path_known(const char *method, const char *path)
{
	size_t		 len = strcspn(path, "?"), i, n;
	const char	*p;

	if (len >= 3 && strncmp(path, "/v1", 3) == 0 && (len == 3 || path[3] == '/')) {
		path += 3;
		len -= 3;
	}
	for (i = 0; i < SPUR_ARRLEN(usage_paths); i++) {
		if (strcmp(method, usage_paths[i].method) != 0)
			continue;
		p = usage_paths[i].path;
		n = strlen(p);
		if (p[n - 1] == '*') {
			n--;
			if (len > n && strncmp(path, p, n) == 0 &&
			    memchr(path + n, '/', len - n) == NULL)
				return 1;
		} else if (len == n && strncmp(path, p, n) == 0)
			return 1;
	}
	return 0;
}

const char *
usage_api_name(enum usage_api api)
{
	switch (api) {
	case USAGE_ANTHROPIC:
		return "anthropic";
	case USAGE_RESPONSES:
		return "responses";
	case USAGE_CHAT:
		return "chat";
	default:
		return "none";
	}
}

void
usage_total(enum usage_api api, struct usage_counts *c)
{
	c->tokens = c->input + c->output + c->cache_write;
	if (api == USAGE_ANTHROPIC)
		c->tokens += c->cache_read;
}

struct usage_reader *
usage_reader_new(enum usage_api api, int sse)
{
	struct usage_reader	*r = xcalloc(1, sizeof *r);

	r->api = api;
	r->sse = sse;
	buf_init(&r->data, sse ? USAGE_EVENT_MAX : USAGE_BODY_MAX);
	return r;
}

void
usage_reader_free(struct usage_reader *r)
{
	if (r == NULL)
		return;
	buf_free(&r->data);
	free(r->model);
	free(r);
}

/* A count the API reported: a non-negative integer, else not one. */
static int
usage_count(const json_t *j, uint64_t *out)
{
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return 0;
	*out = (uint64_t)json_integer_value(j);
	return 1;
}

/* One usage object: each field it has replaces what an earlier report said. */
static void
usage_apply(struct usage_reader *r, const json_t *u, const json_t *model)
{
	int	 any = 0;

	if (!json_is_object(u))
		return;
	any |= usage_count(json_object_get(u, "input_tokens"), &r->c.input);
	any |= usage_count(json_object_get(u, "prompt_tokens"), &r->c.input);
	any |= usage_count(json_object_get(u, "output_tokens"), &r->c.output);
	any |= usage_count(json_object_get(u, "completion_tokens"), &r->c.output);
	any |= usage_count(json_object_get(u, "cache_read_input_tokens"), &r->c.cache_read);
	any |= usage_count(json_path(u, "input_tokens_details.cached_tokens"), &r->c.cache_read);
	any |= usage_count(json_path(u, "prompt_tokens_details.cached_tokens"), &r->c.cache_read);
	any |= usage_count(json_object_get(u, "cache_creation_input_tokens"), &r->c.cache_write);
	if (!any)
		return;
	r->seen = 1;
	if (r->model == NULL && json_is_string(model) && json_string_length(model) > 0)
		r->model = xstrndup(json_string_value(model), USAGE_MODEL_MAX);
}

/* One JSON document: an SSE event's data, or a whole answer. */
static void
usage_document(struct usage_reader *r, const char *s, size_t len)
{
	json_t		*j, *m;
	const char	*type;

	/* Most events say nothing of usage: not parsed at all. */
	if (len == 0 || memmem(s, len, "\"usage\"", 7) == NULL)
		return;
	if ((j = json_loadb(s, len, 0, NULL)) == NULL)
		return;
	type = json_string_value(json_object_get(j, "type"));
	if (type != NULL && strcmp(type, "message_start") == 0) {
		m = json_object_get(j, "message");
		usage_apply(r, json_object_get(m, "usage"), json_object_get(m, "model"));
	} else if (type != NULL && strncmp(type, "response.", 9) == 0) {
		m = json_object_get(j, "response");
		usage_apply(r, json_object_get(m, "usage"), json_object_get(m, "model"));
	} else	/* message_delta, a chat chunk, an unstreamed answer */
		usage_apply(r, json_object_get(j, "usage"), json_object_get(j, "model"));
	json_decref(j);
}

static void
usage_event_end(struct usage_reader *r)
{
	if (!r->toobig)
		usage_document(r, r->data.data, r->data.len);
	r->toobig = 0;
	r->skip = 0;
	buf_reset(&r->data);
}

/* An event: line's name read: whether its data can hold usage. */
static void
usage_event_name(struct usage_reader *r)
{
	size_t	 i, n = r->nevent;
	char	*name = r->event;

	while (n > 0 && (name[n - 1] == '\r' || name[n - 1] == ' '))
		n--;
	while (n > 0 && *name == ' ')
		name++, n--;
	r->skip = 1;
	for (i = 0; i < SPUR_ARRLEN(usage_events); i++) {
		if (strlen(usage_events[i]) == n && memcmp(usage_events[i], name, n) == 0)
			r->skip = 0;
	}
}

static void
usage_data(struct usage_reader *r, const char *p, size_t n)
{
	if (!r->toobig && buf_add(&r->data, p, n) != 0)
		r->toobig = 1;
}

/*
 * SSE: a line "data:..." adds to the event's data (lines joined by a newline,
 * which JSON takes as space), unless an "event:" line before it named an
 * event without usage; an empty line ends the event; other lines (id:,
 * comments) are skipped without being kept.
 */
static void
usage_sse(struct usage_reader *r, const char *p, size_t n)
{
	const char	*nl;
	size_t		 k;

	while (n > 0) {
		switch (r->line) {
		case LINE_START:
			if (*p == '\n') {
				/* "" or "\r": the end of an event. */
				if (r->npre == 0 || (r->npre == 1 && r->pre[0] == '\r'))
					usage_event_end(r);
				r->npre = 0;
				p++, n--;
				continue;
			}
			r->pre[r->npre++] = *p++;
			n--;
			if (r->npre == 5 && memcmp(r->pre, "data:", 5) == 0) {
				r->line = r->skip ? LINE_SKIP : LINE_DATA;
				if (!r->skip && r->data.len > 0)
					usage_data(r, "\n", 1);
			} else if (r->npre == 6 && memcmp(r->pre, "event:", 6) == 0) {
				r->line = LINE_EVENT;
				r->nevent = 0;
			} else if (memcmp(r->pre, "data:", r->npre < 5 ? r->npre : 5) != 0 &&
			    memcmp(r->pre, "event:", r->npre) != 0 &&
			    !(r->npre == 1 && r->pre[0] == '\r'))
				r->line = LINE_SKIP;
			break;
		case LINE_EVENT:
			nl = memchr(p, '\n', n);
			k = nl != NULL ? (size_t)(nl - p) : n;
			if (k > sizeof r->event - r->nevent)
				r->nevent = sizeof r->event;	/* too long: no name of ours */
			else {
				memcpy(r->event + r->nevent, p, k);
				r->nevent += k;
			}
			p += k;
			n -= k;
			if (nl != NULL) {
				usage_event_name(r);
				p++, n--;
				r->line = LINE_START;
				r->npre = 0;
			}
			break;
		case LINE_DATA:
		case LINE_SKIP:
			nl = memchr(p, '\n', n);
			k = nl != NULL ? (size_t)(nl - p) : n;
			if (r->line == LINE_DATA)
				usage_data(r, p, k);
			p += k;
			n -= k;
			if (nl != NULL) {
				p++, n--;
				r->line = LINE_START;
				r->npre = 0;
			}
			break;
		}
	}
}

void
usage_reader_feed(struct usage_reader *r, const void *p, size_t n)
{
	if (r->sse)
		usage_sse(r, p, n);
	else
		usage_data(r, p, n);
}

int
usage_reader_end(struct usage_reader *r, struct usage_counts *c, char **model)
{
	/* A stream cut after its last data line: what it said still counts. */
	usage_event_end(r);
	if (!r->seen)
		return 0;
	*c = r->c;
	c->requests = 1;
	usage_total(r->api, c);
	*model = xstrdup(r->model != NULL ? r->model : "unknown");
	return 1;
}

char *
usage_chat_request(const char *body, size_t len, size_t *outlen)
{
	json_t	*j, *so;
	char	*out = NULL;

	if ((j = json_loadb(body, len, 0, NULL)) == NULL || !json_is_object(j))
		goto out;
	if (!json_is_true(json_object_get(j, "stream")) ||
	    json_is_true(json_path(j, "stream_options.include_usage")))
		goto out;
	so = json_object_get(j, "stream_options");
	if (!json_is_object(so)) {
		so = json_object();
		json_object_set_new(j, "stream_options", so);
	}
	json_object_set_new(so, "include_usage", json_true());
	out = json_dumps(j, JSON_COMPACT);
	*outlen = strlen(out);
out:
	json_decref(j);
	return out;
}
