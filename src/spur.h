/* spur.h: what every file of spur shares: allocation, logging, buffers, small helpers. */
#ifndef SPUR_H
#define SPUR_H

#include "config.h"

#include <sys/types.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SPUR_ARRLEN(a) (sizeof(a) / sizeof((a)[0]))

/* xmalloc.c: allocation that never returns NULL (out of memory is fatal). */
void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xrealloc(void *, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
/* NULL-terminated lists of strings (util.c): a copy (NULL stays NULL), free, length, membership, append. */
char	**strv_dup(char *const *);
void	 strv_free(char **);
size_t	 strv_len(char *const *);
int	 strv_has(char *const *, const char *);
void	 strv_add(char ***, const char *);
char	*xstrndup(const char *, size_t);
int	 xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));
int	 xvasprintf(char **, const char *, va_list);
char	*xprintf(const char *, ...) __attribute__((format(printf, 1, 2)));
void	 freezero_str(char *);

/* log.c: one line per happening, key=value, to stderr. */
enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
void	 log_init(enum log_level, const char *);
void	 log_set_level(enum log_level);
/* log.format: json: each line one JSON object instead of key=value. */
void	 log_set_json(int);
enum log_level log_get_level(void);
void	 log_msg(enum log_level, const char *, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
__attribute__((noreturn, format(printf, 1, 2)))
void	 fatal(const char *, ...);
/* Quotes a value for key=value logs: bare when safe, else "..." with escapes; static buffer ring. */
const char *log_q(const char *);

/* buf.c: a growable byte buffer with an optional bound. */
struct buf {
	char	*data;
	size_t	 len;
	size_t	 cap;
	size_t	 max;	/* 0: unbounded */
};
void	 buf_init(struct buf *, size_t max);
void	 buf_free(struct buf *);
int	 buf_add(struct buf *, const void *, size_t);	/* -1 when max reached */
int	 buf_adds(struct buf *, const char *);
int	 buf_addf(struct buf *, const char *, ...) __attribute__((format(printf, 2, 3)));
int	 buf_addc(struct buf *, char);
/* s percent-encoded for a URL's query or path (RFC 3986 unreserved characters kept). */
int	 buf_addq(struct buf *, const char *s);
char	*buf_cstr(struct buf *);	/* NUL-terminated view, still owned by buf */
char	*buf_take(struct buf *);	/* NUL-terminated, caller frees, buf emptied */
void	 buf_reset(struct buf *);

/* util.c */
int	 parse_duration(const char *, long long *secs, char **cause);
/* The same, in milliseconds, with ms as a unit too (config timers). */
int	 parse_duration_ms(const char *, long long *ms, char **cause);
char	*format_duration_ms(long long ms, char *out, size_t len);
int	 parse_size(const char *, unsigned long long *bytes, char **cause);
char	*format_time(int64_t ms, char *out, size_t len);	/* ISO 8601 UTC with ms */
int64_t	 now_ms(void);
int	 mkdir_p(const char *, mode_t);
/*
 * data_dir's mode from what it is: 0750 when its group may already list it
 * and others may not (the Debian package's spur group, for the read-only
 * CLI), else 0700. The store's files follow it (0640 or 0600).
 */
mode_t	 data_dir_mode(mode_t);
/* safefs.c: on what a sandbox can write, by descriptors, never following a link. */
int	 rm_rf(const char *);
/* Whether a regular file under dir matches a relative glob (no link followed, no ".."). */
int	 safefs_glob_file(const char *dir, const char *pattern);
/* The same in the directory open as fd (not closed). */
int	 safefs_glob_at(int fd, const char *pattern);
/* Disk usage of the tree at path, no link followed; -1 if it cannot be read whole. */
int	 safefs_du(const char *path, unsigned long long *bytes);
/* The same of the tree open as fd (closed here). */
int	 safefs_du_fd(int fd, unsigned long long *bytes);
/* What uid from owns in the tree at path becomes uid:gid's, links themselves only. */
int	 safefs_chown(const char *path, uid_t from, uid_t uid, gid_t gid);
/* The same on the directory open as fd (closed here). */
int	 safefs_chown_fd(int fd, uid_t from, uid_t uid, gid_t gid);
/* rm_rf of name in the directory open as parent (a link is removed as itself). */
int	 safefs_remove_at(int parent, const char *name);
char	*path_join(const char *, const char *);
/* The length of a URL without its trailing '/'s: what a path is put after ("%.*s/x"). */
int	 url_base_len(const char *);
char	*credential_path(const char *name, char **cause);
char	*path_dirname(const char *);
int	 read_file(const char *, size_t max, char **out, size_t *len, char **cause);
/* Where read_file turns when open says EACCES (the root helper, once the engine dropped). */
void	 read_file_set_fallback(int (*)(const char *));
int	 glob_match(const char *pattern, const char *s);	/* shell-style, fnmatch */
int	 valid_name(const char *);	/* [A-Za-z0-9][A-Za-z0-9_.-]* */
/* The one of names (NULL-terminated) a typo s likely meant, or NULL: "did you mean". */
const char *name_suggest(const char *const *names, const char *s);

/* crypto.c: one HMAC helper, one hash, encodings, constant-time compare, random ids. */
void	 hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
	     unsigned char out[32]);
void	 sha256(const void *, size_t, unsigned char out[32]);
/* CRC-32C of n bytes, going on from crc (0 to start): crc32c(crc32c(0, a), b) is a's and b's. */
uint32_t crc32c(uint32_t crc, const void *, size_t n);
/*
 * crypto.c: Standard Webhooks (source-webhook.c, also signing source-api.c's callbacks):
 * the HMAC key of a "whsec_" + base64 secret (the whsec_ is optional), -1 when
 * it is not base64 of at least one byte; and HMAC-SHA256 of id "." ts "." body.
 */
int	 webhook_standard_key(const void *secret, size_t len, unsigned char **key, size_t *keylen);
void	 webhook_standard_hmac(const void *key, size_t keylen, const char *id, const char *ts,
	     const void *body, size_t len, unsigned char out[32]);
/* util.c: a little-endian u32 in 4 bytes, and back (the payload log's formats). */
void	 le32_put(unsigned char *, uint32_t);
uint32_t le32_get(const unsigned char *);
void	 hex_encode(const unsigned char *, size_t, char *out);	/* out: 2n+1 */
int	 hex_decode(const char *, size_t, unsigned char *out, size_t outlen);
/*
 * term.c: the length of the UTF-8 sequence at s, its code point in *cp: 1 to
 * 4; 0 when it is not valid UTF-8; -1 when it is a valid start cut short.
 */
int	 utf8_len(const unsigned char *s, size_t len, uint32_t *cp);
int	 hex_value(char);	/* one hex digit's value, either case; -1 for none */
char	*base64_encode(const unsigned char *, size_t);
/* base64url without padding (JWT's encoding; keys, cookies, links). */
char	*base64url_encode(const unsigned char *, size_t);
int	 base64_decode(const char *, size_t, unsigned char **out, size_t *outlen);
int	 ct_equal(const void *, const void *, size_t);
void	 random_bytes(void *, size_t);
char	*random_id(const char *prefix);	/* prefix + 20 base32 chars (100 bits) */
/*
 * prefix + 20 base32 chars: the time in ms, then 50 random bits. Ids made
 * later sort after (per ms), so a store index on them grows at its end
 * instead of touching a random page per insert.
 */
char	*time_id(const char *prefix);

#endif
