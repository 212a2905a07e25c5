/* proc.c: child processes supervised from the event loop (spawn, pipes, limits, deadline, reap). */
#include "spur.h"
#include "priv.h"
#include "proc.h"
#include "sandbox.h"

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#define PROC_READ_CHUNK	16384
/* proc_input's bytes waiting for the child to read them, at most. */
#define PROC_INPUT_MAX	(4 * 1024 * 1024)

/*
 * A child and what is left of it. It ends (the exit callback runs) only when it
 * was reaped and both output pipes reached end of file: the last output is
 * never lost, and no zombie is left behind.
 */
struct proc {
	pid_t			 pid;
	struct event_base	*base;
	struct event		*ev_out;
	struct event		*ev_err;
	struct event		*ev_in;
	struct event		*ev_deadline;	/* timeout, then grace */
	struct event		*ev_done;	/* runs the exit callback outside other callbacks */
	int			 fd_out;
	int			 fd_err;
	int			 fd_in;
	const char		*in_data;	/* the caller's, valid until the end */
	size_t			 in_len;
	size_t			 in_off;
	int			 in_keep;	/* stdin stays open for proc_input */
	struct buf		 in_more;	/* proc_input's, not yet written */
	unsigned long long	 output;
	unsigned long long	 output_max;
	long long		 grace_ms;
	int			 reaped;
	int			 wstatus;
	int			 terming;	/* SIGTERM sent, SIGKILL armed */
	int			 killed;
	int			 draining;	/* reaped, pipes still open */
	int			 freed;		/* only waiting to be reaped */
	int			 remote;	/* the root helper's child: it reaps, it signals */
	struct proc_exit	 exit;
	void			(*term)(struct proc *, void *);
	proc_output_cb		 output_cb;
	proc_exit_cb		 exit_cb;
	void			*arg;
	LIST_ENTRY(proc)	 entry;
};

/* Every child not yet reaped, and the one SIGCHLD event that reaps them. */
static LIST_HEAD(, proc) proc_all = LIST_HEAD_INITIALIZER(proc_all);
static struct event	*proc_sigchld;
/* The root helper's children of ours: their EXIT notices reap them. */
static LIST_HEAD(, proc) proc_helped = LIST_HEAD_INITIALIZER(proc_helped);

static void	proc_sigchld_cb(evutil_socket_t, short, void *);
static void	proc_check_done(struct proc *);

/* What the child reports through the exec pipe when a step failed. */
struct proc_failure {
	int	 stage;
	int	 error;
};

static const char *proc_stages[] = {
	"dup2", "chdir", "setrlimit", "setgroups", "setgid", "setuid", "prctl", "execve",
	"stage"
};

int
proc_stage(char *const *src, char *const *dst, const int *file, size_t n)
{
	size_t	 i;
	int	 fd;

	if (unshare(CLONE_NEWNS) != 0)
		return -1;
	if (mount(NULL, "/", NULL, MS_REC|MS_SLAVE, NULL) != 0)
		return -1;
	if (mount("spur", SANDBOX_STAGE, "tmpfs", MS_NOSUID|MS_NODEV,
	    "mode=0755,size=64k") != 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (file[i]) {
			if ((fd = open(dst[i], O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644)) == -1)
				return -1;
			close(fd);
		} else if (mkdir(dst[i], 0755) != 0)
			return -1;
		if (mount(src[i], dst[i], NULL, MS_BIND|MS_REC, NULL) != 0)
			return -1;
	}
	return 0;
}

/* Closes every descriptor from low up: close_range when the kernel has it. */
static void
proc_close_from(int low)
{
	struct rlimit	rl;
	int		fd, max = 65536;

#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned int)low, ~0U, 0) == 0)
		return;
#endif
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (1U << 20))
		max = (int)rl.rlim_cur;
	for (fd = low; fd < max; fd++)
		close(fd);
}

/* The child side: only async-signal-safe calls from here to execve. */
static void __attribute__((noreturn))
proc_child(const struct proc_spec *spec, int in, int out, int err, int report,
    pid_t parent)
{
	struct proc_failure	 f;
	struct rlimit		 rl;
	sigset_t		 set;
	int			 src[3 + PROC_KEEP_MAX + 1], n, i, sig;

	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	for (sig = 1; sig < NSIG; sig++) {
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	}
	setsid();
	f.stage = 1;
	if (spec->cwd_fd_set && fchdir(spec->cwd_fd) != 0)
		goto fail;

	/* Park everything high first so that no dup2 overwrites a source. */
	src[0] = in;
	src[1] = out;
	src[2] = err;
	for (i = 0; i < (int)spec->nkeep; i++)
		src[3 + i] = spec->keep[i];
	n = 3 + (int)spec->nkeep;
	src[n++] = report;
	f.stage = 0;
	for (i = 0; i < n; i++) {
		/*
		 * At n or above, so that no dup2 below overwrites a source; not at a
		 * fixed high number, which RLIMIT_NOFILE may not reach (a limit of
		 * 128 made every child, every sandbox among them, fail with EINVAL).
		 */
		if ((src[i] = fcntl(src[i], F_DUPFD, n)) == -1)
			goto fail;
	}
	for (i = 0; i < n; i++) {
		if (dup2(src[i], i) == -1)
			goto fail;
	}
	report = n - 1;
	fcntl(report, F_SETFD, FD_CLOEXEC);
	proc_close_from(n);

	f.stage = 1;
	if (spec->cwd != NULL && chdir(spec->cwd) != 0)
		goto fail;

	f.stage = 2;
	if (spec->rlimit_data != 0) {
		rl.rlim_cur = rl.rlim_max = spec->rlimit_data;
		if (setrlimit(RLIMIT_DATA, &rl) != 0)
			goto fail;
	}
	if (spec->rlimit_nproc != 0) {
		rl.rlim_cur = rl.rlim_max = spec->rlimit_nproc;
		if (setrlimit(RLIMIT_NPROC, &rl) != 0)
			goto fail;
	}

	f.stage = 8;
	if (spec->nstage > 0 && proc_stage(spec->stage_src, spec->stage_dst,
	    spec->stage_file, spec->nstage) != 0)
		goto fail;

	if (spec->drop) {
		f.stage = 3;
		if (setgroups(1, &spec->gid) != 0)
			goto fail;
		f.stage = 4;
		if (setgid(spec->gid) != 0)
			goto fail;
		f.stage = 5;
		if (setuid(spec->uid) != 0)
			goto fail;
	}

	/* No child outlives the engine, even when it dies by SIGKILL. */
	f.stage = 6;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		goto fail;
	if (getppid() != parent)
		_exit(127);

	f.stage = 7;
	execve(spec->path, spec->argv, spec->env != NULL ? spec->env :
	    (char *const[]){ NULL });
fail:
	f.error = errno;
	if (write(report, &f, sizeof f) != (ssize_t)sizeof f)
		_exit(126);
	_exit(127);
}

/*
 * Forks and execs; fds gets the parent ends (stdin writer, stdout and stderr
 * readers). Waits for the exec to happen, so that a failure is a cause here.
 */
pid_t
proc_spawn(const struct proc_spec *spec, int fds[3], char **cause)
{
	struct proc_failure	 f;
	int			 in[2] = { -1, -1 }, out[2] = { -1, -1 };
	int			 err[2] = { -1, -1 }, rep[2] = { -1, -1 };
	ssize_t			 n;
	pid_t			 pid = -1, parent = getpid();

	if (spec->path == NULL || spec->argv == NULL || spec->argv[0] == NULL) {
		*cause = xstrdup("no command to run");
		return -1;
	}
	if (spec->nkeep > PROC_KEEP_MAX) {
		*cause = xprintf("too many descriptors to pass (%zu)", spec->nkeep);
		return -1;
	}
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
	    pipe2(err, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
		*cause = xprintf("pipe: %s", strerror(errno));
		goto fail;
	}
	/* proc_child makes only async-signal-safe calls: it may share our memory. */
	if ((pid = spec->vfork ? vfork() : fork()) == -1) {
		*cause = xprintf("fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		proc_child(spec, in[0], out[1], err[1], rep[1], parent);

	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(rep[1]);
	in[0] = out[1] = err[1] = rep[1] = -1;
	do
		n = read(rep[0], &f, sizeof f);
	while (n == -1 && errno == EINTR);
	close(rep[0]);
	rep[0] = -1;
	if (n == (ssize_t)sizeof f) {
		/* It has exited or is about to: reap it here, it is ours alone. */
		while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
			;
		pid = -1;
		*cause = xprintf("%s %s: %s", proc_stages[f.stage], spec->path,
		    strerror(f.error));
		goto fail;
	}
	fds[0] = in[1];
	fds[1] = out[0];
	fds[2] = err[0];
	return pid;

fail:
	for (n = 0; n < 2; n++) {
		if (in[n] != -1)
			close(in[n]);
		if (out[n] != -1)
			close(out[n]);
		if (err[n] != -1)
			close(err[n]);
		if (rep[n] != -1)
			close(rep[n]);
	}
	return -1;
}

/* A NULL-terminated copy of n strings (the stage lists are counted arrays). */
static char **
proc_strv_n(char *const *v, size_t n)
{
	char	**out = xcalloc(n + 1, sizeof *out);
	size_t	  i;

	for (i = 0; i < n; i++)
		out[i] = v[i];
	return out;
}

/*
 * The same child started by the root helper (a session uid while the engine is
 * not root): the spec goes as a SPAWN, the pipes come back. The helper reaps
 * it and says so (proc_helped_exit_cb).
 */
static pid_t
proc_spawn_helped(const struct proc_spec *spec, int fds[3], char **cause)
{
	struct priv_msg		 req, ans;
	struct priv_spawn	*ps = &req.u.spawn;
	char			**src, **dst;
	size_t			 i;
	int			 r;

	if (spec->nkeep > PROC_KEEP_MAX || spec->nstage > PRIV_STAGE_MAX) {
		*cause = xprintf("too many descriptors or binds to pass");
		return -1;
	}
	memset(&req, 0, sizeof req);
	req.hdr.type = PRIV_SPAWN;
	ps->uid = spec->uid;
	ps->gid = spec->gid;
	ps->rlimit_data = spec->rlimit_data;
	ps->rlimit_nproc = spec->rlimit_nproc;
	ps->path = (char *)spec->path;
	ps->cwd = (char *)(spec->cwd != NULL ? spec->cwd : "");
	ps->argv = (char **)spec->argv;
	ps->env = (char **)spec->env;
	ps->stage_src = src = proc_strv_n(spec->stage_src, spec->nstage);
	ps->stage_dst = dst = proc_strv_n(spec->stage_dst, spec->nstage);
	for (i = 0; i < spec->nstage; i++) {
		if (spec->stage_file[i])
			ps->stage_file |= 1ULL << i;
	}
	if (spec->cwd_fd_set) {
		ps->cwd_fd = 1;
		req.fds[req.hdr.nfds++] = spec->cwd_fd;
	}
	for (i = 0; i < spec->nkeep; i++)
		req.fds[req.hdr.nfds++] = spec->keep[i];
	r = priv_client_call(&req, &ans, cause);
	free(src);
	free(dst);
	if (r != 0)
		return -1;
	if (ans.hdr.nfds != 3 || ans.u.answer.value <= 0) {
		for (i = 0; i < ans.hdr.nfds; i++)
			close(ans.fds[i]);
		*cause = xstrdup("the helper's answer has no child");
		return -1;
	}
	fds[0] = ans.fds[0];
	fds[1] = ans.fds[1];
	fds[2] = ans.fds[2];
	return (pid_t)ans.u.answer.value;
}

/* The SIGCHLD event exists only while some child is unreaped (it keeps the loop alive). */
static void
proc_sigchld_update(struct event_base *base)
{
	if (!LIST_EMPTY(&proc_all) && proc_sigchld == NULL) {
		proc_sigchld = evsignal_new(base, SIGCHLD, proc_sigchld_cb, NULL);
		if (proc_sigchld == NULL || evsignal_add(proc_sigchld, NULL) != 0)
			fatal("cannot watch SIGCHLD");
	} else if (LIST_EMPTY(&proc_all) && proc_sigchld != NULL) {
		event_free(proc_sigchld);
		proc_sigchld = NULL;
	}
}

static void
proc_close_fd(struct event **ev, int *fd)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
	if (*fd != -1) {
		close(*fd);
		*fd = -1;
	}
}

static void
proc_destroy(struct proc *p)
{
	proc_close_fd(&p->ev_out, &p->fd_out);
	proc_close_fd(&p->ev_err, &p->fd_err);
	proc_close_fd(&p->ev_in, &p->fd_in);
	buf_free(&p->in_more);
	if (p->ev_deadline != NULL)
		event_free(p->ev_deadline);
	if (p->ev_done != NULL)
		event_free(p->ev_done);
	free(p);
}

/* Reaps every child of ours that ended; never touches other modules' children. */
static void
proc_sigchld_cb(evutil_socket_t sig, short events, void *arg)
{
	struct proc	*p, *next;
	struct event_base *base = NULL;
	int		 status, progress;
	pid_t		 r;

	do {
		progress = 0;
		for (p = LIST_FIRST(&proc_all); p != NULL; p = next) {
			next = LIST_NEXT(p, entry);
			r = waitpid(p->pid, &status, WNOHANG);
			if (r == 0 || (r == -1 && errno == EINTR))
				continue;
			progress = 1;
			LIST_REMOVE(p, entry);
			base = p->base;
			p->reaped = 1;
			p->wstatus = r == p->pid ? status : 0;
			/* Whatever is left of its group is an orphan of this child. */
			kill(-p->pid, SIGKILL);
			log_debug("event=proc.reaped pid=%ld status=%d", (long)p->pid, status);
			if (p->freed)
				proc_destroy(p);
			else
				proc_check_done(p);
		}
	} while (progress && !LIST_EMPTY(&proc_all));
	if (base != NULL)
		proc_sigchld_update(base);
}

/* The helper reaped one of its children: ours, if we started it through it. */
static void
proc_helped_exit_cb(pid_t pid, int status)
{
	struct proc	*p;

	LIST_FOREACH(p, &proc_helped, entry) {
		if (p->pid == pid)
			break;
	}
	if (p == NULL)
		return;
	LIST_REMOVE(p, entry);
	p->reaped = 1;
	p->wstatus = status;
	log_debug("event=proc.reaped pid=%ld status=%d via=helper", (long)pid, status);
	if (p->freed)
		proc_destroy(p);
	else
		proc_check_done(p);
}

int
proc_via_helper(const struct proc *p)
{
	return p->remote;
}

static void
proc_done_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc	*p = arg;

	if (WIFEXITED(p->wstatus)) {
		p->exit.status = WEXITSTATUS(p->wstatus);
		p->exit.signal = 0;
	} else if (WIFSIGNALED(p->wstatus)) {
		p->exit.status = -1;
		p->exit.signal = WTERMSIG(p->wstatus);
	}
	if (p->ev_deadline != NULL)
		event_del(p->ev_deadline);
	p->exit_cb(p, &p->exit, p->arg);
}

static void
proc_deadline_cb(evutil_socket_t fd, short events, void *arg);

/* Ends when reaped and both pipes closed; if a pipe is held open by an escaped grandchild, the grace bounds the wait. */
static void
proc_check_done(struct proc *p)
{
	struct timeval	tv;

	if (!p->reaped)
		return;
	if (p->fd_out == -1 && p->fd_err == -1) {
		proc_close_fd(&p->ev_in, &p->fd_in);
		event_active(p->ev_done, EV_TIMEOUT, 0);
		return;
	}
	if (p->ev_deadline != NULL && !p->draining) {
		/* Reaped but the pipes stay open: give the rest a grace, then cut. */
		p->draining = 1;
		tv.tv_sec = p->grace_ms / 1000;
		tv.tv_usec = (p->grace_ms % 1000) * 1000;
		evtimer_add(p->ev_deadline, &tv);
	}
}

void
proc_kill(struct proc *p, int sig)
{
	if (p->reaped)
		return;
	if (p->remote)
		priv_signal(p->pid, sig, 0);
	else if (kill(-p->pid, sig) != 0)
		kill(p->pid, sig);
}

static void
proc_escalate(struct proc *p)
{
	struct timeval	tv;

	if (p->terming)
		return;
	p->terming = 1;
	if (p->term != NULL)
		p->term(p, p->arg);
	else
		proc_kill(p, SIGTERM);
	tv.tv_sec = p->grace_ms / 1000;
	tv.tv_usec = (p->grace_ms % 1000) * 1000;
	evtimer_add(p->ev_deadline, &tv);
}

static void
proc_deadline_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc	*p = arg;

	if (p->reaped) {
		/* Grace after the reap is over: stop waiting for the pipes. */
		log_warn("event=proc.pipes_open_after_exit pid=%ld", (long)p->pid);
		proc_close_fd(&p->ev_out, &p->fd_out);
		proc_close_fd(&p->ev_err, &p->fd_err);
		proc_check_done(p);
		return;
	}
	if (!p->terming) {
		p->exit.timed_out = 1;
		log_info("event=proc.deadline pid=%ld", (long)p->pid);
		proc_escalate(p);
		return;
	}
	log_info("event=proc.kill reason=grace_over pid=%ld", (long)p->pid);
	p->killed = 1;
	proc_kill(p, SIGKILL);
}

static void
proc_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc	*p = arg;
	char		 buf[PROC_READ_CHUNK];
	ssize_t		 n;
	size_t		 give;
	int		 which = fd == p->fd_out ? 1 : 2;

	n = read(fd, buf, sizeof buf);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (which == 1)
			proc_close_fd(&p->ev_out, &p->fd_out);
		else
			proc_close_fd(&p->ev_err, &p->fd_err);
		proc_check_done(p);
		return;
	}
	give = (size_t)n;
	if (p->output_max != 0 && p->output + give > p->output_max) {
		give = p->output >= p->output_max ? 0 :
		    (size_t)(p->output_max - p->output);
		if (!p->exit.output_exceeded) {
			/* Bounded output: no grace, a flood would only grow. */
			p->exit.output_exceeded = 1;
			log_info("event=proc.output_limit pid=%ld max=%llu", (long)p->pid,
			    p->output_max);
			p->terming = p->killed = 1;
			proc_kill(p, SIGKILL);
		}
	}
	p->output += give;
	if (give != 0 && p->output_cb != NULL)
		p->output_cb(buf, give, which, p->arg);
}

/* Writes what is pending of buf at *off; 1 when it is all written, 0 to wait, -1 on error. */
static int
proc_write_some(int fd, const char *data, size_t len, size_t *off)
{
	ssize_t	 n;

	while (*off < len) {
		n = write(fd, data + *off, len - *off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		*off += (size_t)n;
	}
	return 1;
}

static void
proc_write_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc	*p = arg;
	size_t		 off = 0;
	int		 rc;

	if ((rc = proc_write_some(fd, p->in_data, p->in_len, &p->in_off)) == 0)
		return;
	if (rc == 1 && p->in_more.len > 0) {
		rc = proc_write_some(fd, p->in_more.data, p->in_more.len, &off);
		memmove(p->in_more.data, p->in_more.data + off, p->in_more.len - off);
		p->in_more.len -= off;
		if (rc == 0)
			return;
	}
	if (rc == 1 && p->in_keep) {
		/* All written: nothing to wait for until proc_input. */
		event_del(p->ev_in);
		return;
	}
	/* rc == -1: EPIPE, the child does not read stdin; that is its business. */
	buf_free(&p->in_more);
	proc_close_fd(&p->ev_in, &p->fd_in);
}

int
proc_input(struct proc *p, const char *data, size_t len)
{
	if (!proc_input_open(p))
		return -1;
	if (buf_add(&p->in_more, data, len) != 0)
		return -1;
	event_add(p->ev_in, NULL);
	return 0;
}

void
proc_input_close(struct proc *p)
{
	if (!proc_input_open(p))
		return;
	p->in_keep = 0;
	/* The write callback closes it once what is pending is written. */
	event_add(p->ev_in, NULL);
}

int
proc_input_open(const struct proc *p)
{
	return p->in_keep && p->fd_in != -1 && p->ev_in != NULL && !p->reaped;
}

static void
proc_nonblock(int fd)
{
	int	fl = fcntl(fd, F_GETFL);

	if (fl != -1)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

struct proc *
proc_start(struct event_base *base, const struct proc_spec *spec,
    proc_output_cb output_cb, proc_exit_cb exit_cb, void *arg, char **cause)
{
	struct proc	*p;
	struct timeval	 tv;
	int		 fds[3];
	pid_t		 pid;

	/* A child closing its stdin must not kill the engine. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fatal("signal SIGPIPE");

	/* Watch SIGCHLD before the fork so that no exit goes unnoticed. */
	if (proc_sigchld == NULL) {
		proc_sigchld = evsignal_new(base, SIGCHLD, proc_sigchld_cb, NULL);
		if (proc_sigchld == NULL || evsignal_add(proc_sigchld, NULL) != 0)
			fatal("cannot watch SIGCHLD");
	}
	if (spec->drop && priv_client_active()) {
		priv_client_attach(base, proc_helped_exit_cb);
		if ((pid = proc_spawn_helped(spec, fds, cause)) == -1) {
			proc_sigchld_update(base);
			return NULL;
		}
	} else if ((pid = proc_spawn(spec, fds, cause)) == -1) {
		proc_sigchld_update(base);
		return NULL;
	}

	p = xcalloc(1, sizeof *p);
	p->remote = spec->drop && priv_client_active();
	p->pid = pid;
	p->base = base;
	p->fd_in = fds[0];
	p->fd_out = fds[1];
	p->fd_err = fds[2];
	p->exit.status = -1;
	p->in_data = spec->stdin_data;
	p->in_len = spec->stdin_data != NULL ? spec->stdin_len : 0;
	p->in_keep = spec->stdin_keep;
	buf_init(&p->in_more, PROC_INPUT_MAX);
	p->output_max = spec->output_max;
	p->grace_ms = spec->grace_ms > 0 ? spec->grace_ms : PROC_GRACE_MS;
	p->term = spec->term;
	p->output_cb = output_cb;
	p->exit_cb = exit_cb;
	p->arg = arg;
	if (p->remote)
		LIST_INSERT_HEAD(&proc_helped, p, entry);
	else
		LIST_INSERT_HEAD(&proc_all, p, entry);
	proc_sigchld_update(base);

	proc_nonblock(p->fd_in);
	proc_nonblock(p->fd_out);
	proc_nonblock(p->fd_err);
	p->ev_out = event_new(base, p->fd_out, EV_READ|EV_PERSIST, proc_read_cb, p);
	p->ev_err = event_new(base, p->fd_err, EV_READ|EV_PERSIST, proc_read_cb, p);
	p->ev_in = event_new(base, p->fd_in, EV_WRITE|EV_PERSIST, proc_write_cb, p);
	p->ev_deadline = evtimer_new(base, proc_deadline_cb, p);
	p->ev_done = event_new(base, -1, 0, proc_done_cb, p);
	if (p->ev_out == NULL || p->ev_err == NULL || p->ev_in == NULL ||
	    p->ev_deadline == NULL || p->ev_done == NULL)
		fatal("event_new");
	event_add(p->ev_out, NULL);
	event_add(p->ev_err, NULL);
	event_add(p->ev_in, NULL);
	if (spec->timeout_ms > 0) {
		tv.tv_sec = spec->timeout_ms / 1000;
		tv.tv_usec = (spec->timeout_ms % 1000) * 1000;
		evtimer_add(p->ev_deadline, &tv);
	}
	log_debug("event=proc.started pid=%ld path=%s", (long)pid, log_q(spec->path));
	/* It may have exited already, before the SIGCHLD event saw it as ours. */
	proc_sigchld_cb(SIGCHLD, EV_SIGNAL, NULL);
	return p;
}

void
proc_cancel(struct proc *p)
{
	if (p->reaped || p->exit.cancelled)
		return;
	p->exit.cancelled = 1;
	if (p->terming) {
		p->killed = 1;
		proc_kill(p, SIGKILL);
		return;
	}
	if (p->ev_deadline != NULL)
		evtimer_del(p->ev_deadline);
	proc_escalate(p);
}

void
proc_free(struct proc *p)
{
	struct event_base *base;

	if (p == NULL)
		return;
	if (p->reaped) {
		proc_destroy(p);
		return;
	}
	/* Still running: kill it; the SIGCHLD handler reaps and frees it. */
	base = p->base;
	proc_kill(p, SIGKILL);
	proc_close_fd(&p->ev_out, &p->fd_out);
	proc_close_fd(&p->ev_err, &p->fd_err);
	proc_close_fd(&p->ev_in, &p->fd_in);
	if (p->ev_deadline != NULL) {
		event_free(p->ev_deadline);
		p->ev_deadline = NULL;
	}
	if (p->ev_done != NULL) {
		event_free(p->ev_done);
		p->ev_done = NULL;
	}
	p->freed = 1;
	if (!p->remote)
		proc_sigchld_cb(SIGCHLD, EV_SIGNAL, NULL);
	(void)base;
}

pid_t
proc_pid(const struct proc *p)
{
	return p->pid;
}

int
proc_run(const struct proc_spec *spec, size_t max, char **out, char **cause)
{
	struct buf	 b;
	struct pollfd	 pfd[2];
	char		 chunk[4096];
	int64_t		 deadline;
	ssize_t		 n;
	int		 fds[3], status = -1, i, open_fds = 2, left, helped;
	pid_t		 pid;

	helped = spec->drop && priv_client_active();
	if ((pid = helped ? proc_spawn_helped(spec, fds, cause) :
	    proc_spawn(spec, fds, cause)) == -1)
		return -1;
	close(fds[0]);
	buf_init(&b, max);
	pfd[0].fd = fds[1];
	pfd[1].fd = fds[2];
	pfd[0].events = pfd[1].events = POLLIN;
	deadline = now_ms() + (spec->timeout_ms > 0 ? spec->timeout_ms : 10000);
	while (open_fds > 0) {
		left = (int)(deadline - now_ms());
		if (left <= 0)
			break;
		if (poll(pfd, 2, left) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < 2; i++) {
			if (pfd[i].fd == -1 || pfd[i].revents == 0)
				continue;
			n = read(pfd[i].fd, chunk, sizeof chunk);
			if (n == -1 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			(void)buf_add(&b, chunk, (size_t)n);
		}
	}
	for (i = 0; i < 2; i++) {
		if (pfd[i].fd != -1)
			close(pfd[i].fd);
	}
	if (open_fds > 0 && helped)
		priv_signal(pid, SIGKILL, 0);
	else if (open_fds > 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	if (helped && priv_client_wait(pid, &status) != 0) {
		*cause = xprintf("%s: the helper is gone", spec->path);
		buf_free(&b);
		return -1;
	} else if (!helped) {
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
	}
	if (open_fds > 0) {
		*cause = xprintf("%s did not finish in time", spec->path);
		buf_free(&b);
		return -1;
	}
	if (out != NULL)
		*out = buf_take(&b);
	buf_free(&b);
	return status;
}

char *
proc_which(const char *name, const char *path)
{
	const char	*p, *end;
	char		*dir, *full;

	if (name == NULL || *name == '\0')
		return NULL;
	if (strchr(name, '/') != NULL)
		return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p != '\0'; p = *end == ':' ? end + 1 : end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		if (end == p || *p != '/')
			continue;
		dir = xstrndup(p, (size_t)(end - p));
		full = path_join(dir, name);
		free(dir);
		if (access(full, X_OK) == 0)
			return full;
		free(full);
	}
	return NULL;
}
