/* safefs.c: work on directories a sandbox can write, by descriptors that never follow a link. */
#include "spur.h"
#include "priv.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Whatever a sandbox can write is hostile to the engine, which is root: a
 * path walked by name can be swapped for a link between a check and its use
 * (rename(2) with RENAME_EXCHANGE makes that a single atomic step). So every
 * walk here opens each directory relative to its parent's descriptor with
 * O_NOFOLLOW | O_DIRECTORY and acts with *at() calls on names inside it: a
 * swapped-in link is refused (ELOOP, ENOTDIR) or removed as itself, never
 * followed. Nothing here chmods or chowns by path.
 */

#define SAFEFS_DEPTH_MAX	512	/* a tree deeper than this is left where it is */

static int
safefs_open_dir(int parent, const char *name)
{
	return openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Empties the directory open as fd (closed here). */
static int
safefs_empty(int fd, int depth)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	int		 sub, r = 0, retried = 0;

	if (depth > SAFEFS_DEPTH_MAX || (d = fdopendir(fd)) == NULL) {
		close(fd);
		errno = ELOOP;
		return -1;
	}
again:
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			/*
			 * Not root, a directory the sandbox made unreadable opens
			 * once it is ours again (AT_SYMLINK_NOFOLLOW: never a link's
			 * target; root needs no such thing).
			 */
			if ((sub = safefs_open_dir(fd, de->d_name)) == -1 && errno == EACCES &&
			    geteuid() != 0 &&
			    fchmodat(fd, de->d_name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
				sub = safefs_open_dir(fd, de->d_name);
			if (sub != -1) {
				if (safefs_empty(sub, depth + 1) != 0)
					r = -1;
				if (unlinkat(fd, de->d_name, AT_REMOVEDIR) != 0 &&
				    errno != ENOENT)
					r = -1;
				continue;
			}
		}
		/* Not a directory, or it stopped being one: the entry itself goes. */
		if (unlinkat(fd, de->d_name, 0) != 0 && errno != ENOENT)
			r = -1;
	}
	/*
	 * Not root: a directory the sandbox made read-only cannot be emptied
	 * until it is writable again: through its descriptor, which is itself.
	 */
	if (r != 0 && !retried && geteuid() != 0 && fchmod(fd, 0700) == 0) {
		retried = 1;
		r = 0;
		rewinddir(d);
		goto again;
	}
	closedir(d);
	return r;
}

int
rm_rf(const char *path)
{
	char	*dir, *base, *cause = NULL;
	int	 pfd, r = -1;

	/* The engine left root: what a session's uid owns goes through the helper. */
	if (priv_dir_path(PRIV_REMOVE_DIR, path, 0, 0, &r, &cause)) {
		if (r != 0)
			log_warn("event=safefs.remove_failed path=%s error=%s", log_q(path),
			    log_q(cause));
		free(cause);
		return r;
	}
	dir = path_dirname(path);
	base = xstrdup((base = strrchr(path, '/')) != NULL ? base + 1 : path);
	/* The parent is the engine's (a session, a run's directory): never the sandbox's. */
	if ((pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		r = errno == ENOENT ? 0 : -1;
		goto out;
	}
	r = safefs_remove_at(pfd, base);
	close(pfd);
out:
	free(dir);
	free(base);
	return r;
}

int
safefs_remove_at(int pfd, const char *base)
{
	int	 fd, r;

	if ((fd = safefs_open_dir(pfd, base)) == -1) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP)
			return unlinkat(pfd, base, 0) == 0 || errno == ENOENT ? 0 : -1;
		return -1;
	}
	r = safefs_empty(fd, 0);
	if (unlinkat(pfd, base, AT_REMOVEDIR) != 0 && errno != ENOENT)
		r = -1;
	return r;
}

/* Whether a regular file under the directory fd matches the pattern's components from comp on. */
static int
safefs_match(int fd, char **comp, size_t ncomp, size_t at, int depth)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	int		 sub, dfd, found = 0;

	if (depth > SAFEFS_DEPTH_MAX || (dfd = dup(fd)) == -1)
		return 0;
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return 0;
	}
	while (!found && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fnmatch(comp[at], de->d_name, FNM_PERIOD) != 0)
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (at + 1 == ncomp)
			found = S_ISREG(st.st_mode);
		else if (S_ISDIR(st.st_mode) &&
		    (sub = safefs_open_dir(fd, de->d_name)) != -1) {
			found = safefs_match(sub, comp, ncomp, at + 1, depth + 1);
			close(sub);
		}
	}
	closedir(d);
	return found;
}

int
safefs_glob_at(int fd, const char *pattern)
{
	char	*copy, *comp[64], *p, *save = NULL;
	size_t	 n = 0;
	int	 found = 0;

	if (pattern == NULL || *pattern == '/' || *pattern == '\0')
		return 0;
	copy = xstrdup(pattern);
	for (p = strtok_r(copy, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
		/* ".." could climb out; "." is the same directory. */
		if (strcmp(p, "..") == 0 || n == SPUR_ARRLEN(comp))
			goto out;
		if (strcmp(p, ".") != 0)
			comp[n++] = p;
	}
	if (n > 0)
		found = safefs_match(fd, comp, n, 0, 0);
out:
	free(copy);
	return found;
}

int
safefs_glob_file(const char *dir, const char *pattern)
{
	char	*cause = NULL;
	int	 fd, found = 0;

	/* The engine left root: the helper looks, by descriptors, as root. */
	if (priv_job_path(PRIV_JOB_GLOB, dir, pattern, 0, 0, -1, NULL, &found, &cause)) {
		if (found < 0)
			log_warn("event=safefs.glob_failed dir=%s error=%s", log_q(dir),
			    log_q(cause));
		free(cause);
		return found == 1;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		found = safefs_glob_at(fd, pattern);
		close(fd);
	}
	return found;
}

/*
 * Walks the tree open as fd (closed here): adds the disk usage of what it holds
 * to *bytes, and with give set gives what from owns to uid:gid (a link
 * itself, never its target; a file of anyone else, such as a hard link to one,
 * is left alone).
 */
static void
safefs_tree(int fd, int depth, int give, uid_t from, uid_t uid, gid_t gid,
    unsigned long long *bytes, int *failed)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	int		 sub;

	if (depth > SAFEFS_DEPTH_MAX || (d = fdopendir(fd)) == NULL) {
		close(fd);
		*failed = 1;
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		*bytes += (unsigned long long)st.st_blocks * 512;
		if (give && st.st_uid == from && fchownat(fd, de->d_name, uid, gid,
		    AT_SYMLINK_NOFOLLOW) != 0)
			*failed = 1;
		if (S_ISDIR(st.st_mode) && (sub = safefs_open_dir(fd, de->d_name)) != -1)
			safefs_tree(sub, depth + 1, give, from, uid, gid, bytes, failed);
	}
	closedir(d);
}

/* The tree at path (its parents the engine's), by descriptors; -1 if it cannot be opened. */
static int
safefs_walk(const char *path, int give, uid_t from, uid_t uid, gid_t gid,
    unsigned long long *bytes)
{
	struct stat	st;
	int		fd, failed = 0;

	*bytes = 0;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) != 0) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	*bytes = (unsigned long long)st.st_blocks * 512;
	if (give && st.st_uid == from && fchown(fd, uid, gid) != 0)
		failed = 1;
	safefs_tree(fd, 0, give, from, uid, gid, bytes, &failed);
	return failed ? -1 : 0;
}

int
safefs_du(const char *path, unsigned long long *bytes)
{
	char	*cause = NULL, text[32];
	int	 rc, fd;
	ssize_t	 n;

	if (priv_job_path(PRIV_JOB_DU, path, NULL, 0, 0, -1, &fd, &rc, &cause)) {
		*bytes = 0;
		if (rc == 0 && fd != -1 && (n = pread(fd, text, sizeof text - 1, 0)) > 0) {
			text[n] = '\0';
			*bytes = strtoull(text, NULL, 10);
		} else
			rc = -1;
		if (fd != -1)
			close(fd);
		free(cause);
		return rc;
	}
	return safefs_walk(path, 0, 0, 0, 0, bytes);
}

int
safefs_du_fd(int fd, unsigned long long *bytes)
{
	struct stat	st;
	int		failed = 0;

	*bytes = 0;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	*bytes = (unsigned long long)st.st_blocks * 512;
	safefs_tree(fd, 0, 0, 0, 0, 0, bytes, &failed);
	return failed ? -1 : 0;
}

int
safefs_chown_fd(int fd, uid_t from, uid_t uid, gid_t gid)
{
	unsigned long long	bytes = 0;
	struct stat		st;
	int			failed = 0;

	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	if (st.st_uid == from && fchown(fd, uid, gid) != 0)
		failed = 1;
	safefs_tree(fd, 0, 1, from, uid, gid, &bytes, &failed);
	return failed ? -1 : 0;
}

int
safefs_chown(const char *path, uid_t from, uid_t uid, gid_t gid)
{
	unsigned long long	bytes;
	int			rc;

	if (priv_chown_path(path, from, uid, gid, &rc))
		return rc;
	return safefs_walk(path, 1, from, uid, gid, &bytes);
}
