/* test-archive.c: an agent's session files packed from a hostile home and unpacked on another node. */
#include "spur.h"
#include "archive.h"
#include "tap.h"

#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char	*root;

static void
put(const char *rel, const char *text)
{
	char	*p = path_join(root, rel), *dir = path_dirname(p);
	FILE	*f;

	mkdir_p(dir, 0700);
	if ((f = fopen(p, "w")) != NULL) {
		fputs(text, f);
		fclose(f);
	}
	free(dir);
	free(p);
}

static char *
slurp(const char *dir, const char *rel)
{
	char	*p = path_join(dir, rel), *data = NULL, *cause = NULL;
	size_t	 len;

	if (read_file(p, 1 << 20, &data, &len, &cause) != 0) {
		free(cause);
		data = NULL;
	}
	free(p);
	return data;
}

/* One record of the archive's form, by hand: a path and its bytes. */
static void
record(struct buf *b, const char *path, const char *data)
{
	unsigned char	 h[4];
	uint32_t	 n = (uint32_t)strlen(path);
	uint64_t	 size = strlen(data);
	unsigned char	 m[12] = { 0, 0, 1, 0x80, (unsigned char)(size >> 56), 0, 0, 0, 0, 0, 0,
			    (unsigned char)size };

	h[0] = n >> 24; h[1] = n >> 16; h[2] = n >> 8; h[3] = n;
	buf_add(b, h, 4);
	buf_adds(b, path);
	buf_add(b, m, 12);
	buf_adds(b, data);
}

int
main(void)
{
	char		 tmpl[] = "/tmp/spur-archive-XXXXXX", tmpl2[] = "/tmp/spur-archive-XXXXXX";
	char		*home2, *data = NULL, *cause = NULL, *p, *got, *big, *outside, *link;
	size_t		 len = 0;
	struct buf	 b;
	struct stat	 sb;
	int		 rc;

	root = mkdtemp(tmpl);
	home2 = mkdtemp(tmpl2);
	outside = path_join(root, "secret.txt");
	put("secret.txt", "engine-only");
	put(".claude/projects/-workspace/ses_1.jsonl", "{\"turn\":1}\n{\"turn\":2}\n");
	put(".claude/settings.json", "{}");
	put(".cache/big", "not the agent's state");
	/* What a hostile agent leaves: a link out of its home, a pipe that would block a reader. */
	link = path_join(root, ".claude/projects/escape");
	ok(symlink(outside, link) == 0, "a link to a file outside the agent's state");
	p = path_join(root, ".claude/fifo");
	ok(mkfifo(p, 0600) == 0, "and a pipe");
	free(p);

	rc = archive_pack(root, ".claude", getuid(), getgid(), ARCHIVE_MAX, &data, &len, &cause);
	is_int(rc, 0, "the agent's state directory is packed (%s)", cause != NULL ? cause : "");
	ok(data != NULL && memmem(data, len, "{\"turn\":2}", 10) != NULL, "with its conversation");
	ok(data != NULL && memmem(data, len, "engine-only", 11) == NULL,
	    "never through a link (the file it points at is not in it)");
	ok(data != NULL && memmem(data, len, "not the agent's state", 21) == NULL,
	    "nothing outside the state directory");
	rc = archive_unpack(home2, data, len, getuid(), getgid(), &cause);
	is_int(rc, 0, "it unpacks into an empty home");
	got = slurp(home2, ".claude/projects/-workspace/ses_1.jsonl");
	is_str(got, "{\"turn\":1}\n{\"turn\":2}\n", "the conversation is there byte for byte");
	free(got);
	got = slurp(home2, ".claude/settings.json");
	is_str(got, "{}", "and the other files");
	free(got);
	p = path_join(home2, ".claude/projects/escape");
	ok(lstat(p, &sb) != 0, "the link is not made again");
	free(p);
	p = path_join(home2, ".claude/fifo");
	ok(lstat(p, &sb) != 0, "nor the pipe");
	free(p);
	rc = archive_unpack(home2, data, len, getuid(), getgid(), &cause);
	ok(rc == -1 && cause != NULL && strstr(cause, "File exists") != NULL,
	    "unpacked again over its own files: refused, nothing written over (%s)",
	    cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	free(data);
	data = NULL;

	rc = archive_pack(root, ".codex", getuid(), getgid(), ARCHIVE_MAX, &data, &len, &cause);
	is_int(rc, 1, "an agent that kept nothing: nothing to pack");
	rc = archive_pack(root, ".claude", getuid(), getgid(), 16, &data, &len, &cause);
	ok(rc == -1 && cause != NULL && strstr(cause, "over 16 bytes") != NULL,
	    "over the bound: none of it is kept, and the reason says so");
	free(cause);
	cause = NULL;
	/* A state directory that is itself a link is not followed. */
	ok(symlink("/etc", (p = path_join(root, ".codex"))) == 0, "a state directory that is a link");
	free(p);
	rc = archive_pack(root, ".codex", getuid(), getgid(), ARCHIVE_MAX, &data, &len, &cause);
	is_int(rc, 1, "is taken for none");

	/* Archives that are not what archive_pack makes. */
	is_int(archive_unpack(home2, "nonsense", 8, getuid(), getgid(), &cause), -1,
	    "a blob that is not an archive is refused");
	free(cause);
	cause = NULL;
	buf_init(&b, 0);
	buf_adds(&b, "SPURARC1");
	record(&b, "../escaped", "x");
	is_int(archive_unpack(home2, b.data, b.len, getuid(), getgid(), &cause), -1,
	    "a path with .. is refused");
	p = path_join(root, "escaped");
	ok(stat(p, &sb) != 0, "and nothing is written outside the home");
	free(p);
	free(cause);
	cause = NULL;
	buf_reset(&b);
	buf_adds(&b, "SPURARC1");
	record(&b, "/etc/evil", "x");
	is_int(archive_unpack(home2, b.data, b.len, getuid(), getgid(), &cause), -1,
	    "an absolute path is refused");
	free(cause);
	cause = NULL;
	buf_reset(&b);
	buf_adds(&b, "SPURARC1");
	record(&b, "a/b", "0123456789");
	b.len -= 4;
	is_int(archive_unpack(home2, b.data, b.len, getuid(), getgid(), &cause), -1,
	    "a cut archive is refused");
	free(cause);
	cause = NULL;
	/* A link planted where a directory of the archive goes is not followed. */
	big = path_join(home2, "planted");
	ok(symlink(root, big) == 0, "a link planted in the home");
	buf_reset(&b);
	buf_adds(&b, "SPURARC1");
	record(&b, "planted/x", "through the link");
	is_int(archive_unpack(home2, b.data, b.len, getuid(), getgid(), &cause), -1,
	    "is not gone through");
	p = path_join(root, "x");
	ok(stat(p, &sb) != 0, "  the file is not written where it points");
	free(p);
	free(cause);
	free(big);
	buf_free(&b);
	free(link);
	free(outside);
	rm_rf(root);
	rm_rf(home2);
	return tap_done();
}
