/* test-plog.c: the payload log: appends, reads back, segments, a torn tail, pruning. */
#include "spur.h"
#include "plog.h"
#include "tap.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char	 dir[256];

static int
seg_exists(int64_t seq)
{
	char		 path[512];
	struct stat	 sb;

	snprintf(path, sizeof path, "%s/%010lld.log", dir, (long long)seq);
	return stat(path, &sb) == 0;
}

/* Sets a segment's last write into the past (seconds ago). */
static void
age(int64_t seq, long secs)
{
	char		 path[512];
	struct timeval	 tv[2];

	snprintf(path, sizeof path, "%s/%010lld.log", dir, (long long)seq);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= secs;
	tv[1] = tv[0];
	utimes(path, tv);
}

static int
reads(int64_t seg, int64_t off, const char *want)
{
	char	*got, *cause = NULL;
	int	 same;

	if ((got = plog_read(dir, seg, off, strlen(want), &cause)) == NULL) {
		printf("#   %s\n", cause);
		free(cause);
		return 0;
	}
	same = strcmp(got, want) == 0;
	free(got);
	return same;
}

int
main(void)
{
	struct plog	*p;
	char		*cause = NULL, *got;
	int64_t		 seg[4], off[4], live[1];
	int		 fd;

	snprintf(dir, sizeof dir, "%s/spur-test-plog-XXXXXX", getenv("TMPDIR") != NULL ?
	    getenv("TMPDIR") : "/tmp");
	if (mkdtemp(dir) == NULL)
		return 1;
	strcat(dir, "/payloads");

	p = plog_open(dir, &cause);
	if (!ok(p != NULL, "plog_open makes the directory"))
		return tap_done();
	ok(!seg_exists(1), "no segment before the first payload");

	/* One batch: places handed out in order, nothing readable before the sync. */
	ok(plog_add(p, "{\"a\":1}", 7, &seg[0], &off[0], &cause) == 0 &&
	    plog_add(p, "{\"b\":22}", 8, &seg[1], &off[1], &cause) == 0, "two payloads queued");
	is_int(seg[0], 1, "the first segment is 1");
	ok(seg[1] == 1 && off[0] == 0 && off[1] == 7, "the second goes right after the first");
	got = plog_read(dir, 1, 0, 7, &cause);
	ok(got == NULL, "not readable before plog_sync (%s)", cause != NULL ? cause : "read");
	free(got);
	free(cause);
	cause = NULL;
	is_int(plog_sync(p, &cause), 0, "plog_sync writes and syncs the batch");
	ok(reads(1, 0, "{\"a\":1}") && reads(1, 7, "{\"b\":22}"), "both read back exactly");

	/* A batch that is not committed leaves no gap: the next takes its place. */
	plog_add(p, "lost", 4, &seg[2], &off[2], &cause);
	plog_discard(p);
	plog_add(p, "kept", 4, &seg[3], &off[3], &cause);
	plog_sync(p, &cause);
	ok(off[2] == 15 && off[3] == 15 && reads(1, 15, "kept"),
	    "a discarded batch's place is taken by the next");

	/* Reads past the end or of a missing segment fail with a reason. */
	got = plog_read(dir, 1, 15, 100, &cause);
	ok(got == NULL && cause != NULL && strstr(cause, "cut short") != NULL,
	    "a payload longer than the segment: cut short");
	free(got);
	free(cause);
	cause = NULL;
	got = plog_read(dir, 9, 0, 1, &cause);
	ok(got == NULL && cause != NULL, "a missing segment: an error, not a crash");
	free(got);
	free(cause);
	cause = NULL;
	plog_close(p);

	/* A torn tail (a crash mid-write): appends go on after it, old payloads stay. */
	snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%010d.log", 1);
	fd = open(dir, O_WRONLY | O_APPEND);
	ok(fd != -1 && write(fd, "{\"torn", 6) == 6, "a torn write at the end of segment 1");
	if (fd != -1)
		close(fd);
	*strrchr(dir, '/') = '\0';
	p = plog_open(dir, &cause);
	plog_add(p, "{\"after\":1}", 11, &seg[0], &off[0], &cause);
	plog_sync(p, &cause);
	ok(seg[0] == 1 && off[0] == 25 && reads(1, 25, "{\"after\":1}") &&
	    reads(1, 0, "{\"a\":1}"), "reopened: appends go after the torn bytes");

	/* A full segment: the next batch starts a new one. */
	plog_limits(p, 30, 24 * 3600 * 1000);
	plog_add(p, "{\"c\":3}", 7, &seg[0], &off[0], &cause);
	plog_add(p, "{\"d\":4}", 7, &seg[1], &off[1], &cause);
	plog_sync(p, &cause);
	ok(seg[0] == 2 && off[0] == 0 && seg[1] == 2 && off[1] == 7,
	    "past its size, a new segment at the next batch (a batch stays in one)");
	ok(reads(2, 7, "{\"d\":4}"), "read back from segment 2");
	plog_limits(p, 1 << 20, 0);
	plog_add(p, "{\"e\":5}", 7, &seg[0], &off[0], &cause);
	plog_sync(p, &cause);
	is_int(seg[0], 3, "past its age, a new segment too");

	/* Pruning: never the newest, never a live one, never one written lately. */
	age(1, 3600);
	age(2, 3600);
	live[0] = 2;
	is_int(plog_prune(dir, live, 1, now_ms() - 60 * 1000), 1, "one segment pruned");
	ok(!seg_exists(1) && seg_exists(2) && seg_exists(3),
	    "the old unreferenced one went; the referenced one and the newest stayed");
	is_int(plog_prune(dir, NULL, 0, now_ms() - 2 * 3600 * 1000), 0,
	    "a segment written after the cutoff stays, referenced or not");
	age(3, 3600);
	is_int(plog_prune(dir, NULL, 0, now_ms()), 1, "the newest stays even when old and unreferenced");
	ok(!seg_exists(2) && seg_exists(3), "so only segment 2 went");
	plog_close(p);

	/* Reopened after pruning: numbering goes on from the newest. */
	p = plog_open(dir, &cause);
	plog_limits(p, 0, 24 * 3600 * 1000);
	plog_add(p, "x", 1, &seg[0], &off[0], &cause);
	plog_sync(p, &cause);
	is_int(seg[0], 4, "numbers are never reused");
	plog_close(p);

	/* Clean up: segments 3 and 4, the directory and its parent. */
	for (seg[0] = 1; seg[0] <= 4; seg[0]++) {
		char path[512];
		snprintf(path, sizeof path, "%s/%010lld.log", dir, (long long)seg[0]);
		unlink(path);
	}
	rmdir(dir);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
	free(cause);
	return tap_done();
}
