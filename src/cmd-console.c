/* cmd-console.c: `spur console-link`: a one-time sign-in link to the console (SPEC section 14). */
#include "spur.h"
#include "cmd.h"
#include "conf.h"
#include "console.h"
#include "store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
cmd_console_link(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "next", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*config = NULL, *org = NULL, *next = NULL;
	struct config	*conf;
	struct store	*st;
	char		*token;
	int		 ch, rc = EXIT_OK;

	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': config = optarg; break;
		case 'o': org = optarg; break;
		case 'n': next = optarg; break;
		default:
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	}
	if (optind != argc || org == NULL || (next != NULL && (next[0] != '/' ||
	    next[1] == '/' || strspn(next, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789/_-.") != strlen(next)))) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(config != NULL ? config : config_default_path(), &conf)) == NULL)
		return EXIT_FAILED;
	if (config_org(conf, org) == NULL) {
		fprintf(stderr, "spur console-link: no org \"%s\" in the config\n", org);
		rc = EXIT_FAILED;
	} else if ((token = console_link_make(st, org, now_ms())) == NULL) {
		fprintf(stderr, "spur console-link: cannot store the link\n");
		rc = EXIT_FAILED;
	} else {
		printf("%s/console/link/%s%s%s\n", conf->public_url, token, next != NULL ?
		    "?next=" : "", next != NULL ? next : "");
		fprintf(stderr, "spur console-link: signs one browser in to org %s; good for 10 "
		    "minutes, once\n", org);
		explicit_bzero(token, strlen(token));
		free(token);
	}
	store_close(st);
	config_free(conf);
	return rc;
}
