/* cron-next.c: prints next fire times for "EXPR<TAB>TZ<TAB>START_EPOCH" lines, for differential tests. */
#include "spur.h"
#include "cron.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Each input line gets one output line: "ok T1 T2 ..." (UTC epoch seconds, or
 * ISO 8601 local times with -l; a -1 ends the list early), or "error COL CAUSE".
 */
static void
cron_next_line(char *line, int count, int local)
{
	struct cron	*c;
	char		*tab1, *tab2, *end, *cause, *s;
	long long	 start;
	int64_t		 t;
	int		 col, i;

	if ((tab1 = strchr(line, '\t')) == NULL || (tab2 = strchr(tab1 + 1, '\t')) == NULL) {
		printf("error 0 input line needs EXPR<TAB>TZ<TAB>START\n");
		return;
	}
	*tab1 = *tab2 = '\0';
	errno = 0;
	start = strtoll(tab2 + 1, &end, 10);
	if (errno != 0 || end == tab2 + 1 || *end != '\0') {
		printf("error 0 bad start time\n");
		return;
	}
	if ((c = cron_parse(line, tab1 + 1, &cause, &col)) == NULL) {
		printf("error %d %s\n", col, cause);
		free(cause);
		return;
	}
	printf("ok");
	t = start;
	for (i = 0; i < count; i++) {
		t = cron_next(c, t);
		if (t == -1) {
			printf(" -1");
			break;
		}
		if (local) {
			s = cron_format_local(c, t);
			printf(" %s", s);
			free(s);
		} else
			printf(" %lld", (long long)t);
	}
	printf("\n");
	cron_free(c);
}

int
main(int argc, char **argv)
{
	char	 line[4096];
	size_t	 len;
	int	 ch, count = 5, local = 0;

	while ((ch = getopt(argc, argv, "ln:")) != -1) {
		switch (ch) {
		case 'l':
			local = 1;
			break;
		case 'n':
			count = atoi(optarg);
			if (count < 1 || count > 1000)
				count = 5;
			break;
		default:
			fprintf(stderr, "usage: cron-next [-l] [-n COUNT] < lines\n");
			return 2;
		}
	}
	while (fgets(line, sizeof line, stdin) != NULL) {
		len = strlen(line);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		cron_next_line(line, count, local);
		fflush(stdout);
	}
	return 0;
}
