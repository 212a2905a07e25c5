/* priv.h: the root helper's typed requests, their wire form, the engine's client and the helper. */
#ifndef SPUR_PRIV_H
#define SPUR_PRIV_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct event_base;

/*
 * One message on the helper's socket pair: a fixed header, then len bytes of
 * the type's body, the nfds descriptors riding with the header (SCM_RIGHTS).
 * Both ends are the same binary on the same host: host byte order.
 */
struct priv_hdr {
	uint32_t	type;		/* enum priv_type */
	uint32_t	id;		/* a request's number, echoed by its answer; 0: a notice */
	uint32_t	len;		/* body bytes, at most PRIV_BODY_MAX */
	uint32_t	nfds;		/* descriptors passed, at most PRIV_FDS_MAX */
};

enum priv_type {
	/* engine -> helper */
	PRIV_PREPARE_DIR = 1,	/* a session's directory: made, 0700, the session uid's */
	PRIV_REMOVE_DIR,	/* a session's directory and all in it, by descriptors */
	PRIV_CHOWN,		/* what one session uid owns under it becomes another's */
	PRIV_SPAWN,		/* a child as a session uid; answered with pid and pipes */
	PRIV_SIGNAL,		/* a signal to a child the helper started (or its sandbox) */
	PRIV_JOB,		/* a typed job on a session's directory (enum priv_job) */
	PRIV_KILL_RUN,		/* the sandbox processes a dead engine left for a run */
	PRIV_OPEN_FILE,		/* a file the config named at start, handed back open */
	/* helper -> engine */
	PRIV_OK = 64,		/* value (a pid for SPAWN), the descriptors (its pipes) */
	PRIV_ERR,		/* errno and a message */
	PRIV_EXIT		/* notice: a child the helper started was reaped */
};

#define PRIV_BODY_MAX		(1024 * 1024)
#define PRIV_DIRS_MAX		4		/* paths of one priv_dirs_path */
#define PRIV_FDS_MAX		34		/* a SPAWN's cwd and PROC_KEEP_MAX kept */
#define PRIV_STR_MAX		(256 * 1024)	/* one string of a body */
#define PRIV_STRV_MAX		4096		/* strings in one list (argv, env) */
#define PRIV_STAGE_MAX		64		/* binds staged for one child */
#define PRIV_SESSION_MAX	64		/* a session id's bytes */
#define PRIV_SUB_MAX		256		/* a directory's path under its session */

/*
 * PREPARE_DIR, REMOVE_DIR, CHOWN, JOB: data_dir/sessions/<session>/<sub>,
 * data_dir/runs/<run>/<sub> (a run's artifacts) or data_dir/cache/<org>/<sub>
 * (the environments' caches), never a path.
 */
enum priv_area {
	PRIV_AREA_SESSIONS = 0,
	PRIV_AREA_RUNS,
	PRIV_AREA_CACHE
};
#define PRIV_AREAS		3
struct priv_dir {
	uint32_t	 area;		/* enum priv_area */
	char		*session;	/* a session's or run's id: [A-Za-z0-9_-], at most
					   PRIV_SESSION_MAX */
	char		*sub;		/* "" or relative names, no "." or "..", no empty part */
	uint32_t	 uid;		/* PREPARE: the owner; CHOWN: the new owner */
	uint32_t	 gid;
	uint32_t	 from;		/* CHOWN: what this uid owns changes hands */
};

/*
 * JOB: what the engine, once it left root, cannot do itself on what a sandbox
 * wrote. The directory is a struct priv_dir (opened by the helper, by
 * descriptors, never through a link); PACK, UNPACK and WRITE run in a child of
 * the helper as the directory's session uid (dir.uid), GLOB and DU in the
 * helper (names and sizes only, no content). What goes in rides as a
 * descriptor (UNPACK's archive, WRITE's text), what comes out as one (OK's
 * first descriptor, a memfd) with OK's value the job's verdict.
 */
enum priv_job {
	PRIV_JOB_PACK = 1,	/* arg: the agent's state dir below it; out: archive.c's form */
	PRIV_JOB_UNPACK,	/* in: an archive, unpacked below it as dir.uid */
	PRIV_JOB_WRITE,		/* arg: "dir/name" below it; in: the file's text (0600) */
	PRIV_JOB_GLOB,		/* arg: a pattern; value 1 if a regular file matches */
	PRIV_JOB_DU		/* out: the tree's disk usage in bytes, as decimal text */
};
struct priv_jobreq {
	struct priv_dir	 dir;
	uint32_t	 job;		/* enum priv_job */
	char		*arg;
};
#define PRIV_JOB_OUT_MAX	(64 * 1024 * 1024)	/* what a job may hand back */

/* SPAWN: proc.c's child recipe, run by the helper. */
struct priv_spawn {
	uint32_t	 uid;		/* one of sandbox.uids, or sandbox.user's */
	uint32_t	 gid;
	uint64_t	 rlimit_data;
	uint64_t	 rlimit_nproc;
	uint32_t	 cwd_fd;	/* 1: the first descriptor passed is its cwd */
	char		*path;		/* bwrap or git, nothing else */
	char		*cwd;		/* "" for none */
	char		**argv;
	char		**env;
	char		**stage_src;	/* bound under SANDBOX_STAGE before the drop */
	char		**stage_dst;
	uint64_t	 stage_file;	/* bit i: stage i is a file */
};

struct priv_signal {
	int32_t		 pid;		/* a child the helper started */
	int32_t		 sig;
	int32_t		 ns_init;	/* >0: every process in the pid namespace of this
					   process but itself, which must be the child's uid's */
};

struct priv_answer {
	int32_t		 value;		/* OK: a pid, or 0; ERR: an errno */
	char		*message;	/* ERR: what was wrong */
	int32_t		 status;	/* EXIT: the wait status */
};

/* A decoded message, whichever its type. */
struct priv_msg {
	struct priv_hdr		 hdr;
	union {
		struct priv_dir		dir;
		struct priv_spawn	spawn;
		struct priv_signal	sig;
		struct priv_jobreq	job;
		char			*str;	/* KILL_RUN: a run id; OPEN_FILE: a path */
		struct priv_answer	answer;
	} u;
	int			 fds[PRIV_FDS_MAX];	/* hdr.nfds of them */
};

/* Wire form: body in b; the caller sends hdr, b and fds. */
struct buf;
void		 priv_encode(const struct priv_msg *, struct buf *);
/*
 * A body into msg (hdr already in msg->hdr): every length checked against
 * what is left and the bounds above, strings without a NUL. -1 and cause;
 * priv_msg_clear frees what either left (not the descriptors).
 */
int		 priv_decode(struct priv_msg *, const uint8_t *, size_t, char **cause);
void		 priv_msg_clear(struct priv_msg *);
const char	*priv_type_name(uint32_t);
const char	*priv_job_name(uint32_t);

/* One message each way on a blocking socket; -1 with errno (0 at end of file). */
int		 priv_send(int, const struct priv_msg *);
int		 priv_recv(int, struct priv_msg *, char **cause);

/*
 * The engine's side. Once priv_client_set is given the socket, children that
 * drop to a session uid start through the helper. Any thread may ask; EXIT
 * notices reach exit_cb on the base's loop (priv_client_attach).
 */
void		 priv_client_set(int fd, const char *data_dir);
int		 priv_client_active(void);
/*
 * Whether sessions run as their own uids: the engine is root, or its root
 * helper does what needs root for it. Every "am I root" of the engine asks this.
 */
int		 priv_as_root(void);
/*
 * The engine is not root but its helper is: a directory under
 * data_dir/sessions or data_dir/runs is made (PREPARE_DIR) or removed (REMOVE_DIR) through it.
 * 1 when it was (0 or -1 in *rc), 0 when path is not for the helper.
 */
int		 priv_dir_path(enum priv_type, const char *path, uid_t, gid_t, int *rc,
		     char **cause);
/* The same for up to PRIV_DIRS_MAX paths in one round trip; all or none for the helper. */
int		 priv_dirs_path(enum priv_type, const char *const *paths, size_t n, uid_t,
		     gid_t, int *rc, char **cause);
void		 priv_client_attach(struct event_base *,
		     void (*exit_cb)(pid_t, int status));
int		 priv_client_call(struct priv_msg *req, struct priv_msg *answer,
		     char **cause);
int		 priv_client_calls(struct priv_msg *req, size_t n, struct priv_msg *answer,
		     char **cause);
/* Blocks until the helper says pid was reaped (a child proc_run waits for). */
int		 priv_client_wait(pid_t, int *status);
/* The directory requests, by session id and the path under it. */
int		 priv_dir(enum priv_type, enum priv_area, const char *id, const char *sub,
		     uid_t uid, gid_t gid, uid_t from, char **cause);
/*
 * A job on path (under one of the areas) through the helper; in_fd, if not
 * -1, rides with it; *out_fd (if out_fd) is what came back. 1 when it went to
 * the helper (its verdict, or -1, in *rc), 0 when path is not for the helper
 * (the engine is root, or path is not under an area): do it yourself.
 */
int		 priv_job_path(enum priv_job, const char *path, const char *arg, uid_t,
		     gid_t, int in_fd, int *out_fd, int *rc, char **cause);
/* CHOWN of path's tree from one uid to another, the same way (1, or 0: yourself). */
int		 priv_chown_path(const char *path, uid_t from, uid_t, gid_t, int *rc);
/*
 * OPEN_FILE: a file the engine cannot read itself (a root-only file: secret,
 * a config under a root-only directory), opened by the helper if the config
 * it started with named it (the config file, a file of its automations
 * directory, a file: secret); read_file's fallback once the engine dropped.
 * The descriptor, or -1 with errno.
 */
int		 priv_open_file(const char *path);
/* KILL_RUN; -1 when there is no helper (do it yourself), else how many died. */
int		 priv_kill_run(const char *run);
/* data_dir, once the helper is there (a place for what it must make). */
const char	*priv_client_data_dir(void);
/* The sandbox's processes, or the child's process group (ns_init 0). */
int		 priv_signal(pid_t, int sig, pid_t ns_init);

/* The helper (priv-helper.c). */
struct priv_helper;
struct priv_helper *priv_helper_create(const struct config *, uid_t engine_uid,
		     gid_t engine_gid, char **cause);
void		 priv_helper_free(struct priv_helper *);
/*
 * One request checked and done; answer is filled (OK or ERR, descriptors to
 * send included). A refused request is logged event=priv.refused.
 */
void		 priv_helper_handle(struct priv_helper *, const struct priv_msg *req,
		     struct priv_msg *answer);
/*
 * Forks the helper (call before any thread): returns the engine's end of the
 * socket pair, -1 and cause when it could not.
 */
int		 priv_helper_start(const struct config *, uid_t engine_uid,
		     gid_t engine_gid, char **cause);

/*
 * spur helper: the helper alone (as its own systemd unit), for the engine of
 * cf's user: on cf's helper_socket: (SO_PEERCRED: that uid only, one engine at
 * a time; its children go when it disconnects). Returns when it cannot serve
 * (-1 and cause); else serves until killed.
 */
int		 priv_helper_listen(const struct config *, char **cause);
/* The engine's end of a helper_socket:, -1 and cause. */
int		 priv_client_connect(const char *path, char **cause);

/*
 * Before the engine drops to uid: data_dir and what in it is root's become
 * uid's, but the root filesystems (envs/) and what sandboxes wrote (inside a
 * session's directories, the caches), which are not walked.
 */
int		 priv_give_data_dir(const struct config *, uid_t, gid_t, char **cause);

#endif
