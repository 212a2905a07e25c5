/* fuzz-yaml.c: the YAML tree (ytree.c) on any bytes, then a walk over every node. */
#include "spur.h"
#include "ytree.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static void
fuzz_walk(const struct ynode *n, int depth)
{
	size_t	i;

	if (n == NULL || depth > 10000)
		abort();
	if (n->line < 1 || n->col < 1)
		abort();	/* errors quote line:col, they must be real */
	(void)ynode_type_name(n);
	(void)ynode_is_null(n);
	switch (n->type) {
	case YNODE_SCALAR:
		if (n->value == NULL)
			abort();
		(void)ynode_bool(n);
		break;
	case YNODE_MAP:
		for (i = 0; i < n->n; i++) {
			(void)ymap_key(n, i);
			fuzz_walk(n->items[2 * i], depth + 1);
			fuzz_walk(ymap_value(n, i), depth + 1);
		}
		(void)ymap_get(n, "on");
		break;
	case YNODE_SEQ:
		for (i = 0; i < n->n; i++)
			fuzz_walk(n->items[i], depth + 1);
		break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct yerrs	 errs;
	struct ynode	*root;
	size_t		 i;

	yerrs_init(&errs);
	root = yaml_load_string("fuzz.yaml", (const char *)data, size, &errs);
	if (root == NULL && errs.n == 0)
		abort();	/* no tree and no error: a user would see nothing */
	for (i = 0; i < errs.n; i++) {
		if (strncmp(errs.msgs[i], "fuzz.yaml:", 10) != 0)
			abort();
	}
	if (root != NULL)
		fuzz_walk(root, 0);
	ynode_free(root);
	yerrs_free(&errs);
	return 0;
}
