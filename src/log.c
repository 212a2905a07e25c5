/* log.c: leveled key=value log lines on stderr, one line per happening. */
#include "spur.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static enum log_level	 log_level = LOG_INFO;
static const char	*log_name = "spur";
static int		 log_json;	/* log.format: json */

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

void
log_set_json(int on)
{
	log_json = on;
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

/* Appends s[0..len) as the inside of a JSON string; invalid UTF-8 bytes as the text \\xHH. */
static size_t
log_json_str(char *out, size_t o, size_t max, const char *s, size_t len)
{
	static const char	 hex[] = "0123456789abcdef";
	const unsigned char	*p = (const unsigned char *)s;
	uint32_t		 cp;
	size_t			 i = 0;
	int			 k;

	while (i < len && o + 8 < max) {
		if (p[i] == '"' || p[i] == '\\') {
			out[o++] = '\\';
			out[o++] = p[i++];
		} else if (p[i] == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
			i++;
		} else if (p[i] < 0x20 || p[i] == 0x7f) {
			o += snprintf(out + o, 7, "\\u%04x", p[i++]);
		} else if (p[i] < 0x80) {
			out[o++] = p[i++];
		} else if ((k = utf8_len(p + i, len - i, &cp)) > 0 && (cp < 0x80 || cp > 0x9f)) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
		} else {
			/* Not UTF-8, or a C1 control: the text a key=value line would show. */
			out[o++] = '\\';
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[p[i] >> 4];
			out[o++] = hex[p[i] & 15];
			i++;
		}
	}
	return o;
}

/*
 * A key=value message as one JSON object: {"time", "level", "name", then each
 * key with its value as a string, log_q's quoting undone (\" \\ \n; the
 * \xHH and \uHHHH it wrote for control characters stay as that text)}.
 * Whatever does not read as key=value goes whole into "msg".
 */
static void
log_to_json(const char *ts, enum log_level level, const char *msg, char *out, size_t max)
{
	char		 val[4096];
	const char	*p = msg, *k;
	size_t		 o, klen, v;

	o = (size_t)snprintf(out, max, "{\"time\":\"%s\",\"level\":\"%s\",\"name\":\"", ts,
	    log_level_names[level]);
	o = log_json_str(out, o, max, log_name, strlen(log_name));
	out[o++] = '"';
	while (*p != '\0' && o + 16 < max) {
		p += strspn(p, " ");
		if (*p == '\0')
			break;
		k = p;
		klen = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-");
		if (klen == 0 || p[klen] != '=') {
			o += (size_t)snprintf(out + o, max - o, ",\"msg\":\"");
			o = log_json_str(out, o, max, p, strlen(p));
			out[o++] = '"';
			break;
		}
		p += klen + 1;
		v = 0;
		if (*p == '"') {
			for (p++; *p != '\0' && *p != '"' && v < sizeof val; p++) {
				if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
					val[v++] = *++p;
				else if (*p == '\\' && p[1] == 'n') {
					val[v++] = '\n';
					p++;
				} else
					val[v++] = *p;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p != '\0' && *p != ' ' && v < sizeof val)
				val[v++] = *p++;
		}
		o += (size_t)snprintf(out + o, max - o, ",\"");
		o = log_json_str(out, o, max, k, klen);
		o += (size_t)snprintf(out + o, max - o, "\":\"");
		o = log_json_str(out, o, max, val, v);
		out[o++] = '"';
	}
	out[o++] = '}';
	out[o] = '\0';
}

static void
log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char		 line[4096], ts[40], js[16384];
	int		 n;

	format_time(now_ms(), ts, sizeof ts);
	if (log_json) {
		vsnprintf(line, sizeof line, fmt, ap);
		log_to_json(ts, level, line, js, sizeof js);
		fprintf(stderr, "%s\n", js);
		return;
	}
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
