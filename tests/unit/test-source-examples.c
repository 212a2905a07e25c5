/* test-source-examples.c: every @octokit/webhooks-examples payload, signed and normalized. */
#include "spur.h"
#include "conf.h"
#include "event.h"
#include "jscan.h"
#include "source.h"
#include "source-github.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define SECRET		"examples-secret"
#define EXAMPLES	"tests/node_modules/@octokit/webhooks-examples/api.github.com/index.json"

static struct org org = { .name = "acme" };

/* The event, the object keyed by the thread number, and the object the event is about. */
static const struct {
	const char	*name;
	const char	*subject;
	const char	*item;
	int		 titled;
} events[] = {
	{ "issue_comment", "issue", "comment", 0 },
	{ "pull_request_review_comment", "pull_request", "comment", 0 },
	{ "pull_request_review", "pull_request", "review", 0 },
	{ "issues", "issue", "issue", 1 },
	{ "pull_request", "pull_request", "pull_request", 1 },
};

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

/* Signs body and hands it to the GitHub source as event NAME. */
static void
run(const char *name, const char *body, struct source_result *res)
{
	struct header		 h[4];
	struct source_req	 req;
	unsigned char		 mac[32];
	char			 hex[65], sig[80];

	hmac_sha256(SECRET, strlen(SECRET), body, strlen(body), mac);
	hex_encode(mac, sizeof mac, hex);
	snprintf(sig, sizeof sig, "sha256=%s", hex);
	h[0].name = "Content-Type";
	h[0].value = "application/json";
	h[1].name = "X-GitHub-Event";
	h[1].value = name;
	h[2].name = "X-GitHub-Delivery";
	h[2].value = "d-1";
	h[3].name = "X-Hub-Signature-256";
	h[3].value = sig;
	memset(&req, 0, sizeof req);
	req.org = &org;
	req.org_name = "acme";
	req.hook = "github";
	req.headers = h;
	req.nheaders = 4;
	req.body = body;
	req.len = strlen(body);
	req.now_ms = 1;
	source_github.handle(&req, res);
}

/* What the text should be, worked out here independently of source-github.c. */
static char *
want_text(const json_t *item, int titled)
{
	const char	*title = json_string_value(json_object_get(item, "title"));
	const char	*body = json_string_value(json_object_get(item, "body"));

	if (!titled)
		return xstrdup(body != NULL ? body : "");
	if (body == NULL || *body == '\0')
		return xstrdup(title != NULL ? title : "");
	return xprintf("%s\n\n%s", title, body);
}

static void
check(const char *name, size_t idx, const json_t *ex, const char *subject_key,
    const char *item_key, int titled)
{
	struct source_result	 res;
	const json_t		*subject = json_object_get(ex, subject_key);
	const json_t		*item = json_object_get(ex, item_key);
	const char		*action = json_string_value(json_object_get(ex, "action"));
	char			*body, *type, *thread, *text, *id;

	memset(&res, 0, sizeof res);
	body = json_dumps(ex, JSON_COMPACT);
	run(name, body, &res);
	if (!is_int(res.verdict, SOURCE_EVENT, "%s", nm("%s[%zu] %s: accepted", name, idx,
	    action))) {
		printf("#   cause: %s\n", res.cause != NULL ? res.cause : "(null)");
		free(body);
		source_result_free(&res);
		return;
	}
	type = xprintf("%s.%s", name, action);
	thread = xprintf("github:%s#%lld", json_path_str(ex, "repository.full_name"),
	    (long long)json_integer_value(json_object_get(subject, "number")));
	text = want_text(item, titled);
	id = json_scalar_text(json_path(ex, "sender.id"));
	is_str(res.event->type, type, "%s", nm("%s[%zu]: type %s", name, idx, type));
	is_str(res.event->thread, thread, "%s", nm("%s[%zu]: thread", name, idx));
	is_str(res.event->actor.name, json_path_str(ex, "sender.login"),
	    "%s", nm("%s[%zu]: actor name", name, idx));
	is_str(res.event->actor.id, id, "%s", nm("%s[%zu]: actor id", name, idx));
	is_str(res.event->actor.role, json_string_value(json_object_get(item,
	    "author_association")), "%s", nm("%s[%zu]: actor role", name, idx));
	is_int(res.event->actor.bot, strcmp(json_path_str(ex, "sender.type"), "Bot") == 0,
	    "%s", nm("%s[%zu]: actor bot", name, idx));
	is_str(res.event->text, text, "%s", nm("%s[%zu]: text", name, idx));
	is_str(res.event->url, json_string_value(json_object_get(item, "html_url")),
	    "%s", nm("%s[%zu]: url", name, idx));
	free(id);
	free(text);
	free(thread);
	free(type);
	free(body);
	source_result_free(&res);
}

/*
 * The GitHub parse keeps only what the normalizer reads (source_github_keep):
 * from those paths every example must normalize to the very event the whole
 * payload gives, or fail with the same cause.
 */
static void
check_kept(const char *name, size_t idx, const json_t *ex)
{
	struct header		 h[2] = { { "X-GitHub-Event", name },
				    { "X-GitHub-Delivery", "d-1" } };
	struct source_req	 req;
	struct spur_event	*a, *b;
	json_t			*whole, *kept, *ja, *jb;
	char			*body, *ca = NULL, *cb = NULL, *cause = NULL;
	int			 ra, rb;

	memset(&req, 0, sizeof req);
	req.org = &org;
	req.org_name = "acme";
	req.headers = h;
	req.nheaders = 2;
	body = json_dumps(ex, JSON_COMPACT);
	whole = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
	kept = jscan_parse(body, strlen(body), SOURCE_JSON_DEPTH, source_github_keep, &cause);
	if (!ok(whole != NULL && kept != NULL, "%s", nm("%s[%zu]: parsed both ways", name,
	    idx))) {
		printf("#   cause: %s\n", cause != NULL ? cause : "(null)");
		goto out;
	}
	a = spur_event_new("acme", "github");
	b = spur_event_new("acme", "github");
	a->received_at = b->received_at = 1;
	ra = source_github_normalize(&req, name, whole, a, &ca);
	rb = source_github_normalize(&req, name, kept, b, &cb);
	if (ra != 0 || rb != 0)
		is_str(cb, ca, "%s", nm("%s[%zu]: kept paths, same refusal", name, idx));
	else {
		ja = spur_event_head_json(a);
		jb = spur_event_head_json(b);
		if (!ok(json_equal(ja, jb), "%s", nm("%s[%zu]: kept paths, same event", name,
		    idx))) {
			char *sa = json_dumps(ja, JSON_COMPACT), *sb = json_dumps(jb,
			    JSON_COMPACT);
			printf("#   whole: %s\n#   kept:  %s\n", sa, sb);
			free(sa);
			free(sb);
		}
		json_decref(ja);
		json_decref(jb);
	}
	free(ca);
	free(cb);
	spur_event_free(a);
	spur_event_free(b);
out:
	free(cause);
	json_decref(whole);
	json_decref(kept);
	free(body);
}

int
main(void)
{
	const char	*srcdir = getenv("SPUR_SRCDIR");
	char		*path, *data, *cause = NULL, *body;
	size_t		 len, i, j, k, seen;
	json_t		*all, *def, *ex;
	json_error_t	 err;
	struct source_result res;

	if (srcdir == NULL || *srcdir == '\0') {
		printf("1..0 # SKIP SPUR_SRCDIR is not set (make check sets it)\n");
		return 0;
	}
	setenv("SPUR_TEST_GITHUB", SECRET, 1);
	if (config_org_section(&org, "github", "webhook_secret: env:SPUR_TEST_GITHUB",
	    &cause) != 0)
		fatal("section: %s", cause);
	path = xprintf("%s/%s", srcdir, EXAMPLES);
	if (read_file(path, 64 << 20, &data, &len, &cause) != 0) {
		printf("1..0 # SKIP %s: run npm ci in tests/ (%s)\n", EXAMPLES, cause);
		free(cause);
		free(path);
		return 0;
	}
	free(path);
	all = json_loadb(data, len, 0, &err);
	free(data);
	if (!ok(json_is_array(all), "index.json is a list of event definitions"))
		return tap_done();

	for (k = 0; k < SPUR_ARRLEN(events); k++) {
		seen = 0;
		json_array_foreach(all, i, def) {
			if (strcmp(json_string_value(json_object_get(def, "name")),
			    events[k].name) != 0)
				continue;
			json_array_foreach(json_object_get(def, "examples"), j, ex) {
				check(events[k].name, j, ex, events[k].subject,
				    events[k].item, events[k].titled);
				seen++;
			}
		}
		ok(seen >= 4, "%s: %zu examples walked", events[k].name, seen);
	}

	/* Every example of every event GitHub sends: the kept paths are enough. */
	seen = 0;
	json_array_foreach(all, i, def) {
		json_array_foreach(json_object_get(def, "examples"), j, ex) {
			check_kept(json_string_value(json_object_get(def, "name")), j, ex);
			seen++;
		}
	}
	ok(seen > 300, "kept paths: %zu examples of every event walked", seen);

	/* ping is answered, not stored. */
	seen = 0;
	json_array_foreach(all, i, def) {
		if (strcmp(json_string_value(json_object_get(def, "name")), "ping") != 0)
			continue;
		json_array_foreach(json_object_get(def, "examples"), j, ex) {
			memset(&res, 0, sizeof res);
			body = json_dumps(ex, JSON_COMPACT);
			run("ping", body, &res);
			is_int(res.verdict, SOURCE_REPLY, "%s", nm("ping[%zu]: answered", j));
			free(body);
			source_result_free(&res);
			seen++;
		}
	}
	ok(seen > 0, "ping: %zu examples walked", seen);
	json_decref(all);
	return tap_done();
}
