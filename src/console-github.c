/* console-github.c: until GitHub sign-in lands, the console offers the one-time link alone. */
#include "spur.h"
#include "console-github.h"

int
console_github_enabled(const struct config *conf)
{
	return 0;
}

char *
console_github_authorize_url(const struct config *conf, const char *state,
    const char *redirect_uri)
{
	return NULL;
}

void
console_github_signin(struct engine *e, const char *code, const char *redirect_uri,
    console_github_cb cb, void *arg)
{
	cb(NULL, NULL, "sign-in with GitHub is not built in", arg);
}

void
console_github_recheck(struct engine *e, const char *user, console_github_cb cb, void *arg)
{
	cb(NULL, NULL, "sign-in with GitHub is not built in", arg);
}
