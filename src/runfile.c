/* runfile.c: what a run leaves for people to fetch (its change, its artifacts), kept where any node serves it. */
#include "spur.h"
#include "conf.h"
#include "serve.h"
#include "store.h"
#include "runfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *
runfile_path(struct engine *e, const char *run, const char *name)
{
	return xprintf("%s/runs/%s/%s", e->conf->data_dir, run, name);
}

static int
runfile_write_all(int fd, const char *p, size_t len)
{
	ssize_t	 n;

	for (; len > 0; p += n, len -= (size_t)n) {
		if ((n = write(fd, p, len)) < 0 && errno != EINTR)
			return -1;
		if (n < 0)
			n = 0;
	}
	return 0;
}

/* Written beside, then renamed over: a reader sees the old file or the new one whole. */
static int
runfile_write(const char *path, const void *data, size_t len, char **cause)
{
	char	*tmp = xprintf("%s.tmp", path);
	int	 fd, err, rc = -1;

	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640)) == -1) {
		xasprintf(cause, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	if (runfile_write_all(fd, data, len) != 0) {
		err = errno;
		close(fd);
		errno = err;
	} else if (close(fd) == 0 && rename(tmp, path) == 0)
		rc = 0;
	if (rc != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

int
runfile_keep(struct engine *e, const char *run, const char *name, const void *data, size_t len,
    char **cause)
{
	char	*path;
	int	 rc;

	if (store_shared(e->store))
		return store_run_file_put(e->store, run, name, data, len, cause);
	path = runfile_path(e, run, name);
	rc = runfile_write(path, data, len, cause);
	free(path);
	return rc;
}

int
runfile_read(struct engine *e, const char *run, const char *name, size_t max, char **data,
    size_t *len)
{
	char	*path, *cause = NULL;
	int	 rc;

	*data = NULL;
	*len = 0;
	if (store_shared(e->store)) {
		if ((rc = store_run_file_get(e->store, run, name, data, len)) == 0 && *len > max) {
			free(*data);
			*data = NULL;
			rc = 1;
		}
		return rc;
	}
	path = runfile_path(e, run, name);
	if (access(path, F_OK) != 0)
		rc = errno == ENOENT ? 1 : -1;
	else
		rc = read_file(path, max, data, len, &cause) == 0 ? 0 : -1;
	free(cause);
	free(path);
	return rc;
}
