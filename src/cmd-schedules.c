/* cmd-schedules.c: `spur schedules`: every schedule trigger and its next fire times. */
#include "spur.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "cron.h"
#include "schedule.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEDULES_NEXT_MAX	1000

/* One schedule as JSON: {org, automation, cron, timezone, next, next_local}. */
static json_t *
schedules_json(const struct schedule_def *d, int64_t now, int count)
{
	json_t	*next = json_array(), *local = json_array();
	int64_t	 t = now;
	int	 i;
	char	 ts[32], *l;

	for (i = 0; i < count; i++) {
		if ((t = cron_next(d->parsed, t)) == -1)
			break;
		json_array_append_new(next, json_string(schedule_format_utc(t, ts, sizeof ts)));
		l = cron_format_local(d->parsed, t);
		json_array_append_new(local, json_string(l));
		free(l);
	}
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o}", "org", d->org, "automation",
	    d->automation, "cron", d->cron, "timezone", cron_zone_name(d->parsed),
	    "next", next, "next_local", local);
}

int
cmd_schedules(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "next", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const struct schedule_def	**defs;
	struct config			 *conf = NULL;
	struct automation_set		 *set = NULL;
	const char			 *path = NULL, *org = NULL;
	json_t				 *list, *j, *v;
	size_t				  n, i, k;
	long				  count = 3;
	char				 *end;
	int				  ch, json = 0, rc = EXIT_FAILED;

	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'o':
			org = optarg;
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || count < 1 ||
			    count > SCHEDULES_NEXT_MAX) {
				fprintf(stderr, "spur schedules: --next must be a number from 1 "
				    "to %d\n", SCHEDULES_NEXT_MAX);
				return EXIT_USAGE;
			}
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
	if (cmd_load(path != NULL ? path : config_default_path(), CONFIG_UNRESOLVED, &conf,
	    &set) != 0)
		return EXIT_FAILED;
	if (org != NULL && config_org(conf, org) == NULL) {
		fprintf(stderr, "spur schedules: no org \"%s\" in the configuration\n", org);
		goto out;
	}
	list = json_array();
	n = automation_schedules(set, &defs);
	for (i = 0; i < n; i++) {
		if (org == NULL || strcmp(defs[i]->org, org) == 0)
			json_array_append_new(list, schedules_json(defs[i], now_ms() / 1000,
			    (int)count));
	}
	if (json)
		cmd_print_json(list);
	else if (json_array_size(list) == 0)
		printf("no schedules\n");
	else {
		term_json(list, 0);
		printf("%-16s %-24s %-20s %s\n", "ORG", "AUTOMATION", "TIMEZONE", "CRON");
		json_array_foreach(list, i, j) {
			printf("%-16s %-24s %-20s %s\n",
			    json_string_value(json_object_get(j, "org")),
			    json_string_value(json_object_get(j, "automation")),
			    json_string_value(json_object_get(j, "timezone")),
			    json_string_value(json_object_get(j, "cron")));
			if (json_array_size(json_object_get(j, "next")) == 0)
				printf("  never fires\n");
			json_array_foreach(json_object_get(j, "next"), k, v) {
				printf("  %s  %s\n", json_string_value(v), json_string_value(
				    json_array_get(json_object_get(j, "next_local"), k)));
			}
		}
	}
	json_decref(list);
	rc = EXIT_OK;
out:
	if (set != NULL)
		automation_set_unref(set);
	config_free(conf);
	return rc;
}
