/* agent.h: the agent CLIs (claude, codex, opencode, command): how each starts, resumes, and reports. */
#ifndef SPUR_AGENT_H
#define SPUR_AGENT_H

#include <stddef.h>
#include <jansson.h>

#include "spur.h"

struct agent_conf;

#define AGENT_MESSAGE_MAX	(64 * 1024)	/* final message kept, the rest is cut */
#define AGENT_LINE_MAX		(4 * 1024 * 1024) /* a longer JSON line is skipped */
#define AGENT_ID_MAX		256		/* model names and session ids */

/* What one run asks of its agent. Every agent gets the prompt on stdin. */
struct agent_request {
	const char	*model;		/* NULL: the agent's default */
	const char	*resume;	/* the agent's session id from the session's last run */
	char *const	*command;	/* agent: command: the automation's argv */
};

/* What the agent said, read from its stdout when it ended. */
struct agent_result {
	char	*message;	/* the final message (at most AGENT_MESSAGE_MAX), NULL: none */
	char	*session;	/* the agent's own session/thread id, to resume the next run */
	int	 error;		/* it failed, or its own result says error */
	char	*error_text;	/* why, when known */
};

struct agent;
struct agent_stream;
struct transcript;

/* The agent of that name (claude, codex, opencode, command), NULL if none. */
const struct agent	*agent_find(const char *);
const char		*agent_name(const struct agent *);
/*
 * The argv to run in the sandbox: agents.NAME.command (conf, may be NULL) or
 * the default, then the agent's own flags. NULL and cause on a bad request
 * (command agent without command, a model or session id that is no id).
 */
char			**agent_argv(const struct agent *, const struct agent_conf *,
			    const struct agent_request *, char **cause);
void			 agent_argv_free(char **);

/* Reads the agent's stdout as it comes (any chunking), bounded. */
struct agent_stream	*agent_stream_create(const struct agent *);
void			 agent_stream_feed(struct agent_stream *, const char *, size_t);
/* At the end: exit_ok is a clean exit (status 0). Moves the result to *out. */
void			 agent_stream_end(struct agent_stream *, int exit_ok,
			    struct agent_result *out);
void			 agent_stream_free(struct agent_stream *);
void			 agent_result_clear(struct agent_result *);

/*
 * transcript.c: the stream as `spur logs` shows it, a readable transcript
 * (the assistant's words, tool calls with their arguments shortened, tool
 * results folded to a line, errors marked) with everything the agent wrote
 * escaped for the terminal. Fed any chunking: a line waits for its end. A
 * line that is no JSON, or an agent without a renderer (command, NULL), is
 * text.
 */
#define TRANSCRIPT_COLOR	0x1	/* ANSI colours: a terminal, and no NO_COLOR */
#define TRANSCRIPT_ARGS_MAX	160	/* bytes of tool arguments or a folded line shown */
struct transcript	*transcript_create(const struct agent *, int flags);
/* Appends to out what the complete lines of data render to. */
void			 transcript_feed(struct transcript *, const char *, size_t,
			    struct buf *out);
/* Nothing follows: the last line, even without its newline. */
void			 transcript_end(struct transcript *, struct buf *out);
void			 transcript_free(struct transcript *);

/*
 * For agent-*.c only: one table entry per agent, and the stream state the
 * line handlers update.
 */
struct agent_args {
	char	**argv;
	size_t	  argc;
};

struct agent {
	const char	*name;
	const char	*command;	/* default argv[0]; NULL: argv from the request */
	/* Adds the agent's flags after the command. */
	void		(*args)(struct agent_args *, const struct agent_request *);
	/* One JSON object from stdout; NULL: stdout is the message (command). */
	void		(*line)(struct agent_stream *, const json_t *);
	int		 final_required; /* no final event seen: the run failed */
	/* One JSON object from stdout, told to the transcript; NULL: lines are text. */
	void		(*render)(struct transcript *, const json_t *);
	/*
	 * Where under its HOME the agent keeps its sessions (its conversation,
	 * resumed by id): archived for another node (several nodes); NULL: none.
	 */
	const char	*state_dir;
};

struct agent_stream {
	const struct agent	*agent;
	struct buf		 line;		/* the unfinished line */
	int			 skipping;	/* a line over AGENT_LINE_MAX, dropped to its end */
	struct buf		 tail;		/* command: the last of stdout */
	struct buf		 text;		/* text gathered for the final message */
	struct agent_result	 r;
	int			 final;		/* the agent's final event was seen */
};

void	agent_args_add(struct agent_args *, const char *);
/* Replaces *field with a copy of s, cut at AGENT_MESSAGE_MAX. */
void	agent_set(char **field, const char *s);
const char *agent_json_str(const json_t *, const char *key);

/* For the render functions: one part of the transcript each. */
void	transcript_text(struct transcript *, const char *);	/* the assistant's words */
void	transcript_thinking(struct transcript *, const char *);
/* A tool call: its name and arguments (an object as "key: value, ...", or a string). */
void	transcript_tool(struct transcript *, const char *name, const json_t *args);
/* A tool's result, folded to its first line and how many more; error: it failed. */
void	transcript_output(struct transcript *, const char *, int error);
void	transcript_error(struct transcript *, const char *);
/* What spur says about the stream (session, end); not the agent's words, but holds them. */
void	transcript_note(struct transcript *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* Whether id is the one last given (then 1), remembering it: an event told in two parts. */
int	transcript_same(struct transcript *, const char *id);

extern const struct agent agent_claude;
extern const struct agent agent_codex;
extern const struct agent agent_opencode;
extern const struct agent agent_command;

#endif
