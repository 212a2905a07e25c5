/*
 * cmd-reload.c: `spur reload`: a reload that can fail. The config is checked
 * here first, as the engine will load it (a refused one is never signalled:
 * the engine keeps its own); then the engine named by data_dir/spur.pid gets
 * SIGHUP, and its verdict is read back from data_dir/reload.status, which
 * serve.c rewrites after each reload. Exits 0 when the engine took the new
 * config, 1 with the reasons when it did not (systemd's ExecReload= then
 * fails visibly).
 */
#include "spur.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "serve.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RELOAD_WAIT_S	60	/* --timeout's default */
#define RELOAD_POLL_MS	20

/* The status file's text, NULL when there is none yet. */
static char *
reload_status(const char *path)
{
	char	*s = NULL, *cause = NULL;

	if (read_file(path, 1 << 20, &s, NULL, &cause) != 0) {
		free(cause);
		return NULL;
	}
	return s;
}

/* Its first line, "AT ok ..." or "AT refused ...": AT tells one reload from the next. */
static int
reload_same(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcspn(a, "\n") == strcspn(b, "\n") && strncmp(a, b, strcspn(a, "\n")) == 0;
}

static long
reload_pid(const char *data_dir)
{
	char	*path = path_join(data_dir, "spur.pid"), *s = NULL, *cause = NULL;
	long	 pid = -1;

	if (read_file(path, 64, &s, NULL, &cause) == 0)
		pid = strtol(s, NULL, 10);
	free(cause);
	free(s);
	free(path);
	return pid;
}

/* Waits for the engine's verdict; what it says goes to stdout (ok) or stderr. */
static int
reload_wait(const char *path, const char *before, long pid, long long wait_s)
{
	struct timespec	 ts = { 0, RELOAD_POLL_MS * 1000000L };
	int64_t		 until = now_ms() + wait_s * 1000;
	char		*now, *sp;

	for (;;) {
		now = reload_status(path);
		if (now != NULL && !reload_same(before, now))
			break;
		free(now);
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
			fprintf(stderr, "spur: the engine (pid %ld) stopped before it reloaded\n",
			    pid);
			return EXIT_FAILED;
		}
		if (now_ms() > until) {
			fprintf(stderr, "spur: the engine (pid %ld) did not say within %lld s "
			    "whether it reloaded (see its log)\n", pid, wait_s);
			return EXIT_FAILED;
		}
		nanosleep(&ts, NULL);
	}
	sp = strchr(now, ' ');
	if (sp != NULL && strncmp(sp + 1, "ok", 2) == 0) {
		printf("spur: reloaded (%.*s)\n", (int)strcspn(sp + 4, "\n"), sp + 4);
		free(now);
		return EXIT_OK;
	}
	fprintf(stderr, "spur: the engine refused the new config and keeps its own:\n%s",
	    now + strcspn(now, "\n") + (now[strcspn(now, "\n")] != '\0'));
	free(now);
	return EXIT_FAILED;
}

int
cmd_reload(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 }
	};
	struct config		*conf;
	struct automation_set	*set;
	const char		*path = NULL;
	char			*status_path, *before, *cause = NULL;
	long long		 wait_s = RELOAD_WAIT_S;
	long			 pid;
	int			 ch, rc;

	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 't':
			if (parse_duration(optarg, &wait_s, &cause) != 0 || wait_s <= 0) {
				fprintf(stderr, "spur: --timeout %s: %s\n", optarg,
				    cause != NULL ? cause : "must be positive");
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
	/* As the engine loads it: what it would refuse is refused here, unsignalled. */
	if (cmd_load(path, 0, &conf, &set) != 0) {
		fprintf(stderr, "spur: %s is refused; the running engine keeps its config\n",
		    path);
		return EXIT_FAILED;
	}
	automation_set_unref(set);
	status_path = path_join(conf->data_dir, SERVE_RELOAD_STATUS);
	if ((pid = reload_pid(conf->data_dir)) <= 1 || kill((pid_t)pid, 0) != 0) {
		fprintf(stderr, "spur: no engine runs on %s (no live pid in its spur.pid)\n",
		    conf->data_dir);
		rc = EXIT_FAILED;
		goto out;
	}
	before = reload_status(status_path);
	if (kill((pid_t)pid, SIGHUP) != 0) {
		fprintf(stderr, "spur: cannot signal the engine (pid %ld): %s\n", pid,
		    strerror(errno));
		free(before);
		rc = EXIT_FAILED;
		goto out;
	}
	rc = reload_wait(status_path, before, pid, wait_s);
	free(before);
out:
	free(status_path);
	config_free(conf);
	return rc;
}
