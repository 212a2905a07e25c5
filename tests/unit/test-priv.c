/* test-priv: the root helper's wire form, and each request refused outside its bounds (logged). */
#include "spur.h"
#include "conf.h"
#include "priv.h"
#include "proc.h"
#include "tap.h"

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
		req.u.dir.area = 2;
		priv_helper_handle(h, &req, &ans);
		log = log_take();
		ok(ans.hdr.type == PRIV_ERR && strstr(log, "event=priv.refused") != NULL,
		    "an area but sessions/ and runs/: refused and logged");
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
	char		*argv[] = { "git", "--version", NULL }, *log, buf[256], *git;
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
	ok(n > 0 && strncmp(buf, "git version", 11) == 0,
	    "SPAWN of git as a session uid: its stdout comes back on the pipe handed over");
	priv_msg_clear(&ans);
	free(git);
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
	priv_helper_free(h);
	dup2(saved, 2);
	close(saved);
	rm_rf(root);
	free(logpath);
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
