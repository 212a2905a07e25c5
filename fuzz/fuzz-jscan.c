/*
 * fuzz-jscan.c: jscan_parse against jansson. Input: the JSON text, as is.
 *
 * With everything kept, jscan must accept exactly what json_parse_bounded (the depth
 * check, then json_loadb with JSON_REJECT_DUPLICATES) accepts, and build an equal tree
 * (reals equal to the bit). The depth rules differ only in what is reported first:
 * json_parse_bounded counts brackets over the whole text before jansson parses, jscan
 * counts as it goes; so a depth error from jscan must be one from json_parse_bounded
 * too, and a depth error from json_parse_bounded must be some error from jscan.
 * Then, with a fixed keep list, jscan's sparse tree must equal the same list's
 * projection of jansson's tree (tests/lib/jscan-ref.c, jansson alone).
 */
#include "spur.h"
#include "event.h"
#include "jscan.h"
#include "jscan-ref.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH	64

/* Short keys a mutator finds, overlapping paths, and what spur keeps of a GitHub payload. */
static const char *const keep[] = {
	"a", "b.c", "b.d.e", "c.a", "c.a.b", "d.d", "e.", "..", "\xc3\xa9",
	"action", "comment.user", "issue.number", "repository.full_name", "sender", NULL
};

static void
disagree(const char *what, const char *jscan_says, const char *jansson_says)
{
	fprintf(stderr, "fuzz-jscan: %s\n  jscan:   %s\n  jansson: %s\n", what,
	    jscan_says != NULL ? jscan_says : "(accepted)",
	    jansson_says != NULL ? jansson_says : "(accepted)");
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char	*s = (const char *)data;
	char		*ca = NULL, *cb = NULL, *cs = NULL;
	json_t		*a, *b, *sparse, *want;
	int		 adeep, bdeep;

	/* Exactly size bytes (libFuzzer's buffer): ASan sees any read past the end. */
	a = jscan_parse(s, size, DEPTH, NULL, &ca);
	b = json_parse_bounded(s, size, DEPTH, &cb);
	if ((a == NULL) != (ca != NULL) || (b == NULL) != (cb != NULL))
		disagree("a result must come with no cause, a NULL with one", ca, cb);
	adeep = ca != NULL && strncmp(ca, "JSON nested deeper", 18) == 0;
	bdeep = cb != NULL && strncmp(cb, "JSON nested deeper", 18) == 0;
	if (ca != NULL && !adeep && strncmp(ca, "invalid JSON at offset ", 23) != 0)
		disagree("the cause must start \"invalid JSON at offset\"", ca, cb);
	if (adeep && !bdeep)
		disagree("too deep for jscan only", ca, cb);
	if (bdeep && a != NULL)
		disagree("too deep for json_parse_bounded only", ca, cb);
	if (!bdeep && (a == NULL) != (b == NULL))
		disagree("accepted by one only", ca, cb);
	if (a != NULL && !jscan_ref_same(a, b))
		disagree("different trees", NULL, NULL);

	sparse = jscan_parse(s, size, DEPTH, keep, &cs);
	if ((sparse == NULL) != (a == NULL) ||
	    (cs != NULL && (ca == NULL || strcmp(cs, ca) != 0)))
		disagree("keeping less changed the verdict", cs, ca);
	if (sparse != NULL) {
		want = jscan_ref_project(b, keep);
		if (!jscan_ref_same(sparse, want))
			disagree("the kept part differs from jansson's tree's", NULL, NULL);
		json_decref(want);
	}

	json_decref(sparse);
	json_decref(a);
	json_decref(b);
	free(cs);
	free(ca);
	free(cb);
	return 0;
}
