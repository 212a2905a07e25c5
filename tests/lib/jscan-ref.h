/*
 * jscan-ref.h: what jscan_parse must give, worked out with jansson alone; shared by
 * tests/unit/test-jscan and fuzz/fuzz-jscan.
 */
#ifndef SPUR_JSCAN_REF_H
#define SPUR_JSCAN_REF_H

#include <jansson.h>

/* json_equal, with reals alike to the bit (json_equal has 0.0 == -0.0). */
int	 jscan_ref_same(const json_t *, const json_t *);
/*
 * What keep (jscan_parse's list; NULL: everything) keeps of full, jansson's whole
 * tree: the kept paths' values, the objects on the way with only their kept
 * members, a path with an empty segment naming nothing, an array at the top kept
 * whole only when "" is asked for. A new reference.
 */
json_t	*jscan_ref_project(json_t *full, const char *const *keep);

#endif
