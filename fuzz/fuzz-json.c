/*
 * fuzz-json.c: json_parse_bounded and the dotted-path lookup, then the event
 * shape read back from the JSON the store keeps. Input: a path on the first
 * line, the JSON after it.
 */
#include "spur.h"
#include "event.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char			*s = fuzz_strndup(data, size), *nl, *text, *cause = NULL;
	const char		*path = "", *json = s;
	size_t			 len = size;
	json_t			*j, *v, *back;
	struct spur_event	*ev;

	if ((nl = memchr(s, '\n', size)) != NULL) {
		*nl = '\0';
		path = s;
		json = nl + 1;
		len = size - (json - s);
	}
	if ((j = json_parse_bounded(json, len, 64, &cause)) == NULL) {
		if (cause == NULL)
			abort();	/* -1 must come with a cause */
		free(cause);
		free(s);
		return 0;
	}
	if ((v = json_path(j, path)) != NULL) {
		text = json_scalar_text(v);
		free(text);
	}
	(void)json_path_str(j, path);
	if ((ev = spur_event_from_json(j)) != NULL) {
		(void)spur_event_meta_str(ev, path);
		back = spur_event_to_json(ev);
		json_decref(back);
		spur_event_free(ev);
	}
	json_decref(j);
	free(s);
	return 0;
}
