/* buf.c: growable byte buffers with an optional bound (hitting it is an error, not growth). */
#include "spur.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_init(struct buf *b, size_t max)
{
	memset(b, 0, sizeof *b);
	b->max = max;
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
}

static int
buf_grow(struct buf *b, size_t need)
{
	size_t	 cap;

	if (b->max != 0 && b->len + need > b->max)
		return -1;
	if (b->len + need + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < b->len + need + 1)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
	return 0;
}

int
buf_add(struct buf *b, const void *p, size_t n)
{
	if (buf_grow(b, n) != 0)
		return -1;
	if (n != 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

int
buf_addc(struct buf *b, char c)
{
	return buf_add(b, &c, 1);
}

int
buf_addq(struct buf *b, const char *s)
{
	const unsigned char	*p;
	int			 rc = 0;

	for (p = (const unsigned char *)s; *p != '\0' && rc == 0; p++) {
		if (isalnum(*p) || strchr("-._~", *p) != NULL)
			rc = buf_addc(b, (char)*p);
		else
			rc = buf_addf(b, "%%%02X", *p);
	}
	return rc;
}

int
buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	int	 n, r;

	va_start(ap, fmt);
	n = xvasprintf(&s, fmt, ap);
	va_end(ap);
	r = buf_add(b, s, n);
	free(s);
	return r;
}

char *
buf_cstr(struct buf *b)
{
	if (b->data == NULL)
		buf_grow(b, 0);
	if (b->data == NULL) {
		b->data = xmalloc(1);
		b->cap = 1;
	}
	b->data[b->len] = '\0';
	return b->data;
}

char *
buf_take(struct buf *b)
{
	char	*s;

	buf_cstr(b);
	s = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return s;
}
