/* test-jscan.c: jscan_parse accepts exactly what jansson accepts, and keeps what it is told to. */
#include "spur.h"
#include "jscan.h"
#include "jscan-ref.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLES	"tests/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
#define DEPTH		64

/* A string literal with its length, NULs included. */
#define LIT(s)		(s), sizeof(s) - 1

static const char *typical[] = {
	"action", "repository.full_name", "issue.number", "issue.title", "issue.body",
	"issue.pull_request", "issue.html_url", "comment.id", "comment.body", "comment.user",
	"comment.html_url", "comment.author_association", "sender", "installation.id",
	"label.name", NULL
};

/* The input as a C string for test names: bytes outside printable ASCII as \xNN. */
static const char *
show(const char *s, size_t len)
{
	static char	 out[4][160];
	static int	 next;
	char		*o = out[next++ % 4];
	size_t		 i, n = 0;

	for (i = 0; i < len && n < sizeof out[0] - 8; i++) {
		unsigned char c = s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			o[n++] = c;
		else
			n += snprintf(o + n, sizeof out[0] - n, "\\x%02x", c);
	}
	if (i < len)
		n += snprintf(o + n, sizeof out[0] - n, "...");
	o[n] = '\0';
	return o;
}

/* One case: jscan and jansson both accept (want 1) or both reject (want 0), alike. */
static void
accepts(const char *s, size_t len, int want)
{
	json_error_t	 err;
	json_t		*a, *b;
	char		*cause = NULL;

	a = jscan_parse(s, len, DEPTH, NULL, &cause);
	b = json_loadb(s, len, JSON_REJECT_DUPLICATES, &err);
	if (!ok((a != NULL) == want && (b != NULL) == want, "%s %s",
	    want ? "accepts" : "rejects", show(s, len)))
		printf("#   jscan: %s\n#   jansson: %s\n", a != NULL ? "ok" : cause,
		    b != NULL ? "ok" : err.text);
	else if (a == NULL && (cause == NULL || strncmp(cause, "invalid JSON", 12) != 0))
		ok(0, "%s: cause %s", show(s, len), cause != NULL ? cause : "(null)");
	else if (a != NULL)
		ok(jscan_ref_same(a, b), "%s: the same tree as jansson", show(s, len));
	free(cause);
	json_decref(a);
	json_decref(b);
}

/* The one value of a one-item array, as jscan reads it (NULL if refused). */
static json_t *
item(const char *s)
{
	json_t	*a;
	json_t	*v;
	char	*cause = NULL;

	if ((a = jscan_parse(s, strlen(s), DEPTH, NULL, &cause)) == NULL) {
		printf("#   %s: %s\n", s, cause);
		free(cause);
		return NULL;
	}
	v = json_incref(json_array_get(a, 0));
	json_decref(a);
	return v;
}

static void
test_grammar(void)
{
	char	*big, s[64];
	size_t	 i, n;

	/* structure and whitespace */
	accepts(LIT("{}"), 1);
	accepts(LIT("[]"), 1);
	accepts(LIT(" \t\r\n[ \t\r\n1 \t\r\n, 2 ]\r\n"), 1);
	accepts(LIT("{\"a\":{\"b\":[true,false,null,{},[]]},\"c\":\"\"}"), 1);
	accepts(LIT("[[[[[[[[[[]]]]]]]]]]"), 1);
	accepts(LIT(""), 0);
	accepts(LIT(" \n "), 0);
	accepts(LIT("1"), 0);
	accepts(LIT("\"a\""), 0);
	accepts(LIT("true"), 0);
	accepts(LIT("null"), 0);
	accepts(LIT("["), 0);
	accepts(LIT("]"), 0);
	accepts(LIT("{"), 0);
	accepts(LIT("[}"), 0);
	accepts(LIT("{]"), 0);
	accepts(LIT("[1,]"), 0);
	accepts(LIT("[,1]"), 0);
	accepts(LIT("[1,,2]"), 0);
	accepts(LIT("[1 2]"), 0);
	accepts(LIT("{\"a\":1,}"), 0);
	accepts(LIT("{,}"), 0);
	accepts(LIT("{\"a\"}"), 0);
	accepts(LIT("{\"a\" 1}"), 0);
	accepts(LIT("{\"a\"::1}"), 0);
	accepts(LIT("{1:2}"), 0);
	accepts(LIT("{'a':1}"), 0);
	accepts(LIT("{a:1}"), 0);
	accepts(LIT("[] x"), 0);
	accepts(LIT("[][]"), 0);
	accepts(LIT("[]\0"), 0);
	accepts(LIT("[\0]"), 0);
	accepts(LIT("[]\f"), 0);
	accepts(LIT("[\v1]"), 0);
	accepts(LIT("\xc2\xa0[]"), 0);		/* U+00A0 is not whitespace */
	accepts(LIT("\xef\xbb\xbf[]"), 0);	/* nor is a byte order mark */
	accepts(LIT("[1]/**/"), 0);

	/* jansson's lexer drops one NUL right after a number or a literal (fuzz-jscan) */
	accepts(LIT("[1\0]"), 1);
	accepts(LIT("[-0\0,1.5\0,1e5\0]"), 1);
	accepts(LIT("{\"a\":true\0,\"b\":false\0,\"c\":null\0}"), 1);
	accepts(LIT("[1\0\0]"), 0);
	accepts(LIT("[1 \0]"), 0);
	accepts(LIT("[\"a\"\0]"), 0);
	accepts(LIT("[[]\0]"), 0);
	accepts(LIT("[1]\0"), 0);
	accepts(LIT("[tr\0ue]"), 0);
	accepts(LIT("[-\0]"), 0);
	accepts(LIT("[1.\0]"), 0);

	/* literals */
	accepts(LIT("[true,false,null]"), 1);
	accepts(LIT("[tru]"), 0);
	accepts(LIT("[truex]"), 0);
	accepts(LIT("[true1]"), 0);
	accepts(LIT("[nul]"), 0);
	accepts(LIT("[True]"), 0);
	accepts(LIT("[NULL]"), 0);
	accepts(LIT("[nan]"), 0);
	accepts(LIT("[NaN]"), 0);
	accepts(LIT("[Infinity]"), 0);
	accepts(LIT("[-Infinity]"), 0);
	accepts(LIT("[undefined]"), 0);

	/* numbers */
	accepts(LIT("[0,-0,1,-1,10,1234567890]"), 1);
	accepts(LIT("[0.0,-0.0,0.5,1.25e3,1E3,1e+3,1e-3,1E-0,0e0,-0e-0]"), 1);
	accepts(LIT("[9223372036854775807,-9223372036854775808]"), 1);
	accepts(LIT("[9223372036854775808]"), 0);
	accepts(LIT("[-9223372036854775809]"), 0);
	accepts(LIT("[99999999999999999999]"), 0);
	accepts(LIT("[99999999999999999999.0]"), 1);
	accepts(LIT("[99999999999999999999e0]"), 1);
	accepts(LIT("[1e308,1.7976931348623157e308,1.7976931348623158e308]"), 1);
	accepts(LIT("[1.7976931348623159e308]"), 0);
	accepts(LIT("[1e309]"), 0);
	accepts(LIT("[-1e309]"), 0);
	accepts(LIT("[1e400]"), 0);
	accepts(LIT("[1e99999999999999999999]"), 0);
	accepts(LIT("[1e-400,-1e-400,4.9e-324,2e-324,1e-99999999999999999999]"), 1);
	accepts(LIT("[0.000000000000000000000000000000000000000000001e353]"), 1);
	accepts(LIT("[0.000000000000000000000000000000000000000000001e355]"), 0);
	accepts(LIT("[01]"), 0);
	accepts(LIT("[-01]"), 0);
	accepts(LIT("[00]"), 0);
	accepts(LIT("[0.]"), 0);
	accepts(LIT("[.5]"), 0);
	accepts(LIT("[-.5]"), 0);
	accepts(LIT("[+1]"), 0);
	accepts(LIT("[1.]"), 0);
	accepts(LIT("[1.e5]"), 0);
	accepts(LIT("[1e]"), 0);
	accepts(LIT("[1e+]"), 0);
	accepts(LIT("[1e+-1]"), 0);
	accepts(LIT("[1E5.0]"), 0);
	accepts(LIT("[-]"), 0);
	accepts(LIT("[--1]"), 0);
	accepts(LIT("[- 1]"), 0);
	accepts(LIT("[0x10]"), 0);
	accepts(LIT("[1_000]"), 0);
	accepts(LIT("[1"), 0);
	accepts(LIT("[1."), 0);
	accepts(LIT("[1e"), 0);
	accepts(LIT("[-"), 0);

	/* a real longer than any stack buffer, below and above the overflow */
	big = xmalloc(400);
	memset(big, '9', 400);
	big[0] = '[';
	memcpy(big + 306, ".5]", 3);
	accepts(big, 309, 1);
	memcpy(big + 306, "9999.5]", 7);
	accepts(big, 313, 0);		/* 10^309 - 0.5 */
	memcpy(big + 306, "9999e-1]", 8);
	accepts(big, 314, 1);
	memcpy(big + 306, "9999]", 5);
	accepts(big, 311, 0);		/* the same digits as an integer */
	free(big);

	/* strings and escapes */
	accepts(LIT("[\"\",\"a\",\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]"), 1);
	accepts(LIT("[\"\\u0041\\u00e9\\u20AC\\uffff\\u0001\\ud83d\\ude00\\uDBFF\\uDFFF\"]"), 1);
	accepts(LIT("[\"\x7f\",\" ~\"]"), 1);
	accepts(LIT("[\"abc"), 0);
	accepts(LIT("[\"abc\\"), 0);
	accepts(LIT("[\"abc\\\"]"), 0);
	accepts(LIT("[\"a\tb\"]"), 0);
	accepts(LIT("[\"a\nb\"]"), 0);
	accepts(LIT("[\"a\rb\"]"), 0);
	accepts(LIT("[\"\x1f\"]"), 0);
	accepts(LIT("[\"\x01\"]"), 0);
	accepts(LIT("[\"a\0b\"]"), 0);
	accepts(LIT("[\"\\x41\"]"), 0);
	accepts(LIT("[\"\\a\"]"), 0);
	accepts(LIT("[\"\\'\"]"), 0);
	accepts(LIT("[\"\\U0041\"]"), 0);
	accepts(LIT("[\"\\u41\"]"), 0);
	accepts(LIT("[\"\\u004\"]"), 0);
	accepts(LIT("[\"\\u00g1\"]"), 0);
	accepts(LIT("[\"\\u"), 0);
	accepts(LIT("[\"\\u0000\"]"), 0);
	accepts(LIT("[\"a\\u0000b\"]"), 0);
	accepts(LIT("{\"\\u0000\":1}"), 0);
	accepts(LIT("{\"a\\u0000\":1}"), 0);
	accepts(LIT("[\"\\ud800\"]"), 0);
	accepts(LIT("[\"\\udbff\"]"), 0);
	accepts(LIT("[\"\\udc00\"]"), 0);
	accepts(LIT("[\"\\udfff\"]"), 0);
	accepts(LIT("[\"\\ude00\\ud83d\"]"), 0);
	accepts(LIT("[\"\\ud800\\ud800\"]"), 0);
	accepts(LIT("[\"\\ud800\\u0041\"]"), 0);
	accepts(LIT("[\"\\ud800x\"]"), 0);
	accepts(LIT("[\"\\ud800\\n\"]"), 0);
	accepts(LIT("[\"\\ud800\\\"]"), 0);
	accepts(LIT("[\"\\ud800\\u\"]"), 0);
	accepts(LIT("[\"\\ud800\\udc0\"]"), 0);
	accepts(LIT("[\"\\ud800\\udc00\\udc00\"]"), 0);
	accepts(LIT("{\"\\ud800\":1}"), 0);

	/* UTF-8: the edges of each length, and each way to get it wrong */
	accepts(LIT("[\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\"]"), 1);
	accepts(LIT("[\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\xf3\xbf\xbf\xbf\"]"), 1);
	accepts(LIT("{\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac\"}"), 1);
	accepts(LIT("[\"\x80\"]"), 0);
	accepts(LIT("[\"\xbf\"]"), 0);
	accepts(LIT("[\"\xc0\x80\"]"), 0);
	accepts(LIT("[\"\xc1\xbf\"]"), 0);
	accepts(LIT("[\"\xc2\"]"), 0);
	accepts(LIT("[\"\xc2\x41\"]"), 0);
	accepts(LIT("[\"\xc2\xc0\"]"), 0);
	accepts(LIT("[\"\xe0\x80\x80\"]"), 0);
	accepts(LIT("[\"\xe0\x9f\xbf\"]"), 0);
	accepts(LIT("[\"\xe1\x80\"]"), 0);
	accepts(LIT("[\"\xed\xa0\x80\"]"), 0);
	accepts(LIT("[\"\xed\xbf\xbf\"]"), 0);
	accepts(LIT("[\"\xed\xa0\xbd\xed\xb8\x80\"]"), 0);	/* CESU-8 of U+1F600 */
	accepts(LIT("[\"\xf0\x80\x80\x80\"]"), 0);
	accepts(LIT("[\"\xf0\x8f\xbf\xbf\"]"), 0);
	accepts(LIT("[\"\xf4\x90\x80\x80\"]"), 0);
	accepts(LIT("[\"\xf5\x80\x80\x80\"]"), 0);
	accepts(LIT("[\"\xf7\xbf\xbf\xbf\"]"), 0);
	accepts(LIT("[\"\xf8\x88\x80\x80\x80\"]"), 0);
	accepts(LIT("[\"\xf0\x90\x80\"]"), 0);
	accepts(LIT("[\"\xfe\"]"), 0);
	accepts(LIT("[\"\xff\"]"), 0);
	accepts(LIT("[\"abcdefgh\xff\"]"), 0);
	accepts(LIT("[\"abcdefghijklmnopqrstuvwxyz\xc3\""), 0);
	accepts(LIT("[\xc3\xa9]"), 0);
	accepts(LIT("[1]\xc3\xa9"), 0);
	accepts(LIT("{\"\xff\":1}"), 0);

	/* long strings, so the eight-byte steps meet every kind of byte at every offset */
	for (i = 0; i < 9; i++) {
		memcpy(s, "[\"", 2);
		memset(s + 2, 'x', i);
		n = 2 + i;
		memcpy(s + n, "\xc3\xa9\\n\"]", 6);
		accepts(s, n + 6, 1);
		s[n] = '\x1f';
		accepts(s, n + 6, 0);
		s[n] = '\x80';
		accepts(s, n + 6, 0);
	}
}

static void
test_duplicates(void)
{
	struct buf	 b;
	size_t		 n, i, k, dup;
	int		 good;
	char		*cause;
	json_t		*j;

	accepts(LIT("{\"a\":1,\"b\":2,\"A\":3,\"aa\":4,\"\":5}"), 1);
	accepts(LIT("{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":2}}"), 1);
	accepts(LIT("[{\"a\":1},{\"a\":1}]"), 1);
	accepts(LIT("{\"a\":1,\"a\":2}"), 0);
	accepts(LIT("{\"a\":1,\"a\":1}"), 0);
	accepts(LIT("{\"\":1,\"\":2}"), 0);
	accepts(LIT("{\"a\":1,\"\\u0061\":2}"), 0);
	accepts(LIT("{\"\\u0061\":1,\"a\":2}"), 0);
	accepts(LIT("{\"\\u0061\":1,\"\\u0061\":2}"), 0);
	accepts(LIT("{\"/\":1,\"\\/\":2}"), 0);
	accepts(LIT("{\"\xc3\xa9\":1,\"\\u00e9\":2}"), 0);
	accepts(LIT("{\"\xc3\xa9\":1,\"\\u00E9\":2}"), 0);
	accepts(LIT("{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude00\":2}"), 0);
	accepts(LIT("{\"a\\nb\":1,\"a\\u000ab\":2}"), 0);
	accepts(LIT("{\"a\\nb\":1,\"a\\\\nb\":2}"), 1);
	accepts(LIT("{\"x\":{\"a\":1,\"b\":{},\"a\":2}}"), 0);
	accepts(LIT("{\"x\":{\"a\":1},\"y\":2,\"x\":3}"), 0);
	accepts(LIT("{\"a\":1,\"a\":[1,]}"), 0);

	/*
	 * Objects of every size around the switch from comparing keys in turn to hashing
	 * them, with the last key repeating each earlier one, plainly and escaped (either one).
	 */
	for (n = 1; n <= 40; n++) {
		good = 1;
		for (dup = 0; dup <= n; dup++) {
			for (i = 0; i < 3; i++) {
				buf_init(&b, 0);
				buf_adds(&b, "{");
				for (k = 0; k < n; k++)
					buf_addf(&b, "%s\"%sey%zu\":%zu", k ? "," : "",
					    i == 2 ? "\\u006B" : "k", k, k);
				if (dup < n)	/* \u006B is the k */
					buf_addf(&b, ",\"%sey%zu\":0", i == 1 ? "\\u006B" : "k",
					    dup);
				buf_adds(&b, "}");
				cause = NULL;
				j = jscan_parse(b.data, b.len, DEPTH, NULL, &cause);
				if ((j != NULL) != (dup == n)) {
					good = 0;
					printf("#   %s: %s\n", buf_cstr(&b),
					    j != NULL ? "accepted" : cause);
				}
				json_decref(j);
				free(cause);
				buf_free(&b);
			}
		}
		ok(good, "%zu keys: every repeated key refused, plain and escaped", n);
	}

	/* many keys: one object of 20000, siblings and nests of large objects */
	buf_init(&b, 0);
	buf_adds(&b, "[");
	for (i = 0; i < 3; i++) {
		buf_adds(&b, i ? ",{" : "{");
		for (n = 0; n < (i == 1 ? 20000 : 100); n++)
			buf_addf(&b, "%s\"k%zu\":{\"k%zu\":%zu,\"x\":[]}", n ? "," : "", n, n, n);
		buf_adds(&b, "}");
	}
	buf_adds(&b, "]");
	accepts(b.data, b.len, 1);
	b.len--;
	buf_adds(&b, ",{");
	for (n = 0; n < 50; n++)
		buf_addf(&b, "\"k%zu\":1,", n);
	buf_adds(&b, "\"k3\":2}]");
	accepts(b.data, b.len, 0);
	buf_free(&b);
}

static void
test_values(void)
{
	json_t	*v;
	double	 d;

	v = item("[-0]");
	ok(json_is_integer(v) && json_integer_value(v) == 0, "-0 is the integer 0");
	json_decref(v);
	v = item("[-0.0]");
	d = json_real_value(v);
	ok(json_is_real(v) && d == 0 && signbit(d), "-0.0 is the real -0.0");
	json_decref(v);
	v = item("[1e5]");
	ok(json_is_real(v) && json_real_value(v) == 100000.0, "1e5 is a real");
	json_decref(v);
	v = item("[1E+2]");
	ok(json_is_real(v) && json_real_value(v) == 100.0, "1E+2 is a real");
	json_decref(v);
	v = item("[1e-400]");
	ok(json_is_real(v) && json_real_value(v) == 0, "1e-400 underflows to 0.0");
	json_decref(v);
	v = item("[-9223372036854775808]");
	ok(json_is_integer(v) && json_integer_value(v) == -9223372036854775807LL - 1,
	    "the least json_int_t");
	json_decref(v);
	v = item("[0.1]");
	ok(json_is_real(v) && json_real_value(v) == 0.1, "0.1 as strtod reads it");
	json_decref(v);
	v = item("[\"\\u00e9\\ud83d\\ude00\\/\"]");
	ok(json_is_string(v) && json_string_length(v) == 7 &&
	    memcmp(json_string_value(v), "\xc3\xa9\xf0\x9f\x98\x80/", 7) == 0,
	    "escapes decode to UTF-8");
	json_decref(v);
	v = item("[true]");
	ok(v == json_true(), "true");
	json_decref(v);
}

static void
test_errors(void)
{
	json_t	*j;
	char	*cause, deep[5000], *keep[] = { "a", NULL };
	int	 i;

	cause = NULL;
	j = jscan_parse(LIT("[1,]"), DEPTH, NULL, &cause);
	ok(j == NULL && cause != NULL && strncmp(cause, "invalid JSON", 12) == 0 &&
	    strstr(cause, "offset 3") != NULL, "the cause says invalid JSON and where: %s",
	    cause);
	free(cause);
	cause = NULL;
	j = jscan_parse(LIT("{\"a\":1,\"a\":2}"), DEPTH, NULL, &cause);
	ok(j == NULL && cause != NULL && strncmp(cause, "invalid JSON at offset 7:", 25) == 0,
	    "a duplicate is reported at its key: %s", cause);
	free(cause);
	cause = NULL;
	j = jscan_parse(NULL, 0, DEPTH, NULL, &cause);
	ok(j == NULL && cause != NULL && strncmp(cause, "invalid JSON", 12) == 0,
	    "no input: %s", cause);
	free(cause);
	j = jscan_parse(LIT("[x]"), DEPTH, NULL, NULL);
	ok(j == NULL, "refused without a cause pointer");

	cause = NULL;
	j = jscan_parse(LIT("[[[]]]"), 3, NULL, &cause);
	ok(j != NULL && cause == NULL, "3 levels within a limit of 3");
	json_decref(j);
	j = jscan_parse(LIT("[[[{}]]]"), 3, NULL, &cause);
	is_str(cause, "JSON nested deeper than 3 levels", "4 levels past a limit of 3");
	free(cause);
	cause = NULL;
	j = jscan_parse(LIT("{\"a\":1,\"b\":[[[[[1]]]]]}"), 3, (const char *const *)keep,
	    &cause);
	is_str(cause, "JSON nested deeper than 3 levels", "depth counts in skipped parts");
	free(cause);
	cause = NULL;
	j = jscan_parse(LIT("[[[1, \"[[[[\"]]]"), 3, NULL, &cause);
	ok(j != NULL, "brackets in strings do not nest");
	json_decref(j);

	/* jansson's own limit: 2048 open values, a scalar counting as one */
	for (i = 0; i < 2048; i++) {
		deep[i] = '[';
		deep[2048 + i] = ']';
	}
	j = jscan_parse(deep, 4096, 5000, NULL, &cause);
	ok(j != NULL, "2048 nested arrays, as jansson");
	json_decref(j);
	memmove(deep + 2049, deep + 2048, 2048);
	deep[2048] = '1';
	j = jscan_parse(deep, 4097, 5000, NULL, &cause);
	ok(j == NULL && strncmp(cause, "invalid JSON", 12) == 0,
	    "a scalar inside them is refused, as jansson: %s", cause);
	free(cause);
	cause = NULL;
	j = jscan_parse(deep, 4097, 2047, NULL, &cause);
	is_str(cause, "JSON nested deeper than 2047 levels", "our limit first");
	free(cause);
}

/* Parses doc keeping keep, and compares with want (JSON text). */
static void
keeps(const char *doc, const char *const *keep, const char *want, const char *name)
{
	json_t		*j, *w;
	json_error_t	 err;
	char		*cause = NULL, *got;

	j = jscan_parse(doc, strlen(doc), DEPTH, keep, &cause);
	w = json_loads(want, JSON_DECODE_ANY, &err);
	if (w == NULL) {
		ok(0, "%s: bad test: %s", name, err.text);
		return;
	}
	got = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : cause;
	if (!ok(j != NULL && jscan_ref_same(j, w), "%s", name))
		printf("#   got:  %s\n#   want: %s\n", got, want);
	if (j != NULL)
		free(got);
	free(cause);
	json_decref(j);
	json_decref(w);
}

/* s, kept by keep, is refused: cause set (starting with prefix, unless NULL). */
static void
refused(const char *s, size_t n, const char **keep, const char *prefix, const char *what)
{
	char	*cause = NULL;
	json_t	*j = jscan_parse(s, n, DEPTH, keep, &cause);

	ok(j == NULL && cause != NULL &&
	    (prefix == NULL || strncmp(cause, prefix, strlen(prefix)) == 0), "%s: %s", what,
	    cause);
	json_decref(j);
	free(cause);
}

static void
test_keep(void)
{
	const char	*doc = "{\"action\":\"created\",\"issue\":{\"number\":7,\"title\":\"t\","
	    "\"user\":{\"login\":\"u\",\"id\":1}},\"comment\":{\"id\":9,\"user\":{\"login\":\"c\"},"
	    "\"body\":\"b\",\"\\u0061\":1.5},\"repository\":{\"full_name\":\"o/r\"},"
	    "\"labels\":[{\"name\":\"x\"}],\"n\":null,\"s\":\"str\",\"\\u0062\":[-0,1e2]}";
	const char	*k1[] = { "action", NULL };
	const char	*k2[] = { "issue.number", "comment.user", NULL };
	const char	*k3[] = { "issue.missing", "nothere.x", NULL };
	const char	*k4[] = { "s.x", "n.x", "labels.0.name", "action.x", NULL };
	const char	*k5[] = { "issue", "issue.number", NULL };
	const char	*k6[] = { "issue.user.id", "issue", "issue.user", NULL };
	const char	*k7[] = { "action", "action", "issue.number", "issue.number", NULL };
	const char	*k8[] = { NULL };
	const char	*k9[] = { "", NULL };
	const char	*k10[] = { "a..b", ".a", "action.", ".", "..", "a.", NULL };
	const char	*k11[] = { "b", "comment.a", "issue.user.login", NULL };
	const char	*k12[] = { "comment.body", "comment.id", NULL };
	const char	*k13[] = { "labels", "n", NULL };
	const char	*k14[] = { "issue.number.x", "issue.title", NULL };
	const char	*k15[] = { "x", NULL };
	json_t		*j;
	char		*cause = NULL;
	const char	*key;
	void		*it;

	keeps(doc, k1, "{\"action\":\"created\"}", "one top-level member");
	keeps(doc, k2, "{\"issue\":{\"number\":7},\"comment\":{\"user\":{\"login\":\"c\"}}}",
	    "nested paths keep whole values and only the members on the way");
	keeps(doc, k3, "{\"issue\":{}}", "missing paths: the objects on the way stay, empty");
	keeps(doc, k4, "{}", "paths through a non-object or an array keep nothing");
	keeps(doc, k5, "{\"issue\":{\"number\":7,\"title\":\"t\",\"user\":{\"login\":\"u\","
	    "\"id\":1}}}", "\"issue\" and \"issue.number\": the whole issue");
	keeps(doc, k6, "{\"issue\":{\"number\":7,\"title\":\"t\",\"user\":{\"login\":\"u\","
	    "\"id\":1}}}", "the shorter path wins whatever the order");
	keeps(doc, k7, "{\"action\":\"created\",\"issue\":{\"number\":7}}",
	    "repeated paths");
	keeps(doc, k8, "{}", "an empty keep list keeps an empty object");
	keeps(doc, k9, doc, "\"\" keeps everything");
	keeps(doc, NULL, doc, "NULL keeps everything");
	keeps(doc, k10, "{}", "paths with empty segments name nothing");
	keeps(doc, k11, "{\"b\":[0,100.0],\"comment\":{\"a\":1.5},\"issue\":{\"user\":"
	    "{\"login\":\"u\"}}}", "escaped keys are matched decoded");
	keeps(doc, k13, "{\"labels\":[{\"name\":\"x\"}],\"n\":null}", "arrays and null kept");
	keeps(doc, k14, "{\"issue\":{\"title\":\"t\"}}", "a scalar on the way is left out");
	keeps("[1,{\"x\":2}]", k15, "[]", "a top-level array with a keep list is empty");
	keeps("[1,{\"x\":2}]", k9, "[1,{\"x\":2}]", "... unless everything is kept");
	keeps("{\"x\":[1,{\"y\":2}]}", k15, "{\"x\":[1,{\"y\":2}]}", "a kept array whole");

	/* document order */
	j = jscan_parse(doc, strlen(doc), DEPTH, k12, &cause);
	it = json_object_iter(json_object_get(j, "comment"));
	key = it != NULL ? json_object_iter_key(it) : NULL;
	is_str(key, "id", "members come in document order (1)");
	it = it != NULL ? json_object_iter_next(json_object_get(j, "comment"), it) : NULL;
	key = it != NULL ? json_object_iter_key(it) : NULL;
	is_str(key, "body", "members come in document order (2)");
	json_decref(j);

	/* the skipped parts are still checked */
	refused(LIT("{\"action\":\"x\",\"other\":[1,]}"), k1, "invalid JSON",
	    "bad syntax in a skipped value");
	refused(LIT("{\"action\":\"x\",\"o\":{\"a\":1,\"\\u0061\":2}}"), k1, NULL,
	    "a duplicate in a skipped object");
	refused(LIT("{\"action\":\"x\",\"o\":\"\xed\xa0\x80\"}"), k1, NULL,
	    "a UTF-8 surrogate in a skipped string");
	refused(LIT("{\"action\":\"x\",\"o\":[1e999]}"), k1, NULL,
	    "an overflowing real in a skipped array");
	refused(LIT("{\"action\":\"x\",\"o\":[123456789012345678901]}"), k1, NULL,
	    "a too big integer in a skipped array");
}

/* Every example payload: the same tree as jansson, and the typical keep list's part of it. */
static void
test_examples(void)
{
	const char	*srcdir = getenv("SPUR_SRCDIR");
	char		*path, *data, *cause = NULL, *text;
	size_t		 len, i, j, n = 0, bad = 0, badkeep = 0;
	json_t		*all, *def, *ex, *a, *b, *s, *p;
	json_error_t	 err;
	size_t		 flags[] = { JSON_COMPACT, JSON_INDENT(2) | JSON_ENSURE_ASCII,
			    JSON_INDENT(1) | JSON_SORT_KEYS };

	if (srcdir == NULL || *srcdir == '\0') {
		printf("ok %d # SKIP SPUR_SRCDIR is not set (make check sets it)\n", ++tap_n);
		return;
	}
	path = xprintf("%s/%s", srcdir, EXAMPLES);
	if (read_file(path, 64 << 20, &data, &len, &cause) != 0) {
		printf("ok %d # SKIP %s: run npm ci in tests/ (%s)\n", ++tap_n, EXAMPLES,
		    cause);
		free(cause);
		free(path);
		return;
	}
	free(path);
	all = jscan_parse(data, len, DEPTH, NULL, &cause);
	b = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err);
	ok(all != NULL && b != NULL && jscan_ref_same(all, b), "index.json itself (%zu bytes)", len);
	json_decref(b);
	free(data);
	if (all == NULL) {
		printf("#   %s\n", cause);
		free(cause);
		return;
	}
	json_array_foreach(all, i, def) {
		json_array_foreach(json_object_get(def, "examples"), j, ex) {
			text = json_dumps(ex, flags[n % SPUR_ARRLEN(flags)]);
			a = jscan_parse(text, strlen(text), DEPTH, NULL, &cause);
			b = json_loads(text, JSON_REJECT_DUPLICATES, &err);
			if (a == NULL || b == NULL || !jscan_ref_same(a, b)) {
				printf("#   %s[%zu]: %s\n", json_string_value(
				    json_object_get(def, "name")), j, a ? "differs" : cause);
				bad++;
			}
			s = jscan_parse(text, strlen(text), DEPTH, typical, &cause);
			p = jscan_ref_project(b, typical);
			if (s == NULL || !jscan_ref_same(s, p)) {
				printf("#   %s[%zu]: kept part differs\n", json_string_value(
				    json_object_get(def, "name")), j);
				badkeep++;
			}
			json_decref(a);
			json_decref(b);
			json_decref(s);
			json_decref(p);
			free(text);
			n++;
		}
	}
	ok(n > 300 && bad == 0, "%zu example payloads: the same tree as jansson", n);
	ok(n > 300 && badkeep == 0, "%zu example payloads: the typical keep list", n);
	json_decref(all);
}

int
main(void)
{
	test_grammar();
	test_duplicates();
	test_values();
	test_errors();
	test_keep();
	test_examples();
	return tap_done();
}
