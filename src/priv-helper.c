/* priv-helper.c: the small root process the engine asks, by typed and checked requests, for what needs root. */
#include "spur.h"
#include "conf.h"
#include "priv.h"
#include "proc.h"
#include "sandbox.h"

#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * What the helper may do is bounded by what it was told at start, never by a
 * request: directories only under data_dir/sessions and data_dir/runs (opened once, walked by
 * descriptors, O_NOFOLLOW, so a link a sandbox left is refused), children only
 * bwrap or git as a uid of sandbox.uids or sandbox.user, signals only to the
 * children it started. It reads no network input and holds no secret but the
 * environment of the child it is starting.
 */
#define PRIV_CHILDREN_MAX	4096
#define PRIV_SUB_PARTS		8

struct priv_child {
	pid_t	pid;
	uid_t	uid;
};

struct priv_helper {
	int			 area_fd[2];	/* data_dir/sessions, data_dir/runs */
	long long		 uid_first;	/* sandbox.uids */
	long long		 uid_last;
	uid_t			 user_uid;	/* sandbox.user's, 0: none */
	gid_t			 user_gid;
	uid_t			 engine_uid;	/* owns what the engine makes */
	gid_t			 engine_gid;
	char			*git;		/* the one git it starts */
	struct priv_child	*children;
	size_t			 nchildren;
	const struct config	*conf;
};

/* data_dir/name, made the engine's when missing, opened never through a link. */
static int
priv_area_open(int dfd, const char *name, uid_t uid, gid_t gid)
{
	if (mkdirat(dfd, name, 0700) == 0 && fchownat(dfd, name, uid, gid,
	    AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	return openat(dfd, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC);
}

struct priv_helper *
priv_helper_create(const struct config *cf, uid_t engine_uid, gid_t engine_gid,
    char **cause)
{
	struct priv_helper	*h;
	struct passwd		*pw;
	char			*path;
	int			 dfd;

	if ((dfd = open(cf->data_dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		return NULL;
	}
	h = xcalloc(1, sizeof *h);
	if ((h->area_fd[PRIV_AREA_SESSIONS] = priv_area_open(dfd, "sessions", engine_uid,
	    engine_gid)) == -1 || (h->area_fd[PRIV_AREA_RUNS] = priv_area_open(dfd, "runs",
	    engine_uid, engine_gid)) == -1) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		if (h->area_fd[PRIV_AREA_SESSIONS] != -1)
			close(h->area_fd[PRIV_AREA_SESSIONS]);
		close(dfd);
		free(h);
		return NULL;
	}
	close(dfd);
	h->uid_first = cf->sandbox.uid_first;
	h->uid_last = cf->sandbox.uid_last;
	if (cf->sandbox.user != NULL && (pw = getpwnam(cf->sandbox.user)) != NULL &&
	    pw->pw_uid != 0) {
		h->user_uid = pw->pw_uid;
		h->user_gid = pw->pw_gid;
	}
	h->engine_uid = engine_uid;
	h->engine_gid = engine_gid;
	if ((path = proc_which("git", NULL)) != NULL)
		h->git = path;
	h->conf = cf;
	return h;
}

void
priv_helper_free(struct priv_helper *h)
{
	if (h == NULL)
		return;
	close(h->area_fd[0]);
	close(h->area_fd[1]);
	free(h->git);
	free(h->children);
	free(h);
}

/* A uid a session may run as: one of sandbox.uids or sandbox.user's; never root. */
static int
priv_uid_ok(const struct priv_helper *h, uint32_t uid, uint32_t gid)
{
	if (uid == 0 || gid == 0)
		return 0;
	if (h->user_uid != 0 && uid == h->user_uid)
		return gid == h->user_gid;
	return (long long)uid >= h->uid_first && (long long)uid <= h->uid_last &&
	    gid == uid;
}

static int
priv_session_ok(const char *s)
{
	size_t	n = 0;

	for (; s[n] != '\0'; n++) {
		if (!isalnum((unsigned char)s[n]) && s[n] != '-' && s[n] != '_')
			return 0;
	}
	return n > 0 && n <= PRIV_SESSION_MAX;
}

/* Splits sub into at most PRIV_SUB_PARTS names, none empty, "." or ".."; -1 if not. */
static int
priv_sub_split(char *sub, char **parts, size_t *n)
{
	char	*p, *save = NULL;

	*n = 0;
	if (strlen(sub) > PRIV_SUB_MAX)
		return -1;
	if (*sub == '\0')
		return 0;
	if (*sub == '/' || sub[strlen(sub) - 1] == '/' || strstr(sub, "//") != NULL)
		return -1;
	for (p = strtok_r(sub, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
		if (*n == PRIV_SUB_PARTS || !valid_name(p) || strcmp(p, ".") == 0 ||
		    strcmp(p, "..") == 0)
			return -1;
		parts[(*n)++] = p;
	}
	return 0;
}

static void
priv_refuse(struct priv_msg *ans, const struct priv_msg *req, int error,
    const char *why, const char *what)
{
	log_warn("event=priv.refused request=%s reason=%s what=%s",
	    priv_type_name(req->hdr.type), log_q(why), log_q(what != NULL ? what : "-"));
	ans->hdr.type = PRIV_ERR;
	ans->u.answer.value = error;
	ans->u.answer.message = xprintf("%s refused: %s", priv_type_name(req->hdr.type),
	    why);
}

static void
priv_fail(struct priv_msg *ans, int error, const char *what)
{
	ans->hdr.type = PRIV_ERR;
	ans->u.answer.value = error;
	ans->u.answer.message = xprintf("%s: %s", what, strerror(error));
}

/*
 * Opens the parent of the request's directory (its last name in *last), each
 * step below sessions/ (or runs/) by descriptor with O_NOFOLLOW; with make, missing
 * steps are made the engine's. -1 with errno.
 */
static int
priv_dir_parent(struct priv_helper *h, const struct priv_dir *d, char **parts,
    size_t nparts, int make, const char **last)
{
	const char	*name;
	int		 fd, next;
	size_t		 i;

	if (d->area >= SPUR_ARRLEN(h->area_fd)) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = dup(h->area_fd[d->area])) == -1)
		return -1;
	for (i = 0; i < nparts; i++) {
		name = i == 0 ? d->session : parts[i - 1];
		if (make && mkdirat(fd, name, 0700) == 0 &&
		    fchownat(fd, name, h->engine_uid, h->engine_gid, AT_SYMLINK_NOFOLLOW) != 0) {
			close(fd);
			return -1;
		}
		next = openat(fd, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC);
		close(fd);
		if ((fd = next) == -1)
			return -1;
	}
	*last = nparts == 0 ? d->session : parts[nparts - 1];
	return fd;
}

/* The request's directory itself, never through a link left in its place. */
static int
priv_open_last(int pfd, const char *last, const struct priv_msg *req, struct priv_msg *ans,
    const char *what)
{
	int	fd;

	if ((fd = openat(pfd, last, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) != -1)
		return fd;
	if (errno == ELOOP || errno == ENOTDIR)
		priv_refuse(ans, req, errno, "a link or a file in its place", what);
	else
		priv_fail(ans, errno, what);
	return -1;
}

static void
priv_do_dir(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_dir	*d = &req->u.dir;
	char			*sub = xstrdup(d->sub != NULL ? d->sub : ""), *parts[PRIV_SUB_PARTS];
	char			 what[PRIV_SESSION_MAX + PRIV_SUB_MAX + 2];
	const char		*last = NULL;
	size_t			 n;
	int			 pfd = -1, fd = -1;

	snprintf(what, sizeof what, "%s%s/%s", d->area == PRIV_AREA_RUNS ? "runs/" : "",
	    d->session != NULL ? d->session : "", d->sub != NULL ? d->sub : "");
	if (d->area >= SPUR_ARRLEN(h->area_fd)) {
		priv_refuse(ans, req, EINVAL, "not sessions/ or runs/", what);
		goto out;
	}
	if (d->session == NULL || !priv_session_ok(d->session)) {
		priv_refuse(ans, req, EINVAL, "not a session id", what);
		goto out;
	}
	if (priv_sub_split(sub, parts, &n) != 0) {
		priv_refuse(ans, req, EINVAL, "not a path under the session", what);
		goto out;
	}
	if (req->hdr.type == PRIV_PREPARE_DIR && !priv_uid_ok(h, d->uid, d->gid)) {
		priv_refuse(ans, req, EPERM, "uid not in sandbox.uids", what);
		goto out;
	}
	if (req->hdr.type == PRIV_CHOWN && (!priv_uid_ok(h, d->uid, d->gid) ||
	    (d->from != h->engine_uid && !priv_uid_ok(h, d->from, d->from)) ||
	    d->from == 0)) {
		priv_refuse(ans, req, EPERM, "uid not in sandbox.uids", what);
		goto out;
	}
	/* Parents: the session's and each name before the last (n + 1 names in all). */
	if ((pfd = priv_dir_parent(h, d, parts, n, req->hdr.type == PRIV_PREPARE_DIR,
	    &last)) == -1) {
		if (errno == ELOOP || errno == ENOTDIR)
			priv_refuse(ans, req, errno, "a link or a file on the way", what);
		else if (errno == ENOENT && req->hdr.type == PRIV_REMOVE_DIR)
			ans->hdr.type = PRIV_OK;
		else
			priv_fail(ans, errno, what);
		goto out;
	}
	switch (req->hdr.type) {
	case PRIV_PREPARE_DIR:
		if (mkdirat(pfd, last, 0700) != 0 && errno != EEXIST) {
			priv_fail(ans, errno, what);
			goto out;
		}
		/* O_NOFOLLOW: never chown what a link left in a reused directory points at. */
		if ((fd = priv_open_last(pfd, last, req, ans, what)) == -1)
			goto out;
		if (fchmod(fd, 0700) != 0 || fchown(fd, d->uid, d->gid) != 0) {
			priv_fail(ans, errno, what);
			goto out;
		}
		break;
	case PRIV_REMOVE_DIR:
		if (safefs_remove_at(pfd, last) != 0) {
			priv_fail(ans, errno, what);
			goto out;
		}
		break;
	case PRIV_CHOWN:
		if ((fd = priv_open_last(pfd, last, req, ans, what)) == -1)
			goto out;
		if (safefs_chown_fd(fd, d->from, d->uid, d->gid) != 0) {
			fd = -1;
			priv_fail(ans, EIO, what);
			goto out;
		}
		fd = -1;	/* closed by safefs_chown_fd */
		break;
	}
	ans->hdr.type = PRIV_OK;
out:
	if (fd != -1)
		close(fd);
	if (pfd != -1)
		close(pfd);
	free(sub);
}

/*
 * A staged bind: under SANDBOX_STAGE one name deep, from an absolute path.
 * The source is the engine's word (data_dir's, a configured agent install): a
 * bind passes the directories above it, never the permissions of what it binds,
 * which stay the host's for the session uid that runs there.
 */
static int
priv_stage_ok(const char *src, const char *dst)
{
	const char	*p;

	if (*src != '/')
		return 0;
	if (strncmp(dst, SANDBOX_STAGE "/", strlen(SANDBOX_STAGE) + 1) != 0)
		return 0;
	p = dst + strlen(SANDBOX_STAGE) + 1;
	return valid_name(p) && strcmp(p, "..") != 0;
}

static void
priv_do_spawn(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_spawn	*s = &req->u.spawn;
	struct proc_spec	 spec;
	int			 fds[3], file[PRIV_STAGE_MAX];
	size_t			 i, nstage = strv_len(s->stage_src);
	char			*cause = NULL;
	pid_t			 pid;

	if (!priv_uid_ok(h, s->uid, s->gid)) {
		priv_refuse(ans, req, EPERM, "uid not in sandbox.uids", s->path);
		return;
	}
	if (strcmp(s->path, BWRAP_PATH) != 0 && (h->git == NULL ||
	    strcmp(s->path, h->git) != 0)) {
		priv_refuse(ans, req, EPERM, "not bwrap or git", s->path);
		return;
	}
	if (s->argv == NULL || s->argv[0] == NULL) {
		priv_refuse(ans, req, EINVAL, "no argv", s->path);
		return;
	}
	if (nstage > PRIV_STAGE_MAX || nstage != strv_len(s->stage_dst)) {
		priv_refuse(ans, req, EINVAL, "bad stage list", s->path);
		return;
	}
	for (i = 0; i < nstage; i++) {
		if (!priv_stage_ok(s->stage_src[i], s->stage_dst[i])) {
			priv_refuse(ans, req, EINVAL, "stage outside " SANDBOX_STAGE,
			    s->stage_dst[i]);
			return;
		}
		file[i] = (s->stage_file >> i) & 1;
	}
	if (*s->cwd != '\0' && *s->cwd != '/') {
		priv_refuse(ans, req, EINVAL, "relative cwd", s->cwd);
		return;
	}
	if (s->cwd_fd > 1 || req->hdr.nfds < s->cwd_fd ||
	    req->hdr.nfds - s->cwd_fd > PROC_KEEP_MAX) {
		priv_refuse(ans, req, EINVAL, "bad descriptors", s->path);
		return;
	}
	if (h->nchildren == PRIV_CHILDREN_MAX) {
		priv_refuse(ans, req, EAGAIN, "too many children", s->path);
		return;
	}
	memset(&spec, 0, sizeof spec);
	spec.path = s->path;
	spec.argv = s->argv;
	spec.env = s->env;
	spec.cwd = *s->cwd != '\0' ? s->cwd : NULL;
	if (s->cwd_fd) {
		spec.cwd_fd_set = 1;
		spec.cwd_fd = req->fds[0];
	}
	spec.keep = req->fds + s->cwd_fd;
	spec.nkeep = req->hdr.nfds - s->cwd_fd;
	spec.drop = 1;
	spec.uid = s->uid;
	spec.gid = s->gid;
	spec.rlimit_data = s->rlimit_data;
	spec.rlimit_nproc = s->rlimit_nproc;
	spec.stage_src = s->stage_src;
	spec.stage_dst = s->stage_dst;
	spec.stage_file = file;
	spec.nstage = nstage;
	if ((pid = proc_spawn(&spec, fds, &cause)) == -1) {
		ans->hdr.type = PRIV_ERR;
		ans->u.answer.value = EIO;
		ans->u.answer.message = cause;
		return;
	}
	h->children = xreallocarray(h->children, h->nchildren + 1, sizeof *h->children);
	h->children[h->nchildren].pid = pid;
	h->children[h->nchildren++].uid = s->uid;
	log_debug("event=priv.spawned pid=%ld uid=%u path=%s", (long)pid, s->uid,
	    log_q(s->path));
	ans->hdr.type = PRIV_OK;
	ans->u.answer.value = pid;
	ans->hdr.nfds = 3;
	memcpy(ans->fds, fds, sizeof fds);
}

static struct priv_child *
priv_child_find(struct priv_helper *h, pid_t pid)
{
	size_t	i;

	for (i = 0; i < h->nchildren; i++) {
		if (h->children[i].pid == pid)
			return &h->children[i];
	}
	return NULL;
}

static void
priv_do_signal(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_signal	*s = &req->u.sig;
	struct priv_child		*c;
	struct stat			 st;
	char				 what[32], path[64];
	int				 sig = s->sig;

	snprintf(what, sizeof what, "%ld", (long)s->pid);
	if (s->pid <= 0 || (c = priv_child_find(h, s->pid)) == NULL) {
		priv_refuse(ans, req, ESRCH, "not a child of the helper", what);
		return;
	}
	if (sig != SIGTERM && sig != SIGKILL && sig != SIGINT && sig != SIGHUP) {
		priv_refuse(ans, req, EINVAL, "not a stopping signal", what);
		return;
	}
	if (s->ns_init > 0) {
		/* The sandbox's pid 1 runs as the child's uid, or it is not its sandbox. */
		snprintf(path, sizeof path, "/proc/%ld", (long)s->ns_init);
		if (stat(path, &st) != 0 || st.st_uid != c->uid) {
			priv_refuse(ans, req, EPERM, "not the child's sandbox", what);
			return;
		}
		(void)sandbox_ns_signal(s->ns_init, sig);
	} else if (kill(-s->pid, sig) != 0)
		kill(s->pid, sig);
	ans->hdr.type = PRIV_OK;
}

void
priv_helper_handle(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	memset(ans, 0, sizeof *ans);
	ans->hdr.id = req->hdr.id;
	switch (req->hdr.type) {
	case PRIV_PREPARE_DIR:
	case PRIV_REMOVE_DIR:
	case PRIV_CHOWN:
		priv_do_dir(h, req, ans);
		break;
	case PRIV_SPAWN:
		priv_do_spawn(h, req, ans);
		break;
	case PRIV_SIGNAL:
		priv_do_signal(h, req, ans);
		break;
	default:
		priv_refuse(ans, req, EINVAL, "not a request", NULL);
		break;
	}
}

/* Reaps its children and tells the engine; each one's group goes with it. */
static void
priv_helper_reap(struct priv_helper *h, int sock)
{
	struct priv_msg	 m;
	size_t		 i;
	pid_t		 pid;
	int		 status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < h->nchildren; i++) {
			if (h->children[i].pid == pid)
				break;
		}
		if (i == h->nchildren)
			continue;
		h->children[i] = h->children[--h->nchildren];
		kill(-pid, SIGKILL);
		memset(&m, 0, sizeof m);
		m.hdr.type = PRIV_EXIT;
		m.u.answer.value = pid;
		m.u.answer.status = status;
		if (sock != -1)
			(void)priv_send(sock, &m);
	}
}

/* The helper's life: a request at a time, reaping between; the engine gone, its children go. */
static void __attribute__((noreturn))
priv_helper_main(struct priv_helper *h, int sock)
{
	struct pollfd	 pfd[2];
	struct priv_msg	 req, ans;
	sigset_t	 set;
	char		*cause;
	uint32_t	 i;
	int		 sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		fatal("priv: signalfd: %s", strerror(errno));
	pfd[0].fd = sock;
	pfd[0].events = POLLIN;
	pfd[1].fd = sfd;
	pfd[1].events = POLLIN;
	for (;;) {
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents != 0) {
			struct signalfd_siginfo	si;

			while (read(sfd, &si, sizeof si) > 0)
				;
			priv_helper_reap(h, sock);
		}
		if (pfd[0].revents == 0)
			continue;
		cause = NULL;
		if (priv_recv(sock, &req, &cause) <= 0) {
			/* End of file: the engine is gone. Anything else: it cannot be trusted on. */
			if (strcmp(cause, "end of file") != 0)
				log_error("event=priv.refused reason=%s consequence=\"helper "
				    "stops\"", log_q(cause));
			free(cause);
			break;
		}
		priv_helper_handle(h, &req, &ans);
		for (i = 0; i < req.hdr.nfds; i++)
			close(req.fds[i]);
		priv_msg_clear(&req);
		(void)priv_send(sock, &ans);
		for (i = 0; i < ans.hdr.nfds; i++)
			close(ans.fds[i]);
		priv_msg_clear(&ans);
		/* Reap what ended meanwhile only after the answer: its EXIT must come after it. */
		priv_helper_reap(h, sock);
	}
	for (size_t k = 0; k < h->nchildren; k++)
		kill(-h->children[k].pid, SIGKILL);
	sandbox_reaper_sweep(h->conf);
	_exit(0);
}

/* The little of the config the helper keeps: where, and whose processes to sweep. */
static const struct config *
priv_helper_conf(const struct config *cf)
{
	struct config	*mine = xcalloc(1, sizeof *mine);

	mine->refs = 1;
	mine->data_dir = xstrdup(cf->data_dir);
	mine->sandbox.backend = cf->sandbox.backend;
	mine->sandbox.user = cf->sandbox.user != NULL ? xstrdup(cf->sandbox.user) : NULL;
	mine->sandbox.uid_first = cf->sandbox.uid_first;
	mine->sandbox.uid_last = cf->sandbox.uid_last;
	return mine;
}

int
priv_helper_start(const struct config *cf, uid_t engine_uid, gid_t engine_gid,
    char **cause)
{
	struct priv_helper	*h;
	int			 sv[2], i;
	pid_t			 pid;

	if ((h = priv_helper_create(cf, engine_uid, engine_gid, cause)) == NULL)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		*cause = xprintf("socketpair: %s", strerror(errno));
		priv_helper_free(h);
		return -1;
	}
	if ((pid = fork()) == -1) {
		*cause = xprintf("fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		priv_helper_free(h);
		return -1;
	}
	if (pid == 0) {
		/*
		 * It holds no secret: the config (the orgs' credentials) is wiped
		 * but what the sweep needs, and the environment (env: secrets) goes.
		 */
		h->conf = priv_helper_conf(cf);
		((struct config *)cf)->refs = 1;	/* this process's copy: the last */
		config_free((struct config *)cf);
		for (char **v = environ; v != NULL && *v != NULL; v++)
			explicit_bzero(*v, strlen(*v));	/* what /proc/PID/environ shows too */
		clearenv();
		close(sv[0]);
		for (i = 3; i < 1024; i++) {
			if (i != sv[1] && i != h->area_fd[0] && i != h->area_fd[1])
				close(i);
		}
		setsid();
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		prctl(PR_SET_NAME, "spur-priv");
		log_debug("event=priv.started pid=%ld", (long)getpid());
		priv_helper_main(h, sv[1]);
	}
	close(sv[1]);
	priv_helper_free(h);
	return sv[0];
}

/* With its root-owned parts below fd (closed here) the user's; a link is itself only. */
static void
priv_give_tree(int fd, const char *name, int depth, uid_t uid, gid_t gid)
{
	struct stat	 st;
	int		 sub;

	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return;
	/* A second name of a root file (a hard link) is not the engine's to give. */
	if (st.st_uid == 0 && (S_ISDIR(st.st_mode) || st.st_nlink == 1))
		(void)fchownat(fd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
	if (S_ISDIR(st.st_mode) && depth > 0 &&
	    (sub = openat(fd, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) != -1) {
		DIR		*d = fdopendir(sub);
		struct dirent	*de;

		if (d == NULL) {
			close(sub);
			return;
		}
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				priv_give_tree(sub, de->d_name, depth - 1, uid, gid);
		}
		closedir(d);
	}
}

int
priv_give_data_dir(const struct config *cf, uid_t uid, gid_t gid, char **cause)
{
	struct dirent	*de;
	DIR		*d;
	int		 fd, depth;

	if ((fd = open(cf->data_dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		return -1;
	}
	if (fchown(fd, uid, gid) != 0 || fchmod(fd, 0700) != 0) {
		*cause = xprintf("chown %s: %s", cf->data_dir, strerror(errno));
		close(fd);
		return -1;
	}
	if ((d = fdopendir(fd)) == NULL) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/*
		 * The root filesystems stay root's; what a sandbox wrote (a session's
		 * git/, home/ and workspace/, the caches) is not walked: only the
		 * session directories and the engine's files in them change hands.
		 */
		if (strcmp(de->d_name, "envs") == 0)
			continue;
		if (strcmp(de->d_name, "sessions") == 0)
			depth = 2;
		else if (strcmp(de->d_name, "cache") == 0)
			depth = 0;
		else
			depth = 64;
		priv_give_tree(fd, de->d_name, depth, uid, gid);
	}
	closedir(d);
	return 0;
}
