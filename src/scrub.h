/* scrub.h: what a reader would not see, and secret values kept out of what spur writes down or posts. */
#ifndef SPUR_SCRUB_H
#define SPUR_SCRUB_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct engine;
struct secret;

/* Values shorter than this are too common to replace (a 3-byte secret would eat words). */
#define SCRUB_MIN_LEN	4

/*
 * One UTF-8 character of s, strictly (no overlongs, surrogates or values past
 * U+10FFFF): its length; an invalid sequence gives U+FFFD and the length of
 * its maximal valid prefix, or 1. len must be at least 1.
 */
size_t	 scrub_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
/*
 * Strips what a human reader would not see: HTML comments, zero-width, bidi,
 * tag and other default-ignorable characters, control characters but "\n"
 * and "\t"; invalid UTF-8 becomes U+FFFD, CRLF and U+2028/9 become LF.
 * escapes: a terminal escape sequence goes as a whole (what a terminal shows),
 * else only its control character (what a browser shows). Caller frees.
 */
char	*scrub_unseen(const char *, size_t, int escapes);
/*
 * text with every secret value of at least SCRUB_MIN_LEN bytes replaced by
 * "[secret]": as written, percent-encoded, hex (any case) or base64 (standard
 * or URL-safe, padded or not, at any alignment inside a longer encoding),
 * also where only a reader would see it whole (split by invisible characters
 * or HTML comments, written as HTML entities, split by markup a destination
 * renders as nothing), and the longer half of a value at the text's start or
 * end. Text holding no secret comes back byte for byte. NULL gives NULL;
 * caller frees.
 */
char	*scrub_secrets(const char *text, const struct secret *const *, size_t n);
/* scrub_secrets with every secret of the engine's current config (on the loop). */
char	*scrub_for_engine(struct engine *, const char *text);
/* The same, for a report's text (every configured secret value replaced by [secret]). */
char	*report_scrub(struct engine *, const char *);

#endif
