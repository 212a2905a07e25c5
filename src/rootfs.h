/* rootfs.h: where the root filesystems spur env build makes live, by name, under data_dir/envs. */
#ifndef SPUR_ROOTFS_H
#define SPUR_ROOTFS_H

#define ROOTFS_NAME_MAX	64
#define ROOTFS_DIR	"envs"		/* under data_dir */

/*
 * data_dir/envs/NAME holds root/ (the tree a sandbox gets as its /, spec.rootfs)
 * and env.json (its packages, suite, mirror, size and build time).
 */

/* Whether name may name a root filesystem: [a-z0-9-], at most ROOTFS_NAME_MAX, no leading '-'. */
int	 rootfs_name_valid(const char *);
/* data_dir/envs/NAME/root: what spec.rootfs is for an environment named NAME; caller frees. */
char	*rootfs_path(const char *data_dir, const char *name);
/* 1 when NAME is built (its root has a usr directory), else 0. */
int	 rootfs_built(const char *data_dir, const char *name);
/*
 * Whether the rootfs has the command a sandbox would exec: 1 yes, 0 not its
 * to say (an absolute path outside the system directories, a relative one),
 * -1 no, with cause.
 */
int	 rootfs_command(const char *rootfs, const char *cmd, char **cause);

#endif
