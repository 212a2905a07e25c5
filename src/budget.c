/* budget.c: what model tokens cost, and whether a run's or its org's budget is spent (SPEC section 16). */
#include "spur.h"
#include "budget.h"
#include "store.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * USD per million tokens: input, output, cache read, cache write. The
 * vendors' list prices of their current models; a dated or suffixed name
 * ("claude-sonnet-4-5-20250929", "gpt-5-codex") takes its family's.
 * Anthropic's cache writes are its 5-minute ones (1.25x input); OpenAI has
 * no writes. agents.NAME.prices overrides or adds to it.
 */
static const struct price budget_prices[] = {
	{ "claude-opus-4-5",	5.00,	25.00,	0.50,	6.25 },
	{ "claude-opus-4-1",	15.00,	75.00,	1.50,	18.75 },
	{ "claude-opus-4",	15.00,	75.00,	1.50,	18.75 },
	{ "claude-sonnet-4-5",	3.00,	15.00,	0.30,	3.75 },
	{ "claude-sonnet-4",	3.00,	15.00,	0.30,	3.75 },
	{ "claude-3-7-sonnet",	3.00,	15.00,	0.30,	3.75 },
	{ "claude-3-5-sonnet",	3.00,	15.00,	0.30,	3.75 },
	{ "claude-haiku-4-5",	1.00,	5.00,	0.10,	1.25 },
	{ "claude-3-5-haiku",	0.80,	4.00,	0.08,	1.00 },
	{ "claude-3-haiku",	0.25,	1.25,	0.03,	0.30 },
	{ "claude-3-opus",	15.00,	75.00,	1.50,	18.75 },
	{ "gpt-5",		1.25,	10.00,	0.125,	0 },
	{ "gpt-5-mini",		0.25,	2.00,	0.025,	0 },
	{ "gpt-5-nano",		0.05,	0.40,	0.005,	0 },
	{ "gpt-5-pro",		15.00,	120.00,	15.00,	0 },
	{ "gpt-5.1-codex-mini",	0.25,	2.00,	0.025,	0 },
	{ "gpt-4.1",		2.00,	8.00,	0.50,	0 },
	{ "gpt-4.1-mini",	0.40,	1.60,	0.10,	0 },
	{ "gpt-4.1-nano",	0.10,	0.40,	0.025,	0 },
	{ "gpt-4o",		2.50,	10.00,	1.25,	0 },
	{ "gpt-4o-mini",	0.15,	0.60,	0.075,	0 },
	{ "o1",			15.00,	60.00,	7.50,	0 },
	{ "o1-mini",		1.10,	4.40,	0.55,	0 },
	{ "o3",			2.00,	8.00,	0.50,	0 },
	{ "o3-mini",		1.10,	4.40,	0.55,	0 },
	{ "o3-pro",		20.00,	80.00,	20.00,	0 },
	{ "o4-mini",		1.10,	4.40,	0.275,	0 },
	{ "codex-mini",		1.50,	6.00,	0.375,	0 },
};

const struct price *
budget_default_prices(size_t *n)
{
	*n = SPUR_ARRLEN(budget_prices);
	return budget_prices;
}

/* How much of model an entry names: its length, or 0 when it is not model's start at a boundary. */
static size_t
budget_match(const char *entry, const char *model)
{
	size_t	 len = strlen(entry);

	if (strncmp(entry, model, len) != 0)
		return 0;
	if (model[len] == '\0' || strchr("-.:@/", model[len]) != NULL)
		return len;
	return 0;
}

static const struct price *
budget_best(const struct price *t, size_t n, const char *model)
{
	const struct price	*best = NULL;
	size_t			 i, m, bestlen = 0;

	for (i = 0; i < n; i++) {
		if ((m = budget_match(t[i].model, model)) > bestlen) {
			best = &t[i];
			bestlen = m;
		}
	}
	return best;
}

const struct price *
budget_price(const struct price *own, size_t nown, const char *model)
{
	const struct price	*p;

	if (model == NULL)
		return NULL;
	/* "anthropic/claude-sonnet-4-5" (OpenCode's provider/model): the model. */
	if (strchr(model, '/') != NULL && budget_best(own, nown, model) == NULL)
		model = strrchr(model, '/') + 1;
	if ((p = budget_best(own, nown, model)) != NULL)
		return p;
	return budget_best(budget_prices, SPUR_ARRLEN(budget_prices), model);
}

double
budget_cost(const struct price *p, enum usage_api api, const struct usage_counts *c)
{
	uint64_t	 input = c->input;

	if (p == NULL)
		return 0;
	/* OpenAI's input counts the cached tokens, which are priced apart. */
	if (api != USAGE_ANTHROPIC)
		input = input > c->cache_read ? input - c->cache_read : 0;
	return ((double)input * p->input + (double)c->output * p->output +
	    (double)c->cache_read * p->cache_read + (double)c->cache_write * p->cache_write) /
	    1e6;
}

int
budget_usd_parse(const char *s, double *out)
{
	char	*end;
	double	 d;

	if (s == NULL || *s == '\0' || strspn(s, "0123456789.") != strlen(s))
		return -1;
	errno = 0;
	d = strtod(s, &end);
	if (*end != '\0' || errno != 0 || !isfinite(d) || d <= 0 || d > 1e9)
		return -1;
	*out = d;
	return 0;
}

int
budget_tokens_parse(const char *s, long long *out)
{
	char		*end;
	long long	 v;

	if (s == NULL || *s == '\0' || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0' || errno != 0 || v < 1)
		return -1;
	*out = v;
	return 0;
}

/* n with thousands separators: "31,200". */
static void
budget_count(uint64_t n, char *out, size_t len)
{
	char	 digits[32];
	size_t	 i, k = 0, nd;

	nd = (size_t)snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
	for (i = 0; i < nd && k + 2 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0)
			out[k++] = ',';
		out[k++] = digits[i];
	}
	out[k] = '\0';
}

/* "$3.40"; a fraction of a cent shown as one: "$0.0031". */
static void
budget_usd(double usd, char *out, size_t len)
{
	snprintf(out, len, usd == 0 || usd >= 0.01 ? "$%.2f" : "$%.4f", usd);
}

void
budget_words(uint64_t tokens, double usd, char *out, size_t len)
{
	char	 t[32], d[32];

	if (tokens >= 1000000)
		snprintf(t, sizeof t, "%.1fM", tokens / 1e6);
	else if (tokens >= 1000)
		snprintf(t, sizeof t, "%.1fk", tokens / 1e3);
	else
		snprintf(t, sizeof t, "%llu", (unsigned long long)tokens);
	budget_usd(usd, d, sizeof d);
	snprintf(out, len, "%s tokens, %s", t, d);
}

void
budget_days(char today[16], char month[16])
{
	time_t		 now = time(NULL);
	struct tm	 tm;

	gmtime_r(&now, &tm);
	strftime(today, 16, "%Y-%m-%d", &tm);
	strftime(month, 16, "%Y-%m-01", &tm);
}

char *
budget_org_spent(struct store *st, const char *org, const struct budget_limits *b)
{
	char	 today[16], month[16], lim[32], got[32];
	double	 usd;

	if (b->org_usd_per_day <= 0 && b->org_usd_per_month <= 0)
		return NULL;
	budget_days(today, month);
	if (b->org_usd_per_day > 0 &&
	    (usd = store_usage_org_usd(st, org, today)) >= b->org_usd_per_day) {
		budget_usd(b->org_usd_per_day, lim, sizeof lim);
		budget_usd(usd, got, sizeof got);
		return xprintf("the org %s's daily budget of %s is spent: %s today (UTC)", org,
		    lim, got);
	}
	if (b->org_usd_per_month > 0 &&
	    (usd = store_usage_org_usd(st, org, month)) >= b->org_usd_per_month) {
		budget_usd(b->org_usd_per_month, lim, sizeof lim);
		budget_usd(usd, got, sizeof got);
		return xprintf("the org %s's monthly budget of %s is spent: %s this month (UTC)",
		    org, lim, got);
	}
	return NULL;
}

char *
budget_spent(struct store *st, const char *org, const struct budget_limits *b,
    uint64_t tokens, double usd)
{
	char	 n[32], m[32], d[32], lim[32];

	budget_usd(usd, d, sizeof d);
	budget_count(tokens, m, sizeof m);
	if (b->tokens > 0 && tokens >= (uint64_t)b->tokens) {
		budget_count((uint64_t)b->tokens, n, sizeof n);
		return xprintf("the run's budget of %s tokens is spent: %s tokens, %s", n, m, d);
	}
	if (b->usd > 0 && usd >= b->usd) {
		budget_usd(b->usd, lim, sizeof lim);
		return xprintf("the run's budget of %s is spent: %s, %s tokens", lim, d, m);
	}
	return budget_org_spent(st, org, b);
}
