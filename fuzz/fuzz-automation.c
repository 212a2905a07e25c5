/*
 * fuzz-automation.c: the automation loader (automation.c) on one YAML file,
 * then the matcher (match.c) and why on fixed events, and the JSON round trip
 * a run keeps. The file is written once per input into a private directory,
 * as automation_load reads a directory.
 */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "ytree.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static struct secret	 tok = { "env:T", "fuzz-token", 10 };
static struct named_secret named[] = { { "NPM_TOKEN", &tok }, { "HOOK", &tok } };
/* Every coding agent has its key, so the loader gets past that check to the rest. */
static struct named_secret agent_keys[] = {
	{ "claude", &tok }, { "codex", &tok }, { "opencode", &tok },
};
static struct org	 orgs[] = {
	{ .name = "acme",
	  .secrets = named, .nsecrets = SPUR_ARRLEN(named), .agents = agent_keys,
	  .nagents = SPUR_ARRLEN(agent_keys) },
	{ .name = "other" },
};
static struct config	 conf = { .orgs = orgs, .norgs = SPUR_ARRLEN(orgs) };

static struct spur_event *events[4];

/* Events that reach the usual predicates: github text, labels, slack, schedule. */
static void
fuzz_events(void)
{
	struct spur_event	*ev;

	if (events[0] != NULL)
		return;
	ev = events[0] = spur_event_new("acme", "github");
	ev->type = xstrdup("issue_comment.created");
	free(ev->text);
	ev->text = xstrdup("/fix the build please");
	ev->actor.name = xstrdup("octocat");
	ev->actor.role = xstrdup("MEMBER");
	ev->repository = xstrdup("acme/app");
	ev->payload = json_pack("{s:{s:i,s:[{s:s}]},s:s}", "issue", "number", 7,
	    "labels", "name", "Bug", "action", "created");
	json_object_set_new(ev->meta, "label", json_string("bug"));
	json_object_set_new(ev->meta, "is_pull_request", json_false());

	ev = events[1] = spur_event_new("acme", "slack");
	ev->type = xstrdup("app_mention");
	free(ev->text);
	ev->text = xstrdup("<@U1> deploy");
	ev->actor.bot = 1;
	json_object_set_new(ev->meta, "channel", json_string("C1"));

	ev = events[2] = spur_event_new("acme", "schedule");
	ev->type = xstrdup("schedule");
	json_object_set_new(ev->meta, "automation", json_string("a"));

	ev = events[3] = spur_event_new("acme", "linear");
	ev->type = xstrdup("Issue.update");
	json_object_set_new(ev->meta, "to_state", json_string("In Progress"));
	json_object_set_new(ev->meta, "labels", json_pack("[s]", "Agent"));
}

static void
fuzz_set(struct automation_set *set)
{
	const struct automation		*out[8], *a;
	const struct schedule_def	**schedules;
	struct automation		*back;
	json_t				*j;
	char				*why;
	size_t				 i, k;

	for (i = 0; i < automation_count(set); i++) {
		a = automation_get(set, i);
		for (k = 0; k < SPUR_ARRLEN(events); k++) {
			why = automation_why(a, events[k]);
			free(why);
		}
		(void)automation_find(set, a->org, a->name);
		(void)automation_webhook(set, a->org, a->name);
		j = automation_to_json(a);
		if ((back = automation_from_json(j)) == NULL)
			abort();	/* a run could not keep what was loaded */
		automation_free(back);
		json_decref(j);
	}
	for (k = 0; k < SPUR_ARRLEN(events); k++)
		(void)automation_match(set, events[k], out, SPUR_ARRLEN(out));
	(void)automation_schedules(set, &schedules);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char		*dir, *file;
	struct automation_set	*set;
	struct yerrs		 errs;
	char			*cause;
	int			 pass;

	if (dir == NULL) {
		/* The systems' sections are their files' own: made as the config makes them. */
		setenv("SPUR_FUZZ_TOKEN", "fuzz-token", 1);
		if (config_org_section(&orgs[0], "github", "webhook_secret: env:SPUR_FUZZ_TOKEN",
		    &cause) != 0 ||
		    config_org_section(&orgs[0], "slack", "signing_secret: env:SPUR_FUZZ_TOKEN",
		    &cause) != 0 || config_org_section(&orgs[0], "linear",
		    "webhook_secret: env:SPUR_FUZZ_TOKEN", &cause) != 0)
			fatal("section: %s", cause);
		dir = path_join(fuzz_tmpdir(), "automations");
		if (mkdir_p(dir, 0700) != 0)
			fatal("mkdir %s", dir);
		file = path_join(dir, "a.yaml");
		fuzz_events();
	}
	fuzz_write_file(file, data, size);
	/* With the config (org default, secrets checked) and without (spur check -a). */
	for (pass = 0; pass < 2; pass++) {
		yerrs_init(&errs);
		set = automation_load(pass == 0 ? &conf : NULL, dir, &errs);
		if ((set == NULL) != (errs.nerrors > 0))
			abort();	/* refused without saying why, or loaded despite an error */
		if (set != NULL) {
			fuzz_set(set);
			automation_set_unref(set);
		}
		yerrs_free(&errs);
	}
	return 0;
}
