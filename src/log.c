/* log.c: leveled key=value log lines on stderr, one line per happening. */
#include "spur.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static enum log_level	 log_level = LOG_INFO;
static const char	*log_name = "spur";

static const char *log_level_names[] = { "debug", "info", "warn", "error" };

void
log_init(enum log_level level, const char *name)
{
	log_level = level;
	if (name != NULL)
		log_name = name;
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

/* A C1 control character in UTF-8: C2 80 to C2 9F. */
#define LOG_C1(p)	((unsigned char)(p)[0] == 0xc2 && (unsigned char)(p)[1] >= 0x80 && \
			    (unsigned char)(p)[1] <= 0x9f)

/*
 * Quotes a value so that a log line stays one line and parseable: bare when it
 * has no spaces, quotes or control characters, else double-quoted with escapes.
 * Returns one of a small ring of static buffers, so several may be used per line.
 */
const char *
log_q(const char *s)
{
	static __thread char	 ring[8][512];	/* per thread: workers log too */
	static __thread int	 idx;
	char		*out = ring[idx++ % 8];
	size_t		 o = 0, max = sizeof ring[0] - 8;
	int		 bare = 1;
	const char	*p;

	if (s == NULL)
		return "-";
	if (*s == '\0')
		return "\"\"";
	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p <= ' ' || *p == '"' || *p == '\\' || *p == '=' ||
		    (unsigned char)*p == 0x7f || LOG_C1(p))
			bare = 0;
	}
	if (bare && strlen(s) < max) {
		strcpy(out, s);
		return out;
	}
	out[o++] = '"';
	for (p = s; *p != '\0' && o < max; p++) {
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = c;
		} else if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c < ' ' || c == 0x7f) {
			o += snprintf(out + o, 6, "\\x%02x", c);
		} else if (LOG_C1(p)) {
			/* A C1 control (CSI, OSC...) would act on the terminal of whoever reads the log. */
			if (o + 6 >= max)
				break;
			o += snprintf(out + o, 8, "\\u%04x", (unsigned char)p[1]);
			p++;
		} else
			out[o++] = c;
	}
	if (*p != '\0') {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

static void
log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char		 line[4096], ts[40];
	int		 n;

	format_time(now_ms(), ts, sizeof ts);
	n = snprintf(line, sizeof line, "%s %s level=%s ", ts, log_name,
	    log_level_names[level]);
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	vsnprintf(line + n, sizeof line - n, fmt, ap);
	fprintf(stderr, "%s\n", line);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list	 ap;

	if (level < log_level)
		return;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vmsg(LOG_ERROR, fmt, ap);
	va_end(ap);
	abort();
}
