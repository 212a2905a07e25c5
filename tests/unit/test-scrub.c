/* test-scrub.c: secret values cut out of text in every form a reader or a decoder could see them. */
#include "spur.h"
#include "conf.h"
#include "scrub.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define ZWSP	"\xe2\x80\x8b"		/* U+200B zero-width space */
#define RLO	"\xe2\x80\xae"		/* U+202E right-to-left override */
#define TAG_A	"\xf3\xa0\x81\x81"	/* U+E0041 tag latin capital A */
#define SHY	"\xc2\xad"		/* U+00AD soft hyphen */
#define WJ	"\xe2\x81\xa0"		/* U+2060 word joiner */
#define IGN	"\xef\xbf\xb0"		/* U+FFF0, default-ignorable */

static struct secret s_token = { "env:T", "tok>>en?secret~~x", 17 };
static struct secret s_inner = { "env:I", "inner-secret-42", 15 };
static struct secret s_outer = { "env:O", "prefix-inner-secret-42-suffix", 29 };
static struct secret s_spaced = { "env:P", "p@ss word/+=&x", 14 };
static struct secret s_short = { "env:S", "abc", 3 };
static struct secret s_npm = { "env:N", "npm_token_value", 15 };
static const struct secret *secrets[] = {
	&s_token, &s_inner, &s_outer, &s_spaced, &s_short, &s_npm, NULL,
};
#define NSECRETS (SPUR_ARRLEN(secrets))

static void
scrubs(const char *in, const char *want, const char *name)
{
	char	*got = scrub_secrets(in, secrets, NSECRETS), *again;

	is_str(got, want, "%s", name);
	again = scrub_secrets(got, secrets, NSECRETS);
	is_str(again, got, "%s: scrubbing again changes nothing", name);
	free(again);
	free(got);
}

static void
test_untouched(void)
{
	/* Everything the normalized view changes, but no secret: kept byte for byte. */
	static const char *texts[] = {
		"",
		"plain text, nothing to hide",
		"crlf\r\nlone cr\rzero" ZWSP "width" RLO "bidi" TAG_A "tag <!-- comment --> "
		    "&amp; &#65; &#x41; &lt;b&gt; %41%42 invalid \xff\xfe utf-8 \x1b[31mred\x1b[0m "
		    "\x01 control abc abcd ab" ZWSP "c",
		"x tok>>en?secre y",	/* a prefix of a secret, not at an edge */
		"**bold** _it_ `code` [link](http://x/) <b>b</b> \\_ ~~s~~ <http://x|y>",
		"tok>>en" ZWSP "?secre t~~x",
	};
	char	*got;
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(texts); i++) {
		got = scrub_secrets(texts[i], secrets, NSECRETS);
		ok(got != NULL && strcmp(got, texts[i]) == 0, "text %zu without a secret is kept byte for byte", i);
		free(got);
	}
	ok(scrub_secrets(NULL, secrets, NSECRETS) == NULL, "NULL gives NULL");
	got = scrub_secrets("tok>>en?secret~~x", secrets, 0);
	is_str(got, "tok>>en?secret~~x", "no secrets configured: nothing replaced");
	free(got);
}

static void
test_written(void)
{
	scrubs("my token is tok>>en?secret~~x, ok", "my token is [secret], ok", "as written");
	scrubs("tok>>en?secret~~xtok>>en?secret~~x", "[secret][secret]", "twice in a row");
	scrubs("abc and abcabc stay", "abc and abcabc stay", "values under 4 bytes are left alone");
	scrubs("a prefix-inner-secret-42-suffix b", "a [secret] b",
	    "a secret inside another: the longer one goes whole");
	scrubs("a inner-secret-42 b", "a [secret] b", "the inner one alone");
	scrubs("p@ss word/+=&x", "[secret]", "a value with spaces and punctuation");
}

static void
test_encoded(void)
{
	scrubs("b64 dG9rPj5lbj9zZWNyZXR+fng= end", "b64 [secret] end", "base64, padded");
	scrubs("b64 dG9rPj5lbj9zZWNyZXR+fng end", "b64 [secret] end", "base64, unpadded");
	scrubs("b64 dG9rPj5lbj9zZWNyZXR-fng= end", "b64 [secret] end", "base64url, padded");
	scrubs("b64 dG9rPj5lbj9zZWNyZXR-fng end", "b64 [secret] end", "base64url, unpadded");
	scrubs("eHRvaz4+ZW4/c2VjcmV0fn54eQ==", "eH[secret]eQ==", "base64 of a longer text, offset 1");
	scrubs("eHRvaz4-ZW4_c2VjcmV0fn54eQ==", "eH[secret]eQ==", "base64url of a longer text, offset 1");
	scrubs("eHl0b2s+PmVuP3NlY3JldH5+eHo=", "eHl[secret]Ho=", "base64 of a longer text, offset 2");
	scrubs("hex 746f6b3e3e656e3f7365637265747e7e78.", "hex [secret].", "hex, lower case");
	scrubs("hex 746F6B3E3E656E3F7365637265747E7E78.", "hex [secret].", "hex, upper case");
	scrubs("hex 746f6B3E3e656e3F7365637265747e7E78.", "hex [secret].", "hex, mixed case");
	scrubs("?t=tok%3E%3Een%3Fsecret~~x&u=1", "?t=[secret]&u=1", "URL-quoted");
	scrubs("%74%6f%6b%3e%3e%65%6e%3f%73%65%63%72%65%74%7E%7E%78", "[secret]",
	    "every byte percent-encoded");
	scrubs("p%40ss+word%2F%2B%3D%26x", "[secret]", "form-encoded (+ for a space)");
}

static void
test_disguised(void)
{
	scrubs("tok>>en?" ZWSP "secret~~x", "[secret]", "a zero-width space inside");
	scrubs("to" RLO "k>>en?sec" WJ "ret~~x", "[secret]", "bidi override and word joiner inside");
	scrubs("tok" TAG_A ">>en" SHY "?secret" IGN "~~x", "[secret]", "tag, soft hyphen, U+FFF0 inside");
	scrubs("tok>>en?<!-- -->secret~~x", "[secret]", "split by an HTML comment");
	scrubs("tok>>en?<!---->secret~~x", "[secret]", "split by an empty HTML comment");
	scrubs("&#x74;ok&gt;&gt;en&quest;secret~~x", "[secret]", "hex entity and named entities");
	scrubs("&#116;ok>>en?secret&#126;&#126;x", "[secret]", "decimal entities");
	scrubs("&#116ok>>en?secret~~x", "[secret]", "a decimal entity without its ';'");
	scrubs("p@ss word/+=&amp;x", "[secret]", "&amp; for the ampersand");
	scrubs("tok>>en?se&#8203;cret~~x", "[secret]", "an entity standing for a zero-width space");
	scrubs("tok>>en?se&#x3C;!-- -->cret~~x", "[secret]",
	    "an escaped comment: the view errs towards finding");
	scrubs("tok\x1b>>en?secret~~x", "[secret]", "a control character inside");
	/* The view is what is posted when only it holds a secret. */
	scrubs("see: a" ZWSP "b &lt;i&gt; tok>>en" ZWSP "?secret~~x <!-- x --> !",
	    "see: ab <i> [secret]  !", "found only in the normalized view: the normalized text, scrubbed");
	scrubs("tok>>en?" ZWSP "secret~~x and 746f6b3e3e656e3f7365637265747e7e78",
	    "[secret] and [secret]", "a disguised and an encoded one together");
	scrubs("dG9rPj5lbj9zZWNy" ZWSP "ZXR+fng=", "[secret]", "base64 split by a zero-width space");
}

/* Markup a destination renders as nothing between a value's characters (issue 34). */
static void
test_markup(void)
{
	scrubs("a npm\\_token\\_value b", "a [secret] b", "markdown escapes");
	scrubs("a npm_tok<b></b>en_value b", "a [secret] b", "split by an empty <b></b>");
	scrubs("a npm_to<wbr>ken_value b", "a [secret] b", "split by <wbr>");
	scrubs("a <span>npm_tok</span><span>en_value</span> b", "a <span>[secret]</span> b",
	    "two <span> halves");
	scrubs("a npm_tok**en**_value b", "a [secret] b", "** emphasis inside");
	scrubs("a **npm_tok**en_value b", "a **[secret] b", "** emphasis around a half");
	scrubs("a `npm_tok``en_value` b", "a `[secret]` b", "two code spans");
	scrubs("a [npm_tok](https://x.example/a)[en_value](https://x.example/b) b",
	    "a [[secret]](https://x.example/b) b", "link-text split");
	scrubs("a <https://x.example/a|npm_tok><https://x.example/b|en_value> b",
	    "a <https://x.example/a|[secret]> b", "Slack link-text split");
	scrubs("a *npm_tok*~en_value~ b", "a *[secret]~ b", "Slack bold and strike");
	scrubs("a tok>>en?<i>secret</i>~~x b", "a [secret] b", "a value with > and ~ and a tag");
	scrubs("a npm_tok&lt;b&gt;en_value b", "a [secret] b", "a tag written as entities");
}

/* Half a value at a text's edge: the other half may be in the run's next message. */
static void
test_edges(void)
{
	scrubs("the value starts npm_toke", "the value starts [secret]", "the first half at the end");
	scrubs("ken_value, said the agent", "[secret], said the agent", "the second half at the start");
	scrubs("ends npm_toke  \n", "ends [secret]  \n", "trailing whitespace kept");
	scrubs("ends npm_t", "ends npm_t", "less than half is left alone");
	scrubs("x npm_toke y", "x npm_toke y", "half a value inside a text is left alone");
}

static void
test_unseen(void)
{
	char	*got;

	got = scrub_unseen("a\x1b[31mb" ZWSP "c", strlen("a\x1b[31mb" ZWSP "c"), 1);
	is_str(got, "abc", "escapes: a terminal sequence goes whole");
	free(got);
	got = scrub_unseen("a\x1b[31mb" ZWSP "c", strlen("a\x1b[31mb" ZWSP "c"), 0);
	is_str(got, "a[31mbc", "no escapes: only the control character goes, as a browser shows it");
	free(got);
	got = scrub_unseen("x" IGN "\xf3\xa0\x82\x80" "y", 9, 1);
	is_str(got, "xy", "U+FFF0 and U+E0080 are default-ignorable");
	free(got);
}

int
main(void)
{
	test_untouched();
	test_written();
	test_encoded();
	test_disguised();
	test_markup();
	test_edges();
	test_unseen();
	return tap_done();
}
