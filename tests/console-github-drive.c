/* console-github-drive.c: runs one console sign-in or membership re-check on a loop, for the black-box tests. */
#include "spur.h"
#include "conf.h"
#include "console-github.h"
#include "outbox.h"
#include "serve.h"
#include "store.h"
#include "ytree.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * console-github-drive CONFIG authorize STATE REDIRECT_URI: prints the URL
 * console-github-drive CONFIG signin CODE REDIRECT_URI
 * console-github-drive CONFIG recheck USER
 * The last two print {"user": ..., "orgs": [...], "error": ...} once the
 * callback came. Logs go to stderr.
 */
static void
drive_done_cb(const char *user, json_t *orgs, const char *error, void *arg)
{
	struct engine	*e = arg;
	json_t		*out = json_pack("{s:s?, s:O?, s:s?}", "user", user, "orgs", orgs, "error",
			    error);

	json_dumpf(out, stdout, JSON_COMPACT);
	printf("\n");
	fflush(stdout);
	json_decref(out);
	event_base_loopexit(e->base, NULL);
}

int
main(int argc, char **argv)
{
	struct engine	 e;
	struct yerrs	 errs;
	char		*cause = NULL, *url;
	size_t		 i;

	if (argc != (argc > 2 && strcmp(argv[2], "recheck") == 0 ? 4 : 5)) {
		fprintf(stderr, "usage: console-github-drive CONFIG authorize STATE REDIRECT | "
		    "signin CODE REDIRECT | recheck USER\n");
		return 2;
	}
	log_init(LOG_DEBUG, "spur");
	memset(&e, 0, sizeof e);
	yerrs_init(&errs);
	if ((e.conf = config_load(argv[1], 0, &errs)) == NULL) {
		for (i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		yerrs_free(&errs);
		return 1;
	}
	yerrs_free(&errs);
	if (strcmp(argv[2], "authorize") == 0) {
		url = console_github_authorize_url(e.conf, argv[3], argv[4]);
		printf("%s\n", url != NULL ? url : "(not enabled)");
		free(url);
		config_free(e.conf);
		return 0;
	}
	mkdir_p(e.conf->data_dir, 0700);
	if ((e.store = store_open(e.conf->data_dir, 0, &cause)) == NULL) {
		fprintf(stderr, "store: %s\n", cause);
		free(cause);
		config_free(e.conf);
		return 1;
	}
	if (evthread_use_pthreads() != 0)
		fatal("evthread_use_pthreads failed");
	e.base = event_base_new();
	e.http = httpc_create(e.base);	/* the engine's client, which console-github.c calls */
	e.outbox = outbox_create(&e);
	if (strcmp(argv[2], "signin") == 0)
		console_github_signin(&e, argv[3], argv[4], drive_done_cb, &e);
	else
		console_github_recheck(&e, argv[3], drive_done_cb, &e);
	event_base_dispatch(e.base);
	outbox_free(e.outbox);
	httpc_free(e.http);
	event_base_free(e.base);
	store_close(e.store);
	config_free(e.conf);
	return 0;
}
