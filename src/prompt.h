/* prompt.h: the one place that builds what an agent receives (SPEC section 7). */
#ifndef SPUR_PROMPT_H
#define SPUR_PROMPT_H

#include <stddef.h>

struct event;

#define PROMPT_DATA_MAX	(64 * 1024)
#define PROMPT_NONCE_LEN 16	/* hex characters: 64 bits */

/*
 * The saved prompt verbatim, then the event's third-party fields as one
 * fenced data block whose markers carry nonce. nonce NULL: a fresh random one.
 */
char	*prompt_build(const char *saved, const struct event *, const char *nonce);
/* Strips what a human reader would not see (zero-width, bidi, tags, HTML comments). */
char	*prompt_clean(const char *, size_t);

#endif
