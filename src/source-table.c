/*
 * source-table.c: the outside systems of source-table.h, in order, found by
 * name. The systems' files do not call it: what they share is source.c's.
 */
#include "spur.h"
#include "source.h"

#include <stdlib.h>
#include <string.h>

#define SOURCE_ENTRY(s)	extern const struct source s;
#include "source-table.h"
#undef SOURCE_ENTRY

/* Every outside system: one line each in source-table.h. */
static const struct source *const source_table[] = {
#define SOURCE_ENTRY(s)	&s,
#include "source-table.h"
#undef SOURCE_ENTRY
};

const struct source *
source_next(const struct source *prev)
{
	size_t	 i;

	if (prev == NULL)
		return source_table[0];
	for (i = 0; i + 1 < SPUR_ARRLEN(source_table); i++) {
		if (source_table[i] == prev)
			return source_table[i + 1];
	}
	return NULL;
}

const struct source *
source_system(const char *name)
{
	size_t	 i;

	for (i = 0; name != NULL && i < SPUR_ARRLEN(source_table); i++) {
		if (strcmp(name, source_table[i]->name) == 0)
			return source_table[i];
	}
	return NULL;
}

const struct source *
source_find(const char *hook)
{
	const struct source	*s = source_system(hook);

	return s != NULL ? s : &source_webhook;
}

size_t
source_count(void)
{
	return SPUR_ARRLEN(source_table);
}

char *
source_names(const char *const *extra, const char *last)
{
	const char	*names[SPUR_ARRLEN(source_table) + 16];
	struct buf	 b;
	size_t		 i, n = 0;

	for (i = 0; i < SPUR_ARRLEN(source_table); i++)
		names[n++] = source_table[i]->name;
	for (i = 0; extra != NULL && extra[i] != NULL && n < SPUR_ARRLEN(names); i++)
		names[n++] = extra[i];
	buf_init(&b, 0);
	for (i = 0; i < n; i++) {
		if (i > 0)
			buf_adds(&b, i + 1 == n ? last : ", ");
		buf_adds(&b, names[i]);
	}
	return buf_take(&b);
}

int
source_name_in(const char *s, const char *const *extra)
{
	size_t	 i;

	if (s == NULL)
		return 0;
	if (source_system(s) != NULL)
		return 1;
	for (i = 0; extra != NULL && extra[i] != NULL; i++) {
		if (strcmp(extra[i], s) == 0)
			return 1;
	}
	return 0;
}
