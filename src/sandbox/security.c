/* security.c - what the sandbox's root may still do: capabilities,
 * no_new_privs and the seccomp filter (docs/security.md explains each rule).
 *
 * Order matters and is the one every careful runtime uses: capabilities are
 * dropped (bounding set first, so no exec can regain them), then
 * no_new_privs, then seccomp last - the filter also forbids the calls the
 * earlier steps need, and installing it without CAP_SYS_ADMIN requires
 * no_new_privs. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Capabilities root keeps inside its own user namespace: enough to own files,
 * switch users and bind low ports (what package managers and test suites
 * need); not enough to mount, trace, configure the network or load code into
 * the kernel. They only ever apply to objects the user namespace owns. */
static const int kept_caps[] = {
    CAP_CHOWN,	 CAP_DAC_OVERRIDE,     CAP_FOWNER,     CAP_FSETID,
    CAP_KILL,	 CAP_SETGID,	       CAP_SETUID,     CAP_SETPCAP,
    CAP_SETFCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
};

static bool cap_kept(int cap)
{
	for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++) {
		if (kept_caps[i] == cap)
			return true;
	}
	return false;
}

static int last_cap(void)
{
	int last = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &last) != 1)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	return last;
}

static int drop_capabilities(struct child_report *report)
{
	int last = last_cap();
	for (int cap = 0; cap <= last; cap++) {
		if (cap_kept(cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL) {
			snprintf(report->step, sizeof(report->step),
				 "drop capability %d from the bounding set",
				 cap);
			return -(report->err = errno);
		}
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++) {
		int cap = kept_caps[i];
		data[cap / 32].effective |= 1u << (cap % 32);
		data[cap / 32].permitted |= 1u << (cap % 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(report->step, sizeof(report->step), "capset");
		return -(report->err = errno);
	}
	return 0;
}

/* System calls a coding sandbox never needs, refused with EPERM. */
static const char *const denied_syscalls[] = {
    /* loading code into the kernel, replacing it */
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    /* kernel attack surface with a long CVE history */
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* filesystem topology: the sandbox's mounts are final */
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* file handles bypass path checks (the "shocker" escape) */
    "open_by_handle_at",
    "name_to_handle_at",
    /* the machine, not the sandbox */
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "iopl",
    "ioperm",
    "vhangup",
    "uselib",
    "nfsservctl",
    "lookup_dcookie",
    "fanotify_init",
    /* joining other namespaces */
    "setns",
};

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
		    unsigned n_args, const struct scmp_arg_cmp *args)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0; /* not on this architecture */
	return seccomp_rule_add_array(ctx, action, nr, n_args, args);
}

static scmp_filter_ctx build_filter(bool allow_userns)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return NULL;
	int r = 0;
	/* foreign-ABI calls (int 0x80, x32) would bypass every rule below */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
			     SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP,
				     0); /* set already */
	/* a binary tree of syscall numbers: fewer instructions per syscall,
	 * which is also what the kernel walks for each syscall number when it
	 * builds its action cache at load time */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(denied_syscalls); i++)
		r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), denied_syscalls[i], 0,
			     NULL);
	/* TIOCSTI/TIOCLINUX push input into a terminal we may share with
	 * the caller (CVE-2017-5226). ioctl's command is an int: compare the
	 * low 32 bits so high garbage bits cannot dodge the rule. */
	struct scmp_arg_cmp tiocsti =
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
	struct scmp_arg_cmp tioclinux =
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX);
	if (r == 0)
		r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &tiocsti);
	if (r == 0)
		r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1,
			     &tioclinux);
	if (!allow_userns) {
		/* unprivileged user namespaces give back every capability
		 * (over a nested namespace): a large kernel surface */
		struct scmp_arg_cmp newuser =
		    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
		if (r == 0)
			r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1,
				     &newuser);
		if (r == 0)
			r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", 1,
				     &newuser);
		/* clone3 passes flags in memory a filter cannot read: ENOSYS
		 * makes libc fall back to clone(2), which is checked */
		if (r == 0)
			r = add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0,
				     NULL);
	}
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/* FNV-1a over everything the compiled program depends on. */
static uint64_t filter_key(bool allow_userns)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char buf[256];
	const struct scmp_version *v = seccomp_version();
	snprintf(buf, sizeof(buf), "v4 %u.%u.%u %d %u", v ? v->major : 0,
		 v ? v->minor : 0, v ? v->micro : 0, allow_userns,
		 seccomp_arch_native());
	for (const char *p = buf; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(denied_syscalls); i++) {
		for (const char *p = denied_syscalls[i]; *p; p++) {
			h ^= (unsigned char)*p;
			h *= 0x100000001b3ULL;
		}
		h ^= ',';
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int read_program(const char *path, struct seccomp_program *out)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = wr_read_file(path, BPF_MAXINSNS * sizeof(struct sock_filter),
			     &data, &len);
	if (r < 0)
		return r;
	if (len == 0 || len % sizeof(struct sock_filter))
		return -EBADMSG;
	out->prog.len = (unsigned short)(len / sizeof(struct sock_filter));
	out->prog.filter = (struct sock_filter *)TAKE_PTR(data);
	return 0;
}

/* libseccomp compiles the filter; the program is cached in the runtime
 * directory (root only) so later sandboxes skip the compile. The child
 * installs it with one prctl. */
int seccomp_prepare(bool allow_userns, struct seccomp_program *out)
{
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *dir = runtime_path("seccomp");
	_cleanup_free_ char *path =
	    runtime_path("seccomp/%016llx.bpf",
			 (unsigned long long)filter_key(allow_userns));
	if (!dir || !path)
		return -ENOMEM;
	if (read_program(path, out) == 0)
		return 0;
	scmp_filter_ctx ctx = build_filter(allow_userns);
	if (!ctx)
		return -EINVAL;
	mkdir(dir, 0700);
	_cleanup_free_ char *tmp = wr_asprintf("%s.%d", path, (int)getpid());
	int r = -ENOMEM;
	if (tmp) {
		int fd =
		    open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
		if (fd >= 0)
			close(fd);
		if (r == 0 && rename(tmp, path) < 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	seccomp_release(ctx);
	if (r < 0)
		return r;
	return read_program(path, out);
}

void seccomp_program_clear(struct seccomp_program *p)
{
	free(p->prog.filter);
	p->prog.filter = NULL;
	p->prog.len = 0;
}

int security_apply(const struct sandbox_config *cfg,
		   const struct seccomp_program *program,
		   struct child_report *report)
{
	int r = drop_capabilities(report);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(report->step, sizeof(report->step),
			 "set no_new_privs");
		return -(report->err = errno);
	}
	if (cfg->no_seccomp)
		return 0;
	/* the program was compiled (or read from the cache) by the parent */
	r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program->prog) < 0
		? -errno
		: 0;
	if (r < 0) {
		snprintf(report->step, sizeof(report->step),
			 "install seccomp filter");
		report->err = -r;
		return r;
	}
	return 0;
}
