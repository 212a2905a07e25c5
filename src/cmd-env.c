/* cmd-env.c: `spur env`: build (mmdebstrap), list and remove the root filesystems runs may use. */
#include "spur.h"
#include "cmd.h"
#include "conf.h"
#include "proc.h"
#include "rootfs.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#define ENV_BUILD_TIMEOUT_MS	(2LL * 3600 * 1000)	/* a build that hangs on the network */
#define ENV_PACKAGES_MAX	256
#define ENV_LIST_MAX		8192	/* bytes of --packages */
#define ENV_ERR_TAIL		2048	/* bytes of mmdebstrap's stderr told again on failure */
#define ENV_META_MAX		(256 * 1024)	/* env.json */
#define ENV_SUITE_DEFAULT	"bookworm"

extern char	**environ;

/* One mmdebstrap child on its own loop; SIGINT or SIGTERM stop it. */
struct env_build {
	struct event_base	*base;
	struct proc		*proc;
	struct proc_exit	 exit;
	char			 tail[ENV_ERR_TAIL + 1];
	size_t			 ntail;
	int			 done;
	int			 interrupted;
};

/* A Debian package name (policy 5.6.1): [a-z0-9][a-z0-9+.-]+. */
static int
env_package_valid(const char *s, size_t len)
{
	size_t	i;

	if (len < 2 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 1; i < len; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '+' || s[i] == '.' || s[i] == '-'))
			return 0;
	}
	return 1;
}

/* --packages a,b,c as a JSON array; NULL and cause when one is not a package name. */
static json_t *
env_packages(const char *list, char **cause)
{
	const char	*p = list, *comma;
	json_t		*a = json_array();
	size_t		 len;

	if (strlen(list) > ENV_LIST_MAX) {
		*cause = xprintf("--packages is longer than %d bytes", ENV_LIST_MAX);
		goto fail;
	}
	while (*p != '\0') {
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (!env_package_valid(p, len)) {
			*cause = xprintf("--packages: \"%.*s\" is not a Debian package name "
			    "(a-z, 0-9, '+', '.', '-'; comma-separated)", (int)len, p);
			goto fail;
		}
		if (json_array_size(a) >= ENV_PACKAGES_MAX) {
			*cause = xprintf("--packages: more than %d packages", ENV_PACKAGES_MAX);
			goto fail;
		}
		json_array_append_new(a, json_stringn(p, len));
		p += len;
		if (*p == ',' && *++p == '\0') {
			*cause = xstrdup("--packages: an empty name after the last comma");
			goto fail;
		}
	}
	if (json_array_size(a) == 0) {
		*cause = xstrdup("--packages names no package");
		goto fail;
	}
	return a;
fail:
	json_decref(a);
	return NULL;
}

static int
env_mirror_valid(const char *s)
{
	size_t	i;

	if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0 &&
	    strncmp(s, "file:///", 8) != 0)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f || i >= 1024)
			return 0;
	}
	return 1;
}

static const char *
env_size(unsigned long long n, char *out, size_t len)
{
	if (n >= 1ULL << 30)
		snprintf(out, len, "%.1f GiB", (double)n / (1ULL << 30));
	else
		snprintf(out, len, "%llu MiB", (n + (1ULL << 19)) >> 20);
	return out;
}

/* data_dir/envs, made when asked; NULL and a message when it cannot be. */
static char *
env_root(const struct config *conf, int make)
{
	char	*dir = path_join(conf->data_dir, ROOTFS_DIR);

	if (make && mkdir_p(dir, 0700) != 0) {
		fprintf(stderr, "spur env: %s: %s\n", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	return dir;
}

/* One build or removal of NAME at a time: -1 (told) when another holds it. */
static int
env_lock(const char *envs, const char *name)
{
	char	*path = xprintf("%s/.%s.lock", envs, name);
	int	 fd;

	if ((fd = open(path, O_RDWR|O_CREAT|O_CLOEXEC|O_NOFOLLOW, 0600)) == -1)
		fprintf(stderr, "spur env: %s: %s\n", path, strerror(errno));
	else if (flock(fd, LOCK_EX|LOCK_NB) != 0) {
		fprintf(stderr, "spur env: another spur env build or rm of %s is running\n",
		    name);
		close(fd);
		fd = -1;
	}
	free(path);
	return fd;
}

static void
env_build_output_cb(const char *data, size_t len, int fd, void *arg)
{
	struct env_build	*b = arg;
	size_t			 keep;

	/* mmdebstrap's progress goes on as it comes. */
	(void)!write(fd == 1 ? 1 : 2, data, len);
	if (fd != 2)
		return;
	if (len >= ENV_ERR_TAIL) {
		memcpy(b->tail, data + len - ENV_ERR_TAIL, ENV_ERR_TAIL);
		b->ntail = ENV_ERR_TAIL;
	} else {
		keep = b->ntail + len > ENV_ERR_TAIL ? ENV_ERR_TAIL - len : b->ntail;
		memmove(b->tail, b->tail + b->ntail - keep, keep);
		memcpy(b->tail + keep, data, len);
		b->ntail = keep + len;
	}
	b->tail[b->ntail] = '\0';
}

static void
env_build_exit_cb(struct proc *p, const struct proc_exit *pe, void *arg)
{
	struct env_build	*b = arg;

	b->exit = *pe;
	b->done = 1;
	proc_free(p);
	b->proc = NULL;
}

static void
env_build_signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct env_build	*b = arg;

	(void)sig;
	(void)ev;
	b->interrupted = 1;
	if (b->proc != NULL)
		proc_cancel(b->proc);
}

/* The lines of mmdebstrap's last output that say what went wrong ("E: ..."), else its tail. */
static const char *
env_build_error(const struct env_build *b)
{
	const char	*e = strstr(b->tail, "E: ");

	return e != NULL ? e : b->tail;
}

/* Runs mmdebstrap into dir; 0 when it built, else -1 and told why. */
static int
env_mmdebstrap(const char *dir, const char *packages, const char *suite,
    const char *mirror)
{
	struct env_build	 b;
	struct proc_spec	 ps;
	struct event		*sigint, *sigterm;
	char			*argv[7], *include, *path, *cause = NULL;
	size_t			 n = 0;
	int			 rc = -1;

	if ((path = proc_which("mmdebstrap", getenv("PATH"))) == NULL) {
		fprintf(stderr, "spur env build: mmdebstrap not found in PATH (install "
		    "Debian's mmdebstrap package)\n");
		return -1;
	}
	include = xprintf("--include=%s", packages);
	argv[n++] = "mmdebstrap";
	argv[n++] = "--variant=minbase";
	argv[n++] = include;
	argv[n++] = (char *)suite;
	argv[n++] = (char *)dir;
	if (mirror != NULL)
		argv[n++] = (char *)mirror;
	argv[n] = NULL;
	fprintf(stderr, "spur env build: mmdebstrap --variant=minbase %s %s %s%s%s\n",
	    include, suite, dir, mirror != NULL ? " " : "", mirror != NULL ? mirror : "");

	memset(&b, 0, sizeof b);
	memset(&ps, 0, sizeof ps);
	ps.path = path;
	ps.argv = argv;
	ps.env = environ;	/* the operator's own: apt's proxy settings, TMPDIR */
	ps.timeout_ms = ENV_BUILD_TIMEOUT_MS;
	b.base = event_base_new();
	sigint = evsignal_new(b.base, SIGINT, env_build_signal_cb, &b);
	sigterm = evsignal_new(b.base, SIGTERM, env_build_signal_cb, &b);
	evsignal_add(sigint, NULL);
	evsignal_add(sigterm, NULL);
	if ((b.proc = proc_start(b.base, &ps, env_build_output_cb, env_build_exit_cb, &b,
	    &cause)) == NULL) {
		fprintf(stderr, "spur env build: mmdebstrap: %s\n", cause);
		free(cause);
		goto out;
	}
	while (!b.done)
		event_base_loop(b.base, EVLOOP_ONCE);
	if (b.interrupted)
		fprintf(stderr, "spur env build: interrupted\n");
	else if (b.exit.timed_out)
		fprintf(stderr, "spur env build: mmdebstrap took longer than %lld minutes\n",
		    ENV_BUILD_TIMEOUT_MS / 60000);
	else if (b.exit.signal != 0 || b.exit.status != 0)
		fprintf(stderr, "spur env build: mmdebstrap failed (%s %d): %s%s",
		    b.exit.signal != 0 ? "signal" : "exit status", b.exit.signal != 0 ?
		    b.exit.signal : b.exit.status, env_build_error(&b),
		    b.ntail > 0 && b.tail[b.ntail - 1] == '\n' ? "" : "\n");
	else
		rc = 0;
out:
	event_free(sigint);
	event_free(sigterm);
	event_base_free(b.base);
	free(include);
	free(path);
	return rc;
}

/*
 * In place of the old build, atomically: renamed in, or exchanged with it. The
 * old tree is kept as .NAME.prev until the next build, so a run already in it
 * goes on.
 */
static int
env_install(const char *envs, const char *name, const char *tmp)
{
	struct stat	 st;
	char		*dir = path_join(envs, name), *prev;
	int		 rc = -1;

	prev = xprintf("%s/.%s.prev", envs, name);
	if (lstat(dir, &st) != 0) {
		if (rename(tmp, dir) != 0)
			goto fail;
	} else {
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) != 0)
			goto fail;
		(void)rm_rf(prev);
		if (rename(tmp, prev) != 0)
			(void)rm_rf(tmp);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "spur env build: %s: %s\n", dir, strerror(errno));
out:
	free(dir);
	free(prev);
	return rc;
}

/* Builds NAME from packages (list: the same as JSON, taken). */
static int
env_build(const struct config *conf, const char *name, const char *packages,
    json_t *list, const char *suite, const char *mirror)
{
	json_t		*meta = NULL;
	char		*envs, *tmp = NULL, *root = NULL, *metap = NULL;
	char		 size[32], when[40];
	unsigned long long bytes = 0;
	int64_t		 start = now_ms();
	int		 lock = -1, rc = EXIT_FAILED;

	if ((envs = env_root(conf, 1)) == NULL || (lock = env_lock(envs, name)) == -1)
		goto out;
	tmp = xprintf("%s/.%s.build", envs, name);
	root = path_join(tmp, "root");
	/* A build that was killed left its tree: this one starts clean. */
	(void)rm_rf(tmp);
	if (mkdir(tmp, 0755) != 0) {
		fprintf(stderr, "spur env build: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (env_mmdebstrap(root, packages, suite, mirror) != 0)
		goto out;
	if (safefs_du(root, &bytes) != 0)
		bytes = 0;
	meta = json_pack("{s:s,s:O,s:s,s:s?,s:I,s:s}", "name", name, "packages", list,
	    "suite", suite, "mirror", mirror, "size", (json_int_t)bytes, "built",
	    format_time(now_ms(), when, sizeof when));
	metap = path_join(tmp, "env.json");
	if (json_dump_file(meta, metap, JSON_INDENT(2)) != 0) {
		fprintf(stderr, "spur env build: %s: cannot write\n", metap);
		goto out;
	}
	if (env_install(envs, name, tmp) != 0)
		goto out;
	free(root);
	root = rootfs_path(conf->data_dir, name);
	printf("built %s: %s, %zu packages asked, %s, in %llds\n", name,
	    env_size(bytes, size, sizeof size), json_array_size(list), root,
	    (long long)((now_ms() - start + 500) / 1000));
	rc = EXIT_OK;
out:
	if (rc != EXIT_OK && tmp != NULL)
		(void)rm_rf(tmp);
	if (lock != -1)
		close(lock);
	json_decref(list);
	json_decref(meta);
	free(envs);
	free(tmp);
	free(root);
	free(metap);
	return rc;
}

static int
env_name_filter(const struct dirent *de)
{
	return rootfs_name_valid(de->d_name);
}

/* Each built environment: its env.json, with its name and root. */
static json_t *
env_list_json(const struct config *conf)
{
	struct dirent	**des;
	json_t		 *list = json_array(), *j;
	json_error_t	  err;
	char		 *envs, *p;
	int		  n, i;

	envs = path_join(conf->data_dir, ROOTFS_DIR);
	if ((n = scandir(envs, &des, env_name_filter, alphasort)) < 0)
		n = 0;
	for (i = 0; i < n; i++) {
		if (rootfs_built(conf->data_dir, des[i]->d_name)) {
			p = xprintf("%s/%s/env.json", envs, des[i]->d_name);
			if ((j = json_load_file(p, 0, &err)) == NULL || !json_is_object(j)) {
				json_decref(j);
				j = json_object();
			}
			free(p);
			json_object_set_new(j, "name", json_string(des[i]->d_name));
			p = rootfs_path(conf->data_dir, des[i]->d_name);
			json_object_set_new(j, "root", json_string(p));
			free(p);
			json_array_append_new(list, j);
		}
		free(des[i]);
	}
	if (n > 0)
		free(des);
	free(envs);
	return list;
}

static int
env_list(const struct config *conf, int json)
{
	json_t		*list = env_list_json(conf), *j, *pk;
	char		 size[32], *pkgs, *next;
	size_t		 i, k;

	if (json)
		cmd_print_json(list);
	else if (json_array_size(list) == 0)
		printf("no environments (spur env build NAME --packages LIST makes one)\n");
	else {
		term_json(list, 0);
		printf("%-20s %-10s %-24s %-10s %s\n", "NAME", "SIZE", "BUILT", "SUITE",
		    "PACKAGES");
		json_array_foreach(list, i, j) {
			pkgs = xstrdup("");
			json_array_foreach(json_object_get(j, "packages"), k, pk) {
				next = xprintf("%s%s%s", pkgs, k > 0 ? "," : "",
				    json_string_value(pk) != NULL ? json_string_value(pk) : "");
				free(pkgs);
				pkgs = next;
			}
			printf("%-20s %-10s %-24s %-10s %s\n",
			    json_string_value(json_object_get(j, "name")),
			    json_is_integer(json_object_get(j, "size")) ? env_size(
			    (unsigned long long)json_integer_value(json_object_get(j, "size")),
			    size, sizeof size) : "-",
			    json_string_value(json_object_get(j, "built")) != NULL ?
			    json_string_value(json_object_get(j, "built")) : "-",
			    json_string_value(json_object_get(j, "suite")) != NULL ?
			    json_string_value(json_object_get(j, "suite")) : "-", pkgs);
			free(pkgs);
		}
	}
	json_decref(list);
	return EXIT_OK;
}

static int
env_rm(const struct config *conf, const char *name)
{
	struct stat	 st;
	char		*envs, *dir = NULL, *prev = NULL;
	int		 lock = -1, rc = EXIT_FAILED;

	if ((envs = env_root(conf, 0)) == NULL)
		return EXIT_FAILED;
	dir = path_join(envs, name);
	prev = xprintf("%s/.%s.prev", envs, name);
	if (lstat(dir, &st) != 0) {
		fprintf(stderr, "spur env rm: no environment %s\n", name);
		goto out;
	}
	if ((lock = env_lock(envs, name)) == -1)
		goto out;
	if (rm_rf(dir) != 0 || rm_rf(prev) != 0) {
		fprintf(stderr, "spur env rm: %s: %s\n", dir, strerror(errno));
		goto out;
	}
	printf("removed %s\n", name);
	rc = EXIT_OK;
out:
	if (lock != -1)
		close(lock);
	free(envs);
	free(dir);
	free(prev);
	return rc;
}

int
cmd_env(const struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "packages", required_argument, NULL, 'p' },
		{ "suite", required_argument, NULL, 's' },
		{ "mirror", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct config	*conf = NULL;
	const char	*path = NULL, *packages = NULL, *suite = NULL;
	const char	*mirror = NULL, *sub, *name = NULL;
	json_t		*list = NULL;
	char		*cause = NULL;
	int		 ch, json = 0, rc;

	while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'p':
			packages = optarg;
			break;
		case 's':
			suite = optarg;
			break;
		case 'm':
			mirror = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			cmd_usage(c, 0);
			return EXIT_OK;
		default:
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	}
	if (optind == argc) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	sub = argv[optind++];
	if (strcmp(sub, "build") != 0 && strcmp(sub, "list") != 0 &&
	    strcmp(sub, "rm") != 0) {
		fprintf(stderr, "spur env: unknown subcommand \"%s\" (build, list, rm)\n", sub);
		return EXIT_USAGE;
	}
	if (strcmp(sub, "list") == 0 ? optind != argc || packages != NULL :
	    optind + 1 != argc || json) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if (strcmp(sub, "list") != 0 && !rootfs_name_valid(name = argv[optind])) {
		fprintf(stderr, "spur env %s: \"%s\" is not an environment name (a-z, 0-9 "
		    "and '-', at most %d, not starting with '-')\n", sub, name,
		    ROOTFS_NAME_MAX);
		return EXIT_USAGE;
	}
	if (strcmp(sub, "build") == 0) {
		if (packages == NULL) {
			fprintf(stderr, "spur env build: --packages LIST is required "
			    "(e.g. --packages nodejs,npm)\n");
			return EXIT_USAGE;
		}
		if ((list = env_packages(packages, &cause)) == NULL) {
			fprintf(stderr, "spur env build: %s\n", cause);
			free(cause);
			return EXIT_USAGE;
		}
		if (suite == NULL)
			suite = ENV_SUITE_DEFAULT;
		/* A suite's name is of the same shape as an environment's. */
		if (!rootfs_name_valid(suite)) {
			fprintf(stderr, "spur env build: \"%s\" is not a suite name "
			    "(e.g. bookworm)\n", suite);
			json_decref(list);
			return EXIT_USAGE;
		}
		if (mirror != NULL && !env_mirror_valid(mirror)) {
			fprintf(stderr, "spur env build: --mirror must be an http://, "
			    "https:// or file:/// URL\n");
			json_decref(list);
			return EXIT_USAGE;
		}
	} else if (packages != NULL || mirror != NULL || suite != NULL) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	/* Only data_dir is needed: no secret. */
	if (cmd_load(path != NULL ? path : config_default_path(), CONFIG_UNRESOLVED, &conf,
	    NULL) != 0) {
		json_decref(list);
		return EXIT_FAILED;
	}
	if (strcmp(sub, "build") == 0)
		rc = env_build(conf, name, packages, list, suite, mirror);
	else if (strcmp(sub, "list") == 0)
		rc = env_list(conf, json);
	else
		rc = env_rm(conf, name);
	config_free(conf);
	return rc;
}
