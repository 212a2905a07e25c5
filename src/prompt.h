/* prompt.h: the one place that builds what an agent receives (SPEC section 7). */
#ifndef SPUR_PROMPT_H
#define SPUR_PROMPT_H

#include <stddef.h>
#include <jansson.h>

struct buf;
struct spur_event;

#define PROMPT_DATA_MAX	(64 * 1024)	/* bytes of free text (or payload) kept, after cleaning */
#define PROMPT_FIELD_MAX 1024		/* bytes of a one-line field (title, name, ...) kept */
#define PROMPT_NONCE_LEN 16	/* hex characters: 64 bits */

/*
 * The saved prompt verbatim, then the event's third-party fields as one
 * fenced data block whose markers carry nonce (the exact format is at the
 * top of prompt.c). nonce NULL, or not PROMPT_NONCE_LEN lowercase hex
 * digits: a fresh random one. Never fails; the caller frees the result.
 */
char	*prompt_build(const char *saved, const struct spur_event *, const char *nonce);
/*
 * The same, with more third-party fields inside the block after the source's
 * own (an object of label: string, in its order; a label the event already
 * gave is not repeated): what the clone learnt of a pull request.
 */
char	*prompt_build_with(const char *saved, const struct spur_event *, const char *nonce,
	     const json_t *more);
/* Whether the block shows ev's payload (a generic webhook's without text): read it first. */
int	 prompt_wants_payload(const struct spur_event *);
/*
 * For a system's fields (source.h prompt): a field from a path into the
 * event JSON (strings, numbers and booleans), and a list as one field,
 * "a, b, c" (its strings, or each item's key).
 */
void	 prompt_field_path(struct buf *, const char *label, const json_t *root,
	     const char *path);
void	 prompt_field_list(struct buf *, const char *label, const json_t *list,
	     const char *key);
/*
 * A forge's issue or pull request (its meta: number, is_pull_request, title,
 * head_ref, base_ref, fork, head_repo, label, labels), as fields.
 */
void	 prompt_forge_fields(struct buf *, const json_t *root);
/* A fresh random nonce: PROMPT_NONCE_LEN lowercase hex digits, caller frees. */
char	*prompt_nonce_new(void);
/*
 * Strips what a human reader would not see (zero-width, bidi, tags, control
 * characters and terminal escapes, HTML comments); invalid UTF-8 becomes
 * U+FFFD and CRLF becomes LF. Returns a NUL-terminated copy, caller frees.
 */
char	*prompt_clean(const char *, size_t);
/*
 * Defuses text that imitates a data block marker: on every line holding the
 * words SPUR DATA (any case, spacing, fullwidth or look-alike letters), the
 * angle brackets and their look-alikes become [ and ]. Expects cleaned text.
 */
char	*prompt_neutralize(const char *, size_t);

/* For prompt.c (prompt-text.c): a one-line field "label: value", cleaned and cut. */
void	 prompt_field(struct buf *, const char *label, const char *value);
/* The longest prefix of s, at most max bytes, that ends on a character boundary. */
size_t	 prompt_cut(const char *, size_t len, size_t max);
/* Whether nonce is PROMPT_NONCE_LEN lowercase hex digits. */
int	 prompt_nonce_valid(const char *);

#endif
