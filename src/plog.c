/* plog.c: the payload log: append-only segment files that the store points into. */
#include "spur.h"
#include "plog.h"

#include <linux/falloc.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A segment. The one appended to is current; one that is not stays open
 * until what was written to it is synced and nobody writes to it any more.
 */
struct plog_seg {
	int64_t			 seq;
	int			 fd;
	int			 writers;	/* appends (and a sync) in progress */
	int			 dirty;		/* written since its last sync */
	LIST_ENTRY(plog_seg)	 entry;
};

struct plog {
	char			*dir;
	int			 dirfd;
	pthread_mutex_t		 mu;
	struct plog_seg		*cur;		/* NULL: none yet */
	int64_t			 seq;		/* the newest segment's number */
	int64_t			 size;		/* where the next payload goes in cur */
	int64_t			 started;	/* when cur was opened (ms) */
	int64_t			 max_bytes;	/* a new segment past this size */
	int64_t			 max_age;	/* or this age (ms) */
	LIST_HEAD(, plog_seg)	 old;		/* rotated away, not synced or still written */
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

static void
plog_seg_free(struct plog_seg *s)
{
	close(s->fd);
	free(s);
}

/* Under mu: opens segment seq (makes it when create); appends go there from now on. */
static int
plog_use(struct plog *p, int64_t seq, int create, char **cause)
{
	char		*path = plog_path(p->dir, seq);
	struct plog_seg	*s;
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
	s = xcalloc(1, sizeof *s);
	s->seq = seq;
	s->fd = fd;
	if (p->cur != NULL)
		LIST_INSERT_HEAD(&p->old, p->cur, entry);
	p->cur = s;
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
	pthread_mutex_init(&p->mu, NULL);
	LIST_INIT(&p->old);
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
	pthread_mutex_lock(&p->mu);
	p->max_bytes = max_bytes;
	p->max_age = max_age_ms;
	pthread_mutex_unlock(&p->mu);
}

void
plog_close(struct plog *p)
{
	struct plog_seg	*s;

	if (p == NULL)
		return;
	while ((s = LIST_FIRST(&p->old)) != NULL) {
		LIST_REMOVE(s, entry);
		plog_seg_free(s);
	}
	if (p->cur != NULL)
		plog_seg_free(p->cur);
	if (p->dirfd != -1)
		close(p->dirfd);
	pthread_mutex_destroy(&p->mu);
	free(p->dir);
	free(p);
}

int
plog_append(struct plog *p, const void *data, size_t len, int64_t *seg, int64_t *off,
    char **cause)
{
	struct plog_seg	*s;
	const char	*b = data;
	size_t		 done = 0;
	ssize_t		 w;

	pthread_mutex_lock(&p->mu);
	if ((p->cur == NULL || p->size >= p->max_bytes ||
	    now_ms() - p->started >= p->max_age) &&
	    plog_use(p, p->seq + 1, 1, cause) != 0) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	s = p->cur;
	*seg = s->seq;
	*off = p->size;
	p->size += (int64_t)len;
	s->writers++;
	pthread_mutex_unlock(&p->mu);

	/* Appends from several threads go to their own places at once. */
	while (done < len) {
		if ((w = pwrite(s->fd, b + done, len - done, *off + (off_t)done)) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		done += (size_t)w;
	}
	if (done < len)
		xasprintf(cause, "%s: payload not written: %s", p->dir, strerror(errno));

	pthread_mutex_lock(&p->mu);
	s->writers--;
	/* Set after the write, never before: the next plog_sync takes it along. */
	s->dirty = 1;
	pthread_mutex_unlock(&p->mu);
	return done < len ? -1 : 0;
}

int
plog_sync(struct plog *p, char **cause)
{
	struct plog_seg	*s, *next, **todo;
	size_t		 n = 0, i;
	int		 rc = 0;

	pthread_mutex_lock(&p->mu);
	LIST_FOREACH(s, &p->old, entry)
		n++;
	todo = xcalloc(n + 1, sizeof *todo);
	n = 0;
	if (p->cur != NULL && p->cur->dirty)
		todo[n++] = p->cur;
	LIST_FOREACH(s, &p->old, entry) {
		if (s->dirty)
			todo[n++] = s;
	}
	for (i = 0; i < n; i++) {
		todo[i]->dirty = 0;
		todo[i]->writers++;	/* kept open while it is synced */
	}
	pthread_mutex_unlock(&p->mu);

	for (i = 0; i < n; i++) {
		if (fdatasync(todo[i]->fd) != 0 && rc == 0) {
			xasprintf(cause, "%s: payloads not synced: %s", p->dir, strerror(errno));
			rc = -1;
		}
	}

	pthread_mutex_lock(&p->mu);
	for (i = 0; i < n; i++) {
		todo[i]->writers--;
		if (rc != 0)
			todo[i]->dirty = 1;
	}
	/* A segment rotated away, synced and written no more is closed. */
	for (s = LIST_FIRST(&p->old); s != NULL; s = next) {
		next = LIST_NEXT(s, entry);
		if (s->writers == 0 && !s->dirty) {
			LIST_REMOVE(s, entry);
			plog_seg_free(s);
		}
	}
	pthread_mutex_unlock(&p->mu);
	free(todo);
	return rc;
}

int
plog_discard(const char *dir, int64_t seg, int64_t off, size_t len)
{
	char	*path = plog_path(dir, seg);
	int	 fd, rc = -1;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) != -1) {
		rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
		    (off_t)len);
		close(fd);
	}
	free(path);
	return rc == 0 ? 0 : -1;
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
