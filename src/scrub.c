/* scrub.c: what a reader would not see (the prompt's cleaning), and secret values cut out of text a run controls. */
#include "spur.h"
#include "conf.h"
#include "scrub.h"
#include "secrets.h"
#include "serve.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SCRUB_SECRETS_MAX	256	/* of the config, looked for */
#define SCRUB_PASSES_MAX	8	/* rounds of entity decoding; deeper nesting is hostile */
#define SCRUB_NAME_MAX		32	/* letters of a named entity looked at */
#define SCRUB_CORE_MIN		8	/* shorter base64 cuts would match ordinary words */
#define SCRUB_MARK		"[secret]"
#define SCRUB_MARKUP_MAX	2048	/* bytes of one tag or link target skipped */
#define SCRUB_SKIPS_MAX		64	/* pieces of markup inside one value */

struct scrub_range {
	uint32_t	 lo;
	uint32_t	 hi;
};

/* Characters a reader does not see; "\t" "\n" "\r" are handled apart. */
static const struct scrub_range scrub_invisible_ranges[] = {
	{ 0x0000, 0x0008 }, { 0x000b, 0x000c }, { 0x000e, 0x001f },
	{ 0x007f, 0x009f },	/* DEL and C1 */
	{ 0x00ad, 0x00ad },	/* soft hyphen */
	{ 0x034f, 0x034f },	/* combining grapheme joiner */
	{ 0x061c, 0x061c },	/* Arabic letter mark */
	{ 0x115f, 0x1160 },	/* Hangul fillers */
	{ 0x17b4, 0x17b5 },	/* Khmer inherent vowels */
	{ 0x180b, 0x180f },	/* Mongolian variation selectors, vowel separator */
	{ 0x200b, 0x200f },	/* zero-width space, joiners, LRM, RLM */
	{ 0x202a, 0x202e },	/* bidi embeddings and overrides */
	{ 0x2060, 0x206f },	/* word joiner, invisible operators, bidi isolates */
	{ 0x3164, 0x3164 },	/* Hangul filler */
	{ 0xfe00, 0xfe0f },	/* variation selectors */
	{ 0xfeff, 0xfeff },	/* zero-width no-break space, BOM */
	{ 0xffa0, 0xffa0 },	/* halfwidth Hangul filler */
	{ 0xfff0, 0xfffb },	/* unassigned ignorables, interlinear annotation */
	{ 0x13430, 0x1343f },	/* Egyptian hieroglyph format controls */
	{ 0x1bca0, 0x1bca3 },	/* shorthand format controls */
	{ 0x1d173, 0x1d17a },	/* musical formatting */
	{ 0xe0000, 0xe0fff },	/* tag characters, variation selectors supplement, ignorables */
};

/*
 * Decodes one UTF-8 character, strictly (no overlongs, surrogates or values
 * past U+10FFFF). An invalid sequence gives U+FFFD and consumes its maximal
 * valid prefix, or one byte, as Unicode recommends.
 */
size_t
scrub_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned char	 c = s[0], lo = 0x80, hi = 0xbf;
	size_t		 need, i;
	uint32_t	 v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*cp = 0xfffd;
		return 1;
	}
	for (i = 1; i <= need; i++) {
		if (i >= len || s[i] < lo || s[i] > hi) {
			*cp = 0xfffd;
			return i;
		}
		v = (v << 6) | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = v;
	return need + 1;
}

static void
scrub_utf8_put(struct buf *b, uint32_t cp)
{
	char	 s[4];

	if (cp < 0x80) {
		buf_addc(b, (char)cp);
		return;
	}
	if (cp < 0x800) {
		s[0] = (char)(0xc0 | (cp >> 6));
		s[1] = (char)(0x80 | (cp & 0x3f));
		buf_add(b, s, 2);
	} else if (cp < 0x10000) {
		s[0] = (char)(0xe0 | (cp >> 12));
		s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[2] = (char)(0x80 | (cp & 0x3f));
		buf_add(b, s, 3);
	} else {
		s[0] = (char)(0xf0 | (cp >> 18));
		s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[3] = (char)(0x80 | (cp & 0x3f));
		buf_add(b, s, 4);
	}
}

static int
scrub_invisible(uint32_t cp)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(scrub_invisible_ranges); i++) {
		if (cp < scrub_invisible_ranges[i].lo)
			return 0;
		if (cp <= scrub_invisible_ranges[i].hi)
			return 1;
	}
	return 0;
}

/*
 * Where an HTML comment whose body starts at s[i] ends, as a browser sees it:
 * "<!-->" and "<!--->" close at once, else the first "-->" or "--!>" closes;
 * an unclosed comment runs to the end.
 */
static size_t
scrub_comment_end(const char *s, size_t len, size_t i)
{
	size_t	 k;

	if (i < len && s[i] == '>')
		return i + 1;
	if (i + 1 < len && s[i] == '-' && s[i + 1] == '>')
		return i + 2;
	for (k = i; k + 2 < len; k++) {
		if (s[k] != '-' || s[k + 1] != '-')
			continue;
		if (s[k + 2] == '>')
			return k + 3;
		if (k + 3 < len && s[k + 2] == '!' && s[k + 3] == '>')
			return k + 4;
	}
	return len;
}

/*
 * Removes HTML comments. The opener is looked for at the end of what was
 * written so far, so text joined by removing one comment cannot form a new
 * opener that survives: no "<!--" is ever left in the output.
 */
static void
scrub_strip_comments(const char *s, size_t len, struct buf *out)
{
	size_t	 i = 0;

	while (i < len) {
		buf_addc(out, s[i++]);
		if (out->len >= 4 && memcmp(out->data + out->len - 4, "<!--", 4) == 0) {
			out->len -= 4;
			out->data[out->len] = '\0';
			i = scrub_comment_end(s, len, i);
		}
	}
}

/* Skips a CSI sequence's parameters, intermediates and final byte. */
static size_t
scrub_skip_csi(const unsigned char *s, size_t len, size_t i)
{
	while (i < len && s[i] >= 0x30 && s[i] <= 0x3f)
		i++;
	while (i < len && s[i] >= 0x20 && s[i] <= 0x2f)
		i++;
	if (i < len && s[i] >= 0x40 && s[i] <= 0x7e)
		i++;
	return i;
}

/* Skips a control string (OSC, DCS, ...) up to BEL, ESC \ or ST; unterminated: to the end. */
static size_t
scrub_skip_string(const unsigned char *s, size_t len, size_t i)
{
	for (; i < len; i++) {
		if (s[i] == 0x07)
			return i + 1;
		if (s[i] == 0x1b && i + 1 < len && s[i + 1] == '\\')
			return i + 2;
		if (s[i] == 0xc2 && i + 1 < len && s[i + 1] == 0x9c)
			return i + 2;
	}
	return len;
}

/* Skips what follows an ESC: a CSI, a control string, or a short escape. */
static size_t
scrub_skip_escape(const unsigned char *s, size_t len, size_t i)
{
	if (i >= len)
		return i;
	if (s[i] == '[')
		return scrub_skip_csi(s, len, i + 1);
	if (s[i] == ']' || s[i] == 'P' || s[i] == 'X' || s[i] == '^' || s[i] == '_')
		return scrub_skip_string(s, len, i + 1);
	while (i < len && s[i] >= 0x20 && s[i] <= 0x2f)
		i++;
	if (i < len && s[i] >= 0x30 && s[i] <= 0x7e)
		i++;
	return i;
}

/*
 * Decodes UTF-8 and keeps only what a reader sees; line ends become "\n".
 * escapes: a terminal escape sequence goes as a whole, else its control alone.
 */
static void
scrub_strip_invisible(const unsigned char *s, size_t len, int escapes, struct buf *out)
{
	size_t		 i = 0, n;
	uint32_t	 cp;

	while (i < len) {
		if (s[i] == '\r') {
			if (i + 1 >= len || s[i + 1] != '\n')
				buf_addc(out, '\n');
			i++;
			continue;
		}
		n = scrub_utf8_decode(s + i, len - i, &cp);
		i += n;
		if (escapes && cp == 0x1b) {
			i = scrub_skip_escape(s, len, i);
			continue;
		}
		if (escapes && cp == 0x9b) {
			i = scrub_skip_csi(s, len, i);
			continue;
		}
		if (escapes && (cp == 0x90 || cp == 0x98 || cp == 0x9d || cp == 0x9e ||
		    cp == 0x9f)) {
			i = scrub_skip_string(s, len, i);
			continue;
		}
		if (cp == 0x2028 || cp == 0x2029)
			cp = '\n';
		if (!scrub_invisible(cp))
			scrub_utf8_put(out, cp);
	}
}


char *
scrub_unseen(const char *s, size_t len, int escapes)
{
	struct buf	 a, b;

	buf_init(&a, 0);
	buf_init(&b, 0);
	scrub_strip_comments(s, len, &a);
	scrub_strip_invisible((const unsigned char *)a.data, a.len, escapes, &b);
	buf_reset(&a);
	scrub_strip_comments(b.data, b.len, &a);
	buf_free(&b);
	return buf_take(&a);
}

/*
 * Named character references that stand for an ASCII character (what secret
 * values are made of) or a no-break space; bare: also without ";", as HTML
 * reads its legacy names.
 */
static const struct {
	const char	*name;
	uint32_t	 cp;
	int		 bare;
} scrub_entities[] = {
	{ "AMP", '&', 1 }, { "DiacriticalGrave", '`', 0 }, { "GT", '>', 1 },
	{ "Hat", '^', 0 }, { "LT", '<', 1 }, { "NewLine", '\n', 0 },
	{ "NonBreakingSpace", 0xa0, 0 }, { "QUOT", '"', 1 }, { "Tab", '\t', 0 },
	{ "UnderBar", '_', 0 }, { "VerticalLine", '|', 0 }, { "amp", '&', 1 },
	{ "apos", '\'', 0 }, { "ast", '*', 0 }, { "bsol", '\\', 0 },
	{ "colon", ':', 0 }, { "comma", ',', 0 }, { "commat", '@', 0 },
	{ "dollar", '$', 0 }, { "equals", '=', 0 }, { "excl", '!', 0 },
	{ "grave", '`', 0 }, { "gt", '>', 1 }, { "lbrace", '{', 0 },
	{ "lbrack", '[', 0 }, { "lcub", '{', 0 }, { "lowbar", '_', 0 },
	{ "lpar", '(', 0 }, { "lsqb", '[', 0 }, { "lt", '<', 1 },
	{ "midast", '*', 0 }, { "nbsp", 0xa0, 1 }, { "num", '#', 0 },
	{ "percnt", '%', 0 }, { "period", '.', 0 }, { "plus", '+', 0 },
	{ "quest", '?', 0 }, { "quot", '"', 1 }, { "rbrace", '}', 0 },
	{ "rbrack", ']', 0 }, { "rcub", '}', 0 }, { "rpar", ')', 0 },
	{ "rsqb", ']', 0 }, { "semi", ';', 0 }, { "sol", '/', 0 },
	{ "verbar", '|', 0 }, { "vert", '|', 0 },
};

static int
scrub_alnum(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A numeric reference "&#65;" "&#x41;" (";" optional) at s[i] ("&"): its length and *cp, else 0. */
static size_t
scrub_numeric_ref(const char *s, size_t len, size_t i, uint32_t *cp)
{
	size_t		 k = i + 2, start;
	uint32_t	 v = 0;
	int		 base = 10, d;

	if (k < len && (s[k] == 'x' || s[k] == 'X')) {
		base = 16;
		k++;
	}
	for (start = k; k < len; k++) {
		d = hex_value(s[k]);
		if (d < 0 || (base == 10 && d > 9))
			break;
		v = v > 0x10ffff ? v : v * (uint32_t)base + (uint32_t)d;
	}
	if (k == start)
		return 0;
	if (k < len && s[k] == ';')
		k++;
	*cp = v == 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ? 0xfffd : v;
	return k - i;
}

/* A named reference at s[i] ("&"): its length and *cp, else 0. */
static size_t
scrub_named_ref(const char *s, size_t len, size_t i, uint32_t *cp)
{
	size_t	 k, n, j;

	for (k = i + 1; k < len && k - i <= SCRUB_NAME_MAX && scrub_alnum(s[k]); k++)
		;
	n = k - i - 1;
	for (j = 0; j < SPUR_ARRLEN(scrub_entities); j++) {
		if (k < len && s[k] == ';' && strlen(scrub_entities[j].name) == n &&
		    memcmp(s + i + 1, scrub_entities[j].name, n) == 0) {
			*cp = scrub_entities[j].cp;
			return n + 2;
		}
	}
	/* Without ";", HTML takes a legacy name that starts the letters ("&ltb" is "<b"). */
	for (j = 0; j < SPUR_ARRLEN(scrub_entities); j++) {
		if (scrub_entities[j].bare && strlen(scrub_entities[j].name) <= n &&
		    memcmp(s + i + 1, scrub_entities[j].name,
		    strlen(scrub_entities[j].name)) == 0) {
			*cp = scrub_entities[j].cp;
			return strlen(scrub_entities[j].name) + 1;
		}
	}
	return 0;
}

/* Copies s to out with its HTML character references decoded; how many were. */
static size_t
scrub_decode_entities(const char *s, size_t len, struct buf *out)
{
	size_t		 i = 0, n, decoded = 0;
	uint32_t	 cp;

	while (i < len) {
		n = 0;
		if (s[i] == '&' && i + 1 < len)
			n = s[i + 1] == '#' ? scrub_numeric_ref(s, len, i, &cp) :
			    scrub_named_ref(s, len, i, &cp);
		if (n == 0) {
			buf_addc(out, s[i++]);
			continue;
		}
		scrub_utf8_put(out, cp);
		decoded++;
		i += n;
	}
	return decoded;
}

static void
scrub_buf_wipe(struct buf *b)
{
	if (b->data != NULL)
		explicit_bzero(b->data, b->cap);
	buf_free(b);
}

/*
 * The text as a reader sees it, as far as a secret is concerned: unseen
 * characters and comments removed (a control character alone, as a browser
 * shows it) and HTML references decoded, again until nothing changes, since
 * a reference can stand for an invisible character and a removed comment can
 * join "&" to "#65;". *settled: no reference was left to decode.
 */
static char *
scrub_view(const char *s, size_t len, int *settled)
{
	struct buf	 b;
	char		*cur, *next;
	int		 pass;

	cur = scrub_unseen(s, len, 0);
	*settled = 0;
	for (pass = 0; pass < SCRUB_PASSES_MAX && !*settled; pass++) {
		buf_init(&b, 0);
		if (scrub_decode_entities(cur, strlen(cur), &b) == 0)
			*settled = 1;
		else {
			next = scrub_unseen(b.data, b.len, 0);
			freezero_str(cur);
			cur = next;
		}
		scrub_buf_wipe(&b);
	}
	return cur;
}

/* How a needle is compared with the text. */
enum scrub_form {
	SCRUB_TEXT,	/* each byte as itself, %XX (any case), or "+" for a space */
	SCRUB_HEX,	/* lowercase hex digits, matched in any case */
	SCRUB_EXACT	/* byte for byte (base64) */
};

struct scrub_needle {
	char		*s;
	size_t		 len;
	enum scrub_form	 form;
};

/* Every written form of every secret; first: the bytes a match can start with. */
struct scrub_set {
	struct scrub_needle	*v;
	size_t			 n;
	size_t			 cap;
	unsigned char		 first[256];
};

static void
scrub_set_add(struct scrub_set *set, const char *s, size_t len, enum scrub_form form)
{
	unsigned char	 c = (unsigned char)s[0];

	if (len == 0)
		return;
	if (set->n == set->cap) {
		set->cap = set->cap == 0 ? 16 : set->cap * 2;
		set->v = xreallocarray(set->v, set->cap, sizeof *set->v);
	}
	set->v[set->n].s = xstrndup(s, len);
	set->v[set->n].len = len;
	set->v[set->n].form = form;
	set->n++;
	set->first[c] = 1;
	if (form == SCRUB_TEXT) {
		set->first['%'] = 1;
		if (c == ' ')
			set->first['+'] = 1;
	} else if (form == SCRUB_HEX && c >= 'a' && c <= 'f')
		set->first[c - 'a' + 'A'] = 1;
}

/* base64 of value after k bytes: the whole (k 0, padded or not) and the characters only value decides. */
static void
scrub_set_add_base64(struct scrub_set *set, const char *value, size_t len, size_t k)
{
	unsigned char	*in = xcalloc(1, len + 3);
	char		*std, *url, *p;
	size_t		 elen, from, to, url_pass;

	memcpy(in + k, value, len);
	std = base64_encode(in, k + len);
	elen = strlen(std);
	url = xstrdup(std);
	for (p = url; *p != '\0'; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	from = (8 * k + 5) / 6;
	to = 8 * (k + len) / 6;
	for (url_pass = 0; url_pass < 2; url_pass++) {
		p = url_pass ? url : std;
		if (k == 0) {
			scrub_set_add(set, p, elen, SCRUB_EXACT);
			scrub_set_add(set, p, strcspn(p, "="), SCRUB_EXACT);
		}
		if (to - from >= SCRUB_CORE_MIN)
			scrub_set_add(set, p + from, to - from, SCRUB_EXACT);
	}
	explicit_bzero(in, len + 3);
	free(in);
	freezero_str(std);
	freezero_str(url);
}

static void
scrub_set_build(struct scrub_set *set, const struct secret *const *sec, size_t n)
{
	char	*hex;
	size_t	 i, k;

	memset(set, 0, sizeof *set);
	for (i = 0; i < n; i++) {
		if (sec[i] == NULL || sec[i]->value == NULL || sec[i]->len < SCRUB_MIN_LEN)
			continue;
		scrub_set_add(set, sec[i]->value, sec[i]->len, SCRUB_TEXT);
		hex = xmalloc(2 * sec[i]->len + 1);
		hex_encode((const unsigned char *)sec[i]->value, sec[i]->len, hex);
		scrub_set_add(set, hex, 2 * sec[i]->len, SCRUB_HEX);
		freezero_str(hex);
		for (k = 0; k < 3; k++)
			scrub_set_add_base64(set, sec[i]->value, sec[i]->len, k);
	}
}

static void
scrub_set_free(struct scrub_set *set)
{
	size_t	 i;

	for (i = 0; i < set->n; i++) {
		explicit_bzero(set->v[i].s, set->v[i].len);
		free(set->v[i].s);
	}
	free(set->v);
}

/* A letter of a tag name (what makes "<" start markup, not text). */
static int
scrub_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/*
 * The length of the markup at s[i] that a destination renders as nothing
 * (0: none), so a value split by it is one on the page: an HTML tag ("<b>",
 * "</span>", "<wbr>"), the start of an angle-bracket link up to its text
 * ("<URL|"), a link's target ("](URL)"), emphasis, strike and code-span marks,
 * link brackets and the closing ">" of an angle-bracket link, and the backslash of a
 * markdown escape ("\_" renders "_"). The union of every destination's
 * markup: what one of them shows literally is cut all the same.
 */
static size_t
scrub_markup(const char *s, size_t len, size_t i)
{
	size_t	 k;

	switch (s[i]) {
	case '*': case '_': case '~': case '`': case '[': case '>':
		return 1;
	case '\\':
		return i + 1 < len && ispunct((unsigned char)s[i + 1]) ? 1 : 0;
	case '<':
		k = i + 1;
		if (k < len && s[k] == '/')
			k++;
		if (k >= len || !scrub_alpha(s[k]))
			return 0;
		for (; k < len && k - i < SCRUB_MARKUP_MAX; k++) {
			if (s[k] == '\n' || s[k] == '<')
				return 0;
			if (s[k] == '>' || s[k] == '|')
				return k + 1 - i;
		}
		return 0;
	case ']':
		if (i + 1 >= len || s[i + 1] != '(')
			return 1;
		for (k = i + 2; k < len && k - i < SCRUB_MARKUP_MAX; k++) {
			if (isspace((unsigned char)s[k]))
				return 1;
			if (s[k] == ')')
				return k + 1 - i;
		}
		return 1;
	}
	return 0;
}

/* How many bytes of s the needle matches from s[0]; 0: none. */
static size_t
scrub_match(const struct scrub_needle *nd, const char *s, size_t len)
{
	size_t	 i = 0, k, m, skips = 0;
	int	 hi, lo;
	char	 c;

	if (nd->form == SCRUB_EXACT)
		return nd->len <= len && memcmp(s, nd->s, nd->len) == 0 ? nd->len : 0;
	if (nd->form == SCRUB_HEX) {
		if (nd->len > len)
			return 0;
		for (k = 0; k < nd->len; k++) {
			c = s[k] >= 'A' && s[k] <= 'F' ? s[k] - 'A' + 'a' : s[k];
			if (c != nd->s[k])
				return 0;
		}
		return nd->len;
	}
	for (k = 0; k < nd->len; k++) {
		c = nd->s[k];
		/* Markup between two of its characters: the page shows them together. */
		while (k > 0 && i < len && s[i] != c && skips < SCRUB_SKIPS_MAX &&
		    (m = scrub_markup(s, len, i)) > 0) {
			i += m;
			skips++;
		}
		if (i < len && s[i] == c)
			i++;
		else if (i + 2 < len && s[i] == '%' && (hi = hex_value(s[i + 1])) >= 0 &&
		    (lo = hex_value(s[i + 2])) >= 0 && (char)(hi << 4 | lo) == c)
			i += 3;
		else if (c == ' ' && i < len && s[i] == '+')
			i++;
		else
			return 0;
	}
	return i;
}

/* Copies s to out (when not NULL), each longest match replaced by the mark; how many were. */
static size_t
scrub_scan(const struct scrub_set *set, const char *s, size_t len, struct buf *out)
{
	size_t	 i = 0, k, m, best, hits = 0;

	while (i < len) {
		best = 0;
		if (set->first[(unsigned char)s[i]]) {
			/* The longest, so a secret inside another cannot show around it. */
			for (k = 0; k < set->n; k++) {
				if ((m = scrub_match(&set->v[k], s + i, len - i)) > best)
					best = m;
			}
		}
		if (best > 0) {
			hits++;
			if (out != NULL)
				buf_adds(out, SCRUB_MARK);
			i += best;
		} else {
			if (out != NULL)
				buf_addc(out, s[i]);
			i++;
		}
	}
	return hits;
}

/*
 * Half a value at an edge of the text: its end starting a secret, or its
 * start ending one, at least half the value long. A run's messages (its
 * report's reason and result, its pull request, a session's next report)
 * are each scrubbed alone, so a value split across two would show whole to
 * whoever reads both; the longer half, which one of them holds, is cut.
 */
static void
scrub_edges(const struct scrub_set *set, struct buf *b)
{
	const struct scrub_needle	*nd;
	struct buf			 out;
	size_t				 i, l, lead, end, tail = 0, head = 0, min;

	for (lead = 0; lead < b->len && isspace((unsigned char)b->data[lead]); lead++)
		;
	for (end = b->len; end > lead && isspace((unsigned char)b->data[end - 1]); end--)
		;
	for (i = 0; i < set->n; i++) {
		nd = &set->v[i];
		if (nd->form != SCRUB_TEXT)
			continue;
		min = (nd->len + 1) / 2 > SCRUB_MIN_LEN ? (nd->len + 1) / 2 : SCRUB_MIN_LEN;
		for (l = nd->len - 1; l >= min && l > tail; l--) {
			if (l <= end - lead && memcmp(b->data + end - l, nd->s, l) == 0) {
				tail = l;
				break;
			}
		}
		for (l = nd->len - 1; l >= min && l > head; l--) {
			if (l <= end - lead && memcmp(b->data + lead, nd->s + nd->len - l, l) == 0) {
				head = l;
				break;
			}
		}
	}
	if (tail == 0 && head == 0)
		return;
	if (head + tail > end - lead)
		tail = 0;	/* one fragment is the whole text */
	buf_init(&out, 0);
	buf_add(&out, b->data, lead);
	if (head > 0)
		buf_adds(&out, SCRUB_MARK);
	buf_add(&out, b->data + lead + head, end - tail - lead - head);
	if (tail > 0)
		buf_adds(&out, SCRUB_MARK);
	buf_add(&out, b->data + end, b->len - end);
	scrub_buf_wipe(b);
	*b = out;
}

char *
scrub_secrets(const char *text, const struct secret *const *sec, size_t n)
{
	struct scrub_set	 set;
	struct buf		 raw, seen;
	char			*view, *p;
	int			 settled;

	if (text == NULL)
		return NULL;
	scrub_set_build(&set, sec, n);
	if (set.n == 0)
		return xstrdup(text);
	buf_init(&raw, 0);
	scrub_scan(&set, text, strlen(text), &raw);
	view = scrub_view(raw.data, raw.len, &settled);
	/*
	 * A secret that only a reader sees whole (split by a zero-width space or
	 * a comment, written as entities) cannot be cut out of the text as it is
	 * written. Then the text becomes what the reader sees, with the secrets
	 * replaced there: invisible characters, comments and entities are lost,
	 * which is the price of a text that hid a secret. If entities were still
	 * nested past SCRUB_PASSES_MAX, each "&" is escaped so that what renders
	 * is what was searched. Otherwise the text stays as written.
	 */
	if (strcmp(view, buf_cstr(&raw)) != 0 && scrub_scan(&set, view, strlen(view), NULL) > 0) {
		buf_init(&seen, 0);
		scrub_scan(&set, view, strlen(view), &seen);
		scrub_buf_wipe(&raw);
		buf_init(&raw, 0);
		for (p = buf_cstr(&seen); *p != '\0'; p++) {
			if (*p == '&' && !settled)
				buf_adds(&raw, "&amp;");
			else
				buf_addc(&raw, *p);
		}
		scrub_buf_wipe(&seen);
	}
	scrub_edges(&set, &raw);
	freezero_str(view);
	scrub_set_free(&set);
	return buf_take(&raw);
}

char *
scrub_for_engine(struct engine *e, const char *text)
{
	const struct secret	*sec[SCRUB_SECRETS_MAX];
	size_t			 n;

	if (text == NULL)
		return NULL;
	n = config_secrets(e->conf, sec, SCRUB_SECRETS_MAX);
	/* And the sealed values runs got since the config was loaded (secrets.c). */
	if (n < SCRUB_SECRETS_MAX)
		n += secrets_scrub_extra(sec + n, SCRUB_SECRETS_MAX - n);
	return scrub_secrets(text, sec, n < SCRUB_SECRETS_MAX ? n : SCRUB_SECRETS_MAX);
}

char *
report_scrub(struct engine *e, const char *s)
{
	return scrub_for_engine(e, s);
}
