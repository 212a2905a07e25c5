/*
 * console-github-app.c: a GitHub App made from spur's manifest (GitHub's App
 * manifest flow), for an org's admin signed in to the console.
 *
 * GET /console/github/app?org=ORG&owner=LOGIN answers a page whose one button
 * posts the manifest to GitHub (the permissions and events spur needs, its
 * webhook at /o/ORG/hooks/github). GitHub makes the App and sends the browser
 * back to /console/github/app/created?code=…&state=…, where the code is
 * turned into the App's id, private key and webhook secret
 * (POST /app-manifests/{code}/conversions). Those are written under
 * data_dir/github-apps/ (0600, never logged or shown), and the page says the
 * lines of spur.yaml that use them. console.c owns the session and the state
 * cookie; this file the manifest, the exchange and the files.
 */
#include "spur.h"
#include "api.h"
#include "conf.h"
#include "console-github.h"
#include "console-github-app.h"
#include "console-page.h"
#include "github-app.h"
#include "httpc.h"
#include "keys.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGA_TIMEOUT_MS	15000		/* a person waits at the other end */
#define CGA_DIR		"github-apps"
#define CONSOLE_APP_COOKIE	"spur_ghapp"	/* the manifest flow's state.org */
#define CONSOLE_APP_S		3600		/* GitHub's code is good this long */

struct cga {
	struct engine		*e;
	char			*org;
	char			*user;
	struct http_call	*call;
	console_github_app_cb	 cb;
	void			*arg;
};

/* text, escaped for HTML (an element's text or a quoted attribute). */
static void
cga_html(struct buf *b, const char *text)
{
	for (; *text != '\0'; text++) {
		switch (*text) {
		case '&':
			buf_adds(b, "&amp;");
			break;
		case '<':
			buf_adds(b, "&lt;");
			break;
		case '>':
			buf_adds(b, "&gt;");
			break;
		case '"':
			buf_adds(b, "&quot;");
			break;
		case '\'':
			buf_adds(b, "&#39;");
			break;
		default:
			buf_addc(b, *text);
		}
	}
}

/* GitHub's web address for org (its git_url's, as repositories are cloned from). */
static const char *
cga_web(const struct org *o)
{
	const struct org_github	*g = github_conf(o);

	return g != NULL && g->git_url != NULL ? g->git_url : "https://github.com";
}

/* scheme://host[:port] of url, for a CSP source: NULL when it holds anything else. */
static char *
cga_origin(const char *url)
{
	const char	*host = strstr(url, "://");
	size_t		 n;

	if (host == NULL)
		return NULL;
	n = host + 3 - url + strcspn(host + 3, "/");
	if (strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:/-[]") < n)
		return NULL;
	return xstrndup(url, n);
}

static void
cga_head(struct buf *b, const char *title)
{
	buf_adds(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "<meta name=\"viewport\" content=\"width=device-width\">"
	    "<link rel=\"stylesheet\" href=\"/console/app.css\"><title>");
	cga_html(b, title);
	buf_adds(b, " · spur</title></head><body><main class=\"page\"><h1>");
	cga_html(b, title);
	buf_adds(b, "</h1>\n");
}

/* The manifest of org's App: what spur needs of GitHub, and where GitHub calls it. */
static json_t *
cga_manifest(const struct config *cf, const char *org)
{
	char	*hook = xprintf("%s/o/%s/hooks/github", cf->public_url, org);
	char	*back = xprintf("%s/console/github/app/created", cf->public_url);
	char	*name = xprintf("spur-%s", org);
	json_t	*m;

	m = json_pack("{s:s, s:s, s:s, s:{s:s, s:b}, s:s, s:b, s:{s:s, s:s, s:s, s:s, s:s},"
	    " s:[s, s, s, s]}",
	    "name", name, "url", cf->public_url,
	    "description", "Runs coding agents on comments and reports back.",
	    "hook_attributes", "url", hook, "active", 1,
	    "redirect_url", back, "public", 0,
	    "default_permissions", "contents", "write", "pull_requests", "write", "issues",
	    "write", "metadata", "read", "members", "read",
	    "default_events", "issue_comment", "issues", "pull_request",
	    "pull_request_review_comment");
	free(hook);
	free(back);
	free(name);
	return m;
}

char *
console_github_app_form(struct engine *e, const char *org, const char *owner,
    const char *state, char **form_action)
{
	const struct org	*o = config_org(e->conf, org);
	struct buf		 b;
	json_t			*m = cga_manifest(e->conf, org);
	char			*manifest = json_dumps(m, JSON_COMPACT), *action;

	json_decref(m);
	if ((*form_action = cga_origin(cga_web(o))) == NULL) {
		free(manifest);
		return NULL;
	}
	action = *owner != '\0' ? xprintf("%s/organizations/%s/settings/apps/new?state=%s",
	    cga_web(o), owner, state) : xprintf("%s/settings/apps/new?state=%s", cga_web(o), state);
	buf_init(&b, 0);
	cga_head(&b, "Create the GitHub App");
	buf_adds(&b, "<p>GitHub makes an App for org <b>");
	cga_html(&b, org);
	buf_adds(&b, "</b> owned by <b>");
	cga_html(&b, *owner != '\0' ? owner : "your own account");
	buf_adds(&b, "</b>, with the permissions spur needs (contents, pull requests and issues "
	    "to write; metadata and members to read) and its webhook at this spur. You can "
	    "rename it there. GitHub then sends you back here, where its key and secrets are "
	    "stored.</p>\n<form method=\"post\" action=\"");
	cga_html(&b, action);
	buf_adds(&b, "\"><input type=\"hidden\" name=\"manifest\" value=\"");
	cga_html(&b, manifest);
	buf_adds(&b, "\"><button type=\"submit\" class=\"primary\">Create on GitHub</button>"
	    "</form>\n</main></body></html>\n");
	free(action);
	free(manifest);
	return buf_take(&b);
}

static void
cga_free(struct cga *c)
{
	if (c->call != NULL)
		httpc_cancel(c->call);
	free(c->org);
	free(c->user);
	free(c);
}

static void
cga_fail(struct cga *c, int status, const char *why)
{
	struct buf	 b;

	log_warn("event=console.github_app_failed org=%s user=%s reason=%s", c->org,
	    log_q(c->user), log_q(why));
	buf_init(&b, 0);
	cga_head(&b, "The GitHub App was not stored");
	buf_adds(&b, "<p>");
	cga_html(&b, why);
	buf_adds(&b, "</p>\n<p>If GitHub made the App, take its key and secret from its settings "
	    "page instead (docs/github-app.md).</p>\n</main></body></html>\n");
	c->cb(status, buf_take(&b), c->arg);
	cga_free(c);
}

/* Writes value to data_dir/github-apps/name, 0600, never over a file: 0, or -1 with *why. */
static int
cga_write(struct engine *e, const char *name, const char *value, char **path, char **why)
{
	char	*dir = path_join(e->conf->data_dir, CGA_DIR);
	size_t	 len = strlen(value), off = 0;
	ssize_t	 n;
	int	 fd;

	*path = path_join(dir, name);
	if (mkdir_p(dir, 0700) != 0 ||
	    (fd = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1) {
		*why = xprintf("cannot write %s: %s", *path, strerror(errno));
		free(dir);
		return -1;
	}
	free(dir);
	while (off < len && (n = write(fd, value + off, len - off)) > 0)
		off += n;
	if (off < len || fsync(fd) != 0) {
		*why = xprintf("cannot write %s: %s", *path, strerror(errno));
		close(fd);
		unlink(*path);
		return -1;
	}
	close(fd);
	return 0;
}

/* The page after the App's files are written: what to put in spur.yaml. */
static char *
cga_done_page(const char *org, json_int_t id, const char *slug, const char *html_url,
    const char *key, const char *hook)
{
	struct buf	 b;
	char		 num[32];

	snprintf(num, sizeof num, "%lld", (long long)id);
	buf_init(&b, 0);
	cga_head(&b, "GitHub App created");
	buf_adds(&b, "<p>GitHub made <b>");
	cga_html(&b, slug);
	buf_adds(&b, "</b> (App ID ");
	buf_adds(&b, num);
	buf_adds(&b, "). Its private key and webhook secret are stored, readable by spur alone:</p>"
	    "\n<pre>");
	cga_html(&b, key);
	buf_adds(&b, "\n");
	cga_html(&b, hook);
	buf_adds(&b, "</pre>\n<p>Use them in spur.yaml, then <code>spur reload</code>:</p>\n<pre>"
	    "orgs:\n  ");
	cga_html(&b, org);
	buf_adds(&b, ":\n    github:\n      app_id: ");
	buf_adds(&b, num);
	buf_adds(&b, "\n      private_key: file:");
	cga_html(&b, key);
	buf_adds(&b, "\n      webhook_secret: file:");
	cga_html(&b, hook);
	buf_adds(&b, "</pre>\n<p>Then install it on the repositories the automations name: <a href=\"");
	cga_html(&b, html_url);
	buf_adds(&b, "/installations/new\">install ");
	cga_html(&b, slug);
	buf_adds(&b, "</a>, and run <code>spur doctor</code>.</p>\n</main></body></html>\n");
	return buf_take(&b);
}

/* GitHub's answer: the App's id, slug, key and webhook secret, written and shown. */
static void
cga_conversion_cb(const struct http_response *res, void *arg)
{
	struct cga	*c = arg;
	json_t		*j = NULL;
	const char	*pem, *hook, *slug, *html_url;
	json_int_t	 id;
	char		 name[128], *key_path = NULL, *hook_path = NULL, *why = NULL, *page;

	c->call = NULL;
	if (res->status != 201 || (j = json_loadb(res->body, res->len, 0, NULL)) == NULL) {
		why = res->status == 0 ? xprintf("GitHub did not answer: %s", res->error) :
		    xprintf("GitHub answered %d to the code it sent (it is good for one use, "
		    "within an hour)", res->status);
		cga_fail(c, 502, why);
		free(why);
		json_decref(j);
		return;
	}
	id = json_integer_value(json_object_get(j, "id"));
	pem = json_string_value(json_object_get(j, "pem"));
	hook = json_string_value(json_object_get(j, "webhook_secret"));
	slug = json_string_value(json_object_get(j, "slug"));
	html_url = json_string_value(json_object_get(j, "html_url"));
	if (id <= 0 || pem == NULL || hook == NULL || slug == NULL || html_url == NULL) {
		cga_fail(c, 502, "GitHub's answer holds no App id, key and webhook secret");
		json_decref(j);
		return;
	}
	snprintf(name, sizeof name, "%s-%lld.pem", c->org, (long long)id);
	if (cga_write(c->e, name, pem, &key_path, &why) == 0) {
		snprintf(name, sizeof name, "%s-%lld.webhook-secret", c->org, (long long)id);
		if (cga_write(c->e, name, hook, &hook_path, &why) != 0)
			unlink(key_path);
	}
	if (why != NULL) {
		cga_fail(c, 500, why);
		free(why);
	} else {
		log_info("event=console.github_app_created org=%s user=%s app_id=%lld slug=%s",
		    c->org, log_q(c->user), (long long)id, log_q(slug));
		page = cga_done_page(c->org, id, slug, html_url, key_path, hook_path);
		c->cb(201, page, c->arg);
		cga_free(c);
	}
	free(key_path);
	free(hook_path);
	json_decref(j);
}

void
console_github_app_created(struct engine *e, const char *org, const char *user,
    const char *code, console_github_app_cb cb, void *arg)
{
	struct cga		*c = xcalloc(1, sizeof *c);
	struct http_request	 req;
	char			*base, *url;
	const char		*h[] = { "Accept: application/vnd.github+json",
	    "X-GitHub-Api-Version: 2022-11-28", NULL };

	c->e = e;
	c->org = xstrdup(org);
	c->user = xstrdup(user);
	c->cb = cb;
	c->arg = arg;
	if (code == NULL || *code == '\0' || strlen(code) > 256 ||
	    strspn(code, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
	    strlen(code)) {
		cga_fail(c, 400, "GitHub sent back no code for the App");
		return;
	}
	base = config_api_url(config_org(e->conf, org), "github");
	url = xprintf("%s/app-manifests/%s/conversions", base, code);
	memset(&req, 0, sizeof req);
	req.method = "POST";
	req.url = url;
	req.headers = h;
	req.body = "";
	req.timeout_ms = CGA_TIMEOUT_MS;
	c->call = httpc_request(e->http, &req, cga_conversion_cb, c);
	free(base);
	free(url);
}

/* GET /console/github/app?org=ORG&owner=LOGIN: the page that posts the App's manifest. */
static void
console_github_app_page(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char			*org = api_query_value(req->query, "org");
	char			*owner = api_query_value(req->query, "owner"), *user = NULL;
	char			*state, *value, *fa = NULL;
	const struct org	*o = org != NULL ? config_org(e->conf, org) : NULL;
	struct api_answer	 a;

	if (o == NULL || (owner != NULL && *owner != '\0' && !console_github_login_valid(owner))) {
		console_answer(done, arg, 400, "text/plain; charset=utf-8", xstrdup("Name a "
		    "configured org (?org=NAME) and, for an organization's App, its GitHub login "
		    "(&owner=LOGIN).\n"));
	} else if (console_person_of(e, req, org, &user, done, arg) == 0) {
		state = key_token(24);
		memset(&a, 0, sizeof a);
		a.body = console_github_app_form(e, org, owner != NULL ? owner : "", state, &fa);
		a.status = a.body != NULL ? 200 : 400;
		if (a.body == NULL)
			a.body = xstrdup("The org's github.git_url is no origin.\n");
		a.ctype = a.body != NULL && a.status == 200 ? "text/html; charset=utf-8" :
		    "text/plain; charset=utf-8";
		a.form_action = fa;
		value = xprintf("%s.%s", state, org);
		a.set_cookie[0] = console_set_cookie(e, CONSOLE_APP_COOKIE, value,
		    "/console/github/app", CONSOLE_APP_S);
		a.console = 1;
		log_info("event=console.github_app_form org=%s user=%s owner=%s", org, log_q(user),
		    log_q(owner != NULL ? owner : ""));
		done(&a, arg);
		api_answer_clear(&a);
		free(value);
		free(state);
	}
	free(user);
	free(org);
	free(owner);
}

/* The browser that asked, waiting for GitHub's answer. */
struct console_app_wait {
	struct engine	*e;
	api_done_cb	 done;
	void		*arg;
};

static void
console_github_app_done(int status, char *html, void *arg)
{
	struct console_app_wait	*w = arg;
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = status;
	a.ctype = "text/html; charset=utf-8";
	a.body = html;
	a.set_cookie[0] = console_set_cookie(w->e, CONSOLE_APP_COOKIE, NULL,
	    "/console/github/app", 0);
	a.console = 1;
	w->done(&a, w->arg);
	api_answer_clear(&a);
	free(w);
}

/* GET /console/github/app/created?code=&state=: GitHub made the App; store what it gives. */
static void
console_github_app_back(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	char			 saved[300], *state = api_query_value(req->query, "state");
	char			*code = api_query_value(req->query, "code"), *dot, *user = NULL;
	struct console_app_wait	*w;

	if (state == NULL || code == NULL || req->cookie == NULL ||
	    console_cookie(req->cookie, CONSOLE_APP_COOKIE, saved, sizeof saved) != 0 ||
	    (dot = strchr(saved, '.')) == NULL || (size_t)(dot - saved) != strlen(state) ||
	    !ct_equal(saved, state, strlen(state)) || config_org(e->conf, dot + 1) == NULL) {
		log_warn("event=console.github_app_refused reason=\"state missing or not this "
		    "browser's\"");
		console_answer(done, arg, 400, "text/plain; charset=utf-8", xstrdup("This GitHub "
		    "App was not asked for from this browser (its state does not match): start "
		    "again from /console/github/app.\n"));
	} else if (console_person_of(e, req, dot + 1, &user, done, arg) == 0) {
		w = xcalloc(1, sizeof *w);
		w->e = e;
		w->done = done;
		w->arg = arg;
		console_github_app_created(e, dot + 1, user, code, console_github_app_done, w);
	}
	free(user);
	free(state);
	free(code);
}

static void
console_github_app_route(struct engine *e, const struct api_req *req, const char *rest,
    api_done_cb done, void *arg)
{
	if (*rest == '\0')
		console_github_app_page(e, req, done, arg);
	else if (strcmp(rest, "/created") == 0)
		console_github_app_back(e, req, done, arg);
	else
		console_answer(done, arg, 404, "application/json", xstrdup("{\"error\":\"not_found\"}"));
}

/* The console's pages of GitHub's: the App manifest flow (console.c routes them). */
const struct console_pages console_pages = { "/console/github/app", console_github_app_route };
