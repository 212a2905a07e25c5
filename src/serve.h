/* serve.h: the running engine: what `spur serve` holds while it runs. */
#ifndef SPUR_SERVE_H
#define SPUR_SERVE_H

#include <pthread.h>

#include <stdint.h>

#include "wake.h"

struct event_base;
struct config;
struct automation_set;
struct store;
struct server;
struct ingest;
struct metrics;
struct dispatch;
struct gateway_local;
struct scheduler;
struct outbox;
struct people;

struct engine {
	struct event_base	*base;
	/*
	 * Swapped by a reload on the loop, under conf_mu; other threads (the HTTP
	 * fronts) take references under it (serve_config_ref).
	 */
	pthread_mutex_t		 conf_mu;
	struct config		*conf;
	struct automation_set	*automations;
	struct store		*store;
	struct server		*server;
	struct reqbudget	*budget;	/* the server's limits.buffered, for /metrics */
	struct ingest		*ingest;
	struct writer		*writer;	/* the store's writer thread (ingest's) */
	struct metrics		*metrics;
	struct dispatch		*dispatch;
	/* A path each run's gateway answers itself: the run's MCP server (dispatch.c sets it). */
	const struct gateway_local *run_local;
	struct scheduler	*scheduler;
	struct outbox		*outbox;
	struct people		*people;	/* who events' actors are (authors) */
	struct httpc		*http;		/* the one HTTP client on the loop (httpc.c) */
	/* The wake bus (wake.c): the owner of each kind, or none. */
	struct {
		wake_cb		 cb;
		void		*arg;
	}			 wakes[WAKE_NKINDS];
	struct node		*node;		/* this engine among several (node.c) */
	char			*config_path;
	int			 stopping;
	int			 draining;	/* a stop signal came: /healthz answers 503 */
	int			 reload_ok;	/* the last reload (or the start) took */
	int64_t			 reload_at;	/* ms: when */
};

/* In data_dir: what the last reload came to (serve.c writes it, `spur reload` reads it). */
#define SERVE_RELOAD_STATUS	"reload.status"

/* Any thread: references to the current config and automations (release both). */
struct config	*serve_config_ref(struct engine *, struct automation_set **);

/* server.c: the HTTP listener. */
struct server	*server_create(struct engine *, char **cause);
void		 server_free(struct server *);
/* The config was reloaded: each front takes its listener limits. */
void		 server_reload(struct server *);
/* Stops accepting; in-flight requests finish. */
void		 server_stop_accepting(struct server *);
int		 server_busy(struct server *);
/* The port actually bound for the first address (for listen: ...:0). */
int		 server_port(const struct server *);

/* metrics.c: counters for /metrics. */
struct metrics	*metrics_create(void);
void		 metrics_free(struct metrics *);
void		 metrics_request(struct metrics *, const char *route, int status);
void		 metrics_count(struct metrics *, const char *name, long long);
void		 metrics_run_duration(struct metrics *, double seconds);
/*
 * A labelled counter (labels: `key="value",...`, values escaped by the caller
 * or known to need none): spur_NAME_total{LABELS}. Any thread.
 */
void		 metrics_count_labels(struct metrics *, const char *name, const char *labels,
		     long long);
/* One observation of a histogram (METRICS_HIST_*), in seconds. Any thread. */
enum metrics_hist { METRICS_HIST_STORE_COMMIT, METRICS_HIST_SCHEDULE_LAG, METRICS_HIST_RUN,
	METRICS_NHIST };
void		 metrics_observe(struct metrics *, enum metrics_hist, double seconds);
/*
 * What only the engine's modules know, measured by the caller of
 * metrics_render: metrics.c then calls none of them (they count into it).
 */
struct metrics_live {
	int		 running;	/* runs this node is running (dispatch.c) */
	long long	 buffered;	/* bytes of requests being read (reqclock.c) */
	const char	*node;		/* this node's lines (node_metrics), or "" */
};
char		*metrics_render(struct metrics *, struct engine *, const struct metrics_live *);

#endif
