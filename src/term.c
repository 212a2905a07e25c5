/* term.c: text that a webhook sender or an agent wrote, escaped so that printing it cannot drive the operator's terminal. */
#include "spur.h"
#include "cmd.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/*
 * Length of the UTF-8 sequence at s with its code point in *cp: 1 to 4, 0 when
 * it is not valid UTF-8 (overlong, surrogate, past U+10FFFF, a bad byte), -1
 * when it is a valid start cut short by the end of the input.
 */
int
utf8_len(const unsigned char *s, size_t len, uint32_t *cp)
{
	uint32_t	 v, min;
	size_t		 n, i;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		v = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		v = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		v = s[0] & 0x07;
		min = 0x10000;
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if (i >= len)
			return -1;
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return (int)n;
}

/*
 * Appends s to b with every C0 control (but newline and tab when the flags keep
 * them), DEL, C1 control (U+0080..U+009F, which terminals read as CSI, OSC, ST)
 * and byte of invalid UTF-8 written visibly: \n, \t, \r, \x1b, \u009b, \xff.
 * Returns the bytes consumed: all of them, except, with TERM_MORE, a UTF-8
 * sequence cut at the end, which the caller passes again with what follows.
 */
size_t
term_escape(struct buf *b, const char *s, size_t len, int flags)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 i = 0;
	uint32_t		 cp;
	char			 esc[8];
	int			 n;

	while (i < len) {
		n = utf8_len(p + i, len - i, &cp);
		if (n == -1 && (flags & TERM_MORE))
			break;
		if (n <= 0) {
			snprintf(esc, sizeof esc, "\\x%02x", p[i]);
			buf_adds(b, esc);
			i++;
			continue;
		}
		if ((cp == '\n' && (flags & TERM_KEEP_NL)) ||
		    (cp == '\t' && (flags & TERM_KEEP_TAB)))
			buf_addc(b, (char)cp);
		else if (cp == '\n')
			buf_adds(b, "\\n");
		else if (cp == '\t')
			buf_adds(b, "\\t");
		else if (cp == '\r')
			buf_adds(b, "\\r");
		else if (cp < 0x20 || cp == 0x7f) {
			snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
			buf_adds(b, esc);
		} else if (cp >= 0x80 && cp <= 0x9f) {
			snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
			buf_adds(b, esc);
		} else
			buf_add(b, p + i, n);
		i += n;
	}
	return i;
}

/* A NUL-terminated string escaped by term_escape; the caller frees it. */
char *
term_safe(const char *s, int flags)
{
	struct buf	 b;

	buf_init(&b, 0);
	term_escape(&b, s, strlen(s), flags & ~TERM_MORE);
	return buf_take(&b);
}

/* Escapes every string in a JSON tree in place, for the human (non-JSON) forms of output. */
void
term_json(json_t *j, int flags)
{
	struct buf	 b;
	json_t		*v;
	const char	*key;
	size_t		 i;

	if (json_is_string(j)) {
		/* By its length: a JSON string may hold a NUL, which is escaped too. */
		buf_init(&b, 0);
		term_escape(&b, json_string_value(j), json_string_length(j), flags & ~TERM_MORE);
		json_string_set(j, buf_cstr(&b));
		buf_free(&b);
	} else if (json_is_object(j)) {
		json_object_foreach(j, key, v)
			term_json(v, flags);
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			term_json(v, flags);
	}
}
