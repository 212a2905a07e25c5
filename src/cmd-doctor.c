/* cmd-doctor.c: `spur doctor`: what `spur check` cannot see: the credentials as the APIs take them, the host's sandboxes, disk and clock. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "budget.h"
#include "cmd.h"
#include "conf.h"
#include "doctor.h"
#include "egress.h"
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
		    "not kept apart from each other or from the engine's files (its store, "
		    "config and secrets are the sandboxes' to read), and what a dead engine "
		    "left is looked for among that uid's processes only (start it as root with "
		    "user: spur for a uid per session)", (long)geteuid());
	else if (d->conf->user == NULL)
		doctor_say(d, NULL, "engine.user", DOCTOR_SKIP, NULL, "WARNING: user: is not "
		    "set: the engine, which reads the network and what agents write, runs as "
		    "root, so a bug in any of it is root on the host (set user: spur: a root "
		    "helper keeps only what needs root, docs/configuration.md)");
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
		    "(uid %ld); a root helper starts the sandboxes and git as session uids "
		    "and works on what they wrote", d->conf->user, (long)pw->pw_uid);
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
		buf_adds(&fix, "run NTP (timedatectl set-ntp true, or chrony): ");
		for (src = source_next(NULL); src != NULL; src = source_next(src))
			if (src->clock_why != NULL)
				buf_addf(&fix, "%s and ", src->clock_why);
		buf_adds(&fix, "spur refuses ");
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
/* The events of src org's automations listen to, each once, into out (a JSON array). */
static json_t *
doctor_automations_events(const struct doctor *d, const char *org, const char *src)
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
			if (strcmp(trigger_source_name(tr), src) != 0)
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

/*
 * The fixed repositories (no glob) org's automations name, report to on src
 * or have src triggers for: they must be reachable.
 */
static json_t *
doctor_automations_repos(const struct doctor *d, const char *org, const char *src)
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
		/* A report destination in a repository needs a token there too. */
		json_array_foreach(a->report_to, k, dest) {
			if (strcmp(json_string_value(json_object_get(dest, "source")) ?: "",
			    src) == 0 && json_string_value(json_object_get(dest,
			    "repository")) != NULL)
				json_object_set_new(out, json_string_value(json_object_get(dest,
				    "repository")), json_sprintf("%s's report", a->name));
		}
		for (t = 0; t < a->ntriggers; t++) {
			tr = &a->triggers[t];
			if (strcmp(trigger_source_name(tr), src) != 0)
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
	d.events = doctor_automations_events;
	d.repos = doctor_automations_repos;
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
