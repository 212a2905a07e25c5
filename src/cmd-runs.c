/* cmd-runs.c: `spur runs`, `show`, `logs`, `cancel` and `retry`: the store as the CLI sees it. */
#include "spur.h"
#include "cmd.h"
#include "conf.h"
#include "store.h"
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses -c FILE, --json, --org, --state, --limit, -f, --raw; returns the first operand index. */
struct runs_opts {
	const char	*config;
	const char	*org;
	const char	*state;
	int		 limit;
	int		 json;
	int		 follow;
	int		 raw;
};

#define RUNS_LIMIT_MAX	100000

/* --limit N: a whole number of runs, 1 to RUNS_LIMIT_MAX; anything else is refused. */
static int
runs_limit(const struct cmd *c, const char *arg, int *out)
{
	char	*end;
	long	 v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (*arg == '\0' || *end != '\0' || errno != 0 || v < 1 || v > RUNS_LIMIT_MAX) {
		fprintf(stderr, "spur %s: --limit must be a number from 1 to %d, not \"%s\"\n",
		    c->name, RUNS_LIMIT_MAX, arg);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int
runs_getopt(const struct cmd *c, int argc, char **argv, struct runs_opts *o, int operands)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "state", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "follow", no_argument, NULL, 'f' },
		{ "raw", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 }
	};
	enum run_state	 st;
	int		 ch;

	memset(o, 0, sizeof *o);
	o->limit = 100;
	while ((ch = getopt_long(argc, argv, "c:f", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o->config = optarg; break;
		case 'o': o->org = optarg; break;
		case 's':
			if (run_state_parse(optarg, &st) != 0) {
				fprintf(stderr, "spur %s: unknown state \"%s\"\n", c->name, optarg);
				return -1;
			}
			o->state = optarg;
			break;
		case 'n':
			if (runs_limit(c, optarg, &o->limit) != 0)
				return -1;
			break;
		case 'j': o->json = 1; break;
		case 'f':
			if (strcmp(c->name, "logs") != 0)
				return -1;
			o->follow = 1;
			break;
		case 'r':
			if (strcmp(c->name, "logs") != 0)
				return -1;
			o->raw = 1;
			break;
		default:
			return -1;
		}
	}
	if (argc - optind != operands)
		return -1;
	if (o->config == NULL)
		o->config = config_default_path();
	return optind;
}

static const char *
jstr(const json_t *j, const char *key)
{
	const char	*s = json_string_value(json_object_get(j, key));

	return s != NULL ? s : "-";
}

static void
format_duration(json_t *ms, char *out, size_t len)
{
	long long	 v;

	if (!json_is_integer(ms)) {
		snprintf(out, len, "-");
		return;
	}
	v = json_integer_value(ms);
	if (v < 10000)
		snprintf(out, len, "%lld.%03llds", v / 1000, v % 1000);
	else if (v < 3600000)
		snprintf(out, len, "%lldm%02llds", v / 60000, v / 1000 % 60);
	else
		snprintf(out, len, "%lldh%02lldm", v / 3600000, v / 60000 % 60);
}

int
cmd_runs(const struct cmd *c, int argc, char **argv)
{
	struct runs_opts	 o;
	struct config		*conf;
	struct store		*st;
	json_t			*list, *r;
	size_t			 i;
	char			 dur[32];

	if (runs_getopt(c, argc, argv, &o, 0) < 0) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	list = store_runs_json(st, o.org, o.state, o.limit);
	if (o.json)
		cmd_print_json(list);
	else {
		term_json(list, 0);
		printf("%-24s %-12s %-24s %-12s %-14s %-40s %-24s %s\n", "ID", "ORG",
		    "AUTOMATION", "STATE", "CAUSE", "THREAD", "STARTED", "DURATION");
		json_array_foreach(list, i, r) {
			format_duration(json_object_get(r, "duration_ms"), dur, sizeof dur);
			printf("%-24s %-12s %-24s %-12s %-14s %-40s %-24s %s\n", jstr(r, "id"),
			    jstr(r, "org"), jstr(r, "automation"), jstr(r, "state"),
			    jstr(r, "cause"), jstr(r, "thread"), jstr(r, "started_at"), dur);
		}
	}
	json_decref(list);
	store_close(st);
	config_free(conf);
	return EXIT_OK;
}

/* The run's usage (SPEC section 16): totals, then a line per model. */
static void
cmd_print_usage(const json_t *u)
{
	const json_t	*m;
	size_t		 i;

#define USAGE_LINE(j) (long long)json_integer_value(json_object_get(j, "requests")), \
	(long long)json_integer_value(json_object_get(j, "input_tokens")), \
	(long long)json_integer_value(json_object_get(j, "output_tokens")), \
	(long long)json_integer_value(json_object_get(j, "cache_read_tokens")), \
	(long long)json_integer_value(json_object_get(j, "cache_write_tokens")), \
	(long long)json_integer_value(json_object_get(j, "tokens")), \
	json_number_value(json_object_get(j, "cost_usd"))
	printf("\nusage:\n  requests=%lld input=%lld output=%lld cache_read=%lld "
	    "cache_write=%lld tokens=%lld cost=$%.4f\n", USAGE_LINE(u));
	json_array_foreach(json_object_get(u, "models"), i, m)
		printf("  %s: requests=%lld input=%lld output=%lld cache_read=%lld "
		    "cache_write=%lld tokens=%lld cost=$%.4f\n", jstr(m, "model"),
		    USAGE_LINE(m));
#undef USAGE_LINE
}

int
cmd_show(const struct cmd *c, int argc, char **argv)
{
	struct runs_opts	 o;
	struct config		*conf;
	struct store		*st;
	json_t			*r, *h;
	size_t			 i;
	int			 idx;
	char			 dur[32], *prompt, *result;

	if ((idx = runs_getopt(c, argc, argv, &o, 1)) < 0) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if ((r = store_run_json(st, argv[idx], 1)) == NULL) {
		fprintf(stderr, "spur show: no such run %s\n", argv[idx]);
		store_close(st);
		config_free(conf);
		return EXIT_FAILED;
	}
	if (o.json)
		cmd_print_json(r);
	else {
		/* Every field is the sender's or the agent's text; only these two keep lines. */
		prompt = term_safe(jstr(r, "prompt"), TERM_KEEP_NL | TERM_KEEP_TAB);
		result = term_safe(jstr(r, "result"), TERM_KEEP_NL | TERM_KEEP_TAB);
		term_json(r, 0);
		format_duration(json_object_get(r, "duration_ms"), dur, sizeof dur);
		printf("run:        %s\norg:        %s\nautomation: %s\nstate:      %s\n"
		    "cause:      %s\nphase:      %s\nretry of:   %s\n"
		    "reason:     %s\nthread:     %s\nsession:    %s\nevent:      %s\n"
		    "created:    %s\nstarted:    %s\nended:      %s\nduration:   %s\n"
		    "proof:      %s\n", jstr(r, "id"), jstr(r, "org"),
		    jstr(r, "automation"), jstr(r, "state"), jstr(r, "cause"),
		    jstr(r, "phase"), jstr(r, "retry_of"), jstr(r, "reason"),
		    jstr(r, "thread"), jstr(r, "session"), jstr(r, "event_id"),
		    jstr(r, "created_at"), jstr(r, "started_at"), jstr(r, "ended_at"), dur,
		    jstr(r, "proof"));
		printf("\nhistory:\n");
		json_array_foreach(json_object_get(r, "history"), i, h) {
			printf("  %s  %-12s %-14s %s\n", jstr(h, "at"), jstr(h, "state"),
			    json_object_get(h, "cause") != NULL ? jstr(h, "cause") :
			    json_object_get(h, "phase") != NULL ? jstr(h, "phase") : "",
			    jstr(h, "reason"));
		}
		printf("\nreports:\n");
		json_array_foreach(json_object_get(r, "reports"), i, h)
			printf("  %-10s %-10s attempts=%lld %s\n", jstr(h, "kind"),
			    jstr(h, "state"), (long long)json_integer_value(
			    json_object_get(h, "attempts")), jstr(h, "error"));
		cmd_print_usage(json_object_get(r, "usage"));
		printf("\nconnections:\n");
		json_array_foreach(json_object_get(r, "connections"), i, h)
			printf("  %s  %s:%lld %s in=%lld out=%lld\n", jstr(h, "at"),
			    jstr(h, "host"), (long long)json_integer_value(
			    json_object_get(h, "port")), jstr(h, "verdict"),
			    (long long)json_integer_value(json_object_get(h, "bytes_in")),
			    (long long)json_integer_value(json_object_get(h, "bytes_out")));
		printf("\nprompt:\n%s\n\nresult:\n%s\n", prompt, result);
		free(prompt);
		free(result);
	}
	json_decref(r);
	store_close(st);
	config_free(conf);
	return EXIT_OK;
}

/* Where spur logs is in the output: --raw, or the transcript, which holds a line cut by a read. */
struct logs_out {
	int			 raw;
	struct transcript	*t;
};

/*
 * logs -f, once the run ended, whatever its agent: its end on stderr, and
 * the exit status a script wants (0 completed, 1 anything else).
 */
static int
logs_outcome(struct store *st, const char *run)
{
	json_t		*j = store_run_json(st, run, STORE_RUN_ROW);
	const char	*state = json_string_value(json_object_get(j, "state"));
	const char	*cause = json_string_value(json_object_get(j, "cause"));
	const char	*reason = json_string_value(json_object_get(j, "reason"));
	char		*safe = reason != NULL ? term_safe(reason, 0) : NULL;
	int		 rc;

	fprintf(stderr, "spur: run %s ended %s%s%s%s%s%s\n", run, state != NULL ? state : "?",
	    cause != NULL ? " (" : "", cause != NULL ? cause : "", cause != NULL ? ")" : "",
	    safe != NULL ? ": " : "", safe != NULL ? safe : "");
	rc = state != NULL && strcmp(state, "completed") == 0 ? EXIT_OK : EXIT_FAILED;
	free(safe);
	json_decref(j);
	return rc;
}

/* Writes what fd has past its offset to stdout, as a transcript unless --raw; final: nothing follows. */
/*
 * The log from where it was read to, from the file (fd), or from the store's
 * copy (st: several nodes, when another node ran it) at *off.
 */
static void
logs_copy(int fd, struct store *st, const char *run, int64_t *off, struct logs_out *lo,
    int final)
{
	struct buf	 out;
	char		 buf[8192];
	ssize_t		 n;

	buf_init(&out, 0);
	for (;;) {
		n = st != NULL ? store_run_output_read(st, run, *off, buf, sizeof buf) :
		    read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR && st == NULL)
			continue;
		if (n <= 0)
			break;
		*off += n;
		if (lo->raw) {
			fwrite(buf, 1, n, stdout);
			continue;
		}
		transcript_feed(lo->t, buf, (size_t)n, &out);
		if (out.len > 0)
			fwrite(out.data, 1, out.len, stdout);
		buf_reset(&out);
	}
	if (final && !lo->raw) {
		transcript_end(lo->t, &out);
		if (out.len > 0)
			fwrite(out.data, 1, out.len, stdout);
	}
	fflush(stdout);
	buf_free(&out);
}

/* The agent whose stream the run's log holds (the automation's snapshot); NULL: plain text. */
static const struct agent *
logs_agent(struct store *st, const char *run)
{
	const struct agent	*a = NULL;
	json_t			*r;

	if ((r = store_run_json(st, run, 1)) != NULL) {
		a = agent_find(json_string_value(json_object_get(json_object_get(r,
		    "automation_config"), "agent")));
		json_decref(r);
	}
	return a;
}

/* Colours for a terminal, unless NO_COLOR is set (to anything but ""). */
static int
logs_color(void)
{
	const char	*nc = getenv("NO_COLOR");

	return isatty(STDOUT_FILENO) && (nc == NULL || *nc == '\0');
}

int
cmd_logs(const struct cmd *c, int argc, char **argv)
{
	struct runs_opts	 o;
	struct config		*conf;
	struct store		*st, *remote;
	struct logs_out		 lo;
	enum run_state		 state;
	char			*path;
	int64_t			 ended, off = 0;
	int			 idx, fd = -1, rc = EXIT_OK;

	if ((idx = runs_getopt(c, argc, argv, &o, 1)) < 0) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	/* The agent's exact bytes on a terminal are what the escaping is there to stop. */
	if (o.raw && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "spur logs: --raw writes the agent's bytes as they are, escape "
		    "sequences included: redirect it to a file or a pipe, not a terminal\n");
		return EXIT_USAGE;
	}
	memset(&lo, 0, sizeof lo);
	lo.raw = o.raw;
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if (store_run_get_state(st, argv[idx], &state) != 0) {
		fprintf(stderr, "spur logs: no such run %s\n", argv[idx]);
		rc = EXIT_FAILED;
		goto out;
	}
	lo.t = transcript_create(logs_agent(st, argv[idx]), logs_color() ? TRANSCRIPT_COLOR : 0);
	path = run_log_path(conf->data_dir, argv[idx]);
	ended = store_run_ended_at(st, argv[idx]);
	if (access(path, F_OK) != 0 && ended > 0 &&
	    ended < now_ms() - conf->retention_run_files * 1000) {
		fprintf(stderr, "spur logs: the output of %s was removed with its files "
		    "(retention.run_files)\n", argv[idx]);
		free(path);
		rc = EXIT_FAILED;
		goto out;
	}
	/* Several nodes: a log not here is read from the store's copy, as it grows. */
	remote = store_shared(st) && access(path, F_OK) != 0 ? st : NULL;
	for (;;) {
		if (fd == -1 && remote == NULL)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd != -1 || remote != NULL)
			logs_copy(fd, remote, argv[idx], &off, &lo, 0);
		if (!o.follow || (store_run_get_state(st, argv[idx], &state) == 0 &&
		    run_state_terminal(state)))
			break;
		usleep(200 * 1000);
	}
	if (fd != -1 || remote != NULL) {
		/* One last read: the run may have written its tail as it ended. */
		logs_copy(fd, remote, argv[idx], &off, &lo, 1);
		if (fd != -1)
			close(fd);
	}
	free(path);
	if (o.follow)
		rc = logs_outcome(st, argv[idx]);
out:
	transcript_free(lo.t);
	store_close(st);
	config_free(conf);
	return rc;
}

/* Tells a running engine to look at the store again (cancel requests, new runs); -1: none runs. */
static int
runs_poke_engine(const char *data_dir)
{
	char	*path = path_join(data_dir, "spur.pid"), *s, *cause;
	long	 pid;
	int	 rc = -1;

	if (read_file(path, 64, &s, NULL, &cause) == 0) {
		pid = strtol(s, NULL, 10);
		if (pid > 1 && kill((pid_t)pid, SIGUSR1) == 0)
			rc = 0;
		free(s);
	} else
		free(cause);
	free(path);
	return rc;
}

/*
 * Who ran `spur cancel`, as the run's history tells it: the login name (the
 * one sudo was run by, when it was), else the uid.
 */
static char *
runs_cancel_reason(void)
{
	const char	*sudo = getenv("SUDO_USER");
	struct passwd	*pw = getpwuid(geteuid());

	if (geteuid() == 0 && sudo != NULL && *sudo != '\0')
		return xprintf("cancelled by user %s (as root, with spur cancel)", sudo);
	if (pw != NULL && pw->pw_name != NULL)
		return xprintf("cancelled by user %s (with spur cancel)", pw->pw_name);
	return xprintf("cancelled by user uid %lu (with spur cancel)", (unsigned long)geteuid());
}

/*
 * The CLI only asks: the cancel is stored and the engine applies it (ends a
 * queued run, kills a running one, tells the thread). Waits a little to say
 * what became of it.
 */
int
cmd_cancel(const struct cmd *c, int argc, char **argv)
{
	struct runs_opts	 o;
	struct config		*conf;
	struct store		*st;
	enum run_state		 state;
	int64_t			 until;
	int			 idx, rc = EXIT_OK;
	char			*why = NULL;

	if ((idx = runs_getopt(c, argc, argv, &o, 1)) < 0) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if (store_run_get_state(st, argv[idx], &state) != 0) {
		fprintf(stderr, "spur cancel: no such run %s\n", argv[idx]);
		rc = EXIT_FAILED;
	} else if (run_state_terminal(state)) {
		fprintf(stderr, "spur cancel: run %s already ended (%s)\n", argv[idx],
		    run_state_name(state));
		rc = EXIT_FAILED;
	} else if (store_run_request_cancel(st, argv[idx], (why = runs_cancel_reason())) != 0) {
		fprintf(stderr, "spur cancel: cannot store the request\n");
		rc = EXIT_FAILED;
	} else if (runs_poke_engine(conf->data_dir) != 0) {
		printf("%s: cancel requested; the engine applies it when it starts\n",
		    argv[idx]);
	} else {
		until = now_ms() + 10000;
		while (now_ms() < until && store_run_get_state(st, argv[idx], &state) == 0 &&
		    !run_state_terminal(state))
			usleep(50 * 1000);
		if (run_state_terminal(state))
			printf("%s %s\n", argv[idx], run_state_name(state));
		else
			printf("%s cancelling\n", argv[idx]);
	}
	free(why);
	store_close(st);
	config_free(conf);
	return rc;
}

int
cmd_retry(const struct cmd *c, int argc, char **argv)
{
	struct runs_opts	 o;
	struct config		*conf;
	struct store		*st;
	char			*cause = NULL, *id;
	int			 idx, rc = EXIT_OK;

	if ((idx = runs_getopt(c, argc, argv, &o, 1)) < 0) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if ((id = store_run_retry(st, argv[idx], 0, &cause)) == NULL) {
		fprintf(stderr, "spur retry: %s\n", cause);
		rc = EXIT_FAILED;
	} else {
		printf("%s\n", id);
		runs_poke_engine(conf->data_dir);
	}
	free(id);
	free(cause);
	store_close(st);
	config_free(conf);
	return rc;
}
