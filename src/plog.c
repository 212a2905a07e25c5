/* plog.c: the payload log: append-only segments of checksummed records, the write-ahead record of ingest. */
#include "spur.h"
#include "plog.h"

#include <linux/falloc.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/uio.h>
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
	int			 dirty;		/* written since its last sync */
	LIST_ENTRY(plog_seg)	 entry;
};

struct plog {
	char			*dir;
	int			 dirfd;
	pthread_mutex_t		 mu;
	struct plog_seg		*cur;		/* NULL: none yet */
	int64_t			 seq;		/* the newest segment's number */
	int64_t			 size;		/* where the next record goes in cur */
	int64_t			 started;	/* when cur was opened (ms) */
	int64_t			 max_bytes;	/* a new segment past this size */
	int64_t			 max_age;	/* or this age (ms) */
	LIST_HEAD(, plog_seg)	 old;		/* rotated away, not synced yet */
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

static const unsigned char plog_magic[PLOG_HEAD] = "SPURLOG2\0\0\0\0\0\0\0";
static const unsigned char plog_rec_magic[4] = { 'S', 'P', 'R', '1' };
static const unsigned char plog_tomb_magic[4] = { 'S', 'P', 'R', 'D' };

void
plog_record_head(unsigned char head[PLOG_REC_HEAD], const void *meta, size_t metalen,
    const void *payload, size_t paylen)
{
	uint32_t	 c;

	memcpy(head, plog_rec_magic, 4);
	le32_put(head + 4, (uint32_t)metalen);
	le32_put(head + 8, (uint32_t)paylen);
	c = crc32c(0, head, 12);
	c = crc32c(c, meta, metalen);
	c = crc32c(c, payload, paylen);
	le32_put(head + 12, c);
}

static int	plog_pread_all(int, void *, size_t, off_t);

/* Writes all of len bytes at off; -1 with errno. */
static int
plog_pwrite_all(int fd, const void *data, size_t len, off_t off)
{
	const char	*b = data;
	ssize_t		 w;

	while (len > 0) {
		if ((w = pwrite(fd, b, len, off)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

/*
 * Under mu: opens segment seq; appends go there from now on. A new one (or
 * an empty one: made by hand, or before its header was written) gets its
 * header first.
 */
static int
plog_use(struct plog *p, int64_t seq, int create, char **cause)
{
	char		*path = plog_path(p->dir, seq);
	struct plog_seg	*s;
	struct stat	 sb;
	int		 fd;

	/* The umask (store_open's) leaves the group's read when data_dir is the group's. */
	fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0640);
	if (fd == -1 || fstat(fd, &sb) != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		free(path);
		return -1;
	}
	if (sb.st_size == 0 && plog_pwrite_all(fd, plog_magic, PLOG_HEAD, 0) != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		close(fd);
		/* Made now and empty: gone again, so that the next try makes it anew. */
		if (create)
			unlinkat(p->dirfd, strrchr(path, '/') + 1, 0);
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
	s->dirty = sb.st_size == 0;
	if (p->cur != NULL)
		LIST_INSERT_HEAD(&p->old, p->cur, entry);
	p->cur = s;
	p->seq = seq;
	p->size = sb.st_size == 0 ? PLOG_HEAD : sb.st_size;
	p->started = now_ms();
	return 0;
}

/* Whether fd starts with a record segment's header. */
static int
plog_is_records(int fd)
{
	unsigned char	 head[PLOG_HEAD];

	return pread(fd, head, PLOG_HEAD, 0) == PLOG_HEAD &&
	    memcmp(head, plog_magic, PLOG_HEAD) == 0;
}

struct plog *
plog_open(const char *dir, int fresh, char **cause)
{
	struct plog	*p;
	int64_t		 newest;
	char		*path;
	struct stat	 sb;
	int		 fd, use = 0;

	if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
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
	/*
	 * Appends go on after the newest segment's last record (plog_scan cut
	 * any torn tail), or in a new segment when the newest is of payloads
	 * back to back (written before the records) or has a torn header.
	 */
	if ((newest = plog_newest(dir)) > 0 && !fresh) {
		path = plog_path(dir, newest);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
			use = fstat(fd, &sb) == 0 && (sb.st_size == 0 || plog_is_records(fd));
			close(fd);
		}
		free(path);
	}
	if (use && plog_use(p, newest, 0, cause) != 0) {
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

/* Under mu: the current segment moves to the old ones (to be synced, then closed). */
static void
plog_retire(struct plog *p)
{
	if (p->cur == NULL)
		return;
	p->cur->dirty = 1;
	LIST_INSERT_HEAD(&p->old, p->cur, entry);
	p->cur = NULL;
}

int
plog_write(struct plog *p, const struct iovec *iov, int iovcnt, int64_t *seg,
    int64_t *off, char **cause)
{
	struct plog_seg	*s;
	int64_t		 at;
	size_t		 skip = 0;
	ssize_t		 w;
	int		 i, n;

	pthread_mutex_lock(&p->mu);
	if ((p->cur == NULL || p->size >= p->max_bytes ||
	    now_ms() - p->started >= p->max_age) &&
	    plog_use(p, p->seq + 1, 1, cause) != 0) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	s = p->cur;
	at = p->size;
	pthread_mutex_unlock(&p->mu);

	/* One writer: the records go where the last ones ended, in as few calls as the kernel takes. */
	for (i = 0; i < iovcnt;) {
		struct iovec	 part[IOV_MAX];
		size_t		 done = 0;

		for (n = 0; n < IOV_MAX && i + n < iovcnt; n++) {
			part[n] = iov[i + n];
			if (n == 0) {
				part[0].iov_base = (char *)part[0].iov_base + skip;
				part[0].iov_len -= skip;
			}
		}
		if ((w = pwritev(s->fd, part, n, at)) <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			if (w == 0)
				errno = EIO;
			goto fail;
		}
		at += w;
		done = (size_t)w;
		/* Past what was written: whole iovecs, then into the next one. */
		while (i < iovcnt && done > 0) {
			size_t left = iov[i].iov_len - skip;

			if (done >= left) {
				done -= left;
				skip = 0;
				i++;
			} else {
				skip += done;
				done = 0;
			}
		}
		while (i < iovcnt && iov[i].iov_len == skip) {
			skip = 0;
			i++;
		}
	}
	pthread_mutex_lock(&p->mu);
	*seg = s->seq;
	*off = p->size;
	p->size = at;
	s->dirty = 1;
	pthread_mutex_unlock(&p->mu);
	return 0;
fail:
	xasprintf(cause, "%s: records not written: %s", p->dir, strerror(errno));
	pthread_mutex_lock(&p->mu);
	/* Nothing half written may stay before the next records: cut back, or leave the segment. */
	if (ftruncate(s->fd, p->size) != 0)
		plog_retire(p);
	pthread_mutex_unlock(&p->mu);
	return -1;
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
	for (i = 0; i < n; i++)
		todo[i]->dirty = 0;
	pthread_mutex_unlock(&p->mu);

	for (i = 0; i < n; i++) {
		if (fdatasync(todo[i]->fd) != 0 && rc == 0) {
			xasprintf(cause, "%s: records not synced: %s", p->dir, strerror(errno));
			rc = -1;
		}
	}

	pthread_mutex_lock(&p->mu);
	/*
	 * After a failed fdatasync what the file holds is not known: the records
	 * that follow go to a new segment, and this one is never synced again.
	 */
	if (rc != 0)
		plog_retire(p);
	for (s = LIST_FIRST(&p->old); s != NULL; s = next) {
		next = LIST_NEXT(s, entry);
		if (rc != 0 || !s->dirty) {
			LIST_REMOVE(s, entry);
			plog_seg_free(s);
		}
	}
	pthread_mutex_unlock(&p->mu);
	free(todo);
	return rc;
}

/* Reads all of len bytes at off: 1 read, 0 the file ends first, -1 an error. */
static int
plog_pread_all(int fd, void *buf, size_t len, off_t off)
{
	char	*b = buf;
	ssize_t	 r;

	while (len > 0) {
		if ((r = pread(fd, b, len, off)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			return 0;
		b += r;
		len -= (size_t)r;
		off += r;
	}
	return 1;
}

/* One segment's records from off on; cuts it at the first bad one. */
static int
plog_scan_seg(const char *dir, int64_t seq, int64_t off, plog_record_cb cb, void *arg,
    struct plog_scan *sc, char **cause)
{
	char		*path = plog_path(dir, seq);
	unsigned char	 head[PLOG_REC_HEAD], *buf = NULL;
	struct stat	 sb;
	uint32_t	 metalen, paylen, c;
	size_t		 cap = 0, len;
	int		 fd, r, tomb, rc = -1;

	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1) {
		rc = errno == ENOENT ? 0 : -1;
		if (rc != 0)
			xasprintf(cause, "%s: %s", path, strerror(errno));
		free(path);
		return rc;
	}
	if (fstat(fd, &sb) != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* Payloads back to back, or a header never written whole: nothing here was answered. */
	if (!plog_is_records(fd)) {
		rc = 0;
		goto out;
	}
	if (off < PLOG_HEAD)
		off = PLOG_HEAD;
	for (;;) {
		if (off >= sb.st_size) {
			rc = 0;
			goto out;
		}
		if ((r = plog_pread_all(fd, head, PLOG_REC_HEAD, off)) == -1)
			break;
		tomb = r == 1 && memcmp(head, plog_tomb_magic, 4) == 0;
		if (r == 0 || (!tomb && memcmp(head, plog_rec_magic, 4) != 0))
			goto cut;
		metalen = le32_get(head + 4);
		paylen = le32_get(head + 8);
		if (metalen > PLOG_REC_MAX || paylen > PLOG_REC_MAX ||
		    off + PLOG_REC_HEAD + (int64_t)metalen + paylen > sb.st_size)
			goto cut;
		/* A repeated delivery's, applied and given back: its header alone is checked. */
		if (tomb) {
			if (crc32c(0, head, 12) != le32_get(head + 12))
				goto cut;
			sc->tombstones++;
			off += PLOG_REC_HEAD + (int64_t)metalen + paylen;
			continue;
		}
		len = (size_t)metalen + paylen;
		if (len + 1 > cap) {
			free(buf);
			cap = len + 1;
			buf = xmalloc(cap);
		}
		if ((r = plog_pread_all(fd, buf, len, off + PLOG_REC_HEAD)) == -1)
			break;
		c = crc32c(crc32c(0, head, 12), buf, len);
		if (r == 0 || c != le32_get(head + 12))
			goto cut;
		sc->records++;
		sc->end_seg = seq;
		sc->end_off = off + PLOG_REC_HEAD + (int64_t)len;
		if (cb(seq, off, sc->end_off, buf, metalen, buf + metalen, paylen, arg) != 0) {
			xasprintf(cause, "%s: record at %lld not applied", path, (long long)off);
			goto out;
		}
		off = sc->end_off;
	}
	xasprintf(cause, "%s: %s", path, strerror(errno));
	goto out;
cut:
	/* Never answered (its batch was not synced whole): it and what follows go. */
	if (ftruncate(fd, off) != 0 || fdatasync(fd) != 0) {
		xasprintf(cause, "%s: cannot cut the torn tail at %lld: %s", path, (long long)off,
		    strerror(errno));
		goto out;
	}
	sc->cut_bytes += sb.st_size - off;
	sc->cut_segments++;
	rc = 0;
out:
	free(buf);
	free(path);
	close(fd);
	return rc;
}

int
plog_scan(const char *dir, int64_t seg, int64_t off, plog_record_cb cb, void *arg,
    struct plog_scan *sc, char **cause)
{
	int64_t		 seq, newest = plog_newest(dir);

	memset(sc, 0, sizeof *sc);
	sc->end_seg = seg;
	sc->end_off = off;
	for (seq = seg > 0 ? seg : 1; seq <= newest; seq++) {
		if (plog_scan_seg(dir, seq, seq == seg ? off : PLOG_HEAD, cb, arg, sc,
		    cause) != 0)
			return -1;
	}
	return 0;
}

int
plog_discard(const char *dir, const struct plog_at *at, size_t n)
{
	unsigned char	 head[PLOG_REC_HEAD];
	int64_t		*len = xcalloc(n > 0 ? n : 1, sizeof *len);
	size_t		 i, j;
	char		*path;
	int		 fd, given = 0;

	/* Segment by segment (a batch's are nearly always in one): tombstones, one sync, holes. */
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && at[j].seg != at[i].seg; j++)
			;
		if (j < i)
			continue;
		path = plog_path(dir, at[i].seg);
		fd = open(path, O_RDWR | O_CLOEXEC);
		free(path);
		if (fd == -1)
			continue;
		for (j = i; j < n; j++) {
			len[j] = 0;
			if (at[j].seg != at[i].seg ||
			    plog_pread_all(fd, head, PLOG_REC_HEAD, at[j].off) != 1 ||
			    memcmp(head, plog_rec_magic, 4) != 0)
				continue;
			len[j] = (int64_t)le32_get(head + 4) + le32_get(head + 8);
			memcpy(head, plog_tomb_magic, 4);
			le32_put(head + 12, crc32c(0, head, 12));
			if (plog_pwrite_all(fd, head, PLOG_REC_HEAD, at[j].off) != 0)
				len[j] = 0;
		}
		if (fdatasync(fd) == 0) {
			for (j = i; j < n; j++) {
				if (at[j].seg == at[i].seg && len[j] > 0 &&
				    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				    at[j].off + PLOG_REC_HEAD, len[j]) == 0)
					given++;
			}
		}
		close(fd);
	}
	free(len);
	return given;
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
