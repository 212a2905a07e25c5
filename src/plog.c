/* plog.c: the payload log: append-only segment files that the store points into. */
#include "spur.h"
#include "plog.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLOG_IOV_BATCH	512	/* iovecs per pwritev (IOV_MAX is 1024 on Linux) */

struct plog {
	char		*dir;
	int		 dirfd;
	int		 fd;		/* the segment appended to, -1: none yet */
	int64_t		 seq;		/* its number; the next one is seq + 1 */
	int64_t		 size;		/* where its next payload goes */
	int64_t		 started;	/* when it was opened (ms) */
	int64_t		 max_bytes;	/* a new segment past this size */
	int64_t		 max_age;	/* or this age (ms) */
	struct iovec	*iov;		/* the batch, not written yet */
	size_t		 niov;
	size_t		 capiov;
	int64_t		 pending;	/* its bytes */
};

static char *
plog_path(const char *dir, int64_t seq)
{
	return xprintf("%s/%010lld.log", dir, (long long)seq);
}

/* The segment number of a file name "NNNNNNNNNN.log", or -1. */
static int64_t
plog_seq(const char *name)
{
	int64_t	 v = 0;
	size_t	 i;

	if (strlen(name) != 14 || strcmp(name + 10, ".log") != 0)
		return -1;
	for (i = 0; i < 10; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

static int64_t
plog_newest(const char *dir)
{
	DIR		*d;
	struct dirent	*de;
	int64_t		 seq, newest = 0;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if ((seq = plog_seq(de->d_name)) > newest)
			newest = seq;
	}
	closedir(d);
	return newest;
}

/* Opens segment seq for appending (made when create), its size from the file. */
static int
plog_use(struct plog *p, int64_t seq, int create, char **cause)
{
	char		*path = plog_path(p->dir, seq);
	struct stat	 sb;
	int		 fd;

	fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
	if (fd == -1 || fstat(fd, &sb) != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		free(path);
		return -1;
	}
	/* A new name must be on disk before a commit points into the file. */
	if (create && fsync(p->dirfd) != 0) {
		xasprintf(cause, "%s: %s", p->dir, strerror(errno));
		close(fd);
		free(path);
		return -1;
	}
	free(path);
	if (p->fd != -1)
		close(p->fd);
	p->fd = fd;
	p->seq = seq;
	p->size = sb.st_size;
	p->started = now_ms();
	return 0;
}

struct plog *
plog_open(const char *dir, char **cause)
{
	struct plog	*p;
	int64_t		 newest;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		xasprintf(cause, "%s: %s", dir, strerror(errno));
		return NULL;
	}
	p = xcalloc(1, sizeof *p);
	p->dir = xstrdup(dir);
	p->fd = -1;
	p->max_bytes = PLOG_SEGMENT_MAX;
	p->max_age = PLOG_SEGMENT_AGE_MS;
	if ((p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		xasprintf(cause, "%s: %s", dir, strerror(errno));
		plog_close(p);
		return NULL;
	}
	/* Appends go on after whatever the last run wrote, torn tail included. */
	if ((newest = plog_newest(dir)) > 0 && plog_use(p, newest, 0, cause) != 0) {
		plog_close(p);
		return NULL;
	}
	p->seq = newest;
	return p;
}

void
plog_limits(struct plog *p, int64_t max_bytes, int64_t max_age_ms)
{
	p->max_bytes = max_bytes;
	p->max_age = max_age_ms;
}

void
plog_close(struct plog *p)
{
	if (p == NULL)
		return;
	if (p->fd != -1)
		close(p->fd);
	if (p->dirfd != -1)
		close(p->dirfd);
	free(p->iov);
	free(p->dir);
	free(p);
}

int
plog_add(struct plog *p, const void *data, size_t len, int64_t *seg, int64_t *off,
    char **cause)
{
	if (p->niov == 0 && (p->fd == -1 || p->size >= p->max_bytes ||
	    now_ms() - p->started >= p->max_age) &&
	    plog_use(p, p->seq + 1, 1, cause) != 0)
		return -1;
	if (p->niov == p->capiov) {
		p->capiov = p->capiov ? p->capiov * 2 : 64;
		p->iov = xreallocarray(p->iov, p->capiov, sizeof *p->iov);
	}
	p->iov[p->niov].iov_base = (void *)data;
	p->iov[p->niov++].iov_len = len;
	*seg = p->seq;
	*off = p->size + p->pending;
	p->pending += (int64_t)len;
	return 0;
}

int
plog_sync(struct plog *p, char **cause)
{
	struct iovec	*iov = p->iov;
	size_t		 n = p->niov, k;
	off_t		 at = p->size;
	ssize_t		 w;
	int		 rc = 0;

	while (n > 0) {
		k = n < PLOG_IOV_BATCH ? n : PLOG_IOV_BATCH;
		if ((w = pwritev(p->fd, iov, (int)k, at)) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		at += w;
		/* Past what was written: a short write goes on where it stopped. */
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0 && w > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	if (n > 0 || (p->niov > 0 && fdatasync(p->fd) != 0)) {
		xasprintf(cause, "%s: payloads not written: %s", p->dir, strerror(errno));
		rc = -1;
	}
	/* Written or not, those bytes are spent: later payloads go after them. */
	p->size += p->pending;
	p->niov = 0;
	p->pending = 0;
	return rc;
}

void
plog_discard(struct plog *p)
{
	p->niov = 0;
	p->pending = 0;
}

char *
plog_read(const char *dir, int64_t seg, int64_t off, size_t len, char **cause)
{
	char	*path = plog_path(dir, seg), *buf;
	size_t	 got = 0;
	ssize_t	 r;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		free(path);
		return NULL;
	}
	buf = xmalloc(len + 1);
	while (got < len) {
		if ((r = pread(fd, buf + got, len - got, off + (off_t)got)) == -1 &&
		    errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got < len) {
		xasprintf(cause, "%s: payload at %lld cut short (%zu of %zu bytes)", path,
		    (long long)off, got, len);
		free(buf);
		free(path);
		return NULL;
	}
	free(path);
	buf[len] = '\0';
	return buf;
}

int
plog_prune(const char *dir, const int64_t *live, size_t nlive, int64_t before_ms)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 sb;
	int64_t		 seq, newest = plog_newest(dir);
	size_t		 i;
	int		 removed = 0;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if ((seq = plog_seq(de->d_name)) <= 0 || seq == newest)
			continue;
		for (i = 0; i < nlive && live[i] != seq; i++)
			;
		if (i < nlive)
			continue;
		/* Written lately: a commit that points into it may not be visible yet. */
		if (fstatat(dirfd(d), de->d_name, &sb, 0) != 0 ||
		    (int64_t)sb.st_mtime * 1000 >= before_ms)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
