/* rootfs.c: where the root filesystems spur env build makes live, by name, under data_dir/envs. */
#include "spur.h"
#include "rootfs.h"

#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
rootfs_name_valid(const char *s)
{
	size_t	i;

	if (s == NULL || s[0] == '\0' || s[0] == '-' || strlen(s) > ROOTFS_NAME_MAX)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '-'))
			return 0;
	}
	return 1;
}

char *
rootfs_path(const char *data_dir, const char *name)
{
	return xprintf("%s/" ROOTFS_DIR "/%s/root", data_dir, name);
}

int
rootfs_built(const char *data_dir, const char *name)
{
	struct stat	 st;
	char		*usr;
	int		 built;

	if (!rootfs_name_valid(name))
		return 0;
	usr = xprintf("%s/" ROOTFS_DIR "/%s/root/usr", data_dir, name);
	built = stat(usr, &st) == 0 && S_ISDIR(st.st_mode);
	free(usr);
	return built;
}

/*
 * Whether the rootfs has cmd where the sandbox's exec looks: a system path
 * (/usr, /bin, /sbin, /lib...) in its tree, a bare name on the run's PATH
 * there. 1: it has; 0: not the rootfs's to say (another absolute path is
 * bound from the host, a relative one is the workspace's); -1: it has not,
 * with *cause saying so (rather than the sandbox's "exited with failure").
 * A rootfs not built is not its to say either: the sandbox says how to build it.
 */
int
rootfs_command(const char *rootfs, const char *cmd, char **cause)
{
	static const char	*sys[] = { "/usr/", "/bin/", "/sbin/", "/lib" };
	static const char	*path[] = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
				    "/usr/bin", "/sbin", "/bin" };
	struct stat		 st;
	char			*p;
	size_t			 i;
	int			 found = 0, ours = 0;

	/* One not built is the sandbox's to tell (and how to build it). */
	p = xprintf("%s/usr", rootfs);
	found = stat(p, &st) == 0;
	free(p);
	if (!found)
		return 0;
	found = 0;
	if (cmd[0] == '/') {
		for (i = 0; i < SPUR_ARRLEN(sys) && !ours; i++)
			ours = strncmp(cmd, sys[i], strlen(sys[i])) == 0;
		if (!ours)
			return 0;
		p = xprintf("%s%s", rootfs, cmd);
		found = lstat(p, &st) == 0;
		free(p);
	} else if (strchr(cmd, '/') != NULL)
		return 0;
	for (i = 0; cmd[0] != '/' && i < SPUR_ARRLEN(path) && !found; i++) {
		p = xprintf("%s%s/%s", rootfs, path[i], cmd);
		found = lstat(p, &st) == 0;
		free(p);
	}
	if (found)
		return 1;
	*cause = xprintf("%s is not in the rootfs (%s), which replaces the host's /usr: "
	    "install the agent outside /usr (e.g. /opt) or in the rootfs", cmd, rootfs);
	return -1;
}
