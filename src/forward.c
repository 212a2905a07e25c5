/* forward.c: `spur forward`, run inside a sandbox: loopback TCP ports relayed to the engine's unix sockets, around the agent. */
#include "spur.h"
#include "cmd.h"
#include "egress.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#define FORWARD_MAX	4	/* listeners */

struct forward_port {
	struct sockaddr_in	 addr;
	char			*path;
	struct evconnlistener	*lis;
};

static struct event_base	*forward_base;
static pid_t			 forward_child = -1;

static void
forward_done(struct relay *r, void *arg)
{
	relay_free(r);
}

static void
forward_accept_cb(struct evconnlistener *l, int fd, struct sockaddr *sa, int len, void *arg)
{
	struct forward_port	*fp = arg;
	struct sockaddr_un	 sun;
	struct bufferevent	*a, *b;
	int			 s;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", fp->path);
	/* A unix socket connects at once, or not at all. */
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(s, (struct sockaddr *)&sun, sizeof sun) != 0) {
		fprintf(stderr, "spur forward: %s: %s\n", fp->path, strerror(errno));
		if (s != -1)
			close(s);
		close(fd);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_nonblocking(s);
	a = bufferevent_socket_new(forward_base, fd, BEV_OPT_CLOSE_ON_FREE);
	b = bufferevent_socket_new(forward_base, s, BEV_OPT_CLOSE_ON_FREE);
	(void)relay_start(a, b, forward_done, NULL);
}

/* "127.0.0.1:PORT=PATH" */
static int
forward_parse(const char *arg, struct forward_port *fp)
{
	const char	*eq = strchr(arg, '='), *colon;
	char		*ip;
	long		 port;
	char		*ep;

	if (eq == NULL || (colon = memchr(arg, ':', eq - arg)) == NULL || eq[1] != '/' ||
	    strlen(eq + 1) >= sizeof ((struct sockaddr_un *)0)->sun_path)
		return -1;
	port = strtol(colon + 1, &ep, 10);
	if (ep != eq || port <= 0 || port > 65535)
		return -1;
	memset(&fp->addr, 0, sizeof fp->addr);
	fp->addr.sin_family = AF_INET;
	fp->addr.sin_port = htons((uint16_t)port);
	ip = xstrndup(arg, colon - arg);
	if (inet_pton(AF_INET, ip, &fp->addr.sin_addr) != 1) {
		free(ip);
		return -1;
	}
	free(ip);
	fp->path = xstrdup(eq + 1);
	return 0;
}

static void
forward_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	int	status;
	pid_t	pid;

	if (sig != SIGCHLD) {
		if (forward_child > 0)
			kill(forward_child, (int)sig);
		return;
	}
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid != forward_child)
			continue;
		/* The agent's status is ours: exit now, without exit handlers. */
		if (WIFSIGNALED(status)) {
			signal(WTERMSIG(status), SIG_DFL);
			raise(WTERMSIG(status));
			_exit(128 + WTERMSIG(status));
		}
		_exit(WEXITSTATUS(status));
	}
}

int
cmd_forward(const struct cmd *self, int argc, char **argv)
{
	struct forward_port	 ports[FORWARD_MAX];
	struct event		*sig[4];
	static const int	 sigs[4] = { SIGCHLD, SIGTERM, SIGINT, SIGHUP };
	sigset_t		 set, old;
	size_t			 n = 0, i;
	int			 a, fd;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--") == 0) {
			a++;
			break;
		}
		if ((strcmp(argv[a], "--proxy") == 0 || strcmp(argv[a], "--gateway") == 0 ||
		    strcmp(argv[a], "--listen") == 0) && a + 1 < argc && n < FORWARD_MAX) {
			if (forward_parse(argv[a + 1], &ports[n]) != 0) {
				fprintf(stderr, "spur forward: bad %s %s\n", argv[a], argv[a + 1]);
				return EXIT_USAGE;
			}
			n++;
			a++;
			continue;
		}
		cmd_usage(self, 1);
		return EXIT_USAGE;
	}
	if (a >= argc) {
		cmd_usage(self, 1);
		return EXIT_USAGE;
	}
	forward_base = event_base_new();
	/* Listening before the agent starts: its first request finds the port open. */
	for (i = 0; i < n; i++) {
		ports[i].lis = evconnlistener_new_bind(forward_base, forward_accept_cb,
		    &ports[i], LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
		    LEV_OPT_REUSEABLE, 64, (struct sockaddr *)&ports[i].addr,
		    sizeof ports[i].addr);
		if (ports[i].lis == NULL) {
			fprintf(stderr, "spur forward: listen port %d: %s\n",
			    ntohs(ports[i].addr.sin_port), strerror(errno));
			return EXIT_FAILED;
		}
	}
	/* Signals are blocked until the handlers are in place; the agent gets them unblocked. */
	sigemptyset(&set);
	for (i = 0; i < SPUR_ARRLEN(sigs); i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (i = 0; i < SPUR_ARRLEN(sigs); i++) {
		sig[i] = evsignal_new(forward_base, sigs[i], forward_signal_cb, NULL);
		evsignal_add(sig[i], NULL);
	}
	switch (forward_child = fork()) {
	case -1:
		fprintf(stderr, "spur forward: fork: %s\n", strerror(errno));
		return EXIT_FAILED;
	case 0:
		sigprocmask(SIG_SETMASK, &old, NULL);
		for (i = 0; i < SPUR_ARRLEN(sigs); i++)
			signal(sigs[i], SIG_DFL);
		execvp(argv[a], argv + a);
		fprintf(stderr, "spur forward: %s: %s\n", argv[a], strerror(errno));
		_exit(127);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* The prompt on stdin is the agent's; our stdout would corrupt its output. */
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	event_base_dispatch(forward_base);
	return EXIT_FAILED;	/* not reached: SIGCHLD exits */
}
