/* test-usage.c: usage read from each wire format whatever the chunking, the price table and its math. */
#include "spur.h"
#include "budget.h"
#include "usage.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Anthropic Messages, streamed: usage in message_start and (running totals) message_delta. */
static const char anthropic_sse[] =
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
    "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],"
    "\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":300,"
    "\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\r\n\r\n"
    ": a comment\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"the \\\"usage\\\" word in text\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
    "\"usage\":{\"output_tokens\":345}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

/* OpenAI Responses, streamed: response.created says null, response.completed the totals. */
static const char responses_sse[] =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5-codex\","
    "\"usage\":null}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":"
    "\"gpt-5-codex\",\"usage\":{\"input_tokens\":5000,\"input_tokens_details\":"
    "{\"cached_tokens\":1000},\"output_tokens\":700,\"output_tokens_details\":"
    "{\"reasoning_tokens\":500},\"total_tokens\":5700}}}\n\n";

/* Chat Completions, streamed with include_usage: the last chunk's usage, choices empty. */
static const char chat_sse[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\","
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\","
    "\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"completion_tokens\":12,"
    "\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n"
    "data: [DONE]\n\n";

static const char anthropic_json[] =
    "{\"id\":\"msg_2\",\"type\":\"message\",\"model\":\"claude-haiku-4-5\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"ok\"}],\"usage\":{\"input_tokens\":11,"
    "\"output_tokens\":22,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":33}}";
static const char responses_json[] =
    "{\"id\":\"resp_2\",\"object\":\"response\",\"model\":\"o4-mini\",\"output\":[],"
    "\"usage\":{\"input_tokens\":40,\"input_tokens_details\":{\"cached_tokens\":0},"
    "\"output_tokens\":50,\"total_tokens\":90}}";
static const char chat_json[] =
    "{\"id\":\"c2\",\"object\":\"chat.completion\",\"model\":\"gpt-4.1\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":8,\"total_tokens\":15}}";

struct want {
	const char	*name;
	enum usage_api	 api;
	int		 sse;
	const char	*body;
	const char	*model;
	uint64_t	 input, output, cache_read, cache_write, tokens;
};

static const struct want cases[] = {
	{ "anthropic streamed", USAGE_ANTHROPIC, 1, anthropic_sse, "claude-sonnet-4-5-20250929",
	  1200, 345, 4000, 300, 1200 + 345 + 4000 + 300 },
	{ "responses streamed", USAGE_RESPONSES, 1, responses_sse, "gpt-5-codex",
	  5000, 700, 1000, 0, 5700 },
	{ "chat streamed", USAGE_CHAT, 1, chat_sse, "gpt-4o-mini", 90, 12, 64, 0, 102 },
	{ "anthropic unstreamed", USAGE_ANTHROPIC, 0, anthropic_json, "claude-haiku-4-5",
	  11, 22, 33, 0, 66 },
	{ "responses unstreamed", USAGE_RESPONSES, 0, responses_json, "o4-mini", 40, 50, 0, 0, 90 },
	{ "chat unstreamed", USAGE_CHAT, 0, chat_json, "gpt-4.1", 7, 8, 0, 0, 15 },
};

static void
diag_counts(const char *name, size_t step, size_t off, const struct usage_counts *c,
    const char *model)
{
	printf("# %s step %zu offset %zu: model %s input %llu output %llu read %llu write %llu "
	    "tokens %llu\n", name, step, off, model != NULL ? model : "(none)",
	    (unsigned long long)c->input, (unsigned long long)c->output,
	    (unsigned long long)c->cache_read, (unsigned long long)c->cache_write,
	    (unsigned long long)c->tokens);
}

/* Feeds body in pieces of the sizes a small generator gives: 1, 2, 3, ... up to step, again. */
static int
check(const struct want *w, size_t step, size_t offset)
{
	struct usage_reader	*r = usage_reader_new(w->api, w->sse);
	struct usage_counts	 c = { 0 };
	char			*model = NULL;
	size_t			 len = strlen(w->body), at = 0, k = offset % step + 1;
	int			 good;

	while (at < len) {
		if (k > len - at)
			k = len - at;
		usage_reader_feed(r, w->body + at, k);
		at += k;
		k = k % step + 1;
	}
	good = usage_reader_end(r, &c, &model) == 1 && strcmp(model, w->model) == 0 &&
	    c.requests == 1 && c.input == w->input && c.output == w->output &&
	    c.cache_read == w->cache_read && c.cache_write == w->cache_write &&
	    c.tokens == w->tokens;
	if (!good)
		diag_counts(w->name, step, offset, &c, model);
	free(model);
	usage_reader_free(r);
	return good;
}

static void
test_formats(void)
{
	size_t	 i, step, off, bad;

	for (i = 0; i < SPUR_ARRLEN(cases); i++) {
		ok(check(&cases[i], strlen(cases[i].body), strlen(cases[i].body) - 1),
		    "%s: whole", cases[i].name);
		ok(check(&cases[i], 1, 0), "%s: a byte at a time", cases[i].name);
		bad = 0;
		for (step = 2; step <= 97; step++) {
			for (off = 0; off < step; off += 5)
				bad += !check(&cases[i], step, off);
		}
		ok(bad == 0, "%s: split at every boundary by 2..97-byte chunks (%zu bad)",
		    cases[i].name, bad);
	}
}

static void
test_edges(void)
{
	struct usage_reader	*r;
	struct usage_counts	 c;
	char			*model = NULL;
	static const char	 cut[] = "event: message_start\ndata: {\"type\":\"message_start\","
				    "\"message\":{\"model\":\"claude-opus-4-1\",\"usage\":"
				    "{\"input_tokens\":9,\"output_tokens\":1}}}";
	static const char	 none[] = "event: ping\ndata: {\"type\":\"ping\"}\n\n";
	static const char	 broken[] = "data: {\"usage\": {\"input_tokens\": 5\n\n";
	static const char	 nomodel[] = "{\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}";
	static const char	 negative[] = "{\"model\":\"m\",\"usage\":{\"input_tokens\":-3,"
				    "\"output_tokens\":\"4\"}}";
	char			*big;
	size_t			 n;

	r = usage_reader_new(USAGE_ANTHROPIC, 1);
	usage_reader_feed(r, cut, sizeof cut - 1);
	ok(usage_reader_end(r, &c, &model) == 1 && c.input == 9 && c.output == 1 &&
	    strcmp(model, "claude-opus-4-1") == 0,
	    "a stream cut after its last data line (no blank line): its usage still counts");
	free(model);
	usage_reader_free(r);

	r = usage_reader_new(USAGE_ANTHROPIC, 1);
	usage_reader_feed(r, none, sizeof none - 1);
	ok(usage_reader_end(r, &c, &model) == 0, "a stream without usage: none read");
	usage_reader_free(r);

	r = usage_reader_new(USAGE_ANTHROPIC, 1);
	usage_reader_feed(r, broken, sizeof broken - 1);
	ok(usage_reader_end(r, &c, &model) == 0, "broken JSON in an event: none read, no crash");
	usage_reader_free(r);

	r = usage_reader_new(USAGE_CHAT, 0);
	usage_reader_feed(r, nomodel, sizeof nomodel - 1);
	ok(usage_reader_end(r, &c, &model) == 1 && strcmp(model, "unknown") == 0 &&
	    c.input == 3 && c.output == 4, "usage without a model: the model is \"unknown\"");
	free(model);
	usage_reader_free(r);

	r = usage_reader_new(USAGE_RESPONSES, 0);
	usage_reader_feed(r, negative, sizeof negative - 1);
	ok(usage_reader_end(r, &c, &model) == 0, "negative or string counts are not counts");
	usage_reader_free(r);

	/* An event past the bound is dropped, and the next one still read. */
	n = 9 * 1024 * 1024;
	big = xmalloc(n);
	memset(big, 'x', n);
	memcpy(big, "data: {\"usage\":{\"input_tokens\":1},\"pad\":\"", 42);
	r = usage_reader_new(USAGE_ANTHROPIC, 1);
	usage_reader_feed(r, big, n);
	usage_reader_feed(r, "\"}\n\n", 4);
	usage_reader_feed(r, anthropic_sse, sizeof anthropic_sse - 1);
	ok(usage_reader_end(r, &c, &model) == 1 && c.input == 1200 && c.output == 345,
	    "a 9 MiB event is passed over (bounded), the events after it read");
	free(model);
	usage_reader_free(r);
	free(big);

	ok(usage_api_of("POST", "/v1/messages") == USAGE_ANTHROPIC &&
	    usage_api_of("POST", "/v1/messages?beta=true") == USAGE_ANTHROPIC &&
	    usage_api_of("POST", "/v1/messages/count_tokens") == USAGE_NONE &&
	    usage_api_of("POST", "/v1/responses") == USAGE_RESPONSES &&
	    usage_api_of("POST", "/v1/chat/completions") == USAGE_CHAT &&
	    usage_api_of("GET", "/v1/models") == USAGE_NONE,
	    "the wire format from the request's method and path");
}

static void
test_chat_request(void)
{
	static const char	 plain[] = "{\"model\":\"gpt-4o\",\"stream\":true,\"messages\":[]}";
	static const char	 asked[] = "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
	static const char	 other[] = "{\"stream\":true,\"stream_options\":{\"x\":1}}";
	static const char	 nostream[] = "{\"model\":\"gpt-4o\",\"messages\":[]}";
	size_t			 len;
	char			*s;

	s = usage_chat_request(plain, sizeof plain - 1, &len);
	is_str(s, "{\"model\":\"gpt-4o\",\"stream\":true,\"messages\":[],\"stream_options\":"
	    "{\"include_usage\":true}}", "a streamed chat request is asked for its usage");
	free(s);
	ok(usage_chat_request(asked, sizeof asked - 1, &len) == NULL,
	    "one that asks already is left alone");
	s = usage_chat_request(other, sizeof other - 1, &len);
	is_str(s, "{\"stream\":true,\"stream_options\":{\"x\":1,\"include_usage\":true}}",
	    "its other stream_options are kept");
	free(s);
	ok(usage_chat_request(nostream, sizeof nostream - 1, &len) == NULL,
	    "an unstreamed one has its usage anyway: left alone");
	ok(usage_chat_request("{nope", 5, &len) == NULL, "not JSON: left alone");
}

static void
test_prices(void)
{
	struct usage_counts	 c = { 1, 1000000, 100000, 2000000, 400000, 0 };
	struct price		 own[] = { { "claude-sonnet-4-5", 1, 2, 0.5, 4 },
				    { "my-model", 10, 20, 1, 0 } };
	const struct price	*p;
	size_t			 n;

	p = budget_price(NULL, 0, "claude-sonnet-4-5-20250929");
	ok(p != NULL && strcmp(p->model, "claude-sonnet-4-5") == 0,
	    "a dated model name takes its family's price");
	p = budget_price(NULL, 0, "gpt-4o-mini-2024-07-18");
	ok(p != NULL && strcmp(p->model, "gpt-4o-mini") == 0, "the longest family wins (gpt-4o-mini, "
	    "not gpt-4o)");
	p = budget_price(NULL, 0, "gpt-5.1-codex");
	ok(p != NULL && strcmp(p->model, "gpt-5") == 0, "gpt-5.1-codex: gpt-5's");
	ok(budget_price(NULL, 0, "o30") == NULL && budget_price(NULL, 0, "llama-3") == NULL,
	    "a name that only starts like one (o30) or an unknown model: no price");
	p = budget_price(own, 2, "claude-sonnet-4-5-20250929");
	ok(p == &own[0], "agents.NAME.prices comes before the defaults");
	p = budget_price(own, 2, "anthropic/my-model");
	ok(p == &own[1], "a provider/model name (OpenCode) is priced by its model");
	p = budget_price(own, 2, "claude-haiku-4-5");
	ok(p != NULL && p->input == 1.00, "a model it does not name keeps the default");

	p = budget_price(NULL, 0, "claude-sonnet-4-5");
	ok(fabs(budget_cost(p, USAGE_ANTHROPIC, &c) - (3.0 + 1.5 + 0.6 + 1.5)) < 1e-9,
	    "Anthropic: input, output, cache reads and writes each at their price ($6.60)");
	c.cache_write = 0;
	c.input = 3000000;
	p = budget_price(NULL, 0, "gpt-5");
	ok(fabs(budget_cost(p, USAGE_RESPONSES, &c) - (1.25 + 1.0 + 0.25)) < 1e-9,
	    "OpenAI: the cached part of the input at the cache price ($2.50)");
	ok(budget_cost(NULL, USAGE_CHAT, &c) == 0, "an unknown model costs 0");
	budget_default_prices(&n);
	ok(n >= 20, "the default table has %zu models", n);
}

static void
test_parse(void)
{
	double		 d = 0;
	long long	 t = 0;
	char		 w[64];

	ok(budget_usd_parse("3.40", &d) == 0 && d == 3.40, "3.40 dollars");
	ok(budget_usd_parse("0", &d) != 0 && budget_usd_parse("-1", &d) != 0 &&
	    budget_usd_parse("1e3", &d) != 0 && budget_usd_parse("", &d) != 0 &&
	    budget_usd_parse("2000000000", &d) != 0 && budget_usd_parse("nan", &d) != 0 &&
	    budget_usd_parse("1.2.3", &d) != 0, "0, negative, exponents, empty, huge, nan, 1.2.3: "
	    "not dollars");
	ok(budget_tokens_parse("1000", &t) == 0 && t == 1000, "1000 tokens");
	ok(budget_tokens_parse("0", &t) != 0 && budget_tokens_parse("1.5", &t) != 0 &&
	    budget_tokens_parse("99999999999999999999", &t) != 0, "0, 1.5, overflow: not tokens");
	budget_words(1234567, 3.4, w, sizeof w);
	is_str(w, "1.2M tokens, $3.40", "the report's words");
	budget_words(950, 0.0031, w, sizeof w);
	is_str(w, "950 tokens, $0.0031", "a fraction of a cent");
}

/* Issue 34: the gateway forwards only what it meters or knows to cost nothing. */
static void
test_paths(void)
{
	static const char *const good[][2] = {
		{ "POST", "/v1/messages" }, { "POST", "/v1/messages?beta=true" },
		{ "POST", "/messages" }, { "POST", "/v1/messages/count_tokens?beta=true" },
		{ "POST", "/v1/responses" }, { "POST", "/responses" },
		{ "POST", "/v1/responses/input_tokens" }, { "POST", "/v1/chat/completions" },
		{ "GET", "/v1/models" }, { "GET", "/v1/models?limit=5" },
		{ "GET", "/v1/models/claude-sonnet-4-5" }, { "GET", "/models" },
	};
	static const char *const bad[][2] = {
		{ "POST", "/v1/messages/batches" }, { "POST", "/v1/complete" },
		{ "POST", "/v1/messages/" }, { "POST", "/v1/Messages" }, { "POST", "/V1/messages" },
		{ "post", "/v1/messages" }, { "PUT", "/v1/messages" },
		{ "GET", "/v1/messages" }, { "GET", "/v1/responses/resp_1" },
		{ "POST", "/v1/responses/resp_1/cancel" }, { "GET", "/v1/messages/batches" },
		{ "GET", "/v1/models/a/b" }, { "GET", "/v1/models/" }, { "DELETE", "/v1/models/x" },
		{ "POST", "/v1/files" }, { "POST", "/v2/messages" }, { "POST", "/v1x/messages" },
		{ "POST", "/v1/v1/messages" }, { "POST", "/v1/chat/completions/x" },
		{ "POST", "" }, { "GET", "/v1" },
	};
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(good); i++)
		ok(usage_path_known(good[i][0], good[i][1]), "forwarded: %s %s", good[i][0],
		    good[i][1]);
	for (i = 0; i < SPUR_ARRLEN(bad); i++)
		ok(!usage_path_known(bad[i][0], bad[i][1]), "404: %s %s", bad[i][0], bad[i][1]);
}

int
main(void)
{
	test_paths();
	test_formats();
	test_edges();
	test_chat_request();
	test_prices();
	test_parse();
	return tap_done();
}
