/* test-safefs: rm_rf and the artifacts glob while a hostile process swaps directories for links. */
#include "spur.h"
#include "tap.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE	(1 << 1)
#endif

#define HOSTILE_UID	900000007	/* one of sandbox.uids' default range */
#define RACE_MS		3000

static char	 root[] = "/tmp/spur-test-safefs-XXXXXX";
static char	*canary, *victim, *ws;

static void
touch(const char *path, mode_t mode)
{
	int	fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) == -1)
		fatal("%s: %s", path, strerror(errno));
	if (write(fd, "secret\n", 7) != 7)
		fatal("write %s", path);
	close(fd);
}

/* The host's: a directory of root's, 0755, with a file only root reads. */
static void
canary_make(void)
{
	mkdir(canary, 0755);
	chmod(canary, 0755);
	touch(victim, 0600);
}

static int
canary_intact(void)
{
	struct stat	st;

	return stat(canary, &st) == 0 && (st.st_mode & 07777) == 0755 && st.st_uid == 0 &&
	    access(victim, F_OK) == 0;
}

/*
 * The hostile sandbox: as an unprivileged uid, makes ws/d a directory of
 * files and ws/l a link to the canary, then swaps the two names atomically,
 * again and again, recreating them whenever the engine removed them.
 */
static pid_t
swapper_start(uid_t uid)
{
	char	*d, *l;
	pid_t	 pid;
	int	 i;

	if ((pid = fork()) != 0)
		return pid;
	if (uid != 0 && (setgid(uid) != 0 || setuid(uid) != 0))
		_exit(1);
	d = path_join(ws, "d");
	l = path_join(ws, "l");
	for (;;) {
		if (mkdir(d, 0755) == 0) {
			for (i = 0; i < 8; i++) {
				char *g = xprintf("%s/f%d", d, i);
				close(open(g, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
				free(g);
			}
		}
		(void)symlink(canary, l);
		for (i = 0; i < 200; i++)
			syscall(SYS_renameat2, AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE);
	}
}

/* The workspace: the engine's parent, the hostile uid's own directory. */
static void
ws_make(uid_t uid)
{
	mkdir(ws, 0700);
	if (chown(ws, uid, uid) != 0)
		fatal("chown %s", ws);
}

static void
race_rm_rf(uid_t uid)
{
	pid_t		 pid;
	int64_t		 end = now_ms() + RACE_MS;
	int		 walks = 0, broken = 0;

	canary_make();
	ws_make(uid);
	pid = swapper_start(uid);
	while (now_ms() < end && !broken) {
		/* The swapper lives in ws: each removal races its renames, then it starts over. */
		usleep(2000);
		rm_rf(ws);
		walks++;
		if (!canary_intact())
			broken = 1;
		ws_make(uid);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok(!broken, "rm_rf: %d removals raced by a swapper, the host directory it links to "
	    "is untouched (mode, owner, its file)", walks);
	rm_rf(ws);
}

static void
race_glob(uid_t uid)
{
	pid_t		 pid;
	int64_t		 end = now_ms() + RACE_MS;
	int		 looks = 0, told = 0;

	canary_make();
	ws_make(uid);
	pid = swapper_start(uid);
	usleep(20000);
	while (now_ms() < end) {
		/* Whichever name is the directory, only the host's has a "victim". */
		if (safefs_glob_file(ws, "l/victim") || safefs_glob_file(ws, "d/victim") ||
		    safefs_glob_file(ws, "*/vic*"))
			told++;
		looks++;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok(told == 0, "artifacts glob: %d looks through a swapped link, none reached the host "
	    "directory (%d did)", looks, told);
	rm_rf(ws);
}

static void
test_plain(void)
{
	char	*t = path_join(root, "plain"), *p;
	int	 fd;

	mkdir(t, 0700);
	p = path_join(t, "a");
	mkdir(p, 0700);
	free(p);
	p = path_join(t, "a/ro");
	mkdir(p, 0500);
	free(p);
	p = path_join(t, "a/report.md");
	touch(p, 0644);
	free(p);
	p = path_join(t, "link");
	if (symlink(canary, p) != 0)
		fatal("symlink");
	free(p);
	ok(safefs_glob_file(t, "a/*.md"), "glob: a/*.md matches a regular file");
	ok(safefs_glob_file(t, "*/report.md"), "glob: */report.md");
	ok(!safefs_glob_file(t, "link/victim"), "glob: never through a link");
	ok(!safefs_glob_file(t, "link"), "glob: a link is not a regular file");
	ok(!safefs_glob_file(t, "../plain/a/report.md"), "glob: no ..");
	ok(!safefs_glob_file(t, "/etc/passwd"), "glob: no absolute pattern");
	ok(!safefs_glob_file(t, "a/.hidden*"), "glob: nothing there, nothing found");
	fd = open(t, O_RDONLY);
	close(fd);
	ok(rm_rf(t) == 0 && access(t, F_OK) != 0, "rm_rf: a tree with a read-only directory "
	    "and a link is gone");
	ok(canary_intact(), "rm_rf: the link's target is untouched");
	ok(rm_rf(t) == 0, "rm_rf: a missing path is not an error");
	free(t);
}

/* A cache's size and its change of hands: a link counts as itself, its target never changes. */
static void
test_du_chown(void)
{
	char			*t = path_join(root, "cache"), *p, *big;
	unsigned long long	 bytes = 0, before = 0;
	struct stat		 st;
	int			 fd;

	mkdir(t, 0700);
	p = path_join(t, "sub");
	mkdir(p, 0700);
	big = path_join(p, "blob");
	if ((fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) == -1 ||
	    ftruncate(fd, 0) != 0 || write(fd, t, 1) != 1 || lseek(fd, 256 * 1024, SEEK_SET) < 0 ||
	    write(fd, t, 1) != 1 || fsync(fd) != 0)
		fatal("%s: %s", big, strerror(errno));
	close(fd);
	free(p);
	p = path_join(t, "link");
	if (symlink(canary, p) != 0)
		fatal("symlink");
	free(p);
	ok(safefs_du(canary, &before) == 0 && before > 0, "du: the host directory has a size");
	ok(safefs_du(t, &bytes) == 0 && bytes >= 8192 && bytes < before + 512 * 1024,
	    "du: what the tree's files take, not what a link points at (%llu)", bytes);
	ok(safefs_du(big, &bytes) == -1, "du: a file is not a tree");
	if (geteuid() == 0) {
		ok(safefs_chown(t, 0, HOSTILE_UID, HOSTILE_UID) == 0 && stat(big, &st) == 0 &&
		    st.st_uid == HOSTILE_UID, "chown: the tree's files change hands");
		ok(lstat(t, &st) == 0 && st.st_uid == HOSTILE_UID, "chown: the tree itself too");
		ok(canary_intact(), "chown: a link's target never changes hands");
		ok(safefs_chown(t, 0, 0, 0) == 0 && stat(big, &st) == 0 &&
		    st.st_uid == HOSTILE_UID, "chown: only what the old owner owns changes");
	} else
		printf("ok %d # SKIP chown: needs root\n", ++tap_n);
	free(big);
	rm_rf(t);
	free(t);
}

int
main(void)
{
	uid_t	uid = geteuid() == 0 ? HOSTILE_UID : 0;

	log_init(LOG_WARN, "test-safefs");
	if (mkdtemp(root) == NULL)
		fatal("mkdtemp");
	chmod(root, 0755);
	canary = path_join(root, "host");
	victim = path_join(canary, "victim");
	ws = path_join(root, "ws");
	canary_make();
	test_plain();
	test_du_chown();
	if (geteuid() != 0) {
		printf("ok %d # SKIP races: the swapper must be another uid than the engine's "
		    "(needs root)\n", ++tap_n);
		printf("ok %d # SKIP races: needs root\n", ++tap_n);
	} else {
		race_rm_rf(uid);
		race_glob(uid);
	}
	chmod(canary, 0755);
	rm_rf(root);
	free(canary);
	free(victim);
	free(ws);
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
