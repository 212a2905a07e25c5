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
	const char	*workdir;	/* its working directory as it sees it; NULL: unknown */
	const json_t	*mcp;		/* agent_setup's session_mcp; NULL: none */
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
/* An automation's agent when it names none. */
#define AGENT_DEFAULT		"claude"
/* Whether it talks to a model (through the gateway); agent: command does not. */
int			 agent_has_model(const struct agent *);
/* Whether its argv is the automation's (agent: command). */
int			 agent_needs_command(const struct agent *);
/* The agents' names for a message: "claude, codex, opencode or command"; models: those only. */
const char		*agent_list(int models);

/*
 * A model agent's API: where it is, and how its base URL looks inside the
 * sandbox (the gateway's, in front of it).
 */
struct agent_api {
	const char	*upstream;	/* default, without agents.NAME.api_url */
	const char	*prefix;	/* path of the in-sandbox base URL, dropped upstream */
	int		 bearer;	/* Authorization: Bearer, else x-api-key */
	const char	*models;	/* under upstream: the list of models, a cheap call a key must pass */
};

/* All the sandbox ever holds of a model credential. */
#define AGENT_PLACEHOLDER_KEY	"spur-placeholder-key"
#define AGENT_SETUP_ENV_MAX	8
#define AGENT_SETUP_ARGS_MAX	4

/*
 * What an agent needs to reach its model through the gateway: its
 * environment, and at most one configuration file, which egress.c writes.
 */
enum agent_file_place {
	AGENT_FILE_NONE,
	AGENT_FILE_HOME,	/* under HOME (kept with its sessions), owned by the sandbox user */
	AGENT_FILE_RUN,		/* beside the sockets, read-only: the run cannot change it */
};

struct agent_setup {
	const char		*base;		/* the gateway's URL, as the agent sees it */
	const char		*home;		/* HOME, as the agent sees it */
	const char		*run_dir;	/* the run's network directory, as the agent sees it */
	/* The run's own MCP server (SPEC 18): its URL and credential; NULL: none. */
	const char		*mcp_url;
	const char		*mcp_token;
	/* The connections' MCP servers by name, as connections_for_run made them; NULL: none. */
	const json_t		*connections;
	char			*args[AGENT_SETUP_ARGS_MAX];	/* after the agent's own */
	size_t			 nargs;
	char			*env[AGENT_SETUP_ENV_MAX];
	size_t			 nenv;
	enum agent_file_place	 place;
	const char		*file_dir;	/* AGENT_FILE_HOME: its directory under HOME */
	const char		*file_name;
	char			*file_text;
	/* Out: MCP servers its protocol's session is given (agent_request's mcp); NULL: none. */
	json_t			*session_mcp;
};

/* For the setup functions: one more variable (NAME=value). */
void	agent_setup_env(struct agent_setup *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
void	agent_setup_clear(struct agent_setup *);
/* For the setup functions: one more argument. */
void	agent_setup_arg(struct agent_setup *, const char *);
/*
 * The argv to run in the sandbox: agents.NAME.command (conf, may be NULL) or
 * the default, then the agent's own flags. NULL and cause on a bad request
 * (command agent without command, a model or session id that is no id).
 */
char			**agent_argv(const struct agent *, const struct agent_conf *,
			    const struct agent_request *, char **cause);
void			 agent_argv_free(char **);

/*
 * Whether the agent takes messages while it works (SPEC 18): its stdin stays
 * open and each message is one agent_input; else a message waits for the
 * session's next run.
 */
int			 agent_takes_input(const struct agent *);
/* Whether it is configured with an automation's connections (SPEC 18): the model agents. */
int			 agent_takes_connections(const struct agent *);
/* text as the bytes of one message on the agent's stdin (the first is the prompt). */
char			*agent_input(const struct agent *, const char *text, size_t *len);
/*
 * What its stdin gets first: the prompt as a message, or for an agent that
 * speaks a protocol (Codex's app-server) the requests that open its session,
 * the prompt following once it answers (agent_stream_prompt, _reply).
 */
char			*agent_first_input(const struct agent *, const struct agent_request *,
			    const char *prompt, size_t *len);

/* Reads the agent's stdout as it comes (any chunking), bounded. */
struct agent_stream	*agent_stream_create(const struct agent *);
void			 agent_stream_feed(struct agent_stream *, const char *, size_t);
/* Whether the agent's turn is over (its final event was seen): it takes no more input. */
int			 agent_stream_final(const struct agent_stream *);
/*
 * The prompt, kept for an agent that takes it once its session is open, with
 * the request's model and session to resume (for its protocol's requests).
 */
void			 agent_stream_prompt(struct agent_stream *,
			    const struct agent_request *, const char *prompt);
/*
 * Whether a message can go in now: its turn has started and is not over (an
 * agent that holds messages takes one from its start, held until its turn).
 */
int			 agent_stream_ready(const struct agent_stream *);
/* How many messages it took are held still, not yet sent to the agent (lost if it ends). */
int			 agent_stream_held(const struct agent_stream *);
/* A message while it works, as the bytes its stdin takes now (NULL: none, or it is held). */
char			*agent_stream_input(struct agent_stream *, const char *text, size_t *len);
/* What the agent's answers call for on its stdin (moves it to the caller), NULL: nothing. */
char			*agent_stream_reply(struct agent_stream *, size_t *len);
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
	/* Its model API; NULL: it talks to no model (command). */
	const struct agent_api	*api;
	/* Fills in its environment and configuration for the gateway; NULL: none. */
	void		(*setup)(struct agent_setup *);
	/* One message as its stdin takes it while it works; NULL: it takes none. */
	char		*(*input)(const char *);
	/*
	 * Or a protocol on stdin: the requests opening its session, then a
	 * message into its turn (into reply); NULL: none.
	 */
	char		*(*open)(const struct agent_request *);
	void		 (*steer)(struct agent_stream *, const char *);
	/* steer takes a message from the start, held until its turn has begun (Codex) */
	int		 holds;
	int		 connections;	/* its setup configures agent_setup's connections */
};

struct agent_stream {
	const struct agent	*agent;
	struct buf		 line;		/* the unfinished line */
	int			 skipping;	/* a line over AGENT_LINE_MAX, dropped to its end */
	struct buf		 tail;		/* command: the last of stdout */
	struct buf		 text;		/* text gathered for the final message */
	struct agent_result	 r;
	int			 final;		/* the agent's final event was seen */
	char			*prompt;	/* agent_stream_prompt's */
	char			*model;		/* and the request's, NULL: none */
	char			*resume;
	char			*workdir;
	json_t			*mcp;		/* agent_request's */
	struct buf		 reply;		/* for its stdin, agent_stream_reply's */
	json_t			*state;		/* the protocol's own (ids, turn), NULL: none */
	/* steer: it takes a message now (into its turn, or held: holds) */
	int			 ready;
	int			 held;		/* holds: messages held so, not yet sent */
};

void	agent_args_add(struct agent_args *, const char *);
/* Replaces *field with a copy of s, cut at AGENT_MESSAGE_MAX. */
void	agent_set(char **field, const char *s);
const char *agent_json_str(const json_t *, const char *key);
/* text as a JSON string, each byte that is no UTF-8 replaced (U+FFFD). */
json_t	*agent_json_text(const char *);
/* j (consumed) as one line of stdin: compact JSON and a newline. */
char	*agent_json_line(json_t *);
/* j (consumed) as one line for the agent's stdin, after what is waiting (agent_stream_reply). */
void	 agent_stream_send(struct agent_stream *, json_t *);

/* For the render functions: one part of the transcript each. */
void	transcript_text(struct transcript *, const char *);	/* the assistant's words */
/* Words as they stream (thinking: its thoughts), run on until another part; NULL: none. */
void	transcript_chunk(struct transcript *, const char *, int thinking);
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
