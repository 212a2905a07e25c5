/* seccomp.c: the system call filter every sandbox runs under, as BPF for bwrap --seccomp. */
#include "spur.h"
#include "sandbox.h"

#ifdef HAVE_SECCOMP

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <seccomp.h>
#include <string.h>
#include <unistd.h>

/*
 * Calls an agent never needs and an escape usually does: kernel keyrings,
 * debugging other processes, io_uring (a second syscall surface seccomp cannot
 * see into), mounts, BPF, perf, kernel images and modules. All get EPERM, so
 * a tool that probes for them falls back instead of dying.
 */
static const char *seccomp_denied[] = {
	"keyctl", "add_key", "request_key", "ptrace", "process_vm_readv",
	"process_vm_writev", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "mount", "umount2", "move_mount", "open_tree",
	"fsopen", "fsmount", "fsconfig", "fspick", "pivot_root", "bpf",
	"perf_event_open", "kexec_load", "kexec_file_load", "init_module",
	"finit_module", "delete_module", "setns", "userfaultfd", "acct",
	"swapon", "swapoff", "reboot",
};

/*
 * The filter is the same for every sandbox: compiled once (libseccomp's
 * rules to BPF take a millisecond or more, on every start otherwise) and
 * copied into a fresh memfd for each bwrap.
 */
static pthread_mutex_t	 seccomp_mu = PTHREAD_MUTEX_INITIALIZER;
static char		*seccomp_bpf;
static size_t		 seccomp_len;

static int seccomp_build(char **);

int
seccomp_filter_fd(char **cause)
{
	struct stat	 st;
	int		 fd;

	pthread_mutex_lock(&seccomp_mu);
	if (seccomp_bpf == NULL) {
		if ((fd = seccomp_build(cause)) == -1) {
			pthread_mutex_unlock(&seccomp_mu);
			return -1;
		}
		if (fstat(fd, &st) == 0 && st.st_size > 0)
			seccomp_bpf = xmalloc((size_t)st.st_size);
		if (seccomp_bpf == NULL ||
		    pread(fd, seccomp_bpf, (size_t)st.st_size, 0) != st.st_size) {
			free(seccomp_bpf);
			seccomp_bpf = NULL;
			pthread_mutex_unlock(&seccomp_mu);
			return fd;	/* this one still serves */
		}
		seccomp_len = (size_t)st.st_size;
		pthread_mutex_unlock(&seccomp_mu);
		return fd;
	}
	pthread_mutex_unlock(&seccomp_mu);
	if ((fd = memfd_create("spur-seccomp", MFD_CLOEXEC)) == -1 ||
	    write(fd, seccomp_bpf, seccomp_len) != (ssize_t)seccomp_len ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		*cause = xprintf("seccomp filter: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

static int
seccomp_build(char **cause)
{
	scmp_filter_ctx	 ctx;
	size_t		 i;
	int		 sc, fd = -1, r;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		*cause = xstrdup("seccomp_init failed");
		return -1;
	}
	for (i = 0; i < SPUR_ARRLEN(seccomp_denied); i++) {
		/* A name this libseccomp or architecture does not know is not callable anyway. */
		if ((sc = seccomp_syscall_resolve_name(seccomp_denied[i])) == __NR_SCMP_ERROR)
			continue;
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), sc, 0)) != 0)
			goto fail;
	}
	/* Typing into the controlling terminal of someone outside. */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)TIOCSTI))) != 0)
		goto fail;
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)TIOCLINUX))) != 0)
		goto fail;
	/* New user namespaces: where most kernel privilege escalations start. */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))) != 0)
		goto fail;
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))) != 0)
		goto fail;
	/* clone3 hides its flags in memory a filter cannot read: ENOSYS makes libc use clone. */
	if ((sc = seccomp_syscall_resolve_name("clone3")) != __NR_SCMP_ERROR &&
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), sc, 0)) != 0)
		goto fail;

	if ((fd = memfd_create("spur-seccomp", MFD_CLOEXEC)) == -1) {
		*cause = xprintf("memfd_create: %s", strerror(errno));
		seccomp_release(ctx);
		return -1;
	}
	if ((r = seccomp_export_bpf(ctx, fd)) != 0)
		goto fail;
	if (lseek(fd, 0, SEEK_SET) != 0) {
		r = -errno;
		goto fail;
	}
	seccomp_release(ctx);
	return fd;

fail:
	*cause = xprintf("seccomp filter: %s", strerror(-r));
	seccomp_release(ctx);
	if (fd != -1)
		close(fd);
	return -1;
}

#else

int
seccomp_filter_fd(char **cause)
{
	*cause = xstrdup("built without libseccomp");
	return -1;
}

#endif
