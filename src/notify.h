/* notify.h: systemd's service notifications (READY, STOPPING, RELOADING, the watchdog). */
#ifndef SPUR_NOTIFY_H
#define SPUR_NOTIFY_H

struct event_base;

/* What STATUS= says now (allocated), or NULL. */
typedef char	*(*notify_status_fn)(void *);

/* Reads and unsets $NOTIFY_SOCKET and the watchdog's variables; 1 when notifying. */
int	notify_open(void);
/* One message ("STOPPING=1"); nothing without a socket. */
void	notify_send(const char *, ...) __attribute__((format(printf, 1, 2)));
/* READY=1, then WATCHDOG=1 and STATUS= from the loop for as long as it turns. */
void	notify_ready(struct event_base *, notify_status_fn, void *);
void	notify_close(void);

#endif
