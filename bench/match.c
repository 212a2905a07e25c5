/* bench/match.c: how long loading 10,000 automations takes, and one match against them (median and p99). */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "ytree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_ORGS		10
#define BENCH_AUTOMATIONS	10000
#define BENCH_MATCHES		200000

static const char *const gh_events[] = {
	"issue_comment.created", "pull_request_review_comment.created", "issues.opened",
	"issues.labeled", "pull_request.opened", "pull_request.synchronize", "push",
	"issue_comment", "release.published", "workflow_run.completed", "check_run.completed",
	"pull_request_review.submitted",
};
static const char *const texts[] = {
	"^/fix\\b", "^/review\\b", "(?i)\\bdeploy\\b", "^/spur (run|retry)", "please help",
	"^/test\\s+\\S+",
};
static const char *const slack_events[] = { "app_mention", "message", "slash_command" };
static const char *const linear_events[] = { "Issue.update", "Issue.create", "Comment.create" };

static int64_t
bench_ns(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
bench_cmp(const void *a, const void *b)
{
	int64_t	 x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* One automation file: a mix of sources like a busy installation, with typical conditions. */
static void
bench_write(const char *dir, unsigned i)
{
	char	*path, *name;
	FILE	*f;
	unsigned kind = i % 20, org = (i / 20) % BENCH_ORGS;

	name = xprintf("a%05u.yaml", i);
	path = path_join(dir, name);
	if ((f = fopen(path, "w")) == NULL)
		fatal("fopen %s", path);
	fprintf(f, "org: org%u\n", org);
	if (kind < 10) {
		fprintf(f, "on:\n  github:\n    events: [%s]\n",
		    gh_events[(i / 7) % SPUR_ARRLEN(gh_events)]);
		fprintf(f, "    repositories: [\"org%u/repo-%u*\", org%u/api]\n", org, i % 13,
		    org);
		fprintf(f, "    text: '%s'\n", texts[i % SPUR_ARRLEN(texts)]);
		if (i % 3 == 0)
			fprintf(f, "    where:\n      issue.pull_request: { exists: true }\n"
			    "      sender.login: { not: { in: [dependabot, renovate] } }\n");
	} else if (kind < 14)
		fprintf(f, "on:\n  slack:\n    events: [%s]\n    channels: [C%04u]\n"
		    "    text: '%s'\n", slack_events[i % 3], i % 50,
		    texts[i % SPUR_ARRLEN(texts)]);
	else if (kind < 17)
		fprintf(f, "on:\n  linear:\n    events: [%s]\n    teams: [T%u]\n"
		    "    to_state_type: started\n", linear_events[i % 3], i % 7);
	else if (kind < 19)
		fprintf(f, "on:\n  webhook:\n    name: hook-%u\n    auth: none\n"
		    "    where:\n      status: failed\n", i);
	else
		fprintf(f, "on:\n  schedule:\n    cron: \"%u %u * * *\"\n", i % 60, i % 24);
	fprintf(f, "prompt: |\n  Automation %u: do what the event asks.\n", i);
	fclose(f);
	free(path);
	free(name);
}

static struct spur_event *
bench_event(void)
{
	struct spur_event	*ev = spur_event_new("org3", "github");
	json_error_t		 jerr;

	ev->type = xstrdup("issue_comment.created");
	ev->repository = xstrdup("org3/api");
	free(ev->text);
	ev->text = xstrdup("/fix the flaky login test please, it fails on CI since yesterday");
	ev->actor.name = xstrdup("alice");
	ev->actor.role = xstrdup("MEMBER");
	ev->payload = json_loads("{\"action\":\"created\",\"issue\":{\"number\":42,"
	    "\"pull_request\":{\"url\":\"https://api.github.com/repos/org3/api/pulls/42\"}},"
	    "\"comment\":{\"body\":\"/fix the flaky login test\"},"
	    "\"sender\":{\"login\":\"alice\",\"type\":\"User\"}}", 0, &jerr);
	if (ev->payload == NULL)
		fatal("bench payload: %s", jerr.text);
	return ev;
}

int
main(int argc, char **argv)
{
	static struct secret		 secret = { "env:BENCH", "x", 1 };
	static struct named_secret	 secrets[] = { { "TOKEN", &secret } };
	struct org			 orgs[BENCH_ORGS];
	struct config			 conf;
	struct automation_set		*set;
	struct spur_event		*ev;
	const struct automation		*out[64];
	struct yerrs			 errs;
	char				 tmpl[] = "/tmp/spur-bench-match.XXXXXX", *dir;
	int64_t				 t0, load_ns, *samples;
	size_t				 i, n = 0, matches = BENCH_MATCHES;

	if (argc > 1)
		matches = strtoul(argv[1], NULL, 10);
	if (matches == 0)
		matches = 1;
	log_init(LOG_WARN, "bench-match");
	memset(&conf, 0, sizeof conf);
	memset(orgs, 0, sizeof orgs);
	for (i = 0; i < BENCH_ORGS; i++) {
		orgs[i].name = xprintf("org%zu", i);
		orgs[i].secrets = secrets;
		orgs[i].nsecrets = 1;
	}
	conf.orgs = orgs;
	conf.norgs = BENCH_ORGS;

	if ((dir = mkdtemp(tmpl)) == NULL)
		fatal("mkdtemp");
	for (i = 0; i < BENCH_AUTOMATIONS; i++)
		bench_write(dir, i);

	yerrs_init(&errs);
	t0 = bench_ns();
	set = automation_load(&conf, dir, &errs);
	load_ns = bench_ns() - t0;
	if (set == NULL) {
		for (i = 0; i < errs.n && i < 10; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		fatal("bench automations do not load");
	}

	ev = bench_event();
	samples = xcalloc(matches, sizeof *samples);
	for (i = 0; i < 1000; i++)	/* warm caches and the JIT */
		n = automation_match(set, ev, out, SPUR_ARRLEN(out));
	for (i = 0; i < matches; i++) {
		t0 = bench_ns();
		n = automation_match(set, ev, out, SPUR_ARRLEN(out));
		samples[i] = bench_ns() - t0;
	}
	qsort(samples, matches, sizeof *samples, bench_cmp);

	printf("automations: %zu in %d orgs; load: %.0f ms; match (%zu runs, %zu matched): "
	    "median %lld ns, p99 %lld ns\n", automation_count(set), BENCH_ORGS,
	    load_ns / 1e6, matches, n, (long long)samples[matches / 2],
	    (long long)samples[matches * 99 / 100]);

	free(samples);
	spur_event_free(ev);
	automation_set_unref(set);
	yerrs_free(&errs);
	rm_rf(dir);
	for (i = 0; i < BENCH_ORGS; i++)
		free(orgs[i].name);
	return 0;
}
