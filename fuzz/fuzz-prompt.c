/*
 * fuzz-prompt.c: prompt_build (prompt.c) with a fixed nonce, and the cleaning
 * it relies on. Input: an event as JSON (spur_event_to_json's shape) on the
 * first line, then the saved prompt; when the first line is no event, the whole
 * input becomes the text of a GitHub comment event.
 */
#include "spur.h"
#include "event.h"
#include "prompt.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_NONCE	"0123456789abcdef"

/* The fence must hold: exactly one start and one end marker line with the nonce. */
static int
fuzz_count(const char *p, const char *what)
{
	const char	*q;
	int		 n = 0;

	for (q = p; (q = strstr(q, what)) != NULL; q++)
		n++;
	return n;
}

static void
fuzz_check(const char *p)
{
	if (fuzz_count(p, "\n<<<SPUR-DATA-" FUZZ_NONCE ">>>\n") != 1 ||
	    fuzz_count(p, "\n<<<END-SPUR-DATA-" FUZZ_NONCE ">>>") != 1)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char			*s = fuzz_strndup(data, size), *nl, *p, *c, *saved = s;
	struct spur_event	*ev = NULL;
	json_t			*j;

	if ((nl = memchr(s, '\n', size)) != NULL &&
	    (j = json_loadb(s, nl - s, JSON_DECODE_ANY, NULL)) != NULL) {
		ev = spur_event_from_json(j);
		json_decref(j);
		saved = nl + 1;
	}
	if (ev == NULL) {
		saved = "Fix what the comment asks.";
		ev = spur_event_new("acme", "github");
		ev->type = xstrdup("issue_comment.created");
		free(ev->text);
		ev->text = fuzz_strndup(data, size);
		ev->actor.name = fuzz_strndup(data, size < 64 ? size : 64);
		ev->url = xstrdup("https://github.com/acme/app/issues/1#issuecomment-1");
		ev->repository = xstrdup("acme/app");
	}
	p = prompt_build(saved, ev, FUZZ_NONCE);
	if (p == NULL)
		abort();
	if (strstr(saved, "<<<") == NULL)
		fuzz_check(p);
	free(p);
	c = prompt_clean((const char *)data, size);
	p = prompt_neutralize(c, strlen(c));
	free(p);
	free(c);
	spur_event_free(ev);
	free(s);
	return 0;
}
