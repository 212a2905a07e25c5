/* test-source.c: sources: published vectors, every rejection, bad payloads, normalization. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "report.h"
#include "source.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define GH_SECRET	"It's a Secret to Everybody"
#define SLACK_SECRET	"8f742231b10e8888abcd99yyyzzz85a5"
#define LINEAR_SECRET	"lin_wh_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
#define GITEA_SECRET	"gitea-test-secret-2b7c"
#define HOOK_SECRET	"hook-secret-0123456789"
#define STD_SECRET	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define BEARER_SECRET	"tok_live_abcdefghijklmnop"

static struct secret hook_secret = { "env:HK", HOOK_SECRET, sizeof HOOK_SECRET - 1 };
static struct secret std_secret = { "env:STD", STD_SECRET, sizeof STD_SECRET - 1 };
static struct secret bearer_secret = { "env:BR", BEARER_SECRET, sizeof BEARER_SECRET - 1 };
static struct secret bad_std_secret = { "env:BAD", "whsec_***", 9 };

static struct named_secret named[] = {
	{ "HOOK", &hook_secret }, { "STD", &std_secret }, { "TOKEN", &bearer_secret },
	{ "BADSTD", &bad_std_secret },
};
static struct org acme = {
	.name = "acme",
	.secrets = named, .nsecrets = SPUR_ARRLEN(named),
};
static struct org bare = { .name = "bare" };	/* no source configured */

static const char *all_secrets[] = {
	GH_SECRET, SLACK_SECRET, LINEAR_SECRET, HOOK_SECRET, STD_SECRET,
	"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", BEARER_SECRET,
};

static struct header	 hdrs[16];
static struct source_req req;
static struct source_result res;
static char		*srcdir;

/* A formatted test name: tap.h's is_str and is_int print their name as given. */
static const char *
nm(const char *fmt, ...)
{
	static char	 names[4][256];
	static int	 next;
	char		*n = names[next++ % 4];
	va_list		 ap;

	va_start(ap, fmt);
	vsnprintf(n, sizeof names[0], fmt, ap);
	va_end(ap);
	return n;
}

static void
req_new(const struct org *org, const char *hook, const char *body, int64_t now)
{
	source_result_free(&res);
	memset(&req, 0, sizeof req);
	memset(hdrs, 0, sizeof hdrs);
	req.org = org;
	req.org_name = org != NULL ? org->name : "nosuch";
	req.hook = hook;
	req.body = body;
	req.len = strlen(body);
	req.now_ms = now;
	req.headers = hdrs;
}

static void
hdr(const char *name, const char *value)
{
	if (req.nheaders == SPUR_ARRLEN(hdrs))
		fatal("too many test headers");
	hdrs[req.nheaders].name = name;
	hdrs[req.nheaders].value = value;
	req.nheaders++;
}

static void
handle(void)
{
	source_find(req.hook)->handle(&req, &res);
}

/* The verdict, the cause naming want, and no secret in the cause. */
static void
refused(enum source_verdict verdict, const char *want, const char *name)
{
	size_t	 i;
	int	 leak = 0;

	is_int(res.verdict, verdict, "%s", nm("%s: verdict", name));
	is_int(res.status, verdict == SOURCE_BAD ? 400 : 401, "%s", nm("%s: status", name));
	ok(res.event == NULL && res.reply == NULL, "%s: no event, no reply", name);
	if (!ok(res.cause != NULL && strstr(res.cause, want) != NULL,
	    "%s: cause says \"%s\"", name, want))
		printf("#   cause: %s\n", res.cause ? res.cause : "(null)");
	for (i = 0; res.cause != NULL && i < SPUR_ARRLEN(all_secrets); i++)
		leak |= strstr(res.cause, all_secrets[i]) != NULL;
	ok(!leak, "%s: no secret in the cause", name);
}

static int
accepted(const char *name)
{
	if (!is_int(res.verdict, SOURCE_EVENT, "%s", nm("%s: accepted", name))) {
		printf("#   cause: %s\n", res.cause ? res.cause : "(null)");
		return 0;
	}
	return res.event != NULL;
}

static char *
hex_hmac(const char *prefix, const char *key, const char *msg, size_t len)
{
	unsigned char	 mac[32];
	char		 hex[65];

	hmac_sha256(key, strlen(key), msg, len, mac);
	hex_encode(mac, sizeof mac, hex);
	return xprintf("%s%s", prefix, hex);
}

static char *
fixture(const char *name)
{
	char	*path, *out, *cause;
	size_t	 len;

	path = xprintf("%s/tests/fixtures/sources/%s", srcdir, name);
	if (read_file(path, 1 << 20, &out, &len, &cause) != 0)
		fatal("%s", cause);
	free(path);
	return out;
}

static json_int_t
meta_int(const char *key)
{
	return json_integer_value(json_object_get(res.event->meta, key));
}

static int
meta_bool(const char *key)
{
	json_t	*v = json_object_get(res.event->meta, key);

	return v == NULL ? -1 : json_is_true(v);
}

/* ---- the table of systems and the hooks each fills (source.h) ---- */

static const struct source_check *
check_of(const struct source *src, const char *key)
{
	const struct source_check	*c;

	for (c = src->checks; c != NULL && c->key != NULL; c++)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

static void
test_systems(void)
{
	static const char *const more[] = { "webhook", NULL };
	const struct source		*lin = source_system("linear"), *sl;
	const struct source_check	*c;
	struct org			 scratch = { .name = "scratch" };
	struct spur_event		 ev;
	struct buf			 why;
	const char			*bad = NULL;
	char				*s, *want[] = { "Done" }, *teams[] = { "ENG", "OPS" };
	char				*r = NULL;
	json_t				*j, *map;

	is_str(source_next(NULL)->name, "github", "table: github first");
	is_str(source_next(source_next(NULL))->name, "slack", "table: then slack");
	is_str(source_next(lin)->name, "gitlab", "table: then gitlab");
	is_str(source_next(source_next(lin))->name, "gitea", "table: then gitea");
	ok(source_next(source_next(source_next(lin))) == NULL, "table: gitea last");
	ok(source_system("webhook") == NULL, "the generic hook is no system");
	is_int(source_count(), 5, "five systems");
	s = source_names(more, " or ");
	is_str(s, "github, slack, linear, gitlab, gitea or webhook", "source_names");
	free(s);
	ok(source_name_in("linear", NULL) && source_name_in("webhook", more) &&
	    !source_name_in("webhook", NULL), "source_name_in");

	/* The section: parsed by its file, found by the org, its URL and secrets. */
	ok(source_conf(&acme, lin) != NULL && source_conf(&bare, lin) == NULL,
	    "an org's section of a system");
	s = config_api_url(&acme, "linear");
	is_str(s, "https://api.linear.app/graphql", "the API's default URL");
	free(s);
	ok(config_org_section(&scratch, "linear", "api_key: env:SPUR_TEST_LINEAR", &r) != 0 &&
	    r != NULL && strstr(r, "\"linear.webhook_secret\" is required") != NULL,
	    "a section's errors come from its parser");
	free(r);
	lin->conf_free((void *)source_conf(&scratch, lin));
	free(scratch.sources);

	/* on.linear: its events and its conditions. */
	ok(lin->event_check("Issue.create") == NULL, "Issue.create is an event");
	s = lin->event_check("Ticket");
	is_str(s, "unknown linear event \"Ticket\" (expected Issue, Comment, Project, Cycle, "
	    "IssueLabel or Reaction, with .create, .update or .remove)", "an unknown type");
	free(s);
	s = lin->event_check("Issue.close");
	is_str(s, "unknown action \"close\" of linear event \"Issue\" (expected create, "
	    "update or remove)", "an unknown action");
	free(s);
	memset(&ev, 0, sizeof ev);
	ev.type = "Issue.update";
	ev.meta = json_pack("{s:s,s:s,s:b,s:[s]}", "team", "ENG", "to_state", "Done",
	    "state_changed", 1, "labels", "bug");
	c = check_of(lin, "to_state");
	ok(c != NULL && c->match(want, 1, &ev, NULL), "to_state: moved to Done");
	c = check_of(lin, "teams");
	ok(c != NULL && c->match(teams, 2, &ev, NULL), "teams: ENG is listed");
	buf_init(&why, 0);
	ok(!c->match(teams + 1, 1, &ev, &why), "teams: ENG is not OPS");
	is_str(buf_cstr(&why), "team ENG is not one of [OPS]", "teams: why");
	buf_free(&why);
	json_object_set_new(ev.meta, "state_changed", json_false());
	buf_init(&why, 0);
	c = check_of(lin, "to_state");
	ok(!c->match(want, 1, &ev, &why), "to_state: no move, no match");
	is_str(buf_cstr(&why), "the event is not an issue changing state", "to_state: why");
	buf_free(&why);

	/* repository: {linear: ...}: labels before team, two labels that disagree refuse. */
	map = json_pack("{s:{s:s},s:{s:s,s:s}}", "teams", "ENG", "acme/eng", "labels", "bug",
	    "acme/bugs", "infra", "acme/infra");
	is_str(lin->repo_choose(map, ev.meta, &r), "acme/bugs", "the label's repository");
	json_object_set_new(ev.meta, "labels", json_pack("[s,s]", "bug", "infra"));
	ok(lin->repo_choose(map, ev.meta, &r) == NULL && r != NULL, "two labels refuse");
	is_str(r, "the issue's labels name two repositories, acme/bugs and acme/infra",
	    "two labels: why");
	free(r);
	r = NULL;
	json_object_set_new(ev.meta, "labels", json_array());
	is_str(lin->repo_choose(map, ev.meta, &r), "acme/eng", "else the team's");
	j = json_pack("{s:{s:i}}", "teams", "ENG", 1);
	ok(lin->repo_valid(map) && !lin->repo_valid(j), "a snapshot's part is checked");
	json_decref(j);
	json_decref(map);
	json_decref(ev.meta);

	/* report: {linear: ENG-12}, and the PR's line Linear links. */
	j = lin->report_dest("ENG-12", &bad);
	ok(j != NULL && strcmp(json_string_value(json_object_get(j, "source")), "linear") == 0 &&
	    strcmp(json_string_value(json_object_get(json_object_get(j, "meta"), "issue_id")),
	    "ENG-12") == 0, "report destination: the issue");
	json_decref(j);
	ok(lin->report_dest("nothing", &bad) == NULL && bad != NULL, "report destination: no issue");
	j = json_pack("{s:{s:s}}", "meta", "identifier", "ENG-12");
	s = lin->pr_line(j);
	is_str(s, "Linear: ENG-12", "the PR's line");
	free(s);
	json_decref(j);
	ok(lin->report != NULL && strcmp(lin->report->name, "linear") == 0,
	    "its report backend");
	/* Slack's: channels by id, its events, its section's URL. */
	sl = source_system("slack");
	s = sl->event_check("reaction_added");
	is_str(s, "unknown slack event \"reaction_added\" (expected app_mention, message or "
	    "slash_command)", "slack: an unknown event");
	free(s);
	c = check_of(sl, "channels");
	ok(c != NULL && c->item_check("C0123ABCD") == NULL && c->item_check("general") != NULL,
	    "slack: channels are ids");
	memset(&ev, 0, sizeof ev);
	ev.meta = json_pack("{s:s}", "channel", "C1");
	buf_init(&why, 0);
	ok(!c->match(teams, 2, &ev, &why), "slack: C1 is not listed");
	is_str(buf_cstr(&why), "channel C1 is not one of [ENG, OPS]", "slack: channels why");
	buf_free(&why);
	map = json_pack("{s:s}", "C1", "acme/web");
	is_str(sl->repo_choose(map, ev.meta, &r), "acme/web", "slack: the channel's repository");
	json_decref(map);
	json_decref(ev.meta);
	ok(sl->report_dest("general", &bad) == NULL && strstr(bad, "not a channel id") != NULL,
	    "slack: a report names a channel by id");
	s = config_api_url(&acme, "slack");
	is_str(s, "https://slack.com/api", "slack: the API's default URL");
	free(s);
}

/* ---- shared helpers ---- */

static void
test_helpers(void)
{
	json_t	*j;

	is_str(source_find("github")->name, "github", "source_find github");
	is_str(source_find("slack")->name, "slack", "source_find slack");
	is_str(source_find("linear")->name, "linear", "source_find linear");
	is_str(source_find("deploy")->name, "webhook", "source_find other: webhook");

	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET),
	    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
	    "Hello, World!", 13), 0, "GitHub published vector");
	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET),
	    "757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17",
	    "Hello, World!", 13), 0, "hex digits in either case");
	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET),
	    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18",
	    "Hello, World!", 13), -1, "one digit off: mismatch");
	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET),
	    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1",
	    "Hello, World!", 13), -2, "63 digits: malformed");
	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET),
	    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	    "00", "Hello, World!", 13), -2, "66 digits: malformed");
	is_int(source_check_hmac_hex(GH_SECRET, strlen(GH_SECRET), "", "Hello, World!", 13),
	    -2, "empty: malformed");

	j = form_decode("a=1&b=%2Fx+y&c=&d&&e=%E2%9C%93", 30);
	ok(j != NULL, "form_decode");
	is_str(json_string_value(json_object_get(j, "a")), "1", "form a");
	is_str(json_string_value(json_object_get(j, "b")), "/x y", "form b: %%XX and +");
	is_str(json_string_value(json_object_get(j, "c")), "", "form c: empty");
	is_str(json_string_value(json_object_get(j, "d")), "", "form d: no =");
	is_str(json_string_value(json_object_get(j, "e")), "\xe2\x9c\x93", "form e: UTF-8");
	is_int(json_object_size(j), 5, "form: five fields");
	json_decref(j);
	ok(form_decode("a=%zz", 5) == NULL, "form_decode: bad escape");
	ok(form_decode("a=%4", 4) == NULL, "form_decode: cut escape");
	ok(form_decode("a=%ff", 5) == NULL, "form_decode: not UTF-8");
	ok(form_decode("%00=1", 5) == NULL, "form_decode: NUL in a name");

	req_new(&acme, "github", "", 0);
	hdr("content-TYPE", "application/json");
	is_str(source_header(&req, "Content-Type"), "application/json",
	    "source_header is case-insensitive");
	ok(source_header(&req, "X-Missing") == NULL, "source_header: absent");
}

/* ---- GitHub ---- */

static void
gh_req(const struct org *org, const char *event, const char *body, const char *sig)
{
	req_new(org, "github", body, 1700000000000LL);
	hdr("Content-Type", "application/json");
	if (event != NULL)
		hdr("X-GitHub-Event", event);
	hdr("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958");
	hdr("X-GitHub-Hook-ID", "292430182");
	if (sig != NULL)
		hdr("X-Hub-Signature-256", sig);
}

static void
test_github_verify(void)
{
	const char	*body = "Hello, World!";
	const char	*good =
	    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
	char		*sig;

	gh_req(&acme, "ping", body, good);
	handle();
	is_int(res.verdict, SOURCE_REPLY, "ping with the published vector: reply");
	is_int(res.status, 200, "ping: 200");
	is_str(res.reply, "{\"ok\":true}", "ping: {\"ok\":true}");

	gh_req(&acme, "ping", body, NULL);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing X-Hub-Signature-256", "github no signature");

	gh_req(&acme, "ping", body, NULL);
	hdr("X-Hub-Signature", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59");
	handle();
	refused(SOURCE_UNAUTHORIZED, "SHA-1", "github SHA-1 header only");

	gh_req(&acme, "ping", body, "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59");
	handle();
	refused(SOURCE_UNAUTHORIZED, "algorithm sha1 is not accepted", "github sha1= prefix");

	gh_req(&acme, "ping", body,
	    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not start with sha256=", "github no prefix");

	gh_req(&acme, "ping", body,
	    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e");
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "github short signature");

	gh_req(&acme, "ping", body,
	    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1g");
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "github non-hex signature");

	gh_req(&acme, "ping", body, "sha256=");
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "github empty signature");

	gh_req(&acme, "ping", "Hello, World?", good);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "github body changed");

	sig = hex_hmac("sha256=", "another secret", body, strlen(body));
	gh_req(&acme, "ping", body, sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "github other secret");
	free(sig);

	gh_req(NULL, "ping", body, good);
	handle();
	refused(SOURCE_UNAUTHORIZED, "unknown org", "github unknown org, valid signature");

	gh_req(&bare, "ping", body, good);
	handle();
	refused(SOURCE_UNAUTHORIZED, "github is not configured", "github not configured");

	gh_req(NULL, "ping", body, NULL);
	handle();
	refused(SOURCE_UNAUTHORIZED, "unknown org", "github unknown org, no signature");
}

/* Signs body for acme and runs it as event NAME. */
static void
gh_run(const char *event, const char *body, const char *content_type)
{
	char	*sig = hex_hmac("sha256=", GH_SECRET, body, strlen(body));

	gh_req(&acme, event, body, sig);
	if (content_type != NULL)
		hdrs[0].value = content_type;
	handle();
	free(sig);
}

static void
test_github_bad(void)
{
	char	*deep, *body;
	size_t	 i;

	gh_run("issues", "{\"action\":\"opened\",\"issue\":{", NULL);
	refused(SOURCE_BAD, "invalid JSON", "github truncated JSON");

	gh_run("issues", "{\"action\":\"opened\",\"x\":\"\xff\xfe\"}", NULL);
	refused(SOURCE_BAD, "invalid JSON", "github invalid UTF-8");

	deep = xmalloc(2 * 1000 + 1);
	for (i = 0; i < 1000; i++) {
		deep[i] = '[';
		deep[2000 - 1 - i] = ']';
	}
	deep[2000] = '\0';
	body = xprintf("{\"a\":%s}", deep);
	gh_run("issues", body, NULL);
	refused(SOURCE_BAD, "nested deeper than 64", "github nesting depth 1000");
	free(body);
	free(deep);

	gh_run("issues", "[1,2]", NULL);
	refused(SOURCE_BAD, "not a JSON object", "github JSON list");

	gh_run("issues", "{\"action\":\"opened\"}", "text/plain");
	refused(SOURCE_BAD, "Content-Type text/plain", "github wrong content type");

	gh_run("issues", "{\"action\":\"opened\",\"repository\":{\"full_name\":\"a/b\"}}",
	    NULL);
	refused(SOURCE_BAD, "no issue object", "github issues without issue");

	gh_run("issue_comment", "{\"action\":\"created\",\"repository\":{\"full_name\":"
	    "\"a/b\"},\"issue\":{\"number\":1}}", NULL);
	refused(SOURCE_BAD, "no comment object", "github issue_comment without comment");

	gh_run("issue_comment", "{\"action\":\"created\",\"issue\":{\"number\":1},"
	    "\"comment\":{\"body\":\"x\"}}", NULL);
	refused(SOURCE_BAD, "repository.full_name", "github without repository");

	gh_run("pull_request", "{\"action\":\"opened\",\"repository\":{\"full_name\":"
	    "\"a/b\"},\"pull_request\":{\"number\":\"7\"}}", NULL);
	refused(SOURCE_BAD, "pull_request.number", "github number not a number");

	gh_run(NULL, "{\"action\":\"opened\"}", NULL);
	refused(SOURCE_BAD, "missing X-GitHub-Event", "github without event header");

	gh_run("Issues; DROP", "{\"action\":\"opened\"}", NULL);
	refused(SOURCE_BAD, "not an event name", "github odd event name");

	gh_run("issues", "token=1&other=2", "application/x-www-form-urlencoded");
	refused(SOURCE_BAD, "no payload field", "github form without payload");

	gh_run("issues", "payload=%7B%22a%22%3A", "application/x-www-form-urlencoded");
	refused(SOURCE_BAD, "invalid JSON", "github form with bad JSON");
}

struct gh_case {
	const char	*file;
	const char	*event;
	const char	*type;
	const char	*thread;
	const char	*actor_id;
	const char	*actor_name;
	const char	*role;
	int		 bot;
	const char	*text;
	const char	*url;
};

static const struct gh_case gh_cases[] = {
	{ "github-issue_comment.created.json", "issue_comment", "issue_comment.created",
	  "github:Codertocat/Hello-World#1", "21031067", "Codertocat", "MEMBER", 0,
	  "/fix the typo in README\r\nplease",
	  "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400" },
	{ "github-pull_request_review_comment.created.json", "pull_request_review_comment",
	  "pull_request_review_comment.created", "github:Codertocat/Hello-World#2",
	  "21031067", "Codertocat", "COLLABORATOR", 0, "Please rename this variable.",
	  "https://github.com/Codertocat/Hello-World/pull/2#discussion_r284312630" },
	{ "github-pull_request_review.submitted.json", "pull_request_review",
	  "pull_request_review.submitted", "github:Codertocat/Hello-World#2",
	  "29139614", "renovate[bot]", "OWNER", 1, "Looks good, but run the linter.",
	  "https://github.com/Codertocat/Hello-World/pull/2#pullrequestreview-237895671" },
	{ "github-issues.opened.json", "issues", "issues.opened",
	  "github:Codertocat/Hello-World#1", "21031067", "Codertocat", "NONE", 0,
	  "Spelling error in the README file\n\n"
	  "It looks like you accidently spelled 'commit' with two 't's.",
	  "https://github.com/Codertocat/Hello-World/issues/1" },
	{ "github-issues.labeled.json", "issues", "issues.labeled",
	  "github:Codertocat/Hello-World#1", "21031067", "Codertocat", "OWNER", 0,
	  "Spelling error in the README file\n\n"
	  "It looks like you accidently spelled 'commit' with two 't's.",
	  "https://github.com/Codertocat/Hello-World/issues/1" },
	{ "github-pull_request.opened.json", "pull_request", "pull_request.opened",
	  "github:Codertocat/Hello-World#2", "21031067", "Codertocat",
	  "FIRST_TIME_CONTRIBUTOR", 0, "Update the README with new information.\n\n"
	  "This is a pretty simple change that we need to pull into master.",
	  "https://github.com/Codertocat/Hello-World/pull/2" },
};

static void
test_github_normalize(void)
{
	const struct gh_case	*c;
	struct spur_event		*ev;
	json_t			*whole, *labels;
	char			*body, *form, *enc;
	size_t			 i, o;

	for (i = 0; i < SPUR_ARRLEN(gh_cases); i++) {
		c = &gh_cases[i];
		body = fixture(c->file);
		gh_run(c->event, body, NULL);
		if (!accepted(c->file)) {
			free(body);
			continue;
		}
		ev = res.event;
		ok(ev->id == NULL, "%s: id left to the store", c->file);
		is_str(ev->org, "acme", "%s", nm("%s: org", c->file));
		is_str(ev->source, "github", "%s", nm("%s: source", c->file));
		is_str(ev->type, c->type, "%s", nm("%s: type", c->file));
		is_str(ev->thread, c->thread, "%s", nm("%s: thread", c->file));
		is_str(ev->actor.id, c->actor_id, "%s", nm("%s: actor id", c->file));
		is_str(ev->actor.name, c->actor_name, "%s", nm("%s: actor name", c->file));
		is_str(ev->actor.role, c->role, "%s", nm("%s: actor role", c->file));
		is_int(ev->actor.bot, c->bot, "%s", nm("%s: actor bot", c->file));
		is_str(ev->text, c->text, "%s", nm("%s: text", c->file));
		is_str(ev->url, c->url, "%s", nm("%s: url", c->file));
		is_str(ev->repository, "Codertocat/Hello-World", "%s", nm("%s: repository", c->file));
		is_str(ev->delivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "%s", nm("%s: delivery",
		    c->file));
		is_str(ev->dedup, "github:292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958",
		    "%s", nm("%s: dedup", c->file));
		is_int(ev->received_at, 1700000000000LL, "%s", nm("%s: received_at", c->file));
		whole = json_loads(body, 0, NULL);
		ok(whole != NULL && json_equal(spur_event_payload(ev), whole),
		    "%s: the whole payload kept", c->file);
		json_decref(whole);
		free(body);
	}

	/* The meta facts, one event at a time. */
	body = fixture("github-issue_comment.created.json");
	gh_run("issue_comment", body, NULL);
	if (accepted("issue_comment meta")) {
		is_int(meta_int("comment_id"), 492700400, "issue_comment: meta.comment_id");
		is_int(meta_int("number"), 1, "issue_comment: meta.number");
		is_int(meta_bool("is_pull_request"), 1, "issue_comment on a PR: is_pull_request");
		is_int(meta_int("installation_id"), 4242, "issue_comment: installation_id");
		ok(json_object_get(res.event->meta, "head_ref") == NULL,
		    "issue_comment: no head_ref (not in the payload)");
		ok(json_object_get(res.event->meta, "label") == NULL, "issue_comment: no label");
		ok(json_object_get(res.event->meta, "file") == NULL,
		    "issue_comment: no meta.file (not on a file)");
	}

	/* The same payload as a form: payload=<urlencoded JSON>. */
	form = xmalloc(strlen(body) * 3 + 16);
	o = (size_t)sprintf(form, "payload=");
	for (enc = body; *enc != '\0'; enc++) {
		if ((*enc >= 'a' && *enc <= 'z') || (*enc >= 'A' && *enc <= 'Z') ||
		    (*enc >= '0' && *enc <= '9'))
			form[o++] = *enc;
		else if (*enc == ' ')
			form[o++] = '+';
		else
			o += (size_t)sprintf(form + o, "%%%02X", (unsigned char)*enc);
	}
	form[o] = '\0';
	gh_run("issue_comment", form, "application/x-www-form-urlencoded");
	if (accepted("github form body")) {
		is_str(res.event->type, "issue_comment.created", "form body: type");
		is_str(res.event->text, "/fix the typo in README\r\nplease", "form body: text");
		is_str(res.event->thread, "github:Codertocat/Hello-World#1", "form body: thread");
	}
	free(form);

	/* Unverified (spur fire): no signature needed, the rest as usual. */
	req_new(&bare, "github", body, 5);
	hdr("X-GitHub-Event", "issue_comment");
	req.no_verify = 1;
	handle();
	if (accepted("github no_verify")) {
		is_str(res.event->org, "bare", "no_verify: org");
		ok(res.event->dedup == NULL, "no_verify without delivery: no dedup");
		ok(strncmp(res.event->delivery, "dlv_", 4) == 0, "no_verify: made-up delivery");
	}
	free(body);

	body = fixture("github-pull_request_review_comment.created.json");
	gh_run("pull_request_review_comment", body, NULL);
	if (accepted("review comment meta")) {
		is_int(meta_int("review_comment_id"), 284312630, "review comment: review_comment_id");
		ok(json_object_get(res.event->meta, "comment_id") == NULL,
		    "review comment: no comment_id (that is for issue comments)");
		is_int(meta_int("number"), 2, "review comment: number");
		is_int(meta_bool("is_pull_request"), 1, "review comment: is_pull_request");
		is_str(spur_event_meta_str(res.event, "head_ref"), "changes", "review comment: head_ref");
		is_str(spur_event_meta_str(res.event, "head_repo"), "Codertocat/Hello-World",
		    "review comment: head_repo");
		is_str(spur_event_meta_str(res.event, "base_ref"), "master", "review comment: base_ref");
		is_int(meta_bool("fork"), 0, "review comment: not a fork");
		is_int(meta_int("installation_id"), 1, "review comment: installation_id");
		/* What the prompt shows, from meta: it needs no payload. */
		is_str(spur_event_meta_str(res.event, "file"), "README.md:265",
		    "review comment: meta.file is path:line");
		labels = json_pack("[s]", "bug");
		ok(json_equal(json_object_get(res.event->meta, "labels"), labels),
		    "review comment: meta.labels, the PR's names");
		json_decref(labels);
	}
	free(body);

	body = fixture("github-pull_request_review.submitted.json");
	gh_run("pull_request_review", body, NULL);
	if (accepted("review meta"))
		is_int(meta_int("review_id"), 237895671, "review: review_id");
	free(body);

	body = fixture("github-issues.labeled.json");
	gh_run("issues", body, NULL);
	if (accepted("labeled meta")) {
		is_str(spur_event_meta_str(res.event, "label"), "spur", "issues.labeled: meta.label");
		is_int(meta_bool("is_pull_request"), 0, "issues.labeled: not a PR");
	}
	free(body);

	body = fixture("github-pull_request.opened.json");
	gh_run("pull_request", body, NULL);
	if (accepted("pull_request meta")) {
		is_int(meta_bool("fork"), 1, "pull_request from a fork: fork");
		is_str(spur_event_meta_str(res.event, "head_ref"), "fix-typo", "pull_request: head_ref");
		is_str(spur_event_meta_str(res.event, "head_repo"), "forker/Hello-World",
		    "pull_request: head_repo");
		is_int(meta_bool("is_pull_request"), 1, "pull_request: is_pull_request");
		is_int(meta_int("number"), 2, "pull_request: number");
	}
	free(body);

	/* An event without action, and without a thread number. */
	gh_run("push", "{\"ref\":\"refs/heads/main\",\"repository\":{\"full_name\":\"a/b\"},"
	    "\"sender\":{\"login\":\"x\",\"id\":1,\"type\":\"User\"}}", NULL);
	if (accepted("push")) {
		is_str(res.event->type, "push", "push: type without action");
		is_str(res.event->thread, "github:a/b", "push: thread is the repository");
		is_str(res.event->text, "", "push: no text");
	}

	/* An issue body that is null: the title alone. */
	gh_run("issues", "{\"action\":\"opened\",\"repository\":{\"full_name\":\"a/b\"},"
	    "\"issue\":{\"number\":3,\"title\":\"Only a title\",\"body\":null},"
	    "\"sender\":{\"login\":\"x\",\"id\":1,\"type\":\"User\"}}", NULL);
	if (accepted("issue without body"))
		is_str(res.event->text, "Only a title", "issue with null body: title only");

	/* Missing delivery headers: still an event, no dedup. */
	body = fixture("github-issues.opened.json");
	form = hex_hmac("sha256=", GH_SECRET, body, strlen(body));
	req_new(&acme, "github", body, 1);
	hdr("Content-Type", "application/json");
	hdr("X-GitHub-Event", "issues");
	hdr("X-Hub-Signature-256", form);
	handle();
	if (accepted("github without X-GitHub-Delivery")) {
		ok(res.event->dedup == NULL, "no delivery header: no dedup key");
		ok(strncmp(res.event->delivery, "dlv_", 4) == 0, "no delivery header: made up");
	}
	free(form);
	free(body);
}

/* ---- Slack ---- */

#define SLACK_VECTOR_TS		"1531420618"
#define SLACK_VECTOR_BODY \
	"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&" \
	"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&" \
	"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F" \
	"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=" \
	"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
#define SLACK_VECTOR_SIG \
	"v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
#define SLACK_NOW	(1531420618LL * 1000 + 10 * 1000)

static void
slack_req(const struct org *org, const char *ct, const char *body, const char *ts,
    const char *sig, int64_t now)
{
	req_new(org, "slack", body, now);
	if (ct != NULL)
		hdr("Content-Type", ct);
	if (ts != NULL)
		hdr("X-Slack-Request-Timestamp", ts);
	if (sig != NULL)
		hdr("X-Slack-Signature", sig);
}

/* Signs body now for acme's Slack and handles it. */
static void
slack_run(const char *ct, const char *body, int64_t now)
{
	char	*ts = xprintf("%lld", (long long)(now / 1000)), *base, *sig;

	base = xprintf("v0:%s:%s", ts, body);
	sig = hex_hmac("v0=", SLACK_SECRET, base, strlen(base));
	slack_req(&acme, ct, body, ts, sig, now);
	handle();
	/* The request keeps pointers into ts and sig only until handle returns. */
	free(base);
	free(sig);
	free(ts);
}

static void
test_slack_verify(void)
{
	const char	*form = "application/x-www-form-urlencoded";
	struct spur_event	*ev;

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    SLACK_NOW);
	handle();
	if (accepted("Slack published vector (slash command)")) {
		ev = res.event;
		is_str(ev->type, "slash_command", "slash: type");
		is_str(ev->source, "slack", "slash: source");
		is_str(ev->text, "", "slash: empty text");
		is_str(ev->actor.id, "U2CERLKJA", "slash: actor id");
		is_str(ev->actor.name, "U2CERLKJA", "slash: actor name is the user id");
		ok(ev->actor.role == NULL && ev->actor.bot == 0, "slash: no role, not a bot");
		is_str(ev->delivery, "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
		    "slash: delivery is trigger_id");
		is_str(ev->thread, "slack:T1DC2JH3J/G8PSS9T3V/"
		    "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", "slash: thread");
		is_str(ev->dedup, "slack:command:398738663015.47445629121."
		    "803a0bc887a14d10d2c447fce8b6703c", "slash: dedup");
		is_str(spur_event_meta_str(ev, "command"), "/webhook-collect", "slash: meta.command");
		is_str(spur_event_meta_str(ev, "response_url"), "https://hooks.slack.com/commands/"
		    "T1DC2JH3J/397700885554/96rGlfmibIGlgcZRskXaIFfN", "slash: meta.response_url");
		is_str(spur_event_meta_str(ev, "team"), "T1DC2JH3J", "slash: meta.team");
		is_str(spur_event_meta_str(ev, "channel"), "G8PSS9T3V", "slash: meta.channel");
		is_str(json_string_value(json_object_get(ev->payload, "user_name")), "roadrunner",
		    "slash: payload is the form as an object");
		ok(ev->url == NULL && ev->repository == NULL, "slash: no url, no repository");
	}

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    1531420618LL * 1000 + 301 * 1000);
	handle();
	refused(SOURCE_UNAUTHORIZED, "is stale", "slack timestamp 301 s old");

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    1531420618LL * 1000 - 301 * 1000);
	handle();
	refused(SOURCE_UNAUTHORIZED, "in the future", "slack timestamp 301 s ahead");

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    1531420618LL * 1000 + 300 * 1000);
	handle();
	is_int(res.verdict, SOURCE_EVENT, "slack timestamp exactly 300 s old: accepted");

	slack_req(&acme, form, SLACK_VECTOR_BODY, NULL, SLACK_VECTOR_SIG, SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing X-Slack-Request-Timestamp", "slack no timestamp");

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, NULL, SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing X-Slack-Signature", "slack no signature");

	slack_req(&acme, form, SLACK_VECTOR_BODY, "1531420618.5", SLACK_VECTOR_SIG,
	    SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "not a number", "slack timestamp not an integer");

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS,
	    "v1=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "version v1 is not accepted", "slack v1=");

	slack_req(&acme, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS,
	    "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b50", SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "slack short signature");

	slack_req(&acme, form, SLACK_VECTOR_BODY, "1531420619", SLACK_VECTOR_SIG, SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "slack timestamp changed");

	slack_req(NULL, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "unknown org", "slack unknown org");

	slack_req(&bare, form, SLACK_VECTOR_BODY, SLACK_VECTOR_TS, SLACK_VECTOR_SIG,
	    SLACK_NOW);
	handle();
	refused(SOURCE_UNAUTHORIZED, "slack is not configured", "slack not configured");
}

static void
test_slack_events(void)
{
	const char	*json = "application/json";
	int64_t		 now = 1714557600000LL;
	char		*body;
	struct spur_event	*ev;

	body = fixture("slack-url_verification.json");
	slack_run(json, body, now);
	is_int(res.verdict, SOURCE_REPLY, "url_verification: reply");
	is_int(res.status, 200, "url_verification: 200");
	is_str(res.reply, "{\"challenge\":\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\"}",
	    "url_verification: the challenge back");
	slack_req(&acme, json, body, "1714557600", "v0=0000000000000000000000000000000000000000"
	    "000000000000000000000000", now);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "url_verification unsigned: no challenge");
	free(body);

	body = fixture("slack-app_mention.json");
	slack_run(json, body, now);
	if (accepted("app_mention")) {
		ev = res.event;
		is_str(ev->type, "app_mention", "app_mention: type");
		is_str(ev->thread, "slack:T061EG9R6/C0LAN2Q65/1515449522.000016",
		    "app_mention: thread on ts");
		is_str(ev->actor.id, "U061F7AUR", "app_mention: actor id");
		is_str(ev->actor.name, "U061F7AUR", "app_mention: actor name");
		ok(ev->actor.role == NULL, "app_mention: no role");
		is_int(ev->actor.bot, 0, "app_mention: not a bot");
		is_str(ev->text, "<@U0LAN0Z89> fix the flaky test please", "app_mention: text");
		is_str(ev->delivery, "Ev0LAN670R", "app_mention: delivery is event_id");
		is_str(ev->dedup, "slack:app_mention:C0LAN2Q65:1515449522.000016",
		    "app_mention: dedup on type, channel, ts");
		ok(ev->url == NULL, "app_mention: no url");
		is_str(spur_event_meta_str(ev, "team"), "T061EG9R6", "app_mention: meta.team");
		is_str(spur_event_meta_str(ev, "channel"), "C0LAN2Q65", "app_mention: meta.channel");
		is_str(spur_event_meta_str(ev, "ts"), "1515449522.000016", "app_mention: meta.ts");
		ok(spur_event_meta_str(ev, "thread_ts") == NULL, "app_mention: no thread_ts");
	}
	free(body);

	body = fixture("slack-message.thread.json");
	slack_run(json, body, now);
	if (accepted("message in a thread")) {
		ev = res.event;
		is_str(ev->type, "message", "message: type");
		is_str(ev->thread, "slack:T061EG9R6/C2147483705/1355517523.000005",
		    "message: thread on thread_ts");
		is_str(ev->text, "and the docs too", "message: text");
		is_str(ev->dedup, "slack:message:C2147483705:1355517536.000001", "message: dedup");
		is_str(spur_event_meta_str(ev, "thread_ts"), "1355517523.000005", "message: thread_ts");
		is_int(ev->actor.bot, 0, "message: not a bot");
	}
	free(body);

	body = fixture("slack-message.bot.json");
	slack_run(json, body, now);
	if (accepted("bot message")) {
		is_int(res.event->actor.bot, 1, "bot_message: bot");
		is_str(res.event->actor.id, "BB12033", "bot_message: actor is the bot id");
	}
	free(body);

	slack_run(json, "{\"type\":\"event_callback\",\"team_id\":\"T1\",\"event\":{\"type\":"
	    "\"message\",\"channel\":\"C1\",\"ts\":\"1.2\",\"user\":\"U1\"}}", now);
	refused(SOURCE_BAD, "no event_id", "slack event without event_id");
	slack_run(json, "{\"type\":\"event_callback\",\"event_id\":\"Ev1\",\"team_id\":\"T1\","
	    "\"event\":{\"type\":\"message\",\"ts\":\"1.2\"}}", now);
	refused(SOURCE_BAD, "no channel", "slack message without channel");
	slack_run(json, "{\"type\":\"event_callback\",\"event_id\":\"Ev1\",\"team_id\":\"T1\"}",
	    now);
	refused(SOURCE_BAD, "no event object", "slack callback without event");
	slack_run(json, "{\"type\":\"url_verification\"}", now);
	refused(SOURCE_BAD, "no challenge", "slack url_verification without challenge");
	slack_run(json, "{\"type\":\"block_actions\"}", now);
	refused(SOURCE_BAD, "unsupported Slack payload type block_actions", "slack other type");
	slack_run(json, "{\"type\":", now);
	refused(SOURCE_BAD, "invalid JSON", "slack truncated JSON");
	slack_run("application/x-www-form-urlencoded", "team_id=T1&text=hi", now);
	refused(SOURCE_BAD, "no command field", "slack form without command");
	slack_run("application/x-www-form-urlencoded", "payload=%7B%7D", now);
	refused(SOURCE_BAD, "interactive payloads", "slack interactive form");
	slack_run("text/xml", "<x/>", now);
	refused(SOURCE_BAD, "Content-Type text/xml", "slack wrong content type");
}

/* ---- Gitea ---- */

static void
gitea_run(const char *body, const char *event, const char *secret, const char *delivery)
{
	char	*sig = hex_hmac("", secret, body, strlen(body));

	req_new(&acme, "gitea", body, 1700000000000LL);
	hdr("Content-Type", "application/json");
	hdr("X-Gitea-Signature", sig);
	hdr("X-Gitea-Event", event);
	hdr("X-Gitea-Delivery", delivery);
	handle();
	free(sig);
}

/* A fixture of Gitea's, signed and handled: whether it was accepted. */
static int
gitea_fixture(const char *file, const char *event, const char *delivery, const char *name)
{
	char	*body = fixture(file);

	gitea_run(body, event, GITEA_SECRET, delivery);
	free(body);
	return accepted(name);
}

static void
test_gitea(void)
{
	struct spur_event	*ev;
	char			*body;

	body = fixture("gitea-issue_comment.created.json");
	gitea_run(body, "issue_comment", GITEA_SECRET, "d-1");
	if (accepted("gitea issue_comment")) {
		ev = res.event;
		is_str(ev->type, "issue_comment.created", "gitea comment: type");
		is_str(ev->thread, "gitea:acme/api#5", "gitea comment: the issue is the thread");
		is_str(ev->dedup, "gitea:d-1", "gitea comment: dedup on X-Gitea-Delivery");
		is_str(ev->text, "/fix the crash", "gitea comment: text is the body");
		is_str(ev->actor.name, "alice", "gitea comment: the sender");
		is_int(meta_int("comment_id"), 42, "gitea comment: comment_id for the reaction");
		is_int(meta_bool("is_pull_request"), 0, "gitea comment: issue.pull_request null: an issue");
	}
	gitea_run(body, "issue_comment", "wrong", "d-2");
	refused(SOURCE_UNAUTHORIZED, "does not match", "gitea wrong secret");
	req_new(&acme, "gitea", body, 1700000000000LL);
	hdr("X-Gitea-Event", "issue_comment");
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing X-Gitea-Signature", "gitea unsigned");
	free(body);

	if (gitea_fixture("gitea-pull_request_comment.created.json", "issue_comment", "d-3",
	    "gitea PR comment")) {
		is_int(meta_bool("is_pull_request"), 1, "gitea PR comment: a pull request");
		is_str(spur_event_meta_str(res.event, "head_ref"), "feature-x", "gitea PR comment: head");
		is_str(spur_event_meta_str(res.event, "base_ref"), "main", "gitea PR comment: base");
		is_int(meta_bool("fork"), 0, "gitea PR comment: not a fork");
	}
	if (gitea_fixture("gitea-pull_request.synchronized.json", "pull_request", "d-4",
	    "gitea pull_request")) {
		is_str(res.event->type, "pull_request.synchronized", "gitea PR: type");
		is_str(res.event->text, "Fix it\n\nb", "gitea PR: title and body");
		is_int(meta_int("number"), 20, "gitea PR: number");
	}
	if (gitea_fixture("gitea-issues.label_updated.json", "issues", "d-5", "gitea issues")) {
		is_str(res.event->type, "issues.label_updated", "gitea label: type");
		is_str(json_string_value(json_array_get(json_object_get(res.event->meta, "labels"), 0)),
		    "spur", "gitea label: the issue's labels");
	}
	body = source_system("gitea")->event_check("issues.labeled");
	ok(body != NULL && strstr(body, "label_updated") != NULL,
	    "gitea: GitHub's action names are refused (label_updated)");
	free(body);
}

/* ---- Linear ---- */

static void
linear_run(const char *body, int64_t now, const char *delivery)
{
	char	*sig = hex_hmac("", LINEAR_SECRET, body, strlen(body));

	req_new(&acme, "linear", body, now);
	hdr("Content-Type", "application/json; charset=utf-8");
	hdr("Linear-Signature", sig);
	hdr("Linear-Event", "Issue");
	if (delivery != NULL)
		hdr("Linear-Delivery", delivery);
	handle();
	free(sig);
}

static void
test_linear(void)
{
	char		*body, *sig;
	struct spur_event	*ev;
	json_t		*labels;

	body = fixture("linear-Issue.create.json");
	linear_run(body, 1714557600123LL + 5000, "234d1a4e-b617-4388-90fe-adc3633d6b72");
	if (accepted("Issue.create")) {
		ev = res.event;
		is_str(ev->type, "Issue.create", "Issue.create: type");
		is_str(ev->source, "linear", "Issue.create: source");
		is_str(ev->thread, "linear:9cfb482a-81e3-4154-b5b9-2c805e70a02d",
		    "Issue.create: thread");
		is_str(ev->actor.id, "2e6eea91-1111-0000-9486-acea0603064e", "Issue.create: actor id");
		is_str(ev->actor.name, "Jane Doe", "Issue.create: actor name");
		ok(ev->actor.role == NULL, "Issue.create: no role");
		is_int(ev->actor.bot, 0, "Issue.create: a user");
		is_str(ev->text, "Steps:\n1. open checkout\n2. pay", "Issue.create: description");
		is_str(ev->url, "https://linear.app/acme/issue/ENG-123/checkout-fails-on-safari",
		    "Issue.create: url");
		ok(ev->repository == NULL, "Issue.create: no repository");
		is_str(ev->delivery, "234d1a4e-b617-4388-90fe-adc3633d6b72", "Issue.create: delivery");
		is_str(ev->dedup, "linear:234d1a4e-b617-4388-90fe-adc3633d6b72",
		    "Issue.create: dedup");
		is_str(spur_event_meta_str(ev, "team"), "ENG", "Issue.create: meta.team");
		is_str(spur_event_meta_str(ev, "identifier"), "ENG-123", "Issue.create: identifier");
		is_str(spur_event_meta_str(ev, "issue_id"), "9cfb482a-81e3-4154-b5b9-2c805e70a02d",
		    "Issue.create: issue_id");
		is_str(spur_event_meta_str(ev, "to_state"), "Todo", "Issue.create: to_state");
		is_int(meta_bool("state_changed"), 0, "Issue.create: state not changed");
		labels = json_object_get(ev->meta, "labels");
		is_int(json_array_size(labels), 2, "Issue.create: two labels");
		is_str(json_string_value(json_array_get(labels, 1)), "spur",
		    "Issue.create: label names");
	}

	linear_run(body, 1714557600123LL + 61000, NULL);
	refused(SOURCE_UNAUTHORIZED, "webhookTimestamp is stale", "linear 61 s old");
	linear_run(body, 1714557600123LL - 61000, NULL);
	refused(SOURCE_UNAUTHORIZED, "webhookTimestamp is in the future", "linear 61 s ahead");

	req_new(&acme, "linear", body, 1714557600123LL);
	hdr("Content-Type", "application/json");
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing Linear-Signature", "linear no signature");

	sig = hex_hmac("", "wrong", body, strlen(body));
	req_new(&acme, "linear", body, 1714557600123LL);
	hdr("Linear-Signature", sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "linear wrong secret");
	free(sig);

	sig = hex_hmac("sha256=", LINEAR_SECRET, body, strlen(body));
	req_new(&acme, "linear", body, 1714557600123LL);
	hdr("Linear-Signature", sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "linear with a prefix");
	free(sig);

	sig = hex_hmac("", LINEAR_SECRET, body, strlen(body));
	req_new(NULL, "linear", body, 1714557600123LL);
	hdr("Linear-Signature", sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "unknown org", "linear unknown org");
	req_new(&bare, "linear", body, 1714557600123LL);
	hdr("Linear-Signature", sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "linear is not configured", "linear not configured");
	free(sig);
	free(body);

	body = fixture("linear-Issue.update.json");
	linear_run(body, 1714557900456LL, NULL);
	if (accepted("Issue.update")) {
		ev = res.event;
		is_str(ev->type, "Issue.update", "Issue.update: type");
		is_str(spur_event_meta_str(ev, "to_state"), "In Progress", "Issue.update: to_state");
		is_str(spur_event_meta_str(ev, "to_state_type"), "started", "Issue.update: to_state_type");
		is_str(spur_event_meta_str(ev, "from_state_id"), "b7a1c3d2-0000-4000-8000-00000000a001",
		    "Issue.update: from_state_id");
		is_int(meta_bool("state_changed"), 1, "Issue.update: state_changed");
		is_str(ev->delivery, "000042e3-d123-4980-b49f-8e140eef9329:2024-05-01T10:05:00.000Z",
		    "Issue.update without Linear-Delivery: webhookId:createdAt");
		is_str(ev->dedup, "linear:000042e3-d123-4980-b49f-8e140eef9329:"
		    "2024-05-01T10:05:00.000Z", "Issue.update: dedup on the fallback");
	}
	free(body);

	linear_run("{\"action\":\"update\",\"type\":\"Issue\",\"webhookTimestamp\":1000,"
	    "\"data\":{\"id\":\"i1\",\"stateId\":\"s1\",\"state\":{\"id\":\"s1\",\"name\":"
	    "\"Todo\"}},\"updatedFrom\":{\"title\":\"old\"}}", 1000, "d1");
	if (accepted("Issue.update of the title"))
		is_int(meta_bool("state_changed"), 0, "title update: state not changed");
	linear_run("{\"action\":\"update\",\"type\":\"Issue\",\"webhookTimestamp\":1000,"
	    "\"data\":{\"id\":\"i1\",\"stateId\":\"s1\"},\"updatedFrom\":{\"stateId\":\"s1\"}}",
	    1000, "d2");
	if (accepted("Issue.update, same state"))
		is_int(meta_bool("state_changed"), 0, "same stateId: state not changed");

	body = fixture("linear-Comment.create.json");
	linear_run(body, 1714558200789LL, "d-comment");
	if (accepted("Comment.create")) {
		ev = res.event;
		is_str(ev->type, "Comment.create", "Comment.create: type");
		is_str(ev->thread, "linear:9cfb482a-81e3-4154-b5b9-2c805e70a02d",
		    "Comment.create: thread is the issue");
		is_str(ev->text, "@spur please take this one", "Comment.create: body");
		is_str(ev->actor.name, "Linear Bot", "Comment.create: actor name");
		is_int(ev->actor.bot, 1, "Comment.create: actor type not user: bot");
		is_str(spur_event_meta_str(ev, "identifier"), "ENG-123", "Comment.create: identifier");
		is_str(spur_event_meta_str(ev, "issue_id"), "9cfb482a-81e3-4154-b5b9-2c805e70a02d",
		    "Comment.create: issue_id");
		ok(json_object_get(ev->meta, "state_changed") == NULL,
		    "Comment.create: no state facts");
	}
	free(body);

	linear_run("{\"action\":\"create\",\"type\":\"Comment\",\"webhookTimestamp\":1000,"
	    "\"botActor\":{\"id\":\"b\",\"name\":\"GitHub\"},\"actor\":{\"id\":\"u\","
	    "\"type\":\"user\"},\"data\":{\"id\":\"c\",\"issueId\":\"i\",\"body\":\"x\"}}",
	    1000, "d3");
	if (accepted("Comment.create by a botActor"))
		is_int(res.event->actor.bot, 1, "botActor present: bot");

	linear_run("{\"action\":\"create\",\"type\":\"Issue\",\"data\":{\"id\":\"x\"}}", 1000, "d");
	refused(SOURCE_UNAUTHORIZED, "no numeric webhookTimestamp", "linear without timestamp");
	linear_run("{\"action\":\"create\",\"type\":\"Issue\",\"webhookTimestamp\":1000}",
	    1000, "d");
	refused(SOURCE_BAD, "no data object", "linear without data");
	linear_run("{\"type\":\"Issue\",\"webhookTimestamp\":1000,\"data\":{}}", 1000, "d");
	refused(SOURCE_BAD, "no action", "linear without action");
	linear_run("{\"action\":\"create\",\"type\":\"Comment\",\"webhookTimestamp\":1000,"
	    "\"data\":{\"id\":\"c\"}}", 1000, "d");
	refused(SOURCE_BAD, "no data.issueId", "linear comment without issue");
	linear_run("{\"action\":\"create\",", 1000, "d");
	refused(SOURCE_BAD, "invalid JSON", "linear truncated JSON");
}

/* ---- generic webhooks ---- */

static void
hook_req(const struct org *org, const struct webhook_def *def, const char *body,
    int64_t now)
{
	req_new(org, def != NULL ? def->name : "nosuch", body, now);
	req.webhook = def;
	hdr("Content-Type", "application/json");
}

static void
test_webhook(void)
{
	struct webhook_def	 std = { .org = "acme", .name = "std", .auth = WH_AUTH_STANDARD,
	    .secret = "STD", .text_path = "test" };
	struct webhook_def	 hmac = { .org = "acme", .name = "deploy", .auth = WH_AUTH_HMAC,
	    .secret = "HOOK", .header = "X-Deploy-Signature", .prefix = "sha256=",
	    .id_header = "X-Deploy-Id", .text_path = "message", .thread_path = "build.id" };
	struct webhook_def	 hmac64 = { .org = "acme", .name = "b64", .auth = WH_AUTH_HMAC,
	    .secret = "HOOK", .base64 = 1 };
	struct webhook_def	 bearer = { .org = "acme", .name = "ci", .auth = WH_AUTH_BEARER,
	    .secret = "TOKEN", .text_path = "list" };
	struct webhook_def	 none = { .org = "acme", .name = "open", .auth = WH_AUTH_NONE };
	struct webhook_def	 missing = { .org = "acme", .name = "gone", .auth = WH_AUTH_BEARER,
	    .secret = "NOPE" };
	struct webhook_def	 badstd = { .org = "acme", .name = "badstd",
	    .auth = WH_AUTH_STANDARD, .secret = "BADSTD" };
	const char		*sbody = "{\"test\": 2432232314}";
	const char		*ssig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
	int64_t			 snow = 1614265330LL * 1000;
	const char		*body = "{\"message\":\"deploy failed\",\"build\":{\"id\":981}}";
	char			*sig, *auth;
	unsigned char		 mac[32];
	struct spur_event		*ev;

	/* Standard Webhooks reference vector. */
	hook_req(&acme, &std, sbody, snow);
	hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek");
	hdr("webhook-timestamp", "1614265330");
	hdr("webhook-signature", ssig);
	handle();
	if (accepted("Standard Webhooks vector")) {
		ev = res.event;
		is_str(ev->type, "webhook", "std: type");
		is_str(ev->source, "webhook", "std: source");
		is_str(ev->delivery, "msg_p5jXN8AQM9LWM0D4loKWxJek", "std: delivery is webhook-id");
		is_str(ev->dedup, "std:std:msg_p5jXN8AQM9LWM0D4loKWxJek", "std: dedup");
		is_str(ev->thread, "webhook:std:msg_p5jXN8AQM9LWM0D4loKWxJek",
		    "std: thread without a thread path is the delivery");
		is_str(ev->text, "2432232314", "std: a number at the text path, printed");
		is_str(spur_event_meta_str(ev, "hook"), "std", "std: meta.hook");
		ok(ev->actor.id == NULL && ev->actor.bot == 0, "std: no actor");
	}
	hdrs[3].value = "v1,bm90IHRoaXM= v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= "
	    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
	source_result_free(&res);
	handle();
	is_int(res.verdict, SOURCE_EVENT, "std: any listed v1 signature may match");
	hdrs[3].value = "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "no v1 signature", "std: only v2");
	hdrs[3].value = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "no webhook-signature matches", "std: unpadded base64");
	hdrs[3].value = ssig;
	hdrs[2].value = "1614265331";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "no webhook-signature matches", "std: timestamp changed");
	hdrs[2].value = "1614265330";
	req.now_ms = snow + 301 * 1000;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "webhook-timestamp is stale", "std: 301 s old");
	req.now_ms = snow - 301 * 1000;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "webhook-timestamp is in the future", "std: 301 s ahead");
	req.now_ms = snow;
	req.nheaders = 3;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing webhook-signature", "std: no signature");
	req.nheaders = 2;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing webhook-timestamp", "std: no timestamp");
	req.headers = hdrs + 2;	/* timestamp and signature only */
	req.nheaders = 2;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing webhook-id", "std: no id");

	hook_req(&acme, &badstd, sbody, snow);
	hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek");
	hdr("webhook-timestamp", "1614265330");
	hdr("webhook-signature", ssig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "not whsec_ followed by base64", "std: bad secret");

	/* hmac, hex with a prefix, id header, text and thread paths. */
	sig = hex_hmac("sha256=", HOOK_SECRET, body, strlen(body));
	hook_req(&acme, &hmac, body, 1000);
	hdr("X-Deploy-Signature", sig);
	hdr("X-Deploy-Id", "dep-77");
	handle();
	if (accepted("hmac hook")) {
		ev = res.event;
		is_str(ev->text, "deploy failed", "hmac: text path");
		is_str(ev->thread, "webhook:deploy:981", "hmac: thread path");
		is_str(ev->delivery, "dep-77", "hmac: delivery from id_header");
		is_str(ev->dedup, "hook:deploy:dep-77", "hmac: dedup from id_header");
		is_int(json_integer_value(json_path(ev->payload, "build.id")), 981, "hmac: payload");
	}
	req.nheaders = 2;
	source_result_free(&res);
	handle();
	if (accepted("hmac hook without id header")) {
		ok(res.event->dedup == NULL, "no id header: no dedup");
		ok(strncmp(res.event->delivery, "dlv_", 4) == 0, "no id header: made-up delivery");
	}
	hdrs[1].value = sig + 7;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not start with sha256=", "hmac: prefix missing");
	hdrs[1].value = "sha256=zz";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "64 hex digits", "hmac: malformed");
	req.nheaders = 1;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing X-Deploy-Signature", "hmac: no header");
	hook_req(&acme, &hmac, "{\"message\":\"deploy ok\",\"build\":{\"id\":981}}", 1000);
	hdr("X-Deploy-Signature", sig);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "hmac: body changed");
	hook_req(&acme, &hmac, "{\"message\":", 1000);
	free(sig);
	sig = hex_hmac("sha256=", HOOK_SECRET, "{\"message\":", 11);
	hdr("X-Deploy-Signature", sig);
	handle();
	refused(SOURCE_BAD, "invalid JSON", "hmac: signed bad JSON");
	free(sig);

	/* hmac base64 on the default header. */
	hmac_sha256(HOOK_SECRET, strlen(HOOK_SECRET), body, strlen(body), mac);
	sig = base64_encode(mac, sizeof mac);
	hook_req(&acme, &hmac64, body, 1000);
	hdr("X-Signature", sig);
	handle();
	if (accepted("hmac base64 on X-Signature")) {
		is_str(res.event->text, "", "no text path: empty text");
		ok(strncmp(res.event->thread, "webhook:b64:dlv_", 16) == 0,
		    "no thread path: thread on the made-up delivery");
	}
	hdrs[1].value = "bm90IHRoaXM=";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "base64 of 32 bytes", "hmac base64: wrong length");
	free(sig);

	/* bearer */
	auth = xprintf("Bearer %s", BEARER_SECRET);
	hook_req(&acme, &bearer, "{\"list\":[1,\"a\"]}", 1000);
	hdr("Authorization", auth);
	handle();
	if (accepted("bearer"))
		is_str(res.event->text, "[1,\"a\"]", "bearer: a list at the text path as JSON");
	hdrs[1].value = "bearer " BEARER_SECRET;
	source_result_free(&res);
	handle();
	is_int(res.verdict, SOURCE_EVENT, "bearer: scheme is case-insensitive");
	hdrs[1].value = "Bearer " BEARER_SECRET "x";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "bearer: longer token");
	hdrs[1].value = "Bearer tok";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "does not match", "bearer: shorter token");
	hdrs[1].value = "Basic dXNlcjpwYXNz";
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "not a Bearer token", "bearer: Basic");
	req.nheaders = 1;
	source_result_free(&res);
	handle();
	refused(SOURCE_UNAUTHORIZED, "missing Authorization", "bearer: no header");
	free(auth);

	/* none, written out */
	hook_req(&acme, &none, "", 1000);
	handle();
	if (accepted("auth none, empty body"))
		ok(json_is_object(res.event->payload) && json_object_size(res.event->payload) == 0,
		    "empty body: {}");
	hook_req(&acme, &none, "[1,2,3]", 1000);
	handle();
	is_int(res.verdict, SOURCE_EVENT, "auth none: a JSON list is a payload");
	hook_req(&acme, &none, "\"just a string\"", 1000);
	handle();
	refused(SOURCE_BAD, "invalid JSON", "auth none: a bare string");
	hook_req(&acme, &none, "{\"a\":\"\xc3\x28\"}", 1000);
	handle();
	refused(SOURCE_BAD, "invalid JSON", "auth none: invalid UTF-8");
	hook_req(&acme, &none, "a=1&b=two", 1000);
	hdrs[0].value = "application/x-www-form-urlencoded";
	handle();
	if (accepted("auth none: a form"))
		is_str(json_string_value(json_object_get(res.event->payload, "b")), "two",
		    "form payload decoded");

	/* Nothing to check against. */
	hook_req(&acme, NULL, body, 1000);
	req.hook = "nosuch";
	handle();
	refused(SOURCE_UNAUTHORIZED, "no webhook named nosuch", "no such hook");
	hook_req(&acme, NULL, body, 1000);
	req.hook = "nosuch";
	req.no_verify = 1;
	handle();
	refused(SOURCE_UNAUTHORIZED, "no webhook named", "no such hook, even with no_verify");
	hook_req(NULL, &none, body, 1000);
	handle();
	refused(SOURCE_UNAUTHORIZED, "unknown org", "hook of an unknown org");
	auth = xprintf("Bearer %s", BEARER_SECRET);
	hook_req(&acme, &missing, body, 1000);
	hdr("Authorization", auth);
	handle();
	refused(SOURCE_UNAUTHORIZED, "secret NOPE of webhook gone is not set",
	    "hook whose secret is not set");
	free(auth);
}

int
main(void)
{
	const char	*env = getenv("SPUR_SRCDIR");
	const char	*file = __FILE__, *tail = "/tests/unit/test-source.c";
	size_t		 n = strlen(file), t = strlen(tail);
	char		*cause;

	if (env != NULL && *env != '\0')
		srcdir = xstrdup(env);
	else if (n > t && strcmp(file + n - t, tail) == 0)
		srcdir = xstrndup(file, n - t);
	else
		srcdir = xstrdup(".");

	/* The systems' sections are their files' own: made as the config makes them. */
	setenv("SPUR_TEST_SLACK", SLACK_SECRET, 1);
	setenv("SPUR_TEST_LINEAR", LINEAR_SECRET, 1);
	setenv("SPUR_TEST_GITHUB", GH_SECRET, 1);
	setenv("SPUR_TEST_GITEA", GITEA_SECRET, 1);
	if (config_org_section(&acme, "github", "webhook_secret: env:SPUR_TEST_GITHUB",
	    &cause) != 0 || config_org_section(&acme, "slack", "signing_secret: env:SPUR_TEST_SLACK",
	    &cause) != 0 || config_org_section(&acme, "linear",
	    "webhook_secret: env:SPUR_TEST_LINEAR", &cause) != 0 || config_org_section(&acme,
	    "gitea", "url: https://git.example.com\nwebhook_secret: env:SPUR_TEST_GITEA",
	    &cause) != 0)
		fatal("section: %s", cause);
	test_helpers();
	test_systems();
	test_github_verify();
	test_github_bad();
	test_github_normalize();
	test_slack_verify();
	test_slack_events();
	test_linear();
	test_gitea();
	test_webhook();
	source_result_free(&res);
	free(srcdir);
	return tap_done();
}
