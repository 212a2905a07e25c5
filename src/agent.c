/* agent.c: the table of agent CLIs, their argv, and the bounded line reader all their streams share. */
#include "spur.h"
#include "conf.h"
#include "agent.h"
#include "event.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct agent *agent_table[] = {
	&agent_claude, &agent_codex, &agent_opencode, &agent_command,
};

#define AGENT_ARGS_MAX	256

const struct agent *
agent_find(const char *name)
{
	size_t	i;

	if (name == NULL)
		return NULL;
	for (i = 0; i < SPUR_ARRLEN(agent_table); i++) {
		if (strcmp(agent_table[i]->name, name) == 0)
			return agent_table[i];
	}
	return NULL;
}

const char *
agent_name(const struct agent *a)
{
	return a->name;
}

int
agent_has_model(const struct agent *a)
{
	return a->api != NULL;
}

int
agent_needs_command(const struct agent *a)
{
	return a->command == NULL;
}

const char *
agent_list(int models)
{
	static char	*list[2];
	const char	*names[SPUR_ARRLEN(agent_table)];
	struct buf	 b;
	size_t		 i, n = 0;

	models = models != 0;
	if (list[models] != NULL)
		return list[models];
	for (i = 0; i < SPUR_ARRLEN(agent_table); i++) {
		if (!models || agent_has_model(agent_table[i]))
			names[n++] = agent_table[i]->name;
	}
	buf_init(&b, 0);
	for (i = 0; i < n; i++)
		buf_addf(&b, "%s%s", names[i], i + 2 < n ? ", " : i + 2 == n ? " or " : "");
	return list[models] = buf_take(&b);
}

int
agent_takes_input(const struct agent *a)
{
	return a->input != NULL || a->steer != NULL;
}

int
agent_takes_connections(const struct agent *a)
{
	return a->connections;
}

char *
agent_input(const struct agent *a, const char *text, size_t *len)
{
	char	*s;

	if (a->input == NULL)
		return NULL;
	s = a->input(text);
	*len = strlen(s);
	return s;
}

void
agent_setup_env(struct agent_setup *s, const char *fmt, ...)
{
	va_list	ap;

	if (s->nenv >= AGENT_SETUP_ENV_MAX)
		fatal("agent_setup_env: more than %d variables", AGENT_SETUP_ENV_MAX);
	va_start(ap, fmt);
	xvasprintf(&s->env[s->nenv++], fmt, ap);
	va_end(ap);
}

void
agent_setup_arg(struct agent_setup *s, const char *arg)
{
	if (s->nargs >= AGENT_SETUP_ARGS_MAX)
		fatal("agent_setup_arg: more than %d arguments", AGENT_SETUP_ARGS_MAX);
	s->args[s->nargs++] = xstrdup(arg);
}

void
agent_setup_clear(struct agent_setup *s)
{
	size_t	i;

	for (i = 0; i < s->nenv; i++)
		free(s->env[i]);
	for (i = 0; i < s->nargs; i++)
		free(s->args[i]);
	free(s->file_text);
	json_decref(s->session_mcp);
	memset(s, 0, sizeof *s);
}

void
agent_args_add(struct agent_args *aa, const char *s)
{
	if (aa->argc >= AGENT_ARGS_MAX)
		return;
	aa->argv = xreallocarray(aa->argv, aa->argc + 2, sizeof *aa->argv);
	aa->argv[aa->argc++] = xstrdup(s);
	aa->argv[aa->argc] = NULL;
}

/* A model name or session id goes into argv: it must not read as a flag or hold controls. */
static int
agent_valid_id(const char *s)
{
	size_t	i;

	if (s == NULL || *s == '\0' || *s == '-' || strlen(s) > AGENT_ID_MAX)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (!isalnum((unsigned char)s[i]) && strchr("-_.:/@[]+=", s[i]) == NULL)
			return 0;
	}
	return 1;
}

char **
agent_argv(const struct agent *a, const struct agent_conf *conf,
    const struct agent_request *req, char **cause)
{
	struct agent_args	 aa = { NULL, 0 };
	char *const		*base;
	char			*fallback[2];
	size_t			 i;

	if (req->model != NULL && !agent_valid_id(req->model)) {
		*cause = xstrdup("invalid model name");
		return NULL;
	}
	if (req->resume != NULL && !agent_valid_id(req->resume)) {
		*cause = xstrdup("invalid agent session id to resume");
		return NULL;
	}
	if (a->command == NULL)
		base = req->command;
	else if (conf != NULL && conf->command != NULL && conf->command[0] != NULL)
		base = conf->command;
	else {
		fallback[0] = (char *)a->command;
		fallback[1] = NULL;
		base = fallback;
	}
	if (base == NULL || base[0] == NULL || *base[0] == '\0') {
		*cause = xprintf("agent %s needs a command", a->name);
		return NULL;
	}
	for (i = 0; base[i] != NULL; i++)
		agent_args_add(&aa, base[i]);
	if (a->args != NULL)
		a->args(&aa, req);
	if (aa.argc >= AGENT_ARGS_MAX) {
		agent_argv_free(aa.argv);
		*cause = xprintf("agent %s: too many arguments", a->name);
		return NULL;
	}
	return aa.argv;
}

void
agent_argv_free(char **argv)
{
	size_t	i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

void
agent_set(char **field, const char *s)
{
	static const char	 cut[] = "\n[cut: message longer than 64 KiB]";
	size_t			 len;

	free(*field);
	*field = NULL;
	if (s == NULL)
		return;
	len = strlen(s);
	if (len <= AGENT_MESSAGE_MAX) {
		*field = xstrdup(s);
		return;
	}
	*field = xmalloc(AGENT_MESSAGE_MAX + sizeof cut);
	memcpy(*field, s, AGENT_MESSAGE_MAX);
	memcpy(*field + AGENT_MESSAGE_MAX, cut, sizeof cut);
}

const char *
agent_json_str(const json_t *j, const char *key)
{
	json_t	*v = json_object_get(j, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

struct agent_stream *
agent_stream_create(const struct agent *a)
{
	struct agent_stream	*s;

	s = xcalloc(1, sizeof *s);
	s->agent = a;
	buf_init(&s->line, AGENT_LINE_MAX);
	/* Twice the kept tail, so that keeping the last part moves memory seldom. */
	buf_init(&s->tail, 0);
	buf_init(&s->text, AGENT_MESSAGE_MAX + 1);
	buf_init(&s->reply, 0);
	/* An agent that holds messages takes one from its start, until its turn has begun. */
	s->ready = a->holds;
	return s;
}

/* One complete line: a JSON object for the agent, anything else is ignored (logs, banners). */
static void
agent_stream_line(struct agent_stream *s, const char *p, size_t len)
{
	json_t	*j;
	char	*cause = NULL;

	while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == ' '))
		len--;
	if (len == 0 || p[0] != '{')
		return;
	if ((j = json_parse_bounded(p, len, 64, &cause)) == NULL) {
		free(cause);
		return;
	}
	if (json_is_object(j))
		s->agent->line(s, j);
	json_decref(j);
}

/* The command agent: keep the last AGENT_MESSAGE_MAX bytes of stdout. */
static void
agent_stream_tail(struct agent_stream *s, const char *data, size_t len)
{
	size_t	keep;

	if (len >= AGENT_MESSAGE_MAX) {
		buf_reset(&s->tail);
		(void)buf_add(&s->tail, data + len - AGENT_MESSAGE_MAX, AGENT_MESSAGE_MAX);
		return;
	}
	(void)buf_add(&s->tail, data, len);
	if (s->tail.len > 2 * AGENT_MESSAGE_MAX) {
		keep = AGENT_MESSAGE_MAX;
		memmove(s->tail.data, s->tail.data + s->tail.len - keep, keep);
		s->tail.len = keep;
		s->tail.data[keep] = '\0';
	}
}

void
agent_stream_feed(struct agent_stream *s, const char *data, size_t len)
{
	const char	*nl;
	size_t		 n;

	if (s->agent->line == NULL) {
		agent_stream_tail(s, data, len);
		return;
	}
	while (len > 0) {
		nl = memchr(data, '\n', len);
		n = nl != NULL ? (size_t)(nl - data) : len;
		if (!s->skipping && buf_add(&s->line, data, n) != 0) {
			log_warn("event=agent.line_skipped max_bytes=%d agent=%s",
			    AGENT_LINE_MAX, s->agent->name);
			s->skipping = 1;
			buf_reset(&s->line);
		}
		if (nl == NULL)
			return;
		if (!s->skipping)
			agent_stream_line(s, s->line.data != NULL ? s->line.data : "",
			    s->line.len);
		s->skipping = 0;
		buf_reset(&s->line);
		data += n + 1;
		len -= n + 1;
	}
}

int
agent_stream_final(const struct agent_stream *s)
{
	return s->final;
}

json_t *
agent_json_text(const char *text)
{
	struct buf	 b;
	json_t		*j;
	size_t		 len = strlen(text), i = 0;
	uint32_t	 cp;
	int		 n;

	buf_init(&b, 0);
	while (i < len) {
		if ((n = utf8_len((const unsigned char *)text + i, len - i, &cp)) <= 0) {
			buf_adds(&b, "\xef\xbf\xbd");
			i++;
			continue;
		}
		buf_add(&b, text + i, (size_t)n);
		i += (size_t)n;
	}
	j = json_stringn(b.data != NULL ? b.data : "", b.len);
	buf_free(&b);
	if (j == NULL)
		fatal("agent_json_text: out of memory");
	return j;
}

char *
agent_json_line(json_t *j)
{
	char	*s, *line;

	if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL)
		fatal("agent_json_line: out of memory");
	json_decref(j);
	line = xprintf("%s\n", s);
	free(s);
	return line;
}

char *
agent_first_input(const struct agent *a, const struct agent_request *req, const char *prompt,
    size_t *len)
{
	char	*s;

	if (a->open == NULL)
		return agent_input(a, prompt, len);
	s = a->open(req);
	*len = strlen(s);
	return s;
}

void
agent_stream_prompt(struct agent_stream *s, const struct agent_request *req, const char *prompt)
{
	free(s->prompt);
	free(s->model);
	free(s->resume);
	free(s->workdir);
	s->prompt = xstrdup(prompt);
	s->model = req->model != NULL ? xstrdup(req->model) : NULL;
	s->resume = req->resume != NULL ? xstrdup(req->resume) : NULL;
	s->workdir = req->workdir != NULL ? xstrdup(req->workdir) : NULL;
	json_decref(s->mcp);
	s->mcp = req->mcp != NULL ? json_incref((json_t *)req->mcp) : NULL;
}

void
agent_stream_send(struct agent_stream *s, json_t *j)
{
	char	*line = agent_json_line(j);

	(void)buf_adds(&s->reply, line);
	free(line);
}

int
agent_stream_ready(const struct agent_stream *s)
{
	return s->agent->steer == NULL || (s->ready && !s->final);
}

int
agent_stream_held(const struct agent_stream *s)
{
	return s->held;
}

char *
agent_stream_input(struct agent_stream *s, const char *text, size_t *len)
{
	if (s->agent->steer == NULL)
		return agent_input(s->agent, text, len);
	s->agent->steer(s, text);
	return agent_stream_reply(s, len);
}

char *
agent_stream_reply(struct agent_stream *s, size_t *len)
{
	char	*out;

	if (s->reply.len == 0)
		return NULL;
	*len = s->reply.len;
	out = xmalloc(s->reply.len + 1);
	memcpy(out, s->reply.data, s->reply.len);
	out[s->reply.len] = '\0';
	buf_reset(&s->reply);
	return out;
}

void
agent_stream_end(struct agent_stream *s, int exit_ok, struct agent_result *out)
{
	char	*p, *e;

	if (s->agent->line == NULL) {
		/* The whole of stdout is the message, trimmed. */
		p = buf_cstr(&s->tail);
		while (isspace((unsigned char)*p))
			p++;
		e = p + strlen(p);
		while (e > p && isspace((unsigned char)e[-1]))
			e--;
		*e = '\0';
		agent_set(&s->r.message, *p != '\0' ? p : NULL);
	} else {
		if (!s->skipping && s->line.len > 0)
			agent_stream_line(s, s->line.data, s->line.len);
		buf_reset(&s->line);
		if (s->agent->final_required && !s->final) {
			s->r.error = 1;
			if (s->r.error_text == NULL)
				s->r.error_text = xprintf("%s ended without a final "
				    "result", s->agent->name);
		}
	}
	if (!exit_ok) {
		s->r.error = 1;
		if (s->r.error_text == NULL)
			s->r.error_text = xprintf("%s exited with failure", s->agent->name);
	}
	*out = s->r;
	memset(&s->r, 0, sizeof s->r);
}

void
agent_stream_free(struct agent_stream *s)
{
	if (s == NULL)
		return;
	buf_free(&s->line);
	buf_free(&s->tail);
	buf_free(&s->text);
	buf_free(&s->reply);
	free(s->prompt);
	free(s->model);
	free(s->resume);
	free(s->workdir);
	json_decref(s->mcp);
	json_decref(s->state);
	agent_result_clear(&s->r);
	free(s);
}

void
agent_result_clear(struct agent_result *r)
{
	free(r->message);
	free(r->session);
	free(r->error_text);
	memset(r, 0, sizeof *r);
}
