/* openapi.h: the org API's OpenAPI 3.1 document (src/openapi.json), compiled in for GET /openapi.json. */
#ifndef SPUR_OPENAPI_H
#define SPUR_OPENAPI_H

#include <stddef.h>

/* The file's exact bytes (followed by a NUL that the length does not count); built by mk/embed.sh. */
extern const unsigned char	spur_openapi_json[];
extern const size_t		spur_openapi_json_len;

#endif
