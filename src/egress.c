/* egress.c: a run's network. For now a run has none: only loopback inside its sandbox. */
#include "spur.h"
#include "egress.h"

int
egress_attach(struct engine *e, const char *run, const char *org,
    const struct automation *a, const char *home, struct sandbox_spec *spec, char **env,
    size_t *nenv, size_t max, char ***argv, struct egress **out, char **cause)
{
	*out = NULL;
	return 0;
}

void
egress_free(struct egress *eg)
{
}
