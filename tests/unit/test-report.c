/* test-report.c: report.c's pure parts from a run's typed row: its facts, its status line, its destinations, the message. */
#include "spur.h"
#include "automation.h"
#include "report.h"
#include "store.h"
#include "tap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define T0	1780000000000LL		/* a run's start, ms */

/* A row as store_run_get gives it, its event's head from text (NULL: no event). */
static struct run_row *
row_new(enum run_state state, const char *head)
{
	struct run_row	*r = xcalloc(1, sizeof *r);

	r->id = xstrdup("run_abc");
	r->org = xstrdup("acme");
	r->automation = xstrdup("fix");
	r->state = state;
	r->created_at = T0 - 1000;
	if (state != RUN_QUEUED)
		r->started_at = T0;
	if (head != NULL) {
		r->event = xcalloc(1, sizeof *r->event);
		r->event->head = json_loads(head, 0, NULL);
		r->event->id = json_string_value(json_object_get(r->event->head, "id"));
		r->event->source = json_string_value(json_object_get(r->event->head, "source"));
	}
	return r;
}

static void
test_facts(void)
{
	struct run_row		*r = row_new(RUN_FAILED, NULL);
	struct report_facts	 f;
	char			 usage[64], *s;

	r->ended_at = T0 + 65000;
	r->cause = CAUSE_AGENT_ERROR;
	r->reason = xstrdup("agent exited 3");
	r->result = xstrdup("it broke");
	r->retry_of = xstrdup("run_old");
	usage[0] = '\0';
	report_facts_of(r, T0 + 999999, &f, usage, sizeof usage);
	is_str(f.run, "run_abc", "facts: the run");
	is_str(f.automation, "fix", "  its automation");
	is_str(f.state, "failed", "  its state, by name");
	is_str(f.cause, "the agent failed", "  its cause in words");
	is_str(f.reason, "agent exited 3", "  its reason");
	is_str(f.result, "it broke", "  the agent's message");
	is_str(f.retry_of, "run_old", "  the run it continues");
	is_int(f.duration_ms, 65000, "  its duration: start to end, not to now");
	ok(f.usage == NULL && f.link == NULL, "  no model used: no usage; the link is the caller's");

	r->requests = 3;
	r->tokens = 1234567;
	r->cost_usd = 3.4;
	report_facts_of(r, T0, &f, usage, sizeof usage);
	ok(f.usage != NULL && strcmp(f.usage, "1.2M tokens, $3.40") == 0,
	    "facts: the usage in words (%s)", f.usage != NULL ? f.usage : "NULL");
	s = report_format("github", &f, report_backend_find("github")->max);
	ok(strstr(s, "**failed** · 1m 5s, 1.2M tokens, $3.40") != NULL &&
	    strstr(s, "**Why:** the agent failed.") != NULL &&
	    strstr(s, "This run continues `run_old`") != NULL,
	    "the message from a row: state, duration, usage, cause, continuation");
	free(s);
	run_row_free(r);

	r = row_new(RUN_RUNNING, NULL);
	report_facts_of(r, T0 + 2500, &f, usage, sizeof usage);
	is_int(f.duration_ms, 2500, "a running run: its duration so far");
	ok(f.cause == NULL, "  and no cause yet");
	run_row_free(r);
	r = row_new(RUN_CANCELLED, NULL);
	r->started_at = 0;
	r->cause = CAUSE_CANCELLED;
	report_facts_of(r, T0, &f, usage, sizeof usage);
	is_int(f.duration_ms, -1, "never started: -1 (\"not started\")");
	s = report_format("slack", &f, report_backend_find("slack")->max);
	ok(strstr(s, "*cancelled* · not started") != NULL, "  said so in slack's markup");
	free(s);
	run_row_free(r);
}

static void
test_status_line(void)
{
	const struct report_backend *gh = report_backend_find("github");
	const struct report_backend *sl = report_backend_find("slack");
	const struct report_backend *li = report_backend_find("linear");
	struct run_row	*r;
	char		*s;

	ok(gh != NULL && sl != NULL && li != NULL, "the backends are found by source");
	if (gh == NULL || sl == NULL || li == NULL)
		return;
	r = row_new(RUN_QUEUED, "{\"id\":\"evt_1\",\"source\":\"github\"}");
	s = report_status_line(gh, r, NULL, 0, NULL, T0);
	is_str(s, REPORT_MARKER "run_abc:status -->\n**spur** · `fix` · **queued** · Run `run_abc`",
	    "github, queued: its hidden marker first, no link");
	free(s);
	run_row_free(r);

	r = row_new(RUN_RUNNING, "{\"id\":\"evt_1\",\"source\":\"linear\"}");
	s = report_status_line(li, r, NULL, 0, "https://spur.example/runs/run_abc", T0 + 75000);
	ok(strstr(s, "**running** since ") != NULL && strstr(s, "(1m 15s so far)") != NULL,
	    "linear, running: since when, for how long so far (%s)", s);
	ok(strstr(s, " · Run [run_abc](https://spur.example/runs/run_abc)") != NULL &&
	    strstr(s, "\n\n" REPORT_MARKER "run_abc:status -->") != NULL,
	    "  its link, its marker last");
	free(s);
	run_row_free(r);

	r = row_new(RUN_COMPLETED, "{\"id\":\"evt_1\",\"source\":\"slack\",\"type\":"
	    "\"slash_command\",\"actor\":{\"id\":\"U1\"},\"text\":\"fix `it`\",\"meta\":"
	    "{\"command\":\"/spur\"}}");
	r->ended_at = T0 + 1000;
	s = report_status_line(sl, r, NULL, 0, "https://spur.example/runs/run_abc", T0 + 5000);
	ok(strstr(s, "*spur* · `fix` · *completed* in 1.0s · the report follows in the thread · Run "
	    "<https://spur.example/runs/run_abc|run_abc>") != NULL,
	    "slack, ended: mrkdwn, the report follows (%s)", s);
	ok(strstr(s, "U1") != NULL && strstr(s, REPORT_MARKER) == NULL,
	    "  a slash command's thread opens with who asked; no hidden marker in slack");
	free(s);
	run_row_free(r);
}

static void
test_checklist(void)
{
	const struct report_backend *gh = report_backend_find("github");
	const struct report_backend *sl = report_backend_find("slack");
	struct history_row	 h[4];
	struct run_row		*r;
	char			*s;

	if (gh == NULL || sl == NULL)
		return;
	memset(h, 0, sizeof h);
	h[0].state = RUN_QUEUED;
	h[0].at = T0 - 2000;
	h[1].state = RUN_RUNNING;
	h[1].phase = PHASE_CLONING;
	h[1].at = T0;
	h[2].state = RUN_RUNNING;
	h[2].phase = PHASE_AGENT;
	h[2].at = T0 + 3500;
	r = row_new(RUN_RUNNING, "{\"id\":\"evt_1\",\"source\":\"github\"}");
	s = report_status_line(gh, r, h, 3, NULL, T0 + 10000);
	ok(strstr(s, "\n- [x] run slot · 2.0s\n- [x] repository checked out · 3.5s\n"
	    "- [ ] agent at work, since ") != NULL && strstr(s, " UTC") != NULL,
	    "checklist: each phase passed with how long it took, the current one since when (%s)",
	    s);
	free(s);
	h[3].state = RUN_COMPLETED;
	h[3].cause = CAUSE_OK;
	h[3].at = T0 + 9000;
	r->state = RUN_COMPLETED;
	r->ended_at = T0 + 9000;
	s = report_status_line(sl, r, h, 4, NULL, T0 + 20000);
	ok(strstr(s, "*completed* in 9.0s") != NULL &&
	    strstr(s, "\n:white_check_mark: agent done · 5.5s") != NULL &&
	    strstr(s, "hourglass") == NULL,
	    "  ended: every phase checked, in Slack's emoji, nothing still under way (%s)", s);
	free(s);
	run_row_free(r);
}

static void
test_destinations(void)
{
	struct automation	*a = xcalloc(1, sizeof *a);

	ok(!report_dest_heard(NULL, RUN_FAILED), "no snapshot: no destination");
	ok(!report_dest_heard(a, RUN_FAILED), "no report_to: no destination");
	a->report_to = json_loads("[{\"source\":\"slack\",\"meta\":{\"channel\":\"C1\"}}]", 0,
	    NULL);
	ok(report_dest_heard(a, RUN_FAILED) && report_dest_heard(a, RUN_COMPLETED),
	    "report_to without report_on: every end");
	a->report_on = xcalloc(2, sizeof *a->report_on);
	a->report_on[0] = xstrdup("failed");
	ok(report_dest_heard(a, RUN_FAILED) && !report_dest_heard(a, RUN_COMPLETED),
	    "report_on: only the states it names");
	automation_free(a);
}

int
main(void)
{
	test_facts();
	test_status_line();
	test_checklist();
	test_destinations();
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
