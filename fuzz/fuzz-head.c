/*
 * fuzz-head.c: the request heads the agent sends the run's proxy (proxy.c
 * http_head_parse, http_head_take) and what the interception makes of them
 * (intercept.c intercept_rewrite, intercept_foreign, the body watch in small
 * reads) for a fixed host with two fixed header secrets. Input: a raw head, CRLF CRLF and what follows.
 */
#include "spur.h"
#include "egress.h"
#include "fuzz.h"
#include "intercept.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#define FUZZ_VALUE	"fuzz-secret-value"

static struct intercept	*ic;

static void
fuzz_setup(void)
{
	static char		*hosts[] = { "api.example.test", "127.0.0.1", NULL };
	static char		*other[] = { "other.example.test", NULL };
	struct header_secret	 hs[2] = {
		{ "TOKEN", FUZZ_VALUE, "spur-secret-00112233445566778899aabbccddeeff", hosts,
		    NULL, NULL },
		{ "KEY", "fuzz-other-value", "spur-secret-ffeeddccbbaa99887766554433221100", other,
		    "X-Api-Key", "key={value};" },
	};
	char			*cause;

	if ((ic = intercept_create("fuzz", hs, 2, NULL, &cause)) == NULL)
		abort();
}

/* A rewritten head must still be one head: no bare CR or LF, one CRLF CRLF at its end. */
static void
fuzz_check(const char *in, const char *out, size_t len)
{
	struct http_head	 h;
	const char		*end;

	if (len < 4 || memcmp(out + len - 4, "\r\n\r\n", 4) != 0)
		abort();
	end = strstr(out, "\r\n\r\n");
	if (end == NULL || (size_t)(end - out) != len - 4)
		abort();
	if (http_head_parse(out, len - 4, &h) != 0)
		abort();	/* what goes upstream parses as strictly as what came */
	if (http_head_count(&h, "authorization") != 1 ||
	    strcmp(http_head_get(&h, "authorization"), "Bearer " FUZZ_VALUE) != 0)
		abort();	/* the bound secret's header, once, from FORMAT */
	if (strstr(out, "fuzz-other-value") != NULL && strstr(in, "fuzz-other-value") == NULL)
		abort();	/* another host's secret never goes (unless the sender wrote it) */
	http_head_clear(&h);
}

/* A body read in small pieces: a placeholder across two reads is found as in one. */
static void
fuzz_watch(const uint8_t *data, size_t size)
{
	struct intercept_watch	*w = intercept_watch_new(ic, "api.example.test");
	const char		*whole, *found = NULL;
	size_t			 off, step = size % 7 + 1, n;

	whole = intercept_foreign(ic, "api.example.test", data, size);
	for (off = 0; off < size && found == NULL; off += n) {
		n = size - off < step ? size - off : step;
		found = intercept_watch_feed(w, data + off, n);
	}
	if ((whole == NULL) != (found == NULL))
		abort();
	intercept_watch_free(w);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head	 h;
	struct evbuffer		*in;
	const char		*why;
	char			*text, *out;
	size_t			 len, outlen;
	int			 status;

	if (ic == NULL)
		fuzz_setup();
	fuzz_watch(data, size);
	if (http_head_parse((const char *)data, size, &h) == 0)
		http_head_clear(&h);
	in = evbuffer_new();
	evbuffer_add(in, data, size);
	if (http_head_take(in, &text, &len) == 1) {
		if (strlen(text) == len) {
			out = intercept_rewrite(ic, "api.example.test", text, len, &outlen, &status,
			    &why, NULL);
			if (out != NULL)
				fuzz_check(text, out, outlen);
			else if ((status != 400 && status != 403) || why == NULL)
				abort();
			free(out);
		}
		(void)intercept_foreign(ic, "api.example.test", text, len);
		free(text);
	}
	evbuffer_free(in);
	return 0;
}
