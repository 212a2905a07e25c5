/* cmd.h: the commands of the spur binary (SPEC section 2) and what they share. */
#ifndef SPUR_CMD_H
#define SPUR_CMD_H

#include <jansson.h>

struct config;
struct automation_set;
struct store;
struct yerrs;

#define EXIT_OK		0
#define EXIT_FAILED	1
#define EXIT_USAGE	2

struct cmd {
	const char	*name;
	const char	*usage;		/* after "spur NAME " */
	const char	*help;		/* one paragraph */
	int		(*run)(const struct cmd *, int, char **);
};

int	cmd_serve(const struct cmd *, int, char **);
int	cmd_helper(const struct cmd *, int, char **);
int	cmd_check(const struct cmd *, int, char **);
int	cmd_reload(const struct cmd *, int, char **);
int	cmd_completion(const struct cmd *, int, char **);
int	cmd_fire(const struct cmd *, int, char **);
int	cmd_runs(const struct cmd *, int, char **);
int	cmd_show(const struct cmd *, int, char **);
int	cmd_logs(const struct cmd *, int, char **);
int	cmd_cancel(const struct cmd *, int, char **);
int	cmd_retry(const struct cmd *, int, char **);
int	cmd_schedules(const struct cmd *, int, char **);
int	cmd_env(const struct cmd *, int, char **);
int	cmd_keys(const struct cmd *, int, char **);
int	cmd_secrets(const struct cmd *, int, char **);
int	cmd_console_link(const struct cmd *, int, char **);
int	cmd_doctor(const struct cmd *, int, char **);

void	cmd_usage(const struct cmd *, int to_stderr);
/* Every command, in the order `spur help` lists them. */
const struct cmd *cmd_table(size_t *);
/* Loads config and automations, printing every error and warning; -1 if any error. */
int	cmd_load(const char *path, int flags, struct config **, struct automation_set **);
/* The same into errs with config_load's flags, printing nothing (serve logs them); warnings alone load. */
int	cmd_load_errs(const char *path, int flags, struct config **, struct automation_set **,
	    struct yerrs *);
/* Opens the store of a configured data dir for the CLI. */
struct store *cmd_store(const char *path, struct config **);
void	cmd_print_json(json_t *);

/* term.c: what a sender or an agent wrote, made safe to print (--json needs none of it). */
#define TERM_KEEP_NL	0x1	/* a multi-line field: newlines stay */
#define TERM_KEEP_TAB	0x2	/* tabs stay */
#define TERM_MORE	0x4	/* a stream: more bytes follow this chunk */
struct buf;
size_t	term_escape(struct buf *, const char *, size_t, int flags);
char	*term_safe(const char *, int flags);
void	term_json(json_t *, int flags);

#endif
