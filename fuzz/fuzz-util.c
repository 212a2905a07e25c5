/* fuzz-util.c: helpers shared by the fuzz targets: request splitting and a scratch directory. */
#include "spur.h"
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char	*fuzz_dir;

char *
fuzz_strndup(const uint8_t *data, size_t size)
{
	char	*s = xmalloc(size + 1);

	if (size != 0)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Cuts one line off *p (up to end), NUL-terminating it in place; NULL at the end. */
static char *
fuzz_line(char **p, char *end)
{
	char	*line = *p, *nl;

	if (line >= end)
		return NULL;
	if ((nl = memchr(line, '\n', end - line)) == NULL) {
		*p = end;
		return line;
	}
	*nl = '\0';
	if (nl > line && nl[-1] == '\r')
		nl[-1] = '\0';
	*p = nl + 1;
	return line;
}

void
fuzz_req_parse(struct fuzz_req *fr, const uint8_t *data, size_t size)
{
	char	*p, *end, *line, *colon;

	memset(fr, 0, sizeof *fr);
	fr->copy = fuzz_strndup(data, size);
	p = fr->copy;
	end = fr->copy + size;
	if ((line = fuzz_line(&p, end)) == NULL)
		line = "";
	fr->hook = line;
	while ((line = fuzz_line(&p, end)) != NULL && *line != '\0') {
		if (fr->nheaders == FUZZ_MAX_HEADERS)
			continue;
		if ((colon = strchr(line, ':')) == NULL)
			continue;
		*colon++ = '\0';
		while (*colon == ' ')
			colon++;
		fr->headers[fr->nheaders].name = line;
		fr->headers[fr->nheaders].value = colon;
		fr->nheaders++;
	}
	fr->body = p;
	fr->len = end - p;
}

void
fuzz_req_free(struct fuzz_req *fr)
{
	free(fr->copy);
	memset(fr, 0, sizeof *fr);
}

static void
fuzz_tmpdir_remove(void)
{
	rm_rf(fuzz_dir);
	free(fuzz_dir);
	fuzz_dir = NULL;
}

const char *
fuzz_tmpdir(void)
{
	const char	*base;
	char		*tmpl;

	if (fuzz_dir != NULL)
		return fuzz_dir;
	if ((base = getenv("TMPDIR")) == NULL || *base == '\0')
		base = "/tmp";
	tmpl = xprintf("%s/spur-fuzz.XXXXXX", base);
	if (mkdtemp(tmpl) == NULL)
		fatal("mkdtemp %s: %s", tmpl, strerror(errno));
	fuzz_dir = tmpl;
	atexit(fuzz_tmpdir_remove);
	return fuzz_dir;
}

void
fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
	int	 fd;
	ssize_t	 n;
	size_t	 off = 0;

	if ((fd = open(path, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600)) == -1)
		fatal("open %s: %s", path, strerror(errno));
	while (off < size) {
		if ((n = write(fd, data + off, size - off)) == -1) {
			if (errno == EINTR)
				continue;
			fatal("write %s: %s", path, strerror(errno));
		}
		off += n;
	}
	close(fd);
}
