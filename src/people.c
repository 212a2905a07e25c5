/* people.c: who an event's actor is, asked of its source's API (authors: members, groups, teams), cached. */
#include "spur.h"
#include "event.h"
#include "httpc.h"
#include "httpc.h"
#include "people.h"
#include "report.h"
#include "serve.h"
#include "source.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What is known of one actor of one org's source. */
struct known {
	char		*key;		/* org \n source \n actor id \n repository */
	int		 guest;
	int		 external;
	char		**checked;	/* the groups asked about, NULL-terminated */
	char		**in;		/* those the actor is in */
	int64_t		 at;
	struct known	*next;
};

/* One lookup in flight on the loop. */
struct lookup {
	struct people		*pp;
	struct spur_event	*ev;		/* what the requests are made from (head only) */
	char			**groups;
	const struct source	*src;
	size_t			 step;
	struct person		*p;
	struct http_call	*call;
	people_cb		 cb;
	void			*arg;
	struct lookup		*next;
};

struct people {
	struct engine	*engine;
	pthread_mutex_t	 mu;		/* the fronts read the cache, the loop writes it */
	struct known	*known;
	size_t		 n;
	struct lookup	*lookups;	/* the loop's own */
};

static void	people_step(struct lookup *);

/* Who one is may be the repository's to say (a forge's collaborators): it is in the key. */
static char *
people_key(const struct spur_event *ev)
{
	/* The repository too: a forge's membership is a project's (collaborators, members). */
	return xprintf("%s\n%s\n%s\n%s", ev->org, ev->source, ev->actor.id != NULL ?
	    ev->actor.id : "", ev->repository != NULL ? ev->repository : "");
}

static void
known_free(struct known *k)
{
	free(k->key);
	strv_free(k->checked);
	strv_free(k->in);
	free(k);
}

struct people *
people_create(struct engine *e)
{
	struct people	*pp = xcalloc(1, sizeof *pp);

	pp->engine = e;
	pthread_mutex_init(&pp->mu, NULL);
	return pp;
}

void
people_free(struct people *pp)
{
	struct known	*k, *kn;
	struct lookup	*l, *ln;

	if (pp == NULL)
		return;
	for (l = pp->lookups; l != NULL; l = ln) {
		ln = l->next;
		if (l->call != NULL)
			httpc_cancel(l->call);
		l->cb(NULL, l->arg);
		spur_event_free(l->ev);
		strv_free(l->groups);
		person_free(l->p);
		free(l);
	}
	for (k = pp->known; k != NULL; k = kn) {
		kn = k->next;
		known_free(k);
	}
	pthread_mutex_destroy(&pp->mu);
	free(pp);
}

struct person *
people_cached(struct people *pp, const struct spur_event *ev, char *const *groups)
{
	struct known	*k;
	struct person	*p = NULL;
	char		*key = people_key(ev);
	size_t		 i;
	int64_t		 now = now_ms();

	pthread_mutex_lock(&pp->mu);
	for (k = pp->known; k != NULL; k = k->next)
		if (strcmp(k->key, key) == 0)
			break;
	if (k != NULL && now - k->at < PEOPLE_TTL_MS) {
		for (i = 0; groups != NULL && groups[i] != NULL; i++)
			if (!strv_has(k->checked, groups[i]))
				break;
		if (groups == NULL || groups[i] == NULL) {
			p = xcalloc(1, sizeof *p);
			p->guest = k->guest;
			p->external = k->external;
			p->groups = strv_dup(k->in);
		}
	}
	pthread_mutex_unlock(&pp->mu);
	free(key);
	return p;
}

/* Loop: what the lookup learnt, for the fronts (the oldest entry goes past PEOPLE_MAX). */
static void
people_keep(struct people *pp, const struct lookup *l)
{
	struct known	*k = xcalloc(1, sizeof *k), **pk, *old;

	k->key = people_key(l->ev);
	k->guest = l->p->guest;
	k->external = l->p->external;
	k->checked = strv_dup(l->groups);
	k->in = strv_dup(l->p->groups);
	k->at = now_ms();
	pthread_mutex_lock(&pp->mu);
	for (pk = &pp->known; *pk != NULL; pk = &(*pk)->next) {
		if (strcmp((*pk)->key, k->key) == 0) {
			old = *pk;
			*pk = old->next;
			known_free(old);
			pp->n--;
			break;
		}
	}
	k->next = pp->known;
	pp->known = k;
	if (++pp->n > PEOPLE_MAX) {
		for (pk = &pp->known; (*pk)->next != NULL; pk = &(*pk)->next)
			;
		known_free(*pk);
		*pk = NULL;
		pp->n--;
	}
	pthread_mutex_unlock(&pp->mu);
}

/* The lookup is over: its facts to the caller (cached unless it failed). */
static void
people_done(struct lookup *l)
{
	struct people	*pp = l->pp;
	struct lookup	**pl;

	for (pl = &pp->lookups; *pl != NULL; pl = &(*pl)->next) {
		if (*pl == l) {
			*pl = l->next;
			break;
		}
	}
	if (l->p->failed == NULL)
		people_keep(pp, l);
	else
		log_warn("event=people.lookup_failed org=%s source=%s actor=%s error=%s",
		    log_q(l->ev->org), l->ev->source, log_q(l->ev->actor.id), log_q(l->p->failed));
	l->cb(l->p, l->arg);
	spur_event_free(l->ev);
	strv_free(l->groups);
	free(l);
}

static void
people_answer_cb(const struct http_response *r, void *arg)
{
	struct lookup	*l = arg;
	json_t		*j;
	char		*why = NULL;

	l->call = NULL;
	if (r->status == 0) {
		l->p->failed = xprintf("%s: %s", l->src->name, r->error != NULL ? r->error :
		    "no answer");
		people_done(l);
		return;
	}
	j = json_loadb(r->body, r->len, 0, NULL);
	if (l->src->person_answer(l->ev, l->groups, l->step, r->status, j, l->p, &why) != 0) {
		l->p->failed = why != NULL ? why : xprintf("%s: HTTP %d", l->src->name, r->status);
		json_decref(j);
		people_done(l);
		return;
	}
	json_decref(j);
	l->step++;
	people_step(l);
}

/* The next request of the lookup, or its end. */
static void
people_step(struct lookup *l)
{
	struct engine		*e = l->pp->engine;
	struct http_request	 req;
	json_t			*target;
	char			*body = NULL, *url = NULL, **headers = NULL, *cause = NULL;

	if ((target = l->src->person_request(l->ev, l->groups, l->step, &body)) == NULL) {
		people_done(l);
		return;
	}
	if (report_request(e, NULL, target, NULL, &url, &headers, &cause) != 0) {
		l->p->failed = cause;
		json_decref(target);
		free(body);
		people_done(l);
		return;
	}
	http_request_init(&req, json_string_value(json_object_get(target, "method")), url,
	    (const char *const *)headers, body);
	req.timeout_ms = 10000;
	l->call = httpc_request(e->http, &req, people_answer_cb, l);
	report_headers_free(headers);
	json_decref(target);
	free(url);
	free(body);
}

void
people_lookup(struct people *pp, const struct spur_event *ev, char *const *groups,
    people_cb cb, void *arg)
{
	struct lookup	*l = xcalloc(1, sizeof *l);
	json_t		*head = spur_event_head_json(ev);

	l->pp = pp;
	l->ev = spur_event_from_json(head);
	json_decref(head);
	l->groups = strv_dup(groups);
	l->src = source_find(ev->source);
	l->p = xcalloc(1, sizeof *l->p);
	l->p->groups = xcalloc(1, sizeof *l->p->groups);
	l->cb = cb;
	l->arg = arg;
	l->next = pp->lookups;
	pp->lookups = l;
	if (l->ev == NULL || l->src->person_request == NULL) {
		l->p->failed = xprintf("%s cannot say who its people are", ev->source);
		if (l->ev == NULL)
			l->ev = spur_event_new(ev->org, ev->source);
		people_done(l);
		return;
	}
	log_debug("event=people.lookup org=%s source=%s actor=%s", log_q(ev->org), ev->source,
	    log_q(ev->actor.id));
	people_step(l);
}
