/*
 * plog.h: the payload log, the write-ahead record of what ingest accepted.
 * Segment files (DATA_DIR/payloads/NNNNNNNNNN.log) hold records, one an
 * accepted delivery: its rows as ingest will store them (meta) and its
 * payload as received. The store's writer appends a batch's records, syncs
 * them once, and only then applies their rows to the store (which need not
 * sync) and answers: a 200 waits for one fsync, and a crash before the rows
 * were on disk is mended at the next start by applying the records after the
 * last one the store says it applied (plog_scan). A stored event's payload is
 * read from its record (plog_read), never copied into the store.
 *
 * A segment starts with PLOG_HEAD bytes ("SPURLOG2", then 8 zero bytes); a
 * record is PLOG_REC_HEAD bytes (magic "SPR1", the meta's length, the
 * payload's length, each a little-endian u32, and the CRC-32C of those 12
 * bytes, the meta and the payload), the meta, then the payload. Segments
 * written before the records (payloads back to back) are read by offset and
 * pruned as before, never scanned.
 */
#ifndef SPUR_PLOG_H
#define SPUR_PLOG_H

#include <sys/uio.h>
#include <stddef.h>
#include <stdint.h>

#define PLOG_SEGMENT_MAX	(64LL * 1024 * 1024)	/* a new segment past this size */
#define PLOG_SEGMENT_AGE_MS	(24LL * 3600 * 1000)	/* or when it was started this long ago */
#define PLOG_HEAD		16	/* a segment's header */
#define PLOG_REC_HEAD		16	/* a record's header */
#define PLOG_REC_MAX		(256U * 1024 * 1024)	/* meta or payload past this: not a record */

struct plog;

/*
 * The log in dir (made if missing). Appends go on after the newest segment's
 * end when it holds records (scan it first: plog_scan cuts a torn tail), else
 * in a new segment; always in a new one when fresh (nothing was scanned).
 */
struct plog	*plog_open(const char *dir, int fresh, char **cause);
void		 plog_close(struct plog *);
/* Other segment limits than PLOG_SEGMENT_MAX and PLOG_SEGMENT_AGE_MS (tests). */
void		 plog_limits(struct plog *, int64_t max_bytes, int64_t max_age_ms);
/* A record's header for its meta and payload (the CRC over all three). */
void		 plog_record_head(unsigned char head[PLOG_REC_HEAD], const void *meta,
		     size_t metalen, const void *payload, size_t paylen);
/*
 * One thread (the store's writer): appends whole records, given as iov, in
 * one segment (a new one first when the current one is full or old) and says
 * where their first byte went. Not durable before the next plog_sync. -1 with
 * cause: not written, and nothing of it is left where the next append goes.
 */
int		 plog_write(struct plog *, const struct iovec *, int iovcnt, int64_t *seg,
		     int64_t *off, char **cause);
/*
 * Everything plog_write wrote is on disk (fdatasync of each segment written
 * since): rows that point at it may be committed, its deliveries answered.
 * -1 with cause: not so (the next append goes to a new segment).
 */
int		 plog_sync(struct plog *, char **cause);
/* A record's place in the log. */
struct plog_at {
	int64_t		 seg;
	int64_t		 off;
};

/*
 * Gives back the disk space of records no row will point to (repeated
 * deliveries), once the rows that say so are on disk: each record's header
 * becomes a tombstone ("SPRD", its lengths, the CRC of those 12 bytes) that
 * plog_scan steps over, synced before the rest of the record becomes a hole
 * (it reads as zeros from then on). Best effort: a record that cannot be
 * made a tombstone (a filesystem without holes, the segment gone) stays as
 * it was. Returns how many were given back.
 */
int		 plog_discard(const char *dir, const struct plog_at *, size_t n);
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

/* What plog_scan found. */
struct plog_scan {
	int64_t		 records;	/* whole records read */
	int64_t		 tombstones;	/* discarded records stepped over */
	int64_t		 cut_bytes;	/* torn or corrupt bytes cut off */
	int		 cut_segments;	/* segments cut short */
	int64_t		 end_seg;	/* where the last whole record read ends */
	int64_t		 end_off;
};

/*
 * The record at (seg, off, end: where it ends), meta and payload in memory
 * until the call returns. Not 0: stop reading (plog_scan returns -1).
 */
typedef int	(*plog_record_cb)(int64_t seg, int64_t off, int64_t end,
		    const unsigned char *meta, size_t metalen,
		    const unsigned char *payload, size_t paylen, void *arg);

/*
 * At start, before plog_open: each whole record from (seg, off) on, in order,
 * through every later segment. In a segment, the first record that is cut
 * short or fails its check ends it: the segment is cut there (truncated and
 * synced), as nothing after it was ever answered, and reading goes on in the
 * next one. 0, or -1 with cause (a segment that cannot be read or cut).
 */
int		 plog_scan(const char *dir, int64_t seg, int64_t off, plog_record_cb,
		     void *arg, struct plog_scan *, char **cause);

#endif
