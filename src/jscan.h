/* jscan.h: one pass that checks JSON exactly as jansson would and builds only the parts asked for. */
#ifndef SPUR_JSCAN_H
#define SPUR_JSCAN_H

#include <stddef.h>

#include <jansson.h>

/*
 * Validates s[0..len) as json_loadb(s, len, JSON_REJECT_DUPLICATES) would (same inputs
 * accepted, same rejected), with nesting limited to maxdepth, and returns a tree that holds
 * only the kept paths. keep: NULL-terminated dotted paths through objects
 * ("comment.user", "repository.full_name"); a kept path keeps its whole value, and the
 * objects on the way to it are made with only their kept members, in document order.
 * keep == NULL keeps everything (then the result equals jansson's tree, json_equal).
 *
 * An object on the way to a kept path is made even when none of its kept members is
 * there ({} then); a value on the way that is not an object is left out, as is a
 * member no path names. Paths do not go through arrays: a top-level array comes back
 * empty unless everything is kept. "" keeps everything; a path with an empty segment
 * ("a..b") names nothing, as in json_path(). Overlapping paths ("a", "a.b") keep the
 * shorter one's whole value.
 *
 * On error returns NULL and *cause (malloc'd): "JSON nested deeper than %d levels" when
 * too deep, else a message starting "invalid JSON" with the byte offset and the reason.
 */
json_t	*jscan_parse(const char *s, size_t len, int maxdepth, const char *const *keep,
	    char **cause);

#endif
