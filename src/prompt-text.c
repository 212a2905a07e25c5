/*
 * prompt-text.c: third-party text made safe for the prompt's block
 * (prompt.h): what a reader would not see stripped, marker look-alikes
 * defused, cut on a boundary; the fields a system adds (source.h prompt),
 * the nonce. prompt.c builds the block with them; these ask no system.
 */
#include "spur.h"
#include "event.h"
#include "fold.h"
#include "prompt.h"
#include "scrub.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Look-alikes of "<" and ">" that a reader could take for a marker's brackets, in pairs. */
static const uint32_t prompt_open_brackets[] = {
	'<', 0x00ab, 0x02c2, 0x1438, 0x2039, 0x226a, 0x227a, 0x22d6, 0x22d8,
	0x2329, 0x276c, 0x276e, 0x2770, 0x27e8, 0x27ea, 0x2991, 0x29fc, 0x2aa1,
	0x3008, 0x300a, 0xfe64, 0xff1c,
};
static const uint32_t prompt_close_brackets[] = {
	'>', 0x00bb, 0x02c3, 0x1433, 0x203a, 0x226b, 0x227b, 0x22d7, 0x22d9,
	0x232a, 0x276d, 0x276f, 0x2771, 0x27e9, 0x27eb, 0x2992, 0x29fd, 0x2aa2,
	0x3009, 0x300b, 0xfe65, 0xff1e,
};

/* Elements whose content no reader sees, whatever their attributes. */
static const char *const prompt_unseen_elements[] = { "script", "style", "template" };
/* Elements without content: hiding one hides only its tag. */
static const char *const prompt_void_elements[] = {
	"area", "base", "br", "col", "embed", "hr", "image", "img", "input",
	"link", "meta", "source", "track", "wbr",
};

/*
 * Where the next quote of each kind is, so that parsing a tag at every "<"
 * of a long text does not look for the same far quote again each time.
 */
struct prompt_quotes {
	size_t	 from[2];
	size_t	 at[2];	/* len: none */
};

struct prompt_tag {
	char	 name[16];	/* lowercase; longer names are no element of interest */
	size_t	 end;		/* just past the ">" */
	int	 closing;	/* "</name ...>" */
	int	 hidden;	/* hidden, display:none, visibility:hidden, type=hidden */
	int	 self_closing;	/* "... />" */
};

static int
prompt_tag_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\f';
}

static int
prompt_tag_named(const struct prompt_tag *t, const char *const *names, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strcmp(t->name, names[i]) == 0)
			return 1;
	}
	return 0;
}

/* Does an attribute hide its element? name is lowercase; value as written. */
static int
prompt_attr_hides(const char *name, size_t nlen, const char *v, size_t vlen)
{
	char	 css[64];
	size_t	 i, k = 0;

	if (nlen == 6 && memcmp(name, "hidden", 6) == 0)
		return 1;
	if (nlen == 4 && memcmp(name, "type", 4) == 0)
		return vlen == 6 && strncasecmp(v, "hidden", 6) == 0;
	if (nlen != 5 || memcmp(name, "style", 5) != 0)
		return 0;
	/* The declarations without spaces, lowercase, a window at a time. */
	for (i = 0; i < vlen; i++) {
		if (prompt_tag_space(v[i]))
			continue;
		if (k == sizeof css - 1) {
			memmove(css, css + 32, k - 32);
			k -= 32;
		}
		css[k++] = (char)tolower((unsigned char)v[i]);
		css[k] = '\0';
		if (strstr(css, "display:none") != NULL ||
		    strstr(css, "visibility:hidden") != NULL)
			return 1;
	}
	return 0;
}

/*
 * Parses the tag opening at s[i] ("<" then a letter, or "</"), with
 * CommonMark's grammar for raw HTML: a name of letters, digits and "-",
 * attributes with unquoted or quoted values (which may span lines), then ">".
 * Anything else is no tag and shows as text: 0.
 */
static int
prompt_tag_parse(const char *s, size_t len, size_t i, struct prompt_tag *t,
    struct prompt_quotes *qs)
{
	const char	*p;
	size_t		 n = 0, a, alen, v, vlen;
	char		 name[16];
	int		 q;

	memset(t, 0, sizeof *t);
	if (++i < len && s[i] == '/') {
		t->closing = 1;
		i++;
	}
	if (i >= len || !isalpha((unsigned char)s[i]))
		return 0;
	for (; i < len && (isalnum((unsigned char)s[i]) || s[i] == '-'); i++) {
		if (n < sizeof t->name - 1)
			t->name[n++] = (char)tolower((unsigned char)s[i]);
	}
	for (;;) {
		a = i;
		while (i < len && prompt_tag_space(s[i]))
			i++;
		if (i >= len)
			return 0;
		if (s[i] == '>' || (s[i] == '/' && i + 1 < len && s[i + 1] == '>'))
			break;
		if (i == a || t->closing)
			return 0;	/* an attribute needs a space before it */
		a = i;
		alen = 0;
		while (i < len && (isalnum((unsigned char)s[i]) || strchr("_:.-", s[i]) != NULL))
			i++;
		alen = i - a;
		if (alen == 0 || isdigit((unsigned char)s[a]) || s[a] == '.' || s[a] == '-')
			return 0;
		v = i;
		vlen = 0;
		n = i;
		while (n < len && prompt_tag_space(s[n]))
			n++;
		if (n < len && s[n] == '=') {
			n++;
			while (n < len && prompt_tag_space(s[n]))
				n++;
			if (n >= len)
				return 0;
			if (s[n] == '"' || s[n] == '\'') {
				q = s[n++] == '"' ? 0 : 1;
				v = n;
				if (n < qs->from[q] || n > qs->at[q]) {
					p = memchr(s + n, q == 0 ? '"' : '\'', len - n);
					qs->from[q] = n;
					qs->at[q] = p != NULL ? (size_t)(p - s) : len;
				}
				if ((n = qs->at[q]) >= len)
					return 0;
				vlen = n++ - v;
			} else {
				v = n;
				while (n < len && !prompt_tag_space(s[n]) &&
				    strchr("\"'=<>`", s[n]) == NULL)
					n++;
				if ((vlen = n - v) == 0)
					return 0;
			}
			i = n;
		}
		for (n = 0; n < alen && n < sizeof name; n++)
			name[n] = (char)tolower((unsigned char)s[a + n]);
		if (alen <= sizeof name && prompt_attr_hides(name, alen, s + v, vlen))
			t->hidden = 1;
	}
	if (s[i] == '/') {
		t->self_closing = 1;
		i++;
	}
	t->end = i + 1;
	return 1;
}

/* Where the element whose open tag ends at s[i] ends: past its matching close tag, or the end. */
static size_t
prompt_element_end(const char *s, size_t len, size_t i, const char *name,
    struct prompt_quotes *qs)
{
	struct prompt_tag	 t;
	size_t			 depth = 0;

	for (; i < len; i++) {
		if (s[i] != '<' || !prompt_tag_parse(s, len, i, &t, qs) ||
		    strcmp(t.name, name) != 0 || t.self_closing)
			continue;
		if (!t.closing)
			depth++;
		else if (depth-- == 0)
			return t.end;
		i = t.end - 1;
	}
	return len;
}

/*
 * Removes HTML a reader does not see: images (whose alt text shows only
 * when the image fails), elements marked hidden (hidden, display:none,
 * visibility:hidden, type=hidden) with their content, script, style and
 * template. Returns whether it removed anything.
 */
static int
prompt_strip_hidden_html(const char *s, size_t len, struct buf *out)
{
	struct prompt_quotes	 qs = { { 0, 0 }, { 0, 0 } };
	struct prompt_tag	 t;
	size_t			 i = 0;
	int			 removed = 0;

	while (i < len) {
		if (s[i] != '<' || !prompt_tag_parse(s, len, i, &t, &qs) || t.closing) {
			buf_addc(out, s[i++]);
			continue;
		}
		if (prompt_tag_named(&t, prompt_void_elements, SPUR_ARRLEN(prompt_void_elements))) {
			if (!t.hidden && strcmp(t.name, "img") != 0 &&
			    strcmp(t.name, "image") != 0) {
				buf_addc(out, s[i++]);
				continue;
			}
			i = t.end;
		} else if (t.hidden || prompt_tag_named(&t, prompt_unseen_elements,
		    SPUR_ARRLEN(prompt_unseen_elements)))
			i = t.self_closing ? t.end : prompt_element_end(s, len, t.end, t.name, &qs);
		else {
			buf_addc(out, s[i++]);
			continue;
		}
		removed = 1;
	}
	return removed;
}

/*
 * A markdown link reference definition starting at s[i], the start of a line
 * ("[label]: destination" and an optional "title", CommonMark): renders as
 * nothing. Sets *dest_end and *title (0: none) and returns where the
 * definition ends (past its line break), or 0 when there is none.
 */
static size_t
prompt_linkdef(const char *s, size_t len, size_t i, size_t *dest, size_t *dest_end,
    int *title)
{
	size_t	 k, eol;
	char	 close;

	*title = 0;
	/* Indentation, block quote markers, one list marker. */
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '>'))
		i++;
	if (i + 1 < len && strchr("-*+", s[i]) != NULL && (s[i + 1] == ' ' || s[i + 1] == '\t'))
		i += 2;
	else {
		for (k = i; k < len && k - i < 9 && isdigit((unsigned char)s[k]); k++)
			;
		if (k > i && k + 1 < len && (s[k] == '.' || s[k] == ')') &&
		    (s[k + 1] == ' ' || s[k + 1] == '\t'))
			i = k + 2;
	}
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i >= len || s[i] != '[')
		return 0;
	for (k = ++i; k < len && k - i < 1000 && s[k] != ']'; k++) {
		if (s[k] == '[' || (s[k] == '\n' && k + 1 < len && s[k + 1] == '\n'))
			return 0;
		if (s[k] == '\\' && k + 1 < len)
			k++;
	}
	if (k + 1 >= len || s[k] != ']' || s[k + 1] != ':' || k == i)
		return 0;
	i = k + 2;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i < len && s[i] == '\n')
		i++;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	*dest = i;
	if (i < len && s[i] == '<') {
		while (++i < len && s[i] != '>' && s[i] != '<' && s[i] != '\n')
			;
		if (i >= len || s[i] != '>')
			return 0;
		i++;
	} else {
		while (i < len && (unsigned char)s[i] > ' ')
			i++;
		if (i == *dest)
			return 0;
	}
	*dest_end = i;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i >= len)
		return len;
	if (s[i] == '\n') {
		/* The title may start on the next line; without one, the definition ends here. */
		eol = ++i;
		while (i < len && (s[i] == ' ' || s[i] == '\t'))
			i++;
	} else if (i == *dest_end)
		return 0;	/* text glued to the destination */
	else
		eol = 0;	/* the title must be on this line */
	if (i >= len || (s[i] != '"' && s[i] != '\'' && s[i] != '('))
		return eol;
	close = s[i] == '(' ? ')' : s[i];
	for (k = i + 1; k < len && s[k] != close; k++) {
		if ((s[k] == '\n' && k + 1 < len && s[k + 1] == '\n') ||
		    (close == ')' && s[k] == '('))
			break;
		if (s[k] == '\\' && k + 1 < len)
			k++;
	}
	if (k < len && s[k] == close) {
		for (k++; k < len && (s[k] == ' ' || s[k] == '\t'); k++)
			;
		if (k >= len || s[k] == '\n') {
			*title = 1;
			return k < len ? k + 1 : len;
		}
	}
	/* No title: a definition only if the destination ended its line. */
	return eol;
}

/*
 * Removes what markdown renders as nothing: a link reference definition used
 * as a comment (destination "#" or "<>", as in "[//]: # (hidden)") goes
 * whole, any other keeps its label and destination but loses its title.
 */
static void
prompt_strip_linkdefs(const char *s, size_t len, struct buf *out)
{
	size_t	 i = 0, end, dest, dest_end;
	int	 title;
	const char *nl;

	while (i < len) {
		end = prompt_linkdef(s, len, i, &dest, &dest_end, &title);
		if (end != 0 && ((dest_end - dest == 1 && s[dest] == '#') ||
		    (dest_end - dest == 2 && memcmp(s + dest, "<>", 2) == 0))) {
			i = end;
			continue;
		}
		if (end != 0 && title) {
			buf_add(out, s + i, dest_end - i);
			if (s[end - 1] == '\n')
				buf_addc(out, '\n');
			i = end;
			continue;
		}
		nl = memchr(s + i, '\n', len - i);
		end = nl != NULL ? (size_t)(nl - s) + 1 : len;
		buf_add(out, s + i, end - i);
		i = end;
	}
}

/*
 * Cleaning, (5) above: what scrub.c strips for any reader (terminal escape
 * sequences whole), then what markdown and HTML do not show; when that
 * removed something, scrub.c again, for a comment opener the removal joined.
 */
char *
prompt_clean(const char *s, size_t len)
{
	struct buf	 a, b;
	char		*unseen = scrub_unseen(s, len, 1), *out;

	buf_init(&a, 0);
	buf_init(&b, 0);
	prompt_strip_linkdefs(unseen, strlen(unseen), &a);
	if (prompt_strip_hidden_html(a.data, a.len, &b) || a.len != strlen(unseen))
		out = scrub_unseen(b.data, b.len, 1);
	else
		out = buf_take(&b);
	free(unseen);
	buf_free(&a);
	buf_free(&b);
	return out;
}

/*
 * Does the line spell SPUR then DATA? Letters are folded to the ASCII they
 * imitate (fold.c) and everything that folds to no letter or digit (spaces,
 * punctuation, combining marks, however many) is skipped.
 */
static int
prompt_has_marker_word(const char *s, size_t len)
{
	static const char	 word[] = "spurdata";
	const unsigned char	*u = (const unsigned char *)s;
	char			 f[FOLD_MAX];
	size_t			 i, n, k, j, got = 0;
	uint32_t		 cp;

	for (i = 0; i < len; i += n) {
		n = scrub_utf8_decode(u + i, len - i, &cp);
		k = fold_char(cp, f);
		for (j = 0; j < k; j++) {
			/* No prefix of the word ends it: a mismatch restarts at its "s". */
			if (f[j] == word[got])
				got++;
			else
				got = f[j] == word[0];
			if (got == sizeof word - 1)
				return 1;
		}
	}
	return 0;
}

static int
prompt_in(uint32_t cp, const uint32_t *set, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (set[i] == cp)
			return 1;
	}
	return 0;
}

/* Copies one line, brackets and their look-alikes replaced by "[" and "]". */
static void
prompt_defuse_line(const char *s, size_t len, struct buf *out)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i, n;
	uint32_t		 cp;

	for (i = 0; i < len; i += n) {
		n = scrub_utf8_decode(u + i, len - i, &cp);
		if (prompt_in(cp, prompt_open_brackets, SPUR_ARRLEN(prompt_open_brackets)))
			buf_addc(out, '[');
		else if (prompt_in(cp, prompt_close_brackets,
		    SPUR_ARRLEN(prompt_close_brackets)))
			buf_addc(out, ']');
		else
			buf_add(out, s + i, n);
	}
}

char *
prompt_neutralize(const char *s, size_t len)
{
	struct buf	 out;
	const char	*nl;
	size_t		 i = 0, n;

	buf_init(&out, 0);
	while (i < len) {
		nl = memchr(s + i, '\n', len - i);
		n = nl != NULL ? (size_t)(nl - (s + i)) + 1 : len - i;
		if (prompt_has_marker_word(s + i, n))
			prompt_defuse_line(s + i, n, &out);
		else
			buf_add(&out, s + i, n);
		i += n;
	}
	return buf_take(&out);
}

/* The longest prefix of s, at most max bytes, that ends on a character boundary. */
size_t
prompt_cut(const char *s, size_t len, size_t max)
{
	size_t	 n;

	if (len <= max)
		return len;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

char *
prompt_nonce_new(void)
{
	unsigned char	 r[PROMPT_NONCE_LEN / 2];
	char		 hex[PROMPT_NONCE_LEN + 1];

	random_bytes(r, sizeof r);
	hex_encode(r, sizeof r, hex);
	return xstrdup(hex);
}

int
prompt_nonce_valid(const char *nonce)
{
	size_t	 i;

	for (i = 0; i < PROMPT_NONCE_LEN; i++) {
		if (!((nonce[i] >= '0' && nonce[i] <= '9') ||
		    (nonce[i] >= 'a' && nonce[i] <= 'f')))
			return 0;
	}
	return nonce[i] == '\0';
}

/* Adds "label: value\n" for a one-line field; nothing when the value is empty. */
void
prompt_field(struct buf *b, const char *label, const char *value)
{
	char	*clean, *safe, *p, *start, *end;
	size_t	 len, keep;

	if (value == NULL)
		return;
	clean = prompt_clean(value, strlen(value));
	for (p = clean; *p != '\0'; p++) {
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	}
	start = clean;
	while (*start == ' ')
		start++;
	end = start + strlen(start);
	while (end > start && end[-1] == ' ')
		end--;
	if (end == start) {
		free(clean);
		return;
	}
	safe = prompt_neutralize(start, end - start);
	len = strlen(safe);
	keep = prompt_cut(safe, len, PROMPT_FIELD_MAX);
	buf_addf(b, "%s: ", label);
	buf_add(b, safe, keep);
	if (keep < len)
		buf_addf(b, " [spur: cut at %zu of %zu bytes]", keep, len);
	buf_addc(b, '\n');
	free(safe);
	free(clean);
}

void
prompt_field_path(struct buf *b, const char *label, const json_t *root, const char *path)
{
	const json_t	*v = json_path(root, path);
	char		*s;

	if (v == NULL || json_is_null(v) || json_is_object(v) || json_is_array(v))
		return;
	s = json_scalar_text(v);
	prompt_field(b, label, s);
	free(s);
}

void
prompt_field_list(struct buf *b, const char *label, const json_t *list, const char *key)
{
	struct buf	 s;
	const json_t	*item;
	const char	*v;
	size_t		 i;

	if (!json_is_array(list))
		return;
	buf_init(&s, 0);
	json_array_foreach(list, i, item) {
		v = key != NULL ? json_string_value(json_object_get(item, key)) :
		    json_string_value(item);
		if (v == NULL || *v == '\0')
			continue;
		if (s.len != 0)
			buf_adds(&s, ", ");
		buf_adds(&s, v);
	}
	prompt_field(b, label, buf_cstr(&s));
	buf_free(&s);
}


void
prompt_forge_fields(struct buf *b, const json_t *root)
{
	prompt_field_path(b, json_is_true(json_path(root, "meta.is_pull_request")) ?
	    "pull request" : "issue", root, "meta.number");
	prompt_field_path(b, "title", root, "meta.title");
	prompt_field_path(b, "branch", root, "meta.head_ref");
	prompt_field_path(b, "base branch", root, "meta.base_ref");
	if (json_is_true(json_path(root, "meta.fork")))
		prompt_field_path(b, "fork", root, "meta.head_repo");
	prompt_field_path(b, "label", root, "meta.label");
	prompt_field_list(b, "labels", json_path(root, "meta.labels"), NULL);
}
