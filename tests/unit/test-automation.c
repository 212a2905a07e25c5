/* test-automation.c: the automation loader against broken fixtures, and the matcher against a table of events. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "repo.h"
#include "ytree.h"
#include "tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char	*srcdir;

/*
 * Orgs of a test config: demo (the demo's secrets, a key for every agent), acme (a key
 * for claude only) and keyless (no agent key).
 */
static struct secret a_secret = { "env:SECRET", "bm90LXVzZWQ=", 12 };	/* base64: a Standard Webhooks key too */
static struct named_secret demo_secrets[] = {
	{ "DEPLOY_HOOK_SECRET", &a_secret }, { "NPM_TOKEN", &a_secret },
};
static struct named_secret demo_agents[] = {
	{ "claude", &a_secret }, { "codex", &a_secret }, { "opencode", &a_secret },
};
static struct named_secret acme_secrets[] = { { "ACME_ONLY", &a_secret } };
/* demo can look its Slack and Linear members up (authors: members, the default). */
static struct org three_orgs[] = {
	{ .name = "demo", .secrets = demo_secrets, .nsecrets = 2, .agents = demo_agents,
	    .nagents = 3 },
	{ .name = "acme", .secrets = acme_secrets, .nsecrets = 1, .agents = demo_agents,
	    .nagents = 1 },
	{ .name = "keyless" },
};
static struct config conf2 = { .orgs = three_orgs, .norgs = 3 };
static struct config conf1 = { .orgs = three_orgs, .norgs = 1 };

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entries of dir (not starting with '.'), sorted; with suffix, only those ending so. */
static size_t
dir_list(const char *dir, const char *suffix, char ***out)
{
	DIR		*d;
	struct dirent	*de;
	char		**names = NULL;
	size_t		  n = 0, len;

	*out = NULL;
	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		if (suffix != NULL && (len < strlen(suffix) ||
		    strcmp(de->d_name + len - strlen(suffix), suffix) != 0))
			continue;
		names = xreallocarray(names, n + 1, sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, name_cmp);
	*out = names;
	return n;
}

static void
dir_list_free(char **names, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Every "DIR/" in s removed, so messages compare independently of where the tree is. */
static char *
strip_dir(const char *s, const char *dir)
{
	char	*prefix = xprintf("%s/", dir), *out = xstrdup(s), *p;

	while ((p = strstr(out, prefix)) != NULL)
		memmove(p, p + strlen(prefix), strlen(p + strlen(prefix)) + 1);
	free(prefix);
	return out;
}

/*
 * Each broken/CASE directory loads with exactly the errors and warnings of CASE/expect,
 * in that order: refused (NULL) when one is an error, loaded when all are warnings.
 */
static void
test_broken(void)
{
	struct automation_set	*set;
	struct yerrs		 errs;
	char			*base, *dir, *path, *text, *cause, *line, *save, *got;
	char			**cases, **want = NULL;
	size_t			 ncases, i, j, nwant, len;
	int			 refuse;

	base = xprintf("%s/tests/fixtures/automations/broken", srcdir);
	ncases = dir_list(base, NULL, &cases);
	ok(ncases >= 15, "broken fixtures found (%zu)", ncases);
	for (i = 0; i < ncases; i++) {
		dir = xprintf("%s/%s", base, cases[i]);
		path = xprintf("%s/expect", dir);
		if (read_file(path, 1 << 20, &text, &len, &cause) != 0) {
			ok(0, "%s: expect: %s", cases[i], cause);
			free(cause);
			free(path);
			free(dir);
			continue;
		}
		nwant = 0;
		refuse = 0;
		for (line = strtok_r(text, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			want = xreallocarray(want, nwant + 1, sizeof *want);
			want[nwant++] = line;
			refuse |= strstr(line, ": error: ") != NULL;
		}
		yerrs_init(&errs);
		set = automation_load(&conf2, dir, &errs);
		ok((set == NULL) == refuse, "%s: %s", cases[i], refuse ? "refused" :
		    "loaded with warnings");
		automation_set_unref(set);
		is_int(errs.n, nwant, "%s: %zu errors and warnings", cases[i], nwant);
		for (j = 0; j < errs.n || j < nwant; j++) {
			got = j < errs.n ? strip_dir(errs.msgs[j], dir) : NULL;
			is_str(got, j < nwant ? want[j] : NULL, "%s: error %zu", cases[i], j);
			free(got);
		}
		yerrs_free(&errs);
		free(text);
		free(path);
		free(dir);
	}
	free(want);
	dir_list_free(cases, ncases);
	free(base);
}

static char *
names_join(const struct automation **list, size_t n)
{
	struct buf	 b;
	size_t		 i;

	buf_init(&b, 0);
	buf_adds(&b, "");
	for (i = 0; i < n; i++)
		buf_addf(&b, "%s%s", i > 0 ? "," : "", list[i]->name);
	return buf_take(&b);
}

static char *
json_names_join(const json_t *list)
{
	struct buf	 b;
	json_t		*v;
	size_t		 i;

	buf_init(&b, 0);
	buf_adds(&b, "");
	json_array_foreach(list, i, v)
		buf_addf(&b, "%s%s", i > 0 ? "," : "", json_string_value(v));
	return buf_take(&b);
}

/* One row of the table: the event, which automations it starts, and why some do not. */
/* The facts people.c would give of a full member of a Slack or Linear workspace. */
static void
test_member(struct spur_event *ev)
{
	if (strcmp(ev->source, "slack") != 0 && strcmp(ev->source, "linear") != 0)
		return;
	ev->person = xcalloc(1, sizeof *ev->person);
	ev->person->groups = xcalloc(1, sizeof *ev->person->groups);
}

static void
test_match_case(const struct automation_set *set, const char *file, const char *name)
{
	const struct automation	*out[32], *a;
	struct spur_event	*ev;
	json_error_t		 jerr;
	json_t			*j, *why, *v;
	const char		*key, *slash;
	char			*got, *want, *org, *w;
	size_t			 n, i, k;
	int			 matched;

	if ((j = json_load_file(file, 0, &jerr)) == NULL) {
		ok(0, "%s: %s", name, jerr.text);
		return;
	}
	ev = spur_event_from_json(json_object_get(j, "event"));
	if (!ok(ev != NULL, "%s: event", name)) {
		json_decref(j);
		return;
	}
	/* Who a Slack or Linear actor is comes from a lookup (people.c): here, a member. */
	test_member(ev);
	n = automation_match(set, ev, out, SPUR_ARRLEN(out));
	got = names_join(out, n);
	want = json_names_join(json_object_get(j, "match"));
	is_str(got, want, "%s: matches", name);
	free(got);
	free(want);

	/* match and why agree on every automation of the set. */
	for (i = 0; i < automation_count(set); i++) {
		a = automation_get(set, i);
		matched = 0;
		for (k = 0; k < n; k++)
			matched |= out[k] == a;
		w = automation_why(a, ev);
		if (matched != (w == NULL))
			ok(0, "%s: why and match disagree on %s/%s: %s", name, a->org,
			    a->name, w != NULL ? w : "(null)");
		free(w);
	}

	why = json_object_get(j, "why");
	json_object_foreach(why, key, v) {
		slash = strchr(key, '/');
		org = slash != NULL ? xstrndup(key, slash - key) : xstrdup(ev->org);
		a = automation_find(set, org, slash != NULL ? slash + 1 : key);
		if (ok(a != NULL, "%s: automation %s exists", name, key)) {
			w = automation_why(a, ev);
			is_str(w, json_string_value(v), "%s: why %s", name, key);
			free(w);
		}
		free(org);
	}
	spur_event_free(ev);
	json_decref(j);
}

static void
test_match(void)
{
	struct automation_set	*set;
	struct yerrs		 errs;
	char			*dir, *events, *file, **names;
	size_t			 n, i;
	size_t			 u;

	dir = xprintf("%s/tests/fixtures/automations/match/automations", srcdir);
	yerrs_init(&errs);
	set = automation_load(&conf2, dir, &errs);
	for (u = 0; u < errs.n; u++)
		printf("# %s\n", errs.msgs[u]);
	if (!ok(set != NULL && errs.n == 0, "match fixtures load")) {
		yerrs_free(&errs);
		free(dir);
		return;
	}
	is_int(automation_count(set), 12, "12 automations");
	ok(automation_find(set, "acme", "fix-on-comment") !=
	    automation_find(set, "demo", "fix-on-comment"), "one name, two orgs");
	ok(automation_find(set, "demo", "nope") == NULL, "find: unknown name");

	events = xprintf("%s/tests/fixtures/automations/match/events", srcdir);
	n = dir_list(events, ".json", &names);
	ok(n >= 20, "event table (%zu rows)", n);
	for (i = 0; i < n; i++) {
		file = xprintf("%s/%s", events, names[i]);
		test_match_case(set, file, names[i]);
		free(file);
	}
	dir_list_free(names, n);
	free(events);
	yerrs_free(&errs);
	automation_set_unref(set);
	free(dir);
}

/* The webhook and schedule definitions the listener and scheduler ask for. */
static void
test_defs(void)
{
	struct automation_set		*set;
	struct yerrs			 errs;
	const struct webhook_def	*w;
	const struct schedule_def	**sched;
	const struct automation		*a;
	char				*dir;
	size_t				 n;

	dir = xprintf("%s/tests/fixtures/automations/match/automations", srcdir);
	yerrs_init(&errs);
	set = automation_load(&conf2, dir, &errs);
	free(dir);
	if (!ok(set != NULL, "defs: load"))
		return;
	w = automation_webhook(set, "demo", "deploy");
	if (ok(w != NULL, "webhook deploy")) {
		is_int(w->auth, WH_AUTH_HMAC, "hmac");
		is_str(w->secret, "DEPLOY_HOOK_SECRET", "secret name");
		is_str(w->header, "X-Signature", "header");
		is_str(w->prefix, "sha256=", "prefix");
		is_int(w->base64, 0, "hex");
		is_str(w->text_path, "message", "text path");
		is_str(w->thread_path, "deploy.id", "thread path");
	}
	ok(automation_webhook(set, "acme", "deploy") == NULL, "webhook: per org");
	ok(automation_webhook(set, "demo", "github") == NULL, "webhook: not a provider");
	n = automation_schedules(set, &sched);
	if (is_int(n, 1, "one schedule")) {
		is_str(sched[0]->org, "demo", "schedule org");
		is_str(sched[0]->automation, "nightly", "schedule automation");
		is_str(sched[0]->cron, "0 3 * * *", "schedule cron");
		is_str(sched[0]->timezone, "Europe/Paris", "schedule zone");
		ok(sched[0]->parsed != NULL, "schedule parsed");
	}
	a = automation_find(set, "demo", "fix-on-comment");
	if (ok(a != NULL, "defaults: found")) {
		is_str(agent_name(a->agent), "claude", "agent");
		is_int(a->proof, PROOF_PULL_REQUEST, "proof");
		is_int(a->conc_key, CONC_THREAD, "concurrency key default");
		is_int(a->on_busy, BUSY_QUEUE, "on_busy default");
		ok(a->report_thread, "report default");
		ok(!a->authors_any && !a->bots, "authors and bots defaults");
		is_int(a->timeout, 0, "timeout default");
	}
	/* The set outlives a reload while a reference is held. */
	automation_set_ref(set);
	automation_set_unref(set);
	is_str(automation_get(set, 0)->name, "fix-on-comment", "still there after unref");
	ok(automation_get(set, 99) == NULL, "get: out of range");
	automation_set_unref(set);
	yerrs_free(&errs);
}

static char *
tmp_dir(void)
{
	char	*d = xstrdup("/tmp/spur-test-automation.XXXXXX");

	if (mkdtemp(d) == NULL)
		fatal("mkdtemp");
	return d;
}

static void
tmp_write(const char *dir, const char *name, const char *text)
{
	char	*path = path_join(dir, name);
	FILE	*f;

	if ((f = fopen(path, "w")) == NULL)
		fatal("fopen %s", path);
	fputs(text, f);
	fclose(f);
	free(path);
}

/* With one org, `org` may be left out; a reload must not change what a run keeps. */
static void
test_json(void)
{
	struct automation_set	*set;
	struct automation	*back;
	const struct automation	*a;
	struct yerrs		 errs;
	json_t			*j, *j2;
	char			*dir = tmp_dir(), *s1, *s2;

	tmp_write(dir, "full.yaml",
	    "on:\n"
	    "  slack: { events: [slash_command] }\n"
	    "agent: command\n"
	    "model: sonnet\n"
	    "command: [./tools/agent.sh, --fast]\n"
	    "prompt: |\n  Do the thing.\n  Carefully.\n"
	    "repository: demo/api\n"
	    "proof: artifacts\n"
	    "artifacts: [report.md, \"out/*.json\"]\n"
	    "secrets: [NPM_TOKEN]\n"
	    "network: { allow: [api.example.com, \"*.example.org\"] }\n"
	    "timeout: 20m\n"
	    "concurrency: { key: automation, on_busy: cancel_running }\n"
	    "report: none\n"
	    "authors: any\n"
	    "bots: true\n");
	yerrs_init(&errs);
	set = automation_load(&conf1, dir, &errs);
	if (!ok(set != NULL, "one org: org may be left out")) {
		printf("# %s\n", errs.n > 0 ? errs.msgs[0] : "");
		goto out;
	}
	a = automation_get(set, 0);
	is_str(a->org, "demo", "org defaults to the only one");
	is_str(a->name, "full", "name defaults to the file name");
	is_int(a->timeout, 1200, "timeout 20m");
	is_str(a->prompt, "Do the thing.\nCarefully.\n", "prompt as written");
	j = automation_to_json(a);
	s1 = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	s2 = strip_dir(s1, dir);
	is_str(s2, "{\"agent\":\"command\",\"artifacts\":[\"report.md\",\"out/*.json\"],"
	    "\"authors\":\"any\",\"bots\":true,\"command\":[\"./tools/agent.sh\",\"--fast\"],"
	    "\"concurrency\":{\"key\":\"automation\",\"on_busy\":\"cancel_running\"},"
	    "\"file\":\"full.yaml\",\"model\":\"sonnet\",\"name\":\"full\","
	    "\"network\":{\"allow\":[\"api.example.com\",\"*.example.org\"]},\"org\":\"demo\","
	    "\"prompt\":\"Do the thing.\\nCarefully.\\n\",\"proof\":\"artifacts\","
	    "\"report\":\"none\",\"repository\":\"demo/api\",\"retry\":\"once\",\"secrets\":[\"NPM_TOKEN\"],"
	    "\"timeout\":1200}", "to_json");
	free(s2);
	back = automation_from_json(j);
	if (ok(back != NULL, "from_json")) {
		j2 = automation_to_json(back);
		s2 = json_dumps(j2, JSON_SORT_KEYS | JSON_COMPACT);
		is_str(s2, s1, "round trip");
		free(s2);
		json_decref(j2);
		is_str(agent_name(back->agent), "command", "agent back");
		is_str(back->command[1], "--fast", "argv back");
		ok(back->command[2] == NULL, "argv terminated");
		is_int(back->on_busy, BUSY_CANCEL_RUNNING, "on_busy back");
		ok(!back->report_thread && back->authors_any && back->bots, "flags back");
		automation_free(back);
	}
	free(s1);
	/* Bad shapes are refused, not guessed at. */
	json_object_set_new(j, "agent", json_string("gpt"));
	ok(automation_from_json(j) == NULL, "from_json: unknown agent");
	json_object_set_new(j, "agent", json_string("claude"));
	json_object_set_new(j, "secrets", json_string("NPM_TOKEN"));
	ok(automation_from_json(j) == NULL, "from_json: secrets not a list");
	json_object_del(j, "secrets");
	json_object_del(j, "name");
	ok(automation_from_json(j) == NULL, "from_json: no name");
	json_decref(j);
	j = json_pack("[]");
	ok(automation_from_json(j) == NULL, "from_json: not an object");
	json_decref(j);
	automation_set_unref(set);
out:
	yerrs_free(&errs);
	rm_rf(dir);
	free(dir);
}

/* repo_choose on an event given as JSON: "REPO", "-" (none) or "!CAUSE". */
static char *
choose(const struct automation *a, const char *event)
{
	json_t	*ev = json_loads(event, 0, NULL);
	char	*repo = NULL, *cause = NULL, *out;
	int	 rc = repo_choose(a, ev, &repo, &cause);

	json_decref(ev);
	out = rc > 0 ? xstrdup(repo) : rc == 0 ? xstrdup("-") : xprintf("!%s", cause);
	free(repo);
	free(cause);
	return out;
}

/* repository as a mapping: kept whole in the run's snapshot, and what repo_choose makes of it. */
static void
test_repository_map(void)
{
	struct automation_set	*set;
	struct automation	*back;
	const struct automation	*a;
	struct yerrs		 errs;
	json_t			*j, *j2;
	char			*dir = tmp_dir(), *s1, *s2, *got;
	size_t			 i;
	static const struct {
		const char	*event, *want;
	} cases[] = {
		{ "{\"source\":\"slack\",\"text\":\"go\",\"meta\":{\"channel\":\"C0WEB\"}}",
		  "acme/web" },
		{ "{\"source\":\"slack\",\"text\":\"go repo:acme/tools.\",\"meta\":"
		  "{\"channel\":\"C0WEB\"}}", "acme/tools" },
		{ "{\"source\":\"slack\",\"text\":\"go repo:Acme/tools\",\"meta\":"
		  "{\"channel\":\"C0WEB\"}}", "!repo:Acme/tools is not one this automation may "
		  "use; this automation may use acme/web (Slack channel C0WEB), acme/web (Linear "
		  "label frontend), acme/api (Linear team ENG), or a repository matching acme/* "
		  "named as repo:OWNER/NAME in the text" },
		{ "{\"source\":\"slack\",\"text\":\"go\",\"meta\":{\"channel\":\"C0X\"}}",
		  "acme/api" },
		{ "{\"source\":\"linear\",\"text\":\"\",\"meta\":{\"team\":\"eng\","
		  "\"labels\":[\"FRONTEND\"]}}", "acme/web" },
		{ "{\"source\":\"linear\",\"text\":\"\",\"meta\":{\"team\":\"eng\","
		  "\"labels\":[]}}", "acme/api" },
		{ "{\"source\":\"github\",\"text\":\"x\",\"repository\":\"acme/own\"}",
		  "acme/own" },
		{ "{\"source\":\"schedule\",\"text\":\"\"}", "acme/api" },
		{ "{\"source\":\"webhook\",\"text\":\"gitrepo:evil/x\"}", "acme/api" },
	};

	tmp_write(dir, "m.yaml",
	    "on:\n  slack: { events: [app_mention] }\n"
	    "prompt: Go.\n"
	    "repository:\n"
	    "  slack: { C0WEB: acme/web }\n"
	    "  linear: { teams: { ENG: acme/api }, labels: { frontend: acme/web } }\n"
	    "  text: true\n"
	    "  default: acme/api\n"
	    "repositories: [\"acme/*\"]\n");
	yerrs_init(&errs);
	set = automation_load(&conf1, dir, &errs);
	if (!ok(set != NULL, "a repository mapping loads")) {
		printf("# %s\n", errs.n > 0 ? errs.msgs[0] : "");
		goto out;
	}
	a = automation_get(set, 0);
	j = automation_to_json(a);
	j2 = json_pack("{s:O,s:O}", "repository", json_object_get(j, "repository"),
	    "repositories", json_object_get(j, "repositories"));
	s1 = json_dumps(j2, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(j2);
	is_str(s1, "{\"repositories\":[\"acme/*\"],\"repository\":{\"default\":\"acme/api\","
	    "\"linear\":{\"labels\":{\"frontend\":\"acme/web\"},\"teams\":{\"ENG\":"
	    "\"acme/api\"}},\"slack\":{\"C0WEB\":\"acme/web\"},\"text\":true}}",
	    "to_json: the mapping and the allow list");
	free(s1);
	s1 = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	back = automation_from_json(j);
	if (ok(back != NULL, "from_json: a mapping")) {
		j2 = automation_to_json(back);
		s2 = json_dumps(j2, JSON_SORT_KEYS | JSON_COMPACT);
		is_str(s2, s1, "the mapping round-trips");
		free(s2);
		json_decref(j2);
		for (i = 0; i < SPUR_ARRLEN(cases); i++) {
			got = choose(back, cases[i].event);
			is_str(got, cases[i].want, "repo_choose from the snapshot: %s",
			    cases[i].event);
			free(got);
		}
		automation_free(back);
	}
	free(s1);
	/* A snapshot's mapping of another shape is refused, not guessed at. */
	json_object_set_new(j, "repository", json_pack("{s:{s:i}}", "slack", "C0WEB", 3));
	ok(automation_from_json(j) == NULL, "from_json: a mapping to a number");
	json_object_set_new(j, "repository", json_pack("{s:s}", "text", "yes"));
	ok(automation_from_json(j) == NULL, "from_json: text not a boolean");
	json_object_set_new(j, "repository", json_pack("{s:[]}", "linear"));
	ok(automation_from_json(j) == NULL, "from_json: linear not a mapping");
	json_decref(j);
	automation_set_unref(set);
out:
	yerrs_free(&errs);
	rm_rf(dir);
	free(dir);
}

/*
 * Without a mapping: the automation's fixed repository, else a GitHub event's
 * own, whatever the proof (a run of proof report gets a checkout too).
 */
static void
test_repository_any_proof(void)
{
	static const char	*proofs[] = { "report", "none", "artifacts", "commit",
				    "pull_request" };
	struct automation_set	*set;
	struct yerrs		 errs;
	char			*dir, *got, *text;
	size_t			 i;

	for (i = 0; i < SPUR_ARRLEN(proofs); i++) {
		dir = tmp_dir();
		/* proof artifacts needs its globs. */
		text = xprintf("on:\n  github: { events: [issue_comment] }\nprompt: Go.\n"
		    "proof: %s\n%s", proofs[i], strcmp(proofs[i], "artifacts") == 0 ?
		    "artifacts: [a.txt]\n" : "");
		tmp_write(dir, "own.yaml", text);
		free(text);
		text = xprintf("on:\n  github: { events: [issue_comment] }\nprompt: Go.\n"
		    "proof: %s\n%srepository: acme/fixed\n", proofs[i],
		    strcmp(proofs[i], "artifacts") == 0 ? "artifacts: [a.txt]\n" : "");
		tmp_write(dir, "fixed.yaml", text);
		free(text);
		yerrs_init(&errs);
		set = automation_load(&conf1, dir, &errs);
		if (ok(set != NULL && automation_count(set) == 2, "proof %s loads", proofs[i])) {
			got = choose(automation_get(set, 1), "{\"source\":\"github\","
			    "\"text\":\"x\",\"repository\":\"acme/own\"}");
			is_str(got, "acme/own", "proof %s: a GitHub event's own repository",
			    proofs[i]);
			free(got);
			got = choose(automation_get(set, 0), "{\"source\":\"github\","
			    "\"text\":\"x\",\"repository\":\"acme/own\"}");
			is_str(got, "acme/fixed", "proof %s: the automation's own before the "
			    "event's", proofs[i]);
			free(got);
			got = choose(automation_get(set, 1), "{\"source\":\"slack\","
			    "\"text\":\"x\",\"meta\":{\"channel\":\"C0X\"}}");
			is_str(got, "-", "proof %s: a Slack event has none of its own", proofs[i]);
			free(got);
			got = choose(automation_get(set, 1), "{\"source\":\"github\","
			    "\"text\":\"x\"}");
			is_str(got, "-", "proof %s: a GitHub event without a repository (none)",
			    proofs[i]);
			free(got);
		} else
			printf("# %s\n", errs.n > 0 ? errs.msgs[0] : "");
		if (set != NULL)
			automation_set_unref(set);
		yerrs_free(&errs);
		rm_rf(dir);
		free(dir);
	}
}

/* Runs automation_match with stderr sent to a file; returns what was logged. */
static char *
match_logged(const struct automation_set *set, const struct spur_event *ev,
    const struct automation **out, size_t max, size_t *n, const char *dir)
{
	char	*path = path_join(dir, "stderr"), *text = NULL, *cause;
	size_t	 len;
	int	 fd, saved;

	fflush(stderr);
	saved = dup(2);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		fatal("open %s", path);
	dup2(fd, 2);
	close(fd);
	*n = automation_match(set, ev, out, max);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (read_file(path, 1 << 20, &text, &len, &cause) != 0) {
		free(cause);
		text = xstrdup("");
	}
	free(path);
	return text;
}

/* A pathological pattern gives up as no match (and says so) instead of stalling the loop. */
static void
test_regex_limit(void)
{
	struct automation_set	*set;
	const struct automation	*out[4];
	struct spur_event	*ev;
	struct yerrs		 errs;
	struct timespec		 t0, t1;
	char			*dir = tmp_dir(), text[64], *logged;
	double			 secs;
	size_t			 n;

	/* Without a limit this backtracks 2^62 times on "aaa...a!". */
	tmp_write(dir, "slow.yaml",
	    "on: { slack: { events: message, text: '^(a+)+$' } }\n"
	    "prompt: x\n");
	tmp_write(dir, "fast.yaml",
	    "on: { slack: { events: message, text: 'a!' } }\n"
	    "prompt: x\n");
	yerrs_init(&errs);
	set = automation_load(&conf1, dir, &errs);
	if (!ok(set != NULL, "regex: load"))
		goto out;
	memset(text, 'a', sizeof text - 2);
	text[sizeof text - 2] = '!';
	text[sizeof text - 1] = '\0';
	ev = spur_event_new("demo", "slack");
	ev->type = xstrdup("message");
	free(ev->text);
	ev->text = xstrdup(text);
	test_member(ev);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	logged = match_logged(set, ev, out, SPUR_ARRLEN(out), &n, dir);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	is_int(n, 1, "the limited pattern does not match, the other does");
	is_str(n > 0 ? out[0]->name : NULL, "fast", "fast matched");
	ok(secs < 5.0, "bounded time (%.3fs)", secs);
	ok(strstr(logged, "event=regex.limit") != NULL && strstr(logged, "^(a+)+$") != NULL,
	    "the limit is logged with the pattern");
	ok(strstr(logged, "aaaa") == NULL, "the third-party text is not logged");
	free(logged);
	spur_event_free(ev);
	automation_set_unref(set);
out:
	yerrs_free(&errs);
	rm_rf(dir);
	free(dir);
}

/* A bad file does not hide the good ones' problems, and a missing directory is an error. */
static void
test_load_misc(void)
{
	struct automation_set	*set;
	struct yerrs		 errs;
	char			*dir = tmp_dir(), *missing;

	yerrs_init(&errs);
	set = automation_load(&conf1, dir, &errs);
	ok(set != NULL && automation_count(set) == 0 && errs.n == 0, "empty directory: empty set");
	automation_set_unref(set);
	tmp_write(dir, "notes.txt", "not yaml: [");
	tmp_write(dir, ".hidden.yaml", "not yaml: [");
	tmp_write(dir, "x.yml", "not yaml: [");
	set = automation_load(&conf1, dir, &errs);
	ok(set != NULL && errs.n == 0, "only *.yaml files are read");
	automation_set_unref(set);
	missing = path_join(dir, "nope");
	set = automation_load(&conf1, missing, &errs);
	ok(set == NULL && errs.n == 1, "missing directory: an error");
	yerrs_free(&errs);
	free(missing);
	rm_rf(dir);
	free(dir);
}

/* An org's default environment fills the keys an automation leaves out; a run's snapshot keeps it. */
static void
test_environment(void)
{
	struct env_setup	 setup = { .run = "npm ci", .timeout = 600 };
	char			*cache[] = { "~/.npm", NULL };
	struct env_conf		 def = { .setup = &setup, .cache = cache, .rootfs = "node" };
	struct org		 org = { .name = "acme", .agents = demo_agents, .nagents = 1,
				     .environment = &def };
	struct config		 conf = { .orgs = &org, .norgs = 1 };
	struct automation_set	*set;
	struct automation	*back;
	const struct automation	*a;
	struct yerrs		 errs;
	json_t			*j;
	char			*dir = tmp_dir();

	/* demo's sections: its Slack bot token looks members up. */
	org.sources = three_orgs[0].sources;
	org.nsources = three_orgs[0].nsources;

	tmp_write(dir, "a.yaml", "on: { slack: {} }\nprompt: Hi.\nenvironment:\n"
	    "  cache: [~/.cache/pip, node_modules]\n");
	tmp_write(dir, "b.yaml", "on: { slack: {} }\nprompt: Hi.\n");
	yerrs_init(&errs);
	set = automation_load(&conf, dir, &errs);
	ok(set != NULL && errs.n == 0, "environments load");
	a = set != NULL ? automation_find(set, "acme", "a") : NULL;
	ok(a != NULL && a->env.setup != NULL && strcmp(a->env.setup->run, "npm ci") == 0 &&
	    a->env.rootfs != NULL && strcmp(a->env.rootfs, "node") == 0,
	    "the org's setup and rootfs fill the keys the automation leaves out");
	ok(a != NULL && a->env.cache != NULL && strcmp(a->env.cache[0], "~/.cache/pip") == 0 &&
	    strcmp(a->env.cache[1], "node_modules") == 0 && a->env.cache[2] == NULL,
	    "the automation's cache replaces the org's whole");
	a = set != NULL ? automation_find(set, "acme", "b") : NULL;
	ok(a != NULL && a->env.cache != NULL && strcmp(a->env.cache[0], "~/.npm") == 0,
	    "an automation without environment gets the org's");
	a = set != NULL ? automation_find(set, "acme", "a") : NULL;
	j = a != NULL ? automation_to_json(a) : NULL;
	back = j != NULL ? automation_from_json(j) : NULL;
	ok(back != NULL && back->env.setup != NULL && back->env.setup->timeout == 600 &&
	    strcmp(back->env.setup->run, "npm ci") == 0 && back->env.cache != NULL &&
	    strcmp(back->env.cache[1], "node_modules") == 0 && back->env.rootfs != NULL,
	    "the environment survives the run's snapshot");
	automation_free(back);
	json_object_set_new(json_object_get(j, "environment"), "cache", json_integer(1));
	back = automation_from_json(j);
	ok(back == NULL, "a snapshot with a malformed environment is refused");
	automation_free(back);
	json_decref(j);
	automation_set_unref(set);
	yerrs_free(&errs);
	rm_rf(dir);
	free(dir);
}

int
main(void)
{
	char	*cause;

	log_init(LOG_WARN, "test-automation");
	if ((srcdir = getenv("SPUR_SRCDIR")) == NULL)
		srcdir = "../..";
	/* The systems' sections are their files' own: made as the config makes them. */
	setenv("SPUR_TEST_SECRET", a_secret.value, 1);
	if (config_org_section(&three_orgs[0], "slack", "{signing_secret: "
	    "env:SPUR_TEST_SECRET, bot_token: env:SPUR_TEST_SECRET}", &cause) != 0 ||
	    config_org_section(&three_orgs[0], "linear", "{webhook_secret: "
	    "env:SPUR_TEST_SECRET, api_key: env:SPUR_TEST_SECRET}", &cause) != 0)
		fatal("section: %s", cause);
	test_broken();
	test_match();
	test_defs();
	test_json();
	test_repository_map();
	test_repository_any_proof();
	test_regex_limit();
	test_load_misc();
	test_environment();
	return tap_done();
}
