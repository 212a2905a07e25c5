/* budget.h: what model tokens cost (the price table) and whether a run's or an org's budget is spent (SPEC section 16). */
#ifndef SPUR_BUDGET_H
#define SPUR_BUDGET_H

#include "usage.h"

struct store;

/* USD per million tokens of one model (agents.NAME.prices.MODEL). */
struct price {
	char	*model;		/* a model name, or the start of one: "claude-sonnet-4-5" */
	double	 input;
	double	 output;
	double	 cache_read;
	double	 cache_write;
};

/* The table built in, for the documentation and tests; n set to its length. */
const struct price *budget_default_prices(size_t *n);
/*
 * The price of model: the longest entry of own (the agent's configured
 * prices; may be NULL) that is the model's name or the start of it followed
 * by '-', '.', ':' or '@', else the same in the table built in. NULL: unknown
 * (its tokens are counted, costing 0).
 */
const struct price *budget_price(const struct price *own, size_t nown, const char *model);
/* USD for counts at p (NULL: 0): an OpenAI input's cached part at the cache-read price. */
double		 budget_cost(const struct price *p, enum usage_api, const struct usage_counts *);

/* A dollar amount ("3.40", "0.5"): 0 when positive and at most a billion. */
int		 budget_usd_parse(const char *, double *);
/* A token count: 0 when a positive integer. */
int		 budget_tokens_parse(const char *, long long *);

/* A run's budget (automation or API session) and its org's; 0: none. */
struct budget_limits {
	long long	 tokens;
	double		 usd;
	double		 org_usd_per_day;	/* UTC days */
	double		 org_usd_per_month;	/* UTC calendar months */
};

/*
 * Why a new model request of a run that has spent tokens and usd may not
 * start, in words for its reason and report ("the run's budget of $0.50 is
 * spent: $0.52, 31,200 tokens"); NULL when none of its budgets is spent.
 * The org's spending is read from the store (every node's runs).
 */
char		*budget_spent(struct store *, const char *org, const struct budget_limits *,
		     uint64_t tokens, double usd);
/* The same for a run about to start: only the org's budgets. */
/* The first UTC day of today's ("YYYY-MM-DD") and of this month's spending. */
void		 budget_days(char today[16], char month[16]);
char		*budget_org_spent(struct store *, const char *org, const struct budget_limits *);
/* "1.2M tokens, $3.40" (no cost when usd is 0 and tokens are unpriced). */
void		 budget_words(uint64_t tokens, double usd, char *out, size_t len);

#endif
