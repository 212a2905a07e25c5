/* cmd-schedules.c: `spur schedules`: every schedule trigger and its next fire times. */
#include "spur.h"
#include "cmd.h"

#include <stdio.h>

int
cmd_schedules(const struct cmd *c, int argc, char **argv)
{
	fprintf(stderr, "spur schedules: not available yet (cron schedules arrive with "
	    "the schedules issue)\n");
	return EXIT_FAILED;
}
