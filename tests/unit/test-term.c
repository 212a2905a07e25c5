/* test-term.c: term_escape: what reaches an operator's terminal from text a sender or an agent wrote. */
#include "spur.h"
#include "cmd.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static const struct {
	const char	*in;
	size_t		 len;		/* 0: strlen */
	int		 flags;
	const char	*want;
	const char	*name;
} cases[] = {
	{ "plain text, é ☃ 😀", 0, 0, "plain text, é ☃ 😀", "printable UTF-8 is kept" },
	{ "\x1b]52;c;SGVsbG8=\x07", 0, 0, "\\x1b]52;c;SGVsbG8=\\x07", "OSC 52: ESC and BEL" },
	{ "\x1b[2J\x1b[H", 0, 0, "\\x1b[2J\\x1b[H", "CSI" },
	{ "\xc2\x9b" "31m\xc2\x9d" "0;t\xc2\x9c", 0, 0, "\\u009b31m\\u009d0;t\\u009c", "C1 as UTF-8" },
	{ "\xc2\x80\xc2\x9f\xc2\xa0", 0, 0, "\\u0080\\u009f\xc2\xa0", "C1 is U+0080..U+009F, U+00A0 is not" },
	{ "\x9b\xff\xfe", 0, 0, "\\x9b\\xff\\xfe", "bytes that are not UTF-8, one by one" },
	{ "\xc0\xaf\xe0\x80\xaf", 0, 0, "\\xc0\\xaf\\xe0\\x80\\xaf", "overlong forms" },
	{ "\xed\xa0\x80", 0, 0, "\\xed\\xa0\\x80", "a surrogate" },
	{ "\xf4\x90\x80\x80", 0, 0, "\\xf4\\x90\\x80\\x80", "past U+10FFFF" },
	{ "a\xe2\x80" "b", 0, 0, "a\\xe2\\x80b", "a sequence cut by an ASCII byte" },
	{ "a\xe2\x80", 0, 0, "a\\xe2\\x80", "a sequence cut by the end, nothing more to come" },
	{ "a\nb\tc\rd\x7f", 0, 0, "a\\nb\\tc\\rd\\x7f", "one-line fields: newline, tab, CR, DEL escaped" },
	{ "a\nb\tc\r", 0, TERM_KEEP_NL | TERM_KEEP_TAB, "a\nb\tc\\r", "multi-line fields keep newline and tab" },
	{ "a\0b", 3, 0, "a\\x00b", "NUL" },
	{ "\xe2\x80\xa8", 0, 0, "\xe2\x80\xa8", "U+2028 is no terminal control" },
};

int
main(void)
{
	struct buf	 b;
	size_t		 i, used;
	char		*s;

	for (i = 0; i < SPUR_ARRLEN(cases); i++) {
		buf_init(&b, 0);
		term_escape(&b, cases[i].in, cases[i].len ? cases[i].len : strlen(cases[i].in),
		    cases[i].flags);
		is_str(buf_cstr(&b), cases[i].want, "%s", cases[i].name);
		buf_free(&b);
	}

	/* A stream: a sequence cut at the end of a chunk waits for the next one. */
	buf_init(&b, 0);
	used = term_escape(&b, "x\xc2", 2, TERM_MORE);
	is_int(used, 1, "TERM_MORE: a cut C1 is left for the next chunk");
	used = term_escape(&b, "\xc2\x9b", 2, TERM_MORE);
	is_int(used, 2, "and escaped whole with it");
	used = term_escape(&b, "y\xf0\x9f\x98", 4, TERM_MORE);
	is_int(used, 1, "a cut 4-byte sequence waits too (3 bytes left)");
	used = term_escape(&b, "\xf0\x9f\x98\x80", 4, TERM_MORE);
	is_str(buf_cstr(&b), "x\\u009by\xf0\x9f\x98\x80", "the stream prints as the whole would");
	used = term_escape(&b, "z\xff", 2, TERM_MORE);
	is_int(used, 2, "TERM_MORE never holds back a byte that cannot start a sequence");
	buf_free(&b);

	s = term_safe("\x1b[31mred\x1b[0m", 0);
	is_str(s, "\\x1b[31mred\\x1b[0m", "term_safe");
	free(s);

	/* The engine's log is read on terminals too: log_q escapes C1 as well as C0. */
	is_str(log_q("a\xc2\x9b" "31mb"), "\"a\\u009b31mb\"", "log_q: a C1 CSI is escaped");
	is_str(log_q("caf\xc3\xa9"), "caf\xc3\xa9", "log_q: other UTF-8 stays as it is");
	s = xcalloc(1, 2001);
	for (i = 0; i < 2000; i += 2)
		memcpy(s + i, "\xc2\x9d", 2);
	ok(strlen(log_q(s)) < 512 && strncmp(log_q(s), "\"\\u009d", 7) == 0,
	    "log_q: a long run of C1 is cut within the buffer");
	free(s);
	return tap_done();
}
