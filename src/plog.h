/*
 * plog.h: the payload log. Webhook payloads are appended to segment files
 * (DATA_DIR/payloads/NNNNNNNNNN.log) and the store keeps where each one is.
 * A payload is written once: in sqlite it would be written to the WAL and
 * again to the database, a page and a syscall at a time. The HTTP fronts
 * append as they accept; the store's writer syncs before it commits.
 */
#ifndef SPUR_PLOG_H
#define SPUR_PLOG_H

#include <stddef.h>
#include <stdint.h>

#define PLOG_SEGMENT_MAX	(64LL * 1024 * 1024)	/* a new segment past this size */
#define PLOG_SEGMENT_AGE_MS	(24LL * 3600 * 1000)	/* or when it was started this long ago */

struct plog;

/* The log in dir (made if missing); appends go on in the newest segment. */
struct plog	*plog_open(const char *dir, char **cause);
void		 plog_close(struct plog *);
/* Other segment limits than PLOG_SEGMENT_MAX and PLOG_SEGMENT_AGE_MS (tests). */
void		 plog_limits(struct plog *, int64_t max_bytes, int64_t max_age_ms);
/*
 * Any thread: appends len bytes (a new segment first when the current one is
 * full or old) and says where they are. They are not durable before the next
 * plog_sync that starts after this returns. -1 with cause: not written.
 */
int		 plog_append(struct plog *, const void *, size_t, int64_t *seg, int64_t *off,
		     char **cause);
/*
 * Waits until every append that returned before this call is on disk
 * (fdatasync of each segment written since): a commit that points at them
 * must come after. -1 with cause: the commit must not happen.
 */
int		 plog_sync(struct plog *, char **cause);
/*
 * Gives back the disk space of a payload no row will point to (a repeated
 * delivery): its bytes read as zeros from then on, the rest of the segment
 * stays as it was. Best effort, nothing to sync: a crash before the space is
 * freed only leaves the bytes where they were. -1: not done (a filesystem
 * without holes, the segment gone); nothing else changed.
 */
int		 plog_discard(const char *dir, int64_t seg, int64_t off, size_t len);
/* Any process: the payload at (seg, off, len), NUL-terminated; NULL with cause. */
char		*plog_read(const char *dir, int64_t seg, int64_t off, size_t len,
		     char **cause);
/*
 * Removes the segments that no stored event refers to (live: the segments
 * that are referred to, any order) and that were last written before
 * before_ms; never the newest. Returns how many were removed.
 */
int		 plog_prune(const char *dir, const int64_t *live, size_t nlive,
		     int64_t before_ms);

#endif
