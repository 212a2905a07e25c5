/* match.c: which automations an event starts, through an index by org, source and event type, and why the others do not. */
#include "spur.h"
#include "automation.h"
#include "event.h"
#include "source.h"
#include "trigger.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * Bounds for one regex match: a pathological pattern or subject gives up
 * (as no match) instead of stalling the event loop.
 */
#define REGEX_MATCH_LIMIT	1000000
#define REGEX_DEPTH_LIMIT	10000
#define REGEX_HEAP_LIMIT	(20 * 1024)	/* KiB */

/* Index keys are "org\0source\0selector"; longer ones cannot exist. */
#define MATCH_KEY_MAX		1024

static pcre2_match_context	*regex_mctx;
static pthread_once_t		 regex_once = PTHREAD_ONCE_INIT;

static void
regex_init_cb(void)
{
	if ((regex_mctx = pcre2_match_context_create(NULL)) == NULL)
		fatal("pcre2_match_context_create failed");
	pcre2_set_match_limit(regex_mctx, REGEX_MATCH_LIMIT);
	pcre2_set_depth_limit(regex_mctx, REGEX_DEPTH_LIMIT);
	pcre2_set_heap_limit(regex_mctx, REGEX_HEAP_LIMIT);
}

struct regex *
regex_compile(const char *src, char **cause, size_t *offset)
{
	struct regex	*re;
	pcre2_code	*code;
	PCRE2_UCHAR	 msg[256];
	PCRE2_SIZE	 erroff;
	int		 errcode;
	uint32_t	 options = PCRE2_UTF;

#ifdef PCRE2_MATCH_INVALID_UTF
	/* Third-party text is not always valid UTF-8; it must not make matching fail. */
	options |= PCRE2_MATCH_INVALID_UTF;
#endif
	code = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, options, &errcode,
	    &erroff, NULL);
	if (code == NULL) {
		if (pcre2_get_error_message(errcode, msg, sizeof msg) < 0)
			*cause = xstrdup("unknown error");
		else
			*cause = xstrdup((char *)msg);
		*offset = erroff;
		return NULL;
	}
	(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);	/* the interpreter is the fallback */
	re = xcalloc(1, sizeof *re);
	re->src = xstrdup(src);
	re->code = code;
	return re;
}

void
regex_free(struct regex *re)
{
	if (re == NULL)
		return;
	pcre2_code_free(re->code);
	free(re->src);
	free(re);
}

int
regex_match(const struct regex *re, const char *s, size_t len)
{
	pcre2_match_data	*md;
	int			 rc;

	pthread_once(&regex_once, regex_init_cb);
	if ((md = pcre2_match_data_create(1, NULL)) == NULL)
		fatal("pcre2_match_data_create failed");
	rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0, md, regex_mctx);
	pcre2_match_data_free(md);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
	    rc == PCRE2_ERROR_HEAPLIMIT)
		log_warn("event=regex.limit verdict=no_match pattern=%s len=%zu",
		    log_q(re->src), len);
	else
		log_warn("event=regex.failed pattern=%s rc=%d", log_q(re->src), rc);
	return 0;
}

void
cond_free(struct cond *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	free(c->path);
	free(c->value);
	for (i = 0; i < c->nvalues; i++)
		free(c->values[i]);
	free(c->values);
	regex_free(c->re);
	for (i = 0; i < c->nkids; i++)
		cond_free(c->kids[i]);
	free(c->kids);
	free(c);
}

/* A one-line description of a condition, used when a `not` fails. */
static void
cond_describe(const struct cond *c, struct buf *b)
{
	size_t	 i;

	switch (c->op) {
	case COND_EQUALS:
		buf_addf(b, "%s equals \"%s\"", c->path, c->value);
		break;
	case COND_IN:
		buf_addf(b, "%s in [", c->path);
		for (i = 0; i < c->nvalues; i++)
			buf_addf(b, "%s\"%s\"", i > 0 ? ", " : "", c->values[i]);
		buf_adds(b, "]");
		break;
	case COND_MATCH:
		buf_addf(b, "%s matches \"%s\"", c->path, c->re->src);
		break;
	case COND_EXISTS:
		buf_addf(b, "%s %s", c->path, c->exists ? "exists" : "does not exist");
		break;
	case COND_NOT:
		buf_adds(b, "not (");
		cond_describe(c->kids[0], b);
		buf_adds(b, ")");
		break;
	case COND_ALL:
	case COND_ANY:
		for (i = 0; i < c->nkids; i++) {
			if (i > 0)
				buf_adds(b, c->op == COND_ALL ? " and " : " or ");
			cond_describe(c->kids[i], b);
		}
		break;
	}
}

static void
cond_why_got(struct buf *why, const char *path, const json_t *v, const char *text)
{
	if (v == NULL)
		buf_addf(why, "%s is missing", path);
	else if (text == NULL)
		buf_addf(why, "%s is %s, not a scalar", path,
		    json_is_object(v) ? "an object" : "a list");
	else
		buf_addf(why, "%s is \"%s\"", path, text);
}

int
cond_eval(const struct cond *c, const json_t *payload, struct buf *why)
{
	const json_t	*v = NULL;
	char		*text = NULL;
	size_t		 i;
	int		 ok = 0;

	if (c->path != NULL && c->op != COND_NOT && c->op != COND_ALL && c->op != COND_ANY) {
		v = payload != NULL ? json_path(payload, c->path) : NULL;
		if (v != NULL)
			text = json_scalar_text(v);
	}
	switch (c->op) {
	case COND_EQUALS:
		ok = text != NULL && strcmp(text, c->value) == 0;
		if (!ok && why != NULL) {
			cond_why_got(why, c->path, v, text);
			buf_addf(why, ", not \"%s\"", c->value);
		}
		break;
	case COND_IN:
		for (i = 0; text != NULL && i < c->nvalues && !ok; i++)
			ok = strcmp(text, c->values[i]) == 0;
		if (!ok && why != NULL) {
			cond_why_got(why, c->path, v, text);
			buf_adds(why, ", not one of [");
			for (i = 0; i < c->nvalues; i++)
				buf_addf(why, "%s\"%s\"", i > 0 ? ", " : "", c->values[i]);
			buf_adds(why, "]");
		}
		break;
	case COND_MATCH:
		ok = text != NULL && regex_match(c->re, text, strlen(text));
		if (!ok && why != NULL) {
			if (text != NULL)
				buf_addf(why, "%s: \"%s\" did not match", c->path, c->re->src);
			else
				cond_why_got(why, c->path, v, text);
		}
		break;
	case COND_EXISTS:
		/* A JSON null is as good as absent: a system may send either. */
		ok = (v != NULL && !json_is_null(v)) == c->exists;
		if (!ok && why != NULL)
			buf_addf(why, "%s %s", c->path, c->exists ? "does not exist" :
			    "exists");
		break;
	case COND_NOT:
		ok = !cond_eval(c->kids[0], payload, NULL);
		if (!ok && why != NULL) {
			buf_adds(why, "not (");
			cond_describe(c->kids[0], why);
			buf_adds(why, ") failed: it holds");
		}
		break;
	case COND_ALL:
		ok = 1;
		for (i = 0; i < c->nkids && ok; i++)
			ok = cond_eval(c->kids[i], payload, why);
		break;
	case COND_ANY:
		for (i = 0; i < c->nkids && !ok; i++)
			ok = cond_eval(c->kids[i], payload, NULL);
		if (!ok && why != NULL) {
			buf_adds(why, "any: no alternative held (");
			for (i = 0; i < c->nkids; i++) {
				if (i > 0)
					buf_adds(why, "; ");
				cond_eval(c->kids[i], payload, why);
			}
			buf_adds(why, ")");
		}
		break;
	}
	free(text);
	return ok;
}

const char *
trigger_source_name(const struct trigger *t)
{
	switch (t->source) {
	case TRIG_SYSTEM:
		return t->system->name;
	case TRIG_SCHEDULE:
		return "schedule";
	case TRIG_WEBHOOK:
		return "webhook";
	}
	return "unknown";
}

/* "issue_comment" selects every action of that event, "issue_comment.created" one. */
static int
event_filter_match(const char *filter, const char *type)
{
	size_t	 n;

	if (type == NULL)
		return 0;
	if (strcmp(filter, type) == 0)
		return 1;
	if (strchr(filter, '.') != NULL)
		return 0;
	n = strlen(filter);
	return strncmp(type, filter, n) == 0 && type[n] == '.';
}

/* The trigger's k-th check. */
static int
trigger_check(const struct trigger *t, size_t k, const struct spur_event *ev, struct buf *why)
{
	const struct trigger_cond *c;
	const char	*s;
	size_t		 i, mark;
	int		 ok = 0;

	switch (t->checks[k]) {
	case CHECK_EVENTS:
		for (i = 0; i < t->nevents && !ok; i++)
			ok = event_filter_match(t->events[i], ev->type);
		if (!ok && why != NULL) {
			buf_addf(why, "%s.events: %s is not one of ", t->label,
			    ev->type != NULL ? ev->type : "(no type)");
			source_why_list(why, t->events, t->nevents);
		}
		return ok;
	case CHECK_REPOSITORIES:
		for (i = 0; ev->repository != NULL && i < t->nrepositories && !ok; i++)
			ok = glob_match(t->repositories[i], ev->repository);
		if (!ok && why != NULL) {
			if (ev->repository == NULL)
				buf_addf(why, "%s.repositories: the event has no repository",
				    t->label);
			else {
				buf_addf(why, "%s.repositories: %s is not one of ", t->label,
				    ev->repository);
				source_why_list(why, t->repositories, t->nrepositories);
			}
		}
		return ok;
	case CHECK_TEXT:
		s = ev->text != NULL ? ev->text : "";
		ok = regex_match(t->text, s, strlen(s));
		if (!ok && why != NULL)
			buf_addf(why, "%s.text: \"%s\" did not match", t->label, t->text->src);
		return ok;
	case CHECK_WHERE:
		if (why != NULL) {
			mark = why->len;
			buf_addf(why, "%s.where: ", t->label);
			if ((ok = cond_eval(t->where, spur_event_payload(ev), why)))
				why->len = mark;
			return ok;
		}
		return cond_eval(t->where, spur_event_payload(ev), NULL);
	case CHECK_LABELS:
		s = spur_event_meta_str(ev, "label");
		ok = source_list_has(t->labels, t->nlabels, s, 1);
		if (!ok && why != NULL) {
			if (s == NULL)
				buf_addf(why, "%s.labels: no label was added", t->label);
			else {
				buf_addf(why, "%s.labels: label \"%s\" is not one of ",
				    t->label, s);
				source_why_list(why, t->labels, t->nlabels);
			}
		}
		return ok;
	case CHECK_SYSTEM:
		c = &t->conds[k];
		if (why == NULL)
			return c->check->match(c->values, c->nvalues, ev, NULL);
		mark = why->len;
		buf_addf(why, "%s.%s: ", t->label, c->check->key);
		if ((ok = c->check->match(c->values, c->nvalues, ev, why)))
			why->len = mark;
		return ok;
	}
	return 0;
}

/* Whether a trigger is about this event at all (source, hook, schedule). */
static int
trigger_applies(const struct automation *a, const struct trigger *t, const struct spur_event *ev)
{
	const char	*s;

	if (strcmp(ev->source, trigger_source_name(t)) != 0)
		return 0;
	if (t->source == TRIG_SCHEDULE) {
		s = spur_event_meta_str(ev, "automation");
		return s != NULL && strcmp(s, a->name) == 0;
	}
	if (t->source == TRIG_WEBHOOK) {
		s = spur_event_meta_str(ev, "hook");
		return s != NULL && strcmp(s, t->webhook->name) == 0;
	}
	return 1;
}

static int
trigger_eval(const struct trigger *t, const struct spur_event *ev, struct buf *why)
{
	size_t	 i;

	for (i = 0; i < t->nchecks; i++) {
		if (!trigger_check(t, i, ev, why))
			return 0;
	}
	return 1;
}

static int
automation_on(const struct automation *a, const struct spur_event *ev, struct buf *why)
{
	size_t	 i, tried = 0;

	for (i = 0; i < a->ntriggers; i++) {
		if (!trigger_applies(a, &a->triggers[i], ev))
			continue;
		if (why != NULL && tried > 0)
			buf_adds(why, "; ");
		tried++;
		if (trigger_eval(&a->triggers[i], ev, why))
			return 1;
	}
	if (tried == 0 && why != NULL) {
		if (strcmp(ev->source, "webhook") == 0)
			buf_addf(why, "no webhook trigger for hook %s",
			    spur_event_meta_str(ev, "hook") != NULL ?
			    spur_event_meta_str(ev, "hook") : "(none)");
		else if (strcmp(ev->source, "schedule") == 0)
			buf_addf(why, "no schedule trigger (the schedule is %s's)",
			    spur_event_meta_str(ev, "automation") != NULL ?
			    spur_event_meta_str(ev, "automation") : "(none)");
		else
			buf_addf(why, "no %s trigger", ev->source);
	}
	return 0;
}

static int
automation_is_member(const char *role)
{
	return role != NULL && (strcmp(role, "OWNER") == 0 || strcmp(role, "MEMBER") == 0 ||
	    strcmp(role, "COLLABORATOR") == 0);
}

/* A source whose people spur looks up (its events say too little of who they are). */
static int
automation_looked_up(const struct spur_event *ev)
{
	const struct source	*src = source_system(ev->source);

	return src != NULL && src->person_request != NULL;
}

int
automation_authors_need(const struct automation *a, const struct spur_event *ev)
{
	/* A bot or an event of no one is nobody to look up (a list names who it lets in). */
	if (a->authors_any || !automation_looked_up(ev) || ev->actor.bot || ev->actor.id == NULL)
		return 0;
	/* Listed users alone are known from the event. */
	return !a->authors_listed || a->author_groups != NULL;
}

static int
automation_authors_ok(const struct automation *a, const struct spur_event *ev, struct buf *why)
{
	const struct person	*p = ev->person;
	const struct source	*src;
	const char		*who = ev->actor.id != NULL ? ev->actor.id : "(nobody)";
	size_t			 i;

	if (a->authors_any)
		return 1;
	if (a->authors_listed && (strv_has(a->author_users, ev->actor.id) ||
	    strv_has(a->author_users, ev->actor.name)))
		return 1;
	/*
	 * A bot is for bots (true or false) to decide; an event of no one (the
	 * workspace's own automation, an integration) is no person's to judge.
	 */
	if (automation_looked_up(ev) && !a->authors_listed && (ev->actor.bot ||
	    ev->actor.id == NULL))
		return 1;
	if (automation_authors_need(a, ev) && (p == NULL || p->failed != NULL)) {
		if (why != NULL)
			buf_addf(why, "authors: who %s is is not known (%s)", who, p == NULL ?
			    "not looked up" : p->failed);
		return 0;
	}
	if (a->authors_listed) {
		for (i = 0; p != NULL && p->groups != NULL && p->groups[i] != NULL; i++)
			if (strv_has(a->author_groups, p->groups[i]))
				return 1;
		if (why != NULL)
			buf_addf(why, "authors: %s is not among the users%s listed", who,
			    a->author_groups != NULL ? ", groups or teams" : "");
		return 0;
	}
	/* A system whose events say the actor's role (source.h actor_role). */
	if ((src = source_system(ev->source)) != NULL && src->actor_role) {
		if (automation_is_member(ev->actor.role))
			return 1;
		if (why != NULL)
			buf_addf(why, "authors: actor role %s is not a member",
			    ev->actor.role != NULL ? ev->actor.role : "NONE");
		return 0;
	}
	if (!automation_looked_up(ev) || p == NULL || (!p->guest && !p->external))
		return 1;
	if (why != NULL)
		buf_addf(why, "authors: %s is %s, not a member", who, !p->external ? "a guest" :
		    src != NULL && src->outsider != NULL ? src->outsider : "of another workspace");
	return 0;
}

int
automation_set_authors_need(const struct automation_set *set, const struct spur_event *ev,
    char ***groups)
{
	const struct automation	*a;
	size_t			 i, j;
	int			 need = 0, has;

	for (i = 0; i < automation_count(set); i++) {
		a = automation_get(set, i);
		if (strcmp(a->org, ev->org) != 0 || !automation_authors_need(a, ev))
			continue;
		for (has = 0, j = 0; j < a->ntriggers && !has; j++)
			has = strcmp(trigger_source_name(&a->triggers[j]), ev->source) == 0;
		if (!has)
			continue;
		need = 1;
		for (j = 0; a->author_groups != NULL && a->author_groups[j] != NULL; j++)
			if (!strv_has(*groups, a->author_groups[j]))
				strv_add(groups, a->author_groups[j]);
	}
	return need;
}

static int
automation_bots_ok(const struct automation *a, const struct spur_event *ev, struct buf *why)
{
	/* spur's own reports carry a marker: with a plain token they come from a user. */
	if (!a->bots && ev->text != NULL && strstr(ev->text, EVENT_OWN_MARKER) != NULL) {
		if (why != NULL)
			buf_addf(why, "bots: the text is one of spur's own reports");
		return 0;
	}
	if (a->bots || !ev->actor.bot)
		return 1;
	if (why != NULL)
		buf_addf(why, "bots: actor %s is a bot", ev->actor.name != NULL ?
		    ev->actor.name : "(unnamed)");
	return 0;
}

int
automation_allows(const struct automation *a, const struct spur_event *ev, struct buf *why)
{
	return automation_authors_ok(a, ev, why) && automation_bots_ok(a, ev, why);
}

/* Evaluates the automation's checks in YAML order; why (if not NULL) gets the first failure. */
static int
automation_eval(const struct automation *a, const struct spur_event *ev, struct buf *why)
{
	size_t	 i;

	if (strcmp(a->org, ev->org) != 0) {
		if (why != NULL)
			buf_addf(why, "org: the automation is in org %s, the event in %s",
			    a->org, ev->org);
		return 0;
	}
	for (i = 0; i < a->nchecks; i++) {
		switch (a->checks[i]) {
		case TOP_ON:
			if (!automation_on(a, ev, why))
				return 0;
			break;
		case TOP_AUTHORS:
			if (!automation_authors_ok(a, ev, why))
				return 0;
			break;
		case TOP_BOTS:
			if (!automation_bots_ok(a, ev, why))
				return 0;
			break;
		}
	}
	return 1;
}

char *
automation_why(const struct automation *a, const struct spur_event *ev)
{
	struct buf	 why;

	buf_init(&why, 64 * 1024);
	if (automation_eval(a, ev, &why)) {
		buf_free(&why);
		return NULL;
	}
	if (why.len == 0)
		buf_adds(&why, "did not match");
	return buf_take(&why);
}

/* The index: open addressing over keys "org\0source\0selector" -> sorted automation indices. */
struct match_entry {
	char		*key;
	size_t		 keylen;
	uint64_t	 hash;
	uint32_t	*ids;
	size_t		 n;
	size_t		 cap;
};

struct match_index {
	struct match_entry	*slots;
	size_t			 cap;	/* power of two */
	size_t			 used;
};

static uint64_t
match_hash(const char *key, size_t len)
{
	uint64_t	 h = 1469598103934665603ULL;
	size_t		 i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Builds "org\0source\0sel" into out; 0 if it does not fit (then it cannot be a key). */
static size_t
match_key(char *out, size_t size, const char *org, const char *source, const char *sel)
{
	size_t	 lo = strlen(org), ls = strlen(source), le = strlen(sel);

	if (lo + ls + le + 2 > size)
		return 0;
	memcpy(out, org, lo);
	out[lo] = '\0';
	memcpy(out + lo + 1, source, ls);
	out[lo + 1 + ls] = '\0';
	memcpy(out + lo + ls + 2, sel, le);
	return lo + ls + le + 2;
}

static struct match_entry *
match_find(const struct match_index *idx, const char *key, size_t len, uint64_t h)
{
	struct match_entry	*e;
	size_t			 i;

	for (i = h & (idx->cap - 1);; i = (i + 1) & (idx->cap - 1)) {
		e = &idx->slots[i];
		if (e->key == NULL)
			return e;
		if (e->hash == h && e->keylen == len && memcmp(e->key, key, len) == 0)
			return e;
	}
}

static void
match_grow(struct match_index *idx)
{
	struct match_entry	*old = idx->slots, *e;
	size_t			 oldcap = idx->cap, i;

	idx->cap = oldcap == 0 ? 64 : oldcap * 2;
	idx->slots = xcalloc(idx->cap, sizeof *idx->slots);
	for (i = 0; i < oldcap; i++) {
		if (old[i].key == NULL)
			continue;
		e = match_find(idx, old[i].key, old[i].keylen, old[i].hash);
		*e = old[i];
	}
	free(old);
}

static void
match_add(struct match_index *idx, const char *org, const char *source, const char *sel,
    uint32_t id)
{
	struct match_entry	*e;
	char			 key[MATCH_KEY_MAX];
	size_t			 len;
	uint64_t		 h;

	if ((len = match_key(key, sizeof key, org, source, sel)) == 0)
		fatal("match_add: key too long");	/* names are bounded by the loader */
	if (2 * (idx->used + 1) > idx->cap)
		match_grow(idx);
	h = match_hash(key, len);
	e = match_find(idx, key, len, h);
	if (e->key == NULL) {
		e->key = xmalloc(len);
		memcpy(e->key, key, len);
		e->keylen = len;
		e->hash = h;
		idx->used++;
	}
	if (e->n > 0 && e->ids[e->n - 1] == id)
		return;
	if (e->n == e->cap) {
		e->cap = e->cap == 0 ? 4 : e->cap * 2;
		e->ids = xreallocarray(e->ids, e->cap, sizeof *e->ids);
	}
	e->ids[e->n++] = id;
}

struct match_index *
match_index_build(const struct automation_set *set)
{
	struct match_index	*idx = xcalloc(1, sizeof *idx);
	const struct automation	*a;
	const struct trigger	*t;
	const char		*src;
	size_t			 i, j, k;

	match_grow(idx);
	for (i = 0; i < set->n; i++) {
		a = set->list[i];
		for (j = 0; j < a->ntriggers; j++) {
			t = &a->triggers[j];
			src = trigger_source_name(t);
			if (t->source == TRIG_SCHEDULE)
				match_add(idx, a->org, src, a->name, i);
			else if (t->source == TRIG_WEBHOOK)
				match_add(idx, a->org, src, t->webhook->name, i);
			else if (t->nevents == 0)
				match_add(idx, a->org, src, "", i);
			else {
				for (k = 0; k < t->nevents; k++)
					match_add(idx, a->org, src, t->events[k], i);
			}
		}
	}
	return idx;
}

void
match_index_free(struct match_index *idx)
{
	size_t	 i;

	if (idx == NULL)
		return;
	for (i = 0; i < idx->cap; i++) {
		free(idx->slots[i].key);
		free(idx->slots[i].ids);
	}
	free(idx->slots);
	free(idx);
}

static const struct match_entry *
match_lookup(const struct match_index *idx, const char *org, const char *source,
    const char *sel, size_t sellen)
{
	const struct match_entry	*e;
	char				 key[MATCH_KEY_MAX], selbuf[MATCH_KEY_MAX];
	size_t				 len;

	if (sel == NULL || sellen >= sizeof selbuf)
		return NULL;
	memcpy(selbuf, sel, sellen);
	selbuf[sellen] = '\0';
	if ((len = match_key(key, sizeof key, org, source, selbuf)) == 0)
		return NULL;
	e = match_find(idx, key, len, match_hash(key, len));
	return e->key != NULL ? e : NULL;
}

/* At most this many automations' reasons in an event's why (the rest are counted). */
#define MATCH_WHY_MAX	4

size_t
automation_match(const struct automation_set *set, const struct spur_event *ev,
    const struct automation **out, size_t max)
{
	return automation_match_why(set, ev, out, max, NULL);
}

size_t
automation_match_why(const struct automation_set *set, const struct spur_event *ev,
    const struct automation **out, size_t max, char **whyp)
{
	const struct match_entry	*lists[3];
	size_t				 pos[3] = { 0, 0, 0 }, nlists = 0, found = 0, i;
	size_t				 refused = 0, told, len;
	const char			*sel, *dot;
	uint32_t			 id, last = UINT32_MAX;
	int				 best, ok;
	struct buf			 why, *wb = NULL;

	if (whyp != NULL) {
		*whyp = NULL;
		buf_init(&why, 16 * 1024);
		wb = &why;
	}
	if (set == NULL || set->index == NULL || ev->org == NULL || ev->source == NULL)
		goto out;
	if (strcmp(ev->source, "schedule") == 0 || strcmp(ev->source, "webhook") == 0) {
		sel = spur_event_meta_str(ev, strcmp(ev->source, "schedule") == 0 ?
		    "automation" : "hook");
		if (sel != NULL)
			lists[nlists++] = match_lookup(set->index, ev->org, ev->source, sel,
			    strlen(sel));
	} else if (ev->type != NULL) {
		lists[nlists++] = match_lookup(set->index, ev->org, ev->source, ev->type,
		    strlen(ev->type));
		if ((dot = strchr(ev->type, '.')) != NULL)
			lists[nlists++] = match_lookup(set->index, ev->org, ev->source,
			    ev->type, dot - ev->type);
		lists[nlists++] = match_lookup(set->index, ev->org, ev->source, "", 0);
	}
	/* Merge the sorted candidate lists, so results come in file order, each once. */
	while (found < max) {
		best = -1;
		for (i = 0; i < nlists; i++) {
			if (lists[i] == NULL || pos[i] == lists[i]->n)
				continue;
			if (best == -1 || lists[i]->ids[pos[i]] < lists[best]->ids[pos[best]])
				best = i;
		}
		if (best == -1)
			break;
		id = lists[best]->ids[pos[best]++];
		if (id == last)
			continue;
		last = id;
		/* Why each candidate refused the event, for the log of one that starts nothing. */
		if (wb != NULL && refused < MATCH_WHY_MAX) {
			told = why.len;
			buf_addf(wb, "%s%s: ", refused > 0 ? "; " : "", set->list[id]->name);
			len = why.len;
			if ((ok = automation_eval(set->list[id], ev, wb)))
				why.len = told;
			else if (why.len == len)
				buf_adds(wb, "did not match");
		} else
			ok = automation_eval(set->list[id], ev, NULL);
		if (ok)
			out[found++] = set->list[id];
		else
			refused++;
	}
out:
	if (wb == NULL)
		return found;
	if (found == 0 && refused == 0)
		buf_addf(wb, "no automation of org %s has a %s trigger for %s", ev->org != NULL ?
		    ev->org : "-", ev->source != NULL ? ev->source : "-", ev->type != NULL ?
		    ev->type : "this event");
	else if (refused > MATCH_WHY_MAX)
		buf_addf(wb, "; and %zu more", refused - MATCH_WHY_MAX);
	if (found == 0)
		*whyp = buf_take(wb);
	else
		buf_free(wb);
	return found;
}
