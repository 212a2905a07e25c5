/* doctor.c: what `spur doctor`'s checks share: one verdict printed and kept, one request waited for, the clock read off the answers. */
#include "spur.h"
#include "doctor.h"
#include "cmd.h"
#include "httpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#define DOCTOR_TIMEOUT_MS	15000L

static const char *const doctor_verdict_names[] = { "pass", "fail", "skip" };

void
doctor_say(struct doctor *d, const char *org, const char *check, enum doctor_verdict v,
    const char *fix, const char *fmt, ...)
{
	va_list	 ap;
	char	*detail, *f, *safe;

	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	d->counts[v]++;
	json_array_append_new(d->checks, json_pack("{s:s?, s:s, s:s, s:s, s:s?}", "org", org,
	    "check", check, "status", doctor_verdict_names[v], "detail", detail,
	    "fix", v == DOCTOR_FAIL ? fix : NULL));
	if (!d->json) {
		/* Names and messages come from the APIs: printed escaped. */
		safe = term_safe(detail, 0);
		printf("%s  %s%s%s: %s\n", doctor_verdict_names[v], org != NULL ? org : "",
		    org != NULL ? " " : "", check, safe);
		free(safe);
		if (v == DOCTOR_FAIL && fix != NULL) {
			f = term_safe(fix, 0);
			printf("      fix: %s\n", f);
			free(f);
		}
		fflush(stdout);
	}
	free(detail);
}

void
doctor_answer_clear(struct doctor_answer *a)
{
	free(a->error);
	free(a->body);
	free(a->head);
	json_decref(a->json);
	memset(a, 0, sizeof *a);
}

static void
doctor_http_done_cb(const struct http_response *res, void *arg)
{
	struct doctor_answer	*a = arg;

	a->status = res->status;
	a->error = res->error != NULL ? xstrdup(res->error) : NULL;
	a->body = xmalloc(res->len + 1);
	memcpy(a->body, res->body, res->len);
	a->body[res->len] = '\0';
	a->len = res->len;
	a->head = xstrdup(res->head != NULL ? res->head : "");
	a->json = json_loadb(res->body, res->len, 0, NULL);
	a->done = 1;
}

/* Remembers the first server's Date for the clock check. */
static void
doctor_note_date(struct doctor *d, const struct doctor_answer *a, const char *url)
{
	struct http_response	 r;
	struct tm		 tm;
	char			*date, *end;

	if (d->server_date != 0 || a->status == 0)
		return;
	memset(&r, 0, sizeof r);
	r.head = a->head;
	if ((date = http_response_header(&r, "date")) == NULL)
		return;
	memset(&tm, 0, sizeof tm);
	end = strptime(date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end != NULL && *end == '\0') {
		d->server_date = (long long)timegm(&tm);
		d->server_date_at = now_ms() / 1000;
		d->server_date_from = xstrdup(url);
	}
	free(date);
}

void
doctor_http(struct doctor *d, const char *method, const char *url, const char *const *headers,
    const char *body, struct doctor_answer *a)
{
	struct http_request	 req;

	memset(a, 0, sizeof *a);
	http_request_init(&req, method, url, headers, body);
	req.timeout_ms = DOCTOR_TIMEOUT_MS;
	(void)httpc_request(d->http, &req, doctor_http_done_cb, a);
	while (!a->done)
		event_base_loop(d->base, EVLOOP_ONCE);
	doctor_note_date(d, a, url);
}

char *
doctor_why(const struct doctor_answer *a)
{
	const char	*msg;

	if (a->status == 0)
		return xprintf("no answer: %s", a->error != NULL ? a->error : "unknown error");
	msg = json_string_value(json_object_get(a->json, "message"));
	if (msg == NULL)
		msg = json_string_value(json_object_get(a->json, "error"));
	if (msg == NULL)
		msg = json_string_value(json_object_get(json_object_get(a->json, "error"),
		    "message"));
	if (msg == NULL)
		msg = json_string_value(json_object_get(json_array_get(json_object_get(a->json,
		    "errors"), 0), "message"));
	return msg != NULL ? xprintf("HTTP %d: %s", a->status, msg) :
	    xprintf("HTTP %d", a->status);
}

int
doctor_list_has(const char *list, const char *item)
{
	size_t		 n = strlen(item), k;
	const char	*p = list;

	while (p != NULL && *p != '\0') {
		p += strspn(p, ", ");
		k = strcspn(p, ", ");
		if (k == n && strncmp(p, item, n) == 0)
			return 1;
		p += k;
	}
	return 0;
}

int
doctor_uses(const struct doctor *d, const char *org, const char *src, const char *event)
{
	return d->uses != NULL && d->uses(d, org, src, event);
}

int
doctor_looks_up(const struct doctor *d, const char *org, const char *src, int groups)
{
	return d->looks_up != NULL && d->looks_up(d, org, src, groups);
}
