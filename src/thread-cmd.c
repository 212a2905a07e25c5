/* thread-cmd.c: /cancel and /retry written in a run's thread, by the people who may start it. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "report.h"
#include "run.h"
#include "serve.h"
#include "source.h"
#include "store.h"
#include "thread-cmd.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The source that knows ev's system's messages, or NULL (API, schedules, generic hooks). */
static const struct source *
thread_cmd_source(const struct spur_event *ev)
{
	const struct source	*src;

	if (ev->source == NULL)
		return NULL;
	src = source_find(ev->source);
	return strcmp(src->name, ev->source) == 0 ? src : NULL;
}

enum thread_cmd
thread_cmd_parse(const struct spur_event *ev)
{
	const struct source	*src = thread_cmd_source(ev);
	const char		*t, *word;
	size_t			 n;
	int			 bare;

	if (src == NULL || src->command_text == NULL || ev->type == NULL ||
	    (t = src->command_text(ev, &bare)) == NULL)
		return THREAD_CMD_NONE;
	/* spur's own posts (an answer quoting a command) never command it. */
	if (ev->actor.bot || (ev->text != NULL && strstr(ev->text, EVENT_OWN_MARKER) != NULL))
		return THREAD_CMD_NONE;
	t += strspn(t, " \t\r\n");
	if (*t == '/')
		t++;
	else if (!bare)
		return THREAD_CMD_NONE;
	word = t;
	for (n = 0; isalpha((unsigned char)word[n]); n++)
		;
	if (word[n] != '\0' && !isspace((unsigned char)word[n]))
		return THREAD_CMD_NONE;
	if (n == 6 && strncasecmp(word, "cancel", 6) == 0)
		return THREAD_CMD_CANCEL;
	if (n == 5 && strncasecmp(word, "retry", 5) == 0)
		return THREAD_CMD_RETRY;
	return THREAD_CMD_NONE;
}

/* The latest run the command is about: its thread's, else where its source says. */
static char *
thread_cmd_run(struct engine *e, const struct spur_event *ev)
{
	const struct source	*src = thread_cmd_source(ev);
	struct thread_scope	 scope;
	char			*run = NULL;

	if (ev->thread != NULL && (run = store_thread_last_run(e->store, ev->org, ev->thread,
	    NULL, NULL, NULL)) != NULL)
		return run;
	memset(&scope, 0, sizeof scope);
	if (src != NULL && src->command_scope != NULL)
		src->command_scope(ev, &scope);
	if (scope.prefix != NULL)
		run = store_thread_last_run(e->store, ev->org, NULL, scope.prefix, scope.actor,
		    scope.status_msg);
	free(scope.prefix);
	free(scope.actor);
	free(scope.status_msg);
	return run;
}

/* What the command did, in a sentence for its thread; NULL: nothing to say. */
static char *
thread_cmd_act(struct engine *e, const struct spur_event *ev, enum thread_cmd cmd)
{
	const char		*verb = cmd == THREAD_CMD_CANCEL ? "cancel" : "retry";
	const char		*who = ev->actor.name != NULL ? ev->actor.name : "someone";
	struct automation_set	*set = NULL;
	const struct automation	*a;
	struct automation	*kept = NULL;
	enum run_state		 st;
	struct buf		 why;
	struct run_row		*j = NULL;
	const char		*name;
	char			*run, *answer = NULL, *reason, *link = NULL, *cause = NULL, *new;
	int			 r;

	if ((run = thread_cmd_run(e, ev)) == NULL)
		return xprintf("There is no run in this thread to %s.", verb);
	if ((j = store_run_get(e->store, run, 0)) == NULL) {
		answer = xprintf("Could not read run %s; try again.", run);
		goto out;
	}
	/* The people who may start the run's automation, as it is configured now. */
	st = j->state;
	name = j->automation;
	pthread_mutex_lock(&e->conf_mu);
	set = e->automations != NULL ? automation_set_ref(e->automations) : NULL;
	pthread_mutex_unlock(&e->conf_mu);
	if ((a = automation_find(set, ev->org, name != NULL ? name : "")) == NULL)
		a = kept = automation_from_text(j->automation_json);
	buf_init(&why, 1024);
	if (a == NULL || !automation_allows(a, ev, &why)) {
		log_info("event=thread_cmd.refused cmd=%s run=%s actor=%s why=%s", verb, run,
		    log_q(who), log_q(buf_cstr(&why)));
		answer = xprintf("%s may not %s runs of `%s` (%s).", who, verb,
		    name != NULL ? name : "?", why.len > 0 ? buf_cstr(&why) :
		    "the automation is gone");
		buf_free(&why);
		goto out;
	}
	buf_free(&why);
	link = report_run_ref(e, ev->source, run);
	if (cmd == THREAD_CMD_CANCEL) {
		reason = xprintf("cancelled in the thread by %s", who);
		r = run_request_cancel(e, run, reason);
		free(reason);
		if (r == 1)
			answer = xprintf("Run %s already ended (%s): nothing to cancel.", link,
			    run_state_name(st));
		else if (r == 0)
			answer = xprintf("Cancelling run %s, as %s asked.", link, who);
		else
			answer = xprintf("Could not cancel run %s; try again.", link);
	} else if (!run_state_terminal(st))
		answer = xprintf("Run %s is still %s: `/cancel` it first, or wait for its end.",
		    link, run_state_name(st));
	else if ((new = run_retry(e, run, who, &cause)) == NULL) {
		log_warn("event=thread_cmd.retry_failed run=%s error=%s", run, log_q(cause));
		answer = xprintf("Could not retry run %s; try again.", link);
		free(cause);
	} else {
		free(link);
		link = report_run_ref(e, ev->source, new);
		answer = xprintf("Retrying as run %s (a new run of `%s`, as %s asked).", link,
		    name, who);
		free(new);
	}
out:
	log_info("event=thread_cmd cmd=%s org=%s thread=%s run=%s actor=%s", verb,
	    log_q(ev->org), log_q(ev->thread), run != NULL ? run : "-", log_q(who));
	automation_free(kept);
	automation_set_unref(set);
	run_row_free(j);
	free(link);
	free(run);
	return answer;
}

void
thread_cmd_apply(struct engine *e, struct spur_event *ev, enum thread_cmd cmd)
{
	const struct source	*src = thread_cmd_source(ev);
	char			*answer, *body;

	if (cmd == THREAD_CMD_NONE || (answer = thread_cmd_act(e, ev, cmd)) == NULL)
		return;
	/* A source that answers the person itself (a slash command's 200) says it there. */
	ev->reply = answer;
	if (src != NULL && src->answer != NULL && (body = src->answer(ev, NULL, 0, NULL)) !=
	    NULL) {
		free(body);
		return;
	}
	ev->reply = NULL;
	report_reply(e, ev, answer);
	free(answer);
}
