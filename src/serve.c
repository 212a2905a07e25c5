/* serve.c: `spur serve`: builds the engine, runs the loop, reloads on SIGHUP, stops on SIGTERM. */
#include "spur.h"
#include "api.h"
#include "automation.h"
#include "cmd.h"
#include "conf.h"
#include "dispatch.h"
#include "ingest.h"
#include "schedule.h"
#include "priv.h"
#include "sandbox.h"
#include "report.h"
#include "serve.h"
#include "outbox.h"
#include "people.h"
#include "node.h"
#include "notify.h"
#include "store.h"
#include "writer.h"
#include "ytree.h"

#include <sys/file.h>
#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVE_DRAIN_MS		5000
#define SERVE_PRUNE_SECS	3600

static struct event	*serve_drain_ev;
static struct event	*serve_runs_ev;		/* the drain of running runs after SIGTERM */
static int64_t		 serve_runs_until;

/* libevent's own warnings go through our logger, key=value like every other line. */
static void
serve_libevent_log_cb(int severity, const char *msg)
{
	enum log_level	 level = LOG_DEBUG;

	if (severity == EVENT_LOG_WARN)
		level = LOG_WARN;
	else if (severity == EVENT_LOG_ERR)
		level = LOG_ERROR;
	else if (severity == EVENT_LOG_MSG)
		level = LOG_INFO;
	log_msg(level, "event=libevent message=%s", log_q(msg));
}
static int64_t		 serve_drain_until;

/* More descriptors than the default 1024: idle clients must not starve the listener. */
static void
serve_raise_nofile(void)
{
	struct rlimit	 rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void
serve_drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine	*e = arg;
	struct timeval	 tv = { 0, 50 * 1000 };

	ingest_flush(e->ingest);
	if (server_busy(e->server) == 0 || now_ms() > serve_drain_until) {
		/* One more short turn so that the last answers leave their buffers. */
		tv.tv_usec = 100 * 1000;
		event_base_loopexit(e->base, &tv);
		return;
	}
	evtimer_add(serve_drain_ev, &tv);
}

/* The stop itself: no more connections, what still runs interrupted, answers drained. */
static void
serve_begin_stop(struct engine *e)
{
	struct timeval	 tv = { 0, 0 };

	if (e->stopping)
		return;
	e->stopping = 1;
	server_stop_accepting(e->server);
	if (e->dispatch != NULL)
		dispatch_shutdown(e->dispatch);
	serve_drain_until = now_ms() + SERVE_DRAIN_MS;
	serve_drain_ev = evtimer_new(e->base, serve_drain_cb, e);
	evtimer_add(serve_drain_ev, &tv);
}

/* While runs drain: webhooks are still taken (their runs wait queued); stop when none runs. */
static void
serve_runs_drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct engine	*e = arg;
	struct timeval	 tv = { 0, 250 * 1000 };
	int		 left = dispatch_running(e->dispatch);

	if (left == 0 || now_ms() >= serve_runs_until) {
		log_info("event=serve.drained interrupted=%d", left);
		serve_begin_stop(e);
		return;
	}
	evtimer_add(serve_runs_ev, &tv);
}

/*
 * SIGTERM or SIGINT: running runs may finish for limits.drain (a deploy must
 * not cost a 30-minute agent run); a second signal stops at once. What is
 * still running then is interrupted and queued again for the next start.
 */
static void
serve_stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct engine	*e = arg;
	struct timeval	 tv = { 0, 0 };
	int		 running;

	if (e->stopping) {
		log_warn("event=serve.stop_again signal=%d", (int)sig);
		return;
	}
	/* /healthz says so from now on: a balancer stops sending here. */
	e->draining = 1;
	notify_send("STOPPING=1");
	/*
	 * A fenced node (node.c) stops at once: the others take its runs, which
	 * must not run on here meanwhile, for limits.drain.
	 */
	if (serve_runs_ev != NULL || node_fenced(e->node)) {
		log_warn("event=serve.stop_now signal=%s running=%d consequence=\"running runs "
		    "are interrupted and queued again\"", sig == SIGTERM ? "TERM" : "INT",
		    dispatch_running(e->dispatch));
		serve_begin_stop(e);
		return;
	}
	running = e->dispatch != NULL ? dispatch_drain(e->dispatch) : 0;
	log_info("event=serve.stopping signal=%s running=%d drain_s=%lld",
	    sig == SIGTERM ? "TERM" : "INT", running, e->conf->limit_drain);
	if (running == 0 || e->conf->limit_drain <= 0) {
		serve_begin_stop(e);
		return;
	}
	serve_runs_until = now_ms() + e->conf->limit_drain * 1000;
	serve_runs_ev = evtimer_new(e->base, serve_runs_drain_cb, e);
	evtimer_add(serve_runs_ev, &tv);
}

struct config *
serve_config_ref(struct engine *e, struct automation_set **set)
{
	struct config	*conf;

	pthread_mutex_lock(&e->conf_mu);
	conf = config_ref(e->conf);
	*set = e->automations != NULL ? automation_set_ref(e->automations) : NULL;
	pthread_mutex_unlock(&e->conf_mu);
	return conf;
}

/* A load's warnings are logged and never refuse; its errors go to event (or stderr when NULL). */
static void
serve_tell_errs(const struct yerrs *errs, const char *event)
{
	size_t	 i;

	for (i = 0; i < errs->n; i++) {
		if (errs->warning[i])
			log_warn("event=config.warning warning=%s", log_q(errs->msgs[i]));
		else if (event != NULL)
			log_error("event=%s error=%s", event, log_q(errs->msgs[i]));
		else
			fprintf(stderr, "%s\n", errs->msgs[i]);
	}
}

/*
 * What the last reload came to, for `spur reload` (which waits for this file
 * to change after its SIGHUP) and /metrics: its time, ok or refused, and why.
 */
static void
serve_reload_record(struct engine *e, const struct yerrs *errs, const struct config *conf)
{
	char	*path = path_join(e->conf->data_dir, SERVE_RELOAD_STATUS), *tmp;
	FILE	*f;
	size_t	 i;

	e->reload_at = now_ms();
	e->reload_ok = errs == NULL;
	tmp = xprintf("%s.tmp", path);
	if ((f = fopen(tmp, "we")) == NULL) {
		log_warn("event=reload.status_failed path=%s error=%s", log_q(tmp),
		    log_q(strerror(errno)));
		goto out;
	}
	if (errs == NULL)
		fprintf(f, "%lld ok automations=%zu orgs=%zu\n", (long long)e->reload_at,
		    automation_count(e->automations), conf->norgs);
	else {
		fprintf(f, "%lld refused errors=%zu\n", (long long)e->reload_at, errs->nerrors);
		for (i = 0; i < errs->n; i++)
			if (!errs->warning[i])
				fprintf(f, "%s\n", errs->msgs[i]);
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		log_warn("event=reload.status_failed path=%s error=%s", log_q(path),
		    log_q(strerror(errno)));
out:
	free(tmp);
	free(path);
}

/* What `systemctl status` shows of a running engine. */
static char *
serve_status(void *arg)
{
	struct engine	*e = arg;

	return xprintf("%s%d running, %lld queued", e->draining ? "draining: " : "",
	    e->dispatch != NULL ? dispatch_running(e->dispatch) : 0,
	    store_count_runs(e->store, RUN_QUEUED));
}

/* Re-reads config and automations; an invalid set is refused whole and the old one stays. */
static void
serve_reload(struct engine *e)
{
	struct yerrs		 errs;
	struct config		*conf, *oldconf;
	struct automation_set	*set = NULL, *oldset;

	log_info("event=reload.start config=%s", log_q(e->config_path));
	notify_send("RELOADING=1");
	yerrs_init(&errs);
	if (cmd_load_errs(e->config_path, 0, &conf, &set, &errs) != 0) {
		serve_tell_errs(&errs, "reload.error");
		log_error("event=reload.refused errors=%zu kept=old", errs.nerrors);
		serve_reload_record(e, &errs, NULL);
		yerrs_free(&errs);
		notify_send("READY=1");
		return;
	}
	serve_tell_errs(&errs, "reload.error");
	yerrs_free(&errs);
	log_set_json(conf->log_json);
	if (strcmp(conf->data_dir, e->conf->data_dir) != 0)
		log_warn("event=reload.ignored key=data_dir reason=\"needs a restart\"");
	if (conf->nlisten != e->conf->nlisten ||
	    strcmp(conf->listen[0], e->conf->listen[0]) != 0)
		log_warn("event=reload.ignored key=listen reason=\"needs a restart\"");
	if ((conf->metrics_listen == NULL) != (e->conf->metrics_listen == NULL) ||
	    (conf->metrics_listen != NULL && strcmp(conf->metrics_listen,
	    e->conf->metrics_listen) != 0))
		log_warn("event=reload.ignored key=metrics.listen reason=\"needs a restart\"");
	if ((conf->store_url == NULL) != (e->conf->store_url == NULL) ||
	    (conf->store_url != NULL && strcmp(conf->store_url, e->conf->store_url) != 0))
		log_warn("event=reload.ignored key=store reason=\"needs a restart\"");
	/* A lease the others hold this node to changes with a new node: at a restart (node.h). */
	if (conf->node_lease_ms != e->conf->node_lease_ms)
		log_warn("event=reload.ignored key=nodes.lease reason=\"needs a restart\"");
	if (conf->node_beat_ms != e->conf->node_beat_ms)
		log_warn("event=reload.ignored key=nodes.beat reason=\"needs a restart\"");
	conf->node_lease_ms = e->conf->node_lease_ms;
	conf->node_beat_ms = e->conf->node_beat_ms;
	/* Keep the old config's data_dir, store and listen: they cannot change without a restart. */
	free(conf->data_dir);
	conf->data_dir = xstrdup(e->conf->data_dir);
	free(conf->store_url);
	conf->store_url = e->conf->store_url != NULL ? xstrdup(e->conf->store_url) : NULL;
	pthread_mutex_lock(&e->conf_mu);
	oldset = e->automations;
	oldconf = e->conf;
	e->automations = set;
	e->conf = conf;
	pthread_mutex_unlock(&e->conf_mu);
	automation_set_unref(oldset);
	config_free(oldconf);
	log_info("event=reload.done automations=%zu orgs=%zu", automation_count(set),
	    conf->norgs);
	serve_reload_record(e, NULL, conf);
	notify_send("READY=1");
	server_reload(e->server);
	if (e->node != NULL)
		node_reload(e->node);
	if (e->scheduler != NULL)
		scheduler_reload(e->scheduler);
	if (e->dispatch != NULL)
		dispatch_kick(e->dispatch);
}

static void
serve_hup_cb(evutil_socket_t sig, short what, void *arg)
{
	serve_reload(arg);
}

/*
 * Retention: events past retention.events go a batch at a time, each its own
 * short transaction, so that the writer's commits never wait long behind one
 * delete (a restart after a long stop, or a shorter retention, can leave
 * millions), with a pause after each: sqlite's busy handler does not queue,
 * and batches back to back would starve the writer until the last one. The
 * loop answers, runs and reports meanwhile. The payload segments no event
 * points into go after the last batch. A pass starts at start and every
 * SERVE_PRUNE_SECS.
 */
#define SERVE_PRUNE_BATCH	1000
#define SERVE_PRUNE_PAUSE_MS	25	/* between batches: the writer's commits get the store */
static struct event	*serve_prune_more;
static int64_t		 serve_prune_before;	/* the pass's cutoff; 0: no pass */
static long long	 serve_prune_total;

/* One batch of the pass (a new pass when none is on): 1 while more are left. */
static int
serve_prune_step(struct engine *e)
{
	int	 n;

	if (serve_prune_before == 0) {
		serve_prune_before = now_ms() - e->conf->retention_events * 1000;
		serve_prune_total = 0;
	}
	if ((n = store_prune_events(e->store, serve_prune_before, SERVE_PRUNE_BATCH)) > 0)
		serve_prune_total += n;
	if (n == SERVE_PRUNE_BATCH)
		return 1;
	if (n < 0)
		log_warn("event=store.prune_failed consequence=\"tried again within the hour\"");
	store_prune_payloads(e->store, serve_prune_before);
	if (serve_prune_total > 0)
		log_info("event=store.pruned events=%lld", serve_prune_total);
	serve_prune_before = 0;
	return 0;
}

static void
serve_prune_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval	 tv = { 0, SERVE_PRUNE_PAUSE_MS * 1000 };

	if (serve_prune_step(arg))
		evtimer_add(serve_prune_more, &tv);
}

/*
 * One engine per data_dir: a second one would start every queued run again,
 * post every report twice and write payloads over the first one's in the
 * payload log. data_dir/spur.lock is held (flock) for the engine's life, and
 * the kernel lets go however the engine ends: a kill -9 leaves no stale lock.
 * Returns the descriptor, or -1 with cause.
 */
#define SERVE_LOCK_WAIT_MS	10000	/* a dead engine's child lets go of its lock by then */

/* Whether the engine of a pid file's text is gone (no such process). */
static int
serve_lock_gone(const char *pid)
{
	char	*end;
	long	 n = strtol(pid, &end, 10);

	return *pid != '\0' && *end == '\0' && n > 0 && kill((pid_t)n, 0) == -1 &&
	    errno == ESRCH;
}

/* The lock, once what holds it let go (SERVE_LOCK_WAIT_MS at most): 1, else 0. */
static int
serve_lock_wait(int fd)
{
	int64_t	 until = now_ms() + SERVE_LOCK_WAIT_MS;

	while (now_ms() < until) {
		usleep(20 * 1000);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 1;
	}
	return 0;
}

static int
serve_lock(const char *data_dir, char **cause)
{
	char	*path, *pidpath, *pid = NULL, *ignored = NULL;
	int	 fd;

	if (mkdir_p(data_dir, 0700) != 0) {
		xasprintf(cause, "%s: %s", data_dir, strerror(errno));
		return -1;
	}
	path = path_join(data_dir, "spur.lock");
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	pidpath = path_join(data_dir, "spur.pid");
	if (read_file(pidpath, 64, &pid, NULL, &ignored) == 0)
		pid[strcspn(pid, "\n")] = '\0';
	/*
	 * The engine named there is gone (killed -9): what holds the lock is a
	 * child it forked an instant before, which lets go at its exec or its
	 * end. Waited for, a while; a live engine's lock is refused at once.
	 */
	if (pid != NULL && serve_lock_gone(pid) && serve_lock_wait(fd))
		goto locked;
	xasprintf(cause, "%s is in use by another spur serve%s%s", data_dir,
	    pid != NULL ? ", pid " : "", pid != NULL ? pid : "");
	free(pid);
	free(ignored);
	free(pidpath);
	close(fd);
	return -1;
locked:
	log_info("event=serve.lock_waited dead_engine=%s", log_q(pid));
	free(pid);
	free(ignored);
	free(pidpath);
	return fd;
}

/* Writes data_dir/spur.pid so that the CLI can signal the engine (cancel). */
static void
serve_pidfile(struct engine *e, int remove)
{
	char	*path = path_join(e->conf->data_dir, "spur.pid");
	FILE	*f;

	if (remove)
		unlink(path);
	else if ((f = fopen(path, "w")) != NULL) {
		fprintf(f, "%ld\n", (long)getpid());
		fclose(f);
	}
	free(path);
}

/*
 * Started as root with bwrap, the root helper is forked here, before any
 * thread: children that run as a session's uid start through it (priv.h).
 * Otherwise the reaper alone, as before. -1: do not start.
 */
static int
serve_priv_start(struct engine *e)
{
	char	*cause = NULL;
	int	 fd;

	if (e->conf->sandbox.backend != SANDBOX_BWRAP)
		return 0;
	if (e->conf->helper_socket != NULL) {
		/* spur helper's (its unit's): it sweeps when this engine is gone. */
		sandbox_reaper_mark();
		return 0;
	}
	if (geteuid() == 0) {
		sandbox_reaper_mark();
		if ((fd = priv_helper_start(e->conf, geteuid(), getegid(), &cause)) != -1) {
			priv_client_set(fd, e->conf->data_dir);
			return 0;
		}
		log_warn("event=priv.failed error=%s consequence=\"children start from "
		    "the engine\"", log_q(cause));
		free(cause);
		cause = NULL;
	}
	if (sandbox_reaper_start(e->conf, &cause) != 0) {
		log_warn("event=sandbox.reaper_failed error=%s", log_q(cause));
		free(cause);
	}
	return 0;
}

/*
 * With helper_socket: (and bwrap), the engine reaches spur helper there, once
 * it is its user (the helper takes that uid alone): children that run as a
 * session's uid start through it, and the files it cannot read it opens.
 * -1: do not start (no helper there, or it refused).
 */
static int
serve_helper_connect(struct engine *e)
{
	char	*cause = NULL;
	int	 fd;

	if (e->conf->helper_socket == NULL || e->conf->sandbox.backend != SANDBOX_BWRAP)
		return 0;
	if ((fd = priv_client_connect(e->conf->helper_socket, &cause)) == -1) {
		log_error("event=serve.refused reason=\"no root helper at helper_socket:\" "
		    "error=%s fix=\"start spur helper (systemctl start spur-helper)\"",
		    log_q(cause));
		free(cause);
		return -1;
	}
	priv_client_set(fd, e->conf->data_dir);
	read_file_set_fallback(priv_open_file);
	log_info("event=priv.connected socket=%s", log_q(e->conf->helper_socket));
	return 0;
}

/*
 * Started as root with user: set, the engine becomes that user once the
 * helper is forked and before any thread: data_dir becomes the user's, then
 * groups, gid and uid, for good. user: unset, it stays root and says so.
 * -1: do not start (the user does not exist, or the drop failed).
 */
static int
serve_drop(struct engine *e)
{
	struct passwd	*pw;
	char		*cause = NULL;
	uid_t		 uid;
	gid_t		 gid;

	if (geteuid() != 0)
		return 0;
	if (e->conf->user == NULL) {
		log_warn("event=serve.root warning=\"user: is not set: the engine, which "
		    "reads the network, runs as root\" fix=\"set user: spur in spur.yaml "
		    "(spur doctor)\"");
		return 0;
	}
	if ((pw = getpwnam(e->conf->user)) == NULL || pw->pw_uid == 0) {
		log_error("event=serve.refused reason=%s user=%s fix=%s", log_q(pw == NULL ?
		    "the user of user: does not exist" : "the user of user: is root"),
		    log_q(e->conf->user), log_q("useradd --system --home-dir /nonexistent "
		    "--shell /usr/sbin/nologin spur"));
		return -1;
	}
	uid = pw->pw_uid;
	gid = pw->pw_gid;
	if (e->conf->sandbox.backend == SANDBOX_BWRAP && !priv_client_active() &&
	    e->conf->helper_socket == NULL) {
		log_error("event=serve.refused reason=\"no root helper: sandboxes could not "
		    "start as their session's uid\" user=%s", log_q(e->conf->user));
		return -1;
	}
	if (priv_give_data_dir(e->conf, uid, gid, &cause) != 0 ||
	    setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0) {
		log_error("event=serve.refused reason=\"cannot become user\" user=%s "
		    "error=%s", log_q(e->conf->user), log_q(cause != NULL ? cause :
		    strerror(errno)));
		free(cause);
		return -1;
	}
	if (setuid(0) == 0)
		fatal("the engine could become root again after dropping to %s",
		    e->conf->user);
	log_info("event=serve.dropped user=%s uid=%ld gid=%ld", log_q(e->conf->user),
	    (long)uid, (long)gid);
	/* spur.yaml, automations and file: secrets it can no longer read: the helper opens them. */
	read_file_set_fallback(priv_open_file);
	return 0;
}

/* serve's and helper's options: -c FILE, -v. -1 (usage shown) when wrong. */
static int
serve_opts(const struct cmd *c, int argc, char **argv, const char **path)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 }
	};
	int	ch;

	while ((ch = getopt_long(argc, argv, "c:v", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			*path = optarg;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		default:
			cmd_usage(c, 1);
			return -1;
		}
	}
	if (optind != argc) {
		cmd_usage(c, 1);
		return -1;
	}
	return 0;
}

int
cmd_helper(const struct cmd *c, int argc, char **argv)
{
	struct config	*conf;
	const char	*path = NULL;
	char		*cause = NULL;

	if (serve_opts(c, argc, argv, &path) != 0)
		return EXIT_USAGE;
	/* Its secrets stay references: the helper reads none. */
	if (cmd_load(path != NULL ? path : config_default_path(), CONFIG_UNRESOLVED,
	    &conf, NULL) != 0)
		return EXIT_FAILED;
	log_set_json(conf->log_json);
	notify_open();
	if (geteuid() != 0 || priv_helper_listen(conf, &cause) != 0) {
		log_error("event=priv.refused reason=%s consequence=\"not started\"",
		    log_q(cause != NULL ? cause : "spur helper must start as root"));
		free(cause);
		config_free(conf);
		return EXIT_FAILED;
	}
	config_free(conf);
	return EXIT_OK;
}

int
cmd_serve(const struct cmd *c, int argc, char **argv)
{
	struct engine	 e;
	struct event	*sigterm, *sigint, *sighup, *prune;
	struct timeval	 tv = { SERVE_PRUNE_SECS, 0 };
	struct yerrs	 errs;
	const char	*path = NULL;
	char		*cause = NULL;
	int		 rc = EXIT_FAILED, lockfd = -1, loaded;

	if (serve_opts(c, argc, argv, &path) != 0)
		return EXIT_USAGE;
	memset(&e, 0, sizeof e);
	pthread_mutex_init(&e.conf_mu, NULL);
	e.config_path = xstrdup(path != NULL ? path : config_default_path());
	yerrs_init(&errs);
	loaded = cmd_load_errs(e.config_path, 0, &e.conf, &e.automations, &errs) == 0;
	serve_tell_errs(&errs, NULL);
	yerrs_free(&errs);
	if (!loaded) {
		log_error("event=serve.refused reason=\"invalid configuration\" config=%s",
		    log_q(e.config_path));
		free(e.config_path);
		pthread_mutex_destroy(&e.conf_mu);
		return EXIT_FAILED;
	}
	log_set_json(e.conf->log_json);
	notify_open();
	e.reload_ok = 1;
	e.reload_at = now_ms();
	signal(SIGPIPE, SIG_IGN);
	serve_raise_nofile();
	if (e.conf->sandbox.backend == SANDBOX_NONE)
		log_warn("event=sandbox.disabled backend=none warning=\"runs are NOT "
		    "isolated: development only\"");
	if ((lockfd = serve_lock(e.conf->data_dir, &cause)) == -1) {
		log_error("event=serve.data_dir_in_use error=%s consequence=\"not started\"",
		    log_q(cause));
		goto out;
	}
	if (serve_priv_start(&e) != 0 || serve_drop(&e) != 0 ||
	    serve_helper_connect(&e) != 0)
		goto out;
	store_set_prepare(e.conf->store_prepare);
	if ((e.store = store_open_url(e.conf->store_url, e.conf->data_dir, 0,
	    &cause)) == NULL) {
		log_error("event=store.open_failed error=%s", log_q(cause));
		goto out;
	}
	event_set_log_callback(serve_libevent_log_cb);
	/* The store's writer thread wakes the loop: the base must be lockable. */
	if (evthread_use_pthreads() != 0)
		fatal("evthread_use_pthreads failed");
	e.base = event_base_new();
	e.metrics = metrics_create();
	if ((e.node = node_create(&e, &cause)) == NULL) {
		log_error("event=node.failed error=%s", log_q(cause));
		goto out;
	}
	e.ingest = ingest_create(&e);
	/* The writer's commits, like the loop's, wait no longer than the node's lease. */
	writer_horizon(e.writer, node_horizon(e.node));
	if ((e.server = server_create(&e, &cause)) == NULL) {
		log_error("event=serve.listen_failed error=%s", log_q(cause));
		goto out;
	}
	if ((e.dispatch = dispatch_create(&e, &cause)) == NULL) {
		log_error("event=dispatch.failed error=%s", log_q(cause));
		goto out;
	}
	e.scheduler = scheduler_create(&e);
	/* The engine's HTTP client, made where the outbox made it (its first user). */
	e.http = httpc_create(e.base);
	e.outbox = outbox_create(&e);
	e.people = people_create(&e);
	sigterm = evsignal_new(e.base, SIGTERM, serve_stop_cb, &e);
	sigint = evsignal_new(e.base, SIGINT, serve_stop_cb, &e);
	sighup = evsignal_new(e.base, SIGHUP, serve_hup_cb, &e);
	prune = event_new(e.base, -1, EV_PERSIST, serve_prune_cb, &e);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	evsignal_add(sighup, NULL);
	evtimer_add(prune, &tv);
	serve_prune_more = evtimer_new(e.base, serve_prune_cb, &e);
	/* A first pass at once, a batch a turn like any other: requests are answered meanwhile. */
	event_active(serve_prune_more, 0, 0);
	serve_pidfile(&e, 0);
	log_info("event=serve.ready version=%s config=%s data_dir=%s automations=%zu "
	    "orgs=%zu port=%d", PACKAGE_VERSION, log_q(e.config_path),
	    log_q(e.conf->data_dir), automation_count(e.automations), e.conf->norgs,
	    server_port(e.server));
	notify_ready(e.base, serve_status, &e);
	dispatch_kick(e.dispatch);
	event_base_dispatch(e.base);
	notify_close();
	ingest_flush(e.ingest);
	serve_pidfile(&e, 1);
	event_free(sigterm);
	event_free(sigint);
	event_free(sighup);
	event_free(prune);
	event_free(serve_prune_more);
	serve_prune_more = NULL;
	if (serve_drain_ev != NULL)
		event_free(serve_drain_ev);
	if (serve_runs_ev != NULL)
		event_free(serve_runs_ev);
	log_info("event=serve.stopped");
	/* A node the others declared dead exits 1: its supervisor starts a new one. */
	rc = node_fenced(e.node) ? EXIT_FAILED : EXIT_OK;
out:
	free(cause);
	/*
	 * The fronts first: they stop, and what they handed to ingest is committed
	 * and answered while everything its answers touch is still there.
	 */
	/* Events waiting for who their actor is are answered (503) while their fronts are there. */
	people_free(e.people);
	e.people = NULL;
	server_free(e.server);
	mcp_free_all();
	scheduler_free(e.scheduler);
	e.scheduler = NULL;
	dispatch_free(e.dispatch);
	e.dispatch = NULL;
	outbox_free(e.outbox);
	e.outbox = NULL;
	report_cleanup();
	httpc_free(e.http);	/* after the outbox: what its calls hold is freed first */
	e.http = NULL;
	ingest_free(e.ingest);
	node_free(e.node);
	e.node = NULL;
	metrics_free(e.metrics);
	store_close(e.store);
	if (lockfd != -1)
		close(lockfd);
	if (e.base != NULL)
		event_base_free(e.base);
	if (e.automations != NULL)
		automation_set_unref(e.automations);
	config_free(e.conf);
	pthread_mutex_destroy(&e.conf_mu);
	free(e.config_path);
	libevent_global_shutdown();
	return rc;
}
