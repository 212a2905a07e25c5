/* test-connections.c: connections (connections.c): what a connection may be, its header references, its allow list entries and history row. */
#include "spur.h"
#include "connections.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* TOKEN goes anywhere; BOUND, a header secret, to bound.example.com only. */
static const char *
known(void *arg, const char *name, const char *host)
{
	char	*bound[] = { "bound.example.com", NULL };

	if (strcmp(name, "BOUND") == 0)
		return connection_secret_why(1, bound, host);
	return connection_secret_why(strcmp(name, "TOKEN") == 0, NULL, host);
}

/* The error of one connection written as JSON ("" when none), and the key at fault (to free). */
static char *
error_of(const char *text, char **field)
{
	json_t		*j = json_loads(text, 0, NULL);
	const char	*f = NULL;
	char		*why;

	why = j != NULL ? connection_error(j, known, NULL, &f) : xstrdup("no JSON");
	*field = f != NULL ? xstrdup(f) : NULL;	/* f is the JSON's */
	json_decref(j);
	return why != NULL ? why : xstrdup("");
}

static void
check_one(const char *text, const char *field, const char *want, const char *name)
{
	char	*got_field, *why = error_of(text, &got_field);

	ok(strstr(why, want) != NULL && (field == NULL ? got_field == NULL :
	    got_field != NULL && strcmp(got_field, field) == 0), "%s (%s: %s)", name,
	    got_field != NULL ? got_field : "-", why);
	free(why);
	free(got_field);
}

static void
check_headers(void)
{
	char	*secret, *format;

	ok(connection_header_parse("TOKEN", &secret, &format) == 0 && strcmp(secret, "TOKEN") ==
	    0 && strcmp(format, "{value}") == 0, "header: NAME, the value as is");
	free(secret);
	free(format);
	ok(connection_header_parse("Bearer {TOKEN}", &secret, &format) == 0 &&
	    strcmp(secret, "TOKEN") == 0 && strcmp(format, "Bearer {value}") == 0,
	    "header: SCHEME {NAME}");
	free(secret);
	free(format);
	ok(connection_header_parse("Bearer sk-live-abc", &secret, &format) == -1 &&
	    connection_header_parse("sk-live-abc", &secret, &format) == -1 &&
	    connection_header_parse("Bearer {TOKEN} x", &secret, &format) == -1 &&
	    connection_header_parse("Be arer {TOKEN}", &secret, &format) == -1 &&
	    connection_header_parse("Bearer {}", &secret, &format) == -1 &&
	    connection_header_parse("", &secret, &format) == -1 && secret == NULL,
	    "header: a literal, trailing text, two words, an empty name: none is a reference");
}

int
main(void)
{
	struct connections	*cs;
	json_t			*list, *back;
	char			**allow, *why, *note;
	char			*base[] = { "api.example.com", NULL };

	check_headers();
	check_one("{\"name\":\"t\",\"url\":\"https://mcp.example.com/mcp\",\"headers\":"
	    "{\"Authorization\":\"Bearer {TOKEN}\"}}", NULL, "", "remote: good");
	check_one("{\"name\":\"s\",\"command\":\"/usr/bin/x\",\"args\":[\"-v\"]}", NULL, "",
	    "stdio: good (absolute)");
	check_one("{\"name\":\"s\",\"command\":\"x-mcp\"}", NULL, "", "stdio: good (a name)");
	check_one("{\"name\":\"spur\",\"command\":\"x\"}", "name", "not spur", "name spur");
	check_one("{\"name\":\"A\",\"command\":\"x\"}", "name", "a-z", "name upper case");
	check_one("{\"name\":\"t\"}", NULL, "either url", "neither url nor command");
	check_one("{\"name\":\"t\",\"url\":\"https://h\",\"command\":\"x\"}", NULL, "either url",
	    "both url and command");
	check_one("{\"name\":\"t\",\"url\":\"http://h/mcp\"}", "url", "https://", "http");
	check_one("{\"name\":\"t\",\"url\":\"https://u:p@h/mcp\"}", "url", "no user", "user in URL");
	check_one("{\"name\":\"t\",\"url\":\"https://h:0/\"}", "url", "port", "port 0");
	check_one("{\"name\":\"t\",\"url\":\"https://[::1]/\"}", "url", "host", "IPv6 literal");
	check_one("{\"name\":\"t\",\"url\":\"https://h/ x\"}", "url", "spaces", "space in URL");
	check_one("{\"name\":\"t\",\"url\":\"https://h\",\"headers\":{\"Authorization\":"
	    "\"Bearer abc\"}}", "headers", "never the secret itself", "literal header");
	check_one("{\"name\":\"t\",\"url\":\"https://h\",\"headers\":{\"Authorization\":"
	    "\"OTHER\"}}", "headers", "no secret of that name", "a secret the org lacks");
	check_one("{\"name\":\"t\",\"url\":\"https://Bound.example.com/\",\"headers\":"
	    "{\"X-Key\":\"BOUND\"}}", NULL, "", "a header secret on its own host");
	check_one("{\"name\":\"t\",\"url\":\"https://other.example.com/\",\"headers\":"
	    "{\"X-Key\":\"BOUND\"}}", "headers", "X-Key: a header secret bound to other hosts",
	    "a header secret on another host");
	check_one("{\"name\":\"t\",\"url\":\"https://h\",\"headers\":{\"Host\":\"TOKEN\"}}",
	    "headers", "no header a connection may set", "Host header");
	check_one("{\"name\":\"t\",\"url\":\"https://h\",\"args\":[]}", "args", "stdio",
	    "args on a remote one");
	check_one("{\"name\":\"t\",\"command\":\"x\",\"headers\":{}}", "headers", "remote",
	    "headers on a stdio one");
	check_one("{\"name\":\"t\",\"command\":\"./x\"}", "command", "absolute", "relative path");
	check_one("{\"name\":\"t\",\"command\":\"x\",\"args\":[1]}", "args", "[0]", "args not strings");
	check_one("{\"name\":\"t\",\"command\":\"x\",\"env\":{}}", "env", "unknown key", "unknown key");

	list = json_loads("[{\"name\":\"a\",\"url\":\"https://mcp.example.com/mcp\",\"headers\":"
	    "{\"X-Key\":\"TOKEN\"}},{\"name\":\"b\",\"url\":\"https://10.0.0.1:8443/\"},"
	    "{\"name\":\"c\",\"command\":\"x\"}]", 0, NULL);
	cs = connections_from_json(list, known, NULL, &why);
	ok(cs != NULL && why == NULL, "a list of three: good (%s)", why != NULL ? why : "");
	free(why);
	ok(cs->n == 3 && strcmp(cs->v[0].host, "mcp.example.com") == 0 && cs->v[0].port == 443 &&
	    strcmp(cs->v[0].path, "/mcp") == 0 && cs->v[0].nheaders == 1 &&
	    strcmp(cs->v[0].headers[0].secret, "TOKEN") == 0 && cs->v[1].port == 8443 &&
	    strcmp(cs->v[1].path, "/") == 0 && strcmp(cs->v[2].command, "x") == 0 &&
	    cs->v[2].url == NULL, "typed: each one's host, port, path, headers, command");
	back = connections_json(cs);
	ok(json_equal(back, list), "as JSON again: the list as given");
	json_decref(back);
	allow = connections_allow(base, cs);
	ok(allow != NULL && strcmp(allow[0], "api.example.com") == 0 &&
	    strcmp(allow[1], "mcp.example.com") == 0 && strcmp(allow[2], "10.0.0.1:8443") == 0 &&
	    allow[3] == NULL, "allow: network.allow, then each remote host (its port unless 443)");
	strv_free(allow);
	note = connections_note(cs);
	is_str(note, "connections: a (https://mcp.example.com/mcp; X-Key from secret TOKEN), b "
	    "(https://10.0.0.1:8443/), c (stdio: x)", "the history's row");
	free(note);
	connections_free(cs);
	json_array_append_new(list, json_pack("{s:s,s:s}", "name", "b", "command", "y"));
	cs = connections_from_json(list, known, NULL, &why);
	ok(cs == NULL, "a name twice: no list");
	is_str(why, "connections[3].name: \"b\" is already the name of connections[1]",
	    "a name twice");
	free(why);
	json_decref(list);
	list = json_loads("[{\"name\":\"c\",\"command\":\"x\",\"args\":[\"-v\"]},"
	    "{\"name\":\"d\",\"url\":\"https://h.example.com/\",\"headers\":"
	    "{\"Authorization\":\"Bearer {TOKEN}\"}}]", 0, NULL);
	cs = connections_from_json(list, known, NULL, &why);
	back = cs != NULL ? connections_json(cs) : NULL;
	ok(back != NULL && json_equal(back, list), "as JSON again: args and SCHEME {NAME} as given");
	json_decref(back);
	connections_free(cs);
	json_array_remove(list, 1);
	cs = connections_from_json(list, known, NULL, &why);
	ok(cs != NULL && connections_allow(NULL, cs) == NULL, "allow: none without a remote one");
	connections_free(cs);
	json_decref(list);
	return tap_done();
}
