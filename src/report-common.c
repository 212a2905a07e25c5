/* report-common.c: what the report backends (report.h, in each source-*.c) share: cuts, escapes, URLs, verdicts. */
#include "spur.h"
#include "conf.h"
#include "httpc.h"
#include "report.h"
#include "source.h"
#include "serve.h"

#include <stdlib.h>
#include <string.h>

/* The system of org's section named source, NULL when org has none. */
static const struct source *
source_of(const struct org *org, const char *source)
{
	size_t	 i;

	for (i = 0; i < org->nsources; i++)
		if (strcmp(org->sources[i].src->name, source) == 0)
			return org->sources[i].src;
	return NULL;
}

char *
report_cut(const char *s, size_t max, const char *more)
{
	size_t	 len = strlen(s), keep, mlen = more != NULL ? strlen(more) : 0;

	if (len <= max)
		return xstrdup(s);
	keep = max > mlen ? max - mlen : 0;
	/* Never in the middle of a UTF-8 sequence. */
	while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
		keep--;
	return xprintf("%.*s%s", (int)keep, s, more != NULL ? more : "");
}

void
report_mrkdwn_escape(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '&')
			buf_adds(b, "&amp;");
		else if (*s == '<')
			buf_adds(b, "&lt;");
		else if (*s == '>')
			buf_adds(b, "&gt;");
		else
			buf_addc(b, *s);
	}
}

struct org *
report_api_url(struct engine *e, const json_t *target, char **url, char **cause)
{
	const char	*source = json_string_value(json_object_get(target, "source"));
	const char	*path = json_string_value(json_object_get(target, "path"));
	struct org	*org = config_org(e->conf, json_string_value(json_object_get(target,
			    "org")));
	char		*base;

	if (source == NULL || org == NULL) {
		xasprintf(cause, "the report's org is no longer configured");
		return NULL;
	}
	if ((base = source_api_url(org, source_of(org, source))) == NULL) {
		xasprintf(cause, "no API for %s", source);
		return NULL;
	}
	*url = xprintf("%s%s", base, path != NULL ? path : "");
	free(base);
	return org;
}

int
report_verdict_transport(const struct http_response *r, enum report_verdict *v, char **why)
{
	*why = NULL;
	if (r->status == 0) {
		*why = xprintf("network: %s", r->error != NULL ? r->error : "no answer");
		*v = REPORT_RETRY;
		return 1;
	}
	if (r->status == 429 || r->status >= 500) {
		*why = xprintf("HTTP %d", r->status);
		*v = REPORT_RETRY;
		return 1;
	}
	return 0;
}

enum report_verdict
report_verdict_http(const struct http_response *r, const json_t *answer, char **why)
{
	const char	*err;

	*why = NULL;
	if (r->status >= 200 && r->status < 300)
		return REPORT_SENT;
	err = json_string_value(json_object_get(answer, "message"));
	*why = xprintf("HTTP %d: %.200s", r->status, err != NULL ? err : "");
	/* A 403 that says when to come back (a reset time, Retry-After) is a rate limit. */
	return r->status == 403 && r->retry_after_ms >= 0 ? REPORT_RETRY : REPORT_FAILED;
}

enum report_verdict
report_verdict_rest(const json_t *target, const struct http_response *r, char **why)
{
	enum report_verdict	 v;
	json_t			*j;

	if (report_verdict_transport(r, &v, why))
		return v;
	j = json_loadb(r->body, r->len, 0, NULL);
	v = report_verdict_http(r, j, why);
	json_decref(j);
	return v;
}

char *
report_body_field(struct engine *e, const json_t *ev, const char *run, const char *kind,
    const char *text)
{
	json_t	*j = json_pack("{s:s}", "body", text);
	char	*s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

char *
report_edit_body_field(const json_t *ev, const char *run, const char *kind, const char *id,
    const char *text)
{
	return report_body_field(NULL, ev, run, kind, text);
}

char *
report_message_id_int(const json_t *j)
{
	json_t	*id = json_object_get(j, "id");

	return json_is_integer(id) ? xprintf("%lld", (long long)json_integer_value(id)) : NULL;
}

const json_t *
report_lookup_list_array(const json_t *answer, char **why)
{
	return answer;
}

/* A full page: there may be more after it. */
char *
report_lookup_next_page(const json_t *answer, const json_t *list, const char *page)
{
	long	 n;

	if (json_array_size(list) < REPORT_LOOKUP_PAGE)
		return NULL;
	n = page != NULL ? strtol(page, NULL, 10) : 1;
	return xprintf("%ld", (n > 0 ? n : 1) + 1);
}
