/* spur.c: the command line: one table of commands, each with its usage and handler. */
#include "spur.h"

#include <stdio.h>

int
main(int argc, char **argv)
{
	printf("spur %s\n", PACKAGE_VERSION);
	return 0;
}
