/* metrics.c: counters kept in memory and rendered in the Prometheus text format. */
#include "spur.h"
#include "dispatch.h"
#include "ingest.h"
#include "serve.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

#define METRICS_MAX_SERIES	128

struct series {
	char		 route[16];
	int		 status;
	long long	 count;
};

struct counter {
	char		 name[32];
	long long	 value;
};

struct metrics {
	struct series	 requests[METRICS_MAX_SERIES];
	size_t		 nrequests;
	struct counter	 counters[32];
	size_t		 ncounters;
	double		 run_seconds_sum;
	long long	 run_seconds_count;
	int64_t		 started;
};

struct metrics *
metrics_create(void)
{
	struct metrics	*m = xcalloc(1, sizeof *m);

	m->started = now_ms();
	return m;
}

void
metrics_free(struct metrics *m)
{
	free(m);
}

void
metrics_request(struct metrics *m, const char *route, int status)
{
	size_t	 i;

	if (m == NULL)
		return;
	for (i = 0; i < m->nrequests; i++) {
		if (m->requests[i].status == status && strcmp(m->requests[i].route, route) == 0) {
			m->requests[i].count++;
			return;
		}
	}
	if (m->nrequests == METRICS_MAX_SERIES)
		return;
	snprintf(m->requests[m->nrequests].route, sizeof m->requests[0].route, "%s", route);
	m->requests[m->nrequests].status = status;
	m->requests[m->nrequests].count = 1;
	m->nrequests++;
}

void
metrics_count(struct metrics *m, const char *name, long long n)
{
	size_t	 i;

	if (m == NULL)
		return;
	for (i = 0; i < m->ncounters; i++) {
		if (strcmp(m->counters[i].name, name) == 0) {
			m->counters[i].value += n;
			return;
		}
	}
	if (m->ncounters == SPUR_ARRLEN(m->counters))
		return;
	snprintf(m->counters[m->ncounters].name, sizeof m->counters[0].name, "%s", name);
	m->counters[m->ncounters++].value = n;
}

void
metrics_run_duration(struct metrics *m, double seconds)
{
	m->run_seconds_sum += seconds;
	m->run_seconds_count++;
}

char *
metrics_render(struct metrics *m, struct engine *e)
{
	struct buf	 b;
	size_t		 i;
	int		 s;

	buf_init(&b, 0);
	buf_adds(&b, "# HELP spur_http_requests_total HTTP requests by route and status.\n"
	    "# TYPE spur_http_requests_total counter\n");
	for (i = 0; i < m->nrequests; i++) {
		buf_addf(&b, "spur_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
		    m->requests[i].route, m->requests[i].status, m->requests[i].count);
	}
	buf_adds(&b, "# HELP spur_events_total Events stored.\n"
	    "# TYPE spur_events_total counter\n");
	for (i = 0; i < m->ncounters; i++) {
		if (strcmp(m->counters[i].name, "events") == 0)
			break;
	}
	buf_addf(&b, "spur_events_total %lld\n", i < m->ncounters ? m->counters[i].value : 0);
	for (i = 0; i < m->ncounters; i++) {
		if (strcmp(m->counters[i].name, "events") == 0)
			continue;
		buf_addf(&b, "# TYPE spur_%s_total counter\nspur_%s_total %lld\n",
		    m->counters[i].name, m->counters[i].name, m->counters[i].value);
	}
	buf_adds(&b, "# HELP spur_runs Runs in the store by state.\n# TYPE spur_runs gauge\n");
	for (s = 0; s < RUN_NSTATES; s++) {
		buf_addf(&b, "spur_runs{state=\"%s\"} %lld\n", run_state_name(s),
		    store_count_runs(e->store, s));
	}
	buf_addf(&b, "# HELP spur_queue_depth Runs waiting to start.\n"
	    "# TYPE spur_queue_depth gauge\nspur_queue_depth %lld\n",
	    store_count_runs(e->store, RUN_QUEUED));
	buf_addf(&b, "# HELP spur_runs_running Runs this node is running.\n"
	    "# TYPE spur_runs_running gauge\nspur_runs_running %d\n",
	    e->dispatch != NULL ? dispatch_running(e->dispatch) : 0);
	buf_addf(&b, "# HELP spur_run_duration_seconds Run durations.\n"
	    "# TYPE spur_run_duration_seconds summary\n"
	    "spur_run_duration_seconds_sum %.3f\nspur_run_duration_seconds_count %lld\n",
	    m->run_seconds_sum, m->run_seconds_count);
	buf_addf(&b, "# TYPE spur_uptime_seconds gauge\nspur_uptime_seconds %lld\n",
	    (long long)((now_ms() - m->started) / 1000));
	return buf_take(&b);
}
