/*
 * notify.c: systemd's service notifications (sd_notify(3)) without libsystemd:
 * one datagram a message to $NOTIFY_SOCKET. READY=1 once the engine serves,
 * STOPPING=1 and RELOADING=1 when it does, and, under WatchdogSec=, WATCHDOG=1
 * from the event loop itself at half the interval: a loop that hangs stops
 * beating and systemd restarts the service. Each beat carries STATUS= (what
 * `systemctl status` shows). Without NOTIFY_SOCKET every call does nothing.
 */
#include "spur.h"
#include "notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#define NOTIFY_STATUS_MS	10000	/* STATUS= without a watchdog: this often */
#define NOTIFY_SEND_S		1	/* the longest a message waits for room */

static struct sockaddr_un	 notify_addr;
static socklen_t		 notify_len;
static int			 notify_fd = -1;
static long long		 notify_beat_ms;	/* 0: no watchdog */
static struct event		*notify_ev;
static notify_status_fn		 notify_status;
static void			*notify_arg;

/* $NOTIFY_SOCKET: a path, or "@name" for an abstract socket. */
static int
notify_address(const char *s)
{
	size_t	len = strlen(s);

	if ((s[0] != '/' && s[0] != '@') || len < 2 || len >= sizeof notify_addr.sun_path)
		return -1;
	memset(&notify_addr, 0, sizeof notify_addr);
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, s, len);
	if (s[0] == '@')
		notify_addr.sun_path[0] = '\0';
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
	    (s[0] == '/'));
	return 0;
}

/* WATCHDOG_USEC, when it is meant for this process (WATCHDOG_PID absent or ours). */
static long long
notify_watchdog_ms(void)
{
	const char	*usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char		*end;
	long long	 v;

	if (usec == NULL || (pid != NULL && strtoll(pid, NULL, 10) != (long long)getpid()))
		return 0;
	errno = 0;
	v = strtoll(usec, &end, 10);
	if (errno != 0 || *end != '\0' || v <= 0)
		return 0;
	return v / 1000 / 2 > 0 ? v / 1000 / 2 : 1;
}

int
notify_open(void)
{
	const char	*s = getenv("NOTIFY_SOCKET");
	struct timeval	 tv = { NOTIFY_SEND_S, 0 };

	if (s != NULL && notify_address(s) == 0) {
		/*
		 * Blocking, as sd_notify's: a full queue waits for systemd to read
		 * rather than drop a READY=1; bounded, so that a stuck reader
		 * cannot stop the loop (which is then what the watchdog sees).
		 */
		notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (notify_fd != -1)
			(void)setsockopt(notify_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (notify_fd == -1)
			log_warn("event=notify.failed error=%s", log_q(strerror(errno)));
		else
			notify_beat_ms = notify_watchdog_ms();
	} else if (s != NULL)
		log_warn("event=notify.failed error=\"NOTIFY_SOCKET is no socket address\"");
	/* Meant for this process alone: no child (a git, a sandbox) inherits them. */
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	return notify_fd != -1;
}

void
notify_send(const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;
	int	 n;

	if (notify_fd == -1)
		return;
	va_start(ap, fmt);
	n = xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (sendto(notify_fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&notify_addr,
	    notify_len) == -1)
		log_warn("event=notify.send_failed error=%s", log_q(strerror(errno)));
	free(msg);
}

static void
notify_beat_cb(evutil_socket_t fd, short what, void *arg)
{
	char	*status = notify_status != NULL ? notify_status(notify_arg) : NULL;

	notify_send("%s%s%s", notify_beat_ms > 0 ? "WATCHDOG=1\n" : "",
	    status != NULL ? "STATUS=" : "", status != NULL ? status : "");
	free(status);
}

void
notify_ready(struct event_base *base, notify_status_fn status, void *arg)
{
	long long	 ms = notify_beat_ms > 0 ? notify_beat_ms : NOTIFY_STATUS_MS;
	struct timeval	 tv = { ms / 1000, (ms % 1000) * 1000 };

	if (notify_fd == -1)
		return;
	notify_status = status;
	notify_arg = arg;
	notify_send("READY=1");
	notify_beat_cb(-1, 0, NULL);
	notify_ev = event_new(base, -1, EV_PERSIST, notify_beat_cb, NULL);
	evtimer_add(notify_ev, &tv);
	log_info("event=notify.ready watchdog_ms=%lld", notify_beat_ms * 2);
}

void
notify_close(void)
{
	if (notify_ev != NULL)
		event_free(notify_ev);
	notify_ev = NULL;
	if (notify_fd != -1)
		close(notify_fd);
	notify_fd = -1;
}
