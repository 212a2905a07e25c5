/* util.c: durations, sizes, times, paths and files: small helpers with no better home. */
#include "spur.h"

#include <sys/stat.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/*
 * Durations: a non-negative integer and one unit of s, m, h, d; with ms_ok,
 * ms too (the config's timers, which tests set below a second).
 */
static int
duration_parse(const char *s, int ms_ok, long long *ms, char **cause)
{
	char		*end;
	long long	 n, mult;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		goto bad;
	n = strtoll(s, &end, 10);
	if (errno != 0 || n < 0)
		goto bad;
	/* Nothing is the same in every unit (schedules.catch_up: 0 disables it). */
	if (n == 0 && *end == '\0') {
		*ms = 0;
		return 0;
	}
	if (ms_ok && strcmp(end, "ms") == 0)
		mult = 1;
	else if (strcmp(end, "s") == 0)
		mult = 1000;
	else if (strcmp(end, "m") == 0)
		mult = 60 * 1000;
	else if (strcmp(end, "h") == 0)
		mult = 3600 * 1000;
	else if (strcmp(end, "d") == 0)
		mult = 86400 * 1000;
	else
		goto bad;
	if (n > (long long)1e15 / mult)
		goto bad;
	*ms = n * mult;
	return 0;
bad:
	xasprintf(cause, "invalid duration \"%s\" (expected e.g. %s90s, 20m, 2h, 7d)", s,
	    ms_ok ? "500ms, " : "");
	return -1;
}

int
parse_duration(const char *s, long long *secs, char **cause)
{
	long long	 ms;

	if (duration_parse(s, 0, &ms, cause) != 0)
		return -1;
	*secs = ms / 1000;
	return 0;
}

int
parse_duration_ms(const char *s, long long *ms, char **cause)
{
	return duration_parse(s, 1, ms, cause);
}

/* ms as a duration would be written: in the largest unit that says it exactly. */
char *
format_duration_ms(long long ms, char *out, size_t len)
{
	static const struct { const char *u; long long m; } units[] = {
		{ "d", 86400 * 1000 }, { "h", 3600 * 1000 }, { "m", 60 * 1000 }, { "s", 1000 },
	};
	size_t	 i;

	if (ms == 0) {
		snprintf(out, len, "0s");
		return out;
	}
	for (i = 0; i < SPUR_ARRLEN(units); i++) {
		if (ms % units[i].m == 0) {
			snprintf(out, len, "%lld%s", ms / units[i].m, units[i].u);
			return out;
		}
	}
	snprintf(out, len, "%lldms", ms);
	return out;
}

/* Sizes: an integer and a unit of B, KiB, MiB, GiB (KB, MB, GB accepted as the same). */
int
parse_size(const char *s, unsigned long long *bytes, char **cause)
{
	static const struct { const char *u; unsigned long long m; } units[] = {
		{ "", 1 }, { "B", 1 }, { "KiB", 1ULL << 10 }, { "MiB", 1ULL << 20 },
		{ "GiB", 1ULL << 30 }, { "TiB", 1ULL << 40 }, { "K", 1ULL << 10 },
		{ "KB", 1ULL << 10 }, { "M", 1ULL << 20 }, { "MB", 1ULL << 20 },
		{ "G", 1ULL << 30 }, { "GB", 1ULL << 30 },
	};
	char			*end;
	unsigned long long	 n;
	size_t			 i;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		goto bad;
	n = strtoull(s, &end, 10);
	if (errno != 0)
		goto bad;
	for (i = 0; i < SPUR_ARRLEN(units); i++) {
		if (strcmp(end, units[i].u) == 0) {
			if (n > (1ULL << 62) / units[i].m)
				goto bad;
			*bytes = n * units[i].m;
			return 0;
		}
	}
bad:
	xasprintf(cause, "invalid size \"%s\" (expected e.g. 512KiB, 25MiB, 4GiB)", s);
	return -1;
}

int64_t
now_ms(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *
format_time(int64_t ms, char *out, size_t len)
{
	time_t		 t = (time_t)(ms / 1000);
	struct tm	 tm;
	char		 tmp[32];

	gmtime_r(&t, &tm);
	strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s.%03dZ", tmp, (int)(ms % 1000));
	return out;
}

mode_t
data_dir_mode(mode_t now)
{
	return (now & 0057) == 0050 ? 0750 : 0700;
}

int
mkdir_p(const char *path, mode_t mode)
{
	char	*p, *s;
	int	 r = 0;

	s = xstrdup(path);
	for (p = s + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(s, mode) != 0 && errno != EEXIST) {
			r = -1;
			goto out;
		}
		*p = '/';
	}
	if (mkdir(s, mode) != 0 && errno != EEXIST)
		r = -1;
out:
	free(s);
	return r;
}

/*
 * A secret reference credential:NAME's file: NAME in $CREDENTIALS_DIRECTORY,
 * where systemd's LoadCredential= puts it for the service (from a shell, the
 * variable names the directory that holds the sources). NULL with *cause.
 */
char *
credential_path(const char *name, char **cause)
{
	const char	*dir = getenv("CREDENTIALS_DIRECTORY");

	if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-@") !=
	    strlen(name)) {
		*cause = xprintf("credential:%s: a credential's name is letters, digits, "
		    "\".\", \"_\", \"-\" and \"@\" (LoadCredential=NAME:PATH's NAME)", name);
		return NULL;
	}
	if (dir == NULL || *dir != '/') {
		*cause = xprintf("credential:%s is read from $CREDENTIALS_DIRECTORY, which is not "
		    "set (systemd sets it for a unit with LoadCredential=; from a shell, name the "
		    "directory of the sources: sudo CREDENTIALS_DIRECTORY=/etc/spur spur check)", name);
		return NULL;
	}
	return path_join(dir, name);
}

int
url_base_len(const char *u)
{
	size_t	 len = u != NULL ? strlen(u) : 0;

	while (len > 0 && u[len - 1] == '/')
		len--;
	return (int)len;
}

char *
path_join(const char *a, const char *b)
{
	if (b[0] == '/' || a == NULL || a[0] == '\0')
		return xstrdup(b);
	if (a[strlen(a) - 1] == '/')
		return xprintf("%s%s", a, b);
	return xprintf("%s/%s", a, b);
}

char *
path_dirname(const char *p)
{
	const char	*slash = strrchr(p, '/');

	if (slash == NULL)
		return xstrdup(".");
	if (slash == p)
		return xstrdup("/");
	return xstrndup(p, slash - p);
}

/* Reads a whole file, refusing one larger than max bytes; cause may be NULL. */
static int	(*read_file_fallback)(const char *);

void
read_file_set_fallback(int (*open_cb)(const char *))
{
	read_file_fallback = open_cb;
}

int
read_file(const char *path, size_t max, char **out, size_t *len, char **cause)
{
	struct buf	 b;
	char		 tmp[8192];
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 &&
	    (errno != EACCES || read_file_fallback == NULL ||
	    (fd = read_file_fallback(path)) == -1)) {
		if (cause != NULL)
			xasprintf(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	buf_init(&b, max);
	for (;;) {
		n = read(fd, tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (cause != NULL)
				xasprintf(cause, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		if (buf_add(&b, tmp, n) != 0) {
			if (cause != NULL)
				xasprintf(cause, "%s: larger than %zu bytes", path, max);
			goto fail;
		}
	}
	close(fd);
	if (len != NULL)
		*len = b.len;
	*out = buf_take(&b);
	return 0;
fail:
	close(fd);
	buf_free(&b);
	return -1;
}

int
glob_match(const char *pattern, const char *s)
{
	return fnmatch(pattern, s, 0) == 0;
}

/* Edit distance, bounded: enough to suggest the key a typo meant. */
static size_t
edit_distance(const char *a, const char *b)
{
	size_t	 la = strlen(a), lb = strlen(b), i, j, prev[64], cur[64], c;

	if (la >= 63 || lb >= 63)
		return 99;
	for (j = 0; j <= lb; j++)
		prev[j] = j;
	for (i = 1; i <= la; i++) {
		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			c = prev[j - 1] + (a[i - 1] != b[j - 1]);
			if (prev[j] + 1 < c)
				c = prev[j] + 1;
			if (cur[j - 1] + 1 < c)
				c = cur[j - 1] + 1;
			cur[j] = c;
		}
		memcpy(prev, cur, (lb + 1) * sizeof *prev);
	}
	return prev[lb];
}

const char *
name_suggest(const char *const *names, const char *s)
{
	size_t	 d, best = 3;
	int	 i, found = -1;

	/* A short word is within two edits of too much. */
	if (strlen(s) < 4)
		best = 2;
	for (i = 0; names[i] != NULL; i++) {
		if ((d = edit_distance(names[i], s)) < best) {
			best = d;
			found = i;
		}
	}
	return found >= 0 ? names[found] : NULL;
}

int
valid_name(const char *s)
{
	const char	*p;

	if (!isalnum((unsigned char)*s))
		return 0;
	for (p = s; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
			return 0;
	}
	return p - s <= 128;
}

char **
strv_dup(char *const *l)
{
	char	**d;
	size_t	  i, n;

	if (l == NULL)
		return NULL;
	n = strv_len(l);
	d = xcalloc(n + 1, sizeof *d);
	for (i = 0; i < n; i++)
		d[i] = xstrdup(l[i]);
	return d;
}

void
strv_free(char **l)
{
	size_t	 i;

	for (i = 0; l != NULL && l[i] != NULL; i++)
		free(l[i]);
	free(l);
}

size_t
strv_len(char *const *l)
{
	size_t	 n = 0;

	while (l != NULL && l[n] != NULL)
		n++;
	return n;
}

int
strv_has(char *const *l, const char *s)
{
	size_t	 i;

	for (i = 0; s != NULL && l != NULL && l[i] != NULL; i++)
		if (strcmp(l[i], s) == 0)
			return 1;
	return 0;
}

void
strv_add(char ***l, const char *s)
{
	size_t	 n = strv_len(*l);

	*l = xreallocarray(*l, n + 2, sizeof **l);
	(*l)[n] = xstrdup(s);
	(*l)[n + 1] = NULL;
}

void
le32_put(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

uint32_t
le32_get(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}
