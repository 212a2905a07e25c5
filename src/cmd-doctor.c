/* cmd-doctor.c: `spur doctor`: what `spur check` cannot see: the credentials as the APIs take them, the host's sandboxes, disk and clock. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "budget.h"
#include "cmd.h"
#include "conf.h"
#include "doctor.h"
#include "egress.h"
#include "github-app.h"
#include "httpc.h"
#include "sandbox.h"
#include "source.h"
#include "store.h"
#include "trigger.h"

#include <sys/statvfs.h>
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define DOCTOR_SKEW_MAX		30	/* seconds: the tightest signature window is 60, a JWT's iat 60 */
#define DOCTOR_REPOS_MAX	20	/* repositories named in a line, the rest counted */

/* --- GitHub ------------------------------------------------------------------ */

/* The GitHub events org's automations listen to, each once, into out (a JSON array). */
static json_t *
doctor_github_events(const struct doctor *d, const char *org)
{
	const struct automation	*a;
	const struct trigger	*tr;
	json_t			*out = json_array(), *v;
	size_t			 i, t, k, x, n;
	char			*ev;
	int			 seen;

	for (i = 0; i < automation_count(d->set); i++) {
		a = automation_get(d->set, i);
		if (strcmp(a->org, org) != 0)
			continue;
		for (t = 0; t < a->ntriggers; t++) {
			tr = &a->triggers[t];
			if (strcmp(trigger_source_name(tr), "github") != 0)
				continue;
			for (k = 0; k < tr->nevents; k++) {
				n = strcspn(tr->events[k], ".");
				ev = xprintf("%.*s", (int)n, tr->events[k]);
				seen = 0;
				json_array_foreach(out, x, v) {
					if (strcmp(json_string_value(v), ev) == 0)
						seen = 1;
				}
				if (!seen)
					json_array_append_new(out, json_string(ev));
				free(ev);
			}
		}
	}
	return out;
}

/* The fixed repositories (no glob) org's automations name or report to: they must be reachable. */
static json_t *
doctor_github_repos(const struct doctor *d, const char *org)
{
	const struct automation	*a;
	const struct trigger	*tr;
	json_t			*out = json_object(), *dest;
	size_t			 i, t, k;

	for (i = 0; i < automation_count(d->set); i++) {
		a = automation_get(d->set, i);
		if (strcmp(a->org, org) != 0)
			continue;
		if (a->repository != NULL)
			json_object_set_new(out, a->repository, json_string(a->name));
		/* A report destination (report: {github: OWNER/NAME#N}) needs a token there too. */
		json_array_foreach(a->report_to, k, dest) {
			if (strcmp(json_string_value(json_object_get(dest, "source")) ?: "",
			    "github") == 0 && json_string_value(json_object_get(dest,
			    "repository")) != NULL)
				json_object_set_new(out, json_string_value(json_object_get(dest,
				    "repository")), json_sprintf("%s's report", a->name));
		}
		for (t = 0; t < a->ntriggers; t++) {
			tr = &a->triggers[t];
			if (strcmp(trigger_source_name(tr), "github") != 0)
				continue;
			for (k = 0; k < tr->nrepositories; k++) {
				if (strpbrk(tr->repositories[k], "*?[") == NULL)
					json_object_set_new(out, tr->repositories[k],
					    json_string(a->name));
			}
		}
	}
	return out;
}

static char *
doctor_github_url(const struct org *org, const char *path)
{
	char	*base = config_api_url(org, "github"), *url;

	url = xprintf("%s%s", base, path);
	free(base);
	return url;
}

/* A token's request to GitHub's API. */
static void
doctor_github_get(struct doctor *d, const struct org *org, const char *auth, const char *path,
    const char *method, struct doctor_answer *a)
{
	const char	*h[4];
	char		*url = doctor_github_url(org, path);

	h[0] = auth;
	h[1] = "Accept: application/vnd.github+json";
	h[2] = "X-GitHub-Api-Version: 2022-11-28";
	h[3] = NULL;
	doctor_http(d, method, url, h, method[0] == 'P' ? "" : NULL, a);
	free(url);
}

/* The permissions spur's runs and reports use, as GitHub names them. */
static const struct {
	const char	*name;
	const char	*level;		/* at least */
	const char	*why;
} doctor_github_perms[] = {
	{ "contents", "write", "clone and push branches" },
	{ "pull_requests", "write", "open and update pull requests, reply to review comments" },
	{ "issues", "write", "comment on issues and pull requests, react to comments" },
	{ "metadata", "read", "find repositories and installations" },
};

/* An installation token's permissions against doctor_github_perms; the missing, or NULL. */
static char *
doctor_github_missing(const json_t *perms)
{
	struct buf	 b;
	const char	*have;
	size_t		 i;

	buf_init(&b, 0);
	for (i = 0; i < SPUR_ARRLEN(doctor_github_perms); i++) {
		have = json_string_value(json_object_get(perms, doctor_github_perms[i].name));
		if (have != NULL && (strcmp(have, doctor_github_perms[i].level) == 0 ||
		    strcmp(have, "write") == 0 || strcmp(have, "admin") == 0))
			continue;
		buf_addf(&b, "%s%s: %s (%s; has %s)", b.len > 0 ? ", " : "",
		    doctor_github_perms[i].name, doctor_github_perms[i].level,
		    doctor_github_perms[i].why, have != NULL ? have : "none");
	}
	if (b.len == 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_take(&b);
}

/* The repositories an installation token reaches (one page of 100: enough to say). */
static void
doctor_github_installation(struct doctor *d, const struct org *org, const json_t *inst,
    const char *jwt_auth, json_t *reached)
{
	struct doctor_answer	 a;
	const char		*account, *tok;
	json_t			*r;
	struct buf		 list;
	const char		*check = "github.installation";
	char			*path, *auth, *missing, *why;
	long long		 id = json_integer_value(json_object_get(inst, "id"));
	size_t			 i;

	account = json_string_value(json_object_get(json_object_get(inst, "account"), "login"));
	if (account == NULL)
		account = "?";
	path = xprintf("/app/installations/%lld/access_tokens", id);
	doctor_github_get(d, org, jwt_auth, path, "POST", &a);
	free(path);
	tok = json_string_value(json_object_get(a.json, "token"));
	if (a.status != 201 || tok == NULL) {
		why = doctor_why(&a);
		doctor_say(d, org->name, check, DOCTOR_FAIL, "check that the installation is "
		    "not suspended (the account's Settings, GitHub Apps)", "installation %lld "
		    "on %s: no token (%s)", id, account, why);
		free(why);
		doctor_answer_clear(&a);
		return;
	}
	auth = xprintf("Authorization: Bearer %s", tok);
	if ((missing = doctor_github_missing(json_object_get(a.json, "permissions"))) != NULL) {
		doctor_say(d, org->name, "github.permissions", DOCTOR_FAIL, "in the App's "
		    "settings, Permissions & events: Contents, Pull requests and Issues read "
		    "and write, Metadata read; then accept the new permissions on each "
		    "installation", "installation on %s lacks %s", account, missing);
		free(missing);
	} else
		doctor_say(d, org->name, "github.permissions", DOCTOR_PASS, NULL, "installation "
		    "on %s: contents, pull_requests and issues write, metadata read", account);
	doctor_answer_clear(&a);
	doctor_github_get(d, org, auth, "/installation/repositories?per_page=100", "GET", &a);
	freezero_str(auth);
	if (a.status != 200 || !json_is_array(json_object_get(a.json, "repositories"))) {
		why = doctor_why(&a);
		doctor_say(d, org->name, check, DOCTOR_FAIL, "see that GitHub answers the API "
		    "(api_url) and the installation is not suspended", "installation on %s: "
		    "cannot list its repositories (%s)", account, why);
		free(why);
		doctor_answer_clear(&a);
		return;
	}
	buf_init(&list, 0);
	json_array_foreach(json_object_get(a.json, "repositories"), i, r) {
		const char *name = json_string_value(json_object_get(r, "full_name"));

		if (name == NULL)
			continue;
		json_object_set_new(reached, name, json_true());
		if (i < DOCTOR_REPOS_MAX)
			buf_addf(&list, "%s%s", i > 0 ? ", " : "", name);
	}
	if (json_array_size(json_object_get(a.json, "repositories")) > DOCTOR_REPOS_MAX)
		buf_addf(&list, " and %zu more", json_array_size(json_object_get(a.json,
		    "repositories")) - DOCTOR_REPOS_MAX);
	doctor_say(d, org->name, check, DOCTOR_PASS, NULL, "installed on %s (%s, %lld "
	    "repositories): %s", account, json_string_value(json_object_get(inst,
	    "repository_selection")) != NULL ? json_string_value(json_object_get(inst,
	    "repository_selection")) : "?", (long long)json_integer_value(json_object_get(a.json,
	    "total_count")), list.len > 0 ? buf_cstr(&list) : "none");
	buf_free(&list);
	doctor_answer_clear(&a);
}

static void
doctor_github_app(struct doctor *d, const struct org *org)
{
	struct doctor_answer	 a;
	json_t			*inst, *events, *repos, *reached, *v;
	const char		*name, *repo;
	struct buf		 missing;
	char			*jwt, *cause = NULL, *auth, *why;
	size_t			 i, k;
	int			 has;

	jwt = github_jwt(org->github->private_key->value, org->github->private_key->len,
	    org->github->app_id, now_ms() / 1000, &cause);
	if (jwt == NULL) {
		doctor_say(d, org->name, "github.app", DOCTOR_FAIL, "download a new private key "
		    "in the App's settings (Private keys, Generate) and point private_key at it",
		    "the private key cannot sign a JWT: %s", cause);
		free(cause);
		return;
	}
	auth = xprintf("Authorization: Bearer %s", jwt);
	freezero_str(jwt);
	doctor_github_get(d, org, auth, "/app", "GET", &a);
	if (a.status != 200) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "github.app", DOCTOR_FAIL, a.status == 401 ?
		    "app_id must be the App ID (a number on the App's settings page, not the "
		    "client ID Iv1...), private_key one of that App's keys not revoked there, "
		    "and the clock right (spur doctor's clock check)" :
		    "see that api_url is GitHub's API (https://api.github.com, or GHES's /api/v3)",
		    "GitHub refused App %lld's JWT (%s)", org->github->app_id, why);
		free(why);
		doctor_answer_clear(&a);
		freezero_str(auth);
		return;
	}
	name = json_string_value(json_object_get(a.json, "slug"));
	doctor_say(d, org->name, "github.app", DOCTOR_PASS, NULL, "App %lld (%s) accepts the "
	    "key's JWT", org->github->app_id, name != NULL ? name : "?");
	/* The events the automations need, against those the App subscribes to. */
	events = doctor_github_events(d, org->name);
	buf_init(&missing, 0);
	json_array_foreach(events, i, v) {
		has = 0;
		for (k = 0; k < json_array_size(json_object_get(a.json, "events")); k++) {
			if (strcmp(json_string_value(v), json_string_value(json_array_get(
			    json_object_get(a.json, "events"), k)) ?: "") == 0)
				has = 1;
		}
		if (!has)
			buf_addf(&missing, "%s%s", missing.len > 0 ? ", " : "", json_string_value(v));
	}
	if (json_array_size(events) == 0)
		doctor_say(d, org->name, "github.events", DOCTOR_SKIP, NULL, "no automation of "
		    "the org has a github trigger");
	else if (missing.len > 0)
		doctor_say(d, org->name, "github.events", DOCTOR_FAIL, "in the App's settings, "
		    "Permissions & events, Subscribe to events: tick them", "the App is not "
		    "subscribed to %s, which automations listen to", buf_cstr(&missing));
	else
		doctor_say(d, org->name, "github.events", DOCTOR_PASS, NULL, "the App sends "
		    "every event the automations listen to (%zu)", json_array_size(events));
	buf_free(&missing);
	json_decref(events);
	doctor_answer_clear(&a);

	doctor_github_get(d, org, auth, "/app/installations?per_page=100", "GET", &a);
	if (a.status != 200 || !json_is_array(a.json)) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "github.installation", DOCTOR_FAIL, "see that GitHub "
		    "answers the API (api_url)", "cannot list the App's installations (%s)", why);
		free(why);
	} else if (json_array_size(a.json) == 0) {
		doctor_say(d, org->name, "github.installation", DOCTOR_FAIL, "install the App "
		    "(its public page, Install, choose the repositories)", "App %lld is "
		    "installed nowhere", org->github->app_id);
	} else {
		reached = json_object();
		json_array_foreach(a.json, i, inst)
			doctor_github_installation(d, org, inst, auth, reached);
		repos = doctor_github_repos(d, org->name);
		buf_init(&missing, 0);
		json_object_foreach(repos, repo, v) {
			if (json_object_get(reached, repo) == NULL)
				buf_addf(&missing, "%s%s (%s)", missing.len > 0 ? ", " : "", repo,
				    json_string_value(v));
		}
		if (json_object_size(repos) == 0)
			doctor_say(d, org->name, "github.repositories", DOCTOR_SKIP, NULL, "no "
			    "automation names a repository without a glob");
		else if (missing.len > 0)
			doctor_say(d, org->name, "github.repositories", DOCTOR_FAIL, "add them "
			    "to the installation (the account's Settings, GitHub Apps, Configure, "
			    "Repository access)", "the App cannot reach %s", buf_cstr(&missing));
		else
			doctor_say(d, org->name, "github.repositories", DOCTOR_PASS, NULL, "the App "
			    "reaches every repository the automations name (%zu)",
			    json_object_size(repos));
		buf_free(&missing);
		json_decref(repos);
		json_decref(reached);
	}
	doctor_answer_clear(&a);
	freezero_str(auth);
}

static void
doctor_github_token(struct doctor *d, const struct org *org)
{
	struct doctor_answer	 a;
	struct http_response	 r;
	const char		*login;
	char			*auth, *why, *scopes;

	auth = xprintf("Authorization: Bearer %s", org->github->token->value);
	doctor_github_get(d, org, auth, "/user", "GET", &a);
	freezero_str(auth);
	if (a.status != 200) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "github.token", DOCTOR_FAIL, a.status == 401 ?
		    "the token is revoked, expired or mistyped: make a new one (or use a GitHub "
		    "App: app_id and private_key) and update its secret" :
		    "see that api_url is GitHub's API (https://api.github.com, or GHES's /api/v3)",
		    "GitHub refused the token (%s)", why);
		free(why);
		doctor_answer_clear(&a);
		return;
	}
	login = json_string_value(json_object_get(a.json, "login"));
	memset(&r, 0, sizeof r);
	r.head = a.head;
	/* A classic token says its scopes; a fine-grained one does not (its permissions are per repository). */
	scopes = http_response_header(&r, "x-oauth-scopes");
	if (scopes != NULL && !doctor_list_has(scopes, "repo"))
		doctor_say(d, org->name, "github.token", DOCTOR_FAIL, "give the token the repo "
		    "scope (or use a fine-grained token with Contents, Pull requests and Issues "
		    "read and write)", "the token of %s has scopes \"%s\", without repo",
		    login != NULL ? login : "?", scopes);
	else
		doctor_say(d, org->name, "github.token", DOCTOR_PASS, NULL, "the token is %s's%s%s",
		    login != NULL ? login : "?", scopes != NULL ? ", scopes " : "",
		    scopes != NULL ? scopes : "");
	free(scopes);
	doctor_answer_clear(&a);
}

static void
doctor_github(struct doctor *d, const struct org *org)
{
	if (org->github == NULL) {
		doctor_say(d, org->name, "github", DOCTOR_SKIP, NULL, "not configured");
		return;
	}
	if (org->github->app_id != 0 && org->github->private_key != NULL)
		doctor_github_app(d, org);
	else if (org->github->token != NULL)
		doctor_github_token(d, org);
	else
		doctor_say(d, org->name, "github", DOCTOR_FAIL, "set token, or app_id and "
		    "private_key (a GitHub App)", "neither a token nor a GitHub App: nothing "
		    "can be cloned or reported");
}

/* --- model keys ---------------------------------------------------------------- */

static void
doctor_models(struct doctor *d, const struct org *org)
{
	struct doctor_answer	 a;
	const char		*upstream, *models, *h[3];
	char			*url, *auth, *why, check[64];
	size_t			 i;
	int			 bearer;

	for (i = 0; i < org->nagents; i++) {
		snprintf(check, sizeof check, "model.%s", org->agents[i].name);
		if (egress_model_api(d->conf, org->agents[i].name, &upstream, &models,
		    &bearer) != 0) {
			doctor_say(d, org->name, check, DOCTOR_SKIP, NULL, "no model API for this "
			    "agent");
			continue;
		}
		url = xprintf("%.*s%s", (int)(strlen(upstream) - (upstream[0] != '\0' &&
		    upstream[strlen(upstream) - 1] == '/')), upstream, models);
		auth = bearer ? xprintf("Authorization: Bearer %s", org->agents[i].secret->value) :
		    xprintf("x-api-key: %s", org->agents[i].secret->value);
		h[0] = auth;
		h[1] = "anthropic-version: 2023-06-01";
		h[2] = NULL;
		doctor_http(d, "GET", url, h, NULL, &a);
		freezero_str(auth);
		if (a.status == 200 || a.status == 429)
			doctor_say(d, org->name, check, DOCTOR_PASS, NULL, "%s accepts the key%s",
			    url, a.status == 429 ? " (rate limited now)" : "");
		else {
			why = doctor_why(&a);
			doctor_say(d, org->name, check, DOCTOR_FAIL, a.status == 401 ||
			    a.status == 403 ? "the key is revoked or mistyped: make a new one in "
			    "the vendor's console and update orgs.NAME.agents.AGENT.api_key's secret" :
			    "see that agents.AGENT.api_url is the model API's base",
			    "%s refused the key (%s)", url, why);
			free(why);
		}
		doctor_answer_clear(&a);
		free(url);
	}
}

/* --- the host ------------------------------------------------------------------ */

/* The first line of a /proc file as a number; -1 when it is not there. */
static long long
doctor_proc_num(const char *path)
{
	FILE		*f = fopen(path, "r");
	long long	 v = -1;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}


/*
 * Who the engine runs as (SPEC 8, Privilege): started as root with user:
 * set, it forks a root helper and drops to that user; without it, the engine
 * that reads the network stays root; not root, there is no helper and every
 * session runs as spur's own uid.
 */
static void
doctor_engine_user(struct doctor *d)
{
	struct passwd	*pw;

	if (geteuid() != 0)
		doctor_say(d, NULL, "engine.user", DOCTOR_SKIP, NULL, "spur is not root: no "
		    "root helper, and every session runs as uid %ld, spur's own: sessions are "
		    "not kept apart from each other or from the engine's files",
		    (long)geteuid());
	else if (d->conf->user == NULL)
		doctor_say(d, NULL, "engine.user", DOCTOR_SKIP, NULL, "WARNING: user: is not "
		    "set: the engine, which reads the network, runs as root (set user: spur, "
		    "docs/configuration.md)");
	else if ((pw = getpwnam(d->conf->user)) == NULL)
		doctor_say(d, NULL, "engine.user", DOCTOR_FAIL, "useradd --system "
		    "--no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin USER "
		    "(the Debian package makes spur)", "no user %s (user:): spur serve will "
		    "not start", d->conf->user);
	else if (pw->pw_uid == 0)
		doctor_say(d, NULL, "engine.user", DOCTOR_FAIL, "name an unprivileged user",
		    "user: %s is root", d->conf->user);
	else
		doctor_say(d, NULL, "engine.user", DOCTOR_PASS, NULL, "the engine runs as %s "
		    "(uid %ld), a root helper starts the sandboxes", d->conf->user,
		    (long)pw->pw_uid);
}

static void
doctor_sandbox(struct doctor *d)
{
	const struct passwd	*pw;
	char			*cause = NULL, *path;
	long long		 v;

	if (d->conf->sandbox.backend == SANDBOX_NONE) {
		doctor_say(d, NULL, "sandbox", DOCTOR_SKIP, NULL, "sandbox.backend is none: "
		    "runs are not isolated (development only)");
		return;
	}
	if ((v = doctor_proc_num("/proc/sys/user/max_user_namespaces")) == 0)
		doctor_say(d, NULL, "sandbox.userns", DOCTOR_FAIL, "sysctl -w user."
		    "max_user_namespaces=15000, and the same in /etc/sysctl.d/", "user "
		    "namespaces are off (user.max_user_namespaces is 0)");
	else if (doctor_proc_num("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		doctor_say(d, NULL, "sandbox.userns", DOCTOR_FAIL, "sysctl -w kernel."
		    "unprivileged_userns_clone=1, and the same in /etc/sysctl.d/", "unprivileged "
		    "user namespaces are off (kernel.unprivileged_userns_clone is 0)");
	else if (doctor_proc_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
		doctor_say(d, NULL, "sandbox.userns", DOCTOR_FAIL, "give bwrap an AppArmor "
		    "profile that allows userns (docs/install.md), or sysctl -w kernel."
		    "apparmor_restrict_unprivileged_userns=0", "AppArmor restricts unprivileged "
		    "user namespaces");
	else
		doctor_say(d, NULL, "sandbox.userns", DOCTOR_PASS, NULL, "user namespaces are "
		    "on (at most %lld)", v);
	if (geteuid() != 0)
		doctor_say(d, NULL, "sandbox.user", DOCTOR_SKIP, NULL, "spur is not root: "
		    "sandboxes run as its own user (uid %ld)", (long)geteuid());
	else if ((pw = getpwnam(d->conf->sandbox.user)) == NULL)
		doctor_say(d, NULL, "sandbox.user", DOCTOR_FAIL, "useradd --system "
		    "--no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin USER "
		    "(the Debian package makes spur-run)", "no user %s (sandbox.user)",
		    d->conf->sandbox.user);
	else if (pw->pw_uid == 0)
		doctor_say(d, NULL, "sandbox.user", DOCTOR_FAIL, "name an unprivileged user",
		    "sandbox.user %s is root", d->conf->sandbox.user);
	else
		doctor_say(d, NULL, "sandbox.user", DOCTOR_PASS, NULL, "%s (uid %ld)",
		    d->conf->sandbox.user, (long)pw->pw_uid);
	doctor_engine_user(d);
	/* Every run with a network (any model agent, network.allow) starts under it. */
	if ((path = egress_forwarder(&cause)) == NULL) {
		doctor_say(d, NULL, "sandbox.forwarder", DOCTOR_FAIL, "install spur whole: "
		    "make install (or the Debian package) puts spur-forward in "
		    SPUR_PKGLIBEXECDIR, "runs with a network cannot start: %s", cause);
		free(cause);
		cause = NULL;
	} else {
		doctor_say(d, NULL, "sandbox.forwarder", DOCTOR_PASS, NULL, "%s", path);
		free(path);
	}
#ifdef HAVE_SECCOMP
	{
		int fd = seccomp_filter_fd(&cause);

		if (fd == -1) {
			doctor_say(d, NULL, "sandbox.seccomp", DOCTOR_FAIL, "see that the kernel "
			    "has seccomp (CONFIG_SECCOMP_FILTER)", "%s", cause);
			free(cause);
			cause = NULL;
		} else {
			close(fd);
			doctor_say(d, NULL, "sandbox.seccomp", DOCTOR_PASS, NULL, "the syscall "
			    "filter builds");
		}
	}
#else
	doctor_say(d, NULL, "sandbox.seccomp", DOCTOR_SKIP, NULL, "spur was built without "
	    "libseccomp: sandboxes have no syscall filter (install libseccomp-dev, rebuild)");
#endif
	if (sandbox_available(d->conf->sandbox.user, &cause) != 0) {
		doctor_say(d, NULL, "sandbox.start", DOCTOR_FAIL, "install bubblewrap; see the "
		    "checks above", "a sandbox cannot start: %s", cause);
		free(cause);
	} else
		doctor_say(d, NULL, "sandbox.start", DOCTOR_PASS, NULL, "a bubblewrap sandbox "
		    "started and exited");
}

static void
doctor_disk(struct doctor *d)
{
	struct statvfs	 sv;
	char		*dir = xstrdup(d->conf->data_dir), *slash;
	unsigned long long free_b, total;

	/* Before the first start data_dir may not exist: its nearest parent's disk. */
	while (statvfs(dir, &sv) != 0) {
		if (errno != ENOENT || (slash = strrchr(dir, '/')) == NULL || slash == dir) {
			doctor_say(d, NULL, "disk", DOCTOR_FAIL, "see that data_dir can be made",
			    "%s: %s", d->conf->data_dir, strerror(errno));
			free(dir);
			return;
		}
		*slash = '\0';
	}
	free_b = (unsigned long long)sv.f_bavail * sv.f_frsize;
	total = (unsigned long long)sv.f_blocks * sv.f_frsize;
	if (free_b < d->min_free)
		doctor_say(d, NULL, "disk", DOCTOR_FAIL, "free space or move data_dir; "
		    "retention.run_files and sandbox.cache_size bound what spur keeps",
		    "%s has %llu MiB free of %llu MiB, under %llu MiB", d->conf->data_dir,
		    free_b >> 20, total >> 20, d->min_free >> 20);
	else if (sv.f_files > 0 && sv.f_favail < sv.f_files / 100)
		doctor_say(d, NULL, "disk", DOCTOR_FAIL, "free inodes (old workspaces and "
		    "caches hold many files)", "%s has %llu of %llu inodes free",
		    d->conf->data_dir, (unsigned long long)sv.f_favail,
		    (unsigned long long)sv.f_files);
	else
		doctor_say(d, NULL, "disk", DOCTOR_PASS, NULL, "%s: %llu MiB free of %llu MiB",
		    d->conf->data_dir, free_b >> 20, total >> 20);
	free(dir);
}

static void
doctor_clock(struct doctor *d)
{
	const struct source	*src;
	struct buf		 fix;
	long long		 skew;
	size_t			 n = 0, k = 0;

	if (d->server_date == 0) {
		doctor_say(d, NULL, "clock", DOCTOR_SKIP, NULL, "no API answered with a Date to "
		    "compare with");
		return;
	}
	/* Date has whole seconds: the skew is known to a second. */
	skew = d->server_date_at - d->server_date;
	if (skew > DOCTOR_SKEW_MAX || skew < -DOCTOR_SKEW_MAX) {
		/* The systems whose signatures carry a time (source.h window_ms). */
		for (src = source_next(NULL); src != NULL; src = source_next(src))
			n += src->window_ms != 0;
		buf_init(&fix, 0);
		buf_adds(&fix, "run NTP (timedatectl set-ntp true, or chrony): GitHub refuses "
		    "App JWTs and spur refuses ");
		for (src = source_next(NULL); src != NULL; src = source_next(src)) {
			if (src->window_ms == 0)
				continue;
			buf_addf(&fix, "%s%s", k == 0 ? "" : k + 1 == n ? " and " : ", ",
			    src->title);
			k++;
		}
		buf_adds(&fix, " signatures when the clock is off");
		doctor_say(d, NULL, "clock", DOCTOR_FAIL, buf_cstr(&fix), "%lld s %s %s's Date",
		    skew < 0 ? -skew : skew, skew < 0 ? "behind" : "ahead of",
		    d->server_date_from);
		buf_free(&fix);
	} else
		doctor_say(d, NULL, "clock", DOCTOR_PASS, NULL, "within %d s of %s's Date "
		    "(%+lld s)", DOCTOR_SKEW_MAX, d->server_date_from, skew);
}

/* Whether model has a price for agent (NULL: any agent of the config), its own or built in. */
static int
doctor_priced(const struct config *cf, const char *agent, const char *model)
{
	const struct agent_conf	*ac;
	size_t			 i;

	if (agent != NULL) {
		ac = config_agent(cf, agent);
		return budget_price(ac != NULL ? ac->prices : NULL, ac != NULL ? ac->nprices : 0,
		    model) != NULL;
	}
	if (budget_price(NULL, 0, model) != NULL)
		return 1;
	for (i = 0; i < cf->nagents; i++) {
		if (budget_price(cf->agents[i].prices, cf->agents[i].nprices, model) != NULL)
			return 1;
	}
	return 0;
}

static void
doctor_unpriced_add(json_t *list, const char *model)
{
	size_t	 i;
	json_t	*v;

	json_array_foreach(list, i, v) {
		if (strcmp(json_string_value(v), model) == 0)
			return;
	}
	json_array_append_new(list, json_string(model));
}

/*
 * The models an org's automations name or its runs used (the store's usage)
 * that have no price: they cost $0 and, under a budget in money, are refused.
 */
static void
doctor_prices(struct doctor *d, const struct org *org)
{
	const struct automation	*a;
	json_t			*unpriced = json_array(), *rows, *r;
	const char		*m, *an;
	char			*names;
	size_t			 i;
	int			 money = org->budget_usd_per_day > 0 || org->budget_usd_per_month > 0;

	for (i = 0; i < automation_count(d->set); i++) {
		a = automation_get(d->set, i);
		if (a->org == NULL || strcmp(a->org, org->name) != 0 || !agent_has_model(a->agent))
			continue;
		money |= a->budget_usd > 0;
		if (a->model != NULL && !doctor_priced(d->conf, a->agent_name, a->model))
			doctor_unpriced_add(unpriced, a->model);
	}
	rows = d->store != NULL ? store_usage_by_model(d->store) : json_array();
	json_array_foreach(rows, i, r) {
		if ((m = json_string_value(json_object_get(r, "model"))) == NULL ||
		    strcmp(json_string_value(json_object_get(r, "org")), org->name) != 0)
			continue;
		an = json_string_value(json_object_get(r, "automation"));
		a = an != NULL ? automation_find(d->set, org->name, an) : NULL;
		if (!doctor_priced(d->conf, a != NULL ? a->agent_name : NULL, m))
			doctor_unpriced_add(unpriced, m);
	}
	json_decref(rows);
	if (json_array_size(unpriced) == 0)
		doctor_say(d, org->name, "prices", DOCTOR_PASS, NULL, "every model in use has a "
		    "price");
	else {
		names = json_dumps(unpriced, JSON_COMPACT);
		doctor_say(d, org->name, "prices", money ? DOCTOR_FAIL : DOCTOR_PASS,
		    "add them to agents.AGENT.prices", "models in use without a price "
		    "(they cost $0%s): %s", money ? "; under the org's budgets in money "
		    "their requests are refused" : "", names);
		free(names);
	}
	json_decref(unpriced);
}

/* doctor_uses: whether an automation of org has a trigger of src (of that event, when given). */
static int
doctor_automations_use(const struct doctor *d, const char *org, const char *src,
    const char *event)
{
	const struct automation	*a;
	size_t			 i, t, k, n;

	for (i = 0; i < automation_count(d->set); i++) {
		a = automation_get(d->set, i);
		if (strcmp(a->org, org) != 0)
			continue;
		for (t = 0; t < a->ntriggers; t++) {
			if (strcmp(trigger_source_name(&a->triggers[t]), src) != 0)
				continue;
			if (event == NULL)
				return 1;
			for (k = 0; k < a->triggers[t].nevents; k++) {
				n = strcspn(a->triggers[t].events[k], ".");
				if (strlen(event) == n &&
				    strncmp(a->triggers[t].events[k], event, n) == 0)
					return 1;
			}
		}
	}
	return 0;
}

/* doctor_looks_up: whether an automation of org on src asks who its actors are (groups: by group). */
static int
doctor_automations_look_up(const struct doctor *d, const char *org, const char *src,
    int groups)
{
	const struct automation	*a;
	size_t			 i, t;

	for (i = 0; i < automation_count(d->set); i++) {
		a = automation_get(d->set, i);
		if (strcmp(a->org, org) != 0 || a->authors_any)
			continue;
		for (t = 0; t < a->ntriggers; t++)
			if (strcmp(trigger_source_name(&a->triggers[t]), src) == 0 &&
			    (groups ? a->author_groups != NULL :
			    !a->authors_listed || a->author_groups != NULL))
				return 1;
	}
	return 0;
}

int
cmd_doctor(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "min-free", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 }
	};
	struct doctor	 d;
	const struct source *src;
	const char	*path = NULL, *only = NULL;
	char		*cause;
	size_t		 i;
	int		 ch, found = 0;

	memset(&d, 0, sizeof d);
	d.uses = doctor_automations_use;
	d.looks_up = doctor_automations_look_up;
	d.min_free = 1ULL << 30;
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'o':
			only = optarg;
			break;
		case 'j':
			d.json = 1;
			break;
		case 'm':
			if (parse_size(optarg, &d.min_free, &cause) != 0) {
				fprintf(stderr, "spur: --min-free: %s\n", cause);
				free(cause);
				return EXIT_USAGE;
			}
			break;
		default:
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if (path == NULL)
		path = config_default_path();
	if (cmd_load(path, 0, &d.conf, &d.set) != 0)
		return EXIT_FAILED;
	for (i = 0; only != NULL && i < d.conf->norgs; i++)
		found |= strcmp(d.conf->orgs[i].name, only) == 0;
	if (only != NULL && !found) {
		fprintf(stderr, "spur: no org \"%s\" in %s\n", only, path);
		automation_set_unref(d.set);
		config_free(d.conf);
		return EXIT_FAILED;
	}
	d.checks = json_array();
	/* Read-only, and only when it exists: the models runs used. */
	store_set_prepare(d.conf->store_prepare);
	d.store = store_open_url(d.conf->store_url, d.conf->data_dir, 1, &cause);
	if (d.store == NULL)
		free(cause);
	if ((d.base = event_base_new()) == NULL)
		fatal("event_base_new");
	d.http = httpc_create(d.base);
	for (i = 0; i < d.conf->norgs; i++) {
		if (only != NULL && strcmp(d.conf->orgs[i].name, only) != 0)
			continue;
		doctor_github(&d, &d.conf->orgs[i]);
		for (src = source_next(NULL); src != NULL; src = source_next(src))
			if (src->doctor != NULL)
				src->doctor(&d, &d.conf->orgs[i]);
		doctor_models(&d, &d.conf->orgs[i]);
		doctor_prices(&d, &d.conf->orgs[i]);
	}
	doctor_sandbox(&d);
	doctor_disk(&d);
	doctor_clock(&d);
	if (d.json)
		cmd_print_json(d.checks);
	else
		printf("doctor: %d passed, %d failed, %d skipped\n", d.counts[DOCTOR_PASS],
		    d.counts[DOCTOR_FAIL], d.counts[DOCTOR_SKIP]);
	httpc_free(d.http);
	event_base_free(d.base);
	json_decref(d.checks);
	store_close(d.store);
	free(d.server_date_from);
	automation_set_unref(d.set);
	config_free(d.conf);
	return d.counts[DOCTOR_FAIL] == 0 ? EXIT_OK : EXIT_FAILED;
}
