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

int
connection_url(const json_t *c, char **host, int *port, char **path)
{
	const char	*url = json_string_value(json_object_get(c, "url")), *p;

	if (url == NULL || conn_url_parse(url, host, port) != NULL)
		return -1;
	p = url + 8 + strcspn(url + 8, "/?#");
	*path = *p == '/' ? xstrndup(p, strcspn(p, "?#")) : xstrdup("/");
	return 0;
}

char **
connections_allow(char *const *allow, const json_t *list)
{
	const char	*url;
	char		**out = NULL, *host;
	size_t		 i, n = 0, k;
	int		 port;
	json_t		*c;

	json_array_foreach(list, i, c) {
		if ((url = json_string_value(json_object_get(c, "url"))) == NULL ||
		    conn_url_parse(url, &host, &port) != NULL)
			continue;
		if (out == NULL) {
			for (k = 0; allow != NULL && allow[k] != NULL; k++)
				;
			out = xcalloc(k + json_array_size(list) + 1, sizeof *out);
			for (n = 0; n < k; n++)
				out[n] = xstrdup(allow[n]);
		}
		out[n++] = port == 443 ? host : xprintf("%s:%d", host, port);
		if (port != 443)
			free(host);
	}
	return out;
}

char *
connections_note(const json_t *list)
{
	struct buf	 b;
	const char	*k;
	json_t		*c, *v;
	size_t		 i;
	char		*secret, *format;

	buf_init(&b, 0);
	buf_adds(&b, "connections:");
	json_array_foreach(list, i, c) {
		buf_addf(&b, "%s %s (", i > 0 ? "," : "",
		    json_string_value(json_object_get(c, "name")));
		if (json_object_get(c, "url") != NULL)
			buf_adds(&b, json_string_value(json_object_get(c, "url")));
		else
			buf_addf(&b, "stdio: %s", json_string_value(json_object_get(c, "command")));
		json_object_foreach(json_object_get(c, "headers"), k, v) {
			if (connection_header_parse(json_string_value(v), &secret, &format) != 0)
				continue;
			buf_addf(&b, "; %s from secret %s", k, secret);
			free(secret);
			free(format);
		}
		buf_adds(&b, ")");
	}
	return buf_take(&b);
}

/* One header secret of the run: its value, a fresh placeholder, bound to host. */
static int
conn_header_secret(struct engine *e, const char *org, const char *host, const char *header,
    const char *ref, struct header_secret *h, char **cause)
{
	char		*secret, *format;
	size_t		 len;
	int		 rc;

	if (connection_header_parse(ref, &secret, &format) != 0) {
		*cause = xprintf("header %s: not a secret reference", header);
		return -1;
	}
	if ((rc = secrets_value(e, org, secret, host, &h->value, &len, cause)) != 0) {
		if (rc > 0)
			*cause = xprintf("secret %s is no longer configured", secret);
		free(secret);
		free(format);
		return -1;
	}
	h->name = secret;
	h->placeholder = secrets_placeholder();
	h->hosts = xcalloc(2, sizeof *h->hosts);
	h->hosts[0] = xstrdup(host);
	h->header_name = xstrdup(header);
	h->format = format;
	return 0;
}

/* A remote connection's entry: its headers' values are their placeholders. */
static int
conn_remote(struct engine *e, const char *org, const json_t *c, struct header_secret **hs,
    size_t *nhs, json_t *entry, char **cause)
{
	const char	*k, *fmt, *at;
	json_t		*v, *headers = json_object();
	char		*host, *ph;
	int		 port;

	json_object_set_new(entry, "type", json_string("http"));
	json_object_set(entry, "url", json_object_get(c, "url"));
	json_object_set_new(entry, "headers", headers);
	if (conn_url_parse(json_string_value(json_object_get(c, "url")), &host, &port) != NULL) {
		*cause = xstrdup("a connection's URL is no longer valid");
		return -1;
	}
	json_object_foreach(json_object_get(c, "headers"), k, v) {
		*hs = xreallocarray(*hs, *nhs + 1, sizeof **hs);
		memset(&(*hs)[*nhs], 0, sizeof **hs);
		if (conn_header_secret(e, org, host, k, json_string_value(v), &(*hs)[*nhs],
		    cause) != 0) {
			free(host);
			return -1;
		}
		/* FORMAT always writes {value} (connection_header_parse). */
		fmt = (*hs)[*nhs].format;
		at = strstr(fmt, "{value}");
		ph = xprintf("%.*s%s%s", (int)(at - fmt), fmt, (*hs)[*nhs].placeholder, at + 7);
		json_object_set_new(headers, k, json_string(ph));
		free(ph);
		(*nhs)++;
	}
	free(host);
	return 0;
}

int
connections_for_run(struct engine *e, const char *org, const json_t *list,
    struct header_secret **hs, size_t *nhs, json_t **servers, char **cause)
{
	json_t	*c, *entry;
	size_t	 i;

	*servers = NULL;
	if (json_array_size(list) == 0)
		return 0;
	*servers = json_object();
	json_array_foreach(list, i, c) {
		entry = json_object();
		json_object_set_new(*servers, json_string_value(json_object_get(c, "name")), entry);
		if (json_object_get(c, "command") != NULL) {
			json_object_set_new(entry, "type", json_string("stdio"));
			json_object_set(entry, "command", json_object_get(c, "command"));
			json_object_set_new(entry, "args", json_object_get(c, "args") != NULL ?
			    json_deep_copy(json_object_get(c, "args")) : json_array());
		} else if (conn_remote(e, org, c, hs, nhs, entry, cause) != 0) {
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
connections_commands(const json_t *list, const char *rootfs, char **cause)
{
	const char	*cmd;
	json_t		*c;
	size_t		 i;
	char		*why = NULL;

	json_array_foreach(list, i, c) {
		if ((cmd = json_string_value(json_object_get(c, "command"))) == NULL)
			continue;
		if (rootfs != NULL ? rootfs_command(rootfs, cmd, &why) >= 0 :
		    conn_host_command(cmd))
			continue;
		*cause = xprintf("connection %s: command %s is not in the run's environment%s%s",
		    json_string_value(json_object_get(c, "name")), cmd, why != NULL ? ": " : "",
		    why != NULL ? why : "");
		free(why);
		return -1;
	}
	return 0;
}
