/* spur-forward.c: run inside a sandbox around the agent: loopback TCP ports relayed to the engine's unix sockets. */

/*
 * A program of its own, not a spur command: it runs in every networked
 * sandbox under the run's memory limit (RLIMIT_DATA), so it is plain C on
 * libc, never built with the sanitizers, and linked statically so that it
 * runs in a root filesystem (spur env build) without the host's loader.
 *
 *   spur-forward [--proxy|--gateway|--listen 127.0.0.1:PORT=SOCKET]... -- COMMAND [ARG]...
 *
 * It listens on each port before the agent starts, relays every connection to
 * its unix socket both ways (an end of input becomes a half-close on the
 * other side), starts COMMAND, passes SIGTERM, SIGINT and SIGHUP on to it, and
 * exits as it exits. One poll() loop; every buffer is fixed; at most
 * FWD_CONNS_MAX connections (fewer if RLIMIT_NOFILE says so), more wait in the
 * listen queue.
 */

#define _GNU_SOURCE	/* accept4 */

#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FWD_PORTS_MAX	4
#define FWD_CONNS_MAX	1024
#define FWD_BUF		16384		/* per direction of a connection */
#define FWD_RETRY_MS	20		/* an engine socket whose queue is full is tried again */
#define FWD_EXIT_USAGE	2

struct fwd_port {
	struct sockaddr_in	 addr;
	const char		*path;
	int			 fd;
};

/* One direction of a connection: read from, written to, what is in between. */
struct fwd_half {
	int		 from, to;
	size_t		 off, len;
	int		 eof;		/* from said end of input */
	int		 shut;		/* ... and to was told (SHUT_WR) */
	char		 buf[FWD_BUF];
};

struct fwd_conn {
	int		 tcp;		/* the agent's */
	int		 unix_fd;	/* the engine's; -1 while its queue is full */
	const char	*path;
	struct fwd_half	 up;		/* tcp to unix_fd */
	struct fwd_half	 down;		/* unix_fd to tcp */
};

static struct fwd_port	 fwd_ports[FWD_PORTS_MAX];
static size_t		 fwd_nports;
static struct fwd_conn	**fwd_conns;
static size_t		 fwd_max, fwd_nconns;

static void
fwd_warn(const char *what, const char *detail)
{
	fprintf(stderr, "spur-forward: %s: %s\n", what, detail);
}

/* "127.0.0.1:PORT=/PATH" */
static int
fwd_parse(const char *arg, struct fwd_port *fp)
{
	const char	*eq = strchr(arg, '='), *colon;
	char		 ip[INET_ADDRSTRLEN], *ep;
	long		 port;

	if (eq == NULL || (colon = memchr(arg, ':', eq - arg)) == NULL || eq[1] != '/' ||
	    strlen(eq + 1) >= sizeof ((struct sockaddr_un *)0)->sun_path ||
	    (size_t)(colon - arg) >= sizeof ip)
		return -1;
	port = strtol(colon + 1, &ep, 10);
	if (ep != eq || port <= 0 || port > 65535)
		return -1;
	memcpy(ip, arg, colon - arg);
	ip[colon - arg] = '\0';
	memset(&fp->addr, 0, sizeof fp->addr);
	fp->addr.sin_family = AF_INET;
	fp->addr.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, ip, &fp->addr.sin_addr) != 1)
		return -1;
	fp->path = eq + 1;
	return 0;
}

static int
fwd_listen(struct fwd_port *fp)
{
	int	on = 1;

	fp->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fp->fd == -1 ||
	    setsockopt(fp->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    bind(fp->fd, (struct sockaddr *)&fp->addr, sizeof fp->addr) != 0 ||
	    listen(fp->fd, 64) != 0)
		return -1;
	return 0;
}

/* Connects c to its engine socket: 0 done, 1 its queue is full (try again), -1 failed. */
static int
fwd_connect(struct fwd_conn *c)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, c->path, strlen(c->path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	/* A unix socket connects at once, or says EAGAIN: no connect is left in progress. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		close(fd);
		if (errno == EAGAIN)
			return 1;
		fwd_warn(c->path, strerror(errno));
		return -1;
	}
	c->unix_fd = c->up.to = c->down.from = fd;
	return 0;
}

static void
fwd_close(size_t i)
{
	struct fwd_conn	*c = fwd_conns[i];

	close(c->tcp);
	if (c->unix_fd != -1)
		close(c->unix_fd);
	free(c);
	fwd_conns[i] = fwd_conns[--fwd_nconns];
}

static void
fwd_accept(struct fwd_port *fp)
{
	struct fwd_conn	*c;
	int		 fd, rc;

	while (fwd_nconns < fwd_max) {
		if ((fd = accept4(fp->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				fwd_warn("accept", strerror(errno));
			return;
		}
		if ((c = calloc(1, sizeof *c)) == NULL) {
			close(fd);
			return;
		}
		c->tcp = c->up.from = c->down.to = fd;
		c->unix_fd = c->up.to = c->down.from = -1;
		c->path = fp->path;
		fwd_conns[fwd_nconns++] = c;
		if ((rc = fwd_connect(c)) == -1) {
			fwd_close(fwd_nconns - 1);
			continue;
		}
		if (rc == 1)
			return;		/* the engine is behind: take no more for now */
	}
}

/* Moves what it can one way: -1 when the connection is broken. */
static int
fwd_pump(struct fwd_half *h)
{
	ssize_t	n;

	for (;;) {
		if (h->len == 0 && !h->eof) {
			n = recv(h->from, h->buf, sizeof h->buf, 0);
			if (n == 0)
				h->eof = 1;
			else if (n > 0) {
				h->off = 0;
				h->len = (size_t)n;
			} else if (errno == EAGAIN || errno == EINTR)
				return 0;
			else
				return -1;
		}
		if (h->len > 0) {
			n = send(h->to, h->buf + h->off, h->len, MSG_NOSIGNAL);
			if (n < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -1;
			h->off += (size_t)n;
			h->len -= (size_t)n;
			if (h->len > 0)
				return 0;
		}
		if (h->eof) {
			if (!h->shut && shutdown(h->to, SHUT_WR) != 0 && errno != ENOTCONN)
				return -1;
			h->shut = 1;
			return 0;
		}
	}
}

/* What h wants of poll() on fd. */
static short
fwd_events(const struct fwd_half *h, int fd)
{
	short	ev = 0;

	if (fd == h->from && h->len == 0 && !h->eof)
		ev |= POLLIN;
	if (fd == h->to && h->len > 0)
		ev |= POLLOUT;
	return ev;
}

static void
fwd_child_exited(int status)
{
	sigset_t	set;

	/* The agent's status is ours: its signal too, unblocked (ours are, for the signalfd). */
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, WTERMSIG(status));
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(WTERMSIG(status));
		_exit(128 + WTERMSIG(status));
	}
	_exit(WEXITSTATUS(status));
}

static void
fwd_usage(void)
{
	fprintf(stderr, "usage: spur-forward [--proxy|--gateway|--listen 127.0.0.1:PORT=SOCKET]... "
	    "-- COMMAND [ARG]...\n");
	exit(FWD_EXIT_USAGE);
}

int
main(int argc, char **argv)
{
	static const int	 sigs[] = { SIGCHLD, SIGTERM, SIGINT, SIGHUP };
	struct signalfd_siginfo	 si;
	struct rlimit		 rl;
	struct pollfd		*pfd;
	sigset_t		 set, old;
	size_t			 i, n, waiting;
	pid_t			 child;
	int			 a, fd, sfd, status;

	for (a = 1; a < argc && strcmp(argv[a], "--") != 0; a += 2) {
		if ((strcmp(argv[a], "--proxy") != 0 && strcmp(argv[a], "--gateway") != 0 &&
		    strcmp(argv[a], "--listen") != 0) || a + 1 >= argc)
			fwd_usage();
		if (fwd_nports == FWD_PORTS_MAX || fwd_parse(argv[a + 1], &fwd_ports[fwd_nports]) != 0) {
			fprintf(stderr, "spur-forward: bad %s %s\n", argv[a], argv[a + 1]);
			exit(FWD_EXIT_USAGE);
		}
		fwd_nports++;
	}
	if (a + 1 >= argc)
		fwd_usage();
	a++;

	/* Two descriptors a connection, and a few for ourselves. */
	fwd_max = FWD_CONNS_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 16 + 2 * FWD_CONNS_MAX)
		fwd_max = rl.rlim_cur > 32 ? (rl.rlim_cur - 16) / 2 : 8;
	fwd_conns = calloc(fwd_max, sizeof *fwd_conns);
	pfd = calloc(1 + FWD_PORTS_MAX + 2 * fwd_max, sizeof *pfd);
	if (fwd_conns == NULL || pfd == NULL) {
		fwd_warn("calloc", strerror(errno));
		return 1;
	}
	/* Listening before the agent starts: its first request finds the port open. */
	for (i = 0; i < fwd_nports; i++) {
		if (fwd_listen(&fwd_ports[i]) != 0) {
			fprintf(stderr, "spur-forward: listen port %d: %s\n",
			    ntohs(fwd_ports[i].addr.sin_port), strerror(errno));
			return 1;
		}
	}
	/* Signals are read from a descriptor; the agent gets the mask we were given. */
	sigemptyset(&set);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &set, &old) != 0 ||
	    (sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) == -1) {
		fwd_warn("signalfd", strerror(errno));
		return 1;
	}
	switch (child = fork()) {
	case -1:
		fwd_warn("fork", strerror(errno));
		return 1;
	case 0:
		/* Everything of ours is close-on-exec; stdin, stdout and stderr are the agent's. */
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[a], argv + a);
		fwd_warn(argv[a], strerror(errno));
		_exit(127);
	}
	/* The prompt on stdin is the agent's; our stdout would corrupt its output. */
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}

	for (;;) {
		n = 0;
		pfd[n].fd = sfd;
		pfd[n++].events = POLLIN;
		waiting = 0;
		for (i = 0; i < fwd_nconns; i++)
			waiting += fwd_conns[i]->unix_fd == -1;
		/* While the engine is behind or we are full, new connections wait in the queue. */
		for (i = 0; i < fwd_nports; i++) {
			pfd[n].fd = waiting == 0 && fwd_nconns < fwd_max ? fwd_ports[i].fd : -1;
			pfd[n++].events = POLLIN;
		}
		/* A descriptor nobody waits on is left out: its POLLHUP would wake us for nothing. */
		for (i = 0; i < fwd_nconns; i++) {
			struct fwd_conn	*c = fwd_conns[i];

			pfd[n].events = fwd_events(&c->up, c->tcp) | fwd_events(&c->down, c->tcp);
			pfd[n].fd = c->unix_fd != -1 && pfd[n].events != 0 ? c->tcp : -1;
			n++;
			pfd[n].events = fwd_events(&c->up, c->unix_fd) |
			    fwd_events(&c->down, c->unix_fd);
			pfd[n].fd = c->unix_fd != -1 && pfd[n].events != 0 ? c->unix_fd : -1;
			n++;
		}
		if (poll(pfd, n, waiting > 0 ? FWD_RETRY_MS : -1) == -1 && errno != EINTR) {
			fwd_warn("poll", strerror(errno));
			return 1;
		}
		while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
			if (si.ssi_signo != SIGCHLD) {
				kill(child, (int)si.ssi_signo);
				continue;
			}
			while (waitpid(child, &status, WNOHANG) == child) {
				if (WIFEXITED(status) || WIFSIGNALED(status))
					fwd_child_exited(status);
			}
		}
		/*
		 * Backwards: closing one moves the last into its place, so the ones
		 * below i are still where their pfd entries say.
		 */
		for (i = fwd_nconns; i-- > 0; ) {
			struct fwd_conn	*c = fwd_conns[i];
			struct pollfd	*p = &pfd[1 + fwd_nports + 2 * i];
			int		 rc;

			if (c->unix_fd == -1) {
				if ((rc = fwd_connect(c)) == -1)
					fwd_close(i);
				if (rc != 0)
					continue;
			} else if (p[0].revents == 0 && p[1].revents == 0)
				continue;
			if (fwd_pump(&c->up) != 0 || fwd_pump(&c->down) != 0 ||
			    (c->up.shut && c->down.shut))
				fwd_close(i);
		}
		for (i = 0; i < fwd_nports; i++) {
			if (pfd[1 + i].fd != -1 && (pfd[1 + i].revents & POLLIN))
				fwd_accept(&fwd_ports[i]);
		}
	}
}
