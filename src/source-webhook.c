/* source-webhook.c: generic hooks of automations: hmac, Standard Webhooks, bearer or none. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "source.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * The header an hmac hook reads when its auth names none: a plain name many
 * senders let one configure, hex or base64 per the hook's encoding, without a
 * prefix unless the hook sets one.
 */
#define WEBHOOK_HMAC_HEADER	"X-Signature"
#define WEBHOOK_STD_WINDOW_MS	(300 * 1000)

static void	webhook_handle(const struct source_req *, struct source_result *);

const struct source source_webhook = { .name = "webhook", .handle = webhook_handle };

/* Compares a base64 signature with want in constant time; -2 when it is not base64 of 32 bytes. */
static int
webhook_check_base64(const unsigned char want[32], const char *given, size_t len)
{
	unsigned char	*got;
	size_t		 gotlen;
	int		 r;

	if (base64_decode(given, len, &got, &gotlen) != 0)
		return -2;
	if (gotlen != 32)
		r = -2;
	else
		r = ct_equal(want, got, 32) ? 0 : -1;
	free(got);
	return r;
}

/* auth hmac: HMAC-SHA256(secret, body) in def->header, after def->prefix, hex or base64. */
static char *
webhook_check_hmac(const struct source_req *req, const struct webhook_def *def,
    const void *key, size_t keylen, int *hashed)
{
	const char	*header = def->header != NULL ? def->header : WEBHOOK_HMAC_HEADER;
	const char	*prefix = def->prefix != NULL ? def->prefix : "";
	const char	*sig = source_header(req, header);
	unsigned char	 want[32];
	char		 safe[65];
	int		 r;

	if (sig == NULL)
		return xprintf("missing %s header", source_safe(header, safe, sizeof safe));
	if (strncmp(sig, prefix, strlen(prefix)) != 0)
		return xprintf("%s does not start with %s", source_safe(header, safe,
		    sizeof safe), prefix);
	sig += strlen(prefix);
	*hashed = 1;
	if (def->base64) {
		hmac_sha256(key, keylen, req->body, req->len, want);
		r = webhook_check_base64(want, sig, strlen(sig));
	} else
		r = source_check_hmac_hex(key, keylen, sig, req->body, req->len);
	if (r == 0)
		return NULL;
	source_safe(header, safe, sizeof safe);
	if (r == -2)
		return xprintf("%s is not %s%s", safe, prefix,
		    def->base64 ? "and base64 of 32 bytes" : "and 64 hex digits");
	return xprintf("%s does not match the body", safe);
}

/*
 * Standard Webhooks: HMAC-SHA256(base64-decoded whsec_ key, id "." timestamp
 * "." body), any of the space-separated "v1,<base64>" signatures may match.
 */
static char *
webhook_check_standard(const struct source_req *req, const struct secret *secret,
    int nokey, int *hashed)
{
	const char	*id = source_header(req, "webhook-id");
	const char	*ts = source_header(req, "webhook-timestamp");
	const char	*sigs = source_header(req, "webhook-signature");
	const char	*p, *end;
	const void	*key;
	unsigned char	*decoded = NULL, want[32];
	size_t		 keylen, seen = 0, v1 = 0;
	char		*cause = NULL;
	int64_t		 secs;
	int		 matched = 0, badkey = 0;

	if (id == NULL)
		return xprintf("missing webhook-id header");
	if (ts == NULL)
		return xprintf("missing webhook-timestamp header");
	if (sigs == NULL)
		return xprintf("missing webhook-signature header");
	if (source_parse_int(ts, &secs) != 0 || secs < 0 || secs > INT64_MAX / 1000)
		return xprintf("webhook-timestamp is not a number of seconds");
	if (source_check_window(secs * 1000, req->now_ms, WEBHOOK_STD_WINDOW_MS,
	    "webhook-timestamp", &cause) != 0)
		return cause;

	/* The key is the base64 after whsec_; a secret that is not is refused. */
	source_key(nokey ? NULL : secret, &key, &keylen);
	if (!nokey) {
		if (webhook_standard_key(key, keylen, &decoded, &keylen) != 0) {
			badkey = 1;
			source_key(NULL, &key, &keylen);
		} else
			key = decoded;
	}

	webhook_standard_hmac(key, keylen, id, ts, req->body, req->len, want);
	*hashed = 1;
	if (decoded != NULL) {
		explicit_bzero(decoded, keylen);
		free(decoded);
	}

	for (p = sigs; *p != '\0' && seen < SOURCE_MAX_SIGNATURES; p = end) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		end = p + strcspn(p, " ");
		seen++;
		if (end - p > 3 && strncmp(p, "v1,", 3) == 0) {
			v1++;
			if (webhook_check_base64(want, p + 3, (size_t)(end - p - 3)) == 0)
				matched = 1;
		}
	}
	if (badkey)
		return xprintf("the hook's secret is not whsec_ followed by base64");
	if (v1 == 0)
		return xprintf("webhook-signature has no v1 signature");
	if (!matched)
		return xprintf("no webhook-signature matches");
	return NULL;
}

/*
 * auth bearer: Authorization: Bearer <secret>. Both sides are hashed first so
 * the comparison takes the same time whatever the lengths.
 */
static char *
webhook_check_bearer(const struct source_req *req, const void *key, size_t keylen)
{
	const char	*auth = source_header(req, "Authorization");
	const void	*hk;
	size_t		 hklen;
	unsigned char	 want[32], got[32];

	source_key(NULL, &hk, &hklen);
	hmac_sha256(hk, hklen, key, keylen, want);
	if (auth == NULL)
		return xprintf("missing Authorization header");
	if (strncasecmp(auth, "Bearer ", 7) != 0)
		return xprintf("Authorization is not a Bearer token");
	auth += 7;
	while (*auth == ' ')
		auth++;
	hmac_sha256(hk, hklen, auth, strlen(auth), got);
	if (!ct_equal(want, got, sizeof want))
		return xprintf("the Bearer token does not match");
	return NULL;
}

/* Why a request cannot be checked against a real secret, or NULL when it can (or needs none). */
static char *
webhook_no_key(const struct source_req *req, const struct secret **secret)
{
	const struct webhook_def	*def = req->webhook;
	char				 safe[65];

	*secret = NULL;
	if (req->org == NULL)
		return xprintf("unknown org");
	if (def == NULL)
		return xprintf("no webhook named %s", source_safe(req->hook, safe,
		    sizeof safe));
	if (def->auth == WH_AUTH_NONE)
		return NULL;
	if (def->secret == NULL)
		return xprintf("webhook %s names no secret", def->name);
	*secret = org_secret(req->org, def->secret);
	if (*secret == NULL || (*secret)->value == NULL || (*secret)->len == 0)
		return xprintf("secret %s of webhook %s is not set", def->secret,
		    def->name);
	return NULL;
}

static char *
webhook_verify(const struct source_req *req)
{
	const struct webhook_def	*def = req->webhook;
	const struct secret		*secret;
	const void			*key;
	size_t				 keylen;
	unsigned char			 burn[32];
	char				*nokey, *cause = NULL;
	int				 hashed = 0;

	nokey = webhook_no_key(req, &secret);
	source_key(nokey != NULL ? NULL : secret, &key, &keylen);
	if (def != NULL && req->org != NULL) {
		switch (def->auth) {
		case WH_AUTH_NONE:
			break;
		case WH_AUTH_HMAC:
			cause = webhook_check_hmac(req, def, key, keylen, &hashed);
			break;
		case WH_AUTH_STANDARD:
			cause = webhook_check_standard(req, secret, nokey != NULL, &hashed);
			break;
		case WH_AUTH_BEARER:
			cause = webhook_check_bearer(req, key, keylen);
			break;
		}
	}
	/*
	 * Every refused request costs one HMAC over the body, whatever the hook's
	 * auth and whether it exists, so timing tells nothing about which hooks
	 * there are.
	 */
	if (!hashed && (cause != NULL || nokey != NULL))
		hmac_sha256(key, keylen, req->body, req->len, burn);
	if (nokey != NULL) {
		free(cause);
		return nokey;
	}
	return cause;
}

/* The hook's text: a string as is, another scalar printed, a list or object as compact JSON. */
static char *
webhook_text(const json_t *payload, const char *path)
{
	const json_t	*v;
	char		*s;

	if (path == NULL || (v = json_path(payload, path)) == NULL || json_is_null(v))
		return xstrdup("");
	if (json_is_object(v) || json_is_array(v)) {
		if ((s = json_dumps(v, JSON_COMPACT)) == NULL)
			fatal("webhook_text: cannot encode");
		return s;
	}
	return json_scalar_text(v);
}

/* Any JSON object or list; an empty body is {} so a bare POST can trigger. */
static json_t *
webhook_payload(const struct source_req *req, char **cause)
{
	json_t	*j;

	if (req->len == 0)
		return json_object();
	if (source_body_kind(req) == SOURCE_BODY_FORM) {
		if ((j = form_decode(req->body, req->len)) == NULL)
			*cause = xstrdup("malformed form body");
		return j;
	}
	return json_parse_bounded(req->body, req->len, SOURCE_JSON_DEPTH, cause);
}

static void
webhook_handle(const struct source_req *req, struct source_result *res)
{
	const struct webhook_def	*def = req->webhook;
	const char			*id;
	char				*cause, *thread;
	json_t				*payload;
	struct spur_event			*ev;

	memset(res, 0, sizeof *res);
	/* An unknown hook is refused even with no_verify: there is nothing to normalize by. */
	if ((!req->no_verify || def == NULL || req->org == NULL) &&
	    (cause = webhook_verify(req)) != NULL) {
		source_unauthorized(res, "%s", cause);
		free(cause);
		return;
	}
	cause = NULL;
	if ((payload = webhook_payload(req, &cause)) == NULL) {
		source_bad(res, "%s", cause);
		free(cause);
		return;
	}

	ev = source_event_new(req, "webhook");
	ev->payload = payload;
	if (req->len > 0 && source_body_kind(req) != SOURCE_BODY_FORM)
		source_keep_body(req, ev);
	ev->type = xstrdup("webhook");
	ev->unsigned_body = def->auth == WH_AUTH_NONE;
	id = NULL;
	if (def->auth == WH_AUTH_STANDARD) {
		id = source_header(req, "webhook-id");
		if (!source_id_ok(id))
			id = NULL;
		if (id != NULL)
			ev->dedup = xprintf("std:%s:%s", def->name, id);
	} else if (def->auth == WH_AUTH_HMAC && def->id_header != NULL) {
		id = source_header(req, def->id_header);
		if (!source_id_ok(id))
			id = NULL;
		if (id != NULL)
			ev->dedup = xprintf("hook:%s:%s", def->name, id);
	}
	ev->delivery = id != NULL ? xstrdup(id) : random_id("dlv_");
	thread = def->thread_path != NULL ? source_path_text(payload, def->thread_path) :
	    NULL;
	ev->thread = xprintf("webhook:%s:%s", def->name, thread != NULL ? thread :
	    ev->delivery);
	free(thread);
	free(ev->text);
	ev->text = webhook_text(payload, def->text_path);
	json_object_set_new(ev->meta, "hook", json_string(def->name));
	res->verdict = SOURCE_EVENT;
	res->status = 200;
	res->event = ev;
}
