/* test-plog.c: the payload log: appends, reads back, segments, a torn tail, pruning. */
#include "spur.h"
#include "plog.h"
#include "tap.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* Four threads append at once (the HTTP fronts); every payload must read back whole. */
#define APPENDERS	4
#define APPENDS		500

struct appender {
	struct plog	*p;
	int		 id;
	int64_t		 seg[APPENDS], off[APPENDS];
	int		 failed;
};

static void *
appender_main(void *arg)
{
	struct appender	*a = arg;
	char		 buf[64], *cause = NULL;
	int		 i;

	for (i = 0; i < APPENDS; i++) {
		snprintf(buf, sizeof buf, "{\"thread\":%d,\"n\":%d,\"pad\":\"%0*d\"}", a->id,
		    i, i % 23, 0);
		if (plog_append(a->p, buf, strlen(buf), &a->seg[i], &a->off[i], &cause) != 0) {
			a->failed++;
			free(cause);
			cause = NULL;
		}
	}
	return NULL;
}

static void
test_concurrent(struct plog *p)
{
	struct appender	 a[APPENDERS];
	pthread_t	 t[APPENDERS];
	char		 buf[64], *cause = NULL;
	int		 i, j, bad = 0, failed = 0;

	plog_limits(p, 4096, 24 * 3600 * 1000);	/* several segments on the way */
	for (i = 0; i < APPENDERS; i++) {
		memset(&a[i], 0, sizeof a[i]);
		a[i].p = p;
		a[i].id = i;
		pthread_create(&t[i], NULL, appender_main, &a[i]);
	}
	for (i = 0; i < APPENDERS; i++) {
		pthread_join(t[i], NULL);
		failed += a[i].failed;
	}
	is_int(failed, 0, "concurrent: %d appends from %d threads, none failed",
	    APPENDERS * APPENDS, APPENDERS);
	is_int(plog_sync(p, &cause), 0, "concurrent: one sync after them all");
	for (i = 0; i < APPENDERS; i++) {
		for (j = 0; j < APPENDS; j++) {
			snprintf(buf, sizeof buf, "{\"thread\":%d,\"n\":%d,\"pad\":\"%0*d\"}",
			    i, j, j % 23, 0);
			bad += !reads(a[i].seg[j], a[i].off[j], buf);
		}
	}
	is_int(bad, 0, "concurrent: every payload reads back whole, none overlaps another");
	free(cause);
}

/* A repeated delivery's payload gives its space back; its neighbours stay byte for byte. */
static void
test_discard(struct plog *p)
{
	enum { BIG = 256 * 1024 };
	char		*big = malloc(BIG), *got, *cause = NULL, path[512];
	int64_t		 seg[3], off[3];
	struct stat	 before, after;
	size_t		 i, zeros = 0;

	memset(big, 'x', BIG);
	plog_limits(p, 1 << 30, 24 * 3600 * 1000);
	ok(plog_append(p, "left", 4, &seg[0], &off[0], &cause) == 0 &&
	    plog_append(p, big, BIG, &seg[1], &off[1], &cause) == 0 &&
	    plog_append(p, "right", 5, &seg[2], &off[2], &cause) == 0 &&
	    plog_sync(p, &cause) == 0, "discard: three payloads, the middle one 256 KiB");
	snprintf(path, sizeof path, "%s/%010lld.log", dir, (long long)seg[1]);
	stat(path, &before);
	if (plog_discard(dir, seg[1], off[1], BIG) != 0) {
		tap_skip("this filesystem cannot punch holes (fallocate)");
		tap_skip("this filesystem cannot punch holes (fallocate)");
		tap_skip("this filesystem cannot punch holes (fallocate)");
	} else {
		stat(path, &after);
		ok(before.st_size == after.st_size &&
		    (before.st_blocks - after.st_blocks) * 512 >= BIG - 2 * 4096,
		    "discard: the segment keeps its size, %lld KiB of disk come back",
		    (long long)(before.st_blocks - after.st_blocks) / 2);
		ok(reads(seg[0], off[0], "left") && reads(seg[2], off[2], "right"),
		    "discard: the payloads before and after it read back exactly");
		if ((got = plog_read(dir, seg[1], off[1], BIG, &cause)) != NULL) {
			for (i = 0; i < BIG; i++)
				zeros += got[i] == '\0';
			free(got);
		}
		is_int(zeros, BIG, "discard: the discarded bytes read as zeros");
	}
	ok(plog_discard(dir, 999999, 0, 10) == -1, "discard: a missing segment is -1, no crash");
	free(big);
	free(cause);
}

int
main(void)
{
	struct plog	*p;
	char		*cause = NULL, *got;
	int64_t		 seg[4], off[4], live[1];
	int		 fd, rc;

	snprintf(dir, sizeof dir, "%s/spur-test-plog-XXXXXX", getenv("TMPDIR") != NULL ?
	    getenv("TMPDIR") : "/tmp");
	if (mkdtemp(dir) == NULL)
		return 1;
	strcat(dir, "/payloads");

	p = plog_open(dir, &cause);
	if (!ok(p != NULL, "plog_open makes the directory"))
		return tap_done();
	ok(!seg_exists(1), "no segment before the first payload");

	/* Appends: places handed out in order, readable at once, durable after a sync. */
	ok(plog_append(p, "{\"a\":1}", 7, &seg[0], &off[0], &cause) == 0 &&
	    plog_append(p, "{\"b\":22}", 8, &seg[1], &off[1], &cause) == 0, "two payloads appended");
	is_int(seg[0], 1, "the first segment is 1");
	ok(seg[1] == 1 && off[0] == 0 && off[1] == 7, "the second goes right after the first");
	is_int(plog_sync(p, &cause), 0, "plog_sync syncs what was appended");
	ok(reads(1, 0, "{\"a\":1}") && reads(1, 7, "{\"b\":22}"), "both read back exactly");
	is_int(plog_sync(p, &cause), 0, "a sync with nothing new is fine");
	plog_append(p, "kept", 4, &seg[3], &off[3], &cause);
	plog_sync(p, &cause);
	ok(off[3] == 15 && reads(1, 15, "kept"), "the next append goes on at the end");

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
	plog_append(p, "{\"after\":1}", 11, &seg[0], &off[0], &cause);
	plog_sync(p, &cause);
	ok(seg[0] == 1 && off[0] == 25 && reads(1, 25, "{\"after\":1}") &&
	    reads(1, 0, "{\"a\":1}"), "reopened: appends go after the torn bytes");

	/* A full segment: the next batch starts a new one. */
	plog_limits(p, 30, 24 * 3600 * 1000);
	plog_append(p, "{\"c\":3}", 7, &seg[0], &off[0], &cause);
	plog_append(p, "{\"d\":4}", 7, &seg[1], &off[1], &cause);
	ok(seg[0] == 2 && off[0] == 0 && seg[1] == 2 && off[1] == 7,
	    "past its size, the next append starts a new segment");
	plog_limits(p, 1 << 20, 0);
	plog_append(p, "{\"e\":5}", 7, &seg[2], &off[2], &cause);
	is_int(seg[2], 3, "past its age, a new segment too");
	/* One sync covers every segment written since the last: 2 (rotated away) and 3. */
	is_int(plog_sync(p, &cause), 0, "one sync for two segments");
	ok(reads(2, 7, "{\"d\":4}") && reads(3, 0, "{\"e\":5}"), "read back from both");

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
	plog_append(p, "x", 1, &seg[0], &off[0], &cause);
	plog_sync(p, &cause);
	is_int(seg[0], 4, "numbers are never reused");
	test_discard(p);
	test_concurrent(p);

	/* The directory gone: an append that needs a new segment fails, and says where. */
	for (seg[0] = 1; seg[0] <= 1000; seg[0]++) {
		char path[512];
		snprintf(path, sizeof path, "%s/%010lld.log", dir, (long long)seg[0]);
		unlink(path);
	}
	rmdir(dir);
	plog_limits(p, 0, 24 * 3600 * 1000);
	free(cause);
	cause = NULL;
	rc = plog_append(p, "y", 1, &seg[0], &off[0], &cause);
	ok(rc == -1 && cause != NULL && strstr(cause, dir) != NULL,
	    "no directory: the append fails with a reason (%s)", cause != NULL ? cause : "none");
	plog_close(p);
	p = plog_open(dir, &cause);
	ok(p != NULL, "reopened, the log makes its directory again");
	plog_close(p);

	/* Clean up: the directory and its parent. */
	rmdir(dir);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
	free(cause);
	return tap_done();
}
