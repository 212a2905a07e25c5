/* jscan.c: one pass that checks JSON exactly as jansson would and builds only the parts asked for. */
#include "spur.h"
#include "jscan.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Why: json_loadb() makes a node (and, for an object, a hashtable) for every value of a
 * 13 KB forge webhook payload of which the normalizer reads about twenty. jscan still reads and
 * checks every byte, but allocates only for the paths it is told to keep (and, once per
 * parse, a key index for each depth that has an object of more than JSCAN_LINEAR_KEYS).
 *
 * What it accepts is what jansson 2.14's load.c accepts with JSON_REJECT_DUPLICATES and
 * without JSON_DECODE_ANY or JSON_ALLOW_NUL (tests/unit/test-jscan.c and fuzz/fuzz-jscan.c
 * hold it to that):
 *  - the text is an object or an array, with only space, tab, CR and LF around tokens;
 *  - every byte is strict UTF-8: no overlong forms, no encoded surrogates, nothing past
 *    U+10FFFF (jansson checks every byte it reads, and it reads all of an accepted text);
 *  - strings hold no byte below 0x20; escapes are \" \\ \/ \b \f \n \r \t and \uXXXX,
 *    a high surrogate only followed by a low one, never \u0000 (keys included);
 *  - numbers follow the JSON grammar; an integer (no fraction, no exponent) must fit a
 *    json_int_t, a real must not overflow strtod (underflow is fine); "-0" is the
 *    integer 0 and "1e5" a real, as in jansson;
 *  - no key twice in one object, compared after unescaping ("a" and "\u0061");
 *  - jansson's own depth limit: 2048 open values, a scalar counting as one;
 *  - and a quirk of its lexer: one NUL byte right after a number or a literal is
 *    skipped (jscan_lookahead_nul).
 * strtod() reads reals in the C locale; spur never calls setlocale().
 */

#define JSCAN_JANSSON_DEPTH	2048	/* jansson's JSON_PARSER_MAX_DEPTH */
#define JSCAN_LINEAR_KEYS	16	/* up to this many keys an object's are compared in turn */
#define JSCAN_INLINE_KEYS	128	/* keys of the open objects held on the stack */
#define JSCAN_INLINE_KEEP	64	/* keep tree nodes held on the stack */
#define JSCAN_INLINE_BUF	256	/* scratch held on the stack */

#define JSCAN_ONES		0x0101010101010101ULL
#define JSCAN_HIGHS		0x8080808080808080ULL

/* A node of the keep tree: one segment of one or more keep paths. */
struct jscan_keep {
	const char	*key;
	size_t		 len;
	int		 all;	/* a path ends here: the whole value is kept */
	int		 child;	/* index of the first child, -1 for none */
	int		 next;	/* index of the next sibling, -1 for none */
};

/* A string as scanned: its raw bytes between the quotes and what they decode to. */
struct jscan_str {
	const u_char	*raw;
	size_t		 rawlen;
	size_t		 len;		/* decoded */
	int		 escaped;	/* has a backslash: raw is not the decoded text */
	uint32_t	 hash;		/* of the decoded text, once its object is hashed */
};

/* A slot of an object's key index: empty unless stamped with the object's stamp. */
struct jscan_slot {
	uint32_t	 stamp;
	uint32_t	 key;		/* into jscan.keys */
};

/*
 * The key index of the large object open at one depth. Each object that grows past
 * JSCAN_LINEAR_KEYS takes a new stamp, so the slots of the one before it at this depth
 * read as empty without being cleared.
 */
struct jscan_index {
	struct jscan_slot *slots;
	size_t		 size;		/* a power of two, at least twice the keys */
	uint32_t	 stamp;
};

struct jscan {
	const u_char		*start;
	const u_char		*p;
	const u_char		*end;
	int			 maxdepth;
	int			 depth;		/* values open, the one being read included */
	char			*cause;
	uint64_t		 seed;
	const struct jscan_keep	*nodes;		/* the keep tree; [0] is the document */

	struct jscan_str	*keys;		/* of every object open, outermost first */
	size_t			 nkeys;
	size_t			 keyscap;
	struct jscan_index	*index;		/* by depth */
	size_t			 nindex;
	uint32_t		 stamp;

	char			*buf;		/* scratch: decoded text, number text */
	size_t			 bufsize;

	struct jscan_str	 keys_inline[JSCAN_INLINE_KEYS];
	char			 buf_inline[JSCAN_INLINE_BUF];
};

static int	jscan_value(struct jscan *, const struct jscan_keep *, json_t **);

static int
jscan_error(struct jscan *js, const u_char *at, const char *reason)
{
	if (js->cause == NULL)
		xasprintf(&js->cause, "invalid JSON at offset %zu: %s",
		    (size_t)(at - js->start), reason);
	return -1;
}

/* jansson returns NULL only when out of memory, which spur treats as fatal. */
static json_t *
jscan_new(json_t *j)
{
	if (j == NULL)
		fatal("out of memory making a JSON value");
	return j;
}

/* At least n bytes of scratch; what was in it is lost. */
static char *
jscan_scratch(struct jscan *js, size_t n)
{
	if (n > js->bufsize) {
		if (js->buf != js->buf_inline)
			free(js->buf);
		js->buf = xmalloc(n);
		js->bufsize = n;
	}
	return js->buf;
}

static inline void
jscan_ws(struct jscan *js)
{
	const u_char	*p = js->p, *end = js->end;

	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	js->p = p;
}

/*
 * The bytes among the eight at p that are '"', '\\', below 0x20 or not ASCII, as the
 * high bit of each (0: none). Borrows only carry upwards, so the lowest bit set always
 * marks a real one; bits above it may be false.
 */
static inline uint64_t
jscan_special8(const u_char *p)
{
	uint64_t	 w, q, b;

	memcpy(&w, p, sizeof w);
	q = w ^ (JSCAN_ONES * '"');
	b = w ^ (JSCAN_ONES * '\\');
	return (((q - JSCAN_ONES) & ~q) | ((b - JSCAN_ONES) & ~b) |
	    ((w - JSCAN_ONES * 0x20) & ~w) | w) & JSCAN_HIGHS;
}

/* How many bytes of a jscan_special8 word come before its first special one. */
static inline size_t
jscan_special_skip(uint64_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (size_t)__builtin_ctzll(m) / 8;
#else
	(void)m;
	return 0;	/* the byte loop finds it */
#endif
}

/* The length of the UTF-8 sequence at p (p[0] >= 0x80), 0 if jansson refuses it. */
static size_t
jscan_utf8(const u_char *p, const u_char *end)
{
	u_char	 c = p[0], lo = 0x80, hi = 0xbf;
	size_t	 n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (c == 0xed)
			hi = 0x9f;	/* U+D800..U+DFFF */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;	/* overlong */
		else if (c == 0xf4)
			hi = 0x8f;	/* past U+10FFFF */
	} else
		return 0;
	if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++) {
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	}
	return n;
}

static size_t
jscan_utf8_put(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = 0xc0 | (cp >> 6);
		out[1] = 0x80 | (cp & 0x3f);
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = 0xe0 | (cp >> 12);
		out[1] = 0x80 | ((cp >> 6) & 0x3f);
		out[2] = 0x80 | (cp & 0x3f);
		return 3;
	}
	out[0] = 0xf0 | (cp >> 18);
	out[1] = 0x80 | ((cp >> 12) & 0x3f);
	out[2] = 0x80 | ((cp >> 6) & 0x3f);
	out[3] = 0x80 | (cp & 0x3f);
	return 4;
}

/* The four hex digits at p as a number, -1 if they are not. */
static int
jscan_hex4(const u_char *p)
{
	int	 v = 0, i, c;

	for (i = 0; i < 4; i++) {
		c = p[i];
		if (c >= '0' && c <= '9')
			c -= '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			c = (c | 0x20) - 'a' + 10;
		else
			return -1;
		v = v << 4 | c;
	}
	return v;
}

/*
 * Checks the string whose opening quote is at js->p and notes its raw span and decoded
 * length; js->p is left after the closing quote. Plain ASCII goes eight bytes at a time.
 */
static int
jscan_string(struct jscan *js, struct jscan_str *str)
{
	const u_char	*p = js->p + 1, *end = js->end, *esc;
	size_t		 shrink = 0, n;
	uint64_t	 m;
	int		 cp, lo;

	str->raw = p;
	str->escaped = 0;
	for (;;) {
		while (end - p >= 8) {
			if ((m = jscan_special8(p)) != 0) {
				p += jscan_special_skip(m);
				break;
			}
			p += 8;
		}
		if (p == end)
			return jscan_error(js, p, "premature end of input in a string");
		if (*p == '"')
			break;
		if (*p >= 0x80) {
			if ((n = jscan_utf8(p, end)) == 0)
				return jscan_error(js, p, "invalid UTF-8");
			p += n;
			continue;
		}
		if (*p < 0x20)
			return jscan_error(js, p, "control character in a string");
		if (*p != '\\') {
			p++;
			continue;
		}

		esc = p;
		str->escaped = 1;
		if (end - p < 2)
			return jscan_error(js, p, "premature end of input in a string");
		switch (p[1]) {
		case '"':
		case '\\':
		case '/':
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't':
			p += 2;
			shrink++;
			continue;
		case 'u':
			break;
		default:
			return jscan_error(js, esc, "invalid escape");
		}
		if (end - p < 6 || (cp = jscan_hex4(p + 2)) < 0)
			return jscan_error(js, esc, "invalid \\u escape");
		p += 6;
		if (cp == 0)
			return jscan_error(js, esc, "\\u0000 is not allowed");
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return jscan_error(js, esc, "UTF-16 low surrogate without a high one");
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
			    (lo = jscan_hex4(p + 2)) < 0xdc00 || lo > 0xdfff)
				return jscan_error(js, esc,
				    "UTF-16 high surrogate without a low one");
			p += 6;
			shrink += 12 - 4;
			continue;
		}
		shrink += 6 - (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3);
	}
	str->rawlen = p - str->raw;
	str->len = str->rawlen - shrink;
	js->p = p + 1;
	return 0;
}

/* Decodes a string jscan_string accepted into out (str->len bytes). */
static void
jscan_decode(const struct jscan_str *str, char *out)
{
	const u_char	*p = str->raw, *end = p + str->rawlen, *bs;
	uint32_t	 cp;

	while (p < end) {
		if ((bs = memchr(p, '\\', end - p)) == NULL)
			bs = end;
		memcpy(out, p, bs - p);
		out += bs - p;
		if ((p = bs) == end)
			break;
		switch (p[1]) {
		case 'b':
			*out++ = '\b';
			break;
		case 'f':
			*out++ = '\f';
			break;
		case 'n':
			*out++ = '\n';
			break;
		case 'r':
			*out++ = '\r';
			break;
		case 't':
			*out++ = '\t';
			break;
		case 'u':
			cp = jscan_hex4(p + 2);
			p += 6;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				    (jscan_hex4(p + 2) - 0xdc00);
				p += 6;
			}
			out += jscan_utf8_put(cp, out);
			continue;
		default:	/* '"', '\\', '/' */
			*out++ = p[1];
			break;
		}
		p += 2;
	}
}

/* The decoded text of str: its raw bytes when it has no escape, else decoded into out. */
static const char *
jscan_text(const struct jscan_str *str, char *out)
{
	if (!str->escaped)
		return (const char *)str->raw;
	jscan_decode(str, out);
	return out;
}

static inline uint64_t
jscan_mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0xd6e8feb86659fd93ULL;
	x ^= x >> 32;
	return x;
}

/*
 * A seeded hash of a key, eight bytes at a time. Each step is a bijection of the state,
 * so two keys of one length never collide in the full 64 bits; the buckets come from
 * a final mix that depends on the seed.
 */
static uint32_t
jscan_hash(uint64_t seed, const char *s, size_t n)
{
	uint64_t	 h = seed ^ n, w;
	size_t		 i;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h = h << 29 | h >> 35;
	}
	/* in registers: a short memcpy to the stack and a wide load back stalls */
	for (w = 0, i = 0; i < n; i++)
		w |= (uint64_t)(u_char)s[i] << (8 * i);
	return (uint32_t)jscan_mix(h ^ w);
}

static uint32_t
jscan_key_hash(struct jscan *js, const struct jscan_str *key)
{
	return jscan_hash(js->seed, jscan_text(key, jscan_scratch(js, key->len)), key->len);
}

static int
jscan_key_equal(struct jscan *js, const struct jscan_str *a, const struct jscan_str *b)
{
	const char	*ta, *tb;
	char		*buf;

	if (a->len != b->len)
		return 0;
	if (!a->escaped && !b->escaped)
		return memcmp(a->raw, b->raw, a->len) == 0;
	buf = jscan_scratch(js, a->len + b->len);
	ta = jscan_text(a, buf);
	tb = jscan_text(b, buf + a->len);
	return memcmp(ta, tb, a->len) == 0;
}

static void
jscan_index_put(struct jscan_index *ix, const struct jscan_str *keys, uint32_t i)
{
	size_t	 mask = ix->size - 1, s = keys[i].hash & mask;

	while (ix->slots[s].stamp == ix->stamp)
		s = (s + 1) & mask;
	ix->slots[s].stamp = ix->stamp;
	ix->slots[s].key = i;
}

/* (Re)indexes the keys from base under a new stamp, with room for at least n of them. */
static void
jscan_index_build(struct jscan *js, struct jscan_index *ix, size_t base, size_t n)
{
	size_t	 size, i;

	if (ix->size < 2 * n) {
		for (size = ix->size != 0 ? ix->size : 64; size < 2 * n; size *= 2)
			;
		free(ix->slots);
		ix->slots = xcalloc(size, sizeof *ix->slots);
		ix->size = size;
	}
	ix->stamp = ++js->stamp;
	for (i = base; i < js->nkeys; i++)
		jscan_index_put(ix, js->keys, i);
}

static struct jscan_index *
jscan_index_at(struct jscan *js, int depth)
{
	size_t	 n;

	if ((size_t)depth >= js->nindex) {
		n = (size_t)depth + 8;
		js->index = xreallocarray(js->index, n, sizeof *js->index);
		memset(js->index + js->nindex, 0, (n - js->nindex) * sizeof *js->index);
		js->nindex = n;
	}
	return &js->index[depth];
}

/* Where the next key is scanned to (so it is not copied: it stays there if added). */
static struct jscan_str *
jscan_key_next(struct jscan *js)
{
	struct jscan_str	*keys;

	if (js->nkeys == js->keyscap) {
		keys = xreallocarray(NULL, js->keyscap, 2 * sizeof *keys);
		memcpy(keys, js->keys, js->nkeys * sizeof *keys);
		if (js->keys != js->keys_inline)
			free(js->keys);
		js->keys = keys;
		js->keyscap *= 2;
	}
	return &js->keys[js->nkeys];
}

/*
 * Adds the key in jscan_key_next() to the keys of the object open at depth (those from
 * base on); -1 if it is already one of them. Small objects compare keys in turn; past
 * JSCAN_LINEAR_KEYS the object's keys are hashed into the index of its depth, so that
 * objects of many keys stay linear.
 */
static int
jscan_key_add(struct jscan *js, size_t base, int depth)
{
	struct jscan_str	*key = &js->keys[js->nkeys];
	struct jscan_index	*ix;
	size_t			 n = js->nkeys - base, i, mask, s;

	if (n < JSCAN_LINEAR_KEYS) {
		for (i = base; i < js->nkeys; i++) {
			if (js->keys[i].len == key->len && jscan_key_equal(js, &js->keys[i], key))
				return -1;
		}
		js->nkeys++;
		return 0;
	}

	ix = jscan_index_at(js, depth);
	if (n == JSCAN_LINEAR_KEYS) {
		for (i = base; i < js->nkeys; i++)
			js->keys[i].hash = jscan_key_hash(js, &js->keys[i]);
		jscan_index_build(js, ix, base, n + 1);
	}
	key->hash = jscan_key_hash(js, key);
	mask = ix->size - 1;
	for (s = key->hash & mask; ix->slots[s].stamp == ix->stamp; s = (s + 1) & mask) {
		i = ix->slots[s].key;
		if (js->keys[i].hash == key->hash && jscan_key_equal(js, &js->keys[i], key))
			return -1;
	}
	js->nkeys++;
	if (2 * (n + 1) > ix->size)
		jscan_index_build(js, ix, base, n + 1);
	else
		jscan_index_put(ix, js->keys, js->nkeys - 1);
	return 0;
}

/* The child of keep node k that key names, or NULL. */
static const struct jscan_keep *
jscan_keep_find(struct jscan *js, const struct jscan_keep *k, const struct jscan_str *key)
{
	const struct jscan_keep	*c;
	const char		*text = NULL;
	int			 i;

	for (i = k->child; i != -1; i = c->next) {
		c = &js->nodes[i];
		if (c->len != key->len)
			continue;
		if (text == NULL)
			text = jscan_text(key, jscan_scratch(js, key->len));
		if (memcmp(c->key, text, key->len) == 0)
			return c;
	}
	return NULL;
}

/* Adds path to the keep tree (nodes[0] is the document); *n counts the nodes used. */
static void
jscan_keep_add(struct jscan_keep *nodes, size_t *n, const char *path)
{
	const char	*seg, *dot;
	size_t		 len;
	int		 cur = 0, c;

	if (*path == '\0') {
		nodes[0].all = 1;
		return;
	}
	for (seg = path; (dot = strchr(seg, '.')) != NULL; seg = dot + 1) {
		if (dot == seg)
			return;		/* an empty segment names nothing */
	}
	if (*seg == '\0')
		return;
	for (seg = path;; seg = dot + 1) {
		dot = strchr(seg, '.');
		len = dot != NULL ? (size_t)(dot - seg) : strlen(seg);
		for (c = nodes[cur].child; c != -1; c = nodes[c].next) {
			if (nodes[c].len == len && memcmp(nodes[c].key, seg, len) == 0)
				break;
		}
		if (c == -1) {
			c = (int)(*n)++;
			nodes[c].key = seg;
			nodes[c].len = len;
			nodes[c].all = 0;
			nodes[c].child = -1;
			nodes[c].next = nodes[cur].child;
			nodes[cur].child = c;
		}
		cur = c;
		if (dot == NULL)
			break;
	}
	nodes[cur].all = 1;
}

/* One object; k: NULL skips it, else its members are kept as k says. */
static int
jscan_object(struct jscan *js, const struct jscan_keep *k, json_t **out)
{
	json_t			*obj = NULL, *v;
	const struct jscan_keep	*ck;
	struct jscan_str	*key;
	size_t			 base = js->nkeys, ki;
	const char		*text;

	if (k != NULL)
		obj = jscan_new(json_object());
	js->p++;
	jscan_ws(js);
	if (js->p < js->end && *js->p == '}') {
		js->p++;
		goto done;
	}
	for (;;) {
		if (js->p == js->end || *js->p != '"') {
			jscan_error(js, js->p, "string or '}' expected");
			goto fail;
		}
		ki = js->nkeys;
		key = jscan_key_next(js);
		if (jscan_string(js, key) != 0)
			goto fail;
		if (jscan_key_add(js, base, js->depth) != 0) {
			jscan_error(js, key->raw - 1, "duplicate object key");
			goto fail;
		}
		jscan_ws(js);
		if (js->p == js->end || *js->p != ':') {
			jscan_error(js, js->p, "':' expected");
			goto fail;
		}
		js->p++;

		if (k == NULL || k->all)
			ck = k;
		else
			ck = jscan_keep_find(js, k, key);
		if (jscan_value(js, ck, &v) != 0)
			goto fail;
		if (v != NULL) {
			key = &js->keys[ki];	/* the value's objects may have moved keys */
			text = jscan_text(key, jscan_scratch(js, key->len));
			if (json_object_setn_new_nocheck(obj, text, key->len, v) != 0)
				fatal("out of memory adding a JSON member");
		}

		jscan_ws(js);
		if (js->p < js->end && *js->p == ',') {
			js->p++;
			jscan_ws(js);
			continue;
		}
		if (js->p < js->end && *js->p == '}') {
			js->p++;
			break;
		}
		jscan_error(js, js->p, "',' or '}' expected");
		goto fail;
	}
done:
	js->nkeys = base;
	*out = obj;
	return 0;
fail:
	js->nkeys = base;
	json_decref(obj);
	return -1;
}

/* One array; k: NULL skips it, else (k->all) it is kept whole. */
static int
jscan_array(struct jscan *js, const struct jscan_keep *k, json_t **out)
{
	json_t	*arr = NULL, *v;

	if (k != NULL)
		arr = jscan_new(json_array());
	js->p++;
	jscan_ws(js);
	if (js->p < js->end && *js->p == ']') {
		js->p++;
		goto done;
	}
	for (;;) {
		if (jscan_value(js, k, &v) != 0)
			goto fail;
		if (v != NULL && json_array_append_new(arr, v) != 0)
			fatal("out of memory adding a JSON item");
		jscan_ws(js);
		if (js->p < js->end && *js->p == ',') {
			js->p++;
			continue;
		}
		if (js->p < js->end && *js->p == ']') {
			js->p++;
			break;
		}
		jscan_error(js, js->p, "',' or ']' expected");
		goto fail;
	}
done:
	*out = arr;
	return 0;
fail:
	json_decref(arr);
	return -1;
}

static int
jscan_string_value(struct jscan *js, int build, json_t **out)
{
	struct jscan_str	 str;
	const char		*text;

	if (jscan_string(js, &str) != 0)
		return -1;
	if (build) {
		text = jscan_text(&str, jscan_scratch(js, str.len));
		*out = jscan_new(json_stringn_nocheck(text, str.len));
	}
	return 0;
}

static inline int
jscan_isdigit(const u_char *p, const u_char *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

/*
 * jansson reads one byte past a number or a literal and puts it back; a NUL put back
 * reads as its empty lookahead buffer, so that byte is dropped: "[1\0]" and
 * "[true\0]" are accepted (one NUL, only there). Do the same.
 */
static inline void
jscan_lookahead_nul(struct jscan *js)
{
	if (js->p < js->end && *js->p == '\0')
		js->p++;
}

/*
 * A number as jansson's lexer reads it: an integer when there is neither fraction nor
 * exponent (it must fit a json_int_t), else a real from strtod (it must not overflow).
 */
static int
jscan_number(struct jscan *js, int build, json_t **out)
{
	const u_char		*p = js->p, *end = js->end, *start = p;
	unsigned long long	 v = 0, limit = LLONG_MAX;
	int			 neg = 0, real = 0, exp = 0, big = 0;
	unsigned int		 d;
	char			 small[64], *text;
	double			 r;
	size_t			 n;

	if (*p == '-') {
		neg = 1;
		limit = (unsigned long long)LLONG_MAX + 1;
		p++;
	}
	if (!jscan_isdigit(p, end))
		return jscan_error(js, start, "invalid number");
	if (*p == '0') {
		if (jscan_isdigit(++p, end))
			return jscan_error(js, start, "invalid number (leading zero)");
	} else {
		for (; jscan_isdigit(p, end); p++) {
			d = *p - '0';
			if (v > (limit - d) / 10)
				big = 1;
			else if (!big)
				v = v * 10 + d;
		}
	}
	if (p < end && *p == '.') {
		if (!jscan_isdigit(++p, end))
			return jscan_error(js, start, "invalid number");
		while (jscan_isdigit(p, end))
			p++;
		real = 1;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (!jscan_isdigit(p, end))
			return jscan_error(js, start, "invalid number");
		while (jscan_isdigit(p, end))
			p++;
		real = exp = 1;
	}
	js->p = p;
	jscan_lookahead_nul(js);

	if (!real) {
		if (big) {
			return jscan_error(js, start, neg ? "too big negative integer" :
			    "too big integer");
		}
		if (build) {
			/* v <= LLONG_MAX + 1 when negative: negate without overflowing */
			*out = jscan_new(json_integer(!neg ? (json_int_t)v :
			    v == 0 ? 0 : -(json_int_t)(v - 1) - 1));
		}
		return 0;
	}
	n = p - start;
	if (!build && !exp && n < 300)
		return 0;	/* under 10^300 without an exponent: no overflow */
	text = n < sizeof small ? small : jscan_scratch(js, n + 1);
	memcpy(text, start, n);
	text[n] = '\0';
	errno = 0;
	r = strtod(text, NULL);
	if ((r == HUGE_VAL || r == -HUGE_VAL) && errno == ERANGE)
		return jscan_error(js, start, "real number overflow");
	if (build)
		*out = jscan_new(json_real(r));
	return 0;
}

static int
jscan_word(struct jscan *js, const char *word, size_t n)
{
	if ((size_t)(js->end - js->p) < n || memcmp(js->p, word, n) != 0)
		return jscan_error(js, js->p, "invalid token");
	js->p += n;
	jscan_lookahead_nul(js);
	return 0;
}

/*
 * One value at js->p (after whitespace). k: NULL skips it; k->all keeps it whole;
 * otherwise it is on the way to kept paths, and is kept (sparsely) only if an object.
 * *out is NULL when nothing is kept.
 */
static int
jscan_value(struct jscan *js, const struct jscan_keep *k, json_t **out)
{
	int	 rc, c;

	*out = NULL;
	jscan_ws(js);
	if (js->p == js->end)
		return jscan_error(js, js->p, "premature end of input");
	c = *js->p;
	if (k != NULL && !k->all && c != '{')
		k = NULL;
	if ((c == '{' || c == '[') && js->depth >= js->maxdepth) {
		if (js->cause == NULL)
			xasprintf(&js->cause, "JSON nested deeper than %d levels", js->maxdepth);
		return -1;
	}
	if (js->depth >= JSCAN_JANSSON_DEPTH)
		return jscan_error(js, js->p, "maximum parsing depth reached");

	js->depth++;
	switch (c) {
	case '{':
		rc = jscan_object(js, k, out);
		break;
	case '[':
		rc = jscan_array(js, k, out);
		break;
	case '"':
		rc = jscan_string_value(js, k != NULL, out);
		break;
	case 't':
		if ((rc = jscan_word(js, "true", 4)) == 0 && k != NULL)
			*out = json_true();
		break;
	case 'f':
		if ((rc = jscan_word(js, "false", 5)) == 0 && k != NULL)
			*out = json_false();
		break;
	case 'n':
		if ((rc = jscan_word(js, "null", 4)) == 0 && k != NULL)
			*out = json_null();
		break;
	case '-':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		rc = jscan_number(js, k != NULL, out);
		break;
	default:
		rc = jscan_error(js, js->p, "invalid token");
		break;
	}
	js->depth--;
	return rc;
}

json_t *
jscan_parse(const char *s, size_t len, int maxdepth, const char *const *keep, char **cause)
{
	struct jscan		 js;
	struct jscan_keep	 nodes_inline[JSCAN_INLINE_KEEP], *nodes = nodes_inline;
	size_t			 nnodes = 1, max = 1, i;
	const char		*p;
	json_t			*j = NULL;

	if (keep != NULL) {
		for (i = 0; keep[i] != NULL; i++) {
			for (p = keep[i], max++; *p != '\0'; p++)
				max += *p == '.';
		}
	}
	if (max > JSCAN_INLINE_KEEP)
		nodes = xreallocarray(NULL, max, sizeof *nodes);
	nodes[0].key = NULL;
	nodes[0].len = 0;
	nodes[0].all = keep == NULL;
	nodes[0].child = nodes[0].next = -1;
	for (i = 0; keep != NULL && keep[i] != NULL; i++)
		jscan_keep_add(nodes, &nnodes, keep[i]);

	if (s == NULL)
		len = 0;
	js.start = js.p = (const u_char *)s;
	js.end = js.start + len;
	js.maxdepth = maxdepth;
	js.depth = 0;
	js.cause = NULL;
	/* Where the stack and the code are (ASLR) seeds the key hash: keys can't be aimed. */
	js.seed = jscan_mix((uint64_t)(uintptr_t)&js ^
	    jscan_mix((uint64_t)(uintptr_t)&jscan_parse));
	js.nodes = nodes;
	js.keys = js.keys_inline;
	js.nkeys = 0;
	js.keyscap = JSCAN_INLINE_KEYS;
	js.index = NULL;
	js.nindex = 0;
	js.stamp = 0;
	js.buf = js.buf_inline;
	js.bufsize = sizeof js.buf_inline;

	jscan_ws(&js);
	if (js.p == js.end || (*js.p != '{' && *js.p != '[')) {
		jscan_error(&js, js.p, "'[' or '{' expected");
		goto out;
	}
	if (jscan_value(&js, &nodes[0], &j) != 0)
		goto out;
	jscan_ws(&js);
	if (js.p != js.end) {
		jscan_error(&js, js.p, "end of input expected");
		json_decref(j);
		j = NULL;
		goto out;
	}
	if (j == NULL)
		j = jscan_new(json_array());	/* a top-level array is on no path */

out:
	if (j == NULL && cause != NULL)
		*cause = js.cause;
	else
		free(js.cause);
	for (i = 0; i < js.nindex; i++)
		free(js.index[i].slots);
	free(js.index);
	if (js.keys != js.keys_inline)
		free(js.keys);
	if (js.buf != js.buf_inline)
		free(js.buf);
	if (nodes != nodes_inline)
		free(nodes);
	return j;
}
