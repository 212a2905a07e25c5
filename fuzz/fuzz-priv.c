/*
 * fuzz-priv.c: the root helper's request decoder (priv_decode) and, for the
 * directory requests, its checks (priv_helper_handle on a data_dir of the
 * harness's own), the jobs done in the helper itself (GLOB, DU) and the
 * checks every job passes before it forks (its directory, uid, names and
 * descriptors). Input: a struct priv_hdr, then the body. A body that decodes
 * must encode back to the same bytes.
 */
#include "spur.h"
#include "conf.h"
#include "priv.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct priv_helper *
fuzz_helper(void)
{
	static struct priv_helper	*h;
	static struct config		 cf;
	char				*cause = NULL;

	if (h != NULL)
		return h;
	cf.data_dir = (char *)fuzz_tmpdir();
	cf.sandbox.uid_first = 900000000;
	cf.sandbox.uid_last = 900000100;
	if ((h = priv_helper_create(&cf, getuid(), getgid(), &cause)) == NULL)
		abort();	/* the harness's own directory */
	return h;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct priv_msg	 m, ans;
	struct buf	 b;
	char		*cause = NULL;

	if (size < sizeof m.hdr)
		return 0;
	memset(&m, 0, sizeof m);
	memcpy(&m.hdr, data, sizeof m.hdr);
	m.hdr.nfds = 0;		/* no descriptors ride with a file */
	if (priv_decode(&m, data + sizeof m.hdr, size - sizeof m.hdr, &cause) != 0) {
		if (cause == NULL)
			abort();	/* a refusal must say why */
		free(cause);
		return 0;
	}
	buf_init(&b, PRIV_BODY_MAX);
	priv_encode(&m, &b);
	if (b.len != size - sizeof m.hdr || memcmp(b.data, data + sizeof m.hdr, b.len) != 0)
		abort();	/* decode and encode disagree */
	buf_free(&b);
	/* PACK, UNPACK and WRITE fork a child once their checks pass: not here. */
	if (m.hdr.type == PRIV_PREPARE_DIR || m.hdr.type == PRIV_REMOVE_DIR ||
	    m.hdr.type == PRIV_CHOWN || m.hdr.type == PRIV_SIGNAL || m.hdr.type == PRIV_OPEN_FILE ||
	    (m.hdr.type == PRIV_JOB && (m.u.job.job == PRIV_JOB_GLOB ||
	    m.u.job.job == PRIV_JOB_DU || m.u.job.dir.uid == 0))) {
		priv_helper_handle(fuzz_helper(), &m, &ans);
		if (ans.hdr.type != PRIV_OK && ans.hdr.type != PRIV_ERR)
			abort();
		for (uint32_t i = 0; i < ans.hdr.nfds; i++)
			close(ans.fds[i]);
		priv_msg_clear(&ans);
	}
	priv_msg_clear(&m);
	return 0;
}
