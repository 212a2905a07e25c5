/* priv-helper.c: the small root process the engine asks, by typed and checked requests, for what needs root. */
#include "spur.h"
#include "archive.h"
#include "conf.h"
#include "notify.h"
#include "priv.h"
#include "proc.h"
#include "sandbox.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * What the helper may do is bounded by what it was told at start, never by a
 * request: directories only under data_dir/sessions, data_dir/runs and
 * data_dir/cache (opened once, walked by descriptors, O_NOFOLLOW, so a link a
 * sandbox left is refused), children only bwrap (with the options the engine
 * uses, its namespaces always) or git (the subcommands, options and
 * configuration repo.c and git.c use) as a uid of sandbox.uids or
 * sandbox.user, jobs on what a sandbox wrote done as that sandbox's uid,
 * signals only to the children it started. It reads no network input and
 * holds no secret but the environment of the child it is starting.
 */
#define PRIV_CHILDREN_MAX	4096
#define PRIV_SUB_PARTS		8
#define PRIV_JOB_SECONDS	60	/* a job's child is killed past this */

struct priv_child {
	pid_t	pid;
	uid_t	uid;
};

struct priv_helper {
	int			 area_fd[PRIV_AREAS];	/* data_dir/sessions, runs, cache */
	long long		 uid_first;	/* sandbox.uids */
	long long		 uid_last;
	uid_t			 user_uid;	/* sandbox.user's, 0: none */
	gid_t			 user_gid;
	uid_t			 engine_uid;	/* owns what the engine makes */
	gid_t			 engine_gid;
	char			*git;		/* the one git it starts */
	char			**files;	/* OPEN_FILE: the config's files at start */
	char			*auto_dir;	/* and the files of this directory */
	struct priv_child	*children;
	size_t			 nchildren;
	const struct config	*conf;
};

static const char *priv_area_names[PRIV_AREAS] = { "sessions", "runs", "cache" };

/*
 * data_dir/name, made the engine's when missing, opened never through a link.
 * runs/ (the runs' output) is data_dir's group's to read when data_dir is
 * (data_dir_mode); sessions/ and cache/ are never.
 */
static int
priv_area_open(int dfd, const char *name, uid_t uid, gid_t gid)
{
	struct stat	st;
	int		fd;

	if (mkdirat(dfd, name, 0700) == 0 && fchownat(dfd, name, uid, gid,
	    AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	if ((fd = openat(dfd, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1)
		return -1;
	if (strcmp(name, "runs") == 0 && fstat(dfd, &st) == 0)
		(void)fchmod(fd, data_dir_mode(st.st_mode));
	return fd;
}

/*
 * What OPEN_FILE may open, from the config the engine was started with (its
 * paths as they resolve now): its file, its file: and credential: secrets,
 * and the files of its automations directory. A reload that names another
 * needs a restart.
 */
static void
priv_helper_files(struct priv_helper *h, const struct config *cf)
{
	const struct secret	*list[256];
	char			*path, *real, *why = NULL;
	size_t			 i, n, k = 0;

	n = config_secrets(cf, list, SPUR_ARRLEN(list));
	h->files = xcalloc(n + 2, sizeof *h->files);
	if (cf->file != NULL && (real = realpath(cf->file, NULL)) != NULL)
		h->files[k++] = real;
	for (i = 0; i < n && i < SPUR_ARRLEN(list); i++) {
		if (list[i]->ref != NULL && strncmp(list[i]->ref, "file:", 5) == 0)
			path = path_join(cf->dir != NULL ? cf->dir : "/", list[i]->ref + 5);
		else if (list[i]->ref != NULL && strncmp(list[i]->ref, "credential:", 11) == 0)
			path = credential_path(list[i]->ref + 11, &why);
		else
			continue;
		free(why);
		why = NULL;
		if (path != NULL && (real = realpath(path, NULL)) != NULL)
			h->files[k++] = real;
		free(path);
	}
	if (cf->automations_dir != NULL)
		h->auto_dir = realpath(cf->automations_dir, NULL);
}

struct priv_helper *
priv_helper_create(const struct config *cf, uid_t engine_uid, gid_t engine_gid,
    char **cause)
{
	struct priv_helper	*h;
	struct passwd		*pw;
	char			*path;
	size_t			 i;
	int			 dfd;

	if ((dfd = open(cf->data_dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		return NULL;
	}
	h = xcalloc(1, sizeof *h);
	for (i = 0; i < SPUR_ARRLEN(h->area_fd); i++)
		h->area_fd[i] = -1;
	for (i = 0; i < SPUR_ARRLEN(h->area_fd); i++) {
		if ((h->area_fd[i] = priv_area_open(dfd, priv_area_names[i], engine_uid,
		    engine_gid)) != -1)
			continue;
		*cause = xprintf("%s/%s: %s", cf->data_dir, priv_area_names[i],
		    strerror(errno));
		while (i-- > 0)
			close(h->area_fd[i]);
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
	priv_helper_files(h, cf);
	h->conf = cf;
	return h;
}

void
priv_helper_free(struct priv_helper *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < SPUR_ARRLEN(h->area_fd); i++)
		close(h->area_fd[i]);
	free(h->git);
	strv_free(h->files);
	free(h->auto_dir);
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

/*
 * One name below an area: letters, digits, '_', '-', '.' and '@' (a cache's
 * "KEY@automation", an agent's ".claude"), never "." or "..".
 */
static int
priv_name_ok(const char *p)
{
	size_t	n;

	if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0)
		return 0;
	for (n = 0; p[n] != '\0'; n++) {
		if (!isalnum((unsigned char)p[n]) && strchr("_-.@", p[n]) == NULL)
			return 0;
	}
	return n > 0 && n <= 128;
}

/* Splits sub into at most PRIV_SUB_PARTS names, each priv_name_ok; -1 if not. */
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
		if (*n == PRIV_SUB_PARTS || !priv_name_ok(p))
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

/* What a directory request names, for the log: "area/id/sub". */
static void
priv_dir_what(const struct priv_dir *d, char *what, size_t len)
{
	snprintf(what, len, "%s/%s/%s", d->area < PRIV_AREAS ? priv_area_names[d->area] :
	    "?", d->session != NULL ? d->session : "", d->sub != NULL ? d->sub : "");
}

/* The area, the id and the names below it (split into parts, from sub, a copy); refused if not. */
static int
priv_dir_check(struct priv_helper *h, const struct priv_dir *d, char *sub, char **parts,
    size_t *n, const struct priv_msg *req, struct priv_msg *ans, const char *what)
{
	if (d->area >= SPUR_ARRLEN(h->area_fd)) {
		priv_refuse(ans, req, EINVAL, "not sessions/, runs/ or cache/", what);
		return -1;
	}
	if (d->session == NULL || !priv_session_ok(d->session)) {
		priv_refuse(ans, req, EINVAL, "not a session id", what);
		return -1;
	}
	if (priv_sub_split(sub, parts, n) != 0) {
		priv_refuse(ans, req, EINVAL, "not a path under the session", what);
		return -1;
	}
	return 0;
}

static void
priv_do_dir(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_dir	*d = &req->u.dir;
	char			*sub = xstrdup(d->sub != NULL ? d->sub : ""), *parts[PRIV_SUB_PARTS];
	char			 what[PRIV_SESSION_MAX + PRIV_SUB_MAX + 16];
	const char		*last = NULL;
	size_t			 n;
	int			 pfd = -1, fd = -1;

	priv_dir_what(d, what, sizeof what);
	if (priv_dir_check(h, d, sub, parts, &n, req, ans, what) != 0)
		goto out;
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

/* A regular file the engine handed in (a memfd), read whole: at most max bytes. */
static char *
priv_read_in(int fd, size_t max, size_t *len)
{
	struct stat	 st;
	char		*data;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max)
		return NULL;
	data = xmalloc((size_t)st.st_size + 1);
	if (pread(fd, data, (size_t)st.st_size, 0) != st.st_size) {
		free(data);
		return NULL;
	}
	data[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return data;
}

/*
 * bwrap's options the engine uses (sandbox-bwrap.c), each with the number of
 * values it takes; any other is refused (--cap-add, --uid, --userns,
 * --dev-bind, ...). required: every sandbox has them, or it is not one.
 */
static const struct priv_opt {
	const char	*name;
	int		 nargs;
	int		 required;
} priv_bwrap_opts[] = {
	{ "--unshare-user", 0, 1 }, { "--unshare-ipc", 0, 1 }, { "--unshare-pid", 0, 1 },
	{ "--unshare-net", 0, 1 }, { "--unshare-uts", 0, 1 }, { "--unshare-cgroup-try", 0, 0 },
	{ "--disable-userns", 0, 1 }, { "--new-session", 0, 1 }, { "--die-with-parent", 0, 1 },
	{ "--cap-drop", 1, 1 }, { "--hostname", 1, 0 }, { "--clearenv", 0, 1 },
	{ "--ro-bind", 2, 0 }, { "--ro-bind-try", 2, 0 }, { "--bind", 2, 0 },
	{ "--symlink", 2, 0 }, { "--setenv", 2, 0 },
	{ "--proc", 1, 0 }, { "--dev", 1, 0 }, { "--tmpfs", 1, 0 }, { "--size", 1, 0 },
	{ "--remount-ro", 1, 0 }, { "--chdir", 1, 0 }, { "--seccomp", 1, 0 },
	{ "--info-fd", 1, 0 }, { "--file", 2, 0 }, { "--perms", 1, 0 }, { "--block-fd", 1, 0 },
	{ "--dir", 1, 0 },
};

/* git's subcommands and options repo.c uses; any other option is refused. */
static const char *priv_git_cmds[] = {
	"add", "checkout", "commit", "config", "diff", "fetch", "init", "ls-remote",
	"merge-base", "push", "reset", "rev-list", "update-ref",
};
static const char *priv_git_opts[] = {
	"-", "--bare", "--cached", "--count", "--is-ancestor", "--name-only", "--no-color",
	"--no-ext-diff", "--no-renames", "--no-tags", "--no-textconv", "--no-verify", "--patch",
	"--quiet", "--stat=200", "--symref", "--update-head-ok",
	"-A", "-B", "-F", "-b", "-f", "-m", "-q",
};
/* git's environment (git.c): these names, and GIT_CONFIG_KEY_n naming these keys only. */
static const char *priv_git_env[] = {
	"PATH", "HOME", "LANG", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_ATTR_NOSYSTEM",
	"GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "GIT_NO_REPLACE_OBJECTS", "GIT_PROTOCOL_FROM_USER",
	"GIT_CEILING_DIRECTORIES", "GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_COUNT",
};
/* Keys whose value could start a program: only git.c's value. */
static const char *priv_git_fixed[][2] = {
	{ "core.hooksPath", "/dev/null" }, { "core.fsmonitor", "false" },
	{ "core.sshCommand", "false" }, { "core.askPass", "false" },
	{ "core.attributesFile", "/dev/null" }, { "core.excludesFile", "/dev/null" },
	{ "credential.helper", "" }, { "protocol.allow", "never" },
	{ "protocol.https.allow", "always" }, { "protocol.http.allow", "always" },
	{ "protocol.file.allow", "always" },
};
static const char *priv_git_free[] = {
	"core.autocrlf", "core.symlinks", "safe.directory", "commit.gpgSign",
	"submodule.recurse", "fetch.recurseSubmodules", "gc.auto", "maintenance.auto",
	"advice.detachedHead", "init.defaultBranch", "user.name", "user.email",
	"http.extraHeader",
};

static int
priv_in(const char *s, const char *const *list, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (strcmp(s, list[i]) == 0)
			return 1;
	}
	return 0;
}

/* The value of NAME in env ("NAME=value"), or NULL. */
static const char *
priv_env_get(char *const *env, const char *name)
{
	size_t	len = strlen(name);

	for (; env != NULL && *env != NULL; env++) {
		if (strncmp(*env, name, len) == 0 && (*env)[len] == '=')
			return *env + len + 1;
	}
	return NULL;
}

/* A git child: a subcommand and options of repo.c's, git.c's environment; NULL if so. */
static const char *
priv_git_check(const struct priv_spawn *s)
{
	const char	*key, *val;
	char		 name[64];
	size_t		 i, k;

	if (strcmp(s->argv[0], "git") != 0 || s->argv[1] == NULL ||
	    !priv_in(s->argv[1], priv_git_cmds, SPUR_ARRLEN(priv_git_cmds)))
		return "not a git subcommand the engine uses";
	for (i = 2; s->argv[i] != NULL; i++) {
		if (s->argv[i][0] == '-' &&
		    !priv_in(s->argv[i], priv_git_opts, SPUR_ARRLEN(priv_git_opts)))
			return "a git option the engine does not use";
		/* "ext::" and other remote helpers run a program. */
		if (strstr(s->argv[i], "::") != NULL)
			return "a git remote helper";
	}
	if (strcmp(s->argv[1], "config") == 0 && (s->argv[2] == NULL ||
	    strcmp(s->argv[2], "remote.origin.url") != 0))
		return "git config of another key than remote.origin.url";
	for (i = 0; s->env != NULL && s->env[i] != NULL; i++) {
		k = strcspn(s->env[i], "=");
		if (s->env[i][k] != '=' || k >= sizeof name)
			return "a bad environment entry";
		memcpy(name, s->env[i], k);
		name[k] = '\0';
		if (strncmp(name, "GIT_CONFIG_VALUE_", 17) == 0)
			continue;	/* checked with its key */
		if (strncmp(name, "GIT_CONFIG_KEY_", 15) == 0) {
			key = s->env[i] + k + 1;
			snprintf(name, sizeof name, "GIT_CONFIG_VALUE_%.*s", (int)(k - 15),
			    s->env[i] + 15);
			val = priv_env_get(s->env, name);
			for (k = 0; k < SPUR_ARRLEN(priv_git_fixed); k++) {
				if (strcmp(key, priv_git_fixed[k][0]) == 0)
					break;
			}
			if (k < SPUR_ARRLEN(priv_git_fixed)) {
				if (val == NULL || strcmp(val, priv_git_fixed[k][1]) != 0)
					return "a git setting that could start a program";
			} else if (!priv_in(key, priv_git_free, SPUR_ARRLEN(priv_git_free)))
				return "a git setting the engine does not make";
			continue;
		}
		if (!priv_in(name, priv_git_env, SPUR_ARRLEN(priv_git_env)))
			return "an environment variable git.c does not set";
	}
	return NULL;
}

/*
 * A bwrap child: argv is "bwrap --args N -- command...", N a descriptor
 * passed; the options in it are read here, checked (priv_bwrap_opts), and
 * handed to bwrap from a copy of the helper's own, so the engine cannot change
 * them once checked. *args_fd: that copy, for keep[*args_at]. NULL if fine.
 */
static const char *
priv_bwrap_check(const struct priv_spawn *s, const int *keep, size_t nkeep, int *args_fd,
    size_t *args_at)
{
	const char	*why = NULL, *p, *end;
	unsigned int	 seen = 0, want = 0;
	char		*data = NULL, num[16];
	size_t		 len = 0, i, k;
	int		 fd;

	if (strcmp(s->argv[0], "bwrap") != 0 || s->argv[1] == NULL ||
	    strcmp(s->argv[1], "--args") != 0 || s->argv[2] == NULL || s->argv[3] == NULL ||
	    strcmp(s->argv[3], "--") != 0 || s->argv[4] == NULL)
		return "not bwrap --args N -- command";
	/* bwrap's own environment only names the run and the engine (--clearenv inside). */
	for (i = 0; s->env != NULL && s->env[i] != NULL; i++) {
		if (strncmp(s->env[i], "SPUR_SANDBOX=", 13) != 0 &&
		    strncmp(s->env[i], "SPUR_ENGINE=", 12) != 0 &&
		    strncmp(s->env[i], "PATH=", 5) != 0)
			return "an environment variable bwrap is not given";
	}
	for (k = 0; k < nkeep; k++) {
		snprintf(num, sizeof num, "%zu", 3 + k);
		if (strcmp(s->argv[2], num) == 0)
			break;
	}
	if (k == nkeep || (data = priv_read_in(keep[k], PRIV_BODY_MAX, &len)) == NULL)
		return "bwrap's --args is not a file passed";
	if (len == 0 || data[len - 1] != '\0') {
		why = "bwrap's options are not NUL-terminated";
		goto out;
	}
	for (p = data, end = data + len; p < end; p += strlen(p) + 1) {
		for (i = 0; i < SPUR_ARRLEN(priv_bwrap_opts); i++) {
			if (strcmp(p, priv_bwrap_opts[i].name) == 0)
				break;
		}
		if (i == SPUR_ARRLEN(priv_bwrap_opts)) {
			why = "a bwrap option the engine does not use";
			goto out;
		}
		if (strcmp(p, "--cap-drop") == 0 && (p + 10 >= end || strcmp(p + 11, "ALL") != 0)) {
			why = "--cap-drop other than ALL";
			goto out;
		}
		seen |= 1U << i;
		for (k = 0; k < (size_t)priv_bwrap_opts[i].nargs; k++) {
			p += strlen(p) + 1;
			if (p >= end) {
				why = "a bwrap option without its value";
				goto out;
			}
		}
	}
	for (i = 0; i < SPUR_ARRLEN(priv_bwrap_opts); i++)
		want |= priv_bwrap_opts[i].required ? 1U << i : 0;
	if ((seen & want) != want) {
		why = "a sandbox without its namespaces, --die-with-parent or --cap-drop ALL";
		goto out;
	}
	if ((fd = memfd_create("spur-args", MFD_CLOEXEC)) == -1 ||
	    write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) {
		if (fd != -1)
			close(fd);
		why = "cannot copy bwrap's options";
		goto out;
	}
	*args_fd = fd;
	for (k = 0; k < nkeep; k++) {
		snprintf(num, sizeof num, "%zu", 3 + k);
		if (strcmp(s->argv[2], num) == 0)
			*args_at = k;
	}
out:
	explicit_bzero(data, len);	/* --setenv carries the run's secrets */
	free(data);
	return why;
}

static void
priv_do_spawn(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_spawn	*s = &req->u.spawn;
	struct proc_spec	 spec;
	int			 fds[3], file[PRIV_STAGE_MAX], keep[PROC_KEEP_MAX];
	int			 args_fd = -1;
	size_t			 i, nstage = strv_len(s->stage_src), nkeep, args_at = 0;
	const char		*why;
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
	if (s->cwd_fd > 1 || req->hdr.nfds < s->cwd_fd ||
	    req->hdr.nfds - s->cwd_fd > PROC_KEEP_MAX) {
		priv_refuse(ans, req, EINVAL, "bad descriptors", s->path);
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
	if (h->nchildren == PRIV_CHILDREN_MAX) {
		priv_refuse(ans, req, EAGAIN, "too many children", s->path);
		return;
	}
	/* Last: what the child runs, checked against what the engine starts. */
	memcpy(keep, req->fds + s->cwd_fd, (req->hdr.nfds - s->cwd_fd) * sizeof *keep);
	nkeep = req->hdr.nfds - s->cwd_fd;
	why = strcmp(s->path, BWRAP_PATH) == 0 ? priv_bwrap_check(s, keep, nkeep, &args_fd,
	    &args_at) : priv_git_check(s);
	if (why != NULL) {
		priv_refuse(ans, req, EPERM, why, s->argv[1] != NULL ? s->argv[1] : s->path);
		return;
	}
	if (args_fd != -1)
		keep[args_at] = args_fd;
	memset(&spec, 0, sizeof spec);
	spec.path = s->path;
	spec.argv = s->argv;
	spec.env = s->env;
	spec.cwd = *s->cwd != '\0' ? s->cwd : NULL;
	if (s->cwd_fd) {
		spec.cwd_fd_set = 1;
		spec.cwd_fd = req->fds[0];
	}
	spec.keep = keep;
	spec.nkeep = nkeep;
	spec.drop = 1;
	spec.uid = s->uid;
	spec.gid = s->gid;
	spec.rlimit_data = s->rlimit_data;
	spec.rlimit_nproc = s->rlimit_nproc;
	spec.stage_src = s->stage_src;
	spec.stage_dst = s->stage_dst;
	spec.stage_file = file;
	spec.nstage = nstage;
	spec.vfork = 1;		/* the helper has one thread */
	pid = proc_spawn(&spec, fds, &cause);
	if (args_fd != -1)
		close(args_fd);		/* the child has its own */
	if (pid == -1) {
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

/* WRITE's "dir/name" below the directory open as fd, as the child's uid: made anew, 0600. */
static int
priv_job_write(int fd, const char *arg, const char *text, size_t len, char **cause)
{
	char	*copy = xstrdup(arg), *name = strchr(copy, '/');
	int	 dfd = -1, f = -1, rc = -1;

	if (name == NULL || (*name++ = '\0', !priv_name_ok(copy)) || !priv_name_ok(name)) {
		*cause = xstrdup("not dir/name");
		goto out;
	}
	(void)mkdirat(fd, copy, 0700);
	if ((dfd = openat(fd, copy, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1 ||
	    (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) ||
	    (f = openat(dfd, name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600)) == -1 ||
	    write(f, text, len) != (ssize_t)len) {
		*cause = xprintf("%s: %s", arg, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f != -1)
		close(f);
	if (dfd != -1)
		close(dfd);
	free(copy);
	return rc;
}

/*
 * The child of a job: the session's uid and nothing else, then the job on the
 * directory open as fd. Exits 0 (done; PACK's archive in out), 1 (PACK:
 * nothing there) or 2 (failed, the reason in out).
 */
static void __attribute__((noreturn))
priv_job_child(const struct priv_jobreq *j, int fd, int in, int out)
{
	char	*data = NULL, *cause = NULL;
	size_t	 len = 0;
	int	 rc = 2;

	alarm(PRIV_JOB_SECONDS);	/* a tree that takes longer is not worth waiting on */
	if (setgroups(0, NULL) != 0 || setresgid(j->dir.gid, j->dir.gid, j->dir.gid) != 0 ||
	    setresuid(j->dir.uid, j->dir.uid, j->dir.uid) != 0 || geteuid() == 0) {
		cause = xprintf("cannot become %u: %s", j->dir.uid, strerror(errno));
		goto out;
	}
	switch (j->job) {
	case PRIV_JOB_PACK:
		if ((rc = archive_pack_at(fd, j->arg, ARCHIVE_MAX, &data, &len, &cause)) == 0 &&
		    write(out, data, len) != (ssize_t)len) {
			cause = xstrdup("cannot hand the archive back");
			rc = 2;
		}
		rc = rc < 0 ? 2 : rc;
		break;
	case PRIV_JOB_UNPACK:
		if ((data = priv_read_in(in, ARCHIVE_MAX + 4096, &len)) == NULL)
			cause = xstrdup("no archive handed in");
		else if (archive_unpack_at(fd, data, len, j->dir.uid, j->dir.gid, &cause) == 0)
			rc = 0;
		break;
	case PRIV_JOB_WRITE:
		if ((data = priv_read_in(in, PRIV_STR_MAX, &len)) == NULL)
			cause = xstrdup("no text handed in");
		else if (priv_job_write(fd, j->arg, data, len, &cause) == 0)
			rc = 0;
		break;
	}
out:
	if (rc == 2 && cause != NULL)
		(void)!write(out, cause, strlen(cause));
	_exit(rc);
}

/* PACK's state dir ("a/b") and WRITE's "dir/name": names below the directory, no more. */
static int
priv_job_arg_ok(const struct priv_jobreq *j)
{
	char	*copy, *parts[PRIV_SUB_PARTS];
	size_t	 n;
	int	 rc;

	if (j->job != PRIV_JOB_PACK && j->job != PRIV_JOB_WRITE)
		return 0;
	copy = xstrdup(j->arg != NULL ? j->arg : "");
	/* PACK of "": the directory's own tree (a run's artifacts), packed as its uid all the same. */
	rc = priv_sub_split(copy, parts, &n) != 0 ||
	    (j->job == PRIV_JOB_WRITE && n != 2) ? -1 : 0;
	free(copy);
	return rc;
}

/* A job on a directory a sandbox wrote: PACK, UNPACK, WRITE as its uid; GLOB, DU here. */
static void
priv_do_job(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const struct priv_jobreq	*j = &req->u.job;
	char				*sub = xstrdup(j->dir.sub != NULL ? j->dir.sub : "");
	char				*parts[PRIV_SUB_PARTS], msg[512];
	char				 what[PRIV_SESSION_MAX + PRIV_SUB_MAX + 16];
	unsigned long long		 bytes;
	const char			*last = NULL;
	size_t				 n;
	ssize_t				 got;
	int				 pfd = -1, fd = -1, out = -1, in, status;
	pid_t				 pid;

	priv_dir_what(&j->dir, what, sizeof what);
	if (priv_dir_check(h, &j->dir, sub, parts, &n, req, ans, what) != 0)
		goto done;
	if (j->job < PRIV_JOB_PACK || j->job > PRIV_JOB_DU) {
		priv_refuse(ans, req, EINVAL, "not a job", what);
		goto done;
	}
	if (priv_job_arg_ok(j) != 0) {
		priv_refuse(ans, req, EINVAL, "not names below the directory", j->arg);
		goto done;
	}
	in = j->job == PRIV_JOB_UNPACK || j->job == PRIV_JOB_WRITE ? 1 : 0;
	if (req->hdr.nfds != (uint32_t)in) {
		priv_refuse(ans, req, EINVAL, "bad descriptors", what);
		goto done;
	}
	if (j->job != PRIV_JOB_GLOB && j->job != PRIV_JOB_DU &&
	    !priv_uid_ok(h, j->dir.uid, j->dir.gid)) {
		priv_refuse(ans, req, EPERM, "uid not in sandbox.uids", what);
		goto done;
	}
	if ((pfd = priv_dir_parent(h, &j->dir, parts, n, 0, &last)) == -1) {
		if (errno == ELOOP || errno == ENOTDIR)
			priv_refuse(ans, req, errno, "a link or a file on the way", what);
		else if (errno == ENOENT && j->job != PRIV_JOB_UNPACK &&
		    j->job != PRIV_JOB_WRITE) {
			ans->hdr.type = PRIV_OK;	/* nothing there: no match, nothing packed */
			ans->u.answer.value = j->job == PRIV_JOB_PACK ? 1 : 0;
		} else
			priv_fail(ans, errno, what);
		goto done;
	}
	if ((fd = priv_open_last(pfd, last, req, ans, what)) == -1) {
		if (errno == ENOENT && (j->job == PRIV_JOB_PACK || j->job == PRIV_JOB_GLOB)) {
			free(ans->u.answer.message);
			memset(&ans->u, 0, sizeof ans->u);
			ans->hdr.type = PRIV_OK;
			ans->u.answer.value = j->job == PRIV_JOB_PACK ? 1 : 0;
		}
		goto done;
	}
	if ((out = memfd_create("spur-job", MFD_CLOEXEC)) == -1) {
		priv_fail(ans, errno, "memfd_create");
		goto done;
	}
	ans->hdr.type = PRIV_OK;
	switch (j->job) {
	case PRIV_JOB_GLOB:
		ans->u.answer.value = safefs_glob_at(fd, j->arg);
		goto done;
	case PRIV_JOB_DU:
		ans->u.answer.value = safefs_du_fd(fd, &bytes);
		fd = -1;	/* closed by safefs_du_fd */
		snprintf(msg, sizeof msg, "%llu", bytes);
		if (write(out, msg, strlen(msg)) != (ssize_t)strlen(msg))
			ans->u.answer.value = -1;
		break;
	default:
		if ((pid = fork()) == -1) {
			priv_fail(ans, errno, "fork");
			goto done;
		}
		if (pid == 0)
			priv_job_child(j, fd, in ? req->fds[0] : -1, out);
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
			got = pread(out, msg, sizeof msg - 1, 0);
			msg[got > 0 ? got : 0] = '\0';
			ans->hdr.type = PRIV_ERR;
			ans->u.answer.value = EIO;
			ans->u.answer.message = xprintf("%s %s: %s", priv_job_name(j->job), what,
			    WIFEXITED(status) ? msg : "killed (too long)");
			goto done;
		}
		ans->u.answer.value = WEXITSTATUS(status);
		break;
	}
	ans->hdr.nfds = 1;
	ans->fds[0] = out;
	out = -1;
done:
	if (out != -1)
		close(out);
	if (fd != -1)
		close(fd);
	if (pfd != -1)
		close(pfd);
	free(sub);
}

/*
 * A file the config named at start, opened for the engine (never read here:
 * the helper holds no secret); a file of the automations directory is opened
 * by its name there, never through a link.
 */
static void
priv_do_open_file(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	const char	*path = req->u.str, *base;
	struct stat	 st;
	char		*dir = NULL, *real = NULL;
	size_t		 i;
	int		 dfd, fd = -1, listed = 0;

	if (path == NULL || *path != '/') {
		priv_refuse(ans, req, EINVAL, "not an absolute path", path);
		return;
	}
	/* The path as it resolves (a config reached through a link is the same file). */
	if ((real = realpath(path, NULL)) != NULL) {
		for (i = 0; h->files != NULL && h->files[i] != NULL; i++)
			listed |= strcmp(real, h->files[i]) == 0;
	}
	base = strrchr(path, '/') + 1;
	if (listed)
		fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	else if (h->auto_dir != NULL && priv_name_ok(base) &&
	    strcmp((dir = path_dirname(path)), h->auto_dir) == 0) {
		if ((dfd = open(h->auto_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
			fd = openat(dfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			close(dfd);
		}
	} else {
		free(dir);
		free(real);
		priv_refuse(ans, req, EPERM, "not a file the config named at start", path);
		return;
	}
	free(dir);
	free(real);
	if (fd == -1 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		if (fd != -1)
			close(fd);
		priv_refuse(ans, req, fd == -1 ? errno : EINVAL, "not a regular file", path);
		return;
	}
	ans->hdr.type = PRIV_OK;
	ans->hdr.nfds = 1;
	ans->fds[0] = fd;
}

/* What a dead engine left of a run's sandbox: only sandbox uids' processes naming the run. */
static void
priv_do_kill_run(struct priv_helper *h, const struct priv_msg *req, struct priv_msg *ans)
{
	if (req->u.str == NULL || !priv_session_ok(req->u.str)) {
		priv_refuse(ans, req, EINVAL, "not a run id", req->u.str);
		return;
	}
	ans->hdr.type = PRIV_OK;
	ans->u.answer.value = sandbox_kill_leftovers(h->conf, req->u.str);
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
	case PRIV_JOB:
		priv_do_job(h, req, ans);
		break;
	case PRIV_KILL_RUN:
		priv_do_kill_run(h, req, ans);
		break;
	case PRIV_OPEN_FILE:
		priv_do_open_file(h, req, ans);
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

/* A spawn's SPUR_ENGINE= entry: what to sweep for when an engine it did not fork is gone. */
static void
priv_helper_learn(const struct priv_msg *req)
{
	char *const	*v;

	if (req->hdr.type != PRIV_SPAWN)
		return;
	for (v = req->u.spawn.env; v != NULL && *v != NULL; v++) {
		if (strncmp(*v, "SPUR_ENGINE=", 12) == 0)
			sandbox_reaper_learn(*v);
	}
}

/* One request read, checked, done and answered; 0 when the engine is gone. */
static int
priv_helper_serve_one(struct priv_helper *h, int sock)
{
	struct priv_msg	 req, ans;
	char		*cause = NULL;
	uint32_t	 i;

	if (priv_recv(sock, &req, &cause) <= 0) {
		/* End of file: the engine is gone. Anything else: it cannot be trusted on. */
		if (strcmp(cause, "end of file") != 0)
			log_error("event=priv.refused reason=%s consequence=\"the engine's "
			    "connection ends\"", log_q(cause));
		free(cause);
		return 0;
	}
	priv_helper_learn(&req);
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
	return 1;
}

/*
 * A connection to spur helper's socket: the engine's uid's (SO_PEERCRED), and
 * only while no engine is connected; -1 when refused (logged).
 */
static int
priv_helper_accept(struct priv_helper *h, int lfd, int busy)
{
	struct ucred	 cred = { .pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	struct priv_msg	 hello;
	socklen_t	 len = sizeof cred;
	const char	*why = NULL;
	int		 fd;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) == -1)
		return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		why = "no peer credentials";
	else if (cred.uid != h->engine_uid)
		why = "the peer is not the engine's user";
	else if (busy)
		why = "an engine is connected already";
	if (why != NULL) {
		log_error("event=priv.refused reason=%s peer_uid=%ld peer_pid=%ld",
		    log_q(why), (long)cred.uid, (long)cred.pid);
		close(fd);
		return -1;
	}
	log_info("event=priv.connected peer_uid=%ld peer_pid=%ld", (long)cred.uid,
	    (long)cred.pid);
	/* The greeting: the engine knows it was taken, not closed on. */
	memset(&hello, 0, sizeof hello);
	hello.hdr.type = PRIV_OK;
	if (priv_send(fd, &hello) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The engine gone: its children and what its sandboxes left go. */
static void
priv_helper_gone(struct priv_helper *h)
{
	for (size_t k = 0; k < h->nchildren; k++)
		kill(-h->children[k].pid, SIGKILL);
	h->nchildren = 0;
	sandbox_reaper_sweep(h->conf);
}

/*
 * The helper's life: a request at a time, reaping between. Forked (lfd -1):
 * its one engine on sock; gone, the helper ends. Listening (spur helper):
 * engines one at a time from lfd, each one's children going with it.
 */
static void
priv_helper_loop(struct priv_helper *h, int sock, int lfd)
{
	struct pollfd	 pfd[3];
	sigset_t	 set;
	int		 sfd, fd;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		fatal("priv: signalfd: %s", strerror(errno));
	pfd[1].fd = sfd;
	pfd[1].events = POLLIN;
	pfd[2].fd = lfd;
	pfd[2].events = POLLIN;
	for (;;) {
		pfd[0].fd = sock;
		pfd[0].events = POLLIN;
		if (poll(pfd, lfd != -1 ? 3 : 2, -1) == -1) {
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
		/* The engine's end first: one restarting is not refused for the old one. */
		if (sock != -1 && pfd[0].revents != 0 && !priv_helper_serve_one(h, sock)) {
			priv_helper_gone(h);
			if (lfd == -1)
				break;
			log_info("event=priv.disconnected");
			close(sock);
			sock = -1;
			sandbox_reaper_learn(NULL);
		}
		if (lfd != -1 && pfd[2].revents != 0 &&
		    (fd = priv_helper_accept(h, lfd, sock != -1)) != -1)
			sock = fd;
	}
	close(sfd);
}

static void __attribute__((noreturn))
priv_helper_main(struct priv_helper *h, int sock)
{
	priv_helper_loop(h, sock, -1);
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
			if (i != sv[1] && i != h->area_fd[PRIV_AREA_SESSIONS] &&
			    i != h->area_fd[PRIV_AREA_RUNS] && i != h->area_fd[PRIV_AREA_CACHE])
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

/*
 * spur helper's socket: made afresh at path, root's and the engine's group's
 * (0660), so that the engine's user alone reaches it (SO_PEERCRED checks uid).
 */
static int
priv_helper_socket(const char *path, gid_t gid, char **cause)
{
	struct sockaddr_un	 sun;
	mode_t			 old;
	int			 fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		*cause = xprintf("%s: too long for a socket", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		*cause = xprintf("socket: %s", strerror(errno));
		return -1;
	}
	(void)unlink(path);
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
	    chown(path, 0, gid) != 0 || chmod(path, 0660) != 0 || listen(fd, 4) != 0) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		umask(old);
		close(fd);
		return -1;
	}
	umask(old);
	return fd;
}

int
priv_helper_listen(const struct config *cf, char **cause)
{
	struct priv_helper	*h;
	struct passwd		*pw;
	uid_t			 uid;
	gid_t			 gid;
	int			 lfd;

	if (cf->helper_socket == NULL || cf->user == NULL) {
		*cause = xstrdup("helper_socket: and user: must be set");
		return -1;
	}
	if ((pw = getpwnam(cf->user)) == NULL || pw->pw_uid == 0) {
		*cause = xprintf("user: %s %s", cf->user, pw == NULL ? "does not exist" :
		    "is root");
		return -1;
	}
	uid = pw->pw_uid;	/* pw is getpwnam's, which the helper's create calls again */
	gid = pw->pw_gid;
	if ((h = priv_helper_create(cf, uid, gid, cause)) == NULL)
		return -1;
	if ((lfd = priv_helper_socket(cf->helper_socket, gid, cause)) == -1) {
		priv_helper_free(h);
		return -1;
	}
	/* It holds no secret: of the config, only what the sweep needs; no environment. */
	h->conf = priv_helper_conf(cf);
	for (char **v = environ; v != NULL && *v != NULL; v++)
		explicit_bzero(*v, strlen(*v));
	clearenv();
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "spur-priv");
	log_info("event=priv.listening socket=%s engine_uid=%ld", log_q(cf->helper_socket),
	    (long)uid);
	/* Type=notify: spur.service (After= it) starts once the socket is there. */
	notify_send("READY=1\nSTATUS=listening on %s", cf->helper_socket);
	priv_helper_loop(h, -1, lfd);
	close(lfd);
	config_free((struct config *)h->conf);
	priv_helper_free(h);
	return 0;
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
	struct stat	 st;
	DIR		*d;
	int		 fd, depth;

	if ((fd = open(cf->data_dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1) {
		*cause = xprintf("%s: %s", cf->data_dir, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || fchown(fd, uid, gid) != 0 ||
	    fchmod(fd, data_dir_mode(st.st_mode)) != 0) {
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
