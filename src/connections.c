/* connections.c: the MCP servers an automation or API session connects its agent to (SPEC 18): checked, and made into a run's allow list, header secrets and agent configuration. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connections.h"
#include "rootfs.h"
#include "secrets.h"
#include "spur.h"

/* Header names the proxy or HTTP itself owns. */
static const char *const conn_reserved_headers[] = { "host", "content-length",
    "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", NULL };

static int
conn_name_ok(const char *s)
{
	size_t	n = strlen(s);

	return n > 0 && n <= CONNECTION_NAME_MAX &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* https://HOST[:PORT][/PATH]: *host and *port (443 when absent); NULL or why. */
static const char *
conn_url_parse(const char *url, char **host, int *port)
{
	const char	*a, *end, *colon;
	size_t		 n;
	long		 p = 443;
	char		*ep;

	*host = NULL;
	if (strncmp(url, "https://", 8) != 0)
		return "must be an https:// URL (the proxy adds header secrets on TLS only)";
	for (a = url; *a != '\0'; a++) {
		if ((unsigned char)*a <= 0x20 || *a == 0x7f)
			return "must hold no spaces or control characters";
	}
	a = url + 8;
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', end - a) != NULL)
		return "must hold no user or password (a header secret carries credentials)";
	if (*a == '[')
		return "must name a host (a DNS name or an IPv4 address), not an IPv6 one";
	if ((colon = memchr(a, ':', end - a)) != NULL) {
		errno = 0;
		p = strtol(colon + 1, &ep, 10);
		if (ep != end || colon + 1 == end || errno != 0 || p < 1 || p > 65535)
			return "has a bad port";
	} else
		colon = end;
	n = colon - a;
	if (n == 0 || n > 253 || strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789.-") < n || *a == '.' || *a == '-')
		return "must name a host (a DNS name or an IPv4 address)";
	*host = xstrndup(a, n);
	*port = (int)p;
	return NULL;
}

int
connection_header_parse(const char *v, char **secret, char **format)
{
	const char	*sp = strchr(v, ' ');
	size_t		 n;
	char		*name;

	*secret = *format = NULL;
	if (sp == NULL) {
		if (!secrets_name_valid(v))
			return -1;
		*secret = xstrdup(v);
		*format = xstrdup("{value}");
		return 0;
	}
	n = sp - v;
	if (n == 0 || n > 32 || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
	    n || sp[1] != '{' || strlen(sp) < 4 || sp[strlen(sp) - 1] != '}')
		return -1;
	name = xstrndup(sp + 2, strlen(sp) - 3);
	if (!secrets_name_valid(name)) {
		free(name);
		return -1;
	}
	*secret = name;
	*format = xprintf("%.*s {value}", (int)n, v);
	return 0;
}

static int
conn_header_name_ok(const char *s)
{
	size_t	i, n = strlen(s);

	if (n == 0 || n > 64 || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789-") != n || strncasecmp(s, "proxy-", 6) == 0)
		return 0;
	for (i = 0; conn_reserved_headers[i] != NULL; i++) {
		if (strcasecmp(s, conn_reserved_headers[i]) == 0)
			return 0;
	}
	return 1;
}

const char *
connection_secret_why(int found, char *const *hosts, const char *host)
{
	size_t	i;

	if (!found)
		return "no secret of that name in the org (orgs.NAME.secrets, or sealed: spur "
		    "secrets set); a header's value is a secret's name, never the secret itself";
	for (i = 0; hosts != NULL && hosts[i] != NULL; i++) {
		if (strcasecmp(hosts[i], host) == 0)
			return NULL;
	}
	return hosts == NULL ? NULL : "a header secret bound to other hosts (spur secrets set "
	    "--host): it goes to those only";
}

static char *
conn_headers_error(const json_t *h, const char *host, connection_known_fn known, void *arg)
{
	const char	*k, *why;
	json_t		*v;
	char		*secret, *format;

	if (!json_is_object(h))
		return xstrdup("must be a mapping of header names to secret references");
	if (json_object_size(h) > CONNECTION_HEADERS_MAX)
		return xprintf("at most %d headers", CONNECTION_HEADERS_MAX);
	json_object_foreach((json_t *)h, k, v) {
		if (!conn_header_name_ok(k))
			return xprintf("\"%s\" is no header a connection may set", k);
		if (!json_is_string(v) || connection_header_parse(json_string_value(v), &secret,
		    &format) != 0)
			return xprintf("%s: must be a secret's name (NAME, or SCHEME {NAME} as in "
			    "Bearer {NAME}), never the secret itself", k);
		why = known != NULL ? known(arg, secret, host) : NULL;
		free(format);
		free(secret);
		if (why != NULL)
			return xprintf("%s: %s", k, why);
	}
	return NULL;
}

static char *
conn_stdio_error(const json_t *c, const char **field)
{
	const json_t	*args = json_object_get(c, "args"), *v;
	const char	*cmd = json_string_value(json_object_get(c, "command"));
	size_t		 i, n;

	*field = "command";
	n = cmd != NULL ? strlen(cmd) : 0;
	if (cmd == NULL || n == 0 || n > 1024 || n != json_string_length(json_object_get(c,
	    "command")) || strpbrk(cmd, " \t\r\n") != NULL ||
	    (cmd[0] != '/' && strchr(cmd, '/') != NULL))
		return xstrdup("must be an absolute path or a command's name (looked up in the "
		    "run's PATH)");
	if (json_object_get(c, "headers") != NULL) {
		*field = "headers";
		return xstrdup("is only for a remote connection (url)");
	}
	*field = "args";
	if (args == NULL)
		return NULL;
	if (!json_is_array(args) || json_array_size(args) > CONNECTION_ARGS_MAX)
		return xprintf("must be a list of at most %d strings", CONNECTION_ARGS_MAX);
	json_array_foreach(args, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
		    json_string_length(v) > 4096)
			return xprintf("[%zu] must be a string (at most 4096 bytes)", i);
	}
	return NULL;
}

static char *
conn_check(const json_t *c, connection_known_fn known, void *arg, const char **field)
{
	static const char *const keys[] = { "name", "url", "headers", "command", "args", NULL };
	const char	*k, *name, *why;
	json_t		*v;
	char		*host, *out;
	size_t		 i;
	int		 port;

	*field = NULL;
	if (!json_is_object(c))
		return xstrdup("must be a mapping ({name, url, headers} or {name, command, args})");
	json_object_foreach((json_t *)c, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL) {
			*field = k;
			return xprintf("unknown key (expected name, url, headers, command, args)");
		}
	}
	*field = "name";
	name = json_string_value(json_object_get(c, "name"));
	if (name == NULL || !conn_name_ok(name) || strcmp(name, "spur") == 0)
		return xprintf("must be 1 to %d of a-z, 0-9, _ and - (not spur, the run's own "
		    "server)", CONNECTION_NAME_MAX);
	if ((json_object_get(c, "url") != NULL) == (json_object_get(c, "command") != NULL)) {
		*field = NULL;
		return xstrdup("needs either url (a remote server) or command (a stdio one)");
	}
	if (json_object_get(c, "command") != NULL)
		return conn_stdio_error(c, field);
	*field = "url";
	if (!json_is_string(json_object_get(c, "url")))
		return xstrdup("must be an https:// URL");
	if ((why = conn_url_parse(json_string_value(json_object_get(c, "url")), &host,
	    &port)) != NULL)
		return xstrdup(why);
	if (json_object_get(c, "args") != NULL) {
		free(host);
		*field = "args";
		return xstrdup("is only for a stdio connection (command)");
	}
	*field = "headers";
	out = (v = json_object_get(c, "headers")) != NULL ? conn_headers_error(v, host, known,
	    arg) : NULL;
	free(host);
	return out;
}

char *
connection_error(const json_t *c, connection_known_fn known, void *arg, const char **field)
{
	char	*why = conn_check(c, known, arg, field);

	if (why == NULL)
		*field = NULL;
	return why;
}

char *
connections_error(const json_t *list, connection_known_fn known, void *arg)
{
	const char	*field, *name;
	json_t		*c;
	size_t		 i, j;
	char		*why, *out;

	if (!json_is_array(list))
		return xstrdup("connections: must be a list");
	if (json_array_size(list) > CONNECTIONS_MAX)
		return xprintf("connections: at most %d", CONNECTIONS_MAX);
	json_array_foreach(list, i, c) {
		if ((why = connection_error(c, known, arg, &field)) != NULL) {
			out = xprintf("connections[%zu]%s%s: %s", i, field != NULL ? "." : "",
			    field != NULL ? field : "", why);
			free(why);
			return out;
		}
		name = json_string_value(json_object_get(c, "name"));
		for (j = 0; j < i; j++) {
			if (strcmp(name, json_string_value(json_object_get(json_array_get(list,
			    j), "name"))) == 0)
				return xprintf("connections[%zu].name: \"%s\" is already the name of "
				    "connections[%zu]", i, name, j);
		}
	}
	return NULL;
}

/* One checked connection of the JSON: its strings copied, its URL and headers parsed. */
static void
conn_from_json(const json_t *j, struct connection *c)
{
	const json_t	*args = json_object_get(j, "args"), *v;
	const char	*k, *url;
	size_t		 i;

	c->name = xstrdup(json_string_value(json_object_get(j, "name")));
	if ((url = json_string_value(json_object_get(j, "url"))) == NULL) {
		c->command = xstrdup(json_string_value(json_object_get(j, "command")));
		if (args != NULL) {
			c->args = xcalloc(json_array_size(args) + 1, sizeof *c->args);
			json_array_foreach(args, i, v)
				c->args[i] = xstrdup(json_string_value(v));
		}
		return;
	}
	c->url = xstrdup(url);
	(void)conn_url_parse(url, &c->host, &c->port);	/* checked */
	url += 8 + strcspn(url + 8, "/?#");
	c->path = *url == '/' ? xstrndup(url, strcspn(url, "?#")) : xstrdup("/");
	c->headers = xcalloc(json_object_size(json_object_get(j, "headers")) + 1,
	    sizeof *c->headers);
	json_object_foreach(json_object_get(j, "headers"), k, v) {
		c->headers[c->nheaders].name = xstrdup(k);
		(void)connection_header_parse(json_string_value(v),	/* checked */
		    &c->headers[c->nheaders].secret, &c->headers[c->nheaders].format);
		c->nheaders++;
	}
}

struct connections *
connections_from_json(const json_t *list, connection_known_fn known, void *arg, char **why)
{
	struct connections	*cs;
	size_t			 i;

	if ((*why = connections_error(list, known, arg)) != NULL)
		return NULL;
	cs = xcalloc(1, sizeof *cs);
	cs->v = xcalloc(json_array_size(list) + 1, sizeof *cs->v);
	for (i = 0; i < json_array_size(list); i++)
		conn_from_json(json_array_get(list, i), &cs->v[cs->n++]);
	return cs;
}

/* A header's secret reference as written: NAME, or SCHEME {NAME}. */
static char *
conn_header_ref(const struct connection_header *h)
{
	const char	*at = strstr(h->format, "{value}");

	if (strcmp(h->format, "{value}") == 0)
		return xstrdup(h->secret);
	return xprintf("%.*s{%s}%s", (int)(at - h->format), h->format, h->secret, at + 7);
}

json_t *
connections_json(const struct connections *cs)
{
	const struct connection	*c;
	json_t			*list = json_array(), *o, *x;
	size_t			 i, k;
	char			*ref;

	for (i = 0; i < cs->n; i++) {
		c = &cs->v[i];
		o = json_pack("{s:s}", "name", c->name);
		if (c->url != NULL) {
			json_object_set_new(o, "url", json_string(c->url));
			x = c->nheaders > 0 ? json_object() : NULL;
			for (k = 0; k < c->nheaders; k++) {
				ref = conn_header_ref(&c->headers[k]);
				json_object_set_new(x, c->headers[k].name, json_string(ref));
				free(ref);
			}
			if (x != NULL)
				json_object_set_new(o, "headers", x);
		} else {
			json_object_set_new(o, "command", json_string(c->command));
			x = c->args != NULL ? json_array() : NULL;
			for (k = 0; c->args != NULL && c->args[k] != NULL; k++)
				json_array_append_new(x, json_string(c->args[k]));
			if (x != NULL)
				json_object_set_new(o, "args", x);
		}
		json_array_append_new(list, o);
	}
	return list;
}

void
connections_free(struct connections *cs)
{
	struct connection	*c;
	size_t			 i, k;

	if (cs == NULL)
		return;
	for (i = 0; i < cs->n; i++) {
		c = &cs->v[i];
		free(c->name);
		free(c->url);
		free(c->host);
		free(c->path);
		for (k = 0; k < c->nheaders; k++) {
			free(c->headers[k].name);
			free(c->headers[k].secret);
			free(c->headers[k].format);
		}
		free(c->headers);
		free(c->command);
		strv_free(c->args);
	}
	free(cs->v);
	free(cs);
}

char **
connections_allow(char *const *allow, const struct connections *cs)
{
	const struct connection	*c;
	char			**out = NULL;
	size_t			  i, n = 0, k;

	for (i = 0; cs != NULL && i < cs->n; i++) {
		if ((c = &cs->v[i])->url == NULL)
			continue;
		if (out == NULL) {
			for (k = 0; allow != NULL && allow[k] != NULL; k++)
				;
			out = xcalloc(k + cs->n + 1, sizeof *out);
			for (n = 0; n < k; n++)
				out[n] = xstrdup(allow[n]);
		}
		out[n++] = c->port == 443 ? xstrdup(c->host) : xprintf("%s:%d", c->host, c->port);
	}
	return out;
}

char *
connections_note(const struct connections *cs)
{
	const struct connection	*c;
	struct buf		 b;
	size_t			 i, k;

	buf_init(&b, 0);
	buf_adds(&b, "connections:");
	for (i = 0; i < cs->n; i++) {
		c = &cs->v[i];
		buf_addf(&b, "%s %s (", i > 0 ? "," : "", c->name);
		if (c->url != NULL)
			buf_adds(&b, c->url);
		else
			buf_addf(&b, "stdio: %s", c->command);
		for (k = 0; k < c->nheaders; k++)
			buf_addf(&b, "; %s from secret %s", c->headers[k].name,
			    c->headers[k].secret);
		buf_adds(&b, ")");
	}
	return buf_take(&b);
}

/* One header secret of the run: its value, a fresh placeholder, bound to host. */
static int
conn_header_secret(struct engine *e, const char *org, const char *host,
    const struct connection_header *ch, struct header_secret *h, char **cause)
{
	size_t	len;
	int	rc;

	if ((rc = secrets_value(e, org, ch->secret, host, &h->value, &len, cause)) != 0) {
		if (rc > 0)
			*cause = xprintf("secret %s is no longer configured", ch->secret);
		return -1;
	}
	h->name = xstrdup(ch->secret);
	h->placeholder = secrets_placeholder();
	h->hosts = xcalloc(2, sizeof *h->hosts);
	h->hosts[0] = xstrdup(host);
	h->header_name = xstrdup(ch->name);
	h->format = xstrdup(ch->format);
	return 0;
}

/* A remote connection's entry: its headers' values are their placeholders. */
static int
conn_remote(struct engine *e, const char *org, const struct connection *c,
    struct header_secret **hs, size_t *nhs, json_t *entry, char **cause)
{
	const char	*fmt, *at;
	json_t		*headers = json_object();
	char		*ph;
	size_t		 k;

	json_object_set_new(entry, "type", json_string("http"));
	json_object_set_new(entry, "url", json_string(c->url));
	json_object_set_new(entry, "headers", headers);
	for (k = 0; k < c->nheaders; k++) {
		*hs = xreallocarray(*hs, *nhs + 1, sizeof **hs);
		memset(&(*hs)[*nhs], 0, sizeof **hs);
		if (conn_header_secret(e, org, c->host, &c->headers[k], &(*hs)[*nhs], cause) != 0)
			return -1;
		/* FORMAT always writes {value} (connection_header_parse). */
		fmt = (*hs)[*nhs].format;
		at = strstr(fmt, "{value}");
		ph = xprintf("%.*s%s%s", (int)(at - fmt), fmt, (*hs)[*nhs].placeholder, at + 7);
		json_object_set_new(headers, c->headers[k].name, json_string(ph));
		free(ph);
		(*nhs)++;
	}
	return 0;
}

/* A stdio connection's entry: {type: stdio, command, args}. */
static void
conn_stdio(const struct connection *c, json_t *entry)
{
	json_t	*args = json_array();
	size_t	 k;

	for (k = 0; c->args != NULL && c->args[k] != NULL; k++)
		json_array_append_new(args, json_string(c->args[k]));
	json_object_set_new(entry, "type", json_string("stdio"));
	json_object_set_new(entry, "command", json_string(c->command));
	json_object_set_new(entry, "args", args);
}

int
connections_for_run(struct engine *e, const char *org, const struct connections *cs,
    struct header_secret **hs, size_t *nhs, json_t **servers, char **cause)
{
	json_t	*entry;
	size_t	 i;

	*servers = NULL;
	if (cs == NULL || cs->n == 0)
		return 0;
	*servers = json_object();
	for (i = 0; i < cs->n; i++) {
		entry = json_object();
		json_object_set_new(*servers, cs->v[i].name, entry);
		if (cs->v[i].command != NULL)
			conn_stdio(&cs->v[i], entry);
		else if (conn_remote(e, org, &cs->v[i], hs, nhs, entry, cause) != 0) {
			json_decref(*servers);
			*servers = NULL;
			return -1;
		}
	}
	return 0;
}

/* A name in the sandbox's PATH on the host (the sandbox sees the host's system directories). */
static int
conn_host_command(const char *cmd)
{
	static const char *const path[] = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
	    "/usr/bin", "/sbin", "/bin" };
	char	*p;
	size_t	 i;
	int	 found = 0;

	if (cmd[0] == '/')
		return access(cmd, X_OK) == 0;
	for (i = 0; i < SPUR_ARRLEN(path) && !found; i++) {
		p = xprintf("%s/%s", path[i], cmd);
		found = access(p, X_OK) == 0;
		free(p);
	}
	return found;
}

int
connection_command(const struct connection *c, const char *rootfs, char **cause)
{
	char	*why = NULL;

	if (c->command == NULL || (rootfs != NULL ? rootfs_command(rootfs, c->command, &why) >= 0 :
	    conn_host_command(c->command)))
		return 0;
	*cause = xprintf("connection %s: command %s is not in the run's environment%s%s",
	    c->name, c->command, why != NULL ? ": " : "", why != NULL ? why : "");
	free(why);
	return -1;
}

int
connections_commands(const struct connections *cs, const char *rootfs, char **cause)
{
	size_t	i;

	for (i = 0; cs != NULL && i < cs->n; i++) {
		if (connection_command(&cs->v[i], rootfs, cause) != 0)
			return -1;
	}
	return 0;
}
