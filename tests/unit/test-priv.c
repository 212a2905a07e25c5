/* test-priv: the root helper's wire form, and each request refused outside its bounds (logged). */
#include "spur.h"
#include "conf.h"
#include "priv.h"
#include "sandbox.h"
#include "proc.h"
#include "tap.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UID_IN		900000007	/* inside the test's sandbox.uids */
#define UID_FIRST	900000000
#define UID_LAST	900000100

static char		 root[] = "/tmp/spur-test-priv-XXXXXX";
static char		*logpath;
static struct config	 cf;

/* What the helper logged since the last call (stderr goes to a file). */
static char *
log_take(void)
{
	char	*text = NULL, *cause = NULL;

	fflush(stderr);
	if (read_file(logpath, 1 << 20, &text, NULL, &cause) != 0) {
		free(cause);
		return xstrdup("");
	}
	if (truncate(logpath, 0) != 0)
		fatal("truncate %s", logpath);
	return text;
}

static int
dir_req(struct priv_helper *h, uint32_t type, const char *session, const char *sub,
    uint32_t uid, uint32_t gid, uint32_t from, int *error)
{
	struct priv_msg	req, ans;
	int		r;

	memset(&req, 0, sizeof req);
	req.hdr.type = type;
	req.hdr.id = 7;
	req.u.dir.session = (char *)session;
	req.u.dir.sub = (char *)sub;
	req.u.dir.uid = uid;
	req.u.dir.gid = gid;
	req.u.dir.from = from;
	priv_helper_handle(h, &req, &ans);
	r = ans.hdr.type == PRIV_OK ? 0 : -1;
	*error = ans.hdr.type == PRIV_ERR ? ans.u.answer.value : 0;
	if (ans.hdr.id != 7)
		r = -2;
	priv_msg_clear(&ans);
	return r;
}

/* A refusal: an ERR answer with the errno, and an event=priv.refused line. */
static void
refused(struct priv_helper *h, uint32_t type, const char *session, const char *sub,
    uint32_t uid, uint32_t from, int want, const char *name)
{
	char	*log;
	int	 error, r;

	r = dir_req(h, type, session, sub, uid, uid, from, &error);
	log = log_take();
	ok(r == -1 && error == want && strstr(log, "event=priv.refused") != NULL,
	    "%s: refused (errno %d, want %d) and logged", name, error, want);
	free(log);
}

static void
test_wire(void)
{
	struct priv_msg	 m, got;
	struct buf	 b;
	char		*argv[] = { "bwrap", "--args", "3", NULL }, *env[] = { "A=1", NULL };
	char		*src[] = { "/var/lib/spur/sessions/x", NULL }, *dst[] = { "/mnt/0", NULL };
	char		*cause = NULL;
	uint8_t		 bad[64];
	int		 sv[2], pfd[2], r;

	memset(&m, 0, sizeof m);
	m.hdr.type = PRIV_SPAWN;
	m.hdr.id = 3;
	m.u.spawn.uid = UID_IN;
	m.u.spawn.gid = UID_IN;
	m.u.spawn.path = "/usr/bin/bwrap";
	m.u.spawn.cwd = "/";
	m.u.spawn.argv = argv;
	m.u.spawn.env = env;
	m.u.spawn.stage_src = src;
	m.u.spawn.stage_dst = dst;
	m.u.spawn.stage_file = 1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
	    pipe2(pfd, O_CLOEXEC) != 0)
		fatal("socketpair");
	m.hdr.nfds = 1;
	m.fds[0] = pfd[1];
	ok(priv_send(sv[0], &m) == 1, "a SPAWN with a descriptor is sent");
	ok(priv_recv(sv[1], &got, &cause) == 1, "and read back");
	ok(got.hdr.type == PRIV_SPAWN && got.hdr.id == 3 && got.u.spawn.uid == UID_IN &&
	    strcmp(got.u.spawn.argv[2], "3") == 0 && strcmp(got.u.spawn.env[0], "A=1") == 0 &&
	    strcmp(got.u.spawn.stage_dst[0], "/mnt/0") == 0 && got.u.spawn.stage_file == 1 &&
	    got.u.spawn.argv[3] == NULL, "every field as sent");
	ok(got.hdr.nfds == 1 && write(got.fds[0], "x", 1) == 1 && read(pfd[0], bad, 1) == 1,
	    "the descriptor passed is the pipe's");
	close(got.fds[0]);
	priv_msg_clear(&got);

	/* A string longer than its body, a count that lies, a NUL, bytes after. */
	memset(&got, 0, sizeof got);
	got.hdr.type = PRIV_PREPARE_DIR;
	memset(bad, 0, sizeof bad);
	bad[4] = 200;	/* the session id's length, after the area */
	got.hdr.len = 24;
	r = priv_decode(&got, bad, 24, &cause);
	ok(r == -1 && cause != NULL, "a string longer than the body is refused (%s)", cause);
	free(cause);
	cause = NULL;
	got.hdr.type = PRIV_SPAWN;
	memset(bad, 0, sizeof bad);
	bad[36] = 0xff;	/* argv's count, after the fixed fields and two empty strings */
	bad[37] = 0xff;
	got.hdr.len = 64;
	r = priv_decode(&got, bad, 64, &cause);
	ok(r == -1, "a list longer than its body is refused (%s)", cause);
	free(cause);
	cause = NULL;
	got.hdr.type = PRIV_PREPARE_DIR;
	memset(bad, 0, sizeof bad);
	bad[4] = 2;
	bad[8] = 'a';
	got.hdr.len = 30;
	r = priv_decode(&got, bad, 30, &cause);
	ok(r == -1, "a NUL in a string is refused (%s)", cause);
	free(cause);
	cause = NULL;
	buf_init(&b, 0);
	m.hdr.type = PRIV_SIGNAL;
	m.u.sig.pid = 5;
	priv_encode(&m, &b);
	buf_addc(&b, 'x');
	got.hdr.type = PRIV_SIGNAL;
	got.hdr.len = (uint32_t)b.len;
	r = priv_decode(&got, (uint8_t *)b.data, b.len, &cause);
	ok(r == -1, "bytes after the body are refused (%s)", cause);
	free(cause);
	buf_free(&b);
	close(sv[0]);
	close(sv[1]);
	close(pfd[0]);
	close(pfd[1]);
}

static void
test_dirs(struct priv_helper *h)
{
	struct stat	 st;
	char		*sessions = path_join(root, "sessions"), *p, *outside, *log;
	int		 error, isroot = geteuid() == 0;

	ok(dir_req(h, PRIV_PREPARE_DIR, "s1", "workspace", UID_IN, UID_IN, 0, &error) == 0,
	    "PREPARE_DIR s1/workspace");
	p = xprintf("%s/s1/workspace", sessions);
	ok(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700 &&
	    (!isroot || st.st_uid == UID_IN), "made, 0700%s", isroot ? ", the session uid's" :
	    "");
	free(p);
	ok(dir_req(h, PRIV_PREPARE_DIR, "s1", "git/home", UID_IN, UID_IN, 0, &error) == 0,
	    "PREPARE_DIR of a path two deep");

	memset(&st, 0, sizeof st);
	{
		struct priv_msg	req, ans;

		memset(&req, 0, sizeof req);
		req.hdr.type = PRIV_PREPARE_DIR;
		req.u.dir.area = PRIV_AREA_RUNS;
		req.u.dir.session = "run_1";
		req.u.dir.sub = "artifacts";
		req.u.dir.uid = req.u.dir.gid = UID_IN;
		priv_helper_handle(h, &req, &ans);
		p = xprintf("%s/runs/run_1/artifacts", root);
		ok(ans.hdr.type == PRIV_OK && stat(p, &st) == 0 && (!isroot || st.st_uid == UID_IN),
		    "PREPARE_DIR of a run's artifacts, under runs/");
		free(p);
		priv_msg_clear(&ans);
		req.u.dir.area = PRIV_AREAS;
		priv_helper_handle(h, &req, &ans);
		log = log_take();
		ok(ans.hdr.type == PRIV_ERR && strstr(log, "event=priv.refused") != NULL,
		    "an area but sessions/, runs/ and cache/: refused and logged");
		free(log);
		priv_msg_clear(&ans);
	}
	refused(h, PRIV_PREPARE_DIR, "..", "", UID_IN, 0, EINVAL, "a session id of ..");
	refused(h, PRIV_PREPARE_DIR, "s1/../..", "", UID_IN, 0, EINVAL,
	    "a session id with a slash");
	refused(h, PRIV_PREPARE_DIR, "", "x", UID_IN, 0, EINVAL, "an empty session id");
	refused(h, PRIV_PREPARE_DIR, "s1", "../s2", UID_IN, 0, EINVAL, "a path out of its session");
	refused(h, PRIV_PREPARE_DIR, "s1", "/etc", UID_IN, 0, EINVAL, "an absolute path");
	refused(h, PRIV_PREPARE_DIR, "s1", "a/./b", UID_IN, 0, EINVAL, "a . in the path");
	refused(h, PRIV_PREPARE_DIR, "s1", "a//b", UID_IN, 0, EINVAL, "an empty name");
	refused(h, PRIV_PREPARE_DIR, "s1", "workspace", 0, 0, EPERM, "uid 0");
	refused(h, PRIV_PREPARE_DIR, "s1", "workspace", 1000, 0, EPERM,
	    "a uid outside sandbox.uids");
	refused(h, PRIV_PREPARE_DIR, "s1", "workspace", UID_LAST + 1, 0, EPERM,
	    "the uid after sandbox.uids");
	refused(h, PRIV_CHOWN, "s1", "workspace", UID_IN, 0, EPERM, "a CHOWN of root's files");
	refused(h, PRIV_CHOWN, "s1", "workspace", 0, UID_IN, EPERM, "a CHOWN to root");

	/* A link a sandbox left where a directory was: refused (O_DIRECTORY|O_NOFOLLOW), never followed. */
	outside = path_join(root, "outside");
	mkdir(outside, 0755);
	p = xprintf("%s/s1/home", sessions);
	if (symlink(outside, p) != 0)
		fatal("symlink");
	refused(h, PRIV_PREPARE_DIR, "s1", "home", UID_IN, 0, ENOTDIR,
	    "PREPARE_DIR on a link swapped in");
	refused(h, PRIV_PREPARE_DIR, "s1", "home/x", UID_IN, 0, ENOTDIR,
	    "PREPARE_DIR under a link swapped in");
	refused(h, PRIV_CHOWN, "s1", "home", UID_IN, UID_IN + 1, ENOTDIR,
	    "CHOWN of a link swapped in");
	ok(stat(outside, &st) == 0 && (st.st_mode & 07777) == 0755 && st.st_uid == geteuid(),
	    "the directory it points at is untouched");
	ok(dir_req(h, PRIV_REMOVE_DIR, "s1", "home", 0, 0, 0, &error) == 0 &&
	    lstat(p, &st) != 0 && stat(outside, &st) == 0,
	    "REMOVE_DIR removes the link itself, not what it points at");
	free(p);
	p = xprintf("%s/s3", sessions);
	if (symlink(outside, p) != 0)
		fatal("symlink");
	refused(h, PRIV_PREPARE_DIR, "s3", "workspace", UID_IN, 0, ENOTDIR,
	    "a session directory that is a link");
	free(p);
	p = path_join(outside, "workspace");
	ok(access(p, F_OK) != 0, "nothing was made through it");
	free(p);

	ok(dir_req(h, PRIV_REMOVE_DIR, "s1", "", 0, 0, 0, &error) == 0, "REMOVE_DIR of a session");
	p = path_join(sessions, "s1");
	ok(access(p, F_OK) != 0, "it is gone");
	free(p);
	ok(dir_req(h, PRIV_REMOVE_DIR, "s9", "", 0, 0, 0, &error) == 0,
	    "REMOVE_DIR of a session that is not there is done");
	log = log_take();
	free(log);
	free(outside);
	free(sessions);
}

static void
test_spawn_signal(struct priv_helper *h)
{
	struct priv_msg	 req, ans;
	char		*argv[] = { "git", "init", "--bare", NULL, NULL }, *log, buf[256], *git;
	char		*src[] = { "/tmp", NULL }, *dst[] = { "/etc", NULL };
	ssize_t		 n;
	int		 status;

	git = proc_which("git", NULL);
	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SPAWN;
	req.u.spawn.uid = 1000;
	req.u.spawn.gid = 1000;
	req.u.spawn.path = git != NULL ? git : "/usr/bin/git";
	req.u.spawn.cwd = "/";
	req.u.spawn.argv = argv;
	priv_helper_handle(h, &req, &ans);
	log = log_take();
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == EPERM &&
	    strstr(log, "event=priv.refused request=SPAWN") != NULL,
	    "SPAWN as a uid outside sandbox.uids: refused and logged");
	free(log);
	priv_msg_clear(&ans);
	req.u.spawn.uid = req.u.spawn.gid = 0;
	priv_helper_handle(h, &req, &ans);
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == EPERM, "SPAWN as root: refused");
	priv_msg_clear(&ans);
	req.u.spawn.uid = req.u.spawn.gid = UID_IN;
	req.u.spawn.path = "/bin/sh";
	priv_helper_handle(h, &req, &ans);
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == EPERM,
	    "SPAWN of a program not bwrap or git: refused");
	priv_msg_clear(&ans);
	req.u.spawn.path = git != NULL ? git : "/usr/bin/git";
	req.u.spawn.stage_src = src;
	req.u.spawn.stage_dst = dst;
	priv_helper_handle(h, &req, &ans);
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == EINVAL,
	    "SPAWN staging a bind outside " "/mnt: refused");
	priv_msg_clear(&ans);
	req.u.spawn.stage_src = req.u.spawn.stage_dst = NULL;
	free(log_take());

	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SIGNAL;
	req.u.sig.pid = 1;
	req.u.sig.sig = SIGKILL;
	priv_helper_handle(h, &req, &ans);
	log = log_take();
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == ESRCH &&
	    strstr(log, "request=SIGNAL") != NULL,
	    "SIGNAL to a process the helper did not start: refused and logged");
	free(log);
	priv_msg_clear(&ans);

	if (geteuid() != 0 || git == NULL) {
		printf("ok %d # SKIP SPAWN as a session uid: needs root and git\n", ++tap_n);
		free(git);
		return;
	}
	argv[3] = path_join(root, "bare.git");
	if (mkdir(argv[3], 0700) != 0 || chown(argv[3], UID_IN, UID_IN) != 0)
		fatal("%s", argv[3]);
	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SPAWN;
	req.u.spawn.uid = req.u.spawn.gid = UID_IN;
	req.u.spawn.path = git;
	req.u.spawn.cwd = "/";
	req.u.spawn.argv = argv;
	priv_helper_handle(h, &req, &ans);
	n = -1;
	if (ans.hdr.type == PRIV_OK && ans.hdr.nfds == 3) {
		close(ans.fds[0]);
		n = read(ans.fds[1], buf, sizeof buf - 1);
		close(ans.fds[1]);
		close(ans.fds[2]);
		waitpid(ans.u.answer.value, &status, 0);
	}
	if (n >= 0)
		buf[n] = '\0';
	ok(n > 0 && strstr(buf, "Initialized empty Git repository") != NULL,
	    "SPAWN of git as a session uid: its stdout comes back on the pipe handed over");
	priv_msg_clear(&ans);
	free(argv[3]);
	free(git);
}

/* A SPAWN refused for what it would run: its reason logged. */
static void
spawn_refused(struct priv_helper *h, const char *path, char **argv, char **env, int *keep,
    size_t nkeep, const char *why, const char *name)
{
	struct priv_msg	 req, ans;
	char		*log;

	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SPAWN;
	req.u.spawn.uid = req.u.spawn.gid = UID_IN;
	req.u.spawn.path = (char *)path;
	req.u.spawn.cwd = "/";
	req.u.spawn.argv = argv;
	req.u.spawn.env = env;
	req.hdr.nfds = nkeep;
	if (nkeep > 0)
		memcpy(req.fds, keep, nkeep * sizeof *keep);
	priv_helper_handle(h, &req, &ans);
	log = log_take();
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == EPERM &&
	    strstr(log, "event=priv.refused request=SPAWN") != NULL && strstr(log, why) != NULL,
	    "SPAWN %s: refused and logged (%s)", name, why);
	free(log);
	priv_msg_clear(&ans);
}

/* A memfd holding bwrap's options, NUL-separated as sandbox-bwrap.c writes them. */
static int
bwrap_args(const char *const *opts)
{
	int	fd = memfd_create("test-args", MFD_CLOEXEC);

	for (; *opts != NULL; opts++) {
		if (write(fd, *opts, strlen(*opts) + 1) != (ssize_t)strlen(*opts) + 1)
			fatal("write");
	}
	return fd;
}

static void
test_argv(struct priv_helper *h)
{
	static const char	*good[] = { "--unshare-user", "--unshare-ipc", "--unshare-pid",
	    "--unshare-net", "--unshare-uts", "--disable-userns", "--new-session",
	    "--die-with-parent", "--cap-drop", "ALL", "--clearenv", "--ro-bind", "/usr", "/usr",
	    NULL };
	static const char	*capadd[] = { "--unshare-user", "--unshare-ipc", "--unshare-pid",
	    "--unshare-net", "--unshare-uts", "--disable-userns", "--new-session",
	    "--die-with-parent", "--cap-drop", "ALL", "--clearenv", "--cap-add", "ALL", NULL };
	static const char	*nopid[] = { "--unshare-user", "--unshare-ipc", "--unshare-net",
	    "--unshare-uts", "--disable-userns", "--new-session", "--die-with-parent",
	    "--cap-drop", "ALL", "--clearenv", NULL };
	static const char	*short_[] = { "--unshare-user", "--ro-bind", "/usr", NULL };
	char	*bw[] = { "bwrap", "--args", "3", "--", "true", NULL };
	char	*bw_bare[] = { "bwrap", "--cap-add", "ALL", "--", "true", NULL };
	char	*git_c[] = { "git", "-c", "core.sshCommand=touch /tmp/x", "fetch", NULL };
	char	*git_up[] = { "git", "fetch", "--upload-pack=touch /tmp/x", "origin", NULL };
	char	*git_ext[] = { "git", "fetch", "-q", "ext::sh -c touch% /tmp/x", NULL };
	char	*git_cfg[] = { "git", "config", "core.fsmonitor", "touch /tmp/x", NULL };
	char	*git_sub[] = { "git", "daemon", NULL };
	char	*git_ok[] = { "git", "fetch", "-q", "--no-tags", "https://example.invalid/r", NULL };
	char	*env_ssh[] = { "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.sshCommand",
	    "GIT_CONFIG_VALUE_0=touch /tmp/x", NULL };
	char	*env_pre[] = { "LD_PRELOAD=/tmp/x.so", NULL };
	char	*bw_env[] = { "SPUR_SANDBOX=run_1", "LD_PRELOAD=/tmp/x.so", NULL };
	char	*git = proc_which("git", NULL), *gp = git != NULL ? git : "/usr/bin/git";
	int	 fd;

	spawn_refused(h, BWRAP_PATH, bw_bare, NULL, NULL, 0, "not bwrap --args N",
	    "of bwrap with its options on the command line");
	{
		const struct {
			const char	**opts;
			char		**env;
			const char	 *why, *name;
		} cases[] = {
			{ capadd, NULL, "a bwrap option the engine does not use",
			    "of bwrap with --cap-add" },
			{ nopid, NULL, "without its namespaces", "of bwrap without --unshare-pid" },
			{ short_, NULL, "without its value", "of bwrap with an option cut short" },
			{ good, bw_env, "environment variable",
			    "of bwrap with LD_PRELOAD in its environment" },
		};

		for (size_t i = 0; i < SPUR_ARRLEN(cases); i++) {
			fd = bwrap_args(cases[i].opts);
			spawn_refused(h, BWRAP_PATH, bw, cases[i].env, &fd, 1, cases[i].why,
			    cases[i].name);
			close(fd);
		}
	}
	if (git != NULL) {
		spawn_refused(h, gp, git_c, NULL, NULL, 0, "not a git subcommand", "of git -c");
		spawn_refused(h, gp, git_up, NULL, NULL, 0, "a git option",
		    "of git fetch --upload-pack");
		spawn_refused(h, gp, git_ext, NULL, NULL, 0, "remote helper",
		    "of git fetch from an ext:: remote");
		spawn_refused(h, gp, git_cfg, NULL, NULL, 0, "remote.origin.url",
		    "of git config core.fsmonitor");
		spawn_refused(h, gp, git_sub, NULL, NULL, 0, "not a git subcommand",
		    "of git daemon");
		spawn_refused(h, gp, git_ok, env_ssh, NULL, 0, "could start a program",
		    "of git with core.sshCommand in its environment");
		spawn_refused(h, gp, git_ok, env_pre, NULL, 0, "environment variable",
		    "of git with LD_PRELOAD");
	}
	free(git);
}

/* A JOB's answer: its type, and value, errno or what it handed back. */
static int
job_req(struct priv_helper *h, uint32_t job, uint32_t area, const char *id, const char *sub,
    const char *arg, uint32_t uid, int in, struct priv_msg *ans)
{
	struct priv_msg	req;

	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_JOB;
	req.u.job.dir.area = area;
	req.u.job.dir.session = (char *)id;
	req.u.job.dir.sub = (char *)sub;
	req.u.job.dir.uid = req.u.job.dir.gid = uid;
	req.u.job.job = job;
	req.u.job.arg = (char *)arg;
	if (in != -1) {
		req.hdr.nfds = 1;
		req.fds[0] = in;
	}
	priv_helper_handle(h, &req, ans);
	return ans->hdr.type == PRIV_OK ? ans->u.answer.value : -1;
}

static void
job_refused(struct priv_helper *h, uint32_t job, const char *id, const char *sub,
    const char *arg, uint32_t uid, int in, int want, const char *name)
{
	struct priv_msg	 ans;
	char		*log;

	job_req(h, job, PRIV_AREA_SESSIONS, id, sub, arg, uid, in, &ans);
	log = log_take();
	ok(ans.hdr.type == PRIV_ERR && ans.u.answer.value == want &&
	    strstr(log, "event=priv.refused request=JOB") != NULL,
	    "JOB %s %s: refused and logged", priv_job_name(job), name);
	free(log);
	for (uint32_t i = 0; i < ans.hdr.nfds; i++)
		close(ans.fds[i]);
	priv_msg_clear(&ans);
}

static int
memfd_with(const char *text, size_t len)
{
	int	fd = memfd_create("test-in", MFD_CLOEXEC);

	if (fd == -1 || write(fd, text, len) != (ssize_t)len)
		fatal("memfd");
	return fd;
}

static void
test_jobs(struct priv_helper *h)
{
	struct priv_msg	 ans;
	struct stat	 st;
	char		*p, *outside, *arc = NULL, text[64];
	size_t		 arclen = 0;
	ssize_t		 n;
	int		 isroot = geteuid() == 0, fd, r, error;
	uid_t		 uid = isroot ? UID_IN : geteuid();

	/* Refused before anything is opened. */
	job_refused(h, PRIV_JOB_PACK, "s5", "home", ".claude", 1000, -1, EPERM,
	    "as a uid outside sandbox.uids");
	job_refused(h, PRIV_JOB_PACK, "s5", "home", ".claude", 0, -1, EPERM, "as root");
	job_refused(h, PRIV_JOB_PACK, "..", "home", ".claude", UID_IN, -1, EINVAL,
	    "of a session id ..");
	job_refused(h, PRIV_JOB_GLOB, "s5", "../../etc", "*", UID_IN, -1, EINVAL,
	    "of a path out of sessions/");
	job_refused(h, PRIV_JOB_PACK, "s5", "home", "../../../etc", UID_IN, -1, EINVAL,
	    "of a state dir climbing out");
	job_refused(h, PRIV_JOB_WRITE, "s5", "home", ".codex/../../x", UID_IN, -1, EINVAL,
	    "of a file name climbing out");
	job_refused(h, 99, "s5", "home", "", UID_IN, -1, EINVAL, "of no job");
	fd = memfd_with("x", 1);
	job_refused(h, PRIV_JOB_PACK, "s5", "home", ".claude", UID_IN, fd, EINVAL,
	    "with a descriptor it does not take");
	close(fd);
	job_refused(h, PRIV_JOB_UNPACK, "s5", "home", "", UID_IN, -1, EINVAL,
	    "without its archive");

	if (!isroot) {
		printf("ok %d # SKIP JOBs as a session uid: need root\n", ++tap_n);
		return;
	}
	/* A session's home the sandbox wrote (its uid's), with the agent's state in it. */
	ok(dir_req(h, PRIV_PREPARE_DIR, "s5", "home", uid, uid, 0, &error) == 0,
	    "PREPARE_DIR of the session's home");
	fd = memfd_with("model = \"x\"\n", 12);
	r = job_req(h, PRIV_JOB_WRITE, PRIV_AREA_SESSIONS, "s5", "home", ".claude/settings.json",
	    uid, fd, &ans);
	close(fd);
	priv_msg_clear(&ans);
	p = xprintf("%s/sessions/s5/home/.claude/settings.json", root);
	ok(r == 0 && stat(p, &st) == 0 && st.st_uid == uid && (st.st_mode & 0777) == 0600,
	    "JOB WRITE: a file in HOME, the session uid's, 0600");
	free(p);
	r = job_req(h, PRIV_JOB_PACK, PRIV_AREA_SESSIONS, "s5", "home", ".claude", uid, -1, &ans);
	if (r == 0 && ans.hdr.nfds == 1 && fstat(ans.fds[0], &st) == 0) {
		arclen = (size_t)st.st_size;
		arc = xmalloc(arclen + 1);
		if (pread(ans.fds[0], arc, arclen, 0) != (ssize_t)arclen)
			arclen = 0;
		close(ans.fds[0]);
	}
	priv_msg_clear(&ans);
	ok(arclen > 8 && memcmp(arc, "SPURARC1", 8) == 0 &&
	    memmem(arc, arclen, "settings.json", 13) != NULL,
	    "JOB PACK: the agent's state comes back as an archive");
	ok(dir_req(h, PRIV_PREPARE_DIR, "s6", "home", uid, uid, 0, &error) == 0,
	    "PREPARE_DIR of another session's home");
	fd = memfd_with(arc != NULL ? arc : "", arclen);
	r = job_req(h, PRIV_JOB_UNPACK, PRIV_AREA_SESSIONS, "s6", "home", "", uid, fd, &ans);
	close(fd);
	priv_msg_clear(&ans);
	p = xprintf("%s/sessions/s6/home/.claude/settings.json", root);
	ok(r == 0 && stat(p, &st) == 0 && st.st_uid == uid,
	    "JOB UNPACK: the archive unpacked in the other home, as the session uid");
	free(p);
	free(arc);
	r = job_req(h, PRIV_JOB_GLOB, PRIV_AREA_SESSIONS, "s6", "home", ".claude/*.json", 0, -1,
	    &ans);
	priv_msg_clear(&ans);
	ok(r == 1, "JOB GLOB: a pattern that matches");
	r = job_req(h, PRIV_JOB_GLOB, PRIV_AREA_SESSIONS, "s6", "home", "*.txt", 0, -1, &ans);
	priv_msg_clear(&ans);
	ok(r == 0, "JOB GLOB: one that does not");
	r = job_req(h, PRIV_JOB_DU, PRIV_AREA_SESSIONS, "s6", "home", "", 0, -1, &ans);
	n = -1;
	if (r == 0 && ans.hdr.nfds == 1) {
		n = pread(ans.fds[0], text, sizeof text - 1, 0);
		close(ans.fds[0]);
	}
	priv_msg_clear(&ans);
	ok(n > 0 && strtoull(text, NULL, 10) > 0, "JOB DU: the tree's disk usage");

	/* A link swapped in for the home: refused, never followed. */
	outside = path_join(root, "outside-job");
	mkdir(outside, 0755);
	p = xprintf("%s/sessions/s6/home", root);
	rm_rf(p);
	if (symlink(outside, p) != 0)
		fatal("symlink");
	fd = memfd_with("x", 1);
	job_refused(h, PRIV_JOB_WRITE, "s6", "home", ".codex/config.toml", uid, fd, ENOTDIR,
	    "on a link swapped in for the home");
	close(fd);
	job_refused(h, PRIV_JOB_PACK, "s6", "home", ".claude", uid, -1, ENOTDIR,
	    "on a link swapped in for the home");
	free(p);
	p = path_join(outside, ".codex");
	ok(access(p, F_OK) != 0, "nothing was written through it");
	free(p);
	/* A link inside the home, for the agent's state dir: not followed as the uid either. */
	p = xprintf("%s/sessions/s5/home/.codex", root);
	if (symlink(outside, p) != 0)
		fatal("symlink");
	fd = memfd_with("x", 1);
	r = job_req(h, PRIV_JOB_WRITE, PRIV_AREA_SESSIONS, "s5", "home", ".codex/config.toml",
	    uid, fd, &ans);
	close(fd);
	ok(r == -1 && ans.hdr.type == PRIV_ERR, "JOB WRITE through a link the sandbox left: fails");
	priv_msg_clear(&ans);
	free(p);
	p = path_join(outside, "config.toml");
	ok(access(p, F_OK) != 0, "and nothing lands where it pointed");
	free(p);
	free(outside);
	free(log_take());

	memset(&ans, 0, sizeof ans);
	{
		struct priv_msg	req;
		char		*log;

		memset(&req, 0, sizeof req);
		req.hdr.type = PRIV_KILL_RUN;
		req.u.str = "../run";
		priv_helper_handle(h, &req, &ans);
		log = log_take();
		ok(ans.hdr.type == PRIV_ERR && strstr(log, "request=KILL_RUN") != NULL,
		    "KILL_RUN of no run id: refused and logged");
		free(log);
		priv_msg_clear(&ans);
	}
}

/*
 * priv_client_calls: three requests on the wire at once, the middle one
 * refused; every answer is read (the stream stays in step: the next call
 * works), the refusal's cause comes back, the others' directories are made.
 */
static void
test_calls(struct priv_helper *h)
{
	struct priv_msg	 req[3], ans[3], one, oneans;
	const char	*subs[] = { "a", "../b", "c" };
	char		*cause = NULL, *p;
	struct stat	 st;
	int		 sv[2], status, rc;
	pid_t		 pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		fatal("socketpair");
	if ((pid = fork()) == 0) {
		close(sv[0]);
		struct priv_msg	 in, out;
		char		*why = NULL;

		/* The helper's loop, as priv_helper_loop serves the engine. */
		while (priv_recv(sv[1], &in, &why) > 0) {
			priv_helper_handle(h, &in, &out);
			priv_msg_clear(&in);
			(void)priv_send(sv[1], &out);
			priv_msg_clear(&out);
		}
		_exit(0);
	}
	close(sv[1]);
	priv_client_set(sv[0], root);
	memset(req, 0, sizeof req);
	for (int i = 0; i < 3; i++) {
		req[i].hdr.type = PRIV_PREPARE_DIR;
		req[i].u.dir.area = PRIV_AREA_SESSIONS;
		req[i].u.dir.session = "s9";
		req[i].u.dir.sub = (char *)subs[i];
		req[i].u.dir.uid = req[i].u.dir.gid = UID_IN;
	}
	rc = priv_client_calls(req, 3, ans, &cause);
	ok(rc == -1 && cause != NULL && strstr(cause, "not a path under the session") != NULL,
	    "three requests at once, the second refused: -1, its cause (%s)", cause);
	free(cause);
	cause = NULL;
	p = xprintf("%s/sessions/s9/c", root);
	ok(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "the third was still done");
	free(p);
	memset(&one, 0, sizeof one);
	one = req[0];
	one.u.dir.sub = "d";
	ok(priv_client_call(&one, &oneans, &cause) == 0 && oneans.hdr.type == PRIV_OK,
	    "the next call is answered its own answer: nothing was left on the wire");
	priv_msg_clear(&oneans);
	free(cause);
	close(sv[0]);
	priv_client_set(-1, root);
	waitpid(pid, &status, 0);
	free(log_take());
}

/* OPEN_FILE: only what the config named at start, a link in the automations never followed. */
static void
test_open_file(void)
{
	struct priv_helper	*h;
	struct config		 c2;
	struct priv_msg		 req, ans;
	char			*conf = path_join(root, "spur.yaml"), *autos = path_join(root, "autos");
	char			*a1, *link, *log, *cause = NULL;
	int			 fd;

	if ((fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		fatal("%s", conf);
	close(fd);
	mkdir(autos, 0700);
	a1 = path_join(autos, "a.yaml");
	if ((fd = open(a1, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		fatal("%s", a1);
	close(fd);
	link = path_join(autos, "b.yaml");
	if (symlink("/etc/passwd", link) != 0)
		fatal("symlink");
	memset(&c2, 0, sizeof c2);
	c2.data_dir = root;
	c2.file = conf;
	c2.automations_dir = autos;
	c2.sandbox.uid_first = UID_FIRST;
	c2.sandbox.uid_last = UID_LAST;
	if ((h = priv_helper_create(&c2, geteuid(), getegid(), &cause)) == NULL)
		fatal("priv_helper_create: %s", cause);
	{
		const struct {
			const char	*path, *name;
			int		 ok;
		} cases[] = {
			{ conf, "the config file", 1 },
			{ a1, "a file of the automations directory", 1 },
			{ "/etc/shadow", "a file the config did not name", 0 },
			{ link, "a link in the automations directory", 0 },
			{ "spur.yaml", "a relative path", 0 },
		};

		for (size_t i = 0; i < SPUR_ARRLEN(cases); i++) {
			memset(&req, 0, sizeof req);
			req.hdr.type = PRIV_OPEN_FILE;
			req.u.str = (char *)cases[i].path;
			priv_helper_handle(h, &req, &ans);
			log = log_take();
			if (cases[i].ok)
				ok(ans.hdr.type == PRIV_OK && ans.hdr.nfds == 1,
				    "OPEN_FILE of %s: handed back open", cases[i].name);
			else
				ok(ans.hdr.type == PRIV_ERR && strstr(log,
				    "event=priv.refused request=OPEN_FILE") != NULL,
				    "OPEN_FILE of %s: refused and logged", cases[i].name);
			for (uint32_t k = 0; k < ans.hdr.nfds; k++)
				close(ans.fds[k]);
			priv_msg_clear(&ans);
			free(log);
		}
	}
	priv_helper_free(h);
	free(conf);
	free(autos);
	free(a1);
	free(link);
}

int
main(void)
{
	struct priv_helper	*h;
	char			*cause = NULL;
	int			 fd, saved;

	log_init(LOG_WARN, "test-priv");
	if (mkdtemp(root) == NULL)
		fatal("mkdtemp");
	chmod(root, 0755);
	logpath = path_join(root, "log");
	if ((saved = dup(2)) == -1 ||
	    (fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) == -1 ||
	    dup2(fd, 2) == -1)
		fatal("%s", logpath);
	close(fd);
	cf.data_dir = root;
	cf.sandbox.uid_first = UID_FIRST;
	cf.sandbox.uid_last = UID_LAST;
	if ((h = priv_helper_create(&cf, geteuid(), getegid(), &cause)) == NULL)
		fatal("priv_helper_create: %s", cause);
	test_wire();
	test_dirs(h);
	test_spawn_signal(h);
	test_argv(h);
	test_jobs(h);
	test_open_file();
	test_calls(h);
	priv_helper_free(h);
	dup2(saved, 2);
	close(saved);
	rm_rf(root);
	free(logpath);
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
