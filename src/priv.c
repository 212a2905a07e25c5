/* priv.c: the root helper's messages (a fixed header, typed bodies, descriptors) and the engine's client. */
#include "spur.h"
#include "priv.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

/* Bodies: u32 and u64 as they are in memory, strings as a u32 length then bytes. */
static void
priv_put(struct buf *b, const void *p, size_t len)
{
	if (buf_add(b, p, len) != 0)
		fatal("priv: body over its bound");
}

static void
priv_put_u32(struct buf *b, uint32_t v)
{
	priv_put(b, &v, sizeof v);
}

static void
priv_put_u64(struct buf *b, uint64_t v)
{
	priv_put(b, &v, sizeof v);
}

static void
priv_put_str(struct buf *b, const char *s)
{
	size_t	len = s != NULL ? strlen(s) : 0;

	priv_put_u32(b, (uint32_t)len);
	priv_put(b, s != NULL ? s : "", len);
}

static void
priv_put_strv(struct buf *b, char *const *v)
{
	size_t	i, n = v != NULL ? strv_len(v) : 0;

	priv_put_u32(b, (uint32_t)n);
	for (i = 0; i < n; i++)
		priv_put_str(b, v[i]);
}

static void
priv_put_dir(struct buf *b, const struct priv_dir *d)
{
	priv_put_u32(b, d->area);
	priv_put_str(b, d->session);
	priv_put_str(b, d->sub);
	priv_put_u32(b, d->uid);
	priv_put_u32(b, d->gid);
	priv_put_u32(b, d->from);
}

void
priv_encode(const struct priv_msg *m, struct buf *b)
{
	const struct priv_spawn	*s = &m->u.spawn;

	switch (m->hdr.type) {
	case PRIV_PREPARE_DIR:
	case PRIV_REMOVE_DIR:
	case PRIV_CHOWN:
		priv_put_dir(b, &m->u.dir);
		break;
	case PRIV_SPAWN:
		priv_put_u32(b, s->uid);
		priv_put_u32(b, s->gid);
		priv_put_u64(b, s->rlimit_data);
		priv_put_u64(b, s->rlimit_nproc);
		priv_put_u32(b, s->cwd_fd);
		priv_put_str(b, s->path);
		priv_put_str(b, s->cwd);
		priv_put_strv(b, s->argv);
		priv_put_strv(b, s->env);
		priv_put_strv(b, s->stage_src);
		priv_put_strv(b, s->stage_dst);
		priv_put_u64(b, s->stage_file);
		break;
	case PRIV_JOB:
		priv_put_dir(b, &m->u.job.dir);
		priv_put_u32(b, m->u.job.job);
		priv_put_str(b, m->u.job.arg);
		break;
	case PRIV_KILL_RUN:
	case PRIV_OPEN_FILE:
		priv_put_str(b, m->u.str);
		break;
	case PRIV_SIGNAL:
		priv_put_u32(b, (uint32_t)m->u.sig.pid);
		priv_put_u32(b, (uint32_t)m->u.sig.sig);
		priv_put_u32(b, (uint32_t)m->u.sig.ns_init);
		break;
	case PRIV_OK:
	case PRIV_EXIT:
		priv_put_u32(b, (uint32_t)m->u.answer.value);
		priv_put_u32(b, (uint32_t)m->u.answer.status);
		break;
	case PRIV_ERR:
		priv_put_u32(b, (uint32_t)m->u.answer.value);
		priv_put_str(b, m->u.answer.message);
		break;
	default:
		fatal("priv: encoding unknown type %u", m->hdr.type);
	}
}

/* A cursor over a body: every read checks what is left. */
struct priv_rd {
	const uint8_t	*p;
	size_t		 left;
	const char	*err;
};

static int
priv_get(struct priv_rd *r, void *out, size_t len)
{
	if (r->err != NULL)
		return -1;
	if (len > r->left) {
		r->err = "body too short";
		return -1;
	}
	memcpy(out, r->p, len);
	r->p += len;
	r->left -= len;
	return 0;
}

static uint32_t
priv_get_u32(struct priv_rd *r)
{
	uint32_t	v = 0;

	(void)priv_get(r, &v, sizeof v);
	return v;
}

static uint64_t
priv_get_u64(struct priv_rd *r)
{
	uint64_t	v = 0;

	(void)priv_get(r, &v, sizeof v);
	return v;
}

static char *
priv_get_str(struct priv_rd *r)
{
	uint32_t	 len = priv_get_u32(r);
	char		*s;

	if (r->err != NULL)
		return NULL;
	if (len > PRIV_STR_MAX || len > r->left) {
		r->err = len > PRIV_STR_MAX ? "string too long" : "body too short";
		return NULL;
	}
	if (memchr(r->p, '\0', len) != NULL) {
		r->err = "NUL in a string";
		return NULL;
	}
	s = xstrndup((const char *)r->p, len);
	r->p += len;
	r->left -= len;
	return s;
}

static char **
priv_get_strv(struct priv_rd *r)
{
	uint32_t	 n = priv_get_u32(r), i;
	char		**v;

	if (r->err != NULL)
		return NULL;
	/* Each string takes at least its length: a count beyond that is a lie. */
	if (n > PRIV_STRV_MAX || n > r->left / sizeof(uint32_t)) {
		r->err = "too many strings";
		return NULL;
	}
	v = xcalloc((size_t)n + 1, sizeof *v);
	for (i = 0; i < n; i++) {
		if ((v[i] = priv_get_str(r)) == NULL)
			break;
	}
	return v;
}

static void
priv_get_dir(struct priv_rd *r, struct priv_dir *d)
{
	d->area = priv_get_u32(r);
	d->session = priv_get_str(r);
	d->sub = priv_get_str(r);
	d->uid = priv_get_u32(r);
	d->gid = priv_get_u32(r);
	d->from = priv_get_u32(r);
}

int
priv_decode(struct priv_msg *m, const uint8_t *body, size_t len, char **cause)
{
	struct priv_rd		 r = { body, len, NULL };
	struct priv_spawn	*s = &m->u.spawn;

	memset(&m->u, 0, sizeof m->u);
	if (len > PRIV_BODY_MAX || len != m->hdr.len) {
		*cause = xprintf("%s: body length %zu", priv_type_name(m->hdr.type), len);
		return -1;
	}
	if (m->hdr.nfds > PRIV_FDS_MAX) {
		*cause = xprintf("%s: %u descriptors", priv_type_name(m->hdr.type),
		    m->hdr.nfds);
		return -1;
	}
	switch (m->hdr.type) {
	case PRIV_PREPARE_DIR:
	case PRIV_REMOVE_DIR:
	case PRIV_CHOWN:
		priv_get_dir(&r, &m->u.dir);
		break;
	case PRIV_JOB:
		priv_get_dir(&r, &m->u.job.dir);
		m->u.job.job = priv_get_u32(&r);
		m->u.job.arg = priv_get_str(&r);
		break;
	case PRIV_KILL_RUN:
	case PRIV_OPEN_FILE:
		m->u.str = priv_get_str(&r);
		break;
	case PRIV_SPAWN:
		s->uid = priv_get_u32(&r);
		s->gid = priv_get_u32(&r);
		s->rlimit_data = priv_get_u64(&r);
		s->rlimit_nproc = priv_get_u64(&r);
		s->cwd_fd = priv_get_u32(&r);
		s->path = priv_get_str(&r);
		s->cwd = priv_get_str(&r);
		s->argv = priv_get_strv(&r);
		s->env = priv_get_strv(&r);
		s->stage_src = priv_get_strv(&r);
		s->stage_dst = priv_get_strv(&r);
		s->stage_file = priv_get_u64(&r);
		break;
	case PRIV_SIGNAL:
		m->u.sig.pid = (int32_t)priv_get_u32(&r);
		m->u.sig.sig = (int32_t)priv_get_u32(&r);
		m->u.sig.ns_init = (int32_t)priv_get_u32(&r);
		break;
	case PRIV_OK:
	case PRIV_EXIT:
		m->u.answer.value = (int32_t)priv_get_u32(&r);
		m->u.answer.status = (int32_t)priv_get_u32(&r);
		break;
	case PRIV_ERR:
		m->u.answer.value = (int32_t)priv_get_u32(&r);
		m->u.answer.message = priv_get_str(&r);
		break;
	default:
		*cause = xprintf("unknown message type %u", m->hdr.type);
		return -1;
	}
	if (r.err == NULL && r.left != 0)
		r.err = "bytes after the body";
	if (r.err != NULL) {
		*cause = xprintf("%s: %s", priv_type_name(m->hdr.type), r.err);
		priv_msg_clear(m);
		return -1;
	}
	return 0;
}

void
priv_msg_clear(struct priv_msg *m)
{
	switch (m->hdr.type) {
	case PRIV_PREPARE_DIR:
	case PRIV_REMOVE_DIR:
	case PRIV_CHOWN:
		free(m->u.dir.session);
		free(m->u.dir.sub);
		break;
	case PRIV_JOB:
		free(m->u.job.dir.session);
		free(m->u.job.dir.sub);
		free(m->u.job.arg);
		break;
	case PRIV_KILL_RUN:
	case PRIV_OPEN_FILE:
		free(m->u.str);
		break;
	case PRIV_SPAWN:
		free(m->u.spawn.path);
		free(m->u.spawn.cwd);
		strv_free(m->u.spawn.argv);
		/* The environment can carry a run's credentials. */
		if (m->u.spawn.env != NULL) {
			for (char **e = m->u.spawn.env; *e != NULL; e++)
				explicit_bzero(*e, strlen(*e));
		}
		strv_free(m->u.spawn.env);
		strv_free(m->u.spawn.stage_src);
		strv_free(m->u.spawn.stage_dst);
		break;
	case PRIV_ERR:
		free(m->u.answer.message);
		break;
	}
	memset(&m->u, 0, sizeof m->u);
}

const char *
priv_type_name(uint32_t type)
{
	switch (type) {
	case PRIV_PREPARE_DIR:	return "PREPARE_DIR";
	case PRIV_REMOVE_DIR:	return "REMOVE_DIR";
	case PRIV_CHOWN:	return "CHOWN";
	case PRIV_SPAWN:	return "SPAWN";
	case PRIV_SIGNAL:	return "SIGNAL";
	case PRIV_JOB:		return "JOB";
	case PRIV_KILL_RUN:	return "KILL_RUN";
	case PRIV_OPEN_FILE:	return "OPEN_FILE";
	case PRIV_OK:		return "OK";
	case PRIV_ERR:		return "ERR";
	case PRIV_EXIT:		return "EXIT";
	}
	return "unknown";
}

const char *
priv_job_name(uint32_t job)
{
	switch (job) {
	case PRIV_JOB_PACK:	return "PACK";
	case PRIV_JOB_UNPACK:	return "UNPACK";
	case PRIV_JOB_WRITE:	return "WRITE";
	case PRIV_JOB_GLOB:	return "GLOB";
	case PRIV_JOB_DU:	return "DU";
	}
	return "unknown";
}

int
priv_send(int fd, const struct priv_msg *m)
{
	struct buf	 b;
	struct priv_hdr	 h = m->hdr;
	struct msghdr	 mh;
	struct cmsghdr	*cm;
	struct iovec	 iov[2];
	union {
		struct cmsghdr	align;
		char		buf[CMSG_SPACE(sizeof(int) * PRIV_FDS_MAX)];
	} cbuf;
	size_t		 off = 0, total;
	ssize_t		 n;
	int		 first = 1;

	if (h.nfds > PRIV_FDS_MAX)
		fatal("priv: %u descriptors", h.nfds);
	buf_init(&b, PRIV_BODY_MAX);
	priv_encode(m, &b);
	h.len = (uint32_t)b.len;
	total = sizeof h + b.len;
	/* The descriptors ride with the first bytes; a short write sends the rest bare. */
	while (off < total) {
		memset(&mh, 0, sizeof mh);
		if (off < sizeof h) {
			iov[0].iov_base = (char *)&h + off;
			iov[0].iov_len = sizeof h - off;
			iov[1].iov_base = b.data;
			iov[1].iov_len = b.len;
			mh.msg_iov = iov;
			mh.msg_iovlen = b.len > 0 ? 2 : 1;
		} else {
			iov[0].iov_base = b.data + (off - sizeof h);
			iov[0].iov_len = total - off;
			mh.msg_iov = iov;
			mh.msg_iovlen = 1;
		}
		if (first && h.nfds > 0) {
			memset(&cbuf, 0, sizeof cbuf);
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * h.nfds);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int) * h.nfds);
			memcpy(CMSG_DATA(cm), m->fds, sizeof(int) * h.nfds);
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			buf_free(&b);
			return -1;
		}
		first = 0;
		off += (size_t)n;
	}
	buf_free(&b);
	return 1;
}

/* Reads exactly len bytes (descriptors, if any, into fds); 0 at end of file. */
static int
priv_read(int fd, void *p, size_t len, int *fds, uint32_t *nfds)
{
	struct msghdr	 mh;
	struct cmsghdr	*cm;
	struct iovec	 iov;
	union {
		struct cmsghdr	align;
		char		buf[CMSG_SPACE(sizeof(int) * PRIV_FDS_MAX)];
	} cbuf;
	size_t		 off = 0, k;
	ssize_t		 n;

	while (off < len) {
		memset(&mh, 0, sizeof mh);
		iov.iov_base = (char *)p + off;
		iov.iov_len = len - off;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (fds != NULL) {
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof cbuf.buf;
		}
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return (int)n;
		for (cm = fds != NULL ? CMSG_FIRSTHDR(&mh) : NULL; cm != NULL;
		    cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int	got;

				memcpy(&got, CMSG_DATA(cm) + k * sizeof(int), sizeof got);
				if (*nfds < PRIV_FDS_MAX)
					fds[(*nfds)++] = got;
				else
					close(got);
			}
		}
		off += (size_t)n;
	}
	return 1;
}

int
priv_recv(int fd, struct priv_msg *m, char **cause)
{
	uint8_t		*body = NULL;
	uint32_t	 got = 0, i;
	int		 r;

	memset(m, 0, sizeof *m);
	if ((r = priv_read(fd, &m->hdr, sizeof m->hdr, m->fds, &got)) <= 0) {
		*cause = xstrdup(r == 0 ? "end of file" : strerror(errno));
		goto fail;
	}
	if (m->hdr.len > PRIV_BODY_MAX || got != m->hdr.nfds) {
		*cause = xprintf("%s: bad header (%u bytes, %u of %u descriptors)",
		    priv_type_name(m->hdr.type), m->hdr.len, got, m->hdr.nfds);
		r = -1;
		goto fail;
	}
	body = xmalloc(m->hdr.len + 1);
	if (m->hdr.len > 0 && (r = priv_read(fd, body, m->hdr.len, NULL, NULL)) <= 0) {
		*cause = xstrdup(r == 0 ? "end of file" : strerror(errno));
		goto fail;
	}
	if (priv_decode(m, body, m->hdr.len, cause) != 0) {
		r = -1;
		goto fail;
	}
	free(body);
	return 1;
fail:
	free(body);
	for (i = 0; i < got; i++)
		close(m->fds[i]);
	m->hdr.nfds = 0;
	/* A stream that lost its framing cannot be read on. */
	return r > 0 ? -1 : r;
}

/*
 * The engine's side: one socket, requests from any thread in turn (a mutex),
 * each answered before the next. EXIT notices may come between: they are
 * queued and handed to the loop.
 */
struct priv_exit {
	pid_t			 pid;
	int			 status;
	TAILQ_ENTRY(priv_exit)	 entry;
};

static int			 priv_fd = -1;
static uint32_t			 priv_next_id;
static pthread_mutex_t		 priv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t		 priv_cv = PTHREAD_COND_INITIALIZER;
static int			 priv_reading;	/* a thread is reading the socket */
static TAILQ_HEAD(, priv_exit)	 priv_exits = TAILQ_HEAD_INITIALIZER(priv_exits);
static struct event		*priv_ev_read, *priv_ev_deliver;
static void			(*priv_exit_cb)(pid_t, int);
static pid_t			*priv_waited;	/* pids a proc_run waits for itself */
static size_t			 priv_nwaited;

static char			*priv_data_dir;
static char			*priv_areas[PRIV_AREAS];	/* sessions/, runs/, cache/ */

void
priv_client_set(int fd, const char *data_dir)
{
	priv_fd = fd;
	free(priv_data_dir);
	for (size_t i = 0; i < SPUR_ARRLEN(priv_areas); i++)
		free(priv_areas[i]);
	priv_data_dir = xstrdup(data_dir);
	priv_areas[PRIV_AREA_SESSIONS] = xprintf("%s/sessions/", data_dir);
	priv_areas[PRIV_AREA_RUNS] = xprintf("%s/runs/", data_dir);
	priv_areas[PRIV_AREA_CACHE] = xprintf("%s/cache/", data_dir);
}

int
priv_client_connect(const char *path, char **cause)
{
	struct sockaddr_un	 sun;
	struct priv_msg		 hello;
	int			 fd, rc;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		*cause = xprintf("%s: too long for a socket", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	/* Taken, the helper greets (OK, no request); refused, it closes. */
	if ((rc = priv_recv(fd, &hello, cause)) <= 0 || hello.hdr.type != PRIV_OK ||
	    hello.hdr.id != 0 || hello.hdr.nfds != 0) {
		if (rc > 0) {
			for (uint32_t i = 0; i < hello.hdr.nfds; i++)
				close(hello.fds[i]);
			priv_msg_clear(&hello);
			*cause = xstrdup("not a greeting");
		} else if (rc == 0) {
			free(*cause);
			*cause = xstrdup("the helper refused this connection (its log says why)");
		}
		close(fd);
		return -1;
	}
	priv_msg_clear(&hello);
	return fd;
}

const char *
priv_client_data_dir(void)
{
	return priv_fd != -1 ? priv_data_dir : NULL;
}

int
priv_as_root(void)
{
	return geteuid() == 0 || priv_fd != -1;
}

/*
 * path as a struct priv_dir (id and sub point into *copy, to free): 0 when the
 * engine is root or has no helper, or path is under no area.
 */
static int
priv_path_dir(const char *path, struct priv_dir *d, char **copy)
{
	uint32_t	area;

	if (geteuid() == 0 || priv_fd == -1)
		return 0;
	for (area = 0; area < SPUR_ARRLEN(priv_areas); area++) {
		if (strncmp(path, priv_areas[area], strlen(priv_areas[area])) == 0)
			break;
	}
	if (area == SPUR_ARRLEN(priv_areas))
		return 0;
	memset(d, 0, sizeof *d);
	d->area = area;
	d->session = *copy = xstrdup(path + strlen(priv_areas[area]));
	if ((d->sub = strchr(*copy, '/')) != NULL)
		*d->sub++ = '\0';
	else
		d->sub = "";
	return 1;
}

int
priv_dir_path(enum priv_type type, const char *path, uid_t uid, gid_t gid, int *rc,
    char **cause)
{
	struct priv_dir	 d;
	char		*copy;

	if (!priv_path_dir(path, &d, &copy))
		return 0;
	*rc = priv_dir(type, d.area, d.session, d.sub, uid, gid, 0, cause);
	free(copy);
	return 1;
}

int
priv_dirs_path(enum priv_type type, const char *const *paths, size_t n, uid_t uid,
    gid_t gid, int *rc, char **cause)
{
	struct priv_msg	 req[PRIV_DIRS_MAX], ans[PRIV_DIRS_MAX];
	char		*copy[PRIV_DIRS_MAX];
	size_t		 i, k;

	if (n == 0 || n > PRIV_DIRS_MAX)
		return 0;
	memset(req, 0, sizeof req);
	for (i = 0; i < n; i++) {
		if (!priv_path_dir(paths[i], &req[i].u.dir, &copy[i])) {
			for (k = 0; k < i; k++)
				free(copy[k]);
			return 0;
		}
		req[i].hdr.type = type;
		req[i].u.dir.uid = uid;
		req[i].u.dir.gid = gid;
	}
	*rc = priv_client_calls(req, n, ans, cause);
	for (i = 0; i < n; i++) {
		if (*rc == 0)
			priv_msg_clear(&ans[i]);
		free(copy[i]);
	}
	return 1;
}

int
priv_chown_path(const char *path, uid_t from, uid_t uid, gid_t gid, int *rc)
{
	struct priv_dir	 d;
	char		*copy, *cause = NULL;

	if (!priv_path_dir(path, &d, &copy))
		return 0;
	if ((*rc = priv_dir(PRIV_CHOWN, d.area, d.session, d.sub, uid, gid, from,
	    &cause)) != 0) {
		log_warn("event=priv.chown_failed path=%s error=%s", log_q(path), log_q(cause));
		free(cause);
	}
	free(copy);
	return 1;
}

int
priv_job_path(enum priv_job job, const char *path, const char *arg, uid_t uid, gid_t gid,
    int in_fd, int *out_fd, int *rc, char **cause)
{
	struct priv_msg	 req, ans;
	char		*copy;

	memset(&req, 0, sizeof req);
	if (!priv_path_dir(path, &req.u.job.dir, &copy))
		return 0;
	req.hdr.type = PRIV_JOB;
	req.u.job.dir.uid = uid;
	req.u.job.dir.gid = gid;
	req.u.job.job = job;
	req.u.job.arg = (char *)(arg != NULL ? arg : "");
	if (in_fd != -1) {
		req.hdr.nfds = 1;
		req.fds[0] = in_fd;
	}
	if (out_fd != NULL)
		*out_fd = -1;
	*rc = -1;
	if (priv_client_call(&req, &ans, cause) == 0) {
		*rc = ans.u.answer.value;
		for (uint32_t i = 0; i < ans.hdr.nfds; i++) {
			if (i == 0 && out_fd != NULL)
				*out_fd = ans.fds[0];
			else
				close(ans.fds[i]);
		}
		priv_msg_clear(&ans);
	}
	free(copy);
	return 1;
}

int
priv_open_file(const char *path)
{
	struct priv_msg	 req, ans;
	char		*cause = NULL;
	int		 fd = -1;

	if (priv_fd == -1) {
		errno = EACCES;
		return -1;
	}
	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_OPEN_FILE;
	req.u.str = (char *)path;
	if (priv_client_call(&req, &ans, &cause) != 0) {
		log_debug("event=priv.open_failed path=%s error=%s", log_q(path), log_q(cause));
		free(cause);
		errno = EACCES;
		return -1;
	}
	for (uint32_t i = 0; i < ans.hdr.nfds; i++) {
		if (i == 0)
			fd = ans.fds[0];
		else
			close(ans.fds[i]);
	}
	priv_msg_clear(&ans);
	if (fd == -1)
		errno = EACCES;
	return fd;
}

int
priv_kill_run(const char *run)
{
	struct priv_msg	 req, ans;
	char		*cause = NULL;
	int		 n;

	if (geteuid() == 0 || priv_fd == -1)
		return -1;
	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_KILL_RUN;
	req.u.str = (char *)run;
	if (priv_client_call(&req, &ans, &cause) != 0) {
		log_warn("event=priv.kill_run_failed run=%s error=%s", log_q(run), log_q(cause));
		free(cause);
		return 0;
	}
	n = ans.u.answer.value;
	priv_msg_clear(&ans);
	return n;
}

int
priv_client_active(void)
{
	return priv_fd != -1;
}

/* With priv_mu held: whether pid is one a caller of priv_client_wait claims. */
static int
priv_is_waited(pid_t pid)
{
	size_t	i;

	for (i = 0; i < priv_nwaited; i++) {
		if (priv_waited[i] == pid)
			return 1;
	}
	return 0;
}

/* With priv_mu held: one message from the socket; an EXIT goes to the queue. */
static int
priv_client_read(struct priv_msg *m, char **cause)
{
	struct priv_exit	*x;
	int			 r;

	priv_reading = 1;
	pthread_mutex_unlock(&priv_mu);
	r = priv_recv(priv_fd, m, cause);
	pthread_mutex_lock(&priv_mu);
	priv_reading = 0;
	pthread_cond_broadcast(&priv_cv);
	if (r <= 0) {
		log_error("event=priv.lost error=%s consequence=\"no child can start as a "
		    "session uid\"", log_q(*cause));
		return -1;
	}
	if (m->hdr.type == PRIV_EXIT) {
		x = xcalloc(1, sizeof *x);
		x->pid = m->u.answer.value;
		x->status = m->u.answer.status;
		TAILQ_INSERT_TAIL(&priv_exits, x, entry);
		if (priv_ev_deliver != NULL && !priv_is_waited(x->pid))
			event_active(priv_ev_deliver, 0, 0);
	}
	return 0;
}

/*
 * n requests on the wire at once, then their n answers, in order: one round
 * trip for all (the helper answers each in turn). answer[i] is req[i]'s; a
 * refusal is -1 with the first one's cause, every answer still read.
 */
int
priv_client_calls(struct priv_msg *req, size_t n, struct priv_msg *answer, char **cause)
{
	size_t	i, got = 0;
	int	r = -1, refused = 0;

	pthread_mutex_lock(&priv_mu);
	if (priv_fd == -1) {
		*cause = xstrdup("no privileged helper");
		goto out;
	}
	/* Our requests alone on the wire: each answer is the next non-notice. */
	while (priv_reading)
		pthread_cond_wait(&priv_cv, &priv_mu);
	for (i = 0; i < n; i++) {
		req[i].hdr.id = ++priv_next_id;
		if (priv_send(priv_fd, &req[i]) <= 0) {
			*cause = xprintf("helper: %s", strerror(errno));
			goto out;
		}
	}
	for (got = 0; got < n; got++) {
		do {
			if (priv_client_read(&answer[got], cause) != 0)
				goto out;
		} while (answer[got].hdr.type == PRIV_EXIT);
		if (answer[got].hdr.id != req[got].hdr.id) {
			*cause = xprintf("helper answered %u, not %u", answer[got].hdr.id,
			    req[got].hdr.id);
			priv_msg_clear(&answer[got]);
			goto out;
		}
		if (answer[got].hdr.type == PRIV_ERR && !refused++) {
			errno = answer[got].u.answer.value;
			*cause = xstrdup(answer[got].u.answer.message != NULL ?
			    answer[got].u.answer.message : "refused");
		}
	}
	r = refused ? -1 : 0;
out:
	if (r != 0) {
		for (i = 0; i < got; i++)
			priv_msg_clear(&answer[i]);
	}
	pthread_mutex_unlock(&priv_mu);
	return r;
}

int
priv_client_call(struct priv_msg *req, struct priv_msg *answer, char **cause)
{
	return priv_client_calls(req, 1, answer, cause);
}

int
priv_client_wait(pid_t pid, int *status)
{
	struct priv_exit	*x;
	struct priv_msg		 m;
	char			*cause = NULL;
	int			 r = -1;

	pthread_mutex_lock(&priv_mu);
	priv_waited = xreallocarray(priv_waited, priv_nwaited + 1, sizeof *priv_waited);
	priv_waited[priv_nwaited++] = pid;
	for (;;) {
		TAILQ_FOREACH(x, &priv_exits, entry) {
			if (x->pid == pid)
				break;
		}
		if (x != NULL) {
			*status = x->status;
			TAILQ_REMOVE(&priv_exits, x, entry);
			free(x);
			r = 0;
			break;
		}
		if (priv_reading) {
			pthread_cond_wait(&priv_cv, &priv_mu);
			continue;
		}
		if (priv_client_read(&m, &cause) != 0)
			break;
		if (m.hdr.type != PRIV_EXIT) {
			log_warn("event=priv.unexpected type=%s", priv_type_name(m.hdr.type));
			priv_msg_clear(&m);
		}
	}
	free(cause);
	for (size_t i = 0; i < priv_nwaited; i++) {
		if (priv_waited[i] == pid) {
			priv_waited[i] = priv_waited[--priv_nwaited];
			break;
		}
	}
	pthread_mutex_unlock(&priv_mu);
	return r;
}

/* On the loop: hands every queued EXIT nobody waits for to the callback. */
static void
priv_deliver_cb(evutil_socket_t fd, short events, void *arg)
{
	struct priv_exit	*x, *next;
	TAILQ_HEAD(, priv_exit)	 mine = TAILQ_HEAD_INITIALIZER(mine);

	pthread_mutex_lock(&priv_mu);
	for (x = TAILQ_FIRST(&priv_exits); x != NULL; x = next) {
		next = TAILQ_NEXT(x, entry);
		if (priv_is_waited(x->pid))
			continue;
		TAILQ_REMOVE(&priv_exits, x, entry);
		TAILQ_INSERT_TAIL(&mine, x, entry);
	}
	pthread_mutex_unlock(&priv_mu);
	while ((x = TAILQ_FIRST(&mine)) != NULL) {
		TAILQ_REMOVE(&mine, x, entry);
		if (priv_exit_cb != NULL)
			priv_exit_cb(x->pid, x->status);
		free(x);
	}
}

/* The socket is readable: a notice, unless a caller took it first. */
static void
priv_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct priv_msg	 m;
	char		 c, *cause = NULL;

	pthread_mutex_lock(&priv_mu);
	if (!priv_reading && recv(priv_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
		if (priv_client_read(&m, &cause) == 0 && m.hdr.type != PRIV_EXIT) {
			log_warn("event=priv.unexpected type=%s", priv_type_name(m.hdr.type));
			priv_msg_clear(&m);
		}
	} else if (!priv_reading && recv(priv_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		log_error("event=priv.lost error=\"helper gone\"");
		event_del(priv_ev_read);
	}
	pthread_mutex_unlock(&priv_mu);
	free(cause);
	priv_deliver_cb(-1, 0, NULL);
}

void
priv_client_attach(struct event_base *base, void (*exit_cb)(pid_t, int))
{
	if (priv_fd == -1 || priv_ev_read != NULL)
		return;
	priv_exit_cb = exit_cb;
	priv_ev_deliver = event_new(base, -1, 0, priv_deliver_cb, NULL);
	priv_ev_read = event_new(base, priv_fd, EV_READ | EV_PERSIST, priv_read_cb, NULL);
	if (priv_ev_deliver == NULL || priv_ev_read == NULL ||
	    event_add(priv_ev_read, NULL) != 0)
		fatal("priv: cannot watch the helper");
}

int
priv_dir(enum priv_type type, enum priv_area area, const char *id, const char *sub,
    uid_t uid, gid_t gid, uid_t from, char **cause)
{
	struct priv_msg	 req, ans;

	memset(&req, 0, sizeof req);
	req.hdr.type = type;
	req.u.dir.area = area;
	req.u.dir.session = (char *)id;
	req.u.dir.sub = (char *)(sub != NULL ? sub : "");
	req.u.dir.uid = uid;
	req.u.dir.gid = gid;
	req.u.dir.from = from;
	if (priv_client_call(&req, &ans, cause) != 0)
		return -1;
	priv_msg_clear(&ans);
	return 0;
}

int
priv_signal(pid_t pid, int sig, pid_t ns_init)
{
	struct priv_msg	 req, ans;
	char		*cause = NULL;

	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SIGNAL;
	req.u.sig.pid = pid;
	req.u.sig.sig = sig;
	req.u.sig.ns_init = ns_init;
	if (priv_client_call(&req, &ans, &cause) != 0) {
		log_debug("event=priv.signal_failed pid=%ld error=%s", (long)pid, log_q(cause));
		free(cause);
		return -1;
	}
	priv_msg_clear(&ans);
	return 0;
}
