/* api-req.c: the org API's request and answer as values (api.h): a query's value, and what frees them. */
#include "spur.h"
#include "api.h"
#include "source.h"

#include <stdlib.h>
#include <string.h>

char *
api_query_value(const char *query, const char *name)
{
	json_t		*form, *v;
	char		*out = NULL;

	if (query == NULL)
		return NULL;
	/* A query is a form: the sources' decoder reads it. A bad escape or a NUL matches nothing. */
	if ((form = form_decode(query, strlen(query))) == NULL)
		return strstr(query, name) != NULL ? xstrdup("\x01") : NULL;
	if ((v = json_object_get(form, name)) != NULL)
		out = strlen(json_string_value(v)) == json_string_length(v) ?
		    xstrdup(json_string_value(v)) : xstrdup("\x01");
	json_decref(form);
	return out;
}

void
api_req_clear(struct api_req *r)
{
	free(r->method);
	free(r->org);
	free(r->path);
	free(r->query);
	free(r->authorization);
	free(r->idempotency_key);
	free(r->last_event_id);
	free(r->mcp_session);
	free(r->mcp_version);
	free(r->accept);
	free(r->origin);
	free(r->cookie);
	free(r->csrf);
	free(r->peer);
	free(r->body);
	memset(r, 0, sizeof *r);
}

void
api_answer_clear(struct api_answer *a)
{
	free(a->body);
	free(a->mcp_session);
	free(a->stream_run);
	free(a->stream_after);
	free(a->location);
	free(a->set_cookie[0]);
	free(a->set_cookie[1]);
	free(a->form_action);
	free(a->download);
	memset(a, 0, sizeof *a);
}
