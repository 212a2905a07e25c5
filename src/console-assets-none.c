/* console-assets-none.c: until the console's files are compiled in, there are none. */
#include "console-assets.h"

#include <string.h>

static const unsigned char shell[] = "<!doctype html><title>spur</title>"
    "<p>The console's pages are not built in yet.</p>\n";
static const struct console_asset assets[] = {
	{ "index.html", "text/html; charset=utf-8", shell, sizeof shell - 1 },
};

const struct console_asset *
console_asset_find(const char *name)
{
	size_t	 i;

	for (i = 0; i < sizeof assets / sizeof assets[0]; i++) {
		if (strcmp(assets[i].name, name) == 0)
			return &assets[i];
	}
	return NULL;
}
