/* fuzz-form.c: form_decode (application/x-www-form-urlencoded, Slack commands) on any bytes. */
#include "spur.h"
#include "source.h"
#include "fuzz.h"

#include <jansson.h>
#include <stdlib.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	*s = fuzz_strndup(data, size), *out;
	json_t	*j;

	if ((j = form_decode(s, size)) != NULL) {
		if (!json_is_object(j))
			abort();
		/* Every value must be valid UTF-8 JSON text, or the store cannot keep it. */
		if ((out = json_dumps(j, JSON_COMPACT)) == NULL)
			abort();
		free(out);
		json_decref(j);
	}
	free(s);
	return 0;
}
