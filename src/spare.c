/* spare.c: a run's and a session's directories made ahead, renamed into place when a run starts. */

/*
 * A start made six inodes on its path: runs/ID, its artifacts/ and
 * output.log, sessions/ID, its workspace/ and home/. On an ext4 without a
 * journal each took 0.3 to 0.7 ms (the allocator steps over every inode freed
 * in the last minutes, and runs free theirs all the time), 2 to 3 ms of a
 * start that bwrap alone does in 6. So a few of each are made ahead, once a
 * start is on its way, and a start renames one into place: a rename makes
 * no inode. renameat2(RENAME_NOREPLACE) never replaces what is there (a
 * retried run's directory, a session's own); the caller then makes its
 * directory as before, as it does when none is left (a burst of starts).
 *
 * The spares are dot names beside the real ones (runs/.spare-0), which no
 * run id or session id can be and which the run-files sweep passes by.
 * Whatever an earlier engine left of them is removed at start, half-made or
 * not. They are the engine's, as the directories it made itself were.
 */

#define _GNU_SOURCE	/* renameat2 */

#include "spur.h"
#include "spare.h"

#include <sys/stat.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPARE_SLOTS	2	/* per kind: a start or two in a row find theirs made */
#define SPARE_REFILL_MS	20	/* after a take: its sandbox is set up by then (bwrap: 5-10 ms) */

struct spare {
	struct event	*refill;
	char		*path[SPARE_KINDS][SPARE_SLOTS];
	int		 ready[SPARE_KINDS][SPARE_SLOTS];
	int		 broken[SPARE_KINDS];	/* a leftover it could not remove: none of this kind */
	unsigned long	 taken, missed;
};

/* The parent of each kind, and its mode as dispatch makes it. */
static const struct {
	const char	*area;
	mode_t		 mode;
} spare_areas[SPARE_KINDS] = {
	[SPARE_RUN] = { "runs", 0750 },
	[SPARE_SESSION] = { "sessions", 0711 },
};

/* What is inside one: the directories the sandbox's uid gets (0700), and the run's log. */
static int
spare_fill(int fd, enum spare_kind k)
{
	int	log;

	if (k == SPARE_SESSION)
		return mkdirat(fd, "workspace", 0700) != 0 || mkdirat(fd, "home", 0700) != 0 ?
		    -1 : 0;
	if (mkdirat(fd, "artifacts", 0700) != 0)
		return -1;
	/* As dispatch opens it: 0640 less the umask (the spur group reads runs' output). */
	if ((log = openat(fd, "output.log", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0640)) == -1)
		return -1;
	close(log);
	return 0;
}

/*
 * Removes a spare (or what is left of one) as the engine: it is the engine's
 * own, never a session's, so rm_rf's way through the helper (which takes only
 * session and run ids) is not for it. 0 when it is gone.
 */
static int
spare_remove(const char *path)
{
	char	*dir = path_dirname(path);
	int	 pfd, rc;

	if ((pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		rc = errno == ENOENT ? 0 : -1;
	else {
		rc = safefs_remove_at(pfd, strrchr(path, '/') + 1);
		close(pfd);
	}
	free(dir);
	return rc;
}

/* Makes one spare; 0, or -1 (logged) with nothing half-made left. */
static int
spare_make(struct spare *s, enum spare_kind k, int slot)
{
	const char	*path = s->path[k][slot];
	char		*parent = path_dirname(path);
	int		 fd = -1, rc = -1;

	if (mkdir_p(parent, spare_areas[k].mode) == 0 &&
	    mkdir(path, spare_areas[k].mode) == 0 &&
	    (fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1 &&
	    (k != SPARE_SESSION || fchmod(fd, spare_areas[k].mode) == 0))
		rc = spare_fill(fd, k);
	if (rc != 0) {
		log_warn("event=spare.make_failed dir=%s error=%s consequence=\"the next "
		    "start makes its own\"", log_q(path), log_q(strerror(errno)));
		spare_remove(path);
	}
	if (fd != -1)
		close(fd);
	free(parent);
	return rc;
}

/* The timer: one missing spare made each time, so the loop never holds for long. */
static void
spare_refill_cb(evutil_socket_t fd, short what, void *arg)
{
	struct spare	*s = arg;
	struct timeval	 tv = { 0, SPARE_REFILL_MS * 1000 };
	int		 k, slot;

	(void)fd;
	(void)what;
	for (k = 0; k < SPARE_KINDS; k++) {
		for (slot = 0; slot < SPARE_SLOTS && !s->broken[k]; slot++) {
			if (s->ready[k][slot])
				continue;
			if (spare_make(s, k, slot) != 0) {
				s->broken[k] = 1;
				return;
			}
			s->ready[k][slot] = 1;
			evtimer_add(s->refill, &tv);
			return;
		}
	}
}

static void
spare_refill_soon(struct spare *s)
{
	struct timeval	 tv = { 0, SPARE_REFILL_MS * 1000 };

	if (!evtimer_pending(s->refill, NULL))
		evtimer_add(s->refill, &tv);
}

struct spare *
spare_create(struct event_base *base, const char *data_dir)
{
	struct spare	*s = xcalloc(1, sizeof *s);
	struct timeval	 now = { 0, 0 };
	int		 k, slot;

	for (k = 0; k < SPARE_KINDS; k++) {
		for (slot = 0; slot < SPARE_SLOTS; slot++) {
			s->path[k][slot] = xprintf("%s/%s/.spare-%d", data_dir,
			    spare_areas[k].area, slot);
			if (spare_remove(s->path[k][slot]) != 0) {
				log_warn("event=spare.leftover dir=%s error=%s consequence=\""
				    "starts make their own\"", log_q(s->path[k][slot]),
				    log_q(strerror(errno)));
				s->broken[k] = 1;
			}
		}
	}
	s->refill = evtimer_new(base, spare_refill_cb, s);
	evtimer_add(s->refill, &now);
	return s;
}

void
spare_free(struct spare *s)
{
	int	k, slot;

	if (s == NULL)
		return;
	event_free(s->refill);
	for (k = 0; k < SPARE_KINDS; k++) {
		for (slot = 0; slot < SPARE_SLOTS; slot++)
			free(s->path[k][slot]);
	}
	free(s);
}

int
spare_take(struct spare *s, enum spare_kind k, const char *path)
{
	int	slot;

	for (slot = 0; s != NULL && slot < SPARE_SLOTS; slot++) {
		if (!s->ready[k][slot])
			continue;
		if (renameat2(AT_FDCWD, s->path[k][slot], AT_FDCWD, path,
		    RENAME_NOREPLACE) == 0) {
			s->ready[k][slot] = 0;
			s->taken++;
			spare_refill_soon(s);
			return 0;
		}
		if (errno != ENOENT)
			return -1;	/* path is there (or its parent is not): as before */
		s->ready[k][slot] = 0;	/* removed behind the engine's back */
		spare_refill_soon(s);
	}
	if (s != NULL)
		s->missed++;
	return -1;
}

void
spare_counts(const struct spare *s, unsigned long *taken, unsigned long *missed)
{
	*taken = s != NULL ? s->taken : 0;
	*missed = s != NULL ? s->missed : 0;
}
