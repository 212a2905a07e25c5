/* spur.c: the command line: one table of commands, each with its usage and handler. */
#include "spur.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "secrets.h"
#include "source.h"
#include "store.h"
#include "ytree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int	cmd_version(const struct cmd *, int, char **);
static int	cmd_help(const struct cmd *, int, char **);

static const struct cmd cmds[] = {
	{ "serve", "[-v] [-c FILE]",
	  "Runs the engine in the foreground, logging to stderr. SIGHUP reloads the\n"
	  "config and automations (an invalid set is refused and the old one kept);\n"
	  "SIGTERM or SIGINT stops accepting, finishes in-flight requests and exits 0.",
	  cmd_serve },
	{ "helper", "[-v] [-c FILE]",
	  "Runs the root helper alone (as root: the spur-helper unit), on the\n"
	  "config's helper_socket: for the engine of its user: (spur serve with the\n"
	  "same helper_socket:, as that user), which it checks by SO_PEERCRED; one\n"
	  "engine at a time, whose sandboxes and git children it starts.",
	  cmd_helper },
	{ "reload", "[-c FILE] [--timeout DURATION]",
	  "Reloads the running engine's config and automations, and says whether it\n"
	  "took them: checks the config as the engine will load it (a refused one is\n"
	  "never sent), signals the engine of data_dir (SIGHUP), waits for its verdict\n"
	  "(60 s by default) and exits 1 with the reasons when it refused them.",
	  cmd_reload },
	{ "check", "[-c FILE] [--offline] [--json]",
	  "Validates the config and every automation; prints one\n"
	  "FILE:LINE:COL: error: MESSAGE line per problem and exits 1 if there is any.\n"
	  "It reads every secret (env: variables, file: files), checks that an App's\n"
	  "private key can sign and, when run as root, that sandbox.user exists. --offline checks the\n"
	  "rest without them, for CI or a shell without the production secrets.\n"
	  "--json prints {config, ok, orgs, automations, errors, warnings}, each\n"
	  "problem as {file, line, col, message}; the exit status is the same.",
	  cmd_check },
	{ "doctor", "[-c FILE] [--org ORG] [--min-free SIZE] [--json]",
	  "Checks what check cannot: for each org, each outside system's credentials\n"
	  "at its API (a token or an App's key, where the App is installed with which\n"
	  "permissions and events, a bot token's scopes against what spur and the\n"
	  "automations use), each model key at its API, the models\n"
	  "its automations name or its runs used that have no price (a fail under a\n"
	  "budget in money, whose requests for them are refused); then that\n"
	  "sandboxes can start (user namespaces, sandbox.user, seccomp, bubblewrap),\n"
	  "data_dir's free space (at least --min-free, default 1GiB) and the clock\n"
	  "against the APIs' Date. Each check prints pass, fail (with the fix) or\n"
	  "skip; exit 1 if any failed.",
	  cmd_doctor },
	{ "fire", "[-c FILE] --org ORG --source SRC [--event NAME] [-H 'Name: value']... "
	  "[--why] [--prompt] [--json] FILE",
	  "Dry run of one payload: prints the normalized event, each automation that\n"
	  "matches and the exact prompt its run would get. --why also says why each\n"
	  "other automation did not match; --prompt prints only the prompts. No\n"
	  "signature is verified, nothing is stored or started. A generic hook is\n"
	  "--source NAME (or --source webhook --event NAME); --source schedule --event\n"
	  "AUTOMATION (no FILE) shows the automation's next scheduled fire.",
	  cmd_fire },
	{ "runs", "[-c FILE] [--org ORG] [--state STATE] [--limit N] [--json]",
	  "Lists runs, newest first: id, org, automation, state, thread, start, duration.\n"
	  "--limit N (1 to 100000, default 100) says how many.",
	  cmd_runs },
	{ "show", "[-c FILE] [--json] RUN",
	  "Shows one run: event, prompt, state history with reasons, result, proof,\n"
	  "reports and network connections.",
	  cmd_show },
	{ "logs", "[-c FILE] [-f] [--raw] RUN",
	  "Prints the run's agent output; -f follows it until the run ends, then says\n"
	  "how it ended on stderr and exits 0 if it completed, 1 if not. Control\n"
	  "characters and invalid UTF-8 are printed escaped (\\x1b, \\u009b), as in\n"
	  "runs and show; --raw writes the exact bytes, and refuses a terminal.",
	  cmd_logs },
	{ "cancel", "[-c FILE] RUN",
	  "Ends a queued or running run: its sandbox is killed, its state becomes\n"
	  "cancelled and the thread is told. Its history names who cancelled it (the\n"
	  "login name, or the one sudo was run by).",
	  cmd_cancel },
	{ "retry", "[-c FILE] RUN",
	  "Starts a new run from the same event and automation.",
	  cmd_retry },
	{ "keys", "create|list|revoke [-c FILE] [--org ORG] [--name NAME] [--scope SCOPE]... "
	  "[--expires DURATION] [--json] [ID]",
	  "The org API's keys. create --org ORG prints a new key once on stdout (the\n"
	  "store keeps only its hash); --scope (repeatable: sessions:read,\n"
	  "sessions:write, runs:read, runs:write, automations:read, secrets:write,\n"
	  "secrets:use, mcp) defaults to all but secrets:write and secrets:use (a\n"
	  "session naming the org's secrets); --expires 90d. list shows id, name,\n"
	  "scopes, created, last used, expiry and revocation, never a key; revoke ID.",
	  cmd_keys },
	{ "secrets", "set|list|rm|rekey [-c FILE] [--org ORG] [--host HOST]... "
	  "[--header 'NAME: FORMAT'] [--new-key REF] [--json] [NAME]",
	  "Sealed secrets in the store (AES-256-GCM under secrets.key). set --org ORG\n"
	  "NAME reads the value from standard input; with --host it is a header secret\n"
	  "(the sandbox gets a placeholder, the run's proxy adds the header for those\n"
	  "hosts; --header defaults to 'Authorization: Bearer {value}'). list shows\n"
	  "names, kinds, hosts and update times, never a value; rm --org ORG NAME;\n"
	  "rekey --new-key env:NAME|file:PATH seals every value again under a new key\n"
	  "in one transaction, then point secrets.key at it.",
	  cmd_secrets },
	{ "console-link", "[-c FILE] --org ORG [--next PATH]",
	  "Prints a one-time link that signs a browser in to the web console for ORG\n"
	  "(good for 10 minutes, once; the session lasts 12 hours). --next /runs/RUN\n"
	  "lands on that page.",
	  cmd_console_link },
	{ "schedules", "[-c FILE] [--org ORG] [--next N] [--json]",
	  "Lists every schedule and its next N fire times (default 3), in UTC and in\n"
	  "the schedule's time zone.",
	  cmd_schedules },
	{ "env", "build|list|rm [-c FILE] [NAME] [--packages LIST] [--suite SUITE] "
	  "[--mirror URL] [--json]",
	  "Root filesystems runs may use instead of the host's /usr (environment:\n"
	  "rootfs: NAME), under data_dir/envs. build NAME --packages nodejs,npm makes\n"
	  "one with mmdebstrap (--variant=minbase, suite bookworm unless --suite) or\n"
	  "replaces it atomically; list shows each (--json: name, packages, size,\n"
	  "built); rm NAME removes one.",
	  cmd_env },
	{ "completion", "bash|zsh|fish",
	  "Prints the shell's completion of spur's commands and options: source <(spur\n"
	  "completion bash), or spur completion fish | source; zsh's uses bashcompinit.",
	  cmd_completion },
	{ "version", "", "Prints the version and the commit built.", cmd_version },
	{ "help", "[COMMAND | --man]", "Prints usage; --man prints the spur(1) manual page (roff).",
	  cmd_help },
};

const struct cmd *
cmd_table(size_t *n)
{
	*n = SPUR_ARRLEN(cmds);
	return cmds;
}

void
cmd_usage(const struct cmd *c, int to_stderr)
{
	FILE	*f = to_stderr ? stderr : stdout;

	fprintf(f, "usage: spur %s %s\n\n%s\n", c->name, c->usage, c->help);
	if (strstr(c->usage, "-c FILE") != NULL)
		fprintf(f, "\n-c FILE defaults to $SPUR_CONFIG, else ./spur.yaml, else "
		    CONFIG_INSTALLED ".\n");
}

/* The outside systems of source.h's table, as people write them: "A, B, C". */
static char *
usage_systems(void)
{
	const struct source	*src;
	struct buf		 b;

	buf_init(&b, 0);
	for (src = source_next(NULL); src != NULL; src = source_next(src))
		buf_addf(&b, "%s%s", b.len > 0 ? ", " : "", src->title);
	return buf_take(&b);
}

static void
usage_all(FILE *f)
{
	char	*systems;
	size_t	 i;

	systems = usage_systems();
	fprintf(f, "usage: spur COMMAND [OPTIONS]\n\n"
	    "spur turns events (%s, webhooks, schedules) into\n"
	    "sandboxed coding-agent runs.\n\ncommands:\n", systems);
	free(systems);
	for (i = 0; i < SPUR_ARRLEN(cmds); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].usage);
	fprintf(f, "\nspur COMMAND --help prints a command's usage.\n"
	    "Exit status: 0 done, 1 what was asked failed, 2 usage error.\n");
}

/* Text for roff: backslashes and dashes escaped, a line starting with . or ' kept as text. */
static void
man_text(FILE *f, const char *s)
{
	int	 bol = 1;

	for (; *s != '\0'; s++) {
		if (bol && (*s == '.' || *s == '\''))
			fputs("\\&", f);
		if (*s == '\\')
			fputs("\\e", f);
		else if (*s == '-')
			fputs("\\-", f);
		else
			fputc(*s, f);
		bol = *s == '\n';
	}
}

/*
 * spur(1), made from this table at build time (`spur help --man`), so the
 * manual page says what `spur help` says.
 */
static void
usage_man(FILE *f)
{
	char	*systems = usage_systems();
	size_t	 i;

	fprintf(f, ".\\\" spur(1): generated by `spur help --man` from src/spur.c; do not edit.\n"
	    ".TH SPUR 1 \"\" \"spur %s\" \"User Commands\"\n"
	    ".SH NAME\nspur \\- turn events into sandboxed coding\\-agent runs\n"
	    ".SH SYNOPSIS\n.B spur\n.I command\n[\\fIoptions\\fR]\n"
	    ".SH DESCRIPTION\n"
	    "spur turns events (%s, webhooks, schedules) into sandboxed\n"
	    "coding\\-agent runs and reports back to the thread they came from. It is\n"
	    "configured by\n.BR spur.yaml (5)\nand automations,\n.BR spur\\-automation (5).\n"
	    ".SH COMMANDS\n", PACKAGE_VERSION, systems);
	free(systems);
	for (i = 0; i < SPUR_ARRLEN(cmds); i++) {
		fprintf(f, ".TP\n.B spur %s\n", cmds[i].name);
		man_text(f, cmds[i].usage);
		fputs("\n.br\n", f);
		man_text(f, cmds[i].help);
		fputc('\n', f);
	}
	fputs(".SH OPTIONS\n.TP\n.BI \\-c \" FILE\"\n"
	    "The configuration, for every command but version and help. Without it:\n"
	    ".BR $SPUR_CONFIG ,\nelse\n.IR ./spur.yaml ,\nelse\n.IR ", f);
	man_text(f, CONFIG_INSTALLED);
	fputs(" .\n"
	    ".SH ENVIRONMENT\n.TP\n.B SPUR_CONFIG\nThe configuration file when \\-c is not given.\n"
	    ".SH FILES\n.TP\n.I ", f);
	man_text(f, CONFIG_INSTALLED);
	fputs("\nThe installed configuration.\n"
	    ".SH EXIT STATUS\n0 done, 1 what was asked failed, 2 usage error.\n"
	    ".SH SEE ALSO\n.BR spur.yaml (5),\n.BR spur\\-automation (5),\n.BR bwrap (1)\n", f);
}

static int
cmd_version(const struct cmd *c, int argc, char **argv)
{
	if (argc > 1) {
		if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
			cmd_usage(c, 0);
			return EXIT_OK;
		}
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	printf("spur %s (commit %s)\n", PACKAGE_VERSION, SPUR_COMMIT);
	return EXIT_OK;
}

static const struct cmd *
cmd_find(const char *name)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(cmds); i++) {
		if (strcmp(cmds[i].name, name) == 0)
			return &cmds[i];
	}
	return NULL;
}

static int
cmd_help(const struct cmd *c, int argc, char **argv)
{
	const struct cmd	*which;

	if (argc < 2) {
		usage_all(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		cmd_usage(c, 0);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--man") == 0 && argc == 2) {
		usage_man(stdout);
		return EXIT_OK;
	}
	if ((which = cmd_find(argv[1])) == NULL) {
		fprintf(stderr, "spur: unknown command \"%s\"\n", argv[1]);
		return EXIT_USAGE;
	}
	cmd_usage(which, 0);
	return EXIT_OK;
}

int
cmd_load_errs(const char *path, int flags, struct config **confp,
    struct automation_set **setp, struct yerrs *errs)
{
	struct config		*conf;
	struct automation_set	*set = NULL;
	size_t			 nerr = errs->nerrors;

	conf = config_load(path, flags, errs);
	/*
	 * The store's sealed secrets before the automations that name them: with
	 * the config's secrets resolved (serve, check, a reload) each is opened,
	 * so a missing or wrong secrets.key stops the start here.
	 */
	if (conf != NULL && setp != NULL)
		secrets_attach(conf, !(flags & CONFIG_UNRESOLVED), errs);
	if (conf != NULL && setp != NULL && errs->nerrors == nerr)
		set = automation_load(conf, conf->automations_dir, errs);
	if (errs->nerrors != nerr) {
		if (set != NULL)
			automation_set_unref(set);
		config_free(conf);
		return -1;
	}
	*confp = conf;
	if (setp != NULL)
		*setp = set;
	return 0;
}

int
cmd_load(const char *path, int flags, struct config **confp, struct automation_set **setp)
{
	struct yerrs	 errs;
	size_t		 i;
	int		 rc;

	yerrs_init(&errs);
	rc = cmd_load_errs(path, flags, confp, setp, &errs);
	for (i = 0; i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	yerrs_free(&errs);
	return rc;
}

struct store *
cmd_store(const char *path, struct config **confp)
{
	struct store	*st;
	char		*cause;

	/* Reading the store needs no secret: an operator's shell has none. */
	if (cmd_load(path, CONFIG_UNRESOLVED, confp, NULL) != 0)
		return NULL;
	store_set_prepare((*confp)->store_prepare);
	if ((st = store_open_url((*confp)->store_url, (*confp)->data_dir, 0,
	    &cause)) == NULL) {
		fprintf(stderr, "spur: %s\n", cause);
		free(cause);
		config_free(*confp);
		*confp = NULL;
	}
	return st;
}

void
cmd_print_json(json_t *j)
{
	char	*s = json_dumps(j, JSON_INDENT(2) | JSON_ENSURE_ASCII);

	printf("%s\n", s);
	free(s);
}

int
main(int argc, char **argv)
{
	const struct cmd	*c;
	int			 i;

	log_init(LOG_INFO, "spur");
	if (argc < 2) {
		usage_all(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage_all(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(cmd_find("version"), 1, argv);
	if ((c = cmd_find(argv[1])) == NULL) {
		fprintf(stderr, "spur: unknown command \"%s\"\n\n", argv[1]);
		usage_all(stderr);
		return EXIT_USAGE;
	}
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			cmd_usage(c, 0);
			return EXIT_OK;
		}
	}
	return c->run(c, argc - 1, argv + 1);
}
