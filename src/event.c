/* event.c: creating, freeing and (de)serializing the normalized event. */
#include "spur.h"
#include "event.h"

#include <stdlib.h>
#include <string.h>

struct spur_event *
spur_event_new(const char *org, const char *source)
{
	struct spur_event	*ev = xcalloc(1, sizeof *ev);

	ev->org = xstrdup(org);
	ev->source = xstrdup(source);
	ev->text = xstrdup("");
	ev->received_at = now_ms();
	ev->meta = json_object();
	return ev;
}

void
spur_event_free(struct spur_event *ev)
{
	if (ev == NULL)
		return;
	free(ev->id);
	free(ev->org);
	free(ev->source);
	free(ev->type);
	free(ev->delivery);
	free(ev->thread);
	free(ev->actor.id);
	free(ev->actor.name);
	free(ev->actor.role);
	free(ev->text);
	free(ev->url);
	free(ev->repository);
	free(ev->dedup);
	free(ev->replay);
	json_decref(ev->payload);
	free(ev->payload_raw);
	json_decref(ev->meta);
	free(ev->reply);
	person_free(ev->person);
	free(ev);
}

/*
 * A string for the event's JSON: never fails. Sources hand over valid UTF-8;
 * should one not, bytes that are not are replaced by '?', never a crash.
 */
static json_t *
event_str(const char *s)
{
	json_t	*j;
	char	*copy, *p;

	if (s == NULL)
		return json_null();
	if ((j = json_string(s)) != NULL)
		return j;
	copy = xstrdup(s);
	for (p = copy; *p != '\0'; p++) {
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	}
	j = json_string(copy);
	free(copy);
	return j != NULL ? j : json_null();
}

json_t *
spur_event_payload(const struct spur_event *cev)
{
	/* A cache: the tree is the text's, whenever it is made. */
	struct spur_event	*ev = (struct spur_event *)cev;

	if (ev->payload == NULL && ev->payload_raw != NULL)
		ev->payload = json_loadb(ev->payload_raw, ev->payload_rawlen,
		    JSON_REJECT_DUPLICATES, NULL);
	return ev->payload;
}

json_t *
spur_event_to_json(const struct spur_event *ev)
{
	json_t	*j = spur_event_head_json(ev), *payload = spur_event_payload(ev);

	json_object_set(j, "payload", payload != NULL ? payload : json_null());
	return j;
}

json_t *
spur_event_head_json(const struct spur_event *ev)
{
	char	 ts[40];
	json_t	*j, *actor;

	format_time(ev->received_at, ts, sizeof ts);
	actor = json_pack("{s:o,s:o,s:o,s:b}", "id", event_str(ev->actor.id),
	    "name", event_str(ev->actor.name), "role",
	    event_str(ev->actor.role), "bot", ev->actor.bot);
	j = json_pack("{s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:o,s:o}",
	    "id", event_str(ev->id), "org", event_str(ev->org), "source",
	    event_str(ev->source),
	    "type", event_str(ev->type), "delivery", event_str(ev->delivery),
	    "received_at", ts, "thread", event_str(ev->thread), "actor", actor,
	    "text", event_str(ev->text != NULL ? ev->text : ""), "url",
	    event_str(ev->url),
	    "repository", event_str(ev->repository));
	if (j == NULL)
		fatal("event_to_json: cannot pack");
	json_object_set(j, "meta", ev->meta);
	json_object_set_new(j, "received_at_ms", json_integer(ev->received_at));
	return j;
}

char *
spur_event_head_text(const struct spur_event *ev)
{
	static const char *const keys[] = { "{\"id\":", ",\"org\":", ",\"source\":",
	    ",\"type\":", ",\"delivery\":" };
	const char	*vals[] = { ev->id, ev->org, ev->source, ev->type, ev->delivery };
	char		 ts[40], *meta = NULL, *text;
	struct buf	 b;
	json_t		*j;
	size_t		 i;
	int		 bad = 0;

	buf_init(&b, 0);
	for (i = 0; i < SPUR_ARRLEN(keys); i++) {
		buf_adds(&b, keys[i]);
		bad |= json_buf_str(&b, vals[i]);
	}
	format_time(ev->received_at, ts, sizeof ts);
	buf_adds(&b, ",\"received_at\":\"");
	buf_adds(&b, ts);
	buf_adds(&b, "\",\"thread\":");
	bad |= json_buf_str(&b, ev->thread);
	buf_adds(&b, ",\"actor\":{\"id\":");
	bad |= json_buf_str(&b, ev->actor.id);
	buf_adds(&b, ",\"name\":");
	bad |= json_buf_str(&b, ev->actor.name);
	buf_adds(&b, ",\"role\":");
	bad |= json_buf_str(&b, ev->actor.role);
	buf_adds(&b, ev->actor.bot ? ",\"bot\":true},\"text\":" : ",\"bot\":false},\"text\":");
	bad |= json_buf_str(&b, ev->text != NULL ? ev->text : "");
	buf_adds(&b, ",\"url\":");
	bad |= json_buf_str(&b, ev->url);
	buf_adds(&b, ",\"repository\":");
	bad |= json_buf_str(&b, ev->repository);
	if (ev->meta != NULL) {
		if ((meta = json_dumps(ev->meta, JSON_COMPACT)) == NULL)
			bad = 1;
		else {
			buf_adds(&b, ",\"meta\":");
			buf_adds(&b, meta);
			free(meta);
		}
	}
	buf_addf(&b, ",\"received_at_ms\":%lld}", (long long)ev->received_at);
	/* Text that is not UTF-8 is jansson's to mend (event_str), as in the tree. */
	if (bad) {
		buf_free(&b);
		j = spur_event_head_json(ev);
		text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		return text;
	}
	return buf_take(&b);
}

static char *
json_dup_str(const json_t *j, const char *key)
{
	const char	*s = json_string_value(json_object_get(j, key));

	return s != NULL ? xstrdup(s) : NULL;
}

struct spur_event *
spur_event_from_json(const json_t *j)
{
	struct spur_event	*ev;
	const json_t	*actor = json_object_get(j, "actor");
	const char	*org = json_string_value(json_object_get(j, "org"));
	const char	*source = json_string_value(json_object_get(j, "source"));

	if (org == NULL || source == NULL)
		return NULL;
	ev = spur_event_new(org, source);
	ev->id = json_dup_str(j, "id");
	ev->type = json_dup_str(j, "type");
	ev->delivery = json_dup_str(j, "delivery");
	ev->received_at = json_integer_value(json_object_get(j, "received_at_ms"));
	ev->thread = json_dup_str(j, "thread");
	ev->actor.id = json_dup_str(actor, "id");
	ev->actor.name = json_dup_str(actor, "name");
	ev->actor.role = json_dup_str(actor, "role");
	ev->actor.bot = json_is_true(json_object_get(actor, "bot"));
	free(ev->text);
	ev->text = json_dup_str(j, "text");
	if (ev->text == NULL)
		ev->text = xstrdup("");
	ev->url = json_dup_str(j, "url");
	ev->repository = json_dup_str(j, "repository");
	if (json_object_get(j, "payload") != NULL)
		ev->payload = json_incref(json_object_get(j, "payload"));
	if (json_is_object(json_object_get(j, "meta"))) {
		json_decref(ev->meta);
		ev->meta = json_deep_copy(json_object_get(j, "meta"));
	}
	return ev;
}

const char *
spur_event_meta_str(const struct spur_event *ev, const char *key)
{
	return json_string_value(json_object_get(ev->meta, key));
}

void
person_free(struct person *p)
{
	if (p == NULL)
		return;
	strv_free(p->groups);
	free(p->failed);
	free(p);
}

struct person *
person_dup(const struct person *p)
{
	struct person	*d = xcalloc(1, sizeof *d);

	d->guest = p->guest;
	d->external = p->external;
	d->failed = p->failed != NULL ? xstrdup(p->failed) : NULL;
	d->groups = p->groups != NULL ? strv_dup(p->groups) : xcalloc(1, sizeof *d->groups);
	return d;
}
