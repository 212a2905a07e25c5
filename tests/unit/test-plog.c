/*
 * test-plog.c: the payload log as ingest's write-ahead record: records
 * written and read back, the scan at a start (from a place, across
 * segments), every kind of torn or corrupt tail cut and never read, old
 * payload-only segments, tombstones of given-back records, pruning; and
 * the records of ingest items (ingest-rec.c), made and read back.
 */
#include "spur.h"
#include "event.h"
#include "ingest.h"
#include "plog.h"
#include "store.h"
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

static char *
seg_path(int64_t seq)
{
	return xprintf("%s/%010lld.log", dir, (long long)seq);
}

static int
seg_exists(int64_t seq)
{
	char		*path = seg_path(seq);
	struct stat	 sb;
	int		 rc = stat(path, &sb) == 0;

	free(path);
	return rc;
}

static long long
seg_size(int64_t seq)
{
	char		*path = seg_path(seq);
	struct stat	 sb;
	long long	 n = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;

	free(path);
	return n;
}

/* Sets a segment's last write into the past (seconds ago). */
static void
age(int64_t seq, long secs)
{
	char		*path = seg_path(seq);
	struct timeval	 tv[2];

	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= secs;
	tv[1] = tv[0];
	utimes(path, tv);
	free(path);
}

/* Raw bytes into a segment at off (a crash's leftovers, a flipped bit). */
static void
poke(int64_t seq, int64_t off, const void *data, size_t len)
{
	char	*path = seg_path(seq);
	int	 fd = open(path, O_WRONLY);

	if (fd == -1 || pwrite(fd, data, len, off) != (ssize_t)len)
		printf("# poke %s: %s\n", path, strerror(errno));
	if (fd != -1)
		close(fd);
	free(path);
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

/* One record (meta, payload) written as the writer writes a batch; its place. */
static int
rec(struct plog *p, const char *meta, const char *payload, int64_t *seg, int64_t *off)
{
	unsigned char	 head[PLOG_REC_HEAD];
	struct iovec	 iov[3];
	char		*cause = NULL;
	int		 rc;

	plog_record_head(head, meta, strlen(meta), payload, strlen(payload));
	iov[0].iov_base = head;
	iov[0].iov_len = sizeof head;
	iov[1].iov_base = (void *)meta;
	iov[1].iov_len = strlen(meta);
	iov[2].iov_base = (void *)payload;
	iov[2].iov_len = strlen(payload);
	if ((rc = plog_write(p, iov, 3, seg, off, &cause)) != 0) {
		printf("#   %s\n", cause);
		free(cause);
	}
	return rc;
}

static int64_t
rec_len(const char *meta, const char *payload)
{
	return PLOG_REC_HEAD + (int64_t)strlen(meta) + (int64_t)strlen(payload);
}

/* What a scan saw: "meta=payload@seg:off" lines. */
struct seen {
	struct buf	 b;
	int		 stop_at;	/* stop at the nth record (1-based); 0: never */
	int		 n;
};

static int
seen_cb(int64_t seg, int64_t off, int64_t end, const unsigned char *meta, size_t metalen,
    const unsigned char *payload, size_t paylen, void *arg)
{
	struct seen	*s = arg;

	buf_add(&s->b, meta, metalen);
	buf_addc(&s->b, '=');
	buf_add(&s->b, payload, paylen);
	buf_addf(&s->b, "@%lld:%lld-%lld ", (long long)seg, (long long)off, (long long)end);
	return ++s->n == s->stop_at;
}

static char *
scan(int64_t seg, int64_t off, struct plog_scan *sc, int *rc)
{
	struct seen	 s;
	char		*cause = NULL;

	memset(&s, 0, sizeof s);
	buf_init(&s.b, 0);
	buf_adds(&s.b, "");
	*rc = plog_scan(dir, seg, off, seen_cb, &s, sc, &cause);
	if (*rc != 0)
		printf("#   scan: %s\n", cause);
	free(cause);
	return buf_take(&s.b);
}

static void
test_crc(void)
{
	uint32_t	 c;

	is_int(crc32c(0, "123456789", 9), 0xe3069283U, "CRC-32C of \"123456789\" is its check value");
	c = crc32c(crc32c(0, "1234", 4), "56789", 5);
	is_int(c, 0xe3069283U, "and the same in two parts");
	is_int(crc32c(0, "", 0), 0, "of nothing: 0");
}

/* Records of ingest items: every field made and read back; damaged meta refused. */
static void
test_items(void)
{
	struct ingest_item	*it = xcalloc(1, sizeof *it), *back;
	struct spur_event	*ev = spur_event_new("acme", "github");
	char			*cause = NULL;
	json_t			*head;

	ev->id = xstrdup("evt_1");
	ev->type = xstrdup("issue_comment.created");
	ev->delivery = xstrdup("d-1");
	ev->thread = xstrdup("github:acme/app#7");
	ev->dedup = xstrdup("github:d-1");
	ev->replay = NULL;
	ev->received_at = 1764633600123LL;
	ev->payload_raw = xstrdup("{\"x\":1}");
	ev->payload_rawlen = 7;
	it->event = ev;
	it->command = 2;
	it->nruns = 2;
	it->runs = xcalloc(2, sizeof *it->runs);
	it->runs[0].id = xstrdup("run_a");
	it->runs[0].automation = xstrdup("fix");
	it->runs[0].conc_key = xstrdup("acme/thread/x");
	it->runs[0].prompt = xstrdup("Fix it.\n\n<data>\u00e9</data>");
	it->runs[0].automation_json = xstrdup("{\"name\":\"fix\"}");
	it->runs[1].id = xstrdup("run_b");
	it->runs[1].automation = xstrdup("triage");
	it->runs[1].prompt = xstrdup("");
	it->ack_target = xstrdup("{\"kind\":\"reaction\"}");
	it->ack_body = NULL;
	head = spur_event_head_json(ev);
	it->event_json = json_dumps(head, JSON_COMPACT);
	json_decref(head);
	ingest_rec_make(it);
	ok(it->rec != NULL && it->reclen > PLOG_REC_HEAD, "an item's record is made");

	back = ingest_rec_read(it->rec + PLOG_REC_HEAD, it->reclen - PLOG_REC_HEAD, &cause);
	if (!ok(back != NULL, "and read back (%s)", cause != NULL ? cause : "")) {
		free(cause);
		ingest_item_free(it);
		return;
	}
	is_str(back->event->id, "evt_1", "the event's id");
	ok(strcmp(back->event->org, "acme") == 0 && strcmp(back->event->source, "github") == 0 &&
	    strcmp(back->event->type, "issue_comment.created") == 0 &&
	    strcmp(back->event->delivery, "d-1") == 0 &&
	    strcmp(back->event->thread, "github:acme/app#7") == 0, "org, source, type, delivery, thread");
	is_int(back->event->received_at, 1764633600123LL, "its receipt time to the ms");
	ok(strcmp(back->event->dedup, "github:d-1") == 0 && back->event->replay == NULL,
	    "its dedup key, and no replay key stays none");
	is_str(back->event_json, it->event_json, "the event's row JSON, byte for byte");
	is_int(back->command, 2, "its thread command");
	ok(back->nruns == 2 && strcmp(back->runs[0].id, "run_a") == 0 &&
	    strcmp(back->runs[0].automation, "fix") == 0 &&
	    strcmp(back->runs[0].conc_key, "acme/thread/x") == 0 &&
	    strcmp(back->runs[0].prompt, it->runs[0].prompt) == 0 &&
	    strcmp(back->runs[0].automation_json, "{\"name\":\"fix\"}") == 0 &&
	    back->runs[1].conc_key == NULL && strcmp(back->runs[1].prompt, "") == 0,
	    "both runs, every field (an empty prompt stays empty, no key stays none)");
	ok(strcmp(back->ack_target, "{\"kind\":\"reaction\"}") == 0 && back->ack_body == NULL,
	    "the reaction's target; no body stays none");
	ingest_item_free(back);

	/* Cut short anywhere, or a length past the end: refused with a reason, never half read. */
	size_t	 cut, cuts = 0, taken = (size_t)-1;
	for (cut = 0; cut < it->reclen - PLOG_REC_HEAD; cut += 7, cuts++) {
		back = ingest_rec_read(it->rec + PLOG_REC_HEAD, cut, &cause);
		if ((back != NULL || cause == NULL) && taken == (size_t)-1)
			taken = cut;
		ingest_item_free(back);
		free(cause);
		cause = NULL;
	}
	ok(cuts > 0 && taken == (size_t)-1, "meta cut short at every 7th byte (%zu cuts): refused "
	    "each time (first taken: %zd)", cuts, taken == (size_t)-1 ? (ssize_t)-1 : (ssize_t)taken);
	it->rec[PLOG_REC_HEAD] = 9;
	back = ingest_rec_read(it->rec + PLOG_REC_HEAD, it->reclen - PLOG_REC_HEAD, &cause);
	ok(back == NULL && cause != NULL && strstr(cause, "version 9") != NULL,
	    "a record of another version: refused, saying which (%s)", cause != NULL ? cause : "");
	free(cause);
	ingest_item_free(it);
}

/* The event's row JSON written straight out is jansson's, byte for byte, whatever the text. */
static void
test_head_text(void)
{
	static const char *const texts[] = {
		"", "plain", "quote \" backslash \\ slash /", "\b\f\n\r\t", "\x01\x1f\x7f",
		"caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80", "not utf-8 \xff\xfe here",
		"cut short \xe2\x80", "<!-- spur: -->\n```\n{\"a\":[1,2]}",
	};
	struct spur_event	*ev;
	char			*mine, *theirs, all[128];
	json_t			*j;
	size_t			 i, same = 0, n = 0;
	int			 c;

	for (c = 1; c < 128; c++)
		all[c - 1] = (char)c;
	all[127] = '\0';
	for (i = 0; i <= SPUR_ARRLEN(texts); i++) {
		const char *t = i < SPUR_ARRLEN(texts) ? texts[i] : all;

		ev = spur_event_new("acme", "github");
		ev->id = xstrdup("evt_x");
		ev->type = i % 2 ? xstrdup(t) : NULL;
		ev->delivery = xstrdup(t);
		ev->thread = i % 3 ? xstrdup(t) : NULL;
		ev->actor.id = xstrdup("12");
		ev->actor.name = xstrdup(t);
		ev->actor.bot = (int)(i % 2);
		free(ev->text);
		ev->text = xstrdup(t);
		ev->url = i % 2 ? NULL : xstrdup("https://x/y?a=1&b=2");
		ev->received_at = 1764633600123LL + (int64_t)i;
		json_object_set_new(ev->meta, "comment_id", json_integer(42));
		json_object_set_new(ev->meta, "labels", json_pack("[ss]", t, "b"));
		mine = spur_event_head_text(ev);
		j = spur_event_head_json(ev);
		theirs = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		n++;
		if (mine != NULL && theirs != NULL && strcmp(mine, theirs) == 0)
			same++;
		else
			printf("#   mine:   %s\n#   theirs: %s\n", mine, theirs);
		free(mine);
		free(theirs);
		spur_event_free(ev);
	}
	is_int(same, n, "the event's row JSON written straight out is jansson's, byte for byte "
	    "(control bytes, quotes, UTF-8, text that is not UTF-8, nulls)");
}

int
main(void)
{
	struct plog		*p;
	struct plog_scan	 sc;
	struct plog_at		 at[3];
	char			*cause = NULL, *got, *s, *path;
	int64_t			 seg[8], off[8], live[1];
	int			 rc, fd;

	test_crc();
	test_head_text();
	test_items();

	snprintf(dir, sizeof dir, "%s/spur-test-plog-XXXXXX", getenv("TMPDIR") != NULL ?
	    getenv("TMPDIR") : "/tmp");
	if (mkdtemp(dir) == NULL)
		return 1;
	strcat(dir, "/payloads");

	p = plog_open(dir, 0, &cause);
	if (!ok(p != NULL, "plog_open makes the directory"))
		return tap_done();
	ok(!seg_exists(1), "no segment before the first record");

	/* Records: one after the other, behind the segment's header; payloads read back. */
	ok(rec(p, "m1", "{\"a\":1}", &seg[0], &off[0]) == 0 &&
	    rec(p, "m2", "{\"b\":22}", &seg[1], &off[1]) == 0, "two records written");
	ok(seg[0] == 1 && off[0] == PLOG_HEAD, "the first goes behind segment 1's header");
	ok(seg[1] == 1 && off[1] == off[0] + rec_len("m1", "{\"a\":1}"), "the second right after it");
	is_int(plog_sync(p, &cause), 0, "plog_sync syncs them");
	ok(reads(1, off[0] + PLOG_REC_HEAD + 2, "{\"a\":1}") &&
	    reads(1, off[1] + PLOG_REC_HEAD + 2, "{\"b\":22}"), "both payloads read back exactly");
	is_int(plog_sync(p, &cause), 0, "a sync with nothing new is fine");
	got = plog_read(dir, 1, off[1], 1000, &cause);
	ok(got == NULL && cause != NULL && strstr(cause, "cut short") != NULL,
	    "a read past the segment's end: cut short");
	free(got);
	free(cause);
	cause = NULL;
	got = plog_read(dir, 9, 0, 1, &cause);
	ok(got == NULL && cause != NULL, "a missing segment: an error, not a crash");
	free(got);
	free(cause);
	cause = NULL;
	plog_close(p);

	/* The scan from the start, from the second record, past the end. */
	s = scan(1, 0, &sc, &rc);
	path = xprintf("m1={\"a\":1}@1:16-%lld m2={\"b\":22}@1:%lld-%lld ", (long long)off[1],
	    (long long)off[1], (long long)(off[1] + rec_len("m2", "{\"b\":22}")));
	ok(rc == 0 && strcmp(s, path) == 0 && sc.records == 2 && sc.cut_segments == 0,
	    "scan from the start: both records, in order, with their places (%s)", s);
	ok(sc.end_seg == 1 && sc.end_off == seg_size(1), "and where the last one ends");
	free(s);
	free(path);
	s = scan(1, off[1], &sc, &rc);
	ok(rc == 0 && strncmp(s, "m2=", 3) == 0 && sc.records == 1,
	    "scan from the second: only it (%s)", s);
	free(s);
	s = scan(1, seg_size(1), &sc, &rc);
	ok(rc == 0 && *s == '\0' && sc.records == 0 && sc.end_off == seg_size(1),
	    "scan from the end: nothing, nothing cut");
	free(s);
	s = scan(1, 0, &sc, &rc);
	free(s);
	{
		struct seen	 st;

		memset(&st, 0, sizeof st);
		buf_init(&st.b, 0);
		st.stop_at = 1;
		rc = plog_scan(dir, 1, 0, seen_cb, &st, &sc, &cause);
		ok(rc == -1 && cause != NULL && st.n == 1,
		    "a record its reader refuses stops the scan, with a reason");
		free(cause);
		cause = NULL;
		buf_free(&st.b);
	}

	/* Torn tails, one kind at a time: each is cut at the last whole record, nothing read from it. */
	{
		static const struct {
			const char	*what;
			const char	*bytes;
			size_t		 len;
		} torn[] = {
			{ "half a header", "SPR1\x10\0", 6 },
			{ "a header whose record is cut short",
			    "SPR1\x05\0\0\0\x05\0\0\0\0\0\0\0abc", 19 },
			{ "zeros (an extended file never written)", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
			    20 },
			{ "a length past any record", "SPR1\xff\xff\xff\x7f\0\0\0\0\0\0\0\0", 16 },
			{ "a whole record with a wrong check", "SPR1\x01\0\0\0\x01\0\0\0\x12\x34\x56\x78xy",
			    18 },
		};
		long long	 whole = seg_size(1);
		size_t		 i;

		for (i = 0; i < SPUR_ARRLEN(torn); i++) {
			poke(1, whole, torn[i].bytes, torn[i].len);
			s = scan(1, off[1], &sc, &rc);
			ok(rc == 0 && sc.records == 1 && strncmp(s, "m2=", 3) == 0 &&
			    sc.cut_segments == 1 && sc.cut_bytes == (int64_t)torn[i].len &&
			    seg_size(1) == whole, "torn tail, %s: cut (%lld bytes), the record "
			    "before it read", torn[i].what, (long long)sc.cut_bytes);
			free(s);
		}
	}
	/* A flipped bit inside the last record: it and what follows go; the first stays. */
	poke(1, off[1] + PLOG_REC_HEAD + 3, "X", 1);
	s = scan(1, 0, &sc, &rc);
	ok(rc == 0 && sc.records == 1 && strncmp(s, "m1=", 3) == 0 && seg_size(1) == off[1],
	    "a flipped byte in the last record's payload: that record is cut, the first read");
	free(s);

	/* Reopened after the cut: appends go on where the last whole record ends. */
	p = plog_open(dir, 0, &cause);
	ok(rec(p, "m3", "{\"c\":3}", &seg[2], &off[2]) == 0 && plog_sync(p, &cause) == 0 &&
	    seg[2] == 1 && off[2] == off[1], "reopened: the next record goes where the cut was");

	/* A full segment: the next write starts a new one, with its header. */
	plog_limits(p, 1, 24 * 3600 * 1000);
	rec(p, "m4", "{\"d\":4}", &seg[3], &off[3]);
	ok(seg[3] == 2 && off[3] == PLOG_HEAD, "past its size, the next write starts segment 2");
	plog_limits(p, 1 << 20, 0);
	rec(p, "m5", "{\"e\":5}", &seg[4], &off[4]);
	is_int(seg[4], 3, "past its age, segment 3");
	plog_limits(p, 1 << 20, 24 * 3600 * 1000);
	rec(p, "m6", "{\"f\":6}", &seg[5], &off[5]);
	is_int(plog_sync(p, &cause), 0, "one sync for three segments");
	plog_close(p);
	s = scan(1, off[2], &sc, &rc);
	ok(rc == 0 && sc.records == 4 && strstr(s, "m3=") == s && strstr(s, "m4=") != NULL &&
	    strstr(s, "m5=") != NULL && strstr(s, "m6=") != NULL && sc.end_seg == 3,
	    "a scan goes on through every later segment (%s)", s);
	free(s);

	/* Torn in an older segment (a write that failed there): that one cut, the next still read. */
	poke(2, off[3] + PLOG_REC_HEAD, "zz", 2);
	s = scan(1, off[2], &sc, &rc);
	ok(rc == 0 && sc.records == 3 && strstr(s, "m4=") == NULL && strstr(s, "m6=") != NULL &&
	    sc.cut_segments == 1 && seg_size(2) == PLOG_HEAD,
	    "a bad record in segment 2: segment 2 cut, segment 3 read (%s)", s);
	free(s);

	/* Tombstones: a given-back record is stepped over; its payload space goes. */
	p = plog_open(dir, 0, &cause);
	ok(rec(p, "t1", "{\"keep\":1}", &seg[0], &off[0]) == 0 &&
	    rec(p, "t2", "{\"gone\":2}", &seg[1], &off[1]) == 0 &&
	    rec(p, "t3", "{\"keep\":3}", &seg[2], &off[2]) == 0 && plog_sync(p, &cause) == 0,
	    "three more records");
	at[0].seg = seg[1];
	at[0].off = off[1];
	at[1].seg = 77;		/* gone: skipped */
	at[1].off = 16;
	at[2].seg = seg[0];	/* not a record's start: left alone */
	at[2].off = off[0] + 1;
	is_int(plog_discard(dir, at, 3), 1, "plog_discard gives back the one record it can");
	s = scan(seg[0], off[0], &sc, &rc);
	ok(rc == 0 && sc.records == 2 && sc.tombstones == 1 && strstr(s, "t1=") == s &&
	    strstr(s, "t3=") != NULL && strstr(s, "t2=") == NULL && sc.cut_segments == 0,
	    "a scan steps over the tombstone and reads the records on both sides (%s)", s);
	free(s);
	ok(reads(seg[0], off[0] + PLOG_REC_HEAD + 2, "{\"keep\":1}") &&
	    reads(seg[2], off[2] + PLOG_REC_HEAD + 2, "{\"keep\":3}"), "their payloads are intact");
	got = plog_read(dir, seg[1], off[1] + PLOG_REC_HEAD + 2, 10, &cause);
	ok(got != NULL && strcmp(got, "{\"gone\":2}") != 0, "the given-back payload no longer reads");
	free(got);
	/* A tombstone whose header is damaged is a torn record like any other. */
	poke(seg[1], off[1] + 5, "\x7f", 1);
	s = scan(seg[0], off[0], &sc, &rc);
	ok(rc == 0 && sc.records == 1 && sc.cut_segments == 1 && seg_size(seg[1]) == off[1],
	    "a damaged tombstone: cut there, like a torn record");
	free(s);
	plog_close(p);

	/* Segments of payloads back to back (before the records): never scanned, never appended to. */
	path = seg_path(4);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ok(fd != -1 && write(fd, "{\"old\":1}{\"old\":2}", 18) == 18, "an old segment 4, payloads only");
	if (fd != -1)
		close(fd);
	free(path);
	s = scan(3, 0, &sc, &rc);
	ok(rc == 0 && sc.cut_segments == 0 && seg_size(4) == 18 && strstr(s, "old") == NULL,
	    "the scan leaves it as it is");
	free(s);
	p = plog_open(dir, 0, &cause);
	rec(p, "n1", "{\"new\":1}", &seg[0], &off[0]);
	plog_sync(p, &cause);
	ok(seg[0] == 5 && off[0] == PLOG_HEAD && seg_size(4) == 18 && reads(4, 9, "{\"old\":2}"),
	    "records go to a new segment 5; the old payloads still read by place");
	plog_close(p);
	/* An empty newest segment (made by hand, or a crash before its header): it is used. */
	path = seg_path(6);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	if (fd != -1)
		close(fd);
	free(path);
	p = plog_open(dir, 0, &cause);
	rec(p, "n2", "{\"new\":2}", &seg[0], &off[0]);
	plog_sync(p, &cause);
	ok(seg[0] == 6 && off[0] == PLOG_HEAD, "an empty newest segment gets its header and the record");
	plog_close(p);
	/* Fresh (a store that applied nothing: what the log holds is not its own): a new segment. */
	p = plog_open(dir, 1, &cause);
	rec(p, "n3", "{\"new\":3}", &seg[0], &off[0]);
	plog_sync(p, &cause);
	ok(seg[0] == 7 && off[0] == PLOG_HEAD && seg_size(6) == PLOG_HEAD + rec_len("n2", "{\"new\":2}"),
	    "opened fresh: records go to a new segment 7, segment 6 as it was");
	plog_close(p);

	/* Pruning: never the newest, never a live one, never one written lately. */
	age(1, 3600);
	age(2, 3600);
	live[0] = 2;
	is_int(plog_prune(dir, live, 1, now_ms() - 60 * 1000), 1, "one segment pruned");
	ok(!seg_exists(1) && seg_exists(2) && seg_exists(7),
	    "the old unreferenced one went; the referenced one and the newest stayed");
	is_int(plog_prune(dir, NULL, 0, now_ms() - 2 * 3600 * 1000), 0,
	    "segments written after the cutoff stay, referenced or not");
	age(3, 3600);
	age(4, 3600);
	age(5, 3600);
	age(6, 3600);
	age(7, 3600);
	is_int(plog_prune(dir, NULL, 0, now_ms()), 5, "the newest stays even when old and unreferenced");
	ok(!seg_exists(2) && !seg_exists(6) && seg_exists(7), "so only it is left");

	/* Reopened after pruning: numbering goes on from the newest. */
	p = plog_open(dir, 0, &cause);
	plog_limits(p, 0, 24 * 3600 * 1000);
	rec(p, "x", "x", &seg[0], &off[0]);
	plog_sync(p, &cause);
	is_int(seg[0], 8, "numbers are never reused");

	/* The directory gone: a write that needs a new segment fails, and says where. */
	for (seg[0] = 1; seg[0] <= 1000; seg[0]++) {
		path = seg_path(seg[0]);
		unlink(path);
		free(path);
	}
	rmdir(dir);
	free(cause);
	cause = NULL;
	{
		unsigned char	 head[PLOG_REC_HEAD];
		struct iovec	 iov = { head, sizeof head };

		plog_record_head(head, "", 0, "", 0);
		rc = plog_write(p, &iov, 1, &seg[0], &off[0], &cause);
	}
	ok(rc == -1 && cause != NULL && strstr(cause, dir) != NULL,
	    "no directory: the write fails with a reason (%s)", cause != NULL ? cause : "none");
	plog_close(p);
	p = plog_open(dir, 0, &cause);
	ok(p != NULL, "reopened, the log makes its directory again");
	plog_close(p);

	/* Clean up: the directory and its parent. */
	rmdir(dir);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
	free(cause);
	return tap_done();
}
