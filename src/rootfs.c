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
