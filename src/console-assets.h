/* console-assets.h: the console's static files (console/), compiled in by mk/embed-assets.sh. */
#ifndef SPUR_CONSOLE_ASSETS_H
#define SPUR_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
	const char		*name;	/* "app.js" */
	const char		*ctype;
	const unsigned char	*data;
	size_t			 len;
};

/* The asset of that name, NULL: none. */
const struct console_asset *console_asset_find(const char *name);

#endif
