/* transcript.c: an agent's JSON stream as a transcript a person reads (`spur logs`), escaped for the terminal. */
#include "spur.h"
#include "agent.h"
#include "cmd.h"
#include "event.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SGR_RESET	"\033[0m"
#define SGR_DIM		"\033[2m"
#define SGR_TOOL	"\033[1;36m"
#define SGR_ERROR	"\033[1;31m"

struct transcript {
	const struct agent	*agent;
	int			 flags;
	struct buf		 line;		/* the unfinished line */
	int			 skipping;	/* a line over AGENT_LINE_MAX, dropped to its end */
	struct buf		*out;		/* where the parts go while a line renders */
	char			*last_id;	/* transcript_same */
	int			 open;		/* transcript_chunk's: 1 words, 2 thoughts */
};

struct transcript *
transcript_create(const struct agent *a, int flags)
{
	struct transcript	*t;

	t = xcalloc(1, sizeof *t);
	t->agent = a;
	t->flags = flags;
	buf_init(&t->line, AGENT_LINE_MAX);
	return t;
}

void
transcript_free(struct transcript *t)
{
	if (t == NULL)
		return;
	buf_free(&t->line);
	free(t->last_id);
	free(t);
}

static void
transcript_sgr(struct transcript *t, const char *sgr)
{
	if (t->flags & TRANSCRIPT_COLOR)
		(void)buf_adds(t->out, sgr);
}

/* Ends the line streamed words are on, before another part. */
static void
transcript_break(struct transcript *t)
{
	if (t->open == 0)
		return;
	if (t->open == 2)
		transcript_sgr(t, SGR_RESET);
	(void)buf_addc(t->out, '\n');
	t->open = 0;
}

/* Appends s, escaped; flags as term_escape's. */
static void
transcript_escaped(struct transcript *t, const char *s, size_t len, int flags)
{
	(void)term_escape(t->out, s, len, flags);
}

void
transcript_chunk(struct transcript *t, const char *s, int thinking)
{
	if (s == NULL || *s == '\0')
		return;
	if (t->open != 0 && t->open != 1 + thinking)
		transcript_break(t);
	if (t->open == 0 && thinking) {
		transcript_sgr(t, SGR_DIM);
		(void)buf_adds(t->out, "thinking: ");
	}
	t->open = 1 + thinking;
	transcript_escaped(t, s, strlen(s), TERM_KEEP_NL | TERM_KEEP_TAB);
}

/* The length of s cut to at most max bytes, not inside a UTF-8 sequence. */
static size_t
transcript_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/* One line of at most TRANSCRIPT_ARGS_MAX bytes of s (newlines shown as \n), "..." when cut. */
static void
transcript_short(struct transcript *t, const char *s, size_t len)
{
	size_t	n = transcript_cut(s, len, TRANSCRIPT_ARGS_MAX);

	transcript_escaped(t, s, n, TERM_KEEP_TAB);
	if (n < len)
		(void)buf_adds(t->out, "...");
}

void
transcript_text(struct transcript *t, const char *s)
{
	size_t	len = strlen(s);

	transcript_break(t);

	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
		len--;
	if (len == 0)
		return;
	transcript_escaped(t, s, len, TERM_KEEP_NL | TERM_KEEP_TAB);
	(void)buf_addc(t->out, '\n');
}

/* The first non-empty line of s and how many lines follow it. */
static void
transcript_fold(struct transcript *t, const char *s)
{
	const char	*p, *nl;
	size_t		 more = 0, len;

	while (*s == '\n' || *s == '\r' || *s == ' ')
		s++;
	if (*s == '\0') {
		(void)buf_adds(t->out, "(no output)");
		return;
	}
	nl = strchr(s, '\n');
	len = nl != NULL ? (size_t)(nl - s) : strlen(s);
	if (len > 0 && s[len - 1] == '\r')
		len--;
	transcript_short(t, s, len);
	for (p = nl; p != NULL && p[1] != '\0'; p = strchr(p + 1, '\n'))
		more++;
	if (more > 0)
		(void)buf_addf(t->out, " (%zu more line%s)", more, more == 1 ? "" : "s");
}

void
transcript_thinking(struct transcript *t, const char *s)
{
	transcript_break(t);
	transcript_sgr(t, SGR_DIM);
	(void)buf_adds(t->out, "thinking: ");
	transcript_fold(t, s);
	transcript_sgr(t, SGR_RESET);
	(void)buf_addc(t->out, '\n');
}

/* Runs of spaces, tabs and newlines as one space: arguments on one line. */
static void
transcript_squeeze(struct buf *b)
{
	size_t	i, n = 0;
	int	space = 0;

	for (i = 0; i < b->len; i++) {
		if (strchr(" \t\r\n", b->data[i]) != NULL) {
			space = 1;
			continue;
		}
		if (space && n > 0)
			b->data[n++] = ' ';
		space = 0;
		b->data[n++] = b->data[i];
	}
	b->len = n;
}

void
transcript_tool(struct transcript *t, const char *name, const json_t *args)
{
	struct buf	 b;
	const char	*key;
	json_t		*v;
	char		*dump;
	int		 first = 1;

	transcript_break(t);
	(void)buf_adds(t->out, "● ");
	transcript_sgr(t, SGR_TOOL);
	transcript_short(t, name != NULL ? name : "tool", strlen(name != NULL ? name : "tool"));
	transcript_sgr(t, SGR_RESET);
	buf_init(&b, 0);
	if (json_is_string(args))
		(void)buf_adds(&b, json_string_value(args));
	else if (json_is_object(args)) {
		json_object_foreach((json_t *)args, key, v) {
			(void)buf_addf(&b, "%s%s: ", first ? "" : ", ", key);
			first = 0;
			if (json_is_string(v)) {
				(void)buf_adds(&b, json_string_value(v));
				while (b.len > 0 && strchr(" \t\r\n", b.data[b.len - 1]) != NULL)
					b.len--;
			}
			else if ((dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) != NULL) {
				(void)buf_adds(&b, dump);
				free(dump);
			}
		}
	}
	transcript_squeeze(&b);
	if (b.len > 0) {
		(void)buf_addc(t->out, '(');
		transcript_short(t, b.data, b.len);
		(void)buf_addc(t->out, ')');
	}
	buf_free(&b);
	(void)buf_addc(t->out, '\n');
}

void
transcript_output(struct transcript *t, const char *s, int error)
{
	transcript_break(t);
	(void)buf_adds(t->out, "  ⎿ ");
	if (error) {
		transcript_sgr(t, SGR_ERROR);
		(void)buf_adds(t->out, "error: ");
	} else
		transcript_sgr(t, SGR_DIM);
	transcript_fold(t, s != NULL ? s : "");
	transcript_sgr(t, SGR_RESET);
	(void)buf_addc(t->out, '\n');
}

void
transcript_error(struct transcript *t, const char *s)
{
	transcript_break(t);
	transcript_sgr(t, SGR_ERROR);
	(void)buf_adds(t->out, "✗ error: ");
	transcript_escaped(t, s, strlen(s), TERM_KEEP_NL | TERM_KEEP_TAB);
	transcript_sgr(t, SGR_RESET);
	(void)buf_addc(t->out, '\n');
}

void
transcript_note(struct transcript *t, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	xvasprintf(&s, fmt, ap);
	va_end(ap);
	transcript_break(t);
	transcript_sgr(t, SGR_DIM);
	(void)buf_adds(t->out, "── ");
	transcript_escaped(t, s, strlen(s), 0);
	transcript_sgr(t, SGR_RESET);
	(void)buf_addc(t->out, '\n');
	free(s);
}

int
transcript_same(struct transcript *t, const char *id)
{
	int	same = id != NULL && t->last_id != NULL && strcmp(id, t->last_id) == 0;

	free(t->last_id);
	t->last_id = id != NULL ? xstrdup(id) : NULL;
	return same;
}

/* One complete line: the agent renders a JSON object of its stream, anything else is text. */
static void
transcript_line(struct transcript *t, const char *p, size_t len)
{
	json_t	*j = NULL;
	char	*cause = NULL;

	if (len > 0 && p[len - 1] == '\r')
		len--;
	if (t->agent != NULL && t->agent->render != NULL && len > 0 && p[0] == '{') {
		if ((j = json_parse_bounded(p, len, 64, &cause)) == NULL)
			free(cause);
		else if (json_is_object(j)) {
			t->agent->render(t, j);
			json_decref(j);
			return;
		}
		json_decref(j);
	}
	transcript_break(t);
	transcript_escaped(t, p, len, TERM_KEEP_TAB);
	(void)buf_addc(t->out, '\n');
}

void
transcript_feed(struct transcript *t, const char *data, size_t len, struct buf *out)
{
	const char	*nl;
	size_t		 n;

	t->out = out;
	while (len > 0) {
		nl = memchr(data, '\n', len);
		n = nl != NULL ? (size_t)(nl - data) : len;
		if (!t->skipping && buf_add(&t->line, data, n) != 0) {
			t->skipping = 1;
			buf_reset(&t->line);
		}
		if (nl == NULL)
			break;
		if (t->skipping)
			transcript_note(t, "a line of more than %d MiB, not shown (spur logs --raw "
			    "has it)", AGENT_LINE_MAX >> 20);
		else
			transcript_line(t, t->line.data != NULL ? t->line.data : "", t->line.len);
		t->skipping = 0;
		buf_reset(&t->line);
		data += n + 1;
		len -= n + 1;
	}
	t->out = NULL;
}

void
transcript_end(struct transcript *t, struct buf *out)
{
	t->out = out;
	if (t->skipping)
		transcript_note(t, "a line of more than %d MiB, not shown (spur logs --raw has it)",
		    AGENT_LINE_MAX >> 20);
	else if (t->line.len > 0)
		transcript_line(t, t->line.data, t->line.len);
	transcript_break(t);
	t->skipping = 0;
	buf_reset(&t->line);
	t->out = NULL;
}
