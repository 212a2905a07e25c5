/* node.c: this engine among several on one store (SPEC section 17): its lease, dead nodes' runs, the config hash. */
#include "spur.h"
#include "conf.h"
#include "store.h"
#include "serve.h"
#include "node.h"
#include "run.h"
#include "sandbox.h"
#include "writer.h"

#include <event2/event.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The lease (nodes.lease, 20 s by default) is timed by the database's clock.
 * A node that has not renewed it for that long is dead: the first live node
 * to see it so ends its running runs interrupted (queued again once, and
 * reported) within the lease and a beat (nodes.beat, 5 s), well inside
 * SPEC's minute. The other waits are shares of the lease, so that a lease
 * set small (tests) keeps them in the same relation; config.c keeps the beat
 * within a third of the lease, so a failed beat is tried again in time.
 */
/* A beat's whole wait for the store (a connect made again, its answer): 4 s of 20. */
#define NODE_ANSWER_MS(lease)	((lease) / 5)
/* A beat that failed is tried again this soon: 1 s of 20. */
#define NODE_RETRY_MS(lease)	((lease) / 20)
/*
 * A node that cannot renew its lease fences itself this long at least
 * before the others may take its runs: its runs are stopped by then (3 s of 20).
 */
#define NODE_MARGIN_MS(lease)	((lease) * 3 / 20)
/* The last moment after a renewal that a beat may start and still land in time. */
#define NODE_LAST_BEAT_MS(lease) \
	((lease) - NODE_MARGIN_MS(lease) - NODE_ANSWER_MS(lease))
/*
 * No other command of the loop waits for the store past this after the last
 * renewal (store_horizon): one cut off mid-answer (a partition) must not
 * hold the loop, and so the last beat and the fence, past their time.
 */
#define NODE_HORIZON_MS(lease)	(NODE_LAST_BEAT_MS(lease) - NODE_RETRY_MS(lease))

struct node {
	struct engine	*e;
	char		*id;
	char		*prev;		/* the node that ran on this data_dir before, if any */
	char		*hash;		/* this node's config, as told to the others */
	int64_t		 lease;		/* nodes.lease and nodes.beat as it started: kept */
	int64_t		 beat;
	struct event	*tick;
	struct event	*heard;		/* the store's LISTEN connection is readable */
	int64_t		 renewed;	/* when the lease was last renewed (this node's clock) */
	int		 fenced;	/* the lease lapsed: the others took this node's runs */
	int		 cut;		/* the last beat failed, or fenced: no new runs */
	int		 differs;	/* the majority's config hash is another */
	int		 live;		/* live nodes, as the last beat saw them */
	int		 reaped;	/* dead nodes this one reaped */
};

/* A name for a file under the automations directory, for the sort. */
static int
node_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The config the nodes must agree on: spur.yaml less what is each node's own
 * (its listen, data_dir, store_notify and store_prepare lines, and its store line: nodes may
 * reach the one database by other addresses, a local pooler say), and every
 * automation file by name.
 */
static char *
node_config_hash(struct engine *e)
{
	struct buf	 b;
	char		*text = NULL, *line, *next, **names = NULL, *path, *cause = NULL;
	unsigned char	 md[32];
	char		 hex[65];
	size_t		 len, n = 0, i;
	DIR		*d;
	struct dirent	*de;

	buf_init(&b, 0);
	if (read_file(e->config_path, 1 << 20, &text, &len, &cause) == 0) {
		for (line = text; line != NULL && *line != '\0'; line = next) {
			if ((next = strchr(line, '\n')) != NULL)
				*next++ = '\0';
			if (strncmp(line, "listen:", 7) != 0 && strncmp(line, "data_dir:", 9) != 0 &&
			    strncmp(line, "store_notify:", 13) != 0 &&
			    strncmp(line, "store_prepare:", 14) != 0 &&
			    strncmp(line, "store:", 6) != 0)
				buf_addf(&b, "%s\n", line);
		}
	}
	free(text);
	free(cause);
	if ((d = opendir(e->conf->automations_dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			names = xreallocarray(names, n + 1, sizeof *names);
			names[n++] = xstrdup(de->d_name);
		}
		closedir(d);
	}
	if (n > 0)
		qsort(names, n, sizeof *names, node_cmp);
	for (i = 0; i < n; i++) {
		path = path_join(e->conf->automations_dir, names[i]);
		text = NULL;
		cause = NULL;
		if (read_file(path, 1 << 20, &text, &len, &cause) == 0) {
			buf_addf(&b, "\n--- %s\n", names[i]);
			buf_add(&b, text, len);
		}
		free(text);
		free(cause);
		free(path);
		free(names[i]);
	}
	free(names);
	sha256(b.data != NULL ? b.data : "", b.len, md);
	buf_free(&b);
	hex_encode(md, 16, hex);
	return xstrdup(hex);
}

/* The lease lapsed or cannot be renewed: the node stops, and its runs are the others'. */
static void
node_fence(struct node *n, const char *why)
{
	if (n->fenced)
		return;
	n->fenced = n->cut = 1;
	log_error("event=node.fenced node=%s reason=%s renewed_ms_ago=%lld lease_ms=%lld "
	    "consequence=\"no new runs; the engine stops, its running runs end and are "
	    "reported by another node\"", n->id, log_q(why), (long long)(now_ms() - n->renewed),
	    (long long)n->lease);
	kill(getpid(), SIGTERM);
}

/* Ends the running runs of a node that is dead; each once, whichever node sees it. */
static void
node_take_over(struct node *n, const char *dead)
{
	char	**ids = store_runs_on_node(n->e->store, dead);
	char	*reason = xprintf("interrupted: node %s died (its lease lapsed)", dead);
	size_t	 i;

	for (i = 0; ids != NULL && ids[i] != NULL; i++)
		run_interrupt(n->e, ids[i], reason);
	log_warn("event=node.reaped node=%s dead=%s runs=%zu reports=%d", n->id, dead,
	    i, store_reports_release(n->e->store, dead));
	wake(n->e, WAKE_OUTBOX);
	free(reason);
	strv_free(ids);
	n->reaped++;
}

/* Another node queued runs (NOTIFY): this one looks at the queue now, not at its next poll. */
static void
node_heard_cb(evutil_socket_t fd, short what, void *arg)
{
	struct node	*n = arg;
	int		 got = store_listened(n->e->store);

	if (got > 0)
		wake(n->e, WAKE_DISPATCH);
	if (got < 0) {
		log_warn("event=node.listen_lost node=%s consequence=\"polling until it is "
		    "made again\"", n->id);
		event_free(n->heard);
		n->heard = NULL;
	}
}

/* LISTEN (store_notify, the default), or say that this node polls. */
static void
node_listen(struct node *n)
{
	char	*cause = NULL;
	int	 fd;

	if (n->heard != NULL || !n->e->conf->store_notify)
		return;
	if ((fd = store_listen(n->e->store, &cause)) < 0) {
		log_warn("event=node.listen_failed node=%s error=%s consequence=\"polling\"",
		    n->id, log_q(cause));
		free(cause);
		return;
	}
	n->heard = event_new(n->e->base, fd, EV_READ | EV_PERSIST, node_heard_cb, n);
	event_add(n->heard, NULL);
	log_info("event=node.listening node=%s channel=%s", n->id, STORE_CHANNEL);
}

static void
node_arm(struct node *n, int64_t ms)
{
	struct timeval	 tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(n->tick, &tv);
}

static void
node_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct node	*n = arg;
	char		*cause = NULL, *dead, *major;
	int		 rc, agree = 0, live = 0, differs;
	int64_t		 sent;

	if (n->fenced || n->e->stopping)
		return;
	/*
	 * The lease runs from when the server renews it, which is after this:
	 * measured from here, this node never thinks it holds it longer than
	 * the others do. The beat's every wait ends within NODE_ANSWER_MS.
	 */
	sent = now_ms();
	store_horizon(n->e->store, sent + NODE_ANSWER_MS(n->lease));
	rc = store_node_beat(n->e->store, n->id, n->hash, n->lease, &cause);
	if (rc == 0)
		n->renewed = sent;
	store_horizon(n->e->store, node_horizon(n));
	writer_horizon(n->e->writer, node_horizon(n));
	if (rc == 1) {
		node_fence(n, "its lease had lapsed: the other nodes took its runs");
		free(cause);
		return;
	}
	if (rc != 0) {
		log_warn("event=node.beat_failed node=%s error=%s", n->id, log_q(cause));
		free(cause);
		/* Its lease may not hold until the next beat: it starts no run meanwhile. */
		if (!n->cut)
			log_warn("event=node.cut node=%s renewed_ms_ago=%lld consequence=\"no new "
			    "runs until the lease is renewed\"", n->id,
			    (long long)(now_ms() - n->renewed));
		n->cut = 1;
		/*
		 * The next beat could not land in time, and past the lease the
		 * others may take this node's runs: none may run here too.
		 */
		if (now_ms() + NODE_RETRY_MS(n->lease) > n->renewed + NODE_LAST_BEAT_MS(n->lease))
			node_fence(n, "its lease could not be renewed in time");
		else
			node_arm(n, NODE_RETRY_MS(n->lease));
		return;
	}
	node_arm(n, sent + n->beat - now_ms());
	if (n->cut) {
		log_info("event=node.uncut node=%s", n->id);
		n->cut = 0;
		wake(n->e, WAKE_DISPATCH);
	}
	node_listen(n);
	while ((dead = store_node_reap(n->e->store, n->id)) != NULL) {
		node_take_over(n, dead);
		free(dead);
	}
	if ((major = store_nodes_config(n->e->store, &agree, &live)) != NULL) {
		differs = strcmp(major, n->hash) != 0;
		if (differs && !n->differs)
			log_warn("event=node.config_differs node=%s hash=%s majority=%s agree=%d "
			    "live=%d", n->id, n->hash, major, agree, live);
		else if (!differs && n->differs)
			log_info("event=node.config_agrees node=%s hash=%s", n->id, n->hash);
		n->differs = differs;
		n->live = live;
		free(major);
	}
}

/* DATA_DIR/node: the id of the node that runs on this data_dir, for the next one. */
static char *
node_file(struct engine *e)
{
	return path_join(e->conf->data_dir, "node");
}

static int
node_write(const char *path, const char *id)
{
	char	*tmp = xprintf("%s.tmp", path);
	FILE	*f;
	int	 rc = -1;

	if ((f = fopen(tmp, "w")) != NULL) {
		if (fprintf(f, "%s\n", id) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0)
			rc = 0;
		if (fclose(f) != 0)
			rc = -1;
	}
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	free(tmp);
	return rc;
}

struct node *
node_create(struct engine *e, char **cause)
{
	struct node	*n = xcalloc(1, sizeof *n);
	char		 host[256], *path, *text = NULL, *ignored = NULL, *nl;
	unsigned char	 rnd[4];
	char		 hex[9];
	size_t		 len;
	int		 rc;

	n->e = e;
	n->lease = e->conf->node_lease_ms;
	n->beat = e->conf->node_beat_ms;
	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "node");
	host[sizeof host - 1] = '\0';
	random_bytes(rnd, sizeof rnd);
	hex_encode(rnd, sizeof rnd, hex);
	n->id = xprintf("%s-%s", host, hex);
	n->hash = node_config_hash(e);
	path = node_file(e);
	if (read_file(path, 4096, &text, &len, &ignored) == 0) {
		if ((nl = strchr(text, '\n')) != NULL)
			*nl = '\0';
		if (*text != '\0')
			n->prev = xstrdup(text);
	}
	free(text);
	free(ignored);
	if (node_write(path, n->id) != 0)
		log_warn("event=node.file_failed path=%s error=%s", log_q(path), strerror(errno));
	free(path);
	store_set_node(e->store, n->id);
	n->renewed = now_ms();
	if (!store_shared(e->store))
		return n;
	if ((rc = store_node_beat(e->store, n->id, n->hash, n->lease, cause)) != 0) {
		if (rc > 0)
			xasprintf(cause, "node %s: its lease was taken as lapsed at once", n->id);
		node_free(n);
		return NULL;
	}
	store_horizon(e->store, n->renewed + NODE_HORIZON_MS(n->lease));
	log_info("event=node.started node=%s config_hash=%s previous=%s lease_ms=%lld "
	    "beat_ms=%lld", n->id, n->hash, n->prev != NULL ? n->prev : "-",
	    (long long)n->lease, (long long)n->beat);
	if (!e->conf->store_notify)
		log_info("event=node.polling node=%s reason=\"store_notify: false\"", n->id);
	node_listen(n);
	n->tick = evtimer_new(e->base, node_tick_cb, n);
	node_arm(n, n->renewed + n->beat - now_ms());
	return n;
}

int64_t
node_horizon(const struct node *n)
{
	return n != NULL && n->tick != NULL ? n->renewed + NODE_HORIZON_MS(n->lease) : 0;
}

void
node_free(struct node *n)
{
	if (n == NULL)
		return;
	/*
	 * A node that stops cleanly has ended its runs: no one need wait for its
	 * lease. It beats no more: its last commands wait as long as any.
	 */
	if (n->tick != NULL)
		store_horizon(n->e->store, 0);
	if (n->tick != NULL && !n->fenced && store_node_retire(n->e->store, n->id, n->id) == 1)
		log_info("event=node.retired node=%s", n->id);
	if (n->tick != NULL)
		event_free(n->tick);
	if (n->heard != NULL)
		event_free(n->heard);
	free(n->id);
	free(n->prev);
	free(n->hash);
	free(n);
}

const char *
node_id(const struct node *n)
{
	return n->id;
}

int
node_may_work(const struct node *n)
{
	return n == NULL || !n->cut;
}

int
node_fenced(const struct node *n)
{
	return n != NULL && n->fenced;
}

char **
node_orphans(struct node *n)
{
	struct store	*st = n->e->store;

	if (!store_shared(st))
		return store_runs_in_state(st, RUN_RUNNING);
	/* Its runs are this node's to end now, not a reaper's once its lease lapses. */
	if (n->prev == NULL || store_node_retire(st, n->prev, n->id) < 0)
		return NULL;
	store_reports_release(st, n->prev);
	return store_runs_on_node(st, n->prev);
}

void
node_reload(struct node *n)
{
	char	*hash = node_config_hash(n->e);

	if (strcmp(hash, n->hash) != 0)
		log_info("event=node.config_changed node=%s hash=%s was=%s", n->id, hash,
		    n->hash);
	free(n->hash);
	n->hash = hash;
}

void
node_metrics(const struct node *n, struct buf *b)
{
	if (n == NULL || !store_shared(n->e->store))
		return;
	buf_addf(b, "# HELP spur_node_config_differs 1 when this node's config hash is not the "
	    "one most live nodes report.\n# TYPE spur_node_config_differs gauge\n"
	    "spur_node_config_differs{node=\"%s\"} %d\n", n->id, n->differs);
	buf_addf(b, "# HELP spur_nodes_live Nodes whose lease is current.\n"
	    "# TYPE spur_nodes_live gauge\nspur_nodes_live %d\n", n->live);
	buf_addf(b, "# HELP spur_node_lease_age_seconds Since this node last renewed its "
	    "lease.\n# TYPE spur_node_lease_age_seconds gauge\n"
	    "spur_node_lease_age_seconds %.3f\n", (double)(now_ms() - n->renewed) / 1000);
	buf_addf(b, "# HELP spur_nodes_reaped_total Dead nodes whose runs this node ended.\n"
	    "# TYPE spur_nodes_reaped_total counter\nspur_nodes_reaped_total %d\n", n->reaped);
}
