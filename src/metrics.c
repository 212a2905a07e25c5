/* metrics.c: counters kept in memory and rendered in the Prometheus text format. */
#include "spur.h"
#include "budget.h"
#include "conf.h"
#include "ingest.h"
#include "serve.h"
#include "store.h"

#include <sys/resource.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_MAX_SERIES	256

struct series {
	char		 route[16];
	int		 status;
	long long	 count;
};

struct counter {
	char		 name[32];
	char		 labels[96];
	long long	 value;
};

/* Upper bounds of the histograms' buckets, in seconds (then +Inf). */
static const double metrics_fast[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	0.5, 1, 2.5, 5, 10, 30, 60, 300 };
static const double metrics_runs[] = { 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600,
	7200, 14400 };
#define METRICS_NBOUNDS	(sizeof metrics_fast / sizeof metrics_fast[0])	/* the most */
_Static_assert(SPUR_ARRLEN(metrics_runs) <= METRICS_NBOUNDS, "a histogram's buckets");

struct hist {
	long long	 buckets[METRICS_NBOUNDS];	/* not cumulative: rendered so */
	long long	 count;
	double		 sum;
};

static const struct {
	const char	*name;
	const char	*help;
	const double	*bounds;
	size_t		 nbounds;
} metrics_hists[METRICS_NHIST] = {
	{ "spur_store_commit_seconds", "How long the writer's commits of a batch of deliveries "
	    "(and the outbox's marks) take, payload log sync included.", metrics_fast,
	    SPUR_ARRLEN(metrics_fast) },
	{ "spur_schedule_lag_seconds", "How late a schedule's fire went to ingest after its "
	    "time (catch-up fires after a stop included).", metrics_fast,
	    SPUR_ARRLEN(metrics_fast) },
	{ "spur_run_duration_seconds", "How long the runs this node ran took, from their start "
	    "to their end.", metrics_runs, SPUR_ARRLEN(metrics_runs) },
};

/*
 * Every counter, with its help: each is shown from the start at 0 (an alert's
 * increase() needs a series before the first count). Those counted by
 * destination and kind are seeded by their owner (outbox.c), each pair
 * its backends can count.
 */
static const char *const metrics_counters[][2] = {
	{ "events", "Deliveries stored (each once, whatever matched)." },
	{ "sandbox_start_failures", "Runs whose sandbox could not start." },
	{ "reports_sent", "Reports sent, by destination (the thread's system) and kind." },
	{ "reports_retried", "Report attempts that failed and will be tried again." },
	{ "reports_given_up", "Reports given up after their last attempt." },
	{ "http_busy_refusals", "Requests refused 503 for limits.buffered." },
	{ "http_request_timeouts", "Connections closed by limits.request." },
	{ "http_accept_pauses", "Times a front paused accepting (out of descriptors)." },
};

struct metrics_data {
	struct counter	 counters[METRICS_MAX_SERIES];
	size_t		 ncounters;
	struct hist	 hists[METRICS_NHIST];
	struct series	 requests[METRICS_MAX_SERIES];
	size_t		 nrequests;
	int64_t		 started;
};

/* Counted on the loop and on the HTTP fronts (requests), hence the lock. */
struct metrics {
	pthread_mutex_t		 mu;
	struct metrics_data	 d;
};

static void	metrics_label(struct buf *, const char *);

struct metrics *
metrics_create(void)
{
	struct metrics	*m = xcalloc(1, sizeof *m);

	pthread_mutex_init(&m->mu, NULL);
	m->d.started = now_ms();
	/* Shown from the start, 0 until counted: an alert's expression finds its series. */
	metrics_count(m, "events", 0);
	metrics_count(m, "sandbox_start_failures", 0);
	metrics_count(m, "http_busy_refusals", 0);
	metrics_count(m, "http_request_timeouts", 0);
	metrics_count(m, "http_accept_pauses", 0);
	return m;
}

void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void
metrics_request(struct metrics *m, const char *route, int status)
{
	struct metrics_data	*d;
	size_t			 i;

	if (m == NULL)
		return;
	d = &m->d;
	pthread_mutex_lock(&m->mu);
	for (i = 0; i < d->nrequests; i++) {
		if (d->requests[i].status == status && strcmp(d->requests[i].route, route) == 0)
			break;
	}
	if (i < d->nrequests)
		d->requests[i].count++;
	else if (d->nrequests < METRICS_MAX_SERIES) {
		snprintf(d->requests[i].route, sizeof d->requests[0].route, "%s", route);
		d->requests[i].status = status;
		d->requests[i].count = 1;
		d->nrequests++;
	}
	pthread_mutex_unlock(&m->mu);
}

void
metrics_count(struct metrics *m, const char *name, long long n)
{
	metrics_count_labels(m, name, "", n);
}

void
metrics_count_labels(struct metrics *m, const char *name, const char *labels, long long n)
{
	struct metrics_data	*d;
	size_t			 i;

	if (m == NULL)
		return;
	d = &m->d;
	pthread_mutex_lock(&m->mu);
	for (i = 0; i < d->ncounters; i++) {
		if (strcmp(d->counters[i].name, name) == 0 &&
		    strcmp(d->counters[i].labels, labels) == 0)
			break;
	}
	if (i < d->ncounters)
		d->counters[i].value += n;
	else if (d->ncounters < METRICS_MAX_SERIES) {
		snprintf(d->counters[i].name, sizeof d->counters[0].name, "%s", name);
		snprintf(d->counters[i].labels, sizeof d->counters[0].labels, "%s", labels);
		d->counters[d->ncounters++].value = n;
	}
	pthread_mutex_unlock(&m->mu);
}

void
metrics_observe(struct metrics *m, enum metrics_hist h, double seconds)
{
	struct hist	*x;
	size_t		 i;

	if (m == NULL || h >= METRICS_NHIST)
		return;
	if (seconds < 0)
		seconds = 0;
	pthread_mutex_lock(&m->mu);
	x = &m->d.hists[h];
	for (i = 0; i < metrics_hists[h].nbounds && seconds > metrics_hists[h].bounds[i]; i++)
		;
	if (i < metrics_hists[h].nbounds)
		x->buckets[i]++;
	x->count++;
	x->sum += seconds;
	pthread_mutex_unlock(&m->mu);
}

static const char *
metrics_counter_help(const char *name)
{
	size_t	i;

	for (i = 0; i < SPUR_ARRLEN(metrics_counters); i++)
		if (strcmp(metrics_counters[i][0], name) == 0)
			return metrics_counters[i][1];
	return "A count.";
}

/* Labelled counters, grouped by name (one HELP/TYPE each), in the order first counted. */
static void
metrics_render_counters(struct buf *b, const struct metrics_data *d)
{
	size_t	 i, j;
	int	 seen;

	for (i = 0; i < d->ncounters; i++) {
		for (seen = 0, j = 0; j < i && !seen; j++)
			seen = strcmp(d->counters[j].name, d->counters[i].name) == 0;
		if (seen)
			continue;
		buf_addf(b, "# HELP spur_%s_total %s\n# TYPE spur_%s_total counter\n",
		    d->counters[i].name, metrics_counter_help(d->counters[i].name),
		    d->counters[i].name);
		for (j = i; j < d->ncounters; j++)
			if (strcmp(d->counters[j].name, d->counters[i].name) == 0)
				buf_addf(b, "spur_%s_total%s%s%s %lld\n", d->counters[j].name,
				    *d->counters[j].labels != '\0' ? "{" : "",
				    d->counters[j].labels,
				    *d->counters[j].labels != '\0' ? "}" : "", d->counters[j].value);
	}
}

static void
metrics_render_hists(struct buf *b, const struct metrics_data *d)
{
	const struct hist	*x;
	const char		*name;
	long long		 cum;
	size_t			 h, i;

	for (h = 0; h < METRICS_NHIST; h++) {
		x = &d->hists[h];
		name = metrics_hists[h].name;
		buf_addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, metrics_hists[h].help,
		    name);
		for (cum = 0, i = 0; i < metrics_hists[h].nbounds; i++) {
			cum += x->buckets[i];
			buf_addf(b, "%s_bucket{le=\"%g\"} %lld\n", name, metrics_hists[h].bounds[i],
			    cum);
		}
		buf_addf(b, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", name,
		    x->count, name, x->sum, name, x->count);
	}
}

/* The outbox's backlog from the store: pending reports by destination, their oldest. */
static void
metrics_reports_pending(struct buf *b, struct engine *e)
{
	json_t		*rows = store_reports_pending(e->store), *r;
	size_t		 i;
	int64_t		 oldest = 0, at;

	buf_adds(b, "# HELP spur_reports_pending Reports waiting to be sent, by destination "
	    "(the thread's system) and whether an attempt failed already (retrying).\n"
	    "# TYPE spur_reports_pending gauge\n");
	json_array_foreach(rows, i, r) {
		buf_adds(b, "spur_reports_pending{destination=\"");
		metrics_label(b, json_string_value(json_object_get(r, "destination")));
		buf_addf(b, "\",retrying=\"%s\"} %lld\n", json_is_true(json_object_get(r,
		    "retrying")) ? "true" : "false", (long long)json_integer_value(
		    json_object_get(r, "n")));
		at = json_integer_value(json_object_get(r, "oldest"));
		if (oldest == 0 || at < oldest)
			oldest = at;
	}
	buf_addf(b, "# HELP spur_outbox_oldest_pending_seconds Age of the oldest report still "
	    "to send (0: none).\n# TYPE spur_outbox_oldest_pending_seconds gauge\n"
	    "spur_outbox_oldest_pending_seconds %.3f\n", oldest > 0 ? (now_ms() - oldest) /
	    1000.0 : 0.0);
	json_decref(rows);
}

void
metrics_run_duration(struct metrics *m, double seconds)
{
	metrics_observe(m, METRICS_HIST_RUN, seconds);
}

/* A label value: backslash, quote and newline escaped (a model name is the API's text). */
static void
metrics_label(struct buf *b, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			buf_addc(b, '\\');
		if (*s == '\n')
			buf_adds(b, "\\n");
		else
			buf_addc(b, *s);
	}
}

/* Model usage from the store (every node's): by org, automation and model (SPEC section 16). */
static void
metrics_usage(struct buf *b, struct engine *e)
{
	static const char *const kinds[][2] = { { "input", "input_tokens" },
	    { "output", "output_tokens" }, { "cache_read", "cache_read_tokens" },
	    { "cache_write", "cache_write_tokens" } };
	json_t		*rows = store_usage_by_model(e->store), *r;
	size_t		 i, k;
	int		 pass;

	for (pass = 0; pass < 3; pass++) {
		if (pass == 0)
			buf_adds(b, "# HELP spur_model_requests_total Model requests answered with "
			    "usage, by org, automation and model.\n"
			    "# TYPE spur_model_requests_total counter\n");
		else if (pass == 1)
			buf_adds(b, "# HELP spur_model_tokens_total Model tokens by org, "
			    "automation, model and kind (input, output, cache_read, "
			    "cache_write), as each API reports them.\n"
			    "# TYPE spur_model_tokens_total counter\n");
		else
			buf_adds(b, "# HELP spur_model_cost_usd_total What the model requests cost "
			    "at the price table, in US dollars.\n"
			    "# TYPE spur_model_cost_usd_total counter\n");
		json_array_foreach(rows, i, r) {
			for (k = 0; k < (pass == 1 ? SPUR_ARRLEN(kinds) : 1); k++) {
				buf_adds(b, pass == 0 ? "spur_model_requests_total{org=\"" :
				    pass == 1 ? "spur_model_tokens_total{org=\"" :
				    "spur_model_cost_usd_total{org=\"");
				metrics_label(b, json_string_value(json_object_get(r, "org")));
				buf_adds(b, "\",automation=\"");
				metrics_label(b, json_string_value(json_object_get(r,
				    "automation")));
				buf_adds(b, "\",model=\"");
				metrics_label(b, json_string_value(json_object_get(r, "model")));
				if (pass == 1)
					buf_addf(b, "\",kind=\"%s\"} %lld\n", kinds[k][0],
					    (long long)json_integer_value(json_object_get(r,
					    kinds[k][1])));
				else if (pass == 0)
					buf_addf(b, "\"} %lld\n", (long long)json_integer_value(
					    json_object_get(r, "requests")));
				else
					buf_addf(b, "\"} %.6f\n", json_number_value(
					    json_object_get(r, "cost_usd")));
			}
		}
	}
	json_decref(rows);
}

/*
 * The process, as Prometheus's client libraries name it: resident and
 * virtual memory, CPU, descriptors and their limit, the start time.
 */
static void
metrics_process(struct buf *b, int64_t started_ms)
{
	struct rusage	 ru;
	struct rlimit	 rl;
	struct dirent	*de;
	DIR		*dir;
	FILE		*f;
	char		 line[256];
	long long	 rss = 0, vsz = 0, fds = 0;

	if ((f = fopen("/proc/self/status", "re")) != NULL) {
		while (fgets(line, sizeof line, f) != NULL) {
			if (strncmp(line, "VmRSS:", 6) == 0)
				rss = strtoll(line + 6, NULL, 10) * 1024;
			else if (strncmp(line, "VmSize:", 7) == 0)
				vsz = strtoll(line + 7, NULL, 10) * 1024;
		}
		fclose(f);
	}
	if ((dir = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(dir)) != NULL)
			fds += de->d_name[0] != '.';
		closedir(dir);
		fds--;	/* the directory's own */
	}
	getrusage(RUSAGE_SELF, &ru);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		rl.rlim_cur = 0;
	buf_addf(b, "# HELP process_cpu_seconds_total User and system CPU time spent.\n"
	    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.3f\n"
	    "# HELP process_resident_memory_bytes Resident memory size.\n"
	    "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n"
	    "# HELP process_virtual_memory_bytes Virtual memory size.\n"
	    "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %lld\n"
	    "# HELP process_open_fds Open file descriptors.\n"
	    "# TYPE process_open_fds gauge\nprocess_open_fds %lld\n"
	    "# HELP process_max_fds The limit of open file descriptors.\n"
	    "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n"
	    "# HELP process_start_time_seconds Start time since the epoch.\n"
	    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
	    ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec +
	    ru.ru_stime.tv_usec) / 1e6, rss, vsz, fds, (unsigned long long)rl.rlim_cur,
	    started_ms / 1000.0);
	buf_addf(b, "# HELP spur_build_info The running build: its version and commit.\n"
	    "# TYPE spur_build_info gauge\nspur_build_info{version=\"%s\",commit=\"%s\"} 1\n",
	    PACKAGE_VERSION, SPUR_COMMIT);
}

/* Each org's spend today and this month (UTC, every node's runs), and its budgets. */
static void
metrics_budgets(struct buf *b, struct engine *e)
{
	const struct org	*o;
	char			 today[16], month[16];
	size_t			 i;

	budget_days(today, month);
	buf_adds(b, "# HELP spur_org_spend_usd What an org's model requests cost, by period "
	    "(day: today, month: this month, UTC).\n# TYPE spur_org_spend_usd gauge\n");
	for (i = 0; i < e->conf->norgs; i++) {
		o = &e->conf->orgs[i];
		buf_adds(b, "spur_org_spend_usd{org=\"");
		metrics_label(b, o->name);
		buf_addf(b, "\",period=\"day\"} %.6f\n", store_usage_org_usd(e->store, o->name,
		    today));
		buf_adds(b, "spur_org_spend_usd{org=\"");
		metrics_label(b, o->name);
		buf_addf(b, "\",period=\"month\"} %.6f\n", store_usage_org_usd(e->store,
		    o->name, month));
	}
	buf_adds(b, "# HELP spur_org_budget_usd An org's budget by period (orgs.NAME.budget), "
	    "where it has one.\n# TYPE spur_org_budget_usd gauge\n");
	for (i = 0; i < e->conf->norgs; i++) {
		o = &e->conf->orgs[i];
		if (o->budget_usd_per_day > 0) {
			buf_adds(b, "spur_org_budget_usd{org=\"");
			metrics_label(b, o->name);
			buf_addf(b, "\",period=\"day\"} %.6f\n", o->budget_usd_per_day);
		}
		if (o->budget_usd_per_month > 0) {
			buf_adds(b, "spur_org_budget_usd{org=\"");
			metrics_label(b, o->name);
			buf_addf(b, "\",period=\"month\"} %.6f\n", o->budget_usd_per_month);
		}
	}
}

char *
metrics_render(struct metrics *m, struct engine *e, const struct metrics_live *live)
{
	struct metrics_data	 snap, *d = &snap;
	long long		 causes[RUN_NCAUSES];
	struct buf		 b;
	size_t			 i;
	int			 s;

	pthread_mutex_lock(&m->mu);
	snap = m->d;
	pthread_mutex_unlock(&m->mu);
	buf_init(&b, 0);
	buf_adds(&b, "# HELP spur_http_requests_total HTTP requests by route and status.\n"
	    "# TYPE spur_http_requests_total counter\n");
	for (i = 0; i < d->nrequests; i++) {
		buf_addf(&b, "spur_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
		    d->requests[i].route, d->requests[i].status, d->requests[i].count);
	}
	buf_adds(&b, "# HELP spur_runs Runs in the store by state.\n# TYPE spur_runs gauge\n");
	for (s = 0; s < RUN_NSTATES; s++) {
		buf_addf(&b, "spur_runs{state=\"%s\"} %lld\n", run_state_name(s),
		    store_count_runs(e->store, s));
	}
	buf_adds(&b, "# HELP spur_runs_ended Ended runs in the store by cause (SPEC section 11).\n"
	    "# TYPE spur_runs_ended gauge\n");
	store_count_causes(e->store, causes);
	for (s = CAUSE_OK; s < RUN_NCAUSES; s++) {
		buf_addf(&b, "spur_runs_ended{cause=\"%s\"} %lld\n", run_cause_name(s),
		    causes[s]);
	}
	buf_addf(&b, "# HELP spur_queue_depth Runs waiting to start.\n"
	    "# TYPE spur_queue_depth gauge\nspur_queue_depth %lld\n",
	    store_count_runs(e->store, RUN_QUEUED));
	buf_addf(&b, "# HELP spur_runs_running Runs this node is running.\n"
	    "# TYPE spur_runs_running gauge\nspur_runs_running %d\n",
	    live->running);
	buf_addf(&b, "# HELP spur_http_buffered_bytes Bytes of the requests being read "
	    "(limits.buffered bounds them).\n# TYPE spur_http_buffered_bytes gauge\n"
	    "spur_http_buffered_bytes %lld\n", live->buffered);
	metrics_usage(&b, e);
	metrics_render_counters(&b, d);
	metrics_render_hists(&b, d);
	metrics_reports_pending(&b, e);
	buf_adds(&b, live->node);
	buf_addf(&b, "# HELP spur_config_reload_success Whether the last reload of the config "
	    "took (1; also after the start) or was refused (0).\n"
	    "# TYPE spur_config_reload_success gauge\nspur_config_reload_success %d\n"
	    "# HELP spur_config_reload_timestamp_seconds When the config was last loaded, or "
	    "a reload tried.\n# TYPE spur_config_reload_timestamp_seconds gauge\n"
	    "spur_config_reload_timestamp_seconds %.3f\n", e->reload_ok, e->reload_at / 1000.0);
	metrics_budgets(&b, e);
	metrics_process(&b, d->started);
	buf_addf(&b, "# HELP spur_uptime_seconds Seconds since the engine started.\n"
	    "# TYPE spur_uptime_seconds gauge\nspur_uptime_seconds %lld\n",
	    (long long)((now_ms() - d->started) / 1000));
	return buf_take(&b);
}
