/* fuzz.h: what the libFuzzer targets share: the entry point and the parts of an input. */
#ifndef SPUR_FUZZ_H
#define SPUR_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "source.h"

#define FUZZ_MAX_HEADERS	32

/*
 * An HTTP-ish request cut from a fuzz input: the first line is the hook (the
 * path segment after /hooks/), then "Name: value" header lines up to the first
 * empty line, then the body. Every part points into one NUL-terminated copy.
 */
struct fuzz_req {
	char		*copy;
	const char	*hook;
	struct header	 headers[FUZZ_MAX_HEADERS];
	size_t		 nheaders;
	const char	*body;
	size_t		 len;
};

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A NUL-terminated copy of the input (inputs may hold NULs; they stay). */
char	*fuzz_strndup(const uint8_t *, size_t);
void	 fuzz_req_parse(struct fuzz_req *, const uint8_t *, size_t);
void	 fuzz_req_free(struct fuzz_req *);
/*
 * A private directory made once per process (removed at exit), so file-based
 * loaders can be fed without leaving files behind.
 */
const char *fuzz_tmpdir(void);
/* Writes data to path (replacing it); aborts on failure: that is the harness's bug. */
void	 fuzz_write_file(const char *path, const uint8_t *, size_t);

#endif
