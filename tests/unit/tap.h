/* tap.h: a few TAP helpers for the C unit tests (run by automake's tap-driver). */
#ifndef SPUR_TAP_H
#define SPUR_TAP_H

#include <stdio.h>
#include <stdarg.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)

static inline int tap_ok(int, const char *, int, const char *, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tap_is_str(const char *, const char *, const char *, int, const char *, ...)
    __attribute__((format(printf, 5, 6)));
static inline int tap_is_int(long long, long long, const char *, int, const char *, ...)
    __attribute__((format(printf, 5, 6)));

static inline int
tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list	 ap;

	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		printf("#   failed at %s:%d\n", file, line);
		tap_failed++;
	}
	fflush(stdout);
	return cond;
}

static inline int
tap_is_str(const char *got, const char *want, const char *file, int line, const char *fmt, ...)
{
	int	 eq = (got == NULL && want == NULL) ||
	    (got != NULL && want != NULL && strcmp(got, want) == 0);
	char	 name[512];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	tap_ok(eq, file, line, "%s", name);
	if (!eq)
		printf("#   got:  %s\n#   want: %s\n", got ? got : "(null)", want ? want : "(null)");
	return eq;
}

static inline int
tap_is_int(long long got, long long want, const char *file, int line, const char *fmt, ...)
{
	char	 name[512];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	tap_ok(got == want, file, line, "%s", name);
	if (got != want)
		printf("#   got:  %lld\n#   want: %lld\n", got, want);
	return got == want;
}

/* A check that cannot run here, and why: counted, never a silent pass. */
static inline void
tap_skip(const char *why)
{
	printf("ok %d # SKIP %s\n", ++tap_n, why);
	fflush(stdout);
}

static inline int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
