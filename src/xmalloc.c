/* xmalloc.c: allocation wrappers; running out of memory is not an error a daemon can handle. */
#include "spur.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *
xmalloc(size_t size)
{
	void	*p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		fatal("out of memory allocating %zu bytes", size);
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void	*p;

	if (n == 0 || size == 0)
		n = size = 1;
	if ((p = calloc(n, size)) == NULL)
		fatal("out of memory allocating %zu x %zu bytes", n, size);
	return p;
}

void *
xrealloc(void *p, size_t size)
{
	return xreallocarray(p, 1, size);
}

void *
xreallocarray(void *p, size_t n, size_t size)
{
	void	*np;

	if (n != 0 && size > SIZE_MAX / n)
		fatal("allocation overflow");
	if (n * size == 0)
		n = size = 1;
	if ((np = realloc(p, n * size)) == NULL)
		fatal("out of memory allocating %zu bytes", n * size);
	return np;
}

char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		fatal("out of memory");
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char	*p;

	if ((p = strndup(s, n)) == NULL)
		fatal("out of memory");
	return p;
}

int
xvasprintf(char **ret, const char *fmt, va_list ap)
{
	int	 n;

	if ((n = vasprintf(ret, fmt, ap)) < 0)
		fatal("out of memory formatting");
	return n;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = xvasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

char *
xprintf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	xvasprintf(&s, fmt, ap);
	va_end(ap);
	return s;
}

/* Wipes a secret string before freeing it. */
void
freezero_str(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}
