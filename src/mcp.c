/* mcp.c: placeholder until the MCP server lands: /o/{org}/mcp answers 404. */
#include "spur.h"
#include "api.h"

#include <string.h>

void
mcp_handle(struct engine *e, const struct api_key *key, const struct api_req *req,
    api_done_cb done, void *arg)
{
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = 404;
	a.body = xstrdup("{\"error\":\"not_found\"}");
	done(&a, arg);
	api_answer_clear(&a);
}

void
mcp_free_all(void)
{
}
