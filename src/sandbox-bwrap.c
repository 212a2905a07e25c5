/* sandbox-bwrap.c: one agent process in its own bubblewrap sandbox (or, for development, in none). */
#include "spur.h"
#include "priv.h"
#include "proc.h"
#include "sandbox.h"

#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#define SANDBOX_ARGS_MAX	(1024 * 1024)	/* bwrap options, environment included */

/*
 * How the limits are enforced (no cgroup is needed, none is assumed):
 *  - memory: RLIMIT_DATA on bwrap and everything under it. It counts heap and
 *    private writable mappings but not address space merely reserved
 *    (PROT_NONE), so V8 and Go runtimes still start; RLIMIT_AS would not let
 *    them. It is per process, not per sandbox: several processes may each use
 *    up to the limit.
 *  - processes: RLIMIT_NPROC, counted by the kernel per real uid. Sandboxes run
 *    as sandbox.user, so a fork bomb hits it and stays inside; the budget is
 *    shared by all sandboxes of that user at once.
 *  - time and output: supervised from the event loop (proc.c).
 */


/* This engine's mark in every bwrap it starts ("SPUR_ENGINE=id"), set by the reaper. */
static char	*sandbox_engine_mark;

struct sandbox {
	struct proc		*proc;
	int			 info_fd;	/* bwrap --info-fd: the sandbox's pid 1 */
	pid_t			 ns_init;
	long long		 timeout;
	unsigned long long	 output_max;
	struct sandbox_exit	 exit;
	sandbox_output_cb	 output_cb;
	sandbox_exit_cb		 exit_cb;
	void			*arg;
};

/* A bwrap command line being built: its options go through a memfd (--args), not argv. */
struct sandbox_cmd {
	struct buf	 args;
	char		*path;
	char		**argv;
	int		 keep[PROC_KEEP_MAX];
	size_t		 nkeep;
	int		 info_rd;
	int		 drop;
	uid_t		 uid;
	gid_t		 gid;
	char		*stage_src[4 + SANDBOX_BINDS_MAX];	/* 3 dirs, rootfs, binds */
	char		*stage_dst[4 + SANDBOX_BINDS_MAX];
	int		 stage_file[4 + SANDBOX_BINDS_MAX]; /* mount point is a file */
	size_t		 nstage;
};

/* The host's CA bundle: bound with sandbox_etc, or in a rootfs without ca-certificates. */
static const char *sandbox_etc_ca[] = {
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki",
};

/* What else programs need from /etc; nothing else of the host's configuration. */
static const char *sandbox_etc[] = {
	"/etc/alternatives",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types",
	"/etc/protocols", "/etc/services",
};

/* Top-level directories that are links into /usr on a merged system, else bound. */
static const char *sandbox_top[] = {
	"bin", "sbin", "lib", "lib32", "lib64", "libx32",
};

/* What a rootfs gives besides its /etc; the rest of / stays bwrap's, for mount points. */
static const char *sandbox_rootfs_top[] = {
	"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "var",
};

/* A rootfs's /etc entries the sandbox makes itself (sandbox_build) or never needs. */
static const char *sandbox_rootfs_etc_own[] = {
	"passwd", "group", "hosts", "hostname", "shadow", "gshadow", "passwd-",
	"group-", "shadow-", "gshadow-", "subuid", "subgid",
};

#define SANDBOX_ROOTFS_ETC_MAX	4096	/* entries of a rootfs's /etc */
#define SANDBOX_ETC_COPY_MAX	(1024 * 1024)	/* a host /etc file copied, not bound */
#define SANDBOX_ETC_DIR_MAX	16	/* entries of a host /etc directory copied */
#define SANDBOX_ETC_DIR_FILE_MAX (64 * 1024)	/* and the size of each of its files */

static void
sandbox_arg(struct sandbox_cmd *c, const char *s)
{
	(void)buf_add(&c->args, s, strlen(s) + 1);
}

static void
sandbox_args(struct sandbox_cmd *c, const char *a, const char *b, const char *d)
{
	sandbox_arg(c, a);
	if (b != NULL)
		sandbox_arg(c, b);
	if (d != NULL)
		sandbox_arg(c, d);
}

/* Passes fd to bwrap; returns the number it has there. */
static const char *
sandbox_fd(struct sandbox_cmd *c, int fd, char *num, size_t len)
{
	if (c->nkeep >= PROC_KEEP_MAX)
		fatal("sandbox: too many descriptors");
	c->keep[c->nkeep] = fd;
	snprintf(num, len, "%zu", 3 + c->nkeep);
	c->nkeep++;
	return num;
}

static int
sandbox_memfd(const char *name, const void *data, size_t len, char **cause)
{
	const char	*p = data;
	ssize_t		 n;
	int		 fd;

	if ((fd = memfd_create(name, MFD_CLOEXEC)) == -1) {
		*cause = xprintf("memfd_create: %s", strerror(errno));
		return -1;
	}
	while (len > 0) {
		if ((n = write(fd, p, len)) <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			*cause = xprintf("memfd write: %s", strerror(errno));
			close(fd);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		*cause = xprintf("memfd seek: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A file of len bytes at dest. It is written into the sandbox's root, a tmpfs
 * made read-only at the end (--remount-ro /), not bound: each bind costs bwrap
 * two mounts and a read of its mount table, the most of a start's time.
 */
static int
sandbox_file(struct sandbox_cmd *c, const char *dest, const void *data, size_t len,
    char **cause)
{
	char	num[16];
	int	fd;

	if ((fd = sandbox_memfd("spur-etc", data, len, cause)) == -1)
		return -1;
	sandbox_args(c, "--perms", "0644", NULL);
	sandbox_args(c, "--file", sandbox_fd(c, fd, num, sizeof num), dest);
	return 0;
}

/* Adds a file made of text at dest, read-only. */
static int
sandbox_data(struct sandbox_cmd *c, const char *dest, const char *text, char **cause)
{
	return sandbox_file(c, dest, text, strlen(text), cause);
}

/*
 * One of the host's /etc entries at the same path: a link into /usr as a
 * link (/usr is bound), a small file as a copy (sandbox_file), anything else
 * (a directory) bound read-only. Missing, it is left out.
 */
static int	sandbox_host_etc(struct sandbox_cmd *, const char *, char **);

/* A link into /usr (bound read-only: the sandbox has its target too). */
static int
sandbox_link_usr(const char *path)
{
	char	link[PATH_MAX];
	ssize_t	n;

	if ((n = readlink(path, link, sizeof link - 1)) <= 0)
		return 0;
	link[n] = '\0';
	return strncmp(link, "/usr/", 5) == 0 && strstr(link, "/../") == NULL;
}

/* An empty directory (its only entries . and ..). */
static int
sandbox_dir_empty(const char *path)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		n++;
	closedir(d);
	return n == 2;
}

/*
 * A small directory of the host's /etc (at most SANDBOX_ETC_DIR_MAX entries,
 * each a file of at most SANDBOX_ETC_DIR_FILE_MAX bytes, a link or an empty
 * directory) made in the sandbox's root as sandbox_host_etc makes a file: no
 * bind. 1 when it was, 0 when it is to be bound, -1 on error.
 */
static int
sandbox_host_etc_dir(struct sandbox_cmd *c, const char *path, char **cause)
{
	struct dirent	*de;
	struct stat	 st;
	char		*names[SANDBOX_ETC_DIR_MAX], *p;
	size_t		 n = 0, i;
	DIR		*d;
	int		 small = 1, rc = 1;

	if ((d = opendir(path)) == NULL)
		return 0;
	while (small && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		p = xprintf("%s/%s", path, de->d_name);
		small = n < SANDBOX_ETC_DIR_MAX && lstat(p, &st) == 0 &&
		    ((S_ISLNK(st.st_mode) && sandbox_link_usr(p)) || (S_ISREG(st.st_mode) &&
		    st.st_size <= SANDBOX_ETC_DIR_FILE_MAX) ||
		    (S_ISDIR(st.st_mode) && sandbox_dir_empty(p)));
		if (small)
			names[n++] = p;
		else
			free(p);
	}
	closedir(d);
	if (small)
		sandbox_args(c, "--dir", path, NULL);
	for (i = 0; i < n; i++) {
		if (small && rc == 1 && lstat(names[i], &st) == 0) {
			if (S_ISDIR(st.st_mode))
				sandbox_args(c, "--dir", names[i], NULL);
			else if (sandbox_host_etc(c, names[i], cause) != 0)
				rc = -1;
		}
		free(names[i]);
	}
	return small ? rc : 0;
}

static int
sandbox_host_etc(struct sandbox_cmd *c, const char *path, char **cause)
{
	struct stat	 st;
	char		 link[PATH_MAX], *data;
	ssize_t		 n;
	size_t		 len;
	int		 rc;

	if (sandbox_link_usr(path) && (n = readlink(path, link, sizeof link - 1)) > 0) {
		link[n] = '\0';
		sandbox_args(c, "--symlink", link, path);
		return 0;
	}
	if (stat(path, &st) != 0)
		return 0;
	if (S_ISDIR(st.st_mode) && (rc = sandbox_host_etc_dir(c, path, cause)) != 0)
		return rc == 1 ? 0 : -1;
	if (!S_ISREG(st.st_mode) ||
	    read_file(path, SANDBOX_ETC_COPY_MAX, &data, &len, NULL) != 0) {
		sandbox_args(c, "--ro-bind-try", path, path);
		return 0;
	}
	rc = sandbox_file(c, path, data, len, cause);
	free(data);
	return rc;
}

/*
 * The host's /etc as sandboxes get it (sandbox_host_etc of each entry):
 * worked out once, its files held in memfds, and again when the host's
 * entries or a copied file change (sandbox_etc_sig). A start then costs a
 * stat of each and an open of each memfd, not a walk of /etc.
 */
static struct {
	pthread_mutex_t	 mu;
	struct buf	 args;		/* built as sandbox_cmd's, --file naming keep */
	int		 keep[PROC_KEEP_MAX];
	size_t		 nkeep;
	char		*sig;
	int		 built;
} sandbox_etc_cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Each top entry's and each copied path's identity: what would change the args. */
static char *
sandbox_etc_sig(const struct buf *args)
{
	struct buf	 b;
	struct stat	 st;
	const char	*p, *end, *path;
	size_t		 i;

	buf_init(&b, 0);
	for (i = 0; i < SPUR_ARRLEN(sandbox_etc_ca) + SPUR_ARRLEN(sandbox_etc); i++) {
		path = i < SPUR_ARRLEN(sandbox_etc_ca) ? sandbox_etc_ca[i] :
		    sandbox_etc[i - SPUR_ARRLEN(sandbox_etc_ca)];
		if (lstat(path, &st) != 0)
			buf_addf(&b, "-;");
		else
			buf_addf(&b, "%llu:%lld:%lld.%ld;", (unsigned long long)st.st_ino,
			    (long long)st.st_size, (long long)st.st_mtim.tv_sec,
			    st.st_mtim.tv_nsec);
	}
	/* The files copied out of a directory: an edit in place moves no directory's time. */
	for (p = args->data, end = p + args->len; args->len > 0 && p < end; p += strlen(p) + 1) {
		if (strcmp(p, "--file") != 0 || p + strlen(p) + 1 >= end)
			continue;
		p += strlen(p) + 1;
		p += strlen(p) + 1;
		if (p < end && lstat(p, &st) == 0)
			buf_addf(&b, "%llu:%lld:%lld.%ld;", (unsigned long long)st.st_ino,
			    (long long)st.st_size, (long long)st.st_mtim.tv_sec,
			    st.st_mtim.tv_nsec);
	}
	return buf_take(&b);
}

/* Works the host's /etc out anew into the cache; -1 and cause on error. */
static int
sandbox_etc_build(char **cause)
{
	struct sandbox_cmd	*t = &(struct sandbox_cmd){ .info_rd = -1 };
	size_t			 i;

	buf_init(&t->args, SANDBOX_ARGS_MAX);
	for (i = 0; i < SPUR_ARRLEN(sandbox_etc_ca); i++) {
		if (sandbox_host_etc(t, sandbox_etc_ca[i], cause) != 0)
			goto fail;
	}
	for (i = 0; i < SPUR_ARRLEN(sandbox_etc); i++) {
		if (sandbox_host_etc(t, sandbox_etc[i], cause) != 0)
			goto fail;
	}
	for (i = 0; i < sandbox_etc_cache.nkeep; i++)
		close(sandbox_etc_cache.keep[i]);
	buf_free(&sandbox_etc_cache.args);
	sandbox_etc_cache.args = t->args;
	memcpy(sandbox_etc_cache.keep, t->keep, sizeof t->keep);
	sandbox_etc_cache.nkeep = t->nkeep;
	free(sandbox_etc_cache.sig);
	sandbox_etc_cache.sig = sandbox_etc_sig(&t->args);
	sandbox_etc_cache.built = 1;
	return 0;
fail:
	for (i = 0; i < t->nkeep; i++)
		close(t->keep[i]);
	buf_free(&t->args);
	return -1;
}

/* The cached /etc into c: its args, each --file's memfd opened anew (an offset of its own). */
static int
sandbox_etc_add(struct sandbox_cmd *c, char **cause)
{
	const char	*p, *end;
	char		 num[16], fdpath[64], *sig;
	int		 fd, rc = -1;
	size_t		 k;

	pthread_mutex_lock(&sandbox_etc_cache.mu);
	sig = sandbox_etc_cache.built ? sandbox_etc_sig(&sandbox_etc_cache.args) : NULL;
	if ((sig == NULL || strcmp(sig, sandbox_etc_cache.sig) != 0) &&
	    sandbox_etc_build(cause) != 0)
		goto out;
	p = sandbox_etc_cache.args.data;
	end = p + sandbox_etc_cache.args.len;
	for (; sandbox_etc_cache.args.len > 0 && p < end; p += strlen(p) + 1) {
		sandbox_arg(c, p);
		if (strcmp(p, "--file") != 0)
			continue;
		p += strlen(p) + 1;
		if ((k = strtoul(p, NULL, 10) - 3) >= sandbox_etc_cache.nkeep) {
			*cause = xstrdup("the sandbox's /etc: a file not cached");
			goto out;
		}
		snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", sandbox_etc_cache.keep[k]);
		if ((fd = open(fdpath, O_RDONLY | O_CLOEXEC)) == -1) {
			*cause = xprintf("%s: %s", fdpath, strerror(errno));
			goto out;
		}
		sandbox_arg(c, sandbox_fd(c, fd, num, sizeof num));
	}
	rc = 0;
out:
	pthread_mutex_unlock(&sandbox_etc_cache.mu);
	free(sig);
	return rc;
}

/*
 * When spur is root the sandbox user cannot reach the session's directories:
 * they sit below the data directory, mode 0700. So the child, still root,
 * stages them (proc_stage: a private mount namespace, each bound onto a tmpfs
 * at SANDBOX_STAGE) and only then drops to the user and runs bwrap, which
 * binds them from there. The host's mount table never changes.
 */

/*
 * Where bwrap reaches a host path (a directory unless any is set: then also a
 * file or a socket, as spec->binds may be): the path itself, or when spur is
 * root, where it is staged. NULL and cause when it is missing.
 */
static const char *
sandbox_reach(struct sandbox_cmd *c, const char *host, int any, char **cause)
{
	struct stat	st;

	errno = 0;
	if (stat(host, &st) != 0 || (!any && !S_ISDIR(st.st_mode))) {
		*cause = xprintf("%s: %s", host, errno != 0 ? strerror(errno) :
		    "not a directory");
		return NULL;
	}
	if (!c->drop)
		return host;
	c->stage_src[c->nstage] = xstrdup(host);
	c->stage_dst[c->nstage] = xprintf(SANDBOX_STAGE "/%zu", c->nstage);
	c->stage_file[c->nstage] = !S_ISDIR(st.st_mode);
	return c->stage_dst[c->nstage++];
}

static int
sandbox_bind_path(struct sandbox_cmd *c, const char *how, const char *host,
    const char *inside, int any, char **cause)
{
	const char	*from;

	if ((from = sandbox_reach(c, host, any, cause)) == NULL)
		return -1;
	sandbox_args(c, how, from, inside);
	return 0;
}

static int
sandbox_name_in(const char *name, const char **list, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (strcmp(name, list[i]) == 0)
			return 1;
	}
	return 0;
}

/*
 * One entry of a rootfs, host path dir/name, at inside/name: a link as the
 * same link, anything else bound read-only from base (where bwrap reaches dir).
 */
static void
sandbox_entry(struct sandbox_cmd *c, const char *dir, const char *base,
    const char *inside, const char *name)
{
	struct stat	 st;
	char		 link[PATH_MAX], *host, *from, *to;
	ssize_t		 n;

	host = xprintf("%s/%s", dir, name);
	from = xprintf("%s/%s", base, name);
	to = xprintf("%s/%s", inside, name);
	if (lstat(host, &st) == 0) {
		if (!S_ISLNK(st.st_mode))
			sandbox_args(c, "--ro-bind", from, to);
		else if ((n = readlink(host, link, sizeof link - 1)) > 0) {
			link[n] = '\0';
			sandbox_args(c, "--symlink", link, to);
		}
	}
	free(host);
	free(from);
	free(to);
}

/*
 * A built root filesystem instead of the host's: its /usr, the top-level links
 * or directories, /var and /etc entry by entry (the root itself stays bwrap's
 * tmpfs, so the workspace, the run's sockets and agent installs get their
 * mount points). Its CA bundle when it has ca-certificates, else the host's.
 */
static int
sandbox_rootfs(struct sandbox_cmd *c, const char *rootfs, char **cause)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	const char	*base, *why = NULL;
	char		*etc, *etcb, *ca, *usr, name[300];
	size_t		 i, n = 0;
	int		 own_ca;

	usr = path_join(rootfs, "usr");
	if (rootfs[0] != '/')
		why = "not an absolute path";
	else if (stat(rootfs, &st) != 0)
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		why = "not a directory";
	else if (stat(usr, &st) != 0 || !S_ISDIR(st.st_mode))
		why = "not a root filesystem (no usr directory)";
	free(usr);
	if (why != NULL) {
		*cause = xprintf("rootfs %s: %s (spur env build makes one)", rootfs, why);
		return -1;
	}
	if ((base = sandbox_reach(c, rootfs, 0, cause)) == NULL)
		return -1;
	for (i = 0; i < SPUR_ARRLEN(sandbox_rootfs_top); i++)
		sandbox_entry(c, rootfs, base, "", sandbox_rootfs_top[i]);

	ca = path_join(rootfs, "etc/ssl/certs/ca-certificates.crt");
	own_ca = stat(ca, &st) == 0 && S_ISREG(st.st_mode);
	free(ca);
	etc = path_join(rootfs, "etc");
	if ((d = opendir(etc)) == NULL) {
		*cause = xprintf("rootfs %s: %s", etc, strerror(errno));
		free(etc);
		return -1;
	}
	etcb = xprintf("%s/etc", base);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    sandbox_name_in(de->d_name, sandbox_rootfs_etc_own,
		    SPUR_ARRLEN(sandbox_rootfs_etc_own)))
			continue;
		snprintf(name, sizeof name, "/etc/%s", de->d_name);
		if (!own_ca && sandbox_name_in(name, sandbox_etc_ca,
		    SPUR_ARRLEN(sandbox_etc_ca)))
			continue;
		if (++n > SANDBOX_ROOTFS_ETC_MAX) {
			*cause = xprintf("rootfs %s: more than %d entries in /etc", rootfs,
			    SANDBOX_ROOTFS_ETC_MAX);
			closedir(d);
			free(etc);
			free(etcb);
			return -1;
		}
		sandbox_entry(c, etc, etcb, "/etc", de->d_name);
	}
	closedir(d);
	free(etc);
	free(etcb);
	if (!own_ca) {
		for (i = 0; i < SPUR_ARRLEN(sandbox_etc_ca); i++)
			sandbox_args(c, "--ro-bind-try", sandbox_etc_ca[i], sandbox_etc_ca[i]);
	}
	return 0;
}

static int
sandbox_bind_dir(struct sandbox_cmd *c, const char *host, const char *inside,
    char **cause)
{
	return sandbox_bind_path(c, "--bind", host, inside, 0, cause);
}

static int
sandbox_inside_path(const char *p)
{
	return p != NULL && p[0] == '/' && p[1] != '\0' && strstr(p, "/..") == NULL &&
	    strstr(p, "//") == NULL;
}

static void
sandbox_cmd_free(struct sandbox_cmd *c)
{
	size_t	i;

	for (i = 0; i < c->nkeep; i++)
		close(c->keep[i]);
	c->nkeep = 0;
	if (c->info_rd != -1)
		close(c->info_rd);
	c->info_rd = -1;
	if (c->argv != NULL) {
		for (i = 0; c->argv[i] != NULL; i++)
			free(c->argv[i]);
		free(c->argv);
	}
	c->argv = NULL;
	for (i = 0; i < c->nstage; i++) {
		free(c->stage_src[i]);
		free(c->stage_dst[i]);
	}
	c->nstage = 0;
	free(c->path);
	c->path = NULL;
	buf_free(&c->args);
}

int
sandbox_ident_get(const char *user, long long uid, struct sandbox_ident *id, char **cause)
{
	struct passwd	*pw;

	id->drop = 0;
	id->uid = getuid();
	id->gid = getgid();
	if (!priv_as_root())
		return 0;
	if (uid > 0) {
		/* No passwd entry is needed: nothing else on the host is this uid. */
		id->drop = 1;
		id->uid = (uid_t)uid;
		id->gid = (gid_t)uid;
		return 0;
	}
	if (user == NULL || *user == '\0') {
		*cause = xstrdup("spur runs as root: sandbox.user must name an "
		    "unprivileged user to run sandboxes as");
		return -1;
	}
	errno = 0;
	if ((pw = getpwnam(user)) == NULL) {
		*cause = xprintf("sandbox user %s does not exist (create it, e.g. "
		    "useradd --system %s)", user, user);
		return -1;
	}
	if (pw->pw_uid == 0 || pw->pw_gid == 0) {
		*cause = xprintf("sandbox user %s is root or in group root", user);
		return -1;
	}
	id->drop = 1;
	id->uid = pw->pw_uid;
	id->gid = pw->pw_gid;
	return 0;
}

/* Who the sandbox runs as: the session's identity, else sandbox.user when spur is root. */
static int
sandbox_user(struct sandbox_cmd *c, const struct sandbox_spec *spec, char **cause)
{
	struct sandbox_ident	id;

	if (spec->ident != NULL)
		id = *spec->ident;
	else if (sandbox_ident_get(spec->user, 0, &id, cause) != 0)
		return -1;
	c->drop = id.drop;
	c->uid = id.uid;
	c->gid = id.gid;
	return 0;
}

/* The size of a sandbox tmpfs: a share of sandbox.memory (4 GiB without one), at least 1 MiB. */
static unsigned long long
sandbox_tmpfs_size(unsigned long long memory, unsigned long long share)
{
	unsigned long long	size = (memory > 0 ? memory : 4ULL << 30) / share;

	return size < (1ULL << 20) ? 1ULL << 20 : size;
}

/* Everything bwrap is told, from namespaces to the environment. */
static int
sandbox_build(struct sandbox_cmd *c, const struct sandbox_spec *spec, char **cause)
{
	char		 num[24], *text;
	char		*const *e;
	const char	*eq;
	size_t		 i, argc;
	int		 fd, info[2];

	memset(c, 0, sizeof *c);
	c->info_rd = -1;
	buf_init(&c->args, SANDBOX_ARGS_MAX);
	if (spec->workspace == NULL || spec->artifacts == NULL || spec->home == NULL) {
		*cause = xstrdup("sandbox needs workspace, artifacts and home directories");
		goto fail;
	}
	if (spec->nbinds > SANDBOX_BINDS_MAX) {
		*cause = xprintf("too many binds (%zu, at most %d)", spec->nbinds,
		    SANDBOX_BINDS_MAX);
		goto fail;
	}
	if (sandbox_user(c, spec, cause) != 0)
		goto fail;

	sandbox_args(c, "--unshare-user", "--unshare-ipc", "--unshare-pid");
	sandbox_args(c, "--unshare-net", "--unshare-uts", "--unshare-cgroup-try");
	sandbox_args(c, "--disable-userns", "--hostname", "spur");
	sandbox_args(c, "--new-session", "--die-with-parent", NULL);
	sandbox_args(c, "--cap-drop", "ALL", NULL);

	if (spec->rootfs != NULL) {
		if (sandbox_rootfs(c, spec->rootfs, cause) != 0)
			goto fail;
	} else {
		sandbox_args(c, "--ro-bind", "/usr", "/usr");
		for (i = 0; i < SPUR_ARRLEN(sandbox_top); i++)
			sandbox_entry(c, "", "", "", sandbox_top[i]);
		if (sandbox_etc_add(c, cause) != 0)
			goto fail;
	}
	text = xprintf("spur:x:%u:%u:spur:" SANDBOX_HOME ":/bin/sh\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	    (unsigned)c->uid, (unsigned)c->gid);
	fd = sandbox_data(c, "/etc/passwd", text, cause);
	free(text);
	if (fd != 0)
		goto fail;
	text = xprintf("spur:x:%u:\nnogroup:x:65534:\n", (unsigned)c->gid);
	fd = sandbox_data(c, "/etc/group", text, cause);
	free(text);
	if (fd != 0)
		goto fail;
	if (sandbox_data(c, "/etc/hosts", "127.0.0.1\tlocalhost spur\n"
	    "::1\tlocalhost\n", cause) != 0)
		goto fail;
	if (sandbox_data(c, "/etc/hostname", "spur\n", cause) != 0)
		goto fail;

	sandbox_args(c, "--proc", "/proc", NULL);
	sandbox_args(c, "--dev", "/dev", NULL);
	/*
	 * Every writable tmpfs has a size, counted against sandbox.memory: a file
	 * in one is memory no process limit sees (the host's shared memory).
	 * /tmp takes half of it, /dev/shm a quarter; bwrap's own /dev is made
	 * read-only below, so nothing else in memory can be written.
	 */
	snprintf(num, sizeof num, "%llu", sandbox_tmpfs_size(spec->memory, 2));
	sandbox_args(c, "--size", num, NULL);
	sandbox_args(c, "--tmpfs", "/tmp", NULL);
	snprintf(num, sizeof num, "%llu", sandbox_tmpfs_size(spec->memory, 4));
	sandbox_args(c, "--size", num, NULL);
	sandbox_args(c, "--tmpfs", "/dev/shm", NULL);
	sandbox_args(c, "--remount-ro", "/dev", NULL);
	if (sandbox_bind_dir(c, spec->workspace, "/workspace", cause) != 0 ||
	    sandbox_bind_dir(c, spec->artifacts, "/artifacts", cause) != 0 ||
	    sandbox_bind_dir(c, spec->home, SANDBOX_HOME, cause) != 0)
		goto fail;
	for (i = 0; i < spec->nbinds; i++) {
		if (spec->binds[i].host == NULL || spec->binds[i].host[0] != '/' ||
		    !sandbox_inside_path(spec->binds[i].inside)) {
			*cause = xprintf("bad bind %zu: paths must be absolute", i);
			goto fail;
		}
		/* Staged like the directories above: the user may not reach them. */
		if (sandbox_bind_path(c, spec->binds[i].rw ? "--bind" : "--ro-bind",
		    spec->binds[i].host, spec->binds[i].inside, 1, cause) != 0)
			goto fail;
	}
	/* Last: the root bwrap built is a tmpfs; nothing but the binds above stays writable. */
	sandbox_args(c, "--remount-ro", "/", NULL);
	sandbox_args(c, "--chdir", "/workspace", NULL);

#ifdef HAVE_SECCOMP
	if ((fd = seccomp_filter_fd(cause)) == -1)
		goto fail;
	sandbox_args(c, "--seccomp", sandbox_fd(c, fd, num, sizeof num), NULL);
#endif
	if (spec->gate_fd > 0) {
		if ((fd = fcntl(spec->gate_fd, F_DUPFD_CLOEXEC, 3)) == -1) {
			*cause = xprintf("gate: %s", strerror(errno));
			goto fail;
		}
		sandbox_args(c, "--block-fd", sandbox_fd(c, fd, num, sizeof num), NULL);
	}
	if (pipe2(info, O_CLOEXEC) != 0) {
		*cause = xprintf("pipe: %s", strerror(errno));
		goto fail;
	}
	c->info_rd = info[0];
	fcntl(info[0], F_SETFL, O_NONBLOCK);
	sandbox_args(c, "--info-fd", sandbox_fd(c, info[1], num, sizeof num), NULL);

	sandbox_arg(c, "--clearenv");
	for (e = spec->env; e != NULL && *e != NULL; e++) {
		if ((eq = strchr(*e, '=')) == NULL || eq == *e) {
			*cause = xstrdup("bad environment entry (expected NAME=VALUE)");
			goto fail;
		}
		sandbox_arg(c, "--setenv");
		(void)buf_add(&c->args, *e, (size_t)(eq - *e));
		(void)buf_addc(&c->args, '\0');
		sandbox_arg(c, eq + 1);
	}
	if (c->args.max != 0 && c->args.len >= c->args.max) {
		*cause = xstrdup("sandbox environment too large");
		goto fail;
	}
	/* Not argv: the environment holds secrets, and argv is readable by anyone. */
	if ((fd = sandbox_memfd("spur-args", c->args.data, c->args.len, cause)) == -1)
		goto fail;

	for (argc = 0; spec->argv[argc] != NULL; argc++)
		;
	c->argv = xcalloc(argc + 5, sizeof *c->argv);
	c->argv[0] = xstrdup("bwrap");
	c->argv[1] = xstrdup("--args");
	c->argv[2] = xstrdup(sandbox_fd(c, fd, num, sizeof num));
	c->argv[3] = xstrdup("--");
	for (i = 0; i < argc; i++)
		c->argv[4 + i] = xstrdup(spec->argv[i]);
	c->path = xstrdup(BWRAP_PATH);
	explicit_bzero(c->args.data, c->args.len);
	return 0;

fail:
	if (c->args.data != NULL)
		explicit_bzero(c->args.data, c->args.len);
	sandbox_cmd_free(c);
	return -1;
}

/* The host pid of the sandbox's pid 1, from what bwrap wrote to --info-fd. */
static pid_t
sandbox_ns_init(struct sandbox *sb)
{
	char		 buf[4096];
	json_t		*j;
	json_error_t	 err;
	ssize_t		 n;

	if (sb->ns_init > 0 || sb->info_fd == -1)
		return sb->ns_init;
	n = read(sb->info_fd, buf, sizeof buf - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((j = json_loads(buf, 0, &err)) != NULL) {
		if (json_is_integer(json_object_get(j, "child-pid")))
			sb->ns_init = (pid_t)json_integer_value(json_object_get(j, "child-pid"));
		json_decref(j);
	}
	return sb->ns_init;
}

int
sandbox_ns_signal(pid_t init, int sig)
{
	struct stat	 ns, st;
	struct dirent	*de;
	DIR		*d;
	char		 path[64];
	pid_t		 pid;
	int		 sent = 0;

	snprintf(path, sizeof path, "/proc/%ld/ns/pid", (long)init);
	if (stat(path, &ns) != 0 || (d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if ((pid = (pid_t)strtol(de->d_name, NULL, 10)) <= 0 || pid == init)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/ns/pid", (long)pid);
		if (stat(path, &st) != 0 || st.st_ino != ns.st_ino ||
		    st.st_dev != ns.st_dev)
			continue;
		if (kill(pid, sig) == 0)
			sent++;
	}
	closedir(d);
	return sent;
}

/*
 * SIGTERM to every process in the sandbox's pid namespace but its pid 1.
 * Signalling bwrap itself would end it at once and SIGKILL everything, so the
 * agent would never get its chance to stop cleanly. Not root, the helper that
 * started it does it.
 */
static void
sandbox_term_cb(struct proc *p, void *arg)
{
	struct sandbox	*sb = arg;
	pid_t		 init;
	int		 sent;

	if ((init = sandbox_ns_init(sb)) <= 0)
		goto fallback;
	if (proc_via_helper(p) && geteuid() != 0)
		sent = priv_signal(proc_pid(p), SIGTERM, init) == 0 ? 1 : -1;
	else
		sent = sandbox_ns_signal(init, SIGTERM);
	if (sent < 0)
		goto fallback;
	log_debug("event=sandbox.term init=%ld signalled=%d", (long)init, sent);
	return;
fallback:
	proc_kill(p, SIGTERM);
}

static void
sandbox_output_cb_(const char *data, size_t len, int fd, void *arg)
{
	struct sandbox	*sb = arg;

	if (sb->output_cb != NULL)
		sb->output_cb(data, len, fd, sb->arg);
}

static void
sandbox_exit_cb_(struct proc *p, const struct proc_exit *pe, void *arg)
{
	struct sandbox	*sb = arg;

	sb->exit.status = pe->status;
	sb->exit.signal = pe->signal;
	sb->exit.timed_out = pe->timed_out;
	sb->exit.output_exceeded = pe->output_exceeded;
	sb->exit.cancelled = pe->cancelled;
	free(sb->exit.cause);
	sb->exit.cause = NULL;
	if (pe->cancelled)
		sb->exit.cause = xstrdup("cancelled");
	else if (pe->timed_out)
		sb->exit.cause = xprintf("timed out after %llds", sb->timeout);
	else if (pe->output_exceeded)
		sb->exit.cause = xprintf("output exceeded %llu bytes", sb->output_max);
	else if (pe->signal != 0)
		sb->exit.cause = xprintf("killed by signal %d", pe->signal);
	else if (pe->status != 0)
		sb->exit.cause = xprintf("exited with status %d", pe->status);
	sb->exit_cb(sb, &sb->exit, sb->arg);
}

struct sandbox *
sandbox_start(struct event_base *base, const struct sandbox_spec *spec,
    sandbox_output_cb output_cb, sandbox_exit_cb exit_cb, void *arg, char **cause)
{
	char			*marker = NULL, *menv[3];
	struct sandbox		*sb;
	struct sandbox_cmd	 c;
	struct proc_spec	 ps;
	const char		*path = NULL;
	char			*const *e;

	if (spec->argv == NULL || spec->argv[0] == NULL) {
		*cause = xstrdup("no command to run");
		return NULL;
	}
	memset(&ps, 0, sizeof ps);
	memset(&c, 0, sizeof c);
	c.info_rd = -1;
	if (spec->backend == SANDBOX_NONE) {
		/* No isolation at all: spur's own user, the workspace, the env, the limits. */
		for (e = spec->env; e != NULL && *e != NULL; e++) {
			if (strncmp(*e, "PATH=", 5) == 0)
				path = *e + 5;
		}
		if ((c.path = proc_which(spec->argv[0], path)) == NULL) {
			*cause = xprintf("%s: command not found", spec->argv[0]);
			return NULL;
		}
		ps.path = c.path;
		ps.argv = spec->argv;
		ps.env = spec->env;
		ps.cwd = spec->workspace;
	} else {
		if (sandbox_build(&c, spec, cause) != 0)
			return NULL;
		ps.path = c.path;
		ps.argv = c.argv;
		ps.keep = c.keep;
		ps.nkeep = c.nkeep;
		ps.drop = c.drop;
		ps.uid = c.uid;
		ps.gid = c.gid;
		ps.term = sandbox_term_cb;
		/* bwrap's own environment names the run, so leftovers can be found (kill_leftovers). */
		marker = xprintf("SPUR_SANDBOX=%s", spec->run_id != NULL ? spec->run_id : "-");
		menv[0] = marker;
		menv[1] = sandbox_engine_mark;
		menv[2] = NULL;
		ps.env = menv;
		ps.stage_src = c.stage_src;
		ps.stage_dst = c.stage_dst;
		ps.stage_file = c.stage_file;
		ps.nstage = c.nstage;
	}
	ps.rlimit_data = spec->memory;
	ps.rlimit_nproc = spec->pids > 0 ? (unsigned long long)spec->pids : 0;
	ps.stdin_data = spec->stdin_data;
	ps.stdin_len = spec->stdin_len;
	ps.stdin_keep = spec->stdin_keep;
	ps.timeout_ms = spec->timeout > 0 ? spec->timeout * 1000 : 0;
	ps.grace_ms = spec->grace_ms;
	ps.output_max = spec->output_max;

	sb = xcalloc(1, sizeof *sb);
	sb->info_fd = c.info_rd;
	c.info_rd = -1;
	sb->timeout = spec->timeout;
	sb->output_max = spec->output_max;
	sb->output_cb = output_cb;
	sb->exit_cb = exit_cb;
	sb->arg = arg;
	sb->proc = proc_start(base, &ps, sandbox_output_cb_, sandbox_exit_cb_, sb, cause);
	free(marker);
	sandbox_cmd_free(&c);
	if (sb->proc == NULL) {
		if (sb->info_fd != -1)
			close(sb->info_fd);
		free(sb);
		return NULL;
	}
	log_info("event=sandbox.started run=%s pid=%ld backend=%s", log_q(spec->run_id ?
	    spec->run_id : "-"), (long)proc_pid(sb->proc),
	    spec->backend == SANDBOX_NONE ? "none" : "bwrap");
	return sb;
}

void
sandbox_cancel(struct sandbox *sb)
{
	proc_cancel(sb->proc);
}

int
sandbox_input(struct sandbox *sb, const char *data, size_t len)
{
	return proc_input(sb->proc, data, len);
}

void
sandbox_input_close(struct sandbox *sb)
{
	proc_input_close(sb->proc);
}

int
sandbox_input_open(const struct sandbox *sb)
{
	return proc_input_open(sb->proc);
}

void
sandbox_free(struct sandbox *sb)
{
	if (sb == NULL)
		return;
	proc_free(sb->proc);
	if (sb->info_fd != -1)
		close(sb->info_fd);
	free(sb->exit.cause);
	free(sb);
}

pid_t
sandbox_pid(const struct sandbox *sb)
{
	return proc_pid(sb->proc);
}

/* Several of them, in one round trip to the helper when it makes them. */
int
sandbox_prepare_dirs_as(const char *const *paths, size_t n, const struct sandbox_ident *id,
    char **cause)
{
	size_t	i;
	int	rc;

	if (id != NULL && id->drop && priv_dirs_path(PRIV_PREPARE_DIR, paths, n, id->uid,
	    id->gid, &rc, cause))
		return rc;
	for (i = 0; i < n; i++) {
		if (sandbox_prepare_dir_as(paths[i], id, cause) != 0)
			return -1;
	}
	return 0;
}

int
sandbox_prepare_dir_as(const char *path, const struct sandbox_ident *id, char **cause)
{
	int	 fd, rc;

	/* The engine left root: a session's directory is the helper's to make. */
	if (id != NULL && id->drop && priv_dir_path(PRIV_PREPARE_DIR, path, id->uid, id->gid,
	    &rc, cause))
		return rc;
	if (mkdir_p(path, 0700) != 0) {
		*cause = xprintf("mkdir %s: %s", path, strerror(errno));
		return -1;
	}
	/* O_NOFOLLOW: never chown what a link left in a reused directory points at. */
	if ((fd = open(path, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1) {
		*cause = xprintf("open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fchmod(fd, 0700) != 0) {
		*cause = xprintf("chmod %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (id != NULL && id->drop && fchown(fd, id->uid, id->gid) != 0) {
		*cause = xprintf("chown %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
sandbox_prepare_dir(const char *path, const char *user, char **cause)
{
	struct sandbox_ident	id;

	if (sandbox_ident_get(user, 0, &id, cause) != 0)
		return -1;
	return sandbox_prepare_dir_as(path, &id, cause);
}

int
sandbox_available(const char *user, char **cause)
{
	static int		 cached = -2;
	static char		*cached_user, *cached_cause;
	struct sandbox_spec	 spec;
	struct sandbox_cmd	 c;
	struct proc_spec	 ps;
	char			*tmpl, *out = NULL;
	char			*ws = NULL, *art = NULL, *home = NULL, *why = NULL;
	char			*argv[] = { "true", NULL };
	int			 status;

	if (cached != -2 && ((user == NULL && cached_user == NULL) ||
	    (user != NULL && cached_user != NULL && strcmp(user, cached_user) == 0)))
		goto done;
	free(cached_user);
	free(cached_cause);
	cached_user = user != NULL ? xstrdup(user) : NULL;
	cached_cause = NULL;
	cached = -1;

	if (access(BWRAP_PATH, X_OK) != 0) {
		cached_cause = xprintf("%s: %s", BWRAP_PATH, strerror(errno));
		goto done;
	}
	/* Not root, the helper makes the directories: where it may, in data_dir/runs. */
	if (priv_client_data_dir() != NULL && geteuid() != 0)
		tmpl = xprintf("%s/runs/check-XXXXXX", priv_client_data_dir());
	else
		tmpl = xstrdup("/tmp/spur-check-XXXXXX");
	if (mkdtemp(tmpl) == NULL) {
		cached_cause = xprintf("mkdtemp: %s", strerror(errno));
		free(tmpl);
		goto done;
	}
	ws = path_join(tmpl, "w");
	art = path_join(tmpl, "a");
	home = path_join(tmpl, "h");
	if (sandbox_prepare_dir(ws, user, &why) != 0 ||
	    sandbox_prepare_dir(art, user, &why) != 0 ||
	    sandbox_prepare_dir(home, user, &why) != 0)
		goto clean;
	memset(&spec, 0, sizeof spec);
	spec.argv = argv;
	spec.env = (char *[]){ "PATH=/usr/bin:/bin", NULL };
	spec.workspace = ws;
	spec.artifacts = art;
	spec.home = home;
	spec.user = user;
	if (sandbox_build(&c, &spec, &why) != 0)
		goto clean;
	memset(&ps, 0, sizeof ps);
	ps.path = c.path;
	ps.argv = c.argv;
	ps.keep = c.keep;
	ps.nkeep = c.nkeep;
	ps.drop = c.drop;
	ps.uid = c.uid;
	ps.gid = c.gid;
	ps.stage_src = c.stage_src;
	ps.stage_dst = c.stage_dst;
	ps.stage_file = c.stage_file;
	ps.nstage = c.nstage;
	ps.timeout_ms = 10000;
	status = proc_run(&ps, 4096, &out, &why);
	sandbox_cmd_free(&c);
	if (status == -1)
		goto clean;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (out != NULL)
			out[strcspn(out, "\n")] = '\0';
		why = xprintf("bwrap failed (status %d): %s", status,
		    out != NULL && *out != '\0' ? out : "no message");
		goto clean;
	}
	cached = 0;
clean:
	if (why != NULL) {
		cached_cause = xprintf("bubblewrap sandbox unavailable%s%s: %s",
		    user != NULL && priv_as_root() ? " as user " : "",
		    user != NULL && priv_as_root() ? user : "", why);
		free(why);
	}
	free(out);
	free(ws);
	free(art);
	free(home);
	rm_rf(tmpl);
	free(tmpl);
done:
	if (cached != 0 && cause != NULL)
		*cause = xstrdup(cached_cause != NULL ? cached_cause : "unknown");
	return cached == 0 ? 0 : -1;
}

/* Whether the process's environment holds one of the entries (each "KEY=value"). */
static int
sandbox_env_has(pid_t pid, const char *const *entries)
{
	char			 path[64], *data, *p, *end;
	const char *const	*e;
	size_t			 len;
	int			 found = 0;

	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	if (read_file(path, 1 << 20, &data, &len, NULL) != 0)
		return 0;
	for (p = data, end = data + len; p < end && !found; p += strlen(p) + 1) {
		for (e = entries; *e != NULL && !found; e++)
			found = strcmp(p, *e) == 0;
	}
	free(data);
	return found;
}

/* Whether a host uid is one sandboxes run as: sandbox.user's, or one of sandbox.uids. */
static int
sandbox_uid_ours(const struct config *cf, uid_t user_uid, uid_t uid)
{
	if (geteuid() != 0)
		return uid == geteuid();
	return uid != 0 && (uid == user_uid || ((long long)uid >= cf->sandbox.uid_first &&
	    (long long)uid <= cf->sandbox.uid_last));
}

/* Kills the processes of the sandbox uids whose environment holds one of entries. */
static int
sandbox_kill_marked(const struct config *cf, uid_t user_uid, const char *const *entries)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 path[64];
	int		 n = 0;
	pid_t		 pid;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if ((pid = (pid_t)atoi(de->d_name)) <= 1 || pid == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%d", (int)pid);
		if (stat(path, &st) != 0 || !sandbox_uid_ours(cf, user_uid, st.st_uid) ||
		    !sandbox_env_has(pid, entries))
			continue;
		if (kill(pid, SIGKILL) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* sandbox.user's uid, or 0 when there is none (then only sandbox.uids count). */
static uid_t
sandbox_user_uid(const struct config *cf)
{
	struct passwd	*pw;

	if (cf->sandbox.user == NULL || (pw = getpwnam(cf->sandbox.user)) == NULL)
		return 0;
	return pw->pw_uid;
}

int
sandbox_kill_leftovers(const struct config *cf, const char *run)
{
	char	*entries[3];
	int	 n;

	if (run == NULL)
		return 0;
	entries[0] = xprintf("SPUR_SANDBOX=%s", run);
	entries[1] = xprintf("SPUR_RUN=%s", run);
	entries[2] = NULL;
	n = sandbox_kill_marked(cf, sandbox_user_uid(cf), (const char *const *)entries);
	free(entries[0]);
	free(entries[1]);
	return n;
}

void
sandbox_reaper_mark(void)
{
	unsigned char	r[8];
	char		id[17];

	if (sandbox_engine_mark != NULL)
		return;
	random_bytes(r, sizeof r);
	hex_encode(r, sizeof r, id);
	sandbox_engine_mark = xprintf("SPUR_ENGINE=%s", id);
}

void
sandbox_reaper_learn(const char *entry)
{
	if (entry == NULL) {
		free(sandbox_engine_mark);
		sandbox_engine_mark = NULL;
	} else if (sandbox_engine_mark == NULL && strncmp(entry, "SPUR_ENGINE=", 12) == 0 &&
	    strlen(entry) == 12 + 16 && strspn(entry + 12, "0123456789abcdef") == 16)
		sandbox_engine_mark = xstrdup(entry);
}

void
sandbox_reaper_sweep(const struct config *cf)
{
	char	*entries[2];
	uid_t	 user_uid = sandbox_user_uid(cf);
	int	 i;

	if (sandbox_engine_mark == NULL)
		return;
	entries[0] = sandbox_engine_mark;
	entries[1] = NULL;
	/* A starting sandbox may still be forking: sweep a few times. */
	for (i = 0; i < 20; i++) {
		sandbox_kill_marked(cf, user_uid, (const char *const *)entries);
		usleep(100 * 1000);
	}
}

/*
 * A process forked at start that outlives a killed engine just long enough to
 * kill what it left: a sandbox caught starting (bwrap's child waiting for a
 * parent that died) is not reached by --die-with-parent. It waits for the end
 * of a pipe whose other end only the engine holds, then sweeps for a while.
 * (With the root helper, the helper does this when the engine is gone.)
 */
int
sandbox_reaper_start(const struct config *cf, char **cause)
{
	char		 c;
	int		 fds[2], i;
	pid_t		 pid;

	sandbox_reaper_mark();
	if (pipe2(fds, O_CLOEXEC) != 0) {
		xasprintf(cause, "pipe: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		xasprintf(cause, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[1]);
		for (i = 3; i < 1024; i++) {
			if (i != fds[0])
				close(i);
		}
		setsid();
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		while (read(fds[0], &c, 1) != 0 && errno == EINTR)
			;
		sandbox_reaper_sweep(cf);
		_exit(0);
	}
	close(fds[0]);
	/* The write end stays open in the engine (close-on-exec) until it dies. */
	return 0;
}
