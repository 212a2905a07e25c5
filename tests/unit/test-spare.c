/* test-spare: directories made ahead, renamed into place, never over what is there. */
#include "spur.h"
#include "spare.h"
#include "tap.h"

#include <sys/stat.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char	 root[] = "/tmp/spur-test-spare-XXXXXX";

/* Runs the loop until the spare's refill timer has nothing left to make. */
static void
settle(struct event_base *base)
{
	event_base_dispatch(base);
}

static int
is_dir(const char *path, mode_t mode)
{
	struct stat	st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == mode;
}

static int
is_empty_file(const char *path)
{
	struct stat	st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

static char *
at(const char *a, const char *b)
{
	static char	buf[4][512];
	static int	n;

	n = (n + 1) % 4;
	snprintf(buf[n], sizeof buf[n], "%s/%s", a, b);
	return buf[n];
}

static ino_t
inode(const char *path)
{
	struct stat	st;

	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

int
main(void)
{
	struct event_base	*base;
	struct spare		*s;
	unsigned long		 taken, missed;
	char			*runs, *ses, *run1, *ses1, *kept;
	ino_t			 ino;
	int			 fd;

	umask(027);
	if (mkdtemp(root) == NULL)
		fatal("mkdtemp: %s", strerror(errno));
	runs = xstrdup(at(root, "runs"));
	ses = xstrdup(at(root, "sessions"));
	base = event_base_new();

	/* An earlier engine's leftover, half made: removed, then made whole. */
	mkdir(runs, 0750);
	mkdir(at(runs, ".spare-0"), 0750);
	mkdir(at(at(runs, ".spare-0"), "junk"), 0700);
	s = spare_create(base, root);
	settle(base);
	ok(access(at(at(runs, ".spare-0"), "junk"), F_OK) != 0, "a leftover spare is removed");
	ok(is_dir(at(runs, ".spare-0"), 0750) && is_dir(at(runs, ".spare-1"), 0750),
	    "two run directories are made ahead, 0750 less the umask");
	ok(is_dir(at(at(runs, ".spare-1"), "artifacts"), 0700) &&
	    is_empty_file(at(at(runs, ".spare-1"), "output.log")),
	    "each with artifacts/ (0700) and an empty output.log");
	ok(is_dir(at(ses, ".spare-0"), 0711) && is_dir(at(at(ses, ".spare-0"), "workspace"), 0700) &&
	    is_dir(at(at(ses, ".spare-0"), "home"), 0700),
	    "two session directories, 0711, with workspace/ and home/ (0700)");

	/* A start takes one: the very directory made ahead, under the run's name. */
	run1 = xstrdup(at(runs, "run_1"));
	ino = inode(at(runs, ".spare-1")) != 0 ? inode(at(runs, ".spare-0")) : 0;
	is_int(spare_take(s, SPARE_RUN, run1), 0, "a start takes a spare run directory");
	ok(ino != 0 && inode(run1) == ino, "it is renamed into place, not made");
	ok(is_empty_file(at(run1, "output.log")) && is_dir(at(run1, "artifacts"), 0700),
	    "with what a start would have made in it");

	/* What is there is never replaced: a retried run's directory, a kept session's. */
	kept = xstrdup(at(ses, "ses_kept"));
	mkdir(kept, 0711);
	if ((fd = open(at(kept, "repo.json"), O_WRONLY | O_CREAT, 0600)) != -1)
		close(fd);
	is_int(spare_take(s, SPARE_SESSION, kept), -1, "a session that is there is not taken over");
	ok(access(at(kept, "repo.json"), F_OK) == 0, "and keeps what it had");
	mkdir(at(ses, "ses_empty"), 0700);
	is_int(spare_take(s, SPARE_SESSION, at(ses, "ses_empty")), -1,
	    "not even an empty one (RENAME_NOREPLACE)");
	ok(is_dir(at(ses, ".spare-1"), 0711), "the spare stays for the next start");

	/* A burst: none left after two; made again later, on the loop. */
	ses1 = xstrdup(at(ses, "ses_1"));
	is_int(spare_take(s, SPARE_SESSION, ses1), 0, "a new session takes a spare");
	is_int(spare_take(s, SPARE_SESSION, at(ses, "ses_2")), 0, "so does the next");
	is_int(spare_take(s, SPARE_SESSION, at(ses, "ses_3")), -1, "the third finds none");
	ok(access(at(ses, "ses_3"), F_OK) != 0, "and nothing in its place: the caller makes it");
	settle(base);
	ok(is_dir(at(ses, ".spare-0"), 0711) && is_dir(at(ses, ".spare-1"), 0711),
	    "both are made again once the starts are on their way");
	spare_counts(s, &taken, &missed);
	is_int(taken, 3, "three starts took one");
	is_int(missed, 1, "one found none");

	/* One removed behind the engine's back: that start makes its own, the spare is remade. */
	if (rm_rf(at(runs, ".spare-0")) != 0 || rm_rf(at(runs, ".spare-1")) != 0)
		fatal("rm_rf");
	is_int(spare_take(s, SPARE_RUN, at(runs, "run_2")), -1, "spares removed: none taken");
	settle(base);
	ok(is_dir(at(runs, ".spare-0"), 0750), "and they are made again");

	spare_free(s);
	event_base_free(base);
	rm_rf(root);
	free(runs);
	free(ses);
	free(run1);
	free(ses1);
	free(kept);
	return tap_done();
}
