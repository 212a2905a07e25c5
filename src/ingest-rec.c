/* ingest-rec.c: an accepted delivery as its payload log record (plog.h), and back at a start; its item freed. */
#include "spur.h"
#include "event.h"
#include "ingest.h"
#include "plog.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/*
 * The meta: a version, then the rows' values as store_ingest binds them, each
 * a little-endian u32 and bytes (a string's length, 0xffffffff for none):
 *   version 1 | event json | dedup | replay | unsigned | command | runs |
 *   per run: id, automation, conc_key, automation_json, prompt |
 *   ack target | ack body
 * The event's json holds its id, org, source, type, delivery, thread and
 * receipt time. The payload follows the meta in the record.
 */
#define REC_VERSION	1
#define REC_NULL	0xffffffffU
#define REC_MAX_RUNS	1024

static void
rec_u32(struct buf *b, uint32_t v)
{
	unsigned char	 p[4];

	le32_put(p, v);
	buf_add(b, p, 4);
}

static void
rec_str(struct buf *b, const char *s)
{
	size_t	 n = s != NULL ? strlen(s) : 0;

	rec_u32(b, s != NULL ? (uint32_t)n : REC_NULL);
	if (n > 0)
		buf_add(b, s, n);
}

void
ingest_rec_make(struct ingest_item *it)
{
	struct spur_event	*ev = it->event;
	unsigned char		 head[PLOG_REC_HEAD] = { 0 };
	struct buf		 b;
	size_t			 i;

	/* A tree with no text (a schedule's, the API's): its text is what the row would hold. */
	if (ev->payload_raw == NULL && ev->payload != NULL) {
		ev->payload_raw = json_dumps(ev->payload, JSON_COMPACT | JSON_ENCODE_ANY);
		ev->payload_rawlen = ev->payload_raw != NULL ? strlen(ev->payload_raw) : 0;
	}
	buf_init(&b, 0);
	buf_add(&b, head, sizeof head);
	rec_u32(&b, REC_VERSION);
	rec_str(&b, it->event_json);
	rec_str(&b, ev->dedup);
	rec_str(&b, ev->replay);
	rec_u32(&b, (uint32_t)ev->unsigned_body);
	rec_u32(&b, (uint32_t)it->command);
	rec_u32(&b, (uint32_t)it->nruns);
	for (i = 0; i < it->nruns; i++) {
		rec_str(&b, it->runs[i].id);
		rec_str(&b, it->runs[i].automation);
		rec_str(&b, it->runs[i].conc_key);
		rec_str(&b, it->runs[i].automation_json);
		rec_str(&b, it->runs[i].prompt);
	}
	rec_str(&b, it->ack_target);
	rec_str(&b, it->ack_body);
	plog_record_head((unsigned char *)b.data, b.data + PLOG_REC_HEAD, b.len - PLOG_REC_HEAD,
	    ev->payload_raw, ev->payload_raw != NULL ? ev->payload_rawlen : 0);
	free(it->rec);
	it->reclen = b.len;
	it->rec = (unsigned char *)b.data;
}

struct rec_reader {
	const unsigned char	*p;
	size_t			 left;
	int			 bad;
};

static uint32_t
rd_u32(struct rec_reader *r)
{
	uint32_t	 v;

	if (r->bad || r->left < 4) {
		r->bad = 1;
		return 0;
	}
	v = le32_get(r->p);
	r->p += 4;
	r->left -= 4;
	return v;
}

static char *
rd_str(struct rec_reader *r)
{
	uint32_t	 n = rd_u32(r);
	char		*s;

	if (r->bad || n == REC_NULL)
		return NULL;
	if (n > r->left || memchr(r->p, '\0', n) != NULL) {
		r->bad = 1;
		return NULL;
	}
	s = xmalloc((size_t)n + 1);
	memcpy(s, r->p, n);
	s[n] = '\0';
	r->p += n;
	r->left -= n;
	return s;
}

struct ingest_item *
ingest_rec_read(const unsigned char *meta, size_t metalen, char **cause)
{
	struct rec_reader	 r = { meta, metalen, 0 };
	struct ingest_item	*it = xcalloc(1, sizeof *it);
	json_t			*j;
	json_error_t		 jerr;
	uint32_t		 version, n, i;

	if ((version = rd_u32(&r)) != REC_VERSION) {
		xasprintf(cause, "record version %u, this spur reads %d", version, REC_VERSION);
		free(it);
		return NULL;
	}
	it->event_json = rd_str(&r);
	if (r.bad || it->event_json == NULL ||
	    (j = json_loads(it->event_json, 0, &jerr)) == NULL) {
		xasprintf(cause, "record: the event is not JSON");
		goto fail;
	}
	it->event = spur_event_from_json(j);
	json_decref(j);
	if (it->event == NULL || it->event->id == NULL) {
		xasprintf(cause, "record: the event has no id, org or source");
		goto fail;
	}
	it->event->dedup = rd_str(&r);
	it->event->replay = rd_str(&r);
	it->event->unsigned_body = rd_u32(&r) != 0;
	it->command = (int)rd_u32(&r);
	if ((n = rd_u32(&r)) > REC_MAX_RUNS) {
		xasprintf(cause, "record: %u runs", n);
		goto fail;
	}
	if (n > 0)
		it->runs = xcalloc(n, sizeof *it->runs);
	for (i = 0; i < n && !r.bad; i++) {
		struct new_run *run = &it->runs[it->nruns++];

		run->id = rd_str(&r);
		run->automation = rd_str(&r);
		run->conc_key = rd_str(&r);
		run->automation_json = rd_str(&r);
		run->prompt = rd_str(&r);
		if (run->id == NULL || run->automation == NULL)
			r.bad = 1;
	}
	it->ack_target = rd_str(&r);
	it->ack_body = rd_str(&r);
	if (r.bad || r.left != 0) {
		xasprintf(cause, "record: its fields do not add up");
		goto fail;
	}
	return it;
fail:
	ingest_item_free(it);
	return NULL;
}

void
ingest_item_free(struct ingest_item *it)
{
	size_t	 i;

	if (it == NULL)
		return;
	for (i = 0; i < it->nruns; i++) {
		free(it->runs[i].id);
		free(it->runs[i].automation);
		free(it->runs[i].conc_key);
		free(it->runs[i].prompt);
		free(it->runs[i].automation_json);
	}
	free(it->runs);
	free(it->rec);
	free(it->why);
	free(it->event_json);
	free(it->ack_target);
	free(it->ack_body);
	spur_event_free(it->event);
	free(it);
}
