/* cmd-check.c: `spur check` and `spur fire`: the configuration and automations, without the engine. */
#include "spur.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "event.h"
#include "prompt.h"
#include "repo.h"
#include "schedule.h"
#include "cron.h"
#include "source.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIRE_MAX_HEADERS	64
#define FIRE_MAX_BODY		(25 << 20)
#define FIRE_MAX_MATCHES	256

int
cmd_check(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "offline", no_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 }
	};
	struct config		*conf;
	struct automation_set	*set;
	const char		*path = NULL;
	int			 ch, flags = CONFIG_HOST;

	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'o':
			/* Away from the production host (CI, a laptop): neither its secrets nor its users. */
			flags = CONFIG_UNRESOLVED;
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
	if (cmd_load(path, flags, &conf, &set) != 0)
		return EXIT_FAILED;
	printf("%s: ok (%zu org%s, %zu automation%s)\n", path, conf->norgs,
	    conf->norgs == 1 ? "" : "s", automation_count(set),
	    automation_count(set) == 1 ? "" : "s");
	automation_set_unref(set);
	config_free(conf);
	return EXIT_OK;
}

/* "Name: value" into a header; the strings point into arg, which is modified. */
static int
fire_header(char *arg, struct header *h)
{
	char	*colon = strchr(arg, ':');

	if (colon == NULL || colon == arg)
		return -1;
	*colon++ = '\0';
	while (*colon == ' ' || *colon == '\t')
		colon++;
	h->name = arg;
	h->value = colon;
	return 0;
}

static int
fire_has_header(const struct header *h, size_t n, const char *name)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strcasecmp(h[i].name, name) == 0)
			return 1;
	}
	return 0;
}

/* Prints the event, the automations it matches with their exact prompts, and (--why) the others. */
static int
fire_report(struct automation_set *set, const char *org, struct spur_event *ev, int why,
    int only_prompt, int json)
{
	const struct automation	*matches[FIRE_MAX_MATCHES];
	json_t			*out, *list, *nomatch, *evj, *m;
	char			*prompt, *safe, *repo, *cause;
	size_t			 n, i, j;

	if (ev->id == NULL)
		ev->id = time_id("evt_");
	n = automation_match(set, ev, matches, FIRE_MAX_MATCHES);
	out = json_object();
	evj = spur_event_to_json(ev);
	json_object_set_new(out, "event", evj);
	list = json_array();
	for (i = 0; i < n; i++) {
		prompt = prompt_build(matches[i]->prompt, ev, NULL);
		if (only_prompt) {
			safe = term_safe(prompt, TERM_KEEP_NL | TERM_KEEP_TAB);
			fputs(safe, stdout);
			free(safe);
		}
		m = json_pack("{s:s,s:s,s:s}", "automation", matches[i]->name, "file",
		    matches[i]->file, "prompt", prompt);
		/* The repository a run would work on, as the engine chooses it. */
		cause = NULL;
		repo_choose(matches[i], evj, &repo, &cause);
		json_object_set_new(m, "repository", repo != NULL ? json_string(repo) :
		    json_null());
		if (cause != NULL)
			json_object_set_new(m, "repository_error", json_string(cause));
		json_array_append_new(list, m);
		free(repo);
		free(cause);
		free(prompt);
	}
	json_object_set_new(out, "matches", list);
	nomatch = json_array();
	if (why) {
		for (i = 0; i < automation_count(set); i++) {
			const struct automation *a = automation_get(set, i);
			char *reason;
			for (j = 0; j < n; j++) {
				if (matches[j] == a)
					break;
			}
			if (j < n || strcmp(a->org, org) != 0)
				continue;
			reason = automation_why(a, ev);
			json_array_append_new(nomatch, json_pack("{s:s,s:s,s:s}", "automation",
			    a->name, "file", a->file, "why", reason != NULL ? reason :
			    "matched"));
			free(reason);
		}
	}
	json_object_set_new(out, "not_matched", nomatch);
	if (only_prompt)
		;
	else if (json)
		cmd_print_json(out);
	else {
		/* jansson escapes C0 controls in JSON, not C1: the payload's are escaped here. */
		char *evs = json_dumps(json_object_get(out, "event"), JSON_INDENT(2));
		safe = term_safe(evs, TERM_KEEP_NL);
		term_json(list, TERM_KEEP_NL | TERM_KEEP_TAB);
		term_json(json_object_get(out, "not_matched"), 0);
		printf("event:\n%s\n", safe);
		free(safe);
		free(evs);
		if (n == 0)
			printf("\nno automation matches\n");
		json_array_foreach(list, i, nomatch) {
			printf("\nmatch: %s (%s)\n", json_string_value(json_object_get(nomatch,
			    "automation")), json_string_value(json_object_get(nomatch, "file")));
			if (json_string_value(json_object_get(nomatch, "repository")) != NULL)
				printf("repository: %s\n", json_string_value(json_object_get(nomatch,
				    "repository")));
			else if (json_object_get(nomatch, "repository_error") != NULL)
				printf("repository: none: %s\n", json_string_value(
				    json_object_get(nomatch, "repository_error")));
			printf("--- prompt ---\n%s\n--- end of prompt ---\n",
			    json_string_value(json_object_get(nomatch, "prompt")));
		}
		json_array_foreach(json_object_get(out, "not_matched"), i, nomatch) {
			printf("\nno match: %s: %s\n",
			    json_string_value(json_object_get(nomatch, "automation")),
			    json_string_value(json_object_get(nomatch, "why")));
		}
	}
	json_decref(out);
	return EXIT_OK;
}

/* spur fire --source schedule --event AUTOMATION: the event of its next fire time. */
static int
fire_schedule(const struct cmd *c, const char *path, const char *org, const char *name,
    int why, int only_prompt, int json)
{
	struct config			*conf = NULL;
	struct automation_set		*set = NULL;
	const struct schedule_def	**defs;
	struct spur_event		*ev = NULL;
	size_t				 n, i;
	int64_t				 t;
	int				 rc = EXIT_FAILED;

	if (name == NULL) {
		fprintf(stderr, "spur fire: --source schedule needs --event AUTOMATION\n");
		return EXIT_USAGE;
	}
	if (cmd_load(path != NULL ? path : config_default_path(), CONFIG_UNRESOLVED, &conf,
	    &set) != 0)
		return EXIT_FAILED;
	n = automation_schedules(set, &defs);
	for (i = 0; i < n; i++) {
		if (strcmp(defs[i]->org, org) == 0 && strcmp(defs[i]->automation, name) == 0)
			break;
	}
	if (i == n)
		fprintf(stderr, "spur fire: org %s has no schedule in an automation \"%s\"\n", org,
		    name);
	else if ((t = cron_next(defs[i]->parsed, now_ms() / 1000)) == -1)
		fprintf(stderr, "spur fire: the schedule of %s never fires\n", name);
	else {
		ev = schedule_event(defs[i], t);
		rc = fire_report(set, org, ev, why, only_prompt, json);
		spur_event_free(ev);
	}
	automation_set_unref(set);
	config_free(conf);
	return rc;
}

int
cmd_fire(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "source", required_argument, NULL, 's' },
		{ "event", required_argument, NULL, 'e' },
		{ "header", required_argument, NULL, 'H' },
		{ "why", no_argument, NULL, 'w' },
		{ "prompt", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct config		*conf = NULL;
	struct automation_set	*set = NULL;
	struct header		 headers[FIRE_MAX_HEADERS];
	struct source_req	 sr;
	struct source_result	 res;
	const struct source	*src;
	const char		*path = NULL, *org = NULL, *source = NULL, *evname = NULL;
	const char		*hook;
	char			*body = NULL, *cause = NULL, *safe;
	size_t			 nh = 0, len;
	int			 ch, why = 0, only_prompt = 0, json = 0, rc = EXIT_FAILED;

	while ((ch = getopt_long(argc, argv, "c:H:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'o': org = optarg; break;
		case 's': source = optarg; break;
		case 'e': evname = optarg; break;
		case 'w': why = 1; break;
		case 'p': only_prompt = 1; break;
		case 'j': json = 1; break;
		case 'H':
			if (nh == FIRE_MAX_HEADERS - 2 || fire_header(optarg, &headers[nh]) != 0) {
				fprintf(stderr, "spur fire: bad header \"%s\" (expected "
				    "'Name: value')\n", optarg);
				return EXIT_USAGE;
			}
			nh++;
			break;
		default:
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	}
	if (org == NULL || source == NULL ||
	    (strcmp(source, "schedule") == 0 ? optind < argc - 1 : optind != argc - 1)) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if (strcmp(source, "schedule") == 0)
		return fire_schedule(c, path, org, evname, why, only_prompt, json);
	if (strcmp(argv[optind], "-") == 0) {
		struct buf b;
		char tmp[8192];
		ssize_t r;
		buf_init(&b, FIRE_MAX_BODY);
		while ((r = read(0, tmp, sizeof tmp)) > 0) {
			if (buf_add(&b, tmp, r) != 0) {
				fprintf(stderr, "spur fire: standard input too large\n");
				buf_free(&b);
				return EXIT_FAILED;
			}
		}
		len = b.len;
		body = buf_take(&b);
	} else if (read_file(argv[optind], FIRE_MAX_BODY, &body, &len, &cause) != 0) {
		fprintf(stderr, "spur fire: %s\n", cause);
		free(cause);
		return EXIT_FAILED;
	}
	/* A dry run verifies no signature: it needs no secret. */
	if (cmd_load(path != NULL ? path : config_default_path(), CONFIG_UNRESOLVED, &conf,
	    &set) != 0)
		goto out;
	if (config_org(conf, org) == NULL) {
		fprintf(stderr, "spur fire: no org \"%s\" in the configuration\n", org);
		goto out;
	}
	/* A generic hook is named either by --source NAME or --source webhook --event NAME. */
	hook = source;
	if (strcmp(source, "webhook") == 0) {
		if (evname == NULL) {
			fprintf(stderr, "spur fire: --source webhook needs --event HOOKNAME\n");
			rc = EXIT_USAGE;
			goto out;
		}
		hook = evname;
	}
	src = source_find(hook);
	if (src == &source_github && evname != NULL &&
	    !fire_has_header(headers, nh, "X-GitHub-Event")) {
		headers[nh].name = "X-GitHub-Event";
		headers[nh++].value = evname;
	}
	if (!fire_has_header(headers, nh, "Content-Type")) {
		headers[nh].name = "Content-Type";
		headers[nh++].value = body[0] == '{' || body[0] == '[' ?
		    "application/json" : "application/x-www-form-urlencoded";
	}
	memset(&sr, 0, sizeof sr);
	memset(&res, 0, sizeof res);
	sr.conf = conf;
	sr.org = config_org(conf, org);
	sr.org_name = org;
	sr.hook = hook;
	sr.headers = headers;
	sr.nheaders = nh;
	sr.body = body;
	sr.len = len;
	sr.now_ms = now_ms();
	sr.no_verify = 1;
	if (src == &source_webhook) {
		sr.webhook = automation_webhook(set, org, hook);
		if (sr.webhook == NULL) {
			fprintf(stderr, "spur fire: no automation of org %s declares the "
			    "webhook \"%s\"\n", org, hook);
			goto out;
		}
	}
	src->handle(&sr, &res);
	if (res.verdict != SOURCE_EVENT) {
		/* Both may quote the payload. */
		if (res.verdict == SOURCE_REPLY) {
			safe = term_safe(res.reply != NULL ? res.reply : "", TERM_KEEP_NL);
			printf("%s\n", safe);
		} else {
			safe = term_safe(res.cause != NULL ? res.cause : "not an event", 0);
			fprintf(stderr, "spur fire: %s\n", safe);
		}
		free(safe);
		rc = res.verdict == SOURCE_REPLY ? EXIT_OK : EXIT_FAILED;
		source_result_free(&res);
		goto out;
	}
	rc = fire_report(set, org, res.event, why, only_prompt, json);
	source_result_free(&res);
out:
	free(body);
	if (set != NULL)
		automation_set_unref(set);
	config_free(conf);
	return rc;
}
