/* thread-cmd.h: /cancel and /retry written in a run's thread, by the people who may start it. */
#ifndef SPUR_THREAD_CMD_H
#define SPUR_THREAD_CMD_H

struct engine;
struct spur_event;

enum thread_cmd { THREAD_CMD_NONE, THREAD_CMD_CANCEL, THREAD_CMD_RETRY };

/*
 * The command ev holds, read before any automation is matched (any thread):
 * a reply whose text opens with /cancel or /retry (its source says which
 * events are replies and what addresses spur). A command starts no run and
 * never reaches an agent. Nothing for spur's own posts.
 */
enum thread_cmd	 thread_cmd_parse(const struct spur_event *);
/*
 * Loop, once the command's event is stored (a delivery repeated is not new:
 * a command acts once): acts on the latest run of the thread, if ev's
 * author may start that run's automation, and answers in the thread (or, for
 * a slash command, in ev->reply, which its system shows the person alone).
 */
void		 thread_cmd_apply(struct engine *, struct spur_event *, enum thread_cmd);

#endif
