/* json.c: the one dotted-path lookup, scalar text for matching, and bounded parsing. */
#include "spur.h"
#include "event.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Walks "a.b.0.c": object keys by name, list items by decimal index.
 * An object key that is all digits is still found as a key when the value is an object.
 */
json_t *
json_path(const json_t *root, const char *path)
{
	const json_t	*cur = root;
	const char	*p = path, *dot;
	char		 seg[256], *end;
	size_t		 n;
	unsigned long	 idx;

	if (path == NULL || *path == '\0')
		return (json_t *)root;
	while (cur != NULL && *p != '\0') {
		dot = strchr(p, '.');
		n = dot != NULL ? (size_t)(dot - p) : strlen(p);
		if (n == 0 || n >= sizeof seg)
			return NULL;
		memcpy(seg, p, n);
		seg[n] = '\0';
		if (json_is_object(cur))
			cur = json_object_get(cur, seg);
		else if (json_is_array(cur) && isdigit((unsigned char)seg[0])) {
			idx = strtoul(seg, &end, 10);
			cur = *end == '\0' ? json_array_get(cur, idx) : NULL;
		} else
			return NULL;
		p += n;
		if (*p == '.')
			p++;
	}
	return (json_t *)cur;
}

const char *
json_path_str(const json_t *root, const char *path)
{
	return json_string_value(json_path(root, path));
}

char *
json_scalar_text(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		return xstrndup(json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		return xprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
	case JSON_REAL:
		return xprintf("%.17g", json_real_value(v));
	case JSON_TRUE:
		return xstrdup("true");
	case JSON_FALSE:
		return xstrdup("false");
	case JSON_NULL:
		return xstrdup("null");
	default:
		return NULL;
	}
}

/* Checks nesting depth outside strings before handing the text to jansson. */
json_t *
json_parse_bounded(const char *s, size_t len, int maxdepth, char **cause)
{
	json_error_t	 err;
	json_t		*j;
	size_t		 i;
	int		 depth = 0, instr = 0;

	for (i = 0; i < len; i++) {
		char c = s[i];
		if (instr) {
			if (c == '\\')
				i++;
			else if (c == '"')
				instr = 0;
			continue;
		}
		if (c == '"')
			instr = 1;
		else if (c == '{' || c == '[') {
			if (++depth > maxdepth) {
				xasprintf(cause, "JSON nested deeper than %d levels", maxdepth);
				return NULL;
			}
		} else if (c == '}' || c == ']')
			depth--;
	}
	j = json_loadb(s, len, JSON_REJECT_DUPLICATES, &err);
	if (j == NULL) {
		xasprintf(cause, "invalid JSON at line %d column %d: %s", err.line,
		    err.column, err.text);
		return NULL;
	}
	return j;
}

json_t *
json_str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

/*
 * s as a JSON string literal, as jansson's compact dump writes it (the same
 * escapes, UTF-8 as it is), or null for NULL: -1 (b as it was) when s is
 * not valid UTF-8, which jansson would not take either.
 */
int
json_buf_str(struct buf *b, const char *s)
{
	static const char	 hex[] = "0123456789ABCDEF";
	const unsigned char	*p = (const unsigned char *)s, *run;
	size_t			 start = b->len, left;
	uint32_t		 cp;
	char			 esc[7];
	int			 n;

	if (s == NULL) {
		buf_add(b, "null", 4);
		return 0;
	}
	buf_addc(b, '"');
	left = strlen(s);
	run = p;
	while (left > 0) {
		if (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) {
			p++;
			left--;
			continue;
		}
		if (*p >= 0x80) {
			if ((n = utf8_len(p, left, &cp)) <= 0) {
				b->len = start;
				return -1;
			}
			p += n;
			left -= (size_t)n;
			continue;
		}
		buf_add(b, run, (size_t)(p - run));
		esc[0] = '\\';
		n = 2;
		switch (*p) {
		case '"':	esc[1] = '"'; break;
		case '\\':	esc[1] = '\\'; break;
		case '\b':	esc[1] = 'b'; break;
		case '\f':	esc[1] = 'f'; break;
		case '\n':	esc[1] = 'n'; break;
		case '\r':	esc[1] = 'r'; break;
		case '\t':	esc[1] = 't'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 0xf];
			n = 6;
		}
		buf_add(b, esc, (size_t)n);
		p++;
		left--;
		run = p;
	}
	buf_add(b, run, (size_t)(p - run));
	buf_addc(b, '"');
	return 0;
}
