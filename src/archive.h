/* archive.h: an agent's own session files (its conversation) packed into the store and unpacked on another node. */
#ifndef SPUR_ARCHIVE_H
#define SPUR_ARCHIVE_H

#include <stddef.h>
#include <sys/types.h>

/* At most this many bytes of files are kept for a session; past it none are (the run says so). */
#define ARCHIVE_MAX	(8 * 1024 * 1024)

/*
 * The regular files under home/subdir (a tree the sandbox wrote: walked by
 * descriptors, never through a link; links, devices and pipes are left out),
 * packed with their paths below home (subdir "": home's own tree, its paths
 * below it). 0 with *out (to free) and *len; 1 when
 * there is nothing there; -1 with the reason (over max, unreadable).
 */
int	archive_pack(const char *home, const char *subdir, uid_t uid, gid_t gid, size_t max,
	    char **out, size_t *len, char **cause);
/* The same below the directory open as fd (kept open); the helper's child calls it as uid. */
int	archive_pack_at(int fd, const char *subdir, size_t max, char **out, size_t *len,
	    char **cause);
/*
 * Writes what archive_pack made into home, an empty directory of the
 * engine's: each directory and file made anew (O_EXCL, never through a link),
 * owned by uid and gid. -1 with the reason when the archive is not one.
 * With the engine not root but its helper there, the helper's child does it
 * as uid (archive_pack likewise, reading as uid).
 */
int	archive_unpack(const char *home, const char *data, size_t len, uid_t uid, gid_t gid,
	    char **cause);
int	archive_unpack_at(int fd, const char *data, size_t len, uid_t uid, gid_t gid,
	    char **cause);

/*
 * Each file of an archive archive_pack made, in its order: cb gets its path
 * (checked: names below home, none "." or ".."), mode and bytes; a cb that
 * does not return 0 stops the walk with what it returned. -1 with the reason
 * when the archive is damaged.
 */
typedef int (*archive_each_cb)(const char *path, unsigned mode, const char *data, size_t size,
	    void *arg, char **cause);
int	archive_each(const char *data, size_t len, archive_each_cb, void *arg, char **cause);

#endif
