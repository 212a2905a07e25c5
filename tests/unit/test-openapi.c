/* test-openapi.c: the OpenAPI document compiled into spur is src/openapi.json, byte for byte. */
#include "spur.h"
#include "openapi.h"
#include "tap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int
main(void)
{
	const char	*srcdir = getenv("SPUR_SRCDIR");
	const char	*v;
	char		*path, *data = NULL, *cause = NULL;
	size_t		 len = 0, at;
	json_t		*doc;
	json_error_t	 err;

	/* What the binary holds stands alone: JSON, one object, OpenAPI 3.1, a string too. */
	doc = json_loadb((const char *)spur_openapi_json, spur_openapi_json_len,
	    JSON_REJECT_DUPLICATES, &err);
	ok(doc != NULL, "the embedded document is JSON without repeated keys%s%s",
	    doc == NULL ? ": " : "", doc == NULL ? err.text : "");
	v = json_string_value(json_object_get(doc, "openapi"));
	ok(v != NULL && strncmp(v, "3.1.", 4) == 0, "it is OpenAPI 3.1 (%s)", v ? v : "none");
	ok(json_is_object(json_object_get(doc, "paths")) &&
	    json_object_get(json_object_get(doc, "paths"), "/openapi.json") != NULL,
	    "it describes GET /openapi.json itself");
	json_decref(doc);
	is_int(spur_openapi_json[spur_openapi_json_len], 0, "a NUL follows its last byte");
	is_int(strlen((const char *)spur_openapi_json), spur_openapi_json_len,
	    "and no NUL comes before");

	if (srcdir == NULL || *srcdir == '\0') {
		tap_skip("SPUR_SRCDIR is not set (make check sets it): src/openapi.json not compared");
		return tap_done();
	}
	path = xprintf("%s/src/openapi.json", srcdir);
	if (!ok(read_file(path, 16 << 20, &data, &len, &cause) == 0, "%s is readable%s%s", path,
	    cause != NULL ? ": " : "", cause != NULL ? cause : "")) {
		free(cause);
		free(path);
		return tap_done();
	}
	is_int(spur_openapi_json_len, len, "the embedded document is as long as the file");
	for (at = 0; at < len && at < spur_openapi_json_len; at++) {
		if ((unsigned char)data[at] != spur_openapi_json[at])
			break;
	}
	ok(at == len && len == spur_openapi_json_len, "and has the same bytes (first difference at "
	    "%zu of %zu): rebuild after editing src/openapi.json", at, len);
	free(data);
	free(path);
	return tap_done();
}
