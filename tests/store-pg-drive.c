/*
 * store-pg-drive: one node's side of the store, driven by tests/bb/test_pg_store.py
 * and bench/nodes/run: opens the store at a URL (or, a path, the sqlite store in
 * that data directory) as a caller that needs ingest (or, with --all,
 * everything), then commits batches of deliveries read one JSON array a line
 * from stdin through store_ingest, and prints one JSON line per delivery.
 *
 *   in:  [{"id", "org", "source", "type", "delivery", "dedup", "replay", "thread",
 *          "payload", "runs": [{"id", "automation"}], "ack": TARGET}]
 *   out: {"delivery", "event", "duplicate"} or, for the batch, {"error"}
 *
 * or one of the nodes' calls:
 *   {"beat": {"node", "hash", "lease_ms"}}  out: {"beat": 0 | 1 | -1, "error"?}
 *   {"reap": NODE}                          out: {"reaped": ID | null}
 *   {"config": true}                        out: {"hash", "agree", "live"}
 */
#include "spur.h"
#include "event.h"
#include "store.h"
#include "store-item.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *
str(const json_t *o, const char *k)
{
	const char	*s = json_string_value(json_object_get(o, k));

	return s != NULL ? xstrdup(s) : NULL;
}

static struct ingest_item *
item_new(const json_t *d)
{
	struct spur_event	*ev;
	const json_t		*runs = json_object_get(d, "runs"), *r, *ack;
	const char		**ids, **autos;
	char			*target = NULL;
	struct ingest_item	*it;
	size_t			 i, n = json_array_size(runs);

	ev = spur_event_new(json_string_value(json_object_get(d, "org")),
	    json_string_value(json_object_get(d, "source")));
	free(ev->id);
	ev->id = str(d, "id");
	ev->type = str(d, "type");
	ev->delivery = str(d, "delivery");
	ev->dedup = str(d, "dedup");
	ev->replay = str(d, "replay");
	ev->thread = str(d, "thread");
	ev->received_at = now_ms();
	if ((ev->payload_raw = str(d, "payload")) != NULL)
		ev->payload_rawlen = strlen(ev->payload_raw);
	ids = xcalloc(n + 1, sizeof *ids);
	autos = xcalloc(n + 1, sizeof *autos);
	json_array_foreach(runs, i, r) {
		ids[i] = json_string_value(json_object_get(r, "id"));
		autos[i] = json_string_value(json_object_get(r, "automation"));
	}
	if ((ack = json_object_get(d, "ack")) != NULL)
		target = json_dumps(ack, JSON_COMPACT);
	it = store_item_new(ev, ids, autos, n, target);
	free(ids);
	free(autos);
	free(target);
	return it;
}

static void print_json(json_t *);

/* A node's call: its lease, a reap, the nodes' config. */
static void
node_call(struct store *st, const json_t *c)
{
	const json_t	*b;
	char		*cause = NULL, *s;
	int		 rc, agree, live;

	if ((b = json_object_get(c, "beat")) != NULL) {
		rc = store_node_beat(st, json_string_value(json_object_get(b, "node")),
		    json_string_value(json_object_get(b, "hash")),
		    json_integer_value(json_object_get(b, "lease_ms")), &cause);
		print_json(json_pack("{s:i,s:s*}", "beat", rc, "error", cause));
		free(cause);
	} else if ((b = json_object_get(c, "reap")) != NULL) {
		s = store_node_reap(st, json_string_value(b));
		print_json(json_pack("{s:s?}", "reaped", s));
		free(s);
	} else {
		s = store_nodes_config(st, &agree, &live);
		print_json(json_pack("{s:s?,s:i,s:i}", "hash", s, "agree", agree, "live", live));
		free(s);
	}
}

static void
print_json(json_t *j)
{
	char	*s = json_dumps(j, JSON_COMPACT);

	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(j);
}

int
main(int argc, char **argv)
{
	struct store		*st;
	struct ingest_item	**items;
	json_t			*batch, *d;
	json_error_t		 jerr;
	char			*cause = NULL, *line = NULL;
	size_t			 cap = 0, i, n;
	int			 rc;

	if (argc != 2) {
		fprintf(stderr, "usage: store-pg-drive URL|/DATA_DIR\n");
		return 2;
	}
	log_init(LOG_INFO, "store-pg-drive");
	if ((st = store_open_url(argv[1][0] == '/' ? NULL : argv[1], argv[1], 0,
	    &cause)) == NULL) {
		fprintf(stderr, "store-pg-drive: %s\n", cause);
		free(cause);
		return 1;
	}
	printf("{\"open\":true}\n");
	fflush(stdout);
	while (getline(&line, &cap, stdin) > 0) {
		if ((batch = json_loads(line, 0, &jerr)) != NULL && json_is_object(batch)) {
			node_call(st, batch);
			json_decref(batch);
			continue;
		}
		if (batch == NULL || !json_is_array(batch)) {
			fprintf(stderr, "store-pg-drive: bad batch: %s\n", jerr.text);
			json_decref(batch);
			rc = 2;
			goto out;
		}
		n = json_array_size(batch);
		items = xcalloc(n + 1, sizeof *items);
		json_array_foreach(batch, i, d)
			items[i] = item_new(d);
		if (store_ingest(st, items, n, NULL, 0, 0, 0, 0, &cause) != 0) {
			print_json(json_pack("{s:s}", "error", cause));
			free(cause);
			cause = NULL;
		} else {
			for (i = 0; i < n; i++)
				print_json(json_pack("{s:s,s:s,s:b}", "delivery",
				    items[i]->event->delivery, "event", items[i]->event->id,
				    "duplicate", items[i]->duplicate));
		}
		for (i = 0; i < n; i++)
			store_item_free(items[i]);
		free(items);
		json_decref(batch);
	}
	print_json(json_pack("{s:b,s:I}", "writable", store_writable(st) == 0, "queued",
	    (json_int_t)store_count_runs(st, RUN_QUEUED)));
	rc = 0;
out:
	free(line);
	store_close(st);
	return rc;
}
