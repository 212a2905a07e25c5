/*
 * source.c: what every source-*.c shares: headers, HMAC, forms, answers, an
 * org's section of a system. It names no system: the table is source-table.c's.
 */
#include "spur.h"
#include "conf.h"
#include "aload.h"
#include "event.h"
#include "jscan.h"
#include "source.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * The key used when there is no secret to check against. Its value does not
 * matter (a request checked with it is always refused); it only makes an
 * unknown org cost the same HMAC as a known one.
 */
static const char source_dummy[] = "spur: no secret is configured here";

const void *
source_conf(const struct org *o, const struct source *src)
{
	size_t	 i;

	for (i = 0; o != NULL && i < o->nsources; i++) {
		if (o->sources[i].src == src)
			return o->sources[i].conf;
	}
	return NULL;
}

const void *
source_conf_named(const struct org *o, const char *name)
{
	size_t	 i;

	for (i = 0; o != NULL && i < o->nsources; i++) {
		if (strcmp(o->sources[i].src->name, name) == 0)
			return o->sources[i].conf;
	}
	return NULL;
}

char *
source_api_url(const struct org *org, const struct source *src)
{
	const void	*conf;
	const char	*u = NULL;

	if (src == NULL)
		return NULL;
	if (src->conf_api_url != NULL && (conf = source_conf(org, src)) != NULL)
		u = src->conf_api_url(conf);
	if (u == NULL)
		u = src->api_url;
	if (u == NULL)
		return NULL;
	return xprintf("%.*s", url_base_len(u), u);
}

int
source_list_has(char *const *list, size_t n, const char *s, int icase)
{
	size_t	 i;

	if (s == NULL)
		return 0;
	for (i = 0; i < n; i++) {
		if ((icase ? strcasecmp(list[i], s) : strcmp(list[i], s)) == 0)
			return 1;
	}
	return 0;
}

void
source_why_list(struct buf *why, char *const *list, size_t n)
{
	size_t	 i;

	buf_adds(why, "[");
	for (i = 0; i < n; i++)
		buf_addf(why, "%s%s", i > 0 ? ", " : "", list[i]);
	buf_adds(why, "]");
}

void
source_result_free(struct source_result *res)
{
	if (res == NULL)
		return;
	spur_event_free(res->event);
	free(res->reply);
	free(res->cause);
	memset(res, 0, sizeof *res);
}

const char *
source_header(const struct source_req *req, const char *name)
{
	size_t	 i;

	for (i = 0; i < req->nheaders; i++) {
		if (req->headers[i].name != NULL &&
		    strcasecmp(req->headers[i].name, name) == 0)
			return req->headers[i].value;
	}
	return NULL;
}

int
source_check_hmac_hex(const void *key, size_t keylen, const char *given_hex,
    const void *msg, size_t msglen)
{
	unsigned char	 want[32], got[32];
	int		 bad;

	hmac_sha256(key, keylen, msg, msglen, want);
	bad = given_hex == NULL ||
	    hex_decode(given_hex, strlen(given_hex), got, sizeof got) != 0;
	if (bad)
		return -2;
	return ct_equal(want, got, sizeof want) ? 0 : -1;
}

int
source_key(const struct secret *s, const void **key, size_t *keylen)
{
	if (s == NULL || s->value == NULL || s->len == 0) {
		*key = source_dummy;
		*keylen = sizeof source_dummy - 1;
		return -1;
	}
	*key = s->value;
	*keylen = s->len;
	return 0;
}

enum source_body
source_body_kind(const struct source_req *req)
{
	const char	*ct = source_header(req, "Content-Type");
	size_t		 n;
	int		 opens_object;

	opens_object = req->len > 0 && req->body[0] == '{';
	if (ct == NULL || *ct == '\0')
		return opens_object ? SOURCE_BODY_JSON : SOURCE_BODY_OTHER;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	if ((n == 16 && strncasecmp(ct, "application/json", n) == 0) ||
	    (n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0))
		return SOURCE_BODY_JSON;
	/*
	 * Plain HTTP clients (urllib, curl -d) label any body they are given
	 * as a form; a form cannot usefully open with '{', so that is JSON.
	 */
	if (n == 33 && strncasecmp(ct, "application/x-www-form-urlencoded", n) == 0)
		return opens_object ? SOURCE_BODY_JSON : SOURCE_BODY_FORM;
	return SOURCE_BODY_OTHER;
}

json_t *
source_parse_object(const char *s, size_t len, char **cause)
{
	json_t	*j;

	if ((j = json_parse_bounded(s, len, SOURCE_JSON_DEPTH, cause)) == NULL)
		return NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		*cause = xstrdup("payload is not a JSON object");
		return NULL;
	}
	return j;
}

void
source_keep_body(const struct source_req *req, struct spur_event *ev)
{
	free(ev->payload_raw);
	if (req->body_own != NULL && *req->body_own == req->body) {
		ev->payload_raw = *req->body_own;
		*req->body_own = NULL;
	} else {
		ev->payload_raw = xmalloc(req->len + 1);
		memcpy(ev->payload_raw, req->body, req->len);
		ev->payload_raw[req->len] = '\0';
	}
	ev->payload_rawlen = req->len;
}

json_t *
source_parse_kept(const char *s, size_t len, const char *const *keep, char **cause)
{
	json_t	*j;

	if ((j = jscan_parse(s, len, SOURCE_JSON_DEPTH, keep, cause)) == NULL)
		return NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		*cause = xstrdup("payload is not a JSON object");
		return NULL;
	}
	return j;
}

int
source_parse_int(const char *s, int64_t *out)
{
	const char	*p = s;
	int64_t		 v = 0;
	int		 neg = 0;

	if (s == NULL)
		return -1;
	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (*p == '\0' || strlen(p) > 18)
		return -1;
	for (; *p != '\0'; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (*p - '0');
	}
	*out = neg ? -v : v;
	return 0;
}

int
source_check_window(int64_t at_ms, int64_t now, int64_t window_ms, const char *what,
    char **cause)
{
	if (at_ms < now - window_ms) {
		xasprintf(cause, "%s is stale: %lld s old, the window is %lld s", what,
		    (long long)(now / 1000 - at_ms / 1000), (long long)(window_ms / 1000));
		return -1;
	}
	if (at_ms > now + window_ms) {
		xasprintf(cause, "%s is in the future: %lld s ahead, the window is %lld s",
		    what, (long long)(at_ms / 1000 - now / 1000), (long long)(window_ms / 1000));
		return -1;
	}
	return 0;
}

static void
source_verdict(struct source_result *res, enum source_verdict verdict, int status,
    const char *fmt, va_list ap)
{
	free(res->cause);
	xvasprintf(&res->cause, fmt, ap);
	res->verdict = verdict;
	res->status = status;
}

void
source_unauthorized(struct source_result *res, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	source_verdict(res, SOURCE_UNAUTHORIZED, 401, fmt, ap);
	va_end(ap);
}

void
source_bad(struct source_result *res, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	source_verdict(res, SOURCE_BAD, 400, fmt, ap);
	va_end(ap);
}

void
source_reply(struct source_result *res, int status, json_t *body)
{
	res->verdict = SOURCE_REPLY;
	res->status = status;
	free(res->reply);
	res->reply = json_dumps(body, JSON_COMPACT);
	if (res->reply == NULL)
		fatal("source_reply: cannot encode");
	json_decref(body);
}

const char *
source_safe(const char *s, char *buf, size_t len)
{
	size_t	 i;

	if (s == NULL)
		s = "(none)";
	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

char *
source_replay_key(const struct source_req *req, const char *source, const char *scope)
{
	unsigned char	 md[32];
	char		 hex[65];

	sha256(req->body, req->len, md);
	hex_encode(md, sizeof md, hex);
	return xprintf("%s:%s:%s", source, scope, hex);
}

struct spur_event *
source_event_new(const struct source_req *req, const char *source)
{
	struct spur_event	*ev;
	const char	*org = req->org != NULL ? req->org->name : req->org_name;

	ev = spur_event_new(org != NULL ? org : "", source);
	ev->received_at = req->now_ms;
	return ev;
}

char *
source_path_text(const json_t *root, const char *path)
{
	const json_t	*v = json_path(root, path);

	if (v == NULL || json_is_null(v) || json_is_object(v) || json_is_array(v))
		return NULL;
	return json_scalar_text(v);
}

static int
form_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decodes one form component into out (at least n + 1 bytes); -1 on a bad escape. */
static int
form_unescape(const char *s, size_t n, char *out, size_t *outlen)
{
	size_t	 i, o = 0;
	int	 hi, lo;

	for (i = 0; i < n; i++) {
		if (s[i] == '+')
			out[o++] = ' ';
		else if (s[i] == '%') {
			if (i + 2 >= n)
				return -1;
			if ((hi = form_hex(s[i + 1])) < 0 || (lo = form_hex(s[i + 2])) < 0)
				return -1;
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[o++] = s[i];
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}

/*
 * Every value becomes a JSON string; a repeated name keeps its last value.
 * NULL when an escape is malformed or a name or value is not UTF-8 (or a
 * name holds a NUL), which jansson would refuse anyway.
 */
json_t *
form_decode(const char *s, size_t len)
{
	json_t		*obj = json_object(), *v;
	const char	*p = s, *end = s + len, *amp, *eq;
	char		*key = xmalloc(len + 1), *val = xmalloc(len + 1);
	size_t		 klen, vlen;

	while (p < end) {
		amp = memchr(p, '&', (size_t)(end - p));
		if (amp == NULL)
			amp = end;
		if (amp == p) {
			p++;
			continue;
		}
		eq = memchr(p, '=', (size_t)(amp - p));
		if (eq == NULL)
			eq = amp;
		if (form_unescape(p, (size_t)(eq - p), key, &klen) != 0 ||
		    strlen(key) != klen)
			goto fail;
		vlen = 0;
		val[0] = '\0';
		if (eq < amp &&
		    form_unescape(eq + 1, (size_t)(amp - eq - 1), val, &vlen) != 0)
			goto fail;
		if ((v = json_stringn(val, vlen)) == NULL)
			goto fail;
		if (json_object_set_new(obj, key, v) != 0)
			goto fail;
		p = amp + 1;
	}
	free(key);
	free(val);
	return obj;

fail:
	free(key);
	free(val);
	json_decref(obj);
	return NULL;
}

int
source_id_ok(const char *s)
{
	size_t	 n;

	if (s == NULL)
		return 0;
	for (n = 0; s[n] != '\0'; n++) {
		if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e || n == 200)
			return 0;
	}
	return n > 0;
}

char *
source_no_key(const struct source_req *req, int configured, const struct secret *s,
    const char *what, const void **key, size_t *keylen)
{
	int	 n = (int)strcspn(what, ".");

	if (source_key(configured ? s : NULL, key, keylen) == 0)
		return NULL;
	if (req->org == NULL)
		return xprintf("unknown org");
	if (!configured)
		return xprintf("%.*s is not configured for this org", n, what);
	return xprintf("%s is not set for this org", what);
}

char *
source_event_check(const char *system, const struct source_event_def *defs, size_t n,
    const char *s)
{
	const char	*dot = strchr(s, '.'), *acts, *p;
	size_t		 i, elen = dot != NULL ? (size_t)(dot - s) : strlen(s), alen;

	for (i = 0; i < n; i++) {
		if (strlen(defs[i].event) == elen && strncmp(defs[i].event, s, elen) == 0)
			break;
	}
	if (i == n)
		return xprintf("unknown %s event \"%.*s\"", system, (int)elen, s);
	if (dot == NULL)
		return NULL;
	acts = defs[i].actions;
	alen = strlen(dot + 1);
	if (strcmp(acts, "*") == 0 && alen > 0)
		return NULL;
	for (p = acts; alen > 0 && *p != '\0'; p += strcspn(p, " "), p += strspn(p, " ")) {
		if (strcspn(p, " ") == alen && strncmp(p, dot + 1, alen) == 0)
			return NULL;
	}
	if (*acts == '\0')
		return xprintf("%s event \"%s\" has no actions; write \"%s\"", system,
		    defs[i].event, defs[i].event);
	return xprintf("unknown action \"%s\" of %s event \"%s\" (known: %s)", dot + 1, system,
	    defs[i].event, acts);
}

json_t *
source_issue_dest(const char *system, const char *s, const char *bad, const char **why)
{
	const char	*hash = strchr(s, '#');
	char		*repo, *end = NULL;
	long long	 num;
	json_t		*dest = NULL;

	repo = hash != NULL ? xstrndup(s, hash - s) : NULL;
	num = hash != NULL ? strtoll(hash + 1, &end, 10) : 0;
	if (repo == NULL || !valid_repository(repo) || num <= 0 || *end != '\0' ||
	    hash[1] < '1' || hash[1] > '9')
		*why = bad;
	else
		dest = json_pack("{s:s,s:s,s:{s:I}}", "source", system, "repository", repo,
		    "meta", "number", (json_int_t)num);
	free(repo);
	return dest;
}

char *
source_issue_words(const json_t *d)
{
	const char	*v = json_string_value(json_object_get(d, "repository"));

	return xprintf("%s %s#%lld", json_string_value(json_object_get(d, "source")),
	    v != NULL ? v : "", (long long)json_integer_value(json_path(d, "meta.number")));
}
