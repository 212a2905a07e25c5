/* fold.h: the ASCII a character imitates, so words written with look-alike letters can be matched. */
#ifndef SPUR_FOLD_H
#define SPUR_FOLD_H

#include <stddef.h>
#include <stdint.h>

#define FOLD_MAX	4	/* bytes fold_char writes at most */

/*
 * The lowercase ASCII letters or digits a reader takes cp for: "a" for "A",
 * "Ａ", "𝐀", "𝔄", "ⓐ", "⒜", "ᴬ", "á", Cyrillic "а", Cherokee "Ꭺ", Lisu "ꓮ";
 * "da" for "㍲". Writes at most FOLD_MAX bytes (no NUL) and returns how many;
 * 0 for anything else (punctuation, spaces, combining marks, other letters).
 */
size_t	fold_char(uint32_t cp, char *out);

#endif
