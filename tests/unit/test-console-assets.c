/* test-console-assets.c: the console's files compiled into spur are console/, byte for byte. */
#include "spur.h"
#include "console-assets.h"
#include "tap.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* The Content-Type a file of that name must be served with. */
static const char *
want_ctype(const char *name)
{
	const char	*dot = strrchr(name, '.');

	if (dot == NULL)
		return "";
	if (strcmp(dot, ".html") == 0)
		return "text/html; charset=utf-8";
	if (strcmp(dot, ".js") == 0)
		return "text/javascript; charset=utf-8";
	if (strcmp(dot, ".css") == 0)
		return "text/css; charset=utf-8";
	if (strcmp(dot, ".svg") == 0)
		return "image/svg+xml";
	return "";
}

int
main(void)
{
	static const char	*must[] = { "index.html", "app.js", "app.css", "favicon.svg" };
	const char		*srcdir = getenv("SPUR_SRCDIR");
	const struct console_asset *a;
	struct dirent		*de;
	DIR			*d;
	char			*dir, *path, *data, *cause;
	size_t			 i, len, nfiles = 0;

	for (i = 0; i < sizeof must / sizeof must[0]; i++) {
		a = console_asset_find(must[i]);
		ok(a != NULL && a->len > 0, "%s is compiled in", must[i]);
		if (a != NULL)
			is_str(a->ctype, want_ctype(must[i]), "%s is served as %s", must[i], a->ctype);
	}
	ok(console_asset_find("") == NULL && console_asset_find("nope.js") == NULL &&
	    console_asset_find("../app.js") == NULL && console_asset_find("/app.js") == NULL &&
	    console_asset_find("APP.JS") == NULL, "a name not exactly an asset's finds nothing");

	if (srcdir == NULL || *srcdir == '\0') {
		tap_skip("SPUR_SRCDIR is not set (make check sets it): console/ not compared");
		return tap_done();
	}
	dir = xprintf("%s/console", srcdir);
	if (!ok((d = opendir(dir)) != NULL, "%s can be read", dir)) {
		free(dir);
		return tap_done();
	}
	/* Every file there is compiled in and is the same bytes: rebuild after editing one. */
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		nfiles++;
		path = xprintf("%s/%s", dir, de->d_name);
		data = cause = NULL;
		len = 0;
		a = console_asset_find(de->d_name);
		if (!ok(a != NULL, "console/%s is compiled in (mk/console.am lists it)", de->d_name) ||
		    !ok(read_file(path, 16 << 20, &data, &len, &cause) == 0, "%s is readable%s%s",
		    path, cause != NULL ? ": " : "", cause != NULL ? cause : "")) {
			free(cause);
			free(path);
			continue;
		}
		ok(a->len == len && memcmp(a->data, data, len) == 0,
		    "console/%s: the binary holds its %zu bytes exactly (has %zu)", de->d_name, len, a->len);
		is_int(a->data[a->len], 0, "console/%s: a NUL follows its last byte", de->d_name);
		free(data);
		free(path);
	}
	closedir(d);
	ok(nfiles >= sizeof must / sizeof must[0], "console/ has its %zu files", nfiles);
	free(dir);
	return tap_done();
}
