/* archive.c: an agent's own session files (its conversation) packed into the store and unpacked on another node. */
#include "spur.h"
#include "archive.h"
#include "priv.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The format: "SPURARC1", then for each file its path's length (4 bytes, big
 * endian), the path (below home, '/' between names), its mode (4 bytes), its
 * size (8 bytes) and its bytes. Directories are made from the paths.
 */
#define ARCHIVE_MAGIC		"SPURARC1"
#define ARCHIVE_DEPTH_MAX	32
#define ARCHIVE_PATH_MAX	1024

static void
archive_u32(struct buf *b, uint32_t v)
{
	unsigned char	 c[4] = { v >> 24, v >> 16, v >> 8, v };

	buf_add(b, c, 4);
}

static void
archive_u64(struct buf *b, uint64_t v)
{
	archive_u32(b, (uint32_t)(v >> 32));
	archive_u32(b, (uint32_t)v);
}

/* Adds the tree open as fd (closed here), its paths below prefix. */
static int
archive_tree(int fd, const char *prefix, int depth, size_t max, struct buf *b, char **cause)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	char		*path, *data;
	int		 sub, f, rc = 0;
	ssize_t		 n;
	size_t		 got;

	if (depth > ARCHIVE_DEPTH_MAX || (d = fdopendir(fd)) == NULL) {
		close(fd);
		xasprintf(cause, "%s: too deep, or unreadable", prefix);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		path = *prefix != '\0' ? xprintf("%s/%s", prefix, de->d_name) :
		    xstrdup(de->d_name);
		if (strlen(path) > ARCHIVE_PATH_MAX) {
			xasprintf(cause, "a path over %d bytes", ARCHIVE_PATH_MAX);
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			if ((sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC)) != -1)
				rc = archive_tree(sub, path, depth + 1, max, b, cause);
		} else if (S_ISREG(st.st_mode)) {
			/* O_NONBLOCK: a file swapped for a pipe since the stat does not hang. */
			if ((f = openat(fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC)) != -1 && fstat(f, &st) == 0 && S_ISREG(st.st_mode)) {
				if (b->len + (size_t)st.st_size + strlen(path) + 16 > max) {
					xasprintf(cause, "over %zu bytes", max);
					rc = -1;
				} else {
					data = xmalloc((size_t)st.st_size + 1);
					for (got = 0; got < (size_t)st.st_size; got += (size_t)n) {
						n = read(f, data + got, (size_t)st.st_size - got);
						if (n <= 0)
							break;
					}
					archive_u32(b, (uint32_t)strlen(path));
					buf_adds(b, path);
					archive_u32(b, (uint32_t)(st.st_mode & 0700));
					archive_u64(b, got);
					buf_add(b, data, got);
					free(data);
				}
			}
			if (f != -1)
				close(f);
		}
		free(path);
	}
	closedir(d);
	return rc;
}

int
archive_pack_at(int hfd, const char *subdir, size_t max, char **out, size_t *len,
    char **cause)
{
	struct buf	 b;
	char		*copy, *name, *save = NULL;
	int		 fd, next;

	/* subdir is the agent's ("a/b"): each of its names opened without following. */
	if ((fd = dup(hfd)) == -1) {
		xasprintf(cause, "dup: %s", strerror(errno));
		return -1;
	}
	copy = xstrdup(subdir);
	for (name = strtok_r(copy, "/", &save); name != NULL && fd != -1;
	    name = strtok_r(NULL, "/", &save)) {
		next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	free(copy);
	if (fd == -1)
		return 1;
	buf_init(&b, 0);
	buf_adds(&b, ARCHIVE_MAGIC);
	if (archive_tree(fd, subdir, 0, max, &b, cause) != 0) {
		buf_free(&b);
		return -1;
	}
	*len = b.len;
	*out = buf_take(&b);
	return 0;
}

/* The engine left root: the helper packs as the session's uid, into a memfd it hands back. */
static int
archive_pack_priv(const char *home, const char *subdir, uid_t uid, gid_t gid, size_t max,
    char **out, size_t *len, char **cause, int *rc)
{
	struct stat	 st;
	ssize_t		 n;
	int		 fd;

	if (!priv_job_path(PRIV_JOB_PACK, home, subdir, uid, gid, -1, &fd, rc, cause))
		return 0;
	if (*rc != 0 || fd == -1) {
		if (fd != -1)
			close(fd);
		return 1;
	}
	if (fstat(fd, &st) != 0 || st.st_size < 8 || (size_t)st.st_size > max + 4096) {
		xasprintf(cause, "the helper's archive: %s", "not one, or over its bound");
		*rc = -1;
	} else {
		*out = xmalloc((size_t)st.st_size);
		if ((n = pread(fd, *out, (size_t)st.st_size, 0)) != (ssize_t)st.st_size) {
			free(*out);
			*out = NULL;
			xasprintf(cause, "the helper's archive: short read");
			*rc = -1;
		} else
			*len = (size_t)n;
	}
	close(fd);
	return 1;
}

int
archive_pack(const char *home, const char *subdir, uid_t uid, gid_t gid, size_t max,
    char **out, size_t *len, char **cause)
{
	int	 hfd, rc;

	if (archive_pack_priv(home, subdir, uid, gid, max, out, len, cause, &rc))
		return rc;
	if ((hfd = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 1;
		xasprintf(cause, "%s: %s", home, strerror(errno));
		return -1;
	}
	rc = archive_pack_at(hfd, subdir, max, out, len, cause);
	close(hfd);
	return rc;
}

static uint32_t
archive_get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A path of the archive is names below home: none empty, none "." or "..". */
static int
archive_path_ok(const char *path)
{
	const char	*p = path, *e;

	if (*p == '\0' || *p == '/')
		return 0;
	for (; *p != '\0'; p = *e == '/' ? e + 1 : e) {
		e = p + strcspn(p, "/");
		if (e == p || (e - p == 1 && p[0] == '.') || (e - p == 2 && p[0] == '.' &&
		    p[1] == '.'))
			return 0;
	}
	return 1;
}

/* Opens (making it) the directory of path's last name below dirfd; the name's offset in *base. */
static int
archive_dirs(int home, const char *path, uid_t uid, gid_t gid, const char **base)
{
	char	*copy = xstrdup(path), *p = copy, *slash;
	int	 fd = dup(home), next;

	while (fd != -1 && (slash = strchr(p, '/')) != NULL) {
		*slash = '\0';
		if (mkdirat(fd, p, 0700) == 0)
			fchownat(fd, p, uid, gid, AT_SYMLINK_NOFOLLOW);
		next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		p = slash + 1;
	}
	*base = path + (p - copy);
	free(copy);
	return fd;
}

int
archive_each(const char *data, size_t len, archive_each_cb cb, void *arg, char **cause)
{
	const unsigned char	*p = (const unsigned char *)data, *end = p + len;
	char			*path;
	uint32_t		 plen, mode;
	uint64_t		 size;
	int			 rc;

	if (len < 8 || memcmp(data, ARCHIVE_MAGIC, 8) != 0) {
		xasprintf(cause, "not a session archive");
		return -1;
	}
	for (p += 8; p < end; p += size) {
		if (end - p < 4 || (plen = archive_get32(p)) > ARCHIVE_PATH_MAX ||
		    (size_t)(end - p) < 4 + (size_t)plen + 12)
			goto bad;
		path = xprintf("%.*s", (int)plen, (const char *)p + 4);
		p += 4 + plen;
		mode = archive_get32(p) & 0700;
		size = (uint64_t)archive_get32(p + 4) << 32 | archive_get32(p + 8);
		p += 12;
		if (strlen(path) != plen || !archive_path_ok(path) || size > (uint64_t)(end - p)) {
			free(path);
			goto bad;
		}
		rc = cb(path, mode, (const char *)p, (size_t)size, arg, cause);
		free(path);
		if (rc != 0)
			return rc;
	}
	return 0;
bad:
	xasprintf(cause, "a damaged session archive");
	return -1;
}

struct archive_unpack_ctx {
	int	 home;
	uid_t	 uid;
	gid_t	 gid;
};

/* One file of the archive made anew below the home directory, as its owner. */
static int
archive_unpack_file(const char *path, unsigned mode, const char *data, size_t size, void *arg,
    char **cause)
{
	struct archive_unpack_ctx	*u = arg;
	const char			*base;
	int				 dfd, f;
	ssize_t				 w;

	if ((dfd = archive_dirs(u->home, path, u->uid, u->gid, &base)) == -1 ||
	    (f = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    mode | 0600)) == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		if (dfd != -1)
			close(dfd);
		return -1;
	}
	w = write(f, data, size);
	if (fchown(f, u->uid, u->gid) != 0 || w != (ssize_t)size) {
		xasprintf(cause, "%s: %s", path, w < 0 ? strerror(errno) : "short write");
		close(f);
		close(dfd);
		return -1;
	}
	close(f);
	close(dfd);
	return 0;
}

int
archive_unpack_at(int hfd, const char *data, size_t len, uid_t uid, gid_t gid,
    char **cause)
{
	struct archive_unpack_ctx	u = { hfd, uid, gid };

	return archive_each(data, len, archive_unpack_file, &u, cause) == 0 ? 0 : -1;
}

int
archive_unpack(const char *home, const char *data, size_t len, uid_t uid, gid_t gid,
    char **cause)
{
	int	 hfd, fd, rc;

	/* The engine left root: the helper unpacks as uid, the archive in a memfd. */
	if (geteuid() != 0 && priv_client_active() &&
	    (fd = memfd_create("spur-archive", MFD_CLOEXEC)) != -1) {
		if (write(fd, data, len) == (ssize_t)len && priv_job_path(PRIV_JOB_UNPACK,
		    home, NULL, uid, gid, fd, NULL, &rc, cause)) {
			close(fd);
			return rc;
		}
		close(fd);
	}
	if ((hfd = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		xasprintf(cause, "%s: %s", home, strerror(errno));
		return -1;
	}
	rc = archive_unpack_at(hfd, data, len, uid, gid, cause);
	close(hfd);
	return rc;
}
