/* cmd-check.c: `spur check` and `spur fire`: the configuration and automations, without the engine. */
#include "spur.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "event.h"
#include "fire.h"
#include "prompt.h"
#include "repo.h"
#include "schedule.h"
#include "cron.h"
#include "ytree.h"
#include "source.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIRE_MAX_HEADERS	64
#define FIRE_MAX_BODY		(25 << 20)

/*
 * One problem as JSON: {file, line, col, message}, read back from the loader's
 * "FILE:LINE:COL: error: MESSAGE" (the first ": error: " or ": warning: " after
 * a ":LINE:COL"; a file name holding that is no file anyone makes).
 */
static json_t *
check_problem(const char *msg, int warning)
{
	const char	*tag = warning ? ": warning: " : ": error: ", *at, *p;
	char		*file;
	long		 line, col;
	json_t		*j;

	for (at = strstr(msg, tag); at != NULL; at = strstr(at + 1, tag)) {
		for (p = at; p > msg && isdigit((unsigned char)p[-1]); p--)
			;
		if (p == at || p == msg || p[-1] != ':')
			continue;
		col = strtol(p, NULL, 10);
		for (p--; p > msg && isdigit((unsigned char)p[-1]); p--)
			;
		if (p[0] == ':' || p == msg || p[-1] != ':')
			continue;
		line = strtol(p, NULL, 10);
		file = xstrndup(msg, (size_t)(p - 1 - msg));
		j = json_pack("{s:s,s:i,s:i,s:s}", "file", file, "line", (json_int_t)line,
		    "col", (json_int_t)col, "message", at + strlen(tag));
		free(file);
		return j;
	}
	return json_pack("{s:n,s:n,s:n,s:s}", "file", "line", "col", "message", msg);
}

/* --json: {config, ok, orgs, automations, errors: [...], warnings: [...]}, exit as without. */
static int
check_json(const char *path, int flags)
{
	struct config		*conf = NULL;
	struct automation_set	*set = NULL;
	struct yerrs		 errs;
	json_t			*out, *errors = json_array(), *warnings = json_array();
	size_t			 i;
	int			 rc;

	yerrs_init(&errs);
	rc = cmd_load_errs(path, flags, &conf, &set, &errs);
	for (i = 0; i < errs.n; i++)
		json_array_append_new(errs.warning[i] ? warnings : errors,
		    check_problem(errs.msgs[i], errs.warning[i]));
	out = json_pack("{s:s,s:b,s:o,s:o,s:o,s:o}", "config", path, "ok", rc == 0,
	    "orgs", rc == 0 ? json_integer((json_int_t)conf->norgs) : json_null(),
	    "automations", rc == 0 ? json_integer((json_int_t)automation_count(set)) :
	    json_null(), "errors", errors, "warnings", warnings);
	cmd_print_json(out);
	json_decref(out);
	yerrs_free(&errs);
	if (rc == 0) {
		automation_set_unref(set);
		config_free(conf);
	}
	return rc == 0 ? EXIT_OK : EXIT_FAILED;
}

int
cmd_check(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "offline", no_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct config		*conf;
	struct automation_set	*set;
	const char		*path = NULL;
	int			 ch, flags = CONFIG_HOST, json = 0;

	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'o':
			/* Away from the production host (CI, a laptop): neither its secrets nor its users. */
			flags = CONFIG_UNRESOLVED;
			break;
		case 'j':
			json = 1;
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
	if (json)
		return check_json(path, flags);
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


/* Prints a dry run's event, the automations it matches with their exact prompts, and (--why) the others. */
static int
fire_report(json_t *out, int why, int only_prompt, int json)
{
	json_t	*list = json_object_get(out, "matches"), *m;
	char	*safe;
	size_t	 i;

	if (!why)
		json_object_set_new(out, "not_matched", json_array());
	if (only_prompt) {
		json_array_foreach(list, i, m) {
			safe = term_safe(json_string_value(json_object_get(m, "prompt")),
			    TERM_KEEP_NL | TERM_KEEP_TAB);
			fputs(safe, stdout);
			free(safe);
		}
	} else if (json)
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
		if (json_string_value(json_object_get(out, "assumed")) != NULL)
			printf("\nnote: %s\n", json_string_value(json_object_get(out, "assumed")));
		if (json_array_size(list) == 0)
			printf("\nno automation matches\n");
		json_array_foreach(list, i, m) {
			printf("\nmatch: %s (%s)\n", json_string_value(json_object_get(m,
			    "automation")), json_string_value(json_object_get(m, "file")));
			if (json_string_value(json_object_get(m, "repository")) != NULL)
				printf("repository: %s\n", json_string_value(json_object_get(m,
				    "repository")));
			else if (json_object_get(m, "repository_error") != NULL)
				printf("repository: none: %s\n", json_string_value(
				    json_object_get(m, "repository_error")));
			printf("--- prompt ---\n%s\n--- end of prompt ---\n",
			    json_string_value(json_object_get(m, "prompt")));
		}
		json_array_foreach(json_object_get(out, "not_matched"), i, m) {
			printf("\nno match: %s: %s\n",
			    json_string_value(json_object_get(m, "automation")),
			    json_string_value(json_object_get(m, "why")));
		}
	}
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
	json_t				*out;
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
		out = fire_event(set, org, ev);
		rc = fire_report(out, why, only_prompt, json);
		json_decref(out);
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
	json_t			*out = NULL;
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
	switch (fire_payload(conf, set, org, hook, evname, headers, nh, body, len, &out,
	    &cause)) {
	case 0:
		rc = fire_report(out, why, only_prompt, json);
		break;
	case 1:
		/* The source answers it itself (a challenge); it may quote the payload. */
		safe = term_safe(json_string_value(json_object_get(out, "reply")), TERM_KEEP_NL);
		printf("%s\n", safe);
		free(safe);
		rc = EXIT_OK;
		break;
	default:
		safe = term_safe(cause, 0);
		fprintf(stderr, "spur fire: %s\n", safe);
		free(safe);
		free(cause);
		break;
	}
	json_decref(out);
out:
	free(body);
	if (set != NULL)
		automation_set_unref(set);
	config_free(conf);
	return rc;
}
